/* functional.c: the functional forms the layers and losses run, composed from
 * public differentiable ops (pad, unfold, matmul, reductions, elementwise), so
 * autograd derives their gradients. Convolution is im2col: two unfold views,
 * one copy into [N*OH*OW, C*kh*kw], one matrix product. */
#include "nn/nn.h"

/* x [N, C, H, W], w [O, C/groups, kh, kw] -> [N, O, OH, OW] */
ct_tensor *nn_f_conv2d(const ct_tensor *x, const ct_tensor *w, const ct_tensor *b, const int64_t *stride,
                       const int64_t *pad, const int64_t *dil, int64_t groups) {
    if (!c10_unwrap(x) || !c10_unwrap(w)) return NULL;
    if (ct_ndim(x) != 4)
        return c10_error("conv2d: Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of "
                         "size: %s", c10_shape_str(ct_sizes(x), ct_ndim(x)));
    const int64_t *xs = ct_sizes(x), *ws = ct_sizes(w);
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], kh = ws[2], kw = ws[3];
    if (ws[1] * groups != C)
        return c10_error("conv2d: Given groups=%lld, weight of size %s, expected input%s to have %lld "
                         "channels, but got %lld channels instead",
                         (long long)groups, c10_shape_str(ws, 4), c10_shape_str(xs, 4),
                         (long long)(ws[1] * groups), (long long)C);
    int64_t ekh = (kh - 1) * dil[0] + 1, ekw = (kw - 1) * dil[1] + 1;
    int64_t Hp = H + 2 * pad[0], Wp = W + 2 * pad[1];
    if (Hp < ekh || Wp < ekw)
        return c10_error("conv2d: Calculated padded input size per channel: (%lld x %lld). Kernel size: "
                         "(%lld x %lld). Kernel size can't be greater than actual input size",
                         (long long)Hp, (long long)Wp, (long long)ekh, (long long)ekw);
    int64_t OH = (Hp - ekh) / stride[0] + 1, OW = (Wp - ekw) / stride[1] + 1;
    ct_scope_begin();
    const ct_tensor *xp = x;
    if (pad[0] || pad[1]) xp = ct_pad(x, CT_SHAPE(pad[1], pad[1], pad[0], pad[0]), 0.0);
    ct_tensor *u = ct_unfold(ct_unfold(xp, 2, ekh, stride[0]), 3, ekw, stride[1]); /* N C OH OW ekh ekw */
    if (dil[0] > 1) u = ct_slice(u, 4, 0, ekh, dil[0]);
    if (dil[1] > 1) u = ct_slice(u, 5, 0, ekw, dil[1]);
    ct_tensor *p = ct_permute(u, CT_DIMS(0, 2, 3, 1, 4, 5)); /* N OH OW C kh kw */
    int64_t cg = C / groups, og = O / groups;
    ct_tensor *out;
    if (groups == 1) {
        ct_tensor *cols = ct_reshape(p, CT_SHAPE(N * OH * OW, C * kh * kw));
        out = ct_linear(cols, ct_reshape(w, CT_SHAPE(O, C * kh * kw)), b);
    } else {
        ct_tensor *parts[64];
        if (groups > 64) {
            ct_scope_end();
            return c10_error("conv2d: at most 64 groups are supported");
        }
        for (int64_t g = 0; g < groups; g++) {
            ct_tensor *cols = ct_reshape(ct_narrow(p, 3, g * cg, cg), CT_SHAPE(N * OH * OW, cg * kh * kw));
            ct_tensor *wg = ct_reshape(ct_narrow(w, 0, g * og, og), CT_SHAPE(og, cg * kh * kw));
            parts[g] = ct_linear(cols, wg, b ? ct_narrow(b, 0, g * og, og) : NULL);
        }
        out = ct_cat((const ct_tensor *const *)parts, (int)groups, 1);
    }
    out = ct_contiguous(ct_permute(ct_view(out, CT_SHAPE(N, OH, OW, O)), CT_DIMS(0, 3, 1, 2)));
    return nn_escape(out);
}

/* Max or average (count_include_pad) pooling over k windows. */
ct_tensor *nn_f_pool2d(const ct_tensor *x, bool max, const int64_t *k, const int64_t *stride, const int64_t *pad) {
    if (!c10_unwrap(x)) return NULL;
    const char *op = max ? "max_pool2d" : "avg_pool2d";
    int nd = ct_ndim(x);
    if (nd != 3 && nd != 4)
        return c10_error("%s: Expected 3D or 4D (batch mode) tensor for input, but got: %s", op,
                         c10_shape_str(ct_sizes(x), nd));
    if (pad[0] * 2 > k[0] || pad[1] * 2 > k[1])
        return c10_error("%s: pad should be at most half of effective kernel size, but got pad=%lld, "
                         "kernel_size=%lld", op, (long long)pad[0], (long long)k[0]);
    int64_t H = ct_size(x, -2), W = ct_size(x, -1);
    if (H + 2 * pad[0] < k[0] || W + 2 * pad[1] < k[1])
        return c10_error("%s: Given input size: %s. Calculated output size is too small", op,
                         c10_shape_str(ct_sizes(x), nd));
    ct_scope_begin();
    const ct_tensor *xp = x;
    if (pad[0] || pad[1]) xp = ct_pad(x, CT_SHAPE(pad[1], pad[1], pad[0], pad[0]), max ? -INFINITY : 0.0);
    ct_tensor *u = ct_unfold(ct_unfold(xp, nd - 2, k[0], stride[0]), nd - 1, k[1], stride[1]);
    ct_tensor *r = max ? ct_amax(u, CT_DIMS(-2, -1), false) : ct_mean_dims(u, CT_DIMS(-2, -1), false);
    return nn_escape(r);
}

ct_tensor *nn_f_adaptive_avg_pool2d(const ct_tensor *x, int64_t oh, int64_t ow) {
    if (!c10_unwrap(x)) return NULL;
    int nd = ct_ndim(x);
    if (nd != 3 && nd != 4)
        return c10_error("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got %s",
                         c10_shape_str(ct_sizes(x), nd));
    int64_t H = ct_size(x, -2), W = ct_size(x, -1);
    if (oh <= 0 || ow <= 0 || oh * ow > 4096)
        return c10_error("adaptive_avg_pool2d: output size (%lld, %lld) is not supported", (long long)oh,
                         (long long)ow);
    ct_scope_begin();
    ct_tensor *r;
    if (H % oh == 0 && W % ow == 0) {
        r = nn_f_pool2d(x, false, (int64_t[]){H / oh, W / ow}, (int64_t[]){H / oh, W / ow}, (int64_t[]){0, 0});
    } else {
        ct_tensor **cells = malloc((size_t)(oh * ow) * sizeof *cells);
        if (!cells) {
            ct_scope_end();
            return c10_error("adaptive_avg_pool2d: out of memory");
        }
        for (int64_t i = 0; i < oh; i++) {
            int64_t h0 = (i * H) / oh, h1 = ((i + 1) * H + oh - 1) / oh;
            for (int64_t j = 0; j < ow; j++) {
                int64_t w0 = (j * W) / ow, w1 = ((j + 1) * W + ow - 1) / ow;
                ct_tensor *c = ct_narrow(ct_narrow(x, nd - 2, h0, h1 - h0), nd - 1, w0, w1 - w0);
                cells[i * ow + j] = ct_mean_dims(c, CT_DIMS(-2, -1), false);
            }
        }
        ct_tensor *s = ct_stack((const ct_tensor *const *)cells, (int)(oh * ow), nd - 2);
        free(cells);
        int64_t shape[4];
        for (int d = 0; d < nd - 2; d++) shape[d] = ct_size(x, d);
        shape[nd - 2] = oh;
        shape[nd - 1] = ow;
        r = ct_view(s, shape, nd);
    }
    return nn_escape(r);
}

/* (x - mean) * rsqrt(var + eps) * w + b; mean/var NULL: computed over dims (biased);
 * w, b (may be NULL) viewed as param_shape. */
ct_tensor *nn_f_norm(const ct_tensor *x, const int *dims, int ndims, const ct_tensor *mean, const ct_tensor *var,
                     double eps, const ct_tensor *w, const ct_tensor *b, const int64_t *param_shape,
                     int param_ndim) {
    if (!c10_unwrap(x)) return NULL;
    ct_scope_begin();
    if (!mean) mean = ct_mean_dims(x, dims, ndims, true);
    else mean = ct_view(mean, param_shape, param_ndim);
    if (!var) var = ct_var(x, dims, ndims, 0, true);
    else var = ct_view(var, param_shape, param_ndim);
    ct_tensor *y = ct_mul(ct_sub(x, mean), ct_rsqrt(ct_add_scalar(var, eps)));
    if (w) y = ct_mul(y, ct_view(w, param_shape, param_ndim));
    if (b) y = ct_add(y, ct_view(b, param_shape, param_ndim));
    return nn_escape(y);
}

ct_tensor *nn_f_dropout(const ct_tensor *x, double p, bool training) {
    if (!c10_unwrap(x)) return NULL;
    if (p < 0 || p > 1) return c10_error("dropout probability has to be between 0 and 1, but got %g", p);
    if (!training || p == 0) return nn_same(x);
    ct_scope_begin();
    ct_tensor *r;
    if (p == 1) {
        r = ct_mul_scalar(x, 0.0);
    } else {
        ct_tensor *noise = ct_empty_on(ct_sizes(x), ct_ndim(x), ct_dtype_of(x), ct_device_of(x));
        if (noise && ct_bernoulli_(noise, 1 - p) == 0 && ct_div_scalar_(noise, 1 - p) == 0)
            r = ct_mul(x, noise);
        else
            r = NULL;
    }
    return nn_escape(r);
}

ct_tensor *nn_f_reduce(ct_tensor *loss, int reduction) {
    if (reduction == CT_REDUCTION_MEAN) return ct_mean(loss);
    if (reduction == CT_REDUCTION_SUM) return ct_sum(loss);
    return nn_same(loss);
}

/* -logp[target] along dim 1 (or 0 for 1-d input), ignoring ignore_index targets. */
ct_tensor *nn_f_nll(const ct_tensor *logp, const ct_tensor *target, int reduction, int64_t ignore_index) {
    if (!c10_unwrap(logp) || !c10_unwrap(target)) return NULL;
    int nd = ct_ndim(logp);
    if (nd < 1) return c10_error("nll_loss: input tensor should be 1D or 2D");
    if (ct_dtype_of(target) != CT_INT64)
        return c10_error("nll_loss: expected scalar type Long but found %s", c10_dtype_cname(ct_dtype_of(target)));
    int cdim = nd == 1 ? 0 : 1;
    if (nd >= 2 && (ct_ndim(target) != nd - 1 || ct_size(target, 0) != ct_size(logp, 0)))
        return c10_error("nll_loss: Expected input batch_size (%lld) to match target batch_size (%lld).",
                         (long long)ct_size(logp, 0), (long long)(ct_ndim(target) ? ct_size(target, 0) : 1));
    ct_scope_begin();
    ct_tensor *mask = ct_ne_scalar(target, (double)ignore_index);
    ct_tensor *safe = ct_where(mask, target, ct_zeros_like(target));
    /* class indices must be in range */
    int64_t ncls = ct_size(logp, cdim);
    ct_tensor *bad = ct_any(ct_logical_or(ct_lt_scalar(safe, 0), ct_ge_scalar(safe, (double)ncls)));
    if (bad && ct_item(bad) != 0) {
        ct_scope_end();
        return c10_error("nll_loss: Target %s is out of bounds.", "index");
    }
    ct_tensor *idx = ct_unsqueeze(safe, cdim);
    ct_tensor *picked = ct_squeeze(ct_gather(logp, cdim, idx), cdim);
    ct_tensor *fmask = ct_to_dtype(mask, ct_dtype_of(logp));
    ct_tensor *loss = ct_neg(ct_mul(picked, fmask));
    ct_tensor *r;
    if (reduction == CT_REDUCTION_MEAN) r = ct_div(ct_sum(loss), ct_sum(fmask));
    else if (reduction == CT_REDUCTION_SUM) r = ct_sum(loss);
    else r = loss;
    return nn_escape(r);
}
