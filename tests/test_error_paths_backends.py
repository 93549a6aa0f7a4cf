"""Misuse in device code is refused the same way on every backend and in eager mode, at the
kernel's line (found by exploratory testing: `if flag:` on a 0-D tensor argument always took its
then-branch; hl.full of a tensor, negative sizes, a constant zero divisor and float loop bounds
gave garbage, raw Triton/Pallas errors or InternalError depending on the backend; names a host
`import` / `def` bound were invisible to device code; a global assigned in device code was
dropped); and Python's max() / min() in device code propagate NaN like torch.maximum /
torch.minimum on every backend."""

from __future__ import annotations

import math

import pytest
import torch

import helion.language as hl
from helion import exc
from helion.testing import kernel_for

BACKENDS = ["ref", "triton", "pallas", "eager"]
THIS_FILE = __file__


def _expect(error_type: type, kernel, *args, line_text: str) -> str:
    with pytest.raises(error_type) as info:
        kernel(*args)
    message = str(info.value)
    assert THIS_FILE in message and line_text in message, message
    return message


def branch_on_flag(x: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        if flag:
            out[t, :] = x[t, :] * 2
        else:
            out[t, :] = x[t, :] * 3
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_if_on_a_zero_dim_tensor_argument_branches_on_its_value(backend: str) -> None:
    kernel = kernel_for(branch_on_flag, backend)
    x = torch.ones(8, 4)
    flag = torch.tensor(True)
    torch.testing.assert_close(kernel(x, flag), x * 2)
    flag.fill_(False)
    torch.testing.assert_close(kernel(x, flag), x * 3)


def full_of_a_tensor(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        v = x[t, 0]
        out[t, :] = hl.full([t, 16], v)
    return out


def zeros_of_negative_size(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        acc = hl.zeros([t, -3])
        out[t, :] = x[t, :] + acc.sum()
    return out


def arange_of_negative_length(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, :] + hl.arange(-1).sum()
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_creation_arguments_are_checked(backend: str) -> None:
    x = torch.randn(8, 16)
    _expect(
        exc.ShapeMismatch,
        kernel_for(full_of_a_tensor, backend),
        x,
        line_text="hl.full([t, 16], v)",
    )
    _expect(
        exc.NegativeSize,
        kernel_for(zeros_of_negative_size, backend),
        x,
        line_text="hl.zeros([t, -3])",
    )
    _expect(
        exc.NegativeSize,
        kernel_for(arange_of_negative_length, backend),
        x,
        line_text="hl.arange(-1)",
    )


def floordiv_by_zero(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] // 0
    return out


def remainder_by_zero(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] % 0
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_division_by_a_constant_zero(backend: str) -> None:
    x = torch.arange(8, dtype=torch.int32)
    _expect(
        exc.IntegerDivisionByZero,
        kernel_for(floordiv_by_zero, backend),
        x,
        line_text="x[t] // 0",
    )
    _expect(
        exc.IntegerDivisionByZero,
        kernel_for(remainder_by_zero, backend),
        x,
        line_text="x[t] % 0",
    )


def tile_with_float_bounds(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(0.5, 3.7):
        out[t] = x[t] + 1
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_loop_bounds(backend: str) -> None:
    _expect(
        exc.TypeInferenceError,
        kernel_for(tile_with_float_bounds, backend),
        torch.zeros(8),
        line_text="hl.tile(0.5, 3.7)",
    )


def python_max_min(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    o1 = torch.empty_like(x)
    o2 = torch.empty_like(x)
    o3 = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        o1[t] = max(x[t], 0.0)
        o2[t] = min(0.25, x[t])
        o3[t] = max(x[t], x[t] * -1.0, 0.5)
    return o1, o2, o3


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_max_and_min_propagate_nan(backend: str) -> None:
    x = torch.tensor([float("nan"), -1.0, 1.0, 0.1, 0.0, -0.3, 2.5, float("-inf")])
    o1, o2, o3 = kernel_for(python_max_min, backend)(x)
    torch.testing.assert_close(o1, torch.clamp_min(x, 0.0), equal_nan=True)
    torch.testing.assert_close(o2, torch.clamp_max(x, 0.25), equal_nan=True)
    expected = torch.clamp_min(torch.maximum(x, x * -1.0), 0.5)
    torch.testing.assert_close(o3, expected, equal_nan=True)


def host_names(x: torch.Tensor) -> torch.Tensor:
    from math import pi

    def doubled(a: torch.Tensor) -> torch.Tensor:
        return a * 2

    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = doubled(x[t, :]) * pi
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_names_a_host_import_and_def_bind_reach_device_code(backend: str) -> None:
    x = torch.randn(8, 16)
    torch.testing.assert_close(kernel_for(host_names, backend)(x), x * 2 * math.pi)


HITS = 0


def writes_a_global(x: torch.Tensor) -> torch.Tensor:
    global HITS
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        HITS = HITS + 1
        out[t] = x[t] + HITS
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_assigning_a_global_in_device_code(backend: str) -> None:
    _expect(
        exc.GlobalMutation,
        kernel_for(writes_a_global, backend),
        torch.zeros(4),
        line_text="HITS = HITS + 1",
    )
    assert HITS == 0
