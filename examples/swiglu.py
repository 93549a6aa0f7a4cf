"""SwiGLU, the gated activation of LLaMA-style MLPs: `silu(a) * b`, with the gate `a` and the
up projection `b` in fp16 and the math in float32. The kernel flattens any leading dimensions
(`[batch, seq, hidden]`) into rows on the host."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.shape == b.shape, "gate and up projection must have the same shape"
    hidden = a.size(-1)
    a_rows = a.reshape(-1, hidden)
    b_rows = b.reshape(-1, hidden)
    out = torch.empty_like(a_rows)
    for tile_t, tile_h in hl.tile(out.size()):
        gate = a_rows[tile_t, tile_h].to(torch.float32)
        up = b_rows[tile_t, tile_h].to(torch.float32)
        out[tile_t, tile_h] = (F.silu(gate) * up).to(out.dtype)
    return out.view(a.shape)


def swiglu_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    af = a.float()
    return (af * torch.sigmoid(af) * b.float()).to(a.dtype)


def example_args() -> tuple:
    shape = (2, 9, 43)
    return (
        torch.randn(shape, device=DEVICE, dtype=torch.float16),
        torch.randn(shape, device=DEVICE, dtype=torch.float16),
    )


CASES = [Case("swiglu", swiglu, swiglu_reference, atol=1e-3, rtol=1e-3)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
