/*
 * rng.c: PyTorch's CPU generator (CPUGeneratorImpl), reproduced bit for bit.
 *
 * One global mt19937 (at::mt19937, which is std::mt19937 seeded with the low 32
 * bits of the seed) plus the cached second Box-Muller value, guarded by a mutex
 * like PyTorch's generator->mutex_. Before any ct_manual_seed the generator is
 * seeded non-deterministically from /dev/urandom, as PyTorch's default CPU
 * generator is (c10::detail::getNonDeterministicRandom).
 *
 * The fills reproduce PyTorch 1.13's CPU kernels (aten/src/ATen/native/cpu/
 * DistributionTemplates.h, core/DistributionsHelper.h, core/TransformationHelper.h)
 * as built for the AVX2 capability that torch selects on x86-64: where GCC fused
 * a multiply and an add into an FMA in that build, we call fma/fmaf, and
 * everything else is evaluated one rounded operation at a time (contraction is
 * off in this file). normal_() on float32 tensors of 16 or more elements uses
 * the AVX2 kernel's Cephes polynomials (avx_mathfun.h log256_ps/sincos256_ps),
 * emulated here lane by lane.
 */
#include "core.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ------------------------------------------------------------ mt19937 */
enum { MT_N = 624, MT_M = 397 };
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UMASK 0x80000000u
#define MT_LMASK 0x7fffffffu

typedef struct {
    uint32_t state[MT_N];
    int left, next;
    bool seeded;
    bool has_next_double; /* CPUGeneratorImpl::next_double_normal_sample_ */
    double next_double;
} Generator;

static Generator g_gen;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void mt_seed(Generator *g, uint64_t seed) {
    g->state[0] = (uint32_t)(seed & 0xffffffffu);
    for (uint32_t j = 1; j < MT_N; j++)
        g->state[j] = 1812433253u * (g->state[j - 1] ^ (g->state[j - 1] >> 30)) + j;
    g->left = 1;
    g->next = 0;
    g->seeded = true;
    g->has_next_double = false;
}

static inline uint32_t mt_twist(uint32_t u, uint32_t v) {
    uint32_t mix = (u & MT_UMASK) | (v & MT_LMASK);
    return (mix >> 1) ^ ((v & 1u) ? MT_MATRIX_A : 0u);
}

static void mt_next_state(Generator *g) {
    uint32_t *s = g->state;
    int k = 0;
    for (; k < MT_N - MT_M; k++) s[k] = s[k + MT_M] ^ mt_twist(s[k], s[k + 1]);
    for (; k < MT_N - 1; k++) s[k] = s[k + MT_M - MT_N] ^ mt_twist(s[k], s[k + 1]);
    s[MT_N - 1] = s[MT_M - 1] ^ mt_twist(s[MT_N - 1], s[0]);
    g->left = MT_N;
    g->next = 0;
}

static uint64_t nondeterministic_seed(void) {
    uint64_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        size_t got = fread(&s, sizeof s, 1, f);
        fclose(f);
        if (got == 1) return s;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&s;
}

/* Callers hold g_lock. */
static inline void ensure_seeded(Generator *g) {
    if (CT_UNLIKELY(!g->seeded)) mt_seed(g, nondeterministic_seed());
}

static inline uint32_t rand32(Generator *g) {
    if (--g->left == 0) mt_next_state(g);
    uint32_t y = g->state[g->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* CPUGeneratorImpl::random64: the first draw is the high half. */
static inline uint64_t rand64(Generator *g) {
    uint32_t hi = rand32(g);
    uint32_t lo = rand32(g);
    return ((uint64_t)hi << 32) | lo;
}

static Generator *gen_lock(void) {
    pthread_mutex_lock(&g_lock);
    ensure_seeded(&g_gen);
    return &g_gen;
}

static void gen_unlock(void) { pthread_mutex_unlock(&g_lock); }

CT_INTERNAL uint32_t c10_random32(void) {
    Generator *g = gen_lock();
    uint32_t r = rand32(g);
    gen_unlock();
    return r;
}

CT_INTERNAL uint64_t c10_random64(void) {
    Generator *g = gen_lock();
    uint64_t r = rand64(g);
    gen_unlock();
    return r;
}

CT_API void ct_manual_seed(uint64_t seed) {
    pthread_mutex_lock(&g_lock);
    mt_seed(&g_gen, seed);
    gen_unlock();
}

/* ------------------------------------------------------ uniform samples */
/* at::uniform_real_distribution<float/double>(0, 1) */
static inline float unit_float(Generator *g) {
    return (float)(rand32(g) & 0xffffffu) * (1.0f / 16777216.0f);
}
static inline double unit_double(Generator *g) {
    return (double)(rand64(g) & ((UINT64_C(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

static inline float h2f(uint16_t h) { return c10_h2f(h); }
static inline uint16_t f2h(float f) { return c10_f2h(f); }
static inline float bf2f(uint16_t b) { return c10_bf2f(b); }
static inline uint16_t f2bf(float f) { return c10_f2bf(f); }

/* ------------------------------------------------------------- uniform_ */
CT_INTERNAL void c10_uniform_fill(TensorImpl *t, double from, double to) {
    char *data = c10_data(t);
    if (!data || t->numel == 0) return;
    int64_t n = t->numel;
    Generator *g = gen_lock();
    switch (t->dtype) {
    case CT_FLOAT32: {
        float *p = (float *)data;
        float f = (float)from, range = (float)to - f;
        for (int64_t i = 0; i < n; i++) p[i] = fmaf(unit_float(g), range, f);
        break;
    }
    case CT_FLOAT64: {
        double *p = (double *)data;
        double range = to - from;
        for (int64_t i = 0; i < n; i++) p[i] = fma(unit_double(g), range, from);
        break;
    }
    case CT_FLOAT16: {
        /* uniform_real<Half>: 11 bits, computed in float from Half bounds */
        uint16_t *p = (uint16_t *)data;
        float f = h2f(f2h((float)from));
        float range = h2f(f2h(h2f(f2h((float)to)) - f));
        for (int64_t i = 0; i < n; i++) {
            float x = (float)(rand32(g) & 0x7ffu) * (1.0f / 2048.0f);
            p[i] = f2h(fmaf(x, range, f));
        }
        break;
    }
    case CT_BFLOAT16: {
        uint16_t *p = (uint16_t *)data;
        float f = bf2f(f2bf((float)from));
        float range = bf2f(f2bf(bf2f(f2bf((float)to)) - f));
        for (int64_t i = 0; i < n; i++) {
            float x = (float)(rand32(g) & 0xffu) * (1.0f / 256.0f);
            p[i] = f2bf(fmaf(x, range, f));
        }
        break;
    }
    default: /* not a floating dtype: the caller checks; fill as double */
        for (int64_t i = 0; i < n; i++)
            c10_store_double(data + i * (int64_t)c10_elsize[t->dtype], t->dtype,
                             fma(unit_double(g), to - from, from));
        break;
    }
    gen_unlock();
}

/* -------------------------------------------------------------- normal_ */
/* at::normal_distribution<double>: Box-Muller with the cached sine value. */
static double normal_double(Generator *g, double mean, double std) {
    if (g->has_next_double) {
        g->has_next_double = false;
        return fma(g->next_double, std, mean);
    }
    double u1 = unit_double(g);
    double u2 = unit_double(g);
    double r = sqrt(-2.0 * log(1.0 - u2));
    double theta = 2.0 * 3.14159265358979323846 * u1;
    double s = sin(theta);
    g->next_double = r * s;
    g->has_next_double = true;
    double c = cos(theta);
    double ret = r * c;
    return fma(ret, std, mean);
}

/* ---- avx_mathfun.h (Cephes) log256_ps / sincos256_ps, one lane, with the FMAs
 * of torch's AVX2 build. */
static inline uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float cephes_logf(float x0) {
    bool invalid = x0 <= 0.0f; /* NaN compares false, as _CMP_LE_OS does */
    const float min_norm = bitsf(0x00800000u);
    float x = x0 > min_norm ? x0 : min_norm; /* _mm256_max_ps(x, min): NaN x -> min */
    int32_t imm0 = (int32_t)(fbits(x) >> 23);
    x = bitsf((fbits(x) & ~0x7f800000u) | fbits(0.5f));
    imm0 -= 0x7f;
    float e = (float)imm0;
    e = e + 1.0f;
    bool mask = x < 0.707106781186547524f;
    float tmp = mask ? x : 0.0f;
    x = x - 1.0f;
    e = e - (mask ? 1.0f : 0.0f);
    x = x + tmp;
    float z = x * x;
    float y = 7.0376836292E-2f;
    y = fmaf(y, x, -1.1514610310E-1f);
    y = fmaf(y, x, 1.1676998740E-1f);
    y = fmaf(y, x, -1.2420140846E-1f);
    y = fmaf(y, x, +1.4249322787E-1f);
    y = fmaf(y, x, -1.6668057665E-1f);
    y = fmaf(y, x, +2.0000714765E-1f);
    y = fmaf(y, x, -2.4999993993E-1f);
    y = fmaf(y, x, +3.3333331174E-1f);
    y = y * x;
    float t1 = e * -2.12194440e-4f;
    y = fmaf(y, z, t1);
    y = fmaf(-z, 0.5f, y);
    x = x + y;
    x = fmaf(e, 0.693359375f, x);
    if (invalid) x = bitsf(fbits(x) | 0xffffffffu);
    return x;
}

static void cephes_sincosf(float x0, float *s, float *c) {
    uint32_t sign_sin = fbits(x0) & 0x80000000u;
    float x = bitsf(fbits(x0) & 0x7fffffffu);
    float y = x * 1.27323954473516f;
    int32_t j = (int32_t)y; /* cvttps: truncation (out of range gives INT_MIN) */
    if (!(y < 2147483648.0f)) j = INT32_MIN;
    j = (int32_t)(((uint32_t)j + 1u) & ~1u);
    y = (float)j;
    uint32_t swap_sin = ((uint32_t)j & 4u) << 29;
    bool poly = ((uint32_t)j & 2u) == 0;
    x = fmaf(y, -0.78515625f, x);
    x = fmaf(y, -2.4187564849853515625e-4f, x);
    x = fmaf(y, -3.77489497744594108e-8f, x);
    uint32_t sign_cos = (~((uint32_t)j - 2u) & 4u) << 29;
    sign_sin ^= swap_sin;
    float z = x * x;
    float yc = 2.443315711809948E-005f;
    yc = fmaf(z, yc, -1.388731625493765E-003f);
    yc = fmaf(z, yc, 4.166664568298827E-002f);
    float tmp = z * 0.5f;
    yc = z * yc;
    yc = fmaf(yc, z, -tmp);
    float ys = fmaf(-1.9515295891E-4f, z, 8.3321608736E-3f);
    ys = fmaf(z, ys, -1.6666654611E-1f);
    yc = yc + 1.0f;
    ys = z * ys;
    ys = fmaf(ys, x, x);
    /* poly set: sine from ys, cosine from yc; otherwise swapped */
    float ysin2 = poly ? ys : 0.0f;
    float ysin1 = poly ? 0.0f : yc;
    float y2 = ys - ysin2;
    float y1 = yc - ysin1;
    float sn = ysin1 + ysin2;
    float cs = y2 + y1;
    *s = bitsf(fbits(sn) ^ sign_sin);
    *c = bitsf(fbits(cs) ^ sign_cos);
}

/* normal_fill_16_AVX2 on one block of 16 uniforms. */
static void normal16_avx2(float *d, float mean, float std) {
    const float two_pi = (float)(2.0f * 3.14159265358979323846);
    for (int j = 0; j < 8; j++) {
        float u1 = 1.0f - d[j];
        float theta = two_pi * d[j + 8];
        float radius = sqrtf(cephes_logf(u1) * -2.0f);
        float sn, cs;
        cephes_sincosf(theta, &sn, &cs);
        float n1 = radius * cs;
        float n2 = radius * sn;
        d[j] = fmaf(n1, std, mean);
        d[j + 8] = fmaf(n2, std, mean);
    }
}

/* normal_fill_16<double> */
static void normal16_double(double *d, double mean, double std) {
    for (int j = 0; j < 8; j++) {
        double u1 = 1.0 - d[j];
        double u2 = d[j + 8];
        double radius = sqrt(-2.0 * log(u1));
        double theta = 2.0 * 3.14159265358979323846 * u2;
        double c = cos(theta), s = sin(theta);
        d[j] = fma(radius * c, std, mean);
        d[j + 8] = fma(radius * s, std, mean);
    }
}

/* normal_fill_16<Half>: c10::Half arithmetic (each Half op is done in float and
 * rounded back to Half), std:: math on float. */
static void normal16_half(uint16_t *d, uint16_t mean, uint16_t std) {
    for (int j = 0; j < 8; j++) {
        float u1 = h2f(f2h(1.0f - h2f(d[j])));
        float u2 = h2f(d[j + 8]);
        float radius = h2f(f2h(sqrtf(-2.0f * logf(u1))));
        float theta = h2f(f2h((float)(2.0 * 3.14159265358979323846 * (double)u2)));
        float c = cosf(theta), s = sinf(theta);
        d[j] = f2h(fmaf(radius * c, h2f(std), h2f(mean)));
        d[j + 8] = f2h(fmaf(radius * s, h2f(std), h2f(mean)));
    }
}

/* normal_fill_16<BFloat16>: BFloat16-math.h overloads std::log/sqrt/cos/sin for
 * BFloat16 (each result rounded), and BFloat16 op BFloat16 rounds too. */
static inline float bfr(float f) { return bf2f(f2bf(f)); }
static void normal16_bf16(uint16_t *d, uint16_t mean, uint16_t std) {
    for (int j = 0; j < 8; j++) {
        float u1 = bfr(1.0f - bf2f(d[j]));
        float u2 = bf2f(d[j + 8]);
        float radius = bfr(sqrtf(bfr(-2.0f * bfr(logf(u1)))));
        float theta = bfr((float)(2.0 * 3.14159265358979323846 * (double)u2));
        float c = bfr(cosf(theta)), s = bfr(sinf(theta));
        d[j] = f2bf(bfr(bfr(radius * c) * bf2f(std)) + bf2f(mean));
        d[j + 8] = f2bf(bfr(bfr(radius * s) * bf2f(std)) + bf2f(mean));
    }
}

/* t must be contiguous. serial: one normal_distribution<double> draw per
 * element (PyTorch's path for non-contiguous tensors), never the blocks of 16. */
CT_INTERNAL void c10_normal_fill(TensorImpl *t, double mean, double std, bool serial) {
    char *data = c10_data(t);
    if (!data || t->numel == 0) return;
    int64_t n = t->numel;
    bool blocks = !serial && n >= 16; /* else the per-element path below */
    ct_dtype dt = t->dtype;
    Generator *g = gen_lock();
    if (blocks && dt == CT_FLOAT32) {
        float *p = (float *)data;
        float m = (float)mean, s = (float)std;
        for (int64_t i = 0; i < n; i++) p[i] = unit_float(g);
        for (int64_t i = 0; i + 16 <= n; i += 16) normal16_avx2(p + i, m, s);
        if (n % 16 != 0) { /* recompute the last 16 from fresh uniforms */
            float *q = p + n - 16;
            for (int i = 0; i < 16; i++) q[i] = unit_float(g);
            normal16_avx2(q, m, s);
        }
    } else if (blocks && dt == CT_FLOAT64) {
        double *p = (double *)data;
        for (int64_t i = 0; i < n; i++) p[i] = unit_double(g);
        for (int64_t i = 0; i + 16 <= n; i += 16) normal16_double(p + i, mean, std);
        if (n % 16 != 0) {
            double *q = p + n - 16;
            for (int i = 0; i < 16; i++) q[i] = unit_double(g);
            normal16_double(q, mean, std);
        }
    } else if (blocks && (dt == CT_FLOAT16 || dt == CT_BFLOAT16)) {
        uint16_t *p = (uint16_t *)data;
        bool half = dt == CT_FLOAT16;
        uint16_t m = half ? f2h((float)mean) : f2bf((float)mean);
        uint16_t s = half ? f2h((float)std) : f2bf((float)std);
        /* uniform_real_distribution<Half/BFloat16>(0, 1) */
        for (int64_t i = 0; i < n; i++)
            p[i] = half ? f2h((float)(rand32(g) & 0x7ffu) * (1.0f / 2048.0f))
                        : f2bf((float)(rand32(g) & 0xffu) * (1.0f / 256.0f));
        for (int64_t i = 0; i + 16 <= n; i += 16) {
            if (half) normal16_half(p + i, m, s);
            else normal16_bf16(p + i, m, s);
        }
        if (n % 16 != 0) {
            uint16_t *q = p + n - 16;
            for (int i = 0; i < 16; i++)
                q[i] = half ? f2h((float)(rand32(g) & 0x7ffu) * (1.0f / 2048.0f))
                            : f2bf((float)(rand32(g) & 0xffu) * (1.0f / 256.0f));
            if (half) normal16_half(q, m, s);
            else normal16_bf16(q, m, s);
        }
    } else {
        size_t es = c10_elsize[dt];
        for (int64_t i = 0; i < n; i++) {
            double v = normal_double(g, mean, std);
            char *p = data + i * (int64_t)es;
            switch (dt) {
            case CT_FLOAT32: *(float *)p = (float)v; break;
            case CT_FLOAT64: *(double *)p = v; break;
            case CT_FLOAT16: *(uint16_t *)p = f2h((float)v); break;
            case CT_BFLOAT16: *(uint16_t *)p = f2bf((float)v); break;
            default: c10_store_double(p, dt, v); break;
            }
        }
    }
    gen_unlock();
}

/* ------------------------------------------------ integers: random_, randperm */
/* static_cast<scalar_t>(int64_t v) */
static inline void store_i64(char *p, ct_dtype d, int64_t v) {
    switch (d) {
    case CT_BOOL: *(bool *)p = v != 0; break;
    case CT_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case CT_INT8: *(int8_t *)p = (int8_t)v; break;
    case CT_INT16: *(int16_t *)p = (int16_t)v; break;
    case CT_INT32: *(int32_t *)p = (int32_t)v; break;
    case CT_INT64: *(int64_t *)p = v; break;
    case CT_FLOAT16: *(uint16_t *)p = f2h((float)v); break;
    case CT_BFLOAT16: *(uint16_t *)p = f2bf((float)v); break;
    case CT_FLOAT32: *(float *)p = (float)v; break;
    case CT_FLOAT64: *(double *)p = (double)v; break;
    }
}

/* static_cast<int64_t>(static_cast<scalar_t>(v)) for a floating dtype */
/* (int64_t) of a float, as x86's conversion gives it (torch's cast is that
 * instruction): out of range or NaN is INT64_MIN, without C's undefined behaviour */
static int64_t to_i64(double x) { return x >= 0x1p63 || !(x >= -0x1p63) ? INT64_MIN : (int64_t)x; }

COLD_CODE static int64_t through_float(int64_t v, ct_dtype d) {
    switch (d) {
    case CT_FLOAT16: return to_i64(h2f(f2h((float)v)));
    case CT_BFLOAT16: return to_i64(bf2f(f2bf((float)v)));
    case CT_FLOAT32: return to_i64((float)v);
    default: return to_i64((double)v);
    }
}

static int float_digits(ct_dtype d) {
    return d == CT_FLOAT16 ? 11 : d == CT_BFLOAT16 ? 8 : d == CT_FLOAT32 ? 24 : 53;
}

static int floor_log2(uint64_t v) {
    int n = 0;
    while (v >>= 1) ++n;
    return n;
}

/* random_(low, high), as torch.randint does it: for floating dtypes the bounds
 * first move inwards to values the dtype holds (update_from/update_to in
 * ATen/native/DistributionTemplates.h), then uniform_int_from_to_distribution. */
CT_INTERNAL void c10_randint_fill(TensorImpl *t, int64_t low, int64_t high) {
    char *data = c10_data(t);
    if (!data || t->numel == 0) return;
    int64_t n = t->numel;
    ct_dtype d = t->dtype;
    size_t es = c10_elsize[d];
    if (c10_is_float(d) && low < high) {
        int64_t from = low, to = high;
        int64_t from_plus_1 = through_float((int64_t)((uint64_t)from + 1u), d);
        if (from_plus_1 < from) {
            int64_t f1 = (int64_t)((uint64_t)from + 1u);
            uint64_t a = f1 < 0 ? 0 - (uint64_t)f1 : (uint64_t)f1;
            from = from_plus_1 + (int64_t)(INT64_C(1) << (floor_log2(a) - float_digits(d) + 1));
        }
        int64_t to_minus_1 = through_float((int64_t)((uint64_t)to - 1u), d);
        if (to_minus_1 >= to) {
            int64_t t1 = (int64_t)((uint64_t)to - 1u);
            uint64_t a = t1 < 0 ? 0 - (uint64_t)t1 : (uint64_t)t1;
            to = to_minus_1 - (int64_t)(INT64_C(1) << (floor_log2(a) - float_digits(d) + 1));
        }
        if (from < to) { /* torch errors otherwise; the caller checks */
            low = from;
            high = to;
        }
    }
    uint64_t range = (uint64_t)high - (uint64_t)low;
    bool wide = range >= (UINT64_C(1) << 32) &&
                (d == CT_INT64 || d == CT_FLOAT64 || d == CT_FLOAT32 || d == CT_BFLOAT16);
    Generator *g = gen_lock();
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = wide ? rand64(g) : (uint64_t)rand32(g);
        int64_t r = (int64_t)(v % range + (uint64_t)low);
        store_i64(data + i * (int64_t)es, d, r);
    }
    gen_unlock();
}

/* torch.randperm(n) on CPU: identity, then a Fisher-Yates pass with
 * random() % (n - i). */
CT_INTERNAL void c10_randperm_fill(TensorImpl *t) {
    char *data = c10_data(t);
    if (!data || t->numel == 0) return;
    int64_t n = t->numel;
    ct_dtype d = t->dtype;
    int64_t es = (int64_t)c10_elsize[d];
    if (d == CT_INT64) {
        int64_t *p = (int64_t *)data;
        for (int64_t i = 0; i < n; i++) p[i] = i;
        Generator *g = gen_lock();
        for (int64_t i = 0; i < n - 1; i++) {
            int64_t z = (int64_t)rand32(g) % (n - i);
            int64_t sav = p[i];
            p[i] = p[z + i];
            p[z + i] = sav;
        }
        gen_unlock();
        return;
    }
    for (int64_t i = 0; i < n; i++) store_i64(data + i * es, d, i);
    char tmp[8];
    Generator *g = gen_lock();
    for (int64_t i = 0; i < n - 1; i++) {
        int64_t z = (int64_t)rand32(g) % (n - i);
        memcpy(tmp, data + i * es, (size_t)es);
        memcpy(data + i * es, data + (z + i) * es, (size_t)es);
        memcpy(data + (z + i) * es, tmp, (size_t)es);
    }
    gen_unlock();
}

/* bernoulli_(p) with a scalar p: bernoulli_distribution<double>, one random64 each. */
CT_INTERNAL void c10_bernoulli_fill(TensorImpl *t, double p) {
    char *data = c10_data(t);
    if (!data || t->numel == 0) return;
    int64_t n = t->numel;
    ct_dtype d = t->dtype;
    size_t es = c10_elsize[d];
    Generator *g = gen_lock();
    for (int64_t i = 0; i < n; i++) store_i64(data + i * (int64_t)es, d, unit_double(g) < p);
    gen_unlock();
}
