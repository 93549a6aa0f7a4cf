"""Squeeze-and-excitation style gating, fused into the matmul epilogue.

- `se_block`: `x * sigmoid(x @ w)` for a square `w [n, n]`; each program computes one output tile
  of the gate matmul and multiplies it by the matching tile of `x` before storing.
- `se_block_channels`: the convolutional SE block on `x [batch, channels, length]`: squeeze each
  channel to its mean over `length`, excite with two small matmuls
  (`sigmoid(relu(s @ w1) @ w2)`, `w1 [channels, hidden]`, `w2 [hidden, channels]`) and scale the
  channels of `x` by the gate. Each program owns a tile of batch rows and does all three steps.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def se_block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    assert w.shape == (n, n), f"w must be [{n}, {n}], got {list(w.shape)}"
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(n):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, tile_n])
        gate = torch.sigmoid(acc)
        out[tile_m, tile_n] = (x[tile_m, tile_n].to(torch.float32) * gate).to(out.dtype)
    return out


@helion.kernel()
def se_block_channels(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    batch, channels, _length = x.shape
    hidden = w1.size(1)
    assert w1.shape == (channels, hidden) and w2.shape == (hidden, channels), "weight shapes"
    out = torch.empty_like(x)
    for tile_b in hl.tile(batch):
        rows = x[tile_b, :, :].to(torch.float32)
        squeezed = rows.mean(dim=-1)  # [tile_b, channels]
        excited = torch.relu(squeezed @ w1[:, :].to(torch.float32))
        gate = torch.sigmoid(excited @ w2[:, :].to(torch.float32))
        out[tile_b, :, :] = (rows * gate[:, :, None]).to(out.dtype)
    return out


def se_block_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.float() * torch.sigmoid(x.float() @ w.float())).to(x.dtype)


def se_block_channels_reference(
    x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    xf = x.float()
    gate = torch.sigmoid(torch.relu(xf.mean(-1) @ w1.float()) @ w2.float())
    return (xf * gate[:, :, None]).to(x.dtype)


def example_args() -> tuple:
    n = 43
    return (
        torch.randn(37, n, device=DEVICE, dtype=torch.bfloat16),
        torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16) / n**0.5,
    )


def channels_args() -> tuple:
    batch, channels, length, hidden = 5, 24, 19, 6
    return (
        torch.randn(batch, channels, length, device=DEVICE, dtype=torch.float16),
        torch.randn(channels, hidden, device=DEVICE, dtype=torch.float16) / channels**0.5,
        torch.randn(hidden, channels, device=DEVICE, dtype=torch.float16) / hidden**0.5,
    )


CASES = [
    Case("se_block", se_block, se_block_reference, atol=2e-2, rtol=2e-2),
    Case(
        "se_block_channels",
        se_block_channels,
        se_block_channels_reference,
        atol=1e-2,
        rtol=1e-2,
        args=channels_args,
    ),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
