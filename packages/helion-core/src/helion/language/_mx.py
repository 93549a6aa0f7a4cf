"""Block-scaled ("microscaling", OCP MX) operands of `hl.dot_scaled`: formats and their meaning.

A block-scaled operand is a matrix of narrow elements plus one shared scale per 32 consecutive
elements along K. Scales are e8m0: a uint8 byte `s` stands for `2 ** (s - 127)`, and 255 is NaN.
Element formats and the dtype that stores them:

- ``e2m1`` (fp4): two values per uint8 byte, packed along K, the first value in the low nibble.
  1 sign bit, 2 exponent bits (bias 1), 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives.
- ``e4m3`` / ``e5m2``: torch.float8_e4m3fn / torch.float8_e5m2 (or their bits as uint8).
- ``bf16`` / ``fp16``: torch.bfloat16 / torch.float16.

Shapes follow Triton's ``tl.dot_scaled``: ``mat1`` is [M, K] ([M, K // 2] for e2m1) with scales
[M, K // 32]; ``mat2`` is [K, N] ([K // 2, N] for e2m1) with scales [N, K // 32] (not
transposed). The reference here (used by the ref backend and eager mode) dequantizes both
operands to float32 and multiplies in float32.
"""

from __future__ import annotations

import torch

#: elements that share one scale, along K
SCALE_BLOCK = 32

#: format -> the dtypes that may store it
STORAGE: dict[str, tuple[torch.dtype, ...]] = {
    "e2m1": (torch.uint8,),
    "e4m3": (torch.float8_e4m3fn, torch.uint8),
    "e5m2": (torch.float8_e5m2, torch.uint8),
    "bf16": (torch.bfloat16,),
    "fp16": (torch.float16,),
}

FORMATS = tuple(STORAGE)

# the float8 dtype whose bits a uint8 operand of this format holds
_FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def values_per_element(fmt: str) -> int:
    """How many logical values one stored element holds (2 for packed e2m1)."""
    return 2 if fmt == "e2m1" else 1


def e8m0_to_float(scale: torch.Tensor) -> torch.Tensor:
    """uint8 e8m0 scales -> float32 powers of two (255 -> NaN)."""
    exponent = scale.to(torch.int32) - 127
    value = torch.exp2(exponent.to(torch.float32))
    return torch.where(scale == 255, torch.full_like(value, float("nan")), value)


def e2m1_to_float(nibbles: torch.Tensor) -> torch.Tensor:
    """4-bit e2m1 codes (in the low bits of an integer tensor) -> float32."""
    code = nibbles.to(torch.int32) & 0xF
    sign = torch.where((code & 0x8) != 0, -1.0, 1.0)
    exponent = (code >> 1) & 0x3
    mantissa = (code & 0x1).to(torch.float32)
    # exponent 0 is subnormal: 0 or 0.5; otherwise 2 ** (e - 1) * (1 + m / 2)
    normal = torch.exp2((exponent - 1).to(torch.float32)) * (1.0 + mantissa * 0.5)
    magnitude = torch.where(exponent == 0, mantissa * 0.5, normal)
    return sign * magnitude


def unpack_e2m1(packed: torch.Tensor, dim: int) -> torch.Tensor:
    """Bytes holding two e2m1 values each -> float32, twice as long along ``dim``
    (the value in a byte's low nibble comes first)."""
    low = e2m1_to_float(packed & 0xF)
    high = e2m1_to_float(packed >> 4)
    pairs = torch.stack([low, high], dim=dim + 1)
    shape = list(packed.shape)
    shape[dim] *= 2
    return pairs.reshape(shape)


def decode(data: torch.Tensor, fmt: str, k_dim: int) -> torch.Tensor:
    """The float32 values of a block-scaled operand's elements (before scaling)."""
    if fmt == "e2m1":
        return unpack_e2m1(data, k_dim)
    if fmt in _FP8 and data.dtype == torch.uint8:
        data = data.view(_FP8[fmt])
    return data.to(torch.float32)


def dequantize(
    data: torch.Tensor, scale: torch.Tensor | None, fmt: str, *, is_rhs: bool
) -> torch.Tensor:
    """One operand of `hl.dot_scaled` as float32: elements times their block's scale.

    ``data`` is [M, K'] (lhs) or [K', N] (rhs); ``scale`` is [M or N, G] or None. A scale
    tensor with more groups than K needs (the padded tail of a partial K tile) is truncated.
    """
    k_dim = 0 if is_rhs else 1
    values = decode(data, fmt, k_dim)
    if scale is None:
        return values
    k = values.shape[k_dim]
    groups = -(-k // SCALE_BLOCK)
    if scale.shape[-1] < groups:
        raise ValueError(
            f"{scale.shape[-1]} scale groups cover {scale.shape[-1] * SCALE_BLOCK} values of K, "
            f"the operand has {k}"
        )
    factors = e8m0_to_float(scale[..., :groups]).repeat_interleave(SCALE_BLOCK, dim=-1)[..., :k]
    if is_rhs:
        factors = factors.transpose(0, 1)
    return values * factors


def reference_dot_scaled(
    mat1: torch.Tensor,
    mat1_scale: torch.Tensor | None,
    mat1_format: str,
    mat2: torch.Tensor,
    mat2_scale: torch.Tensor | None,
    mat2_format: str,
    acc: torch.Tensor | None,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """``acc + dequantize(mat1) @ dequantize(mat2)`` in float32, then cast to ``out_dtype``."""
    lhs = dequantize(mat1, mat1_scale, mat1_format, is_rhs=False)
    rhs = dequantize(mat2, mat2_scale, mat2_format, is_rhs=True)
    k = min(lhs.shape[1], rhs.shape[0])
    if lhs.shape[1] != rhs.shape[0]:
        # the last, partial tile of K met a full-size one (e.g. an index-tensor load, masked):
        # fine when the extra values are the zeros of masked lanes, as in compiled code
        extra = lhs[:, k:] if lhs.shape[1] > k else rhs[k:, :]
        if bool(torch.any(extra != 0)):
            raise ValueError(
                f"K of mat1 ({lhs.shape[1]} values) and mat2 ({rhs.shape[0]} values) differ"
            )
    product = lhs[:, :k] @ rhs[:k, :]
    if acc is not None:
        product = product + acc.to(torch.float32)
    return product.to(out_dtype)
