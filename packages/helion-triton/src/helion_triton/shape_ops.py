"""Triton lowerings of the shape ops: sort, topk, gather, stack, cat and split.

Sorting goes through an integer *key* whose signed order is the wanted order: floats become their
bit patterns with the magnitude bits of negative values flipped (NaN made the largest value, -0.0
made +0.0, as in torch), smaller integers widen to int32, and a descending sort complements the
key. When the indices are needed, the key (at most 32 bits) and the lane index are packed into one
int64, so one ``tl.sort`` / ``tl.topk`` orders by value and breaks ties by position: the result
is a stable sort, like the ref backend's. Padded lanes (past the logical extent of the sorted
dimension) get the largest key and therefore sort after every real lane, so they never reach the
first ``n`` (or ``k``) results.

``tl.sort`` and ``tl.topk`` work on the last dimension: another dimension is permuted there and
back. Sorting needs every lane of the dimension in one tile; the frontend guarantees that
(``helion.frontend.shape_ops.require_whole``) and the looped-reduction analysis keeps such
dimensions persistent.

In the Triton interpreter (CPU), ``tl.sort`` / ``tl.topk`` spend seconds per call in Python-level
reductions, so there the keys go through a bitonic network written with reshape / split / join
(numpy operations in the interpreter) instead; the key encoding around it is the same.
"""

from __future__ import annotations

from typing import Any

import torch

from helion.ir.core import Node
from helion.language import _ops as ops
from helion_triton.lowerings import triton_lowering

# tests set this to run the GPU path (tl.sort / tl.topk) in the interpreter as well
NATIVE_SORT_IN_INTERPRETER = False


def _topk_has_descending() -> bool:
    # tl.topk gained `descending` after Triton 3.6; before it always returns the largest first
    import triton.language as tl

    return "descending" in getattr(tl.topk, "arg_names", ())


_INT_MAX = {torch.int32: 2**31 - 1, torch.int64: 2**63 - 1}
_TL_INT = {16: "tl.int16", 32: "tl.int32", 64: "tl.int64"}
# the bits of a positive quiet NaN of each float dtype
_NAN_BITS = {
    torch.float16: 0x7E00,
    torch.bfloat16: 0x7FC0,
    torch.float32: 0x7FC00000,
    torch.float64: 0x7FF8000000000000,
}


def _bits(dtype: torch.dtype) -> int:
    return 1 if dtype == torch.bool else dtype.itemsize * 8


def key_dtype(dtype: torch.dtype) -> torch.dtype:
    """The integer dtype the sort key of ``dtype`` values is computed in."""
    return torch.int64 if _bits(dtype) == 64 else torch.int32


def _to_last(expr: str, rank: int, dim: int) -> str:
    if dim == rank - 1:
        return expr
    order = [d for d in range(rank) if d != dim] + [dim]
    return f"tl.permute({expr}, {tuple(order)})"


def _from_last(expr: str, rank: int, dim: int) -> str:
    if dim == rank - 1:
        return expr
    order = list(range(rank - 1))
    order.insert(dim, rank - 1)
    return f"tl.permute({expr}, {tuple(order)})"


def sort_key(ctx: Any, x: str, dtype: torch.dtype, descending: bool) -> str:
    """An integer (int32 / int64) whose ascending signed order is the sort order of ``x``."""
    kdt = key_dtype(dtype)
    ktl = ctx.tl(kdt)
    if dtype.is_floating_point:
        width = _bits(dtype)
        if dtype not in _NAN_BITS:
            raise ctx.unsupported(f"sorting {dtype} values")
        bits = ctx.assign(f"{x}.to({_TL_INT[width]}, bitcast=True)", "bits")
        if width < _bits(kdt):
            bits = ctx.assign(f"{bits}.to({ktl})", "bits")  # sign-extends
        # compare in float32 where the interpreter would compare 16-bit floats as raw bits
        probe = (
            x
            if dtype in (torch.float32, torch.float64)
            else ctx.assign(f"{x}.to(tl.float32)", "probe")
        )
        bits = ctx.assign(
            f"tl.where({probe} != {probe}, {_NAN_BITS[dtype]}, tl.where({probe} == 0, 0, {bits}))",
            "bits",
        )
        magnitude = 2 ** (width - 1) - 1
        key = ctx.assign(f"{bits} ^ (({bits} >> {_bits(kdt) - 1}) & {magnitude})", "key")
    else:
        key = ctx.assign(ctx.cast(x, kdt, dtype), "key")
    if descending:
        key = ctx.assign(f"~{key}", "key")
    return key


def from_key(ctx: Any, key: str, dtype: torch.dtype, descending: bool) -> str:
    """The value of ``dtype`` a sort key stands for (the inverse of :func:`sort_key`)."""
    kdt = key_dtype(dtype)
    if descending:
        key = ctx.assign(f"~{key}", "key")
    if not dtype.is_floating_point:
        return ctx.cast(key, dtype, kdt)
    width = _bits(dtype)
    magnitude = 2 ** (width - 1) - 1
    bits = ctx.assign(f"{key} ^ (({key} >> {_bits(kdt) - 1}) & {magnitude})", "bits")
    if width < _bits(kdt):
        bits = f"{bits}.to({_TL_INT[width]})"
    return f"{bits}.to({ctx.tl(dtype)}, bitcast=True)"


# interpreter only: one compare-exchange step of an ascending bitonic sort of the rows of a 2-D
# [ROWS, LANES] tensor (pairs STRIDE lanes apart, blocks of 2**STAGE lanes), and the first HALF
# lanes of each row of a [ROWS, 2 * HALF] tensor. The codegen unrolls the steps with literal
# sizes: the interpreter turns arithmetic on constexprs inside a function into tensors.
_BITONIC_STEP = """
@triton.jit
def _helion_bitonic_step(x, ROWS: tl.constexpr, LANES: tl.constexpr, GROUPS: tl.constexpr, STRIDE: tl.constexpr, STAGE: tl.constexpr):
    pairs = tl.permute(tl.reshape(x, [ROWS, GROUPS, 2, STRIDE]), (0, 1, 3, 2))
    lo, hi = tl.split(pairs)
    lane = tl.broadcast_to(tl.arange(0, LANES)[None, :], [ROWS, LANES])
    lo_lane, _ = tl.split(tl.permute(tl.reshape(lane, [ROWS, GROUPS, 2, STRIDE]), (0, 1, 3, 2)))
    up = ((lo_lane >> STAGE) & 1) == 0
    small = tl.minimum(lo, hi)
    big = tl.maximum(lo, hi)
    pairs = tl.join(tl.where(up, small, big), tl.where(up, big, small))
    return tl.reshape(tl.permute(pairs, (0, 1, 3, 2)), [ROWS, LANES])
"""
_FIRST_HALF = """
@triton.jit
def _helion_first_half(x, ROWS: tl.constexpr, HALF: tl.constexpr):
    lo, _ = tl.split(tl.permute(tl.reshape(x, [ROWS, 2, HALF]), (0, 2, 1)))
    return lo
"""


def _interpreted_sort(ctx: Any, moved: str, moved_shape: list, k: int | None) -> str:
    """``tl.sort`` (or ``tl.topk(..., k, descending=False)``) of the last dim, for the interpreter."""
    lanes = ctx.extent(moved_shape[-1])
    rows = 1  # a literal: the interpreter makes arithmetic on constexprs a tensor
    for dim in moved_shape[:-1]:
        rows *= ctx.extent(dim)
    log = lanes.bit_length() - 1
    result = ctx.assign(f"tl.reshape({moved}, [{rows}, {lanes}])", "rows")
    step = ctx.helper("_helion_bitonic_step", _BITONIC_STEP)
    for stage in range(1, log + 1):
        for back in range(stage):
            stride = 1 << (stage - 1 - back)
            ctx.emit(
                f"{result} = {step}({result}, {rows}, {lanes}, {lanes // (2 * stride)}, {stride}, {stage})"
            )
    width = lanes
    if k is not None:
        half = ctx.helper("_helion_first_half", _FIRST_HALF)
        while width > k:
            width //= 2
            ctx.emit(f"{result} = {half}({result}, {rows}, {width})")
    dims = [ctx.dim_str(d) for d in moved_shape[:-1]] + [str(width)]
    return f"tl.reshape({result}, [{', '.join(dims)}])"


def _sorted_keys(
    ctx: Any, node: Node, descending: bool, with_indices: bool, k: int | None
) -> tuple[str, str | None]:
    """Sort (or take the first ``k`` of) the keys of ``node.inputs[0]`` along ``attrs["dim"]``;
    returns the sorted keys and, if asked, the int64 lane indices they came from."""
    value = node.inputs[0]
    dim = node.attrs["dim"]
    shape = value.shape
    rank = len(shape)
    dtype = value.dtype
    kdt = key_dtype(dtype)
    key = sort_key(ctx, ctx.expr(value), dtype, descending)
    mask = ctx.mask_for(shape, [dim], ctx.origins(value))
    if with_indices:
        if kdt != torch.int32:
            raise ctx.unsupported(f"{node.op.name} with indices of {dtype} values (64-bit keys)")
        lane = ctx.place(f"tl.arange(0, {ctx.dim_str(shape[dim])})", dim, shape)
        key = ctx.assign(f"({key}.to(tl.int64) << 32) | {lane}.to(tl.int64)", "packed")
        sort_dtype = torch.int64
    else:
        sort_dtype = kdt
    if mask is not None:
        key = ctx.assign(
            f"tl.where({mask}, {key}, {ctx.typed_constant(_INT_MAX[sort_dtype], sort_dtype)})",
            "padded",
        )
    moved = _to_last(key, rank, dim)
    if ctx.target.interpret and not NATIVE_SORT_IN_INTERPRETER:
        moved_shape = [d for i, d in enumerate(shape) if i != dim] + [shape[dim]]
        result = _interpreted_sort(ctx, ctx.assign(moved, "moved"), moved_shape, k)
    elif k is None:
        result = f"tl.sort({moved})"
    elif _topk_has_descending():
        result = f"tl.topk({moved}, {k}, descending=False)"
    else:
        # the keys are integers: complementing reverses their order, so the largest k of the
        # complement are the smallest k keys, largest complement (smallest key) first
        result = f"~tl.topk(~({moved}), {k})"
    result = ctx.assign(_from_last(result, rank, dim), "ordered")
    if not with_indices:
        return result, None
    low = ctx.typed_constant(2**32 - 1, torch.int64)
    indices = ctx.assign(f"{result} & {low}", "order")
    keys = ctx.assign(f"({result} >> 32).to(tl.int32)", "key")
    return keys, indices


def _uses(ctx: Any, node: Node, position: int) -> bool:
    return bool(ctx.analysis.users(node.outputs[position]))


@triton_lowering(ops.sort)
def _sort(ctx: Any, node: Node) -> tuple[str | None, str | None]:
    descending = bool(node.attrs["descending"])
    keys, indices = _sorted_keys(ctx, node, descending, _uses(ctx, node, 1), None)
    values = from_key(ctx, keys, node.inputs[0].dtype, descending) if _uses(ctx, node, 0) else None
    return values, indices


@triton_lowering(ops.topk)
def _topk(ctx: Any, node: Node) -> tuple[str | None, str | None]:
    largest = bool(node.attrs["largest"])
    # the Triton extent of the k dimension: its padded lanes hold further (unused) results
    lanes = ctx.extent(node.outputs[0].shape[node.attrs["dim"]])
    keys, indices = _sorted_keys(ctx, node, largest, _uses(ctx, node, 1), lanes)
    values = from_key(ctx, keys, node.inputs[0].dtype, largest) if _uses(ctx, node, 0) else None
    return values, indices


# tests set this to run the GPU one-hot gather in the interpreter as well
ONE_HOT_GATHER_IN_INTERPRETER = False
# a one-hot select costs index elements x source lanes: only for small tensors
_ONE_HOT_GATHER_LIMIT = 65536


def _lane_gather(
    ctx: Any,
    source: str,
    source_shape: Any,
    index: str,
    index_shape: Any,
    dim: int,
    dtype: torch.dtype,
) -> str:
    """``tl.gather(source, index, dim)``, or where Triton's GPU gather lowering cannot take it,
    the same by a one-hot select. Triton 3.6 asserts (``isWarpLocal``) on small gathers: seen
    on the H200 for [2..8, 32] indices with 4 and 16 warps, not for [16, 32] with 4 warps. Below
    four elements per thread the gather becomes
    ``sum(where(index == lane, source, 0))`` over the source lanes, exact (one term is kept)."""
    index_elements = 1
    for d in index_shape:
        index_elements *= ctx.extent(d)
    lanes = ctx.extent(source_shape[dim])
    threads = 32 * ctx.options.num_warps
    if (
        (ctx.target.interpret and not ONE_HOT_GATHER_IN_INTERPRETER)
        or index_elements >= 4 * threads
        or index_elements * lanes > _ONE_HOT_GATHER_LIMIT
    ):
        return f"tl.gather({source}, {index}, {dim})"
    rank = len(index_shape)
    # narrow types are summed wide and cast back (exact: every other term is zero)
    wide = None
    if dtype.itemsize < 4:
        wide = ctx.tl(torch.float32 if dtype.is_floating_point else torch.int32)
    src = _to_last(source, rank, dim)
    if wide is not None:
        src = f"{src}.to({wide})"
    src = ctx.assign(f"tl.expand_dims({src}, {rank - 1})", "source")
    picks = ctx.assign(
        f"tl.expand_dims({_to_last(index, rank, dim)}, {rank}) == tl.arange(0, {lanes})", "pick"
    )
    picked = f"tl.sum(tl.where({picks}, {src}, 0), axis={rank})"
    if wide is not None:
        picked = f"{picked}.to({ctx.tl(dtype)})"
    return _from_last(picked, rank, dim)


@triton_lowering(ops.gather)
def _gather(ctx: Any, node: Node) -> str:
    source, index = node.inputs
    idx = ctx.expr(index)
    mask = ctx.mask_for(index.shape, None, ctx.origins(index))
    if mask is not None and index.id not in ctx.zero_lanes:
        # padded lanes of the index may hold anything: point them at lane 0
        idx = ctx.assign(f"tl.where({mask}, {idx}, 0)", "index")
    return _lane_gather(
        ctx, ctx.expr(source), source.shape, idx, index.shape, node.attrs["dim"], source.dtype
    )


def _insert_axis(ctx: Any, expr: str, rank: int, dim: int) -> str:
    items = [":"] * rank
    items.insert(dim, "None")
    return f"{expr}[{', '.join(items)}]"


@triton_lowering(ops.stack)
def _stack(ctx: Any, node: Node) -> str:
    parts = [ctx.expr(v) for v in node.inputs]
    dim = node.attrs["dim"]
    shape = node.output.shape
    rank = len(shape)
    if len(parts) == 2:
        joined = f"tl.join({parts[0]}, {parts[1]})"
        return _from_last(joined, rank, dim)
    expanded = [ctx.assign(_insert_axis(ctx, p, rank - 1, dim), "part") for p in parts]
    if len(parts) == 1:
        return expanded[0]
    lane = ctx.assign(ctx.place(f"tl.arange(0, {ctx.dim_str(shape[dim])})", dim, shape), "lane")
    result = expanded[-1]
    for position in range(len(parts) - 2, -1, -1):
        result = ctx.assign(
            f"tl.where({lane} == {position}, {expanded[position]}, {result})", "stacked"
        )
    return result


@triton_lowering(ops.cat)
def _cat(ctx: Any, node: Node) -> str:
    values = node.inputs
    dim = node.attrs["dim"]
    sizes = node.attrs["sizes"]
    shape = node.output.shape
    rank = len(shape)
    extents = [ctx.extent(v.shape[dim]) for v in values]
    if len(values) == 2 and sizes[0] == extents[0] == extents[1]:
        # [a, b] of equal extents, a without padded lanes: interleave whole rows of lanes
        a, b = (_to_last(ctx.expr(v), rank, dim) for v in values)
        joined = f"tl.join({a}, {b})"
        order = (*range(rank - 1), rank, rank - 1)
        out_last = [d for i, d in enumerate(shape) if i != dim] + [shape[dim]]
        flat = f"tl.reshape(tl.permute({joined}, {order}), {ctx.shape(out_last)})"
        return _from_last(flat, rank, dim)
    # general case: each output lane gathers from the part that holds it
    lane = ctx.assign(ctx.place(f"tl.arange(0, {ctx.dim_str(shape[dim])})", dim, shape), "lane")
    gathered = []
    offset = 0
    for value, size, extent in zip(values, sizes, extents, strict=True):
        local = f"tl.minimum(tl.maximum({lane} - {offset}, 0), {extent - 1})"
        index = ctx.assign(f"tl.broadcast_to({local}, {ctx.shape(shape)})", "index")
        part = _lane_gather(ctx, ctx.expr(value), value.shape, index, shape, dim, value.dtype)
        gathered.append((offset, ctx.assign(part, "part")))
        offset += size
    result = gathered[-1][1]
    for (_, part), (next_offset, _) in zip(
        reversed(gathered[:-1]), reversed(gathered[1:]), strict=True
    ):
        result = ctx.assign(f"tl.where({lane} < {next_offset}, {part}, {result})", "joined")
    return result


@triton_lowering(ops.split)
def _split(ctx: Any, node: Node) -> tuple[str, str]:
    lo, hi = ctx.fresh("lo"), ctx.fresh("hi")
    ctx.emit(f"{lo}, {hi} = tl.split({ctx.expr(node.inputs[0])})")
    return lo, hi
