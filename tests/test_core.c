/* test_core.c: ownership, errors, allocator, views and the meta device. */
#include "harness.h"
#include <stdlib.h>

TEST(scope_releases_everything) {
    ct_empty_cache();
    size_t before = ct_memory_stats_get().in_use;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(100, 100), CT_FLOAT32), *b = ct_full(CT_SHAPE(100), 2, CT_FLOAT32);
    ct_tensor *c = ct_sub(ct_mul(a, b), ct_add(ct_div(b, a), b)); /* chained temporaries */
    CHECK(c != NULL);
    CHECK(ct_memory_stats_get().in_use > before);
    ct_scope_end();
    CHECK_EQ_INT(ct_memory_stats_get().in_use, before);
}

TEST(retain_outlives_scope_and_free_releases) {
    size_t before = ct_memory_stats_get().in_use;
    ct_tensor *kept;
    ct_scope_begin();
    ct_tensor *a = ct_arange(0, 10, 1, CT_FLOAT32);
    kept = ct_retain(a);
    ct_scope_end();
    CHECK_NEAR(ct_item(ct_select(kept, 0, 3)), 3.0, 0);
    ct_free(kept);
    /* the select above was made with the test's scope open: it is the scope's */
    ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(1000), CT_FLOAT64);
    ct_free(x); /* early release inside a scope: the scope forgets it */
    ct_scope_end();
    ct_free(NULL);
    CHECK(ct_memory_stats_get().in_use <= before + 64);
}

TEST(no_scope_means_caller_owns) {
    /* RUN opens a scope; close ours and reopen to test the unscoped rule */
    ct_scope_end();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_FLOAT32);
    ct_tensor *b = ct_mul_scalar(a, 2);
    ct_tensor *s = ct_select(b, 0, 2);
    CHECK_NEAR(ct_item(s), 2.0, 0);
    ct_free(s);
    ct_free(a);
    ct_free(b);
    ct_scope_begin();
}

TEST(scope_end_without_scope_is_reported) {
    ct_scope_end(); /* closes RUN's scope */
    ct_clear_error();
    ct_scope_end();
    CHECK(ct_last_error() && strstr(ct_last_error(), "no scope is open"));
    ct_clear_error();
    ct_scope_begin();
}

#ifdef CT_DEBUG
TEST(double_free_is_reported) {
    ct_tensor *a = ct_retain(ct_ones(CT_SHAPE(2), CT_FLOAT32));
    ct_free(a);
    ct_clear_error();
    ct_free(a);
    CHECK(ct_last_error() && strstr(ct_last_error(), "after ct_free"));
    CHECK_ERR(ct_neg(a), "after ct_free");
}
#endif

TEST(null_arguments_keep_the_first_error) {
    ct_tensor *x = ct_ones(CT_SHAPE(4), CT_FLOAT32);
    ct_clear_error();
    ct_tensor *bad = ct_narrow(x, 0, 3, 2);
    CHECK(bad == NULL);
    ct_tensor *chain = ct_add(ct_mul(bad, x), ct_sin(bad));
    CHECK(chain == NULL);
    CHECK_STR(ct_last_error(), "narrow: start (3) + length (2) exceeds dimension size (4).");
    ct_clear_error();
    CHECK(ct_last_error() == NULL);
    CHECK(ct_neg(NULL) == NULL);
    CHECK(ct_last_error() != NULL); /* a NULL with no error before says so */
}

TEST(errors_name_op_shapes_and_dtypes) {
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_FLOAT32), *b = ct_ones(CT_SHAPE(4), CT_FLOAT32);
    CHECK_ERR(ct_add(a, b), "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1");
    CHECK_ERR(ct_view(ct_transpose(a, 0, 1), CT_SHAPE(6)), "view size is not compatible with input tensor's size and stride");
    CHECK_ERR(ct_view(a, CT_SHAPE(4, -1)), "shape '[4, -1]' is invalid for input of size 6");
    CHECK_ERR(ct_transpose(a, 0, 2), "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    CHECK_ERR(ct_select(a, 1, 3), "index 3 out of range");
    CHECK_ERR(ct_zeros(CT_SHAPE(-1, 3), CT_FLOAT32), "negative dimension -1");
    CHECK_ERR(ct_zeros(CT_SHAPE(INT64_MAX, 4), CT_FLOAT32), "overflow");
    CHECK_ERR(ct_empty(CT_SHAPE(0, 3333333333333333333, 2592), CT_INT32), "overflow"); /* found by the fuzzer */
    CHECK_ERR(ct_as_strided(a, (int64_t[]){3, 3}, (int64_t[]){3, 1}, 2, 0), "out of bounds for storage");
    CHECK_ERR(ct_expand(a, CT_SHAPE(4, 3)), "The expanded size of the tensor (4) must match the existing size (2)");
    CHECK(isnan(ct_item(a)));
    CHECK(strstr(ct_last_error(), "a Tensor with 6 elements cannot be converted to Scalar"));
    ct_clear_error();
    ct_tensor *i = ct_ones(CT_SHAPE(3), CT_INT64);
    CHECK_ERR(ct_bitwise_and(a, a), "not implemented for 'Float'");
    CHECK_ERR_INT(ct_set_requires_grad(i, true), "only Tensors of floating point");
    CHECK_ERR_INT(ct_add_(i, ct_ones(CT_SHAPE(3), CT_FLOAT32)), "result type Float can't be cast to the desired output type Long");
    CHECK_ERR(ct_div_mode(i, ct_zeros(CT_SHAPE(3), CT_INT64), "floor"), "ZeroDivisionError");
}

/* An allocator that fails on request, to test the failure paths. */
static int fail_after = -1;
static void *test_alloc(void *ctx, size_t n) {
    (void)ctx;
    if (fail_after == 0) return NULL;
    if (fail_after > 0) fail_after--;
    void *p = NULL;
    return posix_memalign(&p, 64, n) ? NULL : p;
}
static void test_free(void *ctx, void *p, size_t n) {
    (void)ctx, (void)n;
    free(p);
}

TEST(allocation_failures_are_errors_not_crashes) {
    ct_allocator al = {test_alloc, test_free, NULL};
    ct_set_allocator(&al);
    fail_after = 0;
    CHECK_ERR(ct_zeros(CT_SHAPE(1000), CT_FLOAT32), "not enough memory");
    fail_after = 1; /* the first allocation works, the result of the add fails */
    ct_tensor *a = ct_ones(CT_SHAPE(1000), CT_FLOAT32);
    CHECK(a != NULL);
    CHECK_ERR(ct_add(a, a), "not enough memory");
    fail_after = -1;
    ct_set_allocator(NULL);
}

TEST(cache_reuses_blocks) {
    ct_empty_cache();
    ct_memory_stats s0 = {0};
    for (int i = 0; i < 11; i++) {
        if (i == 1) s0 = ct_memory_stats_get(); /* after the first step: steady state */
        ct_scope_begin();
        ct_tensor *a = ct_zeros(CT_SHAPE(1 << 20), CT_FLOAT32);
        ct_add_scalar_(a, 1);
        ct_scope_end();
    }
    ct_memory_stats s1 = ct_memory_stats_get();
    CHECK_EQ_INT(s1.hook_allocs - s0.hook_allocs, 0); /* no new allocation in steady state */
    CHECK(s1.cache_hits - s0.cache_hits >= 10);
}

TEST(small_tensors_need_no_allocator_call) {
    /* data of up to 16 bytes lives inside the storage object: a scalar loop makes
     * no allocator call at all, and views and writes behave as for any tensor */
    ct_memory_stats s0 = ct_memory_stats_get();
    ct_scope_begin();
    ct_tensor *x = ct_scalar(0.5), *v = ct_from_data((float[]){1, 2, 3, 4}, CT_SHAPE(2, 2), CT_FLOAT32);
    for (int i = 0; i < 100; i++) x = ct_sin(ct_add(ct_mul(x, x), x));
    ct_tensor *t = ct_transpose(v, 0, 1);
    ct_fill_(ct_select(ct_select(t, 0, 0), 0, 1), 7); /* t[0][1] is v[1][0] */
    CHECK_NEAR(ct_item(ct_select(ct_select(v, 0, 1), 0, 0)), 7, 0);
    CHECK_NEAR(ct_item(ct_sum(v)), 1 + 2 + 7 + 4, 0);
    CHECK(isfinite(ct_item(x)));
    ct_memory_stats s1 = ct_memory_stats_get();
    CHECK_EQ_INT(s1.hook_allocs - s0.hook_allocs, 0);
    CHECK_EQ_INT(s1.cache_hits - s0.cache_hits, 0);
    CHECK_EQ_INT(s1.in_use, s0.in_use);
    ct_scope_end();
}

TEST(views_share_storage_and_writes_show_in_base) {
    ct_tensor *x = ct_view(ct_arange(0, 12, 1, CT_FLOAT32), CT_SHAPE(3, 4));
    ct_tensor *t = ct_transpose(x, 0, 1);
    CHECK_EQ_INT(ct_stride(x, 0), 4);
    CHECK_EQ_INT(ct_stride(t, 0), 1);
    CHECK_EQ_INT(ct_stride(t, 1), 4);
    CHECK(!ct_is_contiguous(t));
    CHECK(ct_shares_storage(x, t));
    ct_tensor *n = ct_narrow(x, 1, 1, 2);
    CHECK_EQ_INT(ct_storage_offset(n), 1);
    CHECK_EQ_INT(ct_fill_(n, 7), 0);
    float expect[12] = {0, 7, 7, 3, 4, 7, 7, 7, 8, 7, 7, 11}, got[12];
    CHECK_EQ_INT(ct_copy_to_buffer(x, got, CT_FLOAT32), 0);
    for (int i = 0; i < 12; i++) CHECK_NEAR(got[i], expect[i], 0);
    char buf[256];
    ct_repr(x, buf, sizeof buf);
    CHECK_STR(buf, "tensor([[ 0.,  7.,  7.,  3.],\n        [ 4.,  7.,  7.,  7.],\n        [ 8.,  7.,  7., 11.]])");
    /* contiguous() of a contiguous tensor shares storage; of a transpose, copies */
    CHECK(ct_shares_storage(ct_contiguous(x), x));
    CHECK(!ct_shares_storage(ct_contiguous(t), x));
    /* reshape views when it can, copies when it must */
    CHECK(ct_shares_storage(ct_reshape(x, CT_SHAPE(2, 6)), x));
    CHECK(!ct_shares_storage(ct_reshape(t, CT_SHAPE(12)), x));
    CHECK_NEAR(ct_item(ct_select(ct_reshape(t, CT_SHAPE(12)), 0, 1)), 4, 0);
}

TEST(from_blob_wraps_without_copy) {
    static float data[6] = {1, 2, 3, 4, 5, 6};
    ct_scope_begin();
    ct_tensor *t = ct_from_blob(data, CT_SHAPE(2, 3), CT_FLOAT32, NULL, NULL);
    CHECK(ct_data_ptr(t) == data);
    ct_mul_scalar_(t, 2);
    ct_scope_end();
    CHECK_NEAR(data[5], 12, 0);
}

TEST(type_promotion_follows_pytorch) {
    /* torch.promote_types / result_type, from PyTorch's documented table */
    CHECK_EQ_INT(ct_promote_types(CT_INT32, CT_FLOAT16), CT_FLOAT16);
    CHECK_EQ_INT(ct_promote_types(CT_UINT8, CT_INT8), CT_INT16);
    CHECK_EQ_INT(ct_promote_types(CT_BFLOAT16, CT_FLOAT16), CT_FLOAT32);
    CHECK_EQ_INT(ct_promote_types(CT_BOOL, CT_INT64), CT_INT64);
    ct_tensor *i = ct_ones(CT_SHAPE(3), CT_INT32);
    CHECK_EQ_INT(ct_dtype_of(ct_add_scalar(i, 2)), CT_INT32);       /* int tensor + int number */
    CHECK_EQ_INT(ct_dtype_of(ct_add_scalar(i, 2.5)), CT_FLOAT32);   /* + float number: default float */
    CHECK_EQ_INT(ct_dtype_of(ct_add(i, ct_scalar_dtype(1, CT_FLOAT64))), CT_FLOAT64); /* 0-dim of a higher kind */
    CHECK_EQ_INT(ct_dtype_of(ct_add(ct_ones(CT_SHAPE(2), CT_FLOAT16), ct_scalar_dtype(1, CT_FLOAT64))), CT_FLOAT16);
    CHECK_EQ_INT(ct_dtype_of(ct_sin(i)), CT_FLOAT32);
    CHECK_EQ_INT(ct_dtype_of(ct_div(i, i)), CT_FLOAT32);
    CHECK_EQ_INT(ct_dtype_of(ct_lt(i, i)), CT_BOOL);
}

TEST(meta_device_computes_shapes_and_errors) {
    ct_tensor *a = ct_empty_on(CT_SHAPE(5, 1, 3), CT_FLOAT32, CT_META);
    ct_tensor *b = ct_empty_on(CT_SHAPE(4, 1), CT_FLOAT16, CT_META);
    ct_tensor *c = ct_mul(ct_exp(a), b);
    CHECK(c != NULL);
    CHECK_EQ_INT(ct_ndim(c), 3);
    CHECK_EQ_INT(ct_size(c, 0), 5);
    CHECK_EQ_INT(ct_size(c, 1), 4);
    CHECK_EQ_INT(ct_size(c, 2), 3);
    CHECK_EQ_INT(ct_dtype_of(c), CT_FLOAT32);
    CHECK_EQ_INT(ct_device_of(c), CT_META);
    CHECK(ct_data_ptr(c) == NULL);
    CHECK_ERR(ct_add(a, ct_empty_on(CT_SHAPE(2), CT_FLOAT32, CT_META)), "must match the size of tensor b (2)");
    CHECK_ERR(ct_to_device(a, CT_CPU), "Cannot copy out of meta tensor; no data!");
    CHECK_ERR(ct_narrow(a, 2, 2, 2), "narrow: start (2) + length (2) exceeds dimension size (3).");
}

TEST(elementwise_values_and_layouts) {
    double d[6] = {-1.5, 0, 0.5, 2, -3, 4};
    ct_tensor *x = ct_from_data(d, CT_SHAPE(2, 3), CT_FLOAT64);
    ct_tensor *xt = ct_transpose(x, 0, 1);
    ct_tensor *y = ct_exp(xt);
    /* PyTorch keeps the layout of a transposed input */
    CHECK_EQ_INT(ct_stride(y, 0), 1);
    CHECK_EQ_INT(ct_stride(y, 1), 3);
    CHECK_NEAR(ct_item(ct_select(ct_select(y, 0, 0), 0, 1)), exp(2.0), 1e-15);
    ct_tensor *r = ct_add(xt, ct_unsqueeze(ct_arange(0, 2, 1, CT_FLOAT32), 0)); /* broadcast + promote */
    CHECK_EQ_INT(ct_dtype_of(r), CT_FLOAT64);
    CHECK_NEAR(ct_item(ct_select(ct_select(r, 0, 2), 0, 1)), 4 + 1, 0);
    CHECK_ERR(ct_neg(ct_ones(CT_SHAPE(2), CT_BOOL)), "Negation, the `-` operator, on a bool tensor is not supported");
    ct_tensor *e = ct_expand(ct_ones(CT_SHAPE(1), CT_FLOAT32), CT_SHAPE(4));
    CHECK_ERR_INT(ct_add_(e, ct_ones(CT_SHAPE(4), CT_FLOAT32)), "more than one element of the written-to tensor refers to a single memory location");
    ct_tensor *z = ct_arange(0, 8, 1, CT_FLOAT32);
    CHECK_ERR_INT(ct_add_(ct_narrow(z, 0, 1, 4), ct_narrow(z, 0, 0, 4)), "some elements of the input tensor and the written-to tensor refer to a single memory location");
    CHECK_EQ_INT(ct_add_(ct_narrow(z, 0, 4, 4), ct_narrow(z, 0, 0, 4)), 0); /* disjoint: fine */
    CHECK_EQ_INT(ct_mul_(z, z), 0);                                       /* the same elements: fine */
    CHECK_NEAR(ct_item(ct_select(z, 0, 7)), (7.0 + 3) * (7 + 3), 0);
}

TEST(transposed_copies_are_exact) {
    ct_tensor *x = ct_view(ct_arange(0, 3 * 70 * 101, 1, CT_FLOAT64), CT_SHAPE(3, 70, 101));
    ct_tensor *c = ct_contiguous(ct_transpose(x, 1, 2)); /* the tiled path: [3, 101, 70] */
    CHECK(ct_is_contiguous(c));
    double *d = ct_data_ptr(c);
    int bad = 0;
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < 101; i++)
            for (int j = 0; j < 70; j++) bad += d[(b * 101 + i) * 70 + j] != (double)(b * 7070 + j * 101 + i);
    CHECK_EQ_INT(bad, 0);
    /* float32 with sides divisible by 8: the register-transpose path */
    ct_tensor *f = ct_contiguous(ct_transpose(ct_view(ct_arange(0, 2 * 96 * 64, 1, CT_FLOAT32), CT_SHAPE(2, 96, 64)), 1, 2));
    float *fd = ct_data_ptr(f);
    bad = 0;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 64; i++)
            for (int j = 0; j < 96; j++) bad += fd[(b * 64 + i) * 96 + j] != (float)(b * 6144 + j * 64 + i);
    CHECK_EQ_INT(bad, 0);
    ct_tensor *h = ct_contiguous(ct_t(ct_to_dtype(ct_view(ct_arange(0, 64 * 65, 1, CT_INT64), CT_SHAPE(64, 65)), CT_FLOAT16)));
    CHECK_NEAR(ct_item(ct_select(ct_select(h, 0, 3), 0, 2)), 2 * 65 + 3, 0);
}

/* Pointer arguments that are NULL where a list is due give errors, not crashes. */
TEST(null_lists_are_errors) {
    ct_tensor *x = ct_ones(CT_SHAPE(2, 3), CT_FLOAT32);
    CHECK_ERR(ct_zeros(NULL, 2, CT_FLOAT32), "shape is NULL");
    CHECK_ERR(ct_from_data(NULL, NULL, 2, CT_FLOAT32), "shape is NULL");
    CHECK_ERR(ct_view(x, NULL, 2), "NULL");
    CHECK_ERR(ct_reshape(x, NULL, 2), "NULL");
    CHECK_ERR(ct_expand(x, NULL, 2), "NULL");
    CHECK_ERR(ct_permute(x, NULL, 2), "NULL");
    CHECK_ERR(ct_as_strided(x, NULL, NULL, 2, 0), "NULL");
    CHECK_ERR(ct_movedim(x, NULL, NULL, 1), "NULL");
    CHECK_ERR(ct_unflatten(x, 1, NULL, 2), "sizes must be non-empty");
    CHECK_ERR_INT(ct_split_with_sizes(x, NULL, 2, 0, NULL), "NULL");
    CHECK_ERR_INT(ct_split(x, 1, 0, NULL, 5), "out is NULL");
    CHECK_ERR(ct_sum_dims(x, NULL, 1, false), "invalid dim list");
    CHECK_ERR(ct_pad(x, NULL, 2, 0), "NULL");
    CHECK_ERR(ct_zeros(CT_SHAPE(2), (ct_dtype)99), "invalid dtype 99");
    CHECK_ERR(ct_view(x, (int64_t[]){6}, -1), "number of dimensions (-1)");
    CHECK_ERR_INT(ct_copy_to_buffer(x, NULL, CT_FLOAT32), "out is NULL");
}

int main(void) {
    RUN(scope_releases_everything);
    RUN(retain_outlives_scope_and_free_releases);
    RUN(no_scope_means_caller_owns);
    RUN(scope_end_without_scope_is_reported);
#ifdef CT_DEBUG
    RUN(double_free_is_reported);
#endif
    RUN(null_arguments_keep_the_first_error);
    RUN(errors_name_op_shapes_and_dtypes);
    RUN(allocation_failures_are_errors_not_crashes);
    RUN(cache_reuses_blocks);
    RUN(small_tensors_need_no_allocator_call);
    RUN(views_share_storage_and_writes_show_in_base);
    RUN(from_blob_wraps_without_copy);
    RUN(type_promotion_follows_pytorch);
    RUN(meta_device_computes_shapes_and_errors);
    RUN(elementwise_values_and_layouts);
    RUN(transposed_copies_are_exact);
    RUN(null_lists_are_errors);
    return REPORT();
}
