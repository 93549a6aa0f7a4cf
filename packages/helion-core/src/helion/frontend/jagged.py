"""`hl.jagged_tile(parent)` while tracing: a tile loop to `parent.amax()` plus implicit masks.

Inside the loop, a value whose shape has the jagged tile's dimension *and* every dimension of
`parent` has a per-lane validity mask `tile.index < parent` (of shape `parent.shape + [tile]`).
The tracer applies it, as ordinary IR ops, wherever padded lanes would matter:

- loads, stores and atomics whose access shape has the jagged dimension are masked (ANDed with
  any `extra_mask`); an access with the jagged dimension but without all of `parent`'s
  dimensions has no per-lane end and is an error (`InvalidJaggedTileUsage`);
- a reduction over one of the mask's dimensions first replaces the masked lanes by the
  reduction's identity (0 for sum, -inf for amax, ...), so values computed from masked loads
  (an `exp`, a division) never leak into the result.

Every backend therefore sees a plain tile loop with explicit masks; nothing here is
backend-specific.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING
from typing import Any
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import HostTensor
from helion.frontend.proxies import TileProxy
from helion.ir.core import TensorType
from helion.ir.core import TileType
from helion.ir.core import Value
from helion.language import _ops as ops

if TYPE_CHECKING:
    from helion.frontend.tracer import Tracer


@dataclasses.dataclass
class JaggedLoop:
    """One open `hl.jagged_tile` loop."""

    parent: Value  # integer values, one per lane of the enclosing tiles
    parent_dims: tuple[sympy.Expr, ...]
    block_id: int = -1
    symbol: sympy.Symbol | None = None
    tile: Value | None = None
    # id(block) -> the mask of shape parent_dims + (symbol,), built once per region
    masks: dict[int, Value] = dataclasses.field(default_factory=dict)

    @property
    def dims(self) -> tuple[sympy.Expr, ...]:
        return (*self.parent_dims, self.symbol)


def _open_tile_blocks(tracer: Tracer) -> dict[sympy.Expr, int]:
    """Symbol -> block id of every tile dimension whose loop encloses the current code."""
    found = {}
    for block in tracer.blocks:
        for arg in block.args:
            if isinstance(arg.type, TileType) and not arg.type.is_grid:
                info = tracer.ir.block_sizes[arg.type.block_id]
                found[info.symbol] = info.block_id
    return found


def loop_request(tracer: Tracer, parent: Any) -> Any:
    """What `hl.jagged_tile(parent)` returns while tracing (consumed by `Tracer.loop`)."""
    from helion.frontend.tracer import TileLoopRequest

    loc = tracer.current_loc()
    if tracer.loop_depth == 0:
        raise exc.InvalidJaggedTileUsage(
            "hl.jagged_tile cannot be the outermost loop; iterate the rows with hl.tile first",
            loc=loc,
        )
    if isinstance(parent, HostTensor):
        raise exc.InvalidJaggedTileUsage(
            f"the parent must be loaded in device code (e.g. {parent.arg.name}[tile]), not the host tensor itself",
            loc=loc,
        )
    if isinstance(parent, TileProxy) or not isinstance(parent, DeviceValue):
        raise exc.InvalidJaggedTileUsage(
            f"the parent must be an integer device tensor, got {type(parent).__name__}", loc=loc
        )
    value = parent.value
    if value.dtype.is_floating_point or value.dtype == torch.bool:
        raise exc.InvalidJaggedTileUsage(
            f"the parent must hold integers (lengths), got {value.dtype}", loc=loc
        )
    if not value.shape:
        raise exc.InvalidJaggedTileUsage(
            "the parent has rank 0; it needs one axis per enclosing tile (for a single length use hl.tile(0, n))",
            loc=loc,
        )
    enclosing = _open_tile_blocks(tracer)
    for position, dim in enumerate(value.shape):
        if dim not in enclosing:
            raise exc.InvalidJaggedTileUsage(
                f"axis {position} of the parent (size {dim}) is not an enclosing tile; every axis of the parent "
                "must come from a tile of an enclosing loop",
                loc=loc,
            )
    if len(set(value.shape)) != len(value.shape):
        raise exc.InvalidJaggedTileUsage("the parent uses the same tile for two axes", loc=loc)
    end = value
    while end.shape:
        end = tracer.emit(
            ops.REDUCTIONS["amax"], [end], {"dim": len(end.shape) - 1, "keepdim": False}
        ).output
    request = TileLoopRequest([0], [DeviceValue(tracer, end)], [None], False, False)
    request.jagged = JaggedLoop(value, tuple(value.shape))
    return request


def enter(tracer: Tracer, loop: JaggedLoop, tile: Value) -> None:
    info = tracer.ir.block_sizes[tile.type.block_id]
    loop.block_id = info.block_id
    loop.symbol = info.symbol
    loop.tile = tile
    tracer.jagged_loops.append(loop)


def exit(tracer: Tracer) -> None:
    tracer.jagged_loops.pop()


def _base_mask(tracer: Tracer, loop: JaggedLoop) -> Value:
    key = id(tracer.block)
    cached = loop.masks.get(key)
    if cached is not None:
        return cached
    rank = len(loop.parent_dims)
    index = tracer.tile_attr(TileProxy(tracer, loop.tile), "index").value
    lanes = tracer.emit(
        ops.view_subscript,
        [index],
        {
            "items": (None,) * rank + ("slice",),
            "shape": (sympy.Integer(1),) * rank + (loop.symbol,),
        },
    ).output
    ends = tracer.emit(
        ops.view_subscript,
        [loop.parent],
        {"items": ("slice",) * rank + (None,), "shape": (*loop.parent_dims, sympy.Integer(1))},
    ).output
    mask = tracer.emit(ops.BINARY["lt"], [lanes, ends]).output
    loop.masks[key] = mask
    return mask


def _aligned_mask(tracer: Tracer, loop: JaggedLoop, shape: Sequence[sympy.Expr]) -> Value:
    """The loop's mask arranged to broadcast against a value of `shape` (which holds all of the
    mask's dims)."""
    positions = [list(shape).index(d) for d in loop.dims]
    mask = _base_mask(tracer, loop)
    order = sorted(range(len(positions)), key=lambda i: positions[i])
    if order != list(range(len(order))):
        permuted = tuple(loop.dims[i] for i in order)
        mask = tracer.emit(
            ops.view_permute, [mask], {"dims": tuple(order)}, [TensorType(permuted, torch.bool)]
        ).output
    if len(shape) != len(positions):
        present = set(positions)
        items = tuple("slice" if p in present else None for p in range(len(shape)))
        out_shape = tuple(shape[p] if p in present else sympy.Integer(1) for p in range(len(shape)))
        mask = tracer.emit(ops.view_subscript, [mask], {"items": items, "shape": out_shape}).output
    return mask


def _covering_loops(
    tracer: Tracer, shape: Sequence[Any], what: str, strict: bool
) -> list[JaggedLoop]:
    shape = list(shape)
    found = []
    for loop in tracer.jagged_loops:
        hits = [d for d in shape if isinstance(d, sympy.Expr) and loop.symbol in d.free_symbols]
        if not hits:
            continue
        if any(d != loop.symbol for d in hits) or len(hits) > 1:
            if strict:
                raise exc.InvalidJaggedTileUsage(
                    f"{what} merges or repeats the jagged dimension {loop.symbol}",
                    loc=tracer.current_loc(),
                )
            continue
        missing = [d for d in loop.parent_dims if d not in shape]
        repeated = [d for d in loop.parent_dims if shape.count(d) > 1]
        if missing or repeated:
            if strict:
                raise exc.InvalidJaggedTileUsage(
                    f"{what} uses the jagged tile without all the tiles of its parent (shape {shape}, parent "
                    f"{list(loop.parent_dims)}); index it together with them, e.g. x[tile_b, tile_k]",
                    loc=tracer.current_loc(),
                )
            continue
        found.append(loop)
    return found


def access_mask(tracer: Tracer, shape: Sequence[Any], extra_mask: Any, what: str) -> Value | None:
    """The mask of a load/store/atomic of access `shape`: the user's `extra_mask` ANDed with the
    masks of the open jagged loops whose dimension the access has."""
    mask = None if extra_mask is None else tracer.as_value(extra_mask, torch.bool)
    if not tracer.jagged_loops:
        return mask
    for loop in _covering_loops(tracer, shape, what, strict=True):
        implicit = _aligned_mask(tracer, loop, shape)
        mask = (
            implicit
            if mask is None
            else tracer.emit(ops.BINARY["logical_and"], [mask, implicit]).output
        )
    return mask


def _identity(kind: str, dtype: torch.dtype) -> Any:
    if dtype == torch.bool:
        return kind in ("all", "prod", "amin", "argmin")
    high = math.inf if dtype.is_floating_point else torch.iinfo(dtype).max
    low = -math.inf if dtype.is_floating_point else torch.iinfo(dtype).min
    return {
        "sum": 0,
        "prod": 1,
        "any": 0,
        "all": 1,
        "amax": low,
        "argmax": low,
        "amin": high,
        "argmin": high,
    }[kind]


def masked_reduction_inputs(tracer: Tracer, op: ops.Op, inputs: list, attrs: dict) -> list:
    """For a reduction over a jagged mask's dimension: its input with masked lanes set to the
    reduction's identity."""
    source = inputs[0] if inputs else None
    if not isinstance(source, Value) or not isinstance(source.type, TensorType):
        return inputs
    shape = source.type.shape
    reduced = shape[attrs["dim"]]
    loops = [
        loop
        for loop in _covering_loops(tracer, shape, "a reduction", strict=False)
        if reduced in loop.dims
    ]
    if not loops:
        return inputs
    mask = None
    for loop in loops:
        implicit = _aligned_mask(tracer, loop, shape)
        mask = (
            implicit
            if mask is None
            else tracer.emit(ops.BINARY["logical_and"], [mask, implicit]).output
        )
    kind = op.name.removeprefix("reduce_")
    fill = tracer.emit(
        ops.constant, [], {"value": _identity(kind, source.dtype), "dtype": source.dtype}
    ).output
    masked = tracer.emit(ops.where, [mask, source, fill], {}, [source.type]).output
    return [masked, *inputs[1:]]
