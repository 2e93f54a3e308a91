/* init.c: torch.nn.init. Every function runs in no-grad mode and draws from the
 * global generator exactly as PyTorch does, so the same seed gives the same
 * weights. */
#include "nn/nn.h"
#include <ctype.h>

double ct_init_calculate_gain(const char *nl, double param) {
    if (!nl) nl = "linear";
    if (!strcmp(nl, "linear") || !strncmp(nl, "conv", 4) || !strcmp(nl, "sigmoid")) return 1;
    if (!strcmp(nl, "tanh")) return 5.0 / 3;
    if (!strcmp(nl, "relu")) return sqrt(2.0);
    if (!strcmp(nl, "leaky_relu")) {
        double slope = isnan(param) ? 0.01 : param;
        return sqrt(2.0 / (1 + slope * slope));
    }
    if (!strcmp(nl, "selu")) return 3.0 / 4;
    c10_error("Unsupported nonlinearity %s", nl);
    return NAN;
}

typedef enum { I_UNIFORM, I_NORMAL, I_CONST } InitKind;

static int run(ct_tensor *t, InitKind k, double a, double b) {
    if (!c10_unwrap(t)) return -1;
    bool prev = ct_set_grad_enabled(false);
    int r = k == I_UNIFORM ? ct_uniform_(t, a, b) : k == I_NORMAL ? ct_normal_(t, a, b) : ct_fill_(t, a);
    ct_set_grad_enabled(prev);
    return r;
}

int ct_init_uniform_(ct_tensor *t, double a, double b) { return run(t, I_UNIFORM, a, b); }
int ct_init_normal_(ct_tensor *t, double mean, double std) { return run(t, I_NORMAL, mean, std); }
int ct_init_constant_(ct_tensor *t, double v) { return run(t, I_CONST, v, 0); }
int ct_init_zeros_(ct_tensor *t) { return run(t, I_CONST, 0, 0); }
int ct_init_ones_(ct_tensor *t) { return run(t, I_CONST, 1, 0); }

static int fans(const ct_tensor *t, double *fan_in, double *fan_out) {
    if (!c10_unwrap(t)) return -1;
    int nd = ct_ndim(t);
    if (nd < 2)
        return c10_error_int("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
    int64_t rf = 1;
    for (int d = 2; d < nd; d++) rf *= ct_size(t, d);
    *fan_in = (double)(ct_size(t, 1) * rf);
    *fan_out = (double)(ct_size(t, 0) * rf);
    return 0;
}

int ct_init_xavier_uniform_(ct_tensor *t, double gain) {
    double fi = 0, fo = 0;
    if (fans(t, &fi, &fo) < 0) return -1;
    double std = gain * sqrt(2.0 / (fi + fo));
    double a = sqrt(3.0) * std;
    return run(t, I_UNIFORM, -a, a);
}

int ct_init_xavier_normal_(ct_tensor *t, double gain) {
    double fi = 0, fo = 0;
    if (fans(t, &fi, &fo) < 0) return -1;
    return run(t, I_NORMAL, 0, gain * sqrt(2.0 / (fi + fo)));
}

/* torch's order: a zero-element tensor is a no-op (a warning there), then the
 * mode (case-insensitive), the fans, the gain. 1: nothing to do. */
COLD_CODE static int kaiming_std(ct_tensor *t, double a, const char *mode, const char *nl, double *std) {
    if (!c10_unwrap(t)) return -1;
    if (ct_numel(t) == 0) return 1;
    char m[16] = "fan_in";
    if (mode) {
        size_t k = 0;
        for (; mode[k] && k + 1 < sizeof m; k++) m[k] = (char)tolower((unsigned char)mode[k]);
        m[k] = 0;
        if (mode[k] || (strcmp(m, "fan_in") && strcmp(m, "fan_out")))
            return c10_error_int("Mode %s not supported, please use one of ['fan_in', 'fan_out']", mode[k] ? mode : m);
    }
    double fi = 0, fo = 0;
    if (fans(t, &fi, &fo) < 0) return -1;
    double gain = ct_init_calculate_gain(nl ? nl : "leaky_relu", a);
    if (isnan(gain)) return -1;
    *std = gain / sqrt(!strcmp(m, "fan_in") ? fi : fo);
    return 0;
}

int ct_init_kaiming_uniform_(ct_tensor *t, double a, const char *mode, const char *nl) {
    double std = 0;
    int k = kaiming_std(t, a, mode, nl, &std);
    if (k != 0) return k < 0 ? -1 : 0;
    double bound = sqrt(3.0) * std;
    return run(t, I_UNIFORM, -bound, bound);
}

int ct_init_kaiming_normal_(ct_tensor *t, double a, const char *mode, const char *nl) {
    double std = 0;
    int k = kaiming_std(t, a, mode, nl, &std);
    if (k != 0) return k < 0 ? -1 : 0;
    return run(t, I_NORMAL, 0, std);
}
