"""Lowerings of loads, stores and atomics, and the ``indexing`` / eviction tunables.

Every memory op addresses ``tensor[items]``: each item is a tile, a slice (a reduction
dimension), a constant or scalar index, a new axis, or an index tensor (a gather / scatter).
``pointer`` indexing builds ``base + sum(index_d * stride_d)`` with one mask per padded
dimension; ``block_ptr`` and ``tensor_descriptor`` are used where the access is a plain box of
tiles and slices, and fall back to pointers elsewhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from helion.ir.core import Node
from helion.ir.core import TensorArg
from helion.language import _ops as ops
from helion_triton.lowerings import triton_lowering
from helion_triton.tunables import EVICTION_NAMES
from helion_triton.tunables import TritonOptions

# TMA boxes: at most 256 lanes per dimension, at least 16 bytes in the contiguous one
MAX_DESCRIPTOR_BOX = 256
MIN_DESCRIPTOR_BYTES = 16


@dataclasses.dataclass
class BoxDim:
    """One tensor dimension of a box-shaped access (tile or slice)."""

    offset: str  # first element
    extent: str  # Triton block extent (source)
    lanes: int
    bound: str  # elements valid in this dimension, counted from 0
    masked: bool


def _access_shape(node: Node) -> tuple:
    if node.op.memory == "store" or not node.outputs:  # a store (or a StackTensor store)
        return tuple(node.inputs[node.attrs["value"]].shape)
    return tuple(node.output.shape)


def pointer_access(ctx: Any, node: Node, lead: int = 0) -> tuple[str, str | None, str]:
    """``(pointer, mask, offset)`` of a memory op with pointer indexing; ``lead`` dims of the
    access shape come before those of the index (the buffers of a StackTensor)."""
    tensor: TensorArg = node.attrs["tensor"]
    items = node.attrs["items"]
    shape = _access_shape(node)
    flat = ctx.is_flat(shape)
    tensor_shapes = [node.inputs[item[1]].shape for item in items if item[0] == "tensor"]
    tensor_rank = len(ops.broadcast_shapes(*tensor_shapes)) if tensor_shapes else 0
    terms: list[str] = []
    masks: list[str] = []
    vector = False
    position = lead
    tensor_position = None
    dim = 0

    def add_mask(mask: str | None) -> None:
        if mask is not None and mask not in masks:
            masks.append(mask)

    for item in items:
        kind = item[0]
        if kind == "none":
            position += 1
            continue
        stride = ctx.stride_text(tensor, dim)
        dim += 1
        if kind == "tile":
            tile = ctx.tile_vars(node.inputs[item[1]])
            terms.append(_term(ctx.place(ctx.tile_index(tile), position, shape), stride))
            if tile.mask is not None:
                add_mask(ctx.place(tile.mask, position, shape))
            vector = True
            position += 1
        elif kind == "full":
            start = int(item[1])
            rdim = shape[position]
            if rdim == 1:
                terms.append(_term(str(start), stride))
            else:
                lanes = ctx.rdim_vars(rdim)
                index = lanes.index if not start else f"({lanes.index} + {start})"
                terms.append(_term(ctx.place(index, position, shape), stride))
                if lanes.mask is not None:
                    add_mask(ctx.place(lanes.mask, position, shape))
                vector = True
            position += 1
        elif kind == "const":
            terms.append(_term(str(int(item[1])), stride))
        elif kind == "scalar":
            terms.append(_term(ctx.expr(node.inputs[item[1]]), stride))
        elif kind == "tensor":
            value = node.inputs[item[1]]
            if tensor_position is None:
                tensor_position = position
                position += tensor_rank
            lead = tensor_position + tensor_rank - len(value.shape)
            index = ctx.expr(value)
            rank = len(shape)
            if rank > len(value.shape) and value.shape:
                parts = (
                    ["None"] * lead
                    + [":"] * len(value.shape)
                    + ["None"] * (rank - lead - len(value.shape))
                )
                index = f"{index}[{', '.join(parts)}]"
            terms.append(_term(index, stride))
            vector = vector or bool(value.shape)
            for offset, value_dim in enumerate(value.shape):
                mask = ctx.dim_mask(value_dim, ctx.origin(value, offset))
                if mask is not None:
                    add_mask(ctx.place(mask, lead + offset, shape))
        else:
            raise ctx.unsupported(f"index item {kind!r}")
    if node.attrs.get("mask") is not None:
        add_mask(ctx.expr(node.inputs[node.attrs["mask"]]))
    if shape and not vector and not flat:
        terms.append(f"tl.zeros({ctx.shape([1] * len(shape))}, tl.int32)")
    offset = " + ".join(terms) if terms else "0"
    base = ctx.tensor_param(tensor.index)
    pointer = f"{base} + ({offset})" if " " in offset else f"{base} + {offset}"
    return pointer, (" & ".join(masks) if masks else None), offset


def _term(index: str, stride: str) -> str:
    if stride == "1":
        return index
    return f"{index} * {stride}"


# -- block pointers and tensor descriptors -----------------------------------------------------------


def box_dims(ctx: Any, node: Node) -> list[BoxDim] | None:
    """The access as a box of tiles and slices (None when it is not one)."""
    items = node.attrs["items"]
    if node.attrs.get("mask") is not None or not items:
        return None
    shape = _access_shape(node)
    if ctx.is_flat(shape) or len(shape) != len(items):
        return None
    tensor: TensorArg = node.attrs["tensor"]
    dims = []
    for position, item in enumerate(items):
        if item[0] == "tile":
            tile = ctx.tile_vars(node.inputs[item[1]])
            info = ctx.ir.block(tile.block_id)
            if (
                tile.is_grid
                or tile.offset is None
                or ctx.block_value[tile.block_id] != ctx.real_block[tile.block_id]
            ):
                return None
            bound = tile.end if tile.mask is not None else ctx.size_text(tensor, position)
            dims.append(
                BoxDim(
                    tile.offset,
                    ctx.dim_str(info.symbol),
                    ctx.block_value[tile.block_id],
                    bound,
                    tile.mask is not None,
                )
            )
        elif item[0] == "full":
            start, length = int(item[1]), int(item[2])
            rdim = shape[position]
            if rdim == 1 or length == 0:  # a box with no elements: pointers, all masked
                return None
            lanes = ctx.rdim_vars(rdim)
            offset = lanes.offset if not start else f"{lanes.offset} + {start}"
            dims.append(
                BoxDim(
                    offset,
                    ctx.dim_str(rdim),
                    ctx.extent(rdim),
                    ctx.extent_text(start + length),
                    lanes.mask is not None,
                )
            )
        else:
            return None
    return dims


def _descriptor_ok(ctx: Any, node: Node, dims: list[BoxDim]) -> bool:
    tensor: TensorArg = node.attrs["tensor"]
    element = tensor.dtype.itemsize
    if tensor.stride[-1] != 1 or any((s * element) % 16 for s in tensor.stride[:-1]):
        return False
    if (
        any(d.lanes > MAX_DESCRIPTOR_BOX for d in dims)
        or dims[-1].lanes * element < MIN_DESCRIPTOR_BYTES
    ):
        return False
    if len(dims) > 5 or tensor.dtype == torch.bool:
        return False
    # the descriptor is built once per kernel: its bounds must be known at the kernel's start
    for item, dim in zip(node.attrs["items"], dims, strict=False):
        if item[0] == "full" and int(item[1]) != 0:
            return False
        if not _known_at_start(ctx, dim.bound):
            return False
    return True


def _known_at_start(ctx: Any, expr: str) -> bool:
    """Is ``expr`` a number or a scalar or size argument (defined before any loop)?"""
    return expr.isdigit() or ctx.is_kernel_argument(expr)


def _indexing(ctx: Any, node: Node) -> str:
    slot = ctx.analysis.memory_slots.get(id(node))
    index = slot.indexing if slot is not None else None
    return str(TritonOptions.item(ctx.options.indexing, index, "pointer"))


def _eviction(ctx: Any, node: Node) -> str:
    explicit = node.attrs.get("eviction_policy")
    if explicit:
        policy = EVICTION_NAMES.get(explicit)
    else:
        slot = ctx.analysis.memory_slots.get(id(node))
        index = slot.eviction if slot is not None else None
        policy = EVICTION_NAMES.get(
            TritonOptions.item(ctx.options.load_eviction_policies, index, "")
        )
    return f', eviction_policy="{policy}"' if policy else ""


def _descriptor(ctx: Any, node: Node, dims: list[BoxDim]) -> str:
    tensor: TensorArg = node.attrs["tensor"]
    base = ctx.tensor_param(tensor.index)
    shape = ", ".join(d.bound for d in dims)
    strides = ", ".join(ctx.stride_text(tensor, d) for d in range(len(tensor.stride)))
    block = ", ".join(d.extent for d in dims)
    key = (tensor.index, shape, block)
    return ctx.descriptor(
        key,
        lambda name: (
            f"tl.make_tensor_descriptor({base}, shape=[{shape}], strides=[{strides}], block_shape=[{block}])"
        ),
        f"{base}_desc",
    )


def _block_pointer(ctx: Any, node: Node, dims: list[BoxDim]) -> tuple[str, str]:
    tensor: TensorArg = node.attrs["tensor"]
    base = ctx.tensor_param(tensor.index)
    order = sorted(range(len(dims)), key=lambda d: (tensor.stride[d], -d))
    pointer = (
        f"tl.make_block_ptr({base}, shape=[{', '.join(d.bound for d in dims)}], "
        f"strides=[{', '.join(ctx.stride_text(tensor, d) for d in range(len(tensor.stride)))}], offsets=[{', '.join(d.offset for d in dims)}], "
        f"block_shape=[{', '.join(d.extent for d in dims)}], order={order})"
    )
    checks = [str(i) for i, d in enumerate(dims) if d.masked]
    return ctx.assign(
        pointer, f"{base}_block"
    ), f", boundary_check=[{', '.join(checks)}]" if checks else ""


def _box(ctx: Any, node: Node) -> tuple[str, list[BoxDim] | None]:
    """The indexing style to use for ``node`` (the configured one where the access allows it)."""
    style = _indexing(ctx, node)
    if style == "pointer":
        return "pointer", None
    dims = box_dims(ctx, node)
    if dims is None:
        return "pointer", None
    tensor_dtype = node.attrs["tensor"].dtype
    if (
        style == "tensor_descriptor"
        and ctx.target.has_tensor_descriptor
        and _descriptor_ok(ctx, node, dims)
    ):
        return "tensor_descriptor", dims
    if style == "block_ptr" and ctx.target.has_block_ptr and tensor_dtype != torch.bool:
        # a block pointer to a bool tensor has int8 elements: compiled Triton refuses to store
        # an int1 tile through it (and a load would give int8 where the IR holds bool)
        return "block_ptr", dims
    return "pointer", None


@triton_lowering(ops.load)
def _load(ctx: Any, node: Node) -> str:
    style, dims = _box(ctx, node)
    eviction = _eviction(ctx, node)
    if style == "tensor_descriptor":
        descriptor = _descriptor(ctx, node, dims)
        ctx.descriptor_loads.add(node.output.id)
        return f"{descriptor}.load([{', '.join(d.offset for d in dims)}])"
    if style == "block_ptr":
        pointer, checks = _block_pointer(ctx, node, dims)
        padding = ', padding_option="zero"' if checks else ""
        return f"tl.load({pointer}{checks}{padding}{eviction})"
    pointer, mask, _ = pointer_access(ctx, node)
    if mask is None:
        return f"tl.load({pointer}{eviction})"
    dtype = node.attrs["tensor"].dtype
    if dtype in _FP8_BITS:
        # Triton cannot cast the `other` fill value to fp8: load the bytes and bitcast them
        bits = _FP8_BITS[dtype]
        raw = f"tl.load(({pointer}).to(tl.pointer_type({bits})), {mask}, other=0{eviction})"
        return f"{raw}.to({ctx.tl(dtype)}, bitcast=True)"
    return f"tl.load({pointer}, {mask}, other=0{eviction})"


_FP8_BITS = {
    getattr(torch, name): "tl.uint8"
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(torch, name)
}


@triton_lowering(ops.store)
def _store(ctx: Any, node: Node) -> str:
    value = ctx.expr(node.inputs[node.attrs["value"]])
    style, dims = _box(ctx, node)
    if style == "tensor_descriptor":
        descriptor = _descriptor(ctx, node, dims)
        return f"{descriptor}.store([{', '.join(d.offset for d in dims)}], {value})"
    if style == "block_ptr":
        pointer, checks = _block_pointer(ctx, node, dims)
        return f"tl.store({pointer}, {value}{checks})"
    pointer, mask, _ = pointer_access(ctx, node)
    if mask is None:
        return f"tl.store({pointer}, {value})"
    return f"tl.store({pointer}, {value}, {mask})"


_ATOMICS = {
    "add": "tl.atomic_add",
    "xchg": "tl.atomic_xchg",
    "max": "tl.atomic_max",
    "min": "tl.atomic_min",
    "and": "tl.atomic_and",
    "or": "tl.atomic_or",
    "xor": "tl.atomic_xor",
}


@triton_lowering(ops.atomic)
def _atomic(ctx: Any, node: Node) -> str:
    kind = node.attrs["kind"]
    sem = node.attrs.get("sem", "relaxed")
    value = ctx.expr(node.inputs[node.attrs["value"]])
    pointer, mask, offset = pointer_access(ctx, node)
    if kind == "cas":
        expected = ctx.expr(node.inputs[node.attrs["expected"]])
        if mask is not None:
            # tl.atomic_cas has no mask: masked lanes compare-and-swap a value with itself at
            # the tensor's first element, which changes nothing
            base = ctx.tensor_param(node.attrs["tensor"].index)
            mask_name = ctx.assign(mask, "cas_mask")
            value = ctx.assign(f"tl.where({mask_name}, {value}, {expected})", "desired")
            pointer = f"{base} + tl.where({mask_name}, {offset}, 0)"
        return f'tl.atomic_cas({pointer}, {expected}, {value}, sem="{sem}")'
    if kind not in _ATOMICS:
        raise ctx.unsupported(f"hl.atomic_{kind}")
    dtype = node.output.dtype
    refusal = _atomic_refusal(kind, dtype, ctx.target.interpret)
    if refusal is not None:
        name = str(dtype).removeprefix("torch.")
        raise ctx.unsupported(f"hl.atomic_{kind} on a {name} tensor ({refusal})")
    masked = f", mask={mask}" if mask is not None else ""
    if kind == "xchg" and dtype.is_floating_point:
        # an exchange only moves bits: Triton's interpreter exchanges integers only
        bits = _SAME_WIDTH_INT[dtype]
        pointer = f"({pointer}).to(tl.pointer_type({bits}))"
        value = f"({value}).to({bits}, bitcast=True)"
        old = f'tl.atomic_xchg({pointer}, {value}{masked}, sem="{sem}")'
        return f"({old}).to({ctx.tl(dtype)}, bitcast=True)"
    return f'{_ATOMICS[kind]}({pointer}, {value}{masked}, sem="{sem}")'


_SAME_WIDTH_INT = {torch.float32: "tl.int32", torch.float64: "tl.int64"}


def _atomic_refusal(kind: str, dtype: torch.dtype, interpret: bool) -> str | None:
    """Why Triton has no atomic ``kind`` on ``dtype`` (None when it has): its read-modify-write
    atomics take 32- and 64-bit values, plus float16/bfloat16 for add; its interpreter has no
    bfloat16 add."""
    if dtype == torch.bool or dtype.itemsize < 2 or dtype == torch.int16:
        return "Triton's atomics take 32- and 64-bit values"
    if dtype in (torch.float16, torch.bfloat16):
        if kind != "add":
            return "Triton's atomics on 16-bit floats only add"
        if interpret and dtype == torch.bfloat16:
            return "Triton's interpreter has no bfloat16 atomic add"
    return None


__all__ = ["box_dims", "pointer_access"]
