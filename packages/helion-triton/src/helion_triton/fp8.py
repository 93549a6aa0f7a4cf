"""fp8 casts under the Triton interpreter, done right.

The interpreter converts floats to and from fp8 with its own bit-level routine, which (Triton
3.9) rounds wrongly when the mantissa carries into the exponent (-7.52 becomes -4 in e5m2, not
-8), ignores NaN and infinity (an e4m3fn NaN reads as 480, an e5m2 infinity as 65536) and fails
outright between the two fp8 formats. Compiled kernels use the hardware conversions, so this
only changes interpreted code: values go through float32, where rounding to the fp8 grid (half
to even, e4m3fn saturating at 448 as torch does, e5m2 overflowing to infinity) is computed
exactly, after which the interpreter's conversion only sees representable values.
"""

from __future__ import annotations

from typing import Any

import torch

FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)

_ROUND = """
@triton.jit
def _helion_fp8_round_half_even(x):
    f = tl.floor(x)
    d = x - f
    even = f - 2.0 * tl.floor(f * 0.5) == 0.0
    return tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(even, f, f + 1.0)))
"""

# (format name in Triton, mantissa bits, smallest normal exponent, values rounding to infinity
# or saturating, the saturated value, the NaN byte)
_FORMATS = {
    torch.float8_e4m3fn: ("float8e4nv", 3, -6, "448.0", "448.0", "0x7F"),
    torch.float8_e5m2: ("float8e5", 2, -14, "61440.0", 'float("inf")', "0x7E"),
}

_TO_FP8 = """
@triton.jit
def _helion_to_{name}(x):
    a = tl.abs(x)
    exponent = tl.maximum(tl.floor(tl.log2(tl.where(a > 0, a, 1.0))), {min_exponent}.0)
    quantum = tl.exp2(exponent - {mantissa}.0)
    r = _helion_fp8_round_half_even(a / quantum) * quantum
    r = tl.where(a >= {limit}, {saturated}, r)
    r = tl.where(x.to(tl.int32, bitcast=True) < 0, -r, r)
    bits = r.to(tl.{name}).to(tl.uint8, bitcast=True)
    bits = tl.where(x != x, {nan}, bits)
    return bits.to(tl.{name}, bitcast=True)
"""

_FROM_FP8 = {
    torch.float8_e4m3fn: """
@triton.jit
def _helion_from_float8e4nv(x):
    bits = x.to(tl.uint8, bitcast=True)
    return tl.where((bits & 0x7F) == 0x7F, float("nan"), x.to(tl.float32))
""",
    torch.float8_e5m2: """
@triton.jit
def _helion_from_float8e5(x):
    bits = x.to(tl.uint8, bitcast=True)
    infinity = tl.where((bits & 0x80) != 0, float("-inf"), float("inf"))
    special = tl.where((bits & 0x3) == 0, infinity, float("nan"))
    return tl.where((bits & 0x7C) == 0x7C, special, x.to(tl.float32))
""",
}


def _from_fp8(ctx: Any, expr: str, frm: torch.dtype) -> str:
    name = _FORMATS[frm][0]
    return f"{ctx.helper(f'_helion_from_{name}', _FROM_FP8[frm])}({expr})"


def interpreted_cast(ctx: Any, expr: str, to: torch.dtype, frm: torch.dtype | None) -> str | None:
    """``expr`` (of dtype ``frm``) converted to ``to`` in interpreted code, or None when the
    interpreter's own conversion is right (neither side is fp8)."""
    if frm is None or (to not in FP8 and frm not in FP8):
        return None
    if frm in FP8:
        as_float = _from_fp8(ctx, expr, frm)
        return as_float if to == torch.float32 else ctx.cast(as_float, to, torch.float32)
    as_float = ctx.cast(expr, torch.float32, frm) if frm != torch.float32 else expr
    name, mantissa, min_exponent, limit, saturated, nan = _FORMATS[to]
    ctx.helper("_helion_fp8_round_half_even", _ROUND)
    source = _TO_FP8.format(
        name=name,
        mantissa=mantissa,
        min_exponent=min_exponent,
        limit=limit,
        saturated=saturated,
        nan=nan,
    )
    return f"{ctx.helper(f'_helion_to_{name}', source)}({as_float})"
