"""Row softmax in two passes over column chunks: the first pass keeps a running maximum and a
running denominator (rescaled whenever the maximum grows), the second writes the result. Both
inner loops share one registered block size."""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def softmax_two_pass(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    chunk = hl.register_block_size(n)
    for tile_m in hl.tile(m):
        running_max = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        denominator = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=chunk):
            values = x[tile_m, tile_n].to(torch.float32)
            new_max = torch.maximum(running_max, values.amax(dim=1))
            rescale = torch.exp(running_max - new_max)
            denominator = denominator * rescale + torch.exp(values - new_max[:, None]).sum(dim=1)
            running_max = new_max
        for tile_n in hl.tile(n, block_size=chunk):
            values = x[tile_m, tile_n].to(torch.float32)
            probs = torch.exp(values - running_max[:, None]) / denominator[:, None]
            out[tile_m, tile_n] = probs.to(out.dtype)
    return out


def softmax_two_pass_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


def example_args() -> tuple:
    return (torch.randn(23, 211, device=DEVICE),)


CASES = [
    Case("softmax_two_pass", softmax_two_pass, softmax_two_pass_reference, atol=1e-5, rtol=1e-4)
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
