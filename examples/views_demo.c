/* views_demo.c: the core issue's example; prints what PyTorch prints for the
 * same steps. */
#include <ctorch.h>
#include <stdio.h>
int main(void) {
    ct_scope_begin();
    ct_tensor *x = ct_view(ct_arange(0, 12, 1, CT_FLOAT32), (int64_t[]){3, 4}, 2);
    ct_tensor *t = ct_transpose(x, 0, 1);
    printf("%lld %lld | %lld %lld | %d\n", (long long)ct_stride(x, 0), (long long)ct_stride(x, 1),
           (long long)ct_stride(t, 0), (long long)ct_stride(t, 1), ct_is_contiguous(t));
    ct_tensor *n = ct_narrow(x, 1, 1, 2);
    ct_fill_(n, 7);
    ct_print(x);
    if (!ct_narrow(x, 1, 3, 2)) printf("%s\n", ct_last_error());
    ct_scope_end();
    return 0;
}
