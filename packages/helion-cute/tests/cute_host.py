"""Run a generated CuTe module on the host CPU, for tests on a machine without a GPU.

``cute.compile`` of a ``@cute.jit`` function that launches no kernel builds host code, which runs
here. :func:`host_source` rewrites a generated module into such a function: each
``@cute.kernel`` becomes a ``@cute.jit`` function that runs its body once per (program, thread),
one after another, and each ``.launch(grid=..., block=...)`` becomes a call of it. That is the
kernel's meaning only when its threads do not talk to each other, so :func:`runs_on_host` turns
away a module with warp shuffles, barriers, shared memory, tensor-core or TMA code, or atomics.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path
from typing import Any

import torch

from helion.ir.core import KernelIR
from helion_cute.codegen import Generated
from helion_cute.source import cutlass_type
from helion_cute.source import memory_type

# what a sequential run of the threads cannot mean
_CROSS_THREAD = (
    "shuffle_sync",
    "sync_threads",
    "SmemAllocator",
    "warpgroup",
    "cpasync",
    "cute.arch.atomic",
)
_LAUNCH = re.compile(r"^(\s*)(\w+)\((.*)\)\.launch\($")
_GRID = re.compile(r"^\s*grid=\((.*), 1, 1\), block=\((\d+), 1, 1\), stream=stream\)$")
_IMPORTS_END = "import cuda.bindings.driver as cuda"


def runs_on_host(source: str) -> bool:
    """Whether :func:`host_source` keeps the meaning of a generated module."""
    body = source.split(_IMPORTS_END, 1)[1]
    return not any(word in body for word in _CROSS_THREAD)


def host_source(source: str) -> str:
    """The generated module with its kernels run as loops over programs and threads."""
    lines = source.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line == "@cute.kernel":
            header = lines[i + 1]
            assert header.startswith("def ") and header.endswith("):"), header
            assert lines[i + 2].strip() == "tid, _, _ = cute.arch.thread_idx()", lines[i + 2]
            assert lines[i + 3].strip() == "pid, _, _ = cute.arch.block_idx()", lines[i + 3]
            out += [
                "@cute.jit",
                f"{header[:-2]}, _grid, _threads):",
                "    for pid in cutlass.range(_grid):",
                "        for tid in cutlass.range(_threads):",
            ]
            i += 4
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                out.append(f"        {lines[i]}" if lines[i].strip() else "")
                i += 1
            continue
        launch = _LAUNCH.match(line)
        if launch:
            grid = _GRID.match(lines[i + 1])
            assert grid, lines[i + 1]
            indent, name, args = launch.groups()
            out.append(f"{indent}{name}({args}, {grid.group(1)}, {grid.group(2)})")
            i += 2
            continue
        out.append(line)
        i += 1
    return "\n".join(out) + "\n"


def run_on_host(ir: KernelIR, generated: Generated, values: tuple, folder: Path) -> None:
    """Run a generated module on the CPU tensors and scalars of a launch (``values``: the
    kernel's host values, as ``CuteCompiledKernel.__call__`` receives them). Pick ``generated``
    as the launcher does: the variant that assumes 16-byte aligned tensors when they are."""
    import cuda.bindings.driver as driver
    import cutlass
    import cutlass.cute as cute

    assert runs_on_host(generated.source), "the module's threads work together"
    text = host_source(generated.source)
    path = folder / f"host_{hashlib.sha256(text.encode()).hexdigest()[:16]}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    host = getattr(module, generated.host_name)
    args: list[Any] = []
    stand_ins = []  # a tensor with no element has no address: give one that nothing may touch
    for arg in generated.tensor_args:
        tensor = values[arg.index]
        assert tensor.device.type == "cpu"
        if tensor.numel() == 0:
            tensor = torch.empty(1, dtype=tensor.dtype)
            stand_ins.append(tensor)
        element = getattr(cutlass, memory_type(arg.dtype).removeprefix("cutlass."))
        args.append(cute.runtime.make_ptr(element, tensor.data_ptr(), cute.AddressSpace.generic))
    for scalar, dtype in zip(ir.scalar_args, generated.scalar_dtypes, strict=True):
        number = getattr(cutlass, cutlass_type(dtype).removeprefix("cutlass."))
        args.append(number(values[scalar.index]))
    args.append(driver.CUstream(0))
    cute.compile(host, *args)(*args)
