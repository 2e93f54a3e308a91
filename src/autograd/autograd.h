/*
 * autograd.h: tape-based reverse-mode autodiff, as PyTorch's torch/csrc/autograd.
 *
 *   TensorImpl.autograd -> AutogradMeta { grad, grad_fn, requires_grad, output_nr, ... }
 *   Node { next edges, saved variables, sequence number, op }   (a "grad_fn")
 *   Edge { Node *fn, int input_nr }
 *   AccumulateGrad: the Node that adds a leaf's gradient into its .grad
 *   GraphRoot: feeds the initial gradients; GraphTask: one backward's state.
 *
 * The version counter lives in the StorageImpl (shared by views and detach).
 * Saved outputs are kept as aliases without grad_fn (no cycle tensor -> node ->
 * tensor); unpacking one for create_graph gives it its node back.
 *
 * ag_* functions are the differentiable ops ("VariableType"): they run the ops
 * layer and record history when grad mode is on. They return new references.
 */
#ifndef CT_AUTOGRAD_H
#define CT_AUTOGRAD_H

#include "ops/ops.h"

typedef struct Node Node;

typedef struct Edge {
    Node *fn;     /* NULL: the input needs no gradient */
    int input_nr; /* which of fn's inputs (= which forward output) */
} Edge;

typedef struct SavedVariable {
    TensorImpl *data;  /* NULL when nothing is saved */
    unsigned version;  /* the storage version when saved */
    bool is_output;    /* an output of the node itself: data is a bare alias */
} SavedVariable;

/* What a node remembers of each forward input (and output), for shaping its
 * gradient. sizes and strides point into the node's own memory. */
typedef struct InputMeta {
    int64_t offset;
    const int64_t *sizes, *strides;
    int ndim;
    ct_dtype dtype;
    ct_device device;
    bool defined;
} InputMeta;

typedef struct BackwardCtx BackwardCtx;
/* A backward formula: writes the gradient of each forward input k with
 * c->needs[k] into gi[k] (a new reference, or NULL for "zero"). Returns 0/-1. */
typedef int (*backward_fn)(BackwardCtx *c, TensorImpl **gi);

/* Callbacks of a custom function (see ct_function_apply). */
typedef struct CustomFn CustomFn;

enum { NODE_OP, NODE_ACCUMULATE, NODE_ROOT, NODE_CUSTOM, NODE_COPY_SLICES };

typedef void (*grad_hook_fn)(void); /* placeholder type for hook lists */
typedef struct Hook Hook;

struct Node {
    atomic_int refcount;
    int kind;                 /* NODE_* */
    int op;                   /* OpId for NODE_OP */
    int num_inputs;           /* gradients it receives = forward outputs */
    int num_next;             /* gradients it produces = forward inputs */
    int num_saved;            /* saved variables: an op's inputs then its outputs */
    int size_class;           /* which pool the node's memory came from (-1: malloc) */
    bool released;            /* saved variables freed after backward */
    const char *name;         /* "MulBackward0" */
    uint64_t seq;             /* creation order; AccumulateGrad: UINT64_MAX */
    TensorImpl *variable;     /* AccumulateGrad: the leaf (strong reference) */
    Node *gc_next;            /* worklist link for iterative release */
    CustomFn *custom;         /* NODE_CUSTOM */
    void *extra;              /* kind-specific data (CopySlices) */
    void (*extra_free)(void *);
    /* the op's scalar and int arguments (its tensors are the edges) */
    double s[4];
    int64_t *ints;
    int ni;
    /* engine scratch, valid during one GraphTask */
    int deps;
    bool needed, capture_only; /* autograd.grad: see mark_needed */
    uint64_t task;
    /* Arrays in the node's own memory, after the struct (PyTorch's nodes hold
     * small vectors too): a node is a few hundred bytes, not a fixed worst case. */
    Edge *next;               /* [num_next] */
    InputMeta *in_meta;       /* [num_next] */
    SavedVariable *saved;     /* [num_saved] */
    SavedVariable *saved_in;  /* = saved: one per forward input (ops) */
    SavedVariable *saved_out; /* = saved + num_next: one per forward output (ops) */
    InputMeta *out_meta;      /* [num_inputs]: for zero gradients */
    TensorImpl **buffer;      /* [num_inputs]: the engine's input buffer */
    Hook **pre_hooks;         /* [num_inputs]: tensor hooks on this node's inputs */
    AutogradMeta **retain;    /* [num_inputs]: non-leaves with retains_grad (weak) */
    int64_t *words;           /* free words for geometry and ints ... */
    int64_t *words_end;       /* ... up to here */
};

/* A CopySlices node's data: the in-place op's node and the view's geometry
 * relative to its base (as elements of a contiguous tensor of the base's shape). */
typedef struct CopySlicesInfo {
    Node *fn;
    int ndim;
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS], offset;
} CopySlicesInfo;

struct AutogradMeta {
    TensorImpl *grad;         /* .grad */
    Node *grad_fn;            /* history of a non-leaf (strong) */
    Node *grad_accumulator;   /* a leaf's AccumulateGrad (weak: the node owns the leaf) */
    int output_nr;
    bool requires_grad;       /* set on leaves by the user */
    bool retains_grad;
    Node *retain_fn;          /* retain_grad: the node whose retain[] points here (weak both ways) */
    bool is_view;             /* a differentiable view of base */
    TensorImpl *base;         /* the view's base (strong) */
    unsigned attr_version;    /* a view: the storage's version when its history was set */
    unsigned char creation;   /* a view: CM_* (how it was made: may it be written in place?) */
    int view_nr;              /* an output of split / unbind: which one (for messages) */
    Hook *hooks;              /* leaf hooks, run before accumulation */
    const char *name;         /* optional, for graph printing */
};

/* PyTorch's CreationMeta: views that an in-place op may not rebase (their
 * history cannot be rewritten, or was never recorded). */
enum { CM_DEFAULT, CM_MULTI_OUTPUT, CM_NO_GRAD };
/* Output i of split / unbind ... becomes a CM_MULTI_OUTPUT view whose node
 * carries the function's name. */
CT_INTERNAL void ag_mark_multi_output(TensorImpl *t, int i, const char *node_name);

/* The flags column of ops.def. */
enum {
    SV_IN0 = 1 << 0, SV_IN1 = 1 << 1, SV_IN2 = 1 << 2, SV_IN3 = 1 << 3, SV_IN4 = 1 << 4, SV_IN5 = 1 << 5,
    SV_OUT0 = 1 << 8, SV_OUT1 = 1 << 9, SV_OUT2 = 1 << 10, SV_OUT3 = 1 << 11,
    SV_INS_FROM1 = 2 << 12, SV_INS_FROM2 = 3 << 12, /* every input from 1 (2) on: index lists */
    F_VIEW = 1 << 16 /* the output is a view of input 0 */
};
#define SV_IN(k) (1 << (k))
#define SV_OUT(k) (1 << (8 + (k)))
#define SV_ANY 0xffff /* the bits that save something */
/* Does a row with these flags save its input k? */
static inline bool saves_input(unsigned flags, int k) {
    unsigned from = (flags >> 12) & 0xf; /* SV_INS_FROM(k): k + 1 */
    return (flags & SV_IN(k)) || (from && k >= (int)from - 1);
}

/* The backward column of every OP row, declared from the table. NONE marks a
 * non-differentiable op. */
CT_INTERNAL int NONE(BackwardCtx *c, TensorImpl **gi);
#define OP(name, node, nout, fwd, bwd, flags) CT_INTERNAL int bwd(BackwardCtx *c, TensorImpl **gi);
#define UNARY(...)
#define BINARY(...)
#include "ops/ops.def"
#undef OP
#undef UNARY
#undef BINARY

/* Per op: its backward (NULL when not differentiable), node name and flags. */
typedef struct DerivInfo {
    backward_fn backward;
    const char *node_name;
    unsigned flags;
} DerivInfo;
CT_INTERNAL extern const DerivInfo deriv_info[OP_COUNT];

/* ---- grad mode (per thread) ---- */
CT_INTERNAL extern _Thread_local bool ag_grad_disabled; /* no_grad mode, per thread */
static inline bool ag_grad_enabled(void) { return !ag_grad_disabled; }
CT_INTERNAL bool ag_set_grad_enabled(bool on); /* returns the previous mode */

/* ---- meta ---- */
CT_INTERNAL AutogradMeta *ag_meta(TensorImpl *t); /* created on demand; NULL on OOM */
CT_INTERNAL bool ag_requires_grad(const TensorImpl *t);
CT_INTERNAL bool ag_is_leaf(const TensorImpl *t);
CT_INTERNAL Node *ag_grad_fn(const TensorImpl *t);
CT_INTERNAL Edge ag_gradient_edge(TensorImpl *t); /* retained fn, or {NULL} */
CT_INTERNAL int ag_check_view(const TensorImpl *t); /* -1: a no_grad or multi-output view rebased since */
/* A node with num_next edges, num_inputs output slots, nsaved saved variables
 * and nwords int64 words for the geometry of its input and output metas
 * (2 * ndim each) and its int arguments. */
CT_INTERNAL Node *ag_node_new(int kind, const char *name, int num_inputs, int num_next, int nsaved, int nwords);
/* n words of the node's memory (they must have been asked for at creation). */
CT_INTERNAL int64_t *ag_node_words(Node *n, int count);
CT_INTERNAL Node *ag_node_retain(Node *n);
CT_INTERNAL void ag_node_free(Node *n); /* the last reference went: free n and what only it kept */
static inline void ag_node_release(Node *n) {
    if (n && c10_unref(&n->refcount)) ag_node_free(n);
}
CT_INTERNAL void ag_set_history(TensorImpl *out, Node *fn, int output_nr);
CT_INTERNAL void ag_name_node(TensorImpl *t, int op, const char *name);
CT_INTERNAL void ag_save(SavedVariable *sv, TensorImpl *t, bool is_output);
/* The saved tensor for backward: new reference, or NULL with the error
 * ("Trying to backward through the graph a second time ..." or the in-place
 * version message). */
CT_INTERNAL TensorImpl *ag_unpack(Node *n, SavedVariable *sv, int output_nr);
/* A saved input, borrowed from the node (valid until its saved variables are
 * released), or NULL with the same errors. */
CT_INTERNAL TensorImpl *ag_unpack_input(Node *n, SavedVariable *sv, int input_nr);
CT_INTERNAL uint64_t ag_next_seq(void);
/* Fills m (one of n's metas) from t; the geometry goes into n's words. */
CT_INTERNAL void ag_input_meta(Node *n, InputMeta *m, const TensorImpl *t);
CT_INTERNAL void ag_copy_meta(Node *n, InputMeta *m, const InputMeta *from);
CT_INTERNAL void ag_release_saved(Node *n);

/* ---- the VariableType entry: run an op with history ---- */
CT_INTERNAL int ag_call(int op, const OpArgs *a, TensorImpl **out);
CT_INTERNAL TensorImpl *ag_call1(int op, const OpArgs *a);
/* In-place form: writes into a->t[0] (checks leaves, bumps the version,
 * rebases history). Returns 0/-1. */
CT_INTERNAL int ag_call_inplace(int op, OpArgs *a);

/* Convenience: the ag ops the derivative vocabulary and other layers use. All
 * return new references; NULL arguments give NULL (error kept). */
CT_INTERNAL TensorImpl *ag_unary(int op, TensorImpl *a);
CT_INTERNAL TensorImpl *ag_binary(int op, TensorImpl *a, TensorImpl *b);
CT_INTERNAL TensorImpl *ag_binary_scalar(int op, TensorImpl *a, double s);
CT_INTERNAL TensorImpl *ag_add_alpha(TensorImpl *a, TensorImpl *b, double alpha);
CT_INTERNAL TensorImpl *ag_wrapped_scalar(double v, ct_dtype like);
/* x as dtype d, differentiably (x itself, retained, when it has d already) */
CT_INTERNAL TensorImpl *ag_to_dtype(TensorImpl *x, ct_dtype d);
CT_INTERNAL TensorImpl *ag_sum_to_size(TensorImpl *g, const int64_t *shape, int ndim);
CT_INTERNAL TensorImpl *ag_zeros_like_meta(const InputMeta *m);

/* ---- backward formulas ---- */
struct BackwardCtx {
    Node *node;
    TensorImpl **go;                    /* gradients of the outputs (never NULL: zeros filled) */
    TensorImpl *in[OP_MAX_TENSORS];     /* saved inputs (unpacked) or NULL */
    TensorImpl *out[OP_MAX_OUTS];       /* saved outputs (unpacked) or NULL */
    bool needs[OP_MAX_TENSORS];         /* does input k want a gradient? */
    const OpArgs *args;                 /* scalar and int arguments */
};

/* A frame collects temporaries of a formula: F(x) hands x to the frame, which
 * releases it at ag_frame_end. Frames nest. */
CT_INTERNAL int ag_frame_begin(void);
CT_INTERNAL void ag_frame_end(int mark);
CT_INTERNAL TensorImpl *F(TensorImpl *t);

/* ---- the engine ---- */
typedef struct BackwardOpts {
    bool retain_graph, create_graph, allow_unused;
    TensorImpl **inputs;  /* autograd.grad: capture these gradients instead of accumulating */
    int ninputs;
    TensorImpl **results; /* ninputs results (new references or NULL) */
} BackwardOpts;
CT_INTERNAL int ag_run_backward(TensorImpl **roots, TensorImpl **grads, int nroots, const BackwardOpts *o);

/* ---- layer above: handles ---- */
/* Unwraps n handles into t[]; false (error kept) if any is NULL/dead. */
CT_INTERNAL bool api_unwrap(const ct_tensor *const *h, TensorImpl **t, int n);

/* anomaly mode (hooks.c): on, the engine names the forward op of a NaN gradient */
CT_INTERNAL extern bool ag_anomaly;
CT_INTERNAL int ag_anomaly_check(Node *n, TensorImpl **gi);

#endif /* CT_AUTOGRAD_H */
