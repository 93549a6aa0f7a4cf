"""Mixture-of-experts matmul: tokens sorted by expert, each multiplied by its expert's weights.

`x [tokens, k]` holds the tokens grouped by expert (`x[offsets[e]:offsets[e + 1]]` are routed to
expert e), `w [experts, k, n]` the expert weights, `expert_offsets [experts + 1]` the group
boundaries. Programs tile the token dimension itself, so a tile can straddle a boundary: each
program finds the experts of its rows on the device (a row's expert is the number of group ends
at or before it), then loops over the experts present in the tile (a data-dependent range) and
accumulates `x_rows_of_expert @ w[e]`, with the rows of other experts zeroed in the A tile.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def moe_matmul(x: torch.Tensor, w: torch.Tensor, expert_offsets: torch.Tensor) -> torch.Tensor:
    tokens, k = x.shape
    experts, k2, n = w.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    assert expert_offsets.shape == (experts + 1,), "expert_offsets needs experts + 1 entries"
    out = torch.empty([tokens, n], dtype=torch.promote_types(x.dtype, w.dtype), device=x.device)
    for tile_t, tile_n in hl.tile([tokens, n]):
        # expert of each row: how many experts end at or before it
        ends = expert_offsets[1 : experts + 1]
        row_expert = (ends[None, :] <= tile_t.index[:, None]).to(torch.int32).sum(dim=1)
        first = row_expert.amin()
        last = row_expert.amax()
        acc = hl.zeros([tile_t, tile_n], dtype=torch.float32)
        for e in hl.grid(first, last + 1):
            mine = row_expert == e
            for tile_k in hl.tile(k):
                rows = torch.where(mine[:, None], x[tile_t, tile_k], 0)
                acc = torch.addmm(acc, rows, w[e, tile_k, tile_n])
        out[tile_t, tile_n] = acc.to(out.dtype)
    return out


def moe_matmul_reference(
    x: torch.Tensor, w: torch.Tensor, expert_offsets: torch.Tensor
) -> torch.Tensor:
    out = torch.empty(x.size(0), w.size(2), dtype=torch.float32, device=x.device)
    for e in range(w.size(0)):
        start, end = int(expert_offsets[e]), int(expert_offsets[e + 1])
        out[start:end] = x[start:end].float() @ w[e].float()
    return out.to(x.dtype)


def route(tokens: int, experts: int) -> torch.Tensor:
    """Host helper: expert offsets of `tokens` tokens routed at random (some experts get none)."""
    choice = torch.randint(0, experts, (tokens,))
    choice[choice == 1] = 0  # expert 1 receives no tokens
    counts = torch.bincount(choice, minlength=experts)
    offsets = torch.zeros(experts + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(counts, 0)
    return offsets.to(DEVICE)


def example_args() -> tuple:
    tokens, experts, k, n = 53, 5, 27, 19
    x = torch.randn(tokens, k, device=DEVICE, dtype=torch.float16)
    w = torch.randn(experts, k, n, device=DEVICE, dtype=torch.float16)
    return x, w, route(tokens, experts)


CASES = [Case("moe_matmul", moe_matmul, moe_matmul_reference, atol=1e-2, rtol=1e-2)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
