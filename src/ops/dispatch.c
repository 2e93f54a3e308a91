/* dispatch.c: the op table (ops.def's names and forwards) and the dispatcher. */
#include "ops/ops.h"
#include <stdio.h>

/* Messages name the operation: prefix "op: " unless the message already starts
 * with the op's name (as "select(): index 3 out of range ..." does). */
static void name_error(const char *name) {
    const char *m = ct_last_error();
    size_t l = strlen(name);
    if (!m || (!strncmp(m, name, l) && (m[l] == ':' || m[l] == '(' || m[l] == ' '))) return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", m);
    c10_error("%s: %s", name, buf);
}

const OpInfo op_info[OP_COUNT] = {
#define OP(name, node, nout, fwd, ...) [OP_##name] = {#name, fwd, nout},
#define UNARY(name, ...) [OP_##name] = {#name, fwd_unary, 1},
#define BINARY(name, ...) [OP_##name] = {#name, fwd_binary, 1},
#include "ops/ops.def"
#undef OP
#undef UNARY
#undef BINARY
};

int at_call(int op, const OpArgs *a, TensorImpl **out) {
    CT_ASSERT(op >= 0 && op < OP_COUNT);
    for (int k = 0; k < op_info[op].nout; k++) out[k] = NULL;
    if (a->nt > 0 && !a->t[0]) { /* every op's first tensor is required: an input that failed */
        if (!c10_has_error()) c10_error("%s: a tensor argument is NULL", op_info[op].name);
        return -1;
    }
    int n = op_info[op].forward(op, a, out);
    if (n < 0) name_error(op_info[op].name);
    if (n < 0)
        for (int k = 0; k < op_info[op].nout; k++) {
            c10_release(out[k]);
            out[k] = NULL;
        }
    return n;
}

TensorImpl *at_call1(int op, const OpArgs *a) {
    TensorImpl *out[OP_MAX_OUTS];
    int n = at_call(op, a, out);
    for (int k = 1; k < n; k++) c10_release(out[k]);
    return n > 0 ? out[0] : NULL;
}

int fwd_floor_divide(int op, const OpArgs *a, TensorImpl **out) {
    (void)op;
    return fwd_binary(OP_div_floor, a, out);
}
