/*
 * core.h: ctorch's c10, private to the library.
 *
 * TensorImpl over StorageImpl, as in PyTorch:
 *
 *   ct_tensor (handle, owned by a scope or the caller)
 *       -> TensorImpl (refcount; sizes, strides, offset, dtype; autograd meta)
 *           -> StorageImpl (refcount; data, nbytes; the version counter)
 *               -> a block from the allocator (cached) or a caller's buffer
 *
 * Element (i0, i1, ...) of a tensor lives at
 *     data + (offset + i0*strides[0] + i1*strides[1] + ...) * elsize.
 * Views are TensorImpls with other sizes/strides/offset over the same storage.
 *
 * Internal functions shared across files are c10_*; they take and return
 * TensorImpl pointers. A function returning TensorImpl* returns a new reference
 * (release it with c10_release) or NULL after setting the error. Arguments are
 * borrowed.
 */
#ifndef CT_CORE_H
#define CT_CORE_H

#include "ctorch.h"
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#if defined(__GNUC__)
#define CT_INTERNAL __attribute__((visibility("hidden")))
#define CT_LIKELY(x) __builtin_expect(!!(x), 1)
#define CT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CT_INTERNAL
#define CT_LIKELY(x) (x)
#define CT_UNLIKELY(x) (x)
#define CT_PRINTF(a, b)
#endif

/* OpenMP pragmas that vanish in builds without OpenMP: OMP(omp parallel for ...) */
#ifdef _OPENMP
#define OMP(...) _Pragma(#__VA_ARGS__)
#else
#define OMP(...)
#endif

/* code compiled for size under gcc (clang has no per-function -Os): run once a
 * call or a block, loops whose vector types need no unrolling, or rare dtypes */
#if defined(__GNUC__) && !defined(__clang__)
#define COLD_CODE __attribute__((optimize("Os")))
#define COLD_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"Os\")") /* ... COLD_END: all between */
#define COLD_END _Pragma("GCC pop_options")
#else
#define COLD_CODE
#define COLD_BEGIN
#define COLD_END
#endif

/* Broken invariants (never user errors) abort with file and line. */
#define CT_ASSERT(cond)                                                        \
    do {                                                                       \
        if (CT_UNLIKELY(!(cond))) c10_assert_fail(#cond, __FILE__, __LINE__);  \
    } while (0)

/* ------------------------------------------------------------------ pools */
/* A per-thread free list for one small struct type. Ops allocate tensors,
 * storages, handles and autograd nodes by the thousand and free them all at
 * once at the end of a scope, which defeats malloc's own small caches; these
 * lists keep up to `cap` freed objects for reuse. C10_POOL(name, T, cap)
 * defines name_get() (uninitialised memory or NULL) and name_put(p). */
#define C10_POOL(name, T, cap)                                                   \
    static _Thread_local void *name##_head;                                      \
    static _Thread_local int name##_count;                                       \
    static T *name##_get(void) {                                                 \
        void *p = name##_head;                                                   \
        if (!p) return (T *)malloc(sizeof(T));                                   \
        memcpy(&name##_head, p, sizeof(void *));                                 \
        name##_count--;                                                          \
        return (T *)p;                                                           \
    }                                                                            \
    static void name##_put(T *p) {                                               \
        if (name##_count >= (cap)) {                                             \
            free(p);                                                             \
            return;                                                              \
        }                                                                        \
        memcpy((void *)p, &name##_head, sizeof(void *));                         \
        name##_head = p;                                                         \
        name##_count++;                                                          \
    }                                                                            \
    __attribute__((destructor)) static void name##_drain(void) {                 \
        while (name##_head) {                                                    \
            void *p = name##_head;                                               \
            memcpy(&name##_head, p, sizeof(void *));                             \
            free(p);                                                             \
        }                                                                        \
        name##_count = 0;                                                        \
    }

/* ------------------------------------------------------------------ errors */
/* Sets this thread's message (printf-style) and returns NULL, so that
 * `return c10_error("...")` reads naturally. */
CT_INTERNAL void *c10_error(const char *fmt, ...) CT_PRINTF(1, 2);
CT_INTERNAL int c10_error_int(const char *fmt, ...) CT_PRINTF(1, 2); /* returns -1 */
CT_INTERNAL bool c10_has_error(void);
_Noreturn CT_INTERNAL void c10_assert_fail(const char *what, const char *file, int line);
/* "[2, 3]" for messages: thread-local ring of buffers, valid for a few calls. */
CT_INTERNAL const char *c10_shape_str(const int64_t *sizes, int ndim);

/* ------------------------------------------------------------------ dtypes */
typedef enum { KIND_B, KIND_U, KIND_I, KIND_F } c10_kind;
CT_INTERNAL extern const size_t c10_elsize[CT_NUM_DTYPES];
CT_INTERNAL extern const char *const c10_dtype_names[CT_NUM_DTYPES];
CT_INTERNAL extern const c10_kind c10_dtype_kind[CT_NUM_DTYPES];
static inline bool c10_is_float(ct_dtype d) { return c10_dtype_kind[d] == KIND_F; }
static inline bool c10_is_integral(ct_dtype d, bool include_bool) {
    return c10_dtype_kind[d] == KIND_U || c10_dtype_kind[d] == KIND_I ||
           (include_bool && d == CT_BOOL);
}
static inline bool c10_dtype_valid(int d) { return d >= 0 && d < CT_NUM_DTYPES; }
/* PyTorch's spelling of a dtype in messages: "float", "long", "bool" ... */
CT_INTERNAL const char *c10_dtype_cname(ct_dtype d);
/* torch's legacy tensor type name (toString of its DeprecatedTypeProperties), in older
 * messages: "torch.FloatTensor", and for the types it never named, "CPUBoolType". */
CT_INTERNAL const char *c10_dtype_legacy_name(ct_dtype d);
/* The C++ type name some torch messages use (caffe2::TypeMeta): "long int", "c10::Half". */
CT_INTERNAL const char *c10_dtype_cpp_name(ct_dtype d);
CT_INTERNAL ct_dtype c10_promote(ct_dtype a, ct_dtype b);
/* A scalar argument v (already checked to fit, c10_check_value_fits) as the
 * kernel type T: integers through int64, wrapping as torch's (-1 as uint8 is
 * 255), where a direct conversion of a negative double is undefined. */
#define C10_SCALAR_AS(T, v) ((T)0.5 != 0 ? (T)(v) : (T)(int64_t)(v))
/* The compute ("opmath") dtype: float32 for float16/bfloat16, else itself. */
static inline ct_dtype c10_opmath(ct_dtype d) {
    return (d == CT_FLOAT16 || d == CT_BFLOAT16) ? CT_FLOAT32 : d;
}
/* n contiguous elements from src (dtype s) to dst (dtype d), C conversions
 * (float->int truncates, anything->bool is != 0, 16-bit floats round to nearest even). */
CT_INTERNAL void c10_convert(void *dst, ct_dtype d, const void *src, ct_dtype s, int64_t n);
/* One element <-> double. */
CT_INTERNAL double c10_load_double(const void *p, ct_dtype d);
CT_INTERNAL void c10_store_double(void *p, ct_dtype d, double v);
/* v as dtype d holds it (float types round, as a C++ Scalar's to<T>()) */
static inline double c10_as_dtype(double v, ct_dtype d) {
    char buf[8];
    c10_store_double(buf, d, v);
    return c10_load_double(buf, d);
}
/* float16 -> float, exact (a NaN keeps its payload; F16C quiets a signalling
 * one). Inline: out of line, it cost a call an element (float16 sums of [4096,
 * 4096] ran at 2% of the triad where there is no AVX-512). c10_h2f: F16C's
 * scalar instruction where there is one (everywhere, the branch-free form came
 * to 30 KB of vectorised copies in the library, no faster), else
 * c10_h2f_bits, branch-free: loops of it vectorise, which hot loops without a
 * vector conversion of their own use (a loop of _cvtsh_ss stays scalar). */
static inline float c10_h2f_bits(uint16_t h) {
    uint32_t em = h & 0x7fffu, bits;
    float sub = (float)(int32_t)em * 0x1p-24f; /* zero and subnormals: em < 0x400, exact */
    memcpy(&bits, &sub, sizeof bits);
    bits = em < 0x400u ? bits : em >= 0x7c00u ? (em << 13) | 0x7f800000u : (em << 13) + ((127u - 15u) << 23);
    bits |= (uint32_t)(h & 0x8000u) << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static inline float c10_h2f(uint16_t h) {
#ifdef __F16C__
    return _cvtsh_ss(h);
#else
    return c10_h2f_bits(h);
#endif
}
CT_INTERNAL uint16_t c10_f2h(float f);
CT_INTERNAL float c10_bf2f(uint16_t b);
CT_INTERNAL uint16_t c10_f2bf(float f);
/* float bits -> bfloat16, round to nearest even (overflow carries into inf);
 * a NaN stays a quiet NaN with its sign. Branch-free: loops of it vectorise. */
static inline uint16_t c10_f2bf_bits(uint32_t u) {
    uint16_t r = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u) : r;
}
#ifdef __AVX2__
/* 8 bfloat16s to floats, and back as c10_f2bf_bits rounds (NaN lanes blended) */
static inline __m256 c10_bf2f_x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
static inline void c10_f2bf_x8(uint16_t *p, __m256 v) {
    __m256i u = _mm256_castps_si256(v), hi = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1))));
    r = _mm256_blendv_epi8(_mm256_srli_epi32(r, 16), _mm256_or_si256(hi, _mm256_set1_epi32(0x40)),
                           _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08); /* r's 8 words in the low half */
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(w));
}
#endif
/* n of them at a time (bf: bfloat16, else float16), vectorised. */
CT_INTERNAL void c10_half_to_float_n(float *d, const uint16_t *s, bool bf, int64_t n);
CT_INTERNAL void c10_float_to_half_n(uint16_t *d, const float *s, bool bf, int64_t n);

/* --------------------------------------------------------------- allocator */
CT_INTERNAL void *c10_alloc(size_t nbytes);          /* 64-byte aligned; NULL + error */
CT_INTERNAL void c10_dealloc(void *p, size_t nbytes);

/* ----------------------------------------------------------------- storage */
typedef struct StorageImpl {
    atomic_int refcount;
    atomic_uint version;         /* PyTorch's version counter, shared by every view */
    void *data;                  /* NULL on the meta device */
    size_t nbytes;
    void (*deleter)(void *data, void *ctx); /* NULL: the block is the allocator's */
    void *deleter_ctx;
    ct_device device;
    /* Data of up to 16 bytes (a scalar, a float4) lives here, in the storage's
     * own cache line: no allocator call, no lock. The whole struct is 64 bytes. */
    _Alignas(16) unsigned char small[16];
} StorageImpl;
#define C10_SMALL_BYTES sizeof(((StorageImpl *)0)->small)
_Static_assert(sizeof(StorageImpl) == 64, "StorageImpl is one cache line");

CT_INTERNAL StorageImpl *c10_storage_new(size_t nbytes, ct_device device);
CT_INTERNAL void c10_storage_release(StorageImpl *s);

/* ------------------------------------------------------------------ tensor */
typedef struct AutogradMeta AutogradMeta; /* the autograd layer's; opaque here */

typedef struct TensorImpl {    /* the fields every op reads come first: one cache line */
    atomic_int refcount;
    ct_dtype dtype;
    ct_device device;
    int ndim;
    bool is_contiguous;          /* cached by c10_refresh */
    bool is_wrapped_number;      /* a scalar argument, for type promotion */
    int64_t numel;               /* cached by c10_refresh */
    int64_t offset;              /* in elements */
    StorageImpl *storage;
    AutogradMeta *autograd;      /* NULL until autograd needs it */
    int64_t sizes[CT_MAX_DIMS];
    int64_t strides[CT_MAX_DIMS];
} TensorImpl;

/* The autograd layer installs this so that core can free what it cannot see. */
CT_INTERNAL extern void (*c10_autograd_meta_free)(AutogradMeta *meta);

/* A new contiguous tensor (uninitialised data). Checks sizes (negative,
 * overflow); op names the caller in messages. */
CT_INTERNAL TensorImpl *c10_empty(const int64_t *sizes, int ndim, ct_dtype dtype,
                                  ct_device device);
CT_INTERNAL TensorImpl *c10_empty_like(const TensorImpl *t);
CT_INTERNAL TensorImpl *c10_empty_dtype_like(const TensorImpl *t, ct_dtype dtype);
/* A tensor over s (retained) with the given geometry; no checks. */
CT_INTERNAL TensorImpl *c10_make(StorageImpl *s, const int64_t *sizes, const int64_t *strides,
                                 int ndim, int64_t offset, ct_dtype dtype);
/* A new TensorImpl with the same geometry and storage (no autograd meta). */
CT_INTERNAL TensorImpl *c10_alias(const TensorImpl *t);
CT_INTERNAL TensorImpl *c10_scalar_tensor(double v, ct_dtype dtype, ct_device device);
CT_INTERNAL TensorImpl *c10_full(const int64_t *sizes, int ndim, double v, ct_dtype dtype,
                                 ct_device device);
/* Drops one reference to a refcount; true when it was the last. A count of 1
 * seen by its holder cannot change under it (nobody else has a reference to
 * take another), so the last release skips the atomic read-modify-write. */
static inline bool c10_unref(atomic_int *rc) {
    return atomic_load_explicit(rc, memory_order_acquire) == 1 ||
           atomic_fetch_sub_explicit(rc, 1, memory_order_acq_rel) == 1;
}
static inline TensorImpl *c10_retain(TensorImpl *t) {
    if (t) atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}
CT_INTERNAL void c10_destroy(TensorImpl *t); /* the last reference went: free it */
static inline void c10_release(TensorImpl *t) { /* NULL is fine */
    if (t && c10_unref(&t->refcount)) c10_destroy(t);
}
/* Recomputes numel and is_contiguous after sizes/strides changed. */
CT_INTERNAL void c10_refresh(TensorImpl *t);
static inline char *c10_data(const TensorImpl *t) {
    return t->storage->data ? (char *)t->storage->data + t->offset * (int64_t)c10_elsize[t->dtype]
                            : NULL;
}
static inline void c10_bump_version(TensorImpl *t) {
    atomic_fetch_add_explicit(&t->storage->version, 1, memory_order_relaxed);
}
static inline unsigned c10_version(const TensorImpl *t) {
    return atomic_load_explicit(&t->storage->version, memory_order_relaxed);
}
/* Wraps dim into [0, ndim) (ndim 0 counts as 1, as PyTorch does); -1 + error
 * "Dimension out of range (expected to be in range of [-2, 1], but got 2)". */
CT_INTERNAL int c10_wrap_dim(int64_t dim, int ndim);
/* Element at row-major linear position i, as a double (slow; printing, item). */
CT_INTERNAL double c10_get(const TensorImpl *t, int64_t i);
/* Byte offset of the element at row-major linear index i, relative to c10_data. */
CT_INTERNAL int64_t c10_linear_offset(const TensorImpl *t, int64_t i);
/* Is any memory location reachable through two different indices? (conservative) */
CT_INTERNAL bool c10_has_internal_overlap(const TensorImpl *t);
/* Copies src into dst elementwise (same numel, any layouts, any dtypes); no checks. */
CT_INTERNAL void c10_copy_strided(TensorImpl *dst, const TensorImpl *src);
CT_INTERNAL TensorImpl *c10_contiguous(const TensorImpl *t); /* new ref; self if contiguous */
CT_INTERNAL int c10_fill(TensorImpl *t, double v); /* any layout, overlapping too */
/* Can v be stored in dtype d without overflow? -1 with PyTorch's message if not. */
CT_INTERNAL int c10_check_value_fits(double v, ct_dtype d);

/* ------------------------------------------------ views: pure geometry, no autograd */
CT_INTERNAL TensorImpl *c10_as_strided(const TensorImpl *t, const int64_t *size, const int64_t *stride,
                                       int ndim, int64_t offset);
CT_INTERNAL TensorImpl *c10_view(const TensorImpl *t, const int64_t *shape, int ndim);
/* Strides for viewing t as shape, or false when a copy is needed (PyTorch's computeStride). */
CT_INTERNAL bool c10_view_strides(const TensorImpl *t, const int64_t *shape, int ndim, int64_t *out);
/* Resolves one -1 in shape against numel; "shape '[2, -1]' is invalid for input of size 5". */
CT_INTERNAL int c10_infer_shape(const char *op, int64_t *shape, int ndim, int64_t numel);
CT_INTERNAL TensorImpl *c10_slice(const TensorImpl *t, int dim, int64_t start, int64_t end, int64_t step);
/* torch's checks of narrow(start, length) along a dim of size cur: start wraps as a
 * dim index would (unless it is cur itself), start + length stays within cur;
 * 0 with *start made non-negative, or -1 with the message */
CT_INTERNAL int c10_narrow_check(int64_t cur, int64_t *start, int64_t length);
CT_INTERNAL TensorImpl *c10_narrow(const TensorImpl *t, int dim, int64_t start, int64_t length);
CT_INTERNAL TensorImpl *c10_select(const TensorImpl *t, int dim, int64_t index);
CT_INTERNAL TensorImpl *c10_transpose(const TensorImpl *t, int dim0, int dim1);
CT_INTERNAL TensorImpl *c10_permute(const TensorImpl *t, const int64_t *dims, int ndim);
CT_INTERNAL TensorImpl *c10_expand(const TensorImpl *t, const int64_t *shape, int ndim);
CT_INTERNAL TensorImpl *c10_squeeze(const TensorImpl *t, int dim); /* dim CT_MAX_DIMS: all */
CT_INTERNAL TensorImpl *c10_unsqueeze(const TensorImpl *t, int dim);
CT_INTERNAL TensorImpl *c10_diagonal(const TensorImpl *t, int64_t offset, int dim1, int dim2);
CT_INTERNAL TensorImpl *c10_unfold(const TensorImpl *t, int dim, int64_t size, int64_t step);
/* Broadcast shape of a and b into out (returns ndim) or -1 with PyTorch's message. */
CT_INTERNAL int c10_broadcast_shape(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out);

/* ----------------------------------------------------------------- handles */
/* Wraps a new reference (stolen) into a handle owned by the innermost scope or
 * the caller. NULL in, NULL out. */
CT_INTERNAL ct_tensor *c10_wrap(TensorImpl *t);
/* The TensorImpl behind a handle (borrowed). NULL handle: NULL, keeping the first
 * error (or setting "op: argument is NULL" if there is none). */
CT_INTERNAL TensorImpl *c10_unwrap(const ct_tensor *h);

/* ------------------------------------------------------------------- RNG */
/* PyTorch's CPU generator: mt19937 seeded like torch.manual_seed. */
CT_INTERNAL uint32_t c10_random32(void);
CT_INTERNAL uint64_t c10_random64(void);
/* Fill a contiguous tensor as torch.rand/uniform_, torch.randn/normal_ do. */
CT_INTERNAL void c10_uniform_fill(TensorImpl *t, double from, double to);
CT_INTERNAL void c10_normal_fill(TensorImpl *t, double mean, double std, bool serial);
CT_INTERNAL void c10_randint_fill(TensorImpl *t, int64_t low, int64_t high);
CT_INTERNAL void c10_randperm_fill(TensorImpl *t);
CT_INTERNAL void c10_bernoulli_fill(TensorImpl *t, double p);

/* ---------------------------------------------------------------- printing */
CT_INTERNAL int c10_repr(const TensorImpl *t, char *buf, size_t cap, const char *suffix);
/* Set by the autograd layer: writes ", grad_fn=<...>" / ", requires_grad=True" (or "")
 * for ct_repr/ct_print; NULL means no suffix. */
CT_INTERNAL extern const char *(*c10_repr_suffix)(const TensorImpl *t, char *buf, size_t cap);

/* --------------------------------------------------------------- threads */
CT_INTERNAL int c10_num_threads(void);
/* the threads a new parallel region may use: 1 inside one (no nesting) */
CT_INTERNAL int c10_free_threads(void);

#endif /* CT_CORE_H */
