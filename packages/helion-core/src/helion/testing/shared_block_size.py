"""One ``hl.register_block_size`` shared by several tiles in scope at once: an outer and an inner
``hl.tile``, two dimensions of one ``hl.tile([m, n], block_size=[bs, bs])``, or three nested
loops.

Each tile has its own bounds, so its own mask, although an IR shape names only the block size
symbol. A backend that takes a dimension's mask from its block size, i.e. from the tile of that
block size bound last, masks the wrong lanes: an outer dimension left unmasked reads and writes
out of bounds in its last, partial tile; a reduction, scan, dot or index tensor over another
tile's dimension lets padded lanes in or drops valid ones. Silently: hence these cases, checked
against PyTorch on non-power-of-two shapes and exact multiples, under the default config, random
ones and a few fixed ones (see :func:`check_block_size_case`).
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Callable
from typing import Sequence

import torch

import helion.language as hl
from helion.testing import assert_same
from helion.testing import bind
from helion.testing import configs_to_try as testing_configs
from helion.testing import require_backend

__all__ = [
    "BLOCK_SIZE_CASES",
    "SEEDS",
    "BlockSizeCase",
    "check_block_size_case",
    "configs_to_try",
    "per_block",
]

# a block of 1 lane has no padded lanes to get wrong, and is slow in interpreters
MIN_BLOCK = 4
# random configs tried besides the default one
SEEDS = (0, 1, 2)


def per_block(x: torch.Tensor, bs: int, dim: int, fn: Callable) -> torch.Tensor:
    """``fn`` applied to each block of ``bs`` along ``dim`` (what one tile of a scan sees)."""
    return torch.cat([fn(part) for part in x.split(bs, dim)], dim)


# -- kernels ------------------------------------------------------------------------------------


def nested_scale(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    out = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            out[ti, tj] = x[ti, tj] * 2 + 1
    return out


def grid_2d_scale(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    out = torch.empty_like(x)
    for ti, tj in hl.tile([m, n], block_size=[bs, bs]):
        out[ti, tj] = x[ti, tj] * 2 + 1
    return out


def nested_tile_indices(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    out = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            out[ti, tj] = (ti.index[:, None] * 1000 + tj.index[None, :]).to(x.dtype)
    return out


def row_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # reductions over the INNER tile's dimension, of values whose padded lanes are not zero,
    # accumulated over the inner loop
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    sums = torch.empty([m], dtype=x.dtype, device=x.device)
    highs = torch.empty([m], dtype=x.dtype, device=x.device)
    lows = torch.empty([m], dtype=x.dtype, device=x.device)
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


def column_partials(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # reductions over the OUTER tile's dimension inside the inner loop: one row of partial
    # results per outer tile (their count depends on the block size)
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    tiles = (m + bs - 1) // bs
    sums = torch.empty([tiles, n], dtype=x.dtype, device=x.device)
    highs = torch.empty([tiles, n], dtype=x.dtype, device=x.device)
    lows = torch.empty([tiles, n], dtype=x.dtype, device=x.device)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            shifted = x[ti, tj] - 5.0
            sums[ti.id, tj] = shifted.sum(0)
            highs[ti.id, tj] = torch.amax(shifted, dim=0)
            lows[ti.id, tj] = shifted.amin(0)
    return sums, highs, lows


def grid_partials(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # reductions over each dimension of one 2-D grid tile
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    sums = torch.empty([(m + bs - 1) // bs, n], dtype=x.dtype, device=x.device)
    highs = torch.empty([m, (n + bs - 1) // bs], dtype=x.dtype, device=x.device)
    for ti, tj in hl.tile([m, n], block_size=[bs, bs]):
        shifted = x[ti, tj] - 5.0
        sums[ti.id, tj] = shifted.sum(0)
        highs[ti, tj.id] = shifted.amax(1)
    return sums, highs


def inner_grid_partials(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # reductions over each dimension of one 2-D inner tile loop
    b, m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    sums = torch.empty([b, (m + bs - 1) // bs, n], dtype=x.dtype, device=x.device)
    lows = torch.empty([b, m, (n + bs - 1) // bs], dtype=x.dtype, device=x.device)
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
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
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
    out = torch.empty([(m + bs - 1) // bs, n, w.size(1)], dtype=x.dtype, device=x.device)
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
    highs = torch.empty([tiles, n], dtype=x.dtype, device=x.device)
    sums = torch.empty([tiles, k], dtype=x.dtype, device=x.device)
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


def _add(a: Any, b: Any) -> Any:
    return a + b


def custom_combines(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # hl.reduce and a reverse hl.associative_scan along the outer tile's dimension
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    sums = torch.empty([(m + bs - 1) // bs, n], dtype=x.dtype, device=x.device)
    suffix = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            shifted = x[ti, tj] - 5.0
            sums[ti.id, tj] = hl.reduce(_add, shifted, dim=0)
            suffix[ti, tj] = hl.associative_scan(_add, shifted, dim=0, reverse=True)
    return sums, suffix


def three_levels(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a, b, c = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(a, b, c))
    out = torch.empty_like(x)
    high = torch.empty([a, b], dtype=x.dtype, device=x.device)
    sums = torch.empty([(a + bs - 1) // bs, b, c], dtype=x.dtype, device=x.device)
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
    out = torch.empty([m, d], dtype=x.dtype, device=x.device)
    sums = torch.empty([m], dtype=x.dtype, device=x.device)
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


# -- cases --------------------------------------------------------------------------------------

Tensors = tuple[torch.Tensor, ...]


@dataclasses.dataclass(frozen=True)
class BlockSizeCase:
    id: str
    fn: Callable[..., Any]  # a plain kernel function, compiled for each backend
    inputs: Callable[[], Tensors]  # fresh inputs on the CPU, the same on every call
    # what the kernel must return, from its inputs and the block size (every case has one,
    # Config.block_sizes[0]; results per tile depend on it)
    expected: Callable[[Tensors, int], Tensors]
    # maps the kernel's results to what is compared (partial results, one row per tile, summed
    # up), or None
    post: Callable[[Any], Tensors] | None = None
    # configs tried besides the default and random ones: overrides of the default config (keys
    # a backend does not have are dropped)
    extra_configs: tuple[dict[str, Any], ...] = ()


def _randn(*shapes: Sequence[int]) -> Callable[[], Tensors]:
    """Inputs of these shapes from a generator seeded by them: the same on every call."""
    seed = sum(size * 31**i for i, size in enumerate(s for shape in shapes for s in shape))

    def inputs() -> Tensors:
        generator = torch.Generator().manual_seed(seed)
        return tuple(torch.randn(*shape, generator=generator) for shape in shapes)

    return inputs


# normalizing lowers a block size to the largest the kernel takes: one tile covering each whole
# dimension, padded past the end of all but the largest
_ONE_TILE: dict[str, Any] = {"block_sizes": [2**20]}


def _case(
    fn: Callable[..., Any],
    shapes: Sequence[Sequence[int]],
    expected: Callable[..., Any],
    post: Callable[[Any], Any] | None = None,
    extra_configs: tuple[dict[str, Any], ...] = (),
) -> BlockSizeCase:
    """A case named after ``fn`` and its inputs' shapes; ``expected(*inputs, bs)``."""
    name = "-".join([fn.__name__, *("x".join(map(str, shape)) for shape in shapes)])
    return BlockSizeCase(
        name,
        fn,
        _randn(*shapes),
        lambda args, bs: _as_tuple(expected(*args, bs)),
        post,
        (_ONE_TILE, *extra_configs),
    )


def _as_tuple(value: Any) -> Tensors:
    return value if isinstance(value, tuple) else (value,)


def _tile_cumsums(x: torch.Tensor, bs: int) -> Tensors:
    shifted = x - 5.0
    return (
        per_block(shifted, bs, 0, lambda p: p.cumsum(0)),
        per_block(shifted, bs, 1, lambda p: p.cumsum(1)),
    )


def _outer_value(x: torch.Tensor, bias: torch.Tensor, bs: int) -> torch.Tensor:
    # `.sum(0)` of the outer tile counts its valid rows
    rows = torch.arange(x.size(0))
    valid = torch.clamp(x.size(0) - rows // bs * bs, max=bs).to(x.dtype)
    return x + (bias + 1.0)[:, None] + valid[:, None]


def _causal_prefix(x: torch.Tensor, w: torch.Tensor, bs: int) -> Tensors:
    m = x.size(0)
    ends = torch.clamp((torch.arange(m) // bs + 1) * bs, max=m)
    return torch.cumsum(x + 1.0, 0)[ends - 1], (w + 2.0).sum(1)


# (rows, cols): more columns, more rows, and sizes every power-of-two block up to 32 divides
_SHAPES = [(37, 50), (50, 37), (32, 64)]
# plus a larger exact multiple that is not a power of two
_MORE_SHAPES = [*_SHAPES, (64, 96)]

BLOCK_SIZE_CASES: list[BlockSizeCase] = [
    *(_case(nested_scale, [s], lambda x, bs: x * 2 + 1) for s in _MORE_SHAPES),
    *(_case(grid_2d_scale, [s], lambda x, bs: x * 2 + 1) for s in _MORE_SHAPES),
    *(
        _case(
            nested_tile_indices,
            [s],
            lambda x, bs: (
                torch.arange(x.size(0))[:, None] * 1000 + torch.arange(x.size(1))[None, :]
            ).to(x.dtype),
        )
        for s in [(37, 50), (50, 37)]
    ),
    *(
        _case(
            row_stats, [s], lambda x, bs: ((x + 3.0).sum(1), (x + 3.0).amax(1), (x + 3.0).amin(1))
        )
        for s in _MORE_SHAPES
    ),
    *(
        _case(
            column_partials,
            [s],
            lambda x, bs: ((x - 5.0).sum(0), (x - 5.0).amax(0), (x - 5.0).amin(0)),
            post=lambda r: (r[0].sum(0), r[1].amax(0), r[2].amin(0)),
        )
        for s in _MORE_SHAPES
    ),
    *(
        _case(
            grid_partials,
            [s],
            lambda x, bs: ((x - 5.0).sum(0), (x - 5.0).amax(1)),
            post=lambda r: (r[0].sum(0), r[1].amax(1)),
        )
        for s in _SHAPES
    ),
    *(
        _case(
            inner_grid_partials,
            [(2, *s)],
            lambda x, bs: ((x + 3.0).sum(1), (x + 3.0).amin(2)),
            post=lambda r: (r[0].sum(1), r[1].amin(2)),
        )
        for s in _SHAPES
    ),
    *(_case(tile_cumsums, [s], _tile_cumsums) for s in _SHAPES),
    *(_case(outer_value_in_inner_loop, [s, s[:1]], _outer_value) for s in _SHAPES),
    *(
        _case(shared_matmul, [(m, k), (k, n)], lambda x, y, bs: (x + 1.0) @ y)
        for m, k, n in [(37, 45, 50), (50, 21, 37), (32, 16, 64), (64, 32, 48)]
    ),
    *(
        _case(
            outer_contraction,
            [s, (s[0], 16)],
            lambda x, w, bs: (x + 1.0).T @ (w + 1.0),
            post=lambda r: r.sum(0),
        )
        for s in _SHAPES
    ),
    *(
        _case(
            looped_partials,
            [(m, 40), (n, 40)],
            lambda x, y, bs: (((x + 1.0) @ y.T - 2.0).amax(0), (x - 5.0).sum(0)),
            post=lambda r: (r[0].amax(0), r[1].sum(0)),
            # a chunk of k that divides it, one that leaves a partial chunk, and whole rows
            extra_configs=tuple({"reduction_loops": [chunk]} for chunk in (8, 16, None)),
        )
        for m, n in _SHAPES
    ),
    *(_case(gathered_tiles, [s], lambda x, bs: x * 2.0) for s in [(37, 50), (50, 37)]),
    # small: interpreters apply a user combiner element by element
    *(
        _case(
            custom_combines,
            [s],
            lambda x, bs: (
                (x - 5.0).sum(0),
                per_block(x - 5.0, bs, 0, lambda p: p.flip(0).cumsum(0).flip(0)),
            ),
            post=lambda r: (r[0].sum(0), r[1]),
        )
        for s in [(9, 13), (13, 9), (8, 16)]
    ),
    *(
        _case(
            three_levels,
            [s],
            lambda x, bs: (x - 1.0, (x * 3.0 - 7.0).amax(2), (x - 4.0).sum(0)),
            post=lambda r: (r[0], r[1], r[2].sum(0)),
        )
        for s in [(9, 13, 7), (13, 7, 9), (8, 16, 12)]
    ),
    # 90 rows end in a partial tile for every block size; of 96 rows, every tile of 16 or 32 is
    # full
    *(
        _case(
            causal_prefix,
            [(m, 24), (m, 64)],
            _causal_prefix,
            extra_configs=tuple({"block_sizes": [bs]} for bs in (16, 32)),
        )
        for m in (90, 96)
    ),
]


# -- the check ----------------------------------------------------------------------------------


def configs_to_try(bound: Any, case: BlockSizeCase, seeds: Sequence[int] = SEEDS) -> list[Any]:
    """The default config, random ones drawn with ``seeds`` and the case's extra configs."""
    return testing_configs(bound, seeds, case.extra_configs)


def check_block_size_case(
    case: BlockSizeCase,
    backend: str,
    *,
    device: str | torch.device = "cpu",
    seeds: Sequence[int] = SEEDS,
) -> None:
    """Run ``case`` on ``backend`` under each of :func:`configs_to_try` and compare with
    PyTorch. Raises AssertionError naming the case, backend, config and output; skips when
    the backend is missing."""
    require_backend(backend)
    inputs = case.inputs()
    args = tuple(arg.to(device) for arg in inputs)
    bound = bind(case.fn, backend, args)
    for config in configs_to_try(bound, case, seeds):
        result = bound.compile_config(config)(*(arg.clone() for arg in args))
        if case.post is not None:
            result = case.post(result)
        results = _as_tuple(result)
        wanted = case.expected(inputs, config.block_sizes[0])
        if len(results) != len(wanted):
            raise AssertionError(
                f"{case.id} on {backend!r}: {len(results)} outputs, not {len(wanted)}"
            )
        for i, (actual, want) in enumerate(zip(results, wanted, strict=True)):
            assert_same(actual, want, what=f"{case.id} on {backend!r} under {config!r}, output {i}")
