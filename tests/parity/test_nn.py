"""Parity of ctorch's nn (modules, layers, init, losses as modules) with torch.nn:
default initialisation (same numbers after the same seed), forward values and
gradients of every layer and loss (input and parameter gradients), the module
repr, parameter names, state dicts and load_state_dict's errors, train/eval,
BatchNorm's running statistics, clone."""
import ctypes
import warnings
from ctypes import POINTER, c_bool, c_char_p, c_double, c_int, c_int64, c_void_p

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import CT, T, lib  # noqa: E402

M = c_void_p  # ct_module *
I64P = POINTER(c_int64)
for name, res, args in [
    ("ct_module_free", None, [M]),
    ("ct_module_forward", T, [M, CT]),
    ("ct_module_forward2", T, [M, CT, CT]),
    ("ct_module_get", T, [M, c_char_p]),
    ("ct_module_named_parameters", c_int, [M, POINTER(c_char_p), POINTER(c_void_p), c_int]),
    ("ct_module_named_buffers", c_int, [M, POINTER(c_char_p), POINTER(c_void_p), c_int]),
    ("ct_module_num_parameters", c_int64, [M]),
    ("ct_module_repr", c_int, [M, c_void_p, ctypes.c_size_t]),
    ("ct_module_train", c_int, [M, c_bool]),
    ("ct_module_eval", c_int, [M]),
    ("ct_module_clone", M, [M]),
    ("ct_module_zero_grad", c_int, [M, c_bool]),
    ("ct_module_state_dict", c_void_p, [M]),
    ("ct_module_load_state_dict", c_int, [M, c_void_p, c_bool]),
    ("ct_module_register_module", c_int, [M, c_char_p, M]),
    ("ct_state_dict_new", c_void_p, []),
    ("ct_state_dict_free", None, [c_void_p]),
    ("ct_state_dict_set", c_int, [c_void_p, c_char_p, CT]),
    ("ct_state_dict_size", c_int, [c_void_p]),
    ("ct_state_dict_name", c_char_p, [c_void_p, c_int]),
    ("ct_nn_linear", M, [c_int64, c_int64, c_bool]),
    ("ct_nn_conv1d", M, [c_int64] * 7 + [c_bool]),
    ("ct_nn_conv2d", M, [c_int64] * 7 + [c_bool]),
    ("ct_nn_batch_norm1d", M, [c_int64, c_double, c_double, c_bool, c_bool]),
    ("ct_nn_batch_norm2d", M, [c_int64, c_double, c_double, c_bool, c_bool]),
    ("ct_nn_layer_norm", M, [I64P, c_int, c_double, c_bool]),
    ("ct_nn_dropout", M, [c_double]),
    ("ct_nn_embedding", M, [c_int64, c_int64, c_int64]),
    ("ct_nn_relu", M, []), ("ct_nn_silu", M, []), ("ct_nn_tanh", M, []), ("ct_nn_sigmoid", M, []),
    ("ct_nn_gelu", M, [c_char_p]),
    ("ct_nn_softmax", M, [c_int]),
    ("ct_nn_max_pool2d", M, [c_int64, c_int64, c_int64]),
    ("ct_nn_avg_pool2d", M, [c_int64, c_int64, c_int64]),
    ("ct_nn_adaptive_avg_pool2d", M, [c_int64, c_int64]),
    ("ct_nn_flatten", M, [c_int, c_int]),
    ("ct_nn_sequential", M, [POINTER(c_void_p), c_int]),
    ("ct_nn_module_list", M, [POINTER(c_void_p), c_int]),
    ("ct_nn_cross_entropy_loss", M, [c_int]), ("ct_nn_nll_loss", M, [c_int]), ("ct_nn_mse_loss", M, [c_int]),
    ("ct_nn_l1_loss", M, [c_int]), ("ct_nn_smooth_l1_loss", M, [c_int, c_double]), ("ct_nn_bce_loss", M, [c_int]),
    ("ct_nn_bce_with_logits_loss", M, [c_int]),
    ("ct_init_xavier_uniform_", c_int, [T, c_double]), ("ct_init_xavier_normal_", c_int, [T, c_double]),
    ("ct_init_kaiming_uniform_", c_int, [T, c_double, c_char_p, c_char_p]),
    ("ct_init_kaiming_normal_", c_int, [T, c_double, c_char_p, c_char_p]),
    ("ct_init_normal_", c_int, [T, c_double, c_double]), ("ct_init_uniform_", c_int, [T, c_double, c_double]),
    ("ct_set_requires_grad", c_int, [T, c_bool]), ("ct_backward", c_int, [T, CT]), ("ct_grad", T, [CT]),
    ("ct_sum", T, [CT]), ("ct_mul", T, [CT, CT]),
    ("ct_module_save", c_int, [M, c_char_p]), ("ct_module_load", c_int, [M, c_char_p, c_bool]),
]:
    ct.declare(name, res, args)

pytestmark = ct.requires("ct_module_forward", "ct_nn_linear")
NONE, MEAN, SUM = 0, 1, 2


@pytest.fixture
def mods():
    """Modules made in a test (freed at its end, before the scope's leak check)."""
    made = []
    yield made
    for m in made:
        lib.ct_module_free(m)


def keep(mods, m):
    assert m, ct.last_error()
    mods.append(m)
    return m


def named_params(m, buffers=False):
    fn = lib.ct_module_named_buffers if buffers else lib.ct_module_named_parameters
    n = fn(m, None, None, 0)
    names = (c_char_p * max(n, 1))()
    hs = (c_void_p * max(n, 1))()
    assert fn(m, names, hs, n) == n
    return [(names[i].decode(), hs[i]) for i in range(n)]


def module_repr(m):
    n = lib.ct_module_repr(m, None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.ct_module_repr(m, buf, n + 1)
    return buf.value.decode()


def seq(*ms):
    arr = (c_void_p * len(ms))(*ms)
    return lib.ct_nn_sequential(arr, len(ms))


def copy_params_to_torch(m, tm):
    """torch module tm gets ctorch module m's parameter and buffer values (same names)."""
    sd = tm.state_dict()
    for name, h in named_params(m) + named_params(m, True):
        sd[name].copy_(ct.to_torch(h))
    tm.load_state_dict(sd)


def grad_of(h):
    g = lib.ct_grad(h)
    return None if not g else ct.to_torch(g)


# ---------------------------------------------------------------- init
@pytest.mark.parametrize("make_ct,make_torch", [
    (lambda: lib.ct_nn_linear(3, 4, True), lambda: torch.nn.Linear(3, 4)),
    (lambda: lib.ct_nn_linear(784, 512, True), lambda: torch.nn.Linear(784, 512)),
    (lambda: lib.ct_nn_linear(5, 2, False), lambda: torch.nn.Linear(5, 2, bias=False)),
    (lambda: lib.ct_nn_conv2d(3, 8, 3, 1, 1, 1, 1, True), lambda: torch.nn.Conv2d(3, 8, 3, padding=1)),
    (lambda: lib.ct_nn_conv2d(4, 8, 3, 2, 0, 1, 2, True), lambda: torch.nn.Conv2d(4, 8, 3, 2, groups=2)),
    (lambda: lib.ct_nn_conv1d(2, 4, 5, 1, 0, 1, 1, True), lambda: torch.nn.Conv1d(2, 4, 5)),
    (lambda: lib.ct_nn_embedding(10, 3, -1), lambda: torch.nn.Embedding(10, 3)),
    (lambda: lib.ct_nn_embedding(10, 3, 2), lambda: torch.nn.Embedding(10, 3, padding_idx=2)),
    (lambda: lib.ct_nn_layer_norm(ct.i64([4, 5]), 2, 1e-5, True), lambda: torch.nn.LayerNorm([4, 5])),
    (lambda: lib.ct_nn_batch_norm2d(6, 1e-5, 0.1, True, True), lambda: torch.nn.BatchNorm2d(6)),
])
def test_default_init_matches_torch(mods, make_ct, make_torch):
    lib.ct_manual_seed(0)
    m = keep(mods, make_ct())
    torch.manual_seed(0)
    tm = make_torch()
    got = named_params(m) + named_params(m, True)
    want = list(tm.named_parameters()) + list(tm.named_buffers())
    assert [n for n, _ in got] == [n for n, _ in want]
    for (name, h), (_, t) in zip(got, want):
        ct.assert_close(h, t, what=name + ": ")  # bit-exact


def test_init_helpers_match_torch():
    for fn, args, tfn in [
        (lib.ct_init_xavier_uniform_, (1.5,), lambda t: torch.nn.init.xavier_uniform_(t, 1.5)),
        (lib.ct_init_xavier_normal_, (1.0,), lambda t: torch.nn.init.xavier_normal_(t)),
        (lib.ct_init_kaiming_uniform_, (0.0, b"fan_out", b"relu"),
         lambda t: torch.nn.init.kaiming_uniform_(t, 0, "fan_out", "relu")),
        (lib.ct_init_kaiming_normal_, (0.1, b"fan_in", b"leaky_relu"),
         lambda t: torch.nn.init.kaiming_normal_(t, 0.1)),
        (lib.ct_init_normal_, (1.0, 0.5), lambda t: torch.nn.init.normal_(t, 1.0, 0.5)),
        (lib.ct_init_uniform_, (-2.0, 3.0), lambda t: torch.nn.init.uniform_(t, -2.0, 3.0)),
    ]:
        h = ct.check(lib.ct_zeros(ct.i64([6, 4, 3]), 3, ct.CT_FLOAT32))
        lib.ct_manual_seed(7)
        assert fn(h, *args) == 0, ct.last_error()
        torch.manual_seed(7)
        t = torch.zeros(6, 4, 3)
        tfn(t)
        ct.assert_close(h, t, rtol=1e-6, atol=1e-7)
    h = ct.check(lib.ct_zeros(ct.i64([3]), 1, ct.CT_FLOAT32))
    ct.assert_error(lib.ct_init_xavier_uniform_(h, 1.0),
                    ct.torch_error(lambda: torch.nn.init.xavier_uniform_(torch.zeros(3))))


@pytest.mark.parametrize("fn", ["kaiming_uniform_", "kaiming_normal_"])
def test_kaiming_checks_in_torchs_order(fn):
    """torch's kaiming_*: a zero-element tensor is left alone (a warning there, before
    any check), the mode is case-insensitive and checked before the fans, the fans
    before the nonlinearity"""
    cfn, tfn = getattr(lib, "ct_init_" + fn), getattr(torch.nn.init, fn)
    for shape in [(0,), (4, 0), (2, 0, 3, 3)]:
        h = ct.check(lib.ct_full(ct.i64(list(shape)), len(shape), 1.0, ct.CT_FLOAT32))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tfn(torch.ones(shape), 0, "bogus", "bogus")
        assert cfn(h, 0.0, b"bogus", b"bogus") == 0, ct.last_error()
    for shape, mode, nl in [((6, 4), "FAN_OUT", "relu"), ((6, 4), "Fan_In", "leaky_relu"), ((3,), "fan_avg", "relu"),
                            ((3,), "fan_in", "bogus"), ((6, 4), "fan_avg", "bogus"), ((6, 4), "fan_in", "bogus")]:
        h = ct.check(lib.ct_zeros(ct.i64(list(shape)), len(shape), ct.CT_FLOAT32))
        t = torch.zeros(shape)
        lib.ct_manual_seed(5)
        torch.manual_seed(5)
        try:
            tfn(t, 0, mode, nl)
        except ValueError as e:
            ct.assert_error(cfn(h, 0.0, mode.encode(), nl.encode()), str(e))
            continue
        assert cfn(h, 0.0, mode.encode(), nl.encode()) == 0, ct.last_error()
        ct.assert_close(h, t, rtol=1e-6, atol=1e-7)


def test_batch_norm_module_counts_before_checking_the_batch(mods):
    """BatchNorm adds to num_batches_tracked before F.batch_norm checks the batch
    (one value per channel fails after the count moved) and the channels (a
    wrong count fails after it too, the batch first); an empty batch passes"""
    for shape in [(1, 3), (0, 3), (1, 3, 1), (4, 3), (1, 1), (2, 1), (2, 5, 1)]:
        m = keep(mods, lib.ct_nn_batch_norm1d(3, 1e-5, 0.1, True, True))
        tm = torch.nn.BatchNorm1d(3)
        x = torch.randn(shape)
        try:
            want = tm(x)
        except (ValueError, RuntimeError) as e:
            ct.assert_error(lib.ct_module_forward(m, ct.from_torch(x)), str(e))
            want = None
        if want is not None:
            ct.assert_close(ct.check(lib.ct_module_forward(m, ct.from_torch(x))), want.detach(), rtol=1e-5, atol=1e-6)
        for name, h in named_params(m, True):
            ct.assert_close(h, dict(tm.named_buffers())[name], rtol=1e-5, atol=1e-6, what=f"{shape} {name}: ")


# ---------------------------------------------------------------- layers
def run_layer(mods, m, tm, x, rtol=1e-5, atol=1e-6, train=True):
    """Forward + backward of sum(out * w) through both; compares output, input grad, param grads."""
    copy_params_to_torch(m, tm)
    lib.ct_module_train(m, train)
    tm.train(train)
    xt = x.clone().requires_grad_(x.is_floating_point())
    xh = ct.from_torch(x.detach())
    if x.is_floating_point():
        lib.ct_set_requires_grad(xh, True)
    out = ct.check(lib.ct_module_forward(m, xh))
    want = tm(xt)
    ct.assert_close(out, want, rtol=rtol, atol=atol, what="forward: ")
    w = torch.randn(want.shape, dtype=want.dtype)
    (want * w).sum().backward()
    assert lib.ct_backward(ct.check(lib.ct_sum(lib.ct_mul(out, ct.from_torch(w)))), None) == 0, ct.last_error()
    if x.is_floating_point():
        torch.testing.assert_close(grad_of(xh), xt.grad, rtol=rtol, atol=atol)
    tparams = dict(tm.named_parameters())
    for name, h in named_params(m):
        torch.testing.assert_close(grad_of(h), tparams[name].grad, rtol=rtol, atol=atol, msg=lambda s: name + s)
    return out


@pytest.mark.parametrize("case", [
    "linear", "linear_nobias", "linear_3d", "conv2d", "conv2d_stride_groups", "conv2d_dilation", "conv1d",
    "bn1d", "bn1d_3d", "bn2d", "bn2d_eval", "layer_norm", "embedding", "relu", "gelu", "gelu_tanh", "silu",
    "tanh", "sigmoid", "softmax", "maxpool", "maxpool_pad", "avgpool", "adaptive", "adaptive_uneven", "flatten",
    "dropout_eval", "sequential_mlp", "sequential_cnn",
])
def test_layer_forward_backward(mods, case):
    torch.manual_seed(1)
    lib.ct_manual_seed(1)
    C = {
        "linear": (lambda: lib.ct_nn_linear(5, 3, True), lambda: torch.nn.Linear(5, 3), (4, 5)),
        "linear_nobias": (lambda: lib.ct_nn_linear(5, 3, False), lambda: torch.nn.Linear(5, 3, False), (4, 5)),
        "linear_3d": (lambda: lib.ct_nn_linear(5, 3, True), lambda: torch.nn.Linear(5, 3), (2, 4, 5)),
        "conv2d": (lambda: lib.ct_nn_conv2d(3, 4, 3, 1, 1, 1, 1, True),
                   lambda: torch.nn.Conv2d(3, 4, 3, padding=1), (2, 3, 6, 5)),
        "conv2d_stride_groups": (lambda: lib.ct_nn_conv2d(4, 6, 3, 2, 1, 1, 2, True),
                                 lambda: torch.nn.Conv2d(4, 6, 3, 2, 1, groups=2), (2, 4, 7, 7)),
        "conv2d_dilation": (lambda: lib.ct_nn_conv2d(2, 3, 3, 1, 2, 2, 1, False),
                            lambda: torch.nn.Conv2d(2, 3, 3, 1, 2, 2, bias=False), (1, 2, 8, 8)),
        "conv1d": (lambda: lib.ct_nn_conv1d(3, 4, 3, 2, 1, 1, 1, True),
                   lambda: torch.nn.Conv1d(3, 4, 3, 2, 1), (2, 3, 9)),
        "bn1d": (lambda: lib.ct_nn_batch_norm1d(4, 1e-5, 0.1, True, True), lambda: torch.nn.BatchNorm1d(4), (6, 4)),
        "bn1d_3d": (lambda: lib.ct_nn_batch_norm1d(4, 1e-5, 0.1, True, True), lambda: torch.nn.BatchNorm1d(4),
                    (3, 4, 5)),
        "bn2d": (lambda: lib.ct_nn_batch_norm2d(3, 1e-3, 0.2, True, True),
                 lambda: torch.nn.BatchNorm2d(3, 1e-3, 0.2), (2, 3, 4, 4)),
        "bn2d_eval": (lambda: lib.ct_nn_batch_norm2d(3, 1e-5, 0.1, True, True), lambda: torch.nn.BatchNorm2d(3),
                      (2, 3, 4, 4)),
        "layer_norm": (lambda: lib.ct_nn_layer_norm(ct.i64([4, 5]), 2, 1e-5, True),
                       lambda: torch.nn.LayerNorm([4, 5]), (3, 4, 5)),
        "relu": (lambda: lib.ct_nn_relu(), lambda: torch.nn.ReLU(), (3, 7)),
        "gelu": (lambda: lib.ct_nn_gelu(None), lambda: torch.nn.GELU(), (3, 7)),
        "gelu_tanh": (lambda: lib.ct_nn_gelu(b"tanh"), lambda: torch.nn.GELU("tanh"), (3, 7)),
        "silu": (lambda: lib.ct_nn_silu(), lambda: torch.nn.SiLU(), (3, 7)),
        "tanh": (lambda: lib.ct_nn_tanh(), lambda: torch.nn.Tanh(), (3, 7)),
        "sigmoid": (lambda: lib.ct_nn_sigmoid(), lambda: torch.nn.Sigmoid(), (3, 7)),
        "softmax": (lambda: lib.ct_nn_softmax(1), lambda: torch.nn.Softmax(1), (3, 7)),
        "maxpool": (lambda: lib.ct_nn_max_pool2d(2, 0, 0), lambda: torch.nn.MaxPool2d(2), (2, 3, 6, 6)),
        "maxpool_pad": (lambda: lib.ct_nn_max_pool2d(3, 2, 1), lambda: torch.nn.MaxPool2d(3, 2, 1), (2, 3, 7, 7)),
        "avgpool": (lambda: lib.ct_nn_avg_pool2d(2, 2, 1), lambda: torch.nn.AvgPool2d(2, 2, 1), (2, 3, 6, 6)),
        "adaptive": (lambda: lib.ct_nn_adaptive_avg_pool2d(1, 1), lambda: torch.nn.AdaptiveAvgPool2d((1, 1)),
                     (2, 3, 6, 6)),
        "adaptive_uneven": (lambda: lib.ct_nn_adaptive_avg_pool2d(3, 2),
                            lambda: torch.nn.AdaptiveAvgPool2d((3, 2)), (2, 3, 7, 5)),
        "flatten": (lambda: lib.ct_nn_flatten(1, -1), lambda: torch.nn.Flatten(), (2, 3, 4)),
        "dropout_eval": (lambda: lib.ct_nn_dropout(0.5), lambda: torch.nn.Dropout(0.5), (4, 6)),
        "sequential_mlp": (lambda: seq(lib.ct_nn_linear(6, 8, True), lib.ct_nn_relu(), lib.ct_nn_linear(8, 3, True)),
                           lambda: torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)),
                           (5, 6)),
        "sequential_cnn": (lambda: seq(lib.ct_nn_conv2d(1, 4, 3, 1, 1, 1, 1, True), lib.ct_nn_relu(),
                                       lib.ct_nn_max_pool2d(2, 2, 0), lib.ct_nn_flatten(1, -1),
                                       lib.ct_nn_linear(4 * 4 * 4, 10, True)),
                           lambda: torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
                                                       torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                                       torch.nn.Linear(64, 10)),
                           (3, 1, 8, 8)),
    }
    if case == "embedding":
        m = keep(mods, lib.ct_nn_embedding(10, 3, 1))
        tm = torch.nn.Embedding(10, 3, padding_idx=1)
        run_layer(mods, m, tm, torch.tensor([[1, 2, 3], [4, 1, 9]]))
        return
    mk, tmk, shape = C[case]
    m = keep(mods, mk())
    tm = tmk()
    x = torch.randn(shape)
    train = case not in ("bn2d_eval", "dropout_eval")
    if case == "bn2d_eval":  # running stats from two training batches first
        copy_params_to_torch(m, tm)
        for _ in range(2):
            xb = torch.randn(shape)
            tm(xb)
            assert lib.ct_module_forward(m, ct.from_torch(xb))
        for name, h in named_params(m, True):
            ct.assert_close(h, dict(tm.named_buffers())[name], rtol=1e-5, atol=1e-6, what=name + ": ")
    run_layer(mods, m, tm, x, train=train)
    for name, h in named_params(m, True):  # running stats after the step
        ct.assert_close(h, dict(tm.named_buffers())[name], rtol=1e-5, atol=1e-6, what=name + ": ")


def test_batchnorm_momentum_none(mods):
    m = keep(mods, lib.ct_nn_batch_norm1d(3, 1e-5, float("nan"), True, True))
    tm = torch.nn.BatchNorm1d(3, momentum=None)
    for _ in range(3):
        x = torch.randn(5, 3)
        tm(x)
        assert lib.ct_module_forward(m, ct.from_torch(x))
    for name, h in named_params(m, True):
        ct.assert_close(h, dict(tm.named_buffers())[name], rtol=1e-5, atol=1e-6, what=name + ": ")
    assert module_repr(m) == repr(tm)


def test_dropout_train_matches_torch_rng(mods):
    m = keep(mods, lib.ct_nn_dropout(0.3))
    x = torch.randn(50, 40)
    lib.ct_manual_seed(3)
    out = ct.check(lib.ct_module_forward(m, ct.from_torch(x)))
    torch.manual_seed(3)
    want = torch.nn.Dropout(0.3)(x)
    ct.assert_close(out, want, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- losses
LOSSES = {
    "ce": (lambda r: lib.ct_nn_cross_entropy_loss(r), torch.nn.CrossEntropyLoss, "class"),
    "nll": (lambda r: lib.ct_nn_nll_loss(r), torch.nn.NLLLoss, "logp"),
    "mse": (lambda r: lib.ct_nn_mse_loss(r), torch.nn.MSELoss, "real"),
    "l1": (lambda r: lib.ct_nn_l1_loss(r), torch.nn.L1Loss, "real"),
    "smooth_l1": (lambda r: lib.ct_nn_smooth_l1_loss(r, 0.5), lambda reduction: torch.nn.SmoothL1Loss(
        reduction=reduction, beta=0.5), "real"),
    "bce": (lambda r: lib.ct_nn_bce_loss(r), torch.nn.BCELoss, "prob"),
    "bce_logits": (lambda r: lib.ct_nn_bce_with_logits_loss(r), torch.nn.BCEWithLogitsLoss, "binary"),
}


@pytest.mark.parametrize("kind", list(LOSSES))
@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
def test_loss_modules(mods, kind, reduction):
    mk, tcls, tgt = LOSSES[kind]
    red = ["none", "mean", "sum"][reduction]
    m = keep(mods, mk(reduction))
    torch.manual_seed(2)
    x = torch.randn(6, 5, dtype=torch.float64)
    if tgt == "class":
        t = torch.randint(0, 5, (6,))
    elif tgt == "logp":
        x = torch.log_softmax(x, 1)
        t = torch.randint(0, 5, (6,))
    elif tgt == "prob":
        x = torch.sigmoid(x)
        t = torch.rand(6, 5, dtype=torch.float64)
    elif tgt == "binary":
        t = (torch.rand(6, 5) > 0.5).double()
    else:
        t = torch.randn(6, 5, dtype=torch.float64)
    xt = x.clone().requires_grad_(True)
    want = tcls(reduction=red)(xt, t)
    xh = ct.from_torch(x)
    lib.ct_set_requires_grad(xh, True)
    got = ct.check(lib.ct_module_forward2(m, xh, ct.from_torch(t)))
    ct.assert_close(got, want, rtol=1e-10, atol=1e-12)
    w = torch.randn(want.shape, dtype=torch.float64)
    (want * w).sum().backward()
    assert lib.ct_backward(ct.check(lib.ct_sum(lib.ct_mul(got, ct.from_torch(w)))), None) == 0, ct.last_error()
    torch.testing.assert_close(grad_of(xh), xt.grad, rtol=1e-9, atol=1e-12)
    assert module_repr(m) == repr(tcls(reduction=red))


# ---------------------------------------------------------------- the tree
def test_repr_names_state_dict_like_torch(mods):
    m = keep(mods, seq(lib.ct_nn_conv2d(1, 16, 3, 1, 1, 1, 1, True), lib.ct_nn_batch_norm2d(16, 1e-5, 0.1, True, True),
                       lib.ct_nn_relu(), lib.ct_nn_max_pool2d(2, 0, 0),
                       seq(lib.ct_nn_flatten(1, -1), lib.ct_nn_dropout(0.25), lib.ct_nn_linear(16 * 4 * 4, 10, True)),
                       lib.ct_nn_layer_norm(ct.i64([10]), 1, 1e-5, True), lib.ct_nn_embedding(10, 3, 0),
                       lib.ct_nn_softmax(-1), lib.ct_nn_avg_pool2d(3, 1, 1), lib.ct_nn_conv1d(2, 4, 3, 1, 0, 2, 2, False)))
    tm = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                             torch.nn.MaxPool2d(2),
                             torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Dropout(0.25), torch.nn.Linear(256, 10)),
                             torch.nn.LayerNorm(10), torch.nn.Embedding(10, 3, padding_idx=0), torch.nn.Softmax(-1),
                             torch.nn.AvgPool2d(3, 1, 1), torch.nn.Conv1d(2, 4, 3, dilation=2, groups=2, bias=False))
    assert module_repr(m) == repr(tm)
    assert [n for n, _ in named_params(m)] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in named_params(m, True)] == [n for n, _ in tm.named_buffers()]
    assert lib.ct_module_num_parameters(m) == sum(p.numel() for p in tm.parameters())
    sd = lib.ct_module_state_dict(m)
    try:
        names = [lib.ct_state_dict_name(sd, i).decode() for i in range(lib.ct_state_dict_size(sd))]
    finally:
        lib.ct_state_dict_free(sd)
    assert names == list(tm.state_dict().keys())
    ml = keep(mods, lib.ct_nn_module_list((c_void_p * 2)(lib.ct_nn_relu(), lib.ct_nn_linear(2, 2, True)), 2))
    assert module_repr(ml) == repr(torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Linear(2, 2)]))


def test_same_module_twice_is_cloned_and_named(mods):
    lin = lib.ct_nn_linear(3, 4, True)
    m = keep(mods, seq(lin, lib.ct_nn_relu(), lin))
    names = [n for n, _ in named_params(m)]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    w0 = lib.ct_module_get(m, b"0.weight")
    w2 = lib.ct_module_get(m, b"2.weight")
    assert not ct.shares_storage(w0, w2)
    torch.testing.assert_close(ct.to_torch(w0), ct.to_torch(w2), rtol=0, atol=0)
    c = keep(mods, lib.ct_module_clone(m))
    assert module_repr(c) == module_repr(m)
    assert [n for n, _ in named_params(c)] == names
    wc = lib.ct_module_get(c, b"0.weight")
    assert not ct.shares_storage(wc, w0)
    torch.testing.assert_close(ct.to_torch(wc), ct.to_torch(w0), rtol=0, atol=0)


def test_load_state_dict_errors_like_torch(mods):
    m = keep(mods, seq(lib.ct_nn_linear(3, 4, True), lib.ct_nn_relu(), lib.ct_nn_linear(4, 2, True)))
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    sd = lib.ct_state_dict_new()
    try:
        tsd = {}
        for name, t in [("0.weight", torch.randn(5, 3)), ("0.bias", torch.randn(4)), ("extra", torch.zeros(1))]:
            lib.ct_state_dict_set(sd, name.encode(), ct.from_torch(t))
            tsd[name] = t
        with pytest.raises(RuntimeError) as e:
            tm.load_state_dict(tsd)
        ct.clear_error()
        assert lib.ct_module_load_state_dict(m, sd, True) == -1
        assert ct.last_error() == str(e.value)
        # a good dict (torch's values) loads, and the values are copied
        sd2 = lib.ct_state_dict_new()
        try:
            for name, t in tm.state_dict().items():
                lib.ct_state_dict_set(sd2, name.encode(), ct.from_torch(t))
            assert lib.ct_module_load_state_dict(m, sd2, True) == 0, ct.last_error()
        finally:
            lib.ct_state_dict_free(sd2)
        for name, h in named_params(m):
            ct.assert_close(h, dict(tm.named_parameters())[name])
    finally:
        lib.ct_state_dict_free(sd)


def test_zero_grad_train_eval(mods):
    m = keep(mods, seq(lib.ct_nn_linear(3, 2, True), lib.ct_nn_dropout(0.5)))
    x = ct.from_torch(torch.randn(4, 3))
    out = ct.check(lib.ct_module_forward(m, x))
    assert lib.ct_backward(ct.check(lib.ct_sum(out)), None) == 0
    w = lib.ct_module_get(m, b"0.weight")
    assert lib.ct_grad(w)
    assert lib.ct_module_zero_grad(m, False) == 0
    assert float(ct.to_torch(lib.ct_grad(w)).abs().sum()) == 0
    assert lib.ct_module_zero_grad(m, True) == 0
    assert not lib.ct_grad(w)
    lib.ct_module_eval(m)
    a = ct.to_torch(ct.check(lib.ct_module_forward(m, x)))
    b = ct.to_torch(ct.check(lib.ct_module_forward(m, x)))
    torch.testing.assert_close(a, b, rtol=0, atol=0)  # no dropout in eval


def test_errors_like_torch(mods):
    m = keep(mods, lib.ct_nn_linear(3, 4, True))
    x = ct.from_torch(torch.randn(2, 5))
    msg = ct.torch_error(lambda: torch.nn.Linear(3, 4)(torch.randn(2, 5)))
    ct.assert_error(lib.ct_module_forward(m, x), msg)
    bn = keep(mods, lib.ct_nn_batch_norm2d(3, 1e-5, 0.1, True, True))
    ct.assert_error(lib.ct_module_forward(bn, ct.from_torch(torch.randn(2, 3, 4))),
                    ct.torch_error(lambda: torch.nn.BatchNorm2d(3)(torch.randn(2, 3, 4))))
    ct.assert_error(lib.ct_nn_conv2d(3, 4, 3, 1, 0, 1, 2, True),
                    ct.torch_error(lambda: torch.nn.Conv2d(3, 4, 3, groups=2)))


CTOR_CASES = [  # (name, ctorch constructor, torch constructor, input shape): torch checks in its constructor
    # only what it must (groups, p, padding_idx, the sizes of the tensors it makes); forward checks the rest
    ("conv k=-1", lambda: lib.ct_nn_conv2d(2, 2, -1, 1, 0, 1, 1, True), lambda: torch.nn.Conv2d(2, 2, -1), (1, 2, 5, 5)),
    ("conv in=-1", lambda: lib.ct_nn_conv2d(-1, 2, 3, 1, 0, 1, 1, True), lambda: torch.nn.Conv2d(-1, 2, 3), (1, 2, 5, 5)),
    ("conv out=-2 g=2", lambda: lib.ct_nn_conv2d(2, -2, 3, 1, 0, 1, 2, True),
     lambda: torch.nn.Conv2d(2, -2, 3, groups=2), (1, 2, 5, 5)),
    ("conv stride 0", lambda: lib.ct_nn_conv2d(2, 2, 3, 0, 0, 1, 1, True), lambda: torch.nn.Conv2d(2, 2, 3, 0),
     (1, 2, 5, 5)),
    ("conv pad -1", lambda: lib.ct_nn_conv2d(2, 2, 3, 1, -1, 1, 1, True), lambda: torch.nn.Conv2d(2, 2, 3, 1, -1),
     (1, 2, 5, 5)),
    ("conv dil 0", lambda: lib.ct_nn_conv2d(2, 2, 3, 1, 0, 0, 1, True), lambda: torch.nn.Conv2d(2, 2, 3, 1, 0, 0),
     (1, 2, 5, 5)),
    ("conv k=0", lambda: lib.ct_nn_conv2d(2, 2, 0, 1, 0, 1, 1, True), lambda: torch.nn.Conv2d(2, 2, 0), (1, 2, 5, 5)),
    ("conv1d stride 0", lambda: lib.ct_nn_conv1d(2, 2, 3, 0, 0, 1, 1, False),
     lambda: torch.nn.Conv1d(2, 2, 3, 0, bias=False), (1, 2, 5)),
    ("bn -1", lambda: lib.ct_nn_batch_norm1d(-1, 1e-5, 0.1, True, True), lambda: torch.nn.BatchNorm1d(-1), (2, 3)),
    ("bn 0", lambda: lib.ct_nn_batch_norm1d(0, 1e-5, 0.1, True, True), lambda: torch.nn.BatchNorm1d(0), (2, 3)),
    ("bn -2 bare", lambda: lib.ct_nn_batch_norm1d(-2, 1e-5, 0.1, False, False),
     lambda: torch.nn.BatchNorm1d(-2, affine=False, track_running_stats=False), (2, 3)),
    ("emb -1 rows", lambda: lib.ct_nn_embedding(-1, 3, -1), lambda: torch.nn.Embedding(-1, 3), None),
    ("emb -1 cols", lambda: lib.ct_nn_embedding(4, -1, -1), lambda: torch.nn.Embedding(4, -1), None),
    ("emb pad 4", lambda: lib.ct_nn_embedding(4, 3, 4), lambda: torch.nn.Embedding(4, 3, padding_idx=4), None),
    ("emb pad -5", lambda: lib.ct_nn_embedding(4, 3, -5), lambda: torch.nn.Embedding(4, 3, padding_idx=-5), None),
    ("emb pad -4", lambda: lib.ct_nn_embedding(4, 3, -4), lambda: torch.nn.Embedding(4, 3, padding_idx=-4), None),
    ("maxpool 0", lambda: lib.ct_nn_max_pool2d(0, 0, 0), lambda: torch.nn.MaxPool2d(0), (1, 1, 4, 4)),
    ("maxpool pad 2", lambda: lib.ct_nn_max_pool2d(2, 0, 2), lambda: torch.nn.MaxPool2d(2, padding=2), (1, 1, 4, 4)),
    ("avgpool -1", lambda: lib.ct_nn_avg_pool2d(-1, 0, 0), lambda: torch.nn.AvgPool2d(-1), (1, 1, 4, 4)),
    ("avgpool pad 2", lambda: lib.ct_nn_avg_pool2d(3, 0, 2), lambda: torch.nn.AvgPool2d(3, padding=2), (1, 1, 6, 6)),
    ("adaptive (0, 2)", lambda: lib.ct_nn_adaptive_avg_pool2d(0, 2), lambda: torch.nn.AdaptiveAvgPool2d((0, 2)),
     (1, 1, 4, 4)),
    ("adaptive (-1, 2)", lambda: lib.ct_nn_adaptive_avg_pool2d(-1, 2), lambda: torch.nn.AdaptiveAvgPool2d((-1, 2)),
     (1, 1, 4, 4)),
    ("layernorm []", lambda: lib.ct_nn_layer_norm(None, 0, 1e-5, True), lambda: torch.nn.LayerNorm([]), (2, 3)),
    ("layernorm [-1]", lambda: lib.ct_nn_layer_norm(ct.i64([-1]), 1, 1e-5, True), lambda: torch.nn.LayerNorm([-1]),
     (2, 3)),
]


@pytest.mark.parametrize("case", CTOR_CASES, ids=[c[0] for c in CTOR_CASES])
def test_constructor_and_forward_check_what_torchs_do(mods, case):
    name, make_ct, make_torch, shape = case
    x = torch.randn(shape) if shape else torch.tensor([[0, 1], [2, 3]])
    try:
        err = ct.torch_error(lambda: make_torch()(x))
    except AssertionError as e:  # torch's Embedding asserts its padding_idx
        err = str(e)
    ct.clear_error()
    m = make_ct()
    if m:
        mods.append(m)
    got = lib.ct_module_forward(m, ct.from_torch(x)) if m else None
    if err is not None:
        ct.assert_error(got, err, what=name + ": ")
    else:
        ct.check(got)
        assert ct.shape(got) == tuple(make_torch()(x).shape), name


def test_smooth_l1_loss_module_refuses_a_negative_beta_in_forward(mods):
    m = keep(mods, lib.ct_nn_smooth_l1_loss(MEAN, -1.0))
    a, b = torch.randn(3), torch.randn(3)
    ct.assert_error(lib.ct_module_forward2(m, ct.from_torch(a), ct.from_torch(b)),
                    ct.torch_error(lambda: torch.nn.SmoothL1Loss(beta=-1.0)(a, b)))


def test_embedding_padding_idx_counted_from_the_end(mods):
    tm = torch.nn.Embedding(5, 3, padding_idx=-2)
    m = keep(mods, lib.ct_nn_embedding(5, 3, -2))
    copy_params_to_torch(m, tm)
    assert tm.padding_idx == 3 and float(tm.weight[3].abs().sum()) == 0
    assert "padding_idx=3" in module_repr(m)
    idx = torch.tensor([[3, 1], [3, 4]])
    y = ct.check(lib.ct_module_forward(m, ct.from_torch(idx)))
    ct.assert_close(y, tm(idx).detach())


def read_safetensors(path):
    """A minimal reader (8-byte little-endian header length, JSON header, raw data)."""
    import json
    import struct
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = bytearray(raw[8 + n + a:8 + n + b])
        out[name] = torch.frombuffer(buf, dtype=dtypes[info["dtype"]]).reshape(info["shape"]).clone() \
            if b > a else torch.zeros(info["shape"], dtype=dtypes[info["dtype"]])
    return out


def test_saved_model_loads_in_torch_and_back(mods, tmp_path):
    lib.ct_manual_seed(5)
    m = keep(mods, seq(lib.ct_nn_conv2d(1, 4, 3, 1, 1, 1, 1, True), lib.ct_nn_batch_norm2d(4, 1e-5, 0.1, True, True),
                       lib.ct_nn_relu(), lib.ct_nn_max_pool2d(2, 0, 0), lib.ct_nn_flatten(1, -1),
                       lib.ct_nn_linear(64, 10, True)))
    x = torch.randn(3, 1, 8, 8)
    assert lib.ct_module_forward(m, ct.from_torch(x))  # updates running stats
    lib.ct_module_eval(m)
    path = str(tmp_path / "m.safetensors")
    assert lib.ct_module_save(m, path.encode()) == 0, ct.last_error()
    tm = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                             torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(64, 10))
    tm.load_state_dict(read_safetensors(path), strict=True)
    tm.eval()
    with torch.no_grad():
        want = tm(x)
    ct.assert_close(ct.check(lib.ct_module_forward(m, ct.from_torch(x))), want, rtol=1e-5, atol=1e-6)
    # and a fresh ctorch model loads the file strictly
    m2 = keep(mods, seq(lib.ct_nn_conv2d(1, 4, 3, 1, 1, 1, 1, True), lib.ct_nn_batch_norm2d(4, 1e-5, 0.1, True, True),
                        lib.ct_nn_relu(), lib.ct_nn_max_pool2d(2, 0, 0), lib.ct_nn_flatten(1, -1),
                        lib.ct_nn_linear(64, 10, True)))
    assert lib.ct_module_load(m2, path.encode(), True) == 0, ct.last_error()
    lib.ct_module_eval(m2)
    ct.assert_close(ct.check(lib.ct_module_forward(m2, ct.from_torch(x))), want, rtol=1e-5, atol=1e-6)


def test_digits_cnn_trains_step_for_step_like_torch(mods):
    """The main job's CNN: same seed -> same init; 4 Adam steps on the same batches
    give the same losses and parameters as torch."""
    ct.declare("ct_optim_adam", c_void_p, [POINTER(c_void_p), c_int, c_double, c_double, c_double, c_double,
                                           c_double, c_bool])
    ct.declare("ct_optimizer_step", c_int, [c_void_p])
    ct.declare("ct_optimizer_zero_grad", c_int, [c_void_p, c_bool])
    ct.declare("ct_optimizer_free", None, [c_void_p])
    ct.declare("ct_item", c_double, [CT])
    lib.ct_manual_seed(0)
    m = keep(mods, seq(lib.ct_nn_conv2d(1, 16, 3, 1, 1, 1, 1, True), lib.ct_nn_relu(),
                       lib.ct_nn_conv2d(16, 32, 3, 1, 1, 1, 1, True), lib.ct_nn_relu(),
                       lib.ct_nn_max_pool2d(2, 2, 0), lib.ct_nn_flatten(1, -1), lib.ct_nn_linear(512, 10, True)))
    loss_fn = keep(mods, lib.ct_nn_cross_entropy_loss(MEAN))
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(),
                             torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                             torch.nn.Flatten(), torch.nn.Linear(512, 10))
    params = named_params(m)
    for name, h in params:
        ct.assert_close(h, dict(tm.named_parameters())[name], what=name + ": ")
    hs = (c_void_p * len(params))(*[h for _, h in params])
    opt = lib.ct_optim_adam(hs, len(params), 2e-3, 0.9, 0.999, 1e-8, 0, False)
    assert opt, ct.last_error()
    topt = torch.optim.Adam(tm.parameters(), lr=2e-3)
    try:
        g = torch.Generator().manual_seed(4)
        for step in range(4):
            x = torch.rand(32, 1, 8, 8, generator=g)
            y = torch.randint(0, 10, (32,), generator=g)
            tl = torch.nn.functional.cross_entropy(tm(x), y)
            topt.zero_grad()
            tl.backward()
            topt.step()
            loss = ct.check(lib.ct_module_forward2(loss_fn, lib.ct_module_forward(m, ct.from_torch(x)),
                                                   ct.from_torch(y)))
            assert lib.ct_optimizer_zero_grad(opt, True) == 0
            assert lib.ct_backward(loss, None) == 0, ct.last_error()
            assert lib.ct_optimizer_step(opt) == 0, ct.last_error()
            assert lib.ct_item(loss) == pytest.approx(float(tl), rel=1e-5)
            for name, h in params:
                ct.assert_close(h, dict(tm.named_parameters())[name], rtol=1e-4, atol=1e-5,
                                what=f"step {step} {name}: ")
    finally:
        lib.ct_optimizer_free(opt)


@pytest.mark.parametrize("strict", [True, False])
def test_batch_norm_state_dict_without_num_batches_tracked(mods, strict):
    """an older checkpoint without num_batches_tracked loads, which is then 0, as
    torch's _NormBase fills it in"""
    m = keep(mods, seq(lib.ct_nn_linear(3, 3, True), lib.ct_nn_batch_norm2d(3, 1e-5, 0.1, True, True)))
    tm = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm2d(3))
    tm[1].num_batches_tracked.fill_(7)
    ct.check(lib.ct_module_forward(m, ct.from_torch(torch.randn(2, 3, 4, 3))))  # its count 1 before the load
    assert ct.to_torch(lib.ct_module_get(m, b"1.num_batches_tracked")).item() == 1
    tsd = {k: v.clone() for k, v in tm.state_dict().items() if not k.endswith("num_batches_tracked")}
    sd = lib.ct_state_dict_new()
    try:
        for name, t in tsd.items():
            lib.ct_state_dict_set(sd, name.encode(), ct.from_torch(t))
        tm.load_state_dict(tsd, strict=strict)
        assert lib.ct_module_load_state_dict(m, sd, strict) == 0, ct.last_error()
        ct.assert_close(lib.ct_module_get(m, b"1.num_batches_tracked"), tm[1].num_batches_tracked)
        ct.assert_close(lib.ct_module_get(m, b"1.running_var"), tm[1].running_var)
    finally:
        lib.ct_state_dict_free(sd)


def test_batch_norm_module_without_statistics_or_weight_takes_any_channels():
    """BatchNorm1d(affine=False, track_running_stats=False) has nothing sized by
    num_features: torch normalises any channel count; with a weight it names it"""
    x = torch.randn(3, 5, dtype=torch.float32)
    for affine, want in [(False, torch.nn.functional.batch_norm(x, None, None, training=True)), (True, None)]:
        m = lib.ct_nn_batch_norm1d(2, 1e-5, 0.1, affine, False)
        try:
            h = lib.ct_module_forward(m, ct.from_torch(x))
            if want is not None:
                ct.assert_close(ct.check(h), want, rtol=1e-5, atol=1e-5)
            else:
                with pytest.raises(RuntimeError) as e:
                    torch.nn.BatchNorm1d(2, track_running_stats=False)(x)
                ct.assert_error(h, ct.torch_message(e.value))
        finally:
            lib.ct_module_free(m)


def test_repr_floats_as_python_prints_them():
    """Module reprs print floats as Python's repr: the shortest digits that read
    back, fixed for exponents in [-4, 16), else with an exponent (17-digit
    values at 1e16 and above too)."""
    for eps in [1e-5, 0.1, 1.0, 1e16, 1e17, 3.6618447584186056e16, 1.2345678901234567e16, 9999999999999998.0,
                0.0001, 1.5e-05, 123456.789, 1e300, 5e-324]:
        m = lib.ct_nn_batch_norm1d(3, eps, 0.1, True, True)
        try:
            assert module_repr(m) == repr(torch.nn.BatchNorm1d(3, eps=eps))
        finally:
            lib.ct_module_free(m)


def test_adaptive_avg_pool_module_wants_three_dims(mods):
    """nn.AdaptiveAvgPool2d goes through F.adaptive_avg_pool2d, which refuses
    fewer than 3 dims in its own words (the op itself takes any rank for (1, 1))"""
    for out in [(1, 1), (2, 3)]:
        m = keep(mods, lib.ct_nn_adaptive_avg_pool2d(*out))
        for shape in [(2, 5), (7,), (2, 4, 6)]:
            x = torch.randn(shape)
            want = ct.torch_error(lambda: torch.nn.AdaptiveAvgPool2d(out)(x))
            got = lib.ct_module_forward(m, ct.from_torch(x))
            if want is None:
                ct.assert_close(ct.check(got), torch.nn.AdaptiveAvgPool2d(out)(x), rtol=1e-6, atol=1e-7)
            else:
                ct.assert_error(got, want, what=f"{out} {shape}: ")
                ct.clear_error()
