"""Matrix products in device code: mm, matmul, bmm, addmm and baddbmm, all one `ops.dot`
(`emit_dot` is also the tracer's `hl.dot`).
"""

from __future__ import annotations

from typing import Any

import torch

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.torch_ops.registry import register
from helion.frontend.torch_ops.registry import tensor_methods
from helion.frontend.torch_ops.values import as_value
from helion.language import _ops as ops


def emit_dot(
    tracer: Any, a: Any, b: Any, acc: Any, out_dtype: Any, *, default_float32: bool
) -> DeviceValue:
    va, vb = as_value(tracer, a), as_value(tracer, b)
    if va.type.ndim not in (2, 3) or vb.type.ndim not in (2, 3) or va.type.ndim != vb.type.ndim:
        raise exc.RankMismatch(
            "2-D x 2-D or 3-D x 3-D",
            f"{va.type.ndim}-D x {vb.type.ndim}-D",
            "matmul",
            loc=tracer.current_loc(),
        )
    k_a, k_b = va.shape[-1], vb.shape[-2]
    if not ops.dims_equal(k_a, k_b):
        raise exc.ShapeMismatch(
            f"matmul inner dimensions differ: {k_a} vs {k_b}", loc=tracer.current_loc()
        )
    if va.type.ndim == 3:
        try:
            ops.broadcast_shapes(va.shape[:1], vb.shape[:1])
        except ValueError:
            raise exc.DotBatchDimensionMismatch(
                str(va.shape[0]), str(vb.shape[0]), loc=tracer.current_loc()
            ) from None
    allowed = {
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.int8,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
    }
    for v in (va, vb):
        if v.dtype not in allowed:
            raise exc.TypeInferenceError(
                f"matmul does not support {v.dtype} inputs", loc=tracer.current_loc()
            )
    if (va.dtype == torch.int8) != (vb.dtype == torch.int8):
        raise exc.TypeInferenceError(
            f"matmul of {va.dtype} with {vb.dtype}: int8 must pair with int8",
            loc=tracer.current_loc(),
        )
    if va.dtype != vb.dtype and not default_float32:
        raise exc.TypeInferenceError(
            f"matmul of mismatched dtypes {va.dtype} and {vb.dtype}", loc=tracer.current_loc()
        )
    acc_value = None
    if acc is not None:
        acc_value = as_value(tracer, acc)
        if va.dtype == torch.int8 and acc_value.dtype != torch.int32:
            raise exc.TypeInferenceError(
                "int8 matmul needs an int32 accumulator", loc=tracer.current_loc()
            )
        result_dtype = acc_value.dtype
    elif out_dtype is not None:
        result_dtype = out_dtype
    elif va.dtype == torch.int8:
        result_dtype = torch.int32
    elif default_float32:
        result_dtype = torch.float32
    else:
        result_dtype = ops.promote_types(va, vb)
    for dim in (va.shape[-2], va.shape[-1], vb.shape[-1]):
        for info in tracer.ir.block_sizes:
            if info.symbol == dim:
                info.used_in_dot = True
    if va.dtype.itemsize == 1 or vb.dtype.itemsize == 1:
        # 8-bit (fp8, int8) MMA instructions are 32 deep: a K tile below 32 does not compile
        for info in tracer.ir.block_sizes:
            if info.symbol == va.shape[-1]:
                info.min_size = max(info.min_size, 32)
    if acc_value is not None:
        # checked before the dot is emitted: a refused accumulator leaves no node behind
        # (`_addmm_like` catches the error and adds a broadcast bias instead)
        batch = ops.broadcast_shapes(va.shape[:-2], vb.shape[:-2])
        product_shape = (*batch, va.shape[-2], vb.shape[-1])
        if not ops.shapes_equal(product_shape, acc_value.shape):
            raise exc.ShapeMismatch(
                f"accumulator shape {list(acc_value.shape)} != product shape {list(product_shape)}",
                loc=tracer.current_loc(),
            )
    node = tracer.emit(ops.dot, [va, vb, acc_value], {"out_dtype": result_dtype})
    return DeviceValue(tracer, node.output)


@register(torch.mm, torch.matmul, *tensor_methods("mm", "matmul", "__matmul__"))
def _mm(tracer: Any, a: Any, b: Any, *, out: Any = None) -> DeviceValue:
    if out is not None:
        raise exc.NotAllowedOnDevice("matmul(out=...)", loc=tracer.current_loc())
    return emit_dot(tracer, a, b, None, None, default_float32=False)


@register(*tensor_methods("__rmatmul__"))
def _rmatmul(tracer: Any, a: Any, b: Any) -> DeviceValue:
    return emit_dot(tracer, b, a, None, None, default_float32=False)


@register(torch.bmm, *tensor_methods("bmm"))
def _bmm(tracer: Any, a: Any, b: Any, out_dtype: Any = None) -> DeviceValue:
    return emit_dot(tracer, a, b, None, out_dtype, default_float32=False)


def _addmm_like(
    tracer: Any, acc: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1
) -> DeviceValue:
    if beta != 1 or alpha != 1:
        product = emit_dot(tracer, a, b, None, torch.float32, default_float32=True)
        scaled = tracer.call_torch(torch.mul, (product, alpha), {})
        return tracer.call_torch(
            torch.add, (tracer.call_torch(torch.mul, (acc, beta), {}), scaled), {}
        )
    acc_value = as_value(tracer, acc)
    product_shape = None
    try:
        return emit_dot(tracer, a, b, DeviceValue(tracer, acc_value), None, default_float32=True)
    except exc.ShapeMismatch:
        product_shape = "mismatch"
    if product_shape:  # acc broadcasts (e.g. a bias row): add it to the product
        product = emit_dot(tracer, a, b, None, acc_value.dtype, default_float32=True)
        return tracer.call_torch(torch.add, (DeviceValue(tracer, acc_value), product), {})
    raise AssertionError("unreachable")


register(torch.addmm, *tensor_methods("addmm"))(_addmm_like)
register(torch.baddbmm, *tensor_methods("baddbmm"))(_addmm_like)
