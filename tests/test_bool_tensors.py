"""Bool tensors in and out of kernels on every backend that runs here: loads of a partial tile
keep their dtype (Pallas read masked-off lanes as int64 0 and could not store the result into a
bool output; found by exploratory testing)."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]


def bool_ops(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    copied = torch.empty_like(a)
    both = torch.empty_like(a)
    either_not = torch.empty_like(a)
    larger = torch.empty_like(a)
    for tile in hl.tile(a.size()):
        x, y = a[tile], b[tile]
        copied[tile] = x
        both[tile] = x & y
        either_not[tile] = (x ^ y) | ~y
        larger[tile] = torch.maximum(x, y)
    return copied, both, either_not, larger


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(37,), (5, 23)])
def test_bool_tiles_round_trip_and_combine(backend: str, shape: tuple[int, ...]) -> None:
    require_backend(backend)
    a = torch.rand(shape) > 0.5
    b = torch.rand(shape) > 0.3
    kernel = helion.kernel(bool_ops, backend=backend, autotune_effort="none")
    bound = kernel.bind((a, b))
    configs = [bound.config_spec.default_config()]
    rng = random.Random(11)
    configs += [bound.config_spec.random_config(rng) for _ in range(3)]
    expected = (a, a & b, (a ^ b) | ~b, torch.maximum(a, b))
    for config in configs:
        got = bound.compile_config(config)(a, b)
        for name, g, e in zip(("copy", "and", "xor-or-not", "maximum"), got, expected, strict=True):
            assert g.dtype == torch.bool, f"{backend} {config} {name}: {g.dtype}"
            assert torch.equal(g, e), f"{backend} {config} {name}"
