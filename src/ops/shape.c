/* shape.c: the forwards of the view and copy rows of ops.def. Views wrap the
 * pure geometry of core/view.c; the argument layout of each is noted. */
#include "ops/ops.h"

TensorImpl *at_to_dtype(const TensorImpl *t, ct_dtype dtype) {
    TensorImpl *o = at_empty_like(t, dtype); /* torch.preserve_format */
    if (o && at_copy_(o, t) < 0) {
        c10_release(o);
        return NULL;
    }
    return o;
}

TensorImpl *at_contiguous(const TensorImpl *t) {
    if (t->is_contiguous) return c10_retain((TensorImpl *)t);
    TensorImpl *o = c10_empty(t->sizes, t->ndim, t->dtype, t->device);
    if (o && at_copy_(o, t) < 0) {
        c10_release(o);
        return NULL;
    }
    return o;
}

#define ONE(expr) return (out[0] = (expr)) ? 1 : -1

/* t[0]; i: size[ndim], stride[ndim], ndim, offset  (ni = 2*ndim + 2) */
int fwd_as_strided(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    int n = (int)a->i[a->ni - 2];
    ONE(c10_as_strided(a->t[0], a->i, a->i + n, n, a->i[a->ni - 1]));
}
/* t[0]; i: shape (ni = ndim) */
int fwd_view(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_view(a->t[0], a->i, a->ni));
}
/* t[0]; i: dim, start, length */
int fwd_narrow(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_narrow(a->t[0], (int)a->i[0], a->i[1], a->i[2]));
}
/* t[0]; i: dim, start, end, step */
int fwd_slice(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_slice(a->t[0], (int)a->i[0], a->i[1], a->i[2], a->i[3]));
}
/* t[0]; i: dim, index */
int fwd_select(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_select(a->t[0], (int)a->i[0], a->i[1]));
}
/* t[0]; i: dim0, dim1 */
int fwd_transpose(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_transpose(a->t[0], (int)a->i[0], (int)a->i[1]));
}
/* t[0]; i: dims (ni = ndim) */
int fwd_permute(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_permute(a->t[0], a->i, a->ni));
}
/* t[0]; i: shape (ni = ndim) */
int fwd_expand(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_expand(a->t[0], a->i, a->ni));
}
/* t[0]; i: dim (CT_MAX_DIMS: every size-1 dim) */
int fwd_squeeze(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_squeeze(a->t[0], (int)a->i[0]));
}
/* t[0]; i: dim */
int fwd_unsqueeze(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_unsqueeze(a->t[0], (int)a->i[0]));
}
/* t[0]; i: offset, dim1, dim2 */
int fwd_diagonal(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_diagonal(a->t[0], a->i[0], (int)a->i[1], (int)a->i[2]));
}
/* t[0]; i: dim, size, step */
int fwd_unfold(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_unfold(a->t[0], (int)a->i[0], a->i[1], a->i[2]));
}
/* t[0]: a new TensorImpl over the same data (detach, view_as of itself) */
int fwd_alias(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_alias(a->t[0]));
}
/* t[0] */
int fwd_clone(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(at_to_dtype(a->t[0], a->t[0]->dtype));
}
/* t[0]: a contiguous copy (clone with memory_format=torch.contiguous_format) */
int fwd_contiguous(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(at_contiguous(a->t[0]));
}
/* t[0]; i: shape (already inferred): a contiguous copy in the new shape */
int fwd_reshape_copy(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *c = at_contiguous(a->t[0]);
    if (!c) return -1;
    TensorImpl *v = c10_view(c, a->i, a->ni);
    c10_release(c);
    ONE(v);
}
/* t[0]; i: dtype */
int fwd_to_dtype(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (!c10_dtype_valid((int)a->i[0])) return c10_error_int("to: invalid dtype %d", (int)a->i[0]);
    ONE(at_to_dtype(a->t[0], (ct_dtype)a->i[0]));
}
/* dst = t[0] (written), t[1] = src */
int fwd_copy_(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (at_copy_(a->t[0], a->t[1]) < 0) return -1;
    out[0] = c10_retain(a->t[0]);
    return 1;
}
/* dst = t[0] (written); s[0]: value. Overlapping tensors (expand) may be filled. */
int fwd_fill_(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (c10_check_value_fits(a->s[0], a->t[0]->dtype) < 0) return -1;
    c10_fill(a->t[0], a->s[0]);
    out[0] = c10_retain(a->t[0]);
    return 1;
}

/* t[0]; i: shape (ni = ndim). Sums t down to shape (broadcasting undone):
 * leading dims vanish, dims of size 1 in shape are summed with keepdim. */
int fwd_sum_to_size(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *t = a->t[0];
    int nd = a->ni, lead = t->ndim - nd;
    if (lead < 0) return c10_error_int("sum_to_size: size %s is not expandable to size %s",
                                       c10_shape_str(a->i, nd), c10_shape_str(t->sizes, t->ndim));
    for (int i = 0; i < nd; i++)
        if (a->i[i] != 1 && a->i[i] != t->sizes[lead + i])
            return c10_error_int("sum_to_size: size %s is not expandable to size %s", c10_shape_str(a->i, nd),
                                 c10_shape_str(t->sizes, t->ndim));
    /* the reduction engine (reduce.c): sum the leading dims and the dims that
     * shape has as 1, with keepdim, then view as shape */
    OpArgs s = {.t = {(TensorImpl *)t}, .nt = 1, .i = {1, 0}};
    int n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (d < lead || (a->i[d - lead] == 1 && t->sizes[d] != 1)) s.i[2 + n++] = d;
    if (n == 0) { /* nothing to sum: a contiguous copy in shape */
        TensorImpl *c = c10_empty(a->i, nd, t->dtype, t->device);
        if (c && at_copy_(c, t) < 0) {
            c10_release(c);
            c = NULL;
        }
        return (out[0] = c) ? 1 : -1;
    }
    s.i[1] = n;
    s.ni = 2 + n;
    TensorImpl *r = at_call1(OP_sum_dims, &s);
    if (r && r->dtype != t->dtype) {
        TensorImpl *c = at_to_dtype(r, t->dtype);
        c10_release(r);
        r = c;
    }
    TensorImpl *v = r ? c10_view(r, a->i, nd) : NULL;
    c10_release(r);
    return (out[0] = v) ? 1 : -1;
}

/* t[0] = g; i: base ndim nb, base sizes[nb], base strides[nb], view ndim nv,
 * sizes[nv], strides[nv], offset. The backward of every view: zeros laid out
 * like the base (its strides when dense, else contiguous) with g added into the
 * view's elements (repeatedly where the view overlaps itself, as expand and
 * unfold do). */
int fwd_view_scatter(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *g = a->t[0];
    int nb = (int)a->i[0];
    const int64_t *base = a->i + 1, *base_strides = base + nb;
    int nv = (int)a->i[1 + 2 * nb];
    const int64_t *sizes = a->i + 2 + 2 * nb, *strides = sizes + nv;
    int64_t offset = strides[nv];
    TensorImpl *o = at_empty_strided(base, base_strides, nb, g->dtype, g->device);
    if (!o) return -1;
    c10_fill(o, 0);
    if (g->numel != 0 && o->device != CT_META) {
        int64_t es = (int64_t)c10_elsize[o->dtype];
        char *od = c10_data(o);
        const char *gd = c10_data(g);
        int64_t limit = (int64_t)(o->storage->nbytes / (size_t)es);
        for (int64_t k = 0; k < g->numel; k++) {
            int64_t rest = k, off = offset;
            for (int d = nv - 1; d >= 0; d--) {
                off += (rest % sizes[d]) * strides[d];
                rest /= sizes[d];
            }
            if (off < 0 || off >= limit) {
                c10_release(o);
                return c10_error_int("view geometry reaches outside its base (element %lld of %lld)",
                                     (long long)off, (long long)limit);
            }
            double v = c10_load_double(od + off * es, o->dtype) + c10_load_double(gd + c10_linear_offset(g, k), g->dtype);
            c10_store_double(od + off * es, o->dtype, v);
        }
    }
    out[0] = o;
    return 1;
}
