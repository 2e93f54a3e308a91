/* engine.c: the backward engine, as PyTorch's torch/csrc/autograd/engine.cpp.
 *
 *   1. The roots' gradients go into the input buffers of the roots' grad_fns
 *      (the GraphRoot's job).
 *   2. compute_dependencies: a walk from the roots counts, for every node, how
 *      many edges point at it.
 *   3. A ready queue ordered by sequence number, latest first (AccumulateGrad
 *      first of all), runs each node once its count reaches zero: its input
 *      buffer then holds the sum of every gradient that reached it (the `a + a`
 *      case), it calls the node's backward, and hands each result to the next
 *      node's buffer.
 *   4. Without retain_graph, each node's saved tensors are freed once it ran.
 * With inputs (autograd.grad), the gradients reaching the inputs' edges are
 * captured instead of accumulated into .grad, and only nodes on a path to an
 * input run. */
#include "autograd/autograd.h"
#include <stdlib.h>

/* Hooks are in hooks.c. */
CT_INTERNAL TensorImpl *ag_run_hooks(Hook *h, TensorImpl *grad);
CT_INTERNAL int ag_custom_apply(Node *n, TensorImpl **go, TensorImpl **gi);

static atomic_uint_fast64_t task_counter = 1;

typedef struct {
    Node **v;
    int64_t n, cap;
} NodeVec;

static bool push(NodeVec *q, Node *n) {
    if (q->n == q->cap) {
        int64_t cap = q->cap ? 2 * q->cap : 64;
        Node **v = realloc(q->v, (size_t)cap * sizeof *v);
        if (!v) return false;
        q->v = v;
        q->cap = cap;
    }
    q->v[q->n++] = n;
    return true;
}

/* ---- ready queue: a max-heap on sequence number ---- */
static bool before(const Node *a, const Node *b) { return a->seq > b->seq; }

static bool heap_push(NodeVec *h, Node *n) {
    if (!push(h, n)) return false;
    for (int64_t i = h->n - 1; i > 0;) {
        int64_t p = (i - 1) / 2;
        if (!before(h->v[i], h->v[p])) break;
        Node *t = h->v[i];
        h->v[i] = h->v[p], h->v[p] = t, i = p;
    }
    return true;
}

static Node *heap_pop(NodeVec *h) {
    Node *top = h->v[0];
    h->v[0] = h->v[--h->n];
    for (int64_t i = 0;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && before(h->v[l], h->v[m])) m = l;
        if (r < h->n && before(h->v[r], h->v[m])) m = r;
        if (m == i) break;
        Node *t = h->v[i];
        h->v[i] = h->v[m], h->v[m] = t, i = m;
    }
    return top;
}

/* ---- the GraphTask ---- */
typedef struct {
    uint64_t id;
    NodeVec all;      /* every node reached */
    NodeVec ready;
    const BackwardOpts *o;
    Edge *captures;   /* autograd.grad: the inputs' edges */
} GraphTask;

static bool visit(GraphTask *g, Node *n) {
    if (n->task == g->id) return true;
    n->task = g->id;
    n->deps = 0;
    n->needed = g->o->ninputs == 0;
    n->capture_only = false;
    for (int k = 0; k < n->num_inputs; k++) n->buffer[k] = NULL;
    return push(&g->all, n);
}

static int compute_dependencies(GraphTask *g, Edge *roots, int nroots) {
    NodeVec stack = {0};
    int rc = 0;
    for (int i = 0; i < nroots && rc == 0; i++) { /* the GraphRoot's edges */
        Node *f = roots[i].fn;
        if (!f) continue;
        bool fresh = f->task != g->id;
        if (!visit(g, f) || (fresh && !push(&stack, f))) rc = -1;
        f->deps++;
    }
    while (stack.n && rc == 0) {
        Node *n = stack.v[--stack.n];
        for (int k = 0; k < n->num_next; k++) {
            Node *f = n->next[k].fn;
            if (!f) continue;
            bool fresh = f->task != g->id;
            if (!visit(g, f)) rc = -1;
            f->deps++;
            if (fresh && !push(&stack, f)) rc = -1;
        }
    }
    free(stack.v);
    return rc ? c10_error_int("backward: out of memory") : 0;
}

/* autograd.grad: a node is needed when it is a capture target or leads to one
 * (torch's exec_info should_execute). g->all is in discovery order; process in
 * reverse topological order by repeated passes over nodes whose successors are
 * settled (graphs are DAGs). A target that leads to no other only takes its
 * input gradient and does not run (torch's needed_ false: its saved tensors
 * are not checked, its hooks not called). */
static void mark_needed(GraphTask *g) {
    for (int i = 0; i < g->o->ninputs; i++)
        if (g->captures[i].fn) g->captures[i].fn->needed = true;
    bool changed = true;
    while (changed) {
        changed = false;
        for (int64_t i = g->all.n - 1; i >= 0; i--) {
            Node *n = g->all.v[i];
            if (n->needed) continue;
            for (int k = 0; k < n->num_next; k++)
                if (n->next[k].fn && n->next[k].fn->needed) {
                    n->needed = changed = true;
                    break;
                }
        }
    }
    for (int i = 0; i < g->o->ninputs; i++) {
        Node *n = g->captures[i].fn;
        if (!n) continue;
        n->capture_only = true;
        for (int k = 0; k < n->num_next; k++) n->capture_only &= !(n->next[k].fn && n->next[k].fn->needed);
    }
}

/* Adds grad (stolen) into n's input buffer slot; the `a + a` sum happens here. */
static int accumulate_input(Node *n, int slot, TensorImpl *grad) {
    if (!grad) return 0;
    TensorImpl *old = n->buffer[slot];
    if (!old) {
        n->buffer[slot] = grad;
        return 0;
    }
    TensorImpl *sum = ag_binary(OP_add, old, grad);
    c10_release(old);
    c10_release(grad);
    n->buffer[slot] = sum;
    return sum ? 0 : -1;
}

static int deliver(GraphTask *g, Edge e, TensorImpl *grad) {
    Node *n = e.fn;
    if (accumulate_input(n, e.input_nr, grad) < 0) return -1;
    if (--n->deps == 0 && !heap_push(&g->ready, n)) return c10_error_int("backward: out of memory");
    return 0;
}

/* ---- applying nodes ---- */

/* A gradient to the shape and dtype of input k it is for (torch's
 * validate_outputs: a gradient the input's shape does not expand to is an error). */
static TensorImpl *shape_gradient(const Node *n, int k, TensorImpl *gi) {
    const InputMeta *m = &n->in_meta[k];
    bool same = gi->ndim == m->ndim, fits = m->ndim <= gi->ndim;
    for (int d = 0; same && d < m->ndim; d++) same = gi->sizes[d] == m->sizes[d];
    for (int d = 1; !same && fits && d <= m->ndim; d++) {
        int64_t a = m->sizes[m->ndim - d];
        fits = a == 1 || a == gi->sizes[gi->ndim - d];
    }
    if (!same && !fits) { /* torch counts the differentiable inputs: absent ones too, no integer one */
        int at = 0;
        for (int j = 0; j < k; j++) at += !n->in_meta[j].defined || c10_is_float(n->in_meta[j].dtype);
        c10_error("Function %s returned an invalid gradient at index %d - got %s but expected shape compatible "
                  "with %s", n->name, at, c10_shape_str(gi->sizes, gi->ndim), c10_shape_str(m->sizes, m->ndim));
        return c10_release(gi), NULL;
    }
    TensorImpl *r = gi;
    if (!same) { /* broadcasting undone: sum to the input's size */
        r = ag_sum_to_size(gi, m->sizes, m->ndim);
        c10_release(gi);
    }
    if (r && r->dtype != m->dtype) {
        TensorImpl *c = ag_to_dtype(r, m->dtype);
        c10_release(r);
        r = c;
    }
    return r;
}

static int apply_op(Node *n, TensorImpl **inputs, TensorImpl **gi, const bool *needs) {
    int mark = ag_frame_begin();
    OpArgs args; /* the forward's arguments; only the used part is written */
    memset(args.t, 0, sizeof args.t);
    args.dst = NULL;
    args.nt = n->num_next;
    args.ni = n->ni;
    memcpy(args.s, n->s, sizeof args.s);
    if (n->ni) memcpy(args.i, n->ints, sizeof(int64_t) * (size_t)n->ni);
    BackwardCtx c = {.node = n, .go = inputs, .args = &args};
    int rc = 0;
    bool any = false;
    for (int k = 0; k < n->num_next; k++) any |= c.needs[k] = needs ? needs[k] : n->next[k].fn && n->next[k].fn->needed;
    if (!any) { /* no gradient wanted (edges to nothing): torch's node computes and checks nothing */
        ag_frame_end(mark);
        return 0;
    }
    for (int k = 0; k < n->num_inputs && rc == 0; k++)
        if (!inputs[k] && n->out_meta[k].defined && !(inputs[k] = ag_zeros_like_meta(&n->out_meta[k])))
            rc = -1;
    if (n->released) /* its saved tensors are gone */
        rc = ag_unpack(n, &n->saved_in[0], 0) ? 0 : -1;
    for (int k = 0; k < n->num_next && rc == 0; k++)
        if (n->saved_in[k].data) { /* inline: the saved input unchanged since the forward */
            SavedVariable *sv = &n->saved_in[k];
            if (!n->released && c10_version(sv->data) == sv->version) c.in[k] = sv->data;
            else if (!(c.in[k] = ag_unpack_input(n, sv, k))) rc = -1;
        }
    for (int k = 0; k < n->num_inputs && rc == 0; k++)
        if (n->saved_out[k].data && !(c.out[k] = F(ag_unpack(n, &n->saved_out[k], k)))) rc = -1;
    if (rc == 0) rc = deriv_info[n->op].backward(&c, gi);
    for (int k = 0; k < n->num_next; k++) {
        if (rc == 0 && gi[k] && c.needs[k]) {
            if (!(gi[k] = shape_gradient(n, k, gi[k]))) rc = -1;
        } else {
            c10_release(gi[k]);
            gi[k] = NULL;
        }
    }
    ag_frame_end(mark);
    return rc;
}

/* A new tensor with m's sizes and strides exactly, gaps too (torch's
 * new_empty_strided): its storage spans the largest offset. */
static TensorImpl *empty_exactly_as(const InputMeta *m) {
    int64_t span = 1; /* the largest offset + 1; none for an empty tensor */
    for (int d = 0; d < m->ndim; d++) span += (m->sizes[d] - 1) * m->strides[d];
    for (int d = 0; d < m->ndim; d++) span = m->sizes[d] ? span : 0;
    TensorImpl *flat = c10_empty(&span, 1, m->dtype, m->device);
    TensorImpl *r = flat ? c10_as_strided(flat, m->sizes, m->strides, m->ndim, 0) : NULL;
    c10_release(flat);
    return r;
}

/* CopySlices (see variable.c): grad is the base's gradient. */
static int apply_copy_slices(Node *n, TensorImpl *grad, TensorImpl **gi) {
    CopySlicesInfo *cs = n->extra;
    int mark = ag_frame_begin(), rc = -1;
    /* a private copy laid out as the base, so that the view's geometry applies */
    const InputMeta *bm = &n->in_meta[0];
    TensorImpl *result = empty_exactly_as(bm);
    if (!result) goto out;
    OpArgs init = {.t = {result, grad}, .nt = 2};
    if (grad ? ag_call_inplace(OP_copy_, &init) < 0 : c10_fill(result, 0) < 0) goto out;
    OpArgs a = {.t = {result}, .nt = 1, .ni = 2 * cs->ndim + 2};
    memcpy(a.i, cs->sizes, sizeof(int64_t) * (size_t)cs->ndim);
    memcpy(a.i + cs->ndim, cs->strides, sizeof(int64_t) * (size_t)cs->ndim);
    a.i[2 * cs->ndim] = cs->ndim;
    a.i[2 * cs->ndim + 1] = cs->offset + result->offset;
    TensorImpl *view = F(ag_call1(OP_as_strided, &a));
    TensorImpl *go[OP_MAX_OUTS] = {F(ag_unary(OP_clone, view))};
    if (!go[0]) goto out;
    /* the base's part only when its edge wants it (torch's should_compute_output(0)):
     * a base that needs no gradient may lack what the op saved for it */
    bool needs[OP_MAX_TENSORS] = {n->next[0].fn && n->next[0].fn->needed};
    for (int k = 1; k < n->num_next; k++) needs[k] = n->next[k].fn && n->next[k].fn->needed;
    TensorImpl *fgi[OP_MAX_TENSORS] = {0};
    if (apply_op(cs->fn, go, fgi, needs) < 0) goto out;
    if (needs[0]) { /* the view's old value gets fgi[0]; the op's other inputs get theirs */
        OpArgs put = {.t = {view, fgi[0]}, .nt = fgi[0] ? 2 : 1, .s = {0}}; /* recorded with create_graph */
        int r = ag_call_inplace(fgi[0] ? OP_copy_ : OP_fill_, &put);
        c10_release(fgi[0]);
        if (r < 0) goto out;
        gi[0] = result;
        result = NULL;
    } else {
        c10_release(fgi[0]);
    }
    for (int k = 1; k < n->num_next; k++) gi[k] = fgi[k];
    rc = 0;
out:
    c10_release(result);
    ag_frame_end(mark);
    return rc;
}

/* AccumulateGrad: leaf hooks, then .grad = grad or .grad += grad. Takes over
 * the input buffer's reference (*slot), so that a gradient nobody else holds
 * becomes .grad without a copy, as PyTorch steals it. */
/* The first gradient of a leaf under create_graph: torch's
 * clone_obey_contract, recorded, so that the leaf's .grad is its own tensor
 * (never the caller's gradient or an expand) and differentiable: a copy_ into
 * the leaf's layout (CopyBackwards), or a contiguous clone (CloneBackward0)
 * when the leaf is not dense. Takes grad's reference. */
static int accumulate_recorded(const TensorImpl *leaf, AutogradMeta *m, TensorImpl *grad) {
    TensorImpl *c = at_empty_strided(leaf->sizes, leaf->strides, leaf->ndim, leaf->dtype, leaf->device);
    OpArgs a = {.t = {c, grad}, .nt = 2};
    int r = c ? ag_call_inplace(OP_copy_, &a) : -1;
    c10_release(grad);
    if (r < 0) {
        c10_release(c);
        return -1;
    }
    if (memcmp(c->strides, leaf->strides, sizeof(int64_t) * (size_t)leaf->ndim))
        ag_name_node(c, OP_copy_, "CloneBackward0");
    m->grad = c;
    return 0;
}

static int apply_accumulate(Node *n, TensorImpl **slot, bool create_graph) {
    TensorImpl *leaf = n->variable;
    AutogradMeta *m = ag_meta(leaf);
    if (!m) return -1;
    TensorImpl *grad = *slot;
    *slot = NULL;
    if (m->hooks && grad) {
        TensorImpl *h = ag_run_hooks(m->hooks, grad);
        c10_release(grad);
        if (!h) return -1;
        grad = h;
    }
    if (grad && !m->requires_grad) { /* requires_grad_(false) since the graph was made: dropped, as torch */
        c10_release(grad);
        grad = NULL;
    }
    if (!grad) return 0;
    if (!m->grad) {
        /* stolen when nobody else can see it and it is laid out as the leaf
         * (PyTorch's layout contract: an expanded or oddly strided gradient is copied) */
        bool exclusive = atomic_load(&grad->refcount) == 1 && atomic_load(&grad->storage->refcount) == 1 &&
                         !grad->autograd && grad->ndim == leaf->ndim &&
                         !memcmp(grad->strides, leaf->strides, sizeof(int64_t) * (size_t)leaf->ndim);
        if (create_graph) return accumulate_recorded(leaf, m, grad);
        if (exclusive) m->grad = grad;
        else {
            m->grad = at_to_dtype(grad, grad->dtype); /* a private copy without history */
            c10_release(grad);
        }
        return m->grad ? 0 : -1;
    }
    if (create_graph) {
        TensorImpl *sum = ag_binary(OP_add, m->grad, grad);
        c10_release(grad);
        if (!sum) return -1;
        c10_release(m->grad);
        m->grad = sum;
        return 0;
    }
    OpArgs a = {.t = {m->grad, grad}, .nt = 2, .s = {1}, .dst = m->grad};
    TensorImpl *o = at_call1(OP_add, &a);
    c10_release(grad);
    c10_release(o);
    return o ? 0 : -1;
}

/* Pre-hooks and retains_grad on a node's inputs (non-leaf tensors). */
static int pre_hooks(Node *n, TensorImpl **inputs) {
    for (int k = 0; k < n->num_inputs; k++) {
        if (n->pre_hooks[k] && inputs[k]) {
            TensorImpl *h = ag_run_hooks(n->pre_hooks[k], inputs[k]);
            if (!h) return -1;
            c10_release(inputs[k]);
            inputs[k] = h;
        }
        AutogradMeta *r = n->retain[k];
        if (r && inputs[k]) {
            TensorImpl *prev = r->grad;
            if (prev) {
                r->grad = ag_binary(OP_add, prev, inputs[k]);
                c10_release(prev);
            } else {
                r->grad = ag_unary(OP_clone, inputs[k]); /* torch's grad.clone(): recorded under create_graph */
            }
            if (!r->grad) return -1;
        }
    }
    return 0;
}

static int run_node(GraphTask *g, Node *n) {
    const BackwardOpts *o = g->o;
    TensorImpl *inputs[OP_MAX_OUTS] = {0}, *gi[OP_MAX_TENSORS] = {0};
    for (int k = 0; k < n->num_inputs; k++) inputs[k] = n->buffer[k], n->buffer[k] = NULL;
    int rc = 0;
    for (int i = 0; i < o->ninputs; i++) /* autograd.grad captures */
        if (g->captures[i].fn == n && inputs[g->captures[i].input_nr] && !o->results[i])
            o->results[i] = c10_retain(inputs[g->captures[i].input_nr]);
    if (!n->needed || n->capture_only || (o->ninputs && n->kind == NODE_ACCUMULATE)) goto done;
    if ((rc = pre_hooks(n, inputs)) < 0) goto done;
    switch (n->kind) {
    case NODE_ACCUMULATE:
        rc = apply_accumulate(n, &inputs[0], o->create_graph);
        break;
    case NODE_CUSTOM:
        rc = ag_custom_apply(n, inputs, gi);
        break;
    case NODE_COPY_SLICES:
        rc = apply_copy_slices(n, inputs[0], gi);
        break;
    default:
        rc = apply_op(n, inputs, gi, NULL);
        break;
    }
    if (rc == 0 && ag_anomaly) rc = ag_anomaly_check(n, gi);
    if (!o->retain_graph) { /* an op's node that saved nothing can run again (torch's check is per saved tensor) */
        bool saved = n->kind != NODE_OP;
        for (int k = 0; k < n->num_saved; k++) saved |= n->saved[k].data != NULL;
        n->released |= saved;
        ag_release_saved(n);
    }
    for (int k = 0; k < n->num_next; k++) {
        Edge e = n->next[k];
        if (rc == 0 && e.fn) rc = deliver(g, e, gi[k]);
        else c10_release(gi[k]);
        gi[k] = NULL;
    }
done:
    for (int k = 0; k < n->num_inputs; k++) c10_release(inputs[k]);
    for (int k = 0; k < n->num_next; k++) c10_release(gi[k]);
    return rc;
}

static bool same_shape(const TensorImpl *a, const TensorImpl *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->sizes[i] != b->sizes[i]) return false;
    return true;
}

/* torch's _make_grads, before the engine looks at any root's history: a given
 * gradient has the root's shape; none is a root that requires grad one element */
static int check_root_grad(TensorImpl *root, TensorImpl *grad, int i) {
    if (!grad)
        return ag_requires_grad(root) && root->numel != 1
                   ? c10_error_int("grad can be implicitly created only for scalar outputs") : 0;
    if (!same_shape(root, grad))
        return c10_error_int("Mismatch in shape: grad_output[%d] has a shape of torch.Size(%s) and output[%d] has a "
                             "shape of torch.Size(%s).", i, c10_shape_str(grad->sizes, grad->ndim), i,
                             c10_shape_str(root->sizes, root->ndim));
    return 0;
}

/* The roots' initial gradients: given, else ones (one-element roots). */
static TensorImpl *root_grad(TensorImpl *root, TensorImpl *grad) {
    return grad ? c10_retain(grad) : c10_full(root->sizes, root->ndim, 1, root->dtype, root->device);
}

int ag_run_backward(TensorImpl **roots, TensorImpl **grads, int nroots, const BackwardOpts *o) {
    if (nroots <= 0 || nroots > 64) return c10_error_int("backward: between 1 and 64 outputs are supported");
    Edge edges[64] = {{0}};
    Edge captures[64] = {{0}};
    TensorImpl *g0[64] = {0};
    if (o->ninputs > 64) return c10_error_int("grad: at most 64 inputs are supported");
    GraphTask g = {.id = atomic_fetch_add(&task_counter, 1), .o = o, .captures = captures};
    for (int i = 0; i < o->ninputs; i++) o->results[i] = NULL;
    bool prev_mode = ag_set_grad_enabled(o->create_graph);
    int rc = 0;
    /* a view made under no_grad of a tensor that requires grad does too, but
     * has no edge: torch's gradient_edge() is empty for it, and so an error */
    for (int i = 0; i < nroots && rc == 0; i++) rc = check_root_grad(roots[i], grads ? grads[i] : NULL, i);
    for (int i = 0; i < nroots && rc == 0; i++) {
        if (ag_check_view(roots[i]) < 0) rc = -1;
        else if (!ag_requires_grad(roots[i]) || !(edges[i] = ag_gradient_edge(roots[i])).fn)
            rc = c10_error_int("element %d of tensors does not require grad and does not have a grad_fn", i);
        else if (!(g0[i] = root_grad(roots[i], grads ? grads[i] : NULL)))
            rc = -1;
    }
    for (int i = 0; i < o->ninputs && rc == 0; i++) {
        if (ag_check_view(o->inputs[i]) < 0) rc = -1;
        else if (!ag_requires_grad(o->inputs[i]))
            rc = c10_error_int("One of the differentiated Tensors does not require grad");
        else /* no edge (such a view): never reached, torch's Identity edge (unused) */
            captures[i] = ag_gradient_edge(o->inputs[i]);
    }
    if (rc == 0) rc = compute_dependencies(&g, edges, nroots);
    if (rc == 0 && o->ninputs) mark_needed(&g);
    /* GraphRoot: hand each root's gradient to its grad_fn */
    for (int i = 0; i < nroots && rc == 0; i++) {
        TensorImpl *gr = g0[i];
        g0[i] = NULL;
        rc = deliver(&g, edges[i], gr);
    }
    while (rc == 0 && g.ready.n) rc = run_node(&g, heap_pop(&g.ready));
    /* clean up: buffers of nodes that never ran, scratch state */
    for (int64_t i = 0; i < g.all.n; i++) {
        Node *n = g.all.v[i];
        for (int k = 0; k < n->num_inputs; k++) {
            c10_release(n->buffer[k]);
            n->buffer[k] = NULL;
        }
        n->task = 0;
    }
    for (int i = 0; i < nroots; i++) {
        c10_release(g0[i]);
        ag_node_release(edges[i].fn);
    }
    for (int i = 0; i < o->ninputs; i++) {
        ag_node_release(captures[i].fn);
        if (rc == 0 && !o->results[i] && !o->allow_unused)
            rc = c10_error_int("One of the differentiated Tensors appears to not have been used in the graph. "
                               "Set allow_unused=True if this is the desired behavior.");
    }
    if (rc < 0)
        for (int i = 0; i < o->ninputs; i++) {
            c10_release(o->results[i]);
            o->results[i] = NULL;
        }
    free(g.all.v);
    free(g.ready.v);
    ag_set_grad_enabled(prev_mode);
    return rc;
}
