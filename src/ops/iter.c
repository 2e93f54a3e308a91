/* iter.c: the elementwise engine, after PyTorch's TensorIterator.
 *
 *   1. broadcast the inputs' shapes; allocate the output in the layout of the
 *      inputs (a transposed input gives a transposed output, as in PyTorch) or
 *      check the given output (in-place and out= forms);
 *   2. reorder dimensions so that the one with the smallest output stride is
 *      innermost, then coalesce dimensions that are contiguous with each other
 *      in every operand (a contiguous add becomes one 1-d loop);
 *   3. split the elements over OpenMP threads above a grain size;
 *   4. walk each thread's range along the inner dimension. Operands that are
 *      contiguous and of the kernel's dtype are passed straight to the kernel;
 *      the others (strided, broadcast, another dtype) are gathered into small
 *      per-thread buffers first, and the output scattered back. An input
 *      whose unit stride is along another dim than the output's (a.t() + b)
 *      makes the loop go over 2-d tiles instead, that input gathered a tile at
 *      a time through an in-register transpose (the one of the transposed
 *      copy, at_copy_, which lives here too).
 * Kernels therefore only ever see contiguous arrays of one dtype: plain loops
 * the compiler vectorises. The kernel is chosen once per call. */
#include "ops/ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Elements per buffered step. 1,024 rather than 2,048: converted operands
 * stream from DRAM 30-45% faster (add of [4096, 4096] float16, 1 thread: 3.5
 * -> 2.5 ms); 2,048 16-bit elements are one 4 KiB page per operand and step,
 * which seems to leave the prefetchers (they stop at pages) cold each step. */
#define CHUNK 1024
#define BUF_BYTES 32768          /* per buffer: CHUNK 8-byte elements, a tile of the tiled loop (plan_tiles) */
_Static_assert(BUF_BYTES >= CHUNK * 8, "a buffer holds a step");
#define GRAIN 32768              /* below this many elements, one thread */
#define MAXOPS 5                 /* output + 4 inputs */

typedef struct {
    int nops, ndim;
    int64_t shape[CT_MAX_DIMS];           /* dim 0 innermost */
    int64_t stride[MAXOPS][CT_MAX_DIMS];  /* bytes */
    char *data[MAXOPS];
    ct_dtype dtype[MAXOPS];               /* operands' storage dtypes */
    ct_dtype want[MAXOPS];                /* the dtypes the kernel sees */
    bool tiled;                           /* the tiled loop (plan_tiles) */
    int64_t tb0, tb1;                     /* its tiles: tb0 x tb1 */
    bool tr[MAXOPS];                      /* in the tiled loop: gathered a tile at a time */
} Plan;

/* ---- type promotion: PyTorch's ResultTypeState ---- */

/* A double as a Python number: int when integral, else float. NaN is a float,
 * and so is -0.0 (an int has no sign of zero: uint8 / -0.0 is -inf in torch). */
ct_dtype scalar_dtype(double v) {
    bool integral = v >= -0x1p63 && v < 0x1p63 && v == (double)(int64_t)v && !(v == 0 && signbit(v)); /* int64's */
    return integral ? CT_INT64 : CT_FLOAT32;
}

static void update(ct_dtype *slot, bool *has, ct_dtype d) {
    *slot = *has ? c10_promote(*slot, d) : d;
    *has = true;
}

void promote_add_tensor(PromoteState *st, const TensorImpl *t) {
    if (t->is_wrapped_number) {
        /* a wrapped float counts as the default dtype, float32 */
        update(&st->wrapped, &st->has_wrapped, c10_is_float(t->dtype) ? CT_FLOAT32 : t->dtype);
    } else if (t->ndim == 0) {
        update(&st->zero, &st->has_zero, t->dtype);
    } else {
        update(&st->dim, &st->has_dim, t->dtype);
    }
}

void promote_add_scalar(PromoteState *st, double v) { update(&st->wrapped, &st->has_wrapped, scalar_dtype(v)); }

static int category(ct_dtype d) { return d == CT_BOOL ? 0 : c10_is_float(d) ? 2 : 1; }

/* combine_categories(higher, lower) from ATen/native/TypeProperties.cpp */
static ct_dtype combine(ct_dtype higher, bool has_higher, ct_dtype lower, bool has_lower, bool *has) {
    *has = has_higher || has_lower;
    if (!has_higher) return lower;
    if (!has_lower) return higher;
    if (c10_is_float(higher)) return higher;
    if (higher == CT_BOOL || c10_is_float(lower)) return c10_promote(higher, lower);
    return category(lower) > category(higher) ? c10_promote(higher, lower) : higher;
}

ct_dtype promote_result(const PromoteState *st) {
    bool h1, h2;
    ct_dtype zw = combine(st->zero, st->has_zero, st->wrapped, st->has_wrapped, &h1);
    ct_dtype r = combine(st->dim, st->has_dim, zw, h1, &h2);
    return h2 ? r : CT_FLOAT32;
}

ct_dtype ct_result_type(const ct_tensor *a, const ct_tensor *b) {
    TensorImpl *x = c10_unwrap(a), *y = x ? c10_unwrap(b) : NULL;
    if (!y) return CT_FLOAT32;
    PromoteState st = {0};
    promote_add_tensor(&st, x);
    promote_add_tensor(&st, y);
    return promote_result(&st);
}

/* A CPU 0-dim tensor (like a Python number) may join tensors of any device. */
bool at_same_device(const char *op, const TensorImpl *a, const TensorImpl *b) {
    if (a->device == b->device || (a->ndim == 0 && a->device == CT_CPU) || (b->ndim == 0 && b->device == CT_CPU))
        return true;
    c10_error("%s: Expected all tensors to be on the same device, but found at least two devices, meta and cpu!", op);
    return false;
}

/* ---- output allocation in the inputs' layout ---- */

/* PyTorch's TensorIterator::reorder_dimensions: should dim d0 go inside (be
 * more inner than) dim d1? Ask each input in turn: a broadcast dim (stride 0)
 * says nothing, a smaller stride is more inner, equal strides put the smaller
 * size inside. 1: swap, -1: keep, 0: no input knows. */
static int should_swap(int64_t (*st)[CT_MAX_DIMS], int nin, const int64_t *shape, int d0, int d1) {
    for (int k = 0; k < nin; k++) {
        int64_t s0 = st[k][d0], s1 = st[k][d1];
        if (s0 == 0 || s1 == 0) continue;
        if (s0 < s1) return -1;
        if (s0 > s1) return 1;
        if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
}

/* The dims in the order TensorIterator's reorder_dimensions gives them from
 * the operands' strides st (perm[0] innermost; insertion sort, as PyTorch
 * does it). false: the natural order stands. */
static bool order_dims(int64_t (*st)[CT_MAX_DIMS], int nin, const int64_t *shape, int ndim, int *perm) {
    for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
    bool moved = false;
    for (int i = 1; i < ndim; i++)
        for (int dim1 = i, dim0 = i - 1; dim0 >= 0; dim0--) {
            int c = should_swap(st, nin, shape, perm[dim0], perm[dim1]);
            if (c > 0) {
                int t = perm[dim0];
                perm[dim0] = perm[dim1], perm[dim1] = t, dim1 = dim0;
                moved = true;
            } else if (c < 0) {
                break;
            }
        }
    return moved;
}

/* The strides of a dense tensor of shape whose dims go in perm's order
 * (perm[0] innermost), as TensorIterator's compatible_stride: the dims outside
 * one of size 0 stride 0. */
static void dense_strides(const int64_t *shape, int ndim, const int *perm, int64_t *strides) {
    int64_t p = 1;
    for (int j = 0; j < ndim; j++) {
        strides[perm[j]] = p;
        p *= shape[perm[j]];
    }
}

/* Contiguous, as is_contiguous: size-1 dims do not count, nor anything
 * without elements. */
static bool strides_contiguous(const int64_t *shape, const int64_t *strides, int ndim) {
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) return true;
    int64_t expect = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] == 1) continue;
        if (strides[d] != expect) return false;
        expect *= shape[d];
    }
    return true;
}

/* Dense and non-overlapping: some permutation of the dims is contiguous. */
static bool strides_dense(const int64_t *shape, const int64_t *strides, int ndim) {
    int perm[CT_MAX_DIMS];
    for (int i = 0; i < ndim; i++) perm[i] = i;
    for (int i = 1; i < ndim; i++) { /* innermost (smallest stride) first */
        int d = perm[i], j = i;
        while (j > 0 && strides[perm[j - 1]] > strides[d]) perm[j] = perm[j - 1], j--;
        perm[j] = d;
    }
    int64_t expect = 1;
    for (int i = 0; i < ndim; i++) {
        int d = perm[i];
        if (shape[d] == 1) continue;
        if (strides[d] != expect) return false;
        expect *= shape[d];
    }
    return true;
}

/* is_contiguous(memory_format=channels_last) of a 4-d shape: C, W, H, N
 * innermost first, size-1 dims not counted. */
static bool strides_channels_last(const int64_t *shape, const int64_t *strides, int ndim) {
    static const int order[4] = {1, 3, 2, 0};
    int64_t expect = 1;
    for (int i = 0; i < 4 && ndim == 4; i++) {
        int d = order[i];
        if (shape[d] == 1) continue;
        if (strides[d] != expect) return false;
        expect *= shape[d];
    }
    return ndim == 4;
}

bool at_channels_last_contiguous(const TensorImpl *t) { return strides_channels_last(t->sizes, t->strides, t->ndim); }

static bool dense_non_overlapping(const TensorImpl *t) {
    return t->is_contiguous || strides_dense(t->sizes, t->strides, t->ndim);
}

/* The strides TensorIterator sees for input t of an op that computes in
 * dtype `compute`: an input of another dtype is first converted by .to(),
 * whose preserve_format keeps a dense layout and lays out any other densely
 * in the same dim order (empty_like). */
static void seen_strides(const TensorImpl *t, ct_dtype compute, int64_t *strides) {
    memcpy(strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    if (t->dtype == compute || t->ndim < 2 || dense_non_overlapping(t)) return;
    int64_t st[1][CT_MAX_DIMS];
    int perm[CT_MAX_DIMS];
    memcpy(st[0], t->strides, sizeof(int64_t) * (size_t)t->ndim);
    order_dims(st, 1, t->sizes, t->ndim, perm);
    dense_strides(t->sizes, t->ndim, perm, strides);
}

/* A new tensor of shape with these (dense) strides. */
static TensorImpl *empty_with_strides(const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                                      ct_device device) {
    TensorImpl *t = c10_empty(shape, ndim, dtype, device);
    if (!t) return NULL;
    memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
    c10_refresh(t);
    return t;
}

/* A new 4-d tensor of shape z in channels-last order (C, W, H, N innermost first). */
static TensorImpl *empty_channels_last(const int64_t *z, ct_dtype dtype, ct_device device) {
    int64_t st[4] = {z[1] * z[3] * z[2], 1, z[1] * z[3], z[1]};
    return empty_with_strides(z, st, 4, dtype, device);
}

/* The output of an elementwise op computing in dtype compute, laid out as
 * TensorIterator lays it out (at_empty_iter). Inputs count as the op's
 * conversions leave them (seen_strides). */
static TensorImpl *alloc_output(TensorImpl *const *in, int nin, const int64_t *shape, int ndim, ct_dtype dtype,
                                ct_dtype compute, unsigned own_dtype, ct_device device) {
    if (ndim < 2) return c10_empty(shape, ndim, dtype, device);
    int64_t seen[CT_MAX_DIMS], st[MAXOPS][CT_MAX_DIMS];
    bool same_shape = true;
    for (int k = 0; k < nin; k++) {
        seen_strides(in[k], own_dtype >> k & 1 ? in[k]->dtype : compute, seen);
        same_shape &= in[k]->ndim == ndim && !memcmp(in[k]->sizes, shape, sizeof(int64_t) * (size_t)ndim);
        for (int i = 0; i < ndim; i++) {
            int d = i - (ndim - in[k]->ndim);
            st[k][i] = d < 0 || (in[k]->sizes[d] == 1 && shape[i] != 1) ? 0 : seen[d];
        }
    }
    return at_empty_iter(st, nin, same_shape, shape, ndim, dtype, device);
}

TensorImpl *at_empty_unary(const TensorImpl *t, ct_dtype dtype, ct_dtype compute) {
    TensorImpl *in[1] = {(TensorImpl *)t};
    return alloc_output(in, 1, t->sizes, t->ndim, dtype, compute, 0, t->device);
}

/* TensorIterator's output, from its inputs' strides broadcast to shape
 * (st[0..n), 0 where broadcast). Its fast setup first, when every input has
 * the output's shape: all contiguous give a contiguous output, all
 * channels-last (4-d) a channels-last one, all dense with the same strides
 * those strides. Otherwise the dims go in the order the strides suggest (a
 * transposed input gives a transposed output), contiguous in that order. */
TensorImpl *at_empty_iter(int64_t (*st)[CT_MAX_DIMS], int n, bool same_shape, const int64_t *shape, int ndim,
                          ct_dtype dtype, ct_device device) {
    if (ndim < 2) return c10_empty(shape, ndim, dtype, device);
    bool contiguous = same_shape, channels_last = same_shape, same_dense = same_shape;
    for (int k = 0; k < n && same_shape; k++) {
        contiguous &= strides_contiguous(shape, st[k], ndim);
        channels_last &= strides_channels_last(shape, st[k], ndim);
        same_dense &= strides_dense(shape, st[k], ndim) && !memcmp(st[k], st[0], sizeof(int64_t) * (size_t)ndim);
    }
    int perm[CT_MAX_DIMS];
    if (contiguous) return c10_empty(shape, ndim, dtype, device);
    if (channels_last) return empty_channels_last(shape, dtype, device);
    if (same_dense) return empty_with_strides(shape, st[0], ndim, dtype, device);
    if (!order_dims(st, n, shape, ndim, perm)) return c10_empty(shape, ndim, dtype, device);
    int64_t strides[CT_MAX_DIMS];
    dense_strides(shape, ndim, perm, strides);
    return empty_with_strides(shape, strides, ndim, dtype, device);
}

/* PyTorch's get_overlap_status, for the cases it decides: the same tensor is a
 * full overlap whatever its strides; two dense tensors over the same storage whose
 * memory ranges meet overlap fully with the same range and strides, else partly
 * (the same range with other strides, as x and x.t(), is partial). */
static int overlap_status(const TensorImpl *out, const TensorImpl *in) { /* 0 none, 1 partial, 2 full */
    if (out == in) return 2;
    if (out->storage != in->storage || !out->numel || !in->numel || !dense_non_overlapping(out) ||
        !dense_non_overlapping(in))
        return 0;
    int64_t a0 = out->offset * (int64_t)c10_elsize[out->dtype], a1 = a0 + out->numel * (int64_t)c10_elsize[out->dtype];
    int64_t b0 = in->offset * (int64_t)c10_elsize[in->dtype], b1 = b0 + in->numel * (int64_t)c10_elsize[in->dtype];
    if (a0 == b0 && a1 == b1)
        return out->ndim != in->ndim || memcmp(out->strides, in->strides, sizeof(int64_t) * (size_t)out->ndim) ? 1 : 2;
    return a0 < b1 && b0 < a1;
}
static bool partial_overlap(const TensorImpl *out, const TensorImpl *in) { return overlap_status(out, in) == 1; }

int at_check_no_overlap(const char *op, const TensorImpl *out, const TensorImpl *in) {
    if (!in || !overlap_status(out, in)) return 0;
    return c10_error_int("%s: unsupported operation: some elements of the input tensor and the written-to tensor "
                         "refer to a single memory location. Please clone() the tensor before performing the "
                         "operation.", op);
}

TensorImpl *at_empty_strided(const int64_t *sizes, const int64_t *strides, int ndim, ct_dtype dtype,
                             ct_device device) {
    if (!strides_contiguous(sizes, strides, ndim) && strides_dense(sizes, strides, ndim))
        return empty_with_strides(sizes, strides, ndim, dtype, device);
    return c10_empty(sizes, ndim, dtype, device);
}

/* torch's suggest_memory_format() == channels_last for a 4-d t: its strides
 * rank C, W, H, N innermost first (c10's is_channels_last_strides_2d: ambiguous
 * cases, a size-1 C or N11W, stay NCHW) */
bool at_channels_last(const TensorImpl *t) {
    if (t->ndim != 4 || t->strides[1] == 0) return false;
    static const int order[4] = {1, 3, 2, 0};
    int64_t min = 0;
    for (int i = 0; i < 4; i++) {
        int d = order[i];
        if (t->sizes[d] == 0 || t->strides[d] < min || (d == 0 && min == t->strides[1])) return false;
        if (__builtin_mul_overflow(t->strides[d], t->sizes[d] > 1 ? t->sizes[d] : 1, &min)) return false;
    }
    return true;
}

/* A new tensor of these sizes, channels-last when ndim is 4 and one of
 * like[0..n) is (torch's suggest_memory_format for its CNN ops), else contiguous */
TensorImpl *at_empty_format(const int64_t *z, int ndim, ct_dtype dtype, ct_device device, const TensorImpl *const *like,
                            int n) {
    bool cl = false;
    for (int k = 0; k < n; k++) cl |= like[k] && at_channels_last(like[k]);
    return cl && ndim == 4 ? empty_channels_last(z, dtype, device) : c10_empty(z, ndim, dtype, device);
}

/* o (a new result) copied channels-last when one of like[0..n) is (see
 * at_empty_format); o itself otherwise. Takes o's reference. */
TensorImpl *at_format_like(TensorImpl *o, const TensorImpl *const *like, int n) {
    if (!o || o->ndim != 4 || at_channels_last(o)) return o;
    TensorImpl *r = at_empty_format(o->sizes, 4, o->dtype, o->device, like, n);
    if (r && r->is_contiguous && o->is_contiguous) { /* the same order (size-1 dims): o restrided */
        memcpy(o->strides, r->strides, sizeof(int64_t) * 4);
        c10_refresh(o);
        return c10_release(r), o;
    }
    if (r && r->device != CT_META && at_copy_(r, o) < 0) c10_release(r), r = NULL;
    c10_release(o);
    return r;
}

/* torch.empty_like(t, memory_format=preserve_format): t's strides exactly when
 * dense and non-overlapping (its size-1 dims' strides too), else dense in t's dim
 * order (alloc_output with t as the only input) */
TensorImpl *at_empty_like(const TensorImpl *t, ct_dtype dtype) {
    if (t->numel == 0 || dense_non_overlapping(t)) return empty_with_strides(t->sizes, t->strides, t->ndim, dtype, t->device);
    TensorImpl *in[1] = {(TensorImpl *)t};
    return alloc_output(in, 1, t->sizes, t->ndim, dtype, t->dtype, 0, t->device);
}

/* ---- planning: broadcast strides, reorder, coalesce ---- */

static void plan_operand(Plan *pl, int k, const TensorImpl *t, int ndim) {
    int64_t es = (int64_t)c10_elsize[t->dtype];
    for (int i = 0; i < ndim; i++) {
        int d = i - (ndim - t->ndim);
        pl->stride[k][i] = (d < 0 || t->sizes[d] == 1) ? 0 : t->strides[d] * es;
    }
    pl->data[k] = c10_data(t);
    pl->dtype[k] = t->dtype;
}

static void reorder_and_coalesce(Plan *pl, const int64_t *shape, int ndim) {
    /* dims sorted by increasing output stride; dim 0 innermost */
    int order[CT_MAX_DIMS], n = 0;
    for (int i = ndim - 1; i >= 0; i--) order[n++] = i;
    for (int i = 1; i < n; i++) {
        int d = order[i], j = i;
        while (j > 0 && pl->stride[0][order[j - 1]] > pl->stride[0][d]) order[j] = order[j - 1], j--;
        order[j] = d;
    }
    int64_t sh[CT_MAX_DIMS], st[MAXOPS][CT_MAX_DIMS];
    int m = 0;
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (shape[d] == 1) continue;
        bool merge = m > 0;
        for (int k = 0; k < pl->nops && merge; k++)
            merge = pl->stride[k][d] == st[k][m - 1] * sh[m - 1];
        if (merge) {
            sh[m - 1] *= shape[d];
        } else {
            sh[m] = shape[d];
            for (int k = 0; k < pl->nops; k++) st[k][m] = pl->stride[k][d];
            m++;
        }
    }
    if (m == 0) { /* a single element */
        sh[0] = 1;
        for (int k = 0; k < pl->nops; k++) st[k][0] = 0;
        m = 1;
    }
    pl->ndim = m;
    memcpy(pl->shape, sh, sizeof sh);
    for (int k = 0; k < pl->nops; k++) memcpy(pl->stride[k], st[k], sizeof st[k]);
}

/* ---- transposed tiles (the transposed copy and the tiled loop) ---- */

/* t().contiguous() and other permutes: a copy into a contiguous dst from a src
 * whose unit-stride dim k is not the last one. Through the engine it would
 * gather one element per cache line; instead, for every index of the other
 * dims, transpose dims k and n-1 in square tiles that stay in cache: out[i*ldo
 * + j] = in[j*ldi + i], i along dim k (R of them), j along dim n-1 (C). Tiles
 * go in src order (src rows stream in); inside them, 16x16 (4-byte), 8x8
 * (8-byte) and 32x16 (2-byte) blocks are transposed in registers, and large
 * outputs are written with streaming stores (whole lines, no read for
 * ownership). */
#define TILE 64
#define STREAM_BYTES ((size_t)8 << 20) /* outputs from 8 MiB: streaming stores */

typedef struct {
    int64_t R, C, ldi, ldo;
    bool stream;
} TrGeom;

#if defined(__AVX512F__)
#include <immintrin.h>
static inline void store16(float *p, __m512 v, bool stream) {
    if (stream) _mm512_stream_ps(p, v);
    else _mm512_storeu_ps(p, v);
}
/* 16 rows of 16 floats (stride ldi) -> 16 rows of stride ldo, transposed */
static inline void block_4(const void *src, int64_t ldi, void *dst, int64_t ldo, bool stream) {
    const float *in = src;
    float *out = dst;
    __m512 r[16], t[16];
    for (int k = 0; k < 16; k++) r[k] = _mm512_loadu_ps(in + k * ldi);
    for (int k = 0; k < 16; k += 2)
        t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]), t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
    for (int k = 0; k < 16; k += 4) {
        r[k] = _mm512_shuffle_ps(t[k], t[k + 2], 0x44), r[k + 1] = _mm512_shuffle_ps(t[k], t[k + 2], 0xEE);
        r[k + 2] = _mm512_shuffle_ps(t[k + 1], t[k + 3], 0x44), r[k + 3] = _mm512_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
    for (int q = 0; q < 16; q += 8)
        for (int k = 0; k < 4; k++) {
            t[q + k] = _mm512_shuffle_f32x4(r[q + k], r[q + k + 4], 0x88);
            t[q + k + 4] = _mm512_shuffle_f32x4(r[q + k], r[q + k + 4], 0xDD);
        }
    for (int k = 0; k < 8; k++) {
        store16(out + k * ldo, _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88), stream);
        store16(out + (k + 8) * ldo, _mm512_shuffle_f32x4(t[k], t[k + 8], 0xDD), stream);
    }
}
static inline void store8(double *p, __m512d v, bool stream) {
    if (stream) _mm512_stream_pd(p, v);
    else _mm512_storeu_pd(p, v);
}
/* 8 rows of 8 doubles (stride ldi) -> 8 rows of stride ldo, transposed */
static inline void block_8(const void *src, int64_t ldi, void *dst, int64_t ldo, bool stream) {
    const double *in = src;
    double *out = dst;
    __m512d r[8], t[8];
    for (int k = 0; k < 8; k++) r[k] = _mm512_loadu_pd(in + k * ldi);
    for (int k = 0; k < 8; k += 2)
        t[k] = _mm512_unpacklo_pd(r[k], r[k + 1]), t[k + 1] = _mm512_unpackhi_pd(r[k], r[k + 1]);
    for (int q = 0; q < 8; q += 4) /* t[q], t[q+2] hold even columns, t[q+1], t[q+3] odd ones */
        for (int k = 0; k < 2; k++) {
            r[q + 2 * k] = _mm512_shuffle_f64x2(t[q + k], t[q + k + 2], 0x88);
            r[q + 2 * k + 1] = _mm512_shuffle_f64x2(t[q + k], t[q + k + 2], 0xDD);
        }
    /* r[0]: cols 0,4 of rows 0-3; r[1]: 2,6; r[2]: 1,5; r[3]: 3,7; r[4..7] the same of rows 4-7 */
    static const int col[4] = {0, 2, 1, 3};
    for (int k = 0; k < 4; k++) {
        store8(out + col[k] * ldo, _mm512_shuffle_f64x2(r[k], r[k + 4], 0x88), stream);
        store8(out + (col[k] + 4) * ldo, _mm512_shuffle_f64x2(r[k], r[k + 4], 0xDD), stream);
    }
}
#if defined(__AVX512BW__)
/* 8 rows of 32 16-bit values -> per 128-bit lane, the 8x8 transpose: x[c]
 * holds in lane L column c + 8 L of the 8 rows */
static inline void lanes8x8_2(const uint16_t *in, int64_t ldi, __m512i x[8]) {
    __m512i r[8], t[8];
    for (int k = 0; k < 8; k++) r[k] = _mm512_loadu_si512((const void *)(in + k * ldi));
    for (int k = 0; k < 8; k += 2)
        t[k] = _mm512_unpacklo_epi16(r[k], r[k + 1]), t[k + 1] = _mm512_unpackhi_epi16(r[k], r[k + 1]);
    for (int q = 0; q < 8; q += 4) /* r[q + c]: columns 2c and 2c+1 of rows q..q+3 */
        for (int k = 0; k < 2; k++) {
            r[q + 2 * k] = _mm512_unpacklo_epi32(t[q + k], t[q + k + 2]);
            r[q + 2 * k + 1] = _mm512_unpackhi_epi32(t[q + k], t[q + k + 2]);
        }
    for (int c = 0; c < 4; c++)
        x[2 * c] = _mm512_unpacklo_epi64(r[c], r[c + 4]), x[2 * c + 1] = _mm512_unpackhi_epi64(r[c], r[c + 4]);
}
static inline void store64b(uint16_t *p, __m512i v, bool stream) {
    if (stream) _mm512_stream_si512((void *)p, v);
    else _mm512_storeu_si512((void *)p, v);
}
/* 32 rows of 32 16-bit values (stride ldi) -> 32 rows of 32 (stride ldo):
 * four 8-row groups transposed within lanes, then each output row's four
 * lanes gathered (a 4 x 4 transpose of lanes): 160 shuffles a block, where
 * 256-bit registers took 256 (float16 [1024,1024].t().contiguous(), 2
 * threads: 0.084 -> 0.074 ms; from 16 MiB on, memory-bound, no faster) */
static inline void block_2(const void *src, int64_t ldi, void *dst, int64_t ldo, bool stream) {
    const uint16_t *in = src;
    uint16_t *out = dst;
    __m512i x[4][8]; /* x[q]: src rows 8q..8q+7 */
    for (int q = 0; q < 4; q++) lanes8x8_2(in + 8 * q * ldi, ldi, x[q]);
    for (int c = 0; c < 8; c++) {
        __m512i t0 = _mm512_shuffle_i32x4(x[0][c], x[1][c], 0x44), t1 = _mm512_shuffle_i32x4(x[0][c], x[1][c], 0xEE);
        __m512i t2 = _mm512_shuffle_i32x4(x[2][c], x[3][c], 0x44), t3 = _mm512_shuffle_i32x4(x[2][c], x[3][c], 0xEE);
        store64b(out + c * ldo, _mm512_shuffle_i32x4(t0, t2, 0x88), stream);
        store64b(out + (c + 8) * ldo, _mm512_shuffle_i32x4(t0, t2, 0xDD), stream);
        store64b(out + (c + 16) * ldo, _mm512_shuffle_i32x4(t1, t3, 0x88), stream);
        store64b(out + (c + 24) * ldo, _mm512_shuffle_i32x4(t1, t3, 0xDD), stream);
    }
}
#define SIMD_BI_2 32
#define SIMD_BJ_2 32
#else
#define block_2 NULL
#define SIMD_BI_2 1
#define SIMD_BJ_2 1
#endif
#define SIMD_BI_4 16
#define SIMD_BJ_4 16
#define SIMD_BI_8 8
#define SIMD_BJ_8 8
#define SFENCE() _mm_sfence()
#elif defined(__AVX2__)
#include <immintrin.h>
/* Without AVX-512: 8 x 8 floats and 4 x 4 doubles in ymm registers, 8 x 8
 * 16-bit values in xmm registers (element by element, a tile's source column
 * walked rows 16 KB apart, all in one L1 set: t().contiguous() of [4096, 4096]
 * float32 ran at 3.4 GB/s, float16 at 0.6). Plain stores. */
static inline void block_4(const void *src, int64_t ldi, void *dst, int64_t ldo, bool stream) {
    (void)stream;
    const float *in = src;
    float *out = dst;
    __m256 r[8], t[8];
    for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps(in + k * ldi);
    for (int k = 0; k < 8; k += 2)
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]), t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    for (int k = 0; k < 8; k += 4) { /* rows k..k+3: columns c and c + 4 into r[k + c] */
        r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44), r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
        r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44), r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(out + c * ldo, _mm256_permute2f128_ps(r[c], r[c + 4], 0x20));
        _mm256_storeu_ps(out + (c + 4) * ldo, _mm256_permute2f128_ps(r[c], r[c + 4], 0x31));
    }
}
static inline void block_8(const void *src, int64_t ldi, void *dst, int64_t ldo, bool stream) {
    (void)stream;
    const double *in = src;
    double *out = dst;
    __m256d r[4], t[4];
    for (int k = 0; k < 4; k++) r[k] = _mm256_loadu_pd(in + k * ldi);
    t[0] = _mm256_unpacklo_pd(r[0], r[1]), t[1] = _mm256_unpackhi_pd(r[0], r[1]);
    t[2] = _mm256_unpacklo_pd(r[2], r[3]), t[3] = _mm256_unpackhi_pd(r[2], r[3]);
    for (int c = 0; c < 2; c++) {
        _mm256_storeu_pd(out + c * ldo, _mm256_permute2f128_pd(t[c], t[c + 2], 0x20));
        _mm256_storeu_pd(out + (c + 2) * ldo, _mm256_permute2f128_pd(t[c], t[c + 2], 0x31));
    }
}
/* 8 rows of 8 16-bit values: 16-, 32-, then 64-bit interleaves */
static inline void block_2(const void *src, int64_t ldi, void *dst, int64_t ldo, bool stream) {
    (void)stream;
    const uint16_t *in = src;
    uint16_t *out = dst;
    __m128i r[8], t[8];
    for (int k = 0; k < 8; k++) r[k] = _mm_loadu_si128((const __m128i *)(in + k * ldi));
    for (int k = 0; k < 8; k += 2)
        t[k] = _mm_unpacklo_epi16(r[k], r[k + 1]), t[k + 1] = _mm_unpackhi_epi16(r[k], r[k + 1]);
    for (int q = 0; q < 8; q += 4) /* r[q + p]: columns 2p and 2p + 1 of rows q..q+3 */
        for (int h = 0; h < 2; h++) {
            r[q + 2 * h] = _mm_unpacklo_epi32(t[q + h], t[q + h + 2]);
            r[q + 2 * h + 1] = _mm_unpackhi_epi32(t[q + h], t[q + h + 2]);
        }
    for (int p = 0; p < 4; p++) {
        _mm_storeu_si128((__m128i *)(out + 2 * p * ldo), _mm_unpacklo_epi64(r[p], r[p + 4]));
        _mm_storeu_si128((__m128i *)(out + (2 * p + 1) * ldo), _mm_unpackhi_epi64(r[p], r[p + 4]));
    }
}
#define SIMD_BI_2 8
#define SIMD_BJ_2 8
#define SIMD_BI_4 8
#define SIMD_BJ_4 8
#define SIMD_BI_8 4
#define SIMD_BJ_8 4
#define SFENCE() ((void)0)
#else
#define block_2 NULL
#define block_4 NULL
#define block_8 NULL
#define SIMD_BI_2 1 /* 1: no SIMD blocks */
#define SIMD_BJ_2 1
#define SIMD_BI_4 1
#define SIMD_BJ_4 1
#define SIMD_BI_8 1
#define SIMD_BJ_8 1
#define SFENCE() ((void)0)
#endif
#define block_1 NULL
#define SIMD_BI_1 1
#define SIMD_BJ_1 1

/* One tile [i0, i1) x [j0, j1), one function per element size: the SIMD
 * blocks that fit, then the rest element by element. */
#define TR_TILE(T, ES)                                                                   \
    static void tile_##ES(const char *s, char *d, const TrGeom *g, int64_t i0, int64_t i1, \
                          int64_t j0, int64_t j1) {                                      \
        const T *in = (const T *)s;                                                      \
        T *out = (T *)d;                                                                 \
        const int BI = SIMD_BI_##ES, BJ = SIMD_BJ_##ES; /* SIMD block: BJ src rows x BI */ \
        int64_t ib = i0, jb = j0; /* the ends of the SIMD part */                        \
        void (*blk)(const void *, int64_t, void *, int64_t, bool) = block_##ES;          \
        if (BI > 1 && blk) {                                                             \
            ib = i0 + (i1 - i0) / BI * BI, jb = j0 + (j1 - j0) / BJ * BJ;                \
            for (int64_t j = j0; j < jb; j += BJ)                                        \
                for (int64_t i = i0; i < ib; i += BI)                                    \
                    blk(in + j * g->ldi + i, g->ldi, out + i * g->ldo + j, g->ldo, g->stream); \
        }                                                                                \
        for (int64_t i = i0; i < i1; i++)                                                \
            for (int64_t j = i < ib ? jb : j0; j < j1; j++) out[i * g->ldo + j] = in[j * g->ldi + i]; \
    }
TR_TILE(uint8_t, 1)
TR_TILE(uint16_t, 2)
TR_TILE(uint32_t, 4)
TR_TILE(uint64_t, 8)

typedef void (*tile_fn)(const char *, char *, const TrGeom *, int64_t, int64_t, int64_t, int64_t);
static tile_fn transpose_tile(int64_t es) { return es == 1 ? tile_1 : es == 2 ? tile_2 : es == 4 ? tile_4 : tile_8; }

/* ---- the loop ---- */

/* n elements of es bytes, byte strides ds and ss (ss 0: one element
 * repeated); a contiguous side indexed as an array, so that the compiler
 * vectorises the loop (gathers or scatters for the strided side) */
static void strided_copy(char *dst, int64_t ds, const char *src, int64_t ss, int64_t es, int64_t n) {
    switch (es) {
#define STRIDED(T)                                                                       \
    if (ds == (int64_t)sizeof(T) && ss == 2 * (int64_t)sizeof(T)) /* x[:, ::2]: permutes, not gathers */ \
        for (int64_t i = 0; i < n; i++) ((T *)dst)[i] = ((const T *)src)[2 * i];         \
    else if (ds == (int64_t)sizeof(T))                                                   \
        for (int64_t i = 0; i < n; i++) ((T *)dst)[i] = *(const T *)(src + i * ss);     \
    else if (ss == (int64_t)sizeof(T))                                                   \
        for (int64_t i = 0; i < n; i++) *(T *)(dst + i * ds) = ((const T *)src)[i];      \
    else                                                                                 \
        for (int64_t i = 0; i < n; i++) *(T *)(dst + i * ds) = *(const T *)(src + i * ss); \
    break;
    case 1: STRIDED(uint8_t)
    case 2: STRIDED(uint16_t)
    case 4: STRIDED(uint32_t)
    default: STRIDED(uint64_t)
#undef STRIDED
    }
}

static _Thread_local _Alignas(64) char buffers[MAXOPS][BUF_BYTES], scratch[BUF_BYTES];

/* n elements of an operand (dtype sd, byte stride `stride`) into dst,
 * contiguous in dtype dd. Strided elements are collected in their own dtype
 * first and converted together (the vectorised conversions of c10_convert). */
static void gather(char *dst, ct_dtype dd, const char *src, int64_t stride, ct_dtype sd, int64_t n) {
    int64_t es = (int64_t)c10_elsize[sd], ed = (int64_t)c10_elsize[dd];
    if (stride == es) {
        c10_convert(dst, dd, src, sd, n);
    } else if (stride == 0) { /* a broadcast element: convert once, then fill */
        c10_convert(dst, dd, src, sd, 1);
        strided_copy(dst + ed, ed, dst, 0, ed, n - 1);
    } else {
        char *tmp = dd == sd ? dst : scratch;
        strided_copy(tmp, es, src, stride, es, n);
        if (tmp != dst) c10_convert(dst, dd, tmp, sd, n);
    }
}

static void scatter(char *dst, ct_dtype dd, int64_t stride, const char *src, ct_dtype sd, int64_t n) {
    int64_t ed = (int64_t)c10_elsize[dd];
    if (stride == ed) {
        c10_convert(dst, dd, src, sd, n);
        return;
    }
    if (dd != sd) {
        c10_convert(scratch, dd, src, sd, n);
        src = scratch;
    }
    strided_copy(dst, stride, src, ed, ed, n);
}

/* The lines of the n bytes at p: the same row of the next tile, fetched
 * ahead (the hardware prefetchers do not follow a tile's short rows) into L2
 * only (locality 1, prefetcht2): a tile's rows are a power-of-two stride apart
 * and share a few L1 sets, where a tile's worth fetched ahead evicted itself
 * (10-15% slower than L2, a.t() + b float32 / float64, 1 thread). A macro:
 * gcc takes a function of nothing but prefetches for a const one, and drops
 * its calls. p may be past the tensor: prefetches do not fault. */
#define PREFETCH(p, n, rw)                                                       \
    for (int64_t b_ = 0; b_ < (n); b_ += 64) __builtin_prefetch((p) + b_, rw, 1)

/* The tile of an operand whose unit stride is along dim 1: m0 rows of m1
 * elements in memory, rows s0 bytes apart (and those of the next tile
 * `ahead` bytes on, prefetched); into dst transposed, m1 rows of m0 elements
 * in dtype dd: the transposed copy's tiles, then one conversion. */
static void gather_tile(char *dst, ct_dtype dd, const char *src, int64_t s0, ct_dtype sd, int64_t m0, int64_t m1,
                        int64_t ahead) {
    int64_t es = (int64_t)c10_elsize[sd];
    if (ahead)
        for (int64_t i = 0; i < m0; i++) PREFETCH(src + i * s0 + ahead, m1 * es, 0);
    char *tmp = dd == sd ? dst : scratch;
    TrGeom g = {m1, m0, s0 / es, m0, false};
    transpose_tile(es)(src, tmp, &g, 0, m1, 0, m0);
    if (tmp != dst) c10_convert(dst, dd, tmp, sd, m0 * m1);
}

static void find_direct(const Plan *pl, bool *direct, bool *all_direct) {
    *all_direct = true;
    for (int k = 0; k < pl->nops; k++) {
        direct[k] = pl->dtype[k] == pl->want[k] && pl->stride[k][0] == (int64_t)c10_elsize[pl->want[k]];
        *all_direct &= direct[k];
    }
}

/* One row of n elements along dim 0 from the operands' positions ptr[]: the
 * kernel on the direct operands in place and on buffers for the others
 * (rows of a tile already gathered: tile[k], else gathered here). ahead[k]:
 * prefetch distances of contiguous rows (NULL: none). */
static void run_row(const Plan *pl, char *const *ptr, const bool *direct, char *const *tile, const int64_t *ahead,
                    int64_t n, ew_kernel kernel, const double *s) {
    char *p[MAXOPS];
    for (int k = 0; k < pl->nops; k++) {
        int64_t es = (int64_t)c10_elsize[pl->dtype[k]];
        if (ahead && ahead[k] && !tile[k] && pl->stride[k][0] == es) {
            if (k) PREFETCH(ptr[k] + ahead[k], n * es, 0);
            else PREFETCH(ptr[k] + ahead[k], n * es, 1);
        }
        if (direct[k]) p[k] = ptr[k];
        else if (tile[k]) p[k] = tile[k];
        else {
            p[k] = buffers[k];
            if (k > 0) gather(buffers[k], pl->want[k], ptr[k], pl->stride[k][0], pl->dtype[k], n);
        }
    }
    kernel(n, p, s);
    if (!direct[0]) scatter(ptr[0], pl->dtype[0], pl->stride[0][0], buffers[0], pl->want[0], n);
}

/* Elements per buffered step: CHUNK, and no more than STEP_BYTES of an input
 * gathered from dense lines (x[:, ::2] of 8-byte elements: 256). The kernel's
 * pass over a step's buffers leaves memory idle past what the prefetchers
 * run ahead; shorter steps keep the reads going (exp of a ::2 slice of
 * [4096, 8192] float64, 1 thread: 22.8 -> 17.7 ms, 18.5 -> 17.5; add 26.0 ->
 * 25.1, 20.7 -> 19.5). 16-bit slices keep 1,024 (4 KiB of input): 512 took
 * 20-40% longer. */
#define STEP_BYTES 4096
static int64_t step_length(const Plan *pl) {
    int64_t chunk = CHUNK;
    for (int k = 1; k < pl->nops; k++) {
        int64_t st = pl->stride[k][0] < 0 ? -pl->stride[k][0] : pl->stride[k][0];
        if (st > (int64_t)c10_elsize[pl->dtype[k]] && st <= 64 && STEP_BYTES / st < chunk) chunk = STEP_BYTES / st;
    }
    return chunk;
}

static void run_range(const Plan *pl, int64_t begin, int64_t end, ew_kernel kernel, const double *s) {
    int64_t idx[CT_MAX_DIMS];
    int64_t rest = begin;
    for (int d = 0; d < pl->ndim; d++) {
        idx[d] = rest % pl->shape[d];
        rest /= pl->shape[d];
    }
    bool direct[MAXOPS], all_direct;
    find_direct(pl, direct, &all_direct);
    int64_t chunk = step_length(pl);
    char *ptr[MAXOPS], *none[MAXOPS] = {0};
    while (begin < end) {
        int64_t n = pl->shape[0] - idx[0];
        if (n > end - begin) n = end - begin;
        if (!all_direct && n > chunk) n = chunk;
        for (int k = 0; k < pl->nops; k++) {
            ptr[k] = pl->data[k];
            for (int d = 0; d < pl->ndim; d++) ptr[k] += idx[d] * pl->stride[k][d];
        }
        /* whole rows of direct operands along dim 1: the pointers stepped,
         * the kernel called straight, without run_row's tests (rows of 8
         * floats, x.unfold(1, 8, 4).contiguous() of [1024, 1024], 1 thread:
         * 4.44 -> 0.76 ms) */
        int64_t m = 1;
        if (all_direct && !idx[0] && pl->ndim > 1 && n == pl->shape[0]) {
            m = (end - begin) / n;
            if (m > pl->shape[1] - idx[1]) m = pl->shape[1] - idx[1];
        }
        if (m > 1) {
            for (int64_t j = 0; j < m; j++) {
                kernel(n, ptr, s);
                for (int k = 0; k < pl->nops; k++) ptr[k] += pl->stride[k][1];
            }
            begin += m * n;
            idx[1] += m;
        } else {
            run_row(pl, ptr, direct, none, NULL, n, kernel, s);
            begin += n;
            idx[0] += n;
        }
        for (int d = m > 1; d < pl->ndim - 1 && idx[d] == pl->shape[d]; d++) {
            idx[d] = 0;
            idx[d + 1]++;
        }
    }
}

/* ---- tiles: operands whose inner strides disagree ----
 * a.t() + b: the output follows a.t(), so along dim 0 b's elements are a row
 * apart, and the row-by-row loop would read one element per cache line. When
 * an input is unit-stride along another dim, that dim becomes dim 1 and the
 * loop goes over tb0 x tb1 tiles of dims 0 and 1: such inputs are gathered a
 * tile at a time, transposed (every line they touch is used whole), and the
 * kernel runs along dim 0 on each row of the tile. */
#define TB1_MAX 128

static bool transposed_input(const Plan *pl, int k, int d) {
    int64_t es = (int64_t)c10_elsize[pl->dtype[k]];
    return pl->stride[k][d] == es && pl->stride[k][0] != es && pl->stride[k][0] != 0;
}

/* Decides the tiled loop (pl->tiled) and the inputs gathered by tiles. */
static void plan_tiles(Plan *pl) {
    pl->tiled = false;
    if (pl->ndim < 2) return;
    int d1 = 0;
    for (int k = 1; k < pl->nops && !d1; k++)
        for (int d = 1; d < pl->ndim && !d1; d++)
            if (transposed_input(pl, k, d)) d1 = d;
    if (!d1) return;
    int64_t t = pl->shape[1]; /* dims >= 1 go in any order: d1 becomes dim 1 */
    pl->shape[1] = pl->shape[d1], pl->shape[d1] = t;
    for (int k = 0; k < pl->nops; k++) t = pl->stride[k][1], pl->stride[k][1] = pl->stride[k][d1], pl->stride[k][d1] = t;
    /* rows of 64 elements, 128 when some operand is converted row by row
     * (fewer calls); as wide as 16 KiB tiles of a tiled input (in its dtype
     * and the kernel's) allow: rows of a tiled input of 128 bytes and more,
     * when they are not converted. 16-bit tiled inputs: 128 x 128 tiles of 32
     * KiB, runs of 256 bytes both ways as float32's 64 x 64 (16-bit a.t() + b,
     * 1 thread: 12-14% faster than 64 x 128, 8-11% than 128 x 64). */
    int64_t ew = 1;
    pl->tb0 = 64;
    for (int k = 0; k < pl->nops; k++) {
        int64_t es = (int64_t)c10_elsize[pl->want[k]], sz = (int64_t)c10_elsize[pl->dtype[k]];
        pl->tr[k] = k > 0 && transposed_input(pl, k, 1);
        if (pl->tr[k] && (es > ew || sz > ew)) ew = es > sz ? es : sz;
        if (!pl->tr[k] && pl->dtype[k] != pl->want[k]) pl->tb0 = 128;
    }
    int64_t bytes = ew == 2 ? BUF_BYTES : BUF_BYTES / 2;
    if (ew == 2) pl->tb0 = 128;
    pl->tb1 = bytes / pl->tb0 / ew < TB1_MAX ? bytes / pl->tb0 / ew : TB1_MAX;
    pl->tiled = true;
}

static int64_t tile_count(const Plan *pl) {
    int64_t n = ((pl->shape[0] + pl->tb0 - 1) / pl->tb0) * ((pl->shape[1] + pl->tb1 - 1) / pl->tb1);
    for (int d = 2; d < pl->ndim; d++) n *= pl->shape[d];
    return n;
}

/* The m1 rows of m0 elements of a tile whose operands are all direct or
 * tiled: the kernel straight on each, the pointers stepped, contiguous rows
 * of the next tile prefetched: without run_row's tests per operand and row
 * (a.t() + b, 1 thread: 4-5% of the time of float32, int32 and int64). */
static void tile_rows(const Plan *pl, char *const *ptr, char *const *tile, const int64_t *ahead, int64_t m0,
                      int64_t m1, ew_kernel kernel, const double *s) {
    char *p[MAXOPS];
    int64_t step[MAXOPS], pf[MAXOPS], nb[MAXOPS]; /* nb: a row's bytes */
    for (int k = 0; k < pl->nops; k++) {
        nb[k] = m0 * (int64_t)c10_elsize[pl->want[k]];
        p[k] = tile[k] ? tile[k] : ptr[k];
        step[k] = tile[k] ? nb[k] : pl->stride[k][1];
        pf[k] = tile[k] ? 0 : ahead[k];
    }
    for (int64_t j = 0; j < m1; j++) {
        if (pf[0]) PREFETCH(p[0] + pf[0], nb[0], 1);
        for (int k = 1; k < pl->nops; k++)
            if (pf[k]) PREFETCH(p[k] + pf[k], nb[k], 0);
        kernel(m0, p, s);
        for (int k = 0; k < pl->nops; k++) p[k] += step[k];
    }
}

static void run_tiles(const Plan *pl, int64_t begin, int64_t end, ew_kernel kernel, const double *s) {
    bool direct[MAXOPS], all_direct, lean = true;
    find_direct(pl, direct, &all_direct);
    for (int k = 0; k < pl->nops; k++) lean &= direct[k] || pl->tr[k];
    int64_t tb0 = pl->tb0, tb1 = pl->tb1, n0 = (pl->shape[0] + tb0 - 1) / tb0, n1 = (pl->shape[1] + tb1 - 1) / tb1;
    for (int64_t t = begin; t < end; t++) {
        int64_t r = t / n0, i0 = t % n0 * tb0, j0 = r % n1 * tb1;
        r /= n1;
        int64_t m0 = pl->shape[0] - i0 < tb0 ? pl->shape[0] - i0 : tb0;
        int64_t m1 = pl->shape[1] - j0 < tb1 ? pl->shape[1] - j0 : tb1;
        char *ptr[MAXOPS], *tile[MAXOPS];
        int64_t ahead[MAXOPS]; /* to the next tile, within these dims */
        bool last = t + 1 == end;
        for (int k = 0; k < pl->nops; k++) {
            ptr[k] = pl->data[k] + i0 * pl->stride[k][0] + j0 * pl->stride[k][1];
            ahead[k] = last || i0 + tb0 >= pl->shape[0] ? 0 : tb0 * pl->stride[k][0];
        }
        for (int d = 2; d < pl->ndim; d++, r /= pl->shape[d - 1])
            for (int k = 0; k < pl->nops; k++) ptr[k] += r % pl->shape[d] * pl->stride[k][d];
        for (int k = 0; k < pl->nops; k++) {
            tile[k] = NULL;
            if (!pl->tr[k]) continue;
            tile[k] = buffers[k];
            gather_tile(buffers[k], pl->want[k], ptr[k], pl->stride[k][0], pl->dtype[k], m0, m1, ahead[k]);
        }
        if (lean) {
            tile_rows(pl, ptr, tile, ahead, m0, m1, kernel, s);
            continue;
        }
        for (int64_t j = 0; j < m1; j++) {
            run_row(pl, ptr, direct, tile, ahead, m0, kernel, s);
            for (int k = 0; k < pl->nops; k++) {
                ptr[k] += pl->stride[k][1];
                if (tile[k]) tile[k] += m0 * (int64_t)c10_elsize[pl->want[k]];
            }
        }
    }
}

static void run_plan(const Plan *pl, int64_t numel, ew_kernel kernel, const double *s) {
    void (*range)(const Plan *, int64_t, int64_t, ew_kernel, const double *) = pl->tiled ? run_tiles : run_range;
    int64_t total = pl->tiled ? tile_count(pl) : numel;
#ifdef _OPENMP
    int nt = numel >= GRAIN && !omp_in_parallel() ? omp_get_max_threads() : 1;
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        {
            int id = omp_get_thread_num(), n = omp_get_num_threads();
            range(pl, total * id / n, total * (id + 1) / n, kernel, s);
        }
        return;
    }
#endif
    range(pl, 0, total, kernel, s);
}

/* The common case without planning: a contiguous output and inputs that are
 * either contiguous with the output's element count (hence its shape up to
 * size-1 dims) or single elements. One flat dimension. */
static bool simple_plan(const ElementwiseSpec *spec, TensorImpl *const *in, TensorImpl *o, ew_kernel kernel,
                        const double *s) {
    if (!o->is_contiguous) return false;
    Plan pl;
    pl.nops = spec->ninputs + 1;
    pl.ndim = 1;
    pl.tiled = false;
    pl.shape[0] = o->numel;
    pl.data[0] = c10_data(o);
    pl.dtype[0] = o->dtype;
    pl.want[0] = spec->out_dtype;
    pl.stride[0][0] = (int64_t)c10_elsize[o->dtype];
    for (int k = 0; k < spec->ninputs; k++) {
        const TensorImpl *t = in[k];
        bool scalar = t->numel == 1;
        if (!scalar && !(t->is_contiguous && t->numel == o->numel)) return false;
        pl.data[k + 1] = c10_data(t);
        pl.dtype[k + 1] = t->dtype;
        pl.want[k + 1] = spec->in_dtype;
        pl.stride[k + 1][0] = scalar && o->numel > 1 ? 0 : (int64_t)c10_elsize[t->dtype];
    }
    run_plan(&pl, o->numel, kernel, s);
    return true;
}

/* One element (every input then has one too): the kernel straight on the
 * operands, through one-element buffers where a dtype differs. Chains of
 * scalar ops, autograd's overhead case, live here. */
static void run_one(const ElementwiseSpec *spec, TensorImpl *const *in, TensorImpl *o, ew_kernel kernel,
                    const double *s) {
    _Alignas(16) char buf[MAXOPS][16];
    char *p[MAXOPS];
    p[0] = o->dtype == spec->out_dtype ? c10_data(o) : buf[0];
    for (int k = 0; k < spec->ninputs; k++) {
        const TensorImpl *t = in[k];
        p[k + 1] = c10_data(t);
        if (t->dtype != spec->in_dtype) {
            c10_convert(buf[k + 1], spec->in_dtype, p[k + 1], t->dtype, 1);
            p[k + 1] = buf[k + 1];
        }
    }
    kernel(1, p, s);
    if (p[0] == buf[0]) c10_convert(c10_data(o), o->dtype, buf[0], spec->out_dtype, 1);
}

/* Scalars (0-dim CPU operands, a new output): nothing to broadcast or plan. */
static bool all_cpu_scalars(const ElementwiseSpec *spec, TensorImpl *const *in) {
    for (int k = 0; k < spec->ninputs; k++)
        if (in[k]->ndim || in[k]->device != CT_CPU) return false;
    return true;
}

/* TensorIterator's common dtype, the one inputs of other dtypes are converted
 * to (not the kernel's: 16-bit floats compute in float32 without a copy):
 * the inputs promoted, integers to float for ops that compute in float (or
 * take the integers and give float: exp of int32). */
static ct_dtype common_dtype(const ElementwiseSpec *spec, TensorImpl *const *in) {
    PromoteState st = {0};
    for (int k = 0; k < spec->ninputs; k++) promote_add_tensor(&st, in[k]);
    ct_dtype common = promote_result(&st), f = c10_is_float(spec->in_dtype) ? spec->in_dtype : spec->out_dtype;
    return c10_is_float(f) && !c10_is_float(common) ? f : common;
}

int ew_check_written(const char *op, const TensorImpl *o, TensorImpl *const *in, int nin) {
    if (c10_has_internal_overlap(o))
        return c10_error_int("%s: unsupported operation: more than one element of the written-to tensor "
                             "refers to a single memory location. Please clone() the tensor before "
                             "performing the operation.", op);
    for (int k = 0; k < nin; k++)
        if (partial_overlap(o, in[k])) return at_check_no_overlap(op, o, in[k]);
    return 0;
}

int ew_broadcast(const char *op, TensorImpl *const *in, int nin, const TensorImpl *out, int64_t *shape) {
    int ndim = out ? out->ndim : 0; /* in-place and out=: the inputs broadcast to the output's shape */
    if (out) memcpy(shape, out->sizes, sizeof(int64_t) * (size_t)ndim);
    for (int k = 0; k < nin; k++) {
        int n = c10_broadcast_shape(shape, ndim, in[k]->sizes, in[k]->ndim, shape);
        if (n < 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            return c10_error_int("%s: %s", op, msg);
        }
        ndim = n;
    }
    if (out && (out->ndim != ndim || memcmp(out->sizes, shape, sizeof(int64_t) * (size_t)ndim)))
        return c10_error_int("%s: output with shape %s doesn't match the broadcast shape %s", op,
                             c10_shape_str(out->sizes, out->ndim), c10_shape_str(shape, ndim));
    return ndim;
}

int ew_run(const ElementwiseSpec *spec, TensorImpl *const *in, TensorImpl **out, ew_kernel kernel,
           const double *s) {
    if (!*out && all_cpu_scalars(spec, in)) {
        TensorImpl *o = c10_empty(NULL, 0, spec->result_dtype, CT_CPU);
        if (!o) return -1;
        run_one(spec, in, o, kernel, s);
        *out = o;
        return 0;
    }
    int64_t shape[CT_MAX_DIMS];
    if (*out && ew_check_written(spec->op, *out, in, spec->ninputs) < 0) return -1;
    int ndim = ew_broadcast(spec->op, in, spec->ninputs, *out, shape);
    if (ndim < 0) return -1;
    for (int k = 1; k < spec->ninputs; k++)
        if (!at_same_device(spec->op, in[0], in[k])) return -1;
    ct_device device = CT_CPU; /* meta wins: CPU scalars may join meta tensors */
    for (int k = 0; k < spec->ninputs; k++)
        if (in[k]->device == CT_META) device = CT_META;
    TensorImpl *o = *out;
    if (!o) {
        o = alloc_output(in, spec->ninputs, shape, ndim, spec->result_dtype,
                         ndim < 2 ? spec->in_dtype : common_dtype(spec, in), spec->own_dtype, device);
        if (!o) return -1;
    }
    if (o->device != CT_META && o->numel == 1) {
        run_one(spec, in, o, kernel, s);
    } else if (o->device != CT_META && o->numel > 0 && simple_plan(spec, in, o, kernel, s)) {
        /* done: contiguous operands of one shape (or single elements) */
    } else if (o->device != CT_META && o->numel > 0) {
        Plan pl;
        pl.nops = spec->ninputs + 1;
        plan_operand(&pl, 0, o, ndim);
        pl.want[0] = spec->out_dtype;
        for (int k = 0; k < spec->ninputs; k++) {
            plan_operand(&pl, k + 1, in[k], ndim);
            pl.want[k + 1] = spec->in_dtype;
        }
        reorder_and_coalesce(&pl, shape, ndim);
        plan_tiles(&pl);
        run_plan(&pl, o->numel, kernel, s);
    }
    *out = o;
    return 0;
}

/* ---- copy_ ---- */

/* Copy kernel: the engine has already converted src to dst's dtype. */
static void copy_kernel(int64_t n, char **p, const double *s) {
    size_t b = (size_t)n * (size_t)s[0];
    char *d = p[0];
    const char *x = p[1];
    /* short rows as two overlapping fixed-size moves, not a call */
    if (b >= 16 && b <= 32) memcpy(d, x, 16), memcpy(d + b - 16, x + b - 16, 16);
    else if (b >= 8 && b < 16) memcpy(d, x, 8), memcpy(d + b - 8, x + b - 8, 8);
    else if (b >= 4 && b < 8) memcpy(d, x, 4), memcpy(d + b - 4, x + b - 4, 4);
    else memcpy(d, x, b);
}

static bool copy_transposed(TensorImpl *dst, const TensorImpl *src) {
    int n = src->ndim, k = -1;
    if (dst->dtype != src->dtype || !dst->is_contiguous || n < 2 || dst->numel < 4096 ||
        dst->device == CT_META || src->storage == dst->storage)
        return false;
    for (int d = 0; d < n - 1; d++)
        if (src->sizes[d] > 1 && src->strides[d] == 1) k = d;
    if (k < 0 || src->sizes[n - 1] < 2 || src->strides[n - 1] < 2) return false;
    int64_t es = (int64_t)c10_elsize[dst->dtype];
    TrGeom g = {src->sizes[k], src->sizes[n - 1], src->strides[n - 1], dst->strides[k], false};
    /* streaming stores: a large output whose SIMD rows are whole aligned lines */
    g.stream = (size_t)(dst->numel * es) >= STREAM_BYTES && (g.ldo * es) % 64 == 0 &&
               (uintptr_t)c10_data(dst) % 64 == 0;
    tile_fn tile = transpose_tile(es);
    const char *s = c10_data(src);
    char *d = c10_data(dst);
    int64_t ti = (g.R + TILE - 1) / TILE, tj = (g.C + TILE - 1) / TILE;
    int64_t nbatch = dst->numel / (g.R * g.C), ntiles = nbatch * ti * tj;
    OMP(omp parallel for schedule(static) if (dst->numel > 65536))
    for (int64_t t = 0; t < ntiles; t++) {
        int64_t b = t / (ti * tj), r = t % (ti * tj), j0 = r / ti * TILE, i0 = r % ti * TILE;
        int64_t so = 0, dof = 0; /* offsets of batch b over the other dims */
        for (int q = n - 2; q >= 0; q--) {
            if (q == k) continue;
            int64_t c = b % src->sizes[q];
            b /= src->sizes[q];
            so += c * src->strides[q], dof += c * dst->strides[q];
        }
        tile(s + so * es, d + dof * es, &g, i0, i0 + TILE < g.R ? i0 + TILE : g.R, j0,
             j0 + TILE < g.C ? j0 + TILE : g.C);
        if (g.stream) SFENCE();
    }
    return true;
}

int at_copy_(TensorImpl *dst, const TensorImpl *src) {
    /* torch 1.13's copy_impl: a tensor onto itself is a no-op (another view of
     * the same elements is copied, an expanded one refused); a copy into meta
     * from the CPU is ignored, one out of meta refused */
    if (src == dst) return 0;
    if (dst->device == CT_META && src->device == CT_CPU) return 0;
    if (src->device == CT_META && dst->device == CT_CPU)
        return c10_error_int("copy_: Cannot copy out of meta tensor; no data!");
    if (!at_same_device("copy_", dst, src)) return -1;
    double es = (double)c10_elsize[dst->dtype];
    ElementwiseSpec spec = {"copy_", 1, dst->dtype, dst->dtype, dst->dtype, 0};
    TensorImpl *in[1] = {(TensorImpl *)src}, *o = dst;
    if (src->ndim == dst->ndim && !memcmp(src->sizes, dst->sizes, sizeof(int64_t) * (size_t)src->ndim) &&
        copy_transposed(dst, src))
        return 0;
    return ew_run(&spec, in, &o, copy_kernel, &es);
}
