"""Masks of a dimension ``c * block`` on partial tiles: ``hl.arange(bk * 2)`` and
``torch.stack([lo, hi], dim=1).reshape(bk * 2, ...)``, as public Helion's int4 GEMM writes them.

Lane ``j`` of such a dimension is valid where lane ``j // c`` of the block's tile is. Before,
the Triton backend refused to mask it, so the int4 GEMM ran only for block sizes dividing K / 2.
Checked against PyTorch and the ref backend on sizes whose last tile is partial."""

from __future__ import annotations

import random
import re

import pytest
import torch
from kernels import matmul

import helion
import helion.language as hl
from helion import exc


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


def interleave(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.empty([2 * n], dtype=x.dtype, device=x.device)
    for tile in hl.tile(n):
        pairs = torch.stack([x[tile], y[tile]], dim=1).reshape(tile.block_size * 2)
        out[tile.begin * 2 + hl.arange(tile.block_size * 2)] = pairs
    return out


def stacked_first(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tile in hl.tile(n):
        both = torch.stack([x[tile], y[tile]], dim=0).reshape(tile.block_size * 2)
        halves = both.reshape(2, tile.block_size)
        out[tile] = halves.sum(0)
    return out


def _int4_args(m: int, half_k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.randn(m, 2 * half_k).bfloat16()
    w = torch.randint(-8, 8, (2 * half_k, n), dtype=torch.int32)
    packed = ((w[1::2] & 0xF) << 4) | (w[0::2] & 0xF)
    return a, packed.to(torch.uint8).view(torch.int8)


def _int4_reference(a: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    p = packed.to(torch.int32)
    w = torch.stack([(p << 28) >> 28, p >> 4], dim=1).reshape(-1, packed.size(1))
    return (a.float() @ w.float()).bfloat16()


@pytest.mark.parametrize("fn", [int4_gemm_sliced, int4_gemm_arange])
@pytest.mark.parametrize("bk", [4, 8, 16, 32])
def test_int4_gemm_as_public_helion_writes_it(fn, bk: int, device: torch.device) -> None:
    a, packed = _int4_args(37, 23, 45)  # K / 2 = 23: every bk leaves a partial last tile
    a, packed = a.to(device), packed.to(device)
    kernel = helion.kernel(
        fn, backend="triton", config=helion.Config(block_sizes=[bk, 16, 16]), dot_precision="ieee"
    )
    torch.testing.assert_close(
        kernel(a, packed).float(), _int4_reference(a, packed).float(), atol=2e-2, rtol=2e-2
    )


@pytest.mark.parametrize("fn", [int4_gemm_sliced, int4_gemm_arange])
def test_int4_gemm_random_configs_match_ref(fn, device: torch.device) -> None:
    a, packed = _int4_args(29, 19, 33)
    a, packed = a.to(device), packed.to(device)
    probe = helion.kernel(fn, backend="triton")
    spec = probe.bind((a, packed)).config_spec
    rng = random.Random(5)
    ref = helion.kernel(fn, backend="ref", autotune_effort="none")
    for _ in range(4):
        config = spec.random_config(rng)
        kernel = helion.kernel(fn, backend="triton", config=config, dot_precision="ieee")
        torch.testing.assert_close(
            kernel(a, packed).float(), ref(a, packed).float(), atol=2e-2, rtol=2e-2
        )


def _dot_lines(fn, args: tuple[torch.Tensor, ...], block_sizes: list[int]) -> list[str]:
    config = helion.Config(block_sizes=block_sizes)
    bound = helion.kernel(fn, backend="triton", config=config).bind(args)
    return [line.strip() for line in bound.to_triton_code(config).splitlines() if "tl.dot(" in line]


def test_a_small_k_dot_of_unpacked_int4_takes_exact_fma_products() -> None:
    """Triton's MMAv2 miscomputed a 16-bit dot on K below 32 whose operand was unpacked from
    int8 (int4_gemm_arange at bk=8 gave errors of 100+ on an H100, Triton 3.6): such a dot
    takes float32 FMA products instead; K of 32 keeps the default precision."""
    a, packed = _int4_args(37, 23, 45)
    (small_k,) = _dot_lines(int4_gemm_arange, (a, packed), [8, 16, 16])  # K = 2 * 8
    assert 'input_precision="ieee"' in small_k
    (large_k,) = _dot_lines(int4_gemm_arange, (a, packed), [16, 16, 16])
    assert 'input_precision="tf32"' in large_k


@pytest.mark.parametrize("fn", [int4_gemm_sliced, int4_gemm_arange])
def test_a_multiply_and_sum_of_unpacked_int4_is_not_written_as_triton_turns_into_a_dot(fn) -> None:
    """Triton rewrites ``sum(lhs[:, :, None] * rhs[None, :, :], 1)`` into a dot, which went as
    wrong at K = 8 (bk=4, H100, Triton 3.6) for an operand unpacked from int8; the product of
    such operands puts rhs first, a form it leaves alone."""
    config = helion.Config(block_sizes=[4, 16, 16])
    bound = helion.kernel(fn, backend="triton", config=config).bind(_int4_args(37, 23, 45))
    (line,) = [ln for ln in bound.to_triton_code(config).splitlines() if "tl.sum(" in ln]
    assert re.search(r"tl\.sum\(rhs\w*\[None, :, :\] \* ", line), line


def test_a_small_k_dot_of_16_bit_loads_keeps_its_precision() -> None:
    x, y = torch.randn(37, 45).bfloat16(), torch.randn(45, 29).bfloat16()
    (line,) = _dot_lines(matmul, (x, y), [16, 16, 16])
    assert 'input_precision="ieee"' not in line


@pytest.mark.parametrize("block", [4, 8, 16])
def test_interleave_stores_the_valid_lanes_of_a_merged_dimension(
    block: int, device: torch.device
) -> None:
    x, y = torch.randn(23, device=device), torch.randn(23, device=device)
    kernel = helion.kernel(interleave, backend="triton", config=helion.Config(block_sizes=[block]))
    torch.testing.assert_close(kernel(x, y), torch.stack([x, y], dim=1).reshape(-1))


def test_a_block_after_another_dimension_is_refused_on_partial_tiles() -> None:
    x, y = torch.randn(23), torch.randn(23)
    kernel = helion.kernel(stacked_first, backend="triton", config=helion.Config(block_sizes=[8]))
    with pytest.raises(exc.BackendUnsupported, match="must be the leading dimension"):
        kernel(x, y)
    x, y = torch.randn(24), torch.randn(24)  # full tiles: nothing to mask, so it runs
    kernel = helion.kernel(stacked_first, backend="triton", config=helion.Config(block_sizes=[8]))
    torch.testing.assert_close(kernel(x, y), x + y)


def weighted_count(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tile in hl.tile(n):
        # padded lanes hold 1 and 2 (not 0): only the merged mask keeps them out of the sum
        ones, twos = x[tile] * 0 + 1, y[tile] * 0 + 2
        pairs = torch.stack([ones, twos], dim=1).reshape(tile.block_size * 2)
        hl.atomic_add(out, [0], pairs.sum())
    return out


@pytest.mark.parametrize("block", [4, 8, 16])
def test_a_sum_over_a_merged_dimension_skips_padded_lanes(block: int, device: torch.device) -> None:
    x, y = torch.randn(23, device=device), torch.randn(23, device=device)
    kernel = helion.kernel(
        weighted_count, backend="triton", config=helion.Config(block_sizes=[block])
    )
    torch.testing.assert_close(kernel(x, y), torch.tensor([69.0], device=device))
