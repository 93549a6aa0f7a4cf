"""A jagged tensor plus a dense one: `out[b, c] = y[b, c] + x[b, c]`, where row `b` of the jagged
`x` has `x_offsets[b + 1] - x_offsets[b]` values (the rest of its row is 0).

`x_data` and `x_offsets` are the values + offsets layout of torch's nested jagged tensors (here
with one value per position). Each program takes a tile of rows: up to the longest row of the
tile it adds the jagged values, loaded with an explicit `extra_mask` for each row's length;
past it, it copies `y`.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def jagged_dense_add(
    x_data: torch.Tensor, x_offsets: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    num_rows, columns = y.shape
    out = torch.empty_like(y)
    for tile_b in hl.tile(num_rows):
        starts = x_offsets[tile_b]
        lengths = x_offsets[tile_b.index + 1] - starts
        longest = lengths.amax()
        for tile_c in hl.tile(0, longest):
            inside = tile_c.index[None, :] < lengths[:, None]
            x = hl.load(x_data, [starts[:, None] + tile_c.index[None, :]], extra_mask=inside)
            out[tile_b, tile_c] = y[tile_b, tile_c] + x
        for tile_c in hl.tile(longest, columns):
            out[tile_b, tile_c] = y[tile_b, tile_c]
    return out


def jagged_dense_add_reference(
    x_data: torch.Tensor, x_offsets: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    out = y.clone()
    for b in range(y.size(0)):
        start, end = int(x_offsets[b]), int(x_offsets[b + 1])
        out[b, : end - start] += x_data[start:end]
    return out


def example_args() -> tuple:
    num_rows, columns = 11, 23
    lengths = torch.randint(0, columns + 1, (num_rows,))
    offsets = torch.zeros(num_rows + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    x_data = torch.randn(int(offsets[-1]))
    y = torch.randn(num_rows, columns)
    return x_data.to(DEVICE), offsets.to(DEVICE), y.to(DEVICE)


CASES = [
    Case("jagged_dense_add", jagged_dense_add, jagged_dense_add_reference, atol=1e-5, rtol=1e-5)
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
