"""How often host code runs on the real arguments: once per call of the kernel, and never in
the tracing runs (binding, `to_code`, `compile_config`, `set_config`, autotuning), which run it
on stand-ins of the arguments (`helion.runtime.stand_ins`). The tracing runs used to get the
real arguments, so an in-place host op before the device loops (``x.mul_(2)``) was applied 3
times by the first call and ~200 times under autotuning (found by exploratory testing)."""

from __future__ import annotations

import contextlib

import pytest
import torch

import helion
import helion.language as hl
from helion.runtime import stand_ins
from helion.runtime.kernel import BoundKernel

GLOBAL_SCALE = torch.full((8,), 3.0)


def double_then_add_one(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)  # host code writing into its argument, before the device loop
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


def add_one_then_copy(x: torch.Tensor) -> torch.Tensor:
    x.add_(1)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile]
    return out


FIRST_ROWS_RUNS: list[None] = []


def first_rows(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    FIRST_ROWS_RUNS.append(None)
    x.add_(1)
    n = int(offsets[-1])  # host code reading tensor data
    out = torch.zeros(n, x.size(1))
    for tile in hl.tile(n):
        out[tile, :] = x[tile, :] * 2
    return out


def _kernel(fn, **settings):
    settings.setdefault("autotune_effort", "none")
    return helion.kernel(fn, backend="ref", **settings)


def test_an_in_place_host_op_is_applied_once_per_call():
    kernel = _kernel(double_then_add_one)
    x = torch.ones(8)
    out = kernel(x)  # the first call: bound, traced, compiled, run
    assert x.tolist() == [2.0] * 8
    assert out.tolist() == [3.0] * 8
    out = kernel(x)  # a warm call
    assert x.tolist() == [4.0] * 8
    assert out.tolist() == [5.0] * 8


def test_bind_to_code_compile_config_and_set_config_leave_the_arguments_alone():
    kernel = _kernel(add_one_then_copy)
    x = torch.zeros(8)
    bound = kernel.bind((x,))
    bound.to_code(helion.Config(block_sizes=[4]))
    bound.compile_config(helion.Config(block_sizes=[2]))
    bound.set_config(helion.Config(block_sizes=[8]))
    assert x.tolist() == [0.0] * 8
    out = bound(x)
    assert x.tolist() == [1.0] * 8
    assert out.tolist() == [1.0] * 8


def test_a_call_after_bind_applies_the_host_code_once():
    kernel = _kernel(add_one_then_copy)
    x = torch.zeros(8)
    kernel.bind((x,))
    out = kernel(x)
    assert x.tolist() == [1.0] * 8
    assert out.tolist() == [1.0] * 8


def test_autotuning_leaves_the_arguments_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    kernel = _kernel(add_one_then_copy, autotune_precompile=False)
    x = torch.zeros(64)
    config = kernel.autotune((x,), effort="quick", max_evaluations=4)
    assert isinstance(config, helion.Config)
    assert x.tolist() == [0.0] * 64
    out = kernel(x)
    assert x.tolist() == [1.0] * 64
    assert out.tolist() == [1.0] * 64


def test_a_first_call_that_autotunes_applies_the_host_code_once():
    # both configs are benchmarked (on copies of the arguments), and their outputs compared with
    # the first one's: with the tracing runs writing into `x`, they disagreed
    configs = [helion.Config(block_sizes=[8]), helion.Config(block_sizes=[32])]
    kernel = helion.kernel(add_one_then_copy, backend="ref", configs=configs)
    x = torch.zeros(64)
    out = kernel(x)
    assert x.tolist() == [1.0] * 64
    assert out.tolist() == [1.0] * 64


def test_host_code_that_reads_tensor_data_runs_on_copies_in_tracing():
    # `int(offsets[-1])` cannot run on fake tensors: the tracing runs of this kernel take
    # scratch copies of the arguments (with their data), still never the arguments
    FIRST_ROWS_RUNS.clear()
    kernel = _kernel(first_rows)
    x, offsets = torch.zeros(8, 4), torch.tensor([0, 3, 5])
    bound = kernel.bind((x, offsets))
    bound.to_code(helion.Config(block_sizes=[4]))
    assert x.sum().item() == 0.0
    out = kernel(x, offsets)
    assert out.shape == (5, 4)
    assert out.tolist() == [[2.0] * 4] * 5
    assert x.tolist() == [[1.0] * 4] * 8
    out = kernel(x, offsets)
    assert out.tolist() == [[4.0] * 4] * 5
    # binding ran it on the arguments up to `x.add_`, then on fake tensors up to `int(...)`,
    # then on copies; `to_code` went straight to copies; then the two calls
    assert len(FIRST_ROWS_RUNS) == 3 + 1 + 2


def test_host_code_that_changes_a_list_argument_changes_it_once_per_call():
    def append_and_sum(xs: list[torch.Tensor], y: torch.Tensor) -> torch.Tensor:
        xs.append(y)
        out = torch.empty_like(y)
        for tile in hl.tile(y.size(0)):
            out[tile] = xs[0][tile] + xs[1][tile]
        return out

    kernel = _kernel(append_and_sum)
    xs = [torch.ones(8)]
    out = kernel(xs, torch.full((8,), 2.0))
    assert len(xs) == 2
    assert out.tolist() == [3.0] * 8


def test_host_code_passing_views_of_arguments_and_globals_to_device_code():
    def scaled_rows(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        flat_in = x.view(-1)  # views of the arguments, made in host code
        flat_out = out.view(-1)
        scale = GLOBAL_SCALE * 2  # a module-level tensor, read in host code
        for tile in hl.tile(flat_in.size(0)):
            flat_out[tile] = flat_in[tile] * scale[tile]
        return out

    kernel = _kernel(scaled_rows)
    x, out = torch.arange(8.0).reshape(2, 4), torch.zeros(2, 4)
    result = kernel(x, out)
    assert result is out
    torch.testing.assert_close(out, x * 6)
    assert GLOBAL_SCALE.tolist() == [3.0] * 8


def copy(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile]
    return out


def test_tracing_hands_device_code_the_arguments_themselves(monkeypatch):
    # the guards let a call pass the very tensors a variant was traced with without comparing
    # their shapes: the tracing runs give the arguments back, not their stand-ins
    seen = []
    original = BoundKernel._trace

    def spy(self, values):
        seen.append(values)
        return original(self, values)

    monkeypatch.setattr(BoundKernel, "_trace", spy)
    kernel = _kernel(copy)
    x, out = torch.ones(8), torch.zeros(8)
    bound = kernel.bind((x, out))
    bound.to_code(helion.Config(block_sizes=[4]))
    assert seen
    assert all(sorted(map(id, values)) == sorted([id(x), id(out)]) for values in seen)
    assert kernel(x, out) is out
    assert out.tolist() == [1.0] * 8


@pytest.mark.parametrize("inference", [False, True])
def test_in_place_host_op_on_inference_and_grad_free_arguments(inference):
    kernel = _kernel(double_then_add_one)
    with torch.inference_mode(inference):
        x = torch.ones(8)
        out = kernel(x)
    assert x.tolist() == [2.0] * 8
    assert out.tolist() == [3.0] * 8


def random_noise(x: torch.Tensor) -> torch.Tensor:
    noise = torch.rand_like(x)  # drawn in host code: from the caller's generator, per call
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + noise[tile]
    return out


def test_tracing_runs_draw_no_random_numbers():
    kernel = _kernel(random_noise)
    x = torch.zeros(8)
    torch.manual_seed(0)
    expected = torch.rand(8)
    torch.manual_seed(0)
    kernel.bind((x,)).to_code(helion.Config(block_sizes=[4]))
    torch.testing.assert_close(kernel(x), expected)


@pytest.mark.parametrize(
    ("fn", "args", "level"),
    [
        # only reads its arguments: run on them, under a guard that stops before any write
        (copy, lambda: (torch.ones(8), torch.zeros(8)), "ARGUMENTS"),
        (double_then_add_one, lambda: (torch.ones(8),), "FAKE"),  # writes `x`
        (random_noise, lambda: (torch.zeros(8),), "FAKE"),  # draws random numbers
        (first_rows, lambda: (torch.zeros(8, 4), torch.tensor([0, 3, 5])), "COPIES"),  # reads data
    ],
)
def test_the_level_a_tracing_run_takes(fn, args, level):
    from helion.runtime import stand_ins

    bound = _kernel(fn).bind(args())
    assert bound._host_trace_level == getattr(stand_ins, level)


def test_tracing_on_copies_hands_device_code_the_arguments(monkeypatch):
    seen = []
    original = BoundKernel._trace

    def spy(self, values):
        seen.append(values)
        return original(self, values)

    monkeypatch.setattr(BoundKernel, "_trace", spy)
    base = torch.zeros(10, 4)
    x = base[2:]  # a view at a storage offset
    offsets = torch.tensor([0, 3, 5])
    bound = _kernel(first_rows).bind((x, offsets))
    assert bound._host_trace_level == stand_ins.COPIES
    assert any(value is x for values in seen for value in values)
    assert base.sum().item() == 0.0


@pytest.mark.parametrize("level", ["FAKE", "COPIES"])
def test_stand_ins_keep_aliasing_and_give_back_views(level):
    from torch._subclasses.fake_tensor import FakeTensorMode

    base = torch.arange(12.0)
    args = (base, base[4:].view(2, 4), [base[:4]])
    mode = FakeTensorMode(allow_non_fake_inputs=True) if level == "FAKE" else None
    made = stand_ins.StandIns(args, getattr(stand_ins, level), mode)
    whole, rows, (head,) = made.args
    assert whole is not base and rows is not args[1] and made.args[2] is not args[2]
    with mode if mode is not None else contextlib.nullcontext():
        whole.mul_(2)  # the stand-ins share one storage, as the arguments do
        if level == "COPIES":
            assert rows[0, 0].item() == 8.0 and head[1].item() == 2.0
        view = whole[2:6]
    assert base[4].item() == 4.0  # the argument is untouched
    assert made.real(whole) is base
    assert made.real(rows) is args[1]
    assert made.real([head])[0] is args[2][0]
    again = made.real(view)  # a view the host code made: the same view of the argument
    assert type(again) is torch.Tensor  # a real tensor, not a fake one
    assert again.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert again.storage_offset() == 2 and again.shape == (4,)


def writes_then_fails(x: torch.Tensor) -> torch.Tensor:
    x.add_(1)
    wrong = x + torch.ones(3)  # shapes that do not broadcast: torch's own error
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + wrong[tile]
    return out


def test_an_error_of_host_code_after_a_write_is_torchs_and_leaves_the_argument():
    x = torch.zeros(8)
    with pytest.raises(RuntimeError, match="must match the size"):
        _kernel(writes_then_fails).bind((x,))
    assert x.tolist() == [0.0] * 8


CALLS_SEEN = torch.zeros(1)


def count_calls_in_a_global(x: torch.Tensor) -> torch.Tensor:
    CALLS_SEEN.add_(1)  # host code writing a module-level tensor
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


def count_calls_writing_an_argument(x: torch.Tensor) -> torch.Tensor:
    CALLS_SEEN.add_(1)
    x.mul_(1)  # writes an argument: traced on fake tensors
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


def count_calls_reading_data(x: torch.Tensor) -> torch.Tensor:
    CALLS_SEEN.add_(1)
    x.mul_(1)  # writes an argument and ...
    if float(x.sum()) > -1e30:  # ... reads its data: traced on copies
        out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


@pytest.mark.parametrize(
    ("fn", "level"),
    [
        (count_calls_in_a_global, stand_ins.ARGUMENTS),
        (count_calls_writing_an_argument, stand_ins.FAKE),
        (count_calls_reading_data, stand_ins.COPIES),
    ],
)
def test_a_global_tensor_written_by_host_code_changes_once_per_call(fn, level) -> None:
    """Tracing runs put back the data of tensors host code writes that are not arguments (a
    module's globals): before, binding applied `CALLS_SEEN.add_(1)` once more."""
    CALLS_SEEN.zero_()
    kernel = helion.kernel(fn, backend="ref", config=helion.Config(block_sizes=[8]))
    x = torch.randn(37)
    torch.testing.assert_close(kernel(x), x + 1)
    assert CALLS_SEEN.item() == 1
    bound = kernel.bind((x,))
    assert bound._host_trace_level == level
    bound.to_code(helion.Config(block_sizes=[16]))
    bound.compile_config(helion.Config(block_sizes=[4]))
    assert CALLS_SEEN.item() == 1
    kernel(x)
    assert CALLS_SEEN.item() == 2


def halve_by_data(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    q = a // b  # host code computing on the arguments' data
    out = torch.empty_like(q)
    for tile in hl.tile(q.size(0)):
        out[tile] = q[tile] + 1
    return out


def test_compile_config_after_the_bound_arguments_were_freed() -> None:
    """The bound kernel holds its first arguments weakly; zeros stand in for freed ones, on which
    host code reading data fails (ZeroDivisionError). Binding again with live arguments makes
    compile_config trace from them; without them the error says what happened."""
    kernel = helion.kernel(halve_by_data, backend="ref", autotune_effort="none")
    a, b = torch.arange(1, 12), torch.full((11,), 2)
    bound = kernel.bind((a.clone(), b.clone()))  # these clones are freed at once
    first, second = helion.Config(block_sizes=[4]), helion.Config(block_sizes=[8])
    with pytest.raises(helion.exc.InvalidAPIUsage, match="were freed since"):
        bound.compile_config(first)
    assert kernel.bind((a, b)) is bound
    torch.testing.assert_close(bound.compile_config(second)(a, b), a // b + 1)


def add_one_through_numpy(x: torch.Tensor) -> torch.Tensor:
    x.numpy()[:] += 1  # a write the dispatch-level guard cannot see
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2
    return out


def test_a_write_through_a_numpy_view_is_applied_once_per_call() -> None:
    """Host code writing an argument through `x.numpy()` was traced on the argument itself
    (the guard sees torch ops only), so the first call applied the write twice."""
    kernel = helion.kernel(add_one_through_numpy, backend="ref", autotune_effort="none")
    x = torch.zeros(11)
    torch.testing.assert_close(kernel(x), torch.full((11,), 2.0))
    torch.testing.assert_close(x, torch.ones(11))
    assert kernel.bind((x,))._host_trace_level == stand_ins.COPIES
