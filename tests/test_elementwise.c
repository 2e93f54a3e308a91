/* test_elementwise.c: the UNARY and BINARY rows of ops.def (values, result
 * dtypes, layouts, in-place forms, errors, gradients), with expected values
 * worked out by hand; tests/parity/test_elementwise.py compares with PyTorch. */
#include "harness.h"
#include <stdint.h>
#include <stdlib.h>

static ct_tensor *vec_f(const float *v, int64_t n) { return ct_from_data(v, (const int64_t[]){n}, 1, CT_FLOAT32); }
static ct_tensor *vec_d(const double *v, int64_t n) { return ct_from_data(v, (const int64_t[]){n}, 1, CT_FLOAT64); }
static ct_tensor *vec_i64(const int64_t *v, int64_t n) { return ct_from_data(v, (const int64_t[]){n}, 1, CT_INT64); }
static double at(const ct_tensor *t, int64_t i) {
    double buf[256];
    if (!t || ct_numel(t) > 256 || ct_copy_to_buffer(t, buf, CT_FLOAT64) < 0) return NAN;
    return buf[i];
}

TEST(unary_float_values) {
    const float v[] = {0.0f, 1.0f, -2.0f, 0.5f};
    ct_tensor *x = vec_f(v, 4);
    ct_tensor *e = ct_exp(x);
    CHECK(e && ct_dtype_of(e) == CT_FLOAT32);
    CHECK_NEAR(at(e, 0), 1, 1e-7);
    CHECK_NEAR(at(e, 1), 2.718281828, 1e-6);
    CHECK_NEAR(at(e, 2), 0.135335283, 1e-6);
    ct_tensor *l = ct_log(x);
    CHECK(isinf(at(l, 0)) && at(l, 0) < 0);
    CHECK(isnan(at(l, 2)));
    CHECK_NEAR(at(l, 3), -0.693147181, 1e-6);
    ct_tensor *s = ct_sigmoid(x);
    CHECK_NEAR(at(s, 0), 0.5, 1e-7);
    ct_tensor *r = ct_rsqrt(x);
    CHECK(isinf(at(r, 0)));
    CHECK_NEAR(at(r, 3), 1.414213562, 1e-6);
}

/* Integer arithmetic wraps modulo 2^bits (two's complement), as torch's, and
 * without undefined behaviour (the sanitizer build checks): a negative alpha for
 * uint8, addcmul past int32's and int64's range. */
TEST(integer_wrapping_without_ub) {
    const uint8_t a8[] = {64, 0, 255}, b8[] = {22, 1, 255};
    ct_tensor *a = ct_from_data(a8, (const int64_t[]){3}, 1, CT_UINT8), *b = ct_from_data(b8, (const int64_t[]){3}, 1, CT_UINT8);
    ct_tensor *d = ct_add_alpha(a, b, -1);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(at(d, i), (uint8_t)(a8[i] - b8[i]));
    ct_tensor *e = ct_sub_alpha(a, b, -3);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(at(e, i), (uint8_t)(a8[i] + 3u * b8[i]));
    const int32_t x32[] = {INT32_MAX, INT32_MIN, 5}, y32[] = {-3, 7, INT32_MAX}, z32[] = {-96, 3, 3};
    ct_tensor *x = ct_from_data(x32, (const int64_t[]){3}, 1, CT_INT32), *y = ct_from_data(y32, (const int64_t[]){3}, 1, CT_INT32),
              *z = ct_from_data(z32, (const int64_t[]){3}, 1, CT_INT32);
    ct_tensor *m = ct_addcmul(x, y, z, -1);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(at(m, i), (int32_t)(uint32_t)((uint32_t)x32[i] - (uint32_t)y32[i] * (uint32_t)z32[i]));
    const int64_t x64[] = {INT64_MAX, 2}, y64[] = {2, INT64_MAX}, z64[] = {INT64_MAX, 2};
    ct_tensor *p = ct_from_data(x64, (const int64_t[]){2}, 1, CT_INT64), *q = ct_from_data(y64, (const int64_t[]){2}, 1, CT_INT64),
              *r = ct_from_data(z64, (const int64_t[]){2}, 1, CT_INT64);
    ct_tensor *w = ct_addcmul(p, q, r, 1);
    int64_t got[2];
    CHECK(w && ct_copy_to_buffer(w, got, CT_INT64) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(got[i] == (int64_t)((uint64_t)x64[i] + (uint64_t)y64[i] * (uint64_t)z64[i]));
}

TEST(unary_integer_promotes_to_float) {
    const int64_t v[] = {0, 1, 4};
    ct_tensor *x = vec_i64(v, 3);
    ct_tensor *s = ct_sqrt(x);
    CHECK(s && ct_dtype_of(s) == CT_FLOAT32);
    CHECK_NEAR(at(s, 2), 2, 0);
    ct_tensor *a = ct_abs(x); /* ALL: keeps int64 */
    CHECK(a && ct_dtype_of(a) == CT_INT64);
    ct_tensor *f = ct_floor(x); /* ROUND: integers pass through */
    CHECK(f && ct_dtype_of(f) == CT_INT64 && at(f, 2) == 4);
    /* in place: a float result cannot go into an integer tensor */
    ct_tensor *y = ct_clone(x);
    CHECK_ERR_INT(ct_sin_(y), "result type Float can't be cast to the desired output type Long");
    /* float-only functions fail on integers, as in torch */
    CHECK_ERR(ct_frac(x), "\"frac_cpu\" not implemented for 'Long'");
    CHECK_ERR(ct_gelu(x, "none"), "\"GeluKernelImpl\" not implemented for 'Long'");
}

TEST(unary_special_values) {
    const float v[] = {NAN, INFINITY, -INFINITY, -0.0f, 10.0f, 50.0f};
    ct_tensor *x = vec_f(v, 6);
    ct_tensor *sg = ct_sign(x);
    CHECK(at(sg, 0) == 0); /* torch: sign(NaN) = 0 */
    CHECK(at(sg, 1) == 1 && at(sg, 2) == -1);
    ct_tensor *r = ct_relu(x);
    CHECK(isnan(at(r, 0))); /* relu propagates NaN */
    CHECK(at(r, 2) == 0);
    ct_tensor *t = ct_tanh(x);
    CHECK(at(t, 1) == 1 && at(t, 2) == -1);
    CHECK(at(t, 4) == 1 && at(t, 5) == 1); /* saturates exactly, as libm's tanhf */
    ct_tensor *n = ct_nan_to_num(x, NAN, NAN, NAN);
    CHECK(at(n, 0) == 0);
    CHECK_NEAR(at(n, 1), 3.4028234663852886e38, 1e-7);
    CHECK_NEAR(at(n, 2), -3.4028234663852886e38, 1e-7);
    ct_tensor *in = ct_isnan(x);
    CHECK(ct_dtype_of(in) == CT_BOOL && at(in, 0) == 1 && at(in, 1) == 0);
}

TEST(unary_bool) {
    const bool v[] = {true, false};
    ct_tensor *b = ct_from_data(v, (const int64_t[]){2}, 1, CT_BOOL);
    CHECK_ERR(ct_neg(b), "Negation, the `-` operator, on a bool tensor is not supported");
    ct_tensor *s = ct_sign(b);
    CHECK(s && ct_dtype_of(s) == CT_BOOL && at(s, 0) == 1 && at(s, 1) == 0);
    ct_tensor *q = ct_square(b);
    CHECK(q && ct_dtype_of(q) == CT_INT64 && at(q, 0) == 1);
    CHECK_ERR(ct_relu(b), "Boolean inputs not supported for relu");
    CHECK_ERR(ct_floor(b), "\"floor_vml_cpu\" not implemented for 'Bool'");
    ct_tensor *ln = ct_logical_not(b);
    CHECK(ln && at(ln, 0) == 0 && at(ln, 1) == 1);
}

TEST(unary_layout) {
    ct_tensor *x = ct_arange(0, 6, 1, CT_FLOAT32);
    ct_tensor *m = ct_reshape(x, CT_SHAPE(2, 3));
    ct_tensor *t = ct_t(m);
    ct_tensor *y = ct_exp(t); /* a transposed input gives a transposed output */
    CHECK(y && ct_stride(y, 0) == 1 && ct_stride(y, 1) == 3);
    CHECK_NEAR(at(y, 1), exp(3.0), 1e-6); /* row-major read: y[0][1] = exp(m[1][0]) */
    const int64_t iv[] = {1, 2, 3, 4, 5, 6};
    ct_tensor *im = ct_t(ct_reshape(vec_i64(iv, 6), CT_SHAPE(2, 3)));
    ct_tensor *c = ct_ceil(im); /* integer pass-through keeps the layout too */
    CHECK(c && ct_stride(c, 0) == 1 && ct_stride(c, 1) == 3);
}

TEST(binary_promotion) {
    const int64_t iv[] = {1, 2, 3};
    const float fv[] = {0.5f, 0.5f, 0.5f};
    ct_tensor *i = vec_i64(iv, 3), *f = vec_f(fv, 3);
    ct_tensor *s = ct_add(i, f);
    CHECK(s && ct_dtype_of(s) == CT_FLOAT32 && at(s, 2) == 3.5);
    ct_tensor *d = ct_div(i, i); /* true division: float32 */
    CHECK(d && ct_dtype_of(d) == CT_FLOAT32 && at(d, 0) == 1);
    ct_tensor *e = ct_eq(i, f);
    CHECK(e && ct_dtype_of(e) == CT_BOOL);
    /* a 0-dim float64 does not raise float32 to float64, but does raise int64 */
    ct_tensor *z = ct_scalar_dtype(2, CT_FLOAT64);
    ct_tensor *fz = ct_mul(f, z);
    CHECK(fz && ct_dtype_of(fz) == CT_FLOAT32);
    ct_tensor *iz = ct_mul(i, z);
    CHECK(iz && ct_dtype_of(iz) == CT_FLOAT64);
    /* Python-number scalars: integral doubles count as ints */
    ct_tensor *a2 = ct_add_scalar(i, 2.0);
    CHECK(a2 && ct_dtype_of(a2) == CT_INT64 && at(a2, 0) == 3);
    ct_tensor *a25 = ct_add_scalar(i, 2.5);
    CHECK(a25 && ct_dtype_of(a25) == CT_FLOAT32 && at(a25, 0) == 3.5);
}

TEST(binary_half_scalar_rounds_to_half) {
    /* torch casts a scalar to the common dtype first: 1e10 is inf in float16 */
    const float v[] = {-INFINITY, 1.0f};
    ct_tensor *h = ct_to_dtype(vec_f(v, 2), CT_FLOAT16);
    ct_tensor *s = ct_add_scalar(h, 1e10);
    CHECK(s && ct_dtype_of(s) == CT_FLOAT16);
    CHECK(isnan(at(s, 0)) && isinf(at(s, 1)));
    ct_tensor *g = ct_gt_scalar(ct_to_dtype(vec_f((const float[]){INFINITY}, 1), CT_FLOAT16), 1e10);
    CHECK(g && at(g, 0) == 0);
}

TEST(binary_broadcast_and_inplace_errors) {
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_FLOAT32), *b = ct_ones(CT_SHAPE(2, 3), CT_FLOAT32);
    ct_tensor *s = ct_add(a, b);
    CHECK(s && ct_ndim(s) == 2 && ct_size(s, 0) == 2);
    CHECK_ERR_INT(ct_add_(a, b), "output with shape [3] doesn't match the broadcast shape [2, 3]");
    ct_tensor *l = ct_arange(0, 3, 1, CT_INT64);
    CHECK_ERR_INT(ct_add_(l, a), "result type Float can't be cast to the desired output type Long");
    CHECK_ERR(ct_add(a, ct_ones(CT_SHAPE(4), CT_FLOAT32)), "must match the size");
    CHECK_ERR(ct_add_alpha(l, l, 0.5), "For integral input tensors, argument alpha must not be a floating point number.");
    CHECK(ct_add_alpha_(b, a, 2) == 0 && at(b, 0) == 3);
    const bool bv[] = {true, false, true};
    ct_tensor *bb = ct_from_data(bv, (const int64_t[]){3}, 1, CT_BOOL);
    CHECK_ERR(ct_sub(bb, bb), "Subtraction, the `-` operator, with two bool tensors is not supported");
    CHECK_ERR(ct_sub(bb, l), "Subtraction, the `-` operator, with a bool tensor is not supported");
}

TEST(integer_division) {
    const int64_t a[] = {-7, 7, -7, 7}, b[] = {2, -2, -2, 2};
    ct_tensor *x = vec_i64(a, 4), *y = vec_i64(b, 4);
    ct_tensor *t = ct_div_mode(x, y, "trunc"), *f = ct_div_mode(x, y, "floor");
    CHECK(t && ct_dtype_of(t) == CT_INT64);
    CHECK(at(t, 0) == -3 && at(t, 1) == -3 && at(t, 2) == 3 && at(t, 3) == 3);
    CHECK(at(f, 0) == -4 && at(f, 1) == -4 && at(f, 2) == 3 && at(f, 3) == 3);
    ct_tensor *r = ct_remainder(x, y), *m = ct_fmod(x, y);
    CHECK(at(r, 0) == 1 && at(r, 1) == -1 && at(r, 2) == -1 && at(r, 3) == 1); /* sign of the divisor */
    CHECK(at(m, 0) == -1 && at(m, 1) == 1 && at(m, 2) == -1 && at(m, 3) == 1); /* sign of the dividend */
    const int64_t zv[] = {1, 0, 1, 1};
    ct_tensor *z = vec_i64(zv, 4);
    CHECK_ERR(ct_div_mode(x, z, "floor"), "ZeroDivisionError");
    CHECK_ERR(ct_remainder(x, z), "ZeroDivisionError");
    CHECK_ERR(ct_fmod_scalar(x, 0), "ZeroDivisionError");
    CHECK_ERR(ct_div_mode(x, y, "round"), "div expected rounding_mode to be one of None, 'trunc', or 'floor'");
    /* INT64_MIN / -1 wraps instead of trapping */
    const int64_t mn[] = {INT64_MIN}, m1[] = {-1};
    ct_tensor *q = ct_div_mode(vec_i64(mn, 1), vec_i64(m1, 1), "floor");
    CHECK(q);
    int64_t qv = 0;
    CHECK(ct_copy_to_buffer(q, &qv, CT_INT64) == 0 && qv == INT64_MIN);
    const float fa[] = {-7.0f, 5.5f}, fb[] = {2.0f, -2.0f};
    ct_tensor *ff = ct_div_mode(vec_f(fa, 2), vec_f(fb, 2), "floor");
    CHECK(at(ff, 0) == -4 && at(ff, 1) == -3);
}

TEST(integer_pow) {
    const int64_t b[] = {0, 1, -1, 2, 3}, e[] = {-1, -1, -3, -2, 3};
    ct_tensor *p = ct_pow(vec_i64(b, 5), vec_i64(e, 5));
    CHECK(p && ct_dtype_of(p) == CT_INT64); /* tensor exponents: 1, -1 or 0 below zero */
    CHECK(at(p, 0) == 0 && at(p, 1) == 1 && at(p, 2) == -1 && at(p, 3) == 0 && at(p, 4) == 27);
    CHECK_ERR(ct_pow_scalar(vec_i64(b, 5), -2), "Integers to negative integer powers are not allowed.");
    ct_tensor *i8 = ct_to_dtype(vec_i64(b, 5), CT_INT8);
    CHECK_ERR(ct_pow_scalar(i8, 1e10), "value cannot be converted to type int8_t without overflow");
    const float fv[] = {-INFINITY, 4.0f};
    ct_tensor *sq = ct_pow_scalar(vec_f(fv, 2), 0.5); /* as torch: sqrt, so (-inf) ** 0.5 is NaN */
    CHECK(isnan(at(sq, 0)) && at(sq, 1) == 2);
}

TEST(bitwise_logical_minmax) {
    const int64_t a[] = {12, -1, 5}, b[] = {10, 3, 0};
    ct_tensor *x = vec_i64(a, 3), *y = vec_i64(b, 3);
    ct_tensor *n = ct_bitwise_and(x, y), *o = ct_bitwise_or(x, y), *e = ct_bitwise_xor(x, y);
    CHECK(at(n, 0) == 8 && at(n, 1) == 3 && at(o, 0) == 14 && at(o, 1) == -1 && at(e, 0) == 6);
    ct_tensor *f = ct_ones(CT_SHAPE(3), CT_FLOAT32);
    CHECK_ERR(ct_bitwise_and(f, f), "\"bitwise_and_cpu\" not implemented for 'Float'");
    CHECK_ERR_INT(ct_bitwise_or_(x, f), "result type Float can't be cast to the desired output type Long");
    ct_tensor *la = ct_logical_and(x, f);
    CHECK(la && ct_dtype_of(la) == CT_BOOL && at(la, 2) == 1);
    const float p[] = {NAN, 1.0f, 2.0f}, q[] = {1.0f, NAN, 3.0f};
    ct_tensor *mx = ct_maximum(vec_f(p, 3), vec_f(q, 3)), *mn = ct_minimum(vec_f(p, 3), vec_f(q, 3));
    CHECK(isnan(at(mx, 0)) && isnan(at(mx, 1)) && at(mx, 2) == 3);
    CHECK(isnan(at(mn, 0)) && isnan(at(mn, 1)) && at(mn, 2) == 2);
}

TEST(large_threaded) {
    ct_tensor *x = ct_arange(0, 100000, 1, CT_FLOAT32);
    ct_tensor *y = ct_mul_scalar(x, 2);
    ct_tensor *z = ct_sub(y, x);
    ct_tensor *d = ct_sub(z, x);
    ct_tensor *s = ct_sum(ct_abs(d));
    CHECK(s && ct_item(s) == 0);
    ct_tensor *t = ct_t(ct_reshape(x, CT_SHAPE(250, 400)));
    ct_tensor *c = ct_contiguous(ct_neg(t));
    CHECK(c && ct_item(ct_select(ct_select(c, 0, 0), 0, 1)) == -400);
}

/* The tiled loop (an input whose unit stride is along another dim than the
 * output's), exact integer values in every dtype checked element by element:
 * x.t() + y with x.t()[i][j] = (j * R + i) % m, y[i][j] = (i * C + j) % m;
 * R x C is large enough for two threads and not a multiple of the tiles. */
static ct_tensor *pattern(int64_t rows, int64_t cols, int64_t m, ct_dtype dt) {
    ct_tensor *a = ct_remainder_scalar(ct_arange(0, (double)(rows * cols), 1, CT_INT64), (double)m);
    return ct_to_dtype(ct_reshape(a, CT_SHAPE(rows, cols)), dt);
}

static bool all_equal(const ct_tensor *t, int64_t rows, int64_t cols, double (*want)(int64_t, int64_t)) {
    double *v = malloc(sizeof(double) * (size_t)(rows * cols));
    bool ok = v && t && ct_copy_to_buffer(t, v, CT_FLOAT64) == 0;
    for (int64_t i = 0; ok && i < rows; i++)
        for (int64_t j = 0; ok && j < cols; j++) ok = v[i * cols + j] == want(i, j);
    free(v);
    return ok;
}

enum { TR = 301, TC = 299, TM = 64 };
static double tiled_sum(int64_t i, int64_t j) { return (double)((j * TR + i) % TM + (i * TC + j) % TM); }
static double tiled_x(int64_t i, int64_t j) { return (double)((j * TR + i) % TM); }

TEST(tiled_layouts) {
    const ct_dtype dts[] = {CT_FLOAT32, CT_FLOAT64, CT_FLOAT16, CT_BFLOAT16, CT_INT32, CT_INT64, CT_INT16, CT_UINT8};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        ct_tensor *xt = ct_t(pattern(TC, TR, TM, dts[d])), *y = pattern(TR, TC, TM, dts[d]);
        CHECK(all_equal(ct_add(xt, y), TR, TC, tiled_sum));
        CHECK(all_equal(ct_add(y, xt), TR, TC, tiled_sum));
        ct_tensor *self = ct_t(pattern(TC, TR, TM, dts[d])); /* in place on a transposed self */
        CHECK(ct_add_(self, y) == 0 && all_equal(self, TR, TC, tiled_sum));
        ct_tensor *wide = ct_empty(CT_SHAPE(TR, TC), dts[d] == CT_FLOAT64 ? CT_FLOAT32 : CT_FLOAT64);
        CHECK(ct_copy_(wide, ct_t(pattern(TC, TR, TM, dts[d]))) == 0 && all_equal(wide, TR, TC, tiled_x));
    }
    /* float16 + float32 transposed: promotion to float32 */
    ct_tensor *s = ct_add(pattern(TR, TC, TM, CT_FLOAT16), ct_t(pattern(TC, TR, TM, CT_FLOAT32)));
    CHECK(s && ct_dtype_of(s) == CT_FLOAT32 && all_equal(s, TR, TC, tiled_sum));
}

TEST(meta_device) {
    ct_tensor *a = ct_to_device(ct_ones(CT_SHAPE(4, 1, 3), CT_INT32), CT_META);
    ct_tensor *b = ct_to_device(ct_ones(CT_SHAPE(5, 1), CT_FLOAT32), CT_META);
    ct_tensor *s = ct_add(a, b);
    CHECK(s && ct_device_of(s) == CT_META && ct_dtype_of(s) == CT_FLOAT32);
    CHECK(ct_ndim(s) == 3 && ct_size(s, 0) == 4 && ct_size(s, 1) == 5 && ct_size(s, 2) == 3);
    CHECK_ERR_INT(ct_add_(a, b), "output with shape [4, 1, 3] doesn't match the broadcast shape [4, 5, 3]");
    ct_tensor *f = ct_floor(a);
    CHECK(f && ct_device_of(f) == CT_META && ct_dtype_of(f) == CT_INT32);
}

TEST(gradients) {
    const double v[] = {0.5, 1.5, -2.0}, w[] = {2.0, -1.0, 4.0};
    ct_tensor *x = vec_d(v, 3), *y = vec_d(w, 3);
    CHECK(ct_set_requires_grad(x, true) == 0 && ct_set_requires_grad(y, true) == 0);
    ct_tensor *p = ct_mul(ct_sin(x), y); /* d/dx = cos(x) y, d/dy = sin(x) */
    CHECK(ct_backward(ct_sum(p), NULL) == 0);
    ct_tensor *gx = ct_grad(x), *gy = ct_grad(y);
    CHECK(gx && gy);
    for (int i = 0; i < 3; i++) {
        CHECK_NEAR(at(gx, i), cos(v[i]) * w[i], 1e-12);
        CHECK_NEAR(at(gy, i), sin(v[i]), 1e-12);
    }
    CHECK_STR(ct_grad_fn_name(p), "MulBackward0");
    ct_tensor *r = ct_remainder(x, y);
    CHECK_STR(ct_grad_fn_name(r), "RemainderBackward1");
}

int main(void) {
    RUN(unary_float_values);
    RUN(unary_integer_promotes_to_float);
    RUN(unary_special_values);
    RUN(unary_bool);
    RUN(unary_layout);
    RUN(binary_promotion);
    RUN(binary_half_scalar_rounds_to_half);
    RUN(binary_broadcast_and_inplace_errors);
    RUN(integer_division);
    RUN(integer_pow);
    RUN(bitwise_logical_minmax);
    RUN(integer_wrapping_without_ub);
    RUN(large_threaded);
    RUN(tiled_layouts);
    RUN(meta_device);
    RUN(gradients);
    return REPORT();
}
