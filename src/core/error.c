/* error.c: per-thread error messages (the error rule in ctorch.h). */
#include "core.h"
#include <stdio.h>
#include <stdlib.h>

static _Thread_local char message[1024];
static _Thread_local bool has_message;

static void set_message(const char *fmt, va_list ap) {
    vsnprintf(message, sizeof message, fmt, ap);
    has_message = true;
}

void *c10_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return NULL;
}

int c10_error_int(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return -1;
}

bool c10_has_error(void) { return has_message; }
const char *ct_last_error(void) { return has_message ? message : NULL; }
void ct_clear_error(void) { has_message = false; message[0] = 0; }

void c10_assert_fail(const char *what, const char *file, int line) {
    fprintf(stderr, "ctorch: internal error: %s (%s:%d)\n", what, file, line);
    abort();
}

/* Formats sizes as PyTorch does in messages: [2, 3]. A ring of buffers lets one
 * message name several shapes without allocating. */
const char *c10_shape_str(const int64_t *sizes, int ndim) {
    static _Thread_local char ring[8][256];
    static _Thread_local unsigned next;
    char *buf = ring[next++ % 8];
    size_t n = 0;
    buf[n++] = '[';
    for (int i = 0; i < ndim && n < 230; i++)
        n += (size_t)snprintf(buf + n, 256 - n, i ? ", %lld" : "%lld", (long long)sizes[i]);
    snprintf(buf + n, 256 - n, "]");
    return buf;
}
