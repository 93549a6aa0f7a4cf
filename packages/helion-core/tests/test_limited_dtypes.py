"""float8 and uint16 / uint32 / uint64 in device code: torch implements few kernels for them
(float8 ``x + y`` raises "add_stub" not implemented), so the ops torch refuses are refused when
the kernel is traced, for every backend, naming the op, the dtype and the kernel's line with a
hint to cast first; what torch does in these dtypes (loads, stores, casts, where, ==, matmul of
fp8; mul and bitwise ops of uint32, ...) keeps working and matches torch."""

from __future__ import annotations

import pytest
import torch

import helion.language as hl
from helion import exc
from helion.language import _ops as ops
from helion.testing import kernel_for

BACKENDS = ["ref", "triton", "pallas"]
FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
UNSIGNED = [torch.uint16, torch.uint32, torch.uint64]


def _binary(x: torch.Tensor, y: torch.Tensor, op: str) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    for tile in hl.tile(x.size(0)):
        a = x[tile, :]
        b = y[tile, :]
        if op == "add":
            r = a + b
        elif op == "sub":
            r = a - b
        elif op == "mul":
            r = a * b
        elif op == "div":
            r = a / b
        elif op == "scalar_add":
            r = a + 1
        elif op == "neg":
            r = -a
        elif op == "abs":
            r = torch.abs(a)
        elif op == "exp":
            r = torch.exp(a)
        elif op == "lt":
            r = a < b
        elif op == "maximum":
            r = torch.maximum(a, b)
        elif op == "sum":
            r = a.sum(-1, keepdim=True) + b * 0
        elif op == "amax":
            r = a.amax(-1, keepdim=True) + b * 0
        else:
            r = torch.cumsum(a, -1)
        out[tile, :] = r.to(torch.float32)
    return out


FP8_REFUSED = ["add", "sub", "mul", "div", "scalar_add", "neg", "abs", "exp", "lt", "maximum"]
FP8_REFUSED += ["sum", "amax", "cumsum"]
# torch 2.13 has mul, div, bitwise ops, ==, exp (in float) and sum of uint32, not these
UNSIGNED_REFUSED = ["add", "sub", "scalar_add", "neg", "abs", "lt", "maximum", "amax"]


def _inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        x = torch.randn(7, 13, generator=generator).to(dtype)
        y = torch.randn(7, 13, generator=generator).to(dtype)
    else:
        x = torch.randint(0, 100, (7, 13), generator=generator).to(dtype)
        y = torch.randint(1, 100, (7, 13), generator=generator).to(dtype)
    return x, y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("dtype", "op"),
    [(d, op) for d in FP8 for op in FP8_REFUSED]
    + [(d, op) for d in UNSIGNED for op in UNSIGNED_REFUSED],
    ids=str,
)
def test_refused_where_torch_refuses(backend: str, dtype: torch.dtype, op: str) -> None:
    x, y = _inputs(dtype)
    kernel = kernel_for(_binary, backend)
    with pytest.raises(exc.UnsupportedDtype) as info:
        kernel(x, y, op)
    text = str(info.value)
    assert str(dtype) in text
    assert "Cast to a wider float first" in text
    # the kernel's line, not one of the tracer's
    assert info.value.loc is not None and info.value.loc.filename == __file__
    assert info.value.loc.name == "_binary"


@pytest.mark.parametrize("dtype", FP8 + UNSIGNED, ids=str)
@pytest.mark.parametrize("op", ["add", "lt"])
def test_torch_refuses_them_too(dtype: torch.dtype, op: str) -> None:
    """The premise: eager torch raises for these pairs (if it stops, the table should follow)."""
    x, y = _inputs(dtype)
    with pytest.raises((RuntimeError, NotImplementedError)):
        (x + y) if op == "add" else (x < y)


def test_message_names_op_dtype_and_line() -> None:
    x, y = _inputs(torch.float8_e4m3fn)
    with pytest.raises(exc.UnsupportedDtype) as info:
        kernel_for(_binary, "ref")(x, y, "add")
    text = str(info.value)
    assert "add (+) is not supported on torch.float8_e4m3fn values" in text
    assert "r = a + b" in text
    assert ".to(torch.float8_e4m3fn)" in text


def _fp8_allowed(x: torch.Tensor, y: torch.Tensor, v: torch.Tensor, w: torch.Tensor) -> tuple:
    n, k = x.shape
    same = torch.empty([n, k], dtype=torch.bool, device=x.device)
    nan = torch.empty([n, k], dtype=torch.bool, device=x.device)
    picked = torch.empty_like(x)
    widened = torch.empty([n, k], dtype=torch.float32, device=x.device)
    product = torch.empty([n, w.size(1)], dtype=torch.float32, device=x.device)
    for tile in hl.tile(n):
        a = x[tile, :]
        b = y[tile, :]
        same[tile, :] = (a == b) | (a != a)
        nan[tile, :] = torch.isnan(a)
        picked[tile, :] = torch.where(a == b, a, b)
        widened[tile, :] = a.to(torch.float32) + b.to(torch.float32) * 2
        product[tile, :] = hl.dot(v[tile, :], w[:, :], out_dtype=torch.float32)
    return same, nan, picked, widened, product


@pytest.mark.parametrize("backend", ["ref", "triton"])
@pytest.mark.parametrize("dtype", FP8, ids=str)
def test_fp8_ops_torch_has_keep_working(backend: str, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(1)
    x = (torch.randn(19, 32, generator=generator) * 4).to(dtype)
    y = x.clone()
    y[::3] = torch.randn(7, 32, generator=generator).to(dtype)
    x[0, 0] = float("nan")
    y[0, 0] = float("nan")
    x[1, 1], y[1, 1] = -0.0, 0.0  # equal values, different bits
    v = torch.randn(19, 32, generator=generator).to(dtype)
    w = torch.randn(32, 16, generator=generator).to(dtype)
    same, nan, picked, widened, product = kernel_for(_fp8_allowed, backend)(x, y, v, w)
    assert torch.equal(same, (x == y) | (x != x))
    assert torch.equal(nan, torch.isnan(x))
    assert torch.equal(picked.view(torch.uint8), torch.where(x == y, x, y).view(torch.uint8))
    torch.testing.assert_close(widened, x.float() + y.float() * 2, equal_nan=True)
    torch.testing.assert_close(product, v.float() @ w.float(), atol=1e-3, rtol=1e-3)


def _unsigned_allowed(x: torch.Tensor, y: torch.Tensor) -> tuple:
    product = torch.empty_like(x)
    masked = torch.empty_like(x)
    same = torch.empty(x.shape, dtype=torch.bool, device=x.device)
    for tile in hl.tile(x.size(0)):
        a = x[tile, :]
        b = y[tile, :]
        product[tile, :] = a * b
        masked[tile, :] = (a & b) ^ 0xF0
        same[tile, :] = a == b
    return product, masked, same


@pytest.mark.parametrize("backend", ["ref", "triton"])
@pytest.mark.parametrize("dtype", UNSIGNED, ids=str)
def test_unsigned_ops_torch_has_keep_working(backend: str, dtype: torch.dtype) -> None:
    x, y = _inputs(dtype)
    y[::2] = x[::2]
    product, masked, same = kernel_for(_unsigned_allowed, backend)(x, y)
    assert torch.equal(product, x * y)
    assert torch.equal(masked, (x & y) ^ 0xF0)
    assert torch.equal(same, x == y)


def test_check_uses_the_common_dtype() -> None:
    """The dtype an op computes in decides: a sum given dtype=float32 computes in float32."""
    assert ops.compute_dtype("reduce_sum", [_value(torch.uint32)], {"dtype": torch.int64}) == (
        torch.int64
    )
    ops.check_dtype_support("reduce_sum", [_value(torch.float8_e5m2)], {"dtype": torch.float32})
    ops.check_dtype_support("cast", [_value(torch.float8_e5m2)], {"dtype": torch.float16})
    with pytest.raises(exc.UnsupportedDtype):
        ops.check_dtype_support("add", [_value(torch.float8_e4m3fn), 1.0], {})
    with pytest.raises(exc.UnsupportedDtype):
        ops.check_dtype_support("reduce_argmax", [_value(torch.uint32)], {"dtype": torch.int64})
    with pytest.raises(exc.UnsupportedDtype, match="promotes uint16, uint32 and uint64"):
        ops.check_dtype_support("mul", [_value(torch.uint32), _value(torch.int64)], {})


def _mixed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :] + y[tile, :]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp8_with_another_dtype_is_refused(backend: str) -> None:
    """torch promotes float8 with no other dtype: float8 + float32 raises there too."""
    x, _ = _inputs(torch.float8_e4m3fn)
    y = torch.randn(7, 13)
    with pytest.raises(RuntimeError):
        x + y
    with pytest.raises(exc.UnsupportedDtype) as info:
        kernel_for(_mixed, backend)(x, y)
    assert "torch.float8_e4m3fn and torch.float32" in str(info.value)
    assert "promotes float8 with no other dtype" in str(info.value)


def _value(dtype: torch.dtype) -> ops.Value:
    return ops.Value(ops.TensorType((4,), dtype), "v")
