"""Softmax over the rows of each segment of a jagged tensor (per feature), with `hl.jagged_tile`.

Segment `b` is `x_data[x_offsets[b]:x_offsets[b + 1]]`; the output has the same layout. A first
jagged loop keeps an online max and sum of exponentials per (segment, feature); a second one
writes the normalized values. The jagged tile masks the rows past each segment's end out of the
loads, the stores and the reductions (so `exp` of a masked lane never reaches the sum).
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def jagged_softmax(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    num_segments = x_offsets.size(0) - 1
    features = x_data.size(1)
    out = torch.empty_like(x_data)
    for tile_b in hl.tile(num_segments):
        starts = x_offsets[tile_b]
        lengths = x_offsets[tile_b.index + 1] - starts
        for tile_f in hl.tile(features):
            peak = hl.full([tile_b, tile_f], float("-inf"), dtype=torch.float32)
            total = hl.zeros([tile_b, tile_f], dtype=torch.float32)
            for tile_r in hl.jagged_tile(lengths):
                rows = starts[:, None] + tile_r.index[None, :]
                values = x_data[rows, tile_f].to(torch.float32)
                new_peak = torch.maximum(peak, values.amax(dim=1))
                # an empty segment keeps a peak of -inf: shift it by 0 instead (no nan)
                shift = torch.where(new_peak == float("-inf"), 0.0, new_peak)
                total = total * torch.exp(peak - shift) + torch.exp(values - shift[:, None, :]).sum(
                    dim=1
                )
                peak = new_peak
            for tile_r in hl.jagged_tile(lengths):
                rows = starts[:, None] + tile_r.index[None, :]
                values = x_data[rows, tile_f].to(torch.float32)
                probs = torch.exp(values - peak[:, None, :]) / total[:, None, :]
                out[rows, tile_f] = probs.to(out.dtype)
    return out


def jagged_softmax_reference(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x_data)
    for b in range(x_offsets.numel() - 1):
        start, end = int(x_offsets[b]), int(x_offsets[b + 1])
        if end > start:
            out[start:end] = torch.softmax(x_data[start:end].float(), dim=0).to(x_data.dtype)
    return out


def example_args() -> tuple:
    num_segments, features, max_len = 7, 5, 19
    lengths = torch.randint(0, max_len + 1, (num_segments,))
    offsets = torch.zeros(num_segments + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    x_data = torch.randn(int(offsets[-1]), features) * 3
    return x_data.to(DEVICE), offsets.to(DEVICE)


CASES = [Case("jagged_softmax", jagged_softmax, jagged_softmax_reference, atol=1e-5, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
