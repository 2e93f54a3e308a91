/* test_io.c: state dicts, safetensors and .npy: round trips, the reference
 * writer's exact bytes, every malformed-file error, and the fuzz corpus
 * (tests/fuzz/corpus: each file must load or fail with a message, never crash;
 * under CT_SANITIZE this runs with ASan/UBSan on every CI run). */
#include "harness.h"
#include "core/core.h"
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define CORPUS "tests/fuzz/corpus"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int next;
    char *b = buf[next++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static size_t in_use(void) { return ct_memory_stats_get().in_use; }

/* A tensor of `dtype` holding 1, 2, 3, ... (bools alternate). */
static ct_tensor *counting(const int64_t *shape, int ndim, ct_dtype dtype) {
    ct_tensor *f = ct_empty(shape, ndim, CT_FLOAT64);
    int64_t n = ct_numel(f);
    double *d = ct_data_ptr(f);
    for (int64_t i = 0; i < n; i++) d[i] = dtype == CT_BOOL ? (double)(i % 2) : (double)(i + 1);
    ct_tensor *t = ct_empty(shape, ndim, dtype);
    c10_copy_strided(c10_unwrap(t), c10_unwrap(f));
    ct_free(f);
    return t;
}

static bool same_values(const ct_tensor *a, const ct_tensor *b) {
    if (!a || !b || ct_dtype_of(a) != ct_dtype_of(b) || ct_ndim(a) != ct_ndim(b)) return false;
    for (int d = 0; d < ct_ndim(a); d++)
        if (ct_size(a, d) != ct_size(b, d)) return false;
    int64_t n = ct_numel(a);
    size_t bytes = (size_t)n * ct_dtype_size(ct_dtype_of(a));
    char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
    ct_copy_to_buffer(a, x, ct_dtype_of(a));
    ct_copy_to_buffer(b, y, ct_dtype_of(b));
    bool same = memcmp(x, y, bytes) == 0;
    free(x);
    free(y);
    return same;
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

/* A safetensors file from a header text and data bytes. */
static unsigned char *st_bytes(const char *header, const void *data, size_t ndata, size_t *n) {
    size_t h = strlen(header);
    *n = 8 + h + ndata;
    unsigned char *b = malloc(*n + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    if (ndata) memcpy(b + 8 + h, data, ndata);
    return b;
}

/* ------------------------------------------------------------ state dicts */

TEST(state_dict_basics) {
    ct_state_dict *sd = ct_state_dict_new();
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_FLOAT32), *b = ct_zeros(CT_SHAPE(4), CT_INT64);
    CHECK_EQ_INT(ct_state_dict_set(sd, "layer.weight", a), 0);
    CHECK_EQ_INT(ct_state_dict_set(sd, "layer.bias", b), 0);
    CHECK_EQ_INT(ct_state_dict_size(sd), 2);
    CHECK_STR(ct_state_dict_name(sd, 0), "layer.weight");
    CHECK_STR(ct_state_dict_name(sd, 1), "layer.bias");
    CHECK_EQ_INT(ct_state_dict_find(sd, "layer.bias"), 1);
    CHECK_EQ_INT(ct_state_dict_find(sd, "nope"), -1);
    ct_tensor *g = ct_state_dict_get(sd, "layer.weight");
    CHECK(g && ct_shares_storage(g, a)); /* the same tensor, no copy */
    CHECK_ERR(ct_state_dict_get(sd, "nope"), "state_dict_get: no tensor named 'nope'");
    CHECK_ERR(ct_state_dict_name(sd, 2), "out of range");
    CHECK_ERR(ct_state_dict_tensor(sd, -1), "out of range");
    /* replacing keeps the position */
    CHECK_EQ_INT(ct_state_dict_set(sd, "layer.weight", b), 0);
    CHECK_EQ_INT(ct_state_dict_size(sd), 2);
    CHECK(ct_shares_storage(ct_state_dict_tensor(sd, 0), b));
    CHECK_EQ_INT(ct_state_dict_remove(sd, "layer.weight"), 0);
    CHECK_EQ_INT(ct_state_dict_size(sd), 1);
    CHECK_EQ_INT(ct_state_dict_find(sd, "layer.bias"), 0);
    CHECK_ERR_INT(ct_state_dict_remove(sd, "layer.weight"), "no tensor named");
    /* metadata */
    CHECK_EQ_INT(ct_state_dict_set_metadata(sd, "format", "pt"), 0);
    CHECK_EQ_INT(ct_state_dict_set_metadata(sd, "format", "np"), 0);
    CHECK_EQ_INT(ct_state_dict_metadata_size(sd), 1);
    CHECK_STR(ct_state_dict_metadata(sd, "format"), "np");
    CHECK_STR(ct_state_dict_metadata_key(sd, 0), "format");
    CHECK(ct_state_dict_metadata(sd, "other") == NULL);
    /* NULL arguments */
    ct_clear_error();
    CHECK_ERR_INT(ct_state_dict_set(NULL, "x", a), "state dict is NULL");
    CHECK_ERR_INT(ct_state_dict_set(sd, "x", NULL), "NULL");
    ct_state_dict_free(sd);
    ct_state_dict_free(NULL);
}

TEST(state_dict_owns_its_tensors) {
    size_t before = in_use();
    ct_state_dict *sd = ct_state_dict_new();
    ct_scope_begin();
    ct_state_dict_set(sd, "w", ct_full(CT_SHAPE(100), 2.5, CT_FLOAT32));
    ct_scope_end(); /* the handle is gone, the dict's reference is not */
    ct_tensor *w = ct_state_dict_get(sd, "w");
    CHECK(w && ct_numel(w) == 100 && ((const float *)ct_data_ptr(w))[99] == 2.5f);
    ct_free(w);
    ct_state_dict_free(sd);
    CHECK_EQ_INT(in_use(), before);
}

/* Many names: the hash index. */
TEST(state_dict_many) {
    ct_state_dict *sd = ct_state_dict_new();
    ct_tensor *t = ct_zeros(CT_SHAPE(1), CT_FLOAT32);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "p%d", i);
        ct_state_dict_set(sd, name, t);
    }
    CHECK_EQ_INT(ct_state_dict_size(sd), 1000);
    bool ok = true;
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "p%d", i);
        ok &= ct_state_dict_find(sd, name) == i;
    }
    CHECK(ok);
    for (int i = 0; i < 1000; i += 2) {
        snprintf(name, sizeof name, "p%d", i);
        ct_state_dict_remove(sd, name);
    }
    CHECK_EQ_INT(ct_state_dict_size(sd), 500);
    CHECK_EQ_INT(ct_state_dict_find(sd, "p999"), 499);
    CHECK_EQ_INT(ct_state_dict_find(sd, "p998"), -1);
    ct_state_dict_free(sd);
}

/* ------------------------------------------------------------ safetensors */

TEST(safetensors_round_trip_all_dtypes) {
    size_t before = in_use();
    ct_state_dict *sd = ct_state_dict_new();
    char name[32];
    for (int d = 0; d < CT_NUM_DTYPES; d++) {
        snprintf(name, sizeof name, "t_%s", ct_dtype_name((ct_dtype)d));
        ct_state_dict_set(sd, name, counting(CT_SHAPE(2, 3), (ct_dtype)d));
    }
    ct_state_dict_set(sd, "scalar", ct_scalar(7.0));
    ct_state_dict_set(sd, "empty", ct_zeros(CT_SHAPE(0, 4), CT_FLOAT32));
    /* a transposed (non-contiguous) tensor is written row-major */
    TensorImpl *base = c10_unwrap(counting(CT_SHAPE(3, 4), CT_FLOAT32));
    ct_tensor *tr = c10_wrap(c10_transpose(base, 0, 1));
    CHECK(!ct_is_contiguous(tr));
    ct_state_dict_set(sd, "transposed", tr);
    ct_state_dict_set_metadata(sd, "format", "pt");
    ct_state_dict_set_metadata(sd, "note", "quote \" backslash \\ newline \n tab \t \x01 é");
    const char *path = tmp_path("all.safetensors");
    CHECK_EQ_INT(ct_safetensors_save(sd, path), 0);
    ct_state_dict *back = ct_safetensors_load(path);
    CHECK(back != NULL);
    if (back) {
        CHECK_EQ_INT(ct_state_dict_size(back), ct_state_dict_size(sd));
        for (int i = 0; i < ct_state_dict_size(sd); i++) {
            const char *nm = ct_state_dict_name(sd, i);
            ct_tensor *x = ct_state_dict_tensor(sd, i), *y = ct_state_dict_get(back, nm);
            if (!same_values(x, y)) FAIL_AT("tensor %s differs after the round trip", nm);
            if (y && !ct_is_contiguous(y)) FAIL_AT("tensor %s not contiguous", nm);
        }
        /* names come back sorted */
        for (int i = 0; i + 1 < ct_state_dict_size(back); i++)
            CHECK(strcmp(ct_state_dict_name(back, i), ct_state_dict_name(back, i + 1)) < 0);
        CHECK_STR(ct_state_dict_metadata(back, "format"), "pt");
        CHECK_STR(ct_state_dict_metadata(back, "note"), ct_state_dict_metadata(sd, "note"));
        ct_state_dict_free(back);
    }
    /* the buffer writer gives the same bytes as the file writer */
    size_t n1, n2;
    unsigned char *file = read_all(path, &n1);
    void *buf = ct_safetensors_save_buffer(sd, &n2);
    CHECK(file && buf && n1 == n2 && !memcmp(file, buf, n1));
    /* the header is padded to 8 and the data is aligned */
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | file[i];
    CHECK_EQ_INT(hl % 8, 0);
    free(file);
    free(buf);
    ct_state_dict_free(sd);
    ct_scope_end();
    ct_scope_begin();
    CHECK_EQ_INT(in_use(), before);
}

/* The reference implementation's own test vectors (safetensors/src/tensor.rs). */
TEST(safetensors_reference_bytes) {
    static const unsigned char want[] = {
        64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
        116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
        58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
        101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63,
        0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
    float v[6] = {0, 1, 2, 3, 4, 5};
    ct_state_dict *sd = ct_state_dict_new();
    ct_state_dict_set(sd, "attn.0", ct_from_data(v, CT_SHAPE(1, 2, 3), CT_FLOAT32));
    size_t n;
    ct_state_dict *back;
    unsigned char *got = ct_safetensors_save_buffer(sd, &n);
    CHECK(got && n == sizeof want && !memcmp(got, want, n));
    free(got);
    ct_state_dict_free(sd);

    static const unsigned char empty[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
    static const unsigned char meta[] = {
        40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
        95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
        116, 34, 125, 125, 32, 32, 32, 32, 32};
    sd = ct_state_dict_new();
    got = ct_safetensors_save_buffer(sd, &n);
    CHECK(got && n == sizeof empty && !memcmp(got, empty, n));
    free(got);
    back = ct_safetensors_load_buffer(empty, sizeof empty);
    CHECK(back && ct_state_dict_size(back) == 0 && ct_state_dict_metadata_size(back) == 0);
    ct_state_dict_free(back);
    ct_state_dict_set_metadata(sd, "framework", "pt");
    got = ct_safetensors_save_buffer(sd, &n);
    CHECK(got && n == sizeof meta && !memcmp(got, meta, n));
    back = ct_safetensors_load_buffer(got, n);
    CHECK(back && ct_state_dict_size(back) == 0);
    CHECK_STR(ct_state_dict_metadata(back, "framework"), "pt");
    ct_state_dict_free(back);
    free(got);
    ct_state_dict_free(sd);
}

/* The reference writer's order: dtype alignment descending, then name. */
TEST(safetensors_writer_order) {
    ct_state_dict *sd = ct_state_dict_new();
    ct_state_dict_set(sd, "b", ct_zeros(CT_SHAPE(1), CT_UINT8));
    ct_state_dict_set(sd, "a", ct_zeros(CT_SHAPE(1), CT_UINT8));
    ct_state_dict_set(sd, "z", ct_zeros(CT_SHAPE(1), CT_INT64));
    ct_state_dict_set(sd, "y", ct_zeros(CT_SHAPE(1), CT_FLOAT64));
    ct_state_dict_set(sd, "x", ct_zeros(CT_SHAPE(1), CT_FLOAT32));
    ct_state_dict_set(sd, "w", ct_zeros(CT_SHAPE(1), CT_BFLOAT16));
    ct_state_dict_set(sd, "v", ct_zeros(CT_SHAPE(1), CT_BOOL));
    size_t n;
    char *got = ct_safetensors_save_buffer(sd, &n);
    const char *order[] = {"\"z\"", "\"y\"", "\"x\"", "\"w\"", "\"a\"", "\"b\"", "\"v\""};
    const char *prev = got + 8;
    for (int i = 0; i < 7; i++) {
        const char *at = strstr(got + 8, order[i]);
        if (!at || at < prev) FAIL_AT("%s out of order", order[i]);
        prev = at ? at : prev;
    }
    free(got);
    ct_state_dict_free(sd);
}

TEST(safetensors_save_errors) {
    ct_state_dict *sd = ct_state_dict_new();
    ct_state_dict_set(sd, "__metadata__", ct_zeros(CT_SHAPE(1), CT_FLOAT32));
    CHECK_ERR_INT(ct_safetensors_save(sd, tmp_path("x.safetensors")), "cannot be named \"__metadata__\"");
    ct_state_dict_free(sd);
    sd = ct_state_dict_new();
    ct_state_dict_set(sd, "m", ct_empty_on(CT_SHAPE(2), CT_FLOAT32, CT_META));
    CHECK_ERR_INT(ct_safetensors_save(sd, tmp_path("x.safetensors")), "meta device");
    ct_state_dict_free(sd);
    sd = ct_state_dict_new();
    ct_state_dict_set(sd, "bad\xff", ct_zeros(CT_SHAPE(1), CT_FLOAT32));
    CHECK(ct_safetensors_save_buffer(sd, NULL) == NULL);
    CHECK(ct_last_error() && strstr(ct_last_error(), "not valid UTF-8"));
    ct_state_dict_free(sd);
    sd = ct_state_dict_new();
    CHECK_ERR_INT(ct_safetensors_save(sd, "/nonexistent-dir/x.safetensors"), "cannot open '/nonexistent-dir/x.safetensors'");
    CHECK_ERR_INT(ct_safetensors_save(NULL, tmp_path("x")), "state dict is NULL");
    ct_state_dict_free(sd);
    CHECK_ERR(ct_safetensors_load("/nonexistent-dir/x.safetensors"), "safetensors_load: cannot open '/nonexistent-dir/x.safetensors'");
    CHECK_ERR(ct_safetensors_load(tmpdir), "is not a regular file");
}

/* Each malformed file fails with its own message, names the file, leaks nothing. */
TEST(safetensors_malformed) {
    static const struct {
        const char *header;
        size_t ndata;
        const char *error;
    } cases[] = {
        {"not json", 0, "invalid JSON header: expected '{' at byte 0"},
        {"", 0, "invalid JSON header: expected '{' but the text ended"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "invalid JSON header: expected '}'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}", 4, "invalid JSON header"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", 4, "unexpected text after"},
        {"{\"a\":{\"dtype\":\"Q32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': unknown dtype 'Q32'"},
        {"{\"a\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "dtype U16 is not supported by ctorch"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
         "tensor 'a': shape [2] of dtype F32 needs 8 bytes but data_offsets [0, 4] hold 4"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4,
         "tensor 'a': data_offsets [0, 8] run past the end of the data section (4 bytes)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 4, "end before they begin"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 8, "tensor 'b': data_offsets [2, 6] overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "leave a gap after byte 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
         "the tensors cover 4 bytes but the data section holds 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "duplicate tensor name 'a'"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing \"dtype\""},
        {"{\"a\":{}}", 0, "tensor 'a': missing \"dtype\""},
        {"{}}", 0, "unexpected text after"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing \"shape\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a': missing \"data_offsets\""},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "duplicate key \"dtype\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "got a negative number"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "fraction or exponent"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, "leading zero"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4, "integer too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,4]}}", 4, "overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         "shape has more than 16 dimensions"},
        {"{\"a\":{\"dtype\":\"I32\",\"shape\":[0,3333333333333333333,2592],\"data_offsets\":[0,0]}}", 0, "overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "expected ','"},
        {"{\"a\":[1,2]}", 0, "expected '{'"},
        {"{\"a\\u0000b\":{}}", 0, "\\u0000"},
        {"{\"a\\ud800\":{}}", 0, "unpaired surrogate"},
        {"{\"a\\x\":{}}", 0, "invalid escape"},
        {"{\"a\n\":{}}", 0, "unescaped control character"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ values must be strings"},
        {"{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, "duplicate key 'k' in __metadata__"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate key \"__metadata__\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}", 4, "nesting too deep"},
        {"{\"\xc3\x28\":{}}", 0, "not valid UTF-8"},
    };
    float data[2] = {1, 2};
    size_t before = in_use();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        unsigned char *b = st_bytes(cases[i].header, data, cases[i].ndata, &n);
        ct_clear_error();
        ct_state_dict *sd = ct_safetensors_load_buffer(b, n);
        const char *m = ct_last_error();
        if (sd || !m || !strstr(m, cases[i].error) || !strstr(m, "safetensors_load: '<buffer>': "))
            FAIL_AT("case %zu (%s): want \"%s\", got %s", i, cases[i].header, cases[i].error,
                    sd ? "success" : m ? m : "no error");
        ct_state_dict_free(sd);
        free(b);
    }
    CHECK_EQ_INT(in_use(), before);
    /* the file's name is in the message */
    const char *path = tmp_path("bad.safetensors");
    FILE *f = fopen(path, "wb");
    fwrite("\x10\0\0\0\0\0\0\0{}", 1, 10, f);
    fclose(f);
    CHECK_ERR(ct_safetensors_load(path), "header length 16 is past the end of the file (10 bytes)");
    ct_clear_error();
    ct_safetensors_load(path);
    CHECK(ct_last_error() && strstr(ct_last_error(), path));
    /* header lengths: huge, past the end, too small a file */
    unsigned char huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
    CHECK_ERR(ct_safetensors_load_buffer(huge, 16), "exceeds the limit of 100000000 bytes");
    huge[7] = 0;
    huge[0] = 200;
    CHECK_ERR(ct_safetensors_load_buffer(huge, 16), "header length 200 is past the end of the file (16 bytes)");
    CHECK_ERR(ct_safetensors_load_buffer(huge, 5), "too small (5 bytes)");
    CHECK_ERR(ct_safetensors_load_buffer(NULL, 0), "too small (0 bytes)");
    CHECK_ERR(ct_safetensors_load_buffer(NULL, 10), "buffer is NULL");
}

/* Valid unusual files: zero-size tensors sharing offsets, escaped names, unknown
 * keys, whitespace, null metadata, a bool that is not 0/1. */
TEST(safetensors_unusual_valid) {
    const char *hdr =
        " {\"__metadata__\" : null, \"e1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
        "\"e2\":{\"shape\":[2,0],\"dtype\":\"I64\",\"data_offsets\":[0,0], \"extra\": {\"x\": [1, 2.5e3, true, null]}},"
        "\"\\u00e9\\ud83d\\ude00\\n\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]},"
        "\"s\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[3,4]}}   ";
    unsigned char data[4] = {0, 1, 7, 42};
    size_t n;
    unsigned char *b = st_bytes(hdr, data, 4, &n);
    ct_state_dict *sd = ct_safetensors_load_buffer(b, n);
    CHECK(sd != NULL);
    if (sd) {
        CHECK_EQ_INT(ct_state_dict_size(sd), 4);
        CHECK_EQ_INT(ct_state_dict_metadata_size(sd), 0);
        ct_tensor *e2 = ct_state_dict_get(sd, "e2");
        CHECK(e2 && ct_ndim(e2) == 2 && ct_size(e2, 0) == 2 && ct_numel(e2) == 0);
        ct_tensor *bl = ct_state_dict_get(sd, "\xc3\xa9\xf0\x9f\x98\x80\n");
        CHECK(bl && ct_dtype_of(bl) == CT_BOOL);
        if (bl) {
            const unsigned char *p = ct_data_ptr(bl);
            CHECK(p[0] == 0 && p[1] == 1 && p[2] == 1); /* 7 became true */
        }
        ct_tensor *s = ct_state_dict_get(sd, "s");
        CHECK(s && ct_ndim(s) == 0 && ct_item(s) == 42);
        ct_state_dict_free(sd);
    }
    free(b);
}

/* ------------------------------------------------------------------- npy */

TEST(npy_round_trip) {
    size_t before = in_use();
    const char *path = tmp_path("t.npy");
    for (int d = 0; d < CT_NUM_DTYPES; d++) {
        if (d == CT_BFLOAT16) continue;
        ct_tensor *t = counting(CT_SHAPE(3, 2, 2), (ct_dtype)d);
        CHECK_EQ_INT(ct_save_npy(t, path), 0);
        ct_tensor *u = ct_load_npy(path);
        if (!same_values(t, u)) FAIL_AT("dtype %s differs after the round trip", ct_dtype_name((ct_dtype)d));
        size_t n;
        unsigned char *raw = read_all(path, &n);
        unsigned hl = raw[8] | raw[9] << 8;
        CHECK_EQ_INT((10 + hl) % 64, 0);
        CHECK_EQ_INT(raw[10 + hl - 1], '\n');
        free(raw);
    }
    ct_tensor *s = ct_scalar(3.5);
    CHECK_EQ_INT(ct_save_npy(s, path), 0);
    CHECK(same_values(s, ct_load_npy(path)));
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 3), CT_INT32);
    CHECK_EQ_INT(ct_save_npy(e, path), 0);
    CHECK(same_values(e, ct_load_npy(path)));
    ct_tensor *v = ct_zeros(CT_SHAPE(5), CT_FLOAT32);
    CHECK_EQ_INT(ct_save_npy(v, path), 0);
    size_t n;
    char *raw = (char *)read_all(path, &n);
    CHECK(strstr(raw + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }") == raw + 10);
    free(raw);
    TensorImpl *base = c10_unwrap(counting(CT_SHAPE(3, 4), CT_FLOAT64));
    ct_tensor *tr = c10_wrap(c10_transpose(base, 0, 1));
    CHECK_EQ_INT(ct_save_npy(tr, path), 0);
    CHECK(same_values(tr, ct_load_npy(path)));
    CHECK_ERR_INT(ct_save_npy(ct_zeros(CT_SHAPE(2), CT_BFLOAT16), path), "numpy has no bfloat16 dtype");
    CHECK_ERR_INT(ct_save_npy(ct_empty_on(CT_SHAPE(2), CT_FLOAT32, CT_META), path), "meta device");
    CHECK_ERR_INT(ct_save_npy(v, "/nonexistent-dir/x.npy"), "cannot open");
    ct_scope_end();
    ct_scope_begin();
    CHECK_EQ_INT(in_use(), before);
}

static unsigned char *npy_bytes(int major, const char *header, const void *data, size_t ndata, size_t *n) {
    size_t h = strlen(header), pre = major == 1 ? 10 : 12;
    *n = pre + h + ndata;
    unsigned char *b = malloc(*n + 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)(h >> (8 * i));
    memcpy(b + pre, header, h);
    if (ndata) memcpy(b + pre + h, data, ndata);
    return b;
}

TEST(npy_variants) {
    /* fortran order: the data is column-major */
    int32_t col[6] = {1, 4, 2, 5, 3, 6}; /* [[1,2,3],[4,5,6]] */
    size_t n;
    unsigned char *b = npy_bytes(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }\n", col, sizeof col, &n);
    ct_tensor *t = ct_load_npy_buffer(b, n);
    CHECK(t && ct_size(t, 0) == 2 && ct_size(t, 1) == 3 && ct_is_contiguous(t));
    if (t) {
        const int32_t *p = ct_data_ptr(t);
        for (int i = 0; i < 6; i++) CHECK_EQ_INT(p[i], i + 1);
    }
    free(b);
    /* big-endian is swapped; versions 2.0 and 3.0; key order and quotes free */
    unsigned char be[8] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0}; /* 1.0 as big-endian double */
    b = npy_bytes(2, "{\"shape\": (1L,), 'fortran_order': False, 'descr': '>f8'}", be, 8, &n);
    t = ct_load_npy_buffer(b, n);
    CHECK(t && ct_dtype_of(t) == CT_FLOAT64 && ct_item(t) == 1.0);
    free(b);
    b = npy_bytes(3, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }", "\x05", 1, &n);
    t = ct_load_npy_buffer(b, n);
    CHECK(t && ct_dtype_of(t) == CT_BOOL && ct_ndim(t) == 0 && *(unsigned char *)ct_data_ptr(t) == 1);
    free(b);
    /* trailing bytes are ignored, as numpy.load does */
    b = npy_bytes(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", "\x01\x02\x03", 3, &n);
    t = ct_load_npy_buffer(b, n);
    CHECK(t && ct_numel(t) == 2);
    free(b);
}

TEST(npy_malformed) {
    static const struct {
        int major;
        const char *header;
        size_t ndata;
        const char *error;
    } cases[] = {
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20, "shape [2, 3] of '<f4' needs more bytes of data but the file holds 20"},
        {1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8, "dtype descr '<c8' is not supported"},
        {1, "{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }", 8, "dtype descr '<u4' is not supported"},
        {1, "{'descr': 'xyz', 'fortran_order': False, 'shape': (1,), }", 8, "invalid dtype descr 'xyz'"},
        {1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 8, "structured dtypes"},
        {1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", 8, "must be True or False"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 8, "malformed 'shape'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': [1], }", 8, "'shape' must be a tuple"},
        {1, "{'descr': '<f4', 'fortran_order': False, }", 8, "the header lacks 'shape'"},
        {1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8, "duplicate key 'descr'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 8, "unexpected key 'x'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk", 8, "unexpected text after"},
        {1, "['descr']", 8, "not a Python dict literal"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8, "too large"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }", 8, "too many bytes"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }", 8, "more than 16 dimensions"},
        {4, "{}", 0, "unsupported .npy format version 4.0"},
        {1, "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 3333333333333333333, 2592), }", 0, "too many bytes"},
    };
    char data[32] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        unsigned char *b = npy_bytes(cases[i].major, cases[i].header, data, cases[i].ndata, &n);
        ct_clear_error();
        ct_tensor *t = ct_load_npy_buffer(b, n);
        const char *m = ct_last_error();
        if (t || !m || !strstr(m, cases[i].error) || !strstr(m, "load_npy: '<buffer>': "))
            FAIL_AT("case %zu (%s): want \"%s\", got %s", i, cases[i].header, cases[i].error,
                    t ? "success" : m ? m : "no error");
        free(b);
    }
    unsigned char bad[16] = "\x93NUMPX\x01\x00\x02\x00{}";
    CHECK_ERR(ct_load_npy_buffer(bad, 12), "bad magic string");
    memcpy(bad, "\x93NUMPY\x01\x00\xff\x00{}", 12);
    CHECK_ERR(ct_load_npy_buffer(bad, 12), "header length 255 is past the end of the file (12 bytes)");
    CHECK_ERR(ct_load_npy_buffer(bad, 4), "too small (4 bytes)");
    CHECK_ERR(ct_load_npy("/nonexistent-dir/x.npy"), "load_npy: cannot open '/nonexistent-dir/x.npy'");
}

/* ------------------------------------------------------------ the corpus */

/* Every file of the fuzz corpus, through both loaders, from memory and from disk:
 * it loads or fails with a message, and what loads survives a save/load round trip. */
TEST(fuzz_corpus) {
    /* from the source directory (ctest), else next to this file */
    char corpus[1024] = CORPUS;
    DIR *dir = opendir(corpus);
    if (!dir && strrchr(__FILE__, '/')) {
        snprintf(corpus, sizeof corpus, "%.*s/fuzz/corpus", (int)(strrchr(__FILE__, '/') - __FILE__), __FILE__);
        dir = opendir(corpus);
    }
    CHECK(dir != NULL);
    if (!dir) return;
    size_t before = in_use();
    int files = 0, loaded = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.') continue;
        char path[sizeof corpus + sizeof de->d_name + 1]; /* never truncated (gcc -Wformat-truncation) */
        snprintf(path, sizeof path, "%s/%s", corpus, de->d_name);
        size_t n;
        unsigned char *b = read_all(path, &n);
        if (!b) continue;
        files++;
        ct_scope_begin();
        for (int from_file = 0; from_file < 2; from_file++) {
            ct_clear_error();
            ct_state_dict *sd = from_file ? ct_safetensors_load(path) : ct_safetensors_load_buffer(b, n);
            if (!sd && !ct_last_error()) FAIL_AT("%s: safetensors load failed without a message", path);
            if (sd) {
                loaded++;
                size_t m;
                void *again = ct_safetensors_save_buffer(sd, &m);
                ct_state_dict *sd2 = again ? ct_safetensors_load_buffer(again, m) : NULL;
                if (!sd2 || ct_state_dict_size(sd2) != ct_state_dict_size(sd)) FAIL_AT("%s: round trip failed", path);
                for (int i = 0; sd2 && i < ct_state_dict_size(sd); i++)
                    if (!same_values(ct_state_dict_tensor(sd, i), ct_state_dict_get(sd2, ct_state_dict_name(sd, i))))
                        FAIL_AT("%s: tensor %d differs after the round trip", path, i);
                ct_state_dict_free(sd2);
                free(again);
                ct_state_dict_free(sd);
            }
            ct_clear_error();
            ct_tensor *t = from_file ? ct_load_npy(path) : ct_load_npy_buffer(b, n);
            if (!t && !ct_last_error()) FAIL_AT("%s: npy load failed without a message", path);
            if (t) loaded++;
        }
        ct_scope_end();
        free(b);
    }
    closedir(dir);
    ct_clear_error();
    CHECK(files >= 10);
    CHECK(loaded >= 4);
    CHECK_EQ_INT(in_use(), before);
    printf("  corpus: %d files, %d successful loads\n", files, loaded);
}

/* A small deterministic mutation fuzzer over the corpus, so that every ctest run
 * (and the sanitizer build's) pushes some thousands of damaged files through both
 * loaders even where libFuzzer is not available. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 33) % (n ? n : 1);
}

static void mutate(unsigned char *b, size_t *n, size_t cap) {
    static const char *tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "0", "-1", "1e9", "null",
                                   "18446744073709551615", "\\u00", "'", "(", ")", "True"};
    int steps = 1 + (int)rnd(4);
    for (int k = 0; k < steps && *n; k++) {
        size_t at = rnd((uint32_t)*n);
        switch (rnd(5)) {
        case 0: b[at] ^= (unsigned char)(1u << rnd(8)); break;          /* flip a bit */
        case 1: b[at] = (unsigned char)rnd(256); break;                 /* a random byte */
        case 2: *n = at; break;                                         /* truncate */
        case 3: {                                                       /* insert a token */
            const char *t = tokens[rnd(sizeof tokens / sizeof *tokens)];
            size_t len = strlen(t);
            if (*n + len > cap) break;
            memmove(b + at + len, b + at, *n - at);
            memcpy(b + at, t, len);
            *n += len;
            break;
        }
        default: {                                                      /* delete a run */
            size_t len = 1 + rnd(8);
            if (at + len > *n) len = *n - at;
            memmove(b + at, b + at + len, *n - at - len);
            *n -= len;
        }
        }
    }
}

TEST(mutated_corpus) {
    char corpus[1024] = CORPUS;
    DIR *dir = opendir(corpus);
    if (!dir && strrchr(__FILE__, '/')) {
        snprintf(corpus, sizeof corpus, "%.*s/fuzz/corpus", (int)(strrchr(__FILE__, '/') - __FILE__), __FILE__);
        dir = opendir(corpus);
    }
    if (!dir) return;
    size_t before = in_use();
    long runs = 0, loads = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", corpus, de->d_name);
        size_t n0;
        unsigned char *orig = read_all(path, &n0);
        if (!orig) continue;
        size_t cap = n0 + 256;
        unsigned char *b = malloc(cap);
        for (int r = 0; r < 300; r++, runs++) {
            size_t n = n0;
            memcpy(b, orig, n0);
            mutate(b, &n, cap);
            ct_clear_error();
            ct_state_dict *sd = ct_safetensors_load_buffer(b, n);
            if (!sd && !ct_last_error()) FAIL_AT("%s mutation %d: no message", path, r);
            loads += sd != NULL;
            ct_state_dict_free(sd);
            ct_clear_error();
            ct_scope_begin();
            ct_tensor *t = ct_load_npy_buffer(b, n);
            if (!t && !ct_last_error()) FAIL_AT("%s mutation %d: no message", path, r);
            loads += t != NULL;
            ct_scope_end();
        }
        free(b);
        free(orig);
    }
    closedir(dir);
    ct_clear_error();
    CHECK_EQ_INT(in_use(), before);
    printf("  mutations: %ld inputs, %ld loaded\n", runs, loads);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ctorch_test_io_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(state_dict_basics);
    RUN(state_dict_owns_its_tensors);
    RUN(state_dict_many);
    RUN(safetensors_round_trip_all_dtypes);
    RUN(safetensors_reference_bytes);
    RUN(safetensors_writer_order);
    RUN(safetensors_save_errors);
    RUN(safetensors_malformed);
    RUN(safetensors_unusual_valid);
    RUN(npy_round_trip);
    RUN(npy_variants);
    RUN(npy_malformed);
    RUN(fuzz_corpus);
    RUN(mutated_corpus);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return REPORT();
}
