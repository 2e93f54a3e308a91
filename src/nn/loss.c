/* loss.c: torch.nn's losses as modules: forward2(input, target), with
 * reduction none / mean / sum, over the functional forms. */
#include "nn/nn.h"

enum { L_CE, L_NLL, L_MSE, L_L1, L_SMOOTH_L1, L_BCE, L_BCE_LOGITS };

static const char *red_name(int r) { return r == CT_REDUCTION_NONE ? "none" : r == CT_REDUCTION_SUM ? "sum" : "mean"; }

static ct_tensor *loss_fwd(ct_module *m, const ct_tensor *const *in, int n, void *ctx) {
    const NnCfg *c = ctx;
    if (n != 2) return c10_error("%s.forward() takes 2 inputs (input, target) but %d were given", ct_module_type_name(m), n);
    const ct_tensor *x = in[0], *t = in[1];
    const char *op = ct_module_type_name(m);
    if (c->kind != L_CE && c->kind != L_NLL) {
        if (ct_ndim(x) != ct_ndim(t) || memcmp(ct_sizes(x), ct_sizes(t), (size_t)ct_ndim(x) * sizeof(int64_t)))
            if (c->kind == L_BCE || c->kind == L_BCE_LOGITS)
                return c10_error("Using a target size (%s) that is different to the input size (%s) is deprecated. "
                                 "Please ensure they have the same size.",
                                 c10_shape_str(ct_sizes(t), ct_ndim(t)), c10_shape_str(ct_sizes(x), ct_ndim(x)));
    }
    ct_scope_begin();
    ct_tensor *loss = NULL;
    switch (c->kind) {
    case L_CE: {
        if (ct_ndim(x) < 1) {
            ct_scope_end();
            return c10_error("%s: input must have at least 1 dim", op);
        }
        ct_tensor *r = nn_f_nll(ct_log_softmax(x, ct_ndim(x) == 1 ? 0 : 1), t, c->reduction, c->ignore_index);
        return nn_escape(r);
    }
    case L_NLL: return nn_escape(nn_f_nll(x, t, c->reduction, c->ignore_index));
    case L_MSE: loss = ct_square(ct_sub(x, t)); break;
    case L_L1: loss = ct_abs(ct_sub(x, t)); break;
    case L_SMOOTH_L1: {
        ct_tensor *z = ct_abs(ct_sub(x, t));
        if (c->beta == 0) {
            loss = z;
        } else {
            ct_tensor *quad = ct_div_scalar(ct_mul_scalar(ct_square(z), 0.5), c->beta);
            loss = ct_where(ct_lt_scalar(z, c->beta), quad, ct_sub_scalar(z, 0.5 * c->beta));
        }
        break;
    }
    case L_BCE: {
        ct_tensor *bad = ct_any(ct_logical_or(ct_lt_scalar(x, 0), ct_gt_scalar(x, 1)));
        if (bad && ct_item(bad) != 0) {
            ct_scope_end();
            return c10_error("all elements of input should be between 0 and 1");
        }
        ct_tensor *lx = ct_clamp(ct_log(x), -100, NAN);
        ct_tensor *l1x = ct_clamp(ct_log(ct_rsub_scalar(x, 1)), -100, NAN);
        loss = ct_neg(ct_add(ct_mul(t, lx), ct_mul(ct_rsub_scalar(t, 1), l1x)));
        break;
    }
    case L_BCE_LOGITS: {
        ct_tensor *maxv = ct_clamp(ct_neg(x), 0, NAN);
        ct_tensor *lse = ct_log(ct_add(ct_exp(ct_neg(maxv)), ct_exp(ct_sub(ct_neg(x), maxv))));
        loss = ct_add(ct_add(ct_mul(ct_rsub_scalar(t, 1), x), maxv), lse);
        break;
    }
    }
    return nn_escape(nn_f_reduce(loss, c->reduction));
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
    (void)red_name;
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
    if (beta < 0) return c10_error("smooth_l1_loss does not support negative values for beta.");
    return make_loss(L_SMOOTH_L1, "SmoothL1Loss", r, beta);
}
ct_module *ct_nn_bce_loss(ct_reduction r) { return make_loss(L_BCE, "BCELoss", r, 0); }
ct_module *ct_nn_bce_with_logits_loss(ct_reduction r) { return make_loss(L_BCE_LOGITS, "BCEWithLogitsLoss", r, 0); }
