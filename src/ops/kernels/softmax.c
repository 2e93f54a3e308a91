/* softmax.c: the rows and column blocks of softmax and log_softmax (float,
 * double, float16 and bfloat16, the last two computed in float), called by
 * reduce.c. */
#include "ops/kernels/reduce_kernels.h"
#include "ops/kernels/vmath.h"
#include <float.h>
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
 * for float32 and the 16-bit types): its max, read from memory (a 16-bit row
 * widened into a buffer b); the exps of x - max, summed (softmax: stored in b,
 * the row of y itself or the buffer), in L1 while the next row is prefetched;
 * the scaling of b into y (softmax), or (x - max) - log(sum) (log_softmax),
 * rounded once to S. The last two hit L1.
 * (Non-temporal stores of y, from a buffer b, were no faster.) */
#define V_float __m512
#define V_double __m512d
#define M_float __mmask16
#define M_double __mmask8
#define W_float 16
#define W_double 8
#define CMP_float _mm512_cmp_ps_mask
#define CMP_double _mm512_cmp_pd_mask
#define VOP_float(op) _mm512_##op##_ps
#define VOP_double(op) _mm512_##op##_pd
/* exps of x - max <= 0: vmath.h's without the upper clamp (the float one with
 * fewer multiplies) */
#define VEXP_float vm_expf16_tab
#define VEXP_double vm_exp8_le
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
/* The stored types: tag, stored type, compute type, the log of a row's sum */
#define STORED_TYPES(X)                                                          \
    X(f32, float, float, logf) X(f64, double, double, dlog) X(f16, uint16_t, float, logf) \
    X(bf16, uint16_t, float, ls_bf16)
/* 16-bit rows are widened once, by the max pass, into b, which the other two
 * read: converting in each pass was 10-15% slower (a vcvtph2ps per vector
 * costs about two cycles here) */
#define WIDE_f32 0
#define WIDE_f64 0
#define WIDE_f16 1
#define WIDE_bf16 1
/* what expsum_* prefetches: a line per vector of next, the next row (elements
 * nstep bytes apart: a gathered row's too, 25% on 16-bit ::2 slices), and for
 * writing of wy (log_softmax: y's row, written by the last pass), whose reads
 * for ownership then overlap the exps (5-25% on log_softmax; softmax, whose
 * exps go to y or b, gained nothing) */
typedef struct {
    const char *next, *wy;
    int64_t nstep, wstep;
} Ahead;
/* the sum of exp(x - m), each stored in b unless NULL; the tail's added in
 * order first (vmath.h's vm_exp*_sum_n order: a short row's sum is torch's),
 * in L1 while the next row is fetched */
#define EXPSUM(tag, S, C)                                                                \
    static inline C expsum_##tag(const S *x, C *b, C m, int64_t n, Ahead pf) {           \
        V_##C vm = VOP_##C(set1)(m), acc = VOP_##C(setzero)();                           \
        int64_t i = 0;                                                                   \
        for (; i + W_##C <= n; i += W_##C) {                                             \
            if (pf.next) _mm_prefetch(pf.next + i * pf.nstep, _MM_HINT_T0);              \
            if (pf.wy) _mm_prefetch(pf.wy + i * pf.wstep, _MM_HINT_ET0);                 \
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
    }
/* the max of x, widened into w on the way if wide */
#define ROW(tag, S, C, LS)                                                               \
    EXPSUM(tag, S, C)                                                                    \
    static inline C max_##tag(const S *x, int64_t n, C *w, bool wide) {                  \
        V_##C m[4], v;                                                                   \
        for (int k = 0; k < 4; k++) m[k] = VOP_##C(set1)(-INFINITY);                     \
        int64_t i = 0;                                                                   \
        for (; i + 4 * W_##C <= n; i += 4 * W_##C)                                       \
            for (int k = 0; k < 4; k++) {                                                \
                v = LD_##tag(x + i + k * W_##C);                                         \
                if (wide) VOP_##C(storeu)(w + i + k * W_##C, v);                         \
                m[k] = VOP_##C(max)(v, m[k]);                                            \
            }                                                                            \
        for (; i + W_##C <= n; i += W_##C) {                                             \
            v = LD_##tag(x + i);                                                         \
            if (wide) VOP_##C(storeu)(w + i, v);                                         \
            m[0] = VOP_##C(max)(v, m[0]);                                                \
        }                                                                                \
        if (i < n) {                                                                     \
            v = LDZ_##tag(TAIL(C, n - i), x + i);                                        \
            if (wide) VOP_##C(mask_storeu)(w + i, TAIL(C, n - i), v);                    \
            m[0] = VOP_##C(mask_max)(m[0], TAIL(C, n - i), v, m[0]);                     \
        }                                                                                \
        return VOP_##C(reduce_max)(VOP_##C(max)(VOP_##C(max)(m[0], m[1]), VOP_##C(max)(m[2], m[3]))); \
    }                                                                                    \
    static void row_##tag(const S *x, S *y, C *b, int64_t n, bool logm, const S *next, int64_t es) { \
        Ahead pf = {(const char *)next, logm ? (const char *)y : NULL, es * (int64_t)sizeof(S), sizeof(S)}; \
        C m = max_##tag(x, n, b, WIDE_##tag);                                            \
        C s = WIDE_##tag ? expsum_f32((const float *)b, logm ? NULL : (float *)b, m, n, pf) \
                         : expsum_##tag(x, logm ? NULL : b, m, n, pf);                   \
        const C *u = WIDE_##tag ? b : (const C *)(const void *)x; /* x, widened */      \
        V_##C a = VOP_##C(set1)(m), c;                                                   \
        if (logm) {                                                                      \
            c = VOP_##C(set1)(LS(s));                                                    \
            STORE_ROW(tag, C, y, n, C, u, logsub, a, c);                                 \
        } else {                                                                         \
            a = VOP_##C(set1)(1 / s);                                                    \
            STORE_ROW(tag, C, y, n, C, b, scale, a, a);                                  \
        }                                                                                \
    }
STORED_TYPES(ROW)

/* Columns, when the softmax dim is not the innermost: blocks of bl adjacent
 * columns of one [D, inner] slice (x, y at the block's first column), one
 * lane per column, as wide as CB elements: the blocks' rows are read in order
 * (narrower blocks sized for L2, whose rows lie inner apart, were slower).
 * The first pass reads the D rows, prefetched CPF bytes ahead, keeping per
 * column the running max m and the sum s of exp(x - m), CG rows at a time,
 * s scaled by exp(m - max) each time (exp(0) is 1: a branch on a new max,
 * taken a third of the time on [4096, 4096], cost more). m starts at
 * -FLT_MAX, not -inf: an all -inf column keeps s 0 (exp(-inf - m) is 0, where
 * -inf - -inf is NaN) and ends NaN as torch's, as +inf or NaN anywhere do
 * (through s). The second pass writes exp(x - m) / s, or (x - m) - log(s)
 * (float32's log for bfloat16 too: torch 1.13 rounds once here), each
 * rounded once to S. Narrow columns (inner under 4 W, D at least 2 W) run
 * R rows at a time, as rows of L = R * inner positions (whole vectors, 4 at
 * least: one vector's steps form a chain), position p holding column
 * p % inner; the D % R rows left update positions below inner, then each
 * column's R states are merged and copied back to all its positions. */
#define NOINLINE __attribute__((noinline)) /* one copy */
#if defined(__GNUC__) && !defined(__clang__)
#define NOCLONE __attribute__((noclone)) /* not one per call's constants */
#else
#define NOCLONE
#endif
#define CB 1024 /* the widest block, in elements */
#define CG 4    /* rows per step of the running max (8, in registers too: no faster, 4 KB more) */
#define CPF 16384 /* the prefetch distance, in bytes */
/* the D rows of a block at x, rs apart, lb bytes each, from row k + CPF bytes on */
static inline void cprefetch(const void *x, int64_t rs, int64_t k, int64_t D, int n, int lb) {
    int64_t d = k + (CPF + lb - 1) / lb;
    for (int g = 0; g < n && d + g < D; g++) {
        const char *p = (const char *)x + (d + g) * rs;
        for (int b = 0; b < lb; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
        _mm_prefetch(p + lb - 1, _MM_HINT_T0);
    }
}
/* the state of columns c < inner from their R positions' (c + r inner),
 * copied back to all of them */
#define CMERGE(C)                                                                        \
    COLD_CODE static void cmerge_##C(C *m, C *s, int64_t inner, int64_t R) {            \
        for (int64_t c = 0; c < inner; c += W_##C) {                                     \
            M_##C k = inner - c < W_##C ? TAIL(C, inner - c) : (M_##C)-1;                \
            V_##C m0 = VOP_##C(maskz_loadu)(k, m + c), s0 = VOP_##C(maskz_loadu)(k, s + c); \
            for (int64_t r = 1; r < R; r++) {                                            \
                V_##C mr = VOP_##C(maskz_loadu)(k, m + r * inner + c), mn = VOP_##C(max)(m0, mr); \
                V_##C sr = VOP_##C(mul)(VOP_##C(maskz_loadu)(k, s + r * inner + c), VEXP_##C(VOP_##C(sub)(mr, mn))); \
                s0 = VOP_##C(fmadd)(s0, VEXP_##C(VOP_##C(sub)(m0, mn)), sr);             \
                m0 = mn;                                                                 \
            }                                                                            \
            VOP_##C(mask_storeu)(m + c, k, m0);                                          \
            VOP_##C(mask_storeu)(s + c, k, s0);                                          \
        }                                                                                \
        for (int64_t r = 1; r < R; r++) {                                                \
            memcpy(m + r * inner, m, (size_t)inner * sizeof *m);                         \
            memcpy(s + r * inner, s, (size_t)inner * sizeof *s);                         \
        }                                                                                \
    }
CMERGE(float)
CMERGE(double)
/* the exps of v - m scaled by a */
#define EXPSCALE(C)                                                                      \
    static inline V_##C expscale_##C(V_##C v, V_##C m, V_##C a) { return VOP_##C(mul)(VEXP_##C(VOP_##C(sub)(v, m)), a); }
EXPSCALE(float)
EXPSCALE(double)
/* w[i] = F(r[i], m, a) along a row of a block, bl elements */
#define CROW(tag, C, w, r, bl, F, m, a)                                                  \
    do {                                                                                 \
        int64_t i = 0;                                                                   \
        for (; i + W_##C <= bl; i += W_##C)                                              \
            ST_##tag(w + i, F##_##C(LD_##tag(r + i), VOP_##C(load)(m + i), VOP_##C(load)(a + i))); \
        if (i < bl)                                                                      \
            STM_##tag(w + i, TAIL(C, bl - i),                                            \
                      F##_##C(LDZ_##tag(TAIL(C, bl - i), r + i), VOP_##C(load)(m + i), VOP_##C(load)(a + i))); \
    } while (0)
#define COLS(tag, S, C, LS)                                                              \
    /* one step: n rows (CG or 1) of the vector at x, rs apart, lanes k */               \
    static inline __attribute__((always_inline)) void cstep_##tag(const S *x, int64_t rs, const int n, M_##C k, \
                                                                 C *m, C *s) {           \
        V_##C v0 = LDZ_##tag(k, x), v1 = v0, v2 = v0, v3 = v0, mx = v0; /* n: 1 or CG */ \
        if (n == CG) { /* (CG is 4) named, not an array: an array's tree went through the stack */ \
            v1 = LDZ_##tag(k, x + rs), v2 = LDZ_##tag(k, x + 2 * rs), v3 = LDZ_##tag(k, x + 3 * rs); \
            mx = VOP_##C(max)(VOP_##C(max)(v3, v2), VOP_##C(max)(v1, v0));              \
        }                                                                                \
        V_##C mo = VOP_##C(load)(m), mn = VOP_##C(max)(mx, mo);                          \
        V_##C a = VOP_##C(mul)(VOP_##C(load)(s), VEXP_##C(VOP_##C(sub)(mo, mn)));        \
        a = VOP_##C(add)(a, VEXP_##C(VOP_##C(sub)(v0, mn)));                             \
        if (n == CG) { /* two chains */                                                  \
            V_##C b = VOP_##C(add)(VEXP_##C(VOP_##C(sub)(v1, mn)), VEXP_##C(VOP_##C(sub)(v3, mn))); \
            a = VOP_##C(add)(VOP_##C(add)(a, VEXP_##C(VOP_##C(sub)(v2, mn))), b);        \
        }                                                                                \
        VOP_##C(mask_store)(m, k, mn); /* lanes past k: other columns' positions */      \
        VOP_##C(mask_store)(s, k, a);                                                    \
    }                                                                                    \
    /* a step of one row (the rows left after the groups of CG; one copy) */          \
    NOINLINE static void cstep1_##tag(const S *x, M_##C k, C *m, C *s) { cstep_##tag(x, 0, 1, k, m, s); } \
    /* the first pass over D rows of bl, rs apart */                                     \
    static void cpass1_##tag(const S *x, int64_t rs, int64_t D, int64_t bl, C *m, C *s) { \
        int nv = (int)((bl + W_##C - 1) / W_##C), lb = (int)(bl * (int64_t)sizeof(S));   \
        M_##C kt = bl % W_##C ? TAIL(C, bl % W_##C) : (M_##C)-1;                         \
        int64_t k = 0;                                                                   \
        for (; k + CG <= D; k += CG) {                                                   \
            cprefetch(x, rs * (int64_t)sizeof(S), k, D, CG, lb);                         \
            _Pragma("GCC unroll 1") for (int v = 0; v < nv - 1; v++) cstep_##tag(x + k * rs + v * W_##C, rs, CG, (M_##C)-1, m + v * W_##C, s + v * W_##C); \
            cstep_##tag(x + k * rs + (nv - 1) * W_##C, rs, CG, kt, m + (nv - 1) * W_##C, s + (nv - 1) * W_##C); \
        }                                                                                \
        for (; k < D; k++)                                                               \
            for (int v = 0; v < nv; v++)                                                 \
                cstep1_##tag(x + k * rs + v * W_##C, v == nv - 1 ? kt : (M_##C)-1, m + v * W_##C, s + v * W_##C); \
    }                                                                                    \
    /* the second: y from x, m and a (1 / s or log(s)) */                                \
    static void cpass2_##tag(const S *x, S *y, int64_t rs, int64_t D, int64_t bl, const C *m, const C *a, bool logm) { \
        int lb = (int)(bl * (int64_t)sizeof(S));                                         \
        for (int64_t k = 0; k < D; k++) {                                                \
            const S *r = x + k * rs;                                                     \
            S *w = y + k * rs;                                                           \
            cprefetch(x, rs * (int64_t)sizeof(S), k, D, 1, lb);                          \
            if (logm) CROW(tag, C, w, r, bl, logsub, m, a);                              \
            else CROW(tag, C, w, r, bl, expscale, m, a);                                 \
        }                                                                                \
    }                                                                                    \
    /* a block: bl columns, or (R > 1) all inner columns R rows at a time */             \
    COLD_CODE static void cols_##tag(const S *x, S *y, int64_t D, int64_t inner, int64_t bl, int64_t R, bool logm) { \
        _Alignas(64) C m[CB], s[CB];                                                     \
        int64_t L = R > 1 ? R * inner : bl, rs = R > 1 ? L : inner, nq = D / R, nr = D % R; \
        for (int64_t p = 0; p < (L + W_##C - 1) / W_##C * W_##C; p++) m[p] = sizeof(C) == 4 ? -FLT_MAX : -DBL_MAX, s[p] = 0; \
        cpass1_##tag(x, rs, nq, L, m, s);                                                \
        if (R > 1) {                                                                     \
            cpass1_##tag(x + nq * L, inner, nr, inner, m, s);                            \
            cmerge_##C(m, s, inner, R);                                                  \
        }                                                                                \
        for (int64_t p = 0; p < L; p++) s[p] = logm ? LOG_##C(s[p]) : 1 / s[p];          \
        cpass2_##tag(x, y, rs, nq, L, m, s, logm);                                       \
        if (R > 1) cpass2_##tag(x + nq * L, y + nq * L, inner, nr, inner, m, s, logm);   \
    }
STORED_TYPES(COLS)

/* Small slices (D * inner elements, SMALL_N at most, a quarter of it when
 * inner exceeds W: in L1 or L2 after the first pass; larger ones were slower
 * than the blocks, and their one chain of sums per lane, long, less exact)
 * of columns that a vector's lanes tile: inner dividing W, the slice read as
 * flat vectors, lane l holding column l % inner, or inner a multiple of W,
 * each vector of columns down the D rows. Three passes per vector (the
 * max, the sum of exp(x - max), the values), without the running max's
 * rescalings and the blocks' set-up (3x on [4096, 8, 8] float32); the lanes
 * of one column are combined (rotations by inner, 2 inner, ...) after each of
 * the first two, so that every lane holds its column's max and sum. */
#define SMALL_N 16384
static inline __m512 rot_float(__m512 v, int h) { /* lane l: v[(l + h) % 16] */
    __m512i i = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(h));
    return _mm512_permutexvar_ps(_mm512_and_si512(i, _mm512_set1_epi32(15)), v);
}
static inline __m512d rot_double(__m512d v, int h) {
    __m512i i = _mm512_add_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(h));
    return _mm512_permutexvar_pd(_mm512_and_si512(i, _mm512_set1_epi64(7)), v);
}
/* loads and stores under mask k of the stored types of C, by kind: 0
 * float32 / float64, 1 float16, 2 bfloat16 (one copy of vcol_* per C) */
static inline __m512 ldk_float(int kind, __mmask16 k, const void *p) {
    return kind == 1 ? LDZ_f16(k, p) : kind == 2 ? LDZ_bf16(k, p) : LDZ_f32(k, p);
}
static inline void stk_float(int kind, void *p, __mmask16 k, __m512 v) {
    if (kind == 1) STM_f16(p, k, v);
    else if (kind == 2) STM_bf16(p, k, v);
    else STM_f32(p, k, v);
}
static inline __m512d ldk_double(int kind, __mmask8 k, const void *p) { return (void)kind, LDZ_f64(k, p); }
static inline void stk_double(int kind, void *p, __mmask8 k, __m512d v) { (void)kind, STM_f64(p, k, v); }
/* the vectors of a column: cnt whole, then r elements (mask k); i, the vector */
#define VCOL_FOR(C, body)                                                                \
    _Pragma("GCC unroll 1") for (int64_t i = 0; i < cnt + (r > 0); i++) {               \
        M_##C ki = i < cnt ? (M_##C)-1 : k;                                              \
        V_##C v = ldk_##C(kind, ki, x + i * st);                                         \
        body;                                                                            \
    }
#define VCOL(C)                                                                          \
    /* one vector of columns: cnt vectors st bytes apart, then r elements \
     * (lanes), the lanes congruent modulo q holding one column */                     \
    NOINLINE NOCLONE static void vcol_##C(const char *x, char *y, int64_t cnt, int64_t st, int r, int q, \
                                                           bool logm, int kind) {        \
        M_##C k = TAIL(C, r);                                                            \
        V_##C m = VOP_##C(set1)(-INFINITY), s = VOP_##C(setzero)(), a;                   \
        VCOL_FOR(C, m = VOP_##C(mask_max)(m, ki, v, m))                                  \
        for (int h = q; h < W_##C; h *= 2) m = VOP_##C(max)(rot_##C(m, h), m);          \
        VCOL_FOR(C, s = VOP_##C(mask_add)(s, ki, s, VEXP_##C(VOP_##C(sub)(v, m))))       \
        for (int h = q; h < W_##C; h *= 2) s = VOP_##C(add)(rot_##C(s, h), s);          \
        _Alignas(64) C t[W_##C];                                                         \
        VOP_##C(store)(t, s);                                                            \
        if (logm)                                                                        \
            _Pragma("GCC unroll 1") for (int l = 0; l < W_##C; l++) t[l] = l < q ? LOG_##C(t[l]) : t[l % q]; \
        a = logm ? VOP_##C(load)(t) : VOP_##C(div)(VOP_##C(set1)(1), s);                 \
        VCOL_FOR(C, stk_##C(kind, y + i * st, ki, logm ? logsub_##C(v, m, a) : expscale_##C(v, m, a))) \
    }                                                                                    \
    /* the outer slices (es: the stored type's size) */                                  \
    static void small_##C(const char *x, char *y, int64_t outer, int64_t D, int64_t inner, bool logm, int nt, \
                          int kind, int64_t es) {                                        \
        (void)nt;                                                                        \
        int64_t n = D * inner, nb = n * es;                                              \
        OMP_FOR_NT                                                                       \
        for (int64_t o = 0; o < outer; o++) {                                            \
            if (inner < W_##C)                                                           \
                vcol_##C(x + o * nb, y + o * nb, n / W_##C, W_##C * es, (int)(n % W_##C), (int)inner, logm, kind); \
            else                                                                         \
                for (int64_t j = 0; j < inner; j += W_##C)                               \
                    vcol_##C(x + o * nb + j * es, y + o * nb + j * es, D, inner * es, 0, W_##C, logm, kind); \
        }                                                                                \
    }
VCOL(float)
VCOL(double)

/* Blocks of W adjacent rows of a transposed view (the rows one element apart,
 * their elements es apart), one lane per row, TP blocks side by side: TP
 * lines per position k, in one page (a block's D lines lie in D pages, and
 * their page walks dominated). The first pass reads the lines x + k * es once,
 * in order, prefetched, into b (D lines of W per block, contiguous) and
 * takes the maxima; per block, the second sums exp(b - max) in expsum_*'s
 * order (the contiguous rows' bits) and writes the exps (softmax) or x - max
 * (log_softmax), transposed in registers (16 x 16; 8 x 8 for double), into
 * the output rows; the third finishes each row there, in L2, as row_* does.
 * float32 and float64 only: 16-bit views run faster copied first.
 * Re-reading the strided lines instead of b was 2x slower: lines at one page
 * offset share few cache sets. */
static inline void tr16(__m512 *r) { /* the 16 x 16 transpose of r[] */
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44), r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44), r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) { /* r[4g + c], 128-bit lane l: rows 4g.., column 4l + c */
        __m512 u0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), u1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        __m512 w0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), w1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        t[c] = _mm512_shuffle_f32x4(u0, w0, 0x88), t[8 + c] = _mm512_shuffle_f32x4(u0, w0, 0xdd);
        t[4 + c] = _mm512_shuffle_f32x4(u1, w1, 0x88), t[12 + c] = _mm512_shuffle_f32x4(u1, w1, 0xdd);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}
static inline void tr8(__m512d *r) { /* the 8 x 8 transpose of r[] */
    __m512d t[8];
    for (int i = 0; i < 8; i += 2) t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]);
    for (int c = 0; c < 2; c++) { /* t[2g + c], 128-bit lane l: rows 2g.., column 2l + c */
        __m512d u0 = _mm512_shuffle_f64x2(t[c], t[2 + c], 0x88), u1 = _mm512_shuffle_f64x2(t[c], t[2 + c], 0xdd);
        __m512d w0 = _mm512_shuffle_f64x2(t[4 + c], t[6 + c], 0x88), w1 = _mm512_shuffle_f64x2(t[4 + c], t[6 + c], 0xdd);
        r[c] = _mm512_shuffle_f64x2(u0, w0, 0x88), r[4 + c] = _mm512_shuffle_f64x2(u0, w0, 0xdd);
        r[2 + c] = _mm512_shuffle_f64x2(u1, w1, 0x88), r[6 + c] = _mm512_shuffle_f64x2(u1, w1, 0xdd);
    }
}
/* the transposed W positions e[] (n of them) into the nr rows of y, ys apart
 * (masked stores only for a tail: they stall when they miss) */
#define TPUT(C, tr)                                                                      \
    static void tput_##C(V_##C *e, C *y, int64_t ys, int nr, int n) {                    \
        tr(e);                                                                           \
        for (int i = 0; i < nr; i++)                                                     \
            if (n == W_##C) VOP_##C(storeu)(y + i * ys, e[i]);                           \
            else VOP_##C(mask_storeu)(y + i * ys, TAIL(C, n), e[i]);                     \
    }
TPUT(float, tr16)
TPUT(double, tr8)
/* the last pass of a row r of C (rows of r: the exps or x - max): y = r * a - c */
#define FIN_FNS(C)                                                                       \
    static inline V_##C fin_##C(V_##C v, V_##C a, V_##C c) { return VOP_##C(sub)(VOP_##C(mul)(v, a), c); }
FIN_FNS(float)
FIN_FNS(double)
/* The sum of exp(b - m) over D lines of W, in W accumulators by k % W, then
 * the tail's in order, the accumulators halved: expsum_*'s order, the
 * contiguous rows' bits. The exps (or the x - m, dif) are transposed into
 * the nr rows r, rs apart. */
#define TEXPSUM(C)                                                                       \
    NOINLINE static V_##C texpsum_##C(const C *b, int64_t D, V_##C m, bool dif, C *r, int64_t rs, int nr) { \
        V_##C acc[W_##C], e[W_##C], st = VOP_##C(setzero)();                             \
        for (int j = 0; j < W_##C; j++) acc[j] = st;                                     \
        int64_t full = D - D % W_##C;                                                    \
        for (int64_t k = 0; k < D; k++) {                                                \
            int j = (int)(k % W_##C);                                                    \
            V_##C d = VOP_##C(sub)(VOP_##C(load)(b + k * W_##C), m), x = VEXP_##C(d);    \
            if (k < full) acc[j] = VOP_##C(add)(acc[j], x);                              \
            else st = VOP_##C(add)(st, x);                                               \
            e[j] = dif ? d : x;                                                          \
            if (j == W_##C - 1 || k == D - 1) tput_##C(e, r + k - j, rs, nr, j + 1);     \
        }                                                                                \
        for (int h = W_##C / 2; h; h /= 2)                                               \
            for (int j = 0; j < h; j++) acc[j] = VOP_##C(add)(acc[j], acc[j + h]);       \
        return VOP_##C(add)(st, acc[0]);                                                 \
    }
TEXPSUM(float)
TEXPSUM(double)
#define TP 8          /* blocks side by side: TP lines per page visited */
#define PF_LINES 32   /* the first pass's prefetch distance, in lines */
#define TBLOCK(tag, S, C, LS)                                                            \
    /* the maxima of TP blocks of W rows side by side (rows of them), their lines \
     * copied into b, block p's D lines of W at b + p * D * W: TP lines per \
     * position k, in the same page (a page walk each) */                         \
    NOINLINE static void tmax_##tag(const void *xv, int64_t es, int64_t D, int rows, void *bv, void *mo) { \
        const S *x = xv;                                                                 \
        C *b = bv;                                                                       \
        V_##C m[TP];                                                                     \
        for (int p = 0; p < TP; p++) m[p] = VOP_##C(set1)(-INFINITY);                   \
        int np = (rows + W_##C - 1) / W_##C; /* (rows <= TP * W) */                      \
        for (int64_t k = 0; k < D; k++) {                                                \
            const S *r = x + k * es;                                                     \
            if (k + PF_LINES < D)                                                        \
                for (int p = 0; p < TP * W_##C; p += 64 / (int)sizeof(S))                \
                    _mm_prefetch((const char *)(r + PF_LINES * es + p), _MM_HINT_T0);    \
            _Pragma("GCC unroll 1") for (int p = 0; p < np; p++) {                       \
                int nr = rows - p * W_##C;                                               \
                V_##C v = nr >= W_##C ? LD_##tag(r + p * W_##C) : LDZ_##tag(TAIL(C, nr), r + p * W_##C); \
                m[p] = VOP_##C(max)(v, m[p]);                                            \
                VOP_##C(store)(b + (p * D + k) * W_##C, v);                              \
            }                                                                            \
        }                                                                                \
        memcpy(mo, m, sizeof m);                                                         \
    }                                                                                    \
    /* one block (nr rows, max m, lines b) into the rows of y, ys apart: the \
     * exps (softmax) or x - max (log_softmax) transposed into y, then \
     * finished row by row in L2 */                                                    \
    NOINLINE static void tblock_##tag(const void *mv, void *yv, int64_t ys, int64_t D, int nr, bool logm, \
                                      const void *bv) {                                  \
        V_##C m = *(const V_##C *)mv;                                                    \
        S *y = yv;                                                                       \
        C t[W_##C];                                                                      \
        VOP_##C(storeu)(t, texpsum_##C(bv, D, m, logm, y, ys, nr));                      \
        for (int i = 0; i < nr; i++) { /* yr: STORE_ROW has its own i */                \
            V_##C a = VOP_##C(set1)(logm ? 1 : 1 / t[i]), c = VOP_##C(set1)(logm ? LS(t[i]) : 0); \
            S *yr = y + i * ys;                                                          \
            STORE_ROW(tag, C, yr, D, C, yr, fin, a, c);                                  \
        }                                                                                \
    }
TBLOCK(f32, float, float, logf)
TBLOCK(f64, double, double, dlog)
/* The blocks: nu rows along the unit-stride dim, TP blocks of w rows at a
 * time, for each of the nq rows of gi (input offsets) / go (output rows); ou:
 * output rows between neighbours along the unit-stride dim; ss: the stored
 * type's size. */
typedef struct TBlockFns {
    void (*max)(const void *x, int64_t es, int64_t D, int rows, void *b, void *m);
    void (*block)(const void *m, void *y, int64_t ys, int64_t D, int nr, bool logm, const void *b);
    int w;
    size_t ss;
} TBlockFns;
COLD_CODE static void tblocks(const TBlockFns *f, const char *x, const RowGeom *gi, const RowGeom *go, int64_t nq, int64_t nu,
                    int64_t ou, int64_t es, char *y, int64_t D, bool logm, int nt, char *buf, size_t per) {
    /* st rows a task: TP blocks, fewer when that leaves a thread idle */
    int64_t w = f->w, st = TP * w, want = (nt + nq - 1) / nq;
    if ((nu + st - 1) / st < want) st = ((nu + want - 1) / want + w - 1) / w * w;
    int64_t nb = (nu + st - 1) / st, n = nq * nb;
    OMP_FOR_NT
    for (int64_t v = 0; v < n; v++) {
        int64_t q = v / nb, j = v % nb * st;
        char *b = buf + per * (size_t)thread_num();
        int rows = nu - j < st ? (int)(nu - j) : (int)st;
        __m512 m[TP];
        f->max(x + (rk_row_offset(gi, q) + j) * (int64_t)f->ss, es, D, rows, b, m);
        for (int p = 0; p * w < rows; p++)
            f->block(m + p, y + (rk_row_offset(go, q) + (j + p * w) * ou) * D * (int64_t)f->ss, ou * D, D,
                     rows - p * w < w ? (int)(rows - p * w) : (int)w, logm, b + (size_t)(p * D) * 64);
    }
}
#define TFNS(tag, S, C) {tmax_##tag, tblock_##tag, W_##C, sizeof(S)}
static const TBlockFns tfns[2] = {TFNS(f32, float, float), TFNS(f64, double, double)};
#else
/* Portable rows: the max in LANES running maxima, vmath.h's exp-and-sum, the
 * scaling; 16-bit rows widened into b, computed there, narrowed. */
#define LANES 32
#define EXP_SUM_float vm_expf_sum_n
#define EXP_SUM_double vm_exp_d_sum_n
#define ROW_PLAIN(T)                                                                     \
    /* bf: log(sum) as ls_bf16 (a bfloat16 row's) */                                   \
    /* next: the row to prefetch, pb bytes */                                      \
    static void row_##T(const T *x, T *y, int64_t n, bool logm, const void *next, int64_t pb, bool bf) { \
        T mv[LANES];                                                                     \
        for (int j = 0; j < LANES; j++) mv[j] = -INFINITY;                               \
        int64_t i = 0;                                                                   \
        for (; i + LANES <= n; i += LANES)                                               \
            for (int j = 0; j < LANES; j++) mv[j] = x[i + j] > mv[j] ? x[i + j] : mv[j]; \
        T m = -INFINITY;                                                                 \
        for (; i < n; i++) m = x[i] > m ? x[i] : m;                                      \
        for (int j = 0; j < LANES; j++) m = mv[j] > m ? mv[j] : m;                       \
        if (logm) {                                                                      \
            T s = EXP_SUM_##T(NULL, x, m, n, next, pb), ls = bf ? (T)ls_bf16((float)s) : LOG_##T(s); \
            /* (x - m) - ls, in torch's order: m + ls loses x's digits */                \
            for (i = 0; i < n; i++) y[i] = (x[i] - m) - ls;                              \
        } else {                                                                         \
            T inv = 1 / EXP_SUM_##T(y, x, m, n, next, pb);                               \
            for (i = 0; i < n; i++) y[i] *= inv;                                         \
        }                                                                                \
    }                                                                                    \
    static void row_##T##_b(const T *x, T *y, T *b, int64_t n, bool logm, const T *next, int64_t es) { \
        (void)b;                                                                         \
        row_##T(x, y, n, logm, es == 1 ? next : NULL, n * (int64_t)sizeof(T), false);    \
    }
ROW_PLAIN(float)
ROW_PLAIN(double)
#define row_f32 row_float_b
#define row_f64 row_double_b
#define ROW_HALF(tag, bf)                                                                \
    static void row_##tag(const uint16_t *x, uint16_t *y, float *b, int64_t n, bool logm, const uint16_t *next, \
                          int64_t es) {                                                  \
        c10_half_to_float_n(b, x, bf, n);                                                \
        row_float(b, b, n, logm, es == 1 ? next : NULL, 2 * n, bf);                      \
        c10_float_to_half_n(y, b, bf, n);                                                \
    }
ROW_HALF(f16, false)
ROW_HALF(bf16, true)
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
    static void softmax_##T(const T *x, T *y, int64_t outer, int64_t D, int64_t inner, bool logm, int nt) { \
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
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
/* AVX2 columns (float32 and the 16-bit types, in float): blocks of up to CB8
 * adjacent columns, 8 a vector, in two passes over the block's D rows where
 * the three above read x twice and y twice more (65 ms for float32 [4096,
 * 4096] over dim 0 at 2 threads). The first keeps per column the running max
 * m and the sum s of exp(x - m), rescaled by exp(m_old - m_new) once per four
 * rows; m starts at -FLT_MAX, not -inf, so that a column of -inf keeps s 0 and
 * ends NaN as torch's (+inf and NaN reach s too). The second writes exp(x -
 * m) / s, or (x - m) - log(s), rounded once to the stored type. (Prefetching
 * rows 16 or 64 KB ahead changed nothing.) */
#define CB8 2048 /* 128 to 1024 were 2.6x to 1.15x slower, float32 [4096, 4096] */
static inline __m256 ld8_f32(const float *p) { return _mm256_loadu_ps(p); }
static inline __m256 ld8_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256 ld8_bf16(const uint16_t *p) { return c10_bf2f_x8(p); }
static inline void st8_f32(float *p, __m256 v) { _mm256_storeu_ps(p, v); }
static inline void st8_f16(uint16_t *p, __m256 v) { _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
static inline void st8_bf16(uint16_t *p, __m256 v) { c10_f2bf_x8(p, v); }
/* the first r < 8 elements, through a zeroed buffer */
#define PART8(tag, S)                                                                    \
    static inline __m256 ldr_##tag(const S *p, int r) {                                  \
        S t[8] = {0};                                                                    \
        memcpy(t, p, (size_t)r * sizeof(S));                                             \
        return ld8_##tag(t);                                                             \
    }                                                                                    \
    static inline void str_##tag(S *p, int r, __m256 v) {                                \
        S t[8];                                                                          \
        st8_##tag(t, v);                                                                 \
        memcpy(p, t, (size_t)r * sizeof(S));                                             \
    }
PART8(f32, float)
PART8(f16, uint16_t)
PART8(bf16, uint16_t)
#define LD8(tag, p, r) ((r) ? ldr_##tag(p, r) : ld8_##tag(p))
/* the second pass's value of v: (v - m) - a (a = log(s)) or exp(v - m) a (a = 1 / s) */
static inline __m256 c8val(__m256 v, const float *m, const float *a, bool logm) {
    __m256 t = _mm256_sub_ps(v, _mm256_load_ps(m)), av = _mm256_load_ps(a);
    return logm ? _mm256_sub_ps(t, av) : _mm256_mul_ps(vm_expf8(t), av);
}
#define COLS8(tag, S)                                                                    \
    /* n (1 or 4) rows of the vector at p, rs apart: r lanes if r, else 8 */             \
    static inline __attribute__((always_inline)) void c8step_##tag(const S *p, int64_t rs, int n, int r, float *m, \
                                                                   float *s) {           \
        __m256 v0 = LD8(tag, p, r), v1 = v0, v2 = v0, v3 = v0, mx = v0;                  \
        if (n == 4) {                                                                    \
            v1 = LD8(tag, p + rs, r), v2 = LD8(tag, p + 2 * rs, r), v3 = LD8(tag, p + 3 * rs, r); \
            mx = _mm256_max_ps(_mm256_max_ps(v3, v2), _mm256_max_ps(v1, v0));            \
        }                                                                                \
        __m256 mo = _mm256_load_ps(m), mn = _mm256_max_ps(mx, mo);                       \
        __m256 a = _mm256_mul_ps(_mm256_load_ps(s), vm_expf8(_mm256_sub_ps(mo, mn)));    \
        a = _mm256_add_ps(a, vm_expf8(_mm256_sub_ps(v0, mn)));                           \
        if (n == 4) {                                                                    \
            __m256 b = _mm256_add_ps(vm_expf8(_mm256_sub_ps(v1, mn)), vm_expf8(_mm256_sub_ps(v3, mn))); \
            a = _mm256_add_ps(_mm256_add_ps(a, vm_expf8(_mm256_sub_ps(v2, mn))), b);     \
        }                                                                                \
        _mm256_store_ps(m, mn);                                                          \
        _mm256_store_ps(s, a);                                                           \
    }                                                                                    \
    /* n rows of the first pass: nf whole vectors, then r lanes */                      \
    static inline __attribute__((always_inline)) void c8steps_##tag(const S *x, int64_t rs, const int n, int64_t nf, \
                                                                     int r, float *m, float *s) { \
        for (int64_t v = 0; v < nf; v++) c8step_##tag(x + 8 * v, rs, n, 0, m + 8 * v, s + 8 * v); \
        if (r) c8step_##tag(x + 8 * nf, rs, n, r, m + 8 * nf, s + 8 * nf);              \
    }                                                                                    \
    /* a row of the second pass: nf whole vectors, then r lanes */                      \
    static inline __attribute__((always_inline)) void c8row_##tag(const S *x, S *y, int64_t nf, int r, const float *m, \
                                                                  const float *a, const bool logm) { \
        for (int64_t v = 0; v < nf; v++)                                                 \
            st8_##tag(y + 8 * v, c8val(ld8_##tag(x + 8 * v), m + 8 * v, a + 8 * v, logm)); \
        if (r) str_##tag(y + 8 * nf, r, c8val(ldr_##tag(x + 8 * nf, r), m + 8 * nf, a + 8 * nf, logm)); \
    }                                                                                    \
    /* columns [0, bl) of D rows, rs elements apart */                                   \
    static void cols8_##tag(const S *x, S *y, int64_t D, int64_t rs, int64_t bl, bool logm) { \
        _Alignas(32) float m[CB8], s[CB8];                                               \
        int64_t nv = (bl + 7) / 8, k = 0;                                                \
        int r = (int)(bl % 8);                                                           \
        for (int64_t p = 0; p < nv * 8; p++) m[p] = -FLT_MAX, s[p] = 0;                  \
        int64_t nf = bl / 8;                                                             \
        for (; k + 4 <= D; k += 4) c8steps_##tag(x + k * rs, rs, 4, nf, r, m, s);        \
        for (; k < D; k++) c8steps_##tag(x + k * rs, rs, 1, nf, r, m, s);                \
        for (int64_t p = 0; p < nv * 8; p++) s[p] = logm ? logf(s[p]) : 1 / s[p];      \
        for (k = 0; k < D; k++)                                                          \
            if (logm) c8row_##tag(x + k * rs, y + k * rs, nf, r, m, s, true);            \
            else c8row_##tag(x + k * rs, y + k * rs, nf, r, m, s, false);                \
    }                                                                                    \
    static void cols8_all_##tag(const S *x, S *y, int64_t outer, int64_t D, int64_t inner, bool logm, int nt) { \
        (void)nt;                                                                        \
        int64_t nb = (inner + CB8 - 1) / CB8;                                            \
        if (outer * nb < nt) nb = (nt + outer - 1) / outer;                              \
        int64_t bl = ((inner + nb - 1) / nb + 7) / 8 * 8;                                \
        nb = (inner + bl - 1) / bl;                                                      \
        OMP_FOR_NT                                                                       \
        for (int64_t u = 0; u < outer * nb; u++) {                                       \
            int64_t o = u / nb, j0 = u % nb * bl, off = o * D * inner + j0;              \
            cols8_##tag(x + off, y + off, D, inner, inner - j0 < bl ? inner - j0 : bl, logm); \
        }                                                                                \
    }
COLS8(f32, float)
COLS8(f16, uint16_t)
COLS8(bf16, uint16_t)
#endif
#endif

/* The rows, over nt threads. Each thread's part of buf (per bytes): eb bytes
 * for b (16-bit rows; else b is y's row), then D elements for a strided row,
 * gathered (es != 1). */
#define ROWS(tag, S, C)                                                                  \
    static void rows_##tag(const S *x, const RowGeom *g, int64_t es, S *y, int64_t outer, int64_t D, bool logm, \
                           int nt, char *buf, size_t eb, size_t per) {                   \
        (void)nt;                                                                        \
        OMP_FOR_NT                                                                       \
        for (int64_t o = 0; o < outer; o++) {                                            \
            char *tb = buf ? buf + per * (size_t)thread_num() : NULL;                    \
            const S *r = x + row_off(g, o);                                              \
            if (es != 1) r = gather_##S((S *)(void *)(tb + eb), r, es, D);               \
            const S *next = o + 1 < outer ? x + row_off(g, o + 1) : NULL;                \
            row_##tag(r, y + o * D, eb ? (C *)(void *)tb : (C *)(void *)(y + o * D), D, logm, next, es); \
        }                                                                                \
    }
ROWS(f32, float, float)
ROWS(f64, double, double)
ROWS(f16, uint16_t, float)
ROWS(bf16, uint16_t, float)

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }
/* The bytes between two threads' parts of one buffer: a part's own, and a
 * page unused. With the parts adjacent, the prefetches past the end of thread
 * 0's part took the lines thread 1 was writing: 16-bit softmax rows ran 1.3x
 * slower at 2 threads (a 16 KB part a row). */
static size_t thread_part(size_t per) { return per ? round64(per) + 4096 : 0; }

bool softmax_lastdim(ct_dtype dt, const void *x, const RowGeom *g, int64_t es, void *y, int64_t outer, int64_t D,
                     bool logm, int nt) {
    bool half = dt == CT_FLOAT16 || dt == CT_BFLOAT16;
    size_t cs = dt == CT_FLOAT64 ? 8 : 4, ss = half ? 2 : cs, rb = (size_t)D * ss;
    size_t eb = half ? round64((size_t)D * cs) : 0, per = thread_part(eb + (es != 1 ? round64(rb) : 0));
    char *buf = per ? aligned_alloc(64, per * (size_t)nt) : NULL;
    if (per && !buf) return false;
    if (dt == CT_FLOAT32) rows_f32(x, g, es, y, outer, D, logm, nt, buf, eb, per);
    else if (dt == CT_FLOAT64) rows_f64(x, g, es, y, outer, D, logm, nt, buf, eb, per);
    else if (dt == CT_FLOAT16) rows_f16(x, g, es, y, outer, D, logm, nt, buf, eb, per);
    else rows_bf16(x, g, es, y, outer, D, logm, nt, buf, eb, per);
    free(buf);
    return true;
}

/* longer rows, and 16-bit ones (whose exps went through a row buffer), ran
 * slower than the copy (measured) */
#define TBLOCK_MAX_D 8192

COLD_CODE int softmax_lastdim_blocks(ct_dtype dt, const void *x, const RowGeom *g, int64_t es, void *y, int64_t D, bool logm,
                           int nt) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    int u = -1, w = dt == CT_FLOAT64 ? 8 : 16;
    for (int k = 0; k < g->nd; k++)
        if (g->stride[k] == 1) u = k;
    if (u < 0 || g->size[u] < w || D > TBLOCK_MAX_D || (dt != CT_FLOAT32 && dt != CT_FLOAT64)) return 0;
    RowGeom gi, go; /* g without u: input offsets, output rows */
    int64_t a = 1, ou = 1; /* a: output rows between neighbours along dim k */
    for (int k = g->nd - 1; k >= 0; a *= g->size[k--]) {
        int n = k - (k > u);
        if (k == u) ou = a;
        else gi.size[n] = go.size[n] = g->size[k], gi.stride[n] = g->stride[k], go.stride[n] = a;
    }
    gi.nd = go.nd = g->nd - 1;
    size_t per = thread_part((size_t)D * 64 * TP); /* the lines */
    char *buf = aligned_alloc(64, per * (size_t)nt);
    if (!buf) return -1;
    tblocks(&tfns[dt == CT_FLOAT64], x, &gi, &go, a / g->size[u], g->size[u], ou, es, y, D, logm, nt, buf, per);
    free(buf);
    return 1;
#else
    (void)dt, (void)x, (void)g, (void)es, (void)y, (void)D, (void)logm, (void)nt;
    return 0;
#endif
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
/* the blocks of the outer slices, bl columns at most (R rows at a time: all
 * columns), over nt threads */
#define COLS_ALL(tag, S, C, LS)                                                          \
    static void cols_all_##tag(const S *x, S *y, int64_t outer, int64_t D, int64_t inner, int64_t bl, int64_t R, \
                               bool logm, int nt) {                                      \
        (void)nt;                                                                        \
        int64_t nb = (inner + bl - 1) / bl;                                              \
        OMP_FOR_NT                                                                       \
        for (int64_t u = 0; u < outer * nb; u++) {                                       \
            int64_t o = u / nb, j0 = u % nb * bl, off = o * D * inner + j0;              \
            cols_##tag(x + off, y + off, D, inner, inner - j0 < bl ? inner - j0 : bl, R, logm); \
        }                                                                                \
    }
STORED_TYPES(COLS_ALL)
#endif

bool softmax_cols(ct_dtype dt, const void *x, void *y, int64_t outer, int64_t D, int64_t inner, bool logm, int nt) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    /* blocks of equal widths (whole vectors), CB at most, one a thread at
     * least; narrow columns R rows at a time, R a multiple of W / gcd(inner,
     * W), for rows of 4 W at least */
    int64_t w = dt == CT_FLOAT64 ? 8 : 16, nb = (inner + CB - 1) / CB, R = 1;
    if (outer * nb < nt) nb = (nt + outer - 1) / outer;
    int64_t bl = ((inner + nb - 1) / nb + w - 1) / w * w;
    if (D * inner <= (inner <= w ? SMALL_N : SMALL_N / 4) && (inner < w ? w % inner : inner % w) == 0) {
        if (dt == CT_FLOAT64) small_double(x, y, outer, D, inner, logm, nt, 0, 8);
        else small_float(x, y, outer, D, inner, logm, nt, dt == CT_FLOAT16 ? 1 : dt == CT_BFLOAT16 ? 2 : 0, dt == CT_FLOAT32 ? 4 : 2);
        return true;
    }
    if (inner < 4 * w && D >= 2 * w) {
        int64_t p2 = inner & -inner; /* the largest power of 2 dividing inner */
        R = w / (p2 < w ? p2 : w);
        while (R * inner < 4 * w) R *= 2;
        bl = inner;
    }
    if (dt == CT_FLOAT32) cols_all_f32(x, y, outer, D, inner, bl, R, logm, nt);
    else if (dt == CT_FLOAT64) cols_all_f64(x, y, outer, D, inner, bl, R, logm, nt);
    else if (dt == CT_FLOAT16) cols_all_f16(x, y, outer, D, inner, bl, R, logm, nt);
    else cols_all_bf16(x, y, outer, D, inner, bl, R, logm, nt);
    return true;
#else
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    if (inner >= 8 && dt != CT_FLOAT64) {
        if (dt == CT_FLOAT32) cols8_all_f32(x, y, outer, D, inner, logm, nt);
        else if (dt == CT_FLOAT16) cols8_all_f16(x, y, outer, D, inner, logm, nt);
        else cols8_all_bf16(x, y, outer, D, inner, logm, nt);
        return true;
    }
#endif
    if (dt == CT_FLOAT32 || dt == CT_FLOAT64) {
        if (dt == CT_FLOAT32) softmax_float(x, y, outer, D, inner, logm, nt);
        else softmax_double(x, y, outer, D, inner, logm, nt);
        return true;
    }
    /* 16-bit: widened whole, computed in float, rounded */
    int64_t n = outer * D * inner;
    float *b = malloc((size_t)n * sizeof *b);
    if (!b) return false;
    c10_half_to_float_n(b, x, dt == CT_BFLOAT16, n);
    softmax_float(b, b, outer, D, inner, logm, nt);
    c10_float_to_half_n(y, b, dt == CT_BFLOAT16, n);
    free(b);
    return true;
#endif
}
