"""Dimensions of size 0 in device code: a reduction over one gives torch's value (the identity of
sum, prod, any and all; nan for mean and var) or, where torch raises (amax, argmax, max), a clear
error at trace time; backends that cannot load a `:` slice of length 0 refuse it at bind time
with the line, instead of crashing in generated code; a tile loop over nothing does nothing."""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import helion
import helion.language as hl
from helion import backends
from helion import exc
from helion.backends.base import check_core
from helion.backends.ref import RefBackend
from helion.testing import empty_slices

THIS_FILE = __file__

# torch's results over an empty dimension; every one of them is a full value, not an error
_REDUCTIONS = {
    "sum": lambda row: row.sum(-1),
    "prod": lambda row: row.prod(-1),
    "any": lambda row: row.any(-1),
    "all": lambda row: row.all(-1),
    "sum_keepdim": lambda row: row.sum(-1, keepdim=True)[:, 0],
    "sum_dtype": lambda row: torch.sum(row, -1, dtype=torch.float64),
    "mean": lambda row: row.mean(-1),
    "var": lambda row: row.var(-1),
    "var_biased": lambda row: row.var(-1, correction=0),
    "std": lambda row: row.std(-1),
    "logsumexp": lambda row: torch.logsumexp(row, -1),
    "softmax_then_sum": lambda row: torch.softmax(row, -1).sum(-1),
    "log_softmax_then_sum": lambda row: torch.log_softmax(row, -1).sum(-1),
}
_FLOAT_ONLY = {"mean", "var", "var_biased", "std", "logsumexp", "softmax_then_sum"}
_FLOAT_ONLY |= {"log_softmax_then_sum"}


def _rows(x: torch.Tensor, reduce: Callable) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float64, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = reduce(x[tm, :]).to(torch.float64)
    return out


_ref_rows = helion.kernel(_rows, backend="ref", autotune_effort="none")


# torch refuses the float-only reductions for integer and bool tensors: those pairs are not made
_CASES = [
    (name, dtype)
    for name in sorted(_REDUCTIONS)
    for dtype in (torch.float32, torch.float16, torch.int32, torch.bool)
    if dtype.is_floating_point or name not in _FLOAT_ONLY
]


@pytest.mark.parametrize("name, dtype", _CASES)
def test_reduction_over_an_empty_dimension_matches_torch(name, dtype):
    reduce = _REDUCTIONS[name]
    x = torch.empty(5, 0, dtype=dtype)
    expected = reduce(x).to(torch.float64)
    torch.testing.assert_close(_ref_rows(x, reduce), expected, equal_nan=True)


def _middle(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = x[tm, 2:2].sum(-1) + x[tm, 2:3].sum(-1)
    return out


def test_empty_slice_of_a_non_empty_dimension():
    x = torch.randn(6, 5)
    kernel = helion.kernel(_middle, backend="ref", autotune_effort="none")
    torch.testing.assert_close(kernel(x), x[:, 2])


# torch raises for these as well ("Expected reduction dim 1 to have non-zero size")
_WITHOUT_IDENTITY = {
    "amax": lambda row: row.amax(-1),
    "amin": lambda row: row.amin(-1),
    "argmax": lambda row: row.argmax(-1),
    "argmin": lambda row: row.argmin(-1),
    "max": lambda row: row.max(-1).values,
    "min": lambda row: torch.min(row, -1).values,
}


@pytest.mark.parametrize("name", sorted(_WITHOUT_IDENTITY))
def test_reduction_without_identity_over_an_empty_dimension_is_refused(name):
    reduce = _WITHOUT_IDENTITY[name]
    x = torch.empty(5, 0)
    with pytest.raises(IndexError):
        reduce(x)
    with pytest.raises(exc.EmptyReduction) as info:
        _ref_rows(x, reduce)
    message = str(info.value)
    assert f"torch.{name} over dimension 1, which has size 0" in message, message
    # the kernel's line that calls the reduction
    assert info.value.loc is not None and "reduce(x[tm, :])" in info.value.loc.line(), message
    assert THIS_FILE in message, message


@pytest.mark.parametrize("name", sorted(_WITHOUT_IDENTITY))
def test_eager_mode_refuses_it_as_compiled_kernels_do(name):
    reduce = _WITHOUT_IDENTITY[name]
    kernel = helion.kernel(_rows, backend="ref", ref_mode=helion.RefMode.EAGER)
    with pytest.raises(exc.EmptyReduction) as info:
        kernel(torch.empty(5, 0), reduce)
    message = str(info.value)
    assert f"torch.{name} over dimension 1, which has size 0" in message, message
    assert info.value.loc is not None and "reduce(x[tm, :])" in info.value.loc.line(), message
    x = torch.randn(5, 3)
    torch.testing.assert_close(kernel(x, reduce), reduce(x).double())


def test_the_same_kernel_still_reduces_a_non_empty_dimension():
    reduce = _WITHOUT_IDENTITY["amax"]
    x = torch.randn(5, 3)
    torch.testing.assert_close(_ref_rows(x, reduce), x.amax(-1).double())
    with pytest.raises(exc.EmptyReduction):
        _ref_rows(torch.empty(5, 0), reduce)  # another shape: its own trace


def _row_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = x[tm, :].sum(-1)
    return out


def _row_copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        out[tm, :] = x[tm, :] * 2
    return out


class _PaddingBackend(RefBackend):
    """A backend that cannot load a slice of length 0 (it inherits
    ref's `check` and runs with ref's executor)."""

    name = "padding-test"
    zero_length_slices = False


class _OverridingBackend(RefBackend):
    """One whose `check` overrides without calling super(), as the plugins' do."""

    name = "overriding-test"
    zero_length_slices = False

    def check(self, ir) -> None:
        self.checked = True


@pytest.mark.parametrize("backend_class", [_PaddingBackend, _OverridingBackend])
@pytest.mark.parametrize(
    "fn, op, line",
    [(_row_sum, "load", "x[tm, :].sum(-1)"), (_row_copy, "load", "x[tm, :] * 2")],
)
def test_backends_without_zero_length_slices_refuse_them_at_bind(backend_class, fn, op, line):
    kernel = helion.kernel(fn, backend="ref", autotune_effort="none")
    ir = kernel.bind((torch.randn(4, 0),)).ir  # ref accepts it
    backend = backend_class()
    with pytest.raises(exc.ZeroLengthSlice) as info:
        check_core(backend, ir)  # what the runtime runs before backend.check
    message = str(info.value)
    assert f"{op} of a `:` slice of length 0" in message, message
    assert f"the {backend.name!r} backend" in message, message
    assert isinstance(info.value, exc.BackendUnsupported)
    assert info.value.loc is not None and line in info.value.loc.line()


def test_a_loop_that_never_runs_may_hold_an_empty_slice():
    # a tile loop over 0 rows never loads anything, whatever its slices are
    ir = (
        helion.kernel(_row_sum, backend="ref", autotune_effort="none").bind((torch.randn(0, 0),)).ir
    )
    check_core(_PaddingBackend(), ir)
    check_core(_OverridingBackend(), ir)


def _installed(name: str) -> bool:
    return (
        name in {b.name for b in backends.list_backends()}
        and (backends.backend_availability(name)[0])
    )


@pytest.mark.parametrize("fn", [_row_sum, _row_copy])
def test_cute_compiles_an_empty_slice(fn):
    # CuTe cannot launch here (no GPU): its own tests run the generated code on the host
    # (packages/helion-cute/tests/test_zero_length_slices.py)
    if not _installed("cute"):
        pytest.skip("the cute backend is not installed here")
    kernel = helion.kernel(fn, backend="cute", autotune_effort="none")
    bound = kernel.bind((torch.randn(4, 0),))
    assert bound.backend.zero_length_slices
    bound.compile_config(bound.config_spec.default_config())


@pytest.mark.parametrize("backend", ["triton", "pallas"])
@pytest.mark.parametrize(
    "fn, reference", [(_row_sum, lambda x: x.sum(-1)), (_row_copy, lambda x: x * 2)]
)
def test_triton_and_pallas_run_an_empty_slice(backend, fn, reference):
    # Triton once read the empty tensor through an unmasked one-lane block (a segfault), Pallas
    # failed inside JAX; now the lane is masked off (Triton) or the access touches no memory
    # (Pallas). Their own tests (test_zero_length_slices.py) cover more kernels and configs.
    if not _installed(backend):
        pytest.skip(f"the {backend} backend is not installed here")
    kernel = helion.kernel(fn, backend=backend, autotune_effort="none")
    assert kernel.bind((torch.randn(4, 0),)).backend.zero_length_slices
    x = torch.randn(37, 0)
    torch.testing.assert_close(kernel(x), reference(x))


def test_ref_tile_loop_over_an_empty_dimension_leaves_the_output_alone():
    def double_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        for tile in hl.tile(x.size()):
            out[tile] = x[tile] * 2
        return out

    kernel = helion.kernel(double_into, backend="ref", autotune_effort="none")
    for shape in [(0,), (4, 0), (0, 4)]:
        x = torch.randn(shape)
        out = torch.full(shape, 3.0)
        assert kernel(x, out) is out and out.shape == shape


def _sum_plus_width(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        out[tile] = row.sum(-1) + row.size(1)
    return out


@pytest.mark.parametrize("backend", ["ref", "triton", "pallas"])
@pytest.mark.parametrize("width", [0, 1, 5])
def test_the_size_of_a_sliced_dimension_is_its_real_extent(backend, width):
    """`row.size(1)` of a length-0 slice is 0 in device code (its block's size hint is 1)."""
    from helion.testing import require_backend

    require_backend(backend)
    x = torch.randn(37, width)
    kernel = helion.kernel(_sum_plus_width, backend=backend, autotune_effort="none")
    torch.testing.assert_close(kernel(x), x.sum(-1) + width)


@pytest.mark.filterwarnings("ignore:var\\(\\)")
@pytest.mark.parametrize("case", empty_slices.EMPTY_SLICE_CASES, ids=lambda case: case.id)
def test_empty_slice_conformance_cases_on_ref(case):
    empty_slices.check_empty_slice_case(case, "ref")


def test_the_empty_slice_check_catches_a_wrong_result():
    wrong = empty_slices.EmptySliceCase(
        "wrong", empty_slices.row_sum, lambda g, device: ((torch.randn(37, 0),), torch.ones(37))
    )
    with pytest.raises(AssertionError, match="wrong on 'ref'"):
        empty_slices.check_empty_slice_case(wrong, "ref")
