/* test_nn.c: modules (tree, names, repr, clone, train/eval, zero_grad, user
 * modules), state dicts (round trip through safetensors, strict errors), layers'
 * shapes, and the data loader. Values against PyTorch: tests/parity/test_nn.py. */
#include "harness.h"
#include <stdlib.h>

static char *repr(const ct_module *m) {
    int n = ct_module_repr(m, NULL, 0);
    char *s = malloc((size_t)n + 1);
    ct_module_repr(m, s, (size_t)n + 1);
    return s;
}

TEST(sequential_repr_and_names) {
    ct_manual_seed(0);
    ct_module *inner[] = {ct_nn_flatten(1, -1), ct_nn_linear(784, 512, true)};
    ct_module *mods[] = {ct_nn_sequential(inner, 2), ct_nn_relu(), ct_nn_linear(512, 10, false)};
    ct_module *m = ct_nn_sequential(mods, 3);
    CHECK(m);
    char *s = repr(m);
    CHECK_STR(s, "Sequential(\n"
                 "  (0): Sequential(\n"
                 "    (0): Flatten(start_dim=1, end_dim=-1)\n"
                 "    (1): Linear(in_features=784, out_features=512, bias=True)\n"
                 "  )\n"
                 "  (1): ReLU()\n"
                 "  (2): Linear(in_features=512, out_features=10, bias=False)\n"
                 ")");
    free(s);
    const char *names[8];
    ct_tensor *ps[8];
    CHECK_EQ_INT(ct_module_named_parameters(m, names, ps, 8), 3);
    CHECK_STR(names[0], "0.1.weight");
    CHECK_STR(names[1], "0.1.bias");
    CHECK_STR(names[2], "2.weight");
    CHECK(ps[0] == ct_module_get(m, "0.1.weight"));
    CHECK(ct_requires_grad(ps[0]) && ct_is_leaf(ps[0]));
    CHECK_EQ_INT(ct_module_num_parameters(m), 784 * 512 + 512 + 5120);
    CHECK(ct_module_child(m, "0.1") != NULL);
    CHECK_STR(ct_module_type_name(ct_module_child(m, "0.1")), "Linear");
    CHECK_ERR(ct_module_get(m, "0.2.weight"), "has no attribute");
    CHECK_ERR(ct_module_get(m, "1.weight"), "has no parameter or buffer");
    ct_module_free(m);
}

TEST(same_module_twice_and_clone) {
    ct_module *lin = ct_nn_linear(3, 4, true);
    ct_module *mods[] = {lin, lin};
    ct_module *m = ct_nn_sequential(mods, 2);
    CHECK(m);
    const char *names[8];
    CHECK_EQ_INT(ct_module_named_parameters(m, names, NULL, 8), 4);
    CHECK_STR(names[2], "1.weight");
    ct_tensor *w0 = ct_module_get(m, "0.weight"), *w1 = ct_module_get(m, "1.weight");
    CHECK(!ct_shares_storage(w0, w1));
    CHECK_NEAR(ct_item(ct_sum(ct_abs(ct_sub(w0, w1)))), 0, 0);
    /* adding a module to itself clones it too */
    CHECK_EQ_INT(ct_nn_append(m, m), 0);
    CHECK_EQ_INT(ct_module_named_parameters(m, names, NULL, 8), 8);
    CHECK_STR(names[4], "2.0.weight");
    ct_module *c = ct_module_clone(m);
    char *a = repr(m), *b = repr(c);
    CHECK_STR(a, b);
    free(a);
    free(b);
    ct_tensor *cw = ct_module_get(c, "2.1.bias");
    CHECK(cw && !ct_shares_storage(cw, ct_module_get(m, "2.1.bias")));
    CHECK(ct_requires_grad(cw) && ct_is_leaf(cw));
    ct_module_eval(c);
    CHECK(!ct_module_is_training(ct_module_child(c, "2.1")));
    CHECK(ct_module_is_training(ct_module_child(m, "2.1")));
    ct_module_free(c);
    ct_module_free(m);
}

/* A user module: y = scale * x + bias, with ctx holding the scale. */
typedef struct {
    double scale;
    int *frees;
} Affine;
static ct_tensor *affine_fwd(ct_module *m, const ct_tensor *const *in, int n, void *ctx) {
    (void)n;
    Affine *a = ctx;
    ct_tensor *t = ct_mul_scalar(in[0], a->scale);
    ct_tensor *r = ct_add(t, ct_module_get(m, "bias"));
    ct_free(t);
    return r;
}
static int affine_repr(const ct_module *m, char *buf, size_t cap, void *ctx) {
    (void)m;
    return snprintf(buf, cap, "scale=%g", ((Affine *)ctx)->scale);
}
static void *affine_clone(const void *ctx) {
    Affine *a = malloc(sizeof *a);
    *a = *(const Affine *)ctx;
    return a;
}
static void affine_free(void *ctx) {
    Affine *a = ctx;
    (*a->frees)++;
    free(a);
}

TEST(user_module) {
    int frees = 0;
    Affine *a = malloc(sizeof *a);
    a->scale = 2;
    a->frees = &frees;
    ct_module_ops ops = {.name = "Affine", .forward = affine_fwd, .extra_repr = affine_repr,
                         .clone_ctx = affine_clone, .free_ctx = affine_free};
    ct_module *m = ct_module_new(&ops, a);
    CHECK(m);
    CHECK_EQ_INT(ct_module_register_parameter(m, "bias", ct_ones(CT_SHAPE(3), CT_FLOAT32)), 0);
    CHECK_EQ_INT(ct_module_register_buffer(m, "count", ct_zeros(CT_SHAPE(1), CT_INT64)), 0);
    CHECK_ERR_INT(ct_module_register_parameter(m, "bias", ct_ones(CT_SHAPE(3), CT_FLOAT32)), "already exists");
    CHECK_ERR_INT(ct_module_register_parameter(m, "a.b", ct_ones(CT_SHAPE(3), CT_FLOAT32)), "can't contain \".\"");
    CHECK_ERR_INT(ct_module_register_parameter(m, "i", ct_ones(CT_SHAPE(3), CT_INT64)), "floating point");
    ct_module *kids[] = {m, ct_nn_tanh()};
    ct_module *s = ct_nn_sequential(kids, 2);
    char *r = repr(s);
    CHECK_STR(r, "Sequential(\n  (0): Affine(scale=2)\n  (1): Tanh()\n)");
    free(r);
    ct_tensor *x = ct_arange(0, 3, 1, CT_FLOAT32);
    ct_tensor *y = ct_module_forward(s, x);
    CHECK(y);
    CHECK_NEAR(ct_item(ct_select(y, 0, 2)), tanh(5.0), 1e-6);
    CHECK_EQ_INT(ct_backward(ct_sum(y), NULL), 0);
    ct_tensor *g = ct_grad(ct_module_get(s, "0.bias"));
    CHECK(g);
    CHECK_NEAR(ct_item(ct_select(g, 0, 0)), 1 - tanh(1.0) * tanh(1.0), 1e-6);
    ct_module *c = ct_module_clone(s);
    CHECK(c && ct_module_context(ct_module_child_at(c, 0)) != a);
    ct_module_free(c);
    CHECK_EQ_INT(frees, 1);
    ct_module_free(s);
    CHECK_EQ_INT(frees, 2);
}

TEST(state_dict_roundtrip_and_errors) {
    ct_manual_seed(1);
    ct_module *mods[] = {ct_nn_conv2d(1, 4, 3, 1, 1, 1, 1, true), ct_nn_batch_norm2d(4, 1e-5, 0.1, true, true),
                         ct_nn_flatten(1, -1), ct_nn_linear(4 * 4 * 4, 3, true)};
    ct_module *a = ct_nn_sequential(mods, 4);
    ct_manual_seed(2);
    ct_module *mods2[] = {ct_nn_conv2d(1, 4, 3, 1, 1, 1, 1, true), ct_nn_batch_norm2d(4, 1e-5, 0.1, true, true),
                          ct_nn_flatten(1, -1), ct_nn_linear(4 * 4 * 4, 3, true)};
    ct_module *b = ct_nn_sequential(mods2, 4);
    ct_state_dict *sd = ct_module_state_dict(a);
    CHECK_EQ_INT(ct_state_dict_size(sd), 9);
    CHECK_STR(ct_state_dict_name(sd, 4), "1.running_mean");
    CHECK_STR(ct_state_dict_name(sd, 6), "1.num_batches_tracked");
    size_t nbytes = 0;
    void *buf = ct_safetensors_save_buffer(sd, &nbytes);
    CHECK(buf);
    ct_state_dict *back = ct_safetensors_load_buffer(buf, nbytes);
    free(buf);
    CHECK_EQ_INT(ct_module_load_state_dict(b, back, true), 0);
    ct_tensor *x = ct_rand(CT_SHAPE(2, 1, 4, 4), CT_FLOAT32);
    ct_module_eval(a);
    ct_module_eval(b);
    CHECK_NEAR(ct_item(ct_sum(ct_abs(ct_sub(ct_module_forward(a, x), ct_module_forward(b, x))))), 0, 0);
    /* strict errors, as torch words them */
    CHECK_EQ_INT(ct_state_dict_remove(back, "3.bias"), 0);
    CHECK_EQ_INT(ct_state_dict_set(back, "3.weight", ct_zeros(CT_SHAPE(2, 64), CT_FLOAT32)), 0);
    CHECK_EQ_INT(ct_state_dict_set(back, "extra", ct_zeros(CT_SHAPE(1), CT_FLOAT32)), 0);
    CHECK_ERR_INT(ct_module_load_state_dict(b, back, true),
                  "Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in state_dict: \"3.bias\". \n\t"
                  "Unexpected key(s) in state_dict: \"extra\". \n\tsize mismatch for 3.weight: copying a param with "
                  "shape torch.Size([2, 64]) from checkpoint, the shape in current model is torch.Size([3, 64]).");
    /* non-strict: only the size mismatch is an error */
    CHECK_ERR_INT(ct_module_load_state_dict(b, back, false), "size mismatch for 3.weight");
    CHECK_EQ_INT(ct_state_dict_remove(back, "3.weight"), 0);
    CHECK_EQ_INT(ct_module_load_state_dict(b, back, false), 0);
    ct_state_dict_free(back);
    ct_state_dict_free(sd);
    ct_module_free(a);
    ct_module_free(b);
}

TEST(layer_shapes_and_modes) {
    ct_manual_seed(0);
    ct_tensor *img = ct_randn(CT_SHAPE(2, 3, 8, 8), CT_FLOAT32);
    struct {
        ct_module *m;
        int64_t shape[4];
        int nd;
    } cases[] = {
        {ct_nn_conv2d(3, 5, 3, 2, 1, 1, 1, true), {2, 5, 4, 4}, 4},
        {ct_nn_max_pool2d(2, 0, 0), {2, 3, 4, 4}, 4},
        {ct_nn_avg_pool2d(3, 1, 1), {2, 3, 8, 8}, 4},
        {ct_nn_adaptive_avg_pool2d(1, 1), {2, 3, 1, 1}, 4},
        {ct_nn_batch_norm2d(3, 1e-5, 0.1, true, true), {2, 3, 8, 8}, 4},
        {ct_nn_flatten(1, -1), {2, 192}, 2},
        {ct_nn_flatten(2, 3), {2, 3, 64}, 3},
        {ct_nn_layer_norm(CT_SHAPE(8, 8), 1e-5, true), {2, 3, 8, 8}, 4},
        {ct_nn_dropout(0.5), {2, 3, 8, 8}, 4},
        {ct_nn_gelu("tanh"), {2, 3, 8, 8}, 4},
        {ct_nn_softmax(1), {2, 3, 8, 8}, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ct_tensor *y = ct_module_forward(cases[i].m, img);
        CHECK(y);
        CHECK_EQ_INT(ct_ndim(y), cases[i].nd);
        for (int d = 0; y && d < cases[i].nd; d++) CHECK_EQ_INT(ct_size(y, d), cases[i].shape[d]);
        ct_module_free(cases[i].m);
    }
    /* dropout: identity in eval, zeros about p in training */
    ct_module *dr = ct_nn_dropout(0.25);
    ct_tensor *ones = ct_ones(CT_SHAPE(10000), CT_FLOAT32);
    double kept = ct_item(ct_sum(ct_ne_scalar(ct_module_forward(dr, ones), 0)));
    CHECK(kept > 7200 && kept < 7800);
    CHECK_NEAR(ct_item(ct_max(ct_module_forward(dr, ones))), 1 / 0.75, 1e-6);
    ct_module_eval(dr);
    CHECK_NEAR(ct_item(ct_sum(ct_module_forward(dr, ones))), 10000, 0);
    ct_module_free(dr);
    /* embedding: padding row is zero */
    ct_module *emb = ct_nn_embedding(5, 3, 2);
    CHECK_NEAR(ct_item(ct_sum(ct_abs(ct_select(ct_module_get(emb, "weight"), 0, 2)))), 0, 0);
    ct_tensor *idx = ct_from_data((int64_t[]){1, 2, 4}, CT_SHAPE(3), CT_INT64);
    ct_tensor *e = ct_module_forward(emb, idx);
    CHECK(e && ct_size(e, 0) == 3 && ct_size(e, 1) == 3);
    ct_module_free(emb);
    /* errors */
    CHECK_ERR(ct_nn_conv2d(3, 4, 3, 1, 0, 1, 2, true), "in_channels must be divisible by groups");
    CHECK_ERR(ct_nn_dropout(1.5), "dropout probability has to be between 0 and 1");
    ct_module *bn = ct_nn_batch_norm1d(4, 1e-5, 0.1, true, true);
    CHECK_ERR(ct_module_forward(bn, img), "expected 2D or 3D input (got 4D input)");
    ct_module_free(bn);
}

TEST(losses) {
    ct_tensor *x = ct_from_data((float[]){1, 2, 3, 1, 1, 1}, CT_SHAPE(2, 3), CT_FLOAT32);
    ct_tensor *t = ct_from_data((int64_t[]){2, 0}, CT_SHAPE(2), CT_INT64);
    ct_module *ce = ct_nn_cross_entropy_loss(CT_REDUCTION_MEAN);
    double want = 0.5 * ((log(exp(1) + exp(2) + exp(3)) - 3) + log(3));
    CHECK_NEAR(ct_item(ct_module_forward2(ce, x, t)), want, 1e-6);
    CHECK_ERR(ct_module_forward(ce, x), "takes 2 inputs");
    ct_module *mse = ct_nn_mse_loss(CT_REDUCTION_SUM);
    CHECK_NEAR(ct_item(ct_module_forward2(mse, x, ct_zeros_like(x))), 1 + 4 + 9 + 3, 1e-6);
    char *r = repr(mse);
    CHECK_STR(r, "MSELoss()");
    free(r);
    ct_module_free(ce);
    ct_module_free(mse);
}

TEST(data_loader) {
    ct_tensor *x = ct_view(ct_arange(0, 20, 1, CT_FLOAT32), CT_SHAPE(10, 2));
    ct_tensor *y = ct_arange(0, 10, 1, CT_INT64);
    ct_dataset *ds = ct_dataset_new(x, y);
    CHECK_EQ_INT(ct_dataset_size(ds), 10);
    ct_dataloader *dl = ct_dataloader_new(ds, 4, true, false, 7);
    CHECK_EQ_INT(ct_dataloader_num_batches(dl), 3);
    for (int epoch = 0; epoch < 2; epoch++) {
        int seen[10] = {0}, batches = 0;
        ct_tensor *xb, *yb;
        int r;
        while ((r = ct_dataloader_next(dl, &xb, &yb)) == 1) {
            batches++;
            for (int64_t i = 0; i < ct_size(yb, 0); i++) {
                int64_t label = (int64_t)ct_item(ct_select(yb, 0, i));
                seen[label]++;
                CHECK_NEAR(ct_item(ct_select(ct_select(xb, 0, i), 0, 1)), 2 * label + 1, 0);
            }
        }
        CHECK_EQ_INT(r, 0);
        CHECK_EQ_INT(batches, 3);
        for (int i = 0; i < 10; i++) CHECK_EQ_INT(seen[i], 1);
    }
    /* the order of epoch e is torch.manual_seed(seed + e); torch.randperm(n) */
    ct_manual_seed(7);
    ct_tensor *perm = ct_randperm(10, CT_INT64);
    ct_dataloader *dl2 = ct_dataloader_new(ds, 10, true, true, 7);
    ct_tensor *xb, *yb;
    CHECK_EQ_INT(ct_dataloader_next(dl2, &xb, &yb), 1);
    CHECK_NEAR(ct_item(ct_sum(ct_abs(ct_sub(yb, perm)))), 0, 0);
    ct_dataloader *dl3 = ct_dataloader_new(ds, 4, false, true, 0);
    CHECK_EQ_INT(ct_dataloader_num_batches(dl3), 2);
    int n = 0;
    while (ct_dataloader_next(dl3, &xb, &yb) == 1) n++;
    CHECK_EQ_INT(n, 2);
    CHECK_ERR(ct_dataloader_new(ds, 0, false, false, 0), "batch_size should be a positive integer value");
    ct_dataloader_free(dl);
    ct_dataloader_free(dl2);
    ct_dataloader_free(dl3);
    ct_dataset_free(ds);
    CHECK_ERR(ct_dataset_new(x, ct_arange(0, 3, 1, CT_INT64)), "Size mismatch between tensors");
}

/* A training loop runs in flat memory: bytes in use after step 50 and step 500 are equal. */
TEST(training_loop_memory_is_flat) {
    ct_manual_seed(0);
    ct_module *mods[] = {ct_nn_linear(20, 32, true), ct_nn_relu(), ct_nn_linear(32, 4, true)};
    ct_module *m = ct_nn_sequential(mods, 3);
    ct_module *lossf = ct_nn_cross_entropy_loss(CT_REDUCTION_MEAN);
    ct_tensor *ps[4];
    int np = ct_module_named_parameters(m, NULL, ps, 4);
    ct_optimizer *opt = ct_optim_adam(ps, np, 1e-2, 0.9, 0.999, 1e-8, 0, false);
    ct_tensor *x = ct_randn(CT_SHAPE(16, 20), CT_FLOAT32);
    ct_tensor *y = ct_randint(0, 4, CT_SHAPE(16), CT_INT64);
    size_t at50 = 0;
    double first = 0, last = 0;
    for (int step = 1; step <= 500; step++) {
        ct_scope_begin();
        ct_tensor *loss = ct_module_forward2(lossf, ct_module_forward(m, x), y);
        if (step == 1) first = ct_item(loss);
        last = ct_item(loss);
        ct_optimizer_zero_grad(opt, true);
        ct_backward(loss, NULL);
        ct_optimizer_step(opt);
        ct_scope_end();
        if (step == 50) at50 = ct_memory_stats_get().in_use;
    }
    CHECK_EQ_INT(ct_memory_stats_get().in_use, at50);
    CHECK(last < first * 0.5);
    ct_optimizer_free(opt);
    ct_module_free(m);
    ct_module_free(lossf);
}

int main(void) {
    RUN(sequential_repr_and_names);
    RUN(same_module_twice_and_clone);
    RUN(user_module);
    RUN(state_dict_roundtrip_and_errors);
    RUN(layer_shapes_and_modes);
    RUN(losses);
    RUN(data_loader);
    RUN(training_loop_memory_is_flat);
    return REPORT();
}
