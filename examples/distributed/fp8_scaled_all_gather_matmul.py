"""FP8 (e4m3, scaled) all-gather + matmul: helion_distributed.fp8_all_gather_matmul, checked
against torch.distributed.all_gather_into_tensor and a float32 matmul of the dequantized inputs.

    python -m torch.distributed.run --standalone --nproc-per-node 2 examples/distributed/fp8_scaled_all_gather_matmul.py

The row scales of A travel with their rows; the gathered A comes back in FP8, bit for bit.
"""

from __future__ import annotations

import torch
from _dist_common import all_gather_ref
from _dist_common import main
from _dist_common import randn
from _dist_common import seeded

import helion_distributed as hd


def run(rank: int, world_size: int, device: torch.device) -> None:
    try:
        fp8 = torch.float8_e4m3fn
    except AttributeError:
        raise hd.FP8Unsupported("this torch has no float8_e4m3fn") from None
    m, k, n = 21, 32, 40
    a = (randn(m, k, seed=40 + rank, device=device) * 0.5).to(fp8)
    b = (randn(k, n, seed=8, device=device) * 0.5).to(fp8)
    scale_a = (torch.rand(m, 1, generator=seeded(41 + rank, device)) + 0.5).to(device)
    scale_b = (torch.rand(1, n, generator=seeded(9, device)) + 0.5).to(device)
    a_gathered, product = hd.fp8_all_gather_matmul(a, b, scale_a, scale_b)
    gathered_bits = torch.empty(world_size * m, k, dtype=torch.uint8, device=device)
    all_gather_ref(gathered_bits, a.view(torch.uint8))
    gathered_scales = torch.empty(world_size * m, 1, device=device)
    all_gather_ref(gathered_scales, scale_a)
    assert torch.equal(a_gathered.view(torch.uint8), gathered_bits), "the gathered FP8 A differs"
    expected = (gathered_bits.view(fp8).float() * gathered_scales) @ (b.float() * scale_b)
    torch.testing.assert_close(product, expected.to(torch.bfloat16), atol=3e-2, rtol=2e-2)


if __name__ == "__main__":
    raise SystemExit(main(run, "fp8_scaled_all_gather_matmul"))
