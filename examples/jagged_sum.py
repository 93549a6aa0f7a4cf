"""Sum over the rows of each segment of a jagged tensor, with `hl.jagged_tile`.

The jagged tensor is the values + offsets layout of torch's nested jagged tensors: segment `b`
is `x_data[x_offsets[b]:x_offsets[b + 1]]`. Each program takes a tile of segments and a tile of
features; `hl.jagged_tile(lengths)` walks the rows up to the longest segment of the tile, and
masks each segment's rows past its own length out of the loads and the sum.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def jagged_sum(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    num_segments = x_offsets.size(0) - 1
    features = x_data.size(1)
    out = torch.empty([num_segments, features], dtype=x_data.dtype, device=x_data.device)
    for tile_b in hl.tile(num_segments):
        starts = x_offsets[tile_b]
        lengths = x_offsets[tile_b.index + 1] - starts
        for tile_f in hl.tile(features):
            acc = hl.zeros([tile_b, tile_f], dtype=torch.float32)
            for tile_r in hl.jagged_tile(lengths):
                rows = starts[:, None] + tile_r.index[None, :]
                acc = acc + x_data[rows, tile_f].to(torch.float32).sum(dim=1)
            out[tile_b, tile_f] = acc.to(out.dtype)
    return out


def jagged_sum_reference(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    rows = []
    for b in range(x_offsets.numel() - 1):
        segment = x_data[int(x_offsets[b]) : int(x_offsets[b + 1])]
        rows.append(segment.float().sum(0).to(x_data.dtype))
    return torch.stack(rows)


def example_args() -> tuple:
    num_segments, features, max_len = 9, 7, 13
    lengths = torch.randint(0, max_len + 1, (num_segments,))
    offsets = torch.zeros(num_segments + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    x_data = torch.randn(int(offsets[-1]), features)
    return x_data.to(DEVICE), offsets.to(DEVICE)


CASES = [Case("jagged_sum", jagged_sum, jagged_sum_reference, atol=1e-4, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
