"""Masks of a dimension ``c * block`` on partial tiles: ``hl.arange(bk * 2)`` and
``torch.stack([lo, hi], dim=1).reshape(bk * 2, ...)``, as public Helion's int4 GEMM writes them.

Lane ``j`` of such a dimension is valid where lane ``j // c`` of the block's tile is. Before,
the Triton backend refused to mask it, so the int4 GEMM ran only for block sizes dividing K / 2.
The cases (`helion.testing.merged_dims`, shared with core's and Pallas' tests) are checked
against PyTorch on sizes whose last tile is partial, on the CPU and, where there is one, the
GPU; then what is Triton's own: the refusal of a block after another dimension, and the form
of small-K products of operands unpacked from 8 bits (a Triton 3.6 miscompile, see
`helion.passes.upcasts`)."""

from __future__ import annotations

import re

import pytest
import torch
from kernels import matmul

import helion
from helion import exc
from helion.testing import merged_dims
from helion.testing.merged_dims import int4_args
from helion.testing.merged_dims import int4_gemm_arange
from helion.testing.merged_dims import int4_gemm_sliced
from helion.testing.merged_dims import stacked_first


@pytest.mark.parametrize("case", merged_dims.MERGED_DIM_CASES, ids=lambda case: case.id)
def test_merged_dimension_cases_match_pytorch(
    case: merged_dims.MergedDimCase, device: torch.device
) -> None:
    merged_dims.check_merged_dim_case(case, "triton", device=device)


def _dot_lines(fn, args: tuple[torch.Tensor, ...], block_sizes: list[int]) -> list[str]:
    config = helion.Config(block_sizes=block_sizes)
    bound = helion.kernel(fn, backend="triton", config=config).bind(args)
    return [line.strip() for line in bound.to_triton_code(config).splitlines() if "tl.dot(" in line]


def test_a_small_k_dot_of_unpacked_int4_takes_exact_fma_products() -> None:
    """Triton's MMAv2 miscomputed a 16-bit dot on K below 32 whose operand was unpacked from
    int8 (int4_gemm_arange at bk=8 gave errors of 100+ on an H100, Triton 3.6): such a dot
    takes float32 FMA products instead; K of 32 keeps the default precision."""
    a, packed = int4_args(37, 23, 45)
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
    bound = helion.kernel(fn, backend="triton", config=config).bind(int4_args(37, 23, 45))
    (line,) = [ln for ln in bound.to_triton_code(config).splitlines() if "tl.sum(" in ln]
    assert re.search(r"tl\.sum\(rhs\w*\[None, :, :\] \* ", line), line


def test_a_small_k_dot_of_16_bit_loads_keeps_its_precision() -> None:
    x, y = torch.randn(37, 45).bfloat16(), torch.randn(45, 29).bfloat16()
    (line,) = _dot_lines(matmul, (x, y), [16, 16, 16])
    assert 'input_precision="ieee"' not in line


def test_a_block_after_another_dimension_is_refused_on_partial_tiles() -> None:
    x, y = torch.randn(23), torch.randn(23)
    kernel = helion.kernel(stacked_first, backend="triton", config=helion.Config(block_sizes=[8]))
    with pytest.raises(exc.BackendUnsupported, match="must be the leading dimension"):
        kernel(x, y)
    x, y = torch.randn(24), torch.randn(24)  # full tiles: nothing to mask, so it runs
    kernel = helion.kernel(stacked_first, backend="triton", config=helion.Config(block_sizes=[8]))
    torch.testing.assert_close(kernel(x, y), x + y)
