"""torch <-> JAX at launch: shared buffers, outputs written into the host's tensors, runtime
scalars that do not recompile."""

from __future__ import annotations

import pallas_features as f
import pytest
import torch
from pallas_kernels import CASES_BY_NAME
from pallas_testing import assert_same
from pallas_testing import pallas_kernel

from helion_pallas.backend import PallasBackend
from helion_pallas.launcher import to_jax


def test_to_jax_shares_contiguous_cpu_memory() -> None:
    tensor = torch.zeros(4, 5)
    array = to_jax(tensor)
    tensor[1, 2] = 7.0
    assert float(array[1, 2]) == 7.0


def test_non_contiguous_inputs_are_read_logically() -> None:
    case = CASES_BY_NAME["add"]
    x = torch.randn(37, 100).t()
    y = torch.randn(100, 37)
    assert not x.is_contiguous()
    assert_same(pallas_kernel(case.fn)(x, y), x + y)


def test_in_place_kernel_writes_the_callers_tensor() -> None:
    x = torch.randn(37, 53)
    expected = x * 2
    result = pallas_kernel(f.in_place_double)(x)
    assert result is x
    assert_same(x, expected)


def test_outputs_the_kernel_does_not_touch_keep_their_values() -> None:
    # scatter_rows writes only the rows it is given; the others keep the caller's values
    out = torch.full((41, 7), 5.0)
    idx = torch.tensor([3, 9, 0])
    src = torch.randn(3, 7)
    result = pallas_kernel(f.scatter_rows)(idx, src, out)
    expected = torch.full((41, 7), 5.0)
    expected[idx] = src
    assert_same(result, expected)


def test_runtime_scalars_reuse_the_compiled_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    compiles = []
    original = PallasBackend.compile

    def counting(self, ir, config):
        compiles.append(config)
        return original(self, ir, config)

    monkeypatch.setattr(PallasBackend, "compile", counting)
    import helion

    kernel = helion.kernel(f.scaled_add, backend="pallas", autotune_effort="none")
    x, y = torch.randn(300), torch.randn(300)
    assert_same(kernel(2.5, x, y), 2.5 * x + y)
    assert_same(kernel(-1.0, x, y), -x + y)
    assert len(compiles) == 1


def test_compiled_kernel_exposes_its_source() -> None:
    case = CASES_BY_NAME["sum"]
    bound = pallas_kernel(case.fn).bind(case.args())
    compiled = bound.compile_config(bound.config_spec.default_config())
    assert "pl.pallas_call(" in compiled.source
