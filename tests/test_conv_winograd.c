/* test_conv_winograd.c: the Winograd F(4x4, 3x3) path of conv2d (3x3, stride 1,
 * one group, 8 or more channels each way) and of its input gradient, against a
 * direct convolution in double written here: plane sizes whose tiles the edges
 * cut, blocks of 64 tiles across samples and tile rows, paddings 0-2, channel
 * counts off the kernel's blocks, float32 and float64, 1-3 threads. It is also
 * what runs the path under the sanitizers (the parity tests do not). */
#include <stdlib.h>
#include "harness.h"

/* y[n, o] = sum_c x[n, c] (*) w[o, c] + b[o], zero padding p */
static void direct(const double *x, const double *w, const double *b, double *y, int N, int C, int O, int H, int W,
                   int p) {
    int Ho = H + 2 * p - 2, Wo = W + 2 * p - 2;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int i = 0; i < Ho; i++)
                for (int j = 0; j < Wo; j++) {
                    double s = b ? b[o] : 0;
                    for (int c = 0; c < C; c++)
                        for (int ki = 0; ki < 3; ki++)
                            for (int kj = 0; kj < 3; kj++) {
                                int ih = i + ki - p, iw = j + kj - p;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    s += x[((n * C + c) * H + ih) * W + iw] * w[((o * C + c) * 3 + ki) * 3 + kj];
                            }
                    y[((n * O + o) * Ho + i) * Wo + j] = s;
                }
}

/* gx[n, c] = sum_o the scatter of g[n, o] through w[o, c] (the input gradient) */
static void direct_grad(const double *g, const double *w, double *gx, int N, int C, int O, int H, int W, int p) {
    int Ho = H + 2 * p - 2, Wo = W + 2 * p - 2;
    memset(gx, 0, sizeof(double) * (size_t)(N * C * H * W));
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int i = 0; i < Ho; i++)
                for (int j = 0; j < Wo; j++)
                    for (int c = 0; c < C; c++)
                        for (int ki = 0; ki < 3; ki++)
                            for (int kj = 0; kj < 3; kj++) {
                                int ih = i + ki - p, iw = j + kj - p;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    gx[((n * C + c) * H + ih) * W + iw] +=
                                        g[((n * O + o) * Ho + i) * Wo + j] * w[((o * C + c) * 3 + ki) * 3 + kj];
                            }
}

static double *randoms(int64_t n, unsigned *seed) {
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t k = 0; k < n; k++) v[k] = (double)rand_r(seed) / RAND_MAX * 2 - 1;
    return v;
}

/* a tensor of dtype dt holding v, and v rounded to what it holds */
static ct_tensor *tensor(double *v, const int64_t *shape, int nd, ct_dtype dt) {
    ct_tensor *t = ct_from_data(v, shape, nd, CT_FLOAT64);
    if (dt == CT_FLOAT64) return t;
    int64_t n = ct_numel(t);
    for (int64_t k = 0; k < n; k++) v[k] = (float)v[k];
    return ct_to_dtype(t, dt);
}

/* the largest |got - want| over the largest |want| */
static double rel_err(const ct_tensor *got, const double *want, int64_t n) {
    double *g = malloc(sizeof(double) * (size_t)n), e = 0, m = 0;
    if (ct_copy_to_buffer(got, g, CT_FLOAT64)) e = INFINITY;
    for (int64_t k = 0; k < n && e != INFINITY; k++) {
        e = fmax(e, fabs(g[k] - want[k]));
        m = fmax(m, fabs(want[k]));
    }
    free(g);
    return m > 0 ? e / m : e;
}

static void check_case(int N, int C, int O, int H, int W, int p, ct_dtype dt, unsigned seed) {
    int Ho = H + 2 * p - 2, Wo = W + 2 * p - 2;
    int64_t nx = (int64_t)N * C * H * W, ny = (int64_t)N * O * Ho * Wo;
    double *x = randoms(nx, &seed), *w = randoms((int64_t)O * C * 9, &seed), *b = randoms(O, &seed);
    double *g = randoms(ny, &seed), *y = malloc(sizeof(double) * (size_t)ny), *gx = malloc(sizeof(double) * (size_t)nx);
    ct_tensor *tx = tensor(x, (int64_t[]){N, C, H, W}, 4, dt), *tw = tensor(w, (int64_t[]){O, C, 3, 3}, 4, dt);
    ct_tensor *tb = tensor(b, (int64_t[]){O}, 1, dt), *tg = tensor(g, (int64_t[]){N, O, Ho, Wo}, 4, dt);
    direct(x, w, b, y, N, C, O, H, W, p);
    direct_grad(g, w, gx, N, C, O, H, W, p);
    double tol = dt == CT_FLOAT32 ? 1e-5 : 1e-12;
    CHECK(ct_set_requires_grad(tx, true) == 0);
    ct_tensor *ty = ct_conv2d(tx, tw, tb, NULL, (int64_t[]){p, p}, NULL, 1);
    double e = rel_err(ty, y, ny), eg = INFINITY;
    if (ty && ct_backward(ty, tg) == 0) eg = rel_err(ct_grad(tx), gx, nx);
    if (!(e < tol) || !(eg < tol))
        FAIL_AT("N %d C %d O %d %dx%d p %d %s: error %.3g, input gradient %.3g", N, C, O, H, W, p,
                dt == CT_FLOAT32 ? "f32" : "f64", e, eg);
    free(x), free(w), free(b), free(g), free(y), free(gx);
}

TEST(winograd_values) {
    static const int cases[][6] = {
        /* N, C, O, H, W, padding */
        {1, 8, 8, 1, 1, 1},   {2, 9, 8, 2, 2, 1},   {1, 8, 9, 5, 7, 0},  {3, 17, 13, 5, 7, 2}, {2, 8, 64, 28, 28, 1},
        {5, 16, 8, 29, 31, 1}, {4, 70, 8, 6, 6, 1}, {9, 8, 25, 7, 9, 2}, {1, 8, 8, 3, 3, 0},   {2, 12, 10, 14, 14, 1},
    };
    int before = ct_get_num_threads();
    for (int t = 1; t <= 3; t++) {
        ct_set_num_threads(t);
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            const int *c = cases[k];
            for (int d = 0; d < 2; d++)
                check_case(c[0], c[1], c[2], c[3], c[4], c[5], d ? CT_FLOAT64 : CT_FLOAT32, (unsigned)(k * 7 + t));
        }
    }
    ct_set_num_threads(before);
}

/* An inf in the input: the direct sums' infs (and NaNs where +inf meets -inf), not a tile of NaNs. */
TEST(winograd_non_finite) {
    int N = 2, C = 8, O = 8, H = 9, W = 9;
    unsigned seed = 5;
    double *x = randoms(N * C * H * W, &seed), *w = randoms(O * C * 9, &seed), *y = malloc(sizeof(double) * 1296);
    x[40] = INFINITY;
    direct(x, w, NULL, y, N, C, O, H, W, 1);
    ct_tensor *t = ct_conv2d(tensor(x, (int64_t[]){N, C, H, W}, 4, CT_FLOAT32),
                             tensor(w, (int64_t[]){O, C, 3, 3}, 4, CT_FLOAT32), NULL, NULL, (int64_t[]){1, 1}, NULL, 1);
    float got[1296];
    CHECK(t && ct_copy_to_buffer(t, got, CT_FLOAT32) == 0);
    int same = 1;
    for (int k = 0; k < N * O * H * W; k++) same &= !isinf(got[k]) == !isinf(y[k]) && !isnan(got[k]) == !isnan(y[k]);
    CHECK(same);
    free(x), free(w), free(y);
}

int main(void) {
    RUN(winograd_values);
    RUN(winograd_non_finite);
    return REPORT();
}
