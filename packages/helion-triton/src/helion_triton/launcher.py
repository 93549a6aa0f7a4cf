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
import functools
import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any
from typing import Iterator
from typing import Sequence

import numpy
import torch

from helion import exc
from helion_triton.codegen import GeneratedKernel
from helion_triton.target import TritonTarget

_modules: dict[str, ModuleType] = {}
_modules_lock = threading.Lock()


_private_dir: Path | None = None  # this process's own directory, once the shared one failed


def cache_dir() -> Path:
    """Where generated modules are written: ``$HELION_CACHE_DIR/triton``, else a per-user
    directory in the temp dir. When that directory cannot be used (HELION_CACHE_DIR names a
    file, no permission), a private directory of this process, with one warning: kernels still
    compile, they are only not shared with other processes."""
    if _private_dir is not None:
        return _private_dir
    root = os.environ.get("HELION_CACHE_DIR")
    if root:
        path = Path(root) / "triton"
    else:
        path = (
            Path(tempfile.gettempdir())
            / f"helion-triton-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return _use_private_dir(path, error)
    return path


def _use_private_dir(path: Path, error: OSError) -> Path:
    global _private_dir
    if _private_dir is None:
        import warnings

        _private_dir = Path(tempfile.mkdtemp(prefix="helion-triton-"))
        warnings.warn(
            f"helion-triton: cannot write generated kernels to {path} ({error}); using "
            f"{_private_dir} for this process (check HELION_CACHE_DIR)",
            stacklevel=3,
        )
    return _private_dir


def module_cache_key(source: str, *, interpret: bool) -> str:
    """The key a generated module is loaded under: the first 20 hex digits of its source's
    SHA-256 (which also name its file, ``{kernel}_{digits}.py``) and the launch mode."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    return f"{digest}-{'interpret' if interpret else 'jit'}"


def load_module(source: str, name: str, *, interpret: bool) -> ModuleType:
    """Import ``source`` from a file in the cache directory (once per source and mode)."""
    key = module_cache_key(source, interpret=interpret)
    digest = key.split("-")[0]
    with _modules_lock:
        module = _modules.get(key)
        if module is not None:
            return module
        path = cache_dir() / f"{name}_{digest}.py"
        # compare bytes, not text: a damaged file that does not decode is different, and UTF-8
        # on both sides is what Python's import reads, whatever the locale's encoding
        encoded = source.encode("utf-8")
        try:
            current = path.read_bytes()
        except OSError:
            current = None  # missing or unreadable: write it
        if current != encoded:
            try:
                _write_atomically(path, encoded)
            except OSError as error:  # a directory we may read but not write
                path = _use_private_dir(path.parent, error) / path.name
                _write_atomically(path, encoded)
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


def _write_atomically(path: Path, data: bytes) -> None:
    # written beside and renamed: a process importing the file never sees half of it
    temporary = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


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


# -- kernels written by hand (helion.runtime.default_launcher) -----------------------------------------

_interpreted_jit: dict[int, tuple[Any, Any]] = {}  # id(JIT function) -> (it, its interpreted twin)


def launch_jit(
    triton_kernel: Any,
    grid: Any,
    *args: Any,
    num_warps: int,
    num_stages: int,
    launch_cooperative_grid: bool = False,
    **kwargs: Any,
) -> Any:
    """``triton_kernel[grid](*args, num_warps=..., num_stages=..., **kwargs)``; on CPU tensors
    through the interpreter, as the backend runs its own kernels there (no
    ``TRITON_INTERPRET=1`` needed)."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    options: dict[str, Any] = {"num_warps": num_warps, "num_stages": num_stages, **kwargs}
    if launch_cooperative_grid:
        options["launch_cooperative_grid"] = True
    devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
    devices |= {a.device.type for a in kwargs.values() if isinstance(a, torch.Tensor)}
    if "cpu" not in devices:
        return triton_kernel[grid](*args, **options)
    if isinstance(triton_kernel, JITFunction):
        triton_kernel = interpreted_twin(triton_kernel)
    elif not isinstance(triton_kernel, InterpretedFunction):
        raise exc.InvalidAPIUsage(
            f"helion.runtime.default_launcher launches @triton.jit functions, got "
            f"{type(triton_kernel).__name__}"
        )
    if language_is_interpreted():
        return triton_kernel[grid](*args, **options)
    with interpreted_language(), numpy.errstate(all="ignore"):
        return triton_kernel[grid](*args, **options)


def interpreted_twin(jit_function: Any) -> Any:
    """An interpreted copy of a user's ``@triton.jit`` function whose own ``@triton.jit``
    callees (found through its globals, transitively) are interpreted too: what
    ``TRITON_INTERPRET=1`` at import would have made of them. The copies read a copy of the
    function's globals, so the user's module is left as it is; ``triton.language``'s functions
    are swapped by `interpreted_language` while a kernel runs."""
    import types

    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    with _modules_lock:
        known = _interpreted_jit.get(id(jit_function))
        if known is not None and known[0] is jit_function:
            return known[1]
        fn = jit_function.fn
        scope = dict(fn.__globals__)
        twin_fn = types.FunctionType(
            fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__
        )
        twin_fn.__qualname__, twin_fn.__module__ = fn.__qualname__, fn.__module__
        twin = InterpretedFunction(twin_fn)
        _interpreted_jit[id(jit_function)] = (jit_function, twin)  # before the callees: cycles
    for name, value in fn.__globals__.items():
        if isinstance(value, JITFunction) and not (
            getattr(value.fn, "__module__", "") or ""
        ).startswith("triton."):
            scope[name] = interpreted_twin(value)
    return twin


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


# -- direct launches ---------------------------------------------------------------------------------
#
# ``JITFunction.run`` binds and specializes every argument, hashes the options and looks the
# kernel up on each call: about 6 us of host time on an H200 machine for a tiny kernel. A
# generated launcher always passes the same constexprs and options to its kernel, so after the
# first launch of a specialization the compiled kernel can be launched directly. The key below
# covers what Triton specializes on: tensor dtypes and 16-byte alignment, int widths and the
# divisible-by-16 / equal-to-1 cases (the kernel's runtime scalars are not specialized at all).

_I32 = (-(2**31), 2**31)


def _launch_key_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return (value.dtype, value.data_ptr() & 15 == 0)
    if isinstance(value, bool):
        return bool
    if isinstance(value, int):
        return (_I32[0] <= value < _I32[1], value % 16 == 0, value == 1)
    if isinstance(value, float):
        return float
    if value is None:
        return None
    return _NOT_DIRECT


_NOT_DIRECT = object()  # an argument the direct path does not know how to key: always bind
_UNSET = object()  # a keyword the call did not pass
_GRID_LAUNCHERS = 64  # distinct grids kept per kernel (a grid that varies with the sizes)


def _hook_active(hook: Any) -> bool:
    # Triton >= 3.7 keeps an always-present HookChain; an empty one calls nothing
    return hook is not None and bool(getattr(hook, "calls", True))


def _hook_state(hook: Any) -> tuple[Any, Any]:
    """(hook, what is falsy exactly while it calls nothing): a hook chain's list of calls (it
    changes in place as hooks are added), ``None`` for no hook, and a true value for a plain
    callable (always active)."""
    if hook is None:
        return None, None
    calls = getattr(hook, "calls", None)
    return hook, calls if isinstance(calls, list) else (True,)


def _call_below_wrapper(run: Any, metadata: Any) -> tuple[Any, tuple]:
    """(call, head): ``call(gx, gy, gz, stream, function, *head, *kernel_args)`` launches as
    ``run(gx, gy, gz, stream, function, metadata, None, None, None, *kernel_args)`` does with no
    profiler hooks. On Triton 3.6 (the version on the H200 machine, where it was checked) a
    kernel that needs no scratch memory is launched by the compiled C launcher itself: its
    Python wrapper only allocates scratch memory, and costs about a microsecond per call."""
    plain = (run, (metadata, None, None, None))
    from helion_triton.target import triton_version

    if not triton_version().startswith("3.6.") or type(run).__name__ != "CudaLauncher":
        return plain
    try:
        parameters = list(inspect.signature(type(run).__call__).parameters)
        needs_scratch = run.global_scratch_size > 0 or run.profile_scratch_size > 0
        flags = (run.launch_cooperative_grid, run.launch_pdl)
        launch = run.launch
    except (AttributeError, TypeError, ValueError):
        return plain
    if needs_scratch or parameters != [
        "self",
        "gridX",
        "gridY",
        "gridZ",
        "stream",
        "function",
        "args",
    ]:
        return plain
    # Triton 3.6: launch(gx, gy, gz, stream, function, cooperative, pdl, global_scratch,
    # profile_scratch, packed_metadata, launch_metadata, enter_hook, exit_hook, *kernel_args)
    return launch, (*flags, None, None, metadata, None, None, None)


def _argument_kind(value: Any) -> str:
    """What the generated launchers need to know of an argument of the first direct launch (a
    name, so that no tensor of that launch is kept alive by the launcher)."""
    if isinstance(value, torch.Tensor):
        return "cuda tensor" if value.is_cuda else "tensor"
    if value is None:
        return "None"
    kind = type(value)
    return kind.__name__ if kind in (int, bool, float) else "other"


def _key_source(kind: str, name: str) -> tuple[str, str, str] | None:
    """(type test, key expression, what the launcher is passed) for arguments of this kind (an
    `_argument_kind`): the key is `_launch_key_of`'s. A CUDA tensor is passed as its address,
    read once for the key's alignment test too: given the tensor, Triton's launcher would call
    its ``data_ptr`` again and ask the driver whether the address is device memory
    (``cuPointerGetAttribute``), which ``is_cuda`` answers here. Tensors elsewhere take the
    general path, whose launch reports a CPU tensor as Triton does."""
    if kind == "cuda tensor":
        return (
            f"isinstance({name}, _Tensor) and {name}.is_cuda",
            f"({name}.dtype, __p_{name} & 15 == 0)",
            f"__p_{name}",
        )
    if kind == "tensor":
        return f"isinstance({name}, _Tensor)", f"({name}.dtype, {name}.data_ptr() & 15 == 0)", name
    if kind == "int":
        key = f"(_I32_LOW <= {name} < _I32_HIGH, {name} % 16 == 0, {name} == 1)"
        return f"type({name}) is _int", key, name
    if kind in ("bool", "float"):
        return f"type({name}) is _{kind}", f"_{kind}", name
    if kind == "None":
        return f"{name} is None", "None", name
    return None


class DirectLaunch:
    """Stands in for a generated module's ``@triton.jit`` kernel: ``kernel[grid](*args, **kw)``
    binds through Triton the first time per specialization, then launches the compiled kernel.

    Once a direct launch has worked, ``kernel[grid]`` returns a launcher generated for that
    grid and for the kinds of arguments the module's launcher passes (one Python function: the
    type tests, the key, the lookup, the profiler-hook test and the launch), so a warm launch
    costs one call above Triton's compiled launcher. Anything else takes `launch`."""

    def __init__(self, jit_function: Any, *, driver: Any = None, runtime_knobs: Any = None) -> None:
        import triton

        self.jit_function = jit_function
        self.fn = jit_function.fn
        # launch key -> (compiled launcher, function handle, packed metadata, constexpr tail,
        #                the grid launchers' call and the arguments it takes before the kernel's)
        self._entries: dict[Any, tuple] = {}
        self._grid_launchers: dict[tuple, Any] = {}
        # (`_argument_kind`s, keyword names) of the first direct launch; None before it
        self._signature: tuple[tuple, tuple[str, ...]] | None = None
        # the launch key of that launch (device, dtypes, alignments, int classes: no tensor)
        self._first_key: tuple | None = None
        self._lock = threading.Lock()
        driver = driver or triton.runtime.driver.active
        self._current_device = driver.get_current_device
        if self._current_device is torch.cuda.current_device:
            # the same answer without its Python frame and lazy-init check (done by then)
            self._current_device = torch._C._cuda_getDevice
        self._current_stream = driver.get_current_stream
        if runtime_knobs is None:
            runtime_knobs = getattr(getattr(triton, "knobs", None), "runtime", None)
        self._runtime_knobs = runtime_knobs
        # Triton versions without the knobs module launch through the JIT function only
        self.enabled = runtime_knobs is not None

    def __getitem__(self, grid: Any) -> Any:
        launcher = self._grid_launchers.get(grid)
        if launcher is not None:
            return launcher
        if self._signature is not None and self.enabled:
            launcher = self._build_grid_launcher(grid)
            if launcher is not None:
                return launcher
        return functools.partial(self.launch, grid)

    def launch(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        device = self._current_device()
        key = (device, *map(_launch_key_of, args))
        entry = self._entries.get(key)
        knobs = self._runtime_knobs
        enter, leave = (knobs.launch_enter_hook, knobs.launch_exit_hook) if entry else (None, None)
        if entry is None or _hook_active(enter) or _hook_active(leave):
            # first launch of this specialization, or a profiler hook wants the launch metadata
            return self._bind_and_launch(key, grid, args, kwargs)
        run, function, metadata, tail = entry[:4]
        size = len(grid)
        try:
            run(
                grid[0],
                grid[1] if size > 1 else 1,
                grid[2] if size > 2 else 1,
                self._current_stream(device),
                function,
                metadata,
                None,
                enter,
                leave,
                *args,
                *tail,
            )
        except TypeError:
            # the compiled launcher takes other arguments in this Triton version: bind instead
            self._disable()
            return self.jit_function[grid](*args, **kwargs)
        if self._signature is None:
            with self._lock:
                self._signature = (tuple(map(_argument_kind, args)), tuple(kwargs))
                self._first_key = key
        return None

    def _disable(self) -> None:
        self.enabled = False
        self._entries.clear()
        self._grid_launchers.clear()

    def _bind_and_launch(self, key: Any, grid: Any, args: tuple, kwargs: dict) -> Any:
        kernel = self.jit_function[grid](*args, **kwargs)
        if not self.enabled or kernel is None or _NOT_DIRECT in key[1:]:
            return kernel
        names = list(getattr(self.jit_function, "arg_names", ()))
        try:
            tail = tuple(kwargs[name] for name in names[len(args) :])
            call, head = _call_below_wrapper(kernel.run, kernel.packed_metadata)
            entry = (kernel.run, kernel.function, kernel.packed_metadata, tail, call, head)
        except (KeyError, AttributeError):
            self._disable()  # a parameter left to its default, or another CompiledKernel
            return kernel
        self._entries[key] = entry
        return kernel

    def _build_grid_launcher(self, grid: Any) -> Any:
        """The launcher of ``grid`` for arguments of the first direct launch's kinds (None when
        the grid or an argument is of a kind it does not handle)."""
        if (
            not isinstance(grid, tuple)
            or not 1 <= len(grid) <= 3
            or any(type(g) is not int for g in grid)
        ):
            return None
        if len(self._grid_launchers) >= _GRID_LAUNCHERS:
            return None
        example, keywords = self._signature
        names = [f"a{i}" for i in range(len(example))]
        if any(not k.isidentifier() for k in keywords):
            return None
        params = ", ".join(names)
        keyword_params = ", ".join(f"{k}=_UNSET" for k in keywords)
        signature = ", ".join(p for p in (params, f"*, {keyword_params}" if keywords else "") if p)
        keyword_dict = "{" + ", ".join(f"{k!r}: {k}" for k in keywords) + "}"
        fallback = (
            f"return _general(_grid, ({params}{',' if len(names) == 1 else ''}), {keyword_dict})"
        )
        body = self._launch_body(names, ", ".join(str(g) for g in (*grid, 1, 1)[:3]), fallback)
        if body is None:
            return None
        source, scope = body
        scope.update({"_UNSET": _UNSET, "_grid": grid, "_general": self._general})
        source = f"def launch({signature}):\n{source}"
        exec(compile(source, f"<helion direct launch of {self.fn.__name__}>", "exec"), scope)
        launcher = scope["launch"]
        with self._lock:
            return self._grid_launchers.setdefault(grid, launcher)

    def build_fused_launcher(self, plan: Any, module_launcher: Any, module_scope: dict) -> Any:
        """The generated module's launcher and this kernel's grid launcher in one function (the
        module launcher's signature): the grid computed as `plan` says, then the launch as a
        grid launcher does it; anything else calls ``module_launcher``. None before the first
        direct launch, or when an argument is of a kind a grid launcher does not handle."""
        if self._signature is None or not self.enabled:
            return None
        if len(self._signature[0]) != len(plan.args) or not 1 <= plan.rank <= 3:
            return None
        params = ", ".join([*plan.params, "*_rest"])
        prelude = "".join(f"    {line}\n" for line in plan.prelude)
        if plan.static_grid is not None:
            grid_lines = prelude
            dims = ", ".join(str(g) for g in (*plan.static_grid, 1, 1)[:3])
        else:  # an empty grid launches nothing, as in the module launcher
            grid_lines = f"{prelude}    __grid = {plan.grid}\n    if min(__grid) <= 0:\n        return None\n"
            dims = ", ".join([*(f"__grid[{i}]" for i in range(plan.rank)), "1", "1"][:3])
        body = self._launch_body(plan.args, dims, f"return _module_launcher({params})")
        if body is None:
            return None
        source, scope = body
        scope = {**module_scope, **scope, "_module_launcher": module_launcher}
        source = f"def launch({params}):\n{grid_lines}{source}"
        exec(compile(source, f"<helion fused launch of {self.fn.__name__}>", "exec"), scope)
        return scope["launch"]

    def _launch_body(
        self, names: Sequence[str], dims: str, fallback: str
    ) -> tuple[str, dict] | None:
        """The body of a grid or fused launcher and its scope: for arguments ``names`` of the
        first direct launch's kinds, the launch of their entry over ``dims``; else ``fallback``.
        Its own names start with ``__`` (the parameters are named after the kernel's)."""
        example, _keywords = self._signature
        parts = [_key_source(value, name) for value, name in zip(example, names, strict=True)]
        if any(part is None for part in parts):
            return None
        tests = " and ".join(test for test, _, _ in parts) or "True"
        key = ", ".join(["__d", *(expression for _, expression, _ in parts)])
        passed = "".join(f"{value}, " for _, _, value in parts)
        pointers = "".join(
            f"\n        __p_{name} = {name}.data_ptr()"
            for (_, _, value), name in zip(parts, names, strict=True)
            if value == f"__p_{name}"
        )
        hooks = (
            "(_knobs.launch_enter_hook is not None and _hook_active(_knobs.launch_enter_hook))"
            " or (_knobs.launch_exit_hook is not None and _hook_active(_knobs.launch_exit_hook))"
        )
        # the hooks as they are now, tested without a call (on Triton 3.6, calling _hook_active
        # on its two always-present hook chains cost 0.15 us a launch); the general test above
        # answers once a hook object is replaced
        enter, enter_calls = _hook_state(getattr(self._runtime_knobs, "launch_enter_hook", None))
        leave, leave_calls = _hook_state(getattr(self._runtime_knobs, "launch_exit_hook", None))
        idle = (
            "(_knobs.launch_enter_hook is __enter and not __enter_calls"
            " and _knobs.launch_exit_hook is __leave and not __leave_calls)"
        )
        primary, primary_scope = self._primary_branch(parts, names, dims, passed, idle)
        source = f"""    if {tests}:{pointers}
        __d = _device(){primary}
        __entry = _entries.get(({key},))
        if __entry is not None and ({idle} or not ({hooks})):
            try:
                return __entry[4]({dims}, _stream(__d), __entry[1], *__entry[5], {passed}*__entry[3])
            except TypeError:
                _disable()  # as `launch` does: this Triton's launcher takes other arguments
    {fallback}
"""
        scope = {
            "_Tensor": torch.Tensor,
            "_int": int,
            "_bool": bool,
            "_float": float,
            "_I32_LOW": _I32[0],
            "_I32_HIGH": _I32[1],
            "_device": self._current_device,
            "_stream": self._current_stream,
            "_entries": self._entries,
            "_knobs": self._runtime_knobs,
            "_hook_active": _hook_active,
            "_disable": self._disable,
            "__enter": enter,
            "__enter_calls": enter_calls,
            "__leave": leave,
            "__leave_calls": leave_calls,
            **primary_scope,
        }
        return source, scope

    def _primary_branch(
        self, parts: list, names: Sequence[str], dims: str, passed: str, idle: str
    ) -> tuple[str, dict]:
        """The launch of the first direct launch's entry with everything that entry holds
        inlined: taken when the current device, the alignment of every address and the class
        of every int match that launch's key. It skips the key tuple, the lookup and the
        unpacking of the entry (0.56 us of the 1.27 us a fused launcher took in a CPU stand-in).
        Dtypes are tested too: variants of other dtypes whose generated source is the same
        (``x * x`` in float32, float16 and int32) share one module and so this launcher, and
        its binary must not run on another dtype's tensors. Returns ('', {}) when that launch
        had an unaligned address or its entry is gone."""
        first = self._first_key
        entry = self._entries.get(first) if first is not None else None
        if entry is None or len(first) != len(parts) + 1 or type(first[0]) is not int:
            return "", {}
        _run, function, _metadata, tail, call, head = entry
        tests = ["_entries", f"__d == {int(first[0])}"]
        addresses = []
        scope: dict[str, Any] = {"__c_launch": call, "__c_function": function}
        for position, ((_test, expression, value), name, key) in enumerate(
            zip(parts, names, first[1:], strict=True)
        ):
            if value == f"__p_{name}":  # a CUDA tensor, passed as its address
                if not key[1]:
                    return "", {}  # an unaligned first launch: leave it to the lookup
                addresses.append(value)
                scope[f"__t_{position}"] = key[0]
                tests.append(f"{name}.dtype is __t_{position}")
            elif isinstance(key, tuple):  # an int: its class, the key's own expression
                scope[f"__k_{position}"] = key
                tests.append(f"{expression} == __k_{position}")
            elif not (key is None or key in (bool, float)):
                return "", {}  # a kind this branch does not know
        if addresses:
            tests.append(f"not (({' | '.join(addresses)}) & 15)")
        constants = []
        for index, value in enumerate((*head, *tail)):
            scope[f"__c_{index}"] = value
            constants.append(f"__c_{index}")
        head_names = "".join(f"{n}, " for n in constants[: len(head)])
        tail_names = ", ".join(constants[len(head) :])
        source = f"""
        if {" and ".join(tests)} and {idle}:
            try:
                return __c_launch({dims}, _stream(__d), __c_function, {head_names}{passed}{tail_names})
            except TypeError:
                _disable()  # as below"""
        return source, scope

    def _general(self, grid: tuple, args: tuple, keywords: dict) -> Any:
        """A grid launcher's call it does not handle: through `launch`."""
        return self.launch(grid, *args, **{k: v for k, v in keywords.items() if v is not _UNSET})


def use_direct_launch(module: ModuleType, kernel_name: str) -> None:
    """Route the launcher's calls of ``kernel_name`` through a `DirectLaunch` (once per module).

    Only the launched kernel is replaced: device functions it calls stay JIT functions, which is
    what Triton's compiler looks up in the module's globals."""
    with _modules_lock:
        current = getattr(module, kernel_name)
        if not isinstance(current, DirectLaunch):
            setattr(module, kernel_name, DirectLaunch(current))


class TritonCompiledKernel:
    """What ``TritonBackend.compile`` returns: the readable source and its launcher."""

    def __init__(self, generated: GeneratedKernel, target: TritonTarget, name: str) -> None:
        self.source = generated.source
        self.generated = generated
        self.target = target
        self.module = load_module(generated.source, name, interpret=target.interpret)
        self._direct: DirectLaunch | None = None
        if not target.interpret and target.is_cuda:
            use_direct_launch(self.module, generated.kernel_name)
            kernel = getattr(self.module, generated.kernel_name)
            # a DirectLaunch unless something (a tool recording launches) kept the JIT function
            self._direct = kernel if isinstance(kernel, DirectLaunch) else None
        self.launcher = self.module_launcher = getattr(self.module, generated.launcher_name)
        # once the kernel has launched directly, `launcher` becomes the fused launcher
        self._fuse = self._direct is not None and generated.launch_plan is not None
        self.fast_call: Any = None  # the fused launcher, for the runtime to call directly
        # with TRITON_INTERPRET=1 set before triton was imported, triton.language is already
        # interpreted; otherwise its JIT functions are swapped while the kernel runs
        self._swap = target.interpret and not language_is_interpreted()
        if generated.uses_tensor_descriptors and target.is_cuda:
            _ensure_allocator()

    def __call__(self, *host_values: Any) -> None:
        if self._swap:
            # padded lanes may divide by zero: GPUs do not complain, and neither should numpy
            with interpreted_language(), numpy.errstate(all="ignore"):
                self._launch_explained(self.launcher, host_values)
        else:
            self._launch_explained(self.launcher, host_values)
        if self._fuse and self._direct._signature is not None:
            self._fuse = False
            fused = self._direct.build_fused_launcher(
                self.generated.launch_plan, self._module_launcher, vars(self.module)
            )
            if fused is not None:
                self.launcher = self.fast_call = fused

    def _module_launcher(self, *host_values: Any) -> None:
        """The fused launcher's way for what it does not launch itself (a new specialization may
        compile, and fail to): the generated launcher, its errors explained as in `__call__`."""
        self._launch_explained(self.module_launcher, host_values)

    def _launch_explained(self, launcher: Any, host_values: tuple) -> None:
        try:
            launcher(*host_values)
        except exc.BaseError:
            raise
        except Exception as error:
            if _is_triton_error(error):
                raise exc.TritonError(self.source, f"{type(error).__name__}: {error}") from error
            raise


def _is_triton_error(error: BaseException) -> bool:
    module = type(error).__module__ or ""
    return module.startswith("triton.")
