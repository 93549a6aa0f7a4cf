"""Triton lowerings of views, creation ops, tile attributes and device_print."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from helion.ir.core import Node
from helion.ir.core import Value
from helion.language import _ops as ops
from helion_triton.codegen import constant_as
from helion_triton.codegen import literal
from helion_triton.lowerings import triton_lowering

# -- views ---------------------------------------------------------------------------------------------


def _non_unit(shape: Any) -> list[Any]:
    return [d for d in shape if d != 1]


@triton_lowering(ops.view_reshape)
def _reshape(ctx: Any, node: Node) -> str:
    value = node.inputs[0]
    shape = tuple(node.attrs["shape"])
    x = ctx.expr(value)
    if _non_unit(value.shape) != _non_unit(shape):
        for dim in (*value.shape, *shape):
            if ctx.is_padded(dim):
                raise ctx.unsupported(
                    f"reshape of {list(value.shape)} to {list(shape)} with a padded dimension {dim}"
                )
        _check_masked_dims_lead(ctx, value.shape, shape)
    if not shape:
        return f"tl.reshape({x}, [])" if value.shape else x
    if not value.shape:
        return f"tl.broadcast_to({x}, {ctx.shape(shape)})"
    return f"tl.reshape({x}, {ctx.shape(shape)})"


def _groups(source: Any, target: Any) -> list[tuple[list, list]]:
    """The runs of ``source`` dims and ``target`` dims with equal products (a row-major
    reshape merges or splits within each run)."""
    groups: list[tuple[list, list]] = []
    a, b = [d for d in source if d != 1], [d for d in target if d != 1]
    i = j = 0
    while i < len(a) and j < len(b):
        left, right = [a[i]], [b[j]]
        i, j = i + 1, j + 1
        while sympy.simplify(sympy.Mul(*left) - sympy.Mul(*right)) != 0:
            if i < len(a) and (j >= len(b) or len(left) <= len(right)):
                left.append(a[i])
                i += 1
            elif j < len(b):
                right.append(b[j])
                j += 1
            else:
                return []  # not a plain merge or split: nothing to check here
        groups.append((left, right))
    return groups


def _check_masked_dims_lead(ctx: Any, source: Any, target: Any) -> None:
    """A merged dimension ``c * B`` is masked as lane ``j`` -> lane ``j // c`` of ``B``
    (`KernelCodegen._merged_mask`): refuse a merge or split that puts a block size whose
    tiles may be partial after another dimension of its run instead."""
    for left, right in _groups(source, target):
        parts = left if len(left) > 1 else right
        if len(parts) < 2:
            continue
        for later in parts[1:]:
            for symbol in sympy.sympify(later).free_symbols:
                if ctx.dim_mask(symbol) is not None:
                    raise ctx.unsupported(
                        f"reshape of {list(source)} to {list(target)}: the partial tiles of "
                        f"{symbol} must be the leading dimension of the ones merged or split "
                        "(stack on a later dimension, e.g. torch.stack([lo, hi], dim=1))"
                    )


@triton_lowering(ops.view_permute)
def _permute(ctx: Any, node: Node) -> str:
    dims = tuple(node.attrs["dims"])
    if dims == tuple(range(len(dims))):
        return ctx.expr(node.inputs[0])
    return f"tl.permute({ctx.expr(node.inputs[0])}, {dims})"


@triton_lowering(ops.view_expand)
def _expand(ctx: Any, node: Node) -> str:
    value = node.inputs[0]
    shape = tuple(node.attrs["shape"])
    if not isinstance(value, Value):
        dtype = node.output.dtype
        return f"tl.full({ctx.shape(shape)}, {literal(constant_as(value, dtype))}, {ctx.tl(dtype)})"
    x = ctx.expr(value)
    missing = len(shape) - len(value.shape)
    if missing and value.shape:
        x = f"{x}[{', '.join(['None'] * missing + [':'] * len(value.shape))}]"
    if tuple(value.shape) == shape:
        return x
    return f"tl.broadcast_to({x}, {ctx.shape(shape)})"


@triton_lowering(ops.view_subscript)
def _subscript(ctx: Any, node: Node) -> str:
    value = node.inputs[0]
    items = node.attrs["items"]
    x = ctx.expr(value)
    if not value.shape:
        return f"tl.broadcast_to({x}, {ctx.shape(node.output.shape)})" if node.output.shape else x
    selects = [(i, item) for i, item in enumerate(i for i in items if i is not None)]
    selects = [(dim, item) for dim, item in selects if isinstance(item, int)]
    if selects:
        # picking one lane of a dimension: a masked sum (Triton blocks cannot be indexed by ints)
        dtype = value.dtype
        work = x if dtype != torch.bool else f"{x}.to(tl.int8)"
        current = list(value.shape)
        for dim, item in reversed(selects):
            lane = f"tl.arange(0, {ctx.dim_str(current[dim])})"
            mask = ctx.place(f"({lane} == {item})", dim, current)
            if ctx.extent(current[dim]) == 1:
                work = f"tl.sum({work}, {dim})"
            else:
                work = f"tl.sum(tl.where({mask}, {work}, 0), {dim})"
            del current[dim]
        work = ctx.assign(work, "picked")
        if dtype == torch.bool:
            work = f"({work} != 0)"
        elif dtype != _sum_dtype(dtype):
            work = ctx.cast(work, dtype, _sum_dtype(dtype))
        remaining = [
            ("none" if item is None else "slice") for item in items if not isinstance(item, int)
        ]
        if "none" not in remaining:
            return work
        x, items = work, tuple(None if r == "none" else "slice" for r in remaining)
        if not current:
            return f"tl.broadcast_to({x}, {ctx.shape(node.output.shape)})"
    index = ", ".join("None" if item is None else ":" for item in items)
    return f"{x}[{index}]"


def _sum_dtype(dtype: torch.dtype) -> torch.dtype:
    """What tl.sum returns for an input of ``dtype`` (small ints widen to int32)."""
    if dtype in (torch.int8, torch.int16, torch.uint8, torch.bool):
        return torch.int32
    return dtype


# -- creation and tile attributes ----------------------------------------------------------------------


@triton_lowering(ops.full)
def _full(ctx: Any, node: Node) -> str:
    dtype = node.attrs["dtype"]
    value = constant_as(node.attrs["value"], dtype)
    return f"tl.full({ctx.shape(node.attrs['shape'])}, {literal(value)}, {ctx.tl(dtype)})"


@triton_lowering(ops.arange)
def _arange(ctx: Any, node: Node) -> str:
    start = int(node.attrs["start"])
    length = node.attrs["length"]
    expr = f"tl.arange(0, {ctx.dim_str(length)})"
    info = ctx.analysis.block_of_symbol.get(length) if getattr(length, "is_Symbol", False) else None
    if info is not None and info.kind == "reduction" and info.block_id in ctx.rdims:
        # the indices of a reduction dimension: in a looped reduction, those of the current chunk
        expr = ctx.rdims[info.block_id].index
    if start:
        expr = f"({expr} + {start})"
    return ctx.cast(expr, node.attrs["dtype"], torch.int32)


@triton_lowering(ops.constant)
def _constant(ctx: Any, node: Node) -> str:
    return ctx.typed_constant(node.attrs["value"], node.attrs["dtype"])


def _tile_of(ctx: Any, node: Node) -> Any:
    if node.inputs and isinstance(node.inputs[0], Value):
        return ctx.tile_vars(node.inputs[0])
    return ctx.tiles_by_block.get(node.attrs["block_id"])


@triton_lowering(ops.TILE_ATTRS["index"])
def _tile_index(ctx: Any, node: Node) -> str:
    tile = _tile_of(ctx, node)
    return ctx.cast(ctx.tile_index(tile), node.output.dtype, tile.index_dtype)


@triton_lowering(ops.TILE_ATTRS["begin"])
def _tile_begin(ctx: Any, node: Node) -> str:
    tile = _tile_of(ctx, node)
    if tile.offset is None:
        raise ctx.unsupported("tile.begin inside a flattened loop")
    return ctx.cast(tile.offset, node.output.dtype, tile.offset_dtype)


@triton_lowering(ops.TILE_ATTRS["end"])
def _tile_end(ctx: Any, node: Node) -> str:
    tile = _tile_of(ctx, node)
    if tile.offset is None:
        raise ctx.unsupported("tile.end inside a flattened loop")
    return ctx.cast(
        f"tl.minimum({tile.offset} + {tile.step}, {tile.end})", node.output.dtype, _int_dtype(tile)
    )


@triton_lowering(ops.TILE_ATTRS["block_size"])
def _tile_block_size(ctx: Any, node: Node) -> str:
    block_id = node.attrs["block_id"]
    info = ctx.ir.block(block_id)
    if info.kind == "tile":
        ctx.used_constexprs.add(info.symbol.name)
        size = info.symbol.name
    else:
        size = str(ctx.real_block[block_id])
    return f"tl.full([], {size}, {ctx.tl(node.output.dtype)})"


@triton_lowering(ops.TILE_ATTRS["id"])
def _tile_id(ctx: Any, node: Node) -> str:
    tile = _tile_of(ctx, node)
    if tile.offset is None:
        raise ctx.unsupported("tile.id inside a flattened loop")
    return ctx.cast(f"{tile.offset} // {tile.step}", node.output.dtype, tile.offset_dtype)


@triton_lowering(ops.TILE_ATTRS["count"])
def _tile_count(ctx: Any, node: Node) -> str:
    tile = _tile_of(ctx, node)
    return ctx.cast(
        f"tl.cdiv({tile.end} - {tile.begin}, {tile.step})", node.output.dtype, _int_dtype(tile)
    )


def _int_dtype(tile: Any) -> torch.dtype | None:
    """The dtype of arithmetic on a tile's offset and its (literal) bounds."""
    if tile.end.isdigit() and tile.begin.isdigit():
        return tile.offset_dtype
    return None


# -- debugging ----------------------------------------------------------------------------------------


@triton_lowering(ops.device_print)
def _device_print(ctx: Any, node: Node) -> str:
    values = ", ".join(ctx.expr(v) for v in node.inputs)
    prefix = repr(str(node.attrs.get("prefix", "")) or " ")
    return f"tl.device_print({prefix}{', ' + values if values else ''})"
