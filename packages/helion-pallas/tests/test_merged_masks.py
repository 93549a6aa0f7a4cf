"""Masks of a dimension ``c * block`` on partial tiles (``hl.arange(tile.block_size * 2)``,
``hl.zeros([bk * 2])``): lane ``j`` is valid where lane ``j // c`` of the tile is.

Before, Pallas held such a dimension as always full: a sum over it counted the padded lanes of
a partial last tile (48 where 46 was right). The cases (`helion.testing.merged_dims`, shared
with core's and Triton's tests) are checked against PyTorch on sizes whose last tile is
partial; the mask lowers for the GPU through Pallas' Triton lowering."""

from __future__ import annotations

import pytest
import torch
from pallas_testing import case_params
from pallas_testing import lower_for_platform
from pallas_testing import pallas_kernel

import helion
import helion.language as hl
from helion import exc
from helion.testing import merged_dims


@pytest.mark.parametrize(
    "case",
    case_params(
        merged_dims.MERGED_DIM_CASES,
        lambda case: (
            "torch.stack and reshapes that merge tile dimensions are not lowered for Pallas"
            if case.needs_stack
            else None
        ),
    ),
)
def test_merged_dimension_cases_match_pytorch(case: merged_dims.MergedDimCase) -> None:
    merged_dims.check_merged_dim_case(case, "pallas")


def test_the_merged_mask_lowers_for_the_gpu() -> None:
    x = torch.randn(46)
    for fn in (merged_dims.count_pair_lanes, merged_dims.gathered_pair_lanes):
        bound = pallas_kernel(fn).bind((x,))
        text = lower_for_platform(bound, helion.Config(block_sizes=[8]), "cuda")
        assert "__gpu$xla.gpu.triton" in text


def tile_area_count(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tm, tn in hl.tile([m, n]):
        cells = hl.zeros([tm.block_size * tn.block_size], dtype=torch.float32) + 1.0
        hl.atomic_add(out, [0], cells.sum())
    return out


def test_a_dimension_of_two_block_sizes_on_partial_tiles_is_refused() -> None:
    kernel = helion.kernel(
        tile_area_count, backend="pallas", config=helion.Config(block_sizes=[8, 8])
    )
    with pytest.raises(exc.BackendUnsupported, match="masking the dimension"):
        kernel(torch.randn(21, 13))
    kernel = helion.kernel(
        tile_area_count, backend="pallas", config=helion.Config(block_sizes=[8, 8])
    )
    # tiles that divide the ranges: nothing to mask, so it runs
    torch.testing.assert_close(kernel(torch.randn(16, 24)), torch.tensor([384.0]))
