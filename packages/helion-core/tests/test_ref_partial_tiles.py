"""The ref backend runs each tile at its exact extent; values made outside a loop have the full
block size. Where the two meet, the partial tile's missing lanes count as zeros (as the padded
lanes of compiled code do), and stores of a full block into a partial tile keep the valid lanes."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl


def _block_accumulator_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype)
    block = hl.register_block_size(n)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, block], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=block):
            acc = acc + x[tile_m, tile_n]
        out[tile_m] = acc.sum(-1)
    return out


def _block_shaped_store(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    block = hl.register_block_size(n)
    for _ in hl.grid(1):
        ones = hl.full([block], 1.0)
        for tile in hl.tile(n, block_size=block):
            out[tile] = ones + x[tile]
    return out


@pytest.mark.parametrize("seed", [None, 0, 1, 2, 3])
def test_block_sized_accumulator_with_partial_tiles(seed):
    x = torch.randn(7, 150)
    bound = helion.kernel(_block_accumulator_sum, autotune_effort="none", backend="ref").bind((x,))
    spec = bound.config_spec
    config = spec.default_config() if seed is None else spec.random_config(random.Random(seed))
    torch.testing.assert_close(bound.compile_config(config)(x), x.sum(-1), atol=1e-4, rtol=1e-4)


def test_full_block_value_stored_into_partial_tile():
    x = torch.randn(100)
    bound = helion.kernel(_block_shaped_store, autotune_effort="none", backend="ref").bind((x,))
    torch.testing.assert_close(bound.compile_config(helion.Config(block_sizes=[64]))(x), x + 1)
