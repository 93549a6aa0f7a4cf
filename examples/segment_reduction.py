"""Sum of the rows of `input_data` by segment id: `out[s] = sum of input_data[e] with indices[e] == s`.

`indices` is sorted (rows of one segment are contiguous), as in message passing over edges
grouped by target node. Two kernels:

- `segment_sum`: every tile of rows adds its values into `out` with `hl.atomic_add`, indexed by
  the rows' segment ids (any order works; sorting only makes the atomics hit fewer places);
- `segment_sum_sorted`: the host turns the sorted ids into segment offsets, and each program
  sums the rows of a tile of segments with `hl.jagged_tile` (no atomics).
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def segment_sum(indices: torch.Tensor, input_data: torch.Tensor, num_segments: int) -> torch.Tensor:
    num_rows, features = input_data.shape
    out = torch.zeros([num_segments, features], dtype=input_data.dtype, device=input_data.device)
    for tile_e, tile_f in hl.tile([num_rows, features]):
        segment = indices[tile_e]
        hl.atomic_add(out, [segment, tile_f], input_data[tile_e, tile_f])
    return out


# the segment offsets are found on the host (torch.searchsorted): no warning that it is not fused
@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
def segment_sum_sorted(
    indices: torch.Tensor, input_data: torch.Tensor, num_segments: int
) -> torch.Tensor:
    features = input_data.size(1)
    bounds = torch.arange(num_segments + 1, device=indices.device, dtype=indices.dtype)
    offsets = torch.searchsorted(indices, bounds)
    out = torch.empty([num_segments, features], dtype=input_data.dtype, device=input_data.device)
    for tile_s in hl.tile(num_segments):
        starts = offsets[tile_s]
        lengths = offsets[tile_s.index + 1] - starts
        for tile_f in hl.tile(features):
            acc = hl.zeros([tile_s, tile_f], dtype=torch.float32)
            for tile_r in hl.jagged_tile(lengths):
                rows = starts[:, None] + tile_r.index[None, :]
                acc = acc + input_data[rows, tile_f].to(torch.float32).sum(dim=1)
            out[tile_s, tile_f] = acc.to(out.dtype)
    return out


def segment_sum_reference(
    indices: torch.Tensor, input_data: torch.Tensor, num_segments: int
) -> torch.Tensor:
    out = torch.zeros(
        num_segments, input_data.size(1), dtype=input_data.dtype, device=input_data.device
    )
    return out.index_add_(0, indices, input_data)


def example_args() -> tuple:
    num_rows, features, num_segments = 29, 7, 6
    indices = torch.sort(torch.randint(0, num_segments, (num_rows,))).values
    input_data = torch.randn(num_rows, features)
    return indices.to(DEVICE), input_data.to(DEVICE), num_segments


CASES = [
    Case("segment_sum", segment_sum, segment_sum_reference, atol=1e-4, rtol=1e-4),
    Case("segment_sum_sorted", segment_sum_sorted, segment_sum_reference, atol=1e-4, rtol=1e-4),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
