"""`torch.addmm` / `torch.baddbmm` whose input broadcasts to the product (a Linear layer's bias
`[n]`, a row `[1, n]`, a column `[m, 1]`, a 0-D value) on every backend. The refused
accumulator used to leave an invalid dot in the IR beside the right one, which Triton then
compiled (`accumulator shape is incompatible`)."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion.language import _ops as ops
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]


def linear(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, _ = a.shape
    n = w.size(1)
    out = torch.empty([m, n], dtype=torch.float32)
    for tm, tn in hl.tile([m, n]):
        out[tm, tn] = torch.addmm(bias[tn], a[tm, :], w[:, tn])
    return out


def linear_row(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, _ = a.shape
    n = w.size(1)
    out = torch.empty([m, n], dtype=torch.float32)
    for tm, tn in hl.tile([m, n]):
        out[tm, tn] = torch.addmm(bias[tn][None, :], a[tm, :], w[:, tn])
    return out


def linear_scalar(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, _ = a.shape
    n = w.size(1)
    out = torch.empty([m, n], dtype=torch.float32)
    for tm, tn in hl.tile([m, n]):
        out[tm, tn] = torch.addmm(bias[0], a[tm, :], w[:, tn])
    return out


def batched(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    b, m, _ = a.shape
    n = w.size(2)
    out = torch.empty([b, m, n], dtype=torch.float32)
    for tb, tm, tn in hl.tile([b, m, n]):
        out[tb, tm, tn] = torch.baddbmm(bias[tn], a[tb, tm, :], w[tb, :, tn])
    return out


CASES = {
    "bias[n]": (linear, lambda a, w, bias: torch.addmm(bias, a, w), 2),
    "bias[1, n]": (linear_row, lambda a, w, bias: torch.addmm(bias[None, :], a, w), 2),
    "bias 0-D": (linear_scalar, lambda a, w, bias: torch.addmm(bias[0], a, w), 2),
    "baddbmm bias[n]": (batched, lambda a, w, bias: torch.baddbmm(bias, a, w), 3),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_addmm_with_a_broadcast_input_matches_torch(case: str, backend: str) -> None:
    require_backend(backend)
    fn, reference, ndim = CASES[case]
    gen = torch.Generator().manual_seed(7)
    lead = (3,) if ndim == 3 else ()
    a = torch.randn(*lead, 19, 23, generator=gen)
    w = torch.randn(*lead, 23, 13, generator=gen)
    bias = torch.randn(13, generator=gen)
    bound = helion.kernel(fn, backend=backend, autotune_effort="none").bind((a, w, bias))
    dots = [node for node in bound.ir.walk() if node.op is ops.dot]
    assert len(dots) == 1 and dots[0].inputs[2] is None  # no accumulator left behind
    expected = reference(a, w, bias)
    configs = [bound.config_spec.default_config()]
    configs += [bound.config_spec.random_config(random.Random(seed)) for seed in range(2)]
    for config in configs:
        got = bound.compile_config(config)(a, w, bias)
        torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-3, msg=str(config))
