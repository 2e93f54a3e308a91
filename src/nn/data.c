/* data.c: a dataset of (features, labels) tensors and a loader of (shuffled)
 * batches, like torch.utils.data's TensorDataset and DataLoader. */
#include "nn/nn.h"

struct ct_dataset {
    ct_tensor *x, *y; /* handles of no scope */
    int64_t n;
};

struct ct_dataloader {
    const ct_dataset *ds;
    int64_t batch, pos, epoch;
    bool shuffle, drop_last, started;
    uint64_t seed;
    ct_tensor *perm; /* int64 [n], handle of no scope */
};

ct_dataset *ct_dataset_new(const ct_tensor *features, const ct_tensor *labels) {
    if (!c10_unwrap(features) || !c10_unwrap(labels)) return NULL;
    if (ct_ndim(features) < 1 || ct_ndim(labels) < 1)
        return c10_error("TensorDataset: tensors must have at least one dimension");
    if (ct_size(features, 0) != ct_size(labels, 0)) return c10_error("Size mismatch between tensors");
    ct_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return c10_error("dataset: out of memory");
    ds->x = ct_retain((ct_tensor *)features);
    ds->y = ct_retain((ct_tensor *)labels);
    ds->n = ct_size(features, 0);
    if (!ds->x || !ds->y) {
        ct_dataset_free(ds);
        return NULL;
    }
    return ds;
}

int64_t ct_dataset_size(const ct_dataset *ds) { return ds ? ds->n : c10_error_int("dataset is NULL"); }

void ct_dataset_free(ct_dataset *ds) {
    if (!ds) return;
    ct_free(ds->x);
    ct_free(ds->y);
    free(ds);
}

ct_dataloader *ct_dataloader_new(const ct_dataset *ds, int64_t batch_size, bool shuffle, bool drop_last,
                                 uint64_t seed) {
    if (!ds) return c10_error("dataloader: dataset is NULL");
    if (batch_size <= 0)
        return c10_error("batch_size should be a positive integer value, but got batch_size=%lld",
                         (long long)batch_size);
    ct_dataloader *dl = calloc(1, sizeof *dl);
    if (!dl) return c10_error("dataloader: out of memory");
    dl->ds = ds;
    dl->batch = batch_size;
    dl->shuffle = shuffle;
    dl->drop_last = drop_last;
    dl->seed = seed;
    return dl;
}

int64_t ct_dataloader_num_batches(const ct_dataloader *dl) {
    if (!dl) return c10_error_int("dataloader is NULL");
    int64_t n = dl->ds->n;
    return dl->drop_last ? n / dl->batch : (n + dl->batch - 1) / dl->batch;
}

int ct_dataloader_next(ct_dataloader *dl, ct_tensor **features, ct_tensor **labels) {
    if (!dl || !features || !labels) return c10_error_int("dataloader_next: NULL argument");
    *features = *labels = NULL;
    int64_t n = dl->ds->n;
    if (!dl->started) {
        ct_free(dl->perm);
        dl->perm = NULL;
        if (dl->shuffle) {
            ct_manual_seed(dl->seed + (uint64_t)dl->epoch);
            dl->perm = nn_own(ct_randperm(n, CT_INT64));
            if (!dl->perm) return -1;
        }
        dl->pos = 0;
        dl->started = true;
    }
    int64_t len = n - dl->pos < dl->batch ? n - dl->pos : dl->batch;
    if (len <= 0 || (dl->drop_last && len < dl->batch)) {
        dl->started = false;
        dl->epoch++;
        return 0;
    }
    ct_scope_begin();
    ct_tensor *x, *y;
    if (dl->perm) {
        ct_tensor *idx = ct_narrow(dl->perm, 0, dl->pos, len);
        x = ct_index_select(dl->ds->x, 0, idx);
        y = ct_index_select(dl->ds->y, 0, idx);
    } else {
        x = ct_contiguous(ct_narrow(dl->ds->x, 0, dl->pos, len));
        y = ct_contiguous(ct_narrow(dl->ds->y, 0, dl->pos, len));
    }
    ct_tensor *xo = x ? ct_retain(x) : NULL, *yo = y ? ct_retain(y) : NULL;
    ct_scope_end();
    if (!xo || !yo) {
        ct_free(xo);
        ct_free(yo);
        return -1;
    }
    /* hand them to the caller's scope */
    *features = nn_same(xo);
    *labels = nn_same(yo);
    ct_free(xo);
    ct_free(yo);
    if (!*features || !*labels) return -1;
    dl->pos += len;
    return 1;
}

void ct_dataloader_free(ct_dataloader *dl) {
    if (!dl) return;
    ct_free(dl->perm);
    free(dl);
}
