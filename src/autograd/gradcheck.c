/* gradcheck.c: torch.autograd.gradcheck and gradgradcheck as library functions.
 *
 * The numerical Jacobian comes from central differences: every element of every
 * input that requires grad is set to x + eps and x - eps in place (straight into
 * its storage, so that no version counter moves), the function is evaluated
 * with grad mode off, and (f(x+eps) - f(x-eps)) / (2 eps) fills one row. The
 * analytical Jacobian comes from backward: one autograd.grad per output element
 * with a one-hot grad_output (a vector-Jacobian product with a unit vector)
 * fills one column. Every element is compared, as torch's slow mode does:
 * |analytical - numerical| <= atol + rtol * |numerical|.
 *
 * gradgradcheck is gradcheck of the function (inputs, v) -> autograd.grad(
 * f(inputs), inputs, v, create_graph=True), with random grad_outputs v. */
#include "autograd/autograd.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define GC_MAX 64 /* inputs and outputs of the checked function */

typedef struct {
    const char *what;    /* "gradcheck" / "gradgradcheck" */
    int nuser;           /* gradgradcheck: inputs past this one are grad_outputs */
} Names;

/* "input 1" or, for gradgradcheck's extra inputs, "grad_output 0" */
static const char *in_name(const Names *nm, int i, char *buf, size_t cap) {
    if (i < nm->nuser) snprintf(buf, cap, "input %d", i);
    else snprintf(buf, cap, "grad_output %d", i - nm->nuser);
    return buf;
}

/* One evaluation in its own scope, values copied out as doubles. */
typedef struct {
    ct_fn_multi f;
    void *ctx;
    const ct_tensor *const *inputs;
    int n;
    int nout;
    int64_t numel[GC_MAX], off[GC_MAX]; /* per output: elements, offset into the flat vector */
    bool floating[GC_MAX];
    int64_t total;
} Eval;

static int eval_outputs(Eval *e, ct_tensor **outs) {
    int m = e->f(e->inputs, e->n, outs, GC_MAX, e->ctx);
    if (m < 0) return c10_has_error() ? -1 : c10_error_int("gradcheck: the function failed");
    if (m > GC_MAX) return c10_error_int("gradcheck: at most %d outputs are supported", GC_MAX);
    for (int o = 0; o < m; o++)
        if (!c10_unwrap(outs[o])) return -1;
    return m;
}

/* Evaluates with grad mode off into vals (e->total doubles). The first call
 * (vals NULL) records the outputs' layout. */
static int eval_values(Eval *e, double *vals) {
    bool prev = ag_set_grad_enabled(false);
    ct_scope_begin();
    ct_tensor *outs[GC_MAX];
    int rc = 0, m = eval_outputs(e, outs);
    if (m < 0) rc = -1;
    else if (!vals) {
        e->nout = m;
        e->total = 0;
        for (int o = 0; o < m; o++) {
            TensorImpl *t = c10_unwrap(outs[o]);
            e->numel[o] = t->numel;
            e->off[o] = e->total;
            e->floating[o] = c10_is_float(t->dtype);
            e->total += t->numel;
            if (t->device != CT_CPU) rc = c10_error_int("gradcheck: outputs must be on the CPU");
        }
    } else if (m != e->nout) {
        rc = c10_error_int("gradcheck: the function returned %d outputs, then %d", e->nout, m);
    } else {
        for (int o = 0; o < m && rc == 0; o++) {
            TensorImpl *t = c10_unwrap(outs[o]);
            if (t->numel != e->numel[o]) rc = c10_error_int("gradcheck: output %d changed size between calls", o);
            else if (e->floating[o] && ct_copy_to_buffer(outs[o], vals + e->off[o], CT_FLOAT64) < 0) rc = -1;
        }
    }
    ct_scope_end();
    ag_set_grad_enabled(prev);
    return rc;
}

static bool close_enough(double a, double n, double atol, double rtol) {
    return fabs(a - n) <= atol + rtol * fabs(n);
}

/* The check proper: 1 pass, 0 mismatch, -1 error. */
static int check(Eval *e, const Names *nm, double eps, double atol, double rtol) {
    if (eps <= 0) eps = 1e-6;
    if (atol < 0) atol = 1e-5;
    if (rtol < 0) rtol = 1e-3;
    const char *what = nm->what;
    if (e->n < 0 || e->n > GC_MAX) return c10_error_int("%s: between 0 and %d inputs are supported", what, GC_MAX);
    TensorImpl *in[GC_MAX];
    if (e->n && (!e->inputs || !api_unwrap(e->inputs, in, e->n))) return e->inputs ? -1 : c10_error_int("%s: inputs is NULL", what);
    int di[GC_MAX], nd = 0; /* the inputs that require grad */
    for (int i = 0; i < e->n; i++) {
        if (!ag_requires_grad(in[i])) continue;
        TensorImpl *t = in[i];
        if (t->device != CT_CPU) return c10_error_int("%s: input %d is not on the CPU", what, i);
        if (c10_has_internal_overlap(t))
            return c10_error_int("The %dth input has a dimension with stride 0. gradcheck only supports inputs that "
                                 "are non-overlapping to be able to compute the numerical gradients correctly. You "
                                 "should call .contiguous on the input before passing it to gradcheck.", i);
        di[nd++] = i;
    }
    if (nd == 0)
        return c10_error_int("gradcheck expects at least one input tensor to require gradient, but none of the them "
                             "have requires_grad=True.");
    if (eval_values(e, NULL) < 0) return -1;
    int64_t total = e->total;
    int64_t in_total = 0;
    for (int a = 0; a < nd; a++) in_total += in[di[a]]->numel;
    if ((double)in_total * (double)total > 5e7)
        return c10_error_int("%s: the Jacobian has too many elements (%lld x %lld)", what, (long long)in_total,
                             (long long)total);
    /* num[a][j * total + k]: d out_k / d in_j for diff input a; ana likewise */
    size_t cells = (size_t)(in_total * total);
    double *num = calloc(cells ? cells : 1, sizeof *num), *ana = calloc(cells ? cells : 1, sizeof *ana);
    double *plus = malloc(sizeof(double) * (size_t)(total ? total : 1));
    double *minus = malloc(sizeof(double) * (size_t)(total ? total : 1));
    double *row = NULL;
    int64_t base[GC_MAX];
    int rc = 0;
    if (!num || !ana || !plus || !minus) rc = c10_error_int("out of memory");
    for (int a = 0, acc = 0; a < nd; a++) base[a] = acc, acc += (int)in[di[a]]->numel;

    /* ---- numerical ---- */
    for (int a = 0; a < nd && rc == 0; a++) {
        TensorImpl *t = in[di[a]];
        char *data = c10_data(t);
        for (int64_t j = 0; j < t->numel && rc == 0; j++) {
            char *p = data + c10_linear_offset(t, j);
            double x = c10_load_double(p, t->dtype);
            c10_store_double(p, t->dtype, x + eps);
            double xp = c10_load_double(p, t->dtype);
            rc = eval_values(e, plus);
            c10_store_double(p, t->dtype, x - eps);
            double xm = c10_load_double(p, t->dtype);
            if (rc == 0) rc = eval_values(e, minus);
            c10_store_double(p, t->dtype, x);
            double *r = num + (size_t)((base[a] + j) * total);
            for (int64_t k = 0; k < total && rc == 0; k++) r[k] = (plus[k] - minus[k]) / (xp - xm);
        }
    }

    /* ---- analytical ---- */
    bool prev = ag_set_grad_enabled(true);
    ct_scope_begin();
    ct_tensor *outs[GC_MAX];
    int m = rc == 0 ? eval_outputs(e, outs) : -1;
    if (m < 0) rc = -1;
    else if (m != e->nout) rc = c10_error_int("%s: the function returned %d outputs, then %d", what, e->nout, m);
    const ct_tensor *xs[GC_MAX];
    for (int a = 0; a < nd; a++) xs[a] = e->inputs[di[a]];
    int64_t max_in = 0;
    for (int a = 0; a < nd; a++) max_in = in[di[a]]->numel > max_in ? in[di[a]]->numel : max_in;
    if (rc == 0 && !(row = malloc(sizeof(double) * (size_t)(max_in ? max_in : 1)))) rc = c10_error_int("out of memory");
    bool diff[GC_MAX] = {0}; /* torch's differentiable outputs: those requiring grad */
    int ndiff = 0;
    for (int o = 0; o < m && rc == 0; o++) {
        TensorImpl *y = c10_unwrap(outs[o]);
        if (!e->floating[o] || !ag_requires_grad(y)) continue; /* not compared */
        diff[o] = true, ndiff++;
        for (int64_t k = 0; k < y->numel && rc == 0; k++) {
            ct_scope_begin();
            TensorImpl *u = c10_full(y->sizes, y->ndim, 0, y->dtype, CT_CPU);
            if (u) c10_store_double(c10_data(u) + k * (int64_t)c10_elsize[u->dtype], u->dtype, 1.0);
            ct_tensor *uh = c10_wrap(u);
            ct_tensor *res[GC_MAX];
            const ct_tensor *yo = outs[o];
            if (!uh || ct_autograd_grad(&yo, (const ct_tensor *const *)&uh, 1, xs, nd, res, true, false, true) < 0)
                rc = -1;
            for (int a = 0; a < nd && rc == 0; a++) {
                if (!res[a]) continue;
                TensorImpl *g = c10_unwrap(res[a]), *x = in[di[a]];
                char nbuf[48];
                bool same = g->ndim == x->ndim;
                for (int d = 0; same && d < x->ndim; d++) same = g->sizes[d] == x->sizes[d];
                if (!same) {
                    rc = c10_error_int("%s: the gradient of %s has shape %s, expected %s", what,
                                       in_name(nm, di[a], nbuf, sizeof nbuf), c10_shape_str(g->sizes, g->ndim),
                                       c10_shape_str(x->sizes, x->ndim));
                } else if (g->dtype != x->dtype) {
                    rc = c10_error_int("%s: Gradient has dtype mismatch: the gradient of %s is %s, the input %s", what,
                                       in_name(nm, di[a], nbuf, sizeof nbuf), c10_dtype_names[g->dtype],
                                       c10_dtype_names[x->dtype]);
                } else if (ct_copy_to_buffer(res[a], row, CT_FLOAT64) < 0) {
                    rc = -1;
                } else {
                    for (int64_t j = 0; j < x->numel; j++) ana[(size_t)((base[a] + j) * total + e->off[o] + k)] = row[j];
                }
            }
            ct_scope_end();
        }
    }
    ct_scope_end();
    ag_set_grad_enabled(prev);

    /* ---- compare ---- (no differentiable output: the numerical Jacobian must be 0) */
    for (int64_t j = 0; j < in_total && rc == 0 && !ndiff; j++) /* num's row j: d outputs / d input element j */
        for (int o = 0; o < e->nout && rc == 0; o++)
            for (int64_t k = 0; k < e->numel[o] && e->floating[o] && rc == 0; k++)
                if (num[(size_t)(j * total + e->off[o] + k)] != 0)
                    rc = 1, c10_error("%s: Numerical gradient for function expected to be zero", what);
    for (int o = 0; o < e->nout && rc == 0; o++) {
        if (!diff[o]) continue;
        for (int a = 0; a < nd && rc == 0; a++) {
            for (int64_t j = 0; j < in[di[a]]->numel && rc == 0; j++) {
                for (int64_t k = 0; k < e->numel[o]; k++) {
                    size_t c = (size_t)((base[a] + j) * total + e->off[o] + k);
                    if (close_enough(ana[c], num[c], atol, rtol)) continue;
                    char nbuf[48];
                    c10_error("%s: Jacobian mismatch for output %d with respect to %s, at input element %lld and "
                              "output element %lld: numerical %.10g vs analytical %.10g (atol %g, rtol %g)",
                              what, o, in_name(nm, di[a], nbuf, sizeof nbuf), (long long)j, (long long)k, num[c],
                              ana[c], atol, rtol);
                    rc = 1; /* mismatch */
                    break;
                }
            }
        }
    }
    free(num);
    free(ana);
    free(plus);
    free(minus);
    free(row);
    return rc < 0 ? -1 : rc == 1 ? 0 : 1;
}

int ct_gradcheck_multi(ct_fn_multi f, const ct_tensor *const *inputs, int n, void *ctx, double eps, double atol,
                       double rtol) {
    if (!f) return c10_error_int("gradcheck: the function is NULL");
    Eval e = {.f = f, .ctx = ctx, .inputs = inputs, .n = n};
    Names nm = {"gradcheck", n};
    return check(&e, &nm, eps, atol, rtol);
}

typedef struct {
    ct_fn f;
    void *ctx;
} One;

static int one_output(const ct_tensor *const *inputs, int n, ct_tensor **outputs, int cap, void *p) {
    One *one = p;
    (void)cap;
    outputs[0] = one->f(inputs, n, one->ctx);
    return outputs[0] ? 1 : -1;
}

int ct_gradcheck(ct_fn f, const ct_tensor *const *inputs, int n, void *ctx, double eps, double atol, double rtol) {
    if (!f) return c10_error_int("gradcheck: the function is NULL");
    One one = {f, ctx};
    return ct_gradcheck_multi(one_output, inputs, n, &one, eps, atol, rtol);
}

/* ------------------------------------------------------------ gradgradcheck */

typedef struct {
    ct_fn_multi f;
    void *ctx;
    int n;       /* the user's inputs; then one grad_output per output */
    int nout;
} GradOfF;

/* (inputs, v) -> the gradients of sum(f(inputs) . v) wrt the inputs that require
 * grad, with create_graph; unused inputs are dropped, as torch does. */
static int grad_of_f(const ct_tensor *const *in, int total, ct_tensor **outputs, int cap, void *p) {
    GradOfF *g = p;
    (void)total;
    bool prev = ag_set_grad_enabled(true);
    int count = -1;
    ct_tensor *ys[GC_MAX];
    int m = g->f(in, g->n, ys, GC_MAX, g->ctx);
    if (m < 0) {
        if (!c10_has_error()) c10_error("gradgradcheck: the function failed");
    } else if (m != g->nout) {
        c10_error("gradgradcheck: the function returned %d outputs, then %d", g->nout, m);
    } else {
        const ct_tensor *yo[GC_MAX], *vo[GC_MAX], *xs[GC_MAX];
        int ny = 0, nx = 0, ok = 1;
        for (int o = 0; o < m && ok; o++) {
            TensorImpl *y = c10_unwrap(ys[o]);
            if (!y) ok = 0;
            else if (c10_is_float(y->dtype) && ag_requires_grad(y)) yo[ny] = ys[o], vo[ny++] = in[g->n + o];
        }
        for (int i = 0; i < g->n && ok; i++) {
            TensorImpl *x = c10_unwrap(in[i]);
            if (!x) ok = 0;
            else if (ag_requires_grad(x)) xs[nx++] = in[i];
        }
        ct_tensor *res[GC_MAX];
        if (!ok) {
            count = -1;
        } else if (ny == 0 || nx == 0) {
            count = 0;
        } else if (ct_autograd_grad(yo, vo, ny, xs, nx, res, true, true, true) == 0) {
            count = 0;
            for (int a = 0; a < nx; a++)
                if (res[a] && count < cap) outputs[count++] = res[a];
        }
    }
    ag_set_grad_enabled(prev);
    return count;
}

/* Deterministic grad_outputs in [-1, 1] (splitmix64), so that checks repeat. */
static double next_unit(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
}

int ct_gradgradcheck_multi(ct_fn_multi f, const ct_tensor *const *inputs, int n, void *ctx, double eps, double atol,
                           double rtol) {
    if (!f) return c10_error_int("gradgradcheck: the function is NULL");
    if (n < 0 || n > GC_MAX / 2) return c10_error_int("gradgradcheck: between 0 and %d inputs are supported", GC_MAX / 2);
    TensorImpl *in[GC_MAX];
    if (n && (!inputs || !api_unwrap(inputs, in, n))) return inputs ? -1 : c10_error_int("gradgradcheck: inputs is NULL");
    int rc = 0;
    ct_scope_begin();
    /* the outputs' shapes, for the grad_outputs */
    bool prev = ag_set_grad_enabled(true);
    ct_tensor *ys[GC_MAX];
    int m = f(inputs, n, ys, GC_MAX, ctx);
    ag_set_grad_enabled(prev);
    if (m < 0) rc = c10_has_error() ? -1 : c10_error_int("gradgradcheck: the function failed");
    else if (m > GC_MAX / 2) rc = c10_error_int("gradgradcheck: at most %d outputs are supported", GC_MAX / 2);
    const ct_tensor *all[GC_MAX];
    for (int i = 0; i < n; i++) all[i] = inputs[i];
    uint64_t seed = 0x5eed;
    for (int o = 0; o < m && rc == 0; o++) {
        TensorImpl *y = c10_unwrap(ys[o]);
        if (!y) {
            rc = -1;
            break;
        }
        bool diff = c10_is_float(y->dtype) && ag_requires_grad(y);
        TensorImpl *v = c10_empty(y->sizes, y->ndim, diff ? CT_FLOAT64 : CT_FLOAT32, CT_CPU);
        if (v) {
            double *d = (double *)c10_data(v);
            for (int64_t k = 0; diff && k < v->numel; k++) d[k] = next_unit(&seed);
            if (!diff) c10_fill(v, 0);
        }
        if (v && diff && c10_is_float(y->dtype) && y->dtype != CT_FLOAT64) { /* grad_outputs in the output's dtype */
            TensorImpl *c = at_to_dtype(v, y->dtype);
            c10_release(v);
            v = c;
        }
        ct_tensor *vh = c10_wrap(v);
        if (!vh || (diff && ct_set_requires_grad(vh, true) < 0)) rc = -1;
        all[n + o] = vh;
    }
    if (rc == 0) {
        GradOfF g = {f, ctx, n, m};
        Eval e = {.f = grad_of_f, .ctx = &g, .inputs = all, .n = n + m};
        Names nm = {"gradgradcheck", n};
        rc = check(&e, &nm, eps, atol, rtol);
    }
    ct_scope_end();
    return rc;
}

int ct_gradgradcheck(ct_fn f, const ct_tensor *const *inputs, int n, void *ctx, double eps, double atol,
                     double rtol) {
    if (!f) return c10_error_int("gradgradcheck: the function is NULL");
    One one = {f, ctx};
    return ct_gradgradcheck_multi(one_output, inputs, n, &one, eps, atol, rtol);
}
