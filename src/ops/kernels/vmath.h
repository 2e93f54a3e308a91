/* vmath.h: the math functions elementwise kernels call, type-generic over float
 * and double (tgmath), with branch-free versions of the hot ones (exp, log,
 * tanh; log1p for double) that the compiler vectorises: libm's are scalar calls. The float ones
 * are Cephes' polynomials (as PyTorch's Sleef and AVX2 kernels use), accurate to
 * about 1 ulp over the whole range; the double ones are below 1 ulp (measured
 * maxima at each function). All give IEEE results for inf, NaN and zeros. */
#ifndef CT_VMATH_H
#define CT_VMATH_H
#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#define VM_BITCAST(name, From, To)     \
    static inline To name(From v) {    \
        To r;                          \
        memcpy(&r, &v, sizeof r);      \
        return r;                      \
    }
VM_BITCAST(vm_bits_to_float, int32_t, float)
VM_BITCAST(vm_float_to_bits, float, int32_t)
VM_BITCAST(vm_bits_to_double, uint64_t, double)
VM_BITCAST(vm_double_to_bits, double, uint64_t)

/* exp(x) = 2^n e^r, n = round(x / ln 2), |r| <= ln2/2 */
static inline float vm_expf(float x) {
    const float hi = 88.7228391f, lo = -103.972084f;
    float xc = x > hi ? hi : (x < lo ? lo : x);
    xc = xc != xc ? 0.0f : xc; /* NaN: keep the integer conversion below defined */
    /* round to nearest with the 1.5 * 2^23 trick: vectorises, unlike roundf */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float r2 = r * r;
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * r2 + r + 1.0f;
    /* 2^n in two halves, so that results down in the subnormals come out right */
    int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;
    float y = p * vm_bits_to_float((n1 + 127) << 23) * vm_bits_to_float((n2 + 127) << 23);
    y = x > hi ? __builtin_inff() : y;
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

/* log(x) = n ln2 + log(m), m in [sqrt(1/2), sqrt(2)) */
static inline float vm_logf(float x) {
    int sub = x < 1.17549435e-38f; /* subnormals: scale into the normal range */
    int32_t bits = vm_float_to_bits(sub ? x * 8388608.0f : x);
    int32_t e = ((bits >> 23) & 0xff) - 126 - (sub ? 23 : 0);
    float m = vm_bits_to_float((bits & 0x807fffff) | 0x3f000000); /* [0.5, 1) */
    int small = m < 0.707106781186547524f;
    e -= small;
    m = small ? m + m - 1.0f : m - 1.0f;
    float z = m * m;
    float p = 7.0376836292E-2f;
    p = p * m - 1.1514610310E-1f;
    p = p * m + 1.1676998740E-1f;
    p = p * m - 1.2420140846E-1f;
    p = p * m + 1.4249322787E-1f;
    p = p * m - 1.6668057665E-1f;
    p = p * m + 2.0000714765E-1f;
    p = p * m - 2.4999993993E-1f;
    p = p * m + 3.3333331174E-1f;
    float y = p * m * z;
    float fe = (float)e;
    y += -2.12194440e-4f * fe;
    y += -0.5f * z;
    float r = m + y + 0.693359375f * fe;
    /* subnormals, zero, negatives, inf, NaN: the IEEE answers */
    r = x == 0.0f ? -__builtin_inff() : r;
    r = x < 0.0f ? __builtin_nanf("") : r;
    r = x == __builtin_inff() ? x : r;
    return x != x ? x : r;
}

/* tanh: an odd polynomial near 0, 1 - 2 / (e^2|x| + 1) elsewhere */
static inline float vm_tanhf(float x) {
    float ax = x < 0 ? -x : x;
    float z = x * x;
    float p = -5.70498872745E-3f;
    p = p * z + 2.06390887954E-2f;
    p = p * z - 5.37397155531E-2f;
    p = p * z + 1.33314422036E-1f;
    p = p * z - 3.33332819422E-1f;
    float small = p * z * x + x;
    /* clamp where tanh is 1 in float, yet e + 1 stays finite (exp(88) < FLT_MAX);
     * clamping lower (at 9) left tanh(x > 9) one ulp short of 1 */
    float e = vm_expf(2.0f * (ax > 44.0f ? 44.0f : ax));
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0 ? -big : big;
    return ax < 0.625f ? small : big;
}

/* ---- double ----
 * The polynomials are Chebyshev fits (mpmath, 256 bits) of the functions named at
 * each, rounded to double. The maximum errors quoted are measured by
 * tests/test_vmath.c against long double libm (2^21 random doubles in each of 3-4
 * ranges, and 40,000 around each edge) with FMA (-march=native); without FMA,
 * exp's are the same, log's 0.73 and tanh's 0.79 ulp. */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define VM_FMA(a, b, c) fma(a, b, c)
#else
#define VM_FMA(a, b, c) ((a) * (b) + (c))
#endif
#define VM_SHIFTER 0x1.8p52 /* x + 1.5 * 2^52 rounds x to an integer, kept in the low bits */
#define VM_LN2_HI 0x1.62e42feep-1 /* ln 2 to 32 bits: k * VM_LN2_HI is exact for |k| < 2^21 */
#define VM_LN2_LO 0x1.a39ef35793c76p-33

/* c[0] + c[1] x + ... + c[n-1] x^(n-1); n is a constant, so the loop unrolls */
static inline double vm_poly_d(double x, const double *c, int n) {
    double p = c[n - 1];
    for (int i = n - 2; i >= 0; i--) p = VM_FMA(p, x, c[i]);
    return p;
}
/* 2^n for a normal power, -1022 <= n <= 1023 */
static inline double vm_pow2_d(int64_t n) { return vm_bits_to_double((uint64_t)(n + 1023) << 52); }

/* exp(x) = 2^n (hi + lo) for finite |x| <= 746: n = round(x / ln2), r = x - n ln2
 * (Cody-Waite, |r| <= ln2/2, carried as r + rl), e^r = 1 + r + r^2 P(r) summed
 * with 1 + r's rounding error kept: hi is e^r rounded once, lo what it left out
 * (tanh needs it). */
typedef struct {
    double hi, lo;
    int64_t n;
} vm_exp_parts;
static inline vm_exp_parts vm_exp_reduce_d(double x) {
    /* (e^r - 1 - r) / r^2 on [-ln2/2, ln2/2], relative error 5e-18 */
    static const double P[] = {0.5,
                               0.16666666666666671,
                               0.041666666666666671,
                               0.0083333333333261411,
                               0.0013888888888883752,
                               0.00019841269874800683,
                               2.4801587325533502e-05,
                               2.75572554255029e-06,
                               2.7557273661174726e-07,
                               2.5105206475334834e-08,
                               2.091467944897855e-09};
    double k = VM_FMA(x, 0x1.71547652b82fep0, VM_SHIFTER); /* 1/ln2 */
    int64_t n = (int64_t)(vm_double_to_bits(k) - vm_double_to_bits(VM_SHIFTER));
    double nd = k - VM_SHIFTER;
    double rh = x - nd * VM_LN2_HI; /* exact */
    double nl = nd * VM_LN2_LO;
    double r = rh - nl, rl = (rh - r) - nl;
    double t = 1.0 + r;
    double lo = ((1.0 - t) + r) + VM_FMA(r * r, vm_poly_d(r, P, 11), rl);
    double hi = t + lo;
    return (vm_exp_parts){hi, (t - hi) + lo, n};
}

/* Measured maximum error 0.65 ulp, 0.78 for results below 2^-1022: those are
 * rounded twice, to 53 bits and then into the subnormals (2^n applied in two
 * halves, as vm_expf does). */
static inline double vm_exp_d(double x) {
    const double hi = 0x1.62e42fefa39efp9, lo = -746.0; /* hi: the largest x with exp(x) finite */
    double xc = x > hi ? hi : (x < lo ? lo : x);
    xc = xc != xc ? 0.0 : xc;
    vm_exp_parts e = vm_exp_reduce_d(xc);
    int64_t n1 = e.n >> 1;
    double y = e.hi * vm_pow2_d(n1) * vm_pow2_d(e.n - n1);
    y = x > hi ? __builtin_inf() : y;
    y = x < lo ? 0.0 : y;
    return x != x ? x : y;
}

/* log(x) = k ln2 + log(1 + f), 1 + f in [sqrt(1/2), sqrt(2)), as fdlibm: with
 * s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + z R(z)), z = s^2.
 * c is a correction smaller than f's last place (log1p's rounding of 1 + x). */
static inline double vm_log_reduced_d(double k, double f, double c) {
    /* (2 atanh(s) - 2s) / s = z R(z), z = s^2 in [0, 0.0295], relative error 6e-17 */
    static const double R[] = {0.66666666666666663,  0.40000000000000879,  0.28571428570803614,
                               0.22222222391713917,  0.18181795640132906,  0.15386239702814658,
                               0.13268773138656886,  0.13086626147840102};
    double s = f / (2.0 + f), z = s * s;
    /* k ln2 + f - f^2/2 summed with the rounding errors kept (Fast2Sum: |k ln2| >= |f|
     * or k = 0, and |f| > f^2/2): summed plainly, as fdlibm does, this cost 0.83 ulp
     * where k = -1 nearly cancels f */
    double hf = 0.5 * f, hfsq = hf * f, hfsq_err = VM_FMA(hf, f, -hfsq);
    double kh = k * VM_LN2_HI; /* exact */
    double a = kh + f, a_err = f - (a - kh);
    double b = a - hfsq, b_err = (a - b) - hfsq;
    return b + (((a_err + b_err) - hfsq_err) + VM_FMA(s, hfsq + z * vm_poly_d(z, R, 8), VM_FMA(k, VM_LN2_LO, c)));
}
/* x > 0 (or anything: no UB) = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)) */
typedef struct {
    double k, f;
} vm_log_parts;
static inline vm_log_parts vm_log_split_d(double x) {
    int sub = x < 0x1p-1022; /* subnormals: scale into the normal range */
    uint64_t bits = vm_double_to_bits(sub ? x * 0x1p54 : x);
    int64_t e = (int64_t)((bits >> 52) & 0x7ff) - 1022 - (sub ? 54 : 0);
    double m = vm_bits_to_double((bits & 0x000fffffffffffffu) | 0x3fe0000000000000u); /* [0.5, 1) */
    int small = m < 0.70710678118654752440;
    e -= small;
    /* e as a double, through the shifter: int64 -> double converts vectorise only with AVX-512 */
    double k = vm_bits_to_double(vm_double_to_bits(VM_SHIFTER) + (uint64_t)e) - VM_SHIFTER;
    return (vm_log_parts){k, small ? m + m - 1.0 : m - 1.0};
}

/* Measured maximum error 0.66 ulp. */
static inline double vm_log_d(double x) {
    vm_log_parts p = vm_log_split_d(x);
    double r = vm_log_reduced_d(p.k, p.f, 0.0);
    r = x == 0.0 ? -__builtin_inf() : r;
    r = x < 0.0 ? __builtin_nan("") : r;
    r = x == __builtin_inf() ? x : r;
    return x != x ? x : r;
}

/* log1p(x) = log(u) + c / u, u = 1 + x rounded and c its rounding error, as fdlibm;
 * where u is in [sqrt(1/2), sqrt(2)) (k = 0), f = x exactly. Measured maximum
 * error 0.65 ulp. */
static inline double vm_log1p_d(double x) {
    double u = 1.0 + x;
    vm_log_parts p = vm_log_split_d(u);
    /* x - (u - 1) is exact below 2^53 (fdlibm's 1 - (u - x) for k > 0 is not when
     * x < 0.5: 1.9 ulp near sqrt(2) - 1) */
    double c = p.k == 0 || p.k > 53 ? 0.0 : (x - (u - 1.0)) / u;
    double r = vm_log_reduced_d(p.k, p.k == 0 ? x : p.f, c);
    r = x == -1.0 ? -__builtin_inf() : r;
    r = x < -1.0 ? __builtin_nan("") : r;
    r = x == __builtin_inf() || x == 0.0 ? x : r; /* keeps -0 */
    return x != x ? x : r;
}

/* tanh: x + x^3 P(x^2) below 0.625; above, 1 - 2 / (e + 1), e = e^2|x| carried
 * unrounded as eh + el and the quotient and difference compensated, so that the
 * cancellation near 0.625 costs no accuracy (plain doubles there gave 1.33 ulp).
 * Measured maximum error 0.75 ulp (just below 0.5, in the polynomial's range). */
static inline double vm_tanh_d(double x) {
    /* (tanh x - x) / x^3 in z = x^2 on [0, 0.390625], relative error 6e-17 */
    static const double P[] = {-0.33333333333333331,   0.13333333333333042,    -0.053968253967896992,
                               0.021869488519008305,   -0.0088632351032408782, 0.0035921217511549622,
                               -0.0014557754120478055, 0.00058966065777570434, -0.0002375906496055562,
                               9.2571161295567687e-05, -3.1201101425797402e-05, 6.485163482793113e-06};
    double ax = fabs(x);
    double z = x * x;
    double small = VM_FMA(ax * z, vm_poly_d(z, P, 12), ax);
    /* tanh is 1 in double from 19.1 on; NaN goes to 22 too (and takes the small branch) */
    vm_exp_parts e = vm_exp_reduce_d(2.0 * (ax < 22.0 ? ax : 22.0));
    double sc = vm_pow2_d(e.n); /* n <= 64 */
    double eh = e.hi * sc, el = e.lo * sc;
    double dh = eh + 1.0, dl = ((eh - dh) + 1.0) + el; /* e + 1, eh >= 1 */
    double q = 2.0 / dh;
    double ql = (VM_FMA(-q, dh, 2.0) - q * dl) * (0.5 * q); /* 2 / (dh + dl) - q */
    double yh = 1.0 - q;
    double big = yh + (((1.0 - yh) - q) - ql);
    return copysign(ax >= 0.625 ? big : small, x);
}

#undef exp
#undef log
#undef log1p
#undef tanh
#define exp(x) _Generic((x), float: vm_expf, default: vm_exp_d)(x)
#define log(x) _Generic((x), float: vm_logf, default: vm_log_d)(x)
#define log1p(x) _Generic((x), float: log1pf, default: vm_log1p_d)(x)
#define tanh(x) _Generic((x), float: vm_tanhf, default: vm_tanh_d)(x)

#endif
