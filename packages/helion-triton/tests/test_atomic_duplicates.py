"""Atomics whose lanes hit the same element on the Triton backend: each lane gets the value just
before its own update. The order the hardware serializes the lanes in is unspecified, so these
tests only ask that the returned values be those of *some* serialization (the ref and Pallas
backends use row-major lane order; see helion-core's test_atomic_duplicates.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import helion
import helion.language as hl


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


def _run(fn: Any, args: tuple, block: int) -> Any:
    return helion.kernel(fn, backend="triton", config=helion.Config(block_sizes=[block]))(*args)


def _assert_add_serializes(initial: int, values: list[int], olds: list[int], final: int) -> None:
    """With positive operands the running value only grows, so sorting the lanes by what they
    read back recovers the serialization: each must read the previous one's old plus its value."""
    assert all(v > 0 for v in values)
    running = initial
    for old, value in sorted(zip(olds, values, strict=True)):
        assert old == running, (initial, values, olds)
        running += value
    assert final == running


def _assert_max_serializes(
    initial: float, values: list[float], olds: list[float], final: float
) -> None:
    """Some order of the lanes gives each its old value: grouped by what they read back (in
    increasing order), a group's lanes ran while the maximum was that value, so at most the last
    of them may raise it, and the next group reads the maximum of everything before it."""
    running = initial
    groups: dict[float, list[float]] = {}
    for old, value in zip(olds, values, strict=True):
        groups.setdefault(old, []).append(value)
    for old in sorted(groups):
        assert old == running, (initial, values, olds)
        raising = [v for v in groups[old] if v > old]
        assert len(raising) <= 1, (old, groups[old])
        running = max([running, *raising])
    assert final == running


@pytest.mark.parametrize(("n", "block"), [(10, 16), (37, 16), (23, 8)])
def test_ticket_counter_hands_out_each_number_once(
    n: int, block: int, device: torch.device
) -> None:
    counter = torch.zeros(1, dtype=torch.int32, device=device)
    out = _run(tickets, (counter, torch.randn(n, device=device)), block)
    assert sorted(out.tolist()) == list(range(n))
    assert counter.tolist() == [n]


@pytest.mark.parametrize(("n", "bins", "block"), [(37, 5, 16), (29, 3, 8)])
def test_add_returns_the_values_of_a_serialization(
    n: int, bins: int, block: int, device: torch.device
) -> None:
    generator = torch.Generator().manual_seed(n)
    index = torch.randint(0, bins, (n,), generator=generator)
    values = torch.randint(1, 9, (n,), generator=generator, dtype=torch.int32)
    initial = torch.randint(0, 100, (bins,), generator=generator, dtype=torch.int32)
    target = initial.clone().to(device)
    olds = _run(scatter_add, (target, index.to(device), values.to(device)), block).cpu()
    for b in range(bins):
        lanes = index == b
        _assert_add_serializes(
            int(initial[b]), values[lanes].tolist(), olds[lanes].tolist(), int(target[b])
        )


@pytest.mark.parametrize(("n", "bins", "block"), [(37, 5, 16), (29, 3, 8)])
def test_max_returns_the_values_of_a_serialization(
    n: int, bins: int, block: int, device: torch.device
) -> None:
    generator = torch.Generator().manual_seed(n + 1)
    index = torch.randint(0, bins, (n,), generator=generator)
    values = torch.randn(n, generator=generator)
    initial = torch.full((bins,), -1.0)
    target = initial.clone().to(device)
    olds = _run(scatter_max, (target, index.to(device), values.to(device)), block).cpu()
    for b in range(bins):
        lanes = index == b
        _assert_max_serializes(
            float(initial[b]), values[lanes].tolist(), olds[lanes].tolist(), float(target[b])
        )
