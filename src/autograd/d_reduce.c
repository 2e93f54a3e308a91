/* d_reduce.c: backward formulas of the reduction rows (PyTorch's
 * derivatives.yaml and FunctionsManual.cpp). Built from ag_* ops, so that
 * create_graph records them; the few exact zero-handling paths (prod and
 * cumprod with zeros in the input, the one-hot mask of max/min along a dim)
 * compute constants that are not differentiated again. */
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

/* ---- exact helpers for inputs with zeros (constants, not differentiated) ---- */

/* a contiguous copy of t in dt */
static TensorImpl *contig_copy(const TensorImpl *t, ct_dtype dt) {
    TensorImpl *o = c10_empty(t->sizes, t->ndim, dt, t->device);
    if (o && at_copy_(o, t) < 0) {
        c10_release(o);
        return NULL;
    }
    return o;
}

/* A float64 contiguous copy of t viewed [outer, D, inner] around dim (all
 * dims flattened into D when dim < 0). */
static TensorImpl *as_lines(const TensorImpl *t, int dim, int64_t *outer, int64_t *D, int64_t *inner) {
    *outer = *inner = 1;
    *D = t->numel;
    if (dim >= 0 && t->ndim > 0) {
        *D = t->sizes[dim];
        for (int k = 0; k < dim; k++) *outer *= t->sizes[k];
        for (int k = dim + 1; k < t->ndim; k++) *inner *= t->sizes[k];
    }
    return contig_copy(t, CT_FLOAT64);
}
static bool has_zero(const TensorImpl *t) {
    if (t->device == CT_META || t->numel == 0) return false;
    TensorImpl *x = contig_copy(t, CT_FLOAT64);
    if (!x) return false;
    const double *p = (const double *)c10_data(x);
    bool z = false;
    for (int64_t i = 0; i < x->numel && !z; i++) z = p[i] == 0;
    c10_release(x);
    return z;
}
/* the product of the other elements of each line, in t's dtype */
static TensorImpl *prod_others(const TensorImpl *t, int dim) {
    int64_t outer, D, inner;
    TensorImpl *x = as_lines(t, dim, &outer, &D, &inner);
    if (!x) return NULL;
    TensorImpl *r = c10_empty(x->sizes, x->ndim, CT_FLOAT64, x->device);
    if (!r) {
        c10_release(x);
        return NULL;
    }
    const double *px = (const double *)c10_data(x);
    double *pr = (double *)c10_data(r);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            const double *lx = px + o * D * inner + j;
            double *lr = pr + o * D * inner + j;
            int64_t zeros = 0, zi = -1;
            double prod = 1;
            for (int64_t k = 0; k < D; k++) {
                double v = lx[k * inner];
                if (v == 0) zeros++, zi = k;
                else prod *= v;
            }
            for (int64_t k = 0; k < D; k++)
                lr[k * inner] = zeros == 0 ? prod / lx[k * inner] : (zeros == 1 && k == zi) ? prod : 0;
        }
    c10_release(x);
    TensorImpl *o = contig_copy(r, t->dtype);
    c10_release(r);
    return o;
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
    TensorImpl *po = F(prod_others(SELF, dim));
    RET(MUL(g, po));
}

/* ---- max, min ---- */

/* all-reduce max/min: the gradient shared evenly among the elements equal to
 * the result (NaN: among the NaNs), as PyTorch's evenly_distribute_backward */
int d_max_all(BackwardCtx *c, TensorImpl **gi) {
    double r = RESULT->device == CT_META ? 0 : c10_get(RESULT, 0);
    TensorImpl *mask = r != r ? ISNAN(SELF) : EQ(SELF, RESULT);
    OpArgs a = {.t = {mask}, .nt = 1, .i = {0, 0}, .ni = 2};
    TensorImpl *count = mask ? F(ag_call1(OP_sum, &a)) : NULL;
    RET(MUL(mask, DIV(G, count)));
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
    RET(MUL(restore(G, mask, keepdim, m->ndim), onehot));
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
    if (isinf(p)) {
        TensorImpl *eq = EQ(ABS(SELF), nrm);
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

/* cumprod with zeros: exact O(D) per line (PyTorch's cumprod_backward) */
static TensorImpl *cumprod_zero_grad(const TensorImpl *x, const TensorImpl *g, int dim) {
    int64_t outer, D, inner;
    TensorImpl *xd = as_lines(x, dim, &outer, &D, &inner);
    TensorImpl *gd = xd ? contig_copy(g, CT_FLOAT64) : NULL;
    TensorImpl *r = gd ? c10_full(xd->sizes, xd->ndim, 0, CT_FLOAT64, xd->device) : NULL;
    if (!r) {
        c10_release(xd);
        c10_release(gd);
        return NULL;
    }
    const double *px = (const double *)c10_data(xd), *pg = (const double *)c10_data(gd);
    double *pr = (double *)c10_data(r);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            const double *lx = px + o * D * inner + j, *lg = pg + o * D * inner + j;
            double *lr = pr + o * D * inner + j;
            int64_t z = 0;
            while (z < D && lx[z * inner] != 0) z++;
            /* i < z: sum_{i <= k < z} g_k out_k / x_i */
            double out = 1, acc = 0;
            for (int64_t k = 0; k < z; k++) out *= lx[k * inner];
            /* suffix sums of g_k out_k over k < z, walking down */
            double run = out;
            for (int64_t k = z - 1; k >= 0; k--) {
                acc += lg[k * inner] * run;
                lr[k * inner] = acc / lx[k * inner];
                run /= lx[k * inner];
            }
            if (z < D) { /* i == z: sum_{k >= z} g_k prod_{l <= k, l != z} x_l */
                double pre = out, s = 0;
                for (int64_t k = z; k < D; k++) {
                    if (k > z) pre *= lx[k * inner];
                    s += lg[k * inner] * pre;
                }
                lr[z * inner] = s;
            }
        }
    c10_release(xd);
    c10_release(gd);
    TensorImpl *res = contig_copy(r, x->dtype);
    c10_release(r);
    return res;
}

int d_cumprod(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    int dim = (int)c->args->i[0];
    if (m->ndim) dim = dim < 0 ? dim + m->ndim : dim;
    else dim = 0;
    if (!has_zero(SELF)) {
        OpArgs a = {.t = {MUL(G, RESULT)}, .nt = 1, .i = {dim, 1, 1}, .ni = 3};
        if (!a.t[0]) return -1;
        RET(DIV(F(ag_call1(OP_cumsum, &a)), SELF));
    }
    if (G->device == CT_META) RET(MULS(G, 0.0));
    RET(F(cumprod_zero_grad(SELF, G, m->ndim ? dim : -1)));
}

/* ---- softmax ---- */

static TensorImpl *sum_dim_keep(TensorImpl *x, int64_t dim) {
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {1, 1, dim}, .ni = 3};
    return F(ag_call1(OP_sum_dims, &a));
}

/* y * (g - sum(g * y, dim)) */
int d_softmax(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *y = RESULT;
    RET(MUL(y, SUB(G, sum_dim_keep(MUL(G, y), c->args->i[0]))));
}

/* g - exp(y) * sum(g, dim) */
int d_log_softmax(BackwardCtx *c, TensorImpl **gi) {
    RET(SUB(G, MUL(EXP(RESULT), sum_dim_keep(G, c->args->i[0]))));
}
