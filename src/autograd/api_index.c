/* api_index.c: the public functions of the shape-and-indexing rows of ops.def.
 * Each unwraps its handles, packs OpArgs (layouts in src/ops/index.c), calls
 * the autograd wrapper and wraps the result. */
#include "autograd/autograd.h"
#include <math.h>
#include <stdlib.h>

CT_INTERNAL TensorImpl *index_cat_impl(TensorImpl *const *ts, int n, int64_t dim);

static ct_tensor *call1(int op, OpArgs *a) { return c10_wrap(ag_call1(op, a)); }

#define U(h, name)                                                               \
    TensorImpl *name = c10_unwrap(h);                                            \
    if (!name) return NULL
#define U_INT(h, name)                                                           \
    TensorImpl *name = c10_unwrap(h);                                            \
    if (!name) return -1

/* ------------------------------------------------------------- cat, stack */

static bool any_requires_grad(TensorImpl *const *t, int n) {
    if (!ag_grad_enabled()) return false;
    for (int k = 0; k < n; k++)
        if (ag_requires_grad(t[k])) return true;
    return false;
}

/* Node inputs are limited to OP_MAX_TENSORS: longer lists that need history
 * become a tree of cat nodes (same values, same gradients). */
static TensorImpl *cat_list(TensorImpl *const *t, int n, int dim) {
    if (n <= OP_MAX_TENSORS) {
        OpArgs a = {.nt = n, .i = {dim}, .ni = 1};
        for (int k = 0; k < n; k++) a.t[k] = t[k];
        return ag_call1(OP_cat, &a);
    }
    if (!any_requires_grad(t, n)) return index_cat_impl(t, n, dim);
    int m = (n + OP_MAX_TENSORS - 1) / OP_MAX_TENSORS;
    TensorImpl **part = calloc((size_t)m, sizeof *part);
    if (!part) return c10_error("out of memory");
    TensorImpl *r = NULL;
    int g = 0;
    for (; g < m; g++) {
        int len = n - g * OP_MAX_TENSORS < OP_MAX_TENSORS ? n - g * OP_MAX_TENSORS : OP_MAX_TENSORS;
        if (!(part[g] = cat_list(t + g * OP_MAX_TENSORS, len, dim))) break;
    }
    if (g == m) r = cat_list(part, m, dim);
    for (int k = 0; k < g; k++) c10_release(part[k]);
    free(part);
    return r;
}

/* Unwraps a list; on a tree path, validates the whole list first on meta
 * stand-ins so that messages name positions in the caller's list. */
static TensorImpl **unwrap_list(const ct_tensor *const *ts, int n) {
    if (n < 0 || (n > 0 && !ts)) return c10_error("expected a list of tensors");
    TensorImpl **t = calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t) return c10_error("out of memory");
    if (!api_unwrap(ts, t, n)) {
        free(t);
        return NULL;
    }
    return t;
}

static TensorImpl *validate_on_meta(TensorImpl *const *t, int n, int dim) {
    TensorImpl **m = calloc((size_t)n, sizeof *m);
    if (!m) return c10_error("out of memory");
    int k = 0;
    for (; k < n; k++)
        if (!(m[k] = c10_empty(t[k]->sizes, t[k]->ndim, t[k]->dtype, CT_META))) break;
    TensorImpl *r = k == n ? index_cat_impl(m, n, dim) : NULL;
    for (int j = 0; j < k; j++) c10_release(m[j]);
    free(m);
    return r;
}

ct_tensor *ct_cat(const ct_tensor *const *ts, int n, int dim) {
    if (n == 0) return c10_error("torch.cat(): expected a non-empty list of Tensors");
    TensorImpl **t = unwrap_list(ts, n);
    if (!t) return NULL;
    TensorImpl *r = NULL;
    if (n > OP_MAX_TENSORS) {
        TensorImpl *v = validate_on_meta(t, n, dim);
        if (v) {
            c10_release(v);
            for (int k = 1; k < n; k++)
                if (!at_same_device("cat", t[0], t[k])) goto done;
            r = cat_list(t, n, dim);
        }
    } else {
        r = cat_list(t, n, dim);
    }
done:
    free(t);
    return c10_wrap(r);
}

ct_tensor *ct_stack(const ct_tensor *const *ts, int n, int dim) {
    if (n == 0) return c10_error("stack expects a non-empty TensorList");
    TensorImpl **t = unwrap_list(ts, n);
    if (!t) return NULL;
    TensorImpl *r = NULL;
    if (n <= OP_MAX_TENSORS) {
        OpArgs a = {.nt = n, .i = {dim}, .ni = 1};
        for (int k = 0; k < n; k++) a.t[k] = t[k];
        r = ag_call1(OP_stack, &a);
    } else {
        /* check the shapes, then unsqueeze each (differentiable views) and cat */
        bool ok = true;
        for (int k = 1; k < n && ok; k++) {
            ok = t[k]->ndim == t[0]->ndim;
            for (int d = 0; ok && d < t[0]->ndim; d++) ok = t[k]->sizes[d] == t[0]->sizes[d];
            if (!ok)
                c10_error("stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry %d",
                          c10_shape_str(t[0]->sizes, t[0]->ndim), c10_shape_str(t[k]->sizes, t[k]->ndim), k);
        }
        int d = ok ? c10_wrap_dim(dim, t[0]->ndim + 1) : -1;
        TensorImpl **u = d >= 0 ? calloc((size_t)n, sizeof *u) : NULL;
        if (u) {
            int k = 0;
            for (; k < n; k++) {
                OpArgs a = {.t = {t[k]}, .nt = 1, .i = {d}, .ni = 1};
                if (!(u[k] = ag_call1(OP_unsqueeze, &a))) break;
            }
            if (k == n) r = cat_list(u, n, d);
            for (int j = 0; j < k; j++) c10_release(u[j]);
            free(u);
        } else if (d >= 0) {
            c10_error("out of memory");
        }
    }
    free(t);
    return c10_wrap(r);
}

/* -------------------------------------------- index_select ... scatter */

ct_tensor *ct_index_select(const ct_tensor *h, int dim, const ct_tensor *index) {
    U(h, t);
    U(index, i);
    OpArgs a = {.t = {t, i}, .nt = 2, .i = {dim}, .ni = 1};
    return call1(OP_index_select, &a);
}

ct_tensor *ct_index_add(const ct_tensor *h, int dim, const ct_tensor *index, const ct_tensor *source, double alpha) {
    U(h, t);
    U(index, i);
    U(source, s);
    OpArgs a = {.t = {t, i, s}, .nt = 3, .i = {dim}, .ni = 1, .s = {alpha}};
    return call1(OP_index_add, &a);
}

ct_tensor *ct_gather(const ct_tensor *h, int dim, const ct_tensor *index) {
    U(h, t);
    U(index, i);
    OpArgs a = {.t = {t, i}, .nt = 2, .i = {dim}, .ni = 1};
    return call1(OP_gather, &a);
}

ct_tensor *ct_scatter(const ct_tensor *h, int dim, const ct_tensor *index, const ct_tensor *src) {
    U(h, t);
    U(index, i);
    U(src, s);
    OpArgs a = {.t = {t, i, s}, .nt = 3, .i = {dim}, .ni = 1};
    return call1(OP_scatter, &a);
}

ct_tensor *ct_scatter_value(const ct_tensor *h, int dim, const ct_tensor *index, double value) {
    U(h, t);
    U(index, i);
    OpArgs a = {.t = {t, i}, .nt = 2, .i = {dim}, .ni = 1, .s = {value}};
    return call1(OP_scatter_value, &a);
}

ct_tensor *ct_scatter_add(const ct_tensor *h, int dim, const ct_tensor *index, const ct_tensor *src) {
    U(h, t);
    U(index, i);
    U(src, s);
    OpArgs a = {.t = {t, i, s}, .nt = 3, .i = {dim}, .ni = 1};
    return call1(OP_scatter_add, &a);
}

int ct_scatter_(ct_tensor *h, int dim, const ct_tensor *index, const ct_tensor *src) {
    U_INT(h, t);
    U_INT(index, i);
    U_INT(src, s);
    OpArgs a = {.t = {t, i, s}, .nt = 3, .i = {dim}, .ni = 1};
    return ag_call_inplace(OP_scatter, &a);
}

int ct_scatter_value_(ct_tensor *h, int dim, const ct_tensor *index, double value) {
    U_INT(h, t);
    U_INT(index, i);
    OpArgs a = {.t = {t, i}, .nt = 2, .i = {dim}, .ni = 1, .s = {value}};
    return ag_call_inplace(OP_scatter_value, &a);
}

int ct_scatter_add_(ct_tensor *h, int dim, const ct_tensor *index, const ct_tensor *src) {
    U_INT(h, t);
    U_INT(index, i);
    U_INT(src, s);
    OpArgs a = {.t = {t, i, s}, .nt = 3, .i = {dim}, .ni = 1};
    return ag_call_inplace(OP_scatter_add, &a);
}

/* ---------------------------------------------------- advanced indexing */

/* indices: NULL entries mean ':' (so a dead handle cannot be told from ':'
 * here; live handles are unwrapped normally). */
static bool unwrap_indices(const ct_tensor *const *idx, int n, TensorImpl **out, int max, const char *op) {
    if (n < 0 || n > max) {
        c10_error("%s: at most %d index tensors are supported (got %d)", op, max, n);
        return false;
    }
    if (n && !idx) {
        c10_error("%s: indices is NULL", op);
        return false;
    }
    for (int k = 0; k < n; k++) {
        out[k] = NULL;
        if (idx[k] && !(out[k] = c10_unwrap(idx[k]))) return false;
    }
    return true;
}

ct_tensor *ct_index(const ct_tensor *h, const ct_tensor *const *indices, int n) {
    U(h, t);
    OpArgs a = {.t = {t}, .nt = 1 + n};
    if (!unwrap_indices(indices, n, a.t + 1, OP_MAX_TENSORS - 1, "index")) return NULL;
    bool any = false;
    for (int k = 1; k <= n; k++) any |= a.t[k] != NULL;
    if (n > 0 && !any && n <= t->ndim) /* t[:, ...]: Python's slicing, a view */
        return ct_slice(h, 0, 0, INT64_MAX, 1);
    return call1(OP_index, &a);
}

ct_tensor *ct_index_put(const ct_tensor *h, const ct_tensor *const *indices, int n, const ct_tensor *values,
                        bool accumulate) {
    U(h, t);
    U(values, v);
    OpArgs a = {.t = {t, v}, .nt = 2 + n, .i = {accumulate}, .ni = 1};
    if (!unwrap_indices(indices, n, a.t + 2, OP_MAX_TENSORS - 2, "index_put")) return NULL;
    return call1(OP_index_put, &a);
}

int ct_index_put_(ct_tensor *h, const ct_tensor *const *indices, int n, const ct_tensor *values, bool accumulate) {
    U_INT(h, t);
    U_INT(values, v);
    OpArgs a = {.t = {t, v}, .nt = 2 + n, .i = {accumulate}, .ni = 1};
    if (!unwrap_indices(indices, n, a.t + 2, OP_MAX_TENSORS - 2, "index_put_")) return -1;
    return ag_call_inplace(OP_index_put, &a);
}

ct_tensor *ct_masked_select(const ct_tensor *h, const ct_tensor *mask) {
    U(h, t);
    U(mask, m);
    OpArgs a = {.t = {t, m}, .nt = 2};
    return call1(OP_masked_select, &a);
}

ct_tensor *ct_masked_fill(const ct_tensor *h, const ct_tensor *mask, double value) {
    U(h, t);
    U(mask, m);
    OpArgs a = {.t = {t, m}, .nt = 2, .s = {value}};
    return call1(OP_masked_fill, &a);
}

int ct_masked_fill_(ct_tensor *h, const ct_tensor *mask, double value) {
    U_INT(h, t);
    U_INT(mask, m);
    OpArgs a = {.t = {t, m}, .nt = 2, .s = {value}};
    return ag_call_inplace(OP_masked_fill, &a);
}

ct_tensor *ct_masked_scatter(const ct_tensor *h, const ct_tensor *mask, const ct_tensor *source) {
    U(h, t);
    U(mask, m);
    U(source, src);
    OpArgs a = {.t = {t, m, src}, .nt = 3};
    return call1(OP_masked_scatter, &a);
}

int ct_masked_scatter_(ct_tensor *h, const ct_tensor *mask, const ct_tensor *source) {
    U_INT(h, t);
    U_INT(mask, m);
    U_INT(source, src);
    OpArgs a = {.t = {t, m, src}, .nt = 3};
    return ag_call_inplace(OP_masked_scatter, &a);
}

ct_tensor *ct_nonzero(const ct_tensor *h) {
    U(h, t);
    OpArgs a = {.t = {t}, .nt = 1};
    return call1(OP_nonzero, &a);
}

ct_tensor *ct_take(const ct_tensor *h, const ct_tensor *index) {
    U(h, t);
    U(index, i);
    OpArgs a = {.t = {t, i}, .nt = 2};
    return call1(OP_take, &a);
}

/* ------------------------------------------------ flip ... pad */

/* n values at p: a count in range and, when there are any, a list. */
static bool check_count(const char *op, const void *p, int n, int max) {
    if (n > 0 && !p) {
        c10_error("%s: invalid argument: the list of %d values is NULL", op, n);
        return false;
    }
    if (n >= 0 && n <= max) return true;
    c10_error("%s: expected at most %d values, got %d", op, max, n);
    return false;
}

ct_tensor *ct_flip(const ct_tensor *h, const int *dims, int ndims) {
    U(h, t);
    if (!check_count("flip", dims, ndims, CT_MAX_DIMS)) return NULL;
    OpArgs a = {.t = {t}, .nt = 1, .ni = ndims};
    for (int k = 0; k < ndims; k++) a.i[k] = dims[k];
    return call1(OP_flip, &a);
}

ct_tensor *ct_roll(const ct_tensor *h, const int64_t *shifts, int nshifts, const int *dims, int ndims) {
    U(h, t);
    if (!check_count("roll", shifts, nshifts, CT_MAX_DIMS) || !check_count("roll", dims, ndims, CT_MAX_DIMS)) return NULL;
    if (nshifts == 0) return c10_error("roll: `shifts` required");
    OpArgs a = {.t = {t}, .nt = 1, .ni = nshifts + ndims + 1};
    for (int k = 0; k < nshifts; k++) a.i[k] = shifts[k];
    for (int k = 0; k < ndims; k++) a.i[nshifts + k] = dims[k];
    a.i[nshifts + ndims] = nshifts;
    return call1(OP_roll, &a);
}

ct_tensor *ct_repeat(const ct_tensor *h, const int64_t *repeats, int n) {
    U(h, t);
    if (!check_count("repeat", repeats, n, CT_MAX_DIMS)) return NULL;
    OpArgs a = {.t = {t}, .nt = 1, .ni = n};
    if (n) memcpy(a.i, repeats, sizeof(int64_t) * (size_t)n);
    return call1(OP_repeat, &a);
}

ct_tensor *ct_tile(const ct_tensor *h, const int64_t *reps, int n) {
    U(h, t);
    if (!check_count("tile", reps, n, CT_MAX_DIMS)) return NULL;
    int m = n > t->ndim ? n : t->ndim, lead = m - n;
    OpArgs a = {.t = {t}, .nt = 1, .ni = m};
    for (int k = 0; k < m; k++) a.i[k] = k < lead ? 1 : reps[k - lead];
    return call1(OP_repeat, &a);
}

ct_tensor *ct_tril(const ct_tensor *h, int64_t diagonal) {
    U(h, t);
    OpArgs a = {.t = {t}, .nt = 1, .i = {diagonal}, .ni = 1};
    return call1(OP_tril, &a);
}

ct_tensor *ct_triu(const ct_tensor *h, int64_t diagonal) {
    U(h, t);
    OpArgs a = {.t = {t}, .nt = 1, .i = {diagonal}, .ni = 1};
    return call1(OP_triu, &a);
}

ct_tensor *ct_pad(const ct_tensor *h, const int64_t *pad, int npad, double value) {
    U(h, t);
    if (!check_count("pad", pad, npad, 2 * CT_MAX_DIMS)) return NULL;
    OpArgs a = {.t = {t}, .nt = 1, .ni = npad, .s = {value}};
    if (npad) memcpy(a.i, pad, sizeof(int64_t) * (size_t)npad);
    return call1(OP_pad, &a);
}

/* ------------------------------------------------------- sort, topk */

static int two(int op, OpArgs *a, ct_tensor **values, ct_tensor **indices) {
    TensorImpl *out[OP_MAX_OUTS];
    int n = ag_call(op, a, out);
    if (n < 0) return -1;
    if (values) *values = c10_wrap(out[0]);
    else c10_release(out[0]);
    if (indices) *indices = c10_wrap(out[1]);
    else c10_release(out[1]);
    return 0;
}

int ct_sort(const ct_tensor *h, int dim, bool descending, bool stable, ct_tensor **values, ct_tensor **indices) {
    U_INT(h, t);
    OpArgs a = {.t = {t}, .nt = 1, .i = {dim, descending, stable}, .ni = 3};
    return two(OP_sort, &a, values, indices);
}

ct_tensor *ct_argsort(const ct_tensor *h, int dim, bool descending, bool stable) {
    ct_tensor *idx = NULL;
    return ct_sort(h, dim, descending, stable, NULL, &idx) < 0 ? NULL : idx;
}

int ct_topk(const ct_tensor *h, int64_t k, int dim, bool largest, bool sorted, ct_tensor **values, ct_tensor **indices) {
    U_INT(h, t);
    OpArgs a = {.t = {t}, .nt = 1, .i = {k, dim, largest, sorted}, .ni = 4};
    return two(OP_topk, &a, values, indices);
}

/* --------------------------------------------------- one_hot, embedding */

ct_tensor *ct_one_hot(const ct_tensor *h, int64_t num_classes) {
    U(h, t);
    OpArgs a = {.t = {t}, .nt = 1, .i = {num_classes}, .ni = 1};
    return call1(OP_one_hot, &a);
}

ct_tensor *ct_embedding(const ct_tensor *weight, const ct_tensor *indices, int64_t padding_idx) {
    U(weight, w);
    U(indices, i);
    OpArgs a = {.t = {w, i}, .nt = 2, .i = {padding_idx}, .ni = 1};
    return call1(OP_embedding, &a);
}

/* ------------------------------------------- where, clamp, lerp, addc* */

ct_tensor *ct_where(const ct_tensor *cond, const ct_tensor *x, const ct_tensor *y) {
    U(cond, c);
    U(x, a1);
    U(y, b1);
    OpArgs a = {.t = {c, a1, b1}, .nt = 3};
    return call1(OP_where, &a);
}

ct_tensor *ct_clamp(const ct_tensor *h, double min, double max) {
    U(h, t);
    OpArgs a = {.t = {t}, .nt = 1, .s = {min, max}};
    return call1(OP_clamp, &a);
}

int ct_clamp_(ct_tensor *h, double min, double max) {
    U_INT(h, t);
    OpArgs a = {.t = {t}, .nt = 1, .s = {min, max}};
    return ag_call_inplace(OP_clamp, &a);
}

ct_tensor *ct_clamp_tensor(const ct_tensor *h, const ct_tensor *min, const ct_tensor *max) {
    U(h, t);
    TensorImpl *lo = NULL, *hi = NULL;
    if (min && !(lo = c10_unwrap(min))) return NULL;
    if (max && !(hi = c10_unwrap(max))) return NULL;
    OpArgs a = {.t = {t, lo, hi}, .nt = 3};
    return call1(OP_clamp_tensor, &a);
}

ct_tensor *ct_lerp(const ct_tensor *h, const ct_tensor *end, const ct_tensor *weight) {
    U(h, t);
    U(end, e);
    U(weight, w);
    OpArgs a = {.t = {t, e, w}, .nt = 3};
    return call1(OP_lerp, &a);
}

ct_tensor *ct_lerp_scalar(const ct_tensor *h, const ct_tensor *end, double weight) {
    U(h, t);
    U(end, e);
    OpArgs a = {.t = {t, e}, .nt = 2, .s = {weight}};
    return call1(OP_lerp_scalar, &a);
}

ct_tensor *ct_addcmul(const ct_tensor *h, const ct_tensor *t1, const ct_tensor *t2, double value) {
    U(h, t);
    U(t1, a1);
    U(t2, a2);
    OpArgs a = {.t = {t, a1, a2}, .nt = 3, .s = {value}};
    return call1(OP_addcmul, &a);
}

ct_tensor *ct_addcdiv(const ct_tensor *h, const ct_tensor *t1, const ct_tensor *t2, double value) {
    U(h, t);
    U(t1, a1);
    U(t2, a2);
    OpArgs a = {.t = {t, a1, a2}, .nt = 3, .s = {value}};
    return call1(OP_addcdiv, &a);
}
