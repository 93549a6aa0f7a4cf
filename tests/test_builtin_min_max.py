"""Python's min() and max() in device code (hl._builtin_min / hl._builtin_max): over Python
numbers they are Python's; with a device value among the arguments (tile.begin + 2, a 0-D
reduction) they are elementwise. They raised TypeInferenceError on device values (found by
exploratory testing)."""

from __future__ import annotations

import pytest
import torch

import helion.language as hl
from helion.testing import kernel_for as _kernel

BACKENDS = ["ref", "triton", "pallas", "eager"]


def first_two_of_each_block(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.zeros_like(x)
    for tile in hl.tile(n, block_size=4):
        end = min(tile.begin + 2, n)  # a device scalar and a host int
        for inner in hl.tile(tile.begin, end):
            out[inner] = x[inner] + 1
    return out


def clamped_row_extremes(x: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m, 2], dtype=x.dtype, device=x.device)
    for tile in hl.tile(m):
        row = x[tile, :]
        out[tile, 0] = max(row.amax(1), 0.25, min(3, 4) * 0.0)  # device value and numbers
        out[tile, 1] = min([row.amin(1), row.mean(1), -0.5])  # an iterable, two device values
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_min_of_a_device_scalar_and_a_size_bounds_an_inner_loop(backend: str) -> None:
    kernel = _kernel(first_two_of_each_block, backend)
    x = torch.randn(11)
    expected = torch.zeros_like(x)
    for start in range(0, 11, 4):
        expected[start : start + 2] = x[start : start + 2] + 1
    torch.testing.assert_close(kernel(x), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_min_and_max_of_device_values_and_numbers_are_elementwise(backend: str) -> None:
    kernel = _kernel(clamped_row_extremes, backend)
    x = torch.randn(7, 19)
    expected = torch.stack(
        [
            x.amax(1).clamp(min=0.25),
            torch.minimum(torch.minimum(x.amin(1), x.mean(1)), torch.tensor(-0.5)),
        ],
        dim=1,
    )
    torch.testing.assert_close(kernel(x), expected)


def test_plain_python_min_and_max_keep_python_semantics() -> None:
    assert hl._builtin_min(3, 1, 2) == 1 and hl._builtin_max([3, 1, 2]) == 3
    with pytest.raises(ValueError):
        hl._builtin_min([])


def _clamp_in_a_helper(v):
    return max(v, 0.0)  # Python's max: only the kernel's own body is rewritten


def max_in_a_helper(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = _clamp_in_a_helper(x[tile])
    return out


def test_max_in_a_helper_function_names_itself_in_the_error() -> None:
    from helion import exc

    with pytest.raises(exc.TypeInferenceError, match=r"max\(\) / min\(\) in a helper function"):
        _kernel(max_in_a_helper, "ref")(torch.randn(37))
