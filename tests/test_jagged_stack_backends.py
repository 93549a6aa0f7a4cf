"""`hl.jagged_tile` atomics and `hl.stacktensor_like` on the Pallas and CuTe backends: a correct
result (Pallas interpret mode) or a BackendUnsupported error naming the construct, never a
silently wrong kernel. (The jagged examples of the suite run there through
test_examples_backends.py.)"""

from __future__ import annotations

import importlib.util

import pytest
import torch

import helion
import helion.language as hl
from helion import exc


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


pallas = pytest.mark.skipif(
    not _installed("helion_pallas"), reason="helion-pallas is not installed"
)
cute = pytest.mark.skipif(not _installed("helion_cute"), reason="helion-cute is not installed")


def jagged_accumulate(x: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_b in hl.tile(x.size(0)):
        n = lengths[tile_b]
        for tile_k in hl.jagged_tile(n):
            hl.atomic_add(out, [tile_b, tile_k], x[tile_b, tile_k] + 1)
    return out


def stack_sum(dev_ptrs: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(like)
    for tile in hl.tile(like.size(0)):
        out[tile] = hl.stacktensor_like(like, dev_ptrs[:])[tile].sum(dim=0)
    return out


def _jagged_args():
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 12, (7,), generator=generator)
    x = torch.randn(7, 11, generator=generator)
    expected = torch.zeros(7, 11)
    for b, n in enumerate(lengths.tolist()):
        expected[b, :n] = x[b, :n] + 1
    return (x, lengths, torch.zeros(7, 11)), expected


@pallas
def test_pallas_masks_jagged_atomics():
    args, expected = _jagged_args()
    out = helion.kernel(jagged_accumulate, backend="pallas", autotune_effort="none")(*args)
    torch.testing.assert_close(out, expected)


@cute
def test_cute_refuses_masked_atomics():
    args, _ = _jagged_args()
    bound = helion.kernel(jagged_accumulate, backend="cute").bind(args)
    with pytest.raises(exc.BackendUnsupported, match="masked atomic"):
        bound.compile_config(bound.config_spec.default_config())


@pytest.mark.parametrize(
    "backend", [pytest.param("pallas", marks=pallas), pytest.param("cute", marks=cute)]
)
def test_stack_tensor_is_refused(backend):
    buffers = [torch.randn(9) for _ in range(3)]
    ptrs = hl.stack_pointers(buffers)
    with pytest.raises(exc.BackendUnsupported, match="stack_load") as info:
        helion.kernel(stack_sum, backend=backend).bind((ptrs, buffers[0]))
    assert backend in str(info.value)
