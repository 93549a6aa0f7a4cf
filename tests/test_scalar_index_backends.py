"""A 0-D integer index known only on the device (`x[t, k]` for a scalar argument `k`) counts
from the end when negative, on every backend, as in torch: it read before the tensor (Triton
read and wrote neighbouring memory, Pallas gave NaN)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]


def column(x: torch.Tensor, k: int) -> torch.Tensor:
    out = x.new_empty([x.size(0)])
    for t in hl.tile(x.size(0)):
        out[t] = x[t, k]
    return out


def write_column(x: torch.Tensor, out: torch.Tensor, k: int) -> torch.Tensor:
    for t in hl.tile(x.size(0)):
        out[t, k] = x[t]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_negative_runtime_index_counts_from_the_end(backend: str) -> None:
    require_backend(backend)
    x = torch.randn(7, 5)
    read = helion.kernel(column, backend=backend, autotune_effort="none")
    write = helion.kernel(write_column, backend=backend, autotune_effort="none")
    for k in (-1, -5, 0, 3):
        torch.testing.assert_close(read(x, k), x[:, k])
        big = torch.zeros(9, 5)
        view = big[1:8]  # writes must stay inside the view
        write(x[:, 0].contiguous(), view, k)
        expected = torch.zeros(9, 5)
        expected[1:8, k] = x[:, 0]
        torch.testing.assert_close(big, expected)
