/* module.c: ct_module, torch.nn.Module in C: named parameters, buffers and
 * children, train/eval, recursive iteration, deep clone, PyTorch's repr, and
 * state_dict / load_state_dict. */
#include "nn/nn.h"
#include <stdarg.h>

typedef struct NamedT {
    char *name;
    ct_tensor *t; /* a handle of no scope, owned by the module */
} NamedT;
typedef struct NamedM {
    char *name;
    ct_module *m; /* owned */
} NamedM;
typedef struct Flat { /* recursive listings handed out by named_parameters/buffers */
    char **names;
    ct_tensor **ts;
    int n, cap;
} Flat;

struct ct_module {
    ct_module_ops ops;
    char *type_name;
    void *ctx;
    NamedT *params, *bufs;
    int np, capp, nb, capb;
    NamedM *kids;
    int nk, capk;
    bool training;
    ct_module *parent;
    Flat fp, fb;
};

/* ------------------------------------------------------------ built-in ctx */
void *nn_cfg_clone(const void *ctx) {
    NnCfg *c = malloc(sizeof *c);
    if (c) memcpy(c, ctx, sizeof *c);
    return c;
}
void nn_cfg_free(void *ctx) { free(ctx); }

ct_module *nn_builtin(const ct_module_ops *ops, const NnCfg *cfg) {
    NnCfg *c = nn_cfg_clone(cfg);
    if (!c) return c10_error("%s: out of memory", ops->name);
    ct_module *m = ct_module_new(ops, c);
    if (!m) free(c);
    return m;
}

/* ------------------------------------------------------------ lifetime */
ct_module *ct_module_new(const ct_module_ops *ops, void *ctx) {
    if (!ops || !ops->name) return c10_error("module_new: ops and ops->name must not be NULL");
    ct_module *m = calloc(1, sizeof *m);
    if (!m) return c10_error("module_new: out of memory");
    m->ops = *ops;
    m->type_name = nn_strdup(ops->name);
    if (!m->type_name) {
        free(m);
        return c10_error("module_new: out of memory");
    }
    m->ops.name = m->type_name;
    m->ctx = ctx;
    m->training = true;
    return m;
}

static void flat_clear(Flat *f) {
    for (int i = 0; i < f->n; i++) free(f->names[i]);
    f->n = 0;
}
static void flat_free(Flat *f) {
    flat_clear(f);
    free(f->names);
    free(f->ts);
    memset(f, 0, sizeof *f);
}

void ct_module_free(ct_module *m) {
    if (!m) return;
    for (int i = 0; i < m->np; i++) {
        free(m->params[i].name);
        ct_free(m->params[i].t);
    }
    for (int i = 0; i < m->nb; i++) {
        free(m->bufs[i].name);
        ct_free(m->bufs[i].t);
    }
    for (int i = 0; i < m->nk; i++) {
        free(m->kids[i].name);
        ct_module_free(m->kids[i].m);
    }
    free(m->params);
    free(m->bufs);
    free(m->kids);
    flat_free(&m->fp);
    flat_free(&m->fb);
    if (m->ops.free_ctx) m->ops.free_ctx(m->ctx);
    free(m->type_name);
    free(m);
}

/* ------------------------------------------------------------ registration */
static bool valid_name(const char *kind, const char *name) {
    if (!name || !*name) return c10_error_int("%s name can't be empty string \"\"", kind), false;
    if (strchr(name, '.')) return c10_error_int("%s name can't contain \".\", got: %s", kind, name), false;
    return true;
}

static bool name_taken(const ct_module *m, const char *name) {
    for (int i = 0; i < m->np; i++)
        if (!strcmp(m->params[i].name, name)) return true;
    for (int i = 0; i < m->nb; i++)
        if (!strcmp(m->bufs[i].name, name)) return true;
    for (int i = 0; i < m->nk; i++)
        if (!strcmp(m->kids[i].name, name)) return true;
    return false;
}

static int add_tensor(ct_module *m, NamedT **arr, int *n, int *cap, const char *kind, const char *name,
                      ct_tensor *t, bool param) {
    if (!m) return c10_error_int("register_%s: module is NULL", kind);
    if (!c10_unwrap(t)) return -1;
    if (!valid_name(kind, name)) return -1;
    if (name_taken(m, name)) return c10_error_int("attribute '%s' already exists", name);
    if (param && !ct_dtype_is_floating(ct_dtype_of(t)))
        return c10_error_int("register_parameter: only Tensors of floating point dtype can require gradients");
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 4;
        NamedT *a = realloc(*arr, (size_t)nc * sizeof *a);
        if (!a) return c10_error_int("register_%s: out of memory", kind);
        *arr = a;
        *cap = nc;
    }
    ct_tensor *h = ct_retain(t);
    char *s = nn_strdup(name);
    if (!h || !s) {
        ct_free(h);
        free(s);
        return c10_error_int("register_%s: out of memory", kind);
    }
    if (param && !ct_is_leaf(h)) {
        /* a parameter is a leaf: detach a non-leaf (nn.Parameter(t) does the same) */
        ct_tensor *d = nn_own(ct_detach(h));
        ct_free(h);
        if (!d) {
            free(s);
            return -1;
        }
        h = d;
    }
    if (param && ct_set_requires_grad(h, true) < 0) {
        ct_free(h);
        free(s);
        return -1;
    }
    (*arr)[*n].name = s;
    (*arr)[(*n)++].t = h;
    return 0;
}

int ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t) {
    return m ? add_tensor(m, &m->params, &m->np, &m->capp, "parameter", name, t, true)
             : c10_error_int("register_parameter: module is NULL");
}
int ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t) {
    return m ? add_tensor(m, &m->bufs, &m->nb, &m->capb, "buffer", name, t, false)
             : c10_error_int("register_buffer: module is NULL");
}

int ct_module_register_module(ct_module *m, const char *name, ct_module *child) {
    if (!m || !child) return c10_error_int("register_module: module is NULL");
    if (!valid_name("module", name)) return -1;
    if (name_taken(m, name)) return c10_error_int("attribute '%s' already exists", name);
    if (m->nk == m->capk) {
        int nc = m->capk ? 2 * m->capk : 4;
        NamedM *a = realloc(m->kids, (size_t)nc * sizeof *a);
        if (!a) return c10_error_int("register_module: out of memory");
        m->kids = a;
        m->capk = nc;
    }
    /* Already owned (by m itself or another module, or m's ancestor): add a deep copy. */
    bool owned = child->parent != NULL;
    for (ct_module *a = m; a && !owned; a = a->parent)
        if (a == child) owned = true;
    ct_module *c = owned ? ct_module_clone(child) : child;
    char *s = nn_strdup(name);
    if (!c || !s) {
        if (c != child) ct_module_free(c);
        free(s);
        return c ? c10_error_int("register_module: out of memory") : -1;
    }
    c->parent = m;
    m->kids[m->nk].name = s;
    m->kids[m->nk++].m = c;
    return 0;
}

int ct_nn_append(ct_module *container, ct_module *m) {
    if (!container) return c10_error_int("append: module is NULL");
    char name[24];
    snprintf(name, sizeof name, "%d", container->nk);
    return ct_module_register_module(container, name, m);
}

/* ------------------------------------------------------------ forward */
ct_tensor *ct_module_forward_n(ct_module *m, const ct_tensor *const *inputs, int n) {
    if (!m) return c10_error("forward: module is NULL");
    if (n < 0 || (n > 0 && !inputs)) return c10_error("forward: invalid argument: inputs is NULL");
    for (int i = 0; i < n; i++)
        if (!c10_unwrap(inputs[i])) return NULL;
    if (!m->ops.forward)
        return c10_error("Module [%s] is missing the required \"forward\" function", m->type_name);
    return m->ops.forward(m, inputs, n, m->ctx);
}
ct_tensor *ct_module_forward(ct_module *m, const ct_tensor *input) {
    const ct_tensor *in[1] = {input};
    return ct_module_forward_n(m, in, 1);
}
ct_tensor *ct_module_forward2(ct_module *m, const ct_tensor *a, const ct_tensor *b) {
    const ct_tensor *in[2] = {a, b};
    return ct_module_forward_n(m, in, 2);
}

/* ------------------------------------------------------------ lookup */
const char *ct_module_type_name(const ct_module *m) {
    return m ? m->type_name : c10_error("module is NULL");
}
void *ct_module_context(const ct_module *m) { return m ? m->ctx : NULL; }
int ct_module_num_children(const ct_module *m) { return m ? m->nk : c10_error_int("module is NULL"); }
ct_module *ct_module_child_at(const ct_module *m, int i) {
    if (!m) return c10_error("module is NULL");
    if (i < 0 || i >= m->nk) return c10_error("index %d is out of range", i);
    return m->kids[i].m;
}
const char *ct_module_child_name(const ct_module *m, int i) {
    if (!m) return c10_error("module is NULL");
    if (i < 0 || i >= m->nk) return c10_error("index %d is out of range", i);
    return m->kids[i].name;
}

ct_tensor *nn_param(const ct_module *m, const char *name) {
    for (int i = 0; i < m->np; i++)
        if (!strcmp(m->params[i].name, name)) return m->params[i].t;
    return NULL;
}
ct_tensor *nn_buffer(const ct_module *m, const char *name) {
    for (int i = 0; i < m->nb; i++)
        if (!strcmp(m->bufs[i].name, name)) return m->bufs[i].t;
    return NULL;
}

static ct_module *own_child(const ct_module *m, const char *name, size_t len) {
    for (int i = 0; i < m->nk; i++)
        if (strlen(m->kids[i].name) == len && !strncmp(m->kids[i].name, name, len)) return m->kids[i].m;
    return NULL;
}

ct_module *ct_module_child(const ct_module *m, const char *name) {
    if (!m || !name) return c10_error("module_child: module or name is NULL");
    const ct_module *cur = m;
    const char *p = name;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        ct_module *c = own_child(cur, p, len);
        if (!c) return c10_error("%s has no attribute `%s`", cur->type_name, name);
        if (!dot) return c;
        cur = c;
        p = dot + 1;
    }
}

ct_tensor *ct_module_get(const ct_module *m, const char *name) {
    if (!m || !name) return c10_error("module_get: module or name is NULL");
    const ct_module *cur = m;
    const char *p = name, *dot;
    while ((dot = strchr(p, '.'))) {
        cur = own_child(cur, p, (size_t)(dot - p));
        if (!cur) return c10_error("%s has no attribute `%s`", m->type_name, name);
        p = dot + 1;
    }
    ct_tensor *t = nn_param(cur, p);
    if (!t) t = nn_buffer(cur, p);
    if (!t) return c10_error("%s has no parameter or buffer `%s`", m->type_name, name);
    return t;
}

/* ------------------------------------------------------------ recursion */
static int flat_push(Flat *f, const char *prefix, const char *name, ct_tensor *t) {
    if (f->n == f->cap) {
        int nc = f->cap ? 2 * f->cap : 16;
        char **nn = realloc(f->names, (size_t)nc * sizeof *nn);
        if (!nn) return c10_error_int("out of memory");
        f->names = nn;
        ct_tensor **nt = realloc(f->ts, (size_t)nc * sizeof *nt);
        if (!nt) return c10_error_int("out of memory");
        f->ts = nt;
        f->cap = nc;
    }
    size_t lp = strlen(prefix), ln = strlen(name);
    char *s = malloc(lp + ln + 1);
    if (!s) return c10_error_int("out of memory");
    memcpy(s, prefix, lp);
    memcpy(s + lp, name, ln + 1);
    f->names[f->n] = s;
    f->ts[f->n++] = t;
    return 0;
}

static int collect(const ct_module *m, const char *prefix, Flat *f, bool params, bool bufs) {
    if (params)
        for (int i = 0; i < m->np; i++)
            if (flat_push(f, prefix, m->params[i].name, m->params[i].t) < 0) return -1;
    if (bufs)
        for (int i = 0; i < m->nb; i++)
            if (flat_push(f, prefix, m->bufs[i].name, m->bufs[i].t) < 0) return -1;
    for (int i = 0; i < m->nk; i++) {
        size_t lp = strlen(prefix), ln = strlen(m->kids[i].name);
        char *p = malloc(lp + ln + 2);
        if (!p) return c10_error_int("out of memory");
        memcpy(p, prefix, lp);
        memcpy(p + lp, m->kids[i].name, ln);
        p[lp + ln] = '.';
        p[lp + ln + 1] = 0;
        int r = collect(m->kids[i].m, p, f, params, bufs);
        free(p);
        if (r < 0) return -1;
    }
    return 0;
}

static int named(ct_module *m, Flat *f, bool params, const char **names, ct_tensor **ts, int cap) {
    if (!m) return c10_error_int("named_parameters: module is NULL");
    flat_clear(f);
    if (collect(m, "", f, params, !params) < 0) return -1;
    for (int i = 0; i < f->n && i < cap; i++) {
        if (names) names[i] = f->names[i];
        if (ts) ts[i] = f->ts[i];
    }
    return f->n;
}
int ct_module_named_parameters(ct_module *m, const char **names, ct_tensor **params, int cap) {
    return named(m, m ? &m->fp : NULL, true, names, params, cap);
}
int ct_module_named_buffers(ct_module *m, const char **names, ct_tensor **buffers, int cap) {
    return named(m, m ? &m->fb : NULL, false, names, buffers, cap);
}

static int64_t count_params(const ct_module *m) {
    int64_t n = 0;
    for (int i = 0; i < m->np; i++) n += ct_numel(m->params[i].t);
    for (int i = 0; i < m->nk; i++) n += count_params(m->kids[i].m);
    return n;
}
int64_t ct_module_num_parameters(ct_module *m) {
    return m ? count_params(m) : c10_error_int("module is NULL");
}

int ct_module_zero_grad(ct_module *m, bool set_to_none) {
    if (!m) return c10_error_int("zero_grad: module is NULL");
    for (int i = 0; i < m->np; i++)
        if (ct_zero_grad(m->params[i].t, set_to_none) < 0) return -1;
    for (int i = 0; i < m->nk; i++)
        if (ct_module_zero_grad(m->kids[i].m, set_to_none) < 0) return -1;
    return 0;
}

int ct_module_train(ct_module *m, bool mode) {
    if (!m) return c10_error_int("train: module is NULL");
    m->training = mode;
    for (int i = 0; i < m->nk; i++) ct_module_train(m->kids[i].m, mode);
    return 0;
}
int ct_module_eval(ct_module *m) { return ct_module_train(m, false); }
bool ct_module_is_training(const ct_module *m) { return m && m->training; }

/* ------------------------------------------------------------ clone */
static ct_tensor *copy_tensor(ct_tensor *t) {
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *c = nn_own(ct_clone(t));
    ct_set_grad_enabled(prev);
    return c;
}

ct_module *ct_module_clone(const ct_module *m) {
    if (!m) return c10_error("clone: module is NULL");
    void *ctx = m->ctx;
    if (m->ops.clone_ctx && m->ctx) {
        ctx = m->ops.clone_ctx(m->ctx);
        if (!ctx) return c10_has_error() ? NULL : c10_error("clone: clone_ctx of %s failed", m->type_name);
    }
    ct_module_ops ops = m->ops;
    ct_module *c = ct_module_new(&ops, ctx);
    if (!c) {
        if (ctx != m->ctx && m->ops.free_ctx) m->ops.free_ctx(ctx);
        return NULL;
    }
    if (!m->ops.clone_ctx) c->ops.free_ctx = NULL; /* a shared ctx is freed by the original only */
    c->training = m->training;
    for (int i = 0; i < m->np; i++) {
        ct_tensor *t = copy_tensor(m->params[i].t);
        int r = t ? ct_module_register_parameter(c, m->params[i].name, t) : -1;
        ct_free(t);
        if (r < 0) goto fail;
    }
    for (int i = 0; i < m->nb; i++) {
        ct_tensor *t = copy_tensor(m->bufs[i].t);
        int r = t ? ct_module_register_buffer(c, m->bufs[i].name, t) : -1;
        ct_free(t);
        if (r < 0) goto fail;
    }
    for (int i = 0; i < m->nk; i++) {
        ct_module *k = ct_module_clone(m->kids[i].m);
        if (!k || ct_module_register_module(c, m->kids[i].name, k) < 0) {
            ct_module_free(k);
            goto fail;
        }
    }
    return c;
fail:
    ct_module_free(c);
    return NULL;
}

/* ------------------------------------------------------------ repr */
typedef struct Buf {
    char *p;
    size_t len, cap;
    bool oom;
} Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->len + n + 1) nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
static void buf_str(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }

/* Appends s with every line after the first indented by two spaces (_addindent). */
static void buf_indent(Buf *b, const char *s) {
    const char *nl;
    while ((nl = strchr(s, '\n'))) {
        buf_add(b, s, (size_t)(nl - s) + 1);
        buf_str(b, "  ");
        s = nl + 1;
    }
    buf_str(b, s);
}

static int repr_into(const ct_module *m, Buf *b) {
    char *extra = NULL;
    if (m->ops.extra_repr) {
        int n = m->ops.extra_repr(m, NULL, 0, m->ctx);
        if (n < 0) return -1;
        extra = malloc((size_t)n + 1);
        if (!extra) return c10_error_int("repr: out of memory");
        m->ops.extra_repr(m, extra, (size_t)n + 1, m->ctx);
    }
    buf_str(b, m->type_name);
    buf_str(b, "(");
    bool has_extra = extra && *extra;
    bool one_line_extra = has_extra && !strchr(extra, '\n');
    if (has_extra && one_line_extra && m->nk == 0) {
        buf_str(b, extra);
    } else if (has_extra || m->nk) {
        if (has_extra) {
            buf_str(b, "\n  ");
            buf_indent(b, extra); /* extra lines are each prefixed by "\n  " */
        }
        for (int i = 0; i < m->nk; i++) {
            buf_str(b, "\n  (");
            buf_str(b, m->kids[i].name);
            buf_str(b, "): ");
            Buf sub = {0};
            if (repr_into(m->kids[i].m, &sub) < 0) {
                free(sub.p);
                free(extra);
                return -1;
            }
            if (sub.oom) b->oom = true;
            else buf_indent(b, sub.p);
            free(sub.p);
        }
        buf_str(b, "\n");
    }
    buf_str(b, ")");
    free(extra);
    return 0;
}

int ct_module_repr(const ct_module *m, char *buf, size_t cap) {
    if (!m) return c10_error_int("repr: module is NULL");
    Buf b = {0};
    if (repr_into(m, &b) < 0) {
        free(b.p);
        return -1;
    }
    if (b.oom) {
        free(b.p);
        return c10_error_int("repr: out of memory");
    }
    if (buf && cap) {
        size_t n = b.len < cap - 1 ? b.len : cap - 1;
        memcpy(buf, b.p, n);
        buf[n] = 0;
    }
    int len = (int)b.len;
    free(b.p);
    return len;
}

int ct_module_print(const ct_module *m) {
    int n = ct_module_repr(m, NULL, 0);
    if (n < 0) return -1;
    char *s = malloc((size_t)n + 1);
    if (!s) return c10_error_int("print: out of memory");
    ct_module_repr(m, s, (size_t)n + 1);
    puts(s);
    free(s);
    return 0;
}

/* ------------------------------------------------------------ state dict */
ct_state_dict *ct_module_state_dict(ct_module *m) {
    if (!m) return c10_error("state_dict: module is NULL");
    Flat f = {0};
    ct_state_dict *sd = NULL;
    if (collect(m, "", &f, true, true) < 0) goto done;
    sd = ct_state_dict_new();
    if (!sd) goto done;
    for (int i = 0; i < f.n; i++)
        if (ct_state_dict_set(sd, f.names[i], f.ts[i]) < 0) {
            ct_state_dict_free(sd);
            sd = NULL;
            goto done;
        }
done:
    flat_free(&f);
    return sd;
}

static void shape_text(char *out, size_t cap, const ct_tensor *t) {
    snprintf(out, cap, "torch.Size(%s)", c10_shape_str(ct_sizes(t), ct_ndim(t)));
}

/* A batch norm's num_batches_tracked that a state dict lacks (older
 * checkpoints) is 0, not missing, as torch's _NormBase loads it. */
static bool is_num_batches_tracked(const char *name) {
    const char *dot = strrchr(name, '.');
    return !strcmp(dot ? dot + 1 : name, "num_batches_tracked");
}

int ct_module_load_state_dict(ct_module *m, const ct_state_dict *sd, bool strict) {
    if (!m || !sd) return c10_error_int("load_state_dict: module or state dict is NULL");
    Flat f = {0};
    if (collect(m, "", &f, true, true) < 0) {
        flat_free(&f);
        return -1;
    }
    Buf missing = {0}, unexpected = {0}, sizes = {0};
    int nsd = ct_state_dict_size(sd);
    char line[512];
    bool bad = false;
    for (int i = 0; i < f.n; i++) {
        int k = ct_state_dict_find(sd, f.names[i]);
        if (k < 0) {
            if (strict && !is_num_batches_tracked(f.names[i])) {
                buf_str(&missing, missing.len ? ", \"" : "\"");
                buf_str(&missing, f.names[i]);
                buf_str(&missing, "\"");
                bad = true;
            }
            continue;
        }
        ct_tensor *src = ct_state_dict_tensor(sd, k);
        if (!src) {
            bad = true;
            continue;
        }
        int nd = ct_ndim(src);
        if (nd != ct_ndim(f.ts[i]) ||
            memcmp(ct_sizes(src), ct_sizes(f.ts[i]), (size_t)nd * sizeof(int64_t)) != 0) {
            char a[160], c[160];
            shape_text(a, sizeof a, src);
            shape_text(c, sizeof c, f.ts[i]);
            snprintf(line, sizeof line,
                     "\n\tsize mismatch for %s: copying a param with shape %s from checkpoint, the shape in "
                     "current model is %s.",
                     f.names[i], a, c);
            buf_str(&sizes, line);
            bad = true;
        }
        ct_free(src);
    }
    if (strict)
        for (int k = 0; k < nsd; k++) {
            const char *name = ct_state_dict_name(sd, k);
            bool found = false;
            for (int i = 0; i < f.n && !found; i++) found = !strcmp(f.names[i], name);
            if (!found) {
                buf_str(&unexpected, unexpected.len ? ", \"" : "\"");
                buf_str(&unexpected, name);
                buf_str(&unexpected, "\"");
                bad = true;
            }
        }
    int rc = 0;
    if (bad) {
        if (c10_has_error() && !missing.len && !unexpected.len && !sizes.len) {
            rc = -1;
        } else {
            Buf msg = {0};
            buf_str(&msg, "Error(s) in loading state_dict for ");
            buf_str(&msg, m->type_name);
            buf_str(&msg, ":");
            if (missing.len) {
                buf_str(&msg, "\n\tMissing key(s) in state_dict: ");
                buf_str(&msg, missing.p);
                buf_str(&msg, ". ");
            }
            if (unexpected.len) {
                buf_str(&msg, "\n\tUnexpected key(s) in state_dict: ");
                buf_str(&msg, unexpected.p);
                buf_str(&msg, ". ");
            }
            if (sizes.len) buf_str(&msg, sizes.p);
            rc = c10_error_int("%s", msg.p ? msg.p : "load_state_dict: out of memory");
            free(msg.p);
        }
    } else {
        bool prev = ct_set_grad_enabled(false);
        for (int i = 0; i < f.n && rc == 0; i++) {
            int k = ct_state_dict_find(sd, f.names[i]);
            if (k < 0 && is_num_batches_tracked(f.names[i])) rc = ct_fill_(f.ts[i], 0); /* as torch's _NormBase */
            if (k < 0) continue;
            ct_tensor *src = ct_state_dict_tensor(sd, k);
            if (!src || ct_copy_(f.ts[i], src) < 0) rc = -1;
            ct_free(src);
        }
        ct_set_grad_enabled(prev);
    }
    free(missing.p);
    free(unexpected.p);
    free(sizes.p);
    flat_free(&f);
    return rc;
}

int ct_module_save(ct_module *m, const char *path) {
    ct_state_dict *sd = ct_module_state_dict(m);
    if (!sd) return -1;
    int r = ct_safetensors_save(sd, path);
    ct_state_dict_free(sd);
    return r;
}

int ct_module_load(ct_module *m, const char *path, bool strict) {
    if (!m) return c10_error_int("load: module is NULL");
    ct_state_dict *sd = ct_safetensors_load(path);
    if (!sd) return -1;
    int r = ct_module_load_state_dict(m, sd, strict);
    ct_state_dict_free(sd);
    return r;
}

/* ------------------------------------------------------------ helpers */
ct_tensor *nn_add_tensor(ct_module *m, const char *name, const int64_t *shape, int ndim, ct_dtype dtype,
                         bool param) {
    ct_tensor *t = nn_own(ct_zeros(shape, ndim, dtype));
    if (!t) return NULL;
    int r = param ? ct_module_register_parameter(m, name, t) : ct_module_register_buffer(m, name, t);
    ct_free(t);
    if (r < 0) return NULL;
    return param ? nn_param(m, name) : nn_buffer(m, name);
}
