/* d_linalg.c: backward formulas of the linear-algebra and convolution rows of
 * ops.def (derivatives.yaml's mm, bmm, addmm, ... and the conv/pool backward
 * ops). Every gradient is built from ag_* ops, so create_graph works; broadcast
 * gradients are summed to the input's shape by the engine. */
#include "autograd/formulas.h"


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
static TensorImpl *to_dtype(TensorImpl *x, ct_dtype d) { return F(ag_to_dtype(x, d)); }
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
    /* a is saved only when b needs its gradient, and b when a does */
    TensorImpl *a = IN(0), *b = IN(1), *g = G;
    bool a1 = META(0)->ndim == 1, b1 = META(1)->ndim == 1;
    TensorImpl *am = !c->needs[1] ? NULL : a1 ? unsq(a, 0) : a, *bm = !c->needs[0] ? NULL : b1 ? unsq(b, -1) : b;
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
    /* x is saved only when w needs its gradient, and w when x does */
    TensorImpl *x = IN(0), *w = IN(1);
    if (META(1)->ndim == 2) {
        SET(0, bin(OP_matmul, G, w));
        if (c->needs[1]) {
            if (META(0)->ndim == 1) SET(1, bin(OP_outer, G, x));
            else SET(1, bin(OP_mm, mT(to2d(G)), to2d(x)));
        }
    } else { /* w 1-d: out = x @ w */
        if (META(0)->ndim == 1) {
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

/* ============================================================ convolution */

/* OpArgs for a conv op: tensors, the convolution's 8 parameters (i[0..7]) and
 * optionally a shape (ndim, sizes...). */
static OpArgs conv_args(BackwardCtx *c, TensorImpl *t0, TensorImpl *t1, const int64_t *shape, int nd) {
    OpArgs a = {.t = {t0, t1}, .nt = 2, .ni = 8};
    memcpy(a.i, c->args->i, sizeof(int64_t) * 8);
    if (shape) {
        a.i[8] = nd;
        memcpy(a.i + 9, shape, sizeof(int64_t) * (size_t)nd);
        a.ni = 9 + nd;
    } else {
        a.t[2] = NULL, a.nt = 3;
    }
    return a;
}
static TensorImpl *conv_call(int op, OpArgs a) {
    for (int k = 0; k < 2; k++)
        if (!a.t[k]) return NULL;
    return F(ag_call1(op, &a));
}

/* convolution(x, w, b): x: conv_backward_input(g, w), w: conv_backward_weight(x, g),
 * b: g summed over every dim but the channels */
int d_convolution(BackwardCtx *c, TensorImpl **gi) {
    SET(0, conv_call(OP_conv_backward_input, conv_args(c, G, IN(1), META(0)->sizes, META(0)->ndim)));
    SET(1, conv_call(OP_conv_backward_weight, conv_args(c, IN(0), G, META(1)->sizes, META(1)->ndim)));
    if (c->needs[2]) {
        int nd = G->ndim, batched = nd == (int)c->args->i[0] + 2;
        OpArgs a = {.t = {G}, .nt = 1, .i = {0, 0}};
        int n = 0;
        for (int d = 0; d < nd; d++)
            if (d != batched) a.i[2 + n++] = d;
        a.i[1] = n, a.ni = 2 + n;
        SET(2, F(ag_call1(OP_sum_dims, &a)));
    }
    return 0;
}

/* conv_backward_input(g, w) is linear in each: g: convolution(G, w), w: conv_backward_weight(G, g) */
int d_conv_backward_input(BackwardCtx *c, TensorImpl **gi) {
    SET(0, conv_call(OP_convolution, conv_args(c, G, IN(1), NULL, 0)));
    SET(1, conv_call(OP_conv_backward_weight, conv_args(c, G, IN(0), META(1)->sizes, META(1)->ndim)));
    return 0;
}

/* conv_backward_weight(x, g): x: conv_backward_input(g, G), g: convolution(x, G) */
int d_conv_backward_weight(BackwardCtx *c, TensorImpl **gi) {
    SET(0, conv_call(OP_conv_backward_input, conv_args(c, IN(1), G, META(0)->sizes, META(0)->ndim)));
    SET(1, conv_call(OP_convolution, conv_args(c, IN(0), G, NULL, 0)));
    return 0;
}

/* ================================================================ pooling */

static OpArgs shape_args(TensorImpl *t0, TensorImpl *t1, const int64_t *pre, int npre, const InputMeta *m) {
    OpArgs a = {.t = {t0, t1}, .nt = t1 ? 2 : 1};
    if (npre) memcpy(a.i, pre, sizeof(int64_t) * (size_t)npre);
    a.i[npre] = m->ndim;
    memcpy(a.i + npre + 1, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    a.ni = npre + 1 + m->ndim;
    return a;
}

/* max_pool2d: the gradient goes to the argmax of each window (indices
 * recomputed from the saved input) */
int d_max_pool2d(BackwardCtx *c, TensorImpl **gi) {
    OpArgs ia = *c->args;
    ia.t[0] = IN(0), ia.nt = 1;
    TensorImpl *idx = F(at_call1(OP_max_pool2d_indices, &ia));
    if (!idx) return -1;
    OpArgs a = shape_args(G, idx, NULL, 0, META(0));
    SET(0, F(ag_call1(OP_max_pool2d_backward, &a)));
    return 0;
}
/* max_pool2d_backward(g, idx): g: gather G at idx */
int d_max_pool2d_backward(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = {.t = {G, IN(1)}, .nt = 2};
    SET(0, F(ag_call1(OP_max_pool2d_gather, &a)));
    return 0;
}
/* max_pool2d_gather(src, idx): src: scatter G back */
int d_max_pool2d_gather(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = shape_args(G, IN(1), NULL, 0, META(0));
    SET(0, F(ag_call1(OP_max_pool2d_backward, &a)));
    return 0;
}

int d_avg_pool2d(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = shape_args(G, NULL, c->args->i, 9, META(0));
    SET(0, F(ag_call1(OP_avg_pool2d_backward, &a)));
    return 0;
}
/* avg_pool2d_backward is avg_pool2d's adjoint: its derivative is avg_pool2d */
int d_avg_pool2d_backward(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = {.t = {G}, .nt = 1, .ni = 9};
    memcpy(a.i, c->args->i, sizeof(int64_t) * 9);
    SET(0, F(ag_call1(OP_avg_pool2d, &a)));
    return 0;
}

int d_adaptive_avg_pool2d(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = shape_args(G, NULL, NULL, 0, META(0));
    SET(0, F(ag_call1(OP_adaptive_avg_pool2d_backward, &a)));
    return 0;
}
int d_adaptive_avg_pool2d_backward(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = META(0);
    OpArgs a = {.t = {G}, .nt = 1, .i = {m->sizes[m->ndim - 2], m->sizes[m->ndim - 1]}, .ni = 2};
    SET(0, F(ag_call1(OP_adaptive_avg_pool2d, &a)));
    return 0;
}
