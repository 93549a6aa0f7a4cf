"""float16/bfloat16 math on Pallas: PyTorch's CPU kernels compute exp2, log2, sigmoid, silu,
asin, gelu, ... of a float16/bfloat16 tensor in float32 and round the result once, and
cumsum/cumprod accumulate in float32, rounding each output once. The results must equal eager
PyTorch's (on 37x50 inputs with NaN, infinities and signed zeros in them), up to the rounding
PyTorch's own float32 functions leave open: an element may differ from torch's by one ulp only
where the exact result lies within a few float32 ulps of the midpoint of the two."""

from __future__ import annotations

import math
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from pallas_testing import clone
from pallas_testing import configs
from pallas_testing import gpu_config_spec
from pallas_testing import lower_for_platform
from pallas_testing import pallas_kernel

import helion.language as hl

HALF = [torch.bfloat16, torch.float16]


def unary(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = fn(x[tile])
    return out


def with_specials(x: torch.Tensor, values: list[float]) -> torch.Tensor:
    x = x.clone()
    for i, value in enumerate(values):
        x[i, (7 * i) % x.size(1)] = value
    return x


SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 2.5, -0.5, 1.0, -1.0]


def inputs(domain: str, dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    if domain == "positive":
        x = torch.rand(37, 50, generator=generator) * 20 + 1e-3
        x = with_specials(x, [*SPECIALS, 1e-3, -2.0])
    elif domain == "unit":
        x = torch.rand(37, 50, generator=generator) * 1.98 - 0.99
        x = with_specials(x, [*SPECIALS, 0.999, -0.999, 1.5])
    else:
        x = torch.randn(37, 50, generator=generator) * 4
        x = with_specials(x, [*SPECIALS, 12.2, 9.9, 7.3, -12.0, 25.0])
    return x.to(dtype)


UNARY: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], str]] = {
    "exp": (torch.exp, "any"),
    "exp2": (torch.exp2, "any"),
    "expm1": (torch.expm1, "any"),
    "log": (torch.log, "positive"),
    "log2": (torch.log2, "positive"),
    "log10": (torch.log10, "positive"),
    "log1p": (torch.log1p, "positive"),
    "sqrt": (torch.sqrt, "positive"),
    "rsqrt": (torch.rsqrt, "positive"),
    "sin": (torch.sin, "any"),
    "cos": (torch.cos, "any"),
    "tan": (torch.tan, "unit"),
    "tanh": (torch.tanh, "any"),
    "sigmoid": (torch.sigmoid, "any"),
    "erf": (torch.erf, "any"),
    "erfinv": (torch.erfinv, "unit"),
    "atan": (torch.atan, "any"),
    "asin": (torch.asin, "unit"),
    "acos": (torch.acos, "unit"),
    "sinh": (torch.sinh, "unit"),
    "cosh": (torch.cosh, "unit"),
    "silu": (F.silu, "any"),
    "softplus": (F.softplus, "any"),
}


def assert_torch_rounding(
    actual: torch.Tensor, expected: torch.Tensor, exact: torch.Tensor, slack: float = 2.0**-20
) -> None:
    """`actual` equals `expected` (NaN where NaN), except by one ulp where `exact` (the float64
    result) is within `slack` (relative: float32 error) of the midpoint of the two."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual.isnan(), expected.isnan())
    keep = ~expected.isnan()
    a, e, x = actual[keep].double(), expected[keep].double(), exact[keep]
    differ = a != e
    if not differ.any():
        return
    a, e, x = a[differ], e[differ], x[differ]
    ulp = (
        torch.nextafter(e.to(actual.dtype), e.to(actual.dtype) * 0 + math.inf).double() - e
    ).abs()
    midpoint = (a + e) / 2
    tie = ((a - e).abs() <= ulp * 1.01) & ((x - midpoint).abs() <= x.abs() * slack)
    assert tie.all(), (
        f"{int((~tie).sum())} of {actual.numel()} differ from torch: "
        f"actual {a[~tie][:5].tolist()}, torch {e[~tie][:5].tolist()}"
    )


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_math_in_float32(name: str, dtype: torch.dtype) -> None:
    fn, domain = UNARY[name]
    x = inputs(domain, dtype)
    bound = pallas_kernel(unary).bind((x, fn))
    actual = bound.compile_config(bound.config_spec.default_config())(*clone((x, fn)))
    expected = fn(x)
    if name == "rsqrt":
        # PyTorch's own bf16/fp16 rsqrt is not correctly rounded (about one element in 200 is
        # an ulp off); the float32 computation gives the correctly rounded result
        expected = fn(x.double()).to(dtype)
    assert_torch_rounding(actual, expected, fn(x.double()))


def test_exp2_example() -> None:
    x = torch.tensor([7.3, 9.9, 12.2], dtype=torch.bfloat16)
    bound = pallas_kernel(unary).bind((x, torch.exp2))
    actual = bound.compile_config(bound.config_spec.default_config())(x, torch.exp2)
    assert actual.tolist() == [159.0, 940.0, 4672.0] == torch.exp2(x).tolist()


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
@pytest.mark.parametrize("fn", [F.gelu, gelu_tanh], ids=["gelu", "gelu_tanh"])
def test_gelu_in_float32(fn: Callable[[torch.Tensor], torch.Tensor], dtype: torch.dtype) -> None:
    # Below -3, `1 + erf(x / sqrt(2))` (`1 + tanh(...)`) cancels in float32, where PyTorch's
    # and XLA's float32 erf/tanh leave the result a few float32 ulps of 1 apart: there the two
    # may differ by that much (absolute); everywhere else the results are torch's, up to ties
    # within a few float32 ulps (jax.nn.gelu's float32 formula is not PyTorch's).
    # (PyTorch's bf16 gelu(inf) is NaN: inf is left out)
    x = inputs("any", dtype).nan_to_num(nan=math.nan, posinf=3.0, neginf=-math.inf)
    bound = pallas_kernel(unary).bind((x, fn))
    actual = bound.compile_config(bound.config_spec.default_config())(*clone((x, fn)))
    expected = fn(x)
    tail = x < -3
    exact = fn(x.double())
    assert_torch_rounding(actual[~tail], expected[~tail], exact[~tail], slack=2.0**-14)
    torch.testing.assert_close(
        actual[tail].float(), expected[tail].float(), atol=3e-5, rtol=0, equal_nan=True
    )


def row_scans(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    sums = torch.empty_like(x)
    products = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        sums[tm, :] = torch.cumsum(x[tm, :], 1)
        products[tm, :] = torch.cumprod(x[tm, :], 1)
    return sums, products


def hl_row_scans(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    sums = torch.empty_like(x)
    products = torch.empty_like(x)
    reversed_sums = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        sums[tm, :] = hl.cumsum(x[tm, :], 1)
        products[tm, :] = hl.cumprod(x[tm, :], 1)
        reversed_sums[tm, :] = hl.cumsum(x[tm, :], 1, reverse=True)
    return sums, products, reversed_sums


def column_cumsum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tn in hl.tile(x.size(1)):
        out[:, tn] = torch.cumsum(x[:, tn], 0)
    return out


def scan_input(dtype: torch.dtype, specials: bool) -> torch.Tensor:
    x = 1 + 0.1 * torch.randn(37, 50, generator=torch.Generator().manual_seed(1))
    if specials:
        x[3, 10], x[5, 20], x[7, 30], x[9, 40] = math.nan, math.inf, -math.inf, -0.0
    return x.to(dtype)


def assert_identical(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual.isnan(), expected.isnan())
    keep = ~expected.isnan()
    assert torch.equal(actual[keep], expected[keep]), (
        f"{int((actual[keep] != expected[keep]).sum())} differ, max "
        f"{(actual[keep].float() - expected[keep].float()).abs().max().item()}"
    )


@pytest.mark.parametrize("specials", [False, True], ids=["finite", "specials"])
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_scans_accumulate_in_float32(dtype: torch.dtype, specials: bool) -> None:
    x = scan_input(dtype, specials)
    sums = torch.cumsum(x, 1)
    products = torch.cumprod(x, 1)
    reversed_sums = torch.cumsum(x.flip(1), 1).flip(1)
    for fn, expected in [
        (row_scans, (sums, products)),
        (hl_row_scans, (sums, products, reversed_sums)),
        (column_cumsum, (torch.cumsum(x, 0),)),
    ]:
        bound = pallas_kernel(fn).bind((x,))
        for config in configs(bound, (0, 1)):
            result = bound.compile_config(bound.normalize(config))(x.clone())
            result = result if isinstance(result, tuple) else (result,)
            for actual, wanted in zip(result, expected, strict=True):
                assert_identical(actual, wanted)


def test_cumsum_randn_example() -> None:
    x = torch.randn(37, 50, generator=torch.Generator().manual_seed(0)).bfloat16()
    bound = pallas_kernel(column_cumsum).bind((x,))
    assert_identical(bound.compile_config(bound.config_spec.default_config())(x), x.cumsum(0))
    bound = pallas_kernel(row_scans).bind((x,))
    sums, _ = bound.compile_config(bound.config_spec.default_config())(x)
    assert_identical(sums, x.cumsum(1))


def half_activations(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        v = x[tile]
        out[tile] = torch.exp2(v) + torch.sigmoid(v) + F.silu(v) + F.gelu(v, approximate="tanh")
    return out


def forward_cumsum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        out[tm, :] = torch.cumsum(x[tm, :], 1)
    return out


@pytest.mark.parametrize("fn", [half_activations, forward_cumsum])
def test_half_math_lowers_for_gpu(fn: Callable[..., torch.Tensor]) -> None:
    # (the Triton lowering has forward cumsum only)
    bound = pallas_kernel(fn).bind((torch.randn(37, 50).bfloat16(),))
    text = lower_for_platform(bound, gpu_config_spec(bound).default_config(), "cuda")
    assert "__gpu$xla.gpu.triton" in text
