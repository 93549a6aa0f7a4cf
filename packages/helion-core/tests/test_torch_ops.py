"""Torch ops inside kernels against eager PyTorch, on every installed backend.

Each op runs inside a kernel on the ref, Triton (its interpreter on CPU) and Pallas (interpret
mode) backends and in eager mode, on fresh random inputs of non-power-of-two shapes in float32
and a 16-bit float dtype, with special values (nan, ±inf, ±0.0, halfway cases) mixed in. A
backend that is not installed is skipped. The ops here are decompositions in the torch table
(`helion.frontend.torch_table`), so one definition serves every backend.

The last part checks that an argument the table does not handle is refused with an
`UnsupportedTorchOp` that names the argument, the op and the kernel's line, never dropped.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import helion
import helion.language as hl
from helion import backends
from helion import exc

THIS_FILE = __file__
# the backends installed here: in core's isolated environment that is ref (and eager mode), and
# the cross-package run (every plugin installed) covers Triton and Pallas; a backend installed
# but unusable still fails through `backend` below
_INSTALLED = {b.name for b in backends.list_backends()}
BACKENDS = ["ref", *(name for name in ("triton", "pallas") if name in _INSTALLED), "eager"]
SHAPE = (13, 37)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@functools.cache
def _kernel(fn: Callable, backend: str) -> helion.Kernel:
    if backend == "eager":
        return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)
    return helion.kernel(fn, backend=backend, autotune_effort="none")


# -- kernels: the op under test is a function argument, traced inline ---------------------------


def unary_kernel(x: torch.Tensor, out: torch.Tensor, fn: Callable) -> torch.Tensor:
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = fn(x[tile_m, tile_n])
    return out


def binary_kernel(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, fn: Callable):
    for tile_m, tile_n in hl.tile(a.size()):
        out[tile_m, tile_n] = fn(a[tile_m, tile_n], b[tile_m, tile_n])
    return out


def row_kernel(x: torch.Tensor, out: torch.Tensor, fn: Callable) -> torch.Tensor:
    for tile_m in hl.tile(x.size(0)):
        out[tile_m] = fn(x[tile_m, :])
    return out


def row_keepdim_kernel(x: torch.Tensor, out: torch.Tensor, fn: Callable) -> torch.Tensor:
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = fn(x[tile_m, :])
    return out


# -- inputs --------------------------------------------------------------------------------------

SPECIALS = [
    math.nan,
    math.inf,
    -math.inf,
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    0.25,
    -0.75,
    0.125,
    25.0,
    35.0,
    -15.0,
    -0.04,
    -3.0,
    3.0,
    1e-30,
    -1e-30,
]


def floats(dtype: torch.dtype, *, scale: float = 3.0, specials: bool = True) -> torch.Tensor:
    """Random values of `SHAPE` with the special values written over the start of row 0..1."""
    x = (torch.randn(SHAPE) * scale).to(dtype)
    if specials:
        flat = x.view(-1)
        flat[: len(SPECIALS)] = torch.tensor(SPECIALS).to(dtype)
        flat[len(SPECIALS) : 2 * len(SPECIALS)] = -torch.tensor(SPECIALS).to(dtype)
    return x


def divisors(dtype: torch.dtype) -> torch.Tensor:
    """Divisors away from 0 (a tiny divisor makes a huge quotient), random signs, with 0."""
    sign = torch.randint(0, 2, SHAPE) * 2 - 1
    b = (sign * (0.25 + 3 * torch.rand(SHAPE))).to(dtype)
    flat = b.view(-1)
    flat[:8] = torch.tensor([2.0, -2.0, 0.0, -0.0, 3.0, 0.5, 1.0, -0.25]).to(dtype)
    return b


# how a result is compared with torch's
CLOSE = "close"  # within the dtype's tolerance (transcendental functions, reductions)
EXACT = "exact"  # bit for bit, except the sign of a zero
SIGNED = "signed"  # bit for bit, signs of zeros included

# fp32 division under XLA on CPU (Pallas interpret mode) is not correctly rounded: `x / 10.0` can
# be 1 ulp off, so a decomposition that divides is compared within 2 ulps there
PALLAS_DIVISION = {"atol": 0.0, "rtol": 2.5e-7}


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    return {
        torch.float64: {"atol": 1e-10, "rtol": 1e-10},
        torch.float32: {"atol": 1e-5, "rtol": 1e-5},
        torch.float16: {"atol": 1e-3, "rtol": 1e-3},
        torch.bfloat16: {"atol": 1e-2, "rtol": 1e-2},
    }[dtype]


def assert_matches(
    actual: torch.Tensor, expected: torch.Tensor, check: str, tolerance: dict | None = None
) -> None:
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if check == CLOSE and expected.dtype.is_floating_point:
        tolerance = tolerance or _tolerance(expected.dtype)
        torch.testing.assert_close(actual, expected, equal_nan=True, **tolerance)
        return
    tolerance = tolerance or {"atol": 0, "rtol": 0}
    torch.testing.assert_close(actual, expected, equal_nan=True, **tolerance)
    if check == SIGNED and expected.dtype.is_floating_point:
        zeros = expected == 0
        signs, expected_signs = torch.signbit(actual[zeros]), torch.signbit(expected[zeros])
        assert torch.equal(signs, expected_signs), "signs of zeros differ"


def run_unary(
    fn: Callable, x: torch.Tensor, backend: str, check: str, tolerance=None, on_cpu: bool = False
) -> None:
    """`on_cpu`: the expected result is torch's CPU kernel's, where its devices disagree."""
    expected = fn(x.cpu()).to(x.device) if on_cpu else fn(x.clone())
    out = torch.empty_like(expected)
    actual = _kernel(unary_kernel, backend)(x.clone(), out, fn)
    assert_matches(actual, expected, check, tolerance)


def run_binary(
    fn: Callable, a: torch.Tensor, b: torch.Tensor, backend: str, check: str, tolerance=None
) -> None:
    expected = fn(a.clone(), b.clone())
    out = torch.empty_like(expected)
    actual = _kernel(binary_kernel, backend)(a.clone(), b.clone(), out, fn)
    assert_matches(actual, expected, check, tolerance)


def run_rows(fn: Callable, x: torch.Tensor, backend: str, *, keepdim: bool = False) -> None:
    expected = fn(x.clone())
    out = torch.empty_like(expected)
    kernel = row_keepdim_kernel if keepdim else row_kernel
    actual = _kernel(kernel, backend)(x.clone(), out, fn)
    assert_matches(actual, expected, CLOSE)


FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.fixture(params=FLOAT_DTYPES, ids=str)
def dtype(request) -> torch.dtype:
    return request.param


# -- round(decimals=) ----------------------------------------------------------------------------


ROUNDS = {
    0: lambda v: torch.round(v, decimals=0),
    1: lambda v: torch.round(v, decimals=1),
    2: lambda v: v.round(decimals=2),
    3: lambda v: torch.round(v, decimals=3),
    -1: lambda v: torch.round(v, decimals=-1),
    -2: lambda v: v.round(decimals=-2),
}


def _round_tolerance(backend: str, dtype: torch.dtype, decimals: int) -> dict | None:
    # for decimals > 0 the last step divides by 10**decimals
    if backend == "pallas" and dtype == torch.float32 and decimals > 0:
        return PALLAS_DIVISION
    return None


@pytest.mark.parametrize("decimals", sorted(ROUNDS))
def test_round_decimals(backend, dtype, decimals):
    torch.manual_seed(decimals + 10)
    # values on a fine grid around the rounding points, so that halfway cases occur often
    x = floats(dtype, scale=50.0)
    grid = torch.randint(-4000, 4000, SHAPE) * 0.025
    x[2:6] = grid[2:6].to(dtype)
    tolerance = _round_tolerance(backend, dtype, decimals)
    if x.device.type != "cpu" and dtype.itemsize == 2:
        # torch's CUDA kernel rounds x * 10**decimals to the 16-bit dtype before rounding to an
        # integer (bf16 -10.9375 -> -11.0); its CPU kernel, which every backend follows, does not
        run_unary(ROUNDS[decimals], x, backend, EXACT, tolerance, on_cpu=True)
        return
    run_unary(ROUNDS[decimals], x, backend, EXACT, tolerance)


def test_round_decimals_halfway_cases(backend):
    values = [0.25, 0.75, -0.25, 0.35, 2.5, -2.5, 0.125, 0.375, 25.0, 35.0, -15.0, 150.0, -0.04]
    x = torch.tensor(values * 3)[:37].repeat(13, 1).contiguous()
    for decimals in (1, 2, -1, -2):
        tolerance = _round_tolerance(backend, torch.float32, decimals)
        run_unary(ROUNDS[decimals], x, backend, EXACT, tolerance)


@pytest.mark.parametrize("decimals", [0, 1, -1])
def test_round_keeps_negative_zero(backend, decimals):
    x = torch.tensor([-0.0, -0.3, -0.04, -4.0, -0.5, 0.3, 0.0] * 6)[:37].repeat(13, 1)
    run_unary(ROUNDS[decimals], x.contiguous(), backend, SIGNED)


# -- new elementwise ops -------------------------------------------------------------------------

# (name, fn, check): each on random values with the special values mixed in. Ops built on clamp
# are EXACT, not SIGNED: clamp's sign of a zero at a bound of 0 is the backend's (max(-0.0, 0.0)).
UNARY_CASES = [
    ("square", lambda v: torch.square(v), CLOSE),
    ("square_method", lambda v: v.square(), CLOSE),
    ("frac", lambda v: torch.frac(v), SIGNED),
    ("frac_method", lambda v: v.frac(), SIGNED),
    ("clamp_min", lambda v: torch.clamp_min(v, -0.5), EXACT),
    ("clamp_max", lambda v: torch.clamp_max(v, 1.25), EXACT),
    ("clamp_min_method", lambda v: v.clamp_min(0.0), EXACT),
    ("clamp_max_method", lambda v: v.clamp_max(-0.25), EXACT),
    ("nan_to_num", lambda v: torch.nan_to_num(v), SIGNED),
    (
        "nan_to_num_values",
        lambda v: torch.nan_to_num(v, nan=1.5, posinf=100.0, neginf=-7.0),
        SIGNED,
    ),
    ("nan_to_num_method", lambda v: v.nan_to_num(posinf=2.0), SIGNED),
    ("fmod_scalar", lambda v: torch.fmod(v, 1.5), SIGNED),
    ("fmod_negative_scalar", lambda v: v.fmod(-2.0), SIGNED),
    ("hardtanh", lambda v: F.hardtanh(v), EXACT),
    ("hardtanh_bounds", lambda v: F.hardtanh(v, -0.5, 2.0), EXACT),
    ("relu6", lambda v: F.relu6(v), EXACT),
    ("elu", lambda v: F.elu(v), CLOSE),
    ("elu_alpha", lambda v: F.elu(v, alpha=0.7), CLOSE),
    ("selu", lambda v: F.selu(v), CLOSE),
    ("celu", lambda v: F.celu(v, alpha=1.5), CLOSE),
    ("mish", lambda v: F.mish(v), CLOSE),
    ("logsigmoid", lambda v: F.logsigmoid(v), CLOSE),
    ("softplus", lambda v: F.softplus(v), CLOSE),
    ("softplus_beta", lambda v: F.softplus(v, beta=2.0, threshold=5.0), CLOSE),
    ("hardsigmoid", lambda v: F.hardsigmoid(v), CLOSE),
    ("hardswish", lambda v: F.hardswish(v), CLOSE),
    ("leaky_relu", lambda v: F.leaky_relu(v, 0.2), CLOSE),
]


@pytest.mark.parametrize("name, fn, check", UNARY_CASES, ids=[c[0] for c in UNARY_CASES])
def test_unary_op(backend, dtype, name, fn, check):
    torch.manual_seed(len(name))
    run_unary(fn, floats(dtype), backend, check)


def _probability(q: torch.Tensor) -> torch.Tensor:
    """Targets in [0, 1] that every dtype holds exactly (a sigmoid would round in 16 bits)."""
    return (q > 0).to(q.dtype) * 0.75 + (q > 1).to(q.dtype) * 0.25


# losses and two-operand math (helion.frontend.torch_ops.losses), with the special values in both
# operands: public Helion's fused_linear_jsd calls F.kl_div(..., reduction="none")
BINARY_LOSS_CASES = [
    ("xlogy", lambda p, q: torch.xlogy(p, q)),
    ("special_xlogy", lambda p, q: torch.special.xlogy(p.abs(), q)),
    ("logaddexp", lambda p, q: torch.logaddexp(p, q)),
    ("logaddexp_method", lambda p, q: p.logaddexp(q)),
    ("addcmul", lambda p, q: torch.addcmul(p, q, p, value=0.5)),
    ("hypot", lambda p, q: torch.hypot(p, q)),
    ("mse_loss", lambda p, q: F.mse_loss(p, q, reduction="none")),
    ("huber_loss", lambda p, q: F.huber_loss(p, q, reduction="none", delta=0.7)),
    ("smooth_l1_loss", lambda p, q: F.smooth_l1_loss(p, q, reduction="none", beta=1.5)),
    ("smooth_l1_loss_beta0", lambda p, q: F.smooth_l1_loss(p, q, reduction="none", beta=0.0)),
    (
        "bce_logits",
        lambda p, q: F.binary_cross_entropy_with_logits(p, _probability(q), reduction="none"),
    ),
    (
        "bce_logits_weights",
        lambda p, q: F.binary_cross_entropy_with_logits(
            p, _probability(q), weight=q, pos_weight=p.abs(), reduction="none"
        ),
    ),
    ("kl_div", lambda p, q: F.kl_div(p, q.abs(), reduction="none")),
    ("kl_div_log_target", lambda p, q: F.kl_div(p, q, reduction="none", log_target=True)),
]


@pytest.mark.parametrize("name, fn", BINARY_LOSS_CASES, ids=[c[0] for c in BINARY_LOSS_CASES])
def test_loss_and_binary_math(backend, dtype, name, fn):
    """16-bit inputs: against torch in float32, rounded once. The decompositions compute in
    float32, as torch's CUDA kernels do; its CPU kernels round intermediate results (a - b, a
    log term) to the input's dtype, which a cancellation can turn into 16% in bf16. Eager
    mode runs those CPU kernels."""
    torch.manual_seed(len(name))
    a, b = floats(dtype), floats(dtype).flip(0)
    # eager mode runs torch's own CPU kernels
    expected = fn(a, b) if backend == "eager" else fn(a.float(), b.float()).to(dtype)
    out = torch.empty_like(expected)
    actual = _kernel(binary_kernel, backend)(a.clone(), b.clone(), out, fn)
    assert_matches(actual, expected, CLOSE)


def test_entr_and_normalize(backend, dtype):
    torch.manual_seed(9)
    run_unary(lambda v: torch.special.entr(v), floats(dtype), backend, CLOSE)
    x = floats(dtype, specials=False)
    run_rows(lambda v: F.normalize(v, dim=-1), x, backend, keepdim=True)
    run_rows(lambda v: F.normalize(v, p=1.0, dim=1, eps=1e-3), x, backend, keepdim=True)


@pytest.mark.parametrize("compiled", [b for b in BACKENDS if b != "eager"])
def test_losses_refuse_a_reduction(compiled):
    """A reduced loss is refused by name (eager mode runs torch's own, reduced on the host)."""
    x = floats(torch.float32)
    with pytest.raises(exc.UnsupportedTorchOp, match="reduction"):
        run_binary(lambda p, q: F.mse_loss(p, q), x, x, compiled, CLOSE)


INT_CASES = [
    ("square", lambda v: torch.square(v)),
    ("clamp_min", lambda v: torch.clamp_min(v, -3)),
    ("clamp_max", lambda v: v.clamp_max(4)),
    ("nan_to_num", lambda v: torch.nan_to_num(v)),
    ("fmod_scalar", lambda v: torch.fmod(v, 3)),
    ("fmod_negative_scalar", lambda v: torch.fmod(v, -4)),
]


@pytest.mark.parametrize("name, fn", INT_CASES, ids=[c[0] for c in INT_CASES])
def test_integer_op(backend, name, fn):
    torch.manual_seed(len(name))
    run_unary(fn, torch.randint(-50, 50, SHAPE, dtype=torch.int32), backend, EXACT)


def _fmod_operands(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    a = floats(dtype)
    a.view(-1)[:8] = torch.tensor([6.0, -6.0, -0.0, 1.0, -1.0, math.inf, 0.75, 5.0]).to(dtype)
    return a, divisors(dtype)


def test_fmod_tensors(backend, dtype):
    torch.manual_seed(3)
    a, b = _fmod_operands(dtype)
    run_binary(lambda p, q: torch.fmod(p, q), a, b, backend, SIGNED)


def test_fmod_tensors_within_an_ulp_of_the_dividend(backend):
    torch.manual_seed(3)
    a, b = _fmod_operands(torch.float32)
    # |a| < 20 here: an ulp of it is below 2e-6
    tolerance = {"atol": 4e-6, "rtol": 0.0}
    run_binary(lambda p, q: torch.fmod(p, q), a, b, backend, CLOSE, tolerance)


def test_trunc_division_of_integers_is_exact(backend):
    """It was trunc(a / b) of a float quotient: wrong past 2**24 (2**30 + 1 came back even)."""
    torch.manual_seed(3)
    a = torch.randint(-(2**31), 2**31 - 1, SHAPE, dtype=torch.int32)
    a[0, :6] = torch.tensor([2**30 + 1, -(2**30) - 3, 2**31 - 1, -7, 7, 0])
    b = torch.randint(-9, 10, SHAPE, dtype=torch.int32)
    b[b == 0] = 3
    b[0, :6] = torch.tensor([1, 1, 3, 2, -2, -5])
    run_binary(lambda p, q: torch.div(p, q, rounding_mode="trunc"), a, b, backend, EXACT)
    run_binary(lambda p, q: torch.div(p, -3, rounding_mode="trunc"), a, b, backend, EXACT)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_trunc_division_of_16_bit_floats_rounds_once(backend, dtype):
    """torch reads a number divisor at float32 and rounds trunc(a / b) once: bf16 1.4 / 0.7 is
    1, not trunc of a quotient rounded to 2.0 first. Two 16-bit tensors keep torch's rounded
    quotient."""
    torch.manual_seed(4)
    a = (torch.randint(-400, 400, SHAPE) * 0.7).to(dtype)
    b = torch.full(SHAPE, 0.7).to(dtype)
    run_binary(lambda p, q: torch.div(p, 0.7, rounding_mode="trunc"), a, b, backend, SIGNED)
    run_binary(lambda p, q: torch.div(p, q, rounding_mode="trunc"), a, b, backend, SIGNED)


def test_fmod_infinite_divisor(backend):
    a = floats(torch.float32)
    b = torch.full(SHAPE, math.inf)
    b[::2] = -math.inf
    run_binary(lambda p, q: torch.fmod(p, q), a, b, backend, SIGNED)


def test_remainder_follows_the_divisor_sign_exactly(backend):
    """torch.remainder (`%`) is exact, with the divisor's sign; Triton computed
    a - floor(a / b) * b, an ulp off and nan for an infinite divisor."""
    torch.manual_seed(6)
    a, b = _fmod_operands(torch.float32)
    run_binary(lambda p, q: torch.remainder(p, q), a, b, backend, SIGNED)
    infinite = torch.full(SHAPE, math.inf)
    infinite[::2] = -math.inf
    finite = floats(torch.float32).nan_to_num(0.0, 0.0, 0.0)
    run_binary(lambda p, q: p % q, finite, infinite, backend, SIGNED)


def test_fmod_integer_tensors(backend):
    torch.manual_seed(4)
    a = torch.randint(-100, 100, SHAPE, dtype=torch.int32)
    b = torch.randint(1, 9, SHAPE, dtype=torch.int32) * (torch.randint(0, 2, SHAPE) * 2 - 1)
    run_binary(lambda p, q: p.fmod(q), a, b.to(torch.int32), backend, EXACT)


def test_fmod_mixed_dtypes(backend):
    torch.manual_seed(5)
    a = torch.randint(-100, 100, SHAPE, dtype=torch.int32)
    run_binary(lambda p, q: torch.fmod(p, q), a, divisors(torch.float32), backend, SIGNED)
    run_unary(lambda v: torch.fmod(v, 2.5), a, backend, SIGNED)


def test_clamp_with_tensor_bounds(backend, dtype):
    torch.manual_seed(6)
    a, b = floats(dtype), floats(dtype, specials=False)
    run_binary(lambda p, q: torch.clamp_min(p, q), a, b, backend, EXACT)
    run_binary(lambda p, q: p.clamp_max(q), a, b, backend, EXACT)


LERP_WEIGHTS = [0.0, 0.25, -0.6, 0.5, 0.75, 1.0, 1.5]


@pytest.mark.parametrize("weight", LERP_WEIGHTS)
def test_lerp_scalar_weight(backend, dtype, weight):
    torch.manual_seed(9)
    a, b = floats(dtype, specials=False), floats(dtype, specials=False)
    # weight 0 gives start and weight 1 gives end, bit for bit, as in torch
    check = EXACT if weight in (0.0, 1.0) else CLOSE
    run_binary(lambda p, q: torch.lerp(p, q, weight), a, b, backend, check)


def test_lerp_tensor_weight(backend, dtype):
    torch.manual_seed(10)
    a, b = floats(dtype, specials=False), floats(dtype, specials=False)
    # weights on a grid of quarters (exact in every dtype), on both sides of 0.5
    run_binary(lambda p, q: p.lerp(q, torch.round(q) / 4), a, b, backend, CLOSE)
    run_binary(lambda p, q: torch.lerp(p, q, (q > 0).to(q.dtype)), a, b, backend, EXACT)


# -- norms ---------------------------------------------------------------------------------------

NORM_CASES = [
    ("vector_norm", lambda v: torch.linalg.vector_norm(v, dim=1)),
    ("vector_norm_1", lambda v: torch.linalg.vector_norm(v, 1, dim=-1)),
    ("vector_norm_inf", lambda v: torch.linalg.vector_norm(v, ord=math.inf, dim=1)),
    ("vector_norm_neg_inf", lambda v: torch.linalg.vector_norm(v, ord=-math.inf, dim=1)),
    ("vector_norm_0", lambda v: torch.linalg.vector_norm(v, ord=0, dim=1)),
    ("vector_norm_3", lambda v: torch.linalg.vector_norm(v, ord=3, dim=1)),
    ("linalg_norm", lambda v: torch.linalg.norm(v, dim=1)),
    ("norm", lambda v: torch.norm(v, dim=1)),
    ("norm_p1", lambda v: torch.norm(v, p=1, dim=1)),
    ("norm_method", lambda v: v.norm(2, 1)),
    ("norm_inf_method", lambda v: v.norm(p=float("inf"), dim=1)),
]


@pytest.mark.parametrize("name, fn", NORM_CASES, ids=[c[0] for c in NORM_CASES])
def test_norm(backend, dtype, name, fn):
    torch.manual_seed(len(name))
    run_rows(fn, floats(dtype, specials=False), backend)


KEEPDIM_NORMS = [
    ("vector_norm", lambda v: torch.linalg.vector_norm(v, dim=1, keepdim=True)),
    ("vector_norm_inf", lambda v: torch.linalg.vector_norm(v, math.inf, 1, True)),
    ("norm_method", lambda v: v.norm(p=1, dim=-1, keepdim=True)),
]


@pytest.mark.parametrize("name, fn", KEEPDIM_NORMS, ids=[c[0] for c in KEEPDIM_NORMS])
def test_norm_keepdim(backend, name, fn):
    torch.manual_seed(len(name))
    run_rows(fn, floats(torch.float32, specials=False), backend, keepdim=True)


def test_norm_with_special_values(backend):
    x = floats(torch.float32, specials=False)
    x[1, 3] = math.nan
    x[2, 5] = math.inf
    x[3, 0] = -math.inf
    x[4] = 0.0
    for _, fn in NORM_CASES[:6]:
        run_rows(fn, x, backend)


# -- table behaviour that was wrong --------------------------------------------------------------


def test_tensor_where_method(backend):
    torch.manual_seed(7)
    run_unary(lambda v: v.where(v > 0, -1.0), floats(torch.float32), backend, SIGNED)


def test_softmax_positional_dtype(backend):
    torch.manual_seed(8)
    x = floats(torch.float32, specials=False)
    expected = torch.softmax(x, 1, torch.float64)
    out = torch.empty_like(expected)
    actual = _kernel(softmax_positional_dtype, backend)(x.clone(), out)
    assert_matches(actual, expected, CLOSE)


def softmax_positional_dtype(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = torch.softmax(x[tile_m, :], 1, torch.float64)
    return out


CAST_CASES = [
    ("to_device", lambda v: v.to(v.device) * 2),
    ("to_dtype_and_device", lambda v: v.to(v.device, torch.float64, non_blocking=True)),
    ("to_keywords", lambda v: v.to(device=v.device, dtype=torch.float16, copy=True)),
    ("type_dtype", lambda v: v.type(torch.float64)),
    ("double_contiguous", lambda v: v.double().contiguous()),
    ("clone_detach", lambda v: torch.clone(v).detach() + 1),
    ("zeros_like", lambda v: v + torch.zeros_like(v, dtype=torch.float64, device=v.device)),
    ("full_like", lambda v: torch.full_like(v, 2.5, memory_format=torch.preserve_format) * v),
]


@pytest.mark.parametrize("name, fn", CAST_CASES, ids=[c[0] for c in CAST_CASES])
def test_handled_keywords_of_casts_and_creation(backend, name, fn):
    torch.manual_seed(11)
    run_unary(fn, floats(torch.float32, specials=False), backend, EXACT)


# -- arguments the table does not handle ---------------------------------------------------------


def exp_out(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = torch.exp(v, out=v)
    return out


def round_out(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = torch.round(v, decimals=1, out=v)
    return out


def add_out(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = torch.add(v, 1.0, out=v)
    return out


def clamp_out(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = torch.clamp(v, 0.0, 1.0, out=v)
    return out


def relu_inplace(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = F.relu(v, inplace=True)
    return out


def leaky_relu_inplace(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = F.leaky_relu(v, 0.1, True)
    return out


def sum_out(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        v = x[tile, :]
        out[tile] = torch.sum(v, 1, out=v)
    return out


def type_string(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile].type("torch.DoubleTensor")
    return out


def zeros_like_requires_grad(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.zeros_like(x[tile], requires_grad=True)
    return out


def matrix_norm(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.linalg.norm(x[tile, :], ord="nuc", dim=1)
    return out


def round_integer(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.round(x[tile], decimals=1)
    return out


UNHANDLED = [
    (exp_out, "out", "torch.exp(v, out=v)"),
    (round_out, "out", "torch.round(v, decimals=1, out=v)"),
    (add_out, "out", "torch.add(v, 1.0, out=v)"),
    (clamp_out, "out", "torch.clamp(v, 0.0, 1.0, out=v)"),
    (relu_inplace, "inplace", "F.relu(v, inplace=True)"),
    (leaky_relu_inplace, "inplace", "F.leaky_relu(v, 0.1, True)"),
    (sum_out, "out", "torch.sum(v, 1, out=v)"),
    (type_string, "dtype", 'x[tile].type("torch.DoubleTensor")'),
    (zeros_like_requires_grad, "requires_grad", "torch.zeros_like(x[tile], requires_grad=True)"),
    (matrix_norm, "ord='nuc'", 'torch.linalg.norm(x[tile, :], ord="nuc", dim=1)'),
]


@pytest.mark.parametrize(
    "fn, argument, line", UNHANDLED, ids=[case[0].__name__ for case in UNHANDLED]
)
def test_unhandled_argument_is_refused(fn, argument, line):
    x = torch.randn(10, 6) if fn in (sum_out, matrix_norm) else torch.randn(10)
    with pytest.raises(exc.UnsupportedTorchOp) as info:
        helion.kernel(fn, backend="ref", autotune_effort="none")(x)
    message = str(info.value)
    assert f"`{argument}`" in message, message
    assert THIS_FILE in message and line in message, message


def test_round_decimals_of_an_integer_is_refused():
    with pytest.raises(exc.BaseError, match="decimals") as info:
        helion.kernel(round_integer, backend="ref", autotune_effort="none")(
            torch.arange(10, dtype=torch.int32)
        )
    assert "torch.round(x[tile], decimals=1)" in str(info.value)


# -- placement arguments of creation ops (torch.rand & co. included) ------------------------------
# a new device value is dense, on the kernel's device and without autograd history: arguments
# that say so are honoured, any other value is refused like an unhandled argument


def rand_plain(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.rand([tile])
    return out


# each *_placed kernel calls at the site of its *_plain one (a random op's stream depends on the
# line of the call in the kernel and its column)
def rand_placed(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.rand(
            [tile], device=x.device, layout=torch.strided, pin_memory=False, requires_grad=False
        )
    return out


def randn_like_plain(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.randn_like(x[tile])
    return out


def randn_like_placed(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.randn_like(
            x[tile], device=x.device, layout=torch.strided, requires_grad=False
        )
    return out


@pytest.mark.parametrize(
    "plain, placed",
    [(rand_plain, rand_placed), (randn_like_plain, randn_like_placed)],
    ids=["rand", "randn_like"],
)
def test_random_ops_honour_placement_on_the_kernel_device(backend, plain, placed):
    if backend == "pallas":
        pytest.skip("the pallas backend has no random numbers")
    x = torch.randn(37)
    torch.manual_seed(3)
    expected = _kernel(plain, backend)(x)
    torch.manual_seed(3)
    actual = _kernel(placed, backend)(x)
    assert actual.device == x.device and torch.equal(actual, expected)
    if plain is rand_plain:
        assert actual.min() >= 0 and actual.max() < 1


def zeros_placed(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        ones = torch.ones([tile], dtype=x.dtype, device=x.device, pin_memory=False)
        out[tile] = x[tile] * ones + torch.zeros_like(x[tile], device=str(x.device))
    return out


def test_creation_ops_honour_the_kernel_device(backend):
    x = torch.randn(37)
    torch.testing.assert_close(_kernel(zeros_placed, backend)(x), x * torch.ones_like(x))


def rand_other_device(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.rand([tile], device="meta")
    return out


def randn_requires_grad(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.randn([tile], requires_grad=True)
    return out


def rand_pinned(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.rand(tile, pin_memory=True)
    return out


def rand_like_sparse(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.rand_like(x[tile], layout=torch.sparse_coo)
    return out


def randn_like_other_device(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.randn_like(x[tile], device="meta")
    return out


def randn_like_requires_grad(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.randn_like(x[tile], requires_grad=True)
    return out


def zeros_other_device(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + torch.zeros([tile], device="meta")
    return out


def new_full_pinned(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x.new_full([tile], 2.0, pin_memory=True)
    return out


PLACEMENT_REFUSED = [
    (rand_other_device, "device", 'torch.rand([tile], device="meta")'),
    (randn_requires_grad, "requires_grad", "torch.randn([tile], requires_grad=True)"),
    (rand_pinned, "pin_memory", "torch.rand(tile, pin_memory=True)"),
    (rand_like_sparse, "layout", "torch.rand_like(x[tile], layout=torch.sparse_coo)"),
    (randn_like_other_device, "device", 'torch.randn_like(x[tile], device="meta")'),
    (randn_like_requires_grad, "requires_grad", "torch.randn_like(x[tile], requires_grad=True)"),
    (zeros_other_device, "device", 'torch.zeros([tile], device="meta")'),
    (new_full_pinned, "pin_memory", "x.new_full([tile], 2.0, pin_memory=True)"),
]


@pytest.mark.parametrize(
    "fn, argument, line", PLACEMENT_REFUSED, ids=[case[0].__name__ for case in PLACEMENT_REFUSED]
)
def test_placement_a_device_value_cannot_have_is_refused(fn, argument, line):
    with pytest.raises(exc.UnsupportedTorchOp) as info:
        helion.kernel(fn, backend="ref", autotune_effort="none")(torch.randn(10))
    message = str(info.value)
    assert f"`{argument}`" in message, message
    assert line.split("(")[0].replace("x.", "torch.Tensor.") in message, message
    assert THIS_FILE in message and line in message, message
    if argument == "device":  # the device asked for, and the kernel's
        assert "meta" in message and "cpu" in message, message


# -- a TypeError of torch while an op is traced is a helion error with the kernel's line -----------


def transpose_str_dim(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :].transpose(0, "1").transpose(0, 1)
    return out


def permute_str_dims(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :].permute("a", "b")
    return out


def ones_of_positional_tiles(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + torch.ones(tile_m, tile_n)
    return out


def zeros_with_str_dtype(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + torch.zeros([tile_m, tile_n], dtype="float32")
    return out


def _torch_type_error(call: Callable) -> str:
    """torch's own message for `call` on ordinary tensors."""
    with pytest.raises(TypeError) as info:
        call()
    return str(info.value)


# torch's argument parser rejects the last two calls before any table handler runs: only the
# tracer sees the TypeError (`Tracer.trace` passes it to `type_error_at_call` in
# helion.frontend.torch_table, which turns it into this error)
TYPE_ERRORS = [
    pytest.param(
        transpose_str_dim,
        "torch.Tensor.transpose",
        'x[tile, :].transpose(0, "1")',
        "list indices must be integers",
        id="transpose_str_dim",
    ),
    pytest.param(
        permute_str_dims,
        "torch.Tensor.permute",
        'x[tile, :].permute("a", "b")',
        "not all arguments converted",
        id="permute_str_dims",
    ),
    pytest.param(
        ones_of_positional_tiles,
        "torch.ones",
        "torch.ones(tile_m, tile_n)",
        _torch_type_error(lambda: torch.ones(object(), object())),
        id="ones_of_positional_tiles",
    ),
    pytest.param(
        zeros_with_str_dtype,
        "torch.zeros",
        'torch.zeros([tile_m, tile_n], dtype="float32")',
        _torch_type_error(lambda: torch.zeros([2, 3], dtype="float32")),
        id="zeros_with_str_dtype",
    ),
]


@pytest.mark.parametrize("fn, op, line, torch_message", TYPE_ERRORS)
def test_type_error_of_torch_names_the_op_and_the_line(fn, op, line, torch_message):
    with pytest.raises(exc.TorchOpTracingError) as info:
        helion.kernel(fn, backend="ref", autotune_effort="none")(torch.randn(6, 10))
    message = str(info.value)
    assert op in message and torch_message in message, message
    assert THIS_FILE in message and line in message, message
    assert isinstance(info.value.__cause__, TypeError)


def softmax_of_a_missing_dim(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :].softmax(dim=5)
    return out


def test_helion_errors_inside_an_op_stay_as_they_are():
    with pytest.raises(exc.InvalidReductionDim) as info:
        helion.kernel(softmax_of_a_missing_dim, backend="ref", autotune_effort="none")(
            torch.randn(6, 10)
        )
    assert "x[tile, :].softmax(dim=5)" in str(info.value)
