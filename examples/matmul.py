"""Tiled matrix multiply: fp16 inputs, a float32 accumulator carried through the K loop with
`torch.addmm`, the result cast back to the input dtype."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    k2, n = y.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def matmul_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x.float() @ y.float()).to(x.dtype)


def example_args() -> tuple:
    return (
        torch.randn(37, 53, device=DEVICE, dtype=torch.float16),
        torch.randn(53, 29, device=DEVICE, dtype=torch.float16),
    )


CASES = [Case("matmul", matmul, matmul_reference, atol=1e-2, rtol=1e-2)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
