"""Settings.index_dtype (HELION_INDEX_DTYPE) decides the dtype of index arithmetic on every
backend and in eager mode: it was read by nothing, so index_dtype=torch.int64 still computed
`tile.index * 1_000_000` in int32 and overflowed (found by exploratory testing)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]


def scaled_index(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.int64, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = tile.index * 1_000_000  # past int32 from index 2148 on
    return out


@pytest.mark.parametrize("backend", [*BACKENDS, "eager"])
def test_int64_index_arithmetic_when_asked_for(backend: str) -> None:
    if backend == "eager":
        kernel = helion.kernel(scaled_index, ref_mode="eager", index_dtype=torch.int64)
    else:
        require_backend(backend)
        kernel = helion.kernel(
            scaled_index, backend=backend, autotune_effort="none", index_dtype=torch.int64
        )
    x = torch.zeros(3001)
    expected = torch.arange(3001, dtype=torch.int64) * 1_000_000
    assert torch.equal(kernel(x), expected), backend


@pytest.mark.parametrize("backend", ["ref", "triton"])
def test_the_setting_reaches_the_generated_code(backend: str) -> None:
    require_backend(backend)
    x = torch.zeros(37)
    found = {}
    for dtype in (torch.int32, torch.int64):
        kernel = helion.kernel(
            scaled_index, backend=backend, autotune_effort="none", index_dtype=dtype
        )
        bound = kernel.bind((x,))
        assert bound.ir.index_dtype == dtype
        found[dtype] = bound.to_code() if backend == "triton" else None
    assert found[torch.int32] != found[torch.int64] or backend == "ref"


def test_int32_for_a_tensor_too_large_for_it_is_refused() -> None:
    huge = torch.zeros(1).expand(2**31)  # 2**31 elements, one of them stored
    kernel = helion.kernel(
        scaled_index, backend="ref", autotune_effort="none", index_dtype=torch.int32
    )
    with pytest.raises(exc.InputTensorNumelExceedsIndexType, match="numel=2147483648"):
        kernel.bind((huge,))


def copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile]
    return out


@pytest.mark.parametrize("backend", ["ref", "triton", "eager"])
def test_a_small_view_reaching_past_int32_gets_int64_offsets(backend: str) -> None:
    """9 elements 2**28 bytes apart: their offsets pass int32 though the numel is tiny (the
    choice looked at numel; Triton's interpreter segfaulted on the wrapped offsets)."""
    from helion.ir.core import index_extent

    buffer = torch.empty(2**31 + 16, dtype=torch.int8)  # not touched: pages stay unmapped
    buffer[:: 2**28] = torch.arange(9, dtype=torch.int8)
    view = buffer[:: 2**28]
    assert view.numel() == 9 and index_extent(view) == 2**31 + 1
    if backend == "eager":
        kernel = helion.kernel(copy, ref_mode="eager")
    else:
        require_backend(backend)
        kernel = helion.kernel(copy, backend=backend, autotune_effort="none")
        assert kernel.bind((view,)).ir.index_dtype == torch.int64
    assert torch.equal(kernel(view), torch.arange(9, dtype=torch.int8))
