"""hl.make_async_remote_copy / hl.AsyncCopyDescriptor / hl.remote_barrier on CPU rank processes,
on the ref backend and on Triton (its interpreter), compared exactly (the rank-side code is in
remote_copy_ranks.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("helion_distributed")

from helion_distributed.testing import run_ranks

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))  # the rank processes import remote_copy_ranks by name

import remote_copy_ranks  # noqa: E402
from rank_backends import BACKENDS  # noqa: E402
from rank_backends import QUIET  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(300)]


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("backend", BACKENDS)
def test_pushes_ring_all_gather_and_explicit_destinations(backend: str, world_size: int) -> None:
    """A one-shot push to (rank + 1) % ws then wait(); a ring all-gather reusing one descriptor
    with wait_recv in a loop; a local source pushed into another (symmetric) tensor at another
    index through a runtime device_id. Each is launched twice (cached workspace, reused words)."""
    results = run_ranks(
        remote_copy_ranks.transfers,
        world_size,
        timeout=180,
        env={**QUIET, "HELION_BACKEND": backend},
    )
    for rank, result in enumerate(results):
        assert result and all(result.values()), f"{backend} rank {rank}: {result}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_remote_barrier_is_peer_scoped(backend: str) -> None:
    """Pairs (rank ^ 1) meet only each other: in the last call ranks 2 and 3 start only after
    ranks 0 and 1 are done."""
    results = run_ranks(
        remote_copy_ranks.pairs, 4, timeout=180, env={**QUIET, "HELION_BACKEND": backend}
    )
    assert results == [[True] * 3] * 4, f"{backend}: {results}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_clear_errors(backend: str) -> None:
    (first, second) = run_ranks(
        remote_copy_ranks.errors, 2, timeout=180, env={**QUIET, "HELION_BACKEND": backend}
    )
    for found in (first, second):
        assert found["slice"].startswith("InvalidIndexingType")
        assert "slices are not supported" in found["slice"]
        assert "in sliced" in found["slice"]  # the kernel line
        assert found["dtype"].startswith("TypeInferenceError")
        assert "same dtype, got torch.int32 and torch.float32" in found["dtype"]
        assert found["not_symmetric"].startswith("SymmetricMemoryError")
        assert "symm_mem.empty" in found["not_symmetric"]
        assert found["computed"].startswith("TypeInferenceError")
        assert "computed tile cannot be pushed" in found["computed"]
        for case in ("far_peer", "far_barrier"):  # a usage error, not a config's
            assert found[case].startswith("InvalidAPIUsage"), found[case]
            assert "is not a rank of the group (size 2)" in found[case]
            assert f"in {case}" in found[case]  # the kernel line
    # ref raises at the wait; a compiled kernel records it and check_timeouts() raises
    assert first["timeout"].startswith("DistributedTimeout"), first["timeout"]
    assert "rank 0" in first["timeout"]
    if backend == "ref":
        assert "wait_recv() of hl.make_async_remote_copy" in first["timeout"]
        assert "in lonely" in first["timeout"]
    else:
        assert "lonely" in first["timeout"]


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("backend", BACKENDS)
def test_sizes_follow_each_call(backend: str, world_size: int) -> None:
    """static_shapes=False: other row widths and counts copy what each call's tensors hold; a
    call whose tiles run past dst (or src) raises IndexOutOfBounds with the op and the line,
    and nothing is written past dst."""
    results = run_ranks(
        remote_copy_ranks.sizes, world_size, timeout=240, env={**QUIET, "HELION_BACKEND": backend}
    )
    for rank, found in enumerate(results):
        where = f"{backend} rank {rank}"
        for key in ("rows[6x8]", "rows[4x5]", "rows[8x16]"):
            assert found[key] is True, f"{where} {key}: {found}"
        for key in ("push0[40->40]", "push1[24->40]", "push3[40->40]"):
            assert found[key] == ("no error", True), f"{where} {key}: {found[key]}"
        text, _ = found["push2[64->40]"]
        assert text.startswith("IndexOutOfBounds"), f"{where}: {text}"
        assert "hl.make_async_remote_copy" in text and "'buffer'" in text, text
        assert "index 40 along dimension 0 (of size 40)" in text, text
        assert "in push_rows" in text, text  # the kernel line
        assert all(found[f"untouched{i}[{n}->40]"] for i, n in enumerate((40, 24, 64, 40)))
        assert found["over_dst[40->40]"] == "no error", found["over_dst[40->40]"]
        text = found["over_dst[24->40]"]
        assert text.startswith("IndexOutOfBounds") and "'x'" in text, f"{where}: {text}"
        assert "index 24 along dimension 0 (of size 24)" in text and "in push_over_dst" in text
        assert found["over_dst_untouched[24->40]"], f"{where}: {found}"
        assert found["grid[4->4]"] == "no error", found["grid[4->4]"]
        text = found["grid[6->4]"]  # an hl.grid index past dst
        assert text.startswith("IndexOutOfBounds") and "index 4 along dimension 0" in text, text
        assert "in push_grid_rows" in text, text


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("backend", BACKENDS)
def test_runtime_device_id_outside_the_group(backend: str, world_size: int) -> None:
    """A run-time device_id (or remote_barrier peer) outside the group: the rank that names it
    gets an error with the op, the line, the rank and the group size (Triton: a host scalar
    before the launch, a value computed on the device from check_timeouts()); the rank waiting
    for it is released long before the timeout and told which rank failed."""
    results = run_ranks(
        remote_copy_ranks.bad_peers,
        world_size,
        timeout=240,
        env={**QUIET, "HELION_BACKEND": backend},
    )
    kernels = {"host_scalar": "push_to", "device_value": "push_shifted", "barrier": "meet_shifted"}
    limit = remote_copy_ranks.BAD_PEER_TIMEOUT / 2
    for case, kernel in kernels.items():
        op = "hl.remote_barrier" if case == "barrier" else "hl.make_async_remote_copy"
        text, _ = results[0][case]
        assert text.startswith("DistributedError"), f"{backend} {case} rank 0: {text}"
        assert op in text, text
        assert f"{world_size + 3} is not a rank of the group (size {world_size})" in text, text
        assert f"in {kernel}" in text, text  # the kernel line
        text, elapsed = results[1][case]
        assert text.startswith("DistributedError"), f"{backend} {case} rank 1: {text}"
        assert "rank 0" in text, text
        assert elapsed < limit, f"{backend} {case} rank 1 waited {elapsed:.1f}s: {text}"


def test_eager_mode_refuses_with_the_op_and_line(monkeypatch) -> None:
    import helion.exc
    from helion_distributed import _eager

    with pytest.raises(helion.exc.BackendUnsupported) as error:
        _eager.make_async_remote_copy(None)
    text = str(error.value)
    assert "hl.make_async_remote_copy" in text and "eager mode" in text
    assert "test_remote_copy.py:" in text


@pytest.mark.parametrize(("backend", "world_size"), [("ref", 3), (BACKENDS[-1], 2)])
def test_example(backend: str, world_size: int) -> None:
    results = run_ranks(
        remote_copy_ranks.example,
        world_size,
        timeout=180,
        env={**QUIET, "HELION_BACKEND": backend},
    )
    assert results == ["ok"] * world_size
