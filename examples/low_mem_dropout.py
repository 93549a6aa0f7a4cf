"""Low-memory dropout: the keep-mask is regenerated from a seed instead of being stored.

`hl.rand([tile_m, tile_n], seed)` gives each element the Philox uniform at its row-major linear
index, whatever the block sizes: the forward and the backward kernel recompute the same mask
from `seed`, so no mask tensor is kept between them. The reference regenerates the mask on the
host with the same Philox stream (`helion.language.philox`, bit-identical to Triton's `tl.rand`).
"""

from __future__ import annotations

import math

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl
from helion.language import philox


@helion.kernel()
def low_mem_dropout(p: float, x: torch.Tensor, seed: int) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile([m, n]):
        keep = hl.rand([tile_m, tile_n], seed=seed) > p
        scale = 1.0 / (1.0 - p)
        out[tile_m, tile_n] = torch.where(keep, x[tile_m, tile_n] * scale, 0.0).to(out.dtype)
    return out


@helion.kernel()
def low_mem_dropout_bwd(p: float, grad_out: torch.Tensor, seed: int) -> torch.Tensor:
    # the forward's mask, regenerated from the seed: same shape, same offsets, same numbers
    m, n = grad_out.shape
    grad_in = torch.empty_like(grad_out)
    for tile_m, tile_n in hl.tile([m, n]):
        keep = hl.rand([tile_m, tile_n], seed=seed) > p
        scale = 1.0 / (1.0 - p)
        grad_in[tile_m, tile_n] = torch.where(keep, grad_out[tile_m, tile_n] * scale, 0.0).to(
            grad_in.dtype
        )
    return grad_in


def keep_mask(p: float, shape: tuple[int, int], seed: int, device: torch.device) -> torch.Tensor:
    """The kernels' mask on the host: Philox uniforms at the linear indices, kept where > p."""
    offsets = torch.arange(shape[0] * shape[1], dtype=torch.int32, device=device).reshape(shape)
    return philox.uniform(seed, offsets) > p


def low_mem_dropout_reference(p: float, x: torch.Tensor, seed: int) -> torch.Tensor:
    scale = 1.0 / (1.0 - torch.tensor(p, dtype=torch.float32, device=x.device))
    return torch.where(keep_mask(p, tuple(x.shape), seed, x.device), x * scale, 0.0).to(x.dtype)


def example_args(shape: tuple[int, int] = (5, 45)) -> tuple:
    # small by default: the suite runs it through the Triton interpreter with random configs
    seed = int(torch.randint(0, 2**31 - 1, ()))
    return (0.25, torch.randn(*shape, device=DEVICE), seed)


CASES = [
    Case("low_mem_dropout", low_mem_dropout, low_mem_dropout_reference, atol=1e-6, rtol=1e-6),
    Case(
        "low_mem_dropout_bwd", low_mem_dropout_bwd, low_mem_dropout_reference, atol=1e-6, rtol=1e-6
    ),
]


def check_dropout_properties() -> None:
    """What a dropout must do beyond matching the reference: reproducible from its seed under
    any config, a kept fraction of 1 - p, kept values scaled by 1 / (1 - p)."""
    p, x, seed = example_args((64, 1000))
    bound = low_mem_dropout.bind((p, x, seed))
    default = bound.config_spec.default_config()
    smaller = helion.Config(
        **{**dict(default), "block_sizes": [max(b // 4, 1) for b in default["block_sizes"]]}
    )
    configs = [default, bound.normalize(smaller)]
    outputs = [bound.compile_config(config)(p, x, seed) for config in configs]
    for config, out in zip(configs, outputs, strict=True):
        assert torch.equal(out, outputs[0]), f"the mask changed with the config {config}"
    again = bound.compile_config(configs[0])(p, x, seed)
    assert torch.equal(again, outputs[0]), "the same seed gave another mask"
    other = bound.compile_config(configs[0])(p, x, seed + 1)
    assert not torch.equal(other != 0, outputs[0] != 0), "another seed gave the same mask"
    kept = outputs[0] != 0
    fraction = kept.float().mean().item()
    sigma = math.sqrt(p * (1 - p) / x.numel())
    assert abs(fraction - (1 - p)) < 5 * sigma, (
        f"kept {fraction:.4f} of the elements, expected {1 - p}"
    )
    torch.testing.assert_close(outputs[0][kept], x[kept] / (1 - p), atol=1e-6, rtol=1e-6)
    ones = torch.ones_like(x)
    bwd = low_mem_dropout_bwd.bind((p, ones, seed))
    grad = bwd.compile_config(bwd.config_spec.default_config())(p, ones, seed)
    assert torch.equal(grad != 0, kept), "the backward regenerated another mask"
    print(
        f"{'dropout properties':>24}: ok   {len(configs)} configs agree, kept {fraction:.4f} "
        f"(expected {1 - p}, sigma {sigma:.4f})"
    )


def main() -> None:
    run_cases(CASES, example_args)
    check_dropout_properties()


if __name__ == "__main__":
    main()
