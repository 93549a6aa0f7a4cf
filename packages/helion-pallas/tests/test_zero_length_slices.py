"""`:` slices of length 0 (`x[tile, :]` of a dimension of size 0, `x[tile, 2:2]`) on Pallas.

An access with such a slice addresses no element: its lowering touches no memory (a load is
zeros, as a load with every lane masked off would give; a store writes nothing), its tensor gets
no ref from it, and the slice's one lane has the mask `valid_0` (all false). Reductions over it
take torch's values (core folds them at trace time; amax and the like raise `EmptyReduction`, as
torch raises). Before, core refused these kernels at bind (`ZeroLengthSlice`): JAX cannot cut
the one-lane window from an empty dimension. Each kernel runs in interpret mode under its default
config and random ones, on fresh random inputs of sizes that are not powers of two, against
PyTorch; the code for NVIDIA GPUs is lowered through Pallas' Triton lowering without the device.
"""

from __future__ import annotations

import random
from typing import Callable

import pytest
import torch
from pallas_testing import gpu_config_spec
from pallas_testing import lower_for_platform

import helion
import helion.language as hl
from helion import exc

RANDOM_CONFIGS = 4


def _configs(bound) -> list[helion.Config]:
    spec = bound.config_spec
    return [spec.default_config()] + [
        spec.random_config(random.Random(seed)) for seed in range(RANDOM_CONFIGS)
    ]


def _check_all_configs(fn: Callable, args: tuple, expected: object):
    kernel = helion.kernel(fn, backend="pallas", autotune_effort="none")
    bound = kernel.bind(args)
    assert any(
        item[0] == "full" and item[2] == 0
        for node in bound.ir.walk()
        if node.op.memory
        for item in node.attrs["items"]
    ), "the kernel should hold a slice of length 0"
    expected = expected if isinstance(expected, tuple) else (expected,)
    for config in _configs(bound):
        fresh = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        actual = bound.compile_config(config)(*fresh)
        actual = actual if isinstance(actual, tuple) else (actual,)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert a.shape == e.shape and a.dtype == e.dtype, (config, a.shape, e.shape)
            torch.testing.assert_close(a, e, equal_nan=True, msg=lambda m, c=config: f"{c}: {m}")


# -- reductions over the empty dimension ------------------------------------------------------


def _rows(x: torch.Tensor, reduce: Callable) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = reduce(x[tile, :]).to(torch.float32)
    return out


_REDUCTIONS = {
    "sum": lambda row: row.sum(-1),
    "prod": lambda row: row.prod(-1),
    "mean": lambda row: row.mean(-1),
    "var": lambda row: row.var(-1),
    "logsumexp": lambda row: torch.logsumexp(row, -1),
    "softmax_then_sum": lambda row: torch.softmax(row, -1).sum(-1),
}


@pytest.mark.filterwarnings("ignore:var\\(\\)")
@pytest.mark.parametrize("name", sorted(_REDUCTIONS))
@pytest.mark.parametrize("rows", [37, 5])
def test_reduction_over_an_empty_dimension_matches_torch(name, rows):
    reduce = _REDUCTIONS[name]
    x = torch.randn(rows, 0)
    _check_all_configs(_rows, (x, reduce), reduce(x).float())


def _row_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile, :].sum(-1)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_row_sum_of_an_empty_dimension_keeps_the_dtype(dtype):
    x = torch.randint(-5, 5, (37, 0)).to(dtype)
    _check_all_configs(_row_sum, (x,), x.sum(-1).to(dtype))


def _any_all(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    any_out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    all_out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        any_out[tile] = row.any(-1)
        all_out[tile] = row.all(-1)
    return any_out, all_out


def test_any_and_all_of_an_empty_dimension():
    x = torch.rand(37, 0) < 0.5
    _check_all_configs(_any_all, (x,), (x.any(-1), x.all(-1)))


def _amax_last(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(1)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :, :].amax(-1)
    return out


def _amax_middle(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(2)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :, :].amax(1)
    return out


def test_amax_over_the_empty_dimension_raises_as_torch_does():
    x = torch.randn(37, 0, 5)
    # over the non-empty dimension: an empty result, which runs
    _check_all_configs(_amax_last, (x,), x.amax(-1))
    # over the empty one torch raises, and so does the kernel, with its line
    with pytest.raises(IndexError):
        x.amax(1)
    kernel = helion.kernel(_amax_middle, backend="pallas", autotune_effort="none")
    with pytest.raises(exc.EmptyReduction) as info:
        kernel(x)
    assert info.value.loc is not None and ".amax(1)" in info.value.loc.line()


# -- loads and stores of an (n, 0) slice ------------------------------------------------------


def _double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :] * 2
    return out


def test_elementwise_load_and_store_of_an_empty_slice():
    x = torch.randn(37, 0)
    _check_all_configs(_double, (x,), x * 2)


def _double_and_sum(
    x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    doubled = torch.empty_like(x)
    sums = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    y_plus = torch.empty_like(y)
    for tile in hl.tile(x.size(0)):
        doubled[tile, :] = x[tile, :] * 2
        sums[tile] = x[tile, :].sum(-1) + y[tile, :].sum(-1)
        y_plus[tile, :] = y[tile, :] + x[tile, :].mean(-1)[:, None]
    return doubled, sums, y_plus


def test_an_empty_slice_beside_a_real_one():
    x, y = torch.randn(37, 0), torch.randn(37, 19)
    expected = (x * 2, x.sum(-1) + y.sum(-1), y + x.mean(-1)[:, None])
    _check_all_configs(_double_and_sum, (x, y), expected)


def _shift_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        out[tile, 2:2] = x[tile, 2:2] + 1  # writes nothing
        out[tile, 3] = x[tile, 3:3].sum(-1) + x[tile, 2:3].sum(-1)
    return out


def test_an_empty_slice_of_a_non_empty_dimension_writes_nothing():
    # the lane of x[tile, 2:2] is x[:, 2]: stored without its mask it would change out[:, 2]
    x = torch.randn(37, 6)
    out = torch.randn(37, 6)
    expected = out.clone()
    expected[:, 3] = x[:, 2]
    _check_all_configs(_shift_into, (x, out), expected)


# -- three dimensions --------------------------------------------------------------------------


def _sums_3d(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    last = torch.empty([x.size(0), x.size(1)], dtype=x.dtype, device=x.device)
    middle = torch.empty([x.size(0), x.size(2)], dtype=x.dtype, device=x.device)
    both = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        block = x[tile, :, :]
        last[tile, :] = block.sum(-1)
        middle[tile, :] = block.sum(1) * 3
        both[tile] = block.sum(-1).sum(-1)
    return last, middle, both


@pytest.mark.parametrize("shape", [(37, 0, 5), (11, 0, 100), (37, 7, 0), (5, 0, 0)])
def test_3d_reductions_with_an_empty_dimension(shape):
    x = torch.randn(shape)
    expected = (x.sum(-1), x.sum(1) * 3, x.sum(-1).sum(-1))
    _check_all_configs(_sums_3d, (x,), expected)


def _scale_3d(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_b, tile_m in hl.tile([x.size(0), x.size(1)]):
        out[tile_b, tile_m, :] = torch.relu(x[tile_b, tile_m, :]) + 1
    return out


def test_3d_elementwise_with_an_empty_last_dimension():
    x = torch.randn(3, 37, 0)
    _check_all_configs(_scale_3d, (x,), torch.relu(x) + 1)


def test_the_example_kernel_of_the_task():
    x = torch.randn(37, 0)
    kernel = helion.kernel(_row_sum, backend="pallas", autotune_effort="none")
    torch.testing.assert_close(kernel(x), torch.zeros(37))
    source = kernel.bind((x,)).to_code(kernel.bind((x,)).config_spec.default_config())
    assert "valid_0 = jnp.arange(1, dtype=jnp.int32) < 0" in source, source
    assert "load = jnp.zeros((64, 1), dtype=jnp.float32)" in source, source
    assert "x_ref" not in source, source  # x is not passed: nothing reads it


# -- the code for the devices ------------------------------------------------------------------

_LOWERED = [
    (_row_sum, lambda: (torch.randn(37, 0),)),
    (_double_and_sum, lambda: (torch.randn(37, 0), torch.randn(37, 19))),
    (_shift_into, lambda: (torch.randn(37, 6), torch.randn(37, 6))),
    (_sums_3d, lambda: (torch.randn(11, 0, 100),)),
    (_sums_3d, lambda: (torch.randn(37, 7, 0),)),
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
