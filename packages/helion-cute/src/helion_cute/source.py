"""Helpers to write generated CuTe DSL source: an indenting line buffer and dtype spellings."""

from __future__ import annotations

import contextlib
import itertools
import math
from typing import Iterator

import torch

# torch dtype -> the CuTe DSL numeric type, as spelled in generated code
_CUTLASS_TYPES: dict[torch.dtype, str] = {
    torch.float32: "cutlass.Float32",
    torch.float16: "cutlass.Float16",
    torch.bfloat16: "cutlass.BFloat16",
    torch.float64: "cutlass.Float64",
    torch.int8: "cutlass.Int8",
    torch.int16: "cutlass.Int16",
    torch.int32: "cutlass.Int32",
    torch.int64: "cutlass.Int64",
    torch.uint8: "cutlass.Uint8",
    torch.bool: "cutlass.Boolean",
}

SUPPORTED_DTYPES = frozenset(_CUTLASS_TYPES)


def cutlass_type(dtype: torch.dtype) -> str:
    """The generated-code spelling of the CuTe DSL type of ``dtype``."""
    try:
        return _CUTLASS_TYPES[dtype]
    except KeyError:
        raise TypeError(f"the cute backend does not support {dtype}") from None


def memory_type(dtype: torch.dtype) -> str:
    """The CuTe DSL type of a global-memory element of ``dtype``.

    torch.bool is one byte holding 0 or 1, while cute allows its i1 ``Boolean`` only in
    registers (where it is stored as i8): bool tensors are addressed as Uint8.
    """
    return "cutlass.Uint8" if dtype == torch.bool else cutlass_type(dtype)


# A register tensor that a generated value is copied into is typed ``memory_type(dtype)``; its
# contents are written with :func:`register_data` and read with :func:`register_element`.
# Storing a Boolean value into a Boolean tensor makes the DSL cache the value's i8 form on the
# Python object (``_value_int8``) in whatever region the store happens; the generator binds a
# value to one name and reuses it, so a second store outside a loop or branch that held the
# first one would use a value from inside that body (IR verification: "operand does not
# dominate this use"). A bool value is therefore held as 0/1 bytes, converted at each store.


def register_data(expr: str, dtype: torch.dtype) -> str:
    """``expr``, a fragment of ``dtype``, as it is stored into a register tensor."""
    return f"{expr}.to(cutlass.Uint8)" if dtype == torch.bool else expr


def register_element(expr: str, dtype: torch.dtype) -> str:
    """An element ``expr`` read from a register tensor of ``dtype`` values, as ``dtype``."""
    return f"cutlass.Boolean({expr})" if dtype == torch.bool else expr


def element_bytes(dtype: torch.dtype) -> int:
    return 1 if dtype == torch.bool else dtype.itemsize


def literal(value: object, dtype: torch.dtype) -> str:
    """A typed constant of ``dtype`` in generated code."""
    if dtype == torch.bool:
        return f"cutlass.Boolean({bool(value)})"
    if dtype.is_floating_point:
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number):
            text = 'float("nan")'
        elif math.isinf(number):
            text = 'float("inf")' if number > 0 else 'float("-inf")'
        else:
            text = repr(number)
        return f"{cutlass_type(dtype)}({text})"
    return f"{cutlass_type(dtype)}({int(value)})"  # type: ignore[call-overload]


def python_number(value: object, dtype: torch.dtype) -> str:
    """An untyped Python constant (for TensorSSA fills and reduction identities)."""
    if dtype == torch.bool:
        return repr(bool(value))
    if dtype.is_floating_point:
        number = float(value)  # type: ignore[arg-type]
        if math.isinf(number):
            return 'float("inf")' if number > 0 else 'float("-inf")'
        if math.isnan(number):
            return 'float("nan")'
        return repr(number)
    return repr(int(value))  # type: ignore[call-overload]


class Slot:
    """A reserved place in a :class:`CodeWriter` (e.g. a kernel prologue filled at the end)."""

    def __init__(self, indentation: str) -> None:
        self.indentation = indentation
        self.entries: list[str] = []

    def line(self, text: str) -> None:
        self.entries.append(self.indentation + text)


class CodeWriter:
    """Lines of Python with an indentation level, plus named slots filled in later."""

    def __init__(self) -> None:
        self._lines: list[str | list[str]] = []
        self._indent = 0
        self._names = itertools.count()

    def line(self, text: str = "") -> None:
        self._lines.append(("    " * self._indent + text) if text else "")

    def lines(self, texts: list[str]) -> None:
        for text in texts:
            self.line(text)

    @contextlib.contextmanager
    def indent(self) -> Iterator[None]:
        self._indent += 1
        try:
            yield
        finally:
            self._indent -= 1

    def mark(self) -> int:
        """A position to :meth:`take` the lines written after it from."""
        return len(self._lines)

    def take(self, mark: int) -> list[str]:
        """Remove and return the lines written since ``mark`` (indented, no slots among them)."""
        taken = self._lines[mark:]
        del self._lines[mark:]
        assert all(isinstance(entry, str) for entry in taken), "a slot among taken lines"
        return taken  # type: ignore[return-value]

    def indented(self, texts: list[str]) -> None:
        """Append lines that carry their own indentation."""
        self._lines.extend(texts)

    def slot(self) -> Slot:
        """Reserve a place at the current indentation; lines added to the slot later appear here."""
        reserved = Slot("    " * self._indent)
        self._lines.append(reserved.entries)
        return reserved

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._names)}"

    @property
    def indentation(self) -> str:
        return "    " * self._indent

    def text(self) -> str:
        out: list[str] = []
        for entry in self._lines:
            if isinstance(entry, list):
                out.extend(entry)
            else:
                out.append(entry)
        return "\n".join(out) + "\n"
