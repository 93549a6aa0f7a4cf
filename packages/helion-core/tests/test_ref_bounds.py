"""The ref backend refuses unmasked accesses outside a tensor (compiled code would touch memory
past it) instead of letting torch clamp the slice or wrap the index; masked lanes and the partial
last tile of a non-divisible size stay legal."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc


def _run(fn, args: tuple, block_sizes: list[int]):
    bound = helion.kernel(fn, autotune_effort="none", backend="ref").bind(args)
    return bound.compile_config(helion.Config(block_sizes=block_sizes))(*args)


def _raises_out_of_bounds(
    fn, args: tuple, block_sizes: list[int], tensor: str, line: str
) -> exc.IndexOutOfBounds:
    with pytest.raises(exc.IndexOutOfBounds) as info:
        _run(fn, args, block_sizes)
    error = info.value
    assert f"tensor '{tensor}'" in str(error)
    assert error.loc is not None and error.loc.line().strip() == line
    assert line in str(error)  # the message shows the kernel's line like a traceback entry
    return error


def _tile_over_the_larger_tensor(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(y)
    for tile in hl.tile(y.size(0)):
        out[tile] = y[tile] + x[tile]
    return out


@pytest.mark.parametrize("block", [4, 16])
def test_tile_larger_than_the_tensor_it_reads(block):
    # block 4: the tile [4, 8) runs past x (size 7); block 16: one tile [0, 11) covers both
    x, y = torch.randn(7), torch.randn(11)
    error = _raises_out_of_bounds(
        _tile_over_the_larger_tensor, (x, y), [block], "x", "out[tile] = y[tile] + x[tile]"
    )
    assert "index 7 along dimension 0 (of size 7)" in str(error)


def _shifted_load(x: torch.Tensor, shift: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = hl.load(x, [tile.index + shift])
    return out


def _masked_shifted_load(x: torch.Tensor, shift: int) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.size(0)
    for tile in hl.tile(n):
        source = tile.index + shift
        out[tile] = hl.load(x, [source], extra_mask=(source >= 0) & (source < n))
    return out


def _half_masked_load(x: torch.Tensor, shift: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        source = tile.index + shift
        out[tile] = hl.load(x, [source], extra_mask=source >= 0)
    return out


@pytest.mark.parametrize("shift", [3, -2])
def test_unmasked_index_beyond_the_tensor(shift):
    # a negative index would wrap around in torch; in compiled code it reads before the tensor
    x = torch.randn(13)
    error = _raises_out_of_bounds(
        _shifted_load, (x, shift), [8], "x", "out[tile] = hl.load(x, [tile.index + shift])"
    )
    assert f"index {13 if shift > 0 else -2} along dimension 0 (of size 13)" in str(error)


@pytest.mark.parametrize("shift", [3, -2, 100])
@pytest.mark.parametrize("block", [4, 8])
def test_masked_lanes_may_lie_outside(shift, block):
    x = torch.randn(13)
    positions = torch.arange(13) + shift
    inside = (positions >= 0) & (positions < 13)
    expected = torch.where(inside, x[positions.clamp(0, 12)], 0.0)
    torch.testing.assert_close(_run(_masked_shifted_load, (x, shift), [block]), expected)


def test_a_mask_that_leaves_outside_lanes_on_is_refused():
    x = torch.randn(13)
    line = "out[tile] = hl.load(x, [source], extra_mask=source >= 0)"
    _raises_out_of_bounds(_half_masked_load, (x, 3), [8], "x", line)


def _store_past_the_end(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2
    return out


def test_store_past_the_end():
    x, out = torch.randn(10), torch.zeros(6)
    _raises_out_of_bounds(_store_past_the_end, (x, out), [4], "out", "out[tile] = x[tile] * 2")


def _column(x: torch.Tensor, column: int) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile, column]
    return out


def test_scalar_index_beyond_the_dimension():
    x = torch.randn(9, 5)
    torch.testing.assert_close(_run(_column, (x, 4), [4]), x[:, 4])
    error = _raises_out_of_bounds(_column, (x, 5), [4], "x", "out[tile] = x[tile, column]")
    assert "index 5 along dimension 1 (of size 5)" in str(error)


def _scatter_add(index: torch.Tensor, values: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(index.size(0)):
        hl.atomic_add(out, [index[tile]], values[tile])
    return out


def test_atomic_outside_the_tensor():
    values = torch.randn(11)
    index = torch.randint(0, 5, (11,))
    expected = torch.zeros(5).index_add_(0, index, values)
    torch.testing.assert_close(_run(_scatter_add, (index, values, torch.zeros(5)), [4]), expected)
    index[7] = 5
    line = "hl.atomic_add(out, [index[tile]], values[tile])"
    error = _raises_out_of_bounds(_scatter_add, (index, values, torch.zeros(5)), [4], "out", line)
    assert "atomic_add" in str(error)


def _row_sums_plus_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype)
    for tile_m in hl.tile(x.size(0)):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(x.size(1)):
            acc = acc + (x[tile_m, tile_n] + bias[tile_n][None, :]).sum(-1)
        out[tile_m] = acc + x[tile_m, :].sum(-1) * 0
    return out


@pytest.mark.parametrize("blocks", [[4, 8], [16, 32], [8, 16], [64, 64]])
def test_partial_last_tiles_stay_in_bounds(blocks):
    # 13 and 37 divide by none of the block sizes: every run has a partial last tile
    x, bias = torch.randn(13, 37), torch.randn(37)
    expected = (x + bias).sum(-1)
    actual = _run(_row_sums_plus_bias, (x, bias), blocks)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
