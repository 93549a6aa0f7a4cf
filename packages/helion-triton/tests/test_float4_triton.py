"""hl.float4_e2m1fn_x2_to_float32 on Triton (the interpreter on CPU, compiled on a GPU): every
byte value bit for bit against a decoder written from the E2M1 definition, and unpacked FP4
weights in a matmul, under several configs."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl


def e2m1(code: int) -> float:
    sign = -1.0 if code & 8 else 1.0
    exponent, mantissa = (code >> 1) & 3, code & 1
    if exponent == 0:
        return sign * 0.5 * mantissa
    return sign * (1.0 + 0.5 * mantissa) * 2.0 ** (exponent - 1)


def reference(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    table = torch.tensor([e2m1(code) for code in range(16)], device=packed.device)
    codes = packed.to(torch.int64)
    return table[codes & 15], table[codes >> 4]


def unpack(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lo = torch.empty(packed.shape, dtype=torch.float32, device=packed.device)
    hi = torch.empty(packed.shape, dtype=torch.float32, device=packed.device)
    for tile in hl.tile(packed.size(0)):
        lo[tile], hi[tile] = hl.float4_e2m1fn_x2_to_float32(packed[tile])
    return lo, hi


def fp4_matmul(a: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """`a @ w`, FP4 weights packed along K: byte [i, n] holds w[2i, n] (low) and w[2i + 1, n]."""
    m = a.size(0)
    half_k, n = weights.size()
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(half_k):
            lo, hi = hl.float4_e2m1fn_x2_to_float32(weights[tile_k, tile_n])
            even = a[tile_m, tile_k.index * 2]
            odd = a[tile_m, tile_k.index * 2 + 1]
            acc = torch.addmm(acc, even, lo)
            acc = torch.addmm(acc, odd, hi)
        out[tile_m, tile_n] = acc
    return out


def test_every_byte_value(device):
    packed = torch.arange(256, device=device).repeat(3)[:701].to(torch.uint8)
    lo, hi = helion.kernel(unpack, backend="triton", autotune_effort="none")(packed)
    expected_lo, expected_hi = reference(packed)
    # bit for bit: -0.0 (code 0b1000) included
    assert torch.equal(lo.view(torch.int32), expected_lo.view(torch.int32))
    assert torch.equal(hi.view(torch.int32), expected_hi.view(torch.int32))


@pytest.mark.parametrize("seed", range(3))
def test_matmul_with_unpacked_weights(device, seed):
    generator = torch.Generator().manual_seed(seed)
    m, half_k, n = 37, 27, 45  # K = 54
    a = torch.randn(m, 2 * half_k, generator=generator).to(device)
    weights = torch.randint(0, 256, (half_k, n), dtype=torch.uint8, generator=generator).to(device)
    kernel = helion.kernel(
        fp4_matmul, backend="triton", autotune_effort="none", dot_precision="ieee"
    )
    lo, hi = reference(weights)
    w = torch.stack([lo, hi], dim=1).reshape(2 * half_k, n)  # rows 2i (low), 2i + 1 (high)
    expected = a.double() @ w.double()
    bound = kernel.bind((a, weights))
    config = bound.config_spec.random_config(random.Random(seed))
    actual = bound.compile_config(config)(a, weights)
    torch.testing.assert_close(actual.double(), expected, rtol=1e-5, atol=1e-4)
