"""Triton lowering of ``ops.random``: Triton's own Philox (``tl.rand``, ``tl.randint``,
``tl.rand4x``, ``tl.randn``), which :mod:`helion.language.philox` reproduces for the ref backend.

The seed is an int64 scalar (or a literal) and the offsets an int32/int64 block; padded lanes get
numbers too, which stores and reductions mask like any other value.
"""

from __future__ import annotations

from typing import Any

import torch

from helion.ir.core import Node
from helion.ir.core import Value
from helion.language import _ops as ops
from helion_triton.codegen import literal
from helion_triton.lowerings import triton_lowering


def _seed(ctx: Any, seed: Any) -> str:
    if isinstance(seed, Value):
        return ctx.operand(seed, torch.int64)
    return f"tl.full([], {literal(int(seed))}, tl.int64)"


def _offsets(ctx: Any, offsets: Any) -> str:
    if not isinstance(offsets, Value):
        return f"tl.full([], {literal(int(offsets))}, tl.int64)"
    dtype = ctx.dtype_of(offsets)
    if dtype in (torch.int32, torch.int64):
        return ctx.expr(offsets)
    return ctx.cast(ctx.expr(offsets), torch.int32, dtype)


@triton_lowering(ops.random)
def _random(ctx: Any, node: Node) -> str:
    seed_value, offset_value = node.inputs
    seed = ctx.assign(_seed(ctx, seed_value), "seed")
    offsets = ctx.assign(_offsets(ctx, offset_value), "rng_offsets")
    dist = node.attrs["dist"]
    if dist == "normal":
        return f"tl.randn({seed}, {offsets})"
    if dist == "randint":
        low, high = int(node.attrs["low"]), int(node.attrs["high"])
        words = f"tl.randint({seed}, {offsets})"  # uint32
        if high - low < 2**32:
            words = f"({words} % tl.full([], {high - low}, tl.uint32))"
        # the remainder is below 2**32; read as int32 and shifted by low it wraps into [low, high)
        return f"({words}.to(tl.int32, bitcast=True) + {literal(low)})"
    lane = int(node.attrs.get("lane", 0))
    if lane == 0:
        return f"tl.rand({seed}, {offsets})"
    words = [ctx.fresh(f"uniform{i}") for i in range(4)]
    ctx.emit(f"{', '.join(words)} = tl.rand4x({seed}, {offsets})")
    return words[lane]
