"""Elementwise ops on special values (NaN, +-inf, +-0) match eager torch.

- ``torch.sign`` on bfloat16 converted its 0/1 flags with a bare ``.to(tl.bfloat16)``, which
  the interpreter does by reinterpreting bits (sign(3.0) was 9.18e-41).
- Float ``//`` (and ``torch.div(rounding_mode="floor")``, ``torch.floor_divide``) was
  ``floor(a / b)``: ``inf // 1.5`` gave inf where torch (which goes through fmod) gives NaN.
- ``torch.atan2`` in the interpreter (a helper; libdevice's atan2 on the GPU) was
  ``atan(y / x)`` and quadrant fixes: NaN for two infinities and the wrong sign for -0.0.
"""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl

NAN, INF = float("nan"), float("inf")
SPECIALS = [NAN, INF, -INF, 0.0, -0.0, 1.5, -1.5, 3.0, -3.0, 0.75, -2.0, 1e-3]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def special_tensor(dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    """37x50 values: random normals with specials placed all over, including every pair."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(37, 50, generator=gen) * 4
    flat = x.view(-1)
    idx = torch.randperm(flat.numel(), generator=gen)[: flat.numel() // 2]
    choice = torch.randint(len(SPECIALS), (idx.numel(),), generator=gen)
    flat[idx] = torch.tensor(SPECIALS)[choice]
    return x.to(dtype).to(device)


def pair_tensors(dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair of special values, then specials against random values."""
    a = special_tensor(dtype, device, 1)
    b = special_tensor(dtype, device, 2)
    n = len(SPECIALS)
    grid_a = torch.tensor(SPECIALS).repeat_interleave(n)
    grid_b = torch.tensor(SPECIALS).repeat(n)
    a.view(-1)[: n * n] = grid_a.to(dtype)
    b.view(-1)[: n * n] = grid_b.to(dtype)
    return a, b


def assert_same(actual: torch.Tensor, expected: torch.Tensor, **tol: float) -> None:
    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)
    # the sign of zeros counts as well
    zeros = expected == 0
    assert torch.equal(torch.signbit(actual[zeros]), torch.signbit(expected[zeros]))


@helion.kernel(backend="triton", autotune_effort="none")
def sign_kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = torch.sign(x[tile])
    return out


@helion.kernel(backend="triton", autotune_effort="none")
def floordiv_scalar_kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] // 1.5
    return out


@helion.kernel(backend="triton", autotune_effort="none")
def floordiv_kernel(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    slash = torch.empty_like(a)
    div_floor = torch.empty_like(a)
    floor_divide = torch.empty_like(a)
    for tile in hl.tile(a.size()):
        slash[tile] = a[tile] // b[tile]
        div_floor[tile] = torch.div(a[tile], b[tile], rounding_mode="floor")
        floor_divide[tile] = torch.floor_divide(a[tile], b[tile])
    return slash, div_floor, floor_divide


@helion.kernel(backend="triton", autotune_effort="none")
def atan2_kernel(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(y)
    for tile in hl.tile(y.size()):
        out[tile] = torch.atan2(y[tile], x[tile])
    return out


@pytest.mark.parametrize("dtype", [*DTYPES, torch.int32, torch.int8])
def test_sign(device, dtype):
    if dtype.is_floating_point:
        x = special_tensor(dtype, device, 0)
    else:
        x = torch.randint(-100, 100, (37, 50), dtype=dtype, device=device)
    assert_same(sign_kernel(x), torch.sign(x), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_floordiv_scalar(device, dtype):
    x = special_tensor(dtype, device, 3)
    assert_same(floordiv_scalar_kernel(x), x // 1.5, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_floordiv_tensors(device, dtype):
    a, b = pair_tensors(dtype, device)
    # torch's CUDA kernel divides fp16 / bf16 in float32 and rounds once; its CPU kernel rounds
    # the steps, which differs for quotients the 16-bit dtype cannot hold (-2432 vs -2416)
    expected = torch.floor_divide(a.float(), b.float()).to(dtype)
    for actual in floordiv_kernel(a, b):
        assert_same(actual, expected, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_atan2(device, dtype):
    y, x = pair_tensors(dtype, device)
    tol = {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {}
    assert_same(atan2_kernel(y, x), torch.atan2(y, x), **tol)
