"""Autotuning a Pallas kernel never forks: JAX runs threads from import on, and a child forked
while one of them held a lock deadlocked (two valid configs of a quick search timed out at 60 s
each). The harness screens Pallas candidates in this process instead."""

from __future__ import annotations

import torch

import helion
import helion.language as hl
from helion.autotuner.benchmarking import BenchmarkHarness


def _row_mean(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = x[tm, :].to(torch.float32).mean(-1)
    return out


def test_the_pallas_backend_is_not_fork_safe_and_the_harness_does_not_fork():
    kernel = helion.kernel(_row_mean, backend="pallas", autotune_effort="quick")
    x = torch.randn(37, 100)
    bound = kernel.bind((x,))
    assert bound.backend.fork_safe is False
    with BenchmarkHarness(bound, (x,)) as harness:
        harness.prepare()
        assert harness.isolation == "inprocess"
        configs = [bound.config_spec.default_config(), helion.Config(block_sizes=[4])]
        times = harness.evaluate(configs)
    assert all(t > 0 and t != float("inf") for t in times), harness.failures


def test_quick_autotuning_measures_every_candidate_and_is_right():
    kernel = helion.kernel(
        _row_mean, backend="pallas", autotune_effort="quick", autotune_progress_bar=False
    )
    x = torch.randn(37, 100)
    config = kernel.bind((x,)).autotune((x,), force=True, max_evaluations=6)
    torch.testing.assert_close(kernel(x), x.mean(-1))
    assert isinstance(config, helion.Config)
