/* d_index.c: the backward formulas of the shape-and-indexing rows of ops.def
 * (PyTorch's derivatives.yaml for cat, index_select, gather, scatter, index,
 * sort, where, clamp, lerp, ...). Every gradient is built from ag_* ops, so
 * create_graph records the backward pass itself; temporaries go to the frame. */
#include "autograd/formulas.h"


/* ---- small differentiable helpers (results registered with F) ---- */

static TensorImpl *call(int op, OpArgs a) { return F(ag_call1(op, &a)); }

static TensorImpl *zeros_of(const InputMeta *m, const TensorImpl *like) {
    return F(c10_full(m->sizes, m->ndim, 0, like->dtype, like->device));
}

static TensorImpl *wrapped0(const TensorImpl *like) { return F(ag_wrapped_scalar(0, like->dtype)); }

static TensorImpl *where3(TensorImpl *cond, TensorImpl *a, TensorImpl *b) {
    if (!cond || !a || !b) return NULL;
    return call(OP_where, (OpArgs){.t = {cond, a, b}, .nt = 3});
}
static TensorImpl *bin(int op, TensorImpl *a, TensorImpl *b) { return F(ag_binary(op, a, b)); }
static TensorImpl *bins(int op, TensorImpl *a, double s) { return F(ag_binary_scalar(op, a, s)); }

static int ret(TensorImpl **slot, TensorImpl *t) { return (*slot = c10_retain(t)) ? 0 : -1; }

/* ---- cat, stack ---- */

int d_cat(BackwardCtx *c, TensorImpl **gi) {
    int n = c->node->num_next; /* legacy empty tensors only: any dim (the pieces are empty) */
    int dim = G->ndim == 1 && !G->numel ? 0 : c10_wrap_dim(ARGI(0), G->ndim);
    if (dim < 0) return -1;
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
        const InputMeta *m = &c->node->in_meta[k];
        if (m->ndim != G->ndim) continue; /* a skipped legacy empty tensor: zero gradient */
        int64_t len = m->sizes[dim];
        if (c->needs[k]) {
            TensorImpl *s = call(OP_narrow, (OpArgs){.t = {G}, .nt = 1, .i = {dim, off, len}, .ni = 3});
            if (ret(&gi[k], s) < 0) return -1;
        }
        off += len;
    }
    return 0;
}

int d_stack(BackwardCtx *c, TensorImpl **gi) {
    int n = c->node->num_next;
    int dim = c10_wrap_dim(ARGI(0), G->ndim);
    if (dim < 0) return -1;
    for (int k = 0; k < n; k++)
        if (c->needs[k] && ret(&gi[k], call(OP_select, (OpArgs){.t = {G}, .nt = 1, .i = {dim, k}, .ni = 2})) < 0)
            return -1;
    return 0;
}

/* ---- index_select, index_add, gather, scatter ---- */

int d_index_select(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *z = zeros_of(&c->node->in_meta[0], G);
    if (!z) return -1;
    return ret(&gi[0], call(OP_index_add, (OpArgs){.t = {z, c->in[1], G}, .nt = 3, .i = {ARGI(0)}, .ni = 1,
                                                   .s = {1}}));
}

int d_index_add(BackwardCtx *c, TensorImpl **gi) {
    if (c->needs[0] && ret(&gi[0], G) < 0) return -1;
    if (c->needs[2]) {
        TensorImpl *s = call(OP_index_select, (OpArgs){.t = {G, c->in[1]}, .nt = 2, .i = {ARGI(0)}, .ni = 1});
        if (s && c->args->s[0] != 1) s = bins(OP_mul, s, c->args->s[0]);
        if (ret(&gi[2], s) < 0) return -1;
    }
    return 0;
}

int d_gather(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *z = zeros_of(&c->node->in_meta[0], G);
    if (!z) return -1;
    return ret(&gi[0], call(OP_scatter_add, (OpArgs){.t = {z, c->in[1], G}, .nt = 3, .i = {ARGI(0)}, .ni = 1}));
}

static TensorImpl *scatter0(BackwardCtx *c) {
    return call(OP_scatter_value, (OpArgs){.t = {G, c->in[1]}, .nt = 2, .i = {ARGI(0)}, .ni = 1, .s = {0}});
}
static TensorImpl *gather_g(BackwardCtx *c) {
    return call(OP_gather, (OpArgs){.t = {G, c->in[1]}, .nt = 2, .i = {ARGI(0)}, .ni = 1});
}

int d_scatter(BackwardCtx *c, TensorImpl **gi) {
    if (c->needs[0] && ret(&gi[0], scatter0(c)) < 0) return -1;
    if (c->needs[2] && ret(&gi[2], gather_g(c)) < 0) return -1;
    return 0;
}
int d_scatter_value(BackwardCtx *c, TensorImpl **gi) { return ret(&gi[0], scatter0(c)); }
int d_scatter_add(BackwardCtx *c, TensorImpl **gi) {
    if (c->needs[0] && ret(&gi[0], G) < 0) return -1;
    if (c->needs[2] && ret(&gi[2], gather_g(c)) < 0) return -1;
    return 0;
}

/* ---- advanced indexing ---- */

/* index_put(base, values, indices..., accumulate) */
static TensorImpl *index_put(TensorImpl *base, TensorImpl *values, TensorImpl *const *idx, int n, bool acc) {
    if (!base || !values) return NULL;
    if (n > OP_MAX_TENSORS - 2) {
        c10_error("index: the backward of indexing supports at most %d index tensors", OP_MAX_TENSORS - 2);
        return NULL;
    }
    OpArgs a = {.t = {base, values}, .nt = 2 + n, .i = {acc}, .ni = 1};
    for (int k = 0; k < n; k++) a.t[2 + k] = idx[k];
    return call(OP_index_put, a);
}

int d_index(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *z = zeros_of(&c->node->in_meta[0], G);
    return ret(&gi[0], index_put(z, G, c->in + 1, c->node->num_next - 1, true));
}

int d_index_put(BackwardCtx *c, TensorImpl **gi) {
    int n = c->node->num_next - 2;
    if (c->needs[0]) {
        TensorImpl *g0 = ARGI(0) ? G : index_put(G, F(c10_scalar_tensor(0, G->dtype, G->device)), c->in + 2, n, false);
        if (ret(&gi[0], g0) < 0) return -1;
    }
    if (c->needs[1]) {
        OpArgs a = {.t = {G}, .nt = 1 + n};
        for (int k = 0; k < n; k++) a.t[1 + k] = c->in[2 + k];
        if (ret(&gi[1], call(OP_index, a)) < 0) return -1;
    }
    return 0;
}

int d_masked_select(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    TensorImpl *mask = c->in[1];
    int64_t shape[CT_MAX_DIMS];
    int nd = c10_broadcast_shape(m->sizes, m->ndim, mask->sizes, mask->ndim, shape);
    if (nd < 0) return -1;
    TensorImpl *z = F(c10_full(shape, nd, 0, G->dtype, G->device));
    TensorImpl *me = F(c10_expand(mask, shape, nd));
    if (!z || !me) return -1;
    TensorImpl *idx[1] = {me};
    return ret(&gi[0], index_put(z, G, idx, 1, true));
}

int d_masked_fill(BackwardCtx *c, TensorImpl **gi) {
    return ret(&gi[0], call(OP_masked_fill, (OpArgs){.t = {G, c->in[1]}, .nt = 2, .s = {0}}));
}

/* self: g where the mask is false; source: the masked elements of g, zero-padded
 * to source's size */
int d_masked_scatter(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *mask = c->in[1];
    if (c->needs[0] && ret(&gi[0], call(OP_masked_fill, (OpArgs){.t = {G, mask}, .nt = 2, .s = {0}})) < 0) return -1;
    if (c->needs[2]) {
        const InputMeta *m = &c->node->in_meta[2];
        int64_t numel = 1;
        for (int d = 0; d < m->ndim; d++) numel *= m->sizes[d];
        TensorImpl *sel = call(OP_masked_select, (OpArgs){.t = {G, mask}, .nt = 2});
        if (!sel) return -1;
        TensorImpl *p = call(OP_pad, (OpArgs){.t = {sel}, .nt = 1, .i = {0, numel - sel->numel}, .ni = 2});
        if (!p) return -1;
        OpArgs v = {.t = {p}, .nt = 1, .ni = m->ndim};
        memcpy(v.i, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
        if (ret(&gi[2], call(OP_view, v)) < 0) return -1;
    }
    return 0;
}

int d_take(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    int64_t numel = 1;
    for (int d = 0; d < m->ndim; d++) numel *= m->sizes[d];
    TensorImpl *z = F(c10_full(&numel, 1, 0, G->dtype, G->device));
    TensorImpl *idx[1] = {c->in[1]};
    TensorImpl *flat = index_put(z, G, idx, 1, true);
    if (!flat) return -1;
    OpArgs a = {.t = {flat}, .nt = 1, .ni = m->ndim};
    memcpy(a.i, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    return ret(&gi[0], call(OP_view, a));
}

/* ---- flip, roll, repeat, tril/triu, pad ---- */

int d_flip(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = *c->args;
    a.t[0] = G;
    a.nt = 1;
    return ret(&gi[0], call(OP_flip, a));
}

int d_roll(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = *c->args;
    a.t[0] = G;
    a.nt = 1;
    int n = (int)a.i[a.ni - 1];
    for (int k = 0; k < n; k++) a.i[k] = -a.i[k];
    return ret(&gi[0], call(OP_roll, a));
}

int d_repeat(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    int nr = c->args->ni, lead = nr - m->ndim;
    if (!G->numel) return ret(&gi[0], zeros_of(m, G)); /* a repeat of 0, or of an empty dim (any repeat) */
    if (2 * nr > CT_MAX_DIMS) return c10_error_int("repeat: backward supports at most %d dimensions", CT_MAX_DIMS / 2);
    OpArgs r = {.t = {G}, .nt = 1, .ni = 2 * nr};
    int64_t keep[CT_MAX_DIMS];
    for (int d = 0; d < nr; d++) {
        int64_t s = d < lead ? 1 : m->sizes[d - lead];
        r.i[2 * d] = c->args->i[d];
        r.i[2 * d + 1] = s;
        keep[2 * d] = 1;
        keep[2 * d + 1] = s;
    }
    int64_t st[CT_MAX_DIMS];
    TensorImpl *g2 = call(c10_view_strides(G, r.i, r.ni, st) ? OP_view : OP_reshape_copy, r);
    TensorImpl *s = g2 ? F(ag_sum_to_size(g2, keep, 2 * nr)) : NULL;
    if (!s) return -1;
    OpArgs v = {.t = {s}, .nt = 1, .ni = m->ndim};
    memcpy(v.i, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    return ret(&gi[0], call(c10_view_strides(s, v.i, v.ni, st) ? OP_view : OP_reshape_copy, v));
}

int d_tril(BackwardCtx *c, TensorImpl **gi) {
    return ret(&gi[0], call(OP_tril, (OpArgs){.t = {G}, .nt = 1, .i = {ARGI(0)}, .ni = 1}));
}
int d_triu(BackwardCtx *c, TensorImpl **gi) {
    return ret(&gi[0], call(OP_triu, (OpArgs){.t = {G}, .nt = 1, .i = {ARGI(0)}, .ni = 1}));
}

/* constant pad's gradient is the gradient padded by the negated amounts (a crop) */
int d_pad(BackwardCtx *c, TensorImpl **gi) {
    OpArgs a = *c->args;
    a.t[0] = G;
    a.nt = 1;
    a.s[0] = 0;
    for (int k = 0; k < a.ni; k++) a.i[k] = -a.i[k];
    return ret(&gi[0], call(OP_pad, a));
}

/* ---- sort, topk: the gradient scattered back by the indices ---- */

static int scatter_back(BackwardCtx *c, TensorImpl **gi, int64_t dim) {
    TensorImpl *z = zeros_of(&c->node->in_meta[0], G);
    if (!z) return -1;
    return ret(&gi[0], call(OP_scatter, (OpArgs){.t = {z, c->out[1], G}, .nt = 3, .i = {dim}, .ni = 1}));
}
int d_sort(BackwardCtx *c, TensorImpl **gi) { return scatter_back(c, gi, ARGI(0)); }
int d_topk(BackwardCtx *c, TensorImpl **gi) { return scatter_back(c, gi, ARGI(1)); }

/* ---- embedding ---- */

int d_embedding(BackwardCtx *c, TensorImpl **gi) {
    const InputMeta *m = &c->node->in_meta[0];
    return ret(&gi[0], call(OP_embedding_backward,
                            (OpArgs){.t = {G, c->in[1]}, .nt = 2, .i = {m->sizes[0], ARGI(0)}, .ni = 2}));
}

/* embedding_backward is linear in grad: its gradient is the embedding of the
 * incoming gradient, with the padding rows zeroed */
int d_embedding_backward(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *e = call(OP_embedding, (OpArgs){.t = {G, c->in[1]}, .nt = 2, .i = {-1}, .ni = 1});
    if (e && ARGI(1) >= 0) {
        TensorImpl *eq = bins(OP_eq, c->in[1], (double)ARGI(1));
        TensorImpl *mk = eq ? F(c10_unsqueeze(eq, eq->ndim)) : NULL;
        e = mk ? call(OP_masked_fill, (OpArgs){.t = {e, mk}, .nt = 2, .s = {0}}) : NULL;
    }
    return ret(&gi[0], e);
}

/* ---- where, clamp, lerp, addcmul, addcdiv ---- */

int d_where(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *cond = c->in[0], *z = wrapped0(G);
    if (c->needs[1] && ret(&gi[1], where3(cond, G, z)) < 0) return -1;
    if (c->needs[2] && ret(&gi[2], where3(cond, z, G)) < 0) return -1;
    return 0;
}

int d_clamp(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *x = c->in[0], *mask = NULL;
    double lo = c->args->s[0], hi = c->args->s[1];
    if (lo == lo) mask = bins(OP_ge, x, lo);
    if (hi == hi) {
        TensorImpl *m2 = bins(OP_le, x, hi);
        mask = mask ? bin(OP_logical_and, mask, m2) : m2;
    }
    return ret(&gi[0], where3(mask, G, wrapped0(G)));
}

int d_clamp_tensor(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *x = c->in[0], *lo = c->in[1], *hi = c->in[2], *z = wrapped0(G);
    if (c->needs[0]) {
        TensorImpl *mask = NULL;
        if (lo) mask = bin(OP_ge, x, lo);
        if (hi) {
            TensorImpl *m2 = bin(OP_le, x, hi);
            mask = mask ? bin(OP_logical_and, mask, m2) : m2;
        }
        if (ret(&gi[0], where3(mask, G, z)) < 0) return -1;
    }
    if (lo && hi) {
        if (c->needs[1] && ret(&gi[1], where3(bin(OP_logical_and, bin(OP_lt, x, lo), bin(OP_lt, lo, hi)), G, z)) < 0)
            return -1;
        if (c->needs[2] && ret(&gi[2], where3(bin(OP_logical_or, bin(OP_gt, x, hi), bin(OP_lt, hi, lo)), G, z)) < 0)
            return -1;
    } else if (lo) {
        if (c->needs[1] && ret(&gi[1], where3(bin(OP_lt, x, lo), G, z)) < 0) return -1;
    } else if (hi) {
        if (c->needs[2] && ret(&gi[2], where3(bin(OP_gt, x, hi), G, z)) < 0) return -1;
    }
    return 0;
}

int d_lerp(BackwardCtx *c, TensorImpl **gi) {
    TensorImpl *x = c->in[0], *e = c->in[1], *w = c->in[2];
    if (c->needs[0] && ret(&gi[0], bin(OP_mul, G, bins(OP_add, F(ag_unary(OP_neg, w)), 1))) < 0) return -1;
    if (c->needs[1] && ret(&gi[1], bin(OP_mul, G, w)) < 0) return -1;
    if (c->needs[2] && ret(&gi[2], bin(OP_mul, G, bin(OP_sub, e, x))) < 0) return -1;
    return 0;
}

int d_lerp_scalar(BackwardCtx *c, TensorImpl **gi) {
    double w = c->args->s[0];
    if (c->needs[0] && ret(&gi[0], bins(OP_mul, G, 1 - w)) < 0) return -1;
    if (c->needs[1] && ret(&gi[1], bins(OP_mul, G, w)) < 0) return -1;
    return 0;
}

int d_addcmul(BackwardCtx *c, TensorImpl **gi) {
    double v = c->args->s[0];
    if (c->needs[0] && ret(&gi[0], G) < 0) return -1;
    if (c->needs[1] && ret(&gi[1], bins(OP_mul, bin(OP_mul, G, c->in[2]), v)) < 0) return -1;
    if (c->needs[2] && ret(&gi[2], bins(OP_mul, bin(OP_mul, G, c->in[1]), v)) < 0) return -1;
    return 0;
}

int d_addcdiv(BackwardCtx *c, TensorImpl **gi) {
    double v = c->args->s[0];
    TensorImpl *t1 = c->in[1], *t2 = c->in[2];
    if (c->needs[0] && ret(&gi[0], G) < 0) return -1;
    if (c->needs[1] && ret(&gi[1], bin(OP_div, bins(OP_mul, G, v), t2)) < 0) return -1;
    if (c->needs[2]) {
        TensorImpl *num = bin(OP_mul, bins(OP_mul, G, -v), t1);
        if (ret(&gi[2], bin(OP_div, num, bin(OP_mul, t2, t2))) < 0) return -1;
    }
    return 0;
}
