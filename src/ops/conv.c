/* conv.c: the convolution and pooling rows of ops.def.
 *
 * Convolution (conv1d is conv2d with a height of 1) runs as im2col + gemm per
 * batch element and group: col[C/g*kh*kw, Ho*Wo] gathers the input windows,
 * then out[n, g] = W[g] @ col. The batch is spread over OpenMP threads, each
 * with its own col buffer and a single-threaded BLAS gemm (a single sample
 * runs serially with BLAS's own threads); 1x1 kernels with unit stride and no
 * padding skip im2col (float32 strides of 2 or more gather it through a
 * table of offsets). The backward passes are ops too, so that they can be
 * differentiated again:
 *   conv_backward_input:  col = W[g]^T @ grad, then col2im (scatter-add);
 *   conv_backward_weight: grad @ col^T summed over the batch (per-thread
 *                         partial sums added in thread order: deterministic
 *                         for a given thread count).
 * Stride-1 3x3 convolutions with one group and 8 or more channels each way,
 * in float32/float64, run the forward and the input gradient as Winograd
 * F(4x4, 3x3) instead (36 gemms over blocks of 64 tiles; inputs with inf or
 * NaN take im2col).
 * Everything computes in float32 (float16, bfloat16), float64 or int64
 * (integers), on contiguous copies in that dtype.
 *
 * Pooling: max_pool2d (values and int64 indices into each H*W plane, as
 * PyTorch's), avg_pool2d and adaptive_avg_pool2d, with their backward ops. */
#include "ops/ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
#endif


static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* ================================================================ geometry */

/* Convolution parameters, normalised to two spatial dims (conv1d: height 1). */
typedef struct {
    int nsp;                    /* 1 or 2 spatial dims */
    int64_t sh, sw, ph, pw, dh, dw, groups;
    bool batched;
    int64_t N, C, H, W;         /* input */
    int64_t O, Cg, kh, kw;      /* weight */
    int64_t Ho, Wo;             /* output */
} ConvGeo;

static const char *conv_name(int nsp) { return nsp == 1 ? "conv1d" : "conv2d"; }

/* i: nsp, stride[2], padding[2], dilation[2], groups (conv1d uses entry 1 of each) */
static void conv_params(const int64_t *i, ConvGeo *g) {
    g->nsp = (int)i[0];
    g->sh = i[1], g->sw = i[2], g->ph = i[3], g->pw = i[4], g->dh = i[5], g->dw = i[6], g->groups = i[7];
    if (g->nsp == 1) g->sh = 1, g->ph = 0, g->dh = 1;
}

static void fill_geo_sizes(ConvGeo *g, const int64_t *xs, int xnd, const int64_t *ws) {
    /* xs: the batched form [N, C, (H,) W] */
    g->N = xs[0];
    g->C = xs[1];
    g->H = g->nsp == 2 ? xs[2] : 1;
    g->W = xs[xnd - 1];
    g->O = ws[0], g->Cg = ws[1];
    g->kh = g->nsp == 2 ? ws[2] : 1;
    g->kw = ws[g->nsp + 1];
    g->Ho = (g->H + 2 * g->ph - g->dh * (g->kh - 1) - 1) / g->sh + 1;
    g->Wo = (g->W + 2 * g->pw - g->dw * (g->kw - 1) - 1) / g->sw + 1;
}

/* torch 1.13's use_mkldnn for a float32 convolution with a dilation other
 * than 1 (xs: the batched input sizes); mkldnn words a bad dilation its own way */
static bool torch_mkldnn(const TensorImpl *x, const TensorImpl *w, const int64_t *xs, int nsp, int64_t groups) {
    int64_t kh = nsp == 2 && w->ndim >= 2 ? w->sizes[w->ndim - 2] : 1, kw = w->ndim ? w->sizes[w->ndim - 1] : 1;
    int64_t chw = xs[1] * xs[2] * (nsp == 2 ? xs[3] : 1);
    return x->dtype == CT_FLOAT32 && (groups > 1 || (kh > 3 && kw > 3) || xs[0] > 1 || xs[0] * chw > 20480);
}

/* PyTorch's checks for conv1d/conv2d(input, weight, bias), in its order. */
static int conv_check(const int64_t *i, const TensorImpl *x, const TensorImpl *w, const TensorImpl *b, ConvGeo *g) {
    conv_params(i, g);
    const char *op = conv_name(g->nsp);
    int nsp = g->nsp;
    if (nsp != 1 && nsp != 2) return c10_error_int("convolution: %d spatial dims are not supported", nsp);
    if (nsp == 2 && b && b->dtype != x->dtype) /* torch's conv2d looks at the bias's type first */
        return c10_error_int("%s: Input type (%s) and bias type (%s) should be the same", op,
                             c10_dtype_cpp_name(x->dtype), c10_dtype_cpp_name(b->dtype));
    if (x->ndim != nsp + 1 && x->ndim != nsp + 2)
        return c10_error_int("%s: Expected %dD (unbatched) or %dD (batched) input to %s, but got input of size: %s", op,
                             nsp + 1, nsp + 2, op, c10_shape_str(x->sizes, x->ndim));
    g->batched = x->ndim == nsp + 2;
    int64_t xs[CT_MAX_DIMS];
    int xnd = nsp + 2;
    if (g->batched) memcpy(xs, x->sizes, sizeof(int64_t) * (size_t)xnd);
    else {
        xs[0] = 1;
        memcpy(xs + 1, x->sizes, sizeof(int64_t) * (size_t)(xnd - 1));
    }
    int k = w->ndim - 2;
    if (g->groups <= 0) return c10_error_int("%s: non-positive groups is not supported", op);
    if (nsp == 2 && k != 2) /* conv2d's 2-element parameters against a weight of another rank */
        return c10_error_int("%s: expected stride to be a single integer value or a list of %d values to match the "
                             "convolution dimensions, but got stride=[%lld, %lld]",
                             op, k, (long long)i[1], (long long)i[2]);
    if ((nsp == 2 && (i[3] < 0 || i[4] < 0)) || (nsp == 1 && i[4] < 0))
        return c10_error_int("%s: negative padding is not supported", op);
    if ((nsp == 2 && (i[1] <= 0 || i[2] <= 0)) || (nsp == 1 && i[2] <= 0))
        return c10_error_int("%s: non-positive stride is not supported", op);
    if (w->ndim != xnd)
        return c10_error_int("%s: Expected %d-dimensional input for %d-dimensional weight %s, but got %d-dimensional "
                             "input of size %s instead",
                             op, w->ndim, w->ndim, c10_shape_str(w->sizes, w->ndim), xnd, c10_shape_str(xs, xnd));
    if (w->sizes[0] < g->groups)
        return c10_error_int("%s: Given groups=%lld, expected weight to be at least %lld at dimension 0, but got weight "
                             "of size %s instead",
                             op, (long long)g->groups, (long long)g->groups, c10_shape_str(w->sizes, w->ndim));
    if (w->sizes[0] % g->groups)
        return c10_error_int("%s: Given groups=%lld, expected weight to be divisible by %lld at dimension 0, but got "
                             "weight of size [%s] instead",
                             op, (long long)g->groups, (long long)g->groups, c10_shape_str(w->sizes, w->ndim));
    if (xs[1] != w->sizes[1] * g->groups)
        return c10_error_int("%s: Given groups=%lld, weight of size %s, expected input%s to have %lld channels, but got "
                             "%lld channels instead",
                             op, (long long)g->groups, c10_shape_str(w->sizes, w->ndim), c10_shape_str(xs, xnd),
                             (long long)(w->sizes[1] * g->groups), (long long)xs[1]);
    if (b && (b->ndim != 1 || b->sizes[0] != w->sizes[0]))
        return c10_error_int("%s: Given weight of size %s, expected bias to be 1-dimensional with %lld elements, but "
                             "got bias of size %s instead",
                             op, c10_shape_str(w->sizes, w->ndim), (long long)w->sizes[0],
                             c10_shape_str(b->sizes, b->ndim));
    fill_geo_sizes(g, xs, xnd, w->sizes);
    int64_t in[2] = {g->H + 2 * g->ph, g->W + 2 * g->pw};
    int64_t ker[2] = {g->dh * (g->kh - 1) + 1, g->dw * (g->kw - 1) + 1};
    if (in[0] < ker[0] || in[1] < ker[1]) {
        if (nsp == 2)
            return c10_error_int("%s: Calculated padded input size per channel: (%lld x %lld). Kernel size: (%lld x "
                                 "%lld). Kernel size can't be greater than actual input size",
                                 op, (long long)in[0], (long long)in[1], (long long)ker[0], (long long)ker[1]);
        return c10_error_int("%s: Calculated padded input size per channel: (%lld). Kernel size: (%lld). Kernel size "
                             "can't be greater than actual input size",
                             op, (long long)in[1], (long long)ker[1]);
    }
    if (nsp == 1 && b && b->dtype != x->dtype && torch_mkldnn(x, w, xs, nsp, g->groups)) /* mkldnn's words */
        return c10_error_int("%s: Input type (%s) and bias type (%s) should be the same or "
                             "input should be a MKLDNN tensor and bias is a dense tensor", op,
                             c10_dtype_legacy_name(x->dtype), c10_dtype_legacy_name(b->dtype));
    if ((nsp == 2 && i[5] <= 0) || i[6] <= 0) { /* the backend's check, after the shapes (torch: conv1d runs
                                                   as conv2d of dilation [1, d]) */
        if (torch_mkldnn(x, w, xs, nsp, g->groups))
            return c10_error_int("%s: non-positive dilation is not supported", op);
        return c10_error_int("%s: dilation should be greater than zero, but got [%lld, %lld]", op,
                             (long long)(nsp == 2 ? i[5] : 1), (long long)i[6]);
    }
    if (!at_same_device(op, x, w) || (b && !at_same_device(op, x, b))) return -1;
    /* torch's backend selection: inputs of no elements only with a zero batch or
     * channel count (after the bias's type, before the weight's) */
    bool empty_plane = xs[0] && xs[1] && g->H * g->W == 0;
    if (x->dtype != w->dtype && !empty_plane)
        return c10_error_int("%s: expected scalar type %s but found %s", op, c10_dtype_cname(x->dtype),
                             c10_dtype_cname(w->dtype));
    if (b && b->dtype != x->dtype)
        return c10_error_int("%s: Input type (%s) and bias type (%s) should be the same", op, c10_dtype_cpp_name(x->dtype),
                             c10_dtype_cpp_name(b->dtype));
    if (empty_plane) /* conv1d as torch's conv2d: [N, C, 1, L] */
        return c10_error_int("%s: Only zero batch or zero channel inputs are supported, but got input shape: [%lld, "
                             "%lld, %lld, %lld]", op, (long long)xs[0], (long long)xs[1], (long long)g->H,
                             (long long)g->W);
    if (x->dtype == CT_BOOL) return c10_error_int("%s: \"slow_conv2d_cpu\" not implemented for 'Bool'", op);
    if (g->kh <= 0 || g->kw <= 0)
        return c10_error_int("%s: kernel size should be greater than zero, but got kernel_height: %lld kernel_width: "
                             "%lld",
                             op, (long long)g->kh, (long long)g->kw);
    return 0;
}

/* The output shape of a convolution: [N,] O, (Ho,) Wo. */
static int conv_out_shape(const ConvGeo *g, int64_t *s) {
    int n = 0;
    if (g->batched) s[n++] = g->N;
    s[n++] = g->O;
    if (g->nsp == 2) s[n++] = g->Ho;
    s[n++] = g->Wo;
    return n;
}

/* ================================================================ kernels */

#if defined(__AVX512F__)
/* An im2col row of float32 with stride 1 or 2: dst[ow] = row[ow * sw + woff]
 * for ow < Wo, 0 outside [0, W), 16 at a time by masked loads (a stride of 2:
 * the even lanes of two). The compiler's loops ran rows of 14 (a stride-2
 * layer's) one vector and six scalars. */
static bool im2col_row_f32(float *dst, const float *row, int64_t woff, int64_t sw, int64_t Wo, int64_t W) {
    if (sw > 2) return false;
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    for (int64_t ow = 0; ow < Wo; ow += 16) {
        int64_t i0 = ow * sw + woff, lo = i0 < 0 ? -i0 : 0, hi = W - i0; /* valid lanes [lo, hi) */
        hi = hi > 16 * sw ? 16 * sw : hi;
        uint64_t m = hi > lo ? (~0ull >> (64 - hi)) & (~0ull << lo) : 0;
        __m512 v = _mm512_maskz_loadu_ps((__mmask16)m, row + i0);
        if (sw == 2) v = _mm512_permutex2var_ps(v, even, _mm512_maskz_loadu_ps((__mmask16)(m >> 16), row + i0 + 16));
        int64_t n = Wo - ow < 16 ? Wo - ow : 16;
        _mm512_mask_storeu_ps(dst + ow, (__mmask16)(0xffffu >> (16 - n)), v);
    }
    return true;
}
#else
#define im2col_row_f32(dst, row, woff, sw, Wo, W) false
#endif
#define im2col_row_plain(dst, row, woff, sw, Wo, W) false

/* im2col of one [Cg, H, W] plane group into col [Cg*kh*kw, Ho*Wo]; col2im adds back. */
#define IM2COL(SUF, T, ROW)                                                                                 \
    static void im2col_##SUF(const T *restrict x, T *restrict col, const ConvGeo *g) {                    \
        int64_t HW = g->Ho * g->Wo;                                                                        \
        for (int64_t c = 0; c < g->Cg; c++)                                                                \
            for (int64_t ki = 0; ki < g->kh; ki++)                                                         \
                for (int64_t kj = 0; kj < g->kw; kj++) {                                                   \
                    T *restrict dst = col + ((c * g->kh + ki) * g->kw + kj) * HW;                          \
                    const T *src = x + c * g->H * g->W;                                                    \
                    int64_t woff = kj * g->dw - g->pw;                                                     \
                    /* valid ow: 0 <= ow*sw + woff < W */                                                  \
                    int64_t ow0 = woff >= 0 ? 0 : (-woff + g->sw - 1) / g->sw;                             \
                    int64_t ow1 = g->W - woff <= 0 ? 0 : (g->W - woff - 1) / g->sw + 1;                    \
                    if (ow1 > g->Wo) ow1 = g->Wo;                                                          \
                    if (ow0 > ow1) ow0 = ow1;                                                              \
                    for (int64_t oh = 0; oh < g->Ho; oh++, dst += g->Wo) {                                 \
                        int64_t ih = oh * g->sh - g->ph + ki * g->dh;                                      \
                        if (ih < 0 || ih >= g->H) {                                                        \
                            for (int64_t ow = 0; ow < g->Wo; ow++) dst[ow] = 0;                            \
                            continue;                                                                      \
                        }                                                                                  \
                        if (ROW(dst, src + ih * g->W, woff, g->sw, g->Wo, g->W)) continue;                 \
                        const T *row = src + ih * g->W + woff;                                             \
                        for (int64_t ow = 0; ow < ow0; ow++) dst[ow] = 0;                                  \
                        if (g->sw == 1)                                                                    \
                            for (int64_t ow = ow0; ow < ow1; ow++) dst[ow] = row[ow];                      \
                        else                                                                               \
                            for (int64_t ow = ow0; ow < ow1; ow++) dst[ow] = row[ow * g->sw];              \
                        for (int64_t ow = ow1; ow < g->Wo; ow++) dst[ow] = 0;                              \
                    }                                                                                      \
                }                                                                                          \
    }                                                                                                      \
    static void col2im_##SUF(const T *restrict col, T *restrict x, const ConvGeo *g) {                    \
        int64_t HW = g->Ho * g->Wo;                                                                        \
        for (int64_t c = 0; c < g->Cg; c++)                                                                \
            for (int64_t ki = 0; ki < g->kh; ki++)                                                         \
                for (int64_t kj = 0; kj < g->kw; kj++) {                                                   \
                    const T *restrict src = col + ((c * g->kh + ki) * g->kw + kj) * HW;                    \
                    T *dst = x + c * g->H * g->W;                                                          \
                    int64_t woff = kj * g->dw - g->pw;                                                     \
                    int64_t ow0 = woff >= 0 ? 0 : (-woff + g->sw - 1) / g->sw;                             \
                    int64_t ow1 = g->W - woff <= 0 ? 0 : (g->W - woff - 1) / g->sw + 1;                    \
                    if (ow1 > g->Wo) ow1 = g->Wo;                                                          \
                    for (int64_t oh = 0; oh < g->Ho; oh++, src += g->Wo) {                                 \
                        int64_t ih = oh * g->sh - g->ph + ki * g->dh;                                      \
                        if (ih < 0 || ih >= g->H) continue;                                                \
                        T *row = dst + ih * g->W + woff;                                                   \
                        for (int64_t ow = ow0; ow < ow1; ow++) row[ow * g->sw] += src[ow];                 \
                    }                                                                                      \
                }                                                                                          \
    }
IM2COL(f32, float, im2col_row_f32)
IM2COL(f64, double, im2col_row_plain)
IM2COL(i64, int64_t, im2col_row_plain)

#if defined(__AVX512F__)
/* A float32 im2col by gathers, for strides of 2 and more: off[(ki kw + kj)
 * Ho Wo + oh Wo + ow] is the input's offset ih W + iw in its plane, -1 in the
 * padding, so that a channel's kh kw Ho Wo column values are one flat gather
 * of its plane. The rows of 14 of a stride-2 layer took 20 cycles each by
 * masked loads and a permute (27% of a [32,32,28,28] 3x3 forward; 16% now,
 * 1.24 -> 1.04 ms). Stride-1 rows are contiguous: loads serve them as well. */
static int32_t *im2col_table(const ConvGeo *g) {
    int64_t HW = g->Ho * g->Wo, n = g->kh * g->kw * HW;
    int32_t *off = g->H * g->W <= INT32_MAX ? malloc((size_t)n * sizeof *off) : NULL;
    for (int64_t k = 0; off && k < g->kh * g->kw; k++)
        for (int64_t m = 0; m < HW; m++) {
            int64_t ih = m / g->Wo * g->sh - g->ph + k / g->kw * g->dh;
            int64_t iw = m % g->Wo * g->sw - g->pw + k % g->kw * g->dw;
            off[k * HW + m] = ih < 0 || ih >= g->H || iw < 0 || iw >= g->W ? -1 : (int32_t)(ih * g->W + iw);
        }
    return off;
}
static void im2col_gather_f32(const float *x, float *restrict col, const int32_t *off, const ConvGeo *g) {
    int64_t n = g->kh * g->kw * g->Ho * g->Wo;
    for (int64_t c = 0; c < g->Cg; c++, col += n) {
        const float *base = x + c * g->H * g->W;
        for (int64_t m = 0; m < n; m += 16) {
            __mmask16 t = n - m >= 16 ? 0xffff : (__mmask16)((1u << (n - m)) - 1);
            __m512i idx = _mm512_maskz_loadu_epi32(t, off + m);
            __mmask16 in = _mm512_mask_cmpge_epi32_mask(t, idx, _mm512_setzero_si512());
            _mm512_mask_storeu_ps(col + m, t, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, idx, base, 4));
        }
    }
}
#else
static int32_t *im2col_table(const ConvGeo *g) { return (void)g, NULL; }
#define im2col_gather_f32(x, col, off, g) ((void)0)
#endif

/* y[r, :n] = b[r] for r < rows: the bias under a gemm with beta 1 */
#define FILL_ROWS(SUF, T)                                                                                 \
    static void fill_rows_##SUF(T *restrict y, const T *restrict b, int64_t rows, int64_t n) {            \
        for (int64_t r = 0; r < rows; r++)                                                                 \
            for (int64_t j = 0; j < n; j++) y[r * n + j] = b[r];                                           \
    }
FILL_ROWS(f32, float)
FILL_ROWS(f64, double)
FILL_ROWS(i64, int64_t)

static void im2col(ct_dtype cd, const void *x, void *col, const ConvGeo *g) {
    switch (cd) {
    case CT_FLOAT32: im2col_f32(x, col, g); break;
    case CT_FLOAT64: im2col_f64(x, col, g); break;
    default: im2col_i64(x, col, g); break;
    }
}
static void fill_rows(ct_dtype cd, void *y, const void *b, int64_t rows, int64_t n) {
    switch (cd) {
    case CT_FLOAT32: fill_rows_f32(y, b, rows, n); break;
    case CT_FLOAT64: fill_rows_f64(y, b, rows, n); break;
    default: fill_rows_i64(y, b, rows, n); break;
    }
}
static void col2im(ct_dtype cd, const void *col, void *x, const ConvGeo *g) {
    switch (cd) {
    case CT_FLOAT32: col2im_f32(col, x, g); break;
    case CT_FLOAT64: col2im_f64(col, x, g); break;
    default: col2im_i64(col, x, g); break;
    }
}

static bool is_pointwise(const ConvGeo *g) {
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* Contiguous copy of t in dtype cd (a new reference; t itself when it already is). */
static TensorImpl *in_compute(const TensorImpl *t, ct_dtype cd) {
    if (t->dtype == cd) return at_contiguous(t);
    TensorImpl *o = c10_empty(t->sizes, t->ndim, cd, t->device);
    if (o && at_copy_(o, t) < 0) {
        c10_release(o);
        return NULL;
    }
    return o;
}

/* A kernel on contiguous copies of its inputs (in[k]: NULL for a NULL input),
 * writing the result into a contiguous compute-dtype buffer. */
typedef int (*ComputeFn)(ct_dtype cd, void *const *in, void *out, const void *arg);

/* The frame every conv and pool op shares: out (made by the caller with the
 * result's dtype and shape; zeros where the kernel accumulates, zero set) is
 * computed by fn from contiguous copies of ts[0..n) in dtype cd (those whose
 * bit is set in keep: in their own dtype), into out itself when its dtype is
 * cd, else into a cd buffer copied back. Returns out, or NULL (out released). */
static TensorImpl *run_compute(TensorImpl *out, ct_dtype cd, const TensorImpl *const *ts, int n, unsigned keep,
                               bool zero, ComputeFn fn, const void *arg) {
    if (!out || out->device == CT_META || out->numel == 0) return out;
    TensorImpl *c[OP_MAX_TENSORS] = {NULL}, *o = NULL;
    void *in[OP_MAX_TENSORS] = {NULL};
    int k = 0, rc = -1;
    for (; k < n; k++) {
        if (!ts[k]) continue;
        if (!(c[k] = in_compute(ts[k], keep >> k & 1 ? ts[k]->dtype : cd))) break;
        in[k] = c10_data(c[k]);
    }
    if (k == n)
        o = cd == out->dtype ? c10_retain(out)
            : zero           ? c10_full(out->sizes, out->ndim, 0, cd, out->device)
                             : c10_empty(out->sizes, out->ndim, cd, out->device);
    if (o) rc = fn(cd, in, c10_data(o), arg);
    if (!rc && o != out) rc = at_copy_(out, o);
    for (k = 0; k < n; k++) c10_release(c[k]);
    c10_release(o);
    if (rc) {
        c10_release(out);
        return NULL;
    }
    return out;
}

/* Whether the work (multiply-adds) is worth waking the other threads for. */
static bool worth_threads(const ConvGeo *g) {
    double macs = (double)g->N * (double)g->O * (double)(g->Ho * g->Wo) * (double)(g->Cg * g->kh * g->kw);
    return c10_free_threads() > 1 && macs >= 262144.0;
}

/* Which samples run in parallel: all of them over threads when there are several. */
static bool batch_parallel(const ConvGeo *g) { return g->N > 1 && worth_threads(g); }

/* ------------------------------------------------- Winograd F(4x4, 3x3)
 * A stride-1 3x3 convolution (one group, no dilation) in float32/float64 runs
 * as Winograd's F(4x4, 3x3) (Lavin & Gray, 2015): each 4x4 tile of an output
 * plane is A^T [sum_c (G g G^T) . (B^T d B)] A, d the 6x6 input tile around it
 * and g the 3x3 kernel of (o, c). The channel sums are 36 gemms, one per
 * position e of the 6x6 transformed tile, M[e][O, tiles] = U[e][O, C] @
 * V[e][C, tiles]: 36 multiplies per 16 outputs instead of 144.
 *
 * Rounding: the interpolation points are 0, 1, -1, 1/2, -2 (with 2 in place
 * of 1/2 the error is 2-3 times larger), U is computed in double and rounded
 * once, and the gemms sum the channels in blocks of WINO_KB, each block's sum
 * added to the others (the error then grows with the block, not with C). In
 * float32 the largest error is a few 1e-6 of the largest |output| (it is
 * 1e-7 for a direct sum). The input gradient is the same convolution of
 * grad_output with the weight transposed and flipped, and padding 2 - p.
 *
 * The tiles of all the samples are numbered flat (sample, tile row, tile
 * column) and cut into blocks of WINO_T, spread over the threads: a block's
 * 6x6 inputs are gathered lane-wise (d[36][WINO_T] per channel) so that both
 * transforms are plain vector arithmetic over the block's tiles. */
#define WINO_T 64  /* tiles per block (the lanes of the transforms and of the gemm rows) */
#define WINO_OB 24 /* output channels per pass of the gemms and the output transform */
#define WINO_KB 64 /* input channels per partial sum */

typedef struct {
    int64_t N, C, H, W, O, Ho, Wo, ph, pw; /* as run: C input and O output channels */
    bool flip;                              /* weight [C, O, 3, 3], transposed and flipped */
    int64_t th, tw;                         /* tiles per plane: ceil(Ho / 4) x ceil(Wo / 4) */
} Wino;

/* A run of a block's tiles along one tile row: tiles (i, j .. j + len) of sample n, at lane `at`. */
typedef struct {
    int64_t n, i, j, len, at;
} WinoSeg;

static int wino_segments(const Wino *q, int64_t t0, int64_t t1, WinoSeg *s) {
    int ns = 0;
    int64_t P = q->th * q->tw;
    for (int64_t t = t0; t < t1; ns++) {
        int64_t r = t % P, j = r % q->tw, len = q->tw - j < t1 - t ? q->tw - j : t1 - t;
        s[ns] = (WinoSeg){t / P, r / q->tw, j, len, t - t0};
        t += len;
    }
    return ns;
}

/* G: the kernel transform (rows: the points 0, 1, -1, 1/2, -2, infinity) */
static const double wino_G[6][3] = {{1, 0, 0},
                                    {1.0 / 3, 1.0 / 3, 1.0 / 3},
                                    {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                                    {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                                    {1.0 / 15, -2.0 / 15, 4.0 / 15},
                                    {0, 0, 1}};

/* u[36][WINO_T] = G g G^T in double for the WINO_T kernels g[9][WINO_T] (lanes) */
static void wino_kernels(const double *restrict g, double *restrict u) {
    for (int k = 0; k < WINO_T; k++) {
        double t[6][3];
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 3; j++)
                t[i][j] = wino_G[i][0] * g[j * WINO_T + k] + wino_G[i][1] * g[(3 + j) * WINO_T + k] +
                          wino_G[i][2] * g[(6 + j) * WINO_T + k];
        for (int i = 0; i < 6; i++)
            for (int m = 0; m < 6; m++)
                u[(6 * i + m) * WINO_T + k] = t[i][0] * wino_G[m][0] + t[i][1] * wino_G[m][1] + t[i][2] * wino_G[m][2];
    }
}

/* Copies and zero fills of a few hundred bytes (the rows of a run of tiles) without a call: masked
 * stores (which the compiler does not turn back into memcpy calls). */
#if defined(__AVX512BW__)
static inline __mmask64 first_bytes(size_t n) { return n >= 64 ? ~0ULL : ~0ULL >> (64 - n); }
#endif

static inline void copy_small(void *restrict dst, const void *restrict src, size_t n) {
#if defined(__AVX512BW__)
    char *d = dst;
    const char *s = src;
    for (size_t k = 0; k < n; k += 64)
        _mm512_mask_storeu_epi8(d + k, first_bytes(n - k), _mm512_maskz_loadu_epi8(first_bytes(n - k), s + k));
#else
    memcpy(dst, src, n);
#endif
}

static inline void zero_small(void *dst, size_t n) {
#if defined(__AVX512BW__)
    for (size_t k = 0; k < n; k += 64)
        _mm512_mask_storeu_epi8((char *)dst + k, first_bytes(n - k), _mm512_setzero_si512());
#else
    memset(dst, 0, n);
#endif
}

#define WINOGRAD(SUF, T, ATTR) /* ATTR: the non-inline functions' attributes */                            \
    /* U[36][O][C] = G g G^T for each kernel g of (o, c), WINO_T at a time in gu[45][WINO_T]; nonzero when a \
     * value is not finite */                                                                              \
    ATTR static int wino_weight_##SUF(const void *wv, void *Uv, double *gu, const Wino *q) {                    \
        const T *w = wv;                                                                                   \
        T *U = Uv;                                                                                         \
        int64_t OC = q->O * q->C;                                                                          \
        int bad = 0;                                                                                       \
        for (int64_t p0 = 0; p0 < OC; p0 += WINO_T) {                                                      \
            int64_t n = OC - p0 < WINO_T ? OC - p0 : WINO_T;                                               \
            for (int64_t l = 0; l < WINO_T; l++) {                                                         \
                int64_t o = (p0 + l) / q->C, c = (p0 + l) % q->C;                                          \
                for (int k = 0; k < 9; k++)                                                                \
                    gu[k * WINO_T + l] = l >= n ? 0 : q->flip ? (double)w[(c * q->O + o) * 9 + 8 - k]      \
                                                              : (double)w[(p0 + l) * 9 + k];               \
            }                                                                                              \
            wino_kernels(gu, gu + 9 * WINO_T);                                                             \
            for (int e = 0; e < 36; e++)                                                                   \
                for (int64_t l = 0; l < n; l++) {                                                          \
                    T v = (T)gu[(9 + e) * WINO_T + l];                                                     \
                    U[e * OC + p0 + l] = v;                                                                \
                    bad |= !(v - v == 0);                                                                  \
                }                                                                                          \
        }                                                                                                  \
        return bad;                                                                                        \
    }                                                                                                      \
    /* out[b * st + k] = (B^T d)[b] over the WINO_T lanes k, d[j] = in[j * st + k]; nonzero when an      \
     * output is not finite (when check). (st is a constant where it is called: the stores then do not  \
     * alias and the loop vectorises.) */                                                                 \
    static inline int wino_bt_##SUF(const T *restrict in, T *restrict out, int64_t st, bool check) {      \
        int bad = 0;                                                                                       \
        for (int k = 0; k < WINO_T; k++) {                                                                 \
            T d0 = in[k], d1 = in[st + k], d2 = in[2 * st + k], d3 = in[3 * st + k], d4 = in[4 * st + k];  \
            T d5 = in[5 * st + k];                                                                         \
            T v[6] = {d0 - (T)1.5 * d1 - 2 * d2 + (T)1.5 * d3 + d4, -d1 + (T)0.5 * d2 + (T)2.5 * d3 + d4,   \
                      d1 - (T)2.5 * d2 + (T)0.5 * d3 + d4,           -2 * d1 - d2 + 2 * d3 + d4,             \
                      (T)0.5 * d1 - d2 - (T)0.5 * d3 + d4,           d1 - (T)1.5 * d2 - 2 * d3 + (T)1.5 * d4 + d5}; \
            for (int b = 0; b < 6; b++) {                                                                  \
                out[b * st + k] = v[b];                                                                    \
                if (check) bad |= !(v[b] - v[b] == 0);                                                     \
            }                                                                                              \
        }                                                                                                  \
        return bad;                                                                                        \
    }                                                                                                      \
    /* out[s * os + k] = (A^T m)[s] over the WINO_T lanes k, m[b] = in[b * is + k] (is, os constants) */  \
    static inline void wino_at_##SUF(const T *restrict in, int64_t is, T *restrict out, int64_t os) {       \
        for (int k = 0; k < WINO_T; k++) {                                                                 \
            T m0 = in[k], m1 = in[is + k], m2 = in[2 * is + k], m3 = in[3 * is + k], m4 = in[4 * is + k];  \
            T m5 = in[5 * is + k], s = m1 + m2, d = m1 - m2;                                               \
            out[k] = m0 + s + m3 + m4, out[os + k] = d + (T)0.5 * m3 - 2 * m4;                             \
            out[2 * os + k] = s + (T)0.25 * m3 + 4 * m4, out[3 * os + k] = d + (T)0.125 * m3 - 8 * m4 + m5; \
        }                                                                                                  \
    }                                                                                                      \
    /* dst[k] = row[c0 + k] for k < n, 0 outside the row's W columns */                                   \
    ATTR static void wino_row_##SUF(const T *row, int64_t W, int64_t c0, T *restrict dst, int64_t n) {          \
        int64_t lo = c0 < 0 ? (-c0 < n ? -c0 : n) : 0, hi = W - c0 < n ? W - c0 : n;                       \
        if (hi < lo) hi = lo;                                                                              \
        zero_small(dst, (size_t)lo * sizeof(T));                                                           \
        if (hi > lo) copy_small(dst + lo, row + c0 + lo, (size_t)(hi - lo) * sizeof(T));                   \
        zero_small(dst + hi, (size_t)(n - hi) * sizeof(T));                                                \
    }                                                                                                      \
    /* V[C][36][WINO_T] = B^T d B for the block's tiles (runs s[0..ns)) of each channel of x; nonzero      \
     * when a value is not finite (an inf or NaN of x gives one). Each run's 6 padded input rows go into   \
     * R[6][4 * WINO_T + 2], tile k's columns 4k .. 4k + 3 (its last 2 columns are the next tile's first   \
     * ones; a run's last tile keeps them in hal), from which d[6][6][WINO_T] is de-interleaved. */        \
    ATTR static int wino_input_##SUF(const void *xv, void *Vv, const WinoSeg *s, int ns, void *scratch, const Wino *q) { \
        const T *x = xv;                                                                                   \
        const int64_t RW = 4 * WINO_T + 2;                                                                 \
        T *V = Vv, *d = scratch, *t = d + 36 * WINO_T, *R = t + 36 * WINO_T, *hal = R + 6 * RW;            \
        int bad = 0;                                                                                       \
        memset(R, 0, (size_t)(6 * RW) * sizeof(T)); /* lanes past the block's tiles: finite */             \
        for (int64_t c = 0; c < q->C; c++) {                                                               \
            for (int k = 0; k < ns; k++) {                                                                 \
                const WinoSeg *g = s + k;                                                                  \
                int64_t wd = 4 * g->len + 2;                                                               \
                for (int r = 0; r < 6; r++) {                                                              \
                    int64_t ih = 4 * g->i + r - q->ph;                                                     \
                    T *dst = R + r * RW + 4 * g->at;                                                       \
                    if (ih < 0 || ih >= q->H) zero_small(dst, (size_t)wd * sizeof(T));                     \
                    else {                                                                                 \
                        const T *row = x + ((g->n * q->C + c) * q->H + ih) * q->W;                         \
                        wino_row_##SUF(row, q->W, 4 * g->j - q->pw, dst, wd);                              \
                        if (c + 1 < q->C) /* the next channel's row: its loads are the transform's stalls */ \
                            for (int64_t w = 4 * g->j; w < 4 * g->j + wd && w < q->W; w += 64 / sizeof(T)) \
                                __builtin_prefetch(row + q->H * q->W + w);                                 \
                    }                                                                                      \
                    hal[2 * (r * WINO_T + k)] = dst[wd - 2], hal[2 * (r * WINO_T + k) + 1] = dst[wd - 1];  \
                }                                                                                          \
            }                                                                                              \
            for (int r = 0; r < 6; r++) {                                                                  \
                const T *src = R + r * RW;                                                                 \
                T *dr = d + 6 * r * WINO_T;                                                                \
                for (int k = 0; k < WINO_T; k++)                                                           \
                    for (int p = 0; p < 4; p++) dr[p * WINO_T + k] = src[4 * k + p];                       \
                copy_small(dr + 4 * WINO_T, dr + 1, (WINO_T - 1) * sizeof(T));                             \
                copy_small(dr + 5 * WINO_T, dr + WINO_T + 1, (WINO_T - 1) * sizeof(T));                    \
                dr[5 * WINO_T - 1] = dr[6 * WINO_T - 1] = 0;                                               \
                for (int k = 0; k < ns; k++) {                                                             \
                    int64_t l = s[k].at + s[k].len - 1;                                                    \
                    dr[4 * WINO_T + l] = hal[2 * (r * WINO_T + k)];                                        \
                    dr[5 * WINO_T + l] = hal[2 * (r * WINO_T + k) + 1];                                    \
                }                                                                                          \
                wino_bt_##SUF(dr, t + 6 * r * WINO_T, WINO_T, false); /* t[r] = d[r] B, along tile row r */ \
            }                                                                                              \
            for (int b = 0; b < 6; b++) /* V[c][a][b] = (B^T t)[a][b]: down the columns */                 \
                bad |= wino_bt_##SUF(t + b * WINO_T, V + (36 * c + b) * WINO_T, 6 * WINO_T, true);         \
        }                                                                                                  \
        return bad;                                                                                        \
    }                                                                                                      \
    /* y[n, o0 + o] = A^T M A (+ bias) for the output channels o < ob of the block's tiles, M[ob][36][T]:  \
     * z[4][4][WINO_T] interleaved into Z[4][4 * WINO_T], output rows of the tiles side by side. */        \
    ATTR static void wino_output_##SUF(const void *Mv, int64_t ob, int64_t o0, const WinoSeg *s, int ns,        \
                                  const void *bv, void *yv, void *scratch, const Wino *q) {                \
        const T *M = Mv, *bias = bv;                                                                       \
        T *y = yv, *t = scratch, *z = t + 24 * WINO_T, *Z = z + 16 * WINO_T;                               \
        for (int64_t o = 0; o < ob; o++) {                                                                 \
            for (int a = 0; a < 6; a++) /* t[a][s] = (m[a] A)[s] */                                        \
                wino_at_##SUF(M + (36 * o + 6 * a) * WINO_T, WINO_T, t + 4 * a * WINO_T, WINO_T);          \
            for (int c = 0; c < 4; c++) /* z[r][c] = (A^T t)[r][c] */                                      \
                wino_at_##SUF(t + c * WINO_T, 4 * WINO_T, z + c * WINO_T, 4 * WINO_T);                     \
            T b = bias ? bias[o0 + o] : 0;                                                                 \
            for (int r = 0; r < 4; r++)                                                                    \
                for (int k = 0; k < WINO_T; k++)                                                           \
                    for (int c = 0; c < 4; c++) Z[r * 4 * WINO_T + 4 * k + c] = z[(4 * r + c) * WINO_T + k] + b; \
            for (int k = 0; k < ns; k++) {                                                                 \
                const WinoSeg *g = s + k;                                                                  \
                int64_t w0 = 4 * g->j, nw = q->Wo - w0 < 4 * g->len ? q->Wo - w0 : 4 * g->len;             \
                for (int64_t r = 0; r < 4 && 4 * g->i + r < q->Ho; r++)                                    \
                    copy_small(y + ((g->n * q->O + o0 + o) * q->Ho + 4 * g->i + r) * q->Wo + w0,           \
                               Z + r * 4 * WINO_T + 4 * g->at, (size_t)nw * sizeof(T));                    \
            }                                                                                              \
        }                                                                                                  \
    }
WINOGRAD(f32, float, )
WINOGRAD(f64, double, COLD_CODE) /* float64: for gradcheck more than for speed (6 KB less) */

static const struct {
    int (*weight)(const void *w, void *U, double *gu, const Wino *q);
    int (*input)(const void *x, void *V, const WinoSeg *s, int ns, void *scratch, const Wino *q);
    void (*output)(const void *M, int64_t ob, int64_t o0, const WinoSeg *s, int ns, const void *bias, void *y,
                   void *scratch, const Wino *q);
} wino_fn[2] = {{wino_weight_f32, wino_input_f32, wino_output_f32}, {wino_weight_f64, wino_input_f64, wino_output_f64}};

#if defined(__AVX512F__)
/* M[r * ldm + 0..64) = sum_{c < K} U[r * ldu + c] V[c * ldv + 0..64) for R rows (add: added to M), the
 * sums in registers. */
static inline __attribute__((always_inline)) void wino_rows_f32(int R, const float *restrict U, int64_t ldu,
                                                                 const float *restrict V, int64_t ldv, int64_t K,
                                                                 float *restrict M, int64_t ldm, bool add) {
    __m512 acc[6][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 4; j++) acc[r][j] = _mm512_setzero_ps();
    for (int64_t c = 0; c < K; c++) {
        const float *v = V + c * ldv;
        __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16), v2 = _mm512_loadu_ps(v + 32);
        __m512 v3 = _mm512_loadu_ps(v + 48);
        for (int r = 0; r < R; r++) {
            __m512 u = _mm512_set1_ps(U[r * ldu + c]);
            acc[r][0] = _mm512_fmadd_ps(u, v0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(u, v1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(u, v2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(u, v3, acc[r][3]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 4; j++) {
            float *m = M + r * ldm + 16 * j;
            _mm512_storeu_ps(m, add ? _mm512_add_ps(_mm512_loadu_ps(m), acc[r][j]) : acc[r][j]);
        }
}

static void wino_rows_f32_n(int R, const float *U, int64_t ldu, const float *V, int64_t ldv, int64_t K, float *M,
                            int64_t ldm, bool add) {
    switch (R) { /* a register block of each height */
    case 1: wino_rows_f32(1, U, ldu, V, ldv, K, M, ldm, add); break;
    case 2: wino_rows_f32(2, U, ldu, V, ldv, K, M, ldm, add); break;
    case 3: wino_rows_f32(3, U, ldu, V, ldv, K, M, ldm, add); break;
    case 4: wino_rows_f32(4, U, ldu, V, ldv, K, M, ldm, add); break;
    case 5: wino_rows_f32(5, U, ldu, V, ldv, K, M, ldm, add); break;
    default: wino_rows_f32(6, U, ldu, V, ldv, K, M, ldm, add); break;
    }
}
#endif

/* M[0..ob)[e][T] = U[e][o0..o0 + ob)[C] @ V[C][e][T] for the 36 positions e, the channels summed in
 * blocks of WINO_KB. */
static int wino_gemm(ct_dtype cd, const char *U, const char *V, char *M, int64_t o0, int64_t ob, const Wino *q) {
    int64_t es = (int64_t)c10_elsize[cd], C = q->C;
    int fail = 0;
    for (int e = 0; e < 36; e++)
        for (int64_t k0 = 0; k0 < C; k0 += WINO_KB) {
            int64_t kc = C - k0 < WINO_KB ? C - k0 : WINO_KB;
            const char *u = U + ((e * q->O + o0) * C + k0) * es, *v = V + (36 * k0 + e) * WINO_T * es;
            char *m = M + e * WINO_T * es;
#if defined(__AVX512F__)
            if (cd == CT_FLOAT32) {
                for (int64_t r = 0; r < ob; r += 6)
                    wino_rows_f32_n(ob - r < 6 ? (int)(ob - r) : 6, (const float *)u + r * C, C, (const float *)v,
                                    36 * WINO_T, kc, (float *)m + 36 * r * WINO_T, 36 * WINO_T, k0 > 0);
                continue;
            }
#endif
            fail |= la_gemm(cd, ob, WINO_T, kc, 1, u, C, 1, v, 36 * WINO_T, 1, k0 ? 1 : 0, m, 36 * WINO_T) < 0;
        }
    return fail;
}

/* Whether a convolution (input_grad: its input gradient) takes the Winograd
 * path: enough channels both ways for the gemms to dominate the transforms;
 * the input gradient's own padding, 2 - p, must not be negative. (The weight
 * gradient stays with im2col: through Winograd's transforms its small
 * entries lose more precision than training against torch tolerates.) */
static bool use_winograd(ct_dtype cd, const ConvGeo *g, bool input_grad) {
    return (cd == CT_FLOAT32 || cd == CT_FLOAT64) && g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 &&
           g->dh == 1 && g->dw == 1 && g->groups == 1 && g->C >= 8 && g->O >= 8 &&
           (!input_grad || (g->ph <= 2 && g->pw <= 2));
}

/* dst = the sum of the nt partial sums part[t] (n elements each), in thread order. */
static void sum_parts(ct_dtype cd, char *dst, const char *part, int nt, int64_t n) {
    int64_t es = (int64_t)c10_elsize[cd];
    memcpy(dst, part, (size_t)(n * es));
    for (int t = 1; t < nt; t++) {
        const char *p = part + (int64_t)t * n * es;
        if (cd == CT_FLOAT32)
            for (int64_t k = 0; k < n; k++) ((float *)dst)[k] += ((const float *)p)[k];
        else if (cd == CT_FLOAT64)
            for (int64_t k = 0; k < n; k++) ((double *)dst)[k] += ((const double *)p)[k];
        else
            for (int64_t k = 0; k < n; k++)
                ((int64_t *)dst)[k] = (int64_t)((uint64_t)((int64_t *)dst)[k] + (uint64_t)((const int64_t *)p)[k]);
    }
}

/* The Winograd run of a convolution (input_grad false: y = conv(x, w) + bias)
 * or of its input gradient (x = grad_output, y = the input gradient). Returns
 * 1 when the weight or x holds an inf or NaN (or a transform overflows): then
 * the caller runs im2col, whose direct sums keep torch's infs where Winograd's
 * transforms would spread NaNs over the tile. */
static int conv_winograd(ct_dtype cd, const char *x, const char *w, const char *bias, char *y, const ConvGeo *g,
                         bool input_grad) {
    Wino q = {.N = g->N, .C = g->C, .H = g->H, .W = g->W, .O = g->O, .Ho = g->Ho, .Wo = g->Wo, .ph = g->ph,
              .pw = g->pw, .flip = input_grad};
    if (input_grad)
        q.C = g->O, q.H = g->Ho, q.W = g->Wo, q.O = g->C, q.Ho = g->H, q.Wo = g->W, q.ph = 2 - g->ph, q.pw = 2 - g->pw;
    q.th = (q.Ho + 3) / 4, q.tw = (q.Wo + 3) / 4;
    int64_t es = (int64_t)c10_elsize[cd], tiles = q.N * q.th * q.tw, nblk = (tiles + WINO_T - 1) / WINO_T;
    int64_t ob = q.O < WINO_OB ? q.O : WINO_OB;
    const int f = cd == CT_FLOAT64;
    size_t usz = (size_t)(36 * q.O * q.C * es), vsz = (size_t)(36 * q.C * WINO_T * es);
    size_t msz = (size_t)(36 * ob * WINO_T * es), ssz = (size_t)((108 * WINO_T + 12) * es);
    char *U = c10_alloc(usz);
    if (!U) return -1;
    double gu[45 * WINO_T];
    if (wino_fn[f].weight(w, U, gu, &q)) {
        c10_dealloc(U, usz);
        return 1;
    }
    int fail = 0, bad = 0;
OMP(omp parallel if (nblk > 1 && worth_threads(g)) reduction(| : fail, bad))
    {
        char *V = c10_alloc(vsz), *M = V ? c10_alloc(msz) : NULL, *S = M ? c10_alloc(ssz) : NULL;
OMP(omp for schedule(static))
        for (int64_t b = 0; b < nblk; b++) {
            if (!S) fail = 1;
            if (fail || bad) continue;
            WinoSeg seg[WINO_T];
            int64_t t0 = b * WINO_T, t1 = t0 + WINO_T < tiles ? t0 + WINO_T : tiles;
            int ns = wino_segments(&q, t0, t1, seg);
            if ((bad = wino_fn[f].input(x, V, seg, ns, S, &q))) continue;
            for (int64_t o0 = 0; o0 < q.O; o0 += ob) {
                int64_t n = q.O - o0 < ob ? q.O - o0 : ob;
                fail |= wino_gemm(cd, U, V, M, o0, n, &q);
                wino_fn[f].output(M, n, o0, seg, ns, bias, y, S, &q);
            }
        }
        c10_dealloc(V, vsz);
        c10_dealloc(M, msz);
        c10_dealloc(S, ssz);
    }
    c10_dealloc(U, usz);
    return fail ? c10_error_int("out of memory") : bad;
}

/* The im2col kernels, on contiguous cd data, per sample and group over the
 * threads (each with its own col buffer). kind 0: y[N, O, Ho, Wo] = conv(a =
 * x[N, C, H, W], b = w[O, Cg, kh, kw]) + bias; 1: y = the input gradient
 * (col = w^T @ grad, scatter-added back) from a = grad_output, b = w; 2: y =
 * the weight gradient, sum_n grad[n] @ col(x[n])^T, from a = x, b =
 * grad_output (a partial sum per thread, added in thread order). */
static int conv_im2col(ct_dtype cd, int kind, const char *a, const char *b, const char *bias, char *y,
                       const ConvGeo *g) {
    int64_t es = (int64_t)c10_elsize[cd], HW = g->Ho * g->Wo, KK = g->Cg * g->kh * g->kw, Og = g->O / g->groups;
    int64_t wn = g->O * KK;
    bool pw = is_pointwise(g), par = batch_parallel(g);
    int nt = par ? c10_free_threads() : 1, fail = 0;
    char *part = kind == 2 ? calloc((size_t)nt, (size_t)(wn > 0 ? wn : 1) * (size_t)es) : NULL;
    if (kind == 2 && !part) return c10_error_int("out of memory");
    if (kind == 1) memset(y, 0, (size_t)(g->N * g->C * g->H * g->W * es));
    int32_t *table = cd == CT_FLOAT32 && kind != 1 && !pw && g->sw >= 2 ? im2col_table(g) : NULL; /* NULL: rows */
OMP(omp parallel num_threads(nt) if (par) reduction(| : fail))
    {
        size_t colsz = (size_t)(KK * HW > 0 ? KK * HW : 1) * (size_t)es; /* cached blocks: no page faults */
        char *col = pw ? NULL : c10_alloc(colsz);
        char *acc = part ? part + (int64_t)thread_id() * wn * es : NULL;
        if (!pw && !col) fail = 1;
        else {
OMP(omp for schedule(static))
            for (int64_t n = 0; n < g->N; n++)
                for (int64_t gr = 0; gr < g->groups; gr++) {
                    /* the group's input planes, output planes, weight rows */
                    int64_t xo = (n * g->C + gr * g->Cg) * g->H * g->W * es, yo = (n * g->O + gr * Og) * HW * es;
                    int64_t wo = gr * Og * KK * es;
                    if (kind != 1 && !pw) {
                        if (table) im2col_gather_f32((const float *)(a + xo), (float *)col, table, g);
                        else im2col(cd, a + xo, col, g);
                    }
                    const char *cols = pw ? a + xo : col;
                    if (kind == 0) {
                        if (bias) fill_rows(cd, y + yo, bias + gr * Og * es, Og, HW);
                        fail |= la_gemm(cd, Og, HW, KK, 1, b + wo, KK, 1, cols, HW, 1, bias ? 1 : 0, y + yo, HW) < 0;
                    } else if (kind == 1) { /* col[KK, HW] = w_g^T[KK, Og] @ grad_g[Og, HW] */
                        fail |= la_gemm(cd, KK, HW, Og, 1, b + wo, 1, KK, a + yo, HW, 1, 0, pw ? y + xo : col, HW) < 0;
                        if (!pw) col2im(cd, col, y + xo, g);
                    } else /* acc_g[Og, KK] += grad_g[Og, HW] @ col^T[HW, KK] */
                        fail |= la_gemm(cd, Og, KK, HW, 1, b + yo, HW, 1, cols, 1, HW, 1, acc + wo, KK) < 0;
                }
        }
        if (col) c10_dealloc(col, colsz);
    }
    if (kind == 2) sum_parts(cd, y, part, nt, wn);
    free(part);
    free(table);
    return fail ? c10_error_int("out of memory") : 0;
}

/* ------------------------------------------------ depthwise convolutions
 * One input channel a group, stride 1 (MobileNet's depthwise layers): im2col +
 * gemm ran a gemm of one row per sample and group (7.5x torch's time on
 * [32,32,28,28] 3x3). Here the planes are zero-padded into rows of Wp = W + 2
 * pw (xp: Hp rows and a tail of kw dw zeros; yp: Ho rows, the columns from Wo
 * on zero or unused), so that a kernel tap is an offset base into a flat plane:
 * the forward yp[m] = sum w xp[m + base] and the input gradient xp[m] += sum
 * w yp[m - base] run DW_PAD values at a time, all taps in registers (one pass
 * a tap, through L1, was a chain of dependent adds: 1.5x slower), the weight
 * gradient sums yp[m] xp[m + base] per tap in 64 partial sums. A plane's
 * rows alone (28) were too short to run fast. */
#define DW_PAD 64 /* elements past a padded plane's end: the forward's last block of outputs */
#define DEPTHWISE(SUF, T, ATTR)                                                                           \
    ATTR static void dw_taps_##SUF(int kind, T *restrict xp, T *restrict yp, const T *w, T *acc, const ConvGeo *g) { \
        int64_t Wp = g->W + 2 * g->pw, n = g->Ho * Wp;                                                   \
        if (kind != 2) { /* DW_PAD values at a time (four vectors: four chains of adds), every tap in \
                          * registers: the forward yp[m] = sum w xp[m + base], the input gradient \
                          * xp[m] += sum w yp[m - base] (gathered from yp between zeros, tap by tap \
                          * as the scatter of each tap did); the DW_PAD tails past the planes */ \
            T *d = kind ? xp : yp;                                                                       \
            const T *src = kind ? yp : xp;                                                               \
            int64_t cnt = kind ? (g->H + 2 * g->ph) * Wp : n, sg = kind ? -1 : 1;                        \
            for (int64_t m = 0; m < cnt; m += DW_PAD) {                                                  \
                T sum[DW_PAD];                                                                           \
                for (int k = 0; k < DW_PAD; k++) sum[k] = kind ? d[m + k] : 0;                           \
                for (int64_t i = 0; i < g->kh; i++)                                                      \
                    for (int64_t j = 0; j < g->kw; j++) {                                                \
                        const T *x = src + m + sg * (i * g->dh * Wp + j * g->dw), wt = w[i * g->kw + j]; \
                        for (int k = 0; k < DW_PAD; k++) sum[k] += wt * x[k];                            \
                    }                                                                                    \
                for (int k = 0; k < DW_PAD; k++) d[m + k] = sum[k];                                      \
            }                                                                                            \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t i = 0; i < g->kh; i++)                                                              \
            for (int64_t j = 0; j < g->kw; j++) {                                                        \
                const int64_t base = i * g->dh * Wp + j * g->dw;                                         \
                T p[64] = {0}, s = 0; /* 64 partial sums: four chains of vector adds */                 \
                int64_t m = 0;                                                                           \
                for (; m + 64 <= n; m += 64)                                                             \
                    for (int k = 0; k < 64; k++) p[k] += yp[m + k] * xp[m + k + base];                   \
                for (; m < n; m++) s += yp[m] * xp[m + base];                                            \
                for (int k = 0; k < 16; k++) s += (p[k] + p[k + 16]) + (p[k + 32] + p[k + 48]);          \
                acc[i * g->kw + j] += s;                                                                 \
            }                                                                                            \
    }
DEPTHWISE(f32, float, )
DEPTHWISE(f64, double, COLD_CODE) /* float64: for gradcheck more than for speed */

#if defined(__AVX512F__)
/* dw_taps' forward and input gradient in float32 with AVX-512, when a row of
 * taps spans 17 values at most ((kw - 1) dw <= 16): per kernel row, the
 * block's sources are loaded as aligned vectors (xp and yp 64-byte aligned)
 * and each tap's shifted ones taken out of pairs of them by a permute.
 * dw_taps' loads at the taps' offsets were nearly all split across two
 * lines, and bound the loop (a [32,32,28,28] 3x3 forward: 0.42 -> 0.33 ms
 * with the masked row copies below). Each output sums the same products in
 * the same order as dw_taps', fused (one rounding each). */
#define DW_SPAN 16
static bool dw_fast(const ConvGeo *g) { return (g->kw - 1) * g->dw <= DW_SPAN; }
/* the six aligned vectors at a (a kernel row's reach over a block) */
static inline __attribute__((always_inline)) void dw_load6(const float *a, __m512 *v) {
    for (int k = 0; k < 6; k++) v[k] = _mm512_load_ps(a + 16 * k);
}
/* the block's four vectors s (0 .. 31) values on from v's start: permutes of
 * neighbours (the selects on s >= 16 keep v in registers; indexing v by s / 16
 * put it on the stack) */
static inline __attribute__((always_inline)) void dw_shift4(const __m512 *v, int64_t s, __m512 *x) {
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i ix = _mm512_add_epi32(iota, _mm512_set1_epi32((int)(s & 15)));
    bool hi = s >= 16;
    for (int k = 0; k < 4; k++) x[k] = _mm512_permutex2var_ps(hi ? v[k + 1] : v[k], ix, hi ? v[k + 2] : v[k + 1]);
}
static void dw_taps_fast(int kind, float *restrict xp, float *restrict yp, const float *w, const ConvGeo *g) {
    int64_t Wp = g->W + 2 * g->pw, span = (g->kw - 1) * g->dw;
    float *d = kind ? xp : yp;
    const float *src = kind ? yp : xp;
    int64_t cnt = kind ? (g->H + 2 * g->ph) * Wp : g->Ho * Wp, sg = kind ? -1 : 1;
    for (int64_t m = 0; m < cnt; m += DW_PAD) {
        __m512 acc[4], v[6], x[4];
        for (int k = 0; k < 4; k++) acc[k] = kind ? _mm512_loadu_ps(d + m + 16 * k) : _mm512_setzero_ps();
        for (int64_t i = 0; i < g->kh; i++) {
            int64_t b = m + sg * i * g->dh * Wp, lo = (kind ? b - span : b) & ~(int64_t)15;
            dw_load6(src + lo, v);
            for (int64_t j = 0; j < g->kw; j++) {
                __m512 wt = _mm512_set1_ps(w[i * g->kw + j]);
                dw_shift4(v, b + sg * j * g->dw - lo, x);
                for (int k = 0; k < 4; k++) acc[k] = _mm512_fmadd_ps(wt, x[k], acc[k]);
            }
        }
        for (int k = 0; k < 4; k++) _mm512_storeu_ps(d + m + 16 * k, acc[k]);
    }
}
/* The weight gradient the same way: acc[tap] += the sum of yp[m] xp[m +
 * base] over the n = Ho Wp positions, in two vectors of partial sums a tap
 * (the lanes past n: yp's zeros), kernel row by kernel row */
static void dw_wgrad_fast(const float *restrict xp, const float *restrict yp, float *acc, const ConvGeo *g) {
    int64_t Wp = g->W + 2 * g->pw, n = g->Ho * Wp;
    __m512 p[2 * (DW_SPAN + 1)], v[6], x[4], y[4];
    for (int64_t i = 0; i < g->kh; i++) {
        for (int64_t j = 0; j < 2 * g->kw; j++) p[j] = _mm512_setzero_ps();
        for (int64_t m = 0; m < n; m += DW_PAD) {
            int64_t b = m + i * g->dh * Wp, lo = b & ~(int64_t)15;
            for (int k = 0; k < 4; k++) y[k] = _mm512_load_ps(yp + m + 16 * k);
            dw_load6(xp + lo, v);
            for (int64_t j = 0; j < g->kw; j++) {
                dw_shift4(v, b + j * g->dw - lo, x);
                for (int k = 0; k < 4; k++) p[2 * j + k % 2] = _mm512_fmadd_ps(y[k], x[k], p[2 * j + k % 2]);
            }
        }
        for (int64_t j = 0; j < g->kw; j++) acc[i * g->kw + j] += _mm512_reduce_add_ps(_mm512_add_ps(p[2 * j], p[2 * j + 1]));
    }
}
#else
static bool dw_fast(const ConvGeo *g) { return (void)g, false; }
#define dw_taps_fast(kind, xp, yp, w, g) ((void)0)
#define dw_wgrad_fast(xp, yp, acc, g) ((void)0)
#endif

/* rows x cols between dense rows at x and the rows of Wp at p, from row r0
 * and column c0 on: into p (mode 0), out of p (1), out of p plus c (2: the
 * forward's bias, or 0 as the sum it once was); typed loops, not a call a
 * row (rows of 28 elements) */
#define DW_ROWS(T)                                                                                        \
    static void dw_rows_##T(int mode, T *p, T *x, int64_t rows, int64_t cols, int64_t Wp, int64_t r0,     \
                            int64_t c0, T c) {                                                            \
        for (int64_t r = 0; r < rows; r++) {                                                             \
            T *restrict a = p + (r + r0) * Wp + c0, *restrict b = x + r * cols;                          \
            if (mode == 0)                                                                               \
                for (int64_t j = 0; j < cols; j++) a[j] = b[j];                                          \
            else if (mode == 1)                                                                          \
                for (int64_t j = 0; j < cols; j++) b[j] = a[j];                                          \
            else                                                                                         \
                for (int64_t j = 0; j < cols; j++) b[j] = c + a[j];                                      \
        }                                                                                                \
    }
DW_ROWS(double)
#if defined(__AVX512F__)
/* dw_rows_float with masked vectors: the compiler made a memmove call of each
 * short row (28 floats), 10% of a depthwise forward */
static void dw_rows_float(int mode, float *p, float *x, int64_t rows, int64_t cols, int64_t Wp, int64_t r0, int64_t c0,
                        float c) {
    __m512 vc = _mm512_set1_ps(c);
    for (int64_t r = 0; r < rows; r++) {
        float *a = p + (r + r0) * Wp + c0, *b = x + r * cols;
        for (int64_t j = 0; j < cols; j += 16) {
            __mmask16 k = cols - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - j)) - 1);
            if (mode == 0) _mm512_mask_storeu_ps(a + j, k, _mm512_maskz_loadu_ps(k, b + j));
            else if (mode == 1) _mm512_mask_storeu_ps(b + j, k, _mm512_maskz_loadu_ps(k, a + j));
            else _mm512_mask_storeu_ps(b + j, k, _mm512_add_ps(vc, _mm512_maskz_loadu_ps(k, a + j)));
        }
    }
}
#else
DW_ROWS(float)
#endif
static void dw_pad(ct_dtype cd, int mode, char *p, const char *x, int64_t rows, int64_t cols, int64_t Wp,
                   int64_t r0, int64_t c0, const char *c) {
    if (cd == CT_FLOAT32) dw_rows_float(mode, (float *)p, (float *)x, rows, cols, Wp, r0, c0, c ? *(const float *)c : 0);
    else dw_rows_double(mode, (double *)p, (double *)x, rows, cols, Wp, r0, c0, c ? *(const double *)c : 0);
}

/* no inf or NaN among the n values at p: an exponent of all ones anywhere,
 * in integer operations the compiler vectorises (the sum of x * 0 it
 * replaced was a serial chain of float adds: 15% of a depthwise layer's
 * forward and backward, the other thread waiting) */
#define ALL_FINITE(T, U, EXP)                                                            \
    static bool all_finite_##T(const T *p, int64_t n) {                                  \
        U bad = 0;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                \
            U u;                                                                         \
            memcpy(&u, p + i, sizeof u);                                                 \
            bad |= (U)((u & EXP) == EXP);                                                \
        }                                                                                \
        return !bad;                                                                     \
    }
ALL_FINITE(float, uint32_t, 0x7f800000u)
ALL_FINITE(double, uint64_t, 0x7ff0000000000000u)
static bool all_finite(ct_dtype cd, const char *p, int64_t n) {
    return cd == CT_FLOAT32 ? all_finite_float((const float *)p, n) : all_finite_double((const double *)p, n);
}

/* conv_depthwise's cases: but for an inf or NaN of x (weight gradient) or of
 * the weights (input gradient), which would meet the padded rows' unused
 * zeros; those take im2col */
static bool use_depthwise(ct_dtype cd, int kind, const char *a, const char *b, const ConvGeo *g) {
    if (g->Cg != 1 || g->groups == 1 || g->sh != 1 || g->sw != 1 || (cd != CT_FLOAT32 && cd != CT_FLOAT64))
        return false;
    return kind == 0 || all_finite(cd, kind == 1 ? b : a, kind == 1 ? g->O * g->kh * g->kw : g->N * g->C * g->H * g->W);
}

/* conv_im2col's kinds and operands: planes (n, group) over the threads; the
 * weight gradient in a partial sum per thread, added in thread order */
static int conv_depthwise(ct_dtype cd, int kind, const char *a, const char *b, const char *bias, char *y,
                          const ConvGeo *g) {
    int64_t es = (int64_t)c10_elsize[cd], HW = g->H * g->W, OHW = g->Ho * g->Wo, KK = g->kh * g->kw;
    int64_t Og = g->O / g->groups, wn = g->O * KK, Wp = g->W + 2 * g->pw;
    /* xp: the padded plane, its taps' reach and a DW_PAD tail; yp: the
     * output plane in rows of Wp, after F zeros (the input gradient's reach
     * back) and before the tails of xp's length */
    int64_t xpn = (g->H + 2 * g->ph) * Wp + g->kw * g->dw + DW_PAD, F = (g->kh - 1) * g->dh * Wp + (g->kw - 1) * g->dw;
    int64_t yoff = (xpn + F + 15) / 16 * 16; /* yp's offset: 64-byte aligned */
    int nt = worth_threads(g) ? c10_free_threads() : 1, fail = 0;
    bool fast = cd == CT_FLOAT32 && dw_fast(g);
    char *part = kind == 2 ? calloc((size_t)nt, (size_t)wn * (size_t)es) : NULL;
    if (kind == 2 && !part) return c10_error_int("out of memory");
    /* (the input gradient's planes are written whole: no zeroing of y) */
OMP(omp parallel num_threads(nt) if (nt > 1) reduction(| : fail))
    {
        /* xp and yp 64-byte aligned (dw_taps_fast's loads), yp's reach and 64 more */
        size_t xb = ((size_t)((yoff + xpn + 64) * es) + 63) / 64 * 64;
        char *xp = aligned_alloc(64, xb), *yp = xp ? xp + yoff * es : NULL;
        if (xp) memset(xp, 0, xb);
        char *acc = part ? part + thread_id() * wn * es : NULL;
        if (!xp) fail = 1;
        else {
OMP(omp for schedule(static))
            for (int64_t q = 0; q < g->N * g->groups; q++)
                for (int64_t k = 0; k < Og; k++) { /* output channel o of input channel q % groups */
                    int64_t o = q % g->groups * Og + k, n = q / g->groups;
                    char *xq = (char *)(kind == 1 ? y : a) + q * HW * es;
                    char *yo = (char *)(kind == 0 ? y : kind == 1 ? a : b) + (n * g->O + o) * OHW * es;
                    if (kind != 1 && !k) dw_pad(cd, 0, xp, xq, g->H, g->W, Wp, g->ph, g->pw, NULL);
                    if (kind == 1 && !k) memset(xp, 0, (size_t)(xpn * es));
                    if (kind != 0) dw_pad(cd, 0, yp, yo, g->Ho, g->Wo, Wp, 0, 0, NULL);
                    const char *w = kind == 2 ? NULL : b + o * KK * es;
                    char *ac = acc ? acc + o * KK * es : NULL;
                    if (fast && kind == 2) dw_wgrad_fast((const float *)xp, (const float *)yp, (float *)ac, g);
                    else if (fast) dw_taps_fast(kind, (float *)xp, (float *)yp, (const float *)w, g);
                    else if (cd == CT_FLOAT32) dw_taps_f32(kind, (float *)xp, (float *)yp, (const float *)w, (float *)ac, g);
                    else dw_taps_f64(kind, (double *)xp, (double *)yp, (const double *)w, (double *)ac, g);
                    if (kind == 0) dw_pad(cd, 2, yp, yo, g->Ho, g->Wo, Wp, 0, 0, bias ? bias + o * es : NULL);
                    if (kind == 1 && k == Og - 1) dw_pad(cd, 1, xp, xq, g->H, g->W, Wp, g->ph, g->pw, NULL);
                }
        }
        free(xp);
    }
    if (kind == 2) sum_parts(cd, y, part, nt, wn);
    free(part);
    return fail ? c10_error_int("out of memory") : 0;
}

/* Runs a kernel on compute-dtype copies and writes the result (dtype d, shape
 * s) into a new tensor. kind 0: forward(x, w, bias); 1: input grad(gy, w);
 * 2: weight grad(x, gy). */
typedef struct {
    int kind;
    const ConvGeo *g;
} ConvCall;

static int conv_compute(ct_dtype cd, void *const *in, void *out, const void *arg) {
    const ConvCall *c = arg;
    if (c->kind != 2 && use_winograd(cd, c->g, c->kind == 1)) {
        int rc = conv_winograd(cd, in[0], in[1], in[2], out, c->g, c->kind == 1);
        if (rc <= 0) return rc;
    }
    if (use_depthwise(cd, c->kind, in[0], in[1], c->g)) return conv_depthwise(cd, c->kind, in[0], in[1], in[2], out, c->g);
    return conv_im2col(cd, c->kind, in[0], in[1], in[2], out, c->g);
}

static TensorImpl *conv_run(int kind, const TensorImpl *t0, const TensorImpl *t1, const TensorImpl *bias,
                            const ConvGeo *g, const int64_t *s, int nd) {
    const TensorImpl *ts[3] = {t0, t1, bias};
    ConvCall c = {kind, g};
    return run_compute(c10_empty(s, nd, t0->dtype, t0->device), la_compute_dtype(t0->dtype), ts, 3, 0, false,
                       conv_compute, &c);
}

/* ============================================================ convolution */

/* t[0] = input [N,] C, (H,) W; t[1] = weight O, C/groups, (kh,) kw; t[2] = bias [O] or NULL.
 * i: nsp (1: conv1d, 2: conv2d), stride[2], padding[2], dilation[2], groups
 * (conv1d reads entry 1 of each pair). */
int fwd_convolution(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ConvGeo g;
    TensorImpl *b = a->nt > 2 ? a->t[2] : NULL;
    if (conv_check(a->i, a->t[0], a->t[1], b, &g)) return -1;
    int64_t s[4];
    int nd = conv_out_shape(&g, s);
    TensorImpl *y = conv_run(0, a->t[0], a->t[1], b, &g, s, nd);
    return (out[0] = at_format_like(y, (const TensorImpl *[]){a->t[0], a->t[1]}, 2)) ? 1 : -1;
}

/* Geometry of a backward op from its parameters and the shapes it knows. */
static int bwd_geo(const char *op, const int64_t *i, const int64_t *xs, int xnd, const int64_t *ws, int wnd,
                   const TensorImpl *gy, ConvGeo *g) {
    conv_params(i, g);
    if ((g->nsp != 1 && g->nsp != 2) || wnd != g->nsp + 2 || (xnd != g->nsp + 1 && xnd != g->nsp + 2) ||
        g->groups <= 0 || ws[0] % g->groups || g->sh <= 0 || g->sw <= 0 || g->dh <= 0 || g->dw <= 0)
        return c10_error_int("%s: invalid arguments", op);
    g->batched = xnd == g->nsp + 2;
    int64_t full[CT_MAX_DIMS];
    int fnd = g->nsp + 2;
    if (g->batched) memcpy(full, xs, sizeof(int64_t) * (size_t)xnd);
    else {
        full[0] = 1;
        memcpy(full + 1, xs, sizeof(int64_t) * (size_t)xnd);
    }
    if (full[1] != ws[1] * g->groups) return c10_error_int("%s: input and weight shapes disagree", op);
    fill_geo_sizes(g, full, fnd, ws);
    int64_t want[4];
    int nd = conv_out_shape(g, want);
    if (gy->ndim != nd || memcmp(gy->sizes, want, sizeof(int64_t) * (size_t)nd))
        return c10_error_int("%s: expected grad_output of size %s, but got %s", op, c10_shape_str(want, nd),
                             c10_shape_str(gy->sizes, gy->ndim));
    return 0;
}

/* t[0] = grad_output, t[1] = weight; i: the convolution's 8 parameters, then
 * the input's ndim and sizes. Result: the gradient of the input. */
int fwd_conv_backward_input(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *gy = a->t[0], *w = a->t[1];
    int xnd = (int)a->i[8];
    if (xnd < 0 || xnd > CT_MAX_DIMS) return c10_error_int("conv_backward_input: invalid arguments");
    ConvGeo g;
    if (bwd_geo("conv_backward_input", a->i, a->i + 9, xnd, w->sizes, w->ndim, gy, &g)) return -1;
    if (gy->dtype != w->dtype || !at_same_device("conv_backward_input", gy, w))
        return gy->dtype != w->dtype ? c10_error_int("conv_backward_input: expected scalar type %s but found %s",
                                                     c10_dtype_cname(gy->dtype), c10_dtype_cname(w->dtype))
                                     : -1;
    return (out[0] = conv_run(1, gy, w, NULL, &g, a->i + 9, xnd)) ? 1 : -1;
}

/* t[0] = input, t[1] = grad_output; i: the convolution's 8 parameters, then
 * the weight's ndim and sizes. Result: the gradient of the weight. */
int fwd_conv_backward_weight(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *x = a->t[0], *gy = a->t[1];
    int wnd = (int)a->i[8];
    if (wnd < 0 || wnd > CT_MAX_DIMS) return c10_error_int("conv_backward_weight: invalid arguments");
    ConvGeo g;
    if (bwd_geo("conv_backward_weight", a->i, x->sizes, x->ndim, a->i + 9, wnd, gy, &g)) return -1;
    if (gy->dtype != x->dtype || !at_same_device("conv_backward_weight", x, gy))
        return gy->dtype != x->dtype ? c10_error_int("conv_backward_weight: expected scalar type %s but found %s",
                                                     c10_dtype_cname(x->dtype), c10_dtype_cname(gy->dtype))
                                     : -1;
    return (out[0] = conv_run(2, x, gy, NULL, &g, a->i + 9, wnd)) ? 1 : -1;
}

/* ================================================================ pooling */

static int64_t div_floor(int64_t a, int64_t b) {
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

/* PyTorch's pooling_output_shape (with its checks). */
static int pool_out(const char *op, int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil,
                    int64_t *out) {
    if (stride == 0) return c10_error_int("%s: stride should not be zero", op);
    if (pad < 0) return c10_error_int("%s: pad must be non-negative, but got pad: %lld", op, (long long)pad);
    if (pad > k / 2)
        return c10_error_int("%s: pad should be at most half of kernel size, but got pad=%lld and kernel_size=%lld", op,
                             (long long)pad, (long long)k);
    int64_t span, num; /* in + 2 pad - dil (k - 1) - 1 (+ stride - 1): huge arguments overflow int64 */
    if (__builtin_mul_overflow(dil, k - 1, &span) || __builtin_add_overflow(span, 1, &span) ||
        __builtin_add_overflow(in, 2 * pad, &num) || __builtin_sub_overflow(num, span, &num) ||
        (ceil && __builtin_add_overflow(num, stride - 1, &num)))
        return c10_error_int("%s: kernel_size %lld, padding %lld, stride %lld and dilation %lld overflow the output "
                             "size", op, (long long)k, (long long)pad, (long long)stride, (long long)dil);
    int64_t o = div_floor(num, stride) + 1;
    if (ceil && (o - 1) * stride >= in + pad) o--;
    *out = o;
    return 0;
}

typedef struct {
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    bool ceil;
    bool batched;
    int64_t N, C, H, W, Ho, Wo;
} PoolGeo;

/* pool2d_shape_check */
static int pool_shape_check(const char *op, const TensorImpl *x, const PoolGeo *p) {
    if (p->kh <= 0 || p->kw <= 0)
        return c10_error_int("%s: kernel size should be greater than zero, but got kH: %lld kW: %lld", op,
                             (long long)p->kh, (long long)p->kw);
    if (p->sh <= 0 || p->sw <= 0)
        return c10_error_int("%s: stride should be greater than zero, but got dH: %lld dW: %lld", op, (long long)p->sh,
                             (long long)p->sw);
    if (p->dh <= 0 || p->dw <= 0)
        return c10_error_int("%s: dilation should be greater than zero, but got dilationH: %lld dilationW: %lld", op,
                             (long long)p->dh, (long long)p->dw);
    int nd = x->ndim;
    bool valid = x->sizes[1] != 0 && x->sizes[2] != 0;
    if (!((nd == 3 && x->sizes[0] != 0 && valid) || (nd == 4 && valid && x->sizes[3] != 0)))
        return c10_error_int("%s: Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but "
                             "got:%s",
                             op, c10_shape_str(x->sizes, nd));
    if (p->Ho < 1 || p->Wo < 1)
        return c10_error_int("%s: Given input size: (%lldx%lldx%lld). Calculated output size: (%lldx%lldx%lld). Output "
                             "size is too small",
                             op, (long long)p->C, (long long)p->H, (long long)p->W, (long long)p->C, (long long)p->Ho,
                             (long long)p->Wo);
    return 0;
}

static void pool_sizes(const TensorImpl *x, PoolGeo *p) {
    p->batched = x->ndim == 4;
    p->N = p->batched ? x->sizes[0] : 1;
    p->C = x->sizes[x->ndim - 3];
    p->H = x->sizes[x->ndim - 2];
    p->W = x->sizes[x->ndim - 1];
}

static int pool_out_shape(const PoolGeo *p, int64_t *s) {
    int n = 0;
    if (p->batched) s[n++] = p->N;
    s[n++] = p->C;
    s[n++] = p->Ho;
    s[n++] = p->Wo;
    return n;
}

static int float_only(const char *op, const char *kernel, ct_dtype d) {
    if (!c10_is_float(d)) return c10_error_int("%s: \"%s\" not implemented for '%s'", op, kernel, c10_dtype_cname(d));
    return 0;
}

/* The common 2x2 window with stride 2 over one plane, flat over its Ho * Wo
 * outputs: off[k] is the flat input index of output k's window (the same for
 * every plane). The same scan order and rule as the general loop (larger, or
 * NaN, wins), branch-free, in spans of 8, the last one moved back to end at
 * the plane's end (recomputing a few): vectorised with no scalar tail. */
#define MAXPOOL2X2(SUF, T, ATTR)                                                                          \
    ATTR static inline void maxpool2x2_span_##SUF(const T *restrict in, const int32_t *restrict off, T *restrict o, \
                                             int64_t *restrict oi, int64_t W, int64_t k0, int64_t n,      \
                                             bool vals, bool idxs) {                                      \
        for (int64_t k = k0; k < k0 + n; k++) {                                                            \
            int32_t b = off[k];                                                                            \
            T m = in[b], v[3] = {in[b + 1], in[b + W], in[b + W + 1]};                                     \
            int at = 0; /* 1 + which of v */                                                               \
            for (int j = 0; j < 3; j++) {                                                                  \
                bool take = (v[j] > m) | (v[j] != v[j]);                                                   \
                m = take ? v[j] : m;                                                                       \
                at = take ? j + 1 : at;                                                                    \
            }                                                                                              \
            if (vals) o[k] = m;                                                                            \
            if (idxs) oi[k] = b + (at & 1) + (at >> 1) * W;                                                \
        }                                                                                                  \
    }                                                                                                      \
    ATTR static inline void maxpool2x2_plane_##SUF(const T *in, const int32_t *off, T *o, int64_t *oi, int64_t W, \
                                              int64_t n, bool vals, bool idxs) {                          \
        if (n < 8) maxpool2x2_span_##SUF(in, off, o, oi, W, 0, n, vals, idxs);                             \
        else                                                                                               \
            for (int64_t s = 0; s < n; s += 8)                                                             \
                maxpool2x2_span_##SUF(in, off, o, oi, W, s + 8 <= n ? s : n - 8, 8, vals, idxs);           \
    }                                                                                                      \
    /* values (o), indices (oi) or both: one specialised loop each */                                     \
    ATTR static __attribute__((unused)) void maxpool2x2_flat_##SUF(const T *in, const int32_t *off, T *o, int64_t *oi, \
                                                              int64_t W, int64_t n) {                     \
        if (o && oi) maxpool2x2_plane_##SUF(in, off, o, oi, W, n, true, true);                             \
        else if (o) maxpool2x2_plane_##SUF(in, off, o, oi, W, n, true, false);                             \
        else maxpool2x2_plane_##SUF(in, off, o, oi, W, n, false, true);                                    \
    }
MAXPOOL2X2(f32, float, )
MAXPOOL2X2(f64, double, COLD_CODE) /* float64: for size (8 KB vectorised) */

#if defined(__AVX512F__)
/* The lanes where v replaces the running maximum m: larger, or NaN. */
static inline __mmask16 pool_takes(__m512 v, __m512 m) {
    return _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}

/* One output row of the float32 2x2 pool, 16 outputs at a time (the last ones masked): the even and
 * odd columns of the rows top and top + W de-interleaved in registers (the flat spans' gathers are
 * slow), each row's pair decided first, then the two winners. The scan order's rule (larger, or NaN,
 * wins: the last NaN, else the first largest) gives the same value and index that way. base: the
 * index of top[0] in its plane. */
static void maxpool2x2_row_f32(const float *top, int64_t W, float *o, int64_t *oi, int64_t base, int64_t n) {
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    const __m512i lane2 = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    for (int64_t k = 0; k < n; k += 16) {
        unsigned m = n - k < 16 ? (unsigned)(n - k) : 16;
        __mmask16 mo = (__mmask16)((1u << m) - 1), m0 = (__mmask16)(m >= 8 ? 0xffff : (1u << 2 * m) - 1);
        __mmask16 m1 = (__mmask16)(m <= 8 ? 0 : m == 16 ? 0xffff : (1u << (2 * m - 16)) - 1);
        __m512 v[2][2]; /* [row][column parity] */
        for (int r = 0; r < 2; r++) {
            const float *src = top + r * W + 2 * k;
            __m512 a = _mm512_maskz_loadu_ps(m0, src), b = _mm512_maskz_loadu_ps(m1, src + 16);
            v[r][0] = _mm512_permutex2var_ps(a, ev, b);
            v[r][1] = _mm512_permutex2var_ps(a, od, b);
        }
        __mmask16 t0 = pool_takes(v[0][1], v[0][0]), t1 = pool_takes(v[1][1], v[1][0]);
        __m512 p0 = _mm512_mask_blend_ps(t0, v[0][0], v[0][1]), p1 = _mm512_mask_blend_ps(t1, v[1][0], v[1][1]);
        __mmask16 tb = pool_takes(p1, p0);
        if (o) _mm512_mask_storeu_ps(o + k, mo, _mm512_mask_blend_ps(tb, p0, p1));
        if (oi) { /* base + 2 (k + lane) + (bottom ? W : 0) + (odd column ? 1 : 0) */
            __m512i one = _mm512_set1_epi32(1), w = _mm512_set1_epi32((int)W);
            __m512i top32 = _mm512_maskz_mov_epi32(t0, one);
            __m512i bot32 = _mm512_add_epi32(w, _mm512_maskz_mov_epi32(t1, one));
            __m512i sel = _mm512_mask_blend_epi32(tb, top32, bot32);
            __m512i b64 = _mm512_add_epi64(_mm512_set1_epi64(base + 2 * k), lane2);
            __m512i lo = _mm512_add_epi64(b64, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(sel)));
            __m512i hi = _mm512_add_epi64(_mm512_add_epi64(b64, _mm512_set1_epi64(16)),
                                          _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(sel, 1)));
            _mm512_mask_storeu_epi64(oi + k, (__mmask8)mo, lo);
            _mm512_mask_storeu_epi64(oi + k + 8, (__mmask8)(mo >> 8), hi);
        }
    }
}
#endif

/* The 2x2 stride-2 pool of one plane (off: the flat spans' window offsets). */
static void maxpool2x2_f32(const float *in, const int32_t *off, float *o, int64_t *oi, const PoolGeo *p) {
#if defined(__AVX512F__)
    (void)off;
    for (int64_t oh = 0; oh < p->Ho; oh++)
        maxpool2x2_row_f32(in + 2 * oh * p->W, p->W, o ? o + oh * p->Wo : NULL, oi ? oi + oh * p->Wo : NULL,
                           2 * oh * p->W, p->Wo);
#else
    maxpool2x2_flat_f32(in, off, o, oi, p->W, p->Ho * p->Wo);
#endif
}

static void maxpool2x2_f64(const double *in, const int32_t *off, double *o, int64_t *oi, const PoolGeo *p) {
    maxpool2x2_flat_f64(in, off, o, oi, p->W, p->Ho * p->Wo);
}

/* The window offsets of the 2x2 stride-2 path, or NULL when it does not apply
 * (or on no memory: the general loop then runs). */
static int32_t *maxpool2x2_offsets(const PoolGeo *p) {
    if (!(p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && !p->ph && !p->pw && p->dh == 1 && p->dw == 1 &&
          2 * p->Ho <= p->H && 2 * p->Wo <= p->W && p->H * p->W <= INT32_MAX))
        return NULL;
    int32_t *off = malloc(sizeof(int32_t) * (size_t)(p->Ho * p->Wo));
    if (off)
        for (int64_t oh = 0; oh < p->Ho; oh++)
            for (int64_t ow = 0; ow < p->Wo; ow++) off[oh * p->Wo + ow] = (int32_t)(2 * oh * p->W + 2 * ow);
    return off;
}

#define MP_B 64 /* outputs of a row at a time */
/* The max-pool kernel over planes of T: values and indices (ih * W + iw). */
#define MAXPOOL(SUF, T, ATTR)                                                                             \
    ATTR static void maxpool_##SUF(const T *x, T *y, int64_t *idx, const PoolGeo *p) {                    \
        int64_t planes = p->N * p->C;                                                                      \
        int32_t *off = maxpool2x2_offsets(p);                                                              \
        OMP(omp parallel for schedule(static) if (planes * p->Ho * p->Wo > 32768))                  \
        for (int64_t pl = 0; pl < planes; pl++) {                                                          \
            const T *in = x + pl * p->H * p->W;                                                            \
            T *o = y ? y + pl * p->Ho * p->Wo : NULL;                                                      \
            int64_t *oi = idx ? idx + pl * p->Ho * p->Wo : NULL;                                           \
            if (off) {                                                                                     \
                maxpool2x2_##SUF(in, off, o, oi, p);                                                       \
                continue;                                                                                  \
            }                                                                                              \
            for (int64_t oh = 0; oh < p->Ho; oh++) {                                                       \
                int64_t h0 = oh * p->sh - p->ph, h1 = h0 + (p->kh - 1) * p->dh + 1;                        \
                if (h1 > p->H) h1 = p->H;                                                                  \
                if (h0 < 0) h0 += (-h0 + p->dh - 1) / p->dh * p->dh; /* the first tap inside */           \
                /* the outputs whose windows lie inside the row, MP_B at a time, each tap over \
                 * all of them (branch-free: a branch a tap mispredicted, 12x 2x2's time at 3x3 \
                 * stride 2); the others one by one below */                                     \
                int64_t owa = (p->pw + p->sw - 1) / p->sw, e = p->W - 1 + p->pw - (p->kw - 1) * p->dw;     \
                int64_t owb = e < 0 ? 0 : e / p->sw + 1;                                                   \
                if (owb > p->Wo) owb = p->Wo;                                                              \
                if (owa > owb) owa = owb;                                                                  \
                for (int64_t c = owa; c < owb; c += MP_B) {                                                \
                    int64_t nb = owb - c < MP_B ? owb - c : MP_B, w0 = c * p->sw - p->pw;                  \
                    T mv[MP_B];                                                                            \
                    int64_t bv[MP_B];                                                                      \
                    for (int64_t q = 0; q < nb; q++) mv[q] = -(T)INFINITY, bv[q] = h0 * p->W + w0 + q * p->sw; \
                    for (int64_t ih = h0; ih < h1; ih += p->dh)                                            \
                        for (int64_t kj = 0; kj < p->kw; kj++) {                                           \
                            const T *r = in + ih * p->W + w0 + kj * p->dw;                                 \
                            int64_t pos = ih * p->W + w0 + kj * p->dw;                                     \
                            for (int64_t q = 0; q < nb; q++) {                                             \
                                T v = r[q * p->sw];                                                        \
                                bool take = v > mv[q] || v != v;                                           \
                                mv[q] = take ? v : mv[q];                                                  \
                                bv[q] = take ? pos + q * p->sw : bv[q];                                    \
                            }                                                                              \
                        }                                                                                  \
                    for (int64_t q = 0; q < nb; q++) {                                                     \
                        if (o) o[oh * p->Wo + c + q] = mv[q];                                              \
                        if (oi) oi[oh * p->Wo + c + q] = bv[q];                                            \
                    }                                                                                      \
                }                                                                                          \
                for (int64_t ow = 0; ow < p->Wo; ow++) {                                                   \
                    if (ow == owa) ow = owb;                                                               \
                    if (ow >= p->Wo) break;                                                                \
                    int64_t w0 = ow * p->sw - p->pw, w1 = w0 + (p->kw - 1) * p->dw + 1;                    \
                    if (w1 > p->W) w1 = p->W;                                                              \
                    if (w0 < 0) w0 += (-w0 + p->dw - 1) / p->dw * p->dw;                                  \
                    int64_t best = h0 * p->W + w0;                                                         \
                    T m = -(T)INFINITY;                                                                    \
                    for (int64_t ih = h0; ih < h1; ih += p->dh)                                            \
                        for (int64_t iw = w0; iw < w1; iw += p->dw) {                                      \
                            T v = in[ih * p->W + iw];                                                      \
                            if (v > m || v != v) {                                                         \
                                m = v;                                                                     \
                                best = ih * p->W + iw;                                                     \
                            }                                                                              \
                        }                                                                                  \
                    if (o) o[oh * p->Wo + ow] = m;                                                         \
                    if (oi) oi[oh * p->Wo + ow] = best;                                                    \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        free(off);                                                                                         \
    }
MAXPOOL(f32, float, )
MAXPOOL(f64, double, COLD_CODE) /* float64: for size */

typedef struct {
    const PoolGeo *p;
    int64_t *idx; /* NULL: values only */
} MaxCall;

static int maxpool_compute(ct_dtype cd, void *const *in, void *out, const void *arg) {
    const MaxCall *c = arg;
    if (cd == CT_FLOAT32) maxpool_f32(in[0], out, c->idx, c->p);
    else maxpool_f64(in[0], out, c->idx, c->p);
    return 0;
}

/* max_pool2d's values, or (indices) its int64 indices alone. */
static TensorImpl *max_pool2d_run(const OpArgs *a, bool indices) {
    const char *name = "max_pool2d";
    const TensorImpl *x = a->t[0];
    PoolGeo p = {.kh = a->i[0], .kw = a->i[1], .sh = a->i[2], .sw = a->i[3], .ph = a->i[4], .pw = a->i[5],
                 .dh = a->i[6], .dw = a->i[7], .ceil = a->i[8] != 0};
    if (x->ndim != 3 && x->ndim != 4)
        return c10_error("%s: non-empty 3D or 4D (batch mode) tensor expected for input", name);
    pool_sizes(x, &p);
    if (pool_out(name, p.H, p.kh, p.ph, p.sh, p.dh, p.ceil, &p.Ho) ||
        pool_out(name, p.W, p.kw, p.pw, p.sw, p.dw, p.ceil, &p.Wo) || pool_shape_check(name, x, &p) ||
        float_only(name, name, x->dtype))
        return NULL;
    int64_t s[4];
    int nd = pool_out_shape(&p, s);
    ct_dtype cd = c10_opmath(x->dtype);
    MaxCall c = {&p, NULL};
    if (!indices) return run_compute(c10_empty(s, nd, x->dtype, x->device), cd, &x, 1, 0, false, maxpool_compute, &c);
    TensorImpl *idx = c10_empty(s, nd, CT_INT64, x->device), *xc = NULL;
    if (!idx || idx->device == CT_META || idx->numel == 0) return idx;
    if (!(xc = in_compute(x, cd))) {
        c10_release(idx);
        return NULL;
    }
    c.idx = (int64_t *)c10_data(idx);
    maxpool_compute(cd, (void *[]){c10_data(xc)}, NULL, &c);
    c10_release(xc);
    return idx;
}

/* t[0] = input [N,] C, H, W; i: kernel[2], stride[2], padding[2], dilation[2], ceil_mode.
 * The max_pool2d row gives the values, the max_pool2d_indices row the indices
 * (int64, into each H*W plane; not differentiable). (Two single-output rows
 * rather than one with two outputs: the backward recomputes the indices from
 * the saved input.) */
int fwd_max_pool2d(int op, const OpArgs *a, TensorImpl **out) {
    TensorImpl *y = max_pool2d_run(a, op == OP_max_pool2d_indices);
    return (out[0] = at_format_like(y, (const TensorImpl *const *)a->t, 1)) ? 1 : -1;
}

/* Scatter-add of grad [.., Ho, Wo] through indices into zeros of the input's
 * shape (the max-pool gradient), or the gather back (its derivative). */
static int check_idx(const char *op, const TensorImpl *g, const TensorImpl *idx) {
    if (idx->dtype != CT_INT64) return c10_error_int("%s: indices must be int64", op);
    if (g->ndim != idx->ndim || memcmp(g->sizes, idx->sizes, sizeof(int64_t) * (size_t)g->ndim) || g->ndim < 2)
        return c10_error_int("%s: grad %s and indices %s must have the same shape", op,
                             c10_shape_str(g->sizes, g->ndim), c10_shape_str(idx->sizes, idx->ndim));
    return at_same_device(op, g, idx) ? 0 : -1;
}

typedef struct {
    int64_t planes, hw, HW; /* planes of hw grads and indices, of HW inputs */
} ScatterCall;

/* out[plane, idx[plane, k]] += grad[plane, k]. An index outside the plane is
 * a window wholly in the padding (dilated, ceil_mode): its -inf took no input,
 * and its gradient goes nowhere (torch 1.13 writes it out of bounds). */
#define SCATTER(SUF, T)                                                                                   \
    static int scatter_##SUF(const T *gv, const int64_t *ix, T *ov, const ScatterCall *c) {               \
        OMP(omp parallel for schedule(static) if (c->planes * c->hw > 32768))                              \
        for (int64_t pl = 0; pl < c->planes; pl++)                                                         \
            for (int64_t k = 0; k < c->hw; k++) {                                                          \
                int64_t j = ix[pl * c->hw + k];                                                            \
                if (j >= 0 && j < c->HW) ov[pl * c->HW + j] += gv[pl * c->hw + k];                         \
            }                                                                                              \
        return 0;                                                                                          \
    }
SCATTER(f32, float)
SCATTER(f64, double)

static int scatter_compute(ct_dtype cd, void *const *in, void *out, const void *arg) {
    return cd == CT_FLOAT32 ? scatter_f32(in[0], in[1], out, arg) : scatter_f64(in[0], in[1], out, arg);
}

/* t[0] = grad_output, t[1] = indices (same shape); i: the input's ndim and sizes. */
int fwd_max_pool2d_backward(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const char *name = "max_pool2d_backward";
    const TensorImpl *g = a->t[0], *idx = a->t[1];
    int nd = (int)a->i[0];
    if (check_idx(name, g, idx)) return -1;
    if (nd != g->ndim) return c10_error_int("%s: input and grad ranks differ", name);
    for (int d = 0; d < nd - 2; d++)
        if (a->i[1 + d] != g->sizes[d]) return c10_error_int("%s: input and grad shapes differ", name);
    if (!c10_is_float(g->dtype)) return c10_error_int("%s: unsupported dtype", name);
    TensorImpl *o = c10_full(a->i + 1, nd, 0, g->dtype, g->device);
    if (!o || g->numel == 0) return (out[0] = o) ? 1 : -1;
    ScatterCall c = {g->numel / (g->sizes[nd - 2] * g->sizes[nd - 1]), g->sizes[nd - 2] * g->sizes[nd - 1],
                     o->sizes[nd - 2] * o->sizes[nd - 1]};
    const TensorImpl *ts[2] = {g, idx};
    return (out[0] = run_compute(o, c10_opmath(g->dtype), ts, 2, 2, true, scatter_compute, &c)) ? 1 : -1;
}

/* t[0] = src [.., H, W], t[1] = indices [.., Ho, Wo] (leading dims equal):
 * out[.., k] = src[.., indices[.., k]] within each plane. */
int fwd_max_pool2d_gather(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const char *name = "max_pool2d_gather";
    const TensorImpl *src = a->t[0], *idx = a->t[1];
    int nd = src->ndim;
    if (idx->dtype != CT_INT64 || idx->ndim != nd || nd < 2) return c10_error_int("%s: invalid indices", name);
    for (int d = 0; d < nd - 2; d++)
        if (src->sizes[d] != idx->sizes[d]) return c10_error_int("%s: invalid indices", name);
    if (!at_same_device(name, src, idx)) return -1;
    TensorImpl *o = c10_empty(idx->sizes, nd, src->dtype, src->device);
    if (!o) return -1;
    out[0] = o;
    if (src->device == CT_META || o->numel == 0) return 1;
    int64_t HW = src->sizes[nd - 2] * src->sizes[nd - 1], hw = idx->sizes[nd - 2] * idx->sizes[nd - 1];
    int64_t planes = o->numel / hw;
    TensorImpl *sc = at_contiguous(src), *ic = sc ? at_contiguous(idx) : NULL;
    if (!ic) {
        c10_release(sc);
        return -1;
    }
    const int64_t *ix = (const int64_t *)c10_data(ic);
    int64_t es = (int64_t)c10_elsize[src->dtype];
    const char *sv = c10_data(sc);
    char *ov = c10_data(o);
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t k = 0; k < hw; k++) { /* outside the plane: a window in the padding, 0 */
            int64_t j = ix[pl * hw + k];
            if (j >= 0 && j < HW) memcpy(ov + (pl * hw + k) * es, sv + (pl * HW + j) * es, (size_t)es);
            else memset(ov + (pl * hw + k) * es, 0, (size_t)es);
        }
    c10_release(sc);
    c10_release(ic);
    return 1;
}

/* ------------------------------------------------------------- avg_pool2d */

/* i: kernel[2], stride[2], padding[2], ceil_mode, count_include_pad, divisor_override (0: none) */
static int avg_geo(const char *name, const TensorImpl *x, const int64_t *i, PoolGeo *p, int64_t *div) {
    *p = (PoolGeo){.kh = i[0], .kw = i[1], .sh = i[2], .sw = i[3], .ph = i[4], .pw = i[5], .dh = 1, .dw = 1,
                   .ceil = i[6] != 0};
    *div = i[8];
    if (x->ndim < 3) {
        int lo = x->ndim ? -x->ndim : -1, hi = x->ndim ? x->ndim - 1 : 0;
        return c10_error_int("%s: Dimension out of range (expected to be in range of [%d, %d], but got -3)", name, lo,
                             hi);
    }
    p->batched = x->ndim == 4;
    p->N = x->ndim == 4 ? x->sizes[0] : 1;
    p->C = x->sizes[x->ndim - 3];
    p->H = x->sizes[x->ndim - 2];
    p->W = x->sizes[x->ndim - 1];
    if (pool_out(name, p->H, p->kh, p->ph, p->sh, 1, p->ceil, &p->Ho) ||
        pool_out(name, p->W, p->kw, p->pw, p->sw, 1, p->ceil, &p->Wo) || pool_shape_check(name, x, p))
        return -1;
    if (x->dtype == CT_BOOL) return c10_error_int("%s: \"avg_pool2d\" not implemented for 'Bool'", name);
    return 0;
}

/* The window of output (oh, ow) and its divisor, as PyTorch computes them. */
#define AVG_WINDOW                                                                                      \
    int64_t h0 = oh * p->sh - p->ph, w0 = ow * p->sw - p->pw;                                            \
    int64_t h1 = h0 + p->kh, w1 = w0 + p->kw;                                                            \
    if (h1 > p->H + p->ph) h1 = p->H + p->ph;                                                           \
    if (w1 > p->W + p->pw) w1 = p->W + p->pw;                                                           \
    int64_t pool; /* windows past 2^63 elements (huge kernels) divide by the largest int64 */            \
    if (__builtin_mul_overflow(h1 - h0, w1 - w0, &pool)) pool = INT64_MAX;                              \
    if (h0 < 0) h0 = 0;                                                                                 \
    if (w0 < 0) w0 = 0;                                                                                 \
    if (h1 > p->H) h1 = p->H;                                                                           \
    if (w1 > p->W) w1 = p->W;                                                                           \
    int64_t dv = div ? div : cip ? pool : (h1 - h0) * (w1 - w0);

#define AVGPOOL(SUF, T, ACC)                                                                              \
    static void avgpool_##SUF(const T *x, T *y, const PoolGeo *p, int64_t div, bool cip) {                \
        int64_t planes = p->N * p->C;                                                                      \
        OMP(omp parallel for schedule(static) if (planes * p->Ho * p->Wo > 32768))                  \
        for (int64_t pl = 0; pl < planes; pl++) {                                                          \
            const T *in = x + pl * p->H * p->W;                                                            \
            T *o = y + pl * p->Ho * p->Wo;                                                                 \
            for (int64_t oh = 0; oh < p->Ho; oh++)                                                         \
                for (int64_t ow = 0; ow < p->Wo; ow++) {                                                   \
                    AVG_WINDOW                                                                             \
                    if (h0 >= h1 || w0 >= w1) {                                                            \
                        o[oh * p->Wo + ow] = 0;                                                            \
                        continue;                                                                          \
                    }                                                                                      \
                    ACC s = 0;                                                                             \
                    for (int64_t ih = h0; ih < h1; ih++)                                                   \
                        for (int64_t iw = w0; iw < w1; iw++) s += (ACC)in[ih * p->W + iw];                 \
                    o[oh * p->Wo + ow] = (T)(s / (ACC)dv);                                                 \
                }                                                                                          \
        }                                                                                                  \
    }                                                                                                      \
    static void avgpool_bwd_##SUF(const T *gy, T *gx, const PoolGeo *p, int64_t div, bool cip) {           \
        int64_t planes = p->N * p->C;                                                                      \
        OMP(omp parallel for schedule(static) if (planes * p->Ho * p->Wo > 32768))                  \
        for (int64_t pl = 0; pl < planes; pl++) {                                                          \
            T *gi = gx + pl * p->H * p->W;                                                                 \
            const T *go = gy + pl * p->Ho * p->Wo;                                                         \
            for (int64_t oh = 0; oh < p->Ho; oh++)                                                         \
                for (int64_t ow = 0; ow < p->Wo; ow++) {                                                   \
                    AVG_WINDOW                                                                             \
                    if (h0 >= h1 || w0 >= w1) continue;                                                    \
                    T v = (T)(go[oh * p->Wo + ow] / (T)dv);                                                \
                    for (int64_t ih = h0; ih < h1; ih++)                                                   \
                        for (int64_t iw = w0; iw < w1; iw++) gi[ih * p->W + iw] += v;                      \
                }                                                                                          \
        }                                                                                                  \
    }
AVGPOOL(f32, float, float)
AVGPOOL(f64, double, double)
AVGPOOL(i64, int64_t, int64_t)

typedef struct {
    bool backward, cip;
    const PoolGeo *p;
    int64_t div;
} AvgCall;

static int avg_compute(ct_dtype cd, void *const *in, void *out, const void *arg) {
    const AvgCall *c = arg;
    if (!c->backward) {
        if (cd == CT_FLOAT32) avgpool_f32(in[0], out, c->p, c->div, c->cip);
        else if (cd == CT_FLOAT64) avgpool_f64(in[0], out, c->p, c->div, c->cip);
        else avgpool_i64(in[0], out, c->p, c->div, c->cip);
    } else {
        if (cd == CT_FLOAT32) avgpool_bwd_f32(in[0], out, c->p, c->div, c->cip);
        else if (cd == CT_FLOAT64) avgpool_bwd_f64(in[0], out, c->p, c->div, c->cip);
        else avgpool_bwd_i64(in[0], out, c->p, c->div, c->cip);
    }
    return 0;
}

static TensorImpl *avg_run(bool backward, const TensorImpl *t, const PoolGeo *p, int64_t div, bool cip,
                           const int64_t *s, int nd) {
    TensorImpl *o = backward ? c10_full(s, nd, 0, t->dtype, t->device) : c10_empty(s, nd, t->dtype, t->device);
    AvgCall c = {backward, cip, p, div};
    if (!o || t->numel == 0) return o;
    return run_compute(o, la_compute_dtype(t->dtype), &t, 1, 0, backward, avg_compute, &c);
}

/* t[0] = input [N,] C, H, W; i: kernel[2], stride[2], padding[2], ceil_mode,
 * count_include_pad, divisor_override (0: none) */
int fwd_avg_pool2d(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    PoolGeo p;
    int64_t div;
    if (avg_geo("avg_pool2d", a->t[0], a->i, &p, &div)) return -1;
    int64_t s[4];
    int nd = pool_out_shape(&p, s);
    TensorImpl *y = avg_run(false, a->t[0], &p, div, a->i[7] != 0, s, nd);
    return (out[0] = at_format_like(y, (const TensorImpl *const *)a->t, 1)) ? 1 : -1;
}

/* t[0] = grad_output; i: avg_pool2d's 9 parameters, then the input's ndim and sizes */
int fwd_avg_pool2d_backward(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const char *name = "avg_pool2d_backward";
    const TensorImpl *g = a->t[0];
    int nd = (int)a->i[9];
    if (nd != 3 && nd != 4) return c10_error_int("%s: invalid input shape", name);
    TensorImpl *meta = c10_empty(a->i + 10, nd, g->dtype, CT_META);
    if (!meta) return -1;
    PoolGeo p;
    int64_t div;
    int rc = avg_geo(name, meta, a->i, &p, &div);
    c10_release(meta);
    if (rc) return -1;
    int64_t s[4];
    int ond = pool_out_shape(&p, s);
    if (g->ndim != ond || memcmp(g->sizes, s, sizeof(int64_t) * (size_t)ond))
        return c10_error_int("%s: expected grad_output of size %s, but got %s", name, c10_shape_str(s, ond),
                             c10_shape_str(g->sizes, g->ndim));
    return (out[0] = avg_run(true, g, &p, div, a->i[7] != 0, a->i + 10, nd)) ? 1 : -1;
}

/* ---------------------------------------------------- adaptive_avg_pool2d */

static inline int64_t a_start(int64_t o, int64_t O, int64_t I) { return (o * I) / O; }
static inline int64_t a_end(int64_t o, int64_t O, int64_t I) { return ((o + 1) * I + O - 1) / O; }

#define ADAPTIVE(SUF, T)                                                                                  \
    static void adaptive_##SUF(const T *x, T *y, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, \
                               bool backward) {                                                          \
        OMP(omp parallel for schedule(static) if (planes * H * W > 32768))                         \
        for (int64_t pl = 0; pl < planes; pl++) {                                                         \
            for (int64_t oh = 0; oh < Ho; oh++) {                                                         \
                int64_t h0 = a_start(oh, Ho, H), h1 = a_end(oh, Ho, H);                                   \
                for (int64_t ow = 0; ow < Wo; ow++) {                                                     \
                    int64_t w0 = a_start(ow, Wo, W), w1 = a_end(ow, Wo, W);                               \
                    T n = (T)((h1 - h0) * (w1 - w0));                                                     \
                    if (!backward) {                                                                      \
                        const T *in = x + pl * H * W;                                                     \
                        T s = 0;                                                                          \
                        for (int64_t ih = h0; ih < h1; ih++)                                              \
                            for (int64_t iw = w0; iw < w1; iw++) s += in[ih * W + iw];                    \
                        y[(pl * Ho + oh) * Wo + ow] = s / n;                                              \
                    } else {                                                                              \
                        T v = x[(pl * Ho + oh) * Wo + ow] / n;                                            \
                        T *gi = y + pl * H * W;                                                           \
                        for (int64_t ih = h0; ih < h1; ih++)                                              \
                            for (int64_t iw = w0; iw < w1; iw++) gi[ih * W + iw] += v;                    \
                    }                                                                                     \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    }
ADAPTIVE(f32, float)
ADAPTIVE(f64, double)

typedef struct {
    bool backward;
    int64_t planes, H, W, Ho, Wo;
} AdaptiveCall;

static int adaptive_compute(ct_dtype cd, void *const *in, void *out, const void *arg) {
    const AdaptiveCall *c = arg;
    if (cd == CT_FLOAT32) adaptive_f32(in[0], out, c->planes, c->H, c->W, c->Ho, c->Wo, c->backward);
    else adaptive_f64(in[0], out, c->planes, c->H, c->W, c->Ho, c->Wo, c->backward);
    return 0;
}

/* x: the input (forward) or grad_output (backward); s/nd: the result's shape;
 * plane sizes H, W (input) and Ho, Wo (output). */
static TensorImpl *adaptive_run(bool backward, const TensorImpl *x, const int64_t *s, int nd, int64_t H, int64_t W,
                                int64_t Ho, int64_t Wo) {
    TensorImpl *o = backward ? c10_full(s, nd, 0, x->dtype, x->device) : c10_empty(s, nd, x->dtype, x->device);
    if (!o || o->numel == 0 || x->numel == 0) return o; /* an output size of 0: no division by H*W */
    AdaptiveCall c = {backward, o->numel / (backward ? H * W : Ho * Wo), H, W, Ho, Wo};
    return run_compute(o, c10_opmath(x->dtype), &x, 1, 0, backward, adaptive_compute, &c);
}

static int adaptive_check(const char *name, const TensorImpl *x, int64_t oh, int64_t ow) {
    if (oh < 0 || ow < 0)
        return c10_error_int("%s: elements of output_size must be greater than or equal to 0 but received {%lld, %lld}",
                             name, (long long)oh, (long long)ow);
    if (x->ndim != 3 && x->ndim != 4)
        return c10_error_int("%s: adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got %s", name,
                             c10_shape_str(x->sizes, x->ndim));
    for (int i = -2; i <= -1; i++)
        if (x->sizes[x->ndim + i] <= 0)
            return c10_error_int("%s: adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                                 "dimensions, but input has sizes %s with dimension %d being empty",
                                 name, c10_shape_str(x->sizes, x->ndim), x->ndim + i);
    return float_only(name, "adaptive_avg_pool2d", x->dtype);
}

/* t[0] = input [N,] C, H, W; i: output height, width */
int fwd_adaptive_avg_pool2d(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *x = a->t[0];
    if (adaptive_check("adaptive_avg_pool2d", x, a->i[0], a->i[1])) return -1;
    if (a->i[0] == 1 && a->i[1] == 1) { /* the mean over the planes, as torch's 1 x 1 does */
        OpArgs m = {.t = {(TensorImpl *)x}, .nt = 1, .ni = 4, .i = {1, 2, -2, -1}};
        return (out[0] = at_call1(OP_mean_dims, &m)) ? 1 : -1;
    }
    int64_t s[4];
    memcpy(s, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
    s[x->ndim - 2] = a->i[0], s[x->ndim - 1] = a->i[1];
    TensorImpl *y = adaptive_run(false, x, s, x->ndim, x->sizes[x->ndim - 2], x->sizes[x->ndim - 1], a->i[0], a->i[1]);
    return (out[0] = at_format_like(y, &x, 1)) ? 1 : -1;
}

/* t[0] = grad_output; i: the input's ndim and sizes */
int fwd_adaptive_avg_pool2d_backward(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const char *name = "adaptive_avg_pool2d_backward";
    const TensorImpl *g = a->t[0];
    int nd = (int)a->i[0];
    const int64_t *xs = a->i + 1;
    if ((nd != 3 && nd != 4) || g->ndim != nd) return c10_error_int("%s: invalid shapes", name);
    for (int d = 0; d < nd - 2; d++)
        if (xs[d] != g->sizes[d]) return c10_error_int("%s: invalid shapes", name);
    if (xs[nd - 2] <= 0 || xs[nd - 1] <= 0) return c10_error_int("%s: invalid shapes", name);
    if (float_only(name, "adaptive_avg_pool2d_backward", g->dtype)) return -1;
    return (out[0] = adaptive_run(true, g, xs, nd, xs[nd - 2], xs[nd - 1], g->sizes[nd - 2], g->sizes[nd - 1])) ? 1
                                                                                                                : -1;
}
