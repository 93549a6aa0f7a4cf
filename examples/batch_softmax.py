"""Softmax over the last dimension of a 3-D tensor `[batch, rows, cols]`: the batch and the rows
are both grid dimensions, each program normalizes whole rows of one tile of batches."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def batch_softmax(x: torch.Tensor) -> torch.Tensor:
    b, m, _ = x.shape
    out = torch.empty_like(x)
    for tile_b, tile_m in hl.tile([b, m]):
        rows = x[tile_b, tile_m, :].to(torch.float32)
        out[tile_b, tile_m, :] = torch.softmax(rows, dim=-1).to(out.dtype)
    return out


def batch_softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def example_args() -> tuple:
    return (torch.randn(3, 7, 53, device=DEVICE, dtype=torch.float16),)


CASES = [Case("batch_softmax", batch_softmax, batch_softmax_reference, atol=1e-3, rtol=1e-3)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
