/* autograd_demo.c: the autograd issue's example; prints 53.75 0.5 as PyTorch does. */
#include <ctorch.h>
#include <stdio.h>
int main(void) {
    ct_scope_begin();
    ct_tensor *a = ct_scalar(2), *b = ct_scalar(43);
    ct_set_requires_grad(a, true);
    ct_set_requires_grad(b, true);
    ct_tensor *c = ct_sub(ct_mul(a, b), ct_add(ct_div(b, a), b));
    ct_backward(c, NULL);
    printf("%g %g\n", ct_item(ct_grad(a)), ct_item(ct_grad(b)));
    ct_scope_end();
    return 0;
}
