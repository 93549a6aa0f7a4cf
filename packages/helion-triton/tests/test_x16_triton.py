"""hl.load_float4_e2m1fn_x16_to_float16 and hl.load_bfloat16_x16_to_float16 on Triton (the
interpreter on CPU, compiled on a GPU), under random configs: bit for bit against groups sliced
from ``storage.flatten()`` and decoded in PyTorch."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl


def e2m1_table(device) -> torch.Tensor:
    values = []
    for code in range(16):
        sign = -1.0 if code & 8 else 1.0
        exponent, mantissa = (code >> 1) & 3, code & 1
        magnitude = (
            0.5 * mantissa if exponent == 0 else (1 + 0.5 * mantissa) * 2.0 ** (exponent - 1)
        )
        values.append(sign * magnitude)
    return torch.tensor(values, device=device)


def groups(storage: torch.Tensor, offsets: torch.Tensor, width: int) -> torch.Tensor:
    """[len(offsets), width]: the elements of each group, from the flattened storage."""
    lanes = offsets[:, None].to(torch.int64) + torch.arange(width, device=offsets.device)
    return storage.flatten()[lanes]


def fp4_rows(storage: torch.Tensor, offsets: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    out = torch.empty([offsets.size(0), 16], dtype=torch.float16, device=offsets.device)
    for tile in hl.tile(offsets.size(0)):
        values = hl.load_float4_e2m1fn_x16_to_float16(storage, offsets[tile], keep[tile])
        for j in hl.static_range(16):
            out[tile, j] = values[j]
    return out


def bf16_rows(storage: torch.Tensor, offsets: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    out = torch.empty([offsets.size(0), 16], dtype=torch.float16, device=offsets.device)
    for tile in hl.tile(offsets.size(0)):
        values = hl.load_bfloat16_x16_to_float16(storage, offsets[tile], keep[tile])
        for j in hl.static_range(16):
            out[tile, j] = values[j]
    return out


def _run(fn, args, seed):
    kernel = helion.kernel(fn, backend="triton", autotune_effort="none")
    bound = kernel.bind(args)
    config = bound.config_spec.random_config(random.Random(seed))
    return bound.compile_config(config)(*args)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("layout", ["2d", "transposed"])
def test_fp4_random_configs(device, seed, layout):
    generator = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 256, (9 * 37,), dtype=torch.uint8, generator=generator)
    storage = codes.reshape(9, 37) if layout == "2d" else codes.reshape(37, 9).t()
    offsets = torch.randint(0, storage.numel() - 7, (53,), generator=generator)
    keep = torch.rand(53, generator=generator) < 0.8
    offsets = torch.where(keep, offsets, 10**7)  # masked-off groups point outside the storage
    storage, offsets, keep = storage.to(device), offsets.to(device), keep.to(device)
    out = _run(fp4_rows, (storage, offsets, keep), seed)
    bytes_ = groups(storage, offsets.where(keep, 0), 8).to(torch.int64)
    table = e2m1_table(device)
    expected = torch.stack([table[bytes_ & 15], table[bytes_ >> 4]], dim=-1).reshape(53, 16)
    expected = torch.where(keep[:, None], expected, 0.0).to(torch.float16)
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16))


@pytest.mark.parametrize("seed", range(3))
def test_bf16_random_configs(device, seed):
    generator = torch.Generator().manual_seed(10 + seed)
    values = torch.randn(7 * 41, generator=generator) * torch.logspace(-28, 28, 7 * 41, 2.0)
    storage = values.to(torch.bfloat16).reshape(7, 41)
    offsets = torch.randint(0, storage.numel() - 15, (45,), generator=generator)
    keep = torch.rand(45, generator=generator) < 0.8
    storage, offsets, keep = storage.to(device), offsets.to(device), keep.to(device)
    out = _run(bf16_rows, (storage, offsets, keep), seed)
    expected = groups(storage, offsets, 16).to(torch.float16)
    expected = torch.where(
        keep[:, None], expected, torch.zeros((), dtype=torch.float16, device=device)
    )
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16))


def test_one_dimensional_storage_is_indexed_by_the_offsets(device):
    offsets = torch.arange(5, device=device)
    keep = torch.ones(5, dtype=torch.bool, device=device)
    kernel = helion.kernel(fp4_rows, backend="triton", autotune_effort="none")
    flat = kernel.bind((torch.zeros(9 * 37, dtype=torch.uint8, device=device), offsets, keep))
    assert "//" not in flat.to_code()
    rows = kernel.bind((torch.zeros(9, 37, dtype=torch.uint8, device=device), offsets, keep))
    assert "//" in rows.to_code()  # row and column of each element: divisions by 37


def test_self_contained_export(device):
    offsets = torch.arange(5, device=device)
    keep = torch.ones(5, dtype=torch.bool, device=device)
    kernel = helion.kernel(fp4_rows, backend="triton", autotune_effort="none")
    options = helion.OutputCodeOptions(allow_helion_deps=False)
    storage = torch.zeros(9, 37, dtype=torch.uint8, device=device)
    source = kernel.bind((storage, offsets, keep)).to_code(options=options)
    assert "import helion" not in source and "def fp4_rows(" in source
