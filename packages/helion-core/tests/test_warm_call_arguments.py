"""A warm kernel (its generated warm call built from tensor arguments) given an argument of
another kind (a float, None, a list) turns it away: the general path then gives the error a cold
call gives. The warm call's tests read tensor attributes before any type test, so they must not
let an AttributeError or TypeError out; while an error of the kernel's run itself must reach the
caller once, never be taken for a miss (which would run the kernel a second time)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion.runtime.kernel import _MISS


def _add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def _kernel() -> helion.Kernel:
    return helion.kernel(_add, backend="ref", config=helion.Config(block_sizes=[8, 16]))


@pytest.fixture(autouse=True, params=["native", "python"])
def tensor_match(request, monkeypatch):
    # the warm call compares tensors with torch's C++ match, or with Python tests without it
    if request.param == "python":
        from helion.runtime import kernel

        monkeypatch.setattr(kernel, "exact_tensor_match", lambda examples: None)
    return request.param


def _error(kernel: helion.Kernel, *args) -> tuple[type, str]:
    with pytest.raises(Exception) as info:  # any error: compared with a cold call's
        kernel(*args)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("offset", [0, 7])  # a plain tensor and a view with a storage offset
def test_a_warm_call_given_a_non_tensor_fails_like_a_cold_call(offset):
    x = torch.randn(8, 16)
    v = torch.randn(200)[offset : offset + 128].view(8, 16)
    warm = _kernel()
    for _ in range(2):  # bound, then found by key: the warm call is built
        torch.testing.assert_close(warm(v, x), v + x)
    assert warm._warm is not None
    for bad in (2.0, None, [1.0], "text"):
        assert warm._warm((x, bad), warm.settings) is _MISS
        assert _error(warm, x, bad) == _error(_kernel(), x, bad), bad
        assert _error(warm, bad, x) == _error(_kernel(), bad, x), bad
    # the tensor path still takes the warm call afterwards
    bound = warm.bind((v, x))
    runs = []
    keyed = bound._active_keyed
    bound._active_keyed = lambda args: runs.append(1) or keyed(args)
    torch.testing.assert_close(warm(v, x), v + x)
    assert runs == [1]


def test_an_error_of_the_run_itself_reaches_the_caller_once():
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    kernel = _kernel()
    kernel(x, y)
    kernel(x, y)
    bound = kernel.bind((x, y))
    runs = []
    for error in (AttributeError, TypeError):  # the kinds the warm call's tests may raise
        runs.clear()

        def failing_run(args, error=error):
            runs.append(1)
            raise error("raised by the kernel's run")

        bound._active_keyed = failing_run
        with pytest.raises(error, match="raised by the kernel's run"):
            kernel(x, y)
        assert runs == [1]
