/* reduce_kernels.c: the inner loops of the reductions and of softmax. Plain C
 * loops over several accumulator lanes, so that the compiler vectorises them
 * without reassociating floating-point sums (the lanes are combined in a fixed
 * order: results do not depend on where a run starts). Float sums accumulate
 * in double. Softmax lives in softmax.c. */
#include "ops/kernels/reduce_kernels.h"
#include "ops/kernels/vmath.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined __F16C__ || defined __AVX512F__
#include <immintrin.h>
#endif

#define LANES 32

/* ---------------------------------------------------------------- floats */

/* an element of each input dtype as the accumulator's type */
#define LOAD_float(v) (v)
#define LOAD_double(v) (v)
#define LOAD_f32d(v) (v)
#define LOAD_f16(v) c10_h2f(v)
#define LOAD_bf16(v) rk_bf16(v)

/* acc[j] += x[S * (k + j)] over a block of m elements (a multiple of LN):
 * S = 1 reads a contiguous run, S = 2 a ::2 slice in place (both stay
 * vectorised; a gathered copy costs a second pass) */
#define SUM_BLOCK(name, T, A, LN, S)                                                     \
    static inline void block_##name##_##S(A *restrict acc, const T *restrict y, int64_t m) { \
        for (int64_t k = 0; k < m; k += LN)                                              \
            for (int j = 0; j < LN; j++) acc[j] += LOAD_##name(y[S * (k + j)]);          \
    }
#ifdef __AVX512F__
/* 16 float16 / bfloat16 as floats: vcvtph2ps (the compiler does not
 * vectorise c10_h2f), a shift; of a ::2 slice, the low halves of 16 32-bit
 * words (the compiler's own stride-2 code shuffles words one by one) */
#define LOADV_f16_1(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define LOADV_f16_2(p) LOADV_f16_2_(_mm512_loadu_si512((const void *)(p)))
#define LOADV_f16_2_(v) _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v))
#define LOADV_bf16_1(p) WIDEN_BF16(_mm256_loadu_si256((const __m256i *)(p)))
#define WIDEN_BF16(h) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) /* 16 as floats */
#if defined __AVX512BW__ && defined __AVX512VL__
/* the lanes of mask m of 16 float16 / bfloat16 as floats, the others 0 */
#define LB_f16(p, m) _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p))
#define LB_bf16(p, m) WIDEN_BF16(_mm256_maskz_loadu_epi16(m, p))
#endif
#define LOADV_bf16_2(p) LOADV_bf16_2_(_mm512_loadu_si512((const void *)(p)))
#define LOADV_bf16_2_(v) _mm512_castsi512_ps(_mm512_slli_epi32(v, 16))
/* of a float32 / float64 ::2 slice, the even lanes of two registers (the
 * compiler's version spilled its 64 lanes: 15.6 GB/s at 1 thread) */
#define LOADV_float_2(p) LOADV_float_2_(p, _mm512_loadu_ps((p) + 16))
#define LOADV_float_2_(p, hi) _mm512_permutex2var_ps(_mm512_loadu_ps(p), EVEN16, hi)
#define LOADV_double_2(p) LOADV_double_2_(p, _mm512_loadu_pd((p) + 8))
#define LOADV_double_2_(p, hi) _mm512_permutex2var_pd(_mm512_loadu_pd(p), EVEN8, hi)
/* The same loads for a run's last register: each reads, unused, the element
 * after the slice's last, which may lie past the storage's end; these mask it
 * off (masked loads throughout cost 2.4x on float16 slices) */
#define LOADE_f16_1 LOADV_f16_1
#define LOADE_bf16_1 LOADV_bf16_1
#define LOADE_f16_2(p) LOADV_f16_2_(LOAD_EVEN16(p))
#define LOADE_bf16_2(p) LOADV_bf16_2_(LOAD_EVEN16(p))
#define LOADE_float_2(p) LOADV_float_2_(p, _mm512_maskz_loadu_ps(0x7fff, (p) + 16))
#define LOADE_double_2(p) LOADV_double_2_(p, _mm512_maskz_loadu_pd(0x7f, (p) + 8))
#ifdef __AVX512BW__
#define LOAD_EVEN16(p) _mm512_maskz_loadu_epi16(0x7fffffff, (const void *)(p))
#else
#define LOAD_EVEN16(p) /* the last word from its used half */                   \
    _mm512_mask_set1_epi32(_mm512_maskz_loadu_epi32(0x7fff, (const void *)(p)), 0x8000, ((const uint16_t *)(p))[30])
#endif
#define EVEN16 _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define EVEN8 _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14)
#define VREG_float __m512, 16, ps
#define VREG_double __m512d, 8, pd
#define VREG_f16 __m512, 16, ps
#define VREG_bf16 __m512, 16, ps
/* SUM_BLOCK's lanes (4 registers of W) in registers: lane j, as there */
#define VBLOCK(name, T, A, S) VBLOCK_(name, T, A, S, VREG_##name)
#define VBLOCK_(...) VBLOCK__(__VA_ARGS__)
#define VBLOCK__(name, T, A, S, VT, W, PS)                                               \
    static inline void block_##name##_##S(A *restrict acc, const T *restrict y, int64_t m) { \
        VT a[4];                                                                         \
        for (int q = 0; q < 4; q++) a[q] = _mm512_loadu_##PS(acc + W * q);               \
        int64_t k = 0;                                                                   \
        for (; k + 4 * W < m; k += 4 * W)                                                \
            for (int q = 0; q < 4; q++) a[q] = _mm512_add_##PS(a[q], LOADV_##name##_##S(y + S * (k + W * q))); \
        for (int q = 0; q < 3; q++) a[q] = _mm512_add_##PS(a[q], LOADV_##name##_##S(y + S * (k + W * q))); \
        a[3] = _mm512_add_##PS(a[3], LOADE_##name##_##S(y + S * (k + 3 * W)));           \
        for (int q = 0; q < 4; q++) _mm512_storeu_##PS(acc + W * q, a[q]);              \
    }
#define HALF_BLOCK(name, S) VBLOCK(name, uint16_t, float, S)
#define FLOAT_BLOCK_1 SUM_BLOCK
#define FLOAT_BLOCK_2(name, T, A, LN, S) VBLOCK(name, T, A, S)
#else
#define FLOAT_BLOCK_1 SUM_BLOCK
#define FLOAT_BLOCK_2 SUM_BLOCK
#ifdef __F16C__
/* contiguous float16 without AVX-512: 8 at a time through vcvtph2ps (the
 * scalar _cvtsh_ss kept the loop scalar), SUM_BLOCK's 64 lanes in 8 registers */
#define HALF_BLOCK(name, S) HALF_BLOCK_##name##_##S
#define HALF_BLOCK_f16_1                                                                 \
    static inline void block_f16_1(float *restrict acc, const uint16_t *restrict y, int64_t m) { \
        __m256 a[8];                                                                     \
        for (int q = 0; q < 8; q++) a[q] = _mm256_loadu_ps(acc + 8 * q);                 \
        for (int64_t k = 0; k < m; k += 64)                                              \
            for (int q = 0; q < 8; q++)                                                  \
                a[q] = _mm256_add_ps(a[q], _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + k + 8 * q)))); \
        for (int q = 0; q < 8; q++) _mm256_storeu_ps(acc + 8 * q, a[q]);                \
    }
#define HALF_BLOCK_f16_2 SUM_BLOCK(f16, uint16_t, float, 64, 2)
#define HALF_BLOCK_bf16_1 SUM_BLOCK(bf16, uint16_t, float, 64, 1)
#define HALF_BLOCK_bf16_2 SUM_BLOCK(bf16, uint16_t, float, 64, 2)
#else
#define HALF_BLOCK(name, S) SUM_BLOCK(name, uint16_t, float, 64, S)
#endif
#endif

/* acc[0] after the pairwise fold of the lanes (64 floats, 32 doubles): for w =
 * LN/2 .. 1, acc[j] += acc[j + w]. With AVX-512 the same additions in the same
 * order on whole registers: the compiler's version of the loop shuffled and
 * spilled, and took most of the time of a sum over rows of 64 elements. */
#ifdef __AVX512F__
static inline float fold_float(const float *acc) {
    __m512 v = _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(acc), _mm512_loadu_ps(acc + 32)),
                             _mm512_add_ps(_mm512_loadu_ps(acc + 16), _mm512_loadu_ps(acc + 48)));
    __m256 y = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_shuffle_ps(x, x, 1)));
}
static inline double fold_double(const double *acc) {
    __m512d v = _mm512_add_pd(_mm512_add_pd(_mm512_loadu_pd(acc), _mm512_loadu_pd(acc + 16)),
                              _mm512_add_pd(_mm512_loadu_pd(acc + 8), _mm512_loadu_pd(acc + 24)));
    __m256d y = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    __m128d x = _mm_add_pd(_mm256_castpd256_pd128(y), _mm256_extractf128_pd(y, 1));
    return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));
}
#else
#define FOLD(A, LN)                                                                      \
    static inline A fold_##A(A *acc) {                                                   \
        /* unrolled, the fold stays in registers (a loop spills acc) */                  \
        _Pragma("GCC unroll 8") for (int w = LN / 2; w >= 1; w /= 2)                     \
            _Pragma("GCC unroll 64") for (int j = 0; j < w; j++) acc[j] += acc[j + w];   \
        return acc[0];                                                                   \
    }
FOLD(float, 64)
FOLD(double, 32)
#endif

/* Sums: LN lanes of A (float for float inputs, as PyTorch) over blocks of at
 * most 4096 elements, each block folded pairwise and added into a double. */
#define SUM_KERNEL(name, T, A, LN, S)                                                    \
    static void sum_##name##_##S(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        double r = 0;                                                                    \
        int64_t i = 0;                                                                   \
        while (n - i >= LN) {                                                            \
            int64_t m = (n - i) / LN * LN;                                               \
            if (m > 4096) m = 4096;                                                      \
            A acc[LN] = {0};                                                             \
            block_##name##_##S(acc, x + S * i, m);                                       \
            r += (double)fold_##A(acc);                                                  \
            i += m;                                                                      \
        }                                                                                \
        for (; i < n; i++) r += (double)LOAD_##name(x[S * i]);                           \
        s->d += r;                                                                       \
    }

/* integer and bool sums in int64, wrapping (the compiler vectorises them; a
 * plain loop: 32 lanes in 4 accumulators measured slower on int64, sum(-1)
 * of a ::2 slice 28 -> 17 GB/s at 1 thread) */
#define WIDEN_(v) (uint64_t)(int64_t)(v)
#define TRUTH_(v) (uint64_t)((v) != 0)
#define SUM_INT(name, T, CONV, S)                                                        \
    static void sum_##name##_##S(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        uint64_t r = 0;                                                                  \
        for (int64_t i = 0; i < n; i++) r += CONV(x[S * i]);                             \
        s->v = (int64_t)((uint64_t)s->v + r);                                            \
    }

/* the sums over elements S apart, S = 1 and 2, of every dtype */
#define SUM_FLOATS(X, S)                                                                 \
    X(float, float, float, 64, S) X(double, double, double, 32, S)
#define SUM_INTS(X, S)                                                                   \
    X(i64, int64_t, WIDEN_, S) X(i32, int32_t, WIDEN_, S) X(i16, int16_t, WIDEN_, S)      \
    X(i8, int8_t, WIDEN_, S) X(u8, uint8_t, WIDEN_, S) X(b8, uint8_t, TRUTH_, S)
#define SUM_ALL(S)                                                                       \
    SUM_FLOATS(FLOAT_BLOCK_##S, S)                                                       \
    HALF_BLOCK(f16, S)                                                                   \
    HALF_BLOCK(bf16, S)                                                                  \
    SUM_FLOATS(SUM_KERNEL, S)                                                            \
    SUM_KERNEL(f16, uint16_t, float, 64, S)                                              \
    SUM_KERNEL(bf16, uint16_t, float, 64, S)                                             \
    SUM_INTS(SUM_INT, S)
SUM_ALL(1)
SUM_ALL(2)

rk_fn rk_sum_kernel(ct_dtype dt, int64_t stride) {
    if (stride != 1 && stride != 2) return NULL;
#define PICK(f) return stride == 1 ? f##_1 : f##_2
    switch (dt) {
    case CT_FLOAT32: PICK(sum_float);
    case CT_FLOAT64: PICK(sum_double);
    case CT_FLOAT16: PICK(sum_f16);
    case CT_BFLOAT16: PICK(sum_bf16);
    case CT_INT64: PICK(sum_i64);
    case CT_INT32: PICK(sum_i32);
    case CT_INT16: PICK(sum_i16);
    case CT_INT8: PICK(sum_i8);
    case CT_UINT8: PICK(sum_u8);
    case CT_BOOL: PICK(sum_b8);
    default: return NULL;
    }
#undef PICK
}

/* Row sums of the outer-sum path: part[j] += element j (S apart) of each of
 * nr rows, four as (r0 + r1) + (r2 + r3), eight as two such fours added (A:
 * float for float inputs, as PyTorch), other counts one by one. The 16-bit floats convert 16 at a time. Rows
 * are short streams far apart, which the hardware prefetcher follows late:
 * the next four rows (next, when given) are prefetched as the four are read,
 * PF_CHUNK bytes of each at a time. */
#define PF_CHUNK 1024
#ifdef __AVX512F__
#define VEC_f16(S, ...) VEC_HALF(f16, S, __VA_ARGS__)
#define VEC_bf16(S, ...) VEC_HALF(bf16, S, __VA_ARGS__)
#define VEC_HALF(name, S, E) /* a ::2 row's last 16 by LOADE_ */                      \
    for (; j + 16 + (S - 1) <= n; j += 16)                                               \
        _mm512_storeu_ps(pp + j, _mm512_add_ps(_mm512_loadu_ps(pp + j), E(LOADV_##name##_##S, S))); \
    if (j + 16 == n)                                                                     \
        _mm512_storeu_ps(pp + j, _mm512_add_ps(_mm512_loadu_ps(pp + j), E(LOADE_##name##_##S, S))), j += 16;
#define V4_(L, S, o) _mm512_add_ps(_mm512_add_ps(L(a##o##0 + S * j), L(a##o##1 + S * j)), \
                                   _mm512_add_ps(L(a##o##2 + S * j), L(a##o##3 + S * j)))
#define V8_(L, S) _mm512_add_ps(V4_(L, S, ), V4_(L, S, 4))
#define V4A_(L, S) V4_(L, S, )
#define V1_(L, S) L(a0 + S * j)
#elif defined __F16C__
/* contiguous float16 rows without AVX-512: 8 at a time through vcvtph2ps */
#define VEC_f16(S, E) VEC_F16C_##S(E)
#define VEC_F16C_2(E)
#define VEC_F16C_1(E)                                                                    \
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(pp + j, _mm256_add_ps(_mm256_loadu_ps(pp + j), E(LOADV8_f16, 1)));
#define LOADV8_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define V4_(L, S, o) _mm256_add_ps(_mm256_add_ps(L(a##o##0 + S * j), L(a##o##1 + S * j)), \
                                   _mm256_add_ps(L(a##o##2 + S * j), L(a##o##3 + S * j)))
#define V8_(L, S) _mm256_add_ps(V4_(L, S, ), V4_(L, S, 4))
#define V4A_(L, S) V4_(L, S, )
#define V1_(L, S) L(a0 + S * j)
#define VEC_bf16(S, E)
#else
#define VEC_f16(S, E)
#define VEC_bf16(S, E)
#endif
#define VEC_float(S, E)
#define VEC_double(S, E)
#define VEC_f32d(S, E)
#define VEC_i64(S, E)
#define VEC_i32(S, E)
#define LOAD_i64(v) WIDEN_(v)
#define LOAD_i32(v) WIDEN_(v)
/* (r0 + r1) + (r2 + r3) of rows a0..a3 (o empty) or a40..a43 (o = 4) */
#define E4_(name, A, S, o)                                                               \
    (((A)LOAD_##name(a##o##0[S * j]) + (A)LOAD_##name(a##o##1[S * j])) +                 \
     ((A)LOAD_##name(a##o##2[S * j]) + (A)LOAD_##name(a##o##3[S * j])))
#define SUM_ROWS(name, T, A, S, G)                                                       \
    enum { group_##name##_##S = G };                                                     \
    static inline void addg_##name##_##S(A *restrict pp, const T *restrict a0, const T *restrict a1, \
                                         const T *restrict a2, const T *restrict a3, const T *restrict a40, \
                                         const T *restrict a41, const T *restrict a42, const T *restrict a43, \
                                         int64_t n) {                                    \
        int64_t j = 0;                                                                   \
        if (G == 8) {                                                                    \
            VEC_##name(S, V8_)                                                           \
            for (; j < n; j++) pp[j] += E4_(name, A, S, ) + E4_(name, A, S, 4);          \
        } else {                                                                         \
            VEC_##name(S, V4A_)                                                          \
            for (; j < n; j++) pp[j] += E4_(name, A, S, );                               \
        }                                                                                \
    }                                                                                    \
    static inline void add1_##name##_##S(A *restrict pp, const T *restrict a0, int64_t n) { \
        int64_t j = 0;                                                                   \
        VEC_##name(S, V1_)                                                               \
        for (; j < n; j++) pp[j] += (A)LOAD_##name(a0[S * j]);                           \
    }                                                                                    \
    static void rows_##name##_##S(void *pv, const void *const *rv, int nr, int64_t bl,  \
                                  const void *const *next) {                             \
        A *pp = pv;                                                                      \
        if (nr != G) {                                                                   \
            for (int q = 0; q < nr; q++) add1_##name##_##S(pp, rv[q], bl);               \
            return;                                                                      \
        }                                                                                \
        const T *a[8];                                                                   \
        for (int k = 0; k < 8; k++) a[k] = rv[k % G];                                    \
        enum { CH = PF_CHUNK / (S * (int)sizeof(T)) };                                   \
        for (int64_t j = 0; j < bl; j += CH) {                                           \
            int64_t n = bl - j < CH ? bl - j : CH, o = S * j;                            \
            for (int k = 0; next && k < G; k++)                                          \
                for (int64_t b = 0; b < n * S * (int64_t)sizeof(T); b += 64)             \
                    __builtin_prefetch((const char *)next[k] + o * (int64_t)sizeof(T) + b); \
            addg_##name##_##S(pp + j, a[0] + o, a[1] + o, a[2] + o, a[3] + o, a[4] + o, a[5] + o, a[6] + o, \
                              a[7] + o, n);                                              \
        }                                                                                \
    }
/* G, the rows added at a time: 8 where the partials are twice as wide as the
 * bytes read per column or more (contiguous 16-bit floats and int32: half
 * the partial updates per byte, 20-30% faster at 1 thread), else 4 (float32,
 * float64, int64 and the ::2 slices: 5-8% faster than 8) */
#define ROWS_ALL(X, S, GN)                                                               \
    X(float, float, float, S, 4) X(double, double, double, S, 4) X(f16, uint16_t, float, S, GN) \
    X(f32d, float, double, S, 4) /* var's means of float32 */                                    \
    X(bf16, uint16_t, float, S, GN) X(i64, int64_t, uint64_t, S, 4) X(i32, int32_t, uint64_t, S, GN)
ROWS_ALL(SUM_ROWS, 1, 8)
ROWS_ALL(SUM_ROWS, 2, 4)

rk_rows_fn rk_sum_rows(ct_dtype dt, int64_t stride, int *group, bool dbl) {
    if (stride != 1 && stride != 2) return NULL;
#define PICK(f) return *group = stride == 1 ? group_##f##_1 : group_##f##_2, stride == 1 ? rows_##f##_1 : rows_##f##_2
    if (dbl && dt != CT_FLOAT32) return NULL;
    if (dbl) PICK(f32d);
    switch (dt) {
    case CT_FLOAT32: PICK(float);
    case CT_FLOAT64: PICK(double);
    case CT_FLOAT16: PICK(f16);
    case CT_BFLOAT16: PICK(bf16);
    case CT_INT64: PICK(i64);
    case CT_INT32: PICK(i32);
    default: return NULL;
    }
#undef PICK
}

/* a[j] = max (min) of a[j] and x[r][j] for r < nr, j < n, NaN sticky, in W
 * lanes of the rows' own type (float for float16 / bfloat16 rows): amax /
 * amin across rows, which went through double (int64) before ([4096, 4096]
 * float32 amax(0) at 2x the time of sum(0)). Rows four at a
 * time as a tree, (x0 x1) (x2 x3); maxps / minps keep a NaN of a (their
 * second operand) and the NaNs of the rows are found two rows a compare
 * (unordered) and set after: a compare, NaN mask and blend a row took twice
 * the time of sum(0) at the same geometry; masked loads throughout, 1.4x. */
#define COLS_MINMAX(name, T, X, VT, PS, W, LD, LDM, SC, MAXV, MINV, NANK, NANSET, NANCHK)   \
    void rk_cols_minmax_##name(void *av, const void *const *xv, int nr, int64_t n, bool max) { \
        T *restrict a = av;                                                                         \
        const X *const *x = (const X *const *)xv;                                          \
        int64_t j = 0;                                                                     \
        if (max) COLS_MINMAX_VEC(VT, PS, W, LD, LDM, MAXV, NANK, NANSET)                   \
        else COLS_MINMAX_VEC(VT, PS, W, LD, LDM, MINV, NANK, NANSET)                       \
        if (max) COLS_TAIL(T, SC, NANCHK, CT_GT, (void)0)                                  \
        else COLS_TAIL(T, SC, NANCHK, CT_LT, (void)0)                                      \
    }
/* The lanes the vectors left (or all of them, without AVX-512): a[j] (and
 * ix[j]) from x[q][j], q < nr, in order; NaN sticky, ties keep the earlier
 * row. Without AVX-512, rows outer and branch-free, so that the compiler
 * vectorises it (a lane at a time through the rows, [4096, 4096] float32
 * amax(0) ran at 21% of the triad, torch's at 56%); with it, the few lanes
 * left take the plain loop. */
#define CT_GT(v, c) ((v) > (c))
#define CT_LT(v, c) ((v) < (c))
#ifdef __AVX512F__
#define COLS_TAIL(T, SC, NANCHK, BETTER, SET_IX)                                           \
    for (; j < n; j++)                                                                     \
        for (int q = 0; q < nr; q++) {                                                     \
            T v = SC(x[q][j]), c = a[j];                                                   \
            bool take = !NANCHK(c) && (NANCHK(v) || BETTER(v, c));                         \
            a[j] = take ? v : c;                                                           \
            SET_IX;                                                                        \
        }
#else
#define COLS_TAIL(T, SC, NANCHK, BETTER, SET_IX)                                           \
    for (int q = 0; q < nr; q++)                                                           \
        for (int64_t k = j; k < n; k++) {                                                  \
            int64_t j = k;                                                                 \
            T v = SC(x[q][j]), c = a[j];                                                   \
            bool take = !NANCHK(c) && (NANCHK(v) || BETTER(v, c));                         \
            a[j] = take ? v : c;                                                           \
            SET_IX;                                                                        \
        }
#endif
#ifdef __AVX512F__
#define COLS_MINMAX_VEC(VT, PS, W, LD, LDM, OP, NANK, NANSET) /* W lanes */           \
    {                                                                                      \
        for (; j + W <= n; j += W) {                                                       \
            VT va = _mm512_loadu_##PS(a + j);                                              \
            __mmask16 nan = 0;                                                             \
            int r = 0;                                                                     \
            for (; r + 4 <= nr; r += 4) {                                                  \
                VT x0 = LD(x[r] + j), x1 = LD(x[r + 1] + j);                               \
                VT x2 = LD(x[r + 2] + j), x3 = LD(x[r + 3] + j);                           \
                nan |= NANK(x0, x1) | NANK(x2, x3);                                        \
                va = OP(OP(OP(x0, x1), OP(x2, x3)), va);                                   \
            }                                                                              \
            for (; r < nr; r++) {                                                          \
                VT x0 = LD(x[r] + j);                                                      \
                nan |= NANK(x0, x0);                                                       \
                va = OP(x0, va);                                                           \
            }                                                                              \
            _mm512_storeu_##PS(a + j, NANSET(va, nan));                                    \
        }                                                                                  \
        if (j < n && LDM_OK) { /* the tail, masked */                                      \
            __mmask16 t = (__mmask16)((1u << (n - j)) - 1), nan = 0;                       \
            VT va = _mm512_maskz_loadu_##PS(t, a + j);                                     \
            for (int r = 0; r < nr; r++) {                                                 \
                VT x0 = LDM(t, x[r] + j);                                                  \
                nan |= NANK(x0, x0);                                                       \
                va = OP(x0, va);                                                           \
            }                                                                              \
            _mm512_mask_storeu_##PS(a + j, t, NANSET(va, nan));                            \
            j = n;                                                                         \
        }                                                                                  \
    }
#define NANK_PS(x, y) _mm512_cmp_ps_mask(x, y, _CMP_UNORD_Q)
#define NANSET_PS(v, m) _mm512_mask_mov_ps(v, m, _mm512_set1_ps(NAN))
#define NANK_PD(x, y) _mm512_cmp_pd_mask(x, y, _CMP_UNORD_Q)
#define NANSET_PD(v, m) _mm512_mask_mov_pd(v, (__mmask8)(m), _mm512_set1_pd(NAN))
#define NANK_I(x, y) ((void)(x), (void)(y), (__mmask16)0)
#define NANSET_I(v, m) ((void)(m), (v))
#define LD_f(p) _mm512_loadu_ps(p)
#define LDM_f(t, p) _mm512_maskz_loadu_ps(t, p)
#define LD_i32(p) _mm512_loadu_si512((const void *)(p))
#define LDM_i32(t, p) _mm512_maskz_loadu_epi32(t, p)
#define LD_d(p) _mm512_loadu_pd(p)
#define LDM_d(t, p) _mm512_maskz_loadu_pd((__mmask8)(t), p)
#define LD_i64(p) _mm512_loadu_si512((const void *)(p))
#define LDM_i64(t, p) _mm512_maskz_loadu_epi64((__mmask8)(t), p)
#define LD_f16(p) LOADV_f16_1(p)
#define LD_bf16(p) LOADV_bf16_1(p)
#if defined __AVX512BW__ && defined __AVX512VL__ /* else the 16-bit tails in scalar code */
#define LDM_OK 1
#define LDM_f16(t, p) LB_f16(p, t)
#define LDM_bf16(t, p) LB_bf16(p, t)
#else
#define LDM_OK (sizeof **x >= 4)
#define LDM_f16(t, p) ((void)(t), _mm512_setzero_ps())
#define LDM_bf16 LDM_f16
#endif
#elif defined __AVX2__ && defined __F16C__
/* Without AVX-512, floats (and 16-bit floats widened) 8 lanes a ymm register,
 * NaNs gathered in a vector mask and set after, as above (the rows-outer
 * scalar loop: [4096, 4096] float16 amax(0) at 11% of the triad) */
#define COLS_MINMAX_VEC(VT, PS, W, LD, LDM, OP, NANK, NANSET) CMV8_##PS(LD, V8_##OP)
#define CMV8_pd(LD, OP) {}
#define CMV8_epi64(LD, OP) {}
#define CMV8_epi32(LD, OP) {}
#define V8__mm512_max_ps _mm256_max_ps
#define V8__mm512_min_ps _mm256_min_ps
#define UNORD8(x, y) _mm256_cmp_ps(x, y, _CMP_UNORD_Q)
#define CMV8_ps(LD, OP)                                                                    \
    { for (; j + 8 <= n; j += 8) {                                                         \
        __m256 va = _mm256_loadu_ps(a + j), nan = _mm256_setzero_ps();                     \
        int r = 0;                                                                         \
        for (; r + 4 <= nr; r += 4) {                                                      \
            __m256 x0 = LD(x[r] + j), x1 = LD(x[r + 1] + j), x2 = LD(x[r + 2] + j), x3 = LD(x[r + 3] + j); \
            nan = _mm256_or_ps(nan, _mm256_or_ps(UNORD8(x0, x1), UNORD8(x2, x3)));         \
            va = OP(OP(OP(x0, x1), OP(x2, x3)), va);                                       \
        }                                                                                  \
        for (; r < nr; r++) {                                                              \
            __m256 x0 = LD(x[r] + j);                                                      \
            nan = _mm256_or_ps(nan, UNORD8(x0, x0));                                       \
            va = OP(x0, va);                                                               \
        }                                                                                  \
        _mm256_storeu_ps(a + j, _mm256_blendv_ps(va, _mm256_set1_ps(NAN), nan));          \
    } }
#define LD_f(p) _mm256_loadu_ps(p)
#define LD_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define LD_bf16(p) c10_bf2f_x8(p)
#else
#define COLS_MINMAX_VEC(VT, PS, W, LD, LDM, OP, NANK, NANSET) {}
#endif
#define ISNAN_F(v) ((v) != (v))
#define NONAN_I(v) ((void)(v), 0)
#define SC_(v) (v)
#define COLS_MINMAX_F(name, X, SC) \
    COLS_MINMAX(name, float, X, __m512, ps, 16, LD_##name, LDM_##name, SC, _mm512_max_ps, _mm512_min_ps, NANK_PS, NANSET_PS, ISNAN_F)
COLS_MINMAX_F(f, float, SC_)
COLS_MINMAX_F(f16, uint16_t, c10_h2f_bits) /* the scalar tail: vectorised without AVX-512 */
COLS_MINMAX_F(bf16, uint16_t, rk_bf16)
COLS_MINMAX(d, double, double, __m512d, pd, 8, LD_d, LDM_d, SC_, _mm512_max_pd, _mm512_min_pd, NANK_PD, NANSET_PD, ISNAN_F)
COLS_MINMAX(i64, int64_t, int64_t, __m512i, epi64, 8, LD_i64, LDM_i64, SC_, _mm512_max_epi64, _mm512_min_epi64, NANK_I, NANSET_I,
            NONAN_I)
COLS_MINMAX(i32, int32_t, int32_t, __m512i, epi32, 16, LD_i32, LDM_i32, SC_, _mm512_max_epi32, _mm512_min_epi32, NANK_I, NANSET_I, NONAN_I)

/* a[j], ix[j] = the better of a[j] (at row ix[j]) and x[q][j] (at row r + q),
 * q < nr, in order: a greater (smaller) value, or the first NaN over any
 * number; ties keep the earlier row. max_dim / argmax across rows in the lanes
 * of the rows' own type, as amax above (through double, with int64 indices,
 * [4096, 4096] float32 max(0) took 2.5x amax(0)'s time). Indices: int32. */
#define COLS_ARGBEST(name, T, X, W, VT, PS, LD, LDM, SC, BGT, BLT, NANCHK)                 \
    void rk_cols_argbest_##name(void *av, int32_t *ix, const void *const *xv, int nr, int64_t n, int32_t r, \
                                bool max) {                                                \
        T *restrict a = av;                                                                         \
        const X *const *x = (const X *const *)xv;                                          \
        int64_t j = 0;                                                                     \
        if (max) ARGBEST_VEC(W, VT, PS, LD, LDM, BGT)                                      \
        else ARGBEST_VEC(W, VT, PS, LD, LDM, BLT)                                          \
        if (max) COLS_TAIL(T, SC, NANCHK, CT_GT, ix[j] = take ? r + q : ix[j])             \
        else COLS_TAIL(T, SC, NANCHK, CT_LT, ix[j] = take ? r + q : ix[j])                 \
    }
#if defined __AVX512F__ && defined __AVX512VL__
/* the indices of W lanes: 16 in a zmm, 8 in a ymm */
#define IX_16(op) IX16_##op
#define IX_8(op) IX8_##op
#define IX16_TYPE __m512i
#define IX16_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define IX16_LOADM(k, p) _mm512_maskz_loadu_epi32(k, p)
#define IX16_STORE(p, v) _mm512_storeu_si512((void *)(p), v)
#define IX16_STOREM(p, k, v) _mm512_mask_storeu_epi32(p, k, v)
#define IX16_MOVE(v, k, r) _mm512_mask_mov_epi32(v, k, _mm512_set1_epi32(r))
#define IX16_SET(r) _mm512_set1_epi32(r)
#define IX16_BLEND(v, k, u) _mm512_mask_mov_epi32(v, k, u)
#define IX8_TYPE __m256i
#define IX8_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define IX8_LOADM(k, p) _mm256_maskz_loadu_epi32((__mmask8)(k), p)
#define IX8_STORE(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define IX8_STOREM(p, k, v) _mm256_mask_storeu_epi32(p, (__mmask8)(k), v)
#define IX8_MOVE(v, k, r) _mm256_mask_mov_epi32(v, (__mmask8)(k), _mm256_set1_epi32(r))
#define IX8_SET(r) _mm256_set1_epi32(r)
#define IX8_BLEND(v, k, u) _mm256_mask_mov_epi32(v, (__mmask8)(k), u)
#define ARGBEST_VEC(W, VT, PS, LD, LDM, BETTER) /* W lanes */                           \
    {                                                                                      \
        IX_##W(TYPE) rq[8]; /* eight rows: two trees of four, (x0 x1) (x2 x3) */          \
        for (int q = 0; q < 8; q++) rq[q] = IX_##W(SET)(r + q);                            \
        for (; nr == 8 && j + W <= n; j += W) {                                            \
            VT va = _mm512_loadu_##PS(a + j);                                              \
            IX_##W(TYPE) vi = IX_##W(LOAD)(ix + j);                                        \
            for (int q = 0; q < 8; q += 4) { /* a later row wins only if better */        \
                VT x0 = LD(x[q] + j), x1 = LD(x[q + 1] + j), x2 = LD(x[q + 2] + j), x3 = LD(x[q + 3] + j); \
                __mmask16 k1 = BETTER(x1, x0), k3 = BETTER(x3, x2);                        \
                x0 = _mm512_mask_mov_##PS(x0, k1, x1), x2 = _mm512_mask_mov_##PS(x2, k3, x3); \
                IX_##W(TYPE) i0 = IX_##W(BLEND)(rq[q], k1, rq[q + 1]);                     \
                IX_##W(TYPE) i2 = IX_##W(BLEND)(rq[q + 2], k3, rq[q + 3]);                 \
                __mmask16 k = BETTER(x2, x0);                                              \
                x0 = _mm512_mask_mov_##PS(x0, k, x2), i0 = IX_##W(BLEND)(i0, k, i2);       \
                k = BETTER(x0, va);                                                        \
                va = _mm512_mask_mov_##PS(va, k, x0), vi = IX_##W(BLEND)(vi, k, i0);       \
            }                                                                              \
            _mm512_storeu_##PS(a + j, va);                                                 \
            IX_##W(STORE)(ix + j, vi);                                                     \
        }                                                                                  \
        for (; j + W <= n; j += W) {                                                       \
            VT va = _mm512_loadu_##PS(a + j);                                              \
            IX_##W(TYPE) vi = IX_##W(LOAD)(ix + j);                                             \
            for (int q = 0; q < nr; q++) {                                                 \
                VT x0 = LD(x[q] + j);                                                      \
                __mmask16 k = BETTER(x0, va);                                              \
                va = _mm512_mask_mov_##PS(va, k, x0), vi = IX_##W(MOVE)(vi, k, r + q);      \
            }                                                                              \
            _mm512_storeu_##PS(a + j, va);                                                 \
            IX_##W(STORE)(ix + j, vi);                                                        \
        }                                                                                  \
        if (j < n && LDM_OK) { /* the tail, masked */                                      \
            __mmask16 t = (__mmask16)((1u << (n - j)) - 1);                                \
            VT va = _mm512_maskz_loadu_##PS(t, a + j);                                     \
            IX_##W(TYPE) vi = IX_##W(LOADM)(t, ix + j);                                         \
            for (int q = 0; q < nr; q++) {                                                 \
                VT x0 = LDM(t, x[q] + j);                                                  \
                __mmask16 k = BETTER(x0, va) & t;                                          \
                va = _mm512_mask_mov_##PS(va, k, x0), vi = IX_##W(MOVE)(vi, k, r + q);      \
            }                                                                              \
            _mm512_mask_storeu_##PS(a + j, t, va);                                         \
            IX_##W(STOREM)(ix + j, t, vi);                                                    \
            j = n;                                                                         \
        }                                                                                  \
    }
/* x better than a: greater (less), or NaN where a is not */
#define BGT_PS(x, a) _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), x, a, _CMP_NLE_UQ)
#define BLT_PS(x, a) _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), x, a, _CMP_NGE_UQ)
#define BGT_PD(x, a) _mm512_mask_cmp_pd_mask(_mm512_cmp_pd_mask(a, a, _CMP_ORD_Q), x, a, _CMP_NLE_UQ)
#define BLT_PD(x, a) _mm512_mask_cmp_pd_mask(_mm512_cmp_pd_mask(a, a, _CMP_ORD_Q), x, a, _CMP_NGE_UQ)
#define BGT_I32(x, a) _mm512_cmpgt_epi32_mask(x, a)
#define BLT_I32(x, a) _mm512_cmplt_epi32_mask(x, a)
#define BGT_I64(x, a) _mm512_cmpgt_epi64_mask(x, a)
#define BLT_I64(x, a) _mm512_cmplt_epi64_mask(x, a)
#elif defined __AVX2__ && defined __F16C__
/* 8 float lanes, rows one at a time: a lane takes a better value and its row */
#define ARGBEST_VEC(W, VT, PS, LD, LDM, BETTER) AB8_##PS(LD, B8_##BETTER)
#define AB8_pd(LD, B) {}
#define AB8_epi64(LD, B) {}
#define AB8_epi32(LD, B) {}
#define B8_BGT_PS(x, a) _mm256_and_ps(_mm256_cmp_ps(a, a, _CMP_ORD_Q), _mm256_cmp_ps(x, a, _CMP_NLE_UQ))
#define B8_BLT_PS(x, a) _mm256_and_ps(_mm256_cmp_ps(a, a, _CMP_ORD_Q), _mm256_cmp_ps(x, a, _CMP_NGE_UQ))
#define AB8_ps(LD, B)                                                                      \
    { for (; j + 8 <= n; j += 8) {                                                         \
        __m256 va = _mm256_loadu_ps(a + j), vi = _mm256_loadu_ps((const float *)(ix + j)); \
        for (int q = 0; q < nr; q++) {                                                     \
            __m256 x0 = LD(x[q] + j), k = B(x0, va);                                       \
            va = _mm256_blendv_ps(va, x0, k);                                              \
            vi = _mm256_blendv_ps(vi, _mm256_castsi256_ps(_mm256_set1_epi32(r + q)), k);   \
        }                                                                                  \
        _mm256_storeu_ps(a + j, va);                                                       \
        _mm256_storeu_ps((float *)(ix + j), vi);                                           \
    } }
#else
#define ARGBEST_VEC(W, VT, PS, LD, LDM, BETTER) {}
#endif
#define COLS_ARGBEST_F(name, X, SC) COLS_ARGBEST(name, float, X, 16, __m512, ps, LD_##name, LDM_##name, SC, BGT_PS, BLT_PS, ISNAN_F)
COLS_ARGBEST_F(f, float, SC_)
COLS_ARGBEST_F(f16, uint16_t, c10_h2f_bits)
COLS_ARGBEST_F(bf16, uint16_t, rk_bf16)
COLS_ARGBEST(d, double, double, 8, __m512d, pd, LD_d, LDM_d, SC_, BGT_PD, BLT_PD, ISNAN_F)
COLS_ARGBEST(i64, int64_t, int64_t, 8, __m512i, epi64, LD_i64, LDM_i64, SC_, BGT_I64, BLT_I64, NONAN_I)
COLS_ARGBEST(i32, int32_t, int32_t, 16, __m512i, epi32, LD_i32, LDM_i32, SC_, BGT_I32, BLT_I32, NONAN_I)

/* |x|^p of float32 (or 16-bit) elements as e^(p log|x|) in double, vectorised
 * (libm's pow took 17 ns an element: [4096, 4096] norm(3, dim 1) 272 ms,
 * PyTorch's powf in float 121). The rounding of p log|x|, |p log|x|| ulps of a
 * double, stays far below a float's ulp. 0, inf and NaN follow log and exp:
 * 0^p = 0 (p > 0) or inf, inf^p = inf or 0. One copy of each loop (the vector
 * exp and log are 0.5 KB each), over runs of up to 512: a call per register
 * left each one's latency exposed (1.5x slower). n: a multiple of 8. */
static __attribute__((noinline)) void plog_n(double *t, int64_t n, double p) { /* in place */
    for (int64_t j = 0; j < n; j += 8)
        for (int k = 0; k < 8; k++) t[j + k] = p * vm_log_d(fabs(t[j + k]));
}
static __attribute__((noinline)) void exp_n(double *t, int64_t n) {
    for (int64_t j = 0; j < n; j += 8)
        for (int k = 0; k < 8; k++) t[j + k] = vm_exp_d(t[j + k]);
}
#define POW_RUN 256
/* acc[0..8) += |x[j]|^p, j < m <= POW_RUN */
static void pow_acc(double *acc, const float *x, int64_t m, double p) {
    double t[POW_RUN];
    int64_t m8 = (m + 7) & ~(int64_t)7;
    for (int64_t j = 0; j < m8; j++) t[j] = j < m ? x[j] : 1;
    plog_n(t, m8, p);
    for (int64_t j = m; j < m8; j++) t[j] = -INFINITY;
    exp_n(t, m8);
    for (int64_t j = 0; j < m8; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += t[j + k];
}

void rk_cols_pow_exp(double *a, double *x, const double *sh, double p, int64_t n, bool f32) {
    if (sh && f32) { /* float32 (16-bit) values: exp(x - sh) in float, as the rows' sumexp */
        float t[POW_RUN];
        for (int64_t j0 = 0; j0 < n; j0 += POW_RUN) {
            int64_t m = n - j0 < POW_RUN ? n - j0 : POW_RUN;
            for (int64_t j = 0; j < m; j++) t[j] = (float)x[j0 + j] - (float)sh[j0 + j];
            vm_expf_n(t, t, m);
            for (int64_t j = 0; j < m; j++) a[j0 + j] += t[j];
        }
        return;
    }
    if (sh)
        for (int64_t j = 0; j < n; j++) x[j] -= sh[j];
    else
        plog_n(x, n, p);
    exp_n(x, n);
    for (int64_t j = 0; j < n; j++) a[j] += x[j];
}

#define FLOAT_KERNELS(T)                                                                 \
    static void sqdev_##T(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        double acc[LANES] = {0}, acc1[LANES] = {0}, r = 0, r1 = 0, sh = s->sh;           \
        int64_t i = 0;                                                                   \
        for (; i + LANES <= n; i += LANES)                                               \
            for (int j = 0; j < LANES; j++) {                                            \
                double e = (double)x[i + j] - sh;                                        \
                acc[j] += e * e, acc1[j] += e;                                           \
            }                                                                            \
        for (; i < n; i++) {                                                             \
            double e = (double)x[i] - sh;                                                \
            r += e * e, r1 += e;                                                         \
        }                                                                                \
        for (int j = 0; j < LANES; j++) r += acc[j], r1 += acc1[j];                      \
        s->d += r, s->d1 += r1;                                                          \
    }                                                                                    \
    static void sumexp_##T(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        double acc[LANES] = {0}, r = 0;                                                  \
        T sh = (T)s->sh;                                                                 \
        int64_t i = 0;                                                                   \
        for (; i + LANES <= n; i += LANES)                                               \
            for (int j = 0; j < LANES; j++) acc[j] += (double)EXP_##T(x[i + j] - sh);    \
        for (; i < n; i++) r += (double)EXP_##T(x[i] - sh);                              \
        for (int j = 0; j < LANES; j++) r += acc[j];                                     \
        s->d += r;                                                                       \
    }                                                                                    \
    static void prod_##T(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        double acc[8] = {1, 1, 1, 1, 1, 1, 1, 1}, r = s->d;                              \
        int64_t i = 0;                                                                   \
        for (; i + 8 <= n; i += 8)                                                       \
            for (int j = 0; j < 8; j++) acc[j] *= (double)x[i + j];                      \
        for (int j = 0; j < 8; j++) r *= acc[j];                                         \
        for (; i < n; i++) r *= (double)x[i];                                            \
        s->d = r;                                                                        \
    }                                                                                    \
    static void all_##T(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        if (!s->v) return;                                                               \
        for (int64_t i = 0; i < n; i++)                                                  \
            if (x[i] == 0) { s->v = 0; return; }                                         \
    }                                                                                    \
    static void any_##T(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        if (s->v) return;                                                                \
        for (int64_t i = 0; i < n; i++)                                                  \
            if (x[i] != 0) { s->v = 1; return; }                                         \
    }                                                                                    \
    static void norm_##T(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base;                                                                      \
        const T *restrict x = xv;                                                        \
        double acc[LANES] = {0}, r = 0;                                                  \
        int64_t i = 0;                                                                   \
        if (p == 2) {                                                                    \
            for (; i + LANES <= n; i += LANES)                                           \
                for (int j = 0; j < LANES; j++) acc[j] += (double)x[i + j] * (double)x[i + j]; \
            for (; i < n; i++) r += (double)x[i] * (double)x[i];                         \
        } else if (p == 1) {                                                             \
            for (; i + LANES <= n; i += LANES)                                           \
                for (int j = 0; j < LANES; j++) acc[j] += fabs((double)x[i + j]);        \
            for (; i < n; i++) r += fabs((double)x[i]);                                  \
        } else if (p == 0) {                                                             \
            for (; i < n; i++) r += x[i] != 0;                                           \
        } else if (p == INFINITY) {                                                      \
            double m = s->d;                                                             \
            for (; i < n; i++) {                                                         \
                double a = fabs((double)x[i]);                                           \
                m = (a != a || a > m) ? a : m;                                           \
            }                                                                            \
            s->d = m;                                                                    \
            return;                                                                      \
        } else if (p == -INFINITY) {                                                     \
            double m = s->d;                                                             \
            for (; i < n; i++) {                                                         \
                double a = fabs((double)x[i]);                                           \
                m = (a != a || a < m) ? a : m;                                           \
            }                                                                            \
            s->d = m;                                                                    \
            return;                                                                      \
        } else if (sizeof(T) == 4) { /* float32, 16-bit: see plog_n */                   \
            for (; i < n; i += POW_RUN)                                                  \
                pow_acc(acc, (const float *)(const void *)(x + i), n - i < POW_RUN ? n - i : POW_RUN, p); \
        } else {                                                                         \
            for (; i < n; i++) r += pow(fabs((double)x[i]), p);                          \
        }                                                                                \
        for (int j = 0; j < LANES; j++) r += acc[j];                                     \
        s->d += r;                                                                       \
    }
FLOAT_KERNELS(float)
FLOAT_KERNELS(double)

/* value-only max/min: NaN sticks (x != x wins, and nothing beats NaN). With
 * AVX-512 (VMINMAX): four registers of max_ps / min_ps and a mask of the NaNs
 * seen, then one overlapping load for the last elements (max is idempotent)
 * and the in-register fold; a NaN result is the first NaN of the chunk. The
 * compiler's version of the select loop took 5 instructions a register, a
 * scalar tail and a scalar fold of 32 lanes: [65536, 300] float32 amax(1) ran
 * at 1.6x PyTorch's time. Without AVX-512: LANES lanes of selects. */
#ifdef __AVX512F__
#define VMINMAX(T, name, W, VT, LOAD, OP, UNORD, REDUCE)                                 \
    static inline T name##_vec(const T *x, int64_t n, bool *nan) { /* n >= W */          \
        VT a0 = LOAD(x), a1 = a0, a2 = a0, a3 = a0;                                      \
        unsigned k = 0;                                                                  \
        int64_t i = 0;                                                                   \
        for (; i + 4 * W <= n; i += 4 * W) {                                             \
            VT v0 = LOAD(x + i), v1 = LOAD(x + i + W), v2 = LOAD(x + i + 2 * W), v3 = LOAD(x + i + 3 * W); \
            k |= UNORD(v0, v1) | UNORD(v2, v3);                                          \
            a0 = OP(a0, v0), a1 = OP(a1, v1), a2 = OP(a2, v2), a3 = OP(a3, v3);          \
        }                                                                                \
        for (; i + W <= n; i += W) {                                                     \
            VT v = LOAD(x + i);                                                          \
            k |= UNORD(v, v), a0 = OP(a0, v);                                            \
        }                                                                                \
        if (i < n) {                                                                     \
            VT v = LOAD(x + n - W);                                                      \
            k |= UNORD(v, v), a0 = OP(a0, v);                                            \
        }                                                                                \
        *nan = k != 0;                                                                   \
        return REDUCE(OP(OP(a0, a1), OP(a2, a3)));                                       \
    }
#define UNORD_PS(a, b) _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q)
#define UNORD_PD(a, b) _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q)
#define UNORD_NO(a, b) ((void)(a), (void)(b), 0u)
#define LOAD_SI(p) _mm512_loadu_si512((const void *)(p))
VMINMAX(float, amax_float, 16, __m512, _mm512_loadu_ps, _mm512_max_ps, UNORD_PS, _mm512_reduce_max_ps)
VMINMAX(float, amin_float, 16, __m512, _mm512_loadu_ps, _mm512_min_ps, UNORD_PS, _mm512_reduce_min_ps)
VMINMAX(double, amax_double, 8, __m512d, _mm512_loadu_pd, _mm512_max_pd, UNORD_PD, _mm512_reduce_max_pd)
VMINMAX(double, amin_double, 8, __m512d, _mm512_loadu_pd, _mm512_min_pd, UNORD_PD, _mm512_reduce_min_pd)
VMINMAX(int64_t, amax_i64, 8, __m512i, LOAD_SI, _mm512_max_epi64, UNORD_NO, _mm512_reduce_max_epi64)
VMINMAX(int64_t, amin_i64, 8, __m512i, LOAD_SI, _mm512_min_epi64, UNORD_NO, _mm512_reduce_min_epi64)
VMINMAX(int32_t, amax_i32, 16, __m512i, LOAD_SI, _mm512_max_epi32, UNORD_NO, _mm512_reduce_max_epi32)
VMINMAX(int32_t, amin_i32, 16, __m512i, LOAD_SI, _mm512_min_epi32, UNORD_NO, _mm512_reduce_min_epi32)
#define VPART(T, name, CMP, NANCHK, m, r)                                                \
    if (n >= 64 / (int64_t)sizeof(T)) {                                                  \
        bool nan;                                                                        \
        r = name##_vec(x, n, &nan);                                                      \
        if (nan)                                                                         \
            for (int64_t j = 0;; j++)                                                    \
                if (NANCHK(x[j])) { r = x[j]; break; }                                   \
    } else
#else
#define VPART(T, name, CMP, NANCHK, m, r)                                                \
    if (n >= LANES) {                                                                    \
        T m[LANES];                                                                      \
        for (int j = 0; j < LANES; j++) m[j] = x[0];                                     \
        for (int64_t i = 0; i + LANES <= n; i += LANES)                                  \
            for (int j = 0; j < LANES; j++) {                                            \
                T v = x[i + j];                                                          \
                m[j] = (NANCHK(v) || v CMP m[j]) ? v : m[j];                             \
            }                                                                            \
        for (int64_t i = n - n % LANES; i < n; i++) r = (NANCHK(x[i]) || x[i] CMP r) ? x[i] : r; \
        for (int j = 0; j < LANES; j++) r = (NANCHK(m[j]) || m[j] CMP r) ? m[j] : r;    \
    } else
#endif
#define AMINMAX(T, name, CMP, FIELD, NANCHK)                                             \
    static void name(RState *s, const void *xv, int64_t n, int64_t base, double p) {    \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        if (n <= 0) return;                                                              \
        T r = x[0];                                                                      \
        VPART(T, name, CMP, NANCHK, m, r)                                                \
        for (int64_t i = 1; i < n; i++) r = (NANCHK(x[i]) || x[i] CMP r) ? x[i] : r;     \
        if (!s->has || NANCHK(r) || (!NANCHK(s->FIELD) && r CMP s->FIELD)) s->FIELD = r; \
        s->has = true;                                                                   \
    }
#define ISNAN_(v) ((v) != (v))
#define NEVER_(v) 0
AMINMAX(float, amax_float, >, d, ISNAN_)
AMINMAX(float, amin_float, <, d, ISNAN_)
AMINMAX(double, amax_double, >, d, ISNAN_)
AMINMAX(double, amin_double, <, d, ISNAN_)
AMINMAX(int64_t, amax_i64, >, v, NEVER_)
AMINMAX(int64_t, amin_i64, <, v, NEVER_)
AMINMAX(int32_t, amax_i32, >, v, NEVER_) /* int32 in place (not widened first): 1.4x faster */
AMINMAX(int32_t, amin_i32, <, v, NEVER_)
rk_fn rk_minmax_i32(int rk) { return rk == RK_AMAX ? amax_i32 : rk == RK_AMIN ? amin_i32 : NULL; }

/* max / min with the index of the first occurrence. A chunk of 64 or more
 * goes to the value-only kernel first: only a chunk that beats the best so
 * far (or holds a NaN, which wins and stops) is scanned again for the first
 * element equal to its extreme, 16 at a time. The scalar compare-and-branch
 * loop, kept for short chunks, ran at 4-5 GB/s ([16384, 1024] float32 max(1):
 * 13.8 ms, PyTorch 8.6). The value is the element at the index (-0.0 and 0.0
 * tie: the first one). */
/* the index of the first of the n elements at x equal to m, which is there
 * (gcc leaves the compare-and-break loop scalar: a vector compare per 64 bytes) */
#ifdef __AVX512F__
#define FIRST_EQ_VEC(T, W, CMP, MASK)                                                    \
    for (; i + W <= n; i += W) {                                                         \
        MASK k = CMP;                                                                    \
        if (k) return i + __builtin_ctz(k);                                              \
    }
#else
#define FIRST_EQ_VEC(T, W, CMP, MASK)
#endif
#define FIRST_EQ(T, W, CMP, MASK)                                                        \
    static int64_t first_eq_##T(const T *x, int64_t n, T m) {                            \
        int64_t i = 0;                                                                   \
        FIRST_EQ_VEC(T, W, CMP, MASK)                                                    \
        while (i < n && x[i] != m) i++;                                                  \
        return i;                                                                        \
    }
FIRST_EQ(float, 16, _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), _mm512_set1_ps(m), _CMP_EQ_OQ), __mmask16)
FIRST_EQ(double, 8, _mm512_cmp_pd_mask(_mm512_loadu_pd(x + i), _mm512_set1_pd(m), _CMP_EQ_OQ), __mmask8)
FIRST_EQ(int64_t, 8, _mm512_cmpeq_epi64_mask(_mm512_loadu_si512(x + i), _mm512_set1_epi64(m)), __mmask8)

#define ARGBEST(T, name, VAL, CMP, FIELD, NANCHK)                                        \
    static void name(RState *s, const void *xv, int64_t n, int64_t base, double p) {    \
        (void)p;                                                                         \
        const T *restrict x = xv;                                                        \
        if (s->nan || n <= 0) return;                                                    \
        int64_t i = 0;                                                                   \
        if (n >= 64) {                                                                   \
            RState c = {0};                                                              \
            VAL(&c, xv, n, 0, 0);                                                        \
            T m = (T)c.FIELD;                                                            \
            bool nan = NANCHK(m);                                                        \
            if (s->has && !nan && !(m CMP (T)s->FIELD)) return;                          \
            if (nan)                                                                     \
                while (!NANCHK(x[i])) i++;                                               \
            else i = first_eq_##T(x, n, m);                                                 \
            s->has = true, s->FIELD = x[i], s->idx = base + i, s->nan = nan;             \
            return;                                                                      \
        }                                                                                \
        if (!s->has) s->has = true, s->FIELD = x[0], s->idx = base, i = 1;               \
        if (NANCHK((T)s->FIELD)) { s->nan = true; return; }                              \
        T best = (T)s->FIELD;                                                            \
        int64_t bi = s->idx, i0 = i;                                                     \
        bool nan = false;                                                                \
        for (; i < n; i++) { /* branch-free: random rows mispredicted a branch per new best */ \
            T v = x[i];                                                                  \
            bool b = v CMP best;                                                         \
            best = b ? v : best, bi = b ? base + i : bi, nan |= NANCHK(v);               \
        }                                                                                \
        if (nan) { /* the first NaN wins */                                              \
            for (i = i0; !NANCHK(x[i]);) i++;                                            \
            best = x[i], bi = base + i, s->nan = true;                                   \
        }                                                                                \
        s->FIELD = best, s->idx = bi;                                                    \
    }
ARGBEST(float, max_float, amax_float, >, d, ISNAN_)
ARGBEST(float, min_float, amin_float, <, d, ISNAN_)
ARGBEST(double, max_double, amax_double, >, d, ISNAN_)
ARGBEST(double, min_double, amin_double, <, d, ISNAN_)
ARGBEST(int64_t, max_i64, amax_i64, >, v, NEVER_)
ARGBEST(int64_t, min_i64, amin_i64, <, v, NEVER_)

/* ---------------------------------------------------------------- int64 */

static void prod_i64(RState *s, const void *xv, int64_t n, int64_t base, double p) {
    (void)base, (void)p;
    const int64_t *restrict x = xv;
    uint64_t r = (uint64_t)s->v;
    for (int64_t i = 0; i < n; i++) r *= (uint64_t)x[i];
    s->v = (int64_t)r;
}
static void all_i64(RState *s, const void *xv, int64_t n, int64_t base, double p) {
    (void)base, (void)p;
    const int64_t *restrict x = xv;
    if (!s->v) return;
    for (int64_t i = 0; i < n; i++)
        if (!x[i]) { s->v = 0; return; }
}
static void any_i64(RState *s, const void *xv, int64_t n, int64_t base, double p) {
    (void)base, (void)p;
    const int64_t *restrict x = xv;
    if (s->v) return;
    for (int64_t i = 0; i < n; i++)
        if (x[i]) { s->v = 1; return; }
}

const rk_fn rk_kernels[RK_COUNT][3] = {
    [RK_SUM] = {sum_float_1, sum_double_1, sum_i64_1},
    [RK_PROD] = {prod_float, prod_double, prod_i64},
    [RK_MAX] = {max_float, max_double, max_i64},
    [RK_MIN] = {min_float, min_double, min_i64},
    [RK_ALL] = {all_float, all_double, all_i64},
    [RK_ANY] = {any_float, any_double, any_i64},
    [RK_NORM] = {norm_float, norm_double, NULL},
    [RK_SQDEV] = {sqdev_float, sqdev_double, NULL},
    [RK_SUMEXP] = {sumexp_float, sumexp_double, NULL},
    [RK_AMAX] = {amax_float, amax_double, amax_i64},
    [RK_AMIN] = {amin_float, amin_double, amin_i64},
};

void rk_combine(int rk, int ct, double p, RState *a, const RState *b) {
    switch (rk) {
    case RK_SUM:
    case RK_SQDEV:
    case RK_SUMEXP:
        a->d += b->d;
        a->d1 += b->d1;
        a->v = (int64_t)((uint64_t)a->v + (uint64_t)b->v);
        return;
    case RK_PROD:
        a->d *= b->d;
        a->v = (int64_t)((uint64_t)a->v * (uint64_t)b->v);
        return;
    case RK_ALL: a->v = a->v && b->v; return;
    case RK_ANY: a->v = a->v || b->v; return;
    case RK_NORM:
        if (p == INFINITY) a->d = (b->d != b->d || b->d > a->d) ? b->d : a->d;
        else if (p == -INFINITY) a->d = (b->d != b->d || b->d < a->d) ? b->d : a->d;
        else a->d += b->d;
        return;
    case RK_AMAX:
    case RK_AMIN: {
        if (!b->has) return;
        if (!a->has) {
            *a = *b;
            return;
        }
        if (ct == CT_I64) a->v = (rk == RK_AMAX ? b->v > a->v : b->v < a->v) ? b->v : a->v;
        else if (a->d == a->d && (b->d != b->d || (rk == RK_AMAX ? b->d > a->d : b->d < a->d))) a->d = b->d;
        return;
    }
    case RK_MAX:
    case RK_MIN: {
        if (!b->has || a->nan) return;
        bool take;
        if (!a->has || b->nan) take = true;
        else if (ct == CT_I64) take = rk == RK_MAX ? b->v > a->v : b->v < a->v;
        else take = rk == RK_MAX ? b->d > a->d : b->d < a->d;
        if (take) *a = *b;
        return;
    }
    default: return;
    }
}

/* ------------------------------------------------------- short rows, blocked */

/* A call per row of 16 elements cost more than reading it (the lane folds,
 * the call, the store): rows of up to 1 KB (reduce.c) are reduced 16
 * (float lanes) or 8 (double, int64 lanes) at a time instead. Each row
 * reduces its chunks of one register into an accumulator register, the last
 * chunk masked (filled with the identity); then one transpose tree folds the
 * 16 (8) accumulators together, so that lane r ends with row r's result. The
 * tree's additions for a row depend only on the lane positions: a row gives
 * the same result whatever block it falls in. max / min keep a NaN mask per
 * row (NaN wins, as PyTorch); min is max of the order-reversed values (-x for
 * floats, ~x for integers), so one kernel serves both. */
#if defined __AVX512F__ && defined __AVX512BW__ && defined __AVX512DQ__ && defined __AVX512VL__

/* a chunk of (up to) 16 elements as floats, masked-off lanes 0 */
#define LB_float(p, m) _mm512_maskz_loadu_ps(m, p)
/* LB_f16, LB_bf16: above */
/* of 8 elements as double / int64 */
#define LB_double(p, m) _mm512_castpd_si512(_mm512_maskz_loadu_pd(m, p))
#define LB_i64(p, m) _mm512_maskz_loadu_epi64(m, p)
#define LB_i32(p, m) _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(m, p))
#define LB_f32d(p, m) _mm512_castpd_si512(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, p))) /* float32 into double */
/* the same by a plain load, masked in the register: a row's last chunk when
 * the block's rows lie one after another and the load stays inside them
 * (masked loads that miss the cache stall: [1048576, 5] float32 prod 2.2x
 * torch's time) */
#define LT_float(p, m) _mm512_maskz_mov_ps(m, PLAIN(_mm512_loadu_ps(p)))
#define LT_f16(p, m) _mm512_cvtph_ps(_mm256_maskz_mov_epi16(m, PLAIN(_mm256_loadu_si256((const __m256i *)(p)))))
#define LT_bf16(p, m) WIDEN_BF16(_mm256_maskz_mov_epi16(m, PLAIN(_mm256_loadu_si256((const __m256i *)(p)))))
#define LT_double(p, m) _mm512_castpd_si512(_mm512_maskz_mov_pd(m, PLAIN(_mm512_loadu_pd(p))))
#define LT_i64(p, m) _mm512_maskz_mov_epi64(m, PLAIN(_mm512_loadu_si512((const void *)(p))))
#define LT_i32(p, m) _mm512_cvtepi32_epi64(_mm256_maskz_mov_epi32(m, PLAIN(_mm256_loadu_si256((const __m256i *)(p)))))
#define LT_f32d(p, m) _mm512_castpd_si512(_mm512_cvtps_pd(_mm256_maskz_mov_ps(m, PLAIN(_mm256_loadu_ps(p)))))
/* a register the compiler cannot fold back into a masked load */
#define PLAIN(v)                                                                         \
    __extension__({                                                                      \
        __typeof__(v) v_ = (v);                                                          \
        __asm__("" : "+v"(v_));                                                          \
        v_;                                                                              \
    })

/* the ops of the trees, on the family's register type (double and int64
 * share __m512i); the max ops drop NaN, which the kernels track apart */
#define FADD(a, b) _mm512_add_ps(a, b)
#define FMAX(a, b) _mm512_max_ps(a, b)
#define AS_PD(v) _mm512_castsi512_pd(v)
#define DADD(a, b) _mm512_castpd_si512(_mm512_add_pd(AS_PD(a), AS_PD(b)))
#define DMAX(a, b) _mm512_castpd_si512(_mm512_max_pd(AS_PD(a), AS_PD(b)))
#define IADD(a, b) _mm512_add_epi64(a, b)
#define IMAX(a, b) _mm512_max_epi64(a, b)
#define DMUL(a, b) _mm512_castpd_si512(_mm512_mul_pd(AS_PD(a), AS_PD(b)))
#define IMUL(a, b) _mm512_mullo_epi64(a, b)

/* v[0..15] -> lane r = OP over the lanes of v[r]: interleave pairs of
 * registers and combine, four times (elements, pairs, 128-bit blocks twice) */
#define TREE16(name, OP)                                                                 \
    static __m512 name(const __m512 *v) {                                                \
        __m512 a[8], b[4], c[2];                                                         \
        for (int i = 0; i < 8; i++)                                                      \
            a[i] = OP(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1])); \
        for (int i = 0; i < 4; i++) {                                                    \
            __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);  \
            b[i] = OP(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y))); \
        }                                                                                \
        for (int i = 0; i < 2; i++)                                                      \
            c[i] = OP(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),                \
                      _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xdd));               \
        return OP(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd)); \
    }
/* v[0..7] -> lane r = OP over the lanes of v[r] (8 lanes of 64 bits) */
#define TREE8(name, OP)                                                                  \
    static __m512i name(const __m512i *v) {                                              \
        __m512i a[4], b[2];                                                              \
        for (int i = 0; i < 4; i++)                                                      \
            a[i] = OP(_mm512_unpacklo_epi64(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi64(v[2 * i], v[2 * i + 1])); \
        for (int i = 0; i < 2; i++)                                                      \
            b[i] = OP(_mm512_shuffle_i64x2(a[2 * i], a[2 * i + 1], 0x88),                \
                      _mm512_shuffle_i64x2(a[2 * i], a[2 * i + 1], 0xdd));               \
        return OP(_mm512_shuffle_i64x2(b[0], b[1], 0x88), _mm512_shuffle_i64x2(b[0], b[1], 0xdd)); \
    }
TREE16(tree_fadd, FADD)
TREE16(tree_fmax, FMAX)
TREE8(tree_dadd, DADD)
TREE8(tree_dmax, DMAX)
TREE8(tree_iadd, IADD)
TREE8(tree_imax, IMAX)
TREE8(tree_dmul, DMUL)
TREE8(tree_imul, IMUL)

/* 16 floats to out[0..15] as doubles */
static inline void store_f16x(void *out, __m512 v) {
    double *o = out;
    _mm512_storeu_pd(o, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    _mm512_storeu_pd(o + 8, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

/* The chunk loop shared by every block kernel: BODY folds x, chunk k of row
 * r, into acc[r]. Rows one after the other, in memory order (chunk-major
 * order measured 1.6x slower on rows of 64 floats: the prefetcher follows
 * one stream better than 16); full chunks by plain loads, the last one
 * masked (masked loads that miss the cache stall, 2.7x slower on rows of 16).
 * The row loop stays rolled: unrolled, the kernels took 45 KB of code for no
 * measured gain. */
#define CHUNKS(L, MT, T, NAME, BODY)                                                     \
    bool adj = true; /* every row right after the one before (not just the last) */       \
    for (int r = 1; r < L; r++)                                                          \
        adj &= (uintptr_t)rows[r] - (uintptr_t)rows[r - 1] == (uintptr_t)n * sizeof(T);  \
    _Pragma("GCC unroll 1") for (int r = 0; r < L; r++) {                                \
        const T *row = rows[r];                                                          \
        int64_t k = 0;                                                                   \
        for (; k + L <= n; k += L) {                                                     \
            const MT m = (MT)-1;                                                         \
            VT x = LB_##NAME(row + k, m);                                                \
            BODY;                                                                        \
        }                                                                                \
        if (k < n) {                                                                     \
            MT m = (MT)((1u << (n - k)) - 1);                                            \
            VT x = adj && r * n + k + L <= L * n ? LT_##NAME(row + k, m) : LB_##NAME(row + k, m); \
            BODY;                                                                        \
        }                                                                                \
    }

/* Float sums (16 rows, float lanes, as PyTorch's float sums): mode 0 x, 1 |x|
 * (norm 1), 2 x * x (norm 2); |x| is an and with keep, x * x an fma with x
 * where a plain sum has 1 (x * 1 + acc rounds as x + acc). */
#define VT __m512
#define BSUM_F(name, T)                                                                  \
    static void bsum_##name(void *out, const void *const *rows, int64_t n, int mode) {   \
        const __m512 keep = _mm512_castsi512_ps(_mm512_set1_epi32(mode == 1 ? 0x7fffffff : -1)), one = _mm512_set1_ps(1); \
        const __mmask16 sq = mode == 2 ? 0xffff : 0;                                     \
        __m512 acc[16];                                                                  \
        for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();                       \
        CHUNKS(16, __mmask16, T, name,                                              \
               x = _mm512_and_ps(x, keep);                                               \
               acc[r] = _mm512_fmadd_ps(x, _mm512_mask_mov_ps(one, sq, x), acc[r]))      \
        store_f16x(out, tree_fadd(acc));                                                 \
    }
/* float max (mode 0) / min (mode 1, max of -x): masked lanes -inf */
#define BMAX_F(name, T)                                                                  \
    static void bmax_##name(void *out, const void *const *rows, int64_t n, int mode) {   \
        const __m512 flip = _mm512_castsi512_ps(_mm512_set1_epi32(mode ? (int)0x80000000u : 0)); \
        const __m512 lo = _mm512_set1_ps(-INFINITY);                                     \
        __m512 acc[16];                                                                  \
        __mmask16 nan[16] = {0};                                                         \
        for (int r = 0; r < 16; r++) acc[r] = lo;                                        \
        CHUNKS(16, __mmask16, T, name,                                              \
               x = _mm512_mask_mov_ps(lo, m, _mm512_xor_ps(x, flip));                    \
               nan[r] |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);                         \
               acc[r] = _mm512_max_ps(acc[r], x))                                        \
        __mmask16 bits = 0;                                                              \
        for (int r = 0; r < 16; r++) bits |= (__mmask16)((nan[r] != 0) << r);            \
        __m512 v = _mm512_mask_mov_ps(tree_fmax(acc), bits, _mm512_set1_ps(NAN));        \
        store_f16x(out, _mm512_xor_ps(v, flip));                                         \
    }
#define FLOAT_BLOCKS(X) X(float, float) X(f16, uint16_t) X(bf16, uint16_t)
FLOAT_BLOCKS(BSUM_F)
FLOAT_BLOCKS(BMAX_F)
#undef VT

/* 8 rows in 64-bit lanes: double and int64 (int32 widened) sums and max / min
 * (min: max of -x for double, ~x for integers). ADD / MAX: the lane ops, NEG
 * the order-reversing mask, LO the identity of max, ISNAN a NaN test. */
#define VT __m512i
#define BSUM_8(name, T, ADD, TREE)                                                       \
    static void bsum_##name(void *out, const void *const *rows, int64_t n, int mode) {   \
        const __m512i keep = _mm512_set1_epi64(mode == 1 ? INT64_MAX : -1);              \
        const __m512d one = _mm512_set1_pd(1);                                           \
        const __mmask8 sq = mode == 2 ? 0xff : 0;                                        \
        __m512i acc[8];                                                                  \
        for (int r = 0; r < 8; r++) acc[r] = _mm512_setzero_si512();                     \
        CHUNKS(8, __mmask8, T, name, ADD(x, keep, one, sq, acc[r]))                 \
        _mm512_storeu_si512(out, TREE(acc));                                             \
    }
#define DFMA(x, keep, one, sq, acc)                                                      \
    do {                                                                                 \
        __m512d y = AS_PD(_mm512_and_si512(x, keep));                                    \
        acc = _mm512_castpd_si512(_mm512_fmadd_pd(y, _mm512_mask_mov_pd(one, sq, y), AS_PD(acc))); \
    } while (0)
#define IACC(x, keep, one, sq, acc) ((void)keep, (void)one, (void)sq, acc = _mm512_add_epi64(acc, x))
#define BMAX_8(name, T, MAX, TREE, NEG, LO, ISNAN)                                   \
    static void bmax_##name(void *out, const void *const *rows, int64_t n, int mode) {   \
        const __m512i flip = _mm512_set1_epi64(mode ? NEG : 0), lo = _mm512_set1_epi64(LO); \
        __m512i acc[8];                                                                  \
        __mmask8 nan[8] = {0};                                                           \
        for (int r = 0; r < 8; r++) acc[r] = lo;                                         \
        CHUNKS(8, __mmask8, T, name,                                                \
               x = _mm512_mask_mov_epi64(lo, m, _mm512_xor_si512(x, flip));              \
               nan[r] |= ISNAN(x);                                                       \
               acc[r] = MAX(acc[r], x))                                                  \
        __mmask8 bits = 0;                                                               \
        for (int r = 0; r < 8; r++) bits |= (__mmask8)((nan[r] != 0) << r);              \
        __m512i v = _mm512_mask_mov_epi64(TREE(acc), bits, _mm512_castpd_si512(_mm512_set1_pd(NAN))); \
        _mm512_storeu_si512(out, _mm512_xor_si512(v, flip));                             \
    }
/* products of float32 in double, of int32 in wrapping int64: masked lanes 1.
 * Only these two, and rows of up to 64: 1 thread, ms, per-row kernel ->
 * block (torch 1.13): [1048576, 16] float32 8.4 -> 4.5 (5.0), int32 24.0 ->
 * 4.8 (603); but float64 7.5 -> 9.3, int64 6.1 -> 7.8, [65536, 200] float32
 * 2.6 -> 3.8 (a row's chain of multiplies is as long as the row's chunks) */
#define BPROD_8(name, T, MUL, TREE, ONE)                                                 \
    static void bprod_##name(void *out, const void *const *rows, int64_t n, int mode) {  \
        (void)mode;                                                                      \
        const __m512i one = ONE;                                                         \
        __m512i acc[8];                                                                  \
        for (int r = 0; r < 8; r++) acc[r] = one;                                        \
        CHUNKS(8, __mmask8, T, name, acc[r] = MUL(acc[r], _mm512_mask_mov_epi64(one, m, x))) \
        _mm512_storeu_si512(out, TREE(acc));                                             \
    }
#define DNAN(x) _mm512_cmp_pd_mask(AS_PD(x), AS_PD(x), _CMP_UNORD_Q)
#define NONAN(x) ((void)(x), (__mmask8)0)
#define D_NEG INT64_MIN
#define D_LO 0xfff0000000000000ll /* -inf */
BSUM_8(double, double, DFMA, tree_dadd)
BSUM_8(i64, int64_t, IACC, tree_iadd)
BSUM_8(i32, int32_t, IACC, tree_iadd)
BPROD_8(f32d, float, DMUL, tree_dmul, _mm512_castpd_si512(_mm512_set1_pd(1)))
BPROD_8(i32, int32_t, IMUL, tree_imul, _mm512_set1_epi64(1))
BMAX_8(double, double, DMAX, tree_dmax, D_NEG, D_LO, DNAN)
BMAX_8(i64, int64_t, IMAX, tree_imax, -1, INT64_MIN, NONAN)
BMAX_8(i32, int32_t, IMAX, tree_imax, -1, INT64_MIN, NONAN)
#undef VT

rk_block_fn rk_block_kernel(int rk, ct_dtype dt, double p, int *nrows, int *mode) {
    bool sum = rk == RK_SUM || (rk == RK_NORM && (p == 1 || p == 2));
    if (rk == RK_PROD) {
        *mode = 0, *nrows = 8;
        return dt == CT_FLOAT32 ? bprod_f32d : dt == CT_INT32 ? bprod_i32 : NULL;
    }
    if (!sum && rk != RK_AMAX && rk != RK_AMIN) return NULL;
    if (rk == RK_NORM && !c10_is_float(dt)) return NULL;
    *mode = rk == RK_NORM ? (int)p : rk == RK_AMIN;
    *nrows = dt == CT_FLOAT32 || dt == CT_FLOAT16 || dt == CT_BFLOAT16 ? 16 : 8;
#define PICK(f) return sum ? bsum_##f : bmax_##f
    switch (dt) {
    case CT_FLOAT32: PICK(float);
    case CT_FLOAT16: PICK(f16);
    case CT_BFLOAT16: PICK(bf16);
    case CT_FLOAT64: PICK(double);
    case CT_INT64: PICK(i64);
    case CT_INT32: PICK(i32);
    default: return NULL;
    }
#undef PICK
}
#else
rk_block_fn rk_block_kernel(int rk, ct_dtype dt, double p, int *nrows, int *mode) {
    (void)rk, (void)dt, (void)p, (void)nrows, (void)mode;
    return NULL;
}
#endif

/* softmax's first-order gradient over rows of D: o = y (g - sum(g y)), or
 * log_softmax's, o = g - exp(y) sum(g) (the exps by the array function, into
 * o). The sum in 16 lanes, folded in a fixed order; the row is still in cache
 * for the second pass. The composite (a product, a sum, a difference and a
 * product: four passes and three temporaries) ran at 1.44x torch's time,
 * forward + backward. float64 small (-Os): gradcheck's more than speed's. */
#define SOFTMAX_GRAD(T, S, ATTR, EXPN)                                                     \
    ATTR void rk_softmax_grad_##S(const T *g, const T *y, T *o, int64_t R, int64_t D, bool lg, int nt) { \
        OMP_FOR_NT                                                                         \
        for (int64_t r = 0; r < R; r++) {                                                  \
            const T *restrict gr = g + r * D, *restrict yr = y + r * D;                    \
            T *restrict orow = o + r * D, acc[16] = {0}, s = 0;                            \
            int64_t i = 0;                                                                 \
            for (; i + 16 <= D; i += 16)                                                   \
                for (int j = 0; j < 16; j++) acc[j] += gr[i + j] * (lg ? (T)1 : yr[i + j]); \
            for (; i < D; i++) s += gr[i] * (lg ? (T)1 : yr[i]);                           \
            for (int w = 8; w >= 1; w /= 2)                                                \
                for (int j = 0; j < w; j++) acc[j] += acc[j + w];                          \
            s += acc[0];                                                                   \
            if (lg) EXPN(orow, yr, D);                                                     \
            for (i = 0; i < D; i++) orow[i] = lg ? gr[i] - orow[i] * s : yr[i] * (gr[i] - s); \
        }                                                                                  \
    }
SOFTMAX_GRAD(float, f, , vm_expf_n)
SOFTMAX_GRAD(double, d, COLD_CODE, vm_exp_d_n)
