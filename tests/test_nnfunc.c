/* test_nnfunc.c: losses, normalisations, dropout and activations (values worked
 * out by hand, shapes, errors, gradients). The parity tests
 * (tests/parity/test_nnfunc.py) compare with PyTorch on random inputs. */
#include "harness.h"
#include <stdlib.h>

static double at(const ct_tensor *t, int64_t i) {
    double buf[4096];
    if (!t || ct_numel(t) > 4096 || ct_copy_to_buffer(t, buf, CT_FLOAT64) < 0) return NAN;
    return buf[i];
}
static ct_tensor *vec(const double *v, int64_t n, ct_dtype d) {
    return ct_to_dtype(ct_from_data(v, CT_SHAPE(n), CT_FLOAT64), d);
}

TEST(cross_entropy_values) {
    /* logits [2, 3]: rows (0, 0, 0) and (1, 2, 3); targets 0 and 2 */
    const double x[] = {0, 0, 0, 1, 2, 3};
    const int64_t t[] = {0, 2};
    ct_tensor *lx = ct_reshape(vec(x, 6, CT_FLOAT64), CT_SHAPE(2, 3));
    ct_tensor *lt = ct_from_data(t, CT_SHAPE(2), CT_INT64);
    double l0 = log(3.0), l1 = log(exp(1) + exp(2) + exp(3)) - 3;
    ct_tensor *none = ct_cross_entropy(lx, lt, NULL, CT_REDUCTION_NONE, -100, 0);
    CHECK(none && ct_ndim(none) == 1 && ct_size(none, 0) == 2);
    CHECK_NEAR(at(none, 0), l0, 1e-12);
    CHECK_NEAR(at(none, 1), l1, 1e-12);
    CHECK_NEAR(ct_item(ct_cross_entropy(lx, lt, NULL, CT_REDUCTION_MEAN, -100, 0)), (l0 + l1) / 2, 1e-12);
    CHECK_NEAR(ct_item(ct_cross_entropy(lx, lt, NULL, CT_REDUCTION_SUM, -100, 0)), l0 + l1, 1e-12);
    /* ignore_index 2 drops the second row from the mean */
    CHECK_NEAR(ct_item(ct_cross_entropy(lx, lt, NULL, CT_REDUCTION_MEAN, 2, 0)), l0, 1e-12);
    /* weights: mean divides by the picked weights' sum */
    const double w[] = {2, 1, 0.5};
    ct_tensor *lw = vec(w, 3, CT_FLOAT64);
    CHECK_NEAR(ct_item(ct_cross_entropy(lx, lt, lw, CT_REDUCTION_MEAN, -100, 0)), (2 * l0 + 0.5 * l1) / 2.5, 1e-12);
    /* nll_loss picks -x[target] */
    CHECK_NEAR(ct_item(ct_nll_loss(lx, lt, NULL, CT_REDUCTION_SUM, -100)), -(0 + 3), 1e-12);
}

TEST(cross_entropy_grad) {
    const double x[] = {0, 0, 0, 1, 2, 3};
    const int64_t t[] = {0, 2};
    ct_tensor *lx = ct_reshape(vec(x, 6, CT_FLOAT64), CT_SHAPE(2, 3));
    ct_set_requires_grad(lx, true);
    ct_tensor *lt = ct_from_data(t, CT_SHAPE(2), CT_INT64);
    ct_tensor *loss = ct_cross_entropy(lx, lt, NULL, CT_REDUCTION_SUM, -100, 0);
    CHECK_STR(ct_grad_fn_name(loss), "NllLossBackward0");
    CHECK_EQ_INT(ct_backward(loss, NULL), 0);
    ct_tensor *g = ct_grad(lx);
    CHECK_NEAR(at(g, 0), 1.0 / 3 - 1, 1e-12);
    CHECK_NEAR(at(g, 1), 1.0 / 3, 1e-12);
    double s = exp(1) + exp(2) + exp(3);
    CHECK_NEAR(at(g, 5), exp(3) / s - 1, 1e-12);
    CHECK_NEAR(at(g, 3), exp(1) / s, 1e-12);
}

TEST(class_errors) {
    ct_tensor *x = ct_zeros(CT_SHAPE(3, 4), CT_FLOAT32);
    const int64_t t2[] = {0, 1}, t5[] = {0, 1, 5};
    CHECK_ERR(ct_cross_entropy(x, ct_from_data(t2, CT_SHAPE(2), CT_INT64), NULL, CT_REDUCTION_MEAN, -100, 0),
              "Expected input batch_size (3) to match target batch_size (2).");
    CHECK_ERR(ct_nll_loss(x, ct_from_data(t5, CT_SHAPE(3), CT_INT64), NULL, CT_REDUCTION_MEAN, -100),
              "Target 5 is out of bounds.");
    CHECK_ERR(ct_nll_loss(x, ct_zeros(CT_SHAPE(3), CT_INT32), NULL, CT_REDUCTION_MEAN, -100),
              "expected scalar type Long but found Int");
    CHECK_ERR(ct_cross_entropy(x, ct_zeros(CT_SHAPE(3), CT_INT64), NULL, CT_REDUCTION_MEAN, -100, 2),
              "label_smoothing must be between 0.0 and 1.0. Got: 2");
    CHECK(ct_cross_entropy(NULL, x, NULL, CT_REDUCTION_MEAN, -100, 0) == NULL);
}

TEST(pointwise_losses) {
    const double a[] = {0.2, 0.5, 0.9}, b[] = {0.0, 1.0, 0.5};
    ct_tensor *x = vec(a, 3, CT_FLOAT32), *y = vec(b, 3, CT_FLOAT32);
    CHECK_NEAR(ct_item(ct_mse_loss(x, y, CT_REDUCTION_MEAN)), (0.04 + 0.25 + 0.16) / 3, 1e-6);
    CHECK_NEAR(ct_item(ct_l1_loss(x, y, CT_REDUCTION_SUM)), 0.2 + 0.5 + 0.4, 1e-6);
    CHECK_NEAR(ct_item(ct_smooth_l1_loss(x, y, CT_REDUCTION_SUM, 0.45)),
               0.5 * 0.04 / 0.45 + (0.5 - 0.225) + 0.5 * 0.16 / 0.45, 1e-6);
    double bce = -(log(0.8) + log(0.5) + 0.5 * log(0.9) + 0.5 * log(0.1)) / 3;
    CHECK_NEAR(ct_item(ct_binary_cross_entropy(x, y, NULL, CT_REDUCTION_MEAN)), bce, 1e-6);
    ct_tensor *bl = ct_binary_cross_entropy_with_logits(x, y, NULL, NULL, CT_REDUCTION_NONE);
    CHECK_NEAR(at(bl, 1), log1p(exp(-0.5)), 1e-6);
    CHECK_ERR(ct_binary_cross_entropy(ct_full(CT_SHAPE(3), 1.5, CT_FLOAT32), y, NULL, CT_REDUCTION_MEAN),
              "all elements of input should be between 0 and 1");
}

TEST(layer_norm_values) {
    const double v[] = {1, 2, 3, 4, 10, 10, 10, 10};
    ct_tensor *x = ct_reshape(vec(v, 8, CT_FLOAT32), CT_SHAPE(2, 4));
    ct_tensor *y = ct_layer_norm(x, CT_SHAPE(4), NULL, NULL, 0);
    double sd = sqrt(1.25);
    CHECK_NEAR(at(y, 0), -1.5 / sd, 1e-6);
    CHECK_NEAR(at(y, 3), 1.5 / sd, 1e-6);
    CHECK_ERR(ct_layer_norm(x, CT_SHAPE(5), NULL, NULL, 1e-5),
              "Given normalized_shape=[5], expected input with shape [*, 5], but got input of size[2, 4]");
}

TEST(batch_norm_running_stats) {
    const double v[] = {1, 10, 3, 20}; /* [2, 2]: channel 0 = {1, 3}, channel 1 = {10, 20} */
    ct_tensor *x = ct_reshape(vec(v, 4, CT_FLOAT32), CT_SHAPE(2, 2));
    ct_tensor *rm = ct_zeros(CT_SHAPE(2), CT_FLOAT32), *rv = ct_ones(CT_SHAPE(2), CT_FLOAT32);
    ct_tensor *y = ct_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 0);
    CHECK_NEAR(at(y, 0), -1, 1e-6);
    CHECK_NEAR(at(y, 3), 1, 1e-6);
    CHECK_NEAR(at(rm, 0), 0.2, 1e-6);
    CHECK_NEAR(at(rm, 1), 1.5, 1e-6);
    CHECK_NEAR(at(rv, 0), 0.9 + 0.1 * 2, 1e-6);  /* unbiased variance of {1, 3} is 2 */
    CHECK_NEAR(at(rv, 1), 0.9 + 0.1 * 50, 1e-5); /* of {10, 20}: 50 */
    ct_tensor *e = ct_batch_norm(x, rm, rv, NULL, NULL, false, 0.1, 0);
    CHECK_NEAR(at(e, 0), (1 - 0.2) / sqrt(1.1), 1e-6);
    CHECK_ERR(ct_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5),
              "running_mean must be defined in evaluation mode");
}

TEST(dropout_stats) {
    ct_manual_seed(42);
    ct_tensor *x = ct_ones(CT_SHAPE(100000), CT_FLOAT32);
    ct_tensor *d = ct_dropout(x, 0.3, true);
    CHECK(d != NULL);
    float *p = ct_data_ptr(d);
    int64_t kept = 0;
    for (int64_t i = 0; i < 100000; i++) {
        if (p[i] != 0) {
            kept++;
            if (fabsf(p[i] - 1.0f / 0.7f) > 1e-6f) break;
        }
    }
    CHECK(kept > 69000 && kept < 71000);
    ct_manual_seed(42);
    ct_tensor *d2 = ct_dropout(x, 0.3, true);
    CHECK(memcmp(ct_data_ptr(d2), p, 100000 * sizeof(float)) == 0); /* deterministic for a seed */
    CHECK(ct_dropout(x, 0.3, false) != NULL);
    CHECK_ERR(ct_dropout(x, -0.1, true), "dropout probability has to be between 0 and 1");
}

TEST(activations) {
    const double v[] = {-2, -0.5, 0.5, 7};
    ct_tensor *x = vec(v, 4, CT_FLOAT64);
    ct_tensor *r6 = ct_relu6(x);
    CHECK_NEAR(at(r6, 0), 0, 0);
    CHECK_NEAR(at(r6, 3), 6, 0);
    ct_tensor *lr = ct_leaky_relu(x, 0.1);
    CHECK_NEAR(at(lr, 0), -0.2, 1e-15);
    ct_tensor *el = ct_elu(x, 1);
    CHECK_NEAR(at(el, 1), expm1(-0.5), 1e-15);
    ct_tensor *ht = ct_hardtanh(x, -1, 1);
    CHECK_NEAR(at(ht, 0), -1, 0);
    CHECK_NEAR(at(ht, 2), 0.5, 0);
}

TEST(meta_device) {
    ct_tensor *x = ct_empty_on(CT_SHAPE(4, 5, 6), CT_FLOAT32, CT_META);
    ct_tensor *t = ct_empty_on(CT_SHAPE(4, 6), CT_INT64, CT_META);
    ct_tensor *l = ct_cross_entropy(x, t, NULL, CT_REDUCTION_NONE, -100, 0);
    CHECK(l && ct_ndim(l) == 2 && ct_size(l, 1) == 6 && ct_device_of(l) == CT_META);
    ct_tensor *y = ct_layer_norm(x, CT_SHAPE(6), NULL, NULL, 1e-5);
    CHECK(y && ct_device_of(y) == CT_META);
}

int main(void) {
    RUN(cross_entropy_values);
    RUN(cross_entropy_grad);
    RUN(class_errors);
    RUN(pointwise_losses);
    RUN(layer_norm_values);
    RUN(batch_norm_running_stats);
    RUN(dropout_stats);
    RUN(activations);
    RUN(meta_device);
    return REPORT();
}
