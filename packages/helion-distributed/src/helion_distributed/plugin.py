"""Hook implementations of helion-distributed (hookimpls only).

The plugin provides language ops (``hl.signal``, ``hl.wait``, ``hl.peer_barrier``,
``hl.all_reduce``, ``hl.all_gather``, ``hl.reduce_scatter``, ``hl.peer_tensors``,
``hl.signal_pads``, ``hl.symm_mem``, ``hl.make_async_remote_copy``, ``hl.AsyncCopyDescriptor``,
``hl.remote_barrier``) and their lowerings for the ref and Triton backends; no
backend of its own. Imports are lazy so plugin discovery stays cheap.
"""

from __future__ import annotations

from typing import Any
from typing import Callable

from helion.plugins import hookimpl


@hookimpl
def helion_language_ops() -> list[Any]:
    from helion_distributed.language import LANGUAGE_OPS
    from helion_distributed.remote_copy import REMOTE_COPY_LANGUAGE_OPS

    return [*LANGUAGE_OPS, *REMOTE_COPY_LANGUAGE_OPS]


@hookimpl
def helion_autotune_refusal(bound: Any, args: tuple[Any, ...]) -> BaseException | None:
    """A distributed kernel is tuned by every rank together (``helion_distributed.autotune``),
    never by the ordinary autotuner of one rank."""
    from helion_distributed.lockstep import refuse_rank_by_rank

    return refuse_rank_by_rank(bound, args)


@hookimpl
def helion_lowerings(backend: str) -> dict[Any, Callable[..., Any]]:
    if backend == "ref":
        from helion_distributed._ref import REF_LOWERINGS

        return dict(REF_LOWERINGS)
    if backend == "triton":
        from helion_distributed._triton import triton_lowerings

        return triton_lowerings()
    return {}
