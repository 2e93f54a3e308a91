/*
 * safetensors.c: the safetensors format, read and written as the reference
 * implementation (huggingface/safetensors) does.
 *
 *   8 bytes   N, little-endian u64: the header's length
 *   N bytes   a JSON object, UTF-8, padded with spaces:
 *             {"__metadata__": {"k": "v", ...},            (optional)
 *              "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
 *   the rest  the data section: each tensor's bytes, row-major, little-endian, at
 *             [begin, end) relative to the start of the section.
 *
 * Reading is as strict as the reference reader: N at most 100,000,000 and inside
 * the file, the header valid UTF-8 and valid JSON, each dtype known, each byte
 * count equal to numel * element size, and the tensors tiling the data section
 * exactly (sorted by offsets, each begins where the previous ended, the last ends
 * at the end of the file). Names are unique. Memory: the header (<= the file), a
 * small record per tensor, and the tensors themselves (their sizes add up to the
 * data section, so to less than the file).
 *
 * Writing: tensors sorted by dtype, largest alignment first (the reference's
 * Dtype order, reversed), then by name; compact JSON with "__metadata__" first;
 * the header padded with spaces to a multiple of 8 so that the data is aligned.
 */
#include "io/io.h"
#include "io/json.h"
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

#define ST_MAX_HEADER 100000000ull

/* name, ctorch dtype, rank in the reference's Dtype enum (its sort key) */
static const struct {
    const char *name;
    ct_dtype dtype;
    int rank;
} st_dtypes[] = {
    {"BOOL", CT_BOOL, 0},   {"U8", CT_UINT8, 1},    {"I8", CT_INT8, 2},
    {"I16", CT_INT16, 5},   {"F16", CT_FLOAT16, 7}, {"BF16", CT_BFLOAT16, 8},
    {"I32", CT_INT32, 9},   {"F32", CT_FLOAT32, 11}, {"F64", CT_FLOAT64, 12},
    {"I64", CT_INT64, 13},
};
#define ST_NDTYPES (int)(sizeof st_dtypes / sizeof st_dtypes[0])

/* Dtypes the format has and ctorch does not. */
static const char *const st_unsupported[] = {"U16", "U32", "U64", "F8_E5M2", "F8_E4M3",
                                             "F8_E4M3FN", "F8_E8M0", "F4", "F6_E2M3",
                                             "F6_E3M2", "C64", "C128", NULL};

static int st_index_of(ct_dtype d) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].dtype == d) return i;
    return -1;
}

typedef struct StEntry {
    char *name;
    ct_dtype dtype;
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    uint64_t begin, end;
} StEntry;

typedef struct StParse {
    IoSrc *src;
    JsonCur c;
    StEntry *e;
    int n, cap;
    ct_state_dict *sd;
    bool have_metadata;
} StParse;

/* "safetensors_load: 'file': <what>" */
CT_PRINTF(2, 3) static int fail(IoSrc *s, const char *fmt, ...) {
    char what[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return c10_error_int("%s: '%s': %s", s->op, s->name, what);
}

/* Names in messages: at most 100 bytes of them. */
static const char *short_name(const char *name) {
    static _Thread_local char buf[2][120];
    static _Thread_local int next;
    char *b = buf[next++ & 1];
    size_t n = strlen(name);
    if (n <= 100) return name;
    snprintf(b, sizeof buf[0], "%.100s...", name);
    return b;
}

static int json_failed(StParse *p) {
    return fail(p->src, "invalid JSON header: %s", p->c.err);
}

/* "__metadata__": null or {"key": "value", ...} */
static int parse_metadata(StParse *p) {
    JsonCur *c = &p->c;
    if (p->have_metadata) return fail(p->src, "duplicate key \"__metadata__\" in the header");
    p->have_metadata = true;
    if (jr_null(c)) return 0;
    if (!jr_expect(c, '{')) return json_failed(p);
    if (jr_eat(c, '}')) return 0;
    do {
        char *key = NULL, *value = NULL;
        if (!jr_string(c, &key, NULL) || !jr_expect(c, ':')) {
            free(key);
            return json_failed(p);
        }
        if (!jr_eat(c, '"')) {
            free(key);
            if (c->failed) return json_failed(p);
            return fail(p->src, "__metadata__ values must be strings");
        }
        c->p--; /* back to the quote */
        if (!jr_string(c, &value, NULL)) {
            free(key);
            return json_failed(p);
        }
        int rc = 0;
        if (ct_state_dict_metadata(p->sd, key))
            rc = fail(p->src, "duplicate key '%s' in __metadata__", short_name(key));
        else
            rc = io_sd_put_metadata(p->sd, key, value, p->src->op);
        free(key);
        free(value);
        if (rc < 0) return -1;
    } while (jr_eat(c, ','));
    if (!jr_expect(c, '}')) return json_failed(p);
    return 0;
}

/* {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}; other keys are ignored,
 * as the reference reader ignores them. */
static int parse_entry(StParse *p, StEntry *e) {
    JsonCur *c = &p->c;
    IoSrc *s = p->src;
    const char *nm = short_name(e->name);
    bool have_dtype = false, have_shape = false, have_offsets = false;
    if (!jr_expect(c, '{')) return json_failed(p);
    if (!jr_eat(c, '}')) {
        do {
            char *key = NULL;
            if (!jr_string(c, &key, NULL) || !jr_expect(c, ':')) {
                free(key);
                return json_failed(p);
            }
            int rc = 0;
            if (!strcmp(key, "dtype")) {
                char *dt = NULL;
                if (have_dtype) rc = fail(s, "tensor '%s': duplicate key \"dtype\"", nm);
                else if (!jr_string(c, &dt, NULL)) rc = json_failed(p);
                else {
                    have_dtype = true;
                    int k = 0;
                    while (k < ST_NDTYPES && strcmp(st_dtypes[k].name, dt)) k++;
                    if (k < ST_NDTYPES) {
                        e->dtype = st_dtypes[k].dtype;
                    } else {
                        bool known = false;
                        for (int u = 0; st_unsupported[u]; u++) known |= !strcmp(st_unsupported[u], dt);
                        rc = known ? fail(s, "tensor '%s': dtype %s is not supported by ctorch", nm, dt)
                                   : fail(s, "tensor '%s': unknown dtype '%s'", nm, short_name(dt));
                    }
                }
                free(dt);
            } else if (!strcmp(key, "shape")) {
                if (have_shape) rc = fail(s, "tensor '%s': duplicate key \"shape\"", nm);
                else if (!jr_expect(c, '[')) rc = json_failed(p);
                else {
                    have_shape = true;
                    e->ndim = 0;
                    if (!jr_eat(c, ']')) {
                        do {
                            uint64_t v;
                            if (e->ndim == CT_MAX_DIMS) {
                                rc = fail(s, "tensor '%s': shape has more than %d dimensions", nm, CT_MAX_DIMS);
                                break;
                            }
                            if (!jr_uint(c, INT64_MAX, &v)) break;
                            e->shape[e->ndim++] = (int64_t)v;
                        } while (jr_eat(c, ','));
                        if (!rc && !jr_expect(c, ']')) rc = json_failed(p);
                    }
                }
            } else if (!strcmp(key, "data_offsets")) {
                if (have_offsets) rc = fail(s, "tensor '%s': duplicate key \"data_offsets\"", nm);
                else if (!jr_expect(c, '[') || !jr_uint(c, UINT64_MAX, &e->begin) || !jr_expect(c, ',') ||
                         !jr_uint(c, UINT64_MAX, &e->end) || !jr_expect(c, ']'))
                    rc = c->failed ? json_failed(p) : -1;
                else have_offsets = true;
            } else if (!jr_skip(c)) {
                rc = json_failed(p);
            }
            free(key);
            if (rc < 0) return -1;
            if (c->failed) return json_failed(p);
        } while (jr_eat(c, ','));
        if (!jr_expect(c, '}')) return json_failed(p);
    }
    if (!have_dtype) return fail(s, "tensor '%s': missing \"dtype\"", nm);
    if (!have_shape) return fail(s, "tensor '%s': missing \"shape\"", nm);
    if (!have_offsets) return fail(s, "tensor '%s': missing \"data_offsets\"", nm);
    return 0;
}

static int parse_header(StParse *p, const char *text, size_t n) {
    JsonCur *c = &p->c;
    jr_init(c, text, n);
    if (!jr_expect(c, '{')) return json_failed(p);
    if (jr_eat(c, '}')) return jr_finish(c) ? 0 : json_failed(p);
    do {
        char *key = NULL;
        if (!jr_string(c, &key, NULL) || !jr_expect(c, ':')) {
            free(key);
            return json_failed(p);
        }
        if (!strcmp(key, "__metadata__")) {
            free(key);
            if (parse_metadata(p) < 0) return -1;
            continue;
        }
        if (p->n == p->cap) {
            int cap = p->cap ? 2 * p->cap : 16;
            StEntry *e = cap > (1 << 26) ? NULL : realloc(p->e, (size_t)cap * sizeof *e);
            if (!e) {
                free(key);
                return fail(p->src, "out of memory for the tensor list");
            }
            p->e = e;
            p->cap = cap;
        }
        StEntry *e = &p->e[p->n++];
        memset(e, 0, sizeof *e);
        e->name = key;
        if (parse_entry(p, e) < 0) return -1;
    } while (jr_eat(c, ','));
    if (!jr_expect(c, '}') || !jr_finish(c)) return json_failed(p);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const StEntry *)a)->name, ((const StEntry *)b)->name);
}

static int by_offsets(const void *a, const void *b) {
    const StEntry *x = *(const StEntry *const *)a, *y = *(const StEntry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Offsets against shapes and the data section, as the reference's validate(). */
static int check_layout(StParse *p, uint64_t data_len) {
    IoSrc *s = p->src;
    for (int i = 0; i + 1 < p->n; i++)
        if (!strcmp(p->e[i].name, p->e[i + 1].name))
            return fail(s, "duplicate tensor name '%s'", short_name(p->e[i].name));
    StEntry **order = malloc((size_t)(p->n ? p->n : 1) * sizeof *order);
    if (!order) return fail(s, "out of memory");
    for (int i = 0; i < p->n; i++) order[i] = &p->e[i];
    qsort(order, (size_t)p->n, sizeof *order, by_offsets);
    uint64_t at = 0;
    int rc = 0;
    for (int i = 0; i < p->n && !rc; i++) {
        const StEntry *e = order[i];
        const char *nm = short_name(e->name);
        uint64_t nbytes;
        bool overflow = io_shape_overflows(e->shape, e->ndim, e->dtype, &nbytes);
        if (e->end < e->begin)
            rc = fail(s, "tensor '%s': data_offsets [%llu, %llu] end before they begin", nm,
                      (unsigned long long)e->begin, (unsigned long long)e->end);
        else if (e->end > data_len)
            rc = fail(s, "tensor '%s': data_offsets [%llu, %llu] run past the end of the data section (%llu bytes)",
                      nm, (unsigned long long)e->begin, (unsigned long long)e->end,
                      (unsigned long long)data_len);
        else if (e->begin < at)
            rc = fail(s, "tensor '%s': data_offsets [%llu, %llu] overlap the previous tensor, which ends at %llu",
                      nm, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)at);
        else if (e->begin > at)
            rc = fail(s, "tensor '%s': data_offsets [%llu, %llu] leave a gap after byte %llu of the data section",
                      nm, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)at);
        else if (overflow)
            rc = fail(s, "tensor '%s': shape %s overflows", nm, c10_shape_str(e->shape, e->ndim));
        else if (nbytes != e->end - e->begin)
            rc = fail(s, "tensor '%s': shape %s of dtype %s needs %llu bytes but data_offsets [%llu, %llu] hold %llu",
                      nm, c10_shape_str(e->shape, e->ndim), st_dtypes[st_index_of(e->dtype)].name,
                      (unsigned long long)nbytes, (unsigned long long)e->begin,
                      (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
        at = e->end;
    }
    free(order);
    if (!rc && at != data_len)
        rc = fail(s, "the tensors cover %llu bytes but the data section holds %llu "
                     "(the last tensor must end at the end of the file)",
                  (unsigned long long)at, (unsigned long long)data_len);
    return rc;
}

static ct_state_dict *load(IoSrc *s) {
    ct_state_dict *result = NULL;
    char *header = NULL;
    StParse p = {.src = s};
    unsigned char len8[8];
    if (s->size < 8) {
        fail(s, "the file is too small (%llu bytes) to hold the 8-byte header length",
             (unsigned long long)s->size);
        goto done;
    }
    if (io_src_read(s, 0, len8, 8) < 0) goto done;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | len8[i];
    if (n > ST_MAX_HEADER) {
        fail(s, "header length %llu exceeds the limit of %llu bytes", (unsigned long long)n, ST_MAX_HEADER);
        goto done;
    }
    if (n > s->size - 8) {
        fail(s, "header length %llu is past the end of the file (%llu bytes)", (unsigned long long)n,
             (unsigned long long)s->size);
        goto done;
    }
    header = malloc(n ? n : 1);
    if (!header) {
        fail(s, "out of memory for a %llu-byte header", (unsigned long long)n);
        goto done;
    }
    if (io_src_read(s, 8, header, n) < 0) goto done;
    if (!jr_valid_utf8(header, n)) {
        fail(s, "the header is not valid UTF-8");
        goto done;
    }
    p.sd = ct_state_dict_new();
    if (!p.sd || parse_header(&p, header, n) < 0) goto done;
    free(header);
    header = NULL;
    if (p.n > 1) qsort(p.e, (size_t)p.n, sizeof *p.e, by_name);
    uint64_t data_start = 8 + n, data_len = s->size - data_start;
    if (check_layout(&p, data_len) < 0) goto done;
    for (int i = 0; i < p.n; i++) {
        StEntry *e = &p.e[i];
        TensorImpl *t = c10_empty(e->shape, e->ndim, e->dtype, CT_CPU);
        if (!t) goto done;
        size_t nbytes = (size_t)(e->end - e->begin);
        int rc = io_src_read(s, data_start + e->begin, c10_data(t), nbytes);
        if (rc == 0) {
            io_fix_loaded(c10_data(t), t->numel, t->dtype, IO_HOST_BIG_ENDIAN);
            rc = io_sd_put(p.sd, e->name, t, s->op);
        }
        c10_release(t);
        if (rc < 0) goto done;
    }
    result = p.sd;
    p.sd = NULL;
done:
    free(header);
    for (int i = 0; i < p.n; i++) free(p.e[i].name);
    free(p.e);
    ct_state_dict_free(p.sd);
    return result;
}

ct_state_dict *ct_safetensors_load(const char *path) {
    IoSrc s;
    if (io_src_open(&s, "safetensors_load", path) < 0) return NULL;
    ct_state_dict *sd = load(&s);
    io_src_close(&s);
    return sd;
}

ct_state_dict *ct_safetensors_load_buffer(const void *data, size_t nbytes) {
    IoSrc s;
    if (io_src_buffer(&s, "safetensors_load", data, nbytes) < 0) return NULL;
    return load(&s);
}

/* ---------------------------------------------------------------- writing */

/* A JSON string as serde_json (and Python's json.dumps(ensure_ascii=False)) writes it. */
static void put_json_string(IoSink *h, const char *str) {
    io_sink_write(h, "\"", 1);
    for (const unsigned char *q = (const unsigned char *)str; *q; q++) {
        char esc[8];
        const char *rep = NULL;
        switch (*q) {
        case '"': rep = "\\\""; break;
        case '\\': rep = "\\\\"; break;
        case '\b': rep = "\\b"; break;
        case '\f': rep = "\\f"; break;
        case '\n': rep = "\\n"; break;
        case '\r': rep = "\\r"; break;
        case '\t': rep = "\\t"; break;
        default:
            if (*q < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *q);
                rep = esc;
            }
        }
        if (rep) io_sink_write(h, rep, strlen(rep));
        else io_sink_write(h, q, 1);
    }
    io_sink_write(h, "\"", 1);
}

/* The reference's order: dtype rank descending, then name (a stable insertion sort). */
static void sort_by_rank(const ct_state_dict *sd, int *order) {
    for (int i = 0; i < sd->n; i++) order[i] = i;
    for (int i = 1; i < sd->n; i++) {
        int v = order[i], j = i;
        while (j > 0) {
            const SdEntry *x = &sd->e[order[j - 1]], *y = &sd->e[v];
            int rx = st_dtypes[st_index_of(x->t->dtype)].rank, ry = st_dtypes[st_index_of(y->t->dtype)].rank;
            if (rx > ry || (rx == ry && strcmp(x->name, y->name) < 0)) break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

/* Can sd be written? (checked before a file is opened) */
static int check_saveable(const ct_state_dict *sd, const char *op, const char *name) {
    if (!sd) return c10_error_int("%s: the state dict is NULL", op);
    for (int i = 0; i < sd->n; i++) {
        const SdEntry *e = &sd->e[i];
        if (!strcmp(e->name, "__metadata__"))
            return c10_error_int("%s: '%s': a tensor cannot be named \"__metadata__\"", op, name);
        if (!jr_valid_utf8(e->name, strlen(e->name)))
            return c10_error_int("%s: '%s': tensor name '%s' is not valid UTF-8", op, name, short_name(e->name));
        if (e->t->device != CT_CPU)
            return c10_error_int("%s: '%s': tensor '%s' is on the meta device and has no data", op, name,
                                 short_name(e->name));
    }
    for (int i = 0; i < sd->mn; i++)
        if (!jr_valid_utf8(sd->mkey[i], strlen(sd->mkey[i])) || !jr_valid_utf8(sd->mval[i], strlen(sd->mval[i])))
            return c10_error_int("%s: '%s': metadata '%s' is not valid UTF-8", op, name, short_name(sd->mkey[i]));
    return 0;
}

/* Writes sd to out; op and name for messages. */
static int save(const ct_state_dict *sd, IoSink *out, const char *op, const char *name) {
    if (check_saveable(sd, op, name) < 0) return -1;
    int *order = malloc((size_t)(sd->n ? sd->n : 1) * sizeof *order);
    if (!order) return c10_error_int("%s: out of memory", op);
    sort_by_rank(sd, order);

    IoSink h = {0};
    io_sink_write(&h, "{", 1);
    if (sd->mn) {
        io_sink_write(&h, "\"__metadata__\":{", 16);
        for (int i = 0; i < sd->mn; i++) {
            if (i) io_sink_write(&h, ",", 1);
            put_json_string(&h, sd->mkey[i]);
            io_sink_write(&h, ":", 1);
            put_json_string(&h, sd->mval[i]);
        }
        io_sink_write(&h, "}", 1);
    }
    uint64_t offset = 0;
    for (int k = 0; k < sd->n; k++) {
        const SdEntry *e = &sd->e[order[k]];
        const TensorImpl *t = e->t;
        char buf[96];
        if (k || sd->mn) io_sink_write(&h, ",", 1);
        put_json_string(&h, e->name);
        snprintf(buf, sizeof buf, ":{\"dtype\":\"%s\",\"shape\":[", st_dtypes[st_index_of(t->dtype)].name);
        io_sink_write(&h, buf, strlen(buf));
        for (int d = 0; d < t->ndim; d++) {
            snprintf(buf, sizeof buf, d ? ",%lld" : "%lld", (long long)t->sizes[d]);
            io_sink_write(&h, buf, strlen(buf));
        }
        uint64_t nbytes = (uint64_t)t->numel * c10_elsize[t->dtype];
        snprintf(buf, sizeof buf, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                 (unsigned long long)(offset + nbytes));
        io_sink_write(&h, buf, strlen(buf));
        offset += nbytes;
    }
    io_sink_write(&h, "}", 1);
    while (!h.failed && h.len % 8) io_sink_write(&h, " ", 1);
    int rc = 0;
    if (h.failed) {
        rc = c10_error_int("%s: out of memory for the header", op);
    } else {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
        io_sink_write(out, len8, 8);
        io_sink_write(out, h.buf, h.len);
        for (int k = 0; k < sd->n && !out->failed; k++) io_sink_tensor(out, sd->e[order[k]].t);
        if (out->failed)
            rc = out->f ? c10_error_int("%s: '%s': write failed: %s", op, name, strerror(errno))
                        : c10_error_int("%s: out of memory", op);
    }
    free(h.buf);
    free(order);
    return rc;
}

int ct_safetensors_save(const ct_state_dict *sd, const char *path) {
    const char *op = "safetensors_save";
    if (!path) return c10_error_int("%s: path is NULL", op);
    if (check_saveable(sd, op, path) < 0) return -1;
    FILE *f = fopen(path, "wb");
    if (!f) return c10_error_int("%s: cannot open '%s' for writing: %s", op, path, strerror(errno));
    IoSink out = {.f = f};
    int rc = save(sd, &out, op, path);
    if (fclose(f) != 0 && rc == 0)
        rc = c10_error_int("%s: '%s': write failed: %s", op, path, strerror(errno));
    if (rc < 0) remove(path);
    return rc;
}

void *ct_safetensors_save_buffer(const ct_state_dict *sd, size_t *nbytes) {
    IoSink out = {0};
    if (save(sd, &out, "safetensors_save", "<buffer>") < 0) {
        free(out.buf);
        return NULL;
    }
    if (nbytes) *nbytes = out.len;
    return out.buf;
}
