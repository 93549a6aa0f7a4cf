"""Module-level values that a trace bakes in: a flag, a string, a dtype and a helper function
read by device code, and the numbers a helper reads. Rebinding one traces the kernel again
(they were baked with no guard: the old code kept running); numbers read by the device code
itself are kernel arguments and change nothing."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion.testing import require_backend

NEGATE = False
MODE = "double"
OUT_DTYPE = torch.float32
FACTOR = 2.0


def scale(v: torch.Tensor) -> torch.Tensor:
    return v * FACTOR  # a number read by a helper: baked into the trace


def uses_globals(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x, dtype=OUT_DTYPE)
    for t in hl.tile(x.size(0)):
        v = scale(x[t])
        if MODE == "double":
            v = v * 2
        if NEGATE:
            v = -v
        out[t] = v.to(OUT_DTYPE)
    return out


def expected(x: torch.Tensor) -> torch.Tensor:
    v = scale(x)
    if MODE == "double":
        v = v * 2
    if NEGATE:
        v = -v
    return v.to(OUT_DTYPE)


def tripled(v: torch.Tensor) -> torch.Tensor:
    return v * 3


@pytest.mark.parametrize("backend", ["ref", "triton"])
def test_rebinding_a_baked_global_traces_again(backend: str, monkeypatch) -> None:
    require_backend(backend)  # the isolated core run has only ref
    kernel = helion.kernel(uses_globals, backend=backend, autotune_effort="none")
    x = torch.randn(37)
    torch.testing.assert_close(kernel(x), expected(x))
    for name, value in [
        ("NEGATE", True),
        ("MODE", "single"),
        ("FACTOR", 5.0),
        ("OUT_DTYPE", torch.float64),
        ("scale", tripled),
    ]:
        monkeypatch.setitem(globals(), name, value)
        torch.testing.assert_close(kernel(x), expected(x), msg=name)
    variants = [v for vs in kernel.bind((x,))._variants.values() for v in vs]
    assert len(variants) == 1  # the stale traces were dropped
