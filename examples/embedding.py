"""Embedding lookup: rows of the table gathered with an index tensor, `weight[idx[tile_b], tile_e]`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def embedding(idx: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    idx_flat = idx.reshape(-1)
    _, dim = weight.shape
    out = torch.empty([idx_flat.size(0), dim], dtype=weight.dtype, device=weight.device)
    for tile_b, tile_e in hl.tile([idx_flat.size(0), dim]):
        out[tile_b, tile_e] = weight[idx_flat[tile_b], tile_e]
    return out.view(*idx.shape, dim)


def embedding_reference(idx: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.embedding(idx, weight)


def example_args() -> tuple:
    vocab = 97
    return torch.randint(0, vocab, (7, 13), device=DEVICE), torch.randn(vocab, 45, device=DEVICE)


CASES = [Case("embedding", embedding, embedding_reference, atol=0.0, rtol=0.0)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
