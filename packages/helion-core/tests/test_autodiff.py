"""helion.experimental.backward on the ref backend: gradients against torch.autograd, the
generated source, and the errors for what it cannot differentiate."""

from __future__ import annotations

import ast

import pytest
import torch

import helion
import helion.experimental
import helion.language as hl
from helion.experimental import backward
from helion.testing.autodiff import CASES
from helion.testing.autodiff import check_autodiff_case


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_backward_matches_autograd(case):
    check_autodiff_case(case, "ref")


def test_return_code_is_a_helion_kernel():
    code = check_autodiff_case(CASES[0], "ref")
    tree = ast.parse(code)
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert [f.name for f in functions] == ["add_mul_backward"]
    assert "@helion.kernel(backend='ref', autotune_effort='none')" in code
    assert "hl.tile(" in code


def test_grads_without_code_and_unused_input():
    @helion.kernel(backend="ref", autotune_effort="none")
    def scale_first(x: torch.Tensor, unused: torch.Tensor, factor: float) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] * factor
        return out

    x, unused = torch.randn(13), torch.randn(4)
    scale_first(x, unused, 3.0)
    grad_out = torch.randn(13)
    grads = backward(scale_first, grad_out, x, unused, 3.0)
    assert isinstance(grads, tuple) and len(grads) == 2
    torch.testing.assert_close(grads[0], grad_out * 3.0)
    torch.testing.assert_close(grads[1], torch.zeros(4))


def test_amax_ties_split_like_torch():
    @helion.kernel(backend="ref", autotune_effort="none")
    def row_max(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty([x.size(0)], dtype=x.dtype)
        for tile in hl.tile(x.size(0)):
            out[tile] = torch.amax(x[tile, :], dim=1)
        return out

    x = torch.tensor(
        [[1.0, 3.0, 3.0, 0.0, 2.0], [5.0, 5.0, 5.0, -1.0, 5.0], [0.0, 1.0, 2.0, 3.0, 4.0]]
    )
    row_max(x)
    grad_out = torch.randn(3)
    (grad,) = backward(row_max, grad_out, x)
    leaf = x.clone().requires_grad_()
    leaf.amax(1).backward(grad_out)
    torch.testing.assert_close(grad, leaf.grad)


def test_kernel_never_called():
    @helion.kernel(backend="ref", autotune_effort="none")
    def never(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = x[tile] * 2.0
        return out

    x = torch.randn(9)
    with pytest.raises(helion.exc.AutodiffKernelNotCalled):
        backward(never, torch.randn(9), x)


def _assert_unsupported(kernel, *args, op: str):
    kernel(*args)
    with pytest.raises(helion.exc.AutodiffNotSupported) as info:
        backward(kernel, torch.ones_like(kernel(*args)), *args)
    message = str(info.value)
    assert op in message
    assert "line" in message
    return message


def test_matmul_not_supported():
    @helion.kernel(backend="ref", autotune_effort="none")
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.empty([x.size(0), w.size(1)], dtype=x.dtype)
        for tile in hl.tile(x.size(0)):
            out[tile, :] = torch.matmul(x[tile, :], w[:, :])
        return out

    _assert_unsupported(project, torch.randn(20, 16), torch.randn(16, 16), op="dot")


def test_atomic_not_supported():
    @helion.kernel(backend="ref", autotune_effort="none")
    def accumulate(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        for tile in hl.tile(x.size(0)):
            hl.atomic_add(out, [tile], x[tile])
        return out

    _assert_unsupported(accumulate, torch.randn(7), torch.zeros(7), op="atomic")


def test_two_loops_not_supported():
    @helion.kernel(backend="ref", autotune_effort="none")
    def two_loops(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        scratch = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] + 1.0
        for tile in hl.tile(x.size(0)):
            scratch[tile] = x[tile] * 2.0
        return out

    _assert_unsupported(two_loops, torch.randn(7), op="top-level tile loop")


def test_unsupported_op_names_its_line():
    @helion.kernel(backend="ref", autotune_effort="none")
    def running(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile, :] = torch.cumsum(x[tile, :], dim=1)
        return out

    message = _assert_unsupported(running, torch.randn(5, 6), op="cumsum")
    assert "torch.cumsum(x[tile, :], dim=1)" in message


def test_import_experimental():
    assert helion.experimental.backward is backward


# -- regressions ------------------------------------------------------------------------------


@helion.kernel(backend="ref", autotune_effort="none", static_shapes=False)
def _row_scale_dynamic(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :] * w[None, :]
    return out


def test_dynamic_shapes_second_size():
    """static_shapes=False shares one bound kernel (traced at the first size) between sizes:
    backward for another size traced that size's own IR instead of refusing the tensors as
    'a view made by host code'."""
    for rows, cols in ((7, 5), (9, 6)):
        x = torch.randn(rows, cols)
        w = torch.randn(cols)
        _row_scale_dynamic(x, w)
        grad_out = torch.randn(rows, cols)
        grad_x, grad_w = backward(_row_scale_dynamic, grad_out, x, w)
        torch.testing.assert_close(grad_x, grad_out * w)
        torch.testing.assert_close(grad_w, (grad_out * x).sum(0))


def test_host_code_after_the_loop_is_refused():
    """`return out * 3` was ignored: the gradient of the stored tensor was returned as if it
    were the output's (a third of the true gradient)."""

    @helion.kernel(backend="ref", autotune_effort="none")
    def tripled(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] * x[tile]
        return out * 3

    x = torch.randn(6)
    tripled(x)
    with pytest.raises(helion.exc.AutodiffNotSupported, match=r"return out \* 3") as info:
        backward(tripled, torch.ones(6), x)
    assert "in tripled" in str(info.value)


def test_grad_out_of_the_wrong_shape():
    @helion.kernel(backend="ref", autotune_effort="none")
    def doubled(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] * 2
        return out

    x = torch.randn(7)
    doubled(x)
    with pytest.raises(helion.exc.ShapeMismatch, match=r"grad_out has shape \[3\]"):
        backward(doubled, torch.ones(3), x)
    with pytest.raises(TypeError, match=r"grad_out must be a torch\.Tensor"):
        backward(doubled, 1.0, x)
    (grad,) = backward(doubled, torch.ones(7), x)  # still usable
    torch.testing.assert_close(grad, torch.full((7,), 2.0))
