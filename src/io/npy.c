/*
 * npy.c: NumPy's .npy format for single tensors.
 *
 *   "\x93NUMPY" major minor       6 + 2 bytes; versions 1.0, 2.0, 3.0
 *   header length                 u16 (1.0) or u32 (2.0, 3.0), little-endian
 *   header                        a Python dict literal, space-padded, ending in '\n':
 *       {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *   data                          numel elements in C (or Fortran) order
 *
 * The reader takes exactly the three keys, any of the byte orders '<' '>' '|' '='
 * (big-endian data is swapped to native), and the dtypes ctorch has; Fortran-order
 * arrays come back as contiguous row-major tensors. Trailing bytes after the data
 * are ignored, as numpy.load ignores them. The writer writes version 1.0 (2.0 when
 * the header does not fit in 65535 bytes) with the header padded so that the data
 * starts at a multiple of 64, byte for byte as numpy.save (1.24) writes it.
 */
#include "io/io.h"
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

static const struct {
    char kind;
    int size;
    ct_dtype dtype;
} npy_types[] = {
    {'b', 1, CT_BOOL},  {'u', 1, CT_UINT8}, {'i', 1, CT_INT8},    {'i', 2, CT_INT16},
    {'i', 4, CT_INT32}, {'i', 8, CT_INT64}, {'f', 2, CT_FLOAT16}, {'f', 4, CT_FLOAT32},
    {'f', 8, CT_FLOAT64},
};
#define NPY_NTYPES (int)(sizeof npy_types / sizeof npy_types[0])

CT_PRINTF(2, 3) static void *fail(IoSrc *s, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return c10_error("%s: '%s': %s", s->op, s->name, what);
}

/* ------------------------------------------------------- the header dict */

typedef struct {
    const char *p, *end;
} Cur;

/* Skips what Python's tokenizer skips between tokens of the literal numpy.load
 * evaluates (ast.literal_eval): blanks, tabs, form feeds, newlines, '#'
 * comments to the end of their line, and backslash line continuations. */
static void ws(Cur *c) {
    for (; c->p < c->end; c->p++) {
        if (*c->p == '#')
            while (c->p + 1 < c->end && c->p[1] != '\n' && c->p[1] != '\r') c->p++;
        else if (*c->p == '\\' && c->p + 1 < c->end && (c->p[1] == '\n' || c->p[1] == '\r'))
            c->p++;
        else if (!*c->p || !strchr(" \t\f\n\r", *c->p))
            return;
    }
}

static bool eat(Cur *c, char ch) {
    ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes, into out (cap bytes). */
static bool pystr(Cur *c, char *out, size_t cap) {
    ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap) return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    out[n] = 0;
    return true;
}

static bool word(Cur *c, const char *w) {
    ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n)) return false;
    c->p += n;
    return true;
}

typedef struct {
    ct_dtype dtype;
    bool swap, fortran;
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    char descr[32];
} NpyHeader;

static void *parse_descr(IoSrc *s, NpyHeader *h) {
    const char *d = h->descr;
    char order = '=';
    if (*d == '<' || *d == '>' || *d == '|' || *d == '=') order = *d++;
    char kind = *d ? *d++ : 0;
    char *endp;
    errno = 0;
    long size = (*d >= '0' && *d <= '9') ? strtol(d, &endp, 10) : -1;
    if (size < 0 || errno || *endp)
        return fail(s, "invalid dtype descr '%s'", h->descr);
    for (int i = 0; i < NPY_NTYPES; i++)
        if (npy_types[i].kind == kind && npy_types[i].size == size) {
            h->dtype = npy_types[i].dtype;
            bool big = order == '>' || (order == '=' && IO_HOST_BIG_ENDIAN) ||
                       (order == '|' && IO_HOST_BIG_ENDIAN);
            h->swap = size > 1 && big != (bool)IO_HOST_BIG_ENDIAN;
            return h;
        }
    return fail(s, "dtype descr '%s' is not supported by ctorch "
                   "(supported: b1 u1 i1 i2 i4 i8 f2 f4 f8)", h->descr);
}

static void *parse_header(IoSrc *s, const char *text, size_t n, NpyHeader *h) {
    Cur c = {text, text + n};
    bool have_descr = false, have_fortran = false, have_shape = false;
    int parens = 0; /* ({...}) evaluates to the dict too */
    ws(&c);
    const char *line = c.p; /* outside brackets Python refuses an indented line (but the first) */
    while (line > text && line[-1] != '\n' && line[-1] != '\r') line--;
    if (line > text && line != c.p) return fail(s, "the header dict is indented (a Python syntax error)");
    while (eat(&c, '(')) parens++;
    if (!eat(&c, '{')) return fail(s, "the header is not a Python dict literal");
    while (!eat(&c, '}')) {
        char key[32];
        if (!pystr(&c, key, sizeof key) || !eat(&c, ':'))
            return fail(s, "malformed header at byte %td", c.p - text);
        if (!strcmp(key, "descr")) {
            if (have_descr) return fail(s, "duplicate key 'descr' in the header");
            have_descr = true;
            ws(&c);
            if (c.p < c.end && (*c.p == '[' || *c.p == '{'))
                return fail(s, "structured dtypes are not supported");
            if (!pystr(&c, h->descr, sizeof h->descr))
                return fail(s, "malformed 'descr' in the header");
            if (!parse_descr(s, h)) return NULL;
        } else if (!strcmp(key, "fortran_order")) {
            if (have_fortran) return fail(s, "duplicate key 'fortran_order' in the header");
            have_fortran = true;
            if (word(&c, "True")) h->fortran = true;
            else if (word(&c, "False")) h->fortran = false;
            else return fail(s, "'fortran_order' must be True or False");
        } else if (!strcmp(key, "shape")) {
            if (have_shape) return fail(s, "duplicate key 'shape' in the header");
            have_shape = true;
            if (!eat(&c, '(')) return fail(s, "'shape' must be a tuple");
            h->ndim = 0;
            while (!eat(&c, ')')) {
                ws(&c);
                if (c.p >= c.end || *c.p < '0' || *c.p > '9')
                    return fail(s, "malformed 'shape' in the header");
                if (h->ndim == CT_MAX_DIMS)
                    return fail(s, "'shape' has more than %d dimensions", CT_MAX_DIMS);
                int64_t v = 0;
                while (c.p < c.end && *c.p >= '0' && *c.p <= '9') {
                    if (v > (INT64_MAX - (*c.p - '0')) / 10)
                        return fail(s, "'shape' has a dimension too large");
                    v = v * 10 + (*c.p++ - '0');
                }
                if (c.p < c.end && *c.p == 'L') c.p++; /* Python 2 longs */
                h->shape[h->ndim++] = v;
                if (!eat(&c, ',')) {
                    if (!eat(&c, ')')) return fail(s, "malformed 'shape' in the header");
                    break;
                }
            }
        } else {
            return fail(s, "unexpected key '%s' in the header", key);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}')) return fail(s, "malformed header at byte %td", c.p - text);
            break;
        }
    }
    while (parens && eat(&c, ')')) parens--;
    ws(&c);
    if (c.p != c.end || parens) return fail(s, "unexpected text after the header dict");
    if (!have_descr || !have_fortran || !have_shape)
        return fail(s, "the header lacks '%s'", !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
    return h;
}

/* ---------------------------------------------------------------- loading */

static ct_tensor *load(IoSrc *s) {
    unsigned char pre[12];
    if (s->size < 10) return fail(s, "the file is too small (%llu bytes) to be a .npy file", (unsigned long long)s->size);
    if (io_src_read(s, 0, pre, 10) < 0) return NULL;
    if (memcmp(pre, "\x93NUMPY", 6)) return fail(s, "not a .npy file (bad magic string)");
    int major = pre[6], minor = pre[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return fail(s, "unsupported .npy format version %d.%d", major, minor);
    uint64_t hlen, start;
    if (major == 1) {
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
        start = 10;
    } else {
        if (io_src_read(s, 0, pre, 12) < 0) return NULL;
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
        start = 12;
    }
    if (hlen > s->size - start)
        return fail(s, "header length %llu is past the end of the file (%llu bytes)",
                    (unsigned long long)hlen, (unsigned long long)s->size);
    char *text = malloc(hlen ? hlen : 1);
    if (!text) return fail(s, "out of memory for the header");
    NpyHeader h = {0};
    void *ok = io_src_read(s, start, text, hlen) == 0 ? parse_header(s, text, hlen, &h) : NULL;
    free(text);
    if (!ok) return NULL;

    uint64_t nbytes, have = s->size - start - hlen;
    bool overflow = io_shape_overflows(h.shape, h.ndim, h.dtype, &nbytes);
    if (overflow || nbytes > have)
        return fail(s, "shape %s of '%s' needs %s bytes of data but the file holds %llu",
                    c10_shape_str(h.shape, h.ndim), h.descr, overflow ? "too many" : "more",
                    (unsigned long long)have);
    int64_t shape[CT_MAX_DIMS];
    for (int d = 0; d < h.ndim; d++) shape[d] = h.fortran ? h.shape[h.ndim - 1 - d] : h.shape[d];
    TensorImpl *t = c10_empty(shape, h.ndim, h.dtype, CT_CPU);
    if (!t) return NULL;
    if (io_src_read(s, start + hlen, c10_data(t), (size_t)nbytes) < 0) {
        c10_release(t);
        return NULL;
    }
    io_fix_loaded(c10_data(t), t->numel, t->dtype, h.swap);
    if (h.fortran && h.ndim > 1) { /* the data is the transpose: permute, then copy */
        int64_t dims[CT_MAX_DIMS];
        for (int d = 0; d < h.ndim; d++) dims[d] = h.ndim - 1 - d;
        TensorImpl *v = c10_permute(t, dims, h.ndim);
        c10_release(t);
        if (!v) return NULL;
        t = c10_contiguous(v);
        c10_release(v);
        if (!t) return NULL;
    }
    return c10_wrap(t);
}

ct_tensor *ct_load_npy(const char *path) {
    IoSrc s;
    if (io_src_open(&s, "load_npy", path) < 0) return NULL;
    ct_tensor *t = load(&s);
    io_src_close(&s);
    return t;
}

ct_tensor *ct_load_npy_buffer(const void *data, size_t nbytes) {
    IoSrc s;
    if (io_src_buffer(&s, "load_npy", data, nbytes) < 0) return NULL;
    return load(&s);
}

/* ---------------------------------------------------------------- saving */

int ct_save_npy(const ct_tensor *handle, const char *path) {
    const char *op = "save_npy";
    TensorImpl *t = c10_unwrap(handle);
    if (!t) return -1;
    if (!path) return c10_error_int("%s: path is NULL", op);
    if (t->device != CT_CPU) return c10_error_int("%s: the tensor is on the meta device and has no data", op);
    const char *descr = NULL;
    for (int i = 0; i < NPY_NTYPES; i++)
        if (npy_types[i].dtype == t->dtype) {
            static _Thread_local char buf[8];
            snprintf(buf, sizeof buf, "%c%c%d", npy_types[i].size == 1 ? '|' : '<', npy_types[i].kind,
                     npy_types[i].size);
            descr = buf;
        }
    if (!descr)
        return c10_error_int("%s: numpy has no %s dtype; convert the tensor first (e.g. to float32)", op,
                             ct_dtype_name(t->dtype));
    char header[64 + 24 * CT_MAX_DIMS + 128];
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < t->ndim; d++)
        n += snprintf(header + n, sizeof header - (size_t)n, d ? ", %lld" : "%lld", (long long)t->sizes[d]);
    n += snprintf(header + n, sizeof header - (size_t)n, "%s), }", t->ndim == 1 ? "," : "");
    if (t->ndim) { /* numpy.save's spare room for growing the first axis in place */
        int digits = snprintf(NULL, 0, "%lld", (long long)t->sizes[0]);
        for (int k = digits; k < 21; k++) header[n++] = ' ';
    }
    /* pad with spaces and a final newline so that the data starts at a multiple of 64 */
    size_t prefix = 10, total = prefix + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    memset(header + n, ' ', pad);
    header[n + (int)pad] = '\n';
    size_t hlen = (size_t)n + pad + 1;

    FILE *f = fopen(path, "wb");
    if (!f) return c10_error_int("%s: cannot open '%s' for writing: %s", op, path, strerror(errno));
    IoSink out = {.f = f};
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xFF),
                             (unsigned char)(hlen >> 8)};
    io_sink_write(&out, pre, sizeof pre);
    io_sink_write(&out, header, hlen);
    io_sink_tensor(&out, t);
    int rc = 0;
    if (out.failed) rc = c10_error_int("%s: '%s': write failed: %s", op, path, strerror(errno));
    if (fclose(f) != 0 && rc == 0) rc = c10_error_int("%s: '%s': write failed: %s", op, path, strerror(errno));
    if (rc < 0) remove(path);
    return rc;
}
