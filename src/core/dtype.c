/* dtype.c: the dtype tables, PyTorch's type promotion, and conversions. */
#include "core.h"
#include <math.h>

#define X(E, name, ctype, comp, kind) [E] = sizeof(ctype),
const size_t c10_elsize[CT_NUM_DTYPES] = {
#include "dtypes.def"
};
#undef X
#define X(E, name, ctype, comp, kind) [E] = #name,
const char *const c10_dtype_names[CT_NUM_DTYPES] = {
#include "dtypes.def"
};
#undef X
#define X(E, name, ctype, comp, kind) [E] = KIND_##kind,
const c10_kind c10_dtype_kind[CT_NUM_DTYPES] = {
#include "dtypes.def"
};
#undef X

/* How PyTorch's C++ messages spell dtypes (toString(ScalarType)). */
const char *c10_dtype_cname(ct_dtype d) {
    static const char *const names[CT_NUM_DTYPES] = {
        "Bool", "Byte", "Char", "Short", "Int", "Long", "Half", "BFloat16", "Float", "Double"};
    return c10_dtype_valid((int)d) ? names[d] : "invalid dtype";
}

const char *c10_dtype_legacy_name(ct_dtype d) {
    static const char *const names[CT_NUM_DTYPES] = {
        "CPUBoolType",       "torch.ByteTensor",  "torch.CharTensor", "torch.ShortTensor", "torch.IntTensor",
        "torch.LongTensor",  "torch.HalfTensor",  "CPUBFloat16Type",  "torch.FloatTensor", "torch.DoubleTensor"};
    return c10_dtype_valid((int)d) ? names[d] : "invalid dtype";
}

const char *c10_dtype_cpp_name(ct_dtype d) {
    static const char *const names[CT_NUM_DTYPES] = {"bool", "unsigned char", "signed char", "short int", "int",
                                                     "long int", "c10::Half", "c10::BFloat16", "float", "double"};
    return c10_dtype_valid((int)d) ? names[d] : "invalid dtype";
}

const char *ct_dtype_name(ct_dtype d) {
    return c10_dtype_valid((int)d) ? c10_dtype_names[d] : NULL;
}
size_t ct_dtype_size(ct_dtype d) { return c10_dtype_valid((int)d) ? c10_elsize[d] : 0; }
bool ct_dtype_is_floating(ct_dtype d) { return c10_dtype_valid((int)d) && c10_is_float(d); }

/* PyTorch's promoteTypes table (c10/core/ScalarType.h), restricted to our dtypes:
 * b1 u1 i1 i2 i4 i8 f2 bf f4 f8. */
ct_dtype c10_promote(ct_dtype a, ct_dtype b) {
    enum { b1 = CT_BOOL, u1 = CT_UINT8, i1 = CT_INT8, i2 = CT_INT16, i4 = CT_INT32, i8 = CT_INT64,
           f2 = CT_FLOAT16, bf = CT_BFLOAT16, f4 = CT_FLOAT32, f8 = CT_FLOAT64 };
    static const unsigned char table[CT_NUM_DTYPES][CT_NUM_DTYPES] = {
        /*        b1  u1  i1  i2  i4  i8  f2  bf  f4  f8 */
        /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8},
        /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8},
        /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8},
        /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8},
        /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8},
        /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8},
        /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8},
        /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8},
        /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8},
        /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
    };
    return (ct_dtype)table[a][b];
}

ct_dtype ct_promote_types(ct_dtype a, ct_dtype b) {
    if (!c10_dtype_valid((int)a) || !c10_dtype_valid((int)b)) {
        c10_error("promote_types: invalid dtype (%d, %d)", (int)a, (int)b);
        return CT_FLOAT32;
    }
    return c10_promote(a, b);
}

/* ---- conversions: one loop per (destination, source) pair, from dtypes.def ---- */

/* Every element goes through the source's compute type, then to the
 * destination's storage type; the 16-bit floats go through float. */
#define LOAD_CT_BOOL(p) (*(const bool *)(p))
#define LOAD_CT_UINT8(p) (*(const uint8_t *)(p))
#define LOAD_CT_INT8(p) (*(const int8_t *)(p))
#define LOAD_CT_INT16(p) (*(const int16_t *)(p))
#define LOAD_CT_INT32(p) (*(const int32_t *)(p))
#define LOAD_CT_INT64(p) (*(const int64_t *)(p))
#define LOAD_CT_FLOAT16(p) c10_h2f(*(const uint16_t *)(p))
#define LOAD_CT_BFLOAT16(p) c10_bf2f(*(const uint16_t *)(p))
#define LOAD_CT_FLOAT32(p) (*(const float *)(p))
#define LOAD_CT_FLOAT64(p) (*(const double *)(p))
#define STORE_CT_BOOL(p, v) (*(bool *)(p) = (v) != 0)
#define STORE_CT_UINT8(p, v) (*(uint8_t *)(p) = (uint8_t)(int64_t)(v))
#define STORE_CT_INT8(p, v) (*(int8_t *)(p) = (int8_t)(int64_t)(v))
#define STORE_CT_INT16(p, v) (*(int16_t *)(p) = (int16_t)(int64_t)(v))
#define STORE_CT_INT32(p, v) (*(int32_t *)(p) = (int32_t)(int64_t)(v))
#define STORE_CT_INT64(p, v) (*(int64_t *)(p) = (int64_t)(v))
#define STORE_CT_FLOAT16(p, v) (*(uint16_t *)(p) = c10_f2h((float)(v)))
#define STORE_CT_BFLOAT16(p, v) (*(uint16_t *)(p) = c10_f2bf((float)(v)))
#define STORE_CT_FLOAT32(p, v) (*(float *)(p) = (float)(v))
#define STORE_CT_FLOAT64(p, v) (*(double *)(p) = (double)(v))

/* Float to integer conversion of out-of-range values is undefined in C; give
 * what PyTorch's static_cast gives on x86: int64 through a 64-bit convert (NaN
 * and overflow: INT64_MIN), the narrower types through a 32-bit one (INT32_MIN)
 * and then their low bits. */
static inline double sane(double v, ct_dtype d) {
    if (d == CT_INT64)
        return (v != v || v >= 9.2233720368547758e18 || v < -9.2233720368547758e18) ? -9.2233720368547758e18 : v;
    return (v != v || v >= 2147483648.0 || v <= -2147483649.0) ? -2147483648.0 : v;
}

#define CONV_LOOP(D, S)                                                          \
    static void conv_##D##_##S(void *dst, const void *src, int64_t n) {          \
        const char *s = src;                                                     \
        char *d = dst;                                                           \
        const int64_t ss = (int64_t)c10_elsize[S], ds = (int64_t)c10_elsize[D];  \
        for (int64_t i = 0; i < n; i++) {                                        \
            if (c10_dtype_kind[S] != KIND_F) {                                   \
                int64_t v_ = (int64_t)LOAD_##S(s + i * ss);                      \
                STORE_##D(d + i * ds, v_);                                       \
            } else {                                                             \
                double v_ = (double)LOAD_##S(s + i * ss);                        \
                if (c10_dtype_kind[D] != KIND_F && D != CT_BOOL) v_ = sane(v_, D); \
                STORE_##D(d + i * ds, v_);                                       \
            }                                                                    \
        }                                                                        \
    }
#define X(E, name, ctype, comp, kind) CONV_ROW(E)
#define CONV_ROW(D)                                                              \
    CONV_LOOP(D, CT_BOOL) CONV_LOOP(D, CT_UINT8) CONV_LOOP(D, CT_INT8)           \
    CONV_LOOP(D, CT_INT16) CONV_LOOP(D, CT_INT32) CONV_LOOP(D, CT_INT64)         \
    CONV_LOOP(D, CT_FLOAT16) CONV_LOOP(D, CT_BFLOAT16) CONV_LOOP(D, CT_FLOAT32)  \
    CONV_LOOP(D, CT_FLOAT64)
#include "dtypes.def"
#undef X
#undef CONV_ROW

typedef void (*conv_fn)(void *, const void *, int64_t);
#define CONV_ENTRY(D, S) [S] = conv_##D##_##S
#define X(E, name, ctype, comp, kind)                                            \
    [E] = {CONV_ENTRY(E, CT_BOOL), CONV_ENTRY(E, CT_UINT8), CONV_ENTRY(E, CT_INT8), \
           CONV_ENTRY(E, CT_INT16), CONV_ENTRY(E, CT_INT32), CONV_ENTRY(E, CT_INT64), \
           CONV_ENTRY(E, CT_FLOAT16), CONV_ENTRY(E, CT_BFLOAT16),                \
           CONV_ENTRY(E, CT_FLOAT32), CONV_ENTRY(E, CT_FLOAT64)},
static const conv_fn conv_table[CT_NUM_DTYPES][CT_NUM_DTYPES] = {
#include "dtypes.def"
};
#undef X

void c10_convert(void *dst, ct_dtype d, const void *src, ct_dtype s, int64_t n) {
    if (d == s) memcpy(dst, src, (size_t)n * c10_elsize[d]);
    else if (d == CT_FLOAT32 && (s == CT_FLOAT16 || s == CT_BFLOAT16)) /* the kernels' widening: vectorised */
        c10_half_to_float_n(dst, src, s == CT_BFLOAT16, n);
    else if (s == CT_FLOAT32 && (d == CT_FLOAT16 || d == CT_BFLOAT16))
        c10_float_to_half_n(dst, src, d == CT_BFLOAT16, n);
    else conv_table[d][s](dst, src, n);
}

double c10_load_double(const void *p, ct_dtype d) {
    double v;
    conv_table[CT_FLOAT64][d](&v, p, 1);
    return v;
}

void c10_store_double(void *p, ct_dtype d, double v) { conv_table[d][CT_FLOAT64](p, &v, 1); }
