"""The language ops helion-distributed adds to ``helion.language`` (``hl.signal``, ``hl.wait``,
``hl.peer_barrier``, ``hl.all_reduce``, ``hl.all_gather``, ``hl.reduce_scatter``, and the host
helpers ``hl.peer_tensors``, ``hl.signal_pads``, ``hl.symm_mem``).

Each op is one ``Op`` (traits and a type rule) plus a public callable. The callable hands its
arguments to the active mode: the tracer (device code being turned into IR), eager mode
(``HELION_INTERPRET=1``: runs right here, see ``_eager``) or host code (only the host helpers).
Lowerings live with the backends' tables: ``_ref`` for the ref backend, ``_triton`` for Triton,
both reached through the ``helion_lowerings`` hook.

Conventions shared by every op:

- a *signal pad* is an int32 tensor of 32-bit slots in symmetric memory (``hl.signal_pads``
  gives one per rank); ``pads[r]`` is rank r's pad as mapped in this process;
- *peers* is the tuple of every rank's view of a symmetric buffer (``hl.peer_tensors``, like
  ``torch.ops.symm_mem.get_remote_tensors``); ``peers[RANK]`` is this rank's own buffer;
- ``rank`` is this rank's index in the group, a compile-time constant (``hl.constexpr``).
"""

from __future__ import annotations

from typing import Any
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.ir.core import TensorType
from helion.language import ConstExpr
from helion.language._context import current_mode
from helion.language._ops import define_op

PROVIDER = "helion-distributed"
REDUCE_OPS = ("sum", "max", "min", "prod")
SCOPES = ("gpu", "sys")
SIGNAL_SEMS = ("release", "relaxed", "acq_rel")
WAIT_SEMS = ("acquire", "relaxed", "acq_rel")


def _same_type(inputs: Sequence[Any], attrs: dict) -> list:
    value = inputs[attrs["value"]]
    return [TensorType(value.type.shape, value.type.dtype)]


def _gather_type(inputs: Sequence[Any], attrs: dict) -> list:
    value = inputs[attrs["value"]]
    return [TensorType((sympy.Integer(attrs["world_size"]), *value.type.shape), value.type.dtype)]


def _scatter_type(inputs: Sequence[Any], attrs: dict) -> list:
    value = inputs[attrs["values"][0]]
    return [TensorType(value.type.shape, value.type.dtype)]


signal_op = define_op("dist_signal", None, side_effects=True, provider=PROVIDER, doc="hl.signal")
wait_op = define_op("dist_wait", None, side_effects=True, provider=PROVIDER, doc="hl.wait")
barrier_op = define_op(
    "dist_peer_barrier", None, side_effects=True, provider=PROVIDER, doc="hl.peer_barrier"
)
all_reduce_op = define_op(
    "dist_all_reduce", _same_type, side_effects=True, provider=PROVIDER, doc="hl.all_reduce"
)
all_gather_op = define_op(
    "dist_all_gather", _gather_type, side_effects=True, provider=PROVIDER, doc="hl.all_gather"
)
reduce_scatter_op = define_op(
    "dist_reduce_scatter",
    _scatter_type,
    side_effects=True,
    provider=PROVIDER,
    doc="hl.reduce_scatter",
)
OPS = (signal_op, wait_op, barrier_op, all_reduce_op, all_gather_op, reduce_scatter_op)


# ---------------------------------------------------------------------------------------------
# mode plumbing


def _mode_kind(mode: Any) -> str:
    from helion.frontend.tracer import Tracer

    if isinstance(mode, Tracer):
        return "trace"
    from helion.eager.mode import EagerMode

    if isinstance(mode, EagerMode):
        return "eager" if mode.depth else "host"
    return "host"


class LanguageOp:
    """A public ``hl.<name>`` function contributed by this plugin."""

    def __init__(
        self, name: str, device: bool, trace: Any, eager: Any, host: Any = None, doc: str = ""
    ) -> None:
        self.name = name
        self.device = device
        self._trace = trace
        self._eager = eager
        self._host = host
        self.__name__ = name
        self.__qualname__ = name
        self.__doc__ = doc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        mode = current_mode()
        if mode is None:
            if self._host is not None:
                return self._host(*args, **kwargs)
            raise exc.NotInsideKernel(f"hl.{self.name}")
        kind = _mode_kind(mode)
        if kind == "trace":
            if self._trace is None:
                raise exc.NotAllowedOnDevice(
                    f"hl.{self.name} (call it in host code, before the loop)",
                    loc=mode.current_loc(),
                )
            return self._trace(mode, *args, **kwargs)
        if kind == "eager":
            if self._eager is None:
                raise exc.NotAllowedOnDevice(
                    f"hl.{self.name} (call it in host code, before the loop)"
                )
            return self._eager(mode, *args, **kwargs)
        if self._host is None:
            raise exc.DeviceAPIOnHost(f"hl.{self.name}")
        return self._host(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<hl.{self.name} from {PROVIDER}>"


# ---------------------------------------------------------------------------------------------
# argument checks shared by the tracer and eager mode


def _constant_int(value: Any, what: str, loc: Any = None) -> int:
    if isinstance(value, ConstExpr):
        value = value.value
    if isinstance(value, bool) or not isinstance(value, int):
        raise exc.TypeInferenceError(
            f"{what} must be a compile-time int (declare the kernel argument `RANK: hl.constexpr`), "
            f"got {type(value).__name__}",
            loc=loc,
        )
    return int(value)


def _check_choice(value: Any, choices: Sequence[str], what: str, loc: Any = None) -> str:
    if value not in choices:
        raise exc.InvalidConfig(
            f"{what} must be one of {', '.join(choices)}; got {value!r}", loc=loc
        )
    return value


def _check_pad_dtype(dtype: torch.dtype, loc: Any = None) -> None:
    if dtype not in (torch.int32, torch.uint32):
        raise exc.TypeInferenceError(
            f"signal pads are int32 (or uint32) tensors, got {dtype}", loc=loc
        )


def _sequence(value: Any, what: str, loc: Any = None) -> list[Any]:
    if not isinstance(value, (list, tuple)) or not value:
        raise exc.TypeInferenceError(
            f"{what} must be a tuple with one tensor per rank (hl.peer_tensors / hl.signal_pads in host code), "
            f"got {type(value).__name__}",
            loc=loc,
        )
    return list(value)


# ---------------------------------------------------------------------------------------------
# tracing


def _host_tensor(tracer: Any, value: Any, what: str) -> Any:
    from helion.frontend.proxies import HostTensor

    if not isinstance(value, HostTensor):
        raise exc.TypeInferenceError(
            f"{what} must be a kernel tensor argument, got {type(value).__name__}",
            loc=tracer.current_loc(),
        )
    return value


def _scalar_operand(tracer: Any, value: Any, inputs: list, what: str) -> Any:
    """An int attribute, or ("input", position) for a runtime 0-D device value."""
    from helion.frontend.proxies import DeviceValue

    if isinstance(value, ConstExpr):
        value = value.value
    if isinstance(value, DeviceValue):
        if value.ndim != 0:
            raise exc.TypeInferenceError(f"{what} must be a scalar", loc=tracer.current_loc())
        inputs.append(value.value)
        return ("input", len(inputs) - 1)
    if isinstance(value, bool) or not isinstance(value, int):
        raise exc.TypeInferenceError(
            f"{what} must be an int, got {type(value).__name__}", loc=tracer.current_loc()
        )
    return int(value)


def _trace_signal(
    tracer: Any,
    pad: Any,
    index: Any,
    signal: Any = 1,
    *,
    wait_for: Any = None,
    op: str = "set",
    scope: str = "gpu",
    sem: str = "release",
) -> None:
    loc = tracer.current_loc()
    pad = _host_tensor(tracer, pad, "the signal pad of hl.signal")
    _check_pad_dtype(pad.dtype, loc)
    _check_choice(op, ("set", "add"), "hl.signal op", loc)
    _check_choice(scope, SCOPES, "hl.signal scope", loc)
    _check_choice(sem, SIGNAL_SEMS, "hl.signal sem", loc)
    if wait_for is not None and op != "set":
        raise exc.InvalidConfig(
            "hl.signal(wait_for=...) swaps the value in; it cannot be combined with op='add'",
            loc=loc,
        )
    items, inputs, shape = tracer._index_items(
        pad, tuple(index) if isinstance(index, (list, tuple)) else (index,)
    )
    attrs = {
        "tensor": pad.arg,
        "items": tuple(items),
        "shape": tuple(shape),
        "signal": _scalar_operand(tracer, signal, inputs, "the signal value"),
        "wait_for": None
        if wait_for is None
        else _scalar_operand(tracer, wait_for, inputs, "wait_for"),
        "op": op,
        "scope": scope,
        "sem": sem,
    }
    tracer.emit(signal_op, inputs, attrs, [])


def _trace_wait(
    tracer: Any,
    pad: Any,
    index: Any,
    signal: Any = 1,
    *,
    update: Any = None,
    scope: str = "gpu",
    sem: str = "acquire",
    timeout: float | None = None,
) -> None:
    loc = tracer.current_loc()
    pad = _host_tensor(tracer, pad, "the signal pad of hl.wait")
    _check_pad_dtype(pad.dtype, loc)
    _check_choice(scope, SCOPES, "hl.wait scope", loc)
    _check_choice(sem, WAIT_SEMS, "hl.wait sem", loc)
    items, inputs, shape = tracer._index_items(
        pad, tuple(index) if isinstance(index, (list, tuple)) else (index,)
    )
    attrs = {
        "tensor": pad.arg,
        "items": tuple(items),
        "shape": tuple(shape),
        "signal": _scalar_operand(tracer, signal, inputs, "the awaited value"),
        "update": None if update is None else _scalar_operand(tracer, update, inputs, "update"),
        "scope": scope,
        "sem": sem,
        "timeout": None if timeout is None else float(timeout),
    }
    tracer.emit(wait_op, inputs, attrs, [])


def _pad_args(tracer: Any, signal_pads: Any, world_size: int | None) -> tuple:
    loc = tracer.current_loc()
    pads = [
        _host_tensor(tracer, p, "each signal pad")
        for p in _sequence(signal_pads, "signal_pads", loc)
    ]
    if world_size is not None and len(pads) != world_size:
        raise exc.ShapeMismatch(f"{len(pads)} signal pads for {world_size} peer buffers", loc=loc)
    for pad in pads:
        _check_pad_dtype(pad.dtype, loc)
    return tuple(p.arg for p in pads)


def _grid_tiles(tracer: Any, inputs: list, what: str) -> tuple[int, ...]:
    """Add the tiles of the enclosing top-level loop to ``inputs`` (compiled backends number the
    signal-pad slot of a collective by the grid tile it runs in); returns their positions."""
    from helion.ir.core import TileType

    if len(tracer.blocks) < 2:
        raise exc.NotAllowedOnDevice(
            f"{what} outside a top-level hl.tile / hl.grid loop", loc=tracer.current_loc()
        )
    positions = []
    for arg in tracer.blocks[1].args:
        if isinstance(arg.type, TileType):
            inputs.append(arg)
            positions.append(len(inputs) - 1)
    return tuple(positions)


def _trace_barrier(tracer: Any, signal_pads: Any, rank: Any) -> None:
    loc = tracer.current_loc()
    pads = _pad_args(tracer, signal_pads, None)
    rank = _constant_int(rank, "rank", loc)
    if not 0 <= rank < len(pads):
        raise exc.InvalidConfig(f"rank {rank} is not in a group of {len(pads)}", loc=loc)
    inputs: list[Any] = []
    grid = _grid_tiles(tracer, inputs, "hl.peer_barrier")
    tracer.emit(
        barrier_op, inputs, {"pads": pads, "rank": rank, "world_size": len(pads), "grid": grid}, []
    )


def _collective_setup(
    tracer: Any, peers: Any, index: Any, signal_pads: Any, rank: Any, leading_rank_dim: bool
) -> tuple:
    loc = tracer.current_loc()
    buffers = [_host_tensor(tracer, p, "each peer buffer") for p in _sequence(peers, "peers", loc)]
    world_size = len(buffers)
    rank = _constant_int(rank, "rank", loc)
    if not 0 <= rank < world_size:
        raise exc.InvalidConfig(f"rank {rank} is not in a group of {world_size}", loc=loc)
    first = buffers[0]
    for other in buffers[1:]:
        if tuple(other.shape) != tuple(first.shape) or other.dtype != first.dtype:
            raise exc.ShapeMismatch("peer buffers must all have the same shape and dtype", loc=loc)
    pads = _pad_args(tracer, signal_pads, world_size)
    index = list(index) if isinstance(index, (list, tuple)) else [index]
    if leading_rank_dim:
        if first.ndim < 1 or first.shape[0] != world_size:
            raise exc.ShapeMismatch(
                f"hl.reduce_scatter needs peer buffers with a leading dimension of world size {world_size}, "
                f"got shape {list(first.shape)}",
                loc=loc,
            )
        index = [0, *index]
    items, inputs, shape = tracer._index_items(buffers[rank], tuple(index))
    if any(item[0] == "tensor" for item in items):
        raise exc.InvalidIndexingType(
            "index tensors in a tile collective (use tiles, slices and scalars)", loc=loc
        )
    attrs = {
        "tensors": tuple(b.arg for b in buffers),
        "pads": pads,
        "items": tuple(items),
        "shape": tuple(shape),
        "rank": rank,
        "world_size": world_size,
    }
    attrs["grid"] = _grid_tiles(tracer, inputs, "a tile collective")
    return attrs, inputs, shape, buffers[rank].dtype


def _trace_all_reduce(
    tracer: Any, value: Any, peers: Any, index: Any, signal_pads: Any, rank: Any, op: str = "sum"
) -> Any:
    _check_choice(op, REDUCE_OPS, "hl.all_reduce op", tracer.current_loc())
    attrs, inputs, shape, dtype = _collective_setup(tracer, peers, index, signal_pads, rank, False)
    inputs.append(tracer._stored_value(value, shape, dtype))
    attrs.update(value=len(inputs) - 1, op=op)
    return tracer.wrap(tracer.emit(all_reduce_op, inputs, attrs))


def _trace_all_gather(
    tracer: Any, value: Any, peers: Any, index: Any, signal_pads: Any, rank: Any
) -> Any:
    attrs, inputs, shape, dtype = _collective_setup(tracer, peers, index, signal_pads, rank, False)
    inputs.append(tracer._stored_value(value, shape, dtype))
    attrs["value"] = len(inputs) - 1
    return tracer.wrap(tracer.emit(all_gather_op, inputs, attrs))


def _trace_reduce_scatter(
    tracer: Any, values: Any, peers: Any, index: Any, signal_pads: Any, rank: Any, op: str = "sum"
) -> Any:
    from helion.frontend.proxies import DeviceValue

    loc = tracer.current_loc()
    _check_choice(op, REDUCE_OPS, "hl.reduce_scatter op", loc)
    attrs, inputs, shape, dtype = _collective_setup(tracer, peers, index, signal_pads, rank, True)
    world_size = attrs["world_size"]
    if isinstance(values, DeviceValue):
        leading = values.shape[0] if values.ndim else None
        if not isinstance(leading, int) or int(leading) != world_size:
            raise exc.ShapeMismatch(
                f"hl.reduce_scatter needs one value per rank: a leading dimension of {world_size}, "
                f"got {list(values.value.type.shape)}",
                loc=loc,
            )
        from helion.language import _ops as core_ops

        rest = tuple(values.value.type.shape[1:])
        items = ("slice",) * len(rest)
        parts = [
            tracer.wrap(
                tracer.emit(
                    core_ops.view_subscript, [values.value], {"items": (r, *items), "shape": rest}
                )
            )
            for r in range(world_size)
        ]
    else:
        parts = list(values) if isinstance(values, (list, tuple)) else []
        if len(parts) != world_size:
            raise exc.ShapeMismatch(
                f"hl.reduce_scatter needs {world_size} values (one per rank), got {len(parts)}",
                loc=loc,
            )
    # the item of the leading (rank) dimension is a placeholder; the lowering picks the rank
    positions = []
    for part in parts:
        inputs.append(tracer._stored_value(part, shape, dtype))
        positions.append(len(inputs) - 1)
    attrs.update(values=tuple(positions), op=op)
    return tracer.wrap(tracer.emit(reduce_scatter_op, inputs, attrs))


# ---------------------------------------------------------------------------------------------
# host helpers


def _host_peer_tensors(tensor: torch.Tensor, group: Any = None) -> tuple[torch.Tensor, ...]:
    from helion_distributed import symm_mem

    return symm_mem.get_remote_tensors(tensor, group)


def _host_signal_pads(tensor: torch.Tensor, group: Any = None) -> tuple[torch.Tensor, ...]:
    from helion_distributed import symm_mem

    return symm_mem.get_signal_pads(tensor, group)


def _eager(name: str) -> Any:
    def run(mode: Any, *args: Any, **kwargs: Any) -> Any:
        from helion_distributed import _eager as impl

        return getattr(impl, name)(mode, *args, **kwargs)

    return run


signal = LanguageOp(
    "signal",
    True,
    _trace_signal,
    _eager("signal"),
    doc="""Write ``signal`` into ``pad[index]`` (every element the index selects).

    Args:
        pad: a signal pad (an int32 kernel tensor argument, usually ``pads[r]`` of
            ``hl.signal_pads``: any rank's pad may be signalled).
        index: like a load index: ints, scalars, tiles, slices.
        signal: the value to write (an int or a scalar device value).
        wait_for: when given, spin until the slot holds ``wait_for`` and swap ``signal`` in
            (compare-and-swap), e.g. ``wait_for=0`` waits for the receiver to consume the
            previous signal. Bounded by the distributed timeout.
        op: ``"set"`` (atomic exchange) or ``"add"`` (atomic add).
        scope: ``"gpu"`` or ``"sys"`` (the memory scope of the atomic on GPUs).
        sem: ``"release"`` (writes before the signal are visible to whoever sees it),
            ``"relaxed"`` or ``"acq_rel"``.
    """,
)

wait = LanguageOp(
    "wait",
    True,
    _trace_wait,
    _eager("wait"),
    doc="""Spin until every element of ``pad[index]`` holds ``signal``; with ``update``, swap it
    for ``update`` (compare-and-swap), e.g. ``update=0`` consumes the signal.

    The spin is bounded: after the distributed timeout (``HELION_DIST_TIMEOUT``, 60 s by default,
    or ``timeout=`` seconds) it raises ``helion_distributed.DistributedTimeout`` naming this rank,
    the pad and the index, instead of hanging.

    Args:
        pad, index: as for ``hl.signal``.
        signal: the awaited value.
        update: the value to leave in the slot (None leaves it unchanged).
        scope: ``"gpu"`` or ``"sys"``.
        sem: ``"acquire"`` (reads after the wait see the writes released before the signal),
            ``"relaxed"`` or ``"acq_rel"``.
        timeout: seconds, overriding the distributed timeout for this wait.
    """,
)

peer_barrier = LanguageOp(
    "peer_barrier",
    True,
    _trace_barrier,
    _eager("peer_barrier"),
    doc="""All ranks of the group meet for the current tile: every rank signals every pad and
    waits for every rank's signal, with release/acquire ordering, so writes made before the
    barrier (to any rank's buffer) are visible to every rank after it.

    The tiles of a grid pair up by launch order (program id on GPUs), so every rank must run the
    same kernel with the same config. The pad slots return to zero, so the barrier can be used
    any number of times.

    Args:
        signal_pads: ``hl.signal_pads(buffer, group)``: one pad per rank.
        rank: this rank's index in the group (``hl.constexpr``).
    """,
)

all_reduce = LanguageOp(
    "all_reduce",
    True,
    _trace_all_reduce,
    _eager("all_reduce"),
    doc="""Reduce a tile across the ranks of a group, fused into the kernel.

    ``value`` is staged into this rank's symmetric buffer at ``index``
    (``peers[rank][index] = value``), the ranks meet, and the result is the reduction of
    ``peers[r][index]`` over every rank r; the ranks meet again before returning so the buffer
    region may be reused. Every rank gets the full result (a one-shot all-reduce of the tile).

    Args:
        value: the tile (cast and broadcast to the buffer's dtype and the region's shape).
        peers: ``hl.peer_tensors(buffer, group)``.
        index: the region of the buffer this tile uses (e.g. ``[tile_m, tile_n]``).
        signal_pads: ``hl.signal_pads(buffer, group)``.
        rank: this rank's index in the group (``hl.constexpr``).
        op: ``"sum"``, ``"max"``, ``"min"`` or ``"prod"``.

    Returns:
        The reduced tile, in the buffer's dtype (low-precision sums accumulate in float32).
    """,
)

all_gather = LanguageOp(
    "all_gather",
    True,
    _trace_all_gather,
    _eager("all_gather"),
    doc="""Gather a tile from every rank: returns a tile of shape ``[world_size, *value.shape]``
    whose entry r is rank r's ``value`` (staged through ``peers[r][index]``).

    Args: as for ``hl.all_reduce`` (without ``op``).
    """,
)

reduce_scatter = LanguageOp(
    "reduce_scatter",
    True,
    _trace_reduce_scatter,
    _eager("reduce_scatter"),
    doc="""Reduce-scatter at tile granularity: each rank contributes one value per destination
    rank, and gets back the reduction of what every rank sent it.

    ``values`` is a sequence of ``world_size`` tiles (or one tile with a leading dimension of
    ``world_size``); ``values[d]`` goes to rank d. The peer buffers need a leading dimension of
    ``world_size``: rank r's contribution for rank d is written into ``peers[d][r, *index]``, so
    every rank reads only its own buffer.

    Args:
        values: ``world_size`` tiles of one shape.
        peers, index, signal_pads, rank, op: as for ``hl.all_reduce`` (``index`` addresses the
            buffer's dimensions after the leading one).

    Returns:
        This rank's reduced tile.
    """,
)

peer_tensors = LanguageOp(
    "peer_tensors",
    False,
    None,
    None,
    _host_peer_tensors,
    doc="""Host code: every rank's view of the symmetric tensor ``tensor`` (a tuple indexed by
    rank in ``group``; the device code may loop over it). ``group`` is a ``ProcessGroup``, a group
    name (an ``hl.ProcessGroupName`` argument) or None (the default group).""",
)

signal_pads = LanguageOp(
    "signal_pads",
    False,
    None,
    None,
    _host_signal_pads,
    doc="""Host code: every rank's signal pad of ``tensor``'s symmetric allocation, as a tuple of
    int32 tensors indexed by rank in ``group``.""",
)


class _SymmMemNamespace:
    """``hl.symm_mem``: the ``helion_distributed.symm_mem`` module, reachable from ``hl``."""

    name = "symm_mem"

    def __getattr__(self, attribute: str) -> Any:
        from helion_distributed import symm_mem as module

        return getattr(module, attribute)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "hl.symm_mem is a namespace: use hl.symm_mem.empty(...), hl.symm_mem.rendezvous(...)"
        )

    def __repr__(self) -> str:
        return "<hl.symm_mem (helion_distributed.symm_mem)>"


symm_mem = _SymmMemNamespace()

LANGUAGE_OPS = [
    signal,
    wait,
    peer_barrier,
    all_reduce,
    all_gather,
    reduce_scatter,
    peer_tensors,
    signal_pads,
    symm_mem,
]
