"""Attention with an online softmax (flash-attention style), non-causal and causal.

Each program owns a tile of query rows of some (batch * head) slices and walks the keys in
tiles, keeping a running row maximum, a running denominator and a float32 output accumulator
that is rescaled whenever the maximum grows. The causal variant stops its key loop at the last
query row of its tile (a bound known only on the device) and masks the diagonal tile.
"""

from __future__ import annotations

import math

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    m, head_dim = q.size(-2), hl.specialize(q.size(-1))
    n = k.size(-2)
    q_flat = q.reshape(-1, m, head_dim)
    k_flat = k.reshape(-1, n, head_dim)
    v_flat = v.reshape(-1, n, head_dim)
    out = torch.empty_like(q_flat)
    scale = 1.0 / math.sqrt(head_dim)
    for tile_b, tile_m in hl.tile([q_flat.size(0), m]):
        row_max = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        row_sum = hl.zeros([tile_b, tile_m], dtype=torch.float32)
        acc = hl.zeros([tile_b, tile_m, head_dim], dtype=torch.float32)
        q_tile = q_flat[tile_b, tile_m, :]
        for tile_n in hl.tile(n):
            # hl.dot keeps the scores in float32 (torch.bmm would round them to q's dtype)
            scores = hl.dot(q_tile, k_flat[tile_b, tile_n, :].transpose(1, 2)) * scale
            new_max = torch.maximum(row_max, scores.amax(dim=-1))
            probs = torch.exp(scores - new_max[:, :, None])
            rescale = torch.exp(row_max - new_max)
            row_sum = row_sum * rescale + probs.sum(dim=-1)
            acc = hl.dot(
                probs.to(v.dtype), v_flat[tile_b, tile_n, :], acc=acc * rescale[:, :, None]
            )
            row_max = new_max
        out[tile_b, tile_m, :] = (acc / row_sum[:, :, None]).to(out.dtype)
    return out.view(q.shape)


@helion.kernel()
def attention_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    m, head_dim = q.size(-2), hl.specialize(q.size(-1))
    q_flat = q.reshape(-1, m, head_dim)
    k_flat = k.reshape(-1, m, head_dim)
    v_flat = v.reshape(-1, m, head_dim)
    out = torch.empty_like(q_flat)
    scale = 1.0 / math.sqrt(head_dim)
    for tile_b, tile_m in hl.tile([q_flat.size(0), m]):
        row_max = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        row_sum = hl.zeros([tile_b, tile_m], dtype=torch.float32)
        acc = hl.zeros([tile_b, tile_m, head_dim], dtype=torch.float32)
        q_tile = q_flat[tile_b, tile_m, :]
        # keys after the tile's last query row are masked for every row of the tile: skip them
        for tile_n in hl.tile(0, tile_m.end):
            scores = hl.dot(q_tile, k_flat[tile_b, tile_n, :].transpose(1, 2)) * scale
            future = tile_n.index[None, None, :] > tile_m.index[None, :, None]
            scores = torch.where(future, float("-inf"), scores)
            new_max = torch.maximum(row_max, scores.amax(dim=-1))
            probs = torch.exp(scores - new_max[:, :, None])
            rescale = torch.exp(row_max - new_max)
            row_sum = row_sum * rescale + probs.sum(dim=-1)
            acc = hl.dot(
                probs.to(v.dtype), v_flat[tile_b, tile_n, :], acc=acc * rescale[:, :, None]
            )
            row_max = new_max
        out[tile_b, tile_m, :] = (acc / row_sum[:, :, None]).to(out.dtype)
    return out.view(q.shape)


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.size(-1))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)


def attention_causal_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.size(-1))
    m = q.size(-2)
    future = torch.ones(m, m, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)


def example_args() -> tuple:
    shape = (1, 3, 37, 16)
    return tuple(torch.randn(shape, device=DEVICE) for _ in range(3))


CASES = [
    Case("attention", attention, attention_reference, atol=1e-4, rtol=1e-4),
    Case("attention_causal", attention_causal, attention_causal_reference, atol=1e-4, rtol=1e-4),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
