/*
 * ctorch.h: PyTorch's core, in C. The one public header.
 *
 * A ct_tensor is an opaque handle to a strided view (sizes, strides, storage
 * offset, dtype) of a refcounted storage, exactly as a torch.Tensor is a handle to
 * a TensorImpl over a StorageImpl. Views share storage; copies never do.
 *
 * THE OWNERSHIP RULE
 *   Every `ct_tensor *` the library returns is a new handle.
 *   - While a scope is open (ct_scope_begin), the handle belongs to the innermost
 *     scope and ct_scope_end() releases it. Chains like
 *         ct_sub(ct_mul(a, b), ct_add(ct_div(b, a), b))
 *     therefore leak nothing.
 *   - With no scope open, the caller owns the handle and releases it with ct_free.
 *   - ct_retain(t) returns a second handle to the same tensor that belongs to no
 *     scope: it lives until ct_free, whatever scopes end meanwhile.
 *   - ct_free releases a handle early, whoever owns it (its scope forgets it).
 *     ct_free(NULL) does nothing.
 *   - The data lives while any handle, view or saved-for-backward reference to
 *     it lives. Scopes nest and are per thread.
 *   - Misuse (a handle used or freed after ct_free, ct_scope_end with no scope
 *     open) is reported as an error; builds with CT_DEBUG also keep freed handles
 *     in quarantine so that late use is caught rather than corrupting memory.
 *   Functions taking `const ct_tensor *` never take ownership.
 *
 * THE ERROR RULE
 *   A failing call returns NULL (or -1 for int results, NaN for ct_item, false
 *   for bool predicates) and leaves a message for ct_last_error() that names the
 *   operation, the shapes and the dtypes, worded as PyTorch words it, e.g.
 *       narrow: start (3) + length (2) exceeds dimension size (4).
 *   A NULL tensor argument makes a call return NULL without overwriting the
 *   message already there, so a chain of calls is checked once, at its end.
 *   Messages are per thread and stay until ct_clear_error() or the next error.
 *   Bad input never crashes, never corrupts a tensor and never leaks.
 */
#ifndef CTORCH_H
#define CTORCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(CT_BUILDING_SHARED)
#define CT_API __declspec(dllexport)
#elif defined(__GNUC__)
#define CT_API __attribute__((visibility("default")))
#else
#define CT_API
#endif

#define CT_VERSION_MAJOR 0
#define CT_VERSION_MINOR 1
#define CT_VERSION_PATCH 0
#define CT_MAX_DIMS 16 /* tensors have at most this many dimensions */

/* CT_SHAPE(2, 3) expands to the pair `(const int64_t[]){2, 3}, 2`. */
#define CT_SHAPE(...)                                                          \
    (const int64_t[]){__VA_ARGS__},                                            \
        (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
/* CT_DIMS(0, 2) expands to `(const int[]){0, 2}, 2` for dim lists. */
#define CT_DIMS(...)                                                           \
    (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))

typedef struct ct_tensor ct_tensor; /* opaque */

typedef enum {
    CT_BOOL, CT_UINT8, CT_INT8, CT_INT16, CT_INT32, CT_INT64,
    CT_FLOAT16, CT_BFLOAT16, CT_FLOAT32, CT_FLOAT64
} ct_dtype;
#define CT_NUM_DTYPES 10

/* Where a tensor lives. CT_META tensors have sizes, strides and a dtype but no
 * data: every op runs on them and computes shapes and errors only. */
typedef enum { CT_CPU, CT_META } ct_device;

/* ---------------------------------------------------------------- ownership */
CT_API void ct_scope_begin(void);
CT_API void ct_scope_end(void);
CT_API ct_tensor *ct_retain(ct_tensor *t);
CT_API void ct_free(ct_tensor *t);

/* ------------------------------------------------------------------- errors */
CT_API const char *ct_last_error(void); /* NULL when there is none */
CT_API void ct_clear_error(void);

/* ------------------------------------------------------------------- dtypes */
CT_API const char *ct_dtype_name(ct_dtype dtype);   /* "float32", "int64" ... */
CT_API size_t ct_dtype_size(ct_dtype dtype);        /* bytes per element */
CT_API bool ct_dtype_is_floating(ct_dtype dtype);
/* PyTorch's promote_types: the smallest dtype both convert to safely. */
CT_API ct_dtype ct_promote_types(ct_dtype a, ct_dtype b);
/* torch.result_type(a, b) for two tensors (0-dim tensors count less). */
CT_API ct_dtype ct_result_type(const ct_tensor *a, const ct_tensor *b);
CT_API float ct_half_to_float(uint16_t h);          /* IEEE binary16 */
CT_API uint16_t ct_float_to_half(float f);          /* round to nearest even */
CT_API float ct_bfloat16_to_float(uint16_t b);
CT_API uint16_t ct_float_to_bfloat16(float f);      /* round to nearest even */

/* ---------------------------------------------------------------- allocator */
/* One hook for every byte of tensor data. alloc returns 64-byte aligned memory
 * or NULL (the call then fails with "out of memory"). Above the hook sits a
 * cache of freed blocks, so that loops reach a steady state without system
 * calls or page faults; ct_empty_cache() hands them back. */
typedef struct ct_allocator {
    void *(*alloc)(void *ctx, size_t nbytes);
    void (*free)(void *ctx, void *ptr, size_t nbytes);
    void *ctx;
} ct_allocator;
CT_API void ct_set_allocator(const ct_allocator *allocator); /* NULL: default */
CT_API void ct_empty_cache(void);
typedef struct ct_memory_stats {
    size_t in_use;        /* bytes held by live storages */
    size_t peak_in_use;   /* high-water mark of in_use */
    size_t cached;        /* bytes kept in the cache for reuse */
    uint64_t hook_allocs; /* calls that reached the allocator hook */
    uint64_t cache_hits;  /* allocations served from the cache */
} ct_memory_stats;
CT_API ct_memory_stats ct_memory_stats_get(void);

/* ---------------------------------------------------------------- factories */
CT_API ct_tensor *ct_from_data(const void *data, const int64_t *shape, int ndim, ct_dtype dtype);
/* Wraps the caller's buffer without a copy (like torch.from_numpy): the tensor is
 * contiguous; deleter(data, ctx) runs when the last view of it dies (may be NULL). */
CT_API ct_tensor *ct_from_blob(void *data, const int64_t *shape, int ndim, ct_dtype dtype,
                               void (*deleter)(void *data, void *ctx), void *ctx);
CT_API ct_tensor *ct_scalar(double value); /* 0-dim float32, like torch.tensor(2.0) */
CT_API ct_tensor *ct_scalar_dtype(double value, ct_dtype dtype);
CT_API ct_tensor *ct_empty(const int64_t *shape, int ndim, ct_dtype dtype); /* uninitialised */
CT_API ct_tensor *ct_empty_on(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
CT_API ct_tensor *ct_zeros(const int64_t *shape, int ndim, ct_dtype dtype);
CT_API ct_tensor *ct_ones(const int64_t *shape, int ndim, ct_dtype dtype);
CT_API ct_tensor *ct_full(const int64_t *shape, int ndim, double value, ct_dtype dtype);
CT_API ct_tensor *ct_zeros_like(const ct_tensor *t);
CT_API ct_tensor *ct_ones_like(const ct_tensor *t);
CT_API ct_tensor *ct_full_like(const ct_tensor *t, double value);
CT_API ct_tensor *ct_arange(double start, double end, double step, ct_dtype dtype);
CT_API ct_tensor *ct_linspace(double start, double end, int64_t steps, ct_dtype dtype);
CT_API ct_tensor *ct_eye(int64_t n, int64_t m, ct_dtype dtype);
/* Random numbers from the global generator: the same seed gives the same numbers
 * as torch.manual_seed(seed); torch.rand / torch.randn / torch.randint. */
CT_API void ct_manual_seed(uint64_t seed);
CT_API ct_tensor *ct_rand(const int64_t *shape, int ndim, ct_dtype dtype);
CT_API ct_tensor *ct_randn(const int64_t *shape, int ndim, ct_dtype dtype);
CT_API ct_tensor *ct_randint(int64_t low, int64_t high, const int64_t *shape, int ndim, ct_dtype dtype);
CT_API ct_tensor *ct_randperm(int64_t n, ct_dtype dtype);
CT_API int ct_uniform_(ct_tensor *t, double from, double to);
CT_API int ct_normal_(ct_tensor *t, double mean, double std);
CT_API int ct_bernoulli_(ct_tensor *t, double p);

/* --------------------------------------------------------------- inspection */
CT_API int ct_ndim(const ct_tensor *t);                  /* -1 on error */
CT_API int64_t ct_size(const ct_tensor *t, int dim);     /* negative dims wrap; -1 on error */
CT_API int64_t ct_stride(const ct_tensor *t, int dim);
CT_API const int64_t *ct_sizes(const ct_tensor *t);      /* valid while t lives */
CT_API const int64_t *ct_strides(const ct_tensor *t);
CT_API int64_t ct_numel(const ct_tensor *t);
CT_API int64_t ct_storage_offset(const ct_tensor *t);
CT_API ct_dtype ct_dtype_of(const ct_tensor *t);
CT_API ct_device ct_device_of(const ct_tensor *t);
CT_API bool ct_is_contiguous(const ct_tensor *t);
CT_API bool ct_shares_storage(const ct_tensor *a, const ct_tensor *b);
CT_API void *ct_data_ptr(const ct_tensor *t);           /* first element, offset applied */
CT_API double ct_item(const ct_tensor *t);              /* one-element tensors only */
CT_API int ct_print(const ct_tensor *t);                /* PyTorch-style repr to stdout */
/* The repr into buf (truncated to cap); returns the full length, -1 on error. */
CT_API int ct_repr(const ct_tensor *t, char *buf, size_t cap);
/* Copies the elements in row-major order, converted to `dtype`, into out, which
 * holds numel elements of that dtype. */
CT_API int ct_copy_to_buffer(const ct_tensor *t, void *out, ct_dtype dtype);

/* -------------------------------------------------------- views: share storage */
CT_API ct_tensor *ct_as_strided(const ct_tensor *t, const int64_t *size, const int64_t *stride, int ndim, int64_t offset);
CT_API ct_tensor *ct_view(const ct_tensor *t, const int64_t *shape, int ndim); /* -1 infers */
CT_API ct_tensor *ct_reshape(const ct_tensor *t, const int64_t *shape, int ndim); /* view when it can */
CT_API ct_tensor *ct_narrow(const ct_tensor *t, int dim, int64_t start, int64_t length);
CT_API ct_tensor *ct_slice(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
CT_API ct_tensor *ct_select(const ct_tensor *t, int dim, int64_t index);
CT_API ct_tensor *ct_transpose(const ct_tensor *t, int dim0, int dim1);
CT_API ct_tensor *ct_swapaxes(const ct_tensor *t, int dim0, int dim1);
CT_API ct_tensor *ct_t(const ct_tensor *t);     /* 0-, 1- and 2-dim only */
CT_API ct_tensor *ct_permute(const ct_tensor *t, const int *dims, int ndim);
CT_API ct_tensor *ct_movedim(const ct_tensor *t, const int *source, const int *destination, int n);
CT_API ct_tensor *ct_expand(const ct_tensor *t, const int64_t *shape, int ndim); /* -1 keeps */
CT_API ct_tensor *ct_expand_as(const ct_tensor *t, const ct_tensor *other);
CT_API ct_tensor *ct_view_as(const ct_tensor *t, const ct_tensor *other);
CT_API ct_tensor *ct_squeeze(const ct_tensor *t, int dim);
CT_API ct_tensor *ct_squeeze_all(const ct_tensor *t);
CT_API ct_tensor *ct_unsqueeze(const ct_tensor *t, int dim);
CT_API ct_tensor *ct_diagonal(const ct_tensor *t, int64_t offset, int dim1, int dim2);
CT_API ct_tensor *ct_unfold(const ct_tensor *t, int dim, int64_t size, int64_t step);
CT_API ct_tensor *ct_flatten(const ct_tensor *t, int start_dim, int end_dim);
CT_API ct_tensor *ct_unflatten(const ct_tensor *t, int dim, const int64_t *sizes, int n);
CT_API ct_tensor *ct_detach(const ct_tensor *t);
/* Multi-result views fill out[] with new handles and return their count (-1 on
 * error). `out` must hold ceil(size/split_size), `chunks` or size(dim) entries. */
CT_API int ct_split(const ct_tensor *t, int64_t split_size, int dim, ct_tensor **out, int cap);
CT_API int ct_split_with_sizes(const ct_tensor *t, const int64_t *sizes, int n, int dim, ct_tensor **out);
CT_API int ct_chunk(const ct_tensor *t, int chunks, int dim, ct_tensor **out, int cap);
CT_API int ct_unbind(const ct_tensor *t, int dim, ct_tensor **out, int cap);

/* ------------------------------------------------------------------- copies */
CT_API ct_tensor *ct_contiguous(const ct_tensor *t); /* the same storage when already contiguous */
CT_API ct_tensor *ct_clone(const ct_tensor *t);
CT_API ct_tensor *ct_to_dtype(const ct_tensor *t, ct_dtype dtype);
CT_API ct_tensor *ct_to_device(const ct_tensor *t, ct_device device);
CT_API int ct_copy_(ct_tensor *dst, const ct_tensor *src); /* broadcasts src, converts dtype */
CT_API int ct_fill_(ct_tensor *t, double value);
CT_API int ct_zero_(ct_tensor *t);

/* ----------------------------------------------------------------- threads */
CT_API void ct_set_num_threads(int n); /* OpenMP threads for ctorch and BLAS */
CT_API int ct_get_num_threads(void);

/* ============================================================== operators
 * Elementwise ops broadcast their arguments (PyTorch's rules) and promote
 * dtypes (torch.result_type; a double argument counts as a Python number: int
 * when integral, else float). `_` after a name: in place, returns 0 or -1. */
/* @@SECTION elementwise@@ */
/* Unary: ct_sin(a) returns sin(a); ct_sin_(a) works in place. Integer inputs of
 * float functions give float32 results, as in PyTorch. */
#define CT_UNARY_OPS(X) \
    X(neg) \
    X(abs) \
    X(sign) \
    X(exp) \
    X(exp2) \
    X(expm1) \
    X(log) \
    X(log2) \
    X(log10) \
    X(log1p) \
    X(sqrt) \
    X(rsqrt) \
    X(reciprocal) \
    X(square) \
    X(sin) \
    X(cos) \
    X(tan) \
    X(asin) \
    X(acos) \
    X(atan) \
    X(sinh) \
    X(cosh) \
    X(tanh) \
    X(sigmoid) \
    X(relu) \
    X(silu) \
    X(erf) \
    X(floor) \
    X(ceil) \
    X(round) \
    X(trunc) \
    X(frac) \
    X(isnan) \
    X(isinf) \
    X(isfinite) \
    X(logical_not)
#define CT_DECLARE_UNARY(name) CT_API ct_tensor *ct_##name(const ct_tensor *a);
CT_UNARY_OPS(CT_DECLARE_UNARY)
CT_API int ct_neg_(ct_tensor *a);
CT_API int ct_abs_(ct_tensor *a);
CT_API int ct_sign_(ct_tensor *a);
CT_API int ct_exp_(ct_tensor *a);
CT_API int ct_exp2_(ct_tensor *a);
CT_API int ct_expm1_(ct_tensor *a);
CT_API int ct_log_(ct_tensor *a);
CT_API int ct_log2_(ct_tensor *a);
CT_API int ct_log10_(ct_tensor *a);
CT_API int ct_log1p_(ct_tensor *a);
CT_API int ct_sqrt_(ct_tensor *a);
CT_API int ct_rsqrt_(ct_tensor *a);
CT_API int ct_reciprocal_(ct_tensor *a);
CT_API int ct_square_(ct_tensor *a);
CT_API int ct_sin_(ct_tensor *a);
CT_API int ct_cos_(ct_tensor *a);
CT_API int ct_tan_(ct_tensor *a);
CT_API int ct_asin_(ct_tensor *a);
CT_API int ct_acos_(ct_tensor *a);
CT_API int ct_atan_(ct_tensor *a);
CT_API int ct_sinh_(ct_tensor *a);
CT_API int ct_cosh_(ct_tensor *a);
CT_API int ct_tanh_(ct_tensor *a);
CT_API int ct_sigmoid_(ct_tensor *a);
CT_API int ct_relu_(ct_tensor *a);
CT_API int ct_silu_(ct_tensor *a);
CT_API int ct_erf_(ct_tensor *a);
CT_API int ct_floor_(ct_tensor *a);
CT_API int ct_ceil_(ct_tensor *a);
CT_API int ct_round_(ct_tensor *a);
CT_API int ct_trunc_(ct_tensor *a);
CT_API int ct_frac_(ct_tensor *a);
CT_API ct_tensor *ct_gelu(const ct_tensor *a, const char *approximate); /* "none" (or NULL) | "tanh" */
CT_API ct_tensor *ct_softplus(const ct_tensor *a, double beta, double threshold);
/* NAN for an argument picks PyTorch's default: 0, or the dtype's largest finite value. */
CT_API ct_tensor *ct_nan_to_num(const ct_tensor *a, double nan, double posinf, double neginf);

/* Binary: ct_add(a, b); ct_add_(a, b) in place; ct_add_scalar(a, 2.5) and
 * ct_add_scalar_(a, 2.5) with a number. Comparisons give bool tensors. */
#define CT_BINARY_OPS(X) \
    X(add) \
    X(sub) \
    X(mul) \
    X(div) \
    X(remainder) \
    X(fmod) \
    X(pow) \
    X(atan2) \
    X(maximum) \
    X(minimum) \
    X(eq) \
    X(ne) \
    X(lt) \
    X(le) \
    X(gt) \
    X(ge) \
    X(logical_and) \
    X(logical_or) \
    X(logical_xor) \
    X(bitwise_and) \
    X(bitwise_or) \
    X(bitwise_xor)
#define CT_DECLARE_BINARY(name)                                                \
    CT_API ct_tensor *ct_##name(const ct_tensor *a, const ct_tensor *b);       \
    CT_API int ct_##name##_(ct_tensor *a, const ct_tensor *b);                 \
    CT_API ct_tensor *ct_##name##_scalar(const ct_tensor *a, double b);        \
    CT_API int ct_##name##_scalar_(ct_tensor *a, double b);
CT_BINARY_OPS(CT_DECLARE_BINARY)
CT_API ct_tensor *ct_add_alpha(const ct_tensor *a, const ct_tensor *b, double alpha); /* a + alpha*b */
CT_API int ct_add_alpha_(ct_tensor *a, const ct_tensor *b, double alpha);
CT_API ct_tensor *ct_sub_alpha(const ct_tensor *a, const ct_tensor *b, double alpha); /* a - alpha*b */
CT_API ct_tensor *ct_rsub_scalar(const ct_tensor *a, double b);                      /* b - a */
/* rounding_mode: NULL or "none" (true division), "trunc", "floor" */
CT_API ct_tensor *ct_div_mode(const ct_tensor *a, const ct_tensor *b, const char *rounding_mode);
CT_API ct_tensor *ct_div_scalar_mode(const ct_tensor *a, double b, const char *rounding_mode);
CT_API ct_tensor *ct_floor_divide(const ct_tensor *a, const ct_tensor *b);

/* ------------------------------------------------------------- reductions */
/* @@SECTION reduce@@ */
/* dims/ndims: a list of dims (negative wrap); ndims == 0 reduces every dim.
 * Integer and bool sums and products give int64, all/any bool (uint8 stays
 * uint8), mean/var/std/norm need floating inputs, as in PyTorch. */
CT_API ct_tensor *ct_sum(const ct_tensor *a);  /* over all elements */
CT_API ct_tensor *ct_mean(const ct_tensor *a); /* over all elements */
CT_API ct_tensor *ct_sum_dims(const ct_tensor *a, const int *dims, int ndims, bool keepdim); /* sum over dims */
CT_API ct_tensor *ct_mean_dims(const ct_tensor *a, const int *dims, int ndims, bool keepdim); /* mean over dims */
CT_API ct_tensor *ct_prod(const ct_tensor *a); /* over all elements */
CT_API ct_tensor *ct_prod_dim(const ct_tensor *a, int dim, bool keepdim); /* product along dim */
CT_API ct_tensor *ct_max(const ct_tensor *a); /* largest element (NaN if any); numel must be > 0 */
CT_API ct_tensor *ct_min(const ct_tensor *a); /* smallest element (NaN if any); numel must be > 0 */
/* Along dim: *values (a's dtype) and *indices (int64, first occurrence), new handles; 0 or -1. */
CT_API int ct_max_dim(const ct_tensor *a, int dim, bool keepdim, ct_tensor **values, ct_tensor **indices);
CT_API int ct_min_dim(const ct_tensor *a, int dim, bool keepdim, ct_tensor **values, ct_tensor **indices); /* as ct_max_dim */
CT_API ct_tensor *ct_amax(const ct_tensor *a, const int *dims, int ndims, bool keepdim); /* max over dims */
CT_API ct_tensor *ct_amin(const ct_tensor *a, const int *dims, int ndims, bool keepdim); /* min over dims */
/* Index (int64) of the largest element along dim, or of the flattened tensor when !has_dim. */
CT_API ct_tensor *ct_argmax(const ct_tensor *a, bool has_dim, int dim, bool keepdim);
CT_API ct_tensor *ct_argmin(const ct_tensor *a, bool has_dim, int dim, bool keepdim); /* as ct_argmax */
/* Variance over dims with divisor N - correction (1: unbiased, 0: population). */
CT_API ct_tensor *ct_var(const ct_tensor *a, const int *dims, int ndims, double correction, bool keepdim);
CT_API ct_tensor *ct_std(const ct_tensor *a, const int *dims, int ndims, double correction, bool keepdim); /* sqrt(var) */
/* Vector p-norm over dims: p = 2, 1, INFINITY (max |x|), -INFINITY, 0 (count of nonzeros), other. */
CT_API ct_tensor *ct_norm(const ct_tensor *a, double p, const int *dims, int ndims, bool keepdim);
CT_API ct_tensor *ct_logsumexp(const ct_tensor *a, const int *dims, int ndims, bool keepdim); /* log(sum(exp(a))), stable */
CT_API ct_tensor *ct_all(const ct_tensor *a); /* are all elements nonzero? bool */
CT_API ct_tensor *ct_any(const ct_tensor *a); /* is any element nonzero? bool */
CT_API ct_tensor *ct_all_dims(const ct_tensor *a, const int *dims, int ndims, bool keepdim); /* all over dims */
CT_API ct_tensor *ct_any_dims(const ct_tensor *a, const int *dims, int ndims, bool keepdim); /* any over dims */
CT_API ct_tensor *ct_cumsum(const ct_tensor *a, int dim);  /* running sum along dim (ints give int64) */
CT_API ct_tensor *ct_cumprod(const ct_tensor *a, int dim); /* running product along dim (ints give int64) */
CT_API ct_tensor *ct_softmax(const ct_tensor *a, int dim);     /* exp(a) / sum(exp(a), dim) */
CT_API ct_tensor *ct_log_softmax(const ct_tensor *a, int dim); /* a - logsumexp(a, dim) */

/* --------------------------------------------------------- linear algebra */
/* @@SECTION linalg@@ */
/* Matrix products (float32/float64 through BLAS; float16/bfloat16 compute in
 * float32, integers in int64; bool is refused as in PyTorch). */
CT_API ct_tensor *ct_mm(const ct_tensor *a, const ct_tensor *b);     /* [n,m] @ [m,p] */
CT_API ct_tensor *ct_bmm(const ct_tensor *a, const ct_tensor *b);    /* [b,n,m] @ [b,m,p] */
CT_API ct_tensor *ct_matmul(const ct_tensor *a, const ct_tensor *b); /* torch.matmul: 1-d, 2-d, broadcast batches */
CT_API ct_tensor *ct_mv(const ct_tensor *a, const ct_tensor *v);     /* [n,m] @ [m] */
CT_API ct_tensor *ct_dot(const ct_tensor *a, const ct_tensor *b);    /* 1-d . 1-d, 0-dim result */
CT_API ct_tensor *ct_outer(const ct_tensor *a, const ct_tensor *b);  /* [n] x [m] -> [n,m], promoted dtype */
/* beta * self + alpha * (mat1 @ mat2); self broadcasts to the result (ignored when beta == 0). */
CT_API ct_tensor *ct_addmm(const ct_tensor *self, const ct_tensor *mat1, const ct_tensor *mat2, double beta, double alpha);
/* beta * self + alpha * bmm(batch1, batch2). */
CT_API ct_tensor *ct_baddbmm(const ct_tensor *self, const ct_tensor *batch1, const ct_tensor *batch2, double beta, double alpha);
/* input @ weight^T + bias (bias may be NULL), as torch.nn.functional.linear. */
CT_API ct_tensor *ct_linear(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias);

/* --------------------------------------------------- convolution, pooling */
/* @@SECTION conv@@ */

/* ----------------------------------------------------- shape and indexing */
/* @@SECTION index@@ */
/* torch.cat: n tensors along dim (dtypes promote; 1-d empty tensors are skipped). */
CT_API ct_tensor *ct_cat(const ct_tensor *const *ts, int n, int dim);
/* torch.stack: n tensors of one shape along a new dim. */
CT_API ct_tensor *ct_stack(const ct_tensor *const *ts, int n, int dim);
/* torch.index_select: index is a 0/1-dim int64 or int32 tensor. */
CT_API ct_tensor *ct_index_select(const ct_tensor *t, int dim, const ct_tensor *index);
/* t.index_add(dim, index, source, alpha=alpha), out of place. */
CT_API ct_tensor *ct_index_add(const ct_tensor *t, int dim, const ct_tensor *index, const ct_tensor *source, double alpha);
/* torch.gather: index is int64 with t's number of dims. */
CT_API ct_tensor *ct_gather(const ct_tensor *t, int dim, const ct_tensor *index);
/* t.scatter(dim, index, src) (src has t's dtype). */
CT_API ct_tensor *ct_scatter(const ct_tensor *t, int dim, const ct_tensor *index, const ct_tensor *src);
/* t.scatter(dim, index, value). */
CT_API ct_tensor *ct_scatter_value(const ct_tensor *t, int dim, const ct_tensor *index, double value);
/* t.scatter_add(dim, index, src). */
CT_API ct_tensor *ct_scatter_add(const ct_tensor *t, int dim, const ct_tensor *index, const ct_tensor *src);
/* t.scatter_(dim, index, src), in place. */
CT_API int ct_scatter_(ct_tensor *t, int dim, const ct_tensor *index, const ct_tensor *src);
/* t.scatter_(dim, index, value), in place. */
CT_API int ct_scatter_value_(ct_tensor *t, int dim, const ct_tensor *index, double value);
/* t.scatter_add_(dim, index, src), in place. */
CT_API int ct_scatter_add_(ct_tensor *t, int dim, const ct_tensor *index, const ct_tensor *src);
/* t[indices[0], ..., indices[n-1]]: int64 index tensors (one dim each), bool masks
 * (as many dims as they have) or NULL for ':' (n <= 5). */
CT_API ct_tensor *ct_index(const ct_tensor *t, const ct_tensor *const *indices, int n);
/* t.index_put(indices, values, accumulate), out of place (n <= 4). */
CT_API ct_tensor *ct_index_put(const ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values,
                               bool accumulate);
/* t.index_put_(indices, values, accumulate), in place (n <= 4). */
CT_API int ct_index_put_(ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values, bool accumulate);
/* torch.masked_select: a 1-d tensor of the elements where the (broadcast) mask is true. */
CT_API ct_tensor *ct_masked_select(const ct_tensor *t, const ct_tensor *mask);
/* t.masked_fill(mask, value): mask must be bool. */
CT_API ct_tensor *ct_masked_fill(const ct_tensor *t, const ct_tensor *mask, double value);
/* t.masked_fill_(mask, value), in place. */
CT_API int ct_masked_fill_(ct_tensor *t, const ct_tensor *mask, double value);
/* torch.nonzero: [nnz, ndim] int64 indices of the non-zero elements. */
CT_API ct_tensor *ct_nonzero(const ct_tensor *t);
/* torch.take: t.flatten()[index] (negative indices wrap). */
CT_API ct_tensor *ct_take(const ct_tensor *t, const ct_tensor *index);
/* torch.flip over the given dims. */
CT_API ct_tensor *ct_flip(const ct_tensor *t, const int *dims, int ndims);
/* torch.roll: ndims 0 rolls the flattened tensor by shifts[0]. */
CT_API ct_tensor *ct_roll(const ct_tensor *t, const int64_t *shifts, int nshifts, const int *dims, int ndims);
/* t.repeat(repeats): n >= t's ndim. */
CT_API ct_tensor *ct_repeat(const ct_tensor *t, const int64_t *repeats, int n);
/* torch.tile: like repeat, reps padded with leading 1s. */
CT_API ct_tensor *ct_tile(const ct_tensor *t, const int64_t *reps, int n);
/* torch.tril: zero above the diagonal-th diagonal of the last two dims. */
CT_API ct_tensor *ct_tril(const ct_tensor *t, int64_t diagonal);
/* torch.triu: zero below the diagonal-th diagonal of the last two dims. */
CT_API ct_tensor *ct_triu(const ct_tensor *t, int64_t diagonal);
/* F.pad, constant mode: pad = (left, right) of the last dim, then the one before...; negative crops. */
CT_API ct_tensor *ct_pad(const ct_tensor *t, const int64_t *pad, int npad, double value);
/* torch.sort: writes values and int64 indices (either may be NULL when not wanted); 0 or -1. */
CT_API int ct_sort(const ct_tensor *t, int dim, bool descending, bool stable, ct_tensor **values, ct_tensor **indices);
/* torch.argsort: the int64 indices of ct_sort. */
CT_API ct_tensor *ct_argsort(const ct_tensor *t, int dim, bool descending, bool stable);
/* torch.topk: the k largest (or smallest) along dim, values and int64 indices; 0 or -1. */
CT_API int ct_topk(const ct_tensor *t, int64_t k, int dim, bool largest, bool sorted, ct_tensor **values,
                   ct_tensor **indices);
/* F.one_hot: int64 classes; num_classes -1 infers max + 1. */
CT_API ct_tensor *ct_one_hot(const ct_tensor *t, int64_t num_classes);
/* F.embedding(indices, weight) with at::embedding's padding_idx: -1 none, else a row whose gradient is zero. */
CT_API ct_tensor *ct_embedding(const ct_tensor *weight, const ct_tensor *indices, int64_t padding_idx);
/* torch.where(cond, a, b): cond must be bool; a and b broadcast and promote. */
CT_API ct_tensor *ct_where(const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b);
/* torch.clamp(t, min, max): NAN means no bound. */
CT_API ct_tensor *ct_clamp(const ct_tensor *t, double min, double max);
/* t.clamp_(min, max), in place. */
CT_API int ct_clamp_(ct_tensor *t, double min, double max);
/* torch.clamp with tensor bounds (broadcast); NULL means no bound. */
CT_API ct_tensor *ct_clamp_tensor(const ct_tensor *t, const ct_tensor *min, const ct_tensor *max);
/* torch.lerp(t, end, weight) with a tensor weight: t + weight * (end - t). */
CT_API ct_tensor *ct_lerp(const ct_tensor *t, const ct_tensor *end, const ct_tensor *weight);
/* torch.lerp with a scalar weight. */
CT_API ct_tensor *ct_lerp_scalar(const ct_tensor *t, const ct_tensor *end, double weight);
/* torch.addcmul: t + value * t1 * t2. */
CT_API ct_tensor *ct_addcmul(const ct_tensor *t, const ct_tensor *t1, const ct_tensor *t2, double value);
/* torch.addcdiv: t + value * t1 / t2. */
CT_API ct_tensor *ct_addcdiv(const ct_tensor *t, const ct_tensor *t1, const ct_tensor *t2, double value);

/* ----------------------------------------------- neural-network functions */
/* @@SECTION nnfunc@@ */

/* =============================================================== autograd */
/* @@SECTION autograd@@ */
/* Leaves that require grad accumulate gradients into .grad on backward. */
CT_API int ct_set_requires_grad(ct_tensor *t, bool requires_grad); /* leaves only */
CT_API bool ct_requires_grad(const ct_tensor *t);
CT_API bool ct_is_leaf(const ct_tensor *t);
/* Backward from t (grad NULL: t must have one element; ones are used). The graph
 * is freed afterwards: a second backward fails unless retain_graph. */
CT_API int ct_backward(ct_tensor *t, const ct_tensor *grad);
CT_API int ct_backward_ex(ct_tensor *t, const ct_tensor *grad, bool retain_graph, bool create_graph);
/* torch.autograd.grad: results[i] = d(outputs . grad_outputs)/d inputs[i] (new
 * handles; NULL for an unused input when allow_unused). grad_outputs may be NULL. */
CT_API int ct_autograd_grad(const ct_tensor *const *outputs, const ct_tensor *const *grad_outputs, int noutputs,
                            const ct_tensor *const *inputs, int ninputs, ct_tensor **results,
                            bool retain_graph, bool create_graph, bool allow_unused);
CT_API ct_tensor *ct_grad(const ct_tensor *t);                 /* NULL, no error, when none */
CT_API int ct_set_grad(ct_tensor *t, const ct_tensor *grad);   /* grad NULL clears it */
CT_API int ct_zero_grad(ct_tensor *t, bool set_to_none);
CT_API int ct_retain_grad(ct_tensor *t);                       /* keep .grad of a non-leaf */
CT_API bool ct_set_grad_enabled(bool enabled);                 /* returns the previous mode */
CT_API bool ct_is_grad_enabled(void);
CT_API const char *ct_grad_fn_name(const ct_tensor *t);        /* "MulBackward0", NULL for leaves */
/* A hook sees the gradient of t during backward and may return a replacement
 * (a new handle) or NULL to keep it. Leaves: before accumulation. */
CT_API int ct_register_hook(ct_tensor *t, ct_tensor *(*hook)(const ct_tensor *grad, void *ctx), void *ctx);
/* Anomaly mode: a backward producing NaN fails naming the node. */
CT_API bool ct_set_detect_anomaly(bool on);

/* ===================================================================== io */
/* @@SECTION io@@ */
/* A state dict: an ordered map from unique names to tensors (insertion order),
 * plus string metadata (safetensors' "__metadata__"), like torch's state_dict().
 * The dict holds its own reference to each tensor it stores (not a handle): the
 * tensor lives while the dict does, whatever scopes end, and it is the same
 * tensor (no copy), as in a Python dict. ct_state_dict_free releases them all.
 * Strings the dict returns stay valid until the dict is freed. */
typedef struct ct_state_dict ct_state_dict; /* opaque */
CT_API ct_state_dict *ct_state_dict_new(void);
CT_API void ct_state_dict_free(ct_state_dict *sd); /* NULL does nothing */
/* Stores t (borrowed handle; the dict references its tensor) under name (copied);
 * an existing entry of that name is replaced in place, keeping its position. */
CT_API int ct_state_dict_set(ct_state_dict *sd, const char *name, const ct_tensor *t);
CT_API int ct_state_dict_size(const ct_state_dict *sd); /* number of tensors; -1 on error */
CT_API const char *ct_state_dict_name(const ct_state_dict *sd, int i); /* NULL + error past the end */
CT_API ct_tensor *ct_state_dict_tensor(const ct_state_dict *sd, int i); /* a new handle to entry i */
CT_API int ct_state_dict_find(const ct_state_dict *sd, const char *name); /* index, or -1 (no error) */
CT_API ct_tensor *ct_state_dict_get(const ct_state_dict *sd, const char *name); /* new handle; NULL + error if absent */
CT_API int ct_state_dict_remove(ct_state_dict *sd, const char *name); /* 0, or -1 + error if absent */
CT_API int ct_state_dict_set_metadata(ct_state_dict *sd, const char *key, const char *value);
CT_API const char *ct_state_dict_metadata(const ct_state_dict *sd, const char *key); /* NULL if absent (no error) */
CT_API int ct_state_dict_metadata_size(const ct_state_dict *sd);
CT_API const char *ct_state_dict_metadata_key(const ct_state_dict *sd, int i);
/* safetensors (https://huggingface.co/docs/safetensors): writes sd's CPU tensors
 * (any layout, written row-major little-endian) and metadata as the reference
 * writer does (tensors ordered by dtype alignment then name, header padded to 8). */
CT_API int ct_safetensors_save(const ct_state_dict *sd, const char *path);
/* The same bytes in a new malloc'ed buffer (release with free()); *nbytes gets its size. */
CT_API void *ct_safetensors_save_buffer(const ct_state_dict *sd, size_t *nbytes);
/* Loads every tensor (new contiguous CPU tensors, names in sorted order) and the
 * metadata into a new dict the caller frees. Malformed files fail with an error
 * naming the file and the problem; nothing is allocated beyond the file's size. */
CT_API ct_state_dict *ct_safetensors_load(const char *path);
CT_API ct_state_dict *ct_safetensors_load_buffer(const void *data, size_t nbytes);
/* NumPy .npy (written as format 1.0, as numpy.save does): one tensor, row-major,
 * little-endian; bfloat16 has no numpy dtype and is refused. */
CT_API int ct_save_npy(const ct_tensor *t, const char *path);
/* Loads versions 1.0/2.0/3.0, '<' '>' '|' '=' byte orders (big-endian is swapped),
 * fortran_order (returned contiguous), dtypes b1 u1 i1 i2 i4 i8 f2 f4 f8. */
CT_API ct_tensor *ct_load_npy(const char *path);
CT_API ct_tensor *ct_load_npy_buffer(const void *data, size_t nbytes);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_H */
