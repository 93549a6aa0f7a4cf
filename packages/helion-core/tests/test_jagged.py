"""`hl.jagged_tile` on the ref backend (default and random configs) and in eager mode, against
plain PyTorch loops, plus its misuse errors.

The dense inputs hold NaN past each row's length: a lane the implicit mask misses shows up as a
NaN in the result (or a NaN written where nothing may be written).
"""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc


def _ragged(rows: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row lengths in [0, width] and a [rows, width] tensor that is NaN past each length."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, width + 1, (rows,), generator=generator)
    x = torch.randn(rows, width, generator=generator)
    x[torch.arange(width)[None, :] >= lengths[:, None]] = float("nan")
    return x, lengths


def _configs(kernel: helion.Kernel, args: tuple, count: int) -> list:
    bound = helion.kernel(kernel.fn, backend="ref").bind(args)
    spec = bound.config_spec
    return [
        bound,
        [spec.default_config()] + [spec.random_config(random.Random(s)) for s in range(count)],
    ]


def _run_all(kernel: helion.Kernel, args_fn, expected_fn, count: int = 5) -> None:
    """The kernel on the ref backend (default + `count` random configs) and in eager mode."""
    args = args_fn()
    expected = expected_fn(*args)
    bound, configs = _configs(kernel, args, count)
    for config in configs:
        actual = bound.compile_config(config)(*args_fn())
        torch.testing.assert_close(
            actual, expected, equal_nan=True, msg=lambda m, config=config: f"{config}: {m}"
        )
    eager = helion.kernel(kernel.fn, ref_mode=helion.RefMode.EAGER)
    torch.testing.assert_close(eager(*args_fn()), expected, equal_nan=True)


# -- kernels ---------------------------------------------------------------------------------------


@helion.kernel()
def row_stats(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Per row: sum, max, min and sum of exp over the first `lengths[b]` entries."""
    rows = x.size(0)
    out = torch.zeros([rows, 4], dtype=torch.float32, device=x.device)
    for tile_b in hl.tile(rows):
        n = lengths[tile_b]
        total = hl.zeros([tile_b], dtype=torch.float32)
        peak = hl.full([tile_b], float("-inf"), dtype=torch.float32)
        low = hl.full([tile_b], float("inf"), dtype=torch.float32)
        exps = hl.zeros([tile_b], dtype=torch.float32)
        for tile_k in hl.jagged_tile(n):
            values = x[tile_b, tile_k]
            total = total + values.sum(dim=1)
            peak = torch.maximum(peak, values.amax(dim=1))
            low = torch.minimum(low, torch.amin(values, dim=1))
            exps = exps + torch.exp(values).sum(dim=1)
        out[tile_b, 0] = total
        out[tile_b, 1] = peak
        out[tile_b, 2] = low
        out[tile_b, 3] = exps
    return out


def row_stats_reference(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(x.size(0), 4)
    for b, n in enumerate(lengths.tolist()):
        row = x[b, :n]
        out[b] = torch.tensor(
            [
                row.sum(),
                row.max() if n else -float("inf"),
                row.min() if n else float("inf"),
                row.exp().sum(),
            ]
        )
    return out


@helion.kernel()
def jagged_scale(x: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out[b, k] = 2 * x[b, k] for k < lengths[b]; the rest of `out` is not written."""
    rows = x.size(0)
    for tile_b in hl.tile(rows):
        n = lengths[tile_b]
        for tile_k in hl.jagged_tile(n):
            out[tile_b, tile_k] = x[tile_b, tile_k] * 2
    return out


def _scale_args(rows: int, width: int, seed: int):
    x, lengths = _ragged(rows, width, seed)
    return lambda: (x, lengths, torch.full((rows, width), -7.0))


def jagged_scale_reference(
    x: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    out = out.clone()
    for b, n in enumerate(lengths.tolist()):
        out[b, :n] = x[b, :n] * 2
    return out


@helion.kernel()
def values_offsets_max(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    """Per segment and feature of a values + offsets jagged tensor: the max over its rows
    (an empty segment gives -inf). The rows are gathered through an index tensor."""
    segments = x_offsets.size(0) - 1
    features = x_data.size(1)
    out = torch.empty([segments, features], dtype=x_data.dtype, device=x_data.device)
    for tile_b in hl.tile(segments):
        starts = x_offsets[tile_b]
        lengths = x_offsets[tile_b.index + 1] - starts
        for tile_f in hl.tile(features):
            peak = hl.full([tile_b, tile_f], float("-inf"), dtype=torch.float32)
            for tile_r in hl.jagged_tile(lengths):
                rows = starts[:, None] + tile_r.index[None, :]
                peak = torch.maximum(peak, x_data[rows, tile_f].amax(dim=1))
            out[tile_b, tile_f] = peak
    return out


def values_offsets_max_reference(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    out = torch.full((x_offsets.numel() - 1, x_data.size(1)), float("-inf"))
    for b in range(x_offsets.numel() - 1):
        start, end = int(x_offsets[b]), int(x_offsets[b + 1])
        if end > start:
            out[b] = x_data[start:end].amax(0)
    return out


@helion.kernel()
def nested_jagged(
    x: torch.Tensor, features: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    """out[b, m] = sum of x[b, m, :lengths[b]] for m < features[b]; two nested jagged loops."""
    rows = x.size(0)
    for tile_b in hl.tile(rows):
        nf = features[tile_b]
        nl = lengths[tile_b]
        for tile_m in hl.jagged_tile(nf):
            acc = hl.zeros([tile_b, tile_m], dtype=torch.float32)
            for tile_k in hl.jagged_tile(nl):
                acc = acc + x[tile_b, tile_m, tile_k].sum(dim=2)
            out[tile_b, tile_m] = acc
    return out


def _nested_args(seed: int):
    generator = torch.Generator().manual_seed(seed)
    rows, width_m, width_k = 7, 6, 11
    features = torch.randint(0, width_m + 1, (rows,), generator=generator)
    lengths = torch.randint(0, width_k + 1, (rows,), generator=generator)
    x = torch.randn(rows, width_m, width_k, generator=generator)
    outside = (torch.arange(width_m)[None, :, None] >= features[:, None, None]) | (
        torch.arange(width_k)[None, None, :] >= lengths[:, None, None]
    )
    x[outside] = float("nan")
    return lambda: (x, features, lengths, torch.full((rows, width_m), -3.0))


def nested_reference(x, features, lengths, out):
    out = out.clone()
    for b in range(x.size(0)):
        nf, nl = int(features[b]), int(lengths[b])
        out[b, :nf] = x[b, :nf, :nl].sum(-1)
    return out


# -- tests ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_reductions_ignore_lanes_past_each_end(seed):
    x, lengths = _ragged(13, 19, seed)
    _run_all(row_stats, lambda: (x, lengths), row_stats_reference)


@pytest.mark.parametrize("seed", [0, 1])
def test_stores_write_only_valid_lanes(seed):
    _run_all(jagged_scale, _scale_args(11, 17, seed), jagged_scale_reference)


def test_gathered_values_and_offsets():
    generator = torch.Generator().manual_seed(3)
    lengths = torch.randint(0, 14, (10,), generator=generator)
    lengths[2] = 0
    offsets = torch.zeros(11, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    x_data = torch.randn(int(offsets[-1]), 5, generator=generator)
    _run_all(values_offsets_max, lambda: (x_data, offsets), values_offsets_max_reference)


@pytest.mark.parametrize("seed", [0, 1])
def test_nested_jagged_loops(seed):
    _run_all(nested_jagged, _nested_args(seed), nested_reference, count=4)


@helion.kernel()
def column_sums(xt: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """xt is [width, rows]: the jagged tile comes first in the access (the mask is transposed)."""
    rows = xt.size(1)
    out = torch.empty([rows], dtype=torch.float32, device=xt.device)
    for tile_b in hl.tile(rows):
        n = lengths[tile_b]
        acc = hl.zeros([tile_b], dtype=torch.float32)
        for tile_k in hl.jagged_tile(n):
            acc = acc + xt[tile_k, tile_b].sum(dim=0)
        out[tile_b] = acc
    return out


def test_jagged_tile_before_its_parent_in_the_access():
    x, lengths = _ragged(12, 10, 4)
    xt = x.t().contiguous()
    expected = torch.stack([x[b, : int(n)].sum() for b, n in enumerate(lengths)])
    _run_all(column_sums, lambda: (xt, lengths), lambda *a: expected, count=3)


@helion.kernel()
def jagged_accumulate(x: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_b in hl.tile(x.size(0)):
        n = lengths[tile_b]
        for tile_k in hl.jagged_tile(n):
            hl.atomic_add(out, [tile_b, tile_k], x[tile_b, tile_k] + 1)
    return out


def test_atomics_are_masked():
    x, lengths = _ragged(9, 14, 5)

    def reference(x, lengths, out):
        out = out.clone()
        for b, n in enumerate(lengths.tolist()):
            out[b, :n] += x[b, :n] + 1
        return out

    _run_all(jagged_accumulate, lambda: (x, lengths, torch.full((9, 14), 0.5)), reference, count=3)


def test_ir_masks_the_load_and_reduction():
    x, lengths = _ragged(5, 9, 0)
    ir = helion.kernel(row_stats.fn, backend="ref").bind((x, lengths))._discovery_ir
    text = str(ir)
    assert "lt(" in text and "where(" in text
    loads = [n for n in ir.walk() if n.op.name == "load" and n.attrs["tensor"].name == "x"]
    assert loads and all(n.attrs["mask"] is not None for n in loads)


# -- errors -----------------------------------------------------------------------------------------


def _both_modes(kernel_fn, args, error, match):
    with pytest.raises(error, match=match):
        helion.kernel(kernel_fn, backend="ref").bind(args)
    with pytest.raises(error, match=match):
        helion.kernel(kernel_fn, ref_mode=helion.RefMode.EAGER)(*args)


def _outermost(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for tile_k in hl.jagged_tile(lengths):
        out[tile_k] = x[tile_k]
    return out


def _rank0(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for b in hl.grid(x.size(0)):
        for tile_k in hl.jagged_tile(lengths[b]):
            out[b, tile_k] = x[b, tile_k]
    return out


def _float_parent(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for tile_b in hl.tile(x.size(0)):
        for tile_k in hl.jagged_tile(lengths[tile_b].float()):
            out[tile_b, tile_k] = x[tile_b, tile_k]
    return out


def _without_parent_axis(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for tile_b in hl.tile(x.size(0)):
        for tile_k in hl.jagged_tile(lengths[tile_b]):
            out[tile_b, tile_k] = x[0, tile_k][None, :]
    return out


def _parent_not_from_tiles(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for tile_b in hl.tile(x.size(0)):
        for tile_k in hl.jagged_tile(lengths[:]):
            out[tile_b, tile_k] = x[tile_b, tile_k]
    return out


def test_outermost_jagged_tile_is_an_error():
    x, lengths = _ragged(4, 6, 0)
    _both_modes(_outermost, (x, lengths), exc.InvalidJaggedTileUsage, "outermost")


def test_rank0_parent_is_an_error():
    x, lengths = _ragged(4, 6, 0)
    _both_modes(_rank0, (x, lengths), exc.InvalidJaggedTileUsage, "rank 0")


def test_float_parent_is_an_error():
    x, lengths = _ragged(4, 6, 0)
    _both_modes(_float_parent, (x, lengths), exc.InvalidJaggedTileUsage, "integers")


def test_jagged_tile_without_its_parent_axes_is_an_error():
    x, lengths = _ragged(4, 6, 0)
    with pytest.raises(exc.InvalidJaggedTileUsage, match="without all the tiles of its parent"):
        helion.kernel(_without_parent_axis, backend="ref").bind((x, lengths))


def test_parent_axes_must_be_enclosing_tiles():
    x, lengths = _ragged(4, 6, 0)
    with pytest.raises(exc.InvalidJaggedTileUsage, match="not an enclosing tile"):
        helion.kernel(_parent_not_from_tiles, backend="ref").bind((x, lengths))
    with pytest.raises(exc.InvalidJaggedTileUsage, match="one length"):
        helion.kernel(_parent_not_from_tiles, ref_mode=helion.RefMode.EAGER)(x, lengths)
