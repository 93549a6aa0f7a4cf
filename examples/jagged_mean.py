"""Mean over the rows of each segment of a jagged tensor (segments of different lengths).

`x_offsets[b]:x_offsets[b + 1]` are the rows of segment `b`. Each program handles a tile of
segments: their starts and ends are loaded on the device, and the inner loop runs up to the
longest segment of the tile (a data-dependent bound), masking the rows past each segment's end.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def jagged_mean(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    num_segments = x_offsets.size(0) - 1
    features = x_data.size(1)
    out = torch.empty([num_segments, features], dtype=x_data.dtype, device=x_data.device)
    for tile_b in hl.tile(num_segments):
        starts = x_offsets[tile_b]
        ends = x_offsets[tile_b.index + 1]
        lengths = ends - starts
        for tile_f in hl.tile(features):
            acc = hl.zeros([tile_b, tile_f], dtype=torch.float32)
            for tile_r in hl.tile(0, lengths.amax()):
                rows = starts[:, None] + tile_r.index[None, :]
                inside = tile_r.index[None, :] < lengths[:, None]
                values = hl.load(x_data, [rows, tile_f], extra_mask=inside[:, :, None])
                acc = acc + values.to(torch.float32).sum(dim=1)
            counts = torch.clamp(lengths, min=1).to(torch.float32)
            out[tile_b, tile_f] = (acc / counts[:, None]).to(out.dtype)
    return out


def jagged_mean_reference(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    rows = []
    for b in range(x_offsets.numel() - 1):
        segment = x_data[int(x_offsets[b]) : int(x_offsets[b + 1])]
        if segment.size(0) == 0:
            rows.append(torch.zeros(x_data.size(1), dtype=x_data.dtype, device=x_data.device))
        else:
            rows.append(segment.float().mean(0).to(x_data.dtype))
    return torch.stack(rows)


def example_args() -> tuple:
    num_segments, features, max_len = 17, 13, 29
    lengths = torch.randint(0, max_len + 1, (num_segments,))
    offsets = torch.zeros(num_segments + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    x_data = torch.randn(int(offsets[-1]), features)
    return x_data.to(DEVICE), offsets.to(DEVICE)


CASES = [Case("jagged_mean", jagged_mean, jagged_mean_reference, atol=1e-5, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
