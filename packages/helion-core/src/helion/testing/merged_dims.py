"""A dimension ``c * block`` (an int times one block size) on partial tiles:
``hl.arange(tile.block_size * 2)`` after ``tile.begin * 2``, ``hl.zeros([bk * 2])``, or
``torch.stack([lo, hi], dim=1).reshape(bk * 2, n)``, as public Helion's int4 GEMM writes them.

Such a dimension holds ``c`` lanes per lane of the tile, so lane ``j`` is valid where lane
``j // c`` of the tile is. A backend that holds it as always full counts the padded lanes of a
partial last tile in a sum, or stores them out of bounds, silently: hence these cases, whose
padded lanes hold non-zero values, checked against PyTorch on sizes every block size leaves a
partial last tile of, under the default config, random ones and fixed block sizes
(see :func:`check_merged_dim_case`).
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
from helion.testing import configs_to_try
from helion.testing import require_backend

__all__ = [
    "MERGED_DIM_CASES",
    "SEEDS",
    "MergedDimCase",
    "check_merged_dim_case",
    "int4_args",
    "int4_gemm_arange",
    "int4_gemm_sliced",
    "int4_reference",
    "stacked_first",
]

# random configs tried besides the default one and the case's fixed block sizes
SEEDS = (0, 1)

# -- kernels ------------------------------------------------------------------------------------


def count_pair_lanes(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tile in hl.tile(n // 2):
        # every lane holds 1, the padded ones too: only the mask keeps them out of the sum
        ones = hl.zeros([tile.block_size * 2], dtype=torch.float32) + 1.0
        hl.atomic_add(out, [0], ones.sum())
    return out


def gathered_pair_lanes(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tile in hl.tile(n // 2):
        lanes = x[tile.begin * 2 + hl.arange(tile.block_size * 2)] * 0 + 1  # padded lanes: 1
        hl.atomic_add(out, [0], lanes.sum())
    return out


def negative_pair_max(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.full([1], float("-inf"), dtype=torch.float32, device=x.device)
    for tile in hl.tile(n // 2):
        # x < -1 everywhere: padded lanes (read as 0) would win an unmasked max
        pairs = x[tile.begin * 2 + hl.arange(tile.block_size * 2)]
        hl.atomic_max(out, [0], pairs.amax())
    return out


def split_pair_sums(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    (n,) = x.shape
    sums = torch.empty([n // 2], dtype=x.dtype, device=x.device)
    best = torch.full([1], float("-inf"), dtype=torch.float32, device=x.device)
    for tile in hl.tile(n // 2):
        # split back into [tile, 2]: the tile's padded rows (read as 0) would win the max
        pairs = x[tile.begin * 2 + hl.arange(tile.block_size * 2)].reshape(tile.block_size, 2)
        sums[tile] = pairs.sum(1)
        hl.atomic_max(best, [0], pairs.sum(1).amax())
    return sums, best


def interleave(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.empty([2 * n], dtype=x.dtype, device=x.device)
    for tile in hl.tile(n):
        pairs = torch.stack([x[tile], y[tile]], dim=1).reshape(tile.block_size * 2)
        out[tile.begin * 2 + hl.arange(tile.block_size * 2)] = pairs
    return out


def weighted_count(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tile in hl.tile(n):
        # padded lanes hold 1 and 2 (not 0): only the merged mask keeps them out of the sum
        ones, twos = x[tile] * 0 + 1, y[tile] * 0 + 2
        pairs = torch.stack([ones, twos], dim=1).reshape(tile.block_size * 2)
        hl.atomic_add(out, [0], pairs.sum())
    return out


def stacked_first(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Not a case: the stack on ``dim=0`` puts the block after the 2 in the merged dimension,
    so a partial tile's padding lands inside it (lanes ``B..2B`` are ``y``'s). Backends that
    hold tiles padded refuse it where tiles may be partial; on full tiles it is ``x + y``."""
    (n,) = x.shape
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tile in hl.tile(n):
        both = torch.stack([x[tile], y[tile]], dim=0).reshape(tile.block_size * 2)
        halves = both.reshape(2, tile.block_size)
        out[tile] = halves.sum(0)
    return out


def int4_gemm_sliced(a: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    m, _ = a.shape
    half_k, n = packed.shape
    bk = hl.register_block_size(half_k)
    out = torch.empty([m, n], dtype=torch.bfloat16, device=a.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(half_k, block_size=bk):
            start = tk.begin * 2
            lhs = a[tm, start : start + bk * 2].to(torch.float32)
            b = packed[tk, tn]
            lo = ((b << 4) >> 4).to(torch.int8)
            hi = b >> 4
            rhs = torch.stack([lo, hi], dim=1).reshape(tk.block_size * 2, tn.block_size)
            acc = torch.addmm(acc, lhs, rhs.to(torch.float32))
        out[tm, tn] = acc.to(torch.bfloat16)
    return out


def int4_gemm_arange(a: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    m, _ = a.shape
    half_k, n = packed.shape
    bk = hl.register_block_size(half_k)
    out = torch.empty([m, n], dtype=torch.bfloat16, device=a.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(half_k, block_size=bk):
            b = packed[tk, tn]
            rhs = torch.stack([(b << 4) >> 4, b >> 4], dim=1).reshape(bk * 2, tn)
            lhs = a[tm, tk.begin * 2 + hl.arange(bk * 2)]
            acc = hl.dot(lhs, rhs.to(torch.bfloat16), acc=acc)
        out[tm, tn] = acc.to(torch.bfloat16)
    return out


def int4_args(m: int, half_k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 activations ``[m, 2 * half_k]`` and int4 weights packed two a byte along K."""
    a = torch.randn(m, 2 * half_k).bfloat16()
    w = torch.randint(-8, 8, (2 * half_k, n), dtype=torch.int32)
    packed = ((w[1::2] & 0xF) << 4) | (w[0::2] & 0xF)
    return a, packed.to(torch.uint8).view(torch.int8)


def int4_reference(a: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    p = packed.to(torch.int32)
    w = torch.stack([(p << 28) >> 28, p >> 4], dim=1).reshape(-1, packed.size(1))
    return (a.float() @ w.float().to(a.device)).bfloat16()


# -- cases --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MergedDimCase:
    """A kernel with a merged dimension, its inputs (CPU tensors), what PyTorch computes from
    them, and the block sizes tried besides the default and random configs (each leaves a
    partial last tile)."""

    id: str
    fn: Callable[..., Any]
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    expected: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]
    block_sizes: tuple[tuple[int, ...], ...]
    tolerance: float = 0.0
    # the ops a backend must have beyond hl.arange / hl.zeros of such sizes
    needs_stack: bool = False


def _pairs(n: int) -> Callable[[], tuple[torch.Tensor, ...]]:
    return lambda: (torch.randn(2 * n),)


def _two(n: int) -> Callable[[], tuple[torch.Tensor, ...]]:
    return lambda: (torch.randn(n), torch.randn(n))


def _int4(m: int, half_k: int, n: int) -> Callable[[], tuple[torch.Tensor, ...]]:
    return lambda: int4_args(m, half_k, n)


def _count(x: torch.Tensor) -> torch.Tensor:
    return torch.tensor([float(x.numel())], device=x.device)


MERGED_DIM_CASES: list[MergedDimCase] = [
    *(
        MergedDimCase(f"{fn.__name__}-{2 * n}", fn, _pairs(n), _count, ((4,), (8,), (16,)))
        for fn in (count_pair_lanes, gathered_pair_lanes)
        for n in (23, 37)
    ),
    MergedDimCase(
        "negative_pair_max-46",
        negative_pair_max,
        lambda: (-(torch.randn(46).abs() + 1),),
        lambda x: x.amax().reshape(1),
        ((4,), (8,), (16,)),
    ),
    MergedDimCase(
        "split_pair_sums-46",
        split_pair_sums,
        lambda: (-(torch.randn(46).abs() + 1),),
        lambda x: (x.reshape(-1, 2).sum(1), x.reshape(-1, 2).sum(1).amax().reshape(1)),
        ((4,), (8,), (16,)),
    ),
    MergedDimCase(
        "interleave-23",
        interleave,
        _two(23),
        lambda x, y: torch.stack([x, y], dim=1).reshape(-1),
        ((4,), (8,), (16,)),
        needs_stack=True,
    ),
    MergedDimCase(
        "weighted_count-23",
        weighted_count,
        _two(23),
        lambda x, y: torch.tensor([3.0 * x.numel()], device=x.device),
        ((4,), (8,), (16,)),
        needs_stack=True,
    ),
    *(
        MergedDimCase(
            f"{fn.__name__}-37x46x45",  # K / 2 = 23: every bk leaves a partial last tile
            fn,
            _int4(37, 23, 45),
            int4_reference,
            ((4, 16, 16), (8, 16, 16), (16, 16, 16), (32, 16, 16)),
            tolerance=2e-2,
            needs_stack=True,
        )
        for fn in (int4_gemm_sliced, int4_gemm_arange)
    ),
]


# -- the check ----------------------------------------------------------------------------------


def check_merged_dim_case(
    case: MergedDimCase,
    backend: str,
    *,
    device: str | torch.device = "cpu",
    seeds: Sequence[int] = SEEDS,
) -> None:
    """Run ``case`` on ``backend`` under its default config, random ones drawn with ``seeds``
    and its fixed block sizes, and compare with PyTorch. Raises AssertionError naming the case,
    backend and config on a wrong result; skips when the backend is missing. A backend that
    cannot compile the case raises its error (``helion.exc.BackendUnsupported``)."""
    require_backend(backend)
    args = tuple(arg.to(device) for arg in case.inputs())
    bound = bind(case.fn, backend, args)
    configs = configs_to_try(bound, seeds, [{"block_sizes": list(s)} for s in case.block_sizes])
    wanted = case.expected(*args)
    wanted = wanted if isinstance(wanted, tuple) else (wanted,)
    for config in configs:
        result = bound.compile_config(config)(*(arg.clone() for arg in args))
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(wanted):
            raise AssertionError(
                f"{case.id} on {backend!r}: {len(results)} outputs, not {len(wanted)}"
            )
        for i, (actual, want) in enumerate(zip(results, wanted, strict=True)):
            assert_same(
                actual.float(),
                want.float(),
                atol=case.tolerance,
                rtol=case.tolerance,
                what=f"{case.id} on {backend!r} under {config!r}, output {i}",
            )
