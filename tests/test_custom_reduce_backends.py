"""Backends without a lowering for `hl.reduce` / `hl.associative_scan` (Pallas, CuTe) reject a
kernel that uses them in `check()`, before generating code, naming the op, the backend and the
user's line."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import backends
from helion import exc


def add(a, b):
    return a + b


def row_reduce(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m] = hl.reduce(add, x[tile_m, :], dim=1)
    return out


def row_scan(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = hl.associative_scan(add, x[tile_m, :], dim=1, reverse=True)
    return out


def row_cummax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = torch.cummax(x[tile_m, :], dim=1).values
    return out


def _installed(name: str) -> bool:
    return name in {b.name for b in backends.list_backends()}


@pytest.mark.parametrize("backend", ["pallas", "cute"])
@pytest.mark.parametrize(
    "fn, op, line",
    [
        (row_reduce, "reduce", "hl.reduce(add, x[tile_m, :], dim=1)"),
        (row_scan, "associative_scan", "hl.associative_scan(add"),
        (row_cummax, "associative_scan", "torch.cummax(x[tile_m, :], dim=1)"),
    ],
)
def test_unsupported_backends_name_the_op_and_line(backend, fn, op, line):
    if not _installed(backend):
        pytest.skip(f"the {backend} backend is not installed")
    with pytest.raises(
        exc.BackendUnsupported, match=rf"{op} is not supported by the '{backend}' backend"
    ) as info:
        helion.kernel(fn, backend=backend, autotune_effort="none").bind((torch.randn(8, 24),))
    assert info.value.loc is not None and line in info.value.loc.format()
