"""Lowerings of the distributed ops for the ref backend (merged into ``REF_LOWERINGS`` through
the ``helion_lowerings("ref")`` hook). The ref backend runs a kernel's tiles one after the other
on the host, so each rule simply performs the op, with ``_host_impl``."""

from __future__ import annotations

from typing import Any
from typing import Callable

from helion import exc
from helion.backends.ref.lowerings import _basic_index
from helion_distributed import _host_impl
from helion_distributed import language as dl
from helion_distributed import remote_copy as rc
from helion_distributed.errors import DistributedError


def _scalar(operand: Any, inputs: list) -> int | None:
    if operand is None:
        return None
    if isinstance(operand, tuple):
        value = inputs[operand[1]]
        return int(value.item()) if hasattr(value, "item") else int(value)
    return int(operand)


def _index(ex: Any, node: Any, inputs: list) -> tuple:
    items = node.attrs["items"]
    if any(item[0] == "tensor" for item in items):
        raise exc.BackendUnsupported(f"{node.op.doc} with an index tensor", "ref", loc=node.loc)
    return _basic_index(ex, items, inputs)


def _located(rule: Callable) -> Callable:
    def run(ex: Any, node: Any, inputs: list) -> Any:
        try:
            return rule(ex, node, inputs)
        except DistributedError as error:
            if node.loc is not None:
                error.with_location(node.loc)
            raise

    run.__name__ = rule.__name__
    return run


@_located
def _signal(ex: Any, node: Any, inputs: list) -> None:
    pad = ex.host[node.attrs["tensor"].index]
    _host_impl.signal(
        pad,
        _index(ex, node, inputs),
        _scalar(node.attrs["signal"], inputs),
        _scalar(node.attrs["wait_for"], inputs),
        node.attrs["op"],
    )


@_located
def _wait(ex: Any, node: Any, inputs: list) -> None:
    pad = ex.host[node.attrs["tensor"].index]
    _host_impl.wait(
        pad,
        _index(ex, node, inputs),
        _scalar(node.attrs["signal"], inputs),
        _scalar(node.attrs["update"], inputs),
        node.attrs["timeout"],
    )


def _pads(ex: Any, node: Any) -> list:
    return [ex.host[arg.index] for arg in node.attrs["pads"]]


def _peers(ex: Any, node: Any) -> list:
    return [ex.host[arg.index] for arg in node.attrs["tensors"]]


@_located
def _barrier(ex: Any, node: Any, inputs: list) -> None:
    slot = _host_impl.next_slot(ex, ex.host)
    _host_impl.barrier(
        _pads(ex, node),
        node.attrs["rank"],
        slot,
        f"hl.peer_barrier (collective #{slot} of this launch)",
    )


@_located
def _all_reduce(ex: Any, node: Any, inputs: list) -> Any:
    slot = _host_impl.next_slot(ex, ex.host)
    value = inputs[node.attrs["value"]]
    return _host_impl.all_reduce(
        value,
        _peers(ex, node),
        _index(ex, node, inputs),
        _pads(ex, node),
        node.attrs["rank"],
        slot,
        node.attrs["op"],
    )


@_located
def _all_gather(ex: Any, node: Any, inputs: list) -> Any:
    slot = _host_impl.next_slot(ex, ex.host)
    value = inputs[node.attrs["value"]]
    return _host_impl.all_gather(
        value, _peers(ex, node), _index(ex, node, inputs), _pads(ex, node), node.attrs["rank"], slot
    )


@_located
def _reduce_scatter(ex: Any, node: Any, inputs: list) -> Any:
    slot = _host_impl.next_slot(ex, ex.host)
    values = [inputs[i] for i in node.attrs["values"]]
    index = _index(ex, node, inputs)[1:]  # the leading item is the rank placeholder
    return _host_impl.reduce_scatter(
        values, _peers(ex, node), index, _pads(ex, node), node.attrs["rank"], slot, node.attrs["op"]
    )


# -- remote copies -------------------------------------------------------------------------------


def _remote_word(node: Any, inputs: list, offset: int = 0) -> int:
    """The node's completion word: (flat grid tile id * words per tile + site) % capacity."""
    flat = 0
    scale = 1
    for position in node.attrs["grid"]:
        tile = inputs[position]
        step = max(int(tile.block_size), 1)
        flat += (int(tile.begin) - int(tile.range_begin)) // step * scale
        scale *= -(-(int(tile.range_end) - int(tile.range_begin)) // step)
    plan = node.attrs["plan"]
    return (flat * plan.words + node.attrs["word"] + offset) % plan.capacity


def _release_peers(ex: Any, node: Any) -> None:
    """This rank fails at the op: its peers' waits of the launch stop now (see ``rc.RELEASED``)."""
    rc.release_peers(_pads(ex, node), node.attrs["rank"])


def _peer(ex: Any, node: Any, operand: Any, inputs: list, what: str) -> int:
    peer = _scalar(operand, inputs)
    world = node.attrs["world_size"]
    if not 0 <= peer < world:
        _release_peers(ex, node)
        raise DistributedError(rc.out_of_group(what, peer, world))
    return peer


def _check_region(ex: Any, node: Any, name: str, tensor: Any, index: tuple, what: str) -> None:
    """A region of a remote copy lies inside its tensor: torch would clamp a slice where
    compiled code copies past the end (the trace refuses the static cases; this is the rest,
    e.g. a tile loop over a run-time bound or an index computed on the device)."""
    for dim, entry in enumerate(index):
        size = tensor.shape[dim]
        begin, end = (entry.start, entry.stop) if isinstance(entry, slice) else (entry, entry + 1)
        if begin < 0 or end > size:
            _release_peers(ex, node)
            first = begin if begin < 0 or begin >= size else size
            raise exc.IndexOutOfBounds(
                what,
                name,
                first,
                dim,
                size,
                loc=node.loc,
                hint="A remote copy is not masked: its region must lie inside both src and dst.",
            )


@_located
def _remote_copy_start(ex: Any, node: Any, inputs: list) -> None:
    attrs = node.attrs
    what = "hl.make_async_remote_copy"
    peer = _peer(ex, node, attrs["device"], inputs, f"{what}: device_id")
    src = ex.host[attrs["src"].index]
    src_index = _basic_index(ex, attrs["src_items"], inputs)
    _check_region(ex, node, attrs["src"].name, src, src_index, f"{what} src_index")
    target = ex.host[attrs["dst_peers"][peer].index]
    dst_index = _basic_index(ex, attrs["dst_items"], inputs)
    _check_region(ex, node, attrs["dst_name"], target, dst_index, f"{what} dst_index")
    pad = ex.host[attrs["pads"][peer].index]
    _host_impl.remote_put(src[src_index], target[dst_index], pad, _remote_word(node, inputs))


def _released(node: Any, pad: Any) -> Callable[[], Any]:
    plan = node.attrs["plan"]
    return lambda: rc.take_release(pad, node.attrs["rank"], plan.tag)


@_located
def _remote_copy_wait(ex: Any, node: Any, inputs: list) -> None:
    # start() copies synchronously on the host: the source is reusable once it returns
    if node.attrs["kind"] == "send":
        return
    rank = node.attrs["rank"]
    pad = ex.host[node.attrs["pads"][rank].index]
    word = _remote_word(node, inputs)
    method = "wait_recv" if node.attrs["kind"] == "recv" else "wait"
    what = f"AsyncCopyDescriptor.{method}() of hl.make_async_remote_copy"

    def missing(elapsed: float, current: int) -> Any:
        from helion_distributed.errors import DistributedTimeout

        return DistributedTimeout(
            f"rank {rank} timed out after {elapsed:.1f}s in {what}: no transfer arrived (word "
            f"{word} of the kernel's workspace pad holds {current}; the rank that pushes to this "
            "one through the same descriptor never started it)",
            rank=rank,
            what=what,
        )

    _host_impl.consume(pad, word, 1, missing, _released(node, pad))


@_located
def _remote_barrier(ex: Any, node: Any, inputs: list) -> None:
    attrs = node.attrs
    peers = [_peer(ex, node, p, inputs, "hl.remote_barrier: peer") for p in attrs["peers"]]
    pads = [ex.host[arg.index] for arg in attrs["pads"]]
    words = (_remote_word(node, inputs), _remote_word(node, inputs, 1))
    released = _released(node, pads[attrs["rank"]])
    _host_impl.remote_barrier(pads, attrs["rank"], peers, words, "hl.remote_barrier", released)


REF_LOWERINGS: dict[Any, Callable] = {
    dl.signal_op: _signal,
    dl.wait_op: _wait,
    dl.barrier_op: _barrier,
    dl.all_reduce_op: _all_reduce,
    dl.all_gather_op: _all_gather,
    dl.reduce_scatter_op: _reduce_scatter,
    rc.start_op: _remote_copy_start,
    rc.wait_op: _remote_copy_wait,
    rc.remote_barrier_op: _remote_barrier,
}
