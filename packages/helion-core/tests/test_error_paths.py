"""Misuse in device code gets a helion error naming what is wrong and the kernel's line, in
compiled kernels (the ref backend here) and in eager mode alike; found by exploratory testing,
where these raised raw TypeError / AttributeError / RecursionError / ValueError / torch errors,
pointed at the wrong line, or ran with a wrong result."""

from __future__ import annotations

import math

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

THIS_FILE = __file__
REF = {"backend": "ref", "autotune_effort": "none"}
EAGER = {"ref_mode": "eager"}
MODES = [pytest.param(REF, id="ref"), pytest.param(EAGER, id="eager")]


def _expect(error_type: type, fn, *args, line_text: str) -> str:
    """``fn(*args)`` raises ``error_type`` whose message names this file and ``line_text``."""
    with pytest.raises(error_type) as info:
        fn(*args)
    message = str(info.value)
    assert isinstance(info.value, exc.BaseError), repr(info.value)
    assert THIS_FILE in message, message
    assert line_text in message, message
    return message


def _x() -> torch.Tensor:
    return torch.randn(8, 16)


# -- the `for` line of a loop's bad arguments ------------------------------------------------


def test_a_bad_block_size_points_at_the_for_line():
    @helion.kernel(**REF)
    def negative(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0), block_size=-4):
            y = x[t, :] * 2
            out[t, :] = y
        return out

    @helion.kernel(**REF)
    def nested_zero(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            for j in hl.tile(x.size(1), block_size=0):
                out[t, j] = x[t, j]
        return out

    message = _expect(
        exc.InvalidConfig, negative, _x(), line_text="hl.tile(x.size(0), block_size=-4)"
    )
    assert "block_size must be positive, got -4" in message
    assert "out[t, :] = y" not in message
    _expect(exc.InvalidConfig, nested_zero, _x(), line_text="hl.tile(x.size(1), block_size=0)")


def test_a_bound_of_the_wrong_kind_points_at_the_for_line():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for t in hl.tile("abc"):
            out[t, :] = x[t, :]
        return out

    message = _expect(exc.TypeInferenceError, k, _x(), line_text='hl.tile("abc")')
    assert "hl.tile bounds must be integers" in message and "'abc'" in message


@pytest.mark.parametrize("mode", MODES)
def test_a_block_size_list_of_the_wrong_length(mode):
    def k(x):
        out = torch.empty_like(x)
        for t0, t1 in hl.tile(x.size(), block_size=[4]):
            out[t0, t1] = x[t0, t1]
        return out

    message = _expect(exc.RankMismatch, helion.kernel(k, **mode), _x(), line_text="block_size=[4]")
    assert "block_size of hl.tile" in message


# -- float loop bounds -------------------------------------------------------------------------


def _tile_float_end(x):
    out = torch.zeros_like(x)
    for t in hl.tile(2.5):
        out[t, :] = x[t, :] + 1
    return out


def _tile_float_range(x):
    out = torch.zeros_like(x)
    for t in hl.tile(0.5, 3.7):
        out[t, :] = x[t, :] + 1
    return out


def _grid_float(x):
    out = torch.zeros_like(x)
    for i in hl.grid(2.5):
        out[i, :] = x[i, :] + 1
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "fn, line, value",
    [
        (_tile_float_end, "for t in hl.tile(2.5):", "2.5"),
        (_tile_float_range, "for t in hl.tile(0.5, 3.7):", "0.5"),
        (_grid_float, "for i in hl.grid(2.5):", "2.5"),
    ],
)
def test_float_loop_bounds_are_refused_at_the_for_line(mode, fn, line, value):
    message = _expect(exc.TypeInferenceError, helion.kernel(fn, **mode), _x(), line_text=line)
    assert "int" in message and value in message


# -- `if` on a one-element tensor argument -------------------------------------------------------


def _branch_on_flag(x, flag):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        if flag:
            out[t, :] = x[t, :] * 2
        else:
            out[t, :] = x[t, :] * 3
    return out


@pytest.mark.parametrize("mode", MODES)
def test_if_on_a_zero_dim_tensor_argument_reads_its_value(mode):
    kernel = helion.kernel(_branch_on_flag, **mode)
    x = torch.ones(4, 4)
    flag = torch.tensor(True)
    assert kernel(x, flag)[0, 0].item() == 2
    flag.fill_(False)  # the same tensor, another value: read at run time, not baked
    assert kernel(x, flag)[0, 0].item() == 3
    assert kernel(x, torch.tensor([0.5]))[0, 0].item() == 2  # nonzero float: true, as in torch
    assert kernel(x, torch.tensor(0))[0, 0].item() == 3


def test_if_on_a_tensor_argument_of_several_elements_is_refused():
    kernel = helion.kernel(_branch_on_flag, **REF)
    message = _expect(
        exc.HostTensorDirectUsage, kernel, torch.ones(4, 4), torch.ones(3), line_text="if flag:"
    )
    assert "3 elements" in message


# -- hl.full / hl.zeros / hl.arange arguments ------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_hl_full_with_a_tensor_value_is_refused(mode):
    def k(x):
        out = torch.zeros_like(x)
        for t in hl.tile(x.size(0)):
            v = x[t, 0]
            out[t, :] = hl.full([t, 16], v)
        return out

    message = _expect(
        exc.ShapeMismatch, helion.kernel(k, **mode), _x(), line_text="hl.full([t, 16], v)"
    )
    assert "one value" in message


@pytest.mark.parametrize("mode", MODES)
def test_hl_full_with_a_device_scalar_keeps_working(mode):
    def k(x):
        out = torch.zeros_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = hl.full([t, 16], x[0, 0] * 2) + x[t, :]
        return out

    x = _x()
    torch.testing.assert_close(helion.kernel(k, **mode)(x), x + x[0, 0] * 2)


@pytest.mark.parametrize("mode", MODES)
def test_negative_sizes_are_refused(mode):
    def zeros(x):
        out = torch.zeros_like(x)
        for t in hl.tile(x.size(0)):
            acc = hl.zeros([t, -3])
            out[t, :] = x[t, :] + acc.sum()
        return out

    def arange(x):
        out = torch.zeros_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = x[t, :] + hl.arange(-1).sum()
        return out

    message = _expect(
        exc.NegativeSize, helion.kernel(zeros, **mode), _x(), line_text="hl.zeros([t, -3])"
    )
    assert "-3" in message
    message = _expect(
        exc.NegativeSize, helion.kernel(arange, **mode), _x(), line_text="hl.arange(-1)"
    )
    assert "hl.arange(-1)" in message


@pytest.mark.parametrize("mode", MODES)
def test_a_dtype_that_is_not_a_torch_dtype_names_the_argument(mode):
    def k(x):
        out = torch.zeros_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = x[t, :] + hl.zeros([t, 16], dtype="float32")
        return out

    message = _expect(
        exc.TypeInferenceError, helion.kernel(k, **mode), _x(), line_text='dtype="float32"'
    )
    assert "hl.zeros: dtype must be a torch.dtype" in message and "torch.float32" in message
    assert "__add__" not in message


# -- integer division by zero ---------------------------------------------------------------------


def _floordiv_zero(x):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] // 0
    return out


def _remainder_zeros(x):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] % hl.zeros([t], dtype=torch.int64)
    return out


def _floordiv_tensor(x, y):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] // y[t]
    return out


@pytest.mark.parametrize("mode", MODES)
def test_integer_division_by_a_constant_zero_is_refused(mode):
    x = torch.arange(8)
    message = _expect(
        exc.IntegerDivisionByZero,
        helion.kernel(_floordiv_zero, **mode),
        x,
        line_text="x[t] // 0",
    )
    assert "division" in message
    message = _expect(
        exc.IntegerDivisionByZero,
        helion.kernel(_remainder_zeros, **mode),
        x,
        line_text="x[t] % hl.zeros",
    )
    assert "remainder" in message


def test_float_division_by_zero_and_nonzero_integer_divisors_keep_working():
    def k(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t] = x[t] / 0.0 + x[t] // 1.0
        return out

    x = torch.randn(8)
    torch.testing.assert_close(helion.kernel(k, **REF)(x), x / 0.0 + x // 1.0)
    a, b = torch.tensor([7, -7, 5, 0]), torch.tensor([2, 2, -3, 4])
    torch.testing.assert_close(helion.kernel(_floordiv_tensor, **REF)(a, b), a // b)


def test_the_ref_backend_refuses_a_divisor_that_is_zero_at_run_time():
    a, b = torch.tensor([7, 1, 5, 3]), torch.tensor([2, 0, 1, 1])
    message = _expect(
        exc.IntegerDivisionByZero,
        helion.kernel(_floordiv_tensor, **REF),
        a,
        b,
        line_text="x[t] // y[t]",
    )
    assert "run time" in message


# -- names bound in host code ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_host_imports_defs_and_classes_are_visible_to_device_code(mode):
    def k(x):
        import math as m
        from math import pi

        def doubled(a):
            return a * 2

        class Scale:
            factor = 3.0

        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = doubled(x[t, :]) * pi + m.e * Scale.factor
        return out

    x = _x()
    torch.testing.assert_close(helion.kernel(k, **mode)(x), x * 2 * math.pi + math.e * 3.0)


# -- globals ---------------------------------------------------------------------------------------

COUNTER = 0


@pytest.mark.parametrize("mode", MODES)
def test_assigning_a_global_in_device_code_is_refused(mode):
    def augmented(x):
        global COUNTER
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            COUNTER = COUNTER + 1
            out[t, :] = x[t, :] + COUNTER
        return out

    def plain(x):
        global COUNTER
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            COUNTER = 1
            out[t, :] = x[t, :]
        return out

    message = _expect(
        exc.GlobalMutation,
        helion.kernel(augmented, **mode),
        _x(),
        line_text="COUNTER = COUNTER + 1",
    )
    assert "COUNTER" in message
    _expect(exc.GlobalMutation, helion.kernel(plain, **mode), _x(), line_text="COUNTER = 1")
    assert COUNTER == 0


def test_reading_a_global_and_assigning_it_in_host_code_keep_working():
    def k(x):
        global COUNTER
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = x[t, :] + COUNTER
        COUNTER = 0  # host code after the loops
        return out

    x = _x()
    torch.testing.assert_close(helion.kernel(k, **REF)(x), x)


# -- raw Python errors of device code --------------------------------------------------------------


def test_a_tensor_argument_used_as_a_python_number():
    @helion.kernel(**REF)
    def as_float(x, s):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = x[t, :] * float(s)
        return out

    @helion.kernel(**REF)
    def compared(x, s):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            if s > 0:
                out[t, :] = x[t, :]
            else:
                out[t, :] = -x[t, :]
        return out

    s = torch.tensor(2.0)
    message = _expect(exc.HostTensorDirectUsage, as_float, _x(), s, line_text="float(s)")
    assert "'s'" in message and "s[()]" in message
    message = _expect(exc.HostTensorDirectUsage, compared, _x(), s, line_text="if s > 0:")
    assert "s[()]" in message


def test_unknown_attributes_name_the_value_and_the_line():
    @helion.kernel(**REF)
    def method(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = x[t, :].foobar()
        return out

    @helion.kernel(**REF)
    def tile_attribute(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = x[t, :] + t.foo
        return out

    message = _expect(exc.DeviceAttributeError, method, _x(), line_text="x[t, :].foobar()")
    assert "'foobar'" in message
    message = _expect(exc.DeviceAttributeError, tile_attribute, _x(), line_text="t.foo")
    assert "'foo'" in message and "block_size" in message
    assert issubclass(exc.DeviceAttributeError, AttributeError)  # hasattr keeps working


def _endless(a):
    return _endless(a + 1)


@pytest.mark.parametrize("mode", MODES)
def test_unbounded_recursion_in_a_helper(mode):
    def k(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = _endless(x[t, :])
        return out

    message = _expect(
        exc.DeviceRecursionError, helion.kernel(k, **mode), _x(), line_text="_endless(x[t, :])"
    )
    assert "recursion" in message


@pytest.mark.parametrize("mode", MODES)
def test_keyword_arguments_hl_tile_and_hl_grid_do_not_take(mode):
    def tile_kw(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0), bogus=3):
            out[t, :] = x[t, :]
        return out

    def grid_block_size(x):
        out = torch.empty_like(x)
        for i in hl.grid(x.size(0), block_size=2):
            out[i, :] = x[i, :]
        return out

    message = _expect(
        exc.InvalidAPIUsage, helion.kernel(tile_kw, **mode), _x(), line_text="bogus=3"
    )
    assert "'bogus'" in message
    message = _expect(
        exc.InvalidAPIUsage,
        helion.kernel(grid_block_size, **mode),
        _x(),
        line_text="block_size=2",
    )
    assert "hl.tile(..., block_size=...)" in message


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("y", [None, [1.0, 2.0]], ids=["none", "list"])
def test_indexing_a_value_that_is_not_a_tensor(mode, y):
    def k(x, y):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = x[t, :] + y[t, :]
        return out

    message = _expect(exc.DeviceTypeError, helion.kernel(k, **mode), _x(), y, line_text="y[t, :]")
    assert "TypeError" in message
    assert issubclass(exc.DeviceTypeError, TypeError)


# -- messages ------------------------------------------------------------------------------------


def test_the_truth_value_of_a_block_size_says_so():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            v = x[t, :]
            assert v.shape[0] > 0
            out[t, :] = v
        return out

    message = _expect(exc.TypeInferenceError, k, _x(), line_text="assert v.shape[0] > 0")
    assert "block size" in message and "assert" in message


def test_indexing_a_number_argument_says_it_is_a_number():
    @helion.kernel(**REF)
    def k(x, y):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = x[t, :] * y[t]
        return out

    message = _expect(exc.TypeInferenceError, k, _x(), 2.0, line_text="y[t]")
    assert "'y' is a number argument" in message
    assert "indexing a device tensor" not in message


@pytest.mark.parametrize("mode", MODES)
def test_a_negative_index_out_of_range_is_reported_as_written(mode):
    def k(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t, :] = x[t, :] + x[t, -20][:, None]
        return out

    message = _expect(exc.IndexOutOfBounds, helion.kernel(k, **mode), _x(), line_text="x[t, -20]")
    assert "index -20" in message and "index -4" not in message


def test_zip_over_range_in_device_code_names_range():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            acc = hl.zeros([t, 16])
            for _, w in zip(range(2), [1.0, 2.0], strict=True):
                acc = acc + x[t, :] * w
            out[t, :] = acc
        return out

    message = _expect(exc.LoopFunctionNotInFor, k, _x(), line_text="zip(range(2)")
    assert "`range(...)` is hl.grid" in message and "hl.static_range" in message


def test_zip_over_static_range_keeps_working():
    @helion.kernel(**REF)
    def k(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            acc = hl.zeros([t, 16])
            for _, w in zip(hl.static_range(2), [1.0, 2.0], strict=True):
                acc = acc + x[t, :] * w
            out[t, :] = acc
        return out

    x = _x()
    torch.testing.assert_close(k(x), x * 3)


# -- hl.register_block_size -----------------------------------------------------------------------


def _register_zero(x):
    bs = hl.register_block_size(0)
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0), block_size=bs):
        out[t, :] = x[t, :]
    return out


def _register_float(x):
    bs = hl.register_block_size(8.5)
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0), block_size=bs):
        out[t, :] = x[t, :]
    return out


def _register_16_64(x):
    bs = hl.register_block_size(16, 64)
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0), block_size=bs):
        out[t, :] = x[t, :]
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "fn, line, text",
    [
        (_register_zero, "hl.register_block_size(0)", "at least 1, got 0"),
        (_register_float, "hl.register_block_size(8.5)", "must be an int, got float 8.5"),
    ],
    ids=["zero", "float"],
)
def test_register_block_size_bounds_are_checked(mode, fn, line, text):
    message = _expect(exc.InvalidAPIUsage, helion.kernel(fn, **mode), _x(), line_text=line)
    assert text in message


def test_a_config_below_the_registered_minimum_is_refused():
    kernel = helion.kernel(_register_16_64, backend="ref", config=helion.Config(block_sizes=[2]))
    with pytest.raises(exc.InvalidConfig) as info:
        kernel(torch.randn(64, 4))
    assert "below the minimum 16" in str(info.value)
    ok = helion.kernel(_register_16_64, backend="ref", config=helion.Config(block_sizes=[32]))
    x = torch.randn(64, 4)
    torch.testing.assert_close(ok(x), x)


# -- eager mode: the errors compiled kernels give -------------------------------------------------


def _add_rows(x, y):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, :] + y[t, :]
    return out


@pytest.mark.parametrize("mode", MODES)
def test_shapes_that_do_not_broadcast(mode):
    message = _expect(
        exc.ShapeMismatch,
        helion.kernel(_add_rows, **mode),
        torch.randn(4, 4),
        torch.randn(4, 3),
        line_text="x[t, :] + y[t, :]",
    )
    assert "broadcast" in message or "must match" in message


@pytest.mark.parametrize("mode", MODES)
def test_a_tile_past_the_end_of_a_tensor(mode):
    message = _expect(
        exc.IndexOutOfBounds,
        helion.kernel(_add_rows, **mode),
        torch.randn(4, 4),
        torch.randn(2, 4),
        line_text="y[t, :]",
    )
    assert "'y'" in message and "size 2" in message


def test_eager_refuses_a_loop_carried_dtype_change_as_compiled_kernels_do():
    def k(x):
        m, n = x.shape
        out = torch.empty([m], dtype=torch.float32, device=x.device)
        for tm in hl.tile(m):
            acc = hl.zeros([tm], dtype=torch.float16)
            for tn in hl.tile(n):
                acc = acc + x[tm, tn].float().sum(-1)
            out[tm] = acc
        return out

    x = torch.randn(4, 10).half()
    for mode in (REF, EAGER):
        message = _expect(
            exc.LoopCarriedTypeChange,
            helion.kernel(k, **mode),
            x,
            line_text="for tn in hl.tile(n):",
        )
        assert "'acc'" in message


def test_eager_accepts_loop_carried_values_that_keep_their_types():
    def k(x):
        m, n = x.shape
        out = torch.empty([m], dtype=torch.float32, device=x.device)
        for tm in hl.tile(m):
            acc = hl.zeros([tm], dtype=torch.float32)
            count = 0
            for tn in hl.tile(n, block_size=4):
                rows = x[tm, tn]  # first bound inside the loop: not carried
                acc = acc + rows.sum(-1).half()  # narrower: cast back, as compiled
                count = count + 1
            out[tm] = acc + count * 0
        return out

    x = torch.randn(4, 10)
    torch.testing.assert_close(helion.kernel(k, **EAGER)(x), x.sum(-1), atol=1e-2, rtol=1e-2)
