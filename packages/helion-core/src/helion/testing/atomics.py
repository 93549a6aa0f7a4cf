"""Atomics whose lanes hit the same element: every lane must get the value just before its own
update, as if the lanes were applied one at a time. (A backend that applies a tile's atomics as
one scatter hands every lane the same snapshot: a ticket counter reads 0 in every lane.)

Two strengths of check, :func:`check_atomic_case` picks one:

- in lane order (``in_lane_order=True``): the lanes are applied one by one in row-major lane
  order, programs in grid order, masked-off lanes skipped. The ref backend does this, and so must
  a backend that runs programs one after another (Pallas in interpret mode). Exact, float adds
  included: they must round as one after another in that order. The backend must also agree
  with the ref backend.
- in some order (``in_lane_order=False``): the results are those of *some* serialization, for
  hardware that orders the lanes freely (Triton on a GPU). Only the cases with ``order_free``
  set can be checked this way: ticket counters, adds of positive integers and maxima.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any
from typing import Callable

import torch

import helion
import helion.language as hl
from helion.testing import assert_same
from helion.testing import bind
from helion.testing import require_backend

__all__ = [
    "ATOMIC_CASES",
    "MASKED_OUT",
    "SCATTERS",
    "AtomicCase",
    "AtomicInputs",
    "assert_some_serialization",
    "check_atomic_case",
    "scatter_inputs",
    "serialized",
]

# what a case fills the output of masked-off lanes with: they must leave it as it is
MASKED_OUT = -1

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "max": torch.maximum,
    "min": torch.minimum,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "xchg": lambda old, value: value,
}


def serialized(
    kind: str,
    target: torch.Tensor,
    index: torch.Tensor,
    values: torch.Tensor,
    expected: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(final target, previous value per lane) of applying the lanes one by one in flat
    (row-major) order: lane i does ``target[index[i]] = kind(target[index[i]], values[i])``
    (for "cas": writes ``values[i]`` where the element equals ``expected[i]``). Lanes where
    ``keep`` is false are skipped and read back 0."""
    target = target.clone()
    olds = torch.zeros_like(values)
    for lane in range(values.numel()):
        if keep is not None and not bool(keep.reshape(-1)[lane]):
            continue
        where = int(index.reshape(-1)[lane])
        value = values.reshape(-1)[lane]
        old = target[where].clone()
        olds.reshape(-1)[lane] = old
        if kind == "cas":
            assert expected is not None, "cas needs the expected values"
            target[where] = value if bool(old == expected.reshape(-1)[lane]) else old
        else:
            target[where] = _OPS[kind](old, value)
    return target, olds


def assert_some_serialization(
    kind: str, initial: float, values: list[Any], olds: list[Any], final: float
) -> None:
    """The lanes that updated one element (``values``, in any order) read back ``olds`` and left
    ``final``, starting from ``initial``: raise AssertionError unless some order of the lanes
    gives exactly that. ``kind`` is "add" (positive values only) or "max"."""
    where = f"{kind} from {initial} of {values}: read back {olds}, left {final}"
    running = initial
    if kind == "add":
        # the running value only grows, so sorting the lanes by what they read back recovers
        # the order: each must read the previous lane's old value plus its value
        if not all(value > 0 for value in values):
            raise ValueError(f"an order-free add check needs positive values: {where}")
        for old, value in sorted(zip(olds, values, strict=True)):
            if old != running:
                raise AssertionError(f"no order of the lanes reads these values: {where}")
            running += value
    elif kind == "max":
        # lanes grouped by what they read back (in increasing order): a group ran while the
        # maximum was that value, so at most its last lane may raise it, and the next group
        # reads the maximum of everything before it
        groups: dict[Any, list[Any]] = {}
        for old, value in zip(olds, values, strict=True):
            groups.setdefault(old, []).append(value)
        for old in sorted(groups):
            raising = [value for value in groups[old] if value > old]
            if old != running or len(raising) > 1:
                raise AssertionError(f"no order of the lanes reads these values: {where}")
            running = max([running, *raising])
    else:
        raise ValueError(f"no order-free check for atomic {kind!r}")
    if final != running:
        raise AssertionError(f"the lanes' final value should be {running}: {where}")


# -- kernels ------------------------------------------------------------------------------------
# Each returns what its atomics read back, one value per lane; its first argument is the tensor
# the atomics update.


def tickets(counter: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.int32, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = hl.atomic_add(counter, [tile.index * 0], 1)
    return out


def scatter_add(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile in hl.tile(values.size(0)):
        out[tile] = hl.atomic_add(target, [index[tile]], values[tile])
    return out


def scatter_max(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile in hl.tile(values.size(0)):
        out[tile] = hl.atomic_max(target, [index[tile]], values[tile])
    return out


def scatter_min(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile in hl.tile(values.size(0)):
        out[tile] = hl.atomic_min(target, [index[tile]], values[tile])
    return out


def scatter_and(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile in hl.tile(values.size(0)):
        out[tile] = hl.atomic_and(target, [index[tile]], values[tile])
    return out


def scatter_or(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile in hl.tile(values.size(0)):
        out[tile] = hl.atomic_or(target, [index[tile]], values[tile])
    return out


def scatter_xor(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile in hl.tile(values.size(0)):
        out[tile] = hl.atomic_xor(target, [index[tile]], values[tile])
    return out


def scatter_xchg(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile in hl.tile(values.size(0)):
        out[tile] = hl.atomic_xchg(target, [index[tile]], values[tile])
    return out


def scatter_cas(
    target: torch.Tensor, index: torch.Tensor, expected: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile in hl.tile(values.size(0)):
        out[tile] = hl.atomic_cas(target, [index[tile]], expected[tile], values[tile])
    return out


def scatter_add_2d(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile_m, tile_n in hl.tile([values.size(0), values.size(1)]):
        out[tile_m, tile_n] = hl.atomic_add(target, [index[tile_m, tile_n]], values[tile_m, tile_n])
    return out


def jagged_scatter_add(
    target: torch.Tensor, lengths: torch.Tensor, index: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    for tile_m in hl.tile(index.size(0)):
        n = lengths[tile_m]
        for tile_k in hl.jagged_tile(n):
            # lanes past each row's length are masked: they neither add nor read back
            out[tile_m, tile_k] = hl.atomic_add(target, [index[tile_m, tile_k]], 1)
    return out


SCATTERS: dict[str, Callable[..., torch.Tensor]] = {
    "add": scatter_add,
    "max": scatter_max,
    "min": scatter_min,
    "and": scatter_and,
    "or": scatter_or,
    "xor": scatter_xor,
    "xchg": scatter_xchg,
}


def scatter_inputs(
    kind: str, dtype: torch.dtype, n: int, bins: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(target, index, values) for ``SCATTERS[kind]``: ``n`` lanes over ``bins`` elements, so
    that many lanes share an element."""
    generator = torch.Generator().manual_seed(seed)
    index = torch.randint(0, bins, (n,), generator=generator)
    if dtype.is_floating_point:
        # mixed magnitudes: a float sum in any other order than the lanes' rounds differently
        values = torch.randn(n, generator=generator) * 10.0 ** torch.randint(
            -3, 4, (n,), generator=generator
        )
        values = values.to(dtype)
    else:
        values = torch.randint(-(2**20), 2**20, (n,), generator=generator, dtype=dtype)
    start = {"max": -1000.0, "min": 1000.0, "and": -1}.get(kind, 0)
    target = torch.full((bins,), start, dtype=dtype)
    return target, index, values


# -- cases --------------------------------------------------------------------------------------


@dataclasses.dataclass
class AtomicInputs:
    """A kernel's arguments and the lanes its atomics apply, for the simulation."""

    args: tuple[torch.Tensor, ...]  # args[0] is the tensor the atomics update
    kind: str  # a key of SCATTERS, or "cas"
    index: torch.Tensor  # per lane: the element of args[0] it updates
    values: torch.Tensor  # per lane: its operand
    expected: torch.Tensor | None = None  # "cas" only: per lane, the value it compares with
    keep: torch.Tensor | None = None  # lanes that run; the others' outputs hold MASKED_OUT


@dataclasses.dataclass(frozen=True)
class AtomicCase:
    id: str
    fn: Callable[..., torch.Tensor]  # a plain kernel function, compiled for each backend
    block_sizes: tuple[int, ...]
    inputs: Callable[[], AtomicInputs]  # fresh inputs on the CPU, the same on every call
    # whether check_atomic_case(..., in_lane_order=False) can check it
    order_free: bool = False


def _ticket_case(n: int, block: int) -> AtomicCase:
    def inputs() -> AtomicInputs:
        counter = torch.zeros(1, dtype=torch.int32)
        x = torch.randn(n, generator=torch.Generator().manual_seed(n))
        lanes = torch.zeros(n, dtype=torch.int64), torch.ones(n, dtype=torch.int32)
        return AtomicInputs((counter, x), "add", *lanes)

    # every lane adds 1 to one counter: they must read 0, 1, ..., n - 1
    return AtomicCase(
        f"ticket_counter-n{n}-block{block}", tickets, (block,), inputs, order_free=True
    )


def _scatter_case(kind: str, dtype: torch.dtype, n: int, bins: int, block: int) -> AtomicCase:
    def inputs() -> AtomicInputs:
        target, index, values = scatter_inputs(kind, dtype, n, bins, seed=n + bins)
        return AtomicInputs((target, index, values), kind, index, values)

    dtype_name = str(dtype).removeprefix("torch.")
    return AtomicCase(
        f"{kind}-{dtype_name}-n{n}-bins{bins}-block{block}",
        SCATTERS[kind],
        (block,),
        inputs,
        order_free=kind == "max",
    )


def _positive_add_case(n: int, bins: int, block: int) -> AtomicCase:
    # positive integer operands: what each lane read back tells the order the lanes ran in
    def inputs() -> AtomicInputs:
        generator = torch.Generator().manual_seed(n)
        index = torch.randint(0, bins, (n,), generator=generator)
        values = torch.randint(1, 9, (n,), generator=generator, dtype=torch.int32)
        target = torch.randint(0, 100, (bins,), generator=generator, dtype=torch.int32)
        return AtomicInputs((target, index, values), "add", index, values)

    return AtomicCase(
        f"add-positive-n{n}-bins{bins}-block{block}", scatter_add, (block,), inputs, order_free=True
    )


def _standard_normal_max_case(n: int, bins: int, block: int) -> AtomicCase:
    def inputs() -> AtomicInputs:
        generator = torch.Generator().manual_seed(n + 1)
        index = torch.randint(0, bins, (n,), generator=generator)
        values = torch.randn(n, generator=generator)
        target = torch.full((bins,), -1.0)
        return AtomicInputs((target, index, values), "max", index, values)

    return AtomicCase(
        f"max-randn-n{n}-bins{bins}-block{block}", scatter_max, (block,), inputs, order_free=True
    )


def _cas_inputs() -> AtomicInputs:
    generator = torch.Generator().manual_seed(7)
    index = torch.randint(0, 3, (29,), generator=generator)
    # expected values 0..2 and new values 1..3 let a later lane succeed on an earlier one's write
    expected = torch.randint(0, 3, (29,), generator=generator, dtype=torch.int32)
    values = expected + 1
    target = torch.zeros(3, dtype=torch.int32)
    return AtomicInputs((target, index, expected, values), "cas", index, values, expected)


def _add_2d_case(dtype: torch.dtype) -> AtomicCase:
    # one 8x8 tile over a 5x7 tensor: the lanes past either end are masked off, and the others
    # apply in row-major order
    def inputs() -> AtomicInputs:
        target, index, values = scatter_inputs("add", dtype, 35, 4, seed=11)
        index, values = index.reshape(5, 7), values.reshape(5, 7)
        return AtomicInputs((target, index, values), "add", index, values)

    dtype_name = str(dtype).removeprefix("torch.")
    return AtomicCase(f"add_2d-{dtype_name}-5x7-block8x8", scatter_add_2d, (8, 8), inputs)


def _jagged_inputs() -> AtomicInputs:
    lengths = torch.tensor([3, 0, 7, 5, 1])
    index = torch.randint(0, 3, (5, 7), generator=torch.Generator().manual_seed(5))
    keep = torch.arange(7)[None, :] < lengths[:, None]
    target = torch.zeros(3, dtype=torch.int32)
    ones = torch.ones(5, 7, dtype=torch.int32)
    out = torch.full((5, 7), MASKED_OUT, dtype=torch.int32)
    return AtomicInputs((target, lengths, index, out), "add", index, ones, keep=keep)


def _distinct_inputs() -> AtomicInputs:
    # no two lanes share an element: each reads the element's initial value
    target = torch.arange(40, dtype=torch.float32)
    generator = torch.Generator().manual_seed(1)
    index = torch.randperm(40, generator=generator)[:37]
    values = torch.randn(37, generator=generator)
    return AtomicInputs((target, index, values), "add", index, values)


_DTYPES = (torch.int32, torch.float32)

ATOMIC_CASES: list[AtomicCase] = [
    *(_ticket_case(n, block) for n, block in [(10, 16), (37, 16), (23, 8), (1, 4)]),
    *(
        _scatter_case(kind, dtype, n, bins, block)
        for kind in ("add", "max", "min")
        for dtype in _DTYPES
        for n, bins, block in [(37, 5, 16), (45, 3, 32), (29, 7, 8)]
    ),
    *(_scatter_case(kind, torch.int32, 37, 4, 16) for kind in ("and", "or", "xor", "xchg")),
    *(_positive_add_case(n, bins, block) for n, bins, block in [(37, 5, 16), (29, 3, 8)]),
    *(_standard_normal_max_case(n, bins, block) for n, bins, block in [(37, 5, 16), (29, 3, 8)]),
    AtomicCase("cas-chain-n29-bins3-block8", scatter_cas, (8,), _cas_inputs),
    *(_add_2d_case(dtype) for dtype in _DTYPES),
    # one tile each way: a single program whose row-major lane order is the flat order
    AtomicCase("add-jagged-5x7-block8x8", jagged_scatter_add, (8, 8), _jagged_inputs),
    AtomicCase("add-distinct-n37-block16", scatter_add, (16,), _distinct_inputs),
]


# -- the check ----------------------------------------------------------------------------------


def _run(
    case: AtomicCase, backend: str, inputs: AtomicInputs, device: str | torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """(what the lanes read back, the updated tensor), both on the CPU. The kernel gets copies:
    a backend that wrongly writes an input must fail the check, not corrupt the expectation."""
    args = tuple(arg.to(device, copy=True) for arg in inputs.args)
    config = helion.Config(block_sizes=list(case.block_sizes))
    olds = bind(case.fn, backend, args).compile_config(config)(*args)
    return olds.cpu(), args[0].cpu()


def check_atomic_case(
    case: AtomicCase,
    backend: str,
    *,
    in_lane_order: bool = True,
    device: str | torch.device = "cpu",
) -> None:
    """Run ``case`` on ``backend`` and check what every lane read back and the updated tensor:
    against applying the lanes one by one in row-major order (and the ref backend's results)
    with ``in_lane_order``, else against some order of the lanes (``case.order_free`` only).
    Raises AssertionError naming the case and backend; skips when the backend is missing."""
    if not in_lane_order and not case.order_free:
        raise ValueError(f"{case.id} cannot be checked without a lane order")
    require_backend(backend)
    inputs = case.inputs()
    initial = inputs.args[0].clone()
    what = f"{case.id} on {backend!r}"
    olds, final = _run(case, backend, inputs, device)
    # the lanes that ran (`...` indexes all of them, keeping the shape for the messages)
    ran: Any = ...
    if inputs.keep is not None:
        ran = inputs.keep
        masked = olds[~ran]
        if not bool((masked == MASKED_OUT).all()):
            raise AssertionError(f"{what}: masked-off lanes wrote their output: {masked.tolist()}")
    if in_lane_order:
        want_final, want_olds = serialized(
            inputs.kind, initial, inputs.index, inputs.values, inputs.expected, inputs.keep
        )
        lanes = f"{what}, lanes applied one by one in row-major order"
        # exact: float adds must round as one after another in lane order
        assert_same(olds[ran], want_olds[ran], atol=0, rtol=0, what=f"{lanes}: values read back")
        assert_same(final, want_final, atol=0, rtol=0, what=f"{lanes}: updated tensor")
        if backend != "ref":
            ref_olds, ref_final = _run(case, "ref", case.inputs(), "cpu")
            vs_ref = f"{what} vs 'ref'"
            assert_same(
                olds[ran], ref_olds[ran], atol=0, rtol=0, what=f"{vs_ref}: values read back"
            )
            assert_same(final, ref_final, atol=0, rtol=0, what=f"{vs_ref}: updated tensor")
        return
    index, values, olds = (
        inputs.index[ran].reshape(-1),
        inputs.values[ran].reshape(-1),
        olds[ran].reshape(-1),
    )
    for element in range(initial.numel()):
        lanes = index == element
        try:
            assert_some_serialization(
                inputs.kind,
                initial[element].item(),
                values[lanes].tolist(),
                olds[lanes].tolist(),
                final[element].item(),
            )
        except AssertionError as error:
            raise AssertionError(f"{what}, element {element}: {error}") from None
