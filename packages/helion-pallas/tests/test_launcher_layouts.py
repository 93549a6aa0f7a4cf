"""Tensors torch calls contiguous whatever the strides of their size-1 (and size-0) dims: JAX
took such strides through DLPack as another layout and refused the call (a (16, 1) tensor of
strides (1, 16), the transpose of a row). The launcher hands JAX row-major strides of the same
memory, and outputs still land in the caller's tensors; tile loops over nothing do nothing."""

from __future__ import annotations

import pallas_features as f
import pytest
import torch
from pallas_kernels import CASES_BY_NAME
from pallas_testing import assert_same
from pallas_testing import pallas_kernel

from helion_pallas.launcher import to_jax


def _odd_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> torch.Tensor:
    numel = 1
    for size in shape:
        numel *= size
    tensor = torch.randn(max(numel, 1)).as_strided(shape, strides)
    assert tensor.is_contiguous()  # torch ignores the strides of size-1 dims
    return tensor


_LAYOUTS = [
    ((16, 1), (1, 16)),  # torch.randn(1, 16).t()
    ((1, 16), (64, 1)),
    ((3, 1, 4), (4, 100, 1)),
    ((1, 1), (7, 3)),
]


@pytest.mark.parametrize("shape, strides", _LAYOUTS)
def test_inputs_with_any_strides_on_size_one_dims(shape, strides):
    x, y = _odd_strides(shape, strides), _odd_strides(shape, strides)
    assert_same(pallas_kernel(CASES_BY_NAME["add"].fn)(x, y), x + y)


def test_the_transposed_row_of_the_report():
    x, y = torch.randn(1, 16).t(), torch.randn(1, 16).t()
    assert x.stride() == (1, 16)
    assert_same(pallas_kernel(CASES_BY_NAME["add"].fn)(x, y), x + y)


@pytest.mark.parametrize("shape, strides", _LAYOUTS)
def test_in_place_output_with_such_strides_is_the_callers_tensor(shape, strides):
    x = _odd_strides(shape, strides)
    expected = x * 2
    result = pallas_kernel(f.in_place_double)(x)
    assert result is x and x.stride() == strides
    assert_same(x, expected)


def test_to_jax_shares_the_memory_of_such_a_tensor():
    tensor = torch.zeros(1, 16).t()
    array = to_jax(tensor)
    assert array.shape == (16, 1)
    tensor[5, 0] = 7.0  # a view, not a copy
    assert float(array[5, 0]) == 7.0


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0)])
def test_tile_loop_over_an_empty_dimension_does_nothing(shape):
    x = torch.empty(shape)
    assert pallas_kernel(f.in_place_double)(x) is x
    result = pallas_kernel(CASES_BY_NAME["add"].fn)(x, x)
    assert result.shape == shape


def test_empty_tensor_transposed():
    # size 0: every stride is contiguous to torch
    x, y = torch.empty(0, 3).t(), torch.empty(0, 3).t()
    assert x.is_contiguous() and x.stride() == (1, 3)
    assert pallas_kernel(CASES_BY_NAME["add"].fn)(x, y).shape == (3, 0)
