"""``hl.triton_kernel``: calling a ``@triton.jit`` function defined once at module scope.

The functions below live at module scope of this file, as users write them. Each kernel runs
through the Triton interpreter on CPU (and compiled where a GPU is present) against PyTorch on
fresh random shapes that are not powers of two; the generated module is read to check that every
function is defined once, before the kernel. Bad calls are errors at trace time that name the
kernel's line.
"""

from __future__ import annotations

import inspect
import math
import random
import re
import sys
import textwrap
import types

import pytest
import torch
import triton
import triton.language as tl
from triton.language import sigmoid as tl_sigmoid

import helion
import helion.language as hl
from helion import exc

# -- module-level Triton code the kernels call ------------------------------------------------------


@triton.jit
def _scale_add(x, y, s):
    return x * s + y


@triton.jit
def _square(x):
    return x * x


@triton.jit
def _square_plus(x, y):
    """Calls another @triton.jit function: it must be defined in the generated module too."""
    return _square(x) + y


@triton.jit
def _sum_and_difference(x, y):
    return x + y, x - y


@triton.jit
def _store_tripled(pointer, offsets, values, n):
    """No result: it stores through a pointer (a kernel tensor argument)."""
    tl.store(pointer + offsets, values * 3.0, mask=offsets < n)


@triton.jit
def _barrier_only():
    tl.debug_barrier()


OFFSET = tl.constexpr(1.5)
HALF = tl.constexpr(0.5)
HALF_PRECISION = tl.float16


@triton.jit
def _round_to_half(x):
    """Reads a dtype global: Triton's own object, named by its path in triton.language."""
    return x.to(HALF_PRECISION).to(tl.float32)


@triton.jit
def _shift_clamped(x, low: tl.constexpr):
    """Reads constexpr globals and a Triton builtin imported by module."""
    return tl.maximum(x * HALF + OFFSET, low)


@triton.jit
def _silu(x):
    """Uses a Triton library function imported by name: it is reached through its module."""
    return x * tl_sigmoid(x)


@triton.jit
def _times_pi(x):
    return x * math.pi


def _cube(x):
    """A plain Python function: hl.triton_kernel compiles it as if decorated with @triton.jit."""
    return x * x * x


@triton.jit
def load(x):
    """Named like the kernel's own variables (`load`): the kernel must still reach it."""
    return x + 1.0


NOT_CONSTEXPR = 3


@triton.jit
def _uses_plain_global(x):
    return x * NOT_CONSTEXPR


def _plain_helper(x):
    return x


@triton.jit
def _calls_plain_function(x):
    return _plain_helper(x)


def triton_kernel(fn, **settings) -> helion.Kernel:
    return helion.kernel(fn, backend="triton", autotune_effort="none", **settings)


def shape(low: int = 9, high: int = 70) -> list[int]:
    """A random extent that is not a power of two (from this test run's seed)."""
    while True:
        size = random.randint(low, high)
        if size & (size - 1):
            return size


def module_source(kernel: helion.Kernel, args: tuple) -> str:
    return kernel.bind(args).to_code()


# -- kernels ----------------------------------------------------------------------------------------


def scale_add(x: torch.Tensor, y: torch.Tensor, s: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        a = x[tile_m, tile_n]
        out[tile_m, tile_n] = hl.triton_kernel(_scale_add, [a, y[tile_m, tile_n], s], a)
    return out


@pytest.mark.parametrize("block_sizes", [[16, 8], [32, 64], [4, 128], [64, 1]])
def test_scale_add_matches_torch_under_configs(device, block_sizes):
    m, n = shape(), shape()
    x, y = torch.randn(m, n, device=device), torch.randn(m, n, device=device)
    s = random.uniform(-2.0, 2.0)
    bound = triton_kernel(scale_add).bind((x, y, s))
    compiled = bound.compile_config(helion.Config(block_sizes=block_sizes))
    torch.testing.assert_close(compiled(x, y, s), x * s + y)


def test_scale_add_random_configs_and_generated_module(device):
    m, n = shape(), shape()
    x, y = torch.randn(m, n, device=device), torch.randn(m, n, device=device)
    kernel = triton_kernel(scale_add)
    torch.testing.assert_close(kernel(x, y, 0.75), x * 0.75 + y)
    bound = kernel.bind((x, y, 0.75))
    for seed in range(3):
        config = bound.config_spec.random_config(random.Random(seed))
        torch.testing.assert_close(bound.compile_config(config)(x, y, -1.25), x * -1.25 + y)
    source = bound.to_code()
    # defined once at module scope, under @triton.jit, before the kernel; called in its body
    assert source.count("def _scale_add(x, y, s):") == 1, source
    assert "@triton.jit\ndef _scale_add(x, y, s):\n    return x * s + y\n" in source, source
    assert source.index("def _scale_add(") < source.index("def _helion_scale_add("), source
    assert re.search(r"\n    result = _scale_add\(load, load_1, s_value\)\n", source), source
    # the result is checked where it is bound: the messages name the call's line
    line = scale_add.__code__.co_firstlineno + 4
    check = "    tl.static_assert(result.dtype == tl.float32, f'hl.triton_kernel on the triton "
    assert check in source, source
    assert f"called at test_triton_kernel.py:{line}: _scale_add returned a result of " in source


def helper_twice(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        a, b = x[tile], y[tile]
        first = hl.triton_kernel(_square_plus, [a, b], a)
        out[tile] = hl.triton_kernel(_square_plus, (first, a), a) + hl.triton_kernel(
            _square, [b], b
        )
    return out


def test_jit_function_calling_a_jit_helper(device):
    n = shape(100, 400)
    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    kernel = triton_kernel(helper_twice)
    first = x * x + y
    torch.testing.assert_close(kernel(x, y), first * first + x + y * y)
    source = module_source(kernel, (x, y))
    assert source.count("def _square(x):") == 1 and source.count("def _square_plus(x, y):") == 1
    # the helper comes first: the order of the definitions is dependencies first
    assert source.index("def _square(") < source.index("def _square_plus(")


STRING_SOURCE = """
    @triton.jit
    def _twice_plus_square(x, y):
        # a comment survives
        return 2.0 * x + _square(y)
"""


def string_and_name_forms(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(x)
    cubes = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        a, b = x[tile_m, tile_n], y[tile_m, tile_n]
        via_source = hl.triton_kernel(STRING_SOURCE, [a, b], a)
        via_name = hl.triton_kernel("_scale_add", [a, b, -0.5], a)
        out[tile_m, tile_n] = via_source + via_name
        cubes[tile_m, tile_n] = hl.triton_kernel(_cube, [a], a)
    return out, cubes


def test_string_source_function_name_and_plain_function(device):
    m, n = shape(), shape()
    x, y = torch.randn(m, n, device=device), torch.randn(m, n, device=device)
    kernel = triton_kernel(string_and_name_forms)
    out, cubes = kernel(x, y)
    torch.testing.assert_close(out, 2.0 * x + y * y + (x * -0.5 + y))
    torch.testing.assert_close(cubes, x * x * x)
    source = module_source(kernel, (x, y))
    assert "    # a comment survives\n" in source and source.count("def _square(x):") == 1
    assert "@triton.jit\ndef _cube(x):\n" in source, source


def undecorated_source(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.triton_kernel("def negate(v):\n    return -v", [v], v)
    return out


def test_undecorated_string_source(device):
    x = torch.randn(shape(), device=device)
    torch.testing.assert_close(triton_kernel(undecorated_source)(x), -x)


def side_effects(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        hl.triton_kernel(_store_tripled, [out, tile, v, x.size(0)], None)
        hl.triton_kernel(_barrier_only, [], None)
    return out


def test_side_effect_only_calls(device):
    n = shape(50, 300)
    x = torch.randn(n, device=device)
    out = torch.zeros(n, device=device)
    kernel = triton_kernel(side_effects)
    kernel(x, out)
    torch.testing.assert_close(out, x * 3.0)
    source = module_source(kernel, (x, out))
    # a call with no result is a statement of its own (nothing to bind or check)
    assert re.search(r"\n    _store_tripled\(out, indices_0, load, \d+\)\n", source), source
    assert "\n    _barrier_only()\n" in source, source


def sum_and_difference(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    total = torch.empty_like(x)
    difference = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        a, b = x[tile_m, tile_n], y[tile_m, tile_n]
        s, d = hl.triton_kernel(_sum_and_difference, [a, b], (a, b))
        total[tile_m, tile_n] = s
        difference[tile_m, tile_n] = d
    return total, difference


def test_tuple_result(device):
    m, n = shape(), shape()
    x, y = torch.randn(m, n, device=device), torch.randn(m, n, device=device)
    kernel = triton_kernel(sum_and_difference)
    total, difference = kernel(x, y)
    torch.testing.assert_close(total, x + y)
    torch.testing.assert_close(difference, x - y)
    source = module_source(kernel, (x, y))
    assert "result_0, result_1 = _sum_and_difference(load, load_1)" in source, source
    assert "_sum_and_difference returned result 1 of dtype " in source, source
    assert "but output_like[1] has dtype fp32 (torch.float32)')" in source, source


def constexprs_and_shadowing(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.triton_kernel(_shift_clamped, [v, 0.25], v) + hl.triton_kernel(load, [v], v)
    return out


def test_constexpr_globals_and_a_function_named_like_a_kernel_variable(device):
    x = torch.randn(shape(), device=device)
    kernel = triton_kernel(constexprs_and_shadowing)
    expected = torch.clamp(x * 0.5 + 1.5, min=0.25) + (x + 1.0)
    torch.testing.assert_close(kernel(x), expected)
    source = module_source(kernel, (x,))
    assert "OFFSET = tl.constexpr(1.5)" in source and "HALF = tl.constexpr(0.5)" in source
    # the kernel's `load` variable hides the function `load`: it is called through an alias
    alias = re.search(r"\n(load_\d+) = load\n", source)
    assert alias is not None, source
    assert f"= {alias.group(1)}(load)" in source, source


def library_functions(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.triton_kernel(_silu, [v], v) + hl.triton_kernel(tl.sigmoid, [v], v)
        out[tile] += hl.triton_kernel(_round_to_half, [v], v)
    return out


def test_triton_library_functions_are_imported(device):
    x = torch.randn(shape(), device=device)
    kernel = triton_kernel(library_functions)
    expected = x * torch.sigmoid(x) + torch.sigmoid(x) + x.half().float()
    torch.testing.assert_close(kernel(x), expected)
    source = module_source(kernel, (x,))
    # reached through their module, as the interpreter expects: never copied or re-bound
    assert "    return x * triton.language.standard.sigmoid(x)\n" in source, source
    assert "= triton.language.standard.sigmoid(load)\n" in source, source
    assert "def sigmoid" not in source and "tl_sigmoid" not in source, source
    assert "    return x.to(triton.language.float16).to(tl.float32)\n" in source, source


def test_generated_module_compiles_for_hopper():
    """The module with its jit functions compiles for sm_90 (no GPU needed)."""
    from test_escape_hatches import compile_for_hopper

    x, y = torch.randn(23, 45), torch.randn(23, 45)
    asm = compile_for_hopper(triton_kernel(sum_and_difference), (x, y))
    assert asm["cubin"]
    asm = compile_for_hopper(triton_kernel(helper_twice), (x[0], y[0]))
    assert asm["cubin"]


# -- bad calls: errors at trace time, naming the kernel's line --------------------------------------


def bad_call(x: torch.Tensor, call) -> torch.Tensor:
    """`call(v, x)` makes the hl.triton_kernel call under test (a function argument)."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = call(v, x)
    return out


BAD_CALLS = [
    (lambda v, x: hl.triton_kernel(3, [v], v), "triton_source_or_fn must be a @triton.jit"),
    (lambda v, x: hl.triton_kernel(torch.sin, [v], v), "got builtin_function_or_method"),
    (lambda v, x: hl.triton_kernel("x + 1", [v], v), "must hold exactly one `def`"),
    (
        lambda v, x: hl.triton_kernel("def f(a):\n    return a\ndef g(a):\n    return a", [v], v),
        "must hold exactly one `def`",
    ),
    (lambda v, x: hl.triton_kernel("def f(a):\n  return a +", [v], v), "not valid Python"),
    (lambda v, x: hl.triton_kernel("_no_such_function", [v], v), "no function named"),
    (lambda v, x: hl.triton_kernel("NOT_CONSTEXPR", [v], v), "not a @triton.jit function"),
    (lambda v, x: hl.triton_kernel(_scale_add, [v, v], v), "takes 3 argument(s) (x, y, s)"),
    (lambda v, x: hl.triton_kernel(_square, [v, v], v), "takes 1 argument(s) (x), but args has 2"),
    (lambda v, x: hl.triton_kernel(_square, v, v), "args must be a list or tuple"),
    (lambda v, x: hl.triton_kernel(_square, [v], 3), "output_like must be a device tensor"),
    (lambda v, x: hl.triton_kernel(_square, [v], x), "output_like must be a device tensor"),
    (lambda v, x: hl.triton_kernel(_square, [v], [v, 1.0]), "output_like[1] must be a device"),
    (lambda v, x: hl.triton_kernel(_square, [v], (v, v)), "returns 1 value(s)"),
    (lambda v, x: hl.triton_kernel(_sum_and_difference, [v, v], v), "returns 2 value(s)"),
    (lambda v, x: hl.triton_kernel(_barrier_only, [], v), "returns nothing"),
    (lambda v, x: hl.triton_kernel(_square, [{"a": 1}], v), "args[0] is a dict"),
    (lambda v, x: hl.triton_kernel(_uses_plain_global, [v], v), "'NOT_CONSTEXPR' = 3"),
    (lambda v, x: hl.triton_kernel(_calls_plain_function, [v], v), "not a @triton.jit function"),
]


@pytest.mark.parametrize("call, text", BAD_CALLS)
def test_bad_calls_are_clear_errors_with_the_line(call, text):
    with pytest.raises(exc.InvalidAPIUsage) as info:
        triton_kernel(bad_call)(torch.randn(20), call)
    message = str(info.value)
    assert "hl.triton_kernel" in message and text in message, message
    assert "test_triton_kernel.py" in message, message


# -- results unlike output_like: a Helion error at the call's line ---------------------------------


@triton.jit
def _to_half(x):
    return x.to(tl.float16)


@triton.jit
def _transposed(x):
    return tl.trans(x)


@triton.jit
def _outer(x):
    return x[:, None] * x[None, :]


def half_result(x: torch.Tensor, declared: torch.dtype) -> torch.Tensor:
    """`_to_half`'s result declared as `declared`: right for float16, wrong for float32."""
    out = torch.empty_like(x, dtype=declared)
    for tile_m, tile_n in hl.tile(x.size()):
        v = x[tile_m, tile_n]
        out[tile_m, tile_n] = hl.triton_kernel(_to_half, [v], v.to(declared))
    return out


def transposed_result(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        v = x[tile_m, tile_n]
        out[tile_m, tile_n] = hl.triton_kernel(_transposed, [v], v)
    return out


def outer_result(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.triton_kernel(_outer, [v], v)
    return out


def tuple_result_of_another_dtype(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        s, d = hl.triton_kernel(_sum_and_difference, [v, v], (v, v.to(torch.float16)))
        out[tile] = s + d
    return out


def _call_line(kernel_fn) -> int:
    """The line of the kernel's hl.triton_kernel call."""
    lines, first = inspect.getsourcelines(kernel_fn)
    return first + next(i for i, line in enumerate(lines) if "hl.triton_kernel(" in line)


# (kernel, extra kernel args, config block sizes, what the message says came back and was declared)
UNLIKE_OUTPUT_LIKE = [
    (
        half_result,
        (torch.float32,),
        [16, 8],
        "returned a result of dtype fp16, but output_like has dtype fp32 (torch.float32)",
    ),
    (
        transposed_result,
        (),
        [16, 8],
        "returned a result of shape [8, 16], but output_like has shape [16, 8]",
    ),
    (outer_result, (), [32], "returned a 2-D result, but output_like is 1-D (shape [32])"),
    (
        tuple_result_of_another_dtype,
        (),
        [32],
        "returned result 1 of dtype fp32, but output_like[1] has dtype fp16 (torch.float16)",
    ),
]


@pytest.mark.parametrize("kernel_fn, extra, block_sizes, text", UNLIKE_OUTPUT_LIKE)
def test_a_result_unlike_output_like_is_an_error_at_the_call(kernel_fn, extra, block_sizes, text):
    """Under the Triton interpreter: an InvalidAPIUsage at the kernel's line, naming the op, the
    backend, the function, what output_like declares and what came back (not a bare Triton
    error about the generated module)."""
    x = torch.randn(shape(), shape()) if block_sizes[1:] else torch.randn(shape(50, 300))
    kernel = triton_kernel(kernel_fn, config=helion.Config(block_sizes=block_sizes))
    with pytest.raises(exc.InvalidAPIUsage) as info:
        kernel(x, *extra)
    message = str(info.value)
    assert f'test_triton_kernel.py", line {_call_line(kernel_fn)}' in message, message
    assert "hl.triton_kernel" in message and "'triton' backend" in message, message
    assert text in message, message
    assert "constexpr" not in message and "def _helion_" not in message, message


def test_a_result_like_output_like_runs():
    """The right declaration of the same call runs, and matches PyTorch."""
    x = torch.randn(shape(), shape())
    kernel = triton_kernel(half_result, config=helion.Config(block_sizes=[16, 8]))
    torch.testing.assert_close(kernel(x, torch.float16), x.half())


@pytest.mark.parametrize("kernel_fn, extra, block_sizes, text", UNLIKE_OUTPUT_LIKE)
def test_a_result_unlike_output_like_fails_to_compile_for_hopper_with_the_same_message(
    kernel_fn, extra, block_sizes, text
):
    """Compiled for a GPU (sm_90, no GPU needed), Triton's own static assertion reports the
    same message, with the call's file and line: that is all a user of the bare generated
    module sees."""
    from test_escape_hatches import compile_for_hopper

    x = torch.randn(40, 24) if block_sizes[1:] else torch.randn(40)
    config = helion.Config(block_sizes=block_sizes)
    with pytest.raises(triton.CompilationError) as info:
        compile_for_hopper(triton_kernel(kernel_fn), (x, *extra), config)
    message = str(info.value)
    assert f"test_triton_kernel.py:{_call_line(kernel_fn)}" in message, message
    assert "hl.triton_kernel on the triton backend" in message, message
    assert text in message, message
    assert "failed to evaluate" not in message, message


def test_a_check_failed_when_compiling_for_a_gpu_is_a_helion_error_too():
    """On a GPU the check fails when Triton compiles the kernel (its CompilationError, not the
    interpreter's error): the backend makes it the same Helion error at the call's line."""
    from test_escape_hatches import compile_for_hopper

    from helion_triton.inline_code import explain_output_checks

    x = torch.randn(40, 24)
    config = helion.Config(block_sizes=[16, 8])
    kernel = triton_kernel(half_result)
    with pytest.raises(triton.CompilationError) as compiled_error:
        compile_for_hopper(kernel, (x, torch.float32), config)

    def launcher(*values):
        raise compiled_error.value

    compiled = types.SimpleNamespace(launcher=launcher, module_launcher=launcher)
    explain_output_checks(compiled, kernel.bind((x, torch.float32)).ir)
    for launch in (compiled.launcher, compiled.module_launcher):
        with pytest.raises(exc.InvalidAPIUsage) as info:
            launch(x)
        message = str(info.value)
        assert f'test_triton_kernel.py", line {_call_line(half_result)}' in message, message
        assert "_to_half returned a result of dtype fp16, but output_like has dtype fp32" in message


# -- other backends and eager mode refuse it --------------------------------------------------------


def test_other_backends_and_eager_mode_report_the_op():
    from helion import backends

    x = torch.randn(16, 16)
    args = (x, x.clone(), 0.5)
    # the installed backends that can run here (CuTe needs its DSL to compile)
    usable = [b for b in backends.list_backends() if b.is_available()[0]]
    names = [b.name for b in usable if b.name != "triton"]
    assert "ref" in names
    line = scale_add.__code__.co_firstlineno + 4
    for name in names:
        kernel = helion.kernel(scale_add, backend=name, autotune_effort="none")
        with pytest.raises(exc.BackendUnsupported) as info:
            kernel(*args)
        message = str(info.value)
        assert "triton_kernel" in message and repr(name) in message, (name, message)
        assert f'test_triton_kernel.py", line {line}' in message, message
    with pytest.raises(exc.BackendUnsupported) as info:
        helion.kernel(scale_add, ref_mode=helion.RefMode.EAGER)(*args)
    message = str(info.value)
    assert "hl.triton_kernel" in message and "'eager'" in message, message
    assert "Triton backend" in message, message
    assert f'test_triton_kernel.py", line {line}' in message, message


def test_a_module_the_function_uses_is_there():
    """A module the function uses (here `math`) is imported by the generated module."""

    def uses_math(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            v = x[tile]
            out[tile] = hl.triton_kernel(_times_pi, [v], v)
        return out

    x = torch.randn(shape())
    kernel = triton_kernel(uses_math)
    torch.testing.assert_close(kernel(x), x * math.pi)


_INTERPRETED_LIBRARY_CALL = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
import triton
import triton.language as tl
from triton.language import sigmoid as imported_sigmoid

import helion
import helion.language as hl


@triton.jit
def _silu(x):
    return x * imported_sigmoid(x)


@helion.kernel(backend="triton", autotune_effort="none")
def library_calls(x):
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.triton_kernel(tl.sigmoid, [v], v) + hl.triton_kernel(_silu, [v], v)
    return out


x = torch.randn(37)
torch.testing.assert_close(library_calls(x), torch.sigmoid(x) + x * torch.sigmoid(x))
print("ok")
"""


def test_library_function_under_triton_interpret(tmp_path):
    """With TRITON_INTERPRET=1 set before triton is imported, `tl.sigmoid` is an
    InterpretedFunction whose __module__ is triton.runtime.interpreter: it was taken for a
    user's jit function and its source copied, which failed ('math' cannot be defined at module
    scope ...)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "interpreted_library_call.py"
    script.write_text(_INTERPRETED_LIBRARY_CALL)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env.pop("HELION_INTERPRET", None)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


# -- a jit function redefined at run time (a notebook cell run again) -----------------------------


class Notebook:
    """Cells run in one module's globals, each from a file of its own (as IPython does: the
    source of what a cell defines stays readable by inspect, which Triton and Helion read)."""

    def __init__(self, tmp_path) -> None:
        self.tmp_path = tmp_path
        self.module = types.ModuleType(f"helion_notebook_{tmp_path.name}")
        self.cells = 0
        sys.modules[self.module.__name__] = self.module

    def run(self, source: str) -> None:
        self.cells += 1
        path = self.tmp_path / f"cell_{self.cells}.py"
        path.write_text(textwrap.dedent(source))
        exec(compile(path.read_text(), str(path), "exec"), vars(self.module))

    def close(self) -> None:
        sys.modules.pop(self.module.__name__, None)


@pytest.fixture
def notebook(tmp_path):
    book = Notebook(tmp_path)
    yield book
    book.close()


NOTEBOOK_IMPORTS = """
    import torch
    import triton
    import triton.language as tl
    import helion
    import helion.language as hl
"""

NOTEBOOK_KERNEL = """
    @helion.kernel(backend="triton", autotune_effort="none")
    def transform(x):
        out = torch.empty_like(x)
        for tile_m, tile_n in hl.tile(x.size()):
            v = x[tile_m, tile_n]
            out[tile_m, tile_n] = hl.triton_kernel(FUNCTION, [v], v)
        return out
"""


@pytest.mark.parametrize("function", ["_transform", "'_transform'"])
def test_a_redefined_jit_function_runs_on_the_next_call(notebook, function, monkeypatch):
    """The kernel calls the function its name refers to when the kernel is called, as Triton's
    own jit does: redefining it (running its cell again) re-traces the kernel. The function is
    passed itself, or named by a string."""
    notebook.run(NOTEBOOK_IMPORTS)
    notebook.run(
        """
        @triton.jit
        def _transform(x):
            return x * 2.0
        """
    )
    notebook.run(NOTEBOOK_KERNEL.replace("FUNCTION", function))
    transform = notebook.module.transform
    x = torch.randn(shape(), shape())
    torch.testing.assert_close(transform(x), x * 2.0)
    bound = transform.bind((x,))
    traces = []
    trace = bound._trace
    monkeypatch.setattr(bound, "_trace", lambda values: traces.append(1) or trace(values))
    for _ in range(3):  # warm calls: the same code, no re-trace
        torch.testing.assert_close(transform(x), x * 2.0)
    assert not traces and len(bound._variants[bound._config]) == 1
    notebook.run(
        """
        @triton.jit
        def _transform(x):
            return x - 1.0
        """
    )
    for _ in range(4):  # traced once, then warm
        torch.testing.assert_close(transform(x), x - 1.0)
    assert len(traces) == 1, traces
    source = bound.to_code()
    assert "return x - 1.0" in source and "x * 2.0" not in source, source
    # the stale variant is gone
    assert len(bound._variants[bound._config]) == 1
    y = torch.randn(shape(), shape())  # another bound kernel (another shape key) sees it too
    torch.testing.assert_close(transform(y), y - 1.0)


def test_a_redefined_helper_or_constexpr_runs_on_the_next_call(notebook):
    """The same for what the called function uses: a jit helper it calls, and a constexpr."""
    notebook.run(NOTEBOOK_IMPORTS)
    notebook.run(
        """
        SCALE = tl.constexpr(3.0)

        @triton.jit
        def _helper(x):
            return x * SCALE

        @triton.jit
        def _transform(x):
            return _helper(x) + 1.0
        """
    )
    notebook.run(NOTEBOOK_KERNEL.replace("FUNCTION", "_transform"))
    transform = notebook.module.transform
    x = torch.randn(shape(), shape())
    torch.testing.assert_close(transform(x), x * 3.0 + 1.0)
    notebook.run(
        """
        @triton.jit
        def _helper(x):
            return x * SCALE - 5.0
        """
    )
    torch.testing.assert_close(transform(x), x * 3.0 - 5.0 + 1.0)
    notebook.run("SCALE = tl.constexpr(0.5)")
    torch.testing.assert_close(transform(x), x * 0.5 - 5.0 + 1.0)


def add_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] + 1.0
    return out


def test_only_kernels_calling_triton_kernel_watch_names():
    """The guards that watch the names are there only for kernels that call hl.triton_kernel:
    the calls of other kernels check nothing more."""
    x = torch.randn(shape(), shape())
    plain = triton_kernel(add_one)
    torch.testing.assert_close(plain(x), x + 1.0)
    bound = plain.bind((x,))
    assert [v.name_guards for v in bound._variants[bound._config]] == [()]
    kernel = triton_kernel(scale_add)
    torch.testing.assert_close(kernel(x, x, 0.5), x * 0.5 + x)
    bound = kernel.bind((x, x, 0.5))
    (guards,) = [v.name_guards for v in bound._variants[bound._config]]
    assert [(name, value) for _, name, value in guards] == [("_scale_add", _scale_add)]
