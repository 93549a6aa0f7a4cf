"""Loads, stores and atomics of SIMT programs.

A memory op moves one fragment. Its elements are grouped into *chunks*: runs of ``width``
elements that are contiguous both in the thread's registers (the innermost axis is the first
fragment mode) and in global memory (the tensor dimension on that axis has stride 1). A chunk
is moved by ``cute.autovec_copy`` between two small views, which becomes one vector instruction
(128 bits for a width of 16 bytes) because the base offset is declared divisible by the width.
Chunks whose elements fall outside the tensor are skipped by one predicate per chunk; that is
only correct when a chunk is entirely in or out, which :func:`op_width` guarantees.

Everything static about a chunk (its register offset, the static part of its memory offset,
its local coordinates along masked axes) is written to module-level tables, so the generated
loop over chunks stays a few lines long.

An access that addresses no element (:func:`helion.ir.core.addresses_no_element`: a `:` slice of length 0 such as
``x[tile, :]`` of a dimension of size 0, or a tensor with no element) emits no memory
instruction: a load is a fragment of zeros, a store writes nothing and an atomic returns zeros.
Padding the empty dimension to its one register lane and copying would touch memory that does
not exist.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import sympy
import torch

from helion import exc
from helion.ir.core import KernelIR
from helion.ir.core import Node
from helion.ir.core import addresses_no_element
from helion_cute.layout import Axis
from helion_cute.source import cutlass_type
from helion_cute.source import element_bytes
from helion_cute.source import literal
from helion_cute.source import memory_type
from helion_cute.source import register_data
from helion_cute.source import register_element
from helion_cute.values import CVal

MAX_VECTOR_BYTES = 16


def _pow2_divisor(*values: int) -> int:
    """Largest power of two dividing every nonzero value (64 when all are zero)."""
    result = 64
    for value in values:
        value = abs(int(value))
        if value == 0:
            continue
        result = min(result, value & -value)
    return result


@dataclasses.dataclass
class Dim:
    """How one tensor dimension is indexed by a memory op.

    kind: ``"affine"`` (a tile or a slice: base + local coordinate along ``axis``; ``axis`` is
    None for a slice of length 1), ``"scalar"`` (one index for the whole op) or ``"gather"`` (an
    index fragment).
    """

    kind: str
    stride: int
    axis: sympy.Expr | None = None
    base: str = "0"
    limit: str | None = None
    alignment: int = 1
    index: Any = None


def _loop_bounds(ir: KernelIR, block_id: int) -> tuple[Any, Any]:
    for loop in ir.loops:
        if loop.node is not None and block_id in loop.block_ids:
            position = loop.block_ids.index(block_id)
            return loop.node.attrs["begins"][position], loop.node.attrs["ends"][position]
    return None, None


def _reduction_symbol(ir: KernelIR, length: int) -> sympy.Expr:
    for info in ir.block_sizes:
        # the block of a length-0 slice has its size hint clamped to 1 (block sizes are positive)
        if info.kind == "reduction" and (info.empty if length == 0 else info.size_hint == length):
            return info.symbol
    raise exc.InternalError(f"cute codegen: no reduction dim of size {length}")


def _describe_access(node: Node) -> str:
    return f"{node.op.name} of {node.attrs['tensor'].name}"


def tile_alignment(ir: KernelIR, block_id: int, block_size: int) -> int:
    """Power of two that divides every tile start and every valid-count of a tile dimension."""
    begin, end = _loop_bounds(ir, block_id)
    if not isinstance(begin, int):
        return 1
    if isinstance(end, int):
        return _pow2_divisor(begin, block_size, end - begin)
    return 1


def static_dims(ir: KernelIR, node: Node, block_sizes: dict[int, int]) -> list[Dim]:
    """The dims of a memory op from the IR alone (no code): enough to choose vector widths."""
    tensor = node.attrs["tensor"]
    dims = []
    position = 0
    for item in node.attrs["items"]:
        if item[0] == "none":
            continue
        stride = int(tensor.stride[position])
        position += 1
        kind = item[0]
        if kind == "tile":
            block_id = item[2]
            info = ir.block(block_id)
            size = block_sizes[block_id]
            dims.append(
                Dim("affine", stride, info.symbol, alignment=tile_alignment(ir, block_id, size))
            )
        elif kind == "full":
            start, length = item[1], item[2]
            if length == 1:
                dims.append(Dim("scalar", stride, base=str(start), alignment=_pow2_divisor(start)))
            else:
                dims.append(
                    Dim(
                        "affine",
                        stride,
                        _reduction_symbol(ir, length),
                        base=str(start),
                        alignment=_pow2_divisor(start, length),
                    )
                )
        elif kind == "const":
            dims.append(Dim("scalar", stride, base=str(item[1]), alignment=_pow2_divisor(item[1])))
        elif kind == "scalar":
            dims.append(Dim("scalar", stride))
        elif kind == "tensor":
            dims.append(Dim("gather", stride))
        else:
            raise exc.BackendUnsupported(f"the index item {kind!r}", "cute", loc=node.loc)
    return dims


def potential_width(
    dims: list[Dim], inner: sympy.Expr, dtype: torch.dtype, mask_axes: frozenset, aligned: bool
) -> int:
    """Widest chunk (elements) the op can use along axis ``inner``, from alignment alone.

    The dim carrying ``inner`` must have stride 1 and tile starts / valid counts divisible by
    the width (so a chunk is entirely in or out of bounds); every other stride must be divisible
    too (so each chunk starts on a vector boundary), and no extra mask may vary along ``inner``.
    """
    if not aligned or inner in mask_axes:
        return 1
    carriers = [d for d in dims if d.kind == "affine" and d.axis == inner]
    if len(carriers) != 1 or carriers[0].stride != 1:
        return 1
    width = min(max(1, MAX_VECTOR_BYTES // element_bytes(dtype)), carriers[0].alignment)
    for dim in dims:
        if dim is not carriers[0] and dim.stride:
            width = min(width, _pow2_divisor(dim.stride))
    return max(1, width)


def layout_vector_width(emitter: Any, axes: list[Axis]) -> int:
    """The vector width of a program's layout: the widest that some load/store of it uses."""
    if not axes or not axes[-1].eligible:
        return 1
    inner = axes[-1].key
    best = 1
    module = emitter.module
    for node in emitter.loop.regions[0].walk():
        if node.op.memory not in ("load", "store") or addresses_no_element(node):
            continue
        dims = static_dims(module.ir, node, module.options.block_sizes)
        mask_axes = _mask_axes(node)
        width = potential_width(dims, inner, node.attrs["tensor"].dtype, mask_axes, module.aligned)
        wanted = module.options.vector_width(module.memory_position.get(id(node), 0))
        if wanted:
            width = min(width, wanted)
        best = max(best, width)
    return best


def _mask_axes(node: Node) -> frozenset:
    index = node.attrs.get("mask")
    if index is None:
        return frozenset()
    mask = node.inputs[index]
    shape = getattr(getattr(mask, "type", None), "shape", ())
    return frozenset(d for d in shape if d != 1)  # compared with block symbols only


def _dims(ctx: Any, node: Node, args: list) -> list[Dim]:
    """The dims of a memory op with their code (bases, limits, index fragments)."""
    dims = static_dims(ctx.ir, node, ctx.options.block_sizes)
    position = 0
    for item in node.attrs["items"]:
        if item[0] == "none":
            continue
        dim = dims[position]
        position += 1
        kind = item[0]
        if kind == "tile":
            tile = args[item[1]].tile
            dim.base = tile.begin
            dim.limit = ctx.axis_limit(dim.axis)
        elif kind == "full" and dim.kind == "affine":
            dim.limit = ctx.axis_limit(dim.axis)
        elif kind == "scalar":
            dim.base = ctx.scalar_code(node.inputs[item[1]])
        elif kind == "tensor":
            dim.index = args[item[1]]
    return dims


def op_width(ctx: Any, node: Node, dims: list[Dim], axes: frozenset, mask: Any) -> int:
    layout = ctx.layout
    inner = layout.axes[-1]
    if not inner.eligible or inner.key not in axes:
        return 1
    mask_axes = mask.axes if isinstance(mask, CVal) else frozenset()
    width = potential_width(
        dims, inner.key, node.attrs["tensor"].dtype, mask_axes, ctx.module.aligned
    )
    wanted = ctx.options.vector_width(ctx.module.memory_position.get(id(node), 0))
    if wanted:
        width = min(width, wanted)
    width = min(width, inner.spt)
    return max(1, width)


def register_bytes(ctx: Any, axes: frozenset, dtype: torch.dtype) -> int:
    """Bytes a thread's register tensor of a fragment over ``axes`` takes."""
    return math.prod(ctx.shape(axes)) * element_bytes(dtype)


class Chunks:
    """The chunks of one memory op and the generated-code pieces that address them."""

    def __init__(
        self, ctx: Any, node: Node, dims: list[Dim], axes: frozenset, mask: Any, width: int
    ) -> None:
        self.ctx = ctx
        layout = ctx.layout
        elements = layout.elements(axes)
        inner = layout.axes[-1].key
        self.width = width
        if width > 1:
            first = [e for e in elements if e.get(inner, 0) % width == 0]
        else:
            first = elements
        self.count = len(first)
        self.register = [layout.flat_index(axes, e) for e in first]
        self.static_offset = []
        for e in first:
            offset = 0
            for dim in dims:
                if dim.kind == "affine" and dim.axis is not None and dim.axis in axes:
                    offset += dim.stride * layout.axis(dim.axis).offset(e[dim.axis])
            self.static_offset.append(offset)
        # dynamic base: everything that does not depend on the chunk
        terms = []
        for dim in dims:
            if dim.kind == "affine":
                parts = [dim.base] if dim.base != "0" else []
                if dim.axis is not None and dim.axis in axes:
                    base = ctx.thread_base(dim.axis)
                    if base != "0":
                        parts.append(base)
                if parts and dim.stride:
                    terms.append(
                        f"({' + '.join(parts)}) * {dim.stride}"
                        if dim.stride != 1
                        else f"({' + '.join(parts)})"
                    )
            elif dim.kind == "scalar" and dim.base != "0" and dim.stride:
                terms.append(f"({dim.base}) * {dim.stride}")
        self.base_terms = terms
        # per-chunk predicates and gather terms
        self.pred_parts: list[str] = []
        for dim in dims:
            if (
                dim.kind == "affine"
                and dim.axis is not None
                and dim.axis in axes
                and dim.limit is not None
            ):
                axis = layout.axis(dim.axis)
                table = ctx.table([axis.offset(e[dim.axis]) for e in first])
                base = ctx.thread_base(dim.axis)
                local = f"{table}[_c]" if base == "0" else f"{base} + {table}[_c]"
                self.pred_parts.append(f"{local} < {dim.limit}")
        # axes the op iterates over but no affine dim bounds (the index fragment of a gather or a
        # scatter): their padded elements must not touch memory either
        bounded = {d.axis for d in dims if d.kind == "affine" and d.axis is not None}
        for key in sorted(axes - bounded, key=lambda k: layout.index[k]):
            limit = ctx.axis_limit(key)
            if limit is None:
                continue
            axis = layout.axis(key)
            table = ctx.table([axis.offset(e[key]) for e in first])
            base = ctx.thread_base(key)
            local = f"{table}[_c]" if base == "0" else f"{base} + {table}[_c]"
            self.pred_parts.append(f"{local} < {limit}")
        self.gather_parts: list[str] = []
        for dim in dims:
            if dim.kind != "gather":
                continue
            index = dim.index
            if isinstance(index, CVal) and index.is_frag:
                regs = ctx.fresh("ix")
                ctx.line(
                    f"{regs} = cute.make_rmem_tensor({ctx.shape(index.axes)!r}, {memory_type(index.dtype)})"
                )
                ctx.line(f"{regs}.store({register_data(index.expr, index.dtype)})")
                table = ctx.table([layout.flat_index(index.axes, e) for e in first])
                self.gather_parts.append(f"{ctx.index_type}({regs}[{table}[_c]]) * {dim.stride}")
            else:
                value = index.expr if isinstance(index, CVal) else str(int(index))
                self.base_terms.append(f"{ctx.index_type}({value}) * {dim.stride}")
        if isinstance(mask, CVal):
            if mask.is_frag:
                regs = ctx.fresh("mk")
                ctx.line(
                    f"{regs} = cute.make_rmem_tensor({ctx.shape(mask.axes)!r}, {memory_type(torch.bool)})"
                )
                ctx.line(f"{regs}.store({register_data(mask.expr, torch.bool)})")
                table = ctx.table([layout.flat_index(mask.axes, e) for e in first])
                self.pred_parts.append(register_element(f"{regs}[{table}[_c]]", torch.bool))
            else:
                self.pred_parts.append(mask.expr)
        elif mask is not None and not mask:
            self.pred_parts.append("False")

    def emit_base(self) -> str:
        ctx = self.ctx
        name = ctx.fresh("off")
        expr = " + ".join(self.base_terms) if self.base_terms else "0"
        ctx.line(f"{name} = {ctx.index_type}({expr})")
        if self.width > 1:
            ctx.line(f"{name} = cute.assume({name}, divby={self.width})")
        return name

    def offset(self, base: str) -> str:
        table = self.ctx.table(self.static_offset)
        parts = [base, f"{table}[_c]", *self.gather_parts]
        return " + ".join(parts)

    def predicate(self, extra: list[str] | None = None) -> str | None:
        parts = self.pred_parts + (extra or [])
        if not parts:
            return None
        return " and ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]


def _eviction(ctx: Any, node: Node) -> str:
    position = ctx.module.load_position.get(id(node))
    policy = ctx.options.eviction_policy(position) if position is not None else ""
    # the copy atoms take cute.nvgpu's Python enum (it has ``_to_ir``); ``cute.CacheEvictionPriority``
    # is the raw MLIR dialect enum and makes cute.compile fail
    if policy == "first":
        return ", l1c_evict_priority=cute.nvgpu.CacheEvictionPriority.EVICT_FIRST"
    if policy == "last":
        return ", l1c_evict_priority=cute.nvgpu.CacheEvictionPriority.EVICT_LAST"
    return ""


def _scalar_address(ctx: Any, node: Node, dims: list[Dim]) -> str:
    terms = []
    for dim in dims:
        if dim.kind == "affine":
            if dim.axis is not None:
                raise exc.InternalError("cute codegen: a scalar access with a tiled dimension")
            terms.append(f"({dim.base}) * {dim.stride}")
        elif dim.kind == "scalar":
            terms.append(f"({dim.base}) * {dim.stride}")
        else:
            value = dim.index.expr if isinstance(dim.index, CVal) else str(dim.index)
            terms.append(f"{ctx.index_type}({value}) * {dim.stride}")
    expr = " + ".join(terms) if terms else "0"
    return f"{ctx.ptr(node.attrs['tensor'])} + {ctx.index_type}({expr})"


def emit_load(ctx: Any, node: Node, args: list) -> CVal:
    if id(node) in ctx.staged:
        return emit_staged_load(ctx, node, args)
    tensor = node.attrs["tensor"]
    dtype = tensor.dtype
    out_axes = ctx.axes_of(node.output)
    if addresses_no_element(node):
        ctx.line(f"# {_describe_access(node)}: no element, reads nothing")
        return _zeros(ctx, out_axes, dtype)
    mask = args[node.attrs["mask"]] if node.attrs.get("mask") is not None else None
    dims = _dims(ctx, node, args)
    for dim in dims:
        if dim.kind == "gather" and isinstance(dim.index, CVal) and not dim.index.axes <= out_axes:
            raise exc.BackendUnsupported(
                "an index tensor that does not broadcast to the loaded tile", "cute", loc=node.loc
            )
    if not out_axes:
        name = ctx.fresh("v")
        address = _scalar_address(ctx, node, dims)
        load = f"cute.make_tensor({address}, cute.make_layout(1))[0]"
        if dtype == torch.bool:
            load = f"cutlass.Boolean({load})"  # the byte in memory is a Uint8 (memory_type)
        if mask is None:
            ctx.line(f"{name} = {load}")
        else:
            ctx.line(f"{name} = {literal(0, dtype)}")
            ctx.line(f"if {ctx.scalar_code(node.inputs[node.attrs['mask']])}:")
            ctx.line(f"    {name} = {load}")
        return CVal(name, "scalar", dtype)
    width = op_width(ctx, node, dims, out_axes, mask)
    chunks = Chunks(ctx, node, dims, out_axes, mask, width)
    regs = ctx.fresh("ld")
    shape = ctx.shape(out_axes)
    ctx.line(f"{regs} = cute.make_rmem_tensor({shape!r}, {cutlass_type(dtype)})")
    predicate = chunks.predicate()
    if predicate is not None:
        ctx.line(f"{regs}.fill(0)")
    base = chunks.emit_base()
    registers = ctx.table(chunks.register)
    copy = (
        f"cute.autovec_copy(cute.make_tensor({ctx.ptr(tensor)} + ({chunks.offset(base)}), cute.make_layout({width})), "
        f"cute.make_tensor({regs}.iterator + {registers}[_c], cute.make_layout({width})){_eviction(ctx, node)})"
    )
    with ctx.element_loop("_c", chunks.count, register_bytes(ctx, out_axes, dtype)):
        if predicate is not None:
            ctx.line(f"if {predicate}:")
            ctx.line(f"    {copy}")
        else:
            ctx.line(copy)
    name = ctx.fresh("v")
    ctx.line(f"{name} = {regs}.load()")
    return CVal(name, "frag", dtype, out_axes)


def _zeros(ctx: Any, axes: frozenset, dtype: torch.dtype) -> CVal:
    """What an access of no element gives: zeros (a masked-off lane reads 0 elsewhere too)."""
    if not axes:
        return ctx.define("v", literal(0, dtype), kind="scalar", dtype=dtype)
    return ctx.define("v", ctx.full_frag(0, axes, dtype), kind="frag", dtype=dtype, axes=axes)


def _ownership(ctx: Any, axes: frozenset) -> list[str]:
    """Predicates that pick one thread among those holding copies of a value over ``axes``."""
    parts = []
    for i, axis in enumerate(ctx.layout.axes):
        if axis.threads > 1 and axis.key not in axes:
            parts.append(f"tb{i} == 0")
    layout = ctx.layout
    if layout.replicated_lanes > 1:
        covered = 32 // layout.replicated_lanes
        parts.append(f"lane < {covered}")
    if layout.replicated_warps > 1:
        covered = layout.num_threads // 32 // layout.replicated_warps
        parts.append(f"warp < {covered}")
    return parts


def emit_store(ctx: Any, node: Node, args: list) -> None:
    if addresses_no_element(node):
        ctx.line(f"# {_describe_access(node)}: no element, writes nothing")
        return
    tensor = node.attrs["tensor"]
    dtype = tensor.dtype
    value = args[node.attrs["value"]]
    mask = args[node.attrs["mask"]] if node.attrs.get("mask") is not None else None
    store_axes = (
        ctx.axes_of(node.inputs[node.attrs["value"]]) if isinstance(value, CVal) else frozenset()
    )
    dims = _dims(ctx, node, args)
    item_axes = frozenset(d.axis for d in dims if d.kind == "affine" and d.axis is not None)
    for dim in dims:
        if dim.kind == "gather" and isinstance(dim.index, CVal):
            item_axes = item_axes | dim.index.axes
    axes = item_axes | store_axes
    own = _ownership(ctx, axes)
    if not axes:
        address = _scalar_address(ctx, node, dims)
        conditions = list(own)
        if mask is not None:
            conditions.append(ctx.scalar_code(node.inputs[node.attrs["mask"]]))
        stored = ctx.convert(value, dtype)
        if dtype == torch.bool:
            stored = f"cutlass.Uint8({stored})"  # a bool is a 0/1 byte in memory (memory_type)
        store = f"cute.make_tensor({address}, cute.make_layout(1))[0] = {stored}"
        if conditions:
            ctx.line(f"if {' and '.join(f'({c})' for c in conditions)}:")
            ctx.line(f"    {store}")
        else:
            ctx.line(store)
        return
    width = op_width(ctx, node, dims, axes, mask)
    chunks = Chunks(ctx, node, dims, axes, mask, width)
    regs = ctx.fresh("st")
    frag = ctx.full_frag(value, axes, dtype)
    if dtype == torch.bool:
        # a Boolean register fragment keeps True as the sign-extended byte 0xFF, and its i1
        # type cannot be copied to memory: store the 0/1 bytes of torch.bool as Uint8
        frag = f"{frag}.to(cutlass.Uint8)"
    ctx.line(f"{regs} = cute.make_rmem_tensor({ctx.shape(axes)!r}, {memory_type(dtype)})")
    ctx.line(f"{regs}.store({frag})")
    base = chunks.emit_base()
    registers = ctx.table(chunks.register)
    copy = (
        f"cute.autovec_copy(cute.make_tensor({regs}.iterator + {registers}[_c], cute.make_layout({width})), "
        f"cute.make_tensor({ctx.ptr(tensor)} + ({chunks.offset(base)}), cute.make_layout({width})))"
    )
    owner = None
    if own:
        owner = ctx.fresh("own")
        ctx.line(
            f"{owner} = {' and '.join(f'({p})' for p in own)}"
            if len(own) > 1
            else f"{owner} = {own[0]}"
        )
    predicate = chunks.predicate([owner] if owner else None)
    with ctx.element_loop("_c", chunks.count, register_bytes(ctx, axes, dtype)):
        if predicate is not None:
            ctx.line(f"if {predicate}:")
            ctx.line(f"    {copy}")
        else:
            ctx.line(copy)


_ATOMIC_FUNCTIONS = {
    "add": "cute.arch.atomic_add",
    "max": "cute.arch.atomic_max",
    "min": "cute.arch.atomic_min",
    "and": "cute.arch.atomic_and",
    "or": "cute.arch.atomic_or",
    "xor": "cute.arch.atomic_xor",
    "xchg": "cute.arch.atomic_exch",
}


def emit_atomic(ctx: Any, node: Node, args: list) -> CVal:
    tensor = node.attrs["tensor"]
    dtype = tensor.dtype
    kind = node.attrs["kind"]
    if kind == "cas":
        raise exc.BackendUnsupported("hl.atomic_cas", "cute", loc=node.loc)
    if dtype == torch.bool:
        raise exc.BackendUnsupported(f"atomic_{kind} on torch.bool", "cute", loc=node.loc)
    if node.attrs.get("mask") is not None:
        # the lane predicate below covers tile bounds only (a mask comes from hl.jagged_tile)
        raise exc.BackendUnsupported(
            "a masked atomic (inside hl.jagged_tile)", "cute", loc=node.loc
        )
    if kind in ("max", "min") and dtype.is_floating_point:
        if dtype != torch.float32:
            raise exc.BackendUnsupported(f"atomic_{kind} on {dtype}", "cute", loc=node.loc)
        function = f"cute.arch.atomic_f{kind}"
    else:
        function = _ATOMIC_FUNCTIONS[kind]
    sem = node.attrs.get("sem", "relaxed")
    value = args[node.attrs["value"]]
    out_axes = ctx.axes_of(node.output)
    if addresses_no_element(node):
        ctx.line(f"# {_describe_access(node)}: no element, updates nothing")
        return _zeros(ctx, out_axes, dtype)
    dims = _dims(ctx, node, args)
    own = _ownership(ctx, out_axes)
    old = ctx.fresh("old")
    shape = ctx.shape(out_axes)
    scalar_out = not out_axes
    if scalar_out:
        address = _scalar_address(ctx, node, dims)
        ctx.line(f"{old} = {literal(0, dtype)}")
        cond = " and ".join(f"({p})" for p in own) if own else "True"
        ctx.line(f"if {cond}:")
        ctx.line(
            f"    {old} = {function}({address}, {ctx.convert(value, dtype)}, sem={sem!r}, scope='gpu')"
        )
        return CVal(old, "scalar", dtype)
    chunks = Chunks(ctx, node, dims, out_axes, None, 1)
    vals = ctx.fresh("av")
    ctx.line(f"{vals} = cute.make_rmem_tensor({shape!r}, {cutlass_type(dtype)})")
    ctx.line(f"{vals}.store({ctx.full_frag(value, out_axes, dtype)})")
    ctx.line(f"{old} = cute.make_rmem_tensor({shape!r}, {cutlass_type(dtype)})")
    ctx.line(f"{old}.fill(0)")
    base = chunks.emit_base()
    registers = ctx.table(chunks.register)
    owner = None
    if own:
        owner = ctx.fresh("own")
        ctx.line(
            f"{owner} = {' and '.join(f'({p})' for p in own)}"
            if len(own) > 1
            else f"{owner} = {own[0]}"
        )
    predicate = chunks.predicate([owner] if owner else None)
    call = (
        f"{old}[{registers}[_c]] = {function}({ctx.ptr(tensor)} + ({chunks.offset(base)}), "
        f"{vals}[{registers}[_c]], sem={sem!r}, scope='gpu')"
    )
    with ctx.element_loop("_c", chunks.count, register_bytes(ctx, out_axes, dtype)):
        if predicate is not None:
            ctx.line(f"if {predicate}:")
            ctx.line(f"    {call}")
        else:
            ctx.line(call)
    name = ctx.fresh("v")
    ctx.line(f"{name} = {old}.load()")
    return CVal(name, "frag", dtype, out_axes)


def staged_loads(region: Any) -> set[int]:
    """Loads whose only use is as a 2-D operand of a dot: they are copied cooperatively to
    shared memory (where the SIMT matmul reads them) instead of into register fragments."""
    users: dict[int, int] = {}
    dot_operands: dict[int, Node] = {}
    for node in region.walk():
        for position, operand in enumerate(node.inputs):
            if hasattr(operand, "id"):
                users[operand.id] = users.get(operand.id, 0) + 1
                if node.op.name == "dot" and position < 2:
                    dot_operands[operand.id] = node
        for sub in node.regions:
            for value in sub.yields:
                if hasattr(value, "id"):
                    users[value.id] = users.get(value.id, 0) + 1
    staged = set()
    for node in region.walk():
        if node.op.memory != "load" or node.attrs.get("mask") is not None:
            continue
        if addresses_no_element(node):
            continue  # a fill of zeros, not a copy
        out = node.output
        simple = all(item[0] in ("tile", "full", "const", "scalar") for item in node.attrs["items"])
        if out.id in dot_operands and users.get(out.id) == 1 and out.type.ndim == 2 and simple:
            staged.add(id(node))
    return staged


def emit_staged_load(ctx: Any, node: Node, args: list) -> CVal:
    """Copy a 2-D tile into shared memory with every thread of the CTA (padding reads as 0)."""
    tensor = node.attrs["tensor"]
    dtype = tensor.dtype
    dims = _dims(ctx, node, args)
    tiled = [d for d in dims if d.kind == "affine" and d.axis is not None]
    rows_key, cols_key = (ctx.key(d) for d in node.output.shape)
    by_axis = {d.axis: d for d in tiled}
    layout = ctx.layout
    rows = layout.axis(rows_key).size if rows_key != 1 else 1
    cols = layout.axis(cols_key).size if cols_key != 1 else 1
    row_dim = by_axis.get(rows_key)
    col_dim = by_axis.get(cols_key)
    width = 1
    if col_dim is not None and ctx.module.aligned:
        width = potential_width(dims, cols_key, dtype, frozenset(), True)
        width = min(width, cols)
    smem = ctx.smem()
    buffer = ctx.prologue_value(
        ("staged", id(node)),
        lambda name: [
            f"{name} = {smem}.allocate_tensor({cutlass_type(dtype)}, cute.make_layout(({rows}, {cols}), stride=({cols}, 1)), 16)"
        ],
        "sld",
    )
    terms = []
    for dim in dims:
        if (dim.kind == "affine" and dim.base != "0" and dim.stride) or (
            dim.kind == "scalar" and dim.base != "0" and dim.stride
        ):
            terms.append(f"({dim.base}) * {dim.stride}")
    base = ctx.fresh("off")
    ctx.line(f"{base} = {ctx.index_type}({' + '.join(terms) if terms else '0'})")
    if width > 1:
        ctx.line(f"{base} = cute.assume({base}, divby={width})")
    threads = layout.num_threads
    per_row = cols // width
    total = rows * per_row
    rounds = (total + threads - 1) // threads
    f, r, q, d = (ctx.fresh(p) for p in ("_f", "_r", "_q", "_d"))
    with ctx.element_loop("_i", rounds):
        ctx.line(f"{f} = tid + _i * {threads}")
        ctx.line(f"{r} = {f} // {per_row}")
        ctx.line(f"{q} = ({f} % {per_row}) * {width}")
        conditions = []
        if total % threads:
            conditions.append(f"{f} < {total}")
        for dim, local in ((row_dim, r), (col_dim, q)):
            if dim is not None and dim.limit is not None:
                conditions.append(f"{local} < {dim.limit}")
        offset = [base]
        if row_dim is not None and row_dim.stride:
            offset.append(f"{r} * {row_dim.stride}")
        if col_dim is not None and col_dim.stride:
            offset.append(f"{q} * {col_dim.stride}")
        source = f"cute.make_tensor({ctx.ptr(tensor)} + ({' + '.join(offset)}), cute.make_layout({width}))"
        ctx.line(
            f"{d} = cute.make_tensor({buffer}.iterator + cute.assume({r} * {cols} + {q}, divby={width}), cute.make_layout({width}))"
        )
        if conditions:
            ctx.line(f"if {' and '.join(f'({c})' for c in conditions)}:")
            ctx.line(f"    cute.autovec_copy({source}, {d})")
            ctx.line("else:")
            ctx.line(f"    {d}.fill(0)")
        else:
            ctx.line(f"cute.autovec_copy({source}, {d})")
    return CVal(buffer, "smem", dtype, frozenset(k for k in (rows_key, cols_key) if k != 1))
