/* bench_reduce.c: W4 (sum over 16M float32, sum(dim=1) and sum(dim=0) of
 * [4096, 4096]) and W6 (softmax and log_softmax over the last dim of
 * [4096, 1024]). Median of 20 runs after 3 warm-ups; prints
 *     name  bytes  median_seconds  GB/s
 * one line per workload (bytes = input + output). bench/bench_reduce.py runs
 * this binary next to torch and prints the ratios. Threads: CT_THREADS or 2. */
#define _POSIX_C_SOURCE 200809L
#include "ctorch.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { RUNS = 20, WARM = 3 };

static double bench(const char *name, ct_tensor *x, int kind, double bytes) {
    double t[RUNS];
    for (int r = -WARM; r < RUNS; r++) {
        ct_scope_begin();
        double t0 = now();
        ct_tensor *y = NULL;
        switch (kind) {
        case 0: y = ct_sum(x); break;
        case 1: y = ct_sum_dims(x, CT_DIMS(1), false); break;
        case 2: y = ct_sum_dims(x, CT_DIMS(0), false); break;
        case 3: y = ct_softmax(x, -1); break;
        default: y = ct_log_softmax(x, -1); break;
        }
        double t1 = now();
        if (!y) {
            fprintf(stderr, "%s failed: %s\n", name, ct_last_error());
            exit(1);
        }
        ct_scope_end();
        if (r >= 0) t[r] = t1 - t0;
    }
    qsort(t, RUNS, sizeof *t, cmp);
    double med = (t[RUNS / 2 - 1] + t[RUNS / 2]) / 2;
    printf("%-12s %12.0f %12.6e %8.2f\n", name, bytes, med, bytes / med / 1e9);
    return med;
}

int main(void) {
    const char *e = getenv("CT_THREADS");
    ct_set_num_threads(e ? atoi(e) : 2);
    ct_manual_seed(0);
    ct_tensor *v = ct_rand(CT_SHAPE(1 << 24), CT_FLOAT32);
    ct_tensor *m = ct_reshape(v, CT_SHAPE(4096, 4096));
    ct_tensor *s = ct_randn(CT_SHAPE(4096, 1024), CT_FLOAT32);
    double n16 = 4.0 * (1 << 24);
    bench("sum", v, 0, n16 + 4);
    bench("sum_dim1", m, 1, n16 + 4.0 * 4096);
    bench("sum_dim0", m, 2, n16 + 4.0 * 4096);
    bench("softmax", s, 3, 2 * 4.0 * 4096 * 1024);
    bench("log_softmax", s, 4, 2 * 4.0 * 4096 * 1024);
    ct_free(v);
    ct_free(m);
    ct_free(s);
    return 0;
}
