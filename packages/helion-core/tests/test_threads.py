"""Kernels called from several threads at once (ref backend: runs everywhere). The warm path
shares one host mode per config, and the ref backend one executor per compiled kernel; both
must keep each call's state to itself."""

from __future__ import annotations

import sys
import threading

import pytest
import torch

import helion
import helion.language as hl


@helion.kernel(backend="ref", config=helion.Config(block_sizes=[8, 16]))
def two_registered_blocks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows = hl.register_block_size(x.size(0))
    cols = hl.register_block_size(x.size(1))
    out = torch.empty_like(x)
    sizes = torch.tensor([rows, cols])
    for tile_m, tile_n in hl.tile([x.size(0), x.size(1)], block_size=[rows, cols]):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 2 + 1
    return out, sizes


@pytest.fixture
def frequent_thread_switches():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a switch between almost any two bytecodes of the call path
    yield
    sys.setswitchinterval(interval)


def _in_threads(work, threads: int = 4) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            work()
        except BaseException as error:  # reported by the test
            errors.append(error)

    pool = [threading.Thread(target=guarded) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return errors


def test_concurrent_calls_each_get_their_own_block_sizes_and_values(frequent_thread_switches):
    two_registered_blocks.reset()
    wrong = []

    def work() -> None:
        for _ in range(300):
            x = torch.randn(19, 37)
            out, sizes = two_registered_blocks(x)
            if sizes.tolist() != [8, 16] or not torch.equal(out, x * 2 + 1):
                wrong.append(sizes.tolist())

    errors = _in_threads(work)
    assert not errors, errors[:3]
    assert not wrong, wrong[:3]


def test_concurrent_first_calls_trace_and_wire_once(frequent_thread_switches):
    two_registered_blocks.reset()
    x = torch.randn(23, 41)

    def work() -> None:
        for _ in range(20):
            out, _ = two_registered_blocks(x)
            torch.testing.assert_close(out, x * 2 + 1)

    errors = _in_threads(work)
    assert not errors, errors[:3]
    (bound,) = two_registered_blocks._bound.values()
    assert [len(v) for v in bound._variants.values()] == [1]
    assert len(bound._runners) == 1
