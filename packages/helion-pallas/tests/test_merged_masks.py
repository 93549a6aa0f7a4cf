"""A dimension ``c * block`` on partial tiles (``hl.arange(tile.block_size * 2)``,
``hl.zeros([bk * 2])``, ``torch.stack([lo, hi], dim=1).reshape(bk * 2, n)``): lane ``j`` is
valid where lane ``j // c`` of the tile is.

Before, Pallas held such a dimension as always full: a sum over it counted the padded lanes of
a partial last tile (48 where 46 was right); and it had no ``torch.stack`` nor a reshape that
merges a tile dimension, so public Helion's int4 GEMM did not run. The cases
(`helion.testing.merged_dims`, shared with core's and Triton's tests) are checked against
PyTorch on sizes whose last tile is partial, and lowered for the GPU through Pallas' Triton
lowering (which the small-K dots of int4 GEMM get float32 FMA products on, as on Triton)."""

from __future__ import annotations

import random

import pytest
import sympy
import torch
from pallas_testing import gpu_config_spec
from pallas_testing import lower_for_platform
from pallas_testing import pallas_kernel

import helion
import helion.language as hl
from helion import exc
from helion.testing import merged_dims
from helion_pallas.codegen import generate_source
from helion_pallas.lowerings import reshape_supported
from helion_pallas.tunables import PallasOptions


@pytest.mark.parametrize("case", merged_dims.MERGED_DIM_CASES, ids=lambda case: case.id)
def test_merged_dimension_cases_match_pytorch(case: merged_dims.MergedDimCase) -> None:
    merged_dims.check_merged_dim_case(case, "pallas")


@pytest.mark.parametrize("case", merged_dims.MERGED_DIM_CASES, ids=lambda case: case.id)
def test_merged_dimension_cases_lower_for_the_gpu(case: merged_dims.MergedDimCase) -> None:
    bound = pallas_kernel(case.fn).bind(case.inputs())
    spec = gpu_config_spec(bound)
    for config in (spec.default_config(), spec.random_config(random.Random(0))):
        assert "__gpu$xla.gpu.triton" in lower_for_platform(bound, config, "cuda")


def _gpu_dot_lines(block_sizes: list[int]) -> list[str]:
    bound = pallas_kernel(merged_dims.int4_gemm_arange).bind(merged_dims.int4_args(37, 23, 45))
    config = bound.normalize(helion.Config(block_sizes=block_sizes))
    source, _, _ = generate_source(bound.ir, PallasOptions.parse(config, "gpu"))
    return [line for line in source.splitlines() if "jnp.dot(" in line]


def test_a_small_k_dot_of_unpacked_int4_takes_exact_products_on_the_gpu() -> None:
    """K = 2 * 8 below 32, an operand unpacked from int8: float32 at HIGHEST precision, which
    Pallas' Triton lowering makes FMA products (helion.passes.upcasts); K = 32 keeps bf16."""
    (small_k,) = _gpu_dot_lines([8, 16, 16])
    assert "precision=jax.lax.Precision.HIGHEST" in small_k
    (large_k,) = _gpu_dot_lines([16, 16, 16])
    assert "Precision.HIGHEST" not in large_k


def test_a_reshape_with_a_padded_dim_after_another_is_refused() -> None:
    kernel = helion.kernel(
        merged_dims.stacked_first, backend="pallas", config=helion.Config(block_sizes=[8])
    )
    with pytest.raises(exc.BackendUnsupported, match=r"(?s)reshape \[2, .*only padded dim is"):
        kernel(torch.randn(23), torch.randn(23))


def three_way_sums(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.empty([n, 3], dtype=x.dtype, device=x.device)
    total = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tile in hl.tile(n):
        rows = torch.stack([x[tile], y[tile], z[tile]], dim=1)  # 3 held in 4 lanes
        out[tile, :] = rows
        hl.atomic_add(total, [0], (rows * 0 + 1).sum(1).sum())
    return out, total


@pytest.mark.parametrize("block", [4, 8])
def test_a_stack_of_three_matches_pytorch_and_counts_its_lanes(block: int) -> None:
    x, y, z = torch.randn(23), torch.randn(23), torch.randn(23)
    kernel = helion.kernel(
        three_way_sums, backend="pallas", config=helion.Config(block_sizes=[block])
    )
    rows, total = kernel(x, y, z)
    torch.testing.assert_close(rows, torch.stack([x, y, z], dim=1))
    torch.testing.assert_close(total, torch.tensor([69.0]))


def tile_area_count(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tm, tn in hl.tile([m, n]):
        cells = hl.zeros([tm.block_size * tn.block_size], dtype=torch.float32) + 1.0
        hl.atomic_add(out, [0], cells.sum())
    return out


def test_a_dimension_of_two_block_sizes_on_partial_tiles_is_refused() -> None:
    kernel = helion.kernel(
        tile_area_count, backend="pallas", config=helion.Config(block_sizes=[8, 8])
    )
    with pytest.raises(exc.BackendUnsupported, match="masking the dimension"):
        kernel(torch.randn(21, 13))
    kernel = helion.kernel(
        tile_area_count, backend="pallas", config=helion.Config(block_sizes=[8, 8])
    )
    # tiles that divide the ranges: nothing to mask, so it runs
    torch.testing.assert_close(kernel(torch.randn(16, 24)), torch.tensor([384.0]))


_B, _N = sympy.symbols("_BLOCK_SIZE_0 _BLOCK_SIZE_1", positive=True, integer=True)


@pytest.mark.parametrize(
    "in_shape, out_shape, exact",
    [
        ((2, 8), (4, 4), True),  # nothing padded: any regrouping
        ((_B, 2, _N), (2 * _B, _N), True),  # the padded dim leads its run
        ((2 * _B,), (_B, 2), True),
        ((_B, 4, 2), (4 * _B, 2), True),
        ((3, 2), (6,), True),  # 3 in 4 lanes, then 6 in 8: the padding stays at the end
        ((_B, 1, _N), (_B, _N), True),
        ((2, _B), (2 * _B,), False),  # padding inside the merged dim
        ((2 * _B,), (2, _B), False),
        ((2, 3), (6,), False),
        ((_B, 3), (3 * _B,), False),
        ((_B, _N), (_B * _N,), False),
        ((4, 6), (6, 4), False),
    ],
)
def test_which_reshapes_of_padded_arrays_are_exact(in_shape, out_shape, exact: bool) -> None:
    assert reshape_supported(in_shape, out_shape) is exact
