"""Derive the ConfigSpec (the search space) of a kernel from its IR.

Core adds every tunable the IR implies, in program order (so configs are portable between
implementations that allocate in the same order); the backend then adds its own and removes the
ones it does not use (`Backend.tunables`).
"""

from __future__ import annotations

from typing import Any

from helion.autotuner.config_fragment import BooleanFragment
from helion.autotuner.config_fragment import EnumFragment
from helion.autotuner.config_fragment import IntegerFragment
from helion.autotuner.config_fragment import PermutationFragment
from helion.autotuner.config_fragment import PowerOfTwoFragment
from helion.autotuner.config_fragment import ReductionLoopFragment
from helion.autotuner.config_spec import ConfigSpec
from helion.ir.core import KernelIR

PID_TYPES = ("flat", "xyz", "persistent_blocked", "persistent_interleaved")
PERSISTENT_PID_TYPES = ("persistent_blocked", "persistent_interleaved")
INDEXING = ("pointer", "block_ptr", "tensor_descriptor")
# elements of a top-level program's tile that the default config aims for
DEFAULT_TILE_ELEMENTS = 4096


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def default_block_sizes(ir: KernelIR, min_dot: int) -> dict[int, int]:
    """A reasonable starting point: ~4K elements per program, fewer rows for wide reductions."""
    defaults: dict[int, int] = {}
    widest_reduction = max((next_power_of_2(b.size_hint) for b in ir.reduction_blocks()), default=1)
    for loop in ir.loops:
        tunable = [b for b in loop.block_ids if ir.block(b).kind == "tile"]
        if not tunable:
            continue
        uses_dot = any(ir.block(b).used_in_dot for b in tunable)
        if not loop.top_level:
            for b in tunable:
                info = ir.block(b)
                defaults[b] = min(next_power_of_2(info.size_hint), 64 if uses_dot else 32)
            continue
        if uses_dot:
            for b in tunable:
                info = ir.block(b)
                # a batch dim of a batched dot: one slice per program by default. Every slice
                # keeps its own operands in shared memory (8 slices of an 8 x 64 x 32 fp32
                # attention needed 256 KiB, more than an H200 has)
                defaults[b] = min(next_power_of_2(info.size_hint), 64) if info.used_in_dot else 1
            continue
        budget = max(1, DEFAULT_TILE_ELEMENTS // widest_reduction)
        for b in reversed(tunable):  # innermost (fastest varying) dimension first
            size = min(next_power_of_2(ir.block(b).size_hint), budget, 1024)
            defaults[b] = max(size, 1)
            budget = max(1, budget // defaults[b])
    for info in ir.tunable_blocks():
        defaults.setdefault(info.block_id, min(next_power_of_2(info.size_hint), 64))
        if info.used_in_dot:
            defaults[info.block_id] = max(
                defaults[info.block_id], min(min_dot, next_power_of_2(info.size_hint))
            )
    return defaults


def derive_config_spec(
    ir: KernelIR, user_tunables: dict[str, Any], *, min_dot_size: int = 16
) -> ConfigSpec:
    spec = ConfigSpec()
    defaults = default_block_sizes(ir, min_dot_size)
    for info in ir.tunable_blocks():
        min_size = max(
            info.min_size,
            min(min_dot_size, next_power_of_2(info.size_hint)) if info.used_in_dot else 1,
        )
        max_size = info.max_size or max(next_power_of_2(info.size_hint), min_size)
        default = min(max(defaults[info.block_id], min_size), max_size)
        spec.add_block_size(info.size_hint, min_size=min_size, max_size=max_size, default=default)

    for loop in ir.loops:
        if len(loop.block_ids) > 1:
            spec.append("loop_orders", PermutationFragment(len(loop.block_ids)))
    for loop in ir.top_level_loops():
        node = loop.node
        starts_at_zero = node is not None and all(b == 0 for b in node.attrs["begins"])
        if len(loop.block_ids) > 1 and starts_at_zero and not node.attrs["is_grid"]:
            spec.append("flatten_loops", BooleanFragment())
    for loop in ir.top_level_loops():
        if len(loop.block_ids) > 1:
            spec.append("l2_groupings", PowerOfTwoFragment(1, 64, 1))

    for info in ir.reduction_blocks():
        spec.append("reduction_loops", ReductionLoopFragment(info.size_hint))

    spec.outer_range_slots = 1 if len(ir.top_level_loops()) == 1 else 0
    for _loop in ir.inner_loops():
        spec.append("range_unroll_factors", IntegerFragment(0, 4, 0))
        spec.append("range_num_stages", IntegerFragment(0, 4, 0))
        spec.append("range_multi_buffers", EnumFragment((None, False, True)))
        spec.append("range_flattens", EnumFragment((None, False, True)))
        spec.append("static_ranges", BooleanFragment())

    spec.set_scalar("num_warps", PowerOfTwoFragment(1, 32, 4))
    spec.set_scalar("num_stages", IntegerFragment(1, 8, 1))
    spec.set_scalar("pid_type", EnumFragment(allowed_pid_types(ir)))

    for mem in ir.memory_ops():
        if mem.kind in ("load", "store"):
            spec.append("indexing", EnumFragment(INDEXING))
        if mem.kind == "load":
            spec.append("load_eviction_policies", EnumFragment(("", "first", "last")))

    for name, fragment in user_tunables.items():
        spec.add_user_tunable(name, fragment)
    return spec


def allowed_pid_types(ir: KernelIR) -> tuple[str, ...]:
    if ir.uses_barrier:
        return ("persistent_blocked",)
    top = ir.top_level_loops()
    host_known = {scalar.value.id for scalar in ir.scalar_args}
    data_dependent = any(
        not isinstance(bound, int) and getattr(bound, "id", None) not in host_known
        for loop in top
        if loop.node is not None
        for bound in loop.node.attrs["ends"] + loop.node.attrs["begins"]
    )
    if data_dependent:
        return ("persistent_blocked", "persistent_interleaved")
    grid_dims = max((len(loop.block_ids) for loop in top), default=1)
    if len(top) == 1 and 2 <= grid_dims <= 3:
        return PID_TYPES
    return ("flat", "persistent_blocked", "persistent_interleaved")


def force_persistent(spec: ConfigSpec) -> None:
    """``Settings.autotune_force_persistent``: keep only the persistent ``pid_type`` choices
    that ``spec`` already allows (so the default config and every searched config are
    persistent, and a config naming another pid type is refused with the reason). A spec
    without ``pid_type``, or whose ``pid_type`` allows no persistent kind, is left as it is."""
    field = spec.fields.get("pid_type")
    fragment = getattr(field, "fragment", None)
    if fragment is None:
        return
    allowed = [p for p in PERSISTENT_PID_TYPES if fragment.is_valid(p)]
    if not allowed or all(fragment.is_valid(p) == (p in allowed) for p in PID_TYPES):
        return  # nothing persistent to keep, or nothing else to remove
    spec.restrict(
        "pid_type",
        allowed,
        reason="autotune_force_persistent=True allows only the persistent pid types",
    )
