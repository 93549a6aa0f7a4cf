"""Compile generated modules with ``cute.compile`` and launch them.

Compilation needs no GPU: argument placeholders (null pointers with the alignment the code
assumes, zero scalars, the null stream) stand in for real data, and the target architecture is
the local GPU's or, without one, ``HELION_CUTE_ARCH`` (default ``sm_90a``, the H100/H200).

Caching, outermost first:

* in memory: one compiled function per (source, pointer alignment, arch), shared by every
  kernel of the process;
* on disk, under ``<helion cache dir>/cute/``: the generated source (``k_<hash>.py``: the DSL
  compiles from source it can read back) and the compiled module (``bin/<hash>.mlirbc``: the
  lowered host code with the cubin embedded, plus ``.meta`` with its entry point). On a machine
  with a GPU a later process loads that module into an execution engine directly, skipping
  tracing, the MLIR pipeline and ptxas; without a GPU (no engine can be made) it compiles again.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import os
import pickle
import sys
import threading
import types
from pathlib import Path
from typing import Any

import torch

from helion import exc
from helion.ir.core import KernelIR
from helion.runtime import settings as helion_settings
from helion.runtime.config import Config
from helion_cute.codegen import Generated
from helion_cute.codegen import generate
from helion_cute.source import cutlass_type
from helion_cute.source import memory_type
from helion_cute.tunables import CuteOptions

DEFAULT_ARCH = "sm_90a"
ALIGNMENT = 16

_compile_lock = threading.RLock()
_compiled: dict[tuple[str, bool, str], Any] = {}


def cache_root() -> Path:
    return helion_settings.cache_dir() / "cute"


@functools.lru_cache(maxsize=1)
def dsl() -> types.SimpleNamespace:
    """Import the CuTe DSL once (slow: a few seconds)."""
    import cuda.bindings.driver as driver
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    return types.SimpleNamespace(cutlass=cutlass, cute=cute, driver=driver, make_ptr=make_ptr)


def _artifact_path(source: str, aligned: bool, arch: str) -> Path:
    import importlib.metadata

    try:
        version = importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    key = f"{version}|{arch}|{aligned}|{source}"
    return cache_root() / "bin" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.mlirbc"


def _store_artifact(path: Path, fn: Any) -> None:
    """Write a compiled function's lowered module (cubin inside) and entry point to disk."""
    try:
        from cutlass.base_dsl.cache_helpers import write_bytecode_with_crc32

        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        with open(temporary, "wb") as handle:
            write_bytecode_with_crc32(handle, fn.ir_module)
        meta = {"function_name": fn.function_name, "kernel_info": dict(fn.kernel_info)}
        path.with_suffix(".meta").write_bytes(pickle.dumps(meta))
        os.replace(temporary, path)
    except Exception:  # a cache write failure only costs a recompile later
        pass


def _load_artifact(path: Path, host: Any, args: list[Any]) -> Any:
    """Rebuild a compiled function from :func:`_store_artifact` output (None when it cannot:
    no file, or no GPU to make an execution engine for)."""
    if not torch.cuda.is_available() or not path.exists():
        return None
    try:
        from cutlass._mlir import ir
        from cutlass.base_dsl.cache_helpers import read_bytecode_and_check_crc32
        from cutlass.cutlass_dsl.cuda_jit_executor import CudaDialectJitCompiledFunction
        from cutlass.cutlass_dsl.cutlass import CuTeDSL

        meta = pickle.loads(path.with_suffix(".meta").read_bytes())
        dsl_object = CuTeDSL._get_dsl()
        with ir.Context():
            with open(path, "rb") as handle:
                module = read_bytecode_and_check_crc32(handle)
            engine = dsl_object.compiler_provider.jit(
                module, shared_libs=dsl_object.get_shared_libs()
            )
            capi = dsl_object._lookup_jit_entry(engine, meta["function_name"])
            fn = CudaDialectJitCompiledFunction(
                module,
                engine,
                capi,
                inspect.signature(host),
                meta["function_name"],
                meta["kernel_info"],
                jit_time_profiling=False,
                jit_function_artifacts=None,
                dynamic_args=tuple(args),
                dynamic_kwargs={},
                has_gpu_module=True,
            )
        fn.execution_args.set_adapter_scope(dsl_object._jit_arg_adapter_scope)
        return fn
    except Exception:
        return None


def target_arch() -> str:
    """The ``--gpu-arch`` to compile for."""
    configured = os.environ.get("HELION_CUTE_ARCH")
    if configured:
        return configured
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    return DEFAULT_ARCH


def _write_module(source: str) -> Path:
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"k_{digest}.py"
    if not path.exists() or path.read_text() != source:
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(source)
        os.replace(temporary, path)
    return path


def _import(path: Path) -> types.ModuleType:
    name = f"helion_cute_generated.{path.stem}"
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None) == str(path):
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compile_generated(generated: Generated, *, aligned: bool) -> Any:
    """``cute.compile`` the host function of a generated module (cached, see module doc)."""
    arch = target_arch()
    key = (generated.source, aligned, arch)
    with _compile_lock:
        fn = _compiled.get(key)
        if fn is not None:
            return fn
        d = dsl()
        module = _import(_write_module(generated.source))
        host = getattr(module, generated.host_name)
        align = ALIGNMENT if aligned else None
        args: list[Any] = []
        for arg in generated.tensor_args:
            element = _pointee(d, arg.dtype)
            args.append(
                d.make_ptr(
                    element,
                    0,
                    d.cute.AddressSpace.gmem,
                    assumed_align=align or max(1, arg.dtype.itemsize),
                )
            )
        for dtype in generated.scalar_dtypes:
            args.append(_dsl_type(d, dtype)(0))
        args.append(d.driver.CUstream(0))
        artifact = _artifact_path(generated.source, aligned, arch)
        fn = _load_artifact(artifact, host, args)
        if fn is not None:
            _compiled[key] = fn
            return fn
        try:
            fn = d.cute.compile(host, *args, options=f"--gpu-arch {arch}")
        except exc.BaseError:
            raise
        except Exception as error:
            raise exc.InternalError(
                f"cute.compile failed for the generated module {module.__file__}: {type(error).__name__}: {error}"
            ) from error
        _store_artifact(artifact, fn)
        _compiled[key] = fn
        return fn


def _dsl_type(d: types.SimpleNamespace, dtype: torch.dtype) -> Any:
    return getattr(d.cutlass, cutlass_type(dtype).removeprefix("cutlass."))


def _pointee(d: types.SimpleNamespace, dtype: torch.dtype) -> Any:
    """The element type of a tensor's pointer (see :func:`memory_type`)."""
    return getattr(d.cutlass, memory_type(dtype).removeprefix("cutlass."))


class CuteCompiledKernel:
    """What :meth:`CuteBackend.compile` returns: the generated source and a launcher.

    The variant that assumes 16-byte aligned tensors is compiled up front; a launch with an
    unaligned tensor compiles (once) and uses a variant without vector or TMA accesses.
    """

    def __init__(self, ir: KernelIR, config: Config) -> None:
        self.ir = ir
        self.config = config
        self.options = CuteOptions.from_config(ir, config)
        self._generated: dict[bool, Generated] = {}
        self._functions: dict[bool, Any] = {}
        generated = self._generate(True)
        self.source = generated.source
        self._functions[True] = compile_generated(generated, aligned=True)
        self._tensor_args = generated.tensor_args
        self._scalar_dtypes = generated.scalar_dtypes

    def _generate(self, aligned: bool) -> Generated:
        generated = self._generated.get(aligned)
        if generated is None:
            generated = generate(self.ir, self.options, repr(self.config), aligned=aligned)
            self._generated[aligned] = generated
        return generated

    def _function(self, aligned: bool) -> Any:
        fn = self._functions.get(aligned)
        if fn is None:
            fn = compile_generated(self._generate(aligned), aligned=aligned)
            self._functions[aligned] = fn
        return fn

    def __call__(self, *host_values: Any) -> None:
        d = dsl()
        tensors = [host_values[arg.index] for arg in self._tensor_args]
        for arg, tensor in zip(self._tensor_args, tensors, strict=False):
            if tensor.device.type != "cuda":
                raise exc.CuteBackendUnavailable(
                    f"launching a CuTe kernel needs a CUDA device, but argument {arg.name!r} is on {tensor.device}",
                    hint="Compiling works without a GPU (BoundKernel.compile_config(config) runs cute.compile); "
                    "run the kernel with CUDA tensors on a machine with an NVIDIA GPU.",
                )
        aligned = all(t.data_ptr() % ALIGNMENT == 0 for t in tensors)
        fn = self._function(aligned)
        args: list[Any] = []
        gmem = d.cute.AddressSpace.gmem
        for arg, tensor in zip(self._tensor_args, tensors, strict=False):
            align = ALIGNMENT if aligned else max(1, arg.dtype.itemsize)
            args.append(
                d.make_ptr(_pointee(d, arg.dtype), tensor.data_ptr(), gmem, assumed_align=align)
            )
        for scalar, dtype in zip(self.ir.scalar_args, self._scalar_dtypes, strict=False):
            args.append(_dsl_type(d, dtype)(host_values[scalar.index]))
        stream = torch.cuda.current_stream(tensors[0].device if tensors else None)
        args.append(d.driver.CUstream(stream.cuda_stream))
        fn(*args)


def launch_cute(cute_fn: Any, grid: Any, *args: Any, stream: Any = None, **kwargs: Any) -> Any:
    """``helion.runtime.default_cute_launcher``: call a CuTe DSL host function as
    `CuteCompiledKernel` calls the generated one: torch tensors as global-memory pointers of
    their dtype (16-byte alignment assumed where the address has it), other arguments as
    given, and the CUDA stream last (`stream`: a torch stream, a ``CUstream``, or None for
    torch's current stream). `grid` is unused: a CuTe host function launches its kernels
    with grids of its own."""
    tensors = [(i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    for position, tensor in tensors:
        if tensor.device.type != "cuda":
            raise exc.CuteBackendUnavailable(
                f"launching a CuTe function needs CUDA tensors, but argument {position} is on "
                f"{tensor.device}",
                hint="CuTe kernels run on NVIDIA GPUs only; move the tensors with .cuda().",
            )
    if not tensors and not torch.cuda.is_available():
        raise exc.CuteBackendUnavailable("launching a CuTe function needs CUDA")
    d = dsl()
    gmem = d.cute.AddressSpace.gmem
    converted: list[Any] = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            aligned = arg.data_ptr() % ALIGNMENT == 0
            align = ALIGNMENT if aligned else max(1, arg.dtype.itemsize)
            arg = d.make_ptr(_pointee(d, arg.dtype), arg.data_ptr(), gmem, assumed_align=align)
        converted.append(arg)
    if stream is None:
        stream = torch.cuda.current_stream(tensors[0][1].device if tensors else None)
    if isinstance(stream, torch.cuda.Stream):
        stream = d.driver.CUstream(stream.cuda_stream)
    return cute_fn(*converted, stream, **kwargs)
