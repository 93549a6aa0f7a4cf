"""Triton lowering of ``hl.dot_scaled``: ``tl.dot_scaled`` with padded lanes made harmless.

Lanes past the end of a dimension may hold anything. Along K they enter every product, so
operand lanes there are zeroed and scale lanes set to byte 0 (a finite scale: a scale of 255 is
NaN, and NaN times a zeroed element would still be NaN), unless the values came from masked
loads, which already read 0 there. ``tl.dot_scaled`` accumulates in float32 only: a float16
accumulator or result is converted around it.
"""

from __future__ import annotations

from typing import Any

import torch

from helion.ir.core import Node
from helion.language import _ops as ops
from helion_triton.lowerings import triton_lowering

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def _zero_padded(ctx: Any, value: Any, dim: int, fill: str, hint: str) -> str:
    """``value`` with the padded lanes of dimension ``dim`` set to ``fill``."""
    expr = ctx.expr(value)
    mask = ctx.dim_mask(value.shape[dim], ctx.origin(value, dim))
    if mask is None or value.id in ctx.zero_lanes:
        return expr
    if value.dtype in _FP8:
        # tl.where would promote fp8; dot_scaled takes the raw bytes of e4m3 / e5m2 as well
        expr = f"{expr}.to(tl.uint8, bitcast=True)"
    return ctx.assign(f"tl.where({ctx.place(mask, dim, value.shape)}, {expr}, {fill})", hint)


@triton_lowering(ops.dot_scaled)
def _dot_scaled(ctx: Any, node: Node) -> str:
    a, a_scale, b, b_scale, acc = node.inputs
    attrs = node.attrs
    lhs = _zero_padded(ctx, a, 1, "0", "lhs")
    rhs = _zero_padded(ctx, b, 0, "0", "rhs")
    lhs_scale = "None" if a_scale is None else _zero_padded(ctx, a_scale, 1, "0", "lhs_scale")
    rhs_scale = "None" if b_scale is None else _zero_padded(ctx, b_scale, 1, "0", "rhs_scale")
    accumulate = ""
    if acc is not None:
        accumulate = f", acc={ctx.cast(ctx.expr(acc), torch.float32, acc.dtype)}"
    product = (
        f"tl.dot_scaled({lhs}, {lhs_scale}, {attrs['mat1_format']!r}, {rhs}, {rhs_scale}, "
        f"{attrs['mat2_format']!r}{accumulate}, out_dtype=tl.float32)"
    )
    return ctx.cast(product, node.output.dtype, torch.float32)
