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
    size_t in_use;        /* bytes held by live storages (data of 16 bytes or less lives
                             inside its storage object and is not counted) */
    size_t peak_in_use;   /* high-water mark of in_use */
    size_t cached;        /* bytes kept in the cache for reuse */
    uint64_t hook_allocs; /* calls that reached the allocator hook */
    uint64_t cache_hits;  /* allocations served from the cache */
} ct_memory_stats;
CT_API ct_memory_stats ct_memory_stats_get(void);

/* ---------------------------------------------------------------- factories */
/* A copy of the caller's row-major elements (CT_BOOL: any nonzero byte is true). */
CT_API ct_tensor *ct_from_data(const void *data, const int64_t *shape, int ndim, ct_dtype dtype);
/* Wraps the caller's buffer without a copy (like torch.from_numpy): the tensor is
 * contiguous; deleter(data, ctx) runs when the last view of it dies (may be NULL).
 * CT_BOOL data must hold bytes 0 and 1 only. */
CT_API ct_tensor *ct_from_blob(void *data, const int64_t *shape, int ndim, ct_dtype dtype,
                               void (*deleter)(void *data, void *ctx), void *ctx);
CT_API ct_tensor *ct_scalar(double value); /* 0-dim float32, like torch.tensor(2.0) */
CT_API ct_tensor *ct_scalar_dtype(double value, ct_dtype dtype);
CT_API ct_tensor *ct_empty(const int64_t *shape, int ndim, ct_dtype dtype); /* uninitialised */
CT_API ct_tensor *ct_empty_on(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
CT_API ct_tensor *ct_zeros(const int64_t *shape, int ndim, ct_dtype dtype);
CT_API ct_tensor *ct_ones(const int64_t *shape, int ndim, ct_dtype dtype);
CT_API ct_tensor *ct_full(const int64_t *shape, int ndim, double value, ct_dtype dtype);
/* *_like: t's shape, dtype and device, and its strides when t is dense (a
 * transpose stays transposed), else dense in t's dim order (torch's preserve_format). */
CT_API ct_tensor *ct_zeros_like(const ct_tensor *t);
CT_API ct_tensor *ct_ones_like(const ct_tensor *t);
CT_API ct_tensor *ct_full_like(const ct_tensor *t, double value);
CT_API ct_tensor *ct_arange(double start, double end, double step, ct_dtype dtype);
CT_API ct_tensor *ct_linspace(double start, double end, int64_t steps, ct_dtype dtype);
/* torch.eye(n, m): ones on the diagonal of an [n, m] matrix; m -1 stands for torch's None (m = n). */
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
 * error). `out` must hold ceil(size/split_size), `chunks` or size(dim) entries.
 * As in PyTorch, where gradients are involved and grad mode is on, these
 * pieces (and views made with grad mode off) may not be written in place, nor
 * used once their base or a sibling was: -1 and torch's message ("Output 0 of
 * SplitBackward0 is a view and is being modified inplace. ..."); clone them,
 * or write them with grad mode off. */
CT_API int ct_split(const ct_tensor *t, int64_t split_size, int dim, ct_tensor **out, int cap);
CT_API int ct_split_with_sizes(const ct_tensor *t, const int64_t *sizes, int n, int dim, ct_tensor **out);
CT_API int ct_chunk(const ct_tensor *t, int chunks, int dim, ct_tensor **out, int cap);
CT_API int ct_unbind(const ct_tensor *t, int dim, ct_tensor **out, int cap);

/* ------------------------------------------------------------------- copies */
CT_API ct_tensor *ct_contiguous(const ct_tensor *t); /* t itself (a new handle) when already contiguous */
CT_API ct_tensor *ct_clone(const ct_tensor *t);
CT_API ct_tensor *ct_to_dtype(const ct_tensor *t, ct_dtype dtype); /* t itself (a new handle) for t's dtype */
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
 * when integral, else float; -0.0 is a float). `_` after a name: in place,
 * returns 0 or -1. */
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
/* torch.nn.functional.conv1d: input [N,] C, L; weight [O, C/groups, k]; bias [O] or NULL. */
CT_API ct_tensor *ct_conv1d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias, int64_t stride,
                            int64_t padding, int64_t dilation, int64_t groups);
/* conv2d: input [N,] C, H, W; weight [O, C/groups, kh, kw]; stride, padding, dilation: {h, w} (NULL: 1, 0, 1). */
CT_API ct_tensor *ct_conv2d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                            const int64_t *stride, const int64_t *padding, const int64_t *dilation, int64_t groups);
/* max_pool2d over [N,] C, H, W: kernel {kh, kw}; stride NULL: the kernel; padding NULL: 0; dilation NULL: 1. */
CT_API ct_tensor *ct_max_pool2d(const ct_tensor *input, const int64_t *kernel, const int64_t *stride,
                                const int64_t *padding, const int64_t *dilation, bool ceil_mode);
/* The same, also returning the int64 indices of the maxima (into each H*W plane) in *indices. */
CT_API ct_tensor *ct_max_pool2d_with_indices(const ct_tensor *input, const int64_t *kernel, const int64_t *stride,
                                             const int64_t *padding, const int64_t *dilation, bool ceil_mode,
                                             ct_tensor **indices);
/* avg_pool2d; divisor_override 0: none. */
CT_API ct_tensor *ct_avg_pool2d(const ct_tensor *input, const int64_t *kernel, const int64_t *stride,
                                const int64_t *padding, bool ceil_mode, bool count_include_pad,
                                int64_t divisor_override);
/* adaptive_avg_pool2d to output_size {h, w}; {1, 1} is the mean over the last two
 * dims, as torch's (any rank; NaN for an empty plane). */
CT_API ct_tensor *ct_adaptive_avg_pool2d(const ct_tensor *input, const int64_t *output_size);

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
 * (as many dims as they have) or NULL for ':' (n <= 5); only ':'s give a view, as Python's t[:]. */
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
/* t.masked_scatter(mask, source): where mask (bool) is true, source's elements in order. */
CT_API ct_tensor *ct_masked_scatter(const ct_tensor *t, const ct_tensor *mask, const ct_tensor *source);
/* t.masked_scatter_(mask, source), in place. */
CT_API int ct_masked_scatter_(ct_tensor *t, const ct_tensor *mask, const ct_tensor *source);
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
/* F.embedding(indices, weight) with at::embedding's padding_idx: negative (-1) none, else a row whose gradient is zero. */
CT_API ct_tensor *ct_embedding(const ct_tensor *weight, const ct_tensor *indices, int64_t padding_idx);
/* torch.where(cond, a, b): cond bool (or uint8, as torch 1.13 still takes); a and b broadcast and promote. */
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
/* Losses reduce as torch's reduction= argument: none (per element), mean, sum. */
typedef enum { CT_REDUCTION_NONE, CT_REDUCTION_MEAN, CT_REDUCTION_SUM } ct_reduction;
/* F.cross_entropy: logits [C], [N,C] or [N,C,d...]; target int64 class indices ([], [N] or [N,d...]) or class probabilities (logits' shape); weight [C] or NULL; ignore_index (-100: none); label_smoothing in [0, 1]. */
CT_API ct_tensor *ct_cross_entropy(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight, ct_reduction reduction, int64_t ignore_index, double label_smoothing);
/* F.nll_loss: input log-probabilities [C], [N,C] or [N,C,d...], int64 class-index target, weight [C] or NULL. */
CT_API ct_tensor *ct_nll_loss(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight, ct_reduction reduction, int64_t ignore_index);
/* F.mse_loss: (input - target)^2 (the two broadcast). */
CT_API ct_tensor *ct_mse_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction);
/* F.l1_loss: |input - target|. */
CT_API ct_tensor *ct_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction);
/* F.smooth_l1_loss: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta 0: l1). */
CT_API ct_tensor *ct_smooth_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction, double beta);
/* F.binary_cross_entropy: input probabilities in [0, 1], target of input's shape, weight (broadcast) or NULL. */
CT_API ct_tensor *ct_binary_cross_entropy(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight, ct_reduction reduction);
/* F.binary_cross_entropy_with_logits: weight and pos_weight (broadcast) may be NULL. */
CT_API ct_tensor *ct_binary_cross_entropy_with_logits(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight, const ct_tensor *pos_weight, ct_reduction reduction);
/* F.dropout: zeroes each element with probability p (global generator, torch's
 * bernoulli_(1 - p) mask) and scales the rest by 1/(1-p); the input itself when !training. */
CT_API ct_tensor *ct_dropout(const ct_tensor *input, double p, bool training);
/* F.layer_norm over the last n dims (normalized_shape); weight/bias of that shape or NULL. */
CT_API ct_tensor *ct_layer_norm(const ct_tensor *input, const int64_t *normalized_shape, int n, const ct_tensor *weight, const ct_tensor *bias, double eps);
/* F.batch_norm on [N,C,...]: training uses batch statistics and updates running_mean/var (may be NULL) in place with momentum (unbiased var); eval uses them. */
CT_API ct_tensor *ct_batch_norm(const ct_tensor *input, ct_tensor *running_mean, ct_tensor *running_var, const ct_tensor *weight, const ct_tensor *bias, bool training, double momentum, double eps);
CT_API ct_tensor *ct_hardtanh(const ct_tensor *a, double min_val, double max_val); /* clamp to [min_val, max_val] */
CT_API ct_tensor *ct_relu6(const ct_tensor *a);                                     /* hardtanh(a, 0, 6) */
CT_API ct_tensor *ct_leaky_relu(const ct_tensor *a, double negative_slope);         /* x > 0 ? x : slope * x */
CT_API ct_tensor *ct_elu(const ct_tensor *a, double alpha);                         /* x > 0 ? x : alpha (e^x - 1) */

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

/* ---- custom functions (torch.autograd.Function), gradcheck, functional, graph ---- */
typedef struct ct_ctx ct_ctx; /* a custom function's context: saved tensors, data, needs_input_grad */
/* forward runs with grad mode off and fills outputs[0..nout) with handles it made (the scope
 * ct_function_apply opens around it releases them; the caller gets new handles); backward
 * fills grad_inputs[0..n) (NULL: zero gradient) and runs in a scope with grad mode =
 * create_graph, so a backward written in ct_ ops is differentiable again. Both return 0/-1. */
typedef struct ct_function {
    const char *name; /* "Exp": outputs get grad_fn "ExpBackward" */
    int (*forward)(ct_ctx *ctx, const ct_tensor *const *inputs, int n, ct_tensor **outputs, int nout);
    int (*backward)(ct_ctx *ctx, const ct_tensor *const *grad_outputs, int nout, ct_tensor **grad_inputs, int n);
    void *data;       /* the initial ct_ctx_get_data(ctx): extra arguments for forward */
} ct_function;
/* Fn.apply(*inputs): n <= 18 inputs, 1 <= nout <= 4 outputs (new handles in outputs[]); 0 or -1. */
CT_API int ct_function_apply(const ct_function *fn, const ct_tensor *const *inputs, int n, ct_tensor **outputs, int nout);
/* ctx.save_for_backward (forward only; at most 22 tensors, NULL allowed); version-checked at use. */
CT_API int ct_ctx_save_for_backward(ct_ctx *ctx, const ct_tensor *const *tensors, int n);
/* The i-th saved tensor (new handle; NULL for a saved NULL, or NULL + error if freed or modified in place). */
CT_API ct_tensor *ct_ctx_saved(ct_ctx *ctx, int i);
CT_API int ct_ctx_num_saved(const ct_ctx *ctx); /* number of tensors saved for backward */
/* ctx.needs_input_grad[i]: whether input i required grad when the function was applied
 * (torch's, fixed then: in forward and in every backward pass). */
CT_API bool ct_ctx_needs_input_grad(const ct_ctx *ctx, int i);
/* Attach user data to ctx; free_fn (may be NULL) runs when the graph is freed. */
CT_API void ct_ctx_set_data(ct_ctx *ctx, void *data, void (*free_fn)(void *data));
CT_API void *ct_ctx_get_data(const ct_ctx *ctx); /* the data set last (initially fn->data) */

/* A differentiable function of n tensors with one result (a new handle), for checks and functional. */
typedef ct_tensor *(*ct_fn)(const ct_tensor *const *inputs, int n, void *ctx);
/* Several results: fills outputs[0..cap) with new handles, returns their count or -1. */
typedef int (*ct_fn_multi)(const ct_tensor *const *inputs, int n, ct_tensor **outputs, int cap, void *ctx);
/* torch.autograd.gradcheck: the inputs that require grad are perturbed by +-eps (central differences,
 * in place, element by element) and every element of the numerical Jacobian is compared with
 * backward's (one vector-Jacobian product per output element): |a - n| <= atol + rtol*|n|.
 * eps <= 0, atol < 0, rtol < 0 pick torch's defaults 1e-6, 1e-5, 1e-3. Use float64 inputs.
 * Returns 1 when they match, 0 on a mismatch (ct_last_error() names output, input, element and
 * both values), -1 on error. */
CT_API int ct_gradcheck(ct_fn f, const ct_tensor *const *inputs, int n, void *ctx, double eps, double atol, double rtol);
CT_API int ct_gradcheck_multi(ct_fn_multi f, const ct_tensor *const *inputs, int n, void *ctx, double eps, double atol,
                              double rtol);
/* torch.autograd.gradgradcheck: gradcheck of (inputs, v) -> autograd.grad(f(inputs), inputs, v, create_graph)
 * with random grad_outputs v in [-1, 1] (fixed seed, the outputs' dtype). */
CT_API int ct_gradgradcheck(ct_fn f, const ct_tensor *const *inputs, int n, void *ctx, double eps, double atol,
                            double rtol);
CT_API int ct_gradgradcheck_multi(ct_fn_multi f, const ct_tensor *const *inputs, int n, void *ctx, double eps,
                                  double atol, double rtol);
/* torch.autograd.functional.jacobian of y = f(x): shape y.shape + x.shape (a [y numel, x numel] matrix
 * when viewed so); zeros where y does not depend on x. */
CT_API ct_tensor *ct_jacobian(ct_fn f, const ct_tensor *input, void *ctx);
/* torch.autograd.functional.hessian of a one-element f: shape x.shape + x.shape. */
CT_API ct_tensor *ct_hessian(ct_fn f, const ct_tensor *input, void *ctx);
/* torch.autograd.functional.vjp: *output = f(x) (detached), *vjp = v^T J (v NULL: f(x) has one element). */
CT_API int ct_vjp(ct_fn f, const ct_tensor *input, const ct_tensor *v, void *ctx, ct_tensor **output, ct_tensor **vjp);
/* torch.autograd.functional.jvp: *output = f(x), *jvp = J v (the double-vjp trick; v NULL: x has one element). */
CT_API int ct_jvp(ct_fn f, const ct_tensor *input, const ct_tensor *v, void *ctx, ct_tensor **output, ct_tensor **jvp);
/* torch.autograd.functional.hvp of a one-element f: *output = f(x), *hvp = H v (v NULL: x has one element). */
CT_API int ct_hvp(ct_fn f, const ct_tensor *input, const ct_tensor *v, void *ctx, ct_tensor **output, ct_tensor **hvp);
/* The backward graph of t as an indented tree, one node per line ("SubBackward0", children two
 * spaces deeper, leaves "AccumulateGrad [sizes] dtype", an interior node met again "... (see above)"). */
CT_API int ct_print_graph(const ct_tensor *t);                       /* to stdout; 0 or -1 */
CT_API int ct_graph_repr(const ct_tensor *t, char *buf, size_t cap); /* into buf; full length or -1 */
/* The backward graph in Graphviz DOT (edges point from inputs to outputs); full length or -1. */
CT_API int ct_graph_dot(const ct_tensor *t, char *buf, size_t cap);

/* ===================================================================== io */
/* @@SECTION io@@ */
/* A state dict: an ordered map from unique names to tensors (insertion order),
 * plus string metadata (safetensors' "__metadata__"), like torch's state_dict().
 * The dict holds its own reference to each tensor it stores (not a handle): the
 * tensor lives while the dict does, whatever scopes end, and it is the same
 * tensor (no copy), as in a Python dict. ct_state_dict_free releases them all.
 * Strings the dict returns stay valid until their entry is removed or replaced
 * or the dict is freed. */
typedef struct ct_state_dict ct_state_dict; /* opaque */
CT_API ct_state_dict *ct_state_dict_new(void); /* an empty dict the caller frees */
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
CT_API int ct_state_dict_set_metadata(ct_state_dict *sd, const char *key, const char *value); /* copies both */
CT_API const char *ct_state_dict_metadata(const ct_state_dict *sd, const char *key); /* NULL if absent (no error) */
CT_API int ct_state_dict_metadata_size(const ct_state_dict *sd); /* number of metadata keys */
CT_API const char *ct_state_dict_metadata_key(const ct_state_dict *sd, int i); /* in insertion order */
/* safetensors (https://huggingface.co/docs/safetensors): writes sd's CPU tensors
 * (any layout, written row-major little-endian) and metadata as the reference
 * writer does (tensors ordered by dtype alignment then name, header padded to 8). */
CT_API int ct_safetensors_save(const ct_state_dict *sd, const char *path);
/* The same bytes in a new malloc'ed buffer (release with free()); *nbytes gets its size. */
CT_API void *ct_safetensors_save_buffer(const ct_state_dict *sd, size_t *nbytes);
/* Loads every tensor (new contiguous CPU tensors, names in sorted order) and the
 * metadata into a new dict the caller frees. Malformed files fail with an error
 * naming the file and the problem; sizes in the header are checked against the
 * file before anything is allocated, so the tensors never outgrow the file. */
CT_API ct_state_dict *ct_safetensors_load(const char *path);
CT_API ct_state_dict *ct_safetensors_load_buffer(const void *data, size_t nbytes); /* from memory */
/* NumPy .npy (written as format 1.0, as numpy.save does): one tensor, row-major,
 * little-endian; bfloat16 has no numpy dtype and is refused. */
CT_API int ct_save_npy(const ct_tensor *t, const char *path);
/* Loads versions 1.0/2.0/3.0, '<' '>' '|' '=' byte orders (big-endian is swapped),
 * fortran_order (returned contiguous), dtypes b1 u1 i1 i2 i4 i8 f2 f4 f8. */
CT_API ct_tensor *ct_load_npy(const char *path);
CT_API ct_tensor *ct_load_npy_buffer(const void *data, size_t nbytes); /* from memory */

/* ===================================================================== nn */
/* @@SECTION nn@@ */
/* Modules, as torch.nn.Module: a tree of named children (ordered), each with
 * named parameters (leaf tensors that require grad) and named buffers, and a
 * training flag. A module owns its tensors, its context and its children:
 * ct_module_free frees the whole tree. Tensor handles a module hands out
 * (ct_module_get, ct_module_named_parameters) are borrowed: they stay valid
 * while the module lives (ct_retain one to keep it longer). */
typedef struct ct_module ct_module; /* opaque */
/* What a module does; copied by ct_module_new, so it may live on the stack. */
typedef struct ct_module_ops {
    const char *name; /* the type name in the repr: "Linear", "MyBlock" */
    /* inputs[0..n): returns a new handle (owned like any ct_* result) or NULL + error */
    ct_tensor *(*forward)(ct_module *m, const ct_tensor *const *inputs, int n, void *ctx);
    /* Writes the text inside the parentheses ("in_features=3, ...") as snprintf does; NULL: none. */
    int (*extra_repr)(const ct_module *m, char *buf, size_t cap, void *ctx);
    void *(*clone_ctx)(const void *ctx); /* a deep copy, for ct_module_clone; NULL: the clone shares ctx */
    void (*free_ctx)(void *ctx);         /* NULL: ctx is not freed with the module */
} ct_module_ops;
/* A new module (training mode) with no parameters or children; ctx is the user's state. */
CT_API ct_module *ct_module_new(const ct_module_ops *ops, void *ctx);
CT_API void ct_module_free(ct_module *m); /* the module, its children, tensors and ctx; NULL: nothing */
/* Registers t (borrowed; the module keeps its own reference) as a parameter: it becomes a leaf that requires grad. */
CT_API int ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t);
CT_API int ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t); /* as above, no grad */
/* Adds child under name and takes ownership of it; a child that already has a parent
 * (the same module added twice) is deep-cloned first, so each name gets its own copy. */
CT_API int ct_module_register_module(ct_module *m, const char *name, ct_module *child);
CT_API ct_tensor *ct_module_forward(ct_module *m, const ct_tensor *input); /* m(input) */
CT_API ct_tensor *ct_module_forward2(ct_module *m, const ct_tensor *a, const ct_tensor *b); /* losses: m(input, target) */
CT_API ct_tensor *ct_module_forward_n(ct_module *m, const ct_tensor *const *inputs, int n);
CT_API const char *ct_module_type_name(const ct_module *m);  /* "Linear" */
CT_API void *ct_module_context(const ct_module *m);          /* the ctx given to ct_module_new */
/* A parameter or buffer by dotted name ("0.weight", "features.1.bias"); borrowed; NULL + error if absent. */
CT_API ct_tensor *ct_module_get(const ct_module *m, const char *name);
CT_API ct_module *ct_module_child(const ct_module *m, const char *name); /* dotted name; borrowed */
CT_API int ct_module_num_children(const ct_module *m);
CT_API ct_module *ct_module_child_at(const ct_module *m, int i);          /* borrowed */
CT_API const char *ct_module_child_name(const ct_module *m, int i);
/* Parameters of m and its descendants in PyTorch's order (own first, then each child's,
 * named "child.name"); returns their count and fills up to cap names/handles (either may
 * be NULL). Names and handles are borrowed, valid until the next such call on m. */
CT_API int ct_module_named_parameters(ct_module *m, const char **names, ct_tensor **params, int cap);
CT_API int ct_module_named_buffers(ct_module *m, const char **names, ct_tensor **buffers, int cap);
CT_API int64_t ct_module_num_parameters(ct_module *m); /* total number of parameter elements */
CT_API int ct_module_zero_grad(ct_module *m, bool set_to_none);
CT_API int ct_module_train(ct_module *m, bool mode); /* recursive, as module.train(mode) */
CT_API int ct_module_eval(ct_module *m);             /* ct_module_train(m, false) */
CT_API bool ct_module_is_training(const ct_module *m);
/* A deep copy: new tensors with the same values, the same names, structure, mode and ctx (cloned). */
CT_API ct_module *ct_module_clone(const ct_module *m);
/* PyTorch's module repr ("Sequential(\n  (0): Linear(in_features=2, ...)\n)") into buf,
 * as snprintf does: returns the full length, -1 on error. */
CT_API int ct_module_repr(const ct_module *m, char *buf, size_t cap);
CT_API int ct_module_print(const ct_module *m); /* the repr and a newline to stdout */
/* Parameters then buffers, recursively (module.state_dict()): the same tensors, no copy. */
CT_API ct_state_dict *ct_module_state_dict(ct_module *m);
/* Copies the dict's tensors into the module's (dtype converted). Fails, changing nothing,
 * with PyTorch's "Error(s) in loading state_dict for ..." on a size mismatch, or (strict)
 * on missing or unexpected keys. */
CT_API int ct_module_load_state_dict(ct_module *m, const ct_state_dict *sd, bool strict);
CT_API int ct_module_save(ct_module *m, const char *path);       /* state dict as safetensors */
CT_API int ct_module_load(ct_module *m, const char *path, bool strict);

/* Layers: torch.nn's, initialised as PyTorch does by default (the same numbers
 * after the same ct_manual_seed), float32 parameters. Invalid sizes fail with PyTorch's messages. */
CT_API ct_module *ct_nn_linear(int64_t in_features, int64_t out_features, bool bias);
/* Conv1d/Conv2d with square kernels: stride, padding, dilation the same on each side. */
CT_API ct_module *ct_nn_conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
                               int64_t padding, int64_t dilation, int64_t groups, bool bias);
CT_API ct_module *ct_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
                               int64_t padding, int64_t dilation, int64_t groups, bool bias);
/* momentum NAN: cumulative moving average (PyTorch's momentum=None). */
CT_API ct_module *ct_nn_batch_norm1d(int64_t num_features, double eps, double momentum, bool affine,
                                     bool track_running_stats);
CT_API ct_module *ct_nn_batch_norm2d(int64_t num_features, double eps, double momentum, bool affine,
                                     bool track_running_stats);
CT_API ct_module *ct_nn_layer_norm(const int64_t *normalized_shape, int ndim, double eps, bool elementwise_affine);
CT_API ct_module *ct_nn_dropout(double p);
/* padding_idx -1: none; -num_embeddings..-2 count from the end as torch's (torch's -1 is
 * num_embeddings - 1 here). Module constructors check what torch's do (groups, dropout's p,
 * padding_idx, negative sizes of the tensors they make); sizes, strides and paddings that
 * only a forward can refuse are refused by the forward, in torch's words. */
CT_API ct_module *ct_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx);
CT_API ct_module *ct_nn_relu(void);
CT_API ct_module *ct_nn_gelu(const char *approximate); /* "none" (or NULL) | "tanh" */
CT_API ct_module *ct_nn_silu(void);
CT_API ct_module *ct_nn_tanh(void);
CT_API ct_module *ct_nn_sigmoid(void);
CT_API ct_module *ct_nn_softmax(int dim);
CT_API ct_module *ct_nn_max_pool2d(int64_t kernel_size, int64_t stride /* 0: kernel_size */, int64_t padding);
CT_API ct_module *ct_nn_avg_pool2d(int64_t kernel_size, int64_t stride /* 0: kernel_size */, int64_t padding);
CT_API ct_module *ct_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w);
CT_API ct_module *ct_nn_flatten(int start_dim, int end_dim); /* torch.nn.Flatten(1, -1) by default */
/* Containers: take ownership of the n modules (children "0", "1", ...; a module given twice is cloned). */
CT_API ct_module *ct_nn_sequential(ct_module *const *modules, int n);
CT_API ct_module *ct_nn_module_list(ct_module *const *modules, int n);
CT_API int ct_nn_append(ct_module *container, ct_module *m); /* adds m as the next numbered child */

/* Losses as modules (forward2(input, target)), over the functional forms (ct_reduction: see nnfunc). */
/* input [N, C] (or [C]) logits, target int64 classes [N]; ignore_index -100 as PyTorch. */
CT_API ct_module *ct_nn_cross_entropy_loss(ct_reduction reduction);
CT_API ct_module *ct_nn_nll_loss(ct_reduction reduction);
CT_API ct_module *ct_nn_mse_loss(ct_reduction reduction);
CT_API ct_module *ct_nn_l1_loss(ct_reduction reduction);
CT_API ct_module *ct_nn_smooth_l1_loss(ct_reduction reduction, double beta);
CT_API ct_module *ct_nn_bce_loss(ct_reduction reduction);
CT_API ct_module *ct_nn_bce_with_logits_loss(ct_reduction reduction);

/* torch.nn.init, in place, in no-grad mode, drawing from the global generator as
 * PyTorch does. fan_mode: "fan_in" or "fan_out"; nonlinearity as calculate_gain. */
CT_API double ct_init_calculate_gain(const char *nonlinearity, double param);
CT_API int ct_init_uniform_(ct_tensor *t, double a, double b);
CT_API int ct_init_normal_(ct_tensor *t, double mean, double std);
CT_API int ct_init_constant_(ct_tensor *t, double value);
CT_API int ct_init_zeros_(ct_tensor *t);
CT_API int ct_init_ones_(ct_tensor *t);
CT_API int ct_init_xavier_uniform_(ct_tensor *t, double gain);
CT_API int ct_init_xavier_normal_(ct_tensor *t, double gain);
CT_API int ct_init_kaiming_uniform_(ct_tensor *t, double a, const char *fan_mode, const char *nonlinearity);
CT_API int ct_init_kaiming_normal_(ct_tensor *t, double a, const char *fan_mode, const char *nonlinearity);

/* Data: a dataset of (features, labels) tensors indexed along dim 0, and a loader of
 * batches; with shuffle, epoch e uses the order ct_randperm gives after
 * ct_manual_seed(seed + e) (it reseeds the global generator), i.e. torch's
 * torch.manual_seed(seed + e); torch.randperm(n). */
typedef struct ct_dataset ct_dataset;
typedef struct ct_dataloader ct_dataloader;
CT_API ct_dataset *ct_dataset_new(const ct_tensor *features, const ct_tensor *labels); /* keeps references */
CT_API int64_t ct_dataset_size(const ct_dataset *ds);
CT_API void ct_dataset_free(ct_dataset *ds);
CT_API ct_dataloader *ct_dataloader_new(const ct_dataset *ds, int64_t batch_size, bool shuffle, bool drop_last,
                                        uint64_t seed);
CT_API int64_t ct_dataloader_num_batches(const ct_dataloader *dl);
/* The next batch as new handles (contiguous copies): 1, or 0 at the end of the epoch
 * (the next call starts the next epoch), -1 on error. */
CT_API int ct_dataloader_next(ct_dataloader *dl, ct_tensor **features, ct_tensor **labels);
CT_API void ct_dataloader_free(ct_dataloader *dl);

/* ================================================================== optim */
/* @@SECTION optim@@ */
/* Optimizers with torch.optim's update rules (the same numbers step for step). The
 * optimizer keeps references to the parameters (float32/float64 leaves) and updates
 * them in place, in no-grad mode; parameters without a gradient are skipped. */
typedef struct ct_optimizer ct_optimizer;
CT_API ct_optimizer *ct_optim_sgd(ct_tensor *const *params, int n, double lr, double momentum, double dampening,
                                  double weight_decay, bool nesterov);
CT_API ct_optimizer *ct_optim_adam(ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                                   double eps, double weight_decay, bool amsgrad);
CT_API ct_optimizer *ct_optim_adamw(ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                                    double eps, double weight_decay, bool amsgrad);
CT_API ct_optimizer *ct_optim_rmsprop(ct_tensor *const *params, int n, double lr, double alpha, double eps,
                                      double weight_decay, double momentum, bool centered);
/* A parameter group with its own lr (the other hyperparameters as the first group's). */
CT_API int ct_optimizer_add_param_group(ct_optimizer *opt, ct_tensor *const *params, int n, double lr);
CT_API int ct_optimizer_step(ct_optimizer *opt);
CT_API int ct_optimizer_zero_grad(ct_optimizer *opt, bool set_to_none);
CT_API int ct_optimizer_num_groups(const ct_optimizer *opt);
CT_API double ct_optimizer_get_lr(const ct_optimizer *opt, int group); /* NaN on error */
CT_API int ct_optimizer_set_lr(ct_optimizer *opt, int group, double lr);
CT_API void ct_optimizer_free(ct_optimizer *opt);
/* State as a dict: "state.<i>.<buffer>" tensors (i counts parameters over the groups,
 * buffers named as torch's: step, exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer,
 * square_avg, grad_avg) and "param_groups.<g>.lr" metadata; copies, owned by the dict. */
CT_API ct_state_dict *ct_optimizer_state_dict(const ct_optimizer *opt);
CT_API int ct_optimizer_load_state_dict(ct_optimizer *opt, const ct_state_dict *sd);
/* Learning-rate schedulers: torch.optim.lr_scheduler's StepLR and CosineAnnealingLR.
 * Their base rates are the groups' initial_lr, which the optimizer's first scheduler sets
 * to the rates of its construction (saved in the state dict); get_last_lr gives the rate
 * this scheduler set at its last step, as torch's. */
typedef struct ct_lr_scheduler ct_lr_scheduler;
CT_API ct_lr_scheduler *ct_lr_step(ct_optimizer *opt, int step_size, double gamma);
CT_API ct_lr_scheduler *ct_lr_cosine_annealing(ct_optimizer *opt, int T_max, double eta_min);
CT_API int ct_lr_scheduler_step(ct_lr_scheduler *s);
CT_API double ct_lr_scheduler_get_last_lr(const ct_lr_scheduler *s, int group);
CT_API void ct_lr_scheduler_free(ct_lr_scheduler *s);
/* torch.nn.utils.clip_grad_norm_: scales the gradients so that their total norm_type norm
 * is at most max_norm; returns the total norm before clipping (NaN on error). */
CT_API double ct_clip_grad_norm_(ct_tensor *const *params, int n, double max_norm, double norm_type);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_H */
