"""Looped reductions: a reduction dimension configured with a chunk (``reduction_loops``).

In a block, the nodes computing per element of such a dimension are not emitted where they
stand. Each node that consumes them and leaves the dimension behind (a reduction over it, a dot
whose K it is, or a store/atomic of it) is a *sink*; at the sink's position, one
``for roffset in tl.range(0, n, chunk)`` loop recomputes the nodes the sink needs for that chunk
and accumulates. Sinks whose inputs are all available earlier share one loop (e.g. the sum and
the sum of squares of a row), unless a memory effect sits between them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import sympy

from helion.ir.core import Block
from helion.ir.core import Node
from helion.ir.core import Value
from helion.language import _ops as ops

if TYPE_CHECKING:
    from helion_triton.codegen import KernelCodegen


@dataclasses.dataclass
class ChunkGroup:
    """Sinks of one looped reduction dimension emitted together in one loop over chunks."""

    block_id: int
    chunk: int
    position: int
    sinks: list[Node]
    subgraph: set[int]


def plan(cg: KernelCodegen, block: Block) -> tuple[set[int], dict[int, ChunkGroup]]:
    skip: set[int] = set()
    starts: dict[int, ChunkGroup] = {}
    if not cg.looped:
        return skip, starts
    analysis = cg.analysis
    position = {id(n): i for i, n in enumerate(block.nodes)}
    for block_id, chunk in cg.looped.items():
        symbol = cg.ir.block(block_id).symbol
        rnodes = [n for n in block.nodes if analysis.is_rdim_node(n, symbol)]
        if not rnodes:
            continue
        deferred = {id(n) for n in rnodes if not n.op.side_effects}
        group: ChunkGroup | None = None
        for index, node in enumerate(block.nodes):
            kind = _sink_kind(cg, node, symbol, deferred)
            if kind is None:
                if id(node) not in deferred and (
                    node.op.memory or node.op.structural or node.op.side_effects
                ):
                    group = None  # keep the order of memory effects
                continue
            subgraph = _subgraph(node, block, deferred)
            needs = set()
            for member in [*(n for n in block.nodes if id(n) in subgraph), node]:
                for operand in member.inputs:
                    producer = operand.producer if isinstance(operand, Value) else None
                    if (
                        producer is not None
                        and id(producer) in position
                        and id(producer) not in subgraph
                    ):
                        needs.add(position[id(producer)])
            if group is not None and all(p < group.position for p in needs):
                group.sinks.append(node)
                group.subgraph |= subgraph
                skip.add(id(node))
            else:
                group = ChunkGroup(block_id, chunk, index, [node], set(subgraph))
                starts[id(node)] = group
        skip |= deferred
    return skip, starts


def _sink_kind(
    cg: KernelCodegen, node: Node, symbol: sympy.Symbol, deferred: set[int]
) -> str | None:
    if id(node) in deferred:
        return None
    if cg.analysis.is_rdim_node(node, symbol):
        return "effect"
    if any(cg.analysis.has_rdim(v, symbol) for v in node.inputs):
        return "reduce" if node.op.reduction else "dot"
    return None


def _subgraph(sink: Node, block: Block, deferred: set[int]) -> set[int]:
    found: set[int] = set()
    stack = [sink]
    while stack:
        node = stack.pop()
        for operand in node.inputs:
            producer = operand.producer if isinstance(operand, Value) else None
            if producer is not None and id(producer) in deferred and id(producer) not in found:
                found.add(id(producer))
                stack.append(producer)
    return found


def emit_group(cg: KernelCodegen, group: ChunkGroup, block: Block) -> None:
    from helion_triton import reductions
    from helion_triton.codegen import RdimVars

    info = cg.ir.block(group.block_id)
    size = info.size_hint
    states = []
    for sink in group.sinks:
        if sink.op.reduction or sink.op is ops.dot:
            states.append(reductions.looped_sink_init(cg, sink))
        else:
            states.append(None)
    offset = cg.fresh(f"roffset_{group.block_id}")
    cg.used_constexprs.add(info.symbol.name)
    cg.emit(f"for {offset} in tl.range(0, {size}, {info.symbol.name}):")
    saved_exprs = dict(cg.exprs)
    with cg.indented():
        index = cg.fresh(f"rindex_{group.block_id}")
        cg.emit(f"{index} = {offset} + tl.arange(0, {info.symbol.name})")
        mask = None
        if size % group.chunk:
            mask = cg.fresh(f"rmask_{group.block_id}")
            cg.emit(f"{mask} = {index} < {size}")
        cg.rdims[group.block_id] = RdimVars(index, mask, offset)
        for node in block.nodes:
            if id(node) in group.subgraph:
                cg.emit_node(node)
        for sink, state in zip(group.sinks, states, strict=False):
            if state is None:
                cg.emit_node(sink)
            else:
                previous, cg.node = cg.node, sink
                reductions.looped_sink_update(cg, sink, state)
                cg.node = previous
        del cg.rdims[group.block_id]
    cg.exprs = saved_exprs
    for sink, state in zip(group.sinks, states, strict=False):
        if state is not None:
            previous, cg.node = cg.node, sink
            result = reductions.looped_sink_finish(cg, sink, state)
            cg.node = previous
            cg._bind(sink, result)
