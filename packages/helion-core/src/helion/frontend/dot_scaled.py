"""Tracing `hl.dot_scaled`: operand checks against the block-scaled formats of `helion.language._mx`.

The shapes follow ``tl.dot_scaled``: mat1 [M, K] with scales [M, K // 32], mat2 [K, N] with
scales [N, K // 32] (e2m1 operands hold two values per byte along K). Checks that need a size
the tracer does not know (an autotuned K tile) are left to the backends' run time.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.ir.core import Value
from helion.language import _mx
from helion.language import _ops as ops

_ACC_DTYPES = (torch.float32, torch.float16)
_OUT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _operand(tracer: Any, value: Any, fmt: str, what: str) -> Value:
    if not isinstance(value, DeviceValue):
        raise exc.TypeInferenceError(
            f"hl.dot_scaled: {what} must be a device tensor (a loaded tile), got {type(value).__name__}",
            loc=tracer.current_loc(),
        )
    if value.ndim != 2:
        raise exc.RankMismatch(2, value.ndim, f"hl.dot_scaled {what}", loc=tracer.current_loc())
    allowed = _mx.STORAGE[fmt]
    if value.dtype not in allowed:
        names = " or ".join(str(d).removeprefix("torch.") for d in allowed)
        raise exc.TypeInferenceError(
            f"hl.dot_scaled: {what} in format {fmt!r} must be stored as {names}, got {value.dtype}",
            loc=tracer.current_loc(),
        )
    return value.value


def _scale(tracer: Any, value: Any, what: str) -> Value | None:
    if value is None:
        return None
    if not isinstance(value, DeviceValue) or value.ndim != 2 or value.dtype != torch.uint8:
        described = (
            f"{value.dtype} of {value.ndim} dims"
            if isinstance(value, DeviceValue)
            else type(value).__name__
        )
        raise exc.TypeInferenceError(
            f"hl.dot_scaled: {what} must be a 2-D uint8 (e8m0) device tensor or None, got {described}",
            loc=tracer.current_loc(),
        )
    return value.value


def _known_extent(tracer: Any, dim: sympy.Expr) -> int | None:
    """The number of elements of a dimension (or a product like 2 * K), where the tracer
    knows it: constants, full slices and fixed block sizes."""
    dim = sympy.sympify(dim)
    values = {}
    for symbol in dim.free_symbols:
        info = next((b for b in tracer.ir.block_sizes if b.symbol == symbol), None)
        if info is None or info.kind == "tile":
            return None
        values[symbol] = info.size_hint if info.kind == "reduction" else int(info.fixed_value or 1)
    value = dim.subs(values)
    return int(value) if value.is_Integer else None


def _same_extent(tracer: Any, a: sympy.Expr, b: sympy.Expr) -> bool:
    if ops.dims_equal(a, b):
        return True
    known = [_known_extent(tracer, sympy.sympify(d)) for d in (a, b)]
    return None not in known and known[0] == known[1]


def _check_k(
    tracer: Any, data: Value, scale: Value | None, fmt: str, k_dim: int, what: str
) -> None:
    pack = _mx.values_per_element(fmt)
    k_elements = _known_extent(tracer, data.shape[k_dim])
    info = next((b for b in tracer.ir.block_sizes if b.symbol == data.shape[k_dim]), None)
    if info is not None and info.kind == "tile":
        # at least one scale block of K per tile (and what the MMA needs)
        info.min_size = max(info.min_size, _mx.SCALE_BLOCK // pack)
    if k_elements is not None and (k_elements * pack) % _mx.SCALE_BLOCK:
        raise exc.ShapeMismatch(
            f"hl.dot_scaled: K of {what} is {k_elements * pack} values, not a multiple of {_mx.SCALE_BLOCK}",
            loc=tracer.current_loc(),
        )
    if scale is None:
        return
    groups = _known_extent(tracer, scale.shape[1])
    if groups is None:
        raise exc.TypeInferenceError(
            f"hl.dot_scaled: the scale groups of {what} ({scale.shape[1]}) must be a constant count; "
            "load the scales with a full slice or with hl.arange(BLOCK_K // 32)",
            loc=tracer.current_loc(),
        )
    if k_elements is None:
        raise exc.TypeInferenceError(
            f"hl.dot_scaled: K of {what} is an autotuned tile but its scales have a fixed "
            f"{groups} groups; give the K loop block_size={groups * _mx.SCALE_BLOCK // pack}",
            loc=tracer.current_loc(),
        )
    if k_elements * pack != groups * _mx.SCALE_BLOCK:
        raise exc.ShapeMismatch(
            f"hl.dot_scaled: {what} has {k_elements * pack} values along K but its scales have "
            f"{groups} groups of {_mx.SCALE_BLOCK} ({groups * _mx.SCALE_BLOCK} values)",
            loc=tracer.current_loc(),
        )


def trace_dot_scaled(
    tracer: Any,
    mat1: Any,
    mat1_scale: Any,
    mat1_format: Any,
    mat2: Any,
    mat2_scale: Any,
    mat2_format: Any,
    acc: Any,
    out_dtype: Any,
) -> DeviceValue:
    for fmt, what in ((mat1_format, "mat1_format"), (mat2_format, "mat2_format")):
        if fmt not in _mx.FORMATS:
            raise exc.InvalidAPIUsage(
                f"hl.dot_scaled: {what} must be one of {', '.join(_mx.FORMATS)}, got {fmt!r}",
                loc=tracer.current_loc(),
            )
    a = _operand(tracer, mat1, mat1_format, "mat1")
    b = _operand(tracer, mat2, mat2_format, "mat2")
    a_scale = _scale(tracer, mat1_scale, "mat1_scale")
    b_scale = _scale(tracer, mat2_scale, "mat2_scale")
    m, n = a.shape[0], b.shape[1]
    k_a = a.shape[1] * _mx.values_per_element(mat1_format)
    k_b = b.shape[0] * _mx.values_per_element(mat2_format)
    if not _same_extent(tracer, k_a, k_b):
        raise exc.ShapeMismatch(
            f"hl.dot_scaled: mat1 has {k_a} values along K, mat2 has {k_b}",
            loc=tracer.current_loc(),
        )
    for scale, rows, what in ((a_scale, m, "mat1_scale"), (b_scale, n, "mat2_scale")):
        if scale is not None and not _same_extent(tracer, scale.shape[0], rows):
            raise exc.ShapeMismatch(
                f"hl.dot_scaled: {what} has {scale.shape[0]} rows, expected {rows} "
                "(scales are [M, K // 32] for mat1 and [N, K // 32] for mat2)",
                loc=tracer.current_loc(),
            )
    _check_k(tracer, a, a_scale, mat1_format, 1, "mat1")
    _check_k(tracer, b, b_scale, mat2_format, 0, "mat2")
    acc_value = None
    if acc is not None:
        acc_value = tracer.as_value(acc)
        if acc_value.dtype not in _ACC_DTYPES or not ops.shapes_equal(acc_value.shape, (m, n)):
            raise exc.TypeInferenceError(
                f"hl.dot_scaled: acc must be a float32 or float16 tensor of shape {[m, n]}, "
                f"got {acc_value.dtype} of shape {list(acc_value.shape)}",
                loc=tracer.current_loc(),
            )
    if out_dtype is not None and out_dtype not in _OUT_DTYPES:
        raise exc.TypeInferenceError(
            f"hl.dot_scaled: out_dtype must be float32, float16 or bfloat16, got {out_dtype}",
            loc=tracer.current_loc(),
        )
    result_dtype = acc_value.dtype if acc_value is not None else out_dtype or torch.float32
    for dim in (m, n, a.shape[1], b.shape[0]):
        for info in tracer.ir.block_sizes:
            if info.symbol == dim:
                info.used_in_dot = True
    attrs = {"mat1_format": mat1_format, "mat2_format": mat2_format, "out_dtype": result_dtype}
    node = tracer.emit(ops.dot_scaled, [a, a_scale, b, b_scale, acc_value], attrs)
    return DeviceValue(tracer, node.output)
