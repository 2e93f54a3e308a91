/* loss.c: torch.nn's losses as modules: forward2(input, target), with
 * reduction none / mean / sum, over the functional forms (nnfunc's ct_*_loss). */
#include "nn/nn.h"

enum { L_CE, L_NLL, L_MSE, L_L1, L_SMOOTH_L1, L_BCE, L_BCE_LOGITS };


static ct_tensor *loss_fwd(ct_module *m, const ct_tensor *const *in, int n, void *ctx) {
    const NnCfg *c = ctx;
    if (n != 2)
        return c10_error("%s.forward() takes 2 inputs (input, target) but %d were given", ct_module_type_name(m), n);
    const ct_tensor *x = in[0], *t = in[1];
    ct_reduction r = (ct_reduction)c->reduction;
    switch (c->kind) {
    case L_CE: return ct_cross_entropy(x, t, NULL, r, c->ignore_index, 0.0);
    case L_NLL: return ct_nll_loss(x, t, NULL, r, c->ignore_index);
    case L_MSE: return ct_mse_loss(x, t, r);
    case L_L1: return ct_l1_loss(x, t, r);
    case L_SMOOTH_L1: return ct_smooth_l1_loss(x, t, r, c->beta);
    case L_BCE: return ct_binary_cross_entropy(x, t, NULL, r);
    case L_BCE_LOGITS: return ct_binary_cross_entropy_with_logits(x, t, NULL, NULL, r);
    default: return c10_error("loss: unknown kind");
    }
}

static int loss_repr(const ct_module *m, char *buf, size_t cap, void *ctx) {
    (void)m;
    (void)ctx;
    if (buf && cap) buf[0] = 0;
    return 0;
}

static ct_module *make_loss(int kind, const char *name, ct_reduction r, double beta) {
    if (r != CT_REDUCTION_NONE && r != CT_REDUCTION_MEAN && r != CT_REDUCTION_SUM)
        return c10_error("%d is not a valid value for reduction", (int)r);
    NnCfg c = {.kind = kind, .reduction = r, .beta = beta, .ignore_index = -100};
    ct_module_ops ops = {.name = name, .forward = loss_fwd, .extra_repr = loss_repr, .clone_ctx = nn_cfg_clone,
                         .free_ctx = nn_cfg_free};
    return nn_builtin(&ops, &c);
}

ct_module *ct_nn_cross_entropy_loss(ct_reduction r) { return make_loss(L_CE, "CrossEntropyLoss", r, 0); }
ct_module *ct_nn_nll_loss(ct_reduction r) { return make_loss(L_NLL, "NLLLoss", r, 0); }
ct_module *ct_nn_mse_loss(ct_reduction r) { return make_loss(L_MSE, "MSELoss", r, 0); }
ct_module *ct_nn_l1_loss(ct_reduction r) { return make_loss(L_L1, "L1Loss", r, 0); }
ct_module *ct_nn_smooth_l1_loss(ct_reduction r, double beta) {
    return make_loss(L_SMOOTH_L1, "SmoothL1Loss", r, beta);
}
ct_module *ct_nn_bce_loss(ct_reduction r) { return make_loss(L_BCE, "BCELoss", r, 0); }
ct_module *ct_nn_bce_with_logits_loss(ct_reduction r) { return make_loss(L_BCE_LOGITS, "BCEWithLogitsLoss", r, 0); }
