"""FP8 GEMM: `float8_e4m3fn` operands with float32 dequantization scales, accumulated in float32
by `hl.dot`, the scaled result written as bf16 / fp16.

- `fp8_gemm`: per-tensor scales (`scale_a`, `scale_b` hold one value each), bf16 output.
- `fp8_gemm_rowwise`: per-row scales of `a` (`[m, 1]`) and per-column scales of `b` (`[1, n]`),
  fp16 output; the scales multiply the accumulator once, in the epilogue.

The reference upcasts the fp8 values to float32, scales them and multiplies.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def fp8_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    m, k = a.shape
    k2, n = b.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    assert scale_a.numel() == 1 and scale_b.numel() == 1, "per-tensor scales hold one value"
    scale_a, scale_b = scale_a.reshape(1), scale_b.reshape(1)
    out = torch.empty([m, n], dtype=out_dtype, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = hl.dot(a[tile_m, tile_k], b[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = (acc * (scale_a[0] * scale_b[0])).to(out.dtype)
    return out


@helion.kernel()
def fp8_gemm_rowwise(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    out_dtype: torch.dtype = torch.float16,
) -> torch.Tensor:
    m, k = a.shape
    k2, n = b.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    assert scale_a.shape == (m, 1) and scale_b.shape == (1, n), (
        "row scales [m, 1], column scales [1, n]"
    )
    out = torch.empty([m, n], dtype=out_dtype, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = hl.dot(a[tile_m, tile_k], b[tile_k, tile_n], acc=acc)
        acc = acc * scale_a[tile_m, :] * scale_b[:, tile_n]
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def fp8_gemm_reference(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    if out_dtype is None:
        out_dtype = torch.bfloat16 if scale_a.numel() == 1 else torch.float16
    return ((a.float() * scale_a) @ (b.float() * scale_b)).to(out_dtype)


def quantize(x: torch.Tensor, dim: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Host helper: scale `x` so its absolute maximum (over `dim`, or the whole tensor) maps to the
    largest e4m3 value; returns the fp8 tensor and the float32 dequantization scale."""
    finfo = torch.finfo(torch.float8_e4m3fn)
    if dim is None:
        amax = x.abs().amax().float()
    else:
        amax = x.abs().amax(dim=dim, keepdim=True).float()
    scale = amax.clamp(min=1e-12) / finfo.max
    quantized = (x.float() / scale).clamp(finfo.min, finfo.max).to(torch.float8_e4m3fn)
    return quantized, scale


def example_args() -> tuple:
    a, scale_a = quantize(torch.randn(37, 51, device=DEVICE), None)
    b, scale_b = quantize(torch.randn(51, 29, device=DEVICE), None)
    return a, b, scale_a, scale_b


def rowwise_args() -> tuple:
    a, scale_a = quantize(torch.randn(37, 51, device=DEVICE), 1)
    b, scale_b = quantize(torch.randn(51, 29, device=DEVICE), 0)
    return a, b, scale_a, scale_b


CASES = [
    Case("fp8_gemm", fp8_gemm, fp8_gemm_reference, atol=5e-2, rtol=2e-2),
    Case(
        "fp8_gemm_rowwise",
        fp8_gemm_rowwise,
        fp8_gemm_reference,
        atol=2e-2,
        rtol=1e-2,
        args=rowwise_args,
    ),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
