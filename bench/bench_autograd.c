/* bench_autograd.c: W8, the autograd overhead: a chain of 1,000 ops (mul, add,
 * sin alternating) on one-element tensors, forward and backward. Prints the
 * median ns per op of several runs for: forward without grad, forward with
 * requires_grad, forward + backward; each including the release of the
 * chain's handles and graph. bench/run.py puts it beside PyTorch. */
#include <ctorch.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: robust on a shared machine */
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* mode 0: no grad; 1: forward with grad; 2: forward + backward */
static double run(int mode, int nops) {
    ct_scope_begin();
    ct_tensor *x = ct_scalar(0.5), *c = ct_scalar(1.0001);
    if (mode) ct_set_requires_grad(x, true);
    double t0 = now();
    ct_scope_begin(); /* the chain's handles and graph: their release is timed too */
    ct_tensor *y = x;
    for (int i = 0; i < nops; i++) {
        switch (i % 3) {
        case 0: y = ct_mul(y, c); break;
        case 1: y = ct_add(y, c); break;
        default: y = ct_sin(y); break;
        }
    }
    if (mode == 2) ct_backward(y, NULL);
    if (!y || (mode == 2 && !ct_grad(x))) {
        fprintf(stderr, "bench_autograd: %s\n", ct_last_error());
        exit(1);
    }
    ct_scope_end();
    double t = now() - t0;
    ct_scope_end();
    return t / nops * 1e9;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 50, nops = 1000;
    int only = argc > 2 ? atoi(argv[2]) : -1; /* one mode only (for profiling) */
    ct_set_num_threads(1);
    const char *names[3] = {"no_grad_fwd", "fwd", "fwd_bwd"};
    for (int mode = 0; mode < 3; mode++) {
        if (only >= 0 && mode != only) continue;
        double t[1000];
        for (int r = 0; r < reps && r < 1000; r++) t[r] = run(mode, nops);
        qsort(t, (size_t)reps, sizeof *t, cmp);
        printf("W8 %s ns_per_op %.1f\n", names[mode], t[reps / 2]);
    }
    return 0;
}
