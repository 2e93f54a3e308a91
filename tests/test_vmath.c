/* test_vmath.c: vmath.h's branch-free double exp, log, tanh, log1p, expm1 and erf,
 * float exp, expm1, erf and log1p, and the array exps (AVX-512 bodies where the
 * build has them) against long
 * double libm (x87, 11 more bits: the reference's own error is ~0.001 ulp),
 * over millions of random doubles across the whole range, dense sweeps of the
 * edges (overflow, the subnormal results, 0.625 where tanh changes formula) and
 * the IEEE special values. The loops over arrays vectorise, so this tests the
 * vector code; each result is also compared with a scalar call (for the array
 * functions: a call on that one element, through the masked tail). The float exps
 * were also checked over all 2^32 floats against libm's double exp: vm_expf and
 * vm_expf_n 0.894 ulp with FMA, vm_expf 0.990 without. */
#include "harness.h"
#include "ops/kernels/vmath.h"
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

#define BOUND 1.0 /* ulp; the measured maxima are quoted in vmath.h */
#define NR (1 << 21)

typedef double (*dfn)(double);
typedef long double (*ref_fn)(long double);

/* Each function as a scalar call (not inlined into a vectorised loop) and a loop
 * that vectorises; the float ones take and give doubles holding floats. */
#define DEF_FN(name, f)                                                                    \
    __attribute__((noinline)) static double s_##name(double x) { return f(x); }           \
    static void v_##name(const double *restrict x, double *restrict y, int64_t n) {        \
        for (int64_t i = 0; i < n; i++) y[i] = f(x[i]);                                    \
    }
#define DEF_FNF(name, f)                                                                   \
    __attribute__((noinline)) static double s_##name(double x) { return f((float)x); }     \
    static void vf_##name(const float *restrict x, float *restrict y, int64_t n) {         \
        for (int64_t i = 0; i < n; i++) y[i] = f(x[i]);                                    \
    }                                                                                      \
    static void v_##name(const double *restrict x, double *restrict y, int64_t n) {        \
        float *xf = malloc((size_t)n * sizeof *xf), *yf = malloc((size_t)n * sizeof *yf); \
        for (int64_t i = 0; i < n; i++) xf[i] = (float)x[i];                               \
        vf_##name(xf, yf, n);                                                              \
        for (int64_t i = 0; i < n; i++) y[i] = yf[i];                                      \
        free(xf), free(yf);                                                                \
    }
DEF_FN(exp, vm_exp_d)
DEF_FN(log, vm_log_d)
DEF_FN(tanh, vm_tanh_d)
DEF_FN(log1p, vm_log1p_d)
DEF_FN(expm1, vm_expm1_d)
DEF_FN(erf, vm_erf_d)
DEF_FNF(expm1f, vm_expm1f)
DEF_FNF(erff, vm_erff)
DEF_FNF(log1pf, vm_log1pf)
DEF_FNF(expf, vm_expf)
DEF_FNF(softplusf, vm_log1p_expf)
DEF_FNF(erff_fast, vm_erff_fast)
static long double log1p_expl(long double x) { return log1pl(expl(x)); }
/* the array functions over the whole array; the scalar: on one element */
#define DEF_ARR(name, T, f)                                                                \
    __attribute__((noinline)) static double s_##name(double x) {                           \
        T a = (T)x;                                                                        \
        f(&a, &a, 1);                                                                      \
        return a;                                                                          \
    }                                                                                      \
    static void v_##name(const double *restrict x, double *restrict y, int64_t n) {        \
        T *a = malloc((size_t)n * sizeof *a);                                              \
        for (int64_t i = 0; i < n; i++) a[i] = (T)x[i];                                    \
        f(a, a, n); /* in place, as exp_ runs it */                                        \
        for (int64_t i = 0; i < n; i++) y[i] = a[i];                                       \
        free(a);                                                                           \
    }
DEF_ARR(expf_n, float, vm_expf_n)
DEF_ARR(exp_d_n, double, vm_exp_d_n)
#ifdef __AVX512F__
/* softmax's exps (no upper clamp: clamped here at 100, as x - max <= 0 never needs) */
static inline __m512 expf16_tab(__m512 x) { return vm_expf16_tab(_mm512_min_ps(_mm512_set1_ps(100.0f), x)); }
static inline __m512d exp8_le(__m512d x) { return vm_exp8_le(_mm512_min_pd(_mm512_set1_pd(710.0), x)); }
#define MAP16(name, T, W, M, vf, ps)                                                       \
    static void name(T *y, const T *x, int64_t n) {                                        \
        for (int64_t i = 0; i < n; i += W) {                                               \
            M k = (M)(n - i >= W ? (1u << W) - 1 : (1u << (n - i)) - 1);                   \
            _mm512_mask_storeu_##ps(y + i, k, vf(_mm512_maskz_loadu_##ps(k, x + i)));      \
        }                                                                                  \
    }
MAP16(expf_tab_n, float, 16, __mmask16, expf16_tab, ps)
MAP16(exp8_le_n, double, 8, __mmask8, exp8_le, pd)
DEF_ARR(expf_tab, float, expf_tab_n)
DEF_ARR(exp_le, double, exp8_le_n)
#endif

typedef struct {
    const char *name;
    void (*vec)(const double *restrict, double *restrict, int64_t);
    dfn scalar;
    ref_fn ref;
    int p;        /* precision: 53 or 24 (float) */
    double bound; /* ulp */
} Fn;
#define FN(name, ref, p) {#name, v_##name, s_##name, ref, p, BOUND}
static const Fn EXP = FN(exp, expl, 53), LOG = FN(log, logl, 53), TANH = FN(tanh, tanhl, 53),
                LOG1P = FN(log1p, log1pl, 53), EXPM1 = FN(expm1, expm1l, 53), ERF = FN(erf, erfl, 53),
                EXPM1F = FN(expm1f, expm1l, 24), ERFF = FN(erff, erfl, 24), LOG1PF = FN(log1pf, log1pl, 24), EXPF = FN(expf, expl, 24), EXPF_N = FN(expf_n, expl, 24),
                EXP_D_N = FN(exp_d_n, expl, 53);
/* softplus' log1p(e^t) in float: 1.66 ulp measured over every 61st float */
static const Fn SOFTPLUSF = {"softplusf", v_softplusf, s_softplusf, log1p_expl, 24, 2.0};
/* gelu's erf in float arithmetic: 2.18 ulp measured (random bits, [-4.5, 4.5],
 * sweeps), 3.17 without FMA (each step rounded twice) */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
static const Fn ERFF_FAST = {"erff_fast", v_erff_fast, s_erff_fast, erfl, 24, 2.5};
#else
static const Fn ERFF_FAST = {"erff_fast", v_erff_fast, s_erff_fast, erfl, 24, 3.5};
#endif
#ifdef __AVX512F__
static const Fn EXPF_TAB = FN(expf_tab, expl, 24), EXP_LE = FN(exp_le, expl, 53);
#endif

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}
static double uniform(double lo, double hi) { return lo + (hi - lo) * (double)(next_u64() >> 11) * 0x1p-53; }
static double any_bits(void) { return vm_bits_to_double(next_u64()); }
static double positive_bits(void) { return vm_bits_to_double(next_u64() >> 1); }
static double any_bits_f(void) { return vm_bits_to_float((int32_t)(next_u64() >> 32)); }
static double positive_bits_f(void) { return vm_bits_to_float((int32_t)(next_u64() >> 33)); }

static int same(double a, double b) { return a != a ? b != b : a == b && signbit(a) == signbit(b); }

/* |y - ref| in units of the last place of the double (p = 53) or float (p = 24)
 * nearest ref, 2^-1074 (2^-149) in the subnormals */
static double ulp_error(double y, long double ref, int p) {
    double rd = p == 24 ? (float)ref : (double)ref;
    if (same(y, rd)) return 0;
    if (rd != rd || y != y || isinf(rd) || isinf(y)) return INFINITY;
    int emin = p == 24 ? -149 : -1074, e = ref == 0 ? emin : ilogbl(ref) - (p - 1);
    return (double)(fabsl((long double)y - ref) / ldexpl(1.0L, e < emin ? emin : e));
}

/* Runs f over x[0..n): every result within f->bound of the reference and equal to
 * the scalar call. Returns the largest error. */
static double check_all(const Fn *f, double *x, int64_t n, const char *what) {
    double *y = malloc((size_t)n * sizeof *y), worst = 0, worst_x = 0;
    int64_t bad = 0;
    if (f->p == 24)
        for (int64_t i = 0; i < n; i++) x[i] = (float)x[i];
    f->vec(x, y, n);
    for (int64_t i = 0; i < n; i++) {
        double err = ulp_error(y[i], f->ref(x[i]), f->p);
        if (err > worst) worst = err, worst_x = x[i];
        if ((err > f->bound || !same(y[i], f->scalar(x[i]))) && bad++ < 5)
            FAIL_AT("%s(%a) = %a (scalar %a), want %a: %.3f ulp", f->name, x[i], y[i], f->scalar(x[i]),
                    (double)f->ref(x[i]), err);
    }
    printf("  %-5s %-28s max %.4f ulp at %a\n", f->name, what, worst, worst_x);
    free(y);
    return worst;
}

static void random_range(const Fn *f, double lo, double hi) {
    double *x = malloc(NR * sizeof *x);
    for (int i = 0; i < NR; i++) x[i] = uniform(lo, hi);
    char what[64];
    snprintf(what, sizeof what, "uniform [%g, %g]", lo, hi);
    check_all(f, x, NR, what);
    free(x);
}
static void random_bits(const Fn *f, double (*gen)(void), const char *what) {
    double *x = malloc(NR * sizeof *x);
    for (int i = 0; i < NR; i++) x[i] = gen();
    check_all(f, x, NR, what);
    free(x);
}
/* the 2k + 1 doubles around each of the points */
static void sweep(const Fn *f, const double *pts, int npts, int k, const char *what) {
    int64_t n = (int64_t)npts * (2 * k + 1), j = 0;
    double *x = malloc((size_t)n * sizeof *x);
    for (int p = 0; p < npts; p++) {
        double a = pts[p];
        if (f->p == 24) a = (float)a;
        for (int i = 0; i < k; i++) a = f->p == 24 ? nextafterf((float)a, -INFINITY) : nextafter(a, -INFINITY);
        for (int i = 0; i <= 2 * k; i++, a = f->p == 24 ? nextafterf((float)a, INFINITY) : nextafter(a, INFINITY))
            x[j++] = a;
    }
    check_all(f, x, n, what);
    free(x);
}
static void specials(const Fn *f, const double *x, const double *want, int n) {
    double y[16];
    f->vec(x, y, n);
    for (int i = 0; i < n; i++)
        if (!same(y[i], want[i]) || !same(f->scalar(x[i]), want[i]))
            FAIL_AT("%s(%a) = %a (scalar %a), want %a", f->name, x[i], y[i], f->scalar(x[i]), want[i]);
}

static void exp_d_cases(const Fn *f) {
    random_range(f, -746, 710);
    random_range(f, -1, 1);
    random_range(f, -745.2, -708.3); /* subnormal results */
    random_bits(f, any_bits, "random bits");
    const double edges[] = {0x1.62e42fefa39efp9, -0x1.74910d52d3052p9 /* 2^-1075 */, -0x1.74385446d71c3p9 /* 2^-1074 */,
                            -0x1.6232bdd7abcd2p9 /* DBL_MIN */, -0x1.6p9, 0x1.62e42fefa39efp-2, -0x1.62e42fefa39efp-2,
                            0x1.62e42fefa39efp-1, 0x1p-30, -0x1p-30, 0x1.62e42fefa39efp-6 /* vm_exp8's ln2/32 */};
    sweep(f, edges, 11, 20000, "edge sweeps");
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-320, -1e-320, DBL_MAX, -DBL_MAX, 0x1.62e42fefa39fp9, -746.0, -1000};
    const double want[] = {1, 1, INFINITY, 0, NAN, 1, 1, INFINITY, 0, INFINITY, 0, 0};
    specials(f, x, want, 12);
}
TEST(exp_d) { exp_d_cases(&EXP); }
TEST(exp_d_n) { exp_d_cases(&EXP_D_N); }

/* float exp: every result of the exhaustive check is within BOUND; here the
 * ranges, the overflow (88.72) and underflow (-87.34 to subnormal, -103.28 to
 * 2^-149, -103.97 to 0) edges, and the specials */
static void expf_cases(const Fn *f) {
    random_bits(f, any_bits_f, "random bits");
    random_range(f, -104, 89);
    random_range(f, -1, 1);
    const double edges[] = {88.7228391, 88.3762626, -87.3365448, -103.278931, -103.972084, 0.3465736, -0.3465736, 1e-30, 89.0, -104.0};
    sweep(f, edges, 10, 20000, "edge sweeps");
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MAX, -FLT_MAX, 88.75, -104.0, 1.0};
    const double want[] = {1, 1, INFINITY, 0, NAN, 1, 1, INFINITY, 0, INFINITY, 0, 0x1.5bf0a8p+1};
    specials(f, x, want, 12);
}
TEST(exp_f) { expf_cases(&EXPF); }
TEST(exp_f_n) { expf_cases(&EXPF_N); }
/* without AVX-512 the array exp is the scalar one bit for bit (vectors of it
 * take other steps: AVX2's vm_expf8 scales in the exponent field, |x| <= 87
 * only): every 61st float, and every float in 87 +- 2^-4 and -87 +- 2^-4.
 * AVX-512's vm_expf16 rounds x / ln2 by vrndscaleps of a rounded product, so
 * n may differ at a tie (e^74.5 by 1 ulp): exp_f_n bounds it in ulps instead */
#ifndef __AVX512F__
static __attribute__((noinline)) int64_t expf_n_diffs(const float *x, float *y, int64_t n) {
    int64_t bad = 0;
    vm_expf_n(y, x, n);
    for (int64_t i = 0; i < n; i++) {
        float e = vm_expf(x[i]);
        bad += memcmp(&e, &y[i], 4) != 0 && !(e != e && y[i] != y[i]);
    }
    return bad;
}
TEST(exp_f_n_bits) {
    enum { N = 4096 };
    static float x[N], y[N];
    int64_t bad = 0, k = 0;
    for (int64_t b = 0; b <= 0xffffffffll; b += 61) {
        uint32_t u = (uint32_t)b;
        memcpy(&x[k++], &u, 4);
        if (k == N) bad += expf_n_diffs(x, y, k), k = 0;
    }
    bad += expf_n_diffs(x, y, k);
    for (int sg = -1; sg <= 1; sg += 2) {
        float c = 87.0f * (float)sg;
        uint32_t u;
        memcpy(&u, &c, 4);
        for (k = 0; k < N; k++) {
            uint32_t v = u + (uint32_t)k - N / 2;
            memcpy(&x[k], &v, 4);
        }
        bad += expf_n_diffs(x, y, N);
    }
    if (bad) FAIL_AT("%lld results differ from vm_expf", (long long)bad);
}
#else
TEST(exp_f_tab) { expf_cases(&EXPF_TAB); }
TEST(exp_d_le) { exp_d_cases(&EXP_LE); }
/* vm_scalef16's integer route for subnormal and zero results gives vscalefps's bits:
 * every n from -170 to 4 (halves too: the table exp's n carries j / 16), p over [0.5, 2.1) */
TEST(scalef_subnormal_route) {
    int64_t bad = 0;
    uint32_t s = 12345;
    for (float n = -170.0f; n <= 4.0f; n += 0.0625f)
        for (int rep = 0; rep < 64; rep++) {
            float p[16], nn[16], got[16], want[16];
            for (int l = 0; l < 16; l++) {
                s = s * 1664525u + 1013904223u;
                p[l] = 0.5f + 1.6f * (float)(s >> 8) / 16777216.0f;
                nn[l] = l == 15 && rep == 0 ? NAN : n;
            }
            __m512 vp = _mm512_loadu_ps(p), vn = _mm512_loadu_ps(nn);
            _mm512_storeu_ps(got, vm_scalef16(vp, vn));
            _mm512_storeu_ps(want, _mm512_scalef_ps(vp, vn));
            for (int l = 0; l < 16; l++) bad += memcmp(&got[l], &want[l], 4) != 0 && !(got[l] != got[l] && want[l] != want[l]);
        }
    if (bad) FAIL_AT("%lld lanes differ from vscalefps", (long long)bad);
}
#endif

/* the exp-and-sum of softmax: each y[i] is the array exp of x[i] - m (rounded
 * in T), the sum within n + 2 roundings of the long double sum of the y */
#define EXP_SUM_TEST(name, T, expn, sumn, eps)                                             \
    TEST(name) {                                                                           \
        T x[200], y[200], z[200];                                                          \
        for (int n = 0; n <= 200; n += n < 40 ? 1 : 37) {                                  \
            for (int i = 0; i < n; i++) x[i] = (T)uniform(-30, 30);                        \
            T m = (T)uniform(-5, 5);                                                       \
            for (int i = 0; i < n; i++) z[i] = x[i] - m;                                   \
            expn(z, z, n);                                                                 \
            T s = sumn(y, x, m, n, NULL, 0), s2 = sumn(NULL, x, m, n, x, n * (int64_t)sizeof(T)); /* pf: any row */                              \
            long double ref = 0;                                                           \
            for (int i = 0; i < n; i++) {                                                  \
                if (y[i] != z[i]) FAIL_AT("n %d: y[%d] = %a, exp(x - m) %a", n, i, (double)y[i], (double)z[i]); \
                ref += z[i];                                                               \
            }                                                                              \
            if (s != s2 || fabsl(s - ref) > (n + 2) * eps * ref)                           \
                FAIL_AT("n %d: sum %a (without y %a), want %La", n, (double)s, (double)s2, ref); \
        }                                                                                  \
    }
EXP_SUM_TEST(exp_f_sum, float, vm_expf_n, vm_expf_sum_n, FLT_EPSILON)
EXP_SUM_TEST(exp_d_sum, double, vm_exp_d_n, vm_exp_d_sum_n, DBL_EPSILON)

TEST(log_d) {
    random_bits(&LOG, positive_bits, "positive bits (subnormals)");
    random_range(&LOG, 0.5, 2);
    random_range(&LOG, 0, 1e4);
    const double edges[] = {1.0, M_SQRT1_2, M_SQRT2, 0.5, 2.0, DBL_MIN, DBL_TRUE_MIN * 20000, DBL_MAX / 2};
    sweep(&LOG, edges, 8, 20000, "edge sweeps");
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -1.0, -DBL_TRUE_MIN, 1.0, DBL_TRUE_MIN, DBL_MAX};
    const double want[] = {-INFINITY, -INFINITY, INFINITY, NAN, NAN, NAN, NAN, 0.0, -0x1.74385446d71c3p9,
                           0x1.62e42fefa39efp9};
    specials(&LOG, x, want, 10);
}

TEST(tanh_d) {
    random_range(&TANH, -25, 25);
    random_range(&TANH, -1.5, 1.5);
    random_bits(&TANH, any_bits, "random bits");
    const double edges[] = {0.625, -0.625, 19.0625, 22.0, 1e-8, DBL_MIN, 0.3};
    sweep(&TANH, edges, 7, 20000, "edge sweeps");
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, DBL_TRUE_MIN, -DBL_TRUE_MIN, DBL_MAX, -DBL_MAX, 30.0, -1e-300};
    const double want[] = {0.0, -0.0, 1, -1, NAN, DBL_TRUE_MIN, -DBL_TRUE_MIN, 1, -1, 1, -1e-300};
    specials(&TANH, x, want, 11);
}

TEST(log1p_d) {
    random_bits(&LOG1P, positive_bits, "positive bits (subnormals)");
    random_range(&LOG1P, -1, 1);
    random_range(&LOG1P, -0.3, 0.42);
    random_range(&LOG1P, 0, 1e4);
    const double edges[] = {0.0, M_SQRT1_2 - 1, M_SQRT2 - 1, -1.0, -0.5, 1.0, 0x1p53, 0x1p-30, -0x1p-30};
    sweep(&LOG1P, edges, 9, 20000, "edge sweeps");
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -1.0, -2.0, DBL_TRUE_MIN, -DBL_TRUE_MIN, DBL_MAX};
    const double want[] = {0.0, -0.0, INFINITY, NAN, NAN, -INFINITY, NAN, DBL_TRUE_MIN, -DBL_TRUE_MIN,
                           0x1.62e42fefa39efp9};
    specials(&LOG1P, x, want, 10);
}

TEST(expm1_d) {
    random_range(&EXPM1, -40, 710);
    random_range(&EXPM1, -1.1, 1.1);
    random_range(&EXPM1, -0.36, 0.36);
    random_bits(&EXPM1, any_bits, "random bits");
    /* the ends of n = 0 (ln2/2), n = +-53/54 where 2^n - 1 stops being exact, overflow, -1 */
    const double edges[] = {0x1.62e42fefa39efp9, 0x1.62e42fefa39efp-2, -0x1.62e42fefa39efp-2, 0x1.62e42fefa39efp-1,
                            36.7, -36.7, 37.4, -37.4, -40.0, 0x1p-30, -0x1p-30, 1e-300};
    sweep(&EXPM1, edges, 12, 20000, "edge sweeps");
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, DBL_TRUE_MIN, -DBL_TRUE_MIN, DBL_MAX, -DBL_MAX,
                        0x1.62e42fefa39fp9, -40.0, -1000};
    const double want[] = {0.0, -0.0, INFINITY, -1, NAN, DBL_TRUE_MIN, -DBL_TRUE_MIN, INFINITY, -1, INFINITY, -1, -1};
    specials(&EXPM1, x, want, 12);
}

TEST(erf_d) {
    random_range(&ERF, -6.5, 6.5);
    random_range(&ERF, -0.6, 0.6);
    random_bits(&ERF, any_bits, "random bits");
    /* every interval's ends, and where erf becomes 1 */
    double edges[26];
    for (int i = 0; i < 24; i++) edges[i] = 0.25 * i;
    edges[24] = 5.9215871957945, edges[25] = 1e-300;
    sweep(&ERF, edges, 26, 8000, "edge sweeps");
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, DBL_TRUE_MIN, -DBL_TRUE_MIN, DBL_MAX, -DBL_MAX, 6.0, -5.95};
    const double want[] = {0.0, -0.0, 1, -1, NAN, DBL_TRUE_MIN, -DBL_TRUE_MIN, 1, -1, 1, -1};
    specials(&ERF, x, want, 11);
}

/* float: the inputs are rounded to float in check_all */
TEST(float_fns) {
    random_bits(&EXPM1F, any_bits_f, "random bits");
    random_range(&EXPM1F, -20, 90);
    random_range(&EXPM1F, -1, 1);
    random_bits(&ERFF, any_bits_f, "random bits");
    random_range(&ERFF, -4.5, 4.5);
    random_bits(&LOG1PF, positive_bits_f, "positive bits (subnormals)");
    random_range(&LOG1PF, -1, 1);
    random_range(&LOG1PF, 0, 1e4);
    const double e_edges[] = {88.7228391, -17.3, 0.3465736, -0.3465736, 1e-30};
    sweep(&EXPM1F, e_edges, 5, 20000, "edge sweeps");
    const double erf_edges[] = {3.9192059, 0.25, 1e-30};
    sweep(&ERFF, erf_edges, 3, 20000, "edge sweeps");
    const double l_edges[] = {-1.0, 0.0, M_SQRT2 - 1, 1e-30};
    sweep(&LOG1PF, l_edges, 4, 20000, "edge sweeps");
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MAX, -FLT_MAX, -1.0};
    const double e_want[] = {0.0, -0.0, INFINITY, -1, NAN, FLT_TRUE_MIN, -FLT_TRUE_MIN, INFINITY, -1, -0x1.43a54ep-1};
    const double erf_want[] = {0.0, -0.0, 1, -1, NAN, FLT_TRUE_MIN * 1, -FLT_TRUE_MIN, 1, -1, -0x1.af767ap-1};
    const double l_want[] = {0.0, -0.0, INFINITY, NAN, NAN, FLT_TRUE_MIN, -FLT_TRUE_MIN, 0x1.62e43p6, NAN, -INFINITY};
    specials(&EXPM1F, x, e_want, 10);
    specials(&ERFF, x, erf_want, 10);
    specials(&LOG1PF, x, l_want, 10);
    random_range(&SOFTPLUSF, -110, 88.72);
    random_range(&SOFTPLUSF, -2, 2);
    const double sp_edges[] = {0.0, -0.3465736, 0.3465736, -1.28266, 15.0, -87.0, 88.5};
    sweep(&SOFTPLUSF, sp_edges, 7, 20000, "edge sweeps");
    const double sp_x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 88.72284, 100.0, -200.0};
    const double sp_want[] = {0x1.62e43p-1, 0x1.62e43p-1, INFINITY, 0.0, NAN, INFINITY, INFINITY, 0.0};
    specials(&SOFTPLUSF, sp_x, sp_want, 8);
    random_bits(&ERFF_FAST, any_bits_f, "random bits");
    random_range(&ERFF_FAST, -4.5, 4.5);
    sweep(&ERFF_FAST, erf_edges, 3, 20000, "edge sweeps");
    const double one_edges[] = {1.0, -1.0, 4.0, 0.5};
    sweep(&ERFF_FAST, one_edges, 4, 20000, "edge sweeps");
    specials(&ERFF_FAST, x, erf_want, 10);
}

int main(void) {
    RUN(exp_d);
    RUN(exp_d_n);
    RUN(exp_f);
    RUN(exp_f_n);
#ifndef __AVX512F__
    RUN(exp_f_n_bits);
#else
    RUN(exp_f_tab);
    RUN(exp_d_le);
    RUN(scalef_subnormal_route);
#endif
    RUN(exp_f_sum);
    RUN(exp_d_sum);
    RUN(log_d);
    RUN(tanh_d);
    RUN(log1p_d);
    RUN(expm1_d);
    RUN(erf_d);
    RUN(float_fns);
    return REPORT();
}
