"""Sizes computed from block sizes, and slices whose start is a device value, on every backend
(found by exploratory ports of public Helion's int4 GEMM):

- `tile.block_size * 2` (and `+`, `-`, exact `//`) as a shape entry of `hl.arange`, `hl.zeros`
  and `reshape`: it raised `TypeInferenceError` ("a shape entry must be an int, a tile or a
  block size, not DeviceValue");
- `bk * 2` for `bk = hl.register_block_size(...)` was the plain int of the config, so
  `.reshape(bk * 2)` of a `[tk, 2]` value raised `ShapeMismatch` naming 128, a config's value;
- a slice whose bounds are device values (`x[t.begin : t.begin + 8]`,
  `a[tm, s : s + bk * 2]`) raised "a device value cannot be used where a Python int is needed";
  it is now the index `start + hl.arange(length)`, masked past the dimension's end.

Triton refuses masking a dimension `k * block_size` whose tiles can be partial, and eager mode
runs a partial last tile with its valid lanes only, so those run sizes that the block sizes
divide; ref and Pallas also run partial tiles.
"""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

import helion
import helion.language as hl
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas", "eager"]
PARTIAL_TILES = {"ref", "pallas"}  # backends that run a k * block_size dim of partial tiles


def _kernel(fn, backend: str):
    if backend == "eager":
        return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)
    require_backend(backend)
    return helion.kernel(fn, backend=backend, autotune_effort="none")


def _run_configs(kernel, backend: str, args: tuple, expected, *, seeds=(0, 1, 2), **tolerance):
    """The kernel's result for its default config and a few random ones (eager: one run)."""
    if backend == "eager":
        torch.testing.assert_close(kernel(*args), expected, **tolerance)
        return
    bound = kernel.bind(args)
    configs = [bound.config_spec.default_config()]
    configs += [bound.config_spec.random_config(random.Random(seed)) for seed in seeds]
    for config in configs:
        got = bound.compile_config(config)(*args)
        torch.testing.assert_close(
            got, expected, **tolerance, msg=lambda m, config=config: f"{config}: {m}"
        )


# -- finding 1: tile.block_size arithmetic as a shape ---------------------------------------------


def doubled_pairs(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0) // 2
    bk = hl.register_block_size(4, 16)
    out = torch.empty_like(x)
    for t in hl.tile(n, block_size=bk):
        lanes = t.begin * 2 + hl.arange(t.block_size * 2)
        zeros = hl.zeros([(t.block_size * 4) // 2 + t.block_size - t.block_size], dtype=x.dtype)
        v = hl.load(x, [lanes], extra_mask=lanes < 2 * n)
        ones = hl.full([v.shape[0]], 1.0, dtype=x.dtype)  # x.shape[0] of a [2*t] value
        hl.store(out, [lanes], v * 2 + zeros + ones, extra_mask=lanes < 2 * n)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_tile_block_size_times_two_sizes_arange_and_zeros(backend: str) -> None:
    n = 21 if backend in PARTIAL_TILES else 48
    x = torch.randn(2 * n)
    kernel = _kernel(doubled_pairs, backend)
    _run_configs(kernel, backend, (x,), x * 2 + 1)


def interleave_rows(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    k, n = lo.shape
    out = lo.new_empty([2 * k, n])
    for tk, tn in hl.tile([k, n], block_size=[8, None]):
        w = torch.stack([lo[tk, tn], hi[tk, tn]], dim=1).reshape(tk.block_size * 2, tn.block_size)
        out[tk.begin * 2 + hl.arange(tk.block_size * 2), tn] = w
    return out


@pytest.mark.parametrize("backend", ["ref", "triton", "eager"])
def test_reshape_to_tile_block_size_times_two(backend: str) -> None:
    """Public Helion's `reshape(tile_k.block_size * 2, tile_n.block_size)` of a stacked pair
    (a fixed block size of 8 rows, an autotuned one of 45 columns; Pallas has no stack)."""
    lo, hi = torch.randn(24, 45), torch.randn(24, 45)
    kernel = _kernel(interleave_rows, backend)
    _run_configs(kernel, backend, (lo, hi), torch.stack([lo, hi], dim=1).reshape(48, 45))


def halves(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] + hl.zeros([t.block_size // 2])
    return out


def size_from_device_value(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] + hl.zeros([t.block_size + t.begin])
    return out


def test_inexact_or_device_dependent_sizes_are_refused_at_their_line() -> None:
    x = torch.randn(20)
    for fn, text in ((halves, "t.block_size // 2"), (size_from_device_value, "t.begin")):
        with pytest.raises(helion.exc.TypeInferenceError, match="computed from a block size") as e:
            helion.kernel(fn, backend="ref", autotune_effort="none")(x)
        assert text in str(e.value)


# -- finding 3: arithmetic on hl.register_block_size values is symbolic ---------------------------


def duplicate(x: torch.Tensor) -> torch.Tensor:
    (k,) = x.shape
    bk = hl.register_block_size(4, 16)
    out = torch.empty([2 * k], dtype=x.dtype, device=x.device)
    for tk in hl.tile(k, block_size=bk):
        v = x[tk]
        w = torch.stack([v, v], dim=1).reshape(bk * 2)
        lanes = tk.begin * 2 + hl.arange(2 * bk)
        hl.store(out, [lanes], w, extra_mask=lanes < 2 * k)
    return out


@pytest.mark.parametrize("backend", ["ref", "triton", "eager"])
def test_reshape_to_registered_block_size_times_two(backend: str) -> None:
    k = 45 if backend in PARTIAL_TILES else 48
    x = torch.randn(k)
    kernel = _kernel(duplicate, backend)
    _run_configs(kernel, backend, (x,), torch.stack([x, x], dim=1).reshape(2 * k))


def wrong_reshape(x: torch.Tensor) -> torch.Tensor:
    (k,) = x.shape
    bk = hl.register_block_size(k)
    out = torch.empty([2 * k], dtype=x.dtype, device=x.device)
    for tk in hl.tile(k, block_size=bk):
        v = x[tk]
        out[tk.begin * 2 + hl.arange(bk * 3)] = torch.stack([v, v], dim=1).reshape(bk * 3)
    return out


def test_a_wrong_reshape_names_block_sizes_not_a_configs_value() -> None:
    with pytest.raises(helion.exc.ShapeMismatch) as e:
        helion.kernel(wrong_reshape, backend="ref", autotune_effort="none")(torch.randn(48))
    message = str(e.value)
    assert "3*tk.block_size" in message, message
    assert "192" not in message and "128" not in message, message


# -- finding 2: slices whose start is a device value ----------------------------------------------


def int4_matmul(a: torch.Tensor, b_packed: torch.Tensor) -> torch.Tensor:
    """public Helion's examples/int4_gemm.py (matmul_bf16_int4), with a bounded block size"""
    m, _ = a.shape
    k_packed, n = b_packed.shape
    block_k = hl.register_block_size(16, 32)
    out = torch.empty([m, n], dtype=torch.bfloat16, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k_packed in hl.tile(k_packed, block_size=block_k):
            a_tile_begin = tile_k_packed.begin * 2
            a_tile_len = block_k * 2
            a_tile = a[tile_m, a_tile_begin : (a_tile_begin + a_tile_len)].to(torch.float32)
            b_tile = b_packed[tile_k_packed, tile_n]
            b_lo = ((b_tile << 4) >> 4).to(torch.int8)
            b_hi = b_tile >> 4
            b_stacked = torch.stack([b_lo, b_hi], dim=1)
            b_unpacked = b_stacked.reshape(tile_k_packed.block_size * 2, tile_n.block_size)
            acc = torch.addmm(acc, a_tile, b_unpacked.to(torch.float32))
        out[tile_m, tile_n] = acc.to(torch.bfloat16)
    return out


def _int4_inputs(m: int, k: int, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a = torch.randn(m, k).bfloat16()
    w = torch.randint(-8, 8, (k, n), dtype=torch.int32)
    packed = (((w[1::2] & 0xF) << 4) | (w[0::2] & 0xF)).to(torch.uint8).view(torch.int8)
    expected = (a.float() @ w.float()).bfloat16()
    return a, packed, expected


@pytest.mark.parametrize("backend", ["ref", "triton", "eager"])
def test_public_int4_gemm(backend: str) -> None:
    a, packed, expected = _int4_inputs(19, 192, 23)  # k // 2 = 96 rows: 16 and 32 divide it
    kernel = _kernel(int4_matmul, backend)
    _run_configs(kernel, backend, (a, packed), expected, atol=2e-2, rtol=2e-2)


def test_public_int4_gemm_with_a_partial_k_tile_on_ref() -> None:
    """k // 2 = 40 packed rows: the last K tile reads past the end of `a`, whose slice lanes
    are masked (reading 0) as the packed rows' are."""
    a, packed, expected = _int4_inputs(19, 80, 23)
    kernel = _kernel(int4_matmul, "ref")
    _run_configs(kernel, "ref", (a, packed), expected, seeds=range(4), atol=2e-2, rtol=2e-2)


def windows(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for i in hl.grid(out.size(0)):
        out[i, :] = x[i : i + 8]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_window_past_the_end_reads_zeros(backend: str) -> None:
    x = torch.randn(29)
    # eager mode runs torch's slice, which is shorter past the end: only whole windows there
    count = 22 if backend == "eager" else 29
    expected = F.pad(x, (0, 8)).unfold(0, 8, 1)[:count]
    _run_configs(_kernel(windows, backend), backend, (x, x.new_empty([count, 8])), expected)


def scale_chunks(x: torch.Tensor) -> torch.Tensor:
    m, width = x.shape
    out = torch.zeros_like(x)
    for tm in hl.tile(m):
        for j in hl.grid((width + 7) // 8):
            start = j * 8
            out[tm, start : start + 8] = x[tm, start : start + 8] * 2
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chunk_past_the_end_is_masked_in_loads_and_stores(backend: str) -> None:
    x = torch.randn(13, 45)  # the last chunk has 5 of its 8 columns inside
    _run_configs(_kernel(scale_chunks, backend), backend, (x,), x * 2)


def blocks_of_4x4(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = x.new_empty([(rows + 3) // 4, (cols + 3) // 4, 4, 4])
    for i, j in hl.grid([(rows + 3) // 4, (cols + 3) // 4]):
        out[i, j, :, :] = x[i * 4 : i * 4 + 4, j * 4 : j * 4 + 4]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_device_valued_slices_make_a_block(backend: str) -> None:
    x = torch.randn(12, 8) if backend == "eager" else torch.randn(13, 10)
    padded = F.pad(x, (0, -x.size(1) % 4, 0, -x.size(0) % 4))
    expected = padded.unfold(0, 4, 4).unfold(1, 4, 4)
    _run_configs(_kernel(blocks_of_4x4, backend), backend, (x,), expected)


def tile_by_begin(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t.begin : t.begin + t.block_size] + 1
    return out


@pytest.mark.parametrize("backend", ["ref", "triton", "pallas"])
def test_a_slice_of_a_tiles_block_size_from_its_begin(backend: str) -> None:
    x = torch.randn(37)
    _run_configs(_kernel(tile_by_begin, backend), backend, (x,), x + 1)


def counts_by_window(counts: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    for i in hl.grid(ids.size(0)):
        start = ids[i]
        hl.atomic_add(counts, [slice(start, start + 4)], 1)
    return counts


def test_an_atomic_on_a_device_valued_slice_is_masked_past_the_end() -> None:
    ids = torch.tensor([0, 3, 9, 10, 12], dtype=torch.int64)
    counts = torch.zeros(11, dtype=torch.int32)
    expected = torch.zeros(11, dtype=torch.int32)
    for start in ids.tolist():
        expected[start : start + 4] += 1
    kernel = helion.kernel(counts_by_window, backend="ref", autotune_effort="none")
    assert torch.equal(kernel(counts, ids), expected)


def slice_of_unknown_length(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t.begin : t.end]
    return out


def slice_beside_index_tensor(x: torch.Tensor) -> torch.Tensor:
    out = x.new_zeros([x.size(0), 4])
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t.index, t.begin : t.begin + 4]
    return out


def test_unsupported_device_valued_slices_name_the_construct_and_line() -> None:
    x = torch.randn(10)
    with pytest.raises(helion.exc.TypeInferenceError, match=r"length \(stop - start\)") as e:
        helion.kernel(slice_of_unknown_length, backend="ref", autotune_effort="none")(x)
    assert "x[t.begin : t.end]" in str(e.value)  # the kernel's line, quoted
    with pytest.raises(helion.exc.InvalidIndexingType, match="index tensor") as e:
        kernel = helion.kernel(slice_beside_index_tensor, backend="ref", autotune_effort="none")
        kernel(torch.randn(10, 12))
    assert "x[t.index, t.begin : t.begin + 4]" in str(e.value)


def arange_from(x: torch.Tensor) -> torch.Tensor:
    out = x.new_zeros([x.size(0)])
    for t in hl.tile(x.size(0), block_size=8):
        lanes = t.begin + hl.arange(2, t.block_size)
        hl.store(out, [lanes], x[lanes.clamp(max=x.size(0) - 1)], extra_mask=lanes < x.size(0))
    return out


def test_arange_from_a_start_to_a_block_size_has_the_difference_of_lanes() -> None:
    x = torch.randn(16)
    out = helion.kernel(arange_from, backend="ref", autotune_effort="none")(x)
    expected = torch.zeros(16)
    for begin in (0, 8):
        expected[begin + 2 : begin + 8] = x[begin + 2 : begin + 8]
    torch.testing.assert_close(out, expected)


# -- a slice bounded by a registered block size ------------------------------------------------


def leading_columns(x: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    bk = hl.register_block_size(32)
    out = torch.zeros([m, bk], dtype=x.dtype, device=x.device)
    for tm in hl.tile(m):
        acc = hl.zeros([tm, bk], dtype=torch.float32)
        for i in hl.static_range(2):
            acc = acc + x[tm, :bk] * (i + 1)
        out[tm, :bk] = acc
    return out


@pytest.mark.parametrize("backend", ["ref", "triton", "pallas"])
def test_a_slice_to_a_registered_block_size_takes_the_configs_length(backend: str) -> None:
    # `x[tm, :bk]` was as long as the int the trace computed with: [tm, 32] next to a [tm, bk]
    # accumulator raised ShapeMismatch, and any other config's length was not followed
    x = torch.randn(37, 45)
    bound = _kernel(leading_columns, backend).bind((x,))
    configs = [bound.config_spec.default_config()]
    configs += [bound.config_spec.random_config(random.Random(seed)) for seed in range(4)]
    assert len({c["block_sizes"][0] for c in configs}) > 1
    for config in configs:
        bk = config["block_sizes"][0]
        got = bound.compile_config(config)(x)
        torch.testing.assert_close(got, x[:, :bk] * 3, msg=lambda m, c=config: f"{c}: {m}")
