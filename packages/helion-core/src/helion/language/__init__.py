"""The Helion language: `import helion.language as hl`.

Each function here only normalizes its arguments and carries the docs; the active mode
(tracer, eager interpreter or host runtime, see `_context`) does the work.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import torch

from helion.language._context import dispatch


class ConstExpr(NamedTuple):
    """Marks a kernel argument as a compile-time constant: `def k(x, n: hl.constexpr)` or
    `k(x, hl.constexpr(5))`. Its value is baked into the code and becomes part of the key."""

    value: Any

    def __index__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)


constexpr = ConstExpr


class ProcessGroupName(ConstExpr):
    """Annotation for an argument naming the process group a distributed kernel uses."""


class Tile:
    """The loop variable of `hl.tile`. Never constructed by users; see `tile.index`,
    `tile.begin`, `tile.end`, `tile.block_size`, `tile.id`, `tile.count`."""


# -- loops ------------------------------------------------------------------------------------


def tile(begin_or_end: Any, end_or_none: Any = None, /, block_size: Any = None) -> Any:
    """Iterate over tiles of a range (or of several ranges, given as a sequence).

    `hl.tile(n)`, `hl.tile(begin, end)`, `hl.tile([m, n])`, `hl.tile(n, block_size=64)`.
    A top-level `for` over `hl.tile` is the launch grid; a nested one is a sequential loop.
    `block_size=None` makes the block size a tunable (an entry of `Config.block_sizes`).
    """
    return dispatch("tile", begin_or_end, end_or_none, block_size=block_size)


def grid(begin_or_end: Any, end_or_none: Any = None, /, step: Any = None) -> Any:
    """Like `hl.tile` with block size 1: yields scalar indices (`range` in device code)."""
    return dispatch("grid", begin_or_end, end_or_none, step=step)


def static_range(begin_or_end: int, end_or_none: int | None = None, /, step: int = 1) -> range:
    """A compile-time unrolled range over constant ints."""
    from helion import exc

    for bound in (begin_or_end, end_or_none, step):
        if bound is not None and not isinstance(bound, int):
            raise exc.TypeInferenceError(f"hl.static_range needs constant ints, got {type(bound).__name__}")
    if end_or_none is None:
        return range(0, begin_or_end, step)
    return range(begin_or_end, end_or_none, step)


def barrier() -> None:
    """Grid-wide barrier between two top-level loops (forces a persistent pid_type)."""
    return dispatch("barrier")


# -- tunables and specialization ---------------------------------------------------------------


def register_block_size(min_or_max: Any, max_or_none: Any = None, /) -> Any:
    """Allocate a tunable block size (an entry of `Config.block_sizes`) usable in host code
    and shared with `hl.tile(..., block_size=bs)`."""
    if max_or_none is None:
        return dispatch("register_block_size", 1, min_or_max)
    return dispatch("register_block_size", min_or_max, max_or_none)


def register_tunable(name: str, fragment: Any) -> Any:
    """Add a user tunable `name` (a ConfigSpecFragment) to the search space; returns its value."""
    from helion import exc

    if not isinstance(name, str):
        raise exc.RegisterTunableArgTypes(name, fragment)
    return dispatch("register_tunable", name, fragment)


def specialize(value: Any) -> Any:
    """Bake a size (or sequence of sizes) of an input tensor into the kernel (host only)."""
    return dispatch("specialize", value)


# -- creation -----------------------------------------------------------------------------------


def full(shape: Sequence[Any], value: Any, dtype: torch.dtype = torch.float32, device: Any = None) -> Any:
    """A device tensor of `shape` (ints, tiles, block sizes) filled with `value`."""
    return dispatch("full", list(shape), value, dtype)


def zeros(shape: Sequence[Any], dtype: torch.dtype = torch.float32, device: Any = None) -> Any:
    """`hl.full(shape, 0, dtype)`; the default dtype is float32."""
    return dispatch("full", list(shape), 0, dtype)


def arange(*args: Any, dtype: torch.dtype | None = None, device: Any = None, **kwargs: Any) -> Any:
    """`torch.arange` on the kernel device; accepts block sizes (`hl.arange(BLOCK)`)."""
    return dispatch("arange", *args, dtype=dtype)


# -- memory -------------------------------------------------------------------------------------


def load(tensor: Any, index: Sequence[Any], extra_mask: Any = None, eviction_policy: str | None = None) -> Any:
    """`tensor[index]` with an optional extra mask (masked lanes read 0)."""
    return dispatch("load", tensor, list(index), extra_mask=extra_mask, eviction_policy=eviction_policy)


def store(tensor: Any, index: Sequence[Any], value: Any, extra_mask: Any = None) -> None:
    """`tensor[index] = value` with an optional extra mask."""
    return dispatch("store", tensor, list(index), value, extra_mask=extra_mask)


def subscript(tensor: Any, index: Sequence[Any]) -> Any:
    """Index a device tensor with `None` (new axis) and `:` only."""
    return dispatch("subscript", tensor, list(index))


def _atomic(kind: str):
    def atomic_fn(target: Any, index: Sequence[Any], value: Any, sem: str = "relaxed") -> Any:
        return dispatch("atomic", kind, target, list(index), value, sem=sem)

    atomic_fn.__name__ = f"atomic_{kind}"
    atomic_fn.__doc__ = (
        f"Atomic {kind} of `value` into `target[index]`; returns the previous values. "
        "`sem` is one of relaxed, acquire, release, acq_rel."
    )
    return atomic_fn


atomic_add = _atomic("add")
atomic_xchg = _atomic("xchg")
atomic_max = _atomic("max")
atomic_min = _atomic("min")
atomic_and = _atomic("and")
atomic_or = _atomic("or")
atomic_xor = _atomic("xor")


def atomic_cas(target: Any, index: Sequence[Any], expected: Any, value: Any, sem: str = "relaxed") -> Any:
    """Where `target[index] == expected`, write `value`; returns the previous values."""
    return dispatch("atomic", "cas", target, list(index), value, sem=sem, expected=expected)


# -- matmul -------------------------------------------------------------------------------------


def dot(mat1: Any, mat2: Any, acc: Any = None, out_dtype: torch.dtype | None = None) -> Any:
    """Matrix product of 2-D (or batched 3-D) tiles; float inputs give float32 (int8 give int32)
    unless `out_dtype` is set; with `acc` the result is `acc + mat1 @ mat2` in acc's dtype."""
    return dispatch("dot", mat1, mat2, acc=acc, out_dtype=out_dtype)


# -- scans --------------------------------------------------------------------------------------


def cumsum(input: Any, dim: int, reverse: bool = False) -> Any:
    """Inclusive prefix sum along `dim`."""
    return dispatch("scan", "cumsum", input, dim, reverse=reverse)


def cumprod(input: Any, dim: int, reverse: bool = False) -> Any:
    """Inclusive prefix product along `dim`."""
    return dispatch("scan", "cumprod", input, dim, reverse=reverse)


# -- tile attributes (also reachable as tile.index, tile.begin, ...) ------------------------------


def tile_index(t: Any) -> Any:
    return t.index


def tile_begin(t: Any) -> Any:
    return t.begin


def tile_end(t: Any) -> Any:
    return t.end


def tile_block_size(t: Any) -> Any:
    return t.block_size


def tile_id(t: Any) -> Any:
    return t.id


# -- debug --------------------------------------------------------------------------------------


def device_print(prefix: str, *values: Any) -> None:
    """Print from device code (also what `print` becomes inside device loops)."""
    return dispatch("device_print", prefix, *values)


def breakpoint() -> None:  # noqa: A001 - mirrors the builtin it replaces in device code
    """A breakpoint in device code; only in eager mode (HELION_INTERPRET=1)."""
    return dispatch("breakpoint")


def __getattr__(name: str) -> Any:
    # ops contributed by plugins (e.g. hl.signal from helion-distributed) resolve lazily
    from helion.language._plugin_ops import plugin_op

    return plugin_op(name)
