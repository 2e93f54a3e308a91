/* derivatives.c: the backward column of ops.def (PyTorch's derivatives.yaml).
 *
 * The UNARY and BINARY rows' formulas are expressions in the vocabulary below;
 * this file stamps each into a backward function. Every word is a
 * differentiable op (an ag_* call), so with create_graph the backward pass is
 * itself recorded and can be differentiated again. Temporaries go to the
 * formula's frame (F), which the engine clears after the formula ran. */
#include "autograd/formulas.h"
#include <math.h>

/* where(cond, a, 0): zero where cond is false, even where a is NaN or inf. */
static TensorImpl *masked(TensorImpl *a, TensorImpl *cond) {
    if (!a || !cond) return NULL;
    TensorImpl *zero = F(ag_wrapped_scalar(0, a->dtype));
    OpArgs w = {.t = {cond, a, zero}, .nt = 3};
    return zero ? F(ag_call1(OP_where, &w)) : NULL;
}
#define MASKED(a, cond) masked(a, cond)
/* where(cond, v, b): the number v where cond holds, else b */
static TensorImpl *where_sv(TensorImpl *cond, double v, TensorImpl *b) {
    if (!b || !cond) return NULL;
    TensorImpl *s = F(ag_wrapped_scalar(v, b->dtype));
    OpArgs w = {.t = {cond, s, b}, .nt = 3};
    return s ? F(ag_call1(OP_where, &w)) : NULL;
}
/* torch's elu_backward of the input: g alpha e^x where x <= 0, else g (+inf
 * and NaN too). e^x of x where x < 0 (else of 0): its own derivative is then
 * torch's elu_double_backward, 0 from x = 0 up, not NaN where e^x overflows */
static TensorImpl *elu_bwd(BackwardCtx *c, TensorImpl *g, TensorImpl *x, double alpha) {
    (void)c;
    TensorImpl *neg = BINS(le, x, 0), *e = EXP(masked(x, BINS(lt, x, 0)));
    return ADD(masked(MUL(g, MULS(e, alpha)), neg), masked(g, UN(logical_not, neg)));
}
#define ELU_BWD(g, x, a) elu_bwd(c, g, x, a)
/* relu's gradient: g where r > 0 (or r is NaN), else 0 (even where g is NaN) */
#define THRESHOLD_BWD(g, r) BIN(threshold_backward, g, r)

/* whether a first-order gradient may take its fused kernel (no graph to record) */
static bool fused_grad(const TensorImpl *x) {
    return !ag_grad_enabled() && c10_is_float(x->dtype) && x->device != CT_META;
}
static TensorImpl *gelu_bwd(BackwardCtx *c, TensorImpl *g, TensorImpl *x) {
    (void)c;
    if (fused_grad(x)) return F(at_act_grad(OP_gelu, g, x, NULL));
    TensorImpl *cdf = MULS(ADDS(ERF(MULS(x, M_SQRT1_2)), 1), 0.5);
    TensorImpl *pdf = MULS(EXP(MULS(MUL(x, x), -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);
    return MUL(g, ADD(cdf, MUL(x, pdf)));
}
#define GELU_BWD(g, x) gelu_bwd(c, g, x)

static TensorImpl *gelu_tanh_bwd(BackwardCtx *c, TensorImpl *g, TensorImpl *x) {
    (void)c;
    const double k = M_2_SQRTPI * M_SQRT1_2, k2 = 0.044715;
    TensorImpl *x2 = MUL(x, x);
    TensorImpl *t = TANH(MULS(ADD(x, MULS(MUL(x2, x), k2)), k));
    TensorImpl *left_d = MULS(ADDS(t, 1), 0.5);
    TensorImpl *right_d = MUL(RSUBS(MUL(t, t), 1), ADDS(MULS(x2, 3 * k2 * k), k));
    return MUL(g, ADD(left_d, MUL(MULS(x, 0.5), right_d)));
}
#define GELU_TANH_BWD(g, x) gelu_tanh_bwd(c, g, x)

static TensorImpl *silu_bwd(BackwardCtx *c, TensorImpl *g, TensorImpl *x) {
    (void)c;
    if (fused_grad(x)) return F(at_act_grad(OP_silu, g, x, NULL));
    TensorImpl *s = SIGMOID(x);
    return MUL(g, MUL(s, ADDS(MUL(x, RSUBS(s, 1)), 1)));
}
#define SILU_BWD(g, x) silu_bwd(c, g, x)

/* softplus: g * sigmoid(beta x) below the threshold, g above it */
static TensorImpl *softplus_bwd(BackwardCtx *c, TensorImpl *g, TensorImpl *x, double beta, double th) {
    (void)c;
    if (fused_grad(x)) return F(at_act_grad(OP_softplus, g, x, (const double[]){beta, th}));
    TensorImpl *bx = MULS(x, beta);
    /* 1 above the threshold, sigmoid(beta x) at it (a constant: torch's double
     * backward masks with beta x < threshold) and below it (NaN kept) */
    return MUL(g, where_sv(GTS(bx, th), 1, where_sv(EQS(bx, th), 1 / (1 + exp(-th)), SIGMOID(bx))));
}
#define SOFTPLUS_BWD(g, x, b, t) softplus_bwd(c, g, x, b, t)

/* d/dx x^y = y x^(y-1), zero where y == 0 */
static TensorImpl *pow_bwd_self(BackwardCtx *c, TensorImpl *g, TensorImpl *x, TensorImpl *y) {
    (void)c;
    if (y->is_wrapped_number && y->device != CT_META) { /* torch's pow_backward of a Scalar exponent e: */
        double e = c10_get(y, 0);                       /* g (e x^(e-1)), x^(e-1) as pow(Tensor, Scalar), */
        return e == 0 ? ZEROS(x) : MUL(g, MULS(POWS(x, e - 1), e)); /* whose 2 is x x (not libm's pow) */
    }
    TensorImpl *d = MUL(y, POW(x, ADDS(y, -1)));
    return MUL(g, masked(d, BINS(ne, y, 0)));
}
#define POW_BWD_SELF(g, x, y) pow_bwd_self(c, g, x, y)

/* d/dy x^y = x^y log x, zero where x == 0 and y >= 0 */
static TensorImpl *pow_bwd_exp(BackwardCtx *c, TensorImpl *g, TensorImpl *x, TensorImpl *y, TensorImpl *r) {
    (void)c;
    TensorImpl *d = MUL(r, LOG(x));
    TensorImpl *keep = BIN(logical_or, BINS(ne, x, 0), BINS(lt, y, 0));
    return MUL(g, masked(d, keep));
}
#define POW_BWD_EXP(g, x, y, r) pow_bwd_exp(c, g, x, y, r)

static TensorImpl *atan2_bwd(BackwardCtx *c, TensorImpl *g, TensorImpl *x, TensorImpl *y, int which) {
    (void)c;
    TensorImpl *den = ADD(MUL(x, x), MUL(y, y));
    return which == 0 ? DIV(MUL(g, y), den) : DIV(MUL(g, NEG(x)), den);
}
#define ATAN2_BWD(g, x, y, w) atan2_bwd(c, g, x, y, w)

/* maximum/minimum, as torch's where(a == b, g / 2, g).masked_fill_(a loses, 0):
 * the larger (smaller) input gets g, ties half each, and both all of it where
 * either is NaN (no comparison holds there). */
static TensorImpl *minmax_bwd(BackwardCtx *c, TensorImpl *g, TensorImpl *a, TensorImpl *b, int is_max) {
    (void)c;
    TensorImpl *lose = is_max ? BIN(lt, a, b) : BIN(gt, a, b);
    TensorImpl *tie = BIN(eq, a, b), *half = MULS(g, 0.5);
    if (!tie || !half) return NULL;
    OpArgs w = {.t = {tie, half, g}, .nt = 3};
    return masked(F(ag_call1(OP_where, &w)), UN(logical_not, lose));
}
#define MINMAX_BWD(g, a, b, m) minmax_bwd(c, g, a, b, m)

/* g masked by a condition on x (piecewise-linear functions' gradients), with
 * create_graph recorded as depending on x through a zero derivative, as
 * torch's hardtanh_backward / leaky_relu_backward are: the gradient then
 * requires grad and a gradient penalty can differentiate it again (x * 0 + 1
 * is positive or NaN, where threshold_backward passes g) */
static TensorImpl *zero_link(BackwardCtx *c, TensorImpl *v, TensorImpl *x) {
    (void)c;
    if (!v || !ag_grad_enabled() || !ag_requires_grad(x)) return v;
    return THRESHOLD_BWD(v, ADDS(BINS(mul, x, 0), 1));
}
#define ZERO_LINK(v, x) zero_link(c, v, x)

/* ---- the UNARY and BINARY rows ---- */
#define DU(name, d)                                                              \
    static int du_##name(BackwardCtx *c, TensorImpl **gi) {                      \
        return (gi[0] = c10_retain(d)) ? 0 : -1;                                 \
    }
#define DU_FLOAT DU
#define DU_ALL DU
#define DU_ROUND DU
#define DU_TEST(name, d)
#define UNARY(name, node, kind, fe, ie, d, sv) DU_##kind(name, d)
#define BINARY(...)
#define OP(...)
#include "ops/ops.def"
#undef UNARY
#undef BINARY
#undef OP

#define DB(name, ds, dother)                                                     \
    static int db_##name(BackwardCtx *c, TensorImpl **gi) {                      \
        if (c->needs[0] && !(gi[0] = c10_retain(ds))) return -1;                 \
        if (c->needs[1] && !(gi[1] = c10_retain(dother))) return -1;             \
        return 0;                                                                \
    }
#define DB_ARITH DB
#define DB_DIV DB
#define DB_FLOAT2 DB
#define DB_CMP(name, ds, dother)
#define DB_LOGIC DB_CMP
#define DB_BITS DB_CMP
#define UNARY(...)
#define BINARY(name, node, kind, fe, ie, ds, dother, sv) DB_##kind(name, ds, dother)
#define OP(...)
#include "ops/ops.def"
#undef UNARY
#undef BINARY
#undef OP

#define FN_FLOAT(f) f
#define FN_ALL(f) f
#define FN_ROUND(f) f
#define FN_TEST(f) NULL
#define FN_ARITH(f) f
#define FN_DIV(f) f
#define FN_FLOAT2(f) f
#define FN_CMP(f) NULL
#define FN_LOGIC(f) NULL
#define FN_BITS(f) NULL

const DerivInfo deriv_info[OP_COUNT] = {
#define UNARY(name, node, kind, fe, ie, d, sv) [OP_##name] = {FN_##kind(du_##name), #node, sv},
#define BINARY(name, node, kind, fe, ie, ds, dother, sv) [OP_##name] = {FN_##kind(db_##name), #node, sv},
#define OP(name, node, nout, fwd, bwd, flags) [OP_##name] = {bwd, #node, flags},
#include "ops/ops.def"
#undef UNARY
#undef BINARY
#undef OP
};

/* torch's NotImplemented node: its backward fails */
int d_not_implemented(BackwardCtx *c, TensorImpl **gi) {
    (void)gi;
    return c10_error_int("derivative for aten::%s is not implemented", op_info[c->node->op].name);
}

/* ---- views and copies ---- */
COLD_BEGIN /* once a backward call, not per element: for size */

/* g scattered into zeros laid out as the base (sizes, strides), at the view's
 * geometry (vsizes, vstrides, offset), counted in the base's storage. */
static TensorImpl *scatter_view(TensorImpl *g, const InputMeta *base, const TensorImpl *view) {
    OpArgs s = {.t = {g}, .nt = 1};
    int n = 0;
    s.i[n++] = base->ndim;
    for (int d = 0; d < base->ndim; d++) s.i[n++] = base->sizes[d];
    for (int d = 0; d < base->ndim; d++) s.i[n++] = base->strides[d];
    s.i[n++] = view->ndim;
    for (int d = 0; d < view->ndim; d++) s.i[n++] = view->sizes[d];
    for (int d = 0; d < view->ndim; d++) s.i[n++] = view->strides[d];
    s.i[n++] = view->offset;
    s.ni = n;
    return ag_call1(OP_view_scatter, &s);
}

/* The view's geometry relative to a contiguous tensor of the input's shape:
 * the view op run again on a meta tensor. */
static int view_scatter(BackwardCtx *c, TensorImpl **gi) {
    InputMeta m = c->node->in_meta[0];
    TensorImpl *base = c10_empty(m.sizes, m.ndim, m.dtype, CT_META);
    if (!base) return -1;
    m.strides = base->strides; /* contiguous */
    OpArgs a = *c->args;
    a.t[0] = base;
    TensorImpl *v = at_call1(c->node->op, &a);
    gi[0] = v ? scatter_view(G, &m, v) : NULL;
    c10_release(v);
    c10_release(base);
    return gi[0] ? 0 : -1;
}

int d_slice(BackwardCtx *c, TensorImpl **gi) { return view_scatter(c, gi); }
int d_select(BackwardCtx *c, TensorImpl **gi) { return view_scatter(c, gi); }
int d_diagonal(BackwardCtx *c, TensorImpl **gi) { return view_scatter(c, gi); }
int d_unfold(BackwardCtx *c, TensorImpl **gi) { return view_scatter(c, gi); }

/* The storage span [lo, hi] that a geometry reaches (hi < lo: no element). */
static void geometry_span(const int64_t *sz, const int64_t *st, int n, int64_t off, int64_t *lo, int64_t *hi) {
    *lo = *hi = off;
    for (int d = 0; d < n; d++) {
        if (sz[d] == 0) {
            *hi = *lo - 1;
            return;
        }
        int64_t e = (sz[d] - 1) * st[d];
        *(e < 0 ? lo : hi) += e;
    }
}
/* Can two indices of the geometry reach one location? (dims by stride: each
 * must step past all the earlier ones reach) */
static bool geometry_overlaps(const int64_t *sz, const int64_t *st, int n) {
    int64_t a[CT_MAX_DIMS], z[CT_MAX_DIMS];
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (sz[d] < 2) continue;
        int64_t v = st[d] < 0 ? -st[d] : st[d];
        int k = m++;
        for (; k > 0 && a[k - 1] > v; k--) a[k] = a[k - 1], z[k] = z[k - 1];
        a[k] = v, z[k] = sz[d];
    }
    int64_t reach = 0;
    for (int k = 0; k < m; k++) {
        if (a[k] <= reach) return true;
        reach += (z[k] - 1) * a[k];
    }
    return false;
}

/* as_strided's geometry is in storage coordinates (PyTorch's
 * as_strided_backward): the gradient is added into zeros spanning the storage
 * both geometries reach (repeatedly where the output overlaps itself), divided
 * by how many input elements share a location where the input overlaps
 * itself, and read back at the input's geometry. */
int d_as_strided(BackwardCtx *c, TensorImpl **gi) {
    const OpArgs *a = c->args;
    const InputMeta *in = META(0);
    int n = (int)a->i[a->ni - 2];
    const int64_t *osz = a->i, *ost = a->i + n, ooff = a->i[a->ni - 1];
    int64_t ilo, ihi, olo, ohi;
    geometry_span(in->sizes, in->strides, in->ndim, in->offset, &ilo, &ihi);
    geometry_span(osz, ost, n, ooff, &olo, &ohi);
    if (ihi < ilo) { /* an empty input */
        TensorImpl *z = F(c10_empty(in->sizes, in->ndim, G->dtype, G->device));
        if (!z || c10_fill(z, 0) < 0) return -1;
        RET(z);
    }
    int64_t lo = ohi < olo || ilo < olo ? ilo : olo, hi = ohi < olo || ihi > ohi ? ihi : ohi, span = hi - lo + 1, one = 1;
    InputMeta flat = {.sizes = &span, .strides = &one, .ndim = 1, .dtype = G->dtype, .device = G->device};
    TensorImpl v = {.ndim = n, .offset = ooff - lo};
    memcpy(v.sizes, osz, sizeof(int64_t) * (size_t)n);
    memcpy(v.strides, ost, sizeof(int64_t) * (size_t)n);
    TensorImpl *g = F(scatter_view(G, &flat, &v));
    if (g && geometry_overlaps(in->sizes, in->strides, in->ndim)) {
        TensorImpl *ones = F(c10_empty(in->sizes, in->ndim, G->dtype, G->device));
        TensorImpl w = {.ndim = in->ndim, .offset = in->offset - lo};
        memcpy(w.sizes, in->sizes, sizeof(int64_t) * (size_t)in->ndim);
        memcpy(w.strides, in->strides, sizeof(int64_t) * (size_t)in->ndim);
        if (!ones || c10_fill(ones, 1) < 0) return -1;
        g = DIV(g, F(scatter_view(ones, &flat, &w))); /* count 0 outside the input: never read */
    }
    if (!g) return -1;
    OpArgs r = {.t = {g}, .nt = 1, .ni = 2 * in->ndim + 2};
    memcpy(r.i, in->sizes, sizeof(int64_t) * (size_t)in->ndim);
    memcpy(r.i + in->ndim, in->strides, sizeof(int64_t) * (size_t)in->ndim);
    r.i[2 * in->ndim] = in->ndim;
    r.i[2 * in->ndim + 1] = in->offset - lo + g->offset;
    return (gi[0] = ag_call1(OP_as_strided, &r)) ? 0 : -1;
}

/* t[0] = g; i as view_scatter. Backward: the same view of the gradient laid
 * out as the base (copied into the base's strides first). */
int d_view_scatter(BackwardCtx *c, TensorImpl **gi) {
    const int64_t *i = c->args->i;
    int nb = (int)i[0], nv = (int)i[1 + 2 * nb];
    TensorImpl *laid = F(at_empty_strided(i + 1, i + 1 + nb, nb, G->dtype, G->device));
    if (!laid) return -1;
    OpArgs cp = {.t = {laid, G}, .nt = 2};
    if (ag_call_inplace(OP_copy_, &cp) < 0) return -1;
    OpArgs a = {.t = {laid}, .nt = 1, .ni = 2 * nv + 2};
    memcpy(a.i, i + 2 + 2 * nb, sizeof(int64_t) * (size_t)(2 * nv));
    a.i[2 * nv] = nv;
    a.i[2 * nv + 1] = i[2 + 2 * nb + 2 * nv] + laid->offset;
    return (gi[0] = ag_call1(OP_as_strided, &a)) ? 0 : -1;
}

COLD_END

/* view, squeeze, unsqueeze, reshape: the gradient reshaped back */
int d_reshape_like(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    int64_t strides[CT_MAX_DIMS];
    OpArgs a = {.t = {G}, .nt = 1, .ni = m->ndim};
    memcpy(a.i, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    int op = c10_view_strides(G, m->sizes, m->ndim, strides) ? OP_view : OP_reshape_copy;
    return (gi[0] = ag_call1(op, &a)) ? 0 : -1;
}

int d_transpose(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = {.t = {G}, .nt = 1, .i = {c->args->i[0], c->args->i[1]}, .ni = 2};
    return (gi[0] = ag_call1(OP_transpose, &a)) ? 0 : -1;
}

int d_permute(BackwardCtx *c, TensorImpl **gi) {
    int n = c->args->ni;
    OpArgs a = {.t = {G}, .nt = 1, .ni = n};
    for (int k = 0; k < n; k++) {
        int64_t d = c->args->i[k];
        a.i[d < 0 ? d + n : d] = k;
    }
    return (gi[0] = ag_call1(OP_permute, &a)) ? 0 : -1;
}

/* expand's gradient is summed back: the engine's sum_to_size does it. */
int d_expand(BackwardCtx *c, TensorImpl **gi) { return (gi[0] = c10_retain(G)) ? 0 : -1; }
int d_identity(BackwardCtx *c, TensorImpl **gi) { return (gi[0] = c10_retain(G)) ? 0 : -1; }
int d_to_dtype(BackwardCtx *c, TensorImpl **gi) { return (gi[0] = c10_retain(G)) ? 0 : -1; }

/* copy_(self, src): self's old value is overwritten (zero gradient), src gets g */
int d_copy_(BackwardCtx *c, TensorImpl **gi) {
    if (c->needs[0] && !(gi[0] = c10_retain(ZEROS(G)))) return -1;
    if (c->needs[1] && !(gi[1] = c10_retain(G))) return -1;
    return 0;
}
int d_fill_(BackwardCtx *c, TensorImpl **gi) { return (gi[0] = c10_retain(ZEROS(G))) ? 0 : -1; }

int d_sum_to_size(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    OpArgs a = {.t = {G}, .nt = 1, .ni = m->ndim};
    memcpy(a.i, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    return (gi[0] = ag_call1(OP_expand, &a)) ? 0 : -1;
}
