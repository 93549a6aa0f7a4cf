"""`hl.reduce` / `hl.associative_scan` (and `torch.cummax` / `cummin`) on the Triton backend:
generated combine functions, padded lanes, looped reductions (the carry is combined with the
user's combiner) and scans along a reduction dimension (always persistent), against the ref
backend with the same configs and against PyTorch, on non-power-of-two shapes.

On CPU this runs through the Triton interpreter, which applies a custom combiner element by
element in Python: the shapes are kept small.
"""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

# -- combiners -----------------------------------------------------------------------------------


def add(a, b):
    return a + b


def maximum(a, b):
    return torch.maximum(a, b)


def argmax_combine(value_a, index_a, value_b, index_b):
    take_b = (value_b > value_a) | ((value_b == value_a) & (index_b < index_a))
    return torch.where(take_b, value_b, value_a), torch.where(take_b, index_b, index_a)


def argmin_tuple_form(a, b):
    take_b = (b[0] < a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
    return torch.where(take_b, b[0], a[0]), torch.where(take_b, b[1], a[1])


def affine_combine(a_first, b_first, a_then, b_then):
    return a_first * a_then, a_then * b_first + b_then


def keep_left(a, b):
    return a


def bit_or(a, b):
    return a | b


def welford_combine(mean_a, m2_a, count_a, mean_b, m2_b, count_b):
    count = count_a + count_b
    weight_b = count_b / torch.clamp(count, min=1.0)
    delta = mean_b - mean_a
    return mean_a + delta * weight_b, m2_a + m2_b + delta * delta * count_a * weight_b, count


# -- kernels ---------------------------------------------------------------------------------------


def row_reductions(x: torch.Tensor):
    m, n = x.shape
    peak = torch.empty([m], dtype=x.dtype, device=x.device)
    argmax = torch.empty([m], dtype=torch.int64, device=x.device)
    argmin = torch.empty([m], dtype=torch.int64, device=x.device)
    kept = torch.empty([m, 1], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        peak[tile_m] = hl.reduce(maximum, row, dim=-1, other=float("-inf"))
        index = hl.arange(n, dtype=torch.int64)[None, :]
        _, argmax[tile_m] = hl.reduce(argmax_combine, (row, index), dim=1, other=(float("-inf"), 0))
        _, argmin[tile_m] = hl.reduce(
            argmin_tuple_form, (row, index), dim=1, other=(float("inf"), 0)
        )
        kept[tile_m, :] = hl.reduce(add, row, dim=1, keep_dims=True)
    return peak, argmax, argmin, kept


def welford(x: torch.Tensor):
    m, _n = x.shape
    var = torch.empty([m], dtype=torch.float32, device=x.device)
    mean = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        row_mean, m2, count = hl.reduce(
            welford_combine, (row, torch.zeros_like(row), torch.ones_like(row)), dim=1
        )
        var[tile_m] = m2 / count
        mean[tile_m] = row_mean
    return var, mean


def column_max(x: torch.Tensor) -> torch.Tensor:
    _m, n = x.shape
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tile_n in hl.tile(n):
        out[tile_n] = hl.reduce(maximum, x[:, tile_n], dim=0, other=float("-inf"))
    return out


def tiled_row_max(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        best = hl.full([tile_m], float("-inf"), dtype=x.dtype)
        for tile_n in hl.tile(n):
            part = hl.reduce(maximum, x[tile_m, tile_n], dim=1, other=float("-inf"))
            best = torch.maximum(best, part)
        out[tile_m] = best
    return out


def block_totals(x: torch.Tensor) -> torch.Tensor:
    m, _n = x.shape
    block = hl.register_block_size(m)
    partial = torch.zeros([helion.cdiv(m, block)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m, block_size=block):
        partial[tile_m.id] = hl.reduce(add, x[tile_m, :])
    return partial


def integer_reductions(flags: torch.Tensor, bits: torch.Tensor):
    m, _n = bits.shape
    any_set = torch.empty([m], dtype=torch.bool, device=bits.device)
    ored = torch.empty([m], dtype=bits.dtype, device=bits.device)
    for tile_m in hl.tile(m):
        any_set[tile_m] = hl.reduce(bit_or, flags[tile_m, :], dim=1, other=False)
        ored[tile_m] = hl.reduce(bit_or, bits[tile_m, :], dim=1)
    return any_set, ored


def row_scans(a: torch.Tensor, b: torch.Tensor):
    m, _n = b.shape
    forward = torch.empty_like(b)
    backward = torch.empty_like(b)
    last = torch.empty_like(b)
    for tile_m in hl.tile(m):
        _, forward[tile_m, :] = hl.associative_scan(
            affine_combine, (a[tile_m, :], b[tile_m, :]), dim=1
        )
        _, backward[tile_m, :] = hl.associative_scan(
            affine_combine, (a[tile_m, :], b[tile_m, :]), dim=1, reverse=True
        )
        last[tile_m, :] = hl.associative_scan(keep_left, b[tile_m, :], dim=1, reverse=True)
    return forward, backward, last


def column_scan(x: torch.Tensor) -> torch.Tensor:
    _m, n = x.shape
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[:, tile_n] = hl.associative_scan(maximum, x[:, tile_n], dim=0, reverse=True)
    return out


def torch_scans(x: torch.Tensor):
    m, _n = x.shape
    values = torch.empty_like(x)
    indices = torch.empty(x.shape, dtype=torch.int64, device=x.device)
    low = torch.empty_like(x)
    low_indices = torch.empty(x.shape, dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        values[tile_m, :], indices[tile_m, :] = torch.cummax(x[tile_m, :], dim=1)
        result = x[tile_m, :].cummin(1)
        low[tile_m, :], low_indices[tile_m, :] = result.values, result.indices
    return values, indices, low, low_indices


def sum_with_other(x: torch.Tensor) -> torch.Tensor:
    """`other` is not an identity here; with no padded lanes it must not matter."""
    m, _n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        out[tile_m] = hl.reduce(add, x[tile_m, :], dim=1, other=5.0)
    return out


# -- references --------------------------------------------------------------------------------------


def _recurrence(a: torch.Tensor, b: torch.Tensor, steps) -> torch.Tensor:
    h = torch.zeros_like(b[:, 0])
    out = torch.empty_like(b)
    for t in steps:
        h = a[:, t] * h + b[:, t]
        out[:, t] = h
    return out


def _or_rows(bits: torch.Tensor) -> torch.Tensor:
    result = bits[:, 0].clone()
    for j in range(1, bits.shape[1]):
        result |= bits[:, j]
    return result


def _tied_with_nan(m: int, n: int) -> torch.Tensor:
    x = torch.round(2 * torch.randn(m, n))
    x[1, n // 2] = float("nan")
    return x


CASES = {
    "row_reductions": (
        row_reductions,
        lambda x: (x.amax(1), x.argmax(1), x.argmin(1), x.sum(1, keepdim=True)),
        lambda: (torch.randn(5, 19) - 3,),  # below 0: padded lanes would win a max unless masked
    ),
    "welford": (
        welford,
        lambda x: torch.var_mean(x.float(), dim=1, correction=0),
        lambda: (10 + torch.randn(5, 27).half(),),
    ),
    "column_max": (column_max, lambda x: x.amax(0), lambda: (torch.randn(13, 10),)),
    "tiled_row_max": (tiled_row_max, lambda x: x.amax(1), lambda: (torch.randn(6, 21) - 5,)),
    "block_totals": (
        block_totals,
        None,  # compared with ref only: the partial sums depend on the block size
        lambda: (torch.randn(11, 7),),
    ),
    "integer_reductions": (
        integer_reductions,
        lambda flags, bits: (flags.any(1), _or_rows(bits)),
        lambda: (torch.rand(5, 11) < 0.05, torch.randint(0, 2**20, (5, 11), dtype=torch.int32)),
    ),
    "row_scans": (
        row_scans,
        lambda a, b: (
            _recurrence(a, b, range(b.shape[1])),
            _recurrence(a, b, reversed(range(b.shape[1]))),
            b[:, -1:].expand_as(b),
        ),
        lambda: (0.5 + 0.5 * torch.rand(4, 13), torch.randn(4, 13)),
    ),
    "column_scan": (
        column_scan,
        lambda x: x.flip(0).cummax(0).values.flip(0),
        lambda: (torch.randn(11, 6),),
    ),
    "torch_scans": (
        torch_scans,
        lambda x: (*torch.cummax(x, 1), *torch.cummin(x, 1)),
        lambda: (_tied_with_nan(4, 13),),
    ),
}


def _check(actual, expected) -> None:
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for a, e in zip(actual, expected, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, e.dtype, a.shape, e.shape)
        if e.dtype.is_floating_point:
            torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-4, equal_nan=True)
        else:
            torch.testing.assert_close(a, e, atol=0, rtol=0)


def _kernels(fn):
    triton = helion.kernel(fn, autotune_effort="none", backend="triton")
    ref = helion.kernel(fn, autotune_effort="none", backend="ref")
    return triton, ref


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_and_random_configs_match_ref_and_torch(name):
    fn, reference, make = CASES[name]
    torch.manual_seed(0)
    args = make()
    triton, ref = _kernels(fn)
    bound, ref_bound = triton.bind(args), ref.bind(args)
    spec = bound.config_spec
    configs = [spec.default_config()] + [
        spec.random_config(random.Random(seed)) for seed in range(2)
    ]
    for config in configs:
        actual = bound.compile_config(config)(*args)
        _check(actual, ref_bound.compile_config(config)(*args))
        if reference is not None:
            _check(actual, reference(*args))


@pytest.mark.parametrize("chunk", [4, 8, 16])
def test_looped_reduction_combines_the_chunks_with_the_combiner(chunk):
    x = 10 + torch.randn(5, 27)
    bound = helion.kernel(welford, autotune_effort="none", backend="triton").bind((x,))
    compiled = bound.compile_config(helion.Config(block_sizes=[4], reduction_loops=[chunk]))
    # the full chunks loop, the partial one follows (a combiner sees both)
    assert f"for roffset_1 in tl.range(0, {27 - 27 % chunk}, _RDIM_SIZE_1):" in compiled.source
    assert compiled.source.count("@triton.jit\ndef _helion_combine(") == 1
    _check(compiled(x), torch.var_mean(x, dim=1, correction=0))


@pytest.mark.parametrize("reduction_loops", [[None], [8]])
def test_the_carry_does_not_start_from_other(reduction_loops):
    x = torch.randn(6, 32)  # no padded lanes: `other` (not an identity) must never be combined
    bound = helion.kernel(sum_with_other, autotune_effort="none", backend="triton").bind((x,))
    compiled = bound.compile_config(helion.Config(block_sizes=[2], reduction_loops=reduction_loops))
    _check(compiled(x), x.sum(1))


def test_a_scan_along_a_reduction_dimension_stays_persistent():
    """A scan needs the whole dimension at once: the ConfigSpec offers no reduction loop."""
    a, b = 0.5 + 0.5 * torch.rand(3, 13), torch.randn(3, 13)
    bound = helion.kernel(row_scans, autotune_effort="none", backend="triton").bind((a, b))
    spec = bound.config_spec
    assert all(
        spec.random_config(random.Random(seed)).reduction_loops == [None] for seed in range(10)
    )
    with pytest.raises(exc.InvalidConfig, match=r"reduction_loops.*not one of \[None\]"):
        bound.compile_config(helion.Config(block_sizes=[4], reduction_loops=[4]))
    compiled = bound.compile_config(helion.Config(block_sizes=[4], reduction_loops=[None]))
    assert "roffset" not in compiled.source and "tl.associative_scan(" in compiled.source
    _check(compiled(a, b), CASES["row_scans"][1](a, b))


def test_generated_combine_functions():
    x = torch.randn(5, 19)
    bound = helion.kernel(row_reductions, autotune_effort="none", backend="triton").bind((x,))
    source = bound.compile_config(bound.config_spec.default_config()).source
    # one jit function per combiner, beside the kernel; tuple inputs reduce together
    assert source.count("@triton.jit\ndef _helion_combine") == 4
    assert "= tl.reduce((" in source
    assert "keep_dims=True" in source
    # padded lanes of the 19-wide rows take each input's `other`
    assert 'tl.full([], float("-inf"), tl.float32)' in source
