"""Parity of ctorch's optimizers with torch.optim, step for step: the same
initial parameters and the same gradients for several steps, parameters compared
after every step (1e-6); parameter groups, StepLR / CosineAnnealingLR, the
optimizer state save/load, clip_grad_norm_."""
import math
from ctypes import POINTER, c_bool, c_char_p, c_double, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import CT, T, lib  # noqa: E402

O = c_void_p
TPP = POINTER(c_void_p)
for name, res, args in [
    ("ct_optim_sgd", O, [TPP, c_int, c_double, c_double, c_double, c_double, c_bool]),
    ("ct_optim_adam", O, [TPP, c_int, c_double, c_double, c_double, c_double, c_double, c_bool]),
    ("ct_optim_adamw", O, [TPP, c_int, c_double, c_double, c_double, c_double, c_double, c_bool]),
    ("ct_optim_rmsprop", O, [TPP, c_int, c_double, c_double, c_double, c_double, c_double, c_bool]),
    ("ct_optimizer_add_param_group", c_int, [O, TPP, c_int, c_double]),
    ("ct_optimizer_step", c_int, [O]),
    ("ct_optimizer_zero_grad", c_int, [O, c_bool]),
    ("ct_optimizer_get_lr", c_double, [O, c_int]),
    ("ct_optimizer_free", None, [O]),
    ("ct_optimizer_state_dict", c_void_p, [O]),
    ("ct_optimizer_load_state_dict", c_int, [O, c_void_p]),
    ("ct_state_dict_free", None, [c_void_p]),
    ("ct_state_dict_size", c_int, [c_void_p]),
    ("ct_state_dict_name", c_char_p, [c_void_p, c_int]),
    ("ct_lr_step", c_void_p, [O, c_int, c_double]),
    ("ct_lr_cosine_annealing", c_void_p, [O, c_int, c_double]),
    ("ct_lr_scheduler_step", c_int, [c_void_p]),
    ("ct_lr_scheduler_get_last_lr", c_double, [c_void_p, c_int]),
    ("ct_lr_scheduler_free", None, [c_void_p]),
    ("ct_clip_grad_norm_", c_double, [TPP, c_int, c_double, c_double]),
    ("ct_set_requires_grad", c_int, [T, c_bool]),
    ("ct_set_grad", c_int, [T, CT]),
    ("ct_grad", T, [CT]),
    ("ct_mul_scalar", T, [CT, c_double]),
]:
    ct.declare(name, res, args)

pytestmark = ct.requires("ct_optim_sgd", "ct_optimizer_step")


@pytest.fixture
def owned():
    """Optimizers and schedulers made in a test, freed at its end."""
    made = []
    yield made
    for free, o in reversed(made):
        free(o)


def leaves(ts):
    hs = []
    for t in ts:
        h = ct.from_torch(t.detach())
        assert lib.ct_set_requires_grad(h, True) == 0
        hs.append(h)
    return hs


def arr(hs):
    return (c_void_p * len(hs))(*hs)


CONFIGS = [
    ("sgd", dict(lr=0.1), (0.1, 0, 0, 0, False)),
    ("sgd", dict(lr=0.05, momentum=0.9), (0.05, 0.9, 0, 0, False)),
    ("sgd", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01), (0.05, 0.9, 0.3, 0.01, False)),
    ("sgd", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1), (0.05, 0.8, 0, 0.1, True)),
    ("adam", dict(lr=1e-2), (1e-2, 0.9, 0.999, 1e-8, 0, False)),
    ("adam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1), (1e-2, 0.8, 0.99, 1e-6, 0.1, False)),
    ("adam", dict(lr=1e-2, amsgrad=True), (1e-2, 0.9, 0.999, 1e-8, 0, True)),
    ("adamw", dict(lr=1e-2), (1e-2, 0.9, 0.999, 1e-8, 1e-2, False)),
    ("adamw", dict(lr=1e-2, weight_decay=0.5, amsgrad=True), (1e-2, 0.9, 0.999, 1e-8, 0.5, True)),
    ("rmsprop", dict(lr=1e-2), (1e-2, 0.99, 1e-8, 0, 0, False)),
    ("rmsprop", dict(lr=1e-2, alpha=0.9, momentum=0.5, weight_decay=0.1), (1e-2, 0.9, 1e-8, 0.1, 0.5, False)),
    ("rmsprop", dict(lr=1e-2, centered=True, momentum=0.3), (1e-2, 0.99, 1e-8, 0, 0.3, True)),
]
TORCH_CLS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW,
             "rmsprop": torch.optim.RMSprop}


def make_ct(kind, hs, args):
    fn = {"sgd": lib.ct_optim_sgd, "adam": lib.ct_optim_adam, "adamw": lib.ct_optim_adamw,
          "rmsprop": lib.ct_optim_rmsprop}[kind]
    return fn(arr(hs), len(hs), *args)


def twins(owned, kind, kw, args, init):
    """torch's optimizer over copies of init and ctorch's over leaves of it:
    (torch params, torch optimizer, ctorch handles, ctorch optimizer)"""
    tparams = [p.clone().requires_grad_(True) for p in init]
    topt = TORCH_CLS[kind](tparams, **kw)
    hs = leaves(init)
    o = make_ct(kind, hs, args)
    assert o, ct.last_error()
    owned.append((lib.ct_optimizer_free, o))
    return tparams, topt, hs, o


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind,kw,args", CONFIGS)
def test_step_for_step(owned, kind, kw, args, dtype, layout):
    """strided: parameters of any layout (a transpose, a slice with gaps, a permuted
    block) are updated in place in their own memory, as torch's"""
    g = torch.Generator().manual_seed(0)
    init = [torch.randn(4, 3, generator=g, dtype=dtype), torch.randn(5, generator=g, dtype=dtype),
            torch.randn(2, 2, 2, generator=g, dtype=dtype)]
    if layout == "strided":
        init = [torch.randn(3, 4, generator=g, dtype=dtype).t(), torch.randn(10, generator=g, dtype=dtype)[1::2],
                torch.randn(2, 2, 2, generator=g, dtype=dtype).permute(2, 0, 1)]
    tparams, topt, hs, o = twins(owned, kind, kw, args, init)
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    for step in range(6):
        grads = [torch.randn(p.shape, generator=g, dtype=dtype) for p in init]
        for tp, h, gr in zip(tparams, hs, grads):
            tp.grad = gr.clone()
            assert lib.ct_set_grad(h, ct.from_torch(gr)) == 0, ct.last_error()
        topt.step()
        assert lib.ct_optimizer_step(o) == 0, ct.last_error()
        for i, (tp, h) in enumerate(zip(tparams, hs)):
            ct.assert_close(h, tp.detach(), rtol=tol, atol=tol, what=f"step {step} param {i}: ")
            assert tuple(ct.strides(h)) == init[i].stride()


def test_param_groups_and_schedulers(owned):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(3, 3, generator=g), torch.randn(4, generator=g)
    ta, tb = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    topt = torch.optim.SGD([{"params": [ta]}, {"params": [tb], "lr": 0.01}], lr=0.1, momentum=0.9)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=2, gamma=0.5)
    ha, hb = leaves([a, b])
    o = lib.ct_optim_sgd(arr([ha]), 1, 0.1, 0.9, 0, 0, False)
    owned.append((lib.ct_optimizer_free, o))
    assert lib.ct_optimizer_add_param_group(o, arr([hb]), 1, 0.01) == 0, ct.last_error()
    s = lib.ct_lr_step(o, 2, 0.5)
    owned.append((lib.ct_lr_scheduler_free, s))
    for step in range(7):
        grads = [torch.randn(3, 3, generator=g), torch.randn(4, generator=g)]
        for tp, h, gr in zip([ta, tb], [ha, hb], grads):
            tp.grad = gr.clone()
            lib.ct_set_grad(h, ct.from_torch(gr))
        topt.step()
        tsched.step()
        assert lib.ct_optimizer_step(o) == 0
        assert lib.ct_lr_scheduler_step(s) == 0
        for gi in range(2):
            assert lib.ct_lr_scheduler_get_last_lr(s, gi) == pytest.approx(tsched.get_last_lr()[gi], rel=1e-15)
        ct.assert_close(ha, ta.detach(), rtol=1e-6, atol=1e-6)
        ct.assert_close(hb, tb.detach(), rtol=1e-6, atol=1e-6)
    # the same parameter twice is refused, as torch does
    ct.assert_error(lib.ct_optimizer_add_param_group(o, arr([ha]), 1, 0.5),
                    "some parameters appear in more than one parameter group")


@pytest.mark.parametrize("T_max,eta_min", [(10, 0.0), (3, 0.001)])
def test_cosine_annealing(owned, T_max, eta_min):
    tp = torch.zeros(2, requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.1)
    tsched = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=T_max, eta_min=eta_min)
    (h,) = leaves([torch.zeros(2)])
    o = lib.ct_optim_sgd(arr([h]), 1, 0.1, 0, 0, 0, False)
    owned.append((lib.ct_optimizer_free, o))
    s = lib.ct_lr_cosine_annealing(o, T_max, eta_min)
    owned.append((lib.ct_lr_scheduler_free, s))
    for _ in range(25):
        topt.step()
        tsched.step()
        lib.ct_lr_scheduler_step(s)
        assert lib.ct_optimizer_get_lr(o, 0) == pytest.approx(topt.param_groups[0]["lr"], rel=1e-12, abs=1e-15)


def sgd_with(owned, lr):
    """a torch SGD and a ctorch one over a zero parameter"""
    topt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=lr)
    (h,) = leaves([torch.zeros(2)])
    o = lib.ct_optim_sgd(arr([h]), 1, lr, 0, 0, 0, False)
    owned.append((lib.ct_optimizer_free, o))
    return topt, o


def owned_sched(owned, s):
    owned.append((lib.ct_lr_scheduler_free, s))
    return s


def step_schedulers(topt, o, pairs, n):
    """n epochs of the (torch scheduler, ctorch scheduler) pairs, compared each step"""
    for _ in range(n):
        topt.step()
        for ts, s in pairs:
            ts.step()
            assert lib.ct_lr_scheduler_step(s) == 0
        assert lib.ct_optimizer_get_lr(o, 0) == pytest.approx(topt.param_groups[0]["lr"], rel=1e-12, abs=1e-15)
        for ts, s in pairs:
            assert lib.ct_lr_scheduler_get_last_lr(s, 0) == pytest.approx(ts.get_last_lr()[0], rel=1e-12, abs=1e-15)


def test_chained_schedulers_share_the_initial_lr(owned):
    """torch's schedulers take their base rates from group['initial_lr'], which the
    first one sets; get_last_lr is each scheduler's own last rate; the optimizer's
    state dict carries initial_lr to the next optimizer's schedulers"""
    topt, o = sgd_with(owned, 0.1)
    step = (torch.optim.lr_scheduler.StepLR(topt, step_size=1, gamma=0.5),
            owned_sched(owned, lib.ct_lr_step(o, 1, 0.5)))
    step_schedulers(topt, o, [step], 2)
    cos = (torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=3),
           owned_sched(owned, lib.ct_lr_cosine_annealing(o, 3, 0.0)))
    step_schedulers(topt, o, [step, cos], 8)
    topt2, o2 = sgd_with(owned, 0.7)
    sd = lib.ct_optimizer_state_dict(o)
    try:
        assert lib.ct_optimizer_load_state_dict(o2, sd) == 0, ct.last_error()
    finally:
        lib.ct_state_dict_free(sd)
    topt2.load_state_dict(topt.state_dict())
    cos2 = (torch.optim.lr_scheduler.CosineAnnealingLR(topt2, T_max=4),
            owned_sched(owned, lib.ct_lr_cosine_annealing(o2, 4, 0.0)))
    step_schedulers(topt2, o2, [cos2], 6)


def test_parameter_checks_in_torchs_order(owned):
    """every tensor's own checks come before the duplicates (torch 1.13 warns of a
    duplicate within a group and then updates it twice: ctorch refuses it)"""
    a, b = leaves([torch.zeros(2), torch.ones(2)])
    nonleaf = ct.check(lib.ct_mul_scalar(a, 2.0))
    ct.assert_error(lib.ct_optim_sgd(arr([a, a, nonleaf]), 3, 0.1, 0, 0, 0, False),
                    "can't optimize a non-leaf Tensor")
    ct.assert_error(lib.ct_optim_sgd(arr([a, b, a]), 3, 0.1, 0, 0, 0, False),
                    "optimizer contains a parameter group with duplicate parameters")
    o = lib.ct_optim_sgd(arr([a]), 1, 0.1, 0, 0, 0, False)
    owned.append((lib.ct_optimizer_free, o))
    ct.assert_error(lib.ct_optimizer_add_param_group(o, arr([b, b]), 2, 0.5),
                    "optimizer contains a parameter group with duplicate parameters")
    ct.assert_error(lib.ct_optimizer_add_param_group(o, arr([b, a]), 2, 0.5),
                    "some parameters appear in more than one parameter group")


def test_state_dict_roundtrip(owned):
    g = torch.Generator().manual_seed(2)
    init = [torch.randn(3, 2, generator=g), torch.randn(2, generator=g)]
    hs = leaves(init)
    o = lib.ct_optim_adam(arr(hs), 2, 1e-2, 0.9, 0.999, 1e-8, 0, True)
    owned.append((lib.ct_optimizer_free, o))
    tparams = [p.clone().requires_grad_(True) for p in init]
    topt = torch.optim.Adam(tparams, lr=1e-2, amsgrad=True)
    grads = [[torch.randn(p.shape, generator=g) for p in init] for _ in range(6)]

    def feed(step, hs_):
        for h, gr in zip(hs_, grads[step]):
            lib.ct_set_grad(h, ct.from_torch(gr))

    for step in range(3):
        feed(step, hs)
        lib.ct_optimizer_step(o)
        for tp, gr in zip(tparams, grads[step]):
            tp.grad = gr.clone()
        topt.step()
    sd = lib.ct_optimizer_state_dict(o)
    assert sd, ct.last_error()
    try:
        names = sorted(lib.ct_state_dict_name(sd, i).decode() for i in range(lib.ct_state_dict_size(sd)))
        assert names == sorted(f"state.{i}.{k}" for i in range(2)
                               for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"))
        # a fresh optimizer over the same parameters continues exactly
        o2 = lib.ct_optim_adam(arr(hs), 2, 1e-2, 0.9, 0.999, 1e-8, 0, True)
        owned.append((lib.ct_optimizer_free, o2))
        assert lib.ct_optimizer_load_state_dict(o2, sd) == 0, ct.last_error()
    finally:
        lib.ct_state_dict_free(sd)
    for step in range(3, 6):
        feed(step, hs)
        assert lib.ct_optimizer_step(o2) == 0
        for tp, gr in zip(tparams, grads[step]):
            tp.grad = gr.clone()
        topt.step()
        for h, tp in zip(hs, tparams):
            ct.assert_close(h, tp.detach(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (100.0, 2.0), (0.5, 1.0), (0.3, math.inf)])
def test_clip_grad_norm(max_norm, norm_type):
    g = torch.Generator().manual_seed(3)
    tps = [torch.randn(4, 3, generator=g, requires_grad=True), torch.randn(5, generator=g, requires_grad=True)]
    hs = leaves([p.detach() for p in tps])
    for tp, h in zip(tps, hs):
        gr = torch.randn(tp.shape, generator=g)
        tp.grad = gr.clone()
        lib.ct_set_grad(h, ct.from_torch(gr))
    want = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type)
    got = lib.ct_clip_grad_norm_(arr(hs), 2, max_norm, norm_type)
    assert got == pytest.approx(float(want), rel=1e-6)
    for tp, h in zip(tps, hs):
        ct.assert_close(lib.ct_grad(h), tp.grad, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind,kw,args", CONFIGS + [
    ("adam", dict(lr=1.0, betas=(0.5, 0.0)), (1.0, 0.5, 0.0, 1e-8, 0, False)),
    ("adamw", dict(lr=0.3, betas=(0.9, 0.9), eps=1e-3, weight_decay=0.2, amsgrad=True), (0.3, 0.9, 0.9, 1e-3, 0.2, True)),
])
def test_float32_steps_bit_for_bit(owned, kind, kw, args):
    """float32 parameters after every step equal torch's bit for bit: each of torch's
    ops rounds to float (Adam's denominator is sqrt(v), then / sqrt(bc2), then + eps,
    each in float; evaluated in double it differed by an ulp on a tenth of them)"""
    g = torch.Generator().manual_seed(3)
    init = [torch.randn(1000, generator=g)]
    tparams, topt, hs, o = twins(owned, kind, kw, args, init)
    for step in range(5):
        gr = torch.randn(1000, generator=g)
        tparams[0].grad = gr.clone()
        assert lib.ct_set_grad(hs[0], ct.from_torch(gr)) == 0
        topt.step()
        assert lib.ct_optimizer_step(o) == 0, ct.last_error()
        ct.assert_close(hs[0], tparams[0].detach(), rtol=0, atol=0, what=f"step {step}: ")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind,kw,args", [
    ("rmsprop", dict(lr=0.1, alpha=0.0, centered=True), (0.1, 0.0, 1e-8, 0, 0, True)),
    ("rmsprop", dict(lr=0.1, alpha=0.0, centered=True, momentum=0.5, weight_decay=0.3), (0.1, 0.0, 1e-8, 0.3, 0.5, True)),
    ("adam", dict(lr=0.1, betas=(0.0, 0.0), eps=0.0, weight_decay=0.7), (0.1, 0.0, 0.0, 0.0, 0.7, False)),
    ("sgd", dict(lr=0.3, momentum=0.7, dampening=0.1, weight_decay=0.9), (0.3, 0.7, 0.1, 0.9, False)),
])
def test_roundings_follow_torch_fused_kernels(owned, kind, kw, args, dtype):
    """torch's add(alpha)/addcmul kernels are fused multiply-adds: results agree
    bit for bit, cancellations included (centered RMSprop with alpha 0 takes the
    square root of g*g - g*g computed with one rounding: NaN where torch has NaN)."""
    g = torch.Generator().manual_seed(1)
    init = [torch.randn(257, generator=g, dtype=dtype)]
    tparams, topt, hs, o = twins(owned, kind, kw, args, init)
    for step in range(3):
        gr = torch.randn(257, generator=g, dtype=dtype)
        tparams[0].grad = gr.clone()
        lib.ct_set_grad(hs[0], ct.from_torch(gr))
        topt.step()
        assert lib.ct_optimizer_step(o) == 0, ct.last_error()
        ct.assert_close(hs[0], tparams[0].detach(), rtol=0, atol=0, what=f"step {step}: ")


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw", "rmsprop"])
def test_hyperparameter_checks_in_torchs_order_and_words(owned, kind):
    """every pair of bad hyperparameters (negative, NaN, a beta of 1): torch's check
    order, its ValueError text with the number as Python prints it, and SGD's `< 0`
    tests that let a NaN through"""
    names = {"sgd": ["lr", "momentum", "dampening", "weight_decay"],
             "adam": ["lr", "beta1", "beta2", "eps", "weight_decay"],
             "rmsprop": ["lr", "alpha", "eps", "weight_decay", "momentum"]}[kind if kind != "adamw" else "adam"]
    good = {"lr": 0.1, "momentum": 0.5, "dampening": 0.0, "weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999,
            "eps": 1e-8, "alpha": 0.99}

    def torch_kw(v):
        kw = {k: v[k] for k in names if k not in ("beta1", "beta2")}
        if "beta1" in v:
            kw["betas"] = (v["beta1"], v["beta2"])
        return kw
    for bad in [-1.0, float("nan"), 1.0, -2.5e-5]:
        for i in range(len(names)):
            for j in range(i, len(names)):
                v = {k: good[k] for k in names}
                v[names[i]] = bad
                v[names[j]] = -0.5 if j != i else bad
                try:
                    TORCH_CLS[kind]([torch.zeros(2, requires_grad=True)], **torch_kw(v))
                    msg = None
                except ValueError as e:
                    msg = str(e)
                (h,) = leaves([torch.zeros(2)])
                o = make_ct(kind, [h], [v[k] for k in names] + [False])
                if o:
                    owned.append((lib.ct_optimizer_free, o))
                if msg is None:
                    assert o, (v, ct.last_error())
                else:
                    ct.assert_error(o, msg)


def test_errors(owned):
    (h,) = leaves([torch.zeros(2)])
    ct.assert_error(lib.ct_optim_sgd(arr([h]), 1, -1.0, 0, 0, 0, False), "Invalid learning rate: -1")
    ct.assert_error(lib.ct_optim_adam(arr([h]), 1, 1e-3, 1.0, 0.999, 1e-8, 0, False),
                    "Invalid beta parameter at index 0")
    ct.assert_error(lib.ct_optim_sgd(arr([h]), 1, 0.1, 0, 0, 0, True),
                    "Nesterov momentum requires a momentum and zero dampening")
    # parameters without gradients are skipped
    o = lib.ct_optim_sgd(arr([h]), 1, 0.1, 0.9, 0, 0, False)
    owned.append((lib.ct_optimizer_free, o))
    assert lib.ct_optimizer_step(o) == 0
    ct.assert_close(h, torch.zeros(2))


@pytest.mark.parametrize("kind", ["sgd nesterov", "rmsprop centered", "adam amsgrad"])
def test_loaded_state_dict_sets_the_flags(owned, kind):
    """torch's load_state_dict takes the saved groups whole: an optimizer made
    without nesterov / centered / amsgrad runs with them after loading a state
    that has them (and the reverse), as torch's"""
    g = torch.Generator().manual_seed(71)
    init = torch.randn(5, generator=g, dtype=torch.float64)
    grads = [torch.randn(5, generator=g, dtype=torch.float64) for _ in range(4)]
    name = kind.split()[0]
    make = {"sgd": (lambda hs, f: lib.ct_optim_sgd(arr(hs), 1, 0.1, 0.9, 0.0, 0.0, f),
                    lambda ps, f: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=f)),
            "rmsprop": (lambda hs, f: lib.ct_optim_rmsprop(arr(hs), 1, 0.01, 0.99, 1e-8, 0.0, 0.5, f),
                        lambda ps, f: torch.optim.RMSprop(ps, lr=0.01, alpha=0.99, eps=1e-8, momentum=0.5, centered=f)),
            "adam": (lambda hs, f: lib.ct_optim_adam(arr(hs), 1, 0.1, 0.9, 0.999, 1e-8, 0.0, f),
                     lambda ps, f: torch.optim.Adam(ps, lr=0.1, amsgrad=f))}[name]
    for saved in (True, False):
        tp = init.clone().requires_grad_()
        ta = make[1]([tp], saved)
        hs = leaves([init])
        oa = make[0](hs, saved)
        owned.append((lib.ct_optimizer_free, oa))
        for k in range(2):
            tp.grad = grads[k].clone()
            ta.step()
            lib.ct_set_grad(hs[0], ct.from_torch(grads[k]))
            assert lib.ct_optimizer_step(oa) == 0
        tb = make[1]([tp], not saved)
        tb.load_state_dict(ta.state_dict())
        ob = make[0](hs, not saved)
        owned.append((lib.ct_optimizer_free, ob))
        sd = lib.ct_optimizer_state_dict(oa)
        try:
            assert lib.ct_optimizer_load_state_dict(ob, sd) == 0, ct.last_error()
        finally:
            lib.ct_state_dict_free(sd)
        for k in range(2, 4):
            tp.grad = grads[k].clone()
            tb.step()
            lib.ct_set_grad(hs[0], ct.from_torch(grads[k]))
            assert lib.ct_optimizer_step(ob) == 0
            ct.assert_close(hs[0], tp.detach(), rtol=1e-12, atol=1e-12, what=f"{kind} saved {saved}: ")


def test_load_state_dict_refuses_malformed_entries(owned):
    """a step that is not one number, or a hyperparameter that is not a number,
    fails the load (-1, the message) and leaves the optimizer as it was"""
    ct.declare("ct_state_dict_set", c_int, [c_void_p, c_char_p, c_void_p])
    ct.declare("ct_state_dict_set_metadata", c_int, [c_void_p, c_char_p, c_char_p])
    init = torch.ones(3, dtype=torch.float64)
    for key, value in [("state.0.step", torch.zeros(0)), ("state.0.step", torch.ones(2)),
                       ("param_groups.0.lr", "banana"), ("param_groups.0.beta1", "0.9x"), ("param_groups.0.eps", "")]:
        hs = leaves([init])
        o = lib.ct_optim_adam(arr(hs), 1, 0.1, 0.9, 0.999, 1e-8, 0.0, False)
        owned.append((lib.ct_optimizer_free, o))
        lib.ct_set_grad(hs[0], ct.from_torch(torch.ones(3, dtype=torch.float64)))
        assert lib.ct_optimizer_step(o) == 0
        sd = lib.ct_optimizer_state_dict(o)
        try:
            if isinstance(value, str):
                assert lib.ct_state_dict_set_metadata(sd, key.encode(), value.encode()) == 0
            else:
                assert lib.ct_state_dict_set(sd, key.encode(), ct.from_torch(value.double())) == 0
            o2 = lib.ct_optim_adam(arr(hs), 1, 0.3, 0.9, 0.999, 1e-8, 0.0, False)
            owned.append((lib.ct_optimizer_free, o2))
            ct.clear_error()
            assert lib.ct_optimizer_load_state_dict(o2, sd) == -1, f"{key}={value!r} loaded"
            assert key in ct.last_error()
            ct.clear_error()
            assert lib.ct_optimizer_get_lr(o2, 0) == 0.3
        finally:
            lib.ct_state_dict_free(sd)


@pytest.mark.parametrize("sched", ["step", "cosine"])
def test_schedulers_step_groups_added_after_them(owned, sched):
    """torch's schedulers run get_lr over every group the optimizer has when
    they step, one added after them too (Cosine's base_lrs branch zips the
    groups it was made with); get_last_lr covers them all after a step"""
    tp, tq = torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.1)
    ts = (torch.optim.lr_scheduler.StepLR(topt, 2, 0.5) if sched == "step"
          else torch.optim.lr_scheduler.CosineAnnealingLR(topt, 3, 0.01))
    hp, hq = leaves([torch.zeros(2), torch.zeros(2)])
    o = lib.ct_optim_sgd(arr([hp]), 1, 0.1, 0.0, 0.0, 0.0, False)
    owned.append((lib.ct_optimizer_free, o))
    s = lib.ct_lr_step(o, 2, 0.5) if sched == "step" else lib.ct_lr_cosine_annealing(o, 3, 0.01)
    owned.append((lib.ct_lr_scheduler_free, s))
    topt.add_param_group({"params": [tq], "lr": 0.2})
    assert lib.ct_optimizer_add_param_group(o, arr([hq]), 1, 0.2) == 0
    for step in range(9):
        topt.step()
        ts.step()
        assert lib.ct_lr_scheduler_step(s) == 0
        for k, group in enumerate(topt.param_groups):
            assert math.isclose(lib.ct_optimizer_get_lr(o, k), group["lr"], rel_tol=1e-12), (step, k)
            assert math.isclose(lib.ct_lr_scheduler_get_last_lr(s, k), ts.get_last_lr()[k], rel_tol=1e-12), (step, k)


def test_load_state_dict_counts_the_groups_first(owned):
    """torch compares the number of groups before their sizes: two groups of
    one against one of two, and one against two, both fail with its words"""
    def groups(hs, split):
        o = lib.ct_optim_adam(arr(hs[:1] if split else hs), 1 if split else len(hs), 1e-3, 0.9, 0.999, 1e-8, 0.0,
                              False)
        owned.append((lib.ct_optimizer_free, o))
        if split:
            assert lib.ct_optimizer_add_param_group(o, arr(hs[1:]), len(hs) - 1, 1e-3) == 0
        return o

    def torch_groups(ps, split):
        return torch.optim.Adam([{"params": ps[:1]}, {"params": ps[1:]}] if split else ps)
    for src_split in (True, False):
        tps = [torch.zeros(1, requires_grad=True) for _ in range(2)]
        want = ct.torch_error(lambda: torch_groups(tps, not src_split).load_state_dict(
            torch_groups(tps, src_split).state_dict()))
        assert want
        hs = leaves([torch.zeros(1), torch.zeros(1)])
        sd = lib.ct_optimizer_state_dict(groups(hs, src_split))
        try:
            ct.assert_error(lib.ct_optimizer_load_state_dict(groups(hs, not src_split), sd), want)
            ct.clear_error()
        finally:
            lib.ct_state_dict_free(sd)
