"""The ready collectives on CPU rank processes: exact integer and float64 all-reduces (the
two-shot kernel accumulates in the workspace's dtype), and tensors without elements (the
rank-side code is in collective_ranks.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("helion_distributed")

from helion_distributed.testing import run_ranks

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))  # the rank processes import collective_ranks by name

import collective_ranks  # noqa: E402
from rank_backends import BACKENDS  # noqa: E402
from rank_backends import QUIET  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(300)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_shot_all_reduce_is_exact_for_integers_and_float64(backend: str) -> None:
    """int32 above 2**24, int64 above 2**53, float64 below float32's epsilon, int8 wraparound, bool:
    every op matches dist.all_reduce exactly (fp16/bf16 still accumulate in float32)."""
    results = run_ranks(
        collective_ranks.exact_two_shot,
        2,
        timeout=240,
        env={**QUIET, "HELION_BACKEND": backend},
    )
    assert results == [{}, {}], results


def test_auto_all_reduce_of_a_large_int32_tensor_is_exact() -> None:
    results = run_ranks(
        collective_ranks.auto_picks_two_shot_for_large_int32,
        2,
        timeout=180,
        env={**QUIET, "HELION_BACKEND": "ref"},
    )
    assert results == [True, True]


@pytest.mark.parametrize("backend", BACKENDS)
def test_collectives_of_empty_tensors_return_empty_results(backend: str) -> None:
    results = run_ranks(
        collective_ranks.empty_tensors, 2, timeout=180, env={**QUIET, "HELION_BACKEND": backend}
    )
    import torch

    for found in results:
        assert found["symmetric"] is True
        assert found["peers"] == [(0, 4), (0, 4)]
        assert found["pads"] == 2
        for algorithm in ("auto", "one_shot", "two_shot"):
            assert found[f"all_reduce {algorithm}"] == ((0, 4), torch.float32)
        assert found["all_reduce int32"] == ((3, 0), torch.int32)
        assert found["all_gather"] == ((0, 4), torch.float32)
        assert found["reduce_scatter"] == ((2, 0), torch.float32)
        assert found["reduce_scatter rows"] == ((0, 4), torch.bfloat16)
        assert found["after"] is True


def test_an_empty_tensor_on_one_rank_only_fails_every_rank_fast() -> None:
    results = run_ranks(
        collective_ranks.empty_on_one_rank, 2, timeout=60, env={**QUIET, "HELION_BACKEND": "ref"}
    )
    for text in results:
        assert text.startswith("SymmetricMemoryError"), text
        assert "ranks allocated different sizes" in text
