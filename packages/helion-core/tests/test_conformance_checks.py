"""`helion.testing` itself: its checks fail on wrong results with a message naming the case, a
backend that is not installed or cannot run here skips the test that asks for it (naming the
backend) while a misspelt backend name fails it, and neither `import helion` nor the cases import
it or pytest."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest
import torch

import helion.language as hl
from helion import exc
from helion import plugins
from helion.backends.base import Backend
from helion.backends.ref import RefBackend
from helion.testing import atomics
from helion.testing import require_backend
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


@pytest.fixture
def only_core_plugins(monkeypatch: pytest.MonkeyPatch):
    """A fresh plugin manager that loads no installed plugin: only `ref` is installed."""
    monkeypatch.setenv(plugins.DISABLE_AUTOLOAD_ENV, "1")
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


def test_a_misspelt_backend_fails_naming_it_and_the_known_ones() -> None:
    # a typo must not skip every case: no installed plugin provides it, and no first-party
    # backend has that name
    with pytest.raises(exc.UnknownBackend) as caught:
        require_backend("trtion")
    message = str(caught.value)
    assert "'trtion'" in message
    assert "cute, pallas, ref, triton" in message  # the first-party names
    assert "installed backends: " in message and "ref" in message.split("installed backends:")[1]
    with pytest.raises(exc.UnknownBackend, match="'no-such-backend'"):
        shared_block_size.check_block_size_case(
            _block_size_case("nested_scale-37x50"), "no-such-backend"
        )
    with pytest.raises(exc.UnknownBackend, match="'no-such-backend'"):
        atomics.check_atomic_case(_atomic_case("ticket_counter-n37-block16"), "no-such-backend")


def test_a_first_party_backend_that_is_not_installed_skips_naming_it(only_core_plugins) -> None:
    with pytest.raises(pytest.skip.Exception, match=r"'pallas'.*helion-pallas"):
        require_backend("pallas")
    case = _block_size_case("nested_scale-37x50")
    with pytest.raises(pytest.skip.Exception, match="'triton'"):
        shared_block_size.check_block_size_case(case, "triton")
    with pytest.raises(pytest.skip.Exception, match="'cute'"):
        atomics.check_atomic_case(_atomic_case("ticket_counter-n37-block16"), "cute")


class _NeedsADevice(RefBackend):
    name = "needs-a-device"

    def is_available(self) -> tuple[bool, str]:
        return False, "needs a device this machine does not have"


class _DeviceBackendPlugin:
    @plugins.hookimpl
    def helion_backends(self) -> list[Backend]:
        return [_NeedsADevice()]


class _ExplodingPlugin:
    @plugins.hookimpl
    def helion_backends(self) -> list[Backend]:
        raise RuntimeError("exploded while listing its backends")


def test_an_installed_backend_that_cannot_run_here_skips(only_core_plugins) -> None:
    plugins.register_plugin(_DeviceBackendPlugin(), "device-toys")
    with pytest.raises(pytest.skip.Exception, match=r"'needs-a-device'.*does not have"):
        require_backend("needs-a-device")
    # a third-party plugin that failed to load is known by its name: skipped, saying why
    plugins.register_plugin(_ExplodingPlugin(), "exploding")
    with pytest.raises(pytest.skip.Exception, match=r"'exploding'.*exploded while listing"):
        require_backend("exploding")
    require_backend("ref")  # usable: returns quietly


def test_require_backend_raises_unittest_skip_without_pytest() -> None:
    code = (
        "import sys, unittest\n"
        "from helion import exc\n"
        "from helion.testing import require_backend\n"
        "assert 'pytest' not in sys.modules\n"
        "try:\n"
        "    require_backend('triton')\n"
        "except unittest.SkipTest as skip:\n"
        "    assert \"'triton'\" in str(skip), skip\n"
        "else:\n"
        "    raise AssertionError('no skip')\n"
        "try:\n"
        "    require_backend('trtion')\n"
        "except exc.UnknownBackend as error:\n"
        "    assert \"'trtion'\" in str(error), error\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
    )
    env = {**os.environ, plugins.DISABLE_AUTOLOAD_ENV: "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr


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
        "import helion.testing.merged_dims, helion.testing.empty_slices\n"
        "assert 'pytest' not in sys.modules, 'helion.testing imported pytest'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_cases_bind_with_full_precision_float32_products() -> None:
    # on a GPU the default (TF32) misses float32 matmuls by about 1e-3 relative: the H100 run of
    # conformance_gpu.py failed every shared-block-size matmul case at the 1e-4 tolerance
    from helion.testing import bind

    case = _block_size_case("shared_matmul-37x45-45x50")
    bound = bind(case.fn, "ref", case.inputs())
    assert bound.settings.dot_precision == "ieee"
