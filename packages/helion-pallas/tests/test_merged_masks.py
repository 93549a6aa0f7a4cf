"""Masks of a dimension ``c * block`` on partial tiles (``hl.arange(tile.block_size * 2)``,
``hl.zeros([bk * 2])``): lane ``j`` is valid where lane ``j // c`` of the tile is.

Before, Pallas held such a dimension as always full: a sum over it counted the padded lanes of
a partial last tile (48 where 46 was right). Checked against PyTorch and the ref backend on
sizes whose last tile is partial, and lowered for the GPU through Pallas' Triton lowering."""

from __future__ import annotations

import pytest
import torch
from pallas_testing import lower_for_platform
from pallas_testing import pallas_kernel
from pallas_testing import ref_kernel

import helion
import helion.language as hl
from helion import exc


def count_pair_lanes(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tile in hl.tile(n // 2):
        # every lane holds 1, the padded ones too: only the mask keeps them out of the sum
        ones = hl.zeros([tile.block_size * 2], dtype=torch.float32) + 1.0
        hl.atomic_add(out, [0], ones.sum())
    return out


def gathered_pair_lanes(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tile in hl.tile(n // 2):
        lanes = x[tile.begin * 2 + hl.arange(tile.block_size * 2)] * 0 + 1  # padded lanes: 1
        hl.atomic_add(out, [0], lanes.sum())
    return out


def tile_area_count(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tm, tn in hl.tile([m, n]):
        cells = hl.zeros([tm.block_size * tn.block_size], dtype=torch.float32) + 1.0
        hl.atomic_add(out, [0], cells.sum())
    return out


@pytest.mark.parametrize("block", [4, 8, 16, 32])
def test_a_sum_over_a_merged_dimension_skips_the_padded_lanes(block: int) -> None:
    x = torch.randn(46)  # 23 pairs: the last tile is partial at every block size
    kernel = helion.kernel(
        count_pair_lanes, backend="pallas", config=helion.Config(block_sizes=[block])
    )
    torch.testing.assert_close(kernel(x), torch.tensor([46.0]))


@pytest.mark.parametrize("fn", [count_pair_lanes, gathered_pair_lanes])
@pytest.mark.parametrize("block", [4, 8, 16])
def test_a_merged_dimension_sums_like_the_ref_backend(fn, block: int) -> None:
    x = torch.randn(2 * 37)
    config = helion.Config(block_sizes=[block])
    pallas = pallas_kernel(fn).bind((x,)).compile_config(config)
    ref = ref_kernel(fn).bind((x,)).compile_config(config)
    torch.testing.assert_close(pallas(x), ref(x))
    torch.testing.assert_close(pallas(x), torch.tensor([74.0]))


def test_the_merged_mask_lowers_for_the_gpu() -> None:
    x = torch.randn(46)
    for fn in (count_pair_lanes, gathered_pair_lanes):
        bound = pallas_kernel(fn).bind((x,))
        text = lower_for_platform(bound, helion.Config(block_sizes=[8]), "cuda")
        assert "__gpu$xla.gpu.triton" in text


def test_a_dimension_of_two_block_sizes_on_partial_tiles_is_refused() -> None:
    x = torch.randn(21, 13)
    kernel = helion.kernel(
        tile_area_count, backend="pallas", config=helion.Config(block_sizes=[8, 8])
    )
    with pytest.raises(exc.BackendUnsupported, match="masking the dimension"):
        kernel(x)
    full = torch.randn(16, 24)  # tiles that divide the ranges: nothing to mask, so it runs
    kernel = helion.kernel(
        tile_area_count, backend="pallas", config=helion.Config(block_sizes=[8, 8])
    )
    torch.testing.assert_close(kernel(full), torch.tensor([384.0]))
