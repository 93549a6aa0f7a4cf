"""The distributed suite: helion-distributed's kernels, examples and language ops on N CPU rank
processes (gloo, shared-memory symmetric memory), checked against torch.distributed.

Every example of examples/distributed runs at world sizes 2 and 3 (a non-power-of-two world) on
the default backend (Triton's interpreter on CPU when helion-triton is installed), at world sizes
2, 3 and 4 on the ref backend (4: the 2-D matmul on a 2 x 2 mesh) and at 2 in eager mode. One set of rank
processes serves all the examples of one configuration, so the suite stays within a few minutes
on two cores. Every run is bounded: a hung rank fails its test instead of hanging CI.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

pytest.importorskip("helion_distributed")

from helion_distributed.testing import RankFailure
from helion_distributed.testing import run_ranks

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))  # the rank processes import distributed_ranks by name

import distributed_ranks  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(600)]

HAS_TRITON = (
    importlib.util.find_spec("helion_triton") is not None
    and importlib.util.find_spec("triton") is not None
)
DEFAULT_BACKEND = "triton" if HAS_TRITON else "ref"
# waits give up after this long, so a broken protocol fails fast instead of at the run timeout
QUIET = {"PYTHONWARNINGS": "ignore", "HELION_DIST_TIMEOUT": "60"}
RUN_TIMEOUT = 300.0

_CONFIGS = {
    # name: (world size, environment)
    "default-2": (2, {"HELION_BACKEND": DEFAULT_BACKEND}),
    "default-3": (3, {"HELION_BACKEND": DEFAULT_BACKEND}),
    "ref-2": (2, {"HELION_BACKEND": "ref"}),
    "ref-3": (3, {"HELION_BACKEND": "ref"}),
    "ref-4": (4, {"HELION_BACKEND": "ref"}),  # the 2-D matmul on a 2 x 2 mesh
    "eager-2": (2, {"HELION_INTERPRET": "1"}),
}
_cache: dict[str, dict[str, str]] = {}


def _examples_run(config: str) -> dict[str, str]:
    if config not in _cache:
        world_size, env = _CONFIGS[config]
        (first, *rest) = run_ranks(
            distributed_ranks.run_examples,
            world_size,
            (distributed_ranks.EXAMPLES,),
            timeout=RUN_TIMEOUT,
            env={**QUIET, **env},
        )
        merged = dict(first)
        for other in rest:  # an example fails when it fails on any rank
            for name, outcome in other.items():
                if not name.endswith(":seconds") and outcome != "ok":
                    merged[name] = outcome
        _cache[config] = merged
    return _cache[config]


@pytest.mark.parametrize("config", list(_CONFIGS))
@pytest.mark.parametrize("example", distributed_ranks.EXAMPLES)
def test_example(config: str, example: str) -> None:
    results = _examples_run(config)
    assert results[example] == "ok", f"{example} on {config}:\n{results[example]}"


def test_symm_mem_handle_on_cpu_ranks() -> None:
    world_size = 3
    results = run_ranks(distributed_ranks.symm_mem_handle, world_size, timeout=120, env=QUIET)
    for rank, result in enumerate(results):
        assert result["rank"] == rank and result["world_size"] == world_size
        assert result["sums"] == [35.0 * (r + 1) for r in range(world_size)]
        assert result["received"] == 100.0 + (rank - 1) % world_size  # written by the previous rank
        assert result["next_rank_buffer"] == float((rank + 1) % world_size + 1)
        assert result["offset_view"] == float(rank + 1)
        assert result["pads_zero"], "the signal pads must be all zeros after the handshakes"
        assert result["ptrs"] and result["buffer_size"] == 35 * 4
        assert len(result["pads"]) == world_size


@pytest.mark.parametrize(
    ("backend", "world_size", "size"), [("ref", 3, 400_000), (DEFAULT_BACKEND, 2, 20_000)]
)
def test_a_rank_that_dies_makes_the_others_time_out(
    backend: str, world_size: int, size: int
) -> None:
    start = time.monotonic()
    outcomes = run_ranks(
        distributed_ranks.die_mid_run,
        world_size,
        (size,),
        timeout=180,
        env={"PYTHONWARNINGS": "ignore", "HELION_DIST_TIMEOUT": "3", "HELION_BACKEND": backend},
        raise_on_failure=False,
    )
    elapsed = time.monotonic() - start
    dead = world_size - 1
    assert outcomes[dead].status == "died" and outcomes[dead].exitcode == 7
    for outcome in outcomes[:dead]:
        assert outcome.status == "ok", outcome.error + outcome.traceback
        kind, text, missing, seconds = outcome.value
        assert kind == "timeout", f"rank {outcome.rank} did not notice the dead rank: {text}"
        assert missing == [dead]
        assert f"rank {dead}" in text and "timed out" in text
        assert seconds < 120
    assert elapsed < 170


def test_lockstep_autotuning_picks_one_winner() -> None:
    for world_size in (2, 3):
        results = run_ranks(
            distributed_ranks.lockstep_autotune,
            world_size,
            timeout=RUN_TIMEOUT,
            env={**QUIET, "HELION_BACKEND": "ref"},
        )
        assert len(set(results)) == 1, f"the ranks picked different configs: {results}"


def test_signal_wait_ordering() -> None:
    for backend in sorted({"ref", DEFAULT_BACKEND}):
        results = run_ranks(
            distributed_ranks.signal_wait_ordering,
            2,
            timeout=RUN_TIMEOUT,
            env={**QUIET, "HELION_BACKEND": backend},
        )
        assert results == [[True] * 5, [True] * 5], f"{backend}: {results}"


def test_a_group_that_fails_to_form_is_formed_again_from_scratch() -> None:
    """gloo's full-mesh connect can fail on a loaded machine (CI saw "Connection closed by peer"
    in init_process_group): every rank starts again, and the run succeeds on attempt 2."""
    with pytest.warns(RuntimeWarning, match=r"did not form their group \(attempt 1 of 3: rank 0"):
        results = run_ranks(
            distributed_ranks.attempt_and_sum,
            3,
            timeout=RUN_TIMEOUT,
            env=QUIET,
            join=distributed_ranks.join_fails_once_on_rank_zero,
        )
    assert results == [("2", 6.0)] * 3


def test_a_group_a_rank_function_forms_is_retried_like_the_first() -> None:
    """The same flake when a rank function forms a group of its own (init_process_group or
    new_group inside `forming_group()`): the attempt starts again from scratch."""
    with pytest.warns(RuntimeWarning, match=r"attempt 1 of 3: rank 0: GroupFormationFailed"):
        results = run_ranks(
            distributed_ranks.second_group_fails_once, 2, timeout=RUN_TIMEOUT, env=QUIET
        )
    assert results == [("2", 3.0)] * 2


def test_a_group_that_never_forms_is_reported_after_the_last_attempt() -> None:
    start = time.monotonic()
    with (
        pytest.warns(RuntimeWarning, match=r"attempt \d of 3") as retries,
        # both ranks raise at once: the report names whichever failed first (the other may
        # still be running when the run is stopped)
        pytest.raises(RankFailure, match=r"rank \d: raised RuntimeError: no group on attempt 3"),
    ):
        run_ranks(
            distributed_ranks.attempt_and_sum,
            2,
            timeout=RUN_TIMEOUT,
            env=QUIET,
            join=distributed_ranks.join_never_works,
        )
    assert [str(w.message).split("(")[1][:12] for w in retries] == ["attempt 1 of", "attempt 2 of"]
    assert time.monotonic() - start < 60  # stopped at the first failure, not at the deadline


def test_a_rank_that_fails_before_joining_stops_the_run_without_a_retry() -> None:
    import ranks_that_fail_to_import

    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "starting them again"
        outcomes = run_ranks(
            ranks_that_fail_to_import.never_reached,
            3,
            timeout=RUN_TIMEOUT,
            env=QUIET,
            raise_on_failure=False,
        )
    assert outcomes[1].status == "error" and "refuses to load on rank 1" in outcomes[1].error
    assert all(o.status != "ok" for o in outcomes)
    assert time.monotonic() - start < 60  # the others were not left waiting for rank 1


def test_a_failing_rank_is_reported() -> None:
    with pytest.raises(RankFailure, match="rank 1: raised ValueError: boom"):
        run_ranks(distributed_ranks.fail_on_rank_one, 2, timeout=60, env=QUIET)


def test_destroying_a_group_frees_it_and_a_new_group_of_that_name_gets_fresh_handles() -> None:
    for backend in sorted({"ref", DEFAULT_BACKEND}):
        results = run_ranks(
            distributed_ranks.group_lifetime,
            2,
            (f"second-store-{backend}",),
            timeout=RUN_TIMEOUT,
            env={**QUIET, "HELION_BACKEND": backend},
        )
        for rank, result in enumerate(results):
            assert result["first_ok"] and result["second_ok"], f"{backend} rank {rank}: {result}"
            assert result["freed"], (
                f"{backend} rank {rank}: the destroyed group is still referenced"
            )
            assert result["same_name"] and result["current"], f"{backend} rank {rank}: {result}"


def test_a_group_re_created_with_another_size_gets_its_own_kernel() -> None:
    results = run_ranks(
        distributed_ranks.regroup_by_size,
        3,
        timeout=90,  # the stale kernel made the third rank wait for a peer that never came
        env={**QUIET, "HELION_BACKEND": "ref", "HELION_DIST_TIMEOUT": "20"},
    )
    base = torch.arange(11, dtype=torch.float32)
    for rank, sums in enumerate(results):
        for size, name, values in sums:
            expected = (base * size + sum(range(size))).tolist()
            assert values == expected, f"rank {rank}, {size} ranks (group {name!r}): {values}"
        assert [s for s, _, _ in sums] == ([2, 3] if rank < 2 else [3])
        assert len({name for _, name, _ in sums}) == 1, "the test needs the name to repeat"


def test_a_rank_outside_a_subgroup_gets_a_clear_error() -> None:
    results = run_ranks(
        distributed_ranks.non_member_call, 3, timeout=120, env={**QUIET, "HELION_BACKEND": "ref"}
    )
    assert results[:2] == ["ok", "ok"], results
    assert results[2].startswith("SymmetricMemoryError") and "not a member" in results[2]


def test_a_backend_without_a_distributed_lowering_names_the_public_op() -> None:
    (text,) = run_ranks(distributed_ranks.refusal_without_a_lowering, 1, timeout=120, env=QUIET)
    assert text.startswith("BackendUnsupported"), text
    assert "hl.wait is not supported by the 'pallas' backend" in text, text
    assert "dist_wait" not in text
    assert "hl.wait(pads[RANK], [3], 1, timeout=0.3)" in text  # the kernel line


def test_a_destroyed_group_releases_its_shared_memory() -> None:
    rounds = 20
    results = run_ranks(
        distributed_ranks.group_rounds,
        2,
        (rounds,),
        timeout=120,
        env={**QUIET, "HELION_BACKEND": "ref"},
    )
    for rank, result in enumerate(results):
        assert result["ok"], f"rank {rank}: wrong all-reduce result"
        usage = result["usage"]
        assert usage[-1] == usage[0], (
            f"rank {rank}: symmetric memory (files, mappings) grew over {rounds} rounds: {usage}"
        )
        files, mapped = result["base"]
        # what is left after the last group is gone: the allocation the rank still holds
        assert result["end"] == (files + 1, mapped + 1 if mapped >= 0 else -1), result
        assert result["peer"] == float((rank + 1) % 2 + 1), result
