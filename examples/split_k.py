"""Split-K reductions: programs along the reduced dimension write per-tile partial results,
indexed by `tile.id`, into a buffer that host code sums afterwards (deterministic, no atomics).

- `split_k_sum`: column sums of a tall matrix, the rows split into registered-size chunks.
- `split_k_matmul`: a matrix multiply whose K dimension is split across programs.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


# the host code's final reduction is deliberate: no warning that it is not fused
@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
def split_k_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    chunk = hl.register_block_size(m)
    partial = torch.zeros([helion.cdiv(m, chunk), n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n], block_size=[chunk, None]):
        partial[tile_m.id, tile_n] = x[tile_m, tile_n].to(torch.float32).sum(dim=0)
    return partial.sum(0).to(x.dtype)


# the host code's final reduction is deliberate: no warning that it is not fused
@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
def split_k_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    k_chunk = hl.register_block_size(k)
    partial = torch.zeros([helion.cdiv(k, k_chunk), m, n], dtype=torch.float32, device=a.device)
    for tile_m, tile_n, outer_k in hl.tile([m, n, k], block_size=[None, None, k_chunk]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(outer_k.begin, outer_k.end):
            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
        partial[outer_k.id, tile_m, tile_n] = acc
    return partial.sum(0).to(a.dtype)


def split_k_sum_reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum(0)


def split_k_matmul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


def example_args() -> tuple:
    return (torch.randn(263, 29, device=DEVICE),)


def matmul_args() -> tuple:
    return torch.randn(11, 203, device=DEVICE), torch.randn(203, 13, device=DEVICE)


CASES = [
    Case("split_k_sum", split_k_sum, split_k_sum_reference, atol=1e-4, rtol=1e-4),
    Case(
        "split_k_matmul",
        split_k_matmul,
        split_k_matmul_reference,
        atol=1e-3,
        rtol=1e-4,
        args=matmul_args,
    ),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
