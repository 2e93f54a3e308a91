/* test_robustness.c: adversarial arguments (found by a fuzz of the C API under
 * ASan + UBSan): int64 extremes, NULL arrays, bytes that are no bool, a tensor
 * as its own gradient or its own operand. Each call fails with a message or gives
 * the right answer, without undefined behaviour (the sanitizer build runs this),
 * and every test ends with no tensor memory in use (no cycles, no leaks). */
#include "harness.h"
#include <stdint.h>
#include <stdlib.h>

#define BIG (INT64_C(1) << 62)

static bool holds_no_memory(size_t before) { return ct_memory_stats_get().in_use == before; }

static bool same(const ct_tensor *a, const ct_tensor *b) {
    ct_tensor *e = ct_all(ct_eq(a, b));
    return e && ct_item(e) == 1 && ct_ndim(a) == ct_ndim(b);
}

TEST(containers_of_null_arrays) {
    CHECK_ERR(ct_nn_sequential(NULL, 3), "Sequential");
    CHECK_ERR(ct_nn_module_list(NULL, 2), "ModuleList");
    CHECK_ERR(ct_nn_sequential(NULL, -1), "Sequential");
    ct_module *m = ct_nn_sequential(NULL, 0);
    CHECK(m && ct_module_num_children(m) == 0);
    ct_module_free(m);
}

TEST(int64_extremes_in_views_and_shapes) {
    size_t before = ct_memory_stats_get().in_use;
    ct_scope_begin();
    ct_tensor *f = ct_arange(0, 4, 1, CT_FLOAT32), *m = ct_view(ct_arange(0, 9, 1, CT_FLOAT32), CT_SHAPE(3, 3));
    ct_tensor *out[8];
    CHECK_EQ_INT(ct_split(f, INT64_MAX - 1, 0, out, 8), 1); /* one piece: the whole dim */
    CHECK(same(out[0], f));
    CHECK_ERR_INT(ct_split_with_sizes(f, (const int64_t[]){INT64_MAX - 1, 2}, 2, 0, out), "split_with_sizes");
    CHECK_ERR(ct_repeat(f, CT_SHAPE(BIG)), "overflow");
    CHECK_ERR(ct_tile(f, CT_SHAPE(BIG, 4)), "overflow");
    CHECK_ERR(ct_as_strided(f, (const int64_t[]){2}, (const int64_t[]){BIG}, 1, 0), "as_strided");
    CHECK_ERR(ct_as_strided(f, (const int64_t[]){INT64_MAX, 2}, (const int64_t[]){0, 0}, 2, 0), "overflow");
    CHECK_ERR(ct_as_strided(f, (const int64_t[]){0}, (const int64_t[]){1}, 1, INT64_MAX), "storage offset");
    ct_tensor *s0 = ct_as_strided(f, NULL, NULL, 0, 2); /* a 0-dim view: no arrays needed */
    CHECK(s0 && ct_item(s0) == 2);
    /* diagonals past the matrix keep all or nothing */
    CHECK(same(ct_tril(m, INT64_MAX), m) && same(ct_triu(m, INT64_MIN), m));
    CHECK(same(ct_tril(m, INT64_MIN), ct_zeros_like(m)) && same(ct_triu(m, INT64_MAX), ct_zeros_like(m)));
    CHECK_ERR(ct_pad(f, CT_SHAPE(INT64_MIN, 0), 0), "pad");
    CHECK_ERR(ct_pad(f, CT_SHAPE(INT64_MAX, 1), 0), "pad");
    /* slices and unfolds with steps past the size: at most one element */
    ct_tensor *sl = ct_slice(f, 0, 1, INT64_MAX, INT64_MAX);
    CHECK(sl && ct_numel(sl) == 1 && ct_item(sl) == 1);
    sl = ct_slice(f, 0, INT64_MAX - 1, INT64_MAX, 1);
    CHECK(sl && ct_numel(sl) == 0);
    sl = ct_slice(f, 0, INT64_MIN, INT64_MIN + 1, BIG);
    CHECK(sl && ct_numel(sl) == 0);
    ct_tensor *u = ct_unfold(f, 0, 2, BIG);
    CHECK(u && ct_size(u, 0) == 1 && ct_size(u, 1) == 2);
    CHECK_ERR(ct_unfold(f, 0, BIG, 1), "maximum size");
    CHECK_ERR(ct_unflatten(f, 0, (const int64_t[]){-BIG, -1}, 2), "unflatten");
    CHECK_ERR(ct_unflatten(f, 0, (const int64_t[]){BIG, BIG}, 2), "unflatten");
    ct_scope_end();
    CHECK(holds_no_memory(before));
}

/* windows of 2^62 rows, half of them padding: the taps outside the input are
 * skipped by arithmetic, not one at a time (that loop never ended) */
TEST(pooling_with_huge_windows) {
    ct_tensor *x = ct_ones(CT_SHAPE(1, 1, 4, 4), CT_FLOAT32);
    const int64_t k[2] = {BIG, 2}, pad[2] = {BIG / 2, 0}, one[2] = {1, 1}, dil[2] = {BIG, 1};
    ct_tensor *m = ct_max_pool2d(x, k, one, pad, one, false);
    CHECK(m && ct_size(m, 2) == 5 && ct_size(m, 3) == 3 && ct_item(ct_amin(m, NULL, 0, false)) == 1);
    ct_tensor *a = ct_avg_pool2d(x, k, (const int64_t[]){INT64_MAX, 1}, pad, false, false, 0);
    CHECK(a && ct_size(a, 2) == 1 && ct_size(a, 3) == 3 && ct_item(ct_amax(a, NULL, 0, false)) == 1);
    CHECK_ERR(ct_max_pool2d(x, (const int64_t[]){3, 3}, one, (const int64_t[]){1, 1}, dil, true), "overflow");
    CHECK_ERR(ct_max_pool2d(x, (const int64_t[]){INT64_MAX, 2}, one, (const int64_t[]){INT64_MAX / 2, 0}, one,
                            false), "overflow");
}

TEST(numbers_that_do_not_fit_the_dtype) {
    ct_tensor *i = ct_arange(0, 3, 1, CT_INT64);
    CHECK_ERR(ct_add_alpha(i, i, -1e308), "value cannot be converted to type int64_t without overflow");
    CHECK_ERR(ct_sub_alpha(i, i, 1e300), "value cannot be converted to type int64_t without overflow");
    ct_tensor *u = ct_arange(0, 3, 1, CT_UINT8);
    CHECK_ERR(ct_add_alpha(u, u, 300), "value cannot be converted to type uint8_t without overflow");
    /* the bounds of a float randint move inwards to what the dtype holds */
    ct_dtype ds[] = {CT_FLOAT16, CT_BFLOAT16, CT_FLOAT32, CT_FLOAT64, CT_INT64};
    for (int k = 0; k < 5; k++) {
        ct_clear_error();
        ct_tensor *r = ct_randint(INT64_MIN, INT64_MAX, CT_SHAPE(2), ds[k]);
        CHECK(r || ct_last_error());
    }
}

TEST(bool_bytes_are_normalised) {
    const uint8_t d[] = {0, 1, 2, 190};
    ct_tensor *b = ct_from_data(d, CT_SHAPE(4), CT_BOOL);
    uint8_t got[4];
    CHECK(b && ct_copy_to_buffer(b, got, CT_UINT8) == 0);
    CHECK(got[0] == 0 && got[1] == 1 && got[2] == 1 && got[3] == 1);
    char buf[128];
    CHECK(ct_repr(b, buf, sizeof buf) > 0 && strstr(buf, "[False,  True,  True,  True]"));
    ct_tensor *e = ct_empty(CT_SHAPE(5), CT_BOOL);
    CHECK(e && ct_repr(e, buf, sizeof buf) > 0 && ct_item(ct_sum(e)) == 0);
}

TEST(a_tensor_as_its_own_grad_or_operand) {
    size_t before = ct_memory_stats_get().in_use;
    ct_scope_begin();
    ct_tensor *x = ct_ones(CT_SHAPE(3), CT_FLOAT32);
    ct_set_requires_grad(x, true);
    CHECK_ERR_INT(ct_set_grad(x, x), "can't assign Variable as its own grad");
    CHECK_ERR_INT(ct_set_grad(x, ct_to_device(ct_zeros(CT_SHAPE(3), CT_FLOAT32), CT_META)),
                  "assigned grad has data of a different type");
    CHECK(ct_set_grad(x, ct_detach(x)) == 0); /* another tensor over the same data is fine, as torch */
    CHECK(ct_set_grad(x, NULL) == 0);
    int (*ops[])(ct_tensor *, const ct_tensor *) = {ct_mul_, ct_div_, ct_pow_, ct_atan2_, ct_maximum_, ct_remainder_};
    const char *names[] = {"MulBackward0", "DivBackward0", "PowBackward1", "Atan2Backward0", "MaximumBackward0",
                           "RemainderBackward1"};
    for (int k = 0; k < 6; k++) {
        ct_tensor *y = ct_mul_scalar(x, 2);
        CHECK(ops[k](y, y) == 0);
        char want[128];
        snprintf(want, sizeof want, "which is output 0 of %s, is at version", names[k]);
        CHECK_ERR_INT(ct_backward(ct_sum(y), NULL), want); /* y's old value is gone, as torch says */
    }
    ct_scope_end();
    CHECK(holds_no_memory(before));
}

TEST(null_tensor_keeps_the_first_error) {
    ct_clear_error();
    CHECK(!ct_narrow(ct_ones(CT_SHAPE(2), CT_FLOAT32), 0, 5, 1));
    const char *first = ct_last_error();
    char keep[256];
    snprintf(keep, sizeof keep, "%s", first ? first : "");
    CHECK(first != NULL);
    CHECK(!ct_gelu(NULL, "bad"));
    CHECK(!ct_permute(NULL, NULL, 2));
    CHECK(!ct_expand(NULL, NULL, 17));
    CHECK(!ct_view(NULL, NULL, 17));
    CHECK(!ct_as_strided(NULL, NULL, NULL, 17, 0));
    CHECK(!ct_div_mode(NULL, NULL, "bad"));
    CHECK(!ct_div_scalar_mode(NULL, 2, "bad"));
    CHECK(ct_normal_(NULL, 0, -1) == -1);
    CHECK(ct_bernoulli_(NULL, 2) == -1);
    CHECK(ct_uniform_(NULL, 2, 1) == -1);
    CHECK_STR(ct_last_error(), keep);
}

int main(void) {
    RUN(containers_of_null_arrays);
    RUN(int64_extremes_in_views_and_shapes);
    RUN(pooling_with_huge_windows);
    RUN(numbers_that_do_not_fit_the_dtype);
    RUN(bool_bytes_are_normalised);
    RUN(a_tensor_as_its_own_grad_or_operand);
    RUN(null_tensor_keeps_the_first_error);
    return REPORT();
}
