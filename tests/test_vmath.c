/* test_vmath.c: vmath.h's branch-free double exp, log, tanh and log1p against long
 * double libm (x87, 11 more bits: the reference's own error is ~0.001 ulp),
 * over millions of random doubles across the whole range, dense sweeps of the
 * edges (overflow, the subnormal results, 0.625 where tanh changes formula) and
 * the IEEE special values. The loops over arrays vectorise, so this tests the
 * vector code; each result is also compared with a scalar call. */
#include "harness.h"
#include "ops/kernels/vmath.h"
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

#define BOUND 1.0 /* ulp; the measured maxima are quoted in vmath.h */
#define NR (1 << 21)

typedef double (*dfn)(double);
typedef long double (*ref_fn)(long double);

/* scalar calls, not inlined into a vectorised loop */
__attribute__((noinline)) static double s_exp(double x) { return vm_exp_d(x); }
__attribute__((noinline)) static double s_log(double x) { return vm_log_d(x); }
__attribute__((noinline)) static double s_tanh(double x) { return vm_tanh_d(x); }
__attribute__((noinline)) static double s_log1p(double x) { return vm_log1p_d(x); }

static void v_exp(const double *restrict x, double *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = vm_exp_d(x[i]);
}
static void v_log(const double *restrict x, double *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = vm_log_d(x[i]);
}
static void v_tanh(const double *restrict x, double *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = vm_tanh_d(x[i]);
}
static void v_log1p(const double *restrict x, double *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = vm_log1p_d(x[i]);
}

typedef struct {
    const char *name;
    void (*vec)(const double *restrict, double *restrict, int64_t);
    dfn scalar;
    ref_fn ref;
} Fn;
static const Fn EXP = {"exp", v_exp, s_exp, expl}, LOG = {"log", v_log, s_log, logl},
                TANH = {"tanh", v_tanh, s_tanh, tanhl}, LOG1P = {"log1p", v_log1p, s_log1p, log1pl};

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

static int same(double a, double b) { return a != a ? b != b : a == b && signbit(a) == signbit(b); }

/* |y - ref| in units of the last place of the double nearest ref (2^-1074 in the subnormals) */
static double ulp_error(double y, long double ref) {
    double rd = (double)ref;
    if (same(y, rd)) return 0;
    if (rd != rd || y != y || isinf(rd) || isinf(y)) return INFINITY;
    int e = ref == 0 ? -1074 : ilogbl(ref) - 52;
    return (double)(fabsl((long double)y - ref) / ldexpl(1.0L, e < -1074 ? -1074 : e));
}

/* Runs f over x[0..n): every result within BOUND of the reference and equal to
 * the scalar call. Returns the largest error. */
static double check_all(const Fn *f, const double *x, int64_t n, const char *what) {
    double *y = malloc((size_t)n * sizeof *y), worst = 0, worst_x = 0;
    int64_t bad = 0;
    f->vec(x, y, n);
    for (int64_t i = 0; i < n; i++) {
        double err = ulp_error(y[i], f->ref(x[i]));
        if (err > worst) worst = err, worst_x = x[i];
        if ((err > BOUND || !same(y[i], f->scalar(x[i]))) && bad++ < 5)
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
        for (int i = 0; i < k; i++) a = nextafter(a, -INFINITY);
        for (int i = 0; i <= 2 * k; i++, a = nextafter(a, INFINITY)) x[j++] = a;
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

TEST(exp_d) {
    random_range(&EXP, -746, 710);
    random_range(&EXP, -1, 1);
    random_range(&EXP, -745.2, -708.3); /* subnormal results */
    random_bits(&EXP, any_bits, "random bits");
    const double edges[] = {0x1.62e42fefa39efp9, -0x1.74910d52d3052p9 /* 2^-1075 */, -0x1.74385446d71c3p9 /* 2^-1074 */,
                            -0x1.6232bdd7abcd2p9 /* DBL_MIN */, -0x1.6p9, 0x1.62e42fefa39efp-2, -0x1.62e42fefa39efp-2,
                            0x1.62e42fefa39efp-1, 0x1p-30, -0x1p-30};
    sweep(&EXP, edges, 10, 20000, "edge sweeps");
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-320, -1e-320, DBL_MAX, -DBL_MAX, 0x1.62e42fefa39fp9, -746.0, -1000};
    const double want[] = {1, 1, INFINITY, 0, NAN, 1, 1, INFINITY, 0, INFINITY, 0, 0};
    specials(&EXP, x, want, 12);
}

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

int main(void) {
    RUN(exp_d);
    RUN(log_d);
    RUN(tanh_d);
    RUN(log1p_d);
    return REPORT();
}
