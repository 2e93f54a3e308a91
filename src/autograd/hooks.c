/* hooks.c: tensor hooks and anomaly mode. */
#include "autograd/autograd.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct Hook {
    ct_tensor *(*fn)(const ct_tensor *grad, void *ctx);
    void *ctx;
    Hook *next;
};

void ag_hooks_free(Hook *h) {
    while (h) {
        Hook *n = h->next;
        free(h);
        h = n;
    }
}

/* torch's check_variable_result: a replacement keeps the gradient's type and size. */
COLD_CODE static int check_hook_result(const TensorImpl *was, const TensorImpl *got) {
    if (was->dtype != got->dtype || was->device != got->device)
        return c10_error_int("hook has changed the type of value (was %s got %s)", c10_dtype_legacy_name(was->dtype),
                             c10_dtype_legacy_name(got->dtype));
    if (was->ndim != got->ndim || memcmp(was->sizes, got->sizes, sizeof(int64_t) * (size_t)was->ndim))
        return c10_error_int("hook has changed the size of value (was %s got %s)", c10_shape_str(was->sizes, was->ndim),
                             c10_shape_str(got->sizes, got->ndim));
    return 0;
}

/* Runs the hooks in registration order; each may return a replacement of the
 * same type and size. Returns a new reference to the final gradient (NULL with
 * the error on failure). */
TensorImpl *ag_run_hooks(Hook *h, TensorImpl *grad) {
    TensorImpl *g = c10_retain(grad);
    for (; h && g; h = h->next) {
        ct_scope_begin();
        ct_tensor *in = c10_wrap(c10_retain(g));
        ct_tensor *r = h->fn(in, h->ctx);
        TensorImpl *rt = r ? c10_unwrap(r) : NULL;
        if (rt) { /* a refused replacement ends the run with its error */
            TensorImpl *next = check_hook_result(g, rt) < 0 ? NULL : c10_retain(rt);
            c10_release(g);
            g = next;
        }
        ct_scope_end();
    }
    return g;
}

int ct_register_hook(ct_tensor *h, ct_tensor *(*fn)(const ct_tensor *grad, void *ctx), void *ctx) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    if (!fn) return c10_error_int("register_hook: fn is NULL");
    if (!ag_requires_grad(t))
        return c10_error_int("cannot register a hook on a tensor that doesn't require gradient");
    Hook *k = calloc(1, sizeof *k);
    if (!k) return c10_error_int("out of memory");
    k->fn = fn;
    k->ctx = ctx;
    AutogradMeta *m = t->autograd;
    Hook **list = m->grad_fn ? &m->grad_fn->pre_hooks[m->output_nr] : &m->hooks;
    while (*list) list = &(*list)->next;
    *list = k;
    return 0;
}

/* ---- anomaly mode: name the forward op whose backward produced NaN ---- */
bool ag_anomaly; /* read by the engine before it calls ag_anomaly_check */
bool ct_set_detect_anomaly(bool on) {
    bool prev = ag_anomaly;
    ag_anomaly = on;
    return prev;
}

static bool has_nan(const TensorImpl *t) {
    if (!c10_is_float(t->dtype) || t->device == CT_META) return false;
    for (int64_t i = 0; i < t->numel; i++)
        if (isnan(c10_get(t, i))) return true;
    return false;
}

int ag_anomaly_check(Node *n, TensorImpl **gi) {
    for (int k = 0; k < n->num_next; k++)
        if (gi[k] && has_nan(gi[k]))
            return c10_error_int("Function '%s' returned nan values in its %dth output.", n->name, k);
    return 0;
}
