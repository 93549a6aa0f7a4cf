"""Elementwise exp over a 2-D input."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def exp(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = torch.exp(x[tile_m, tile_n])
    return out


def exp_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(x)


def example_args() -> tuple:
    return (torch.randn(45, 67, device=DEVICE),)


CASES = [Case("exp", exp, exp_reference)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
