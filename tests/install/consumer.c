/* consumer.c: a program outside the ctorch tree, built against an installed ctorch
 * by tests/test_install.sh (through find_package and through pkg-config). It runs
 * the core issue's example and checks what it prints; exit status 0 when right. */
#include <ctorch.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    int bad = 0;
    ct_scope_begin();
    ct_tensor *x = ct_view(ct_arange(0, 12, 1, CT_FLOAT32), CT_SHAPE(3, 4));
    ct_tensor *t = ct_transpose(x, 0, 1);
    if (!x || !t) {
        fprintf(stderr, "consumer: %s\n", ct_last_error() ? ct_last_error() : "NULL");
        ct_scope_end();
        return 1;
    }
    printf("%lld %lld | %lld %lld | %d\n", (long long)ct_stride(x, 0), (long long)ct_stride(x, 1),
           (long long)ct_stride(t, 0), (long long)ct_stride(t, 1), ct_is_contiguous(t));
    bad |= !(ct_stride(x, 0) == 4 && ct_stride(x, 1) == 1 && ct_stride(t, 0) == 1 &&
             ct_stride(t, 1) == 4 && !ct_is_contiguous(t));
    ct_tensor *n = ct_narrow(x, 1, 1, 2);
    bad |= ct_fill_(n, 7) != 0;
    ct_print(x);
    float got[12];
    static const float want[12] = {0, 7, 7, 3, 4, 7, 7, 7, 8, 7, 7, 11};
    bad |= ct_copy_to_buffer(x, got, CT_FLOAT32) != 0 || memcmp(got, want, sizeof got) != 0;
    const char *err = ct_narrow(x, 1, 3, 2) ? NULL : ct_last_error();
    printf("%s\n", err ? err : "(no error)");
    bad |= !err || !strstr(err, "start (3) + length (2) exceeds dimension size (4).");
    ct_scope_end();
    printf("consumer: %s\n", bad ? "WRONG RESULTS" : "ok");
    return bad;
}
