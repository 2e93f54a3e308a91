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

/* exp for float: vmath.h's branch-free Cephes version, so that loops vectorise */
#define EXP_float vm_expf
#define EXP_double vm_exp_d

/* ---------------------------------------------------------------- floats */

/* an element of each input dtype as the accumulator's type */
#define LOAD_float(v) (v)
#define LOAD_double(v) (v)
#define LOAD_f16(v) c10_h2f(v)
#define LOAD_bf16(v) rk_bf16(v)

/* acc[j] += x[k + j] over a block of m elements (a multiple of LN) */
#define SUM_BLOCK(name, T, A, LN)                                                        \
    static inline void block_##name(A *restrict acc, const T *restrict y, int64_t m) {   \
        for (int64_t k = 0; k < m; k += LN)                                              \
            for (int j = 0; j < LN; j++) acc[j] += LOAD_##name(y[k + j]);                \
    }
SUM_BLOCK(float, float, float, 64)
SUM_BLOCK(double, double, double, 32)
SUM_BLOCK(bf16, uint16_t, float, 64)
#ifdef __AVX512F__
/* float16: the same lanes, converted by vcvtph2ps (the compiler does not
 * vectorise c10_h2f) */
static inline void block_f16(float *restrict acc, const uint16_t *restrict y, int64_t m) {
    __m512 a[4];
    for (int q = 0; q < 4; q++) a[q] = _mm512_loadu_ps(acc + 16 * q);
    for (int64_t k = 0; k < m; k += 64)
        for (int q = 0; q < 4; q++)
            a[q] = _mm512_add_ps(a[q], _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(y + k + 16 * q))));
    for (int q = 0; q < 4; q++) _mm512_storeu_ps(acc + 16 * q, a[q]);
}
#else
SUM_BLOCK(f16, uint16_t, float, 64)
#endif

/* Sums: LN lanes of A (float for float inputs, as PyTorch) over blocks of at
 * most 4096 elements, each block folded pairwise and added into a double. */
#define SUM_KERNEL(name, T, A, LN)                                                       \
    static void sum_##name(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        double r = 0;                                                                    \
        int64_t i = 0;                                                                   \
        while (n - i >= LN) {                                                            \
            int64_t m = (n - i) / LN * LN;                                               \
            if (m > 4096) m = 4096;                                                      \
            A acc[LN] = {0};                                                             \
            block_##name(acc, x + i, m);                                                 \
            /* unrolled, the fold stays in registers (a loop spills acc) */              \
            _Pragma("GCC unroll 8") for (int w = LN / 2; w >= 1; w /= 2)                 \
                _Pragma("GCC unroll 64") for (int j = 0; j < w; j++) acc[j] += acc[j + w]; \
            r += (double)acc[0];                                                         \
            i += m;                                                                      \
        }                                                                                \
        for (; i < n; i++) r += (double)LOAD_##name(x[i]);                               \
        s->d += r;                                                                       \
    }
SUM_KERNEL(float, float, float, 64)
SUM_KERNEL(double, double, double, 32)
SUM_KERNEL(f16, uint16_t, float, 64)
SUM_KERNEL(bf16, uint16_t, float, 64)

/* integer and bool sums in int64, wrapping (the compiler vectorises them) */
#define WIDEN_(v) (uint64_t)(int64_t)(v)
#define TRUTH_(v) (uint64_t)((v) != 0)
#define SUM_INT(name, T, CONV)                                                           \
    static void sum_##name(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        uint64_t r = 0;                                                                  \
        for (int64_t i = 0; i < n; i++) r += CONV(x[i]);                                 \
        s->v = (int64_t)((uint64_t)s->v + r);                                            \
    }
SUM_INT(i64, int64_t, WIDEN_)
SUM_INT(i32, int32_t, WIDEN_)
SUM_INT(i16, int16_t, WIDEN_)
SUM_INT(i8, int8_t, WIDEN_)
SUM_INT(u8, uint8_t, WIDEN_)
SUM_INT(b8, uint8_t, TRUTH_)

rk_fn rk_sum_src(ct_dtype dt) {
    switch (dt) {
    case CT_FLOAT16: return sum_f16;
    case CT_BFLOAT16: return sum_bf16;
    case CT_INT32: return sum_i32;
    case CT_INT16: return sum_i16;
    case CT_INT8: return sum_i8;
    case CT_UINT8: return sum_u8;
    case CT_BOOL: return sum_b8;
    default: return NULL;
    }
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
    static void max_##T(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)p;                                                                         \
        const T *restrict x = xv;                                                        \
        if (s->nan || n <= 0) return;                                                    \
        int64_t i = 0;                                                                   \
        if (!s->has) s->has = true, s->d = (double)x[0], s->idx = base, i = 1;           \
        if (s->d != s->d) { s->nan = true; return; }                                     \
        T best = (T)s->d;                                                                \
        int64_t bi = s->idx;                                                             \
        for (; i < n; i++) {                                                             \
            T v = x[i];                                                                  \
            if (v > best) best = v, bi = base + i;                                       \
            else if (v != v) { best = v, bi = base + i; s->nan = true; break; }          \
        }                                                                                \
        s->d = (double)best, s->idx = bi;                                                \
    }                                                                                    \
    static void min_##T(RState *s, const void *xv, int64_t n, int64_t base, double p) { \
        (void)p;                                                                         \
        const T *restrict x = xv;                                                        \
        if (s->nan || n <= 0) return;                                                    \
        int64_t i = 0;                                                                   \
        if (!s->has) s->has = true, s->d = (double)x[0], s->idx = base, i = 1;           \
        if (s->d != s->d) { s->nan = true; return; }                                     \
        T best = (T)s->d;                                                                \
        int64_t bi = s->idx;                                                             \
        for (; i < n; i++) {                                                             \
            T v = x[i];                                                                  \
            if (v < best) best = v, bi = base + i;                                       \
            else if (v != v) { best = v, bi = base + i; s->nan = true; break; }          \
        }                                                                                \
        s->d = (double)best, s->idx = bi;                                                \
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
        } else {                                                                         \
            for (; i < n; i++) r += pow(fabs((double)x[i]), p);                          \
        }                                                                                \
        for (int j = 0; j < LANES; j++) r += acc[j];                                     \
        s->d += r;                                                                       \
    }
FLOAT_KERNELS(float)
FLOAT_KERNELS(double)

/* value-only max/min: lanes, NaN sticks (x != x wins, and nothing beats NaN) */
#define AMINMAX(T, name, CMP, FIELD, NANCHK)                                             \
    static void name(RState *s, const void *xv, int64_t n, int64_t base, double p) {    \
        (void)base, (void)p;                                                             \
        const T *restrict x = xv;                                                        \
        if (n <= 0) return;                                                              \
        T m[LANES], r = x[0];                                                            \
        for (int j = 0; j < LANES; j++) m[j] = x[0];                                     \
        int64_t i = 0;                                                                   \
        for (; i + LANES <= n; i += LANES)                                               \
            for (int j = 0; j < LANES; j++) {                                            \
                T v = x[i + j];                                                          \
                m[j] = (NANCHK(v) || v CMP m[j]) ? v : m[j];                             \
            }                                                                            \
        for (; i < n; i++) r = (NANCHK(x[i]) || x[i] CMP r) ? x[i] : r;                  \
        for (int j = 0; j < LANES; j++) r = (NANCHK(m[j]) || m[j] CMP r) ? m[j] : r;     \
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

/* ---------------------------------------------------------------- int64 */

static void prod_i64(RState *s, const void *xv, int64_t n, int64_t base, double p) {
    (void)base, (void)p;
    const int64_t *restrict x = xv;
    uint64_t r = (uint64_t)s->v;
    for (int64_t i = 0; i < n; i++) r *= (uint64_t)x[i];
    s->v = (int64_t)r;
}
#define INT_MINMAX(name, CMP)                                                            \
    static void name(RState *s, const void *xv, int64_t n, int64_t base, double p) {    \
        (void)p;                                                                         \
        const int64_t *restrict x = xv;                                                  \
        if (n <= 0) return;                                                              \
        int64_t i = 0;                                                                   \
        if (!s->has) s->has = true, s->v = x[0], s->idx = base, i = 1;                   \
        int64_t best = s->v, bi = s->idx;                                                \
        for (; i < n; i++)                                                               \
            if (x[i] CMP best) best = x[i], bi = base + i;                               \
        s->v = best, s->idx = bi;                                                        \
    }
INT_MINMAX(max_i64, >)
INT_MINMAX(min_i64, <)
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
    [RK_SUM] = {sum_float, sum_double, sum_i64},
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
