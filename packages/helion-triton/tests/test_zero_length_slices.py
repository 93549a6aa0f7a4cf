"""`:` slices of length 0 (`x[tile, :]` of a dimension of size 0, `x[tile, 2:2]`) on Triton.

Such a slice is held as one lane whose mask is `rindex < 0`: loads read `other` there, stores
write nothing, and reductions over it take torch's values (core folds them at trace time; amax
and the like raise `EmptyReduction`, as torch raises). Before, core refused these kernels at bind
(`ZeroLengthSlice`), since the lane was read and written without a mask (a segfault on the empty
tensor). The cases are core's conformance cases (`helion.testing.empty_slices`), run on CPU
through the interpreter and on CUDA where there is a GPU.
"""

from __future__ import annotations

import pytest
import torch

import helion
from helion.testing import empty_slices


@pytest.mark.filterwarnings("ignore:var\\(\\)")
@pytest.mark.parametrize("case", empty_slices.EMPTY_SLICE_CASES, ids=lambda case: case.id)
def test_empty_slice_cases(case, device):
    empty_slices.check_empty_slice_case(case, "triton", device=device)


def test_amax_over_the_empty_dimension_raises_as_torch_does(device):
    with pytest.raises(IndexError):
        torch.randn(37, 0, 5, device=device).amax(1)
    empty_slices.check_empty_reduction_raises("triton", device=device)


def test_the_lane_of_an_empty_slice_is_masked_off(device):
    x = torch.randn(37, 0, device=device)
    kernel = helion.kernel(empty_slices.row_sum, backend="triton", autotune_effort="none")
    torch.testing.assert_close(kernel(x), torch.zeros(37, device=device))
    bound = kernel.bind((x,))
    source = bound.to_code(bound.config_spec.default_config())
    assert "< 0" in source, source
