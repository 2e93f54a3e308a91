/* state_dict.c: ct_state_dict, an ordered name -> tensor map with string metadata,
 * and the byte sources and sinks the io formats share (io.h). */
#include "io/io.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ state dicts */

static uint64_t hash_name(const char *s) { /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int rebuild_index(ct_state_dict *sd) {
    int cap = 16;
    while (cap <= 2 * sd->n) cap *= 2;
    int *index = malloc((size_t)cap * sizeof *index);
    if (!index) return c10_error_int("state_dict: out of memory");
    for (int i = 0; i < cap; i++) index[i] = -1;
    for (int i = 0; i < sd->n; i++) {
        size_t h = (size_t)hash_name(sd->e[i].name) & (size_t)(cap - 1);
        while (index[h] >= 0) h = (h + 1) & (size_t)(cap - 1);
        index[h] = i;
    }
    free(sd->index);
    sd->index = index;
    sd->index_cap = cap;
    return 0;
}

static int find(const ct_state_dict *sd, const char *name) {
    if (!sd->index_cap) return -1;
    size_t h = (size_t)hash_name(name) & (size_t)(sd->index_cap - 1);
    for (; sd->index[h] >= 0; h = (h + 1) & (size_t)(sd->index_cap - 1))
        if (!strcmp(sd->e[sd->index[h]].name, name)) return sd->index[h];
    return -1;
}

ct_state_dict *ct_state_dict_new(void) {
    ct_state_dict *sd = calloc(1, sizeof *sd);
    if (!sd) return c10_error("state_dict_new: out of memory");
    return sd;
}

void ct_state_dict_free(ct_state_dict *sd) {
    if (!sd) return;
    for (int i = 0; i < sd->n; i++) {
        free(sd->e[i].name);
        c10_release(sd->e[i].t);
    }
    for (int i = 0; i < sd->mn; i++) {
        free(sd->mkey[i]);
        free(sd->mval[i]);
    }
    free(sd->e);
    free(sd->index);
    free(sd->mkey);
    free(sd->mval);
    free(sd);
}

int io_sd_put(ct_state_dict *sd, const char *name, TensorImpl *t, const char *op) {
    int i = find(sd, name);
    if (i >= 0) {
        c10_retain(t);
        c10_release(sd->e[i].t);
        sd->e[i].t = t;
        return 0;
    }
    if (sd->n == sd->cap) {
        if (sd->cap > (1 << 28)) return c10_error_int("%s: too many tensors", op);
        int cap = sd->cap ? 2 * sd->cap : 8;
        SdEntry *e = realloc(sd->e, (size_t)cap * sizeof *e);
        if (!e) return c10_error_int("%s: out of memory", op);
        sd->e = e;
        sd->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return c10_error_int("%s: out of memory", op);
    sd->e[sd->n].name = copy;
    sd->e[sd->n].t = c10_retain(t);
    sd->n++;
    if (2 * sd->n >= sd->index_cap) {
        if (rebuild_index(sd) < 0) {
            sd->n--;
            free(copy);
            c10_release(t);
            return -1;
        }
    } else {
        size_t h = (size_t)hash_name(copy) & (size_t)(sd->index_cap - 1);
        while (sd->index[h] >= 0) h = (h + 1) & (size_t)(sd->index_cap - 1);
        sd->index[h] = sd->n - 1;
    }
    return 0;
}

int io_sd_put_metadata(ct_state_dict *sd, const char *key, const char *value, const char *op) {
    char *v = strdup(value);
    if (!v) return c10_error_int("%s: out of memory", op);
    for (int i = 0; i < sd->mn; i++)
        if (!strcmp(sd->mkey[i], key)) {
            free(sd->mval[i]);
            sd->mval[i] = v;
            return 0;
        }
    if (sd->mn == sd->mcap) {
        int cap = sd->mcap ? 2 * sd->mcap : 4;
        char **k = realloc(sd->mkey, (size_t)cap * sizeof *k);
        if (k) sd->mkey = k;
        char **vv = k ? realloc(sd->mval, (size_t)cap * sizeof *vv) : NULL;
        if (!vv) {
            free(v);
            return c10_error_int("%s: out of memory", op);
        }
        sd->mval = vv;
        sd->mcap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return c10_error_int("%s: out of memory", op);
    }
    sd->mkey[sd->mn] = k;
    sd->mval[sd->mn] = v;
    sd->mn++;
    return 0;
}

#define NEED_SD(sd, op, ret)                                                   \
    do {                                                                       \
        if (!(sd)) {                                                           \
            c10_error(op ": the state dict is NULL");                          \
            return ret;                                                        \
        }                                                                      \
    } while (0)

int ct_state_dict_set(ct_state_dict *sd, const char *name, const ct_tensor *h) {
    NEED_SD(sd, "state_dict_set", -1);
    if (!name) return c10_error_int("state_dict_set: name is NULL");
    TensorImpl *t = c10_unwrap(h);
    if (!t) return -1;
    return io_sd_put(sd, name, t, "state_dict_set");
}

int ct_state_dict_size(const ct_state_dict *sd) {
    NEED_SD(sd, "state_dict_size", -1);
    return sd->n;
}

static bool in_range(const ct_state_dict *sd, int i, const char *op) {
    if (i >= 0 && i < sd->n) return true;
    c10_error("%s: index %d is out of range for a state dict of %d tensors", op, i, sd->n);
    return false;
}

const char *ct_state_dict_name(const ct_state_dict *sd, int i) {
    NEED_SD(sd, "state_dict_name", NULL);
    return in_range(sd, i, "state_dict_name") ? sd->e[i].name : NULL;
}

ct_tensor *ct_state_dict_tensor(const ct_state_dict *sd, int i) {
    NEED_SD(sd, "state_dict_tensor", NULL);
    return in_range(sd, i, "state_dict_tensor") ? c10_wrap(c10_retain(sd->e[i].t)) : NULL;
}

int ct_state_dict_find(const ct_state_dict *sd, const char *name) {
    if (!sd || !name) return -1;
    return find(sd, name);
}

ct_tensor *ct_state_dict_get(const ct_state_dict *sd, const char *name) {
    NEED_SD(sd, "state_dict_get", NULL);
    if (!name) return c10_error("state_dict_get: name is NULL");
    int i = find(sd, name);
    if (i < 0) return c10_error("state_dict_get: no tensor named '%s'", name);
    return c10_wrap(c10_retain(sd->e[i].t));
}

int ct_state_dict_remove(ct_state_dict *sd, const char *name) {
    NEED_SD(sd, "state_dict_remove", -1);
    if (!name) return c10_error_int("state_dict_remove: name is NULL");
    int i = find(sd, name);
    if (i < 0) return c10_error_int("state_dict_remove: no tensor named '%s'", name);
    free(sd->e[i].name);
    c10_release(sd->e[i].t);
    memmove(sd->e + i, sd->e + i + 1, (size_t)(sd->n - i - 1) * sizeof *sd->e);
    sd->n--;
    if (rebuild_index(sd) < 0) { /* keep lookups working even without memory */
        free(sd->index);
        sd->index = NULL;
        sd->index_cap = 0;
        return -1;
    }
    return 0;
}

int ct_state_dict_set_metadata(ct_state_dict *sd, const char *key, const char *value) {
    NEED_SD(sd, "state_dict_set_metadata", -1);
    if (!key || !value) return c10_error_int("state_dict_set_metadata: key or value is NULL");
    return io_sd_put_metadata(sd, key, value, "state_dict_set_metadata");
}

const char *ct_state_dict_metadata(const ct_state_dict *sd, const char *key) {
    if (!sd || !key) return NULL;
    for (int i = 0; i < sd->mn; i++)
        if (!strcmp(sd->mkey[i], key)) return sd->mval[i];
    return NULL;
}

int ct_state_dict_metadata_size(const ct_state_dict *sd) {
    NEED_SD(sd, "state_dict_metadata_size", -1);
    return sd->mn;
}

const char *ct_state_dict_metadata_key(const ct_state_dict *sd, int i) {
    NEED_SD(sd, "state_dict_metadata_key", NULL);
    if (i < 0 || i >= sd->mn)
        return c10_error("state_dict_metadata_key: index %d is out of range for %d entries", i, sd->mn);
    return sd->mkey[i];
}

/* ---------------------------------------------------------------- sources */

int io_src_open(IoSrc *s, const char *op, const char *path) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->op = op;
    s->name = path ? path : "(null)";
    if (!path) return c10_error_int("%s: path is NULL", op);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return c10_error_int("%s: cannot open '%s': %s", op, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return c10_error_int("%s: cannot stat '%s': %s", op, path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return c10_error_int("%s: '%s' is not a regular file", op, path);
    }
    s->fd = fd;
    s->size = (uint64_t)st.st_size;
    return 0;
}

int io_src_buffer(IoSrc *s, const char *op, const void *data, size_t n) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->op = op;
    s->name = "<buffer>";
    if (!data && n) return c10_error_int("%s: the buffer is NULL", op);
    s->mem = data ? data : (const unsigned char *)"";
    s->size = n;
    return 0;
}

void io_src_close(IoSrc *s) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
}

int io_src_read(IoSrc *s, uint64_t off, void *dst, size_t n) {
    if (off > s->size || n > s->size - off)
        return c10_error_int("%s: '%s': unexpected end of file (wanted %zu bytes at offset %llu of %llu)",
                             s->op, s->name, n, (unsigned long long)off, (unsigned long long)s->size);
    if (!n) return 0;
    if (s->mem) {
        memcpy(dst, s->mem + off, n);
        return 0;
    }
    char *d = dst;
    while (n) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = pread(s->fd, d, chunk, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return c10_error_int("%s: '%s': read failed: %s", s->op, s->name, strerror(errno));
        if (r == 0)
            return c10_error_int("%s: '%s': unexpected end of file (the file shrank while reading)",
                                 s->op, s->name);
        d += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

bool io_shape_overflows(const int64_t *shape, int ndim, ct_dtype dtype, uint64_t *nbytes) {
    int64_t numel = 1, span = 1, bytes;
    bool overflow = false;
    for (int d = 0; d < ndim; d++) {
        overflow |= shape[d] < 0 || __builtin_mul_overflow(numel, shape[d], &numel);
        overflow |= __builtin_mul_overflow(span, shape[d] ? shape[d] : 1, &span);
    }
    overflow |= __builtin_mul_overflow(span, (int64_t)c10_elsize[dtype], &bytes);
    overflow |= __builtin_mul_overflow(numel, (int64_t)c10_elsize[dtype], &bytes);
    if (!overflow) *nbytes = (uint64_t)bytes;
    return overflow;
}

void io_fix_loaded(void *data, int64_t n, ct_dtype dtype, bool swap) {
    size_t es = c10_elsize[dtype];
    unsigned char *p = data;
    if (dtype == CT_BOOL) {
        for (int64_t i = 0; i < n; i++) p[i] = p[i] != 0;
        return;
    }
    if (!swap || es == 1) return;
    for (int64_t i = 0; i < n; i++, p += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            unsigned char tmp = p[a];
            p[a] = p[b];
            p[b] = tmp;
        }
}

/* ------------------------------------------------------------------ sinks */

int io_sink_write(IoSink *s, const void *data, size_t n) {
    if (s->failed) return -1;
    if (!n) return 0;
    if (s->f) {
        if (fwrite(data, 1, n, s->f) != n) {
            s->failed = true;
            return -1;
        }
        return 0;
    }
    if (n > s->cap - s->len) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap - s->len < n) {
            if (cap > SIZE_MAX / 2) {
                s->failed = true;
                return -1;
            }
            cap *= 2;
        }
        char *b = realloc(s->buf, cap);
        if (!b) {
            s->failed = true;
            return -1;
        }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    return 0;
}

int io_sink_tensor(IoSink *s, const TensorImpl *t) {
    if (t->numel == 0) return 0;
    TensorImpl *c = c10_contiguous(t);
    if (!c) {
        s->failed = true;
        return -1;
    }
    const char *d = c10_data(c);
    size_t es = c10_elsize[c->dtype], nbytes = (size_t)c->numel * es;
    int rc = 0;
    if (!IO_HOST_BIG_ENDIAN || es == 1) {
        rc = io_sink_write(s, d, nbytes);
    } else {
        unsigned char chunk[4096];
        for (size_t off = 0; off < nbytes && rc == 0; off += sizeof chunk) {
            size_t k = nbytes - off < sizeof chunk ? nbytes - off : sizeof chunk;
            memcpy(chunk, d + off, k);
            io_fix_loaded(chunk, (int64_t)(k / es), c->dtype, true);
            rc = io_sink_write(s, chunk, k);
        }
    }
    c10_release(c);
    return rc;
}
