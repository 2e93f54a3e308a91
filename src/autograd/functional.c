/* functional.c: torch.autograd.functional's jacobian, hessian, vjp and jvp for a
 * function of one tensor.
 *
 * As torch does, the input is detached and made to require grad, the function
 * runs with grad mode on, and the results come back without history:
 *   jacobian: one autograd.grad per output element (a one-hot grad_output);
 *   hessian:  the jacobian of x -> autograd.grad(f(x), x, create_graph=True);
 *   vjp:      autograd.grad(f(x), x, v);
 *   jvp:      the double-vjp trick: g(u) = autograd.grad(f(x), x, u, create_graph)
 *             is linear in u (= J^T u), so autograd.grad(g, u, v) = J v;
 *   hvp:      autograd.grad(autograd.grad(f(x), x, create_graph), x, v) = v^T H,
 *             which is H v as the Hessian of a twice differentiable f is symmetric. */
#include "autograd/autograd.h"
#include <stdlib.h>

/* A detached copy-free alias of x that requires grad (a new handle). */
static ct_tensor *grad_input(const ct_tensor *x, const char *what) {
    TensorImpl *t = c10_unwrap(x);
    if (!t) return NULL;
    if (!c10_is_float(t->dtype))
        return c10_error("%s: only Tensors of floating point dtype can require gradients", what);
    ct_tensor *d = ct_detach(x);
    if (d && ct_set_requires_grad(d, true) < 0) return NULL;
    return d;
}

static bool same_shape(const TensorImpl *a, const TensorImpl *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d]) return false;
    return true;
}

/* The jacobian of f at x (x is already prepared), as a new reference. */
static TensorImpl *jacobian_of(ct_fn f, void *ctx, const ct_tensor *x, const char *what) {
    TensorImpl *xt = c10_unwrap(x);
    ct_tensor *y = f(&x, 1, ctx);
    TensorImpl *yt = y ? c10_unwrap(y) : NULL;
    if (!yt) {
        if (!c10_has_error()) c10_error("%s: the function failed", what);
        return NULL;
    }
    if (yt->ndim + xt->ndim > CT_MAX_DIMS)
        return c10_error("%s: the result would have %d dimensions (at most %d)", what, yt->ndim + xt->ndim, CT_MAX_DIMS);
    if (!c10_is_float(yt->dtype))
        return c10_error("%s: the function's output must be floating point (got %s)", what, c10_dtype_names[yt->dtype]);
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, yt->sizes, sizeof(int64_t) * (size_t)yt->ndim);
    memcpy(shape + yt->ndim, xt->sizes, sizeof(int64_t) * (size_t)xt->ndim);
    TensorImpl *jac = c10_full(shape, yt->ndim + xt->ndim, 0, yt->dtype, CT_CPU);
    if (!jac) return NULL;
    if (!ag_requires_grad(yt) || xt->numel == 0) return jac; /* does not depend on x: zeros */
    double *row = malloc(sizeof(double) * (size_t)xt->numel);
    if (!row) {
        c10_release(jac);
        return c10_error("out of memory");
    }
    char *dst = c10_data(jac);
    size_t es = c10_elsize[jac->dtype];
    int rc = 0;
    for (int64_t k = 0; k < yt->numel && rc == 0; k++) {
        ct_scope_begin();
        TensorImpl *u = c10_full(yt->sizes, yt->ndim, 0, yt->dtype, CT_CPU);
        if (u) c10_store_double(c10_data(u) + k * (int64_t)es, u->dtype, 1.0);
        ct_tensor *uh = c10_wrap(u), *g = NULL;
        const ct_tensor *yo = y;
        if (!uh || ct_autograd_grad(&yo, (const ct_tensor *const *)&uh, 1, &x, 1, &g, true, false, true) < 0) rc = -1;
        else if (g) {
            TensorImpl *gt = c10_unwrap(g);
            if (!gt || ct_copy_to_buffer(g, row, CT_FLOAT64) < 0) rc = -1;
            else
                for (int64_t j = 0; j < xt->numel; j++)
                    c10_store_double(dst + (k * xt->numel + j) * (int64_t)es, jac->dtype, row[j]);
        }
        ct_scope_end();
    }
    free(row);
    if (rc < 0) {
        c10_release(jac);
        return NULL;
    }
    return jac;
}

ct_tensor *ct_jacobian(ct_fn f, const ct_tensor *input, void *ctx) {
    if (!f) return c10_error("jacobian: the function is NULL");
    if (!c10_unwrap(input)) return NULL;
    bool prev = ag_set_grad_enabled(true);
    ct_scope_begin();
    ct_tensor *x = grad_input(input, "jacobian");
    TensorImpl *jac = x ? jacobian_of(f, ctx, x, "jacobian") : NULL;
    ct_scope_end();
    ag_set_grad_enabled(prev);
    return c10_wrap(jac);
}

typedef struct {
    ct_fn f;
    void *ctx;
} Hess;

/* x -> autograd.grad(f(x), x, create_graph=True) (zeros when f ignores x) */
static ct_tensor *gradient_fn(const ct_tensor *const *in, int n, void *p) {
    Hess *h = p;
    (void)n;
    ct_tensor *y = h->f(in, 1, h->ctx);
    TensorImpl *yt = y ? c10_unwrap(y) : NULL;
    if (!yt) {
        if (!c10_has_error()) c10_error("hessian: the function failed");
        return NULL;
    }
    if (yt->numel != 1)
        return c10_error("The Tensor returned by the function given to hessian should contain a single element");
    if (!ag_requires_grad(yt)) return ct_zeros_like(in[0]);
    ct_tensor *g = NULL;
    const ct_tensor *yo = y;
    if (ct_autograd_grad(&yo, NULL, 1, in, 1, &g, true, true, true) < 0) return NULL;
    return g ? g : ct_zeros_like(in[0]);
}

ct_tensor *ct_hessian(ct_fn f, const ct_tensor *input, void *ctx) {
    if (!f) return c10_error("hessian: the function is NULL");
    Hess h = {f, ctx};
    if (!c10_unwrap(input)) return NULL;
    bool prev = ag_set_grad_enabled(true);
    ct_scope_begin();
    ct_tensor *x = grad_input(input, "hessian");
    TensorImpl *hes = x ? jacobian_of(gradient_fn, &h, x, "hessian") : NULL;
    ct_scope_end();
    ag_set_grad_enabled(prev);
    return c10_wrap(hes);
}

/* Runs f on a prepared x; *y gets its output (a handle of the current scope). */
static int run(ct_fn f, void *ctx, const ct_tensor *x, ct_tensor **y, const char *what) {
    *y = f(&x, 1, ctx);
    TensorImpl *yt = *y ? c10_unwrap(*y) : NULL;
    if (!yt) return c10_has_error() ? -1 : c10_error_int("%s: the function failed", what);
    if (!c10_is_float(yt->dtype))
        return c10_error_int("%s: the function's output must be floating point (got %s)", what, c10_dtype_names[yt->dtype]);
    return 0;
}

/* jvp's and hvp's v: absent only for a one-element input, else x's shape. */
static int check_v(const TensorImpl *xt, const TensorImpl *vt) {
    if (!vt && xt->numel != 1)
        return c10_error_int("The vector v can only be None if the input to the user-provided function is a single "
                             "Tensor with a single element.");
    if (vt && !same_shape(vt, xt))
        return c10_error_int("v has invalid size: should be torch.Size(%s) but got torch.Size(%s).",
                             c10_shape_str(xt->sizes, xt->ndim), c10_shape_str(vt->sizes, vt->ndim));
    return 0;
}

/* Hands out the (detached) output and result, or releases them on failure. */
static int finish(int rc, TensorImpl *out, TensorImpl *res, ct_tensor **output, ct_tensor **result) {
    if (rc < 0) {
        c10_release(out);
        c10_release(res);
        return -1;
    }
    *output = c10_wrap(out);
    *result = c10_wrap(res);
    return 0;
}

/* r = d(g . v)/d wrt (v NULL: ones like x), when g has history; else r stays NULL. */
static int grad_dot_v(ct_tensor *g, const ct_tensor *v, const ct_tensor *x, const ct_tensor *wrt, ct_tensor **r) {
    if (!g || !ct_requires_grad(g)) return 0;
    const ct_tensor *vv = v ? v : ct_ones_like(x), *go = g;
    return vv && ct_autograd_grad(&go, &vv, 1, &wrt, 1, r, false, false, true) == 0 ? 0 : -1;
}

/* jvp's and hvp's tail: the result (zeros like `like` when r is NULL) and the
 * detached output leave the scope; grad mode is restored. */
static int close_products(int rc, bool prev, ct_tensor *r, const ct_tensor *like, TensorImpl *yt, ct_tensor **output,
                          ct_tensor **result) {
    TensorImpl *out = NULL, *res = NULL;
    if (rc == 0 && !r) r = ct_zeros_like(like);
    if (rc == 0 && (!r || !(res = c10_alias(c10_unwrap(r))))) rc = -1;
    if (rc == 0 && !(out = c10_alias(yt))) rc = -1;
    ct_scope_end();
    ag_set_grad_enabled(prev);
    return finish(rc, out, res, output, result);
}

int ct_vjp(ct_fn f, const ct_tensor *input, const ct_tensor *v, void *ctx, ct_tensor **output, ct_tensor **vjp) {
    if (!f || !output || !vjp) return c10_error_int("vjp: the function and the result pointers must not be NULL");
    *output = *vjp = NULL;
    TensorImpl *vt = NULL;
    if (!c10_unwrap(input) || (v && !(vt = c10_unwrap(v)))) return -1;
    bool prev = ag_set_grad_enabled(true);
    ct_scope_begin();
    TensorImpl *out = NULL, *res = NULL;
    ct_tensor *x = grad_input(input, "vjp"), *y = NULL;
    int rc = x ? run(f, ctx, x, &y, "vjp") : -1;
    TensorImpl *yt = rc == 0 ? c10_unwrap(y) : NULL;
    if (rc == 0 && !v && yt->numel != 1)
        rc = c10_error_int("The vector v can only be None if the user-provided function returns a single Tensor "
                           "with a single element.");
    if (rc == 0 && v && !same_shape(vt, yt))
        rc = c10_error_int("v has invalid size: should be torch.Size(%s) but got torch.Size(%s).",
                           c10_shape_str(yt->sizes, yt->ndim), c10_shape_str(vt->sizes, vt->ndim));
    if (rc == 0) {
        ct_tensor *g = NULL;
        if (ag_requires_grad(yt)) {
            const ct_tensor *yo = y;
            if (ct_autograd_grad(&yo, v ? &v : NULL, 1, (const ct_tensor *const *)&x, 1, &g, false, false, true) < 0)
                rc = -1;
        }
        if (rc == 0 && !g) g = ct_zeros_like(input);
        if (rc == 0 && !(res = c10_alias(c10_unwrap(g)))) rc = -1;
        if (rc == 0 && !(out = c10_alias(yt))) rc = -1; /* detached */
    }
    ct_scope_end();
    ag_set_grad_enabled(prev);
    return finish(rc, out, res, output, vjp);
}

int ct_jvp(ct_fn f, const ct_tensor *input, const ct_tensor *v, void *ctx, ct_tensor **output, ct_tensor **jvp) {
    if (!f || !output || !jvp) return c10_error_int("jvp: the function and the result pointers must not be NULL");
    *output = *jvp = NULL;
    TensorImpl *xt = c10_unwrap(input), *vt = NULL;
    if (!xt || (v && !(vt = c10_unwrap(v)))) return -1;
    if (check_v(xt, vt) < 0) return -1;
    bool prev = ag_set_grad_enabled(true);
    ct_scope_begin();
    ct_tensor *x = grad_input(input, "jvp"), *y = NULL, *r = NULL;
    int rc = x ? run(f, ctx, x, &y, "jvp") : -1;
    TensorImpl *yt = rc == 0 ? c10_unwrap(y) : NULL;
    if (rc == 0 && ag_requires_grad(yt)) {
        /* u: a dummy grad_output; g = J^T u is linear in u, and d(g . v)/du = J v */
        ct_tensor *u = ct_zeros_like(y), *g = NULL;
        const ct_tensor *yo = y, *uo = u;
        if (!u || ct_set_requires_grad(u, true) < 0 ||
            ct_autograd_grad(&yo, &uo, 1, (const ct_tensor *const *)&x, 1, &g, true, true, true) < 0 ||
            grad_dot_v(g, v, x, u, &r) < 0)
            rc = -1;
    }
    return close_products(rc, prev, r, y, yt, output, jvp);
}

int ct_hvp(ct_fn f, const ct_tensor *input, const ct_tensor *v, void *ctx, ct_tensor **output, ct_tensor **hvp) {
    if (!f || !output || !hvp) return c10_error_int("hvp: the function and the result pointers must not be NULL");
    *output = *hvp = NULL;
    TensorImpl *xt = c10_unwrap(input), *vt = NULL;
    if (!xt || (v && !(vt = c10_unwrap(v)))) return -1;
    if (check_v(xt, vt) < 0) return -1;
    bool prev = ag_set_grad_enabled(true);
    ct_scope_begin();
    ct_tensor *x = grad_input(input, "hvp"), *y = NULL, *r = NULL;
    int rc = x ? run(f, ctx, x, &y, "hvp") : -1;
    TensorImpl *yt = rc == 0 ? c10_unwrap(y) : NULL;
    if (rc == 0 && yt->numel != 1)
        rc = c10_error_int("The Tensor returned by the function given to hvp should contain a single element");
    if (rc == 0 && ag_requires_grad(yt)) {
        ct_tensor *g = NULL;
        const ct_tensor *yo = y;
        if (ct_autograd_grad(&yo, NULL, 1, (const ct_tensor *const *)&x, 1, &g, true, true, true) < 0 ||
            grad_dot_v(g, v, x, x, &r) < 0)
            rc = -1;
    }
    return close_products(rc, prev, r, x, yt, output, hvp);
}
