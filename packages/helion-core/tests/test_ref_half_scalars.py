"""float16/bfloat16 ops with a Python-number operand on the ref backend, bit for bit against
eager PyTorch on CPU.

PyTorch treats a Python number next to a tensor unlike a tensor of the same value:

* `x * s` and `x / s` read the number at float32 (`iter.original_scalar_value<opmath_t>`),
  compute in float32 and round once: bf16 `x * 1.003` is not `x * bf16(1.003)` = `x * 1.0`.
  `s * x` is `x * s` (Tensor.__rmul__).
* `s / x` is `x.reciprocal() * s` (Tensor.__rtruediv__), which differs from
  `torch.div(s, x)` in the last bit; `torch.mul(s, x)` rounds s to x's dtype (no reflected
  method). Where `s` is a scalar argument, Python calls its proxy's `__mul__` first: the tracer
  then takes the tensor's reflected method, as eager code does.
* `+`, `-`, `**`, `%`, comparisons and `where` round the number to the tensor's dtype first.
* A 0-D tensor of another dtype follows the same promotion as a number, but only as the second
  operand of `*`, `/`, `//` is it read at float32 (`t * x` calls `t.__mul__`: no swap).

In a kernel, a literal, a size, a scalar argument and a 0-D value computed from those alone are
Python numbers in eager code; `t[()]` (a 0-D tensor argument read on the device) is a 0-D tensor.
Every kernel runs on the ref backend on 37x50 inputs (random values, values near 1 and special
values: ±0, ±inf, nan, subnormals, the largest finite values) and must give eager PyTorch's bits.
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import helion
import helion.language as hl

SHAPE = (37, 50)
DTYPES = [torch.float16, torch.bfloat16]


# -- kernels (the op under test is a function argument, traced inline) ------------------------


def literal_kernel(x: torch.Tensor, out: torch.Tensor, fn: Callable) -> torch.Tensor:
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = fn(x[tile_m, tile_n])
    return out


def tensor_scalar_kernel(
    x: torch.Tensor, t: torch.Tensor, out: torch.Tensor, fn: Callable
) -> torch.Tensor:
    """`t` is a 0-D tensor argument, read on the device as `t[()]` (a 0-D tensor in eager)."""
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = fn(x[tile_m, tile_n], t[()])
    return out


def scalar_arg_kernel(x: torch.Tensor, s: float, out: torch.Tensor, fn: Callable) -> torch.Tensor:
    """`s` is a Python float argument (a number in eager, also after arithmetic on it)."""
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = fn(x[tile_m, tile_n], s)
    return out


_KERNELS: dict[Callable, helion.Kernel] = {}


def _ref(fn: Callable) -> helion.Kernel:
    if fn not in _KERNELS:
        _KERNELS[fn] = helion.kernel(fn, backend="ref", autotune_effort="none")
    return _KERNELS[fn]


# -- inputs and the comparison --------------------------------------------------------------------


def inputs(dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = (torch.randn(SHAPE, generator=generator) * 3).to(dtype)
    info = torch.finfo(dtype)
    near_one = 1 + (torch.rand(50, generator=generator) - 0.5) * 0.05
    specials = [
        0.0,
        -0.0,
        float("inf"),
        float("-inf"),
        float("nan"),
        info.tiny,  # the smallest normal
        -info.tiny,
        info.tiny / 4,  # subnormals
        -info.tiny / 2,
        info.smallest_normal * info.eps,  # the smallest subnormal
        info.max,
        -info.max,
        1.0,
        -1.0,
        0.1,
        1.003,
        -1.003,
        3.0,
        1.5,
        -0.5,
    ]
    flat = x.view(-1)
    flat[: len(specials)] = torch.tensor(specials, dtype=torch.float64).to(dtype)
    flat[len(specials) : len(specials) + 50] = near_one.to(dtype)
    return x


def assert_same_bits(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype == torch.bool:
        differ = actual != expected
    else:
        bits = torch.int16 if expected.element_size() == 2 else torch.int32
        differ = actual.view(bits) != expected.view(bits)
    if bool(differ.any()):
        lanes = differ.nonzero()[:5].tolist()
        shown = [(lane, actual[tuple(lane)].item(), expected[tuple(lane)].item()) for lane in lanes]
        raise AssertionError(
            f"{int(differ.sum())} of {differ.numel()} lanes differ (lane, ref, eager): {shown}"
        )


def run_literal(fn: Callable, dtype: torch.dtype) -> None:
    x = inputs(dtype)
    expected = fn(x.clone())
    actual = _ref(literal_kernel)(x.clone(), torch.empty_like(expected), fn)
    assert_same_bits(actual, expected)


# -- a literal operand ----------------------------------------------------------------------------

ARITHMETIC = {
    # read at float32, rounded once
    "x * 1.003": lambda x: x * 1.003,
    "1.003 * x": lambda x: 1.003 * x,
    "x * 0.1": lambda x: x * 0.1,
    "x * 257": lambda x: x * 257,  # an int bf16 does not hold
    "257 * x": lambda x: 257 * x,
    "x / 1.003": lambda x: x / 1.003,
    "x / 0.1": lambda x: x / 0.1,
    "x // 1.003": lambda x: x // 1.003,
    # `number / x` is `x.reciprocal() * number`
    "3.0 / x": lambda x: 3.0 / x,
    "1.003 / x": lambda x: 1.003 / x,
    "1 / x": lambda x: 1 / x,
    # the number rounded to x's dtype first
    "x + 1.003": lambda x: x + 1.003,
    "1.003 + x": lambda x: 1.003 + x,
    "x - 0.1": lambda x: x - 0.1,
    "0.1 - x": lambda x: 0.1 - x,
    "x ** 1.5": lambda x: x**1.5,
    "x ** 1.003": lambda x: x**1.003,
    "x ** 2": lambda x: x**2,
    "x % 1.003": lambda x: x % 1.003,
    "where(x > 0, x, 0.1)": lambda x: torch.where(x > 0, x, 0.1),
    "where(x > 0, 1.003, x)": lambda x: torch.where(x > 0, 1.003, x),
    # several numbers in one expression
    "(x - 0.1) * 1.003 + 3.0 / x": lambda x: (x - 0.1) * 1.003 + 3.0 / x,
    # a torch function given the number first rounds it (no reflected method): torch.mul(1.003,
    # x) is x * bf16(1.003), and torch.div(s, x) one division, not a reciprocal
    "torch.mul(1.003, x)": lambda x: torch.mul(1.003, x),
    "torch.div(3.0, x)": lambda x: torch.div(3.0, x),
    "torch.div(1.003, x)": lambda x: torch.div(1.003, x),
    "torch.true_divide(1.003, x)": lambda x: torch.true_divide(1.003, x),
    "torch.sub(1.003, x)": lambda x: torch.sub(1.003, x),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_literal_operand(name: str, dtype: torch.dtype) -> None:
    run_literal(ARITHMETIC[name], dtype)


COMPARISONS = {
    "x > 1.003": lambda x: x > 1.003,
    "x >= 1.003": lambda x: x >= 1.003,
    "x < 0.1": lambda x: x < 0.1,
    "x <= 0.1": lambda x: x <= 0.1,
    "x == 1.003": lambda x: x == 1.003,
    "x != 0.1": lambda x: x != 0.1,
    "1.003 < x": lambda x: 1.003 < x,  # noqa: SIM300 (the number first is the point)
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(COMPARISONS))
def test_comparison_with_literal(name: str, dtype: torch.dtype) -> None:
    run_literal(COMPARISONS[name], dtype)


# -- a 0-D float32 tensor argument ----------------------------------------------------------------

TENSOR_SCALAR = {
    "x * t": lambda x, t: x * t,  # read at float32
    "t * x": lambda x, t: t * x,  # Tensor.__mul__ of the 0-D tensor: t rounded to x's dtype
    "x / t": lambda x, t: x / t,
    "t / x": lambda x, t: t / x,  # no reciprocal: that is a number's __rtruediv__
    "x + t": lambda x, t: x + t,
    "x - t": lambda x, t: x - t,
    "x ** t": lambda x, t: x**t,
    "x > t": lambda x, t: x > t,
    "where(x > 0, x, t)": lambda x, t: torch.where(x > 0, x, t),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("value", [1.003, 0.1, 257.0])
@pytest.mark.parametrize("name", list(TENSOR_SCALAR))
def test_zero_dim_float32_tensor(name: str, value: float, dtype: torch.dtype) -> None:
    fn = TENSOR_SCALAR[name]
    x = inputs(dtype)
    t = torch.tensor(value, dtype=torch.float32)
    expected = fn(x.clone(), t.clone())
    actual = _ref(tensor_scalar_kernel)(x.clone(), t.clone(), torch.empty_like(expected), fn)
    assert_same_bits(actual, expected)


# -- a scalar argument, and numbers computed from it --------------------------------------------

SCALAR_ARG = {
    "x * s": lambda x, s: x * s,
    "s * x": lambda x, s: s * x,
    "x / s": lambda x, s: x / s,
    "s / x": lambda x, s: s / x,
    "x + s": lambda x, s: x + s,
    "s - x": lambda x, s: s - x,
    "x > s": lambda x, s: x > s,
    "(s * 2) * x": lambda x, s: (s * 2) * x,
    "(s + 1) / x": lambda x, s: (s + 1) / x,
    "x ** (s * 1.5)": lambda x, s: x ** (s * 1.5),
    "torch.mul(s, x)": lambda x, s: torch.mul(s, x),
    "torch.div(s, x)": lambda x, s: torch.div(s, x),
    "s // x": lambda x, s: s // x,
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(SCALAR_ARG))
def test_scalar_argument(name: str, dtype: torch.dtype) -> None:
    fn = SCALAR_ARG[name]
    x = inputs(dtype)
    s = 1.003
    expected = fn(x.clone(), s)
    actual = _ref(scalar_arg_kernel)(x.clone(), s, torch.empty_like(expected), fn)
    assert_same_bits(actual, expected)


# -- float32: `number / x` is a reciprocal times the number there too ---------------------------
#
# (Not `x ** number`: torch's CPU pow takes a float32 x's exponent at float32 in its vectorized
# loop but at float64 in the scalar loop of the last lanes, so its bits depend on where a lane
# sits; the ref backend's number computed from a scalar argument is a float32 value.)


@pytest.mark.parametrize("name", ["3.0 / x", "1.003 / x", "x * 1.003", "x / 1.003"])
def test_float32_literal(name: str) -> None:
    run_literal(ARITHMETIC[name], torch.float32)


@pytest.mark.parametrize("name", ["s / x", "(s + 1) / x"])
def test_float32_scalar_argument(name: str) -> None:
    fn = SCALAR_ARG[name]
    x = inputs(torch.float32)
    expected = fn(x.clone(), 1.003)
    actual = _ref(scalar_arg_kernel)(x.clone(), 1.003, torch.empty_like(expected), fn)
    assert_same_bits(actual, expected)
