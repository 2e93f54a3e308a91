/* optim.c: torch.optim's SGD, Adam, AdamW and RMSprop with their exact update
 * rules (torch 1.13, single-tensor path), parameter groups, state save/load,
 * and clip_grad_norm_. Updates run in no-grad mode, in place, as one fused
 * elementwise loop per parameter over its contiguous data (float32/float64;
 * a parameter of another layout through a contiguous copy),
 * performing torch's operations in torch's order with the scalars cast to the
 * parameter's dtype, as ATen's kernels do. */
#include "nn/nn.h"

enum { O_SGD, O_ADAM, O_ADAMW, O_RMSPROP };
static const char *const kind_name[] = {"SGD", "Adam", "AdamW", "RMSprop"};
/* the state buffers of each optimizer, in torch's names */
static const char *const buf_names[4][3] = {
    {"momentum_buffer", NULL, NULL},
    {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    {"square_avg", "momentum_buffer", "grad_avg"},
};

typedef struct Group {
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps, alpha;
    double initial_lr; /* torch's group['initial_lr']: NaN until a scheduler sets it */
    bool nesterov, amsgrad, centered;
} Group;

typedef struct PState {
    ct_tensor *p;      /* handle of no scope */
    int group;
    ct_tensor *buf[3]; /* state buffers (handles of no scope), NULL until used */
    double step;
} PState;

struct ct_optimizer {
    int kind;
    Group *g;
    int ng;
    PState *ps;
    int np;
};

/* ------------------------------------------------------------ construction */
static int add_params(ct_optimizer *o, ct_tensor *const *params, int n, int group) {
    if (n < 0 || (n > 0 && !params)) return c10_error_int("optimizer: invalid parameter list");
    PState *ps = realloc(o->ps, (size_t)(o->np + n + 1) * sizeof *ps);
    if (!ps) return c10_error_int("optimizer: out of memory");
    o->ps = ps;
    for (int i = 0; i < n; i++) { /* torch's checks of each tensor first, then the duplicates */
        ct_tensor *p = params[i];
        if (!c10_unwrap(p)) return -1;
        ct_dtype dt = ct_dtype_of(p);
        if (dt != CT_FLOAT32 && dt != CT_FLOAT64)
            return c10_error_int("%s: parameters must be float32 or float64 tensors, got %s", kind_name[o->kind],
                                 ct_dtype_name(dt));
        if (!ct_is_leaf(p)) return c10_error_int("can't optimize a non-leaf Tensor");
    }
    for (int i = 0; i < n; i++) /* torch 1.13 warns of these and then updates such a tensor twice a step */
        for (int j = 0; j < i; j++)
            if (c10_unwrap(params[j]) == c10_unwrap(params[i]))
                return c10_error_int("optimizer contains a parameter group with duplicate parameters");
    for (int i = 0; i < n; i++) {
        ct_tensor *p = params[i];
        for (int j = 0; j < o->np; j++)
            if (c10_unwrap(o->ps[j].p) == c10_unwrap(p))
                return c10_error_int("some parameters appear in more than one parameter group");
        ct_tensor *h = ct_retain(p);
        if (!h) return -1;
        memset(&o->ps[o->np], 0, sizeof o->ps[o->np]);
        o->ps[o->np].p = h;
        o->ps[o->np++].group = group;
    }
    return 0;
}

/* torch's ValueError for a hyperparameter, the number as Python prints it ("-1.0"). */
COLD_CODE static void *invalid(const char *what, double v) {
    char b[40];
    nn_pyfloat(b, sizeof b, v);
    return c10_error("Invalid %s: %s", what, b);
}

static ct_optimizer *make(int kind, ct_tensor *const *params, int n, Group g) {
    const char *name = kind_name[kind];
    /* torch's checks in its order: SGD tests `v < 0` (a NaN passes), the others `not 0 <= v` */
    bool sgd = kind == O_SGD, adam = kind == O_ADAM || kind == O_ADAMW;
    if (sgd ? g.lr < 0 : !(g.lr >= 0)) return invalid("learning rate", g.lr);
    if (!sgd && !(g.eps >= 0)) return invalid("epsilon value", g.eps);
    if (adam && !(g.beta1 >= 0 && g.beta1 < 1)) return invalid("beta parameter at index 0", g.beta1);
    if (adam && !(g.beta2 >= 0 && g.beta2 < 1)) return invalid("beta parameter at index 1", g.beta2);
    if (sgd ? g.momentum < 0 : !(g.momentum >= 0)) return invalid("momentum value", g.momentum);
    if (sgd ? g.weight_decay < 0 : !(g.weight_decay >= 0)) return invalid("weight_decay value", g.weight_decay);
    if (kind == O_RMSPROP && !(g.alpha >= 0)) return invalid("alpha value", g.alpha);
    if (kind == O_SGD && g.nesterov && (g.momentum <= 0 || g.dampening != 0))
        return c10_error("Nesterov momentum requires a momentum and zero dampening");
    if (n == 0) return c10_error("optimizer got an empty parameter list");
    (void)name;
    ct_optimizer *o = calloc(1, sizeof *o);
    if (!o || !(o->g = malloc(sizeof *o->g))) {
        free(o);
        return c10_error("optimizer: out of memory");
    }
    o->kind = kind;
    o->g[0] = g;
    o->g[0].initial_lr = NAN;
    o->ng = 1;
    if (add_params(o, params, n, 0) < 0) {
        ct_optimizer_free(o);
        return NULL;
    }
    return o;
}

ct_optimizer *ct_optim_sgd(ct_tensor *const *params, int n, double lr, double momentum, double dampening,
                           double weight_decay, bool nesterov) {
    Group g = {.lr = lr, .momentum = momentum, .dampening = dampening, .weight_decay = weight_decay,
               .nesterov = nesterov};
    return make(O_SGD, params, n, g);
}
ct_optimizer *ct_optim_adam(ct_tensor *const *params, int n, double lr, double beta1, double beta2, double eps,
                            double weight_decay, bool amsgrad) {
    Group g = {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay,
               .amsgrad = amsgrad};
    return make(O_ADAM, params, n, g);
}
ct_optimizer *ct_optim_adamw(ct_tensor *const *params, int n, double lr, double beta1, double beta2, double eps,
                             double weight_decay, bool amsgrad) {
    Group g = {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay,
               .amsgrad = amsgrad};
    return make(O_ADAMW, params, n, g);
}
ct_optimizer *ct_optim_rmsprop(ct_tensor *const *params, int n, double lr, double alpha, double eps,
                               double weight_decay, double momentum, bool centered) {
    Group g = {.lr = lr, .alpha = alpha, .eps = eps, .weight_decay = weight_decay, .momentum = momentum,
               .centered = centered};
    return make(O_RMSPROP, params, n, g);
}

int ct_optimizer_add_param_group(ct_optimizer *o, ct_tensor *const *params, int n, double lr) {
    if (!o) return c10_error_int("add_param_group: optimizer is NULL");
    Group *g = realloc(o->g, (size_t)(o->ng + 1) * sizeof *g);
    if (!g) return c10_error_int("add_param_group: out of memory");
    o->g = g;
    int np0 = o->np;
    if (add_params(o, params, n, o->ng) < 0) {
        for (int i = np0; i < o->np; i++) ct_free(o->ps[i].p);
        o->np = np0;
        return -1;
    }
    o->g[o->ng] = o->g[0];
    o->g[o->ng].initial_lr = NAN;
    o->g[o->ng++].lr = lr;
    return 0;
}

void ct_optimizer_free(ct_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->np; i++) {
        ct_free(o->ps[i].p);
        for (int k = 0; k < 3; k++) ct_free(o->ps[i].buf[k]);
    }
    free(o->ps);
    free(o->g);
    free(o);
}

int ct_optimizer_num_groups(const ct_optimizer *o) { return o ? o->ng : c10_error_int("optimizer is NULL"); }
double ct_optimizer_get_lr(const ct_optimizer *o, int group) {
    if (!o || group < 0 || group >= o->ng) return c10_error_int("get_lr: no parameter group %d", group), NAN;
    return o->g[group].lr;
}
double optim_initial_lr(ct_optimizer *o, int group) {
    Group *G = &o->g[group];
    if (isnan(G->initial_lr)) G->initial_lr = G->lr; /* group.setdefault('initial_lr', group['lr']) */
    return G->initial_lr;
}
int ct_optimizer_set_lr(ct_optimizer *o, int group, double lr) {
    if (!o || group < 0 || group >= o->ng) return c10_error_int("set_lr: no parameter group %d", group);
    o->g[group].lr = lr;
    return 0;
}

int ct_optimizer_zero_grad(ct_optimizer *o, bool set_to_none) {
    if (!o) return c10_error_int("zero_grad: optimizer is NULL");
    for (int i = 0; i < o->np; i++)
        if (ct_zero_grad(o->ps[i].p, set_to_none) < 0) return -1;
    return 0;
}

/* ------------------------------------------------------------ kernels */
#define PAR_GRAIN 65536

/* torch's optimizers are sequences of ops whose CPU kernels are compiled with
 * floating-point contraction: add(x, y, alpha=a) is fma(y, a, x) and
 * addcmul(x, y, z, value=v) is fma(v * y, z, x). The same fusions here give
 * the same roundings, so that cancellations agree too (a centered RMSprop with
 * alpha 0 takes the square root of fma(-g, g, g * g): torch's NaNs included). */
#define FMA(a, b, c) _Generic((a), float: fmaf, default: fma)(a, b, c)

#define DEFINE_KERNELS(T, S, ATTR)                                                                                \
    ATTR static void sgd_##S(T *restrict p, const T *restrict g, T *restrict buf, int64_t n, const Group *G,          \
                        bool first) {                                                                            \
        const T wd = (T)G->weight_decay, mom = (T)G->momentum, damp1 = (T)(1 - G->dampening), nlr = (T)(-G->lr); \
        const bool has_wd = G->weight_decay != 0, has_mom = G->momentum != 0, nest = G->nesterov;                \
        OMP(omp parallel for if (n > PAR_GRAIN)) for (int64_t i = 0; i < n; i++) {                         \
            T d = g[i];                                                                                          \
            if (has_wd) d = FMA(p[i], wd, d);                                                                    \
            if (has_mom) {                                                                                       \
                T b = first ? d : FMA(d, damp1, buf[i] * mom);                                                   \
                buf[i] = b;                                                                                      \
                d = nest ? FMA(b, mom, d) : b;                                                                   \
            }                                                                                                    \
            p[i] = FMA(d, nlr, p[i]);                                                                            \
        }                                                                                                        \
    }                                                                                                            \
    ATTR static void adam_##S(T *restrict p, const T *restrict g, T *restrict m, T *restrict v, T *restrict mx,       \
                         int64_t n, const Group *G, double step, bool decoupled) {                               \
        const double bc1 = 1 - pow(G->beta1, step), bc2 = 1 - pow(G->beta2, step);                               \
        const T b1 = (T)G->beta1, b2 = (T)G->beta2, ob1 = (T)(1 - G->beta1), ob2 = (T)(1 - G->beta2);            \
        const T wd = (T)G->weight_decay, eps = (T)G->eps, bc2s = (T)sqrt(bc2);                                   \
        const T nstep = (T)(-(G->lr / bc1)), decay = (T)(1 - G->lr * G->weight_decay);                           \
        const bool coupled_wd = !decoupled && G->weight_decay != 0, ams = G->amsgrad;                            \
        OMP(omp parallel for if (n > PAR_GRAIN)) for (int64_t i = 0; i < n; i++) {                         \
            T pi = p[i], gi = g[i];                                                                              \
            if (decoupled) pi = pi * decay;                                                                      \
            if (coupled_wd) gi = FMA(pi, wd, gi);                                                                \
            T mi = FMA(gi, ob1, m[i] * b1);                                                                      \
            T vi = FMA(ob2 * gi, gi, v[i] * b2);                                                                 \
            m[i] = mi;                                                                                           \
            v[i] = vi;                                                                                           \
            T den; /* torch's steps in T: sqrt, then / sqrt(bc2), then + eps, each rounded */                   \
            if (ams) {                                                                                           \
                T x = mx[i] > vi || mx[i] != mx[i] ? mx[i] : vi;                                                 \
                mx[i] = x;                                                                                       \
                den = (T)sqrt(x) / bc2s + eps;                                                                   \
            } else {                                                                                             \
                den = (T)sqrt(vi) / bc2s + eps;                                                                  \
            }                                                                                                    \
            p[i] = pi + nstep * mi / den;                                                                        \
        }                                                                                                        \
    }                                                                                                            \
    ATTR static void rmsprop_##S(T *restrict p, const T *restrict g, T *restrict sq, T *restrict buf,                 \
                            T *restrict ga, int64_t n, const Group *G) {                                         \
        const T alpha = (T)G->alpha, oa = (T)(1 - G->alpha), wd = (T)G->weight_decay, eps = (T)G->eps;           \
        const T mom = (T)G->momentum, nlr = (T)(-G->lr);                                                         \
        const bool has_wd = G->weight_decay != 0, has_mom = G->momentum > 0, centered = G->centered;             \
        OMP(omp parallel for if (n > PAR_GRAIN)) for (int64_t i = 0; i < n; i++) {                         \
            T gi = g[i];                                                                                         \
            if (has_wd) gi = FMA(p[i], wd, gi);                                                                  \
            T s = FMA(oa * gi, gi, sq[i] * alpha);                                                               \
            sq[i] = s;                                                                                           \
            T avg;                                                                                               \
            if (centered) {                                                                                      \
                T a = FMA(gi, oa, ga[i] * alpha);                                                                \
                ga[i] = a;                                                                                       \
                avg = sqrt(FMA(-a, a, s));                                                                       \
            } else {                                                                                             \
                avg = sqrt(s);                                                                                   \
            }                                                                                                    \
            avg = avg + eps;                                                                                     \
            if (has_mom) {                                                                                       \
                T b = buf[i] * mom + gi / avg;                                                                   \
                buf[i] = b;                                                                                      \
                p[i] = FMA(b, nlr, p[i]);                                                                        \
            } else {                                                                                             \
                p[i] = p[i] + nlr * gi / avg;                                                                    \
            }                                                                                                    \
        }                                                                                                        \
    }
DEFINE_KERNELS(float, f32, )
DEFINE_KERNELS(double, f64, COLD_CODE) /* float64: for size */

static ct_tensor *ensure_buf(PState *s, int k) {
    if (!s->buf[k]) {
        bool prev = ct_set_grad_enabled(false);
        s->buf[k] = nn_own(ct_zeros(ct_sizes(s->p), ct_ndim(s->p), ct_dtype_of(s->p))); /* contiguous */
        ct_set_grad_enabled(prev);
    }
    return s->buf[k];
}

static void *dp(ct_tensor *t) { return t ? ct_data_ptr(t) : NULL; }

static int step_one(ct_optimizer *o, PState *s) {
    ct_tensor *g0 = ct_grad(s->p);
    if (!g0) return 0; /* no gradient: skipped, as torch does (our handle is valid) */
    if (ct_ndim(g0) != ct_ndim(s->p) || ct_numel(g0) != ct_numel(s->p)) {
        ct_free(g0);
        return c10_error_int("%s: gradient shape does not match its parameter", kind_name[o->kind]);
    }
    ct_tensor *g = ct_is_contiguous(g0) && ct_dtype_of(g0) == ct_dtype_of(s->p) ? g0 : ct_contiguous(ct_to_dtype(g0, ct_dtype_of(s->p)));
    const Group *G = &o->g[s->group];
    bool f32 = ct_dtype_of(s->p) == CT_FLOAT32;
    int64_t n = ct_numel(s->p);
    /* a parameter of another layout is updated in a contiguous copy, then written back */
    ct_tensor *pc = ct_is_contiguous(s->p) ? s->p : ct_contiguous(s->p);
    void *p = pc ? ct_data_ptr(pc) : NULL, *gd = g ? ct_data_ptr(g) : NULL;
    int rc = 0;
    if ((!gd || !p) && n > 0) rc = -1;
    else if (o->kind == O_SGD) {
        bool first = !s->buf[0];
        void *b = NULL;
        if (G->momentum != 0 && !(b = dp(ensure_buf(s, 0)))) rc = -1;
        if (rc == 0) {
            if (f32) sgd_f32(p, gd, b, n, G, first);
            else sgd_f64(p, gd, b, n, G, first);
        }
    } else if (o->kind == O_ADAM || o->kind == O_ADAMW) {
        void *m = dp(ensure_buf(s, 0)), *v = dp(ensure_buf(s, 1)), *mx = G->amsgrad ? dp(ensure_buf(s, 2)) : NULL;
        if ((!m || !v || (G->amsgrad && !mx)) && n > 0) rc = -1;
        else {
            s->step += 1;
            if (f32) adam_f32(p, gd, m, v, mx, n, G, s->step, o->kind == O_ADAMW);
            else adam_f64(p, gd, m, v, mx, n, G, s->step, o->kind == O_ADAMW);
        }
    } else {
        void *sq = dp(ensure_buf(s, 0)), *b = G->momentum > 0 ? dp(ensure_buf(s, 1)) : NULL,
             *ga = G->centered ? dp(ensure_buf(s, 2)) : NULL;
        if ((!sq || (G->momentum > 0 && !b) || (G->centered && !ga)) && n > 0) rc = -1;
        else {
            s->step += 1;
            if (f32) rmsprop_f32(p, gd, sq, b, ga, n, G);
            else rmsprop_f64(p, gd, sq, b, ga, n, G);
        }
    }
    if (rc == 0 && pc != s->p) rc = ct_copy_(s->p, pc);
    else if (rc == 0) c10_bump_version(c10_unwrap(s->p)); /* an in-place update, as param.add_() counts */
    if (pc != s->p) ct_free(pc);
    if (g != g0) ct_free(g);
    ct_free(g0);
    return rc;
}

int ct_optimizer_step(ct_optimizer *o) {
    if (!o) return c10_error_int("step: optimizer is NULL");
    bool prev = ct_set_grad_enabled(false);
    ct_scope_begin();
    int rc = 0;
    for (int i = 0; i < o->np && rc == 0; i++) rc = step_one(o, &o->ps[i]);
    ct_scope_end();
    ct_set_grad_enabled(prev);
    return rc;
}

/* ------------------------------------------------------------ state */
ct_state_dict *ct_optimizer_state_dict(const ct_optimizer *o) {
    if (!o) return c10_error("state_dict: optimizer is NULL");
    ct_state_dict *sd = ct_state_dict_new();
    if (!sd) return NULL;
    char name[96], val[64];
    bool prev = ct_set_grad_enabled(false);
    ct_scope_begin();
    int rc = 0;
    for (int i = 0; i < o->np && rc == 0; i++) {
        const PState *s = &o->ps[i];
        bool any = s->step > 0;
        for (int k = 0; k < 3 && rc == 0; k++) {
            if (!s->buf[k]) continue;
            any = true;
            snprintf(name, sizeof name, "state.%d.%s", i, buf_names[o->kind][k]);
            rc = ct_state_dict_set(sd, name, ct_clone(s->buf[k]));
        }
        if (any && o->kind != O_SGD && rc == 0) {
            snprintf(name, sizeof name, "state.%d.step", i);
            rc = ct_state_dict_set(sd, name, ct_scalar(s->step));
        }
    }
    ct_scope_end();
    ct_set_grad_enabled(prev);
    static const char *const keys[] = {"lr", "momentum", "dampening", "weight_decay", "beta1", "beta2", "eps", "alpha",
                                       "nesterov", "amsgrad", "centered"};
    snprintf(val, sizeof val, "%s", kind_name[o->kind]);
    if (rc == 0) rc = ct_state_dict_set_metadata(sd, "optimizer", val);
    for (int g = 0; g < o->ng && rc == 0; g++) {
        const Group *G = &o->g[g];
        double v[] = {G->lr, G->momentum, G->dampening, G->weight_decay, G->beta1, G->beta2, G->eps, G->alpha,
                      G->nesterov, G->amsgrad, G->centered};
        for (int k = 0; k < (int)(sizeof keys / sizeof *keys) && rc == 0; k++) {
            snprintf(name, sizeof name, "param_groups.%d.%s", g, keys[k]);
            snprintf(val, sizeof val, "%.17g", v[k]);
            rc = ct_state_dict_set_metadata(sd, name, val);
        }
        int count = 0;
        for (int i = 0; i < o->np; i++) count += o->ps[i].group == g;
        snprintf(name, sizeof name, "param_groups.%d.num_params", g);
        snprintf(val, sizeof val, "%d", count);
        if (rc == 0) rc = ct_state_dict_set_metadata(sd, name, val);
        if (!isnan(G->initial_lr) && rc == 0) {
            snprintf(name, sizeof name, "param_groups.%d.initial_lr", g);
            snprintf(val, sizeof val, "%.17g", G->initial_lr);
            rc = ct_state_dict_set_metadata(sd, name, val);
        }
    }
    if (rc < 0) {
        ct_state_dict_free(sd);
        return NULL;
    }
    return sd;
}

/* The hyperparameters a state dict restores (the flags as 0 / 1), by group. */
static const char *const hp_keys[] = {"lr",   "momentum", "dampening", "weight_decay", "beta1",   "beta2",
                                      "eps",  "alpha",    "initial_lr", "nesterov",    "amsgrad", "centered"};
#define HP_NUM 9 /* the doubles; the flags follow */

/* param_groups.<g>.<key>: 1 and *v when present and a number, 0 when absent, -1 with the error */
static int hp_value(const ct_state_dict *sd, int g, int k, double *v) {
    char name[96];
    snprintf(name, sizeof name, "param_groups.%d.%s", g, hp_keys[k]);
    const char *s = ct_state_dict_metadata(sd, name);
    if (!s) return 0;
    char *end;
    *v = strtod(s, &end);
    if (end == s || *end) return c10_error_int("load_state_dict: %s is not a number: '%s'", name, s);
    return 1;
}

int ct_optimizer_load_state_dict(ct_optimizer *o, const ct_state_dict *sd) {
    if (!o || !sd) return c10_error_int("load_state_dict: optimizer or state dict is NULL");
    const char *kind = ct_state_dict_metadata(sd, "optimizer");
    if (kind && strcmp(kind, kind_name[o->kind]))
        return c10_error_int("loaded state dict is for %s, not %s", kind, kind_name[o->kind]);
    char name[96];
    int saved = 0; /* the saved groups (none: a dict without their metadata, taken as it is) */
    for (;; saved++) {
        snprintf(name, sizeof name, "param_groups.%d.lr", saved);
        if (!ct_state_dict_metadata(sd, name)) break;
    }
    if (saved && saved != o->ng) return c10_error_int("loaded state dict has a different number of parameter groups");
    for (int g = 0; g < o->ng; g++) {
        snprintf(name, sizeof name, "param_groups.%d.num_params", g);
        const char *c = ct_state_dict_metadata(sd, name);
        int count = 0;
        for (int i = 0; i < o->np; i++) count += o->ps[i].group == g;
        if (c && atoi(c) != count)
            return c10_error_int("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group");
    }
    /* check every tensor first, then copy */
    for (int i = 0; i < o->np; i++)
        for (int k = 0; k < 3; k++) {
            if (!buf_names[o->kind][k]) continue;
            snprintf(name, sizeof name, "state.%d.%s", i, buf_names[o->kind][k]);
            int j = ct_state_dict_find(sd, name);
            if (j < 0) continue;
            ct_tensor *t = ct_state_dict_tensor(sd, j);
            bool ok = t && ct_numel(t) == ct_numel(o->ps[i].p) && ct_ndim(t) == ct_ndim(o->ps[i].p);
            ct_free(t);
            if (!ok) return c10_error_int("load_state_dict: %s does not match its parameter's shape", name);
        }
    for (int i = 0; i < o->np; i++) {
        snprintf(name, sizeof name, "state.%d.step", i);
        int j = ct_state_dict_find(sd, name);
        ct_tensor *t = j < 0 ? NULL : ct_state_dict_tensor(sd, j);
        bool ok = j < 0 || (t && ct_numel(t) == 1);
        ct_free(t);
        if (!ok) return c10_error_int("load_state_dict: %s must hold one number", name);
    }
    double v;
    for (int g = 0; g < o->ng; g++)
        for (int k = 0; k < (int)(sizeof hp_keys / sizeof *hp_keys); k++)
            if (hp_value(sd, g, k, &v) < 0) return -1;
    bool prev = ct_set_grad_enabled(false);
    int rc = 0;
    for (int g = 0; g < o->ng; g++) { /* torch's load takes every saved hyperparameter, flags too */
        Group *G = &o->g[g];
        double *f[HP_NUM] = {&G->lr, &G->momentum, &G->dampening, &G->weight_decay, &G->beta1,
                             &G->beta2, &G->eps, &G->alpha, &G->initial_lr};
        bool *b[] = {&G->nesterov, &G->amsgrad, &G->centered};
        for (int k = 0; k < (int)(sizeof hp_keys / sizeof *hp_keys); k++)
            if (hp_value(sd, g, k, &v) > 0) {
                if (k < HP_NUM) *f[k] = v;
                else *b[k - HP_NUM] = v != 0;
            }
    }
    for (int i = 0; i < o->np && rc == 0; i++) {
        PState *s = &o->ps[i];
        for (int k = 0; k < 3 && rc == 0; k++) {
            if (!buf_names[o->kind][k]) continue;
            snprintf(name, sizeof name, "state.%d.%s", i, buf_names[o->kind][k]);
            int j = ct_state_dict_find(sd, name);
            if (j < 0) {
                ct_free(s->buf[k]);
                s->buf[k] = NULL;
                continue;
            }
            ct_tensor *t = ct_state_dict_tensor(sd, j);
            if (!ensure_buf(s, k) || !t || ct_copy_(s->buf[k], t) < 0) rc = -1;
            ct_free(t);
        }
        snprintf(name, sizeof name, "state.%d.step", i);
        int j = ct_state_dict_find(sd, name);
        s->step = 0;
        if (j >= 0) {
            ct_tensor *t = ct_state_dict_tensor(sd, j);
            s->step = t ? ct_item(t) : 0;
            ct_free(t);
        }
    }
    ct_set_grad_enabled(prev);
    return rc;
}

/* ------------------------------------------------------------ clip_grad_norm_ */
double ct_clip_grad_norm_(ct_tensor *const *params, int n, double max_norm, double norm_type) {
    if (n < 0 || (n > 0 && !params)) return c10_error_int("clip_grad_norm_: invalid parameter list"), NAN;
    bool prev = ct_set_grad_enabled(false);
    ct_scope_begin();
    ct_tensor **norms = malloc(((size_t)n + 1) * sizeof *norms);
    double total = NAN;
    int k = 0;
    if (!norms) {
        c10_error("clip_grad_norm_: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (!c10_unwrap(params[i])) goto done;
        ct_tensor *g = ct_grad(params[i]);
        if (!g) continue; /* no gradient (the handle was checked above) */
        norms[k] = ct_norm(g, norm_type, NULL, 0, false);
        if (!norms[k++]) goto done;
    }
    if (k == 0) {
        total = 0;
        goto done;
    }
    ct_tensor *tn = ct_norm(ct_stack((const ct_tensor *const *)norms, k, 0), norm_type, NULL, 0, false);
    if (!tn) goto done;
    total = ct_item(tn);
    /* clip_coef = max_norm / (total_norm + 1e-6), clamped to 1, in the norm's dtype */
    ct_tensor *c = ct_clamp(ct_div(ct_scalar_dtype(max_norm, ct_dtype_of(tn)), ct_add_scalar(tn, 1e-6)), NAN, 1.0);
    if (!c) {
        total = NAN;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        ct_tensor *g = ct_grad(params[i]);
        if (g && ct_mul_(g, c) < 0) {
            total = NAN;
            goto done;
        }
    }
done:
    free(norms);
    ct_scope_end();
    ct_set_grad_enabled(prev);
    return total;
}
