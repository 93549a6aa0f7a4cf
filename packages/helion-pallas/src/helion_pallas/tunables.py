"""Typed options of one Pallas compilation: where it runs and the tunables Pallas honours.

`PallasOptions.parse` validates a Config once (STYLE §5.7); code generation reads only the
resulting frozen object, never the raw Config dict.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any
from typing import Mapping

import torch

from helion import exc

#: Core tunables this backend implements. Every other core field is removed from the spec.
HONOURED_FIELDS = (
    "block_sizes",
    "loop_orders",
    "flatten_loops",
    "range_unroll_factors",
    "static_ranges",
    "num_warps",
    "num_stages",
)
#: Honoured only when compiling for a GPU (they become `plgpu.CompilerParams`).
GPU_ONLY_FIELDS = ("num_warps", "num_stages")
#: Not honoured by the Triton lowering (its `scan` rule has no `unroll`).
NOT_ON_GPU_FIELDS = ("range_unroll_factors",)

#: Targets: "interpret" (any device, `interpret=True`), "gpu" (Pallas' Triton lowering),
#: "tpu" (Mosaic TPU; emitted but untested).
TARGETS = ("interpret", "gpu", "tpu")

#: Inner loops with at most this many static iterations may be unrolled by `static_ranges`.
MAX_STATIC_UNROLL = 64

_DOT_PRECISIONS = {
    # settings.dot_precision -> (jax precision expression, or None for the default)
    "tf32": None,
    "default": None,
    "tf32x3": "jax.lax.DotAlgorithmPreset.TF32_TF32_F32_X3",
    "high": "jax.lax.DotAlgorithmPreset.TF32_TF32_F32_X3",
    "ieee": "jax.lax.Precision.HIGHEST",
    "highest": "jax.lax.Precision.HIGHEST",
}


def device_target(device: torch.device | str, interpret_setting: bool) -> str:
    """The target of kernels whose tensors live on `device`."""
    device_type = torch.device(device).type
    if interpret_setting or device_type == "cpu":
        return "interpret"
    if device_type == "cuda":
        return "gpu"
    if device_type in ("xla", "tpu"):
        return "tpu"
    raise exc.BackendUnsupported(f"tensors on {device_type!r} devices", "pallas")


def interpret_setting(settings: Any = None) -> bool:
    """`settings.pallas_interpret` of the kernel (`HELION_PALLAS_INTERPRET` when the IR carries
    no settings); read once per compilation, never on the launch path."""
    if settings is not None and hasattr(settings, "pallas_interpret"):
        return bool(settings.pallas_interpret)
    from helion.runtime.settings import env_bool

    return env_bool("HELION_PALLAS_INTERPRET", False)


def dot_precision_setting(settings: Any = None) -> str:
    """`settings.dot_precision` (`TRITON_F32_DEFAULT`): the precision of fp32 matmuls."""
    raw = getattr(settings, "dot_precision", None)
    if raw is None:
        raw = os.environ.get("TRITON_F32_DEFAULT", "tf32")
    raw = str(raw).strip().lower() or "tf32"
    return raw if raw in _DOT_PRECISIONS else "tf32"


@dataclasses.dataclass(frozen=True)
class LoopOptions:
    """How one inner tile loop is emitted."""

    unroll: int = 0  # `fori_loop(..., unroll=n)` when n > 1
    static: bool = False  # a Python loop, unrolled at trace time (static trip counts only)


@dataclasses.dataclass(frozen=True)
class PallasOptions:
    """Everything code generation needs from a Config and the environment."""

    target: str
    block_sizes: tuple[int, ...]
    loop_orders: tuple[tuple[int, ...], ...]
    flatten_loops: tuple[bool, ...]
    inner_loops: tuple[LoopOptions, ...]
    num_warps: int | None
    num_stages: int | None
    dot_precision: str

    @property
    def interpret(self) -> bool:
        return self.target == "interpret"

    @property
    def precision_expr(self) -> str | None:
        return _DOT_PRECISIONS[self.dot_precision]

    @classmethod
    def parse(cls, config: Mapping[str, Any], target: str, settings: Any = None) -> PallasOptions:
        if target not in TARGETS:
            raise ValueError(f"unknown Pallas target {target!r}; known: {', '.join(TARGETS)}")
        unrolls = list(config.get("range_unroll_factors", []) or [])
        statics = list(config.get("static_ranges", []) or [])
        count = max(len(unrolls), len(statics))
        inner = []
        for position in range(count):
            unroll = int(unrolls[position]) if position < len(unrolls) and target != "gpu" else 0
            static = bool(statics[position]) if position < len(statics) else False
            inner.append(LoopOptions(unroll=unroll, static=static))
        gpu = target == "gpu"
        num_warps = config.get("num_warps") if gpu else None
        num_stages = config.get("num_stages") if gpu else None
        return cls(
            target=target,
            block_sizes=tuple(int(b) for b in config.get("block_sizes", []) or []),
            loop_orders=tuple(
                tuple(int(d) for d in order) for order in config.get("loop_orders", []) or []
            ),
            flatten_loops=tuple(bool(f) for f in config.get("flatten_loops", []) or []),
            inner_loops=tuple(inner),
            num_warps=int(num_warps) if num_warps is not None else None,
            num_stages=int(num_stages) if num_stages is not None else None,
            dot_precision=dot_precision_setting(settings),
        )

    def loop_options(self, position: int) -> LoopOptions:
        if position < len(self.inner_loops):
            return self.inner_loops[position]
        return LoopOptions()
