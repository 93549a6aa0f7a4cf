"""helion-distributed: distributed Helion kernels (symmetric memory, signal pads, collectives).

- ``helion_distributed.symm_mem``: symmetric memory on CUDA (torch) and CPU (shared memory).
- language ops added to ``helion.language`` through the ``helion.plugins`` entry point
  (:mod:`helion_distributed.plugin`): ``hl.signal``, ``hl.wait``, ``hl.peer_barrier``,
  ``hl.all_reduce``, ``hl.all_gather``, ``hl.reduce_scatter``, ``hl.peer_tensors``,
  ``hl.signal_pads``, ``hl.symm_mem``, and the one-sided remote copies
  ``hl.make_async_remote_copy`` (an ``hl.AsyncCopyDescriptor``) and ``hl.remote_barrier``.
- ready kernels: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_gather_matmul``,
  ``matmul_reduce_scatter``, ``fp8_all_gather_matmul``, ``fp8_matmul_reduce_scatter``,
  ``all_reduce_bias_rms_norm``, ``two_dim_parallel_matmul`` (with ``mesh_2d``).
- ``autotune``: tune a distributed kernel in lockstep on every rank.

The ready kernels are imported lazily (importing this package does not compile anything).
"""

from __future__ import annotations

import importlib.metadata

from helion_distributed import symm_mem
from helion_distributed._env import set_timeout
from helion_distributed._env import timeout_s
from helion_distributed.errors import DistributedAutotuneError
from helion_distributed.errors import DistributedError
from helion_distributed.errors import DistributedTimeout
from helion_distributed.errors import FP8Unsupported
from helion_distributed.errors import SymmetricMemoryError

_KERNELS = {
    "all_gather",
    "all_gather_matmul",
    "all_reduce",
    "all_reduce_bias_rms_norm",
    "fp8_all_gather_matmul",
    "fp8_matmul_reduce_scatter",
    "matmul_reduce_scatter",
    "mesh_2d",
    "reduce_scatter",
    "two_dim_parallel_matmul",
}


def check_timeouts(tensor=None, group=None, what: str = "a kernel") -> None:
    """Raise ``DistributedTimeout`` if a compiled kernel's wait timed out on this rank while it
    used the signal pads of ``tensor``'s symmetric allocation (compiled kernels record the missing
    rank in the pad instead of raising; the ready kernels call this after every launch). With
    ``tensor=None``: the compiler-owned pads of the remote copies and remote barriers
    (``hl.make_async_remote_copy``, ``hl.remote_barrier``) of every kernel on ``group``."""
    if tensor is None:
        from helion_distributed.remote_copy import check_timeouts as check_remote_copies

        check_remote_copies(group)
        return
    from helion_distributed._host_impl import check_kernel_timeouts

    check_kernel_timeouts(symm_mem.rendezvous(tensor, group), what)


def __getattr__(name: str):
    if name in _KERNELS:
        from helion_distributed import kernels

        return getattr(kernels, name)
    if name == "autotune":
        from helion_distributed.lockstep import autotune

        return autotune
    raise AttributeError(f"module 'helion_distributed' has no attribute {name!r}")


try:
    __version__ = importlib.metadata.version("helion-distributed")
except importlib.metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    *sorted(_KERNELS),
    "DistributedAutotuneError",
    "DistributedError",
    "DistributedTimeout",
    "FP8Unsupported",
    "SymmetricMemoryError",
    "autotune",
    "check_timeouts",
    "set_timeout",
    "symm_mem",
    "timeout_s",
]
