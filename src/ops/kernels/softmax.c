/* softmax.c: the rows and column blocks of softmax and log_softmax (float,
 * double, and float16 / bfloat16 through float buffers), called by reduce.c. */
#include "ops/kernels/reduce_kernels.h"
#include "ops/kernels/vmath.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define LANES 32

/* ---------------------------------------------------------------- softmax */

static inline float flog(float x) { return logf(x); }
static inline double dlog(double x) { return log(x); }
#define LOG_float flog
#define LOG_double dlog
#define SB 256 /* columns per block when the softmax dim is not innermost */
#define EXP_SUM_float vm_expf_sum_n
#define EXP_SUM_double vm_exp_d_sum_n

/* Three passes over the row: its max, the exps and their sum (vmath.h's array
 * exp: AVX-512 where there is), and the scaling; the later two hit L1. */
#define SOFTMAX(T)                                                                       \
    /* next: the following row, prefetched during the max pass (the rows stream \
     * from memory) */                                                                  \
    static void softmax_row_##T(const T *restrict x, T *restrict y, int64_t n, bool logm, const T *next) { \
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
            T ls = LOG_##T(EXP_SUM_##T(NULL, x, m, n));                                  \
            /* (x - m) - ls, in torch's order: m + ls loses x's digits */                \
            for (i = 0; i < n; i++) y[i] = (x[i] - m) - ls;                              \
        } else {                                                                         \
            T inv = 1 / EXP_SUM_##T(y, x, m, n);                                         \
            for (i = 0; i < n; i++) y[i] *= inv;                                         \
        }                                                                                \
    }                                                                                    \
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
    }                                                                                    \
    /* rows along the last dim; buf: D elements per thread when es != 1 */             \
    static void rows_##T(const T *x, const RowGeom *g, int64_t es, T *y, int64_t outer, int64_t D, bool logm, \
                         int nt, T *buf) {                                               \
        (void)nt;                                                                        \
        OMP_FOR_NT                                                                       \
        for (int64_t o = 0; o < outer; o++) {                                            \
            const T *r = x + rk_row_offset(g, o);                                        \
            if (es != 1) r = gather_##T(buf + D * thread_num(), r, es, D);               \
            const T *next = es == 1 && o + 1 < outer ? x + rk_row_offset(g, o + 1) : NULL; \
            softmax_row_##T(r, y + o * D, D, logm, next);                                \
        }                                                                                \
    }
#define GATHER(T)                                                                        \
    static inline const T *gather_##T(T *restrict b, const T *restrict r, int64_t es, int64_t n) { \
        if (es == 2) /* a ::2 slice: a constant stride vectorises (permutes) */          \
            for (int64_t i = 0; i < n; i++) b[i] = r[2 * i];                             \
        else                                                                             \
            for (int64_t i = 0; i < n; i++) b[i] = r[i * es];                            \
        return b;                                                                        \
    }
static inline int64_t thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
GATHER(float)
GATHER(double)
GATHER(uint16_t)
SOFTMAX(float)
SOFTMAX(double)

/* ---------------------------------------------------------------- 16-bit floats */

/* Rows converted to float in a per-thread buffer (2 D floats: the row, then its
 * softmax; a strided row is first gathered into the second half), softmaxed
 * there, rounded back. */
static void rows_half(const uint16_t *x, const RowGeom *g, int64_t es, uint16_t *y, int64_t outer, int64_t D,
                      bool logm, int nt, float *buf, bool bf) {
    (void)nt;
    OMP_FOR_NT
    for (int64_t o = 0; o < outer; o++) {
        float *b = buf + D * 2 * thread_num();
        const uint16_t *r = x + rk_row_offset(g, o);
        if (es != 1) r = gather_uint16_t((uint16_t *)(b + D), r, es, D);
        c10_half_to_float_n(b, r, bf, D);
        softmax_row_float(b, b + D, D, logm, NULL);
        c10_float_to_half_n(y + o * D, b + D, bf, D);
    }
}

bool softmax_lastdim(ct_dtype dt, const void *x, const RowGeom *g, int64_t es, void *y, int64_t outer, int64_t D,
                     bool logm, int nt) {
    bool half = dt == CT_FLOAT16 || dt == CT_BFLOAT16;
    size_t es_bytes = dt == CT_FLOAT64 ? 8 : 4, per = half ? 2 * (size_t)D : es != 1 ? (size_t)D : 0;
    void *buf = per ? malloc(per * es_bytes * (size_t)nt) : NULL;
    if (per && !buf) return false;
    if (half) rows_half(x, g, es, y, outer, D, logm, nt, buf, dt == CT_BFLOAT16);
    else if (dt == CT_FLOAT32) rows_float(x, g, es, y, outer, D, logm, nt, buf);
    else rows_double(x, g, es, y, outer, D, logm, nt, buf);
    free(buf);
    return true;
}
