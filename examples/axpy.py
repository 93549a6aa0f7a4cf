"""`alpha * x + y` with `alpha` a runtime scalar argument (a new value needs no recompile)."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = alpha * x[tile] + y[tile]
    return out


def axpy_reference(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return alpha * x + y


def example_args() -> tuple:
    alpha = float(torch.empty(()).uniform_(-2.0, 2.0))
    return alpha, torch.randn(1000, device=DEVICE), torch.randn(1000, device=DEVICE)


CASES = [Case("axpy", axpy, axpy_reference)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
