"""Atomics whose lanes hit the same element on the ref backend: each lane gets the value just
before its own update, the lanes applied one by one in row-major lane order (programs in grid
order, masked-off lanes skipped), as a GPU serializes them in some order. The final memory was
always right; the returned previous values of add/max/min used to be one snapshot for all lanes.
"""

from __future__ import annotations

import operator
from typing import Any
from typing import Callable

import pytest
import torch

import helion
import helion.language as hl


def _run(fn: Callable, args: tuple, block_sizes: list[int]) -> Any:
    bound = helion.kernel(fn, autotune_effort="none", backend="ref").bind(args)
    return bound.compile_config(helion.Config(block_sizes=block_sizes))(*args)


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "max": torch.maximum,
    "min": torch.minimum,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "xchg": lambda old, v: v,
}


def serialized(
    kind: str,
    target: torch.Tensor,
    index: torch.Tensor,
    values: torch.Tensor,
    expected: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(final target, previous value per lane) of applying the lanes one by one in flat order;
    lanes where `keep` is false are skipped and read back 0."""
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
            assert expected is not None
            target[where] = value if bool(old == expected.reshape(-1)[lane]) else old
        else:
            target[where] = _OPS[kind](old, value)
    return target, olds


# -- kernels ----------------------------------------------------------------------------------


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


SCATTERS = {
    "add": scatter_add,
    "max": scatter_max,
    "min": scatter_min,
    "and": scatter_and,
    "or": scatter_or,
    "xor": scatter_xor,
    "xchg": scatter_xchg,
}


def scatter_inputs(kind: str, dtype: torch.dtype, n: int, bins: int, seed: int) -> tuple:
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


# -- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "block"), [(10, 16), (37, 16), (23, 8), (1, 4)])
def test_ticket_counter_hands_out_consecutive_numbers(n: int, block: int) -> None:
    counter = torch.zeros(1, dtype=torch.int32)
    out = _run(tickets, (counter, torch.randn(n)), [block])
    assert out.tolist() == list(range(n))
    assert counter.tolist() == [n]


@pytest.mark.parametrize("kind", ["add", "max", "min"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32], ids=["int32", "float32"])
@pytest.mark.parametrize(("n", "bins", "block"), [(37, 5, 16), (45, 3, 32), (29, 7, 8)])
def test_each_lane_gets_the_value_before_its_own_update(
    kind: str, dtype: torch.dtype, n: int, bins: int, block: int
) -> None:
    target, index, values = scatter_inputs(kind, dtype, n, bins, seed=n + bins)
    expected_target, expected_olds = serialized(kind, target, index, values)
    olds = _run(SCATTERS[kind], (target, index, values), [block])
    # exact: float adds must round as one after another in lane order
    torch.testing.assert_close(olds, expected_olds, atol=0, rtol=0)
    torch.testing.assert_close(target, expected_target, atol=0, rtol=0)


@pytest.mark.parametrize("kind", ["and", "or", "xor", "xchg"])
def test_bitwise_and_exchange_see_earlier_lanes(kind: str) -> None:
    target, index, values = scatter_inputs(kind, torch.int32, 37, 4, seed=3)
    expected_target, expected_olds = serialized(kind, target, index, values)
    olds = _run(SCATTERS[kind], (target, index, values), [16])
    torch.testing.assert_close(olds, expected_olds, atol=0, rtol=0)
    torch.testing.assert_close(target, expected_target, atol=0, rtol=0)


def test_compare_and_swap_chains_through_duplicates() -> None:
    generator = torch.Generator().manual_seed(7)
    index = torch.randint(0, 3, (29,), generator=generator)
    # expected values 0..2 and new values 1..3 let a later lane succeed on an earlier one's write
    expected = torch.randint(0, 3, (29,), generator=generator, dtype=torch.int32)
    values = expected + 1
    target = torch.zeros(3, dtype=torch.int32)
    expected_target, expected_olds = serialized("cas", target, index, values, expected)
    olds = _run(scatter_cas, (target, index, expected, values), [8])
    torch.testing.assert_close(olds, expected_olds, atol=0, rtol=0)
    torch.testing.assert_close(target, expected_target, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32], ids=["int32", "float32"])
def test_2d_tile_applies_lanes_in_row_major_order(dtype: torch.dtype) -> None:
    # one 8x8 tile over a 5x7 tensor: the lanes past either end are masked off
    target, index, values = scatter_inputs("add", dtype, 35, 4, seed=11)
    index, values = index.reshape(5, 7), values.reshape(5, 7)
    expected_target, expected_olds = serialized("add", target, index, values)
    olds = _run(scatter_add_2d, (target, index, values), [8, 8])
    torch.testing.assert_close(olds, expected_olds, atol=0, rtol=0)
    torch.testing.assert_close(target, expected_target, atol=0, rtol=0)


def test_masked_jagged_lanes_are_skipped() -> None:
    lengths = torch.tensor([3, 0, 7, 5, 1])
    index = torch.randint(0, 3, (5, 7), generator=torch.Generator().manual_seed(5))
    keep = torch.arange(7)[None, :] < lengths[:, None]
    target = torch.zeros(3, dtype=torch.int32)
    ones = torch.ones(5, 7, dtype=torch.int32)
    expected_target, expected_olds = serialized("add", target, index, ones, keep=keep)
    out = torch.full((5, 7), -1, dtype=torch.int32)
    # one tile each way: a single program whose row-major lane order is the flat order
    _run(jagged_scatter_add, (target, lengths, index, out), [8, 8])
    torch.testing.assert_close(out[keep], expected_olds[keep], atol=0, rtol=0)
    assert bool((out[~keep] == -1).all())
    torch.testing.assert_close(target, expected_target, atol=0, rtol=0)


def test_distinct_addresses_still_return_the_old_values() -> None:
    target = torch.arange(40, dtype=torch.float32)
    index = torch.randperm(40, generator=torch.Generator().manual_seed(1))[:37]
    values = torch.randn(37)
    expected = target[index].clone()
    olds = _run(scatter_add, (target, index, values), [16])
    torch.testing.assert_close(olds, expected, atol=0, rtol=0)
    torch.testing.assert_close(target[index], expected + values, atol=0, rtol=0)
