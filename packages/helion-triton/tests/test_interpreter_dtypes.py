"""bf16 math and data-dependent loop indices through the Triton backend.

The Triton interpreter (CPU tensors) keeps bf16 values as raw uint16 bits: without care its
arithmetic, comparisons, int-to-bf16 casts and `tl.dot` act on those integers. The backend routes
bf16 through float32 there; these tests check the results against PyTorch (and on a GPU, where
present, the compiled path).
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import helion
import helion.language as hl

CONFIG = helion.Config(block_sizes=[4])


@helion.kernel(backend="triton", config=CONFIG)
def elementwise(x: torch.Tensor, y: torch.Tensor, fn: Callable) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = fn(x[tile, :], y[tile, :])
    return out


BF16_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "scalar": lambda a, b: a * 2.0 - 1,
    "neg": lambda a, b: -a,
    "relu": lambda a, b: torch.relu(a),
    "maximum": lambda a, b: torch.maximum(a, b),
    "minimum": lambda a, b: torch.minimum(a, b),
    "where_gt": lambda a, b: torch.where(a > b, a, b),
    "lt": lambda a, b: (a < b).to(a.dtype),
    "clamp": lambda a, b: torch.clamp(a, -0.5, 0.5),
    "int_to_bf16": lambda a, b: (a * 4).to(torch.int32).to(torch.bfloat16),
    "bool_to_bf16": lambda a, b: (a > 0).to(torch.bfloat16),
}


@pytest.mark.parametrize("name", list(BF16_OPS))
def test_bf16_elementwise(name, device):
    fn = BF16_OPS[name]
    x = torch.randn(7, 13, device=device, dtype=torch.bfloat16)
    y = torch.randn(7, 13, device=device, dtype=torch.bfloat16)
    out = elementwise(x, y, fn)
    assert out.dtype == torch.bfloat16
    # exact: each op rounds its float32 result to nearest even, as torch does (the interpreter's
    # own conversion truncates; the backend rounds instead)
    torch.testing.assert_close(out, fn(x, y), atol=0, rtol=0)


@helion.kernel(backend="triton", config=helion.Config(block_sizes=[16, 16, 16]))
def bf16_matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def test_bf16_matmul(device):
    x = torch.randn(19, 37, device=device, dtype=torch.bfloat16)
    y = torch.randn(37, 21, device=device, dtype=torch.bfloat16)
    expected = (x.float() @ y.float()).to(torch.bfloat16)
    torch.testing.assert_close(bf16_matmul(x, y), expected, atol=6e-2, rtol=1e-2)


@helion.kernel(backend="triton", config=helion.Config(block_sizes=[8]))
def count_matches(labels: torch.Tensor, bounds: torch.Tensor) -> torch.Tensor:
    """For each label, how many values in [bounds[0], bounds[1]) it equals (a loop with device
    bounds whose index is compared with an int64 tensor)."""
    out = torch.zeros(labels.shape, dtype=torch.int64, device=labels.device)
    for tile in hl.tile(labels.size(0)):
        values = labels[tile]
        hits = torch.zeros_like(values)
        for v in hl.grid(bounds[0], bounds[1]):
            hits = hits + (values == v).to(torch.int64)
        out[tile] = hits
    return out


def test_data_dependent_grid_index(device):
    labels = torch.randint(0, 9, (29,), device=device)
    bounds = torch.tensor([2, 6], device=device)
    expected = ((labels >= 2) & (labels < 6)).to(torch.int64)
    torch.testing.assert_close(count_matches(labels, bounds), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_neg_flips_the_sign_of_zero_as_torch_does(dtype: torch.dtype) -> None:
    # Triton's `-x` is `0 - x`: +0.0 for 0.0, where torch gives -0.0 (and +0.0 for -0.0)
    if dtype.is_floating_point:
        x = torch.tensor([[0.0, -0.0, 1.5, -2.0, float("inf"), float("nan")]], dtype=dtype)
    else:
        x = torch.tensor([[0, 3, -4, 7]], dtype=dtype)
    got = elementwise(x, x, lambda a, b: -a)
    want = -x
    torch.testing.assert_close(got, want, equal_nan=True)
    numbers = ~torch.isnan(want) if dtype.is_floating_point else torch.ones_like(want, dtype=bool)
    # the sign of a NaN is not specified (an x86 multiply keeps the operand's)
    assert torch.equal(torch.signbit(got)[numbers], torch.signbit(want)[numbers]), (got, want)


@helion.kernel(backend="triton", config=CONFIG)
def to_bfloat16(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    explicit = torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)
    on_store = torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)
    for tile in hl.tile(x.size(0)):
        explicit[tile, :] = x[tile, :].to(torch.bfloat16)
        on_store[tile, :] = x[tile, :] * 1  # the store converts
    return explicit, on_store


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64], ids=str)
def test_conversion_to_bfloat16_rounds_to_nearest_even(dtype: torch.dtype, device) -> None:
    special = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0 + 2**-8, 1.0 + 3 * 2**-8]
    if dtype != torch.float16:
        special += [3.3895e38, -3.3895e38, 1e-40, -1e-40, 2**-130]  # overflow, subnormals
    x = torch.cat([torch.tensor(special), torch.randn(7 * 13 - len(special)) * 100])
    x = x.to(dtype).reshape(7, 13).to(device)
    explicit, on_store = to_bfloat16(x)
    expected = x.to(torch.bfloat16)
    for got in (explicit, on_store):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got, expected, atol=0, rtol=0, equal_nan=True)
