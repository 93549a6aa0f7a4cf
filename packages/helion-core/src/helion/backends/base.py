"""The backend protocol: what core needs from a code generator.

A backend turns checked Kernel IR plus a ``Config`` into a :class:`CompiledKernel`. Core ships
one backend (``ref``); the others come from plugins through the ``helion_backends`` hook.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import importlib.metadata
import math
import statistics
import time
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import ClassVar
from typing import Protocol
from typing import runtime_checkable

import torch

if TYPE_CHECKING:
    from helion.autotuner.config_spec import ConfigSpec
    from helion.ir import KernelIR
    from helion.runtime.config import Config

# The default benchmark aims for this much measured time per config, within the repeat bounds:
# enough samples for a stable median, few enough that autotuning stays fast.
_BENCHMARK_TARGET_SECONDS = 0.05
_BENCHMARK_MIN_REPEAT = 5
_BENCHMARK_MAX_REPEAT = 100


@runtime_checkable
class CompiledKernel(Protocol):
    """The result of :meth:`Backend.compile`: readable source plus a launcher."""

    source: str
    """The generated code, as a user would read it (``helion show``, ``HELION_PRINT_OUTPUT_CODE``)."""

    def __call__(self, *kernel_args: Any) -> Any:
        """Launch the kernel on the given kernel arguments (outputs are written in place).

        The values always match the traced ones in dtype, shape and stride (the bound kernel's
        guards pick the compiled variant). A compiled kernel may also have ``fast_call``: a
        callable that launches the same way with less host work, or None; the runtime reads
        it once, after the first launch has returned, and calls it instead from then on."""
        ...


@dataclasses.dataclass(frozen=True)
class ExportedModule:
    """What :meth:`Backend.export_module` returns: the source of a module that imports only
    torch (where it has a launcher) and the backend's own toolkit, never helion."""

    source: str
    """The module's source."""

    launcher: str | None
    """The name of the function in ``source`` that launches the kernel as the compiled kernel
    is called: with the host values of the device loops (see :class:`CompiledKernel`). Core
    appends the kernel's host code, which calls it. None when ``source`` is complete as it is
    (a pure-JAX module has no torch host code)."""


class Backend(abc.ABC):
    """Base class of every code-generation backend.

    Subclasses set :attr:`name` (and :attr:`distribution` when they come from a plugin) and
    implement :meth:`compile`; every other method has a default that suits a simple backend.
    Instances are created once per process by the plugin that provides them, so constructors
    must be cheap and must not import heavy toolkits.
    """

    name: ClassVar[str]
    """Unique backend name, as used by ``HELION_BACKEND`` and ``helion backends``."""

    distribution: ClassVar[str | None] = None
    """The distribution that ships this backend, used for its version and in error messages."""

    device_types: ClassVar[tuple[str, ...]] = ()
    """``torch.device`` types this backend generates code for; empty means any device."""

    fork_safe: ClassVar[bool] = True
    """Whether the autotuner may screen candidates in forked children of this process. False for
    a toolkit that runs threads of its own once imported (JAX): a child forked while one of them
    holds a lock deadlocks, and the candidate times out as if it had hung."""

    zero_length_slices: ClassVar[bool] = False
    """Whether loads and stores of a ``:`` slice of length 0 (``x[tile, :]`` of a dimension of
    size 0) compile and run correctly. When false, core refuses them before an override of
    :meth:`check` runs: code that pads such a dimension to one lane without a mask reads memory
    that does not exist."""

    def is_available(self) -> tuple[bool, str]:
        """Report whether this backend can compile kernels in this process.

        Returns:
            ``(True, "")`` when usable, else ``(False, reason)`` where the reason says what is
            missing and how to get it (a package to install, a device that is required).
        """
        return True, ""

    def version(self) -> str:
        """Return the version of this backend's distribution, or ``"unknown"``."""
        if self.distribution is None:
            return "unknown"
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    def cache_key(self) -> str:
        """Return the part of the autotune cache key that identifies this backend.

        Override to add the versions of toolkits the generated code depends on.
        """
        return f"{self.name}-{self.version()}"

    def supports_device(self, device: torch.device | str) -> bool:
        """Return whether this backend can run kernels on ``device``.

        Args:
            device: A ``torch.device`` or a string such as ``"cuda:0"``.
        """
        if not self.device_types:
            return True
        return torch.device(device).type in self.device_types

    def check(self, ir: KernelIR) -> None:
        """Reject IR this backend cannot compile, before anything is compiled.

        The default accepts everything. Backends override it to report every unsupported
        construct at once, each with its source location. The runtime runs :func:`check_core`
        first (the checks that hold for every backend: no tensor on the meta device, no
        unmasked access surely past a tensor; see also :attr:`zero_length_slices`), so an
        override need not call ``super().check``. Both run on every trace: the first, and each
        later one (a new size under ``static_shapes=False``), before it is compiled.

        Args:
            ir: The kernel IR after core passes.

        Raises:
            helion.exc.BackendUnsupported: The IR uses constructs this backend cannot lower.
        """

    def tunables(self, ir: KernelIR, spec: ConfigSpec, device: torch.device) -> None:
        """Add this backend's tunables to ``spec`` and remove core ones it does not support.

        The default leaves the spec unchanged.

        Args:
            ir: The kernel IR after core passes.
            spec: The search space derived by core; modified in place.
            device: The device the kernel will run on.
        """

    def seed_configs(self, ir: KernelIR, spec: ConfigSpec, device: torch.device) -> list[Config]:
        """Return known-good configs to start the autotuner from; the default has none.

        Args:
            ir: The kernel IR after core passes.
            spec: The search space, after :meth:`tunables`.
            device: The device the kernel will run on.
        """
        return []

    def config_problem(self, ir: KernelIR, config: Config, device: torch.device) -> str | None:
        """Say why ``config`` cannot compile or run on ``device``, or return ``None``.

        The autotuner drops candidates with a problem before compiling them, so a search does
        not spend its budget on configs the backend's compiler is known to reject (a tile over
        its tensor size limit, say). The default finds no problem.

        Args:
            ir: The kernel IR after core passes.
            config: A normalized config of the kernel's spec.
            device: The device the kernel will run on.
        """
        return None

    @abc.abstractmethod
    def compile(self, ir: KernelIR, config: Config) -> CompiledKernel:
        """Generate and compile code for ``ir`` under ``config``.

        Args:
            ir: The kernel IR, already accepted by :meth:`check`.
            config: A complete config from the kernel's ConfigSpec.

        Returns:
            The compiled kernel, with its readable source.

        Raises:
            helion.exc.BackendUnsupported: This backend cannot compile the kernel.
        """

    def export_module(
        self, compiled: CompiledKernel, ir: KernelIR, config: Config, *, jax_fn: bool = False
    ) -> ExportedModule:
        """Return a self-contained module of a kernel this backend compiled.

        What ``BoundKernel.to_code(options=OutputCodeOptions(allow_helion_deps=False))`` and
        ``OutputCodeOptions(jax_fn=True)`` emit: a module that imports no helion package, only
        torch and the backend's toolkit (Triton, JAX), with whatever runtime helpers the
        backend's own modules would give written into it. The default supports neither.

        Args:
            compiled: What :meth:`compile` returned for ``ir`` and ``config``.
            ir: The traced kernel IR.
            config: The config it was compiled with.
            jax_fn: Return a module of JAX only, whose function takes and returns JAX arrays
                (no torch, no launcher: :attr:`ExportedModule.launcher` is None).

        Raises:
            helion.exc.OutputCodeUnsupported: This backend cannot emit such a module.
        """
        from helion import exc

        option = "jax_fn=True" if jax_fn else "allow_helion_deps=False"
        raise exc.OutputCodeUnsupported(f"to_code(options=OutputCodeOptions({option}))", self.name)

    def default_launcher(self, kernel: Any, grid: Any, *args: Any, **options: Any) -> Any:
        """Launch a kernel written in this backend's own language on torch ``args``.

        What ``helion.runtime.default_launcher`` (Triton), ``default_pallas_launcher`` and
        ``default_cute_launcher`` call, through the backend registry, so that core imports no
        backend: they run kernels written by hand, or generated code that calls a launcher, as
        this backend's compiled kernels are run (e.g. through an interpreter on CPU). The
        default supports none.

        Args:
            kernel: The backend's kernel object (a ``@triton.jit`` function, a Pallas kernel
                body, a CuTe DSL host function).
            grid: The launch grid, as the backend's toolkit takes it (None where it has none).
            args: The kernel's arguments: torch tensors and Python values.
            options: The backend's launch options.

        Raises:
            helion.exc.BackendUnsupported: This backend launches no hand-written kernels.
        """
        from helion import exc

        raise exc.BackendUnsupported("launching a kernel given by hand", self.name)

    def prepare_autotune(self, device: torch.device) -> None:
        """Per-process setup the autotuner runs once in the tuning process before any candidate
        runs in a child process (forked children inherit what it settles).

        Triton's settles its module cache directory here, so that an unusable
        ``HELION_CACHE_DIR`` is warned about once per search, not once per child. Warnings it
        raises are shown once; an exception is logged at debug level and the search goes on.
        The default does nothing.

        Args:
            device: The device the search runs on.
        """

    def cached_path(self, compiled: CompiledKernel) -> str | None:
        """Return where the artifact of ``compiled`` is kept on disk, or None.

        What ``BoundKernel.get_cached_path`` reports: a generated module file, a compiled
        binary. The default is None: the kernel lives in this process's memory only.

        Args:
            compiled: What :meth:`compile` returned.
        """
        return None

    def compiled_cache_key(self, compiled: CompiledKernel) -> str:
        """Return the key this backend caches the code of ``compiled`` under.

        What ``BoundKernel.backend_cache_key`` reports. The default is the SHA-256 of
        :meth:`cache_key` (the toolkit versions) and the generated source: equal keys mean the
        same code from the same toolkit. Backends with a cache of their own return its key.

        Args:
            compiled: What :meth:`compile` returned.
        """
        digest = hashlib.sha256(f"{self.cache_key()}\n".encode())
        digest.update(str(getattr(compiled, "source", "")).encode())
        return digest.hexdigest()

    def benchmark(
        self,
        fn: Callable[[], object],
        *,
        device: torch.device | str,
        repeat: int | None = None,
    ) -> float:
        """Time ``fn`` and return its median run time in milliseconds.

        The default runs ``fn`` once to warm up (compilation, allocator, caches), then times
        ``repeat`` runs with ``time.perf_counter``, synchronizing the device after each so that
        asynchronous launches are counted in full. Backends with better timers (device events,
        cache flushing) override it.

        Args:
            fn: Runs the kernel once.
            device: The device ``fn`` runs on.
            repeat: Number of timed runs; by default as many as fit in about 50 ms (5 to 100).

        Returns:
            The median of the timed runs, in milliseconds.
        """
        device = torch.device(device)
        warmup_start = time.perf_counter()
        fn()
        _synchronize(device)
        warmup_seconds = time.perf_counter() - warmup_start
        if repeat is None:
            repeat = _default_repeat(warmup_seconds)
        if repeat < 1:
            raise ValueError(f"benchmark repeat must be at least 1, got {repeat}")
        timings: list[float] = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            _synchronize(device)
            timings.append(time.perf_counter() - start)
        return statistics.median(timings) * 1e3

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backend {self.name!r}>"


def check_core(backend: Backend, ir: KernelIR) -> None:
    """The checks that run before a backend's own :meth:`Backend.check`.

    Raises:
        helion.exc.TensorOnMetaDevice: A tensor the device code uses is on the meta device.
        helion.exc.ZeroLengthSlice: A load or store of a length-0 slice, on a backend that does
            not declare :attr:`Backend.zero_length_slices`.
        helion.exc.WriteToOverlappingTensor: A store or atomic into a tensor whose elements
            overlap in memory (an ``expand()``ed view).
    """
    from helion import exc
    from helion.passes.write_overlap import check_overlapping_writes

    check_overlapping_writes(ir)
    # meta tensors have shapes but no memory: a launch would read and write nothing (ref) or
    # fail inside the backend's toolkit (DLPack, a device copy)
    meta = [repr(tensor.name) for tensor in ir.tensor_args if tensor.device.type == "meta"]
    if meta:
        raise exc.TensorOnMetaDevice(", ".join(meta), backend.name)
    _check_static_bounds(ir.body.nodes, {}, in_branch=False)
    if backend.zero_length_slices:
        return
    for node in _reachable_nodes(ir.body.nodes):
        items = node.attrs.get("items") if node.op.memory else None
        for item in items or ():
            if isinstance(item, tuple) and len(item) == 3 and item[0] == "full" and item[2] == 0:
                raise exc.ZeroLengthSlice(node.op.name, backend.name, loc=node.loc)


def _check_static_bounds(nodes: Any, ranges: dict[int, tuple[int, int]], in_branch: bool) -> None:
    """Refuse, at bind time, an unmasked access that a tile loop with static bounds surely runs
    past its tensor: `y[tile]` in `for tile in hl.tile(x.size(0))` with y shorter than x, `y[i]`
    in `for i in hl.grid(x.size(0))`, or a constant index past the end. Compiled code would
    touch memory outside the tensor (the ref backend finds the same at run time). `ranges`: id
    of a tile value, or of the index an `hl.grid` loop yields, -> the [begin, end) its loop
    covers; accesses under an `if` are left alone (their branch may never run past the end)."""
    from helion import exc

    for node in nodes:
        if node.op.name in ("grid_loop", "tile_loop"):
            inner = dict(ranges)
            body = node.regions[0]
            bounds = zip(node.attrs["begins"], node.attrs["ends"], strict=True)
            for tile, (begin, end) in zip(body.args, bounds, strict=False):
                if isinstance(begin, int) and isinstance(end, int) and 0 <= begin < end:
                    inner[id(tile)] = (begin, end)
            grid = node.attrs.get("is_grid")
            _check_static_bounds(
                body.nodes, inner if not grid else _with_grid_indices(body, inner), in_branch
            )
            continue
        for region in node.regions:
            _check_static_bounds(region.nodes, ranges, in_branch=True)
        if in_branch or not node.op.memory or node.attrs.get("mask") is not None:
            continue
        shape = getattr(node.attrs.get("tensor"), "shape", None)
        if shape is None:
            continue
        dim = 0
        for item in node.attrs.get("items") or ():
            if item[0] == "none":
                continue
            size = shape[dim] if dim < len(shape) else None
            first_outside = None
            if item[0] in ("tile", "scalar") and isinstance(size, int):
                # a scalar index has a range only when it is an hl.grid loop's index
                begin, end = ranges.get(id(node.inputs[item[1]]), (0, 0))
                if end > size:
                    first_outside = max(begin, size)
            elif item[0] == "const" and isinstance(size, int) and not 0 <= item[1] < size:
                first_outside = item[1]
            if first_outside is not None:
                name = node.attrs["tensor"].name
                raise exc.IndexOutOfBounds(
                    node.op.name, name, first_outside, dim, size, loc=node.loc
                )
            dim += 1


def _with_grid_indices(body: Any, ranges: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """`ranges` plus the indices an `hl.grid` loop yields (its tiles' `begin`s, emitted first in
    its body): each takes every value of its tile's range."""
    ranges = dict(ranges)
    for node in body.nodes:
        if node.op.name == "tile_begin" and id(node.inputs[0]) in ranges:
            ranges[id(node.outputs[0])] = ranges[id(node.inputs[0])]
    return ranges


def _reachable_nodes(nodes: Any) -> Any:
    """The nodes of a block and its regions, less the bodies of loops whose range is empty
    (a tile loop over a dimension of size 0 never runs, whatever its body reads)."""
    for node in nodes:
        yield node
        begins, ends = node.attrs.get("begins"), node.attrs.get("ends")
        if (
            begins is not None
            and ends is not None
            and any(
                isinstance(b, int) and isinstance(e, int) and e <= b
                for b, e in zip(begins, ends, strict=True)
            )
        ):
            continue
        for region in node.regions:
            yield from _reachable_nodes(region.nodes)


def _default_repeat(warmup_seconds: float) -> int:
    if warmup_seconds <= 0:
        return _BENCHMARK_MAX_REPEAT
    # The warm-up run includes one-time costs, so this estimate errs towards fewer runs.
    estimate = math.ceil(_BENCHMARK_TARGET_SECONDS / warmup_seconds)
    return max(_BENCHMARK_MIN_REPEAT, min(_BENCHMARK_MAX_REPEAT, estimate))


def _synchronize(device: torch.device) -> None:
    if device.type == "cpu":
        return
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "synchronize"):
        accelerator.synchronize(device)
    elif device.type == "cuda":
        torch.cuda.synchronize(device)
