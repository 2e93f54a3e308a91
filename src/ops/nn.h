/* nn.h: the nnfunc family's shared internals (src/ops/nn.c <-> src/autograd/d_nn.c). */
#ifndef CT_OPS_NN_H
#define CT_OPS_NN_H
#include "ops/ops.h"

/* Geometry of nll_loss: input [N, C, d...] seen as R = N * prod(d)
 * rows of C classes. */
typedef struct {
    int64_t N, C, inner, R;
    int cls_dim;                 /* 0 for a 1-d input, else 1 */
    int64_t lshape[CT_MAX_DIMS]; /* the unreduced loss's shape */
    int lndim;
} ClassGeom;

CT_INTERNAL TensorImpl *nn_contig(const TensorImpl *t, ct_dtype d);
CT_INTERNAL const char *nn_reduction_name(int64_t r);
CT_INTERNAL int nn_class_geom(const char *op, const TensorImpl *x, const TensorImpl *target, const TensorImpl *weight,
                              ClassGeom *g);
CT_INTERNAL int nn_check_targets(const int64_t *t, int64_t R, int64_t C, int64_t ignore);
CT_INTERNAL double nn_class_divisor(const ClassGeom *g, const int64_t *t, const TensorImpl *w, int64_t ignore);
CT_INTERNAL TensorImpl *nn_nll_grad(const TensorImpl *x, const TensorImpl *target, const TensorImpl *w,
                                    const TensorImpl *gout, int64_t reduction, int64_t ignore, bool unit);
CT_INTERNAL int nn_pw_check(int op, const OpArgs *a, ct_dtype *cd);
CT_INTERNAL TensorImpl *nn_pw_grad(int op, const OpArgs *a, const TensorImpl *gout, int which);
CT_INTERNAL int nn_layer_norm_geom(const TensorImpl *x, const TensorImpl *w, const TensorImpl *b, const int64_t *ns,
                                   int nn, int64_t *R, int64_t *M);
CT_INTERNAL int nn_layer_norm_grad(const TensorImpl *x, const TensorImpl *w, double eps, const TensorImpl *g,
                                   const int64_t *ns, int nn, const bool *needs, TensorImpl **gi);
CT_INTERNAL int nn_batch_norm_check(const TensorImpl *x, const TensorImpl *w, const TensorImpl *b,
                                    const TensorImpl *rm, const TensorImpl *rv, bool training);
CT_INTERNAL int nn_batch_norm_grad(const TensorImpl *x, const TensorImpl *w, const TensorImpl *rm,
                                   const TensorImpl *rv, double eps, const TensorImpl *g, bool training,
                                   const bool *needs, TensorImpl **gi);
#endif
