"""Several top-level device loops in one kernel (one launch whose program ids are split between
the loops): results on the ref backend (default and random configs) and in eager mode, and the
dependency rule between the loops (`LoopDependencyError` unless `hl.barrier()` separates them)."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc


@helion.kernel()
def three_loops(
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


def three_loops_reference(x, y, z):
    return x.amax(-1), y * x[: y.size(0), :1], z + torch.arange(z.size(0))[:, None]


def _args():
    return torch.randn(13, 21), torch.randn(9, 6), torch.randn(5, 7)


def test_three_top_level_loops_ref_and_eager():
    args = _args()
    expected = three_loops_reference(*args)
    bound = helion.kernel(three_loops.fn, backend="ref").bind(args)
    spec = bound.config_spec
    assert len(bound._discovery_ir.top_level_loops()) == 3
    for config in [spec.default_config()] + [
        spec.random_config(random.Random(s)) for s in range(8)
    ]:
        torch.testing.assert_close(
            bound.compile_config(config)(*args),
            expected,
            msg=lambda m, config=config: f"{config}: {m}",
        )
    torch.testing.assert_close(
        helion.kernel(three_loops.fn, ref_mode=helion.RefMode.EAGER)(*args), expected
    )


def _read_after_write(x: torch.Tensor) -> torch.Tensor:
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        tmp[tile] = x[tile] * 2
    for tile in hl.tile(x.size(0)):
        out[tile] = tmp[tile] + 1
    return out


def _write_after_write(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


def _with_barrier(x: torch.Tensor) -> torch.Tensor:
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        tmp[tile] = x[tile] * 2
    hl.barrier()
    for tile in hl.tile(x.size(0)):
        out[tile] = tmp[x.size(0) - 1 - tile.index] + 1
    return out


@pytest.mark.parametrize("fn", [_read_after_write, _write_after_write])
def test_dependency_between_top_level_loops_is_an_error(fn):
    with pytest.raises(
        exc.LoopDependencyError, match=r"'(tmp|out)' was written in a previous loop"
    ):
        helion.kernel(fn, backend="ref").bind((torch.randn(11),))


@pytest.mark.parametrize("fn", [_read_after_write, _write_after_write])
def test_eager_mode_refuses_the_same_dependency(fn):
    """Eager mode runs the loops one after the other and gave the sequential answer, so a
    kernel developed there failed only once compiled."""
    kernel = helion.kernel(fn, ref_mode=helion.RefMode.EAGER)
    with pytest.raises(
        exc.LoopDependencyError, match=r"'(tmp|out)' was written in a previous loop"
    ):
        kernel(torch.randn(11))


def test_barrier_orders_the_loops():
    x = torch.randn(11)
    expected = x.flip(0) * 2 + 1
    bound = helion.kernel(_with_barrier, backend="ref").bind((x,))
    for seed in range(3):
        config = bound.config_spec.random_config(random.Random(seed))
        torch.testing.assert_close(bound.compile_config(config)(x), expected)
    torch.testing.assert_close(
        helion.kernel(_with_barrier, ref_mode=helion.RefMode.EAGER)(x), expected
    )
