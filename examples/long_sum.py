"""Sum of long rows with a looped reduction: the row is read chunk by chunk, the chunk size is
a registered (tunable) block size shared with the inner loop."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def long_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    chunk = hl.register_block_size(n)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=chunk):
            acc += x[tile_m, tile_n].to(torch.float32).sum(-1)
        out[tile_m] = acc.to(x.dtype)
    return out


def long_sum_reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1)


def example_args() -> tuple:
    return (torch.randn(5, 2051, device=DEVICE),)


CASES = [Case("long_sum", long_sum, long_sum_reference, atol=1e-3, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
