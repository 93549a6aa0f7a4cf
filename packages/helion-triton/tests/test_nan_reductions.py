"""Max-like reductions and scans return NaN as torch does.

`tl.max`, `tl.min`, `tl.argmax` and `tl.maximum` drop NaN lanes; torch's `amax`, `amin`,
`max(dim)`, `argmax`, `argmin`, `cummax` and `cummin` treat NaN as beating every number (the
first NaN's index for the arg reductions). Rows hold NaN at random places, several NaNs, NaN
next to +-inf, and no NaN at all (with ties, where the first index wins); whole rows at once and
in chunks (`reduction_loops`), over shapes that are not powers of two.
"""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl

NAN, INF = float("nan"), float("inf")


def row_extrema(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    m = x.size(0)
    hi = torch.empty([m], dtype=x.dtype, device=x.device)
    lo = torch.empty([m], dtype=x.dtype, device=x.device)
    hi_at = torch.empty([m], dtype=torch.int64, device=x.device)
    lo_at = torch.empty([m], dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        hi[tile_m] = torch.amax(row, dim=1)
        lo[tile_m] = torch.amin(row, dim=1)
        hi_at[tile_m] = torch.argmax(row, dim=1)
        lo_at[tile_m] = torch.argmin(row, dim=1)
    return hi, lo, hi_at, lo_at


def max_with_index(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m = x.size(0)
    values = torch.empty([m, 1], dtype=x.dtype, device=x.device)
    indices = torch.empty([m, 1], dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        best = torch.max(x[tile_m, :], dim=1, keepdim=True)
        values[tile_m, :] = best.values
        indices[tile_m, :] = best.indices
    return values, indices


def running_extrema(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hi, lo = torch.empty_like(x), torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        row = x[tile_m, :]
        hi[tile_m, :] = torch.cummax(row, dim=1).values
        lo[tile_m, :] = torch.cummin(row, dim=1).values
    return hi, lo


def _rows(m: int, n: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Random rows with NaN, +-inf and ties placed by ``seed``; every kind of row appears."""
    rng = random.Random(seed)
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(seed))
    for row in range(m):
        kind = row % 6
        if kind == 0:  # one NaN
            x[row, rng.randrange(n)] = NAN
        elif kind == 1:  # several NaNs, and infinities beside them
            for _ in range(3):
                x[row, rng.randrange(n)] = NAN
            x[row, rng.randrange(n)] = INF
            x[row, rng.randrange(n)] = -INF
        elif kind == 2:  # a NaN in the last lane (the padded chunk's edge)
            x[row, n - 1] = NAN
        elif kind == 3:  # ties for the max and the min: the first index wins
            x[row] = x[row].round()
        elif kind == 4:  # infinities only at the ends, no NaN
            x[row, 0], x[row, n - 1] = INF, -INF
        # kind 5: plain numbers
    return x.to(dtype)


def _configs(kernel, args, count: int) -> list[helion.Config]:
    bound = kernel.bind(args)
    spec = bound.config_spec
    configs = [spec.default_config()]
    configs += [spec.random_config(random.Random(seed)) for seed in range(count)]
    return bound, configs


def _assert_same(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("shape", [(13, 37), (6, 100)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_amax_amin_argmax_argmin_return_nan(shape, dtype):
    m, n = shape
    x = _rows(m, n, seed=n + m, dtype=dtype)
    kernel = helion.kernel(row_extrema, backend="triton")
    expected = (x.amax(1), x.amin(1), x.argmax(1), x.argmin(1))
    bound, configs = _configs(kernel, (x,), 6)
    # chunks that divide the row and chunks that do not
    configs += [helion.Config(block_sizes=[4], reduction_loops=[chunk]) for chunk in (4, 16, 32)]
    for config in configs:
        actual = bound.compile_config(config)(x)
        for name, a, e in zip(("amax", "amin", "argmax", "argmin"), actual, expected, strict=True):
            _assert_same(a, e, f"{name} under {config}")


def test_max_with_indices_returns_the_first_nan():
    x = _rows(11, 45, seed=3)
    kernel = helion.kernel(max_with_index, backend="triton")
    best = x.max(1, keepdim=True)
    bound, configs = _configs(kernel, (x,), 4)
    configs.append(helion.Config(block_sizes=[2], reduction_loops=[8]))
    for config in configs:
        values, indices = bound.compile_config(config)(x)
        _assert_same(values, best.values, f"values under {config}")
        _assert_same(indices, best.indices, f"indices under {config}")


def test_cummax_cummin_carry_nan_forward():
    x = _rows(9, 29, seed=5)
    kernel = helion.kernel(running_extrema, backend="triton")
    bound, configs = _configs(kernel, (x,), 4)
    for config in configs:
        hi, lo = bound.compile_config(config)(x)
        _assert_same(hi, x.cummax(1).values, f"cummax under {config}")
        _assert_same(lo, x.cummin(1).values, f"cummin under {config}")


def test_integer_reductions_are_unchanged():
    x = torch.randint(-50, 50, (7, 23), dtype=torch.int32)
    hi, lo, hi_at, lo_at = helion.kernel(row_extrema, backend="triton")(x)
    _assert_same(hi, x.amax(1), "amax")
    _assert_same(lo, x.amin(1), "amin")
    _assert_same(hi_at, x.argmax(1), "argmax")
    _assert_same(lo_at, x.argmin(1), "argmin")


def test_the_generated_code_propagates_nan_for_floats_only():
    x = torch.randn(5, 19)
    code = (
        helion.kernel(row_extrema, backend="triton")
        .bind((x,))
        .to_code(helion.Config(block_sizes=[4]))
    )
    assert "propagate_nan=tl.PropagateNan.ALL" in code
    assert "_helion_argmax_combine" in code and "_helion_argmin_combine" in code
    ints = torch.randint(0, 9, (5, 19), dtype=torch.int32)
    code = (
        helion.kernel(row_extrema, backend="triton")
        .bind((ints,))
        .to_code(helion.Config(block_sizes=[4]))
    )
    assert "PropagateNan" not in code and "tl.argmax(" in code
