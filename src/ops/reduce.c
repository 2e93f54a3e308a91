/* reduce.c: reductions (sum mean prod max min amax amin argmax argmin var std
 * norm logsumexp all any), scans (cumsum cumprod) and softmax / log_softmax.
 *
 * The reduction engine, after the reduce path of PyTorch's TensorIterator:
 *   1. split the input's dims into kept dims (the output's) and reduced dims,
 *      in logical order, dropping size-1 dims and coalescing neighbours that
 *      are contiguous with each other (a full reduction of a contiguous tensor
 *      becomes one run of numel elements);
 *   2. when the reduction is a sum and the innermost kept dim has a small
 *      stride, vectorise across it: a block of the output row lives in
 *      accumulators and every reduced position adds a row into them
 *      (sum(dim=0) of [4096, 4096] streams the rows; rows are read in place
 *      when contiguous or a ::2 slice of the float dtypes, int32 or int64,
 *      the others are gathered and converted first, and prefetched);
 *   3. when each output is one contiguous row of at most 1 KB, reduce 16 (8)
 *      rows per kernel call, vectorised across the rows (sum, mean, amax,
 *      amin of the float dtypes, int32 and int64, norm 1 / 2 of the floats;
 *      with AVX-512);
 *   4. otherwise reduce each output over its reduced positions, run by run:
 *      contiguous runs of the compute dtype (for sums: runs of any dtype,
 *      contiguous or a ::2 slice) go straight to the op's kernel (several
 *      accumulator lanes, vectorised), once per output when the run is the
 *      whole reduction; the others (strided, another dtype) are gathered
 *      into a small per-thread buffer first;
 *   5. threads split the outputs, or, when there are fewer outputs than
 *      threads, each output's reduced range in fixed parts combined in order:
 *      results are deterministic for a given thread count.
 * Float sums accumulate in double (float16/bfloat16/float32 inputs load as
 * float), integer and bool sums in int64 (PyTorch's dtype rules). Outputs are
 * allocated contiguous, as PyTorch's reductions do. */
#include "ops/ops.h"
#include "ops/kernels/reduce_kernels.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define GRAIN 32768   /* below this many input elements, one thread */
#define GCHUNK 1024   /* elements per gathered step */

/* ------------------------------------------------------------ dim parsing */

/* mask[d] for each of dims (wrapped); ndims == 0 marks every dim (PyTorch's
 * dim=[] for reductions). "dim 0 appears multiple times in the list of dims". */
int at_parse_dims(const char *op, const int64_t *dims, int ndims, int tensor_ndim, bool *mask) {
    for (int d = 0; d < CT_MAX_DIMS; d++) mask[d] = ndims == 0 && d < tensor_ndim;
    if (ndims < 0 || ndims > CT_MAX_DIMS) return c10_error_int("%s: too many dims (%d)", op, ndims);
    bool seen0 = false; /* dim 0 / -1 of a 0-dim tensor: nothing to reduce, but only once */
    for (int k = 0; k < ndims; k++) {
        int d = c10_wrap_dim(dims[k], tensor_ndim);
        if (d < 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            return c10_error_int("%s: %s", op, msg);
        }
        if (tensor_ndim == 0 ? seen0 : mask[d])
            return c10_error_int("%s: dim %d appears multiple times in the list of dims", op, d);
        if (tensor_ndim == 0) seen0 = true;
        else mask[d] = true;
    }
    return 0;
}

/* Wraps a single dim with the op's name in front of the message. */
static int wrap_dim(const char *op, int64_t dim, int ndim) {
    int d = c10_wrap_dim(dim, ndim);
    if (d < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        return c10_error_int("%s: %s", op, msg);
    }
    return d;
}

/* The output shape of a reduction over mask. */
static int reduced_shape(const TensorImpl *t, const bool *mask, bool keepdim, int64_t *shape) {
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (!mask[d]) shape[n++] = t->sizes[d];
        else if (keepdim) shape[n++] = 1;
    }
    return n;
}

/* ---------------------------------------------------------------- the plan */

typedef struct RPlan {
    const char *in;
    ct_dtype dt;                       /* input dtype */
    int ct;                            /* compute type: CT_F32 / CT_F64 / CT_I64 */
    int nk, nr;                        /* kept / reduced dims, outermost first, >= 1 each */
    int64_t ks[CT_MAX_DIMS], kst[CT_MAX_DIMS]; /* kept sizes, input strides (bytes) */
    int64_t rs[CT_MAX_DIMS], rst[CT_MAX_DIMS]; /* reduced sizes, input strides (bytes) */
    int64_t nout, nred;
} RPlan;

static int compute_type(ct_dtype d) {
    if (d == CT_FLOAT64) return CT_F64;
    if (c10_is_float(d)) return CT_F32;
    return CT_I64;
}
static const ct_dtype ct_dtype_of_compute[3] = {CT_FLOAT32, CT_FLOAT64, CT_INT64};

/* any_order: the reduced dims may be walked in memory order (largest stride
 * outermost, broadcast dims outermost of all), as PyTorch reorders them; not
 * for the reductions that return an index along them. */
static void plan_build(RPlan *pl, const TensorImpl *t, const bool *mask, bool any_order) {
    int64_t es = (int64_t)c10_elsize[t->dtype];
    pl->in = c10_data(t);
    pl->dt = t->dtype;
    pl->ct = compute_type(t->dtype);
    pl->nk = pl->nr = 0;
    pl->nout = pl->nred = 1;
    int order[CT_MAX_DIMS], nred = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (mask[d]) pl->nred *= t->sizes[d];
        else pl->nout *= t->sizes[d];
    }
    /* kept dims in logical order (the output's), then the reduced dims */
    for (int d = 0; d < t->ndim; d++)
        if (!mask[d]) order[nred++] = d;
    int nkept = nred;
    for (int d = 0; d < t->ndim; d++)
        if (mask[d]) order[nred++] = d;
    for (int i = nkept + 1; any_order && i < nred; i++) { /* insertion sort, stable */
        int d = order[i], j = i;
        uint64_t sd = (uint64_t)t->strides[d] - 1; /* stride 0 sorts as the largest */
        while (j > nkept && (uint64_t)t->strides[order[j - 1]] - 1 < sd) order[j] = order[j - 1], j--;
        order[j] = d;
    }
    for (int i = 0; i < nred; i++) {
        int d = order[i];
        int64_t sz = t->sizes[d], st = t->strides[d] * es;
        if (sz == 1) continue;
        int64_t *S = mask[d] ? pl->rs : pl->ks, *ST = mask[d] ? pl->rst : pl->kst;
        int *n = mask[d] ? &pl->nr : &pl->nk;
        if (*n > 0 && ST[*n - 1] == st * sz) { /* coalesce with the previous one */
            S[*n - 1] *= sz;
            ST[*n - 1] = st;
        } else {
            S[*n] = sz;
            ST[*n] = st;
            (*n)++;
        }
    }
    if (pl->nk == 0) pl->ks[0] = 1, pl->kst[0] = 0, pl->nk = 1;
    if (pl->nr == 0) pl->rs[0] = 1, pl->rst[0] = 0, pl->nr = 1;
}

/* byte offset of output o's first input element */
static int64_t kept_offset(const RPlan *pl, int64_t o) {
    if (pl->nk == 1) return o * pl->kst[0]; /* per output of a short row: no divisions */
    int64_t off = 0;
    for (int d = pl->nk - 1; d >= 0; d--) {
        off += (o % pl->ks[d]) * pl->kst[d];
        o /= pl->ks[d];
    }
    return off;
}

/* ---------------------------------------------------------------- gather */

/* float32 rows into double, vectorised (the callers are compiled for size) */
static void widen(void *x, const void *g, int64_t n) {
    for (int64_t j = 0; j < n; j++) ((double *)x)[j] = ((const float *)g)[j];
}

/* n contiguous elements of sd into cd (the compute dtype): the 16-bit floats,
 * float32 into double, the narrower integers and bools in vectorised loops,
 * the rest through c10_convert. */
static void convert_run(void *dst, ct_dtype cd, const char *src, ct_dtype sd, int64_t n) {
    if ((sd == CT_BFLOAT16 || sd == CT_FLOAT16) && cd == CT_FLOAT32) {
        c10_half_to_float_n(dst, (const uint16_t *)src, sd == CT_BFLOAT16, n);
        return;
    }
    if (sd == CT_FLOAT32 && cd == CT_FLOAT64) { /* c10_convert's loop: 4x slower */
        widen(dst, src, n);
        return;
    }
    int64_t *restrict o = dst;
    switch (cd == CT_INT64 ? sd : CT_INT64) { /* integers (bools) widen to int64 in plain loops */
#define WIDEN(T)                                                                         \
    for (int64_t i = 0; i < n; i++) o[i] = ((const T *)src)[i];                           \
    return;
    case CT_BOOL: /* a mask's sum(0): c10_convert's loop took 7x the time of uint8's */
        for (int64_t i = 0; i < n; i++) o[i] = ((const uint8_t *)src)[i] != 0;
        return;
    case CT_UINT8: WIDEN(uint8_t)
    case CT_INT8: WIDEN(int8_t)
    case CT_INT16: WIDEN(int16_t)
    case CT_INT32: WIDEN(int32_t)
#undef WIDEN
    default: break;
    }
    c10_convert(dst, cd, src, sd, n);
}

/* n (<= GCHUNK) elements at src (byte stride) converted to the compute dtype
 * into gbuf, the caller's (on its stack: a thread-local buffer in a shared
 * library costs a __tls_get_addr call per access) */
static void *gather(char *gbuf, const char *src, int64_t stride, ct_dtype sd, int ct, int64_t n) {
    ct_dtype cd = ct_dtype_of_compute[ct];
    int64_t es = (int64_t)c10_elsize[sd], ed = (int64_t)c10_elsize[cd];
/* n elements of type TI at src, stride bytes apart, into o[] (type TO); a
 * stride of two elements (a ::2 slice) vectorises as a constant */
#define STRIDED(TO, o, TI)                                                               \
    do {                                                                                 \
        TO *restrict o_ = (TO *)(o);                                                     \
        if (stride == 2 * (int64_t)sizeof(TI))                                           \
            for (int64_t i = 0; i < n; i++) o_[i] = (TO)((const TI *)src)[2 * i];        \
        else                                                                             \
            for (int64_t i = 0; i < n; i++) o_[i] = (TO) * (const TI *)(src + i * stride); \
    } while (0)
    if ((sd == CT_FLOAT16 || sd == CT_BFLOAT16) && (cd == CT_FLOAT64 || stride != es)) {
        /* 256 at a time through float (var's means of 16-bit input: an element-wise
           conversion call per element took 3x the rest of a var(0)); gbuf holds
           n elements of cd, nothing more (outer_minmax's rows: 4 bytes each) */
        uint16_t h[256];
        float f[256];
        for (int64_t i0 = 0; i0 < n; i0 += 256) {
            int64_t m = n - i0 < 256 ? n - i0 : 256;
            const char *s0 = src + i0 * stride;
            if (stride == 4) /* a ::2 slice: a constant stride vectorises */
                for (int64_t i = 0; i < m; i++) h[i] = ((const uint16_t *)s0)[2 * i];
            else
                for (int64_t i = 0; i < m; i++) h[i] = *(const uint16_t *)(s0 + i * stride);
            float *d = cd == CT_FLOAT32 ? (float *)gbuf + i0 : f;
            c10_half_to_float_n(d, h, sd == CT_BFLOAT16, m);
            if (cd == CT_FLOAT64)
                for (int64_t i = 0; i < m; i++) ((double *)gbuf)[i0 + i] = f[i];
        }
    } else if (stride == es) {
        convert_run(gbuf, cd, src, sd, n);
    } else if (sd == cd) {
        if (ed == 4) STRIDED(uint32_t, gbuf, uint32_t);
        else STRIDED(uint64_t, gbuf, uint64_t);
    } else if (sd == CT_FLOAT32 && cd == CT_FLOAT64) { /* var's means: a call per element was 4x slower */
        STRIDED(double, gbuf, float);
    } else if (cd == CT_INT64) {
        switch (sd) {
        case CT_BOOL:
            for (int64_t i = 0; i < n; i++) ((int64_t *)gbuf)[i] = *(const uint8_t *)(src + i * stride) != 0;
            break;
        case CT_UINT8: STRIDED(int64_t, gbuf, uint8_t); break;
        case CT_INT8: STRIDED(int64_t, gbuf, int8_t); break;
        case CT_INT16: STRIDED(int64_t, gbuf, int16_t); break;
        case CT_INT32: STRIDED(int64_t, gbuf, int32_t); break;
        default: STRIDED(int64_t, gbuf, int64_t); break;
        }
    } else {
        for (int64_t i = 0; i < n; i++) c10_convert(gbuf + i * ed, cd, src + i * stride, sd, 1);
    }
#undef STRIDED
    return gbuf;
}

/* The kernel of rk that reads elements of the input dtype in place, stride
 * bytes apart: the compute dtype's own over a contiguous run, a sum's over
 * any dtype, contiguous or a ::2 slice, or amax / amin's over int32; NULL: runs are gathered (converted)
 * first. */
static rk_fn direct_kernel(const RPlan *pl, int rk, int64_t stride) {
    int64_t es = (int64_t)c10_elsize[pl->dt];
    if (rk == RK_SUM && compute_type(pl->dt) == pl->ct) /* var's means: ct is double */
        return stride % es ? NULL : rk_sum_kernel(pl->dt, stride / es);
    rk_fn mm = pl->dt == CT_INT32 && stride == es ? rk_minmax_i32(rk) : NULL;
    if (mm) return mm;
    return stride == es && pl->dt == ct_dtype_of_compute[pl->ct] ? rk_kernels[rk][pl->ct] : NULL;
}

/* Reduces the reduced positions [lo, hi) of the output whose input starts at
 * base into st. Positions are row-major over the reduced dims. */
static void reduce_range(const RPlan *pl, int rk, const char *base, int64_t lo, int64_t hi, RState *st,
                         double p) {
    if (lo >= hi) return;
    rk_fn k = rk_kernels[rk][pl->ct], dk = direct_kernel(pl, rk, pl->rst[pl->nr - 1]);
    int nr = pl->nr;
    int64_t idx[CT_MAX_DIMS], rest = lo;
    for (int d = nr - 1; d >= 0; d--) {
        idx[d] = rest % pl->rs[d];
        rest /= pl->rs[d];
    }
    int64_t inner = pl->rs[nr - 1], istr = pl->rst[nr - 1];
    bool direct = dk != NULL;
    _Alignas(64) char gbuf[GCHUNK * 8];
    int64_t pos = lo;
    while (pos < hi) {
        int64_t n = inner - idx[nr - 1];
        if (n > hi - pos) n = hi - pos;
        const char *ptr = base;
        for (int d = 0; d < nr; d++) ptr += idx[d] * pl->rst[d];
        if (direct) {
            dk(st, ptr, n, pos, p);
        } else {
            for (int64_t j = 0; j < n; j += GCHUNK) {
                int64_t m = n - j < GCHUNK ? n - j : GCHUNK;
                k(st, gather(gbuf, ptr + j * istr, istr, pl->dt, pl->ct, m), m, pos + j, p);
            }
        }
        pos += n;
        idx[nr - 1] += n;
        for (int d = nr - 1; d > 0 && idx[d] == pl->rs[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

/* ---------------------------------------------------------------- finishing */

enum { FIN_VALUE, FIN_SCALE, FIN_NORM, FIN_VAR, FIN_STD, FIN_LSE, FIN_INDEX, FIN_VALIDX, FIN_AUX };

typedef struct RCtx {
    int rk, fin;
    double p;            /* norm's p */
    double scale;        /* mean: 1/N; var: 1/divisor */
    double n;            /* var: N, the number of values reduced into each output */
    char *vout;          /* values output (contiguous) */
    ct_dtype vdt;
    int64_t *iout;       /* indices output */
    double *aux;         /* per-output shift in (SQDEV, SUMEXP) or means out (FIN_AUX) */
} RCtx;

/* v into an output of dtype d: float32 and float64 directly (a conversion call
 * per output weighed on reductions over short rows) */
static void store_double(char *p, ct_dtype d, double v) {
    if (d == CT_FLOAT32) *(float *)p = (float)v;
    else if (d == CT_FLOAT64) *(double *)p = v;
    else c10_convert(p, d, &v, CT_FLOAT64, 1);
}

static void store_value(char *p, ct_dtype d, const RState *s, int ct) {
    if (ct != CT_I64) store_double(p, d, s->d);
    else if (d == CT_INT64) *(int64_t *)p = s->v;
    else c10_convert(p, d, &s->v, CT_INT64, 1);
}

static void finish(const RCtx *c, const RState *s, int64_t o, int ct) {
    int64_t es = (int64_t)c10_elsize[c->vdt];
    double v = s->d;
    switch (c->fin) {
    case FIN_VALUE:
        store_value(c->vout + o * es, c->vdt, s, c->rk == RK_ALL || c->rk == RK_ANY ? CT_I64 : ct);
        return;
    case FIN_SCALE: v *= c->scale; break;
    case FIN_NORM:
        if (c->p == 2) v = sqrt(v);
        else if (c->p != 1 && c->p != 0 && !isinf(c->p)) v = pow(v, 1.0 / c->p);
        break;
    case FIN_VAR:
    case FIN_STD: /* the corrected two-pass sum: constant values give exactly 0;
                   * squares past DBL_MAX give inf, as torch's Welford (not inf - inf) */
        if (v < INFINITY) v -= s->d1 * (s->d1 / c->n);
        v = (v < 0 ? 0 : v) * c->scale;
        if (c->fin == FIN_STD) v = sqrt(v);
        break;
    case FIN_LSE: v = log(v) + c->aux[o]; break;
    case FIN_INDEX: c->iout[o] = s->has ? s->idx : 0; return;
    case FIN_VALIDX:
        store_value(c->vout + o * es, c->vdt, s, ct);
        c->iout[o] = s->has ? s->idx : 0;
        return;
    case FIN_AUX: c->aux[o] = v * c->scale; return;
    }
    store_double(c->vout + o * es, c->vdt, v);
}

/* ---------------------------------------------------------------- running */

static int nthreads_for(int64_t work) {
#ifdef _OPENMP
    if (work < GRAIN || omp_in_parallel()) return 1;
    return omp_get_max_threads();
#else
    (void)work;
    return 1;
#endif
}

/* Vectorised across the contiguous innermost kept dim (run_outer, run_outer_any). */
static bool outer_ok(const RPlan *pl) {
    int64_t es = (int64_t)c10_elsize[pl->dt], kst = pl->kst[pl->nk - 1];
    if (kst <= 0 || kst > 64 / 2) return false; /* rows: two elements or more per line */
    if (pl->ks[pl->nk - 1] < 8 || pl->nred < 2) return false;
    return pl->rst[pl->nr - 1] != es; /* an inner-contiguous reduction is better per output */
}

#define OBLOCK 4096 /* columns per unit (rows read in place) */
#define CBLOCK 1024 /* columns per unit (gathered rows) */

#define PF_SHORT 4096 /* rows read in place are prefetched when shorter (bytes): 2 KB float16
                         rows 15.8 -> 20.8 GB/s at 1 thread, 16 KB float32 rows 27.9 -> 25.0 */

/* the next reduced position's row (row-major over the reduced dims) */
static void row_next(const RPlan *pl, int64_t *idx, const char **ptr) {
    for (int d = pl->nr - 1; d >= 0; d--) {
        *ptr += pl->rst[d];
        if (++idx[d] < pl->rs[d]) return;
        *ptr -= idx[d] * pl->rst[d];
        idx[d] = 0;
    }
}

/* How the outer-sum path reads rows: in place (contiguous or a ::2 slice, any
 * dtype with row kernels) or gathered into the compute dtype first; *group:
 * the rows added at a time. */
static rk_rows_fn outer_rows(const RPlan *pl, bool *direct, int *group) {
    int64_t es = (int64_t)c10_elsize[pl->dt], kst = pl->kst[pl->nk - 1];
    bool dbl = pl->dt == CT_FLOAT32 && pl->ct == CT_F64; /* var's means */
    rk_rows_fn f = kst % es || (compute_type(pl->dt) != pl->ct && !dbl) ? NULL : rk_sum_rows(pl->dt, kst / es, group, dbl);
    *direct = f != NULL;
    return f ? f : rk_sum_rows(ct_dtype_of_compute[pl->ct], 1, group, false);
}

/* the reduced position r's row (row-major over the reduced dims); once per unit */
static __attribute__((noinline)) const char *row_seek(const RPlan *pl, int64_t r, int64_t *idx, const char *ptr) {
    for (int d = pl->nr - 1; d >= 0; d--) {
        idx[d] = r % pl->rs[d];
        r /= pl->rs[d];
        ptr += idx[d] * pl->rst[d];
    }
    return ptr;
}

/* A unit of the paths across rows: split sp of S, the reduced positions [r0,
 * r1) (starting at multiples of 64 rows), the column block [j0, j0 + bl) (B
 * wide) of the innermost kept dim (m) at the outer kept index ko. */
#define UNIT_GEOM(B)                                                                     \
    int64_t m = pl->ks[pl->nk - 1], sp = unit % S, ko = unit / S / nb, j0 = (unit / S % nb) * (B); \
    int64_t bl = m - j0 < (B) ? m - j0 : (B);                                            \
    int64_t r0 = pl->nred * sp / S & ~(int64_t)63, r1 = sp + 1 == S ? pl->nred : pl->nred * (sp + 1) / S & ~(int64_t)63

/* Sums of the block [j0, j0 + bl) of the innermost kept dim (at one outer kept
 * index) over the reduced positions [r0, r1) of one split. Rows are read in
 * place or gathered (outer_rows), added a group (four or eight) at a time into
 * A partials (float for float, as PyTorch), flushed into W accumulators every
 * 64 rows; a split's sums go to out (the sole split: finished there). Short
 * row segments far apart defeat the hardware prefetcher: the adder prefetches
 * the next four rows read in place as it goes (short ones only: on long rows
 * the hardware does better alone); gathered rows are prefetched a group ahead. */
#define OUTER_SUM(name, A, W, FIELD)                                                     \
    static void outer_sum_##name(const RPlan *pl, const RCtx *c, int64_t unit, int64_t nb, int64_t B, \
                                 int64_t S, void *out) {                                     \
        UNIT_GEOM(B);                                                                    \
        int64_t kst = pl->kst[pl->nk - 1];                                               \
        bool direct;                                                                     \
        int g;                                                                           \
        rk_rows_fn add = outer_rows(pl, &direct, &g);                                    \
        bool pf_next = direct && bl * kst < PF_SHORT;                                    \
        W acc[OBLOCK];                                                                   \
        A part[OBLOCK];                                                                  \
        _Alignas(64) char buf[4][CBLOCK * 8];                                            \
        for (int64_t j = 0; j < bl; j++) acc[j] = 0, part[j] = 0;                        \
        int64_t idx[CT_MAX_DIMS], pidx[CT_MAX_DIMS];                                     \
        const char *base = pl->in + kept_offset(pl, ko * m) + j0 * kst;                  \
        const char *ptr = row_seek(pl, r0, idx, base), *pf = ptr;                        \
        memcpy(pidx, idx, sizeof idx);                                                   \
        for (int k = 0; k < g; k++) row_next(pl, pidx, &pf);                             \
        const void *rows[8], *next[8];                                                   \
        int nrows = 0, groups = 0;                                                       \
        for (int64_t r = r0; r < r1; r++) {                                              \
            if (r + g < r1) {                                                            \
                if (!direct)                                                             \
                    for (int64_t q = 0; q < bl * kst; q += 64) __builtin_prefetch(pf + q); \
                next[nrows] = pf;                                                        \
                row_next(pl, pidx, &pf);                                                 \
            }                                                                            \
            rows[nrows] = direct ? ptr : gather(buf[nrows], ptr, kst, pl->dt, pl->ct, bl); \
            row_next(pl, idx, &ptr);                                                     \
            if (++nrows < g) continue;                                                   \
            add(part, rows, g, bl, pf_next && r + g < r1 ? next : NULL);                 \
            nrows = 0;                                                                   \
            if (++groups == 64 / g) {                                                    \
                for (int64_t j = 0; j < bl; j++) acc[j] += (W)part[j], part[j] = 0;      \
                groups = 0;                                                              \
            }                                                                            \
        }                                                                                \
        if (nrows) add(part, rows, nrows, bl, NULL);                                     \
        for (int64_t j = 0; j < bl; j++) acc[j] += (W)part[j];                           \
        for (int64_t j = 0; j < bl; j++) {                                               \
            RState s = {0};                                                              \
            s.FIELD = acc[j];                                                            \
            if (S > 1) ((W *)out)[sp * pl->nout + ko * m + j0 + j] = acc[j];             \
            else finish(c, &s, ko * m + j0 + j, pl->ct);                                 \
        }                                                                                \
    }
OUTER_SUM(float, float, double, d)
OUTER_SUM(double, double, double, d)
OUTER_SUM(int64, uint64_t, uint64_t, v)

/* Units of work: blocks of B columns and, when there are fewer blocks than
 * SPLITS, S splits of a block's rows (each summed on its own, then added in
 * split order). A thread reads its split's rows at full width in one stream,
 * where split columns were short segments a row apart (a [65536, 256] sum(0)
 * at 2 threads took 0.69-0.86 of the CPU time). The units depend on the shape
 * alone: 1 and 2 threads give the same bits. */
#define SPLITS 8
static int64_t splits(const RPlan *pl, int64_t blocks) {
    int64_t S = (SPLITS + blocks - 1) / blocks;
    return S <= pl->nred / 64 ? S : pl->nred / 64 ? pl->nred / 64 : 1;
}

static void run_outer(const RPlan *pl, const RCtx *c) {
    int64_t m = pl->ks[pl->nk - 1], outer = pl->nout / m;
    int nt = nthreads_for(pl->nout * pl->nred);
    bool direct;
    int g;
    outer_rows(pl, &direct, &g);
    int64_t B = direct ? OBLOCK : CBLOCK, nb = (m + B - 1) / B, S = splits(pl, outer * nb);
    size_t nscr = (size_t)S * (size_t)pl->nout * 8;
    void *scr = S > 1 ? c10_alloc(nscr) : NULL;
    if (!scr) S = 1;
    int64_t units = outer * nb * S;
    void (*f)(const RPlan *, const RCtx *, int64_t, int64_t, int64_t, int64_t, void *) =
        pl->ct == CT_F32 ? outer_sum_float : pl->ct == CT_F64 ? outer_sum_double : outer_sum_int64;
    OMP_FOR_NT
    for (int64_t u = 0; u < units; u++) f(pl, c, u, nb, B, S, scr);
    if (!scr) return;
    for (int64_t o = 0; o < pl->nout; o++) {
        RState s = {0};
        uint64_t v = 0; /* int64 sums wrap */
        for (int64_t k = 0; k < S; k++) {
            if (pl->ct == CT_I64) v += ((const uint64_t *)scr)[k * pl->nout + o];
            else s.d += ((const double *)scr)[k * pl->nout + o];
        }
        s.v = (int64_t)v;
        finish(c, &s, o, pl->ct);
    }
    c10_dealloc(scr, nscr);
}

/* The other reductions across rows (amax amin prod norm all any, var's and
 * logsumexp's sums, max / min with their indices) the same way: blocks of
 * GBLOCK columns, rows gathered into the compute type (float32 widened) and
 * combined column by column into accumulators (double for floats), eight
 * lanes at a time in the compiler's vector types (one small loop per
 * reduction; gcc's own vectorised loops came to 38 KB), the rare ones in
 * scalar code. Each output was reduced on its own before, a strided column
 * gathered a chunk at a time: [4096, 4096] float32 amax(0) took 130 ms,
 * PyTorch 6. */
#define GBLOCK 512
#define VL 8
typedef double vd_ __attribute__((vector_size(64)));
typedef int64_t vl_ __attribute__((vector_size(64)));
typedef uint64_t vu_ __attribute__((vector_size(64)));
#define NAN_(v) ((v) != (v))
#define SEL(m, x, y) ((vec_t)(((vl_)(x) & (m)) | ((vl_)(y) & ~(m))))
/* one vector loop over the block's columns; A1, IX: a1 and ix are read and written too */
#define VCOLS(A1, IX, ...)                                                               \
    for (int64_t j = 0; j < bl; j += VL) {                                               \
        vec_t xv, av, a1v;                                                               \
        vl_ iv, m;                                                                       \
        memcpy(&xv, x + j, 64);                                                          \
        memcpy(&av, a + j, 64);                                                          \
        if (A1) memcpy(&a1v, a1 + j, 64);                                                \
        if (IX) memcpy(&iv, ix + j, 64);                                                 \
        __VA_ARGS__;                                                                     \
        (void)m, (void)iv, (void)a1v;                                                    \
        memcpy(a + j, &av, 64);                                                          \
        if (A1) memcpy(a1 + j, &a1v, 64);                                                \
        if (IX) memcpy(ix + j, &iv, 64);                                                 \
    }

/* the reductions with no vector loop here: all any, norm 0 inf -inf, logsumexp's
 * sums and norm p of float32 / 16-bit values (rk_cols_pow_exp: vectorised, x
 * padded to 8 and overwritten), norm p of float64 (libm's pow) */
#define COLD_COMBINE(name, W, FLOATING)                                                  \
    static COLD_CODE void cold_##name(int rk, double p, W *a, W *x, const W *sh, int64_t bl, bool f32) { \
        if (FLOATING && (rk == RK_SUMEXP || (f32 && isfinite(p) && p != 0))) {           \
            rk_cols_pow_exp((void *)a, (void *)x, rk == RK_SUMEXP ? (const void *)sh : NULL, p, (bl + 7) & ~7, f32); \
            return;                                                                      \
        }                                                                                \
        for (int64_t j = 0; j < bl; j++) {                                               \
            double v = (double)x[j], f = fabs(v);                                        \
            if (rk == RK_ALL) a[j] = a[j] && x[j] != 0;                                  \
            else if (rk == RK_ANY) a[j] = a[j] || x[j] != 0;                             \
            else if (rk == RK_SUMEXP) a[j] += (W)exp(v - (double)sh[j]);                 \
            else if (p == 0) a[j] += x[j] != 0;                                          \
            else if (p == INFINITY) a[j] = NAN_(v) || f > (double)a[j] ? (W)f : a[j];    \
            else if (p == -INFINITY) a[j] = NAN_(v) || f < (double)a[j] ? (W)f : a[j];   \
            else a[j] += (W)pow(f, p);                                                   \
        }                                                                                \
    }
COLD_COMBINE(double, double, 1)
COLD_COMBINE(int64, int64_t, 0)

#define OUTER_ANY(name, W, V, INT, ATTR)                                                 \
    static ATTR void outer_any_##name(const RPlan *pl, int rk, const RCtx *c, int64_t unit, int64_t nb, int64_t S, \
                                 void *scr) {                                            \
        RState *st = scr;                                                                \
        typedef V vec_t;                                                                 \
        UNIT_GEOM(GBLOCK);                                                               \
        int64_t o0 = ko * m + j0, nbl = (bl + VL - 1) / VL * VL;                         \
        double p = c->p, init = rk == RK_PROD || rk == RK_ALL ? 1 : rk == RK_AMAX || rk == RK_MAX ? -INFINITY \
                                : rk == RK_AMIN || rk == RK_MIN || (rk == RK_NORM && p == -INFINITY) ? INFINITY : 0; \
        _Alignas(64) W a[GBLOCK], a1[GBLOCK], sh[GBLOCK], xw[GBLOCK];                    \
        _Alignas(64) int64_t ix[GBLOCK];                                                 \
        _Alignas(64) char buf[GBLOCK * 8] = {0}; /* lanes past bl stay 0 */              \
        W *x = pl->ct == CT_F32 ? xw : (W *)buf;                                         \
        W w0 = !INT || !isinf(init) ? (W)init : init > 0 ? (W)INT64_MAX : (W)INT64_MIN;  \
        bool shift = rk == RK_SQDEV || rk == RK_SUMEXP;                                  \
        for (int64_t j = 0; j < nbl; j++)                                                \
            a[j] = w0, a1[j] = 0, ix[j] = r0, xw[j] = 0, sh[j] = shift && j < bl ? (W)c->aux[o0 + j] : 0; \
        int64_t idx[CT_MAX_DIMS], pidx[CT_MAX_DIMS], kst = pl->kst[pl->nk - 1];         \
        const char *ptr = row_seek(pl, r0, idx, pl->in + kept_offset(pl, o0)), *pf = ptr; \
        memcpy(pidx, idx, sizeof idx);                                                   \
        for (int k = 0; k < 4; k++) row_next(pl, pidx, &pf);                             \
        for (int64_t r = r0; r < r1; r++) {                                              \
            for (int64_t q = 0; q < bl * kst; q += 64) __builtin_prefetch(pf + q);       \
            row_next(pl, pidx, &pf); /* four rows ahead: short segments far apart */     \
            gather(buf, ptr, kst, pl->dt, pl->ct, bl); /* into buf */                    \
            if (pl->ct == CT_F32) widen(x, buf, bl);                                     \
            row_next(pl, idx, &ptr);                                                     \
            switch (rk) {                                                                \
            case RK_AMAX: VCOLS(0, 0, av = SEL((xv > av) | NAN_(xv), xv, av)); break;          \
            case RK_AMIN: VCOLS(0, 0, av = SEL((xv < av) | NAN_(xv), xv, av)); break;          \
            case RK_MAX: VCOLS(0, 1, m = (av == av) & ((xv > av) | NAN_(xv)), av = SEL(m, xv, av), iv = (iv & ~m) | (m & r)); break; \
            case RK_MIN: VCOLS(0, 1, m = (av == av) & ((xv < av) | NAN_(xv)), av = SEL(m, xv, av), iv = (iv & ~m) | (m & r)); break; \
            case RK_PROD: VCOLS(0, 0, av = INT ? (vec_t)((vu_)av * (vu_)xv) : av * xv); break;     \
            case RK_SQDEV: {                                                             \
                VCOLS(1, 0, vec_t t; memcpy(&t, sh + j, 64); t = xv - t; a1v += t; av += t * t);   \
                break;                                                                   \
            }                                                                            \
            default:                                                                     \
                if (rk == RK_NORM && p == 2) {                                           \
                    VCOLS(0, 0, av += xv * xv);                                                \
                } else if (rk == RK_NORM && p == 1) {                                    \
                    VCOLS(0, 0, av += (vec_t)((vl_)xv & INT64_MAX));                           \
                } else {                                                                 \
                    cold_##name(rk, p, a, x, sh, bl, pl->ct == CT_F32);                  \
                }                                                                        \
            }                                                                            \
        }                                                                                \
        for (int64_t j = 0; j < bl; j++) {                                               \
            RState s = {.d = (double)a[j], .d1 = (double)a1[j], .v = INT ? (int64_t)a[j] : a[j] != 0, \
                        .idx = ix[j], .has = true, .nan = NAN_(a[j]), .sh = (double)sh[j]}; \
            if (S > 1) st[sp * pl->nout + o0 + j] = s;                                   \
            else finish(c, &s, o0 + j, pl->ct);                                          \
        }                                                                                \
    }
OUTER_ANY(double, double, vd_, 0, COLD_CODE)
OUTER_ANY(int64, int64_t, vl_, 1, COLD_CODE)

/* rows of float32 / 64, int32 / 64 and 16-bit floats read in place, OBLOCK columns a
 * unit (GBLOCK wide, [4096, 4096] float32 rows were 2 KB segments 16 KB
 * apart: 2.3x the time of sum(0)): the columns' step in elements, 1 or 2 (a
 * ::2 slice, whose rows are taken whole, odd elements too: they are read
 * anyway), else 0 (gathered) */
static int minmax_step(const RPlan *pl) {
    int64_t es = (int64_t)c10_elsize[pl->dt], kst = pl->kst[pl->nk - 1];
    return (kst == es || kst == 2 * es) && (es >= 4 || pl->dt == CT_FLOAT16 || pl->dt == CT_BFLOAT16) ? (int)(kst / es) : 0;
}

/* amax / amin (and max_dim / argmax, beside int32 rows) across rows in the
 * lanes of the values' own type (float for 16-bit floats): outer_any_double's
 * way, widened to double or int64, took twice the time of sum(0). Rows are read in place (minmax_inplace) or, by
 * the float kernel, gathered into float, one buffer per row of a group. One
 * driver for the five kernels (a copy each came to 6 KB). */
enum { LANE_F, LANE_D, LANE_I32, LANE_I64 };
static int minmax_lane(ct_dtype dt) {
    return dt == CT_FLOAT64 ? LANE_D : dt == CT_INT32 ? LANE_I32 : dt == CT_INT64 ? LANE_I64 : LANE_F;
}
static size_t lane_size(int lane) { return lane == LANE_D || lane == LANE_I64 ? 8 : 4; }
/* the kernel for rows of the lane's own type (float: float32, or 16-bit rows
 * gathered or splits' maxima) */
static rk_cols_fn lane_kernel(int lane) {
    return lane == LANE_D ? rk_cols_minmax_d : lane == LANE_I32 ? rk_cols_minmax_i32
           : lane == LANE_I64 ? rk_cols_minmax_i64 : rk_cols_minmax_f;
}
static rk_argcols_fn lane_argkernel(int lane) {
    return lane == LANE_D ? rk_cols_argbest_d : lane == LANE_I32 ? rk_cols_argbest_i32
           : lane == LANE_I64 ? rk_cols_argbest_i64 : rk_cols_argbest_f;
}
/* the results o0 + [0, n) from n values in the lanes a (and their rows ix:
 * max_dim, argmax) */
static void minmax_finish(const RPlan *pl, const RCtx *c, int lane, const void *a, const int32_t *ix, int64_t o0,
                          int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        RState s = {.has = true, .idx = ix ? ix[j] : 0};
        if (lane == LANE_I32 || lane == LANE_I64) {
            s.v = lane == LANE_I32 ? ((const int32_t *)a)[j] : ((const int64_t *)a)[j];
        } else {
            s.d = lane == LANE_F ? ((const float *)a)[j] : ((const double *)a)[j];
            s.nan = s.d != s.d;
        }
        finish(c, &s, o0 + j, pl->ct);
    }
}
/* one unit; with splits (S > 1), its maxima go to scr (split-major, in
 * lanes), then their rows (max_dim, argmax: int32) */
static void outer_minmax(const RPlan *pl, int rk, const RCtx *c, int64_t unit, int64_t nb, int64_t S, void *scr) {
    int step = minmax_step(pl);
    bool inplace = step > 0, arg = rk == RK_MAX || rk == RK_MIN, half = inplace && c10_elsize[pl->dt] == 2;
    UNIT_GEOM(inplace ? OBLOCK / step : GBLOCK);
    int64_t o0 = ko * m + j0, kst = pl->kst[pl->nk - 1], n = inplace ? (bl - 1) * step + 1 : bl; /* lanes */
    bool max = rk == RK_AMAX || rk == RK_MAX, bf = pl->dt == CT_BFLOAT16;
    int lane = minmax_lane(pl->dt);
    rk_cols_fn kernel = !half ? lane_kernel(lane) : bf ? rk_cols_minmax_bf16 : rk_cols_minmax_f16;
    rk_argcols_fn argkernel = !half ? lane_argkernel(lane) : bf ? rk_cols_argbest_bf16 : rk_cols_argbest_f16;
    _Alignas(64) union { float f[OBLOCK]; double d[OBLOCK]; int32_t i[OBLOCK]; int64_t l[OBLOCK]; } a;
    _Alignas(64) int32_t ix[OBLOCK];
    _Alignas(64) float buf[8][GBLOCK];
    const void *rows[8];
    for (int64_t j = 0; j < n; j++) {
        if (lane == LANE_F) a.f[j] = max ? -INFINITY : INFINITY;
        else if (lane == LANE_D) a.d[j] = max ? -INFINITY : INFINITY;
        else if (lane == LANE_I32) a.i[j] = max ? INT32_MIN : INT32_MAX;
        else a.l[j] = max ? INT64_MIN : INT64_MAX;
        ix[j] = (int32_t)r0;
    }
    int64_t idx[CT_MAX_DIMS], pidx[CT_MAX_DIMS];
    const char *ptr = row_seek(pl, r0, idx, pl->in + kept_offset(pl, o0)), *pf = ptr;
    memcpy(pidx, idx, sizeof idx);
    /* eight rows at a time along one reduced dim (one at a time, rows a block's
     * width apart took 1.8x longer), else one; short rows prefetched a group
     * ahead, four rows with several reduced dims (long ones read in place: the
     * hardware prefetcher does better) */
    int group = pl->nr == 1 ? 8 : 1;
    for (int k = 0; k < (group > 4 ? group : 4); k++) row_next(pl, pidx, &pf);
    bool pf_rows = !inplace || bl * kst < PF_SHORT || group == 1;
    for (int64_t r = r0; r < r1;) {
        int nr = 0;
        for (; nr < group && r < r1; nr++, r++) {
            for (int64_t q = 0; pf_rows && q < bl * kst; q += 64) __builtin_prefetch(pf + q);
            row_next(pl, pidx, &pf);
            rows[nr] = inplace ? (const void *)ptr : gather((char *)buf[nr], ptr, kst, pl->dt, pl->ct, bl);
            row_next(pl, idx, &ptr);
        }
        if (arg) argkernel(&a, ix, rows, nr, n, (int32_t)(r - nr), max);
        else kernel(&a, rows, nr, n, max);
    }
    size_t ls = lane_size(lane);
    for (int64_t j = 1; step == 2 && j < bl; j++)
        memcpy((char *)&a + j * ls, (char *)&a + 2 * j * ls, ls), ix[j] = ix[2 * j];
    if (S == 1) {
        minmax_finish(pl, c, lane, &a, arg ? ix : NULL, o0, bl);
        return;
    }
    memcpy((char *)scr + (size_t)(sp * pl->nout + o0) * ls, &a, (size_t)bl * ls);
    if (arg) memcpy((int32_t *)(void *)((char *)scr + (size_t)(S * pl->nout) * ls) + sp * pl->nout + o0, ix, (size_t)bl * 4);
}

/* max_dim / argmax: split k's maxima and rows after the earlier splits' */
static void argbest_combine(int lane, bool max, char *v, int32_t *ix, int64_t S, int64_t nout) {
    size_t ls = lane_size(lane);
    for (int64_t k = 1; k < S; k++)
        for (int64_t o = 0; o < nout; o++) {
            const char *b = v + (size_t)(k * nout + o) * ls;
            char *a = v + (size_t)o * ls;
            bool take;
            if (lane == LANE_I32 || lane == LANE_I64) {
                int64_t x = lane == LANE_I32 ? *(const int32_t *)b : *(const int64_t *)b;
                int64_t y = lane == LANE_I32 ? *(const int32_t *)a : *(const int64_t *)a;
                take = max ? x > y : x < y;
            } else {
                double x = lane == LANE_F ? *(const float *)b : *(const double *)b;
                double y = lane == LANE_F ? *(const float *)a : *(const double *)a;
                take = y == y && (x != x || (max ? x > y : x < y));
            }
            if (take) memcpy(a, b, ls), ix[o] = ix[k * nout + o];
        }
}

/* false when the scratch for the splits is not there: the caller's path then */
static bool run_outer_any(const RPlan *pl, int rk, const RCtx *c) {
    ct_dtype dt = pl->dt;
    int64_t m = pl->ks[pl->nk - 1];
    /* 64-bit rows only when long: [65536, 256] and [262144, 64] measured 1.1-1.3x slower than
     * on the double path ([256, 65536], [512, 10000]: 0.45-0.7 of its time) */
    int step = minmax_step(pl);
    bool inplace = step > 0, wide = dt == CT_INT32 || ((dt == CT_INT64 || dt == CT_FLOAT64) && m >= 2048);
    bool arg = (rk == RK_MAX || rk == RK_MIN) && pl->nred <= INT32_MAX; /* rows as int32 */
    bool minmax = (rk == RK_AMAX || rk == RK_AMIN || arg) && (pl->ct == CT_F32 || (wide && inplace));
    int64_t B = minmax && inplace ? OBLOCK / step : GBLOCK;
    int64_t outer = pl->nout / m, nb = (m + B - 1) / B, S = splits(pl, outer * nb);
    int nt = nthreads_for(pl->nout * pl->nred);
    /* the splits' results: RStates, or amax / amin in their lanes (a combine
     * per RState, 11 ns, made [4096, 4096] float32 amax(0) 1.3x slower), then
     * max_dim / argmax's rows */
    int lane = minmax_lane(dt);
    size_t es = minmax ? lane_size(lane) + (arg ? 4 : 0) : sizeof(RState), nscr = (size_t)S * (size_t)pl->nout * es;
    char *scr = S > 1 ? c10_alloc(nscr) : NULL;
    if (S > 1 && !scr) return false;
    void (*f)(const RPlan *, int, const RCtx *, int64_t, int64_t, int64_t, void *) =
        minmax ? outer_minmax : pl->ct == CT_I64 ? outer_any_int64 : outer_any_double;
    int64_t units = outer * nb * S;
    OMP_FOR_NT
    for (int64_t u = 0; u < units; u++) f(pl, rk, c, u, nb, S, scr);
    if (S > 1 && minmax) {
        size_t ls = lane_size(lane);
        int32_t *ix = arg ? (int32_t *)(void *)(scr + (size_t)(S * pl->nout) * ls) : NULL;
        const void *rows[SPLITS];
        for (int64_t k = 1; k < S; k++) rows[k - 1] = scr + (size_t)(k * pl->nout) * ls;
        if (arg) argbest_combine(lane, rk == RK_MAX, scr, ix, S, pl->nout);
        else lane_kernel(lane)(scr, rows, (int)S - 1, pl->nout, rk == RK_AMAX);
        minmax_finish(pl, c, lane, scr, ix, 0, pl->nout);
    }
    RState *st = (RState *)(void *)scr;
    for (int64_t o = 0; S > 1 && !minmax && o < pl->nout; o++) {
        for (int64_t k = 1; k < S; k++) rk_combine(rk, pl->ct, c->p, &st[o], &st[k * pl->nout + o]);
        finish(c, &st[o], o, pl->ct);
    }
    if (scr) c10_dealloc(scr, nscr);
    return true;
}

static void state_init(RState *s, int rk, double p, const RCtx *c, int64_t o) {
    memset(s, 0, sizeof *s);
    switch (rk) {
    case RK_PROD: s->d = 1; s->v = 1; break;
    case RK_ALL: s->v = 1; break;
    case RK_NORM: s->d = p == -INFINITY ? INFINITY : 0; break;
    case RK_SQDEV:
    case RK_SUMEXP: s->sh = c->aux[o]; break;
    default: break;
    }
}

/* rows up to this long (bytes) go to the block kernels: each row is one
 * dependent chain of chunks, which on longer rows lost to the per-row
 * kernels' many lanes (amax(1) of [65536, 256] float64 6.1 -> 8.5 ms) */
#define BLOCK_MAXBYTES 1024
/* Blocks of rows this long (bytes) or longer span a page or more, which the
 * hardware prefetcher does not cross: the next block is prefetched line by
 * line (1 thread, sum(1) of [262144, 64] float32 2.34 -> 2.16 ms, float64
 * 9.5 -> 5.7 ms; on shorter rows it cost 10%) */
#define PF_ROW_BYTES 256

/* Outputs [o0, o0 + cnt) from a block kernel's results (double, or int64 when
 * ct is CT_I64): values, means and norms straight into the output, a block at a
 * time (a finish call per output weighed on rows of 16); the rest through
 * finish. */
typedef union BlockRes {
    double d[16];
    int64_t v[16];
} BlockRes;
static void finish_block(const RCtx *c, const BlockRes *res, int64_t o0, int cnt, int ct) {
    const double *d = res->d;
    int64_t es = (int64_t)c10_elsize[c->vdt];
    bool norm = c->fin == FIN_NORM && (c->p == 1 || c->p == 2); /* the norms of the block kernels */
    if (c->fin == FIN_VALUE || (c->fin == FIN_SCALE && ct != CT_I64) || norm) {
        if (ct == CT_I64) {
            c10_convert(c->vout + o0 * es, c->vdt, res->v, CT_INT64, cnt);
            return;
        }
        double sc = c->fin == FIN_SCALE ? c->scale : 1, v[16];
        for (int i = 0; i < cnt; i++) v[i] = d[i] * sc;
        if (norm && c->p == 2)
            for (int i = 0; i < cnt; i++) v[i] = sqrt(v[i]);
        if (c->vdt == CT_FLOAT32)
            for (int i = 0; i < cnt; i++) ((float *)c->vout)[o0 + i] = (float)v[i];
        else c10_convert(c->vout + o0 * es, c->vdt, v, CT_FLOAT64, cnt);
        return;
    }
    for (int i = 0; i < cnt; i++) {
        RState s = {.has = true};
        if (ct == CT_I64) s.v = res->v[i];
        else s.d = d[i];
        finish(c, &s, o0 + i, ct);
    }
}

/* Contiguous rows of at most BLOCK_MAXBYTES, one reduced dim: a block
 * kernel reduces 16 (8) rows a call, threads split the blocks. false: no
 * kernel for rk and the dtype. */
static bool run_blocks(const RPlan *pl, int rk, const RCtx *c) {
    int64_t n = pl->nred;
    int64_t es = (int64_t)c10_elsize[pl->dt];
    if (pl->nr != 1 || pl->rst[0] != es || n < 2 || n * es > BLOCK_MAXBYTES || compute_type(pl->dt) != pl->ct)
        return false;
    if (rk == RK_PROD && n > 64) return false; /* see rk_block_kernel */
    int R, mode;
    rk_block_fn f = rk_block_kernel(rk, pl->dt, c->p, &R, &mode);
    if (!f) return false;
    int64_t nb = (pl->nout + R - 1) / R;
    int nt = nthreads_for(pl->nout * n);
    (void)nt;
    int64_t kst = pl->kst[0], span = R * kst;
    bool even = pl->nk == 1;                                 /* rows kst bytes apart */
    bool pf = even && kst == n * es && n * es >= PF_ROW_BYTES; /* and contiguous */
    OMP_FOR_NT
    for (int64_t b = 0; b < nb; b++) {
        int64_t o0 = b * R;
        int cnt = pl->nout - o0 < R ? (int)(pl->nout - o0) : R;
        const void *rows[16];
        if (even) {
            const char *q = pl->in + o0 * kst;
            for (int r = 0; r < R; r++) rows[r] = q + (r < cnt ? r : cnt - 1) * kst;
            for (int64_t off = span; pf && off < 2 * span; off += 64) __builtin_prefetch(q + off);
        } else {
            for (int r = 0; r < R; r++) rows[r] = pl->in + kept_offset(pl, o0 + (r < cnt ? r : cnt - 1));
        }
        BlockRes res;
        f(&res, rows, n, mode);
        finish_block(c, &res, o0, cnt, pl->ct);
    }
    return true;
}

/* Runs reduction rk of plan pl, finishing each output through c. */
static void run_reduce(const RPlan *pl, int rk, const RCtx *c) {
    if (pl->nout == 0) return;
    double p = c->p;
    if (outer_ok(pl)) {
        if (rk == RK_SUM) run_outer(pl, c);
        if (rk == RK_SUM || run_outer_any(pl, rk, c)) return;
    }
    if (run_blocks(pl, rk, c)) return;
    int nt = nthreads_for(pl->nout * pl->nred);
    if (nt > 1 && pl->nout < nt && pl->nred >= GRAIN) {
        /* few outputs: split each one's reduced range, combine in order */
        RState part[256];
        if (nt > 256) nt = 256;
        for (int64_t o = 0; o < pl->nout; o++) {
            const char *base = pl->in + kept_offset(pl, o);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
            for (int q = 0; q < nt; q++) {
                int64_t lo = pl->nred * q / nt, hi = pl->nred * (q + 1) / nt;
                state_init(&part[q], rk, p, c, o);
                reduce_range(pl, rk, base, lo, hi, &part[q], p);
            }
            RState s = part[0];
            for (int q = 1; q < nt; q++) rk_combine(rk, pl->ct, p, &s, &part[q]);
            finish(c, &s, o, pl->ct);
        }
        return;
    }
    /* one run per output that the kernel reads in place: the kernel straight on it */
    rk_fn row = pl->nr == 1 ? direct_kernel(pl, rk, pl->rst[0]) : NULL;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t o = 0; o < pl->nout; o++) {
        RState s;
        state_init(&s, rk, p, c, o);
        if (row) row(&s, pl->in + kept_offset(pl, o), pl->nred, 0, p);
        else reduce_range(pl, rk, pl->in + kept_offset(pl, o), 0, pl->nred, &s, p);
        finish(c, &s, o, pl->ct);
    }
}

/* ---------------------------------------------------------------- helpers */

/* OpArgs layout of the dim-list reductions: i[0] keepdim, i[1] ndims (0: all
 * dims), i[2 .. 2+ndims) dims. */
/* torch wraps every dim of the list before it looks for repeats (maybe_wrap_dims);
 * var and std take them in_turn, one dim after another */
static int parse_dims(const char *op, const OpArgs *a, bool *mask, bool *keepdim, bool in_turn) {
    *keepdim = a->i[0] != 0;
    int nd = (int)a->i[1];
    if (nd < 0 || nd > CT_MAX_DIMS || a->ni < 2 + nd) return c10_error_int("%s: bad dim list", op);
    for (int k = 0; k < nd && !in_turn; k++)
        if (wrap_dim(op, a->i[2 + k], a->t[0]->ndim) < 0) return -1;
    return at_parse_dims(op, a->i + 2, nd, a->t[0]->ndim, mask);
}
static int parse_list(const char *op, const OpArgs *a, bool *mask, bool *keepdim) {
    return parse_dims(op, a, mask, keepdim, false);
}

static TensorImpl *alloc_out(const TensorImpl *t, const bool *mask, bool keepdim, ct_dtype dt) {
    int64_t shape[CT_MAX_DIMS];
    int n = reduced_shape(t, mask, keepdim, shape);
    return c10_empty(shape, n, dt, t->device);
}

/* "Expected reduction dim 0 to have non-zero size." for ops without identity */
static int check_nonempty(const char *op, const TensorImpl *t, const bool *mask) {
    for (int d = 0; d < t->ndim; d++)
        if (mask[d] && t->sizes[d] == 0)
            return c10_error_int("%s(): Expected reduction dim %d to have non-zero size.", op, d);
    return 0;
}

static bool floating_or_error(const char *fmt, const TensorImpl *t) {
    if (c10_is_float(t->dtype)) return true;
    c10_error(fmt, c10_dtype_cname(t->dtype));
    return false;
}

/* Runs reduction rk over mask into a new tensor of dtype dt. */
static TensorImpl *reduce_into(const TensorImpl *t, const bool *mask, bool keepdim, ct_dtype dt, int rk,
                               RCtx *c) {
    TensorImpl *o = alloc_out(t, mask, keepdim, dt);
    if (!o || o->device == CT_META) return o;
    RPlan pl;
    plan_build(&pl, t, mask, rk != RK_MAX && rk != RK_MIN);
    c->rk = rk;
    c->vout = c10_data(o);
    c->vdt = dt;
    run_reduce(&pl, rk, c);
    return o;
}

#define ONE(expr) return (out[0] = (expr)) ? 1 : -1

/* ---------------------------------------------------------------- forwards */

/* sum, sum_dims. t[0]; i: keepdim, ndims (0: all), dims... */
int fwd_sum(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    bool mask[CT_MAX_DIMS], keepdim;
    const TensorImpl *t = a->t[0];
    if (parse_list("sum", a, mask, &keepdim) < 0) return -1;
    ct_dtype dt = c10_is_integral(t->dtype, true) ? CT_INT64 : t->dtype;
    RCtx c = {.fin = FIN_VALUE};
    ONE(reduce_into(t, mask, keepdim, dt, RK_SUM, &c));
}

/* mean, mean_dims. t[0]; i: keepdim, ndims (0: all), dims... */
int fwd_mean(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    bool mask[CT_MAX_DIMS], keepdim;
    const TensorImpl *t = a->t[0];
    if (!floating_or_error("mean(): could not infer output dtype. Input dtype must be either a floating "
                           "point or complex dtype. Got: %s", t))
        return -1;
    if (parse_list("mean", a, mask, &keepdim) < 0) return -1;
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        if (mask[d]) n *= t->sizes[d];
    RCtx c = {.fin = FIN_SCALE, .scale = 1.0 / (double)n};
    ONE(reduce_into(t, mask, keepdim, t->dtype, RK_SUM, &c));
}

/* prod (all dims) and prod_dim. t[0]; i: dim, keepdim, has_dim */
int fwd_prod(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *t = a->t[0];
    bool mask[CT_MAX_DIMS] = {0}, keepdim = a->i[1] != 0;
    if (a->i[2]) {
        int d = wrap_dim("prod", a->i[0], t->ndim);
        if (d < 0) return -1;
        if (t->ndim) mask[d] = true;
    } else {
        for (int d = 0; d < t->ndim; d++) mask[d] = true;
        keepdim = false;
    }
    ct_dtype dt = c10_is_integral(t->dtype, true) ? CT_INT64 : t->dtype;
    RCtx c = {.fin = FIN_VALUE};
    ONE(reduce_into(t, mask, keepdim, dt, RK_PROD, &c));
}

/* max, min (all dims, one value). t[0] */
int fwd_max_all(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *t = a->t[0];
    const char *name = op == OP_max ? "max" : "min";
    if (t->numel == 0)
        return c10_error_int("%s(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                             "reduction dim with the 'dim' argument.", name);
    bool mask[CT_MAX_DIMS];
    for (int d = 0; d < CT_MAX_DIMS; d++) mask[d] = d < t->ndim;
    RCtx c = {.fin = FIN_VALUE};
    ONE(reduce_into(t, mask, false, t->dtype, op == OP_max ? RK_AMAX : RK_AMIN, &c));
}

/* max_dim, min_dim: values and int64 indices. t[0]; i: dim, keepdim */
int fwd_max_dim(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *t = a->t[0];
    const char *name = op == OP_max_dim ? "max" : "min"; /* values and indices, no autograd */
    int d = wrap_dim(name, a->i[0], t->ndim);
    if (d < 0) return -1;
    bool mask[CT_MAX_DIMS] = {0}, keepdim = a->i[1] != 0;
    if (t->ndim) mask[d] = true;
    if (t->ndim && t->sizes[d] == 0 && check_nonempty(name, t, mask) < 0) return -1;
    out[0] = alloc_out(t, mask, keepdim, t->dtype);
    out[1] = out[0] ? alloc_out(t, mask, keepdim, CT_INT64) : NULL;
    if (!out[1]) return -1;
    if (t->device != CT_META) {
        RPlan pl;
        plan_build(&pl, t, mask, false);
        int rk = op == OP_max_dim ? RK_MAX : RK_MIN;
        RCtx c = {.rk = rk, .fin = FIN_VALIDX, .vout = c10_data(out[0]), .vdt = t->dtype,
                  .iout = (int64_t *)c10_data(out[1])};
        run_reduce(&pl, rk, &c);
    }
    return 2;
}

/* max_dim_values, min_dim_values: t[0] at the indices t[1] (int64, the shape
 * of max_dim's outputs) along dim: the differentiable half of ct_max_dim.
 * i: dim, keepdim */
int fwd_take_dim(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *t = a->t[0], *ix = a->t[1];
    const char *name = op == OP_max_dim_values ? "max" : "min";
    int d = wrap_dim(name, a->i[0], t->ndim);
    if (d < 0) return -1;
    if (ix->dtype != CT_INT64) return c10_error_int("%s: indices must be int64", name);
    bool keepdim = a->i[1] != 0;
    int expect = t->ndim == 0 ? 0 : keepdim ? t->ndim : t->ndim - 1;
    if (ix->ndim != expect) return c10_error_int("%s: indices have the wrong shape", name);
    TensorImpl *o = c10_empty(ix->sizes, ix->ndim, t->dtype, t->device);
    if (!o || o->device == CT_META || o->numel == 0) ONE(o);
    TensorImpl *ic = at_contiguous(ix);
    if (!ic) {
        c10_release(o);
        return -1;
    }
    const int64_t *idx = (const int64_t *)c10_data(ic);
    int64_t es = (int64_t)c10_elsize[t->dtype];
    const char *src = c10_data(t);
    char *dst = c10_data(o);
    for (int64_t k = 0; k < o->numel; k++) {
        int64_t rest = k, off = 0;
        for (int q = ix->ndim - 1; q >= 0; q--) {
            int64_t c = rest % ix->sizes[q];
            rest /= ix->sizes[q];
            int td = keepdim || q < d ? q : q + 1; /* the input dim of output dim q */
            if (td != d) off += c * t->strides[td];
        }
        if (t->ndim) {
            int64_t v = idx[k];
            if (v < 0 || v >= t->sizes[d]) {
                c10_release(ic);
                c10_release(o);
                return c10_error_int("%s: index %lld is out of bounds for dimension %d with size %lld", name,
                                     (long long)v, d, (long long)t->sizes[d]);
            }
            off += v * t->strides[d];
        }
        memcpy(dst + k * es, src + off * es, (size_t)es);
    }
    c10_release(ic);
    ONE(o);
}

/* amax, amin. t[0]; i: keepdim, ndims (0: all), dims... */
int fwd_amax(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *t = a->t[0];
    const char *name = op == OP_amax ? "amax" : "amin";
    for (int k = 0; k < (int)a->i[1] && k < a->ni - 2; k++) { /* torch: each dim in turn, named as given, */
        int d = wrap_dim(name, a->i[2 + k], t->ndim);     /* before the list's duplicates */
        if (d < 0) return -1;
        if (t->ndim && t->sizes[d] == 0)
            return c10_error_int("%s(): Expected reduction dim %lld to have non-zero size.", name,
                                 (long long)a->i[2 + k]);
    }
    bool mask[CT_MAX_DIMS], keepdim;
    if (parse_list(name, a, mask, &keepdim) < 0) return -1;
    if (a->i[1] == 0 && t->numel == 0)
        return c10_error_int("%s(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                             "reduction dim with the 'dim' argument.", name);
    RCtx c = {.fin = FIN_VALUE};
    ONE(reduce_into(t, mask, keepdim, t->dtype, op == OP_amax ? RK_AMAX : RK_AMIN, &c));
}

/* argmax, argmin: int64 indices. t[0]; i: dim, keepdim, has_dim (0: over the
 * flattened tensor; keepdim then keeps every dim as 1) */
int fwd_argmax(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *t = a->t[0];
    const char *name = op == OP_argmax ? "argmax" : "argmin";
    bool mask[CT_MAX_DIMS] = {0}, keepdim = a->i[1] != 0, trivial = false;
    if (a->i[2]) {
        int d = wrap_dim(name, a->i[0], t->ndim);
        if (d < 0) return -1;
        if (t->ndim) mask[d] = true;
        trivial = t->ndim && t->sizes[d] == 1; /* torch: zeros, whatever the dtype */
        if (check_nonempty(name, t, mask) < 0) return -1;
    } else {
        if (t->numel == 0)
            return c10_error_int("%s(): Expected reduction dim to be specified for input.numel() == 0.", name);
        for (int d = 0; d < t->ndim; d++) mask[d] = true;
    }
    TensorImpl *o = alloc_out(t, mask, keepdim, CT_INT64);
    if (!o) return -1;
    if (t->dtype == CT_BOOL && o->numel && !trivial) { /* an empty result is torch's, whatever the dtype */
        c10_release(o);
        return c10_error_int("\"%s_cpu\" not implemented for 'Bool'", name);
    }
    if (t->device != CT_META) {
        RPlan pl;
        plan_build(&pl, t, mask, false);
        int rk = op == OP_argmax ? RK_MAX : RK_MIN;
        RCtx c = {.rk = rk, .fin = FIN_INDEX, .iout = (int64_t *)c10_data(o), .vdt = CT_INT64};
        run_reduce(&pl, rk, &c);
    }
    out[0] = o;
    return 1;
}

/* The variance (fin FIN_VAR) or standard deviation (FIN_STD) of t over mask
 * into o, the means into means[nout]. Two passes: the means, then the squared
 * deviations from them and their sum, which corrects for the rounding of the
 * means (the corrected two-pass algorithm): equal values give exactly 0, as
 * torch's Welford does. */
static void var_pass(const TensorImpl *t, const bool *mask, double correction, int fin, TensorImpl *o,
                     double *means) {
    RPlan pl;
    plan_build(&pl, t, mask, true);
    RPlan pm = pl; /* the means in double whatever the dtype, as torch's Welford accumulates */
    pm.ct = CT_F64;
    RCtx c = {.rk = RK_SUM, .fin = FIN_AUX, .scale = 1.0 / (double)pl.nred, .aux = means};
    run_reduce(&pm, RK_SUM, &c);
    double div = (double)pl.nred - correction;
    RCtx c2 = {.rk = RK_SQDEV, .fin = fin, .scale = 1.0 / (div < 0 ? 0 : div), .n = (double)pl.nred,
               .aux = means, .vout = c10_data(o), .vdt = o->dtype};
    run_reduce(&pl, RK_SQDEV, &c2);
}

/* float64 rows whose result overflowed (values near DBL_MAX: their sum, or an
 * ulp of deviation squared, passes it) again from the values times 2^-600,
 * exact there: equal values give 0, as torch's Welford finds (it forms no
 * sum). As there, a variance past DBL_MAX stays inf, and so does its std. */
static void var_huge_rows(const TensorImpl *t, const bool *mask, double correction, int fin, TensorImpl *o) {
    double *d = (double *)c10_data(o);
    int64_t n = o->numel, k = 0;
    if (!n || (double)(t->numel / n) - correction < 1) return; /* a divisor below 1 overflows small values too */
    while (k < n && isfinite(d[k])) k++;
    if (k == n) return;
    double *m2 = malloc(sizeof(double) * (size_t)n);
    TensorImpl *f = m2 ? c10_scalar_tensor(0x1p-600, CT_FLOAT64, CT_CPU) : NULL;
    OpArgs a = {.t = {(TensorImpl *)t, f}, .nt = 2};
    TensorImpl *x = f ? at_call1(OP_mul, &a) : NULL, *o2 = x ? c10_empty(o->sizes, o->ndim, o->dtype, o->device) : NULL;
    if (o2) {
        var_pass(x, mask, correction, FIN_VAR, o2, m2);
        const double *d2 = (const double *)c10_data(o2);
        for (; k < n; k++)
            if (!isfinite(d[k])) d[k] = fin == FIN_VAR ? d2[k] * 0x1p600 * 0x1p600 : sqrt(d2[k] * 0x1p600 * 0x1p600);
    }
    free(m2);
    c10_release(f);
    c10_release(x);
    c10_release(o2);
}

/* var, std. t[0]; s[0]: correction; i: keepdim, ndims (0: all), dims... */
int fwd_var(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *t = a->t[0];
    const char *name = op == OP_var ? "var" : "std";
    if (!c10_is_float(t->dtype)) return c10_error_int("%s: std and var only support floating point and complex dtypes", name);
    bool mask[CT_MAX_DIMS], keepdim;
    if (parse_dims(name, a, mask, &keepdim, true) < 0) return -1;
    TensorImpl *o = alloc_out(t, mask, keepdim, t->dtype);
    if (!o || o->device == CT_META) ONE(o);
    double *means = malloc(sizeof(double) * (size_t)(o->numel ? o->numel : 1));
    if (!means) {
        c10_release(o);
        return c10_error_int("%s: out of memory", name);
    }
    int fin = op == OP_var ? FIN_VAR : FIN_STD;
    var_pass(t, mask, a->s[0], fin, o, means);
    if (t->dtype == CT_FLOAT64) var_huge_rows(t, mask, a->s[0], fin, o);
    free(means);
    ONE(o);
}

/* norm. t[0]; s[0]: p (inf, -inf, 0, 1, 2, other); i: keepdim, ndims (0: all), dims... */
int fwd_norm(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *t = a->t[0];
    if (!floating_or_error("norm(): input dtype should be either floating point or complex. Got %s instead.", t))
        return -1;
    bool mask[CT_MAX_DIMS], keepdim;
    if (parse_list("norm", a, mask, &keepdim) < 0) return -1;
    double p = a->s[0];
    bool empty = false;
    for (int d = 0; d < t->ndim; d++) empty |= mask[d] && t->sizes[d] == 0;
    if (p < 0 && empty) { /* min |x| (or 0^(1/p)) of nothing: torch.norm gives 0, as for p >= 0 */
        int64_t shape[CT_MAX_DIMS];
        int n = reduced_shape(t, mask, keepdim, shape);
        ONE(c10_full(shape, n, 0, t->dtype, t->device));
    }
    RCtx c = {.fin = FIN_NORM, .p = p};
    ONE(reduce_into(t, mask, keepdim, t->dtype, RK_NORM, &c));
}

int at_softmax_grad(TensorImpl *g, TensorImpl *y, int dim, bool log, TensorImpl **out) {
    *out = NULL;
    int d = c10_wrap_dim(dim, y->ndim);
    if (d < 0) return -1;
    bool ok = (y->dtype == CT_FLOAT32 || y->dtype == CT_FLOAT64) && g->dtype == y->dtype && y->device == CT_CPU &&
              g->device == CT_CPU && y->ndim > 0 && d == y->ndim - 1 && g->ndim == y->ndim &&
              !memcmp(g->sizes, y->sizes, sizeof(int64_t) * (size_t)y->ndim) && y->is_contiguous;
    if (!ok) return 0;
    TensorImpl *o = c10_empty(y->sizes, y->ndim, y->dtype, CT_CPU);
    TensorImpl *gc = o ? at_contiguous(g) : NULL; /* as torch's: an expanded gradient (of a sum) copied */
    if (!gc) return c10_release(o), -1;
    g = gc;
    int64_t D = y->sizes[d], R = D ? y->numel / D : 0;
    int nt = nthreads_for(y->numel);
    if (y->dtype == CT_FLOAT32)
        rk_softmax_grad_f((const float *)c10_data(g), (const float *)c10_data(y), (float *)c10_data(o), R, D, log, nt);
    else
        rk_softmax_grad_d((const double *)c10_data(g), (const double *)c10_data(y), (double *)c10_data(o), R, D, log,
                          nt);
    c10_release(gc);
    *out = o;
    return 1;
}

/* logsumexp. t[0]; i: keepdim, ndims (0: all), dims... Integer inputs give
 * float32. As PyTorch: m = amax (infinite m counts as 0), log(sum(exp(x - m))) + m. */
int fwd_logsumexp(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *t = a->t[0];
    bool mask[CT_MAX_DIMS], keepdim;
    if (parse_list("logsumexp", a, mask, &keepdim) < 0) return -1;
    ct_dtype dt = c10_is_float(t->dtype) ? t->dtype : CT_FLOAT32;
    TensorImpl *o = alloc_out(t, mask, keepdim, dt);
    if (!o || o->device == CT_META) ONE(o);
    TensorImpl *x = dt == t->dtype ? c10_retain(t) : at_to_dtype(t, dt);
    if (!x) {
        c10_release(o);
        return -1;
    }
    RPlan pl;
    plan_build(&pl, x, mask, true);
    double *m = malloc(sizeof(double) * (size_t)(pl.nout ? pl.nout : 1));
    if (!m) {
        c10_release(o);
        c10_release(x);
        return c10_error_int("logsumexp: out of memory");
    }
    int64_t nred = pl.nred;
    if (nred > 0) {
        RCtx c = {.rk = RK_AMAX, .fin = FIN_AUX, .scale = 1, .aux = m};
        run_reduce(&pl, RK_AMAX, &c);
        for (int64_t i = 0; i < pl.nout; i++)
            if (isinf(m[i])) m[i] = 0;
    } else {
        for (int64_t i = 0; i < pl.nout; i++) m[i] = 0;
    }
    RCtx c2 = {.rk = RK_SUMEXP, .fin = FIN_LSE, .aux = m, .vout = c10_data(o), .vdt = dt};
    run_reduce(&pl, RK_SUMEXP, &c2);
    free(m);
    c10_release(x);
    ONE(o);
}

/* all, any (all dims or a list). t[0]; i: keepdim, ndims (0: all), dims...
 * bool result (uint8 inputs give uint8, as in PyTorch). */
int fwd_all(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *t = a->t[0];
    const char *name = op == OP_all ? "all" : "any";
    bool mask[CT_MAX_DIMS], keepdim;
    if (parse_list(name, a, mask, &keepdim) < 0) return -1;
    ct_dtype dt = t->dtype == CT_UINT8 ? CT_UINT8 : CT_BOOL;
    RCtx c = {.fin = FIN_VALUE};
    ONE(reduce_into(t, mask, keepdim, dt, op == OP_all ? RK_ALL : RK_ANY, &c));
}

/* A contiguous copy of t converted to dt (at_to_dtype keeps t's layout). */
static TensorImpl *contig_copy(const TensorImpl *t, ct_dtype dt) {
    TensorImpl *o = c10_empty(t->sizes, t->ndim, dt, t->device);
    if (o && at_copy_(o, t) < 0) {
        c10_release(o);
        return NULL;
    }
    return o;
}

/* ------------------------------------------------------------------ scans */

/* [outer, D, inner] contiguous view of t around dim d */
static void split3(const TensorImpl *t, int d, int64_t *outer, int64_t *D, int64_t *inner) {
    *outer = *inner = 1;
    *D = t->ndim ? t->sizes[d] : 1;
    for (int k = 0; k < d; k++) *outer *= t->sizes[k];
    for (int k = d + 1; k < t->ndim; k++) *inner *= t->sizes[k];
}

/* scan_NAME: the running sums or products of x along D, in place, accumulated
 * in A: double for float32 and float64, float for the 16-bit floats (scanned
 * in a float32 copy), as torch's acc_type on the CPU. */
#define SCAN(NAME, T, A, OPR, ID)                                                        \
    static void scan_##NAME(void *xv, int64_t outer, int64_t D, int64_t inner, bool rev) { \
        T *x = xv;                                                                       \
        int nt = nthreads_for(outer * D * inner);                                       \
        (void)nt;                                                                        \
        if (inner == 1) { /* along rows: 8 side by side (one chain each; 16 rows a power \
                           * of two apart thrashed an L1 set of 12 ways) */         \
            OMP_FOR_NT                                                                   \
            for (int64_t r0 = 0; r0 < outer; r0 += 8) {                                  \
                int g = outer - r0 < 8 ? (int)(outer - r0) : 8;                          \
                A acc[8];                                                                \
                for (int r = 0; r < 8; r++) acc[r] = ID;                                 \
                for (int64_t k = 0; k < D; k++) {                                        \
                    T *restrict col = x + r0 * D + (rev ? D - 1 - k : k);                \
                    for (int r = 0; r < g; r++) {                                        \
                        acc[r] = OPR(acc[r], (A)col[r * D]);                             \
                        col[r * D] = (T)acc[r];                                          \
                    }                                                                    \
                }                                                                        \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
        int64_t jb = inner < 256 ? inner : 256, nb = (inner + jb - 1) / jb;             \
        OMP_FOR_NT                                                                       \
        for (int64_t u = 0; u < outer * nb; u++) {                                       \
            int64_t ob = u / nb, j0 = (u % nb) * jb, bl = inner - j0 < jb ? inner - j0 : jb; \
            A acc[256];                                                                  \
            for (int64_t j = 0; j < bl; j++) acc[j] = ID;                                \
            T *base = x + ob * D * inner + j0;                                           \
            for (int64_t k = 0; k < D; k++) {                                            \
                T *restrict row = base + (rev ? D - 1 - k : k) * inner;                  \
                for (int64_t j = 0; j < bl; j++) {                                       \
                    acc[j] = OPR(acc[j], (A)row[j]);                                     \
                    row[j] = (T)acc[j];                                                  \
                }                                                                        \
            }                                                                            \
        }                                                                                \
    }
#define ADD_(x, y) ((x) + (y))
#define MUL_(x, y) ((x) * (y))
SCAN(sum_f32, float, double, ADD_, 0)
SCAN(sum_f64, double, double, ADD_, 0)
SCAN(sum_half, float, float, ADD_, 0)
SCAN(sum_i64, int64_t, uint64_t, ADD_, 0)
SCAN(prod_f32, float, double, MUL_, 1)
SCAN(prod_f64, double, double, MUL_, 1)
SCAN(prod_half, float, float, MUL_, 1)
SCAN(prod_i64, int64_t, uint64_t, MUL_, 1)

/* cumsum, cumprod. t[0]; i: dim, reverse (1: from the end: the backward of cumsum) */
int fwd_cumsum(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *t = a->t[0];
    const char *name = op == OP_cumsum ? "cumsum" : "cumprod";
    int d = wrap_dim(name, a->i[0], t->ndim);
    if (d < 0) return -1;
    bool rev = a->ni > 1 && a->i[1];
    ct_dtype dt = c10_is_integral(t->dtype, true) ? CT_INT64 : t->dtype;
    if (t->device == CT_META) ONE(c10_empty(t->sizes, t->ndim, dt, t->device));
    ct_dtype wdt = (dt == CT_FLOAT16 || dt == CT_BFLOAT16) ? CT_FLOAT32 : dt;
    TensorImpl *w = contig_copy(t, wdt); /* scanned in place */
    if (!w) return -1;
    int64_t outer, D, inner;
    split3(t, d, &outer, &D, &inner);
    if (w->numel) {
        static void (*const scan[2][4])(void *, int64_t, int64_t, int64_t, bool) = {
            {scan_sum_f32, scan_sum_f64, scan_sum_half, scan_sum_i64},
            {scan_prod_f32, scan_prod_f64, scan_prod_half, scan_prod_i64}};
        int k = wdt == CT_FLOAT64 ? 1 : wdt != dt ? 2 : wdt == CT_FLOAT32 ? 0 : 3;
        scan[op != OP_cumsum][k](c10_data(w), outer, D, inner, rev);
    }
    if (wdt != dt) {
        TensorImpl *r = contig_copy(w, dt);
        c10_release(w);
        w = r;
    }
    ONE(w);
}

/* ---------------------------------------------------------------- softmax */

/* g: t's dims other than d, size-1 dims dropped, neighbours that step evenly
 * merged */
static void row_geom(const TensorImpl *t, int d, RowGeom *g) {
    g->nd = 0;
    for (int k = 0; k < t->ndim; k++) {
        if (k == d || t->sizes[k] == 1) continue;
        int n = g->nd;
        if (n && g->stride[n - 1] == t->strides[k] * t->sizes[k]) {
            g->size[n - 1] *= t->sizes[k];
            g->stride[n - 1] = t->strides[k];
        } else {
            g->size[n] = t->sizes[k];
            g->stride[n] = t->strides[k];
            g->nd++;
        }
    }
}

/* softmax, log_softmax. t[0]; i: dim. The result is contiguous; float16 and
 * bfloat16 compute in float32. */
int fwd_softmax(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *t = a->t[0];
    bool logm = op == OP_log_softmax;
    const char *name = logm ? "log_softmax" : "softmax";
    int d = wrap_dim(name, a->i[0], t->ndim);
    if (d < 0) return -1;
    if ((t->numel == 0 && !c10_is_float(t->dtype)) || t->device == CT_META) /* torch's (its meta takes integers) */
        ONE(c10_empty(t->sizes, t->ndim, t->dtype, t->device));
    if (!c10_is_float(t->dtype)) /* torch's kernel names: softmax_kernel_impl for both off the last dim */
        return c10_error_int("%s: \"%s_kernel_impl\" not implemented for '%s'", name,
                             d < t->ndim - 1 ? "softmax" : logm ? "log_softmax_lastdim" : "softmax_lastdim",
                             c10_dtype_cname(t->dtype));
    int64_t outer, D, inner;
    split3(t, d, &outer, &D, &inner);
    /* the rows' kernels round a bfloat16 row's log(sum) as torch's last-dim kernel;
     * off the last dim (size-1 dims after it) torch computes in float: the columns' */
    if (inner == 1 && t->numel && !(t->dtype == CT_BFLOAT16 && logm && d < t->ndim - 1)) {
        /* along the last dim: rows read where they are, gathered one by one when
         * their elements lie within a cache line of each other; rows further
         * apart (a transpose's) run in blocks of adjacent rows when a dim steps
         * by 1, else are copied first by the cache-blocked transpose: gathered,
         * each row would touch D lines mapping to few cache sets */
        int64_t es = t->ndim ? t->strides[d] : 1;
        bool far = es * (int64_t)c10_elsize[t->dtype] > 64;
        int nt = nthreads_for(t->numel);
        TensorImpl *y = c10_empty(t->sizes, t->ndim, t->dtype, t->device);
        if (!y) return -1;
        RowGeom g;
        row_geom(t, d, &g);
        int r = far ? softmax_lastdim_blocks(t->dtype, c10_data(t), &g, es, c10_data(y), D, logm, nt) : 0;
        if (!r) {
            TensorImpl *x = far ? at_contiguous(t) : c10_retain((TensorImpl *)t);
            if (far) /* rows of D, one after another */
                g = (RowGeom){.nd = 1, .size = {outer}, .stride = {D}}, es = 1;
            r = !x ? -2 : softmax_lastdim(t->dtype, c10_data(x), &g, es, c10_data(y), outer, D, logm, nt) ? 1 : -1;
            c10_release(x);
        }
        if (r < 0) {
            c10_release(y);
            if (r == -1) c10_error("%s: out of memory", name);
            return -1;
        }
        ONE(y);
    }
    TensorImpl *x = at_contiguous(t), *y = x ? c10_empty(t->sizes, t->ndim, t->dtype, t->device) : NULL;
    bool ok = y && (!t->numel || softmax_cols(t->dtype, c10_data(x), c10_data(y), outer, D, inner, logm,
                                              nthreads_for(t->numel)));
    c10_release(x);
    if (!ok) {
        if (y) c10_error("%s: out of memory", name);
        c10_release(y);
        return -1;
    }
    ONE(y);
}
