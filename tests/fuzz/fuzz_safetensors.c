/* fuzz_safetensors.c: libFuzzer target for the safetensors reader.
 *
 * Any input must either load or fail with a message (never crash, leak or read
 * out of bounds: the build has ASan/UBSan). What loads must survive a round trip:
 * saving it gives a file that loads to the same tensors, and saving that again
 * gives the same bytes. Build and run: tests/fuzz/run.sh. */
#include "ctorch.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what) {
    fprintf(stderr, "fuzz_safetensors: %s (last error: %s)\n", what,
            ct_last_error() ? ct_last_error() : "none");
    abort();
}

static void same_tensors(const ct_state_dict *a, const ct_state_dict *b) {
    if (ct_state_dict_size(a) != ct_state_dict_size(b)) die("round trip changed the tensor count");
    for (int i = 0; i < ct_state_dict_size(a); i++) {
        const char *name = ct_state_dict_name(a, i);
        if (strcmp(name, ct_state_dict_name(b, i))) die("round trip changed the names");
        ct_tensor *x = ct_state_dict_tensor(a, i), *y = ct_state_dict_tensor(b, i);
        if (ct_dtype_of(x) != ct_dtype_of(y) || ct_ndim(x) != ct_ndim(y) || ct_numel(x) != ct_numel(y))
            die("round trip changed a tensor's dtype or shape");
        size_t bytes = (size_t)ct_numel(x) * ct_dtype_size(ct_dtype_of(x));
        if (bytes && memcmp(ct_data_ptr(x), ct_data_ptr(y), bytes)) die("round trip changed a tensor's data");
    }
    if (ct_state_dict_metadata_size(a) != ct_state_dict_metadata_size(b)) die("round trip changed the metadata");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_clear_error();
    ct_scope_begin();
    ct_state_dict *sd = ct_safetensors_load_buffer(data, size);
    if (!sd) {
        if (!ct_last_error()) die("load failed without a message");
    } else {
        size_t n1 = 0, n2 = 0;
        void *b1 = ct_safetensors_save_buffer(sd, &n1);
        if (!b1) die("saving a loaded file failed");
        ct_state_dict *sd2 = ct_safetensors_load_buffer(b1, n1);
        if (!sd2) die("loading a saved file failed");
        same_tensors(sd, sd2);
        void *b2 = ct_safetensors_save_buffer(sd2, &n2);
        if (!b2 || n1 != n2 || memcmp(b1, b2, n1)) die("saving is not deterministic");
        free(b1);
        free(b2);
        ct_state_dict_free(sd2);
        ct_state_dict_free(sd);
    }
    ct_scope_end();
    return 0;
}
