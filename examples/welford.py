"""Row mean and variance in one pass with a Welford combiner, and the layer norm built on them.

`hl.reduce` folds each row's (mean, m2, count) triples, one per element, with the parallel
Welford merge of two partial statistics (Chan et al.): no second pass over the row and no
catastrophic cancellation of `E[x^2] - E[x]^2` when the mean is large.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


def welford_combine(mean_a, m2_a, count_a, mean_b, m2_b, count_b):
    """Merge the statistics of two disjoint sets: their mean, sum of squared deviations, count."""
    count = count_a + count_b
    # padded lanes (`other`) are the empty set (0, 0, 0): merging two must not divide by zero
    weight_b = count_b / torch.clamp(count, min=1.0)
    delta = mean_b - mean_a
    return mean_a + delta * weight_b, m2_a + m2_b + delta * delta * count_a * weight_b, count


@helion.kernel()
def welford_var_mean(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`torch.var_mean(x, dim=1, correction=0)` of a 2-D tensor, in float32."""
    m = x.size(0)
    var = torch.empty([m], dtype=torch.float32, device=x.device)
    mean = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        # each element alone: mean x, m2 0, count 1
        row_mean, m2, count = hl.reduce(
            welford_combine, (row, torch.zeros_like(row), torch.ones_like(row)), dim=1
        )
        var[tile_m] = m2 / count
        mean[tile_m] = row_mean
    return var, mean


@helion.kernel()
def welford_layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    m, n = x.shape
    assert weight.shape == (n,) and bias.shape == (n,), "weight and bias must have the row size"
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        mean, m2, count = hl.reduce(
            welford_combine,
            (row, torch.zeros_like(row), torch.ones_like(row)),
            dim=1,
            keep_dims=True,
        )
        normalized = (row - mean) * torch.rsqrt(m2 / count + eps)
        scaled = normalized * weight[:].to(torch.float32) + bias[:].to(torch.float32)
        out[tile_m, :] = scaled.to(out.dtype)
    return out


def var_mean_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.var_mean(x.float(), dim=1, correction=0)


def layer_norm_reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    return F.layer_norm(x.float(), [x.size(-1)], weight.float(), bias.float(), eps).to(x.dtype)


def example_args() -> tuple:
    # small: the Triton interpreter runs a custom combiner element by element
    return (100.0 + 0.5 * torch.randn(6, 13, device=DEVICE),)


def layer_norm_args() -> tuple:
    n = 13
    x = 3.0 + 0.75 * torch.randn(6, n, device=DEVICE, dtype=torch.float16)
    return x, torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)


CASES = [
    Case("welford_var_mean", welford_var_mean, var_mean_reference, atol=1e-4, rtol=1e-4),
    Case(
        "welford_layer_norm",
        welford_layer_norm,
        layer_norm_reference,
        atol=1e-2,
        rtol=1e-2,
        args=layer_norm_args,
    ),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
