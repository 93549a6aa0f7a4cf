"""Per-row top-k and sort inside a kernel: `torch.topk` / `torch.sort` of whole rows (`x[tile, :]`).

A sort needs all of its dimension at once, so the row is loaded as a full slice; each program
sorts a block of rows. Values and indices come out as PyTorch gives them.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def topk(x: torch.Tensor, k: hl.constexpr) -> tuple[torch.Tensor, torch.Tensor]:
    m, _ = x.shape
    values = torch.empty([m, k], dtype=x.dtype, device=x.device)
    indices = torch.empty([m, k], dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        top = torch.topk(x[tile_m, :], k, dim=-1)
        values[tile_m, :] = top.values
        indices[tile_m, :] = top.indices
    return values, indices


@helion.kernel()
def sort(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.shape
    values = torch.empty_like(x)
    indices = torch.empty([m, n], dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        ordered, order = torch.sort(x[tile_m, :], dim=-1)
        values[tile_m, :] = ordered
        indices[tile_m, :] = order
    return values, indices


def topk_reference(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.topk(x, k, dim=-1)
    return values, indices


def sort_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.sort(x, dim=-1)
    return values, indices


def distinct_rows(m: int, n: int) -> torch.Tensor:
    """Random rows without repeated values, so that the order of the indices is unique."""
    return torch.rand(m, n, device=DEVICE).argsort(dim=1).to(torch.float32) * 0.125 - 3.0


def example_args() -> tuple:
    return distinct_rows(13, 45), 5


CASES = [
    Case("topk", topk, topk_reference, atol=0.0, rtol=0.0),
    Case("sort", sort, sort_reference, atol=0.0, rtol=0.0, args=lambda: (distinct_rows(11, 37),)),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
