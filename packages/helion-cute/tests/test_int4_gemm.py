"""Integer bit operations on the CuTe backend: the int4 GEMM examples compile through
``cute.compile``, and the fragment code the backend generates for shifts, masks and int4
unpacking gives PyTorch's results.

Kernels cannot run without a GPU, but fragment (``TensorSSA``) arithmetic also compiles for the
host: :func:`_run_fragment_code` takes the lines the backend generated for the elementwise nodes
between chosen values, compiles them into a host ``@cute.jit`` function and runs it on CPU
tensors. The one difference from the device is the DSL's int8 -> bf16 fast path (PTX ``dp4a``),
which the host cannot assemble; the host takes the plain signed conversion instead.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.ir.core import Value
from helion.language import _ops as ops
from helion_cute.codegen import KernelEmitter
from helion_cute.source import cutlass_type
from helion_cute.values import CVal

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _example(stem: str) -> Any:
    # the examples import their helpers as top-level modules
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    name = f"helion_cute_test_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _int4_args(scaled: bool, m: int, k: int, n: int) -> tuple:
    int4 = _example("int4_gemm")
    w = torch.randint(-8, 8, (k, n))
    dtype = torch.float16 if scaled else torch.bfloat16
    x = torch.randn(m, k, dtype=dtype)
    if scaled:
        return x, int4.pack_int4(w), torch.rand(n) * 0.05 + 0.01
    return x, int4.pack_int4(w)


# -- running generated fragment code on the host -----------------------------------------------

_NOT_ELEMENTWISE = (ops.load, ops.store, ops.atomic, ops.dot)


class _Recorder:
    """Records, for every node the CuTe emitter lowers, the lines it wrote."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.nodes: list[tuple[Any, list[str], KernelEmitter]] = []
        original = KernelEmitter.emit_node

        def emit_node(emitter: KernelEmitter, node: Any) -> None:
            start = len(emitter.w._lines)
            original(emitter, node)
            self.nodes.append((node, list(emitter.w._lines[start:]), emitter))

        monkeypatch.setattr(KernelEmitter, "emit_node", emit_node)

    def value(self, value: Value) -> tuple[CVal, KernelEmitter]:
        for _, _, emitter in self.nodes:
            if value.id in emitter.env:
                return emitter.env[value.id], emitter
        raise AssertionError(f"{value} was not generated")


def _slice_lines(recorder: _Recorder, inputs: list[Value]) -> list[str]:
    """The lines of the elementwise nodes computed from ``inputs`` alone, in order."""
    known = {v.id for v in inputs}
    lines: list[str] = []
    for node, written, _ in recorder.nodes:
        if node.op.structural or node.op in _NOT_ELEMENTWISE:
            continue
        values = [i for i in node.inputs if isinstance(i, Value)]
        if values and all(v.id in known for v in values):
            # straight-line assignments, so they can be re-indented
            assert not any(t.rstrip().endswith(":") for t in written), written
            lines += [t.strip() for t in written]
            known.update(out.id for out in node.outputs)
    return lines


def _run_fragment_code(
    recorder: _Recorder,
    inputs: list[Value],
    outputs: list[Value],
    data: list[torch.Tensor],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> list[torch.Tensor]:
    """Run the generated code from ``inputs`` to ``outputs`` on the flat CPU tensors ``data``
    (one per input, all of one length), a fragment's worth of elements at a time."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.arch import numeric_conversion

    # PTX intrinsics cannot be assembled for the host
    for fast in (
        numeric_conversion.cvt_i8_bf16_intrinsic,
        numeric_conversion.cvt_i4_bf16_intrinsic,
    ):
        monkeypatch.setattr(fast, "supported_archs", ())
    ins = [recorder.value(v) for v in inputs]
    outs = [recorder.value(v) for v in outputs]
    shape = ins[0][1].shape(ins[0][0].axes)
    for cval, emitter in ins + outs:
        assert cval.is_frag and emitter.shape(cval.axes) == shape, "one fragment shape expected"
    size = 1
    for extent in shape:
        size *= extent
    params = [f"p_in{i}" for i in range(len(ins))] + [f"p_out{i}" for i in range(len(outs))]
    body = []
    for i, (cval, _) in enumerate(ins):
        body += [
            f"src{i} = cute.make_tensor(p_in{i}, cute.make_layout({size}))",
            f"reg{i} = cute.make_rmem_tensor({shape!r}, {cutlass_type(cval.dtype)})",
            f"for _i in cutlass.range({size}, unroll_full=True):",
            f"    reg{i}[_i] = src{i}[_i]",
            f"{cval.expr} = reg{i}.load()",
        ]
    body += _slice_lines(recorder, inputs)
    for i, (cval, _) in enumerate(outs):
        body += [
            f"res{i} = cute.make_rmem_tensor({shape!r}, {cutlass_type(cval.dtype)})",
            f"res{i}.store({cval.expr})",
            f"dst{i} = cute.make_tensor(p_out{i}, cute.make_layout({size}))",
            f"for _i in cutlass.range({size}, unroll_full=True):",
            f"    dst{i}[_i] = res{i}[_i]",
        ]
    source = "\n".join(
        [
            "import operator",
            "import cutlass",
            "import cutlass.cute as cute",
            "",
            "@cute.jit",
            f"def run({', '.join(f'{p}: cute.Pointer' for p in params)}):",
            *(f"    {line}" for line in body),
            "",
        ]
    )
    path = tmp_path / f"fragment_{len(list(tmp_path.iterdir()))}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def pointer(t: torch.Tensor) -> Any:
        element = eval(cutlass_type(t.dtype), {"cutlass": cutlass})
        return cute.runtime.make_ptr(element, t.data_ptr(), cute.AddressSpace.generic)

    total = data[0].numel()
    padded = [torch.cat([d, d.new_zeros(-total % size)]) for d in data]
    results = [torch.empty(padded[0].numel(), dtype=c.dtype) for c, _ in outs]
    compiled = None
    for start in range(0, padded[0].numel(), size):
        chunk_in = [p[start : start + size].contiguous() for p in padded]
        chunk_out = [torch.zeros(size, dtype=r.dtype) for r in results]
        pointers = [pointer(t) for t in chunk_in + chunk_out]
        if compiled is None:
            compiled = cute.compile(module.run, *pointers)
        compiled(*pointers)
        for r, c in zip(results, chunk_out, strict=True):
            r[start : start + size] = c
    return [r[:total] for r in results]


def _every_byte() -> torch.Tensor:
    # all 256 int8 values in random order, plus random repeats: a non-power-of-two count
    return torch.cat([torch.randperm(256) - 128, torch.randint(-128, 128, (45,))]).to(torch.int8)


# -- the int4 GEMM examples ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["int4_gemm", "int4_gemm_scaled"])
def test_int4_gemm_compiles_through_cute_compile(name: str) -> None:
    int4 = _example("int4_gemm")
    kernel = helion.kernel(getattr(int4, name).fn, backend="cute", autotune_effort="none")
    args = _int4_args(name.endswith("scaled"), 27, 58, 35)
    bound = kernel.bind(args)
    config = bound.config_spec.default_config()
    compiled = bound.compile_config(config)
    function = bound._variants[config][0].compiled._functions[True]
    assert type(function).__name__.endswith("JitCompiledFunction")
    assert function.has_gpu_module
    with pytest.raises(exc.CuteBackendUnavailable, match="needs a CUDA device"):
        compiled(*args)


@pytest.mark.parametrize("name", ["int4_gemm", "int4_gemm_scaled"])
def test_int4_unpacking_matches_torch(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    int4 = _example("int4_gemm")
    kernel = helion.kernel(getattr(int4, name).fn, backend="cute", autotune_effort="none")
    args = _int4_args(name.endswith("scaled"), 19, 46, 37)
    recorder = _Recorder(monkeypatch)
    bound = kernel.bind(args)
    bound.compile_config(bound.config_spec.default_config())
    nodes = [node for node, _, _ in recorder.nodes]
    (packed,) = [
        n.output for n in nodes if n.op is ops.load and n.attrs["tensor"].name == "w_packed"
    ]
    # the weight operand of the two dots of each k step: the even row, then the odd row
    weights = [n.inputs[1] for n in nodes if n.op is ops.dot]
    assert len(weights) == 2
    data = _every_byte()
    unpacked = int4.unpack_int4(data.view(-1, 1)).view(-1, 2)
    # the integers before their conversion to the activation dtype: the shifts and masks
    nibbles = [w.producer.inputs[0] for w in weights]
    assert all(w.producer.op is ops.cast for w in weights)
    assert all(not n.dtype.is_floating_point for n in nibbles)
    low, high = _run_fragment_code(recorder, [packed], nibbles, [data], tmp_path, monkeypatch)
    torch.testing.assert_close(low.to(torch.int32), unpacked[:, 0].to(torch.int32), rtol=0, atol=0)
    torch.testing.assert_close(high.to(torch.int32), unpacked[:, 1].to(torch.int32), rtol=0, atol=0)
    # and through the conversion. A host CPU without native bf16 conversion needs compiler-rt's
    # __truncsfbf2 for it, which GCC 12's libgcc (this CI image) does not export: there the
    # conversion is left to the GPU runs (benchmarks/cute_gpu.py)
    dtype = args[0].dtype
    try:
        low, high = _run_fragment_code(recorder, [packed], weights, [data], tmp_path, monkeypatch)
    except Exception as error:
        if dtype == torch.bfloat16 and "__truncsfbf2" in str(error):
            return
        raise
    assert low.dtype == high.dtype == dtype
    torch.testing.assert_close(low, unpacked[:, 0].to(dtype), rtol=0, atol=0)
    torch.testing.assert_close(high, unpacked[:, 1].to(dtype), rtol=0, atol=0)


# -- shifts on their own -------------------------------------------------------------------------


@helion.kernel(backend="cute", autotune_effort="none")
def shifts(
    x: torch.Tensor, u: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    left = torch.empty_like(x)
    right = torch.empty_like(x)
    u_right = torch.empty_like(u)
    wide = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    for tile in hl.tile(x.size(0)):
        value = x[tile]
        left[tile] = value << 3  # wraps in int8
        right[tile] = value >> 2  # arithmetic
        u_right[tile] = u[tile] >> 3  # logical
        wide[tile] = (value.to(torch.int32) << 20) >> 23
    return left, right, u_right, wide


def test_shifts_match_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = _every_byte()
    u = x.view(torch.uint8).flip(0).contiguous()
    recorder = _Recorder(monkeypatch)
    bound = shifts.bind((x, u))
    bound.compile_config(bound.config_spec.default_config())
    nodes = [node for node, _, _ in recorder.nodes]
    loads = {n.attrs["tensor"].name: n.output for n in nodes if n.op is ops.load}
    stored = [n.inputs[-1] for n in nodes if n.op is ops.store]
    results = _run_fragment_code(
        recorder, [loads["x"], loads["u"]], stored, [x, u], tmp_path, monkeypatch
    )
    expected = [x << 3, x >> 2, u >> 3, (x.to(torch.int32) << 20) >> 23]
    for actual, want in zip(results, expected, strict=True):
        torch.testing.assert_close(actual, want, rtol=0, atol=0)


# -- what check() reports ------------------------------------------------------------------------


@helion.kernel(backend="cute")
def two_scans(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        running = torch.cumsum(x[tile, :], dim=1)
        out[tile, :] = torch.cumprod(running, dim=1)
    return out


def test_unsupported_ops_name_their_file_and_line() -> None:
    with pytest.raises(exc.BackendUnsupported) as info:
        two_scans.bind((torch.randn(5, 7),))
    text = str(info.value)
    lines = two_scans.fn.__code__.co_firstlineno
    source = Path(__file__).name
    # the first op is the error's location, the others are listed in the hint
    assert f'{source}", line {lines + 4}' in text and "cumsum" in text and "'cute'" in text
    assert f"cumprod ({__file__}:{lines + 5})" in text, text
    assert "bound method" not in text
