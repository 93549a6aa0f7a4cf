"""Launchers and launch helpers of ``helion.runtime``: ``default_launcher``,
``default_pallas_launcher``, ``default_cute_launcher``, ``default_metal_launcher``,
``set_triton_allocator`` and ``cute_cuda_graph``.

The launchers run a kernel written in a backend's own language (by hand, or in code generated
by a tool that calls a launcher, as public Helion's generated modules do) on torch tensors, the
way the backend runs its own compiled kernels. Each one finds its backend through the registry
(`helion.backends.get_backend`), so core imports no backend package: a backend that is not
installed is reported with what to install, and the work is done by its
`Backend.default_launcher`. There is no Metal backend: its launcher always raises.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Callable

import torch

from helion import exc


def default_launcher(
    triton_kernel: Any,
    grid: Any,
    *args: Any,
    num_warps: int,
    num_stages: int,
    launch_cooperative_grid: bool = False,
    **kwargs: Any,
) -> Any:
    """Launch a ``@triton.jit`` function: ``triton_kernel[grid](*args, num_warps=...,
    num_stages=..., **kwargs)``.

    On CUDA tensors the kernel is compiled and launched by Triton. On CPU tensors it runs
    through Triton's interpreter, as the Triton backend runs its own kernels on CPU, with no
    need for ``TRITON_INTERPRET=1``: the function and the ``@triton.jit`` functions it calls
    (found through its globals) are interpreted.

    Args:
        triton_kernel: a ``@triton.jit`` function (or one ``TRITON_INTERPRET=1`` made).
        grid: a tuple of program counts, or a callable of the meta-parameters giving one.
        args: the kernel's arguments, in the order of its parameters.
        num_warps: warps per program.
        num_stages: software-pipelining stages.
        launch_cooperative_grid: launch as a cooperative grid (grid-wide barriers).
        kwargs: further arguments by name (``tl.constexpr`` values) and Triton launch options.

    Returns:
        What Triton's launch returns.

    Raises:
        helion.exc.BackendUnavailable: helion-triton is not installed (or Triton cannot run).
    """
    return _backend("triton", "default_launcher").default_launcher(
        triton_kernel,
        grid,
        *args,
        num_warps=num_warps,
        num_stages=num_stages,
        launch_cooperative_grid=launch_cooperative_grid,
        **kwargs,
    )


def default_pallas_launcher(
    pallas_kernel: Callable[..., Any],
    grid: Any,
    *args: Any,
    output_indices: Any = None,
    interpret: bool | None = None,
    **pallas_call_options: Any,
) -> None:
    """Run a Pallas kernel body over `grid` on torch tensors (``pl.pallas_call``), writing the
    results back into the tensors.

    The body is called with one ref per tensor of `args` (the whole tensor: no BlockSpecs),
    and every other argument as it is, in the order of `args`. The tensors named by
    `output_indices` are input/output buffers: their refs start with the tensors' values, and
    what the kernel leaves in them is copied back into the torch tensors after the call.

    Args:
        pallas_kernel: the kernel body, ``def body(x_ref, ..., out_ref, ...)``.
        grid: the Pallas grid (a tuple of ints); the body reads ``pl.program_id(axis)``.
        args: torch tensors and Python values.
        output_indices: positions in `args` of the tensors the kernel writes (default: every
            tensor).
        interpret: run with ``interpret=True`` (default: when the tensors are on CPU).
        pallas_call_options: further keyword arguments of ``pl.pallas_call``.

    Raises:
        helion.exc.BackendUnavailable: helion-pallas (JAX) is not installed.
        ValueError: an output index that is not the position of a tensor.
    """
    _backend("pallas", "default_pallas_launcher").default_launcher(
        pallas_kernel,
        grid,
        *args,
        output_indices=output_indices,
        interpret=interpret,
        **pallas_call_options,
    )


def default_cute_launcher(cute_fn: Any, *args: Any, stream: Any = None, **kwargs: Any) -> Any:
    """Call a CuTe DSL host function (``@cute.jit``, or what ``cute.compile`` made of one) on
    torch tensors, as the CuTe backend launches its own kernels: each tensor is passed as a
    global-memory pointer of its dtype (assumed 16-byte aligned when its address is), other
    arguments as they are, and the CUDA stream last (``stream``, default torch's current
    stream of the tensors' device).

    Raises:
        helion.exc.CuteBackendUnavailable: helion-cute is not installed, or a tensor is not on
            a CUDA device (CuTe kernels only run on NVIDIA GPUs).
    """
    return _backend("cute", "default_cute_launcher").default_launcher(
        cute_fn, None, *args, stream=stream, **kwargs
    )


def default_metal_launcher(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> Any:
    """Public Helion's launcher of Metal (Apple GPU) kernels. This Helion has no Metal backend,
    so it always raises.

    Raises:
        helion.exc.BackendUnavailable: always, naming the backends there are.
    """
    raise exc.BackendUnavailable(
        "metal",
        "this Helion has no Metal backend, so helion.runtime.default_metal_launcher cannot "
        "launch anything",
        hint="Run Helion kernels on a backend there is: 'ref' (eager torch on the tensors' "
        "device), 'triton', 'pallas' or 'cute' (`helion backends` lists them).",
    )


def set_triton_allocator() -> None:
    """Give Triton an allocator for the scratch memory of kernels that build tensor
    descriptors (TMA) on the device, unless one is set already: it allocates ``torch.int8``
    buffers on the current CUDA device, so the memory comes from torch's caching allocator.
    The Triton backend sets it itself when a kernel needs it; generated modules call this on
    import.

    Raises:
        helion.exc.BackendUnavailable: Triton is not installed.
    """
    try:
        import triton
    except ImportError as error:
        raise exc.BackendUnavailable(
            "triton", f"set_triton_allocator needs Triton: {error}", distribution="helion-triton"
        ) from None
    try:
        from triton.runtime import _allocation
    except ImportError:  # a Triton without allocators has nothing to set
        return
    current = getattr(_allocation, "_allocator", None)
    current = current.get() if hasattr(current, "get") else current  # a ContextVar in newer ones
    null = getattr(_allocation, "NullAllocator", None)
    if current is not None and (null is None or not isinstance(current, null)):
        return  # the user's (or an earlier call's) allocator stays
    triton.set_allocator(_torch_allocator)


def _torch_allocator(size: int, alignment: int, stream: Any) -> torch.Tensor:
    """Triton's allocator protocol: scratch memory from torch's CUDA caching allocator."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


@dataclasses.dataclass
class CapturedGraph:
    """A call captured in a CUDA graph by `cute_cuda_graph`: `replay()` runs its kernels again
    on the same memory and returns `output`, the value the captured call returned (its tensors
    are rewritten by each replay)."""

    graph: Any  # torch.cuda.CUDAGraph
    output: Any

    def replay(self) -> Any:
        self.graph.replay()
        return self.output

    __call__ = replay


def cute_cuda_graph(
    fn: Callable[..., Any], *args: Any, warmup: int = 1, pool: Any = None, **kwargs: Any
) -> CapturedGraph:
    """Capture ``fn(*args, **kwargs)`` (e.g. a Helion kernel with ``backend="cute"``) in a CUDA
    graph, to replay it without launch overhead.

    The call first runs `warmup` times on a side stream, so that every CuTe module is compiled
    and loaded (and a kernel's config chosen) before the capture: a capture may launch kernels
    but not compile or load them. The graph then replays the launches on the same tensors:
    write new inputs into `args` in place and call `replay()`.

    Args:
        fn: what to capture; it must launch its work on torch's current stream (Helion kernels
            of every backend do).
        args, kwargs: its arguments (CUDA tensors), kept alive by the graph's use of them.
        warmup: calls before the capture (at least 1).
        pool: a memory pool to share with other graphs (``torch.cuda.graph``'s `pool`).

    Returns:
        A `CapturedGraph`: ``.replay()`` (or calling it) reruns the captured kernels and returns
        ``.output``, the captured call's result.

    Raises:
        helion.exc.CuteBackendUnavailable: CUDA is not available (CUDA graphs need an NVIDIA
            GPU).
        ValueError: `warmup` below 1.
    """
    if not torch.cuda.is_available():
        raise exc.CuteBackendUnavailable(
            "cute_cuda_graph captures CUDA graphs, and CUDA is not available here",
            hint="Run it on a machine with an NVIDIA GPU; call the kernel directly elsewhere.",
        )
    if warmup < 1:
        raise ValueError(
            f"cute_cuda_graph needs warmup >= 1 (compiles before the capture), got {warmup}"
        )
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn(*args, **kwargs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        output = fn(*args, **kwargs)
    return CapturedGraph(graph, output)


def _backend(name: str, api: str) -> Any:
    from helion.backends import get_backend

    try:
        return get_backend(name)
    except exc.BackendUnavailable as error:
        error.add_note(f"(needed by helion.runtime.{api})")
        raise
