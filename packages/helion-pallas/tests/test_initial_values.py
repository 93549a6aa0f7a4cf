"""A written tensor's value before the call is passed to `pallas_call` (and aliased to its output)
only where the call may leave elements of it unwritten or reads it: XLA copies such an input
first, since the torch tensor's memory is not its to write in place. A call that overwrites
every element (one unmasked top-level store over tiles, `hl.grid` indices or `:` slices
spanning the tensor) goes without. The callers' tensors below are filled with values the
kernels do not write, so an element left unwritten where it should have kept its value shows."""

from __future__ import annotations

import pytest
import torch
from pallas_testing import assert_same
from pallas_testing import pallas_kernel

import helion.language as hl


def overwrite_all(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_m, tile_n in hl.tile(out.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 2
    return out


def overwrite_rows_whole(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_m in hl.tile(out.size(0)):
        out[tile_m, :] = x[tile_m, :] * 2
    return out


def row_by_grid_index(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for i in hl.grid(out.size(0)):
        out[i, :] = x[i, :] * 2
    return out


def grid_from_the_second_row(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for i in hl.grid(1, out.size(0)):
        out[i, :] = x[i, :] * 2
    return out


def all_rows_but_the_last(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_m in hl.tile(out.size(0) - 1):
        out[tile_m, :] = x[tile_m, :] * 2
    return out


def all_rows_but_the_first(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_m in hl.tile(1, out.size(0)):
        out[tile_m, :] = x[tile_m, :] * 2
    return out


def where_positive(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_m, tile_n in hl.tile(out.size()):
        hl.store(out, [tile_m, tile_n], x[tile_m, tile_n] * 2, extra_mask=x[tile_m, tile_n] > 0)
    return out


def first_column(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_m in hl.tile(out.size(0)):
        out[tile_m, 0] = x[tile_m, 0] * 2
    return out


def inner_loop(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    # covers every element too, but through an inner loop: kept (the analysis looks no deeper)
    for tile_m in hl.tile(out.size(0)):
        for tile_n in hl.tile(out.size(1)):
            out[tile_m, tile_n] = x[tile_m, tile_n] * 2
    return out


def accumulate(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_m, tile_n in hl.tile(out.size()):
        out[tile_m, tile_n] = out[tile_m, tile_n] + x[tile_m, tile_n]
    return out


def write_then_read(x: torch.Tensor, out: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    for tile_m, tile_n in hl.tile(out.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 2
    hl.barrier()
    for tile_m, tile_n in hl.tile(out.size()):
        total[tile_m, tile_n] = out[tile_m, tile_n] + 1
    return total


def _doubled_where(x: torch.Tensor, out: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.where(keep, x * 2, out)


def _rows(x: torch.Tensor, rows: slice) -> torch.Tensor:
    keep = torch.zeros_like(x, dtype=torch.bool)
    keep[rows] = True
    return keep


_CASES = [
    # kernel, passes an initial value, expected (x, out before the call)
    (overwrite_all, False, lambda x, out: x * 2),
    (overwrite_rows_whole, False, lambda x, out: x * 2),
    (row_by_grid_index, False, lambda x, out: x * 2),
    (
        grid_from_the_second_row,
        True,
        lambda x, out: _doubled_where(x, out, _rows(x, slice(1, None))),
    ),
    (all_rows_but_the_last, True, lambda x, out: _doubled_where(x, out, _rows(x, slice(0, -1)))),
    (all_rows_but_the_first, True, lambda x, out: _doubled_where(x, out, _rows(x, slice(1, None)))),
    (where_positive, True, lambda x, out: _doubled_where(x, out, x > 0)),
    (
        first_column,
        True,
        lambda x, out: _doubled_where(x, out, torch.arange(x.size(1)).expand_as(x) == 0),
    ),
    (inner_loop, True, lambda x, out: x * 2),
    (accumulate, True, lambda x, out: out + x),
]


@pytest.mark.parametrize(
    ("fn", "initial", "reference"), _CASES, ids=[case[0].__name__ for case in _CASES]
)
@pytest.mark.parametrize("shape", [(37, 53), (64, 16)], ids=["37x53", "64x16"])
def test_unwritten_elements_keep_their_values(fn, initial, reference, shape) -> None:
    generator = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=generator)
    out = torch.randn(shape, generator=generator) + 10  # values the kernel does not produce
    expected = reference(x, out.clone())
    kernel = pallas_kernel(fn)
    source = kernel.bind((x, out)).to_code()
    assert ("(initial value)" in source) is initial, source
    result = kernel(x, out)
    assert result is out
    assert_same(out, expected)


def test_a_later_loop_reads_what_an_earlier_one_wrote_whole() -> None:
    x = torch.randn(29, 45)
    out = torch.full((29, 45), 7.0)
    total = torch.full((29, 45), -3.0)
    kernel = pallas_kernel(write_then_read)
    source = kernel.bind((x, out, total)).to_code()
    # the first call overwrites out, the second total: neither needs an initial value
    assert "(initial value)" not in source, source
    assert_same(kernel(x, out, total), x * 2 + 1)
    assert_same(out, x * 2)
