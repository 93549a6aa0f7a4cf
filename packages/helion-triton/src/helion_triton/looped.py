"""Looped reductions: a reduction dimension configured with a chunk (``reduction_loops``).

In a block, the nodes computing per element of such a dimension are not emitted where they
stand. Each node that consumes them and leaves the dimension behind (a reduction over it, a dot
whose K it is, or a store/atomic of it) is a *sink*; at the sink's position, one
``for roffset in tl.range(0, n, chunk)`` loop recomputes the nodes the sink needs for that chunk
and accumulates. Sinks whose inputs are all available earlier share one loop (e.g. the sum and
the sum of squares of a row), unless a memory effect sits between them.

One pair is fused across loops: a ``sum`` of ``exp(x - m)`` where ``m`` is an ``amax`` of the
same ``x`` over the same dimension (softmax, logsumexp, cross entropy). The sum needs the max
before it can start, which would cost a second pass over the row; instead the max's loop also
keeps an online sum, rescaled whenever the running max grows (see :class:`OnlineSum`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import sympy
import torch

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
    online: list[OnlineSum] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class OnlineSum:
    """A ``sum(exp(x - shift))`` computed in the loop of the ``amax`` that ``shift`` comes from.

    ``shift`` is the row max ``m`` (``amax`` of ``x``) through shape-only views (``chain``),
    optionally with the frontend's guard ``where(isinf(m), 0, m)`` (``guarded``). The loop keeps
    the guarded shift of the running max, ``g(m_run)``, always finite, and the running sum
    ``s_run = sum(exp(x_seen - g(m_run)))``. Per chunk, with ``m_new`` the updated running max::

        s_run = s_run * exp(min(g(m_run) - g(m_new), 0)) + sum(exp(x_chunk - g(m_new)))

    The factor is never nan (both shifts are finite). It exceeds 1 only when ``m_run`` is -inf
    (then ``s_run`` is exactly 0, and ``exp`` could overflow: 0 * inf) or ``m_new`` is +inf
    (then the chunk's term is inf anyway): the ``min`` keeps both right. After the loop
    ``s_run`` is the guarded sum. An unguarded ``sum(exp(x - m))`` equals it for a finite ``m``
    (where ``g(m) == m``) and is nan for an infinite one, as in the two loops it replaces.
    """

    sink: Node
    amax: Node
    shift: Value
    chain: list[Node]
    guarded: bool
    extra: list[Node]
    total: str = ""
    shift_run: str = ""


def plan(cg: KernelCodegen, block: Block) -> tuple[set[int], dict[int, ChunkGroup | OnlineSum]]:
    skip: set[int] = set()
    starts: dict[int, ChunkGroup | OnlineSum] = {}
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
        groups: list[ChunkGroup] = []
        subgraphs: dict[int, set[int]] = {}
        for index, node in enumerate(block.nodes):
            kind = _sink_kind(cg, node, symbol, deferred)
            if kind is None:
                if id(node) not in deferred and (
                    node.op.memory or node.op.structural or node.op.side_effects
                ):
                    group = None  # keep the order of memory effects
                continue
            subgraph = _subgraph(node, block, deferred)
            subgraphs[id(node)] = subgraph
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
                groups.append(group)
                starts[id(node)] = group
        skip |= deferred
        if not cg.flat:
            _fuse_online_sums(cg, block, symbol, groups, subgraphs, starts, deferred)
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


def emit_group(cg: KernelCodegen, group: ChunkGroup | OnlineSum, block: Block) -> None:
    from helion_triton import reductions
    from helion_triton.codegen import RdimVars

    if isinstance(group, OnlineSum):
        _bind_online_sum(cg, group)
        return
    info = cg.ir.block(group.block_id)
    size = info.size_hint
    size_text = cg.extent_text(size)  # a size argument under static_shapes=False
    states = []
    for sink in group.sinks:
        if sink.op.reduction or sink.op is ops.dot:
            states.append(reductions.looped_sink_init(cg, sink))
        else:
            states.append(None)
    for fused in group.online:
        _init_online_sum(cg, fused)
    offset = cg.fresh(f"roffset_{group.block_id}")
    chunk = info.symbol.name
    cg.used_constexprs.add(chunk)
    saved_exprs = dict(cg.exprs)

    def chunk_body(masked: bool) -> None:
        index = cg.fresh(f"rindex_{group.block_id}")
        cg.emit(f"{index} = {offset} + tl.arange(0, {chunk})")
        mask = None
        if masked:
            mask = cg.fresh(f"rmask_{group.block_id}")
            cg.emit(f"{mask} = {index} < {size_text}")
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
        for fused in group.online:
            amax_state = next(
                s for n, s in zip(group.sinks, states, strict=True) if n is fused.amax
            )
            _update_online_sum(cg, fused, amax_state)
        del cg.rdims[group.block_id]
        cg.exprs = dict(saved_exprs)  # nothing computed on a chunk outlives it

    # A chunk that does not divide the row: the full chunks loop without masks (a compare and
    # a select per element fewer, for a loop that is issue-bound once it streams at full rate)
    # and the last, partial chunk follows the loop with its mask.
    full = size - size % group.chunk
    if size % group.chunk and full > 0:
        if size_text != str(size):
            full = cg.assign(f"{size_text} - {size_text} % {chunk}", f"rfull_{group.block_id}")
        cg.emit(f"for {offset} in tl.range(0, {full}, {chunk}):")
        with cg.indented():
            chunk_body(masked=False)
        cg.emit(f"{offset} = {full}  # the partial chunk")
        chunk_body(masked=True)
    else:
        cg.emit(f"for {offset} in tl.range(0, {size_text}, {chunk}):")
        with cg.indented():
            chunk_body(masked=size % group.chunk != 0)
    for sink, state in zip(group.sinks, states, strict=False):
        if state is not None:
            previous, cg.node = cg.node, sink
            result = reductions.looped_sink_finish(cg, sink, state)
            cg.node = previous
            cg._bind(sink, result)


# -- online max + sum ----------------------------------------------------------------------------------


def _fuse_online_sums(
    cg: KernelCodegen,
    block: Block,
    symbol: sympy.Symbol,
    groups: list[ChunkGroup],
    subgraphs: dict[int, set[int]],
    starts: dict[int, ChunkGroup | OnlineSum],
    deferred: set[int],
) -> None:
    """Move each ``sum(exp(x - amax(x)))`` sink into the loop of its ``amax``."""
    position = {id(n): i for i, n in enumerate(block.nodes)}
    group_of = {id(sink): group for group in groups for sink in group.sinks}
    for group in groups:
        for sink in list(group.sinks):
            fused = _match_online_sum(sink, symbol, position, deferred)
            if fused is None:
                continue
            home = group_of.get(id(fused.amax))
            if home is None or home is group or home.block_id != group.block_id:
                continue
            between = block.nodes[home.position + 1 : position[id(sink)]]
            if any(
                id(n) not in deferred and (n.op.structural or n.op.side_effects) for n in between
            ):
                continue  # an effect between the two loops keeps its place between them
            first = group.sinks[0]
            group.sinks.remove(sink)
            del starts[id(first)]
            if group.sinks:
                group.position = position[id(group.sinks[0])]
                group.subgraph = set().union(*(subgraphs[id(s)] for s in group.sinks))
                starts[id(group.sinks[0])] = group
            home.online.append(fused)
            starts[id(sink)] = fused


def _producer(operand: object) -> Node | None:
    return operand.producer if isinstance(operand, Value) else None


def _match_online_sum(
    sink: Node, symbol: sympy.Symbol, position: dict[int, int], deferred: set[int]
) -> OnlineSum | None:
    """``sum(exp(sub(x, shift)))`` over ``symbol``, ``shift`` being ``amax(x)`` over the same
    dimension through views and the isinf guard; every value float32. None otherwise."""
    if sink.op is not ops.REDUCTIONS["sum"]:
        return None
    dim = sink.attrs["dim"]
    exp = _producer(sink.inputs[0])
    if exp is None or exp.op is not ops.UNARY["exp"] or id(exp) not in deferred:
        return None
    sub = _producer(exp.inputs[0])
    if sub is None or sub.op is not ops.BINARY["sub"] or id(sub) not in deferred:
        return None
    x, shift = sub.inputs
    if not (isinstance(x, Value) and isinstance(shift, Value)):
        return None
    values = (x, shift, sub.output, exp.output, sink.output)
    if any(v.dtype != torch.float32 for v in values):
        return None
    shape = tuple(x.shape)
    if shape[dim] != symbol or tuple(shift.shape) != (*shape[:dim], 1, *shape[dim + 1 :]):
        return None
    found = _shift_chain(shift, position)
    if found is None:
        return None
    amax, chain, guarded = found
    if amax.inputs[0] is not x or amax.attrs["dim"] != dim or amax.output.dtype != torch.float32:
        return None
    return OnlineSum(sink, amax, shift, chain, guarded, [sub, exp])


def _shift_chain(shift: Value, position: dict[int, int]) -> tuple[Node, list[Node], bool] | None:
    """The ``amax`` node ``shift`` is computed from, the nodes in between (in program order),
    and whether they include the guard ``where(isinf(m), 0, m)``; None for anything else."""
    chain: list[Node] = []
    guarded = False
    value = shift
    while True:
        node = value.producer
        if node is None or id(node) not in position:
            return None
        if node.op is ops.REDUCTIONS["amax"]:
            chain.sort(key=lambda n: position[id(n)])
            return node, chain, guarded
        if node.op is ops.view_reshape or (
            node.op is ops.view_subscript
            and all(item is None or item == "slice" for item in node.attrs["items"])
        ):
            chain.append(node)
            value = node.inputs[0]
            continue
        if node.op is ops.where and not guarded:
            cond, zero, peak = node.inputs
            test = _producer(cond)
            if (
                test is not None
                and test.op is ops.UNARY["isinf"]
                and test.inputs[0] is peak
                and isinstance(peak, Value)
                and isinstance(zero, (int, float))
                and not isinstance(zero, bool)
                and zero == 0
                and id(test) in position
            ):
                chain += [node, test]
                guarded = True
                value = peak
                continue
        return None


def _init_online_sum(cg: KernelCodegen, fused: OnlineSum) -> None:
    shape = cg.shape(fused.shift.shape)
    fused.total = cg.fresh("acc_sumexp")
    fused.shift_run = cg.fresh("acc_shift")
    cg.emit(f"{fused.total} = tl.full({shape}, 0, tl.float32)")
    # the guarded shift of the running max, which starts at -inf
    cg.emit(f"{fused.shift_run} = tl.full({shape}, 0, tl.float32)")


def _update_online_sum(cg: KernelCodegen, fused: OnlineSum, amax_state: dict) -> None:
    """Inside the chunk loop, after the amax's update: add the chunk to the online sum."""
    from helion_triton import reductions

    amax, sink = fused.amax, fused.sink
    kind = amax_state["kind"]
    # the shift the sum's subgraph sees in this chunk: from the running max so far
    cg.exprs[amax.output.id] = kind.finish(
        cg, amax_state["acc"], amax_state["acc_dtype"], amax.output.dtype
    )
    for node in fused.chain:
        cg.emit_node(node)
    shift = cg.expr(fused.shift)
    if not fused.guarded:
        shift = cg.assign(f'tl.where(tl.abs({shift}) == float("inf"), 0.0, {shift})', "shift")
    cg.exprs[fused.shift.id] = shift
    for node in fused.extra:
        cg.emit_node(node)
    previous, cg.node = cg.node, sink
    try:
        total_kind = reductions.ReductionKind("sum")
        x, total_dtype = reductions._reduction_input(cg, sink, total_kind)
        part = cg.assign(total_kind.partial(cg, x, sink.attrs["dim"], True, total_dtype), "chunk")
        rescale = f"tl.exp(tl.minimum({fused.shift_run} - {shift}, 0.0))"
        cg.emit(f"{fused.total} = {fused.total} * {rescale} + {part}")
        cg.emit(f"{fused.shift_run} = {shift}")
    finally:
        cg.node = previous


def _bind_online_sum(cg: KernelCodegen, fused: OnlineSum) -> None:
    """At the sum's own place: its value, from the accumulators of the amax's loop."""
    sink = fused.sink
    previous, cg.node = cg.node, sink
    try:
        result = fused.total
        if not fused.guarded:
            # x - m is nan for an infinite m in the two-pass form: so is the sum, as there
            peak = cg.expr(fused.shift)
            result = f'tl.where({fused.shift_run} == {peak}, {result}, float("nan"))'
        if not sink.attrs.get("keepdim"):
            result = f"tl.reshape({result}, {cg.shape(sink.output.shape)})"
        cg._bind(sink, cg.cast(result, sink.output.dtype, torch.float32))
    finally:
        cg.node = previous
