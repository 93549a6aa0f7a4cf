"""`:` slices of length 0 (`x[tile, :]` of a dimension of size 0, `x[tile, 2:2]`) on Pallas.

An access with such a slice addresses no element: its lowering touches no memory (a load is
zeros, as a load with every lane masked off would give; a store writes nothing), its tensor gets
no ref from it, and the slice's one lane has the mask `valid_0` (all false). Reductions over it
take torch's values (core folds them at trace time; amax and the like raise `EmptyReduction`, as
torch raises). Before, core refused these kernels at bind (`ZeroLengthSlice`): JAX cannot cut
the one-lane window from an empty dimension. Each kernel runs in interpret mode under its default
config and random ones (core's conformance cases, `helion.testing.empty_slices`), against
PyTorch; the code for NVIDIA GPUs is lowered through Pallas' Triton lowering without the device.

An inner `hl.tile` loop over a dimension of size 0 (a matmul with K == 0) runs no iteration: its
body is not emitted (the carried values pass through) and its accesses get no refs. Before, the
tensors it read were passed whole with a BlockSpec holding a 0, and JAX's interpreter divided by
that block size (ZeroDivisionError). An access of a tensor with no element touches no memory
either, as an empty slice's does, for loops whose bounds are only known at run time.
"""

from __future__ import annotations

import random

import pytest
import torch
from pallas_testing import gpu_config_spec
from pallas_testing import lower_for_platform

import helion
from helion.testing import empty_slices


@pytest.mark.filterwarnings("ignore:var\\(\\)")
@pytest.mark.parametrize("case", empty_slices.EMPTY_SLICE_CASES, ids=lambda case: case.id)
def test_empty_slice_cases(case):
    empty_slices.check_empty_slice_case(case, "pallas")


def test_amax_over_the_empty_dimension_raises_as_torch_does():
    with pytest.raises(IndexError):
        torch.randn(37, 0, 5).amax(1)
    empty_slices.check_empty_reduction_raises("pallas")


def test_an_empty_slice_touches_no_memory():
    x = torch.randn(37, 0)
    kernel = helion.kernel(empty_slices.row_sum, backend="pallas", autotune_effort="none")
    torch.testing.assert_close(kernel(x), torch.zeros(37))
    source = kernel.bind((x,)).to_code(kernel.bind((x,)).config_spec.default_config())
    assert "valid_0 = jnp.arange(1, dtype=jnp.int32) < 0" in source, source
    assert "load = jnp.zeros((64, 1), dtype=jnp.float32)" in source, source
    assert "x_ref" not in source, source  # x is not passed: nothing reads it


def test_an_inner_loop_over_an_empty_dimension_is_not_emitted():
    # the loop over K == 0 leaves the accumulator alone: no fori_loop, and x and w get no refs
    x, w = torch.randn(37, 0), torch.randn(0, 45)
    kernel = helion.kernel(empty_slices.tiled_matmul, backend="pallas", autotune_effort="none")
    torch.testing.assert_close(kernel(x, w), x @ w)
    bound = kernel.bind((x, w))
    spec = bound.config_spec
    for config in [spec.default_config()] + [
        spec.random_config(random.Random(seed)) for seed in range(4)
    ]:
        source = bound.to_code(config)
        assert "it runs no iteration" in source, source
        assert "fori_loop" not in source and "unrolled (static_ranges)" not in source, source
        assert "x_ref" not in source and "w_ref" not in source, source


def test_only_the_loop_over_the_empty_dimension_is_dropped():
    x, y = torch.randn(37, 0), torch.randn(37, 19)
    kernel = helion.kernel(empty_slices.two_inner_loops, backend="pallas", autotune_effort="none")
    torch.testing.assert_close(kernel(x, y), y + x.sum(-1)[:, None])
    bound = kernel.bind((x, y))
    source = bound.to_code(bound.config_spec.default_config())
    assert source.count("it runs no iteration") == 1, source
    assert source.count("jax.lax.fori_loop(") == 1, source  # the loop over y's 19 columns
    assert "x_ref" not in source and "y_ref" in source, source


def test_a_loop_with_run_time_bounds_reads_no_element_of_an_empty_tensor():
    x = torch.randn(37, 0)
    kernel = helion.kernel(empty_slices.row_sum_to, backend="pallas", autotune_effort="none")
    torch.testing.assert_close(kernel(x, 0), torch.zeros(37))
    bound = kernel.bind((x, 0))
    source = bound.to_code(bound.config_spec.default_config())
    assert "jax.lax.fori_loop(" in source, source  # the count is only known at run time
    assert "x_ref" not in source, source


# -- the code for the devices ------------------------------------------------------------------

_LOWERED = [
    (empty_slices.row_sum, lambda: (torch.randn(37, 0),)),
    (empty_slices.double_and_sum, lambda: (torch.randn(37, 0), torch.randn(37, 19))),
    (empty_slices.shift_into, lambda: (torch.randn(37, 6), torch.randn(37, 6))),
    (empty_slices.sums_3d, lambda: (torch.randn(11, 0, 100),)),
    (empty_slices.sums_3d, lambda: (torch.randn(37, 7, 0),)),
    (empty_slices.tiled_matmul, lambda: (torch.randn(37, 0), torch.randn(0, 45))),
    (empty_slices.two_inner_loops, lambda: (torch.randn(37, 0), torch.randn(37, 19))),
    (empty_slices.row_sum_to, lambda: (torch.randn(37, 0), 0)),
]


@pytest.mark.parametrize("index", range(len(_LOWERED)))
def test_gpu_code_lowers_through_triton(index):
    # Pallas' Triton lowering wants power-of-two blocks of at least one lane: the empty slice's
    # one lane, and no ref for the empty tensor
    fn, make_args = _LOWERED[index]
    bound = helion.kernel(fn, backend="pallas", autotune_effort="none").bind(make_args())
    spec = gpu_config_spec(bound)
    for config in [spec.default_config()] + [
        spec.random_config(random.Random(seed)) for seed in range(2)
    ]:
        assert "__gpu$xla.gpu.triton" in lower_for_platform(bound, config, "cuda")
