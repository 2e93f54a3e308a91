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
ct_tensor *ct_outer(const ct_tensor *a, const ct_tensor *b) { return call2(OP_outer, a, b); }

ct_tensor *ct_matmul(const ct_tensor *a, const ct_tensor *b) {
    TensorImpl *t[2];
    const ct_tensor *h[2] = {a, b};
    if (!unwrap(h, t, 2)) return NULL;
    /* 2-d @ 2-d is mm, as in PyTorch (its node is MmBackward0) */
    int op = t[0]->ndim == 2 && t[1]->ndim == 2 ? OP_mm : OP_matmul;
    OpArgs args = {.t = {t[0], t[1]}, .nt = 2};
    TensorImpl *r = ag_call1(op, &args);
    if (!r && op == OP_mm) { /* word the error as matmul does */
        ct_clear_error();
        r = at_call1(OP_matmul, &args);
    }
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
    return c10_wrap(ag_call1(OP_linear, &a));
}
