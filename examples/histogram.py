"""Histogram of values in [0, 1) into `num_bins` equal bins, counted with `hl.atomic_add`."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def histogram(x: torch.Tensor, num_bins: int) -> torch.Tensor:
    counts = torch.zeros([num_bins], dtype=torch.int32, device=x.device)
    for tile in hl.tile(x.size(0)):
        bins = (x[tile] * num_bins).to(torch.int64).clamp(0, num_bins - 1)
        hl.atomic_add(counts, [bins], 1)
    return counts


def histogram_reference(x: torch.Tensor, num_bins: int) -> torch.Tensor:
    bins = (x * num_bins).to(torch.int64).clamp(0, num_bins - 1)
    return torch.bincount(bins, minlength=num_bins).to(torch.int32)


def example_args() -> tuple:
    return torch.rand(3001, device=DEVICE), 37


CASES = [Case("histogram", histogram, histogram_reference, atol=0.0, rtol=0.0)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
