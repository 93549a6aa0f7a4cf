"""GEGLU, the gated activation of GLU-variant MLPs: `gelu(a, approximate="tanh") * b`, with the
gate `a` and the up projection `b` in bf16 and the math in float32.

`geglu` takes the two halves as separate tensors; `geglu_packed` takes the fused projection
output `[tokens, 2 * hidden]` (gate first) and reads the second half with a shifted index.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def geglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.shape == b.shape, "gate and up projection must have the same shape"
    out = torch.empty_like(a)
    for tile in hl.tile(out.size()):
        gate = a[tile].to(torch.float32)
        out[tile] = (F.gelu(gate, approximate="tanh") * b[tile].to(torch.float32)).to(out.dtype)
    return out


@helion.kernel()
def geglu_packed(x: torch.Tensor) -> torch.Tensor:
    t, two_h = x.shape
    h = two_h // 2
    out = torch.empty([t, h], dtype=x.dtype, device=x.device)
    for tile_t, tile_h in hl.tile([t, h]):
        gate = x[tile_t, tile_h].to(torch.float32)
        up = x[tile_t, tile_h.index + h].to(torch.float32)
        out[tile_t, tile_h] = (F.gelu(gate, approximate="tanh") * up).to(out.dtype)
    return out


def geglu_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (F.gelu(a.float(), approximate="tanh") * b.float()).to(a.dtype)


def geglu_packed_reference(x: torch.Tensor) -> torch.Tensor:
    gate, up = x.chunk(2, dim=-1)
    return geglu_reference(gate, up)


def example_args() -> tuple:
    shape = (19, 45)
    return (
        torch.randn(shape, device=DEVICE, dtype=torch.bfloat16),
        torch.randn(shape, device=DEVICE, dtype=torch.bfloat16),
    )


def packed_args() -> tuple:
    return (torch.randn(17, 2 * 37, device=DEVICE, dtype=torch.bfloat16),)


CASES = [
    Case("geglu", geglu, geglu_reference, atol=1e-2, rtol=1e-2),
    Case(
        "geglu_packed", geglu_packed, geglu_packed_reference, atol=1e-2, rtol=1e-2, args=packed_args
    ),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
