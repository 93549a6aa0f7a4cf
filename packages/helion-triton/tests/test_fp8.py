"""fp8 tensors load and store through the Triton backend (masked loads bitcast the bytes)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl


@helion.kernel(autotune_effort="none", backend="triton")
def fp8_scale(x: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float32)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile].to(torch.float32) * scale
    return out


@helion.kernel(autotune_effort="none", backend="triton")
def fp8_roundtrip(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile]
    return out


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_fp8_masked_load(dtype):
    x = torch.randn(301).to(dtype)
    torch.testing.assert_close(fp8_scale(x, 0.5), x.float() * 0.5)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_fp8_store(dtype):
    x = torch.randn(37, 53).to(dtype)
    out = fp8_roundtrip(x)
    assert out.dtype == dtype
    assert torch.equal(out.view(torch.uint8), x.view(torch.uint8))
