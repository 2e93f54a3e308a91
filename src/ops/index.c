/* index.c: the shape-and-indexing family of ops.def (cat, stack, index_select,
 * gather, scatter, advanced indexing, masks, sort/topk, pad, ...).
 *
 * Data-movement ops work on bytes: their kernels are instantiated per element
 * size (1, 2, 4, 8 bytes), not per dtype. Ops that add (scatter_add, index_add,
 * index_put with accumulate, embedding_backward) or compare (sort, topk) are
 * instantiated per dtype from one list; float16/bfloat16 compute in float.
 * Every index is validated before anything is written, with PyTorch's message;
 * negative indices wrap where PyTorch wraps them. On the meta device the
 * forwards stop after allocating their outputs (ops whose output shape depends
 * on the data, such as nonzero and masked_select, fail there as in PyTorch). */
#include "ops/ops.h"
#include "ops/kernels/vmath.h" /* VM_FMA: lerp and addcmul as torch rounds them */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#define GRAIN 32768

/* ------------------------------------------------------------------ helpers */

#define ELSIZE_SWITCH(es, ...)                                                   \
    switch (es) {                                                                \
    case 1: { typedef uint8_t E; __VA_ARGS__ } break;                            \
    case 2: { typedef uint16_t E; __VA_ARGS__ } break;                           \
    case 4: { typedef uint32_t E; __VA_ARGS__ } break;                           \
    default: { typedef uint64_t E; __VA_ARGS__ } break;                          \
    }

#define ID_(x) (x)


/* In-place writes into a tensor whose elements share memory (an expanded one). */
static int overlap_error(const char *op) {
    return c10_error_int("%s: unsupported operation: more than one element of the written-to tensor refers to a "
                         "single memory location. Please clone() the tensor before performing the operation.", op);
}

/* The end of a forward: out[0] = o when r is 0, else o is released; 1 or -1. */
/* c10_check_value_fits for a value torch holds as a float Scalar: a negative
 * one does not wrap into uint8 (an integral one does) */
static int float_value_fits(double v, ct_dtype d) { return c10_check_value_fits(d == CT_UINT8 && v < 0 ? -256 : v, d); }

static int put_out(int r, TensorImpl *o, TensorImpl **out) {
    if (r < 0) {
        c10_release(o);
        return -1;
    }
    out[0] = o;
    return 1;
}

static const char *dev_name(ct_device d) { return d == CT_META ? "meta" : "cpu"; }

static bool same_device(const char *op, const TensorImpl *a, const TensorImpl *b) {
    if (!b || a->device == b->device) return true;
    c10_error("%s: Expected all tensors to be on the same device, but found at least two devices, %s and %s!", op,
              dev_name(a->device), dev_name(b->device));
    return false;
}

/* PyTorch's lower-case spelling of a dtype in some messages ("float", "long"). */
static const char *lower_name(ct_dtype d) {
    static _Thread_local char buf[4][16];
    static _Thread_local int k;
    const char *s = c10_dtype_cname(d);
    char *o = buf[k++ & 3];
    size_t i = 0;
    for (; s[i] && i < 15; i++) o[i] = (char)tolower((unsigned char)s[i]);
    o[i] = 0;
    return o;
}

/* Prefixes the current error message with "op: " (copying it first). */
static int prefix_error(const char *op) {
    char msg[1024];
    const char *m = ct_last_error();
    snprintf(msg, sizeof msg, "%s", m ? m : "");
    return c10_error_int("%s: %s", op, msg);
}
static void *prefix_error_p(const char *op) {
    prefix_error(op);
    return NULL;
}

/* A contiguous int64 copy of an index tensor (or the tensor itself). */
static TensorImpl *as_long(const TensorImpl *t) {
    TensorImpl *c = at_contiguous(t); /* row-major (at_to_dtype would keep a permuted layout) */
    if (!c || t->dtype == CT_INT64) return c;
    TensorImpl *l = at_to_dtype(c, CT_INT64);
    c10_release(c);
    return l;
}

static const int64_t *ldata(const TensorImpl *t) { return (const int64_t *)c10_data(t); }

static int64_t prod(const int64_t *s, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= s[i];
    return p;
}

/* Offsets (in elements) of every position of a row-major walk over sizes with
 * the given strides: out[numel]. */
static void offsets_of(const int64_t *sizes, const int64_t *strides, int n, int64_t *out) {
    int64_t total = prod(sizes, n);
    int64_t idx[CT_MAX_DIMS] = {0}, off = 0;
    for (int64_t k = 0; k < total; k++) {
        out[k] = off;
        for (int d = n - 1; d >= 0; d--) {
            idx[d]++;
            off += strides[d];
            if (idx[d] < sizes[d]) break;
            off -= idx[d] * strides[d];
            idx[d] = 0;
        }
    }
}

static int copy_into(TensorImpl *dst, const TensorImpl *src) { return at_copy_(dst, src); }

/* ---------------------------------------------------------------- cat/stack */

CT_INTERNAL TensorImpl *index_cat_impl(TensorImpl *const *ts, int n, int64_t dim_in);

/* Concatenates ts[0..n-1] (any count) along dim: the shared implementation of
 * the cat and stack rows and of ct_cat for long lists. */
TensorImpl *index_cat_impl(TensorImpl *const *ts, int n, int64_t dim_in) {
    if (n <= 0) return c10_error("torch.cat(): expected a non-empty list of Tensors");
    const TensorImpl *ref = NULL;
    PromoteState st = {0};
    for (int k = 0; k < n; k++) {
        if (ts[k]->ndim == 0)
            return c10_error("cat: zero-dimensional tensor (at position %d) cannot be concatenated", k);
        if (!same_device("cat", ts[0], ts[k])) return NULL;
        st.dim = st.has_dim ? c10_promote(st.dim, ts[k]->dtype) : ts[k]->dtype;
        st.has_dim = true;
        if (!ref && !(ts[k]->ndim == 1 && ts[k]->sizes[0] == 0)) ref = ts[k];
    }
    ct_dtype dt = st.dim;
    if (!ref) { /* only legacy empty tensors: torch wraps no dim, the result is one more */
        int64_t zero = 0;
        return c10_empty(&zero, 1, dt, ts[0]->device);
    }
    int dim = c10_wrap_dim(dim_in, ref->ndim);
    if (dim < 0) return prefix_error_p("cat");
    int64_t sizes[CT_MAX_DIMS];
    memcpy(sizes, ref->sizes, sizeof sizes);
    sizes[dim] = 0;
    for (int k = 0; k < n; k++) {
        const TensorImpl *t = ts[k];
        if (t->ndim == 1 && t->sizes[0] == 0 && ref != t && !(ref->ndim == 1)) continue; /* legacy empty */
        if (t->ndim != ref->ndim)
            return c10_error("cat: Tensors must have same number of dimensions: got %d and %d", ref->ndim, t->ndim);
        for (int d = 0; d < ref->ndim; d++)
            if (d != dim && t->sizes[d] != ref->sizes[d])
                return c10_error("cat: Sizes of tensors must match except in dimension %d. Expected size %lld but "
                                 "got size %lld for tensor number %d in the list.",
                                 dim, (long long)ref->sizes[d], (long long)t->sizes[d], k);
        sizes[dim] += t->sizes[dim];
    }
    TensorImpl *o = c10_empty(sizes, ref->ndim, dt, ref->device);
    if (!o || o->device == CT_META) return o;
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
        const TensorImpl *t = ts[k];
        if (t->ndim != ref->ndim || t->numel == 0) {
            if (t->ndim == ref->ndim) off += t->sizes[dim];
            continue;
        }
        TensorImpl *v = c10_narrow(o, dim, off, t->sizes[dim]);
        int r = v ? copy_into(v, t) : -1;
        c10_release(v);
        if (r < 0) {
            c10_release(o);
            return NULL;
        }
        off += t->sizes[dim];
    }
    return o;
}

/* t[0..nt-1]: the tensors (nt <= OP_MAX_TENSORS); i: dim */
int fwd_cat(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    return (out[0] = index_cat_impl(a->t, a->nt, a->i[0])) ? 1 : -1;
}

static TensorImpl *index_stack_impl(TensorImpl *const *ts, int n, int64_t dim_in) {
    if (n <= 0) return c10_error("stack expects a non-empty TensorList");
    int dim = c10_wrap_dim(dim_in, ts[0]->ndim + 1); /* torch: the dim before the sizes */
    if (dim < 0) return prefix_error_p("stack");
    for (int k = 1; k < n; k++) {
        bool same = ts[k]->ndim == ts[0]->ndim;
        for (int d = 0; same && d < ts[0]->ndim; d++) same = ts[k]->sizes[d] == ts[0]->sizes[d];
        if (!same)
            return c10_error("stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry %d",
                             c10_shape_str(ts[0]->sizes, ts[0]->ndim), c10_shape_str(ts[k]->sizes, ts[k]->ndim), k);
    }
    TensorImpl **u = calloc((size_t)n, sizeof *u);
    if (!u) return c10_error("out of memory");
    TensorImpl *o = NULL;
    int k = 0;
    for (; k < n; k++)
        if (!(u[k] = c10_unsqueeze(ts[k], dim))) break;
    if (k == n) o = index_cat_impl(u, n, dim);
    for (int j = 0; j < k; j++) c10_release(u[j]);
    free(u);
    return o;
}

/* t[0..nt-1]: the tensors; i: dim */
int fwd_stack(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    return (out[0] = index_stack_impl(a->t, a->nt, a->i[0])) ? 1 : -1;
}

/* ------------------------------------------------------ index_select/add */

/* Checks an index vector against size; -1 with torch's message when one is
 * out: "index out of range in self", or when named (torch's index_select along
 * dim 1, and of an empty input) the message that names the first bad index. */
static int check_range(const char *op, const int64_t *p, int64_t n, int64_t size, bool named) {
    for (int64_t i = 0; i < n; i++)
        if (p[i] < 0 || p[i] >= size)
            return named ? c10_error_int("%s: INDICES element is out of DATA bounds, id=%lld axis_dim=%lld", op,
                                         (long long)p[i], (long long)size)
                         : c10_error_int("%s: index out of range in self", op);
    return 0;
}

/* t[0] self, t[1] index (0/1-dim, int32/int64); i: dim */
int fwd_index_select(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0], *index = a->t[1];
    if (!same_device("index_select", self, index)) return -1;
    int dim = c10_wrap_dim(a->i[0], self->ndim);
    if (dim < 0) return prefix_error("index_select");
    if (index->ndim > 1) return c10_error_int("index_select(): Index is supposed to be a vector");
    if (index->dtype != CT_INT64 && index->dtype != CT_INT32)
        return c10_error_int("index_select(): Expected dtype int32 or int64 for index");
    int64_t sizes[CT_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof sizes);
    int64_t n = index->numel, size = self->ndim ? self->sizes[dim] : 1;
    if (self->ndim) sizes[dim] = n;
    else if (n != 1) return c10_error_int("index_select(): Index to scalar can have only 1 value, got %lld value(s)",
                                          (long long)n);
    bool multi = self->ndim > 1 && n > 0; /* torch's checks by path: */
    if (multi && size == 0) return c10_error_int("index_select(): self indexing axis dim should be positive");
    TensorImpl *o = c10_empty(sizes, self->ndim, self->dtype, self->device);
    if (!o || o->device == CT_META) return (out[0] = o) ? 1 : -1;
    TensorImpl *idx = as_long(index), *src = idx ? at_contiguous(self) : NULL;
    int r = -1;
    if (src && check_range("index_select", ldata(idx), n, size, multi && (dim == 1 || !self->numel)) == 0) {
        int64_t outer = self->ndim ? prod(self->sizes, dim) : 1;
        int64_t inner = self->ndim ? prod(self->sizes + dim + 1, self->ndim - dim - 1) : 1;
        size_t es = c10_elsize[self->dtype], row = (size_t)inner * es;
        const char *s = c10_data(src);
        char *d = c10_data(o);
        const int64_t *ip = ldata(idx);
        int64_t total = outer * n;
        if (inner == 1) { /* one element per index: typed copies */
            ELSIZE_SWITCH(es, {
                const E *sp = (const E *)s;
                E *dp = (E *)d;
OMP(omp parallel for if (total > GRAIN))
                for (int64_t i = 0; i < outer; i++) {
                    const E *restrict sr = sp + i * size;
                    E *restrict dr = dp + i * n;
                    for (int64_t j = 0; j < n; j++) dr[j] = sr[ip[j]];
                }
            })
        } else {
OMP(omp parallel for if (total * inner > GRAIN))
            for (int64_t k = 0; k < total; k++) {
                int64_t i = k / n, j = k % n;
                memcpy(d + (size_t)k * row, s + ((size_t)i * (size_t)size + (size_t)ip[j]) * row, row);
            }
        }
        r = 0;
    }
    c10_release(idx);
    c10_release(src);
    return put_out(r, o, out);
}

/* dst[outer, size, inner] += alpha * src[outer, n, inner] at rows idx[n]
 * (contiguous dst and src of dtype dt); serial: deterministic. */
#define INDEX_ADD_K(D, ST, CT, LD, SV)                                           \
    static void index_add_##ST##_##CT(char *dst_, const char *src_, const int64_t *idx, int64_t outer, \
                                      int64_t size, int64_t n, int64_t inner, double alpha) {       \
        ST *dst = (ST *)dst_;                                                    \
        const ST *src = (const ST *)src_;                                        \
        CT al = c10_is_float(D) || D == CT_BOOL ? (CT)alpha : (CT)(int64_t)alpha; /* -1 into uint8 wraps */ \
        OMP(omp parallel for if (outer * n * inner > GRAIN && outer > 1))  \
        for (int64_t i = 0; i < outer; i++)                                      \
            for (int64_t j = 0; j < n; j++) {                                    \
                ST *restrict dr = dst + (i * size + idx[j]) * inner;             \
                const ST *restrict sr = src + (i * n + j) * inner;               \
                for (int64_t k = 0; k < inner; k++)                              \
                    dr[k] = SV((CT)(LD(dr[k]) + al * LD(sr[k])));                \
            }                                                                    \
    }
#define INDEX_ADD_FN(D, ST, CT, LD, SV) INDEX_ADD_K(D, ST, CT, LD, SV)
/* storage/compute type names must be single tokens for the function names */
typedef bool b8_t;
typedef uint16_t h16_t;
typedef uint16_t bh16_t;
#define FOR_DTYPES_TOK(X)                                                        \
    X(CT_BOOL, b8_t, b8_t, ID_, ID_)                                             \
    X(CT_UINT8, uint8_t, uint8_t, ID_, ID_)                                      \
    X(CT_INT8, int8_t, int8_t, ID_, ID_)                                         \
    X(CT_INT16, int16_t, int16_t, ID_, ID_)                                      \
    X(CT_INT32, int32_t, int32_t, ID_, ID_)                                      \
    X(CT_INT64, int64_t, int64_t, ID_, ID_)                                      \
    X(CT_FLOAT16, h16_t, float, c10_h2f, c10_f2h)                                \
    X(CT_BFLOAT16, bh16_t, float, c10_bf2f, c10_f2bf)                            \
    X(CT_FLOAT32, float, float, ID_, ID_)                                        \
    X(CT_FLOAT64, double, double, ID_, ID_)

/* bool addition is logical or in PyTorch */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wbool-operation"
#pragma clang diagnostic ignored "-Wint-in-bool-context"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wbool-operation"
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
#endif

FOR_DTYPES_TOK(INDEX_ADD_FN)
typedef void (*index_add_fn)(char *, const char *, const int64_t *, int64_t, int64_t, int64_t, int64_t, double);
static const index_add_fn index_add_k[CT_NUM_DTYPES] = {
#define IA_ENTRY(D, ST, CT, LD, SV) [D] = index_add_##ST##_##CT,
    FOR_DTYPES_TOK(IA_ENTRY)
};

/* dst: contiguous; src: [outer, n, inner] rows to add at idx (validated). */
static int index_add_into(TensorImpl *dst, int dim, const TensorImpl *idx, const TensorImpl *source, double alpha) {
    TensorImpl *src = source->dtype == dst->dtype ? at_contiguous(source) : at_to_dtype(source, dst->dtype);
    if (!src) return -1;
    int64_t outer = dst->ndim ? prod(dst->sizes, dim) : 1;
    int64_t inner = dst->ndim ? prod(dst->sizes + dim + 1, dst->ndim - dim - 1) : 1;
    int64_t size = dst->ndim ? dst->sizes[dim] : 1;
    if (dst->numel && idx->numel)
        index_add_k[dst->dtype](c10_data(dst), c10_data(src), ldata(idx), outer, size, idx->numel, inner, alpha);
    c10_release(src);
    return 0;
}

/* torch adds source.select(dim, i) into self.select(dim, index[i]) with an
 * in-place add, so the source slice broadcasts to self's. A view of source
 * shaped as self with n along dim (zero strides where broadcast), or NULL. */
static TensorImpl *ia_source(const TensorImpl *self, int dim, const TensorImpl *src, int64_t n) {
    int64_t ss[CT_MAX_DIMS], rs[CT_MAX_DIMS], bs[CT_MAX_DIMS], sz[CT_MAX_DIMS], st[CT_MAX_DIMS];
    int ns = 0, nr = 0;
    for (int d = 0; d < self->ndim; d++)
        if (d != dim) ss[ns++] = self->sizes[d];
    for (int d = 0; d < src->ndim; d++)
        if (d != dim) rs[nr++] = src->sizes[d];
    int nb = c10_broadcast_shape(ss, ns, rs, nr, bs);
    if (nb < 0) return prefix_error("index_add_()"), NULL;
    if (nb != ns || memcmp(bs, ss, sizeof(int64_t) * (size_t)ns))
        return c10_error("index_add_(): output with shape %s doesn't match the broadcast shape %s",
                         c10_shape_str(ss, ns), c10_shape_str(bs, nb));
    for (int d = 0, j = 0; d < self->ndim; d++) {
        int k = d == dim ? dim : j++ - (ns - nr); /* source's slice dim k aligned with self's */
        int sd = d == dim ? dim : k < 0 ? -1 : k < dim ? k : k + 1;
        sz[d] = d == dim ? n : self->sizes[d];
        st[d] = sd >= 0 && src->sizes[sd] == sz[d] ? src->strides[sd] : 0;
    }
    return c10_as_strided(src, sz, st, self->ndim, src->offset);
}

/* t[0] self, t[1] index (1-dim int32/int64), t[2] source; i: dim; s[0]: alpha.
 * out = self.clone().index_add_(dim, index, source, alpha=alpha), with
 * torch's checks in its order: an empty index returns self before the slices
 * (and indices) are looked at when self has 2 or more dims. */
int fwd_index_add(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0], *index = a->t[1], *source = a->t[2];
    if (!same_device("index_add", self, index) || !same_device("index_add", self, source)) return -1;
    int dim = c10_wrap_dim(a->i[0], self->ndim);
    if (dim < 0) return prefix_error("index_add");
    int64_t n = index->numel;
    if (index->ndim > 1)
        return c10_error_int("index_add_(): Index is supposed to be a vector, but got dim: %d with type: %s and size: %s",
                             index->ndim, c10_dtype_cname(index->dtype), c10_shape_str(index->sizes, index->ndim));
    if (index->dtype != CT_INT64 && index->dtype != CT_INT32)
        return c10_error_int("index_add_(): Expected dtype int32/int64 for index but got: %s",
                             c10_dtype_cname(index->dtype));
    if (source->dtype != self->dtype)
        return c10_error_int("index_add_(): self (%s) and source (%s) must have the same scalar type",
                             c10_dtype_cname(self->dtype), c10_dtype_cname(source->dtype));
    if (dim != 0 && dim >= source->ndim)
        return c10_error_int("index_add_(): Indexing dim %d is out of bounds of the source tensor with dim %d", dim,
                             source->ndim);
    if (n != (source->ndim ? source->sizes[dim] : 1)) /* torch's message asks source.size(0) of a 0-dim source */
        return source->ndim ? c10_error_int("index_add_(): Number of indices (%lld) should be equal to "
                                            "source.size(dim): (%lld), for dim: %d",
                                            (long long)n, (long long)source->sizes[dim], dim)
                            : c10_error_int("index_add_(): Dimension specified as 0 but tensor has no dimensions");
    if (c10_check_value_fits(a->s[0], self->dtype) < 0) return -1; /* alpha */
    if (self->ndim <= 1 && source->ndim > 1)
        return c10_error_int("index_add_(): source.dim() (%d) must one or zero for given self.dim() (%d)",
                             source->ndim, self->ndim);
    if (self->ndim > 1 && n && !self->sizes[dim]) /* torch's self.select(dim, 0) */
        return c10_error_int("index_add_(): select(): index 0 out of range for tensor of size %s at dimension %d",
                             c10_shape_str(self->sizes, self->ndim), dim);
    if (self->ndim > 1 && n && !source->ndim)
        return c10_error_int("index_add_(): select() cannot be applied to a 0-dim tensor.");
    TensorImpl *src = self->ndim > 1 && n ? ia_source(self, dim, source, n) : c10_retain(source);
    TensorImpl *o = src ? c10_empty(self->sizes, self->ndim, self->dtype, self->device) : NULL;
    TensorImpl *idx = NULL;
    int r = o ? 0 : -1;
    bool run = r == 0 && o->device != CT_META;
    if (run) r = copy_into(o, self);
    if (run && n) {
        if (r == 0) r = (idx = as_long(index)) ? 0 : -1;
        if (r == 0) r = check_range("index_add", ldata(idx), n, self->ndim ? self->sizes[dim] : 1, false);
        if (r == 0) r = index_add_into(o, dim, idx, src, a->s[0]);
    }
    c10_release(idx);
    c10_release(src);
    return put_out(r, o, out);
}

/* ------------------------------------------------- gather/scatter family */

/* The checks of gather/scatter (PyTorch's gather_shape_check/scatter_shape_check). */
static int gs_check(const char *op, const TensorImpl *self, int dim, const TensorImpl *index, const TensorImpl *src,
                    bool is_gather) {
    if (index->numel == 0) return 0; /* torch returns before any check */
    if (index->dtype != CT_INT64) return c10_error_int("%s(): Expected dtype int64 for index", op);
    int sd = self->ndim ? self->ndim : 1, id = index->ndim ? index->ndim : 1;
    if (id != sd) return c10_error_int("%s: Index tensor must have the same number of dimensions as %s tensor", op,
                                       is_gather ? "input" : "self");
    if (src && (src->ndim ? src->ndim : 1) != sd)
        return c10_error_int("%s: Index tensor must have the same number of dimensions as src tensor", op);
    for (int d = 0; d < index->ndim; d++) {
        int64_t is = index->sizes[d];
        if (is_gather) {
            if (d != dim && self->ndim && is > self->sizes[d])
                return c10_error_int("%s: Size does not match at dimension %d expected index %s to be smaller than "
                                     "self %s apart from dimension %d",
                                     op, d, c10_shape_str(index->sizes, index->ndim),
                                     c10_shape_str(self->sizes, self->ndim), dim);
        } else if ((d != dim && self->ndim && is > self->sizes[d]) || (src && is > (src->ndim ? src->sizes[d] : 1))) {
            if (src)
                return c10_error_int("%s: Expected index %s to be smaller than self %s apart from dimension %d and "
                                     "to be smaller size than src %s",
                                     op, c10_shape_str(index->sizes, index->ndim),
                                     c10_shape_str(self->sizes, self->ndim), dim,
                                     c10_shape_str(src->sizes, src->ndim));
            return c10_error_int("%s: Expected index %s to be smaller than self %s apart from dimension %d", op,
                                 c10_shape_str(index->sizes, index->ndim), c10_shape_str(self->sizes, self->ndim),
                                 dim);
        }
    }
    return 0;
}

/* Walks index (contiguous int64, shape isz[n]) and produces for each element
 * the offset into a tensor with strides `st` (dim replaced by the index value)
 * and the offset into a tensor with strides `st2` (plain). Validates first. */
typedef struct {
    int n;
    int64_t sizes[CT_MAX_DIMS];
    int64_t st[CT_MAX_DIMS], st2[CT_MAX_DIMS];
    int dim;
    int64_t dimsize;
} GSWalk;

static void gs_walk_init(GSWalk *w, const TensorImpl *index, const TensorImpl *t, const TensorImpl *t2, int dim) {
    w->n = index->ndim;
    memcpy(w->sizes, index->sizes, sizeof w->sizes);
    if (w->n == 0 && t->ndim == 1) w->n = 1, w->sizes[0] = 1; /* a 0-dim index into a 1-d tensor: one element */
    for (int d = 0; d < w->n; d++) {
        w->st[d] = t->ndim ? t->strides[d] : 0;
        w->st2[d] = t2 && t2->ndim ? t2->strides[d] : 0;
    }
    w->dim = dim;
    w->dimsize = t->ndim ? t->sizes[dim] : 1;
}

static int gs_validate(const char *op, const GSWalk *w, const int64_t *ip, int64_t n) {
    /* one vectorised pass without a branch (over the threads), then the first
     * bad index found for the message (a loop that returned on it: 17% of a
     * [1024, 1024] scatter_add's time) */
    uint64_t lim = (uint64_t)w->dimsize, bad = 0;
OMP(omp parallel for reduction(| : bad) if (n > 8 * GRAIN))
    for (int64_t k = 0; k < n; k++) bad |= (uint64_t)ip[k] >= lim;
    for (int64_t k = 0; bad && k < n; k++)
        if (ip[k] < 0 || ip[k] >= w->dimsize)
            return c10_error_int("%s: index %lld is out of bounds for dimension %d with size %lld", op,
                                 (long long)ip[k], w->dim, (long long)w->dimsize);
    return 0;
}

/* offsets for element k: a = into t (index applied), b = into t2 */
static inline void gs_offsets(const GSWalk *w, int64_t k, int64_t v, int64_t *a, int64_t *b) {
    int64_t oa = 0, ob = 0;
    for (int d = w->n - 1; d >= 0; d--) {
        int64_t i = k % w->sizes[d];
        k /= w->sizes[d];
        oa += (d == w->dim ? 0 : i) * w->st[d];
        ob += i * w->st2[d];
    }
    *a = oa + v * (w->n ? w->st[w->dim] : 0);
    *b = ob;
}

/* t[0] self, t[1] index (int64, same ndim); i: dim */
int fwd_gather(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0], *index = a->t[1];
    if (!same_device("gather", self, index)) return -1;
    int dim = c10_wrap_dim(a->i[0], self->ndim);
    if (dim < 0) return prefix_error("gather");
    if (gs_check("gather", self, dim, index, NULL, true) < 0) return -1;
    TensorImpl *o = c10_empty(index->sizes, index->ndim, self->dtype, self->device);
    if (!o || o->device == CT_META || o->numel == 0) return (out[0] = o) ? 1 : -1;
    TensorImpl *idx = as_long(index);
    GSWalk w;
    if (!idx) {
        c10_release(o);
        return -1;
    }
    gs_walk_init(&w, idx, self, NULL, dim);
    const int64_t *ip = ldata(idx);
    uint64_t ds = (uint64_t)w.dimsize;
    /* validated on the way (a pass of its own cost a read of the index), out of
     * range read as 0, which an empty dim does not have */
    int bad = ds == 0;
    const char *s = c10_data(self);
    char *d = c10_data(o);
    int64_t n = o->numel;
    /* rows of the last dim: one offset computation per row */
    int last = w.n ? w.n - 1 : 0;
    int64_t L = w.n ? w.sizes[last] : 1, rows = n / L;
    int64_t st_dim = w.n ? w.st[dim] : 0, st_last = (w.n && last != dim) ? w.st[last] : 0;
    ELSIZE_SWITCH(c10_elsize[self->dtype], {
        const E *sp = (const E *)s;
        E *dp = (E *)d;
OMP(omp parallel for if (n > GRAIN) reduction(| : bad))
        for (int64_t r = 0; r < (ds ? rows : 0); r++) {
            int64_t base, ob;
            gs_offsets(&w, r * L, 0, &base, &ob);
            const int64_t *restrict ir = ip + r * L;
            E *restrict dr = dp + r * L;
            const E *restrict sr = sp + base;
            if (st_last == 0 && st_dim == 1) /* along a contiguous last dim (1.6x as fast alone) */
                for (int64_t j = 0; j < L; j++) {
                    bool in = (uint64_t)ir[j] < ds;
                    bad |= !in;
                    dr[j] = sr[in ? ir[j] : 0];
                }
            else
                for (int64_t j = 0; j < L; j++) {
                    bool in = (uint64_t)ir[j] < ds;
                    bad |= !in;
                    dr[j] = sr[j * st_last + (in ? ir[j] : 0) * st_dim];
                }
        }
    })
    if (bad) gs_validate("gather", &w, ip, n); /* the first index out of range, for the message */
    c10_release(idx);
    if (bad) c10_release(o);
    return (out[0] = bad ? NULL : o) ? 1 : -1;
}

/* Scatter core: o (contiguous clone of self) receives src (or value) at index.
 * mode 0: assign, 1: add. src converted to o's dtype first. */
/* Row geometry of a scatter: index rows along its last dim, so that offsets
 * are computed once per row. */
typedef struct {
    int64_t L, rows, st_dim, st_last_o, st_last_s;
} SRows;
static SRows srows(const GSWalk *w, const GSWalk *ws, int64_t n) {
    int last = w->n ? w->n - 1 : 0;
    SRows r;
    r.L = w->n ? w->sizes[last] : 1;
    r.rows = r.L ? n / r.L : 0;
    r.st_dim = w->n ? w->st[w->dim] : 0;
    r.st_last_o = (w->n && last != w->dim) ? w->st[last] : 0;
    r.st_last_s = ws->n ? ws->st2[last] : 0;
    return r;
}
/* The part of a scatter's rows r0..r1, columns j0..j1 (the last dim) that
 * thread t of nt takes: whole rows when the scatter dim is the last one (a row
 * writes its own row), else all rows of a block of columns (a column writes
 * its own column). Each output element is then updated by one thread, in the
 * serial order. */
static void scatter_part(const GSWalk *w, const SRows *g, int t, int nt, int64_t *r0, int64_t *r1, int64_t *j0,
                         int64_t *j1) {
    bool rows = w->n == 0 || w->dim == w->n - 1;
    int64_t m = rows ? g->rows : g->L;
    int64_t a = m * t / nt, b = m * (t + 1) / nt;
    *r0 = rows ? a : 0, *r1 = rows ? b : g->rows, *j0 = rows ? 0 : a, *j1 = rows ? g->L : b;
}
/* The scatters check their indices on the way (a pass of its own re-read the
 * index: 20% of a [1024, 1024] scatter_add's time): an index out of range
 * writes at 0 instead and raises the flag they return, on which the caller
 * drops the output (in place, self is validated before: never half written). */
/* float32 and float64 -O3; the others small (-Os: 2.5 KB a dtype came to 20 KB) */
#define SA_ATTR_float
#define SA_ATTR_double
#define SA_ATTR_int8_t COLD_CODE
#define SA_ATTR_uint8_t COLD_CODE
#define SA_ATTR_int16_t COLD_CODE
#define SA_ATTR_int32_t COLD_CODE
#define SA_ATTR_int64_t COLD_CODE
#define SA_ATTR_b8_t COLD_CODE
#define SA_ATTR_h16_t COLD_CODE
#define SA_ATTR_bh16_t COLD_CODE
#define SCATTER_ADD_K(D, ST, CT, LD, SV)                                         \
    SA_ATTR_##ST static bool scatter_add_##ST##_##CT(char *o_, const char *s_, const GSWalk *w, const GSWalk *ws, \
                                        const int64_t *ip, int64_t n, int t, int nt) { \
        ST *o = (ST *)o_;                                                        \
        const ST *s = (const ST *)s_;                                            \
        SRows g = srows(w, ws, n);                                               \
        int64_t r0, r1, j0, j1;                                                  \
        uint64_t ds = (uint64_t)w->dimsize;                                      \
        bool bad = false;                                                        \
        scatter_part(w, &g, t, nt, &r0, &r1, &j0, &j1);                          \
        for (int64_t r = r0; r < r1; r++) {                                      \
            int64_t bo, ob, sa, bs;                                              \
            gs_offsets(w, r * g.L, 0, &bo, &ob);                                 \
            gs_offsets(ws, r * g.L, 0, &sa, &bs);                                \
            const int64_t *ir = ip + r * g.L;                                    \
            for (int64_t j = j0; j < j1; j++) {                                  \
                bool in = (uint64_t)ir[j] < ds;                                  \
                bad |= !in;                                                      \
                int64_t oa = bo + j * g.st_last_o + (in ? ir[j] : 0) * g.st_dim; \
                o[oa] = SV((CT)(LD(o[oa]) + LD(s[bs + j * g.st_last_s])));       \
            }                                                                    \
        }                                                                        \
        return bad;                                                              \
    }
FOR_DTYPES_TOK(SCATTER_ADD_K)
typedef bool (*scatter_add_fn)(char *, const char *, const GSWalk *, const GSWalk *, const int64_t *, int64_t, int,
                               int);
static const scatter_add_fn scatter_add_k[CT_NUM_DTYPES] = {
#define SA_ENTRY(D, ST, CT, LD, SV) [D] = scatter_add_##ST##_##CT,
    FOR_DTYPES_TOK(SA_ENTRY)
};

static int scatter_common(const char *op, const OpArgs *a, TensorImpl **out, int mode, bool has_src) {
    TensorImpl *self = a->t[0], *index = a->t[1], *src = has_src ? a->t[2] : NULL;
    if (!same_device(op, self, index) || !same_device(op, self, src)) return -1;
    int dim = c10_wrap_dim(a->i[0], self->ndim);
    if (dim < 0) return prefix_error(op);
    if (index->dtype != CT_INT64 && index->numel) /* torch's words for scatter_add too */
        return c10_error_int("scatter(): Expected dtype int64 for index");
    if (src && src->dtype != self->dtype)
        return c10_error_int("scatter(): Expected self.dtype to be equal to src.dtype"); /* torch's, for both */
    if (gs_check(op, self, dim, index, src, false) < 0) return -1;
    if (a->dst && c10_has_internal_overlap(a->dst)) return overlap_error(op);
    if (a->dst && (at_check_no_overlap(op, a->dst, index) < 0 || at_check_no_overlap(op, a->dst, src) < 0)) return -1;
    TensorImpl *o = a->dst ? c10_retain(a->dst) : c10_empty(self->sizes, self->ndim, self->dtype, self->device);
    if (!o || o->device == CT_META) return (out[0] = o) ? 1 : -1;
    TensorImpl *idx = NULL, *sv = NULL;
    int r = a->dst ? 0 : copy_into(o, self);
    if (r == 0 && index->numel) {
        idx = as_long(index);
        GSWalk w, ws;
        if (idx) gs_walk_init(&w, idx, o, NULL, dim);
        if (!idx) {
            r = -1;
        } else if (!has_src && c10_check_value_fits(a->s[0], self->dtype) < 0) {
            gs_validate(op, &w, ldata(idx), idx->numel); /* torch: a bad index is named first */
            r = -1;
        } else if (!(sv = has_src ? c10_retain(src) : c10_scalar_tensor(a->s[0], self->dtype, CT_CPU))) {
            r = -1;
        } else {
            gs_walk_init(&ws, idx, sv, sv, dim);
            /* in place, before any write; an empty dim has no element 0 to write at */
            if (a->dst || w.dimsize == 0) r = gs_validate(op, &w, ldata(idx), idx->numel);
        }
        if (r == 0) {
            const int64_t *ip = ldata(idx);
            int64_t n = idx->numel;
            char *od = c10_data(o);
            const char *sd = c10_data(sv);
            bool bad = false;
OMP(omp parallel if (n > GRAIN) reduction(| : bad))
            {
                int t = 0, nt = 1;
#ifdef _OPENMP
                t = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
                if (mode == 1) bad |= scatter_add_k[o->dtype](od, sd, &w, &ws, ip, n, t, nt);
                else
                    ELSIZE_SWITCH(c10_elsize[o->dtype], {
                        E *op_ = (E *)od;
                        const E *sp = (const E *)sd;
                        SRows g = srows(&w, &ws, n);
                        int64_t r0, r1, j0, j1;
                        uint64_t ds = (uint64_t)w.dimsize;
                        scatter_part(&w, &g, t, nt, &r0, &r1, &j0, &j1);
                        for (int64_t r = r0; r < r1; r++) {
                            int64_t bo, ob, sa, bs;
                            gs_offsets(&w, r * g.L, 0, &bo, &ob);
                            gs_offsets(&ws, r * g.L, 0, &sa, &bs);
                            const int64_t *ir = ip + r * g.L;
                            for (int64_t j = j0; j < j1; j++) {
                                bool in = (uint64_t)ir[j] < ds;
                                bad |= !in;
                                op_[bo + j * g.st_last_o + (in ? ir[j] : 0) * g.st_dim] = sp[bs + j * g.st_last_s];
                            }
                        }
                    })
            }
            if (bad) r = gs_validate(op, &w, ip, n); /* the first index out of range, for the message */
        }
    }
    c10_release(idx);
    c10_release(sv);
    return put_out(r, o, out);
}

/* t[0] self, t[1] index (int64), t[2] src (self's dtype); i: dim. dst: in place */
int fwd_scatter(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    return scatter_common("scatter", a, out, 0, true);
}
/* t[0] self, t[1] index; i: dim; s[0]: value. dst: in place */
int fwd_scatter_value(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    return scatter_common("scatter", a, out, 0, false); /* the value's range after the index's checks */
}
/* t[0] self, t[1] index, t[2] src; i: dim. dst: in place */
int fwd_scatter_add(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    return scatter_common("scatter_add", a, out, 1, true);
}

/* -------------------------------------------------------- nonzero/masks */

/* Compactions (nonzero, masked_select) over the threads: the mask's rows of L
 * cut into parts, each counted (cnt[q + 1] = the set elements of parts <= q,
 * cnt[0] = 0), then each part written from cnt[q] on. Serial, with a branch
 * per element, [1024, 1024] nonzero of a random mask took 1.7x torch's time. */
#define MAX_PARTS 64
static int compact_parts(int64_t n, int64_t rows) {
    int64_t parts = n / GRAIN < rows ? n / GRAIN : rows;
#ifdef _OPENMP
    if (parts > 4 * omp_get_max_threads()) parts = 4 * omp_get_max_threads();
#endif
    return parts < 1 ? 1 : parts > MAX_PARTS ? MAX_PARTS : (int)parts;
}
static void compact_count(const bool *p, int64_t L, int64_t rows, int parts, int64_t *cnt) {
OMP(omp parallel for schedule(static) if (parts > 1))
    for (int q = 0; q < parts; q++) {
        int64_t c = 0;
        for (int64_t k = rows * q / parts * L; k < rows * (q + 1) / parts * L; k++) c += p[k];
        cnt[q + 1] = c;
    }
    for (int q = 0; q < parts; q++) cnt[q + 1] += cnt[q];
}

static TensorImpl *nonzero_impl(const char *op, const TensorImpl *t) {
    if (t->device == CT_META)
        return c10_error("%s: Could not run 'aten::nonzero' with arguments from the 'Meta' backend.", op);
    TensorImpl *c = at_contiguous(t);
    if (!c) return NULL;
    TensorImpl *b = c->dtype == CT_BOOL ? c10_retain(c) : NULL;
    if (!b) {
        b = c10_empty(c->sizes, c->ndim, CT_BOOL, c->device);
        if (b && copy_into(b, c) < 0) {
            c10_release(b);
            b = NULL;
        }
    }
    c10_release(c);
    if (!b) return NULL;
    const bool *p = (const bool *)c10_data(b);
    int nd = b->ndim;
    int64_t n = b->numel, L = nd ? b->sizes[nd - 1] : 1, rows = L ? n / L : 0;
    int64_t cnt[MAX_PARTS + 1] = {0};
    int parts = compact_parts(n, rows);
    compact_count(p, L, rows, parts, cnt);
    int64_t sizes[2] = {cnt[parts], nd};
    TensorImpl *o = c10_empty(sizes, 2, CT_INT64, b->device);
    if (o && cnt[parts]) {
        int64_t *op_ = (int64_t *)c10_data(o);
OMP(omp parallel for schedule(static) if (parts > 1))
        for (int q = 0; q < parts; q++) { /* rows [r0, r1) into rows cnt[q] on */
            int64_t r0 = rows * q / parts, r1 = rows * (q + 1) / parts, r = cnt[q], end = cnt[q + 1];
            int64_t idx[CT_MAX_DIMS] = {0}, rest = r0, spare[CT_MAX_DIMS];
            for (int d = nd - 2; d >= 0; d--) idx[d] = rest % b->sizes[d], rest /= b->sizes[d];
            for (int64_t row = r0; row < r1; row++) {
                const bool *pr = p + row * L;
                for (int64_t j = 0; j < L; j++) { /* written always, kept when set: no branch to mispredict */
                    int64_t *w = r < end ? op_ + r * nd : spare;
                    for (int d = 0; d < nd - 1; d++) w[d] = idx[d];
                    if (nd) w[nd - 1] = j;
                    r += pr[j];
                }
                for (int d = nd - 2; d >= 0; d--) {
                    if (++idx[d] < b->sizes[d]) break;
                    idx[d] = 0;
                }
            }
        }
    }
    c10_release(b);
    return o;
}

/* t[0]: [nnz, ndim] int64 indices of the non-zero elements */
/* torch's nonzero fills an [ndim, nnz] tensor and returns its transpose: the
 * [nnz, ndim] result has strides (1, nnz). Written row-major, copied over. */
int fwd_nonzero(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *r = nonzero_impl("nonzero", a->t[0]);
    if (!r) return -1;
    int64_t t_sizes[2] = {r->sizes[1], r->sizes[0]}, st[2] = {1, r->sizes[0]}; /* (1, 0) when empty, as torch */
    TensorImpl *c = c10_empty(t_sizes, 2, CT_INT64, r->device), *o = c ? c10_as_strided(c, r->sizes, st, 2, 0) : NULL;
    int rc = o && r->numel ? copy_into(o, r) : o ? 0 : -1;
    c10_release(c);
    c10_release(r);
    if (rc < 0) {
        c10_release(o);
        return -1;
    }
    return (out[0] = o) ? 1 : -1;
}

/* --------------------------------------------------- advanced indexing */

typedef struct {
    int np, nbd, nq;
    int64_t psz[CT_MAX_DIMS];
    int pdim[CT_MAX_DIMS], qdim[CT_MAX_DIMS]; /* the indexed tensor's dims of the p and q parts */
    int64_t bsz[CT_MAX_DIMS];
    int64_t qsz[CT_MAX_DIMS];
    int64_t NP, NB, NQ;
    TensorImpl *di[CT_MAX_DIMS]; /* per dim: its int64 index or NULL (owned) */
    int64_t *poff, *boff, *qoff; /* malloc'd by adv_offsets */
    bool q_contig;               /* qoff[q] == q */
    int out_ndim;
    int64_t out_sizes[CT_MAX_DIMS];
} AdvIndex;

static void adv_free(AdvIndex *ai) {
    free(ai->poff);
    free(ai->boff);
    free(ai->qoff);
    ai->poff = ai->boff = ai->qoff = NULL;
    for (int d = 0; d < CT_MAX_DIMS; d++) c10_release(ai->di[d]);
    memset(ai->di, 0, sizeof ai->di);
}

/* A mask's shape against self's dims from pos: -1 with torch's message */
static int mask_check(const char *op, const TensorImpl *self, const TensorImpl *e, int pos) {
    for (int j = 0; j < e->ndim; j++) {
        if (pos + j >= self->ndim)
            return c10_error_int("%s: Dimension out of range (expected to be in range of [%d, %d], but got %d)", op,
                                 -self->ndim, self->ndim - 1, pos + j);
        if (e->sizes[j] != self->sizes[pos + j])
            return c10_error_int("%s: The shape of the mask %s at index %d does not match the shape of the indexed "
                                 "tensor %s at index %d", op, c10_shape_str(e->sizes, e->ndim), j,
                                 c10_shape_str(self->sizes, self->ndim), pos + j);
    }
    return 0;
}

/* Plans self[indices] (entries NULL = ':'; int64 = one dim; bool/uint8 = a mask
 * over as many dims as it has): the shapes, and each dim's index (adv_offsets
 * then checks their range and makes the offset tables). */
COLD_CODE static int adv_prepare(const char *op, const TensorImpl *self, TensorImpl *const *ent, int n, AdvIndex *ai) {
    memset(ai, 0, sizeof *ai);
    TensorImpl **di = ai->di;
    int pos = 0, r = -1;
    bool meta = self->device == CT_META;
    /* torch's order: the entries' count, their dtypes, then each in turn */
    if (n > self->ndim) {
        c10_error("%s: too many indices for tensor of dimension %d (got %d)", op, self->ndim, n);
        goto done;
    }
    for (int k = 0; k < n; k++)
        if (ent[k] && ent[k]->dtype != CT_BOOL && ent[k]->dtype != CT_UINT8 && ent[k]->dtype != CT_INT64) {
            c10_error("%s: tensors used as indices must be long, byte or bool tensors", op);
            goto done;
        }
    for (int k = 0; k < n; k++) {
        TensorImpl *e = ent[k];
        if (!e) { /* a ':' past the dims (after a mask): Python's refusal (aten reads past them) */
            if (pos++ >= self->ndim) {
                c10_error("%s: too many indices for tensor of dimension %d", op, self->ndim);
                goto done;
            }
            continue;
        }
        if (!same_device(op, self, e)) goto done;
        if (e->dtype == CT_BOOL || e->dtype == CT_UINT8) { /* (0-dim ones made 1-element by the callers) */
            if (mask_check(op, self, e, pos) < 0) goto done;
            if (meta || e->device == CT_META) {
                c10_error("%s: boolean mask indexing has a data-dependent shape and is not supported on the meta "
                          "device", op);
                goto done;
            }
            TensorImpl *nz = nonzero_impl(op, e);
            if (!nz) goto done;
            for (int j = 0; j < e->ndim; j++) {
                di[pos + j] = c10_select(nz, 1, j);
                if (!di[pos + j]) {
                    c10_release(nz);
                    goto done;
                }
            }
            c10_release(nz);
            pos += e->ndim;
        } else {
            if (pos >= self->ndim) { /* after masks took the dims */
                c10_error("%s: Dimension out of range (expected to be in range of [%d, %d], but got %d)", op,
                          -self->ndim, self->ndim - 1, pos);
                goto done;
            }
            di[pos++] = c10_retain(e);
        }
    }
    /* broadcast the index shapes */
    int first = -1, last = -1, nb = 0;
    int64_t b[CT_MAX_DIMS];
    for (int d = 0; d < self->ndim; d++) {
        if (!di[d]) continue;
        if (first < 0) first = d;
        last = d;
        int m = c10_broadcast_shape(b, nb, di[d]->sizes, di[d]->ndim, b);
        if (m < 0) {
            char msg[512];
            int len = 0;
            for (int e = 0; e < self->ndim; e++)
                if (di[e])
                    len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s", len ? ", " : "",
                                    c10_shape_str(di[e]->sizes, di[e]->ndim));
            c10_error("%s: shape mismatch: indexing tensors could not be broadcast together with shapes %s", op,
                      msg);
            goto done;
        }
        nb = m;
    }
    for (int d = 0; d < self->ndim; d++) /* torch's make_info: no index fits a dim of size 0 */
        if (di[d] && self->sizes[d] == 0 && prod(b, nb) != 0) {
            c10_error("%s: index is out of bounds for dimension with size 0", op);
            goto done;
        }
    if (first < 0) { /* no advanced index: a plain copy */
        nb = 0;
        first = last = self->ndim;
    }
    bool adjacent = true;
    for (int d = first; d <= last && d < self->ndim; d++)
        if (!di[d]) adjacent = false;
    ai->nbd = nb;
    memcpy(ai->bsz, b, sizeof(int64_t) * (size_t)nb);
    for (int d = 0; d < self->ndim; d++) {
        if (di[d]) continue;
        if (adjacent && d < first) {
            ai->psz[ai->np] = self->sizes[d];
            ai->pdim[ai->np++] = d;
        } else {
            ai->qsz[ai->nq] = self->sizes[d];
            ai->qdim[ai->nq++] = d;
        }
    }
    if (ai->np + ai->nbd + ai->nq > CT_MAX_DIMS) {
        c10_error("%s: the result would have more than %d dimensions", op, CT_MAX_DIMS);
        goto done;
    }
    ai->out_ndim = 0;
    for (int i = 0; i < ai->np; i++) ai->out_sizes[ai->out_ndim++] = ai->psz[i];
    for (int i = 0; i < ai->nbd; i++) ai->out_sizes[ai->out_ndim++] = ai->bsz[i];
    for (int i = 0; i < ai->nq; i++) ai->out_sizes[ai->out_ndim++] = ai->qsz[i];
    ai->NP = prod(ai->psz, ai->np);
    ai->NB = prod(ai->bsz, ai->nbd);
    ai->NQ = prod(ai->qsz, ai->nq);
    r = 0;
done:
    if (r < 0) adv_free(ai);
    return r;
}

/* The offset tables of a plan against t (self, or a tensor of its shape laid
 * out otherwise), the indices' range checked; nothing without elements (no
 * range check either, as torch) or data. */
COLD_CODE static int adv_offsets(const char *op, AdvIndex *ai, const TensorImpl *t) {
    if (t->device == CT_META || ai->NP * ai->NQ == 0) return 0;
    int64_t pst[CT_MAX_DIMS], qst[CT_MAX_DIMS];
    for (int i = 0; i < ai->np; i++) pst[i] = t->strides[ai->pdim[i]];
    for (int i = 0; i < ai->nq; i++) qst[i] = t->strides[ai->qdim[i]];
    ai->poff = malloc(sizeof(int64_t) * (size_t)(ai->NP ? ai->NP : 1));
    ai->boff = calloc((size_t)(ai->NB ? ai->NB : 1), sizeof(int64_t));
    ai->qoff = malloc(sizeof(int64_t) * (size_t)(ai->NQ ? ai->NQ : 1));
    if (!ai->poff || !ai->boff || !ai->qoff) return c10_error_int("out of memory");
    offsets_of(ai->psz, pst, ai->np, ai->poff);
    offsets_of(ai->qsz, qst, ai->nq, ai->qoff);
    ai->q_contig = true;
    for (int64_t q = 0; q < ai->NQ && ai->q_contig; q++) ai->q_contig = ai->qoff[q] == q;
    for (int d = 0, ord = 0; d < t->ndim; d++) {
        if (!ai->di[d]) continue;
        int which = ord++; /* PyTorch numbers the dims among the index tensors */
        TensorImpl *ex = c10_expand(ai->di[d], ai->bsz, ai->nbd);
        TensorImpl *c = ex ? at_contiguous(ex) : NULL;
        c10_release(ex);
        if (!c) return -1;
        const int64_t *ip = ldata(c);
        int64_t size = t->sizes[d], st = t->strides[d];
        for (int64_t k = 0; k < ai->NB; k++) {
            int64_t v = ip[k];
            if (v < -size || v >= size) {
                c10_release(c);
                if (size == 0) return c10_error_int("%s: index is out of bounds for dimension with size 0", op);
                return c10_error_int("%s: index %lld is out of bounds for dimension %d with size %lld", op,
                                     (long long)v, which, (long long)size);
            }
            ai->boff[k] += (v < 0 ? v + size : v) * st;
        }
        c10_release(c);
    }
    return 0;
}

/* t[0] self, t[1..nt-1] indices (NULL = ':'); i: (none) */
/* torch's x[m] for a 0-dim bool (or uint8) mask m: a new dim of size 1 at its
 * place, indexed by m as a 1-element mask. *self2 and e2[0..n) are new
 * references (e2 entries may be NULL); 1 when some mask was 0-dim, 0 when
 * none (nothing made), -1 on failure. */
static int zero_dim_masks(TensorImpl *self, TensorImpl *const *ent, int n, TensorImpl **self2, TensorImpl **e2) {
    int k = 0, pos = 0;
    while (k < n && !(ent[k] && (ent[k]->dtype == CT_BOOL || ent[k]->dtype == CT_UINT8) && !ent[k]->ndim)) k++;
    if (k == n) return 0;
    TensorImpl *s = c10_retain(self);
    for (k = 0; k < n; k++) {
        TensorImpl *e = ent[k];
        bool mask = e && (e->dtype == CT_BOOL || e->dtype == CT_UINT8);
        e2[k] = e && !(mask && !e->ndim) ? c10_retain(e) : NULL;
        if (mask && !e->ndim) {
            TensorImpl *u = s ? c10_unsqueeze(s, pos) : NULL;
            c10_release(s);
            s = u;
            e2[k] = c10_unsqueeze(e, 0);
            if (!s || !e2[k]) break;
        }
        pos += mask && e->ndim ? e->ndim : 1;
    }
    if (k < n) { /* out of memory */
        for (int j = 0; j <= k && j < n; j++) c10_release(e2[j]);
        c10_release(s);
        return -1;
    }
    *self2 = s;
    return 1;
}

/* Runs f on a copy of a whose self (t[0]) and entries (t[first..]) have their
 * 0-dim masks made 1-element ones over a new dim (and dst likewise, a view of
 * it); with put (index_put) the result is dst, or seen in self's shape again.
 * 0 when there were none (the caller runs a itself). */
static int with_zero_dim_masks(int (*f)(int, const OpArgs *, TensorImpl **), int op, const OpArgs *a, int first,
                               bool put, TensorImpl **out) {
    TensorImpl *s2 = NULL, *e2[OP_MAX_TENSORS] = {0}, *d2 = NULL;
    int z = zero_dim_masks(a->t[0], a->t + first, a->nt - first, &s2, e2);
    if (z <= 0) return z;
    OpArgs b = *a;
    b.t[0] = s2;
    for (int k = first; k < a->nt; k++) b.t[k] = e2[k - first];
    if (a->dst && !(d2 = b.dst = c10_retain(s2))) z = -1; /* self is dst: s2 is its view */
    int r = z < 0 ? -1 : f(op, &b, out);
    if (r > 0 && put) {
        TensorImpl *v = a->dst ? c10_retain(a->dst) : c10_view(out[0], a->t[0]->sizes, a->t[0]->ndim);
        c10_release(out[0]);
        out[0] = v;
        r = v ? r : -1;
    }
    c10_release(s2);
    c10_release(d2);
    for (int k = first; k < a->nt; k++) c10_release(e2[k - first]);
    return r;
}

/* index's result laid out as torch's: TensorIterator's output for self
 * restrided to the result's shape (the indexed dims replaced by the index
 * shape, stride 0; restride_src) and each index expanded and seen in that
 * shape (reshape_indexer: size-1 dims around it, strides as view gives) */
static TensorImpl *index_result(const TensorImpl *self, const AdvIndex *ai) {
    int64_t st[CT_MAX_DIMS + 1][CT_MAX_DIMS] = {{0}}, shape[CT_MAX_DIMS];
    int n = 1, nd = ai->out_ndim;
    bool same_shape = true; /* the indices too have the result's shape: no p or q dims but of size 1 */
    for (int i = 0; i < ai->np; i++) st[0][i] = self->strides[ai->pdim[i]];
    for (int i = 0; i < ai->nq; i++) st[0][ai->np + ai->nbd + i] = self->strides[ai->qdim[i]];
    for (int i = 0; i < nd; i++) {
        shape[i] = i < ai->np || i >= ai->np + ai->nbd ? 1 : ai->bsz[i - ai->np];
        same_shape &= shape[i] == ai->out_sizes[i];
    }
    for (int d = 0; d < self->ndim; d++) {
        if (!ai->di[d]) continue;
        TensorImpl *ex = c10_expand(ai->di[d], ai->bsz, ai->nbd);
        TensorImpl *v = ex ? c10_view(ex, shape, nd) : NULL;
        c10_release(ex);
        if (!v) return NULL;
        for (int i = 0; i < nd; i++) st[n][i] = shape[i] == 1 && ai->out_sizes[i] != 1 ? 0 : v->strides[i];
        c10_release(v);
        n++;
    }
    return at_empty_iter(st, n, same_shape, ai->out_sizes, nd, self->dtype, self->device);
}

int fwd_index(int op, const OpArgs *a, TensorImpl **out) {
    TensorImpl *self = a->t[0];
    int z = with_zero_dim_masks(fwd_index, op, a, 1, false, out);
    if (z) return z;
    AdvIndex ai;
    if (adv_prepare("index", self, a->t + 1, a->nt - 1, &ai) < 0) return -1;
    TensorImpl *o = adv_offsets("index", &ai, self) < 0 ? NULL : index_result(self, &ai);
    if (!o || o->device == CT_META || o->numel == 0) {
        adv_free(&ai);
        return (out[0] = o) ? 1 : -1;
    }
    /* the result's own offsets: p, b and q parts of its (maybe permuted) strides */
    int64_t *op_ = malloc(sizeof(int64_t) * (size_t)(ai.NP + ai.NB + ai.NQ));
    if (!op_) {
        adv_free(&ai);
        c10_release(o);
        return c10_error_int("out of memory");
    }
    int64_t *ob = op_ + ai.NP, *oq = ob + ai.NB;
    offsets_of(ai.psz, o->strides, ai.np, op_);
    offsets_of(ai.bsz, o->strides + ai.np, ai.nbd, ob);
    offsets_of(ai.qsz, o->strides + ai.np + ai.nbd, ai.nq, oq);
    const char *s = c10_data(self);
    char *d = c10_data(o);
    int64_t rows = ai.NP * ai.NB, NQ = ai.NQ, NB = ai.NB;
    const int64_t *poff = ai.poff, *boff = ai.boff, *qoff = ai.qoff;
    bool qc = ai.q_contig;
    for (int64_t q = 0; q < NQ && qc; q++) qc = oq[q] == q;
    ELSIZE_SWITCH(c10_elsize[self->dtype], {
        const E *sp = (const E *)s;
        E *dp = (E *)d;
OMP(omp parallel for if (rows * NQ > GRAIN))
        for (int64_t r = 0; r < rows; r++) {
            const E *src = sp + poff[r / NB] + boff[r % NB];
            E *dst = dp + op_[r / NB] + ob[r % NB];
            if (qc) memcpy(dst, src, sizeof(E) * (size_t)NQ);
            else
                for (int64_t q = 0; q < NQ; q++) dst[oq[q]] = src[qoff[q]];
        }
    })
    free(op_);
    adv_free(&ai);
    out[0] = o;
    return 1;
}

#define INDEX_PUT_ACC_K(D, ST, CT, LD, SV)                                       \
    static void index_put_acc_##ST##_##CT(char *o_, const char *v_, const AdvIndex *ai) { \
        ST *o = (ST *)o_;                                                        \
        const ST *v = (const ST *)v_;                                            \
        int64_t rows = ai->NP * ai->NB;                                          \
        for (int64_t r = 0; r < rows; r++) {                                     \
            ST *dst = o + ai->poff[r / ai->NB] + ai->boff[r % ai->NB];           \
            const ST *src = v + r * ai->NQ;                                      \
            for (int64_t q = 0; q < ai->NQ; q++)                                 \
                dst[ai->qoff[q]] = SV((CT)(LD(dst[ai->qoff[q]]) + LD(src[q])));  \
        }                                                                        \
    }
FOR_DTYPES_TOK(INDEX_PUT_ACC_K)
typedef void (*index_put_acc_fn)(char *, const char *, const AdvIndex *);
static const index_put_acc_fn index_put_acc_k[CT_NUM_DTYPES] = {
#define IPA_ENTRY(D, ST, CT, LD, SV) [D] = index_put_acc_##ST##_##CT,
    FOR_DTYPES_TOK(IPA_ENTRY)
};

static int index_put_run(const OpArgs *a, TensorImpl *self, TensorImpl *values, TensorImpl **out);

/* index_put with masks on the meta device: self's shape whatever the masks hold
 * (torch's meta kernel checks nothing); the entries' dtypes, the masks' shapes and
 * the dtypes are checked as on the CPU, the value's shape (against a count the
 * data decides) is not */
static int index_put_meta_masked(const OpArgs *a, TensorImpl *self, TensorImpl *values, TensorImpl **out) {
    for (int k = 2; k < a->nt; k++)
        if (a->t[k] && a->t[k]->dtype != CT_BOOL && a->t[k]->dtype != CT_UINT8 && a->t[k]->dtype != CT_INT64)
            return c10_error_int("index_put: tensors used as indices must be long, byte or bool tensors");
    for (int k = 2, pos = 0; k < a->nt; k++) {
        TensorImpl *e = a->t[k];
        bool mask = e && (e->dtype == CT_BOOL || e->dtype == CT_UINT8);
        if (mask && mask_check("index_put", self, e, pos) < 0) return -1;
        pos += mask ? e->ndim : 1;
    }
    if (values->dtype != self->dtype)
        return c10_error_int("index_put: Index put requires the source and destination dtypes match, got %s for the "
                             "destination and %s for the source.",
                             c10_dtype_cname(self->dtype), c10_dtype_cname(values->dtype));
    out[0] = a->dst ? c10_retain(a->dst) : at_empty_like(self, self->dtype);
    return out[0] ? 1 : -1;
}

/* t[0] self, t[1] values, t[2..nt-1] indices (NULL = ':'); i: accumulate.
 * dst: in place (self itself is written). */
int fwd_index_put(int op, const OpArgs *a, TensorImpl **out) {
    TensorImpl *self = a->t[0], *values = a->t[1], *cast = NULL;
    if (!same_device("index_put", self, values)) return -1;
    int z = with_zero_dim_masks(fwd_index_put, op, a, 2, true, out);
    if (z) return z;
    /* torch's masked_fill dispatch: one value and one bool / byte mask (the other
     * indices ':'), not accumulating, take the value cast, as masked_fill_ does */
    int masks = 0, defined = 0;
    for (int k = 2; k < a->nt; k++)
        if (a->t[k]) defined++, masks += a->t[k]->dtype == CT_BOOL || a->t[k]->dtype == CT_UINT8;
    if (a->nt - 2 > self->ndim) /* aten's count; adv_prepare counts the masks' dims too, as Python's */
        return c10_error_int("index_put: too many indices for tensor of dimension %d (got %d)", self->ndim, a->nt - 2);
    if (!a->i[0] && values->numel == 1) /* torch's masked_fill dispatch: the leading masks' shapes first */
        for (int k = 2, pos = 0; k < a->nt; k++) { /* up to its first mask */
            TensorImpl *e = a->t[k];
            if (e && e->dtype != CT_BOOL && e->dtype != CT_UINT8) break;
            if (e && mask_check("index_put", self, e, pos) < 0) return -1;
            if (e) break;
            pos++;
        }
    bool fill = !a->i[0] && values->numel == 1 && masks == 1 && defined == 1;
    for (int k = 1; a->dst && !fill && k < a->nt; k++) /* torch's assert_no_overlap: the values, the indices */
        if (at_check_no_overlap("index_put", a->dst, a->t[k]) < 0) return -1;
    if (values->dtype != self->dtype && fill) {
        double v = values->device == CT_META ? 0 : c10_get(values, 0);
        if ((c10_is_float(values->dtype) ? float_value_fits(v, self->dtype) : c10_check_value_fits(v, self->dtype)) < 0)
            return -1;
        if (!(cast = c10_full(values->sizes, values->ndim, v, self->dtype, values->device))) return -1;
    }
    int r = self->device == CT_META && masks ? index_put_meta_masked(a, self, cast ? cast : values, out)
                                             : index_put_run(a, self, cast ? cast : values, out);
    c10_release(cast);
    return r;
}

static int index_put_run(const OpArgs *a, TensorImpl *self, TensorImpl *values, TensorImpl **out) {
    AdvIndex ai; /* torch's order: the indices, the value's shape, its dtype */
    if (adv_prepare("index_put", self, a->t + 2, a->nt - 2, &ai) < 0) return -1;
    int64_t bshape[CT_MAX_DIMS];
    if (c10_broadcast_shape(values->sizes, values->ndim, ai.out_sizes, ai.out_ndim, bshape) != ai.out_ndim ||
        memcmp(bshape, ai.out_sizes, sizeof(int64_t) * (size_t)ai.out_ndim)) {
        adv_free(&ai);
        return c10_error_int("index_put: shape mismatch: value tensor of shape %s cannot be broadcast to indexing "
                             "result of shape %s",
                             c10_shape_str(values->sizes, values->ndim), c10_shape_str(ai.out_sizes, ai.out_ndim));
    }
    if (values->dtype != self->dtype) {
        adv_free(&ai);
        return c10_error_int("index_put: Index put requires the source and destination dtypes match, got %s for the "
                             "destination and %s for the source.",
                             c10_dtype_cname(self->dtype), c10_dtype_cname(values->dtype));
    }
    if (a->dst && c10_has_internal_overlap(a->dst)) {
        adv_free(&ai);
        return c10_error_int("index_put_: unsupported operation: more than one element of the written-to tensor "
                             "refers to a single memory location. Please clone() the tensor before performing the "
                             "operation.");
    }
    TensorImpl *o = a->dst ? c10_retain(a->dst) : NULL;
    if (!o) {
        o = at_empty_like(self, self->dtype); /* torch's self.clone(preserve_format) */
        if (o && o->device != CT_META && copy_into(o, self) < 0) {
            c10_release(o);
            o = NULL;
        }
    }
    if (!o || o->device == CT_META) {
        adv_free(&ai);
        return (out[0] = o) ? 1 : -1;
    }
    /* the indices' range checked after the shapes, as torch, and the offsets
     * made against o: self (in place) or its clone */
    if (adv_offsets("index_put", &ai, o) < 0) {
        adv_free(&ai);
        c10_release(o);
        return -1;
    }
    if (ai.NP * ai.NB * ai.NQ == 0) {
        adv_free(&ai);
        out[0] = o;
        return 1;
    }
    TensorImpl *ex = c10_expand(values, ai.out_sizes, ai.out_ndim);
    TensorImpl *v = ex ? at_contiguous(ex) : NULL;
    c10_release(ex);
    if (!v) {
        adv_free(&ai);
        c10_release(o);
        return -1;
    }
    if (a->i[0]) {
        index_put_acc_k[o->dtype](c10_data(o), c10_data(v), &ai);
    } else {
        char *od = c10_data(o);
        const char *vd = c10_data(v);
        int64_t rows = ai.NP * ai.NB;
        ELSIZE_SWITCH(c10_elsize[o->dtype], {
            E *dp = (E *)od;
            const E *sp = (const E *)vd;
            for (int64_t r = 0; r < rows; r++) {
                E *dst = dp + ai.poff[r / ai.NB] + ai.boff[r % ai.NB];
                const E *src = sp + r * ai.NQ;
                for (int64_t q = 0; q < ai.NQ; q++) dst[ai.qoff[q]] = src[q];
            }
        })
    }
    c10_release(v);
    adv_free(&ai);
    out[0] = o;
    return 1;
}

/* t[0] self, t[1] mask (bool; uint8 accepted as PyTorch 1.13 does): 1-d result */
int fwd_masked_select(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0], *mask = a->t[1];
    if (!same_device("masked_select", self, mask)) return -1;
    if (mask->dtype != CT_BOOL && mask->dtype != CT_UINT8)
        return c10_error_int("masked_select: expected BoolTensor or ByteTensor for mask");
    int64_t shape[CT_MAX_DIMS];
    int nd = c10_broadcast_shape(mask->sizes, mask->ndim, self->sizes, self->ndim, shape);
    if (nd < 0) return prefix_error("masked_select");
    if (self->device == CT_META)
        return c10_error_int("masked_select: the output shape depends on the data: not supported on the meta device");
    int64_t total = 1;
    for (int k = 0; k < nd; k++) total *= shape[k];
    if (mask->dtype == CT_UINT8 && total) { /* a byte mask holds 0 and 1 only, as torch checks (where it reads) */
        TensorImpl *mb = at_contiguous(mask);
        if (!mb) return -1;
        const uint8_t *b = (const uint8_t *)c10_data(mb);
        uint8_t any = 0;
        for (int64_t k = 0; k < mb->numel; k++) any |= b[k];
        c10_release(mb);
        if (any > 1) return c10_error_int("masked_select: Mask tensor can take 0 and 1 values only");
    }
    TensorImpl *se = c10_expand(self, shape, nd), *me = se ? c10_expand(mask, shape, nd) : NULL;
    TensorImpl *sc = me ? at_contiguous(se) : NULL, *mc = NULL;
    if (sc) {
        mc = c10_empty(shape, nd, CT_BOOL, CT_CPU);
        if (mc && copy_into(mc, me) < 0) {
            c10_release(mc);
            mc = NULL;
        }
    }
    c10_release(se);
    c10_release(me);
    TensorImpl *o = NULL;
    if (mc) {
        const bool *m = (const bool *)c10_data(mc);
        int64_t n = mc->numel, L = nd ? shape[nd - 1] : 1, rows = L ? n / L : 0, cnt[MAX_PARTS + 1] = {0};
        int parts = compact_parts(n, rows);
        compact_count(m, L, rows, parts, cnt);
        o = c10_empty(&cnt[parts], 1, self->dtype, self->device);
        if (o && cnt[parts]) {
            const char *s = c10_data(sc);
            char *d = c10_data(o);
            ELSIZE_SWITCH(c10_elsize[self->dtype], {
                const E *sp = (const E *)s;
                E *dp = (E *)d;
OMP(omp parallel for schedule(static) if (parts > 1))
                for (int q = 0; q < parts; q++) {
                    int64_t j = cnt[q], end = cnt[q + 1];
                    E spare;
                    for (int64_t k = rows * q / parts * L; k < rows * (q + 1) / parts * L; k++) {
                        *(j < end ? dp + j : &spare) = sp[k];
                        j += m[k];
                    }
                }
            })
        }
    }
    c10_release(sc);
    c10_release(mc);
    return (out[0] = o) ? 1 : -1;
}

/* t[0] self, t[1] mask (bool), t[2] source (self's dtype): self with the
 * elements where the (broadcast) mask is true replaced by source's first
 * elements, in row-major order. dst: in place. */
int fwd_masked_scatter(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0], *mask = a->t[1], *source = a->t[2];
    if (!same_device("masked_scatter", self, mask) || !same_device("masked_scatter", self, source)) return -1;
    if (a->dst && c10_has_internal_overlap(a->dst)) return overlap_error("masked_scatter_"); /* first, as torch */
    int64_t shape[CT_MAX_DIMS]; /* torch's order: the out-of-place form broadcasts first */
    int nd = c10_broadcast_shape(mask->sizes, mask->ndim, self->sizes, self->ndim, shape);
    if (nd < 0 && !a->dst) return prefix_error("masked_scatter");
    if (source->dtype != self->dtype)
        return c10_error_int("masked_scatter: expected self and source to have same dtypes but got%s and %s",
                             c10_dtype_cname(self->dtype), c10_dtype_cname(source->dtype));
    if (mask->dtype != CT_BOOL)
        return c10_error_int("masked_scatter: masked_scatter only supports boolean masks, but got mask with dtype %s",
                             lower_name(mask->dtype));
    if (a->dst) { /* in place: torch's mask.expand(self's sizes), in its words */
        TensorImpl *me = c10_expand(mask, self->sizes, self->ndim);
        if (!me) return prefix_error("masked_scatter_");
        c10_release(me);
        nd = self->ndim;
        memcpy(shape, self->sizes, sizeof(int64_t) * (size_t)nd);
    }
    TensorImpl *o = a->dst ? c10_retain(a->dst) : c10_empty(shape, nd, self->dtype, self->device);
    if (!o) return -1;
    if (o->device == CT_META || o->numel == 0) return (out[0] = o, 1);
    TensorImpl *se = a->dst ? NULL : c10_expand(self, shape, nd);
    int r = a->dst ? 0 : (se ? copy_into(o, se) : -1);
    c10_release(se);
    TensorImpl *me = r == 0 ? c10_expand(mask, shape, nd) : NULL, *mc = me ? at_contiguous(me) : NULL;
    TensorImpl *sc = mc ? at_contiguous(source) : NULL;
    c10_release(me);
    if (!sc) r = -1;
    if (r == 0) {
        const bool *m = (const bool *)c10_data(mc);
        int64_t n = o->numel, cnt = 0;
        for (int64_t k = 0; k < n; k++) cnt += m[k];
        if (cnt > source->numel) r = c10_error_int("masked_scatter: Number of elements of source < number of ones in mask");
        else if (cnt) {
            char *d = c10_data(o);
            const char *sp_ = c10_data(sc);
            bool contig = o->is_contiguous;
            ELSIZE_SWITCH(c10_elsize[o->dtype], {
                E *dp = (E *)d;
                const E *sp = (const E *)sp_;
                int64_t j = 0;
                for (int64_t k = 0; k < n; k++)
                    if (m[k]) {
                        int64_t off = contig ? k : c10_linear_offset(o, k) / (int64_t)sizeof(E);
                        dp[off] = sp[j++];
                    }
            })
        }
    }
    c10_release(mc);
    c10_release(sc);
    return put_out(r, o, out);
}

/* t[0] self, t[1] index (int64, any shape): self.flatten()[index] */
int fwd_take(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0], *index = a->t[1];
    if (!same_device("take", self, index)) return -1;
    if (index->dtype != CT_INT64)
        return c10_error_int("take(): Expected a long tensor for index, but got %s", c10_dtype_cname(index->dtype));
    if (index->numel && !self->numel) return c10_error_int("take: take(): tried to take from an empty tensor");
    TensorImpl *o = c10_empty(index->sizes, index->ndim, self->dtype, self->device);
    if (!o || o->device == CT_META || o->numel == 0) return (out[0] = o) ? 1 : -1;
    TensorImpl *idx = as_long(index), *sc = idx ? at_contiguous(self) : NULL;
    int r = sc ? 0 : -1;
    int64_t numel = self->numel, n = o->numel;
    const int64_t *ip = idx ? ldata(idx) : NULL;
    for (int64_t k = 0; r == 0 && k < n; k++)
        if (ip[k] < -numel || ip[k] >= numel)
            r = c10_error_int("take: out of range: tried to access index %lld on a tensor of %lld elements.",
                              (long long)ip[k], (long long)numel);
    if (r == 0) {
        const char *s = c10_data(sc);
        char *d = c10_data(o);
        ELSIZE_SWITCH(c10_elsize[self->dtype], {
            const E *sp = (const E *)s;
            E *dp = (E *)d;
            for (int64_t k = 0; k < n; k++) dp[k] = sp[ip[k] < 0 ? ip[k] + numel : ip[k]];
        })
    }
    c10_release(idx);
    c10_release(sc);
    return put_out(r, o, out);
}

/* ------------------------------------------------ flip, roll, repeat, pad */

/* t[0]; i: dims (ni of them) */
int fwd_flip(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0];
    bool mask[CT_MAX_DIMS] = {0};
    for (int k = 0; k < a->ni; k++) {
        int d = c10_wrap_dim(a->i[k], self->ndim);
        if (d < 0) return prefix_error("flip");
        if (mask[d]) return c10_error_int("flip: dim %d appears multiple times in the list of dims", d);
        mask[d] = true;
    }
    TensorImpl *o = at_empty_like(self, self->dtype); /* torch's layout: preserve_format */
    if (!o || o->device == CT_META || o->numel == 0) return (out[0] = o) ? 1 : -1;
    int64_t st[CT_MAX_DIMS], off = self->offset;
    for (int d = 0; d < self->ndim; d++) {
        st[d] = self->strides[d];
        if (mask[d] && self->sizes[d] > 1) {
            off += (self->sizes[d] - 1) * st[d];
            st[d] = -st[d];
        }
    }
    TensorImpl *v = c10_make(self->storage, self->sizes, st, self->ndim, off, self->dtype);
    int r = v ? copy_into(o, v) : -1;
    c10_release(v);
    return put_out(r, o, out);
}

/* o = src rolled by shift along dim (o, src same shape; shift in [0, size)) */
static int roll_dim(TensorImpl *o, const TensorImpl *src, int dim, int64_t shift) {
    int64_t size = src->sizes[dim];
    TensorImpl *d1 = c10_narrow(o, dim, shift, size - shift), *s1 = c10_narrow(src, dim, 0, size - shift);
    TensorImpl *d2 = c10_narrow(o, dim, 0, shift), *s2 = c10_narrow(src, dim, size - shift, shift);
    int r = (d1 && s1 && d2 && s2) ? 0 : -1;
    if (r == 0) r = copy_into(d1, s1);
    if (r == 0) r = copy_into(d2, s2);
    c10_release(d1);
    c10_release(s1);
    c10_release(d2);
    c10_release(s2);
    return r;
}

/* t[0]; i: shifts[n], dims[n], n  (ni = 2n + 1; n dims 0: roll the flattened tensor) */
int fwd_roll(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0];
    int n = (int)a->i[a->ni - 1];
    int nd = a->ni - 1 - n;
    if (nd == 0 && n != 1)
        return c10_error_int("roll: shifts and dimensions must align. shifts: %d, dims:%d", n, nd);
    if (nd != 0 && nd != n)
        return c10_error_int("roll: shifts and dimensions must align. shifts: %d, dims:%d", n, nd);
    int dims[CT_MAX_DIMS];
    for (int k = 0; k < nd && self->numel; k++) { /* nothing to roll: any dims, as torch */
        if (self->ndim == 0)
            return c10_error_int("roll: Dimension specified as %lld but tensor has no dimensions", (long long)a->i[n + k]);
        if ((dims[k] = c10_wrap_dim(a->i[n + k], self->ndim)) < 0) return prefix_error("roll");
    }
    TensorImpl *o = !self->numel && nd ? at_empty_like(self, self->dtype) /* torch's clone(preserve_format) */
                                       : c10_empty(self->sizes, self->ndim, self->dtype, self->device);
    if (!o || o->device == CT_META || o->numel == 0) return (out[0] = o) ? 1 : -1;
    int r = 0;
    if (nd == 0) {
        TensorImpl *c = at_contiguous(self);
        int64_t numel = self->numel;
        TensorImpl *f = c ? c10_view(c, &numel, 1) : NULL, *of = c10_view(o, &numel, 1);
        int64_t sh = ((a->i[0] % numel) + numel) % numel;
        r = (f && of) ? roll_dim(of, f, 0, sh) : -1;
        c10_release(c);
        c10_release(f);
        c10_release(of);
    } else {
        TensorImpl *cur = c10_retain(self);
        for (int k = 0; k < nd && r == 0; k++) {
            int64_t size = self->sizes[dims[k]];
            int64_t sh = ((a->i[k] % size) + size) % size;
            TensorImpl *dst = k == nd - 1 ? c10_retain(o) : c10_empty_like(self);
            r = dst ? roll_dim(dst, cur, dims[k], sh) : -1;
            c10_release(cur);
            cur = dst;
        }
        c10_release(cur);
    }
    return put_out(r, o, out);
}

/* t[0]; i: repeats (ni >= ndim) */
int fwd_repeat(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0];
    int nr = a->ni, lead = nr - self->ndim;
    if (lead < 0)
        return c10_error_int("repeat: Number of dimensions of repeat dims can not be smaller than number of "
                             "dimensions of tensor");
    if (nr > CT_MAX_DIMS) return c10_error_int("repeat: at most %d dimensions", CT_MAX_DIMS);
    int64_t sizes[CT_MAX_DIMS];
    for (int d = 0; d < nr; d++)
        if (__builtin_mul_overflow(d < lead ? 1 : self->sizes[d - lead], a->i[d], &sizes[d]))
            return c10_error_int("repeat: numel: integer multiplication overflow");
    for (int d = 0; d < nr; d++) /* torch checks the sizes, not the repeats: a dim of 0 takes any */
        if (sizes[d] < 0)
            return c10_error_int("repeat: Trying to create tensor with negative dimension %lld: %s",
                                 (long long)sizes[d], c10_shape_str(sizes, nr));
    TensorImpl *o = c10_empty(sizes, nr, self->dtype, self->device);
    if (!o || o->device == CT_META || o->numel == 0) return (out[0] = o) ? 1 : -1;
    if (2 * nr > CT_MAX_DIMS) { /* one row of repeats at a time */
        c10_release(o);
        return c10_error_int("repeat: at most %d dimensions", CT_MAX_DIMS / 2);
    }
    /* o viewed as [r0, s0, r1, s1, ...]; self viewed with stride 0 on the r dims */
    int64_t vs[CT_MAX_DIMS], ost[CT_MAX_DIMS], sst[CT_MAX_DIMS];
    int64_t acc = 1;
    for (int d = nr - 1; d >= 0; d--) {
        int64_t s = d < lead ? 1 : self->sizes[d - lead];
        vs[2 * d] = a->i[d];
        vs[2 * d + 1] = s;
        ost[2 * d + 1] = acc;
        ost[2 * d] = acc * s;
        acc *= s * a->i[d];
        sst[2 * d] = 0;
        sst[2 * d + 1] = d < lead ? 0 : self->strides[d - lead];
    }
    TensorImpl *ov = c10_make(o->storage, vs, ost, 2 * nr, 0, o->dtype);
    TensorImpl *sv = c10_make(self->storage, vs, sst, 2 * nr, self->offset, self->dtype);
    int r = ov && sv ? copy_into(ov, sv) : -1;
    c10_release(ov);
    c10_release(sv);
    return put_out(r, o, out);
}

/* t[0]; i: diagonal. op OP_tril or OP_triu */
static int tri(const char *name, bool lower, const OpArgs *a, TensorImpl **out) {
    TensorImpl *self = a->t[0];
    if (self->ndim == 0) return c10_error_int("Dimension specified as -2 but tensor has no dimensions");
    if (self->ndim < 2 && self->numel) {
        c10_wrap_dim(-2, self->ndim);
        return prefix_error(name);
    }
    TensorImpl *o = c10_empty(self->sizes, self->ndim, self->dtype, self->device);
    if (!o || o->device == CT_META || o->numel == 0) return (out[0] = o) ? 1 : -1;
    if (copy_into(o, self) < 0) {
        c10_release(o);
        return -1;
    }
    int64_t R = self->sizes[self->ndim - 2], C = self->sizes[self->ndim - 1], k = a->i[0];
    k = k > C + 1 ? C + 1 : k < -R - 1 ? -R - 1 : k; /* past the matrix keeps all or none: no overflow below */
    int64_t mats = o->numel / (R * C);
    size_t es = c10_elsize[o->dtype];
    char *d = c10_data(o);
OMP(omp parallel for if (o->numel > GRAIN))
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < R; i++) {
            char *row = d + (size_t)((m * R + i) * C) * es;
            if (lower) { /* keep j - i <= k: zero j >= i + k + 1 */
                int64_t j0 = i + k + 1;
                if (j0 < 0) j0 = 0;
                if (j0 < C) memset(row + (size_t)j0 * es, 0, (size_t)(C - j0) * es);
            } else { /* keep j - i >= k: zero j < i + k */
                int64_t j1 = i + k;
                if (j1 > C) j1 = C;
                if (j1 > 0) memset(row, 0, (size_t)j1 * es);
            }
        }
    out[0] = o;
    return 1;
}
int fwd_tril(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    return tri("tril", true, a, out);
}
int fwd_triu(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    return tri("triu", false, a, out);
}

/* t[0]; i: pad[npad] (last dim first: left, right, then the one before ...); s[0]: value */
/* o's slab [start, start + len) along dim d set to v, through the copy engine
 * from v expanded (c10_fill takes a strided view an element at a time) */
static int fill_slab(TensorImpl *o, int d, int64_t start, int64_t len, double v) {
    TensorImpl *slab = c10_narrow(o, d, start, len), *s = slab ? c10_scalar_tensor(v, o->dtype, o->device) : NULL;
    TensorImpl *e = s ? c10_expand(s, slab->sizes, slab->ndim) : NULL;
    int r = e ? copy_into(slab, e) : -1;
    c10_release(e), c10_release(s), c10_release(slab);
    return r;
}

/* pad of a contiguous self by pads >= 0 of its last two dims (a CNN's or an
 * image's): each output row written once, by copies of self's row and of a
 * row of the value (the slabs and the copy of the inside took five passes of
 * the engine, the border columns two elements a row: 1.3x torch's time on
 * [1024, 1024] by 2) */
static bool pad_rows(TensorImpl *o, const TensorImpl *self, const int64_t *p, int np, double v) {
    int n = self->ndim;
    int64_t W = self->sizes[n - 1], H = np > 2 && n > 1 ? self->sizes[n - 2] : 1, Wo = o->sizes[n - 1];
    int64_t top = np > 2 ? p[2] : 0, Ho = H + top + (np > 2 ? p[3] : 0), planes = o->numel / (Ho * Wo);
    size_t es = c10_elsize[o->dtype];
    char *row = malloc((size_t)Wo * es); /* Wo values */
    if (!row) return false;
    for (int64_t j = 0; j < Wo; j++) c10_store_double(row + (size_t)j * es, o->dtype, v);
    const char *x = c10_data(self);
    char *y = c10_data(o);
    size_t lo = (size_t)p[0] * es, wb = (size_t)W * es, rb = (size_t)Wo * es;
OMP(omp parallel for if (o->numel > GRAIN))
    for (int64_t r = 0; r < planes * Ho; r++) {
        int64_t i = r % Ho - top; /* self's row, when in [0, H) */
        char *d = y + (size_t)r * rb;
        if (i < 0 || i >= H) {
            memcpy(d, row, rb);
            continue;
        }
        memcpy(d, row, lo);
        memcpy(d + lo, x + (size_t)((r / Ho) * H + i) * wb, wb);
        memcpy(d + lo + wb, row, rb - lo - wb);
    }
    free(row);
    return true;
}

/* pads <= 0: torch's clone (preserve_format) of self's crop */
static int pad_crop(const TensorImpl *self, const int64_t *p, int np, TensorImpl **out) {
    TensorImpl *v = c10_alias(self);
    for (int k = 0; k < np / 2 && v; k++) {
        int d = self->ndim - 1 - k;
        TensorImpl *n = c10_narrow(v, d, -p[2 * k], v->sizes[d] + p[2 * k] + p[2 * k + 1]);
        c10_release(v);
        v = n;
    }
    TensorImpl *o = v ? at_empty_like(v, v->dtype) : NULL;
    int r = o && o->device != CT_META ? copy_into(o, v) : o ? 0 : -1;
    c10_release(v);
    return put_out(r, o, out);
}

int fwd_pad(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0];
    int np = a->ni;
    if (np % 2) return c10_error_int("pad: Padding length must be divisible by 2");
    if (np / 2 > self->ndim) return c10_error_int("pad: Padding length too large");
    /* torch's order: negative pads crop first (a narrow a side: the crops may not
     * exceed the dim), which is all when no pad is positive; else every padded
     * dim keeps at least one element */
    int64_t sizes[CT_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof sizes);
    bool positive = false;
    for (int k = np / 2 - 1; k >= 0; k--) {
        int d = self->ndim - 1 - k;
        int64_t lo = a->i[2 * k], hi = a->i[2 * k + 1], cur = self->sizes[d];
        positive |= lo > 0 || hi > 0;
        int64_t s0 = lo == INT64_MIN ? INT64_MAX : -lo, s1 = 0; /* torch's narrows of the crops */
        if (lo < 0 && c10_narrow_check(cur, &s0, cur + lo) < 0) return -1;
        cur += lo < 0 ? lo : 0;
        if (hi < 0 && c10_narrow_check(cur, &s1, cur + hi) < 0) return -1;
    }
    for (int k = np / 2 - 1; k >= 0; k--) { /* the leading padded dim first, as torch */
        int d = self->ndim - 1 - k;
        if (__builtin_add_overflow(self->sizes[d], a->i[2 * k], &sizes[d]) ||
            __builtin_add_overflow(sizes[d], a->i[2 * k + 1], &sizes[d]))
            return c10_error_int("pad: padding (%lld, %lld) of dimension %d overflows its size", (long long)a->i[2 * k],
                                 (long long)a->i[2 * k + 1], d);
        if (sizes[d] <= 0 && positive)
            return c10_error_int("pad: The input size %lld, plus negative padding %lld and %lld resulted in a negative "
                                 "output size, which is invalid. Check dimension %d of your input.",
                                 (long long)self->sizes[d], (long long)a->i[2 * k], (long long)a->i[2 * k + 1], d);
    }
    /* pad's value is a float in torch, checked where torch fills the output:
     * after the shapes, and not at all when nothing is padded (a crop) */
    if (positive && float_value_fits(a->s[0], self->dtype) < 0) return -1;
    /* the value is written into the border slabs only (a fill of the whole
     * output, then the copy over it, wrote the inside twice), unless nothing
     * of self stays inside */
    bool empty = false;
    for (int k = 0; k < np / 2; k++) {
        int d = self->ndim - 1 - k;
        int64_t lo = a->i[2 * k], hi = a->i[2 * k + 1];
        empty |= self->sizes[d] - (hi < 0 ? -hi : 0) <= (lo < 0 ? -lo : 0);
    }
    if (!positive) return pad_crop(self, a->i, np, out);
    TensorImpl *o = at_empty_format(sizes, self->ndim, self->dtype, self->device, (const TensorImpl *const *)&self, 1);
    if (o && empty && o->device != CT_META && c10_fill(o, a->s[0]) < 0) c10_release(o), o = NULL;
    if (!o || o->device == CT_META || o->numel == 0 || empty) return (out[0] = o) ? 1 : -1;
    bool rows = self->is_contiguous && o->is_contiguous && np >= 2 && np <= 4;
    for (int k = 0; k < np; k++) rows &= a->i[k] >= 0;
    if (rows) {
        if (!pad_rows(o, self, a->i, np, a->s[0])) return c10_release(o), c10_error_int("pad: out of memory");
        return (out[0] = o), 1;
    }
    for (int k = 0; k < np / 2; k++) {
        int d = self->ndim - 1 - k;
        int64_t lo = a->i[2 * k], hi = a->i[2 * k + 1];
        if ((lo > 0 && fill_slab(o, d, 0, lo, a->s[0]) < 0) || (hi > 0 && fill_slab(o, d, sizes[d] - hi, hi, a->s[0]) < 0))
            return c10_release(o), -1;
    }
    TensorImpl *dv = c10_alias(o), *sv = c10_alias(self);
    for (int k = 0; k < np / 2 && dv && sv; k++) {
        int d = self->ndim - 1 - k;
        int64_t lo = a->i[2 * k], hi = a->i[2 * k + 1];
        int64_t s0 = lo < 0 ? -lo : 0, s1 = self->sizes[d] - (hi < 0 ? -hi : 0);
        int64_t d0 = lo > 0 ? lo : 0;
        TensorImpl *a1 = c10_narrow(dv, d, d0, s1 - s0), *b1 = c10_narrow(sv, d, s0, s1 - s0);
        c10_release(dv);
        c10_release(sv);
        dv = a1;
        sv = b1;
    }
    int r = (dv && sv) ? copy_into(dv, sv) : -1;
    c10_release(dv);
    c10_release(sv);
    return put_out(r, o, out);
}

/* --------------------------------------------------------- sort and topk */

/* Sorting one slice: (key, index) pairs in a total order (the key's order,
 * NaN largest, ties broken by the original index), so that every algorithm
 * gives the stable order. Full sorts: insertion-sorted runs merged bottom-up;
 * topk with a small k: quickselect the k first, then sort those only. */
/* whether one of x[0..15] may beat the k-th best key t (a tie comes later,
 * so it loses on its index; a NaN is never ruled out): topk's pass skips 16
 * keys at a time with one compare (a compare per key: [512, 4096] int32
 * topk(10) 1.4x the time of the per-dtype sorts before) */
#ifdef __AVX512F__
#define BETTER16(ST, V, W, LD, SET, GT, LT)                                      \
    static inline bool better16_##ST(const ST *x, ST t, bool desc) {            \
        V tv = SET(t);                                                           \
        unsigned m = 0;                                                          \
        for (int q = 0; q < 16; q += W) {                                        \
            V v = LD((const void *)(x + q));                                     \
            m |= desc ? GT(v, tv) : LT(v, tv);                                   \
        }                                                                        \
        return m != 0;                                                           \
    }
#define GT_PS(v, t) _mm512_cmp_ps_mask(v, t, _CMP_NLE_UQ)
#define LT_PS(v, t) _mm512_cmp_ps_mask(v, t, _CMP_NGE_UQ)
#define GT_PD(v, t) _mm512_cmp_pd_mask(v, t, _CMP_NLE_UQ)
#define LT_PD(v, t) _mm512_cmp_pd_mask(v, t, _CMP_NGE_UQ)
BETTER16(int32_t, __m512i, 16, _mm512_loadu_si512, _mm512_set1_epi32, _mm512_cmpgt_epi32_mask, _mm512_cmplt_epi32_mask)
BETTER16(int64_t, __m512i, 8, _mm512_loadu_si512, _mm512_set1_epi64, _mm512_cmpgt_epi64_mask, _mm512_cmplt_epi64_mask)
BETTER16(float, __m512, 16, _mm512_loadu_ps, _mm512_set1_ps, GT_PS, LT_PS)
BETTER16(double, __m512d, 8, _mm512_loadu_pd, _mm512_set1_pd, GT_PD, LT_PD)
#else
#define BETTER16(ST)                                                             \
    static inline bool better16_##ST(const ST *x, ST t, bool desc) {            \
        for (int j = 0; j < 16; j++)                                             \
            if (desc ? !(x[j] <= t) : !(x[j] >= t)) return true;                 \
        return false;                                                            \
    }
BETTER16(int32_t)
BETTER16(int64_t)
BETTER16(float)
BETTER16(double)
#endif

#define SORT_K(ST)                                                               \
    typedef struct { ST k; int64_t i; } P_##ST;                                  \
    static inline bool lt_##ST(P_##ST a, P_##ST b, bool desc) {                  \
        ST x = a.k, y = b.k;                                                     \
        bool xn = x != x, yn = y != y;                                           \
        if (desc) {                                                              \
            if (x > y || (xn && !yn)) return true;                               \
            if (y > x || (yn && !xn)) return false;                              \
        } else {                                                                 \
            if (x < y || (yn && !xn)) return true;                               \
            if (y < x || (xn && !yn)) return false;                              \
        }                                                                        \
        return a.i < b.i;                                                        \
    }                                                                            \
    /* the same order for keys known not to be NaN */                             \
    static inline bool ltf_##ST(P_##ST a, P_##ST b, bool desc) {                 \
        return desc ? (a.k > b.k || (a.k == b.k && a.i < b.i)) : (a.k < b.k || (a.k == b.k && a.i < b.i)); \
    }                                                                            \
    static void msort_##ST(P_##ST *a, P_##ST *t, int64_t n, bool desc, bool fast) { \
        const int64_t RUN = 32;                                                  \
        for (int64_t s = 0; s < n; s += RUN) {                                   \
            int64_t e = s + RUN < n ? s + RUN : n;                               \
            for (int64_t i = s + 1; i < e; i++) {                                \
                P_##ST v = a[i];                                                 \
                int64_t j = i;                                                   \
                while (j > s && (fast ? ltf_##ST(v, a[j - 1], desc) : lt_##ST(v, a[j - 1], desc))) {                    \
                    a[j] = a[j - 1];                                             \
                    j--;                                                         \
                }                                                                \
                a[j] = v;                                                        \
            }                                                                    \
        }                                                                        \
        P_##ST *src = a, *dst = t;                                               \
        for (int64_t w = RUN; w < n; w *= 2) {                                   \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                          \
                int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n; \
                int64_t i = lo, j = mid, k = lo;                                 \
                while (i < mid && j < hi) dst[k++] = (fast ? ltf_##ST(src[j], src[i], desc) : lt_##ST(src[j], src[i], desc)) ? src[j++] : src[i++]; \
                while (i < mid) dst[k++] = src[i++];                             \
                while (j < hi) dst[k++] = src[j++];                              \
            }                                                                    \
            P_##ST *x = src;                                                     \
            src = dst;                                                           \
            dst = x;                                                             \
        }                                                                        \
        if (src != a) memcpy(a, src, sizeof(P_##ST) * (size_t)n);                \
    }                                                                            \
    static void select_##ST(P_##ST *a, int64_t n, int64_t kk, bool desc) {       \
        int64_t lo = 0, hi = n - 1;                                              \
        while (lo < hi) {                                                        \
            int64_t mid = lo + (hi - lo) / 2;                                    \
            /* median of three moved to hi */                                    \
            if (lt_##ST(a[mid], a[lo], desc)) { P_##ST x = a[mid]; a[mid] = a[lo]; a[lo] = x; } \
            if (lt_##ST(a[hi], a[lo], desc)) { P_##ST x = a[hi]; a[hi] = a[lo]; a[lo] = x; } \
            if (lt_##ST(a[mid], a[hi], desc)) { P_##ST x = a[mid]; a[mid] = a[hi]; a[hi] = x; } \
            P_##ST pv = a[hi];                                                   \
            int64_t st = lo;                                                     \
            for (int64_t j = lo; j < hi; j++)                                    \
                if (lt_##ST(a[j], pv, desc)) { P_##ST x = a[st]; a[st] = a[j]; a[j] = x; st++; } \
            { P_##ST x = a[st]; a[st] = a[hi]; a[hi] = x; }                      \
            if (st == kk) break;                                                 \
            if (st < kk) lo = st + 1;                                            \
            else hi = st - 1;                                                    \
        }                                                                        \
    }                                                                            \
    static void sort_##ST(const ST *src, int64_t n, bool desc, int64_t k, void *buf, void *tmp, int64_t *idx) { \
        P_##ST *a = (P_##ST *)buf;                                               \
        if (k > 0 && k <= 64 && k < n) { /* one pass, k best kept in order */    \
            int64_t cnt = 0;                                                     \
            bool blocks = n >= 128 * k; /* else most blocks hold a candidate ([4096, 512] \
                                          float32 topk(16): 1.2x slower in blocks) */ \
            for (int64_t i = 0; i < n; i++) {                                    \
                if (blocks && !(i & 15) && cnt == k && n - i >= 16 && !better16_##ST(src + i, a[k - 1].k, desc)) { \
                    i += 15; /* a block of 16 none of which makes it */          \
                    continue;                                                    \
                }                                                                \
                P_##ST v = {src[i], i};                                          \
                if (cnt == k && (desc ? v.k < a[k - 1].k : v.k > a[k - 1].k)) continue; /* plainly worse */ \
                if (cnt == k && !lt_##ST(v, a[k - 1], desc)) continue;           \
                int64_t j = cnt < k ? cnt++ : k - 1;                             \
                while (j > 0 && lt_##ST(v, a[j - 1], desc)) {                    \
                    a[j] = a[j - 1];                                             \
                    j--;                                                         \
                }                                                                \
                a[j] = v;                                                        \
            }                                                                    \
            for (int64_t j = 0; j < k; j++) idx[j] = a[j].i;                     \
            return;                                                              \
        }                                                                        \
        for (int64_t i = 0; i < n; i++) {                                        \
            a[i].k = src[i];                                                     \
            a[i].i = i;                                                          \
        }                                                                        \
        if (k > 0 && k <= n / 8) {                                               \
            select_##ST(a, n, k - 1, desc);                                      \
            msort_##ST(a, (P_##ST *)tmp, k, desc, false);                        \
        } else { /* NaNs to their end (stably), then a NaN-free sort */          \
            int64_t nans = 0;                                                    \
            for (int64_t i = 0; i < n; i++) nans += a[i].k != a[i].k;            \
            if (nans) {                                                          \
                P_##ST *t = (P_##ST *)tmp;                                       \
                int64_t p = desc ? nans : 0, q = desc ? 0 : n - nans;            \
                for (int64_t i = 0; i < n; i++) {                                \
                    if (a[i].k != a[i].k) t[q++] = a[i];                         \
                    else t[p++] = a[i];                                          \
                }                                                                \
                memcpy(a, t, sizeof(P_##ST) * (size_t)n);                        \
            }                                                                    \
            msort_##ST(a + (desc ? nans : 0), (P_##ST *)tmp, n - nans, desc, true); \
        }                                                                        \
        for (int64_t j = 0; j < k; j++) idx[j] = a[j].i;                         \
    }
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wtautological-compare"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wtautological-compare"
#endif
/* one sort per key type: bool and the integers up to 32 bits compare as
 * int32, the 16-bit floats as float (each dtype's own copy came to 70 KB) */
SORT_K(int32_t)
SORT_K(int64_t)
SORT_K(float)
SORT_K(double)
#define KEY_b8_t int32_t
#define KEY_uint8_t int32_t
#define KEY_int8_t int32_t
#define KEY_int16_t int32_t
#define KEY_int32_t int32_t
#define KEY_int64_t int64_t
#define KEY_float float
#define KEY_double double
#define SORT_OF(T) SORT_OF_(T)
#define SORT_OF_(T) sort_##T
/* sorts the slice of n elements of dtype dt, stride apart: its keys go to
 * tmp first (consumed before the sort uses tmp as scratch), unless they are
 * the elements themselves (a contiguous slice of a key type: read in place,
 * topk's one pass would lose 30% to the copy) */
static void sort_slice(ct_dtype dt, const char *base, int64_t n, int64_t stride, bool desc, int64_t k, void *buf,
                       void *tmp, int64_t *idx) {
    switch (dt) {
#define SORT_SLICE(D, ST, CT, LD, SV)                                            \
    case D: {                                                                    \
        KEY_##CT *keys = tmp;                                                    \
        bool own = stride == 1 && (D == CT_INT32 || D == CT_INT64 || D == CT_FLOAT32 || D == CT_FLOAT64); \
        for (int64_t i = 0; i < n && !own; i++) keys[i] = (KEY_##CT)LD(((const ST *)base)[i * stride]); \
        SORT_OF(KEY_##CT)(own ? (const void *)base : keys, n, desc, k, buf, tmp, idx); \
        break;                                                                   \
    }
        FOR_DTYPES_TOK(SORT_SLICE)
    }
}

/* Sorts every slice of self along dim; writes the first k of each to values
 * and indices (contiguous, shaped like self with size k at dim). */
static int sort_slices(const TensorImpl *self, int dim, bool desc, int64_t k, TensorImpl *values, TensorImpl *indices) {
    int64_t n = self->ndim ? self->sizes[dim] : 1;
    int64_t outer = self->ndim ? prod(self->sizes, dim) : 1;
    int64_t inner = self->ndim ? prod(self->sizes + dim + 1, self->ndim - dim - 1) : 1;
    /* slices inner apart: dim moved last (a permute, one contiguous copy: the
     * cache-blocked transposed one), then read in place (read where they were,
     * an element a line, topk(10, 0) of [1024, 1024] float32 took 4.2-4.6 ms,
     * now 2.1-2.2); ls: the elements' step along a slice of c */
    int64_t ls = inner > 1 && n > 1 ? 1 : inner, perm[CT_MAX_DIMS];
    for (int d = 0, q = 0; d < self->ndim; d++)
        if (d != dim) perm[q++] = d;
    if (self->ndim) perm[self->ndim - 1] = dim;
    TensorImpl *v = ls == 1 && inner > 1 ? c10_permute(self, perm, self->ndim) : c10_retain((TensorImpl *)self);
    TensorImpl *c = v ? at_contiguous(v) : NULL;
    c10_release(v);
    if (!c) return -1;
    size_t es = c10_elsize[self->dtype];
    const char *s = c10_data(c);
    char *vd = c10_data(values);
    int64_t *id = (int64_t *)c10_data(indices);
    int64_t slices = outer * inner;
    ct_dtype dt = self->dtype;
    int fail = 0;
OMP(omp parallel if (slices * n > GRAIN && slices > 1))
    {
        size_t nb = (size_t)(n ? n : 1);
        void *buf = malloc(16 * nb), *tmp = malloc(16 * nb);
        int64_t *idx = malloc(sizeof(int64_t) * nb);
        if (!buf || !idx || !tmp) {
OMP(omp atomic write)
            fail = 1;
        }
OMP(omp for)
        for (int64_t sl = 0; sl < slices; sl++) {
            if (!buf || !idx || !tmp) continue;
            int64_t o = sl / inner, i = sl % inner;
            const char *base = s + (size_t)(ls == 1 ? sl * n : o * n * inner + i) * es;
            sort_slice(dt, base, n, ls, desc, k, buf, tmp, idx);
            char *vb = vd + (size_t)(o * k * inner + i) * es;
            int64_t *ib = id + o * k * inner + i;
            ELSIZE_SWITCH(es, {
                const E *sb = (const E *)base;
                E *vv = (E *)vb;
                for (int64_t j = 0; j < k; j++) {
                    vv[j * inner] = sb[idx[j] * ls];
                    ib[j * inner] = idx[j];
                }
            })
        }
        free(buf);
        free(idx);
        free(tmp);
    }
    c10_release(c);
    if (fail) return c10_error_int("out of memory");
    return 0;
}

/* t[0]; i: dim, descending, stable -> out[0] values, out[1] indices (int64) */
int fwd_sort(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0];
    int dim = c10_wrap_dim(a->i[0], self->ndim);
    if (dim < 0) return prefix_error("sort");
    /* torch's layout: the input's (preserve_format); sorted into contiguous ones, copied over */
    out[0] = at_empty_like(self, self->dtype);
    out[1] = out[0] ? at_empty_like(self, CT_INT64) : NULL;
    if (!out[1]) return -1;
    if (self->device == CT_META || self->numel == 0) return 2;
    int64_t n = self->ndim ? self->sizes[dim] : 1;
    if (out[0]->is_contiguous) return sort_slices(self, dim, a->i[1] != 0, n, out[0], out[1]) < 0 ? -1 : 2;
    TensorImpl *v = c10_empty(self->sizes, self->ndim, self->dtype, CT_CPU);
    TensorImpl *ix = v ? c10_empty(self->sizes, self->ndim, CT_INT64, CT_CPU) : NULL;
    int r = ix ? sort_slices(self, dim, a->i[1] != 0, n, v, ix) : -1;
    if (r == 0) r = copy_into(out[0], v);
    if (r == 0) r = copy_into(out[1], ix);
    c10_release(v);
    c10_release(ix);
    return r < 0 ? -1 : 2;
}

/* t[0]; i: k, dim, largest, sorted -> out[0] values, out[1] indices */
int fwd_topk(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0];
    int dim = c10_wrap_dim(a->i[1], self->ndim);
    if (dim < 0) return prefix_error("topk");
    int64_t k = a->i[0], n = self->ndim ? self->sizes[dim] : 1;
    if (k < 0 || k > n) return c10_error_int("topk: selected index k out of range");
    if (self->dtype == CT_BOOL && self->ndim) /* torch: a 0-dim tensor is returned before the kernel */
        return c10_error_int("\"topk_cpu\" not implemented for 'Bool'");
    if (self->ndim == 0) k = 1; /* torch: a 0-dim tensor is its own top 0 or 1 */
    int64_t sizes[CT_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof sizes);
    if (self->ndim) sizes[dim] = k;
    out[0] = c10_empty(sizes, self->ndim, self->dtype, self->device);
    out[1] = out[0] ? c10_empty(sizes, self->ndim, CT_INT64, self->device) : NULL;
    if (!out[1]) return -1;
    if (self->device == CT_META || out[0]->numel == 0) return 2;
    return sort_slices(self, dim, a->i[2] != 0, k, out[0], out[1]) < 0 ? -1 : 2;
}

/* --------------------------------------------------- one_hot, embedding */

/* t[0] (int64); i: num_classes (-1: max + 1) */
int fwd_one_hot(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0];
    if (self->dtype != CT_INT64) return c10_error_int("one_hot: one_hot is only applicable to index tensor.");
    int64_t nc = a->i[0];
    if (self->ndim + 1 > CT_MAX_DIMS) return c10_error_int("one_hot: too many dimensions");
    if (self->device == CT_META) {
        if (nc < 0) return c10_error_int("one_hot: Can not infer total number of classes from meta tensor.");
    } else {
        if (self->numel == 0 && nc <= 0)
            return c10_error_int("one_hot: Can not infer total number of classes from empty tensor.");
    }
    TensorImpl *c = self->device == CT_META ? NULL : at_contiguous(self);
    if (self->device != CT_META && !c) return -1;
    const int64_t *p = c ? ldata(c) : NULL;
    int64_t mx = -1, mn = 0;
    for (int64_t k = 0; c && k < c->numel; k++) {
        if (p[k] > mx) mx = p[k];
        if (p[k] < mn) mn = p[k];
    }
    if (c && c->numel && mn < 0) {
        c10_release(c);
        return c10_error_int("one_hot: Class values must be non-negative.");
    }
    if (nc == -1) nc = mx + 1;
    else if (c && c->numel && mx >= nc) {
        c10_release(c);
        return c10_error_int("one_hot: Class values must be smaller than num_classes.");
    }
    int64_t sizes[CT_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    sizes[self->ndim] = nc;
    TensorImpl *o = c10_full(sizes, self->ndim + 1, 0, CT_INT64, self->device);
    if (o && c) {
        int64_t *d = (int64_t *)c10_data(o);
        for (int64_t k = 0; k < c->numel; k++) d[k * nc + p[k]] = 1;
    }
    c10_release(c);
    return (out[0] = o) ? 1 : -1;
}

static int emb_check(const TensorImpl *weight, const TensorImpl *indices) {
    if (weight && weight->ndim != 2) return c10_error_int("embedding: 'weight' must be 2-D");
    if (indices->dtype != CT_INT64 && indices->dtype != CT_INT32)
        return c10_error_int("embedding: Expected tensor for argument #1 'indices' to have one of the following "
                             "scalar types: Long, Int; but got %s instead (while checking arguments for embedding)",
                             c10_dtype_legacy_name(indices->dtype));
    if (indices->ndim + 1 > CT_MAX_DIMS) return c10_error_int("embedding: too many dimensions");
    return 0;
}

/* t[0] weight [N, D], t[1] indices (int64/int32, any shape); i: padding_idx (-1: none) */
int fwd_embedding(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *w = a->t[0], *indices = a->t[1];
    /* F.embedding's assert first, on positive ones only; a negative padding_idx
     * matches no row, as at::embedding's (F.embedding's wrap is the caller's) */
    if (a->i[0] > 0 && !w->ndim) return c10_error_int("embedding: Dimension specified as 0 but tensor has no dimensions");
    if (a->i[0] > 0 && a->i[0] >= w->sizes[0])
        return c10_error_int("embedding: Padding_idx must be within num_embeddings");
    if (!same_device("embedding", w, indices) || emb_check(w, indices) < 0) return -1;
    int64_t N = w->sizes[0], D = w->sizes[1];
    int64_t sizes[CT_MAX_DIMS];
    memcpy(sizes, indices->sizes, sizeof(int64_t) * (size_t)indices->ndim);
    sizes[indices->ndim] = D;
    TensorImpl *o = c10_empty(sizes, indices->ndim + 1, w->dtype, w->device);
    if (!o || o->device == CT_META || indices->numel == 0) return (out[0] = o) ? 1 : -1;
    TensorImpl *idx = as_long(indices), *wc = idx ? at_contiguous(w) : NULL;
    int r = -1; /* weight.index_select(0, indices)'s checks: rows of 0 too */
    if (wc && N == 0) c10_error_int("index_select(): self indexing axis dim should be positive");
    else if (wc) r = check_range("embedding", ldata(idx), idx->numel, N, w->numel == 0);
    if (r == 0 && D > 0) {
        const int64_t *ip = ldata(idx);
        size_t row = (size_t)D * c10_elsize[w->dtype];
        const char *s = c10_data(wc);
        char *d = c10_data(o);
        int64_t n = idx->numel;
OMP(omp parallel for if (n * D > GRAIN))
        for (int64_t k = 0; k < n; k++) memcpy(d + (size_t)k * row, s + (size_t)ip[k] * row, row);
    }
    c10_release(idx);
    c10_release(wc);
    return put_out(r, o, out);
}

/* t[0] grad [..., D], t[1] indices; i: num_weights, padding_idx (-1: none).
 * The gradient of embedding's weight: rows of grad summed at their index. */
int fwd_embedding_backward(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *g = a->t[0], *indices = a->t[1];
    if (!same_device("embedding_backward", g, indices) || emb_check(NULL, indices) < 0) return -1;
    int64_t N = a->i[0], pad = a->i[1], D = g->ndim ? g->sizes[g->ndim - 1] : 1;
    if (g->ndim != indices->ndim + 1 || g->numel != indices->numel * D)
        return c10_error_int("embedding_backward: grad %s does not match indices %s",
                             c10_shape_str(g->sizes, g->ndim), c10_shape_str(indices->sizes, indices->ndim));
    int64_t sizes[2] = {N, D};
    TensorImpl *o = c10_full(sizes, 2, 0, g->dtype, g->device);
    if (!o || o->device == CT_META || indices->numel == 0 || D == 0) return (out[0] = o) ? 1 : -1;
    TensorImpl *idx = as_long(indices), *gc = NULL;
    int r = idx ? check_range("embedding_backward", ldata(idx), idx->numel, N, false) : -1;
    if (r == 0) {
        /* drop the padding rows by pointing them at nothing: filter indices */
        int64_t n = idx->numel, m = 0;
        int64_t *keep = malloc(sizeof(int64_t) * (size_t)n), *rows = malloc(sizeof(int64_t) * (size_t)n);
        gc = at_contiguous(g);
        if (!keep || !rows || !gc) r = gc ? c10_error_int("out of memory") : -1;
        else {
            const int64_t *ip = ldata(idx);
            for (int64_t k = 0; k < n; k++)
                if (ip[k] != pad) {
                    keep[m] = ip[k];
                    rows[m++] = k;
                }
            /* accumulate row by row, in order (deterministic) */
            int64_t gs[2] = {m, D};
            TensorImpl *packed = c10_empty(gs, 2, g->dtype, CT_CPU);
            if (!packed) r = -1;
            else {
                size_t row = (size_t)D * c10_elsize[g->dtype];
                for (int64_t k = 0; k < m; k++)
                    memcpy((char *)c10_data(packed) + (size_t)k * row, (const char *)c10_data(gc) + (size_t)rows[k] * row,
                           row);
                if (m) index_add_k[o->dtype](c10_data(o), c10_data(packed), keep, 1, N, m, D, 1.0);
                c10_release(packed);
            }
        }
        free(keep);
        free(rows);
    }
    c10_release(idx);
    c10_release(gc);
    return put_out(r, o, out);
}

/* ----------------------------------------------- elementwise: ew kernels */

#define EW_DTYPES(X)                                                             \
    X(b8, bool) X(u8, uint8_t) X(i8, int8_t) X(i16, int16_t) X(i32, int32_t) X(i64, int64_t) \
    X(f32, float) X(f64, double)
#define EW_FLOATS(X) X(f32, float) X(f64, double)
#define KT_ALL(name) {[CT_BOOL] = name##_b8, [CT_UINT8] = name##_u8, [CT_INT8] = name##_i8, [CT_INT16] = name##_i16, \
                      [CT_INT32] = name##_i32, [CT_INT64] = name##_i64, [CT_FLOAT32] = name##_f32,              \
                      [CT_FLOAT64] = name##_f64}
#define KT_FLOAT(name) {[CT_FLOAT32] = name##_f32, [CT_FLOAT64] = name##_f64}

/* where: p[1] cond (as T), p[2] a, p[3] b */
#define WHERE_K(S, T)                                                            \
    static void k_where_##S(int64_t n, char **p, const double *s) {              \
        (void)s;                                                                 \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict c = (const T *)p[1], *restrict x = (const T *)p[2], *restrict y = (const T *)p[3]; \
        for (int64_t i = 0; i < n; i++) o[i] = c[i] ? x[i] : y[i];               \
    }
EW_DTYPES(WHERE_K)
static const KernelTable k_where = KT_ALL(k_where);

/* masked_fill: p[1] self, p[2] mask (as T); s[0] value */
#define MFILL_K(S, T)                                                            \
    static void k_mfill_##S(int64_t n, char **p, const double *s) {              \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict x = (const T *)p[1], *restrict m = (const T *)p[2];    \
        T v = C10_SCALAR_AS(T, s[0]);                                            \
        for (int64_t i = 0; i < n; i++) o[i] = m[i] ? v : x[i];                  \
    }
EW_DTYPES(MFILL_K)
static const KernelTable k_mfill = KT_ALL(k_mfill);

/* clamp with scalars: s[0] min, s[1] max (NaN: none); NaN inputs propagate */
#define CLAMP_K(S, T)                                                            \
    static void k_clamp_##S(int64_t n, char **p, const double *s) {              \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict x = (const T *)p[1];                                   \
        bool hl = s[0] == s[0], hh = s[1] == s[1];                               \
        T lo = hl ? C10_SCALAR_AS(T, s[0]) : 0, hi = hh ? C10_SCALAR_AS(T, s[1]) : 0; \
        if (hl && hh)                                                            \
            for (int64_t i = 0; i < n; i++) {                                    \
                T v = x[i];                                                      \
                v = v < lo ? lo : v;                                             \
                v = v > hi ? hi : v;                                             \
                o[i] = x[i] != x[i] ? x[i] : v;                                  \
            }                                                                    \
        else if (hl)                                                             \
            for (int64_t i = 0; i < n; i++) o[i] = x[i] < lo ? lo : x[i];        \
        else                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = x[i] > hi ? hi : x[i];        \
    }
EW_DTYPES(CLAMP_K)
static const KernelTable k_clamp = KT_ALL(k_clamp);

/* clamp with tensors: p[1] x, p[2] min, p[3] max; NaN anywhere gives NaN.
 * variant lo-only and hi-only take p[2] as the bound. */
#define CLAMPT_K(S, T)                                                           \
    static void k_clampt_##S(int64_t n, char **p, const double *s) {             \
        (void)s;                                                                 \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict x = (const T *)p[1], *restrict lo = (const T *)p[2], *restrict hi = (const T *)p[3]; \
        for (int64_t i = 0; i < n; i++) {                                        \
            T v = x[i] < lo[i] ? lo[i] : x[i];                                   \
            v = v > hi[i] ? hi[i] : v;                                           \
            o[i] = x[i] != x[i] ? x[i] : lo[i] != lo[i] ? lo[i] : hi[i] != hi[i] ? hi[i] : v; \
        }                                                                        \
    }                                                                            \
    static void k_clampmin_##S(int64_t n, char **p, const double *s) {           \
        (void)s;                                                                 \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict x = (const T *)p[1], *restrict b = (const T *)p[2];    \
        for (int64_t i = 0; i < n; i++)                                          \
            o[i] = x[i] != x[i] ? x[i] : b[i] != b[i] ? b[i] : x[i] < b[i] ? b[i] : x[i]; \
    }                                                                            \
    static void k_clampmax_##S(int64_t n, char **p, const double *s) {           \
        (void)s;                                                                 \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict x = (const T *)p[1], *restrict b = (const T *)p[2];    \
        for (int64_t i = 0; i < n; i++)                                          \
            o[i] = x[i] != x[i] ? x[i] : b[i] != b[i] ? b[i] : x[i] > b[i] ? b[i] : x[i]; \
    }
EW_DTYPES(CLAMPT_K)
static const KernelTable k_clampt = KT_ALL(k_clampt);
static const KernelTable k_clampmin = KT_ALL(k_clampmin);
static const KernelTable k_clampmax = KT_ALL(k_clampmax);

/* lerp: p[1] self, p[2] end, p[3] weight (or s[0]); torch 1.13's build
 * contracts its a + w (b - a) and b - (b - a)(1 - w) into fused multiply-adds
 * (its AVX2 kernels are compiled with FMA), and so does ctorch where the
 * target has them */
#define LERP_K(S, T)                                                             \
    static void k_lerp_##S(int64_t n, char **p, const double *s) {               \
        (void)s;                                                                 \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict a = (const T *)p[1], *restrict b = (const T *)p[2], *restrict w = (const T *)p[3]; \
        for (int64_t i = 0; i < n; i++)                                          \
            o[i] = w[i] < (T)0.5 ? VM_FMA(w[i], b[i] - a[i], a[i]) : VM_FMA(a[i] - b[i], 1 - w[i], b[i]); \
    }                                                                            \
    static void k_lerps_##S(int64_t n, char **p, const double *s) {              \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict a = (const T *)p[1], *restrict b = (const T *)p[2];    \
        T w = (T)s[0];                                                           \
        if (w < (T)0.5) /* torch 1.13: the weight's sign is not folded */          \
            for (int64_t i = 0; i < n; i++) o[i] = VM_FMA(w, b[i] - a[i], a[i]); \
        else                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = VM_FMA(a[i] - b[i], 1 - w, b[i]); \
    }
EW_FLOATS(LERP_K)
static const KernelTable k_lerp = KT_FLOAT(k_lerp);
static const KernelTable k_lerps = KT_FLOAT(k_lerps);

/* addcmul / addcdiv: p[1] self, p[2] t1, p[3] t2; s[0] value */
#define ADDC_K(S, T)                                                             \
    static void k_addcmul_##S(int64_t n, char **p, const double *s) {            \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict a = (const T *)p[1], *restrict b = (const T *)p[2], *restrict c = (const T *)p[3]; \
        T v = C10_SCALAR_AS(T, s[0]);                                            \
        if ((T)0.5 != 0)                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = (T)VM_FMA(v * b[i], c[i], a[i]); /* as lerp's */ \
        else /* integers wrap as torch's, without signed-overflow UB */          \
            for (int64_t i = 0; i < n; i++) o[i] = (T)(a[i] + 1ull * v * b[i] * c[i]); \
    }
EW_DTYPES(ADDC_K)
static const KernelTable k_addcmul = KT_ALL(k_addcmul);
#define ADDCDIV_K(S, T)                                                          \
    static void k_addcdiv_##S(int64_t n, char **p, const double *s) {            \
        T *restrict o = (T *)p[0];                                               \
        const T *restrict a = (const T *)p[1], *restrict b = (const T *)p[2], *restrict c = (const T *)p[3]; \
        T v = (T)s[0];                                                           \
        for (int64_t i = 0; i < n; i++) o[i] = a[i] + v * b[i] / c[i];           \
    }
EW_FLOATS(ADDCDIV_K)
static const KernelTable k_addcdiv = KT_FLOAT(k_addcdiv);

/* own: ElementwiseSpec's own_dtype (inputs whose strides count unconverted) */
static int ew_own(const char *name, int nin, TensorImpl *const *in, ct_dtype result, const KernelTable kt,
                  const double *s, TensorImpl *dst, TensorImpl **out, unsigned own) {
    ct_dtype compute = c10_opmath(result);
    ew_kernel k = kt[compute];
    if (!k) return c10_error_int("\"%s\" not implemented for '%s'", name, c10_dtype_cname(result));
    ElementwiseSpec spec = {name, nin, compute, compute, result, own};
    TensorImpl *o = dst;
    if (ew_run(&spec, in, &o, k, s) < 0) return -1;
    out[0] = dst ? c10_retain(o) : o;
    return 1;
}
static int ew(const char *name, int nin, TensorImpl *const *in, ct_dtype result, const KernelTable kt,
              const double *s, TensorImpl *dst, TensorImpl **out) {
    return ew_own(name, nin, in, result, kt, s, dst, out, 0);
}

/* t[0] cond (bool; uint8 too, which torch 1.13 takes with a deprecation warning), t[1] a, t[2] b */
int fwd_where(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (a->t[0]->dtype != CT_BOOL && a->t[0]->dtype != CT_UINT8)
        return c10_error_int("where: where expected condition to be a boolean tensor, but got a tensor with dtype %s",
                             c10_dtype_cname(a->t[0]->dtype));
    PromoteState st = {0};
    promote_add_tensor(&st, a->t[1]);
    promote_add_tensor(&st, a->t[2]);
    /* torch converts a uint8 condition with cond.to(kBool) (preserve_format),
     * whose dense strides then count in the result's layout */
    TensorImpl *c = a->t[0]->dtype == CT_UINT8 ? at_to_dtype(a->t[0], CT_BOOL) : c10_retain(a->t[0]);
    if (!c) return -1;
    TensorImpl *in[3] = {c, a->t[1], a->t[2]};
    int r = ew_own("where", 3, in, promote_result(&st), k_where, a->s, NULL, out, 1u); /* the condition read as is */
    c10_release(c);
    return r;
}

/* t[0] self, t[1] mask (bool); s[0] value. dst: in place (masked_fill_) */
int fwd_masked_fill(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0], *mask = a->t[1];
    if (mask->dtype != CT_BOOL)
        return c10_error_int("masked_fill: masked_fill only supports boolean masks, but got mask with dtype %s",
                             lower_name(mask->dtype));
    if (!same_device("masked_fill", self, mask)) return -1;
    if (c10_check_value_fits(a->s[0], self->dtype) < 0) return -1;
    int64_t shape[CT_MAX_DIMS]; /* out of place torch expands (mask, self): its message names them so */
    int nd = a->dst ? 0 : c10_broadcast_shape(mask->sizes, mask->ndim, self->sizes, self->ndim, shape);
    if (nd < 0) return prefix_error("masked_fill");
    /* out of place: torch's self.clone(contiguous).masked_fill_(mask, value), a contiguous result */
    TensorImpl *dst = a->dst ? a->dst : c10_empty(shape, nd, self->dtype, self->device);
    if (!dst) return -1;
    TensorImpl *in[2] = {self, mask};
    double v[1] = {a->s[0]}; /* integers: the value converts to self's dtype (truncation), as torch's fill */
    if (self->dtype == CT_BOOL) v[0] = a->s[0] != 0;
    else if (!c10_is_float(self->dtype)) v[0] = trunc(a->s[0]);
    int r = ew("masked_fill", 2, in, self->dtype, k_mfill, v, dst, out);
    if (!a->dst) c10_release(dst);
    return r;
}

/* t[0] self; s[0] min, s[1] max (NaN: no bound) */
int fwd_clamp(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0];
    bool hl = a->s[0] == a->s[0], hh = a->s[1] == a->s[1];
    if (!hl && !hh) return c10_error_int("clamp: torch.clamp: At least one of 'min' or 'max' must not be None");
    PromoteState st = {0};
    promote_add_tensor(&st, self);
    if (hl) promote_add_scalar(&st, a->s[0]);
    if (hh) promote_add_scalar(&st, a->s[1]);
    ct_dtype r = promote_result(&st); /* bool with int bounds: int64, as torch */
    /* torch's clamp meta: in place, no promotion at all (self's dtype named as its C++ type),
     * then the op's build (the overlap), then the kernel's conversion of the bounds */
    static const char *const cxx[CT_NUM_DTYPES] = {"bool", "unsigned char", "signed char", "short int", "int",
                                                   "long int", "c10::Half", "c10::BFloat16", "float", "double"};
    if (a->dst && r != a->dst->dtype)
        return c10_error_int("clamp: result type %s can't be cast to the desired output type %s",
                             c10_dtype_cname(r), cxx[a->dst->dtype]);
    if (a->dst && ew_check_written("clamp", a->dst, a->t, 1) < 0) return -1;
    if ((hl && c10_check_value_fits(a->s[0], r) < 0) || (hh && c10_check_value_fits(a->s[1], r) < 0)) return -1;
    TensorImpl *in[1] = {self};
    return ew("clamp", 1, in, r, k_clamp, a->s, a->dst, out);
}

/* t[0] self, t[1] min (NULL: none), t[2] max (NULL: none) */
int fwd_clamp_tensor(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *self = a->t[0], *lo = a->t[1], *hi = a->t[2];
    if (!lo && !hi) return c10_error_int("clamp: torch.clamp: At least one of 'min' or 'max' must not be None");
    PromoteState st = {0};
    promote_add_tensor(&st, self);
    if (lo) promote_add_tensor(&st, lo);
    if (hi) promote_add_tensor(&st, hi);
    ct_dtype r = promote_result(&st);
    if (lo && hi) { /* one bound alone is torch's clamp_min / clamp_max, which take bool */
        if (r == CT_BOOL) return c10_error_int("clamp: \"clamp_cpu\" not implemented for 'Bool'");
        TensorImpl *in[3] = {self, lo, hi};
        return ew("clamp", 3, in, r, k_clampt, a->s, NULL, out);
    }
    TensorImpl *in[2] = {self, lo ? lo : hi};
    return ew("clamp", 2, in, r, lo ? k_clampmin : k_clampmax, a->s, NULL, out);
}

static int lerp_check(const TensorImpl *self, const TensorImpl *end, const TensorImpl *w) {
    const TensorImpl *bad = end->dtype != self->dtype ? end : w && w->dtype != self->dtype ? w : NULL;
    if (bad)
        return c10_error_int("lerp: expected dtype %s for `%s` but got dtype %s", c10_dtype_cpp_name(self->dtype),
                             bad == end ? "end" : "weight", c10_dtype_cpp_name(bad->dtype));
    return 0;
}

/* t[0] self, t[1] end, t[2] weight */
int fwd_lerp(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (lerp_check(a->t[0], a->t[1], a->t[2]) < 0) return -1;
    if (!c10_is_float(a->t[0]->dtype))
        return c10_error_int("\"lerp_kernel_tensor\" not implemented for '%s'", c10_dtype_cname(a->t[0]->dtype));
    TensorImpl *in[3] = {a->t[0], a->t[1], a->t[2]};
    return ew("lerp", 3, in, a->t[0]->dtype, k_lerp, a->s, NULL, out);
}

/* t[0] self, t[1] end; s[0] weight */
int fwd_lerp_scalar(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (lerp_check(a->t[0], a->t[1], NULL) < 0) return -1;
    if (!c10_is_float(a->t[0]->dtype))
        return c10_error_int("\"lerp_kernel_scalar\" not implemented for '%s'", c10_dtype_cname(a->t[0]->dtype));
    TensorImpl *in[2] = {a->t[0], a->t[1]};
    return ew("lerp", 2, in, a->t[0]->dtype, k_lerps, a->s, NULL, out);
}

static ct_dtype promote3(const OpArgs *a) {
    PromoteState st = {0};
    for (int k = 0; k < 3; k++) promote_add_tensor(&st, a->t[k]);
    return promote_result(&st);
}

/* t[0] self, t[1] tensor1, t[2] tensor2; s[0] value */
int fwd_addcmul(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ct_dtype r = promote3(a);
    if (r == CT_BOOL) return c10_error_int("\"addcmul_cpu_out\" not implemented for 'Bool'");
    double v[1] = {c10_is_float(r) ? a->s[0] : trunc(a->s[0])};
    TensorImpl *in[3] = {a->t[0], a->t[1], a->t[2]};
    return ew("addcmul", 3, in, r, k_addcmul, v, NULL, out);
}

/* t[0] self, t[1] tensor1, t[2] tensor2; s[0] value */
int fwd_addcdiv(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (c10_is_integral(a->t[1]->dtype, true) && c10_is_integral(a->t[2]->dtype, true))
        return c10_error_int(
            "addcdiv: Integer division with addcdiv is no longer supported, and in a future  release addcdiv will "
            "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
            "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + "
            "value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
    ct_dtype r = promote3(a);
    TensorImpl *in[3] = {a->t[0], a->t[1], a->t[2]};
    return ew("addcdiv", 3, in, r, k_addcdiv, a->s, NULL, out);
}
