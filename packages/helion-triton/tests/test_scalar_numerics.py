"""Python numbers in Triton kernels, computed as torch computes them.

- An int outside an integer tensor's dtype range wraps into it (two's complement): torch keeps
  the tensor's dtype and computes int8 ``x ^ 0xFF`` with -1; Triton refused the constant.
- A float16 / bfloat16 add, sub or mul with a Python number or a float scalar argument computes
  in float32 with the scalar in float32 and rounds once (torch's CUDA kernels; CPU torch does
  so for mul and narrows the scalar of add / sub first): bf16 ``x * 1.003`` is not ``x * 1.0``.
- Constants of a 16-bit float (or fp8) tensor are rounded to nearest (the interpreter truncated
  bf16 ones), and comparisons run in the operands' common dtype: bf16 ``x == 0.1`` holds for
  ``x = bf16(0.1)``.
- An int base with a float tensor exponent (``2 ** y``) is a float.
- fp8 values compare, test for NaN and for truth by value, not by their bits.
"""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl


def _kernel(fn):
    return helion.kernel(fn, backend="triton", autotune_effort="none")


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _assert_same(got: torch.Tensor, want: torch.Tensor, what: str = "") -> None:
    """Same dtype and values, bit for bit (NaN equal to NaN)."""
    assert got.dtype == want.dtype, what
    torch.testing.assert_close(got, want, atol=0, rtol=0, equal_nan=True, msg=what or None)


# -- ints outside the dtype's range ----------------------------------------------------------------


@_kernel
def int_constants(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    xor = torch.empty_like(x)
    mask = torch.empty_like(x)
    sub = torch.empty_like(x)
    mul = torch.empty_like(x)
    below = torch.empty(x.shape, dtype=torch.bool, device=x.device)
    equal = torch.empty(x.shape, dtype=torch.bool, device=x.device)
    for tile in hl.tile(x.size(0)):
        v = x[tile, :]
        xor[tile, :] = v ^ 0xFF
        mask[tile, :] = v & 0xFFFFFFFF
        sub[tile, :] = v - 300
        mul[tile, :] = v * 1000
        below[tile, :] = v < 300
        equal[tile, :] = v == 2**32 + 44
    return xor, mask, sub, mul, below, equal


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_int_constant_wraps_into_the_dtype(dtype: torch.dtype, device: torch.device) -> None:
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, (37, 11), generator=_generator(), dtype=torch.int64)
    x = x.to(dtype).to(device)
    x[0, :3] = torch.tensor([44, info.min, info.max], dtype=dtype)
    expected = (x ^ 0xFF, x & 0xFFFFFFFF, x - 300, x * 1000, x < 300, x == 2**32 + 44)
    for got, want in zip(int_constants(x), expected, strict=True):
        assert got.dtype == want.dtype
        assert torch.equal(got, want)


@_kernel
def uint64_mask(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = (x[tile] ^ -1) & 0xFFFF_FFFF_FFFF
    return out


def test_negative_constant_of_an_unsigned_dtype(device: torch.device) -> None:
    x = torch.randint(0, 2**40, (53,), generator=_generator()).to(torch.uint64).to(device)
    assert torch.equal(uint64_mask(x), (x ^ -1) & 0xFFFF_FFFF_FFFF)


# -- 16-bit floats with a scalar -----------------------------------------------------------------------


@_kernel
def scalar_arithmetic(x: torch.Tensor, a: float, n: int) -> tuple[torch.Tensor, ...]:
    outs = [torch.empty_like(x) for _ in range(8)]
    for tile in hl.tile(x.size(0)):
        v = x[tile, :]
        outs[0][tile, :] = v * a
        outs[1][tile, :] = v * 1.1
        outs[2][tile, :] = v + 0.3
        outs[3][tile, :] = 0.3 - v
        outs[4][tile, :] = v - a
        outs[5][tile, :] = v * 4097
        outs[6][tile, :] = v * n
        outs[7][tile, :] = v * 1.003 + 0.3
    return tuple(outs)


def _opmath(x: torch.Tensor, a: float, n: int) -> tuple[torch.Tensor, ...]:
    """torch's CUDA results: float32 math, the scalar in float32, one rounding per op."""
    f, dtype = x.float(), x.dtype

    def s(value: float) -> torch.Tensor:
        return torch.tensor(value, dtype=torch.float32, device=x.device)

    return (
        (f * s(a)).to(dtype),
        (f * s(1.1)).to(dtype),
        (f + s(0.3)).to(dtype),
        (s(0.3) - f).to(dtype),
        (f - s(a)).to(dtype),
        (f * s(4097)).to(dtype),
        (f * s(n)).to(dtype),
        ((f * s(1.003)).to(dtype).float() + s(0.3)).to(dtype),
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("a", [1.003, 1.0004, -0.1])
def test_16_bit_op_with_a_scalar_computes_in_float32(
    dtype: torch.dtype, a: float, device: torch.device
) -> None:
    x = (torch.randn(101, 13, generator=_generator()) * 100).to(dtype).to(device)
    n = 4097
    got = scalar_arithmetic(x, a, n)
    for index, (out, want) in enumerate(zip(got, _opmath(x, a, n), strict=True)):
        assert out.dtype == dtype
        assert torch.equal(out, want), f"output {index}"
    # mul by a Python float is the same on torch's CPU kernels
    assert torch.equal(got[0], x * a)
    assert torch.equal(got[1], x * 1.1)


@_kernel
def exact_scalars(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = (x[tile, :] * 2.0 - 1) * y[tile, :] + 0.5
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_scalars_the_dtype_holds_stay_exact(dtype: torch.dtype, device: torch.device) -> None:
    x = torch.randn(29, 17, generator=_generator()).to(dtype).to(device)
    y = torch.randn(29, 17, generator=_generator()).to(dtype).to(device)
    assert torch.equal(exact_scalars(x, y), (x * 2.0 - 1) * y + 0.5)
    bound = exact_scalars.bind((x, y))
    code = bound.to_triton_code(bound.config_spec.default_config())
    # the dtype holds 2.0, 1 and 0.5 exactly, and the op in it is exact: no float32 detour
    # (on the GPU; the interpreter takes bf16 through float32 for every op)
    if dtype == torch.float16:
        assert "float32" not in code.split("def exact_scalars")[0].split("@triton.jit")[-1]


# -- 16-bit constants and comparisons ------------------------------------------------------------------


@_kernel
def constants(x: torch.Tensor, a: float) -> tuple[torch.Tensor, ...]:
    filled = torch.empty_like(x)
    full_like = torch.empty_like(x)
    full = torch.empty_like(x)
    clamped = torch.empty_like(x)
    compared = [torch.empty(x.shape, dtype=torch.bool, device=x.device) for _ in range(4)]
    for tile in hl.tile(x.size(0)):
        v = x[tile, :]
        filled[tile, :] = torch.where(v > 0, v, 0.1)
        full_like[tile, :] = torch.full_like(v, 0.1)
        full[tile, :] = hl.full([tile, x.size(1)], 0.1, dtype=x.dtype)
        clamped[tile, :] = torch.clamp(v, max=0.1)
        compared[0][tile, :] = v <= 0.1
        compared[1][tile, :] = v == 0.1
        compared[2][tile, :] = v > a
        compared[3][tile, :] = v == 4097
    return filled, full_like, full, clamped, *compared


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_constants_round_and_compare_in_the_dtype(dtype: torch.dtype, device: torch.device) -> None:
    x = torch.randn(43, 7, generator=_generator()).to(dtype).to(device)
    x[:, 0] = 0.1  # bf16(0.1): 0.10009765625
    x[:, 1] = 1.0
    x[0, 2] = 4097  # 4096 in bfloat16, 4096 in float16
    x[1, 2] = float("nan")
    a = 1.001  # 1.0 in bfloat16: x > a is False for x == 1.0 in torch
    expected = (
        torch.where(x > 0, x, 0.1),
        torch.full_like(x, 0.1),
        torch.full(x.shape, 0.1, dtype=dtype, device=device),
        torch.clamp(x, max=0.1),
        x <= 0.1,
        x == 0.1,
        x > a,
        x == 4097,
    )
    for index, (got, want) in enumerate(zip(constants(x, a), expected, strict=True)):
        _assert_same(got, want, f"output {index}")


# -- an int base ------------------------------------------------------------------------------------------


@_kernel
def number_bases(y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    two = torch.empty_like(y)
    three = torch.empty_like(y)
    half = torch.empty_like(y)
    for tile in hl.tile(y.size(0)):
        two[tile] = 2 ** y[tile]
        three[tile] = torch.pow(3, y[tile])
        half[tile] = 0.5 ** y[tile]
    return two, three, half


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_int_base_with_a_float_exponent(dtype: torch.dtype, device: torch.device) -> None:
    y = (torch.randn(203, generator=_generator()) * 4).to(dtype).to(device)
    y[:9] = torch.tensor([0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 10.0, 0.5, -0.5], dtype=dtype)
    two, three, half = number_bases(y)
    integral = (y == y.round()) & (y.abs() <= 10)
    for got, want in ((two, 2**y), (three, torch.pow(3, y)), (half, 0.5**y)):
        rtol = 1e-5 if dtype == torch.float32 else 0  # fp16 / bf16: rounded to the same value
        torch.testing.assert_close(got, want, atol=0, rtol=rtol)
    # powers of two with integral exponents are exact
    _assert_same(two[integral], (2**y)[integral])
    _assert_same(half[integral], (0.5**y)[integral])


# -- truth of floats --------------------------------------------------------------------------------------


@_kernel
def truth(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    any_ = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    all_ = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    as_bool = torch.empty(x.shape, dtype=torch.bool, device=x.device)
    for tile in hl.tile(x.size(0)):
        any_[tile] = torch.any(x[tile, :], dim=1)
        all_[tile] = torch.all(x[tile, :], dim=1)
        as_bool[tile, :] = x[tile, :].bool()
    return any_, all_, as_bool


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2],
    ids=str,
)
def test_truth_of_floats(dtype: torch.dtype, device: torch.device) -> None:
    """0.5 is true (it was truncated to the int 0), -0.0 false (its bits are not 0)."""
    x = torch.zeros(23, 5)
    x[0, 1] = 0.5
    x[1, :] = -0.0
    x[2, 3] = float("nan")
    x[3:, :] = torch.rand(20, 5, generator=_generator()) + 0.25
    x[5, 2] = -0.0
    x = x.to(dtype)
    expected = (x.any(1), x.all(1), x.bool())  # on CPU: CUDA torch has no fp8 any / all
    for got, want in zip(truth(x.to(device)), expected, strict=True):
        assert torch.equal(got.cpu(), want)


@_kernel
def fp8_compare(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    outs = [torch.empty(x.shape, dtype=torch.bool, device=x.device) for _ in range(4)]
    picked = torch.empty_like(x)
    filled = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        a = x[tile, :]
        b = y[tile, :]
        outs[0][tile, :] = a == b
        outs[1][tile, :] = a != b
        outs[2][tile, :] = torch.isnan(a)
        outs[3][tile, :] = a == 0.1
        picked[tile, :] = torch.where(a == b, a, b)
        filled[tile, :] = torch.where(a != a, a, 0.1)
    return *outs, picked, filled


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_fp8_compares_values(dtype: torch.dtype, device: torch.device) -> None:
    generator = _generator()
    x = (torch.randn(31, 9, generator=generator) * 3).to(dtype)
    y = x.clone()
    y[::2] = torch.randn(16, 9, generator=generator).to(dtype)
    x[0, 0] = y[0, 0] = float("nan")
    x[1, 1], y[1, 1] = -0.0, 0.0
    x[2, 2] = 0.1
    tenth = torch.tensor(0.1).to(dtype)
    expected = (  # on CPU, which compares and selects fp8
        x == y,
        x != y,
        torch.isnan(x),
        x == tenth,
        torch.where(x == y, x, y),
        torch.where(x != x, x, tenth),
    )
    results = fp8_compare(x.to(device), y.to(device))
    for index, (got, want) in enumerate(zip(results, expected, strict=True)):
        got = got.cpu()
        assert got.dtype == want.dtype
        if want.dtype == dtype:
            got, want = got.view(torch.uint8), want.view(torch.uint8)
        assert torch.equal(got, want), f"output {index}"
