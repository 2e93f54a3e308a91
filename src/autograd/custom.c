/* custom.c: custom autograd functions written in C (torch.autograd.Function).
 *
 * ct_function_apply runs the user's forward with grad mode off, then (when grad
 * mode is on and an input requires grad) gives the outputs one NODE_CUSTOM node
 * named "<name>Backward" with an edge to each input. The context (struct
 * CustomFn, which the public API calls ct_ctx) lives as long as the node.
 *
 * Saved tensors are SavedVariables kept in the node's own slots (its
 * CUSTOM_MAX_SAVED saved[] entries), so the engine frees them after backward unless
 * retain_graph, and ag_unpack checks their versions. A saved tensor that is an
 * output of the function is saved as an output (a bare alias: no cycle
 * tensor -> node -> tensor); unpacked under create_graph it gets the node back
 * as its history, exactly as built-in ops' saved results do.
 *
 * Backward (ag_custom_apply, called by the engine) runs the user's callback in
 * a ct scope with grad mode = create_graph (the engine set it), then shapes
 * each returned gradient as PyTorch's validate_outputs does: sum_to_size when
 * the input's shape expands to it, conversion to the input's dtype. */
#include "autograd/autograd.h"
#include <stdio.h>
#include <stdlib.h>

#define CUSTOM_MAX_SAVED (OP_MAX_TENSORS + OP_MAX_OUTS)

struct CustomFn {
    ct_function fn;
    char *name;                       /* "<name>Backward": the node's name */
    void *data;
    void (*data_free)(void *);
    Node *node;                       /* weak: the node owns this context */
    int n, nout;
    bool needs[OP_MAX_TENSORS];       /* inputs' requires_grad at forward time */
    bool in_forward, in_backward;
    bool failed;                      /* a saved tensor could not be unpacked */
    /* save_for_backward during forward: strong references until the node exists */
    TensorImpl *pending[CUSTOM_MAX_SAVED];
    bool pending_set[CUSTOM_MAX_SAVED];
    int nsaved;
    int saved_out_nr[CUSTOM_MAX_SAVED]; /* the output it is, or -1 */
    bool saved_null[CUSTOM_MAX_SAVED];
};

static SavedVariable *slot(Node *n, int i) { return &n->saved[i]; }

static void drop_pending(CustomFn *f) {
    for (int i = 0; i < CUSTOM_MAX_SAVED; i++) {
        c10_release(f->pending[i]);
        f->pending[i] = NULL;
    }
}

void ag_custom_free(CustomFn *f) {
    if (!f) return;
    drop_pending(f);
    if (f->data_free) f->data_free(f->data);
    free(f->name);
    free(f);
}

/* ------------------------------------------------------------ the context */

static CustomFn *ctx_of(const ct_ctx *ctx) { return (CustomFn *)ctx; }

int ct_ctx_save_for_backward(ct_ctx *ctx, const ct_tensor *const *tensors, int n) {
    CustomFn *f = ctx_of(ctx);
    if (!f) return c10_error_int("save_for_backward: ctx is NULL");
    if (!f->in_forward) return c10_error_int("save_for_backward can only be called from forward");
    if (n < 0 || n > CUSTOM_MAX_SAVED)
        return c10_error_int("save_for_backward: at most %d tensors can be saved (got %d)", CUSTOM_MAX_SAVED, n);
    if (n && !tensors) return c10_error_int("save_for_backward: tensors is NULL");
    TensorImpl *t[CUSTOM_MAX_SAVED] = {0};
    for (int i = 0; i < n; i++) /* NULL entries are None, as in PyTorch */
        if (tensors[i] && !(t[i] = c10_unwrap(tensors[i]))) return -1;
    drop_pending(f); /* a second call replaces the first, as in PyTorch */
    for (int i = 0; i < n; i++) {
        f->pending[i] = c10_retain(t[i]);
        f->pending_set[i] = true;
    }
    f->nsaved = n;
    return 0;
}

int ct_ctx_num_saved(const ct_ctx *ctx) {
    CustomFn *f = ctx_of(ctx);
    return f ? f->nsaved : c10_error_int("saved_tensors: ctx is NULL");
}

ct_tensor *ct_ctx_saved(ct_ctx *ctx, int i) {
    CustomFn *f = ctx_of(ctx);
    if (!f) return c10_error("saved_tensors: ctx is NULL");
    if (i < 0 || i >= f->nsaved)
        return c10_error("saved_tensors: index %d is out of range (%d tensors were saved)", i, f->nsaved);
    if (f->saved_null[i]) return NULL;
    if (!f->node) {
        if (f->in_forward) return c10_error("saved_tensors: saved tensors are available in backward only");
        return c10_error("saved_tensors: the function was applied without recording a graph");
    }
    TensorImpl *t = ag_unpack(f->node, slot(f->node, i), f->saved_out_nr[i] >= 0 ? f->saved_out_nr[i] : 0);
    if (!t) {
        f->failed = true;
        return NULL;
    }
    return c10_wrap(t);
}

bool ct_ctx_needs_input_grad(const ct_ctx *ctx, int i) {
    CustomFn *f = ctx_of(ctx);
    if (!f || i < 0 || i >= f->n) return false;
    return f->needs[i]; /* fixed at apply, as torch's (a pass that wants fewer drops the rest) */
}

void ct_ctx_set_data(ct_ctx *ctx, void *data, void (*free_fn)(void *)) {
    CustomFn *f = ctx_of(ctx);
    if (!f) return;
    if (f->data_free && f->data != data) f->data_free(f->data);
    f->data = data;
    f->data_free = free_fn;
}

void *ct_ctx_get_data(const ct_ctx *ctx) {
    CustomFn *f = ctx_of(ctx);
    return f ? f->data : NULL;
}

/* ------------------------------------------------------------------ apply */

int ct_function_apply(const ct_function *fn, const ct_tensor *const *inputs, int n, ct_tensor **outputs, int nout) {
    if (!fn || !fn->forward || !fn->backward)
        return c10_error_int("function apply: the function needs forward and backward callbacks");
    const char *fname = fn->name ? fn->name : "Custom";
    if (n < 0 || n > OP_MAX_TENSORS)
        return c10_error_int("%s.apply: between 0 and %d inputs are supported (got %d)", fname, OP_MAX_TENSORS, n);
    if (nout < 1 || nout > OP_MAX_OUTS)
        return c10_error_int("%s.apply: between 1 and %d outputs are supported (got %d)", fname, OP_MAX_OUTS, nout);
    if (!outputs) return c10_error_int("%s.apply: outputs is NULL", fname);
    for (int j = 0; j < nout; j++) outputs[j] = NULL;
    TensorImpl *in[OP_MAX_TENSORS] = {0};
    if (n && (!inputs || !api_unwrap(inputs, in, n))) return inputs ? -1 : c10_error_int("%s.apply: inputs is NULL", fname);

    CustomFn *f = calloc(1, sizeof *f);
    size_t len = strlen(fname) + sizeof "Backward";
    char *name = malloc(len);
    if (!f || !name) {
        free(f);
        free(name);
        return c10_error_int("out of memory");
    }
    snprintf(name, len, "%sBackward", fname);
    f->fn = *fn;
    f->name = name;
    f->data = fn->data;
    f->n = n;
    f->nout = nout;
    bool any = false;
    for (int k = 0; k < n; k++) any |= (f->needs[k] = ag_requires_grad(in[k]));
    any = any && ag_grad_enabled();

    /* forward: grad mode off, in its own scope */
    TensorImpl *orig[OP_MAX_OUTS] = {0}, *out[OP_MAX_OUTS] = {0};
    ct_tensor *oh[OP_MAX_OUTS] = {0};
    bool prev = ag_set_grad_enabled(false);
    f->in_forward = true;
    ct_scope_begin();
    int rc = fn->forward((ct_ctx *)f, inputs, n, oh, nout);
    if (rc == 0) {
        for (int j = 0; j < nout && rc == 0; j++) {
            if (!oh[j]) rc = c10_has_error() ? -1 : c10_error_int("%s.forward returned no tensor for output %d", fname, j);
            else if (!(orig[j] = c10_retain(c10_unwrap(oh[j])))) rc = -1;
        }
    } else if (!c10_has_error()) {
        c10_error("%s.forward failed", fname);
    }
    ct_scope_end();
    f->in_forward = false;
    ag_set_grad_enabled(prev);
    if (rc != 0) {
        for (int j = 0; j < nout; j++) c10_release(orig[j]);
        ag_custom_free(f);
        return -1;
    }

    /* outputs that are inputs, repeated, or already have autograd state become
     * fresh aliases, so that setting their history touches nothing else */
    for (int j = 0; j < nout; j++) {
        TensorImpl *o = orig[j];
        bool alias = o->autograd != NULL;
        for (int k = 0; k < n && !alias; k++) alias = in[k] == o;
        for (int i = 0; i < j && !alias; i++) alias = orig[i] == o;
        out[j] = alias ? c10_alias(o) : c10_retain(o);
        if (!out[j]) rc = -1;
    }

    if (rc == 0 && any) {
        int words = 0;
        for (int k = 0; k < n; k++) words += 2 * in[k]->ndim;
        for (int j = 0; j < nout; j++) words += 2 * out[j]->ndim;
        Node *node = ag_node_new(NODE_CUSTOM, f->name, nout, n, CUSTOM_MAX_SAVED, words);
        if (!node) rc = -1;
        else {
            node->custom = f;
            f->node = node;
            for (int k = 0; k < n; k++) {
                node->next[k] = ag_gradient_edge(in[k]);
                ag_input_meta(node, &node->in_meta[k], in[k]);
            }
            bool diff[OP_MAX_OUTS];
            for (int j = 0; j < nout; j++) {
                ag_input_meta(node, &node->out_meta[j], out[j]);
                diff[j] = c10_is_float(out[j]->dtype);
            }
            for (int i = 0; i < f->nsaved; i++) {
                f->saved_out_nr[i] = -1;
                TensorImpl *t = f->pending[i];
                if (!t) {
                    f->saved_null[i] = true;
                    continue;
                }
                int j = 0;
                while (j < nout && !(orig[j] == t && diff[j])) j++;
                if (j < nout) {
                    f->saved_out_nr[i] = j;
                    ag_save(slot(node, i), out[j], true);
                } else {
                    ag_save(slot(node, i), t, false);
                }
            }
            drop_pending(f);
            for (int j = 0; j < nout; j++)
                if (diff[j]) ag_set_history(out[j], node, j);
            f = NULL;                /* the node owns it now */
            ag_node_release(node);   /* the outputs hold the node */
        }
    }
    ag_custom_free(f);
    for (int j = 0; j < nout; j++) c10_release(orig[j]);
    if (rc != 0) {
        for (int j = 0; j < nout; j++) c10_release(out[j]);
        return -1;
    }
    for (int j = 0; j < nout; j++) outputs[j] = c10_wrap(out[j]);
    return 0;
}

/* ---------------------------------------------------------------- backward */

/* Can a tensor of shape `in` be expanded to `g`? (PyTorch's is_expandable_to) */
static bool expandable_to(const int64_t *in, int nin, const int64_t *g, int ng) {
    if (nin > ng) return false;
    for (int i = 0; i < nin; i++) {
        int64_t a = in[nin - 1 - i], b = g[ng - 1 - i];
        if (a != b && a != 1) return false;
    }
    return true;
}

static TensorImpl *validate_grad(Node *node, int k, TensorImpl *g) {
    const InputMeta *m = &node->in_meta[k];
    bool same = g->ndim == m->ndim;
    for (int d = 0; same && d < m->ndim; d++) same = g->sizes[d] == m->sizes[d];
    TensorImpl *r;
    if (same) r = c10_retain(g);
    else if (expandable_to(m->sizes, m->ndim, g->sizes, g->ndim)) r = ag_sum_to_size(g, m->sizes, m->ndim);
    else
        return c10_error("Function %s returned an invalid gradient at index %d - got %s but expected shape compatible "
                         "with %s", node->name, k, c10_shape_str(g->sizes, g->ndim), c10_shape_str(m->sizes, m->ndim));
    if (r && r->dtype != m->dtype) { /* grad.to(input's dtype), as validate_outputs does */
        TensorImpl *c = ag_to_dtype(r, m->dtype);
        c10_release(r);
        r = c;
    }
    return r;
}

int ag_custom_apply(Node *n, TensorImpl **go, TensorImpl **gi) {
    CustomFn *f = n->custom;
    if (!f) return c10_error_int("internal: custom node %s has no function", n->name);
    int rc = 0;
    TensorImpl *g[OP_MAX_OUTS] = {0};
    for (int j = 0; j < n->num_inputs && rc == 0; j++) { /* materialize_grads: zeros for unused outputs */
        if (go[j]) g[j] = c10_retain(go[j]);
        else if (!(g[j] = c10_full(n->out_meta[j].sizes, n->out_meta[j].ndim, 0, n->out_meta[j].dtype,
                                   n->out_meta[j].device)))
            rc = -1;
    }
    if (rc < 0) {
        for (int j = 0; j < OP_MAX_OUTS; j++) c10_release(g[j]);
        return -1;
    }
    ct_scope_begin();
    ct_tensor *gh[OP_MAX_OUTS] = {0}, *res[OP_MAX_TENSORS] = {0};
    for (int j = 0; j < n->num_inputs; j++) gh[j] = c10_wrap(g[j]); /* the handles own g[j] now */
    bool was_in = f->in_backward, was_failed = f->failed;
    f->in_backward = true;
    f->failed = false;
    rc = f->fn.backward((ct_ctx *)f, (const ct_tensor *const *)gh, n->num_inputs, res, n->num_next);
    if (rc == 0 && f->failed) rc = -1; /* a saved tensor was freed or modified in place */
    if (rc != 0 && !c10_has_error()) c10_error("Function %s: backward failed", n->name);
    f->in_backward = was_in;
    f->failed = was_failed;
    for (int k = 0; k < n->num_next; k++) {
        gi[k] = NULL;
        if (rc != 0 || !res[k] || !n->next[k].fn) continue;
        TensorImpl *t = c10_unwrap(res[k]);
        if (!t || !(gi[k] = validate_grad(n, k, t))) rc = -1;
    }
    ct_scope_end();
    if (rc != 0)
        for (int k = 0; k < n->num_next; k++) {
            c10_release(gi[k]);
            gi[k] = NULL;
        }
    return rc == 0 ? 0 : -1;
}

