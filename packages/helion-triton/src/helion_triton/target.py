"""What the installed Triton and the target device can do.

A :class:`TritonTarget` is resolved once per device (and cached): whether kernels run through
the Triton interpreter, the CUDA capability, the SM count used by persistent kernels, and which
optional language features the installed Triton provides. Tunables and code generation read it;
nothing here is consulted on the launch path.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os

import torch

# Programs launched by a persistent kernel in the interpreter: a few, so that the persistent
# loop really iterates, yet the sequential interpreter stays fast.
INTERPRETER_NUM_SMS = 4


@dataclasses.dataclass(frozen=True)
class TritonTarget:
    """The device a kernel is generated for, and the Triton features available for it."""

    device_type: str
    interpret: bool
    capability: tuple[int, int] | None
    num_sms: int
    has_block_ptr: bool
    has_tensor_descriptor: bool
    range_kwargs: frozenset[str]

    @property
    def is_cuda(self) -> bool:
        return self.device_type == "cuda" and not self.interpret

    @property
    def supports_tensor_descriptor(self) -> bool:
        """TMA descriptors: Hopper or newer with a Triton that has ``tl.make_tensor_descriptor``."""
        return (
            self.is_cuda
            and self.has_tensor_descriptor
            and self.capability is not None
            and self.capability >= (9, 0)
        )

    @property
    def supports_warp_specialize(self) -> bool:
        return self.is_cuda and self.capability is not None and self.capability >= (10, 0)

    def persistent_programs(self, reserved_sms: int = 0, multiplier: int = 1) -> int:
        """Programs a persistent kernel launches: ``(num_sms - reserved_sms) * multiplier``,
        at least 1 (``Settings.persistent_reserved_sms``, ``Config.num_sm_multiplier``)."""
        return max(1, (self.num_sms - max(int(reserved_sms), 0)) * max(int(multiplier), 1))

    def indexing_choices(self) -> tuple[str, ...]:
        choices = ["pointer"]
        if self.has_block_ptr:
            choices.append("block_ptr")
        if self.supports_tensor_descriptor:
            choices.append("tensor_descriptor")
        return tuple(choices)


def interpreter_forced() -> bool:
    """``TRITON_INTERPRET=1``: Triton itself interprets every kernel, on any device."""
    try:
        from triton import knobs

        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):
        return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def target_for(device: torch.device | str) -> TritonTarget:
    device = torch.device(device)
    index = device.index if device.index is not None else 0
    return _target(device.type, index if device.type == "cuda" else 0, interpreter_forced())


@functools.cache
def _target(device_type: str, index: int, forced_interpret: bool) -> TritonTarget:
    interpret = forced_interpret or device_type != "cuda"
    capability = None
    num_sms = INTERPRETER_NUM_SMS
    if device_type == "cuda" and torch.cuda.is_available():
        capability = tuple(torch.cuda.get_device_capability(index))
        if not interpret:
            num_sms = torch.cuda.get_device_properties(index).multi_processor_count
    return TritonTarget(
        device_type=device_type,
        interpret=interpret,
        capability=capability,  # type: ignore[arg-type]
        num_sms=num_sms,
        has_block_ptr=has_block_ptr(),
        has_tensor_descriptor=has_tensor_descriptor(),
        range_kwargs=range_kwargs(),
    )


@functools.lru_cache(maxsize=1)
def range_kwargs() -> frozenset[str]:
    """Keyword arguments the installed ``tl.range`` accepts."""
    import triton.language as tl

    try:
        parameters = inspect.signature(tl.range.__init__).parameters
    except (TypeError, ValueError):
        return frozenset()
    return frozenset(name for name in parameters if name not in ("self", "arg1", "arg2", "step"))


@functools.lru_cache(maxsize=1)
def has_tensor_descriptor() -> bool:
    import triton.language as tl

    return hasattr(tl, "make_tensor_descriptor")


@functools.lru_cache(maxsize=1)
def has_block_ptr() -> bool:
    """Whether ``tl.make_block_ptr`` still works (Triton 3.9 replaced it by tensor descriptors).

    The builtin's body is what tells: newer releases keep the name but only raise, so the probe
    reads its source instead of compiling a kernel.
    """
    import triton.language as tl

    builder = getattr(tl, "make_block_ptr", None)
    if builder is None:
        return False
    try:
        source = inspect.getsource(inspect.unwrap(builder))
    except (OSError, TypeError):
        return True
    return "NotImplementedError" not in source and "removed" not in source


def triton_version() -> str:
    try:
        import triton

        return str(triton.__version__)
    except ImportError:
        return "not installed"


def _version_at_least(major: int, minor: int) -> bool:
    """Whether the installed Triton is at least ``major.minor`` (True when none is installed)."""
    version = triton_version()
    if version == "not installed":
        return True
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts) >= (major, minor)


@functools.lru_cache(maxsize=1)
def unrolled_reduction_loops_ok() -> bool:
    """Whether this Triton compiles a ``tl.range`` loop with ``loop_unroll_factor`` > 1 whose
    body reduces a tile (``acc = acc + tl.sum(chunk, 1)``).

    Triton 3.6 asserts in TritonGPUOptimizeThreadLocality (``isa<BlockArgument>(accumOperand)``)
    on such a loop for sm_90 (seen on the H200 for a row sum over a run-time bound, reproduced
    with `benchmarks/sm90_compile_check.py`); 3.9 compiles it. Where it is not ok, such loops
    are not unrolled."""
    return _version_at_least(3, 7)


@functools.lru_cache(maxsize=1)
def reshaped_dot_accumulator_ok() -> bool:
    """Whether this Triton compiles a dot whose accumulator is a 3-D tile reshaped to 2-D.

    Triton 3.6 crashes in TritonGPURemoveLayoutConversions on such a dot when an operand is a
    tensor-descriptor load (attention's ``P @ V`` on one batch row per program, on the H200);
    3.9 compiles it. Where it is not ok, the accumulator is added after the dot instead."""
    return _version_at_least(3, 7)
