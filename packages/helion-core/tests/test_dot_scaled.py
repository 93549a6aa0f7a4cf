"""hl.dot_scaled (block-scaled MMA) on the ref backend and in eager mode, against a float64
reference that dequantizes the operands independently of `helion.language._mx` (a lookup table
for e2m1, powers of two for the e8m0 scales)."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.language import _mx

E2M1_TABLE = [
    0.0,
    0.5,
    1.0,
    1.5,
    2.0,
    3.0,
    4.0,
    6.0,
    -0.0,
    -0.5,
    -1.0,
    -1.5,
    -2.0,
    -3.0,
    -4.0,
    -6.0,
]
STORAGE = {
    "e4m3": torch.float8_e4m3fn,
    "e5m2": torch.float8_e5m2,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


# -- an independent reference -------------------------------------------------------------------


def _decode(data: torch.Tensor, fmt: str, k_dim: int) -> torch.Tensor:
    if fmt != "e2m1":
        return data.to(torch.float64)
    table = torch.tensor(E2M1_TABLE, dtype=torch.float64)
    low = table[(data & 0xF).long()]
    high = table[(data >> 4).long()]
    if k_dim == 1:
        return torch.stack([low, high], dim=2).flatten(1, 2)
    return torch.stack([low, high], dim=1).flatten(0, 1)


def _scale(scale: torch.Tensor) -> torch.Tensor:
    values = torch.tensor(2.0, dtype=torch.float64) ** (scale.to(torch.float64) - 127)
    return torch.where(scale == 255, torch.tensor(float("nan"), dtype=torch.float64), values)


def reference(x, x_scale, x_format, y, y_scale, y_format) -> torch.Tensor:
    a = _decode(x, x_format, 1)
    b = _decode(y, y_format, 0)
    if x_scale is not None:
        a = a * _scale(x_scale).repeat_interleave(32, dim=1)
    if y_scale is not None:
        b = b * _scale(y_scale).repeat_interleave(32, dim=1).T
    return a @ b


def operand(fmt: str, rows: int, k: int, *, rhs: bool) -> torch.Tensor:
    if fmt == "e2m1":
        shape = (k // 2, rows) if rhs else (rows, k // 2)
        return torch.randint(0, 256, shape, dtype=torch.uint8)
    shape = (k, rows) if rhs else (rows, k)
    return torch.randn(shape).to(STORAGE[fmt])


def scales(rows: int, k: int) -> torch.Tensor:
    return torch.randint(120, 135, (rows, k // 32), dtype=torch.uint8)


def assert_matches(actual: torch.Tensor, expected: torch.Tensor) -> None:
    scale = float(expected.abs().max()) or 1.0
    torch.testing.assert_close(actual.to(torch.float64), expected, rtol=1e-5, atol=1e-5 * scale)


# -- kernels ------------------------------------------------------------------------------------------


def dot_scaled_full_k(x, x_scale, y, y_scale, x_format: hl.constexpr, y_format: hl.constexpr):
    m, n = x.size(0), y.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = hl.dot_scaled(
            x[tile_m, :], x_scale[tile_m, :], x_format, y[:, tile_n], y_scale[tile_n, :], y_format
        )
    return out


def dot_scaled_k_tiles(x, x_scale, y, y_scale):
    """e4m3 x e5m2 with K in tiles of 64: two scale groups per tile, masked in the last tile."""
    m, k = x.size()
    n = y.size(1)
    groups = k // 32
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k, block_size=64):
            group = tile_k.begin // 32 + hl.arange(2)
            valid = (group < groups)[None, :]
            acc = hl.dot_scaled(
                x[tile_m, tile_k],
                hl.load(x_scale, [tile_m, group], extra_mask=valid),
                "e4m3",
                y[tile_k, tile_n],
                hl.load(y_scale, [tile_n, group], extra_mask=valid),
                "e5m2",
                acc=acc,
            )
        out[tile_m, tile_n] = acc
    return out


def dot_scaled_fp4_k_tiles(x, x_scale, y, y_scale):
    """e2m1 (packed, K // 2 bytes per row) x e4m3, K in tiles of 64 values = 32 bytes."""
    m, k_bytes = x.size()
    n = y.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_kb in hl.tile(k_bytes, block_size=32):
            rows = tile_kb.begin * 2 + hl.arange(64)
            group = tile_kb.begin // 16 + hl.arange(2)
            acc = hl.dot_scaled(
                x[tile_m, tile_kb],
                x_scale[tile_m, group],
                "e2m1",
                y[rows, tile_n],
                y_scale[tile_n, group],
                "e4m3",
                acc=acc,
            )
        out[tile_m, tile_n] = acc
    return out


def dot_scaled_acc_fp16(x, x_scale, y, y_scale):
    m, n = x.size(0), y.size(1)
    out = torch.empty([m, n], dtype=torch.float16, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.full([tile_m, tile_n], 1.0, dtype=torch.float16)
        out[tile_m, tile_n] = hl.dot_scaled(
            x[tile_m, :],
            x_scale[tile_m, :],
            "e4m3",
            y[:, tile_n],
            y_scale[tile_n, :],
            "e4m3",
            acc=acc,
        )
    return out


def dot_unscaled_bf16_out(x, y):
    m, n = x.size(0), y.size(1)
    out = torch.empty([m, n], dtype=torch.bfloat16, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = hl.dot_scaled(
            x[tile_m, :], None, "bf16", y[:, tile_n], None, "e2m1", out_dtype=torch.bfloat16
        )
    return out


def ref_kernel(fn):
    return helion.kernel(fn, backend="ref", autotune_effort="none")


def eager_kernel(fn):
    return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)


# -- the reference itself -------------------------------------------------------------------------------


def test_e2m1_and_e8m0_decoding():
    codes = torch.arange(16, dtype=torch.uint8)
    torch.testing.assert_close(_mx.e2m1_to_float(codes), torch.tensor(E2M1_TABLE), rtol=0, atol=0)
    packed = torch.tensor([[0x21, 0xF7]], dtype=torch.uint8)  # low nibble first
    torch.testing.assert_close(_mx.unpack_e2m1(packed, 1), torch.tensor([[0.5, 1.0, 6.0, -6.0]]))
    torch.testing.assert_close(
        _mx.unpack_e2m1(packed.T.contiguous(), 0), torch.tensor([[0.5, 1.0, 6.0, -6.0]]).T
    )
    bytes_ = torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)
    decoded = _mx.e8m0_to_float(bytes_)
    expected = torch.tensor([2.0**-127, 2.0**-126, 0.5, 1.0, 2.0, 2.0**127, float("nan")])
    torch.testing.assert_close(decoded, expected, rtol=0, atol=0, equal_nan=True)


# -- ref backend and eager mode ---------------------------------------------------------------------------

FORMAT_PAIRS = [
    ("e2m1", "e4m3"),
    ("e4m3", "e5m2"),
    ("e5m2", "e2m1"),
    ("bf16", "fp16"),
    ("fp16", "e2m1"),
]


@pytest.mark.parametrize("x_format, y_format", FORMAT_PAIRS)
def test_full_k_formats(x_format, y_format):
    m, n, k = 37, 21, 96
    x, y = operand(x_format, m, k, rhs=False), operand(y_format, n, k, rhs=True)
    x_scale, y_scale = scales(m, k), scales(n, k)
    expected = reference(x, x_scale, x_format, y, y_scale, y_format)
    args = (x, x_scale, y, y_scale, x_format, y_format)
    assert_matches(ref_kernel(dot_scaled_full_k)(*args), expected)
    assert_matches(eager_kernel(dot_scaled_full_k)(*args), expected)


def test_fp8_storage_as_uint8_bits():
    m, n, k = 19, 23, 64
    x, y = operand("e4m3", m, k, rhs=False), operand("e5m2", n, k, rhs=True)
    x_scale, y_scale = scales(m, k), scales(n, k)
    expected = reference(x, x_scale, "e4m3", y, y_scale, "e5m2")
    args = (x.view(torch.uint8), x_scale, y.view(torch.uint8), y_scale, "e4m3", "e5m2")
    assert_matches(ref_kernel(dot_scaled_full_k)(*args), expected)
    assert_matches(eager_kernel(dot_scaled_full_k)(*args), expected)


def test_k_tiles_with_masked_scales_random_configs():
    m, n, k = 45, 27, 160  # K = 2.5 tiles of 64: the last tile is partial
    x, y = operand("e4m3", m, k, rhs=False), operand("e5m2", n, k, rhs=True)
    x_scale, y_scale = scales(m, k), scales(n, k)
    expected = reference(x, x_scale, "e4m3", y, y_scale, "e5m2")
    args = (x, x_scale, y, y_scale)
    bound = ref_kernel(dot_scaled_k_tiles).bind(args)
    for seed in range(3):
        config = bound.config_spec.random_config(random.Random(seed))
        assert_matches(bound.compile_config(config)(*args), expected)
    assert_matches(eager_kernel(dot_scaled_k_tiles)(*args), expected)


def test_fp4_k_tiles():
    m, n, k = 33, 18, 128
    x, y = operand("e2m1", m, k, rhs=False), operand("e4m3", n, k, rhs=True)
    x_scale, y_scale = scales(m, k), scales(n, k)
    expected = reference(x, x_scale, "e2m1", y, y_scale, "e4m3")
    args = (x, x_scale, y, y_scale)
    assert_matches(ref_kernel(dot_scaled_fp4_k_tiles)(*args), expected)
    assert_matches(eager_kernel(dot_scaled_fp4_k_tiles)(*args), expected)


def test_fp16_accumulator_and_unscaled_bf16_result():
    m, n, k = 20, 17, 64
    x, y = operand("e4m3", m, k, rhs=False), operand("e4m3", n, k, rhs=True)
    x_scale = torch.randint(124, 130, (m, 2), dtype=torch.uint8)
    y_scale = torch.randint(124, 130, (n, 2), dtype=torch.uint8)
    expected = (reference(x, x_scale, "e4m3", y, y_scale, "e4m3") + 1).to(torch.float16)
    for kernel in (ref_kernel(dot_scaled_acc_fp16), eager_kernel(dot_scaled_acc_fp16)):
        out = kernel(x, x_scale, y, y_scale)
        assert out.dtype == torch.float16
        torch.testing.assert_close(out, expected, rtol=2e-3, atol=2e-2)
    a, b = operand("bf16", m, k, rhs=False), operand("e2m1", n, k, rhs=True)
    expected = reference(a, None, "bf16", b, None, "e2m1").to(torch.bfloat16)
    for kernel in (ref_kernel(dot_unscaled_bf16_out), eager_kernel(dot_unscaled_bf16_out)):
        out = kernel(a, b)
        assert out.dtype == torch.bfloat16
        torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)


def test_nan_scale_propagates():
    m, n, k = 16, 16, 32
    x, y = operand("e4m3", m, k, rhs=False), operand("e4m3", n, k, rhs=True)
    x_scale, y_scale = scales(m, k), scales(n, k)
    x_scale[3, 0] = 255
    out = ref_kernel(dot_scaled_full_k)(x, x_scale, y, y_scale, "e4m3", "e4m3")
    assert torch.isnan(out[3]).all() and not torch.isnan(out[:3]).any()


# -- bad input ------------------------------------------------------------------------------------------------


def _bad_format(x, x_scale, y, y_scale):
    out = torch.empty([x.size(0), y.size(1)], device=x.device)
    for tile_m, tile_n in hl.tile([x.size(0), y.size(1)]):
        out[tile_m, tile_n] = hl.dot_scaled(
            x[tile_m, :], x_scale[tile_m, :], "e3m4", y[:, tile_n], y_scale[tile_n, :], "e4m3"
        )
    return out


def _autotuned_k(x, x_scale, y, y_scale):
    m, k = x.size()
    out = torch.empty([m, y.size(1)], device=x.device)
    for tile_m, tile_n in hl.tile([m, y.size(1)]):
        acc = hl.zeros([tile_m, tile_n])
        for tile_k in hl.tile(k):
            acc = hl.dot_scaled(
                x[tile_m, tile_k],
                x_scale[tile_m, :],
                "e4m3",
                y[tile_k, tile_n],
                y_scale[tile_n, :],
                "e4m3",
                acc=acc,
            )
        out[tile_m, tile_n] = acc
    return out


def _swapped_scales(x, x_scale, y, y_scale):
    out = torch.empty([x.size(0), y.size(1)], device=x.device)
    for tile_m, tile_n in hl.tile([x.size(0), y.size(1)]):
        out[tile_m, tile_n] = hl.dot_scaled(
            x[tile_m, :], x_scale[tile_m, :], "e4m3", y[:, tile_n], x_scale[tile_m, :], "e4m3"
        )
    return out


def _fp8_operands(m=16, n=16, k=64):
    return (
        operand("e4m3", m, k, rhs=False),
        scales(m, k),
        operand("e4m3", n, k, rhs=True),
        scales(n, k),
    )


@pytest.mark.parametrize(
    "fn, args, error, text",
    [
        (_bad_format, _fp8_operands(), exc.InvalidAPIUsage, "mat1_format must be one of"),
        (
            dot_scaled_full_k,
            (*_fp8_operands(), "e5m2", "e4m3"),
            exc.TypeInferenceError,
            "must be stored as float8_e5m2 or uint8",
        ),
        (
            dot_scaled_full_k,
            (
                torch.randn(16, 64),
                scales(16, 64),
                torch.randn(64, 16),
                scales(16, 64),
                "e4m3",
                "e4m3",
            ),
            exc.TypeInferenceError,
            "got torch.float32",
        ),
        (
            dot_scaled_full_k,
            (*_fp8_operands()[:3], scales(16, 96), "e4m3", "e4m3"),
            exc.ShapeMismatch,
            "its scales have 3 groups",
        ),
        (_swapped_scales, _fp8_operands(m=24), exc.ShapeMismatch, "mat2_scale has"),
        (
            dot_scaled_full_k,
            (
                *_fp8_operands(k=48)[:1],
                scales(16, 64),
                operand("e4m3", 16, 48, rhs=True),
                scales(16, 64),
                "e4m3",
                "e4m3",
            ),
            exc.ShapeMismatch,
            "not a multiple of 32",
        ),
        (_autotuned_k, _fp8_operands(), exc.TypeInferenceError, "block_size=64"),
    ],
)
def test_bad_input_is_reported_with_the_line(fn, args, error, text):
    with pytest.raises(error) as info:
        ref_kernel(fn)(*args)
    message = str(info.value)
    assert text in message, message
    assert "hl.dot_scaled" in message and "test_dot_scaled.py" in message, message


def test_eager_mode_checks_formats_and_shapes():
    x, x_scale, y, y_scale = _fp8_operands()
    with pytest.raises(exc.InvalidAPIUsage, match="mat1_format must be one of"):
        eager_kernel(_bad_format)(x, x_scale, y, y_scale)
    x, x_scale, y, y_scale = _fp8_operands(m=24)
    with pytest.raises(exc.ShapeMismatch, match="mat2_scale has 24 rows, expected 16"):
        eager_kernel(_swapped_scales)(x, x_scale, y, y_scale)


def test_outside_a_device_loop():
    x, x_scale, y, y_scale = _fp8_operands()
    with pytest.raises(exc.NotInsideKernel):
        hl.dot_scaled(x, x_scale, "e4m3", y, y_scale, "e4m3")


def dot_unscaled_k_loop(x, y):
    m, k = x.size()
    out = torch.empty([m, y.size(1)], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, y.size(1)]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = hl.dot_scaled(
                x[tile_m, tile_k], None, "bf16", y[tile_k, tile_n], None, "e5m2", acc=acc
            )
        out[tile_m, tile_n] = acc
    return out


def test_unscaled_operands_with_an_autotuned_k():
    m, n, k = 21, 19, 224
    x, y = operand("bf16", m, k, rhs=False), operand("e5m2", n, k, rhs=True)
    expected = reference(x, None, "bf16", y, None, "e5m2")
    bound = ref_kernel(dot_unscaled_k_loop).bind((x, y))
    k_block = bound.config_spec.block_sizes[2]
    assert k_block.min_size == 32  # at least one scale block of K per tile
    for seed in range(3):
        config = bound.config_spec.random_config(random.Random(seed))
        assert_matches(bound.compile_config(config)(x, y), expected)
