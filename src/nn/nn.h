/*
 * nn.h: what the nn and optim files share (private). nn sits above autograd
 * and uses only the public API (ct_*), plus core.h for error messages and for
 * moving a result handle out of an inner scope.
 */
#ifndef CT_NN_NN_H
#define CT_NN_NN_H

#include "core/core.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A new handle (of the current scope) to the same tensor as h. */
static inline ct_tensor *nn_same(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    return t ? c10_wrap(c10_retain(t)) : NULL;
}

/* A handle that belongs to no scope, made from h (which is released). */
static inline ct_tensor *nn_own(ct_tensor *h) {
    if (!h) return NULL;
    ct_tensor *r = ct_retain(h);
    ct_free(h);
    return r;
}

static inline char *nn_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *r = malloc(n);
    if (r) memcpy(r, s, n);
    return r;
}

/* Configuration of every built-in module (one struct, so one clone function). */
typedef struct NnCfg {
    int kind;
    int64_t in, out;          /* features / channels / num_embeddings, embedding_dim */
    int64_t k[2], stride[2], pad[2], dil[2], groups;
    int ndim;                 /* conv: 1 or 2; layer_norm: normalized ndim */
    int64_t shape[CT_MAX_DIMS];
    int dim, dim2;            /* softmax dim; flatten start/end */
    double eps, momentum, p, beta;
    bool bias, affine, track, ceil_mode, has_momentum;
    int reduction;
    int64_t padding_idx, ignore_index;
    char approximate[8];
} NnCfg;

/* Python's repr of a float into out: "1e-05", "0.1", "1.0" (reprs and torch's ValueError texts) */
CT_INTERNAL void nn_pyfloat(char *out, size_t cap, double v);
CT_INTERNAL void *nn_cfg_clone(const void *ctx);
CT_INTERNAL void nn_cfg_free(void *ctx);

/* Own (non-recursive) tensors of a module, by name; borrowed; NULL if absent. */
CT_INTERNAL ct_tensor *nn_param(const ct_module *m, const char *name);
CT_INTERNAL ct_tensor *nn_buffer(const ct_module *m, const char *name);
/* A new module of a built-in kind, owning cfg (copied). */
CT_INTERNAL ct_module *nn_builtin(const ct_module_ops *ops, const NnCfg *cfg);
/* Creates a tensor of shape, runs init on it, registers it as a parameter/buffer. */
CT_INTERNAL ct_tensor *nn_add_tensor(ct_module *m, const char *name, const int64_t *shape, int ndim,
                                     ct_dtype dtype, bool param);
/* torch's group.setdefault('initial_lr', group['lr']) of a scheduler's construction (group in range). */
CT_INTERNAL double optim_initial_lr(ct_optimizer *o, int group);


#endif
