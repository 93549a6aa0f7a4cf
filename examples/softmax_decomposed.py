"""Row softmax written out step by step (the third softmax variant, next to `softmax.py`, which
calls `torch.softmax` on the tile, and `softmax_two_pass.py`, the online version for long rows):
subtract the row maximum, exponentiate, divide by the row sum. fp16 in and out, float32 math."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def softmax_decomposed(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        rows = x[tile_m, :].to(torch.float32)
        row_max = torch.amax(rows, dim=1, keepdim=True)
        numerator = torch.exp(rows - row_max)
        denominator = torch.sum(numerator, dim=1, keepdim=True)
        out[tile_m, :] = (numerator / denominator).to(out.dtype)
    return out


def softmax_decomposed_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=1).to(x.dtype)


def example_args() -> tuple:
    return (torch.randn(23, 101, device=DEVICE, dtype=torch.float16) * 4,)


CASES = [
    Case(
        "softmax_decomposed",
        softmax_decomposed,
        softmax_decomposed_reference,
        atol=1e-3,
        rtol=1e-3,
    )
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
