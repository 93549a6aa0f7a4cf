"""Python constructs device code cannot run get an error that names the construct and points at
the kernel's line; and the call-time argument errors say what was wrong with the call."""

from __future__ import annotations

import math

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

THIS_FILE = __file__
REF = {"backend": "ref", "autotune_effort": "none"}


def _expect(error_type: type, fn, *args, line_text: str) -> str:
    with pytest.raises(error_type) as info:
        fn(*args)
    message = str(info.value)
    assert THIS_FILE in message, message
    assert line_text in message, message
    assert "^" in message, message
    return message


def _x() -> torch.Tensor:
    return torch.randn(8, 16)


# -- comprehensions ---------------------------------------------------------------------------


def test_list_comprehension_over_range_in_device_code():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            vs = [x[tile] * i for i in range(3)]
            out[tile] = vs[0] + vs[1] + vs[2]
        return out

    message = _expect(
        exc.ComprehensionOnDevice, k, _x(), line_text="vs = [x[tile] * i for i in range(3)]"
    )
    assert "list comprehension over `range(3)`" in message


def test_generator_expression_over_range_in_device_code():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = sum(x[tile] for _ in range(2))
        return out

    message = _expect(exc.ComprehensionOnDevice, k, _x(), line_text="sum(x[tile] for _ in")
    assert "generator expression" in message


def test_comprehension_over_a_device_tensor_or_tile():
    @helion.kernel(**REF)
    def over_values(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            rows = {v for v in x[tile, :]}
            out[tile, :] = x[tile, :] + len(rows)
        return out

    @helion.kernel(**REF)
    def over_tile(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            firsts = [t for t in tile]
            out[tile, :] = x[firsts[0], :]
        return out

    message = _expect(exc.ComprehensionOnDevice, over_values, _x(), line_text="{v for v in x")
    assert "set comprehension" in message
    _expect(exc.ComprehensionOnDevice, over_tile, _x(), line_text="[t for t in tile]")


def test_comprehensions_over_python_values_keep_working():
    @helion.kernel(**REF)
    def k(x):
        sizes = [d for d in x.shape]  # host code
        out = torch.empty(sizes)
        for tile in hl.tile(x.size()):
            a = x[tile]
            scaled = [v * s for v, s in zip((a, a + 1), (2, 3), strict=True)]
            total = sum(w for w in scaled)
            out[tile] = total + len({0: a}) + sum([[1, 2][i] for i in (0, 1)])
        return out

    x = _x()
    torch.testing.assert_close(k(x), x * 2 + (x + 1) * 3 + 4)
    # the AST of a kernel is shared by its specializations: each rewrite guards it once
    y = torch.randn(4, 4)
    torch.testing.assert_close(k(y), y * 2 + (y + 1) * 3 + 4)


def test_a_comprehension_variable_is_not_a_host_variable():
    @helion.kernel(**REF)
    def k(x):
        sizes = [s for s in x.shape]  # binds no host `s`
        out = torch.empty(sizes)
        v = 5  # a host variable; the device comprehensions' `v` are their own
        for tile in hl.tile(x.size()):
            a = x[tile]
            scaled = [v * s for v, s in zip((a, a + 1), (2, 3), strict=True)]
            out[tile] = sum(v for v in scaled) + v
        return out

    x = _x()
    torch.testing.assert_close(k(x), x * 2 + (x + 1) * 3 + 5)


# -- Python's numbers, kernels and generators -------------------------------------------------


def test_math_function_on_a_device_value():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = math.exp(x[tile])
        return out

    message = _expect(exc.TypeInferenceError, k, _x(), line_text="math.exp(x[tile])")
    assert "Python float" in message and "torch.exp" in message


def test_python_int_from_a_device_value_names_the_line():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = x[tile] * [1, 2, 3][x[tile]]
        return out

    _expect(exc.TypeInferenceError, k, _x(), line_text="[1, 2, 3][x[tile]]")


def test_errors_raised_without_a_location_get_the_kernel_line():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile, :] = x[tile, :] * len(x[tile, :])
        return out

    _expect(exc.TypeInferenceError, k, _x(), line_text="len(x[tile, :])")


@helion.kernel(**REF)
def _doubled(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * 2
    return out


def test_kernel_called_from_device_code():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = _doubled(x[tile])
        return out

    x = _x()
    torch.testing.assert_close(_doubled(x), x * 2)  # the inner kernel warm: same error
    for _ in range(2):
        message = _expect(exc.KernelCalledOnDevice, k, x, line_text="_doubled(x[tile])")
        assert "'_doubled'" in message and "'k'" in message
    torch.testing.assert_close(_doubled(x), x * 2)


@helion.kernel(**REF)
def _recursive(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = _recursive(x[tile])
    return out


def test_kernel_calling_itself_from_device_code():
    _expect(exc.KernelCalledOnDevice, _recursive, _x(), line_text="_recursive(x[tile])")


def test_generator_function_is_refused_as_a_kernel():
    def body(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = x[tile]
            yield out

    message = _expect(exc.GeneratorKernel, helion.kernel, body, line_text="yield out")
    assert "generator function" in message

    async def coroutine(x):
        await x

    message = _expect(exc.GeneratorKernel, helion.kernel, coroutine, line_text="await x")
    assert "coroutine function" in message


# -- messages -----------------------------------------------------------------------------------


def test_tolist_on_a_device_value_is_named_as_such():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            values = x[tile].tolist()
            out[tile] = x[tile] + len(values)
        return out

    message = _expect(exc.NotAllowedOnDevice, k, _x(), line_text="x[tile].tolist()")
    assert ".tolist()" in message and ".item()" not in message


def test_unexpected_keyword_is_named_with_the_missing_argument():
    x = _x()
    with pytest.raises(TypeError) as info:
        _doubled(z=x)
    assert "unexpected keyword argument 'z'" in str(info.value)
    assert "'x'" in str(info.value)


def test_bind_and_autotune_take_a_tuple_of_arguments():
    x = _x()
    with pytest.raises(TypeError, match=r"_doubled.bind\(\) takes .* tuple or list"):
        _doubled.bind(x)
    with pytest.raises(TypeError, match=r"_doubled.autotune\(\) takes .* tuple or list"):
        _doubled.autotune(x)
    assert _doubled.bind((x,)) is _doubled.bind([x])
