"""hl.triton_kernel without Triton: what the tracer checks, and the refusal of every backend but
Triton (and of eager mode). Runs with helion-core alone: the calls use the source-string and
plain-function forms, which need no `import triton` (the Triton package's tests run them)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import backends
from helion import exc
from helion.testing import require_backend

SOURCE = """
@triton.jit
def scale_add(x, y, s):
    return x * s + y
"""


def scale_add_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        a = x[tile]
        out[tile] = hl.triton_kernel(SOURCE, [a, y[tile], 2.0], a)
    return out


KERNEL_LINE = scale_add_kernel.__code__.co_firstlineno + 4


@pytest.mark.parametrize("name", [b.name for b in backends.list_backends() if b.name != "triton"])
def test_other_backends_refuse_it_with_the_line(name):
    require_backend(name)  # installed, but maybe not usable here (CuTe without its DSL)
    kernel = helion.kernel(scale_add_kernel, backend=name, autotune_effort="none")
    with pytest.raises(exc.BackendUnsupported) as info:
        kernel(torch.randn(20), torch.randn(20))
    message = str(info.value)
    assert f"triton_kernel is not supported by the {name!r} backend" in message, message
    assert f'test_triton_kernel_checks.py", line {KERNEL_LINE}' in message, message


def test_eager_mode_refuses_it():
    kernel = helion.kernel(scale_add_kernel, ref_mode=helion.RefMode.EAGER)
    with pytest.raises(exc.BackendUnsupported) as info:
        kernel(torch.randn(20), torch.randn(20))
    message = str(info.value)
    assert "hl.triton_kernel is not supported by the 'eager' backend" in message, message
    assert "run the kernel on the Triton backend" in message, message
    assert f'test_triton_kernel_checks.py", line {KERNEL_LINE}' in message, message


def test_outside_a_kernel():
    with pytest.raises(exc.NotInsideKernel):
        hl.triton_kernel(SOURCE, [1.0, 2.0, 3.0], None)


def _negate(x):
    return -x


def _calls_a_plain_function(x):
    return _negate(x)


def _two(x):
    return x, x


def _nothing(pointer):
    pass


LIMIT = 4


def _reads_a_plain_int(x):
    return x * LIMIT


def bad_call(x: torch.Tensor, call) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = call(v, x)
    return out


BAD_CALLS = [
    (lambda v, x: hl.triton_kernel(None, [v], v), "triton_source_or_fn must be"),
    (lambda v, x: hl.triton_kernel(lambda a: a, [v], v), "is a lambda"),
    (lambda v, x: hl.triton_kernel("def f(:", [v], v), "not valid Python/Triton syntax"),
    (lambda v, x: hl.triton_kernel("y = 1", [v], v), "found 0 def(s) and 1 other"),
    (lambda v, x: hl.triton_kernel("async def f(a):\n    return a", [v], v), "found 0 def(s)"),
    (lambda v, x: hl.triton_kernel("_missing", [v], v), "no function named '_missing'"),
    (lambda v, x: hl.triton_kernel("LIMIT", [v], v), "the global 'LIMIT' is a int"),
    (lambda v, x: hl.triton_kernel(_negate, [], v), "takes 1 argument(s) (x), but args has 0"),
    (lambda v, x: hl.triton_kernel(SOURCE, [v], v), "takes 3 argument(s) (x, y, s)"),
    (
        lambda v, x: hl.triton_kernel("def f(a, b=1):\n    return a", [v, v, v], v),
        "takes 1 to 2 argument(s) (a, b), but args has 3",
    ),
    (
        lambda v, x: hl.triton_kernel("def f(a, *, b):\n    return a", [v], v),
        "keyword-only parameters without defaults (b)",
    ),
    (lambda v, x: hl.triton_kernel(_negate, {"x": v}, v), "args must be a list or tuple"),
    (lambda v, x: hl.triton_kernel(_negate, [v], torch.float32), "output_like must be a device"),
    (lambda v, x: hl.triton_kernel(_negate, [v], ()), "output_like must not be empty"),
    (lambda v, x: hl.triton_kernel(_two, [v], v), "returns 2 value(s)"),
    (lambda v, x: hl.triton_kernel(_nothing, [x], v), "returns nothing"),
    (lambda v, x: hl.triton_kernel(_negate, [object()], v), "args[0] is a object"),
    (lambda v, x: hl.triton_kernel(_calls_a_plain_function, [v], v), "'_negate', which is not"),
    (lambda v, x: hl.triton_kernel(_reads_a_plain_int, [v], v), "tl.constexpr(4)"),
]


@pytest.mark.parametrize("call, text", BAD_CALLS)
def test_bad_calls_are_clear_errors_with_the_line(call, text):
    kernel = helion.kernel(bad_call, backend="ref", autotune_effort="none")
    with pytest.raises(exc.InvalidAPIUsage) as info:
        kernel(torch.randn(20), call)
    message = str(info.value)
    assert "hl.triton_kernel:" in message and text in message, message
    line = bad_call.__code__.co_firstlineno + 4
    assert f'test_triton_kernel_checks.py", line {line}' in message, message


def side_effect_only(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for _tile in hl.tile(x.size(0)):
        hl.triton_kernel(_nothing, [out], None)
    return out


def test_a_call_without_results_is_kept_and_reaches_the_backend():
    """output_like=None: nothing to return, and the call is not dropped as dead code."""
    kernel = helion.kernel(side_effect_only, backend="ref", autotune_effort="none")
    with pytest.raises(exc.BackendUnsupported, match="triton_kernel"):
        kernel(torch.randn(20), torch.zeros(20))
