"""Memory accesses: which refs get a BlockSpec, and the load / store / atomic lowering rules.

A tensor gets a BlockSpec (its ref is the block of the current program) when every access to it
in the loop has the same plain pattern over the top-level tiles: tiles of the grid starting at 0
with power-of-two block sizes, full slices starting at 0, constant indices, and `hl.grid`
indices. Every other tensor is passed whole and indexed with `pl.ds` slices (tiles of inner
loops, data-dependent offsets) or with integer index arrays (gathers and scatters, and bounded
slices whose padded window would start in the dim and run past its end). Out-of-bounds
lanes are masked in every case (`plgpu.load(..., mask=, other=0)`, `plgpu.store(..., mask=)`).
An access with a slice of length 0 (`x[tile, :]` of a dimension of size 0), or of a tensor with
no element, has every lane masked off: it touches no memory (a load is zeros, a store or atomic
does nothing), and its tensor gets no ref from it, since JAX cannot cut even a one-lane window
from an empty dim. Nor do the accesses in the body of an inner loop that runs no iteration
(`hl.tile(k)` with k == 0: the code generator emits no body).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING
from typing import Any
from typing import Iterator

import torch

import helion.language._ops as ops
from helion import exc
from helion.ir.core import Block
from helion.ir.core import Node
from helion.ir.core import TensorArg
from helion.ir.core import Value
from helion.ir.core import addresses_no_element
from helion.ir.core import runs_no_iteration
from helion_pallas.lowerings import pallas_lowering
from helion_pallas.writer import tuple_text

if TYPE_CHECKING:
    from helion_pallas.codegen import KernelCodegen


@dataclasses.dataclass
class RefPlan:
    """How one tensor is passed to one `pallas_call`."""

    arg: TensorArg
    param: str  # the kernel parameter accesses go through
    written: bool
    # per tensor dim: ("tile", loop dim) | ("full", length) | ("const", index) | ("grid", loop dim);
    # None when the whole array is passed
    block: tuple | None
    # a written tensor's value before the call, passed in and aliased to the output; False
    # where the call writes every element and reads none (`overwrites_every_element`)
    needs_initial: bool = True


def plan_refs(
    codegen: KernelCodegen, loop: Node
) -> tuple[dict[int, RefPlan], list[TensorArg], list[TensorArg]]:
    """Decide the refs of the `pallas_call` of top-level loop `loop`."""
    accesses: dict[int, list[Node]] = {}
    for node in _live_nodes(loop.regions[0]):
        if node.op.memory and not addresses_no_element(node):
            accesses.setdefault(node.attrs["tensor"].index, []).append(node)
    refs: dict[int, RefPlan] = {}
    reads: list[TensorArg] = []
    writes: list[TensorArg] = []
    for tensor in codegen.ir.tensor_args:
        nodes = accesses.get(tensor.index)
        if not nodes:
            continue
        written = any(n.op.memory in ("store", "atomic") for n in nodes)
        patterns = {block_pattern(codegen, loop, n) for n in nodes}
        block = patterns.pop() if len(patterns) == 1 else None
        name = codegen.tensor_names[tensor.index]
        param = f"{name}_out" if written else f"{name}_ref"
        initial = written and not overwrites_every_element(codegen, loop, tensor, nodes)
        refs[tensor.index] = RefPlan(tensor, param, written, block, initial)
        (writes if written else reads).append(tensor)
    return refs, reads, writes


def overwrites_every_element(
    codegen: KernelCodegen, loop: Node, tensor: TensorArg, nodes: list[Node]
) -> bool:
    """Whether the programs of `loop` write every element of `tensor` and none reads it: one
    unmasked store at the top of the loop body, whose tiles, `hl.grid` indices or `:` slices
    span each dim of the tensor from 0 to its size, and no load or atomic. Such a call needs no initial value.
    Passing one costs a copy of the tensor: the output is aliased to it, and XLA copies an
    aliased input it does not own (the torch tensor's memory) before the kernel writes."""
    if any(node.op is not ops.store for node in nodes):
        return False
    top_level = {id(node) for node in loop.regions[0].nodes}
    for node in nodes:
        if id(node) not in top_level or node.attrs.get("mask") is not None:
            continue
        pattern = block_pattern(codegen, loop, node)
        if pattern is not None and _spans(pattern, loop, tensor.shape):
            return True
    return False


def _spans(pattern: tuple, loop: Node, shape: tuple[int, ...]) -> bool:
    """Whether a block pattern's items reach every index of a tensor of `shape`."""
    if len(pattern) != len(shape):
        return False
    seen_dims = set()
    for item, size in zip(pattern, shape, strict=True):
        if item[0] in ("tile", "grid"):  # a tile of the loop, or an `hl.grid` index
            dim = item[1]
            begin, end = loop.attrs["begins"][dim], loop.attrs["ends"][dim]
            if dim in seen_dims or begin != 0 or end != size:
                return False
            seen_dims.add(dim)
        elif item[0] != "full" or item[1] != size:
            return False
    return True


def _live_nodes(block: Block) -> Iterator[Node]:
    """The nodes of `block` and its regions, less the bodies of inner loops that run no
    iteration (the code generator emits none of them)."""
    for node in block.nodes:
        yield node
        if node.op is ops.tile_loop and runs_no_iteration(node):
            continue
        for region in node.regions:
            yield from _live_nodes(region)


def block_pattern(codegen: KernelCodegen, loop: Node, node: Node) -> tuple | None:
    """The BlockSpec pattern of one access, or None when it needs the whole array."""
    if node.op.memory == "atomic":
        return None
    grid_tiles = {arg.id: dim for dim, arg in enumerate(loop.regions[0].args)}
    block_ids = loop.attrs["block_ids"]
    pattern: list[tuple] = []
    for item in node.attrs["items"]:
        kind = item[0]
        if kind == "none":
            continue
        if kind == "tile":
            dim = grid_tiles.get(node.inputs[item[1]].id)
            if dim is None or loop.attrs["is_grid"] or loop.attrs["begins"][dim] != 0:
                return None
            block_id = block_ids[dim]
            if codegen.padded[block_id] != codegen.block[block_id]:
                return None
            pattern.append(("tile", dim))
        elif kind == "full":
            if item[1] != 0:
                return None
            pattern.append(("full", item[2]))
        elif kind == "const":
            pattern.append(("const", item[1]))
        elif kind == "scalar":
            dim = _grid_index(node.inputs[item[1]], grid_tiles)
            if dim is None or not loop.attrs["is_grid"]:
                return None
            pattern.append(("grid", dim))
        else:
            return None
    return tuple(pattern)


def _grid_index(value: Any, grid_tiles: dict[int, int]) -> int | None:
    """The loop dimension of an `hl.grid` index (`tile_begin` of a grid tile), else None."""
    if not isinstance(value, Value) or value.producer is None:
        return None
    producer = value.producer
    if producer.op is not ops.TILE_ATTRS["begin"] or not producer.inputs:
        return None
    return grid_tiles.get(producer.inputs[0].id)


# ---------------------------------------------------------------------------------------------
# index construction


def _has_tensor_index(items: tuple) -> bool:
    return any(item[0] == "tensor" for item in items)


def _window_overruns(ctx: KernelCodegen, node: Node, shape: tuple) -> bool:
    """Whether a bounded slice that starts past 0 runs beyond the end of its dimension once
    padded to a power of two (`x[..., 12:24]` of a dim of 24 is a 16-lane window at 12).

    JAX rejects such a `pl.ds` window with a static start at trace time, so these accesses
    are indexed with integer arrays instead, whose out-of-bounds lanes the mask covers. (A
    window at 0 is never checked, and tile windows start at traced begins.) For accesses without
    index tensors."""
    sizes = node.attrs["tensor"].shape
    position = 0  # in the IR shape of the access
    dim = 0  # in the tensor
    for item in node.attrs["items"]:
        kind = item[0]
        if kind == "full" and item[1] and item[1] + ctx.dim_size(shape[position]) > sizes[dim]:
            return True
        position += kind in ("none", "tile", "full")
        dim += kind != "none"
    return False


def _indexed_with_arrays(ctx: KernelCodegen, node: Node, shape: tuple) -> bool:
    """Whether an access goes through integer index arrays rather than a slab."""
    return _has_tensor_index(node.attrs["items"]) or _window_overruns(ctx, node, shape)


def _sliced_dims(node: Node) -> list[Any]:
    """IR dimensions of the loaded/stored slab, without the `None` (new axis) items."""
    shape = node.output.shape if node.op is ops.load else _index_shape(node)
    dims = []
    position = 0
    for item in node.attrs["items"]:
        if item[0] == "none":
            position += 1
        elif item[0] in ("tile", "full"):
            dims.append(shape[position])
            position += 1
    return dims


def _index_shape(node: Node) -> tuple:
    """The IR shape an access covers (the stored value's shape for stores)."""
    if node.op is ops.load:
        return node.output.shape
    return node.inputs[node.attrs["value"]].shape


def _slice_indexer(ctx: KernelCodegen, node: Node, shape: tuple) -> str:
    """`pl.ds` / integer indexer of an access without index tensors (whole-array ref)."""
    # interpret mode's store wants every start of one dtype: a Python int start would be an
    # int64 next to the index-dtype tile begins and scalars
    dynamic = any(item[0] not in ("full", "none") for item in node.attrs["items"])
    parts = []
    position = 0  # position in the IR shape of the access
    for item in node.attrs["items"]:
        kind = item[0]
        if kind == "none":
            position += 1
        elif kind == "tile":
            tile = ctx.tile_of(node.inputs[item[1]])
            parts.append(f"pl.ds({tile.begin}, {tile.padded})")
            position += 1
        elif kind == "full":
            start = str(item[1])
            if dynamic:
                start = f"jnp.asarray({start}, dtype={ctx.dtype(ctx.index_dtype)})"
            parts.append(f"pl.ds({start}, {ctx.dim_size(shape[position])})")
            position += 1
        elif kind == "const":
            # an array, not a Python int: interpret mode's masked accesses want shaped indices
            parts.append(f"jnp.asarray({item[1]}, dtype={ctx.dtype(ctx.index_dtype)})")
        elif kind == "scalar":
            parts.append(ctx.index(node.inputs[item[1]]))
    return ", ".join(parts)


def _gather_indices(ctx: KernelCodegen, node: Node, shape: tuple) -> list[str]:
    """One integer index array per tensor dim, each broadcast to the padded access shape."""
    items = node.attrs["items"]
    padded = ctx.shape(shape)
    rank = len(padded)
    tensor_shapes = [node.inputs[i[1]].shape for i in items if i[0] == "tensor"]
    tensor_rank = len(ops.broadcast_shapes(*tensor_shapes)) if tensor_shapes else 0
    positions: list[int] = []
    position = 0
    tensor_position = None
    for item in items:
        if item[0] in ("tile", "full", "none"):
            positions.append(position)
            position += 1
        elif item[0] == "tensor":
            if tensor_position is None:
                tensor_position = position
                position += tensor_rank
            positions.append(tensor_position)
        else:
            positions.append(-1)
    target = tuple_text([str(d) for d in padded])
    index_dtype = ctx.dtype(ctx.index_dtype)
    indices = []
    for item, axis in zip(items, positions, strict=True):
        kind = item[0]
        if kind == "none":
            continue
        if kind == "tile":
            tile = ctx.tile_of(node.inputs[item[1]])
            vector = f"{tile.begin} + jnp.arange({tile.padded}, dtype={index_dtype})"
            text = f"({vector})" if rank <= 1 else ctx.at_axis(f"({vector})", axis, rank)
        elif kind == "full":
            size = padded[axis]
            vector = f"jnp.arange({size}, dtype={index_dtype})" + (
                f" + {item[1]}" if item[1] else ""
            )
            text = f"({vector})" if rank <= 1 else ctx.at_axis(f"({vector})", axis, rank)
        elif kind == "const":
            text = f"jnp.asarray({item[1]}, dtype={index_dtype})"
        elif kind == "scalar":
            text = ctx.index(node.inputs[item[1]])
        else:
            value = node.inputs[item[1]]
            text = ctx.index(value)
            lead = tensor_rank - len(value.shape)
            before = axis + lead
            after = rank - axis - tensor_rank
            if before or after:
                text = f"{text}[{', '.join(['None'] * before + ['...'] + ['None'] * after)}]"
        indices.append(f"jnp.broadcast_to({text}, {target})")
    return indices


def _mask_in(
    ctx: KernelCodegen, node: Node, shape: tuple, extra: str | None, *, full: bool = False
) -> str | None:
    """In-bounds mask of an access of IR shape `shape` (and the user's extra mask); broadcastable
    to the access, or of its exact padded shape when `full`."""
    # each dimension is masked by the tile indexing it, which its block size alone does not
    # name when that is shared by several tiles in scope
    bounds = ctx.shape_mask(shape, ctx.tile_origins.of_access(node))
    parts = [p for p in (bounds, extra) if p]
    if not parts:
        return None
    mask = " & ".join(parts)
    if full:
        return f"jnp.broadcast_to({mask}, {ctx.shape_text(shape)})"
    return mask


def _extra_mask(ctx: KernelCodegen, node: Node) -> str | None:
    index = node.attrs.get("mask")
    if index is None:
        return None
    return ctx.typed(node.inputs[index], torch.bool)


def _squeeze_none(ctx: KernelCodegen, node: Node, text: str, shape: tuple) -> str:
    """Reshape an IR-shaped array (with `None` items as size-1 dims) to the slab's shape."""
    if not any(item[0] == "none" for item in node.attrs["items"]):
        return text
    return f"{text}.reshape({tuple_text([str(ctx.dim_size(d)) for d in _sliced_dims(node)])})"


def _unsqueeze_none(ctx: KernelCodegen, node: Node, text: str, shape: tuple) -> str:
    if not any(item[0] == "none" for item in node.attrs["items"]):
        return text
    return f"{text}.reshape({ctx.shape_text(shape)})"


def _slab_mask(ctx: KernelCodegen, node: Node, shape: tuple, extra: str | None) -> str | None:
    """Mask of a slab access (BlockSpec or `pl.ds`), in the slab's shape."""
    has_none = any(item[0] == "none" for item in node.attrs["items"])
    mask = _mask_in(ctx, node, shape, extra, full=has_none)
    if mask is None:
        return None
    return _squeeze_none(ctx, node, mask, shape)


# ---------------------------------------------------------------------------------------------
# rules


def _slab_ref(ctx: KernelCodegen, node: Node, plan: RefPlan, shape: tuple) -> tuple[str, str]:
    """(ref view for plgpu.load/store, plain indexing expression) of a slab access."""
    if plan.block is not None:
        return plan.param, f"{plan.param}[...]"
    indexer = _slice_indexer(ctx, node, shape)
    if not indexer:
        return plan.param, f"{plan.param}[...]"
    return f"{plan.param}.at[{indexer}]", f"{plan.param}[{indexer}]"


def _load_expr(
    ctx: KernelCodegen, view: str, plain: str, mask: str | None, dtype: torch.dtype
) -> str:
    """A load through `plgpu.load` (one code path for interpret mode and the Triton lowering)."""
    # masked-off lanes read 0 of the tensor's own dtype: a bare 0 turns a bool load into int64
    zero = "False" if dtype == torch.bool else "0"
    if ctx.options.target == "tpu":
        # Mosaic TPU has no masked loads; out-of-bounds lanes of a block hold garbage.
        return plain if mask is None else f"jnp.where({mask}, {plain}, {zero})"
    if mask is None:
        return f"plgpu.load({view})"
    return f"plgpu.load({view}, mask={mask}, other={zero})"


def _store_stmt(ctx: KernelCodegen, view: str, plain: str, value: str, mask: str | None) -> str:
    if ctx.options.target == "tpu":
        if mask is None:
            return f"{plain} = {value}"
        # Mosaic TPU drops the out-of-bounds part of a block store; keep the old lanes in bounds.
        return f"{plain} = jnp.where({mask}, {value}, {plain})"
    if mask is None:
        return f"plgpu.store({view}, {value})"
    return f"plgpu.store({view}, {value}, mask={mask})"


def _no_elements(ctx: KernelCodegen, node: Node) -> str:
    """What a load or atomic of no elements gives: every lane masked off, so `other` (0)."""
    ctx.mark_zero_padded(node.output)
    return f"jnp.zeros({ctx.shape_text(node.output.shape)}, dtype={ctx.dtype(node.output.dtype)})"


@pallas_lowering(ops.load)
def _load(ctx: KernelCodegen, node: Node) -> str:
    if addresses_no_element(node):
        return _no_elements(ctx, node)
    plan = ctx.ref_plan(node.attrs["tensor"])
    shape = node.output.shape
    extra = _extra_mask(ctx, node)
    ctx.mark_zero_padded(node.output)
    if _indexed_with_arrays(ctx, node, shape):
        indices = ", ".join(_gather_indices(ctx, node, shape))
        mask = _mask_in(ctx, node, shape, extra)
        view, plain = f"{plan.param}.at[{indices}]", f"{plan.param}[{indices}]"
        return _load_expr(ctx, view, plain, mask, node.output.dtype)
    view, plain = _slab_ref(ctx, node, plan, shape)
    mask = _slab_mask(ctx, node, shape, extra)
    load = _load_expr(ctx, view, plain, mask, node.output.dtype)
    return _unsqueeze_none(ctx, node, load, shape)


@pallas_lowering(ops.store)
def _store(ctx: KernelCodegen, node: Node) -> None:
    if addresses_no_element(node):
        name = node.attrs["tensor"].name
        ctx.emit(f"# store to {name}: no element addressed, nothing to write{ctx.origin(node)}")
        return
    plan = ctx.ref_plan(node.attrs["tensor"])
    value_operand = node.inputs[node.attrs["value"]]
    shape = value_operand.shape
    value = ctx.typed(value_operand, node.attrs["tensor"].dtype)
    extra = _extra_mask(ctx, node)
    origin = ctx.origin(node)
    if _indexed_with_arrays(ctx, node, shape):
        indices = _gather_indices(ctx, node, shape)
        mask = _mask_in(ctx, node, shape, extra)
        value = f"jnp.broadcast_to({value}, {ctx.shape_text(shape)})"
        if mask is not None:
            keep = ctx.fresh("keep")
            ctx.emit(f"{keep} = {_mask_in(ctx, node, shape, extra, full=True)}")
            # masked-off lanes point past the end, so that a scatter in interpret mode drops them
            sizes = node.attrs["tensor"].shape
            indices = [
                f"jnp.where({keep}, {idx}, {size})"
                for idx, size in zip(indices, sizes, strict=True)
            ]
            mask = keep
        joined = ", ".join(indices)
        ctx.emit(
            _store_stmt(ctx, f"{plan.param}.at[{joined}]", f"{plan.param}[{joined}]", value, mask)
            + origin
        )
        return
    view, plain = _slab_ref(ctx, node, plan, shape)
    mask = _slab_mask(ctx, node, shape, extra)
    value = _squeeze_none(ctx, node, value, shape)
    ctx.emit(_store_stmt(ctx, view, plain, value, mask) + origin)


_GPU_ATOMICS = {
    "add": "plgpu.atomic_add",
    "max": "plgpu.atomic_max",
    "min": "plgpu.atomic_min",
    "and": "plgpu.atomic_and",
    "or": "plgpu.atomic_or",
    "xor": "plgpu.atomic_xor",
    "xchg": "plgpu.atomic_xchg",
}


@pallas_lowering(ops.atomic)
def _atomic(ctx: KernelCodegen, node: Node) -> str:
    if addresses_no_element(node):
        return _no_elements(ctx, node)
    plan = ctx.ref_plan(node.attrs["tensor"])
    tensor = node.attrs["tensor"]
    kind = node.attrs["kind"]
    shape = node.output.shape
    value = f"jnp.broadcast_to({ctx.typed(node.inputs[node.attrs['value']], tensor.dtype)}, {ctx.shape_text(shape)})"
    indices = _gather_indices(ctx, node, shape)
    mask = _mask_in(ctx, node, shape, _extra_mask(ctx, node), full=True)
    if ctx.options.interpret:
        expected = "None"
        if kind == "cas":
            expected = f"jnp.broadcast_to({ctx.typed(node.inputs[node.attrs['expected']], tensor.dtype)}, {ctx.shape_text(shape)})"
        return (
            f"hp.interpret_atomic({plan.param}, {kind!r}, {tuple_text(indices)}, {value}, "
            f"mask={mask or 'None'}, expected={expected})"
        )
    function = _GPU_ATOMICS.get(kind)
    if function is None:
        raise exc.BackendUnsupported(f"hl.atomic_{kind} on tensors", "pallas", loc=node.loc)
    if shape:
        # a tensor of Pallas GPU atomics has no effect (see hp.gpu_atomic_by_lane): one per lane
        return (
            f"hp.gpu_atomic_by_lane({function}, {plan.param}, {tuple_text(indices)}, {value}, "
            f"mask={mask or 'None'})"
        )
    mask_text = f", mask={mask}" if mask else ""
    return f"{function}({plan.param}, {tuple_text(indices)}, {value}{mask_text})"


def check_memory(node: Node, target: str) -> str | None:
    """Why this memory op cannot be compiled for `target`, or None."""
    if node.op is ops.atomic:
        if target == "tpu":
            return "atomics on TPU"
        if target == "gpu" and node.attrs["kind"] not in _GPU_ATOMICS:
            return f"hl.atomic_{node.attrs['kind']} on GPU (Pallas' Triton atomic_cas takes scalars only)"
    return None
