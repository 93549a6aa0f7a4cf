"""hl.load_float4_e2m1fn_x16_to_float16 and hl.load_bfloat16_x16_to_float16: groups of 16
values, at row-major element offsets into a kernel tensor, decoded to float16.

Every result is compared bit for bit (the sign of zero included) with a PyTorch computation
written here from the definition: the group's elements sliced from ``storage.flatten()``, E2M1
codes decoded by a table, bfloat16 converted with ``Tensor.to(torch.float16)``. Random inputs
of sizes that are not powers of two, on the ref backend, in eager mode, on Triton (through its
interpreter on CPU) and Pallas (interpret mode) where installed; CuTe compiles them (it runs
only on a GPU).
"""

from __future__ import annotations

import math

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.testing import require_backend

BACKENDS = ["ref", "eager", "triton", "pallas"]


# -- the reference ---------------------------------------------------------------------------------


def e2m1(code: int) -> float:
    sign = -1.0 if code & 0b1000 else 1.0
    exponent, mantissa = (code >> 1) & 0b11, code & 0b1
    if exponent == 0:
        return sign * 0.5 * mantissa
    return sign * math.ldexp(1 + mantissa / 2, exponent - 1)


def reference_fp4(storage: torch.Tensor, offsets: torch.Tensor, mask=None) -> torch.Tensor:
    """[*offsets.shape, 16] float16: value j of each group (byte j // 2, low nibble first)."""
    table = torch.tensor([e2m1(c) for c in range(16)], dtype=torch.float32)
    flat = storage.flatten().to(torch.int64)
    rows = []
    for offset, keep in zip(offsets.flatten().tolist(), _keeps(mask, offsets), strict=True):
        if not keep:
            rows.append(torch.zeros(16, dtype=torch.float16))
            continue
        group = flat[offset : offset + 8]
        pairs = torch.stack([table[group & 0xF], table[group >> 4]], dim=-1)
        rows.append(pairs.reshape(16).to(torch.float16))
    return torch.stack(rows).reshape(*offsets.shape, 16)


def reference_bf16(storage: torch.Tensor, offsets: torch.Tensor, mask=None) -> torch.Tensor:
    flat = storage.flatten()
    rows = []
    for offset, keep in zip(offsets.flatten().tolist(), _keeps(mask, offsets), strict=True):
        if keep:
            rows.append(flat[offset : offset + 16].to(torch.float16))
        else:
            rows.append(torch.zeros(16, dtype=torch.float16))
    return torch.stack(rows).reshape(*offsets.shape, 16)


def _keeps(mask, offsets) -> list[bool]:
    if mask is None:
        return [True] * offsets.numel()
    return mask.expand(offsets.shape).flatten().tolist()


def same_bits(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    return (
        actual.dtype == torch.float16
        and actual.shape == expected.shape
        and torch.equal(actual.view(torch.int16), expected.view(torch.int16))
    )


def random_offsets(generator, count: int, numel: int, width: int) -> torch.Tensor:
    """Group offsets anywhere a whole group fits: unaligned, crossing rows, some repeated."""
    offsets = torch.randint(0, numel - width + 1, (count,), generator=generator)
    offsets[0], offsets[-1] = 0, numel - width  # the first and the last group of the storage
    return offsets


# -- kernels ---------------------------------------------------------------------------------------


def fp4_groups(storage: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty([offsets.size(0), 16], dtype=torch.float16, device=offsets.device)
    for tile in hl.tile(offsets.size(0)):
        values = hl.load_float4_e2m1fn_x16_to_float16(storage, offsets[tile])
        for j in hl.static_range(16):
            out[tile, j] = values[j]
    return out


def bf16_groups(storage: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty([offsets.size(0), 16], dtype=torch.float16, device=offsets.device)
    for tile in hl.tile(offsets.size(0)):
        values = hl.load_bfloat16_x16_to_float16(storage, offsets[tile])
        for j in hl.static_range(16):
            out[tile, j] = values[j]
    return out


def fp4_groups_masked(
    storage: torch.Tensor, offsets: torch.Tensor, keep: torch.Tensor
) -> torch.Tensor:
    out = torch.empty([offsets.size(0), 16], dtype=torch.float16, device=offsets.device)
    for tile in hl.tile(offsets.size(0)):
        values = hl.load_float4_e2m1fn_x16_to_float16(storage, offsets[tile], keep[tile])
        for j in hl.static_range(16):
            out[tile, j] = values[j]
    return out


def bf16_groups_masked(
    storage: torch.Tensor, offsets: torch.Tensor, keep: torch.Tensor
) -> torch.Tensor:
    out = torch.empty([offsets.size(0), 16], dtype=torch.float16, device=offsets.device)
    for tile in hl.tile(offsets.size(0)):
        values = hl.load_bfloat16_x16_to_float16(storage, offsets[tile], extra_mask=keep[tile])
        for j in hl.static_range(16):
            out[tile, j] = values[j]
    return out


def fp4_groups_2d(storage: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """2-D group offsets: each output has the shape of the offsets' tile."""
    m, n = offsets.size()
    out = torch.empty([m, n, 16], dtype=torch.float16, device=offsets.device)
    for tile_m, tile_n in hl.tile([m, n]):
        values = hl.load_float4_e2m1fn_x16_to_float16(storage, offsets[tile_m, tile_n])
        for j in hl.static_range(16):
            out[tile_m, tile_n, j] = values[j]
    return out


def fp4_gemv(weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``decode(weights) @ x``: FP4 weights [M, K] packed as [M, K // 2] bytes, bf16 x [K]."""
    m, row_bytes = weights.size()
    out = torch.empty([m], dtype=torch.float32, device=weights.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for g in hl.grid(row_bytes // 8):
            w = hl.load_float4_e2m1fn_x16_to_float16(weights, tile_m.index * row_bytes + g * 8)
            v = hl.load_bfloat16_x16_to_float16(x, g * 16)  # one group: 16 0-D values
            for j in hl.static_range(16):
                acc = acc + w[j].to(torch.float32) * v[j].to(torch.float32)
        out[tile_m] = acc
    return out


def _kernel(fn, backend: str) -> helion.Kernel:
    if backend == "eager":
        return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)
    require_backend(backend)
    return helion.kernel(fn, backend=backend, autotune_effort="none")


# -- values ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["1d", "2d", "3d", "transposed"])
def test_fp4_groups(backend, layout):
    generator = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 256, (7 * 45,), dtype=torch.uint8, generator=generator)
    codes[:256] = torch.arange(256, dtype=torch.uint8)  # every byte value
    storage = {
        "1d": codes,
        "2d": codes.reshape(7, 45),  # 45 bytes a row: groups cross rows
        "3d": codes.reshape(7, 5, 9),
        "transposed": codes.reshape(45, 7).t(),  # not contiguous: offsets follow the shape
    }[layout]
    offsets = random_offsets(generator, 37, storage.numel(), 8)
    # every byte value lands in a group: its 256 bytes are groups 0, 8, ..., 248
    offsets = torch.cat([torch.arange(0, 256, 8), offsets])
    out = _kernel(fp4_groups, backend)(storage, offsets)
    assert same_bits(out, reference_fp4(storage, offsets)), layout


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["1d", "2d", "transposed"])
def test_bf16_groups(backend, layout):
    generator = torch.Generator().manual_seed(2)
    values = torch.randn(9 * 35, generator=generator) * torch.logspace(-30, 30, 9 * 35, 2.0)
    values[:6] = torch.tensor([70000.0, -1e6, 65520.0, 2.0**-25, -(2.0**-24), 1.0 + 2**-10])
    storage = values.to(torch.bfloat16)
    storage = {
        "1d": storage,
        "2d": storage.reshape(9, 35),
        "transposed": storage.reshape(35, 9).t(),
    }[layout]
    offsets = random_offsets(generator, 29, storage.numel(), 16)
    out = _kernel(bf16_groups, backend)(storage, offsets)
    expected = reference_bf16(storage, offsets)
    assert torch.isinf(expected).any()  # beyond float16's range: +-inf, as .to() gives
    assert same_bits(out, expected), layout


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_groups_are_not_read(backend):
    generator = torch.Generator().manual_seed(3)
    fp4 = torch.randint(0, 256, (5, 24), dtype=torch.uint8, generator=generator)
    bf16 = torch.randn(6, 22, generator=generator).to(torch.bfloat16)
    for kernel, storage, width, reference in [
        (fp4_groups_masked, fp4, 8, reference_fp4),
        (bf16_groups_masked, bf16, 16, reference_bf16),
    ]:
        offsets = random_offsets(generator, 19, storage.numel(), width)
        keep = torch.rand(19, generator=generator) < 0.6
        # masked-off groups may point anywhere, even outside the storage
        offsets = torch.where(keep, offsets, torch.full_like(offsets, 10**6))
        out = _kernel(kernel, backend)(storage, offsets, keep)
        assert same_bits(out, reference(storage, offsets.where(keep, 0), keep)), kernel


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_dimensional_offsets(backend):
    generator = torch.Generator().manual_seed(4)
    storage = torch.randint(0, 256, (11, 13), dtype=torch.uint8, generator=generator)
    offsets = random_offsets(generator, 5 * 7, storage.numel(), 8).reshape(5, 7)
    out = _kernel(fp4_groups_2d, backend)(storage, offsets)
    assert same_bits(out, reference_fp4(storage, offsets))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gemv_with_packed_weights(backend):
    generator = torch.Generator().manual_seed(5)
    m, k = 37, 96  # 48 bytes a row: six groups
    weights = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, generator=generator)
    x = torch.randn(k, generator=generator).to(torch.bfloat16)
    out = _kernel(fp4_gemv, backend)(weights, x)
    table = torch.tensor([e2m1(c) for c in range(16)], dtype=torch.float64)
    codes = weights.to(torch.int64)
    w = torch.stack([table[codes & 0xF], table[codes >> 4]], dim=-1).reshape(m, k)
    expected = w @ x.to(torch.float16).double()
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.filterwarnings("ignore:This static loop")  # CuTe's note on its own unrolled copies
def test_cute_compiles_them():
    require_backend("cute")
    generator = torch.Generator().manual_seed(6)
    storage = torch.randint(0, 256, (5, 24), dtype=torch.uint8, generator=generator)
    offsets = random_offsets(generator, 19, storage.numel(), 8)
    kernel = helion.kernel(fp4_groups, backend="cute", autotune_effort="none")
    bound = kernel.bind((storage, offsets))
    compiled = bound.compile_config(bound.config_spec.default_config())  # runs cute.compile
    if torch.cuda.is_available():
        out = compiled(storage.cuda(), offsets.cuda())
        assert same_bits(out.cpu(), reference_fp4(storage, offsets))


def tile_offsets_bool_masks(storage: torch.Tensor) -> torch.Tensor:
    out = torch.empty([5, 16], dtype=torch.float16, device=storage.device)
    for tile in hl.tile(5):
        off = hl.load_bfloat16_x16_to_float16(storage, tile * 16, False)  # every group off
        on = hl.load_bfloat16_x16_to_float16(storage, tile, True)  # a tile: its indices
        for j in hl.static_range(16):
            out[tile, j] = off[j] + on[j]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_tile_offsets_and_bool_masks(backend):
    storage = torch.randn(3, 27).to(torch.bfloat16)
    out = _kernel(tile_offsets_bool_masks, backend)(storage)
    assert same_bits(out, reference_bf16(storage, torch.arange(5)))


# -- how the storage is read ------------------------------------------------------------------------


def test_only_storage_of_several_dims_divides_offsets():
    offsets = torch.arange(5)
    kernel = helion.kernel(fp4_groups, backend="ref", autotune_effort="none")
    flat_ir = kernel.bind((torch.zeros(7 * 45, dtype=torch.uint8), offsets)).ir_text()
    assert "floordiv" not in flat_ir and "remainder" not in flat_ir, flat_ir
    for storage in (
        torch.zeros(7, 45, dtype=torch.uint8),
        torch.zeros(45, 7, dtype=torch.uint8).t(),
    ):
        bound = kernel.bind((storage, offsets))
        assert "floordiv" in bound.ir_text()
        # nothing derived from the arguments: the kernel reads the storage argument itself
        assert [arg.name for arg in bound.env.tensor_args] == ["storage", "offsets", "out"]


def test_a_traced_kernel_reads_the_current_storage():
    generator = torch.Generator().manual_seed(7)
    kernel = helion.kernel(fp4_groups, backend="ref", autotune_effort="none")
    offsets = random_offsets(generator, 9, 7 * 45, 8)
    for _ in range(2):
        storage = torch.randint(0, 256, (7, 45), dtype=torch.uint8, generator=generator)
        assert same_bits(kernel(storage, offsets), reference_fp4(storage, offsets))


def int8_groups(storage: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty([offsets.size(0), 16], dtype=torch.float16, device=offsets.device)
    for tile in hl.tile(offsets.size(0)):
        values = hl.load_float4_e2m1fn_x16_to_float16(storage, offsets[tile])
        for j in hl.static_range(16):
            out[tile, j] = values[j]
    return out


@pytest.mark.parametrize("backend", ["ref", "eager"])
def test_int8_storage_and_int32_offsets(backend):
    generator = torch.Generator().manual_seed(8)
    storage = torch.randint(0, 256, (50,), dtype=torch.uint8, generator=generator)
    offsets = random_offsets(generator, 11, 50, 8).to(torch.int32)
    out = _kernel(int8_groups, backend)(storage.view(torch.int8), offsets)
    assert same_bits(out, reference_fp4(storage, offsets))


# -- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["ref", "eager"])
def test_storage_dtype_is_checked(backend):
    offsets = torch.arange(3)
    with pytest.raises(exc.TypeInferenceError) as info:
        _kernel(fp4_groups, backend)(torch.zeros(40), offsets)
    message = str(info.value)
    assert "hl.load_float4_e2m1fn_x16_to_float16" in message and "torch.float32" in message
    if backend == "ref":
        assert "test_x16_loads.py" in message, message  # traced code names the kernel's line
    with pytest.raises(exc.TypeInferenceError, match=r"expects torch\.bfloat16 storage"):
        _kernel(bf16_groups, backend)(torch.zeros(40, dtype=torch.float16), offsets)
    float4 = getattr(torch, "float4_e2m1fn_x2", None)
    if float4 is not None:
        with pytest.raises(exc.TypeInferenceError, match=r"x\.view\(torch\.uint8\)"):
            _kernel(fp4_groups, backend)(torch.zeros(40, dtype=torch.uint8).view(float4), offsets)


@pytest.mark.parametrize("backend", ["ref", "eager"])
def test_offsets_must_be_integers(backend):
    with pytest.raises(exc.TypeInferenceError, match="integer group_offsets"):
        _kernel(bf16_groups, backend)(torch.zeros(40, dtype=torch.bfloat16), torch.zeros(3))


def load_from_device_tensor(storage: torch.Tensor) -> torch.Tensor:
    out = torch.empty([4], dtype=torch.float16, device=storage.device)
    for tile in hl.tile(4):
        loaded = storage[tile]
        values = hl.load_bfloat16_x16_to_float16(loaded, tile.index)
        out[tile] = values[0]
    return out


def test_storage_must_be_a_kernel_argument():
    kernel = helion.kernel(load_from_device_tensor, backend="ref", autotune_effort="none")
    with pytest.raises(exc.TypeInferenceError, match="must be a kernel tensor argument"):
        kernel(torch.zeros(40, dtype=torch.bfloat16))


def _load_in_host_code(storage: torch.Tensor) -> torch.Tensor:
    values = hl.load_bfloat16_x16_to_float16(storage, 0)  # host code: not allowed
    out = torch.empty([16], dtype=torch.float16)
    for tile in hl.tile(16):
        out[tile] = values[0]
    return out


@pytest.mark.parametrize("backend", ["ref", "eager"])
def test_host_code_may_not_load(backend):
    with pytest.raises(exc.DeviceAPIOnHost, match="load_bfloat16_x16_to_float16"):
        _kernel(_load_in_host_code, backend)(torch.zeros(40, dtype=torch.bfloat16))


def test_outside_a_kernel():
    with pytest.raises(exc.NotInsideKernel):
        hl.load_float4_e2m1fn_x16_to_float16(torch.zeros(8, dtype=torch.uint8), 0)
    with pytest.raises(exc.NotInsideKernel):
        hl.load_bfloat16_x16_to_float16(torch.zeros(16, dtype=torch.bfloat16), 0)
