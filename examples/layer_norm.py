"""Layer normalization over the last dimension, with weight and bias, statistics in float32."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    m, n = x.shape
    assert weight.shape == (n,) and bias.shape == (n,), "weight and bias must have the row size"
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        mean = row.mean(dim=-1, keepdim=True)
        centered = row - mean
        variance = (centered * centered).mean(dim=-1, keepdim=True)
        normalized = centered * torch.rsqrt(variance + eps)
        scaled = normalized * weight[:].to(torch.float32) + bias[:].to(torch.float32)
        out[tile_m, :] = scaled.to(out.dtype)
    return out


def layer_norm_reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    return F.layer_norm(x.float(), [x.size(-1)], weight.float(), bias.float(), eps).to(x.dtype)


def example_args() -> tuple:
    n = 203
    x = 1.5 + 0.75 * torch.randn(57, n, device=DEVICE)
    return x, torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)


CASES = [Case("layer_norm", layer_norm, layer_norm_reference, atol=1e-4, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
