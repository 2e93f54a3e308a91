/* view.c: views as pure geometry (PyTorch's TensorShape.cpp). Each returns a new
 * TensorImpl over the same storage, or NULL with PyTorch's message. The ops layer
 * registers them as ops, the autograd layer gives them backward functions. */
#include "core.h"
#include <stdio.h>

/* stride * step: it overflows only where the dim keeps at most one element (a step
 * past its size), whose stride is then never used: it stays as it was */
static int64_t step_stride(int64_t stride, int64_t step) {
    int64_t r;
    return __builtin_mul_overflow(stride, step, &r) ? stride : r;
}

static TensorImpl *restride(const TensorImpl *t, const int64_t *sizes, const int64_t *strides,
                            int ndim, int64_t offset) {
    return c10_make(t->storage, sizes, strides, ndim, offset, t->dtype);
}

TensorImpl *c10_as_strided(const TensorImpl *t, const int64_t *size, const int64_t *stride, int ndim,
                           int64_t offset) {
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return c10_error("as_strided: number of dimensions (%d) must be in [0, %d]", ndim, CT_MAX_DIMS);
    if (offset < 0)
        return c10_error("as_strided: Tensor: invalid storage offset %lld", (long long)offset);
    int64_t last = offset; /* largest element index reached */
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (size[i] < 0)
            return c10_error("as_strided: Trying to create tensor with negative dimension %lld: %s",
                             (long long)size[i], c10_shape_str(size, ndim));
        if (stride[i] < 0)
            return c10_error("as_strided: Negative strides are not supported at the moment, got strides: %s",
                             c10_shape_str(stride, ndim));
        if (size[i] == 0) empty = true;
        int64_t reach;
        if (__builtin_mul_overflow(size[i] ? size[i] - 1 : 0, stride[i], &reach) ||
            __builtin_add_overflow(last, reach, &last))
            return c10_error("as_strided: size %s and stride %s overflow", c10_shape_str(size, ndim),
                             c10_shape_str(stride, ndim));
    }
    int64_t storage_elems = (int64_t)(t->storage->nbytes / c10_elsize[t->dtype]), numel = 1, bytes;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(numel, size[i], &numel))
            return c10_error("as_strided: numel: integer multiplication overflow");
    if (!empty && __builtin_mul_overflow(last + 1, (int64_t)c10_elsize[t->dtype], &bytes))
        return c10_error("as_strided: Storage size calculation overflowed with sizes=%s and strides=%s",
                         c10_shape_str(size, ndim), c10_shape_str(stride, ndim));
    if (__builtin_mul_overflow(offset, (int64_t)c10_elsize[t->dtype], &bytes))
        return c10_error("as_strided: Tensor: invalid storage offset %lld", (long long)offset);
    if (!empty && last >= storage_elems)
        return c10_error("setStorage: sizes %s, strides %s, storage offset %lld, and itemsize %zu "
                         "requiring a storage size of %lld are out of bounds for storage of size %zu",
                         c10_shape_str(size, ndim), c10_shape_str(stride, ndim), (long long)offset,
                         c10_elsize[t->dtype], (long long)((last + 1) * (int64_t)c10_elsize[t->dtype]),
                         t->storage->nbytes);
    return restride(t, size, stride, ndim, offset);
}

int c10_infer_shape(const char *op, int64_t *shape, int ndim, int64_t numel) {
    int infer = -1;
    int64_t known = 1;
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return c10_error_int("%s: number of dimensions (%d) must be in [0, %d]", op, ndim, CT_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) return c10_error_int("%s: only one dimension can be inferred", op);
            infer = i;
        } else if (shape[i] < 0) {
            return c10_error_int("%s: invalid shape dimension %lld", op, (long long)shape[i]);
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            return c10_error_int("%s: shape '%s' is invalid for input of size %lld", op,
                                 c10_shape_str(shape, ndim), (long long)numel);
        }
    }
    if (infer >= 0 && known == 0 && numel == 0) {
        char shp[256];
        snprintf(shp, sizeof shp, "%s", c10_shape_str(shape, ndim));
        return c10_error_int("%s: cannot reshape tensor of 0 elements into shape %s because the unspecified "
                             "dimension size -1 can be any value and is ambiguous", op, shp);
    }
    if (infer >= 0 && known != 0 && numel % known == 0) {
        shape[infer] = numel / known;
        return 0;
    }
    if (infer < 0 && known == numel) return 0;
    /* PyTorch prints the shape as the user gave it, with the -1. */
    return c10_error_int("%s: shape '%s' is invalid for input of size %lld", op, c10_shape_str(shape, ndim),
                         (long long)numel);
}

/* PyTorch's computeStride: can t's memory be seen as `shape` without a copy?
 * Walk both shapes from the right, matching chunks of t's dims that are
 * contiguous with each other. */
bool c10_view_strides(const TensorImpl *t, const int64_t *shape, int ndim, int64_t *out) {
    if (t->numel == 0 && ndim == t->ndim && !memcmp(shape, t->sizes, (size_t)ndim * sizeof *shape)) {
        if (ndim) memcpy(out, t->strides, (size_t)ndim * sizeof *out); /* same shape: keep them, as torch */
        return true;
    }
    if (t->numel == 0 || t->ndim == 0) { /* any strides do; use contiguous ones */
        int64_t st = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            out[i] = st;
            st *= shape[i] ? shape[i] : 1;
        }
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base_stride = t->ndim ? t->strides[t->ndim - 1] : 1;
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tensor_numel *= t->sizes[d];
        if (d == 0 || (t->sizes[d - 1] != 1 && t->strides[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                out[view_d] = view_numel * chunk_base_stride;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base_stride = t->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

TensorImpl *c10_view(const TensorImpl *t, const int64_t *shape_in, int ndim) {
    int64_t shape[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return c10_error("view: number of dimensions (%d) must be in [0, %d]", ndim, CT_MAX_DIMS);
    if (ndim) memcpy(shape, shape_in, (size_t)ndim * sizeof *shape);
    if (c10_infer_shape("view", shape, ndim, t->numel) < 0) return NULL;
    if (!c10_view_strides(t, shape, ndim, strides))
        return c10_error("view size is not compatible with input tensor's size and stride (at least one "
                         "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
    return restride(t, shape, strides, ndim, t->offset);
}

TensorImpl *c10_slice(const TensorImpl *t, int dim, int64_t start, int64_t end, int64_t step) {
    if (t->ndim == 0) return c10_error("slice() cannot be applied to a 0-dim tensor.");
    int d = c10_wrap_dim(dim, t->ndim);
    if (d < 0) return NULL;
    if (step <= 0) return c10_error("slice step must be positive");
    int64_t n = t->sizes[d];
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (start < 0) start = 0;
    else if (start > n) start = n;
    if (end < start) end = start;
    else if (end > n) end = n;
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    sizes[d] = end > start ? (end - start - 1) / step + 1 : 0;
    strides[d] = step_stride(t->strides[d], step);
    int64_t off;
    if (__builtin_mul_overflow(start, t->strides[d], &off) || __builtin_add_overflow(off, t->offset, &off))
        off = t->offset; /* start == size of a dim with a huge stride: an empty view */
    return restride(t, sizes, strides, t->ndim, off);
}

int c10_narrow_check(int64_t cur, int64_t *start, int64_t length) {
    int64_t s = *start, n = cur ? cur : 1; /* torch 1.13 wraps start as a dim (a size of 0 as 1) */
    if (s != cur) {                        /* start == size is valid (an empty narrow), not a dim to wrap */
        if (s < -n || s >= n)
            return c10_error_int("Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                                 (long long)-n, (long long)(n - 1), (long long)s);
        if (s < 0) s += n;
    }
    if (length < 0 || s > cur - length)
        return c10_error_int("start (%lld) + length (%lld) exceeds dimension size (%lld).", (long long)s,
                             (long long)length, (long long)cur);
    *start = s;
    return 0;
}

TensorImpl *c10_narrow(const TensorImpl *t, int dim, int64_t start, int64_t length) {
    if (t->ndim == 0) return c10_error("narrow() cannot be applied to a 0-dim tensor.");
    int d = c10_wrap_dim(dim, t->ndim);
    if (d < 0 || c10_narrow_check(t->sizes[d], &start, length) < 0) return NULL;
    return c10_slice(t, d, start, start + length, 1);
}

TensorImpl *c10_select(const TensorImpl *t, int dim, int64_t index) {
    if (t->ndim == 0) return c10_error("select() cannot be applied to a 0-dim tensor.");
    int d = c10_wrap_dim(dim, t->ndim);
    if (d < 0) return NULL;
    int64_t n = t->sizes[d];
    if (index < -n || index >= n)
        return c10_error("select(): index %lld out of range for tensor of size %s at dimension %d",
                         (long long)index, c10_shape_str(t->sizes, t->ndim), d);
    if (index < 0) index += n;
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++)
        if (i != d) {
            sizes[j] = t->sizes[i];
            strides[j++] = t->strides[i];
        }
    return restride(t, sizes, strides, t->ndim - 1, t->offset + index * t->strides[d]);
}

TensorImpl *c10_transpose(const TensorImpl *t, int dim0, int dim1) {
    int a = c10_wrap_dim(dim0, t->ndim), b = a < 0 ? -1 : c10_wrap_dim(dim1, t->ndim);
    if (b < 0) return NULL;
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    if (t->ndim) {
        sizes[a] = t->sizes[b], sizes[b] = t->sizes[a];
        strides[a] = t->strides[b], strides[b] = t->strides[a];
    }
    return restride(t, sizes, strides, t->ndim, t->offset);
}

TensorImpl *c10_permute(const TensorImpl *t, const int64_t *dims, int ndim) {
    if (ndim != t->ndim)
        return c10_error("permute(sparse_coo): number of dimensions in the tensor input does not match the "
                         "length of the desired ordering of dimensions i.e. input.dim() = %d is not equal to "
                         "len(dims) = %d", t->ndim, ndim);
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    bool seen[CT_MAX_DIMS] = {false};
    for (int i = 0; i < ndim; i++) {
        int d = c10_wrap_dim(dims[i], t->ndim);
        if (d < 0) return NULL;
        if (seen[d]) return c10_error("permute(): duplicate dims are not allowed.");
        seen[d] = true;
        sizes[i] = t->sizes[d];
        strides[i] = t->strides[d];
    }
    return restride(t, sizes, strides, ndim, t->offset);
}

TensorImpl *c10_expand(const TensorImpl *t, const int64_t *shape, int ndim) {
    if (ndim < t->ndim) { /* torch's toString: a legacy name for the CPU types that have one */
        const char *n = c10_dtype_cname(t->dtype);
        bool legacy = t->device == CT_CPU && t->dtype != CT_BOOL && t->dtype != CT_BFLOAT16;
        return c10_error("expand(%s%s%s{%s}, size=%s): the number of sizes provided (%d) must be greater or "
                         "equal to the number of dimensions in the tensor (%d)",
                         legacy ? "torch." : t->device == CT_META ? "Meta" : "CPU", n, legacy ? "Tensor" : "Type",
                         c10_shape_str(t->sizes, t->ndim), c10_shape_str(shape, ndim), ndim, t->ndim);
    }
    if (ndim > CT_MAX_DIMS)
        return c10_error("expand: number of dimensions (%d) must be at most %d", ndim, CT_MAX_DIMS);
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    for (int i = ndim - 1; i >= 0; i--) {
        int off = ndim - 1 - i, d = t->ndim - 1 - off;
        /* a new leading dim gets the stride it would have if contiguous (PyTorch's
         * inferExpandGeometry); every dim of an expanded 0-dim tensor gets 0 */
        int64_t size = d >= 0 ? t->sizes[d] : 1,
                stride = d >= 0 ? t->strides[d] : (i == ndim - 1 ? 0 : sizes[i + 1] * strides[i + 1]);
        int64_t target = shape[i];
        if (target == -1) {
            if (d < 0)
                return c10_error("The expanded size of the tensor (-1) isn't allowed in a leading, "
                                 "non-existing dimension %d", i);
            target = size;
        }
        if (target < 0)
            return c10_error("Trying to create tensor with negative dimension %lld: %s", (long long)target,
                             c10_shape_str(shape, ndim));
        if (size != target) {
            if (size != 1)
                return c10_error("The expanded size of the tensor (%lld) must match the existing size (%lld) at "
                                 "non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                                 (long long)target, (long long)size, i, c10_shape_str(shape, ndim),
                                 c10_shape_str(t->sizes, t->ndim));
            stride = 0;
        }
        sizes[i] = target;
        strides[i] = stride;
    }
    return restride(t, sizes, strides, ndim, t->offset);
}

TensorImpl *c10_squeeze(const TensorImpl *t, int dim) {
    int d = -1;
    if (dim != CT_MAX_DIMS && (d = c10_wrap_dim(dim, t->ndim)) < 0) return NULL;
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        bool drop = t->sizes[i] == 1 && (d < 0 || i == d);
        if (!drop) {
            sizes[n] = t->sizes[i];
            strides[n++] = t->strides[i];
        }
    }
    return restride(t, sizes, strides, n, t->offset);
}

TensorImpl *c10_unsqueeze(const TensorImpl *t, int dim) {
    int d = c10_wrap_dim(dim, t->ndim + 1);
    if (d < 0) return NULL;
    if (t->ndim + 1 > CT_MAX_DIMS)
        return c10_error("unsqueeze: tensors have at most %d dimensions", CT_MAX_DIMS);
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            strides[i] = d < t->ndim ? t->sizes[d] * t->strides[d] : 1;
        } else {
            sizes[i] = t->sizes[j];
            strides[i] = t->strides[j++];
        }
    }
    return restride(t, sizes, strides, t->ndim + 1, t->offset);
}

TensorImpl *c10_diagonal(const TensorImpl *t, int64_t offset, int dim1, int dim2) {
    int a = c10_wrap_dim(dim1, t->ndim), b = a < 0 ? -1 : c10_wrap_dim(dim2, t->ndim);
    if (b < 0) return NULL;
    if (a == b) return c10_error("diagonal dimensions cannot be identical %d, %d", dim1, dim2);
    int64_t len, start = t->offset;
    if (offset >= 0) {
        len = t->sizes[a] < t->sizes[b] - offset ? t->sizes[a] : t->sizes[b] - offset;
        if (len < 0) len = 0;
        else start += offset * t->strides[b];
    } else {
        len = t->sizes[a] + offset < t->sizes[b] ? t->sizes[a] + offset : t->sizes[b];
        if (len < 0) len = 0;
        else start -= offset * t->strides[a];
    }
    if (len == 0) start = t->offset;
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != a && i != b) {
            sizes[n] = t->sizes[i];
            strides[n++] = t->strides[i];
        }
    sizes[n] = len;
    strides[n++] = t->strides[a] + t->strides[b];
    return restride(t, sizes, strides, n, start);
}

TensorImpl *c10_unfold(const TensorImpl *t, int dim, int64_t size, int64_t step) {
    int d = c10_wrap_dim(dim, t->ndim);
    if (d < 0) return NULL;
    int64_t max = t->ndim ? t->sizes[d] : 1;
    if (size > max)
        return c10_error("maximum size for tensor at dimension %d is %lld but size is %lld", d, (long long)max,
                         (long long)size);
    if (size < 0) return c10_error("size is %lld but must be >= 0", (long long)size);
    if (step <= 0) return c10_error("step is %lld but must be > 0", (long long)step);
    if (t->ndim + 1 > CT_MAX_DIMS) return c10_error("unfold: tensors have at most %d dimensions", CT_MAX_DIMS);
    int64_t sizes[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        sizes[i] = t->sizes[i];
        strides[i] = t->strides[i];
    }
    int n = t->ndim;
    if (n) {
        sizes[d] = (t->sizes[d] - size) / step + 1;
        strides[d] = step_stride(t->strides[d], step);
    }
    sizes[n] = size;
    strides[n] = n ? t->strides[d] : 1;
    return restride(t, sizes, strides, n + 1, t->offset);
}

int c10_broadcast_shape(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out) {
    int n = na > nb ? na : nb;
    for (int i = n - 1; i >= 0; i--) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return c10_error_int("The size of tensor a (%lld) must match the size of tensor b (%lld) at "
                                 "non-singleton dimension %d", (long long)sa, (long long)sb, i);
        out[i] = sa == 1 ? sb : sa;
    }
    return n;
}
