"""A kernel may have any Python name: one named like a module-level helper of the generated code
(`expm1` next to the interpreter's `_helion_expm1`, `nan_max_combine` next to the NaN-propagating
max's combine function) used to define that name twice, so the launch called the wrong function
(found by exploratory testing)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl


def expm1(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.expm1(x[tile])
    return out


def atan2(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.atan2(x[tile], x[tile] + 0.5)  # a helper that calls another
    return out


def erfinv(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.erfinv(x[tile] * 0.5)
    return out


def nan_max_combine(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.amax(x[tile, :], dim=1)
    return out


CASES = [
    (expm1, torch.expm1, (53,)),
    (atan2, lambda x: torch.atan2(x, x + 0.5), (53,)),
    (erfinv, lambda x: torch.erfinv(x * 0.5), (53,)),
    (nan_max_combine, lambda x: x.amax(dim=1), (13, 29)),
]


@pytest.mark.parametrize(
    ("fn", "reference", "shape"), CASES, ids=lambda c: getattr(c, "__name__", "")
)
def test_a_kernel_named_like_a_generated_helper_runs(fn, reference, shape) -> None:
    x = torch.randn(shape)
    if fn is nan_max_combine:
        x[3, 5] = float("nan")
    kernel = helion.kernel(fn, backend="triton", autotune_effort="none")
    torch.testing.assert_close(kernel(x), reference(x), equal_nan=True, atol=1e-5, rtol=1e-5)
    source = kernel.bind((x,)).to_code()
    assert source.count(f"def _helion_{fn.__name__}(") <= 1, source
