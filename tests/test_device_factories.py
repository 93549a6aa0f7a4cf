"""torch's factory functions in device code, as public Helion accepts them: torch.zeros / ones /
empty / full with a shape of tiles, 0-D tensors made from numbers (torch.tensor(c),
torch.full([], c), torch.scalar_tensor(c)) as constants of their dtype, and new_zeros / new_full
on a kernel argument. They raised UnsupportedTorchOp or HostTensorDirectUsage (found by
exploratory testing)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.testing import kernel_for as _kernel

BACKENDS = ["ref", "triton", "pallas", "eager"]


def tile_factories(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([5, m, n], dtype=x.dtype, device=x.device)
    for tm, tn in hl.tile([m, n]):
        out[0, tm, tn] = x[tm, tn] + torch.zeros([tm, tn], dtype=x.dtype)
        out[1, tm, tn] = x[tm, tn] * torch.ones([tm, tn], dtype=x.dtype)
        out[2, tm, tn] = torch.full([tm, tn], 2.5, dtype=x.dtype) - x[tm, tn]
        out[3, tm, tn] = x[tm, tn] + x.new_zeros([tm, tn]) + x.new_full([tm, tn], 0.5)
        empty = torch.empty([tm, tn], dtype=x.dtype)
        # uninitialized memory may hold nan or inf (eager mode reads real memory): made finite
        out[4, tm, tn] = torch.where(
            x[tm, tn] > 0, x[tm, tn], x[tm, tn] + 0 * torch.nan_to_num(empty)
        )
    return out


def scalar_constants(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        scale = torch.tensor(3.0) + torch.scalar_tensor(0.5)  # 0-D float32: x keeps its dtype
        out[tile] = x[tile] * scale + torch.full([], 1, dtype=torch.int32)
    return out


def numbers_only_vector(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + torch.ones(1)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_factories_with_tile_shapes_match_torch(backend: str) -> None:
    kernel = _kernel(tile_factories, backend)
    x = torch.randn(7, 19)
    got = kernel(x)
    expected = torch.stack([x, x, 2.5 - x, x + 0.5, x])
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_zero_dim_tensors_from_numbers_are_constants_of_their_dtype(
    backend: str, dtype: torch.dtype
) -> None:
    kernel = _kernel(scalar_constants, backend)
    x = torch.randn(23).to(dtype)
    expected = x * (torch.tensor(3.0) + torch.scalar_tensor(0.5)) + torch.full(
        [], 1, dtype=torch.int32
    )
    got = kernel(x)
    assert got.dtype == expected.dtype == dtype
    torch.testing.assert_close(got, expected)


def test_a_tensor_made_from_numbers_that_is_not_zero_dim_is_refused_clearly() -> None:
    kernel = helion.kernel(numbers_only_vector, backend="ref", autotune_effort="none")
    with pytest.raises(exc.HostTensorDirectUsage) as info:
        kernel(torch.randn(5))
    text = str(info.value)
    assert "made in device code from numbers only" in text and "torch.zeros([tile]" in text, text
    assert "torch.ones(1)" in text, text
