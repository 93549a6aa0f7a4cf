"""Torch ops that cannot work in device code, each refused with the reason: data-dependent
shapes (nonzero), splits (use hl.split), reads on the host (.item()) and in-place methods.
"""

from __future__ import annotations

from typing import Any

import torch

from helion import exc
from helion.frontend.torch_ops.registry import Handler
from helion.frontend.torch_ops.registry import register
from helion.frontend.torch_ops.registry import tensor_methods


def _not_on_device(what: str, hint: str) -> Handler:
    def handler(tracer: Any, *args: Any, **kwargs: Any) -> Any:
        raise exc.NotAllowedOnDevice(f"{what} ({hint})", loc=tracer.current_loc())

    return handler


register(torch.nonzero, *tensor_methods("nonzero"))(
    _not_on_device("torch.nonzero", "its output shape depends on data")
)


def _refused_split(name: str) -> Handler:
    def handler(tracer: Any, *args: Any, **kwargs: Any) -> Any:
        raise exc.UnsupportedSplitOperation(name, loc=tracer.current_loc())

    return handler


for _name in ("chunk", "split", "unbind", "tensor_split"):
    register(getattr(torch, _name), *tensor_methods(_name))(_refused_split(f"torch.{_name}"))
register(*tensor_methods("item", "tolist"))(
    _not_on_device(".item()", "device values cannot be read on the host")
)
# device values are values (an alias of a loaded tile never changes), so a method that would
# mutate one is refused; eager mode refuses the same names (`w += 1` rebinds in both)
REFUSED_INPLACE_METHODS = ("add_", "mul_", "sub_", "div_", "copy_", "zero_", "fill_")
INPLACE_METHOD_HINT = ("in-place tensor methods", "assign the result instead")
register(*tensor_methods(*REFUSED_INPLACE_METHODS))(_not_on_device(*INPLACE_METHOD_HINT))
