"""Small helpers to write readable Python source: indentation, literals, dtype names."""

from __future__ import annotations

import builtins
import contextlib
import keyword
import math
import re
from typing import Iterator

import torch

_JNP_DTYPES = {
    torch.float16: "jnp.float16",
    torch.bfloat16: "jnp.bfloat16",
    torch.float32: "jnp.float32",
    torch.float64: "jnp.float64",
    torch.int8: "jnp.int8",
    torch.int16: "jnp.int16",
    torch.int32: "jnp.int32",
    torch.int64: "jnp.int64",
    torch.uint8: "jnp.uint8",
    torch.bool: "jnp.bool_",
}

#: Names the generated module imports or uses; generated names never shadow them.
RESERVED = frozenset({"jax", "jnp", "pl", "plgpu", "pltpu", "hp"}) | frozenset(dir(builtins))


def jnp_dtype(dtype: torch.dtype) -> str:
    """The `jnp` spelling of a torch dtype."""
    try:
        return _JNP_DTYPES[dtype]
    except KeyError:
        from helion import exc

        raise exc.BackendUnsupported(f"dtype {dtype}", "pallas") from None


def is_supported_dtype(dtype: torch.dtype) -> bool:
    return dtype in _JNP_DTYPES


def literal(value: object) -> str:
    """A Python scalar as source text (infinities and NaN through `jnp`)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        if math.isnan(value):
            return "jnp.nan"
        if math.isinf(value):
            return "jnp.inf" if value > 0 else "-jnp.inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"not a scalar literal: {value!r}")


def identifier(name: str) -> str:
    """A valid Python identifier derived from `name` that shadows nothing we import."""
    cleaned = re.sub(r"\W", "_", name) or "t"
    if cleaned[0].isdigit():
        cleaned = "_" + cleaned
    if keyword.iskeyword(cleaned) or cleaned in RESERVED:
        cleaned += "_"
    return cleaned


def tuple_text(items: list[str] | tuple[str, ...]) -> str:
    """`(a,)`, `(a, b)` or `()`."""
    if len(items) == 1:
        return f"({items[0]},)"
    return "(" + ", ".join(items) + ")"


class SourceWriter:
    """Accumulates lines of Python with an indentation level."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def line(self, text: str = "") -> None:
        self.lines.append(("    " * self.level + text) if text else "")

    @contextlib.contextmanager
    def indent(self) -> Iterator[None]:
        self.level += 1
        try:
            yield
        finally:
            self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
