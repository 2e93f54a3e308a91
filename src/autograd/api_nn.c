/* api_nn.c: the public functions of the nnfunc rows of ops.def (losses,
 * normalisations, activations) and dropout. Each unwraps its handles (NULL
 * for optional tensors stays NULL), packs OpArgs (layouts in src/ops/nn.c)
 * and calls the autograd wrapper. */
#include "autograd/autograd.h"
#include "ops/nn.h"
#include <math.h>

/* Unwraps an optional handle: true when h is NULL or valid. */
static bool opt(const ct_tensor *h, TensorImpl **t) {
    *t = NULL;
    return !h || (*t = c10_unwrap(h)) != NULL;
}

static bool check_reduction(const char *op, ct_reduction r) {
    if (r == CT_REDUCTION_NONE || r == CT_REDUCTION_MEAN || r == CT_REDUCTION_SUM) return true;
    c10_error("%s: %d is not a valid value for reduction", op, (int)r);
    return false;
}

/* torch's check_no_requires_grad: an argument without a derivative formula
 * (a loss's class weights) may not require grad while grad mode is on */
static bool no_grad_arg(const TensorImpl *t, const char *arg, const char *fn) {
    if (!t || !ag_grad_enabled() || !ag_requires_grad(t)) return true;
    c10_error("The function '%s' is not differentiable with respect to argument '%s'. This input cannot have "
              "requires_grad True.", fn, arg);
    return false;
}
static const char *nll_name(const TensorImpl *x) { return x->ndim <= 2 ? "nll_loss_forward" : "nll_loss2d_forward"; }

/* Ends the caller's scope, returning r (of that scope) to the enclosing one */
static ct_tensor *escape(ct_tensor *r) {
    TensorImpl *t = r ? c10_retain(c10_unwrap(r)) : NULL;
    ct_scope_end();
    return t ? c10_wrap(t) : NULL;
}

/* a tensor and a number as C++ code calls them (the .Scalar overload's node,
 * where Python's binding wraps the number: MulBackward1, not MulBackward0) */
static ct_tensor *by_number(int op, const ct_tensor *a, double v) {
    ct_tensor *r = op == OP_mul ? ct_mul_scalar(a, v) : op == OP_add ? ct_add_scalar(a, v) : ct_div_scalar(a, v);
    if (r) ag_name_node(c10_unwrap(r), op, op == OP_mul ? "MulBackward1" : op == OP_add ? "AddBackward1" : "DivBackward1");
    return r;
}

/* the weight [C] viewed as [1, C, 1, ...] against an input of ndim dims ([C]
 * for a 1-d one) */
static ct_tensor *class_view(const ct_tensor *weight, const TensorImpl *w, int ndim) {
    int64_t shape[CT_MAX_DIMS];
    for (int k = 0; k < ndim; k++) shape[k] = k == (ndim > 1) ? w->sizes[0] : 1;
    return ct_view(weight, shape, ndim);
}

/* class probabilities: -(log_softmax(x) * target' * weight) summed (over the
 * class dim for none; divided by the rows for the mean), target' smoothed */
static ct_tensor *ce_prob(const ct_tensor *lp, const ct_tensor *target, const ct_tensor *weight,
                          const TensorImpl *x, const TensorImpl *w, int cls, ct_reduction reduction, double ls) {
    int64_t C = x->sizes[cls];
    const ct_tensor *tg = ls > 0 ? by_number(OP_add, by_number(OP_mul, target, 1 - ls), ls / (double)C) : target;
    ct_tensor *e = ct_mul(lp, tg);
    if (w) e = ct_mul(e, x->ndim > 1 ? class_view(weight, w, x->ndim) : weight); /* 1-d: the weight itself */
    if (reduction == CT_REDUCTION_NONE) return ct_neg(ct_sum_dims(e, &cls, 1, false));
    ct_tensor *sum = ct_sum(e);
    if (reduction == CT_REDUCTION_SUM) return ct_neg(sum);
    if (x->numel == 0) return sum && ct_fill_(sum, NAN) == 0 ? ct_neg(sum) : NULL; /* torch's NaN */
    return by_number(OP_div, ct_neg(sum), (double)(x->numel / C));
}

/* label smoothing of class indices: (1 - ls) nll_loss + ls / C times the
 * reduced -sum of log_softmax(x) (weighted) over the classes, 0 where ignored;
 * unweighted, the mean is 1.13's masked_select(kept).mean() (its bits, and its
 * refusal on the meta device), not a later torch's sum / count */
static ct_tensor *ce_smooth(const ct_tensor *lp, const ct_tensor *target, const ct_tensor *weight,
                            const TensorImpl *x, const TensorImpl *w, int cls, ct_reduction reduction,
                            int64_t ignore, double ls) {
    ct_tensor *nll = ct_nll_loss(lp, target, weight, reduction, ignore);
    if (!nll) return NULL;
    ct_tensor *ignored = ct_eq_scalar(target, (double)ignore);
    ct_tensor *sm = ct_neg(ct_sum_dims(w ? ct_mul(lp, class_view(weight, w, x->ndim)) : lp, &cls, 1, false));
    if (!sm || !ignored || ct_masked_fill_(sm, ignored, 0.0) < 0) return NULL;
    ct_tensor *ret = sm;
    if (reduction == CT_REDUCTION_SUM) {
        ret = ct_sum(sm);
    } else if (reduction == CT_REDUCTION_MEAN) { /* over the kept targets (their weights), as nll_loss */
        ct_tensor *kept = ct_logical_not(ignored);
        ret = w ? ct_div(ct_sum(sm), ct_sum(ct_gather(weight, 0, ct_flatten(ct_masked_select(target, kept), 0, -1))))
                : ct_mean(ct_masked_select(sm, kept));
    }
    return ct_add(by_number(OP_mul, nll, 1 - ls), by_number(OP_mul, ret, ls / (double)x->sizes[cls]));
}

/* torch 1.13's cross_entropy (LossNLL.cpp), a composite of these public ops:
 * its checks in its order, then log_softmax over the class dim and nll_loss,
 * or the class probabilities' or label smoothing's formulas. Its nodes are
 * theirs (LogSoftmax saves its result, not the input) and so are its dtypes. */
ct_tensor *ct_cross_entropy(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                            ct_reduction reduction, int64_t ignore_index, double label_smoothing) {
    TensorImpl *x = c10_unwrap(input), *t = x ? c10_unwrap(target) : NULL, *w;
    if (!t || !opt(weight, &w) || !check_reduction("cross_entropy", reduction)) return NULL;
    double ls = label_smoothing > 0 ? label_smoothing : 0; /* torch smooths only above 0 */
    bool prob = x->ndim == t->ndim && !memcmp(x->sizes, t->sizes, sizeof(int64_t) * (size_t)x->ndim);
    int cls = x->ndim == 1 ? 0 : 1;
    if (prob) {
        if (!c10_is_float(t->dtype))
            return c10_error("cross_entropy: Expected floating point type for target with class probabilities, got %s",
                             c10_dtype_cname(t->dtype));
        if (ignore_index >= 0) return c10_error("cross_entropy: ignore_index is not supported for floating point target");
        if (x->ndim == 0) return c10_error("cross_entropy: Dimension specified as 1 but tensor has no dimensions");
        if (w && (w->ndim != 1 || w->numel != x->sizes[cls]))
            return c10_error("cross_entropy: weight tensor should be defined either for all %lld classes or no classes "
                             "but got weight tensor of shape: %s", (long long)x->sizes[cls], c10_shape_str(w->sizes, w->ndim));
    }
    bool bad = ls > 1;
    if (bad && !prob) return c10_error("cross_entropy: label_smoothing must be between 0.0 and 1.0. Got: %g", label_smoothing);
    ct_scope_begin();
    ct_tensor *lp = ct_log_softmax(input, cls), *r = NULL;
    if (lp && bad) c10_error("cross_entropy: label_smoothing must be between 0.0 and 1.0. Got: %g", label_smoothing);
    else if (lp && prob) r = ce_prob(lp, target, weight, x, w, cls, reduction, ls);
    else if (lp && ls > 0) r = ce_smooth(lp, target, weight, x, w, cls, reduction, ignore_index, ls);
    else if (lp) r = ct_nll_loss(lp, target, weight, reduction, ignore_index);
    return escape(r);
}

ct_tensor *ct_nll_loss(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                       ct_reduction reduction, int64_t ignore_index) {
    TensorImpl *x = c10_unwrap(input), *t = x ? c10_unwrap(target) : NULL, *w;
    if (!t || !opt(weight, &w) || !check_reduction("nll_loss", reduction) || !no_grad_arg(w, "weight", nll_name(x)))
        return NULL;
    OpArgs a = {.t = {x, t, w}, .nt = 3, .i = {reduction, ignore_index}, .ni = 2};
    return c10_wrap(ag_call1(OP_nll_loss, &a));
}

static ct_tensor *pw_loss(int op, const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                          const ct_tensor *pos_weight, ct_reduction reduction, double beta) {
    TensorImpl *x = c10_unwrap(input), *t = x ? c10_unwrap(target) : NULL, *w, *pw;
    if (!t || !opt(weight, &w) || !opt(pos_weight, &pw) || !check_reduction(op_info[op].name, reduction) ||
        !no_grad_arg(w, "weight", op_info[op].name) || !no_grad_arg(pw, "pos_weight", op_info[op].name))
        return NULL;
    OpArgs a = {.t = {x, t, w, pw}, .nt = 4, .i = {reduction}, .ni = 1, .s = {beta}};
    return c10_wrap(ag_call1(op, &a));
}

ct_tensor *ct_mse_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction) {
    return pw_loss(OP_mse_loss, input, target, NULL, NULL, reduction, 0);
}
/* input or target broadcast to shape (themselves when already that shape, as
 * torch's broadcast_tensors); a new reference */
static TensorImpl *expand_to(TensorImpl *t, const int64_t *shape, int nd) {
    if (t->ndim == nd && !memcmp(t->sizes, shape, sizeof(int64_t) * (size_t)nd)) return c10_retain(t);
    OpArgs a = {.t = {t}, .nt = 1, .ni = nd};
    memcpy(a.i, shape, sizeof(int64_t) * (size_t)nd);
    return ag_call1(OP_expand, &a);
}

/* torch 1.13's F.l1_loss is a composite: broadcast_tensors(input, target),
 * (input - target).abs(), then the reduction. Its history is those nodes (Abs
 * saves only the difference, so input and target may change in place after
 * the call), its errors and dtypes theirs (bools do not subtract, integers
 * have no mean). */
ct_tensor *ct_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction) {
    TensorImpl *x = c10_unwrap(input), *t = x ? c10_unwrap(target) : NULL;
    int64_t shape[CT_MAX_DIMS];
    int nd = t ? c10_broadcast_shape(x->sizes, x->ndim, t->sizes, t->ndim, shape) : -1;
    if (nd < 0 || !check_reduction("l1_loss", reduction)) return NULL;
    TensorImpl *xe = expand_to(x, shape, nd), *te = xe ? expand_to(t, shape, nd) : NULL;
    TensorImpl *d = ag_binary(OP_sub, xe, te), *r = ag_unary(OP_abs, d);
    c10_release(xe), c10_release(te), c10_release(d);
    if (r && reduction != CT_REDUCTION_NONE) {
        OpArgs a = {.t = {r}, .nt = 1, .ni = 2}; /* keepdim false, every dim */
        TensorImpl *red = ag_call1(reduction == CT_REDUCTION_MEAN ? OP_mean : OP_sum, &a);
        c10_release(r);
        r = red;
    }
    return c10_wrap(r);
}
ct_tensor *ct_smooth_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction, double beta) {
    return pw_loss(OP_smooth_l1_loss, input, target, NULL, NULL, reduction, beta);
}
ct_tensor *ct_binary_cross_entropy(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                                   ct_reduction reduction) {
    return pw_loss(OP_binary_cross_entropy, input, target, weight, NULL, reduction, 0);
}
ct_tensor *ct_binary_cross_entropy_with_logits(const ct_tensor *input, const ct_tensor *target,
                                               const ct_tensor *weight, const ct_tensor *pos_weight,
                                               ct_reduction reduction) {
    return pw_loss(OP_binary_cross_entropy_with_logits, input, target, weight, pos_weight, reduction, 0);
}

ct_tensor *ct_layer_norm(const ct_tensor *input, const int64_t *normalized_shape, int n, const ct_tensor *weight,
                         const ct_tensor *bias, double eps) {
    TensorImpl *x = c10_unwrap(input), *w, *b;
    if (!x || !opt(weight, &w) || !opt(bias, &b)) return NULL;
    if (n < 0 || n > CT_MAX_DIMS || (n > 0 && !normalized_shape))
        return c10_error("layer_norm: invalid normalized_shape (%d dims)", n);
    OpArgs a = {.t = {x, w, b}, .nt = 3, .ni = n, .s = {eps}};
    for (int k = 0; k < n; k++) a.i[k] = normalized_shape[k];
    return c10_wrap(ag_call1(OP_layer_norm, &a));
}

/* torch's batch_norm of an empty input [N, C, ...] (after the batch check):
 * input.clone() * weight[0] + bias[0], before any check of the parameters'
 * or running statistics' sizes (left as they are), with that history. */
static TensorImpl *bn_empty(TensorImpl *x, TensorImpl *w, TensorImpl *b) {
    OpArgs a = {.t = {x}, .nt = 1};
    TensorImpl *y = ag_call1(OP_clone, &a), *p[2] = {w, b};
    for (int k = 0; k < 2 && y; k++) {
        if (!p[k]) continue;
        OpArgs s = {.t = {p[k]}, .nt = 1, .i = {0, 0}, .ni = 2};
        TensorImpl *e = ag_call1(OP_select, &s), *r = ag_binary(k ? OP_add : OP_mul, y, e);
        c10_release(e), c10_release(y);
        y = r;
    }
    return y;
}

ct_tensor *ct_batch_norm(const ct_tensor *input, ct_tensor *running_mean, ct_tensor *running_var,
                         const ct_tensor *weight, const ct_tensor *bias, bool training, double momentum, double eps) {
    TensorImpl *x = c10_unwrap(input), *w, *b, *rm, *rv;
    if (!x || !opt(weight, &w) || !opt(bias, &b) || !opt(running_mean, &rm) || !opt(running_var, &rv)) return NULL;
    if (!x->numel && x->ndim >= 2) /* F.batch_norm's batch check first */
        return training && nn_batch_norm_check(x, NULL, NULL, NULL, NULL, true) ? NULL : c10_wrap(bn_empty(x, w, b));
    /* checked here too, so that messages name batch_norm rather than its eval row */
    if (nn_batch_norm_check(x, w, b, rm, rv, training) < 0) return NULL;
    OpArgs a = {.t = {x, w, b, rm, rv}, .nt = 5, .i = {training}, .ni = 1, .s = {momentum, eps}};
    return c10_wrap(ag_call1(training ? OP_batch_norm : OP_batch_norm_eval, &a));
}

static ct_tensor *act(int op, const ct_tensor *h, double s0, double s1) {
    TensorImpl *x = c10_unwrap(h);
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .s = {s0, s1}};
    return c10_wrap(ag_call1(op, &a));
}
ct_tensor *ct_hardtanh(const ct_tensor *a, double min_val, double max_val) {
    TensorImpl *x = c10_unwrap(a);
    bool fits = min_val >= -0x1p63 && min_val < 0x1p63 && max_val >= -0x1p63 && max_val < 0x1p63;
    if (x && !c10_is_float(x->dtype) && x->dtype != CT_BOOL && !fits) /* bounds as int64 Scalars (after bool) */
        return c10_error("hardtanh: value cannot be converted to type int64_t without overflow");
    if (x && x->dtype == CT_UINT8 && (trunc(min_val) < 0 || trunc(max_val) < 0)) /* torch's toLong()s */
        return c10_error("hardtanh: cannot do hardtanh on an unsigned type with negative limits");
    return act(OP_hardtanh, a, min_val, max_val);
}
ct_tensor *ct_relu6(const ct_tensor *a) { return act(OP_hardtanh, a, 0, 6); }
ct_tensor *ct_leaky_relu(const ct_tensor *a, double negative_slope) { return act(OP_leaky_relu, a, negative_slope, 0); }
ct_tensor *ct_elu(const ct_tensor *a, double alpha) { return act(OP_elu, a, alpha, 0); }

/* ------------------------------------------------------------------ dropout */

ct_tensor *ct_dropout(const ct_tensor *input, double p, bool training) {
    TensorImpl *x = c10_unwrap(input);
    if (!x) return NULL;
    if (!(p >= 0 && p <= 1)) return c10_error("dropout probability has to be between 0 and 1, but got %g", p);
    if (p == 0 || !training || x->numel == 0) return c10_wrap(c10_retain(x));
    TensorImpl *noise;
    if (p == 1) { /* torch: input * 0, whatever the dtype */
        noise = c10_scalar_tensor(0, x->dtype, x->device);
    } else if (!c10_is_float(x->dtype)) { /* torch's noise.div_(1 - p) into the integer noise */
        return c10_error("dropout: result type Float can't be cast to the desired output type %s",
                         c10_dtype_cname(x->dtype));
    } else {
        /* torch: empty_like(input, LEGACY_CONTIGUOUS_MEMORY_FORMAT).bernoulli_(1 - p) */
        noise = c10_empty(x->sizes, x->ndim, x->dtype, x->device);
        if (noise && x->device != CT_META) {
            c10_bernoulli_fill(noise, 1 - p);
            /* noise.div_(1 - p), computed as torch does in the dtype's compute type,
             * the scalar first cast to the dtype (a 16-bit one rounds it) */
            float q = (float)(1 - p);
            if (x->dtype == CT_BFLOAT16) q = c10_bf2f(c10_f2bf(q));
            if (x->dtype == CT_FLOAT16) q = c10_h2f(c10_f2h(q));
            double scale = x->dtype == CT_FLOAT64 ? 1 / (1 - p) : (double)(1.0f / q);
            TensorImpl *s = c10_scalar_tensor(scale, CT_FLOAT64, CT_CPU);
            if (s) s->is_wrapped_number = true;
            OpArgs m = {.t = {noise, s}, .nt = 2, .s = {1}, .dst = noise};
            TensorImpl *o[OP_MAX_OUTS];
            int rc = s ? at_call(OP_mul, &m, o) : -1;
            c10_release(s);
            if (rc < 0) {
                c10_release(noise);
                return NULL;
            }
            for (int k = 0; k < rc; k++) c10_release(o[k]);
        }
    }
    if (!noise) return NULL;
    TensorImpl *r = ag_binary(OP_mul, x, noise);
    c10_release(noise);
    return c10_wrap(r);
}
