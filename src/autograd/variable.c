/* variable.c: AutogradMeta, Nodes, saved variables, and ag_call, the wrapper
 * that runs an op and records its history (PyTorch's generated VariableType). */
#include "autograd/autograd.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- grad mode */

_Thread_local bool ag_grad_disabled;
bool ag_set_grad_enabled(bool on) {
    bool prev = !ag_grad_disabled;
    ag_grad_disabled = !on;
    return prev;
}

/* ------------------------------------------------------------------- nodes */

/* Per thread, as PyTorch's sequence_nr: it orders the nodes a thread made (the
 * ready queue runs the latest first); no atomic on every op. */
static _Thread_local uint64_t seq_counter;
uint64_t ag_next_seq(void) { return seq_counter++; }

int NONE(BackwardCtx *c, TensorImpl **gi) {
    (void)c, (void)gi;
    return c10_error_int("internal: backward of a non-differentiable op");
}

/* Nodes are made at every recorded op and freed by the graph-full: pooled per
 * thread in four size classes (larger nodes come from malloc). */
#define NODE_CLASSES(X) X(0, 256) X(1, 512) X(2, 1024) X(3, 2048)
#define X(c, bytes)                                                              \
    typedef struct { _Alignas(16) char b[bytes]; } NodeBlock##c;                 \
    C10_POOL(node_pool##c, NodeBlock##c, 4096)
NODE_CLASSES(X)
#undef X
C10_POOL(meta_pool, AutogradMeta, 16384)

static void *node_alloc(size_t size, int *cls) {
#define X(c, bytes)                                                              \
    if (size <= bytes) {                                                         \
        *cls = c;                                                                \
        return node_pool##c##_get();                                             \
    }
    NODE_CLASSES(X)
#undef X
    *cls = -1;
    return malloc(size);
}

static void node_free(Node *n) {
    switch (n->size_class) {
#define X(c, bytes)                                                              \
    case c: node_pool##c##_put((NodeBlock##c *)(void *)n); return;
        NODE_CLASSES(X)
#undef X
    default: free(n);
    }
}

Node *ag_node_new(int kind, const char *name, int num_inputs, int num_next, int nsaved, int nwords) {
    size_t head = sizeof(Node) + (size_t)num_next * (sizeof(Edge) + sizeof(InputMeta)) +
                  (size_t)nsaved * sizeof(SavedVariable) +
                  (size_t)num_inputs * (sizeof(InputMeta) + sizeof(TensorImpl *) + sizeof(Hook *) +
                                        sizeof(AutogradMeta *));
    head = (head + 7) & ~(size_t)7;
    int cls;
    Node *n = node_alloc(head + (size_t)nwords * sizeof(int64_t), &cls);
    if (!n) return c10_error("out of memory");
    memset(n, 0, head);
    char *p = (char *)(n + 1);
#define CARVE(field, count)                                                      \
    n->field = (void *)p;                                                        \
    p += (size_t)(count) * sizeof *n->field
    CARVE(next, num_next);
    CARVE(in_meta, num_next);
    CARVE(saved, nsaved);
    CARVE(out_meta, num_inputs);
    CARVE(buffer, num_inputs);
    CARVE(pre_hooks, num_inputs);
    CARVE(retain, num_inputs);
#undef CARVE
    n->words = (int64_t *)((char *)n + head);
    n->words_end = n->words + nwords;
    n->saved_in = n->saved;
    n->saved_out = n->saved + (num_next < nsaved ? num_next : nsaved);
    atomic_init(&n->refcount, 1);
    n->size_class = cls;
    n->kind = kind;
    n->name = name;
    n->seq = ag_next_seq();
    n->num_inputs = num_inputs;
    n->num_next = num_next;
    n->num_saved = nsaved;
    return n;
}

int64_t *ag_node_words(Node *n, int count) {
    int64_t *w = n->words;
    CT_ASSERT(count >= 0 && w + count <= n->words_end);
    n->words += count;
    return w;
}

Node *ag_node_retain(Node *n) {
    if (n) atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
    return n;
}

void ag_release_saved(Node *n) {
    for (int k = 0; k < n->num_saved; k++) {
        c10_release(n->saved[k].data);
        n->saved[k].data = NULL;
    }
}

CT_INTERNAL void ag_hooks_free(Hook *h);
CT_INTERNAL void ag_custom_free(CustomFn *f);

/* Frees n and every node only it kept alive, iteratively (a graph may be a
 * chain of a million nodes: recursion would overflow the stack). */
void ag_node_free(Node *n) {
    Node *work = n;
    n->gc_next = NULL;
    while (work) {
        Node *m = work;
        work = m->gc_next;
        for (int k = 0; k < m->num_next; k++) {
            Node *f = m->next[k].fn;
            if (f && c10_unref(&f->refcount)) {
                f->gc_next = work;
                work = f;
            }
        }
        ag_release_saved(m);
        for (int k = 0; k < m->num_inputs; k++) {
            c10_release(m->buffer[k]);
            if (m->pre_hooks[k]) ag_hooks_free(m->pre_hooks[k]);
            if (m->retain[k] && m->retain[k]->retain_fn == m) m->retain[k]->retain_fn = NULL;
        }
        if (m->variable) { /* AccumulateGrad: the leaf forgets its accumulator */
            if (m->variable->autograd && m->variable->autograd->grad_accumulator == m)
                m->variable->autograd->grad_accumulator = NULL;
            c10_release(m->variable);
        }
        if (m->custom) ag_custom_free(m->custom);
        if (m->extra_free) m->extra_free(m->extra);
        node_free(m);
    }
}

/* -------------------------------------------------------------------- meta */

/* Drops the retain_grad node's weak pointer back to m. */
static void unlink_retain(AutogradMeta *m) {
    Node *n = m->retain_fn;
    for (int k = 0; n && k < n->num_inputs; k++)
        if (n->retain[k] == m) n->retain[k] = NULL;
    m->retain_fn = NULL;
}

static void meta_free(AutogradMeta *m) {
    c10_release(m->grad);
    unlink_retain(m);
    ag_node_release(m->grad_fn);
    c10_release(m->base);
    ag_hooks_free(m->hooks);
    meta_pool_put(m);
}

AutogradMeta *ag_meta(TensorImpl *t) {
    if (!t->autograd) {
        c10_autograd_meta_free = meta_free;
        t->autograd = meta_pool_get();
        if (!t->autograd) return c10_error("out of memory");
        memset(t->autograd, 0, sizeof *t->autograd);
    }
    return t->autograd;
}

static Node *record(int op, const OpArgs *a, TensorImpl **out, int n, TensorImpl *self_saved, bool give);

/* as_strided(base, t's geometry): the history a view takes from its base */
static Node *record_as_strided(TensorImpl *base, TensorImpl *t) {
    OpArgs a = {.t = {base}, .nt = 1, .ni = 2 * t->ndim + 2};
    memcpy(a.i, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(a.i + t->ndim, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    a.i[2 * t->ndim] = t->ndim;
    a.i[2 * t->ndim + 1] = t->offset;
    TensorImpl *out[1] = {t};
    return record(OP_as_strided, &a, out, 1, NULL, false);
}

/* A view whose storage was written since its history was set (an in-place op
 * on its base or on another view of it) takes its history anew from its
 * base's, as an as_strided of it, as PyTorch regenerates a view's grad_fn: its
 * old history no longer leads to what it holds. (The metadata is mutable
 * behind const, as torch's grad_fn() is.) */
static void refresh_view(const TensorImpl *ct) {
    TensorImpl *t = (TensorImpl *)ct;
    AutogradMeta *m = t ? t->autograd : NULL;
    if (!m || !m->is_view || m->creation != CM_DEFAULT || m->attr_version == c10_version(t)) return;
    m->attr_version = c10_version(t);
    AutogradMeta *bm = m->base->autograd;
    if (bm && (bm->requires_grad || bm->grad_fn)) ag_node_release(record_as_strided(m->base, t));
}

/* torch's DifferentiableViewMeta::requires_grad: a view requires grad when its
 * base does, with or without history of its own (a view made under no_grad,
 * or before its base's requires_grad_(): a leaf, whose gradient goes nowhere) */
bool ag_requires_grad(const TensorImpl *t) {
    refresh_view(t);
    const AutogradMeta *m = t ? t->autograd : NULL, *bm = m && m->is_view ? m->base->autograd : NULL;
    return m && (m->requires_grad || m->grad_fn || (bm && (bm->requires_grad || bm->grad_fn)));
}
bool ag_is_leaf(const TensorImpl *t) {
    refresh_view(t);
    return !t->autograd || !t->autograd->grad_fn;
}
Node *ag_grad_fn(const TensorImpl *t) {
    refresh_view(t);
    return t->autograd ? t->autograd->grad_fn : NULL;
}

Edge ag_gradient_edge(TensorImpl *t) {
    refresh_view(t);
    AutogradMeta *m = t->autograd;
    if (!m) return (Edge){NULL, 0};
    if (m->grad_fn) return (Edge){ag_node_retain(m->grad_fn), m->output_nr};
    if (!m->requires_grad) return (Edge){NULL, 0};
    if (m->grad_accumulator) return (Edge){ag_node_retain(m->grad_accumulator), 0};
    Node *acc = ag_node_new(NODE_ACCUMULATE, "AccumulateGrad", 1, 0, 0, 0);
    if (!acc) return (Edge){NULL, 0};
    acc->seq = UINT64_MAX; /* run as soon as ready, as PyTorch does */
    acc->variable = c10_retain(t);
    m->grad_accumulator = acc;
    return (Edge){acc, 0};
}

/* out's history becomes fn, taking over one reference the caller had to it.
 * follow: retain_grad follows the tensor to its new history (an in-place op on
 * it; a base rewritten through a view keeps it on its old node, as torch's
 * rebase_history moves the tensor's hooks only in its non-view branch). */
static void set_history_follow(TensorImpl *out, Node *fn, int output_nr, bool follow) {
    AutogradMeta *m = ag_meta(out);
    if (!m) {
        ag_node_release(fn);
        return;
    }
    Node *old = m->grad_fn;
    if (m->retains_grad && follow && m->retain_fn != fn) {
        unlink_retain(m);
        if (fn) fn->retain[output_nr] = m, m->retain_fn = fn;
    }
    m->grad_fn = fn;
    m->output_nr = output_nr;
    m->attr_version = c10_version(out);
    ag_node_release(old);
}

static void set_history_owned(TensorImpl *out, Node *fn, int output_nr) { set_history_follow(out, fn, output_nr, true); }
void ag_set_history(TensorImpl *out, Node *fn, int output_nr) { set_history_owned(out, ag_node_retain(fn), output_nr); }

/* The node of the overload or path torch takes where it is not the row's (x.pow(2) is
 * pow.Tensor_Scalar's PowBackward0): renames t's grad_fn when op made it (not a CopySlices). */
void ag_name_node(TensorImpl *t, int op, const char *name) {
    Node *n = t && name && t->autograd ? t->autograd->grad_fn : NULL;
    if (n && n->kind == NODE_OP && n->op == op) n->name = name;
}

void ag_save(SavedVariable *sv, TensorImpl *t, bool is_output) {
    sv->data = is_output ? c10_alias(t) : c10_retain(t);
    sv->version = c10_version(t);
    sv->is_output = is_output;
}

/* 0 when sv can be used, else -1 with the error ("Trying to backward through
 * the graph a second time ..." or the in-place version message). */
static int check_saved(Node *n, SavedVariable *sv, int output_nr) {
    if (n->released)
        return c10_error_int("Trying to backward through the graph a second time (or directly access saved tensors "
                             "after they have already been freed). Saved intermediate values of the graph are freed "
                             "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
                             "backward through the graph a second time or if you need to access saved tensors after "
                             "calling backward.");
    TensorImpl *t = sv->data;
    CT_ASSERT(t != NULL);
    unsigned now = c10_version(t);
    if (now != sv->version) {
        /* torch asks a saved input for its grad_fn first: a view that may not be
         * used any more (a split piece, a no_grad view, their base written) says so */
        if (!sv->is_output && ag_check_view(t) < 0) return -1;
        char owner[96] = "";
        Node *fn = sv->is_output ? n : ag_grad_fn(t);
        /* torch's name() of its hand-written nodes is their C++ name */
        const char *ns = fn && (fn->kind == NODE_COPY_SLICES || !strcmp(fn->name, "CopyBackwards")) ? "torch::autograd::" : "";
        if (fn) snprintf(owner, sizeof owner, ", which is output %d of %s%s,", sv->is_output ? output_nr : t->autograd->output_nr, ns, fn->name);
        return c10_error_int("one of the variables needed for gradient computation has been modified by an inplace "
                             "operation: [%s %s]%s is at version %u; expected version %u instead. Hint: %s",
                             c10_dtype_legacy_name(t->dtype), c10_shape_str(t->sizes, t->ndim), owner, now, sv->version,
                             ag_anomaly ? "the backtrace further above shows the operation that failed to compute its "
                                          "gradient. The variable in question was changed in there or anywhere later. "
                                          "Good luck!"
                                        : "enable anomaly detection to find the operation that failed to compute its "
                                          "gradient, with torch.autograd.set_detect_anomaly(True).");
    }
    return 0;
}

TensorImpl *ag_unpack(Node *n, SavedVariable *sv, int output_nr) {
    if (check_saved(n, sv, output_nr) < 0) return NULL;
    if (!sv->is_output) return c10_retain(sv->data);
    TensorImpl *a = c10_alias(sv->data);
    /* create_graph: a float result has history (an integer one, sort's indices, never requires grad) */
    if (a && ag_grad_enabled() && c10_is_float(a->dtype)) ag_set_history(a, n, output_nr);
    return a;
}

TensorImpl *ag_unpack_input(Node *n, SavedVariable *sv, int input_nr) {
    /* an input saved as the node's output is an in-place op's self (its output 0) */
    return check_saved(n, sv, sv->is_output ? 0 : input_nr) < 0 ? NULL : sv->data;
}

/* --------------------------------------------------------------- recording */

static bool differentiable_dtype(ct_dtype d) { return c10_is_float(d); }

void ag_copy_meta(Node *n, InputMeta *m, const InputMeta *from) {
    int64_t *w = ag_node_words(n, 2 * from->ndim);
    *m = *from;
    for (int d = 0; d < from->ndim; d++) {
        w[d] = from->sizes[d];
        w[from->ndim + d] = from->strides[d];
    }
    m->sizes = w;
    m->strides = w + from->ndim;
}

void ag_input_meta(Node *n, InputMeta *m, const TensorImpl *t) {
    int nd = t->ndim;
    int64_t *w = nd ? ag_node_words(n, 2 * nd) : n->words; /* never NULL: callers memcpy from it */
    for (int d = 0; d < nd; d++) {
        w[d] = t->sizes[d];
        w[nd + d] = t->strides[d];
    }
    *m = (InputMeta){t->offset, w, w + nd, nd, t->dtype, t->device, true};
}

/* Words a node needs for the metas of these tensors. */
static int meta_words(TensorImpl *const *t, int n) {
    int w = 0;
    for (int k = 0; k < n; k++)
        if (t[k]) w += 2 * t[k]->ndim;
    return w;
}

/* Whether input k must be saved: as torch's generated code, only when a
 * gradient that uses it is wanted. The products save an operand only for the
 * other operand's gradient (saving it anyway made a later in-place op on it an
 * error in backward: z = y * 1.5; y.add_(1) is a residual block's pattern);
 * remainder, fmod, lerp, index_add and scatter_add save for one input's
 * gradient. A node that saved nothing can also run a second time. */
static bool save_needed(int op, const OpArgs *a, int k) {
    switch (op) {
    case OP_mul: case OP_mm: case OP_bmm: case OP_mv: case OP_dot: case OP_outer: case OP_matmul: case OP_linear:
        return k > 1 || ag_requires_grad(a->t[1 - k]);
    case OP_div: return k != 0 || ag_requires_grad(a->t[1]);
    case OP_addmm: case OP_baddbmm: case OP_addcmul: return k < 1 || k > 2 || ag_requires_grad(a->t[3 - k]);
    case OP_index_add: case OP_scatter_add: return k == 0 || ag_requires_grad(a->t[2]); /* index, source: for source's */
    case OP_remainder: case OP_fmod: return ag_requires_grad(a->t[1]); /* self's gradient is grad itself */
    case OP_addcdiv: return k != 1 || ag_requires_grad(a->t[2]); /* tensor2 always, as torch 1.13's node */
    case OP_lerp: return k == 2 || ag_requires_grad(a->t[2]); /* self, end: for weight's */
    default: return true;
    }
}

/* Whether the outputs must be saved: pow by a number (torch's pow.Tensor_Scalar)
 * saves no result (x.pow_(2) then a later in-place op on it still backpropagates);
 * pow by a tensor saves it whatever needs grad, as torch 1.13's PowBackward1. */
static bool save_out_needed(int op, const OpArgs *a) { return op != OP_pow || !a->t[1]->is_wrapped_number; }

/* Makes the node for op's call with inputs a->t and outputs out[0..n), saving
 * what the row's flags ask for; self_saved replaces input 0 in the saved set
 * (in-place ops save self before they overwrite it). */
static Node *record(int op, const OpArgs *a, TensorImpl **out, int n, TensorImpl *self_saved, bool give) {
    unsigned flags = deriv_info[op].flags;
    int words = meta_words(a->t, a->nt) + meta_words(out, n) + a->ni;
    Node *node = ag_node_new(NODE_OP, deriv_info[op].node_name, n, a->nt, a->nt + n, words);
    if (!node) return NULL;
    node->op = op;
    memcpy(node->s, a->s, sizeof a->s);
    node->ni = a->ni;
    node->ints = ag_node_words(node, a->ni);
    memcpy(node->ints, a->i, sizeof(int64_t) * (size_t)a->ni);
    for (int k = 0; k < a->nt; k++) {
        TensorImpl *t = a->t[k];
        if (!t) continue;
        node->next[k] = ag_gradient_edge(t);
        ag_input_meta(node, &node->in_meta[k], t);
        if (saves_input(flags, k) && save_needed(op, a, k))
            ag_save(&node->saved_in[k], k == 0 && self_saved ? self_saved : t, false);
    }
    for (int j = 0; j < n; j++) {
        if (out[j]) ag_input_meta(node, &node->out_meta[j], out[j]);
        if ((flags & SV_OUT(j)) && save_out_needed(op, a)) ag_save(&node->saved_out[j], out[j], true);
    }
    Node *own = give ? node : NULL; /* the creation reference, for the first output */
    for (int j = 0; j < n; j++)
        if (out[j] && differentiable_dtype(out[j]->dtype)) {
            set_history_owned(out[j], own ? own : ag_node_retain(node), j);
            own = NULL;
        }
    if (own) ag_node_release(own);
    return node;
}

/* A view remembers its base (the base of its input when that is a view too),
 * so that an in-place op on it can rebase the base's history. */
static void mark_view(TensorImpl *view, TensorImpl *input) {
    AutogradMeta *m = view ? ag_meta(view) : NULL;
    if (!m) return;
    AutogradMeta *im = input->autograd && input->autograd->is_view ? input->autograd : NULL;
    m->is_view = true;
    m->attr_version = c10_version(view);
    /* made without grad mode: never rebased; else as the view it was made from */
    m->creation = !ag_grad_enabled() ? CM_NO_GRAD : im ? im->creation : CM_DEFAULT;
    m->view_nr = 0;
    c10_release(m->base);
    m->base = c10_retain(im ? im->base : input);
}

void ag_mark_multi_output(TensorImpl *t, int i, const char *node_name) {
    AutogradMeta *m = t->autograd;
    if (!ag_grad_enabled() || !m || !m->is_view) return; /* no_grad views are CM_NO_GRAD already */
    m->creation = CM_MULTI_OUTPUT;
    m->view_nr = i;
    if (m->grad_fn) m->grad_fn->name = node_name;
}

/* PyTorch's handle_view_on_rebase: a view made without grad mode, or one of
 * several views a function returned, may not take a new history: it fails
 * when written in place (direct), or used after its base or a sibling was
 * (indirect), with grad mode on. */
COLD_CODE static int view_rebase_error(const TensorImpl *t, bool direct) {
    AutogradMeta *m = t->autograd;
    if (!m || !m->is_view || m->creation == CM_DEFAULT || !ag_grad_enabled()) return 0;
    if (!direct && (m->attr_version == c10_version(t) || !(m->grad_fn || ag_requires_grad(m->base)))) return 0;
    const char *what = direct ? "is being" : "its base or another view of its base has been";
    char head[160];
    if (m->grad_fn) snprintf(head, sizeof head, "Output %d of %s is a view", m->view_nr, m->grad_fn->name);
    else snprintf(head, sizeof head, "A view was created in no_grad mode and");
    const char *tail = m->creation == CM_MULTI_OUTPUT
        ? "This view is the output of a function that returns multiple views. Such functions do not allow the "
          "output views to be modified inplace. You should replace the inplace operation by an out-of-place one."
        : "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
          "moving both the view and the inplace either both inside the no_grad block (if you don't want the "
          "inplace to be tracked) or both outside (if you want the inplace to be tracked).";
    if (m->creation == CM_NO_GRAD || !m->grad_fn)
        return c10_error_int("%s%s %s modified inplace with grad mode enabled. %s", head,
                             m->grad_fn ? " of a view which was created in no_grad mode and" : "", what, tail);
    return c10_error_int("%s and %s modified inplace. %s", head, what, tail);
}

/* -1 when t is a view that may not be used any more (view_rebase_error),
 * as torch's grad_fn() of it raises in any grad mode: backward and
 * autograd.grad ask of their outputs and inputs */
int ag_check_view(const TensorImpl *t) {
    if (!t || !t->autograd || !t->autograd->creation) return 0;
    bool prev = ag_set_grad_enabled(true);
    int rc = view_rebase_error(t, false);
    ag_set_grad_enabled(prev);
    return rc;
}

/* 1: record the op's history, 0: not, -1: an input is a view that may not be
 * used any more (view_rebase_error). */
static int needs_history(int op, const OpArgs *a) {
    if (!ag_grad_enabled() || !deriv_info[op].backward || deriv_info[op].backward == NONE) return 0;
    int rec = 0;
    for (int k = 0; k < a->nt; k++) {
        if (a->t[k] && a->t[k]->autograd && a->t[k]->autograd->creation && view_rebase_error(a->t[k], false) < 0)
            return -1;
        if (ag_requires_grad(a->t[k])) rec = 1;
    }
    return rec;
}

int ag_call(int op, const OpArgs *a, TensorImpl **out) {
    int rec = needs_history(op, a);
    if (rec < 0) return -1;
    int n = at_call(op, a, out);
    if (n > 0 && (deriv_info[op].flags & F_VIEW)) mark_view(out[0], a->t[0]);
    if (n < 0 || !rec) return n;
    if (!record(op, a, out, n, NULL, true)) { /* the outputs hold the node */
        for (int j = 0; j < n; j++) c10_release(out[j]);
        return -1;
    }
    return n;
}

TensorImpl *ag_call1(int op, const OpArgs *a) {
    TensorImpl *out[OP_MAX_OUTS];
    int n = ag_call(op, a, out);
    for (int k = 1; k < n; k++) c10_release(out[k]);
    return n > 0 ? out[0] : NULL;
}

/* In-place ops on views: PyTorch's CopySlices. The view's base gets a new
 * history, a CopySlices node that (1) passes the base's gradient through
 * outside the view's elements, (2) runs the in-place op's backward on the
 * view's part and writes the result for the view's old value back into that
 * part, and (3) sends the op's other input gradients on. The view itself
 * becomes an as_strided view of its base's new history. */
static void copy_slices_free(void *p) {
    CopySlicesInfo *cs = p;
    ag_node_release(cs->fn);
    free(cs);
}

static int copy_slices(TensorImpl *self, Node *fn) {
    TensorImpl *base = self->autograd->base;
    int words = 2 * base->ndim;
    for (int k = 1; k < fn->num_next; k++) words += 2 * fn->in_meta[k].ndim;
    Node *cs = ag_node_new(NODE_COPY_SLICES, "CopySlices", 1, fn->num_next, 0, words);
    CopySlicesInfo *info = calloc(1, sizeof *info);
    if (!cs || !info) {
        free(info);
        ag_node_release(cs);
        return c10_error_int("out of memory");
    }
    info->fn = ag_node_retain(fn);
    info->ndim = self->ndim;
    memcpy(info->sizes, self->sizes, sizeof info->sizes);
    memcpy(info->strides, self->strides, sizeof info->strides);
    info->offset = self->offset - base->offset;
    cs->extra = info;
    cs->extra_free = copy_slices_free;
    cs->next[0] = ag_gradient_edge(base);
    ag_input_meta(cs, &cs->in_meta[0], base);
    for (int k = 1; k < fn->num_next; k++) {
        cs->next[k] = (Edge){ag_node_retain(fn->next[k].fn), fn->next[k].input_nr};
        ag_copy_meta(cs, &cs->in_meta[k], &fn->in_meta[k]);
    }
    set_history_follow(base, ag_node_retain(cs), 0, false);
    Node *v = record_as_strided(base, self); /* self = base.as_strided(self's geometry), with history */
    ag_node_release(v);
    ag_node_release(cs);
    return v ? 0 : -1;
}

int ag_call_inplace(int op, OpArgs *a) {
    TensorImpl *self = a->t[0];
    bool req = false;
    for (int k = 0; k < a->nt && !req; k++) req = a->t[k] && ag_requires_grad(a->t[k]);
    req = req && ag_grad_enabled();
    /* torch's check_inplace, before it reads the other inputs' histories: a view
     * first (it requires grad and its base is a leaf: a leaf view too,
     * base[2:8].requires_grad_()), then a leaf */
    if (req && view_rebase_error(self, true) < 0) return -1;
    if (req && self->autograd && self->autograd->is_view && ag_is_leaf(self->autograd->base) && ag_requires_grad(self))
        return c10_error_int("a view of a leaf Variable that requires grad is being used in an in-place operation.");
    if (req && ag_is_leaf(self) && ag_requires_grad(self))
        return c10_error_int("a leaf Variable that requires grad is being used in an in-place operation.");
    int rec = needs_history(op, a);
    if (rec < 0) return -1;
    TensorImpl *self_orig = NULL;
    if (rec && (deriv_info[op].flags & SV_IN0)) {
        self_orig = ag_unary(OP_clone, self); /* with history: double backward sees it */
        if (!self_orig) return -1;
    }
    a->dst = self;
    TensorImpl *out[OP_MAX_OUTS];
    int n = at_call(op, a, out);
    a->dst = NULL;
    if (n < 0) {
        c10_release(self_orig);
        return -1;
    }
    int rc = 0;
    /* out[0] is self: the node's edges are its inputs' histories before this op
     * (torch collects them first: a view of self among them is not stale yet),
     * then the write counts and the saved result is at the new version */
    Node *node = rec ? record(op, a, out, 1, self_orig, false) : NULL;
    c10_bump_version(self);
    for (int j = 0; node && j < node->num_inputs; j++)
        if (node->saved_out[j].data) node->saved_out[j].version = c10_version(node->saved_out[j].data);
    if (rec) {
        if (!node) rc = -1;
        else {
            /* other inputs aliasing self were saved (at their version before
             * the write) as PyTorch saves them: backward then reports the change */
            for (int k = 1; k < a->nt; k++) {
                SavedVariable *sv = &node->saved_in[k];
                if (!sv->data || sv->data->storage != self->storage) continue;
                TensorImpl *al = sv->data == self ? c10_alias(self) : NULL;
                if (al) { /* y.mul_(y): never usable, only named; a bare alias holds no history, */
                    c10_release(sv->data); /* so no cycle through self's grad_fn (this node) */
                    sv->data = al;
                    sv->is_output = true;
                }
            }
            if (self->autograd && self->autograd->is_view) rc = copy_slices(self, node);
            ag_node_release(node);
        }
    }
    c10_release(self_orig);
    for (int k = 0; k < n; k++) c10_release(out[k]);
    return rc;
}

/* ------------------------------------------------------ convenience wrappers */

TensorImpl *ag_to_dtype(TensorImpl *x, ct_dtype d) {
    if (!x || x->dtype == d) return x ? c10_retain(x) : NULL;
    OpArgs a = {.t = {x}, .nt = 1, .i = {d}, .ni = 1};
    return ag_call1(OP_to_dtype, &a);
}

TensorImpl *ag_unary(int op, TensorImpl *a) {
    if (!a) return NULL;
    OpArgs args;
    op_args_init(&args, 1, a, NULL, 0);
    return ag_call1(op, &args);
}

TensorImpl *ag_binary(int op, TensorImpl *a, TensorImpl *b) {
    if (!a || !b) return NULL;
    OpArgs args;
    op_args_init(&args, 2, a, b, 1);
    return ag_call1(op, &args);
}

TensorImpl *ag_add_alpha(TensorImpl *a, TensorImpl *b, double alpha) {
    if (!a || !b) return NULL;
    OpArgs args;
    op_args_init(&args, 2, a, b, alpha);
    return ag_call1(OP_add, &args);
}

/* A Python-number-like 0-dim tensor: it never decides the result's dtype
 * against a dimensioned tensor of the same category (PyTorch's wrapped number). */
TensorImpl *ag_wrapped_scalar(double v, ct_dtype like) {
    ct_dtype d = scalar_dtype(v);
    if (d == CT_INT64 && c10_is_float(like)) d = CT_FLOAT64;
    if (d == CT_FLOAT32) d = CT_FLOAT64; /* keep the double's precision; promotion counts it as float */
    TensorImpl *t = c10_scalar_tensor(v, d, CT_CPU);
    if (t) t->is_wrapped_number = true;
    return t;
}

TensorImpl *ag_binary_scalar(int op, TensorImpl *a, double s) {
    if (!a) return NULL;
    TensorImpl *w = ag_wrapped_scalar(s, a->dtype);
    TensorImpl *r = ag_binary(op, a, w);
    c10_release(w);
    return r;
}

TensorImpl *ag_sum_to_size(TensorImpl *g, const int64_t *shape, int ndim) {
    if (!g) return NULL;
    bool same = g->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = g->sizes[i] == shape[i];
    if (same) return c10_retain(g);
    OpArgs args = {.t = {g}, .nt = 1, .ni = ndim};
    memcpy(args.i, shape, sizeof(int64_t) * (size_t)ndim);
    return ag_call1(OP_sum_to_size, &args);
}

TensorImpl *ag_zeros_like_meta(const InputMeta *m) { return c10_full(m->sizes, m->ndim, 0, m->dtype, m->device); }

/* ---------------------------------------------------------------- frames */

/* A backward formula's temporaries, released when its frame ends. The first 64
 * slots are static per thread, so a backward step makes no heap call; a deeper
 * stack grows on the heap and goes back to the static slots once empty. */
#define FRAME_STATIC 64
static _Thread_local TensorImpl *frame_static[FRAME_STATIC];
static _Thread_local TensorImpl **frame;
static _Thread_local int frame_n, frame_cap;

int ag_frame_begin(void) { return frame_n; }

void ag_frame_end(int mark) {
    while (frame_n > mark) c10_release(frame[--frame_n]);
    if (frame_n == 0 && frame != frame_static) {
        free(frame);
        frame = frame_static;
        frame_cap = FRAME_STATIC;
    }
}

TensorImpl *F(TensorImpl *t) {
    if (!t) return NULL;
    if (!frame) {
        frame = frame_static;
        frame_cap = FRAME_STATIC;
    }
    if (frame_n == frame_cap) {
        int cap = 2 * frame_cap;
        TensorImpl **f = frame == frame_static ? malloc((size_t)cap * sizeof *f)
                                               : realloc(frame, (size_t)cap * sizeof *f);
        if (!f) {
            c10_release(t);
            return c10_error("out of memory");
        }
        if (frame == frame_static) memcpy(f, frame_static, sizeof frame_static);
        frame = f;
        frame_cap = cap;
    }
    frame[frame_n++] = t;
    return t;
}
