/*
 * io.h: what the io layer's files share (private to src/io). Uses only core.
 *
 * IoSrc reads bytes from a file (pread, no mapping, so a file that shrinks under
 * us is an error, not a SIGBUS) or from a caller's buffer, always bounds-checked.
 * IoSink writes to a FILE or to a growing malloc'ed buffer.
 */
#ifndef CT_IO_IO_H
#define CT_IO_IO_H

#include "core/core.h"
#include <stdio.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define IO_HOST_BIG_ENDIAN 1
#else
#define IO_HOST_BIG_ENDIAN 0
#endif

/* ------------------------------------------------------------ state dicts */
typedef struct SdEntry {
    char *name;
    TensorImpl *t; /* a reference the dict owns */
} SdEntry;

struct ct_state_dict {
    SdEntry *e;
    int n, cap;
    int *index;     /* open addressing over e[]: entry index or -1 */
    int index_cap;  /* a power of two, > 2n; 0 when absent */
    char **mkey, **mval;
    int mn, mcap;
};

/* Stores t (a new reference is taken) under name (copied). op names the caller. */
CT_INTERNAL int io_sd_put(ct_state_dict *sd, const char *name, TensorImpl *t, const char *op);
CT_INTERNAL int io_sd_put_metadata(ct_state_dict *sd, const char *key, const char *value,
                                   const char *op);

/* ---------------------------------------------------------------- sources */
typedef struct IoSrc {
    const unsigned char *mem; /* the buffer, or NULL for a file */
    int fd;
    uint64_t size;
    const char *name;         /* the path, or "<buffer>" */
    const char *op;           /* the caller, for messages: "safetensors_load" */
} IoSrc;

CT_INTERNAL int io_src_open(IoSrc *s, const char *op, const char *path);
CT_INTERNAL int io_src_buffer(IoSrc *s, const char *op, const void *data, size_t n);
CT_INTERNAL void io_src_close(IoSrc *s);
/* n bytes at off into dst, or -1 with "op: 'name': ..." when they are not all there. */
CT_INTERNAL int io_src_read(IoSrc *s, uint64_t off, void *dst, size_t n);

/* Does a contiguous tensor of this shape overflow int64 (its byte count, or the
 * strides, which skip zero-size dims)? If not, *nbytes gets its byte count. */
CT_INTERNAL bool io_shape_overflows(const int64_t *shape, int ndim, ct_dtype dtype, uint64_t *nbytes);

/* Loaded bytes to valid values: bools to 0/1, and a byte swap when swap. */
CT_INTERNAL void io_fix_loaded(void *data, int64_t n, ct_dtype dtype, bool swap);

/* ------------------------------------------------------------------ sinks */
typedef struct IoSink {
    FILE *f;                  /* or NULL: into buf */
    char *buf;
    size_t len, cap;
    bool failed;
} IoSink;

CT_INTERNAL int io_sink_write(IoSink *s, const void *data, size_t n);
/* t's elements in row-major order, little-endian (any layout; CPU only). */
CT_INTERNAL int io_sink_tensor(IoSink *s, const TensorImpl *t);

#endif /* CT_IO_IO_H */
