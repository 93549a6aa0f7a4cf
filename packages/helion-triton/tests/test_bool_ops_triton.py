"""Bool `&`, `|`, `^` and torch.logical_* between a bool tile and a 0-D bool (a comparison of
a reduction or of a loaded scalar), and with a constant: the Triton interpreter refused the
i1 op of such operands (NumPy: "ufunc 'bitwise_and' not supported for the input types")."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl


def combine(x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
    outs = [torch.empty(x.shape, dtype=torch.bool) for _ in range(7)]
    for t in hl.tile(x.size(0)):
        row, total, flag = x[t] > 0, x[t].sum() > 0, s[0] > 0
        outs[0][t] = row & total
        outs[1][t] = row | flag
        outs[2][t] = total ^ row
        outs[3][t] = torch.logical_and(row, flag)
        outs[4][t] = torch.logical_or(total, row)
        outs[5][t] = torch.logical_xor(row, total)
        outs[6][t] = (row & True) | (flag & False)
    return tuple(outs)


def expected(x: torch.Tensor, s: torch.Tensor) -> list[torch.Tensor]:
    row, flag = x > 0, s[0] > 0
    total = x.sum() > 0
    return [
        row & total,
        row | flag,
        total ^ row,
        torch.logical_and(row, flag),
        torch.logical_or(total, row),
        torch.logical_xor(row, total),
        (row & True) | (flag & False),
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bool_ops_with_a_0d_operand_match_torch(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    x, s = torch.randn(37, generator=gen), torch.randn(3, generator=gen)
    kernel = helion.kernel(combine, backend="triton", autotune_effort="none")
    for got, want in zip(kernel(x, s), expected(x, s), strict=True):
        assert torch.equal(got, want)
