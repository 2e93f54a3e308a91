/* test_reduce.c: reductions, scans and softmax (values, dtypes, shapes,
 * errors, gradients). Expected values are worked out by hand here; the parity
 * tests (tests/parity/test_reduce.py) compare with PyTorch. */
#include "harness.h"
#include <stdlib.h>

static ct_tensor *arange_f(int64_t n, const int64_t *shape, int ndim) {
    ct_tensor *a = ct_arange(0, (double)n, 1, CT_FLOAT32);
    return ct_reshape(a, shape, ndim);
}
static double at(const ct_tensor *t, int64_t i) {
    double buf[4096];
    if (ct_numel(t) > 4096 || ct_copy_to_buffer(t, buf, CT_FLOAT64) < 0) return NAN;
    return buf[i];
}

TEST(sum_basic) {
    ct_tensor *a = arange_f(6, CT_SHAPE(2, 3));
    ct_tensor *s = ct_sum(a);
    CHECK(s && ct_ndim(s) == 0);
    CHECK_NEAR(ct_item(s), 15, 0);
    ct_tensor *s0 = ct_sum_dims(a, CT_DIMS(0), false);
    CHECK_EQ_INT(ct_ndim(s0), 1);
    CHECK_EQ_INT(ct_size(s0, 0), 3);
    CHECK_NEAR(at(s0, 0), 3, 0);
    CHECK_NEAR(at(s0, 2), 7, 0);
    ct_tensor *s1 = ct_sum_dims(a, CT_DIMS(-1), true);
    CHECK_EQ_INT(ct_ndim(s1), 2);
    CHECK_EQ_INT(ct_size(s1, 1), 1);
    CHECK_NEAR(at(s1, 0), 3, 0);
    CHECK_NEAR(at(s1, 1), 12, 0);
    ct_tensor *t = ct_t(a); /* non-contiguous */
    ct_tensor *st = ct_sum_dims(t, CT_DIMS(0), false);
    CHECK_NEAR(at(st, 0), 3, 0);
    CHECK_NEAR(at(st, 1), 12, 0);
}

TEST(sum_dtypes) {
    ct_tensor *i = ct_arange(0, 5, 1, CT_INT32);
    ct_tensor *s = ct_sum(i);
    CHECK_EQ_INT(ct_dtype_of(s), CT_INT64);
    CHECK_NEAR(ct_item(s), 10, 0);
    ct_tensor *b = ct_ones(CT_SHAPE(4), CT_BOOL);
    CHECK_EQ_INT(ct_dtype_of(ct_sum(b)), CT_INT64);
    CHECK_NEAR(ct_item(ct_sum(b)), 4, 0);
    ct_tensor *h = ct_ones(CT_SHAPE(3000), CT_FLOAT16);
    ct_tensor *hs = ct_sum(h);
    CHECK_EQ_INT(ct_dtype_of(hs), CT_FLOAT16);
    CHECK_NEAR(ct_item(hs), 3000, 0);
    CHECK_ERR(ct_mean(i), "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Int");
    CHECK_EQ_INT(ct_dtype_of(ct_prod(i)), CT_INT64);
    CHECK_NEAR(ct_item(ct_prod(ct_arange(1, 6, 1, CT_INT64))), 120, 0);
}

TEST(sum_large) {
    /* 16M ones plus a ramp: exact in double accumulation */
    int64_t n = 1 << 24;
    ct_tensor *a = ct_full(CT_SHAPE(n), 0.5, CT_FLOAT32);
    CHECK_NEAR(ct_item(ct_sum(a)), (double)n * 0.5, 1e-7);
    ct_tensor *m = ct_reshape(a, CT_SHAPE(4096, 4096));
    ct_tensor *r0 = ct_sum_dims(m, CT_DIMS(0), false);
    ct_tensor *r1 = ct_sum_dims(m, CT_DIMS(1), false);
    CHECK_NEAR(at(r0, 17), 2048, 1e-7);
    CHECK_NEAR(at(r1, 4095), 2048, 1e-7);
    CHECK_NEAR(ct_item(ct_mean(a)), 0.5, 1e-7);
}

TEST(empty_and_scalar) {
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 3), CT_FLOAT32);
    CHECK_NEAR(ct_item(ct_sum(e)), 0, 0);
    CHECK_NEAR(ct_item(ct_prod(e)), 1, 0);
    ct_tensor *s0 = ct_sum_dims(e, CT_DIMS(0), false);
    CHECK_EQ_INT(ct_numel(s0), 3);
    CHECK(isnan(ct_item(ct_mean(e))));
    CHECK_ERR(ct_max(e), "max(): Expected reduction dim to be specified for input.numel() == 0.");
    CHECK_ERR(ct_amax(e, CT_DIMS(0), false), "amax(): Expected reduction dim 0 to have non-zero size.");
    ct_tensor *v = NULL, *ix = NULL;
    CHECK_ERR_INT(ct_max_dim(e, 0, false, &v, &ix), "max(): Expected reduction dim 0 to have non-zero size.");
    CHECK_EQ_INT(ct_max_dim(e, 1, false, &v, &ix), 0);
    CHECK_EQ_INT(ct_numel(v), 0);
    ct_tensor *sc = ct_scalar(5);
    CHECK_NEAR(ct_item(ct_sum_dims(sc, CT_DIMS(0), false)), 5, 0);
    CHECK_ERR(ct_sum_dims(sc, CT_DIMS(1), false), "Dimension out of range");
    CHECK_NEAR(ct_item(ct_softmax(sc, 0)), 1, 0);
}

TEST(dim_errors) {
    ct_tensor *a = arange_f(6, CT_SHAPE(2, 3));
    CHECK_ERR(ct_sum_dims(a, CT_DIMS(5), false), "Dimension out of range (expected to be in range of [-2, 1], but got 5)");
    CHECK_ERR(ct_sum_dims(a, CT_DIMS(0, -2), false), "dim 0 appears multiple times in the list of dims");
    CHECK_ERR(ct_var(ct_arange(0, 3, 1, CT_INT64), NULL, 0, 1, false), "std and var only support floating point and complex dtypes");
    CHECK_ERR(ct_argmax(ct_ones(CT_SHAPE(2), CT_BOOL), false, 0, false), "\"argmax_cpu\" not implemented for 'Bool'");
    CHECK(ct_sum(NULL) == NULL);
}

TEST(max_min) {
    float d[] = {1, 5, 3, 5, -2, 0};
    ct_tensor *a = ct_from_data(d, CT_SHAPE(2, 3), CT_FLOAT32);
    CHECK_NEAR(ct_item(ct_max(a)), 5, 0);
    CHECK_NEAR(ct_item(ct_min(a)), -2, 0);
    ct_tensor *v, *ix;
    CHECK_EQ_INT(ct_max_dim(a, 1, false, &v, &ix), 0);
    CHECK_NEAR(at(v, 0), 5, 0);
    CHECK_NEAR(at(v, 1), 5, 0);
    CHECK_NEAR(at(ix, 0), 1, 0);
    CHECK_NEAR(at(ix, 1), 0, 0);
    CHECK_EQ_INT(ct_dtype_of(ix), CT_INT64);
    CHECK_EQ_INT(ct_min_dim(a, 0, true, &v, &ix), 0);
    CHECK_EQ_INT(ct_ndim(v), 2);
    CHECK_NEAR(at(v, 1), -2, 0);
    CHECK_NEAR(at(ix, 1), 1, 0);
    CHECK_NEAR(ct_item(ct_argmax(a, false, 0, false)), 1, 0);
    CHECK_NEAR(ct_item(ct_argmin(a, false, 0, false)), 4, 0);
    ct_tensor *am = ct_amax(a, CT_DIMS(0), false);
    CHECK_NEAR(at(am, 0), 5, 0);
    CHECK_NEAR(at(am, 2), 3, 0);
    float n[] = {1, NAN, 3};
    ct_tensor *na = ct_from_data(n, CT_SHAPE(3), CT_FLOAT32);
    CHECK(isnan(ct_item(ct_max(na))));
    CHECK_NEAR(ct_item(ct_argmax(na, false, 0, false)), 1, 0);
}

TEST(var_std_norm_lse) {
    float d[] = {1, 2, 3, 4};
    ct_tensor *a = ct_from_data(d, CT_SHAPE(4), CT_FLOAT32);
    CHECK_NEAR(ct_item(ct_var(a, NULL, 0, 1, false)), 5.0 / 3, 1e-6);
    CHECK_NEAR(ct_item(ct_var(a, NULL, 0, 0, false)), 1.25, 1e-6);
    CHECK_NEAR(ct_item(ct_std(a, NULL, 0, 1, false)), sqrt(5.0 / 3), 1e-6);
    CHECK_NEAR(ct_item(ct_norm(a, 2, NULL, 0, false)), sqrt(30.0), 1e-6);
    CHECK_NEAR(ct_item(ct_norm(a, 1, NULL, 0, false)), 10, 1e-6);
    CHECK_NEAR(ct_item(ct_norm(a, INFINITY, NULL, 0, false)), 4, 1e-6);
    CHECK_NEAR(ct_item(ct_norm(a, 3, NULL, 0, false)), pow(100, 1.0 / 3), 1e-6);
    CHECK_NEAR(ct_item(ct_logsumexp(a, CT_DIMS(0), false)), log(exp(1) + exp(2) + exp(3) + exp(4)), 1e-6);
    float inf[] = {-INFINITY, -INFINITY};
    CHECK(isinf(ct_item(ct_logsumexp(ct_from_data(inf, CT_SHAPE(2), CT_FLOAT32), CT_DIMS(0), false))));
}

TEST(all_any) {
    float d[] = {1, 0, 2, 3};
    ct_tensor *a = ct_from_data(d, CT_SHAPE(2, 2), CT_FLOAT32);
    ct_tensor *al = ct_all(a);
    CHECK_EQ_INT(ct_dtype_of(al), CT_BOOL);
    CHECK_NEAR(ct_item(al), 0, 0);
    CHECK_NEAR(ct_item(ct_any(a)), 1, 0);
    ct_tensor *r = ct_all_dims(a, CT_DIMS(1), false);
    CHECK_NEAR(at(r, 0), 0, 0);
    CHECK_NEAR(at(r, 1), 1, 0);
    CHECK_EQ_INT(ct_dtype_of(ct_all(ct_ones(CT_SHAPE(2), CT_UINT8))), CT_UINT8);
}

TEST(scans) {
    ct_tensor *a = arange_f(6, CT_SHAPE(2, 3));
    ct_tensor *c = ct_cumsum(a, 1);
    CHECK_NEAR(at(c, 2), 3, 0);
    CHECK_NEAR(at(c, 5), 12, 0);
    ct_tensor *c0 = ct_cumsum(a, 0);
    CHECK_NEAR(at(c0, 4), 5, 0);
    ct_tensor *p = ct_cumprod(ct_add_scalar(a, 1), 1);
    CHECK_NEAR(at(p, 2), 6, 0);
    CHECK_NEAR(at(p, 5), 120, 0);
    CHECK_EQ_INT(ct_dtype_of(ct_cumsum(ct_ones(CT_SHAPE(3), CT_BOOL), 0)), CT_INT64);
}

TEST(softmax_values) {
    float d[] = {1, 2, 3, 1, 1, 1};
    ct_tensor *a = ct_from_data(d, CT_SHAPE(2, 3), CT_FLOAT32);
    ct_tensor *s = ct_softmax(a, 1);
    double z = exp(1) + exp(2) + exp(3);
    CHECK_NEAR(at(s, 0), exp(1) / z, 1e-6);
    CHECK_NEAR(at(s, 2), exp(3) / z, 1e-6);
    CHECK_NEAR(at(s, 4), 1.0 / 3, 1e-6);
    ct_tensor *l = ct_log_softmax(a, -1);
    CHECK_NEAR(at(l, 0), 1 - log(z), 1e-6);
    ct_tensor *s0 = ct_softmax(a, 0);
    CHECK_NEAR(at(s0, 0), 0.5, 1e-6);
    CHECK_NEAR(at(s0, 2), exp(3) / (exp(3) + exp(1)), 1e-6);
    CHECK_ERR(ct_softmax(ct_ones(CT_SHAPE(2), CT_INT64), 0), "not implemented for 'Long'");
}

TEST(grads) {
    float d[] = {1, 2, 0, 4, 5, 6};
    ct_tensor *a = ct_from_data(d, CT_SHAPE(2, 3), CT_FLOAT32);
    ct_set_requires_grad(a, true);
    ct_tensor *s = ct_sum(ct_mul(ct_sum_dims(a, CT_DIMS(1), false), ct_sum_dims(a, CT_DIMS(1), false)));
    CHECK_EQ_INT(ct_backward(s, NULL), 0);
    ct_tensor *g = ct_grad(a);
    CHECK(g);
    CHECK_NEAR(at(g, 0), 6, 0);
    CHECK_NEAR(at(g, 5), 30, 0);
    ct_zero_grad(a, true);
    /* prod with one zero: d/dx2 = 1*2 = 2, others 0 */
    ct_tensor *p = ct_prod_dim(a, 1, false);
    CHECK_EQ_INT(ct_backward(ct_sum(p), NULL), 0);
    g = ct_grad(a);
    CHECK_NEAR(at(g, 0), 0, 0);
    CHECK_NEAR(at(g, 2), 2, 0);
    CHECK_NEAR(at(g, 3), 30, 0);
    CHECK_STR(ct_grad_fn_name(p), "ProdBackward1");
    ct_zero_grad(a, true);
    ct_tensor *m = ct_max(a);
    CHECK_STR(ct_grad_fn_name(m), "MaxBackward1");
    CHECK_EQ_INT(ct_backward(m, NULL), 0);
    CHECK_NEAR(at(ct_grad(a), 5), 1, 0);
}

TEST(max_dim_grad) {
    float d[] = {1, 3, 3, -1, 2, 2, 2, 2, 0, 5, -5, 1};
    ct_tensor *a = ct_to_dtype(ct_from_data(d, CT_SHAPE(3, 4), CT_FLOAT32), CT_FLOAT64);
    ct_set_requires_grad(a, true);
    for (int k = 0; k < 2; k++) {
        ct_tensor *v, *ix;
        CHECK_EQ_INT(ct_max_dim(a, 0, k, &v, &ix), 0);
        ct_tensor *g = ct_ones_like(v);
        const ct_tensor *outs[] = {v}, *gos[] = {g}, *ins[] = {a};
        ct_tensor *res[1];
        CHECK_EQ_INT(ct_autograd_grad(outs, gos, 1, ins, 1, res, true, true, true), 0);
        CHECK_NEAR(at(res[0], 4), 1, 0);
        CHECK_NEAR(at(res[0], 0), 0, 0);
    }
}

TEST(deterministic) {
    int nt = ct_get_num_threads();
    ct_set_num_threads(2);
    ct_manual_seed(3);
    ct_tensor *a = ct_randn(CT_SHAPE(1 << 20), CT_FLOAT32);
    ct_tensor *m = ct_reshape(a, CT_SHAPE(1024, 1024));
    for (int k = 0; k < 3; k++) {
        CHECK(ct_item(ct_sum(a)) == ct_item(ct_sum(a)));
        CHECK(ct_item(ct_var(a, NULL, 0, 1, false)) == ct_item(ct_var(a, NULL, 0, 1, false)));
        CHECK(ct_item(ct_sum(ct_sum_dims(m, CT_DIMS(0), false))) == ct_item(ct_sum(ct_sum_dims(m, CT_DIMS(0), false))));
    }
    ct_set_num_threads(nt);
}

static void free_blob(void *data, void *ctx) {
    (void)ctx;
    free(data);
}
/* Sums of ::2 slices whose last element is the last of its storage, a
 * malloc'd blob of exactly 2n - 1 elements: the vector loads of a ::2 slice
 * read two elements per one used, so the last odd element must not be read
 * (AddressSanitizer sees a read past the blob). Whole sums, and rows of a
 * [3, 2c - 1] blob summed along both dims. Values: small integers (exact). */
TEST(strided_sums_stay_in_bounds) {
    const ct_dtype dts[] = {CT_FLOAT32, CT_FLOAT64, CT_FLOAT16, CT_BFLOAT16};
    const int64_t ns[] = {15, 16, 17, 31, 32, 33, 64, 65, 127, 128, 129, 4097};
    for (int d = 0; d < 4; d++) {
        size_t es = ct_dtype_size(dts[d]);
        for (int k = 0; k < (int)(sizeof ns / sizeof *ns); k++) {
            int64_t n = ns[k], len = 2 * n - 1;
            double want = 0;
            float *f = malloc((size_t)len * sizeof(float));
            for (int64_t i = 0; i < len; i++) f[i] = (float)(i % 7), want += i % 2 ? 0 : i % 7;
            ct_tensor *src = ct_from_data(f, CT_SHAPE(len), CT_FLOAT32);
            void *blob = malloc((size_t)len * es);
            CHECK_EQ_INT(ct_copy_to_buffer(src, blob, dts[d]), 0);
            ct_tensor *t = ct_from_blob(blob, CT_SHAPE(len), dts[d], free_blob, NULL);
            ct_tensor *s = ct_slice(t, 0, 0, len, 2);
            double tol = d >= 2 ? 1e-2 * want : 0; /* 16-bit results round the sum */
            CHECK_NEAR(ct_item(ct_sum(s)), want, tol);
            ct_tensor *m = ct_from_blob(malloc((size_t)(3 * len) * es), CT_SHAPE(3, len), dts[d], free_blob, NULL);
            for (int r = 0; r < 3; r++) CHECK_EQ_INT(ct_copy_(ct_select(m, 0, r), t), 0);
            ct_tensor *ms = ct_slice(m, 1, 0, len, 2);
            CHECK_NEAR(ct_item(ct_select(ct_sum_dims(ms, CT_DIMS(0), false), 0, n - 1)), 3 * (double)((2 * n - 2) % 7), 0);
            CHECK_NEAR(ct_item(ct_sum(ct_sum_dims(ms, CT_DIMS(1), false))), 3 * want, 3 * tol);
            free(f);
        }
    }
}

/* Short rows whose block is not one run of memory: x.permute(1, 0, 2) of an
 * [A, B, n] blob of exactly A B n elements, so that a block's first and last
 * rows lie (L - 1) n apart while the rows between are out of order. The block
 * kernels' plain tail loads must not read past the blob (an ASan failure
 * before the rows between were checked too); the sums and maxima against the
 * elements. */
TEST(block_rows_stay_in_bounds) {
    const ct_dtype dts[] = {CT_FLOAT32, CT_FLOAT64, CT_FLOAT16, CT_BFLOAT16, CT_INT32, CT_INT64};
    const int64_t ns[] = {3, 5, 7, 9, 13};
    const int64_t bs[] = {4, 8};
    for (int d = 0; d < 6; d++) {
        size_t es = ct_dtype_size(dts[d]);
        for (int k = 0; k < 5; k++) {
            for (int q = 0; q < 2; q++) {
                int64_t n = ns[k], B = bs[q], len = 2 * B * n;
                float *f = malloc((size_t)len * sizeof(float));
                for (int64_t i = 0; i < len; i++) f[i] = (float)((i * 7) % 11 - 5);
                void *blob = malloc((size_t)len * es);
                CHECK_EQ_INT(ct_copy_to_buffer(ct_from_data(f, CT_SHAPE(len), CT_FLOAT32), blob, dts[d]), 0);
                ct_tensor *t = ct_from_blob(blob, CT_SHAPE(2, B, n), dts[d], free_blob, NULL);
                ct_tensor *v = ct_permute(t, CT_DIMS(1, 0, 2));
                ct_tensor *sum = ct_to_dtype(ct_sum_dims(v, CT_DIMS(2), false), CT_FLOAT64);
                ct_tensor *max = ct_to_dtype(ct_amax(v, CT_DIMS(2), false), CT_FLOAT64);
                const double *ps = ct_data_ptr(sum), *pm = ct_data_ptr(max);
                for (int64_t b = 0; b < B; b++)
                    for (int64_t a = 0; a < 2; a++) {
                        double s = 0, m = -1e9;
                        for (int64_t j = 0; j < n; j++) {
                            double x = f[(a * B + b) * n + j];
                            s += x, m = x > m ? x : m;
                        }
                        CHECK_NEAR(ps[b * 2 + a], s, 0);
                        CHECK_NEAR(pm[b * 2 + a], m, 0);
                    }
                free(f);
            }
        }
    }
}

/* Maxima across the rows of a 16-bit x[:, ::3], wider than a gather block's
 * share of 4-byte lanes: the widening once staged the raw values past the
 * floats, overrunning the row buffers from 342 columns on (ASan: a stack
 * buffer overflow in gather); each column's max against its elements. */
TEST(strided_16bit_maxima_stay_in_bounds) {
    const ct_dtype dts[] = {CT_FLOAT16, CT_BFLOAT16};
    enum { R = 9, C = 700, S = 3 };
    float *f = malloc(sizeof(float) * R * C * S);
    for (int64_t i = 0; i < R * C * S; i++) f[i] = (float)((i * 37) % 101 - 50);
    for (int d = 0; d < 2; d++) {
        ct_tensor *x = ct_slice(ct_to_dtype(ct_from_data(f, CT_SHAPE(R, C * S), CT_FLOAT32), dts[d]), 1, 0, C * S, S);
        ct_tensor *m = ct_to_dtype(ct_amax(x, CT_DIMS(0), false), CT_FLOAT64);
        ct_tensor *im = ct_argmax(x, true, 0, false);
        CHECK(m && im);
        if (!m || !im) continue;
        const double *pm = ct_data_ptr(m);
        const int64_t *pi = ct_data_ptr(im);
        for (int64_t c = 0; c < C; c++) {
            double best = -1e9;
            int64_t at_r = 0;
            for (int64_t r = 0; r < R; r++)
                if (f[r * C * S + c * S] > best) best = f[r * C * S + c * S], at_r = r;
            CHECK_NEAR(pm[c], best, 0);
            CHECK_EQ_INT(pi[c], at_r);
        }
    }
    free(f);
}

int main(void) {
    RUN(strided_sums_stay_in_bounds);
    RUN(block_rows_stay_in_bounds);
    RUN(strided_16bit_maxima_stay_in_bounds);
    RUN(deterministic);
    RUN(max_dim_grad);
    RUN(sum_basic);
    RUN(sum_dtypes);
    RUN(sum_large);
    RUN(empty_and_scalar);
    RUN(dim_errors);
    RUN(max_min);
    RUN(var_std_norm_lse);
    RUN(all_any);
    RUN(scans);
    RUN(softmax_values);
    RUN(grads);
    return REPORT();
}
