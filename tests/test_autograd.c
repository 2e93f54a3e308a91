/* test_autograd.c: the engine's semantics on the notes' cases. Expected
 * numbers are PyTorch's (quoted in the notes and the issue) or closed forms. */
#include "harness.h"

static ct_tensor *leaf(double v) {
    ct_tensor *t = ct_scalar_dtype(v, CT_FLOAT64);
    ct_set_requires_grad(t, true);
    return t;
}

TEST(notes_example_c_equals_ab_minus_b_over_a_plus_b) {
    ct_tensor *a = ct_scalar(2), *b = ct_scalar(43);
    ct_set_requires_grad(a, true);
    ct_set_requires_grad(b, true);
    ct_tensor *c = ct_sub(ct_mul(a, b), ct_add(ct_div(b, a), b));
    CHECK_STR(ct_grad_fn_name(c), "SubBackward0");
    CHECK_EQ_INT(ct_backward(c, NULL), 0);
    CHECK_NEAR(ct_item(ct_grad(a)), 53.75, 1e-6); /* torch: tensor(53.7500) */
    CHECK_NEAR(ct_item(ct_grad(b)), 0.5, 1e-6);   /* torch: tensor(0.5000) */
}

TEST(a_plus_a_sums_in_the_input_buffer) {
    ct_tensor *a = leaf(1);
    ct_backward(ct_add(a, a), NULL);
    CHECK_NEAR(ct_item(ct_grad(a)), 2, 0);
}

TEST(log_x0x1_sin_x1) {
    ct_tensor *x = ct_from_data((double[]){0.5, 0.75}, CT_SHAPE(2), CT_FLOAT64);
    ct_set_requires_grad(x, true);
    ct_tensor *x0 = ct_select(x, 0, 0), *x1 = ct_select(x, 0, 1);
    ct_tensor *y = ct_mul(ct_log(ct_mul(x0, x1)), ct_sin(x1));
    CHECK_EQ_INT(ct_backward(y, NULL), 0);
    ct_tensor *g = ct_grad(x);
    /* d/dx0 = sin(x1)/x0, d/dx1 = sin(x1)/x1 + log(x0 x1) cos(x1): torch gives [1.3633, 0.1912] */
    CHECK_NEAR(ct_item(ct_select(g, 0, 0)), sin(0.75) / 0.5, 1e-12);
    CHECK_NEAR(ct_item(ct_select(g, 0, 1)), sin(0.75) / 0.75 + log(0.375) * cos(0.75), 1e-12);
    CHECK_NEAR(ct_item(ct_select(g, 0, 0)), 1.3633, 1e-4);
    CHECK_NEAR(ct_item(ct_select(g, 0, 1)), 0.1912, 1e-3);
}

TEST(broadcasting_is_undone_in_gradients) {
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_FLOAT64), *b = ct_full(CT_SHAPE(3), 2, CT_FLOAT64);
    ct_set_requires_grad(a, true);
    ct_set_requires_grad(b, true);
    ct_tensor *y = ct_mul(a, b);
    CHECK_EQ_INT(ct_backward(y, ct_ones(CT_SHAPE(2, 3), CT_FLOAT64)), 0);
    ct_tensor *gb = ct_grad(b);
    CHECK_EQ_INT(ct_ndim(gb), 1);
    CHECK_EQ_INT(ct_size(gb, 0), 3);
    CHECK_NEAR(ct_item(ct_select(gb, 0, 1)), 2, 0); /* summed over the broadcast dim */
    CHECK_NEAR(ct_item(ct_select(ct_select(ct_grad(a), 0, 1), 0, 2)), 2, 0);
}

TEST(second_backward_needs_retain_graph) {
    ct_tensor *x = leaf(3);
    ct_tensor *y = ct_mul(ct_sin(x), x);
    CHECK_EQ_INT(ct_backward_ex(y, NULL, true, false), 0);
    CHECK_EQ_INT(ct_backward(y, NULL), 0); /* retained: works, accumulates */
    CHECK_NEAR(ct_item(ct_grad(x)), 2 * (cos(3.0) * 3 + sin(3.0)), 1e-12);
    CHECK_ERR_INT(ct_backward(y, NULL), "Trying to backward through the graph a second time");
}

TEST(create_graph_gives_higher_derivatives) {
    ct_tensor *x = leaf(2);
    ct_tensor *y = ct_mul(ct_mul(x, x), x); /* x^3 */
    ct_tensor *g1;
    CHECK_EQ_INT(ct_autograd_grad((const ct_tensor *[]){y}, NULL, 1, (const ct_tensor *[]){x}, 1, &g1, false, true, false), 0);
    CHECK_NEAR(ct_item(g1), 12, 1e-12); /* 3x^2 */
    ct_tensor *g2;
    CHECK_EQ_INT(ct_autograd_grad((const ct_tensor *[]){g1}, NULL, 1, (const ct_tensor *[]){x}, 1, &g2, false, true, false), 0);
    CHECK_NEAR(ct_item(g2), 12, 1e-12); /* 6x */
    ct_tensor *g3;
    CHECK_EQ_INT(ct_autograd_grad((const ct_tensor *[]){g2}, NULL, 1, (const ct_tensor *[]){x}, 1, &g3, false, false, false), 0);
    CHECK_NEAR(ct_item(g3), 6, 1e-12);
    CHECK(ct_grad(x) == NULL); /* autograd.grad does not touch .grad */
    ct_tensor *plain = ct_ones(CT_SHAPE(2), CT_FLOAT64), *r2[2] = {NULL, NULL};
    CHECK_ERR_INT(ct_autograd_grad((const ct_tensor *[]){plain}, NULL, 1, (const ct_tensor *[]){x, g1}, 2, r2, false, false, false),
                  "element 0 of tensors does not require grad");
    /* exp's backward uses its saved result: second derivative through it */
    ct_tensor *z = ct_exp(ct_mul(x, x)), *dz, *d2z;
    ct_autograd_grad((const ct_tensor *[]){z}, NULL, 1, (const ct_tensor *[]){x}, 1, &dz, false, true, false);
    ct_autograd_grad((const ct_tensor *[]){dz}, NULL, 1, (const ct_tensor *[]){x}, 1, &d2z, false, false, false);
    CHECK_NEAR(ct_item(d2z), (2 + 4 * 4) * exp(4.0), 1e-9); /* (2 + 4x^2) e^{x^2} */
}

TEST(inplace_rules) {
    ct_tensor *x = leaf(1);
    CHECK_ERR_INT(ct_add_scalar_(x, 1), "a leaf Variable that requires grad is being used in an in-place operation.");
    ct_tensor *y = ct_mul_scalar(x, 2), *s = ct_sin(y);
    CHECK_EQ_INT(ct_mul_scalar_(y, 3), 0); /* y was saved by sin */
    CHECK_ERR_INT(ct_backward(s, NULL), "one of the variables needed for gradient computation has been modified by an inplace operation");
    /* an in-place op on a non-leaf rebases its history: d/dx sin(2x) via sin_ */
    ct_tensor *x2 = leaf(3);
    ct_tensor *w = ct_mul_scalar(x2, 2);
    CHECK_EQ_INT(ct_sin_(w), 0);
    CHECK_STR(ct_grad_fn_name(w), "SinBackward0");
    CHECK_EQ_INT(ct_backward(w, NULL), 0);
    CHECK_NEAR(ct_item(ct_grad(x2)), 2 * cos(6.0), 1e-12);
    /* w.mul_(w): the saved `other` is w before the op, so backward refuses (as PyTorch) */
    ct_tensor *w2 = ct_mul_scalar(x2, 2);
    CHECK_EQ_INT(ct_mul_(w2, w2), 0);
    CHECK_ERR_INT(ct_backward(w2, NULL), "which is output 0 of MulBackward0, is at version 1; expected version 0");
}

TEST(no_grad_and_detach) {
    ct_tensor *x = leaf(1);
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *y = ct_mul(x, x);
    ct_set_grad_enabled(prev);
    CHECK(!ct_requires_grad(y));
    CHECK(ct_grad_fn_name(y) == NULL);
    ct_tensor *d = ct_detach(ct_mul(x, x));
    CHECK(!ct_requires_grad(d));
    CHECK(ct_is_leaf(d));
    CHECK_ERR_INT(ct_backward(d, NULL), "does not require grad and does not have a grad_fn");
}

TEST(grad_of_non_scalar_needs_grad_output) {
    ct_tensor *x = ct_ones(CT_SHAPE(3), CT_FLOAT32);
    ct_set_requires_grad(x, true);
    ct_tensor *y = ct_mul_scalar(x, 2);
    CHECK_ERR_INT(ct_backward(y, NULL), "grad can be implicitly created only for scalar outputs");
    CHECK_ERR_INT(ct_backward(y, ct_ones(CT_SHAPE(2), CT_FLOAT32)), "Mismatch in shape");
}

static ct_tensor *double_it(const ct_tensor *g, void *ctx) {
    (*(int *)ctx)++;
    return ct_mul_scalar(g, 2);
}

TEST(hooks_and_retain_grad) {
    int calls = 0;
    ct_tensor *x = leaf(1.5);
    ct_tensor *y = ct_mul_scalar(x, 3);
    CHECK_EQ_INT(ct_retain_grad(y), 0);
    CHECK_EQ_INT(ct_register_hook(x, double_it, &calls), 0);
    ct_tensor *z = ct_mul(y, y);
    CHECK_EQ_INT(ct_backward(z, NULL), 0);
    CHECK_NEAR(ct_item(ct_grad(y)), 2 * 4.5, 1e-12);
    CHECK_NEAR(ct_item(ct_grad(x)), 2 * (2 * 4.5 * 3), 1e-12); /* the hook doubled it */
    CHECK_EQ_INT(calls, 1);
}

TEST(views_backward) {
    ct_tensor *x = ct_arange(0, 6, 1, CT_FLOAT64);
    ct_set_requires_grad(x, true);
    ct_tensor *v = ct_transpose(ct_view(x, CT_SHAPE(2, 3)), 0, 1);       /* [3, 2] */
    ct_tensor *u = ct_mul(ct_narrow(v, 0, 1, 2), ct_narrow(v, 0, 1, 2));
    ct_tensor *e = ct_expand(ct_unsqueeze(ct_select(x, 0, 5), 0), CT_SHAPE(4));
    CHECK_EQ_INT(ct_backward(u, ct_ones(CT_SHAPE(2, 2), CT_FLOAT64)), 0);
    /* u = v[1:3]^2: v[i][j] = x[j*3+i]; rows 1,2 of v are x[1],x[4],x[2],x[5] -> grad 2x */
    double expect[6] = {0, 2, 4, 0, 8, 10}, got[6];
    ct_copy_to_buffer(ct_grad(x), got, CT_FLOAT64);
    for (int i = 0; i < 6; i++) CHECK_NEAR(got[i], expect[i], 0);
    ct_zero_grad(x, true);
    CHECK_EQ_INT(ct_backward(e, ct_ones(CT_SHAPE(4), CT_FLOAT64)), 0);
    ct_copy_to_buffer(ct_grad(x), got, CT_FLOAT64);
    CHECK_NEAR(got[5], 4, 0); /* expand sums its gradient back */
    CHECK_NEAR(got[0], 0, 0);
}

TEST(anomaly_mode_names_the_node) {
    ct_tensor *x = leaf(0);
    ct_tensor *y = ct_sqrt(x); /* d/dx sqrt at 0 is inf; 0 * inf = nan */
    ct_tensor *z = ct_mul_scalar(y, 0);
    bool prev = ct_set_detect_anomaly(true);
    CHECK_ERR_INT(ct_backward(z, NULL), "Function 'SqrtBackward0' returned nan values in its 0th output.");
    ct_set_detect_anomaly(prev);
}

/* In-place ops on views of non-leaves rebase the base's history (CopySlices). */
TEST(inplace_on_a_view_reaches_the_base) {
    ct_tensor *x = ct_from_data((double[]){0.5, 1, 1.5, 2}, CT_SHAPE(4), CT_FLOAT64);
    ct_set_requires_grad(x, true);
    ct_tensor *y = ct_mul_scalar(x, 1);
    ct_tensor *v = ct_narrow(y, 0, 1, 2);
    CHECK_EQ_INT(ct_sin_(v), 0);
    CHECK_STR(ct_grad_fn_name(y), "CopySlices");
    ct_tensor *z = ct_mul(y, y); /* y = [x0, sin x1, sin x2, x3] */
    CHECK_EQ_INT(ct_backward(z, ct_ones(CT_SHAPE(4), CT_FLOAT64)), 0);
    double g[4];
    ct_copy_to_buffer(ct_grad(x), g, CT_FLOAT64);
    CHECK_NEAR(g[0], 2 * 0.5, 1e-12);
    CHECK_NEAR(g[1], 2 * sin(1.0) * cos(1.0), 1e-12);
    CHECK_NEAR(g[2], 2 * sin(1.5) * cos(1.5), 1e-12);
    CHECK_NEAR(g[3], 2 * 2, 1e-12);
    /* a view of a leaf that requires grad cannot be modified in place */
    CHECK_ERR_INT(ct_mul_scalar_(ct_narrow(x, 0, 0, 2), 2), "a view of a leaf Variable that requires grad");
    /* writing a tensor that requires grad into a view of a plain tensor */
    ct_tensor *buf = ct_zeros(CT_SHAPE(3), CT_FLOAT64), *w = ct_scalar_dtype(2, CT_FLOAT64);
    ct_set_requires_grad(w, true);
    CHECK_EQ_INT(ct_copy_(ct_select(buf, 0, 1), ct_mul_scalar(w, 3)), 0);
    CHECK(ct_requires_grad(buf));
    CHECK_EQ_INT(ct_backward(buf, ct_from_data((double[]){1, 10, 100}, CT_SHAPE(3), CT_FLOAT64)), 0);
    CHECK_NEAR(ct_item(ct_grad(w)), 30, 1e-12);
}

TEST(long_chain_frees_without_recursion) {
    ct_tensor *x = leaf(0.5);
    ct_scope_begin();
    ct_tensor *y = x;
    for (int i = 0; i < 20000; i++) {
        ct_tensor *n = ct_mul_scalar(y, 1.0);
        if (y != x) ct_free(y);
        y = n;
    }
    CHECK_EQ_INT(ct_backward(y, NULL), 0);
    ct_scope_end();
    CHECK_NEAR(ct_item(ct_grad(x)), 1, 0);
}

/* Nodes keep each input's geometry in memory sized to the op: tensors of the
 * full CT_MAX_DIMS dimensions through a view, a broadcast product and an
 * in-place op on a view (CopySlices) of a non-leaf. */
TEST(nodes_hold_sixteen_dim_geometry) {
    int64_t shape[CT_MAX_DIMS];
    int perm[CT_MAX_DIMS];
    for (int d = 0; d < CT_MAX_DIMS; d++) {
        shape[d] = d % 2 ? 2 : 1; /* the last dim has size 2 */
        perm[d] = CT_MAX_DIMS - 1 - d;
    }
    ct_tensor *x = ct_view(ct_mul_scalar(ct_arange(0, 256, 1, CT_FLOAT64), 0.01), shape, CT_MAX_DIMS);
    ct_set_requires_grad(x, true);
    ct_tensor *y = ct_permute(x, perm, CT_MAX_DIMS);
    ct_tensor *w = ct_mul(ct_sin(y), y);
    CHECK_EQ_INT(ct_mul_scalar_(ct_narrow(w, 0, 0, 1), 3), 0); /* x's last index 0: times 3 */
    CHECK_EQ_INT(ct_backward(ct_sum(w), NULL), 0);
    double g[256];
    CHECK_EQ_INT(ct_copy_to_buffer(ct_grad(x), g, CT_FLOAT64), 0);
    for (int i = 0; i < 256; i++) {
        double v = 0.01 * i, c = i % 2 ? 1 : 3;
        CHECK_NEAR(g[i], c * (cos(v) * v + sin(v)), 1e-12);
    }
    /* a view's backward scatters into the base's geometry: both geometries
     * (sizes and strides of 16 dims each) travel as the op's int arguments */
    ct_tensor *x2 = ct_detach(x);
    ct_set_requires_grad(x2, true);
    ct_tensor *v = ct_select(ct_narrow(x2, CT_MAX_DIMS - 1, 1, 1), 0, 0);
    CHECK_EQ_INT(ct_backward(ct_sum(ct_mul(v, v)), NULL), 0);
    CHECK_EQ_INT(ct_copy_to_buffer(ct_grad(x2), g, CT_FLOAT64), 0);
    for (int i = 0; i < 256; i++) CHECK_NEAR(g[i], i % 2 ? 2 * 0.01 * i : 0, 1e-12);
}

/* AccumulateGrad takes a gradient nobody else holds as .grad without a copy, but
 * only when it is laid out as the leaf: sum's expanded (stride 0) gradient is
 * copied, so that the next backward can add into .grad in place. */
TEST(accumulate_grad_steals_only_dense_gradients) {
    ct_tensor *x = ct_ones(CT_SHAPE(3, 4), CT_FLOAT64);
    ct_set_requires_grad(x, true);
    for (int k = 0; k < 2; k++) CHECK_EQ_INT(ct_backward(ct_sum(x), NULL), 0);
    ct_tensor *g = ct_grad(x);
    CHECK(ct_is_contiguous(g));
    CHECK_NEAR(ct_item(ct_sum(g)), 24, 0);
    ct_tensor *w = ct_ones(CT_SHAPE(3, 4), CT_FLOAT64);
    ct_set_requires_grad(w, true);
    for (int k = 0; k < 3; k++) CHECK_EQ_INT(ct_backward(ct_sum(ct_mul_scalar(w, 2)), NULL), 0);
    CHECK_NEAR(ct_item(ct_sum(ct_grad(w))), 72, 0);
    CHECK_EQ_INT(ct_stride(ct_grad(w), 0), 4);
}

int main(void) {
    RUN(notes_example_c_equals_ab_minus_b_over_a_plus_b);
    RUN(a_plus_a_sums_in_the_input_buffer);
    RUN(log_x0x1_sin_x1);
    RUN(broadcasting_is_undone_in_gradients);
    RUN(second_backward_needs_retain_graph);
    RUN(create_graph_gives_higher_derivatives);
    RUN(inplace_rules);
    RUN(no_grad_and_detach);
    RUN(grad_of_non_scalar_needs_grad_output);
    RUN(hooks_and_retain_grad);
    RUN(views_backward);
    RUN(anomaly_mode_names_the_node);
    RUN(inplace_on_a_view_reaches_the_base);
    RUN(long_chain_frees_without_recursion);
    RUN(nodes_hold_sixteen_dim_geometry);
    RUN(accumulate_grad_steals_only_dense_gradients);
    return REPORT();
}
