/* test_optim.c: optimizers (closed-form first steps, convergence on a
 * quadratic), parameter groups, schedulers, state save/load, clip_grad_norm_.
 * Step-for-step parity with torch.optim: tests/parity/test_optim.py. */
#include "harness.h"
#include <stdlib.h>

static ct_tensor *param(const float *v, int64_t n) {
    ct_tensor *p = ct_retain(ct_from_data(v, CT_SHAPE(n), CT_FLOAT32));
    ct_set_requires_grad(p, true);
    return p;
}

static double at(const ct_tensor *t, int64_t i) { return ct_item(ct_select(t, 0, i)); }

/* grad of sum((p - target)^2) */
static void quad_grad(ct_tensor *p, double target) {
    ct_zero_grad(p, true);
    ct_scope_begin();
    ct_backward(ct_sum(ct_square(ct_sub_scalar(p, target))), NULL);
    ct_scope_end();
}

TEST(sgd_first_steps) {
    ct_tensor *p = param((float[]){1, -2}, 2);
    ct_optimizer *o = ct_optim_sgd(&p, 1, 0.1, 0.9, 0, 0.5, false);
    CHECK(o);
    ct_set_grad(p, ct_from_data((float[]){1, 1}, CT_SHAPE(2), CT_FLOAT32));
    CHECK_EQ_INT(ct_optimizer_step(o), 0);
    /* d = g + wd p = (1.5, 0); buf = d; p -= 0.1 d */
    CHECK_NEAR(at(p, 0), 1 - 0.15, 1e-6);
    CHECK_NEAR(at(p, 1), -2, 1e-6);
    CHECK_EQ_INT(ct_optimizer_step(o), 0);
    /* d = 1 + 0.5 * 0.85 = 1.425; buf = 0.9 * 1.5 + 1.425 = 2.775 */
    CHECK_NEAR(at(p, 0), 0.85 - 0.2775, 1e-6);
    CHECK(!ct_requires_grad(ct_grad(p)) && ct_is_leaf(p));
    ct_optimizer_free(o);
    ct_free(p);
}

TEST(adam_first_step_is_lr_sign) {
    ct_tensor *p = param((float[]){0.5f, 0.5f, 0.5f}, 3);
    ct_optimizer *o = ct_optim_adam(&p, 1, 0.01, 0.9, 0.999, 1e-8, 0, false);
    ct_set_grad(p, ct_from_data((float[]){3, -0.2f, 0}, CT_SHAPE(3), CT_FLOAT32));
    CHECK_EQ_INT(ct_optimizer_step(o), 0);
    CHECK_NEAR(at(p, 0), 0.49, 1e-6);
    CHECK_NEAR(at(p, 1), 0.51, 1e-6);
    CHECK_NEAR(at(p, 2), 0.5, 1e-7);
    ct_optimizer_free(o);
    ct_free(p);
}

TEST(all_converge_on_a_quadratic) {
    for (int k = 0; k < 5; k++) {
        ct_tensor *p = param((float[]){4, -3, 0.5f}, 3);
        ct_optimizer *o = k == 0 ? ct_optim_sgd(&p, 1, 0.1, 0.5, 0, 0, true)
                        : k == 1 ? ct_optim_adam(&p, 1, 0.1, 0.9, 0.999, 1e-8, 0, true)
                        : k == 2 ? ct_optim_adamw(&p, 1, 0.1, 0.9, 0.999, 1e-8, 0, false)
                        : k == 3 ? ct_optim_rmsprop(&p, 1, 0.01, 0.99, 1e-8, 0, 0.5, true)
                                 : ct_optim_rmsprop(&p, 1, 0.03, 0.9, 1e-8, 0, 0, false);
        CHECK(o);
        for (int s = 0; s < 400; s++) {
            quad_grad(p, 1.0);
            CHECK_EQ_INT(ct_optimizer_step(o), 0);
        }
        for (int i = 0; i < 3; i++) {
            CHECK_NEAR(at(p, i), 1.0, 0.05);
            if (fabs(at(p, i) - 1) > 0.05) fprintf(stderr, "  optimizer %d\n", k);
        }
        ct_optimizer_free(o);
        ct_free(p);
    }
}

TEST(groups_and_schedulers) {
    ct_tensor *a = param((float[]){1}, 1), *b = param((float[]){1}, 1);
    ct_optimizer *o = ct_optim_sgd(&a, 1, 0.1, 0, 0, 0, false);
    CHECK_EQ_INT(ct_optimizer_add_param_group(o, &b, 1, 0.5), 0);
    CHECK_ERR_INT(ct_optimizer_add_param_group(o, &b, 1, 0.5), "more than one parameter group");
    CHECK_EQ_INT(ct_optimizer_num_groups(o), 2);
    ct_set_grad(a, ct_ones(CT_SHAPE(1), CT_FLOAT32));
    ct_set_grad(b, ct_ones(CT_SHAPE(1), CT_FLOAT32));
    ct_optimizer_step(o);
    CHECK_NEAR(at(a, 0), 0.9, 1e-6);
    CHECK_NEAR(at(b, 0), 0.5, 1e-6);
    ct_lr_scheduler *s = ct_lr_step(o, 3, 0.1);
    double want[] = {0.1, 0.1, 0.01, 0.01, 0.01, 0.001};
    for (int e = 0; e < 6; e++) {
        ct_lr_scheduler_step(s);
        CHECK_NEAR(ct_lr_scheduler_get_last_lr(s, 0), want[e], 1e-12);
        CHECK_NEAR(ct_lr_scheduler_get_last_lr(s, 1), 5 * want[e], 1e-12);
    }
    ct_lr_scheduler_free(s);
    ct_optimizer_set_lr(o, 0, 1.0);
    ct_lr_scheduler *c = ct_lr_cosine_annealing(o, 4, 0.0);
    for (int e = 1; e <= 4; e++) {
        ct_lr_scheduler_step(c);
        CHECK_NEAR(ct_optimizer_get_lr(o, 0), 0.5 * (1 + cos(M_PI * e / 4)), 1e-9);
    }
    ct_lr_scheduler_free(c);
    ct_optimizer_free(o);
    ct_free(a);
    ct_free(b);
}

TEST(state_save_load) {
    ct_tensor *p = param((float[]){1, 2}, 2), *q = param((float[]){1, 2}, 2);
    ct_optimizer *o = ct_optim_rmsprop(&p, 1, 0.01, 0.99, 1e-8, 0, 0.9, true);
    ct_optimizer *o2 = ct_optim_rmsprop(&q, 1, 0.01, 0.99, 1e-8, 0, 0.9, true);
    for (int s = 0; s < 3; s++) {
        quad_grad(p, 0);
        quad_grad(q, 0);
        ct_optimizer_step(o);
        ct_optimizer_step(o2);
    }
    ct_state_dict *sd = ct_optimizer_state_dict(o);
    CHECK(sd);
    CHECK(ct_state_dict_find(sd, "state.0.square_avg") >= 0);
    CHECK(ct_state_dict_find(sd, "state.0.momentum_buffer") >= 0);
    CHECK(ct_state_dict_find(sd, "state.0.grad_avg") >= 0);
    CHECK_STR(ct_state_dict_metadata(sd, "param_groups.0.lr"), "0.01");
    /* through safetensors, into a fresh optimizer over a copy of the parameter */
    size_t n;
    void *buf = ct_safetensors_save_buffer(sd, &n);
    ct_state_dict *back = ct_safetensors_load_buffer(buf, n);
    free(buf);
    ct_tensor *r = param((float[]){0, 0}, 2);
    bool prev = ct_set_grad_enabled(false);
    CHECK_EQ_INT(ct_copy_(r, p), 0);
    ct_set_grad_enabled(prev);
    ct_optimizer *o3 = ct_optim_rmsprop(&r, 1, 0.5, 0.99, 1e-8, 0, 0.9, true);
    CHECK_EQ_INT(ct_optimizer_load_state_dict(o3, back), 0);
    CHECK_NEAR(ct_optimizer_get_lr(o3, 0), 0.01, 1e-15);
    for (int s = 0; s < 3; s++) {
        quad_grad(p, 0);
        quad_grad(r, 0);
        ct_optimizer_step(o);
        ct_optimizer_step(o3);
    }
    CHECK_NEAR(ct_item(ct_sum(ct_abs(ct_sub(p, r)))), 0, 0);
    ct_optimizer *wrong = ct_optim_sgd(&r, 1, 0.1, 0, 0, 0, false);
    CHECK_ERR_INT(ct_optimizer_load_state_dict(wrong, back), "loaded state dict is for RMSprop, not SGD");
    ct_optimizer_free(wrong);
    ct_state_dict_free(back);
    ct_state_dict_free(sd);
    ct_optimizer_free(o);
    ct_optimizer_free(o2);
    ct_optimizer_free(o3);
    ct_free(p);
    ct_free(q);
    ct_free(r);
}

TEST(clip_grad_norm) {
    ct_tensor *ps[2] = {param((float[]){0, 0}, 2), param((float[]){0}, 1)};
    ct_set_grad(ps[0], ct_from_data((float[]){3, 0}, CT_SHAPE(2), CT_FLOAT32));
    ct_set_grad(ps[1], ct_from_data((float[]){4}, CT_SHAPE(1), CT_FLOAT32));
    CHECK_NEAR(ct_clip_grad_norm_(ps, 2, 1.0, 2.0), 5.0, 1e-6);
    CHECK_NEAR(at(ct_grad(ps[0]), 0), 0.6, 1e-5);
    CHECK_NEAR(at(ct_grad(ps[1]), 0), 0.8, 1e-5);
    CHECK_NEAR(ct_clip_grad_norm_(ps, 2, 10.0, INFINITY), 0.8, 1e-5); /* below max_norm: unchanged */
    CHECK_NEAR(at(ct_grad(ps[1]), 0), 0.8, 1e-5);
    ct_free(ps[0]);
    ct_free(ps[1]);
}

TEST(errors) {
    ct_tensor *p = param((float[]){1}, 1);
    CHECK_ERR(ct_optim_sgd(&p, 1, -0.1, 0, 0, 0, false), "Invalid learning rate: -0.1");
    CHECK_ERR(ct_optim_adam(&p, 1, 0.1, 0.9, 1.5, 1e-8, 0, false), "Invalid beta parameter at index 1");
    CHECK_ERR(ct_optim_sgd(&p, 0, 0.1, 0, 0, 0, false), "empty parameter list");
    ct_tensor *i = ct_zeros(CT_SHAPE(2), CT_INT64);
    CHECK_ERR(ct_optim_sgd(&i, 1, 0.1, 0, 0, 0, false), "must be float32 or float64");
    ct_tensor *nl = ct_mul_scalar(p, 2);
    CHECK_ERR(ct_optim_sgd(&nl, 1, 0.1, 0, 0, 0, false), "can't optimize a non-leaf Tensor");
    CHECK_ERR(ct_lr_step(NULL, 1, 0.1), "optimizer is NULL");
    ct_free(p);
}

int main(void) {
    RUN(sgd_first_steps);
    RUN(adam_first_step_is_lr_sign);
    RUN(all_converge_on_a_quadratic);
    RUN(groups_and_schedulers);
    RUN(state_save_load);
    RUN(clip_grad_norm);
    RUN(errors);
    return REPORT();
}
