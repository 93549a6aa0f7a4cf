"""Error messages public Helion users meet: the class public Helion raises (or one that is an
instance of it), the op the user called, readable shapes, and the kernel line of the mistake."""

from __future__ import annotations

import pickle

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

THIS_FILE = __file__
EAGER = helion.RefMode.EAGER


def _kernel(fn, **settings):  # type: ignore[no-untyped-def]
    return helion.kernel(fn, backend="ref", autotune_effort="none", **settings)


def _raises(error_type: type, fn, *args, line: str | None = None) -> BaseException:  # type: ignore[no-untyped-def]
    """The error ``fn(*args)`` raises; with ``line``, it must point at that kernel line."""
    with pytest.raises(error_type) as info:
        fn(*args)
    error = info.value
    if line is not None:
        message = str(error)
        assert error.loc is not None, message
        assert error.loc.filename == THIS_FILE, message
        assert error.loc.line().strip() == line, message
        assert THIS_FILE in message and line in message and "^" in message, message
    return error


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


# -- 1. hl.tile called outside a `for` statement ----------------------------------------------


def tile_outside_for(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    tiles = hl.tile(x.size(0))
    for t in tiles:
        out[t, :] = x[t, :]
    return out


def test_tile_outside_for_is_loop_function_not_in_for_at_the_call():
    error = _raises(
        exc.LoopFunctionNotInFor,
        _kernel(tile_outside_for),
        _x(32, 16),
        line="tiles = hl.tile(x.size(0))",
    )
    assert "hl.tile must be called from a for loop" in str(error)
    assert "contains no device loops" not in str(error)


def grid_outside_for_beside_a_loop(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    rows = hl.grid(x.size(0))  # noqa: F841 - the call outside a for is the error under test
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, :]
    return out


def test_grid_outside_for_beside_a_device_loop_names_hl_grid_and_its_line():
    error = _raises(
        exc.LoopFunctionNotInFor,
        _kernel(grid_outside_for_beside_a_loop),
        _x(8, 4),
        line="rows = hl.grid(x.size(0))  # noqa: F841 - the call outside a for is the error under test",
    )
    assert "hl.grid must be called from a for loop" in str(error)


# -- 2. an undefined name in device code ------------------------------------------------------


def undefined_name(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] * undefined_scale  # noqa: F821 - the undefined name is the error under test
    return out


def test_undefined_name_in_device_code_is_undefined_variable():
    error = _raises(
        exc.UndefinedVariable,
        _kernel(undefined_name),
        _x(8),
        line="out[t] = x[t] * undefined_scale  # noqa: F821 - the undefined name is the error "
        "under test",
    )
    assert isinstance(error, NameError)  # code catching Python's NameError still does
    assert error.name == "undefined_scale"
    assert "name 'undefined_scale' is not defined" in str(error)
    assert error.loc.format().splitlines()[-1].strip() == "^" * len("undefined_scale")


def undefined_in_helper(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] + torch.no_such_function(x[t])
    return out


def test_missing_module_attribute_is_still_an_attribute_error():
    with pytest.raises(AttributeError):
        _kernel(undefined_in_helper)(_x(8))


# -- 3. the op named in host-code and outside-kernel errors --------------------------------


def test_language_call_outside_a_kernel_names_the_op_called():
    with pytest.raises(exc.NotInsideKernel) as info:
        hl.zeros([4])
    assert str(info.value).startswith("hl.zeros must be called from inside a kernel."), info.value
    with pytest.raises(exc.NotInsideKernel, match=r"^hl\.cumsum must be called"):
        hl.cumsum(torch.zeros(4), 0)
    with pytest.raises(exc.NotInsideKernel, match=r"^hl\.full must be called"):
        hl.full([4], 1.0)


def zeros_on_host(x):  # type: ignore[no-untyped-def]
    z = hl.zeros([4])  # noqa: F841 - the host-side call is the error under test
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, :]
    return out


def test_device_api_in_host_code_names_the_op_and_the_line():
    error = _raises(
        exc.DeviceAPIOnHost,
        _kernel(zeros_on_host),
        _x(32, 16),
        line="z = hl.zeros([4])  # noqa: F841 - the host-side call is the error under test",
    )
    assert "hl.zeros is only allowed inside the `hl.tile` or `hl.grid` loop" in str(error)
    assert "hl.full" not in str(error)
    assert error.loc.format().splitlines()[-1].strip() == "^" * len("hl.zeros([4])")


def test_device_api_in_eager_host_code_names_the_op():
    error = _raises(exc.DeviceAPIOnHost, _kernel(zeros_on_host, ref_mode=EAGER), _x(32, 16))
    assert "hl.zeros is only allowed" in str(error) and "hl.full" not in str(error)


def atomic_on_host(x):  # type: ignore[no-untyped-def]
    hl.atomic_add(x, [0], 1.0)
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t]
    return out


def test_atomic_in_host_code_names_the_atomic():
    error = _raises(
        exc.DeviceAPIOnHost,
        _kernel(atomic_on_host),
        _x(8),
        line="hl.atomic_add(x, [0], 1.0)",
    )
    assert str(error).splitlines()[-1].startswith("hl.atomic_add is only allowed"), error


# -- 4. a tile where hl.* takes a list ---------------------------------------------------------


def zeros_of_a_tile(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        z = hl.zeros(t)
        out[t] = x[t] + z
    return out


def load_with_a_tile(x, y):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = hl.load(y, t)
    return out


def zeros_of_an_int(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] + hl.zeros(4)[0]
    return out


@pytest.mark.parametrize("ref_mode", [None, EAGER], ids=["compiled", "eager"])
def test_tile_as_shape_says_the_shape_must_be_a_list(ref_mode):
    settings = {"ref_mode": ref_mode} if ref_mode is not None else {}
    error = _raises(
        exc.TileGivenForSequence,
        _kernel(zeros_of_a_tile, **settings),
        _x(32),
        line="z = hl.zeros(t)",
    )
    text = str(error)
    assert (
        "hl.zeros: the shape must be a list or tuple (got a tile); write hl.zeros([tile])." in text
    )
    assert "hl.tile() on a 1D tensor" not in text and "Hint" not in text, text
    # public Helion's class for it, and a TypeError as Python would raise
    assert isinstance(error, (exc.FailedToUnpackTile)) and isinstance(error, TypeError)


@pytest.mark.parametrize("ref_mode", [None, EAGER], ids=["compiled", "eager"])
def test_tile_as_index_says_the_index_must_be_a_list(ref_mode):
    settings = {"ref_mode": ref_mode} if ref_mode is not None else {}
    error = _raises(
        exc.SequenceExpected,
        _kernel(load_with_a_tile, **settings),
        _x(32),
        _x(32),
        line="out[t] = hl.load(y, t)",
    )
    assert (
        "hl.load: the index must be a list or tuple (got a tile); write hl.load(tensor, [tile])."
        in str(error)
    )


def test_int_as_shape_says_the_shape_must_be_a_list():
    error = _raises(
        exc.SequenceExpected,
        _kernel(zeros_of_an_int),
        _x(32),
        line="out[t] = x[t] + hl.zeros(4)[0]",
    )
    assert (
        "hl.zeros: the shape must be a list or tuple (got the int 4); write hl.zeros([4])."
        in str(error)
    )


# -- 5. hl.grid with a step ---------------------------------------------------------------------


def grid_with_step(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for i in hl.grid(0, x.size(0), 2):
        out[i] = x[i]
    return out


def range_with_step_on_device(x):  # type: ignore[no-untyped-def]
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        for j in range(0, x.size(1), 2):
            out[t, j] = x[t, j]
    return out


def test_top_level_grid_step_says_the_step_is_unsupported():
    error = _raises(
        exc.NotAllowedOnDevice,
        _kernel(grid_with_step),
        _x(32),
        line="for i in hl.grid(0, x.size(0), 2):",
    )
    assert isinstance(error, exc.GridStepNotSupported)
    text = str(error)
    assert "hl.grid with a step other than 1 (step=2) is not supported" in text
    assert "inside the `hl.tile` or `hl.grid` loop" not in text


def test_device_range_step_says_the_step_is_unsupported():
    error = _raises(
        exc.GridStepNotSupported,
        _kernel(range_with_step_on_device),
        _x(8, 6),
        line="for j in range(0, x.size(1), 2):",
    )
    assert "step=2" in str(error) and "range() is hl.grid" in str(error)


# -- 6. public class names that our more specific errors are instances of -------------------


def split_chunk(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        a, b = torch.chunk(x[t, :], 2, dim=1)
        out[t, :] = torch.cat([a, b], dim=1)
    return out


def split_split(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        a, b = torch.split(x[t, :], 8, dim=1)
        out[t, :] = torch.cat([a, b], dim=1)
    return out


def split_unbind(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        rows = torch.unbind(x[t, :], dim=1)
        out[t, :] = rows[0]
    return out


def split_tensor_split(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        a, b = torch.tensor_split(x[t, :], 2, dim=1)
        out[t, :] = torch.cat([a, b], dim=1)
    return out


def split_method(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        a, b = x[t, :].chunk(2, dim=1)
        out[t, :] = torch.cat([a, b], dim=1)
    return out


@pytest.mark.parametrize(
    ("fn", "name", "line"),
    [
        (split_chunk, "torch.chunk", "a, b = torch.chunk(x[t, :], 2, dim=1)"),
        (split_split, "torch.split", "a, b = torch.split(x[t, :], 8, dim=1)"),
        (split_unbind, "torch.unbind", "rows = torch.unbind(x[t, :], dim=1)"),
        (split_tensor_split, "torch.tensor_split", "a, b = torch.tensor_split(x[t, :], 2, dim=1)"),
        (split_method, "torch.chunk", "a, b = x[t, :].chunk(2, dim=1)"),
    ],
    ids=["chunk", "split", "unbind", "tensor_split", "method"],
)
def test_split_ops_on_device_are_unsupported_split_operation(fn, name, line):
    error = _raises(exc.UnsupportedSplitOperation, _kernel(fn), _x(8, 16), line=line)
    assert isinstance(error, exc.NotAllowedOnDevice)  # the class these were before
    assert f"{name} is not supported inside device loops" in str(error), error
    assert "Hint: Use hl.split() instead." in str(error)


def overpacked_1d(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[[t]]
    return out


def overpacked_2d(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = x[[t], :]
    return out


def overpacked_store(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[[t]] = x[t]
    return out


@pytest.mark.parametrize(
    ("fn", "shape", "line"),
    [
        (overpacked_1d, (8,), "out[t] = x[[t]]"),
        (overpacked_2d, (8, 4), "out[t, :] = x[[t], :]"),
        (overpacked_store, (8,), "out[[t]] = x[t]"),
    ],
    ids=["load-1d", "load-2d", "store"],
)
def test_tile_in_a_list_index_is_overpacked_tile(fn, shape, line):
    error = _raises(exc.OverpackedTile, _kernel(fn), _x(*shape), line=line)
    assert isinstance(error, exc.InvalidIndexingType)
    assert "a list [tile]" in str(error)
    assert "x[tile] instead of x[[tile]]" in str(error)


@helion.kernel(backend="ref", autotune_effort="none")
def _copy(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t]
    return out


def calls_a_kernel(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = _copy(x[t])
    return out


def test_kernel_called_on_device_is_nested_kernel_calls_not_supported():
    error = _raises(
        exc.NestedKernelCallsNotSupported,
        _kernel(calls_a_kernel),
        _x(8),
        line="out[t] = _copy(x[t])",
    )
    assert isinstance(error, exc.KernelCalledOnDevice)
    assert "'_copy'" in str(error) and "'calls_a_kernel'" in str(error)


# -- 7. shapes in messages show extents and tile names, not IR symbols -----------------------


def _no_symbols(text: str) -> None:
    assert "_RDIM_SIZE" not in text and "_BLOCK_SIZE" not in text, text


def store_shape_mismatch(x):  # type: ignore[no-untyped-def]
    out = torch.empty([x.size(0), 8])
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, :]
    return out


def broadcast_mismatch(x, y):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, :] + y[t, :]
    return out


def dot_k_mismatch(x, y):  # type: ignore[no-untyped-def]
    out = torch.empty([x.size(0), y.size(1)])
    for t in hl.tile(x.size(0)):
        out[t, :] = hl.dot(x[t, :], y[:, :])
    return out


def tile_vs_slice(x, y):  # type: ignore[no-untyped-def]
    m, n = x.shape
    out = torch.empty_like(x)
    for tm, tn in hl.tile([m, n]):
        out[tm, tn] = x[tm, tn] + y[tm, :]
    return out


def test_store_shape_mismatch_shows_extents_and_tile_names():
    error = _raises(
        exc.ShapeMismatch, _kernel(store_shape_mismatch), _x(32, 16), line="out[t, :] = x[t, :]"
    )
    text = str(error)
    _no_symbols(text)
    assert (
        "cannot store a value of shape [t.block_size, 16] into a slice of shape "
        "[t.block_size, 8]" in text
    ), text


def test_broadcast_mismatch_shows_extents():
    error = _raises(
        exc.ShapeMismatch,
        _kernel(broadcast_mismatch),
        _x(32, 16),
        _x(32, 8),
        line="out[t, :] = x[t, :] + y[t, :]",
    )
    text = str(error)
    _no_symbols(text)
    assert "(dim 1: 16 vs 8)" in text, text


def test_dot_k_mismatch_shows_extents():
    error = _raises(
        exc.ShapeMismatch,
        _kernel(dot_k_mismatch),
        _x(32, 16),
        _x(8, 4),
        line="out[t, :] = hl.dot(x[t, :], y[:, :])",
    )
    _no_symbols(str(error))
    assert "inner dimensions differ: 16 vs 8" in str(error), error


def test_tile_dims_are_named_by_their_loop_variables():
    error = _raises(
        exc.ShapeMismatch,
        _kernel(tile_vs_slice),
        _x(32, 16),
        _x(32, 8),
        line="out[tm, tn] = x[tm, tn] + y[tm, :]",
    )
    text = str(error)
    _no_symbols(text)
    assert "(dim 1: tn.block_size vs 8)" in text, text
    assert "(tm.block_size, tn.block_size)" in text, text


def commented_loop(x):  # type: ignore[no-untyped-def]
    out = torch.empty([x.size(0), 8])
    for row in hl.tile(x.size(0)):  # a comment on the for line
        out[row, :] = x[row, :]
    return out


def shared_block_size(x, y):  # type: ignore[no-untyped-def]
    m, n = x.shape
    bs = hl.register_block_size(16)
    out = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            out[ti, tj] = x[ti, tj] + y[ti, :]
    return out


def test_tile_name_with_a_comment_and_after_pickling():
    error = _raises(exc.ShapeMismatch, _kernel(commented_loop), _x(32, 16))
    assert "[row.block_size, 16]" in str(error), error
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)


def test_block_size_shared_by_loops_is_named_by_its_config_entry():
    error = _raises(exc.ShapeMismatch, _kernel(shared_block_size), _x(32, 16), _x(32, 8))
    text = str(error)
    _no_symbols(text)
    assert "(dim 1: block_sizes[0] vs 8)" in text, text


def test_error_texts_outside_tracing_are_unchanged():
    # the rewriting is the tracer's: an error made elsewhere keeps its text as given
    assert str(exc.ShapeMismatch("_RDIM_SIZE_1 vs 8")) == "Shape mismatch: _RDIM_SIZE_1 vs 8."


# -- 8. a for loop over a device tensor points at its `for` line --------------------------------


def for_over_device_tensor(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        for v in x[t, :]:
            out[t, :] = v
    return out


def for_over_tensor_argument(x):  # type: ignore[no-untyped-def]
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        for v in x:
            out[t, :] = v
    return out


def test_invalid_device_for_loop_points_at_the_for_line():
    error = _raises(
        exc.InvalidDeviceForLoop,
        _kernel(for_over_device_tensor),
        _x(32, 16),
        line="for v in x[t, :]:",
    )
    assert "got a device tensor" in str(error)
    error = _raises(
        exc.InvalidDeviceForLoop,
        _kernel(for_over_tensor_argument),
        _x(32, 16),
        line="for v in x:",
    )
    assert "got a tensor argument" in str(error)


# -- TiledKMatmulAccumulationWarning --------------------------------------------------------------


def mm_accumulating_rounded_products(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    out = torch.empty([m, y.size(1)], dtype=torch.float32)
    for tm, tn in hl.tile([m, y.size(1)]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc += x[tm, tk] @ y[tk, tn]
        out[tm, tn] = acc
    return out


def mm_with_addmm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    out = torch.empty([m, y.size(1)], dtype=torch.float32)
    for tm, tn in hl.tile([m, y.size(1)]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc
    return out


def test_accumulating_a_16_bit_product_in_a_loop_warns_at_its_line(monkeypatch) -> None:
    """`acc += a @ b` with float16 a, b rounds each product to float16 first (as torch does):
    public Helion's TiledKMatmulAccumulationWarning, at the line; addmm does not warn, nor does
    the same pattern in float32, and ignore_warnings silences it."""
    import warnings

    monkeypatch.delenv("HELION_IGNORE_WARNINGS", raising=False)
    x, y = torch.randn(37, 48).half(), torch.randn(48, 19).half()

    def caught(fn, *args, **settings):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            helion.kernel(fn, backend="ref", autotune_effort="none", **settings).bind(args)
        return [w for w in seen if issubclass(w.category, exc.TiledKMatmulAccumulationWarning)]

    [warning] = caught(mm_accumulating_rounded_products, x, y)
    assert "rounded to torch.float16" in str(warning.message)
    assert "torch.addmm" in str(warning.message)
    line = mm_accumulating_rounded_products.__code__.co_firstlineno + 6
    assert warning.lineno == line
    assert caught(mm_with_addmm, x, y) == []
    assert caught(mm_accumulating_rounded_products, x.float(), y.float()) == []
    ignored = [exc.TiledKMatmulAccumulationWarning]
    assert caught(mm_accumulating_rounded_products, x, y, ignore_warnings=ignored) == []


# -- a container argument's missing key or item ----------------------------------------------------


def reads_a_missing_key(x: torch.Tensor, d: dict) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] * d["w"][t] + d["s"]
    return out


def reads_a_missing_item(x: torch.Tensor, ws: list) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] * ws[3][t]
    return out


@pytest.mark.parametrize("mode", ["ref", "eager"])
def test_a_missing_container_key_or_item_names_the_line(mode: str) -> None:
    """A raw KeyError / IndexError from deep in the tracer before; now DeviceLookupError at the
    kernel's line (still a KeyError and an IndexError)."""

    def make(fn):
        if mode == "eager":
            return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)
        return helion.kernel(fn, backend="ref", autotune_effort="none")

    x = torch.randn(8)
    with pytest.raises(exc.DeviceLookupError, match="key 's' not found") as raised:
        make(reads_a_missing_key)(x, {"w": torch.randn(8)})
    assert isinstance(raised.value, KeyError)
    assert raised.value.loc.lineno == reads_a_missing_key.__code__.co_firstlineno + 3
    with pytest.raises(exc.DeviceLookupError, match="list index out of range") as raised:
        make(reads_a_missing_item)(x, [torch.randn(8)])
    assert isinstance(raised.value, IndexError)
