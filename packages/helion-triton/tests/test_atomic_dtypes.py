"""Triton's atomics by dtype: what Triton can do atomically matches the ref backend, and the rest
is refused when the kernel compiles, with the public op, the dtype and the kernel's line. Before,
an int8 atomic_max or a bfloat16 atomic_add failed at launch inside Triton's interpreter with no
line, and atomic_xchg on float32 failed there too (it now exchanges the bits as integers)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

KINDS = ["add", "max", "min", "xchg", "and", "or", "xor"]
DTYPES = [
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
]


def atomic_add(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        hl.atomic_add(out, [index[tile]], x[tile])
    return out


def atomic_max(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        hl.atomic_max(out, [index[tile]], x[tile])
    return out


def atomic_min(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        hl.atomic_min(out, [index[tile]], x[tile])
    return out


def atomic_xchg(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    old = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        old[tile] = hl.atomic_xchg(out, [index[tile]], x[tile])
    return old


def atomic_and(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        hl.atomic_and(out, [index[tile]], x[tile])
    return out


def atomic_or(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        hl.atomic_or(out, [index[tile]], x[tile])
    return out


def atomic_xor(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        hl.atomic_xor(out, [index[tile]], x[tile])
    return out


KERNELS = {
    fn.__name__.removeprefix("atomic_"): fn
    for fn in (atomic_add, atomic_max, atomic_min, atomic_xchg, atomic_and, atomic_or, atomic_xor)
}


def _supported(kind: str, dtype: torch.dtype) -> bool:
    if dtype.itemsize < 2 or dtype == torch.int16:
        return False
    if dtype == torch.float16:
        return kind == "add"
    return dtype != torch.bfloat16  # no bfloat16 add in Triton's interpreter either


def _inputs(kind: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(len(kind) * 100 + dtype.itemsize)
    n = 53
    if kind == "xchg":  # each target once, so the old values are deterministic
        index = torch.randperm(n, generator=generator)
        out = torch.arange(n).to(dtype)
    else:  # targets hit many times: integer values keep float sums exact in any order
        index = torch.randint(0, 7, (n,), generator=generator)
        out = torch.full((7,), 1 if kind == "and" else 0).to(dtype)
    x = torch.randint(-20, 20, (n,), generator=generator).to(dtype)
    return x, index, out


# bitwise atomics take integers on every backend
CASES = [
    (kind, dtype)
    for kind in KINDS
    for dtype in DTYPES
    if kind not in ("and", "or", "xor") or not dtype.is_floating_point
]


@pytest.mark.parametrize(("kind", "dtype"), CASES, ids=lambda v: str(v).removeprefix("torch."))
def test_atomics_by_dtype(kind: str, dtype: torch.dtype) -> None:
    fn = KERNELS[kind]
    x, index, out = _inputs(kind, dtype)
    triton_kernel = helion.kernel(fn, backend="triton", autotune_effort="none")
    if not _supported(kind, dtype):
        with pytest.raises(exc.BackendUnsupported) as info:
            triton_kernel(x, index, out.clone())
        text = str(info.value)
        assert f"hl.atomic_{kind} on a {str(dtype).removeprefix('torch.')} tensor" in text, text
        assert f"hl.atomic_{kind}(out, [index[tile]], x[tile])" in text, text  # the line
        return
    ref_kernel = helion.kernel(fn, backend="ref", autotune_effort="none")
    ref_out, triton_out = out.clone(), out.clone()
    expected = ref_kernel(x, index, ref_out)
    got = triton_kernel(x, index, triton_out)
    assert torch.equal(got, expected), f"{kind} {dtype}: {got} vs {expected}"
    assert torch.equal(triton_out, ref_out), f"{kind} {dtype}: {triton_out} vs {ref_out}"
