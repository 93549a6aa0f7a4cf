"""One `hl.register_block_size` shared by several tiles in scope at once, on the Triton backend:
an outer and an inner `hl.tile`, two dimensions of one `hl.tile([m, n], block_size=[bs, bs])`,
or three nested loops.

Each tile has its own bounds, so its own mask, but an IR shape names only the block size symbol.
The code generator used to take a dimension's mask from its block size, i.e. from the tile of that
block bound last: a reduction, scan, dot or index tensor over another tile's dimension masked the
wrong lanes (padded lanes entered the result, or valid ones were dropped), silently; and a loop
`hl.tile(0, tm.end, block_size=bs)` looked up the bounds of `tm` by block size, found its own,
and recursed until Python gave up. Checked against PyTorch on fresh random inputs, non-power-of-two shapes and an exact multiple, under the
default config and random ones (with looped reductions where the kernel has a full slice).
"""

from __future__ import annotations

import random
import re

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

SEEDS = (0, 1, 2)
# (rows, cols): more columns, more rows, and sizes every power-of-two block up to 32 divides
SHAPES = [(37, 50), (50, 37), (32, 64)]
# a block of 1 lane has no padded lanes, and is slow in the interpreter
MIN_BLOCK = 4


def _configs(bound, extra: tuple = ()) -> list:
    spec = bound.config_spec
    return [spec.default_config(), *(spec.random_config(random.Random(s)) for s in SEEDS), *extra]


def _check(fn, args: tuple, want, post=None, configs=None) -> None:
    """Run `fn` under each config and compare with `want` (tensors, or a function of the block
    size giving them); `post` maps the kernel's result to what is compared (partial results per
    tile, whose count depends on the block size)."""
    bound = helion.kernel(fn, backend="triton").bind(args)
    for config in configs or _configs(bound):
        result = bound.compile_config(config)(*(a.clone() for a in args))
        if post is not None:
            result = post(result)
        expected = want(config.block_sizes[0]) if callable(want) else want
        results = result if isinstance(result, tuple) else (result,)
        wanted = expected if isinstance(expected, tuple) else (expected,)
        for actual, target in zip(results, wanted, strict=True):
            torch.testing.assert_close(
                actual, target, atol=1e-4, rtol=1e-4, msg=lambda m, c=config: f"{c!r}: {m}"
            )


def _per_block(x: torch.Tensor, bs: int, dim: int, fn) -> torch.Tensor:
    """`fn` applied to each block of `bs` along `dim` (what one tile of a scan sees)."""
    return torch.cat([fn(part) for part in x.split(bs, dim)], dim)


# -- kernels ----------------------------------------------------------------------------------


def column_partials(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # reductions over the OUTER tile's dimension inside the inner loop, of values whose padded
    # lanes are not zero: one row of partial results per outer tile
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    tiles = (m + bs - 1) // bs
    sums = torch.empty([tiles, n], dtype=x.dtype)
    highs = torch.empty([tiles, n], dtype=x.dtype)
    lows = torch.empty([tiles, n], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            shifted = x[ti, tj] - 5.0
            sums[ti.id, tj] = shifted.sum(0)
            highs[ti.id, tj] = torch.amax(shifted, dim=0)
            lows[ti.id, tj] = shifted.amin(0)
    return sums, highs, lows


def row_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # reductions over the INNER tile's dimension, accumulated over the inner loop
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    sums = torch.empty([m], dtype=x.dtype)
    highs = torch.empty([m], dtype=x.dtype)
    lows = torch.empty([m], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        total = hl.zeros([ti], dtype=torch.float32)
        high = hl.full([ti], float("-inf"), dtype=torch.float32)
        low = hl.full([ti], float("inf"), dtype=torch.float32)
        for tj in hl.tile(n, block_size=bs):
            shifted = x[ti, tj] + 3.0
            total = total + shifted.sum(1)
            high = torch.maximum(high, shifted.amax(1))
            low = torch.minimum(low, shifted.amin(1))
        sums[ti] = total
        highs[ti] = high
        lows[ti] = low
    return sums, highs, lows


def grid_partials(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # both dimensions of one 2-D grid tile share the block size
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    sums = torch.empty([(m + bs - 1) // bs, n], dtype=x.dtype)
    highs = torch.empty([m, (n + bs - 1) // bs], dtype=x.dtype)
    for ti, tj in hl.tile([m, n], block_size=[bs, bs]):
        shifted = x[ti, tj] - 5.0
        sums[ti.id, tj] = shifted.sum(0)
        highs[ti, tj.id] = shifted.amax(1)
    return sums, highs


def inner_grid_partials(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # both dimensions of one 2-D inner tile loop share the block size
    b, m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    sums = torch.empty([b, (m + bs - 1) // bs, n], dtype=x.dtype)
    lows = torch.empty([b, m, (n + bs - 1) // bs], dtype=x.dtype)
    for tb in hl.grid(b):
        for ti, tj in hl.tile([m, n], block_size=[bs, bs]):
            shifted = x[tb, ti, tj] + 3.0
            sums[tb, ti.id, tj] = shifted.sum(0)
            lows[tb, ti, tj.id] = shifted.amin(1)
    return sums, lows


def tile_cumsums(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # a scan along each tile's dimension inside the inner loop
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    down = torch.empty_like(x)
    across = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            shifted = x[ti, tj] - 5.0
            down[ti, tj] = torch.cumsum(shifted, dim=0)
            across[ti, tj] = torch.cumsum(shifted, dim=1)
    return down, across


def outer_value_in_inner_loop(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # a value of the outer tile, broadcast and reduced inside the inner loop
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
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
    bs = hl.register_block_size(MIN_BLOCK, max(m, n, k))
    out = torch.empty([m, n], dtype=x.dtype)
    for ti, tj in hl.tile([m, n], block_size=[bs, bs]):
        acc = hl.zeros([ti, tj], dtype=torch.float32)
        for tk in hl.tile(k, block_size=bs):
            acc = torch.addmm(acc, x[ti, tk] + 1.0, y[tk, tj])
        out[ti, tj] = acc
    return out


def outer_contraction(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # a product contracting the OUTER tile's dimension inside the inner loop, neither operand
    # zero-padded
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    out = torch.empty([(m + bs - 1) // bs, n, w.size(1)], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            out[ti.id, tj, :] = torch.matmul((x[ti, tj] + 1.0).T, w[ti, :] + 1.0)
    return out


def looped_partials(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # full slices of k (a looped reduction under `reduction_loops`): a reduction over the outer
    # tile of a value reduced over k, and one inside the loop over k's chunks
    m, k = x.shape
    n = y.size(0)
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    tiles = (m + bs - 1) // bs
    highs = torch.empty([tiles, n], dtype=x.dtype)
    sums = torch.empty([tiles, k], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            products = (x[ti, :] + 1.0)[:, None, :] * y[tj, :][None, :, :]
            highs[ti.id, tj] = (products.sum(2) - 2.0).amax(0)
            sums[ti.id, :] = (x[ti, :] - 5.0).sum(0)
    return highs, sums


def gathered_tiles(x: torch.Tensor) -> torch.Tensor:
    # a load indexed by index tensors made of both tiles' indices
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    out = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            out[ti, tj] = x[ti.index[:, None], tj.index[None, :]] * 2.0
    return out


def add(a, b):
    return a + b


def custom_combines(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # hl.reduce and a reverse hl.associative_scan along the outer tile's dimension
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    sums = torch.empty([(m + bs - 1) // bs, n], dtype=x.dtype)
    suffix = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            shifted = x[ti, tj] - 5.0
            sums[ti.id, tj] = hl.reduce(add, shifted, dim=0)
            suffix[ti, tj] = hl.associative_scan(add, shifted, dim=0, reverse=True)
    return sums, suffix


def three_levels(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a, b, c = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(a, b, c))
    out = torch.empty_like(x)
    high = torch.empty([a, b], dtype=x.dtype)
    sums = torch.empty([(a + bs - 1) // bs, b, c], dtype=x.dtype)
    for ti in hl.tile(a, block_size=bs):
        for tj in hl.tile(b, block_size=bs):
            acc = hl.full([ti, tj], float("-inf"), dtype=torch.float32)
            for tk in hl.tile(c, block_size=bs):
                v = x[ti, tj, tk]
                out[ti, tj, tk] = v - 1.0
                acc = torch.maximum(acc, (v * 3.0 - 7.0).amax(2))
                sums[ti.id, tj, tk] = (v - 4.0).sum(0)
            high[ti, tj] = acc
    return out, high, sums


def causal_prefix(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # inner loops of the outer tile's block size: one over a whole row, then one that ends at
    # the outer tile's end (full tiles, so unmasked, when the sizes are multiples of the block)
    m, d = x.size(0), hl.specialize(x.size(1))
    n = w.size(1)
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    out = torch.empty([m, d], dtype=x.dtype)
    sums = torch.empty([m], dtype=x.dtype)
    for tm in hl.tile(m, block_size=bs):
        total = hl.zeros([tm], dtype=torch.float32)
        for tk in hl.tile(n, block_size=bs):
            total = total + (w[tm, tk] + 2.0).sum(1)
        sums[tm] = total
        acc = hl.zeros([tm, d], dtype=torch.float32)
        for tn in hl.tile(0, tm.end, block_size=bs):
            acc = acc + (x[tn, :] + 1.0).sum(0)[None, :]
        out[tm, :] = acc
    return out, sums


def untraceable_dimension(x: torch.Tensor) -> torch.Tensor:
    # hl.zeros([ti, tj]) names the block size twice: which tile bounds which dim is lost
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    out = torch.zeros([(m + bs - 1) // bs, n], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            ones = hl.zeros([ti, tj], dtype=torch.float32) + 1.0
            out[ti.id, tj] = ones.sum(0)
    return out


# -- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_reductions_over_the_outer_dimension_inside_the_inner_loop(shape) -> None:
    x = torch.randn(*shape)
    shifted = x - 5.0
    _check(
        column_partials,
        (x,),
        (shifted.sum(0), shifted.amax(0), shifted.amin(0)),
        post=lambda r: (r[0].sum(0), r[1].amax(0), r[2].amin(0)),
    )


@pytest.mark.parametrize("shape", SHAPES)
def test_reductions_over_the_inner_dimension(shape) -> None:
    x = torch.randn(*shape)
    shifted = x + 3.0
    _check(row_stats, (x,), (shifted.sum(1), shifted.amax(1), shifted.amin(1)))


@pytest.mark.parametrize("shape", SHAPES)
def test_two_dimensions_of_one_grid_tile(shape) -> None:
    x = torch.randn(*shape)
    shifted = x - 5.0
    _check(
        grid_partials,
        (x,),
        (shifted.sum(0), shifted.amax(1)),
        post=lambda r: (r[0].sum(0), r[1].amax(1)),
    )


@pytest.mark.parametrize("shape", SHAPES)
def test_two_dimensions_of_one_inner_tile_loop(shape) -> None:
    x = torch.randn(2, *shape)
    shifted = x + 3.0
    _check(
        inner_grid_partials,
        (x,),
        (shifted.sum(1), shifted.amin(2)),
        post=lambda r: (r[0].sum(1), r[1].amin(2)),
    )


@pytest.mark.parametrize("shape", SHAPES)
def test_cumsum_along_each_tile(shape) -> None:
    x = torch.randn(*shape)
    shifted = x - 5.0
    _check(
        tile_cumsums,
        (x,),
        lambda bs: (
            _per_block(shifted, bs, 0, lambda p: p.cumsum(0)),
            _per_block(shifted, bs, 1, lambda p: p.cumsum(1)),
        ),
    )


@pytest.mark.parametrize("shape", SHAPES)
def test_outer_tile_value_reduced_inside_the_inner_loop(shape) -> None:
    x = torch.randn(*shape)
    bias = torch.randn(shape[0])
    rows = torch.arange(shape[0])

    def want(bs: int) -> torch.Tensor:
        # `.sum(0)` of the outer tile counts its valid rows
        valid = torch.clamp(shape[0] - rows // bs * bs, max=bs).to(x.dtype)
        return x + (bias + 1.0)[:, None] + valid[:, None]

    _check(outer_value_in_inner_loop, (x, bias), want)


@pytest.mark.parametrize("sizes", [(37, 45, 50), (50, 21, 37), (32, 16, 64)])
def test_matmul_with_one_block_size_for_m_n_and_k(sizes) -> None:
    m, k, n = sizes
    x = torch.randn(m, k)
    y = torch.randn(k, n)
    _check(shared_matmul, (x, y), (x + 1.0) @ y)


@pytest.mark.parametrize("shape", SHAPES)
def test_matmul_contracting_the_outer_tile(shape) -> None:
    x = torch.randn(*shape)
    w = torch.randn(shape[0], 16)
    _check(outer_contraction, (x, w), (x + 1.0).T @ (w + 1.0), post=lambda r: r.sum(0))


@pytest.mark.parametrize("shape", SHAPES)
def test_looped_reductions(shape) -> None:
    m, n = shape
    k = 40
    x = torch.randn(m, k)
    y = torch.randn(n, k)
    bound = helion.kernel(looped_partials, backend="triton").bind((x, y))
    default = bound.config_spec.default_config()
    # a chunk that divides k, one that leaves a partial chunk, and whole rows
    looped = tuple(helion.Config(**{**default, "reduction_loops": [c]}) for c in (8, 16, None))
    _check(
        looped_partials,
        (x, y),
        (((x + 1.0) @ y.T - 2.0).amax(0), (x - 5.0).sum(0)),
        post=lambda r: (r[0].amax(0), r[1].sum(0)),
        configs=_configs(bound, looped),
    )


@pytest.mark.parametrize("shape", [(37, 50), (50, 37)])
def test_index_tensors_of_both_tiles(shape) -> None:
    x = torch.randn(*shape)
    _check(gathered_tiles, (x,), x * 2.0)


@pytest.mark.parametrize("shape", [(9, 13), (13, 9), (8, 16)])
def test_custom_reduce_and_reverse_scan_along_the_outer_tile(shape) -> None:
    # small: the interpreter applies a user combiner element by element
    x = torch.randn(*shape)
    shifted = x - 5.0
    _check(
        custom_combines,
        (x,),
        lambda bs: (
            shifted.sum(0),
            _per_block(shifted, bs, 0, lambda p: p.flip(0).cumsum(0).flip(0)),
        ),
        post=lambda r: (r[0].sum(0), r[1]),
    )


@pytest.mark.parametrize("shape", [(9, 13, 7), (13, 7, 9), (8, 16, 12)])
def test_three_nested_loops(shape) -> None:
    x = torch.randn(*shape)
    _check(
        three_levels,
        (x,),
        (x - 1.0, (x * 3.0 - 7.0).amax(2), (x - 4.0).sum(0)),
        post=lambda r: (r[0], r[1], r[2].sum(0)),
    )


@pytest.mark.parametrize("m", [90, 96])
def test_loop_ending_at_the_outer_tile_end(m: int) -> None:
    x = torch.randn(m, 24)
    w = torch.randn(m, 64)
    prefix = torch.cumsum(x + 1.0, 0)

    def want(bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        ends = torch.clamp((torch.arange(m) // bs + 1) * bs, max=m)
        return prefix[ends - 1], (w + 2.0).sum(1)

    bound = helion.kernel(causal_prefix, backend="triton").bind((x, w))
    default = bound.config_spec.default_config()
    fixed = tuple(helion.Config(**{**default, "block_sizes": [bs]}) for bs in (16, 32))
    _check(causal_prefix, (x, w), want, configs=_configs(bound, fixed))
    # 96 rows of 64 columns: every tile of 16 is full, and no loop needs a mask
    masked = re.search(r"\bmask_\d+", bound.to_code(fixed[0])) is not None
    assert masked == (m % 16 != 0)


def test_untraceable_dimension_is_rejected_with_its_line() -> None:
    x = torch.randn(37, 50)
    bound = helion.kernel(untraceable_dimension, backend="triton").bind((x,))
    default = bound.config_spec.default_config()
    for bs in (4, 16, 32):  # every tile of 37 rows and 50 columns ends partial
        config = helion.Config(**{**default, "block_sizes": [bs]})
        with pytest.raises(exc.BackendUnsupported) as info:
            bound.compile_config(config)(x.clone())
        message = str(info.value)
        assert "reduce_sum" in message and "'triton'" in message, message
        assert "_BLOCK_SIZE_0" in message, message
        assert "out[ti.id, tj] = ones.sum(0)" in message, message
        assert info.value.loc is not None
        assert info.value.loc.filename.endswith("test_shared_block_size_triton.py")
