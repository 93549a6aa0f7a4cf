"""One `hl.register_block_size` shared by several tiles in scope at once: an outer and an inner
`hl.tile`, two dimensions of one `hl.tile([m, n], block_size=[bs, bs])`, or three nested loops.

Each tile has its own bounds, so its own mask, although the IR shapes name only the shared block
size symbol. Masking every dimension by the innermost tile left the outer dimension unmasked: its
last, partial tile read and wrote out of bounds and the results were silently wrong. Checked
against PyTorch on non-power-of-two (and exact-multiple) shapes, under the default and random
configs.
"""

from __future__ import annotations

import pytest
import torch
from pallas_testing import assert_same
from pallas_testing import clone
from pallas_testing import configs
from pallas_testing import pallas_kernel

import helion.language as hl
from helion import exc

SEEDS = (0, 1, 2)
# (rows, cols): more rows, fewer rows, and sizes every power-of-two block up to 32 divides
SHAPES = [(37, 50), (50, 37), (64, 96)]


def _check_configs(fn, args: tuple, expected: torch.Tensor | tuple, post=None) -> None:
    """Run `fn` under the default config and random ones; `post` maps its result to what is
    compared (for outputs whose shape depends on the block size)."""
    bound = pallas_kernel(fn).bind(args)
    for config in configs(bound, SEEDS):
        result = bound.compile_config(config)(*clone(args))
        if post is not None:
            result = post(result)
        results = result if isinstance(result, tuple) else (result,)
        wanted = expected if isinstance(expected, tuple) else (expected,)
        for actual, want in zip(results, wanted, strict=True):
            try:
                assert_same(actual, want)
            except AssertionError as error:
                raise AssertionError(f"{fn.__name__} under {config!r}: {error}") from None


# -- kernels ----------------------------------------------------------------------------------


def nested_scale(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    out = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            out[ti, tj] = x[ti, tj] * 2 + 1
    return out


def grid_2d_scale(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    out = torch.empty_like(x)
    for ti, tj in hl.tile([m, n], block_size=[bs, bs]):
        out[ti, tj] = x[ti, tj] * 2 + 1
    return out


def nested_tile_indices(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    out = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            out[ti, tj] = (ti.index[:, None] * 1000 + tj.index[None, :]).to(x.dtype)
    return out


def row_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # reductions over the inner tile's dimension, of values whose padded lanes are not zero
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    sums = torch.empty([m], dtype=x.dtype)
    lows = torch.empty([m], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        total = hl.zeros([ti], dtype=torch.float32)
        low = hl.full([ti], float("inf"), dtype=torch.float32)
        for tj in hl.tile(n, block_size=bs):
            shifted = x[ti, tj] + 3.0
            total = total + shifted.sum(1)
            low = torch.minimum(low, shifted.amin(1))
        sums[ti] = total
        lows[ti] = low
    return sums, lows


def column_partials(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # reductions over the OUTER tile's dimension inside the inner loop: one row of partial
    # results per outer tile (their count depends on the block size)
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    tiles = (m + bs - 1) // bs
    sums = torch.empty([tiles, n], dtype=x.dtype)
    highs = torch.empty([tiles, n], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            shifted = x[ti, tj] - 5.0
            sums[ti.id, tj] = shifted.sum(0)
            highs[ti.id, tj] = shifted.amax(0)
    return sums, highs


def outer_value_in_inner_loop(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # a value of the outer tile, broadcast and reduced inside the inner loop
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    out = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        b = bias[ti] + 1.0
        for tj in hl.tile(n, block_size=bs):
            out[ti, tj] = x[ti, tj] + b[:, None] + (b * 0.0 + 1.0).sum(0)
    return out


def shared_matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # one block size for m, n and the contracted k; the left operand is not zero-padded
    m, k = x.shape
    _, n = y.shape
    bs = hl.register_block_size(max(m, n, k))
    out = torch.empty([m, n], dtype=x.dtype)
    for ti, tj in hl.tile([m, n], block_size=[bs, bs]):
        acc = hl.zeros([ti, tj], dtype=torch.float32)
        for tk in hl.tile(k, block_size=bs):
            acc = torch.addmm(acc, x[ti, tk] + 1.0, y[tk, tj])
        out[ti, tj] = acc
    return out


def three_levels(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a, b, c = x.shape
    bs = hl.register_block_size(max(a, b, c))
    out = torch.empty_like(x)
    high = torch.empty([a, b], dtype=x.dtype)
    for ti in hl.tile(a, block_size=bs):
        for tj in hl.tile(b, block_size=bs):
            acc = hl.full([ti, tj], float("-inf"), dtype=torch.float32)
            for tk in hl.tile(c, block_size=bs):
                v = x[ti, tj, tk]
                out[ti, tj, tk] = v - 1.0
                acc = torch.maximum(acc, (v * 3.0 - 7.0).amax(2))
            high[ti, tj] = acc
    return out, high


def untraceable_dimension(x: torch.Tensor) -> torch.Tensor:
    # hl.zeros([ti, tj]) names the block size twice: which tile bounds which dim is lost
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    tiles = (m + bs - 1) // bs
    out = torch.zeros([tiles, n], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            ones = hl.zeros([ti, tj], dtype=torch.float32) + 1.0
            out[ti.id, tj] = ones.sum(0)
    return out


# -- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_outer_and_inner_loop_share_a_block_size(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    _check_configs(nested_scale, (x,), x * 2 + 1)


@pytest.mark.parametrize("shape", SHAPES)
def test_two_dims_of_one_tile_share_a_block_size(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    _check_configs(grid_2d_scale, (x,), x * 2 + 1)


@pytest.mark.parametrize("shape", [(37, 50), (50, 37)])
def test_tile_indices_of_both_loops(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    m, n = shape
    expected = (torch.arange(m)[:, None] * 1000 + torch.arange(n)[None, :]).to(x.dtype)
    _check_configs(nested_tile_indices, (x,), expected)


@pytest.mark.parametrize("shape", SHAPES)
def test_reductions_over_the_inner_dimension(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    shifted = x + 3.0
    _check_configs(row_stats, (x,), (shifted.sum(1), shifted.amin(1)))


@pytest.mark.parametrize("shape", SHAPES)
def test_reductions_over_the_outer_dimension_inside_the_inner_loop(
    shape: tuple[int, int],
) -> None:
    x = torch.randn(*shape)
    shifted = x - 5.0
    _check_configs(
        column_partials,
        (x,),
        (shifted.sum(0), shifted.amax(0)),
        post=lambda r: (r[0].sum(0), r[1].amax(0)),
    )


@pytest.mark.parametrize("shape", [(37, 50), (50, 37)])
def test_outer_tile_value_inside_the_inner_loop(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    bias = torch.randn(shape[0])
    bound = pallas_kernel(outer_value_in_inner_loop).bind((x, bias))
    rows = torch.arange(shape[0])
    for config in configs(bound, SEEDS):
        bs = config.block_sizes[0]
        # `.sum(0)` of the outer tile counts its valid rows
        valid = torch.clamp(shape[0] - rows // bs * bs, max=bs).to(x.dtype)
        expected = x + (bias + 1.0)[:, None] + valid[:, None]
        assert_same(bound.compile_config(config)(x.clone(), bias.clone()), expected)


@pytest.mark.parametrize("sizes", [(37, 45, 50), (50, 21, 37), (64, 32, 48)])
def test_matmul_with_one_block_size_for_m_n_and_k(sizes: tuple[int, int, int]) -> None:
    m, k, n = sizes
    x = torch.randn(m, k)
    y = torch.randn(k, n)
    _check_configs(shared_matmul, (x, y), (x + 1.0) @ y)


@pytest.mark.parametrize("shape", [(9, 13, 7), (13, 7, 9), (8, 16, 12)])
def test_three_nested_loops_share_a_block_size(shape: tuple[int, int, int]) -> None:
    x = torch.randn(*shape)
    _check_configs(three_levels, (x,), (x - 1.0, (x * 3.0 - 7.0).amax(2)))


def test_untraceable_dimension_is_rejected_with_its_line() -> None:
    x = torch.randn(37, 50)
    bound = pallas_kernel(untraceable_dimension).bind((x,))
    for config in configs(bound, SEEDS):
        with pytest.raises(exc.BackendUnsupported) as info:
            bound.compile_config(config)(x.clone())
        message = str(info.value)
        assert "reduce_sum" in message and "'pallas'" in message, message
        assert "_BLOCK_SIZE_0" in message, message
        assert "out[ti.id, tj] = ones.sum(0)" in message, message
        assert info.value.loc is not None
        assert info.value.loc.filename.endswith("test_shared_block_size.py")
