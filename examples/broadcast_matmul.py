"""Batched activations times one shared weight matrix: `a [batch, m, k] @ b [k, n]`.

- `broadcast_matmul`: the batch is a launch dimension with block size 1, so every program takes
  one batch entry (`tile_b.begin`) and runs a plain 2-D `torch.addmm` K loop against `b`.
- `broadcast_matmul_3d`: a tile spans several batch entries; the shared `b` tile is broadcast
  over them with `expand` and accumulated with `torch.baddbmm`.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def broadcast_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.shape
    k2, n = b.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.empty([batch, m, n], dtype=torch.promote_types(a.dtype, b.dtype), device=a.device)
    for tile_b, tile_m, tile_n in hl.tile([batch, m, n], block_size=[1, None, None]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, a[tile_b.begin, tile_m, tile_k], b[tile_k, tile_n])
        out[tile_b.begin, tile_m, tile_n] = acc.to(out.dtype)
    return out


@helion.kernel()
def broadcast_matmul_3d(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.shape
    k2, n = b.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.empty([batch, m, n], dtype=torch.promote_types(a.dtype, b.dtype), device=a.device)
    for tile_b, tile_m, tile_n in hl.tile([batch, m, n]):
        acc = hl.zeros([tile_b, tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            a_tile = a[tile_b, tile_m, tile_k]
            b_tile = b[tile_k, tile_n][None, :, :].expand(a_tile.size(0), -1, -1)
            acc = torch.baddbmm(acc, a_tile, b_tile)
        out[tile_b, tile_m, tile_n] = acc.to(out.dtype)
    return out


def broadcast_matmul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a.float(), b.float()).to(a.dtype)


def example_args() -> tuple:
    return (
        torch.randn(3, 21, 37, device=DEVICE, dtype=torch.float16),
        torch.randn(37, 19, device=DEVICE, dtype=torch.float16),
    )


CASES = [
    Case("broadcast_matmul", broadcast_matmul, broadcast_matmul_reference, atol=1e-2, rtol=1e-2),
    Case(
        "broadcast_matmul_3d", broadcast_matmul_3d, broadcast_matmul_reference, atol=1e-2, rtol=1e-2
    ),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
