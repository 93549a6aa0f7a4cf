"""Hopper matmuls: warpgroup MMA (wgmma) fed by TMA through a multi-stage mbarrier pipeline.

A top-level loop qualifies when it has the matmul shape Helion kernels are written in::

    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = epilogue(acc)       # elementwise ops, loads by tile_m / tile_n

with fp16/bf16 operands whose strides TMA accepts, and the config's tiles fit wgmma (BM a
multiple of 64, BN a multiple of 16 up to 256, BK a multiple of 16). Anything else uses the
SIMT fallback (:func:`helion_cute.reductions.emit_dot`).

The generated kernel is warp specialized. Warpgroup 0 is the producer: one warp waits for a
free stage, arms its "full" mbarrier with the stage's byte count and issues the two TMA copies
(with cluster multicast when ``cute_cluster_shape`` is not 1x1: the CTAs of a cluster row share
their A tile, those of a cluster column their B tile). Warpgroups 1.. are consumers, 64 rows of
the tile each: they wait for a full stage, issue the wgmma's of its K slice, keep one group in
flight (``wait_group(1)``) and release the previous stage. Register budgets move to the
consumers with ``setmaxnreg``. The epilogue applies the kernel's elementwise code to the
accumulator fragment and stores it (vector stores for interior tiles, predicated element stores
at the edges).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sympy
import torch

from helion.ir.core import Node
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.ir.core import runs_no_iteration
from helion.language import _ops as ops
from helion_cute.source import CodeWriter
from helion_cute.source import cutlass_type
from helion_cute.source import literal
from helion_cute.source import memory_type
from helion_cute.values import CVal
from helion_cute.values import TileVar

SMEM_BYTES = 227 * 1024
PRODUCER_REGISTERS = 40
CONSUMER_REGISTERS = 232


@dataclasses.dataclass
class MatmulPlan:
    m_block: int
    n_block: int
    k_block: int
    bm: int
    bn: int
    bk: int
    stages: int
    cluster: tuple[int, int]
    a_load: Node
    b_load: Node
    dot: Node
    k_loop: Node
    epilogue: list[Node]
    dtype: torch.dtype
    a_k_major: bool
    b_k_major: bool
    m: int
    n: int
    k: int


class Shape(str):
    """A shape spelled as a generated-code name (its repr is the bare name)."""

    def __repr__(self) -> str:
        return str(self)


def _is_zero_fill(node: Node | None) -> bool:
    return node is not None and node.op is ops.full and node.attrs["value"] == 0


def plan_matmul(module: Any, loop: Node, preamble: list[Node]) -> MatmulPlan | None:
    """Match a top-level loop against the wgmma matmul shape; None when it does not apply."""
    ir = module.ir
    attrs = loop.attrs
    if len(attrs["block_ids"]) != 2 or attrs.get("is_grid") or not module.aligned:
        return None
    if any(b != 0 for b in attrs["begins"]) or not all(isinstance(e, int) for e in attrs["ends"]):
        return None
    m_block, n_block = attrs["block_ids"]
    body = loop.regions[0]
    loops = [n for n in body.nodes if n.op is ops.tile_loop]
    if len(loops) != 1:
        return None
    k_loop = loops[0]
    position = body.nodes.index(k_loop)
    before, epilogue = body.nodes[:position], body.nodes[position + 1 :]
    if len(k_loop.inputs) != 1 or len(k_loop.attrs["block_ids"]) != 1:
        return None
    if k_loop.attrs["begins"] != [0] and list(k_loop.attrs["begins"]) != [0]:
        return None
    if not isinstance(k_loop.attrs["ends"][0], int):
        return None
    if runs_no_iteration(k_loop):
        return None  # K == 0: the SIMT program skips the loop and stores the zeros
    init = k_loop.inputs[0]
    if (
        not isinstance(init, Value)
        or not _is_zero_fill(init.producer)
        or init.producer not in before
    ):
        return None
    if any(n is not init.producer for n in before):
        return None
    k_block = k_loop.attrs["block_ids"][0]
    k_body = k_loop.regions[0]
    nodes = k_body.nodes
    if (
        len(nodes) != 3
        or nodes[2].op is not ops.dot
        or [n.op for n in nodes[:2]] != [ops.load, ops.load]
    ):
        return None
    dot = nodes[2]
    a_load, b_load = nodes[0], nodes[1]
    if dot.inputs[0] is not a_load.output or dot.inputs[1] is not b_load.output:
        return None
    if dot.inputs[2] is not k_body.args[1] or k_body.yields != [dot.output]:
        return None
    if dot.output.dtype != torch.float32 or init.dtype != torch.float32:
        return None
    for load, want in ((a_load, (m_block, k_block)), (b_load, (k_block, n_block))):
        items = load.attrs["items"]
        if (
            load.attrs.get("mask") is not None
            or len(items) != 2
            or any(i[0] != "tile" for i in items)
        ):
            return None
        if (items[0][2], items[1][2]) != want or load.attrs["tensor"].ndim != 2:
            return None
    dtype = a_load.attrs["tensor"].dtype
    if dtype not in (torch.float16, torch.bfloat16) or b_load.attrs["tensor"].dtype != dtype:
        return None
    a_tensor, b_tensor = a_load.attrs["tensor"], b_load.attrs["tensor"]
    a_k_major = a_tensor.stride[1] == 1
    b_k_major = b_tensor.stride[0] == 1
    for tensor, k_major, k_dim in ((a_tensor, a_k_major, 1), (b_tensor, b_k_major, 0)):
        other = 1 - k_dim
        contiguous = k_dim if k_major else other
        if tensor.stride[contiguous] != 1:
            return None
        leading = tensor.stride[1 - contiguous]
        if (leading * dtype.itemsize) % 16 != 0 or tensor.shape[contiguous] * dtype.itemsize < 16:
            return None
    if not _epilogue_supported(epilogue, k_loop.output, m_block, n_block, ir):
        return None
    options = module.options
    bm, bn, bk = (options.block_sizes[b] for b in (m_block, n_block, k_block))
    if bm not in (64, 128, 256) or bn % 16 or not 16 <= bn <= 256 or bk % 16 or not 16 <= bk <= 128:
        return None
    consumers = min(2, bm // 64)
    if bm * bn // (consumers * 128) > 128:
        return None  # accumulator would not fit in registers
    per_stage = (bm + bn) * bk * dtype.itemsize
    stages = max(2, min(options.num_stages, (SMEM_BYTES - 4096) // per_stage))
    if stages * per_stage > SMEM_BYTES - 4096:
        return None
    m, n = attrs["ends"]
    k = k_loop.attrs["ends"][0]
    cluster = options.cluster
    return MatmulPlan(
        m_block,
        n_block,
        k_block,
        bm,
        bn,
        bk,
        stages,
        cluster,
        a_load,
        b_load,
        dot,
        k_loop,
        epilogue,
        dtype,
        a_k_major,
        b_k_major,
        m,
        n,
        k,
    )


def _epilogue_supported(nodes: list[Node], acc: Value, m_block: int, n_block: int, ir: Any) -> bool:
    allowed = {
        ops.cast,
        ops.constant,
        ops.full,
        ops.view_expand,
        ops.view_reshape,
        ops.where,
        ops.clamp,
    }
    m_symbol, n_symbol = ir.block(m_block).symbol, ir.block(n_block).symbol
    stored = False
    for node in nodes:
        if node.op is ops.store:
            items = node.attrs["items"]
            if node.attrs.get("mask") is not None or len(items) != 2:
                return False
            if [(i[0], i[2] if i[0] == "tile" else None) for i in items] != [
                ("tile", m_block),
                ("tile", n_block),
            ]:
                return False
            stored = True
            continue
        if node.op is ops.load:
            if node.attrs.get("mask") is not None:
                return False
            if any(i[0] not in ("tile", "const", "scalar", "none") for i in node.attrs["items"]):
                return False
            if any(i[0] == "tile" and i[2] not in (m_block, n_block) for i in node.attrs["items"]):
                return False
            continue
        if node.op.elementwise or node.op in allowed:
            for out in node.outputs:
                if isinstance(out.type, TensorType) and any(
                    d not in (1, m_symbol, n_symbol) for d in out.shape
                ):
                    return False
            continue
        return False
    return stored


_SWIZZLE_BITS = ((1024, "SW128"), (512, "SW64"), (256, "SW32"))


def _atom_kind(k_major: bool, major_extent: int, dtype: torch.dtype) -> str:
    bits = major_extent * dtype.itemsize * 8
    prefix = "K" if k_major else "MN"
    for span, name in _SWIZZLE_BITS:
        if bits % span == 0:
            return f"{prefix}_{name}"
    return f"{prefix}_INTER"


class EpilogueContext:
    """Lowering context of the epilogue: every fragment has the accumulator's shape, and each
    element knows its (m, n) coordinate from the partitioned identity tensor ``tCcC``."""

    def __init__(self, emitter: MatmulEmitter) -> None:
        self.emitter = emitter
        self.module = emitter.module
        self.ir = emitter.module.ir
        self.options = emitter.module.options
        self.w = emitter.w
        self.env: dict[int, CVal] = {}
        self.shape_name = Shape("acc_shape")
        self.index_type = cutlass_type(self.ir.index_dtype)

    # the subset of KernelEmitter's interface the elementwise rules use
    def fresh(self, prefix: str) -> str:
        return self.module.w.fresh(prefix)

    def line(self, text: str) -> None:
        self.w.line(text)

    def axes_of(self, value: Value) -> frozenset:
        if not isinstance(value.type, TensorType):
            return frozenset()
        return frozenset(d for d in value.shape if d != 1)

    def shape(self, axes: frozenset) -> Any:
        return self.shape_name if axes else ()

    def operand(self, operand: Any) -> Any:
        from helion_cute.codegen import KernelEmitter

        return KernelEmitter.operand(self, operand)  # type: ignore[arg-type]

    def define(
        self,
        prefix: str,
        expr: str,
        *,
        kind: str,
        dtype: torch.dtype,
        axes: frozenset = frozenset(),
    ) -> CVal:
        name = self.fresh(prefix)
        self.line(f"{name} = {expr}")
        return CVal(name, kind, dtype, axes)

    def convert(self, value: Any, dtype: torch.dtype) -> str:
        from helion_cute.codegen import KernelEmitter

        return KernelEmitter.convert(self, value, dtype)  # type: ignore[arg-type]

    def full_frag(self, value: Any, axes: frozenset, dtype: torch.dtype) -> str:
        if isinstance(value, CVal) and value.is_frag:
            return self.convert(value, dtype)
        return f"cute.full(acc_shape, {self.convert(value, dtype)}, {cutlass_type(dtype)})"

    def scalar_code(self, operand: Any) -> str:
        value = self.operand(operand)
        if isinstance(value, CVal):
            return value.expr
        return str(int(value))

    def emit(self, nodes: list[Node]) -> None:
        from helion_cute.lowerings import CUTE_LOWERINGS

        for node in nodes:
            args = [self.operand(i) for i in node.inputs]
            if node.op is ops.load:
                result = self._load(node, args)
            elif node.op is ops.store:
                self._store(node, args)
                continue
            else:
                result = CUTE_LOWERINGS[node.op](self, node, args)
            results = result if isinstance(result, (list, tuple)) else [result]
            for out, cval in zip(node.outputs, results, strict=False):
                self.env[out.id] = cval

    def _address(self, node: Node, args: list) -> tuple[str, list[str]]:
        tensor = node.attrs["tensor"]
        terms = []
        conditions = []
        position = 0
        for item in node.attrs["items"]:
            if item[0] == "none":
                continue
            stride = tensor.stride[position]
            position += 1
            if item[0] == "tile":
                coordinate = "_m" if item[2] == self.emitter.plan.m_block else "_n"
                bound = self.emitter.plan.m if coordinate == "_m" else self.emitter.plan.n
                terms.append(f"{coordinate} * {stride}")
                conditions.append(f"{coordinate} < {bound}")
            elif item[0] == "const":
                terms.append(f"{int(item[1]) * stride}")
            else:
                terms.append(
                    f"{self.index_type}({self.scalar_code(node.inputs[item[1]])}) * {stride}"
                )
        return " + ".join(terms) if terms else "0", conditions

    def _load(self, node: Node, args: list) -> CVal:
        tensor = node.attrs["tensor"]
        dtype = tensor.dtype
        address, conditions = self._address(node, args)
        pointer = self.emitter.module.tensor_params[tensor.index]
        axes = self.axes_of(node.output)
        load = f"cute.make_tensor({pointer} + {self.index_type}({address}), cute.make_layout(1))[0]"
        if dtype == torch.bool:
            load = f"cutlass.Boolean({load})"  # the byte in memory is a Uint8 (memory_type)
        if not axes:
            return self.define("v", load, kind="scalar", dtype=dtype)
        regs = self.fresh("eld")
        self.line(f"{regs} = cute.make_rmem_tensor(acc_shape, {cutlass_type(dtype)})")
        self.line(f"{regs}.fill(0)")
        self.line("for _i in cutlass.range_constexpr(cute.size(acc_shape)):")
        with self.w.indent():
            self.line("_m = tCcC[_i][0]")
            self.line("_n = tCcC[_i][1]")
            if conditions:
                self.line(f"if {' and '.join(conditions)}:")
                self.line(f"    {regs}[_i] = {load}")
            else:
                self.line(f"{regs}[_i] = {load}")
        return self.define("v", f"{regs}.load()", kind="frag", dtype=dtype, axes=axes)

    def _store(self, node: Node, args: list) -> None:
        tensor = node.attrs["tensor"]
        dtype = tensor.dtype
        value = args[node.attrs["value"]]
        pointer = self.emitter.module.tensor_params[tensor.index]
        plan = self.emitter.plan
        regs = self.fresh("est")
        frag = self.full_frag(value, frozenset([1]), dtype)
        if dtype == torch.bool:
            # a Boolean fragment keeps True as the byte 0xFF; torch.bool wants 0/1 (memory_type)
            frag = f"{frag}.to(cutlass.Uint8)"
        self.line(f"{regs} = cute.make_rmem_tensor(acc_shape, {memory_type(dtype)})")
        self.line(f"{regs}.store({frag})")
        s0, s1 = tensor.stride
        self.line(
            f"mC = cute.make_tensor({pointer}, cute.make_layout(({plan.m}, {plan.n}), stride=({s0}, {s1})))"
        )
        self.line(
            f"tCgC = thr.partition_C(cute.local_tile(mC, ({plan.bm}, {plan.bn}), (pid_m, pid_n)))"
        )
        self.line(
            f"if (pid_m + 1) * {plan.bm} <= {plan.m} and (pid_n + 1) * {plan.bn} <= {plan.n}:"
        )
        self.line(f"    cute.autovec_copy({regs}, tCgC)")
        self.line("else:")
        with self.w.indent():
            self.line("for _i in cutlass.range_constexpr(cute.size(acc_shape)):")
            self.line(f"    if cute.elem_less(tCcC[_i], ({plan.m}, {plan.n})):")
            self.line(f"        tCgC[_i] = {regs}[_i]")


class MatmulEmitter:
    """Generates the warp-specialized wgmma kernel of a :class:`MatmulPlan` (see module doc)."""

    def __init__(
        self, module: Any, loop: Node, preamble: list[Node], name: str, plan: MatmulPlan
    ) -> None:
        self.module = module
        self.loop = loop
        self.preamble = preamble
        self.name = name
        self.plan = plan
        self.w = CodeWriter()

    def emit(self) -> list[str]:
        plan = self.plan
        module = self.module
        w = self.w
        dt = cutlass_type(plan.dtype)
        a_kind = _atom_kind(plan.a_k_major, plan.bk if plan.a_k_major else plan.bm, plan.dtype)
        b_kind = _atom_kind(plan.b_k_major, plan.bk if plan.b_k_major else plan.bn, plan.dtype)
        a_order = "(0, 1, 2)" if plan.a_k_major else "(1, 0, 2)"
        b_order = "(0, 1, 2)" if plan.b_k_major else "(1, 0, 2)"
        consumers = min(2, plan.bm // 64)
        threads = 128 * (consumers + 1)
        cm, cn = plan.cluster
        cluster_size = cm * cn
        tx_bytes = (plan.bm + plan.bn) * plan.bk * plan.dtype.itemsize
        layouts = f"{self.name}_smem_layouts"
        w.line()
        w.line(f"def {layouts}():")
        with w.indent():
            w.line(
                f"a_atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.{a_kind}, {dt})"
            )
            w.line(
                f"b_atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.{b_kind}, {dt})"
            )
            w.line(
                f"a = cute.tile_to_shape(a_atom, ({plan.bm}, {plan.bk}, {plan.stages}), order={a_order})"
            )
            w.line(
                f"b = cute.tile_to_shape(b_atom, ({plan.bn}, {plan.bk}, {plan.stages}), order={b_order})"
            )
            w.line("return a, b")
        w.line()
        w.line(
            f"# wgmma matmul: tile {plan.bm}x{plan.bn}x{plan.bk}, {plan.stages} stages, {consumers} consumer warpgroups, cluster {cm}x{cn}"
        )
        w.line("@cute.kernel")
        params = [
            "tma_a: cute.CopyAtom",
            "mA: cute.Tensor",
            "tma_b: cute.CopyAtom",
            "mB: cute.Tensor",
            "tiled_mma: cute.TiledMma",
            *module.kernel_params(),
        ]
        w.line(f"def {self.name}({', '.join(params)}):")
        num_m = -(-plan.m // plan.bm)
        num_n = -(-plan.n // plan.bn)
        k_tiles = -(-plan.k // plan.bk)
        group = module.options.l2_groupings.get(self.loop.attrs["loop_id"], 1)
        order = list(module.options.loop_orders.get(self.loop.attrs["loop_id"], (0, 1)))
        with w.indent():
            w.line(f"a_layout, b_layout = {layouts}()")
            w.line("tidx, _, _ = cute.arch.thread_idx()")
            w.line("warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())")
            if cluster_size > 1:
                w.line("pid, _, _ = cute.arch.cluster_idx()")
                w.line("rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())")
                w.line(f"cta_m = rank % {cm}")
                w.line(f"cta_n = rank // {cm}")
                counts = [f"{-(-num_m // cm)}", f"{-(-num_n // cn)}"]
            else:
                w.line("pid, _, _ = cute.arch.block_idx()")
                counts = [str(num_m), str(num_n)]
            self._pid(counts, order, group)
            if cluster_size > 1:
                w.line(f"pid_m = pid_m * {cm} + cta_m")
                w.line(f"pid_n = pid_n * {cn} + cta_n")
            w.line("if warp == 0:")
            w.line("    cpasync.prefetch_descriptor(tma_a)")
            w.line("    cpasync.prefetch_descriptor(tma_b)")
            w.line("smem = cutlass.memory.SmemAllocator()")
            w.line(
                f"mbar = smem.allocate_array(cutlass.Int64, {2 * plan.stages}, byte_alignment=8)"
            )
            w.line(
                f"sA = smem.allocate_tensor({dt}, a_layout.outer, byte_alignment=1024, swizzle=a_layout.inner)"
            )
            w.line(
                f"sB = smem.allocate_tensor({dt}, b_layout.outer, byte_alignment=1024, swizzle=b_layout.inner)"
            )
            w.line(f"cluster = cute.make_layout((1, {cm}, {cn}, 1))")
            w.line("pipe = pipeline.PipelineTmaAsync.create(")
            w.line(f"    num_stages={plan.stages},")
            w.line("    producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),")
            w.line(
                f"    consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, {consumers * 4 * (cm + cn - 1)}),"
            )
            w.line(f"    tx_count={tx_bytes}, barrier_storage=mbar, cta_layout_vmnk=cluster)")
            if cluster_size > 1:
                w.line("cute.arch.cluster_arrive_relaxed()")
                w.line("cute.arch.cluster_wait()")
            w.line(f"gA = cute.local_tile(mA, ({plan.bm}, {plan.bk}), (pid_m, None))")
            w.line(f"gB = cute.local_tile(mB, ({plan.bn}, {plan.bk}), (pid_n, None))")
            if cluster_size > 1:
                # A is shared along the cluster's n dimension, B along its m dimension
                w.line(
                    f"tAsA, tAgA = cpasync.tma_partition(tma_a, cta_n, cute.make_layout({cn}), cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))"
                )
                w.line(
                    f"tBsB, tBgB = cpasync.tma_partition(tma_b, cta_m, cute.make_layout({cm}), cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))"
                )
                w.line(
                    "mcast_a = cpasync.create_tma_multicast_mask(cluster, (0, cta_m, cta_n, 0), mcast_mode=2)"
                )
                w.line(
                    "mcast_b = cpasync.create_tma_multicast_mask(cluster, (0, cta_m, cta_n, 0), mcast_mode=1)"
                )
            else:
                w.line(
                    "tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))"
                )
                w.line(
                    "tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))"
                )
            w.line("if warp < 4:")
            with w.indent():
                w.line(f"cute.arch.warpgroup_reg_dealloc({PRODUCER_REGISTERS})")
                w.line("if warp == 0:")
                with w.indent():
                    w.line(
                        f"st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, {plan.stages})"
                    )
                    w.line(f"for k in cutlass.range({k_tiles}, unroll=1):")
                    with w.indent():
                        w.line("pipe.producer_acquire(st)")
                        extra_a = ", mcast_mask=mcast_a" if cluster_size > 1 and cn > 1 else ""
                        extra_b = ", mcast_mask=mcast_b" if cluster_size > 1 and cm > 1 else ""
                        w.line(
                            f"cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, st.index)], tma_bar_ptr=pipe.producer_get_barrier(st){extra_a})"
                        )
                        w.line(
                            f"cute.copy(tma_b, tBgB[(None, k)], tBsB[(None, st.index)], tma_bar_ptr=pipe.producer_get_barrier(st){extra_b})"
                        )
                        w.line("pipe.producer_commit(st)")
                        w.line("st.advance()")
                    w.line("pipe.producer_tail(st)")
            w.line("else:")
            with w.indent():
                w.line(f"cute.arch.warpgroup_reg_alloc({CONSUMER_REGISTERS})")
                w.line("thr = tiled_mma.get_slice(tidx - 128)")
                w.line("tCsA = thr.partition_A(sA)")
                w.line("tCsB = thr.partition_B(sB)")
                w.line("tCrA = tiled_mma.make_fragment_A(tCsA)")
                w.line("tCrB = tiled_mma.make_fragment_B(tCsB)")
                w.line(
                    f"acc = tiled_mma.make_fragment_C(thr.partition_shape_C(({plan.bm}, {plan.bn})))"
                )
                w.line("tiled_mma.set(warpgroup.Field.ACCUMULATE, False)")
                w.line(
                    f"cst = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, {plan.stages})"
                )
                w.line(
                    f"rst = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, {plan.stages})"
                )
                w.line(f"for k in cutlass.range({k_tiles}, unroll=1):")
                with w.indent():
                    w.line("pipe.consumer_wait(cst)")
                    w.line("warpgroup.fence()")
                    w.line(f"for kb in cutlass.range_constexpr({plan.bk // 16}):")
                    w.line(
                        "    cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, cst.index)], tCrB[(None, None, kb, cst.index)], acc)"
                    )
                    w.line("    tiled_mma.set(warpgroup.Field.ACCUMULATE, True)")
                    w.line("warpgroup.commit_group()")
                    w.line("warpgroup.wait_group(1)")
                    w.line("if k > 0:")
                    w.line("    pipe.consumer_release(rst)")
                    w.line("    rst.advance()")
                    w.line("cst.advance()")
                w.line("warpgroup.wait_group(0)")
                w.line("pipe.consumer_release(rst)")
                w.line("acc_shape = acc.shape")
                w.line(
                    f"tCcC = thr.partition_C(cute.local_tile(cute.make_identity_tensor(({plan.m}, {plan.n})), ({plan.bm}, {plan.bn}), (pid_m, pid_n)))"
                )
                self._epilogue()
            if cluster_size > 1:
                # no CTA may exit while its cluster peers can still signal its barriers
                w.line("cute.arch.cluster_arrive()")
                w.line("cute.arch.cluster_wait()")
        module.w.lines(w.text().splitlines())
        a_tensor = plan.a_load.attrs["tensor"]
        b_tensor = plan.b_load.attrs["tensor"]
        a_ptr = module.tensor_params[a_tensor.index]
        b_ptr = module.tensor_params[b_tensor.index]
        major = "cute.nvgpu.OperandMajorMode"
        grid = (
            (num_m * num_n)
            if cluster_size == 1
            else (-(-num_m // cm) * cm) * (-(-num_n // cn) * cn)
        )
        launch = [
            f"{self.name}_mA = cute.make_tensor({a_ptr}, cute.make_layout(({plan.m}, {plan.k}), stride=({a_tensor.stride[0]}, {a_tensor.stride[1]})))",
            # B[k, n] is viewed as (N, K): wgmma's B operand is N x K
            f"{self.name}_mB = cute.make_tensor({b_ptr}, cute.make_layout(({plan.n}, {plan.k}), stride=({b_tensor.stride[1]}, {b_tensor.stride[0]})))",
            f"{self.name}_a, {self.name}_b = {layouts}()",
        ]
        if cluster_size > 1:
            op_a = (
                "cpasync.CopyBulkTensorTileG2SMulticastOp()"
                if cn > 1
                else "cpasync.CopyBulkTensorTileG2SOp()"
            )
            op_b = (
                "cpasync.CopyBulkTensorTileG2SMulticastOp()"
                if cm > 1
                else "cpasync.CopyBulkTensorTileG2SOp()"
            )
        else:
            op_a = op_b = "cpasync.CopyBulkTensorTileG2SOp()"
        launch += [
            f"{self.name}_ta, {self.name}_tA = cpasync.make_tiled_tma_atom({op_a}, {self.name}_mA, cute.select({self.name}_a, mode=[0, 1]), ({plan.bm}, {plan.bk}), {cn})",
            f"{self.name}_tb, {self.name}_tB = cpasync.make_tiled_tma_atom({op_b}, {self.name}_mB, cute.select({self.name}_b, mode=[0, 1]), ({plan.bn}, {plan.bk}), {cm})",
            f"{self.name}_op = warpgroup.MmaF16BF16Op({dt}, cutlass.Float32, (64, {plan.bn}, 16), warpgroup.OperandSource.SMEM, "
            f"{major}.{'K' if plan.a_k_major else 'MN'}, {major}.{'K' if plan.b_k_major else 'MN'})",
            f"{self.name}_mma = cute.make_tiled_mma(cute.make_mma_atom({self.name}_op), ({consumers}, 1, 1))",
            f"{self.name}({self.name}_ta, {self.name}_tA, {self.name}_tb, {self.name}_tB, {self.name}_mma, {', '.join(module.kernel_args())}).launch(",
            f"    grid=({grid}, 1, 1), block=({threads}, 1, 1)"
            + (f", cluster=({cm * cn}, 1, 1)" if cluster_size > 1 else "")
            + ", stream=stream)",
        ]
        return launch

    def _pid(self, counts: list[str], order: list[int], group: int) -> None:
        """pid -> (pid_m, pid_n); ``order[0]`` is the dim that varies fastest."""
        w = self.w
        fast, slow = (order[0], order[1]) if sorted(order) == [0, 1] else (0, 1)
        n_fast, n_slow = counts[fast], counts[slow]
        names = {0: "pid_m", 1: "pid_n"}
        if group > 1:
            w.line(f"ing = {group} * {n_fast}")
            w.line(f"first = (pid // ing) * {group}")
            w.line(f"rows = cutlass.min({n_slow} - first, {group})")
            w.line(f"{names[slow]} = first + (pid % ing) % rows")
            w.line(f"{names[fast]} = (pid % ing) // rows")
        else:
            w.line(f"{names[fast]} = pid % {n_fast}")
            w.line(f"{names[slow]} = pid // {n_fast}")

    def _epilogue(self) -> None:
        context = EpilogueContext(self)
        for scalar in self.module.ir.scalar_args:
            context.env[scalar.value.id] = CVal(
                self.module.scalar_params[scalar.value.id], "scalar", scalar.dtype
            )
        body = self.loop.regions[0]
        for arg, block_id, coordinate in zip(
            body.args, (self.plan.m_block, self.plan.n_block), ("pid_m", "pid_n"), strict=False
        ):
            size = self.plan.bm if coordinate == "pid_m" else self.plan.bn
            tile = TileVar(
                block_id,
                self.module.ir.block(block_id).symbol,
                f"({coordinate} * {size})",
                "0",
                size,
                None,
            )
            context.env[arg.id] = CVal(tile.begin, "tile", None, tile=tile)
        context.env[self.plan.k_loop.outputs[0].id] = context.define(
            "v", "acc.load()", kind="frag", dtype=torch.float32, axes=frozenset(["acc"])
        )
        preamble = [n for n in self.preamble]
        context.emit(preamble)
        context.emit(self.plan.epilogue)


__all__ = ["MatmulEmitter", "MatmulPlan", "literal", "plan_matmul", "sympy"]
