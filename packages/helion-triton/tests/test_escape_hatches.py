"""Escape hatches and special matmuls on the Triton backend.

- ``hl.inline_triton`` runs through the interpreter (CPU) and compiled (CUDA) against PyTorch;
- ``hl.inline_asm_elementwise`` cannot run in the interpreter: that is a clear error there, and
  the generated code for a Hopper GPU is checked as text and compiled to a cubin offline;
- ``hl.dot_scaled`` against the ref backend (which core tests check against an independent
  dequantization), and compiled offline for Hopper;
- functions passed as kernel arguments (epilogues) and fp8 loads, stores and casts on ref,
  eager mode and Triton;
- every other backend, and eager mode, report the escape hatches as unsupported.
"""

from __future__ import annotations

import random
import re
from typing import Callable

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion_triton.launcher import load_module
from helion_triton.target import TritonTarget
from helion_triton.target import has_block_ptr
from helion_triton.target import range_kwargs

HOPPER = TritonTarget("cuda", False, (9, 0), 132, has_block_ptr(), True, range_kwargs())


def triton_kernel(fn: Callable, **settings) -> helion.Kernel:
    return helion.kernel(fn, backend="triton", autotune_effort="none", **settings)


def hopper_source(
    kernel: helion.Kernel, args: tuple, config: helion.Config | None = None
) -> tuple[str, object]:
    """The kernel's Triton source for an H100/H200 (generated on this machine, whatever it is),
    under ``config`` (default: the default config)."""
    bound = kernel.bind(args)
    config = bound.config_spec.default_config() if config is None else bound.normalize(config)
    generated = bound.backend.generate(bound.ir, config, HOPPER)
    return generated.source, (bound, generated)


_POINTER_TYPES = {
    torch.float32: "*fp32",
    torch.float16: "*fp16",
    torch.bfloat16: "*bf16",
    torch.uint8: "*u8",
    torch.float8_e4m3fn: "*fp8e4nv",
    torch.float8_e5m2: "*fp8e5",
    torch.int32: "*i32",
    torch.int64: "*i64",
}


def compile_for_hopper(
    kernel: helion.Kernel, args: tuple, config: helion.Config | None = None
) -> dict:
    """Compile the generated kernel down to a cubin for sm_90 with Triton's own toolchain (no
    GPU needed): proof that the code is valid for the GPU path, not only for the interpreter."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source, (bound, generated) = hopper_source(kernel, args, config)
    module = load_module(source, f"{bound.ir.name}_hopper", interpret=False)
    fn = getattr(module, generated.kernel_name)
    launch = source.split(f"def {generated.launcher_name}(")[1]
    constants = {name: int(value) for name, value in re.findall(r"(_[A-Z0-9_]+)=(\d+)", launch)}
    # parameters: the tensors, then the runtime scalars, then the block-size constexprs
    kinds = [_POINTER_TYPES[t.dtype] for t in bound.ir.tensor_args]
    kinds += ["fp32" if s.dtype.is_floating_point else "i64" for s in bound.ir.scalar_args]
    signature = {}
    for position, name in enumerate(fn.arg_names):
        signature[name] = "constexpr" if fn.params[position].is_constexpr else kinds[position]
    constexprs = {name: value for name, value in constants.items() if name in signature}
    compiled = triton.compile(
        ASTSource(fn, signature=signature, constexprs=constexprs), target=GPUTarget("cuda", 90, 32)
    )
    return compiled.asm


# -- hl.inline_triton ------------------------------------------------------------------------------------


def inline_affine(x: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        v = x[tile_m, tile_n]
        out[tile_m, tile_n] = hl.inline_triton(
            """
            load = {0} * {1}
            if {2}:
                load = load + 1.0
            tl.maximum(load, 0.0)
            """,
            [v, scale, True],
            v,
        )
    return out


def inline_pair(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    total = torch.empty_like(x)
    rows = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    for tile_m, tile_n in hl.tile(x.size()):
        a, b = x[tile_m, tile_n], y[tile_m, tile_n]
        like_rows = hl.zeros([tile_m, tile_n], dtype=torch.int32)
        s, r = hl.inline_triton(
            "({a} + {b}, ({rows}[:, None] + {zero}).to({dtype}))",
            {"a": a, "b": b, "rows": tile_m, "zero": like_rows, "dtype": torch.int32},
            (a, like_rows),
        )
        total[tile_m, tile_n] = s
        rows[tile_m, tile_n] = r
    return total, rows


def inline_pointer(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The snippet loads from a kernel tensor argument through its pointer."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.inline_triton(
            "{v} + tl.load({ptr} + {idx} % {n})",
            {"v": v, "ptr": table, "idx": tile, "n": table.size(0)},
            v,
        )
    return out


def inline_side_effect(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """No outputs: the snippet stores itself."""
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        hl.inline_triton(
            "tl.store({0} + {1}, {2} * 3.0, mask={1} < {3})", [out, tile, v, x.size(0)], None
        )
    return out


def test_inline_triton_statements_and_placeholders(device):
    x = torch.randn(37, 45, device=device)
    kernel = triton_kernel(inline_affine)
    expected = torch.relu(x * 0.5 + 1.0)
    torch.testing.assert_close(kernel(x, 0.5), expected)
    bound = kernel.bind((x, 0.5))
    for seed in range(3):
        config = bound.config_spec.random_config(random.Random(seed))
        torch.testing.assert_close(bound.compile_config(config)(x, 0.5), expected)
    source = bound.to_code()
    # the snippet's own `load` must not clobber the kernel's `load`: it is renamed
    expected_lines = [
        "    load_1 = load * scale_value",
        "    if True:",
        "        load_1 = load_1 + 1.0",
        "    inline = tl.maximum(load_1, 0.0)",
    ]
    lines = source.splitlines()
    start = lines.index(expected_lines[0])
    assert lines[start : start + len(expected_lines)] == expected_lines, source
    check = lines[start + len(expected_lines)]
    assert check.startswith(
        "    tl.static_assert(inline.dtype == tl.float32, f'hl.inline_triton on the triton backend"
    ), source
    assert "the snippet returned a result of dtype {tl.constexpr(inline.dtype)}" in check, check


def test_inline_triton_mapping_tuple_outputs_tiles_and_dtypes(device):
    x, y = torch.randn(29, 35, device=device), torch.randn(29, 35, device=device)
    total, rows = triton_kernel(inline_pair)(x, y)
    torch.testing.assert_close(total, x + y)
    expected_rows = torch.arange(29, device=device, dtype=torch.int32)[:, None].expand(29, 35)
    torch.testing.assert_close(rows, expected_rows)


def test_inline_triton_pointer_and_side_effect_only(device):
    x = torch.randn(53, device=device)
    table = torch.randn(7, device=device)
    expected = x + table[torch.arange(53, device=device) % 7]
    torch.testing.assert_close(triton_kernel(inline_pointer)(x, table), expected)
    out = torch.zeros(53, device=device)
    triton_kernel(inline_side_effect)(x, out)
    torch.testing.assert_close(out, x * 3.0)


def test_inline_triton_compiles_for_hopper():
    asm = compile_for_hopper(triton_kernel(inline_affine), (torch.randn(37, 45), 0.5))
    assert asm["cubin"] and "max.f32" in asm["ptx"], asm["ptx"]


def _wrong_dtype(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.inline_triton("{0}.to(tl.float16)", [v], v)
    return out


def _no_expression(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.inline_triton("y = {0}", [v], v)
    return out


def _missing_arg(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.inline_triton("{0} + {1}", [v], v)
    return out


def _assigns_placeholder(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.inline_triton("{0} = {0} + 1\n{0}", [v], v)
    return out


def _bad_output_like(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = hl.inline_triton("{0}", [v], x)
    return out


@pytest.mark.parametrize(
    "fn, text",
    [
        (_no_expression, "last line of the source must be an expression"),
        (_missing_arg, "does not match its args"),
        (_assigns_placeholder, "assigns to the placeholder {0}"),
        (_bad_output_like, "output_like must be a device tensor"),
    ],
)
def test_inline_triton_bad_input(fn, text):
    with pytest.raises(exc.InvalidAPIUsage) as info:
        triton_kernel(fn)(torch.randn(20))
    assert text in str(info.value) and "test_escape_hatches.py" in str(info.value), str(info.value)


def test_inline_triton_wrong_output_dtype_is_an_error_at_the_call():
    with pytest.raises(exc.InvalidAPIUsage) as info:
        triton_kernel(_wrong_dtype)(torch.randn(23))
    message = str(info.value)
    line = _wrong_dtype.__code__.co_firstlineno + 4
    assert f'test_escape_hatches.py", line {line}' in message, message
    expected = (
        "hl.inline_triton on the 'triton' backend: the snippet returned a result of dtype fp16, "
        "but output_like has dtype fp32 (torch.float32)"
    )
    assert expected in message, message


# -- hl.inline_asm_elementwise -----------------------------------------------------------------------------


def asm_copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        v = x[tile]
        out[tile] = hl.inline_asm_elementwise(
            "mov.b32 $0, $1;", "=r,r", [v], torch.float32, True, 1
        )
    return out


def asm_two_results(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.empty_like(x)
    b = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        bits = v.to(torch.int32)
        f, i = hl.inline_asm_elementwise(
            "mov.b32 $0, $2; mov.b32 $1, $3;",
            "=r,=r,r,r",
            [v, bits],
            [torch.float32, torch.int32],
            True,
            1,
        )
        a[tile] = f
        b[tile] = i
    return a, b


def test_inline_asm_in_the_interpreter_is_a_clear_error():
    with pytest.raises(exc.BackendUnsupported) as info:
        triton_kernel(asm_copy)(torch.randn(7, 9))
    message = str(info.value)
    assert "hl.inline_asm_elementwise in the Triton interpreter" in message
    assert "cannot run inline assembly" in message and "test_escape_hatches.py" in message


def test_inline_asm_generated_code():
    x = torch.randn(7, 9)
    source, _ = hopper_source(triton_kernel(asm_copy), (x,))
    assert (
        "    asm = tl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [load], dtype=tl.float32, "
        "is_pure=True, pack=1)\n"
    ) in source, source
    source, _ = hopper_source(triton_kernel(asm_two_results), (torch.randn(11),))
    assert (
        "asm, asm_1 = tl.inline_asm_elementwise('mov.b32 $0, $2; mov.b32 $1, $3;', '=r,=r,r,r', "
        "[load, cast], dtype=(tl.float32, tl.int32), is_pure=True, pack=1)"
    ) in source, source
    asm = compile_for_hopper(triton_kernel(asm_two_results), (torch.randn(11),))
    assert "mov.b32" in asm["ptx"] and asm["cubin"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="inline assembly needs a GPU")
def test_inline_asm_on_gpu():
    x = torch.randn(37, 45, device="cuda")
    torch.testing.assert_close(triton_kernel(asm_copy)(x), x)
    f, i = triton_kernel(asm_two_results)(x[0])
    torch.testing.assert_close(f, x[0])
    torch.testing.assert_close(i, x[0].to(torch.int32))


# -- hl.dot_scaled -------------------------------------------------------------------------------------------

FP8 = {
    "e4m3": torch.float8_e4m3fn,
    "e5m2": torch.float8_e5m2,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def scaled_operand(fmt: str, rows: int, k: int, *, rhs: bool, device="cpu") -> torch.Tensor:
    if fmt == "e2m1":
        shape = (k // 2, rows) if rhs else (rows, k // 2)
        return torch.randint(0, 256, shape, dtype=torch.uint8, device=device)
    shape = (k, rows) if rhs else (rows, k)
    return torch.randn(shape, device=device).to(FP8[fmt])


def scale_bytes(rows: int, k: int, device="cpu") -> torch.Tensor:
    return torch.randint(120, 135, (rows, k // 32), dtype=torch.uint8, device=device)


def dot_scaled_full_k(x, x_scale, y, y_scale, x_format: hl.constexpr, y_format: hl.constexpr):
    m, n = x.size(0), y.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = hl.dot_scaled(
            x[tile_m, :], x_scale[tile_m, :], x_format, y[:, tile_n], y_scale[tile_n, :], y_format
        )
    return out


def dot_scaled_k_tiles(x, x_scale, y, y_scale):
    m, k = x.size()
    n = y.size(1)
    groups = k // 32
    out = torch.empty([m, n], dtype=torch.float16, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float16)
        for tile_k in hl.tile(k, block_size=64):
            group = tile_k.begin // 32 + hl.arange(2)
            valid = (group < groups)[None, :]
            acc = hl.dot_scaled(
                x[tile_m, tile_k],
                hl.load(x_scale, [tile_m, group], extra_mask=valid),
                "e4m3",
                y[tile_k, tile_n],
                hl.load(y_scale, [tile_n, group], extra_mask=valid),
                "e4m3",
                acc=acc,
            )
        out[tile_m, tile_n] = acc
    return out


def _oracle(kernel_fn: Callable, args: tuple) -> torch.Tensor:
    return helion.kernel(kernel_fn, backend="ref", autotune_effort="none")(
        *(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)
    )


@pytest.mark.parametrize(
    "x_format, y_format", [("e2m1", "e4m3"), ("e4m3", "e5m2"), ("bf16", "e2m1"), ("fp16", "fp16")]
)
def test_dot_scaled_matches_ref(device, x_format, y_format):
    m, n, k = 37, 21, 96  # K = 96 is padded to 128 lanes (and 3 scale groups to 4)
    args = (
        scaled_operand(x_format, m, k, rhs=False, device=device),
        scale_bytes(m, k, device),
        scaled_operand(y_format, n, k, rhs=True, device=device),
        scale_bytes(n, k, device),
        x_format,
        y_format,
    )
    expected = _oracle(dot_scaled_full_k, args)
    actual = triton_kernel(dot_scaled_full_k)(*args)
    scale = float(expected.abs().max())
    # on a GPU the operands may be upcast to bf16 before the MMA (exact for these formats)
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-5 * scale)


def test_dot_scaled_k_tiles_random_configs(device):
    m, n, k = 45, 27, 160
    x = scaled_operand("e4m3", m, k, rhs=False, device=device)
    y = scaled_operand("e4m3", n, k, rhs=True, device=device)
    args = (x, scale_bytes(m, k, device), y, scale_bytes(n, k, device))
    expected = _oracle(dot_scaled_k_tiles, args).float()
    bound = triton_kernel(dot_scaled_k_tiles).bind(args)
    for seed in range(3):
        config = bound.config_spec.random_config(random.Random(seed))
        actual = bound.compile_config(config)(*args)
        assert actual.dtype == torch.float16
        torch.testing.assert_close(
            actual.float().cpu(), expected, rtol=2e-3, atol=2e-3 * float(expected.abs().max())
        )


def test_dot_scaled_generated_code_and_hopper_compile():
    m, n, k = 37, 21, 96
    args = (
        scaled_operand("e2m1", m, k, rhs=False),
        scale_bytes(m, k),
        scaled_operand("e4m3", n, k, rhs=True),
        scale_bytes(n, k),
        "e2m1",
        "e4m3",
    )
    source, _ = hopper_source(triton_kernel(dot_scaled_full_k), args)
    assert (
        "tl.dot_scaled(load, load_1, 'e2m1', load_2, load_3, 'e4m3', out_dtype=tl.float32)"
        in source
    ), source
    asm = compile_for_hopper(triton_kernel(dot_scaled_full_k), args)
    assert asm["cubin"]
    x, y = scaled_operand("e4m3", 45, 160, rhs=False), scaled_operand("e4m3", 27, 160, rhs=True)
    tiled = (x, scale_bytes(45, 160), y, scale_bytes(27, 160))
    source, _ = hopper_source(triton_kernel(dot_scaled_k_tiles), tiled)
    # a float16 accumulator goes through float32, the only accumulator tl.dot_scaled takes
    assert re.search(
        r"tl\.dot_scaled\(load, load_1, 'e4m3', load_2, load_3, 'e4m3', "
        r"acc=(\w+)\.to\(tl\.float32\), out_dtype=tl\.float32\)\.to\(tl\.float16\)",
        source,
    ), source
    assert compile_for_hopper(triton_kernel(dot_scaled_k_tiles), tiled)["cubin"]


# -- every other backend and eager mode: unsupported, with the line --------------------------------------------


def _unscaled_bf16(x, y):
    out = torch.empty([x.size(0), y.size(1)], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([x.size(0), y.size(1)]):
        out[tile_m, tile_n] = hl.dot_scaled(x[tile_m, :], None, "bf16", y[:, tile_n], None, "bf16")
    return out


def test_other_backends_report_the_ops():
    from helion import backends

    cases = [
        (inline_affine, (torch.randn(16, 16), 0.5), "inline_triton"),
        (asm_copy, (torch.randn(16, 16),), "inline_asm_elementwise"),
        (
            _unscaled_bf16,
            (torch.randn(32, 64, dtype=torch.bfloat16), torch.randn(64, 32, dtype=torch.bfloat16)),
            "dot_scaled",
        ),
    ]
    names = [b.name for b in backends.list_backends() if b.name != "triton"]
    assert "ref" in names
    for name in names:
        for fn, args, op in cases:
            if name == "ref" and op == "dot_scaled":
                continue  # the ref backend runs it (tests in helion-core)
            kernel = helion.kernel(fn, backend=name, autotune_effort="none")
            with pytest.raises(exc.BackendUnsupported) as info:
                kernel(*args)
            message = str(info.value)
            assert op in message and repr(name) in message, (name, message)
    eager = [
        (inline_affine, (torch.randn(16, 16), 0.5), "hl.inline_triton", "Triton backend"),
        (asm_copy, (torch.randn(16, 16),), "hl.inline_asm_elementwise", "on a GPU"),
    ]
    for fn, args, op, hint in eager:
        with pytest.raises(exc.BackendUnsupported) as info:
            helion.kernel(fn, ref_mode=helion.RefMode.EAGER)(*args)
        message = str(info.value)
        assert op in message and "'eager'" in message and hint in message, message


# -- functions as kernel arguments (epilogues) ------------------------------------------------------------------


def apply_epilogue(x: torch.Tensor, epilogue: Callable) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = epilogue(x[tile_m, tile_n], (tile_m, tile_n))
    return out


def clamp_and_scale(low: float, high: float, scale: float) -> Callable:
    def epilogue(acc, tile):
        return torch.clamp(acc, low, high) * scale

    return epilogue


def with_bias(bias: torch.Tensor, inner: Callable) -> Callable:
    return lambda acc, tile: inner(acc, tile) + bias[tile[1]]


BACKENDS = ["ref", "eager", "triton"]


def _kernel(fn: Callable, backend: str) -> helion.Kernel:
    if backend == "eager":
        return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)
    return helion.kernel(fn, backend=backend, autotune_effort="none")


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_arguments_capturing_constants(backend):
    x = torch.randn(23, 37)
    kernel = _kernel(apply_epilogue, backend)
    for low, high, scale in ((-0.5, 0.5, 2.0), (-1.0, 0.25, 3.0)):
        expected = torch.clamp(x, low, high) * scale
        torch.testing.assert_close(kernel(x, clamp_and_scale(low, high, scale)), expected)
    bias = torch.randn(37)
    nested = with_bias(bias, clamp_and_scale(-0.5, 0.5, 2.0))
    torch.testing.assert_close(kernel(x, nested), torch.clamp(x, -0.5, 0.5) * 2.0 + bias)
    torch.testing.assert_close(kernel(x, lambda acc, tile: acc.sigmoid()), torch.sigmoid(x))
    if backend != "eager":
        # the key is the code and what it captures: equal captures share one compiled kernel
        first = kernel.bind((x, clamp_and_scale(-1.0, 1.0, 2.0)))
        assert kernel.bind((x, clamp_and_scale(-1.0, 1.0, 2.0))) is first
        assert kernel.bind((x, clamp_and_scale(-1.0, 1.0, 4.0))) is not first
        # a captured tensor is an argument: another bias of the same shape reuses the kernel
        other = with_bias(torch.randn(37), clamp_and_scale(-0.5, 0.5, 2.0))
        assert kernel.bind((x, other)) is kernel.bind((x, nested))
        torch.testing.assert_close(
            kernel(x, other), torch.clamp(x, -0.5, 0.5) * 2.0 + other.__closure__[0].cell_contents
        )


# -- fp8 loads, stores and casts ------------------------------------------------------------------------------------


def fp8_casts(x: torch.Tensor, y8: torch.Tensor):
    a = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    b = torch.empty(x.shape, dtype=torch.float8_e5m2, device=x.device)
    c = torch.empty(x.shape, dtype=torch.float16, device=x.device)
    d = torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)
    e = torch.empty(x.shape, dtype=torch.float8_e5m2, device=x.device)
    f = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile(x.size()):
        v = x[tile_m, tile_n]
        a[tile_m, tile_n] = v.to(torch.float8_e4m3fn)
        b[tile_m, tile_n] = v  # the store converts
        w = y8[tile_m, tile_n]
        c[tile_m, tile_n] = w.to(torch.float16)
        d[tile_m, tile_n] = w.to(torch.bfloat16)
        e[tile_m, tile_n] = w.to(torch.float8_e5m2)
        f[tile_m, tile_n] = w.to(torch.float32) * 2.0 + v.to(torch.float8_e4m3fn).to(torch.float32)
    return a, b, c, d, e, f


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp8_loads_stores_and_casts(backend):
    torch.manual_seed(0)
    x = torch.randn(29, 43) * 8  # well inside both formats' range
    y8 = (torch.randn(29, 43) * 8).to(torch.float8_e4m3fn)
    a, b, c, d, e, f = _kernel(fp8_casts, backend)(x, y8)
    expected = (
        x.to(torch.float8_e4m3fn),
        x.to(torch.float8_e5m2),
        y8.to(torch.float16),
        y8.to(torch.bfloat16),
        y8.to(torch.float8_e5m2),
        y8.float() * 2.0 + x.to(torch.float8_e4m3fn).float(),
    )
    for actual, want in zip((a, b, c, d, e, f), expected, strict=True):
        assert actual.dtype == want.dtype
        if want.dtype.itemsize == 1:
            assert torch.equal(actual.view(torch.uint8), want.view(torch.uint8)), (actual, want)
        else:
            torch.testing.assert_close(actual, want, rtol=0, atol=0)


def fp8_convert(x: torch.Tensor, dtype: hl.constexpr) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile].to(dtype)
    return out


def _same_values(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    if expected.dtype.itemsize == 1:
        nan = torch.isnan(actual.float()) & torch.isnan(expected.float())
        return bool(((actual.view(torch.uint8) == expected.view(torch.uint8)) | nan).all())
    return bool(((actual == expected) | (torch.isnan(actual) & torch.isnan(expected))).all())


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp8_rounding_and_special_values(backend):
    """Round to nearest even where the mantissa carries into the exponent, subnormals, the
    saturation / overflow points, infinities and NaN, and every fp8 code widened or narrowed."""
    torch.manual_seed(1)
    special = [
        0.0,
        -0.0,
        float("inf"),
        float("-inf"),
        float("nan"),
        448.0,
        464.0,
        465.0,
        500.0,
        57344.0,
        61439.0,
        61440.0,
        1e9,
        2.0**-9,
        2.0**-10,
        3 * 2.0**-11,
        2.0**-16,
        2.0**-17,
        3 * 2.0**-18,
        -7.52,
        1.99,
    ]
    x = torch.cat([torch.randn(700) * 30, torch.randn(300) * 1e-3, torch.tensor(special)])
    kernel = _kernel(fp8_convert, backend)
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        assert _same_values(kernel(x, dtype), x.to(dtype)), dtype
    codes = torch.arange(256, dtype=torch.uint8)
    for source in (torch.float8_e4m3fn, torch.float8_e5m2):
        values = codes.view(source)
        for dtype in (
            torch.float32,
            torch.float16,
            torch.bfloat16,
            torch.float8_e4m3fn,
            torch.float8_e5m2,
        ):
            if dtype != source:
                assert _same_values(kernel(values, dtype), values.to(dtype)), (source, dtype)


def opaque_row(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        squares = hl.inline_triton("{0} * {0}", [row], row)
        out[tile] = squares.sum(-1)
    return out


def test_inline_code_keeps_its_reduction_dimension_whole():
    """A snippet over a full row may not be recomputed per chunk of a looped reduction."""
    x = torch.randn(9, 300)
    bound = triton_kernel(opaque_row).bind((x,))
    assert bound.config_spec["reduction_loops"].fragments[0].all_values() == [None]
    for seed in range(2):
        config = bound.config_spec.random_config(random.Random(seed))
        torch.testing.assert_close(bound.compile_config(config)(x), (x * x).sum(-1))
