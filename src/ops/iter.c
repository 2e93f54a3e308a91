/* iter.c: the elementwise engine, after PyTorch's TensorIterator.
 *
 *   1. broadcast the inputs' shapes; allocate the output in the layout of the
 *      inputs (a transposed input gives a transposed output, as in PyTorch) or
 *      check the given output (in-place and out= forms);
 *   2. reorder dimensions so that the one with the smallest output stride is
 *      innermost, then coalesce dimensions that are contiguous with each other
 *      in every operand (a contiguous add becomes one 1-d loop);
 *   3. split the elements over OpenMP threads above a grain size;
 *   4. walk each thread's range along the inner dimension. Operands that are
 *      contiguous and of the kernel's dtype are passed straight to the kernel;
 *      the others (strided, broadcast, another dtype) are gathered into small
 *      per-thread buffers first, and the output scattered back.
 * Kernels therefore only ever see contiguous arrays of one dtype: plain loops
 * the compiler vectorises. The kernel is chosen once per call. */
#include "ops/ops.h"
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define CHUNK 2048               /* elements per buffered step */
#define GRAIN 32768              /* below this many elements, one thread */
#define MAXOPS 5                 /* output + 4 inputs */

typedef struct {
    int nops, ndim;
    int64_t shape[CT_MAX_DIMS];           /* dim 0 innermost */
    int64_t stride[MAXOPS][CT_MAX_DIMS];  /* bytes */
    char *data[MAXOPS];
    ct_dtype dtype[MAXOPS];               /* operands' storage dtypes */
    ct_dtype want[MAXOPS];                /* the dtypes the kernel sees */
} Plan;

/* ---- type promotion: PyTorch's ResultTypeState ---- */

ct_dtype scalar_dtype(double v) {
    return (v > -9.2e18 && v < 9.2e18 && v == (double)(int64_t)v) ? CT_INT64 : CT_FLOAT32; /* NaN: float */
}

static void update(ct_dtype *slot, bool *has, ct_dtype d) {
    *slot = *has ? c10_promote(*slot, d) : d;
    *has = true;
}

void promote_add_tensor(PromoteState *st, const TensorImpl *t) {
    if (t->is_wrapped_number) {
        /* a wrapped float counts as the default dtype, float32 */
        update(&st->wrapped, &st->has_wrapped, c10_is_float(t->dtype) ? CT_FLOAT32 : t->dtype);
    } else if (t->ndim == 0) {
        update(&st->zero, &st->has_zero, t->dtype);
    } else {
        update(&st->dim, &st->has_dim, t->dtype);
    }
}

void promote_add_scalar(PromoteState *st, double v) { update(&st->wrapped, &st->has_wrapped, scalar_dtype(v)); }

static int category(ct_dtype d) { return d == CT_BOOL ? 0 : c10_is_float(d) ? 2 : 1; }

/* combine_categories(higher, lower) from ATen/native/TypeProperties.cpp */
static ct_dtype combine(ct_dtype higher, bool has_higher, ct_dtype lower, bool has_lower, bool *has) {
    *has = has_higher || has_lower;
    if (!has_higher) return lower;
    if (!has_lower) return higher;
    if (c10_is_float(higher)) return higher;
    if (higher == CT_BOOL || c10_is_float(lower)) return c10_promote(higher, lower);
    return category(lower) > category(higher) ? c10_promote(higher, lower) : higher;
}

ct_dtype promote_result(const PromoteState *st) {
    bool h1, h2;
    ct_dtype zw = combine(st->zero, st->has_zero, st->wrapped, st->has_wrapped, &h1);
    ct_dtype r = combine(st->dim, st->has_dim, zw, h1, &h2);
    return h2 ? r : CT_FLOAT32;
}

ct_dtype ct_result_type(const ct_tensor *a, const ct_tensor *b) {
    TensorImpl *x = c10_unwrap(a), *y = x ? c10_unwrap(b) : NULL;
    if (!y) return CT_FLOAT32;
    PromoteState st = {0};
    promote_add_tensor(&st, x);
    promote_add_tensor(&st, y);
    return promote_result(&st);
}

/* A CPU 0-dim tensor (like a Python number) may join tensors of any device. */
bool at_same_device(const char *op, const TensorImpl *a, const TensorImpl *b) {
    if (a->device == b->device || (a->ndim == 0 && a->device == CT_CPU) || (b->ndim == 0 && b->device == CT_CPU))
        return true;
    c10_error("%s: Expected all tensors to be on the same device, but found at least two devices, meta and cpu!", op);
    return false;
}

/* PyTorch's assert_no_partial_overlap, for the cases it decides: two dense
 * tensors over the same storage whose memory ranges overlap without being the
 * same elements. */
static bool partial_overlap(const TensorImpl *out, const TensorImpl *in) {
    if (out->storage != in->storage || !out->is_contiguous || !in->is_contiguous || !out->numel || !in->numel)
        return false;
    int64_t a0 = out->offset * (int64_t)c10_elsize[out->dtype], a1 = a0 + out->numel * (int64_t)c10_elsize[out->dtype];
    int64_t b0 = in->offset * (int64_t)c10_elsize[in->dtype], b1 = b0 + in->numel * (int64_t)c10_elsize[in->dtype];
    if (a0 == b0 && a1 == b1) return false; /* the same elements: fine */
    return a0 < b1 && b0 < a1;
}

/* ---- output allocation in the inputs' layout ---- */

/* PyTorch's TensorIterator::reorder_dimensions: should dim d0 go inside (be
 * more inner than) dim d1? Ask each input in turn: a broadcast dim (stride 0)
 * says nothing, a smaller stride is more inner, equal strides put the smaller
 * size inside. 1: swap, -1: keep, 0: no input knows. */
static int should_swap(int64_t (*st)[CT_MAX_DIMS], int nin, const int64_t *shape, int d0, int d1) {
    for (int k = 0; k < nin; k++) {
        int64_t s0 = st[k][d0], s1 = st[k][d1];
        if (s0 == 0 || s1 == 0) continue;
        if (s0 < s1) return -1;
        if (s0 > s1) return 1;
        if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
}

/* The output of an elementwise op, laid out as PyTorch lays it out: dims in
 * the order the inputs' strides suggest (a transposed input gives a transposed
 * output), contiguous in that order. */
static TensorImpl *alloc_output(TensorImpl *const *in, int nin, const int64_t *shape, int ndim, ct_dtype dtype,
                                ct_device device) {
    if (ndim < 2) return c10_empty(shape, ndim, dtype, device);
    int64_t st[MAXOPS][CT_MAX_DIMS];
    for (int k = 0; k < nin; k++)
        for (int i = 0; i < ndim; i++) {
            int d = i - (ndim - in[k]->ndim);
            st[k][i] = d < 0 || (in[k]->sizes[d] == 1 && shape[i] != 1) ? 0 : in[k]->strides[d];
        }
    int perm[CT_MAX_DIMS]; /* perm[0] is the innermost dim */
    for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
    bool moved = false;
    for (int i = 1; i < ndim; i++) /* insertion sort, as PyTorch does it */
        for (int dim1 = i, dim0 = i - 1; dim0 >= 0; dim0--) {
            int c = should_swap(st, nin, shape, perm[dim0], perm[dim1]);
            if (c > 0) {
                int t = perm[dim0];
                perm[dim0] = perm[dim1], perm[dim1] = t, dim1 = dim0;
                moved = true;
            } else if (c < 0) {
                break;
            }
        }
    if (!moved) return c10_empty(shape, ndim, dtype, device);
    int64_t psizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    for (int j = 0; j < ndim; j++) psizes[j] = shape[perm[ndim - 1 - j]];
    TensorImpl *t = c10_empty(psizes, ndim, dtype, device);
    if (!t) return NULL;
    for (int j = 0; j < ndim; j++) strides[perm[ndim - 1 - j]] = t->strides[j];
    memcpy(t->sizes, shape, (size_t)ndim * sizeof *shape);
    memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
    c10_refresh(t);
    return t;
}

/* Dense and non-overlapping: some permutation of the dims is contiguous. */
static bool dense_non_overlapping(const TensorImpl *t) {
    if (t->is_contiguous) return true;
    int perm[CT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = i;
    for (int i = 1; i < t->ndim; i++) { /* innermost (smallest stride) first */
        int d = perm[i], j = i;
        while (j > 0 && t->strides[perm[j - 1]] > t->strides[d]) perm[j] = perm[j - 1], j--;
        perm[j] = d;
    }
    int64_t expect = 1;
    for (int i = 0; i < t->ndim; i++) {
        int d = perm[i];
        if (t->sizes[d] == 1) continue;
        if (t->strides[d] != expect) return false;
        expect *= t->sizes[d];
    }
    return true;
}

TensorImpl *at_empty_strided(const int64_t *sizes, const int64_t *strides, int ndim, ct_dtype dtype,
                             ct_device device) {
    TensorImpl geom = {.ndim = ndim};
    memcpy(geom.sizes, sizes, sizeof(int64_t) * (size_t)ndim);
    memcpy(geom.strides, strides, sizeof(int64_t) * (size_t)ndim);
    c10_refresh(&geom);
    TensorImpl *o = c10_empty(sizes, ndim, dtype, device);
    if (o && !geom.is_contiguous && dense_non_overlapping(&geom)) {
        memcpy(o->strides, strides, sizeof(int64_t) * (size_t)ndim);
        c10_refresh(o);
    }
    return o;
}

TensorImpl *at_empty_like(const TensorImpl *t, ct_dtype dtype) {
    if (t->is_contiguous || t->ndim < 2) return c10_empty(t->sizes, t->ndim, dtype, t->device);
    if (dense_non_overlapping(t)) {
        TensorImpl *o = c10_empty(t->sizes, t->ndim, dtype, t->device);
        if (o) {
            memcpy(o->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
            c10_refresh(o);
        }
        return o;
    }
    TensorImpl *in[1] = {(TensorImpl *)t};
    return alloc_output(in, 1, t->sizes, t->ndim, dtype, t->device);
}

/* ---- planning: broadcast strides, reorder, coalesce ---- */

static void plan_operand(Plan *pl, int k, const TensorImpl *t, int ndim) {
    int64_t es = (int64_t)c10_elsize[t->dtype];
    for (int i = 0; i < ndim; i++) {
        int d = i - (ndim - t->ndim);
        pl->stride[k][i] = (d < 0 || t->sizes[d] == 1) ? 0 : t->strides[d] * es;
    }
    pl->data[k] = c10_data(t);
    pl->dtype[k] = t->dtype;
}

static void reorder_and_coalesce(Plan *pl, const int64_t *shape, int ndim) {
    /* dims sorted by increasing output stride; dim 0 innermost */
    int order[CT_MAX_DIMS], n = 0;
    for (int i = ndim - 1; i >= 0; i--) order[n++] = i;
    for (int i = 1; i < n; i++) {
        int d = order[i], j = i;
        while (j > 0 && pl->stride[0][order[j - 1]] > pl->stride[0][d]) order[j] = order[j - 1], j--;
        order[j] = d;
    }
    int64_t sh[CT_MAX_DIMS], st[MAXOPS][CT_MAX_DIMS];
    int m = 0;
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (shape[d] == 1) continue;
        bool merge = m > 0;
        for (int k = 0; k < pl->nops && merge; k++)
            merge = pl->stride[k][d] == st[k][m - 1] * sh[m - 1];
        if (merge) {
            sh[m - 1] *= shape[d];
        } else {
            sh[m] = shape[d];
            for (int k = 0; k < pl->nops; k++) st[k][m] = pl->stride[k][d];
            m++;
        }
    }
    if (m == 0) { /* a single element */
        sh[0] = 1;
        for (int k = 0; k < pl->nops; k++) st[k][0] = 0;
        m = 1;
    }
    pl->ndim = m;
    memcpy(pl->shape, sh, sizeof sh);
    for (int k = 0; k < pl->nops; k++) memcpy(pl->stride[k], st[k], sizeof st[k]);
}

/* ---- the loop ---- */

static void gather(char *dst, ct_dtype dd, const char *src, int64_t stride, ct_dtype sd, int64_t n) {
    int64_t es = (int64_t)c10_elsize[sd], ed = (int64_t)c10_elsize[dd];
    if (stride == es) {
        c10_convert(dst, dd, src, sd, n);
    } else if (stride == 0) { /* a broadcast element: convert once, then fill */
        c10_convert(dst, dd, src, sd, 1);
        switch (ed) {
#define REPEAT(T)                                                                        \
    for (int64_t i = 1; i < n; i++) ((T *)dst)[i] = ((T *)dst)[0];                       \
    break;
        case 1: REPEAT(uint8_t)
        case 2: REPEAT(uint16_t)
        case 4: REPEAT(uint32_t)
        default: REPEAT(uint64_t)
#undef REPEAT
        }
    } else if (dd == sd) {
        switch (es) {
#define STRIDED(T)                                                                       \
    for (int64_t i = 0; i < n; i++) ((T *)dst)[i] = *(const T *)(src + i * stride);      \
    break;
        case 1: STRIDED(uint8_t)
        case 2: STRIDED(uint16_t)
        case 4: STRIDED(uint32_t)
        default: STRIDED(uint64_t)
        }
    } else {
        for (int64_t i = 0; i < n; i++) c10_convert(dst + i * ed, dd, src + i * stride, sd, 1);
    }
}

static void scatter(char *dst, ct_dtype dd, int64_t stride, const char *src, ct_dtype sd, int64_t n) {
    int64_t es = (int64_t)c10_elsize[sd], ed = (int64_t)c10_elsize[dd];
    if (stride == ed) {
        c10_convert(dst, dd, src, sd, n);
    } else if (dd == sd) {
        switch (ed) {
#define SCATTERED(T)                                                                     \
    for (int64_t i = 0; i < n; i++) *(T *)(dst + i * stride) = ((const T *)src)[i];      \
    break;
        case 1: SCATTERED(uint8_t)
        case 2: SCATTERED(uint16_t)
        case 4: SCATTERED(uint32_t)
        default: SCATTERED(uint64_t)
        }
    } else {
        for (int64_t i = 0; i < n; i++) c10_convert(dst + i * stride, dd, src + i * es, sd, 1);
    }
}

static _Thread_local _Alignas(64) char buffers[MAXOPS][CHUNK * 8];

static void run_range(const Plan *pl, int64_t begin, int64_t end, ew_kernel kernel, const double *s) {
    int64_t idx[CT_MAX_DIMS];
    int64_t rest = begin;
    for (int d = 0; d < pl->ndim; d++) {
        idx[d] = rest % pl->shape[d];
        rest /= pl->shape[d];
    }
    bool direct[MAXOPS], all_direct = true;
    for (int k = 0; k < pl->nops; k++) {
        direct[k] = pl->dtype[k] == pl->want[k] && pl->stride[k][0] == (int64_t)c10_elsize[pl->want[k]];
        all_direct &= direct[k];
    }
    char *p[MAXOPS];
    while (begin < end) {
        int64_t n = pl->shape[0] - idx[0];
        if (n > end - begin) n = end - begin;
        if (!all_direct && n > CHUNK) n = CHUNK;
        for (int k = 0; k < pl->nops; k++) {
            char *ptr = pl->data[k];
            for (int d = 0; d < pl->ndim; d++) ptr += idx[d] * pl->stride[k][d];
            if (direct[k]) p[k] = ptr;
            else {
                p[k] = buffers[k];
                if (k > 0) gather(buffers[k], pl->want[k], ptr, pl->stride[k][0], pl->dtype[k], n);
            }
        }
        kernel(n, p, s);
        if (!direct[0]) {
            char *ptr = pl->data[0];
            for (int d = 0; d < pl->ndim; d++) ptr += idx[d] * pl->stride[0][d];
            scatter(ptr, pl->dtype[0], pl->stride[0][0], buffers[0], pl->want[0], n);
        }
        begin += n;
        idx[0] += n;
        for (int d = 0; d < pl->ndim - 1 && idx[d] == pl->shape[d]; d++) {
            idx[d] = 0;
            idx[d + 1]++;
        }
    }
}

static void run_plan(const Plan *pl, int64_t numel, ew_kernel kernel, const double *s) {
#ifdef _OPENMP
    int nt = numel >= GRAIN && !omp_in_parallel() ? omp_get_max_threads() : 1;
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        {
            int id = omp_get_thread_num(), n = omp_get_num_threads();
            int64_t lo = numel * id / n, hi = numel * (id + 1) / n;
            run_range(pl, lo, hi, kernel, s);
        }
        return;
    }
#endif
    run_range(pl, 0, numel, kernel, s);
}

/* The common case without planning: a contiguous output and inputs that are
 * either contiguous with the output's element count (hence its shape up to
 * size-1 dims) or single elements. One flat dimension. */
static bool simple_plan(const ElementwiseSpec *spec, TensorImpl *const *in, TensorImpl *o, ew_kernel kernel,
                        const double *s) {
    if (!o->is_contiguous) return false;
    Plan pl;
    pl.nops = spec->ninputs + 1;
    pl.ndim = 1;
    pl.shape[0] = o->numel;
    pl.data[0] = c10_data(o);
    pl.dtype[0] = o->dtype;
    pl.want[0] = spec->out_dtype;
    pl.stride[0][0] = (int64_t)c10_elsize[o->dtype];
    for (int k = 0; k < spec->ninputs; k++) {
        const TensorImpl *t = in[k];
        bool scalar = t->numel == 1;
        if (!scalar && !(t->is_contiguous && t->numel == o->numel)) return false;
        pl.data[k + 1] = c10_data(t);
        pl.dtype[k + 1] = t->dtype;
        pl.want[k + 1] = spec->in_dtype;
        pl.stride[k + 1][0] = scalar && o->numel > 1 ? 0 : (int64_t)c10_elsize[t->dtype];
    }
    run_plan(&pl, o->numel, kernel, s);
    return true;
}

/* One element (every input then has one too): the kernel straight on the
 * operands, through one-element buffers where a dtype differs. Chains of
 * scalar ops, autograd's overhead case, live here. */
static void run_one(const ElementwiseSpec *spec, TensorImpl *const *in, TensorImpl *o, ew_kernel kernel,
                    const double *s) {
    _Alignas(16) char buf[MAXOPS][16];
    char *p[MAXOPS];
    p[0] = o->dtype == spec->out_dtype ? c10_data(o) : buf[0];
    for (int k = 0; k < spec->ninputs; k++) {
        const TensorImpl *t = in[k];
        p[k + 1] = c10_data(t);
        if (t->dtype != spec->in_dtype) {
            c10_convert(buf[k + 1], spec->in_dtype, p[k + 1], t->dtype, 1);
            p[k + 1] = buf[k + 1];
        }
    }
    kernel(1, p, s);
    if (p[0] == buf[0]) c10_convert(c10_data(o), o->dtype, buf[0], spec->out_dtype, 1);
}

/* Scalars (0-dim CPU operands, a new output): nothing to broadcast or plan. */
static bool all_cpu_scalars(const ElementwiseSpec *spec, TensorImpl *const *in) {
    for (int k = 0; k < spec->ninputs; k++)
        if (in[k]->ndim || in[k]->device != CT_CPU) return false;
    return true;
}

int ew_run(const ElementwiseSpec *spec, TensorImpl *const *in, TensorImpl **out, ew_kernel kernel,
           const double *s) {
    if (!*out && all_cpu_scalars(spec, in)) {
        TensorImpl *o = c10_empty(NULL, 0, spec->result_dtype, CT_CPU);
        if (!o) return -1;
        run_one(spec, in, o, kernel, s);
        *out = o;
        return 0;
    }
    int64_t shape[CT_MAX_DIMS];
    int ndim = 0;
    if (*out) { /* in-place and out=: the inputs broadcast to the output's shape */
        ndim = (*out)->ndim;
        memcpy(shape, (*out)->sizes, sizeof(int64_t) * (size_t)ndim);
    }
    for (int k = 0; k < spec->ninputs; k++) {
        if (k && !at_same_device(spec->op, in[0], in[k])) return -1;
        int n = c10_broadcast_shape(shape, ndim, in[k]->sizes, in[k]->ndim, shape);
        if (n < 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            return c10_error_int("%s: %s", spec->op, msg);
        }
        ndim = n;
    }
    ct_device device = CT_CPU; /* meta wins: CPU scalars may join meta tensors */
    for (int k = 0; k < spec->ninputs; k++)
        if (in[k]->device == CT_META) device = CT_META;
    TensorImpl *o = *out;
    if (o) {
        bool same = o->ndim == ndim;
        for (int i = 0; same && i < ndim; i++) same = o->sizes[i] == shape[i];
        if (!same)
            return c10_error_int("%s: output with shape %s doesn't match the broadcast shape %s", spec->op,
                                 c10_shape_str(o->sizes, o->ndim), c10_shape_str(shape, ndim));
        if (c10_has_internal_overlap(o))
            return c10_error_int("%s: unsupported operation: more than one element of the written-to tensor "
                                 "refers to a single memory location. Please clone() the tensor before "
                                 "performing the operation.", spec->op);
        for (int k = 0; k < spec->ninputs; k++)
            if (partial_overlap(o, in[k]))
                return c10_error_int("%s: unsupported operation: some elements of the input tensor and the "
                                     "written-to tensor refer to a single memory location. Please clone() the "
                                     "tensor before performing the operation.", spec->op);
    } else {
        o = alloc_output(in, spec->ninputs, shape, ndim, spec->result_dtype, device);
        if (!o) return -1;
    }
    if (o->device != CT_META && o->numel == 1) {
        run_one(spec, in, o, kernel, s);
    } else if (o->device != CT_META && o->numel > 0 && simple_plan(spec, in, o, kernel, s)) {
        /* done: contiguous operands of one shape (or single elements) */
    } else if (o->device != CT_META && o->numel > 0) {
        Plan pl;
        pl.nops = spec->ninputs + 1;
        plan_operand(&pl, 0, o, ndim);
        pl.want[0] = spec->out_dtype;
        for (int k = 0; k < spec->ninputs; k++) {
            plan_operand(&pl, k + 1, in[k], ndim);
            pl.want[k + 1] = spec->in_dtype;
        }
        reorder_and_coalesce(&pl, shape, ndim);
        run_plan(&pl, o->numel, kernel, s);
    }
    *out = o;
    return 0;
}
