"""Bad input gets a clear error that names the kernel's file and line (with a caret)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

THIS_FILE = __file__


def _x(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def _expect(error_type: type, fn, *args, line_text: str | None = None):
    with pytest.raises(error_type) as info:
        fn(*args)
    message = str(info.value)
    if line_text is not None:
        assert THIS_FILE in message, message
        assert line_text in message, message
        assert "^" in message, message
    return message


def test_unsupported_torch_op_names_op_and_line():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = torch.fft.fft(x[tile])
        return out

    message = _expect(exc.BaseError, k, _x(10), line_text="torch.fft.fft(x[tile])")
    assert "fft" in message


def test_nonzero_on_device_is_rejected():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = torch.nonzero(x[tile])
        return out

    _expect(exc.NotAllowedOnDevice, k, _x(10), line_text="torch.nonzero(x[tile])")


def test_unpacking_a_single_tile():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for a, b in hl.tile(x.size(0)):  # noqa: B007 - the unpacking is the error under test
            out[a] = x[a]
        return out

    _expect(exc.FailedToUnpackTile, k, _x(10))


def test_rank_mismatch():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
        return out

    _expect(exc.RankMismatch, k, _x(10, 4), line_text="out[tile] = x[tile]")


def test_host_variable_modified_on_device():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        scale = 2.0
        for tile in hl.tile(x.size(0)):
            scale = 3.0
            out[tile] = x[tile] * scale
        return out

    _expect(exc.CannotModifyHostVariableOnDevice, k, _x(10), line_text="scale = 3.0")


def test_device_variable_read_on_host():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            val = x[tile] * 2
            out[tile] = val
        return val

    _expect(exc.CannotReadDeviceVariableOnHost, k, _x(10), line_text="return val")


def test_unsupported_argument_type():
    @helion.kernel(autotune_effort="none")
    def k(x, y):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
        return out

    with pytest.raises(TypeError, match="unsupported argument type"):
        k(_x(10), object())


def test_too_many_arguments():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
        return out

    with pytest.raises(TypeError):
        k(_x(10), _x(10))


def _copy_kernel(**settings):
    @helion.kernel(**settings)
    def copy(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = x[tile]
        return out

    return copy


def test_invalid_config_field():
    k = _copy_kernel(config=helion.Config(block_sizes=[16, 16], not_a_field=3))
    _expect(exc.InvalidConfig, k, _x(20, 20))


def test_non_power_of_two_block_size():
    k = _copy_kernel(config=helion.Config(block_sizes=[24, 16]))
    message = _expect(exc.InvalidConfig, k, _x(20, 20))
    assert "power" in message.lower()


def test_too_few_block_sizes():
    k = _copy_kernel(config=helion.Config(block_sizes=[16]))
    message = _expect(exc.InvalidConfig, k, _x(20, 20))
    assert "block sizes" in message


def test_invalid_config_value_type():
    with pytest.raises(exc.InvalidConfig):
        helion.Config(num_warps="many")


def test_mismatched_dtypes_in_dot():
    @helion.kernel(autotune_effort="none")
    def k(x, y):
        m, kk = x.shape
        _, n = y.shape
        out = torch.empty([m, n], dtype=torch.float32)
        for tm, tn in hl.tile([m, n]):
            acc = hl.zeros([tm, tn])
            for tk in hl.tile(kk):
                acc = acc + hl.dot(x[tm, tk], y[tk, tn])
            out[tm, tn] = acc
        return out

    _expect(
        exc.TypeInferenceError,
        k,
        _x(16, 16, dtype=torch.int8),
        _x(16, 16, dtype=torch.float16),
        line_text="hl.dot(x[tm, tk], y[tk, tn])",
    )


def test_matmul_inner_dims_mismatch():
    @helion.kernel(autotune_effort="none")
    def k(x, y):
        m, _ = x.shape
        _, n = y.shape
        out = torch.empty([m, n])
        for tm, tn in hl.tile([m, n]):
            out[tm, tn] = x[tm, :] @ y[:, tn]
        return out

    _expect(exc.ShapeMismatch, k, _x(8, 5), _x(6, 8), line_text="x[tm, :] @ y[:, tn]")


def test_missing_device_loop():
    @helion.kernel(autotune_effort="none")
    def k(x):
        return x * 2

    _expect(exc.NoDeviceLoopsInKernel, k, _x(4))


def test_device_loop_nested_in_host_control_flow():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        if x.size(0) > 2:
            for tile in hl.tile(x.size(0)):
                out[tile] = x[tile]
        return out

    _expect(exc.NestedGridLoop, k, _x(4), line_text="for tile in hl.tile(x.size(0))")


def test_statement_between_top_level_loops():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
        y = out * 2
        for tile in hl.tile(x.size(0)):
            out[tile] = y[tile]
        return out

    _expect(exc.TopLevelStatementBetweenLoops, k, _x(4), line_text="y = out * 2")


def test_return_inside_device_loop():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
            return out
        return out

    _expect(exc.StatementNotSupported, k, _x(4), line_text="return out")


def test_for_else_on_device():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
        else:
            pass
        return out

    _expect(exc.DeviceLoopElseBlock, k, _x(4))


def test_star_args_kernel():
    with pytest.raises(TypeError, match=r"\*args"):

        @helion.kernel
        def k(*xs):
            for _tile in hl.tile(4):
                pass


def test_closure_kernel():
    scale = 2.0

    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] * scale
        return out

    _expect(exc.ClosuresNotSupported, k, _x(4))


def test_device_api_on_host():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        acc = hl.zeros([4])  # noqa: F841 - the host-side call is the error under test
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
        return out

    _expect(exc.DeviceAPIOnHost, k, _x(4))


def test_language_call_outside_kernel():
    with pytest.raises(exc.NotInsideKernel):
        hl.zeros([4])


def test_tile_outside_for_loop():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        tiles = hl.tile(x.size(0))  # noqa: F841 - the call outside a for is the error under test
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
        return out

    _expect(exc.LoopFunctionNotInFor, k, _x(4))


def test_host_tensor_used_without_loading():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = torch.exp(x)
        return out

    _expect(exc.HostTensorDirectUsage, k, _x(4), line_text="torch.exp(x)")


def test_device_tensor_subscript_assignment():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            acc = hl.zeros([tile])
            acc[0] = 1.0
            out[tile] = acc
        return out

    _expect(exc.DeviceTensorSubscriptAssignmentNotAllowed, k, _x(4), line_text="acc[0] = 1.0")


def test_boolean_mask_indexing():
    @helion.kernel(autotune_effort="none")
    def k(x, idx):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            keep = idx[tile] > 0
            out[tile] = x[keep]
        return out

    _expect(
        exc.DataDependentOutputShapeNotSupported,
        k,
        _x(4),
        torch.ones(4, dtype=torch.int32),
        line_text="x[keep]",
    )


def test_broadcast_shape_mismatch():
    @helion.kernel(autotune_effort="none")
    def k(x, y):
        out = torch.empty_like(x)
        for ta in hl.tile(x.size(0)):
            for tb in hl.tile(y.size(0)):
                out[ta] = x[ta] + y[tb]
        return out

    _expect(exc.ShapeMismatch, k, _x(8), _x(8), line_text="x[ta] + y[tb]")


def test_store_shape_mismatch():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty([x.size(0)])
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile, :]
        return out

    _expect(exc.ShapeMismatch, k, _x(8, 3), line_text="out[tile] = x[tile, :]")


def test_multiple_assignment_targets():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            a = b = x[tile]
            out[tile] = a + b
        return out

    _expect(exc.AssignmentMultipleTargets, k, _x(4))


def test_specialize_on_device():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            n = hl.specialize(x.size(0))
            out[tile] = x[tile] * n
        return out

    _expect(exc.SpecializeOnDevice, k, _x(4))


def test_breakpoint_on_device_needs_interpret():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            breakpoint()
            out[tile] = x[tile]
        return out

    _expect(exc.BreakpointInDeviceLoopRequiresInterpret, k, _x(4))


def test_atomic_on_device_tensor():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.zeros_like(x)
        for tile in hl.tile(x.size(0)):
            acc = hl.zeros([tile])
            hl.atomic_add(acc, [tile], x[tile])
            out[tile] = acc
        return out

    _expect(exc.AtomicOnDeviceTensor, k, _x(4))


def test_reduction_over_several_dims():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty([x.size(0)])
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile, :, :].sum([1, 2])
        return out

    _expect(exc.MultipleReductionDims, k, _x(4, 3, 5))


def test_decorator_below_helion_kernel():
    def identity(fn):
        return fn

    @helion.kernel(autotune_effort="none")
    @identity
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile]
        return out

    _expect(exc.DecoratorAfterHelionKernelDecorator, k, _x(4))


def test_no_tensor_arguments():
    @helion.kernel(autotune_effort="none")
    def k(n):
        for _tile in hl.tile(n):
            pass
        return n

    _expect(exc.NoTensorArgs, k, 4)


def test_if_on_a_tensor_with_dims():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            v = x[tile]
            if v > 0:
                v = v * 2
            out[tile] = v
        return out

    _expect(exc.TypeInferenceError, k, _x(4), line_text="if v > 0")


def test_invalid_tile_range():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(5, 2):
            out[tile] = x[tile]
        return out

    _expect(exc.InvalidTileRange, k, _x(8))


def test_loop_carried_shape_change():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty([x.size(0)])
        for tm in hl.tile(x.size(0)):
            acc = hl.zeros([tm])
            for tn in hl.tile(x.size(1)):
                acc = x[tm, tn]
            out[tm] = acc.sum(-1)
        return out

    _expect(exc.ControlFlowTensorMismatch, k, _x(4, 6))


def test_an_int_index_on_a_sliced_dimension_of_a_device_tensor_says_why():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty([x.size(0)])
        for tm in hl.tile(x.size(0)):
            v = x[tm, :]
            out[tm] = v[:, 0]
        return out

    error = _expect(exc.InvalidIndexingType, k, _x(5, 8))
    text = str(error)
    assert "the int 0 on dimension 1" in text and "a ':' slice" in text, text
    assert "x[tile, 0]" in text and "out[tm] = v[:, 0]" in text, text


def test_boolean_mask_indexing_of_a_device_tensor_is_refused_as_data_dependent():
    @helion.kernel(autotune_effort="none")
    def k(x):
        out = torch.empty([x.size(0)])
        for tm in hl.tile(x.size(0)):
            v = x[tm, :]
            out[tm] = v[v > 0].sum()
        return out

    error = _expect(exc.DataDependentOutputShapeNotSupported, k, _x(5, 8))
    assert "Boolean-mask indexing" in str(error) and "DeviceValue" not in str(error)


def test_unknown_setting():
    with pytest.raises(TypeError):
        helion.kernel(not_a_setting=True)(lambda x: x)


def test_bad_autotune_effort():
    with pytest.raises(Exception, match="quick"):
        helion.Settings(autotune_effort="fastest")


def test_kernel_without_readable_source_says_to_define_it_in_a_file() -> None:
    namespace: dict = {"helion": helion, "hl": hl, "torch": torch}
    exec(
        "@helion.kernel(backend='ref')\n"
        "def piped(x):\n"
        "    out = torch.empty_like(x)\n"
        "    for tile in hl.tile(x.size(0)):\n"
        "        out[tile] = x[tile]\n"
        "    return out\n",
        namespace,
    )
    with pytest.raises(exc.KernelSourceUnavailable, match="piped") as info:
        namespace["piped"](torch.randn(5))
    assert "define it in a file" in str(info.value)


@helion.kernel(backend="ref", config=helion.Config(block_sizes=[8]))
def _add_into_host_allocation(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape)  # on the CPU, whatever x's device
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + y[tile]
    return out


def test_tensors_on_different_devices_are_named():
    x = _x(13)
    message = _expect(
        exc.TensorsOnDifferentDevices, _add_into_host_allocation, x, torch.empty(13, device="meta")
    )
    assert "'out' on cpu" in message and "'y' on meta" in message, message
    x_meta = torch.empty(13, device="meta")
    message = _expect(exc.TensorsOnDifferentDevices, _add_into_host_allocation, x_meta, x_meta)
    assert "'out' on cpu" in message and "'x' on meta" in message, message
    y = _x(13)
    torch.testing.assert_close(_add_into_host_allocation(x, y), x + y)


@helion.kernel(backend="ref", config=helion.Config(block_sizes=[8]))
def _scaled(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2
    return out


@pytest.mark.parametrize(
    "make, what",
    [
        (lambda: torch.randn(13).to_sparse(), "layout torch.sparse_coo"),
        (lambda: torch.quantize_per_tensor(torch.randn(13), 0.1, 0, torch.quint8), "quantized"),
    ],
    ids=["sparse", "quantized"],
)
def test_tensors_that_are_not_dense_and_strided_are_named(make, what):
    _scaled.reset()
    _expect(exc.UnsupportedTensorKind, _scaled, make())  # the first call
    for _ in range(3):  # warm: the warm call, the key function
        _scaled(_x(13))
    assert what in _expect(exc.UnsupportedTensorKind, _scaled, make())


def test_an_mkldnn_tensor_in_a_first_call_is_named():
    # after a warm-up its key is a dense tensor's (its strides read as one's): the host code's
    # first torch op on it then fails with torch's own error, at the kernel's line
    _scaled.reset()
    assert "layout torch._mkldnn" in _expect(
        exc.UnsupportedTensorKind, _scaled, torch.randn(13).to_mkldnn()
    )


def test_a_nested_tensor_after_a_warm_up_is_named_not_fatal():
    """torch's C++ tensor check aborts the process on a strided nested tensor: the warm call
    must test for one first. Run in a child process, so that a regression fails this test only."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import warnings
        import torch
        from helion import exc
        import test_errors as t

        warnings.simplefilter("ignore")
        for _ in range(3):
            t._scaled(torch.randn(13))
        try:
            t._scaled(torch.nested.nested_tensor([torch.randn(13)]))
        except exc.UnsupportedTensorKind as error:
            print("named:", error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(__import__("pathlib").Path(__file__).parent),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "named: A tensor argument is a nested tensor" in done.stdout, (
        done.stdout + done.stderr[-2000:]
    )
