/* d_reduce.c: backward formulas of the reduction rows (PyTorch's
 * derivatives.yaml and FunctionsManual.cpp). Built from ag_* ops, so that
 * create_graph records them, to any order: the zero-handling paths of prod
 * and cumprod too (their masks are constants). */
#include "autograd/formulas.h"
#include <math.h>
#include <stdlib.h>



/* ---- shapes ---- */

/* The reduced dims of the row's call (layouts in src/ops/reduce.c). */
static void list_mask(const BackwardCtx *c, bool *mask, bool *keepdim) {
    int nd = c->node->in_meta[0].ndim, n = (int)c->args->i[1];
    *keepdim = c->args->i[0] != 0;
    for (int d = 0; d < CT_MAX_DIMS; d++) mask[d] = n == 0 && d < nd;
    for (int k = 0; k < n && nd > 0; k++) {
        int64_t d = c->args->i[2 + k];
        mask[d < 0 ? d + nd : d] = true;
    }
}
static int dim_mask(const BackwardCtx *c, bool *mask, bool *keepdim) {
    int nd = c->node->in_meta[0].ndim;
    int64_t d = c->args->i[0];
    d = d < 0 ? d + nd : d;
    for (int k = 0; k < CT_MAX_DIMS; k++) mask[k] = false;
    if (nd > 0) mask[d] = true;
    *keepdim = c->args->i[1] != 0;
    return (int)(nd > 0 ? d : 0);
}

/* x with the reduced dims put back as size 1 (keepdim's shape) */
static TensorImpl *restore(TensorImpl *x, const bool *mask, bool keepdim, int ndim) {
    if (!x || keepdim) return x;
    for (int d = 0; d < ndim; d++) {
        if (!mask[d]) continue;
        OpArgs a = {.t = {x}, .nt = 1, .i = {d}, .ni = 1};
        x = F(ag_call1(OP_unsqueeze, &a));
        if (!x) return NULL;
    }
    return x;
}
static TensorImpl *expand_to(TensorImpl *x, const InputMeta *m) {
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .ni = m->ndim};
    memcpy(a.i, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    return F(ag_call1(OP_expand, &a));
}
/* sum over mask with keepdim */
static TensorImpl *sum_keep(TensorImpl *x, const bool *mask, int ndim) {
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {1, 0}};
    int n = 0;
    for (int d = 0; d < ndim; d++)
        if (mask[d]) a.i[2 + n++] = d;
    if (n == 0) return x; /* nothing reduced */
    a.i[1] = n;
    a.ni = 2 + n;
    return F(ag_call1(OP_sum_dims, &a));
}
static int64_t reduced_count(const InputMeta *m, const bool *mask) {
    int64_t n = 1;
    for (int d = 0; d < m->ndim; d++)
        if (mask[d]) n *= m->sizes[d];
    return n;
}
/* x where x != 0, else 1 (a safe denominator) */
static TensorImpl *nonzero_or_one(TensorImpl *x) { return ADD(x, EQS(x, 0)); }

/* ---- sum, mean ---- */

int d_sum(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    bool mask[CT_MAX_DIMS], keepdim;
    list_mask(c, mask, &keepdim);
    RET(expand_to(restore(G, mask, keepdim, m->ndim), m));
}

int d_mean(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    bool mask[CT_MAX_DIMS], keepdim;
    list_mask(c, mask, &keepdim);
    TensorImpl *g = expand_to(restore(G, mask, keepdim, m->ndim), m);
    RET(DIVS(g, (double)reduced_count(m, mask)));
}

/* How many of t's elements are exactly 0, counting up to upto (picks the
 * formula; not differentiated) */
static int64_t zeros_in(const TensorImpl *t, int64_t upto) {
    if (t->device == CT_META || t->numel == 0) return 0;
    TensorImpl *x = c10_empty(t->sizes, t->ndim, CT_FLOAT64, t->device);
    int64_t z = 0;
    if (x && at_copy_(x, t) == 0) {
        const double *p = (const double *)c10_data(x);
        for (int64_t i = 0; i < x->numel && z < upto; i++) z += p[i] == 0;
    }
    c10_release(x);
    return z;
}
static bool has_zero(const TensorImpl *t) { return zeros_in(t, 1) > 0; }
static TensorImpl *sum_dim_keep(TensorImpl *x, int64_t dim) {
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {1, 1, dim}, .ni = 3};
    return F(ag_call1(OP_sum_dims, &a));
}

/* ---- products with zeros ----
 * Written with differentiable ops only (masks are constants), so that double
 * backward, and any order above it, works where the input has zeros. */

/* a one-tensor op with up to three int arguments */
static TensorImpl *op1(int op, TensorImpl *x, int ni, int64_t i0, int64_t i1, int64_t i2) {
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {i0, i1, i2}, .ni = ni};
    return F(ag_call1(op, &a));
}
#define CUMPROD(x, d) op1(OP_cumprod, x, 3, d, 0, 1)
#define CUMSUM(x, d) op1(OP_cumsum, x, 3, d, 0, 1)
#define REVCUMSUM(x, d) op1(OP_cumsum, x, 3, d, 1, 1)
#define FLIP(x, d) op1(OP_flip, x, 1, d, 0, 0)
#define PROD_KEEP(x, d) op1(OP_prod_dim, x, 3, d, 1, 1)
#define NARROW(x, d, start, len) op1(OP_narrow, x, 3, d, start, len)

static TensorImpl *where3(TensorImpl *cond, TensorImpl *a, TensorImpl *b) {
    if (!cond || !a || !b) return NULL;
    OpArgs w = {.t = {cond, a, b}, .nt = 3};
    return F(ag_call1(OP_where, &w));
}

static TensorImpl *ones_like(TensorImpl *x) {
    return x ? F(c10_full(x->sizes, x->ndim, 1, x->dtype, x->device)) : NULL;
}

static TensorImpl *cat2(TensorImpl *a, TensorImpl *b, int dim) {
    if (!a || !b) return NULL;
    OpArgs c = {.t = {a, b}, .nt = 2, .i = {dim}, .ni = 1};
    return F(ag_call1(OP_cat, &c));
}

/* prod_{l<k} x_l along dim: a 1 in front of the line's first D - 1, multiplied up
 * (narrowed before the cumprod, as torch: its double backward never sees x's last) */
static TensorImpl *exclusive_cumprod(TensorImpl *x, int dim) {
    if (!x) return NULL;
    int64_t D = x->sizes[dim];
    return CUMPROD(cat2(ones_like(NARROW(x, dim, 0, 1)), NARROW(x, dim, 0, D - 1), dim), dim);
}

/* The product of the other elements of each line along dim (PyTorch's
 * prod_safe_zeros_backward): exclusive products from both ends. */
static TensorImpl *prod_others(TensorImpl *x, int dim) {
    return MUL(exclusive_cumprod(x, dim), FLIP(exclusive_cumprod(FLIP(x, dim), dim), dim));
}

/* cumprod's gradient where lines may hold zeros under create_graph, as
 * PyTorch's cumprod_backward computes it then: for each k, the sum over j >= k
 * of g_j prod_{l<=j, l!=k} x_l, from slices, prods and cumprods. O(D^2), and
 * differentiable to any order (the masked form below is right only to first
 * order at the zeros). */
static TensorImpl *cumprod_grad_naive(TensorImpl *x, TensorImpl *g, int dim) {
    int64_t D = x->sizes[dim];
    TensorImpl *acc = NULL;
    for (int64_t k = 0; k < D; k++) {
        TensorImpl *before = k ? PROD_KEEP(NARROW(x, dim, 0, k), dim) : ones_like(NARROW(x, dim, 0, 1));
        TensorImpl *omitted = k + 1 < D ? cat2(before, MUL(before, CUMPROD(NARROW(x, dim, k + 1, D - k - 1), dim)), dim)
                                        : before;
        TensorImpl *piece = sum_dim_keep(MUL(NARROW(g, dim, k, D - k), omitted), dim);
        acc = k ? cat2(acc, piece, dim) : piece;
        if (!acc) return NULL;
    }
    return acc;
}

/* cumprod's gradient where lines may hold zeros (PyTorch's cumprod_backward).
 * With z the first zero of a line and z2 the second: before z the usual sum of
 * g_k out_k / x_i over k < z only (out_k taken as 0 from z on, even where an
 * inf follows); at z, prod_{l<z} x_l times sum_{z<=k<z2} g_k prod_{z<l<=k} x_l;
 * after z, 0. The same masks as torch's: w selected before z, g zeroed
 * outside [z, z2) then multiplied (an inf there gives NaN, as torch's). */
static TensorImpl *cumprod_grad_zeros(TensorImpl *x, TensorImpl *g, int dim) {
    TensorImpl *zc = CUMSUM(EQS(x, 0.0), dim);                 /* zeros so far (int64) */
    TensorImpl *before = EQS(zc, 0.0), *first = MUL(EQS(x, 0.0), EQS(zc, 1.0));
    TensorImpl *one = ones_like(x);
    TensorImpl *xs = where3(before, x, one);                   /* x before z, else 1 */
    TensorImpl *w = where3(before, MUL(g, CUMPROD(x, dim)), ZEROS(x));
    TensorImpl *g_before = where3(before, DIV(REVCUMSUM(w, dim), xs), ZEROS(x));
    TensorImpl *from_z = EQS(zc, 1.0);                         /* [z, z2) */
    TensorImpl *after = MUL(from_z, EQS(first, 0.0));          /* (z, z2) */
    TensorImpl *tail = CUMPROD(where3(after, x, one), dim);    /* prod_{z<l<=k} x_l for z <= k < z2 */
    TensorImpl *t = sum_dim_keep(MUL(where3(from_z, g, ZEROS(x)), tail), dim); /* torch's: g masked, times */
    TensorImpl *g_first = where3(first, MUL(PROD_KEEP(xs, dim), t), ZEROS(x));
    return ADD(g_before, g_first);
}

/* ---- prod ---- */

/* prod, prod_dim: grad * result / self, or with zeros the product of the
 * others (PyTorch's prod_safe_zeros_backward). */
int d_prod(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    bool mask[CT_MAX_DIMS], keepdim = false;
    int dim = -1;
    if (c->args->i[2]) dim = dim_mask(c, mask, &keepdim);
    else
        for (int d = 0; d < CT_MAX_DIMS; d++) mask[d] = d < m->ndim;
    if (m->ndim == 0) RET(G);
    TensorImpl *g = restore(G, mask, keepdim, m->ndim);
    if (!has_zero(SELF)) RET(DIV(MUL(g, restore(RESULT, mask, keepdim, m->ndim)), SELF));
    if (dim >= 0) RET(MUL(g, prod_others(SELF, dim)));
    if (!ag_grad_enabled() && zeros_in(SELF, 2) > 1) RET(F(ag_zeros_like_meta(m))); /* torch's shortcut */
    OpArgs flat = {.t = {SELF}, .nt = 1, .i = {-1}, .ni = 1}; /* all elements: one line */
    TensorImpl *po = prod_others(F(ag_call1(OP_reshape_copy, &flat)), 0);
    OpArgs back = {.t = {po}, .nt = 1, .ni = m->ndim};
    memcpy(back.i, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    RET(MUL(g, po ? F(ag_call1(OP_reshape_copy, &back)) : NULL));
}

/* ---- max, min ---- */

/* where(cond, a, 0): exactly 0 off the mask, even where a is inf or NaN (torch
 * fills or scatters there; it does not multiply) */
static TensorImpl *where0(TensorImpl *cond, TensorImpl *a) {
    if (!cond || !a) return NULL;
    TensorImpl *zero = F(ag_wrapped_scalar(0, a->dtype));
    OpArgs w = {.t = {cond, a, zero}, .nt = 3};
    return zero ? F(ag_call1(OP_where, &w)) : NULL;
}

/* all-reduce max/min: the gradient shared evenly among the elements equal to
 * the result (NaN: among the NaNs), as PyTorch's evenly_distribute_backward */
int d_max_all(BackwardCtx *c, TensorImpl **gi) {
    double r = RESULT->device == CT_META ? 0 : c10_get(RESULT, 0);
    TensorImpl *mask = r != r ? ISNAN(SELF) : EQ(SELF, RESULT);
    OpArgs a = {.t = {mask}, .nt = 1, .i = {0, 0}, .ni = 2};
    TensorImpl *count = mask ? F(ag_call1(OP_sum, &a)) : NULL;
    RET(where0(mask, DIV(G, count)));
}

/* max_dim_values, min_dim_values (t[1]: the indices): the gradient to the
 * selected index only */
int d_max_dim(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    if (!c->needs[0]) return 0;
    if (m->ndim == 0) RET(G);
    bool mask[CT_MAX_DIMS], keepdim;
    int dim = dim_mask(c, mask, &keepdim);
    TensorImpl *idx = restore(c->in[1], mask, keepdim, m->ndim);
    int64_t D = m->sizes[dim], shape[CT_MAX_DIMS];
    for (int d = 0; d < m->ndim; d++) shape[d] = d == dim ? D : 1;
    TensorImpl *ar = F(c10_empty(shape, m->ndim, CT_INT64, m->device));
    if (!ar || !idx) return -1;
    if (ar->device != CT_META)
        for (int64_t k = 0; k < D; k++) ((int64_t *)c10_data(ar))[k] = k;
    TensorImpl *onehot = EQ(ar, idx);
    RET(where0(onehot, restore(G, mask, keepdim, m->ndim)));
}

/* amax, amin: grad / count * (self == result), count over the reduced dims */
int d_amax(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    bool mask[CT_MAX_DIMS], keepdim;
    list_mask(c, mask, &keepdim);
    TensorImpl *eq = EQ(SELF, restore(RESULT, mask, keepdim, m->ndim));
    TensorImpl *count = sum_keep(eq, mask, m->ndim);
    RET(MUL(DIV(restore(G, mask, keepdim, m->ndim), count), eq));
}

/* ---- var, std ---- */

static TensorImpl *var_backward(BackwardCtx *c, TensorImpl *g, const bool *mask, int ndim) {
    const InputMeta *m = &c->node->in_meta[0];
    OpArgs a = {.t = {SELF}, .nt = 1, .i = {1, 0}};
    int n = 0;
    for (int d = 0; d < ndim; d++)
        if (mask[d]) a.i[2 + n++] = d;
    a.i[1] = n;
    a.ni = 2 + n;
    TensorImpl *mean = n ? F(ag_call1(OP_mean_dims, &a)) : SELF;
    double div = (double)reduced_count(m, mask) - c->args->s[0];
    if (ndim == 0 && div == 0) return MULS(g, INFINITY); /* torch's 2 / 0 without the 0 of self - mean */
    return MUL(MULS(g, 2.0 / div), SUB(SELF, mean));
}

int d_var(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    bool mask[CT_MAX_DIMS], keepdim;
    list_mask(c, mask, &keepdim);
    TensorImpl *g = restore(G, mask, keepdim, m->ndim);
    if (c->node->op == OP_std) { /* grad / (2 std), 0 where std == 0 */
        TensorImpl *r = restore(RESULT, mask, keepdim, m->ndim);
        g = MUL(DIV(g, MULS(nonzero_or_one(r), 2)), NES(r, 0));
    }
    RET(var_backward(c, g, mask, m->ndim));
}

/* ---- norm (PyTorch's norm_backward) ---- */

int d_norm(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    bool mask[CT_MAX_DIMS], keepdim;
    list_mask(c, mask, &keepdim);
    double p = c->args->s[0];
    TensorImpl *g = restore(G, mask, keepdim, m->ndim), *nrm = restore(RESULT, mask, keepdim, m->ndim);
    if (p == 0) RET(F(ag_zeros_like_meta(m)));
    if (p == 1) RET(MUL(SGN(SELF), g));
    if (p == 2) RET(MUL(SELF, MUL(DIV(g, nonzero_or_one(nrm)), NES(nrm, 0))));
    if (isinf(p)) { /* torch's: the maxima and the NaNs share it (sign(NaN) = 0 gives them none) */
        TensorImpl *eq = BIN(logical_or, EQ(ABS(SELF), nrm), ISNAN(SELF));
        TensorImpl *count = sum_keep(eq, mask, m->ndim);
        RET(MUL(SGN(SELF), MUL(DIV(g, count), eq)));
    }
    if (p < 1) {
        TensorImpl *a = ABS(SELF);
        TensorImpl *t = MUL(POWS(nonzero_or_one(a), p - 1), NES(a, 0));
        RET(MUL(MUL(SGN(SELF), t), MUL(g, POWS(nrm, 1 - p))));
    }
    TensorImpl *scale = MUL(DIV(g, POWS(nonzero_or_one(nrm), p - 1)), NES(nrm, 0));
    if (p < 2) RET(MUL(MUL(SGN(SELF), POWS(ABS(SELF), p - 1)), scale));
    RET(MUL(MUL(SELF, POWS(ABS(SELF), p - 2)), scale));
}

/* ---- logsumexp ---- */

int d_logsumexp(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    bool mask[CT_MAX_DIMS], keepdim;
    list_mask(c, mask, &keepdim);
    TensorImpl *r = restore(RESULT, mask, keepdim, m->ndim);
    RET(MUL(restore(G, mask, keepdim, m->ndim), EXP(SUB(SELF, r))));
}

/* ---- scans ---- */

/* cumsum: the gradient summed from the end (cumsum with the reverse flag flipped) */
int d_cumsum(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = {.t = {G}, .nt = 1, .i = {c->args->i[0], !c->args->i[1], 1}, .ni = 3};
    return (gi[0] = ag_call1(OP_cumsum, &a)) ? 0 : -1;
}

int d_cumprod(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    int dim = (int)c->args->i[0];
    if (m->ndim) dim = dim < 0 ? dim + m->ndim : dim;
    else dim = 0;
    if (m->ndim == 0 || m->sizes[dim] == 1) RET(G); /* torch: the identity there, inf or NaN included */
    if (!has_zero(SELF)) {
        OpArgs a = {.t = {MUL(G, RESULT)}, .nt = 1, .i = {dim, 1, 1}, .ni = 3};
        if (!a.t[0]) return -1;
        RET(DIV(F(ag_call1(OP_cumsum, &a)), SELF));
    }
    RET(ag_grad_enabled() ? cumprod_grad_naive(SELF, G, dim) : cumprod_grad_zeros(SELF, G, dim));
}

/* ---- softmax ---- */

/* first order: one fused pass a row where it applies (1), else 0 */
static int softmax_fused(BackwardCtx *c, TensorImpl **gi, bool log) {
    if (ag_grad_enabled()) return 0;
    TensorImpl *r = NULL;
    int k = at_softmax_grad(G, RESULT, (int)c->args->i[0], log, &r);
    if (k > 0) gi[0] = r;
    return k;
}

/* y * (g - sum(g * y, dim)) */
int d_softmax(BackwardCtx *c, TensorImpl **gi) {
    int k = softmax_fused(c, gi, false);
    if (k) return k > 0 ? 0 : -1;
    TensorImpl *y = RESULT;
    RET(MUL(y, SUB(G, sum_dim_keep(MUL(G, y), c->args->i[0]))));
}

/* g - exp(y) * sum(g, dim) */
int d_log_softmax(BackwardCtx *c, TensorImpl **gi) {
    int k = softmax_fused(c, gi, true);
    if (k) return k > 0 ? 0 : -1;
    RET(SUB(G, MUL(EXP(RESULT), sum_dim_keep(G, c->args->i[0]))));
}
