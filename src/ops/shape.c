/* shape.c: the forwards of the view and copy rows of ops.def. Views wrap the
 * pure geometry of core/view.c; the argument layout of each is noted. */
#include "ops/ops.h"

/* Copy kernel: the engine has already converted src to dst's dtype. */
static void copy_kernel(int64_t n, char **p, const double *s) {
    memcpy(p[0], p[1], (size_t)n * (size_t)s[0]);
}

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
/* 8 rows of 16 16-bit values -> per 128-bit lane, the 8x8 transpose: x[c]
 * holds column c of the 8 rows in its low lane, column c + 8 in its high one */
static inline void lanes8x8_2(const uint16_t *in, int64_t ldi, __m256i x[8]) {
    __m256i r[8], t[8];
    for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_si256((const __m256i *)(in + k * ldi));
    for (int k = 0; k < 8; k += 2)
        t[k] = _mm256_unpacklo_epi16(r[k], r[k + 1]), t[k + 1] = _mm256_unpackhi_epi16(r[k], r[k + 1]);
    for (int q = 0; q < 8; q += 4) /* r[q + c]: columns 2c and 2c+1 of rows q..q+3 */
        for (int k = 0; k < 2; k++) {
            r[q + 2 * k] = _mm256_unpacklo_epi32(t[q + k], t[q + k + 2]);
            r[q + 2 * k + 1] = _mm256_unpackhi_epi32(t[q + k], t[q + k + 2]);
        }
    for (int c = 0; c < 4; c++)
        x[2 * c] = _mm256_unpacklo_epi64(r[c], r[c + 4]), x[2 * c + 1] = _mm256_unpackhi_epi64(r[c], r[c + 4]);
}
static inline void store32b(uint16_t *p, __m256i v, bool stream) {
    if (stream) _mm256_stream_si256((__m256i *)p, v);
    else _mm256_storeu_si256((__m256i *)p, v);
}
/* 32 rows of 16 16-bit values (stride ldi) -> 16 rows of 32 (stride ldo):
 * whole 64-byte output lines, as the 4- and 8-byte blocks write */
static inline void block_2(const void *src, int64_t ldi, void *dst, int64_t ldo, bool stream) {
    const uint16_t *in = src;
    uint16_t *out = dst;
    __m256i x[4][8]; /* x[q]: src rows 8q..8q+7 */
    for (int q = 0; q < 4; q++) lanes8x8_2(in + 8 * q * ldi, ldi, x[q]);
    for (int k = 0; k < 8; k++) { /* both halves of a line one after the other */
        store32b(out + k * ldo, _mm256_permute2x128_si256(x[0][k], x[1][k], 0x20), stream);
        store32b(out + k * ldo + 16, _mm256_permute2x128_si256(x[2][k], x[3][k], 0x20), stream);
    }
    for (int k = 0; k < 8; k++) {
        store32b(out + (k + 8) * ldo, _mm256_permute2x128_si256(x[0][k], x[1][k], 0x31), stream);
        store32b(out + (k + 8) * ldo + 16, _mm256_permute2x128_si256(x[2][k], x[3][k], 0x31), stream);
    }
}
#define SIMD_BI_4 16
#define SIMD_BJ_4 16
#define SIMD_BI_8 8
#define SIMD_BJ_8 8
#define SIMD_BI_2 16
#define SIMD_BJ_2 32
#define SFENCE() _mm_sfence()
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
    void (*tile)(const char *, char *, const TrGeom *, int64_t, int64_t, int64_t, int64_t) =
        es == 1 ? tile_1 : es == 2 ? tile_2 : es == 4 ? tile_4 : tile_8;
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
    if (!at_same_device("copy_", dst, src)) return -1;
    double es = (double)c10_elsize[dst->dtype];
    ElementwiseSpec spec = {"copy_", 1, dst->dtype, dst->dtype, dst->dtype};
    TensorImpl *in[1] = {(TensorImpl *)src}, *o = dst;
    /* copying a tensor onto itself is a no-op, as in PyTorch */
    if (src->storage == dst->storage && src->offset == dst->offset && src->dtype == dst->dtype &&
        src->ndim == dst->ndim && !memcmp(src->sizes, dst->sizes, sizeof(int64_t) * (size_t)src->ndim) &&
        !memcmp(src->strides, dst->strides, sizeof(int64_t) * (size_t)src->ndim))
        return 0;
    if (src->ndim == dst->ndim && !memcmp(src->sizes, dst->sizes, sizeof(int64_t) * (size_t)src->ndim) &&
        copy_transposed(dst, src))
        return 0;
    return ew_run(&spec, in, &o, copy_kernel, &es);
}

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
