/* test_rng_print.c: the generator, 16-bit float conversions and repr.
 *
 * Every expected number and string below was printed by PyTorch 1.13 (CPU,
 * x86-64) with the seed and calls named next to it, and pasted here. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "harness.h"

#define N_OF(a) (int)(sizeof(a) / sizeof((a)[0]))

static bool floats_equal(const ct_tensor *t, const float *want, int n) {
    if (!t || ct_numel(t) != n || ct_dtype_of(t) != CT_FLOAT32) return false;
    const float *p = ct_data_ptr(t);
    for (int i = 0; i < n; i++)
        if (p[i] != want[i]) {
            fprintf(stderr, "  element %d: %.9g, torch %.9g\n", i, p[i], want[i]);
            return false;
        }
    return true;
}

static bool doubles_equal(const ct_tensor *t, const double *want, int n) {
    if (!t || ct_numel(t) != n || ct_dtype_of(t) != CT_FLOAT64) return false;
    const double *p = ct_data_ptr(t);
    for (int i = 0; i < n; i++)
        if (p[i] != want[i]) {
            fprintf(stderr, "  element %d: %.17g, torch %.17g\n", i, p[i], want[i]);
            return false;
        }
    return true;
}

static bool longs_equal(const ct_tensor *t, const int64_t *want, int n) {
    if (!t || ct_numel(t) != n || ct_dtype_of(t) != CT_INT64) return false;
    const int64_t *p = ct_data_ptr(t);
    for (int i = 0; i < n; i++)
        if (p[i] != want[i]) {
            fprintf(stderr, "  element %d: %lld, torch %lld\n", i, (long long)p[i], (long long)want[i]);
            return false;
        }
    return true;
}

static bool halves_equal(const ct_tensor *t, ct_dtype dt, const float *want, int n) {
    if (!t || ct_numel(t) != n || ct_dtype_of(t) != dt) return false;
    const uint16_t *p = ct_data_ptr(t);
    for (int i = 0; i < n; i++) {
        float v = dt == CT_FLOAT16 ? ct_half_to_float(p[i]) : ct_bfloat16_to_float(p[i]);
        if (v != want[i]) {
            fprintf(stderr, "  element %d: %.9g, torch %.9g\n", i, v, want[i]);
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------ 16-bit floats */
TEST(half_conversions_match_torch) {
    /* torch.tensor([...]).half().view(torch.int16) */
    const float in[] = {1.0f, 65504.f, 65520.f, 65519.99f, 1e-8f, 0x1p-24f, 0x1p-25f, 3 * 0x1p-26f,
                        1 + 0x1p-11f, 1 + 3 * 0x1p-11f, -2.0f, 0.1f, -0.0f, INFINITY, 6.1e-5f, 1e5f};
    const uint16_t want[] = {0x3c00, 0x7bff, 0x7c00, 0x7bff, 0x0, 0x1, 0x0, 0x1,
                             0x3c00, 0x3c02, 0xc000, 0x2e66, 0x8000, 0x7c00, 0x3ff, 0x7c00};
    for (int i = 0; i < N_OF(in); i++) CHECK_EQ_INT(ct_float_to_half(in[i]), want[i]);
    uint16_t nan_bits = ct_float_to_half(NAN);
    CHECK((nan_bits & 0x7c00) == 0x7c00 && (nan_bits & 0x3ff) != 0);
    CHECK(ct_half_to_float(0x0001) == 0x1p-24f);   /* smallest subnormal */
    CHECK(ct_half_to_float(0x03ff) == 1023 * 0x1p-24f);
    CHECK(ct_half_to_float(0xfc00) == -INFINITY);
    CHECK(isnan(ct_half_to_float(0x7e00)));
    /* every non-NaN half survives half -> float -> half */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            if (!isnan(ct_half_to_float((uint16_t)h))) bad++;
            continue;
        }
        if (ct_float_to_half(ct_half_to_float((uint16_t)h)) != h) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(bfloat16_conversions_match_torch) {
    /* torch.tensor([...]).bfloat16().view(torch.int16) */
    const float in[] = {1.0f, 1 + 0x1p-8f, 1 + 3 * 0x1p-8f, 3.4e38f, 0.1f, -0.0f, 1e-40f, INFINITY};
    const uint16_t want[] = {0x3f80, 0x3f80, 0x3f82, 0x7f80, 0x3dcd, 0x8000, 0x1, 0x7f80};
    for (int i = 0; i < N_OF(in); i++) CHECK_EQ_INT(ct_float_to_bfloat16(in[i]), want[i]);
    CHECK(isnan(ct_bfloat16_to_float(ct_float_to_bfloat16(NAN))));
    CHECK(ct_bfloat16_to_float(0x3f80) == 1.0f);
    CHECK(ct_bfloat16_to_float(0xc040) == -3.0f);
}

/* --------------------------------------------------------------------- RNG */
TEST(rand_matches_torch) {
    /* torch.manual_seed(0); torch.rand(5) */
    const float f[] = {0.49625658988952637f, 0.7682217955589294f, 0.08847743272781372f,
                       0.13203048706054688f, 0.30742281675338745f};
    ct_manual_seed(0);
    CHECK(floats_equal(ct_rand(CT_SHAPE(5), CT_FLOAT32), f, N_OF(f)));
    /* torch.manual_seed(42); torch.rand(3, dtype=torch.float64) */
    const double d[] = {0.05815448596142969, 0.06291016742457756, 0.12358607277440903};
    ct_manual_seed(42);
    CHECK(doubles_equal(ct_rand(CT_SHAPE(3), CT_FLOAT64), d, N_OF(d)));
    /* torch.manual_seed(2**40 + 5); torch.rand(2): only the low 32 bits seed mt19937 */
    const float big[] = {0.8302518725395203f, 0.12611091136932373f};
    ct_manual_seed((UINT64_C(1) << 40) + 5);
    CHECK(floats_equal(ct_rand(CT_SHAPE(2), CT_FLOAT32), big, N_OF(big)));
    /* the same seed gives the same numbers again */
    ct_manual_seed(0);
    CHECK(floats_equal(ct_rand(CT_SHAPE(5), CT_FLOAT32), f, N_OF(f)));
}

TEST(rand_16bit_matches_torch) {
    /* torch.manual_seed(0); torch.rand(4, dtype=torch.float16) */
    const float h[] = {0.333984375f, 0.27294921875f, 0.80712890625f, 0.59375f};
    ct_manual_seed(0);
    CHECK(halves_equal(ct_rand(CT_SHAPE(4), CT_FLOAT16), CT_FLOAT16, h, N_OF(h)));
    /* torch.manual_seed(0); torch.rand(4, dtype=torch.bfloat16) */
    const float b[] = {0.671875f, 0.18359375f, 0.45703125f, 0.75f};
    ct_manual_seed(0);
    CHECK(halves_equal(ct_rand(CT_SHAPE(4), CT_BFLOAT16), CT_BFLOAT16, b, N_OF(b)));
}

TEST(randn_small_uses_cached_box_muller_value) {
    /* torch.manual_seed(0); a = torch.randn(3); b = torch.randn(3): b starts
     * with the sine half of a's last pair */
    const float a[] = {1.5409960746765137f, -0.293428897857666f, -2.1787893772125244f};
    const float b[] = {0.5684312582015991f, -1.0845223665237427f, -1.3985954523086548f};
    ct_manual_seed(0);
    CHECK(floats_equal(ct_randn(CT_SHAPE(3), CT_FLOAT32), a, 3));
    CHECK(floats_equal(ct_randn(CT_SHAPE(3), CT_FLOAT32), b, 3));
    /* manual_seed drops the cached value */
    ct_manual_seed(0);
    CHECK(floats_equal(ct_randn(CT_SHAPE(3), CT_FLOAT32), a, 3));
}

TEST(randn_blocks_of_16_match_torch) {
    /* torch.manual_seed(0); torch.randn(17): normal_fill with the tail recomputed */
    const float f[] = {-1.1258398294448853f, -1.6959311962127686f, 0.5666506290435791f,
                       0.7935083508491516f,  0.5988394618034363f,  -1.5550950765609741f,
                       -0.3413603901863098f, 1.85300612449646f,    0.46809640526771545f,
                       -0.5854975581169128f, -0.1733967512845993f, 0.18347793817520142f,
                       1.3893661499023438f,  1.586334228515625f,   0.946298360824585f,
                       -0.843676745891571f,  0.9318265914916992f};
    ct_manual_seed(0);
    CHECK(floats_equal(ct_randn(CT_SHAPE(17), CT_FLOAT32), f, N_OF(f)));
    /* torch.manual_seed(7); torch.randn(20, dtype=torch.float64) */
    const double d[] = {0.06626753966449943, 0.04699155524392409, 1.8365386300294015,
                        1.367690398536778,   1.457454937932726,   1.932214860010293,
                        -1.4418139927522924, 0.7277603478716976,  -1.3131496578292892,
                        -0.3280001761367003, -1.3521685881505834, 1.7951074839458658,
                        1.7421050311620636,  -0.523961020712386,  -0.28387899021947915,
                        0.45257550210102954, -1.6677291342328766, -1.5870322969308357,
                        2.03026332869622,    0.6596523264462502};
    ct_manual_seed(7);
    CHECK(doubles_equal(ct_randn(CT_SHAPE(4, 5), CT_FLOAT64), d, N_OF(d)));
    /* torch.manual_seed(5); torch.randn(16, dtype=torch.float16) */
    const float h[] = {-1.048828125f,  -0.296142578125f, 2.017578125f,   1.8828125f,
                       0.352783203125f, -0.429931640625f, -0.71728515625f, 0.1607666015625f,
                       -0.0256195068359375f, 0.3525390625f, -2.349609375f, -0.384033203125f,
                       1.1015625f, 1.203125f, 1.365234375f, -0.21630859375f};
    ct_manual_seed(5);
    CHECK(halves_equal(ct_randn(CT_SHAPE(16), CT_FLOAT16), CT_FLOAT16, h, N_OF(h)));
}

TEST(randint_matches_torch) {
    /* torch.manual_seed(0); torch.randint(0, 10, (10,)) */
    const int64_t a[] = {4, 9, 3, 0, 3, 9, 7, 3, 7, 3};
    ct_manual_seed(0);
    CHECK(longs_equal(ct_randint(0, 10, CT_SHAPE(10), CT_INT64), a, N_OF(a)));
    /* torch.manual_seed(0); torch.randint(-2**40, 2**40, (3,)): 64-bit draws */
    const int64_t b[] = {-358231004625, -593374360384, 291447657211};
    ct_manual_seed(0);
    CHECK(longs_equal(ct_randint(-(INT64_C(1) << 40), INT64_C(1) << 40, CT_SHAPE(3), CT_INT64), b,
                      N_OF(b)));
    /* torch.manual_seed(0); torch.randint(-5, 5, (6,), dtype=torch.int32) */
    const int32_t c[] = {-1, 4, -2, -5, -2, 4};
    ct_manual_seed(0);
    ct_tensor *t = ct_randint(-5, 5, CT_SHAPE(6), CT_INT32);
    CHECK(t && ct_dtype_of(t) == CT_INT32 && ct_numel(t) == 6);
    if (t) CHECK(memcmp(ct_data_ptr(t), c, sizeof c) == 0);
}

TEST(randperm_matches_torch) {
    /* torch.manual_seed(0); torch.randperm(10) */
    const int64_t a[] = {4, 1, 7, 5, 3, 9, 0, 8, 6, 2};
    ct_manual_seed(0);
    CHECK(longs_equal(ct_randperm(10, CT_INT64), a, N_OF(a)));
    /* torch.manual_seed(3); torch.randperm(20) */
    const int64_t b[] = {6, 12, 3, 7, 1, 5, 8, 9, 2, 17, 14, 11, 13, 19, 10, 4, 15, 0, 18, 16};
    ct_manual_seed(3);
    CHECK(longs_equal(ct_randperm(20, CT_INT64), b, N_OF(b)));
    /* a permutation of 0..n-1 */
    ct_tensor *p = ct_randperm(1000, CT_INT64);
    CHECK(p != NULL);
    if (p) {
        const int64_t *v = ct_data_ptr(p);
        static bool seen[1000];
        memset(seen, 0, sizeof seen);
        int dup = 0;
        for (int i = 0; i < 1000; i++) {
            if (v[i] < 0 || v[i] >= 1000 || seen[v[i]]) dup++;
            else seen[v[i]] = true;
        }
        CHECK_EQ_INT(dup, 0);
    }
}

TEST(inplace_uniform_normal_bernoulli_match_torch) {
    int64_t n5[] = {5}, n20[] = {20}, n10[] = {10};
    /* torch.manual_seed(1); torch.empty(5).uniform_(-2, 3) */
    const float u[] = {1.7881579399108887f, -0.6034455895423889f, 0.015346288681030273f,
                       1.6734223365783691f, -1.8535921573638916f};
    ct_manual_seed(1);
    ct_tensor *t = ct_empty(n5, 1, CT_FLOAT32);
    CHECK_EQ_INT(ct_uniform_(t, -2, 3), 0);
    CHECK(floats_equal(t, u, N_OF(u)));
    /* torch.manual_seed(1); torch.empty(20).normal_(1.5, 0.5) */
    const float g[] = {0.7372020483016968f, 1.1248841285705566f, 1.1730095148086548f,
                       0.6952576041221619f, 1.932846188545227f,  1.622201919555664f,
                       1.1685442924499512f, 1.9036540985107422f, 1.7195707559585571f,
                       2.0856003761291504f, 2.383713722229004f,  1.4523190259933472f,
                       1.5305776596069336f, 1.1911277770996094f, 1.1009650230407715f,
                       1.4341883659362793f, 1.1007801294326782f, 1.66786527633667f,
                       1.6376667022705078f, 2.358151435852051f};
    ct_manual_seed(1);
    t = ct_empty(n20, 1, CT_FLOAT32);
    CHECK_EQ_INT(ct_normal_(t, 1.5, 0.5), 0);
    CHECK(floats_equal(t, g, N_OF(g)));
    /* torch.manual_seed(0); torch.empty(10).bernoulli_(0.5) */
    const float b[] = {0, 0, 1, 0, 0, 0, 1, 1, 0, 1};
    ct_manual_seed(0);
    t = ct_empty(n10, 1, CT_FLOAT32);
    CHECK_EQ_INT(ct_bernoulli_(t, 0.5), 0);
    CHECK(floats_equal(t, b, N_OF(b)));
}

TEST(fills_skip_meta_tensors) {
    int64_t shape[] = {4, 4};
    TensorImpl *m = c10_empty(shape, 2, CT_FLOAT32, CT_META);
    CHECK(m != NULL);
    if (!m) return;
    ct_manual_seed(0);
    c10_uniform_fill(m, 0, 1);
    c10_normal_fill(m, 0, 1, false);
    c10_bernoulli_fill(m, 0.5);
    c10_release(m);
    /* nothing was drawn: the stream is where the seed left it */
    const float f[] = {0.49625658988952637f, 0.7682217955589294f}; /* torch.rand(2) after seed 0 */
    CHECK(floats_equal(ct_rand(CT_SHAPE(2), CT_FLOAT32), f, 2));
}

/* -------------------------------------------------------------------- repr */
static char g_repr[1 << 16];

static const char *repr_of(const ct_tensor *t) {
    int n = ct_repr(t, g_repr, sizeof g_repr);
    return n < 0 ? NULL : g_repr;
}

static ct_tensor *floats(const float *v, const int64_t *shape, int ndim) {
    return ct_from_data(v, shape, ndim, CT_FLOAT32);
}

TEST(repr_float_modes) {
    float grid[12];
    for (int i = 0; i < 12; i++) grid[i] = (float)i;
    grid[6] = 7.5f;
    /* t = torch.arange(12.).view(3, 4); t[1, 2] = 7.5; repr(t) */
    CHECK_STR(repr_of(floats(grid, CT_SHAPE(3, 4))),
              "tensor([[ 0.0000,  1.0000,  2.0000,  3.0000],\n"
              "        [ 4.0000,  5.0000,  7.5000,  7.0000],\n"
              "        [ 8.0000,  9.0000, 10.0000, 11.0000]])");
    const float sci[] = {1e-5f, 1.f, 1e5f};
    CHECK_STR(repr_of(floats(sci, CT_SHAPE(3))), "tensor([1.0000e-05, 1.0000e+00, 1.0000e+05])");
    const float fx[] = {0.1f, 100.25f}; /* max/min > 1000 switches to sci */
    CHECK_STR(repr_of(floats(fx, CT_SHAPE(2))), "tensor([1.0000e-01, 1.0025e+02])");
    const float is[] = {1e10f, 1.f};
    CHECK_STR(repr_of(floats(is, CT_SHAPE(2))), "tensor([1.0000e+10, 1.0000e+00])");
    float cube[24];
    for (int i = 0; i < 24; i++) cube[i] = (float)(i - 5);
    /* repr(torch.arange(24.).view(2, 3, 4) - 5) */
    CHECK_STR(repr_of(floats(cube, CT_SHAPE(2, 3, 4))),
              "tensor([[[-5., -4., -3., -2.],\n"
              "         [-1.,  0.,  1.,  2.],\n"
              "         [ 3.,  4.,  5.,  6.]],\n"
              "\n"
              "        [[ 7.,  8.,  9., 10.],\n"
              "         [11., 12., 13., 14.],\n"
              "         [15., 16., 17., 18.]]])");
}

TEST(repr_wraps_long_rows) {
    float lin[21];
    for (int i = 0; i < 21; i++) lin[i] = (float)i / 20.0f;
    /* repr(torch.arange(21.) / 20) */
    CHECK_STR(repr_of(floats(lin, CT_SHAPE(21))),
              "tensor([0.0000, 0.0500, 0.1000, 0.1500, 0.2000, 0.2500, 0.3000, 0.3500, 0.4000,\n"
              "        0.4500, 0.5000, 0.5500, 0.6000, 0.6500, 0.7000, 0.7500, 0.8000, 0.8500,\n"
              "        0.9000, 0.9500, 1.0000])");
    float row[40];
    for (int i = 0; i < 40; i++) row[i] = (float)(i - 20) * 1.25f;
    /* repr((torch.arange(40.) - 20) * 1.25) */
    CHECK_STR(repr_of(floats(row, CT_SHAPE(40))),
              "tensor([-25.0000, -23.7500, -22.5000, -21.2500, -20.0000, -18.7500, -17.5000,\n"
              "        -16.2500, -15.0000, -13.7500, -12.5000, -11.2500, -10.0000,  -8.7500,\n"
              "         -7.5000,  -6.2500,  -5.0000,  -3.7500,  -2.5000,  -1.2500,   0.0000,\n"
              "          1.2500,   2.5000,   3.7500,   5.0000,   6.2500,   7.5000,   8.7500,\n"
              "         10.0000,  11.2500,  12.5000,  13.7500,  15.0000,  16.2500,  17.5000,\n"
              "         18.7500,  20.0000,  21.2500,  22.5000,  23.7500])");
}

TEST(repr_summarizes_large_tensors) {
    static float big[2000];
    for (int i = 0; i < 2000; i++) big[i] = (float)i;
    /* repr(torch.arange(2000.)) */
    CHECK_STR(repr_of(floats(big, CT_SHAPE(2000))),
              "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
              "        1.9990e+03])");
    static int64_t tall[3000];
    for (int i = 0; i < 3000; i++) tall[i] = i;
    /* repr(torch.arange(3000).view(1000, 3)) */
    CHECK_STR(repr_of(ct_from_data(tall, CT_SHAPE(1000, 3), CT_INT64)),
              "tensor([[   0,    1,    2],\n"
              "        [   3,    4,    5],\n"
              "        [   6,    7,    8],\n"
              "        ...,\n"
              "        [2991, 2992, 2993],\n"
              "        [2994, 2995, 2996],\n"
              "        [2997, 2998, 2999]])");
}

TEST(repr_scalars_and_empty) {
    CHECK_STR(repr_of(ct_scalar(2.0)), "tensor(2.)");
    CHECK_STR(repr_of(ct_scalar(-0.25)), "tensor(-0.2500)");
    CHECK_STR(repr_of(ct_scalar_dtype(7, CT_INT16)), "tensor(7, dtype=torch.int16)");
    CHECK_STR(repr_of(ct_empty(CT_SHAPE(0), CT_FLOAT32)), "tensor([])");
    CHECK_STR(repr_of(ct_empty(CT_SHAPE(0, 3), CT_FLOAT32)), "tensor([], size=(0, 3))");
    CHECK_STR(repr_of(ct_empty(CT_SHAPE(0), CT_INT64)), "tensor([], dtype=torch.int64)");
}

TEST(repr_integers_bools_and_dtypes) {
    const int64_t l[] = {1, 2, 3};
    CHECK_STR(repr_of(ct_from_data(l, CT_SHAPE(3), CT_INT64)), "tensor([1, 2, 3])");
    const int32_t i[] = {-1, 200, 3};
    CHECK_STR(repr_of(ct_from_data(i, CT_SHAPE(3), CT_INT32)), "tensor([ -1, 200,   3], dtype=torch.int32)");
    const uint8_t u[] = {0, 255, 7};
    CHECK_STR(repr_of(ct_from_data(u, CT_SHAPE(3), CT_UINT8)), "tensor([  0, 255,   7], dtype=torch.uint8)");
    const bool b[] = {true, false};
    CHECK_STR(repr_of(ct_from_data(b, CT_SHAPE(2), CT_BOOL)), "tensor([ True, False])");
    const double d[] = {1, 2};
    CHECK_STR(repr_of(ct_from_data(d, CT_SHAPE(2), CT_FLOAT64)), "tensor([1., 2.], dtype=torch.float64)");
    const uint16_t h[] = {ct_float_to_half(1.5f), ct_float_to_half(2.5f)};
    CHECK_STR(repr_of(ct_from_data(h, CT_SHAPE(2), CT_FLOAT16)),
              "tensor([1.5000, 2.5000], dtype=torch.float16)");
    const uint16_t bf[] = {ct_float_to_bfloat16(0.1f), ct_float_to_bfloat16(3.0f)};
    CHECK_STR(repr_of(ct_from_data(bf, CT_SHAPE(2), CT_BFLOAT16)),
              "tensor([0.1001, 3.0000], dtype=torch.bfloat16)");
}

TEST(repr_nan_inf_negative_zero) {
    const float a[] = {NAN, INFINITY, -INFINITY, 1.5f};
    CHECK_STR(repr_of(floats(a, CT_SHAPE(4))), "tensor([   nan,    inf,   -inf, 1.5000])");
    const float b[] = {NAN, -INFINITY, 2.f};
    CHECK_STR(repr_of(floats(b, CT_SHAPE(3))), "tensor([nan, -inf, 2.])");
    const float c[] = {-0.f, 0.f, 1.f};
    CHECK_STR(repr_of(floats(c, CT_SHAPE(3))), "tensor([-0., 0., 1.])");
}

TEST(repr_meta_and_views) {
    CHECK_STR(repr_of(ct_empty_on(CT_SHAPE(2, 3), CT_FLOAT32, CT_META)),
              "tensor(..., device='meta', size=(2, 3))");
    CHECK_STR(repr_of(ct_empty_on(CT_SHAPE(5), CT_INT64, CT_META)),
              "tensor(..., device='meta', size=(5,), dtype=torch.int64)");
    /* repr(torch.arange(6).view(2, 3).t()): a non-contiguous view */
    const int64_t v[] = {0, 1, 2, 3, 4, 5};
    TensorImpl *base = c10_unwrap(ct_from_data(v, CT_SHAPE(2, 3), CT_INT64));
    CHECK(base != NULL);
    if (!base) return;
    TensorImpl *tr = c10_transpose(base, 0, 1);
    CHECK(tr != NULL && !tr->is_contiguous);
    if (!tr) return;
    char buf[256];
    CHECK(c10_repr(tr, buf, sizeof buf, NULL) > 0);
    CHECK_STR(buf, "tensor([[0, 3],\n"
                   "        [1, 4],\n"
                   "        [2, 5]])");
    c10_release(tr);
}

static const char *grad_suffix(const TensorImpl *t, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", t->dtype == CT_FLOAT64 ? ", grad_fn=<MulBackward0>" : ", requires_grad=True");
    return buf;
}

TEST(repr_suffixes_wrap_like_torch) {
    const char *(*saved)(const TensorImpl *, char *, size_t) = c10_repr_suffix;
    c10_repr_suffix = grad_suffix;
    const float a[] = {1.5f, -2.f};
    /* repr(torch.tensor([1.5, -2.0], requires_grad=True)) */
    CHECK_STR(repr_of(floats(a, CT_SHAPE(2))), "tensor([ 1.5000, -2.0000], requires_grad=True)");
    double d[8];
    for (int i = 0; i < 8; i++) d[i] = (i - 3.5) * 1.5;
    /* x = ((torch.arange(8.).double() - 3.5) * 1.5).requires_grad_(); repr(x * 1) */
    CHECK_STR(repr_of(ct_from_data(d, CT_SHAPE(8), CT_FLOAT64)),
              "tensor([-5.2500, -3.7500, -2.2500, -0.7500,  0.7500,  2.2500,  3.7500,  5.2500],\n"
              "       dtype=torch.float64, grad_fn=<MulBackward0>)");
    c10_repr_suffix = saved;
    /* a tensor that does not require grad gets no suffix */
    CHECK_STR(repr_of(floats(a, CT_SHAPE(2))), "tensor([ 1.5000, -2.0000])");
}

TEST(repr_truncates_like_snprintf) {
    const float a[] = {1.5f, -2.f};
    ct_tensor *t = floats(a, CT_SHAPE(2));
    char small[10];
    memset(small, 'x', sizeof small);
    int n = ct_repr(t, small, sizeof small);
    CHECK_EQ_INT(n, (int)strlen("tensor([ 1.5000, -2.0000])"));
    CHECK_STR(small, "tensor([ ");
    CHECK_EQ_INT(ct_repr(t, NULL, 0), n);
    CHECK_ERR_INT(ct_repr(NULL, small, sizeof small), "NULL");
    CHECK_EQ_INT(ct_print(t), 0);
}

int main(void) {
    RUN(half_conversions_match_torch);
    RUN(bfloat16_conversions_match_torch);
    RUN(rand_matches_torch);
    RUN(rand_16bit_matches_torch);
    RUN(randn_small_uses_cached_box_muller_value);
    RUN(randn_blocks_of_16_match_torch);
    RUN(randint_matches_torch);
    RUN(randperm_matches_torch);
    RUN(inplace_uniform_normal_bernoulli_match_torch);
    RUN(fills_skip_meta_tensors);
    RUN(repr_float_modes);
    RUN(repr_wraps_long_rows);
    RUN(repr_summarizes_large_tensors);
    RUN(repr_scalars_and_empty);
    RUN(repr_integers_bools_and_dtypes);
    RUN(repr_nan_inf_negative_zero);
    RUN(repr_meta_and_views);
    RUN(repr_suffixes_wrap_like_torch);
    RUN(repr_truncates_like_snprintf);
    return REPORT();
}
