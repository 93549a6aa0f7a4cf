"""An unmasked access that a tile loop with static bounds surely runs past its tensor is refused
when the kernel is bound, for every backend (core's `check_core`): compiled code would read or
write memory outside the tensor. Under `static_shapes=False`, each later size is refused the same
way when it is traced, before it compiles or runs. Accesses that stay legal: masked ones, ones under an `if`, a tile
over a smaller range, and the partial last tile of a size no block divides."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas", "cute"]


def _tile_over_the_larger_tensor(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(y)
    for tile in hl.tile(y.size(0)):
        out[tile] = y[tile] + x[tile]
    return out


def _rows_past_a_column(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile, 5]
    return out


def _two_dim_tile(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] * y[tile_m, tile_n]
    return out


def _store_past_the_end(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2
    return out


def _bind_error(fn, args: tuple, backend: str) -> exc.IndexOutOfBounds:
    require_backend(backend)
    kernel = helion.kernel(fn, backend=backend, autotune_effort="none")
    with pytest.raises(exc.IndexOutOfBounds) as info:
        kernel.bind(args)  # bind alone: nothing has run yet
    return info.value


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tile_over_the_larger_tensor_is_refused_at_bind(backend):
    error = _bind_error(_tile_over_the_larger_tensor, (torch.randn(7), torch.randn(11)), backend)
    assert "tensor 'x'" in str(error) and "index 7 along dimension 0 (of size 7)" in str(error)
    assert error.loc is not None and error.loc.filename == __file__
    assert error.loc.line().strip() == "out[tile] = y[tile] + x[tile]"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_constant_index_past_the_dimension_is_refused_at_bind(backend):
    error = _bind_error(_rows_past_a_column, (torch.randn(9, 5),), backend)
    assert "index 5 along dimension 1 (of size 5)" in str(error)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_mismatched_dimension_of_a_two_dim_tile_is_named(backend):
    x, y = torch.randn(13, 37), torch.randn(13, 30)
    error = _bind_error(_two_dim_tile, (x, y), backend)
    assert "tensor 'y'" in str(error) and "index 30 along dimension 1 (of size 30)" in str(error)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_past_the_end_is_refused_at_bind(backend):
    error = _bind_error(_store_past_the_end, (torch.randn(10), torch.zeros(6)), backend)
    assert "store of tensor 'out'" in str(error)


def _guarded_by_a_branch(x: torch.Tensor, y: torch.Tensor, limit: int) -> torch.Tensor:
    out = torch.zeros_like(y)
    for tile in hl.tile(y.size(0)):
        if tile.begin < limit:
            out[tile] = x[tile]
    return out


def _masked(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(y)
    n = x.size(0)
    for tile in hl.tile(y.size(0)):
        out[tile] = y[tile] + hl.load(x, [tile], extra_mask=tile.index < n)
    return out


def _tile_over_the_smaller_tensor(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + y[tile]
    return out


def test_legal_accesses_are_not_refused():
    x, y = torch.randn(8), torch.randn(11)
    run = lambda fn, *args: helion.kernel(fn, backend="ref", autotune_effort="none")(*args)  # noqa: E731
    # the branch's tiles run past x only where they start past it: with block 4 and limit 5, the
    # tiles [0, 4) and [4, 8) take the branch and stay inside x
    bound = helion.kernel(_guarded_by_a_branch, backend="ref", autotune_effort="none").bind(
        (x, y, 5)
    )
    out = bound.compile_config(helion.Config(block_sizes=[4]))(x, y, 5)
    torch.testing.assert_close(out, torch.cat([x, torch.zeros(3)]))
    torch.testing.assert_close(run(_masked, x, y), y + torch.cat([x, torch.zeros(3)]))
    torch.testing.assert_close(run(_tile_over_the_smaller_tensor, x, y), x + y[:8])
    x2, y2 = torch.randn(13, 37), torch.randn(13, 37)
    torch.testing.assert_close(run(_two_dim_tile, x2, y2), x2 * y2)


def _grid_over_the_larger_tensor(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for i in hl.grid(x.size(0)):
        out[i] = x[i] + y[i]
    return out


def _grid_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for i in hl.grid(x.size(0)):
        for tile in hl.tile(x.size(1)):
            out[i, tile] = x[i, tile] + y[i, tile]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_hl_grid_index_past_the_tensor_is_refused_at_bind(backend):
    error = _bind_error(_grid_over_the_larger_tensor, (torch.randn(37), torch.randn(20)), backend)
    assert "tensor 'y'" in str(error) and "index 20 along dimension 0 (of size 20)" in str(error)
    error = _bind_error(_grid_rows, (torch.randn(9, 13), torch.randn(5, 13)), backend)
    assert "tensor 'y'" in str(error) and "index 5 along dimension 0 (of size 5)" in str(error)


def test_hl_grid_within_the_tensor_runs():
    x, y = torch.randn(9, 13), torch.randn(12, 13)
    kernel = helion.kernel(_grid_rows, backend="ref", autotune_effort="none")
    torch.testing.assert_close(kernel(x, y), x + y[:9])


def _add_into(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + y[tile]
    return out


def _same_size_arguments(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(n), torch.randn(n), torch.zeros(n)


def _refuses_later_sizes(kernel, bad: tuple) -> None:
    # one bound kernel serves every size: the check must see each size traced, not the first
    with pytest.raises(exc.IndexOutOfBounds) as info:
        kernel(*bad)
    message = str(info.value)
    assert "load of tensor 'y'" in message, message
    assert "index 50 along dimension 0 (of size 50)" in message, message
    assert info.value.loc is not None and info.value.loc.filename == __file__
    assert info.value.loc.line().strip() == "out[tile] = x[tile] + y[tile]"


@pytest.mark.parametrize("backend", ["ref", "triton", "pallas"])
def test_a_later_size_under_dynamic_shapes_is_refused_before_it_runs(backend):
    require_backend(backend)
    # tiles of 16: the ref backend, which checks each access as it runs, would store the tiles
    # before the first one past y if nothing refused the call first
    config = helion.Config(block_sizes=[16])
    kernel = helion.kernel(_add_into, backend=backend, config=config, static_shapes=False)
    x, y, out = _same_size_arguments(100)
    torch.testing.assert_close(kernel(x, y, out), x + y)
    bad = (torch.randn(120), torch.randn(50), torch.zeros(120))
    assert kernel.bind(bad) is kernel.bind((x, y, out))
    _refuses_later_sizes(kernel, bad)
    # refused before anything ran: no tile of the output was written
    assert torch.count_nonzero(bad[2]) == 0
    # the kernel stays usable, and the refused size left nothing behind: a matching call of
    # the new size runs, and the mismatched one is refused again
    x2, y2, out2 = _same_size_arguments(120)
    torch.testing.assert_close(kernel(x2, y2, out2), x2 + y2)
    _refuses_later_sizes(kernel, bad)
    x3, y3, out3 = _same_size_arguments(100)
    torch.testing.assert_close(kernel(x3, y3, out3), x3 + y3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_later_size_is_refused_on_every_backend(backend):
    # bound with sizes that fit, then called with ones that do not: refused before compiling,
    # so even a backend that cannot launch here (cute on a machine without a GPU) refuses it
    require_backend(backend)
    kernel = helion.kernel(_add_into, backend=backend, autotune_effort="none", static_shapes=False)
    kernel.bind(_same_size_arguments(100))
    _refuses_later_sizes(kernel, (torch.randn(120), torch.randn(50), torch.zeros(120)))
