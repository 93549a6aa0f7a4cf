"""Matrix multiply whose epilogue is a Python callable passed as a kernel argument.

The epilogue receives the float32 accumulator and the output tiles `(tile_m, tile_n)`. A lambda
that closes over a bias tensor (`relu(acc + bias[tile_n])`) is fused into the kernel; the
tensors it captures become kernel arguments.
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
def matmul_epilogue(x: torch.Tensor, y: torch.Tensor, epilogue: Callable) -> torch.Tensor:
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = epilogue(acc, (tile_m, tile_n))
    return out


def bias_relu(bias: torch.Tensor) -> Callable:
    """The epilogue `relu(acc + bias)`, broadcasting the bias over rows."""
    return lambda acc, tile: torch.relu(acc + bias[tile[1]])


def matmul_epilogue_reference(x: torch.Tensor, y: torch.Tensor, epilogue: Callable) -> torch.Tensor:
    # the epilogue indexes with its tiles; whole-tensor slices stand for them here
    return epilogue(x.float() @ y.float(), (slice(None), slice(None))).to(x.dtype)


def example_args() -> tuple:
    bias = torch.randn(21, device=DEVICE)
    return torch.randn(29, 43, device=DEVICE), torch.randn(43, 21, device=DEVICE), bias_relu(bias)


CASES = [Case("matmul_epilogue", matmul_epilogue, matmul_epilogue_reference, atol=1e-4, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
