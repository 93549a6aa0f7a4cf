"""Constructs the Pallas backend cannot compile are rejected by `check()`, before any code is
generated, with the user's source line."""

from __future__ import annotations

import pallas_features as f
import pytest
import torch
from pallas_testing import assert_same
from pallas_testing import pallas_kernel

from helion import exc
from helion_pallas.backend import PallasBackend
from helion_pallas.memory import check_memory


def test_runtime_grid_bound_is_rejected_with_its_line() -> None:
    with pytest.raises(exc.BackendUnsupported, match="only known at run time") as info:
        pallas_kernel(f.runtime_grid).bind((torch.randn(10), 10))
    assert info.value.loc is not None and info.value.loc.filename.endswith("pallas_features.py")
    assert "for tile in hl.tile(n):" in str(info.value)
    assert "Pallas grid is static" in str(info.value)


def test_reshape_across_tile_dims_is_rejected() -> None:
    with pytest.raises(exc.BackendUnsupported, match="reshape") as info:
        pallas_kernel(f.flat_sum).bind((torch.randn(8, 8),))
    assert "reshape(-1)" in str(info.value)


def test_check_runs_before_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = []
    monkeypatch.setattr(PallasBackend, "compile", lambda self, ir, config: compiled.append(ir))
    with pytest.raises(exc.BackendUnsupported):
        pallas_kernel(f.flat_sum)(torch.randn(8, 8))
    assert compiled == []


def test_atomic_cas_runs_in_interpret_mode_but_not_on_gpu() -> None:
    slots = torch.full([8], -1, dtype=torch.int64)
    ids = torch.tensor([3, 11, 5, 13, 21, 6], dtype=torch.int64)
    bound = pallas_kernel(f.claim_slots).bind((slots, ids))
    expected = slots.clone()
    for value in ids.tolist():
        if expected[value % 8] == -1:
            expected[value % 8] = value
    assert_same(
        bound.compile_config(bound.config_spec.default_config())(slots.clone(), ids), expected
    )
    (node,) = [n for n in bound.ir.walk() if n.op.memory == "atomic"]
    assert check_memory(node, "interpret") is None
    assert "atomic_cas on GPU" in check_memory(node, "gpu")
    assert check_memory(node, "tpu") == "atomics on TPU"


def test_unsupported_dtype_names_the_tensor() -> None:
    with pytest.raises(exc.BackendUnsupported, match="complex64"):
        pallas_kernel(f.masked_where).bind((torch.randn(4, 4, dtype=torch.complex64),))
