"""Eager mode refuses the constructs compiled kernels refuse, with the same error class: a
grid step, an undefined name in device code, `hl.tile` called outside a `for`, a stepped slice, an atomic whose target was made in device code, `hl.register_tunable` with a
name of Helion's own config keys (or one name for two fragments) and a wrong argument type.
Each case runs on the ref backend and in eager mode; both must raise."""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.autotuner import EnumFragment
from helion.autotuner import PowerOfTwoFragment

MODES = ["ref", "eager"]


def _kernel(fn: Callable, mode: str) -> helion.Kernel:
    if mode == "eager":
        return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)
    return helion.kernel(fn, backend="ref", autotune_effort="none")


def stepped_slice(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), (x.size(1) + 1) // 2])
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, ::2]
    return out


def atomic_into_device_tensor(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        acc = hl.zeros([t, x.size(1)])
        hl.atomic_add(acc, [t, slice(None)], x[t, :])
        out[t, :] = acc
    return out


def atomic_into_torch_zeros(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        acc = torch.zeros([x.size(1)], dtype=x.dtype)
        hl.atomic_add(acc, [slice(None)], x[t.begin, :])
        out[t, :] = x[t, :] + acc[None, :]
    return out


def tunable_named_num_warps(x: torch.Tensor) -> torch.Tensor:
    hl.register_tunable("num_warps", PowerOfTwoFragment(1, 8))
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t]
    return out


def tunable_registered_twice(x: torch.Tensor) -> torch.Tensor:
    hl.register_tunable("mode", EnumFragment(("a", "b")))
    hl.register_tunable("mode", EnumFragment(("c", "d")))
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t]
    return out


def tunable_without_fragment(x: torch.Tensor) -> torch.Tensor:
    hl.register_tunable("width", 4)
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t]
    return out


def grid_with_step(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for i in hl.grid(0, x.size(0), 2):
        out[i] = x[i]
    return out


def undefined_name(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] * undefined_scale  # noqa: F821
    return out


def tile_call_outside_for(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    tiles = hl.tile(x.size(0))
    for t in tiles:
        out[t] = x[t]
    return out


CASES = [
    (grid_with_step, (29,), exc.GridStepNotSupported, "step=2"),
    (undefined_name, (29,), exc.UndefinedVariable, "undefined_scale"),
    (tile_call_outside_for, (29,), exc.LoopFunctionNotInFor, "hl.tile"),
    (stepped_slice, (13, 37), exc.InvalidIndexingType, "slices with a step"),
    (atomic_into_device_tensor, (13, 37), exc.AtomicOnDeviceTensor, "hl.atomic_add"),
    (atomic_into_torch_zeros, (13, 37), exc.AtomicOnDeviceTensor, "hl.atomic_add"),
    (tunable_named_num_warps, (29,), exc.TunableNameConflict, "num_warps"),
    (tunable_registered_twice, (29,), exc.TunableNameConflict, "mode"),
    (tunable_without_fragment, (29,), exc.RegisterTunableArgTypes, "int"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("fn", "shape", "error", "text"), CASES, ids=[case[0].__name__ for case in CASES]
)
def test_eager_mode_refuses_what_compiled_kernels_refuse(
    fn: Callable, shape: tuple, error: type, text: str, mode: str
) -> None:
    with pytest.raises(error, match=text):
        _kernel(fn, mode)(torch.randn(shape))


def atomic_into_argument(x: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(x.size(0)):
        hl.atomic_add(total, [slice(None)], x[t, :].sum(0))
    return total


def test_eager_atomics_into_host_tensors_still_run() -> None:
    """The device-made check leaves arguments (and views of them) alone."""
    x = torch.randn(13, 37)
    total = torch.zeros(37)
    got = _kernel(atomic_into_argument, "eager")(x, total)
    torch.testing.assert_close(got, x.sum(0), rtol=1e-5, atol=1e-5)


def add_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] + 1
    return out


def test_eager_mode_warns_that_the_configs_block_sizes_are_ignored(monkeypatch) -> None:
    """Public Helion's BlockSizeIgnoredInInterpretMode: eager mode runs a tunable tile loop as
    one tile whatever the config says; the result is the same."""
    import warnings

    monkeypatch.delenv("HELION_IGNORE_WARNINGS", raising=False)
    x = torch.randn(29)
    config = helion.Config(block_sizes=[4])
    kernel = helion.kernel(add_one, ref_mode=helion.RefMode.EAGER, config=config)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.testing.assert_close(kernel(x), x + 1)
    [warning] = [w for w in seen if issubclass(w.category, exc.BlockSizeIgnoredInInterpretMode)]
    assert "[4]" in str(warning.message)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        helion.kernel(add_one, ref_mode=helion.RefMode.EAGER)(x)  # no config: no warning
    assert not [w for w in seen if issubclass(w.category, exc.BlockSizeIgnoredInInterpretMode)]


def increment_in_place(x: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(x.size(0)):
        x[t] = x[t] + 1
        hl.atomic_add(x, [t], 1.0)
    return x


@pytest.mark.parametrize("mode", MODES)
def test_writes_into_a_tensor_made_under_inference_mode(mode: str) -> None:
    """Compiled kernels write into such arguments outside inference mode; eager mode raised
    torch's 'Inplace update to inference tensor outside InferenceMode'."""
    with torch.inference_mode():
        x = torch.zeros(13)
    _kernel(increment_in_place, mode)(x)
    torch.testing.assert_close(x, torch.full((13,), 2.0))


def _branch_only(x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([x.size(0)])
    for i in hl.grid(x.size(0)):
        if flags[i] > 0:
            y = x[i] * 2
        out[i] = y
    return out


@pytest.mark.parametrize("mode", ["eager", "ref"])
def test_a_name_bound_in_one_branch_is_undefined_in_every_iteration(mode: str) -> None:
    """Eager mode read the previous iteration's `y` (out[1] == out[0]), where each iteration of
    a compiled kernel is a program of its own and raises UndefinedVariable."""
    settings = {"ref_mode": helion.RefMode.EAGER} if mode == "eager" else {"backend": "ref"}
    kernel = helion.kernel(_branch_only, autotune_effort="none", **settings)
    x, flags = torch.randn(6), torch.tensor([1, -1, 1, -1, 1, -1])
    with pytest.raises(exc.UndefinedVariable) as info:
        kernel(x, flags)
    assert "out[i] = y" in str(info.value)
    if mode == "eager":
        assert "name 'y'" in str(info.value)


def test_eager_names_bound_in_the_loop_are_fresh_each_iteration_and_nothing_else_changes() -> None:
    # defined here, indented: the eager code keeps the columns torch.rand's call sites number
    def kernel_fn(x: torch.Tensor, scale: float) -> torch.Tensor:
        out = torch.empty_like(x)
        offset = 1.0
        for tile in hl.tile(x.size(0)):
            for inner in hl.tile(x.size(1)):
                y = x[tile, inner] * scale
                noise = torch.rand_like(y)
                out[tile, inner] = y + noise + offset
        return out

    x = torch.randn(9, 13)
    eager = helion.kernel(kernel_fn, ref_mode=helion.RefMode.EAGER)
    ref = helion.kernel(kernel_fn, backend="ref", config=helion.Config(block_sizes=[4, 8]))
    torch.manual_seed(7)
    expected = ref(x, 0.5)
    torch.manual_seed(7)
    assert torch.equal(eager(x, 0.5), expected)


def _block_sized_index(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0), block_size=32):
        idx = t.begin + hl.arange(t.block_size)
        out[t] = x[t] + idx.to(torch.float32)
    return out


def test_eager_names_the_partial_tile_when_a_block_sized_value_does_not_fit() -> None:
    """Compiled kernels mask the lanes past the end; eager mode's last tile has only its valid
    lanes, and torch's broadcast error said nothing about why."""
    kernel = helion.kernel(_block_sized_index, ref_mode=helion.RefMode.EAGER)
    with pytest.raises(exc.ShapeMismatch) as info:
        kernel(torch.randn(40))
    assert "partial last tile (32:40, 8 of block size 32)" in str(info.value)
    x = torch.randn(64)  # whole tiles: the same kernel runs
    torch.testing.assert_close(kernel(x), x + torch.arange(64).float())
