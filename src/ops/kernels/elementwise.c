/* elementwise.c: the UNARY and BINARY rows of ops.def: their kernels, one per
 * compute dtype, stamped out from the row's expression, and their forwards. */
#include "ops/ops.h"
#include "ops/kernels/vmath.h"
#include <math.h>
#include <stdatomic.h>
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

/* The rows' expressions are stamped out for every dtype, so some comparisons
 * are constant for some types (x < 0 on unsigned, x == -1 on bool): fine here. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wtautological-constant-out-of-range-compare"
#pragma clang diagnostic ignored "-Wtautological-unsigned-zero-compare"
#pragma clang diagnostic ignored "-Wtautological-constant-compare"
#pragma clang diagnostic ignored "-Wint-in-bool-context"
#pragma clang diagnostic ignored "-Wbool-operation"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wbool-compare"
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
#endif

typedef float f32;
typedef double f64;
typedef int8_t i8;
typedef int16_t i16;
typedef int32_t i32;
typedef int64_t i64;
typedef uint8_t u8;
typedef bool b8;

/* Integer division by zero is an error in PyTorch; kernels cannot fail, so
 * they raise a flag that the forward checks. (Negative integer powers are not
 * errors for tensor exponents: torch gives 1, +-1 or 0; fwd_binary rejects a
 * negative scalar exponent, as torch does.) */
static atomic_int int_fault;
enum { FAULT_ZERO_DIV = 1 };
static inline int64_t fault(int kind) {
    atomic_store_explicit(&int_fault, kind, memory_order_relaxed);
    return 0;
}

/* ---- scalar helpers used by the expressions in ops.def ---- */
#define sign_(x) ((x) > 0 ? (T)1 : (x) < 0 ? (T)-1 : (T)0) /* NaN -> 0, as torch */
/* gelu's erf: float arithmetic for float (2.2 ulp of erf; 1 + erf rounds at 1) */
#define gelu_erf(x) _Generic((x), float: vm_erff_fast, default: vm_erf_d)(x)
#define gelu_(x) ((T)0.5 * (x) * (1 + gelu_erf((x) * (T)M_SQRT1_2)))
/* min(max(x, lo), hi), torch's clamp order (lo > hi gives hi); NaN stays NaN */
#define HT_LO C10_SCALAR_AS(T, s[0])
#define HT_HI C10_SCALAR_AS(T, s[1])
#define HARDTANH_(x) (((x) < HT_LO ? HT_LO : (x)) > HT_HI ? HT_HI : ((x) < HT_LO ? HT_LO : (x)))
#define gelu_tanh_(x) ((T)0.5 * (x) * (1 + tanh((T)(M_2_SQRTPI * M_SQRT1_2) * VM_FMA((T)0.044715, (x) * (x) * (x), x)))) /* torch's build fuses it */
#define softplus_(x, beta, th) ((x) * (beta) > (th) ? (x) : _Generic((x), float: vm_log1p_expf, default: vm_log1p_exp_d)((x) * (beta)) / (beta))
#define nan_to_num_(x, nan, pinf, ninf) ((x) != (x) ? (nan) : (x) == (T)INFINITY ? (pinf) : (x) == -(T)INFINITY ? (ninf) : (x))
/* NaN wins; otherwise std::max / std::min as torch's scalar loop: x on a tie (-0 vs 0) */
#define fmaximum_(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) < (y) ? (y) : (x))
#define fminimum_(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) < (x) ? (y) : (x))
#define idiv_trunc_(x, y) ((y) == 0 ? (T)fault(FAULT_ZERO_DIV) : (y) == -1 ? (T)(0 - (uint64_t)(x)) : (T)((x) / (y)))
#define idiv_floor_(x, y) ((y) == 0 ? (T)fault(FAULT_ZERO_DIV) : (T)ifloordiv((int64_t)(x), (int64_t)(y)))
#define iremainder_(x, y) ((y) == 0 ? (T)fault(FAULT_ZERO_DIV) : (T)iremainder((int64_t)(x), (int64_t)(y)))
#define ifmod_(x, y) ((y) == 0 ? (T)fault(FAULT_ZERO_DIV) : (y) == -1 ? (T)0 : (T)((x) % (y)))
#define ipow_(x, y) ((T)ipow((int64_t)(x), (int64_t)(y)))

static inline int64_t ifloordiv(int64_t a, int64_t b) {
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t iremainder(int64_t a, int64_t b) {
    if (b == -1) return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t ipow(int64_t base, int64_t e) {
    if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0; /* torch's powi */
    uint64_t result = 1, b = (uint64_t)base;
    while (e) {
        if (e & 1) result *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)result;
}
#define FLOOR_DIV_BODY(T, a, b)                                                  \
    {                                                                            \
        if (b == 0) return a / b;                                                \
        T mod = fmod(a, b), div = (a - mod) / b;                                 \
        if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;                         \
        if (div == 0) return copysign((T)0, a / b);                              \
        T fl = floor(div);                                                       \
        return div - fl > (T)0.5 ? fl + 1 : fl;                                  \
    }
static inline float fdiv_floor_f(float a, float b) FLOOR_DIV_BODY(float, a, b)
static inline double fdiv_floor_d(double a, double b) FLOOR_DIV_BODY(double, a, b)
#define fdiv_floor_(x, y) _Generic((x), float: fdiv_floor_f, default: fdiv_floor_d)(x, y)
#define FREM_BODY(T, a, b)                                                       \
    {                                                                            \
        T m = fmod(a, b);                                                        \
        return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;                     \
    }
static inline float fremainder_f(float a, float b) FREM_BODY(float, a, b)
static inline double fremainder_d(double a, double b) FREM_BODY(double, a, b)
#define fremainder_(x, y) _Generic((x), float: fremainder_f, default: fremainder_d)(x, y)
/* x > 0 ? x : a expm1(x), with expm1 taken on every element (of x, or 0 where
 * x > 0, NaN passing) so that the loop vectorises: on one arm only it did not */
#define ELU_BODY(T, x, a)                                                        \
    {                                                                            \
        T e = expm1(x > 0 ? (T)0 : x);                                           \
        return x > 0 ? x : a * e;                                                \
    }
static inline float elu_f(float x, float a) ELU_BODY(float, x, a)
static inline double elu_d(double x, double a) ELU_BODY(double, x, a)
#define elu_(x, a) _Generic((x), float: elu_f, default: elu_d)(x, a)

/* ---- kernel stamps ---- */
#define UK(name, TT, OT, expr)                                                   \
    static void k_##name##_##TT(int64_t n, char **p, const double *s) {          \
        typedef TT T;                                                            \
        OT *restrict o = (OT *)p[0];                                             \
        const T *restrict a = (const T *)p[1];                                   \
        (void)s;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                        \
            T x = a[i];                                                          \
            (void)x;                                                             \
            o[i] = (OT)(expr);                                                   \
        }                                                                        \
    }
#define BK(name, TT, OT, expr) BKA(, name, TT, OT, expr)
#define BKA(ATTR, name, TT, OT, expr) /* ATTR: the kernel's attributes */        \
    ATTR static void k_##name##_##TT(int64_t n, char **p, const double *s) {     \
        typedef TT T;                                                            \
        OT *restrict o = (OT *)p[0];                                             \
        const T *restrict a = (const T *)p[1], *restrict b = (const T *)p[2];    \
        (void)s;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                        \
            T x = a[i], y = b[i];                                                \
            o[i] = (OT)(expr);                                                   \
        }                                                                        \
    }
#define INTS(STAMP, name, OUT, e)                                                \
    STAMP(name, i8, OUT(i8), e) STAMP(name, i16, OUT(i16), e) STAMP(name, i32, OUT(i32), e) \
    STAMP(name, i64, OUT(i64), e) STAMP(name, u8, OUT(u8), e)
#define FLOATS(STAMP, name, OUT, e) STAMP(name, f32, OUT(f32), e) STAMP(name, f64, OUT(f64), e)
#define SAME(T) T
#define BOOLOUT(T) b8

/* Unary kinds: which kernels a row gets. */
#define U_FLOAT(name, fe, ie) FLOATS(UK, name, SAME, fe)
#define U_ALL(name, fe, ie) FLOATS(UK, name, SAME, fe) INTS(UK, name, SAME, ie)
#define U_ROUND(name, fe, ie) FLOATS(UK, name, SAME, fe)
#define U_TEST(name, fe, ie) FLOATS(UK, name, BOOLOUT, fe) INTS(UK, name, BOOLOUT, ie) UK(name, b8, b8, ie)
#define UNARY(name, node, kind, fe, ie, d, sv) U_##kind(name, fe, ie)
#define BINARY(...)
#define OP(...)
#include "ops/ops.def"
#undef UNARY

/* Binary kinds. */
#define B_ARITH(name, fe, ie) FLOATS(BK, name, SAME, fe) INTS(BK, name, SAME, ie) BK(name, b8, b8, ie)
#define B_DIV(name, fe, ie) FLOATS(BK, name, SAME, fe)
#define B_FLOAT2(name, fe, ie) FLOATS(BK, name, SAME, fe)
#define B_CMP(name, fe, ie) FLOATS(BK, name, BOOLOUT, fe) INTS(BK, name, BOOLOUT, ie) BK(name, b8, b8, ie)
#define B_LOGIC B_CMP
#define B_BITS(name, fe, ie) INTS(BK, name, SAME, ie) BK(name, b8, b8, ie)
#undef BINARY
#define UNARY(...)
#define BINARY(name, node, kind, fe, ie, ds, dother, sv) B_##kind(name, fe, ie)
#include "ops/ops.def"
#undef UNARY
#undef BINARY
#undef OP

/* ---- the kernel table and each row's kind ---- */
enum { K_FLOAT, K_ALL, K_ROUND, K_TEST, K_ARITH, K_DIV, K_FLOAT2, K_CMP, K_LOGIC, K_BITS };

#define E_FLOATS(name) [CT_FLOAT32] = k_##name##_f32, [CT_FLOAT64] = k_##name##_f64
#define E_INTS(name)                                                             \
    [CT_INT8] = k_##name##_i8, [CT_INT16] = k_##name##_i16, [CT_INT32] = k_##name##_i32, \
    [CT_INT64] = k_##name##_i64, [CT_UINT8] = k_##name##_u8
#define T_FLOAT(name) {E_FLOATS(name)}
#define T_ALL(name) {E_FLOATS(name), E_INTS(name)}
#define T_ROUND(name) {E_FLOATS(name)}
#define T_TEST(name) {E_FLOATS(name), E_INTS(name), [CT_BOOL] = k_##name##_b8}
#define T_ARITH T_TEST
#define T_DIV T_FLOAT
#define T_FLOAT2 T_FLOAT
#define T_CMP T_TEST
#define T_LOGIC T_TEST
#define T_BITS(name) {E_INTS(name), [CT_BOOL] = k_##name##_b8}

/* Hand-written kernels that replace a row's stamped one for a dtype: exp and
 * sigmoid over vmath.h's array functions (AVX-512 bodies where there are: 2x
 * the stamped loop of vm_expf, 3x for double). */
#define HAND_KERNELS(X)                                                          \
    X(exp, f32, CT_FLOAT32, vm_expf_n) X(exp, f64, CT_FLOAT64, vm_exp_d_n)        \
    X(sigmoid, f32, CT_FLOAT32, vm_sigmoidf_n)
#define HAND_KERNEL(name, TT, dt, fn)                                                \
    static void h_##name##_##TT(int64_t n, char **p, const double *s) {          \
        (void)s;                                                                 \
        fn((TT *)p[0], (const TT *)p[1], n);                                     \
    }
HAND_KERNELS(HAND_KERNEL)
static void h_pow_f32(int64_t n, char **p, const double *s) {
    (void)s;
    vm_powf_n((float *)p[0], (const float *)p[1], (const float *)p[2], 0, n);
}
/* float32 ** a number with the exponent kept in double (s[0]): torch's scalar
 * loop, std::pow(float, double), which runs fewer than 16 elements (two AVX2
 * vectors) alone; its vector loop rounds the exponent to float (so does
 * h_pow_f32), and ctorch takes that from 16 elements on (torch's last n % 16
 * elements of a contiguous run would take double again) */
static void h_pows_f32(int64_t n, char **p, const double *s) { vm_powf_n((float *)p[0], (const float *)p[1], NULL, s[0], n); }

/* float32 rows through vmath.h's vm_map16 (evaluated in double, 16 at a
 * time), and log2 / log10 through vm_logbf_n. No fused 16-bit kernels for
 * these: 16-bit inputs take the engine's conversions and these kernels (the
 * library's size). */
#define MATH_ROWS(X)                                                             \
    X(sin, VM_TRIG, 0) X(cos, VM_TRIG, 1) X(tan, VM_TRIG, 2) X(atan, VM_ATAN, 0)   \
    X(asin, VM_ATAN, 1) X(acos, VM_ATAN, 2) X(sinh, VM_HYP, 0) X(cosh, VM_HYP, 1)
#define MATH2_ROWS(X) X(atan2, VM_ATAN2, 0) X(fmod, VM_FMOD, 0) X(remainder, VM_FMOD, 1)
#define MATH_K(name, fn, w)                                                      \
    static void m_##name##_f32(int64_t n, char **p, const double *s) {          \
        (void)s;                                                                 \
        vm_map16((float *)p[0], (const float *)p[1], NULL, n, fn, w);            \
    }
#define MATH2_K(name, fn, w)                                                     \
    static void m_##name##_f32(int64_t n, char **p, const double *s) {          \
        (void)s;                                                                 \
        vm_map16((float *)p[0], (const float *)p[1], (const float *)p[2], n, fn, w); \
    }
MATH_ROWS(MATH_K)
MATH2_ROWS(MATH2_K)
#define LOGB_ROWS(X) X(log2, 0) X(log10, 1)
#define LOGB_K(name, w)                                                          \
    static void m_##name##_f32(int64_t n, char **p, const double *s) {          \
        (void)s;                                                                 \
        vm_logbf_n((float *)p[0], (const float *)p[1], n, w);                    \
    }
LOGB_ROWS(LOGB_K)

/* ---- float16 and bfloat16: fused kernels ----
 * 16-bit floats compute in float32 (torch's opmath). Through the float32
 * kernel, the engine would widen every input step of 1,024 elements into a
 * buffer, run the kernel over the buffers and narrow its output back: three
 * passes through L1 per step, and half the bandwidth of float32. These kernels
 * take the 16-bit arrays themselves, VB elements at a time: widened into a
 * block that stays in registers or L1, the row's float expression (or the
 * float32 hand kernel's array function), narrowed once. The same float
 * results, rounded once the same way: bit for bit the old path.
 * The rows that get them: FUSED_ROWS, and every row with a float32 hand
 * kernel. Others, and 16-bit inputs with a bool or float32 result, keep the
 * float32 kernel and the engine's conversions. */
#define FUSED_ROWS(X) X(add) X(sub) X(mul) X(div) X(neg) X(abs) X(relu)
#define VB 32 /* elements per block: two AVX-512 vectors (64 took 6% off exp, and 4 KB more) */
typedef uint16_t h16;

/* VB 16-bit values to float (exact) and back, rounded to nearest even as
 * c10_float_to_half_n rounds: in registers with AVX-512 (F16C for float16),
 * else the loops half.c runs. */
static inline void widen_bf16(float *d, const h16 *s) { /* the top half of a float */
#if defined(__AVX512F__) /* gcc's vectorised form of the loop below has two shuffles more */
    for (int j = 0; j < VB; j += 16)
        _mm512_storeu_si512(d + j, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + j))), 16));
#elif defined(__AVX2__)
    for (int j = 0; j < VB; j += 8) _mm256_storeu_ps(d + j, c10_bf2f_x8(s + j));
#else
    for (int j = 0; j < VB; j++) d[j] = vm_bits_to_float((int32_t)((uint32_t)s[j] << 16));
#endif
}

static inline void narrow_bf16(h16 *d, const float *s) {
#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
    /* vcvtneps2bf16 rounds as c10_f2bf_bits does, but reads subnormal floats
     * as zeros: a block with one goes the long way */
    __mmask16 sub = 0;
    for (int j = 0; j < VB; j += 16) {
        __m512 v = _mm512_loadu_ps(s + j);
        sub |= _mm512_fpclass_ps_mask(v, 0x20);
        _mm256_storeu_si256((__m256i *)(d + j), (__m256i)_mm512_cvtneps_pbh(v));
    }
    if (sub) c10_float_to_half_n(d, s, true, VB);
#elif defined(__AVX2__)
    for (int j = 0; j < VB; j += 8) c10_f2bf_x8(d + j, _mm256_loadu_ps(s + j));
#else
    for (int j = 0; j < VB; j++) d[j] = c10_f2bf_bits((uint32_t)vm_float_to_bits(s[j]));
#endif
}

static inline void widen_f16(float *d, const h16 *s) {
#if defined(__AVX512F__)
    for (int j = 0; j < VB; j += 16) _mm512_storeu_ps(d + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + j))));
#elif defined(__F16C__)
    for (int j = 0; j < VB; j += 8) _mm256_storeu_ps(d + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + j))));
#else
    c10_half_to_float_n(d, s, false, VB);
#endif
}

static inline void narrow_f16(h16 *d, const float *s) {
#if defined(__AVX512F__)
    for (int j = 0; j < VB; j += 16)
        _mm256_storeu_si256((__m256i *)(d + j), _mm512_cvtps_ph(_mm512_loadu_ps(s + j), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
    for (int j = 0; j < VB; j += 8)
        _mm_storeu_si128((__m128i *)(d + j), _mm256_cvtps_ph(_mm256_loadu_ps(s + j), _MM_FROUND_TO_NEAREST_INT));
#else
    c10_float_to_half_n(d, s, false, VB);
#endif
}

/* A block of a row: r[j] from v[0][j] (and v[1][j]), j < VB; nin16_<row>
 * says how many inputs. */
typedef void (*block_fn)(float *r, float (*v)[VB], const double *s);
#define B16(name, fe, nin, ...)                                                  \
    enum { nin16_##name = nin };                                                 \
    static inline void b_##name(float *r, float (*v)[VB], const double *s) {     \
        typedef float T;                                                         \
        (void)s;                                                                 \
        for (int j = 0; j < VB; j++) {                                           \
            __VA_ARGS__;                                                         \
            r[j] = (T)(fe);                                                      \
        }                                                                        \
    }
#define UB(name, fe) B16(name, fe, 1, T x = v[0][j])
#define BB(name, fe) B16(name, fe, 2, T x = v[0][j], y = v[1][j])
/* every row with a float result (inline: those no kernel uses cost nothing) */
#define UNARY(name, node, kind, fe, ie, d, sv) UB16_##kind(name, fe)
#define UB16_FLOAT UB
#define UB16_ALL UB
#define UB16_ROUND UB
#define UB16_TEST(name, fe)
#define BINARY(name, node, kind, fe, ie, ds, dother, sv) BB16_##kind(name, fe)
#define BB16_ARITH BB
#define BB16_DIV BB
#define BB16_FLOAT2 BB
#define BB16_CMP(name, fe)
#define BB16_LOGIC(name, fe)
#define BB16_BITS(name, fe)
#define OP(...)
#include "ops/ops.def"
#undef UNARY
#undef BINARY
#undef OP

/* The last n < VB elements of a kernel's call: zero-padded to one block,
 * which the kernel itself computes (the padding's results are dropped). One
 * copy of this, rather than one inlined in every kernel. */
static __attribute__((noinline)) void tail16(int64_t n, char *const *p, const double *s, int nin, ew_kernel self) {
    _Alignas(64) h16 pad[3][VB] = {{0}};
    char *q[3] = {(char *)pad[0], (char *)pad[1], (char *)pad[2]};
    for (int k = 1; k <= nin; k++) memcpy(pad[k], p[k], (size_t)n * sizeof(h16));
    self(VB, q, s);
    memcpy(p[0], pad[0], (size_t)n * sizeof(h16));
}

/* The kernel body: nin inputs, VB elements a block. In place (the output is
 * an input) is fine: a block is read whole before it is written. Always
 * inlined, so that blk, a constant, is inlined into the loop. */
static inline __attribute__((always_inline)) void run16(int64_t n, char **p, const double *s, int nin, bool bf,
                                                        block_fn blk, ew_kernel self) {
    float v[2][VB], r[VB];
    h16 *out = (h16 *)p[0];
    const h16 *in[2] = {(const h16 *)p[1], nin > 1 ? (const h16 *)p[2] : NULL}; /* not reloaded after stores */
    int64_t i = 0;
    for (; i + VB <= n; i += VB) {
        for (int k = 0; k < nin; k++) bf ? widen_bf16(v[k], in[k] + i) : widen_f16(v[k], in[k] + i);
        blk(r, v, s);
        bf ? narrow_bf16(out + i, r) : narrow_f16(out + i, r);
    }
    if (i < n) {
        char *q[3] = {(char *)(out + i), (char *)(in[0] + i), nin > 1 ? (char *)(in[1] + i) : NULL};
        tail16(n - i, q, s, nin, self);
    }
}

/* The kernels: k16_<row>_f16 / _bf16 over the row's block, and over the hand
 * kernels' array functions (those of float32 rows). */
#define K16(name, TT, bf, nin, blk)                                              \
    static void k16_##name##_##TT(int64_t n, char **p, const double *s) {        \
        run16(n, p, s, nin, bf, blk, k16_##name##_##TT);                         \
    }
#define K16_BOTH(name, nin, blk) K16(name, f16, false, nin, blk) K16(name, bf16, true, nin, blk)
#define FUSED_KERNELS(name) K16_BOTH(name, nin16_##name, b_##name)
#define HAND16(name, TT, dt, fn) HAND16_##TT(name, fn)
#define HAND16_f64(name, fn)
#define HAND16_f32(name, fn)                                                     \
    static inline void hb_##name(float *r, float (*v)[VB], const double *s) {    \
        (void)s;                                                                 \
        fn(r, v[0], VB);                                                         \
    }                                                                            \
    K16_BOTH(name, 1, hb_##name)
FUSED_ROWS(FUSED_KERNELS)
HAND_KERNELS(HAND16)

/* ---- exp and sigmoid of int32 and int64: float32 results ----
 * Through the float32 kernel, the engine converts 1,024 integers at a time
 * into a buffer and then runs the kernel over it: two passes, the reads of
 * the conversion not overlapped with the kernel's work. These take the
 * integers themselves. With AVX-512, 16 at a time into registers (vcvtdq2ps,
 * vcvtqq2ps: the rounding of the C conversion) and through the row's vector
 * function, the one its float32 array function runs: bit for bit the float32
 * path, with no block in L1 and its second pass (exp of [4096, 4096] int32, 1
 * thread, ms: 5.94 -> 4.85 contiguous, 9.96 -> 8.46 as a ::2 slice; torch
 * ~600; int64 unchanged, 7.6). Otherwise IB at a time: converted into a
 * block that stays in L1 (one rounding, as c10_convert's), then the float32
 * array function. 128: as engine steps, the fastest of 32 to 1,024 (exp of
 * [4096, 4096] int32, 1 thread: 7.6 ms by 1,024, 5.2 by 128, 5.7 by 64). */
#define IB 128
#if defined(__AVX512F__) && defined(__AVX512DQ__)
/* 16 integers (the first ones of mask k) as floats */
static inline __m512 int_vec(const char *x, bool wide, __mmask16 k) {
    if (!wide) return _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(k, x));
    __m256 lo = _mm512_cvtepi64_ps(_mm512_maskz_loadu_epi64((__mmask8)k, x));
    __m256 hi = _mm512_cvtepi64_ps(_mm512_maskz_loadu_epi64((__mmask8)(k >> 8), x + 64));
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}
static inline __attribute__((always_inline)) void run_int_vec(int64_t n, char **p, bool wide, __m512 (*f)(__m512)) {
    float *o = (float *)p[0];
    const char *x = p[1];
    int64_t es = wide ? 8 : 4, i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, f(int_vec(x + i * es, wide, 0xFFFF)));
    __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
    if (k) _mm512_mask_storeu_ps(o + i, k, f(int_vec(x + i * es, wide, k)));
}
#define RUN_INT(n, p, s, wide, f32, vf) ((void)(s), run_int_vec(n, p, wide, vf))
#else
static __attribute__((noinline)) void run_int(int64_t n, char **p, const double *s, bool wide, ew_kernel f32) {
    _Alignas(64) float v[IB];
    for (int64_t i = 0; i < n; i += IB) {
        int64_t m = n - i < IB ? n - i : IB;
        if (wide)
            for (int64_t j = 0; j < m; j++) v[j] = (float)((const int64_t *)p[1])[i + j];
        else
            for (int64_t j = 0; j < m; j++) v[j] = (float)((const int32_t *)p[1])[i + j];
        char *q[2] = {(char *)((float *)p[0] + i), (char *)v};
        f32(m, q, s);
    }
}
#define RUN_INT(n, p, s, wide, f32, vf) run_int(n, p, s, wide, f32)
#endif
/* The rows that get them, with their float32 kernels and vector functions.
 * Not sqrt, rsqrt and reciprocal: int32 10% slower than the engine's two
 * passes, int64 10% faster (1 thread, [4096, 4096], by blocks of IB); log,
 * tanh and the other libm rows: no change. */
#define INT_ROWS(X) X(exp, h_exp_f32, vm_expf16) X(sigmoid, h_sigmoid_f32, vm_sigmoidf16)
#define KINT(name, f32, vf)                                                      \
    static void ki_##name##_i32(int64_t n, char **p, const double *s) { RUN_INT(n, p, s, false, f32, vf); } \
    static void ki_##name##_i64(int64_t n, char **p, const double *s) { RUN_INT(n, p, s, true, f32, vf); }
INT_ROWS(KINT)

/* pow(x, 3) and pow(x, -2) of float32 / float64 as torch computes them (x x x,
 * 1 / (x x)), with 2 (square), -1 (reciprocal), 0.5 and -0.5 (sqrt, rsqrt):
 * libm's pow on every element was 70x slower */
UK(pow3, f32, f32, x * x * x)
UK(pow3, f64, f64, x * x * x)
UK(powm2, f32, f32, 1 / (x * x))
UK(powm2, f64, f64, 1 / (x * x))

/* Activations' gradients in one pass, for the first-order backward (the
 * composite formulas' six to eleven ops took 1.6-1.8x torch's time forward
 * and backward): gelu (erf form) g (cdf(x) + x pdf(x)); silu g s (1 + x (1 -
 * s)), s = sigmoid(x); softplus (beta, threshold in s[]) g where beta x
 * exceeds the threshold, else g z / (z + 1), z = exp(beta x), as torch's */
#define GELU_GRAD_(x, g) ((g) * ((T)0.5 * (1 + gelu_erf((x) * (T)M_SQRT1_2)) + (x) * exp((T)-0.5 * (x) * (x)) * (T)(0.5 * M_2_SQRTPI * M_SQRT1_2)))
#define ACT_GRADS(T)                                                                     \
    static inline T silu_grad_##T(T x, T g) {                                            \
        T sg = 1 / (1 + exp(-x));                                                        \
        return g * sg * (1 + x * (1 - sg));                                              \
    }                                                                                    \
    static inline T softplus_grad_##T(T x, T g, T beta, T th) {                          \
        T z = exp(x * beta);                                                             \
        return x * beta > th ? g : g * z / (z + 1);                                      \
    }
ACT_GRADS(float)
ACT_GRADS(double)
#define SILU_GRAD_(x, g) _Generic((x), float: silu_grad_float, default: silu_grad_double)(x, g)
#define SOFTPLUS_GRAD_(x, g)                                                             \
    _Generic((x), float: softplus_grad_float, default: softplus_grad_double)(x, g, (T)s[0], (T)s[1])
#define ACT_GRAD_KERNELS(X) X(gelu, GELU_GRAD_) X(silu, SILU_GRAD_) X(softplus, SOFTPLUS_GRAD_)
#define ACT_GRAD_K(name, F) /* float64 small (for gradcheck more than speed) */       \
    BK(name##_grad, f32, f32, F(x, y)) BKA(COLD_CODE, name##_grad, f64, f64, F(x, y))
ACT_GRAD_KERNELS(ACT_GRAD_K)

/* The rows' stamped kernels, then the hand-written ones over them. */
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Winitializer-overrides"
#elif defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#endif
static const KernelTable kernels[OP_COUNT] = {
#define UNARY(name, node, kind, fe, ie, d, sv) [OP_##name] = T_##kind(name),
#define BINARY(name, node, kind, fe, ie, ds, dother, sv) [OP_##name] = T_##kind(name),
#define OP(...)
#include "ops/ops.def"
#undef UNARY
#undef BINARY
#undef OP
#define HAND_ENTRY(name, TT, dt, fn) [OP_##name][dt] = h_##name##_##TT,
    HAND_KERNELS(HAND_ENTRY)
    [OP_pow][CT_FLOAT32] = h_pow_f32,
#define MATH_ENTRY(name, fn, w) [OP_##name][CT_FLOAT32] = m_##name##_f32,
    MATH_ROWS(MATH_ENTRY) MATH2_ROWS(MATH_ENTRY)
#define LOGB_ENTRY(name, w) [OP_##name][CT_FLOAT32] = m_##name##_f32,
    LOGB_ROWS(LOGB_ENTRY)
#define ENTRIES16(name) [OP_##name][CT_FLOAT16] = k16_##name##_f16, [OP_##name][CT_BFLOAT16] = k16_##name##_bf16,
#define HAND16_ENTRY(name, TT, dt, fn) HAND16_ENTRY_##TT(name)
#define HAND16_ENTRY_f32 ENTRIES16
#define HAND16_ENTRY_f64(name)
#define KINT_ENTRY(name, f32, vf) [OP_##name][CT_INT32] = ki_##name##_i32, [OP_##name][CT_INT64] = ki_##name##_i64,
    FUSED_ROWS(ENTRIES16)
    HAND_KERNELS(HAND16_ENTRY)
    INT_ROWS(KINT_ENTRY)
};
#if defined(__clang__)
#pragma clang diagnostic pop
#elif defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

static const unsigned char kinds[OP_COUNT] = {
#define UNARY(name, node, kind, ...) [OP_##name] = K_##kind,
#define BINARY(name, node, kind, ...) [OP_##name] = K_##kind,
#define OP(...)
#include "ops/ops.def"
#undef UNARY
#undef BINARY
#undef OP
};

/* ---- forwards ---- */

/* PyTorch's canCast: no float -> integer, no non-bool -> bool. */
static bool can_cast(ct_dtype from, ct_dtype to) {
    if (c10_is_float(from) && !c10_is_float(to)) return false;
    if (from != CT_BOOL && to == CT_BOOL) return false;
    return true;
}

/* The elementwise call of a row's kernel k (NULL: none for the dtype), into a->dst
 * when given: the inputs broadcast to dst's shape (reported before any dtype error:
 * torch checks shapes first). */
static int run(int op, const OpArgs *a, TensorImpl **out, int nin, ct_dtype result, ct_dtype compute,
               ct_dtype out_compute, ew_kernel k) {
    const char *name = op_info[op].name;
    TensorImpl *o = a->dst;
    bool bad_cast = o && !can_cast(result, o->dtype);
    /* integer division in place: into a new tensor first, so that a zero
     * divisor leaves self as it was */
    bool may_fault = o && !c10_is_float(compute) &&
                     (op == OP_div_trunc || op == OP_div_floor || op == OP_remainder || op == OP_fmod);
    if (!k || bad_cast || may_fault) { /* TensorIterator's order: overlap, shapes, the output's cast, the
                                        * kernel (ew_run checks the first two on the way to success) */
        int64_t shape[CT_MAX_DIMS];
        if (o && ew_check_written(name, o, a->t, nin) < 0) return -1;
        if (ew_broadcast(name, a->t, nin, o, shape) < 0) return -1;
    }
    if (bad_cast)
        return c10_error_int("%s: result type %s can't be cast to the desired output type %s", name,
                             c10_dtype_cname(result), c10_dtype_cname(o->dtype));
    if (!k) return c10_error_int("\"%s\" not implemented for '%s'", name, c10_dtype_cname(compute));
    ElementwiseSpec spec = {name, nin, compute, out_compute, result, 0};
    if (may_fault) o = NULL;
    atomic_store_explicit(&int_fault, 0, memory_order_relaxed);
    if (ew_run(&spec, a->t, &o, k, a->s) < 0) return -1;
    int f = atomic_load_explicit(&int_fault, memory_order_relaxed);
    if (may_fault) {
        int rc = f ? 0 : at_copy_(a->dst, o);
        c10_release(o);
        if (rc < 0) return -1;
        o = a->dst;
    }
    out[0] = a->dst ? c10_retain(o) : o; /* at_call releases it on an error */
    return f == FAULT_ZERO_DIV ? c10_error_int("ZeroDivisionError") : 1;
}

/* torch's kernel name in the "not implemented" error of float-only functions
 * (integer inputs are errors, not promoted to float32), or NULL. */
static const char *float_only_kernel(int op) {
    switch (op) {
    case OP_frac: return "frac_cpu";
    case OP_gelu:
    case OP_gelu_tanh: return "GeluKernelImpl";
    case OP_silu: return "silu_cpu";
    case OP_softplus: return "softplus_cpu";
    case OP_leaky_relu: return "leaky_relu_cpu";
    case OP_elu: return "elu_cpu";
    default: return NULL;
    }
}

/* run() into o, a new output laid out as torch allocates it (o's reference taken). */
static int run_into(int op, const OpArgs *a, TensorImpl **out, int nin, ct_dtype result, ct_dtype compute,
                    ct_dtype out_compute, ew_kernel k, TensorImpl *o) {
    if (!o) return -1;
    OpArgs b; /* what run() reads (see fwd_binary) */
    memcpy(b.t, a->t, sizeof(TensorImpl *) * (size_t)nin);
    b.nt = nin;
    b.dst = o;
    memcpy(b.s, a->s, sizeof b.s);
    int r = run(op, &b, out, nin, result, compute, out_compute, k);
    c10_release(o);
    return r;
}

/* The identity of integer rounding (and of sign on bool): a copy, laid out as
 * torch's TensorIterator output (nan_to_num: empty_like's). */
static int copy_through(int op, const OpArgs *a, TensorImpl **out) {
    TensorImpl *src = a->t[0];
    if (a->dst) {
        if (c10_has_internal_overlap(a->dst))
            return c10_error_int("unsupported operation: more than one element of the written-to tensor refers to a "
                                 "single memory location. Please clone() the tensor before performing the operation.");
        if (a->dst != src && src->device != CT_META && at_copy_(a->dst, src) < 0) return -1;
        out[0] = c10_retain(a->dst);
        return 1;
    }
    TensorImpl *o = op == OP_nan_to_num ? at_empty_like(src, src->dtype) : at_empty_unary(src, src->dtype, src->dtype);
    if (o && o->device != CT_META && at_copy_(o, src) < 0) c10_release(o), o = NULL;
    return (out[0] = o) ? 1 : -1;
}

/* The dtype a row's kernel computes in for inputs of dtype common: common
 * itself where the table has a kernel for it (float16 and bfloat16 rows with
 * fused kernels: the engine then passes them their 16-bit operands as they
 * are), else the opmath dtype (float32 for them). */
static ct_dtype kernel_dtype(int op, ct_dtype common) { return kernels[op][common] ? common : c10_opmath(common); }

int fwd_unary(int op, const OpArgs *a, TensorImpl **out) {
    if (a->dst && ew_check_written(op_info[op].name, a->dst, a->t, 1) < 0) return -1;
    ct_dtype dt = a->t[0]->dtype, result = dt, compute = kernel_dtype(op, dt), oc;
    const char *kname = float_only_kernel(op);
    if (kname && !c10_is_float(dt))
        return c10_error_int("\"%s\" not implemented for '%s'", kname, c10_dtype_cname(dt));
    switch (kinds[op]) {
    case K_FLOAT: /* integers: float32, converted by the engine or a kernel of theirs (INT_ROWS) */
        if (!c10_is_float(dt)) result = CT_FLOAT32, compute = kernels[op][dt] ? dt : CT_FLOAT32;
        break;
    case K_ALL:
        if (dt == CT_BOOL) {
            switch (op) {
            case OP_neg:
                return c10_error_int("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                                     "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
            case OP_sign: return copy_through(op, a, out); /* torch: sign(bool) is the identity */
            case OP_relu: return c10_error_int("Boolean inputs not supported for relu");
            case OP_hardtanh: return c10_error_int("Bool inputs not supported for hardtanh");
            case OP_abs: return c10_error_int("\"abs_cpu\" not implemented for 'Bool'");
            case OP_square: /* torch: pow(bool, 2) promotes to int64 (pow_'s dtype check in place) */
                if (a->dst) return c10_error_int("Found dtype Bool but expected Long");
                result = compute = CT_INT64;
                break;
            default: return c10_error_int("\"%s\" not implemented for 'Bool'", op_info[op].name);
            }
        }
        break;
    case K_ROUND:
        if (dt == CT_BOOL && op != OP_nan_to_num)
            return c10_error_int("\"%s_vml_cpu\" not implemented for 'Bool'", op_info[op].name);
        if (!c10_is_float(dt)) return copy_through(op, a, out); /* integers are already whole */
        break;
    default: /* K_TEST */
        result = CT_BOOL;
        break;
    }
    oc = result == CT_BOOL || !c10_is_float(compute) ? result : compute;
    /* torch's empty_like(self) for hardtanh and nan_to_num, ones_like / zeros_like for integers' isfinite / isinf */
    if (!a->dst && (op == OP_hardtanh || op == OP_nan_to_num || ((op == OP_isfinite || op == OP_isinf) && !c10_is_float(dt))))
        return run_into(op, a, out, 1, result, compute, oc, kernels[op][compute], at_empty_like(a->t[0], result));
    return run(op, a, out, 1, result, compute, oc, kernels[op][compute]);
}

/* The value of a wrapped number (a Python scalar argument). */
static double wrapped_value(const TensorImpl *t) {
    double v = 0;
    c10_convert(&v, CT_FLOAT64, c10_data(t), t->dtype, 1);
    return v;
}

/* torch converts pow's scalar exponent to the tensor's dtype with an overflow
 * check (c10::checked_convert): the C++ type name when v does not fit, else NULL. */
static const char *scalar_overflow(ct_dtype d, double v) {
    switch (d) {
    case CT_UINT8: return v < 0 || v > 255 ? "uint8_t" : NULL;
    case CT_INT8: return v < -128 || v > 127 ? "int8_t" : NULL;
    case CT_INT16: return v < -32768 || v > 32767 ? "int16_t" : NULL;
    case CT_INT32: return v < -2147483648.0 || v > 2147483647.0 ? "int" : NULL;
    case CT_FLOAT16: return isfinite(v) && fabs(v) > 65504.0 ? "at::Half" : NULL;
    case CT_BFLOAT16: return isfinite(v) && fabs(v) > 3.3895313892515355e38 ? "at::BFloat16" : NULL;
    default: return NULL;
    }
}

static const char *int_only_name(int op) {
    switch (op) {
    case OP_div_trunc: return "div_trunc_cpu";
    case OP_div_floor: return "div_floor_cpu";
    case OP_remainder: return "remainder_cpu";
    case OP_fmod: return "fmod_cpu";
    case OP_pow: return "pow";
    default: return NULL;
    }
}

/* TensorIterator checks the shapes, then the cast into an in-place output, before
 * the kernels' dtype errors: -1 with the shapes' error, 1 when the cast fails
 * (run() reports it), 0 when the kernel's error is the first. */
static int iter_checks_first(const char *name, const OpArgs *a, ct_dtype common) {
    int64_t shape[CT_MAX_DIMS];
    if (ew_broadcast(name, a->t, 2, a->dst, shape) < 0) return -1;
    return a->dst && !can_cast(common, a->dst->dtype);
}

int fwd_binary(int op, const OpArgs *a, TensorImpl **out) {
    if (a->dst && ew_check_written(op_info[op].name, a->dst, a->t, 2) < 0) return -1;
    PromoteState st = {0};
    promote_add_tensor(&st, a->t[0]);
    promote_add_tensor(&st, a->t[1]);
    ct_dtype common = promote_result(&st), result = common;
    const char *name = op_info[op].name;
    switch (kinds[op]) {
    case K_ARITH:
        if (op == OP_sub && a->t[0]->dtype == CT_BOOL && a->t[1]->dtype == CT_BOOL)
            return c10_error_int("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
                                 "`^` or `logical_xor()` operator instead.");
        if (op == OP_sub && (a->t[0]->dtype == CT_BOOL || a->t[1]->dtype == CT_BOOL))
            return c10_error_int("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                                 "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
        if ((op == OP_add || op == OP_sub) && !c10_is_float(common) && a->s[0] != trunc(a->s[0])) {
            int r = iter_checks_first(name, a, common);
            if (r) return r < 0 ? -1 : run(op, a, out, 2, common, common, common, NULL);
            return c10_error_int("For integral input tensors, argument alpha must not be a floating point number.");
        }
        if ((op == OP_add || op == OP_sub) && !c10_is_float(common) && a->s[0] != 1 &&
            c10_check_value_fits(a->s[0], common) < 0) { /* the kernel's alpha.to<scalar_t>() */
            int r = iter_checks_first(name, a, common);
            return r < 0 ? -1 : r ? run(op, a, out, 2, common, common, common, NULL) : -1;
        }
        if (common == CT_BOOL && int_only_name(op)) {
            int r = iter_checks_first(name, a, common);
            if (r) return r < 0 ? -1 : run(op, a, out, 2, common, common, common, NULL);
            return c10_error_int("\"%s\" not implemented for 'Bool'", int_only_name(op));
        }
        if (op == OP_pow && a->t[1]->is_wrapped_number && !c10_is_float(common) &&
            wrapped_value(a->t[1]) < 0)
            return c10_error_int("Integers to negative integer powers are not allowed.");
        /* pow_(Scalar) builds a unary op over self.to(common) writing self: torch's dtype check words it */
        if (op == OP_pow && a->dst && a->t[1]->is_wrapped_number && common != a->dst->dtype)
            return c10_error_int("Found dtype %s but expected %s", c10_dtype_cname(a->dst->dtype),
                                 c10_dtype_cname(common));
        if (op == OP_pow && a->t[1]->is_wrapped_number && scalar_overflow(common, wrapped_value(a->t[1])))
            return c10_error_int("value cannot be converted to type %s without overflow",
                                 scalar_overflow(common, wrapped_value(a->t[1])));
        break;
    case K_DIV:
    case K_FLOAT2:
        if (!c10_is_float(common)) result = common = CT_FLOAT32;
        break;
    case K_CMP:
    case K_LOGIC:
        result = CT_BOOL;
        break;
    default: /* K_BITS */
        if (c10_is_float(common)) {
            int r = iter_checks_first(name, a, common);
            if (r) return r < 0 ? -1 : run(op, a, out, 2, common, common, common, NULL);
            return c10_error_int("\"%s_cpu\" not implemented for '%s'", name, c10_dtype_cname(common));
        }
        break;
    }
    ct_dtype compute = kernel_dtype(op, common), oc = result == CT_BOOL ? CT_BOOL : compute;
    ew_kernel k = kernels[op][compute];
    OpArgs b; /* what run() reads: t[0..nin), s, dst (a full copy would move ~800 bytes) */
    b.t[0] = a->t[0];
    b.t[1] = a->t[1];
    b.nt = a->nt;
    b.dst = a->dst;
    memcpy(b.s, a->s, sizeof b.s);
    if ((op == OP_add || op == OP_sub) && (common == CT_FLOAT16 || common == CT_BFLOAT16))
        b.s[0] = c10_as_dtype(b.s[0], common); /* torch's alpha.to<scalar_t>() */
    int nin = 2;
    /* torch's pow(Tensor, Scalar) computes x ** 0.5, x ** -0.5 and x ** -1 as
     * sqrt, rsqrt and reciprocal (so (-inf) ** 0.5 is NaN and (-0) ** -0.5 is
     * -inf), and for float32 / float64 2, 3 and -2 by multiplying; float16
     * keeps std::pow */
    if (op == OP_pow && c10_is_float(common) && common != CT_FLOAT16 && a->t[1]->is_wrapped_number) {
        double e = wrapped_value(a->t[1]);
        bool fd = common == CT_FLOAT32 || common == CT_FLOAT64, f = common == CT_FLOAT32;
        ew_kernel sk = e == 0.5    ? kernels[OP_sqrt][compute]
                       : e == -0.5 ? kernels[OP_rsqrt][compute]
                       : e == -1   ? kernels[OP_reciprocal][compute]
                       : !fd       ? NULL
                       : e == 2    ? kernels[OP_square][compute]
                       : e == 3    ? (f ? k_pow3_f32 : k_pow3_f64)
                       : e == -2   ? (f ? k_powm2_f32 : k_powm2_f64)
                       : f && a->t[0]->numel < 16 ? h_pows_f32 /* torch's scalar loop: see h_pows_f32 */
                                   : NULL;
        if (sk) {
            k = sk;
            nin = 1;
            b.nt = 1;
            b.s[0] = e;
        }
    }
    /* Inputs of another dtype are cast to the common dtype before the kernel
     * widens them to the compute dtype, as TensorIterator does: for float16 and
     * bfloat16 that rounding shows (a scalar 1e10 is inf in half; uint8 255 is
     * 256 in bfloat16). A fused 16-bit kernel computes from the common dtype:
     * the engine's gathers make the same conversion. */
    TensorImpl *tmp[2] = {NULL, NULL};
    if (compute != common) {
        for (int k2 = 0; k2 < nin; k2++) {
            TensorImpl *t = a->t[k2];
            if (t->dtype == common || t->device == CT_META) continue;
            tmp[k2] = at_to_dtype(t, common);
            if (!tmp[k2]) {
                c10_release(tmp[0]);
                return -1;
            }
            tmp[k2]->is_wrapped_number = t->is_wrapped_number;
            b.t[k2] = tmp[k2];
        }
    }
    /* pow(Tensor, Scalar): torch's unary TensorIterator over self.to(common) lays out the result */
    int r = op == OP_pow && !a->dst && a->t[1]->is_wrapped_number
                ? run_into(op, &b, out, nin, result, compute, oc, k, at_empty_unary(a->t[0], result, common))
                : run(op, &b, out, nin, result, compute, oc, k);
    c10_release(tmp[0]);
    c10_release(tmp[1]);
    return r;
}

/* g (cdf(x) + x pdf(x)) of gelu(x) (erf form), in x's dtype (16-bit computed
 * in float32), g broadcast to x */
TensorImpl *at_act_grad(int op, TensorImpl *g, TensorImpl *x, const double *s) {
    static const struct {
        int op;
        const char *name;
        ew_kernel k32, k64;
    } rows[] = {
#define ACT_GRAD_ROW(name, F) {OP_##name, #name "_backward", k_##name##_grad_f32, k_##name##_grad_f64},
        ACT_GRAD_KERNELS(ACT_GRAD_ROW)
    };
    int r = 0;
    while (rows[r].op != op) r++;
    ct_dtype cd = x->dtype == CT_FLOAT64 ? CT_FLOAT64 : CT_FLOAT32;
    ElementwiseSpec spec = {rows[r].name, 2, cd, cd, x->dtype, 0};
    TensorImpl *in[2] = {x, g}, *o = NULL;
    if (ew_run(&spec, in, &o, cd == CT_FLOAT64 ? rows[r].k64 : rows[r].k32, s) < 0) return NULL;
    return o;
}
