/*
 * ops.h: ctorch's ATen, private to the library. Operators without autograd.
 *
 * Every operator is one row of ops.def (the role of native_functions.yaml and
 * derivatives.yaml together). The ops layer expands the rows into:
 *   - enum OpId (OP_add, OP_sin, ...) and the table op_info[] (name, forward);
 *   - the kernels of the elementwise rows, instantiated per dtype.
 * The autograd layer expands the same rows into backward formulas and node names,
 * and the public functions (ct_add, ct_sin, ...) into src/autograd/api.c.
 *
 * Calling convention: an op takes its arguments packed in OpArgs and writes its
 * results, new references, into out[] (returning their count, or -1 with the
 * error set). Forward functions check shapes and dtypes first, allocate their
 * outputs on the input's device, and return before touching data when that
 * device is CT_META: so every op computes shapes and errors on meta tensors.
 */
#ifndef CT_OPS_H
#define CT_OPS_H

#include "core/core.h"
#include <stddef.h>

#define OP_MAX_TENSORS (2 + CT_MAX_DIMS) /* index_put: self, values, an index per dim */
#define OP_MAX_INTS (4 * CT_MAX_DIMS + 8) /* view_scatter: two geometries (sizes, strides) */
#define OP_MAX_OUTS 4

typedef struct OpArgs {
    TensorImpl *t[OP_MAX_TENSORS]; /* tensor arguments, borrowed; optional ones may be NULL */
    int nt;
    double s[4];                   /* scalar arguments */
    int ni;
    TensorImpl *dst;               /* in-place and out= forms: write here (borrowed) */
    int64_t i[OP_MAX_INTS];        /* int arguments: dims, sizes, flags; [0, ni) are set */
} OpArgs;

/* OpArgs for the hot elementwise calls: tensors and scalars cleared, the int
 * array left as it is (ni = 0: nothing reads it), which `OpArgs a = {...}`
 * would zero at every call. */
static inline void op_args_init(OpArgs *a, int nt, TensorImpl *t0, TensorImpl *t1, double s0) {
    memset(a, 0, offsetof(OpArgs, i));
    a->nt = nt;
    a->t[0] = t0;
    a->t[1] = t1;
    a->s[0] = s0;
}

typedef int (*op_forward_fn)(int op, const OpArgs *a, TensorImpl **out);

/* ---- the op ids: one per row of ops.def ---- */
typedef enum {
#define OP(name, ...) OP_##name,
#define UNARY(name, ...) OP_##name,
#define BINARY(name, ...) OP_##name,
#include "ops/ops.def"
#undef OP
#undef UNARY
#undef BINARY
    OP_COUNT
} OpId;

/* Forward functions of the OP rows, defined by the op families. */
#define OP(name, node, nout, fwd, ...) CT_INTERNAL int fwd(int op, const OpArgs *a, TensorImpl **out);
#define UNARY(...)
#define BINARY(...)
#include "ops/ops.def"
#undef OP
#undef UNARY
#undef BINARY
CT_INTERNAL int fwd_unary(int op, const OpArgs *a, TensorImpl **out);
CT_INTERNAL int fwd_binary(int op, const OpArgs *a, TensorImpl **out);

typedef struct OpInfo {
    const char *name;      /* "add": the name in messages */
    op_forward_fn forward;
    int nout;
} OpInfo;
CT_INTERNAL extern const OpInfo op_info[OP_COUNT];

/* Runs one op: the dispatcher's entry. Returns the number of outputs, or -1. */
CT_INTERNAL int at_call(int op, const OpArgs *a, TensorImpl **out);
/* Single-output convenience: new reference or NULL. */
CT_INTERNAL TensorImpl *at_call1(int op, const OpArgs *a);

/* ---- type promotion (PyTorch's result_type with wrapped numbers) ---- */
typedef struct { ct_dtype dim, zero, wrapped; bool has_dim, has_zero, has_wrapped; } PromoteState;
CT_INTERNAL void promote_add_tensor(PromoteState *st, const TensorImpl *t);
CT_INTERNAL void promote_add_scalar(PromoteState *st, double v);
CT_INTERNAL ct_dtype promote_result(const PromoteState *st);
/* The dtype a double argument stands for: int64 when integral, else float. */
CT_INTERNAL ct_dtype scalar_dtype(double v);

/* ---- the elementwise engine (TensorIterator) ----
 * Operand 0 is the output; operands 1..n are inputs broadcast to its shape.
 * Kernels see contiguous arrays in the iterator's compute dtypes: p[0] the
 * output (out_dtype), p[1..] the inputs (in_dtype); the engine gathers strided,
 * broadcast or differently typed operands through per-thread buffers. */
typedef void (*ew_kernel)(int64_t n, char **p, const double *s);

typedef struct ElementwiseSpec {
    const char *op;          /* name for messages */
    int ninputs;             /* 1..4 */
    ct_dtype in_dtype;       /* inputs are converted to this */
    ct_dtype out_dtype;      /* the kernel writes this */
    ct_dtype result_dtype;   /* the allocated output's dtype (when out is NULL) */
    unsigned own_dtype;      /* bit k: input k is read in its own dtype, not converted (where's
                              * condition): its strides count as they are for the output's layout */
} ElementwiseSpec;

/* Broadcasts the inputs, allocates the output (when *out is NULL) or checks the
 * given one (in-place / out= forms: shape must be the broadcast shape, no
 * internal overlap), then runs kernel over all elements (skipped on meta). */
CT_INTERNAL int ew_run(const ElementwiseSpec *spec, TensorImpl *const *inputs, TensorImpl **out,
                       ew_kernel kernel, const double *s);
/* The written-to tensor's first checks, TensorIterator's compute_mem_overlaps
 * (before shapes and dtypes): no element written twice, no input partly over
 * it. 0, or -1 with torch's message. */
CT_INTERNAL int ew_check_written(const char *op, const TensorImpl *o, TensorImpl *const *in, int nin);
/* torch's assert_no_overlap: -1 with its message when in (NULL: none) and the
 * written-to out share any memory (both dense over one storage), else 0 */
CT_INTERNAL int at_check_no_overlap(const char *op, const TensorImpl *out, const TensorImpl *in);
/* TensorIterator's compute_shape: the inputs' broadcast shape into shape (the
 * output's, which it must equal, when out is given); its ndim, or -1 with torch's
 * message. Errors that torch raises after it (dtypes, kernels) call it first. */
/* The path torch 1.13's F.linear takes (fwd_linear follows it; autograd names its node):
 * addmm, addmm of a contiguous 3-d input folded to 2-d, matmul then add_(bias), matmul. */
enum { LINEAR_ADDMM, LINEAR_FOLDED_ADDMM, LINEAR_MATMUL_ADD, LINEAR_MATMUL };
CT_INTERNAL int at_linear_path(const TensorImpl *x, const TensorImpl *bias);
CT_INTERNAL bool at_matmul_folds(const TensorImpl *t, int other_ndim);
CT_INTERNAL int ew_broadcast(const char *op, TensorImpl *const *in, int nin, const TensorImpl *out, int64_t *shape);
/* the gradient of gelu (erf form), silu or softplus (s: beta, threshold) at
 * x, times g, in one pass (no history) */
CT_INTERNAL TensorImpl *at_act_grad(int op, TensorImpl *g, TensorImpl *x, const double *s);
/* softmax's (log: log_softmax's) gradient along dim from its output y, in one
 * pass a row (no history): *out, 1; 0 where it does not apply (not the last
 * dim, not contiguous float32 / float64 alike: the caller composes it); -1 */
CT_INTERNAL int at_softmax_grad(TensorImpl *g, TensorImpl *y, int dim, bool log, TensorImpl **out);

/* Kernel tables: kernel[dtype] for each compute dtype, NULL where unsupported. */
typedef ew_kernel KernelTable[CT_NUM_DTYPES];

/* ---- helpers for forward functions ---- */
CT_INTERNAL bool at_same_device(const char *op, const TensorImpl *a, const TensorImpl *b);
/* Copies src into dst with broadcasting and dtype conversion (the copy_ op). */
CT_INTERNAL int at_copy_(TensorImpl *dst, const TensorImpl *src);
/* A copy in another dtype that keeps t's layout (like .to(): preserve_format);
 * at_contiguous gives a contiguous one. */
CT_INTERNAL TensorImpl *at_to_dtype(const TensorImpl *t, ct_dtype dtype);
/* A new tensor shaped like t in t's memory layout (torch.preserve_format):
 * t's own strides when t is dense and non-overlapping, else contiguous in the
 * order of t's strides. */
CT_INTERNAL TensorImpl *at_empty_like(const TensorImpl *t, ct_dtype dtype);
/* A new tensor with the given sizes and strides when they are dense and
 * non-overlapping, else contiguous (PyTorch's empty_strided for gradients). */
CT_INTERNAL TensorImpl *at_empty_strided(const int64_t *sizes, const int64_t *strides, int ndim, ct_dtype dtype,
                                         ct_device device);
CT_INTERNAL TensorImpl *at_contiguous(const TensorImpl *t);
/* torch's suggest_memory_format() == channels_last (4-d t) */
CT_INTERNAL bool at_channels_last(const TensorImpl *t);
/* t is 4-d with channels-last strides (torch's is_contiguous(channels_last)) */
CT_INTERNAL bool at_channels_last_contiguous(const TensorImpl *t);
/* A new tensor, channels-last when ndim is 4 and one of like[0..n) is
 * (torch's conv / pooling / pad / batch_norm outputs), else contiguous. */
CT_INTERNAL TensorImpl *at_empty_format(const int64_t *sizes, int ndim, ct_dtype dtype, ct_device device,
                                        const TensorImpl *const *like, int n);
/* The output TensorIterator allocates for a unary op over t computing in
 * dtype compute (t converted first when it is another dtype). */
CT_INTERNAL TensorImpl *at_empty_unary(const TensorImpl *t, ct_dtype dtype, ct_dtype compute);
/* A new tensor laid out as TensorIterator lays out the output it allocates
 * for inputs of strides st[0..n) broadcast to shape (stride 0 where
 * broadcast); same_shape: every input has that shape (its fast setup). */
CT_INTERNAL TensorImpl *at_empty_iter(int64_t (*st)[CT_MAX_DIMS], int n, bool same_shape, const int64_t *shape,
                                      int ndim, ct_dtype dtype, ct_device device);
/* A new result o copied into that layout; takes o's reference. */
CT_INTERNAL TensorImpl *at_format_like(TensorImpl *o, const TensorImpl *const *like, int n);
CT_INTERNAL int at_parse_dims(const char *op, const int64_t *dims, int ndims, int tensor_ndim, bool *mask);

/* ---- linalg.c's helpers, shared with conv.c ---- */
/* Prefixes "op: " to the pending error; returns -1. */
CT_INTERNAL int la_prefix_error(const char *op);
/* The dtype a product computes in: opmath for floats, int64 for integers. */
CT_INTERNAL ct_dtype la_compute_dtype(ct_dtype d);
/* C[M, N] = alpha * A[M, K] @ B[K, N] + beta * C, A and B given by row and
 * column strides (in elements), C with leading dimension ldc; CBLAS where it can. */
CT_INTERNAL int la_gemm(ct_dtype cd, int64_t M, int64_t N, int64_t K, double alpha, const void *A, int64_t ars,
                        int64_t acs, const void *B, int64_t brs, int64_t bcs, double beta, void *C, int64_t ldc);

#endif /* CT_OPS_H */
