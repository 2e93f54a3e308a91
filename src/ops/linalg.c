/* linalg.c: the linear-algebra rows of ops.def (mm bmm matmul mv dot outer addmm
 * baddbmm linear) and the matrix-product engine that conv.c shares.
 *
 * Every product is reduced to one canonical form: a batch of gemms
 *     C[b] = alpha * A[b] @ B[b] + beta * C[b]
 * with A a view [batch..., M, K], B a view [batch..., K, N] (any strides, zero
 * strides for broadcast batch dims: no copies) and C a new contiguous
 * [batch..., M, N]. float32/float64 go to CBLAS sgemm/dgemm, with the transpose
 * flag chosen from the strides so that transposed operands are not copied (a
 * matrix is copied only when neither of its dims has unit stride). float16 and
 * bfloat16 compute in float32, integers in int64 (wrapping, as PyTorch's int
 * kernels do); both through contiguous converted copies. Integers, and every
 * dtype when built without BLAS, use a plain C loop. A batch of small gemms is
 * spread over OpenMP threads (BLAS then runs single-threaded in each); a big
 * gemm runs alone on BLAS's threads. 3-d @ 2-d folds the batch into the rows:
 * one big gemm, as PyTorch does. */
#include "ops/ops.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef CT_HAVE_BLAS
#include <cblas.h>
#endif

CT_INTERNAL TensorImpl *la_matmul(const char *op, TensorImpl *a, TensorImpl *b, TensorImpl *init, double alpha,
                                  double beta);

/* ------------------------------------------------------------ error helpers */

/* torch's t.size(d), as its kernels ask for sizes before they check ranks: 0, or
 * -1 with its words */
static int size_at(const char *op, const TensorImpl *t, int d) {
    if (t->ndim == 0) return c10_error_int("%s: Dimension specified as %d but tensor has no dimensions", op, d);
    return c10_wrap_dim(d, t->ndim) < 0 ? la_prefix_error(op) : 0;
}

/* Prefixes the current message with "op: " (messages from core helpers such as
 * expand or broadcast come unprefixed). Returns -1. */
int la_prefix_error(const char *op) {
    const char *m = ct_last_error();
    if (!m) return -1;
    size_t n = strlen(op);
    if (!strncmp(m, op, n) && m[n] == ':') return -1;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", m);
    return c10_error_int("%s: %s", op, buf);
}

/* ---------------------------------------------------------- the gemm kernels */

/* The dtype a product computes in: float32 for float16/bfloat16, int64 for integers. */
ct_dtype la_compute_dtype(ct_dtype d) { return c10_is_float(d) ? c10_opmath(d) : CT_INT64; }

#define PAR_FLOPS 65536.0 /* below this many multiply-adds, one thread */

/* C (rows of ldc) = alpha * A @ B + beta * C, A strided, B contiguous [K, N].
 * T is the stored type, U the arithmetic type (unsigned for wrapping ints). */
#define GEMM_LOOP(NAME, T, U)                                                                       \
    static void NAME(int64_t M, int64_t N, int64_t K, U alpha, const T *A, int64_t ars, int64_t acs,   \
                     const T *B, U beta, T *C, int64_t ldc) {                                       \
        OMP(omp parallel for schedule(static) if ((double)M * N * K > 65536.0))              \
        for (int64_t i = 0; i < M; i++) {                                                           \
            U *restrict c = (U *)(C + i * ldc);                                                     \
            if (beta == 0)                                                                          \
                for (int64_t j = 0; j < N; j++) c[j] = 0;                                           \
            else if (beta != 1)                                                                     \
                for (int64_t j = 0; j < N; j++) c[j] = (U)(beta * c[j]);                            \
            for (int64_t k = 0; k < K; k++) {                                                       \
                U aik = (U)(alpha * (U)A[i * ars + k * acs]);                                       \
                const U *restrict b = (const U *)(B + k * N);                                       \
                for (int64_t j = 0; j < N; j++) c[j] += aik * b[j];                                 \
            }                                                                                       \
        }                                                                                           \
    }
GEMM_LOOP(gemm_loop_f32, float, float)
GEMM_LOOP(gemm_loop_f64, double, double)
GEMM_LOOP(gemm_loop_i64, int64_t, uint64_t)

/* Packs a strided rows x cols matrix of 4- or 8-byte elements into a
 * contiguous buffer from the caching allocator, freed with unpack (a
 * backward's expanded ones are packed twice a step: element by element
 * through memcpy into fresh malloc'd pages, [512,1024] linear forward +
 * backward took 1.2x torch's time) */

static size_t pack_bytes(int64_t rows, int64_t cols, size_t es) { return (size_t)(rows * cols > 0 ? rows * cols : 1) * es; }
static void *pack(const char *p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, size_t es) {
    void *buf = c10_alloc(pack_bytes(rows, cols, es));
    if (!buf) return NULL;
    for (int64_t i = 0; i < rows; i++) {
        const char *r = p + i * rs * (int64_t)es;
        if (es == 4)
            for (int64_t j = 0; j < cols; j++) ((uint32_t *)buf)[i * cols + j] = ((const uint32_t *)r)[j * cs];
        else
            for (int64_t j = 0; j < cols; j++) ((uint64_t *)buf)[i * cols + j] = ((const uint64_t *)r)[j * cs];
    }
    return buf;
}
static void unpack(void *buf, int64_t rows, int64_t cols, size_t es) {
    if (buf) c10_dealloc(buf, pack_bytes(rows, cols, es));
}

#ifdef CT_HAVE_BLAS
/* Can a rows x cols matrix with these element strides go to BLAS as is (row
 * major, NoTrans) or transposed? Sets the flag and the leading dimension. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, enum CBLAS_TRANSPOSE *tr,
                        int64_t *ld) {
    int64_t lim = INT_MAX;
    if ((cs == 1 || cols <= 1) && (rows <= 1 || (rs >= (cols > 1 ? cols : 1) && rs <= lim))) {
        *tr = CblasNoTrans;
        *ld = rows <= 1 ? (cols > 1 ? cols : 1) : rs;
        return true;
    }
    if ((rs == 1 || rows <= 1) && (cols <= 1 || (cs >= (rows > 1 ? rows : 1) && cs <= lim))) {
        *tr = CblasTrans;
        *ld = cols <= 1 ? (rows > 1 ? rows : 1) : cs;
        return true;
    }
    return false;
}

/* One cblas call, row major: C = alpha * op(A) @ op(B) + beta * C (sizes fit int). */
static void blas_call(bool f32, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K,
                      double alpha, const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                      int64_t ldc) {
    if (f32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, (float)alpha, A, (int)lda, B, (int)ldb,
                    (float)beta, C, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C,
                    (int)ldc);
}

#define SPLIT_MACS 131072.0 /* multiply-adds a thread needs before a gemm is split */

/* Start of block t of nt over n rows or columns, on a multiple of al (block nt: n). */
static int64_t block_start(int64_t n, int t, int nt, int64_t al) {
    return t >= nt ? n : (n * t / nt + al / 2) / al * al;
}

/* blas_call spread over the OpenMP threads by hand: OpenBLAS's own threading
 * scales poorly on the medium gemms of an MLP step (1.6x on 2 threads against
 * 1.9x here), so outside a parallel region a gemm with enough work is cut into
 * one block of rows (K <= M: few products per element, the output dominates)
 * or of columns per thread, each a single-threaded BLAS call (OpenBLAS does not
 * thread inside a parallel region). Every element is the same dot product over K
 * as unsplit. Blocks of rows start on multiples of 8, of columns on 16. */
static void blas_gemm(bool f32, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K,
                      double alpha, const char *A, int64_t lda, const char *B, int64_t ldb, double beta, char *C,
                      int64_t ldc) {
    int nt = c10_free_threads();
    double macs = (double)M * (double)N * (double)K;
    if (nt > macs / SPLIT_MACS) nt = (int)(macs / SPLIT_MACS);
    bool rows = K <= M || N < 32;
    int64_t ext = rows ? M : N, al = rows ? 8 : 16;
    if (nt > ext / al) nt = (int)(ext / al);
    if (nt <= 1) {
        blas_call(f32, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int64_t es = f32 ? 4 : 8;
    /* element steps from one row of op(A) (one column of op(B)) to the next */
    int64_t astep = ta == CblasNoTrans ? lda : 1, bstep = tb == CblasNoTrans ? 1 : ldb;
OMP(omp parallel num_threads(nt))
    {
        int t = 0, n = 1;
#ifdef _OPENMP
        t = omp_get_thread_num(), n = omp_get_num_threads();
#endif
        int64_t lo = block_start(ext, t, n, al), hi = block_start(ext, t + 1, n, al);
        if (hi > lo && rows)
            blas_call(f32, ta, tb, hi - lo, N, K, alpha, A + lo * astep * es, lda, B, ldb, beta, C + lo * ldc * es,
                      ldc);
        else if (hi > lo)
            blas_call(f32, ta, tb, M, hi - lo, K, alpha, A, lda, B + lo * bstep * es, ldb, beta, C + lo * es, ldc);
    }
}
#endif

/* One gemm in compute dtype cd (float32, float64 or int64). A: M x K with
 * element strides (ars, acs); B: K x N with (brs, bcs); C: M x N rows of ldc.
 * Returns 0, or -1 when out of memory. */
int la_gemm(ct_dtype cd, int64_t M, int64_t N, int64_t K, double alpha, const void *A, int64_t ars,
            int64_t acs, const void *B, int64_t brs, int64_t bcs, double beta, void *C, int64_t ldc) {
    size_t es = c10_elsize[cd];
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) { /* C = beta * C */
        for (int64_t i = 0; i < M; i++) {
            char *c = (char *)C + i * ldc * (int64_t)es;
            if (beta == 0) memset(c, 0, (size_t)N * es);
            else if (cd == CT_INT64)
                for (int64_t j = 0; j < N; j++)
                    ((int64_t *)c)[j] = (int64_t)((uint64_t)(int64_t)beta * (uint64_t)((int64_t *)c)[j]);
            else
                for (int64_t j = 0; j < N; j++)
                    c10_store_double(c + j * (int64_t)es, cd, beta * c10_load_double(c + j * (int64_t)es, cd));
        }
        return 0;
    }
#ifdef CT_HAVE_BLAS
    if (cd != CT_INT64 && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && ldc <= INT_MAX) {
        enum CBLAS_TRANSPOSE ta, tb;
        int64_t lda, ldb;
        void *pa = NULL, *pb = NULL;
        if (!blas_layout(M, K, ars, acs, &ta, &lda)) {
            if (!(pa = pack(A, M, K, ars, acs, es))) return c10_error_int("out of memory");
            A = pa, ta = CblasNoTrans, lda = K;
        }
        if (!blas_layout(K, N, brs, bcs, &tb, &ldb)) {
            if (!(pb = pack(B, K, N, brs, bcs, es))) {
                unpack(pa, M, K, es);
                return c10_error_int("out of memory");
            }
            B = pb, tb = CblasNoTrans, ldb = N;
        }
        blas_gemm(cd == CT_FLOAT32, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        unpack(pa, M, K, es);
        unpack(pb, K, N, es);
        return 0;
    }
#endif
    void *pb = NULL;
    if (!(bcs == 1 && (brs == N || K == 1))) {
        if (!(pb = pack(B, K, N, brs, bcs, es))) return c10_error_int("out of memory");
        B = pb;
    }
    switch (cd) {
    case CT_FLOAT32: gemm_loop_f32(M, N, K, (float)alpha, A, ars, acs, B, (float)beta, C, ldc); break;
    case CT_FLOAT64: gemm_loop_f64(M, N, K, alpha, A, ars, acs, B, beta, C, ldc); break;
    default:
        gemm_loop_i64(M, N, K, (uint64_t)(int64_t)alpha, A, ars, acs, B, (uint64_t)(int64_t)beta, C, ldc);
        break;
    }
    unpack(pb, K, N, es);
    return 0;
}

/* ------------------------------------------------------- the batched engine */

/* Runs C = alpha * A @ B + beta * C over the batch: A [bt..., M, K] and
 * B [bt..., K, N] views of dtype cd (la_compute_dtype of itself), C contiguous
 * [bt..., M, N] of cd. */
static int run_batched(TensorImpl *A, TensorImpl *B, TensorImpl *C, double alpha, double beta) {
    int nd = A->ndim, nbd = nd - 2;
    int64_t M = A->sizes[nd - 2], K = A->sizes[nd - 1], N = B->sizes[nd - 1];
    int64_t nb = 1;
    for (int d = 0; d < nbd; d++) nb *= C->sizes[d];
    if (nb == 0 || M == 0 || N == 0) return 0;
    ct_dtype cd = C->dtype;
    int64_t es = (int64_t)c10_elsize[cd];
    const char *pa = c10_data(A), *pb = c10_data(B);
    char *pc = c10_data(C);
    int64_t ars = A->strides[nd - 2], acs = A->strides[nd - 1];
    int64_t brs = B->strides[nd - 2], bcs = B->strides[nd - 1];
    if (nb == 1)
        return la_gemm(cd, M, N, K, alpha, pa, ars, acs, pb, brs, bcs, beta, pc, N);
    /* over the batch: small gemms, or up to ~650^3 when the batch divides
     * evenly among the threads (a gemm on 2 threads of its own: [64,128,128]
     * 4.8x slower, [4,512,512] 1.14x) */
    double flops = (double)M * N * K;
    int nt = c10_free_threads();
    bool par = nb > 1 && flops * nb > PAR_FLOPS && (flops < 1.5e6 || (nb % nt == 0 && flops < 2.7e8));
    (void)par;
    int fail = 0;
OMP(omp parallel for schedule(static) if (par) reduction(| : fail))
    for (int64_t b = 0; b < nb; b++) {
        int64_t rest = b, oa = 0, ob = 0;
        for (int d = nbd - 1; d >= 0; d--) {
            int64_t i = rest % C->sizes[d];
            rest /= C->sizes[d];
            oa += i * A->strides[d];
            ob += i * B->strides[d];
        }
        fail |= la_gemm(cd, M, N, K, alpha, pa + oa * es, ars, acs, pb + ob * es, brs, bcs, beta,
                        pc + b * M * N * es, N) < 0;
    }
    return fail ? c10_error_int("out of memory") : 0;
}

/* A contiguous view of the contiguous t with another shape of the same numel. */
static TensorImpl *reshaped(const TensorImpl *t, const int64_t *shape, int nd) {
    int64_t st[CT_MAX_DIMS], s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        st[d] = s;
        s *= shape[d] > 1 ? shape[d] : 1;
    }
    return c10_as_strided(t, shape, st, nd, t->offset);
}

/* The product of the canonical views A, B (same batch rank; batch sizes equal
 * or broadcast through zero strides), written into a new tensor of dtype d and
 * shape out_shape (same numel as [bt..., M, N]). A and B have dtype d unless
 * the product is empty or K is 0 (torch's shortcut, see check_types): then
 * they are never read. init (may be NULL) is broadcast into the result first
 * and scaled by beta. */
static TensorImpl *product(const char *op, ct_dtype d, TensorImpl *A, TensorImpl *B, const int64_t *out_shape,
                           int out_nd, TensorImpl *init, double alpha, double beta) {
    ct_dtype cd = la_compute_dtype(d);
    TensorImpl *out = c10_empty(out_shape, out_nd, d, A->device);
    if (!out) return NULL;
    if (init) {
        if (!at_same_device(op, out, init)) goto fail;
        TensorImpl *e = c10_expand(init, out_shape, out_nd);
        if (!e) {
            la_prefix_error(op);
            goto fail;
        }
        c10_release(e);
    }
    if (out->device == CT_META || !out->numel) return out;
    int nd = A->ndim;
    int64_t cshape[CT_MAX_DIMS];
    for (int i = 0; i < nd - 2; i++) cshape[i] = A->sizes[i] > B->sizes[i] ? A->sizes[i] : B->sizes[i];
    cshape[nd - 2] = A->sizes[nd - 2];
    cshape[nd - 1] = B->sizes[nd - 1];
    TensorImpl *Ac = NULL, *Bc = NULL, *C = NULL;
    if (cd == d) {
        Ac = c10_retain(A), Bc = c10_retain(B);
        C = reshaped(out, cshape, nd);
    } else {
        Ac = at_to_dtype(A, cd), Bc = Ac ? at_to_dtype(B, cd) : NULL;
        C = c10_empty(cshape, nd, cd, out->device);
    }
    int rc = (Ac && Bc && C) ? 0 : -1;
    if (!rc && init && beta != 0) {
        TensorImpl *Cv = reshaped(C, out_shape, out_nd);
        rc = Cv ? at_copy_(Cv, init) : -1;
        c10_release(Cv);
    }
    if (!rc) rc = run_batched(Ac, Bc, C, alpha, (init && beta != 0) ? beta : 0);
    if (!rc && cd != d) {
        TensorImpl *Cv = reshaped(C, out_shape, out_nd);
        rc = Cv ? at_copy_(out, Cv) : -1;
        c10_release(Cv);
    }
    c10_release(Ac);
    c10_release(Bc);
    c10_release(C);
    if (rc) goto fail;
    return out;
fail:
    c10_release(out);
    return NULL;
}

/* A 3-d or (nd)-d view of t's storage. */
static TensorImpl *view_of(const TensorImpl *t, const int64_t *size, const int64_t *stride, int nd) {
    return c10_as_strided(t, size, stride, nd, t->offset);
}

/* ------------------------------------------------------------ dtype checks */

static int not_implemented(const char *op, const char *kernel, ct_dtype d) {
    return c10_error_int("%s: \"%s\" not implemented for '%s'", op, kernel, c10_dtype_cname(d));
}
/* The device and dtype checks of a product whose kernel dispatches on a's
 * dtype. torch's mm / mv / bmm (and matmul through them) return zeros before
 * any dtype check when there is nothing to compute (an empty result or an
 * inner size of 0: an operand of no elements), in the dtype their result takes
 * (mm: mat1's, mv: vec's, bmm: batch2's), so any dtypes pass then. Else a's
 * dtype must have a kernel (all but bool; float16 too, unlike torch 1.13 on
 * CPU, but not with a mismatch: torch's message) and b's must equal it. */
static int check_types(const char *op, const char *kernel, const TensorImpl *a, const TensorImpl *b) {
    if (!at_same_device(op, a, b)) return -1;
    if (!a->numel || !b->numel) return 0;
    if (a->dtype == CT_BOOL || (a->dtype == CT_FLOAT16 && b->dtype != a->dtype))
        return not_implemented(op, kernel, a->dtype);
    if (a->dtype != b->dtype)
        return c10_error_int("%s: expected scalar type %s but found %s", op, c10_dtype_cname(a->dtype),
                             c10_dtype_cname(b->dtype));
    return 0;
}

/* ---------------------------------------------------------------- mm, bmm */

/* mm's checks; addmm's (self given) expand self to the product's shape before the
 * kernel's dtype check, as torch */
static int check_mm(const char *op, const TensorImpl *a, const TensorImpl *b, const TensorImpl *self) {
    if (a->ndim != 2) return c10_error_int("%s: self must be a matrix", op);
    if (b->ndim != 2) return c10_error_int("%s: mat2 must be a matrix", op);
    if (a->sizes[1] != b->sizes[0])
        return c10_error_int("%s: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)", op,
                             (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
                             (long long)b->sizes[1]);
    if (self) {
        int64_t shape[2] = {a->sizes[0], b->sizes[1]};
        TensorImpl *e = c10_expand(self, shape, 2);
        if (!e) return la_prefix_error(op);
        c10_release(e);
    }
    return check_types(op, "addmm_impl_cpu_", a, b);
}

static TensorImpl *mm_impl(const char *op, TensorImpl *a, TensorImpl *b, TensorImpl *init, double alpha,
                           double beta) {
    int64_t shape[2] = {a->sizes[0], b->sizes[1]};
    return product(op, a->dtype, a, b, shape, 2, init, alpha, beta);
}

/* t[0] = self [n, m], t[1] = mat2 [m, p] */
int fwd_mm(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (check_mm("mm", a->t[0], a->t[1], NULL)) return -1;
    return (out[0] = mm_impl("mm", a->t[0], a->t[1], NULL, 1, 0)) ? 1 : -1;
}

static int check_bmm(const char *op, const TensorImpl *a, const TensorImpl *b) {
    if (a->ndim != 3) return c10_error_int("%s: batch1 must be a 3D tensor", op);
    if (b->ndim != 3) return c10_error_int("%s: batch2 must be a 3D tensor", op);
    if (b->sizes[0] != a->sizes[0] || b->sizes[1] != a->sizes[2])
        return c10_error_int("%s: Expected size for first two dimensions of batch2 tensor to be: [%lld, %lld] but "
                             "got: [%lld, %lld].",
                             op, (long long)a->sizes[0], (long long)a->sizes[2], (long long)b->sizes[0],
                             (long long)b->sizes[1]);
    return check_types(op, op, a, b); /* "bmm" or "baddbmm" */
}

/* t[0] = batch1 [b, n, m], t[1] = batch2 [b, m, p] */
int fwd_bmm(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *x = a->t[0], *y = a->t[1];
    if (check_bmm("bmm", x, y)) return -1;
    int64_t shape[3] = {x->sizes[0], x->sizes[1], y->sizes[2]};
    return (out[0] = product("bmm", y->dtype, x, y, shape, 3, NULL, 1, 0)) ? 1 : -1;
}

/* torch's addmm / baddbmm of integers: with an inner size of 0 they are
 * self.mul(beta), a fractional beta making self float, which the output
 * refuses; else the kernel converts beta and alpha to the dtype, checked */
static int int_scalars(const char *op, int64_t inner, int64_t outnumel, ct_dtype d, double beta, double alpha) {
    if (c10_is_float(d) || !outnumel) return 0; /* an empty result returns before either */
    if (!inner)
        return beta == 0 || beta == trunc(beta) ? 0 : c10_error_int("%s: result type Float can't be cast to the "
                                                                    "desired output type %s", op, c10_dtype_cname(d));
    return c10_check_value_fits(beta, d) < 0 || c10_check_value_fits(alpha, d) < 0 ? -1 : 0;
}

/* addmm's first checks (before its shapes; mm has none): self, mat1 and mat2 of one dtype */
static int addmm_dtypes(const char *op, const TensorImpl *s, const TensorImpl *x, const TensorImpl *y) {
    if (s->dtype != y->dtype) return c10_error_int("%s: self and mat2 must have the same dtype", op);
    if (x->dtype != y->dtype) return c10_error_int("%s: mat1 and mat2 must have the same dtype", op);
    return 0;
}

/* t[0] = self (broadcast to [n, p]), t[1] = mat1 [n, m], t[2] = mat2 [m, p];
 * s[0] = beta, s[1] = alpha: beta * self + alpha * mat1 @ mat2 (self ignored when beta == 0) */
int fwd_addmm(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *s = a->t[0], *x = a->t[1], *y = a->t[2];
    if (addmm_dtypes("addmm", s, x, y)) return -1;
    if (x->ndim != 2) return c10_error_int("addmm: mat1 must be a matrix, got %d-D tensor", x->ndim);
    if (y->ndim != 2) return c10_error_int("addmm: mat2 must be a matrix, got %d-D tensor", y->ndim);
    if (check_mm("addmm", x, y, s) ||
        int_scalars("addmm", x->sizes[1], x->sizes[0] * y->sizes[1], y->dtype, a->s[0], a->s[1]))
        return -1;
    return (out[0] = mm_impl("addmm", x, y, s, a->s[1], a->s[0])) ? 1 : -1;
}

/* t[0] = self (broadcast to [b, n, p]), t[1] = batch1 [b, n, m], t[2] = batch2
 * [b, m, p]; s[0] = beta, s[1] = alpha. self is converted to the batches' dtype. */
int fwd_baddbmm(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *s = a->t[0], *x = a->t[1], *y = a->t[2];
    if (size_at("baddbmm", x, 0) || size_at("baddbmm", x, 1) || size_at("baddbmm", y, 2)) return -1;
    { /* torch expands self to [batch1.size(0), batch1.size(1), batch2.size(2)] before it checks the batches */
        int64_t z[3] = {x->sizes[0], x->sizes[1], y->sizes[2]};
        TensorImpl *e = c10_expand(s, z, 3);
        if (!e) return la_prefix_error("baddbmm");
        c10_release(e);
    }
    int64_t shape[3] = {x->sizes[0], x->sizes[1], y->sizes[2]};
    if (check_bmm("baddbmm", x, y) ||
        int_scalars("baddbmm", x->sizes[2], shape[0] * shape[1] * shape[2], y->dtype, a->s[0], a->s[1]))
        return -1;
    return (out[0] = product("baddbmm", y->dtype, x, y, shape, 3, s, a->s[1], a->s[0])) ? 1 : -1;
}

/* ----------------------------------------------------------- mv, dot, outer */

static int check_mv(const char *op, const TensorImpl *m, const TensorImpl *v) {
    if (m->ndim != 2 || v->ndim != 1)
        return c10_error_int("%s: vector + matrix @ vector expected, got 1, %d, %d", op, m->ndim, v->ndim);
    if (m->sizes[1] != v->sizes[0])
        return c10_error_int("%s: size mismatch, got %lld, %lldx%lld,%lld", op, (long long)m->sizes[0],
                             (long long)m->sizes[0], (long long)m->sizes[1], (long long)v->sizes[0]);
    return check_types(op, "addmv_impl_cpu", m, v);
}

/* A 1-d vector as a [K, 1] column or a [1, K] row view. */
static TensorImpl *as_col(const TensorImpl *v) {
    int64_t size[2] = {v->sizes[0], 1}, stride[2] = {v->strides[0], 1};
    return view_of(v, size, stride, 2);
}
static TensorImpl *as_row(const TensorImpl *v) {
    int64_t size[2] = {1, v->sizes[0]}, stride[2] = {0, v->strides[0]};
    return view_of(v, size, stride, 2);
}

static TensorImpl *mv_impl(const char *op, TensorImpl *m, TensorImpl *v) {
    TensorImpl *col = as_col(v);
    if (!col) return NULL;
    TensorImpl *r = product(op, v->dtype, m, col, m->sizes, 1, NULL, 1, 0);
    c10_release(col);
    return r;
}

/* t[0] = self [n, m], t[1] = vec [m] */
int fwd_mv(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (size_at("mv", a->t[0], 0) || check_mv("mv", a->t[0], a->t[1])) return -1; /* empty({self.size(0)}) first */
    return (out[0] = mv_impl("mv", a->t[0], a->t[1])) ? 1 : -1;
}

static int check_dot(const char *op, const TensorImpl *x, const TensorImpl *y) {
    if (x->ndim != 1 || y->ndim != 1)
        return c10_error_int("%s: 1D tensors expected, but got %dD and %dD tensors", op, x->ndim, y->ndim);
    if (x->dtype != y->dtype)
        return c10_error_int("%s: dot : expected both vectors to have same dtype, but found %s and %s", op,
                             c10_dtype_cname(x->dtype), c10_dtype_cname(y->dtype));
    if (x->sizes[0] != y->sizes[0])
        return c10_error_int("%s: inconsistent tensor size, expected tensor [%lld] and src [%lld] to have the same "
                             "number of elements, but got %lld and %lld elements respectively",
                             op, (long long)x->sizes[0], (long long)y->sizes[0], (long long)x->sizes[0],
                             (long long)y->sizes[0]);
    if (!at_same_device(op, x, y)) return -1;
    if (x->dtype == CT_BOOL) return not_implemented(op, "dot", x->dtype);
    return 0;
}

static TensorImpl *dot_impl(const char *op, TensorImpl *x, TensorImpl *y) {
    TensorImpl *row = as_row(x), *col = row ? as_col(y) : NULL;
    TensorImpl *r = col ? product(op, x->dtype, row, col, NULL, 0, NULL, 1, 0) : NULL;
    c10_release(row);
    c10_release(col);
    return r;
}

/* t[0] = self [n], t[1] = tensor [n] */
int fwd_dot(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    if (check_dot("dot", a->t[0], a->t[1])) return -1;
    return (out[0] = dot_impl("dot", a->t[0], a->t[1])) ? 1 : -1;
}

/* t[0] = self [n], t[1] = vec2 [m]: [n, m] in the promoted dtype */
int fwd_outer(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *x = a->t[0], *y = a->t[1];
    if (x->ndim != 1) return c10_error_int("outer: Expected 1-D argument self, but got %d-D", x->ndim);
    if (y->ndim != 1) return c10_error_int("outer: Expected 1-D argument vec2, but got %d-D", y->ndim);
    if (!at_same_device("outer", x, y)) return -1;
    PromoteState st = {0};
    promote_add_tensor(&st, x);
    promote_add_tensor(&st, y);
    ct_dtype d = promote_result(&st);
    if (d == CT_BOOL) { /* logical and of the truth values, as torch.outer does */
        d = CT_UINT8;
    }
    TensorImpl *xc = x->dtype == d ? c10_retain(x) : at_to_dtype(x, d);
    TensorImpl *yc = !xc ? NULL : y->dtype == d ? c10_retain(y) : at_to_dtype(y, d);
    TensorImpl *col = yc ? as_col(xc) : NULL, *row = col ? as_row(yc) : NULL;
    int64_t shape[2] = {x->sizes[0], y->sizes[0]};
    TensorImpl *r = row ? product("outer", d, col, row, shape, 2, NULL, 1, 0) : NULL;
    c10_release(xc);
    c10_release(yc);
    c10_release(col);
    c10_release(row);
    if (r && a->t[0]->dtype == CT_BOOL && a->t[1]->dtype == CT_BOOL) {
        TensorImpl *b = at_to_dtype(r, CT_BOOL);
        c10_release(r);
        r = b;
    }
    return (out[0] = r) ? 1 : -1;
}

/* ------------------------------------------------------------------ matmul */

/* Folds t [..., M, K] into [prod(...) * M, K]: a view when the strides allow,
 * else a contiguous copy. */
static TensorImpl *fold(TensorImpl *t) {
    int64_t shape[2] = {1, t->sizes[t->ndim - 1]};
    for (int d = 0; d < t->ndim - 1; d++) shape[0] *= t->sizes[d];
    int64_t st[2];
    if (c10_view_strides(t, shape, 2, st)) return c10_as_strided(t, shape, st, 2, t->offset);
    TensorImpl *c = at_contiguous(t);
    if (!c) return NULL;
    TensorImpl *v = c10_view(c, shape, 2);
    c10_release(c);
    return v;
}

/* torch 1.13's should_fold exception: a 3-d t against a 2-d operand whose last two
 * dims are transposed (permute(0, 2, 1)) goes through bmm, not a folding copy. */
bool at_matmul_folds(const TensorImpl *t, int other_ndim) {
    return !(t->ndim == 3 && other_ndim == 2 && t->strides[2] != 1 &&
             t->strides[0] == t->sizes[1] * t->sizes[2]);
}

/* matmul with PyTorch's rules. init/alpha/beta: linear's bias (init may be NULL). */
TensorImpl *la_matmul(const char *op, TensorImpl *a, TensorImpl *b, TensorImpl *init, double alpha, double beta) {
    int da = a->ndim, db = b->ndim;
    if (da == 0 || db == 0)
        return c10_error("%s: both arguments to matmul need to be at least 1D, but they are %dD and %dD", op, da,
                         db);
    if (da == 1 && db == 1) {
        if (check_dot(op, a, b)) return NULL;
        TensorImpl *row = as_row(a), *col = row ? as_col(b) : NULL;
        TensorImpl *r = col ? product(op, a->dtype, row, col, NULL, 0, init, alpha, beta) : NULL;
        c10_release(row);
        c10_release(col);
        return r;
    }
    if (da == 2 && db == 1) {
        if (check_mv(op, a, b)) return NULL;
        TensorImpl *col = as_col(b);
        TensorImpl *r = col ? product(op, b->dtype, a, col, a->sizes, 1, init, alpha, beta) : NULL;
        c10_release(col);
        return r;
    }
    if (da == 1 && db == 2) {
        if (a->sizes[0] != b->sizes[0])
            return c10_error("%s: mat1 and mat2 shapes cannot be multiplied (1x%lld and %lldx%lld)", op,
                             (long long)a->sizes[0], (long long)b->sizes[0], (long long)b->sizes[1]);
        if (check_types(op, "addmm_impl_cpu_", a, b)) return NULL;
        TensorImpl *row = as_row(a);
        TensorImpl *r = row ? product(op, a->dtype, row, b, b->sizes + 1, 1, init, alpha, beta) : NULL;
        c10_release(row);
        return r;
    }
    if (da == 2 && db == 2) {
        if (check_mm(op, a, b, NULL)) return NULL;
        return mm_impl(op, a, b, init, alpha, beta);
    }
    int64_t shape[CT_MAX_DIMS];
    if (da >= 3 && db <= 2 && at_matmul_folds(a, db)) {
        /* fold a's batch into its rows: one gemm */
        int64_t rows = 1, K = a->sizes[da - 1];
        for (int d = 0; d < da - 1; d++) rows *= a->sizes[d];
        if (db == 1 && K != b->sizes[0])
            return c10_error("%s: size mismatch, got %lld, %lldx%lld,%lld", op, (long long)rows, (long long)rows,
                             (long long)K, (long long)b->sizes[0]);
        if (db == 2 && K != b->sizes[0])
            return c10_error("%s: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)", op,
                             (long long)rows, (long long)K, (long long)b->sizes[0], (long long)b->sizes[1]);
        if (check_types(op, db == 1 ? "addmv_impl_cpu" : "addmm_impl_cpu_", a, b)) return NULL;
        int nd = 0;
        for (int d = 0; d < da - 1; d++) shape[nd++] = a->sizes[d];
        if (db == 2) shape[nd++] = b->sizes[1];
        TensorImpl *fa = fold(a), *fb = fa ? (db == 1 ? as_col(b) : c10_retain(b)) : NULL;
        TensorImpl *r = fb ? product(op, db == 1 ? b->dtype : a->dtype, fa, fb, shape, nd, init, alpha, beta) : NULL;
        c10_release(fa);
        c10_release(fb);
        return r;
    }
    if (da <= 2 && db >= 3 && at_matmul_folds(b, da)) {
        /* PyTorch computes (b^T folded) @ a^T: its messages speak of that product */
        int64_t rows = 1, Kb = b->sizes[db - 2], Ka = a->sizes[da - 1];
        for (int d = 0; d < db - 2; d++) rows *= b->sizes[d];
        rows *= b->sizes[db - 1];
        if (Ka != Kb) {
            if (da == 1)
                return c10_error("%s: size mismatch, got %lld, %lldx%lld,%lld", op, (long long)rows, (long long)rows,
                                 (long long)Kb, (long long)Ka);
            return c10_error("%s: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)", op,
                             (long long)rows, (long long)Kb, (long long)Ka, (long long)a->sizes[0]);
        }
        if (check_types(op, da == 1 ? "addmv_impl_cpu" : "addmm_impl_cpu_", b, a)) return NULL;
    }
    /* general batched case: broadcast the batch dims */
    int64_t ba[CT_MAX_DIMS], bb[CT_MAX_DIMS], bs[CT_MAX_DIMS];
    int nba = da >= 2 ? da - 2 : 0, nbb = db >= 2 ? db - 2 : 0;
    memcpy(ba, a->sizes, sizeof(int64_t) * (size_t)nba);
    memcpy(bb, b->sizes, sizeof(int64_t) * (size_t)nbb);
    int nbs = c10_broadcast_shape(ba, nba, bb, nbb, bs);
    if (nbs < 0) {
        la_prefix_error(op);
        return NULL;
    }
    int64_t M = da >= 2 ? a->sizes[da - 2] : 1, K = a->sizes[da - 1];
    int64_t Kb = db >= 2 ? b->sizes[db - 2] : b->sizes[0], N = db >= 2 ? b->sizes[db - 1] : 1;
    int64_t nbatch = 1;
    for (int d = 0; d < nbs; d++) nbatch *= bs[d];
    if (da >= 2 && db >= 2) { /* bmm: both batched, or a 3-d operand that does not fold */
        if (K != Kb)
            return c10_error("%s: Expected size for first two dimensions of batch2 tensor to be: [%lld, %lld] but "
                             "got: [%lld, %lld].",
                             op, (long long)nbatch, (long long)K, (long long)nbatch, (long long)Kb);
        if (check_types(op, "bmm", a, b)) return NULL;
    }
    /* canonical views [bs..., M, K] and [bs..., K, N], zero strides where broadcast */
    int64_t sa[CT_MAX_DIMS], ta[CT_MAX_DIMS], sb[CT_MAX_DIMS], tb[CT_MAX_DIMS];
    int nd = nbs + 2;
    for (int d = 0; d < nbs; d++) {
        int ia = d - (nbs - nba), ib = d - (nbs - nbb);
        sa[d] = sb[d] = bs[d];
        ta[d] = (ia >= 0 && a->sizes[ia] != 1) ? a->strides[ia] : 0;
        tb[d] = (ib >= 0 && b->sizes[ib] != 1) ? b->strides[ib] : 0;
    }
    sa[nbs] = M, sa[nbs + 1] = K;
    ta[nbs] = da >= 2 ? a->strides[da - 2] : 0, ta[nbs + 1] = a->strides[da - 1];
    sb[nbs] = Kb, sb[nbs + 1] = N;
    tb[nbs] = db >= 2 ? b->strides[db - 2] : b->strides[0], tb[nbs + 1] = db >= 2 ? b->strides[db - 1] : 0;
    int on = 0;
    for (int d = 0; d < nbs; d++) shape[on++] = bs[d];
    if (da >= 2) shape[on++] = M;
    if (db >= 2) shape[on++] = N;
    TensorImpl *A = view_of(a, sa, ta, nd), *B = A ? view_of(b, sb, tb, nd) : NULL;
    /* torch: (b^T folded) @ a^T or mv(b^T folded, a) when a has 1 or 2 dims, else bmm */
    TensorImpl *r = B ? product(op, da == 1 ? a->dtype : b->dtype, A, B, shape, on, init, alpha, beta) : NULL;
    c10_release(A);
    c10_release(B);
    return r;
}

/* t[0] = self, t[1] = other: torch.matmul's 1-d/2-d/batched broadcasting rules */
int fwd_matmul(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    return (out[0] = la_matmul("matmul", a->t[0], a->t[1], NULL, 1, 0)) ? 1 : -1;
}

/* t[0] = input [..., in], t[1] = weight [out, in] (or [in]), t[2] = bias or NULL:
 * input @ weight^T + bias, the bias folded into the gemm (beta = 1). */
int at_linear_path(const TensorImpl *x, const TensorImpl *bias) {
    if (!bias) return LINEAR_MATMUL;
    return x->ndim == 2 ? LINEAR_ADDMM : x->ndim == 3 && x->is_contiguous ? LINEAR_FOLDED_ADDMM : LINEAR_MATMUL_ADD;
}

int fwd_linear(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    TensorImpl *x = a->t[0], *w = a->t[1], *bias = a->nt > 2 ? a->t[2] : NULL, *r = NULL;
    if (w->ndim > 2) return c10_error_int("linear: t() expects a tensor with <= 2 dimensions, but self is %dD", w->ndim);
    TensorImpl *wt = w->ndim == 2 ? c10_transpose(w, 0, 1) : c10_retain(w);
    if (!wt) return -1;
    int path = at_linear_path(x, bias);
    bool fold = path == LINEAR_FOLDED_ADDMM;
    if (path == LINEAR_ADDMM || fold) { /* torch: addmm(bias, input, weight.t()), a contiguous 3-d input folded */
        int64_t s2[2] = {x->ndim == 3 ? x->sizes[0] * x->sizes[1] : 0, x->sizes[x->ndim - 1]};
        TensorImpl *x2 = NULL;
        if (addmm_dtypes("linear", bias, x, w) == 0) {
            if (w->ndim != 2) c10_error_int("linear: mat2 must be a matrix, got %d-D tensor", w->ndim);
            else if ((x2 = fold ? c10_view(x, s2, 2) : c10_retain(x)) && check_mm("linear", x2, wt, bias) == 0)
                r = mm_impl("linear", x2, wt, bias, 1, 1);
        }
        c10_release(x2);
        if (r && fold) {
            int64_t s3[3] = {x->sizes[0], x->sizes[1], r->sizes[1]};
            TensorImpl *v = c10_view(r, s3, 3);
            c10_release(r);
            r = v;
        }
    } else if ((r = la_matmul("linear", x, wt, NULL, 1, 1)) && bias) { /* torch: matmul, then add_(bias) */
        OpArgs ad = {.t = {r, bias}, .nt = 2, .s = {1}, .dst = r};
        TensorImpl *o[OP_MAX_OUTS];
        int n = at_call(OP_add, &ad, o);
        for (int k = 0; k < n; k++) c10_release(o[k]);
        if (n < 0) {
            c10_release(r);
            r = NULL;
        }
    }
    c10_release(wt);
    return (out[0] = r) ? 1 : -1;
}
