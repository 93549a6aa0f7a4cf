"""Tile attributes (index, begin, end, block_size, id, count) on every backend that runs here,
for loops that start at 0 and at an offset, top-level and nested: Pallas counted the tiles of
the current tile instead of the loop's (tile.count was always 1; found by exploratory testing)."""

from __future__ import annotations

import math

import pytest
import torch

import helion
import helion.language as hl
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]
FIELDS = ["index", "begin", "end", "block_size", "id", "count"]


def attributes(x: torch.Tensor, start: hl.constexpr) -> torch.Tensor:
    out = torch.zeros([6, x.size(0)], dtype=torch.int64, device=x.device)
    for tile in hl.tile(start, x.size(0), block_size=4):
        zero = 0 * tile.index
        out[0, tile] = tile.index
        out[1, tile] = tile.begin + zero
        out[2, tile] = tile.end + zero
        out[3, tile] = tile.block_size + zero
        out[4, tile] = tile.id + zero
        out[5, tile] = tile.count + zero
    return out


def nested_attributes(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.zeros([2, m, n], dtype=torch.int64, device=x.device)
    for tm in hl.tile(m, block_size=2):
        for tn in hl.tile(1, n, block_size=4):
            zero = 0 * tn.index[None, :] + 0 * tm.index[:, None]
            out[0, tm, tn] = tn.count * 100 + tm.count + zero
            out[1, tm, tn] = tn.id * 100 + tm.id + zero
    return out


def _expected(size: int, start: int, block: int) -> torch.Tensor:
    expected = torch.zeros(6, size, dtype=torch.int64)
    count = math.ceil((size - start) / block)
    for begin in range(start, size, block):
        end = min(begin + block, size)
        lanes = slice(begin, end)
        expected[0, lanes] = torch.arange(begin, end)
        expected[1:, lanes] = torch.tensor([begin, end, block, begin // block, count])[:, None]
    return expected


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("size", "start"), [(10, 0), (13, 3), (7, 6)])
def test_tile_attributes_match_their_definitions(backend: str, size: int, start: int) -> None:
    require_backend(backend)
    kernel = helion.kernel(attributes, backend=backend, autotune_effort="none")
    got = kernel(torch.randn(size), start)
    expected = _expected(size, start, 4)
    for row, field in enumerate(FIELDS):
        assert torch.equal(got[row], expected[row]), f"{backend} tile.{field}: {got[row].tolist()}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_tiles_count_their_own_loops(backend: str) -> None:
    require_backend(backend)
    kernel = helion.kernel(nested_attributes, backend=backend, autotune_effort="none")
    m, n = 5, 11
    got = kernel(torch.randn(m, n))
    counts = torch.zeros(m, n, dtype=torch.int64)
    ids = torch.zeros(m, n, dtype=torch.int64)
    for i in range(m):
        for j in range(1, n):
            counts[i, j] = math.ceil((n - 1) / 4) * 100 + math.ceil(m / 2)
            ids[i, j] = (1 + (j - 1) // 4 * 4) // 4 * 100 + (i // 2 * 2) // 2
    assert torch.equal(got[0], counts), f"{backend} count: {got[0].tolist()}"
    assert torch.equal(got[1], ids), f"{backend} id: {got[1].tolist()}"
