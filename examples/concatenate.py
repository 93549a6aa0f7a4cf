"""Concatenate two tensors along dim 1 inside a kernel, two ways.

`concat_rows` loads whole rows of both inputs and joins them with `torch.cat` in registers: simple,
for rows that fit in one tile. `concat_tiles` tiles the output's columns and fills each tile from
`x` or `y` with masked loads, so it handles rows of any width.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def concat_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n1 = x.shape
    assert y.size(0) == m, "the inputs must have the same number of rows"
    out = torch.empty([m, n1 + y.size(1)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        out[tile_m, :] = torch.cat([x[tile_m, :], y[tile_m, :]], dim=1)
    return out


@helion.kernel()
def concat_tiles(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n1 = x.shape
    assert y.size(0) == m, "the inputs must have the same number of rows"
    out = torch.empty([m, n1 + y.size(1)], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile(out.size()):
        columns = tile_n.index
        in_x = columns < n1
        left = hl.load(x, [tile_m, columns], extra_mask=in_x[None, :])
        right = hl.load(y, [tile_m, columns - n1], extra_mask=~in_x[None, :])
        out[tile_m, tile_n] = torch.where(in_x[None, :], left, right)
    return out


def concat_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, y], dim=1)


def example_args() -> tuple:
    return (
        torch.randn(9, 21, device=DEVICE, dtype=torch.float16),
        torch.randn(9, 10, device=DEVICE, dtype=torch.float16),
    )


CASES = [
    Case("concat_rows", concat_rows, concat_reference, atol=0.0, rtol=0.0),
    Case("concat_tiles", concat_tiles, concat_reference, atol=0.0, rtol=0.0),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
