"""Inputs no backend can run: complex tensors (ref refuses them as the compiled backends do,
where it used to drop the imaginary part) and tensors on the meta device (every backend names the
device and itself, where ref returned a meta tensor and the others failed inside torch or JAX);
fake tensors of torch.compile and FakeTensorMode still get the kernel's output shapes."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import helion
import helion.language as hl
from helion import backends
from helion import exc

THIS_FILE = __file__


def _row_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = x[tm, :].sum(-1)
    return out


def _through_complex(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = (x[tile].to(torch.complex64) * 2).to(torch.float32)
    return out


def _add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def _installed(name: str) -> bool:
    if name not in {b.name for b in backends.list_backends()}:
        return False
    return backends.backend_availability(name)[0]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_ref_refuses_complex_tensors(dtype):
    kernel = helion.kernel(_row_sum, backend="ref", autotune_effort="none")
    with pytest.raises(exc.BackendUnsupported) as info:
        kernel(torch.randn(2, 4, dtype=dtype))
    message = str(info.value)
    assert f"of dtype {dtype} is not supported by the 'ref' backend" in message, message
    assert "view_as_real" in message, message


def test_ref_refuses_complex_values_made_in_device_code():
    kernel = helion.kernel(_through_complex, backend="ref", autotune_effort="none")
    with pytest.raises(exc.BackendUnsupported) as info:
        kernel(torch.randn(8))
    message = str(info.value)
    assert "cast producing torch.complex64 is not supported by the 'ref' backend" in message
    assert info.value.loc is not None and "x[tile].to(torch.complex64)" in info.value.loc.line()
    assert THIS_FILE in message


def test_ref_still_takes_the_real_parts_of_complex_tensors():
    # the hint's way: view_as_real gives a real tensor of the same memory
    z = torch.randn(3, 4, dtype=torch.complex64)
    kernel = helion.kernel(_row_sum, backend="ref", autotune_effort="none")
    parts = torch.view_as_real(z).permute(2, 0, 1).reshape(6, 4)
    torch.testing.assert_close(kernel(parts), torch.view_as_real(z.sum(-1)).t().reshape(6))


@pytest.mark.parametrize("backend", ["ref", "triton", "pallas", "cute"])
def test_meta_tensors_are_refused_naming_the_device_and_backend(backend):
    if not _installed(backend):
        pytest.skip(f"the {backend} backend is not installed here")
    kernel = helion.kernel(_add, backend=backend, autotune_effort="none")
    m = torch.empty(8, 16, device="meta")
    with pytest.raises(exc.TensorOnMetaDevice) as info:
        kernel(m, m)
    message = str(info.value)
    assert "on the meta device ('out', 'x', 'y')" in message, message
    assert f"the {backend!r} backend cannot run a kernel on them" in message, message


def test_fake_tensors_still_get_output_shapes():
    kernel = helion.kernel(_add, backend="ref", autotune_effort="none")
    with FakeTensorMode():
        x = torch.empty(8, 16)
        result = kernel(x, x)
    assert result.shape == (8, 16) and result.device.type == "cpu"
    compiled = torch.compile(lambda a, b: kernel(a, b) * 2, backend="eager", fullgraph=True)
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    torch.testing.assert_close(compiled(x, y), (x + y) * 2)
