/* api_linalg.c: the public functions of the linear-algebra rows (mm bmm matmul
 * mv dot outer addmm baddbmm linear) and of convolution and pooling. */
#include "autograd/autograd.h"

static bool unwrap(const ct_tensor *const *h, TensorImpl **t, int n) { return api_unwrap(h, t, n); }

static ct_tensor *call_tensors(int op, const ct_tensor *const *h, int n, double s0, double s1) {
    TensorImpl *t[OP_MAX_TENSORS];
    if (!unwrap(h, t, n)) return NULL;
    OpArgs a = {.nt = n, .s = {s0, s1}};
    for (int k = 0; k < n; k++) a.t[k] = t[k];
    return c10_wrap(ag_call1(op, &a));
}
static ct_tensor *call2(int op, const ct_tensor *x, const ct_tensor *y) {
    const ct_tensor *h[2] = {x, y};
    return call_tensors(op, h, 2, 0, 0);
}

/* ------------------------------------------------------------ linear algebra */
ct_tensor *ct_mm(const ct_tensor *a, const ct_tensor *b) { return call2(OP_mm, a, b); }
ct_tensor *ct_bmm(const ct_tensor *a, const ct_tensor *b) { return call2(OP_bmm, a, b); }
ct_tensor *ct_mv(const ct_tensor *a, const ct_tensor *v) { return call2(OP_mv, a, v); }
ct_tensor *ct_dot(const ct_tensor *a, const ct_tensor *b) { return call2(OP_dot, a, b); }
/* torch 1.13's composite, a.reshape(-1, 1) * b: its nodes (View, Mul) and what
 * Mul saves (the column view), its dtypes (bools multiply as a logical and) */
ct_tensor *ct_outer(const ct_tensor *a, const ct_tensor *b) {
    TensorImpl *t[2];
    const ct_tensor *h[2] = {a, b};
    if (!unwrap(h, t, 2)) return NULL;
    for (int k = 0; k < 2; k++)
        if (t[k]->ndim != 1)
            return c10_error("outer: Expected 1-D argument %s, but got %d-D", k ? "vec2" : "self", t[k]->ndim);
    OpArgs v = {.t = {t[0]}, .nt = 1, .i = {t[0]->sizes[0], 1}, .ni = 2};
    TensorImpl *col = ag_call1(OP_view, &v), *r = ag_binary(OP_mul, col, t[1]);
    c10_release(col);
    return c10_wrap(r);
}

/* torch 1.13 matmul's last step by ranks: 1-d @ 2-d squeezes a row in place, 2-d @
 * a folding batched b transposes a contiguous copy, other batched ones end in an
 * _unsafe_view (of a folded mm or of bmm). */
static const char *matmul_node(int na, const TensorImpl *b) {
    int nb = b->ndim;
    return na == 1 && nb == 2                              ? "SqueezeBackward3"
           : na == 2 && nb > 2 && at_matmul_folds(b, na) ? "CloneBackward0"
                                                           : "UnsafeViewBackward0";
}

ct_tensor *ct_matmul(const ct_tensor *a, const ct_tensor *b) {
    TensorImpl *t[2];
    const ct_tensor *h[2] = {a, b};
    if (!unwrap(h, t, 2)) return NULL;
    /* 1-d @ 1-d is dot, 2-d @ 1-d mv, 2-d @ 2-d mm, as in PyTorch (their nodes) */
    int na = t[0]->ndim, nb = t[1]->ndim;
    int op = na == 2 && nb == 2 ? OP_mm : na == 1 && nb == 1 ? OP_dot : na == 2 && nb == 1 ? OP_mv : OP_matmul;
    OpArgs args = {.t = {t[0], t[1]}, .nt = 2};
    TensorImpl *r = ag_call1(op, &args);
    if (!r && op != OP_matmul) { /* word the error as matmul does */
        ct_clear_error();
        r = at_call1(OP_matmul, &args);
    }
    ag_name_node(r, OP_matmul, matmul_node(na, t[1]));
    return c10_wrap(r);
}

ct_tensor *ct_addmm(const ct_tensor *self, const ct_tensor *mat1, const ct_tensor *mat2, double beta, double alpha) {
    const ct_tensor *h[3] = {self, mat1, mat2};
    return call_tensors(OP_addmm, h, 3, beta, alpha);
}

ct_tensor *ct_baddbmm(const ct_tensor *self, const ct_tensor *batch1, const ct_tensor *batch2, double beta,
                      double alpha) {
    const ct_tensor *h[3] = {self, batch1, batch2};
    return call_tensors(OP_baddbmm, h, 3, beta, alpha);
}

ct_tensor *ct_linear(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias) {
    TensorImpl *t[3] = {NULL, NULL, NULL};
    const ct_tensor *h[3] = {input, weight, bias};
    if (!unwrap(h, t, bias ? 3 : 2)) return NULL;
    OpArgs a = {.t = {t[0], t[1], t[2]}, .nt = 3};
    TensorImpl *r = ag_call1(OP_linear, &a);
    /* the last node of torch 1.13's path: addmm, a folded addmm's view, matmul's add_(bias), matmul's */
    static const char *const path_node[] = {"AddmmBackward0", "ViewBackward0", "AddBackward0"};
    int path = at_linear_path(t[0], t[2]), nx = t[0]->ndim, nw = t[1]->ndim;
    ag_name_node(r, OP_linear, path != LINEAR_MATMUL ? path_node[path] : nx == 2 && nw == 2 ? "MmBackward0"
                               : nx == 2 ? "MvBackward0" : nx == 1 && nw == 1 ? "DotBackward0" : matmul_node(nx, t[1]));
    return c10_wrap(r);
}

/* ------------------------------------------------------ convolution, pooling */

static ct_tensor *conv(int nsp, const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                       const int64_t *stride, const int64_t *padding, const int64_t *dilation, int64_t groups) {
    TensorImpl *t[3] = {NULL, NULL, NULL};
    const ct_tensor *h[3] = {input, weight, bias};
    if (!unwrap(h, t, bias ? 3 : 2)) return NULL;
    OpArgs a = {.t = {t[0], t[1], t[2]}, .nt = 3, .ni = 8};
    a.i[0] = nsp;
    for (int k = 0; k < 2; k++) {
        a.i[1 + k] = stride[k];
        a.i[3 + k] = padding[k];
        a.i[5 + k] = dilation[k];
    }
    a.i[7] = groups;
    return c10_wrap(ag_call1(OP_convolution, &a));
}

ct_tensor *ct_conv1d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias, int64_t stride,
                     int64_t padding, int64_t dilation, int64_t groups) {
    const int64_t s[2] = {1, stride}, p[2] = {0, padding}, d[2] = {1, dilation};
    return conv(1, input, weight, bias, s, p, d, groups);
}

ct_tensor *ct_conv2d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias, const int64_t *stride,
                     const int64_t *padding, const int64_t *dilation, int64_t groups) {
    static const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    return conv(2, input, weight, bias, stride ? stride : one, padding ? padding : zero, dilation ? dilation : one,
                groups);
}

static bool pool_args(const char *op, const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                      int64_t *i) {
    if (!kernel) {
        c10_error("%s: kernel_size must be given", op);
        return false;
    }
    for (int k = 0; k < 2; k++) {
        i[k] = kernel[k];
        i[2 + k] = stride ? stride[k] : kernel[k];
        i[4 + k] = padding ? padding[k] : 0;
    }
    return true;
}

ct_tensor *ct_max_pool2d_with_indices(const ct_tensor *input, const int64_t *kernel, const int64_t *stride,
                                      const int64_t *padding, const int64_t *dilation, bool ceil_mode,
                                      ct_tensor **indices) {
    if (indices) *indices = NULL;
    TensorImpl *x = c10_unwrap(input);
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .ni = 9};
    if (!pool_args("max_pool2d", kernel, stride, padding, a.i)) return NULL;
    a.i[6] = dilation ? dilation[0] : 1;
    a.i[7] = dilation ? dilation[1] : 1;
    a.i[8] = ceil_mode;
    TensorImpl *idx = NULL;
    if (indices && !(idx = at_call1(OP_max_pool2d_indices, &a))) return NULL;
    TensorImpl *v = ag_call1(OP_max_pool2d, &a);
    if (!v) {
        c10_release(idx);
        return NULL;
    }
    if (indices) *indices = c10_wrap(idx);
    return c10_wrap(v);
}

ct_tensor *ct_max_pool2d(const ct_tensor *input, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, const int64_t *dilation, bool ceil_mode) {
    return ct_max_pool2d_with_indices(input, kernel, stride, padding, dilation, ceil_mode, NULL);
}

ct_tensor *ct_avg_pool2d(const ct_tensor *input, const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                         bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
    TensorImpl *x = c10_unwrap(input);
    if (!x) return NULL;
    OpArgs a = {.t = {x}, .nt = 1, .ni = 9};
    if (!pool_args("avg_pool2d", kernel, stride, padding, a.i)) return NULL;
    a.i[6] = ceil_mode;
    a.i[7] = count_include_pad;
    a.i[8] = divisor_override;
    return c10_wrap(ag_call1(OP_avg_pool2d, &a));
}

ct_tensor *ct_adaptive_avg_pool2d(const ct_tensor *input, const int64_t *output_size) {
    TensorImpl *x = c10_unwrap(input);
    if (!x) return NULL;
    if (!output_size) return c10_error("adaptive_avg_pool2d: output_size must be given");
    if (output_size[0] == 1 && output_size[1] == 1) { /* torch's 1 x 1: the mean of the last two dims, */
        static const int hw[2] = {-1, -2};             /* any rank, NaN for an empty plane, MeanBackward1 */
        return ct_mean_dims(input, hw, 2, true);
    }
    OpArgs a = {.t = {x}, .nt = 1, .i = {output_size[0], output_size[1]}, .ni = 2};
    return c10_wrap(ag_call1(OP_adaptive_avg_pool2d, &a));
}
