"""Looped reductions (`reduction_loops`) over a dimension whose size is a registered tunable.

A split-K matmul stores one partial product per K chunk into a buffer of `split_k` slots in one
device loop and, after `hl.barrier()`, reduces `buf[tile_m, tile_n, :]` in the next. The
reduction dimension is `split_k` long, a value the config fixes, so the Triton backend loops over
it in chunks like any other: the buffer being written by the kernel is no obstacle, since the
writes are in another device loop. A write to the tensor in the same device loop still keeps the
dimension whole, and the refusal says why and where.

Results are compared with PyTorch and with the ref backend under the same configs, on shapes
that are not powers of two, with split_k values that do not divide them.
"""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.autotuner import IntegerFragment

# split_k from 2 to 48; the default (40) sizes the reduction dimension of the discovery trace,
# so the ConfigSpec offers chunks of 8, 16 and 32
SPLIT_K = IntegerFragment(2, 48, 40)


def split_k_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    split_k = hl.register_tunable("split_k", SPLIT_K)
    block_k = helion.next_power_of_2(helion.cdiv(k, split_k))
    partials = torch.zeros((m, n, split_k), device=a.device, dtype=torch.float32)
    out = torch.empty((m, n), device=a.device, dtype=torch.float32)
    for tile_m, tile_n, outer_k in hl.tile([m, n, k], block_size=[None, None, block_k]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for inner_k in hl.tile(outer_k.begin, outer_k.end):
            acc = torch.addmm(acc, a[tile_m, inner_k], b[inner_k, tile_n])
        partials[tile_m, tile_n, outer_k.id] = acc
    hl.barrier()
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = torch.sum(partials[tile_m, tile_n, :], dim=-1)
    return out


def split_k_spread(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """As split_k_sum, and each partial product's distance from their mean: a mean and a sum
    over the split dimension, then a store over it."""
    m, k = a.shape
    _, n = b.shape
    split_k = hl.register_tunable("split_k", SPLIT_K)
    block_k = helion.next_power_of_2(helion.cdiv(k, split_k))
    partials = torch.zeros((m, n, split_k), device=a.device, dtype=torch.float32)
    out = torch.empty((m, n), device=a.device, dtype=torch.float32)
    spread = torch.empty((m, n, split_k), device=a.device, dtype=torch.float32)
    for tile_m, tile_n, outer_k in hl.tile([m, n, k], block_size=[None, None, block_k]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for inner_k in hl.tile(outer_k.begin, outer_k.end):
            acc = torch.addmm(acc, a[tile_m, inner_k], b[inner_k, tile_n])
        partials[tile_m, tile_n, outer_k.id] = acc
    hl.barrier()
    for tile_m, tile_n in hl.tile([m, n]):
        row = partials[tile_m, tile_n, :]
        out[tile_m, tile_n] = row.sum(-1)
        spread[tile_m, tile_n, :] = row - row.mean(-1, keepdim=True)
    return out, spread


def doubled_in_place(x: torch.Tensor) -> torch.Tensor:
    """Reads a row over the reduction dimension, writes it back, and reads it again, all in one
    device loop: a chunk loop would move the reads across the write."""
    m, _ = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        before = x[tile_m, :].sum(-1)
        x[tile_m, :] = x[tile_m, :] * 2
        out[tile_m] = before + x[tile_m, :].sum(-1)
    return out


# -- references ------------------------------------------------------------------------------------


def _partials(a: torch.Tensor, b: torch.Tensor, split_k: int) -> torch.Tensor:
    """The kernels' partial products: K cut into chunks of next_power_of_2(cdiv(K, split_k))."""
    m, k = a.shape
    n = b.shape[1]
    block_k = helion.next_power_of_2(helion.cdiv(k, split_k))
    result = torch.zeros((m, n, split_k), dtype=torch.float64)
    for slot, start in enumerate(range(0, k, block_k)):
        stop = min(start + block_k, k)
        result[:, :, slot] = a[:, start:stop].double() @ b[start:stop].double()
    return result


def _split_k_sum_reference(a: torch.Tensor, b: torch.Tensor, split_k: int) -> torch.Tensor:
    return (a.double() @ b.double()).float()


def _split_k_spread_reference(
    a: torch.Tensor, b: torch.Tensor, split_k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    partials = _partials(a, b, split_k)
    spread = partials - partials.mean(-1, keepdim=True)
    return (a.double() @ b.double()).float(), spread.float()


KERNELS = {
    "split_k_sum": (split_k_sum, _split_k_sum_reference),
    "split_k_spread": (split_k_spread, _split_k_spread_reference),
}


def _operands(m: int, k: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=generator)
    b = torch.randn(k, n, generator=generator)
    return a, b


def _bound(fn, backend: str, args):
    return helion.kernel(fn, backend=backend, autotune_effort="none", dot_precision="ieee").bind(
        args
    )


def _close(actual, expected) -> None:
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for one, other in zip(actual, expected, strict=True):
            _close(one, other)
        return
    torch.testing.assert_close(actual, expected, atol=1e-3, rtol=1e-4)


def _config(bound, **overrides) -> helion.Config:
    return helion.Config(**{**bound.config_spec.default_config(), **overrides})


# -- tests -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize(
    ("shape", "split_k"), [((13, 307, 11), 13), ((13, 307, 11), 40), ((29, 150, 21), 24)]
)
def test_looped_split_dimension_matches_torch_and_ref(name, shape, split_k):
    fn, reference = KERNELS[name]
    args = _operands(*shape, seed=split_k)
    bound, ref_bound = _bound(fn, "triton", args), _bound(fn, "ref", args)
    expected = reference(*args, split_k)
    for chunk in (8, 16, None):
        config = _config(bound, split_k=split_k, reduction_loops=[chunk])
        compiled = bound.compile_config(config)
        # a chunk under the split dimension's length loops; the last chunk is a partial one
        looped = chunk is not None and chunk < split_k
        assert ("for roffset" in compiled.source) == looped, compiled.source
        actual = compiled(*args)
        _close(actual, expected)
        _close(actual, ref_bound.compile_config(config)(*args))


def test_the_config_space_offers_looped_split_dimensions():
    args = _operands(13, 307, 11, seed=0)
    spec = _bound(split_k_sum, "triton", args).config_spec
    (fragment,) = spec["reduction_loops"].fragments
    assert all(fragment.is_valid(chunk) for chunk in (8, 16, 32))
    chosen = {spec.random_config(random.Random(seed)).reduction_loops[0] for seed in range(20)}
    assert chosen - {None}, chosen


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_random_configs_match_torch_and_ref(name):
    fn, reference = KERNELS[name]
    args = _operands(19, 101, 7, seed=len(name))
    bound, ref_bound = _bound(fn, "triton", args), _bound(fn, "ref", args)
    spec = bound.config_spec
    looped = 0
    # every random config is one the Triton backend compiles, looped or not
    for seed in range(6):
        config = spec.random_config(random.Random(seed))
        compiled = bound.compile_config(config)
        looped += "for roffset" in compiled.source
        actual = compiled(*args)
        _close(actual, reference(*args, config["split_k"]))
        _close(actual, ref_bound.compile_config(config)(*args))
    assert looped  # (these seeds draw chunks shorter than split_k for both kernels)


def test_a_write_in_the_same_device_loop_keeps_the_dimension_whole():
    x = torch.randn(5, 37)
    bound = _bound(doubled_in_place, "triton", (x.clone(),))
    spec = bound.config_spec
    assert all(
        spec.random_config(random.Random(seed)).reduction_loops == [None] for seed in range(10)
    )
    with pytest.raises(exc.InvalidConfig) as raised:
        bound.compile_config(helion.Config(block_sizes=[4], reduction_loops=[8]))
    message = str(raised.value)
    assert "reduction_loops" in message and "triton backend" in message
    assert f"{__file__}:" in message and "before = x[tile_m, :].sum(-1)" in message
    assert "written in the same device loop" in message
    y = x.clone()
    out = bound.compile_config(helion.Config(block_sizes=[4], reduction_loops=[None]))(y)
    torch.testing.assert_close(out, x.sum(1) * 3)
    torch.testing.assert_close(y, x * 2)
