"""Regressions of the Pallas lowering, each against PyTorch on non-power-of-two shapes and under
the default and random configs; the example kernel each one came from is named."""

from __future__ import annotations

import pytest
import torch
from pallas_testing import assert_same
from pallas_testing import clone
from pallas_testing import configs
from pallas_testing import gpu_config_spec
from pallas_testing import lower_for_platform
from pallas_testing import pallas_kernel

import helion
import helion.language as hl


def _run_configs(fn, args: tuple, expected: torch.Tensor, seeds=(0, 1)) -> None:
    bound = pallas_kernel(fn).bind(args)
    for config in configs(bound, seeds):
        assert_same(bound.compile_config(config)(*clone(args)), expected)


# -- bounded slices of any length (examples/rope.py, examples/moe_matmul.py) ------------------
# A slice of extent E is held in next_power_of_2(E) lanes: `x[:, 12:24]` of a dim of 24 is a
# 16-lane window at 12, past the end of the dim.


def swap_halves(x: torch.Tensor) -> torch.Tensor:
    m, d = x.shape
    width = hl.specialize(d)
    half = width // 2
    out = torch.empty_like(x)
    for tile in hl.tile(m):
        lo = x[tile, :half]
        hi = x[tile, half:]
        out[tile, :half] = hi * 2
        out[tile, half:] = lo - 1
    return out


def middle_slice(x: torch.Tensor) -> torch.Tensor:
    m, d = x.shape
    width = hl.specialize(d)
    out = torch.zeros([m, width - 4], dtype=x.dtype, device=x.device)
    for tile in hl.tile(m):
        out[tile, 1:] = x[tile, 3 : width - 2] + x[tile, 2 : width - 3]
    return out


def count_ends_below(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    groups = offsets.size(0) - 1
    out = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    for tile in hl.tile(x.size(0)):
        ends = offsets[1 : groups + 1]
        out[tile] = (ends[None, :] <= x[tile][:, None]).to(torch.int32).sum(dim=1)
    return out


@pytest.mark.parametrize("shape", [(13, 24), (7, 22), (19, 10), (5, 26)])
def test_slices_past_the_padded_half(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    half = shape[1] // 2
    expected = torch.cat((x[:, half:] * 2, x[:, :half] - 1), dim=1)
    _run_configs(swap_halves, (x,), expected)


@pytest.mark.parametrize("shape", [(11, 13), (6, 21), (17, 9)])
def test_slice_that_starts_and_ends_inside_the_dim(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    d = shape[1]
    expected = torch.zeros(shape[0], d - 4)
    expected[:, 1:] = x[:, 3 : d - 2] + x[:, 2 : d - 3]
    _run_configs(middle_slice, (x,), expected)


@pytest.mark.parametrize("groups", [5, 3, 11])
def test_slice_of_offsets_from_one(groups: int) -> None:
    x = torch.randint(0, 60, (53,), dtype=torch.int32)
    offsets = torch.sort(torch.randint(0, 60, (groups + 1,), dtype=torch.int32)).values
    offsets[0] = 0
    expected = (offsets[1:][None, :] <= x[:, None]).sum(dim=1).to(torch.int32)
    _run_configs(count_ends_below, (x, offsets), expected)


def test_slices_past_the_padded_half_lower_for_gpu() -> None:
    bound = pallas_kernel(swap_halves).bind((torch.randn(13, 24),))
    text = lower_for_platform(bound, gpu_config_spec(bound).default_config(), "cuda")
    assert "__gpu$xla.gpu.triton" in text


# -- stores mixing tile / scalar indices with full slices (examples/layer_norm_bwd.py) --------


def column_sums_per_tile(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    rows = hl.register_block_size(m)
    partial = torch.empty([helion.cdiv(m, rows), n], dtype=torch.float32, device=x.device)
    for tile in hl.tile(m, block_size=rows):
        partial[tile.id, :] = x[tile, :].sum(dim=0)
    return partial.sum(0)


def doubled_by_inner_tiles(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for outer in hl.tile(m):
        for inner in hl.tile(outer.begin, outer.end):
            out[inner, :] = x[inner, :] * 2
    return out


@pytest.mark.parametrize("shape", [(43, 97), (9, 5), (70, 33)])
def test_store_at_tile_id_and_full_slice(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    bound = pallas_kernel(column_sums_per_tile).bind((x,))
    for config in configs(bound, (0, 1)):
        actual = bound.compile_config(config)(x.clone())
        torch.testing.assert_close(actual, x.sum(0), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shape", [(37, 53), (12, 7)])
def test_store_at_inner_tile_and_full_slice(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    _run_configs(doubled_by_inner_tiles, (x,), x * 2)


# -- atomics on a tile of indices on GPU (examples/histogram.py) -------------------------------
# With jax 0.11.2 on an H200 a tensor of plgpu atomics ran without effect (the histogram read
# back zeros) while one-element atomics landed: tiles of atomics are issued lane by lane.


def _gpu_source(fn, args: tuple) -> str:
    from helion_pallas.codegen import generate_source
    from helion_pallas.tunables import PallasOptions

    bound = pallas_kernel(fn).bind(args)
    config = gpu_config_spec(bound).default_config()
    source, _, _ = generate_source(bound.ir, PallasOptions.parse(config, "gpu"))
    return source


def test_gpu_tile_atomics_are_issued_lane_by_lane_and_scalar_ones_directly() -> None:
    from pallas_features import scalar_atomic_sum
    from pallas_kernels import CASES_BY_NAME

    histogram = CASES_BY_NAME["histogram"]
    assert "hp.gpu_atomic_by_lane(plgpu.atomic_add, counts_out" in _gpu_source(
        histogram.fn, histogram.args()
    )
    scalar = _gpu_source(scalar_atomic_sum, (torch.randn(61),))
    assert "plgpu.atomic_add(out_out, (" in scalar and "by_lane" not in scalar


@pytest.mark.parametrize("shape", [(48,), (6, 8)])
def test_lane_by_lane_atomics_count_like_bincount(shape: tuple[int, ...]) -> None:
    import jax
    import jax.numpy as jnp
    import numpy
    from jax.experimental import pallas as pl

    from helion_pallas import runtime as hp

    def masked_add(ref, where, value, *, mask):
        # interpret mode's plgpu rule takes no mask: the neutral operand stands in for it
        ref[where] = ref[where] + jnp.where(mask, value, 0)
        return ref[where]

    rng = numpy.random.default_rng(0)
    bins = rng.integers(0, 5, size=shape).astype(numpy.int32)
    keep = rng.random(shape) < 0.8

    def kernel(bins_ref, keep_ref, counts_ref, olds_ref):
        counts_ref[...] = jnp.zeros((5,), jnp.int32)
        value = jnp.ones(shape, jnp.int32)
        olds_ref[...] = hp.gpu_atomic_by_lane(
            masked_add, counts_ref, (bins_ref[...],), value, mask=keep_ref[...]
        )

    counts, olds = pl.pallas_call(
        kernel,
        out_shape=[jax.ShapeDtypeStruct((5,), jnp.int32), jax.ShapeDtypeStruct(shape, jnp.int32)],
        interpret=True,
    )(bins, keep)
    expected = numpy.bincount(bins[keep], minlength=5)
    assert numpy.array_equal(numpy.asarray(counts), expected)
    # lanes go in row-major order: each kept lane reads back its bin's count just after its own add
    flat_bins, flat_keep = bins.reshape(-1), keep.reshape(-1)
    seen = [int(((flat_bins[:i] == b) & flat_keep[:i]).sum()) + 1 for i, b in enumerate(flat_bins)]
    assert numpy.array_equal(
        numpy.asarray(olds).reshape(-1)[flat_keep], numpy.asarray(seen)[flat_keep]
    )
