/* tensor.c: StorageImpl and TensorImpl lifetimes, handles and scopes, and the
 * small geometry helpers every layer uses. */
#include "core.h"
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>

void (*c10_autograd_meta_free)(AutogradMeta *meta);

C10_POOL(storage_pool, StorageImpl, 16384)
C10_POOL(tensor_pool, TensorImpl, 16384)

/* ------------------------------------------------------------------ storage */

StorageImpl *c10_storage_new(size_t nbytes, ct_device device) {
    StorageImpl *s = storage_pool_get();
    if (!s) return c10_error("out of memory");
    s->data = NULL;
    if (device == CT_CPU) { /* even for 0 bytes: CPU data is never NULL, so pointer arithmetic stays defined */
        s->data = nbytes <= C10_SMALL_BYTES ? (void *)s->small : c10_alloc(nbytes);
        if (!s->data) {
            storage_pool_put(s);
            return NULL;
        }
    }
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->nbytes = nbytes;
    s->deleter = NULL;
    s->deleter_ctx = NULL;
    s->device = device;
    return s;
}

void c10_storage_release(StorageImpl *s) {
    if (!s || !c10_unref(&s->refcount)) return;
    if (s->deleter) s->deleter(s->data, s->deleter_ctx);
    else if (s->data != (void *)s->small) c10_dealloc(s->data, s->nbytes);
    storage_pool_put(s);
}

/* ------------------------------------------------------------------- tensor */

void c10_refresh(TensorImpl *t) {
    int64_t n = 1, expected = 1;
    bool contiguous = true;
    for (int i = t->ndim - 1; i >= 0; i--) {
        n *= t->sizes[i];
        if (t->sizes[i] != 1) {
            if (t->strides[i] != expected) contiguous = false;
            expected *= t->sizes[i];
        }
    }
    t->numel = n;
    t->is_contiguous = contiguous || n == 0;
}

/* c10_make, taking over the caller's reference to s (even on failure). */
static TensorImpl *make_owning(StorageImpl *s, const int64_t *sizes, const int64_t *strides, int ndim,
                               int64_t offset, ct_dtype dtype) {
    TensorImpl *t = tensor_pool_get();
    if (!t) {
        c10_storage_release(s);
        return c10_error("out of memory");
    }
    atomic_init(&t->refcount, 1);
    t->storage = s;
    t->dtype = dtype;
    t->device = s->device;
    t->ndim = ndim;
    t->is_wrapped_number = false;
    t->offset = offset;
    t->autograd = NULL;
    if (ndim == 0) { /* a scalar: one element, contiguous */
        t->numel = 1;
        t->is_contiguous = true;
        return t;
    }
    memcpy(t->sizes, sizes, (size_t)ndim * sizeof *sizes);
    memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
    c10_refresh(t);
    return t;
}

TensorImpl *c10_make(StorageImpl *s, const int64_t *sizes, const int64_t *strides, int ndim,
                     int64_t offset, ct_dtype dtype) {
    atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
    return make_owning(s, sizes, strides, ndim, offset, dtype);
}

/* numel of sizes, or -1 with PyTorch's message when a size is negative or the
 * byte count overflows. */
static int64_t checked_numel(const int64_t *sizes, int ndim, ct_dtype dtype) {
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return c10_error_int("number of dimensions (%d) must be in [0, %d]", ndim, CT_MAX_DIMS);
    if (ndim > 0 && !sizes) return c10_error_int("invalid argument: the shape is NULL with %d dimensions", ndim);
    int64_t n = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0)
            return c10_error_int("Trying to create tensor with negative dimension %lld: %s",
                                 (long long)sizes[i], c10_shape_str(sizes, ndim));
        if (__builtin_mul_overflow(n, sizes[i], &n)) overflow = true;
    }
    int64_t bytes;
    if (overflow || __builtin_mul_overflow(n, (int64_t)c10_elsize[dtype], &bytes))
        return c10_error_int("Storage size calculation overflowed with sizes=%s",
                             c10_shape_str(sizes, ndim));
    return n;
}

TensorImpl *c10_empty(const int64_t *sizes, int ndim, ct_dtype dtype, ct_device device) {
    if (!c10_dtype_valid((int)dtype)) return c10_error("empty: invalid dtype %d", (int)dtype);
    if (device != CT_CPU && device != CT_META) return c10_error("empty: invalid device %d", (int)device);
    if (ndim == 0) { /* a scalar: nothing to check */
        StorageImpl *s = c10_storage_new(c10_elsize[dtype], device);
        return s ? make_owning(s, NULL, NULL, 0, 0, dtype) : NULL;
    }
    int64_t n = checked_numel(sizes, ndim, dtype);
    if (n < 0) return NULL;
    int64_t strides[CT_MAX_DIMS], st = 1;
    for (int i = ndim - 1; i >= 0; i--) { /* with a 0-size dim numel is 0 but strides can still overflow */
        strides[i] = st;
        if (__builtin_mul_overflow(st, sizes[i] ? sizes[i] : 1, &st))
            return c10_error("Storage size calculation overflowed with sizes=%s", c10_shape_str(sizes, ndim));
    }
    StorageImpl *s = c10_storage_new((size_t)n * c10_elsize[dtype], device);
    if (!s) return NULL;
    return make_owning(s, sizes, strides, ndim, 0, dtype);
}

TensorImpl *c10_empty_like(const TensorImpl *t) { return c10_empty_dtype_like(t, t->dtype); }
TensorImpl *c10_empty_dtype_like(const TensorImpl *t, ct_dtype dtype) {
    return c10_empty(t->sizes, t->ndim, dtype, t->device);
}

TensorImpl *c10_alias(const TensorImpl *t) {
    return c10_make(t->storage, t->sizes, t->strides, t->ndim, t->offset, t->dtype);
}

TensorImpl *c10_full(const int64_t *sizes, int ndim, double v, ct_dtype dtype, ct_device device) {
    TensorImpl *t = c10_empty(sizes, ndim, dtype, device);
    if (t) c10_fill(t, v);
    return t;
}

TensorImpl *c10_scalar_tensor(double v, ct_dtype dtype, ct_device device) {
    return c10_full(NULL, 0, v, dtype, device);
}

void c10_destroy(TensorImpl *t) {
    if (t->autograd && c10_autograd_meta_free) c10_autograd_meta_free(t->autograd);
    c10_storage_release(t->storage);
    tensor_pool_put(t);
}

int c10_wrap_dim(int64_t dim, int ndim) {
    int64_t n = ndim > 0 ? ndim : 1;
    if (dim < -n || dim >= n)
        return c10_error_int("Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                             (long long)-n, (long long)(n - 1), (long long)dim);
    return (int)(dim < 0 ? dim + n : dim);
}

int64_t c10_linear_offset(const TensorImpl *t, int64_t i) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t sz = t->sizes[d];
        off += (i % sz) * t->strides[d];
        i /= sz;
    }
    return off * (int64_t)c10_elsize[t->dtype];
}

double c10_get(const TensorImpl *t, int64_t i) {
    const char *base = c10_data(t);
    if (!base) return 0.0;
    return c10_load_double(base + c10_linear_offset(t, i), t->dtype);
}

bool c10_has_internal_overlap(const TensorImpl *t) {
    if (t->is_contiguous) return false;
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i] == 0 && t->sizes[i] > 1) return true;
    return false;
}

/* Walks dst in row-major order; the last dimension is the inner loop. */
void c10_copy_strided(TensorImpl *dst, const TensorImpl *src) {
    char *d = c10_data(dst);
    const char *s = c10_data(src);
    if (!d || !s || dst->numel == 0) return;
    if (dst->is_contiguous && src->is_contiguous) {
        c10_convert(d, dst->dtype, s, src->dtype, dst->numel);
        return;
    }
    int64_t inner = dst->ndim ? dst->sizes[dst->ndim - 1] : 1;
    int64_t ds = dst->ndim ? dst->strides[dst->ndim - 1] : 0, ss = src->ndim ? src->strides[src->ndim - 1] : 0;
    int64_t de = (int64_t)c10_elsize[dst->dtype], se = (int64_t)c10_elsize[src->dtype];
    for (int64_t row = 0; row < dst->numel; row += inner) {
        char *dp = d + c10_linear_offset(dst, row);
        const char *sp = s + c10_linear_offset(src, row);
        if (ds == 1 && ss == 1) c10_convert(dp, dst->dtype, sp, src->dtype, inner);
        else
            for (int64_t j = 0; j < inner; j++)
                c10_convert(dp + j * ds * de, dst->dtype, sp + j * ss * se, src->dtype, 1);
    }
}

TensorImpl *c10_contiguous(const TensorImpl *t) {
    if (t->is_contiguous) return c10_retain((TensorImpl *)t);
    TensorImpl *out = c10_empty_like(t);
    if (out) c10_copy_strided(out, t);
    return out;
}

int c10_check_value_fits(double v, ct_dtype d) {
    static const char *const names[CT_NUM_DTYPES] = {"bool", "uint8_t", "int8_t", "int16_t", "int", "int64_t",
                                                     "at::Half", "at::BFloat16", "float", "double"};
    static const double lo[CT_NUM_DTYPES] = {0, 0, -128, -32768, -2147483648.0, -9223372036854775808.0};
    static const double hi[CT_NUM_DTYPES] = {0, 255, 127, 32767, 2147483647.0, 9223372036854775807.0};
    bool bad = false;
    if (c10_is_integral(d, false)) bad = !(v >= lo[d] && v <= hi[d]); /* NaN fails too */
    /* c10::checked_convert lets a negative integer (a C double that is integral
     * counts as one) down to -255 wrap into uint8, as two's complement */
    if (d == CT_UINT8 && v < 0 && v >= -255 && v == trunc(v)) bad = false;
    else if (d == CT_FLOAT16) bad = isfinite(v) && fabs(v) > 65504.0;
    else if (d == CT_BFLOAT16) bad = isfinite(v) && fabs(v) > 3.3895313892515355e38; /* its own max, as torch's */
    else if (d == CT_FLOAT32) bad = isfinite(v) && fabs(v) > 3.4028234663852886e38;
    return bad ? c10_error_int("value cannot be converted to type %s without overflow", names[d]) : 0;
}

int c10_fill(TensorImpl *t, double v) {
    char *d = c10_data(t);
    if (!d || t->numel == 0) return 0;
    size_t es = c10_elsize[t->dtype];
    char one[8];
    c10_store_double(one, t->dtype, v);
    if (t->is_contiguous) {
        int64_t n = t->numel;
        bool par = (size_t)n * es >= ((size_t)1 << 20); /* one core filled 32 MB at 40 GB/s */
        (void)par;
        switch (es) { /* typed loops the compiler turns into vector stores */
#define FILL(T)                                                                  \
    {                                                                            \
        T x, *p = (T *)d;                                                        \
        memcpy(&x, one, sizeof x);                                               \
        OMP(omp parallel for schedule(static) if (par))                          \
        for (int64_t i = 0; i < n; i++) p[i] = x;                                \
    }                                                                            \
    break;
        case 1: FILL(uint8_t)
        case 2: FILL(uint16_t)
        case 4: FILL(uint32_t)
        default: FILL(uint64_t)
#undef FILL
        }
    } else {
        for (int64_t i = 0; i < t->numel; i++) memcpy(d + c10_linear_offset(t, i), one, es);
    }
    return 0;
}

/* ---------------------------------------------------------- handles, scopes */

#define HANDLE_LIVE 0x7e750a11u
#define HANDLE_DEAD 0xdead7e75u

struct ct_tensor {
    TensorImpl *impl;
    uint32_t magic;
    int32_t depth;   /* index of the owning scope, -1 when the caller owns it */
    int64_t slot;    /* position in that scope */
};

typedef struct {
    ct_tensor **items;
    int64_t n, cap;
} Scope;

static _Thread_local Scope *scopes;
static _Thread_local int nscopes, capscopes;

void ct_scope_begin(void) {
    if (nscopes == capscopes) {
        int cap = capscopes ? 2 * capscopes : 8;
        Scope *s = realloc(scopes, (size_t)cap * sizeof *s);
        if (!s) {
            c10_error("ct_scope_begin: out of memory");
            return;
        }
        memset(s + capscopes, 0, (size_t)(cap - capscopes) * sizeof *s);
        scopes = s;
        capscopes = cap;
    }
    scopes[nscopes++].n = 0;
}

#ifdef CT_DEBUG
/* Freed handles wait here before going back to malloc, so that a late use or a
 * double free finds HANDLE_DEAD instead of someone else's memory. */
#define QUARANTINE 65536
static ct_tensor *quarantine[QUARANTINE];
static size_t quarantine_next;
static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
static void bury(ct_tensor *h) {
    pthread_mutex_lock(&quarantine_lock);
    ct_tensor *old = quarantine[quarantine_next % QUARANTINE];
    quarantine[quarantine_next++ % QUARANTINE] = h;
    pthread_mutex_unlock(&quarantine_lock);
    free(old);
}
__attribute__((destructor)) static void quarantine_fini(void) {
    for (size_t i = 0; i < QUARANTINE; i++) free(quarantine[i]);
}
#else
C10_POOL(handle_pool, ct_tensor, 16384)
static void bury(ct_tensor *h) { handle_pool_put(h); }
#endif

static void kill_handle(ct_tensor *h) {
    TensorImpl *t = h->impl;
    h->magic = HANDLE_DEAD;
    h->impl = NULL;
    bury(h);
    c10_release(t);
}

void ct_scope_end(void) {
    if (nscopes == 0) {
        c10_error("ct_scope_end: no scope is open");
        return;
    }
    Scope *s = &scopes[--nscopes];
    for (int64_t i = s->n - 1; i >= 0; i--)
        if (s->items[i]) kill_handle(s->items[i]);
    s->n = 0;
    if (nscopes == 0) { /* the outermost scope ended: give the memory back */
        for (int i = 0; i < capscopes; i++) free(scopes[i].items);
        free(scopes);
        scopes = NULL;
        capscopes = 0;
    }
}

static ct_tensor *new_handle(TensorImpl *t) {
#ifdef CT_DEBUG
    ct_tensor *h = malloc(sizeof *h);
#else
    ct_tensor *h = handle_pool_get();
#endif
    if (!h) {
        c10_release(t);
        return c10_error("out of memory");
    }
    h->impl = t;
    h->magic = HANDLE_LIVE;
    h->depth = -1;
    h->slot = -1;
    return h;
}

ct_tensor *c10_wrap(TensorImpl *t) {
    if (!t) return NULL;
    ct_tensor *h = new_handle(t);
    if (!h || nscopes == 0) return h;
    Scope *s = &scopes[nscopes - 1];
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        ct_tensor **items = realloc(s->items, (size_t)cap * sizeof *items);
        if (!items) {
            kill_handle(h);
            return c10_error("out of memory");
        }
        s->items = items;
        s->cap = cap;
    }
    h->depth = nscopes - 1;
    h->slot = s->n;
    s->items[s->n++] = h;
    return h;
}

static bool live(const ct_tensor *h) {
    if (h->magic == HANDLE_LIVE) return true;
    c10_error("use of a tensor handle after ct_free or ct_scope_end released it");
    return false;
}

TensorImpl *c10_unwrap(const ct_tensor *h) {
    if (!h) {
        if (!c10_has_error()) c10_error("invalid argument: a tensor argument is NULL");
        return NULL;
    }
    return live(h) ? h->impl : NULL;
}

ct_tensor *ct_retain(ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? new_handle(c10_retain(t)) : NULL;
}

void ct_free(ct_tensor *h) {
    if (!h || !live(h)) return;
    if (h->depth >= 0 && h->depth < nscopes && h->slot < scopes[h->depth].n &&
        scopes[h->depth].items[h->slot] == h)
        scopes[h->depth].items[h->slot] = NULL;
    kill_handle(h);
}
