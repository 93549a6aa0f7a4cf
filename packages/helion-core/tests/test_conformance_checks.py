"""`helion.testing` itself: its checks fail on wrong results with a message naming the case, a
backend that is not installed skips the test that asks for it (naming the backend), and neither
`import helion` nor the cases import it or pytest."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import torch

import helion.language as hl
from helion.testing import atomics
from helion.testing import shared_block_size


def _atomic_case(case_id: str) -> atomics.AtomicCase:
    (case,) = [case for case in atomics.ATOMIC_CASES if case.id == case_id]
    return case


def _block_size_case(case_id: str) -> shared_block_size.BlockSizeCase:
    (case,) = [case for case in shared_block_size.BLOCK_SIZE_CASES if case.id == case_id]
    return case


def snapshot_add(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    # the bug the atomic cases are about: every lane reads one snapshot taken before any update
    out = torch.empty_like(values)
    for tile in hl.tile(values.size(0)):
        out[tile] = target[index[tile]]
        hl.atomic_add(target, [index[tile]], values[tile])
    return out


def wrong_last_row_scale(x: torch.Tensor) -> torch.Tensor:
    # nested_scale, wrong on purpose in the last row (of the last, partial tile)
    m, n = x.shape
    bs = hl.register_block_size(4, max(m, n))
    out = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            out[ti, tj] = x[ti, tj] * 2 + 1 + (ti.index == m - 1)[:, None].to(x.dtype)
    return out


def test_case_ids_are_unique() -> None:
    for cases in (atomics.ATOMIC_CASES, shared_block_size.BLOCK_SIZE_CASES):
        ids = [case.id for case in cases]
        assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_lanes_reading_one_snapshot_fail_the_lane_order_check() -> None:
    case = dataclasses.replace(_atomic_case("add-int32-n37-bins5-block16"), fn=snapshot_add)
    with pytest.raises(AssertionError, match=r"add-int32-n37-bins5-block16 on 'ref'.*read back"):
        atomics.check_atomic_case(case, "ref")


def test_lanes_reading_one_snapshot_fail_the_order_free_check() -> None:
    case = dataclasses.replace(_atomic_case("add-positive-n37-bins5-block16"), fn=snapshot_add)
    with pytest.raises(AssertionError, match="no order of the lanes reads these values"):
        atomics.check_atomic_case(case, "ref", in_lane_order=False)


def test_order_free_check_refuses_cases_it_cannot_check() -> None:
    with pytest.raises(ValueError, match="without a lane order"):
        atomics.check_atomic_case(
            _atomic_case("cas-chain-n29-bins3-block8"), "ref", in_lane_order=False
        )


def test_a_wrong_partial_tile_fails_the_block_size_check() -> None:
    case = dataclasses.replace(_block_size_case("nested_scale-37x50"), fn=wrong_last_row_scale)
    with pytest.raises(AssertionError, match=r"nested_scale-37x50 on 'ref' under helion\.Config"):
        shared_block_size.check_block_size_case(case, "ref")


def test_a_missing_backend_skips_naming_it() -> None:
    case = _block_size_case("nested_scale-37x50")
    with pytest.raises(pytest.skip.Exception, match="'no-such-backend'"):
        shared_block_size.check_block_size_case(case, "no-such-backend")
    with pytest.raises(pytest.skip.Exception, match="'no-such-backend'"):
        atomics.check_atomic_case(_atomic_case("ticket_counter-n37-block16"), "no-such-backend")


@pytest.mark.parametrize("backend", ["ref", "triton", "pallas"])
def test_first_party_backends_run_the_cases(backend: str) -> None:
    # skipped where the backend is not installed (core's isolated venv), with its name
    shared_block_size.check_block_size_case(_block_size_case("nested_scale-37x50"), backend)
    atomics.check_atomic_case(
        _atomic_case("ticket_counter-n37-block16"), backend, in_lane_order=backend != "triton"
    )


def test_neither_helion_nor_the_cases_import_pytest_or_each_other() -> None:
    code = (
        "import sys, helion, helion.language\n"
        "assert 'helion.testing' not in sys.modules, 'import helion imported helion.testing'\n"
        "import helion.testing.atomics, helion.testing.shared_block_size\n"
        "assert 'pytest' not in sys.modules, 'helion.testing imported pytest'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
