"""The tunables the CuTe backend honours, and the typed options a Config turns into.

Core derives a ConfigSpec from the IR; :func:`edit_spec` removes what this backend ignores and
adds its own keys. :meth:`CuteOptions.from_config` validates a config once, so code generation
reads typed fields instead of loose dict entries.

Honoured core keys: ``block_sizes``, ``loop_orders`` (order of the program id decomposition and
of inner multi-dimensional loops), ``l2_groupings`` (program-id swizzle), ``range_unroll_factors``
(unrolling of inner loops), ``load_eviction_policies`` (L1 eviction priority of loads) and,
for kernels with a matmul, ``num_stages`` (depth of the TMA pipeline).

Backend keys:

* ``num_threads``: one entry, threads per CTA (0 = derived: 128 for SIMT programs, one producer
  warpgroup plus one consumer warpgroup per 64 rows for wgmma matmuls).
* ``cute_vector_widths``: one entry per load/store, elements moved by one vector instruction
  (0 = the widest the alignment allows; always capped to what is safe).
* ``cute_cluster_shape``: for matmuls, the thread-block cluster (``"1x1"``, ``"2x1"``, ``"1x2"``);
  the operand tile shared by a cluster is multicast by TMA.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from helion.autotuner.config_fragment import EnumFragment
from helion.autotuner.config_fragment import IntegerFragment
from helion.autotuner.config_fragment import NumThreadsFragment
from helion.ir.core import KernelIR
from helion.language import _ops as ops
from helion.runtime.config import Config

VECTOR_WIDTHS = (0, 1, 2, 4, 8, 16)
CLUSTER_SHAPES = ("1x1", "2x1", "1x2")
DEFAULT_THREADS = 128
MAX_THREADS = 1024
DEFAULT_STAGES = 4

# core tunables whose feature this backend does not have (configs naming them stay valid)
IGNORED_CORE_FIELDS = (
    "flatten_loops",
    "reduction_loops",
    "range_num_stages",
    "range_multi_buffers",
    "range_flattens",
    "range_warp_specializes",
    "static_ranges",
    "num_warps",
    "pid_type",
    "indexing",
    "num_sm_multiplier",
    "maxnreg",
    "atomic_indexing",
    "load_cache_modifiers",
    "store_cache_modifiers",
    "epilogue_subtile",
    "xcd_remap",
)


def has_dot(ir: KernelIR) -> bool:
    return any(node.op is ops.dot for node in ir.walk())


def edit_spec(ir: KernelIR, spec: Any) -> None:
    """Remove the core tunables the CuTe path ignores and add its own (see the module doc)."""
    for name in IGNORED_CORE_FIELDS:
        spec.remove(name)
    dot = has_dot(ir)
    if dot:
        spec.set_scalar("num_stages", IntegerFragment(2, 8, DEFAULT_STAGES))
        spec.set_scalar("cute_cluster_shape", EnumFragment(CLUSTER_SHAPES))
        _prefer_wgmma_tiles(ir, spec)
    else:
        spec.remove("num_stages")
    spec.append("num_threads", NumThreadsFragment(MAX_THREADS, 32))
    for mem in ir.memory_ops():
        if mem.kind in ("load", "store"):
            spec.append("cute_vector_widths", EnumFragment(VECTOR_WIDTHS))


def _prefer_wgmma_tiles(ir: KernelIR, spec: Any) -> None:
    """Default the dot tiles of a matmul to a warpgroup-MMA friendly 128x128x64 (batch dims 1)."""
    fragments = spec.block_sizes
    if not fragments:
        return
    defaults = [f.default() for f in fragments]
    for loop in ir.loops:
        blocks = [ir.block(b) for b in loop.block_ids if ir.block(b).kind == "tile"]
        for info in blocks:
            if info.config_index is None:
                continue
            if not info.used_in_dot:
                # a batch dim of a batched dot: one slice per program. Several slices per
                # program multiply the code cute.compile must build (4 took it minutes)
                if loop.top_level:
                    defaults[info.config_index] = fragments[info.config_index].clamp(1)
                continue
            wanted = 128 if loop.top_level else 64
            defaults[info.config_index] = fragments[info.config_index].clamp(wanted)
    spec.default_overrides["block_sizes"] = defaults


def seed_configs(ir: KernelIR, spec: Any) -> list[Config]:
    """Known-good starting points for the autotuner."""
    base = spec.default_config()
    seeds: list[Config] = [base]
    if has_dot(ir):
        tiles = [(128, 256, 64, 4), (128, 128, 64, 5), (64, 128, 64, 6), (128, 64, 64, 6)]
        dot_blocks = [b for b in ir.tunable_blocks() if b.used_in_dot]
        if len(dot_blocks) == 3:
            for bm, bn, bk, stages in tiles:
                sizes = list(base.config["block_sizes"])
                for info, size in zip(dot_blocks, (bm, bn, bk), strict=False):
                    sizes[info.config_index] = size
                seeds.append(Config(**{**base.config, "block_sizes": sizes, "num_stages": stages}))
    else:
        for threads in (64, 256):
            seeds.append(Config(**{**base.config, "num_threads": [threads]}))
    return seeds


@dataclasses.dataclass(frozen=True)
class CuteOptions:
    """A validated config, in the terms code generation uses.

    Attributes:
        block_sizes: Elements per tile, by block id (every kind: grid blocks are 1, reduction
            dims their full extent).
        loop_orders: Per loop id with several dims, the dims from fastest to slowest varying.
        l2_groupings: Per top-level loop id, the group size of the program-id swizzle.
        unroll: Per inner loop id, the unroll factor (0 or 1: none).
        num_threads: Threads per CTA, 0 to derive.
        vector_widths: Per load/store (program order), the requested vector width (0 = widest).
        eviction: Per load (program order), ``""``, ``"first"`` or ``"last"``.
        num_stages: Pipeline stages of a matmul main loop.
        cluster: Cluster shape (m, n) of a matmul.
    """

    block_sizes: dict[int, int]
    loop_orders: dict[int, tuple[int, ...]]
    l2_groupings: dict[int, int]
    unroll: dict[int, int]
    num_threads: int
    vector_widths: tuple[int, ...]
    eviction: tuple[str, ...]
    num_stages: int
    cluster: tuple[int, int]

    @classmethod
    def from_config(cls, ir: KernelIR, config: Config) -> CuteOptions:
        data = config.config
        block_list = list(data.get("block_sizes", []) or [])
        block_sizes: dict[int, int] = {}
        for info in ir.block_sizes:
            if info.kind == "tile":
                if info.config_index is None or info.config_index >= len(block_list):
                    from helion import exc

                    raise exc.InvalidConfig(
                        f"config has no block size for tile dimension {info.block_id}"
                    )
                block_sizes[info.block_id] = int(block_list[info.config_index])
            elif info.kind in ("fixed", "grid"):
                block_sizes[info.block_id] = int(info.fixed_value or 1)
            else:
                block_sizes[info.block_id] = int(info.size_hint)
        orders = list(data.get("loop_orders", []) or [])
        groupings = list(data.get("l2_groupings", []) or [])
        unrolls = list(data.get("range_unroll_factors", []) or [])
        loop_orders: dict[int, tuple[int, ...]] = {}
        l2: dict[int, int] = {}
        order_position = 0
        group_position = 0
        for loop in ir.loops:
            if len(loop.block_ids) > 1:
                if order_position < len(orders):
                    loop_orders[loop.loop_id] = tuple(int(i) for i in orders[order_position])
                order_position += 1
        for loop in ir.top_level_loops():
            if len(loop.block_ids) > 1:
                if group_position < len(groupings):
                    l2[loop.loop_id] = int(groupings[group_position])
                group_position += 1
        unroll = {
            loop.loop_id: int(unrolls[i])
            for i, loop in enumerate(ir.inner_loops())
            if i < len(unrolls)
        }
        threads = data.get("num_threads", 0) or 0
        if isinstance(threads, list):
            threads = threads[0] if threads else 0
        widths = tuple(int(w) for w in (data.get("cute_vector_widths", []) or []))
        eviction = tuple(str(e) for e in (data.get("load_eviction_policies", []) or []))
        cluster_text = str(data.get("cute_cluster_shape", "1x1"))
        cluster_m, cluster_n = (int(part) for part in cluster_text.split("x"))
        return cls(
            block_sizes=block_sizes,
            loop_orders=loop_orders,
            l2_groupings=l2,
            unroll=unroll,
            num_threads=int(threads),
            vector_widths=widths,
            eviction=eviction,
            num_stages=int(data.get("num_stages", DEFAULT_STAGES) or DEFAULT_STAGES),
            cluster=(cluster_m, cluster_n),
        )

    def vector_width(self, position: int) -> int:
        return self.vector_widths[position] if position < len(self.vector_widths) else 0

    def eviction_policy(self, position: int) -> str:
        policy = self.eviction[position] if position < len(self.eviction) else ""
        return policy.removeprefix("evict_")
