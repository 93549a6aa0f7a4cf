"""The distributed ops in eager mode (``HELION_INTERPRET=1``): the kernel body runs as Python,
so each op runs right away on the real tensors, with ``_host_impl``."""

from __future__ import annotations

from typing import Any
from typing import Sequence

import torch

from helion import exc
from helion.eager.tiles import RefTile
from helion.language import ConstExpr
from helion_distributed import _host_impl
from helion_distributed import language as dl


def _index(index: Any) -> tuple:
    items = list(index) if isinstance(index, (list, tuple)) else [index]
    result: list[Any] = []
    for item in items:
        if isinstance(item, RefTile):
            result.append(slice(item.begin, item.end))
        elif isinstance(item, ConstExpr):
            result.append(int(item.value))
        elif isinstance(item, torch.Tensor):
            if item.ndim != 0:
                raise exc.InvalidIndexingType(
                    "index tensors in a distributed op (use tiles, slices and scalars)"
                )
            with torch._C.DisableTorchFunction():
                result.append(int(item.item()))
        else:
            result.append(item)
    return tuple(result)


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, ConstExpr):
        value = value.value
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunction():
            return int(value.item())
    return int(value)


def _tensor(value: Any, like: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    with torch._C.DisableTorchFunction():
        if not isinstance(value, torch.Tensor):
            value = torch.tensor(value, dtype=like.dtype, device=like.device)
        return value.to(like.dtype).expand(tuple(shape))


def signal(
    mode: Any,
    pad: Any,
    index: Any,
    signal: Any = 1,
    *,
    wait_for: Any = None,
    op: str = "set",
    scope: str = "gpu",
    sem: str = "release",
) -> None:
    dl._check_pad_dtype(pad.dtype)
    dl._check_choice(op, ("set", "add"), "hl.signal op")
    dl._check_choice(scope, dl.SCOPES, "hl.signal scope")
    dl._check_choice(sem, dl.SIGNAL_SEMS, "hl.signal sem")
    with torch._C.DisableTorchFunction():
        _host_impl.signal(pad, _index(index), _int(signal), _int(wait_for), op)


def wait(
    mode: Any,
    pad: Any,
    index: Any,
    signal: Any = 1,
    *,
    update: Any = None,
    scope: str = "gpu",
    sem: str = "acquire",
    timeout: float | None = None,
) -> None:
    dl._check_pad_dtype(pad.dtype)
    dl._check_choice(scope, dl.SCOPES, "hl.wait scope")
    dl._check_choice(sem, dl.WAIT_SEMS, "hl.wait sem")
    with torch._C.DisableTorchFunction():
        _host_impl.wait(pad, _index(index), _int(signal), _int(update), timeout)


def peer_barrier(mode: Any, signal_pads: Any, rank: Any) -> None:
    pads = dl._sequence(signal_pads, "signal_pads")
    rank = dl._constant_int(rank, "rank")
    slot = _host_impl.next_slot(mode, mode)
    with torch._C.DisableTorchFunction():
        _host_impl.barrier(pads, rank, slot, f"hl.peer_barrier (collective #{slot} of this launch)")


def _setup(peers: Any, signal_pads: Any, rank: Any) -> tuple[list, list, int]:
    buffers = dl._sequence(peers, "peers")
    pads = dl._sequence(signal_pads, "signal_pads")
    if len(pads) != len(buffers):
        raise exc.ShapeMismatch(f"{len(pads)} signal pads for {len(buffers)} peer buffers")
    rank = dl._constant_int(rank, "rank")
    if not 0 <= rank < len(buffers):
        raise exc.InvalidConfig(f"rank {rank} is not in a group of {len(buffers)}")
    return buffers, pads, rank


def all_reduce(
    mode: Any, value: Any, peers: Any, index: Any, signal_pads: Any, rank: Any, op: str = "sum"
) -> torch.Tensor:
    dl._check_choice(op, dl.REDUCE_OPS, "hl.all_reduce op")
    buffers, pads, rank = _setup(peers, signal_pads, rank)
    slot = _host_impl.next_slot(mode, mode)
    with torch._C.DisableTorchFunction():
        region = _index(index)
        value = _tensor(value, buffers[rank], buffers[rank][region].shape)
        return _host_impl.all_reduce(value, buffers, region, pads, rank, slot, op)


def all_gather(
    mode: Any, value: Any, peers: Any, index: Any, signal_pads: Any, rank: Any
) -> torch.Tensor:
    buffers, pads, rank = _setup(peers, signal_pads, rank)
    slot = _host_impl.next_slot(mode, mode)
    with torch._C.DisableTorchFunction():
        region = _index(index)
        value = _tensor(value, buffers[rank], buffers[rank][region].shape)
        return _host_impl.all_gather(value, buffers, region, pads, rank, slot)


def reduce_scatter(
    mode: Any, values: Any, peers: Any, index: Any, signal_pads: Any, rank: Any, op: str = "sum"
) -> torch.Tensor:
    dl._check_choice(op, dl.REDUCE_OPS, "hl.reduce_scatter op")
    buffers, pads, rank = _setup(peers, signal_pads, rank)
    world = len(buffers)
    if isinstance(values, torch.Tensor):
        values = [values[r] for r in range(values.shape[0])]
    values = list(values)
    if len(values) != world:
        raise exc.ShapeMismatch(
            f"hl.reduce_scatter needs {world} values (one per rank), got {len(values)}"
        )
    slot = _host_impl.next_slot(mode, mode)
    with torch._C.DisableTorchFunction():
        region = _index(index)
        shape = buffers[rank][(0, *region)].shape
        parts = [_tensor(v, buffers[rank], shape) for v in values]
        return _host_impl.reduce_scatter(parts, buffers, region, pads, rank, slot, op)


def _not_in_eager(op: str) -> None:
    import os
    import sys

    import helion

    # the kernel line: the first frame outside helion and this package
    skip = (os.path.dirname(helion.__file__), os.path.dirname(__file__))
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(skip):
        frame = frame.f_back
    raise exc.BackendUnsupported(
        f"{op} (its completion signals are compiler-owned words reserved when the kernel is traced; "
        "run the kernel on the ref or Triton backend: unset HELION_INTERPRET) at "
        f"{frame.f_code.co_filename}:{frame.f_lineno}",
        "eager mode (HELION_INTERPRET=1)",
    )


def make_async_remote_copy(mode: Any, *args: Any, **kwargs: Any) -> None:
    _not_in_eager("hl.make_async_remote_copy")


def remote_barrier(mode: Any, *args: Any, **kwargs: Any) -> None:
    _not_in_eager("hl.remote_barrier")
