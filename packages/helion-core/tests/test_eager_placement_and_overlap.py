"""Eager mode (`ref_mode=helion.RefMode.EAGER`, `HELION_INTERPRET=1`) refuses what compiled
kernels refuse, with the same error, and agrees with them (and with PyTorch) where they run:

- placement arguments of creation ops in device code, the random ones included (`torch.rand`,
  `torch.randn`, `torch.rand_like`, `torch.randn_like`): `device=` another device than the
  kernel's, `layout=` other than strided, `pin_memory=True`, `requires_grad=True` are an
  `UnsupportedTorchOp` naming the argument, the op and the kernel's line
  (`helion.frontend.torch_ops.creation.check_creation`);
- writes (stores, atomics) into a tensor whose elements overlap in memory (an `expand()`ed or
  overlapping `as_strided` view) are a `WriteToOverlappingTensor` at the line of the write
  (`helion.passes.write_overlap`);
- device moves `x.to(device)`, `x.to(device, dtype)`, `x.to(device=...)`, `x.cpu()`,
  `x.cuda()`: the kernel's device is accepted, any other one is refused as a creation op's
  `device=` is (compiled kernels ignored the device before, eager mode moved the value).
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.passes import write_overlap

THIS_FILE = __file__
MODES = ["ref", "eager"]
SHAPE = (13, 37)


def _kernel(fn: Callable, mode: str) -> helion.Kernel:
    if mode == "eager":
        return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)
    return helion.kernel(fn, backend="ref", autotune_effort="none")


def _error(fn: Callable, mode: str, *args: torch.Tensor) -> exc.BaseError:
    with pytest.raises(exc.BaseError) as info:
        _kernel(fn, mode)(*args)
    return info.value


def _message(error: BaseException) -> str:
    """The error's own text, without the location block that precedes it."""
    lines = str(error).splitlines()
    start = next(
        i
        for i, line in enumerate(lines)
        if line.startswith(("The torch op", "A store", "hl.atomic"))
    )
    return "\n".join(lines[start:])


# -- 1. placement arguments of creation ops, the random ones included ----------------------------


def rand_other_device(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + torch.rand([tm, tn], device="meta")
    return out


def randn_requires_grad(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + torch.randn([tm, tn], requires_grad=True)
    return out


def rand_pinned(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + torch.rand([tm, tn], pin_memory=True)
    return out


def randn_sparse(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + torch.randn([tm, tn], layout=torch.sparse_coo)
    return out


def rand_like_other_device(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = torch.rand_like(x[tm, tn], device="meta")
    return out


def rand_like_sparse(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = torch.rand_like(x[tm, tn], layout=torch.sparse_coo)
    return out


def randn_like_requires_grad(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = torch.randn_like(x[tm, tn], requires_grad=True)
    return out


def randn_like_other_device(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = torch.randn_like(x[tm, tn], device=torch.device("meta"))
    return out


def zeros_other_device(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + torch.zeros([tm, tn], device="meta")
    return out


def ones_like_requires_grad(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = torch.ones_like(x[tm, tn], requires_grad=True)
    return out


def new_full_pinned(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x.new_full([tm, tn], 2.0, pin_memory=True)
    return out


PLACEMENT_REFUSED = [
    (rand_other_device, "torch.rand", "device", 'torch.rand([tm, tn], device="meta")'),
    (randn_requires_grad, "torch.randn", "requires_grad", "torch.randn([tm, tn], requires_grad"),
    (rand_pinned, "torch.rand", "pin_memory", "torch.rand([tm, tn], pin_memory=True)"),
    (randn_sparse, "torch.randn", "layout", "torch.randn([tm, tn], layout=torch.sparse_coo)"),
    (rand_like_other_device, "torch.rand_like", "device", 'torch.rand_like(x[tm, tn], device="'),
    (rand_like_sparse, "torch.rand_like", "layout", "torch.rand_like(x[tm, tn], layout="),
    (randn_like_requires_grad, "torch.randn_like", "requires_grad", "torch.randn_like(x[tm, tn]"),
    (randn_like_other_device, "torch.randn_like", "device", "torch.randn_like(x[tm, tn], device"),
    (zeros_other_device, "torch.zeros", "device", 'torch.zeros([tm, tn], device="meta")'),
    (ones_like_requires_grad, "torch.ones_like", "requires_grad", "torch.ones_like(x[tm, tn]"),
    (new_full_pinned, "torch.Tensor.new_full", "pin_memory", "x.new_full([tm, tn], 2.0"),
]


@pytest.mark.parametrize(
    "fn, op, argument, line",
    PLACEMENT_REFUSED,
    ids=[case[0].__name__ for case in PLACEMENT_REFUSED],
)
def test_placement_refused_in_eager_mode_as_compiled(fn, op, argument, line):
    x = torch.randn(SHAPE)
    errors = {mode: _error(fn, mode, x) for mode in MODES}
    for mode, error in errors.items():
        assert type(error) is exc.UnsupportedTorchOp, (mode, error)
        message = str(error)
        assert f"The torch op {op} with the argument `{argument}`" in message, (mode, message)
        assert THIS_FILE in message and line in message, (mode, message)
        assert error.loc is not None and error.loc.lineno == errors["ref"].loc.lineno, mode
        if argument == "device":  # the device asked for, and the kernel's
            assert "meta" in message and "cpu" in message, (mode, message)
    assert _message(errors["eager"]) == _message(errors["ref"])


def rand_placed(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = torch.rand(
            [tm, tn], device=x.device, layout=torch.strided, pin_memory=False, requires_grad=False
        )
    return out


def randn_like_placed(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = torch.randn_like(
            x[tm, tn], device="cpu", layout=torch.strided, requires_grad=False
        )
    return out


def zeros_placed(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        ones = torch.ones([tm, tn], device=str(x.device), layout=torch.strided, pin_memory=False)
        out[tm, tn] = x[tm, tn] * ones + x.new_zeros([tm, tn], device=x.device, requires_grad=False)
    return out


@pytest.mark.parametrize("fn", [rand_placed, randn_like_placed], ids=lambda fn: fn.__name__)
def test_random_ops_with_the_kernels_placement_run_in_eager_mode_as_compiled(fn):
    x = torch.randn(SHAPE)
    results = {}
    for mode in MODES:
        torch.manual_seed(5)
        results[mode] = _kernel(fn, mode)(x)
    assert results["eager"].device == x.device and results["eager"].shape == x.shape
    torch.testing.assert_close(results["eager"], results["ref"])
    if fn is rand_placed:
        assert results["eager"].min() >= 0 and results["eager"].max() < 1


def test_creation_ops_with_the_kernels_placement_run_in_eager_mode_as_compiled():
    x = torch.randn(SHAPE)
    for mode in MODES:
        torch.testing.assert_close(_kernel(zeros_placed, mode)(x), x)


# -- 2. writes into tensors whose elements overlap in memory -------------------------------------


def copy_doubled(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] * 2
    return out


def hl_store_doubled(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tm, tn in hl.tile(x.size()):
        hl.store(out, [tm, tn], x[tm, tn] * 2)
    return out


def atomic_add_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tm, tn in hl.tile(x.size()):
        hl.atomic_add(out, [tm, tn], x[tm, tn])
    return out


def atomic_max_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tm, tn in hl.tile(x.size()):
        hl.atomic_max(out, [tm, tn], x[tm, tn])
    return out


def reads_expanded(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=x.dtype)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + 1
    return out


WRITES = [
    (copy_doubled, "A store", "out[tm, tn] = x[tm, tn] * 2"),
    (hl_store_doubled, "A store", "hl.store(out, [tm, tn], x[tm, tn] * 2)"),
    (atomic_add_into, "hl.atomic_add", "hl.atomic_add(out, [tm, tn], x[tm, tn])"),
    (atomic_max_into, "hl.atomic_max", "hl.atomic_max(out, [tm, tn], x[tm, tn])"),
]


def _expanded() -> torch.Tensor:
    return torch.zeros(1, SHAPE[1]).expand(SHAPE)


def _as_strided_overlapping() -> torch.Tensor:
    # offsets 2i + 3j: (3, 0) and (0, 2) are one location
    return torch.zeros(64).as_strided((5, 7), (2, 3))


@pytest.mark.parametrize("fn, what, line", WRITES, ids=[case[0].__name__ for case in WRITES])
@pytest.mark.parametrize(
    "make_out", [_expanded, _as_strided_overlapping], ids=["expanded", "as_strided"]
)
def test_write_into_overlapping_tensor_refused_in_eager_mode_as_compiled(fn, what, line, make_out):
    out = make_out()
    x = torch.randn(out.shape)
    errors = {mode: _error(fn, mode, x, out) for mode in MODES}
    for mode, error in errors.items():
        assert type(error) is exc.WriteToOverlappingTensor, (mode, error)
        message = str(error)
        assert f"{what} into 'out'" in message, (mode, message)
        assert f"strides {list(out.stride())}" in message, (mode, message)
        assert THIS_FILE in message and line in message, (mode, message)
    assert _message(errors["eager"]) == _message(errors["ref"])
    assert not out.any()  # nothing was written


def test_eager_mode_may_overlap_as_compiled(monkeypatch):
    # a layout too large to check exactly is refused, in eager mode as compiled
    monkeypatch.setattr(write_overlap, "_EXACT_CHECK_LIMIT", 4)
    out = torch.zeros(40).as_strided((3, 5), (2, 3))  # distinct, not cleared by the quick test
    x = torch.randn(3, 5)
    errors = {mode: _error(copy_doubled, mode, x, out) for mode in MODES}
    for error in errors.values():
        assert type(error) is exc.WriteToOverlappingTensor and "may overlap" in str(error)
    assert _message(errors["eager"]) == _message(errors["ref"])


def test_eager_mode_writes_distinct_strided_layouts_and_reads_expanded_ones():
    x = torch.randn(3, 5)
    for mode in MODES:
        # interleaved, yet distinct (offsets 2i + 3j): written as compiled, as torch writes it
        out = torch.zeros(40).as_strided((3, 5), (2, 3))
        expected = torch.zeros(40).as_strided((3, 5), (2, 3))
        expected.copy_(x * 2)
        _kernel(copy_doubled, mode)(x, out)
        torch.testing.assert_close(out, expected)
        # a transposed, sliced argument
        base = torch.zeros(7, 11)
        view = base[1:6, 2:5].t()
        _kernel(copy_doubled, mode)(x, view)
        torch.testing.assert_close(view, x * 2)
        assert base.count_nonzero() == x.count_nonzero()  # nothing written outside the view
    expanded = torch.randn(1, SHAPE[1]).expand(SHAPE)
    for mode in MODES:
        torch.testing.assert_close(_kernel(reads_expanded, mode)(expanded), expanded + 1)


# -- 3. device moves in device code: x.to(device), x.cpu(), x.cuda() -----------------------------


def to_own_device(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float64)
    for tm, tn in hl.tile(x.size()):
        v = x[tm, tn].to(x.device) * 2 + x[tm, tn].to("cpu")
        w = v.to(device=x.device, dtype=torch.float16).to(torch.device("cpu"), torch.float64)
        out[tm, tn] = w + x[tm, tn].cpu().to(x.device, torch.float64, non_blocking=True)
    return out


def test_moves_to_the_kernels_device_run_as_in_torch():
    x = torch.randn(SHAPE)
    expected = (x * 2 + x).to(torch.float16).to(torch.float64) + x.to(torch.float64)
    for mode in MODES:
        actual = _kernel(to_own_device, mode)(x)
        assert actual.dtype == torch.float64, mode
        torch.testing.assert_close(actual, expected)


def to_meta(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn].to("meta") + 1
    return out


def to_meta_keyword(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn].to(device=torch.device("meta")) + 1
    return out


def to_meta_and_dtype(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn].to("meta", torch.float64) + 1
    return out


def to_device_and_dtype_keywords(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn].to(dtype=torch.float16, device="meta", copy=True) + 1
    return out


def to_cuda(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn].cuda() + 1
    return out


def to_cuda_string(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn].to("cuda") * 2
    return out


MOVES_REFUSED = [
    (to_meta, "torch.Tensor.to", 'x[tm, tn].to("meta")', "meta"),
    (to_meta_keyword, "torch.Tensor.to", 'x[tm, tn].to(device=torch.device("meta"))', "meta"),
    (to_meta_and_dtype, "torch.Tensor.to", 'x[tm, tn].to("meta", torch.float64)', "meta"),
    (to_device_and_dtype_keywords, "torch.Tensor.to", 'device="meta", copy=True)', "meta"),
    (to_cuda, "torch.Tensor.cuda", "x[tm, tn].cuda()", "cuda"),
    (to_cuda_string, "torch.Tensor.to", 'x[tm, tn].to("cuda")', "cuda"),
]


@pytest.mark.parametrize(
    "fn, op, line, device", MOVES_REFUSED, ids=[case[0].__name__ for case in MOVES_REFUSED]
)
def test_moves_to_another_device_refused_as_a_creation_ops_device(fn, op, line, device):
    x = torch.randn(SHAPE)  # a kernel on the CPU
    errors = {mode: _error(fn, mode, x) for mode in MODES}
    for mode, error in errors.items():
        assert type(error) is exc.UnsupportedTorchOp, (mode, error)
        message = str(error)
        assert f"The torch op {op} with the argument `device`" in message, (mode, message)
        assert THIS_FILE in message and line in message, (mode, message)
        assert device in message and "kernel's device (cpu)" in message, (mode, message)
    assert _message(errors["eager"]) == _message(errors["ref"])
    # the creation op's error class, with the same hint
    creation = _error(zeros_other_device, "ref", x)
    assert type(creation) is type(errors["ref"])
    same = "device code makes values on the kernel's device (cpu), not on "
    assert creation.hint.startswith(same) and errors["ref"].hint.startswith(same)
