"""FP8 (e4m3, scaled) matmul + reduce-scatter: helion_distributed.fp8_matmul_reduce_scatter,
checked against a float32 matmul of the dequantized inputs and torch.distributed.reduce_scatter_tensor.

    python -m torch.distributed.run --standalone --nproc-per-node 2 examples/distributed/fp8_matmul_reduce_scatter.py

A is [M, K] float8_e4m3fn with a float32 scale per row, B [K, N] float8_e4m3fn with a scale per
column; partial products accumulate in float32, are scaled, reduce-scattered in float32 and
written as bfloat16.
"""

from __future__ import annotations

import torch
from _dist_common import main
from _dist_common import randn
from _dist_common import reduce_scatter_ref
from _dist_common import seeded

import helion_distributed as hd


def run(rank: int, world_size: int, device: torch.device) -> None:
    try:
        fp8 = torch.float8_e4m3fn
    except AttributeError:
        raise hd.FP8Unsupported("this torch has no float8_e4m3fn") from None
    rows, k, n = 9 * world_size, 32, 40
    a = (randn(rows, k, seed=30 + rank, device=device) * 0.5).to(fp8)
    b = (randn(k, n, seed=5, device=device) * 0.5).to(fp8)
    scale_a = (torch.rand(rows, 1, generator=seeded(31 + rank, device)) + 0.5).to(device)
    scale_b = (torch.rand(1, n, generator=seeded(6, device)) + 0.5).to(device)
    out = hd.fp8_matmul_reduce_scatter(a, b, scale_a, scale_b)
    assert out.dtype == torch.bfloat16 and out.shape == (9, n)
    partial = (a.float() * scale_a) @ (b.float() * scale_b)
    expected = torch.empty(9, n, device=device)
    reduce_scatter_ref(expected, partial)
    torch.testing.assert_close(out, expected.to(torch.bfloat16), atol=3e-2, rtol=2e-2)


if __name__ == "__main__":
    raise SystemExit(main(run, "fp8_matmul_reduce_scatter"))
