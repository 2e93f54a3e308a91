/*
 * half.c: IEEE binary16 (float16) and bfloat16 <-> float32, by bit manipulation.
 *
 * float -> 16 bits rounds to nearest, ties to even, as c10::Half and
 * c10::BFloat16 do; overflow gives infinity, results below the smallest
 * subnormal round to (signed) zero, subnormals are exact. A NaN stays a NaN
 * (quiet, sign kept).
 */
#include "core.h"
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

static inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

CT_INTERNAL uint16_t c10_f2h(float f) {
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) { /* inf or NaN */
        if (a == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
    }
    if (a >= 0x477ff000u) /* >= 65520: rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: subnormal or zero in half */
        if (a < 0x33000000u) return sign; /* below 2^-25: rounds to zero (ties too) */
        uint32_t e = a >> 23;                 /* 102 .. 112 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;            /* 14 .. 24: value = m * 2^(e-150) */
        uint32_t q = m >> shift;              /* in units of 2^-24 */
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias, round the 13 dropped bits to nearest even */
    uint32_t r = a - ((uint32_t)(127 - 15) << 23);
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

CT_INTERNAL float c10_bf2f(uint16_t b) { return u2f((uint32_t)b << 16); }

CT_INTERNAL uint16_t c10_f2bf(float f) { return c10_f2bf_bits(f2u(f)); }

/* n at a time, the results of c10_h2f / c10_bf2f and c10_f2h / c10_f2bf:
 * F16C's conversions where the CPU has them, bfloat16 in branch-free loops the
 * compiler vectorises. */
void c10_half_to_float_n(float *d, const uint16_t *s, bool bf, int64_t n) {
    int64_t i = 0;
    if (bf) {
#ifdef __AVX2__
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, c10_bf2f_x8(s + i));
#endif
        uint32_t *restrict u = (uint32_t *)d;
        for (; i < n; i++) u[i] = (uint32_t)s[i] << 16;
        return;
    }
#ifdef __AVX512F__
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
#endif
#ifdef __F16C__
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
#endif
    for (; i < n; i++) d[i] = c10_h2f(s[i]);
}

void c10_float_to_half_n(uint16_t *d, const float *s, bool bf, int64_t n) {
    int64_t i = 0;
    if (bf) {
#ifdef __AVX2__
        for (; i + 8 <= n; i += 8) c10_f2bf_x8(d + i, _mm256_loadu_ps(s + i));
#endif
        const uint32_t *restrict u = (const uint32_t *)s;
        for (; i < n; i++) d[i] = c10_f2bf_bits(u[i]);
        return;
    }
#ifdef __AVX512F__
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
#endif
#ifdef __F16C__
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) d[i] = c10_f2h(s[i]);
}

CT_API float ct_half_to_float(uint16_t h) { return c10_h2f(h); }
CT_API uint16_t ct_float_to_half(float f) { return c10_f2h(f); }
CT_API float ct_bfloat16_to_float(uint16_t b) { return c10_bf2f(b); }
CT_API uint16_t ct_float_to_bfloat16(float f) { return c10_f2bf(f); }
