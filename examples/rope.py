"""Rotary position embedding (RoPE, the "rotate half" layout of LLaMA / Hugging Face) applied to
queries and keys of shape `[batch, seq, heads, head_dim]` with `cos` / `sin` tables of shape
`[seq, head_dim]`:

    out = x * cos + rotate_half(x) * sin,   rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])

One program handles a tile of (batch, position, head) triples for both q and k, reading each
head vector as its two halves; the tables are loaded once per position tile and broadcast over
batches and heads.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def rope(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    b, s, h, d = q.shape
    head_dim = hl.specialize(d)
    half = head_dim // 2
    assert head_dim % 2 == 0, "head_dim must be even"
    assert k.shape[:2] == (b, s) and k.size(3) == d, "q and k must agree in batch, seq, head_dim"
    assert cos.shape == (s, d) and sin.shape == (s, d), "cos / sin must be [seq, head_dim]"
    hk = k.size(2)
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    for tile_b, tile_s, tile_h in hl.tile([b, s, max(h, hk)]):
        cos_lo = cos[tile_s, :half].to(torch.float32)[None, :, None, :]
        cos_hi = cos[tile_s, half:].to(torch.float32)[None, :, None, :]
        sin_lo = sin[tile_s, :half].to(torch.float32)[None, :, None, :]
        sin_hi = sin[tile_s, half:].to(torch.float32)[None, :, None, :]
        for x, out, heads in ((q, q_out, h), (k, k_out, hk)):
            # k may have fewer heads than q (grouped-query attention): mask the extra ones
            valid = (tile_h.index < heads)[None, None, :, None]
            lo = [tile_b, tile_s, tile_h, slice(None, half)]
            hi = [tile_b, tile_s, tile_h, slice(half, None)]
            x_lo = hl.load(x, lo, extra_mask=valid).to(torch.float32)
            x_hi = hl.load(x, hi, extra_mask=valid).to(torch.float32)
            hl.store(out, lo, (x_lo * cos_lo - x_hi * sin_lo).to(out.dtype), extra_mask=valid)
            hl.store(out, hi, (x_hi * cos_hi + x_lo * sin_hi).to(out.dtype), extra_mask=valid)
    return q_out, k_out


def rope_reference(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        lo, hi = x.chunk(2, dim=-1)
        return torch.cat((-hi, lo), dim=-1)

    c = cos.float()[None, :, None, :]
    s = sin.float()[None, :, None, :]
    return tuple(((x.float() * c + rotate_half(x.float()) * s).to(x.dtype)) for x in (q, k))


def rope_tables(
    seq: int, head_dim: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=DEVICE).float() / head_dim)
    angles = torch.outer(torch.arange(seq, device=DEVICE).float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def example_args() -> tuple:
    batch, seq, heads, kv_heads, head_dim = 2, 9, 4, 3, 24
    cos, sin = rope_tables(seq, head_dim)
    return (
        torch.randn(batch, seq, heads, head_dim, device=DEVICE, dtype=torch.float16),
        torch.randn(batch, seq, kv_heads, head_dim, device=DEVICE, dtype=torch.float16),
        cos,
        sin,
    )


CASES = [Case("rope", rope, rope_reference, atol=2e-3, rtol=2e-3)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
