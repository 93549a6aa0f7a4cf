"""torch <-> JAX at launch: shared buffers, outputs written into the host's tensors, runtime
scalars that do not recompile."""

from __future__ import annotations

import jax
import pallas_features as f
import pytest
import torch
from pallas_kernels import CASES_BY_NAME
from pallas_testing import assert_same
from pallas_testing import pallas_kernel

from helion_pallas import launcher
from helion_pallas.backend import PallasBackend
from helion_pallas.launcher import TensorImporter
from helion_pallas.launcher import to_jax


def test_to_jax_shares_contiguous_cpu_memory() -> None:
    tensor = torch.zeros(4, 5)
    array = to_jax(tensor)
    tensor[1, 2] = 7.0
    assert float(array[1, 2]) == 7.0


@pytest.mark.parametrize("lean", [True, False], ids=["jaxlib_import", "public_from_dlpack"])
def test_importer_shares_memory_and_keeps_dtypes(lean: bool) -> None:
    importer = TensorImporter(torch.device("cpu"))
    assert (importer._import is not None) or not lean, (
        "this JAX lacks the import it was written for"
    )
    if not lean:
        importer._import = None
    tensors = [
        torch.zeros(3, 5),
        torch.arange(7, dtype=torch.int64),
        torch.ones(2, 3, dtype=torch.bfloat16),
        torch.randn(1, 9).t(),  # strides (1, 9): handed over as row-major
        torch.randn(6, 4).t(),  # not contiguous: a copy
    ]
    with jax.enable_x64(True):  # as the launcher calls it
        arrays = importer(tensors)
    assert [str(a.dtype) for a in arrays] == ["float32", "int64", "bfloat16", "float32", "float32"]
    for tensor, array in zip(tensors, arrays, strict=True):
        assert tuple(array.shape) == tuple(tensor.shape)
        assert torch.equal(torch.from_dlpack(array).float(), tensor.float())
    tensors[0][1, 2] = 7.0
    tensors[3][4, 0] = 9.0
    assert float(arrays[0][1, 2]) == 7.0 and float(arrays[3][4, 0]) == 9.0


def test_importer_falls_back_to_the_public_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # a jaxlib whose private import changed its signature: the call raises TypeError
    def changed(*args: object) -> None:
        raise TypeError("dlpack_managed_tensor_to_buffer(): incompatible function arguments")

    monkeypatch.setattr(launcher, "_jaxlib_capsule_import", lambda: changed)
    importer = TensorImporter(torch.device("cpu"))
    (array,) = importer([torch.full((4,), 3.0)])
    assert importer._import is None and float(array[2]) == 3.0
    x, y = torch.randn(37, 53), torch.randn(37, 53)
    assert_same(pallas_kernel(CASES_BY_NAME["add"].fn)(x, y), x + y)


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


_PREALLOCATE_PROBE = """
import os, torch
from helion_pallas.launcher import jax_device
jax_device(torch.device("cpu"))
print(os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))
"""


@pytest.mark.parametrize(("preset", "seen"), [(None, "false"), ("true", "true")])
def test_jax_is_kept_from_reserving_the_gpu_unless_asked(preset, seen) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "XLA_PYTHON_CLIENT_PREALLOCATE"}
    if preset is not None:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = preset
    result = subprocess.run(
        [sys.executable, "-c", _PREALLOCATE_PROBE], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == seen
