"""Triton lowerings of ``hl.reduce`` and ``hl.associative_scan`` (user combiners).

The combiner region of a node becomes one ``@triton.jit`` function beside the kernel, generated
by the same lowering rules as the kernel body (its arguments are scalars), and the node becomes
``tl.reduce`` / ``tl.associative_scan`` over the (tuple of) inputs with that function.

Padded lanes: a reduction fills them with ``other``. A forward scan needs nothing (an inclusive
prefix never reaches the lanes past the end), but a reverse scan would start from them, so it
scans one more input, the lane's "valid" flag, with a variant of the combiner that returns the
other operand where one side is padding (associative for any combiner, no identity needed).

In a looped reduction (``reduction_loops``) each chunk is reduced the same way and the chunks are
combined into a carry with the combiner; the first chunk replaces the carry's initial value
(``other``), so the result does not depend on ``other`` being an identity.
"""

from __future__ import annotations

from typing import Any

import torch

from helion.ir.core import Node
from helion.language import _ops as ops
from helion_triton.codegen import literal
from helion_triton.lowerings import triton_lowering


def carrier(dtype: torch.dtype) -> torch.dtype:
    """The dtype a value travels in through tl.reduce / tl.associative_scan: bools as int8
    (compiled Triton handles i1 poorly in reductions), everything else as itself."""
    return torch.int8 if dtype == torch.bool else dtype


def combine_function(ctx: Any, node: Node, with_valid: bool = False) -> str:
    """The name of a ``@triton.jit`` combine function made of ``node``'s region (emitted once).

    Its arguments and results are in each input's :func:`carrier` dtype. With ``with_valid``,
    each operand has one more argument, its ``valid`` flag (int32): the result is the other
    operand where one side is not valid, and the flags' maximum.
    """
    region = node.regions[0]
    count = len(region.args) // 2
    name = ctx.fresh("_helion_combine_valid" if with_valid else "_helion_combine")
    lhs = [ctx.fresh(f"a{i}") for i in range(count)]
    rhs = [ctx.fresh(f"b{i}") for i in range(count)]
    saved = (ctx.lines, ctx.depth, ctx.exprs, ctx.zero_lanes)
    ctx.lines, ctx.depth, ctx.exprs, ctx.zero_lanes = [], 1, {}, set()
    try:
        for arg, param in zip(region.args, lhs + rhs, strict=True):
            ctx.exprs[arg.id] = (
                ctx.assign(f"{param} != 0", "flag") if arg.dtype == torch.bool else param
            )
        for inner in region.nodes:
            ctx.emit_node(inner)
        results = [
            ctx.cast(ctx.expr(value), carrier(value.dtype), value.dtype) for value in region.yields
        ]
        if with_valid:
            valid_a, valid_b = ctx.fresh("a_valid"), ctx.fresh("b_valid")
            both = ctx.assign(f"({valid_a} != 0) & ({valid_b} != 0)", "both_valid")
            results = [
                f"tl.where({both}, {c}, tl.where({valid_b} != 0, {b}, {a}))"
                for c, a, b in zip(results, lhs, rhs, strict=True)
            ]
            results.append(f"tl.maximum({valid_a}, {valid_b})")
            lhs, rhs = [*lhs, valid_a], [*rhs, valid_b]
        body = ctx.lines
    finally:
        ctx.lines, ctx.depth, ctx.exprs, ctx.zero_lanes = saved
    lines = ["@triton.jit", f"def {name}({', '.join(lhs + rhs)}):", *body]
    lines.append(f"    return {', '.join(results)}")
    return ctx.helper(name, "\n".join(lines))


def _inputs(ctx: Any, node: Node, dim: int | None) -> list[str]:
    """The inputs in their carrier dtypes; with ``dim``, padded lanes along it hold ``other``."""
    exprs = []
    others = node.attrs.get("other") or [None] * len(node.inputs)
    for value, other in zip(node.inputs, others, strict=True):
        x = ctx.cast(ctx.expr(value), carrier(value.dtype), value.dtype)
        mask = ctx.mask_for(value.shape, [dim], ctx.origins(value)) if dim is not None else None
        if mask is not None and not (other == 0 and value.id in ctx.zero_lanes):
            x = f"tl.where({mask}, {x}, {ctx.typed_constant(other, carrier(value.dtype))})"
        exprs.append(ctx.assign(x, "masked") if x != ctx.expr(value) else x)
    return exprs


def _outputs(ctx: Any, node: Node, exprs: Any) -> Any:
    """Results in carrier dtypes -> the node's result (one expression, or one per output)."""
    results = [
        ctx.cast(e, out.dtype, carrier(out.dtype))
        for e, out in zip(exprs, node.outputs, strict=True)
    ]
    return results[0] if len(results) == 1 else tuple(results)


def _reduce_call(ctx: Any, node: Node, inputs: list[str], combine: str) -> list[str]:
    keep = ", keep_dims=True" if node.attrs.get("keepdim") else ""
    dim = node.attrs["dim"]
    if len(inputs) == 1:
        return [f"tl.reduce({inputs[0]}, {dim}, {combine}{keep})"]
    names = [ctx.fresh(out.name_hint) for out in node.outputs]
    ctx.emit(f"{', '.join(names)} = tl.reduce(({', '.join(inputs)}), {dim}, {combine}{keep})")
    return names


@triton_lowering(ops.custom_reduce)
def _custom_reduce(ctx: Any, node: Node) -> Any:
    combine = combine_function(ctx, node)
    return _outputs(
        ctx, node, _reduce_call(ctx, node, _inputs(ctx, node, node.attrs["dim"]), combine)
    )


# -- looped reductions: the carry is combined with the combiner -----------------------------------


def looped_init(ctx: Any, node: Node) -> dict[str, Any]:
    combine = combine_function(ctx, node)
    carry = []
    for out, other in zip(node.outputs, node.attrs["other"], strict=True):
        name = ctx.fresh(f"acc_{out.name_hint}")
        value = int(other) if out.dtype == torch.bool else other
        ctx.emit(
            f"{name} = tl.full({ctx.shape(out.shape)}, {literal(value)}, {ctx.tl(carrier(out.dtype))})"
        )
        carry.append(name)
    return {"combine": combine, "carry": carry}


def looped_update(ctx: Any, node: Node, state: dict[str, Any]) -> None:
    dim = node.attrs["dim"]
    parts = _reduce_call(ctx, node, _inputs(ctx, node, dim), state["combine"])
    parts = [ctx.assign(p, "chunk") for p in parts]
    carry = state["carry"]
    merged = [ctx.fresh("merged") for _ in carry]
    ctx.emit(f"{', '.join(merged)} = {state['combine']}({', '.join([*carry, *parts])})")
    offset = ctx.rdim_vars(node.inputs[0].shape[dim]).offset
    first = ctx.assign(f"{offset} == 0", "first_chunk")
    for name, part, new in zip(carry, parts, merged, strict=True):
        ctx.emit(f"{name} = tl.where({first}, {part}, {new})")


def looped_finish(ctx: Any, node: Node, state: dict[str, Any]) -> Any:
    return _outputs(ctx, node, state["carry"])


# -- scans ------------------------------------------------------------------------------------------------


@triton_lowering(ops.custom_scan)
def _custom_scan(ctx: Any, node: Node) -> Any:
    dim = node.attrs["dim"]
    reverse = ", reverse=True" if node.attrs.get("reverse") else ""
    inputs = _inputs(ctx, node, None)
    mask = None
    if node.attrs.get("reverse"):
        mask = ctx.mask_for(node.inputs[0].shape, [dim], ctx.origins(node.inputs[0]))
    combine = combine_function(ctx, node, with_valid=mask is not None)
    if mask is None and len(inputs) == 1:
        return _outputs(ctx, node, [f"tl.associative_scan({inputs[0]}, {dim}, {combine}{reverse})"])
    names = [ctx.fresh(out.name_hint) for out in node.outputs]
    targets = names
    if mask is not None:
        shape = ctx.shape(node.inputs[0].shape)
        inputs = [*inputs, ctx.assign(f"tl.broadcast_to(({mask}).to(tl.int32), {shape})", "valid")]
        targets = [*names, ctx.fresh("valid_scan")]
    ctx.emit(
        f"{', '.join(targets)} = tl.associative_scan(({', '.join(inputs)}), {dim}, {combine}{reverse})"
    )
    return _outputs(ctx, node, names)
