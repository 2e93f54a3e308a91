/* test_linalg.c: matrix products, convolution and pooling through the public
 * API: hand-computed values, shapes of the broadcasting rules, errors, meta,
 * gradients and no leaks. (Parity with PyTorch: tests/parity/test_linalg.py and
 * test_conv.py.) */
#include "harness.h"
#include <stdlib.h>

static ct_tensor *arange_f(int64_t n, ct_dtype dt) { return ct_arange(0, (double)n, 1, dt); }

static double at(const ct_tensor *t, int64_t i) { return ct_item(ct_narrow(ct_reshape(t, CT_SHAPE(-1)), 0, i, 1)); }

TEST(mm_values) {
    /* [[0,1,2],[3,4,5]] @ [[0,1],[2,3],[4,5]] = [[10,13],[28,40]] */
    for (int d = 0; d < 4; d++) {
        ct_dtype dt = (ct_dtype[]){CT_FLOAT32, CT_FLOAT64, CT_INT64, CT_FLOAT16}[d];
        ct_tensor *a = ct_reshape(arange_f(6, dt), CT_SHAPE(2, 3));
        ct_tensor *b = ct_reshape(arange_f(6, dt), CT_SHAPE(3, 2));
        ct_tensor *c = ct_mm(a, b);
        CHECK(c);
        CHECK_EQ_INT(ct_dtype_of(c), dt);
        CHECK_NEAR(at(c, 0), 10, 1e-6);
        CHECK_NEAR(at(c, 1), 13, 1e-6);
        CHECK_NEAR(at(c, 2), 28, 1e-6);
        CHECK_NEAR(at(c, 3), 40, 1e-6);
        /* transposed operands are read in place */
        ct_tensor *cT = ct_mm(ct_t(b), ct_t(a)); /* = c^T */
        CHECK_NEAR(at(cT, 1), 28, 1e-6);
        CHECK_NEAR(at(cT, 2), 13, 1e-6);
    }
}

TEST(matmul_shapes) {
    ct_tensor *a = ct_ones(CT_SHAPE(2, 1, 4, 3), CT_FLOAT32), *b = ct_ones(CT_SHAPE(5, 3, 6), CT_FLOAT32);
    ct_tensor *c = ct_matmul(a, b);
    CHECK_EQ_INT(ct_ndim(c), 4);
    CHECK_EQ_INT(ct_size(c, 0), 2);
    CHECK_EQ_INT(ct_size(c, 1), 5);
    CHECK_EQ_INT(ct_size(c, 2), 4);
    CHECK_EQ_INT(ct_size(c, 3), 6);
    CHECK_NEAR(at(c, 0), 3, 0);
    ct_tensor *v = ct_ones(CT_SHAPE(3), CT_FLOAT32);
    CHECK_EQ_INT(ct_ndim(ct_matmul(v, v)), 0);
    CHECK_NEAR(ct_item(ct_dot(v, v)), 3, 0);
    CHECK_EQ_INT(ct_ndim(ct_matmul(a, v)), 3);
    CHECK_EQ_INT(ct_size(ct_matmul(v, b), 1), 6);
    ct_tensor *o = ct_outer(v, ct_ones(CT_SHAPE(2), CT_INT32));
    CHECK_EQ_INT(ct_dtype_of(o), CT_FLOAT32);
    CHECK_EQ_INT(ct_size(o, 1), 2);
    /* empty inner dimension: zeros */
    ct_tensor *e = ct_mm(ct_ones(CT_SHAPE(2, 0), CT_FLOAT32), ct_ones(CT_SHAPE(0, 3), CT_FLOAT32));
    CHECK_NEAR(at(e, 5), 0, 0);
}

TEST(addmm_linear) {
    ct_tensor *s = ct_full(CT_SHAPE(2), 1, CT_FLOAT64);
    ct_tensor *a = ct_reshape(arange_f(6, CT_FLOAT64), CT_SHAPE(2, 3));
    ct_tensor *b = ct_reshape(arange_f(6, CT_FLOAT64), CT_SHAPE(3, 2));
    ct_tensor *r = ct_addmm(s, a, b, 0.5, 2); /* 0.5 + 2 * [[10,13],[28,40]] */
    CHECK_NEAR(at(r, 0), 20.5, 1e-12);
    CHECK_NEAR(at(r, 3), 80.5, 1e-12);
    ct_tensor *l = ct_linear(a, ct_t(b), s); /* a @ b + 1 */
    CHECK_NEAR(at(l, 1), 14, 1e-12);
    ct_tensor *l0 = ct_linear(a, ct_t(b), NULL);
    CHECK_NEAR(at(l0, 1), 13, 1e-12);
    ct_tensor *bb = ct_baddbmm(ct_zeros(CT_SHAPE(1), CT_FLOAT64), ct_unsqueeze(a, 0), ct_unsqueeze(b, 0), 1, 1);
    CHECK_NEAR(at(bb, 2), 28, 1e-12);
}

TEST(errors) {
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_FLOAT32), *b = ct_ones(CT_SHAPE(4, 5), CT_FLOAT32);
    CHECK_ERR(ct_mm(a, b), "mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    CHECK_ERR(ct_matmul(a, b), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    CHECK_ERR(ct_matmul(ct_scalar(1), a), "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
    CHECK_ERR(ct_mm(a, ct_ones(CT_SHAPE(3, 2), CT_FLOAT64)), "expected scalar type Float but found Double");
    CHECK_ERR(ct_bmm(a, a), "batch1 must be a 3D tensor");
    CHECK_ERR(ct_mm(ct_ones(CT_SHAPE(2, 2), CT_BOOL), ct_ones(CT_SHAPE(2, 2), CT_BOOL)),
              "\"addmm_impl_cpu_\" not implemented for 'Bool'");
    ct_tensor *x = ct_ones(CT_SHAPE(1, 2, 5, 5), CT_FLOAT32), *w = ct_ones(CT_SHAPE(4, 3, 3, 3), CT_FLOAT32);
    CHECK_ERR(ct_conv2d(x, w, NULL, NULL, NULL, NULL, 1),
              "Given groups=1, weight of size [4, 3, 3, 3], expected input[1, 2, 5, 5] to have 3 channels, but got 2 "
              "channels instead");
    CHECK_ERR(ct_max_pool2d(x, (int64_t[]){2, 2}, NULL, (int64_t[]){2, 2}, NULL, false),
              "pad should be at most half of kernel size, but got pad=2 and kernel_size=2");
    CHECK_ERR(ct_adaptive_avg_pool2d(ct_ones(CT_SHAPE(5, 5), CT_FLOAT32), (int64_t[]){2, 2}),
              "Expected 3D or 4D tensor, but got [5, 5]");
    /* NULL arguments keep the first error */
    ct_clear_error();
    CHECK(ct_mm(NULL, a) == NULL);
}

TEST(meta) {
    ct_tensor *a = ct_empty_on(CT_SHAPE(7, 2, 3), CT_FLOAT32, CT_META);
    ct_tensor *b = ct_empty_on(CT_SHAPE(3, 4), CT_FLOAT32, CT_META);
    ct_tensor *c = ct_matmul(a, b);
    CHECK_EQ_INT(ct_device_of(c), CT_META);
    CHECK_EQ_INT(ct_size(c, 2), 4);
    ct_tensor *x = ct_empty_on(CT_SHAPE(8, 3, 32, 32), CT_FLOAT32, CT_META);
    ct_tensor *w = ct_empty_on(CT_SHAPE(16, 3, 5, 5), CT_FLOAT32, CT_META);
    ct_tensor *y = ct_conv2d(x, w, NULL, (int64_t[]){2, 2}, (int64_t[]){2, 2}, NULL, 1);
    CHECK_EQ_INT(ct_size(y, 2), 16);
    ct_tensor *p = ct_max_pool2d(y, (int64_t[]){3, 3}, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL, true);
    CHECK_EQ_INT(ct_size(p, 3), 9);
}

TEST(conv_pool_values) {
    /* 1 channel 3x3 input 0..8, 2x2 kernel of ones: window sums */
    ct_tensor *x = ct_reshape(arange_f(9, CT_FLOAT32), CT_SHAPE(1, 1, 3, 3));
    ct_tensor *w = ct_ones(CT_SHAPE(1, 1, 2, 2), CT_FLOAT32);
    ct_tensor *y = ct_conv2d(x, w, ct_full(CT_SHAPE(1), 0.5, CT_FLOAT32), NULL, NULL, NULL, 1);
    CHECK_NEAR(at(y, 0), 8.5, 1e-6);
    CHECK_NEAR(at(y, 3), 24.5, 1e-6);
    ct_tensor *y1 = ct_conv1d(ct_reshape(arange_f(4, CT_FLOAT64), CT_SHAPE(1, 1, 4)),
                              ct_ones(CT_SHAPE(1, 1, 2), CT_FLOAT64), NULL, 2, 0, 1, 1);
    CHECK_EQ_INT(ct_size(y1, 2), 2);
    CHECK_NEAR(at(y1, 1), 5, 0);
    ct_tensor *idx = NULL;
    ct_tensor *m = ct_max_pool2d_with_indices(x, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL, NULL, false, &idx);
    CHECK_NEAR(at(m, 0), 4, 0);
    CHECK_NEAR(at(idx, 3), 8, 0);
    ct_tensor *av = ct_avg_pool2d(x, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL, false, true, 0);
    CHECK_NEAR(at(av, 0), 2, 1e-6);
    ct_tensor *ad = ct_adaptive_avg_pool2d(x, (int64_t[]){1, 1});
    CHECK_NEAR(at(ad, 0), 4, 1e-6);
}

TEST(mm_backward) {
    ct_tensor *a = ct_reshape(arange_f(6, CT_FLOAT64), CT_SHAPE(2, 3));
    ct_tensor *b = ct_reshape(arange_f(6, CT_FLOAT64), CT_SHAPE(3, 2));
    a = ct_contiguous(a), b = ct_contiguous(b);
    CHECK(ct_set_requires_grad(a, true) == 0);
    CHECK(ct_set_requires_grad(b, true) == 0);
    ct_tensor *c = ct_matmul(a, b);
    CHECK_STR(ct_grad_fn_name(c), "MmBackward0");
    CHECK(ct_backward(c, ct_ones(CT_SHAPE(2, 2), CT_FLOAT64)) == 0);
    /* d/da sum(a @ b) = ones @ b^T: rows [1, 5, 9] */
    CHECK_NEAR(at(ct_grad(a), 0), 1, 0);
    CHECK_NEAR(at(ct_grad(a), 2), 9, 0);
    /* d/db = a^T @ ones: [[3,3],[5,5],[7,7]] */
    CHECK_NEAR(at(ct_grad(b), 2), 5, 0);
}

TEST(conv_backward) {
    ct_tensor *x = ct_contiguous(ct_reshape(arange_f(9, CT_FLOAT64), CT_SHAPE(1, 1, 3, 3)));
    ct_tensor *w = ct_ones(CT_SHAPE(1, 1, 2, 2), CT_FLOAT64), *bias = ct_zeros(CT_SHAPE(1), CT_FLOAT64);
    CHECK(ct_set_requires_grad(x, true) == 0);
    CHECK(ct_set_requires_grad(w, true) == 0);
    CHECK(ct_set_requires_grad(bias, true) == 0);
    ct_tensor *y = ct_conv2d(x, w, bias, NULL, NULL, NULL, 1);
    CHECK(ct_backward(y, ct_ones(CT_SHAPE(1, 1, 2, 2), CT_FLOAT64)) == 0);
    /* each input pixel counted by the windows covering it: corners 1, centre 4 */
    CHECK_NEAR(at(ct_grad(x), 0), 1, 0);
    CHECK_NEAR(at(ct_grad(x), 4), 4, 0);
    /* w grad: window sums 0+1+3+4 ... = [[8,12],[20,24]] */
    CHECK_NEAR(at(ct_grad(w), 0), 8, 0);
    CHECK_NEAR(at(ct_grad(w), 3), 24, 0);
    CHECK_NEAR(at(ct_grad(bias), 0), 4, 0);
}

TEST(no_leaks) {
    ct_memory_stats before = ct_memory_stats_get();
    ct_scope_begin();
    ct_tensor *a = ct_randn(CT_SHAPE(3, 40, 50), CT_FLOAT32), *b = ct_randn(CT_SHAPE(50, 30), CT_FLOAT32);
    ct_matmul(a, b);
    ct_matmul(ct_transpose(a, 1, 2), ct_randn(CT_SHAPE(3, 40, 7), CT_FLOAT32));
    ct_conv2d(ct_randn(CT_SHAPE(4, 6, 9, 9), CT_FLOAT32), ct_randn(CT_SHAPE(8, 3, 3, 3), CT_FLOAT32), NULL,
              (int64_t[]){2, 1}, (int64_t[]){1, 1}, NULL, 2);
    ct_scope_end();
    CHECK_EQ_INT(ct_memory_stats_get().in_use, before.in_use);
}

int main(void) {
    RUN(mm_values);
    RUN(matmul_shapes);
    RUN(addmm_linear);
    RUN(errors);
    RUN(meta);
    RUN(conv_pool_values);
    RUN(mm_backward);
    RUN(conv_backward);
    RUN(no_leaks);
    return REPORT();
}
