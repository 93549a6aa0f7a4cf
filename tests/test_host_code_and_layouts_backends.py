"""On every backend that runs here: host code writing into an argument is applied once per call
and never by the tracing runs (`to_code`, `set_config`); a store or atomic into a tensor whose
elements overlap in memory (``expand()``, an overlapping ``as_strided``) is refused with one
Helion error at the kernel's line, while loads from one are fine; tensors made under
``torch.inference_mode()`` work as arguments outside it (found by exploratory testing: host code
ran 3 times on the first call; Triton wrote into expanded tensors silently, ref raised an
InternalError and Pallas a raw RuntimeError, for overlap and for inference tensors alike)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]


def scale_then_add_one(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)  # host code writing into its argument
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


def copy_doubled(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] * 2
    return out


def add_rows_atomically(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tm, tn in hl.tile(x.size()):
        hl.atomic_add(out, [tm, tn], x[tm, tn])
    return out


def _kernel(fn, backend: str):
    require_backend(backend)
    return helion.kernel(fn, backend=backend, autotune_effort="none")


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_code_writes_into_an_argument_once_per_call(backend: str) -> None:
    kernel = _kernel(scale_then_add_one, backend)
    x = torch.ones(16)
    bound = kernel.bind((x,))
    bound.to_code(helion.Config(block_sizes=[4]))
    bound.set_config(helion.Config(block_sizes=[8]))
    assert x.tolist() == [1.0] * 16
    torch.testing.assert_close(kernel(x), torch.full((16,), 3.0))
    assert x.tolist() == [2.0] * 16
    torch.testing.assert_close(kernel(x), torch.full((16,), 5.0))
    assert x.tolist() == [4.0] * 16


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("make_out", "strides"),
    [
        (lambda: torch.zeros(1, 16).expand(8, 16), "strides [0, 1]"),
        (lambda: torch.zeros(100).as_strided((8, 16), (1, 1)), "strides [1, 1]"),
        (lambda: torch.zeros(100).as_strided((8, 16), (3, 2)), "strides [3, 2]"),
    ],
    ids=["expand", "as_strided_diagonal", "as_strided_interleaved"],
)
def test_a_store_into_a_tensor_whose_elements_overlap_is_refused(
    backend: str, make_out, strides: str
) -> None:
    kernel = _kernel(copy_doubled, backend)
    out = make_out()
    before = out.clone()
    with pytest.raises(exc.WriteToOverlappingTensor) as info:
        kernel(torch.randn(8, 16), out)
    message = str(info.value)
    assert "A store into 'out'" in message
    assert strides in message
    assert "out[tm, tn] = x[tm, tn] * 2" in message  # the kernel's line
    assert ".contiguous()" in message
    assert torch.equal(out, before)  # nothing written


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_atomic_into_an_expanded_tensor_is_refused(backend: str) -> None:
    kernel = _kernel(add_rows_atomically, backend)
    with pytest.raises(exc.WriteToOverlappingTensor, match=r"hl\.atomic_add into 'out'"):
        kernel(torch.randn(8, 16), torch.zeros(1, 16).expand(8, 16))


@pytest.mark.parametrize("backend", BACKENDS)
def test_layouts_that_do_not_overlap_are_written(backend: str) -> None:
    kernel = _kernel(copy_doubled, backend)
    x = torch.randn(8, 16)
    # an expanded input is only read; a transposed view, a column slice, an interleaved
    # `as_strided` view whose elements are all distinct (offsets 2i + 17j) are written
    expanded_in = torch.randn(1, 16).expand(8, 16)
    torch.testing.assert_close(kernel(expanded_in, torch.zeros(8, 16)), expanded_in * 2)
    transposed = torch.zeros(16, 8)
    kernel(x, transposed.t())
    torch.testing.assert_close(transposed.t(), x * 2)
    wide = torch.zeros(8, 17)
    kernel(x, wide[:, 1:])
    torch.testing.assert_close(wide[:, 1:], x * 2)
    assert wide[:, 0].abs().max() == 0
    storage = torch.zeros(2 * 7 + 17 * 15 + 1)
    interleaved = storage.as_strided((8, 16), (2, 17))
    kernel(x, interleaved)
    torch.testing.assert_close(interleaved, x * 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call_inside", [False, True])
def test_tensors_made_under_inference_mode(backend: str, call_inside: bool) -> None:
    kernel = _kernel(copy_doubled, backend)
    with torch.inference_mode():
        x, out = torch.randn(8, 16), torch.zeros(8, 16)
    with torch.inference_mode(call_inside):
        result = kernel(x, out)
    assert result is out
    torch.testing.assert_close(out, x * 2)
    # outputs made by the host code, from inference arguments
    made = _kernel(scale_then_add_one, backend)
    with torch.inference_mode():
        y = torch.ones(16)
        torch.testing.assert_close(made(y), torch.full((16,), 3.0))
