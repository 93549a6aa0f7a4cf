"""Row sums: each program loads whole rows (`x[tile, :]`) and reduces them."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def row_sum(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile in hl.tile(m):
        out[tile] = x[tile, :].sum(-1)
    return out


def row_sum_reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1)


def example_args() -> tuple:
    return (torch.randn(77, 301, device=DEVICE),)


CASES = [Case("sum", row_sum, row_sum_reference)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
