"""Pallas results that must equal PyTorch's bit for bit: NaN in max/min reductions, float16 and
bfloat16 ops with scalars, divisions, `torch.sign`, float -> small integer casts. Each kernel runs
under its default config and random ones, on non-power-of-two shapes, against eager PyTorch on
the CPU."""

from __future__ import annotations

import pytest
import torch
from pallas_testing import clone
from pallas_testing import configs
from pallas_testing import gpu_config_spec
from pallas_testing import lower_for_platform
from pallas_testing import pallas_kernel

import helion
import helion.language as hl


def assert_identical(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal values, NaN where NaN, and the same sign on zeros."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.is_floating_point:
        assert torch.equal(actual.isnan(), expected.isnan())
        keep = ~expected.isnan()
        assert torch.equal(actual[keep], expected[keep]), (actual[keep] != expected[keep]).sum()
        assert torch.equal(actual[keep].signbit(), expected[keep].signbit())
    else:
        assert torch.equal(actual, expected), (actual != expected).sum()


def check(fn, args: tuple, expected, seeds=(0, 1), fixed: list[helion.Config] | None = None):
    bound = pallas_kernel(fn).bind(args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for config in configs(bound, seeds) + list(fixed or ()):
        result = bound.compile_config(bound.normalize(config))(*clone(args))
        result = result if isinstance(result, tuple) else (result,)
        for actual, wanted in zip(result, expected, strict=True):
            assert_identical(actual, wanted)


# -- NaN in max / min reductions --------------------------------------------------------------
# XLA on CPU drops NaNs from jnp.max / jnp.min of blocks of 4096 elements and more.


def row_extrema(x: torch.Tensor):
    m = x.size(0)
    amax = torch.empty([m], dtype=x.dtype, device=x.device)
    amin = torch.empty([m], dtype=x.dtype, device=x.device)
    vmax = torch.empty([m], dtype=x.dtype, device=x.device)
    imax = torch.empty([m], dtype=torch.int64, device=x.device)
    vmin = torch.empty([m], dtype=x.dtype, device=x.device)
    imin = torch.empty([m], dtype=torch.int64, device=x.device)
    for t in hl.tile(m):
        row = x[t, :]
        amax[t] = row.amax(1)
        amin[t] = row.amin(1)
        best = torch.max(row, dim=1)
        vmax[t] = best.values
        imax[t] = best.indices
        worst = torch.min(row, dim=1)
        vmin[t] = worst.values
        imin[t] = worst.indices
    return amax, amin, vmax, imax, vmin, imin


def _row_extrema_expected(x: torch.Tensor) -> tuple:
    best, worst = torch.max(x, dim=1), torch.min(x, dim=1)
    return x.amax(1), x.amin(1), best.values, best.indices, worst.values, worst.indices


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_row_max_min_keep_nan(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    x = torch.randn(7, 1500).to(dtype)
    x[1, 1497] = float("nan")
    x[3, 0] = float("nan")
    x[3, 700] = float("nan")
    x[5, 3] = float("inf")  # an inf before a NaN: the NaN still wins
    x[5, 900] = float("nan")
    x[6, 5] = float("-inf")
    blocks = [helion.Config(block_sizes=[2]), helion.Config(block_sizes=[8])]
    check(row_extrema, (x,), _row_extrema_expected(x), fixed=blocks)


def column_max(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(1)], dtype=x.dtype, device=x.device)
    for t in hl.tile(x.size(1)):
        out[t] = x[:, t].amax(0)
    return out


def test_column_max_keeps_nan() -> None:
    torch.manual_seed(1)
    x = torch.randn(1100, 9)
    x[1033, 4] = float("nan")
    check(column_max, (x,), x.amax(0), fixed=[helion.Config(block_sizes=[8])])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_max_min_reductions_lower_for_gpu(dtype: torch.dtype) -> None:
    # argmax/argmin with int32 indices: the Triton lowering takes no int64 ones
    x = torch.randn(7, 1500).to(dtype)
    bound = pallas_kernel(row_extrema).bind((x,))
    text = lower_for_platform(bound, gpu_config_spec(bound).default_config(), "cuda")
    assert "__gpu$xla.gpu.triton" in text


# -- float16 / bfloat16 with scalar operands ---------------------------------------------------
# PyTorch (CPU) reads the scalar of `*`, `/`, `//` at float32 and rounds once; `+`, `-` round
# the scalar to the tensor's dtype first.


def half_scalar_ops(x: torch.Tensor, counts: torch.Tensor, scale: torch.Tensor, a: float):
    n = x.size(0)
    outs = [torch.empty_like(x) for _ in range(20)]
    for t in hl.tile(n):
        v = x[t]
        s = scale[0]
        outs[12][t] = a / v
        outs[13][t] = (a * 2.0) * v
        outs[14][t] = s / v
        outs[15][t] = v / counts[t]
        outs[16][t] = v * (s * 3)
        outs[0][t] = v * a
        outs[1][t] = a * v
        outs[2][t] = v * 1.003
        outs[3][t] = v / a
        outs[4][t] = v / 3.3
        outs[5][t] = v // 0.7
        outs[6][t] = 3.3 / v
        outs[7][t] = v + 0.1
        outs[8][t] = 0.1 - v
        outs[9][t] = v * 257
        outs[10][t] = v * s
        outs[11][t] = s * v
        # a torch function given the number first rounds it to v's dtype
        outs[17][t] = torch.mul(a, v)
        outs[18][t] = torch.div(a, v)
        outs[19][t] = torch.mul(1.003, v)
    return tuple(outs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_ops_with_scalars_match_torch(dtype: torch.dtype) -> None:
    torch.manual_seed(2)
    x = (torch.randn(1237) * 100).to(dtype)
    x[x == 0] = 1
    counts = torch.randint(1, 3000, (1237,), dtype=torch.int32)
    scale = torch.tensor([1.003, 2.0])
    a = 1.003
    s = scale[0]
    expected = (
        x * a,
        a * x,
        x * 1.003,
        x / a,
        x / 3.3,
        x // 0.7,
        3.3 / x,
        x + 0.1,
        0.1 - x,
        x * 257,
        x * s,
        s * x,
        a / x,
        (a * 2.0) * x,
        s / x,
        x / counts,
        x * (s * 3),
        torch.mul(a, x),
        torch.div(a, x),
        torch.mul(1.003, x),
    )
    check(half_scalar_ops, (x, counts, scale, a), expected)


# -- divisions: correctly rounded in interpret mode --------------------------------------------
# XLA turns `x / c` into `x * (1 / c)` and `(x / y) / z` into `x / (y * z)`, each up to an ulp
# off; PyTorch divides. (`x / sqrt(y)`, turned into `x * rsqrt(y)`, is kept too, but XLA's CPU
# sqrt itself is not correctly rounded, so it cannot be compared bit for bit.)


def divisions(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, a: float):
    outs = [torch.empty_like(x) for _ in range(7)]
    for t in hl.tile(x.size()):
        v, w, u = x[t], y[t], z[t]
        outs[0][t] = v / 10.0
        outs[1][t] = v / 3.3
        outs[2][t] = v / a
        outs[3][t] = v / w
        outs[4][t] = (v / w) / u
        outs[5][t] = 3.3 / w
        outs[6][t] = torch.reciprocal(w) + 1.0 / u
    return tuple(outs)


def round_decimals(x: torch.Tensor):
    two = torch.empty_like(x)
    minus_one = torch.empty_like(x)
    for t in hl.tile(x.size()):
        two[t] = torch.round(x[t], decimals=2)
        minus_one[t] = torch.round(x[t], decimals=-1)
    return two, minus_one


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_divisions_are_correctly_rounded(dtype: torch.dtype) -> None:
    torch.manual_seed(3)
    x = (torch.randn(37, 203) * 100).to(dtype)
    y = (torch.rand(37, 203) * 10 + 0.5).to(dtype)
    z = (torch.rand(37, 203) * 10 + 0.5).to(dtype)
    a = 0.7
    expected = (
        x / 10.0,
        x / 3.3,
        # a scalar argument is a float32 in the kernel, as in the ref backend
        x / float(torch.tensor(a, dtype=torch.float32)),
        x / y,
        (x / y) / z,
        3.3 / y,
        torch.reciprocal(y) + 1.0 / z,
    )
    check(divisions, (x, y, z, a), expected)
    rounded = (torch.round(x, decimals=2), torch.round(x, decimals=-1))
    check(round_decimals, (x,), rounded)


def test_divisions_lower_for_gpu() -> None:
    x = torch.randn(37, 203)
    bound = pallas_kernel(divisions).bind((x, x, x, 0.7))
    config = gpu_config_spec(bound).default_config()
    text = lower_for_platform(bound, config, "cuda")
    assert "__gpu$xla.gpu.triton" in text
    from helion_pallas.codegen import generate_source
    from helion_pallas.tunables import PallasOptions

    source, _, _ = generate_source(bound.ir, PallasOptions.parse(config, "gpu"))
    assert "optimization_barrier" not in source  # the Triton lowering has none


# -- torch.sign --------------------------------------------------------------------------------


def signs(x: torch.Tensor, n: torch.Tensor):
    out = torch.empty_like(x)
    out_n = torch.empty_like(n)
    for t in hl.tile(x.size(0)):
        out[t] = torch.sign(x[t])
        out_n[t] = torch.sign(n[t])
    return out, out_n


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sign_matches_torch(dtype: torch.dtype) -> None:
    x = torch.tensor(
        [3.7, -3.7, 0.0, -0.0, float("nan"), -float("nan"), float("inf"), -float("inf"), 1e-30] * 11
    ).to(dtype)
    n = torch.arange(-50, 49, dtype=torch.int32)
    check(signs, (x, n), (torch.sign(x), torch.sign(n)))


# -- float -> int8 / uint8 / int16 casts wrap, as in PyTorch -----------------------------------


def small_int_casts(x: torch.Tensor):
    i8 = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    u8 = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    i16 = torch.empty(x.shape, dtype=torch.int16, device=x.device)
    stored = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    for t in hl.tile(x.size(0)):
        v = x[t]
        i8[t] = v.to(torch.int8)
        u8[t] = v.to(torch.uint8)
        i16[t] = v.to(torch.int16)
        stored[t] = v * 0.5
    return i8, u8, i16, stored


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_float_to_small_int_casts_wrap(dtype: torch.dtype) -> None:
    torch.manual_seed(5)
    x = torch.randn(301) * 40000
    special = [300.7, -130.7, -1.5, 255.9, 256.0, 70000.0, -0.9, 1610612736.0, -(2.0**31)]
    x[:12] = torch.tensor([*special, 65535.0, float("nan"), -float("inf")])
    x = x.to(dtype)
    expected = (x.to(torch.int8), x.to(torch.uint8), x.to(torch.int16), (x * 0.5).to(torch.int8))
    check(small_int_casts, (x,), expected)


def test_casts_and_sign_lower_for_gpu() -> None:
    x = torch.randn(301)
    for fn, args in [(small_int_casts, (x,)), (signs, (x, x.int()))]:
        bound = pallas_kernel(fn).bind(args)
        text = lower_for_platform(bound, gpu_config_spec(bound).default_config(), "cuda")
        assert "__gpu$xla.gpu.triton" in text


def half_mul_div(x: torch.Tensor, a: float):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        v = x[t]
        out[t] = v * a + 1.003 * v + v / 3.3 + 3.3 / v
    return out


def test_half_scalar_ops_lower_for_gpu() -> None:
    # (`//` is left out: Pallas' Triton lowering has no `round`, which jnp.floor_divide uses)
    bound = pallas_kernel(half_mul_div).bind((torch.randn(1237).bfloat16(), 1.003))
    text = lower_for_platform(bound, gpu_config_spec(bound).default_config(), "cuda")
    assert "__gpu$xla.gpu.triton" in text


# -- round, max / min with NaN, fmod, // (rules that avoid what Pallas' Triton lowering lacks) --


def gpu_sensitive_results(a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    return [
        torch.round(a),
        torch.round(a, decimals=2),
        torch.clamp_min(a, 0.5),
        torch.clamp_max(a, 0.5),
        torch.nn.functional.hardtanh(a),
        torch.maximum(a, b),
        torch.minimum(a, b),
        torch.relu(a),
        torch.fmod(a, 1.5),
        torch.fmod(a, b),
        torch.remainder(a, b),
        torch.remainder(a, -1.5),
        a // b,
        -a,
    ]


def gpu_sensitive_ops(x: torch.Tensor, y: torch.Tensor):
    outs = [torch.empty_like(x) for _ in range(14)]
    for t in hl.tile(x.size(0)):
        for out, result in zip(outs, gpu_sensitive_results(x[t], y[t]), strict=True):
            out[t] = result
    return tuple(outs)


def gpu_sensitive_inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    special = [0.0, -0.0, 0.3, -0.3, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -3.0, 4.5, -4.5]
    special += [float("nan"), float("inf"), -float("inf"), 1e30, -1e30, 8388609.0, 0.49999997]
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([torch.tensor(special), torch.randn(300, generator=gen) * 4])
    x = torch.cat([x, (torch.randint(-40, 40, (100,), generator=gen) * 0.5).float()])
    y = torch.randn(x.numel(), generator=gen) * 3
    y[::7] = 1.5
    y[::11] = -1.5
    y[3::13] = float("nan")
    y[5::17] = 0.0
    y[6::19] = float("inf")
    y[8::23] = -float("inf")
    return x.to(dtype), y.to(dtype)


@pytest.mark.parametrize("gpu_rules", [False, True], ids=["interpret", "gpu_rules"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_round_extrema_fmod_floordiv_match_torch(
    dtype: torch.dtype, gpu_rules: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also with the GPU's rules (round from floor, NaN-propagating max/min, `x * -1`), run here
    in interpret mode: they must be exact too."""
    from helion_pallas import lowerings

    if gpu_rules:
        monkeypatch.setattr(lowerings, "gpu_numerics", lambda ctx: True)
    import types

    # a function of its own: the compiled code of `gpu_sensitive_ops` may be cached
    fn = gpu_sensitive_ops
    if gpu_rules:
        fn = types.FunctionType(fn.__code__.replace(), fn.__globals__, "gpu_sensitive_gpu_ops")
    x, y = gpu_sensitive_inputs(dtype)
    check(fn, (x, y), tuple(gpu_sensitive_results(x, y)), seeds=(0,))
    bound = pallas_kernel(fn).bind((x, y))
    source = str(bound.compile_config(bound.config_spec.default_config()).source)
    assert ("jnp.round" not in source) == gpu_rules  # the rules under test were the ones run


def test_round_extrema_fmod_floordiv_lower_for_gpu() -> None:
    from helion_pallas.codegen import generate_source
    from helion_pallas.tunables import PallasOptions

    x, y = gpu_sensitive_inputs(torch.float32)
    bound = pallas_kernel(gpu_sensitive_ops).bind((x, y))
    config = gpu_config_spec(bound).default_config()
    assert "__gpu$xla.gpu.triton" in lower_for_platform(bound, config, "cuda")
    source, _, _ = generate_source(bound.ir, PallasOptions.parse(config, "gpu"))
    assert "jnp.round" not in source and "floor_divide" not in source
    assert "jnp.isnan" in source
