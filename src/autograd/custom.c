/* custom.c: custom autograd functions written in C (torch.autograd.Function). */
#include "autograd/autograd.h"
#include <stdlib.h>

struct CustomFn {
    int dummy;
};

void ag_custom_free(CustomFn *f) { free(f); }

int ag_custom_apply(Node *n, TensorImpl **go, TensorImpl **gi) {
    (void)n, (void)go, (void)gi;
    return c10_error_int("custom functions: not implemented yet");
}

/* In-place ops on views: PyTorch's CopySlices. Not implemented yet: the view's
 * own history is rebased (its gradient flows), but the base does not see it. */
int ag_rebase_view(TensorImpl *self, Node *node) {
    (void)self, (void)node;
    return 0;
}
