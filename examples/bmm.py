"""Batched matrix multiply over 3-D tiles (batch, rows, columns), accumulating with
`torch.baddbmm`."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.shape
    batch2, k2, n = b.shape
    assert batch == batch2 and k == k2, "shape mismatch"
    out = torch.empty([batch, m, n], dtype=torch.promote_types(a.dtype, b.dtype), device=a.device)
    for tile_b, tile_m, tile_n in hl.tile([batch, m, n]):
        acc = hl.zeros([tile_b, tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.baddbmm(acc, a[tile_b, tile_m, tile_k], b[tile_b, tile_k, tile_n])
        out[tile_b, tile_m, tile_n] = acc.to(out.dtype)
    return out


def bmm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a.float(), b.float()).to(a.dtype)


def example_args() -> tuple:
    return (
        torch.randn(2, 19, 23, device=DEVICE),
        torch.randn(2, 23, 13, device=DEVICE),
    )


CASES = [Case("bmm", bmm, bmm_reference, atol=1e-4, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
