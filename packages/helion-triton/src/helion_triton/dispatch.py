"""Top-level loops -> program ids: the ``pid_type``, ``loop_orders``, ``l2_groupings`` and
``flatten_loops`` tunables.

Each top-level ``grid_loop`` is a space of tiles. ``flat`` launches one program per tile of all
loops (a chain of ``if pid < n`` picks the loop), ``xyz`` maps the dims of a single 2-3 dim loop
to the grid's axes, and the persistent types launch one program per SM that walks the tiles,
in contiguous chunks (``persistent_blocked``) or strided (``persistent_interleaved``).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from helion import exc
from helion.ir.core import LoopInfo
from helion.ir.core import Node
from helion.language import _ops as ops
from helion_triton.codegen import FlatLayout
from helion_triton.codegen import KernelCodegen
from helion_triton.tunables import TritonOptions

BARRIER_HELPER = """
@triton.jit
def _helion_grid_barrier(counter, expected):
    # every program arrives, then waits until all have: a grid-wide barrier for persistent kernels
    tl.atomic_add(counter, 1, sem="release")
    arrived = tl.atomic_add(counter, 0, sem="acquire")
    while arrived < expected:
        arrived = tl.atomic_add(counter, 0, sem="acquire")
"""


@dataclasses.dataclass
class TopLoop:
    node: Node
    loop: LoopInfo
    block_ids: list[int]
    is_grid: bool
    flattened: bool
    order: list[int]
    group: int
    counts: list[str]  # tiles per dim, kernel expressions (one entry when flattened)
    host_counts: list[str | None]
    static_counts: list[int | None]

    @property
    def total(self) -> str:
        return _product(self.counts)

    @property
    def host_total(self) -> str | None:
        if any(c is None for c in self.host_counts):
            return None
        return _product([c for c in self.host_counts if c is not None])

    @property
    def static_total(self) -> int | None:
        if any(c is None for c in self.static_counts):
            return None
        return math.prod(c for c in self.static_counts if c is not None)


def _product(items: list[str]) -> str:
    numbers = [int(i) for i in items if i.isdigit()]
    others = [i for i in items if not i.isdigit()]
    constant = math.prod(numbers)
    if not others:
        return str(constant)
    parts = others if constant == 1 else [str(constant), *others]
    return " * ".join(f"({p})" if " " in p else p for p in parts)


def emit_dispatch(cg: KernelCodegen) -> tuple[str, bool]:
    """Emit the top-level device code; returns (launch grid expression, uses a grid barrier)."""
    ir = cg.ir
    loops: list[TopLoop] = []
    for node in ir.body.nodes:
        if node.op is ops.grid_loop:
            loops.append(_plan(cg, node))
        else:
            cg.emit_node(node)
    if not loops:
        return "(1,)", False
    pid_type = cg.options.pid_type
    barrier = bool(ir.uses_barrier) and len(loops) > 1
    if barrier and pid_type != "persistent_blocked":
        raise exc.InvalidConfig("a kernel with hl.barrier() needs pid_type='persistent_blocked'")
    if pid_type == "xyz" and (
        len(loops) != 1 or loops[0].flattened or not 2 <= len(loops[0].counts) <= 3
    ):
        pid_type = "flat"
    if pid_type.startswith("persistent"):
        return _persistent(cg, loops, pid_type, barrier), barrier
    if any(plan.host_total is None for plan in loops):
        raise exc.InvalidConfig(
            f"pid_type={pid_type!r} needs loop bounds known on the host; this kernel's are computed on the "
            "device, so use a persistent pid_type"
        )
    if pid_type == "xyz":
        return _xyz(cg, loops[0]), False
    return _flat(cg, loops), False


def _plan(cg: KernelCodegen, node: Node) -> TopLoop:
    analysis = cg.analysis
    loop = analysis.loop_of_node[id(node)]
    block_ids = list(node.attrs["block_ids"])
    is_grid = bool(node.attrs["is_grid"])
    flatten_index = analysis.flatten_index.get(loop.loop_id)
    flattened = (
        TritonOptions.item(cg.options.flatten_loops, flatten_index, False)
        and loop.loop_id not in analysis.flatten_problems
        and flatten_index is not None
    )
    order = cg.options.loop_order(analysis.multi_dim_loop_index.get(loop.loop_id), len(block_ids))
    group = int(TritonOptions.item(cg.options.l2_groupings, analysis.l2_index.get(loop.loop_id), 1))
    begins, ends = cg.loop_bounds(node)
    counts, host_counts, static_counts = [], [], []
    if flattened:
        numel_static = math.prod(e for e in ends) if all(isinstance(e, int) for e in ends) else None
        block = math.prod(cg.real_block[b] for b in block_ids)
        if numel_static is not None:
            static = math.ceil(numel_static / block)
            counts, host_counts, static_counts = [str(static)], [str(static)], [static]
        else:
            numel = " * ".join(cg.bound(e) for e in ends)
            host = [cg.host_bound(e) for e in ends]
            counts = [f"tl.cdiv({numel}, {block})"]
            host_counts = [None if None in host else f"triton.cdiv({' * '.join(host)}, {block})"]  # type: ignore[arg-type]
            static_counts = [None]
    else:
        for block_id, begin, end in zip(block_ids, begins, ends, strict=False):
            step = 1 if is_grid else cg.real_block[block_id]
            if isinstance(begin, int) and isinstance(end, int):
                static = max(math.ceil((end - begin) / step), 0)
                counts.append(str(static))
                host_counts.append(str(static))
                static_counts.append(static)
                continue
            counts.append(f"tl.cdiv({_span(cg.bound(begin), cg.bound(end))}, {step})")
            hb, he = cg.host_bound(begin), cg.host_bound(end)
            host_counts.append(
                None if hb is None or he is None else f"triton.cdiv({_span(hb, he)}, {step})"
            )
            static_counts.append(None)
    return TopLoop(
        node, loop, block_ids, is_grid, flattened, order, group, counts, host_counts, static_counts
    )


def _span(begin: str, end: str) -> str:
    return end if begin == "0" else f"{end} - {begin}"


def _program_id(cg: KernelCodegen, axis: int) -> str:
    pid = f"tl.program_id({axis})"
    if cg.index_dtype == torch.int64:
        pid = f"{pid}.to(tl.int64)"
    return pid


def _flat(cg: KernelCodegen, loops: list[TopLoop]) -> str:
    pid = cg.assign(_program_id(cg, 0), "pid")
    _emit_chain(cg, loops, pid)
    return (
        _grid([_product([p.host_total for p in loops])])
        if len(loops) == 1
        else _grid([_sum(loops)])
    )


def _sum(loops: list[TopLoop]) -> str:
    totals = [p.host_total or "0" for p in loops]
    if all(t.isdigit() for t in totals):
        return str(sum(int(t) for t in totals))
    return " + ".join(f"({t})" for t in totals)


def _emit_chain(cg: KernelCodegen, loops: list[TopLoop], pid: str) -> None:
    """One program per tile of all loops: ``if pid < n0: loop 0 else: pid -= n0; ...``."""
    plan = loops[0]
    if len(loops) == 1:
        _emit_top_loop(cg, plan, pid)
        return
    total = plan.total
    cg.emit(f"if {pid} < {total}:")
    with cg.indented():
        _emit_top_loop(cg, plan, pid)
    cg.emit("else:")
    with cg.indented():
        rest = cg.assign(f"{pid} - {total}", "pid")
        _emit_chain(cg, loops[1:], rest)


def _xyz(cg: KernelCodegen, plan: TopLoop) -> str:
    order = plan.order
    pids: dict[int, str] = {}
    if plan.group > 1:
        pids.update(_decompose(cg, order[:2], plan.counts, _program_id(cg, 0), plan.group))
        grid = [_product([plan.host_counts[order[0]], plan.host_counts[order[1]]])]  # type: ignore[list-item]
        if len(order) == 3:
            pids[order[2]] = cg.assign(_program_id(cg, 1), f"pid_{order[2]}")
            grid.append(plan.host_counts[order[2]])  # type: ignore[arg-type]
    else:
        grid = []
        for axis, dim in enumerate(order):
            pids[dim] = cg.assign(_program_id(cg, axis), f"pid_{dim}")
            grid.append(plan.host_counts[dim])  # type: ignore[arg-type]
    _emit_tiles(cg, plan, pids)
    return _grid(grid)


def _persistent(cg: KernelCodegen, loops: list[TopLoop], pid_type: str, barrier: bool) -> str:
    if barrier:
        cg.helper("_helion_grid_barrier", BARRIER_HELPER)
        cg.barrier_param = cg.fresh("barrier_counter")
        cg.extra_params.append(cg.barrier_param)
    for index, plan in enumerate(loops):
        total = plan.total
        virtual = cg.fresh("virtual_pid")
        if pid_type == "persistent_interleaved":
            cg.emit(f"for {virtual} in tl.range(tl.program_id(0), {total}, tl.num_programs(0)):")
        else:
            per_program = cg.assign(f"tl.cdiv({total}, tl.num_programs(0))", "tiles_per_program")
            start = cg.assign(f"tl.program_id(0) * {per_program}", "start_pid")
            cg.emit(
                f"for {virtual} in tl.range({start}, tl.minimum({start} + {per_program}, {total})):"
            )
        with cg.indented():
            # a loop variable may be a plain int (the interpreter), which has no .to() for a
            # grid index used as a value: tl.full types it either way
            pid = cg.assign(f"tl.full([], {virtual}, {cg.tl(cg.index_dtype)})", "pid")
            _emit_top_loop(cg, plan, pid)
        if barrier and index < len(loops) - 1:
            cg.emit(f"_helion_grid_barrier({cg.barrier_param}, {index + 1} * tl.num_programs(0))")
    # (SMs - persistent_reserved_sms) x num_sm_multiplier programs; a kernel with a grid
    # barrier keeps one program per SM (all of them must be resident at once)
    reserved = int(getattr(cg.settings, "persistent_reserved_sms", 0) or 0)
    multiplier = 1 if barrier else cg.options.num_sm_multiplier
    num_sms = cg.target.persistent_programs(reserved, multiplier)
    if barrier and cg.target.interpret:
        # the interpreter runs programs one after another: a barrier only holds with one program
        return "(1,)"
    totals = [plan.static_total for plan in loops]
    if all(t is not None for t in totals):
        return _grid([str(max(1, min(num_sms, max(totals))))])  # type: ignore[type-var]
    hosts = [plan.host_total for plan in loops]
    if barrier or any(h is None for h in hosts):
        return _grid([str(num_sms)])
    largest = hosts[0] if len(hosts) == 1 else f"max({', '.join(hosts)})"  # type: ignore[arg-type]
    return _grid([f"max(1, min({num_sms}, {largest}))"])


def _grid(dims: list[str]) -> str:
    return "(" + ", ".join(dims) + ",)"


def _emit_top_loop(cg: KernelCodegen, plan: TopLoop, linear: str) -> None:
    if plan.flattened:
        _emit_flattened(cg, plan, linear)
        return
    pids = _decompose(cg, plan.order, plan.counts, linear, plan.group)
    _emit_tiles(cg, plan, pids)


def _decompose(
    cg: KernelCodegen, order: list[int], counts: list[str], linear: str, group: int
) -> dict[int, str]:
    """Split a linear program id over dims (``order[0]`` varies fastest), with L2 swizzling."""
    pids: dict[int, str] = {}
    if len(order) == 1:
        pids[order[0]] = linear
        return pids
    if not linear.isidentifier():
        linear = cg.assign(linear, "pid")
    if group > 1:
        a, b = order[0], order[1]
        inner, rest = linear, None
        if len(order) > 2:
            both = _product([counts[a], counts[b]])
            inner = cg.assign(f"{linear} % ({both})", "pid_inner")
            rest = cg.assign(f"{linear} // ({both})", "pid_outer")
        in_group = cg.assign(_product([str(group), counts[b]]), "num_pid_in_group")
        group_id = cg.assign(f"{inner} // {in_group}", "group_id")
        first = cg.assign(f"{group_id} * {group}", "first_pid")
        size = cg.assign(f"tl.minimum({counts[a]} - {first}, {group})", "group_size")
        pids[a] = cg.assign(f"{first} + ({inner} % {in_group}) % {size}", f"pid_{a}")
        pids[b] = cg.assign(f"({inner} % {in_group}) // {size}", f"pid_{b}")
        for dim, expr in _split(cg, order[2:], counts, rest).items():
            pids[dim] = expr
        return pids
    return _split(cg, order, counts, linear)


def _split(
    cg: KernelCodegen, order: list[int], counts: list[str], linear: str | None
) -> dict[int, str]:
    pids: dict[int, str] = {}
    if not order or linear is None:
        return pids
    done: list[str] = []
    for position, dim in enumerate(order):
        divisor = _product(done) if done else "1"
        scaled = (
            linear
            if divisor == "1"
            else f"{linear} // ({divisor})"
            if " " in divisor
            else f"{linear} // {divisor}"
        )
        if position == len(order) - 1:
            expr = scaled
        else:
            expr = f"{scaled} % {counts[dim]}" if divisor == "1" else f"({scaled}) % {counts[dim]}"
        pids[dim] = cg.assign(expr, f"pid_{dim}")
        done.append(counts[dim])
    return pids


def _emit_tiles(cg: KernelCodegen, plan: TopLoop, pids: dict[int, str]) -> None:
    node = plan.node
    body = node.regions[0]
    saved = cg._push_tiles()
    begins, ends = cg.loop_bounds(node)
    for dim, block_id in enumerate(plan.block_ids):
        begin_value, end_value = begins[dim], ends[dim]
        begin, end = cg.bound(begin_value), cg.bound(end_value)
        step = cg._step_str(block_id, plan.is_grid)
        scaled = pids[dim] if step == "1" else f"{pids[dim]} * {step}"
        offset = cg.assign(scaled if begin == "0" else f"{begin} + {scaled}", f"offset_{block_id}")
        tile = cg._tile_from_offset(
            block_id,
            offset,
            begin,
            end,
            plan.is_grid,
            cg.index_dtype,
            static_bounds=(begin_value, end_value),
        )
        cg._bind_tile(body.args[dim], tile)
    cg.emit_block(body)
    cg._pop_tiles(saved)


def _emit_flattened(cg: KernelCodegen, plan: TopLoop, linear: str) -> None:
    from helion_triton.codegen import TileVars

    node = plan.node
    body = node.regions[0]
    _, ends = cg.loop_bounds(node)
    symbols = [cg.ir.block(b).symbol for b in plan.block_ids]
    for symbol in symbols:
        cg.used_constexprs.add(symbol.name)
    size = " * ".join(s.name for s in symbols)
    block = math.prod(cg.real_block[b] for b in plan.block_ids)
    flat_index = cg.assign(f"{linear} * ({size}) + tl.arange(0, {size})", "flat_index")
    static = all(isinstance(e, int) for e in ends)
    numel = str(math.prod(ends)) if static else " * ".join(f"({cg.bound(e)})" for e in ends)
    mask = None
    if not static or math.prod(ends) % block:
        mask = cg.assign(f"{flat_index} < {numel}", "flat_mask")
    saved = cg._push_tiles()
    stride: list[str] = []
    for position, dim in enumerate(plan.order):
        block_id = plan.block_ids[dim]
        extent = cg.bound(ends[dim])
        divisor = _product(stride) if stride else "1"
        scaled = (
            flat_index
            if divisor == "1"
            else f"{flat_index} // ({divisor})"
            if " " in divisor
            else f"{flat_index} // {divisor}"
        )
        expr = scaled if position == len(plan.order) - 1 else f"{scaled} % {extent}"
        index = cg.assign(expr, f"indices_{block_id}")
        tile = TileVars(
            block_id, None, index, mask, "0", extent, "1", False, cg.index_dtype, cg.index_dtype
        )
        cg._bind_tile(body.args[dim], tile)
        stride.append(extent)
    previous = cg.flat
    cg.flat = FlatLayout(tuple(symbols), size, mask)
    cg.emit_block(body)
    cg.flat = previous
    cg._pop_tiles(saved)
