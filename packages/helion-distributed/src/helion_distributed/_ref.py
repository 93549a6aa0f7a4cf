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


REF_LOWERINGS: dict[Any, Callable] = {
    dl.signal_op: _signal,
    dl.wait_op: _wait,
    dl.barrier_op: _barrier,
    dl.all_reduce_op: _all_reduce,
    dl.all_gather_op: _all_gather,
    dl.reduce_scatter_op: _reduce_scatter,
}
