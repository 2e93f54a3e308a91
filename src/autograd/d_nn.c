/* d_nn.c: backward formulas of the nnfunc rows of ops.def (losses and
 * normalisations).
 *
 * Each formula has two paths:
 *   - first-order backward (grad mode off inside the engine, i.e. no
 *     create_graph): one fused kernel from src/ops/nn.c (nn_*_grad);
 *   - create_graph: the same gradient built from ag_* ops (softmax, mean, mul,
 *     ...), so that it is itself recorded and can be differentiated again.
 * Constants of the composite formulas (which classes a target picks, with its
 * weights) are computed without history: they do not depend on the input.
 * The rows have one output each: statistics (logsumexp, mean, rstd) are
 * recomputed from the saved input in the backward rather than kept as extra
 * outputs, which would cost memory for the whole life of the graph.
 * Limitations: weights (and pos_weight) are not differentiable, as in PyTorch
 * ("the derivative for 'weight' is not implemented"). cross_entropy and
 * l1_loss are composites of public ops (src/autograd/api_nn.c), as torch's. */
#include "autograd/formulas.h"
#include "ops/nn.h"
#include <math.h>


static int weight_not_differentiable(const BackwardCtx *c, int from) {
    for (int k = from; k < c->node->num_next; k++)
        if (c->needs[k])
            return c10_error_int("the derivative for '%s' is not implemented.", k == from ? "weight" : "pos_weight");
    return 0;
}

/* x with a size-1 dim inserted at d */
static TensorImpl *unsqueeze(TensorImpl *x, int d) {
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {d}, .ni = 1};
    return F(ag_call1(OP_unsqueeze, &a));
}
/* x (a [C] vector) viewed to broadcast along dim 1 of an ndim-dim tensor */
static TensorImpl *channel_view(TensorImpl *x, int ndim) {
    if (!x || ndim <= 2) return x;
    OpArgs a = {.t = {x}, .nt = 1, .ni = ndim - 1};
    a.i[0] = x->numel;
    for (int k = 1; k < ndim - 1; k++) a.i[k] = 1;
    return F(ag_call1(OP_view, &a));
}
/* reduction over dims (mask) keeping them: sum (op OP_sum_dims) or mean */
static TensorImpl *reduce_dims(int op, TensorImpl *x, const int *dims, int n, bool keepdim) {
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {keepdim, n}, .ni = 2 + n};
    for (int k = 0; k < n; k++) a.i[2 + k] = dims[k];
    return F(ag_call1(op, &a));
}

/* ---------------------------------------------------------- classification */

/* The loss gradient broadcastable against the input: unsqueezed at the class
 * dim (none), divided by the weight total (mean). */
static TensorImpl *class_gb(BackwardCtx *c, TensorImpl *x, TensorImpl *target, TensorImpl *w) {
    int64_t reduction = c->args->i[0], ignore = c->args->i[1];
    if (reduction == CT_REDUCTION_NONE) return x->ndim > 1 ? unsqueeze(G, 1) : G;
    if (reduction == CT_REDUCTION_SUM) return G;
    ClassGeom g;
    if (nn_class_geom("nll_loss", x, target, w, &g) < 0) return NULL;
    TensorImpl *tc = F(nn_contig(target, CT_INT64));
    if (!tc) return NULL;
    double D = nn_class_divisor(&g, (const int64_t *)c10_data(tc), w, ignore);
    if (D == 0) /* every target ignored: the gradient is 0 (as PyTorch's), whatever G holds (NaN too) */
        return F(c10_scalar_tensor(0, G->dtype, G->device));
    return DIVS(G, D);
}

int d_nll_loss(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *x = c->in[0], *target = c->in[1], *w = c->in[2];
    int64_t reduction = c->args->i[0], ignore = c->args->i[1];
    if (weight_not_differentiable(c, 2) < 0) return -1;
    if (!c->needs[0]) return 0;
    if (!ag_grad_enabled()) return (gi[0] = nn_nll_grad(x, target, w, G, reduction, ignore, false)) ? 0 : -1;
    TensorImpl *unit = F(nn_nll_grad(x, target, w, G, reduction, ignore, true));
    TensorImpl *r = MUL(unit, class_gb(c, x, target, w));
    return (gi[0] = c10_retain(r)) ? 0 : -1;
}

/* ------------------------------------------------------------ pointwise losses */

/* d loss / d input (which 0) or d loss / d target (1), per element, from ag ops */
static TensorImpl *pw_composite(BackwardCtx *c, int op, int which) {
    TensorImpl *x = c->in[0], *y = c->in[1], *w = c->in[2], *pw = c->in[3];
    double beta = c->args->s[0];
    TensorImpl *d = NULL;
    if (y->dtype == CT_BOOL) y = F(at_to_dtype(y, x->dtype)); /* the kernels' promotion (sub refuses bool) */
    if (!y) return NULL;
    switch (op) {
    case OP_mse_loss:
        d = MULS(SUB(x, y), 2);
        break;
    case OP_smooth_l1_loss: { /* as the fused kernel: -1, 1, or diff / beta between; torch
                                 takes the target's with x and y swapped, not negated */
        TensorImpl *diff = which == 0 ? SUB(x, y) : SUB(y, x);
        TensorImpl *one = F(ag_wrapped_scalar(1, diff ? diff->dtype : CT_FLOAT32)), *mone = NEG(one);
        /* the middle, |diff| < beta: diff / beta; elsewhere in it (a NaN diff, or
         * beta 0: only NaN's) diff * 0, as torch's double backward is 0 there */
        TensorImpl *zero = MULS(diff, 0), *mid = zero;
        if (beta > 0) {
            OpArgs m = {.t = {CMPS(lt, UN(abs, diff), beta), DIVS(diff, beta), zero}, .nt = 3};
            mid = m.t[0] && m.t[1] && zero ? F(ag_call1(OP_where, &m)) : NULL;
        }
        OpArgs hi = {.t = {CMPS(ge, diff, beta), one, mid}, .nt = 3};
        OpArgs lo = {.t = {CMPS(le, diff, -beta), mone, hi.t[0] && hi.t[2] ? F(ag_call1(OP_where, &hi)) : NULL},
                     .nt = 3};
        d = hi.t[0] && hi.t[2] && lo.t[0] && lo.t[2] ? F(ag_call1(OP_where, &lo)) : NULL;
        break;
    }
    case OP_binary_cross_entropy:
        if (which == 0) {
            TensorImpl *den = F(ag_binary_scalar(OP_maximum, MUL(ADDS(NEG(x), 1), x), (double)1e-12f)); /* torch's float EPSILON */
            d = DIV(SUB(x, y), den);
        } else {
            d = SUB(UN(log, ADDS(NEG(x), 1)), UN(log, x));
        }
        break;
    default: /* binary_cross_entropy_with_logits */
        if (which == 0) {
            TensorImpl *s = UN(sigmoid, x);
            if (pw) {
                TensorImpl *py = MUL(pw, y);
                d = SUB(MUL(SUB(ADDS(py, 1), y), s), py);
            } else {
                d = SUB(s, y);
            }
        } else {
            if (pw) { /* torch's log_sigmoid(-x) - pw log_sigmoid(x) */
                OpArgs sn = {.t = {NEG(x)}, .nt = 1, .s = {1, 20}}, sp = {.t = {x}, .nt = 1, .s = {1, 20}};
                d = sn.t[0] ? SUB(MUL(pw, F(ag_call1(OP_softplus, &sn))), F(ag_call1(OP_softplus, &sp))) : NULL;
            } else {
                d = NEG(x);
            }
        }
        break;
    }
    if (which == 1 && op != OP_binary_cross_entropy && op != OP_binary_cross_entropy_with_logits && op != OP_smooth_l1_loss)
        d = NEG(d);
    if (w) d = MUL(d, w);
    int64_t reduction = c->args->i[0];
    TensorImpl *g = G;
    if (reduction == CT_REDUCTION_MEAN) {
        int64_t shape[CT_MAX_DIMS];
        int nd = c10_broadcast_shape(x->sizes, x->ndim, y->sizes, y->ndim, shape);
        int64_t numel = 1;
        for (int k = 0; k < nd; k++) numel *= shape[k];
        g = DIVS(G, (double)numel);
    }
    return MUL(d, g);
}

int d_pw_loss(BackwardCtx *c, TensorImpl **gi) {
    int op = c->node->op;
    if (weight_not_differentiable(c, 2) < 0) return -1;
    OpArgs a = *c->args;
    for (int k = 0; k < 4; k++) a.t[k] = c->in[k];
    for (int which = 0; which < 2; which++) {
        if (!c->needs[which]) continue;
        TensorImpl *r = ag_grad_enabled() ? c10_retain(pw_composite(c, op, which)) : nn_pw_grad(op, &a, G, which);
        if (!r) return -1;
        gi[which] = r;
    }
    return 0;
}

/* ----------------------------------------------------------- normalisation */

/* gx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) over dims, from ag ops */
static TensorImpl *norm_input_grad(TensorImpl *gh, TensorImpl *xhat, TensorImpl *rstd, const int *dims, int n) {
    TensorImpl *m1 = reduce_dims(OP_mean_dims, gh, dims, n, true);
    TensorImpl *m2 = reduce_dims(OP_mean_dims, MUL(gh, xhat), dims, n, true);
    return MUL(rstd, SUB(SUB(gh, m1), MUL(xhat, m2)));
}

/* xhat and rstd of x normalised over dims, from ag ops */
static TensorImpl *normalise(TensorImpl *x, const int *dims, int n, double eps, TensorImpl **rstd) {
    TensorImpl *xc = SUB(x, reduce_dims(OP_mean_dims, x, dims, n, true));
    TensorImpl *var = reduce_dims(OP_mean_dims, MUL(xc, xc), dims, n, true);
    *rstd = UN(rsqrt, ADDS(var, eps));
    return MUL(xc, *rstd);
}

int d_layer_norm(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *x = c->in[0], *w = c->in[1];
    int nn = c->args->ni;
    if (!ag_grad_enabled()) {
        bool needs[3] = {c->needs[0], c->needs[1], c->node->num_next > 2 && c->needs[2]};
        return nn_layer_norm_grad(x, w, c->args->s[0], G, c->args->i, nn, needs, gi);
    }
    int dims[CT_MAX_DIMS];
    for (int k = 0; k < nn; k++) dims[k] = x->ndim - nn + k;
    TensorImpl *rstd = NULL, *xhat = normalise(x, dims, nn, c->args->s[0], &rstd);
    if (!xhat) return -1;
    if (c->needs[0]) {
        TensorImpl *r = norm_input_grad(w ? MUL(G, w) : G, xhat, rstd, dims, nn);
        if (!r) return -1;
        gi[0] = c10_retain(r);
    }
    if (w && c->needs[1] && !(gi[1] = c10_retain(MUL(G, xhat)))) return -1; /* the engine sums to w's shape */
    if (c->node->num_next > 2 && c->needs[2]) gi[2] = c10_retain(G);
    return 0;
}

int d_batch_norm(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *x = c->in[0], *w = c->in[1];
    bool training = c->node->op == OP_batch_norm;
    TensorImpl *rm = c->in[3], *rv = c->in[4];
    double eps = c->args->s[1];
    bool needs[3] = {c->needs[0], c->needs[1], c->node->num_next > 2 && c->needs[2]};
    if (!ag_grad_enabled()) return nn_batch_norm_grad(x, w, rm, rv, eps, G, training, needs, gi);
    int dims[CT_MAX_DIMS], n = 0;
    for (int k = 0; k < x->ndim; k++)
        if (k != 1) dims[n++] = k;
    TensorImpl *rstd = NULL, *xhat;
    if (training) {
        xhat = normalise(x, dims, n, eps, &rstd);
    } else {
        TensorImpl *m = channel_view(F(at_to_dtype(rm, x->dtype)), x->ndim);
        rstd = channel_view(UN(rsqrt, ADDS(F(at_to_dtype(rv, x->dtype)), eps)), x->ndim);
        xhat = MUL(SUB(x, m), rstd);
    }
    if (!xhat) return -1;
    TensorImpl *wv = w ? channel_view(w, x->ndim) : NULL;
    if (needs[0]) {
        TensorImpl *gh = wv ? MUL(G, wv) : G;
        TensorImpl *r = training ? norm_input_grad(gh, xhat, rstd, dims, n) : MUL(gh, rstd);
        if (!r) return -1;
        gi[0] = c10_retain(r);
    }
    if (w && needs[1] && !(gi[1] = c10_retain(reduce_dims(OP_sum_dims, MUL(G, xhat), dims, n, false)))) return -1;
    if (needs[2] && !(gi[2] = c10_retain(reduce_dims(OP_sum_dims, G, dims, n, false)))) return -1;
    return 0;
}
