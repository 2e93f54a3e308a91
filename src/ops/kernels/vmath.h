/* vmath.h: the math functions elementwise kernels call, type-generic over float
 * and double (tgmath), with branch-free versions of the hot ones (exp, log, tanh,
 * log1p, expm1, erf) that the compiler vectorises: libm's are scalar calls. The
 * float exp, log and tanh are Cephes' polynomials (as PyTorch's Sleef and AVX2
 * kernels use), accurate to about 1 ulp over the whole range; float log1p and
 * expm1 are the double ones rounded, float erf evaluated in double; the double
 * ones are below 1 ulp (measured
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

/* a * b + c, fused where the target has the instruction (tgmath: fmaf for
 * floats), so that gcc (no contraction in ISO C mode) and clang round alike */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define VM_FMA(a, b, c) fma(a, b, c)
#else
#define VM_FMA(a, b, c) ((a) * (b) + (c))
#endif
/* a * b + c in one rounding on every target, as torch's add / sub with alpha
 * (its fmadd): the instruction where the target has it, else libm's fma (glibc
 * picks the instruction at run time when the CPU has one), with alpha = +-1
 * kept to a plain add or subtract */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define VM_FMA1(a, b, c) fma(a, b, c)
#else
#define VM_FMA1(a, b, c) ((a) == 1 ? (c) + (b) : (a) == -1 ? (c) - (b) : fma(a, b, c))
#endif

/* exp(x) = 2^n e^r, n = round(x / ln 2), |r| <= ln2/2, e^r = 1 + r (1 + r P(r)) in
 * Horner's form to the end (Cephes' P). x is clamped to [-104, 89] with NaN
 * going to 89, so the integer work below stays defined; overflow (e^89 > FLT_MAX)
 * and underflow (e^-104 < 2^-150) then fall out of the arithmetic, and only NaN
 * needs a select: ~33 instructions per vector where the compare / blend chains
 * of clamping to the exact thresholds made ~55. */
#define VM_EXPF_POLY(p, r, FMA)             \
    do {                                    \
        p = FMA(p, r, 1.3981999507E-3f);    \
        p = FMA(p, r, 8.3334519073E-3f);    \
        p = FMA(p, r, 4.1665795894E-2f);    \
        p = FMA(p, r, 1.6666665459E-1f);    \
        p = FMA(p, r, 5.0000001201E-1f);    \
        VM_EXPF_TAIL(p, r, FMA);            \
    } while (0)
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define VM_EXPF_TAIL(p, r, FMA) p = FMA(FMA(p, r, 1.0f), r, 1.0f) /* 0.89 ulp */
#else /* 1 + r + r^2 P, Cephes' order: rounded Horner steps gave 1.19 ulp */
#define VM_EXPF_TAIL(p, r, FMA) p = FMA(p, r * r, r) + 1.0f
#endif
#define VM_LOG2EF 1.44269504088896341f
#define VM_LN2F_HI 0.693359375f /* n * VM_LN2F_HI is exact */
#define VM_LN2F_LO -2.12194440e-4f
static inline float vm_expf(float x) {
    float xc = x < 89.0f ? x : 89.0f; /* NaN: 89 */
    xc = xc > -104.0f ? xc : -104.0f;
    /* round to nearest with the 1.5 * 2^23 trick: vectorises, unlike roundf;
     * n is then also k's low bits, no float -> int conversion needed */
    float k = VM_FMA(xc, VM_LOG2EF, 12582912.0f), n = k - 12582912.0f;
    float r = VM_FMA(n, -VM_LN2F_HI, xc);
    r = VM_FMA(n, -VM_LN2F_LO, r);
    float p = 1.9875691500E-4f;
    VM_EXPF_POLY(p, r, VM_FMA);
    /* 2^n in two halves (n in [-150, 128]), so that results down in the
     * subnormals are rounded once, and e^89 overflows to inf */
    int32_t ni = vm_float_to_bits(k) - 0x4b400000, n1 = ni >> 1, n2 = ni - n1;
    float y = p * vm_bits_to_float((n1 + 127) << 23) * vm_bits_to_float((n2 + 127) << 23);
    return x != x ? x : y;
}

#ifdef __AVX512F__
#include <immintrin.h>
/* 2^floor(n) p (p in [0.5, 2.1)) as vscalefps gives it, without an instruction
 * whose result is subnormal: on Intel each costs a microcode assist (exp of int32
 * values in [-100, 100] ran 6x slower). Lanes with floor(n) <= -127 are subnormal
 * or zero: round(p 2^(n + 149)) < 2^24 is their bit pattern (m 2^-149 exactly,
 * rounded once, as vscalefps rounds). NaN lanes stay with vscalefps. */
__attribute__((noinline, unused)) static __m512 vm_scalef16_sub(__m512 p, __m512 n, __mmask16 sub) {
    __m512 big = _mm512_maskz_scalef_ps(sub, p, _mm512_add_ps(n, _mm512_set1_ps(149.0f)));
    __m512i m = _mm512_maskz_cvtps_epi32(sub, big);
    return _mm512_mask_blend_ps(sub, _mm512_mask_scalef_ps(p, (__mmask16)~sub, p, n), _mm512_castsi512_ps(m));
}
static inline __m512 vm_scalef16(__m512 p, __m512 n) { /* the rare lanes out of line: for size */
    __mmask16 sub = _mm512_cmp_ps_mask(n, _mm512_set1_ps(-126.0f), _CMP_LT_OQ);
    return __builtin_expect(!sub, 1) ? _mm512_scalef_ps(p, n) : vm_scalef16_sub(p, n, sub);
}
/* vm_expf of 16 floats: n by vrndscaleps, 2^n by vscalefps, which gives the
 * overflows, underflows and subnormal results exactly (one rounding); NaN
 * passes the clamps (min/max return their second operand on NaN) and
 * everything after. ~15 instructions. */
static inline __m512 vm_expf16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(100.0f), x);
    x = _mm512_max_ps(_mm512_set1_ps(-110.0f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(VM_LOG2EF)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VM_LN2F_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VM_LN2F_LO), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
#define VM_FMA16(a, b, c) _mm512_fmadd_ps(a, b, _mm512_set1_ps(c))
    VM_EXPF_POLY(p, r, VM_FMA16);
#undef VM_FMA16
    return vm_scalef16(p, n);
}
/* vm_expf16 with fewer multiplies (softmax's sums spend most of their time in
 * exp): x = (16 n + j) ln2/16 + r, |r| <= ln2/32, e^x = 2^n (t + (t q + l)),
 * t + l = 2^(j/16) (t rounded, l what it left out: in-register lookups by
 * vpermps), q = e^r - 1 to r^3 (next term 9e-9). k rounds x / ln2 to a
 * multiple of 1/16 (the shifter's ulp), so its low bits are j and
 * vscalefps's floor(k - shifter) is n. 7 multiplies where vm_expf16 has 10,
 * and no upper clamp: for x <= 100 or NaN only (softmax's x - max <= 0; larger
 * x overflow to inf, but inf and x near FLT_MAX give NaN). Every 7th float bit
 * pattern, min(x, 100), against double exp: 0.68 ulp, 0.81 for subnormal
 * results (vm_expf16: 0.89, 0.83). */
static inline __m512 vm_expf16_tab(__m512 x) {
    static const float T[16] = {0x1p+0f, 0x1.0b5586p+0f, 0x1.172b84p+0f, 0x1.2387a6p+0f, 0x1.306fep+0f, 0x1.3dea64p+0f,
                                0x1.4bfdaep+0f, 0x1.5ab07ep+0f, 0x1.6a09e6p+0f, 0x1.7a1148p+0f, 0x1.8ace54p+0f,
                                0x1.9c4918p+0f, 0x1.ae89fap+0f, 0x1.c199bep+0f, 0x1.d5818ep+0f, 0x1.ea4afap+0f};
    static const float L[16] = {0.0f, 0x1.9f3122p-25f, -0x1.c15742p-27f, 0x1.ceac48p-25f, 0x1.4636e2p-25f,
                                0x1.824684p-25f, -0x1.593abcp-25f, -0x1.5bd5ecp-27f, 0x1.9fcef4p-26f, -0x1.829fdp-25f,
                                0x1.15506ep-27f, 0x1.51f848p-27f, -0x1.a94b14p-26f, -0x1.3d56b2p-27f, -0x1.822dbcp-27f,
                                0x1.52486cp-27f};
    x = _mm512_max_ps(_mm512_set1_ps(-110.0f), x); /* NaN passes (second operand) */
    __m512 k = _mm512_fmadd_ps(x, _mm512_set1_ps(VM_LOG2EF), _mm512_set1_ps(0x1.8p19f));
    __m512 n = _mm512_sub_ps(k, _mm512_set1_ps(0x1.8p19f)); /* 16 n + j, over 16 */
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VM_LN2F_HI), x); /* exact: n has 12 bits */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VM_LN2F_LO), r);
    __m512 c = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 6), r, _mm512_set1_ps(0.5f));
    __m512 q = _mm512_fmadd_ps(c, _mm512_mul_ps(r, r), r);
    __m512i j = _mm512_castps_si512(k);
    __m512 t = _mm512_permutexvar_ps(j, _mm512_loadu_ps(T)), l = _mm512_permutexvar_ps(j, _mm512_loadu_ps(L));
    return vm_scalef16(_mm512_add_ps(t, _mm512_fmadd_ps(t, q, l)), n);
}
#endif
/* log's IEEE answers around r: NaN stays, +inf stays, negatives NaN, zeros -inf
 * (subnormals are the caller's, scaled into the normal range) */
#define VM_LOG_EDGES(x, r, inf, nan) ((x) != (x) ? (x) : (x) == (inf) ? (x) : (x) < 0 ? (nan) : (x) == 0 ? -(inf) : (r))
/* (log(1 + m) - m + m^2 / 2) / m^3 for m in [sqrt(1/2) - 1, sqrt(2) - 1]: cephes' logf */
static inline float vm_logf_poly(float m) {
    float p = 7.0376836292E-2f;
    p = VM_FMA(p, m, -1.1514610310E-1f);
    p = VM_FMA(p, m, 1.1676998740E-1f);
    p = VM_FMA(p, m, -1.2420140846E-1f);
    p = VM_FMA(p, m, 1.4249322787E-1f);
    p = VM_FMA(p, m, -1.6668057665E-1f);
    p = VM_FMA(p, m, 2.0000714765E-1f);
    p = VM_FMA(p, m, -2.4999993993E-1f);
    return VM_FMA(p, m, 3.3333331174E-1f);
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
    float y = vm_logf_poly(m) * m * z;
    float fe = (float)e;
    y += -2.12194440e-4f * fe;
    y += -0.5f * z;
    float r = m + y + 0.693359375f * fe;
    return VM_LOG_EDGES(x, r, __builtin_inff(), __builtin_nanf(""));
}

/* A positive float x = 2^e (1 + m), m in [sqrt(1/2) - 1, sqrt(2) - 1) exact
 * (vm_logf's e and m): log(1 + m) = m + m^2 (m P(m) - 1/2) with the square and
 * the sums in double; e in *ed */
static inline double vm_logm(float x, double *ed) {
    int sub = x < 1.17549435e-38f;
    int32_t bits = vm_float_to_bits(sub ? x * 8388608.0f : x);
    int32_t e = ((bits >> 23) & 0xff) - 126 - (sub ? 23 : 0);
    float m = vm_bits_to_float((bits & 0x807fffff) | 0x3f000000);
    int small = m < 0.707106781186547524f;
    e -= small;
    m = small ? m + m - 1.0f : m - 1.0f;
    double md = m, zd = md * md;
    *ed = e;
    return md + VM_FMA(md * zd, (double)vm_logf_poly(m), -0.5 * zd);
}
/* log_b of a float, kl = log_b e and ke = log_b 2 (log2, log10): e ke + log(1 +
 * m) kl rounded once: within 0.59 ulp (every 61st float measured), at 1x
 * torch's time where a block in double was 4.7x. */
static inline float vm_logbf(float x, double kl, double ke) {
    double e, l = vm_logm(x, &e);
    return VM_LOG_EDGES(x, (float)VM_FMA(e, ke, l * kl), __builtin_inff(), __builtin_nanf(""));
}
/* log1p of a float: u = 1 + x rounded, log(u) from vm_logm plus the
 * rounding's share (x - (u - 1)) / u, in double, rounded once */
static inline float vm_log1pf(float x) {
    float u = 1.0f + x;
    double e, l = vm_logm(u, &e), c = ((double)x - ((double)u - 1.0)) / (double)u;
    float f = (float)VM_FMA(e, 0x1.62e42fefa39efp-1, l + c);
    f = x == -1.0f ? -__builtin_inff() : f;
    f = x < -1.0f ? __builtin_nanf("") : f;
    f = x == __builtin_inff() ? x : f;
    return x != x || x == 0.0f ? x : f;
}

/* tanh: an odd polynomial near 0, 1 - 2 / (e^2|x| + 1) elsewhere */
static inline float vm_tanhf(float x) {
    float ax = x < 0 ? -x : x;
    float z = x * x;
    float p = -5.70498872745E-3f;
    p = VM_FMA(p, z, 2.06390887954E-2f);
    p = VM_FMA(p, z, -5.37397155531E-2f);
    p = VM_FMA(p, z, 1.33314422036E-1f);
    p = VM_FMA(p, z, -3.33332819422E-1f);
    float small = p * z * x + x;
    /* clamp where tanh is 1 in float, yet e + 1 stays finite (exp(88) < FLT_MAX);
     * clamping lower (at 9) left tanh(x > 9) one ulp short of 1 */
    float e = vm_expf(2.0f * (ax > 44.0f ? 44.0f : ax));
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0 ? -big : big;
    return x == 0 ? x : ax < 0.625f ? small : big; /* -0 kept (the polynomial's sum gives +0) */
}

/* ---- double ----
 * The polynomials are Chebyshev fits (mpmath, 256 bits) of the functions named at
 * each, rounded to double. The maximum errors quoted are measured by
 * tests/test_vmath.c against long double libm (2^21 random doubles in each of 3-4
 * ranges, and 40,000 around each edge) with FMA (-march=native); without FMA,
 * exp's are the same, log's 0.73 and tanh's 0.79 ulp. */
#define VM_SHIFTER 0x1.8p52 /* x + 1.5 * 2^52 rounds x to an integer, kept in the low bits */
#define VM_LN2_HI 0x1.62e42feep-1 /* ln 2 to 32 bits: k * VM_LN2_HI is exact for |k| < 2^21 */
#define VM_LN2_LO 0x1.a39ef35793c76p-33

/* c[0] + c[1] x + ... + c[n-1] x^(n-1); n is a constant, so the loop unrolls */
static inline double vm_poly_d(double x, const double *c, int n) {
    double p = c[n - 1];
    for (int i = n - 2; i >= 0; i--) p = VM_FMA(p, x, c[i]);
    return p;
}
/* (double)n for |n| < 2^51, through the shifter: int64 -> double converts vectorise
 * only with AVX-512, and gcc makes (double)(int)d a trunc(d) that blocks if-conversion */
static inline double vm_int_to_double(int64_t n) {
    return vm_bits_to_double(vm_double_to_bits(VM_SHIFTER) + (uint64_t)n) - VM_SHIFTER;
}
/* 2^n for a normal power, -1022 <= n <= 1023 */
static inline double vm_pow2_d(int64_t n) { return vm_bits_to_double((uint64_t)(n + 1023) << 52); }

/* e^x = 2^n (1 + r + h + s) for finite |x| <= 746: n = round(x / ln2), r = x - n ln2
 * rounded (Cody-Waite, |r| <= ln2/2), h = r^2/2 rounded and s = e^r - 1 - r - h,
 * with both rounding errors folded in, r's as rl e^r (expm1 needs the 2^-56 that
 * r^2 P(r) in one piece and rl alone lost: 1.1 ulp). */
typedef struct {
    double r, h, s;
    int64_t n;
} vm_exp_arg;
static inline vm_exp_arg vm_exp_arg_d(double x) {
    /* (e^r - 1 - r) / r^2 on [-ln2/2, ln2/2], relative error 5e-18; its first term 0.5 is h */
    static const double P[] = {0.16666666666666671,
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
    double r2 = r * r, r2_err = VM_FMA(r, r, -r2);
    double s = VM_FMA(r2 * r, vm_poly_d(r, P, 10), VM_FMA(0.5, r2_err, VM_FMA(rl, r + 0.5 * r2, rl)));
    return (vm_exp_arg){r, 0.5 * r2, s, n};
}

/* exp(x) = 2^n (hi + lo), e^r = 1 + r + (h + s) summed with 1 + r's rounding error kept:
 * hi is e^r rounded once, lo what it left out (tanh needs it). */
typedef struct {
    double hi, lo;
    int64_t n;
} vm_exp_parts;
static inline vm_exp_parts vm_exp_reduce_d(double x) {
    vm_exp_arg a = vm_exp_arg_d(x);
    double t = 1.0 + a.r;
    double lo = ((1.0 - t) + a.r) + (a.h + a.s);
    double hi = t + lo;
    return (vm_exp_parts){hi, (t - hi) + lo, a.n};
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

#ifdef __AVX512F__
/* vm_exp_d of 8 doubles, by a table: x = (16 n + j) ln2/16 + r, |r| <= ln2/32,
 * e^x = 2^n t (1 + l + q): t = 2^(j/16) rounded and l its relative error, both
 * from in-register lookups (vpermt2pd on the shifter's low bits), q = e^r - 1
 * by Taylor to r^7 (next term 1e-18). Only the last fma rounds at the result's
 * scale: measured maximum error 0.51 ulp; 2^n by vscalefpd (which takes
 * floor(kk)), overflow and underflow exact, subnormal results rounded
 * twice (0.76 ulp). 17 instructions, a third of vm_exp_d's. vm_exp8_le: for
 * x <= 710 or NaN (softmax's x - max), without the upper clamp. */
static inline __m512d vm_exp8_le(__m512d x) {
    static const double T[16] = {
        0x1.0000000000000p+0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
        0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
        0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f090p+0,
        0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0};
    static const double L[16] = {
        0x0.0p+0, 0x1.79aa65d837b6dp-54, -0x1.01b15eaa59348p-55, 0x1.68efde3a8a894p-54,
        0x1.34d754db0abb6p-55, 0x1.59f48a72a4c6dp-55, 0x1.690cebb7aafb0p-56, 0x1.063e1e21c5409p-54,
        -0x1.3b3efbf5e2228p-54, -0x1.b32dcb94da51dp-56, 0x1.db72fc1f0eab4p-55, 0x1.1affc2b91ce27p-56,
        0x1.c1a7792cb3387p-55, 0x1.36eae30af0cb3p-56, 0x1.4a385a63d07a7p-56, -0x1.ff7128fd391f0p-55};
    x = _mm512_max_pd(_mm512_set1_pd(-746.0), x); /* NaN passes (second operand) */
    /* kk: (16 n + j) / 16, x / ln2 rounded to the shifter's ulp 1/16 (its low bits
     * j): vscalefpd takes n = floor(kk) with no multiply by 1/16 */
    __m512d k = _mm512_fmadd_pd(x, _mm512_set1_pd(0x1.71547652b82fep+0), _mm512_set1_pd(VM_SHIFTER / 16));
    __m512d kk = _mm512_sub_pd(k, _mm512_set1_pd(VM_SHIFTER / 16));
    __m512d r = _mm512_fnmadd_pd(kk, _mm512_set1_pd(0x1.62e42fefa39efp-1), x);
    r = _mm512_fnmadd_pd(kk, _mm512_set1_pd(0x1.abc9e3b39803fp-56), r);
    __m512i j = _mm512_castpd_si512(k); /* kk mod 16 in the low bits */
    __m512d t = _mm512_permutex2var_pd(_mm512_loadu_pd(T), j, _mm512_loadu_pd(T + 8));
    __m512d l = _mm512_permutex2var_pd(_mm512_loadu_pd(L), j, _mm512_loadu_pd(L + 8));
    static const double C[] = {1.0, 0.5, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720};
    __m512d q = _mm512_set1_pd(1.0 / 5040);
    for (int i = 5; i >= 0; i--) q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(C[i]));
    __m512d y = _mm512_fmadd_pd(t, _mm512_fmadd_pd(q, r, l), t);
    return _mm512_scalef_pd(y, kk);
}
static inline __m512d vm_exp8(__m512d x) { return vm_exp8_le(_mm512_min_pd(_mm512_set1_pd(710.0), x)); }
#endif

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
    return (vm_log_parts){vm_int_to_double(e), small ? m + m - 1.0 : m - 1.0};
}

/* Measured maximum error 0.66 ulp. */
static inline double vm_log_d(double x) {
    vm_log_parts p = vm_log_split_d(x);
    return VM_LOG_EDGES(x, vm_log_reduced_d(p.k, p.f, 0.0), __builtin_inf(), __builtin_nan(""));
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

/* expm1(x) = 2^n (1 + q) - 1, q = e^r - 1 = r + h + s carried as qh + ql, summed at
 * the scale 2^n1 (n = n1 + n2, so that 2^1024 needs no representing) as
 * (2^n1 - 2^-n2) + 2^n1 q, a Fast2Sum (|2^n - 1| >= |2^n q|), then scaled by
 * 2^n2. Below -40 it is -1 in double. */
static inline double vm_expm1_d(double x) {
    const double hi = 0x1.62e42fefa39efp9, lo = -40.0;
    double xc = x > hi ? hi : (x < lo ? lo : x);
    xc = xc != xc ? 0.0 : xc;
    vm_exp_arg a = vm_exp_arg_d(xc);
    double u = a.r + a.h, v = (a.h - (u - a.r)) + a.s; /* Fast2Sums: |r| >= |h| >= |s| */
    double qh = u + v, ql = (u - qh) + v;
    int64_t n1 = a.n >> 1, n2 = a.n - n1;
    double h1 = vm_pow2_d(n1);
    double m = vm_pow2_d(-n2), c = h1 - m, b = h1 * qh;
    double c_err = h1 >= m ? (h1 - c) - m : h1 - (c + m); /* Fast2Sum: nonzero for |n| > 53 */
    double sum = c + b, err = (b - (sum - c)) + c_err;
    double y = (sum + VM_FMA(h1, ql, err)) * vm_pow2_d(n2);
    y = x > hi ? __builtin_inf() : y;
    y = x < lo ? -1.0 : y;
    y = x == 0.0 ? x : y; /* keeps -0 */
    return x != x ? x : y;
}

/* erf on [0, 6) in 24 intervals of 0.25: the first erf(t) = t + t (c1 - 1 + t q(t)), the
 * others erf(m + t) = c0 + c1 t + t^2 q(t) about their midpoint m, c0 and c1 as
 * double-doubles; q of degree 10. Chebyshev fits (mpmath), relative error below
 * 7e-19. Above 5.92 erf is 1 in double. Stored coefficient-major, so that each
 * load is a gather at index i (gcc 12 gathers nothing from rows of 15). Measured
 * maximum error 0.77 ulp (just above 0.25), 0.87 without FMA. */
static const double vm_erf_c[15][24] = {
    {0.0, 0.4041169094348223, 0.623240882188418, 0.7840750610598597, 0.8883882317017078, 0.9481700727820903, 0.9784437332399837, 0.9919900576701199, 0.9973459706405177, 0.9992170617821089, 0.9997946242638588, 0.9999521451602562, 0.9999901032653747, 0.9999981847185726, 0.9999997048598075, 0.999999957486056, 0.9999999945765992, 0.9999999993875167, 0.9999999999387839, 0.9999999999945866, 0.9999999999995766, 0.9999999999999707, 0.9999999999999982, 0.9999999999999999},
    {0.0, -1.5094497806256517e-17, -2.7016816836135297e-17, -3.204544978890348e-17, -1.158643993739769e-17, 1.071691533519912e-17, -1.7028513178925588e-17, 3.0126779045582727e-17, -6.548583264315741e-18, -1.4349117332555682e-17, -6.2556665556923804e-18, 1.4933598125858e-17, 1.3132336543493276e-17, -4.284756581330801e-17, -3.8108336724873686e-18, -5.0616648789558536e-17, 3.99675667392096e-17, -9.046130618729546e-18, 3.813525439388226e-17, 4.1001774321813545e-17, -1.727604158766289e-17, 1.5002305232589177e-17, -1.5663166250755952e-17, 1.4106746009743903e-17},
    {0.12837916709551256, 0.9803528095459079, 0.7634995357606049, 0.5247450452901482, 0.3182739585007693, 0.1703597736875156, 0.08047225902251116, 0.03354582842421608, 0.012340820614333696, 0.004006477861670219, 0.0011478751258826748, 0.000290228282862498, 6.475868323471299e-05, 1.275174079976511e-05, 2.2159202846331196e-06, 3.398223817809156e-07, 4.5989958288459555e-08, 5.492717228852925e-09, 5.789281366585668e-10, 5.3848704920950125e-11, 4.420170869329977e-12, 3.201961038234127e-13, 2.0469452084062556e-14, 1.154807464331153e-15},
    {1.4608375379182654e-17, 3.1637468976420864e-18, -2.967617601998954e-17, 1.5735282484113435e-17, 1.8322985170076146e-17, 1.1352275490631826e-18, 1.2266218534155122e-18, -3.1396862542726664e-18, -1.5268966977302542e-19, 1.024010487366656e-19, 8.164900301182898e-20, 1.6695445809976173e-21, 4.751003619431372e-21, -2.720815250194583e-22, 1.1239789791422956e-22, -8.130445798092167e-24, -1.0023338369410578e-24, -3.6221420506062036e-25, -2.830131395483938e-26, -2.0751616475971005e-27, 1.288145839654395e-28, 1.4912501718876118e-29, -9.526962549004388e-31, 1.7521220758360208e-32},
    {8.377510565834034e-16, -0.36763230357971544, -0.47718720985037805, -0.4591519146288797, -0.35805820331336546, -0.23424468882033395, -0.13076742091158064, -0.06289842829540514, -0.026224243805459103, -0.009515384921466771, -0.003013172205442022, -0.0008344063132296818, -0.00020237088510847805, -4.303712519920718e-05, -8.032711031795035e-06, -1.316811729401048e-06, -1.897085779398996e-07, -2.4030637876233768e-08, -2.6775426320466415e-09, -2.6251243648982916e-10, -2.265337570535589e-11, -1.721054058057347e-12, -1.151406679737318e-13, -6.7844938530452e-15},
    {-0.3761263890319974, -0.23487619395370984, -0.05567184114921896, 0.09292360177012801, 0.1624523329847717, 0.1579377068561377, 0.1148406196467083, 0.06744109256118269, 0.03303740518628846, 0.013730533505099238, 0.00489042631756299, 0.0015025360060694898, 0.00040001978289772456, 9.25829514315897e-05, 1.867374489861395e-05, 3.2884895070253717e-06, 5.06368603240298e-07, 6.82584547303642e-08, 8.062780403581547e-09, 8.352158503646685e-10, 7.592564338560215e-11, 6.060378342517877e-12, 4.2495435452136e-13, 2.6187665137245715e-14},
    {1.1957306341027324e-11, 0.16658338755955548, 0.176459853642588, 0.1123965624351969, 0.027973297133857565, -0.030500610523481967, -0.04971886315909143, -0.04225988151097526, -0.02636082840861216, -0.013133213563482644, -0.005414293806653689, -0.0018817600709815844, -0.000557573949074936, -0.00014188802214112946, -3.1168592284823824e-05, -5.9325111767270205e-06, -9.811490515329832e-07, -1.4130515709539372e-07, -1.775266547196827e-08, -1.9483344896078915e-09, -1.8700833590871796e-10, -1.571358210434326e-11, -1.1568038987405688e-12, -7.466476831157967e-14},
    {0.11283791624716757, 0.04547535005358961, -0.027413411061691043, -0.06721587738212743, -0.06132368360774556, -0.03060597627068895, -0.00213492484042858, 0.011462583365752841, 0.012495482591793543, 0.008357392833647682, 0.00421788060154194, 0.0017132632797573321, 0.0005769615014916136, 0.0001637739444805414, 3.959233535007346e-05, 8.208845472006421e-06, 1.4669853531731005e-06, 2.2680648800287385e-07, 3.04235968361937e-08, 3.5486874588057922e-09, 3.605893877030882e-10, 3.1966086781901653e-11, 2.475322304672335e-12, 1.6760588843757767e-13},
    {1.0559661548378791e-08, -0.05010665543749565, -0.041344833666110865, -0.010367785747131035, 0.015536835449309028, 0.022161235263356446, 0.014414781131532689, 0.004105187133179265, -0.001821412593494177, -0.003114079043217469, -0.0022468338447001915, -0.0011400746241888868, -0.000452315177608304, -0.00014640888161779998, -3.952911393367193e-05, -9.021089088156317e-06, -1.7554651147207796e-06, -2.930780870403698e-07, -4.216900119231207e-08, -5.247061305121305e-09, -5.661379906121985e-10, -5.3082285119366654e-11, -4.3327484854411766e-12, -3.083176161110794e-13},
    {-0.026866323714349567, -0.0054588943823405825, 0.013910007726235652, 0.018595726495997174, 0.00960689468237338, -0.001419061973690616, -0.00618426155397986, -0.004928394100661886, -0.0018692573356977572, 0.0001232696572042443, 0.0006808681359574568, 0.0005285700524698934, 0.0002664810472948275, 0.00010218619240658254, 3.151412002857888e-05, 8.03314728927301e-06, 1.719658995114461e-06, 3.1234617264725975e-07, 4.847964587312463e-08, 6.4634901912627e-09, 7.431348885038804e-10, 7.390852264729487e-11, 6.374018699587506e-12, 4.776308310439806e-13},
    {1.4631851071733884e-06, 0.0112489114247006, 0.006686168395313666, -0.0018461465870203105, -0.006031260783511186, -0.0042610335518899435, -0.0005765255286444421, 0.0014305016946735026, 0.0013833456583395199, 0.0005941113258768193, 3.4644700142939484e-05, -0.0001356080190619943, -0.00011126364188641665, -5.484627092611875e-05, -2.0089147527603046e-05, -5.849020770883453e-06, -1.3972270497654922e-06, -2.788260881456296e-07, -4.701834707779227e-08, -6.753001394599458e-09, -8.308249406277233e-10, -8.793958802039795e-11, -8.034989520750475e-12, -6.354491023296534e-13},
    {0.005214623168304981, 0.00012407538684973396, -0.0036332601781697005, -0.0032568339752216367, -0.0003602407245228533, 0.0015778699415789116, 0.0014106891535859596, 0.0003622769821585308, -0.0002897714363392008, -0.0003375309206565284, -0.0001526045426444633, -1.6140239214804837e-05, 2.5451062488685827e-05, 2.1265621981318463e-05, 1.0055334820676358e-05, 3.4746603161749737e-06, 9.463926338543762e-07, 2.1033535585080362e-07, 3.8893931295599224e-08, 6.058005993806703e-09, 8.01533986725732e-10, 9.063881725400061e-11, 8.800570008740435e-12, 7.363302285569665e-13},
    {3.966222086689856e-05, -0.002009072802584023, -0.0007344857943171419, 0.0008981261711149112, 0.0011532567303776113, 0.0003236032750692533, -0.0003559687310079311, -0.00039015836036430517, -0.00012277616587852056, 5.4704270070575526e-05, 7.395683185827387e-05, 3.338879688415909e-05, 3.873716812142389e-06, -4.603618763720443e-06, -3.7186709440692154e-06, -1.6530523229012182e-06, -5.323943142532848e-07, -1.3448152353761463e-07, -2.7620256796153353e-08, -4.706535785199543e-09, -6.739669762913862e-10, -8.181804831131837e-11, -8.47414377228372e-12, -7.524315295948198e-13},
    {-0.0009622210343328787, 0.0001149903436451427, 0.0006729784054686272, 0.0003885789995762027, -0.00017445589955318624, -0.00033698588286034905, -0.00012587609259645364, 7.267725285468327e-05, 9.442226098481918e-05, 3.1766937264326596e-05, -1.0115621696515753e-05, -1.4751394663414937e-05, -6.386359064755835e-06, -6.782374392223531e-07, 7.9753682181834e-07, 5.958438633906106e-07, 2.4549073555776424e-07, 7.314859369803843e-08, 1.7060496581838507e-08, 3.2293330676655576e-09, 5.063208735282482e-10, 6.661358740748412e-11, 7.419944952768327e-12, 7.043043077118056e-13},
    {0.00016929797852102726, 0.0002952258581699358, 4.083565776443501e-05, -0.0001914957233125074, -0.0001410143475942587, 2.807621306730481e-05, 8.743247491784707e-05, 3.61145575007309e-05, -1.4761705352636231e-05, -2.0715331900915115e-05, -6.721841312812088e-06, 2.0002238930702958e-06, 2.719550930642742e-06, 1.0699849292788968e-06, 8.036293703327369e-08, -1.334801117013047e-07, -8.741962259758798e-08, -3.2680919272882514e-08, -8.884537764122645e-09, -1.8923742698820465e-09, -3.270225595072603e-10, -4.67747548742943e-11, -5.608830437853518e-12, -5.688762807409723e-13},
};
static inline double vm_erf_d(double x) {
    double ax = fabs(x);
    /* min(|x|, 5.9375) on the bits, NaN too (erf(5.9375) is 1): a double select
     * here got the table loads below branched around, and no vectorising */
    uint64_t b = vm_double_to_bits(ax), cap = vm_double_to_bits(5.9375);
    double axc = vm_bits_to_double(b < cap ? b : cap);
    int i = (int)(axc * 4.0);
    double t = axc - (i == 0 ? 0.0 : 0.25 * vm_int_to_double(i) + 0.125);
    const double(*c)[24] = vm_erf_c;
    double q = c[14][i];
    for (int j = 13; j >= 4; j--) q = VM_FMA(q, t, c[j][i]);
    /* the first interval holds c1 - 1 and adds t itself: without FMA, t * c1
     * rounded there gave 1.19 ulp near 0.25; t + t (c1 - 1) gives 0.87 */
    double c0 = i == 0 ? t : c[0][i];
    double y = copysign(c0 + VM_FMA(t, c[2][i], c[1][i] + t * VM_FMA(t, q, c[3][i])), x);
    return x != x ? x : y;
}

/* float: the double versions, rounded once more: within 0.5 ulp + 2^-28 ulp (no
 * error seen in tests/test_vmath.c's millions) */
/* expm1 of a float in double: x = k ln2 + r, |r| <= ln2/2, e^r - 1 by Taylor
 * to r^10 (2e-11 relative), then 2^k (e^r - 1) + (2^k - 1) rounded once; 2^k
 * from the shifter's bits, x clamped to [-40, 100] (float's -1 and inf) */
static inline float vm_expm1f(float xf) {
    double x = xf < -40.0f ? -40.0 : xf > 100.0f ? 100.0 : (double)xf;
    x = x != x ? 0.0 : x;
    double kk = VM_FMA(x, 0x1.71547652b82fep0, VM_SHIFTER), k = kk - VM_SHIFTER;
    double r = VM_FMA(k, -VM_LN2_LO, VM_FMA(k, -VM_LN2_HI, x)), p = 1.0 / 3628800;
    p = VM_FMA(p, r, 1.0 / 362880), p = VM_FMA(p, r, 1.0 / 40320), p = VM_FMA(p, r, 1.0 / 5040);
    p = VM_FMA(p, r, 1.0 / 720), p = VM_FMA(p, r, 1.0 / 120), p = VM_FMA(p, r, 1.0 / 24);
    p = VM_FMA(p, r, 1.0 / 6), p = VM_FMA(p, r, 0.5), p = VM_FMA(p * r, r, r); /* e^r - 1 */
    uint64_t n = vm_double_to_bits(kk) - vm_double_to_bits(VM_SHIFTER);
    double t = vm_bits_to_double((n + 1023) << 52);
    float f = (float)VM_FMA(t, p, t - 1.0);
    return xf != xf || xf == 0.0f ? xf : f; /* NaN, and -0 kept */
}
/* log1p(e^t), softplus' body, in float: max(t, 0) + log1p(z), z = e^-|t| in [0, 1],
 * log1p(z) = log(u) + c / u, u = 1 + z rounded and c = z - (u - 1) its exact
 * error, log(u) = k ln 2 + log(1 + f), f = u / 2^k - 1 exact. Within 2 ulp. In
 * double (two divisions) it ran at 2.4x torch's time; selecting f between z and
 * u / 2 - 1, gcc evaluated the polynomial on both. Where e^t overflows float
 * (t > ln FLT_MAX) it is inf, as torch's log1p(exp(t)). */
static inline float vm_log1p_expf(float t) {
    float z = vm_expf(t < 0 ? t : -t), u = 1.0f + z;
    float k = u >= 1.41421356f ? 1.0f : 0.0f;
    float f = u * (1.0f - 0.5f * k) - 1.0f, f2 = f * f;
    float c = (z - (u - 1.0f)) / u + k * VM_LN2F_LO;
    float l = f + ((vm_logf_poly(f) * f * f2 - 0.5f * f2) + c) + k * VM_LN2F_HI;
    return t > 88.7228317f ? __builtin_inff() : (t > 0 ? t : 0.0f) + l;
}
static inline double vm_log1p_exp_d(double t) { return vm_log1p_d(vm_exp_d(t)); }
/* float erf in double, two polynomials and no tables (vm_erf_d's 15 gathers a
 * vector made gelu 12x slower than torch's): x P(x^2) for |x| < 1, else 1 -
 * Q(min(|x|, 4) - 2.5), Q ~ erfc (erf(4) rounds to 1). Least-squares fits
 * (mpmath): P relative error 3.3e-11, Q absolute 9.2e-12; measured maximum
 * 0.5005 ulp. Written out (loops over coefficient arrays kept the kernels
 * scalar), Q as two chains, its terms from v^10 on and the rest (1.17x). */
#define VM_ERFF(name, T)                                                                   \
    static inline float name(float xf) {                                                    \
        T x = xf, a = fabs(x), s = a * a, v = (a < (T)4.0 ? a : (T)4.0) - (T)2.5;           \
        T p = VM_FMA(s, (T)-9.641858944614556e-06, (T)0.00011257077058528242);              \
        p = VM_FMA(p, s, (T)-0.0008482848314044222);                                        \
        p = VM_FMA(p, s, (T)0.005220946928098241);                                          \
        p = VM_FMA(p, s, (T)-0.026865400657356875);                                         \
        p = VM_FMA(p, s, (T)0.11283781987095243);                                           \
        p = VM_FMA(p, s, (T)-0.3761263843585756);                                           \
        T q = VM_FMA(v, (T)0.00025027984583052233, (T)-0.00026049360166951915);             \
        T qh = VM_FMA(v, (T)1.0100351200163435e-08, (T)-3.361129424458466e-08);             \
        q = VM_FMA(q, v, (T)-0.0005424117966903582);                                        \
        qh = VM_FMA(qh, v, (T)-1.1362575906078163e-07);                                     \
        q = VM_FMA(q, v, (T)0.0027984274982452446);                                         \
        qh = VM_FMA(qh, v, (T)6.726651052115269e-07);                                       \
        q = VM_FMA(q, v, (T)-0.006117346998137856);                                         \
        qh = VM_FMA(qh, v, (T)-3.564850315506206e-07);                                      \
        q = VM_FMA(q, v, (T)0.008622386392894405);                                          \
        qh = VM_FMA(qh, v, (T)-4.727852643820551e-06);                                      \
        q = VM_FMA(q, v, (T)-0.008350089748844306);                                         \
        qh = VM_FMA(qh, v, (T)1.4364105133043235e-05);                                      \
        q = VM_FMA(q, v, (T)0.005445709782237697);                                          \
        qh = VM_FMA(qh, v, (T)-5.113491220465539e-06);                                      \
        q = VM_FMA(q, v, (T)-0.0021782842225977735);                                        \
        qh = VM_FMA(qh, v, (T)-7.908788292521698e-05);                                      \
        q = VM_FMA(q, v, (T)0.00040695202663886584);                                        \
        T v2 = v * v, v4 = v2 * v2, v8 = v4 * v4;                                           \
        q = VM_FMA(qh, v8 * v2, q);                                                         \
        T y = a < (T)1.0 ? VM_FMA(a, (T)1.1283791670583427, a * s * p) : (T)1.0 - q;       \
        return xf != xf ? xf : (float)copysign(y, x);                                       \
    }
VM_ERFF(vm_erff, double)
/* the same in float arithmetic: 2.2 ulp (gelu's, where (1 + erf) rounds at 1
 * anyway), 1.9x faster with 8 float lanes to 4 double ones (AVX2) */
VM_ERFF(vm_erff_fast, float)

/* ---- arrays ----
 * vm_expf_n / vm_exp_d_n: y[i] = exp(x[i]) (y may be x); vm_sigmoidf_n the
 * same for 1 / (1 + exp(-x)). vm_expf_sum_n / vm_exp_d_sum_n: y[i] = exp(x[i]
 * - m), not stored where y is NULL, and the sum of them (softmax's middle
 * pass), prefetching pf's first pb bytes unless pf is NULL (the next row, fetched
 * while this one computes in L1: 16% faster than from the max pass, float32
 * [4096, 1024] at 2 threads, AVX2). With AVX-512 they run vm_expf16 / vm_exp8
 * over vectors, the tail under a mask; with AVX2 the float ones run vm_expf8;
 * otherwise loops the compiler vectorises, summing in VM_LANES partial sums. */
#define VM_LANES 32
#ifdef __AVX512F__
/* y[i] = vf(x[i]) over vectors of W, the tail under a mask */
#define VM_MAP_N(name, T, W, M, vf, ps)                                                     \
    static inline void name(T *y, const T *x, int64_t n) {                                  \
        int64_t i = 0;                                                                      \
        for (; i + W <= n; i += W) _mm512_storeu_##ps(y + i, vf(_mm512_loadu_##ps(x + i)));  \
        M k = (M)((1u << (n - i)) - 1);                                                     \
        if (k) _mm512_mask_storeu_##ps(y + i, k, vf(_mm512_maskz_loadu_##ps(k, x + i)));     \
    }
/* 1 / (1 + e^-x), as ops.def's row */
static inline __m512 vm_sigmoidf16(__m512 x) {
    __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, vm_expf16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}
VM_MAP_N(vm_expf_n, float, 16, __mmask16, vm_expf16, ps)
VM_MAP_N(vm_exp_d_n, double, 8, __mmask8, vm_exp8, pd)
VM_MAP_N(vm_sigmoidf_n, float, 16, __mmask16, vm_sigmoidf16, ps)
#define VM_EXP_ARRAYS(T, sfx, W, V, M, vexp, ps)                                            \
    static inline T vm_exp##sfx##_sum_n(T *y, const T *x, T m, int64_t n, const void *pf, int64_t pb) { \
        V vm = _mm512_set1_##ps(m), acc = _mm512_setzero_##ps();                           \
        int64_t i = 0;                                                                      \
        for (; i + W <= n; i += W) {                                                        \
            if (pf && i * (int64_t)sizeof(T) < pb) __builtin_prefetch((const char *)pf + i * sizeof(T)); \
            V e = vexp(_mm512_sub_##ps(_mm512_loadu_##ps(x + i), vm));                     \
            acc = _mm512_add_##ps(acc, e);                                                 \
            if (y) _mm512_storeu_##ps(y + i, e);                                           \
        }                                                                                   \
        /* the tail summed in order, first: a short row's sum is torch's */                \
        T t[W], s = 0;                                                                      \
        M k = (M)((1u << (n - i)) - 1);                                                     \
        _mm512_storeu_##ps(t, vexp(_mm512_sub_##ps(_mm512_maskz_loadu_##ps(k, x + i), vm))); \
        if (y) _mm512_mask_storeu_##ps(y + i, k, _mm512_loadu_##ps(t));                   \
        for (int j = 0; j < n - i; j++) s += t[j];                                          \
        return s + _mm512_reduce_add_##ps(acc);                                            \
    }
VM_EXP_ARRAYS(float, f, 16, __m512, __mmask16, vm_expf16, ps)
VM_EXP_ARRAYS(double, _d, 8, __m512d, __mmask8, vm_exp8, pd)
#else
#define VM_MAP_N(name, T, f)                                                                \
    static inline void name(T *y, const T *x, int64_t n) {                                  \
        for (int64_t i = 0; i < n; i++) y[i] = f(x[i]);                                     \
    }
static inline float vm_sigmoidf(float x) { return 1.0f / (1.0f + vm_expf(-x)); }
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
/* vm_expf of 8 floats, bit for bit: the same steps in ymm registers. The
 * usual lanes (|x| <= 87, a normal result) add 2^n into p's exponent field;
 * a vector with any other lane (overflow, a subnormal result, +-inf, NaN:
 * softmax's masked -inf) takes vm_expf's own steps instead, clamps and 2^n in
 * two halves (through the scalar function, 20x slower: a causal mask's rows
 * ran at 2% of the triad). gcc's vectorised loop of
 * vm_expf ran at 57% of this rate (one thread, rows in L1: 1.33 against 2.33
 * G elements/s). */
#define VM_EXPF8_STEPS(x, k, p)                                                             \
    __m256 k = _mm256_fmadd_ps(x, _mm256_set1_ps(VM_LOG2EF), _mm256_set1_ps(12582912.0f));  \
    __m256 n_ = _mm256_sub_ps(k, _mm256_set1_ps(12582912.0f));                              \
    __m256 r_ = _mm256_fnmadd_ps(n_, _mm256_set1_ps(VM_LN2F_HI), x);                        \
    r_ = _mm256_fnmadd_ps(n_, _mm256_set1_ps(VM_LN2F_LO), r_);                              \
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);                                            \
    VM_EXPF_POLY(p, r_, VM_FMA8)
#define VM_FMA8(a, b, c) _mm256_fmadd_ps(a, b, _mm256_set1_ps(c))
static inline __m256 vm_pow2i8(__m256i n) { /* 2^n for a normal power */
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}
static inline __m256 vm_expf8_edges(__m256 x) {
    /* vm_expf's clamps: NaN to 89 (minps returns its second operand), then -104 */
    __m256 xc = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(89.0f)), _mm256_set1_ps(-104.0f));
    VM_EXPF8_STEPS(xc, k, p);
    __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(k), _mm256_set1_epi32(0x4b400000));
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, vm_pow2i8(n1)), vm_pow2i8(n2));
    return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
static inline __m256 vm_expf8(__m256 x) {
    __m256 bad = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(87.0f), _CMP_NLE_UQ);
    if (!_mm256_testz_ps(bad, bad)) return vm_expf8_edges(x);
    VM_EXPF8_STEPS(x, k, p);
    __m256i e = _mm256_slli_epi32(_mm256_castps_si256(k), 23); /* k's low bits are n */
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}
#undef VM_EXPF8_STEPS
#undef VM_FMA8
static inline __m256 vm_sigmoidf8(__m256 x) {
    __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, vm_expf8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}
/* the first r < 8 lanes */
static inline __m256i vm_tail8(int64_t r) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define VM_MAP8(name, vf)                                                                   \
    static inline void name(float *y, const float *x, int64_t n) {                          \
        int64_t i = 0;                                                                      \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, vf(_mm256_loadu_ps(x + i)));     \
        __m256i k = vm_tail8(n - i);                                                        \
        if (i < n) _mm256_maskstore_ps(y + i, k, vf(_mm256_maskload_ps(x + i, k)));         \
    }
VM_MAP8(vm_expf_n, vm_expf8)
VM_MAP8(vm_sigmoidf_n, vm_sigmoidf8)
#undef VM_MAP8
/* the portable loop's sum, in its order: the tail first, then VM_LANES (32)
 * partial sums, here four vectors (named: an array of them went through the
 * stack) */
static inline __attribute__((always_inline)) float vm_expf_sum_body(float *y, const float *x, float m, int64_t n,
                                                                    const void *pf, int64_t pb) {
    __m256 vm = _mm256_set1_ps(m), a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + VM_LANES <= n; i += VM_LANES) {
        if (pf && 4 * i < pb) _mm_prefetch((const char *)pf + 4 * i, _MM_HINT_T0), _mm_prefetch((const char *)pf + 4 * i + 64, _MM_HINT_T0);
        __m256 e0 = vm_expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        __m256 e1 = vm_expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
        __m256 e2 = vm_expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 16), vm));
        __m256 e3 = vm_expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 24), vm));
        a0 = _mm256_add_ps(a0, e0), a1 = _mm256_add_ps(a1, e1), a2 = _mm256_add_ps(a2, e2), a3 = _mm256_add_ps(a3, e3);
        if (y) {
            _mm256_storeu_ps(y + i, e0), _mm256_storeu_ps(y + i + 8, e1);
            _mm256_storeu_ps(y + i + 16, e2), _mm256_storeu_ps(y + i + 24, e3);
        }
    }
    float s = 0, t[VM_LANES];
    for (; i < n; i++) {
        float e = vm_expf(x[i] - m);
        s += e;
        if (y) y[i] = e;
    }
    _mm256_storeu_ps(t, a0), _mm256_storeu_ps(t + 8, a1), _mm256_storeu_ps(t + 16, a2), _mm256_storeu_ps(t + 24, a3);
    for (int j = 0; j < VM_LANES; j++) s += t[j];
    return s;
}
static inline float vm_expf_sum_n(float *y, const float *x, float m, int64_t n, const void *pf, int64_t pb) {
    return y ? vm_expf_sum_body(y, x, m, n, pf, pb) : vm_expf_sum_body(NULL, x, m, n, pf, pb);
}
#else
VM_MAP_N(vm_expf_n, float, vm_expf)
VM_MAP_N(vm_sigmoidf_n, float, vm_sigmoidf)
#endif
VM_MAP_N(vm_exp_d_n, double, vm_exp_d)
#define VM_EXP_ARRAYS(T, sfx, vexp)                                                         \
    static inline T vm_exp##sfx##_sum_n(T *y, const T *x, T m, int64_t n, const void *pf, int64_t pb) { \
        T acc[VM_LANES] = {0}, s = 0;                                                       \
        int64_t i = 0;                                                                      \
        if (pf)                                                                             \
            for (int64_t j = 0; j < pb; j += 64) __builtin_prefetch((const char *)pf + j);  \
        if (y) {                                                                            \
            for (; i + VM_LANES <= n; i += VM_LANES)                                        \
                for (int j = 0; j < VM_LANES; j++) acc[j] += y[i + j] = vexp(x[i + j] - m); \
            for (; i < n; i++) s += y[i] = vexp(x[i] - m);                                  \
        } else {                                                                            \
            for (; i + VM_LANES <= n; i += VM_LANES)                                        \
                for (int j = 0; j < VM_LANES; j++) acc[j] += vexp(x[i + j] - m);            \
            for (; i < n; i++) s += vexp(x[i] - m);                                         \
        }                                                                                   \
        for (int j = 0; j < VM_LANES; j++) s += acc[j];                                     \
        return s;                                                                           \
    }
#if !(defined(__AVX2__) && defined(__FMA__))
VM_EXP_ARRAYS(float, f, vm_expf)
#endif
VM_EXP_ARRAYS(double, _d, vm_exp_d)
#endif
#undef VM_EXP_ARRAYS
#undef VM_MAP_N

/* x^y of floats as exp(y log |x|) in double (the error of y log |x|, 1e-14 at
 * most where the result is a finite float, is far below float's half ulp:
 * rounded once but for double rounding), branch-free so that loops vectorise
 * (libm's pow per element, 10x slower). IEEE pow's cases: y = 0 or x = 1 give
 * 1, as x = -1 with y = +-inf; a negative x takes the sign of an odd integer
 * y, is NaN for a non-integer y unless -0 or -inf (|x|^y, as pow). */
/* |x|^y = e^t, t = y log|x|, in double with the precision a float result needs
 * (t to 2^-38 relative; |t| < 104 where the result is a finite nonzero float) and
 * no table: log|x| = k ln 2 + 2 atanh(s), s = f / (2 + f), 1 + f = |x| / 2^k in
 * [sqrt(1/2), sqrt(2)) taken apart in float (|s| < 0.172: Taylor to s^15, 2e-12),
 * e^t = 2^n e^r, |r| <= ln2 / 2 (Taylor to r^9, 7e-12), the polynomials in
 * Estrin's form (Horner's latency bounded the loop), rounded once to float:
 * within 0.5 ulp and a hair. Everything else is float, 8 lanes to double's 4
 * on AVX2. Through the full-precision vm_log_d / vm_exp_d it took 1.6x Sleef's
 * time there, where 64-bit arithmetic shifts and int64 conversions do not
 * vectorise; this uses neither. */
static inline float vm_powf_abs(float ax, double y) {
    int sub = ax < 0x1p-126f; /* subnormals: scale into the normal range */
    int32_t bits = vm_float_to_bits(sub ? ax * 0x1p23f : ax);
    float m = vm_bits_to_float((bits & 0x007fffff) | 0x3f800000); /* [1, 2) */
    int big = m > 1.41421356f;
    float f = m * (big ? 0.5f : 1.0f) - 1.0f; /* exact */
    double k = (double)((bits >> 23) - 127 - (sub ? 23 : 0) + big);
    double fd = f, s = fd / (2.0 + fd), z = s * s, z2 = z * z, z4 = z2 * z2;
    double p = VM_FMA(z4, VM_FMA(z2, 1.0 / 15, VM_FMA(z, 1.0 / 13, 1.0 / 11)),
                      VM_FMA(z2, VM_FMA(z, 1.0 / 9, 1.0 / 7), VM_FMA(z, 1.0 / 5, 1.0 / 3)));
    double t = y * VM_FMA(k, 0x1.62e42fefa39efp-1, VM_FMA(2.0 * s * z, p, 2.0 * s));
    t = t > 200.0 ? 200.0 : t < -200.0 ? -200.0 : t; /* NaN stays */
    double kk = VM_FMA(t, 0x1.71547652b82fep0, VM_SHIFTER), nd = kk - VM_SHIFTER; /* 1/ln2 */
    double r = VM_FMA(nd, -VM_LN2_LO, VM_FMA(nd, -VM_LN2_HI, t)), r2 = r * r, r4 = r2 * r2;
    double e = VM_FMA(r4 * r4, VM_FMA(r, 1.0 / 362880, 1.0 / 40320),
                      VM_FMA(r4, VM_FMA(r2, VM_FMA(r, 1.0 / 5040, 1.0 / 720), VM_FMA(r, 1.0 / 120, 1.0 / 24)),
                             VM_FMA(r2, VM_FMA(r, 1.0 / 6, 0.5), r + 1.0)));
    uint64_t n = vm_double_to_bits(kk) - vm_double_to_bits(VM_SHIFTER);
    float res = (float)(e * vm_bits_to_double((n + 1023) << 52));
    res = ax == 0 ? (y < 0 ? __builtin_inff() : 0.0f) : res;
    res = ax == __builtin_inff() ? (y < 0 ? 0.0f : __builtin_inff()) : res;
    return ax != ax || y != y ? ax + y : res;
}
/* y in double: a float's exactly, or pow(Tensor, Scalar)'s exponent as torch's
 * std::pow(float, double) takes it */
static inline float vm_powf(float x, double y) {
    float ax = __builtin_fabsf(x), r = vm_powf_abs(ax, y);
    bool yint = y == __builtin_trunc(y), neg = __builtin_signbit(x);
    double yo = __builtin_fabs(y) < 0x1p53 ? 0.5 * y : 0; /* doubles from 2^53 on are even */
    bool odd = yint && yo != __builtin_trunc(yo);          /* no double -> int (no int64 on AVX2) */
    r = neg && odd ? -r : r;
    r = neg && !yint && ax != 0 && ax != __builtin_inff() ? __builtin_nanf("") : r;
    r = (x == -1 && __builtin_isinf(y)) || y == 0 || x == 1 ? 1 : r;
    return r;
}
/* o = a^b for n floats (b NULL: the double e for all), 16 at a time through
 * one vectorised body (a short block through buffers): inlined in a plain
 * loop, its vector, narrower and scalar copies took 8 KB */
static inline void vm_powf_n(float *o, const float *a, const float *b, double e, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        float xb[16] = {0}, ybf[16] = {0}, rb[16];
        double yb[16];
        int m = n - i < 16 ? (int)(n - i) : 16;
        if (m < 16) memcpy(xb, a + i, (size_t)m * sizeof *xb);
        if (m < 16 && b) memcpy(ybf, b + i, (size_t)m * sizeof *ybf);
        const float *restrict x = m < 16 ? xb : a + i, *restrict yf = !b ? NULL : m < 16 ? ybf : b + i;
        float *restrict r = m < 16 ? rb : o + i;
        if (b) /* one straight widening loop each way: a select in it kept gcc 12 from vectorising the next */
            for (int j = 0; j < 16; j++) yb[j] = yf[j];
        else
            for (int j = 0; j < 16; j++) yb[j] = e;
        for (int j = 0; j < 16; j++) r[j] = vm_powf(x[j], yb[j]);
        if (m < 16) memcpy(o + i, rb, (size_t)m * sizeof *rb);
    }
}

/* ---- float32 functions evaluated in double, 16 at a time ----
 * sin cos tan asin acos atan sinh cosh, atan2, fmod and remainder
 * of float32 (and of what computes in float32: 16-bit floats, integers):
 * libm's are scalar calls, 5-9x torch's time on [1024, 1024]. A block
 * function computes 16 results from the floats widened to double, in a loop
 * of fixed length the compiler vectorises (no conversions between double and
 * int64, which AVX2 lacks), and flags the elements it leaves to libm:
 * trig arguments beyond 2^20 (the reduction by pi/2 in two parts needs more
 * bits of pi there), fmod quotients from 2^24, inf and NaN arguments. One
 * rounding to float at the end: within 0.5 ulp and a hair (the polynomials
 * are good to 1e-11 relative). fn: VM_TRIG (which: 0 sin, 1 cos, 2 tan),
 * VM_ATAN (atan, asin, acos), VM_HYP (sinh, cosh), VM_ATAN2, VM_FMOD (fmod,
 * remainder). */
#define VM_B 16
enum { VM_TRIG, VM_ATAN, VM_HYP, VM_ATAN2, VM_FMOD };
typedef void (*vm_blk_fn)(double *restrict r, double *restrict slow, const double *restrict x,
                          const double *restrict y, int which);
/* atan(p / q) for p, q >= 0 (inf, NaN too), with one division: t = p / q in
 * [0, tan(pi/8)] as it is, in (tan(pi/8), tan(3pi/8)] as pi/4 + atan((t - 1)
 * / (t + 1)), beyond as pi/2 - atan(1 / t); then Taylor to u^23 (|u| <=
 * 0.415: next term 1e-11) */
static inline double vm_atan_pq(double p, double q) {
    bool lo = p <= 0.41421356237309503 * q, mid = !lo && p <= 2.4142135623730951 * q;
    double u = (lo ? p : mid ? p - q : -q) / (lo ? q : mid ? p + q : p);
    double z = u * u, c = -1.0 / 23;
    for (int k = 21; k >= 3; k -= 2) c = VM_FMA(c, z, (k & 2 ? -1.0 : 1.0) / k);
    return VM_FMA(u * z, c, u) + (lo ? 0.0 : mid ? 0x1.921fb54442d18p-1 : 0x1.921fb54442d18p0);
}
__attribute__((unused)) static void vm_trig_blk(double *restrict r, double *restrict slow, const double *restrict x,
                                                const double *restrict y, int which) {
    (void)y;
    _Pragma("GCC unroll 1") for (int j = 0; j < VM_B; j++) {
        bool sl = !(fabs(x[j]) <= 0x1p20);
        double v = sl ? 0.0 : x[j];
        /* v = k pi/2 + t, |t| <= pi/4: pi/2 in 33 + 53 bits (fdlibm's), k v's
         * nearest integer (the shifter), k pi/2's first part exact */
        double k = VM_FMA(v, 0x1.45f306dc9c883p-1, VM_SHIFTER) - VM_SHIFTER;
        double t = VM_FMA(k, -1.57079632673412561417e+00, v);
        t = VM_FMA(k, -6.07710050650619224932e-11, t);
        double z = t * t, ps = -1.0 / 39916800, pc = 1.0 / 479001600;
        ps = VM_FMA(ps, z, 1.0 / 362880), ps = VM_FMA(ps, z, -1.0 / 5040), ps = VM_FMA(ps, z, 1.0 / 120);
        ps = VM_FMA(ps, z, -1.0 / 6);
        pc = VM_FMA(pc, z, -1.0 / 3628800), pc = VM_FMA(pc, z, 1.0 / 40320), pc = VM_FMA(pc, z, -1.0 / 720);
        pc = VM_FMA(pc, z, 1.0 / 24), pc = VM_FMA(pc, z, -0.5);
        double s = copysign(VM_FMA(t * z, ps, t), t), c = VM_FMA(z, pc, 1.0); /* sin(-0): -0 */
        double h = k * 0.25, q = (h - floor(h)) * 4 + (which == 1); /* the quadrant, cos one on */
        bool odd = q == 1 || q == 3, neg = q >= 2 && q < 4;
        double sc = odd ? c : s, tn = (odd ? -c : s) / (odd ? s : c);
        double w2 = which == 2 ? 1.0 : 0.0; /* (a select on which itself: not vectorised) */
        r[j] = w2 != 0 ? tn : neg ? -sc : sc;
        slow[j] = sl ? 1.0 : 0.0;
    }
}
__attribute__((unused)) static void vm_atan_blk(double *restrict r, double *restrict slow, const double *restrict x,
                                                const double *restrict y, int which) {
    (void)y;
    _Pragma("GCC unroll 1") for (int j = 0; j < VM_B; j++) {
        double v = x[j], av = fabs(v);
        /* asin: atan(|x| / sqrt(1 - x^2)); acos: 2 atan(sqrt((1 - x) / (1 + x))),
         * that is 2 atan((1 - x) / sqrt(1 - x^2)): x^2, 1 - x^2, 1 - x exact for
         * a float x; |x| > 1 gives NaN */
        double w2 = which == 2 ? 1.0 : 0.0, sq = sqrt(1 - v * v); /* (as vm_trig_blk's) */
        double p = w2 != 0 ? 1 - v : av, q = which == 0 ? 1.0 : sq;
        double a = vm_atan_pq(p, p == 0 && q == 0 ? 1.0 : q); /* acos(1) */
        r[j] = w2 != 0 ? 2 * a : copysign(a, v);
        slow[j] = v != v ? 1.0 : 0.0;
    }
}
/* e^t for t in [0, 100] (or NaN) to 1e-11: t = n ln2 + r, Taylor to r^9 in
 * Estrin's form, 2^n from the shifter's bits (64-bit adds and shifts only) */
static inline double vm_exp_small(double t) {
    double kk = VM_FMA(t, 0x1.71547652b82fep0, VM_SHIFTER), nd = kk - VM_SHIFTER;
    double r = VM_FMA(nd, -VM_LN2_LO, VM_FMA(nd, -VM_LN2_HI, t)), r2 = r * r, r4 = r2 * r2;
    double e = VM_FMA(r4 * r4, VM_FMA(r, 1.0 / 362880, 1.0 / 40320),
                      VM_FMA(r4, VM_FMA(r2, VM_FMA(r, 1.0 / 5040, 1.0 / 720), VM_FMA(r, 1.0 / 120, 1.0 / 24)),
                             VM_FMA(r2, VM_FMA(r, 1.0 / 6, 0.5), r + 1.0)));
    uint64_t n = vm_double_to_bits(kk) - vm_double_to_bits(VM_SHIFTER);
    return e * vm_bits_to_double((n + 1023) << 52);
}
/* sinh: Taylor to x^13 below 1 (7.6e-13), (e - 1/e) / 2 above; cosh: (e + 1/e) / 2 */
__attribute__((unused)) static void vm_hyp_blk(double *restrict r, double *restrict slow, const double *restrict x,
                                                const double *restrict y, int which) {
    (void)y;
    _Pragma("GCC unroll 1") for (int j = 0; j < VM_B; j++) {
        double v = x[j], av = fabs(v);
        av = av > 100 ? 100 : av; /* beyond float's range, e stays finite */
        double e = vm_exp_small(av), ie = 1 / e, z = av * av, z2 = z * z;
        double p = VM_FMA(z2 * z2, VM_FMA(z, 1.0 / 6227020800, 1.0 / 39916800),
                          VM_FMA(z2, VM_FMA(z, 1.0 / 362880, 1.0 / 5040), VM_FMA(z, 1.0 / 120, 1.0 / 6)));
        double sh = av < 1 ? VM_FMA(av * z, p, av) : 0.5 * (e - ie);
        r[j] = which ? 0.5 * (e + ie) : copysign(sh, v);
        slow[j] = v != v ? 1.0 : 0.0;
    }
}
__attribute__((unused)) static void vm_atan2_blk(double *restrict r, double *restrict slow, const double *restrict x,
                                                const double *restrict y, int which) {
    (void)which;
    _Pragma("GCC unroll 1") for (int j = 0; j < VM_B; j++) { /* atan2(x, y): x the ordinate */
        double ay = fabs(x[j]), ax = fabs(y[j]);
        bool sw = ay > ax;
        double num = sw ? ax : ay, den = sw ? ay : ax;
        double a = vm_atan_pq(num == den ? 1.0 : num, num == den ? 1.0 : den); /* 0 / 0, inf / inf */
        a = num == 0 ? 0.0 : a;
        a = sw ? 0x1.921fb54442d18p0 - a : a;
        a = copysign(1.0, y[j]) < 0 ? 0x1.921fb54442d18p1 - a : a;
        r[j] = copysign(a, x[j]);
        slow[j] = x[j] != x[j] || y[j] != y[j] ? 1.0 : 0.0;
    }
}
/* remainder from fmod's m, torch's rule: y added (in float) where the signs differ */
static inline float vm_rem_adjust(float m, float y) { return m != 0 && (y < 0) != (m < 0) ? m + y : m; }
/* fmod exact: below 2^24 the quotient rounded to double does not cross an
 * integer, and x - trunc(q) y is a float; remainder adds y in float where the
 * signs differ, as torch's */
__attribute__((unused)) static void vm_fmod_blk(double *restrict r, double *restrict slow, const double *restrict x,
                                                const double *restrict y, int which) {
    _Pragma("GCC unroll 1") for (int j = 0; j < VM_B; j++) {
        double q = x[j] / y[j];
        bool sl = !(fabs(q) < 0x1p24 && fabs(y[j]) < __builtin_inf());
        double m = copysign(fabs(VM_FMA(-trunc(sl ? 0.0 : q), y[j], x[j])), x[j]);
        r[j] = which ? (double)vm_rem_adjust((float)m, (float)y[j]) : m;
        slow[j] = sl ? 1.0 : 0.0;
    }
}
static inline float vm_slow_f(int fn, int which, float x, float y) {
    switch (fn) {
    case VM_TRIG: return which == 0 ? sinf(x) : which == 1 ? cosf(x) : tanf(x);
    case VM_ATAN: return which == 0 ? atanf(x) : which == 1 ? asinf(x) : acosf(x);
    case VM_HYP: return which ? coshf(x) : sinhf(x);
    case VM_ATAN2: return atan2f(x, y);
    default: return which ? vm_rem_adjust(fmodf(x, y), y) : fmodf(x, y);
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#define VM_NOCLONE __attribute__((noclone)) /* one copy, not one per caller's constants */
#else
#define VM_NOCLONE
#endif
/* o = fn(a) or fn(a, b) (b NULL: unary) for n floats; o may be a or b */
__attribute__((noinline, unused)) VM_NOCLONE static void vm_map16(float *o, const float *a, const float *b, int64_t n,
                                                                  int fn, int which) {
    static const vm_blk_fn blk[] = {vm_trig_blk, vm_atan_blk, vm_hyp_blk, vm_atan2_blk, vm_fmod_blk};
    vm_blk_fn f = blk[fn];
    for (int64_t i = 0; i < n; i += VM_B) {
        int m = n - i < VM_B ? (int)(n - i) : VM_B;
        float xa[VM_B], ya[VM_B], ro[VM_B];
        const float *xs = a + i, *ys = b ? b + i : xs;
        float *os = o + i;
        if (m < VM_B) { /* the tail, through a block of zeros */
            memset(xa, 0, sizeof xa), memset(ya, 0, sizeof ya);
            memcpy(xa, xs, (size_t)m * sizeof *xa), memcpy(ya, ys, (size_t)m * sizeof *ya);
            xs = xa, ys = ya, os = ro;
        }
        double x[VM_B], y[VM_B], r[VM_B], slow[VM_B], any = 0;
        for (int j = 0; j < VM_B; j++) x[j] = xs[j], y[j] = ys[j];
        f(r, slow, x, y, which);
        for (int j = 0; j < VM_B; j++) os[j] = (float)r[j], any += slow[j];
        if (any != 0)
            for (int j = 0; j < m; j++)
                if (slow[j] != 0) os[j] = vm_slow_f(fn, which, (float)x[j], (float)y[j]);
        if (m < VM_B) memcpy(o + i, ro, (size_t)m * sizeof *ro);
    }
}

/* o = log2 (which 0) or log10 (which 1) of n floats: one copy for both */
__attribute__((noinline, unused)) VM_NOCLONE static void vm_logbf_n(float *o, const float *a, int64_t n, int which) {
    double kl = which ? 0x1.bcb7b1526e50ep-2 : 0x1.71547652b82fep0, ke = which ? 0x1.34413509f79ffp-2 : 1.0;
    for (int64_t i = 0; i < n; i++) o[i] = vm_logbf(a[i], kl, ke);
}

#undef exp
#undef log
#undef log1p
#undef expm1
#undef erf
#undef tanh
#define exp(x) _Generic((x), float: vm_expf, default: vm_exp_d)(x)
#define log(x) _Generic((x), float: vm_logf, default: vm_log_d)(x)
#define log1p(x) _Generic((x), float: vm_log1pf, default: vm_log1p_d)(x)
#define expm1(x) _Generic((x), float: vm_expm1f, default: vm_expm1_d)(x)
#define erf(x) _Generic((x), float: vm_erff, default: vm_erf_d)(x)
#define tanh(x) _Generic((x), float: vm_tanhf, default: vm_tanh_d)(x)

#endif
