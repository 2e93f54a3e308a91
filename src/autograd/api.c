/* api.c: the public functions of the elementwise rows (stamped out from
 * ops.def), of views and copies, and of autograd itself. Each unwraps its
 * handles, packs OpArgs, calls the autograd wrapper and wraps the result. */
#include "autograd/autograd.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

bool api_unwrap(const ct_tensor *const *h, TensorImpl **t, int n) {
    for (int k = 0; k < n; k++)
        if (!(t[k] = c10_unwrap(h[k]))) return false;
    return true;
}

#define UNWRAP(...)                                                              \
    TensorImpl *t_[OP_MAX_TENSORS];                                              \
    const ct_tensor *h_[] = {__VA_ARGS__};                                       \
    if (!api_unwrap(h_, t_, (int)(sizeof h_ / sizeof *h_))) return NULL
#define UNWRAP_INT(...)                                                          \
    TensorImpl *t_[OP_MAX_TENSORS];                                              \
    const ct_tensor *h_[] = {__VA_ARGS__};                                       \
    if (!api_unwrap(h_, t_, (int)(sizeof h_ / sizeof *h_))) return -1

static ct_tensor *call1(int op, OpArgs *a) { return c10_wrap(ag_call1(op, a)); }

/* --------------------------------------------------- unary and binary rows */

static ct_tensor *unary(int op, const ct_tensor *x, double s0, double s1, double s2) {
    UNWRAP(x);
    OpArgs a;
    op_args_init(&a, 1, t_[0], NULL, s0);
    a.s[1] = s1, a.s[2] = s2;
    return call1(op, &a);
}
static int unary_(int op, ct_tensor *x, double s0, double s1, double s2) {
    UNWRAP_INT(x);
    OpArgs a = {.t = {t_[0]}, .nt = 1, .s = {s0, s1, s2}};
    return ag_call_inplace(op, &a);
}
static ct_tensor *binary(int op, const ct_tensor *x, const ct_tensor *y, double alpha) {
    UNWRAP(x, y);
    OpArgs a;
    op_args_init(&a, 2, t_[0], t_[1], alpha);
    return call1(op, &a);
}
static int binary_(int op, ct_tensor *x, const ct_tensor *y, double alpha) {
    UNWRAP_INT(x, y);
    OpArgs a = {.t = {t_[0], t_[1]}, .nt = 2, .s = {alpha}};
    return ag_call_inplace(op, &a);
}
static const char *scalar_node(int op) {
    switch (op) {
    case OP_pow: return "PowBackward0";
    case OP_remainder: return "RemainderBackward0";
    case OP_fmod: return "FmodBackward0";
    default: return NULL;
    }
}
static ct_tensor *binary_scalar(int op, const ct_tensor *x, double v, double alpha) {
    UNWRAP(x);
    TensorImpl *w = ag_wrapped_scalar(v, t_[0]->dtype);
    if (!w) return NULL;
    OpArgs a;
    op_args_init(&a, 2, t_[0], w, alpha);
    TensorImpl *r = ag_call1(op, &a);
    c10_release(w);
    ag_name_node(r, op, scalar_node(op));
    return c10_wrap(r);
}
static int binary_scalar_(int op, ct_tensor *x, double v, double alpha) {
    UNWRAP_INT(x);
    TensorImpl *w = ag_wrapped_scalar(v, t_[0]->dtype);
    if (!w) return -1;
    OpArgs a = {.t = {t_[0], w}, .nt = 2, .s = {alpha}};
    int r = ag_call_inplace(op, &a);
    c10_release(w);
    if (r == 0) ag_name_node(t_[0], op, scalar_node(op));
    return r;
}

#define API_UNARY(name)                                                          \
    ct_tensor *ct_##name(const ct_tensor *a) { return unary(OP_##name, a, 0, 0, 0); }
#define API_UNARY_(name)                                                         \
    int ct_##name##_(ct_tensor *a) { return unary_(OP_##name, a, 0, 0, 0); }
#define PUB_FLOAT(name) API_UNARY(name) API_UNARY_(name)
#define PUB_ALL PUB_FLOAT
#define PUB_ROUND PUB_FLOAT
#define PUB_TEST API_UNARY
#define UNARYX(...)
#define BINARYX(...)
#define UNARY(name, node, kind, ...) PUB_##kind(name)
#define BINARY(name, ...)                                                        \
    ct_tensor *ct_##name(const ct_tensor *a, const ct_tensor *b) { return binary(OP_##name, a, b, 1); } \
    int ct_##name##_(ct_tensor *a, const ct_tensor *b) { return binary_(OP_##name, a, b, 1); }           \
    ct_tensor *ct_##name##_scalar(const ct_tensor *a, double b) { return binary_scalar(OP_##name, a, b, 1); } \
    int ct_##name##_scalar_(ct_tensor *a, double b) { return binary_scalar_(OP_##name, a, b, 1); }
#define OP(...)
#include "ops/ops.def"
#undef UNARY
#undef BINARY
#undef UNARYX
#undef BINARYX
#undef OP

ct_tensor *ct_add_alpha(const ct_tensor *a, const ct_tensor *b, double alpha) { return binary(OP_add, a, b, alpha); }
ct_tensor *ct_sub_alpha(const ct_tensor *a, const ct_tensor *b, double alpha) { return binary(OP_sub, a, b, alpha); }
int ct_add_alpha_(ct_tensor *a, const ct_tensor *b, double alpha) { return binary_(OP_add, a, b, alpha); }
/* torch.rsub(self, other) = other - self */
ct_tensor *ct_rsub_scalar(const ct_tensor *a, double b) {
    UNWRAP(a);
    TensorImpl *w = ag_wrapped_scalar(b, t_[0]->dtype);
    if (!w) return NULL;
    OpArgs args = {.t = {w, t_[0]}, .nt = 2, .s = {1}};
    TensorImpl *r = ag_call1(OP_sub, &args);
    c10_release(w);
    ag_name_node(r, OP_sub, "RsubBackward1");
    return c10_wrap(r);
}

static int div_mode_op(const char *mode) {
    if (!mode || !strcmp(mode, "none")) return OP_div;
    if (!strcmp(mode, "trunc")) return OP_div_trunc;
    if (!strcmp(mode, "floor")) return OP_div_floor;
    c10_error("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '%s'", mode);
    return -1;
}
ct_tensor *ct_div_mode(const ct_tensor *a, const ct_tensor *b, const char *rounding_mode) {
    if (!c10_unwrap(a) || !c10_unwrap(b)) return NULL;
    int op = div_mode_op(rounding_mode);
    ct_tensor *r = op < 0 ? NULL : binary(op, a, b, 1);
    if (r) ag_name_node(c10_unwrap(r), op, "DivBackward2");
    return r;
}
ct_tensor *ct_div_scalar_mode(const ct_tensor *a, double b, const char *rounding_mode) {
    if (!c10_unwrap(a)) return NULL;
    int op = div_mode_op(rounding_mode);
    ct_tensor *r = op < 0 ? NULL : binary_scalar(op, a, b, 1);
    if (r) ag_name_node(c10_unwrap(r), op, "DivBackward2"); /* the number wrapped, as torch's binding does */
    return r;
}
ct_tensor *ct_floor_divide(const ct_tensor *a, const ct_tensor *b) { return binary(OP_floor_divide, a, b, 1); }

ct_tensor *ct_gelu(const ct_tensor *a, const char *approximate) {
    if (!c10_unwrap(a)) return NULL;
    if (approximate && strcmp(approximate, "none") && strcmp(approximate, "tanh"))
        return c10_error("gelu: approximate argument must be either none or tanh.");
    return unary(approximate && !strcmp(approximate, "tanh") ? OP_gelu_tanh : OP_gelu, a, 0, 0, 0);
}
ct_tensor *ct_softplus(const ct_tensor *a, double beta, double threshold) {
    return unary(OP_softplus, a, beta, threshold, 0);
}

/* PyTorch's defaults: NaN -> 0, +-inf -> the dtype's largest finite values. */
static double finite_max(ct_dtype d) {
    switch (d) {
    case CT_FLOAT16: return 65504.0;
    case CT_BFLOAT16: return 3.38953139e38;
    case CT_FLOAT32: return 3.4028234663852886e38;
    default: return 1.7976931348623157e308;
    }
}
ct_tensor *ct_nan_to_num(const ct_tensor *a, double nan, double posinf, double neginf) {
    TensorImpl *t = c10_unwrap(a);
    if (!t) return NULL;
    double big = finite_max(t->dtype);
    return unary(OP_nan_to_num, a, isnan(nan) ? 0 : nan, isnan(posinf) ? big : posinf, isnan(neginf) ? -big : neginf);
}

/* -------------------------------------------------------------------- views */

static ct_tensor *view_op(int op, const ct_tensor *h, const int64_t *ints, int n) {
    UNWRAP(h);
    if (n < 0 || n > OP_MAX_INTS) return c10_error("%s: too many arguments", op_info[op].name);
    if (n > 0 && !ints) return c10_error("%s: invalid argument: the size list is NULL", op_info[op].name);
    OpArgs a = {.t = {t_[0]}, .nt = 1, .ni = n};
    if (n) memcpy(a.i, ints, sizeof(int64_t) * (size_t)n);
    return call1(op, &a);
}
#define INTS(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

ct_tensor *ct_as_strided(const ct_tensor *t, const int64_t *size, const int64_t *stride, int ndim, int64_t offset) {
    if (!c10_unwrap(t)) return NULL;
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return c10_error("as_strided: number of dimensions (%d) must be in [0, %d]", ndim, CT_MAX_DIMS);
    if (ndim > 0 && (!size || !stride)) return c10_error("as_strided: invalid argument: size or stride is NULL");
    int64_t args[2 * CT_MAX_DIMS + 2];
    if (ndim) { /* memcpy from NULL is undefined even for 0 bytes */
        memcpy(args, size, sizeof(int64_t) * (size_t)ndim);
        memcpy(args + ndim, stride, sizeof(int64_t) * (size_t)ndim);
    }
    args[2 * ndim] = ndim;
    args[2 * ndim + 1] = offset;
    return view_op(OP_as_strided, t, args, 2 * ndim + 2);
}

static bool check_ndim(const char *op, int ndim) {
    if (ndim >= 0 && ndim <= CT_MAX_DIMS) return true;
    c10_error("%s: number of dimensions (%d) must be in [0, %d]", op, ndim, CT_MAX_DIMS);
    return false;
}

ct_tensor *ct_view(const ct_tensor *t, const int64_t *shape, int ndim) {
    return c10_unwrap(t) && check_ndim("view", ndim) ? view_op(OP_view, t, shape, ndim) : NULL;
}

ct_tensor *ct_reshape(const ct_tensor *h, const int64_t *shape_in, int ndim) {
    TensorImpl *t = c10_unwrap(h);
    if (!t || !check_ndim("reshape", ndim)) return NULL;
    if (ndim > 0 && !shape_in) return c10_error("reshape: invalid argument: the shape is NULL");
    int64_t shape[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    if (ndim) memcpy(shape, shape_in, sizeof(int64_t) * (size_t)ndim);
    if (c10_infer_shape("reshape", shape, ndim, t->numel) < 0) return NULL;
    int op = c10_view_strides(t, shape, ndim, strides) ? OP_reshape_alias : OP_reshape_copy;
    return view_op(op, h, shape, ndim);
}

ct_tensor *ct_narrow(const ct_tensor *t, int dim, int64_t start, int64_t length) {
    return view_op(OP_narrow, t, INTS(dim, start, length));
}
ct_tensor *ct_slice(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    return view_op(OP_slice, t, INTS(dim, start, end, step));
}
ct_tensor *ct_select(const ct_tensor *t, int dim, int64_t index) { return view_op(OP_select, t, INTS(dim, index)); }
ct_tensor *ct_transpose(const ct_tensor *t, int dim0, int dim1) { return view_op(OP_transpose, t, INTS(dim0, dim1)); }
ct_tensor *ct_swapaxes(const ct_tensor *t, int dim0, int dim1) { return ct_transpose(t, dim0, dim1); }
ct_tensor *ct_t(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return NULL;
    if (t->ndim > 2) return c10_error("t() expects a tensor with <= 2 dimensions, but self is %dD", t->ndim);
    return view_op(OP_t, h, INTS(0, t->ndim < 2 ? 0 : 1));
}
ct_tensor *ct_permute(const ct_tensor *t, const int *dims, int ndim) {
    if (!c10_unwrap(t) || !check_ndim("permute", ndim)) return NULL; /* a NULL tensor keeps the first error */
    if (ndim > 0 && !dims) return c10_error("permute: invalid argument: dims is NULL");
    int64_t d[CT_MAX_DIMS];
    for (int i = 0; i < ndim; i++) d[i] = dims[i];
    return view_op(OP_permute, t, d, ndim);
}

COLD_CODE ct_tensor *ct_movedim(const ct_tensor *h, const int *source, const int *destination, int n) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return NULL;
    int nd = t->ndim;
    if (n > 0 && (!source || !destination)) return c10_error("movedim: invalid argument: source or destination is NULL");
    if (n < 0 || n > (nd ? nd : 1)) /* a 0-dim tensor has dim 0 (-1) for this, as torch */
        return c10_error("movedim: Invalid source or destination dims: source (%d dims) should contain the same "
                         "number of dims as destination (%d dims)", n, n);
    int perm[CT_MAX_DIMS], src[CT_MAX_DIMS], dst[CT_MAX_DIMS];
    bool used_src[CT_MAX_DIMS] = {false}, used_dst[CT_MAX_DIMS] = {false};
    /* torch's order: every source dim wrapped, every destination dim, then repeats in each */
    for (int i = 0; i < n; i++)
        if ((src[i] = c10_wrap_dim(source[i], nd)) < 0) return NULL;
    for (int i = 0; i < n; i++)
        if ((dst[i] = c10_wrap_dim(destination[i], nd)) < 0) return NULL;
    for (int side = 0; side < 2; side++) {
        const int *w = side ? dst : src, *given = side ? destination : source;
        bool *used = side ? used_dst : used_src;
        for (int i = 0; i < n; i++) {
            if (used[w[i]]) {
                int64_t list[CT_MAX_DIMS];
                for (int j = 0; j < n; j++) list[j] = given[j];
                return c10_error("movedim: repeated dim in `%s` (%s)", side ? "destination" : "source",
                                 c10_shape_str(list, n));
            }
            used[w[i]] = true;
        }
    }
    if (nd == 0) return ct_permute(h, perm, 0);
    for (int i = 0; i < nd; i++) perm[i] = -1;
    for (int i = 0; i < n; i++) perm[dst[i]] = src[i];
    for (int i = 0, s = 0; i < nd; i++) {
        if (perm[i] >= 0) continue;
        while (used_src[s]) s++;
        perm[i] = s++;
    }
    return ct_permute(h, perm, nd);
}

ct_tensor *ct_expand(const ct_tensor *t, const int64_t *shape, int ndim) {
    return c10_unwrap(t) && check_ndim("expand", ndim) ? view_op(OP_expand, t, shape, ndim) : NULL;
}
ct_tensor *ct_expand_as(const ct_tensor *t, const ct_tensor *other) {
    TensorImpl *o = c10_unwrap(other);
    return o ? ct_expand(t, o->sizes, o->ndim) : NULL;
}
ct_tensor *ct_view_as(const ct_tensor *t, const ct_tensor *other) {
    TensorImpl *o = c10_unwrap(other);
    return o ? ct_view(t, o->sizes, o->ndim) : NULL;
}
ct_tensor *ct_squeeze(const ct_tensor *t, int dim) { return view_op(OP_squeeze_dim, t, INTS(dim)); }
ct_tensor *ct_squeeze_all(const ct_tensor *t) { return view_op(OP_squeeze, t, INTS(CT_MAX_DIMS)); }
ct_tensor *ct_unsqueeze(const ct_tensor *t, int dim) { return view_op(OP_unsqueeze, t, INTS(dim)); }
ct_tensor *ct_diagonal(const ct_tensor *t, int64_t offset, int dim1, int dim2) {
    return view_op(OP_diagonal, t, INTS(offset, dim1, dim2));
}
ct_tensor *ct_unfold(const ct_tensor *t, int dim, int64_t size, int64_t step) {
    return view_op(OP_unfold, t, INTS(dim, size, step));
}

COLD_CODE ct_tensor *ct_flatten(const ct_tensor *h, int start_dim, int end_dim) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return NULL;
    int s = c10_wrap_dim(start_dim, t->ndim), e = s < 0 ? -1 : c10_wrap_dim(end_dim, t->ndim);
    if (e < 0) return NULL;
    if (s > e) return c10_error("flatten() has invalid args: start_dim cannot come after end_dim");
    if (t->ndim == 0) return ct_reshape(h, INTS(1));
    if (s == e) return c10_wrap(c10_retain(t)); /* the tensor itself, as torch */
    int64_t shape[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < s; i++) shape[n++] = t->sizes[i];
    int64_t m = 1;
    for (int i = s; i <= e; i++) /* an empty tensor's other dims may multiply past int64 */
        if (__builtin_mul_overflow(m, t->sizes[i], &m)) return c10_error("flatten: numel: integer multiplication overflow");
    shape[n++] = m;
    for (int i = e + 1; i < t->ndim; i++) shape[n++] = t->sizes[i];
    return ct_reshape(h, shape, n);
}

COLD_CODE ct_tensor *ct_unflatten(const ct_tensor *h, int dim, const int64_t *sizes, int n) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return NULL;
    int d = c10_wrap_dim(dim, t->ndim); /* a 0-dim tensor: in [-1, 0] first, as torch's */
    if (d < 0) return NULL;
    if (t->ndim == 0) return c10_error("unflatten: Dimension specified as 0 but tensor has no dimensions");
    if (n <= 0 || !sizes) return c10_error("unflatten: sizes must be non-empty");
    if (n > CT_MAX_DIMS || t->ndim - 1 + n > CT_MAX_DIMS) return c10_error("unflatten: too many dimensions");
    int64_t shape[CT_MAX_DIMS], part[CT_MAX_DIMS];
    memcpy(part, sizes, sizeof(int64_t) * (size_t)n);
    if (c10_infer_shape("unflatten", part, n, t->sizes[d]) < 0) { /* torch's handle_unflatten_exception */
        const char *m = ct_last_error();
        if (strstr(m, "is invalid for input of size"))
            return c10_error("unflatten: Provided sizes %s don't multiply up to the size of dim %d (%lld) in the "
                             "input tensor", c10_shape_str(sizes, n), d, (long long)t->sizes[d]);
        if (strstr(m, "only one dimension can be inferred"))
            return c10_error("unflatten got an unexpected error:\nonly one dimension can be inferred");
        return NULL;
    }
    int k = 0;
    for (int i = 0; i < d; i++) shape[k++] = t->sizes[i];
    for (int i = 0; i < n; i++) shape[k++] = part[i];
    for (int i = d + 1; i < t->ndim; i++) shape[k++] = t->sizes[i];
    return ct_view(h, shape, k);
}

/* detach: the same data (and version counter), no history */
ct_tensor *ct_detach(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? c10_wrap(c10_alias(t)) : NULL;
}

/* ---- multi-result views ---- */

/* Marks n pieces of a multi-view function (see ag_mark_multi_output). */
static int multi_output(ct_tensor **out, int n, const char *node_name) {
    for (int i = 0; i < n; i++) ag_mark_multi_output(c10_unwrap(out[i]), i, node_name);
    return n;
}

static int split_sizes(const ct_tensor *h, const int64_t *sizes, int n, int dim, ct_tensor **out, const char *name) {
    int raw = dim;
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (n < 0 || (n > 0 && (!sizes || !out))) return c10_error_int("split: invalid argument: sizes or out is NULL");
    if (t->ndim == 0) return c10_error_int("split expects at least a 1-dimensional tensor");
    int d = c10_wrap_dim(dim, t->ndim);
    if (d < 0) return -1;
    int64_t total = 0;
    bool over = false; /* a sum past int64 cannot be the size either */
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0) return c10_error_int("split_with_sizes expects split_sizes have only non-negative entries, "
                                               "but got split_sizes=%s", c10_shape_str(sizes, n));
        over |= __builtin_add_overflow(total, sizes[i], &total);
    }
    if (over || total != t->sizes[d])
        return c10_error_int("split_with_sizes expects split_sizes to sum exactly to %lld (input tensor's size at "
                             "dimension %d), but got split_sizes=%s", (long long)t->sizes[d], raw, c10_shape_str(sizes, n));
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        if (!(out[i] = ct_narrow(h, d, start, sizes[i]))) {
            for (int j = 0; j < i; j++) ct_free(out[j]);
            return -1;
        }
        start += sizes[i];
    }
    return multi_output(out, n, name);
}

int ct_split_with_sizes(const ct_tensor *t, const int64_t *sizes, int n, int dim, ct_tensor **out) {
    return split_sizes(t, sizes, n, dim, out, "SplitWithSizesBackward0");
}

int ct_split(const ct_tensor *h, int64_t split_size, int dim, ct_tensor **out, int cap) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (!out) return c10_error_int("invalid argument: out is NULL");
    if (t->ndim == 0) return c10_error_int("split expects at least a 1-dimensional tensor");
    if (split_size < 0)
        return c10_error_int("split expects split_size be non-negative, but got split_size=%lld", (long long)split_size);
    int d = c10_wrap_dim(dim, t->ndim);
    if (d < 0) return -1;
    int64_t size = t->sizes[d];
    if (split_size == 0 && size != 0)
        return c10_error_int("split_size can only be 0 if dimension size is 0, but got dimension size of %lld",
                             (long long)size);
    int64_t n = split_size ? (size ? (size - 1) / split_size + 1 : 0) : 1;
    if (n == 0) n = 1;
    if (n > cap) return c10_error_int("split: out holds %d tensors but %lld are needed", cap, (long long)n);
    int64_t sizes[4096];
    if (n > 4096) return c10_error_int("split: too many pieces (%lld)", (long long)n);
    for (int64_t i = 0; i < n; i++) sizes[i] = (i == n - 1) ? size - split_size * (n - 1) : split_size;
    return split_sizes(h, sizes, (int)n, d, out, "SplitBackward0");
}

int ct_chunk(const ct_tensor *h, int chunks, int dim, ct_tensor **out, int cap) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (!out) return c10_error_int("invalid argument: out is NULL");
    if (t->ndim == 0) return c10_error_int("chunk expects at least a 1-dimensional tensor");
    if (chunks <= 0) return c10_error_int("chunk expects `chunks` to be greater than 0, got: %d", chunks);
    int d = c10_wrap_dim(dim, t->ndim);
    if (d < 0) return -1;
    int64_t split = (t->sizes[d] + chunks - 1) / chunks;
    if (split == 0 && t->sizes[d] == 0) { /* PyTorch gives `chunks` empty pieces */
        int64_t sizes[4096];
        if (chunks > cap || chunks > 4096) return c10_error_int("chunk: out holds %d tensors but %d are needed", cap, chunks);
        for (int i = 0; i < chunks; i++) sizes[i] = 0;
        return split_sizes(h, sizes, chunks, d, out, "SplitBackward0");
    }
    return ct_split(h, split, d, out, cap);
}

int ct_unbind(const ct_tensor *h, int dim, ct_tensor **out, int cap) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (!out) return c10_error_int("invalid argument: out is NULL");
    int d = c10_wrap_dim(dim, t->ndim); /* a 0-dim tensor: in [-1, 0] first, as torch's */
    if (d < 0) return -1;
    if (t->ndim == 0) return c10_error_int("unbind: Dimension specified as 0 but tensor has no dimensions");
    int64_t n = t->sizes[d];
    if (n > cap) return c10_error_int("unbind: out holds %d tensors but %lld are needed", cap, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (!(out[i] = ct_select(h, d, i))) {
            for (int64_t j = 0; j < i; j++) ct_free(out[j]);
            return -1;
        }
    return multi_output(out, (int)n, "UnbindBackward0");
}

/* ------------------------------------------------------------ *_like factories */

/* torch's preserve_format: t's strides when it is dense, else dense in its dim order */
ct_tensor *ct_full_like(const ct_tensor *h, double value) {
    TensorImpl *t = c10_unwrap(h);
    if (!t || c10_check_value_fits(value, t->dtype) < 0) return NULL;
    TensorImpl *o = at_empty_like(t, t->dtype);
    if (o && c10_fill(o, value) < 0) {
        c10_release(o);
        o = NULL;
    }
    return c10_wrap(o);
}
ct_tensor *ct_zeros_like(const ct_tensor *h) { return ct_full_like(h, 0); }
ct_tensor *ct_ones_like(const ct_tensor *h) { return ct_full_like(h, 1); }

/* ------------------------------------------------------------------- copies */

ct_tensor *ct_contiguous(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return NULL;
    if (t->is_contiguous) return c10_wrap(c10_retain(t)); /* the tensor itself (a new handle), as torch */
    return view_op(OP_contiguous, h, NULL, 0);
}
ct_tensor *ct_clone(const ct_tensor *t) { return view_op(OP_clone, t, NULL, 0); }
ct_tensor *ct_to_dtype(const ct_tensor *h, ct_dtype dtype) {
    TensorImpl *t = c10_unwrap(h);
    if (t && t->dtype == dtype) return c10_wrap(c10_retain(t)); /* the tensor itself, as torch's .to() */
    return view_op(OP_to_dtype, h, INTS(dtype));
}

/* torch's is_non_overlapping_and_dense: the strides of the dims of size > 1,
 * in increasing order, are those of a contiguous tensor in that order */
static bool dense_strides(const TensorImpl *t) {
    bool used[CT_MAX_DIMS] = {0};
    for (int64_t k = 0, need = 1; k < t->ndim; k++) {
        int b = -1;
        for (int d = 0; d < t->ndim; d++)
            if (!used[d] && t->sizes[d] != 1 && (b < 0 || t->strides[d] < t->strides[b])) b = d;
        if (b < 0) break;
        if (t->strides[b] != need) return false;
        used[b] = true, need *= t->sizes[b];
    }
    return true;
}

ct_tensor *ct_to_device(const ct_tensor *h, ct_device device) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return NULL;
    if (device == t->device) return view_op(OP_alias, h, NULL, 0);
    if (t->device == CT_META) return c10_error("Cannot copy out of meta tensor; no data!");
    if (device != CT_META) return c10_error("to: invalid device %d", (int)device);
    TensorImpl *m = c10_empty(t->sizes, t->ndim, t->dtype, CT_META); /* torch's preserve_format: */
    if (m && dense_strides(t)) memcpy(m->strides, t->strides, sizeof m->strides), c10_refresh(m); /* else contiguous */
    return c10_wrap(m);
}

int ct_copy_(ct_tensor *dst, const ct_tensor *src) {
    UNWRAP_INT(dst, src);
    OpArgs a = {.t = {t_[0], t_[1]}, .nt = 2};
    return ag_call_inplace(OP_copy_, &a);
}
static int fill_named(ct_tensor *h, double value, const char *node) {
    UNWRAP_INT(h);
    OpArgs a = {.t = {t_[0]}, .nt = 1, .s = {value}};
    int r = ag_call_inplace(OP_fill_, &a);
    if (r == 0) ag_name_node(t_[0], OP_fill_, node);
    return r;
}
int ct_fill_(ct_tensor *h, double value) { return fill_named(h, value, "FillBackward2"); } /* fill_.Scalar */
int ct_zero_(ct_tensor *t) { return fill_named(t, 0, "ZeroBackward0"); }

/* ----------------------------------------------------------------- autograd */

bool ct_set_grad_enabled(bool enabled) { return ag_set_grad_enabled(enabled); }
bool ct_is_grad_enabled(void) { return ag_grad_enabled(); }

int ct_set_requires_grad(ct_tensor *h, bool requires_grad) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (!ag_is_leaf(t)) { /* requires_grad_(true) on one with history: nothing to do */
        if (requires_grad) return 0;
        return c10_error_int("you can only change requires_grad flags of leaf variables. If you want to use a "
                             "computed variable in a subgraph that doesn't require differentiation use "
                             "var_no_grad = var.detach().");
    }
    if (requires_grad && !c10_is_float(t->dtype))
        return c10_error_int("only Tensors of floating point dtype can require gradients");
    if (!requires_grad && !t->autograd) return 0;
    AutogradMeta *m = ag_meta(t);
    if (!m) return -1;
    m->requires_grad = requires_grad;
    return 0;
}

bool ct_requires_grad(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t && ag_requires_grad(t);
}
bool ct_is_leaf(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t && ag_is_leaf(t);
}

ct_tensor *ct_grad(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    if (!t || !t->autograd || !t->autograd->grad) return NULL;
    return c10_wrap(c10_retain(t->autograd->grad));
}

int ct_set_grad(ct_tensor *h, const ct_tensor *grad) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    TensorImpl *g = NULL;
    if (grad && !(g = c10_unwrap(grad))) return -1;
    if (g == t) return c10_error_int("can't assign Variable as its own grad"); /* a cycle, as torch refuses */
    if (g && (g->dtype != t->dtype || g->device != t->device))
        return c10_error_int("assigned grad has data of a different type");
    if (g && (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim)))
        return c10_error_int("assigned grad has data of a different size");
    AutogradMeta *m = ag_meta(t);
    if (!m) return -1;
    c10_release(m->grad);
    m->grad = c10_retain(g);
    return 0;
}

int ct_zero_grad(ct_tensor *h, bool set_to_none) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (!t->autograd || !t->autograd->grad) return 0;
    if (set_to_none) {
        c10_release(t->autograd->grad);
        t->autograd->grad = NULL;
        return 0;
    }
    if (t->autograd->grad->autograd) { /* a grad with history (create_graph): detached first, as torch */
        TensorImpl *d = c10_alias(t->autograd->grad);
        if (!d) return -1;
        c10_release(t->autograd->grad);
        t->autograd->grad = d;
    }
    return c10_fill(t->autograd->grad, 0);
}

int ct_retain_grad(ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (!ag_requires_grad(t)) return c10_error_int("can't retain_grad on Tensor that has requires_grad=False");
    if (ag_is_leaf(t)) return 0; /* leaves keep their grad anyway */
    AutogradMeta *m = t->autograd;
    if (m->retains_grad) return 0; /* as torch: where it was registered (see set_history_follow) */
    m->retains_grad = true;
    m->retain_fn = m->grad_fn;
    m->grad_fn->retain[m->output_nr] = m;
    return 0;
}

const char *ct_grad_fn_name(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    Node *n = t ? ag_grad_fn(t) : NULL;
    return n ? n->name : NULL;
}

int ct_backward_ex(ct_tensor *h, const ct_tensor *grad, bool retain_graph, bool create_graph) {
    TensorImpl *t = c10_unwrap(h), *g = NULL;
    if (!t || (grad && !(g = c10_unwrap(grad)))) return -1;
    BackwardOpts o = {.retain_graph = retain_graph || create_graph, .create_graph = create_graph};
    return ag_run_backward(&t, g ? &g : NULL, 1, &o);
}
int ct_backward(ct_tensor *t, const ct_tensor *grad) { return ct_backward_ex(t, grad, false, false); }

int ct_autograd_grad(const ct_tensor *const *outputs, const ct_tensor *const *grad_outputs, int noutputs,
                     const ct_tensor *const *inputs, int ninputs, ct_tensor **results, bool retain_graph,
                     bool create_graph, bool allow_unused) {
    if (ninputs == 0) return c10_error_int("grad requires non-empty inputs.");
    if (noutputs <= 0 || noutputs > 64 || ninputs < 0 || ninputs > 64)
        return c10_error_int("grad: between 1 and 64 outputs and inputs are supported");
    if (!outputs || !inputs || !results) return c10_error_int("grad: invalid argument: outputs, inputs or results is NULL");
    TensorImpl *outs[64], *gos[64], *ins[64], *res[64];
    if (!api_unwrap(outputs, outs, noutputs) || !api_unwrap(inputs, ins, ninputs)) return -1;
    for (int i = 0; i < noutputs; i++) {
        gos[i] = NULL;
        if (grad_outputs && grad_outputs[i] && !(gos[i] = c10_unwrap(grad_outputs[i]))) return -1;
    }
    BackwardOpts o = {.retain_graph = retain_graph || create_graph, .create_graph = create_graph,
                      .allow_unused = allow_unused, .inputs = ins, .ninputs = ninputs, .results = res};
    if (ag_run_backward(outs, gos, noutputs, &o) < 0) return -1;
    for (int i = 0; i < ninputs; i++) results[i] = c10_wrap(res[i]);
    return 0;
}

/* The autograd part of a tensor's repr: ", grad_fn=<MulBackward0>" */
static const char *repr_suffix(const TensorImpl *t, char *buf, size_t cap) {
    if (!t->autograd) return "";
    if (t->autograd->grad_fn) snprintf(buf, cap, ", grad_fn=<%s>", t->autograd->grad_fn->name);
    else if (t->autograd->requires_grad) snprintf(buf, cap, ", requires_grad=True");
    else return "";
    return buf;
}
__attribute__((constructor)) static void install_repr_suffix(void) { c10_repr_suffix = repr_suffix; }
