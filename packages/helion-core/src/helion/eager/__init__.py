"""Eager mode (`HELION_INTERPRET=1`, `ref_mode=helion.RefMode.EAGER`).

`run_eager(kernel, args)` runs the kernel's original Python function in PyTorch: `hl.tile`
yields `RefTile`s (a tile without a block size spans its whole range; an explicit or registered
block size is honoured), tiles index tensors as slices, and `print` / `breakpoint()` are the
ordinary builtins. See `helion.eager.mode` for the rules.
"""

from __future__ import annotations

import os
import types
from typing import Any
from typing import Sequence

from helion import exc
from helion.eager.mode import EagerMode
from helion.eager.mode import EagerTorchMode
from helion.eager.mode import dot
from helion.eager.tiles import RefTile
from helion.language import ConstExpr
from helion.language._context import active_mode

__all__ = ["EagerMode", "EagerTorchMode", "RefTile", "dot", "run_eager"]


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def run_eager(kernel: Any, args: Sequence[Any]) -> Any:
    """Call `kernel`'s Python function on `args` in eager mode and return what it returns."""
    settings = getattr(kernel, "settings", None)
    # as in Settings: the two interpret modes clash only when both are asked for; TRITON_INTERPRET
    # alone (Triton kernels on CPU) leaves eager runs such as run_ref() alone
    if _env_true("TRITON_INTERPRET") and _env_true("HELION_INTERPRET"):
        raise exc.IncompatibleInterpretModes()
    if settings is not None and getattr(settings, "print_output_code", False):
        raise exc.RefEagerModeCodePrintError()
    original = getattr(kernel, "fn", kernel)
    from helion.frontend.ast_rewrite import check_eager_global_writes
    from helion.frontend.ast_rewrite import in_device_loop

    check_eager_global_writes(original)  # device code may not assign globals (as compiled)
    fn = _with_device_replacements(original)
    values = tuple(a.value if isinstance(a, ConstExpr) else a for a in args)
    mode = EagerMode(kernel, values)
    try:
        with active_mode(mode), EagerTorchMode(mode):
            return fn(*values)
    except exc.BaseError as error:
        # an error raised where no location was at hand: the kernel's line it came from, as
        # compiled kernels report it
        if error.loc is None:
            loc = _kernel_line(original, error.__traceback__)
            if loc is not None:
                error.with_location(loc)
        raise
    except RecursionError as error:
        loc = _kernel_line(original, error.__traceback__)
        if loc is None or not in_device_loop(original, loc.filename, loc.lineno):
            raise
        raise exc.DeviceRecursionError(loc=loc) from None
    except (TypeError, AttributeError, NameError, KeyError, IndexError) as error:
        # raised by a line of device code itself, as compiled kernels report it
        tb = error.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code if tb is not None else None
        if code is None or not in_device_loop(original, code.co_filename, tb.tb_lineno):
            raise
        loc = exc.SourceLocation.from_frame(tb)
        if isinstance(error, (KeyError, IndexError)):
            text = f"key {error} not found" if isinstance(error, KeyError) else str(error)
            raise exc.DeviceLookupError(f"{type(error).__name__}: {text}", loc=loc) from error
        if isinstance(error, NameError):
            name = getattr(error, "name", None)
            if not name and isinstance(error, UnboundLocalError):
                # "cannot access local variable 'y' ...": a name an earlier iteration bound
                # (`ast_rewrite.eager_code` unbinds them) or an `if` bound in one branch only
                name = str(error).split("'")[1] if str(error).count("'") >= 2 else None
            what = f"name {name!r}" if name else str(error).removesuffix(" is not defined")
            raise exc.UndefinedVariable(what, loc=loc) from error
        if isinstance(error, TypeError):
            raise exc.DeviceTypeError(f"TypeError: {error}", loc=loc) from error
        head, found, _ = str(error).partition(" has no attribute ")
        raise exc.DeviceAttributeError(
            head if found else str(error), getattr(error, "name", None) or "?", loc=loc
        ) from error


def _kernel_line(fn: Any, tb: Any) -> exc.SourceLocation | None:
    """The innermost frame of a traceback that runs `fn`'s own lines (its body, or a helper
    defined among them)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    first, last = code.co_firstlineno, max(lines, default=code.co_firstlineno)
    found = None
    while tb is not None:
        frame_code = tb.tb_frame.f_code
        if frame_code.co_filename == code.co_filename and first <= tb.tb_lineno <= last:
            found = tb
        tb = tb.tb_next
    if found is None:
        return None
    return exc.SourceLocation.from_frame(found)


def _with_device_replacements(fn: Any) -> Any:
    """`fn`, or a copy of it (running `eager_code(fn)`) whose globals map torch functions that device code gives Helion's
    meaning (`torch._higher_order_ops.associative_scan`) to their hl versions, and `min`/`max`
    to hl's (elementwise on tensors, Python's on numbers, as in compiled device code)."""
    import helion.language as hl
    from helion.language._device_globals import device_replacements

    namespace = getattr(fn, "__globals__", None)
    if namespace is None:
        return fn
    replacements = device_replacements(namespace)
    for name, replacement in (("min", hl._builtin_min), ("max", hl._builtin_max)):
        if name not in namespace:  # a module-level min/max of the kernel's own stays its own
            replacements[name] = replacement
    from helion.frontend.ast_rewrite import eager_code

    copy = types.FunctionType(
        eager_code(fn), {**namespace, **replacements}, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy
