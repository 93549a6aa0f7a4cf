"""Global names that mean something else in device code: `device_replacements(namespace)`.

- `torch._higher_order_ops.associative_scan` is `hl.associative_scan` (`_combine`).
- The `math` module, and functions imported from it, take 0-D device values too: a scalar
  argument is a runtime value on the device (`math.sqrt(alpha)` for `alpha: float`), so a
  `math` function given one computes its torch counterpart there. On Python numbers they are
  `math`'s own, so eager mode (where scalars are numbers) and host code are unchanged.
"""

from __future__ import annotations

import math
import types
from typing import Any
from typing import Callable

import torch

from helion.language._combine import _torch_associative_scan
from helion.language._combine import torch_associative_scan

# math functions with a torch counterpart of the same meaning on a 0-D value
_TORCH_COUNTERPARTS: dict[str, Callable[..., Any]] = {
    "sqrt": torch.sqrt,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "log": torch.log,
    "log2": torch.log2,
    "log10": torch.log10,
    "log1p": torch.log1p,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "asin": torch.asin,
    "acos": torch.acos,
    "atan": torch.atan,
    "atan2": torch.atan2,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tanh": torch.tanh,
    "asinh": torch.asinh,
    "acosh": torch.acosh,
    "atanh": torch.atanh,
    "erf": torch.erf,
    "erfc": torch.erfc,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "trunc": torch.trunc,
    "fabs": torch.abs,
    "pow": torch.pow,
    "copysign": torch.copysign,
    "fmod": torch.fmod,
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "isfinite": torch.isfinite,
}


def _on_device(*values: Any) -> bool:
    """Whether any of ``values`` is a 0-D device value (one with dimensions goes to `math`'s
    own function, whose `float()` of it names the line and points at torch's function)."""
    from helion.frontend.proxies import DeviceValue

    return any(isinstance(value, DeviceValue) and value.ndim == 0 for value in values)


def _device_math_function(name: str) -> Callable[..., Any]:
    python = getattr(math, name)
    counterpart = _TORCH_COUNTERPARTS[name]

    def function(*args: Any) -> Any:
        if _on_device(*args):
            # torch.atan2 and friends take no Python number beside a tensor: a 0-D constant
            return counterpart(
                *(torch.tensor(a) if isinstance(a, (int, float)) else a for a in args)
            )
        return python(*args)

    function.__name__ = name
    function.__qualname__ = f"math.{name}"
    function.__doc__ = f"`math.{name}`, or `{counterpart.__name__}` of a 0-D device value."
    return function


_DEVICE_MATH_FUNCTIONS = {name: _device_math_function(name) for name in _TORCH_COUNTERPARTS}


class _DeviceMath(types.ModuleType):
    """`math` as device code sees it: its functions with a torch counterpart dispatch on their
    arguments (`_device_math_function`); everything else (`math.pi`, `math.inf`, `math.gcd`)
    is `math`'s own."""

    def __getattr__(self, name: str) -> Any:
        found = _DEVICE_MATH_FUNCTIONS.get(name)
        return found if found is not None else getattr(math, name)


DEVICE_MATH = _DeviceMath("math")


def device_replacements(namespace: dict) -> dict:
    """The global names of a kernel's module that device code gives another meaning, with their
    replacements (see the module)."""
    replacements: dict[str, Any] = {}
    scan = _torch_associative_scan()
    by_function = {id(getattr(math, name)): fn for name, fn in _DEVICE_MATH_FUNCTIONS.items()}
    for name, value in namespace.items():
        if scan is not None and value is scan:
            replacements[name] = torch_associative_scan
        elif value is math:
            replacements[name] = DEVICE_MATH
        elif id(value) in by_function and callable(value):
            replacements[name] = by_function[id(value)]
    return replacements
