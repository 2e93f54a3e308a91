/* softmax.c: the rows and column blocks of softmax and log_softmax (float,
 * double, float16 and bfloat16, the last two computed in float), called by
 * reduce.c. */
#include "ops/kernels/reduce_kernels.h"
#include "ops/kernels/vmath.h"
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---------------------------------------------------------------- columns */

static inline float flog(float x) { return logf(x); }
static inline double dlog(double x) { return log(x); }
#define LOG_float flog
#define LOG_double dlog
#define SB 256 /* columns per block when the softmax dim is not innermost */

/* The column blocks, when the softmax dim is not the innermost: the max, the
 * exps and their sums, the scaling, each a pass over the block's D rows. */
#define SOFTMAX_COLS(T)                                                                  \
    /* columns j0..j0+bl of one outer slice [D, inner] */                                \
    static void softmax_cols_##T(const T *x, T *y, int64_t D, int64_t inner, int64_t bl, bool logm) { \
        T m[SB], s[SB];                                                                  \
        for (int64_t j = 0; j < bl; j++) m[j] = -INFINITY, s[j] = 0;                     \
        for (int64_t k = 0; k < D; k++) {                                                \
            const T *restrict r = x + k * inner;                                         \
            for (int64_t j = 0; j < bl; j++) m[j] = r[j] > m[j] ? r[j] : m[j];           \
        }                                                                                \
        for (int64_t k = 0; k < D; k++) {                                                \
            const T *restrict r = x + k * inner;                                         \
            T *restrict w = y + k * inner;                                               \
            for (int64_t j = 0; j < bl; j++) {                                           \
                T e = EXP_##T(r[j] - m[j]);                                              \
                s[j] += e;                                                               \
                if (!logm) w[j] = e;                                                     \
            }                                                                            \
        }                                                                                \
        for (int64_t j = 0; j < bl; j++) s[j] = logm ? LOG_##T(s[j]) : 1 / s[j];         \
        for (int64_t k = 0; k < D; k++) {                                                \
            const T *restrict r = x + k * inner;                                         \
            T *restrict w = y + k * inner;                                               \
            if (logm)                                                                    \
                for (int64_t j = 0; j < bl; j++) w[j] = (r[j] - m[j]) - s[j];            \
            else                                                                         \
                for (int64_t j = 0; j < bl; j++) w[j] *= s[j];                           \
        }                                                                                \
    }                                                                                    \
    void softmax_##T(const T *x, T *y, int64_t outer, int64_t D, int64_t inner, bool logm, int nt) { \
        (void)nt;                                                                        \
        int64_t nb = (inner + SB - 1) / SB;                                              \
        OMP_FOR_NT                                                                       \
        for (int64_t u = 0; u < outer * nb; u++) {                                       \
            int64_t o = u / nb, j0 = (u % nb) * SB, bl = inner - j0 < SB ? inner - j0 : SB; \
            softmax_cols_##T(x + o * D * inner + j0, y + o * D * inner + j0, D, inner, bl, logm); \
        }                                                                                \
    }
SOFTMAX_COLS(float)
SOFTMAX_COLS(double)

/* ---------------------------------------------------------------- rows */

static inline int64_t thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
/* rk_row_offset without its divisions for rows that step evenly (nd 1) */
static inline int64_t row_off(const RowGeom *g, int64_t o) {
    return g->nd == 1 ? o * g->stride[0] : rk_row_offset(g, o);
}
#define GATHER(T)                                                                        \
    static inline const T *gather_##T(T *restrict b, const T *restrict r, int64_t es, int64_t n) { \
        if (es == 2) /* a ::2 slice: a constant stride vectorises (permutes) */          \
            for (int64_t i = 0; i < n; i++) b[i] = r[2 * i];                             \
        else                                                                             \
            for (int64_t i = 0; i < n; i++) b[i] = r[i * es];                            \
        return b;                                                                        \
    }
GATHER(float)
GATHER(double)
GATHER(uint16_t)
/* log(sum) of a bfloat16 row as torch 1.13 takes it: the sum and its log each
 * rounded to bfloat16 (its log_softmax runs on Vectorized<BFloat16>), before
 * (x - max) - log(sum) in float, rounded once. float16 (no torch 1.13 kernel)
 * stays in float throughout. */
static inline float round_bf16(float f) { /* to nearest even, NaN kept */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float r;
    memcpy(&r, &u, sizeof r);
    return f != f ? f : r;
}
static inline float ls_bf16(float s) { return round_bf16(logf(round_bf16(s))); }

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
/* Three passes over a row x of n elements (stored type S, computed in C: float
 * for float32 and the 16-bit types): its max, read from memory; the exps of
 * x - max, summed (softmax: stored in b, the row of y itself or a buffer), in
 * L1 while the next row is prefetched; the scaling of b into y (softmax), or
 * (x - max) - log(sum) (log_softmax), rounded once to S. The last two hit L1.
 * (Non-temporal stores of y, from a buffer b, were no faster.) */
#define V_float __m512
#define V_double __m512d
#define M_float __mmask16
#define M_double __mmask8
#define W_float 16
#define W_double 8
#define VOP_float(op) _mm512_##op##_ps
#define VOP_double(op) _mm512_##op##_pd
#define VEXP_float vm_expf16
#define VEXP_double vm_exp8
/* per stored type: LD, W elements widened to C; LDZ, the first under mask k
 * (zeros after); ST, STM (under k): narrowed from C */
#define LOADS(tag, T, ps)                                                                \
    static inline V_##T LD_##tag(const T *p) { return _mm512_loadu_##ps(p); }            \
    static inline V_##T LDZ_##tag(M_##T k, const T *p) { return _mm512_maskz_loadu_##ps(k, p); }
#define PLAIN(tag, T, ps)                                                                \
    LOADS(tag, T, ps)                                                                    \
    static inline void ST_##tag(T *p, V_##T v) { _mm512_storeu_##ps(p, v); }             \
    static inline void STM_##tag(T *p, M_##T k, V_##T v) { _mm512_mask_storeu_##ps(p, k, v); }
PLAIN(f32, float, ps)
PLAIN(f64, double, pd)
LOADS(float, float, ps) /* b's */
LOADS(double, double, pd)
static inline __m512 widen_f16(__m256i h) { return _mm512_cvtph_ps(h); }
static inline __m256i narrow_f16(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline __m512 widen_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
/* to nearest even, a NaN quiet with its sign (as c10_f2bf): vcvtneps2bf16,
 * but for vectors with subnormals (which it flushes to zero) */
static inline __m256i narrow_bf16(__m512 v) {
#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
    if (!_mm512_fpclass_ps_mask(v, 0x20)) return (__m256i)_mm512_cvtneps_pbh(v);
#endif
    __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1))));
    r = _mm512_srli_epi32(r, 16);
    r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}
#define HALF(tag)                                                                        \
    static inline __m512 LD_##tag(const uint16_t *p) { return widen_##tag(_mm256_loadu_si256((const __m256i *)p)); } \
    static inline __m512 LDZ_##tag(__mmask16 k, const uint16_t *p) { return widen_##tag(_mm256_maskz_loadu_epi16(k, p)); } \
    static inline void ST_##tag(uint16_t *p, __m512 v) { _mm256_storeu_si256((__m256i *)p, narrow_##tag(v)); } \
    static inline void STM_##tag(uint16_t *p, __mmask16 k, __m512 v) { _mm256_mask_storeu_epi16(p, k, narrow_##tag(v)); }
HALF(f16)
HALF(bf16)
/* the last pass's functions of a vector v of x or b */
#define STORE_FNS(C)                                                                     \
    static inline V_##C scale_##C(V_##C v, V_##C a, V_##C c) {                           \
        (void)c;                                                                         \
        return VOP_##C(mul)(v, a);                                                       \
    }                                                                                    \
    static inline V_##C logsub_##C(V_##C v, V_##C a, V_##C c) { return VOP_##C(sub)(VOP_##C(sub)(v, a), c); }
STORE_FNS(float)
STORE_FNS(double)
#define TAIL(C, r) ((M_##C)((1u << (r)) - 1))
/* y[i] = F(a vector of src at i, a, c) over the row; src's loads: L's */
#define STORE_ROW(tag, C, y, n, L, src, F, a, c)                                         \
    do {                                                                                 \
        int64_t i = 0;                                                                   \
        for (; i + W_##C <= n; i += W_##C) ST_##tag(y + i, F##_##C(LD_##L(src + i), a, c)); \
        if (i < n) STM_##tag(y + i, TAIL(C, n - i), F##_##C(LDZ_##L(TAIL(C, n - i), src + i), a, c)); \
    } while (0)
#define ROW(tag, S, C, LS)                                                               \
    static inline C max_##tag(const S *x, int64_t n) {                                   \
        V_##C m0 = VOP_##C(set1)(-INFINITY), m1 = m0, m2 = m0, m3 = m0;                  \
        int64_t i = 0;                                                                   \
        for (; i + 4 * W_##C <= n; i += 4 * W_##C) {                                     \
            m0 = VOP_##C(max)(LD_##tag(x + i), m0);                                      \
            m1 = VOP_##C(max)(LD_##tag(x + i + W_##C), m1);                              \
            m2 = VOP_##C(max)(LD_##tag(x + i + 2 * W_##C), m2);                          \
            m3 = VOP_##C(max)(LD_##tag(x + i + 3 * W_##C), m3);                          \
        }                                                                                \
        for (; i + W_##C <= n; i += W_##C) m0 = VOP_##C(max)(LD_##tag(x + i), m0);       \
        m0 = VOP_##C(mask_max)(m0, TAIL(C, n - i), LDZ_##tag(TAIL(C, n - i), x + i), m0); \
        return VOP_##C(reduce_max)(VOP_##C(max)(VOP_##C(max)(m0, m1), VOP_##C(max)(m2, m3))); \
    }                                                                                    \
    /* the sum of exp(x - m), each stored in b unless NULL; the tail's added in \
     * order first (vmath.h's vm_exp*_sum_n order: a short row's sum is torch's) */ \
    static inline C expsum_##tag(const S *x, C *b, C m, int64_t n, const S *next) {      \
        V_##C vm = VOP_##C(set1)(m), acc = VOP_##C(setzero)();                           \
        int64_t i = 0;                                                                   \
        for (; i + W_##C <= n; i += W_##C) {                                             \
            if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T0);               \
            V_##C e = VEXP_##C(VOP_##C(sub)(LD_##tag(x + i), vm));                       \
            acc = VOP_##C(add)(acc, e);                                                  \
            if (b) VOP_##C(storeu)(b + i, e);                                            \
        }                                                                                \
        C s = 0, t[W_##C];                                                               \
        if (i < n) {                                                                     \
            V_##C e = VEXP_##C(VOP_##C(sub)(LDZ_##tag(TAIL(C, n - i), x + i), vm));      \
            VOP_##C(storeu)(t, e);                                                       \
            if (b) VOP_##C(mask_storeu)(b + i, TAIL(C, n - i), e);                       \
            for (int j = 0; j < n - i; j++) s += t[j];                                   \
        }                                                                                \
        return s + VOP_##C(reduce_add)(acc);                                             \
    }                                                                                    \
    static void row_##tag(const S *x, S *y, C *b, int64_t n, bool logm, const S *next) { \
        C m = max_##tag(x, n);                                                           \
        V_##C a = VOP_##C(set1)(m), c;                                                   \
        if (logm) {                                                                      \
            c = VOP_##C(set1)(LS(expsum_##tag(x, NULL, m, n, next)));                    \
            STORE_ROW(tag, C, y, n, tag, x, logsub, a, c);                           \
        } else {                                                                         \
            a = VOP_##C(set1)(1 / expsum_##tag(x, b, m, n, next));                       \
            STORE_ROW(tag, C, y, n, C, b, scale, a, a);                             \
        }                                                                                \
    }
ROW(f32, float, float, logf)
ROW(f64, double, double, dlog)
ROW(f16, uint16_t, float, logf)
ROW(bf16, uint16_t, float, ls_bf16)
#else
/* Portable rows: the max in LANES running maxima, vmath.h's exp-and-sum, the
 * scaling; 16-bit rows widened into b, computed there, narrowed. */
#define LANES 32
#define EXP_SUM_float vm_expf_sum_n
#define EXP_SUM_double vm_exp_d_sum_n
#define ROW_PLAIN(T)                                                                     \
    /* bf: log(sum) as ls_bf16 (a bfloat16 row's) */                                   \
    static void row_##T(const T *x, T *y, int64_t n, bool logm, const T *next, bool bf) { \
        T mv[LANES];                                                                     \
        for (int j = 0; j < LANES; j++) mv[j] = -INFINITY;                               \
        int64_t i = 0;                                                                   \
        for (; i + LANES <= n; i += LANES) {                                             \
            if (next)                                                                    \
                for (int q = 0; q < LANES; q += 64 / (int)sizeof(T)) __builtin_prefetch(next + i + q); \
            for (int j = 0; j < LANES; j++) mv[j] = x[i + j] > mv[j] ? x[i + j] : mv[j]; \
        }                                                                                \
        T m = -INFINITY;                                                                 \
        for (; i < n; i++) m = x[i] > m ? x[i] : m;                                      \
        for (int j = 0; j < LANES; j++) m = mv[j] > m ? mv[j] : m;                       \
        if (logm) {                                                                      \
            T s = EXP_SUM_##T(NULL, x, m, n), ls = bf ? (T)ls_bf16((float)s) : LOG_##T(s); \
            /* (x - m) - ls, in torch's order: m + ls loses x's digits */                \
            for (i = 0; i < n; i++) y[i] = (x[i] - m) - ls;                              \
        } else {                                                                         \
            T inv = 1 / EXP_SUM_##T(y, x, m, n);                                         \
            for (i = 0; i < n; i++) y[i] *= inv;                                         \
        }                                                                                \
    }                                                                                    \
    static void row_##T##_b(const T *x, T *y, T *b, int64_t n, bool logm, const T *next) { \
        (void)b;                                                                         \
        row_##T(x, y, n, logm, next, false);                                             \
    }
ROW_PLAIN(float)
ROW_PLAIN(double)
#define row_f32 row_float_b
#define row_f64 row_double_b
#define ROW_HALF(tag, bf)                                                                \
    static void row_##tag(const uint16_t *x, uint16_t *y, float *b, int64_t n, bool logm, const uint16_t *next) { \
        (void)next;                                                                      \
        c10_half_to_float_n(b, x, bf, n);                                                \
        row_float(b, b, n, logm, NULL, bf);                                              \
        c10_float_to_half_n(y, b, bf, n);                                                \
    }
ROW_HALF(f16, false)
ROW_HALF(bf16, true)
#endif

/* The rows, over nt threads. Each thread's part of buf (per bytes): eb bytes
 * for b (16-bit rows; else b is y's row), then D elements for a strided row,
 * gathered (es != 1). */
#define ROWS(tag, S, C)                                                                  \
    static void rows_##tag(const S *x, const RowGeom *g, int64_t es, S *y, int64_t outer, int64_t D, bool logm, \
                           int nt, char *buf, size_t eb, size_t per) {                    \
        (void)nt;                                                                        \
        OMP_FOR_NT                                                                       \
        for (int64_t o = 0; o < outer; o++) {                                            \
            char *tb = buf ? buf + per * (size_t)thread_num() : NULL;                    \
            const S *r = x + row_off(g, o);                                              \
            if (es != 1) r = gather_##S((S *)(void *)(tb + eb), r, es, D);               \
            const S *next = es == 1 && o + 1 < outer ? x + row_off(g, o + 1) : NULL;     \
            row_##tag(r, y + o * D, eb ? (C *)(void *)tb : (C *)(void *)(y + o * D), D, logm, next); \
        }                                                                                \
    }
ROWS(f32, float, float)
ROWS(f64, double, double)
ROWS(f16, uint16_t, float)
ROWS(bf16, uint16_t, float)

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

bool softmax_lastdim(ct_dtype dt, const void *x, const RowGeom *g, int64_t es, void *y, int64_t outer, int64_t D,
                     bool logm, int nt) {
    bool half = dt == CT_FLOAT16 || dt == CT_BFLOAT16;
    size_t cs = dt == CT_FLOAT64 ? 8 : 4, ss = half ? 2 : cs, rb = (size_t)D * ss;
    size_t eb = half ? round64((size_t)D * cs) : 0, per = eb + (es != 1 ? round64(rb) : 0);
    char *buf = per ? aligned_alloc(64, per * (size_t)nt) : NULL;
    if (per && !buf) return false;
    if (dt == CT_FLOAT32) rows_f32(x, g, es, y, outer, D, logm, nt, buf, eb, per);
    else if (dt == CT_FLOAT64) rows_f64(x, g, es, y, outer, D, logm, nt, buf, eb, per);
    else if (dt == CT_FLOAT16) rows_f16(x, g, es, y, outer, D, logm, nt, buf, eb, per);
    else rows_bf16(x, g, es, y, outer, D, logm, nt, buf, eb, per);
    free(buf);
    return true;
}
