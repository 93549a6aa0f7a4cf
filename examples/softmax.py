"""Row softmax in one pass: whole rows are loaded and `torch.softmax` runs on the tile."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def softmax(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile in hl.tile(m):
        out[tile, :] = torch.softmax(x[tile, :], dim=1)
    return out


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


def example_args() -> tuple:
    return (torch.randn(93, 187, device=DEVICE),)


CASES = [Case("softmax", softmax, softmax_reference, atol=1e-5, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
