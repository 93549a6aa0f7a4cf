"""Loads of 16-value groups decoded to float16: `hl.load_float4_e2m1fn_x16_to_float16` and
`hl.load_bfloat16_x16_to_float16`.

What they compute (the API docs in `helion.language` say the same for users):

* `storage` is a kernel tensor argument; `group_offsets` an integer device tensor (or int) of
  element offsets into it, counted in row-major order over `storage`'s shape (for a contiguous
  tensor: the offset from its first element in units of its dtype, what a pointer offset would
  be). Each offset names the first element of one group:
  - FP4: 8 consecutive bytes (uint8/int8; torch.float4_e2m1fn_x2 storage is refused with a
    hint to pass ``x.view(torch.uint8)``), 16 E2M1 values, two per byte in
    torch.float4_e2m1fn_x2's order (the low nibble first);
  - bfloat16: 16 consecutive bfloat16 elements.
* The result is a tuple of 16 float16 tensors of `group_offsets`' shape: element j of the
  group in output j (FP4: output 2*i is the low nibble of byte i, 2*i + 1 its high nibble).
  E2M1 values are exact in float16; bfloat16 values are rounded to the nearest float16 (ties to
  even), overflowing to +-inf, as ``x.to(torch.float16)`` does.
* `extra_mask` (a bool tensor broadcasting to `group_offsets`' shape) turns groups off: their
  bytes are not read and all 16 outputs are +0.0. Lanes past the end of a tile are masked like
  any load's.

How: written once from the language's own pieces, so every backend (and eager mode) runs it
without a rule of its own: one gather per element of the group (``hl.load(storage, offsets +
j)``, masked by `extra_mask`), the E2M1 decoder of `_float4` and casts. Offsets index a 1-D
storage directly and become an index per dimension of a storage of several dimensions by
division by its sizes (constants of the trace).

Why not a flat view of a contiguous storage, derived from the argument at each launch: such a
derived kernel argument keeps a kernel off the warm call's fast path and out of self-contained
exports; the division costs a few integer ops per element on the device instead, and a caller
who wants none passes ``storage.view(-1)``.

Why not one load of the whole group and a split of its lanes: picking lanes out of a device
tensor is a reshape/``hl.split`` tree (Pallas cannot reshape a tile dimension, CuTe neither) or
an int index (a masked sum per lane in Triton, refused by CuTe); element gathers run everywhere.
"""

from __future__ import annotations

from typing import Any

import torch

from helion import exc
from helion.language import _float4

FP4_API = "hl.load_float4_e2m1fn_x16_to_float16"
BF16_API = "hl.load_bfloat16_x16_to_float16"
GROUP = 16  # values per group
_FLOAT4_X2 = getattr(torch, "float4_e2m1fn_x2", None)


class X16LoadEntryPoints:
    """The two public x16 loads as entry points of an execution mode (the tracer, eager mode):
    each mode supplies `_load_x16(api, storage, group_offsets, extra_mask)`."""

    def hl_load_float4_e2m1fn_x16_to_float16(
        self, storage: Any, group_offsets: Any, extra_mask: Any = None
    ) -> tuple:
        return self._load_x16(FP4_API, storage, group_offsets, extra_mask)  # type: ignore[attr-defined]

    def hl_load_bfloat16_x16_to_float16(
        self, storage: Any, group_offsets: Any, extra_mask: Any = None
    ) -> tuple:
        return self._load_x16(BF16_API, storage, group_offsets, extra_mask)  # type: ignore[attr-defined]


def check_storage(api: str, storage: Any) -> None:
    """The dtype rule of `api`'s storage (shared by the tracer and eager mode)."""
    dtype = storage.dtype
    if api == FP4_API:
        if _FLOAT4_X2 is not None and dtype == _FLOAT4_X2:
            # no backend takes a kernel argument of the packed dtype (Triton has no type for
            # it), so it is refused everywhere, as hl.float4_e2m1fn_x2_to_float32 refuses it
            raise exc.TypeInferenceError(
                f"{api}: pass the torch.float4_e2m1fn_x2 tensor viewed as bytes: "
                "x.view(torch.uint8) in host code (device code cannot reinterpret a dtype)"
            )
        if dtype not in _float4.BYTE_DTYPES:
            raise exc.TypeInferenceError(
                f"{api} expects storage of torch.uint8 (or int8) bytes that each hold two "
                f"E2M1 values, got {dtype}"
            )
    elif dtype != torch.bfloat16:
        raise exc.TypeInferenceError(f"{api} expects torch.bfloat16 storage, got {dtype}")
    if len(storage.shape) == 0:
        raise exc.TypeInferenceError(f"{api} expects storage with at least one dimension")


def check_offsets(api: str, group_offsets: Any) -> None:
    if isinstance(group_offsets, bool) or not isinstance(group_offsets, int):
        dtype = getattr(group_offsets, "dtype", None)
        if dtype is None or dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
            what = dtype if dtype is not None else type(group_offsets).__name__
            raise exc.TypeInferenceError(
                f"{api} expects integer group_offsets (an integer device tensor or an int), "
                f"got {what}"
            )


def load_x16(api: str, storage: Any, group_offsets: Any, extra_mask: Any) -> tuple[Any, ...]:
    """The 16 float16 values of each group (see the module docstring). `storage` is a kernel
    tensor of the mode (a `HostTensor` when traced, a tensor in eager mode) already of a byte
    or bfloat16 dtype; `group_offsets` an integer device value or an int."""
    import helion.language as hl

    if isinstance(extra_mask, bool):
        extra_mask = None if extra_mask else hl.full([], False, dtype=torch.bool)
    sizes = [int(s) for s in storage.shape]
    if api == BF16_API:
        return tuple(
            hl.load(storage, _row_major_index(_plus(group_offsets, j), sizes), extra_mask).to(
                torch.float16
            )
            for j in range(GROUP)
        )
    values: list[Any] = []
    for j in range(GROUP // 2):
        byte = hl.load(storage, _row_major_index(_plus(group_offsets, j), sizes), extra_mask)
        bits = byte.to(torch.int32)
        values.append(_float4.decode_nibbles(bits & 0xF).to(torch.float16))
        values.append(_float4.decode_nibbles((bits >> 4) & 0xF).to(torch.float16))
    return tuple(values)


def _plus(offsets: Any, j: int) -> Any:
    return offsets + j if j else offsets


def _row_major_index(flat: Any, sizes: list[int]) -> list[Any]:
    """The per-dimension index of row-major element offsets `flat` into a tensor of `sizes`."""
    index: list[Any] = []
    inner = 1
    for size in reversed(sizes[1:]):
        index.append((flat // inner) % size if inner != 1 else flat % size)
        inner *= size
    index.append(flat // inner if inner != 1 else flat)
    return index[::-1]
