/* d_linalg.c: backward formulas of the linear-algebra and convolution rows of
 * ops.def (derivatives.yaml's mm, bmm, addmm, ... and the conv/pool backward
 * ops). Every gradient is built from ag_* ops, so create_graph works; broadcast
 * gradients are summed to the input's shape by the engine. */
#include "autograd/autograd.h"

#define G (c->go[0])
#define IN(k) (c->in[k])

/* ---- small differentiable helpers (results go to the formula's frame) ---- */
static TensorImpl *bin(int op, TensorImpl *a, TensorImpl *b) { return F(ag_binary(op, a, b)); }
static TensorImpl *mul_s(TensorImpl *a, double s) { return s == 1 ? a : F(ag_binary_scalar(OP_mul, a, s)); }
static TensorImpl *tr(TensorImpl *x, int d0, int d1) { /* transpose; negative dims count from the end */
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {d0 < 0 ? d0 + x->ndim : d0, d1 < 0 ? d1 + x->ndim : d1}, .ni = 2};
    return F(ag_call1(OP_transpose, &a));
}
static TensorImpl *mT(TensorImpl *x) { return tr(x, -2, -1); }
static TensorImpl *unsq(TensorImpl *x, int d) {
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {d < 0 ? d + x->ndim + 1 : d}, .ni = 1};
    return F(ag_call1(OP_unsqueeze, &a));
}
static TensorImpl *sqz(TensorImpl *x, int d) {
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {d < 0 ? d + x->ndim : d}, .ni = 1};
    return F(ag_call1(OP_squeeze, &a));
}
static TensorImpl *reshape(TensorImpl *x, const int64_t *shape, int nd) {
    if (!x) return NULL;
    int64_t st[CT_MAX_DIMS];
    OpArgs a = {.t = {x}, .nt = 1, .ni = nd};
    memcpy(a.i, shape, sizeof(int64_t) * (size_t)nd);
    return F(ag_call1(c10_view_strides(x, shape, nd, st) ? OP_view : OP_reshape_copy, &a));
}
/* x as [numel / last, last] */
static TensorImpl *to2d(TensorImpl *x) {
    if (!x) return NULL;
    int64_t last = x->ndim ? x->sizes[x->ndim - 1] : 1, shape[2] = {0, last};
    int64_t n = 1;
    for (int d = 0; d < x->ndim - 1; d++) n *= x->sizes[d];
    shape[0] = n;
    return reshape(x, shape, 2);
}
static TensorImpl *to_dtype(TensorImpl *x, ct_dtype d) {
    if (!x || x->dtype == d) return x;
    OpArgs a = {.t = {x}, .nt = 1, .i = {d}, .ni = 1};
    return F(ag_call1(OP_to_dtype, &a));
}
#define SET(k, expr)                                                             \
    do {                                                                         \
        if (c->needs[k] && !(gi[k] = c10_retain(expr))) return -1;               \
    } while (0)

/* mm(a, b): a: g @ b^T, b: a^T @ g */
int d_mm(BackwardCtx *c, TensorImpl **gi) {
    SET(0, bin(OP_mm, G, mT(IN(1))));
    SET(1, bin(OP_mm, mT(IN(0)), G));
    return 0;
}

int d_bmm(BackwardCtx *c, TensorImpl **gi) {
    SET(0, bin(OP_bmm, G, mT(IN(1))));
    SET(1, bin(OP_bmm, mT(IN(0)), G));
    return 0;
}

/* addmm(self, m1, m2, beta, alpha) */
int d_addmm(BackwardCtx *c, TensorImpl **gi) {
    double beta = c->args->s[0], alpha = c->args->s[1];
    SET(0, mul_s(G, beta));
    SET(1, mul_s(bin(OP_mm, G, mT(IN(2))), alpha));
    SET(2, mul_s(bin(OP_mm, mT(IN(1)), G), alpha));
    return 0;
}

int d_baddbmm(BackwardCtx *c, TensorImpl **gi) {
    double beta = c->args->s[0], alpha = c->args->s[1];
    SET(0, mul_s(G, beta));
    SET(1, mul_s(bin(OP_bmm, G, mT(IN(2))), alpha));
    SET(2, mul_s(bin(OP_bmm, mT(IN(1)), G), alpha));
    return 0;
}

/* mv(m, v): m: outer(g, v), v: m^T @ g */
int d_mv(BackwardCtx *c, TensorImpl **gi) {
    SET(0, bin(OP_outer, G, IN(1)));
    SET(1, bin(OP_mv, mT(IN(0)), G));
    return 0;
}

/* dot(a, b): g * b, g * a */
int d_dot(BackwardCtx *c, TensorImpl **gi) {
    SET(0, bin(OP_mul, G, IN(1)));
    SET(1, bin(OP_mul, G, IN(0)));
    return 0;
}

/* outer(a, b) (promoted dtype): a: g @ b, b: g^T @ a */
int d_outer(BackwardCtx *c, TensorImpl **gi) {
    SET(0, bin(OP_mv, G, to_dtype(IN(1), G->dtype)));
    SET(1, bin(OP_mv, mT(G), to_dtype(IN(0), G->dtype)));
    return 0;
}

/* matmul(a, b) with broadcasting: 1-d operands become matrices (a row, a
 * column), the products are matmuls again, and the engine sums the batch
 * dims that were broadcast. */
int d_matmul(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *a = IN(0), *b = IN(1), *g = G;
    bool a1 = a->ndim == 1, b1 = b->ndim == 1;
    TensorImpl *am = a1 ? unsq(a, 0) : a, *bm = b1 ? unsq(b, -1) : b;
    if (a1 && b1) g = unsq(unsq(g, 0), 0);
    else if (a1) g = unsq(g, -2);
    else if (b1) g = unsq(g, -1);
    if (c->needs[0]) {
        TensorImpl *ga = bin(OP_matmul, g, mT(bm));
        SET(0, a1 ? sqz(ga, -2) : ga);
    }
    if (c->needs[1]) {
        TensorImpl *gb = bin(OP_matmul, mT(am), g);
        SET(1, b1 ? sqz(gb, -1) : gb);
    }
    return 0;
}

/* linear(x, w, bias) = x @ w^T + bias */
int d_linear(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *x = IN(0), *w = IN(1);
    if (w->ndim == 2) {
        SET(0, bin(OP_matmul, G, w));
        if (c->needs[1]) {
            if (x->ndim == 1) SET(1, bin(OP_outer, G, x));
            else SET(1, bin(OP_mm, mT(to2d(G)), to2d(x)));
        }
    } else { /* w 1-d: out = x @ w */
        if (x->ndim == 1) {
            SET(0, bin(OP_mul, G, w));
            SET(1, bin(OP_mul, G, x));
        } else {
            SET(0, bin(OP_mul, unsq(G, -1), w));
            int64_t n = G->numel;
            SET(1, bin(OP_mv, mT(to2d(x)), reshape(G, &n, 1)));
        }
    }
    SET(2, G);
    return 0;
}
