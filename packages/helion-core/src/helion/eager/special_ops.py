"""Eager-mode meaning of `hl.dot_scaled` and of the Triton-only escape hatches."""

from __future__ import annotations

from typing import Any

import torch

from helion import exc
from helion.language import _mx


def _check_operand(value: Any, fmt: Any, what: str) -> None:
    if fmt not in _mx.FORMATS:
        raise exc.InvalidAPIUsage(
            f"hl.dot_scaled: {what}_format must be one of {', '.join(_mx.FORMATS)}, got {fmt!r}"
        )
    if not isinstance(value, torch.Tensor) or value.ndim != 2:
        raise exc.TypeInferenceError(f"hl.dot_scaled: {what} must be a 2-D tensor")
    if value.dtype not in _mx.STORAGE[fmt]:
        names = " or ".join(str(d).removeprefix("torch.") for d in _mx.STORAGE[fmt])
        raise exc.TypeInferenceError(
            f"hl.dot_scaled: {what} in format {fmt!r} must be stored as {names}, got {value.dtype}"
        )


def _check_scale(scale: Any, rows: int, what: str) -> None:
    if scale is None:
        return
    if not isinstance(scale, torch.Tensor) or scale.ndim != 2 or scale.dtype != torch.uint8:
        raise exc.TypeInferenceError(
            f"hl.dot_scaled: {what} must be a 2-D uint8 (e8m0) tensor or None"
        )
    if scale.shape[0] != rows:
        raise exc.ShapeMismatch(f"hl.dot_scaled: {what} has {scale.shape[0]} rows, expected {rows}")


def dot_scaled(
    mat1: Any,
    mat1_scale: Any,
    mat1_format: Any,
    mat2: Any,
    mat2_scale: Any,
    mat2_format: Any,
    acc: Any,
    out_dtype: torch.dtype | None,
) -> torch.Tensor:
    _check_operand(mat1, mat1_format, "mat1")
    _check_operand(mat2, mat2_format, "mat2")
    _check_scale(mat1_scale, mat1.shape[0], "mat1_scale")
    _check_scale(mat2_scale, mat2.shape[1], "mat2_scale")
    if acc is not None and (
        not isinstance(acc, torch.Tensor) or acc.dtype not in (torch.float32, torch.float16)
    ):
        raise exc.TypeInferenceError("hl.dot_scaled: acc must be a float32 or float16 tensor")
    result_dtype = acc.dtype if acc is not None else out_dtype or torch.float32
    try:
        return _mx.reference_dot_scaled(
            mat1, mat1_scale, mat1_format, mat2, mat2_scale, mat2_format, acc, result_dtype
        )
    except (ValueError, RuntimeError) as error:
        raise exc.ShapeMismatch(f"hl.dot_scaled: {error}") from None


def triton_only(
    api: str, hint: str, loc: exc.SourceLocation | None = None
) -> exc.BackendUnsupported:
    """The error for an escape hatch (Triton code) met in eager mode, at the kernel's line."""
    return exc.BackendUnsupported(f"hl.{api}", "eager", hint=hint, loc=loc)


INLINE_TRITON_HINT = (
    "It holds Triton code: run the kernel on the Triton backend (compiled, or through the "
    "Triton interpreter on CPU) instead of HELION_INTERPRET=1."
)
INLINE_ASM_HINT = "It holds GPU assembly: run the kernel compiled by the Triton backend on a GPU."
