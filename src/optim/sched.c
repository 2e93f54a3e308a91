/* sched.c: torch.optim.lr_scheduler's StepLR and CosineAnnealingLR, with
 * torch's own (recursive) formulas so that the learning rates match step for
 * step. Creating a scheduler counts as its first step (last_epoch 0), which
 * leaves the rates as they are; the base rates are the groups' initial_lr,
 * set by the first scheduler of the optimizer, as torch's. */
#include "nn/nn.h"

enum { S_STEP, S_COSINE };

struct ct_lr_scheduler {
    ct_optimizer *opt;
    int kind, step_size, T_max, last_epoch, ng, nlast;
    double gamma, eta_min;
    double *base, *last; /* torch's base_lrs (the ng groups' initial_lr at creation) and _last_lr (nlast
                          * groups: a group added since is stepped too, as torch's get_lr runs over them all) */
};

static ct_lr_scheduler *make(ct_optimizer *o, int kind) {
    if (!o) return c10_error("lr_scheduler: optimizer is NULL");
    ct_lr_scheduler *s = calloc(1, sizeof *s);
    int ng = ct_optimizer_num_groups(o);
    if (!s || !(s->base = malloc((size_t)(ng ? ng : 1) * sizeof *s->base)) ||
        !(s->last = malloc((size_t)(ng ? ng : 1) * sizeof *s->last))) {
        if (s) free(s->base);
        free(s);
        return c10_error("lr_scheduler: out of memory");
    }
    s->opt = o;
    s->kind = kind;
    s->ng = s->nlast = ng;
    for (int g = 0; g < ng; g++) s->base[g] = optim_initial_lr(o, g), s->last[g] = ct_optimizer_get_lr(o, g);
    return s;
}

ct_lr_scheduler *ct_lr_step(ct_optimizer *o, int step_size, double gamma) {
    if (step_size <= 0) return c10_error("StepLR: step_size must be positive, got %d", step_size);
    ct_lr_scheduler *s = make(o, S_STEP);
    if (s) {
        s->step_size = step_size;
        s->gamma = gamma;
    }
    return s;
}

ct_lr_scheduler *ct_lr_cosine_annealing(ct_optimizer *o, int T_max, double eta_min) {
    if (T_max <= 0) return c10_error("CosineAnnealingLR: T_max must be positive, got %d", T_max);
    ct_lr_scheduler *s = make(o, S_COSINE);
    if (s) {
        s->T_max = T_max;
        s->eta_min = eta_min;
    }
    return s;
}

int ct_lr_scheduler_step(ct_lr_scheduler *s) {
    if (!s) return c10_error_int("lr_scheduler_step: scheduler is NULL");
    int n = ct_optimizer_num_groups(s->opt);
    if (n > s->nlast) {
        double *l = realloc(s->last, (size_t)n * sizeof *l);
        if (!l) return c10_error_int("lr_scheduler_step: out of memory");
        s->last = l;
    }
    int e = ++s->last_epoch;
    for (int g = 0; g < n; g++) {
        double lr = ct_optimizer_get_lr(s->opt, g), nl = lr;
        if (s->kind == S_STEP) {
            if (e != 0 && e % s->step_size == 0) nl = lr * s->gamma;
        } else {
            double T = s->T_max, em = s->eta_min;
            if ((e - 1 - s->T_max) % (2 * s->T_max) == 0) /* torch zips base_lrs: later groups stay */
                nl = g < s->ng ? lr + (s->base[g] - em) * (1 - cos(M_PI / T)) / 2 : lr;
            else
                nl = (1 + cos(M_PI * e / T)) / (1 + cos(M_PI * (e - 1) / T)) * (lr - em) + em;
        }
        if (ct_optimizer_set_lr(s->opt, g, nl) < 0) return -1;
        s->last[g] = nl;
    }
    s->nlast = n;
    return 0;
}

double ct_lr_scheduler_get_last_lr(const ct_lr_scheduler *s, int group) {
    if (!s) return c10_error_int("get_last_lr: scheduler is NULL"), NAN;
    if (group < 0 || group >= s->nlast) return c10_error_int("get_last_lr: no parameter group %d", group), NAN;
    return s->last[group];
}

void ct_lr_scheduler_free(ct_lr_scheduler *s) {
    if (!s) return;
    free(s->base);
    free(s->last);
    free(s);
}
