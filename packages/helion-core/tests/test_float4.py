"""hl.float4_e2m1fn_x2_to_float32: packed FP4 (E2M1) pairs decoded to float32.

Every byte value is checked bit for bit (the sign of zero included) against a decoder written
here from the format's definition, on the ref backend, in eager mode, and on Triton (through its
interpreter on CPU), Pallas and CuTe where they are installed (CuTe compiles without a GPU and
runs only with one). A small matmul with unpacked weights checks the values in use.
"""

from __future__ import annotations

import math

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.testing import require_backend

BACKENDS = ["ref", "eager", "triton", "pallas", "cute"]


def decode_e2m1(code: int) -> float:
    """One E2M1 code: sign (bit 3), exponent (bits 2-1, bias 1), mantissa (bit 0)."""
    sign = -1.0 if code & 0b1000 else 1.0
    exponent = (code >> 1) & 0b11
    mantissa = code & 0b1
    if exponent == 0:  # subnormal: 0.m * 2**(1 - bias)
        return sign * math.ldexp(mantissa / 2, 0)
    return sign * math.ldexp(1 + mantissa / 2, exponent - 1)


def reference_unpack(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(lo, hi) float32 tensors: the first value of each byte is in bits 0-3."""
    table = torch.tensor([decode_e2m1(code) for code in range(16)], dtype=torch.float32)
    codes = packed.to(torch.int64)
    return table[codes & 0xF], table[codes >> 4]


def torch_float4_unpack(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """torch's own decoding of torch.float4_e2m1fn_x2, where this torch can convert it."""
    dtype = getattr(torch, "float4_e2m1fn_x2", None)
    if dtype is None:
        return None
    try:
        pairs = packed.view(dtype).to(torch.float32)
    except (RuntimeError, NotImplementedError, TypeError):
        return None
    # a float conversion of the packed dtype gives the two values of each byte, first first
    if pairs.shape != (*packed.shape[:-1], packed.shape[-1] * 2):
        return None
    pairs = pairs.reshape(*packed.shape, 2)
    return pairs[..., 0], pairs[..., 1]


def same_bits(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    return actual.dtype == torch.float32 and torch.equal(
        actual.view(torch.int32), expected.view(torch.int32)
    )


def unpack_rows(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lo = torch.empty(packed.shape, dtype=torch.float32, device=packed.device)
    hi = torch.empty(packed.shape, dtype=torch.float32, device=packed.device)
    for tile_m, tile_n in hl.tile(packed.size()):
        first, second = hl.float4_e2m1fn_x2_to_float32(packed[tile_m, tile_n])
        lo[tile_m, tile_n] = first
        hi[tile_m, tile_n] = second
    return lo, hi


def fp4_matmul(a: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`a @ w` for FP4 weights packed along N: byte [k, j] holds w[k, 2j] and w[k, 2j + 1]."""
    m, k = a.size()
    half_n = weights.size(1)
    even = torch.empty([m, half_n], dtype=torch.float32, device=a.device)
    odd = torch.empty([m, half_n], dtype=torch.float32, device=a.device)
    for tile_m, tile_n in hl.tile([m, half_n]):
        acc_even = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        acc_odd = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            lo, hi = hl.float4_e2m1fn_x2_to_float32(weights[tile_k, tile_n])
            rows = a[tile_m, tile_k]
            acc_even = torch.addmm(acc_even, rows, lo)
            acc_odd = torch.addmm(acc_odd, rows, hi)
        even[tile_m, tile_n] = acc_even
        odd[tile_m, tile_n] = acc_odd
    return even, odd


def _kernel(fn, backend: str) -> helion.Kernel:
    if backend == "eager":
        return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)
    require_backend(backend)
    return helion.kernel(fn, backend=backend, autotune_effort="none", dot_precision="ieee")


def _run(kernel: helion.Kernel, backend: str, args: tuple):
    """The kernel's outputs; None for CuTe without a GPU, where it is only compiled."""
    if backend == "cute" and not torch.cuda.is_available():
        bound = kernel.bind(args)
        bound.compile_config(bound.config_spec.default_config())  # runs cute.compile
        return None
    if backend == "cute":
        args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)
    outputs = kernel(*args)
    return tuple(o.cpu() for o in outputs)


def test_the_reference_decoder_is_the_e2m1_format():
    magnitudes = [decode_e2m1(code) for code in range(8)]
    assert magnitudes == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert [decode_e2m1(code) for code in range(8, 16)] == [-m for m in magnitudes]
    assert math.copysign(1.0, decode_e2m1(0b1000)) == -1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_byte_value(backend):
    # all 256 bytes, in a shape that is not a power of two (and some of them twice)
    codes = torch.arange(256, dtype=torch.int32)
    packed = torch.cat([codes, codes[:44]]).to(torch.uint8).reshape(12, 25)
    outputs = _run(_kernel(unpack_rows, backend), backend, (packed,))
    if outputs is None:
        return
    lo, hi = outputs
    expected_lo, expected_hi = reference_unpack(packed)
    assert lo.shape == hi.shape == packed.shape
    assert same_bits(lo, expected_lo), (lo, expected_lo)
    assert same_bits(hi, expected_hi), (hi, expected_hi)


def test_reference_matches_torch_float4_dtype_where_it_converts():
    packed = torch.arange(256, dtype=torch.uint8).reshape(16, 16)
    from_torch = torch_float4_unpack(packed)
    if from_torch is None:
        pytest.skip("this torch has no float conversion of torch.float4_e2m1fn_x2")
    lo, hi = reference_unpack(packed)
    assert same_bits(from_torch[0].float(), lo) and same_bits(from_torch[1].float(), hi)


@pytest.mark.filterwarnings("ignore:This static loop")  # CuTe's note on its own unrolled copies
@pytest.mark.parametrize("backend", BACKENDS)
def test_unpacked_weights_in_a_matmul(backend):
    generator = torch.Generator().manual_seed(7)
    m, k, half_n = 37, 45, 23  # N = 46: no dimension is a power of two
    a = torch.randn(m, k, generator=generator)
    weights = torch.randint(0, 256, (k, half_n), dtype=torch.uint8, generator=generator)
    outputs = _run(_kernel(fp4_matmul, backend), backend, (a, weights))
    if outputs is None:
        return
    even, odd = outputs
    lo, hi = reference_unpack(weights)
    # torch.float4_e2m1fn_x2's order: the low nibble is the element before the high one
    w = torch.stack([lo, hi], dim=-1).reshape(k, 2 * half_n)
    expected = a.double() @ w.double()
    actual = torch.stack([even, odd], dim=-1).reshape(m, 2 * half_n)
    torch.testing.assert_close(actual.double(), expected, rtol=1e-5, atol=1e-4)


def unpack_any(value: torch.Tensor) -> torch.Tensor:
    out = torch.empty(value.shape, dtype=torch.float32, device=value.device)
    for tile in hl.tile(value.size(0)):
        lo, hi = hl.float4_e2m1fn_x2_to_float32(value[tile])
        out[tile] = lo + hi
    return out


@pytest.mark.parametrize("backend", ["ref", "eager"])
def test_bytes_only(backend):
    kernel = _kernel(unpack_any, backend)
    with pytest.raises(exc.TypeInferenceError) as info:
        kernel(torch.randn(10))
    message = str(info.value)
    assert "hl.float4_e2m1fn_x2_to_float32" in message and "torch.float32" in message, message
    if backend == "ref":
        assert "test_float4.py" in message, message  # traced code names the kernel's line
    packed = torch.randint(0, 256, (10,), dtype=torch.uint8)
    lo, hi = reference_unpack(packed)
    # int8 bytes hold the same bits
    torch.testing.assert_close(kernel(packed.view(torch.int8)), lo + hi)
    float4 = getattr(torch, "float4_e2m1fn_x2", None)
    if float4 is not None:
        with pytest.raises(exc.TypeInferenceError, match=r"x\.view\(torch\.uint8\)"):
            kernel(packed.view(float4))


def test_outside_a_kernel():
    with pytest.raises(exc.NotInsideKernel):
        hl.float4_e2m1fn_x2_to_float32(torch.zeros(4, dtype=torch.uint8))


def _decode_in_host_code(x: torch.Tensor) -> torch.Tensor:
    lo, hi = hl.float4_e2m1fn_x2_to_float32(x)  # host code: not allowed
    out = torch.empty_like(lo)
    for tile in hl.tile(x.size(0)):
        out[tile] = lo[tile] + hi[tile]
    return out


def test_host_code_may_not_decode() -> None:
    kernel = helion.kernel(_decode_in_host_code, backend="ref", autotune_effort="none")
    with pytest.raises(exc.DeviceAPIOnHost, match="float4_e2m1fn_x2_to_float32"):
        kernel(torch.arange(37, dtype=torch.uint8))
