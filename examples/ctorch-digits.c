/*
 * ctorch-digits: trains a small CNN on the UCI handwritten digits (1,797 8x8
 * images, data/digits.csv.gz) with ctorch, end to end:
 *
 *   ctorch-digits [train] [--epochs N] [--data PATH] [--out model.safetensors] [--svg curves.svg]
 *   ctorch-digits predict model.safetensors [rows.csv]     (rows on stdin without a file)
 *
 * Training: a seeded 80/20 train/test split (randperm after ct_manual_seed(0)),
 * pixels scaled to [0, 1] as 1x8x8 images, the CNN
 *     Conv2d(1, 16, 3, padding=1) ReLU Conv2d(16, 32, 3, padding=1) ReLU
 *     MaxPool2d(2) Flatten Linear(512, 10)
 * trained with Adam (lr 2e-3, batch 32, 15 epochs), a live progress bar per epoch on stderr,
 * the test accuracy after each epoch, the model saved as safetensors and the
 * training curves written as an SVG. bench/train_digits_torch.py trains the same
 * model on the same split with PyTorch.
 *
 * The data is gzip (RFC 1952) around deflate (RFC 1951): a small inflater below,
 * so that nothing beyond libc is needed to read it.
 */
#include <ctorch.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ================================================================ inflate */
typedef struct {
    const uint8_t *in;
    size_t inlen, pos;
    uint32_t bitbuf;
    int bitcnt;
    uint8_t *out;
    size_t outlen, outcap;
    int err;
} Inflate;

static int getbit(Inflate *s) {
    if (s->bitcnt == 0) {
        if (s->pos >= s->inlen) {
            s->err = 1;
            return 0;
        }
        s->bitbuf = s->in[s->pos++];
        s->bitcnt = 8;
    }
    int b = (int)(s->bitbuf & 1);
    s->bitbuf >>= 1;
    s->bitcnt--;
    return b;
}

static uint32_t getbits(Inflate *s, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint32_t)getbit(s) << i;
    return v;
}

static int put(Inflate *s, uint8_t b) {
    if (s->outlen == s->outcap) {
        size_t nc = s->outcap ? s->outcap * 2 : 1 << 16;
        uint8_t *p = realloc(s->out, nc);
        if (!p) return s->err = 1, -1;
        s->out = p;
        s->outcap = nc;
    }
    s->out[s->outlen++] = b;
    return 0;
}

/* A canonical Huffman code: counts per length and symbols sorted by code. */
typedef struct {
    short count[16];
    short symbol[288];
} Huff;

static int huff_build(Huff *h, const uint8_t *lengths, int n) {
    memset(h->count, 0, sizeof h->count);
    for (int i = 0; i < n; i++) h->count[lengths[i]]++;
    h->count[0] = 0;
    int left = 1;
    for (int len = 1; len < 16; len++) {
        left <<= 1;
        left -= h->count[len];
        if (left < 0) return -1; /* over-subscribed */
    }
    short offs[16];
    offs[1] = 0;
    for (int len = 1; len < 15; len++) offs[len + 1] = (short)(offs[len] + h->count[len]);
    for (int i = 0; i < n; i++)
        if (lengths[i]) h->symbol[offs[lengths[i]]++] = (short)i;
    return 0;
}

static int huff_decode(Inflate *s, const Huff *h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len < 16; len++) {
        code |= getbit(s);
        int count = h->count[len];
        if (code - count < first) return h->symbol[index + (code - first)];
        index += count;
        first += count;
        first <<= 1;
        code <<= 1;
        if (s->err) return -1;
    }
    s->err = 1;
    return -1;
}

static const short len_base[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
                                   35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const short len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const short dist_base[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
                                    257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const short dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6,
                                     7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static int inflate_codes(Inflate *s, const Huff *lit, const Huff *dist) {
    for (;;) {
        int sym = huff_decode(s, lit);
        if (sym < 0 || s->err) return -1;
        if (sym < 256) {
            if (put(s, (uint8_t)sym) < 0) return -1;
        } else if (sym == 256) {
            return 0;
        } else {
            sym -= 257;
            if (sym >= 29) return -1;
            size_t len = (size_t)len_base[sym] + getbits(s, len_extra[sym]);
            int ds = huff_decode(s, dist);
            if (ds < 0 || ds >= 30) return -1;
            size_t d = (size_t)dist_base[ds] + getbits(s, dist_extra[ds]);
            if (s->err || d > s->outlen) return -1;
            for (size_t i = 0; i < len; i++)
                if (put(s, s->out[s->outlen - d]) < 0) return -1;
        }
    }
}

static int inflate_block_dynamic(Inflate *s) {
    static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    int nlen = (int)getbits(s, 5) + 257, ndist = (int)getbits(s, 5) + 1, ncode = (int)getbits(s, 4) + 4;
    if (nlen > 286 || ndist > 30) return -1;
    uint8_t lengths[320] = {0};
    for (int i = 0; i < ncode; i++) lengths[order[i]] = (uint8_t)getbits(s, 3);
    Huff lencode, lit, dist;
    if (huff_build(&lencode, lengths, 19) < 0) return -1;
    int idx = 0;
    memset(lengths, 0, sizeof lengths);
    while (idx < nlen + ndist) {
        int sym = huff_decode(s, &lencode);
        if (sym < 0 || s->err) return -1;
        if (sym < 16) {
            lengths[idx++] = (uint8_t)sym;
        } else {
            int rep, val = 0;
            if (sym == 16) {
                if (idx == 0) return -1;
                val = lengths[idx - 1];
                rep = 3 + (int)getbits(s, 2);
            } else if (sym == 17) {
                rep = 3 + (int)getbits(s, 3);
            } else {
                rep = 11 + (int)getbits(s, 7);
            }
            if (idx + rep > nlen + ndist) return -1;
            while (rep--) lengths[idx++] = (uint8_t)val;
        }
    }
    if (lengths[256] == 0) return -1;
    if (huff_build(&lit, lengths, nlen) < 0 || huff_build(&dist, lengths + nlen, ndist) < 0) return -1;
    return inflate_codes(s, &lit, &dist);
}

static int inflate_block_fixed(Inflate *s) {
    static Huff lit, dist;
    static int ready;
    if (!ready) {
        uint8_t l[288];
        for (int i = 0; i < 144; i++) l[i] = 8;
        for (int i = 144; i < 256; i++) l[i] = 9;
        for (int i = 256; i < 280; i++) l[i] = 7;
        for (int i = 280; i < 288; i++) l[i] = 8;
        huff_build(&lit, l, 288);
        for (int i = 0; i < 30; i++) l[i] = 5;
        huff_build(&dist, l, 30);
        ready = 1;
    }
    return inflate_codes(s, &lit, &dist);
}

static int inflate_block_stored(Inflate *s) {
    s->bitbuf = 0;
    s->bitcnt = 0; /* to a byte boundary */
    if (s->pos + 4 > s->inlen) return -1;
    unsigned len = s->in[s->pos] | (unsigned)s->in[s->pos + 1] << 8;
    unsigned nlen = s->in[s->pos + 2] | (unsigned)s->in[s->pos + 3] << 8;
    s->pos += 4;
    if ((len ^ 0xffffu) != nlen || s->pos + len > s->inlen) return -1;
    for (unsigned i = 0; i < len; i++)
        if (put(s, s->in[s->pos++]) < 0) return -1;
    return 0;
}

/* Inflates a whole gzip file (all members) into a new malloc'ed buffer. */
static uint8_t *gunzip(const uint8_t *in, size_t n, size_t *outlen) {
    Inflate s = {.in = in, .inlen = n};
    while (s.pos < n) {
        if (s.pos + 10 > n || in[s.pos] != 0x1f || in[s.pos + 1] != 0x8b || in[s.pos + 2] != 8) goto bad;
        int flg = in[s.pos + 3];
        s.pos += 10;
        if (flg & 4) { /* FEXTRA */
            if (s.pos + 2 > n) goto bad;
            s.pos += 2 + (in[s.pos] | (size_t)in[s.pos + 1] << 8);
        }
        if (flg & 8) while (s.pos < n && in[s.pos++]) {} /* FNAME */
        if (flg & 16) while (s.pos < n && in[s.pos++]) {} /* FCOMMENT */
        if (flg & 2) s.pos += 2;                          /* FHCRC */
        if (s.pos > n) goto bad;
        s.bitcnt = 0;
        int last;
        do {
            last = getbit(&s);
            int type = (int)getbits(&s, 2);
            int r = type == 0 ? inflate_block_stored(&s) : type == 1 ? inflate_block_fixed(&s)
                  : type == 2 ? inflate_block_dynamic(&s) : -1;
            if (r < 0 || s.err) goto bad;
        } while (!last);
        s.bitcnt = 0;
        s.pos += 8; /* CRC32, ISIZE */
        if (s.pos > n) goto bad;
    }
    *outlen = s.outlen;
    return s.out;
bad:
    free(s.out);
    return NULL;
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    *n = len;
    return buf;
}

/* ================================================================ data */
#define NPIX 64

/* Parses rows of numbers (64 pixels, then the label when with_label) into x/y. */
static int parse_rows(const char *text, size_t len, float **xs, int64_t **ys, int64_t *nrows, int min_cols) {
    size_t cap = 256;
    int64_t n = 0;
    float *x = malloc(cap * NPIX * sizeof *x);
    int64_t *y = malloc(cap * sizeof *y);
    const char *p = text, *end = text + len;
    while (p < end && x && y) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        double vals[NPIX + 1];
        int nv = 0;
        const char *q = p;
        while (q < eol && nv < NPIX + 1) {
            while (q < eol && (*q == ' ' || *q == '\t' || *q == ',' || *q == '\r')) q++;
            if (q >= eol) break;
            char *e;
            vals[nv] = strtod(q, &e);
            if (e == q) break;
            nv++;
            q = e;
        }
        if (nv > 0) {
            if (nv < min_cols) {
                fprintf(stderr, "ctorch-digits: row %lld has %d values, expected %d\n", (long long)n + 1, nv,
                        min_cols);
                free(x);
                free(y);
                return -1;
            }
            if ((size_t)n == cap) {
                cap *= 2;
                float *nx = realloc(x, cap * NPIX * sizeof *x);
                int64_t *ny = realloc(y, cap * sizeof *y);
                if (nx) x = nx;
                if (ny) y = ny;
                if (!nx || !ny) break;
            }
            for (int i = 0; i < NPIX; i++) x[n * NPIX + i] = (float)(vals[i] / 16.0);
            y[n] = nv > NPIX ? (int64_t)vals[NPIX] : -1;
            n++;
        }
        p = eol + 1;
    }
    *xs = x;
    *ys = y;
    *nrows = n;
    return x && y ? 0 : -1;
}

/* ================================================================ model */
static ct_module *make_model(void) {
    ct_module *layers[] = {
        ct_nn_conv2d(1, 16, 3, 1, 1, 1, 1, true),
        ct_nn_relu(),
        ct_nn_conv2d(16, 32, 3, 1, 1, 1, 1, true),
        ct_nn_relu(),
        ct_nn_max_pool2d(2, 2, 0),
        ct_nn_flatten(1, -1),
        ct_nn_linear(32 * 4 * 4, 10, true),
    };
    return ct_nn_sequential(layers, 7);
}

static void die(const char *what) {
    fprintf(stderr, "ctorch-digits: %s: %s\n", what, ct_last_error() ? ct_last_error() : "failed");
    exit(1);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Number of rows of logits whose argmax equals the label. */
static int64_t count_correct(const ct_tensor *logits, const ct_tensor *labels) {
    ct_scope_begin();
    ct_tensor *hit = ct_sum(ct_eq(ct_argmax(logits, true, 1, false), labels));
    int64_t c = hit ? (int64_t)ct_item(hit) : 0;
    ct_scope_end();
    return c;
}

/* Loss and accuracy of the model over (x, y), in eval mode without grad. */
static void evaluate(ct_module *model, ct_module *loss_fn, const ct_tensor *x, const ct_tensor *y, double *loss,
                     double *acc) {
    bool prev = ct_set_grad_enabled(false);
    ct_module_eval(model);
    ct_scope_begin();
    ct_tensor *logits = ct_module_forward(model, x);
    ct_tensor *l = ct_module_forward2(loss_fn, logits, y);
    if (!l) die("evaluate");
    *loss = ct_item(l);
    *acc = (double)count_correct(logits, y) / (double)ct_size(y, 0);
    ct_scope_end();
    ct_module_train(model, true);
    ct_set_grad_enabled(prev);
}

/* ================================================================ SVG */
static void svg_panel(FILE *f, double x0, double y0, double w, double h, const char *title, const double *a,
                      const double *b, int n, const char *la, const char *lb, bool percent) {
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        lo = fmin(lo, fmin(a[i], b[i]));
        hi = fmax(hi, fmax(a[i], b[i]));
    }
    if (percent) hi = fmin(1.0, hi + 0.02), lo = fmax(0.0, lo - 0.02);
    else lo = 0, hi *= 1.05;
    if (hi <= lo) hi = lo + 1;
    double L = x0 + 55, R = x0 + w - 15, T = y0 + 35, B = y0 + h - 40;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" text-anchor=\"middle\">%s</text>\n", (L + R) / 2, y0 + 20,
            title);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L, B, R, B);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L, T, L, B);
    for (int k = 0; k <= 4; k++) { /* y ticks */
        double v = lo + (hi - lo) * k / 4, yy = B - (B - T) * k / 4;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, yy, R, yy);
        if (percent)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.0f%%</text>\n", L - 5,
                    yy + 4, 100 * v);
        else
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.2f</text>\n", L - 5, yy + 4,
                    v);
    }
    for (int i = 0; i < n; i++) { /* x ticks: epochs */
        double xx = n > 1 ? L + (R - L) * i / (n - 1) : (L + R) / 2;
        if (n <= 20 || i % ((n + 9) / 10) == 0 || i == n - 1)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%d</text>\n", xx, B + 15,
                    i + 1);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">epoch</text>\n", (L + R) / 2,
            B + 32);
    const double *series[2] = {a, b};
    const char *colors[2] = {"#1f77b4", "#d62728"}, *labels[2] = {la, lb};
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colors[s]);
        for (int i = 0; i < n; i++) {
            double xx = n > 1 ? L + (R - L) * i / (n - 1) : (L + R) / 2;
            double yy = B - (B - T) * (series[s][i] - lo) / (hi - lo);
            fprintf(f, "%.1f,%.1f ", xx, yy);
        }
        fprintf(f, "\"/>\n");
        double ly = (percent ? B - 40 : T + 8) + 18 * s, lx = R - 110; /* away from the curves */
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", lx, ly,
                lx + 22, ly, colors[s]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", lx + 28, ly + 4, labels[s]);
    }
}

static int write_svg(const char *path, const double *trl, const double *tel, const double *tra, const double *tea,
                     int n) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"340\" font-family=\"sans-serif\">\n");
    fprintf(f, "<rect width=\"900\" height=\"340\" fill=\"white\"/>\n");
    svg_panel(f, 0, 0, 450, 340, "Cross-entropy loss", trl, tel, n, "train", "test", false);
    svg_panel(f, 450, 0, 450, 340, "Accuracy", tra, tea, n, "train", "test", true);
    fprintf(f, "</svg>\n");
    return fclose(f);
}

/* ================================================================ modes */
static const char *find_data(const char *given) {
    static const char *const candidates[] = {"data/digits.csv.gz", "../data/digits.csv.gz", "../../data/digits.csv.gz"};
    if (given) return given;
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++)
        if (access(candidates[i], R_OK) == 0) return candidates[i];
    return candidates[0];
}

static void progress(bool tty, int epoch, int epochs, int64_t i, int64_t n, double loss, double acc, double secs) {
    if (!tty) return;
    int width = 24, done = (int)(width * i / n);
    char bar[32];
    for (int k = 0; k < width; k++) bar[k] = k < done ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\repoch %2d/%d [%s] batch %3lld/%lld  loss %.4f  acc %5.1f%%  %.1fs ", epoch, epochs, bar,
            (long long)i, (long long)n, loss, 100 * acc, secs);
    fflush(stderr);
}

static int train(int epochs, double lr, int64_t batch, const char *data, const char *out, const char *svg) {
    size_t gzlen, rawlen;
    uint8_t *gz = read_file(data, &gzlen);
    if (!gz) {
        fprintf(stderr, "ctorch-digits: cannot read %s\n", data);
        return 1;
    }
    char *raw = (char *)gunzip(gz, gzlen, &rawlen);
    free(gz);
    if (!raw) {
        fprintf(stderr, "ctorch-digits: %s is not a valid gzip file\n", data);
        return 1;
    }
    float *xs;
    int64_t *ys, n;
    int parsed = parse_rows(raw, rawlen, &xs, &ys, &n, NPIX + 1);
    free(raw);
    if (parsed < 0) return 1;
    for (int64_t i = 0; i < n; i++)
        if (ys[i] < 0 || ys[i] > 9) {
            fprintf(stderr, "ctorch-digits: row %lld of %s: label %lld is not a digit\n", (long long)i + 1, data,
                    (long long)ys[i]);
            n = -1;
            break;
        }
    if (n < 10) {
        if (n >= 0) fprintf(stderr, "ctorch-digits: %s has %lld rows of 65 numbers; need at least 10\n", data, (long long)n);
        free(xs);
        free(ys);
        return 1;
    }
    printf("ctorch-digits: %lld images of 8x8 digits from %s\n", (long long)n, data);

    ct_scope_begin();
    ct_tensor *X = ct_from_data(xs, CT_SHAPE(n, 1, 8, 8), CT_FLOAT32);
    ct_tensor *Y = ct_from_data(ys, CT_SHAPE(n), CT_INT64);
    free(xs);
    free(ys);
    ct_manual_seed(0);
    ct_tensor *perm = ct_randperm(n, CT_INT64);
    int64_t ntrain = n * 8 / 10, ntest = n - ntrain;
    ct_tensor *tr_idx = ct_narrow(perm, 0, 0, ntrain), *te_idx = ct_narrow(perm, 0, ntrain, ntest);
    ct_tensor *Xtr = ct_index_select(X, 0, tr_idx), *Ytr = ct_index_select(Y, 0, tr_idx);
    ct_tensor *Xte = ct_index_select(X, 0, te_idx), *Yte = ct_index_select(Y, 0, te_idx);
    if (!Xtr || !Xte) die("split");
    printf("split (seed 0): %lld train, %lld test\n", (long long)ntrain, (long long)ntest);

    ct_module *model = make_model();
    ct_module *loss_fn = ct_nn_cross_entropy_loss(CT_REDUCTION_MEAN);
    if (!model || !loss_fn) die("model");
    ct_module_print(model);
    printf("%lld parameters\n", (long long)ct_module_num_parameters(model));
    ct_tensor *params[16];
    int np = ct_module_named_parameters(model, NULL, params, 16);
    ct_optimizer *opt = ct_optim_adam(params, np, lr, 0.9, 0.999, 1e-8, 0, false);
    ct_dataset *ds = ct_dataset_new(Xtr, Ytr);
    ct_dataloader *dl = ct_dataloader_new(ds, batch, true, false, 1);
    if (!opt || !ds || !dl) die("optimizer");
    int64_t nb = ct_dataloader_num_batches(dl);
    bool tty = isatty(2);
    double *curves = calloc((size_t)epochs * 4, sizeof *curves);
    double *trl = curves, *tel = curves + epochs, *tra = curves + 2 * epochs, *tea = curves + 3 * epochs;
    double t0 = now();
    for (int e = 0; e < epochs; e++) {
        double te0 = now(), sum_loss = 0;
        int64_t seen = 0, correct = 0, i = 0;
        ct_tensor *xb, *yb;
        ct_scope_begin();
        int r;
        while ((r = ct_dataloader_next(dl, &xb, &yb)) == 1) {
            ct_scope_begin();
            ct_tensor *logits = ct_module_forward(model, xb);
            ct_tensor *loss = ct_module_forward2(loss_fn, logits, yb);
            if (!loss || ct_optimizer_zero_grad(opt, true) < 0 || ct_backward(loss, NULL) < 0 ||
                ct_optimizer_step(opt) < 0)
                die("training step");
            int64_t bs = ct_size(yb, 0);
            sum_loss += ct_item(loss) * (double)bs;
            correct += count_correct(logits, yb);
            seen += bs;
            ct_scope_end();
            ct_free(xb);
            ct_free(yb);
            progress(tty, e + 1, epochs, ++i, nb, sum_loss / (double)seen, (double)correct / (double)seen, now() - te0);
        }
        ct_scope_end();
        if (r < 0) die("data loader");
        trl[e] = sum_loss / (double)seen;
        tra[e] = (double)correct / (double)seen;
        evaluate(model, loss_fn, Xte, Yte, &tel[e], &tea[e]);
        if (tty) fprintf(stderr, "\r\033[K");
        fprintf(stderr, "epoch %2d/%d  train loss %.4f acc %5.1f%%  test loss %.4f acc %5.1f%%  %.1fs\n", e + 1, epochs,
                trl[e], 100 * tra[e], tel[e], 100 * tea[e], now() - te0);
    }
    double secs = now() - t0;
    double test_acc = tea[epochs - 1];
    printf("final test accuracy: %.2f%% (%lld/%lld) after %d epochs in %.1f s\n", 100 * test_acc,
           (long long)llround(test_acc * (double)ntest), (long long)ntest, epochs, secs);
    if (ct_module_save(model, out) < 0) die("saving the model");
    printf("model saved to %s\n", out);
    if (write_svg(svg, trl, tel, tra, tea, epochs) != 0) fprintf(stderr, "ctorch-digits: cannot write %s\n", svg);
    else printf("training curves written to %s\n", svg);
    free(curves);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
    ct_optimizer_free(opt);
    ct_module_free(model);
    ct_module_free(loss_fn);
    ct_scope_end();
    if (test_acc < 0.97) {
        fprintf(stderr, "ctorch-digits: test accuracy %.2f%% is below 97%%\n", 100 * test_acc);
        return 2;
    }
    return 0;
}

static int predict(const char *model_path, const char *rows_path) {
    size_t len = 0;
    char *text;
    if (rows_path) {
        text = (char *)read_file(rows_path, &len);
        if (!text) {
            fprintf(stderr, "ctorch-digits: cannot read %s\n", rows_path);
            return 1;
        }
    } else {
        size_t cap = 1 << 16;
        text = malloc(cap);
        size_t r;
        while (text && (r = fread(text + len, 1, cap - len, stdin)) > 0)
            if ((len += r) == cap) text = realloc(text, cap *= 2);
        if (!text) return 1;
    }
    float *xs;
    int64_t *ys, n;
    int parsed = parse_rows(text, len, &xs, &ys, &n, NPIX);
    free(text);
    if (parsed < 0) return 1;
    ct_module *model = make_model();
    if (!model) die("model");
    if (ct_module_load(model, model_path, true) < 0) die("loading the model");
    ct_module_eval(model);
    ct_set_grad_enabled(false);
    ct_scope_begin();
    int rc = 0;
    if (n > 0) {
        ct_tensor *X = ct_from_data(xs, CT_SHAPE(n, 1, 8, 8), CT_FLOAT32);
        ct_tensor *pred = ct_argmax(ct_module_forward(model, X), true, 1, false);
        if (!pred) die("predict");
        int64_t *p = ct_data_ptr(ct_contiguous(pred));
        for (int64_t i = 0; i < n; i++) printf("%lld\n", (long long)p[i]);
    }
    ct_scope_end();
    free(xs);
    free(ys);
    ct_module_free(model);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "predict")) {
        if (argc < 3 || argc > 4) {
            fprintf(stderr, "usage: %s predict model.safetensors [rows.csv]\n", argv[0]);
            return 1;
        }
        return predict(argv[2], argc == 4 ? argv[3] : NULL);
    }
    int epochs = 15, threads = 1;
    double lr = 2e-3;
    int64_t batch = 32;
    const char *data = NULL, *out = "model.safetensors", *svg = "digits_curves.svg";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "train")) continue;
        if (i + 1 < argc && !strcmp(argv[i], "--epochs")) epochs = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--data")) data = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--lr")) lr = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--batch")) batch = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--out")) out = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--svg")) svg = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [train] [--epochs N] [--lr LR] [--batch B] [--threads T] [--data digits.csv.gz]\n"
                    "          [--out model.safetensors] [--svg curves.svg]\n"
                    "       %s predict model.safetensors [rows.csv]   (rows on stdin without a file)\n",
                    argv[0], argv[0]);
            return 1;
        }
    }
    if (epochs < 1) epochs = 1;
    if (batch < 1) batch = 1;
    /* A model this small trains fastest on one thread: OpenMP's fork/join costs
     * more than the parallel work in each op. */
    ct_set_num_threads(threads > 0 ? threads : 1);
    return train(epochs, lr, batch, find_data(data), out, svg);
}
