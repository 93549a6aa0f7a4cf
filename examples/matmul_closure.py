"""Matrix multiply whose epilogue is built from ordinary Python functions and closures.

`matmul_epilogue.py` shows a lambda closing over a bias tensor. Here the epilogue is made by
factories: `clamped(low, high, scale)` returns a `def` function that captures constants, and
`plus_residual(residual, inner)` wraps another epilogue and a tensor. The device code calls
`epilogue(acc, (tile_m, tile_n))`; the function is traced into the kernel, so its captured
numbers become constants of the generated code and part of the specialization key (a different
`scale` compiles a new kernel; the same one reuses it), while captured tensors become kernel
arguments (another residual of the same shape reuses the compiled kernel).
"""

from __future__ import annotations

from typing import Callable

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def matmul_closure(x: torch.Tensor, y: torch.Tensor, epilogue: Callable) -> torch.Tensor:
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = epilogue(acc, (tile_m, tile_n))
    return out


def clamped(low: float, high: float, scale: float) -> Callable:
    """The epilogue `clamp(acc, low, high) * scale`, its bounds and scale captured."""

    def epilogue(acc: torch.Tensor, tile: tuple) -> torch.Tensor:
        return torch.clamp(acc, low, high) * scale

    return epilogue


def plus_residual(residual: torch.Tensor, inner: Callable) -> Callable:
    """`inner(acc) + residual`: a closure over a tensor and another epilogue."""

    def epilogue(acc: torch.Tensor, tile: tuple) -> torch.Tensor:
        tile_m, tile_n = tile
        return inner(acc, tile) + residual[tile_m, tile_n]

    return epilogue


def matmul_closure_reference(x: torch.Tensor, y: torch.Tensor, epilogue: Callable) -> torch.Tensor:
    # the epilogue indexes with its tiles; whole-tensor slices stand for them here
    return epilogue(x.float() @ y.float(), (slice(None), slice(None))).to(x.dtype)


def example_args() -> tuple:
    x, y = torch.randn(41, 27, device=DEVICE), torch.randn(27, 35, device=DEVICE)
    return x, y, clamped(-2.0, 3.0, 0.5)


def residual_args() -> tuple:
    x, y = torch.randn(41, 27, device=DEVICE), torch.randn(27, 35, device=DEVICE)
    residual = torch.randn(41, 35, device=DEVICE)
    return x, y, plus_residual(residual, clamped(-1.0, 1.0, 4.0))


CASES = [
    Case("matmul_closure", matmul_closure, matmul_closure_reference),
    # the epilogue scales by 4: on GPUs the default tf32 dot rounding (~1e-3 of each product)
    # grows past 1e-2 absolute, so this case allows 5e-2
    Case(
        "matmul_closure_residual",
        matmul_closure,
        matmul_closure_reference,
        atol=5e-2,
        args=residual_args,
    ),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
