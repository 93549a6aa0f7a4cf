"""Public Helion's `TensorOperationInWrapper` warning: host code that computes on tensors.

Host code (the kernel's lines outside its `hl.tile` / `hl.grid` loops) runs as ordinary
PyTorch, one op at a time, and nothing of it is fused into the generated kernel. Allocating
outputs and taking views is what host code is for; an op that computes (`losses.mean()`,
`x.float()`, `out.copy_(y)`, `x[idx] = 0`) is worth a warning, once per line, naming the op.

The first call of each config's runner watches its host code with a torch function mode
(`watch_first_call`); later calls run it unwatched. Only the host function's own lines count:
ops of helpers it calls, of torch's Python layers and of the device code (the ref backend
runs torch ops) are attributed to the frame that made them, and that frame is not host code.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any
from typing import Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.overrides import _pop_mode_temporarily

from helion import exc

# functions that make a tensor rather than compute one from others
_CREATION = frozenset(
    {
        "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
        "empty_strided", "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided",
        "new_tensor", "tensor", "as_tensor", "asarray", "from_numpy", "scalar_tensor", "arange",
        "linspace", "logspace", "eye", "rand", "randn", "randint", "randperm", "rand_like",
        "randn_like", "randint_like", "empty_permuted",
    }
)  # fmt: skip
# in-place methods that set up a tensor (as zeros/full would) or change only its metadata
_INPLACE_SETUP = frozenset(
    {
        "zero_", "fill_", "requires_grad_", "detach_", "t_", "transpose_", "unsqueeze_",
        "squeeze_", "as_strided_", "resize_", "resize_as_", "set_", "share_memory_", "rename_",
        "swapdims_", "swapaxes_",
    }
)  # fmt: skip
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [item for item in value if isinstance(item, torch.Tensor)]
    return []


def _storage(tensor: torch.Tensor) -> int | None:
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:  # a tensor without storage (a subclass, a sparse tensor)
        return None


def computes(name: str, args: tuple, kwargs: dict, result: Any) -> bool:
    """Whether the torch function ``name`` that returned ``result`` computed tensor data (not
    an allocation, a view, a metadata query or a set-up of a fresh tensor)."""
    if name == "__setitem__":
        return True
    outputs = _tensors(result)
    if not outputs or name in _CREATION:
        return False
    inputs = {
        _storage(t) for value in (*args, *kwargs.values()) for t in _tensors(value) if t.numel() > 0
    }
    if all(t.numel() == 0 or _storage(t) in inputs for t in outputs):
        # views and in-place ops return the storage they were given: in-place ones compute
        return name.endswith("_") and not name.startswith("__") and name not in _INPLACE_SETUP
    return True


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", None) or repr(func)
    owner = getattr(func, "__objclass__", None)
    if isinstance(owner, type) and issubclass(torch.Tensor, owner):  # Tensor, TensorBase
        return f"Tensor.{name}"
    if getattr(func, "__qualname__", "").startswith("Tensor."):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", None) or ""
    return f"{module}.{name}" if module.startswith("torch") else name


class HostOpWatch(TorchFunctionMode):
    """Records the computing torch ops that lines of ``codes`` call directly."""

    def __init__(self, codes: frozenset[types.CodeType]) -> None:
        super().__init__()
        self.codes = codes
        self.found: dict[tuple[str, int], list[str]] = {}

    def __torch_function__(
        self, func: Any, types: Any, args: tuple = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(_TORCH_DIR):
            frame = frame.f_back
        if frame is not None and frame.f_code in self.codes:
            name = getattr(func, "__name__", "")
            if computes(name, args, kwargs, result):
                ops = self.found.setdefault((frame.f_code.co_filename, frame.f_lineno), [])
                if _op_name(func) not in ops:
                    ops.append(_op_name(func))
        return result

    def warn(self, settings: Any) -> None:
        for (filename, lineno), ops in self.found.items():
            loc = exc.SourceLocation(filename, lineno)
            exc.warn(exc.TensorOperationsInHostCall(", ".join(ops), loc=loc), settings)


def _codes_of(code: types.CodeType) -> frozenset[types.CodeType]:
    """``code`` and the code objects nested in it (comprehensions, lambdas)."""
    found = {code}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _codes_of(const)
    return frozenset(found)


def watch_first_call(
    make_host: Callable[[Callable[..., Any]], Callable[..., Any]],
    device_call: Callable[..., Any],
    settings: Any,
    replace: Callable[[Callable[..., Any]], None],
) -> Callable[..., Any]:
    """The host function (``make_host(device_call)``) for its first call: run under a
    `HostOpWatch` (paused while the device code runs: the ref backend's torch ops would go
    through it, doubling the first call's time), warn, then ``replace`` it with the plain host
    function for later calls. The plain one itself when the warning is off."""
    plain = make_host(device_call)
    if exc.is_warning_ignored(exc.TensorOperationsInHostCall, settings):
        return plain
    codes = _codes_of(plain.__code__)

    def device_call_unwatched(*values: Any) -> Any:
        with _pop_mode_temporarily():
            return device_call(*values)

    watched = make_host(device_call_unwatched)

    def first_call(*args: Any) -> Any:
        replace(plain)
        watch = HostOpWatch(codes)
        with watch:
            result = watched(*args)
        watch.warn(settings)
        return result

    return first_call
