"""Scans with `hl.associative_scan`: a linear recurrence, discounted returns, a running max.

A first-order linear recurrence `h[t] = a[t] * h[t - 1] + b[t]` looks sequential, but each step is
the affine map `h -> a*h + b`, and composing affine maps is associative: scanning the pairs
(a, b) with that composition gives every h[t] in log2(n) parallel steps. The same combiner run
backwards (`reverse=True`) gives discounted returns `g[t] = r[t] + gamma[t] * g[t + 1]`.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


def affine_combine(a_first, b_first, a_then, b_then):
    """Apply `h -> a_first*h + b_first`, then `h -> a_then*h + b_then`: one affine map."""
    return a_first * a_then, a_then * b_first + b_then


@helion.kernel()
def linear_recurrence(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`h[:, t] = a[:, t] * h[:, t - 1] + b[:, t]` along each row, from `h[:, -1] = 0`."""
    m = b.size(0)
    out = torch.empty_like(b)
    for tile_m in hl.tile(m):
        _, h = hl.associative_scan(affine_combine, (a[tile_m, :], b[tile_m, :]), dim=1)
        out[tile_m, :] = h
    return out


@helion.kernel()
def discounted_returns(gamma: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
    """`g[:, t] = rewards[:, t] + gamma[:, t] * g[:, t + 1]`, from the end of each row."""
    m = rewards.size(0)
    out = torch.empty_like(rewards)
    for tile_m in hl.tile(m):
        _, g = hl.associative_scan(
            affine_combine, (gamma[tile_m, :], rewards[tile_m, :]), dim=1, reverse=True
        )
        out[tile_m, :] = g
    return out


@helion.kernel()
def running_max(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`torch.cummax(x, dim=1)`: in device code it is a scan of (value, index) pairs."""
    m = x.size(0)
    values = torch.empty_like(x)
    indices = torch.empty(x.shape, dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        best, where = torch.cummax(x[tile_m, :], dim=1)
        values[tile_m, :] = best
        indices[tile_m, :] = where
    return values, indices


def linear_recurrence_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    h = torch.zeros_like(b[:, 0])
    steps = []
    for t in range(b.shape[1]):
        h = a[:, t] * h + b[:, t]
        steps.append(h)
    return torch.stack(steps, dim=1)


def discounted_returns_reference(gamma: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
    g = torch.zeros_like(rewards[:, 0])
    steps = []
    for t in reversed(range(rewards.shape[1])):
        g = rewards[:, t] + gamma[:, t] * g
        steps.append(g)
    return torch.stack(steps[::-1], dim=1)


def running_max_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.cummax(x, dim=1)
    return values, indices


def example_args() -> tuple:
    # small: the Triton interpreter runs a custom combiner element by element
    m, n = 6, 13
    decay = 0.5 + 0.5 * torch.rand(m, n, device=DEVICE)
    return decay, torch.randn(m, n, device=DEVICE)


def running_max_args() -> tuple:
    # rounded values repeat, so ties (torch returns the last index of equal values) are exercised
    return (torch.round(2 * torch.randn(6, 13, device=DEVICE)),)


CASES = [
    Case("linear_recurrence", linear_recurrence, linear_recurrence_reference),
    Case("discounted_returns", discounted_returns, discounted_returns_reference),
    Case("running_max", running_max, running_max_reference, args=running_max_args),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
