/* api_reduce.c: the public functions of the reduction rows of ops.def. Each
 * unwraps its handle, packs OpArgs (layouts in src/ops/reduce.c) and calls the
 * autograd wrapper. */
#include "autograd/autograd.h"

/* dim-list layout: i[0] keepdim, i[1] ndims (0: all), i[2..] dims; s[0] */
static ct_tensor *reduce_list(int op, const ct_tensor *h, const int *dims, int ndims, bool keepdim, double s0) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return NULL;
    if (ndims < 0 || ndims > CT_MAX_DIMS || (ndims > 0 && !dims))
        return c10_error("%s: invalid dim list (ndims = %d)", op_info[op].name, ndims);
    OpArgs a = {.t = {t}, .nt = 1, .s = {s0}, .ni = 2 + ndims};
    a.i[0] = keepdim;
    a.i[1] = ndims;
    for (int k = 0; k < ndims; k++) a.i[2 + k] = dims[k];
    return c10_wrap(ag_call1(op, &a));
}

/* single-dim layout: i[0] dim, i[1] keepdim / reverse, i[2] has_dim */
static ct_tensor *reduce_dim(int op, const ct_tensor *h, int dim, int64_t flag, int64_t has_dim) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return NULL;
    OpArgs a = {.t = {t}, .nt = 1, .i = {dim, flag, has_dim}, .ni = 3};
    return c10_wrap(ag_call1(op, &a));
}

ct_tensor *ct_sum(const ct_tensor *a) { return reduce_list(OP_sum, a, NULL, 0, false, 0); }
ct_tensor *ct_mean(const ct_tensor *a) { return reduce_list(OP_mean, a, NULL, 0, false, 0); }
ct_tensor *ct_sum_dims(const ct_tensor *a, const int *dims, int ndims, bool keepdim) {
    return reduce_list(OP_sum_dims, a, dims, ndims, keepdim, 0);
}
ct_tensor *ct_mean_dims(const ct_tensor *a, const int *dims, int ndims, bool keepdim) {
    return reduce_list(OP_mean_dims, a, dims, ndims, keepdim, 0);
}
ct_tensor *ct_prod(const ct_tensor *a) { return reduce_dim(OP_prod, a, 0, 0, 0); }
ct_tensor *ct_prod_dim(const ct_tensor *a, int dim, bool keepdim) { return reduce_dim(OP_prod_dim, a, dim, keepdim, 1); }
ct_tensor *ct_max(const ct_tensor *a) { return reduce_dim(OP_max, a, 0, 0, 0); }
ct_tensor *ct_min(const ct_tensor *a) { return reduce_dim(OP_min, a, 0, 0, 0); }

static int minmax_dim(int op, const ct_tensor *h, int dim, bool keepdim, ct_tensor **values, ct_tensor **indices) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (!values || !indices) return c10_error_int("%s: values and indices must not be NULL", op_info[op].name);
    OpArgs a = {.t = {t}, .nt = 1, .i = {dim, keepdim}, .ni = 2};
    TensorImpl *out[OP_MAX_OUTS];
    if (at_call(op, &a, out) < 0) return -1;
    /* the values again, through the differentiable row, when autograd records */
    if (ag_grad_enabled() && ag_requires_grad(t)) {
        OpArgs v = {.t = {t, out[1]}, .nt = 2, .i = {dim, keepdim}, .ni = 2};
        TensorImpl *val = ag_call1(op == OP_max_dim ? OP_max_dim_values : OP_min_dim_values, &v);
        c10_release(out[0]);
        if (!val) {
            c10_release(out[1]);
            return -1;
        }
        out[0] = val;
    }
    *values = c10_wrap(out[0]);
    *indices = c10_wrap(out[1]);
    return 0;
}
int ct_max_dim(const ct_tensor *a, int dim, bool keepdim, ct_tensor **values, ct_tensor **indices) {
    return minmax_dim(OP_max_dim, a, dim, keepdim, values, indices);
}
int ct_min_dim(const ct_tensor *a, int dim, bool keepdim, ct_tensor **values, ct_tensor **indices) {
    return minmax_dim(OP_min_dim, a, dim, keepdim, values, indices);
}
ct_tensor *ct_amax(const ct_tensor *a, const int *dims, int ndims, bool keepdim) {
    return reduce_list(OP_amax, a, dims, ndims, keepdim, 0);
}
ct_tensor *ct_amin(const ct_tensor *a, const int *dims, int ndims, bool keepdim) {
    return reduce_list(OP_amin, a, dims, ndims, keepdim, 0);
}
ct_tensor *ct_argmax(const ct_tensor *a, bool has_dim, int dim, bool keepdim) {
    return reduce_dim(OP_argmax, a, dim, keepdim, has_dim);
}
ct_tensor *ct_argmin(const ct_tensor *a, bool has_dim, int dim, bool keepdim) {
    return reduce_dim(OP_argmin, a, dim, keepdim, has_dim);
}
ct_tensor *ct_var(const ct_tensor *a, const int *dims, int ndims, double correction, bool keepdim) {
    return reduce_list(OP_var, a, dims, ndims, keepdim, correction);
}
ct_tensor *ct_std(const ct_tensor *a, const int *dims, int ndims, double correction, bool keepdim) {
    return reduce_list(OP_std, a, dims, ndims, keepdim, correction);
}
ct_tensor *ct_norm(const ct_tensor *a, double p, const int *dims, int ndims, bool keepdim) {
    return reduce_list(OP_norm, a, dims, ndims, keepdim, p);
}
ct_tensor *ct_logsumexp(const ct_tensor *a, const int *dims, int ndims, bool keepdim) {
    return reduce_list(OP_logsumexp, a, dims, ndims, keepdim, 0);
}
ct_tensor *ct_all(const ct_tensor *a) { return reduce_list(OP_all, a, NULL, 0, false, 0); }
ct_tensor *ct_any(const ct_tensor *a) { return reduce_list(OP_any, a, NULL, 0, false, 0); }
ct_tensor *ct_all_dims(const ct_tensor *a, const int *dims, int ndims, bool keepdim) {
    return reduce_list(OP_all, a, dims, ndims, keepdim, 0);
}
ct_tensor *ct_any_dims(const ct_tensor *a, const int *dims, int ndims, bool keepdim) {
    return reduce_list(OP_any, a, dims, ndims, keepdim, 0);
}
ct_tensor *ct_cumsum(const ct_tensor *a, int dim) { return reduce_dim(OP_cumsum, a, dim, 0, 1); }
ct_tensor *ct_cumprod(const ct_tensor *a, int dim) { return reduce_dim(OP_cumprod, a, dim, 0, 1); }
ct_tensor *ct_softmax(const ct_tensor *a, int dim) { return reduce_dim(OP_softmax, a, dim, 0, 1); }
ct_tensor *ct_log_softmax(const ct_tensor *a, int dim) { return reduce_dim(OP_log_softmax, a, dim, 0, 1); }
