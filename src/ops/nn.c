/* nn.c: the forwards of the neural-network function rows of ops.def (the
 * nnfunc section): losses, normalisations. Each is a fused kernel computing in
 * float (float16/bfloat16 inputs) or double, threaded over rows or channels;
 * reductions add fixed blocks of rows in a fixed order, so results do not
 * depend on the number of threads. The fused backward kernels used by
 * src/autograd/d_nn.c (first-order backward) live here too, as nn_* functions.
 *
 * Reduction codes (i[0] of the loss rows) are ct_reduction's: 0 none, 1 mean,
 * 2 sum. */
#include "ops/nn.h"
#include "ops/kernels/vmath.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* `omp simd` asks for vectorised reductions (allowed to reassociate); clang
 * warns where it cannot honour the request (exp without a vector library). */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

#define GRAIN 32768 /* elements of work below which one thread runs */
#define BLOCK 256   /* rows per block of a deterministic sum */

#define ONE(expr) return (out[0] = (expr)) ? 1 : -1

/* ------------------------------------------------------------ small helpers */

/* t as a contiguous tensor of dtype d (a new reference; t itself if it already is). */
TensorImpl *nn_contig(const TensorImpl *t, ct_dtype d) {
    if (t->dtype == d && t->is_contiguous) return c10_retain((TensorImpl *)t);
    TensorImpl *o = c10_empty(t->sizes, t->ndim, d, t->device);
    if (o && t->device != CT_META && at_copy_(o, t) < 0) {
        c10_release(o);
        return NULL;
    }
    return o;
}

/* t converted to dtype d in place of the reference: releases t. */
static TensorImpl *convert_owned(TensorImpl *t, ct_dtype d) {
    if (!t || t->dtype == d) return t;
    TensorImpl *r = at_to_dtype(t, d);
    c10_release(t);
    return r;
}

/* sum of v[0..n) in double, by fixed blocks of rows added in order
 * (deterministic for any thread count) */
#define DEF_DET_SUM(T, S)                                                                                \
    static double det_sum_##S(const T *v, int64_t n) {                                                   \
        int64_t nb = (n + BLOCK - 1) / BLOCK;                                                             \
        double *part = nb > 1 ? malloc((size_t)nb * sizeof *part) : NULL;                               \
        if (!part) { /* one block, or no memory: serial */                                                \
            double s = 0;                                                                                  \
            for (int64_t i = 0; i < n; i++) s += (double)v[i];                                            \
            return s;                                                                                      \
        }                                                                                                  \
        OMP(omp parallel for schedule(static) if (n > GRAIN))                                       \
        for (int64_t b = 0; b < nb; b++) {                                                                 \
            int64_t lo = b * BLOCK, hi = lo + BLOCK < n ? lo + BLOCK : n;                                 \
            double s = 0;                                                                                  \
            OMP(omp simd reduction(+ : s)) for (int64_t i = lo; i < hi; i++) s += (double)v[i];     \
            part[b] = s;                                                                                   \
        }                                                                                                  \
        double s = 0;                                                                                      \
        for (int64_t b = 0; b < nb; b++) s += part[b];                                                     \
        free(part);                                                                                        \
        return s;                                                                                          \
    }
DEF_DET_SUM(float, f32)
DEF_DET_SUM(double, f64)
#define det_sum det_sum_f64

const char *nn_reduction_name(int64_t r) {
    return r == CT_REDUCTION_NONE ? "none" : r == CT_REDUCTION_MEAN ? "mean" : r == CT_REDUCTION_SUM ? "sum" : NULL;
}

static bool check_reduction(const char *op, int64_t r) {
    if (nn_reduction_name(r)) return true;
    c10_error("%s: %lld is not a valid value for reduction", op, (long long)r);
    return false;
}

/* ======================================================= classification losses */

/* The geometry of nll_loss's arguments; fills g or fails with PyTorch's
 * messages. */
int nn_class_geom(const char *op, const TensorImpl *x, const TensorImpl *target, const TensorImpl *weight,
                  ClassGeom *g) {
    memset(g, 0, sizeof *g);
    if (x->ndim < 1) return c10_error_int("%s: Expected 1 or more dimensions (got %d)", op, x->ndim);
    if (!at_same_device(op, x, target) || (weight && !at_same_device(op, x, weight))) return -1;
    g->cls_dim = x->ndim == 1 ? 0 : 1;
    g->C = x->sizes[g->cls_dim];
    g->N = x->ndim == 1 ? 1 : x->sizes[0];
    g->inner = 1;
    for (int d = 2; d < x->ndim; d++) g->inner *= x->sizes[d];
    g->R = g->N * g->inner;
    if (x->ndim != 1 && target->ndim == 0) /* torch reads a 0-dim target's batch as 0 */
        return x->sizes[0] ? c10_error_int("%s: Expected input batch_size (%lld) to match target batch_size (0).",
                                           op, (long long)x->sizes[0])
                           : c10_error_int("%s: Dimension specified as 0 but tensor has no dimensions", op);
    if (x->ndim != 1 && target->ndim > 0 && x->sizes[0] != target->sizes[0])
        return c10_error_int("%s: Expected input batch_size (%lld) to match target batch_size (%lld).", op,
                             (long long)x->sizes[0], (long long)target->sizes[0]);
    if (x->ndim <= 2) {
        if (target->ndim > 1)
            return c10_error_int("%s: 0D or 1D target tensor expected, multi-target not supported", op);
        bool no_batch = x->ndim == 1 && target->ndim == 0;
        if (!no_batch && (target->ndim == 0 || x->sizes[0] != target->sizes[0]))
            return c10_error_int("%s: size mismatch (got input: %s, target: %s)", op,
                                 c10_shape_str(x->sizes, x->ndim), c10_shape_str(target->sizes, target->ndim));
    } else if (x->ndim == 4) {
        if (target->ndim != 3)
            return c10_error_int("%s: only batches of spatial targets supported (3D tensors) but got targets of "
                                 "dimension: %d", op, target->ndim);
        if (x->sizes[0] != target->sizes[0] || x->sizes[2] != target->sizes[1] || x->sizes[3] != target->sizes[2])
            return c10_error_int("%s: size mismatch (got input: %s, target: %s)", op,
                                 c10_shape_str(x->sizes, x->ndim), c10_shape_str(target->sizes, target->ndim));
    } else {
        bool ok = target->ndim == x->ndim - 1;
        for (int d = 1; ok && d < target->ndim; d++) ok = target->sizes[d] == x->sizes[d + 1];
        if (!ok) {
            int64_t want[CT_MAX_DIMS];
            want[0] = x->sizes[0];
            for (int d = 2; d < x->ndim; d++) want[d - 1] = x->sizes[d];
            return c10_error_int("%s: Expected target size %s, got %s", op, c10_shape_str(want, x->ndim - 1),
                                 c10_shape_str(target->sizes, target->ndim));
        }
    }
    bool path2d = x->ndim > 2; /* nll_loss2d: it counts the weight's elements only */
    if (weight && (path2d ? weight->numel != g->C : weight->ndim != 1 || weight->numel != g->C)) {
        if (path2d) /* nll_loss2d's words */
            return c10_error_int("%s: weight tensor should be defined either for all or no classes", op);
        return c10_error_int("%s: weight tensor should be defined either for all %lld classes or no classes but got "
                             "weight tensor of shape: %s", op, (long long)g->C,
                             c10_shape_str(weight->sizes, weight->ndim));
    }
    if (!c10_is_float(x->dtype) && x->device != CT_META) /* torch's kernels' names (its meta takes integers) */
        return c10_error_int("%s: \"%s\" not implemented for '%s'", op,
                             x->ndim <= 2 ? "nll_loss_out_frame" : "nll_loss2d_forward_out_frame",
                             c10_dtype_cname(x->dtype));
    /* nll_loss (not nll_loss2d) takes uint8 class indices too, as torch's */
    if (target->dtype != CT_INT64 && !(target->dtype == CT_UINT8 && x->ndim <= 2))
        return c10_error_int("%s: expected scalar type Long but found %s", op, c10_dtype_cname(target->dtype));
    if (weight && weight->dtype != x->dtype) /* torch casts nothing */
        return c10_error_int("%s: expected scalar type %s but found %s", op, c10_dtype_cname(x->dtype),
                             c10_dtype_cname(weight->dtype));
    /* the unreduced loss's shape: x without its class dim */
    g->lndim = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != g->cls_dim) g->lshape[g->lndim++] = x->sizes[d];
    return 0;
}

/* Checks class-index targets (contiguous int64, R of them). */
int nn_check_targets(const int64_t *t, int64_t R, int64_t C, int64_t ignore) {
    for (int64_t r = 0; r < R; r++)
        if (t[r] != ignore && (t[r] < 0 || t[r] >= C))
            return c10_error_int("Target %lld is out of bounds.", (long long)t[r]);
    return 0;
}

/* Sum of the weights of the non-ignored targets (the mean's divisor). */
double nn_class_divisor(const ClassGeom *g, const int64_t *t, const TensorImpl *w, int64_t ignore) {
    double D = 0;
    TensorImpl *wc = w ? nn_contig(w, CT_FLOAT64) : NULL;
    const double *wp = wc ? (const double *)c10_data(wc) : NULL;
    for (int64_t r = 0; r < g->R; r++)
        if (t[r] != ignore) D += wp ? wp[t[r]] : 1.0;
    c10_release(wc);
    return D;
}

/* Loads nll_loss's operands: x and weight contiguous opmath, target int64. */
typedef struct {
    TensorImpl *x, *tgt, *w; /* new references (tgt/w may be NULL) */
} ClassOperands;

static void operands_release(ClassOperands *o) {
    c10_release(o->x);
    c10_release(o->tgt);
    c10_release(o->w);
}

static int load_operands(const ClassGeom *g, const TensorImpl *x, const TensorImpl *target, const TensorImpl *w,
                         ct_dtype cd, int64_t ignore, ClassOperands *o) {
    memset(o, 0, sizeof *o);
    o->x = nn_contig(x, cd);
    o->tgt = nn_contig(target, CT_INT64);
    o->w = w ? nn_contig(w, cd) : NULL;
    if (!o->x || !o->tgt || (w && !o->w)) {
        operands_release(o);
        return -1;
    }
    if (nn_check_targets((const int64_t *)c10_data(o->tgt), g->R, g->C, ignore) < 0) {
        operands_release(o);
        return -1;
    }
    return 0;
}

/* Writes the reduced or unreduced loss (from per-row doubles) into a new tensor. */
static TensorImpl *finish_loss(const double *loss, const ClassGeom *g, int64_t reduction, double D, ct_dtype dt,
                               ct_device dev) {
    if (reduction == CT_REDUCTION_NONE) {
        TensorImpl *o = c10_empty(g->lshape, g->lndim, dt, dev);
        if (o && dev != CT_META && g->R) c10_convert(c10_data(o), dt, loss, CT_FLOAT64, g->R);
        return o;
    }
    double s = dev == CT_META ? 0 : det_sum(loss, g->R);
    if (reduction == CT_REDUCTION_MEAN) s /= D;
    return c10_scalar_tensor(s, dt, dev);
}

/* ----------------------------------------------------------------- nll_loss */

/* t[0] input (log-probabilities) [C] / [N, C] / [N, C, d...]; t[1] target int64
 * class indices; t[2] weight [C] or NULL. i: reduction, ignore_index. */
int fwd_nll_loss(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *x = a->t[0], *target = a->t[1], *w = a->t[2];
    int64_t reduction = a->i[0], ignore = a->i[1];
    if (!check_reduction("nll_loss", reduction)) return -1;
    ClassGeom g;
    if (nn_class_geom("nll_loss", x, target, w, &g) < 0) return -1;
    if (x->device == CT_META) ONE(finish_loss(NULL, &g, reduction, 1, x->dtype, CT_META));
    ct_dtype cd = c10_opmath(x->dtype);
    ClassOperands o;
    if (load_operands(&g, x, target, w, cd, ignore, &o) < 0) return -1;
    double *loss = malloc((size_t)(g.R ? g.R : 1) * sizeof *loss);
    if (!loss) {
        operands_release(&o);
        return c10_error_int("out of memory");
    }
    const int64_t *t = (const int64_t *)c10_data(o.tgt);
    int64_t C = g.C, inner = g.inner;
#define NLL_FWD(T)                                                                                        \
    {                                                                                                     \
        const T *restrict xp = (const T *)c10_data(o.x), *restrict wp = o.w ? (const T *)c10_data(o.w) : NULL; \
        for (int64_t r = 0; r < g.R; r++) {                                                               \
            int64_t y = t[r], n = r / inner, k = r % inner;                                               \
            loss[r] = y == ignore ? 0.0 : -(double)(wp ? wp[y] : (T)1) * (double)xp[(n * C + y) * inner + k]; \
        }                                                                                                 \
    }
    if (cd == CT_FLOAT32) NLL_FWD(float) else NLL_FWD(double)
#undef NLL_FWD
    double D = reduction == CT_REDUCTION_MEAN ? nn_class_divisor(&g, t, w, ignore) : 1;
    TensorImpl *res = finish_loss(loss, &g, reduction, D, x->dtype, x->device);
    free(loss);
    operands_release(&o);
    ONE(res);
}

/* nll_loss's gradient wrt its input: -w[y] * gb at the target's class, 0
 * elsewhere. unit: gb = 1 everywhere (the constant of the composite formula). */
TensorImpl *nn_nll_grad(const TensorImpl *x, const TensorImpl *target, const TensorImpl *w, const TensorImpl *gout,
                        int64_t reduction, int64_t ignore, bool unit) {
    ClassGeom g;
    if (nn_class_geom("nll_loss", x, target, w, &g) < 0) return NULL;
    ct_dtype cd = c10_opmath(x->dtype);
    TensorImpl *gx = c10_full(x->sizes, x->ndim, 0, cd, x->device);
    if (!gx || x->device == CT_META || g.R == 0) return convert_owned(gx, x->dtype);
    TensorImpl *tc = nn_contig(target, CT_INT64), *wc = w ? nn_contig(w, CT_FLOAT64) : NULL, *gc = NULL;
    if (!tc || (w && !wc)) goto fail;
    const int64_t *t = (const int64_t *)c10_data(tc);
    if (nn_check_targets(t, g.R, g.C, ignore) < 0) goto fail;
    double gs = 1;
    if (!unit) {
        if (reduction == CT_REDUCTION_NONE) {
            if (!(gc = nn_contig(gout, CT_FLOAT64))) goto fail;
        } else {
            gs = c10_get(gout, 0);
            if (reduction == CT_REDUCTION_MEAN) gs /= nn_class_divisor(&g, t, w, ignore);
        }
    }
    {
        const double *wp = wc ? (const double *)c10_data(wc) : NULL, *gp = gc ? (const double *)c10_data(gc) : NULL;
        int64_t C = g.C, inner = g.inner;
        char *base = c10_data(gx);
        for (int64_t r = 0; r < g.R; r++) {
            int64_t y = t[r];
            if (y == ignore) continue;
            int64_t n = r / inner, k = r % inner;
            double v = -(wp ? wp[y] : 1.0) * (gp ? gp[r] : gs);
            int64_t idx = (n * C + y) * inner + k;
            if (cd == CT_FLOAT32) ((float *)base)[idx] = (float)v;
            else ((double *)base)[idx] = v;
        }
    }
    c10_release(tc);
    c10_release(wc);
    c10_release(gc);
    return convert_owned(gx, x->dtype);
fail:
    c10_release(gx);
    c10_release(tc);
    c10_release(wc);
    c10_release(gc);
    return NULL;
}

/* ============================================================ pointwise losses */

/* Elementwise kernels: p[0] out, p[1] x, p[2] y, then weight (s[1] != 0) and
 * pos_weight (s[2] != 0); s[0]: a scale (or beta for smooth_l1 with s[3] the scale).
 * The weight multiplies the stored loss in a second pass: one vectorised copy
 * of each formula (two came to 107 KB of the library), the weighted loss
 * rounded twice (within an ulp of the one rounding). */
#define LOSS_KERNEL(name, TT, S, ATTR, expr)                                                               \
    ATTR static void k_##name##_##S(int64_t n, char **p, const double *s) {                                   \
        typedef TT T;                                                                                     \
        T *restrict o = (T *)p[0];                                                                        \
        const T *restrict xp = (const T *)p[1], *restrict yp = (const T *)p[2];                           \
        const T *restrict wp = s[1] != 0 ? (const T *)p[3] : NULL;                                        \
        const T *restrict pp = s[2] != 0 ? (const T *)p[3 + (s[1] != 0)] : NULL;                          \
        const T sc = (T)s[0], beta = (T)s[3];                                                             \
        (void)pp, (void)beta, (void)sc;                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                                 \
            T x = xp[i], y = yp[i], pw = pp ? pp[i] : (T)1;                                               \
            (void)pw, (void)x, (void)y;                                                                   \
            o[i] = (expr);                                                                                \
        }                                                                                                 \
        for (int64_t i = 0; wp && i < n; i++) o[i] *= wp[i];                                              \
    }
/* float64: small, not vectorised (-Os), for gradcheck more than for speed */
#define LOSS_KERNELS(name, expr) LOSS_KERNEL(name, float, f32, , expr) LOSS_KERNEL(name, double, f64, COLD_CODE, expr)

static atomic_int bce_range_fault;
static inline void bce_fault(void) { atomic_store_explicit(&bce_range_fault, 1, memory_order_relaxed); }
#define BCE_CHECK(x) (((x) >= 0 && (x) <= 1) ? (void)0 : bce_fault())
#define CLAMP_LOG(v) ((v) > (T)-100 ? (v) : (T)-100)
#define SPLUS_NEG(x) (log1p(exp(-fabs(x))) + ((x) < 0 ? -(x) : (T)0)) /* log(1 + exp(-x)), stable */

/* forwards */
LOSS_KERNELS(mse, (x - y) * (x - y))
LOSS_KERNELS(sl1, (fabs(x - y) < beta ? (T)0.5 * (x - y) * (x - y) / beta : fabs(x - y) - (T)0.5 * beta))
LOSS_KERNELS(bce, (BCE_CHECK(x), -(y * CLAMP_LOG(log(x)) + (1 - y) * CLAMP_LOG(log(1 - x)))))
LOSS_KERNELS(bcel, ((1 - y) * x + (1 + (pw - 1) * y) * SPLUS_NEG(x)))
/* gradients wrt the input, times sc (which carries the output's gradient) */
LOSS_KERNELS(mse_gx, (T)2 * (x - y) * sc)
/* torch's order: -1 at or below -beta, 1 at or above beta, (x - y) / beta between
 * (so beta 0 gives -1 where x == y, and NaN stays NaN) */
LOSS_KERNELS(sl1_gx, (x - y <= -beta ? (T)-1 : x - y >= beta ? (T)1 : (x - y) / beta) * sc)
/* torch's EPSILON is a float: 1e-12f, in double too */
LOSS_KERNELS(bce_gx, (x - y) / ((1 - x) * x > (T)1e-12f ? (1 - x) * x : (T)1e-12f) * sc)
LOSS_KERNELS(bcel_gx, ((pw * y + 1 - y) / (1 + exp(-x)) - pw * y) * sc)
/* gradients wrt the target */
LOSS_KERNELS(bce_gy, (log(1 - x) - log(x)) * sc)
/* torch's: -x, or with pos_weight log_sigmoid(-x) - pw log_sigmoid(x) (x = -inf: inf) */
LOSS_KERNELS(bcel_gy, (pp ? pw * SPLUS_NEG(x) - SPLUS_NEG(-x) : -x) * sc)

typedef struct {
    int op;
    const char *name;
    ew_kernel fwd[2], gx[2], gy[2]; /* [0] float, [1] double */
} PwInfo;

#define K2(n) {k_##n##_f32, k_##n##_f64}
static const PwInfo pw_table[] = {
    {OP_mse_loss, "mse_loss", K2(mse), K2(mse_gx), K2(mse_gx)},
    {OP_smooth_l1_loss, "smooth_l1_loss", K2(sl1), K2(sl1_gx), K2(sl1_gx)},
    {OP_binary_cross_entropy, "binary_cross_entropy", K2(bce), K2(bce_gx), K2(bce_gy)},
    {OP_binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits", K2(bcel), K2(bcel_gx), K2(bcel_gy)},
};

static const PwInfo *pw_info(int op) {
    for (size_t k = 0; k < sizeof pw_table / sizeof *pw_table; k++)
        if (pw_table[k].op == op) return &pw_table[k];
    return NULL;
}

static const char *torch_size(const TensorImpl *t) {
    static _Thread_local char buf[4][300];
    static _Thread_local unsigned next;
    char *b = buf[next++ % 4];
    const char *s = c10_shape_str(t->sizes, t->ndim);
    snprintf(b, 300, "torch.Size(%s)", s);
    return b;
}

/* A weight (or pos_weight, which torch puts first) may broadcast to the
 * input's shape, not beyond it */
static int pw_weight_check(const char *name, const TensorImpl *x, const TensorImpl *w, bool first) {
    int64_t shape[CT_MAX_DIMS];
    if (!w) return 0;
    const TensorImpl *p = first ? w : x, *q = first ? x : w;
    int nd = c10_broadcast_shape(p->sizes, p->ndim, q->sizes, q->ndim, shape);
    if (nd < 0) return -1;
    if (nd != x->ndim || memcmp(shape, x->sizes, sizeof(int64_t) * (size_t)nd))
        return c10_error_int("%s: output with shape %s doesn't match the broadcast shape %s", name,
                             c10_shape_str(x->sizes, x->ndim), c10_shape_str(shape, nd));
    return 0;
}

/* Checks the pointwise losses' arguments; the compute dtype in *cd. */
int nn_pw_check(int op, const OpArgs *a, ct_dtype *cd) {
    const PwInfo *pi = pw_info(op);
    const char *name = pi->name;
    const TensorImpl *x = a->t[0], *y = a->t[1];
    if (!check_reduction(name, a->i[0])) return -1;
    for (int k = 1; k < a->nt; k++)
        if (a->t[k] && !at_same_device(name, x, a->t[k])) return -1;
    bool same = x->ndim == y->ndim && !memcmp(x->sizes, y->sizes, sizeof(int64_t) * (size_t)x->ndim);
    if (op == OP_binary_cross_entropy && !same)
        return c10_error_int("%s: Using a target size (%s) that is different to the input size (%s) is deprecated. "
                             "Please ensure they have the same size.", name, torch_size(y), torch_size(x));
    if (op == OP_binary_cross_entropy_with_logits && !same)
        return c10_error_int("%s: Target size (%s) must be the same as input size (%s)", name, torch_size(y),
                             torch_size(x));
    int64_t bs[CT_MAX_DIMS]; /* F.mse_loss and smooth_l1_loss broadcast first */
    if (op != OP_binary_cross_entropy && op != OP_binary_cross_entropy_with_logits &&
        c10_broadcast_shape(x->sizes, x->ndim, y->sizes, y->ndim, bs) < 0)
        return -1;
    if (op == OP_smooth_l1_loss && a->s[0] < 0)
        return c10_error_int("smooth_l1_loss does not support negative values for beta.");
    /* binary_cross_entropy's weight, binary_cross_entropy_with_logits's pos_weight
     * (its first op); the latter's weight after the dtypes (its last op) */
    bool logits = op == OP_binary_cross_entropy_with_logits;
    if (logits && x->dtype == CT_BOOL) /* its composite's first op: -input */
        return c10_error_int("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                             "to invert a mask, use the `~` or `logical_not()` operator instead.");
    if (a->nt > 2 && pw_weight_check(name, x, a->t[logits ? 3 : 2], logits) < 0) return -1;
    /* torch's dtypes: mse and smooth_l1 broadcast their operands first, so a
     * 0-dim one promotes as any tensor; binary_cross_entropy wants the target's
     * dtype to be the input's (the weight is cast), and the result of
     * binary_cross_entropy_with_logits has the target's dtype (its ops run in
     * place on 1 - target) */
    ct_dtype d;
    if (op == OP_binary_cross_entropy) {
        if (y->dtype != x->dtype)
            return c10_error_int("%s: Found dtype %s but expected %s", name, c10_dtype_cname(y->dtype),
                                 c10_dtype_cname(x->dtype));
        d = x->dtype;
    } else if (op == OP_binary_cross_entropy_with_logits) {
        /* torch's composite: -input, 1 - target, then float results written
         * into tensors of the input's (integer) or the target's dtype */
        if (y->dtype == CT_BOOL)
            return c10_error_int("Subtraction, the `-` operator, with two bool tensors is not supported. "
                                 "Use the `^` or `logical_xor()` operator instead.");
        if (!c10_is_float(x->dtype) || !c10_is_float(y->dtype))
            return c10_error_int("result type %s can't be cast to the desired output type %s",
                                 c10_dtype_cname(c10_is_float(x->dtype) ? x->dtype : CT_FLOAT32),
                                 c10_dtype_cname(c10_is_float(x->dtype) ? y->dtype : x->dtype));
        d = y->dtype;
    } else {
        d = c10_promote(x->dtype, y->dtype);
    }
    if (logits && pw_weight_check(name, x, a->t[2], false) < 0) return -1;
    if (!c10_is_float(d))
        return c10_error_int("\"%s\" not implemented for '%s'", op == OP_mse_loss ? "mse_cpu"
                             : op == OP_smooth_l1_loss ? "smooth_l1_cpu" : name, c10_dtype_cname(d));
    *cd = d;
    return 0;
}

/* Runs a loss kernel over the operands (broadcast), the result in dtype rd,
 * laid out as the engine's, or as empty_like(like) when like is given. */
static TensorImpl *pw_run(const char *name, const ew_kernel *k, TensorImpl *const *ops, int nops, bool hw, bool hp,
                          double scale, double beta, ct_dtype rd, const TensorImpl *like) {
    ct_dtype cd = c10_opmath(rd);
    ElementwiseSpec spec = {name, nops, cd, cd, rd, 0};
    double s[4] = {scale, hw, hp, beta};
    TensorImpl *given = like ? at_empty_like(like, rd) : NULL, *o = given;
    if (like && !given) return NULL;
    if (ew_run(&spec, ops, &o, k[cd == CT_FLOAT64], s) < 0) {
        c10_release(given);
        return NULL;
    }
    return o;
}

/* t[0] input, t[1] target, t[2] weight or NULL, t[3] pos_weight or NULL
 * (binary_cross_entropy_with_logits); i: reduction; s: beta (smooth_l1). */
int fwd_pw_loss(int op, const OpArgs *a, TensorImpl **out) {
    ct_dtype rd;
    if (nn_pw_check(op, a, &rd) < 0) return -1;
    const PwInfo *pi = pw_info(op);
    TensorImpl *ops[4] = {a->t[0], a->t[1]};
    int n = 2;
    bool hw = a->nt > 2 && a->t[2], hp = a->nt > 3 && a->t[3];
    if (hw) ops[n++] = a->t[2];
    if (hp) ops[n++] = a->t[3];
    double beta = a->s[0];
    const ew_kernel *k = pi->fwd;
    atomic_store_explicit(&bce_range_fault, 0, memory_order_relaxed);
    /* torch's bce_with_logits composite runs in place on 1 - target: unreduced, the target's layout */
    bool like_target = op == OP_binary_cross_entropy_with_logits && a->i[0] == CT_REDUCTION_NONE;
    TensorImpl *l = pw_run(pi->name, k, ops, n, hw, hp, 1, beta, rd, like_target ? a->t[1] : NULL);
    if (!l) return -1;
    if (atomic_load_explicit(&bce_range_fault, memory_order_relaxed)) {
        c10_release(l);
        return c10_error_int("%s: all elements of input should be between 0 and 1", pi->name);
    }
    int64_t reduction = a->i[0];
    if (reduction == CT_REDUCTION_NONE) ONE(l);
    double s = 0;
    if (l->device != CT_META && l->numel) {
        /* the elementwise output is dense (maybe in a permuted layout): sum its storage in place */
        if (l->dtype == CT_FLOAT32) {
            s = det_sum_f32((const float *)c10_data(l), l->numel);
        } else if (l->dtype == CT_FLOAT64) {
            s = det_sum_f64((const double *)c10_data(l), l->numel);
        } else {
            TensorImpl *ld = nn_contig(l, CT_FLOAT32);
            if (!ld) return c10_release(l), -1;
            s = det_sum_f32((const float *)c10_data(ld), ld->numel);
            c10_release(ld);
        }
    }
    if (reduction == CT_REDUCTION_MEAN) s /= (double)l->numel;
    ct_device dev = l->device;
    c10_release(l);
    ONE(c10_scalar_tensor(s, rd, dev));
}

/* The fused gradient of a pointwise loss wrt input (which 0) or target (1).
 * gout: the loss's gradient (0-dim for mean/sum). */
TensorImpl *nn_pw_grad(int op, const OpArgs *a, const TensorImpl *gout, int which) {
    ct_dtype rd;
    if (nn_pw_check(op, a, &rd) < 0) return NULL;
    const PwInfo *pi = pw_info(op);
    int64_t reduction = a->i[0];
    bool hw = a->nt > 2 && a->t[2], hp = a->nt > 3 && a->t[3];
    TensorImpl *wg = NULL;
    double scale = 1;
    if (reduction == CT_REDUCTION_NONE) { /* fold the gradient into the weight */
        if (hw) {
            OpArgs m = {.t = {a->t[2], (TensorImpl *)gout}, .nt = 2, .s = {1}};
            wg = at_call1(OP_mul, &m);
        } else {
            wg = c10_retain((TensorImpl *)gout);
        }
        if (!wg) return NULL;
        hw = true;
    } else {
        int64_t shape[CT_MAX_DIMS];
        int nd = c10_broadcast_shape(a->t[0]->sizes, a->t[0]->ndim, a->t[1]->sizes, a->t[1]->ndim, shape);
        int64_t numel = 1;
        for (int d = 0; d < nd; d++) numel *= shape[d];
        scale = gout->device == CT_META ? 1 : c10_get(gout, 0);
        if (reduction == CT_REDUCTION_MEAN) scale /= (double)numel;
        if (hw) wg = c10_retain(a->t[2]);
    }
    TensorImpl *ops[4] = {a->t[0], a->t[1]};
    int n = 2;
    if (hw) ops[n++] = wg;
    if (hp) ops[n++] = a->t[3];
    double beta = a->s[0];
    const ew_kernel *k = which == 0 ? pi->gx : pi->gy;
    if (op == OP_smooth_l1_loss && which == 1) { /* torch's: the input's formula, x and y swapped */
        ops[0] = a->t[1], ops[1] = a->t[0];
    } else if (which == 1 && op != OP_binary_cross_entropy && op != OP_binary_cross_entropy_with_logits) {
        scale = -scale;
    }
    TensorImpl *r = pw_run(pi->name, k, ops, n, hw, hp, scale, beta, rd, NULL);
    c10_release(wg);
    return r;
}

/* ============================================================== normalisation */

/* layer_norm rows: y = (x - mean) * rstd * w + b over the last M elements. */
#define DEF_LN_FWD(T, S)                                                                                  \
    static void ln_fwd_##S(const T *restrict x, int64_t R, int64_t M, const T *restrict w,              \
                           const T *restrict b, double eps, T *restrict y, T *restrict mean,             \
                           T *restrict rstd) {                                                            \
        OMP(omp parallel for schedule(static) if (R * M > GRAIN))                                   \
        for (int64_t r = 0; r < R; r++) {                                                                  \
            const T *restrict xr = x + r * M;                                                             \
            T *restrict yr = y ? y + r * M : NULL;                                                        \
            double s = 0;                                                                                  \
            OMP(omp simd reduction(+ : s)) for (int64_t i = 0; i < M; i++) s += (double)xr[i];      \
            T mu = (T)(s / (double)M);                                                                     \
            double v = 0;                                                                                  \
            OMP(omp simd reduction(+ : v)) for (int64_t i = 0; i < M; i++) {                        \
                T d = xr[i] - mu;                                                                          \
                v += (double)(d * d);                                                                      \
            }                                                                                              \
            T rs = (T)(1 / sqrt(v / (double)M + eps));                                                    \
            mean[r] = mu;                                                                                  \
            rstd[r] = rs;                                                                                  \
            if (!y) continue;                                                                              \
            if (w && b)                                                                                    \
                for (int64_t i = 0; i < M; i++) yr[i] = (xr[i] - mu) * rs * w[i] + b[i];                  \
            else if (w)                                                                                    \
                for (int64_t i = 0; i < M; i++) yr[i] = (xr[i] - mu) * rs * w[i];                         \
            else if (b)                                                                                    \
                for (int64_t i = 0; i < M; i++) yr[i] = (xr[i] - mu) * rs + b[i];                         \
            else                                                                                           \
                for (int64_t i = 0; i < M; i++) yr[i] = (xr[i] - mu) * rs;                                \
        }                                                                                                  \
    }
DEF_LN_FWD(float, f32)
COLD_BEGIN /* float64: for size */
DEF_LN_FWD(double, f64)
COLD_END

int nn_layer_norm_geom(const TensorImpl *x, const TensorImpl *w, const TensorImpl *b, const int64_t *ns, int nn,
                       int64_t *R, int64_t *M) {
    if (nn < 1)
        return c10_error_int("layer_norm: Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                             "least one element, but got normalized_shape = %s", c10_shape_str(ns, nn));
    const TensorImpl *wb[2] = {w, b};
    for (int k = 0; k < 2; k++)
        if (wb[k] && (wb[k]->ndim != nn || memcmp(wb[k]->sizes, ns, sizeof(int64_t) * (size_t)nn)))
            return c10_error_int("layer_norm: Expected %s to be of same shape as normalized_shape, but got %s of shape "
                                 "%s and normalized_shape = %s", k ? "bias" : "weight", k ? "bias" : "weight",
                                 c10_shape_str(wb[k]->sizes, wb[k]->ndim), c10_shape_str(ns, nn));
    if (x->ndim < nn || memcmp(x->sizes + x->ndim - nn, ns, sizeof(int64_t) * (size_t)nn)) {
        char want[256];
        int p = snprintf(want, sizeof want, "[*");
        for (int k = 0; k < nn && p < 230; k++) p += snprintf(want + p, sizeof want - (size_t)p, ", %lld", (long long)ns[k]);
        snprintf(want + p, sizeof want - (size_t)p, "]");
        return c10_error_int("layer_norm: Given normalized_shape=%s, expected input with shape %s, but got input of "
                             "size%s", c10_shape_str(ns, nn), want, c10_shape_str(x->sizes, x->ndim));
    }
    for (int k = 0; k < 2; k++)
        if (wb[k] && !at_same_device("layer_norm", x, wb[k])) return -1;
    if (!c10_is_float(x->dtype))
        return c10_error_int("\"LayerNormKernelImpl\" not implemented for '%s'", c10_dtype_cname(x->dtype));
    for (int k = 0; k < 2; k++)
        if (wb[k] && wb[k]->dtype != x->dtype)
            return c10_error_int("layer_norm: expected scalar type %s but found %s", c10_dtype_cname(x->dtype),
                                 c10_dtype_cname(wb[k]->dtype));
    *M = 1;
    for (int k = 0; k < nn; k++) *M *= ns[k];
    *R = 1;
    for (int k = 0; k < x->ndim - nn; k++) *R *= x->sizes[k];
    return 0;
}

/* t[0] input, t[1] weight or NULL, t[2] bias or NULL (normalized_shape);
 * i: normalized_shape (ni = its length); s: eps. out: y. */
int fwd_layer_norm(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    const TensorImpl *x = a->t[0], *w = a->t[1], *b = a->t[2];
    int64_t R, M;
    if (nn_layer_norm_geom(x, w, b, a->i, a->ni, &R, &M) < 0) return -1;
    ct_dtype cd = c10_opmath(x->dtype);
    TensorImpl *y = c10_empty(x->sizes, x->ndim, cd, x->device);
    TensorImpl *mean = c10_empty(&R, 1, cd, x->device), *rstd = c10_empty(&R, 1, cd, x->device);
    TensorImpl *xc = NULL, *wc = NULL, *bc = NULL;
    if (!y || !mean || !rstd) goto fail;
    if (x->device != CT_META && x->numel) {
        xc = nn_contig(x, cd);
        wc = w ? nn_contig(w, cd) : NULL;
        bc = b ? nn_contig(b, cd) : NULL;
        if (!xc || (w && !wc) || (b && !bc)) goto fail;
#define LN_CALL(T, S)                                                                                      \
    ln_fwd_##S((const T *)c10_data(xc), R, M, wc ? (const T *)c10_data(wc) : NULL,                         \
               bc ? (const T *)c10_data(bc) : NULL, a->s[0], (T *)c10_data(y), (T *)c10_data(mean),        \
               (T *)c10_data(rstd))
        if (cd == CT_FLOAT32) LN_CALL(float, f32);
        else LN_CALL(double, f64);
#undef LN_CALL
    } else if (x->device != CT_META && R) {
        c10_fill(mean, 0);
        c10_fill(rstd, NAN);
    }
    c10_release(xc);
    c10_release(wc);
    c10_release(bc);
    c10_release(mean);
    c10_release(rstd);
    ONE(convert_owned(y, x->dtype));
fail:
    c10_release(y);
    c10_release(mean);
    c10_release(rstd);
    c10_release(xc);
    c10_release(wc);
    c10_release(bc);
    return -1;
}

/* layer_norm's fused backward: gx (rows), and column sums gw, gb (double
 * partials per block of rows, added in order). */
#define DEF_LN_BWD(T, S)                                                                                  \
    static void ln_bwd_##S(const T *restrict x, const T *restrict g, int64_t R, int64_t M,              \
                           const T *restrict w, const T *restrict mean, const T *restrict rstd,         \
                           T *restrict gx, double *restrict pgw, double *restrict pgb, int64_t nb) {     \
        OMP(omp parallel for schedule(static) if (R * M > GRAIN))                                   \
        for (int64_t blk = 0; blk < nb; blk++) {                                                           \
            int64_t lo = blk * R / nb, hi = (blk + 1) * R / nb;                                           \
            double *restrict bw = pgw ? pgw + blk * M : NULL, *restrict bb = pgb ? pgb + blk * M : NULL;  \
            if (bw) for (int64_t i = 0; i < M; i++) bw[i] = 0;                                             \
            if (bb) for (int64_t i = 0; i < M; i++) bb[i] = 0;                                             \
            for (int64_t r = lo; r < hi; r++) {                                                            \
                const T *restrict xr = x + r * M, *restrict gr = g + r * M;                               \
                const T mu = mean[r], rs = rstd[r];                                                        \
                if (bw && bb) {                                                                            \
                    OMP(omp simd) for (int64_t i = 0; i < M; i++) {                                  \
                        bw[i] += (double)(gr[i] * (xr[i] - mu) * rs);                                      \
                        bb[i] += (double)gr[i];                                                            \
                    }                                                                                      \
                } else if (bw) {                                                                           \
                    OMP(omp simd) for (int64_t i = 0; i < M; i++)                                    \
                        bw[i] += (double)(gr[i] * (xr[i] - mu) * rs);                                      \
                } else if (bb) {                                                                           \
                    OMP(omp simd) for (int64_t i = 0; i < M; i++) bb[i] += (double)gr[i];            \
                }                                                                                          \
                if (!gx) continue;                                                                         \
                T *restrict o = gx + r * M;                                                                \
                double s1 = 0, s2 = 0;                                                                     \
                if (w) {                                                                                   \
                    OMP(omp simd reduction(+ : s1, s2)) for (int64_t i = 0; i < M; i++) {            \
                        T gh = gr[i] * w[i];                                                               \
                        s1 += (double)gh;                                                                  \
                        s2 += (double)(gh * (xr[i] - mu));                                                 \
                    }                                                                                      \
                } else {                                                                                   \
                    OMP(omp simd reduction(+ : s1, s2)) for (int64_t i = 0; i < M; i++) {            \
                        s1 += (double)gr[i];                                                               \
                        s2 += (double)(gr[i] * (xr[i] - mu));                                              \
                    }                                                                                      \
                }                                                                                          \
                const T c1 = (T)(s1 / (double)M), c2 = (T)(s2 * (double)rs * (double)rs / (double)M);     \
                if (w) {                                                                                   \
                    OMP(omp simd) for (int64_t i = 0; i < M; i++)                                    \
                        o[i] = rs * (gr[i] * w[i] - c1 - (xr[i] - mu) * c2);                               \
                } else {                                                                                   \
                    OMP(omp simd) for (int64_t i = 0; i < M; i++)                                    \
                        o[i] = rs * (gr[i] - c1 - (xr[i] - mu) * c2);                                      \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
    }
DEF_LN_BWD(float, f32)
COLD_BEGIN /* float64: for size */
DEF_LN_BWD(double, f64)
COLD_END

/* Fills gi[0..2] (input, weight, bias gradients) as needed; NULL where not. */
int nn_layer_norm_grad(const TensorImpl *x, const TensorImpl *w, double eps, const TensorImpl *g, const int64_t *ns,
                       int nn, const bool *needs, TensorImpl **gi) {
    int64_t R, M;
    if (nn_layer_norm_geom(x, w, NULL, ns, nn, &R, &M) < 0) return -1;
    ct_dtype cd = c10_opmath(x->dtype);
    TensorImpl *gx = needs[0] ? c10_empty(x->sizes, x->ndim, cd, x->device) : NULL;
    TensorImpl *gw = needs[1] && w ? c10_empty(ns, nn, CT_FLOAT64, x->device) : NULL;
    TensorImpl *gb = needs[2] ? c10_empty(ns, nn, CT_FLOAT64, x->device) : NULL;
    TensorImpl *xc = NULL, *gc = NULL, *wc = NULL, *mc = NULL, *rc = NULL;
    double *part = NULL;
    /* blocks of rows for the weight/bias sums: a fixed count (deterministic), at most 32 MB of partials */
    int64_t nb = R < 64 ? R : 64, cap = M > 0 ? ((int64_t)1 << 22) / M : 64;
    if (nb > cap) nb = cap > 1 ? cap : 1;
    if ((needs[0] && !gx) || (needs[1] && w && !gw) || (needs[2] && !gb)) goto fail;
    if (x->device != CT_META) {
        if (!(xc = nn_contig(x, cd)) || !(gc = nn_contig(g, cd)) || (w && !(wc = nn_contig(w, cd))) ||
            !(mc = c10_empty(&R, 1, cd, x->device)) || !(rc = c10_empty(&R, 1, cd, x->device)))
            goto fail;
        if (cd == CT_FLOAT32)
            ln_fwd_f32((const float *)c10_data(xc), R, M, NULL, NULL, eps, NULL, (float *)c10_data(mc),
                       (float *)c10_data(rc));
        else
            ln_fwd_f64((const double *)c10_data(xc), R, M, NULL, NULL, eps, NULL, (double *)c10_data(mc),
                       (double *)c10_data(rc));
        int npart = (gw != NULL) + (gb != NULL);
        if (npart && !(part = calloc((size_t)(nb ? nb : 1) * (size_t)(M ? M : 1) * (size_t)npart, sizeof *part))) {
            c10_error("out of memory");
            goto fail;
        }
        double *pgw = gw ? part : NULL, *pgb = gb ? part + (gw ? nb * M : 0) : NULL;
#define LNB_CALL(T, S)                                                                                      \
    ln_bwd_##S((const T *)c10_data(xc), (const T *)c10_data(gc), R, M, wc ? (const T *)c10_data(wc) : NULL, \
               (const T *)c10_data(mc), (const T *)c10_data(rc), gx ? (T *)c10_data(gx) : NULL, pgw, pgb, nb)
        if (cd == CT_FLOAT32) LNB_CALL(float, f32);
        else LNB_CALL(double, f64);
#undef LNB_CALL
        TensorImpl *sums[2] = {gw, gb};
        double *parts[2] = {pgw, pgb};
        for (int k = 0; k < 2; k++) {
            if (!sums[k]) continue;
            double *o = (double *)c10_data(sums[k]);
            for (int64_t i = 0; i < M; i++) o[i] = 0;
            for (int64_t blk = 0; blk < nb; blk++)
                for (int64_t i = 0; i < M; i++) o[i] += parts[k][blk * M + i];
        }
    }
    free(part);
    c10_release(xc), c10_release(gc), c10_release(wc), c10_release(mc), c10_release(rc);
    gi[0] = convert_owned(gx, x->dtype);
    gi[1] = w ? convert_owned(gw, w->dtype) : NULL;
    gi[2] = convert_owned(gb, x->dtype);
    return 0;
fail:
    free(part);
    c10_release(xc), c10_release(gc), c10_release(wc), c10_release(mc), c10_release(rc);
    c10_release(gx), c10_release(gw), c10_release(gb);
    return -1;
}

/* ----------------------------------------------------------------- batch_norm */

/* bn_fwd, per channel c of x [N, C, inner]: its statistics (training; y is
 * NULL), or y from the given ones (evaluation, and training's second call).
 * One plane of y: torch's x * alpha + beta (alpha = w rstd, beta = b - mean alpha),
 * or (gen) its generic path's ((x - mean) rstd) w + b, which it takes when
 * x is neither contiguous nor channels-last or the weight or bias is strided
 * (strided statistics do not count): they differ with inf parameters */
#define DEF_BN_FWD(T, S)                                                                                  \
    static inline void bn_plane_##S(const T *restrict p, T *restrict o, int64_t n, T mu, T rs, T wv, T bv, \
                                    bool gen) {                                                            \
        T sc = wv * rs, sh = bv - mu * sc;                                                                 \
        if (gen)                                                                                           \
            for (int64_t i = 0; i < n; i++) o[i] = (p[i] - mu) * rs * wv + bv;                             \
        else                                                                                               \
            for (int64_t i = 0; i < n; i++) o[i] = p[i] * sc + sh;                                         \
    }                                                                                                      \
    static void bn_fwd_##S(const T *restrict x, int64_t N, int64_t C, int64_t inner, bool training,      \
                           const T *restrict w, const T *restrict b, double eps, T *restrict y,          \
                           T *restrict mean, T *restrict rstd, double *restrict var_out, bool gen) {      \
        if (!training) { /* plane by plane, in memory order (a channel's planes, C apart: 1.3x slower) */ \
            OMP(omp parallel for schedule(static) if (y && N * C * inner > GRAIN))                  \
            for (int64_t q = 0; q < (y ? N * C : 0); q++) {                                                \
                int64_t c = q % C;                                                                         \
                bn_plane_##S(x + q * inner, y + q * inner, inner, mean[c], rstd[c], w ? w[c] : 1, b ? b[c] : 0, gen); \
            }                                                                                              \
            return;                                                                                        \
        }                                                                                                  \
        OMP(omp parallel for schedule(static) if (N * C * inner > GRAIN))                           \
        for (int64_t c = 0; c < C; c++) {                                                                  \
            T mu, rs;                                                                                      \
            { /* training: evaluation returned above */                                                  \
                double s = 0;                                                                              \
                for (int64_t n = 0; n < N; n++) {                                                          \
                    const T *restrict p = x + (n * C + c) * inner;                                        \
                    OMP(omp simd reduction(+ : s)) for (int64_t i = 0; i < inner; i++) s += (double)p[i]; \
                }                                                                                          \
                double cnt = (double)(N * inner);                                                          \
                mu = (T)(s / cnt);                                                                         \
                double v = 0;                                                                              \
                for (int64_t n = 0; n < N; n++) {                                                          \
                    const T *restrict p = x + (n * C + c) * inner;                                        \
                    OMP(omp simd reduction(+ : v)) for (int64_t i = 0; i < inner; i++) {            \
                        T d = p[i] - mu;                                                                   \
                        v += (double)(d * d);                                                              \
                    }                                                                                      \
                }                                                                                          \
                var_out[c] = v / cnt;                                                                      \
                rs = v == 0 && eps == 0 ? 0 : (T)(1 / sqrt(v / cnt + eps)); /* torch's InvStd */          \
                mean[c] = mu;                                                                              \
                rstd[c] = rs;                                                                              \
            }                                                                                              \
        }                                                                                                  \
    }
DEF_BN_FWD(float, f32)
COLD_BEGIN /* float64: for size */
DEF_BN_FWD(double, f64)
COLD_END

int nn_batch_norm_check(const TensorImpl *x, const TensorImpl *w, const TensorImpl *b, const TensorImpl *rm,
                        const TensorImpl *rv, bool training) {
    if (x->ndim < 2)
        return c10_error_int("batch_norm: Expected 2 or more dimensions (got %d)", x->ndim);
    int64_t C = x->sizes[1];
    if (training) {
        int64_t prod = x->sizes[0];
        for (int d = 2; d < x->ndim; d++) prod *= x->sizes[d];
        if (prod == 1)
            return c10_error_int("batch_norm: Expected more than 1 value per channel when training, got input size %s",
                                 torch_size(x));
    } else {
        if (!rm) return c10_error_int("batch_norm: running_mean must be defined in evaluation mode");
        if (!rv) return c10_error_int("batch_norm: running_var must be defined in evaluation mode");
    }
    const TensorImpl *ts[4] = {rm, rv, w, b}; /* torch's order of the sizes' checks */
    const char *names[4] = {"running_mean", "running_var", "weight", "bias"};
    for (int k = 0; k < 4; k++) {
        if (!ts[k]) continue;
        if (ts[k]->numel != C)
            return c10_error_int("batch_norm: %s should contain %lld elements not %lld", names[k], (long long)C,
                                 (long long)ts[k]->numel);
        if (!at_same_device("batch_norm", x, ts[k])) return -1;
    }
    /* torch's mixed types (float32 parameters of a bfloat16 input) are told by
     * the first parameter given (weight, bias, running_mean, running_var);
     * otherwise every one must have the input's dtype */
    const TensorImpl *ps[4] = {w, b, rm, rv}, *first = NULL, *odd = NULL;
    bool all_float = true;
    for (int k = 0; k < 4; k++) {
        const TensorImpl *p = ps[training ? (k + 2) % 4 : k]; /* the kernel reads the statistics first when training */
        if (ps[k] && !first) first = ps[k];
        if (p && !odd && p->dtype != x->dtype) odd = p;
        all_float &= !ps[k] || ps[k]->dtype == CT_FLOAT32;
    }
    if (!c10_is_float(x->dtype) || x->dtype == CT_FLOAT16) /* an integer or half input first, whatever the parameters */
        return c10_error_int("\"batch_norm\" not implemented for '%s'", c10_dtype_cname(x->dtype));
    if (first && first->dtype != x->dtype) {
        if (!all_float) return c10_error_int("mixed dtype (CPU): expect parameter to have scalar type of Float");
        if (x->dtype != CT_BFLOAT16)
            return c10_error_int("mixed dtype (CPU): expect input to have scalar type of BFloat16");
    } else if (odd) {
        return c10_error_int("batch_norm: expected scalar type %s but found %s", c10_dtype_cname(x->dtype),
                             c10_dtype_cname(odd->dtype));
    }
    for (int k = 0; k < 2; k++) /* the kernel's 1-d accessors of the running statistics */
        if (ts[k] && ts[k]->ndim != 1)
            return c10_error_int("batch_norm: TensorAccessor expected 1 dims but tensor has %d", ts[k]->ndim);
    return 0;
}

/* The mean and rstd a batch_norm uses ([C] tensors of dtype cd): the batch's
 * (training; var gets the biased variances) or the running statistics'. */
static int bn_stats(const TensorImpl *xc, bool training, const TensorImpl *rm, const TensorImpl *rv, double eps,
                    ct_dtype cd, TensorImpl **mean, TensorImpl **rstd, double *var) {
    int64_t N = xc->sizes[0], C = xc->sizes[1], inner = 1;
    for (int d = 2; d < xc->ndim; d++) inner *= xc->sizes[d];
    *mean = c10_empty(&C, 1, cd, xc->device);
    *rstd = c10_empty(&C, 1, cd, xc->device);
    if (!*mean || !*rstd) {
        c10_release(*mean), c10_release(*rstd);
        return -1;
    }
    if (!training) {
        for (int64_t c = 0; c < C; c++) {
            double m = c10_load_double(c10_data(rm) + c10_linear_offset(rm, c), rm->dtype);
            double v = c10_load_double(c10_data(rv) + c10_linear_offset(rv, c), rv->dtype);
            c10_store_double(c10_data(*mean) + c * (int64_t)c10_elsize[cd], cd, m);
            c10_store_double(c10_data(*rstd) + c * (int64_t)c10_elsize[cd], cd, 1 / sqrt(v + eps));
        }
        return 0;
    }
    if (cd == CT_FLOAT32)
        bn_fwd_f32((const float *)c10_data(xc), N, C, inner, true, NULL, NULL, eps, NULL, (float *)c10_data(*mean),
                   (float *)c10_data(*rstd), var, false);
    else
        bn_fwd_f64((const double *)c10_data(xc), N, C, inner, true, NULL, NULL, eps, NULL, (double *)c10_data(*mean),
                   (double *)c10_data(*rstd), var, false);
    return 0;
}

/* t[0] input [N, C, ...], t[1] weight [C] or NULL, t[2] bias or NULL,
 * t[3] running_mean or NULL, t[4] running_var or NULL (updated in place when
 * training). i: training (its op batch_norm_eval also saves the running
 * statistics for the backward). s: momentum, eps. out: y. */
int fwd_batch_norm(int op, const OpArgs *a, TensorImpl **out) {
    const TensorImpl *x = a->t[0], *w = a->t[1], *b = a->t[2];
    TensorImpl *rm = a->t[3], *rv = a->t[4];
    bool training = op == OP_batch_norm;
    double momentum = a->s[0], eps = a->s[1];
    if (nn_batch_norm_check(x, w, b, rm, rv, training) < 0) return -1;
    int64_t N = x->sizes[0], C = x->sizes[1], inner = 1;
    for (int d = 2; d < x->ndim; d++) inner *= x->sizes[d];
    ct_dtype cd = c10_opmath(x->dtype);
    TensorImpl *y = c10_empty(x->sizes, x->ndim, cd, x->device);
    TensorImpl *mean = NULL, *rstd = NULL;
    TensorImpl *xc = NULL, *wc = NULL, *bc = NULL;
    double *var = NULL;
    if (!y) goto fail;
    if (x->device != CT_META) {
        if (!(xc = nn_contig(x, cd)) || (w && !(wc = nn_contig(w, cd))) || (b && !(bc = nn_contig(b, cd)))) goto fail;
        if (!(var = calloc((size_t)(C ? C : 1), sizeof *var))) {
            c10_error("out of memory");
            goto fail;
        }
        if (bn_stats(xc, training, rm, rv, eps, cd, &mean, &rstd, var) < 0) goto fail;
        bool gen = !(x->is_contiguous || at_channels_last_contiguous(x)) || (w && !w->is_contiguous) ||
                   (b && !b->is_contiguous);
#define BN_CALL(T, S)                                                                                       \
    bn_fwd_##S((const T *)c10_data(xc), N, C, inner, false, wc ? (const T *)c10_data(wc) : NULL,            \
               bc ? (const T *)c10_data(bc) : NULL, eps, (T *)c10_data(y), (T *)c10_data(mean),             \
               (T *)c10_data(rstd), var, gen)
        if (cd == CT_FLOAT32) BN_CALL(float, f32);
        else BN_CALL(double, f64);
#undef BN_CALL
        if (training && N * inner > 0) { /* an empty batch leaves them, as torch */
            double n = (double)(N * inner);
            for (int64_t c = 0; c < C; c++) {
                double m = c10_load_double(c10_data(mean) + c * (int64_t)c10_elsize[cd], cd);
                if (rm) {
                    char *p = c10_data(rm) + c10_linear_offset(rm, c);
                    c10_store_double(p, rm->dtype, (1 - momentum) * c10_load_double(p, rm->dtype) + momentum * m);
                }
                if (rv) {
                    char *p = c10_data(rv) + c10_linear_offset(rv, c);
                    double unbiased = var[c] * n / (n - 1);
                    c10_store_double(p, rv->dtype, (1 - momentum) * c10_load_double(p, rv->dtype) + momentum * unbiased);
                }
            }
            /* as PyTorch's kernel, the update does not bump the version counters:
             * graphs that saved the running statistics (eval mode) stay usable */
        }
    }
    free(var);
    c10_release(xc), c10_release(wc), c10_release(bc);
    c10_release(mean), c10_release(rstd);
    y = convert_owned(y, x->dtype); /* torch: contiguous for a contiguous x (a size-1 C's too), else x's format */
    ONE(x->is_contiguous ? y : at_format_like(y, &x, 1));
fail:
    free(var);
    c10_release(xc), c10_release(wc), c10_release(bc);
    c10_release(y), c10_release(mean), c10_release(rstd);
    return -1;
}

/* batch_norm's fused backward per channel. */
#define DEF_BN_BWD(T, S)                                                                                  \
    static void bn_bwd_##S(const T *restrict x, const T *restrict g, int64_t N, int64_t C, int64_t inner, \
                           bool training, const T *restrict w, const T *restrict mean,                   \
                           const T *restrict rstd, T *restrict gx, double *restrict gw,                  \
                           double *restrict gb) {                                                         \
        OMP(omp parallel for schedule(static) if (N * C * inner > GRAIN))                           \
        for (int64_t c = 0; c < C; c++) {                                                                  \
            T mu = mean[c], rs = rstd[c], wc = w ? w[c] : (T)1;                                            \
            double sg = 0, sgx = 0;                                                                        \
            for (int64_t n = 0; n < N; n++) {                                                              \
                const T *restrict p = x + (n * C + c) * inner, *restrict q = g + (n * C + c) * inner;    \
                OMP(omp simd reduction(+ : sg, sgx)) for (int64_t i = 0; i < inner; i++) {          \
                    sg += (double)q[i];                                                                    \
                    sgx += (double)(q[i] * (p[i] - mu));                                                   \
                }                                                                                          \
            }                                                                                              \
            if (gw) gw[c] = sgx * (double)rs;                                                              \
            if (gb) gb[c] = sg;                                                                            \
            if (!gx) continue;                                                                             \
            double cnt = (double)(N * inner);                                                              \
            T k1 = training ? (T)(sg / cnt) : (T)0;                                                       \
            T k2 = training ? (T)(sgx * (double)rs * (double)rs / cnt) : (T)0;                             \
            T sc = wc * rs;                                                                                \
            for (int64_t n = 0; n < N; n++) {                                                              \
                const T *restrict p = x + (n * C + c) * inner, *restrict q = g + (n * C + c) * inner;    \
                T *restrict o = gx + (n * C + c) * inner;                                                  \
                if (!training) /* g w rstd: no x in it (NaN / inf x too) */                                 \
                    for (int64_t i = 0; i < inner; i++) o[i] = sc * q[i];                                   \
                else                                                                                       \
                    for (int64_t i = 0; i < inner; i++) o[i] = sc * (q[i] - k1 - (p[i] - mu) * k2);        \
            }                                                                                              \
        }                                                                                                  \
    }
DEF_BN_BWD(float, f32)
COLD_BEGIN /* float64: for size */
DEF_BN_BWD(double, f64)
COLD_END

int nn_batch_norm_grad(const TensorImpl *x, const TensorImpl *w, const TensorImpl *rm, const TensorImpl *rv,
                       double eps, const TensorImpl *g, bool training, const bool *needs, TensorImpl **gi) {
    int64_t N = x->sizes[0], C = x->sizes[1], inner = 1;
    for (int d = 2; d < x->ndim; d++) inner *= x->sizes[d];
    ct_dtype cd = c10_opmath(x->dtype);
    TensorImpl *gx = needs[0] ? c10_empty(x->sizes, x->ndim, cd, x->device) : NULL;
    TensorImpl *gw = needs[1] && w ? c10_empty(&C, 1, CT_FLOAT64, x->device) : NULL;
    TensorImpl *gb = needs[2] ? c10_empty(&C, 1, CT_FLOAT64, x->device) : NULL;
    TensorImpl *xc = NULL, *gc = NULL, *wc = NULL, *mc = NULL, *rc = NULL;
    if ((needs[0] && !gx) || (needs[1] && w && !gw) || (needs[2] && !gb)) goto fail;
    if (x->device != CT_META) {
        if (!(xc = nn_contig(x, cd)) || !(gc = nn_contig(g, cd)) || (w && !(wc = nn_contig(w, cd)))) goto fail;
        double *var = malloc((size_t)(C ? C : 1) * sizeof *var);
        int st = var ? bn_stats(xc, training, rm, rv, eps, cd, &mc, &rc, var) : c10_error_int("out of memory");
        free(var);
        if (st < 0) goto fail;
#define BNB_CALL(T, S)                                                                                      \
    bn_bwd_##S((const T *)c10_data(xc), (const T *)c10_data(gc), N, C, inner, training,                     \
               wc ? (const T *)c10_data(wc) : NULL, (const T *)c10_data(mc), (const T *)c10_data(rc),       \
               gx ? (T *)c10_data(gx) : NULL, gw ? (double *)c10_data(gw) : NULL,                          \
               gb ? (double *)c10_data(gb) : NULL)
        if (cd == CT_FLOAT32) BNB_CALL(float, f32);
        else BNB_CALL(double, f64);
#undef BNB_CALL
    }
    c10_release(xc), c10_release(gc), c10_release(wc), c10_release(mc), c10_release(rc);
    gi[0] = convert_owned(gx, x->dtype);
    gi[1] = w ? convert_owned(gw, w->dtype) : NULL;
    gi[2] = convert_owned(gb, x->dtype);
    return 0;
fail:
    c10_release(xc), c10_release(gc), c10_release(wc), c10_release(mc), c10_release(rc);
    c10_release(gx), c10_release(gw), c10_release(gb);
    return -1;
}
