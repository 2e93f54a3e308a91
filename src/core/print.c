/*
 * print.c: repr(tensor) exactly as PyTorch 1.13 prints it (torch/_tensor_str.py
 * with the default print options: precision 4, threshold 1000, edgeitems 3,
 * linewidth 80, sci_mode chosen automatically).
 *
 * The formatter looks at the elements that will be shown (the summarized tensor
 * when numel > 1000) and picks one of three float modes: int mode ("3."), fixed
 * ("0.1235") or scientific ("1.2346e-05"), with one width for every element.
 * Rows wrap to the line width, nested dimensions are separated by blank lines,
 * and suffixes (device, size, dtype, then the caller's, e.g. grad_fn) go on a
 * new line when they would pass column 80.
 */
#include "core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define PRECISION 4
#define THRESHOLD 1000
#define EDGEITEMS 3
#define LINEWIDTH 80

CT_INTERNAL const char *(*c10_repr_suffix)(const TensorImpl *t, char *buf, size_t cap) = NULL;

/* ---------------------------------------------------------- string builder */
typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} Str;

static void s_reserve(Str *s, size_t extra) {
    if (s->oom || s->len + extra + 1 <= s->cap) return;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < s->len + extra + 1) cap *= 2;
    char *p = realloc(s->p, cap);
    if (!p) {
        s->oom = true;
        return;
    }
    s->p = p;
    s->cap = cap;
}

static void s_putn(Str *s, const char *x, size_t n) {
    s_reserve(s, n);
    if (s->oom) return;
    memcpy(s->p + s->len, x, n);
    s->len += n;
    s->p[s->len] = '\0';
}

static void s_puts(Str *s, const char *x) { s_putn(s, x, strlen(x)); }

static void s_spaces(Str *s, int n) {
    for (int i = 0; i < n; i++) s_putn(s, " ", 1);
}

/* ------------------------------------------------------------- elements */
static bool is_floating(ct_dtype d) { return c10_is_float(d); }

static double elem_f(const TensorImpl *t, int64_t i) { return c10_get(t, i); }

static int64_t elem_i(const TensorImpl *t, int64_t i) {
    const char *p = c10_data(t) + c10_linear_offset(t, i);
    switch (t->dtype) {
    case CT_BOOL: return *(const bool *)p;
    case CT_UINT8: return *(const uint8_t *)p;
    case CT_INT8: return *(const int8_t *)p;
    case CT_INT16: return *(const int16_t *)p;
    case CT_INT32: return *(const int32_t *)p;
    case CT_INT64: return *(const int64_t *)p;
    default: return (int64_t)c10_get(t, i);
    }
}

/* Row-major strides of t's shape (for linear element indices). */
static void contiguous_strides(const TensorImpl *t, int64_t *cs) {
    int64_t acc = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        cs[d] = acc;
        acc *= t->sizes[d];
    }
}

/* Visits the linear indices of the elements shown (get_summarized_data when
 * summarize: the first and last EDGEITEMS along every dimension longer than
 * 2*EDGEITEMS). */
typedef void (*visit_fn)(const TensorImpl *t, int64_t i, void *ctx);

static void visit(const TensorImpl *t, const int64_t *cs, int dim, int64_t base, bool summarize,
                  visit_fn fn, void *ctx) {
    if (dim == t->ndim) {
        fn(t, base, ctx);
        return;
    }
    int64_t n = t->sizes[dim];
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 2 * EDGEITEMS && i == EDGEITEMS) i = n - EDGEITEMS;
        visit(t, cs, dim + 1, base + i * cs[dim], summarize, fn, ctx);
    }
}

/* ------------------------------------------------------------ formatter */
typedef struct {
    bool floating, int_mode, sci_mode;
    int max_width;
    /* scan state */
    bool any;
    double min_abs, max_abs;
} Fmt;

static void scan_int(const TensorImpl *t, int64_t i, void *ctx) {
    Fmt *f = ctx;
    int w;
    if (t->dtype == CT_BOOL) {
        w = elem_i(t, i) ? 4 : 5;
    } else {
        char tmp[32];
        w = snprintf(tmp, sizeof tmp, "%lld", (long long)elem_i(t, i));
    }
    if (w > f->max_width) f->max_width = w;
}

static void scan_range(const TensorImpl *t, int64_t i, void *ctx) {
    Fmt *f = ctx;
    double v = elem_f(t, i);
    if (!isfinite(v) || v == 0) return;
    double a = fabs(v);
    if (!f->any) {
        f->any = true;
        f->min_abs = f->max_abs = a;
    } else {
        if (a < f->min_abs) f->min_abs = a;
        if (a > f->max_abs) f->max_abs = a;
    }
    if (v != ceil(v)) f->int_mode = false;
}

static void scan_width(const TensorImpl *t, int64_t i, void *ctx) {
    Fmt *f = ctx;
    double v = elem_f(t, i);
    if (!isfinite(v) || v == 0) return;
    int w;
    if (f->sci_mode) w = snprintf(NULL, 0, "%.*e", PRECISION, v);
    else if (f->int_mode) w = snprintf(NULL, 0, "%.0f", v) + 1;
    else w = snprintf(NULL, 0, "%.*f", PRECISION, v);
    if (w > f->max_width) f->max_width = w;
}

static void fmt_init(Fmt *f, const TensorImpl *t, bool summarize) {
    int64_t cs[CT_MAX_DIMS];
    contiguous_strides(t, cs);
    memset(f, 0, sizeof *f);
    f->floating = is_floating(t->dtype);
    f->int_mode = true;
    f->sci_mode = false;
    f->max_width = 1;
    if (!f->floating) {
        visit(t, cs, 0, 0, summarize, scan_int, f);
        return;
    }
    visit(t, cs, 0, 0, summarize, scan_range, f);
    if (!f->any) return; /* no nonzero finite value: int mode, width 1 */
    double ratio = f->max_abs / f->min_abs;
    if (f->int_mode) {
        if (ratio > 1000.0 || f->max_abs > 1.0e8) f->sci_mode = true;
    } else {
        if (ratio > 1000.0 || f->max_abs > 1.0e8 || f->min_abs < 1.0e-4) f->sci_mode = true;
    }
    visit(t, cs, 0, 0, summarize, scan_width, f);
}

/* Formatter.format: the element right-aligned to max_width. */
static void fmt_elem(const Fmt *f, const TensorImpl *t, int64_t i, Str *s) {
    char tmp[512];
    int n;
    if (f->floating) {
        double v = elem_f(t, i);
        if (isnan(v)) n = snprintf(tmp, sizeof tmp, "nan");
        else if (isinf(v)) n = snprintf(tmp, sizeof tmp, "%s", v < 0 ? "-inf" : "inf");
        else if (f->sci_mode) n = snprintf(tmp, sizeof tmp, "%.*e", PRECISION, v);
        else if (f->int_mode) n = snprintf(tmp, sizeof tmp, "%.0f.", v);
        else n = snprintf(tmp, sizeof tmp, "%.*f", PRECISION, v);
    } else if (t->dtype == CT_BOOL) {
        n = snprintf(tmp, sizeof tmp, "%s", elem_i(t, i) ? "True" : "False");
    } else {
        n = snprintf(tmp, sizeof tmp, "%lld", (long long)elem_i(t, i));
    }
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof tmp) n = (int)sizeof tmp - 1;
    s_spaces(s, f->max_width - n);
    s_putn(s, tmp, (size_t)n);
}

/* ---------------------------------------------------------- tensor body */
/* _vector_str */
static void vector_str(const Fmt *f, const TensorImpl *t, int64_t base, int64_t step, int64_t n,
                       int indent, bool summarize, Str *s) {
    int element_length = f->max_width + 2;
    int per_line = (LINEWIDTH - indent) / element_length;
    if (LINEWIDTH - indent < 0) per_line = 0;
    if (per_line < 1) per_line = 1;
    bool cut = summarize && n > 2 * EDGEITEMS;
    int64_t count = cut ? 2 * EDGEITEMS + 1 : n; /* items, " ..." counts as one */
    s_puts(s, "[");
    for (int64_t k = 0; k < count; k++) {
        if (k > 0) {
            if (k % per_line == 0) {
                s_puts(s, ",\n");
                s_spaces(s, indent + 1);
            } else {
                s_puts(s, ", ");
            }
        }
        if (cut && k == EDGEITEMS) {
            s_puts(s, " ...");
            continue;
        }
        int64_t i = cut && k > EDGEITEMS ? n - (count - k) : k;
        fmt_elem(f, t, base + i * step, s);
    }
    s_puts(s, "]");
}

/* _tensor_str_with_formatter on the sub-tensor at dimension dim. */
static void tensor_str(const Fmt *f, const TensorImpl *t, const int64_t *cs, int dim, int64_t base,
                       int indent, bool summarize, Str *s) {
    int left = t->ndim - dim;
    if (left == 0) {
        fmt_elem(f, t, base, s);
        return;
    }
    if (left == 1) {
        vector_str(f, t, base, cs[dim], t->sizes[dim], indent, summarize, s);
        return;
    }
    int64_t n = t->sizes[dim];
    bool cut = summarize && n > 2 * EDGEITEMS;
    int64_t count = cut ? 2 * EDGEITEMS + 1 : n;
    s_puts(s, "[");
    for (int64_t k = 0; k < count; k++) {
        if (k > 0) {
            s_puts(s, ",");
            for (int j = 0; j < left - 1; j++) s_puts(s, "\n");
            s_spaces(s, indent + 1);
        }
        if (cut && k == EDGEITEMS) {
            s_puts(s, "...");
            continue;
        }
        int64_t i = cut && k > EDGEITEMS ? n - (count - k) : k;
        tensor_str(f, t, cs, dim + 1, base + i * cs[dim], indent + 1, summarize, s);
    }
    s_puts(s, "]");
}

/* ------------------------------------------------------------ suffixes */
#define MAX_SUFFIXES 16

typedef struct {
    char text[MAX_SUFFIXES][160];
    const char *ext[MAX_SUFFIXES]; /* caller's items (not copied) */
    size_t ext_len[MAX_SUFFIXES];
    int n;
} Suffixes;

static void suffix_add(Suffixes *sf, const char *text) {
    if (sf->n >= MAX_SUFFIXES) return;
    snprintf(sf->text[sf->n], sizeof sf->text[0], "%s", text);
    sf->ext[sf->n] = sf->text[sf->n];
    sf->ext_len[sf->n] = strlen(sf->text[sf->n]);
    sf->n++;
}

static void suffix_size(Suffixes *sf, const TensorImpl *t) {
    char b[160];
    size_t k = 0;
    k += (size_t)snprintf(b + k, sizeof b - k, "size=(");
    for (int d = 0; d < t->ndim && k < sizeof b; d++)
        k += (size_t)snprintf(b + k, sizeof b - k, d ? ", %lld" : "%lld", (long long)t->sizes[d]);
    if (k < sizeof b) snprintf(b + k, sizeof b - k, t->ndim == 1 ? ",)" : ")");
    suffix_add(sf, b);
}

static void suffix_dtype(Suffixes *sf, ct_dtype d) {
    char b[64];
    snprintf(b, sizeof b, "dtype=torch.%s", c10_dtype_names[d]);
    suffix_add(sf, b);
}

/* The caller's text (", requires_grad=True", ", grad_fn=<MulBackward0>") is split
 * into items at ", " so that each can wrap as PyTorch wraps suffixes. */
static void suffix_caller(Suffixes *sf, const char *text) {
    if (!text) return;
    const char *p = text;
    while (*p == ',' || *p == ' ') p++;
    while (*p && sf->n < MAX_SUFFIXES) {
        const char *e = strstr(p, ", ");
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len) {
            sf->ext[sf->n] = p;
            sf->ext_len[sf->n] = len;
            sf->n++;
        }
        if (!e) break;
        p = e + 2;
    }
}

/* _add_suffixes */
static void add_suffixes(Str *s, const Suffixes *sf, int indent) {
    size_t last_nl = 0;
    bool has_nl = false;
    for (size_t i = 0; i < s->len; i++)
        if (s->p[i] == '\n') {
            last_nl = i;
            has_nl = true;
        }
    /* len(tensor_str) - tensor_str.rfind("\n") + 1 */
    long long last_line_len = (long long)s->len - (has_nl ? (long long)last_nl : -1) + 1;
    for (int k = 0; k < sf->n; k++) {
        long long len = (long long)sf->ext_len[k];
        if (last_line_len + len + 2 > LINEWIDTH) {
            s_puts(s, ",\n");
            s_spaces(s, indent);
            last_line_len = indent + len;
        } else {
            s_puts(s, ", ");
            last_line_len += len + 2;
        }
        s_putn(s, sf->ext[k], sf->ext_len[k]);
    }
    s_puts(s, ")");
}

/* ---------------------------------------------------------------- repr */
static bool build_repr(const TensorImpl *t, const char *suffix, Str *s) {
    static const char prefix[] = "tensor(";
    const int indent = (int)sizeof prefix - 1;
    Suffixes *sf = calloc(1, sizeof *sf);
    if (!sf) return false;
    s_puts(s, prefix);
    bool default_dtype = t->dtype == CT_FLOAT32 || t->dtype == CT_INT64 || t->dtype == CT_BOOL;
    if (t->device == CT_META || (t->numel > 0 && !c10_data(t))) { /* no data to show */
        if (t->device == CT_META) suffix_add(sf, "device='meta'");
        suffix_size(sf, t);
        if (t->dtype != CT_FLOAT32) suffix_dtype(sf, t->dtype);
        s_puts(s, "...");
    } else if (t->numel == 0) {
        /* the shape unless it is (0,); the dtype unless it is the default float */
        if (t->ndim != 1) suffix_size(sf, t);
        if (t->dtype != CT_FLOAT32) suffix_dtype(sf, t->dtype);
        s_puts(s, "[]");
    } else {
        if (!default_dtype) suffix_dtype(sf, t->dtype);
        bool summarize = t->numel > THRESHOLD;
        Fmt f;
        fmt_init(&f, t, summarize);
        int64_t cs[CT_MAX_DIMS];
        contiguous_strides(t, cs);
        tensor_str(&f, t, cs, 0, 0, indent, summarize, s);
    }
    suffix_caller(sf, suffix);
    add_suffixes(s, sf, indent);
    free(sf);
    return !s->oom;
}

CT_INTERNAL int c10_repr(const TensorImpl *t, char *buf, size_t cap, const char *suffix) {
    if (!t) return c10_error_int("repr: argument is NULL");
    Str s = {0};
    if (!build_repr(t, suffix, &s)) {
        free(s.p);
        return c10_error_int("repr: out of memory");
    }
    if (s.len > (size_t)INT32_MAX) {
        free(s.p);
        return c10_error_int("repr: the text is too long (%zu bytes)", s.len);
    }
    if (buf && cap > 0) {
        size_t n = s.len < cap - 1 ? s.len : cap - 1;
        memcpy(buf, s.p, n);
        buf[n] = '\0';
    }
    int len = (int)s.len;
    free(s.p);
    return len;
}

static const char *handle_suffix(const TensorImpl *t, char *buf, size_t cap) {
    if (!c10_repr_suffix) return NULL;
    buf[0] = '\0';
    return c10_repr_suffix(t, buf, cap);
}

CT_API int ct_repr(const ct_tensor *h, char *buf, size_t cap) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    char sbuf[256];
    return c10_repr(t, buf, cap, handle_suffix(t, sbuf, sizeof sbuf));
}

CT_API int ct_print(const ct_tensor *h) {
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    char sbuf[256];
    const char *suffix = handle_suffix(t, sbuf, sizeof sbuf);
    Str s = {0};
    if (!build_repr(t, suffix, &s)) {
        free(s.p);
        return c10_error_int("print: out of memory");
    }
    s_putn(&s, "\n", 1);
    bool ok = !s.oom && fwrite(s.p, 1, s.len, stdout) == s.len && fflush(stdout) == 0;
    free(s.p);
    return ok ? 0 : c10_error_int("print: could not write to stdout");
}
