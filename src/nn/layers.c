/* layers.c: torch.nn's layers and containers as ct_modules: construction with
 * PyTorch's default initialisation, forward, and PyTorch's extra_repr text. */
#include "nn/nn.h"

enum {
    K_LINEAR, K_CONV, K_BN, K_LN, K_DROPOUT, K_EMBEDDING, K_RELU, K_GELU, K_SILU, K_TANH, K_SIGMOID,
    K_SOFTMAX, K_MAXPOOL, K_AVGPOOL, K_ADAPTIVE, K_FLATTEN, K_SEQUENTIAL, K_MODULE_LIST
};

/* ------------------------------------------------------------ repr helpers */
/* Python's repr of a float: the shortest text that reads back, "1e-05", "0.1", "1.0". */
COLD_CODE void nn_pyfloat(char *out, size_t cap, double v) {
    if (isnan(v)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, cap, v > 0 ? "inf" : "-inf");
        return;
    }
    int p = 1;
    for (; p < 17; p++) {
        snprintf(out, cap, "%.*g", p, v);
        if (strtod(out, NULL) == v) break;
    }
    snprintf(out, cap, "%.*e", p - 1, v); /* Python's rule: fixed for exponents in [-4, 16) */
    char *e = strchr(out, 'e');
    int ex = e ? atoi(e + 1) : 0;
    if (ex >= -4 && ex < 16) snprintf(out, cap, "%.*f", p - 1 - ex > 0 ? p - 1 - ex : 0, v), e = NULL;
    if (!e && !strchr(out, '.') && !strchr(out, 'e')) {
        size_t n = strlen(out);
        if (n + 2 < cap) memcpy(out + n, ".0", 3);
    }
}

static const char *pybool(bool b) { return b ? "True" : "False"; }

/* "(3, 3)" or "(3,)" for conv tuples */
static void tuple(char *out, size_t cap, const int64_t *v, int n) {
    if (n == 1) snprintf(out, cap, "(%lld,)", (long long)v[0]);
    else snprintf(out, cap, "(%lld, %lld)", (long long)v[0], (long long)v[1]);
}

static int extra_repr(const ct_module *m, char *buf, size_t cap, void *ctx) {
    (void)m;
    const NnCfg *c = ctx;
    char a[64], b[64], d[64], e[64];
    switch (c->kind) {
    case K_LINEAR:
        return snprintf(buf, cap, "in_features=%lld, out_features=%lld, bias=%s", (long long)c->in,
                        (long long)c->out, pybool(c->bias));
    case K_CONV: {
        tuple(a, sizeof a, c->k, c->ndim);
        tuple(b, sizeof b, c->stride, c->ndim);
        char tail[256] = "";
        size_t tl = 0;
        if (c->pad[0] || (c->ndim == 2 && c->pad[1])) {
            tuple(d, sizeof d, c->pad, c->ndim);
            tl += (size_t)snprintf(tail + tl, sizeof tail - tl, ", padding=%s", d);
        }
        if (c->dil[0] != 1 || (c->ndim == 2 && c->dil[1] != 1)) {
            tuple(e, sizeof e, c->dil, c->ndim);
            tl += (size_t)snprintf(tail + tl, sizeof tail - tl, ", dilation=%s", e);
        }
        if (c->groups != 1) tl += (size_t)snprintf(tail + tl, sizeof tail - tl, ", groups=%lld", (long long)c->groups);
        if (!c->bias) snprintf(tail + tl, sizeof tail - tl, ", bias=False");
        return snprintf(buf, cap, "%lld, %lld, kernel_size=%s, stride=%s%s", (long long)c->in, (long long)c->out,
                        a, b, tail);
    }
    case K_BN:
        nn_pyfloat(a, sizeof a, c->eps);
        if (c->has_momentum) nn_pyfloat(b, sizeof b, c->momentum);
        else snprintf(b, sizeof b, "None");
        return snprintf(buf, cap, "%lld, eps=%s, momentum=%s, affine=%s, track_running_stats=%s", (long long)c->in, a,
                        b, pybool(c->affine), pybool(c->track));
    case K_LN: {
        char sh[256] = "(";
        size_t l = 1;
        for (int i = 0; i < c->ndim; i++)
            l += (size_t)snprintf(sh + l, sizeof sh - l, "%s%lld", i ? ", " : "", (long long)c->shape[i]);
        snprintf(sh + l, sizeof sh - l, c->ndim == 1 ? ",)" : ")");
        nn_pyfloat(a, sizeof a, c->eps);
        return snprintf(buf, cap, "%s, eps=%s, elementwise_affine=%s", sh, a, pybool(c->affine));
    }
    case K_DROPOUT:
        nn_pyfloat(a, sizeof a, c->p);
        return snprintf(buf, cap, "p=%s, inplace=False", a);
    case K_EMBEDDING:
        if (c->padding_idx >= 0)
            return snprintf(buf, cap, "%lld, %lld, padding_idx=%lld", (long long)c->in, (long long)c->out,
                            (long long)c->padding_idx);
        return snprintf(buf, cap, "%lld, %lld", (long long)c->in, (long long)c->out);
    case K_GELU: return snprintf(buf, cap, "approximate='%s'", c->approximate);
    case K_SOFTMAX: return snprintf(buf, cap, "dim=%d", c->dim);
    case K_MAXPOOL:
        return snprintf(buf, cap, "kernel_size=%lld, stride=%lld, padding=%lld, dilation=1, ceil_mode=False",
                        (long long)c->k[0], (long long)c->stride[0], (long long)c->pad[0]);
    case K_AVGPOOL:
        return snprintf(buf, cap, "kernel_size=%lld, stride=%lld, padding=%lld", (long long)c->k[0],
                        (long long)c->stride[0], (long long)c->pad[0]);
    case K_ADAPTIVE:
        return snprintf(buf, cap, "output_size=(%lld, %lld)", (long long)c->k[0], (long long)c->k[1]);
    case K_FLATTEN: return snprintf(buf, cap, "start_dim=%d, end_dim=%d", c->dim, c->dim2);
    default: if (buf && cap) buf[0] = 0; return 0;
    }
}

/* ------------------------------------------------------------ forwards */
static const ct_tensor *one_input(const char *name, const ct_tensor *const *in, int n) {
    if (n != 1) return c10_error("%s.forward() takes 1 input but %d were given", name, n);
    return in[0];
}

static ct_tensor *fwd(ct_module *m, const ct_tensor *const *in, int n, void *ctx) {
    const NnCfg *c = ctx;
    const char *name = ct_module_type_name(m);
    if (c->kind == K_SEQUENTIAL) {
        const ct_tensor *x = one_input(name, in, n);
        if (!x) return NULL;
        int nk = ct_module_num_children(m);
        if (nk == 0) return nn_same(x);
        ct_tensor *cur = NULL;
        for (int i = 0; i < nk; i++) {
            ct_tensor *next = ct_module_forward(ct_module_child_at(m, i), cur ? cur : x);
            ct_free(cur);
            if (!next) return NULL;
            cur = next;
        }
        return cur;
    }
    if (c->kind == K_MODULE_LIST)
        return c10_error("Module [ModuleList] is missing the required \"forward\" function");
    const ct_tensor *x = one_input(name, in, n);
    if (!x) return NULL;
    switch (c->kind) {
    case K_LINEAR: return ct_linear(x, nn_param(m, "weight"), nn_param(m, "bias"));
    case K_CONV:
        if (c->ndim == 2)
            return ct_conv2d(x, nn_param(m, "weight"), nn_param(m, "bias"), c->stride, c->pad, c->dil, c->groups);
        return ct_conv1d(x, nn_param(m, "weight"), nn_param(m, "bias"), c->stride[0], c->pad[0], c->dil[0],
                         c->groups);
    case K_BN: {
        int nd = ct_ndim(x);
        bool is2d = c->ndim == 2;
        if (is2d ? nd != 4 : (nd != 2 && nd != 3))
            return c10_error(is2d ? "expected 4D input (got %dD input)" : "expected 2D or 3D input (got %dD input)",
                             nd);
        ct_tensor *w = nn_param(m, "weight"), *b = nn_param(m, "bias");
        ct_tensor *rm = nn_buffer(m, "running_mean"), *rv = nn_buffer(m, "running_var");
        bool training = ct_module_is_training(m);
        double f = c->has_momentum ? c->momentum : 0.0;
        if (training && rm) { /* counted before batch_norm checks the batch and the sizes, as torch */
            ct_tensor *nbt = nn_buffer(m, "num_batches_tracked");
            bool prev = ct_set_grad_enabled(false);
            int r = ct_add_scalar_(nbt, 1);
            ct_set_grad_enabled(prev);
            if (r < 0) return NULL;
            if (!c->has_momentum) f = 1.0 / ct_item(nbt); /* momentum=None: cumulative average */
        }
        return ct_batch_norm(x, rm, rv, w, b, training || !rm, f, c->eps);
    }
    case K_LN: {
        int nd = ct_ndim(x);
        bool ok = nd >= c->ndim;
        for (int i = 0; ok && i < c->ndim; i++) ok = ct_size(x, nd - c->ndim + i) == c->shape[i];
        if (!ok) {
            char want[128] = "[*";
            size_t l = 2;
            for (int i = 0; i < c->ndim; i++) l += (size_t)snprintf(want + l, sizeof want - l, ", %lld", (long long)c->shape[i]);
            snprintf(want + l, sizeof want - l, "]");
            return c10_error("Given normalized_shape=%s, expected input with shape %s, but got input of size%s",
                             c10_shape_str(c->shape, c->ndim), want, c10_shape_str(ct_sizes(x), nd));
        }
        return ct_layer_norm(x, c->shape, c->ndim, nn_param(m, "weight"), nn_param(m, "bias"), c->eps);
    }
    case K_DROPOUT: return ct_dropout(x, c->p, ct_module_is_training(m));
    case K_EMBEDDING: return ct_embedding(nn_param(m, "weight"), x, c->padding_idx);
    case K_RELU: return ct_relu(x);
    case K_GELU: return ct_gelu(x, c->approximate);
    case K_SILU: return ct_silu(x);
    case K_TANH: return ct_tanh(x);
    case K_SIGMOID: return ct_sigmoid(x);
    case K_SOFTMAX: return ct_softmax(x, c->dim);
    case K_MAXPOOL: return ct_max_pool2d(x, c->k, c->stride, c->pad, NULL, false);
    case K_AVGPOOL: return ct_avg_pool2d(x, c->k, c->stride, c->pad, false, true, 0);
    case K_ADAPTIVE: /* F.adaptive_avg_pool2d's own check (the op takes any rank for {1, 1}) */
        if (ct_ndim(x) < 3) return c10_error("Input dimension should be at least 3");
        return ct_adaptive_avg_pool2d(x, c->k);
    case K_FLATTEN: return ct_flatten(x, c->dim, c->dim2);
    default: return c10_error("forward: unknown module kind");
    }
}

static ct_module *make(const char *name, const NnCfg *cfg) {
    ct_module_ops ops = {.name = name, .forward = fwd, .extra_repr = extra_repr, .clone_ctx = nn_cfg_clone,
                         .free_ctx = nn_cfg_free};
    return nn_builtin(&ops, cfg);
}

/* Linear's and Conv's reset_parameters: kaiming_uniform_(a=sqrt(5)), bias U(+-1/sqrt(fan_in)). */
static int reset_linear_like(ct_module *m, const int64_t *wshape, int wnd, int64_t out, bool bias) {
    ct_tensor *w = nn_add_tensor(m, "weight", wshape, wnd, CT_FLOAT32, true);
    if (!w) return -1;
    ct_tensor *b = bias ? nn_add_tensor(m, "bias", CT_SHAPE(out), CT_FLOAT32, true) : NULL;
    if (bias && !b) return -1;
    if (ct_numel(w) > 0 && ct_init_kaiming_uniform_(w, sqrt(5.0), "fan_in", "leaky_relu") < 0) return -1;
    if (b) {
        int64_t fan_in = 1;
        for (int d = 1; d < wnd; d++) fan_in *= wshape[d];
        double bound = fan_in > 0 ? 1 / sqrt((double)fan_in) : 0;
        if (ct_init_uniform_(b, -bound, bound) < 0) return -1;
    }
    return 0;
}

static ct_module *finish(ct_module *m, int rc) {
    if (rc < 0) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}

ct_module *ct_nn_linear(int64_t in, int64_t out, bool bias) {
    if (in < 0 || out < 0)
        return c10_error("Linear: Trying to create tensor with negative dimension %lld: [%lld, %lld]",
                         (long long)(out < 0 ? out : in), (long long)out, (long long)in);
    NnCfg c = {.kind = K_LINEAR, .in = in, .out = out, .bias = bias};
    ct_module *m = make("Linear", &c);
    if (!m) return NULL;
    return finish(m, reset_linear_like(m, CT_SHAPE(out, in), out, bias));
}

static ct_module *conv(int nd, int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d, int64_t g,
                       bool bias) {
    const char *name = nd == 1 ? "Conv1d" : "Conv2d";
    if (g <= 0) return c10_error("groups must be a positive integer");
    if (in % g) return c10_error("in_channels must be divisible by groups");
    if (out % g) return c10_error("out_channels must be divisible by groups");
    /* the rest as torch: negative sizes fail making the weight, a bad stride, padding,
     * dilation or kernel size in forward (the functional's checks) */
    NnCfg c = {.kind = K_CONV, .in = in, .out = out, .ndim = nd, .groups = g, .bias = bias};
    for (int i = 0; i < 2; i++) {
        c.k[i] = k;
        c.stride[i] = s;
        c.pad[i] = p;
        c.dil[i] = d;
    }
    ct_module *m = make(name, &c);
    if (!m) return NULL;
    int64_t ws[4] = {out, in / g, k, k};
    return finish(m, reset_linear_like(m, ws, nd + 2, out, bias));
}
ct_module *ct_nn_conv1d(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d, int64_t g, bool bias) {
    return conv(1, in, out, k, s, p, d, g, bias);
}
ct_module *ct_nn_conv2d(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d, int64_t g, bool bias) {
    return conv(2, in, out, k, s, p, d, g, bias);
}

static ct_module *batch_norm(int nd, int64_t nf, double eps, double momentum, bool affine, bool track) {
    /* torch's checks: a negative num_features fails making the tensors (if any), 0 builds */
    NnCfg c = {.kind = K_BN, .in = nf, .ndim = nd, .eps = eps, .momentum = momentum,
               .has_momentum = !isnan(momentum), .affine = affine, .track = track};
    ct_module *m = make(nd == 1 ? "BatchNorm1d" : "BatchNorm2d", &c);
    if (!m) return NULL;
    int rc = 0;
    if (affine) {
        ct_tensor *w = nn_add_tensor(m, "weight", CT_SHAPE(nf), CT_FLOAT32, true);
        rc = w && nn_add_tensor(m, "bias", CT_SHAPE(nf), CT_FLOAT32, true) ? ct_init_ones_(w) : -1;
    }
    if (rc == 0 && track) {
        ct_tensor *rv = NULL;
        if (!nn_add_tensor(m, "running_mean", CT_SHAPE(nf), CT_FLOAT32, false) ||
            !(rv = nn_add_tensor(m, "running_var", CT_SHAPE(nf), CT_FLOAT32, false)) ||
            !nn_add_tensor(m, "num_batches_tracked", NULL, 0, CT_INT64, false) || ct_fill_(rv, 1) < 0)
            rc = -1;
    }
    return finish(m, rc);
}
ct_module *ct_nn_batch_norm1d(int64_t nf, double eps, double momentum, bool affine, bool track) {
    return batch_norm(1, nf, eps, momentum, affine, track);
}
ct_module *ct_nn_batch_norm2d(int64_t nf, double eps, double momentum, bool affine, bool track) {
    return batch_norm(2, nf, eps, momentum, affine, track);
}

ct_module *ct_nn_layer_norm(const int64_t *shape, int ndim, double eps, bool affine) {
    if (ndim < 0 || ndim > CT_MAX_DIMS || (ndim && !shape)) /* [] builds; forward refuses it, as torch */
        return c10_error("LayerNorm: normalized_shape must have 0 to 16 dims, got %d%s", ndim, shape ? "" : " (NULL)");
    NnCfg c = {.kind = K_LN, .ndim = ndim, .eps = eps, .affine = affine};
    if (ndim) memcpy(c.shape, shape, (size_t)ndim * sizeof *shape);
    ct_module *m = make("LayerNorm", &c);
    if (!m) return NULL;
    int rc = 0;
    if (affine) {
        ct_tensor *w = nn_add_tensor(m, "weight", shape, ndim, CT_FLOAT32, true);
        rc = w && nn_add_tensor(m, "bias", shape, ndim, CT_FLOAT32, true) ? ct_init_ones_(w) : -1;
    }
    return finish(m, rc);
}

ct_module *ct_nn_dropout(double p) {
    if (!(p >= 0 && p <= 1)) return c10_error("dropout probability has to be between 0 and 1, but got %g", p);
    NnCfg c = {.kind = K_DROPOUT, .p = p};
    return make("Dropout", &c);
}

ct_module *ct_nn_embedding(int64_t num, int64_t dim, int64_t padding_idx) {
    /* torch's order: padding_idx within [-num, num) (below -1 counted from the end; -1 is
     * none here), then the weight, whose negative sizes fail */
    if (padding_idx != -1 && (padding_idx >= num || padding_idx < -num))
        return c10_error("Padding_idx must be within num_embeddings");
    if (padding_idx < -1) padding_idx += num;
    NnCfg c = {.kind = K_EMBEDDING, .in = num, .out = dim, .padding_idx = padding_idx};
    ct_module *m = make("Embedding", &c);
    if (!m) return NULL;
    ct_tensor *w = nn_add_tensor(m, "weight", CT_SHAPE(num, dim), CT_FLOAT32, true);
    int rc = w ? ct_init_normal_(w, 0, 1) : -1;
    if (rc == 0 && padding_idx >= 0) {
        bool prev = ct_set_grad_enabled(false);
        ct_tensor *row = ct_select(w, 0, padding_idx);
        rc = row ? ct_fill_(row, 0) : -1;
        ct_free(row);
        ct_set_grad_enabled(prev);
    }
    return finish(m, rc);
}

#define SIMPLE(fn, kind_, name)                                                                                   \
    ct_module *fn(void) {                                                                                      \
        NnCfg c = {.kind = kind_};                                                                             \
        return make(name, &c);                                                                                 \
    }
SIMPLE(ct_nn_relu, K_RELU, "ReLU")
SIMPLE(ct_nn_silu, K_SILU, "SiLU")
SIMPLE(ct_nn_tanh, K_TANH, "Tanh")
SIMPLE(ct_nn_sigmoid, K_SIGMOID, "Sigmoid")

ct_module *ct_nn_gelu(const char *approximate) {
    if (!approximate) approximate = "none";
    if (strcmp(approximate, "none") && strcmp(approximate, "tanh"))
        return c10_error("approximate argument must be either none or tanh.");
    NnCfg c = {.kind = K_GELU};
    snprintf(c.approximate, sizeof c.approximate, "%s", approximate);
    return make("GELU", &c);
}

ct_module *ct_nn_softmax(int dim) {
    NnCfg c = {.kind = K_SOFTMAX, .dim = dim};
    return make("Softmax", &c);
}

static ct_module *pool(int kind, const char *name, int64_t k, int64_t s, int64_t p) {
    if (s == 0) s = k; /* the sizes are checked in forward, by the functional, as torch's */
    NnCfg c = {.kind = kind, .k = {k, k}, .stride = {s, s}, .pad = {p, p}};
    return make(name, &c);
}
ct_module *ct_nn_max_pool2d(int64_t k, int64_t s, int64_t p) { return pool(K_MAXPOOL, "MaxPool2d", k, s, p); }
ct_module *ct_nn_avg_pool2d(int64_t k, int64_t s, int64_t p) { return pool(K_AVGPOOL, "AvgPool2d", k, s, p); }

ct_module *ct_nn_adaptive_avg_pool2d(int64_t oh, int64_t ow) {
    NnCfg c = {.kind = K_ADAPTIVE, .k = {oh, ow}};
    return make("AdaptiveAvgPool2d", &c);
}

ct_module *ct_nn_flatten(int start_dim, int end_dim) {
    NnCfg c = {.kind = K_FLATTEN, .dim = start_dim, .dim2 = end_dim};
    return make("Flatten", &c);
}

COLD_CODE static ct_module *container(int kind, const char *name, ct_module *const *mods, int n) {
    if (n < 0 || (n > 0 && !mods)) return c10_error("%s: invalid argument: %d modules from %s", name, n, mods ? "an array" : "NULL");
    NnCfg c = {.kind = kind};
    ct_module *m = make(name, &c);
    int rc = m ? 0 : -1;
    for (int i = 0; i < n; i++) {
        if (rc == 0 && mods[i]) {
            rc = ct_nn_append(m, mods[i]);
        } else if (rc == 0) {
            rc = c10_error_int("%s: module %d is NULL", name, i);
        }
    }
    if (rc < 0) {
        /* ownership was transferred: free what was not adopted (a module given twice was cloned). */
        int adopted = m ? ct_module_num_children(m) : 0;
        for (int i = adopted; i < n; i++) {
            bool dup = false;
            for (int j = 0; j < i; j++) dup |= mods[j] == mods[i];
            if (mods[i] && !dup) ct_module_free(mods[i]);
        }
        ct_module_free(m);
        return NULL;
    }
    return m;
}
ct_module *ct_nn_sequential(ct_module *const *mods, int n) { return container(K_SEQUENTIAL, "Sequential", mods, n); }
ct_module *ct_nn_module_list(ct_module *const *mods, int n) { return container(K_MODULE_LIST, "ModuleList", mods, n); }
