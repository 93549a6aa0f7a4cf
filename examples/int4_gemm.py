"""Weight-only int4 GEMM: bf16 / fp16 activations times signed int4 weights stored two per int8
byte, unpacked inside the kernel with shifts and masks.

`w_packed [k // 2, n]` (int8) holds weight row `2 * i` in the low nibble of row `i` and row
`2 * i + 1` in the high nibble, each a two's-complement value in [-8, 7]. The kernel loads one
tile of packed bytes, sign-extends both nibbles (`(byte << 4) >> 4` and `byte >> 4`, arithmetic
shifts on int8), casts them to the activation dtype and multiplies them with the even and odd
columns of the activation tile (`x` viewed as `[m, k // 2, 2]`).

- `int4_gemm`: plain int4 weights, bf16 activations.
- `int4_gemm_scaled`: per-output-channel float32 scales applied in the epilogue, fp16
  activations, with the nibbles extracted by masking (`byte & 0xF`) and re-centered.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def int4_gemm(x: torch.Tensor, w_packed: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    half_k, n = w_packed.shape
    assert w_packed.dtype == torch.int8, "weights are packed into int8 bytes"
    assert k == 2 * half_k, f"x has {k} columns but the weights pack {2 * half_k} rows"
    x_pairs = x.view(m, half_k, 2)  # column pairs (2i, 2i + 1) of x
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(half_k):
            packed = w_packed[tile_k, tile_n]
            low = ((packed << 4) >> 4).to(x.dtype)  # sign-extended low nibble: row 2i
            high = (packed >> 4).to(x.dtype)  # arithmetic shift: row 2i + 1
            acc = torch.addmm(acc, x_pairs[tile_m, tile_k, 0], low)
            acc = torch.addmm(acc, x_pairs[tile_m, tile_k, 1], high)
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


@helion.kernel()
def int4_gemm_scaled(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    half_k, n = w_packed.shape
    assert w_packed.dtype == torch.int8, "weights are packed into int8 bytes"
    assert k == 2 * half_k, f"x has {k} columns but the weights pack {2 * half_k} rows"
    assert scales.shape == (n,), "one scale per output column"
    x_pairs = x.view(m, half_k, 2)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(half_k):
            packed = w_packed[tile_k, tile_n].to(torch.int32)
            # unsigned nibbles in [0, 15], re-centered to two's complement [-8, 7]
            low = packed & 0xF
            high = (packed >> 4) & 0xF
            low = torch.where(low >= 8, low - 16, low).to(x.dtype)
            high = torch.where(high >= 8, high - 16, high).to(x.dtype)
            acc = torch.addmm(acc, x_pairs[tile_m, tile_k, 0], low)
            acc = torch.addmm(acc, x_pairs[tile_m, tile_k, 1], high)
        out[tile_m, tile_n] = (acc * scales[tile_n][None, :]).to(out.dtype)
    return out


def pack_int4(w: torch.Tensor) -> torch.Tensor:
    """Host helper: int values in [-8, 7] of shape [k, n] (k even) -> int8 bytes [k // 2, n]."""
    assert w.size(0) % 2 == 0, "k must be even"
    nibbles = w.to(torch.int16) & 0xF
    packed = nibbles[0::2] | (nibbles[1::2] << 4)
    return torch.where(packed >= 128, packed - 256, packed).to(torch.int8)


def unpack_int4(w_packed: torch.Tensor) -> torch.Tensor:
    """Host helper: int8 bytes [k // 2, n] -> int8 values in [-8, 7] of shape [k, n]."""
    low = (w_packed << 4) >> 4
    high = w_packed >> 4
    return torch.stack([low, high], dim=1).reshape(-1, w_packed.size(1))


def int4_gemm_reference(x: torch.Tensor, w_packed: torch.Tensor) -> torch.Tensor:
    return (x.float() @ unpack_int4(w_packed).float()).to(x.dtype)


def int4_gemm_scaled_reference(
    x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor
) -> torch.Tensor:
    return ((x.float() @ unpack_int4(w_packed).float()) * scales).to(x.dtype)


def example_args() -> tuple:
    m, k, n = 27, 58, 35
    w = torch.randint(-8, 8, (k, n), device=DEVICE)
    x = torch.randn(m, k, device=DEVICE, dtype=torch.bfloat16) / 8
    return x, pack_int4(w)


def scaled_args() -> tuple:
    m, k, n = 27, 58, 35
    w = torch.randint(-8, 8, (k, n), device=DEVICE)
    x = torch.randn(m, k, device=DEVICE, dtype=torch.float16)
    scales = torch.rand(n, device=DEVICE) * 0.05 + 0.01
    return x, pack_int4(w), scales


CASES = [
    Case("int4_gemm", int4_gemm, int4_gemm_reference, atol=3e-2, rtol=1e-2),
    Case(
        "int4_gemm_scaled",
        int4_gemm_scaled,
        int4_gemm_scaled_reference,
        atol=1e-2,
        rtol=1e-2,
        args=scaled_args,
    ),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
