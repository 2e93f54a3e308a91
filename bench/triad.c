/* triad.c: the STREAM triad a[i] = b[i] + s * c[i] over float64 arrays of
 * MiB MiB each (default 64, the size of a [4096, 4096] float32 tensor), with
 * THREADS OpenMP threads (default 2), the reference bandwidth of the tables
 * of bench/bench_table.py. Counts 24 bytes per element, as STREAM does (the
 * read-for-ownership of a's lines is not counted). Prints the median GB/s of
 * RUNS runs, then the best:
 *     triad <median GB/s> <best GB/s>
 *     triad [MiB] [threads] [runs] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#define PARALLEL_FOR _Pragma("omp parallel for num_threads(nt) schedule(static)")
#else
#define PARALLEL_FOR /* a build without OpenMP: one thread */
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 64;
    int nt = argc > 2 ? atoi(argv[2]) : 2, runs = argc > 3 ? atoi(argv[3]) : 15;
    if (runs < 1 || runs > 1000 || nt < 1 || mib < 1) return 2;
    long n = (long)(mib << 20) / 8;
    double *a = aligned_alloc(64, (size_t)n * 8), *b = aligned_alloc(64, (size_t)n * 8),
           *c = aligned_alloc(64, (size_t)n * 8), *t = malloc(sizeof(double) * (size_t)runs);
    if (!a || !b || !c || !t) return 1;
    (void)nt;
PARALLEL_FOR
    for (long i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2; /* first touch by the threads that use them */
    volatile double s = 3;
    for (int r = -2; r < runs; r++) {
        double q = s, t0 = now();
PARALLEL_FOR
        for (long i = 0; i < n; i++) a[i] = b[i] + q * c[i];
        double dt = now() - t0;
        if (r >= 0) t[r] = dt;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp);
    double bytes = 24.0 * (double)n;
    printf("triad %.2f %.2f\n", bytes / t[runs / 2] / 1e9, bytes / t[0] / 1e9);
    if (a[n / 2] != 7) return 1; /* the result is used */
    free(a), free(b), free(c), free(t);
    return 0;
}
