"""The Triton backend times CUDA candidates with device events and an L2 flush, whatever the
repeat count: the autotuner always passes one."""

from __future__ import annotations

from typing import Any

import pytest

from helion.autotuner import benchmarking
from helion_triton.backend import TritonBackend


@pytest.mark.parametrize("repeat", [None, 7])
def test_cuda_timing_goes_to_the_event_timer(monkeypatch: pytest.MonkeyPatch, repeat: Any) -> None:
    calls: list[dict[str, Any]] = []

    def fake_do_bench(fn: Any, *, device: Any, repeat: Any = None, **kwargs: Any) -> float:
        calls.append({"device": str(device), "repeat": repeat})
        return 0.125

    def wall_clock(*args: Any, **kwargs: Any) -> float:
        raise AssertionError("the wall-clock timer was used for a CUDA device")

    monkeypatch.setattr(benchmarking, "do_bench", fake_do_bench)
    monkeypatch.setattr("helion.backends.base.Backend.benchmark", wall_clock)
    assert TritonBackend().benchmark(lambda: None, device="cuda", repeat=repeat) == 0.125
    assert calls == [{"device": "cuda", "repeat": repeat}]


def test_cpu_timing_stays_on_the_wall_clock() -> None:
    runs = []
    ms = TritonBackend().benchmark(lambda: runs.append(1), device="cpu", repeat=3)
    assert ms >= 0 and len(runs) == 4  # one warm-up, three timed
