/*
 * bench_train: training-step workloads of issue 5, timed step by step.
 *
 *   bench_train w9   [threads] [steps]   MLP 784-512-512-10, ReLU, batch 128, cross-entropy, SGD step
 *   bench_train w10  [threads] [steps]   CNN conv(1->32,3,p1) ReLU pool2 conv(32->64,3,p1) ReLU pool2
 *                                        linear(64*7*7->10) on batch 64 of 1x28x28, full SGD step
 *   bench_train flat [threads] [steps]   the W9 step for `steps` (default 10000) steps: RSS at
 *                                        step 1,000 and at the end (flat memory check)
 *
 * Prints one line: `workload threads median_ms min_ms peak_rss_kib [rss_1000_kib rss_end_kib]`
 * (peak RSS is the process's, W11 for the w9 run). bench/bench_train.py runs
 * it next to PyTorch and prints the table.
 */
#include <ctorch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long rss_kib(void) { /* current resident set, from /proc/self/statm */
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * 4;
}

static long peak_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what) {
    fprintf(stderr, "bench_train: %s: %s\n", what, ct_last_error() ? ct_last_error() : "failed");
    exit(1);
}

int main(int argc, char **argv) {
    const char *w = argc > 1 ? argv[1] : "w9";
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    bool flat = !strcmp(w, "flat"), cnn = !strcmp(w, "w10");
    int steps = argc > 3 ? atoi(argv[3]) : flat ? 10000 : cnn ? 30 : 100;
    ct_set_num_threads(threads);
    ct_manual_seed(0);
    ct_module *model;
    ct_tensor *x, *y;
    if (cnn) {
        ct_module *l[] = {ct_nn_conv2d(1, 32, 3, 1, 1, 1, 1, true), ct_nn_relu(), ct_nn_max_pool2d(2, 2, 0),
                          ct_nn_conv2d(32, 64, 3, 1, 1, 1, 1, true), ct_nn_relu(), ct_nn_max_pool2d(2, 2, 0),
                          ct_nn_flatten(1, -1), ct_nn_linear(64 * 7 * 7, 10, true)};
        model = ct_nn_sequential(l, 8);
        x = ct_randn(CT_SHAPE(64, 1, 28, 28), CT_FLOAT32);
        y = ct_randint(0, 10, CT_SHAPE(64), CT_INT64);
    } else {
        ct_module *l[] = {ct_nn_linear(784, 512, true), ct_nn_relu(), ct_nn_linear(512, 512, true), ct_nn_relu(),
                          ct_nn_linear(512, 10, true)};
        model = ct_nn_sequential(l, 5);
        x = ct_randn(CT_SHAPE(128, 784), CT_FLOAT32);
        y = ct_randint(0, 10, CT_SHAPE(128), CT_INT64);
    }
    ct_module *loss_fn = ct_nn_cross_entropy_loss(CT_REDUCTION_MEAN);
    ct_tensor *params[8];
    int np = ct_module_named_parameters(model, NULL, params, 8);
    ct_optimizer *opt = ct_optim_sgd(params, np, 0.01, 0, 0, 0, false);
    if (!model || !x || !y || !loss_fn || !opt) die("setup");
    int warmup = flat ? 0 : 5;
    double *t = malloc(sizeof *t * (size_t)(steps + warmup));
    long rss1000 = 0;
    for (int s = 0; s < steps + warmup; s++) {
        double t0 = now();
        ct_scope_begin();
        ct_tensor *loss = ct_module_forward2(loss_fn, ct_module_forward(model, x), y);
        if (!loss || ct_optimizer_zero_grad(opt, true) < 0 || ct_backward(loss, NULL) < 0 ||
            ct_optimizer_step(opt) < 0)
            die("step");
        ct_scope_end();
        t[s] = now() - t0;
        if (flat && s + 1 == 1000) rss1000 = rss_kib();
    }
    qsort(t + warmup, (size_t)steps, sizeof *t, cmp);
    printf("%s %d %.3f %.3f %ld", w, threads, 1e3 * t[warmup + steps / 2], 1e3 * t[warmup], peak_rss_kib());
    if (flat) printf(" %ld %ld", rss1000, rss_kib());
    printf("\n");
    free(t);
    ct_optimizer_free(opt);
    ct_module_free(model);
    ct_module_free(loss_fn);
    ct_free(x);
    ct_free(y);
    return 0;
}
