"""Load generated modules and launch their kernels, compiled or through the Triton interpreter.

``triton.jit`` reads a kernel's source from its file, so each generated module is written to a
cache directory (named by the hash of its source) and imported from there; a module is loaded
once per process and shared by every kernel with the same source, so Triton's own compile cache
(per JIT function) is reused too.

Kernels on CPU tensors run through the interpreter without ``TRITON_INTERPRET=1``: the module's
JIT functions are wrapped as interpreted functions, and while such a kernel runs the JIT
functions of ``triton.language`` it calls (``tl.sum``, ``tl.cdiv``, ...) are swapped for
interpreted twins, which is what the environment variable would have done at import time.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any
from typing import Iterator

import numpy

from helion import exc
from helion_triton.codegen import GeneratedKernel
from helion_triton.target import TritonTarget

_modules: dict[str, ModuleType] = {}
_modules_lock = threading.Lock()


def cache_dir() -> Path:
    root = os.environ.get("HELION_CACHE_DIR")
    if root:
        path = Path(root) / "triton"
    else:
        path = (
            Path(tempfile.gettempdir())
            / f"helion-triton-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_module(source: str, name: str, *, interpret: bool) -> ModuleType:
    """Import ``source`` from a file in the cache directory (once per source and mode)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    key = f"{digest}-{'interpret' if interpret else 'jit'}"
    with _modules_lock:
        module = _modules.get(key)
        if module is not None:
            return module
        path = cache_dir() / f"{name}_{digest}.py"
        if not path.exists() or path.read_text() != source:
            temporary = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            temporary.write_text(source)
            os.replace(temporary, path)
        module_name = f"helion_triton_generated.{name}_{key.replace('-', '_')}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        if interpret:
            _interpret_module(module)
        _modules[key] = module
        return module


def _interpret_module(module: ModuleType) -> None:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    for name, value in list(vars(module).items()):
        if (
            isinstance(value, JITFunction)
            and getattr(value.fn, "__module__", None) == module.__name__
        ):
            setattr(module, name, InterpretedFunction(value.fn))


# -- triton.language under the interpreter ------------------------------------------------------------


def language_is_interpreted() -> bool:
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.standard.sum, InterpretedFunction)


_swap_lock = threading.RLock()
_swap_depth = 0
_patched_once = False
_twins: dict[int, Any] = {}


def _language_functions() -> list[tuple[ModuleType, str, Any]]:
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    found = []
    # tl.random's functions call each other through their own module (tl.rand -> randint -> philox)
    for module in (tl, tl.standard, tl.random):
        for name, value in list(vars(module).items()):
            if isinstance(value, JITFunction):
                found.append((module, name, value))
    return found


class _InterpretedTwin:
    """A JIT function of ``triton.language`` run by the interpreter as a device function.

    The interpreter's own wrapper re-patches ``triton.language`` at every call; the swap below
    patches it once per launch instead, so the twin only runs the rewritten function.
    """

    def __init__(self, function: Any) -> None:
        from triton.runtime.interpreter import InterpretedFunction

        self.fn = function.fn
        self._interpreted = InterpretedFunction(function.fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _patched_once:
            return self._interpreted.rewrite()(*args, **kwargs)
        return self._interpreted(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._interpreted, name)


@contextlib.contextmanager
def interpreted_language() -> Iterator[None]:
    """Swap ``triton.language``'s JIT functions for interpreted ones while the block runs."""
    global _swap_depth, _patched_once
    import triton.language as tl
    from triton.runtime import interpreter

    with _swap_lock:
        _swap_depth += 1
        swapped = []
        scope = None
        if _swap_depth == 1:
            _import_lazy_triton_modules()
            for module, name, function in _language_functions():
                twin = _twins.get(id(function))
                if twin is None:
                    twin = _twins[id(function)] = _InterpretedTwin(function)
                setattr(module, name, twin)
                swapped.append((module, name, function))
            # the builtins the library functions reach through `core.` and `math.`
            patch = getattr(interpreter, "_patch_lang", None)
            scope = patch(tl.standard.sum.fn) if patch is not None else None
            _patched_once = scope is not None
        try:
            yield
        finally:
            if scope is not None:
                scope.restore()
                _patched_once = False
            for module, name, function in swapped:
                setattr(module, name, function)
            _swap_depth -= 1


_lazy_imported = False


def _import_lazy_triton_modules() -> None:
    # Modules that wrap triton.language's JIT functions at import time must be imported before
    # the swap, or they would capture the interpreted twins.
    global _lazy_imported
    if _lazy_imported:
        return
    _lazy_imported = True
    with contextlib.suppress(Exception):
        import triton.experimental.gluon  # noqa: F401


# -- compiled kernels -----------------------------------------------------------------------------------

_allocator_set = False


def _ensure_allocator() -> None:
    """Tensor descriptors built in a kernel need scratch memory from a Triton allocator."""
    global _allocator_set
    if _allocator_set:
        return
    import torch
    import triton

    def allocate(size: int, alignment: int, stream: Any) -> Any:
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(allocate)
    _allocator_set = True


class TritonCompiledKernel:
    """What ``TritonBackend.compile`` returns: the readable source and its launcher."""

    def __init__(self, generated: GeneratedKernel, target: TritonTarget, name: str) -> None:
        self.source = generated.source
        self.generated = generated
        self.target = target
        self.module = load_module(generated.source, name, interpret=target.interpret)
        self.launcher = getattr(self.module, generated.launcher_name)
        # with TRITON_INTERPRET=1 set before triton was imported, triton.language is already
        # interpreted; otherwise its JIT functions are swapped while the kernel runs
        self._swap = target.interpret and not language_is_interpreted()
        if generated.uses_tensor_descriptors and target.is_cuda:
            _ensure_allocator()

    def __call__(self, *host_values: Any) -> None:
        try:
            if self._swap:
                # padded lanes may divide by zero: GPUs do not complain, and neither should numpy
                with interpreted_language(), numpy.errstate(all="ignore"):
                    self.launcher(*host_values)
            else:
                self.launcher(*host_values)
        except exc.BaseError:
            raise
        except Exception as error:
            if _is_triton_error(error):
                raise exc.TritonError(self.source, f"{type(error).__name__}: {error}") from error
            raise


def _is_triton_error(error: BaseException) -> bool:
    module = type(error).__module__ or ""
    return module.startswith("triton.")
