/* vmath.h: the math functions elementwise kernels call, type-generic over float
 * and double (tgmath), with branch-free float versions of the hot ones (exp,
 * log, tanh) that the compiler vectorises: libm's are scalar calls. They are
 * Cephes' polynomials (as PyTorch's Sleef and AVX2 kernels use), accurate to
 * about 1 ulp over the whole range, with IEEE behaviour for inf and NaN. */
#ifndef CT_VMATH_H
#define CT_VMATH_H
#include <stdint.h>
#include <string.h>
#include <tgmath.h>

static inline float vm_bits_to_float(int32_t i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
static inline int32_t vm_float_to_bits(float f) {
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i;
}

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

static inline double vm_exp_d(double x) { return (exp)(x); }
static inline double vm_log_d(double x) { return (log)(x); }
static inline double vm_tanh_d(double x) { return (tanh)(x); }

#undef exp
#undef log
#undef tanh
#define exp(x) _Generic((x), float: vm_expf, default: vm_exp_d)(x)
#define log(x) _Generic((x), float: vm_logf, default: vm_log_d)(x)
#define tanh(x) _Generic((x), float: vm_tanhf, default: vm_tanh_d)(x)

#endif
