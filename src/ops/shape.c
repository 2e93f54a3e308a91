/* shape.c: the forwards of the view and copy rows of ops.def. Views wrap the
 * pure geometry of core/view.c; the argument layout of each is noted. */
#include "ops/ops.h"

/* Copy kernel: the engine has already converted src to dst's dtype. */
static void copy_kernel(int64_t n, char **p, const double *s) {
    memcpy(p[0], p[1], (size_t)n * (size_t)s[0]);
}

/* t().contiguous(): copying a matrix stored column-major into row-major order
 * through the engine gathers one element per cache line; copy in square tiles
 * instead, so that both sides stay in cache. Handles any batch of transposed
 * matrices (the last two dims swapped, the rest contiguous). */
#define TILE 64
#define TRANSPOSE_LOOP(T)                                                        \
    for (int64_t t = 0; t < ntiles; t++) {                                      \
        int64_t b = t / (ti * tj), r = t % (ti * tj), i0 = r / tj * TILE, j0 = r % tj * TILE; \
        const T *in = (const T *)s + b * R * C;                                 \
        T *out = (T *)d + b * R * C;                                            \
        int64_t i1 = i0 + TILE < R ? i0 + TILE : R, j1 = j0 + TILE < C ? j0 + TILE : C; \
        for (int64_t i = i0; i < i1; i++)                                       \
            for (int64_t j = j0; j < j1; j++) out[i * C + j] = in[j * R + i];   \
    }

#if defined(__AVX__)
#include <immintrin.h>
/* out (8 rows of stride ldo) = the transpose of in (8 rows of stride ldi), in
 * registers: the classic unpack/shuffle/permute sequence. */
static inline void transpose8x8(const float *in, int64_t ldi, float *out, int64_t ldo) {
    __m256 r0 = _mm256_loadu_ps(in + 0 * ldi), r1 = _mm256_loadu_ps(in + 1 * ldi);
    __m256 r2 = _mm256_loadu_ps(in + 2 * ldi), r3 = _mm256_loadu_ps(in + 3 * ldi);
    __m256 r4 = _mm256_loadu_ps(in + 4 * ldi), r5 = _mm256_loadu_ps(in + 5 * ldi);
    __m256 r6 = _mm256_loadu_ps(in + 6 * ldi), r7 = _mm256_loadu_ps(in + 7 * ldi);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(out + 0 * ldo, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(out + 1 * ldo, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(out + 2 * ldo, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(out + 3 * ldo, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(out + 4 * ldo, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(out + 5 * ldo, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(out + 6 * ldo, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(out + 7 * ldo, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

static bool copy_transposed(TensorImpl *dst, const TensorImpl *src) {
    int n = src->ndim;
    if (dst->dtype != src->dtype || !dst->is_contiguous || n < 2 || dst->numel < 4096 ||
        dst->device == CT_META || src->storage == dst->storage)
        return false;
    int64_t R = src->sizes[n - 2], C = src->sizes[n - 1];
    if (src->strides[n - 2] != 1 || src->strides[n - 1] != R || R < 2 || C < 2) return false;
    int64_t expect = R * C;
    for (int d = n - 3; d >= 0; d--) {
        if (src->sizes[d] != 1 && src->strides[d] != expect) return false;
        expect *= src->sizes[d];
    }
    const char *s = c10_data(src);
    char *d = c10_data(dst);
    int64_t ti = (R + TILE - 1) / TILE, tj = (C + TILE - 1) / TILE, ntiles = dst->numel / (R * C) * ti * tj;
#if defined(__AVX__)
    if (c10_elsize[dst->dtype] == 4 && R % 8 == 0 && C % 8 == 0) {
#pragma omp parallel for schedule(static) if (dst->numel > 65536)
        for (int64_t t = 0; t < ntiles; t++) {
            int64_t b = t / (ti * tj), r = t % (ti * tj), i0 = r / tj * TILE, j0 = r % tj * TILE;
            int64_t i1 = i0 + TILE < R ? i0 + TILE : R, j1 = j0 + TILE < C ? j0 + TILE : C;
            const float *in = (const float *)s + b * R * C;
            float *out = (float *)d + b * R * C;
            for (int64_t i = i0; i < i1; i += 8)
                for (int64_t j = j0; j < j1; j += 8) transpose8x8(in + j * R + i, R, out + i * C + j, C);
        }
        return true;
    }
#endif
    switch (c10_elsize[dst->dtype]) {
    case 1:
#pragma omp parallel for schedule(static) if (dst->numel > 65536)
        TRANSPOSE_LOOP(uint8_t)
        break;
    case 2:
#pragma omp parallel for schedule(static) if (dst->numel > 65536)
        TRANSPOSE_LOOP(uint16_t)
        break;
    case 4:
#pragma omp parallel for schedule(static) if (dst->numel > 65536)
        TRANSPOSE_LOOP(uint32_t)
        break;
    default:
#pragma omp parallel for schedule(static) if (dst->numel > 65536)
        TRANSPOSE_LOOP(uint64_t)
        break;
    }
    return true;
}

int at_copy_(TensorImpl *dst, const TensorImpl *src) {
    if (!at_same_device("copy_", dst, src)) return -1;
    double es = (double)c10_elsize[dst->dtype];
    ElementwiseSpec spec = {"copy_", 1, dst->dtype, dst->dtype, dst->dtype};
    TensorImpl *in[1] = {(TensorImpl *)src}, *o = dst;
    /* copying a tensor onto itself is a no-op, as in PyTorch */
    if (src->storage == dst->storage && src->offset == dst->offset && src->dtype == dst->dtype &&
        src->ndim == dst->ndim && !memcmp(src->sizes, dst->sizes, sizeof(int64_t) * (size_t)src->ndim) &&
        !memcmp(src->strides, dst->strides, sizeof(int64_t) * (size_t)src->ndim))
        return 0;
    if (src->ndim == dst->ndim && !memcmp(src->sizes, dst->sizes, sizeof(int64_t) * (size_t)src->ndim) &&
        copy_transposed(dst, src))
        return 0;
    return ew_run(&spec, in, &o, copy_kernel, &es);
}

TensorImpl *at_to_dtype(const TensorImpl *t, ct_dtype dtype) {
    TensorImpl *o = at_empty_like(t, dtype); /* torch.preserve_format */
    if (o && at_copy_(o, t) < 0) {
        c10_release(o);
        return NULL;
    }
    return o;
}

TensorImpl *at_contiguous(const TensorImpl *t) {
    if (t->is_contiguous) return c10_retain((TensorImpl *)t);
    TensorImpl *o = c10_empty(t->sizes, t->ndim, t->dtype, t->device);
    if (o && at_copy_(o, t) < 0) {
        c10_release(o);
        return NULL;
    }
    return o;
}

#define ONE(expr) return (out[0] = (expr)) ? 1 : -1

/* t[0]; i: size[ndim], stride[ndim], ndim, offset  (ni = 2*ndim + 2) */
int fwd_as_strided(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    int n = (int)a->i[a->ni - 2];
    ONE(c10_as_strided(a->t[0], a->i, a->i + n, n, a->i[a->ni - 1]));
}
/* t[0]; i: shape (ni = ndim) */
int fwd_view(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_view(a->t[0], a->i, a->ni));
}
/* t[0]; i: dim, start, length */
int fwd_narrow(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_narrow(a->t[0], (int)a->i[0], a->i[1], a->i[2]));
}
/* t[0]; i: dim, start, end, step */
int fwd_slice(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_slice(a->t[0], (int)a->i[0], a->i[1], a->i[2], a->i[3]));
}
/* t[0]; i: dim, index */
int fwd_select(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_select(a->t[0], (int)a->i[0], a->i[1]));
}
/* t[0]; i: dim0, dim1 */
int fwd_transpose(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_transpose(a->t[0], (int)a->i[0], (int)a->i[1]));
}
/* t[0]; i: dims (ni = ndim) */
int fwd_permute(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_permute(a->t[0], a->i, a->ni));
}
/* t[0]; i: shape (ni = ndim) */
int fwd_expand(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_expand(a->t[0], a->i, a->ni));
}
/* t[0]; i: dim (CT_MAX_DIMS: every size-1 dim) */
int fwd_squeeze(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_squeeze(a->t[0], (int)a->i[0]));
}
/* t[0]; i: dim */
int fwd_unsqueeze(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_unsqueeze(a->t[0], (int)a->i[0]));
}
/* t[0]; i: offset, dim1, dim2 */
int fwd_diagonal(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_diagonal(a->t[0], a->i[0], (int)a->i[1], (int)a->i[2]));
}
/* t[0]; i: dim, size, step */
int fwd_unfold(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_unfold(a->t[0], (int)a->i[0], a->i[1], a->i[2]));
}
/* t[0]: a new TensorImpl over the same data (detach, view_as of itself) */
int fwd_alias(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(c10_alias(a->t[0]));
}
/* t[0] */
int fwd_clone(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(at_to_dtype(a->t[0], a->t[0]->dtype));
}
/* t[0]: a contiguous copy (clone with memory_format=torch.contiguous_format) */
int fwd_contiguous(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    ONE(at_contiguous(a->t[0]));
}
/* t[0]; i: shape (already inferred): a contiguous copy in the new shape */
int fwd_reshape_copy(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *c = at_contiguous(a->t[0]);
    if (!c) return -1;
    TensorImpl *v = c10_view(c, a->i, a->ni);
    c10_release(c);
    ONE(v);
}
/* t[0]; i: dtype */
int fwd_to_dtype(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (!c10_dtype_valid((int)a->i[0])) return c10_error_int("to: invalid dtype %d", (int)a->i[0]);
    ONE(at_to_dtype(a->t[0], (ct_dtype)a->i[0]));
}
/* dst = t[0] (written), t[1] = src */
int fwd_copy_(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (at_copy_(a->t[0], a->t[1]) < 0) return -1;
    out[0] = c10_retain(a->t[0]);
    return 1;
}
/* dst = t[0] (written); s[0]: value. Overlapping tensors (expand) may be filled. */
int fwd_fill_(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (c10_check_value_fits(a->s[0], a->t[0]->dtype) < 0) return -1;
    c10_fill(a->t[0], a->s[0]);
    out[0] = c10_retain(a->t[0]);
    return 1;
}

/* t[0]; i: shape (ni = ndim). Sums t down to shape (broadcasting undone):
 * leading dims vanish, dims of size 1 in shape are summed with keepdim. */
int fwd_sum_to_size(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *t = a->t[0];
    int nd = a->ni, lead = t->ndim - nd;
    if (lead < 0) return c10_error_int("sum_to_size: size %s is not expandable to size %s",
                                       c10_shape_str(a->i, nd), c10_shape_str(t->sizes, t->ndim));
    for (int i = 0; i < nd; i++)
        if (a->i[i] != 1 && a->i[i] != t->sizes[lead + i])
            return c10_error_int("sum_to_size: size %s is not expandable to size %s", c10_shape_str(a->i, nd),
                                 c10_shape_str(t->sizes, t->ndim));
    /* the reduction engine (reduce.c): sum the leading dims and the dims that
     * shape has as 1, with keepdim, then view as shape */
    OpArgs s = {.t = {(TensorImpl *)t}, .nt = 1, .i = {1, 0}};
    int n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (d < lead || (a->i[d - lead] == 1 && t->sizes[d] != 1)) s.i[2 + n++] = d;
    if (n == 0) { /* nothing to sum: a contiguous copy in shape */
        TensorImpl *c = c10_empty(a->i, nd, t->dtype, t->device);
        if (c && at_copy_(c, t) < 0) {
            c10_release(c);
            c = NULL;
        }
        return (out[0] = c) ? 1 : -1;
    }
    s.i[1] = n;
    s.ni = 2 + n;
    TensorImpl *r = at_call1(OP_sum_dims, &s);
    if (r && r->dtype != t->dtype) {
        TensorImpl *c = at_to_dtype(r, t->dtype);
        c10_release(r);
        r = c;
    }
    TensorImpl *v = r ? c10_view(r, a->i, nd) : NULL;
    c10_release(r);
    return (out[0] = v) ? 1 : -1;
}

/* t[0] = g; i: base ndim nb, base sizes[nb], base strides[nb], view ndim nv,
 * sizes[nv], strides[nv], offset. The backward of every view: zeros laid out
 * like the base (its strides when dense, else contiguous) with g added into the
 * view's elements (repeatedly where the view overlaps itself, as expand and
 * unfold do). */
int fwd_view_scatter(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *g = a->t[0];
    int nb = (int)a->i[0];
    const int64_t *base = a->i + 1, *base_strides = base + nb;
    int nv = (int)a->i[1 + 2 * nb];
    const int64_t *sizes = a->i + 2 + 2 * nb, *strides = sizes + nv;
    int64_t offset = strides[nv];
    TensorImpl *o = at_empty_strided(base, base_strides, nb, g->dtype, g->device);
    if (!o) return -1;
    c10_fill(o, 0);
    if (g->numel != 0 && o->device != CT_META) {
        int64_t es = (int64_t)c10_elsize[o->dtype];
        char *od = c10_data(o);
        const char *gd = c10_data(g);
        int64_t limit = (int64_t)(o->storage->nbytes / (size_t)es);
        for (int64_t k = 0; k < g->numel; k++) {
            int64_t rest = k, off = offset;
            for (int d = nv - 1; d >= 0; d--) {
                off += (rest % sizes[d]) * strides[d];
                rest /= sizes[d];
            }
            if (off < 0 || off >= limit) {
                c10_release(o);
                return c10_error_int("view geometry reaches outside its base (element %lld of %lld)",
                                     (long long)off, (long long)limit);
            }
            double v = c10_load_double(od + off * es, o->dtype) + c10_load_double(gd + c10_linear_offset(g, k), g->dtype);
            c10_store_double(od + off * es, o->dtype, v);
        }
    }
    out[0] = o;
    return 1;
}
