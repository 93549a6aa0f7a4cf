"""Autotuning distributed kernels on CPU rank processes: the ordinary autotuner refuses them at
once, and helion_distributed.autotune fails candidates whose waits timed out and stops every rank
together when the ranks disagree (the rank-side code is in autotune_ranks.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from typing import Callable

import pytest

pytest.importorskip("helion_distributed")

from helion_distributed.testing import run_ranks

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))  # the rank processes import autotune_ranks by name

import autotune_ranks  # noqa: E402
from rank_backends import BACKENDS  # noqa: E402
from rank_backends import QUIET  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(300)]

DEFAULT_BACKEND = BACKENDS[-1]


def _run(fn: Callable[..., Any], backend: str = DEFAULT_BACKEND, **env: str) -> list:
    return run_ranks(fn, 2, timeout=240, env={**QUIET, "HELION_BACKEND": backend, **env})


def test_the_ordinary_autotuner_refuses_a_distributed_kernel_at_once() -> None:
    # quick effort: before the fix, each rank searched on its own until NoConfigFound
    for found in _run(autotune_ranks.untuned_kernel, HELION_AUTOTUNE_EFFORT="quick"):
        for case in ("no config", "configs"):
            text, seconds = found[case]
            assert text.startswith("DistributedAutotuneError"), text
            assert "'_scaled_sum' is a distributed kernel (it uses hl.all_reduce)" in text
            assert "helion_distributed.autotune(_scaled_sum, args)" in text
            assert "config=" in text
            assert seconds < 30
        assert "block_sizes=[" in found["winner"]
        assert found["after lockstep"] is True
        assert found["effort none"] is True  # autotune_effort="none": the default config, no tuning


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_candidate_whose_wait_timed_out_fails_on_every_rank(backend: str) -> None:
    for found in _run(autotune_ranks.timed_out_candidates, backend):
        text, _ = found["all time out"]
        assert text.startswith("NoConfigFound"), text
        # block 32 times out on rank 0 (its second tile's wait); block 64 works, also after
        # the failed candidate left a signal in the pad
        text, _ = found["one works"]
        assert text.startswith("returned Config(block_sizes=[64]"), text
        assert found["after"] is True
        assert found["word 0"] == 0


def test_ranks_that_disagree_stop_together() -> None:
    first, second = _run(autotune_ranks.disagreements, "ref")
    for found in (first, second):
        text, seconds = found["shapes"]
        assert text.startswith("DistributedAutotuneError"), text
        assert "diverged: the ranks passed different arguments (argument 0: ordinary cpu" in text
        assert "shape [64]" in text and "shape [128]" in text
        assert seconds < 20
        for case in ("order", "options"):
            text, _ = found[case]
            assert text.startswith("DistributedAutotuneError"), text
            assert "diverged: the ranks asked for different tuning" in text
        assert found["both one config"][0].startswith("NotEnoughConfigs")
        assert found["bad effort"][0].startswith("InvalidSetting")
        assert found["after"][0].startswith("returned Config(block_sizes=["), found["after"]
    # one config on rank 0 only: its own error there, the peer is told and not left waiting
    assert first["one config"][0].startswith("NotEnoughConfigs")
    text, seconds = second["one config"]
    assert text.startswith("DistributedAutotuneError"), text
    assert "rank 0 failed to set up, so every rank stops: NotEnoughConfigs" in text
    assert seconds < 20


def test_effort_none_checks_the_default_config_without_a_search() -> None:
    for found in _run(autotune_ranks.effort_none):
        assert found["default"] is True
        assert found["runs"] is True
        text, _ = found["stuck"]
        assert text.startswith("DistributedAutotuneError"), text
        assert "effort='none'): the default config" in text
        assert "DistributedTimeout" in text


def test_an_ordinary_kernel_is_not_refused() -> None:
    """The hook answers only for distributed kernels (no process group needed to ask)."""
    import torch

    from helion import plugins

    x = torch.ones(8)
    bound = autotune_ranks.plus_one.bind((x,))
    answers = plugins.call_each_plugin("helion_autotune_refusal", bound=bound, args=(x,))
    assert [a for a in answers if a.plugin.distribution == "helion-distributed"] == []
    assert [f for f in plugins.load_failures() if "helion_autotune_refusal" in f.phase] == []
