"""Reductions and the SIMT matmul fallback of SIMT programs.

A reduction over axis ``a`` runs in three steps, each skipped when it has nothing to do:

1. inside the thread: ``TensorSSA.reduce`` over the fragment's mode of ``a`` (padded elements
   are first replaced by the reduction's identity);
2. across the lanes that share ``a``: butterfly ``shfl.sync.bfly`` exchanges, after which every
   such lane holds the result;
3. across the warps that share ``a``: lane 0 of each warp writes its partial to shared memory,
   a barrier, then every thread combines the partials of its rows.

The matmul fallback (used where warpgroup MMA cannot apply, see :mod:`helion_cute.matmul`) stages
both operand tiles in shared memory and accumulates with FMAs: each thread loops over K and
updates the accumulator elements it owns.
"""

from __future__ import annotations

from typing import Any

import torch

from helion import exc
from helion.ir.core import Node
from helion.language import _ops as ops
from helion_cute.source import cutlass_type
from helion_cute.source import python_number
from helion_cute.values import CVal

# reduction kind -> (TensorSSA ReductionOp, scalar combine template, identity)
_KINDS = {
    "sum": ("ADD", "({a} + {b})", 0),
    "prod": ("MUL", "({a} * {b})", 1),
    "amax": ("MAX", "cutlass.max({a}, {b})", float("-inf")),
    "amin": ("MIN", "cutlass.min({a}, {b})", float("inf")),
}


def _identity(kind: str, dtype: torch.dtype) -> object:
    identity = _KINDS[kind][2]
    if dtype.is_floating_point or kind in ("sum", "prod"):
        return identity
    info = torch.iinfo(dtype)
    return info.min if kind == "amax" else info.max


def emit_reduce(ctx: Any, node: Node, args: list) -> CVal:
    kind = node.op.name.removeprefix("reduce_")
    source = node.inputs[0]
    value = args[0]
    out = node.output
    key = ctx.key(source.shape[node.attrs["dim"]])
    if kind in ("any", "all") or (source.dtype == torch.bool and kind in ("amax", "amin")):
        # Booleans reduce as int32 max / min: the DSL keeps a Boolean fragment in registers as
        # Uint8, whose TensorSSA reduction and `cutlass.max` the DSL does not provide.
        # any == amax and all == amin over {0, 1}.
        kind = "amax" if kind in ("any", "amax") else "amin"
        if isinstance(value, CVal):
            value = CVal(
                ctx.define(
                    "b",
                    ctx.convert(value, torch.int32),
                    kind=value.kind,
                    dtype=torch.int32,
                    axes=value.axes,
                ).expr,
                value.kind,
                torch.int32,
                value.axes,
            )
        else:
            value = 1 if value else 0
        result = _reduce_value(ctx, node, value, key, kind, torch.int32)
        return ctx.define(
            "v", f"({result.expr} != 0)", kind=result.kind, dtype=torch.bool, axes=result.axes
        )
    return _reduce_value(ctx, node, value, key, kind, out.dtype)


def _reduce_value(
    ctx: Any, node: Node, value: Any, key: Any, kind: str, dtype: torch.dtype
) -> CVal:
    """``value`` reduced along ``key`` by ``kind``, in ``dtype`` (half floats compute in f32)."""
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    if not isinstance(value, CVal) or not value.is_frag or key == 1 or key not in value.axes:
        # nothing to reduce over (a size-1 dim, or a value broadcast along it)
        if key != 1 and not (isinstance(value, CVal) and value.is_frag):
            raise exc.BackendUnsupported(
                f"{node.op.name} of a broadcast value", "cute", loc=node.loc
            )
        kind_of = value.kind if isinstance(value, CVal) else "scalar"
        axes = value.axes if isinstance(value, CVal) else frozenset()
        return ctx.define("v", ctx.convert(value, dtype), kind=kind_of, dtype=dtype, axes=axes)
    if value.dtype != compute:
        value = ctx.define(
            "x", ctx.convert(value, compute), kind="frag", dtype=compute, axes=value.axes
        )
    result = _reduce(ctx, node, value, key, kind, compute)
    if compute != dtype:
        result = ctx.define(
            "v", ctx.convert(result, dtype), kind=result.kind, dtype=dtype, axes=result.axes
        )
    return result


def _reduce(ctx: Any, node: Node, value: CVal, key: Any, kind: str, dtype: torch.dtype) -> CVal:
    layout = ctx.layout
    axis = layout.axis(key)
    position = layout.index[key]
    out_axes = value.axes - {key}
    identity = python_number(_identity(kind, dtype), dtype)
    red_op, combine, _ = _KINDS[kind]
    source = value.expr
    limit = ctx.axis_limit(key)
    if limit is not None:
        valid = f"({ctx.coords(key)} < {limit})"
        source = ctx.define(
            "x",
            f"cute.where({valid}, {source}, {ctx.full_frag(_identity(kind, dtype), value.axes, dtype)})",
            kind="frag",
            dtype=dtype,
            axes=value.axes,
        ).expr
    in_shape = ctx.shape(value.axes)
    out_shape = ctx.shape(out_axes)
    mode = len(layout.axes) - 1 - position
    profile = tuple(1 if i == mode else None for i in range(len(in_shape)))
    manual = not dtype.is_floating_point and kind in ("amax", "amin")
    regs = ctx.fresh("red")
    if manual:
        # integer max/min: fold the elements of the axis one by one
        ctx.line(f"{regs}_in = cute.make_rmem_tensor({in_shape!r}, {cutlass_type(dtype)})")
        ctx.line(f"{regs}_in.store({source})")
        ctx.line(f"{regs} = cute.make_rmem_tensor({out_shape!r}, {cutlass_type(dtype)})")
        sources = _fold_tables(ctx, value.axes, key, out_axes)
        tmp = ctx.fresh("_f")
        walked = len(sources) * axis.per_thread * dtype.itemsize
        with ctx.element_loop("_i", len(sources), walked):
            ctx.line(f"{tmp} = {regs}_in[{ctx.table([s[0] for s in sources])}[_i]]")
            if axis.per_thread > 1:
                tables = [ctx.table([s[j] for s in sources]) for j in range(1, axis.per_thread)]
                for table in tables:
                    ctx.line(f"{tmp} = {combine.format(a=tmp, b=f'{regs}_in[{table}[_i]]')}")
            ctx.line(f"{regs}[_i] = {tmp}")
    elif None not in profile:
        # every mode is reduced (a rank-1 fragment to a 0-D value): TensorSSA.reduce would ask
        # vector.multi_reduction for an invalid 0-D vector; the depth-0 profile gives a scalar
        reduced = f"{source}.reduce(cute.ReductionOp.{red_op}, {identity}, 1)"
        ctx.line(f"{regs} = cute.make_rmem_tensor({out_shape!r}, {cutlass_type(dtype)})")
        ctx.line(f"{regs}[0] = {cutlass_type(dtype)}({reduced})")
    else:
        reduced = f"{source}.reduce(cute.ReductionOp.{red_op}, {identity}, {profile!r})"
        ctx.line(f"{regs} = cute.make_rmem_tensor({out_shape!r}, {cutlass_type(dtype)})")
        ctx.line(f"{regs}.store({reduced}.reshape({out_shape!r}))")
    count = 1
    for extent in out_shape:
        count *= extent
    scalar_combine = combine
    if kind == "amax" and dtype == torch.float32:
        scalar_combine = "cute.arch.fmax({a}, {b})"
    elif kind == "amin" and dtype == torch.float32:
        scalar_combine = "cute.arch.fmin({a}, {b})"
    if axis.lanes > 1:
        tmp = ctx.fresh("_v")
        with ctx.element_loop("_i", count, count * dtype.itemsize):
            ctx.line(f"{tmp} = {regs}[_i]")
            step = axis.lane_stride
            while step < axis.lane_stride * axis.lanes:
                ctx.line(
                    f"{tmp} = {scalar_combine.format(a=tmp, b=f'cute.arch.shuffle_sync_bfly({tmp}, offset={step})')}"
                )
                step *= 2
            ctx.line(f"{regs}[_i] = {tmp}")
    if axis.warps > 1:
        _cross_warp(ctx, regs, value.axes, key, out_axes, dtype, scalar_combine, count)
    out = ctx.fresh("v")
    if out_axes:
        ctx.line(f"{out} = {regs}.load()")
        return CVal(out, "frag", dtype, out_axes)
    ctx.line(f"{out} = {regs}[0]")
    return CVal(out, "scalar", dtype)


def _fold_tables(ctx: Any, axes: frozenset, key: Any, out_axes: frozenset) -> list[list[int]]:
    """For each output element, the input positions that fold into it (all along ``key``)."""
    layout = ctx.layout
    axis = layout.axis(key)
    result = []
    for element in layout.elements(out_axes):
        positions = []
        for j in range(axis.per_thread):
            full = dict(element)
            full[key] = j
            positions.append(layout.flat_index(axes, full))
        result.append(positions)
    return result


def _cross_warp(
    ctx: Any,
    regs: str,
    axes: frozenset,
    key: Any,
    out_axes: frozenset,
    dtype: torch.dtype,
    combine: str,
    count: int,
) -> None:
    layout = ctx.layout
    axis = layout.axis(key)
    position = layout.index[key]
    # one shared-memory row per element of the other axes of the (padded) tile
    others = [a for a in layout.axes if a.key != key and a.key in out_axes]
    rows = 1
    strides = {}
    for other in reversed(others):
        strides[other.key] = rows
        rows *= other.size
    static = []
    for element in layout.elements(out_axes):
        static.append(sum(strides[k] * layout.axis(k).offset(j) for k, j in element.items()))
    dynamic_terms = [
        f"{ctx.thread_base(o.key)} * {strides[o.key]}"
        for o in others
        if ctx.thread_base(o.key) != "0"
    ]
    smem = ctx.smem()
    buffer = ctx.prologue_value(
        ("reduce_smem", ctx.fresh("k")),
        lambda name: [
            f"{name} = {smem}.allocate_tensor({cutlass_type(dtype)}, cute.make_layout(({axis.warps}, {rows}), stride=({rows}, 1)), 16)"
        ],
        "sred",
    )
    table = ctx.table(static)
    row_base = " + ".join(dynamic_terms) if dynamic_terms else "0"
    warp_coord = "warp" if axis.warp_stride == 1 else f"(warp // {axis.warp_stride})"
    lane_coord = "lane" if axis.lane_stride == 1 else f"(lane // {axis.lane_stride})"
    ctx.line(f"if {lane_coord} % {axis.lanes} == 0:" if axis.lanes > 1 else "if True:")
    with ctx.w.indent(), ctx.element_loop("_i", count, count * dtype.itemsize):
        ctx.line(f"{buffer}[{warp_coord} % {axis.warps}, {row_base} + {table}[_i]] = {regs}[_i]")
    ctx.line("cute.arch.sync_threads()")
    tmp = ctx.fresh("_v")
    with ctx.element_loop("_i", count, count * dtype.itemsize):
        ctx.line(f"{tmp} = {buffer}[0, {row_base} + {table}[_i]]")
        for w in range(1, axis.warps):
            ctx.line(
                f"{tmp} = {combine.format(a=tmp, b=f'{buffer}[{w}, {row_base} + {table}[_i]]')}"
            )
        ctx.line(f"{regs}[_i] = {tmp}")
    ctx.line("cute.arch.sync_threads()")
    del position


# -- matmul fallback -------------------------------------------------------------------------------


def emit_dot(ctx: Any, node: Node, args: list) -> CVal:
    """``acc + a @ b`` (2-D, or 3-D with a batch dim) by FMAs over operands in shared memory."""
    a_value, b_value, _ = node.inputs
    a, b, acc = args
    out = node.output
    layout = ctx.layout
    if a_value.type.ndim not in (2, 3):
        raise exc.BackendUnsupported(f"a {a_value.type.ndim}-D dot", "cute", loc=node.loc)
    batch_a = a_value.shape[0] if a_value.type.ndim == 3 else 1
    batch_b = b_value.shape[0] if b_value.type.ndim == 3 else 1
    batch = ctx.key(batch_a if batch_a != 1 else batch_b)
    m_key, k_key = (ctx.key(d) for d in a_value.shape[-2:])
    n_key = ctx.key(b_value.shape[-1])
    for operand in (a, b):
        if not (isinstance(operand, CVal) and operand.kind in ("frag", "smem")):
            raise exc.BackendUnsupported("a dot of scalars", "cute", loc=node.loc)
    if (a.kind == "smem" or b.kind == "smem") and batch != 1:
        raise exc.InternalError("cute codegen: shared-memory operands of a batched dot")
    compute = torch.int32 if a_value.dtype == torch.int8 else torch.float32
    stage_type = cutlass_type(compute)
    out_axes = ctx.axes_of(out)
    if ctx.is_empty_axis(k_key):
        # a contraction over a `:` slice of length 0 adds nothing: the result is the accumulator
        ctx.line("# dot over a dimension of size 0: the accumulator, or zeros")
        total = acc if acc is not None else 0
        return ctx.define(
            "v",
            ctx.full_frag(total, out_axes, out.dtype),
            kind="frag",
            dtype=out.dtype,
            axes=out_axes,
        )

    def extent(key: Any) -> int:
        return layout.axis(key).size if key != 1 else 1

    smem = ctx.smem()
    k_size = extent(k_key)

    def stage(value: CVal, keys: tuple) -> str:
        """Write a register operand to a shared-memory tile indexed by ``keys``."""
        shape = tuple(extent(k) for k in keys)
        strides = []
        stride = 1
        for size in reversed(shape):
            strides.insert(0, stride)
            stride *= size
        buffer = ctx.prologue_value(
            ("dot_smem", ctx.fresh("k")),
            lambda name: [
                f"{name} = {smem}.allocate_tensor({stage_type}, cute.make_layout({shape!r}, stride={tuple(strides)!r}), 16)"
            ],
            "sdot",
        )
        regs = ctx.fresh("dr")
        ctx.line(f"{regs} = cute.make_rmem_tensor({ctx.shape(value.axes)!r}, {stage_type})")
        ctx.line(f"{regs}.store({ctx.full_frag(value, value.axes, compute)})")
        elements = layout.elements(value.axes)
        coordinates = []
        for key in keys:
            if key == 1 or key not in value.axes:
                coordinates.append("0")
                continue
            table = ctx.table([layout.axis(key).offset(e[key]) for e in elements])
            base = ctx.thread_base(key)
            coordinates.append(f"{table}[_i]" if base == "0" else f"{base} + {table}[_i]")
        with ctx.element_loop("_i", len(elements), 4 * len(elements)):
            ctx.line(f"{buffer}[{', '.join(coordinates)}] = {regs}[_i]")
        return buffer

    a_keys = (batch, m_key, k_key) if batch != 1 else (m_key, k_key)
    b_keys = (batch, k_key, n_key) if batch != 1 else (k_key, n_key)
    sa = a.expr if a.kind == "smem" else stage(a, a_keys)
    sb = b.expr if b.kind == "smem" else stage(b, b_keys)
    ctx.line("cute.arch.sync_threads()")
    accum = ctx.fresh("acc")
    ctx.line(f"{accum} = cute.make_rmem_tensor({ctx.shape(out_axes)!r}, {stage_type})")
    if acc is None:
        ctx.line(f"{accum}.fill(0)")
    else:
        ctx.line(f"{accum}.store({ctx.full_frag(acc, out_axes, compute)})")
    # each accumulator element needs one A value (its batch, row) and one B value (batch, column)
    elements = layout.elements(out_axes)
    a_points: list[tuple] = []
    b_points: list[tuple] = []
    a_of, b_of, positions = [], [], []
    for element in elements:
        a_point = tuple(element.get(k, 0) for k in (batch, m_key))
        b_point = tuple(element.get(k, 0) for k in (batch, n_key))
        if a_point not in a_points:
            a_points.append(a_point)
        if b_point not in b_points:
            b_points.append(b_point)
        a_of.append(a_points.index(a_point))
        b_of.append(b_points.index(b_point))
        positions.append(layout.flat_index(out_axes, element))

    def operand_index(keys: tuple, points: list[tuple], k_position: int) -> list[str]:
        """Index expressions (with ``_i`` the point number and ``_kk`` the K step) for a tile."""
        coordinates = []
        point_keys = [k for k in keys if k != k_key]
        for key in keys:
            if key == k_key:
                coordinates.append("_kk")
                continue
            if key == 1 or key not in out_axes:
                coordinates.append("0")
                continue
            j = point_keys.index(key)
            which = 0 if key == batch else 1
            table = ctx.table([layout.axis(key).offset(p[which]) for p in points])
            base = ctx.thread_base(key)
            coordinates.append(f"{table}[_i]" if base == "0" else f"{base} + {table}[_i]")
            del j
        del k_position
        return coordinates

    a_index = operand_index(a_keys, a_points, 0)
    b_index = operand_index(b_keys, b_points, 1)
    va, vb, kk = ctx.fresh("_a"), ctx.fresh("_b"), "_kk"
    a_table, b_table, e_table = ctx.table(a_of), ctx.table(b_of), ctx.table(positions)
    ctx.line(f"for {kk} in cutlass.range({k_size}, unroll=4):")
    with ctx.w.indent():
        ctx.line(f"{va} = cute.make_rmem_tensor(({len(a_points)},), {stage_type})")
        ctx.line(f"{vb} = cute.make_rmem_tensor(({len(b_points)},), {stage_type})")
        with ctx.element_loop("_i", len(a_points), 4 * len(a_points)):
            ctx.line(f"{va}[_i] = {sa}[{', '.join(a_index)}]")
        with ctx.element_loop("_i", len(b_points), 4 * len(b_points)):
            ctx.line(f"{vb}[_i] = {sb}[{', '.join(b_index)}]")
        with ctx.element_loop("_e", len(elements), 4 * len(elements)):
            ctx.line(
                f"{accum}[{e_table}[_e]] = {accum}[{e_table}[_e]] + {va}[{a_table}[_e]] * {vb}[{b_table}[_e]]"
            )
    ctx.line("cute.arch.sync_threads()")
    result = ctx.fresh("v")
    ctx.line(f"{result} = {accum}.load()")
    value = CVal(result, "frag", compute, out_axes)
    if compute != out.dtype:
        return ctx.define(
            "v", ctx.convert(value, out.dtype), kind="frag", dtype=out.dtype, axes=out_axes
        )
    return value


__all__ = ["emit_dot", "emit_reduce", "ops"]
