"""Dot operands converted from 8-bit values, which Triton's MMAv2 got wrong on small K.

Triton's MMAv2 sizes an operand layout's K width from the narrowest type the operand was
converted from (4 lanes for int8 under a bf16 dot) and, before triton-lang/triton#11691
(2026-09), did not bound it by K: on a K tile below ``UPCAST_SAFE_K``, a dot whose operand was
unpacked from 8-bit values computed wrong products (public int4 GEMM at bk=8 on an H100, Triton
3.6; the warpgroup MMA of 64-row tiles was right). The backends that lower through Triton (the
Triton backend, Pallas on GPU) give such dots float32 FMA products, exact for these operands.
"""

from __future__ import annotations

from typing import Any

import torch

from helion.ir.core import TensorType
from helion.ir.core import Value

# K tiles from this size up keep the MMA
UPCAST_SAFE_K = 32


def converted_from_8_bits(value: Any, depth: int = 8) -> bool:
    """Whether a dot operand was computed from 8-bit values: itself, or through casts, shifts,
    joins and views back to the loads (a load ends the walk: its inputs are addresses)."""
    seen: set[int] = set()
    frontier = [value]
    while frontier and depth > 0:
        upstream = []
        for v in frontier:
            if not isinstance(v, Value) or v.id in seen or not isinstance(v.type, TensorType):
                continue
            seen.add(v.id)
            if v.dtype != torch.bool and v.dtype.itemsize == 1:
                return True
            producer = v.producer
            if producer is not None and not producer.op.memory:
                upstream.extend(producer.inputs)
        frontier, depth = upstream, depth - 1
    return False


def needs_exact_small_k_products(a: Any, b: Any, dtype: torch.dtype, k_lanes: int) -> bool:
    """Whether a dot of ``a @ b`` in ``dtype`` over ``k_lanes`` lanes of K takes float32 FMA
    products on Triton (see the module doc). Only 16- and 32-bit float dots: an 8-bit dot is
    native, not an upcast, and float64 keeps its precision."""
    return (
        dtype in (torch.float16, torch.bfloat16, torch.float32)
        and k_lanes < UPCAST_SAFE_K
        and (converted_from_8_bits(a) or converted_from_8_bits(b))
    )
