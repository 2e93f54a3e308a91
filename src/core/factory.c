/* factory.c: the public factories and inspection functions (no autograd here:
 * new tensors are leaves without history). */
#include "core.h"
#include <math.h>
#include <stdlib.h>

static TensorImpl *blob(void *data, const int64_t *shape, int ndim, ct_dtype dtype,
                        void (*deleter)(void *, void *), void *ctx) {
    if (!c10_dtype_valid((int)dtype)) return c10_error("from_blob: invalid dtype %d", (int)dtype);
    TensorImpl *t = c10_empty(shape, ndim, dtype, CT_META); /* checks sizes; no data */
    if (!t) return NULL;
    t->storage->data = data;
    t->storage->deleter = deleter;
    t->storage->deleter_ctx = ctx;
    t->storage->device = t->device = CT_CPU;
    return t;
}

static void no_delete(void *data, void *ctx) { (void)data, (void)ctx; }

ct_tensor *ct_from_blob(void *data, const int64_t *shape, int ndim, ct_dtype dtype,
                        void (*deleter)(void *data, void *ctx), void *ctx) {
    if (!data && ndim > 0) return c10_error("from_blob: data is NULL");
    return c10_wrap(blob(data, shape, ndim, dtype, deleter ? deleter : no_delete, ctx));
}

ct_tensor *ct_from_data(const void *data, const int64_t *shape, int ndim, ct_dtype dtype) {
    TensorImpl *t = c10_empty(shape, ndim, dtype, CT_CPU);
    if (!t) return NULL;
    if (t->numel && !data) {
        c10_release(t);
        return c10_error("from_data: data is NULL");
    }
    if (t->numel) memcpy(c10_data(t), data, (size_t)t->numel * c10_elsize[dtype]);
    if (dtype == CT_BOOL) /* C's bool holds 0 or 1: any other byte reads as true, as torch's */
        for (uint8_t *b = (uint8_t *)c10_data(t), *e = b + t->numel; b < e; b++) *b = *b != 0;
    return c10_wrap(t);
}

ct_tensor *ct_empty_on(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    TensorImpl *t = c10_empty(shape, ndim, dtype, device);
    if (t && dtype == CT_BOOL && device == CT_CPU && t->numel) /* no byte that is not a bool */
        memset(c10_data(t), 0, (size_t)t->numel);
    return c10_wrap(t);
}
ct_tensor *ct_empty(const int64_t *shape, int ndim, ct_dtype dtype) {
    return ct_empty_on(shape, ndim, dtype, CT_CPU);
}
ct_tensor *ct_full(const int64_t *shape, int ndim, double value, ct_dtype dtype) {
    if (c10_dtype_valid((int)dtype) && c10_check_value_fits(value, dtype) < 0) return NULL;
    return c10_wrap(c10_full(shape, ndim, value, dtype, CT_CPU));
}
ct_tensor *ct_zeros(const int64_t *shape, int ndim, ct_dtype dtype) { return ct_full(shape, ndim, 0, dtype); }
ct_tensor *ct_ones(const int64_t *shape, int ndim, ct_dtype dtype) { return ct_full(shape, ndim, 1, dtype); }
ct_tensor *ct_scalar(double value) { return ct_scalar_dtype(value, CT_FLOAT32); }
ct_tensor *ct_scalar_dtype(double value, ct_dtype dtype) { return ct_full(NULL, 0, value, dtype); }


/* torch 1.13's arange and linspace kernels run cpu_serial_kernel_vec (AVX2, as
 * Debian builds it) over one chunk: pairs of 32-byte vectors, each vector's
 * lanes base + k * step from a base computed at its first index, then the last
 * n % (2 W) elements one by one: W, and the end of the vectors' part. (Above
 * torch's grain, 32768 elements, its threads split the range and each part has
 * a tail: not followed.) */
#define LIN_CHUNK 4096 /* values made in double, then converted a chunk at a time: a multiple of every 2 W */
static int64_t vec_width(int64_t n, ct_dtype d, int64_t *nv) {
    int64_t w = 32 / (int64_t)c10_elsize[d];
    *nv = n - n % (2 * w);
    return w;
}
/* a * b + c in float (d CT_FLOAT32) or double, as torch's kernels compute it:
 * GCC contracts it to one fused multiply-add (its default -ffp-contract=fast,
 * with -mfma in the AVX2 build); never across a 16-bit type's rounding */
static double fma_dt(double a, double b, double c, ct_dtype d) {
    return d == CT_FLOAT32 ? fmaf((float)a, (float)b, (float)c) : fma(a, b, c);
}
/* v as a value of d: d's own arithmetic (a float result narrowed to the 16-bit
 * types as c10::Half's operators do), or an integer's truncation */
static inline double as_dt(double v, ct_dtype d) {
    switch (d) {
    case CT_FLOAT64: return v;
    case CT_FLOAT32: return (float)v;
    case CT_FLOAT16: return c10_h2f(c10_f2h((float)v));
    case CT_BFLOAT16: return c10_bf2f(c10_f2bf((float)v));
    default: {
        char tmp[8];
        c10_store_double(tmp, d, v);
        return c10_load_double(tmp, d);
    }
    }
}

/* arange's values: start + step * i in the accumulate type (double for float32 and
 * float64, float for the 16-bit floats), a vector's lanes from its base in the dtype;
 * integers in int64, wrapped into the dtype (exact either way). */
COLD_CODE static ct_tensor *fill_linear(int64_t n, double start, double step, ct_dtype dtype) {
    TensorImpl *t = c10_empty(&n, 1, dtype, CT_CPU);
    if (!t) return NULL;
    char *d = c10_data(t);
    int64_t es = (int64_t)c10_elsize[dtype];
    if (c10_is_integral(dtype, false)) {
        uint64_t s0 = (uint64_t)(int64_t)start, st = (uint64_t)(int64_t)step;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)(s0 + st * (uint64_t)i);
            c10_convert(d + i * es, dtype, &v, CT_INT64, 1);
        }
        return c10_wrap(t);
    }
    ct_dtype acc = dtype == CT_FLOAT16 || dtype == CT_BFLOAT16 ? CT_FLOAT32 : CT_FLOAT64;
    double s = as_dt(start, acc), st = as_dt(step, acc);
    int64_t nv, w = vec_width(n, dtype, &nv);
    double buf[LIN_CHUNK];
    for (int64_t c0 = 0; c0 < n; c0 += LIN_CHUNK) {
        int64_t c1 = n - c0 < LIN_CHUNK ? n : c0 + LIN_CHUNK;
        for (int64_t i = c0; i < c1;) {
            double v = as_dt(fma_dt(st, as_dt((double)i, acc), s, acc), dtype); /* a vector's base, or a tail element */
            buf[i - c0] = v; /* lane 0 is the base itself */
            for (int64_t k = 1; k < (i < nv ? w : 1); k++) /* base + k * step: fused for float32 / float64, not after a 16-bit base */
                buf[i - c0 + k] = acc == CT_FLOAT64 ? fma_dt((double)k, st, v, acc) : as_dt(v + as_dt(st * (double)k, acc), acc);
            i += i < nv ? w : 1;
        }
        c10_convert(d + c0 * es, dtype, buf, CT_FLOAT64, c1 - c0);
    }
    return c10_wrap(t);
}

/* torch's arange_out: start, end and step in the accumulate type (int64 for
 * integers, a checked conversion that truncates: a step of 2.5 steps by 2, one
 * of 0.7 is zero), then its checks in its order; the size from the doubles,
 * for int64 from the integers. */
COLD_CODE ct_tensor *ct_arange(double start, double end, double step, ct_dtype dtype) {
    if (!c10_dtype_valid((int)dtype)) return c10_error("arange: invalid dtype %d", (int)dtype);
    if (dtype == CT_BOOL) return c10_error("\"arange_cpu\" not implemented for 'Bool'");
    bool ints = c10_is_integral(dtype, false);
    double xs = start, xe = end, xst = step;
    if (ints) {
        if (c10_check_value_fits(start, CT_INT64) < 0 || c10_check_value_fits(end, CT_INT64) < 0 ||
            c10_check_value_fits(step, CT_INT64) < 0 || start == 0x1p63 || end == 0x1p63 || step == 0x1p63)
            return c10_error("arange: value cannot be converted to type int64_t without overflow");
        xs = trunc(start), xe = trunc(end), xst = trunc(step);
    }
    if (!(xst > 0 || xst < 0)) return c10_error("arange: step must be nonzero");
    if (!isfinite(xs) || !isfinite(xe)) return c10_error("arange: unsupported range: %g -> %g", xs, xe);
    if ((xst > 0 && xe < xs) || (xst < 0 && xe > xs))
        return c10_error("arange: upper bound and larger bound inconsistent with step sign");
    double n;
    if (dtype == CT_INT64) { /* exact: |end - start| fits uint64 once the sign agrees with the step's */
        int64_t a = (int64_t)xs, b = (int64_t)xe, k = (int64_t)xst;
        uint64_t span = k > 0 ? (uint64_t)b - (uint64_t)a : (uint64_t)a - (uint64_t)b;
        uint64_t mag = k > 0 ? (uint64_t)k : 0 - (uint64_t)k;
        n = (double)(span / mag + (span % mag != 0));
    } else {
        n = ceil((end - start) / step);
    }
    if (!(n >= 0 && n <= 9.2233720368547758e18)) return c10_error("arange: invalid size, possible overflow?");
    return fill_linear((int64_t)n, xs, xst, dtype);
}

/* base + step * k in linspace's step type: fused in float and double, each
 * product rounded first in the 16-bit types (c10::Half's operators) */
static double lin_term(double base, double step, double k, ct_dtype ar) {
    if (ar == CT_FLOAT32 || ar == CT_FLOAT64) return fma_dt(step, as_dt(k, ar), base, ar);
    return as_dt(base + as_dt(step * as_dt(k, ar), ar), ar);
}

COLD_CODE ct_tensor *ct_linspace(double start, double end, int64_t steps, ct_dtype dtype) {
    if (steps < 0) return c10_error("linspace: number of steps must be non-negative");
    if (!c10_dtype_valid((int)dtype)) return c10_error("linspace: invalid dtype %d", (int)dtype);
    if (dtype == CT_BOOL && steps > 1) /* torch's kernel runs from 2 steps on */
        return c10_error("linspace: \"linspace_cpu\" not implemented for 'Bool'");
    /* torch converts the ends to the dtype first, checked */
    if (c10_check_value_fits(start, dtype) < 0 || c10_check_value_fits(end, dtype) < 0) return NULL;
    TensorImpl *t = c10_empty(&steps, 1, dtype, CT_CPU);
    if (!t) return NULL;
    start = as_dt(start, dtype), end = as_dt(end, dtype);
    /* torch fills the first half from start and the second from end (one step:
     * start), in the dtype's arithmetic (integers: in double, truncated), a
     * vector's lanes from its base (vec_width) */
    bool fl = c10_is_float(dtype);
    ct_dtype ar = fl ? dtype : CT_FLOAT64; /* step_t */
    double step = steps > 1 ? as_dt(as_dt(end - start, ar) / as_dt((double)(steps - 1), ar), ar) : 0;
    int64_t half = steps > 1 ? steps / 2 : 1;
    char *d = c10_data(t);
    int64_t es = (int64_t)c10_elsize[dtype], nv, w = vec_width(steps, dtype, &nv);
    double buf[LIN_CHUNK];
    for (int64_t c0 = 0; c0 < steps; c0 += LIN_CHUNK) {
        int64_t c1 = steps - c0 < LIN_CHUNK ? steps : c0 + LIN_CHUNK;
        for (int64_t i = c0; i < c1;) { /* a vector's base (or a tail element), then base + k * step */
            double v = as_dt(i < half ? lin_term(start, step, (double)i, ar)
                                      : lin_term(end, -step, (double)(steps - i - 1), ar), dtype);
            buf[i - c0] = v; /* lane 0 is the base itself */
            for (int64_t k = 1; k < (i < nv ? w : 1); k++)
                buf[i - c0 + k] = as_dt(v + as_dt(as_dt((double)k, ar) * step, ar), ar);
            i += i < nv ? w : 1;
        }
        c10_convert(d + c0 * es, dtype, buf, CT_FLOAT64, c1 - c0);
    }
    return c10_wrap(t);
}

COLD_CODE ct_tensor *ct_eye(int64_t n, int64_t m, ct_dtype dtype) {
    if (n < 0) return c10_error("eye: n must be greater or equal to 0, got %lld", (long long)n);
    if (m == -1) m = n; /* torch.eye(n): m=None */
    if (m < 0) return c10_error("eye: m must be greater or equal to 0, got %lld", (long long)m);
    int64_t shape[2] = {n, m};
    TensorImpl *t = c10_full(shape, 2, 0, dtype, CT_CPU);
    if (!t) return NULL;
    char *d = c10_data(t);
    for (int64_t i = 0; i < n && i < m; i++) c10_store_double(d + (i * m + i) * (int64_t)c10_elsize[dtype], dtype, 1);
    return c10_wrap(t);
}

/* ---- random factories: the generator is in rng.c ---- */

static ct_tensor *random_tensor(const char *op, const int64_t *shape, int ndim, ct_dtype dtype, bool need_float) {
    if (!c10_dtype_valid((int)dtype)) return c10_error("%s: invalid dtype %d", op, (int)dtype);
    if (need_float && !c10_is_float(dtype))
        return c10_error("\"%s\" not implemented for '%s'", op, c10_dtype_cname(dtype));
    return c10_wrap(c10_empty(shape, ndim, dtype, CT_CPU));
}

ct_tensor *ct_rand(const int64_t *shape, int ndim, ct_dtype dtype) {
    ct_tensor *h = random_tensor("check_uniform_bounds", shape, ndim, dtype, true);
    if (h) c10_uniform_fill(c10_unwrap(h), 0, 1);
    return h;
}

ct_tensor *ct_randn(const int64_t *shape, int ndim, ct_dtype dtype) {
    ct_tensor *h = random_tensor("normal_kernel_cpu", shape, ndim, dtype, true);
    if (h) c10_normal_fill(c10_unwrap(h), 0, 1, false);
    return h;
}

/* (int64_t)v, saturating (a 16-bit dtype rounds large ends to inf) */
static int64_t sat_i64(double v) {
    return v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN : v == v ? (int64_t)v : 0;
}

ct_tensor *ct_randint(int64_t low, int64_t high, const int64_t *shape, int ndim, ct_dtype dtype) {
    if (low >= high)
        return c10_error("random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                         (long long)low, (long long)high);
    if (c10_dtype_valid((int)dtype) && c10_is_float(dtype)) {
        /* torch's update_from / update_to: the range's ends moved inside what the dtype holds */
        int64_t from = low, to = high;
        double f = c10_as_dtype((double)low, dtype), t1 = c10_as_dtype((double)(high - 1), dtype);
        bool wide = dtype == CT_FLOAT64;
        if (sat_i64(f) < low) from = sat_i64(wide ? nextafter(f, INFINITY) : (double)nextafterf((float)f, INFINITY));
        if (sat_i64(t1) >= high) to = sat_i64(wide ? nextafter(t1, -INFINITY) : (double)nextafterf((float)t1, -INFINITY));
        if (from >= to)
            return c10_error("random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, but got "
                             "from=%lld >= to=%lld", (long long)from, (long long)to);
    }
    /* from and to - 1 within the dtype's range, as torch's random_ checks (not float32 / 64, int64) */
    static const char *const names[] = {"bool", "unsigned char", "signed char", "short int", "int", "", "c10::Half",
                                        "c10::BFloat16"};
    static const double lo[] = {0, 0, -128, -32768, -2147483648.0, 0, -65504, -3.3895313892515355e38};
    static const double hi[] = {1, 255, 127, 32767, 2147483647.0, 0, 65504, 3.3895313892515355e38};
    if (c10_dtype_valid((int)dtype) && dtype <= CT_BFLOAT16 && dtype != CT_INT64) {
        if ((double)low < lo[dtype] || (double)low > hi[dtype])
            return c10_error("random_: from is out of bounds for %s", names[dtype]);
        if ((double)(high - 1) < lo[dtype] || (double)(high - 1) > hi[dtype])
            return c10_error("random_: to - 1 is out of bounds for %s", names[dtype]);
    }
    ct_tensor *h = random_tensor("random_", shape, ndim, dtype, false);
    if (h) c10_randint_fill(c10_unwrap(h), low, high);
    return h;
}

ct_tensor *ct_randperm(int64_t n, ct_dtype dtype) {
    if (n < 0) /* torch 1.13 checks the size first */
        return c10_error("randperm: Trying to create tensor with negative dimension %lld: [%lld]", (long long)n,
                         (long long)n);
    if (dtype == CT_BOOL) return c10_error("\"randperm\" not implemented for 'Bool'");
    if (dtype == CT_FLOAT16 && n > 65504) return c10_error("randperm: value cannot be converted to type at::Half without overflow");
    if (dtype == CT_FLOAT16 && n > 2049) return c10_error("randperm: n cannot be greater than 2049 for Half type.");
    if (c10_dtype_valid((int)dtype) && c10_is_integral(dtype, false) && n > 0 &&
        c10_check_value_fits((double)(n - 1), dtype) < 0)
        return NULL;
    ct_tensor *h = random_tensor("randperm", &n, 1, dtype, false);
    if (h) c10_randperm_fill(c10_unwrap(h));
    return h;
}

/* t's dims ordered as they lie in memory (outermost first), as PyTorch's
 * TensorIterator walks them; a view that is contiguous when t is dense. */
static TensorImpl *in_memory_order(const TensorImpl *t) {
    int64_t perm[CT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = i;
    for (int i = 1; i < t->ndim; i++) { /* stable: size-1 dims outermost, then larger strides first */
        int64_t d = perm[i];
        int j = i;
        while (j > 0) {
            int64_t p = perm[j - 1];
            bool before = t->sizes[p] != 1 && (t->sizes[d] == 1 || t->strides[p] < t->strides[d]);
            if (!before) break;
            perm[j] = p, j--;
        }
        perm[j] = d;
    }
    return c10_permute(t, perm, t->ndim);
}

/* In-place random fills of a non-contiguous tensor draw one number per element
 * in TensorIterator's order, as PyTorch does: the order of its memory-order
 * view (dims by decreasing stride), whether it is dense or not; normal_ then
 * takes the per-element Box-Muller path, never the blocks of 16. The numbers
 * are drawn into a contiguous temporary and written through that view. */
static int random_inplace(ct_tensor *h, int kind, double a, double b) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (kind != 2 && !c10_is_float(t->dtype))
        return c10_error_int("\"%s\" not implemented for '%s'", kind ? "normal_kernel_cpu" : "check_uniform_bounds",
                             c10_dtype_cname(t->dtype));
    if (c10_has_internal_overlap(t))
        return c10_error_int("unsupported operation: more than one element of the written-to tensor refers to a "
                             "single memory location. Please clone() the tensor before performing the operation.");
    if (t->device == CT_META) return 0;
    TensorImpl *tmp = t->is_contiguous ? c10_retain(t) : c10_empty_like(t);
    TensorImpl *order = t->is_contiguous ? NULL : in_memory_order(t);
    if (!tmp || (!t->is_contiguous && !order)) {
        c10_release(tmp);
        return -1;
    }
    if (kind == 0) c10_uniform_fill(tmp, a, b);
    else if (kind == 1) c10_normal_fill(tmp, a, b, !t->is_contiguous);
    else c10_bernoulli_fill(tmp, a);
    if (order) c10_copy_strided(order, tmp);
    c10_release(order);
    c10_release(tmp);
    c10_bump_version(t);
    return 0;
}

int ct_uniform_(ct_tensor *h, double from, double to) {
    TensorImpl *t = c10_unwrap(h);
    if (t && c10_is_float(t->dtype)) { /* torch's check_uniform_bounds: finite in the dtype, in order */
        static const char *const names[] = {"c10::Half", "c10::BFloat16", "float", "double"};
        static const double max[] = {65504.0, 3.3895313892515355e38, 3.4028234663852886e38, 1.7976931348623157e308};
        int k = t->dtype - CT_FLOAT16;
        if (!(from >= -max[k] && from <= max[k])) return c10_error_int("from is out of bounds for %s", names[k]);
        if (!(to >= -max[k] && to <= max[k])) return c10_error_int("to is out of bounds for %s", names[k]);
        if (from > to)
            return c10_error_int("uniform_ expects to return a [from, to) range, but found from=%g > to=%g", from, to);
        if (to - from > max[k])
            return c10_error_int("uniform_ expects to-from <= std::numeric_limits<%s>::max(), but found to=%g and "
                                 "from=%g which result in to-from to exceed the limit", c10_dtype_cname(t->dtype), to, from);
    }
    return random_inplace(h, 0, from, to);
}
int ct_normal_(ct_tensor *t, double mean, double std) {
    if (!c10_unwrap(t)) return -1;
    if (!(std >= 0)) return c10_error_int("normal expects std >= 0.0, but found std %g", std);
    return random_inplace(t, 1, mean, std);
}
int ct_bernoulli_(ct_tensor *t, double p) {
    if (!c10_unwrap(t)) return -1;
    if (!(p >= 0 && p <= 1)) return c10_error_int("bernoulli_ expects p to be in [0, 1], but got p=%g", p);
    return random_inplace(t, 2, p, 0);
}

/* -------------------------------------------------------------- inspection */

int ct_ndim(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? t->ndim : -1;
}

int64_t ct_size(const ct_tensor *h, int dim) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    int d = c10_wrap_dim(dim, t->ndim);
    if (d < 0) return -1;
    return t->ndim ? t->sizes[d] : 1;
}

int64_t ct_stride(const ct_tensor *h, int dim) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (t->ndim == 0) return c10_error_int("stride: a 0-dim tensor has no strides");
    int d = c10_wrap_dim(dim, t->ndim);
    return d < 0 ? -1 : t->strides[d];
}

const int64_t *ct_sizes(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? t->sizes : NULL;
}
const int64_t *ct_strides(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? t->strides : NULL;
}
int64_t ct_numel(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? t->numel : -1;
}
int64_t ct_storage_offset(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? t->offset : -1;
}
ct_dtype ct_dtype_of(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? t->dtype : CT_FLOAT32;
}
ct_device ct_device_of(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? t->device : CT_CPU;
}
bool ct_is_contiguous(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t && t->is_contiguous;
}
bool ct_shares_storage(const ct_tensor *a, const ct_tensor *b) {
    TensorImpl *x = c10_unwrap(a), *y = x ? c10_unwrap(b) : NULL;
    return x && y && x->storage == y->storage;
}
void *ct_data_ptr(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    if (t && t->device == CT_META) return c10_error("data_ptr: meta tensors have no data");
    return t ? c10_data(t) : NULL;
}

double ct_item(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return NAN;
    if (t->numel != 1) {
        c10_error("a Tensor with %lld elements cannot be converted to Scalar", (long long)t->numel);
        return NAN;
    }
    if (t->device == CT_META) {
        c10_error("Tensor.item() cannot be called on meta tensors");
        return NAN;
    }
    return c10_get(t, 0);
}

int ct_copy_to_buffer(const ct_tensor *h, void *out, ct_dtype dtype) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (t->device == CT_META) return c10_error_int("copy_to_buffer: meta tensors have no data");
    if (!out && t->numel) return c10_error_int("copy_to_buffer: out is NULL");
    TensorImpl *dst = blob(out, t->sizes, t->ndim, dtype, no_delete, NULL);
    if (!dst) return -1;
    c10_copy_strided(dst, t);
    c10_release(dst);
    return 0;
}
