"""The Triton backend's view of a Config, and the search space it offers.

``TritonOptions`` is the typed, validated form of a Config that the code generator reads (one
object per compile). ``adjust_spec`` adds the Triton-only tunables to a kernel's ConfigSpec and
restricts the core ones to what this Triton, this device and this kernel can do;
``seed_configs`` gives the autotuner heuristic starting points.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from typing import Any
from typing import Sequence

from helion import exc
from helion.autotuner.config_fragment import EnumFragment
from helion.ir.core import KernelIR
from helion.ir.core import TileType
from helion.language import _ops as ops
from helion.runtime.config import Config
from helion_triton.analysis import KernelAnalysis
from helion_triton.target import TritonTarget
from helion_triton.target import unrolled_reduction_loops_ok

# tl.range keyword of each per-loop range tunable
RANGE_FIELDS = {
    "range_unroll_factors": "loop_unroll_factor",
    "range_num_stages": "num_stages",
    "range_multi_buffers": "disallow_acc_multi_buffer",
    "range_flattens": "flatten",
    "range_warp_specializes": "warp_specialize",
}
# CUDA limit on the y and z launch-grid dimensions
MAX_GRID_YZ = 65535
# tl.static_range only for loops this short (longer ones would blow up compile time)
MAX_STATIC_RANGE_ITERATIONS = 8
EVICTION_NAMES = {
    "": None,
    "first": "evict_first",
    "last": "evict_last",
    "evict_first": "evict_first",
    "evict_last": "evict_last",
}


@dataclasses.dataclass(frozen=True)
class TritonOptions:
    """A normalized Config as the Triton code generator uses it."""

    block_sizes: tuple[int, ...]
    loop_orders: tuple[tuple[int, ...], ...]
    flatten_loops: tuple[bool, ...]
    l2_groupings: tuple[int, ...]
    reduction_loops: tuple[int | None, ...]
    range_options: tuple[dict[str, Any], ...]
    static_ranges: tuple[bool, ...]
    indexing: tuple[str, ...]
    load_eviction_policies: tuple[str, ...]
    pid_type: str
    num_warps: int
    num_stages: int
    maxnreg: int | None
    # persistent kernels launch this many programs per SM (other pid types ignore it)
    num_sm_multiplier: int = 1

    @classmethod
    def from_config(cls, config: Config, ir: KernelIR, target: TritonTarget) -> TritonOptions:
        inner_loops = ir.inner_loops()
        n_inner = len(inner_loops)
        range_options: list[dict[str, Any]] = [{} for _ in range(n_inner)]
        for field, keyword in RANGE_FIELDS.items():
            values = _list(config.get(field), n_inner, None)
            if keyword not in target.range_kwargs:
                continue
            for index, value in enumerate(values):
                if value is None:
                    continue
                if (
                    field == "range_unroll_factors"
                    and not unrolled_reduction_loops_ok()
                    and _reduces(inner_loops[index])
                ):
                    continue  # this Triton crashes compiling it (unrolled_reduction_loops_ok)
                if field in ("range_unroll_factors", "range_num_stages"):
                    if int(value) > 0:
                        range_options[index][keyword] = int(value)
                elif field == "range_multi_buffers":
                    range_options[index][keyword] = not value
                else:
                    range_options[index][keyword] = bool(value)
        n_memory = sum(1 for m in ir.memory_ops() if m.kind in ("load", "store"))
        n_loads = sum(1 for m in ir.memory_ops() if m.kind == "load")
        pid_type = str(config.get("pid_type", "flat") or "flat")
        if pid_type not in ("flat", "xyz", "persistent_blocked", "persistent_interleaved"):
            raise exc.InvalidConfig(f"unknown pid_type {pid_type!r}")
        maxnreg = config.get("maxnreg")
        return cls(
            block_sizes=tuple(int(b) for b in config.get("block_sizes", ()) or ()),
            loop_orders=tuple(
                tuple(int(i) for i in order) for order in config.get("loop_orders", ()) or ()
            ),
            flatten_loops=tuple(_list(config.get("flatten_loops"), 0, False)),
            l2_groupings=tuple(int(g) for g in _list(config.get("l2_groupings"), 0, 1)),
            reduction_loops=tuple(_list(config.get("reduction_loops"), 0, None)),
            range_options=tuple(range_options),
            static_ranges=tuple(
                bool(s) for s in _list(config.get("static_ranges"), n_inner, False)
            ),
            indexing=tuple(_list(config.get("indexing"), n_memory, "pointer")),
            load_eviction_policies=tuple(_list(config.get("load_eviction_policies"), n_loads, "")),
            pid_type=pid_type,
            num_warps=int(config.get("num_warps", 4) or 4),
            num_stages=int(config.get("num_stages", 1) or 1),
            maxnreg=_effective_maxnreg(maxnreg, int(config.get("num_warps", 4) or 4), target),
            num_sm_multiplier=int(config.get("num_sm_multiplier", 1) or 1),
        )

    def loop_order(self, index: int | None, ndim: int) -> list[int]:
        if index is None or index >= len(self.loop_orders) or len(self.loop_orders[index]) != ndim:
            return list(range(ndim))
        return list(self.loop_orders[index])

    @staticmethod
    def item(values: Sequence[Any], index: int | None, default: Any) -> Any:
        if index is None or index >= len(values):
            return default
        return values[index]


# registers of one SM (every NVIDIA GPU since Kepler): a program cannot have more
REGISTERS_PER_SM = 65536


def _effective_maxnreg(maxnreg: Any, num_warps: int, target: TritonTarget) -> int | None:
    """``maxnreg`` capped so that a program of ``num_warps`` still fits in one SM's registers
    (more registers per thread than that cannot be allocated to all of its threads)."""
    if not maxnreg or not target.is_cuda:
        return None
    cap = REGISTERS_PER_SM // (num_warps * 32)
    return min(int(maxnreg), cap - cap % 8)


def _list(value: Any, length: int, default: Any) -> list[Any]:
    """A per-item config value as a list of ``length`` (a scalar broadcasts)."""
    if value is None:
        return [default] * length
    if isinstance(value, (list, tuple)):
        items = list(value)
        return items + [default] * (length - len(items))
    return [value] * max(length, 1)


# ---------------------------------------------------------------------------------------------
# the search space


def adjust_spec(ir: KernelIR, spec: Any, target: TritonTarget, analysis: KernelAnalysis) -> None:
    """Add Triton tunables to ``spec`` and restrict the core ones to what can be generated."""
    for field, keyword in RANGE_FIELDS.items():
        if field in spec and keyword not in target.range_kwargs:
            spec.remove(field)
    if target.supports_warp_specialize and "warp_specialize" in target.range_kwargs:
        for _loop in ir.inner_loops():
            spec.append("range_warp_specializes", EnumFragment((None, False, True)))
    if target.is_cuda:
        spec.set_scalar("maxnreg")
        if any(node.op is ops.dot for node in ir.walk()):
            # an MMA keeps its accumulator fragments in registers ptxas cannot spill: a cap below
            # what it needs fails to compile ("Insufficient registers"), it does not just run
            # slower (13 of 40 candidates of an H100 quick search of matmul, fp8 and attention).
            # Hand-written configs may still set one
            choices = spec["maxnreg"].fragment.choices
            spec.set_scalar("maxnreg", EnumFragment(choices, search_choices=(None,)))
    elif "maxnreg" in spec:
        spec.remove("maxnreg")

    if "indexing" in spec:
        spec.restrict("indexing", target.indexing_choices(), reason=_indexing_reason(target))
    if "pid_type" in spec and not _xyz_fits(ir, spec):
        allowed = [
            p
            for p in ("flat", "persistent_blocked", "persistent_interleaved")
            if _allows(spec, "pid_type", p)
        ]
        if allowed:
            spec.restrict(
                "pid_type", allowed, reason="the launch grid is too tall for pid_type='xyz'"
            )
    if _multiplier_applies(ir, spec):
        # powers of two in [1, 128], default 1; not searched: it means nothing to the flat and
        # xyz configs that are most of the search, which would measure each one several times
        spec.set_scalar("num_sm_multiplier", _MULTIPLIER)

    if "reduction_loops" in spec:
        for info in ir.reduction_blocks():
            if info.block_id in analysis.rdim_infeasible and info.config_index is not None:
                fragment = spec["reduction_loops"].fragments[info.config_index]
                spec.set_item(
                    "reduction_loops",
                    info.config_index,
                    fragment.restrict([None]),
                    reason=_persistent_reason(info, analysis.rdim_infeasible[info.block_id]),
                )
    if "flatten_loops" in spec:
        for loop_id, index in analysis.flatten_index.items():
            if loop_id in analysis.flatten_problems:
                fragment = spec["flatten_loops"].fragments[index]
                spec.set_item("flatten_loops", index, fragment.restrict([False]))
    if "static_ranges" in spec:
        for loop in ir.inner_loops():
            index = analysis.inner_loop_index[loop.loop_id]
            if not _static_range_possible(ir, spec, loop):
                fragment = spec["static_ranges"].fragments[index]
                spec.set_item("static_ranges", index, fragment.restrict([False]))


def _persistent_reason(info: Any, problem: str) -> str:
    """Why the Triton backend keeps reduction dimension ``info`` whole, with its source."""
    where = ""
    loc = info.loc
    if loc is not None:
        where = f" at {loc.filename}:{loc.lineno}"
        line = loc.line()
        if line and line.strip():
            where += f" `{line.strip()}`"
    return (
        f"the triton backend cannot loop over the reduction dimension {info.symbol}{where} "
        f"in chunks: {problem}"
    )


PERSISTENT_PID_TYPES = ("persistent_blocked", "persistent_interleaved")
_MULTIPLIER = EnumFragment(tuple(2**i for i in range(8)), search_choices=(1,))


def _multiplier_applies(ir: KernelIR, spec: Any) -> bool:
    """Whether ``num_sm_multiplier`` means something for this kernel: it allows a persistent
    pid type and has no ``hl.barrier()`` (a grid barrier needs every program resident at once,
    which more programs than SMs would not be: such kernels keep one program per SM, and a
    multiplier in their configs is dropped like any key the kernel does not have)."""
    if "pid_type" not in spec or ir.uses_barrier:
        return False
    return any(_allows(spec, "pid_type", p) for p in PERSISTENT_PID_TYPES)


def _indexing_reason(target: TritonTarget) -> str:
    if target.interpret:
        return "the Triton interpreter runs pointer (and block_ptr where Triton has it) indexing"
    return "tensor_descriptor needs CUDA capability >= 9.0 and tl.make_tensor_descriptor"


def _allows(spec: Any, name: str, value: Any) -> bool:
    fragment = spec[name].fragment
    return fragment.is_valid(value)


def _min_block(ir: KernelIR, spec: Any, block_id: int) -> int:
    info = ir.block(block_id)
    if (
        info.kind == "tile"
        and info.config_index is not None
        and info.config_index < len(spec.block_sizes)
    ):
        fragment = spec.block_sizes[info.config_index]
        return int(getattr(fragment, "low", 1))
    return int(info.fixed_value or 1)


def _max_block(ir: KernelIR, spec: Any, block_id: int) -> int:
    info = ir.block(block_id)
    if (
        info.kind == "tile"
        and info.config_index is not None
        and info.config_index < len(spec.block_sizes)
    ):
        fragment = spec.block_sizes[info.config_index]
        return int(getattr(fragment, "high", info.size_hint))
    return int(info.fixed_value or 1)


def _xyz_fits(ir: KernelIR, spec: Any) -> bool:
    top = ir.top_level_loops()
    if len(top) != 1 or not 2 <= len(top[0].block_ids) <= 3:
        return True  # core does not offer xyz here anyway
    counts = [math.ceil(ir.block(b).size_hint / _min_block(ir, spec, b)) for b in top[0].block_ids]
    return max(counts) <= MAX_GRID_YZ


def _static_range_possible(ir: KernelIR, spec: Any, loop: Any) -> bool:
    node = loop.node
    if node is None:
        return False
    bounds = list(node.attrs["begins"]) + list(node.attrs["ends"])
    if not all(isinstance(b, int) for b in bounds):
        return False
    iterations = 1
    for block_id, begin, end in zip(
        loop.block_ids, node.attrs["begins"], node.attrs["ends"], strict=False
    ):
        step = 1 if node.attrs["is_grid"] else _max_block(ir, spec, block_id)
        iterations *= max(math.ceil((end - begin) / step), 0)
    return iterations <= MAX_STATIC_RANGE_ITERATIONS


# ---------------------------------------------------------------------------------------------
# seed configs


def seed_configs(
    ir: KernelIR, spec: Any, target: TritonTarget, analysis: KernelAnalysis
) -> list[Config]:
    """Heuristic starting points: matmul-like, reduction-like or pointwise by the kernel's ops."""
    base = dict(spec.default_config())
    has_dot = any(node.op is ops.dot for node in ir.walk())
    reduces = any(node.op.reduction for node in ir.walk())
    if has_dot:
        candidates = _matmul_seeds(ir, spec, target)
    elif reduces:
        candidates = _reduction_seeds(ir, spec, analysis)
    elif ir.reduction_blocks():
        # whole slices (rope's `x[..., :half]`) but nothing reduced: pointwise, the slice
        # lanes counted in each program's share of elements
        widest = max(b.size_hint for b in ir.reduction_blocks())
        candidates = _pointwise_seeds(ir, spec, slice_lanes=_next_power_of_2(widest))
    else:
        candidates = _pointwise_seeds(ir, spec)
    seeds: list[Config] = []
    seen: set[Config] = set()
    for overrides in candidates:
        values = dict(base)
        values.update({k: v for k, v in overrides.items() if k in spec or k == "block_sizes"})
        if "block_sizes" in values:
            values["block_sizes"] = _clamp_blocks(spec, values["block_sizes"])
        config = Config(**values)
        if config not in seen:
            seen.add(config)
            seeds.append(config)
    return seeds


def _clamp_blocks(spec: Any, sizes: Sequence[int]) -> list[int]:
    return [fragment.clamp(size) for fragment, size in zip(spec.block_sizes, sizes, strict=False)]


def _block_roles(ir: KernelIR) -> list[tuple[int, str]]:
    """(config index, role) per tunable block: "outer" / "inner" dims of top-level / inner loops,
    "batch" for top-level dims that do not enter a dot as M or N."""
    roles = []
    top_level_blocks = {b for loop in ir.top_level_loops() for b in loop.block_ids}
    has_dot = any(info.used_in_dot for info in ir.tunable_blocks())
    for info in ir.tunable_blocks():
        if info.block_id not in top_level_blocks:
            roles.append((info.config_index, "inner"))
        elif has_dot and not info.used_in_dot:
            roles.append((info.config_index, "batch"))
        else:
            roles.append((info.config_index, "outer"))
    return roles


def _inner_block_is_a_dot_output(ir: KernelIR) -> bool:
    """Does an inner loop's block give the N of a dot (attention's keys: ``q @ k_tile.T``)?
    Then that block is also the K of the next dot (``p @ v_tile``), not a matmul's thin K."""
    top_level = {b for loop in ir.top_level_loops() for b in loop.block_ids}
    inner = {info.symbol for info in ir.tunable_blocks() if info.block_id not in top_level}
    return any(node.op is ops.dot and node.inputs[1].shape[-1] in inner for node in ir.walk())


def _matmul_seeds(ir: KernelIR, spec: Any, target: TritonTarget) -> list[dict[str, Any]]:
    shapes = [
        (64, 64, 32, 4, 3),
        (128, 128, 32, 8, 3),
        (128, 64, 64, 4, 4),
        (64, 128, 64, 4, 4),
        (128, 256, 64, 8, 3),
    ]
    if _inner_block_is_a_dot_output(ir):
        # 128 query rows by 128 keys on 8 warps: on an H200 (Triton 3.6) 397 TFLOP/s for
        # 4x32x4096x128 bf16 attention and 303 causal, against 357 / 297 for the best
        # matmul-shaped seed (64x32 on 4 warps)
        shapes.insert(0, (128, 128, 128, 8, 3))
        # two chained dots hold two 128-row tiles: on 4 warps ptxas spills (572 bytes for
        # attention's 128x64 tile), on 8 it does not (177 registers)
        shapes = [(m, n, k, 8 if m >= 128 else warps, stages) for m, n, k, warps, stages in shapes]
    seeds = []
    for m, n, k, warps, stages in shapes:
        sizes = []
        outer_seen = 0
        for _index, role in _block_roles(ir):
            if role == "outer":
                sizes.append(m if outer_seen % 2 == 0 else n)
                outer_seen += 1
            elif role == "batch":
                sizes.append(1)
            else:
                sizes.append(k)
        seed: dict[str, Any] = {"block_sizes": sizes, "num_warps": warps, "num_stages": stages}
        if spec.length("l2_groupings"):
            seed["l2_groupings"] = [8] * spec.length("l2_groupings")
        if target.supports_tensor_descriptor and spec.length("indexing"):
            seed["indexing"] = ["tensor_descriptor"] * spec.length("indexing")
        seeds.append(seed)
    return seeds


def _reduction_seeds(ir: KernelIR, spec: Any, analysis: KernelAnalysis) -> list[dict[str, Any]]:
    widest = max((b.size_hint for b in ir.reduction_blocks()), default=1)
    warps = 16 if widest >= 8192 else 8 if widest >= 2048 else 4
    # whole rows in registers (a persistent reduction) read each element once: the first choice
    # wherever the analysis allows it; the default config may loop, so say so explicitly
    persistent = [
        None if info.block_id not in analysis.rdim_infeasible else default
        for info, default in zip(
            ir.reduction_blocks(), spec.default_config().get("reduction_loops", []), strict=False
        )
    ]
    # evict_last on the row loads measured 3-4% faster than the default policy for 8192-wide bf16
    # softmax and RMSNorm on an H200 (4.0 vs 3.85 TB/s, one row per program, 4 to 16 warps)
    n_loads = spec.length("load_eviction_policies")
    seeds = []
    for rows, row_warps, policy in (
        (1, warps, "last"),
        (1, max(4, warps // 2), "last"),
        (1, warps, ""),
        (2, warps, "last"),
        (4, warps, ""),
        (16, warps, ""),
    ):
        if rows * widest > 65536 and rows > 1:
            continue
        sizes = [rows if role == "outer" else 32 for _index, role in _block_roles(ir)]
        seed: dict[str, Any] = {"block_sizes": sizes, "num_warps": row_warps}
        if persistent and spec.length("reduction_loops") == len(persistent):
            seed["reduction_loops"] = persistent
        if n_loads:
            seed["load_eviction_policies"] = [policy] * n_loads
        seeds.append(seed)
    if widest >= 8192 and spec.length("reduction_loops"):
        loops = []
        for info in ir.reduction_blocks():
            looped = info.block_id not in analysis.rdim_infeasible and info.size_hint >= 8192
            loops.append(2048 if looped else None)
        sizes = [1 if role == "outer" else 32 for _index, role in _block_roles(ir)]
        # warps for the 2048-wide chunk, not the row: on an H200 cross entropy over 128256
        # logits ran 1.9x faster with 4 warps than with 16
        for loop_warps in (4, 8):
            seeds.append({"block_sizes": sizes, "num_warps": loop_warps, "reduction_loops": loops})
        # and 4096-wide chunks on 4 warps, 3 stages: 3.53 TB/s there against 3.36 for 2048
        wider = [4096 if loop == 2048 else loop for loop in loops]
        seeds.insert(
            len(seeds) - 2,
            {"block_sizes": sizes, "num_warps": 4, "num_stages": 3, "reduction_loops": wider},
        )
    return seeds


def _pointwise_seeds(ir: KernelIR, spec: Any, slice_lanes: int = 1) -> list[dict[str, Any]]:
    seeds = []
    # (elements per program, warps, most elements along the innermost dim): 8 elements a
    # thread, and 16 for kernels with more math per element (geglu 8192x14336 bf16 on an H200:
    # 2048 on 4 warps 4.00 TB/s, 1024 on 4 3.84). The last two are the quick search's picks in
    # the second session of 2026-12-04 on an H200, 16 elements a thread over several rows: add
    # 8192^2 bf16 [16, 1024] on 32 warps (4.16 TB/s, 97.5% of copy, where the third session's
    # pick made 3.93) and swiglu 8192x14336 bf16 [2, 2048] on 8 warps (4.27 TB/s)
    shares = (
        (1024, 4, None),
        (2048, 8, None),
        (512, 4, None),
        (2048, 4, None),
        (4096, 8, 2048),
        (16384, 32, 1024),
    )
    if slice_lanes > 1:
        # rope (4x4096x(32+8)x128 bf16, 64-lane halves) on an H200: 4096 elements per access
        # on 8 warps ran at 3.82 TB/s, 2048 on 4 at 3.70, the row-per-program seeds at 3.45
        shares = ((4096, 8, None), (2048, 4, None), (1024, 4, None))
    for elements, warps, innermost in shares:
        sizes = [1] * len(spec.block_sizes)
        budget = max(1, elements // slice_lanes)
        # the innermost (last) dim of each loop first: it is the contiguous one
        for index in reversed(range(len(sizes))):
            fragment = spec.block_sizes[index]
            limit = int(getattr(fragment, "high", budget))
            if innermost is not None and index == len(sizes) - 1 and index > 0:
                limit = min(limit, innermost)  # the rest of the share goes to the outer dims
            size = fragment.clamp(min(budget, limit))
            sizes[index] = size
            budget = max(1, budget // size)
        seeds.append({"block_sizes": sizes, "num_warps": warps})
    orders = contiguous_loop_orders(ir)
    if orders and len(orders) == spec.length("loop_orders"):
        for seed in seeds:
            seed["loop_orders"] = orders
    return seeds


def contiguous_loop_orders(ir: KernelIR) -> list[list[int]]:
    """A ``loop_orders`` entry per loop of several dims: its dims by the stride they step in the
    largest tensor they index, smallest first (the first of an order varies fastest, across
    programs and across the lanes of a flattened loop), so neighbouring programs touch
    neighbouring memory. The default order walks the first dim fastest; for rope's
    ``[batch, seq, heads, head_dim]`` (batch 4) neighbouring programs were then 32 MB apart, and
    seq-fastest ran 2.3% faster on an H200 (3.865 against 3.778 TB/s)."""
    steps: dict[int, tuple[int, int]] = {}  # block id -> (numel of the tensor, stride)
    for memory in ir.memory_ops():
        tensor = memory.tensor
        numel = math.prod(tensor.shape)
        dim = 0
        for item in memory.node.attrs.get("items", ()):
            if item[0] == "none":
                continue
            if item[0] == "tile" and dim < len(tensor.stride):
                value = memory.node.inputs[item[1]]
                block_id = value.type.block_id if isinstance(value.type, TileType) else None
                if block_id is not None:
                    candidate = (numel, -int(tensor.stride[dim]))
                    steps[block_id] = max(steps.get(block_id, candidate), candidate)
            dim += 1
    orders = []
    for loop in ir.loops:
        if len(loop.block_ids) > 1:
            strides = [-steps[b][1] if b in steps else math.inf for b in loop.block_ids]
            orders.append(sorted(range(len(strides)), key=strides.__getitem__))
    return orders


# ---------------------------------------------------------------------------------------------
# configs Triton is known to reject


def max_tensor_numel() -> int:
    """The most elements Triton allows in one tensor (2**20 in every release so far)."""
    try:
        from triton.language.core import TRITON_MAX_TENSOR_NUMEL
    except ImportError:
        return 1 << 20
    return int(TRITON_MAX_TENSOR_NUMEL)


def _next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


# per IR, computed once: the search asks about many candidate configs of one kernel
_TILE_SHAPES: weakref.WeakKeyDictionary[KernelIR, list[tuple[list[Any], str, bool]]] = (
    weakref.WeakKeyDictionary()
)


def _tile_shapes(ir: KernelIR) -> list[tuple[list[Any], str, bool]]:
    """Each in-register value's shape as entries the config resolves: an int (a fixed extent),
    a block id, or a sympy expression of block symbols; with where it was computed and whether
    it is a dot's result (an MMA accumulator)."""
    cached = _TILE_SHAPES.get(ir)
    if cached is not None:
        return cached
    import sympy

    from helion.ir.core import TensorType

    block_of = {info.symbol: info.block_id for info in ir.block_sizes}
    shapes: list[tuple[list[Any], str, bool]] = []
    seen: set[tuple[Any, ...]] = set()
    for node in ir.walk():
        for value in node.outputs:
            if not isinstance(value.type, TensorType) or not value.type.shape:
                continue
            entries: list[Any] = []
            for dim in value.type.shape:
                if isinstance(dim, int) or (isinstance(dim, sympy.Expr) and dim.is_Integer):
                    entries.append(_next_power_of_2(int(dim)))
                elif isinstance(dim, sympy.Symbol) and dim in block_of:
                    entries.append(("block", block_of[dim]))
                elif isinstance(dim, sympy.Expr) and dim.free_symbols <= set(block_of):
                    entries.append(dim)
                else:
                    entries = []  # a dimension the config does not fix: not judged here
                    break
            is_dot = node.op is ops.dot
            key = (*entries, is_dot)
            if entries and any(not isinstance(e, int) for e in entries) and key not in seen:
                seen.add(key)
                where = f"{node.loc}" if node.loc is not None else node.op.name
                shapes.append((entries, where, is_dot))
    _TILE_SHAPES[ir] = shapes
    return shapes


# registers a GPU thread can hold; an MMA accumulator must fit in them
MAX_REGISTERS_PER_THREAD = 255


def _reduces(loop: Any) -> bool:
    """Whether an inner loop's body (nested loops included) reduces a tile."""
    return loop.node is not None and any(
        node.op.reduction for region in loop.node.regions for node in region.walk()
    )


def tile_problem(ir: KernelIR, config: Config, *, gpu: bool = False) -> str | None:
    """Why Triton would reject ``config`` for this kernel: a tile over its element limit, or
    (``gpu``) a dot accumulator that cannot fit in the registers of the program's threads."""
    from helion_triton.codegen import resolve_blocks

    limit = max_tensor_numel()
    try:
        # the extents the code generator will use; the spec already keeps infeasible looped
        # reductions at None, so none are excluded here
        extents, _, _ = resolve_blocks(
            ir,
            list(config.get("block_sizes", ()) or ()),
            list(config.get("reduction_loops", ()) or ()),
            (),
        )
    except exc.InvalidConfig:
        return None  # not a tile-size question: compiling it reports what is wrong
    symbols = {info.symbol: extents[info.block_id] for info in ir.block_sizes}
    threads = 32 * int(config.get("num_warps", 4) or 4)
    rows = _register_judged_rows(ir, config) if gpu else {}
    for entries, where, is_dot in _tile_shapes(ir):
        numel = 1
        for entry in entries:
            if isinstance(entry, int):
                numel *= entry
            elif isinstance(entry, tuple):
                numel *= extents[entry[1]]
            else:
                numel *= _next_power_of_2(int(entry.subs(symbols)))
        if numel > limit:
            return (
                f"a tile of {numel} elements ({where}) is over Triton's limit of "
                f"{limit} elements per tensor"
            )
        if gpu and is_dot and numel > MAX_REGISTERS_PER_THREAD * threads:
            # e.g. a 1024 x 1024 fp32 accumulator on 16 warps: 2048 registers a thread, which
            # ptxas refuses after a long compile
            return (
                f"a dot result of {numel} elements ({where}) needs {numel // threads} registers "
                f"per thread with {threads // 32} warps; a thread has {MAX_REGISTERS_PER_THREAD}"
            )
        kinds = {rows[e[1]] for e in entries if isinstance(e, tuple) and e[1] in rows}
        if kinds and numel > MAX_REGISTERS_PER_THREAD * threads:
            # the value alone outgrows a thread's registers, so it spills. A whole row could
            # loop instead (H200, cross entropy over 128256 logits: whole rows on 8 or 16 warps
            # spilled 3.7-5.6 KB a thread and ran at 0.58-0.88 TB/s, looped rows at 3.4-3.5); a
            # looped chunk is held whole while it is reduced (sm_90 ptxas, Triton 3.6: cross
            # entropy's [64, 512] chunk on 1 warp spilled 15480 bytes a thread)
            need = (
                f"needs {numel // threads} registers per thread with {threads // 32} warps "
                f"(a thread has {MAX_REGISTERS_PER_THREAD}) and would spill"
            )
            if "whole" in kinds:
                return (
                    f"a whole-row tile of {numel} elements ({where}) {need}; loop the reduction "
                    f"instead (reduction_loops)"
                )
            return (
                f"a reduction chunk of {numel} elements ({where}) {need}; use a smaller chunk "
                f"(reduction_loops), fewer rows (block_sizes) or more warps"
            )
    return None


def _register_judged_rows(ir: KernelIR, config: Config) -> dict[int, str]:
    """Reduction blocks whose tiles must fit a thread's registers: ``"whole"`` for a row that
    ``config`` keeps whole (``reduction_loops`` entry None) although the backend could loop
    it, ``"chunk"`` for a row it loops over in chunks. A row that cannot loop is left to the
    compiler: no config could do better."""
    from helion_triton.analysis import analyze

    loops = list(config.get("reduction_loops", ()) or ())
    infeasible = analyze(ir).rdim_infeasible
    rows = {}
    for info in ir.reduction_blocks():
        index = info.config_index
        if index is None:
            continue
        if index < len(loops) and loops[index] is not None:
            rows[info.block_id] = "chunk"
        elif info.block_id not in infeasible:
            rows[info.block_id] = "whole"
    return rows
