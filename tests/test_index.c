/* test_index.c: the shape-and-indexing family (cat, stack, index_select, gather,
 * scatter, advanced indexing, masks, sort/topk, pad, where, clamp, lerp ...):
 * values worked out by hand, errors, meta shapes, gradients. The parity tests
 * (tests/parity/test_index.py) compare with PyTorch on random inputs. */
#include "harness.h"
#include <stdlib.h>

static ct_tensor *arange_f(int64_t n, const int64_t *shape, int ndim) {
    return ct_reshape(ct_arange(0, (double)n, 1, CT_FLOAT32), shape, ndim);
}
static ct_tensor *longs(const int64_t *v, const int64_t *shape, int ndim) {
    return ct_from_data(v, shape, ndim, CT_INT64);
}
static ct_tensor *bools(const bool *v, const int64_t *shape, int ndim) {
    return ct_from_data(v, shape, ndim, CT_BOOL);
}
static double at(const ct_tensor *t, int64_t i) {
    double buf[4096];
    if (!t || ct_numel(t) > 4096 || ct_copy_to_buffer(t, buf, CT_FLOAT64) < 0) return NAN;
    return buf[i];
}
/* all elements equal want[] */
static int same(const ct_tensor *t, const double *want, int64_t n) {
    if (!t || ct_numel(t) != n) return 0;
    for (int64_t i = 0; i < n; i++)
        if (!(at(t, i) == want[i] || (isnan(at(t, i)) && isnan(want[i])))) return 0;
    return 1;
}
#define SAME(t, ...) same(t, (const double[]){__VA_ARGS__}, (int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)))

TEST(cat_stack) {
    ct_tensor *a = arange_f(6, CT_SHAPE(2, 3)), *b = ct_full(CT_SHAPE(2, 1), 9, CT_FLOAT32);
    const ct_tensor *ab[] = {a, b};
    ct_tensor *c = ct_cat(ab, 2, 1);
    CHECK(c && ct_size(c, 1) == 4);
    CHECK(SAME(c, 0, 1, 2, 9, 3, 4, 5, 9));
    const ct_tensor *aa[] = {a, a};
    ct_tensor *s = ct_stack(aa, 2, 0);
    CHECK(s && ct_ndim(s) == 3 && ct_size(s, 0) == 2);
    ct_tensor *s2 = ct_stack(aa, 2, -1);
    CHECK(s2 && ct_size(s2, 2) == 2 && SAME(s2, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5));
    /* type promotion: int32 + float64 -> float64 */
    ct_tensor *i = ct_arange(0, 2, 1, CT_INT32), *d = ct_full(CT_SHAPE(1), 0.5, CT_FLOAT64);
    const ct_tensor *id[] = {i, d};
    ct_tensor *p = ct_cat(id, 2, 0);
    CHECK(p && ct_dtype_of(p) == CT_FLOAT64 && SAME(p, 0, 1, 0.5));
    /* long lists (more than a node's inputs) */
    const ct_tensor *many[20];
    for (int k = 0; k < 20; k++) many[k] = ct_full(CT_SHAPE(1), k, CT_FLOAT32);
    ct_tensor *m = ct_cat(many, 20, 0);
    CHECK(m && ct_numel(m) == 20 && at(m, 19) == 19 && at(m, 7) == 7);
    ct_tensor *ms = ct_stack(many, 20, 1);
    CHECK(ms && ct_size(ms, 0) == 1 && ct_size(ms, 1) == 20 && at(ms, 13) == 13);
    CHECK_ERR(ct_cat(ab, 2, 0), "Sizes of tensors must match except in dimension 0");
    CHECK_ERR(ct_cat(NULL, 0, 0), "expected a non-empty list of Tensors");
    CHECK_ERR(ct_stack(ab, 2, 0), "stack expects each tensor to be equal size");
    ct_tensor *sc = ct_scalar(1);
    const ct_tensor *ss[] = {sc, sc};
    CHECK_ERR(ct_cat(ss, 2, 0), "zero-dimensional tensor (at position 0) cannot be concatenated");
}

TEST(index_select_gather_scatter) {
    ct_tensor *x = arange_f(12, CT_SHAPE(3, 4));
    ct_tensor *idx = longs((const int64_t[]){2, 0}, CT_SHAPE(2));
    ct_tensor *r = ct_index_select(x, 0, idx);
    CHECK(r && SAME(r, 8, 9, 10, 11, 0, 1, 2, 3));
    ct_tensor *r1 = ct_index_select(ct_t(x), 1, idx); /* non-contiguous */
    CHECK(r1 && SAME(r1, 8, 0, 9, 1, 10, 2, 11, 3));
    CHECK_ERR(ct_index_select(x, 0, longs((const int64_t[]){3}, CT_SHAPE(1))), "index out of range in self");
    ct_tensor *gi = longs((const int64_t[]){3, 0, 1, 1}, CT_SHAPE(2, 2));
    ct_tensor *g = ct_gather(x, 1, gi);
    CHECK(g && SAME(g, 3, 0, 5, 5));
    CHECK_ERR(ct_gather(x, 1, longs((const int64_t[]){4}, CT_SHAPE(1, 1))),
              "index 4 is out of bounds for dimension 1 with size 4");
    ct_tensor *z = ct_zeros(CT_SHAPE(2, 4), CT_FLOAT32);
    ct_tensor *src = ct_full(CT_SHAPE(2, 2), 1, CT_FLOAT32);
    ct_tensor *sa = ct_scatter_add(z, 1, gi, src);
    CHECK(sa && SAME(sa, 1, 0, 0, 1, 0, 2, 0, 0));
    ct_tensor *sv = ct_scatter_value(z, 1, gi, 7);
    CHECK(sv && SAME(sv, 7, 0, 0, 7, 0, 7, 0, 0));
    CHECK(ct_scatter_add_(z, 1, gi, src) == 0 && SAME(z, 1, 0, 0, 1, 0, 2, 0, 0));
    ct_tensor *ia = ct_index_add(ct_zeros(CT_SHAPE(3), CT_FLOAT32), 0, longs((const int64_t[]){0, 0, 2}, CT_SHAPE(3)),
                                 ct_full(CT_SHAPE(3), 1, CT_FLOAT32), 2.0);
    CHECK(ia && SAME(ia, 4, 0, 2));
}

TEST(advanced_index) {
    ct_tensor *x = arange_f(12, CT_SHAPE(3, 4));
    ct_tensor *i0 = longs((const int64_t[]){2, -3}, CT_SHAPE(2)), *i1 = longs((const int64_t[]){1, 3}, CT_SHAPE(2));
    const ct_tensor *both[] = {i0, i1};
    ct_tensor *r = ct_index(x, both, 2);
    CHECK(r && ct_ndim(r) == 1 && SAME(r, 9, 3));
    const ct_tensor *col[] = {NULL, i1};
    ct_tensor *c = ct_index(x, col, 2);
    CHECK(c && ct_size(c, 0) == 3 && ct_size(c, 1) == 2 && SAME(c, 1, 3, 5, 7, 9, 11));
    ct_tensor *mask = bools((const bool[]){true, false, true}, CT_SHAPE(3));
    const ct_tensor *mk[] = {mask};
    ct_tensor *m = ct_index(x, mk, 1);
    CHECK(m && ct_size(m, 0) == 2 && SAME(m, 0, 1, 2, 3, 8, 9, 10, 11));
    const ct_tensor *bad[] = {longs((const int64_t[]){3}, CT_SHAPE(1))};
    CHECK_ERR(ct_index(x, bad, 1), "index 3 is out of bounds for dimension 0 with size 3");
    const ct_tensor *three[] = {i0, i0, i0};
    CHECK_ERR(ct_index(x, three, 3), "too many indices for tensor of dimension 2");
    /* index_put, with and without accumulate, in place */
    ct_tensor *z = ct_zeros(CT_SHAPE(3), CT_FLOAT32);
    const ct_tensor *dup[] = {longs((const int64_t[]){0, 0, 2}, CT_SHAPE(3))};
    ct_tensor *acc = ct_index_put(z, dup, 1, ct_full(CT_SHAPE(3), 1, CT_FLOAT32), true);
    CHECK(acc && SAME(acc, 2, 0, 1));
    CHECK(ct_index_put_(z, mk, 1, ct_scalar(5), false) == 0 && SAME(z, 5, 0, 5));
}

TEST(masks) {
    ct_tensor *x = arange_f(6, CT_SHAPE(2, 3));
    ct_tensor *m = bools((const bool[]){true, false, true}, CT_SHAPE(3));
    ct_tensor *s = ct_masked_select(x, m);
    CHECK(s && SAME(s, 0, 2, 3, 5));
    ct_tensor *f = ct_masked_fill(x, m, -1);
    CHECK(f && SAME(f, -1, 1, -1, -1, 4, -1));
    CHECK_ERR(ct_masked_fill(x, ct_ones(CT_SHAPE(3), CT_FLOAT32), 1),
              "masked_fill only supports boolean masks, but got mask with dtype float");
    CHECK_ERR(ct_masked_fill(x, ct_ones(CT_SHAPE(3), CT_INT64), 1),
              "masked_fill only supports boolean masks, but got mask with dtype long");
    ct_tensor *nz = ct_nonzero(x);
    CHECK(nz && ct_size(nz, 0) == 5 && ct_size(nz, 1) == 2 && ct_dtype_of(nz) == CT_INT64);
    CHECK(SAME(nz, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2));
    ct_tensor *tk = ct_take(x, longs((const int64_t[]){5, -6}, CT_SHAPE(2)));
    CHECK(tk && SAME(tk, 5, 0));
    CHECK_ERR(ct_take(x, longs((const int64_t[]){6}, CT_SHAPE(1))),
              "out of range: tried to access index 6 on a tensor of 6 elements.");
    ct_tensor *w = ct_where(m, x, ct_scalar(10));
    CHECK(w && SAME(w, 0, 10, 2, 3, 10, 5));
    CHECK_ERR(ct_where(ct_ones(CT_SHAPE(3), CT_FLOAT32), x, x),
              "where expected condition to be a boolean tensor, but got a tensor with dtype Float");
}

TEST(reshuffles) {
    ct_tensor *x = arange_f(6, CT_SHAPE(2, 3));
    CHECK(SAME(ct_flip(x, CT_DIMS(1)), 2, 1, 0, 5, 4, 3));
    CHECK(SAME(ct_flip(x, CT_DIMS(0, 1)), 5, 4, 3, 2, 1, 0));
    CHECK(SAME(ct_roll(x, (const int64_t[]){1}, 1, CT_DIMS(1)), 2, 0, 1, 5, 3, 4));
    CHECK(SAME(ct_roll(x, (const int64_t[]){-1}, 1, NULL, 0), 1, 2, 3, 4, 5, 0));
    ct_tensor *rp = ct_repeat(x, CT_SHAPE(1, 2));
    CHECK(rp && ct_size(rp, 1) == 6 && SAME(rp, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5));
    ct_tensor *tl = ct_tile(ct_arange(0, 2, 1, CT_FLOAT32), CT_SHAPE(2, 2));
    CHECK(tl && ct_ndim(tl) == 2 && SAME(tl, 0, 1, 0, 1, 0, 1, 0, 1));
    CHECK(SAME(ct_tril(x, 0), 0, 0, 0, 3, 4, 0));
    CHECK(SAME(ct_triu(x, 1), 0, 1, 2, 0, 0, 5));
    ct_tensor *p = ct_pad(x, CT_SHAPE(1, -1), 9);
    CHECK(p && ct_size(p, 1) == 3 && SAME(p, 9, 0, 1, 9, 3, 4));
    ct_tensor *p2 = ct_pad(ct_arange(0, 2, 1, CT_INT64), CT_SHAPE(0, 2), -1);
    CHECK(p2 && ct_dtype_of(p2) == CT_INT64 && SAME(p2, 0, 1, -1, -1));
    CHECK_ERR(ct_pad(x, CT_SHAPE(1), 0), "Padding length must be divisible by 2");
    CHECK_ERR(ct_flip(x, CT_DIMS(0, 0)), "dim 0 appears multiple times in the list of dims");
    CHECK_ERR(ct_repeat(x, CT_SHAPE(2)), "Number of dimensions of repeat dims can not be smaller");
}

TEST(sort_topk) {
    ct_tensor *x = ct_from_data((const float[]){3, 1, NAN, 2, 1}, CT_SHAPE(5), CT_FLOAT32);
    ct_tensor *v = NULL, *i = NULL;
    CHECK(ct_sort(x, 0, false, true, &v, &i) == 0);
    CHECK(SAME(v, 1, 1, 2, 3, NAN) && SAME(i, 1, 4, 3, 0, 2));
    CHECK(ct_sort(x, 0, true, true, &v, &i) == 0);
    CHECK(SAME(v, NAN, 3, 2, 1, 1) && SAME(i, 2, 0, 3, 1, 4));
    CHECK(SAME(ct_argsort(x, -1, false, true), 1, 4, 3, 0, 2));
    ct_tensor *y = ct_from_data((const int32_t[]){5, 9, 1, 7}, CT_SHAPE(2, 2), CT_INT32);
    CHECK(ct_topk(y, 1, 1, true, true, &v, &i) == 0);
    CHECK(ct_dtype_of(v) == CT_INT32 && SAME(v, 9, 7) && SAME(i, 1, 1));
    CHECK(ct_topk(y, 2, 0, false, true, &v, NULL) == 0 && SAME(v, 1, 7, 5, 9));
    CHECK_ERR_INT(ct_topk(y, 3, 0, true, true, &v, &i), "selected index k out of range");
}

TEST(one_hot_embedding) {
    ct_tensor *c = longs((const int64_t[]){0, 2}, CT_SHAPE(2));
    ct_tensor *oh = ct_one_hot(c, -1);
    CHECK(oh && ct_size(oh, 1) == 3 && SAME(oh, 1, 0, 0, 0, 0, 1));
    CHECK_ERR(ct_one_hot(c, 2), "Class values must be smaller than num_classes.");
    ct_tensor *w = arange_f(6, CT_SHAPE(3, 2));
    ct_tensor *e = ct_embedding(w, longs((const int64_t[]){2, 0, 2}, CT_SHAPE(3)), -1);
    CHECK(e && ct_size(e, 0) == 3 && SAME(e, 4, 5, 0, 1, 4, 5));
    CHECK_ERR(ct_embedding(w, longs((const int64_t[]){3}, CT_SHAPE(1)), -1), "index out of range in self");
    /* gradient: rows summed, the padding row gets none */
    ct_tensor *wg = ct_clone(w);
    ct_set_requires_grad(wg, true);
    ct_tensor *e2 = ct_embedding(wg, longs((const int64_t[]){2, 0, 2}, CT_SHAPE(3)), 0);
    CHECK(ct_backward(e2, ct_ones(CT_SHAPE(3, 2), CT_FLOAT32)) == 0);
    CHECK(SAME(ct_grad(wg), 0, 0, 0, 0, 2, 2));
}

TEST(clamp_lerp_addc) {
    ct_tensor *x = ct_from_data((const float[]){-2, 0.5f, NAN, 3}, CT_SHAPE(4), CT_FLOAT32);
    CHECK(SAME(ct_clamp(x, -1, 1), -1, 0.5, NAN, 1));
    CHECK(SAME(ct_clamp(x, NAN, 0), -2, 0, NAN, 0));
    CHECK_ERR(ct_clamp(x, NAN, NAN), "At least one of 'min' or 'max' must not be None");
    ct_tensor *lo = ct_full(CT_SHAPE(1), 0, CT_FLOAT32);
    CHECK(SAME(ct_clamp_tensor(x, lo, NULL), 0, 0.5, NAN, 3));
    ct_tensor *a = ct_zeros(CT_SHAPE(2), CT_FLOAT32), *b = ct_full(CT_SHAPE(2), 4, CT_FLOAT32);
    CHECK(SAME(ct_lerp_scalar(a, b, 0.25), 1, 1));
    CHECK(SAME(ct_lerp(a, b, ct_full(CT_SHAPE(2), 0.75, CT_FLOAT32)), 3, 3));
    CHECK(SAME(ct_addcmul(a, b, b, 0.5), 8, 8));
    CHECK(SAME(ct_addcdiv(a, b, ct_full(CT_SHAPE(2), 2, CT_FLOAT32), 3), 6, 6));
    ct_tensor *xi = ct_arange(0, 3, 1, CT_INT64);
    ct_tensor *cf = ct_clamp(xi, 0.5, NAN); /* a float bound promotes */
    CHECK(cf && ct_dtype_of(cf) == CT_FLOAT32 && SAME(cf, 0.5, 1, 2));
}

TEST(gradients) {
    ct_tensor *x = arange_f(6, CT_SHAPE(2, 3));
    ct_set_requires_grad(x, true);
    /* sum of gather picks: each picked element gets 1 per pick */
    ct_tensor *gi = longs((const int64_t[]){0, 0, 2, 1}, CT_SHAPE(2, 2));
    ct_tensor *g = ct_gather(x, 1, gi);
    CHECK(ct_backward(g, ct_ones(CT_SHAPE(2, 2), CT_FLOAT32)) == 0);
    CHECK(SAME(ct_grad(x), 2, 0, 0, 0, 1, 1));
    CHECK(ct_zero_grad(x, true) == 0);
    ct_tensor *m = bools((const bool[]){true, false, true}, CT_SHAPE(3));
    ct_tensor *w = ct_where(m, x, ct_scalar(0));
    CHECK(ct_backward(w, ct_full(CT_SHAPE(2, 3), 3, CT_FLOAT32)) == 0);
    CHECK(SAME(ct_grad(x), 3, 0, 3, 3, 0, 3));
    CHECK(ct_zero_grad(x, true) == 0);
    ct_tensor *c = ct_clamp(x, 1, 4);
    CHECK(ct_backward(c, ct_ones(CT_SHAPE(2, 3), CT_FLOAT32)) == 0);
    CHECK(SAME(ct_grad(x), 0, 1, 1, 1, 1, 0));
    CHECK(ct_zero_grad(x, true) == 0);
    ct_tensor *p = ct_pad(x, CT_SHAPE(1, 1), 0);
    CHECK(p && strcmp(ct_grad_fn_name(p), "ConstantPadNdBackward0") == 0);
    CHECK(ct_backward(p, arange_f(10, CT_SHAPE(2, 5))) == 0);
    CHECK(SAME(ct_grad(x), 1, 2, 3, 6, 7, 8));
    CHECK(ct_zero_grad(x, true) == 0);
    ct_tensor *r = ct_repeat(x, CT_SHAPE(2, 1));
    CHECK(ct_backward(r, ct_ones(CT_SHAPE(4, 3), CT_FLOAT32)) == 0);
    CHECK(SAME(ct_grad(x), 2, 2, 2, 2, 2, 2));
    /* non-differentiable outputs */
    CHECK(!ct_requires_grad(ct_nonzero(x)));
    ct_tensor *v = NULL, *i = NULL;
    CHECK(ct_sort(x, 1, false, false, &v, &i) == 0);
    CHECK(ct_requires_grad(v) && !ct_requires_grad(i));
    CHECK(!ct_requires_grad(ct_one_hot(longs((const int64_t[]){1}, CT_SHAPE(1)), 3)));
}

TEST(meta_shapes) {
    ct_tensor *m = ct_empty_on(CT_SHAPE(3, 4), CT_FLOAT32, CT_META);
    ct_tensor *mi = ct_empty_on(CT_SHAPE(5), CT_INT64, CT_META);
    ct_tensor *r = ct_index_select(m, 1, mi);
    CHECK(r && ct_device_of(r) == CT_META && ct_size(r, 1) == 5);
    ct_tensor *p = ct_pad(m, CT_SHAPE(1, 2, 3, 4), 0);
    CHECK(p && ct_size(p, 0) == 10 && ct_size(p, 1) == 7);
    const ct_tensor *mm[] = {m, m, m};
    ct_tensor *c = ct_cat(mm, 3, 0);
    CHECK(c && ct_size(c, 0) == 9 && ct_device_of(c) == CT_META);
    ct_tensor *v = NULL, *i = NULL;
    CHECK(ct_topk(m, 2, 1, true, true, &v, &i) == 0 && ct_size(v, 1) == 2 && ct_dtype_of(i) == CT_INT64);
    CHECK_ERR(ct_gather(m, 1, mi), "Index tensor must have the same number of dimensions as input tensor");
}

int main(void) {
    RUN(cat_stack);
    RUN(index_select_gather_scatter);
    RUN(advanced_index);
    RUN(masks);
    RUN(reshuffles);
    RUN(sort_topk);
    RUN(one_hot_embedding);
    RUN(clamp_lerp_addc);
    RUN(gradients);
    RUN(meta_shapes);
    return REPORT();
}
