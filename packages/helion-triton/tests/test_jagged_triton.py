"""`hl.jagged_tile`, `hl.stacktensor_like` and several top-level loops on the Triton backend
(the interpreter on CPU), with the default and random valid configs, against the ref backend on
the same inputs (and PyTorch). StackTensor pointers are raw addresses here: the buffers must be
real tensors, which the interpreter reads through their data pointers."""

from __future__ import annotations

import random

import torch

import helion
import helion.language as hl

RANDOM_CONFIGS = 6


def _compare(fn, make_args, configs: int = RANDOM_CONFIGS, outputs=None) -> None:
    """Triton (default + random configs) against the ref backend's default config. `outputs`
    picks what to compare when the kernel writes into its arguments."""
    args = make_args()
    ref_bound = helion.kernel(fn, backend="ref").bind(args)
    pick = outputs or (lambda result, args: result)
    ref_args = make_args()
    expected = pick(
        ref_bound.compile_config(ref_bound.config_spec.default_config())(*ref_args), ref_args
    )
    bound = helion.kernel(fn, backend="triton").bind(args)
    spec = bound.config_spec
    for config in [spec.default_config()] + [
        spec.random_config(random.Random(s)) for s in range(configs)
    ]:
        run_args = make_args()
        actual = pick(bound.compile_config(config)(*run_args), run_args)
        torch.testing.assert_close(
            actual, expected, equal_nan=True, msg=lambda m, config=config: f"{config}: {m}"
        )


# -- jagged ---------------------------------------------------------------------------------------


def _row_stats(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    rows = x.size(0)
    out = torch.zeros([rows, 3], dtype=torch.float32, device=x.device)
    for tile_b in hl.tile(rows):
        n = lengths[tile_b]
        total = hl.zeros([tile_b], dtype=torch.float32)
        peak = hl.full([tile_b], float("-inf"), dtype=torch.float32)
        exps = hl.zeros([tile_b], dtype=torch.float32)
        for tile_k in hl.jagged_tile(n):
            values = x[tile_b, tile_k]
            total = total + values.sum(dim=1)
            peak = torch.maximum(peak, values.amax(dim=1))
            exps = exps + torch.exp(values).sum(dim=1)
        out[tile_b, 0] = total
        out[tile_b, 1] = peak
        out[tile_b, 2] = exps
    return out


def _ragged_args(rows: int, width: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, width + 1, (rows,), generator=generator)
    x = torch.randn(rows, width, generator=generator)
    x[torch.arange(width)[None, :] >= lengths[:, None]] = float("nan")
    return lambda: (x, lengths)


def test_jagged_reductions():
    make = _ragged_args(11, 37, 0)
    _compare(_row_stats, make)
    x, lengths = make()
    expected_sum = torch.stack([x[b, : int(n)].sum() for b, n in enumerate(lengths)])
    result = helion.kernel(_row_stats, backend="triton", autotune_effort="none")(x, lengths)
    torch.testing.assert_close(result[:, 0], expected_sum)


def _jagged_copy(x: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_b in hl.tile(x.size(0)):
        n = lengths[tile_b]
        for tile_k in hl.jagged_tile(n):
            out[tile_b, tile_k] = x[tile_b, tile_k] + 1
    return out


def test_jagged_stores_skip_lanes_past_each_end():
    make_xy = _ragged_args(9, 23, 1)

    def make():
        x, lengths = make_xy()
        return x, lengths, torch.full(x.shape, -5.0)

    _compare(_jagged_copy, make)


def _nested(
    x: torch.Tensor, features: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    for tile_b in hl.tile(x.size(0)):
        nf = features[tile_b]
        nl = lengths[tile_b]
        for tile_m in hl.jagged_tile(nf):
            acc = hl.zeros([tile_b, tile_m], dtype=torch.float32)
            for tile_k in hl.jagged_tile(nl):
                acc = acc + x[tile_b, tile_m, tile_k].sum(dim=2)
            out[tile_b, tile_m] = acc
    return out


def test_nested_jagged_loops():
    generator = torch.Generator().manual_seed(2)
    rows, width_m, width_k = 6, 5, 13
    features = torch.randint(0, width_m + 1, (rows,), generator=generator)
    lengths = torch.randint(0, width_k + 1, (rows,), generator=generator)
    x = torch.randn(rows, width_m, width_k, generator=generator)
    outside = (torch.arange(width_m)[None, :, None] >= features[:, None, None]) | (
        torch.arange(width_k)[None, None, :] >= lengths[:, None, None]
    )
    x[outside] = float("nan")
    _compare(_nested, lambda: (x, features, lengths, torch.full((rows, width_m), -3.0)), configs=4)


def _jagged_accumulate(x: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_b in hl.tile(x.size(0)):
        n = lengths[tile_b]
        for tile_k in hl.jagged_tile(n):
            hl.atomic_add(out, [tile_b, tile_k], x[tile_b, tile_k] + 1)
    return out


def test_jagged_atomics_are_masked():
    make_xy = _ragged_args(8, 15, 3)

    def make():
        x, lengths = make_xy()
        return x, lengths, torch.full(x.shape, 0.25)

    _compare(_jagged_accumulate, make, configs=4)


# -- StackTensor ------------------------------------------------------------------------------------


def _stack_mix(
    dev_ptrs: torch.Tensor, like: torch.Tensor, weights: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    """Reads all buffers, writes back into them (value per buffer), returns a weighted sum."""
    m, n = like.size()
    for tile_m, tile_n in hl.tile([m, n]):
        stack = hl.stacktensor_like(like, dev_ptrs[:])
        values = stack[tile_m, tile_n]
        out[tile_m, tile_n] = (values * weights[:][:, None, None]).sum(dim=0)
        stack[tile_m, tile_n] = values * 2 + weights[:][:, None, None]
    return out


def test_stack_tensor_load_and_store():
    generator = torch.Generator().manual_seed(4)
    originals = [torch.randn(7, 11, generator=generator) for _ in range(5)]
    weights = torch.randn(5, generator=generator)
    buffers = [b.clone() for b in originals]
    ptrs = hl.stack_pointers(buffers)

    def make():
        for b, o in zip(buffers, originals, strict=True):
            b.copy_(o)
        return ptrs, buffers[0], weights, torch.zeros(7, 11)

    def outputs(result, args):
        return (result.clone(), *[b.clone() for b in buffers])

    _compare(_stack_mix, make, outputs=outputs)
    make()
    result = helion.kernel(_stack_mix, backend="triton", autotune_effort="none")(*make())
    torch.testing.assert_close(result, sum(w * o for w, o in zip(weights, originals, strict=True)))
    for j, (b, o) in enumerate(zip(buffers, originals, strict=True)):
        torch.testing.assert_close(b, o * 2 + weights[j])


# -- several top-level loops ---------------------------------------------------------------------


def _three_loops(
    x: torch.Tensor, y: torch.Tensor, z: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    row_max = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    scaled = torch.empty_like(y)
    shifted = torch.empty_like(z)
    for tile_m in hl.tile(x.size(0)):
        row_max[tile_m] = x[tile_m, :].amax(dim=-1)
    for tile_a, tile_b in hl.tile(y.size()):
        scaled[tile_a, tile_b] = y[tile_a, tile_b] * x[tile_a, 0][:, None]
    for i in hl.grid(z.size(0)):
        shifted[i, :] = z[i, :] + i
    return row_max, scaled, shifted


def test_three_top_level_loops():
    generator = torch.Generator().manual_seed(5)
    args = (
        torch.randn(13, 21, generator=generator),
        torch.randn(9, 6, generator=generator),
        torch.randn(5, 7, generator=generator),
    )
    _compare(_three_loops, lambda: args, configs=10)


def _with_barrier(x: torch.Tensor) -> torch.Tensor:
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        tmp[tile] = x[tile] * 2
    hl.barrier()
    for tile in hl.tile(x.size(0)):
        out[tile] = tmp[x.size(0) - 1 - tile.index] + 1
    return out


def test_barrier_between_top_level_loops():
    x = torch.randn(19)
    bound = helion.kernel(_with_barrier, backend="triton").bind((x,))
    config = bound.config_spec.default_config()
    config = helion.Config(**{**dict(config), "pid_type": "persistent_blocked"})
    torch.testing.assert_close(bound.compile_config(config)(x), x.flip(0) * 2 + 1)
