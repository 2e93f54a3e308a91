/* graph.c: printing the backward graph (the notes' c.graph()) and a Graphviz
 * DOT export (as torchviz draws it).
 *
 * The tree: the root's grad_fn first, each node's next functions (in input
 * order; inputs that need no gradient are left out) two spaces deeper.
 * AccumulateGrad lines name the leaf's sizes and dtype. A DAG is printed as a
 * tree, but an interior node met a second time is printed once more as
 * "<name> (see above)" without its subtree, so the output stays linear in the
 * graph's size. Walks are iterative: a graph may be a chain of a million nodes. */
#include "autograd/autograd.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- a growing string ---- */
typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} Str;

static void put(Str *b, const char *fmt, ...) CT_PRINTF(2, 3);
static void put(Str *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->n;
        int k = vsnprintf(b->s ? b->s + b->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap <= b->n + (size_t)k) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* ---- a set of nodes: pointer -> id (open addressing) ---- */
typedef struct {
    Node **keys;
    int64_t *ids;
    int64_t cap, n;
} NodeMap;

static uint64_t hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* The id of n, or -1 when absent. */
static int64_t map_get(const NodeMap *m, const Node *n) {
    if (!m->cap) return -1;
    for (uint64_t i = hash_ptr(n) & (uint64_t)(m->cap - 1);; i = (i + 1) & (uint64_t)(m->cap - 1)) {
        if (!m->keys[i]) return -1;
        if (m->keys[i] == n) return m->ids[i];
    }
}

static bool map_put(NodeMap *m, Node *n, int64_t id) {
    if (2 * (m->n + 1) > m->cap) {
        int64_t cap = m->cap ? 2 * m->cap : 64;
        Node **keys = calloc((size_t)cap, sizeof *keys);
        int64_t *ids = calloc((size_t)cap, sizeof *ids);
        if (!keys || !ids) {
            free(keys);
            free(ids);
            return false;
        }
        for (int64_t j = 0; j < m->cap; j++) {
            if (!m->keys[j]) continue;
            uint64_t i = hash_ptr(m->keys[j]) & (uint64_t)(cap - 1);
            while (keys[i]) i = (i + 1) & (uint64_t)(cap - 1);
            keys[i] = m->keys[j];
            ids[i] = m->ids[j];
        }
        free(m->keys);
        free(m->ids);
        m->keys = keys, m->ids = ids, m->cap = cap;
    }
    uint64_t i = hash_ptr(n) & (uint64_t)(m->cap - 1);
    while (m->keys[i] && m->keys[i] != n) i = (i + 1) & (uint64_t)(m->cap - 1);
    if (!m->keys[i]) m->n++;
    m->keys[i] = n;
    m->ids[i] = id;
    return true;
}

static void map_free(NodeMap *m) {
    free(m->keys);
    free(m->ids);
}

/* ---- a stack of (node, depth) ---- */
typedef struct {
    Node *node;
    int64_t depth;
} Item;
typedef struct {
    Item *v;
    int64_t n, cap;
} Stack;

static bool push(Stack *s, Node *n, int64_t depth) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        Item *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return false;
        s->v = v, s->cap = cap;
    }
    s->v[s->n++] = (Item){n, depth};
    return true;
}

/* "[2, 3] float64" of an AccumulateGrad's leaf */
static void leaf_desc(Str *b, const Node *n, const char *sep) {
    const TensorImpl *v = n->variable;
    if (!v) return;
    put(b, "%s%s %s", sep, c10_shape_str(v->sizes, v->ndim), c10_dtype_names[v->dtype]);
    if (v->autograd && v->autograd->name) put(b, " %s", v->autograd->name);
}

/* The node a graph starts at: t's grad_fn, or a leaf's AccumulateGrad (which is
 * created on demand, as torch's grad_accumulator is). NULL: no graph. */
static Node *graph_root(TensorImpl *t) {
    Node *fn = ag_grad_fn(t);
    if (fn) return ag_node_retain(fn);
    if (!ag_requires_grad(t)) return NULL;
    return ag_gradient_edge(t).fn; /* a new reference */
}

static int tree(const ct_tensor *h, Str *b) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    Node *root = graph_root(t);
    if (!root) {
        put(b, "None\n");
        return b->oom ? c10_error_int("out of memory") : 0;
    }
    NodeMap seen = {0};
    Stack st = {0};
    bool ok = push(&st, root, 0);
    while (ok && st.n) {
        Item it = st.v[--st.n];
        Node *n = it.node;
        for (int64_t i = 0; i < it.depth; i++) put(b, "  ");
        put(b, "%s", n->name ? n->name : "?");
        if (n->kind == NODE_ACCUMULATE) leaf_desc(b, n, " ");
        bool interior = n->num_next > 0;
        if (interior && map_get(&seen, n) >= 0) {
            put(b, " (see above)\n");
            continue;
        }
        put(b, "\n");
        if (interior && !map_put(&seen, n, 0)) ok = false;
        for (int k = n->num_next - 1; k >= 0 && ok; k--)
            if (n->next[k].fn) ok = push(&st, n->next[k].fn, it.depth + 1);
    }
    free(st.v);
    map_free(&seen);
    ag_node_release(root);
    if (!ok || b->oom) return c10_error_int("out of memory");
    return 0;
}

/* Copies b into buf (truncated, NUL-terminated) and returns the full length. */
static int finish(Str *b, char *buf, size_t cap, int rc) {
    if (rc == 0 && b->n > (size_t)0x7fffffff) rc = c10_error_int("graph: the text is too long");
    if (rc == 0 && buf && cap) {
        size_t k = b->n < cap - 1 ? b->n : cap - 1;
        if (k) memcpy(buf, b->s, k);
        buf[k] = '\0';
    }
    int n = rc == 0 ? (int)b->n : -1;
    free(b->s);
    return n;
}

int ct_graph_repr(const ct_tensor *t, char *buf, size_t cap) {
    Str b = {0};
    return finish(&b, buf, cap, tree(t, &b));
}

int ct_print_graph(const ct_tensor *t) {
    Str b = {0};
    int rc = tree(t, &b);
    if (rc == 0 && b.n) {
        fwrite(b.s, 1, b.n, stdout);
        fflush(stdout);
    }
    free(b.s);
    return rc;
}

/* ---- DOT ---- */

static void put_label(Str *b, const char *s) {
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') put(b, "\\%c", *s);
        else put(b, "%c", *s);
    }
}

static int dot(const ct_tensor *h, Str *b) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    put(b, "digraph ctorch {\n");
    put(b, "  node [shape=box, style=filled, fillcolor=lightgrey, fontname=monospace, fontsize=10];\n");
    put(b, "  out [label=\"%s %s\", fillcolor=darkolivegreen1];\n", c10_shape_str(t->sizes, t->ndim),
        c10_dtype_names[t->dtype]);
    Node *root = graph_root(t);
    if (!root) {
        put(b, "}\n");
        return b->oom ? c10_error_int("out of memory") : 0;
    }
    NodeMap ids = {0};
    Stack st = {0}; /* breadth-first: st.v is the queue, st.n its end */
    int64_t head = 0, next_id = 0;
    bool ok = map_put(&ids, root, next_id++) && push(&st, root, 0);
    put(b, "  n0 -> out;\n");
    while (ok && head < st.n) {
        Node *n = st.v[head++].node;
        int64_t id = map_get(&ids, n);
        put(b, "  n%lld [label=\"", (long long)id);
        put_label(b, n->name ? n->name : "?");
        if (n->kind == NODE_ACCUMULATE) {
            Str d = {0};
            leaf_desc(&d, n, "\\n");
            if (d.oom) ok = false;
            else if (d.s) put(b, "%s", d.s);
            free(d.s);
        }
        put(b, "\"%s];\n", n->kind == NODE_ACCUMULATE ? ", fillcolor=lightblue" : "");
        for (int k = 0; k < n->num_next && ok; k++) {
            Node *f = n->next[k].fn;
            if (!f) continue;
            int64_t fid = map_get(&ids, f);
            if (fid < 0) {
                fid = next_id++;
                ok = map_put(&ids, f, fid) && push(&st, f, 0);
            }
            put(b, "  n%lld -> n%lld;\n", (long long)fid, (long long)id);
        }
    }
    put(b, "}\n");
    free(st.v);
    map_free(&ids);
    ag_node_release(root);
    if (!ok || b->oom) return c10_error_int("out of memory");
    return 0;
}

int ct_graph_dot(const ct_tensor *t, char *buf, size_t cap) {
    Str b = {0};
    return finish(&b, buf, cap, dot(t, &b));
}
