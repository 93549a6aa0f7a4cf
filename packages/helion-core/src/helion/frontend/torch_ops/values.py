"""Building blocks the op families share: values, casts, numbers, nested table calls."""

from __future__ import annotations

from typing import Any

import torch

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.ir.core import Value
from helion.language import _ops as ops


def as_value(tracer: Any, x: Any) -> Value:
    return tracer.as_value(x)


def call(tracer: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
    """`func(*args, **kwargs)` traced through the table (the building block of decompositions)."""
    return tracer.call_torch(func, args, kwargs)


def cast(tracer: Any, x: Any, dtype: torch.dtype) -> DeviceValue:
    value = as_value(tracer, x)
    if value.dtype == dtype:
        return DeviceValue(tracer, value)
    return tracer.wrap(tracer.emit(ops.cast, [value], {"dtype": dtype}))


def upcast(tracer: Any, x: DeviceValue) -> DeviceValue:
    """fp16 and bf16 to float32, the dtype torch's kernels compute them in."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return cast(tracer, x, torch.float32)
    return x


def require_float(tracer: Any, value: Value, op: str) -> None:
    if not value.dtype.is_floating_point:
        raise exc.TypeInferenceError(
            f"{op} needs a floating-point input, got {value.dtype} (as in torch)",
            loc=tracer.current_loc(),
        )


def opmath(tracer: Any, x: Any, op: str) -> tuple[DeviceValue, torch.dtype]:
    """A float `x` in the dtype torch computes `op` in (float32 for fp16 and bf16, as torch's
    kernels do), and the dtype of the result."""
    value = as_value(tracer, x)
    require_float(tracer, value, op)
    return upcast(tracer, DeviceValue(tracer, value)), value.dtype


def is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float))


def shape_arg(args: tuple) -> list:
    """The sizes of `f(2, 3)` and of `f([2, 3])` alike."""
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
        return list(args[0])
    return list(args)
