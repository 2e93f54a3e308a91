/* threads.c: one OpenMP pool for ctorch (and for OpenBLAS's OpenMP build). */
#include "core.h"
#ifdef _OPENMP
#include <omp.h>
#endif

int c10_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int c10_free_threads(void) {
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

int ct_get_num_threads(void) { return c10_num_threads(); }

void ct_set_num_threads(int n) {
#ifdef _OPENMP
    if (n > 0) omp_set_num_threads(n);
#else
    (void)n;
#endif
}
