/* reduce_kernels.h: the kernels of the reduction engine (reduce.c). A kernel
 * folds n contiguous elements of its compute type (float, double or int64)
 * (sums: of any dtype, also a ::2 slice) into a running state; base is the reduced index of the first one (for the
 * index-returning reductions). Private to reduce.c / reduce_kernels.c. */
#ifndef CT_REDUCE_KERNELS_H
#define CT_REDUCE_KERNELS_H
#include "core/core.h"
#include <string.h>

enum { CT_F32, CT_F64, CT_I64 }; /* compute types */


/* a loop over nt threads (nt in scope), one when nt is 1 */
#define OMP_FOR_NT OMP(omp parallel for num_threads(nt) schedule(static) if (nt > 1))

/* reductions: SUM PROD MAX MIN (value + first index; NaN wins) ALL ANY,
 * NORM (p: 2, 1, inf, -inf, 0, other: sum |x|^p), SQDEV (sum (x - sh)^2 in d, sum (x - sh) in d1),
 * SUMEXP (sum exp(x - sh)) */
enum { RK_SUM, RK_PROD, RK_MAX, RK_MIN, RK_ALL, RK_ANY, RK_NORM, RK_SQDEV, RK_SUMEXP, RK_AMAX, RK_AMIN, RK_COUNT };
/* RK_AMAX / RK_AMIN: the value only (NaN wins), vectorised */

typedef struct RState {
    double d;       /* float accumulator / value */
    double sh;      /* SQDEV, SUMEXP: the shift */
    double d1;      /* SQDEV: sum (x - sh), for the correction term of the variance */
    int64_t v;      /* integer accumulator / value */
    int64_t idx;    /* MAX/MIN: index of the value */
    bool has, nan;  /* MAX/MIN: a value seen; a NaN seen */
} RState;

/* exp by compute type, for the kernels stamped per type (reduce_kernels.c,
 * softmax.c; both include vmath.h): the branch-free versions, which vectorise */
#define EXP_float vm_expf
#define EXP_double vm_exp_d

typedef void (*rk_fn)(RState *s, const void *x, int64_t n, int64_t base, double p);

CT_INTERNAL extern const rk_fn rk_kernels[RK_COUNT][3];
/* a bfloat16 as float (the compiler vectorises this) */
static inline float rk_bf16(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
/* RK_SUM over elements of dtype dt itself (any real dtype, bool), stride
 * (1 or 2) elements apart; NULL for the others */
CT_INTERNAL rk_fn rk_sum_kernel(ct_dtype dt, int64_t stride);
/* RK_AMAX / RK_AMIN over contiguous int32 in place; NULL for the others */
CT_INTERNAL rk_fn rk_minmax_i32(int rk);
/* part[j] += element j of each of nr rows of dtype dt, stride (1 or 2)
 * elements apart; part is float (float32 and 16-bit inputs), double (float64,
 * and float32 when dbl: var's means) or uint64_t (int32, int64). NULL for
 * other dtypes and strides. *group: the
 * rows best added at a time (4 or 8); with that many rows, next (or NULL)
 * holds as many rows to prefetch meanwhile. */
typedef void (*rk_rows_fn)(void *part, const void *const *rows, int nr, int64_t bl, const void *const *next);
CT_INTERNAL rk_rows_fn rk_sum_rows(ct_dtype dt, int64_t stride, int *group, bool dbl);
/* Short rows, several at a time: out[r] = the reduction of the n contiguous
 * elements at rows[r], for r < *nrows (16 or 8: every pointer set; the caller
 * repeats the last row to fill a block). out is double (float dtypes) or
 * int64 (integer dtypes), as RState's d / v. Each row is reduced in an order
 * fixed by its length alone: results do not depend on the block. rk: RK_SUM,
 * RK_NORM (p 1 or 2), RK_AMAX, RK_AMIN over float32, float64, float16,
 * bfloat16, int64, int32, RK_PROD over float32 (8 rows, in double) and int32
 * (rows of up to 64 elements only); NULL for the others and without AVX-512. *mode:
 * the kernel's last argument (sum: x, |x| or x * x; max: max or min). */
typedef void (*rk_block_fn)(void *out, const void *const *rows, int64_t n, int mode);
CT_INTERNAL rk_block_fn rk_block_kernel(int rk, ct_dtype dt, double p, int *nrows, int *mode);
/* a[j] = max (max) or min of a[j] and x[r][j], r < nr, j < n; a NaN sticks
 * (amax / amin across rows); float16 / bfloat16 rows into float a */
typedef void (*rk_cols_fn)(void *a, const void *const *x, int nr, int64_t n, bool max);
CT_INTERNAL void rk_cols_minmax_f(void *a, const void *const *x, int nr, int64_t n, bool max);
CT_INTERNAL void rk_cols_minmax_i32(void *a, const void *const *x, int nr, int64_t n, bool max);
CT_INTERNAL void rk_cols_minmax_d(void *a, const void *const *x, int nr, int64_t n, bool max);
CT_INTERNAL void rk_cols_minmax_i64(void *a, const void *const *x, int nr, int64_t n, bool max);
CT_INTERNAL void rk_cols_minmax_f16(void *a, const void *const *x, int nr, int64_t n, bool max);
CT_INTERNAL void rk_cols_minmax_bf16(void *a, const void *const *x, int nr, int64_t n, bool max);
/* max_dim / argmax across rows: a[j] and its row ix[j] against row r + q of
 * x[q], q < nr (the first maximum, minimum or NaN), in the lanes above */
typedef void (*rk_argcols_fn)(void *a, int32_t *ix, const void *const *x, int nr, int64_t n, int32_t r, bool max);
CT_INTERNAL void rk_cols_argbest_f(void *a, int32_t *ix, const void *const *x, int nr, int64_t n, int32_t r, bool max);
CT_INTERNAL void rk_cols_argbest_f16(void *a, int32_t *ix, const void *const *x, int nr, int64_t n, int32_t r, bool max);
CT_INTERNAL void rk_cols_argbest_bf16(void *a, int32_t *ix, const void *const *x, int nr, int64_t n, int32_t r, bool max);
CT_INTERNAL void rk_cols_argbest_d(void *a, int32_t *ix, const void *const *x, int nr, int64_t n, int32_t r, bool max);
CT_INTERNAL void rk_cols_argbest_i32(void *a, int32_t *ix, const void *const *x, int nr, int64_t n, int32_t r, bool max);
CT_INTERNAL void rk_cols_argbest_i64(void *a, int32_t *ix, const void *const *x, int nr, int64_t n, int32_t r, bool max);
/* a[j] += e^(x[j] - sh[j]) (sh not NULL; in float when f32, as the rows'
 * sumexp), else |x[j]|^p for float32 or 16-bit
 * values x (e^(p log|x|) in double), j < n, a multiple of 8; x is scratch,
 * overwritten: the columns of logsumexp and norm across rows, vectorised */
CT_INTERNAL void rk_cols_pow_exp(double *a, double *x, const double *sh, double p, int64_t n, bool f32);
/* a = a then b (b covers later positions) */
CT_INTERNAL void rk_combine(int rk, int ct, double p, RState *a, const RState *b);

/* softmax / log_softmax of contiguous x viewed [outer, D, inner] along D into
 * the contiguous y, inner > 1 (the softmax dim is not the last); dtype dt:
 * float32, float64, float16, bfloat16 (the last two computed in float and
 * rounded once). false: out of memory. */
CT_INTERNAL bool softmax_cols(ct_dtype dt, const void *x, void *y, int64_t outer, int64_t D, int64_t inner, bool logm,
                              int nt);
/* The rows of a strided tensor: row o (row-major over the dims other than the
 * softmax dim, coalesced into nd dims) starts at rk_row_offset(g, o) elements. */
typedef struct RowGeom {
    int nd;
    int64_t size[CT_MAX_DIMS], stride[CT_MAX_DIMS];
} RowGeom;
static inline int64_t rk_row_offset(const RowGeom *g, int64_t o) {
    int64_t off = 0;
    for (int k = g->nd - 1; k >= 0 && o; k--) {
        off += o % g->size[k] * g->stride[k];
        o /= g->size[k];
    }
    return off;
}
/* softmax / log_softmax along the last dim into the contiguous y (outer rows
 * of D) of x (dtype dt: float32, float64, float16, bfloat16) whose rows g
 * describes, their elements es apart: read in place when es is 1, else
 * gathered row by row (no full copy); 16-bit rows are computed in float32 and
 * rounded once (bfloat16 log_softmax also rounds the row's sum and its log to
 * bfloat16 first, as torch 1.13 does). false: out of memory. */
CT_INTERNAL bool softmax_lastdim(ct_dtype dt, const void *x, const RowGeom *g, int64_t es, void *y,
                                 int64_t outer, int64_t D, bool logm, int nt);
/* as softmax_lastdim, for rows far apart (es elements, a transpose's) of
 * which a dim of g has stride 1: run in blocks of adjacent rows, without a
 * copy. 1: done; 0: not taken (no such dim or under a block of rows along
 * it, rows over 8192, no AVX-512); -1: out of memory. */
CT_INTERNAL int softmax_lastdim_blocks(ct_dtype dt, const void *x, const RowGeom *g, int64_t es, void *y,
                                       int64_t D, bool logm, int nt);
/* n float16 / bfloat16 (bf) values to float and back (round to nearest even), vectorised */
/* softmax's (lg: log_softmax's) gradient over R contiguous rows of D, nt threads */
CT_INTERNAL void rk_softmax_grad_f(const float *g, const float *y, float *o, int64_t R, int64_t D, bool lg, int nt);
CT_INTERNAL void rk_softmax_grad_d(const double *g, const double *y, double *o, int64_t R, int64_t D, bool lg, int nt);
#endif
