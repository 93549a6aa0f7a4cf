"""Functions passed as kernel arguments (epilogues): traced inline, keyed by code and captures."""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import helion
import helion.language as hl


def apply(x: torch.Tensor, fn: Callable) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = fn(x[tile_m, tile_n], (tile_m, tile_n))
    return out


def affine(scale: float, shift: float) -> Callable:
    def epilogue(v, tile):
        return v * scale + shift

    return epilogue


def bounded(bounds: tuple) -> Callable:
    return lambda v, tile: torch.clamp(v, bounds[0], bounds[1])


def adder(tensor: torch.Tensor) -> Callable:
    return lambda v, tile: v + tensor[tile[0], tile[1]]


def with_defaults(v, tile, power=2, offset=0.5):
    return v**power + offset


@pytest.fixture(params=["ref", "eager"])
def kernel(request) -> helion.Kernel:
    if request.param == "eager":
        return helion.kernel(apply, ref_mode=helion.RefMode.EAGER)
    return helion.kernel(apply, backend="ref", autotune_effort="none")


def test_captured_constants_are_part_of_the_key(kernel):
    x = torch.randn(19, 33)
    for scale, shift in ((2.0, 0.0), (3.0, 0.0), (3.0, -1.5)):
        torch.testing.assert_close(kernel(x, affine(scale, shift)), x * scale + shift)
    for bounds in ((-0.5, 0.5), (-0.1, 1.0)):  # numbers inside a captured tuple count too
        torch.testing.assert_close(kernel(x, bounded(bounds)), torch.clamp(x, *bounds))
    torch.testing.assert_close(kernel(x, with_defaults), x**2 + 0.5)


def test_equal_captures_share_a_bound_kernel():
    kernel = helion.kernel(apply, backend="ref", autotune_effort="none")
    x = torch.randn(8, 8)
    first = kernel.bind((x, affine(2.0, 1.0)))
    assert (
        kernel.bind((x, affine(2.0, 1.0))) is first
    )  # another closure object, same code and values
    assert kernel.bind((x, affine(2.0, 1.5))) is not first
    assert kernel.bind((x, bounded((0.0, 1.0)))) is not kernel.bind((x, bounded((0.0, 2.0))))
    # a captured tensor is a kernel argument: only its shape and dtype are in the key
    t1, t2 = torch.randn(8, 8), torch.randn(8, 8)
    add1, add2 = adder(t1), adder(t2)
    assert kernel.bind((x, add1)) is kernel.bind((x, add2))
    torch.testing.assert_close(kernel(x, add1), x + t1)
    torch.testing.assert_close(kernel(x, add2), x + t2)


SLOPES = torch.tensor([0.1, 0.3, 0.5, 0.7])


def _biased(x: torch.Tensor, score_mod: object) -> torch.Tensor:
    out = torch.empty_like(x)
    for tb, tm in hl.tile(x.size()):
        out[tb, tm] = score_mod(x[tb, tm][None, :, :], tb.index[None, :, None])[0]
    return out


def _constant_index(x: torch.Tensor, pick: object) -> torch.Tensor:
    out = torch.empty_like(x)
    for tb, tm in hl.tile(x.size()):
        lanes = hl.arange(4)
        out[tb, tm] = x[tb, tm] + pick(lanes).sum() + len(lanes)
    return out


@pytest.mark.parametrize("backend", ["ref", "triton", "pallas"])
def test_a_callable_indexes_a_tensor_it_captures_with_any_index(backend: str) -> None:
    """torch took a device index with a constant first dim (`[1, tile, 1]`, `hl.arange(4)`)
    for a sequence of indices and iterated it: "cannot iterate over a device tensor"."""
    from helion.testing import require_backend

    require_backend(backend)  # the isolated core run has only ref
    x = torch.randn(4, 10)
    alibi = helion.kernel(_biased, backend=backend, autotune_effort="none")
    torch.testing.assert_close(alibi(x, lambda s, h: s + SLOPES[h]), x + SLOPES[:, None])
    gather = helion.kernel(_constant_index, backend=backend, autotune_effort="none")
    torch.testing.assert_close(gather(x, lambda i: SLOPES[i]), x + SLOPES.sum() + 4)
