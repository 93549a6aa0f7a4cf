"""Masks of a loop whose end is another tile's end (``hl.tile(0, tile_m.end)``, causal attention).

The loop runs on full tiles when the enclosing tile's block size and the size it tiles are
multiples of the inner block size; the code generator then drops the inner tile's mask (and
the tensor-descriptor loads that need a bound known at the kernel's start become possible).
Every other case keeps the mask. Both are checked against PyTorch on the interpreter."""

from __future__ import annotations

import random
import re

import pytest
import torch

import helion
import helion.language as hl


def causal_prefix_sum(x: torch.Tensor) -> torch.Tensor:
    """out[i, :] = sum of x[j, :] over j <= tile_m.end - 1, the rows up to the end of i's tile."""
    m, d = x.size(0), hl.specialize(x.size(1))
    out = torch.empty([m, d], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, d], dtype=torch.float32)
        for tile_n in hl.tile(0, tile_m.end):
            rows = x[tile_n, :].to(torch.float32)
            acc = acc + rows.sum(dim=0)[None, :]
        out[tile_m, :] = acc
    return out


def _reference(x: torch.Tensor, block_m: int) -> torch.Tensor:
    m = x.size(0)
    ends = torch.clamp((torch.arange(m) // block_m + 1) * block_m, max=m)
    prefix = torch.cumsum(x.float(), dim=0)
    return prefix[ends - 1]


def _run(m: int, block_m: int, block_n: int) -> tuple[str, torch.Tensor, torch.Tensor]:
    x = torch.randn(m, 24)
    kernel = helion.kernel(causal_prefix_sum, backend="triton")
    bound = kernel.bind((x,))
    config = helion.Config(block_sizes=[block_m, block_n])
    got = bound.compile_config(config)(x)
    return bound.to_triton_code(config), got, _reference(x, block_m)


def _inner_loop_masked(source: str) -> bool:
    """Does the key loop define a mask of its tile's lanes (`mask_N = indices_N < end`)?"""
    return re.search(r"\bmask_\d+ = ", source[source.index("for offset_") :]) is not None


def test_full_tiles_need_no_mask() -> None:
    source, got, want = _run(96, 32, 16)
    assert not _inner_loop_masked(source), source
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("m", "block_m", "block_n"),
    [(90, 32, 16), (96, 16, 32), (37, 16, 16)],
    ids=["size-not-a-multiple", "outer-block-smaller", "odd-size"],
)
def test_partial_tiles_keep_the_mask(m: int, block_m: int, block_n: int) -> None:
    source, got, want = _run(m, block_m, block_n)
    assert _inner_loop_masked(source), source
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_random_block_sizes_match_torch() -> None:
    rng = random.Random(20261204)
    for _ in range(6):
        m = rng.choice([48, 64, 77, 96, 100])
        block_m, block_n = rng.choice([16, 32, 64]), rng.choice([8, 16, 32])
        _, got, want = _run(m, block_m, block_n)
        torch.testing.assert_close(
            got, want, atol=1e-4, rtol=1e-4, msg=f"{m=} {block_m=} {block_n=}"
        )


def test_static_shapes_false_one_config_across_sizes():
    # one bound kernel and one config; each size gets its own code (full tiles or masked)
    kernel = helion.kernel(
        causal_prefix_sum,
        backend="triton",
        static_shapes=False,
        config=helion.Config(block_sizes=[32, 16]),
    )
    for rows in (96, 90, 128):
        x = torch.randn(rows, 24)
        torch.testing.assert_close(kernel(x), _reference(x, 32), atol=1e-4, rtol=1e-4)
    assert len(kernel._bound) == 1
