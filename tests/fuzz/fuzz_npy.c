/* fuzz_npy.c: libFuzzer target for the .npy reader. Any input must either load or
 * fail with a message; what loads is read back element by element (so that ASan
 * sees every byte of it). Build and run: tests/fuzz/run.sh. */
#include "ctorch.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_clear_error();
    ct_scope_begin();
    ct_tensor *t = ct_load_npy_buffer(data, size);
    if (!t) {
        if (!ct_last_error()) {
            fprintf(stderr, "fuzz_npy: load failed without a message\n");
            abort();
        }
    } else {
        int64_t n = ct_numel(t);
        if (n < 0 || !ct_is_contiguous(t)) abort();
        double *out = malloc((size_t)(n ? n : 1) * sizeof *out);
        if (out && ct_copy_to_buffer(t, out, CT_FLOAT64) != 0) abort();
        free(out);
    }
    ct_scope_end();
    return 0;
}
