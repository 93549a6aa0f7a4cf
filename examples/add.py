"""Elementwise add with broadcasting over N-D tiles of the output."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # host code: broadcast the operands (views, no copies) and allocate the result
    x, y = torch.broadcast_tensors(x, y)
    out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    # device code: one program per N-D tile of `out`
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def add_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def example_args() -> tuple:
    return (
        torch.randn(3, 37, 53, device=DEVICE),
        torch.randn(37, 53, device=DEVICE, dtype=torch.float16),
    )


CASES = [Case("add", add, add_reference)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
