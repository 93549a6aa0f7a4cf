"""RMS normalization of fp16 rows (math in float32): `x / sqrt(mean(x^2) + eps) * weight`."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, n = x.shape
    assert weight.shape == (n,), "weight must have the row size"
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        inv_rms = torch.rsqrt((row * row).mean(dim=-1, keepdim=True) + eps)
        out[tile_m, :] = (row * inv_rms * weight[:].to(torch.float32)).to(out.dtype)
    return out


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def example_args() -> tuple:
    return (
        torch.randn(61, 229, device=DEVICE, dtype=torch.float16),
        torch.randn(229, device=DEVICE, dtype=torch.float16),
    )


CASES = [Case("rms_norm", rms_norm, rms_norm_reference, atol=1e-2, rtol=1e-2)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
