"""`Kernel` (what `@helion.kernel` returns) and `BoundKernel` (a kernel bound to one
specialization key): config resolution, tracing, compilation and the call path."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
import re
import sys
import threading
import types
import weakref
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import Hashable
from typing import Iterator
from typing import Sequence

import torch

from helion import exc
from helion.containers import container_structure
from helion.containers import describe_structure
from helion.containers import find_device
from helion.containers import iter_tensors
from helion.frontend import ast_rewrite
from helion.frontend.inline_code import watched_names
from helion.frontend.proxies import BlockSizeInt
from helion.ir.core import BlockSizeInfo
from helion.ir.core import KernelIR
from helion.language import ConstExpr
from helion.language import ProcessGroupName
from helion.language._context import _state as _context_state
from helion.language._context import active_mode
from helion.language.philox import draw_call_seed
from helion.runtime import torch_integration
from helion.runtime.config import Config
from helion.runtime.settings import RefMode
from helion.runtime.settings import Settings
from helion.runtime.tensor_match import exact_tensor_match
from helion.runtime.tensor_match import other_inference_mode_match

if TYPE_CHECKING:
    from helion.runtime.compile_environment import CompileEnvironment
    from helion.runtime.output_code import OutputCodeOptions

_is_compiling = torch.compiler.is_compiling
_EAGER = RefMode.EAGER  # a module global: read faster than the enum's attribute on the warm path
_inference_mode = torch.is_inference_mode_enabled

# default of a block size registered in host code, before a config picks one
REGISTERED_BLOCK_DEFAULT = 64


class Kernel:
    """A Helion kernel: a Python function whose `hl.tile` loops run on the device."""

    def __init__(
        self,
        fn: Callable,
        *,
        configs: Sequence[Config | dict] | None = None,
        settings: Settings | None = None,
        key: Callable[..., Hashable] | None = None,
    ) -> None:
        if isinstance(fn, Kernel):
            fn = fn.fn
        if (
            inspect.isgeneratorfunction(fn)
            or inspect.iscoroutinefunction(fn)
            or inspect.isasyncgenfunction(fn)
        ):
            # its call would only make a generator (tracing then fails far from the cause)
            construct, loc = ast_rewrite.generator_construct(fn)
            kind = "generator function" if construct.startswith("yield") else "coroutine function"
            raise exc.GeneratorKernel(fn.__name__, construct, kind, loc=loc)
        _check_kernel_function(fn)
        self.fn = fn
        self.name = fn.__name__
        self.settings = settings or Settings()
        self.configs = configs  # checked by the property
        if key is not None and not callable(key):
            raise exc.InvalidAPIUsage(
                "helion.kernel(key=...) takes a function of the kernel's arguments that returns "
                f"a hashable value; got {_describe_value(key)}",
                hint="e.g. key=lambda x, y: x.size(0) % 64 == 0",
            )
        self.key_fn = key
        self.signature = inspect.signature(fn)
        for param in self.signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.KEYWORD_ONLY):
                raise TypeError(
                    f"Helion kernel {self.name!r} may not take *args, **kwargs or keyword-only arguments"
                )
        self._constexpr_params = {
            name
            for name, p in self.signature.parameters.items()
            if _is_constexpr_annotation(p.annotation, fn)
        }
        self._bound: dict[Hashable, BoundKernel] = {}
        self._arity = len(self.signature.parameters)
        # static_shapes -> a key function specialized to the argument types first seen
        self._fast_keys: dict[bool, Callable[[tuple], Hashable | None]] = {}
        # the warm call of the bound kernel last called through the key (`_compile_warm_call`)
        self._warm: Callable[[tuple, Any], Any] | None = None
        self._split: ast_rewrite.SplitKernel | None = None
        self._lock = threading.RLock()
        functools.update_wrapper(self, fn)
        # as public Helion's Kernel: tools that introspect a kernel like a function read these
        self.__code__ = fn.__code__
        self.__globals__ = fn.__globals__
        self.__defaults__ = fn.__defaults__
        # PyTorch integration (helion.runtime.torch_integration): one custom op per call
        # signature, the registered backward, and the name Dynamo sees
        self._torch_ops: dict[Hashable, Any] = {}
        self._autograd: tuple[Callable[..., Any], Callable[..., Any] | None] | None = None
        self._torch_token = torch_integration.track_kernel(self)

    # -- source ---------------------------------------------------------------------------------

    @property
    def split(self) -> ast_rewrite.SplitKernel:
        if self._split is None:
            self._split = ast_rewrite.split_kernel(self.fn)
        return self._split

    def kernel_source(self) -> str:
        return "".join(self.split.source.lines)

    @property
    def configs(self) -> list[Config]:
        """The configs given to the kernel (`config=` / `configs=`); assignable, checked when
        assigned as when the kernel is made, and then used by every later call (the bound
        kernels are dropped)."""
        return self._configs

    @configs.setter
    def configs(self, configs: Any) -> None:
        self._configs = _kernel_configs(configs)
        if getattr(self, "_bound", None):
            self.reset()  # the bound kernels picked their configs from the old list

    # -- binding --------------------------------------------------------------------------------

    def normalize_args(self, *args: Any, **kwargs: Any) -> tuple:
        if not kwargs and len(args) == len(self.signature.parameters):
            return args
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            # inspect reports a missing argument before an unknown keyword: say both, as the
            # unknown one (a misspelt name) is often why the other is missing
            message = str(error)
            unknown = [name for name in kwargs if name not in self.signature.parameters]
            if unknown and "unexpected keyword" not in message:
                names = ", ".join(repr(name) for name in unknown)
                plural = "s" if len(unknown) > 1 else ""
                message = f"got an unexpected keyword argument{plural} {names}; {message}"
            raise TypeError(f"{self.name}(): {message}") from None
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    def specialization_key(self, args: Sequence[Any]) -> Hashable:
        static = self.settings.static_shapes
        if self.key_fn is None and not self._constexpr_params:
            return tuple([_arg_key(arg, static) for arg in args])
        parts: list[Hashable] = []
        # `bind` takes the arguments as given: parameters left to their defaults are not in `args`
        for name, arg in zip(self.signature.parameters, args, strict=False):
            if name in self._constexpr_params:
                parts.append(("constexpr", _hashable(arg)))
            else:
                parts.append(_arg_key(arg, static))
        if self.key_fn is not None:
            user = self.key_fn(*args)
            try:
                hash(user)
            except TypeError:
                raise exc.InvalidAPIUsage(
                    f"the key function of kernel {self.name!r} returned {_describe_value(user)}, "
                    "which is not hashable",
                    hint="Return a hashable value: a tuple instead of a list, a number, a string.",
                ) from None
            parts.append(("user", user))
        return tuple(parts)

    def _argument_tuple(self, method: str, args: Any) -> tuple:
        """``args`` of `bind` / `autotune`: all the kernel's arguments in one tuple or list (a
        bare tensor would give its rows as the arguments)."""
        if not isinstance(args, (tuple, list)):
            names = ", ".join(self.signature.parameters)
            example = f"({names},)" if self._arity == 1 else f"({names})"
            raise TypeError(
                f"{self.name}.{method}() takes the kernel's arguments as one tuple or list, "
                f"e.g. {self.name}.{method}({example}), not a {type(args).__name__}"
            )
        return tuple(args)

    def bind(self, args: Sequence[Any]) -> BoundKernel:
        args = self._argument_tuple("bind", args)
        if len(args) > len(self.signature.parameters):
            raise TypeError(
                f"{self.name}() takes {len(self.signature.parameters)} arguments but {len(args)} were given"
            )
        key = self.specialization_key(args)
        bound = self._bound.get(key)
        if bound is None:
            with self._lock:
                bound = self._bound.get(key)
                if bound is None:
                    bound = BoundKernel(self, args)
                    self._bound[key] = bound
                    return bound
        bound._trace_args.refresh(args)
        return bound

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # the warm path of every call: keep it to attribute reads and one dict lookup
        if _is_compiling():
            # under torch.compile the kernel is one custom op of the graph (no graph break)
            return torch_integration.call_compiling(self, args, kwargs)
        if kwargs or len(args) != self._arity:
            args = self.normalize_args(*args, **kwargs)
        settings = self.settings
        warm = self._warm
        if warm is not None:
            result = warm(args, settings)
            if result is not _MISS:
                return result
        fast = self._fast_keys.get(settings.static_shapes)
        try:
            # None: arguments of other types than the first call's, or a call for the custom op
            key = fast(args) if fast is not None else self._first_fast_key(args)
        except RuntimeError:
            # a tensor without strides (sparse, nested, mkldnn): `_arg_key` says what it is
            return self._call_general(args, None)
        except TypeError:
            # an argument no key takes (`_arg_key` says which), or a device value: a call from
            # device code, which `_call_general` refuses
            return self._call_general(args, None)
        if key is not None and settings.ref_mode is not _EAGER:
            bound = self._bound.get(key)
            if bound is not None and bound._active_keyed is not None:
                self._warm = bound.warm_call(args, settings.static_shapes)
                return bound._active_keyed(args)
        return self._call_general(args, key)

    def _call_general(self, args: tuple, key: Hashable | None) -> Any:
        """`__call__` past the warm path: the custom op, eager mode, a first call, new types."""
        self._refuse_device_code_call()
        if torch_integration.needs_custom_op(args):
            # autograd must record the call, or a dispatch mode (fake tensors, make_fx) is on
            return torch_integration.call_custom_op(self, args)
        if self.settings.ref_mode == RefMode.EAGER:
            from helion.eager import run_eager

            return run_eager(self, args)
        bound = self._bound.get(key) if key is not None else None
        if bound is None:
            bound = self.bind(args)
        return bound._call_keyed(args)

    def _first_fast_key(self, args: tuple) -> Hashable | None:
        """Build the key function for the argument types of this call (see `_compile_key_function`)."""
        static = self.settings.static_shapes
        if self.key_fn is not None or self._constexpr_params:
            return None  # these keys take the general path
        # before the key function is built from the types of device values
        self._refuse_device_code_call()
        self._fast_keys[static] = fast = _compile_key_function(args, static)
        return fast(args)

    def _refuse_device_code_call(self) -> None:
        """A kernel called while device code is traced (another kernel's, or its own: recursion)
        gets device values, which no kernel takes: say so, at the calling line."""
        mode = getattr(_context_state, "mode", None)
        if mode is None or isinstance(mode, HostMode):
            return
        from helion.frontend.tracer import Tracer

        if isinstance(mode, Tracer):
            raise exc.KernelCalledOnDevice(self.name, mode.ir.name, loc=mode.current_loc())

    def _call_direct(self, args: tuple) -> Any:
        """Run the kernel on normalized arguments, bypassing the custom op (its real impl)."""
        if self.settings.ref_mode == RefMode.EAGER:
            from helion.eager import run_eager

            return run_eager(self, args)
        return self.bind(args)(*args)

    def register_autograd(
        self, backward: Callable[..., Any], *, setup_context: Callable[..., Any] | None = None
    ) -> None:
        """Give the kernel a backward, like `torch.library.register_autograd`.

        Args:
            backward: `backward(ctx, *grads)`, one grad per tensor the kernel returns (in the
                order of the flattened result; returned arguments excluded). Returns one
                gradient per kernel argument (None for non-tensors or no gradient).
            setup_context: `setup_context(ctx, inputs, output)`: `inputs` are the kernel's
                arguments (defaults applied), `output` what it returned. Save tensors with
                `ctx.save_for_backward(...)`.

        Raises:
            helion.exc.TorchIntegrationError: The kernel writes into one of its arguments.
        """
        torch_integration.register_autograd(self, backward, setup_context)

    def custom_op(self, *args: Any, **kwargs: Any) -> Any:
        """The `torch.ops.helion.*` overload that calls with these arguments go through."""
        return torch_integration.custom_op(self, *args, **kwargs)

    def autotune(self, args: Sequence[Any], *, force: bool = True, **options: Any) -> Config:
        args = self.normalize_args(*self._argument_tuple("autotune", args))
        return self.bind(args).autotune(args, force=force, **options)

    def autotune_multi(
        self,
        arg_sets: Sequence[Sequence[Any]],
        *,
        aggregation: str = "geomean",
        relative_to: str | None = None,
        cache_tag: str | None = None,
        force: bool = True,
        **options: Any,
    ) -> Config:
        """Tune one config for several argument sets (e.g. the kernel at several sizes).

        Every candidate runs on every set, each through the bound kernel of its own set, and
        must work on all of them; its score aggregates the per-set times. The winner is set on
        the bound kernel of every set and cached under a key covering all the sets.

        Args:
            arg_sets: a list of argument tuples, one per set, all of the same arity.
            aggregation: ``"geomean"`` of the per-set values, or ``"max"`` (the worst set).
            relative_to: ``None`` (raw times), ``"default"`` (each set's time over its default
                config's) or ``"baseline"`` (over the autotuner's baseline on that set:
                ``autotune_baseline_fn`` if set, else the default config).
            cache_tag: names the cache entry (part of its key and file name).
            force: ignore a cached result (the new result is still stored).
            **options: as for `autotune`: ``effort=``, ``search=``, ``max_evaluations=``,
                ``budget_seconds=``, ``seed=``.

        Returns:
            The winning config.

        Raises:
            helion.exc.AutotuneMultiError: no sets, sets of different arity, a bad
                ``aggregation`` / ``relative_to``, or config spaces of different shape.
        """
        from helion.autotuner.multi import autotune_multi

        return autotune_multi(
            self,
            arg_sets,
            aggregation=aggregation,
            relative_to=relative_to,
            cache_tag=cache_tag,
            force=force,
            **options,
        )

    def reset(self) -> None:
        self._warm = None
        self._bound.clear()

    def __repr__(self) -> str:
        return f"<helion.Kernel {self.name}>"


def _describe_value(value: Any) -> str:
    """``value`` in an error message: its type and a short repr (``a list ([1, 2])``)."""
    import reprlib

    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{article} {name} ({reprlib.repr(value)})"


def _check_kernel_function(fn: Any) -> None:
    """Refuse, when the kernel is made, what is not a function defined with `def` (a lambda, a
    builtin, a class, any other object): its source could not be split into host and device
    code. A function wrapped by a decorator below `@helion.kernel` is left to `split_kernel`,
    which names that decorator."""
    if inspect.isfunction(fn):
        if fn.__name__ == "<lambda>":
            raise exc.KernelNotAFunction("a lambda")
        return
    if callable(fn) and inspect.isfunction(inspect.unwrap(fn)):
        return
    if inspect.isclass(fn):
        what = f"the class {fn.__qualname__}"
    elif inspect.isbuiltin(fn) or inspect.ismethoddescriptor(fn):
        what = f"the builtin {getattr(fn, '__name__', None) or repr(fn)}"
    elif inspect.ismethod(fn):
        what = f"the bound method {fn.__qualname__} (decorate a plain function instead)"
    else:
        what = _describe_value(fn)
    raise exc.KernelNotAFunction(what)


def _kernel_configs(configs: Any, option: str = "configs") -> list[Config]:
    """The ``configs=`` of a kernel as a list of `Config` (dicts converted), or a clear error
    for anything else (a single config, a number)."""
    if configs is None:
        return []
    from collections.abc import Iterable
    from collections.abc import Mapping

    if isinstance(configs, (Mapping, str)) or not isinstance(configs, Iterable):
        hint = (
            "For one config, pass config=helion.Config(...)."
            if isinstance(configs, Mapping)
            else "e.g. configs=[helion.Config(block_sizes=[32]), helion.Config(block_sizes=[64])]"
        )
        raise exc.InvalidConfig(
            f"helion.kernel({option}=...) takes a list of helion.Config (or dicts of their "
            f"entries); got {_describe_value(configs)}",
            hint=hint,
        )
    result = []
    for index, config in enumerate(configs):
        if isinstance(config, Config):
            result.append(config)
        elif isinstance(config, dict) and all(isinstance(k, str) for k in config):
            result.append(Config(**config))
        else:
            raise exc.InvalidConfig(
                f"helion.kernel({option}=...): item {index} is {_describe_value(config)}, not a "
                "helion.Config or a dict of its entries",
                hint="e.g. configs=[helion.Config(block_sizes=[32]), {'block_sizes': [64]}]",
            )
    return result


# how a string annotation (postponed by `from __future__ import annotations`) can name ConstExpr
# when it cannot be evaluated: `hl.constexpr`, `helion.language.ConstExpr`, `ProcessGroupName`
_CONSTEXPR_ANNOTATION = re.compile(r"\b(?:constexpr|ConstExpr|ProcessGroupName)\b")


def _is_constexpr_annotation(annotation: Any, fn: Callable) -> bool:
    """Whether a parameter annotation marks a compile-time constant: `hl.constexpr` (or a
    subclass such as `hl.ProcessGroupName`), given as the object itself or as a string."""
    if isinstance(annotation, str):
        try:
            # what typing.get_type_hints does; a name it cannot see (a local import, one under
            # TYPE_CHECKING) leaves only the text to go by
            annotation = eval(annotation, dict(getattr(fn, "__globals__", {})))
        except Exception:
            return _CONSTEXPR_ANNOTATION.search(annotation) is not None
    return isinstance(annotation, type) and issubclass(annotation, ConstExpr)


def _hashable(value: Any) -> Hashable:
    if isinstance(value, ProcessGroupName):
        return value.specialization_key()
    if isinstance(value, ConstExpr):
        value = value.value
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    if callable(value) and not isinstance(value, type):
        return _StableRepr(value, _describe_callable)
    return value


def _unsupported_tensor_kind(arg: torch.Tensor) -> str | None:
    if arg.is_nested:
        return "a nested tensor"
    if arg.layout is not torch.strided:
        return f"of layout {arg.layout}"
    if arg.is_quantized:
        return f"quantized ({arg.dtype})"
    return None


def _arg_key(arg: Any, static: bool) -> Hashable:
    if isinstance(arg, torch.Tensor):
        kind = _unsupported_tensor_kind(arg)
        if kind is not None:
            raise exc.UnsupportedTensorKind(kind)
        if arg.is_neg():
            raise exc.NegatedTensorView()
        if static:
            # torch.Size and stride tuples hash as tuples; device is hashable: no conversions
            return (arg.dtype, arg.device, arg.shape, arg.stride())
        return (
            arg.dtype,
            arg.device.type,
            arg.ndim,
            tuple(min(s, 2) for s in arg.shape),
            arg.is_contiguous(),
        )
    if isinstance(arg, ConstExpr):
        return ("constexpr", _hashable(arg.value))
    if isinstance(arg, (bool, int, float)):
        if type(arg) is int and not -(2**63) <= arg < 2**63:
            raise exc.InvalidAPIUsage(
                f"the int argument {arg} does not fit int64, the type of a kernel's int "
                "arguments on the device",
                hint="Pass it as a float, or as a tensor of the dtype it needs.",
            )
        return type(arg)
    if isinstance(arg, (str, torch.dtype, torch.device, type(None))):
        return arg
    # a container: its type (a namedtuple's or dataclass's names its fields), its keys in order
    # (device code that iterates a dict unrolls in that order), its length and each item's key
    if isinstance(arg, (list, tuple)):
        return (type(arg), tuple(_arg_key(a, static) for a in arg))
    if isinstance(arg, dict):
        return (type(arg), tuple((k, _arg_key(v, static)) for k, v in arg.items()))
    if dataclasses.is_dataclass(arg) and not isinstance(arg, type):
        fields = dataclasses.fields(arg)
        return (type(arg), tuple((f.name, _arg_key(getattr(arg, f.name), static)) for f in fields))
    if callable(arg) and hasattr(arg, "__code__") and hasattr(arg, "__closure__"):
        # a function argument (an epilogue) is traced into the kernel: its code, and the
        # values it captures or defaults to (scalars are baked in as constants) are the key
        closure = tuple(_captured_key(_cell_value(c), static) for c in (arg.__closure__ or ()))
        defaults = tuple(_captured_key(d, static) for d in (arg.__defaults__ or ()))
        kwdefaults = tuple(
            (k, _captured_key(v, static)) for k, v in sorted((arg.__kwdefaults__ or {}).items())
        )
        return (_StableRepr(arg.__code__, _describe_code), closure, defaults, kwdefaults)
    if callable(arg):
        return _StableRepr(arg, _describe_callable)
    raise TypeError(f"unsupported argument type {type(arg).__name__} for a Helion kernel")


# exact tensor types the key function and warm call inline, by the name their type test uses:
# a model's weights arrive as `nn.Parameter`s, and their key is a plain tensor's
_TENSOR_KINDS = {torch.Tensor: "Tensor", torch.nn.Parameter: "Parameter"}


def _inlined_kind(arg: Any, static: Any) -> str | None:
    """How the generated key function and warm call take an argument: ``"Tensor"`` or
    ``"Parameter"`` (exactly that type, with static shapes) or ``"bool"``/``"int"``/``"float"``,
    each behind an exact type test; None: not inlined (`_arg_key` computes its key part)."""
    kind = type(arg)
    if static and kind in _TENSOR_KINDS:
        return _TENSOR_KINDS[kind]
    return kind.__name__ if kind in (bool, int, float) else None


def _no_custom_op_test(grads: list[str]) -> str:
    """`torch_integration.needs_custom_op` inlined for arguments all inlined: no dispatch mode,
    and no tensor (``grads``: their ``requires_grad`` expressions) for autograd to record."""
    grad = f"(_grad_enabled() and ({' or '.join(grads)}))" if grads else "False"
    return f"not (_dispatch_depth() or {grad})"


# an int the device holds as int64 (a larger one takes the general path, where `_arg_key`
# refuses it)
_INT64_TEST = " and -9223372036854775808 <= {0} <= 9223372036854775807"

_INLINED_SCOPE = {
    **{f"_{name}": kind for kind, name in _TENSOR_KINDS.items()},
    "_bool": bool,
    "_int": int,
    "_float": float,
    "_grad_enabled": torch.is_grad_enabled,
    "_dispatch_depth": torch._C._len_torch_dispatch_stack,
}


def _compile_key_function(args: tuple, static: bool) -> Callable[[tuple], Hashable | None]:
    """`Kernel.specialization_key` for arguments of the types in ``args``, as one generated
    expression: the same key `_arg_key` gives, without a call and type tests per argument; or
    None where `Kernel.__call__` must not take its warm path.

    Tensors (exactly `torch.Tensor`, with static shapes) and plain bools, ints and floats are
    inlined behind an exact type test; any other argument calls `_arg_key`. When a test fails
    (an argument of another type than the first call's) the function returns None and the
    caller takes the general path, so the two never give different keys for one call. It also
    returns None when the call needs the custom op (`torch_integration.needs_custom_op`): with
    every argument inlined, that test is inlined too (the ``requires_grad`` of each tensor)."""
    tests: list[str] = []
    parts: list[str] = []
    grads: list[str] = []
    for index, arg in enumerate(args):
        value = f"a[{index}]"
        kind = _inlined_kind(arg, static)
        if kind in _TENSOR_KINDS.values():
            # either exact type, whichever the first call passed (their keys are alike); a
            # negated view takes the general path, whose `_arg_key` says what is wrong
            exact = " or ".join(f"type({value}) is _{name}" for name in _TENSOR_KINDS.values())
            tests.append(f"({exact}) and not {value}.is_neg()")
            parts.append(f"({value}.dtype, {value}.device, {value}.shape, {value}.stride())")
            grads.append(f"{value}.requires_grad")
        elif kind is not None:
            tests.append(f"type({value}) is _{kind}" + _INT64_TEST.format(value) * (kind == "int"))
            parts.append(f"_{kind}")
        else:
            parts.append(f"_arg_key({value}, {static})")
    tests.append(
        _no_custom_op_test(grads) if len(tests) == len(args) else "not _needs_custom_op(a)"
    )
    body = f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
    source = f"def key(a):\n    return {body} if {' and '.join(tests)} else None\n"
    scope = {
        **_INLINED_SCOPE,
        "_arg_key": _arg_key,
        "_needs_custom_op": torch_integration.needs_custom_op,
    }
    exec(compile(source, "<helion specialization key>", "exec"), scope)
    return scope["key"]


_MISS = object()  # a warm call's answer for arguments it does not take


def _compile_warm_call(
    bound: BoundKernel, args: tuple, static: Any
) -> Callable[[tuple, Any], Any] | None:
    """`Kernel.__call__`'s warm path for the bound kernel of ``args`` as one generated function
    ``warm(args, settings)``: it compares each argument with this bound kernel's key (exactly
    what `_compile_key_function`'s key holds: type, then a tensor's shape, stride, dtype and
    device) instead of building that key, hashing it and looking it up, and calls the active
    keyed runner; `_MISS` for anything else (other sizes, settings, autograd, a dispatch mode).
    The tensors are compared in one C++ call where torch offers one (`exact_tensor_match`,
    stricter than the key: a tensor it turns away takes the general path). None where the key
    function does not inline every argument (those keep the general lookup)."""
    tests: list[str] = []
    grads: list[str] = []
    tensors: dict[int, str] = {}  # position -> its exact type's name
    scope: dict[str, Any] = {}
    for index, arg in enumerate(args):
        kind = _inlined_kind(arg, static)
        if kind in _TENSOR_KINDS.values():
            tensors[index] = kind
        elif kind is not None:
            test = f"type(a[{index}]) is _{kind}"
            tests.append(test + _INT64_TEST.format(f"a[{index}]") * (kind == "int"))
        else:
            return None
    match = exact_tensor_match([args[i] for i in tensors])
    if match is not None:
        scope["_match"] = match
        # torch's check aborts the process on a (strided) nested tensor: those never reach it
        nested = " or ".join(f"a[{i}].is_nested" for i in tensors)
        tests.insert(0, f"not ({nested}) and _match({', '.join(f'a[{i}]' for i in tensors)})")
        # the match compares requires_grad too: with none set, autograd has nothing to record
        grads = [f"a[{i}].requires_grad" for i in tensors if args[i].requires_grad]
    else:
        for index, kind in tensors.items():
            arg, value = args[index], f"a[{index}]"
            scope.update(
                {
                    f"_S{index}": arg.shape,
                    f"_T{index}": arg.stride(),
                    f"_D{index}": arg.dtype,
                    f"_V{index}": arg.device,
                }
            )
            tests.append(
                f"type({value}) is _{kind} and {value}.shape == _S{index} and {value}.stride() == _T{index}"
                f" and {value}.dtype is _D{index} and {value}.device == _V{index} and not {value}.is_neg()"
            )
            grads.append(f"{value}.requires_grad")
    tests += ["s.static_shapes == _STATIC", "s.ref_mode is not _EAGER", _no_custom_op_test(grads)]
    # the tests read tensor attributes before any type test (`is_nested`, the C++ match): an
    # argument of another kind (a float, None, a list) raises there, and is a miss, for the
    # general path to give its own error. Only the tests are in the `try` (free in Python 3.11
    # while nothing raises): an error of the run itself must reach the caller, never rerun it
    source = (
        "def warm(a, s):\n"
        "    try:\n"
        f"        if not ({' and '.join(tests)}):\n"
        "            return _MISS\n"
        "    except (AttributeError, TypeError):\n"
        "        return _MISS\n"
        "    run = _bound._active_keyed\n"
        "    if run is not None:\n"
        "        return run(a)\n"
        "    return _MISS\n"
    )
    scope.update(
        {**_INLINED_SCOPE, "_STATIC": static, "_EAGER": _EAGER, "_MISS": _MISS, "_bound": bound}
    )
    exec(compile(source, "<helion warm call>", "exec"), scope)
    return scope["warm"]


_EMPTY_CELL = object()


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a closure variable not assigned yet
        return _EMPTY_CELL


def _captured_key(value: Any, static: bool) -> Hashable:
    """Key of a value captured by a function argument: unlike a scalar kernel argument (a
    runtime value), a captured scalar is a constant of the traced code, so its value counts."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return (type(value), value)
    if value is _EMPTY_CELL:
        return "<empty cell>"
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_captured_key(v, static) for v in value))
    if isinstance(value, dict):
        return (
            dict,
            tuple((k, _captured_key(v, static)) for k, v in sorted(value.items(), key=repr)),
        )
    try:
        return _arg_key(value, static)
    except TypeError:
        # anything else is compared by identity (on disk: by its type)
        identity = (type(value), id(value))
        return ("object", _StableRepr(identity, _describe_instance))


class _StableRepr:
    """An entry of a specialization key that compares by `key` in memory, but whose repr (what
    the on-disk autotune cache stores) is `describe(key)`: code objects and objects compared by
    identity print with an address, which differs from one process to the next."""

    __slots__ = ("describe", "key")

    def __init__(self, key: Hashable, describe: Callable[[Any], str]) -> None:
        self.key = key
        self.describe = describe

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StableRepr) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return self.describe(self.key)


def _describe_code(code: types.CodeType) -> str:
    return f"<code {code.co_qualname} {_code_digest(code)}>"


def _code_digest(code: types.CodeType) -> str:
    """What the code does (bytecode, constants, names; nested functions included), not where it
    is: its file and line numbers do not count."""
    return hashlib.sha256(repr(_code_parts(code)).encode()).hexdigest()[:16]


def _code_parts(code: types.CodeType) -> tuple:
    return (
        code.co_qualname,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags,
        code.co_code,
        tuple(_constant_parts(c) for c in code.co_consts),
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
    )


def _constant_parts(value: Any) -> Any:
    if isinstance(value, types.CodeType):
        return _code_parts(value)
    if isinstance(value, (tuple, frozenset)):
        parts = [_constant_parts(v) for v in value]
        if isinstance(value, frozenset):
            parts.sort(key=repr)  # a set's order follows string hashes, which vary by process
        return (type(value).__name__, tuple(parts))
    return (type(value).__name__, repr(value))


def _qualified_name(obj: Any) -> str:
    name = getattr(obj, "__qualname__", None)
    if not isinstance(name, str):  # an instance: its class names it
        return f"{_qualified_name(type(obj))} object"
    module = getattr(obj, "__module__", None)
    return f"{module}.{name}" if isinstance(module, str) else name


def _describe_instance(key: tuple[type, int]) -> str:
    return f"<{_qualified_name(key[0])} object>"


def _describe_callable(fn: Any) -> str:
    code = getattr(fn, "__code__", None)
    digest = f" {_code_digest(code)}" if isinstance(code, types.CodeType) else ""
    return f"<callable {_qualified_name(fn)}{digest}>"


class HostMode:
    """The mode of host code while a bound kernel runs: tunables read the active config."""

    def __init__(self, bound: BoundKernel, config: Config | None) -> None:
        self.bound = bound
        self.config = config
        self.next_block = 0
        # the arguments of the call running host code (what the guards compare identities with)
        self.args: Any = _NO_ARGUMENTS
        # empty while a call runs host code in this mode: a second call meanwhile (another
        # thread, or host code calling its own kernel) runs in a mode of its own, so that
        # neither restarts the other's `hl.register_block_size` count. A list's pop and append
        # are atomic, and cost a quarter of a lock's acquire and release
        self.free: list[None] = [None]

    def hl_register_block_size(self, low: Any, high: Any) -> BlockSizeInt:
        block_id = self.next_block
        self.next_block += 1
        low_value = int(low)
        if low_value & (low_value - 1):
            raise exc.InvalidConfig(
                f"hl.register_block_size: the minimum {low_value} must be a power of two"
            )
        discovering = self.config is None
        if discovering:
            hint = int(high)
            info = self.bound._host_blocks_by_id.get(block_id)
            if info is None:
                import sympy

                info = BlockSizeInfo(
                    block_id=block_id,
                    kind="tile",
                    size_hint=max(hint, 1),
                    symbol=sympy.Symbol(f"_BLOCK_SIZE_{block_id}", integer=True, positive=True),
                    min_size=low_value,
                    config_index=block_id,
                )
                self.bound._host_blocks_by_id[block_id] = info
                self.bound._registered_bounds[block_id] = (low_value, hint)
            value = max(low_value, min(_next_pow2(hint), REGISTERED_BLOCK_DEFAULT))
        else:
            # the stored (frozen) list: this runs on every call, and `config[...]` copies
            value = int(self.config.config["block_sizes"][block_id])
        return BlockSizeInt(value, block_id)

    def hl_register_tunable(self, name: str, fragment: Any) -> Any:
        if self.config is None:
            existing = self.bound._user_tunables.get(name)
            if existing is not None and existing != fragment:
                raise exc.TunableNameConflict(name)
            self.bound._user_tunables[name] = fragment
            return fragment.default()
        return self.config.get(name, fragment.default())

    def hl_specialize(self, value: Any) -> Any:
        if isinstance(value, (list, tuple, torch.Size)):
            return (
                type(value)(int(v) for v in value)
                if not isinstance(value, torch.Size)
                else tuple(int(v) for v in value)
            )
        if isinstance(value, bool) or not isinstance(value, int):
            raise exc.SpecializeArgType(type(value).__name__)
        return int(value)

    def hl_tile(self, *args: Any, **kwargs: Any) -> Any:
        raise exc.LoopFunctionNotInFor()

    hl_grid = hl_tile

    def hl_jagged_tile(self, parent: Any) -> Any:
        raise exc.InvalidJaggedTileUsage(
            "hl.jagged_tile cannot be the outermost loop; iterate the rows with hl.tile first"
        )

    def hl_stacktensor_like(self, tensor_like: Any, dev_ptrs: Any) -> Any:
        raise exc.StackTensorcOnHost()

    def hl_barrier(self) -> None:
        raise exc.BarrierOnlyAllowedAtTopLevel()

    def unsupported(self, api_name: str) -> Any:
        raise exc.DeviceAPIOnHost(f"hl.{api_name}")


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


class _CompiledTrace:
    """One traced + compiled variant: valid while the host values match its guards, and the
    global names its `hl.triton_kernel` calls were resolved through still have the values they
    had (``name_guards``, `watched_names`: none for other kernels)."""

    __slots__ = (
        "_guard",
        "compiled",
        "constant_guards",
        "ir",
        "matches_call",
        "name_guards",
        "tensor_guards",
    )

    def __init__(
        self,
        ir: KernelIR,
        compiled: Any,
        tensor_guards: list,
        constant_guards: list,
        name_guards: tuple = (),
    ) -> None:
        self.ir = ir
        self.compiled = compiled
        self.tensor_guards = tensor_guards
        self.constant_guards = constant_guards
        self.name_guards = name_guards
        self.matches_call: Callable[[tuple, tuple], bool] = lambda values, args: self.matches(
            values
        )
        self._guard: tuple[Callable[..., str], dict, dict[int, int]] | None = None

    def specialize_guards(self, values: Sequence[Any], args: Sequence[Any], static: bool) -> None:
        """Build `matches_call(values, args)`, what each call checks: `matches` as one generated
        expression, where a value that is the very argument it was when traced (``values[i] is
        args[j]``) passes without its shape, stride and dtype being read. With static shapes
        the specialization key already holds those of every tensor argument, and a bound
        kernel is only called with arguments of its key."""
        from_args = {}
        if static:
            for index, value in enumerate(values):
                position = next((j for j, arg in enumerate(args) if arg is value), None)
                if isinstance(value, torch.Tensor) and position is not None:
                    from_args[index] = position
        scope: dict[str, Any] = {}
        for index, shape, stride, dtype in self.tensor_guards:
            scope[f"shape{index}"], scope[f"stride{index}"], scope[f"dtype{index}"] = (
                shape,
                stride,
                dtype,
            )
        for index, expected in self.constant_guards:
            scope[f"constant{index}"] = expected
        for index, (namespace, _, value) in enumerate(self.name_guards):
            scope[f"namespace{index}"], scope[f"named{index}"] = namespace, value

        def tensor_test(value: str, index: int) -> str:
            # a negated view matches no variant: the trace of one says what is wrong
            return (
                f"({value}.shape == shape{index} and {value}.stride() == stride{index}"
                f" and {value}.dtype == dtype{index} and not {value}.is_neg())"
            )

        def expression(
            value_of: Callable[[int], str], native: Sequence[int] = (), other: bool = False
        ) -> str:
            # native: the tensors that one `_match` call compares first (see `guarded_launch`),
            # then `_match_other` (other: the same tensors made in the other inference mode);
            # what they turn away is then tested here in Python
            tests = []
            if native:
                values = ", ".join(value_of(i) for i in native)
                python = " and ".join(tensor_test(value_of(i), i) for i in native)
                second = f"_match_other({values}) or " if other else ""
                # unlike the warm call, no `is_nested` test first (0.05 us a tensor): these are
                # tensors the host code made, dense when traced, from arguments the warm call
                # or the key function found dense
                tests.append(f"(_match({values}) or {second}({python}))")
            for index, *_ in self.tensor_guards:
                if index in native:
                    continue
                test = tensor_test(value_of(index), index)
                if index in from_args:
                    test = f"({value_of(index)} is a[{from_args[index]}] or {test})"
                tests.append(test)
            for index, _ in self.constant_guards:
                tests.append(f"not ({value_of(index)} != constant{index})")
            for index, (_, name, _) in enumerate(self.name_guards):
                tests.append(f"namespace{index}.get({name!r}) is named{index}")
            return " and ".join(tests) or "True"

        self._guard = (expression, scope, from_args)
        source = f"def matches(v, a):\n    return {expression(lambda i: f'v[{i}]')}\n"
        exec(compile(source, "<helion guards>", "exec"), scope)
        self.matches_call = scope["matches"]

    def guarded_launch(
        self, values: Sequence[Any], mode: HostMode, general: Callable[..., Any]
    ) -> Callable[..., Any] | None:
        """The host code's device call for this variant in one function of ``len(values)``
        values: its guards inlined, then its compiled kernel (its `fast_call` where it has
        one); values it does not match go to ``general``. The tensors that are not the call's
        own arguments (outputs the host code made) are compared with ``values``, this launch's,
        in one C++ call where torch has one (`exact_tensor_match`: stricter than the guards, so
        a tensor it turns away goes to ``general``, which checks the guards). None before
        `specialize_guards`, and for a variant that draws a seed per launch (the general
        launch does that)."""
        if self._guard is None or self.ir.rng_seed is not None:
            return None
        if self.ir.lifted or self.ir.structure_guards:
            return None  # values of other lengths than its arguments: the general launch
        expression, scope, from_args = self._guard
        scope = dict(scope)
        native = [index for index, *_ in self.tensor_guards if index not in from_args]
        examples = [values[i] for i in native]
        match = exact_tensor_match(examples) if native else None
        other_match = None
        if match is None:
            native = []
        else:
            # the tensors the host code makes under the other inference mode have other dispatch
            # keys: a second match for them, so calls in either mode skip the Python tests
            other_match = other_inference_mode_match(examples)
        names = ", ".join(f"v{i}" for i in range(len(values)))
        source = (
            f"def launch({names}):\n"
            f"    a = _mode.args\n"
            f"    if {expression(lambda i: f'v{i}', native, other_match is not None)}:\n"
            f"        return _compiled({names})\n"
            f"    return _general({names})\n"
        )
        compiled = getattr(self.compiled, "fast_call", None) or self.compiled
        scope.update(
            {
                "_match": match,
                "_match_other": other_match,
                "_mode": mode,
                "_compiled": compiled,
                "_general": general,
            }
        )
        exec(compile(source, "<helion guarded launch>", "exec"), scope)
        return scope["launch"]

    def matches(self, values: Sequence[Any]) -> bool:
        for index, shape, stride, dtype in self.tensor_guards:
            value = values[index]
            if (
                value.shape != shape
                or value.dtype != dtype
                or value.stride() != stride
                or value.is_neg()
            ):
                return False
        if not all(values[index] == expected for index, expected in self.constant_guards):
            return False
        return self.names_hold()

    def names_hold(self) -> bool:
        """Whether every watched name still has its value (a name's value is never None)."""
        return all(namespace.get(name) is value for namespace, name, value in self.name_guards)


# up to this many variants of a config, a call scans them in trace order (about 0.4 us each on
# CPU); past it, `_VariantIndex` finds the call's one first
_SCANNED_VARIANTS = 4


class _VariantIndex:
    """The variants of one config, keyed by the shapes, strides, dtypes and constants their
    guards test. Under ``static_shapes=False`` each size traced is a variant: one dict lookup
    finds a call's among however many sizes were traced, where a scan of the list grows with
    them. Variants that read containers' leaves (`KernelIR.lifted`) are left to the scan."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        # (tensor guard indices, constant guard indices) -> key -> the first variant traced
        self._tables: dict[tuple, dict[tuple, _CompiledTrace]] = {}

    def add(self, variant: _CompiledTrace) -> None:
        if variant.ir.lifted or variant.ir.structure_guards:
            return
        layout = (
            tuple(guard[0] for guard in variant.tensor_guards),
            tuple(index for index, _ in variant.constant_guards),
        )
        key = (
            tuple(
                (tuple(shape), tuple(stride), dtype)
                for _, shape, stride, dtype in variant.tensor_guards
            ),
            tuple(expected for _, expected in variant.constant_guards),
        )
        with contextlib.suppress(TypeError):  # an unhashable constant: the scan finds it
            self._tables.setdefault(layout, {}).setdefault(key, variant)

    def rebuild(self, variants: Sequence[_CompiledTrace]) -> None:
        self._tables.clear()
        for variant in variants:
            self.add(variant)

    def find(self, values: Sequence[Any], args: Sequence[Any]) -> _CompiledTrace | None:
        """The variant whose guards ``values`` pass (None: none indexed, or not found)."""
        for (tensors, constants), table in tuple(self._tables.items()):
            try:
                key = (
                    tuple(
                        (tuple(values[i].shape), values[i].stride(), values[i].dtype)
                        for i in tensors
                    ),
                    tuple(values[i] for i in constants),
                )
                variant = table.get(key)
            except (AttributeError, IndexError, RuntimeError, TypeError):
                continue  # not a (strided) tensor where the guards had one, or unhashable
            if variant is not None and variant.matches_call(values, args):
                return variant
        return None


class CompiledConfig:
    """What `BoundKernel.compile_config` returns: call it with the kernel's arguments."""

    def __init__(self, bound: BoundKernel, config: Config) -> None:
        self.bound = bound
        self.config = config
        self._runners = bound._runners
        bound._runner(config)

    def __call__(self, *args: Any) -> Any:
        # looked up per call: the runners are rewired once a variant has launched (guarded launch)
        return self._runners[self.config][0](*args)

    @property
    def source(self) -> str:
        return self.bound.to_code(self.config)


class BoundKernel:
    """A kernel specialized to one key: owns its IR, ConfigSpec, config and compiled code."""

    def __init__(self, kernel: Kernel, args: tuple) -> None:
        from helion.backends import default_backend_name
        from helion.backends import get_backend

        self.kernel = kernel
        self.settings = kernel.settings
        self.backend = get_backend(self.settings.backend or default_backend_name())
        self.split = kernel.split
        device = find_device(args)
        if device is None:
            raise exc.NoTensorArgs(kernel.name)
        self.device = device
        self._host_blocks_by_id: dict[int, BlockSizeInfo] = {}
        # block id -> the (min, max) hl.register_block_size gave it (configs below min: refused)
        self._registered_bounds: dict[int, tuple[int, int]] = {}
        self._user_tunables: dict[str, Any] = {}
        self._runtime_scalars = {
            name
            for name in self.split.param_names
            if name not in kernel._constexpr_params and name in self.split.device_inputs
        } - set(ast_rewrite.assigned_names(self.split.host_before))
        self._host_factory = ast_rewrite.build_host_factory(self.split)
        self._device_factory = ast_rewrite.build_device_factory(self.split)
        self._variants: dict[Config, list[_CompiledTrace]] = {}
        self._variant_index: dict[Config, _VariantIndex] = {}
        self._runners: dict[Config, tuple[Callable[..., Any], Callable[..., Any]]] = {}
        # the cold paths (picking or tuning the config, tracing a variant, building runners)
        # one thread at a time: a second thread's first call waits for the first one's tuning
        self._lock = threading.RLock()
        self._active_runner: Callable[..., Any] | None = None
        self._active_keyed: Callable[..., Any] | None = None
        self._warm_calls: dict[tuple, Callable[[tuple, Any], Any] | None] = {}
        self._config: Config | None = None
        # configs whose reproduction script `print_repro` printed (once per config)
        self._repro_printed: set[Config] = set()
        self._trace_args = _TraceArguments(args)
        self._specialization_repr = repr(kernel.specialization_key(args))
        self._discovery_shapes: dict[int, str] = {}
        self._discovery_ir = self._discover(args)
        self.config_spec = self._derive_spec(self._discovery_ir)

    # -- tracing --------------------------------------------------------------------------------

    def _discover(self, args: tuple) -> KernelIR:
        """Run host code once (on stand-ins of ``args``) with placeholder tunables and trace the
        device code."""
        captured: list[KernelIR] = []

        def trace(values: tuple, args: tuple) -> None:
            captured.append(self._trace(values))
            # for `_check_config_fits` to say what changed (the values are not kept alive)
            self._discovery_shapes = {
                index: describe_structure(values[index])
                for index, _ in captured[0].structure_guards
            }

        self._run_host_for_trace(None, args, trace)
        return captured[0]

    def _run_host_for_trace(
        self, config: Config | None, args: tuple, on_device: Callable[[tuple, tuple], None]
    ) -> None:
        """Run the host code up to its device loops, in the host mode of ``config`` (None: the
        discovery run), and call ``on_device(values, args)`` there. Whatever the host code does
        to its arguments, a tracing run leaves them as they are (`helion.runtime.stand_ins`:
        on the arguments while it only reads them, else on fake tensors or scratch copies); a
        call of the kernel applies its host code once, in its own run. ``values`` holds the
        arguments themselves where the host code passes them on."""
        from helion.runtime.stand_ins import run_host_for_trace

        def make_host(device_call: Callable[..., None]) -> Callable[..., Any]:
            return ast_rewrite.make_host_function(self.split, self._host_factory, device_call)

        # the level the host code needed once (it writes a tensor, reads tensor data) is where
        # later runs start
        self._host_trace_level = run_host_for_trace(
            make_host,
            lambda: active_mode(HostMode(self, config)),
            args,
            on_device,
            level=self._host_trace_level
            if "_host_trace_level" in self.__dict__
            else self._first_trace_level(),
        )

    def _first_trace_level(self) -> int:
        """Where tracing runs of the host code start (`helion.runtime.stand_ins`): on scratch
        copies of the arguments when the host code takes a NumPy view (`x.numpy()`), whose
        writes the guard of a run on the arguments cannot see; else on the arguments."""
        from helion.runtime.stand_ins import ARGUMENTS
        from helion.runtime.stand_ins import COPIES

        return COPIES if ast_rewrite.host_calls_method(self.split, {"numpy"}) else ARGUMENTS

    def _trace(self, values: Sequence[Any]) -> KernelIR:
        """Trace the device code for the host values of one launch and check the IR: the first
        trace (`_discover`) and every later variant (sizes under ``static_shapes=False``, other
        host values) alike, so each size traced is checked against its own tensors."""
        from helion.backends.base import check_core
        from helion.frontend.tracer import Tracer
        from helion.ir.verifier import verify

        first: tuple[str, torch.device] | None = None
        for name, value in zip(self.split.device_inputs, values, strict=True):
            for tensor in iter_tensors([value]):  # a container's tensors too
                if tensor.is_neg():  # one the host code made (arguments are refused by their key)
                    raise exc.NegatedTensorView(f"{name!r}")
                if first is None:
                    first = (name, tensor.device)
                elif tensor.device != first[1]:
                    raise exc.TensorsOnDifferentDevices(
                        f"{first[0]!r}", first[1], f"{name!r}", tensor.device
                    )
        src = self.split.source
        host_blocks = [self._host_blocks_by_id[i] for i in sorted(self._host_blocks_by_id)]
        tracer = Tracer(
            self.kernel.name,
            src.filename,
            (src.first_lineno, src.first_lineno + len(src.lines)),
            self.device,
            host_blocks,
            lambda line, col, end: ast_rewrite.source_location(src, line, col, end),
            index_dtype=self.settings.index_dtype,
        )
        tracer.settings = self.settings
        device_fn = ast_rewrite.make_device_function(
            self.split, self._device_factory, _device_builtins()
        )
        ir = tracer.trace(device_fn, self.split.device_inputs, values, self._runtime_scalars)
        ir.baked_globals = self._baked_globals()
        ir.host_tunables = dict(self._user_tunables)
        ir.settings = self.settings
        full_values = _with_lifted(values, ir.lifted)
        ir.guards = (
            [
                (i, tuple(v.shape), tuple(v.stride()), v.dtype)
                for i, v in enumerate(full_values)
                if isinstance(v, torch.Tensor)
            ],
            [(i, values[i]) for i, inp in enumerate(tracer.inputs) if inp.kind == "constant"]
            + tracer.constant_leaves,  # the baked leaves of containers, indexed in full_values
        )
        verify(ir)
        if self.settings.print_ir:
            print(ir, file=sys.stderr)
        check_core(self.backend, ir)  # what holds for every backend, then the backend's own
        self.backend.check(ir)
        return ir

    def _baked_globals(self) -> tuple[tuple[dict[str, Any], str, Any], ...]:
        """The module-level values the device code (and its module's helpers) read that a
        trace bakes in (`helion.runtime.code_deps.baked_globals`): a flag, a string, a dtype, a
        helper function. Rebinding one makes the traces that read it stale."""
        from helion.runtime.code_deps import baked_globals

        split = self.split
        runtime = {*split.device_inputs, *split.host_assigned}
        return baked_globals(split.source.fn, ast_rewrite.loaded_names(split.device_stmts), runtime)

    def _derive_spec(self, ir: KernelIR) -> Any:
        from helion.passes.config_spec import derive_config_spec
        from helion.passes.config_spec import force_persistent

        spec = derive_config_spec(
            ir, self._user_tunables, min_dot_size=getattr(self.backend, "min_dot_size", 16)
        )
        self.backend.tunables(ir, spec, self.device)
        if self.settings.autotune_force_persistent:
            force_persistent(spec)  # after the backend's restrictions, keeping them
        return spec

    # -- configs --------------------------------------------------------------------------------

    @property
    def configs(self) -> list[Config]:
        return self.kernel.configs

    @property
    def ir(self) -> KernelIR:
        return self._discovery_ir

    @functools.cached_property
    def env(self) -> CompileEnvironment:
        """The compile environment: device, backend, settings, config spec, block sizes, index
        dtype and the device code's arguments (see `helion.runtime.CompileEnvironment`)."""
        from helion.runtime.compile_environment import CompileEnvironment

        return CompileEnvironment.of(self)

    def ir_text(self) -> str:
        return str(self._discovery_ir)

    def normalize(self, config: Config | dict | None) -> Config:
        if config is None:
            return self.config_spec.default_config()
        if isinstance(config, dict):
            config = Config(**config)
        self._check_registered_minimums(config)
        return self.config_spec.normalize(config)

    def _check_registered_minimums(self, config: Config) -> None:
        """A config's block size below the minimum `hl.register_block_size(min, max)` declared is
        refused (normalizing would silently raise it to the minimum: the kernel asked for it)."""
        sizes = config.get("block_sizes") if hasattr(config, "get") else None
        if not isinstance(sizes, (list, tuple)):
            return
        for block_id, info in self._host_blocks_by_id.items():
            index = info.config_index if info.config_index is not None else block_id
            low, high = self._registered_bounds.get(block_id, (1, None))
            if index >= len(sizes):
                continue
            value = sizes[index]
            if isinstance(value, int) and not isinstance(value, bool) and value < low:
                raise exc.InvalidConfig(
                    f"config['block_sizes'][{index}] = {value} is below the minimum {low} that "
                    f"hl.register_block_size({low}, {high}) declared for it",
                    hint="Give a block size of at least the registered minimum, or lower the "
                    "minimum in hl.register_block_size.",
                )

    def set_config(self, config: Config | dict) -> None:
        config = self.normalize(config)
        self.compile_config(config)
        self._config = config
        self._active_runner = self._active_keyed = None

    def ensure_config_exists(self, args: Sequence[Any]) -> Config:
        if self._config is not None:
            return self._config
        with self._trace_args.using(args):
            return self._pick_config(args)

    def _pick_config(self, args: Sequence[Any]) -> Config:
        settings = self.settings
        configs = self.kernel.configs
        if settings.autotune_effort == "none" and (not configs or settings.force_autotune):
            config = self.config_spec.default_config()
            print(f"Using implicit config: {self.format_kernel_decorator(config)}", file=sys.stderr)
        elif settings.force_autotune:
            config = self.autotune(args, force=True)
        elif len(configs) == 1:
            config = self.normalize(configs[0])
        elif len(configs) > 1:
            config = self.autotune(args, configs=[self.normalize(c) for c in configs])
        else:
            settings.check_autotuning_disabled()
            config = self.autotune(args, force=False)
        self._config = config
        return config

    def autotune(self, args: Sequence[Any], *, force: bool = True, **options: Any) -> Config:
        from helion.autotuner import autotune

        # tuning launches the kernel many times: a kernel using torch.rand in device code must
        # not advance the caller's CPU generator (the launch after tuning draws from it as usual)
        with torch.random.fork_rng(devices=[]), self._trace_args.using(args):
            config = autotune(self, tuple(args), force=force, **options)
        self._config = self.normalize(config)
        self._active_runner = self._active_keyed = None
        return self._config

    def format_kernel_decorator(self, config: Config, settings: Settings | None = None) -> str:
        """The decorator that pins ``config``, as public Helion prints it: ``@helion.kernel(
        config=helion.Config(...), static_shapes=True)`` (``settings``: this kernel's)."""
        static = (settings or self.settings).static_shapes
        return f"@helion.kernel(config={config!r}, static_shapes={static})"

    def seed_configs(self) -> list[Config]:
        seeds = self.backend.seed_configs(self._discovery_ir, self.config_spec, self.device)
        return [self.normalize(s) for s in seeds]

    def cache_key(self) -> dict[str, str]:
        from helion.runtime.code_deps import dependency_text

        # the kernel's text, and the helpers and constants of its module it reads
        source = self.kernel.kernel_source() + "\n" + dependency_text(self.kernel.fn)
        source_hash = hashlib.sha256(source.encode()).hexdigest()
        device_name = str(self.device)
        if self.device.type == "cuda":
            device_name = torch.cuda.get_device_name(self.device)
        return {
            "kernel": f"{self.split.source.filename}:{self.kernel.name}",
            "source_hash": source_hash,
            "specialization_key": self._specialization_repr,
            "backend": self.backend.cache_key(),
            "device": device_name,
            "torch": torch.__version__,
            "helion": _helion_version(),
        }

    def importable_ref(self) -> tuple[str, str] | None:
        module = getattr(self.kernel.fn, "__module__", None)
        if not module or module == "__main__":
            return None
        return module, self.kernel.fn.__qualname__

    # -- compilation ----------------------------------------------------------------------------

    def compile_config(
        self, config: Config | dict | None = None, *, allow_print: bool = True
    ) -> CompiledConfig:
        config = self.normalize(self._implicit_config(config))
        with self._lock:
            self._drop_stale_variants(config)
        if not self._variants.get(config):
            freed = self._trace_args.freed()
            try:
                self._trace_for_config(config, self._trace_args.resolve())
            except Exception as error:
                if not freed or isinstance(error, exc.BaseError):
                    raise
                # host code that reads tensor data, run on the zeros standing in for freed ones
                raise exc.InvalidAPIUsage(
                    f"compile_config of kernel {self.kernel.name!r} traces its host code with "
                    "the arguments the kernel was bound with, which were freed since (zeros stood "
                    f"in for them, and the host code failed on them: {type(error).__name__}: "
                    f"{error})",
                    hint="Keep the arguments alive until the configs are compiled, or bind the "
                    "kernel again with live ones (kernel.bind(args)) first.",
                ) from error
        return CompiledConfig(self, config)

    def to_code(
        self,
        config: Config | dict | None = None,
        *,
        options: OutputCodeOptions | None = None,
        emit_repro_caller: bool = False,
        output_origin_lines: bool | None = None,
    ) -> str:
        """The generated code of ``config`` (compiled first if it was not).

        Args:
            config: A config of this kernel (a dict is accepted); None: the config a call
                runs (the active one, else the kernel's only given config, else the default).
            options: What to emit (`helion.OutputCodeOptions`). The default: the module the
                backend loads. ``allow_helion_deps=False``: a self-contained module that imports
                only torch and the backend's toolkit, whose function of the kernel's name runs
                the kernel's host code and the kernel. ``jax_fn=True`` (Pallas): a module of JAX
                alone.
            emit_repro_caller: Not supported (True raises): Helion's repro ``main``.
            output_origin_lines: Accepted for compatibility; each backend decides whether its
                code carries comments with the kernel's source lines (Pallas does).

        Returns:
            The module's source.

        Raises:
            helion.exc.OutputCodeUnsupported: The backend cannot emit what ``options`` ask for.
            helion.exc.HostCodeNotExportable: ``allow_helion_deps=False``, and the host code
                uses something a self-contained module cannot hold.
        """
        from helion.runtime.output_code import DEFAULT_OPTIONS
        from helion.runtime.output_code import export_source

        if emit_repro_caller:
            raise exc.InvalidAPIUsage("to_code(emit_repro_caller=True) is not supported")
        config = self.normalize(self._implicit_config(config))
        variant = self._first_variant(config)
        if options is None or options == DEFAULT_OPTIONS:
            return variant.compiled.source
        return export_source(self, config, variant, options)

    def to_triton_code(
        self,
        config: Config | dict | None = None,
        *,
        options: OutputCodeOptions | None = None,
        emit_repro_caller: bool = False,
        output_origin_lines: bool | None = None,
    ) -> str:
        """`to_code` of a kernel bound to the Triton backend (other backends raise)."""
        if self.backend.name != "triton":
            raise exc.BackendUnsupported(
                "to_triton_code", self.backend.name, hint="use to_code() for this backend"
            )
        return self.to_code(
            config,
            options=options,
            emit_repro_caller=emit_repro_caller,
            output_origin_lines=output_origin_lines,
        )

    def get_cached_path(self, config: Config | dict | None = None) -> str | None:
        """Where the backend keeps the compiled code of ``config`` on disk, or None.

        The config is compiled first if it was not. Triton: the generated module file, in
        ``$HELION_CACHE_DIR/triton`` or the temp directory (Triton's own cache of GPU binaries is
        separate). Backends that keep the code in memory only (ref, Pallas) give None.

        Args:
            config: A config of this kernel; None: the config the bound kernel runs with (set,
                given or tuned) once it has one, else the default config.
        """
        return self.backend.cached_path(self._first_variant(config).compiled)

    def backend_cache_key(self, config: Config | dict | None = None) -> str:
        """The key the backend caches the compiled code of ``config`` under.

        The config is compiled first if it was not. Triton: the key of its module cache (the
        source's SHA-256 prefix that names the file `get_cached_path` gives, and whether it
        runs interpreted). Others: a SHA-256 of the backend's toolkit versions and the source.
        Equal keys mean the same code.

        Args:
            config: As for `get_cached_path`.
        """
        return self.backend.compiled_cache_key(self._first_variant(config).compiled)

    def _implicit_config(self, config: Config | dict | None) -> Config | dict | None:
        """``config``, or when it is None the config a call would run: the active one, else the
        kernel's only given config, else None (the default config)."""
        if config is not None:
            return config
        if self._config is not None:
            return self._config
        if len(self.kernel.configs) == 1:
            return self.kernel.configs[0]
        return None

    def _first_variant(self, config: Config | dict | None) -> _CompiledTrace:
        """The variant `to_code` shows for ``config`` (None: `_implicit_config`)."""
        config = self.normalize(self._implicit_config(config))
        self.compile_config(config)
        return self._variants[config][0]

    def _trace_for_config(self, config: Config, args: tuple) -> None:
        def compile_variant(values: tuple, args: tuple) -> None:
            self._variant_for(config, values, args)

        self._run_host_for_trace(config, args, compile_variant)

    def _variant_for(
        self, config: Config, values: Sequence[Any], args: Sequence[Any]
    ) -> _CompiledTrace:
        with self._lock:
            return self._find_or_trace_variant(config, values, args)

    def _find_or_trace_variant(
        self, config: Config, values: Sequence[Any], args: Sequence[Any]
    ) -> _CompiledTrace:
        self._drop_stale_variants(config)
        variants = self._variants.setdefault(config, [])
        for variant in variants:
            full_values = _launch_values(variant.ir, values)
            if full_values is not None and variant.matches(full_values):
                return variant
        full_values = _launch_values(self._discovery_ir, values)
        if full_values is not None and _guards_match(self._discovery_ir, full_values):
            ir = self._discovery_ir
        else:
            ir = self._trace(values)
            self._check_config_fits(ir, values)
        compiled = self.backend.compile(ir, config)
        full_values = _with_lifted(values, ir.lifted)
        if self.settings.print_output_code and getattr(compiled, "source", None):
            print(compiled.source, file=sys.stderr)
        tensor_guards, constant_guards = ir.guards
        variant = _CompiledTrace(ir, compiled, tensor_guards, constant_guards, _name_guards(ir))
        # the identity shortcut trusts the key's layouts, which host code like `x.t_()` changes
        trusted = self.settings.static_shapes and not ast_rewrite.changes_tensor_metadata(
            self.split
        )
        variant.specialize_guards(full_values, args, trusted)
        variants.append(variant)
        self._variant_index.setdefault(config, _VariantIndex()).add(variant)
        return variant

    def _check_config_fits(self, ir: KernelIR, values: Sequence[Any]) -> None:
        """Refuse a variant traced anew whose loops take other config entries than the
        discovery trace's (more block sizes, another loop nest: e.g. a loop over a list the host
        code built longer), which no config of this bound kernel can give. A mere count of loads
        or stores may differ: backends fill such per-access entries with defaults."""
        discovery = self._discovery_ir
        if _loop_shape(ir) == _loop_shape(discovery):
            return
        from helion.autotuner.config_spec import STRUCTURAL_FIELDS

        spec = self._derive_spec(ir)
        differing = [
            f"{name}: {spec.length(name)} instead of {self.config_spec.length(name)}"
            for name in sorted(STRUCTURAL_FIELDS)
            if spec.length(name) != self.config_spec.length(name)
        ]
        if not differing:
            return
        traced = dict(discovery.structure_guards)
        changed = []
        for index, structure in ir.structure_guards:
            if traced.get(index) != structure:
                name = self.split.device_inputs[index]
                was = self._discovery_shapes.get(index)
                before = f", traced first with {was}" if was is not None else ""
                changed.append(f"{name!r} ({describe_structure(values[index])}{before})")
        if changed:
            what = f"the container(s) {', '.join(changed)}"
            raise exc.VariantConfigMismatch(self.kernel.name, what, "; ".join(differing))
        if not self.settings.static_shapes:
            # dimensions of one size share a block (two `:` slices of equal length share one
            # reduction dimension), so sizes equal at one call and not at another change loops
            raise exc.VariantConfigMismatch(
                self.kernel.name,
                "new sizes (static_shapes=False)",
                "; ".join(differing),
                hint="Dimensions of equal size share one block size or reduction dimension "
                "(e.g. x[tile, :] and y[tile, :] with as many columns), so sizes that are "
                "equal at one call and differ at another trace to other loops. Use "
                "static_shapes=True, or give @helion.kernel a key= function that returns "
                "whether those sizes are equal.",
            )
        raise exc.VariantConfigMismatch(self.kernel.name, "other host values", "; ".join(differing))

    def _drop_stale_variants(self, config: Config) -> None:
        """Forget the variants of ``config`` whose functions were redefined since they were
        traced (`_CompiledTrace.name_guards`), and rebuild its runners, whose guarded launch
        may be one of them: calls then take the fast path of the variant traced anew."""
        variants = self._variants.get(config)
        if not variants or all(variant.names_hold() for variant in variants):
            return
        variants[:] = [variant for variant in variants if variant.names_hold()]
        self._variant_index.setdefault(config, _VariantIndex()).rebuild(variants)
        if config in self._runners:
            self._build_runners(config)

    # -- calling --------------------------------------------------------------------------------

    def _runner(self, config: Config) -> Callable[..., Any]:
        """The host function wired to this config's compiled variants (built once per config)."""
        return self._runner_pair(config)[0]

    def _runner_pair(self, config: Config) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """(run, run_keyed): ``run(*args)`` checks every guard; ``run_keyed(args)`` takes the
        argument tuple of a call known to have this bound kernel's specialization key."""
        runners = self._runners.get(config)
        if runners is not None:
            return runners
        with self._lock:
            runners = self._runners.get(config)
            return runners if runners is not None else self._build_runners(config)

    def _build_runners(self, config: Config) -> tuple[Callable[..., Any], Callable[..., Any]]:
        variants = self._variants.setdefault(config, [])
        index = self._variant_index.setdefault(config, _VariantIndex())
        discovery = self._discovery_ir
        mode = HostMode(self, config)
        # launches of the first variant before the host code calls its guarded launch (a
        # backend may set up its `fast_call` at the second); a kernel with lifted tensors or
        # container host values keeps the loop below
        launches_left = 0 if discovery.lifted or discovery.structure_guards else 2

        def launch(*values: Any) -> None:
            nonlocal launches_left
            args = mode.args
            found = index.find(values, args) if len(variants) > _SCANNED_VARIANTS else None
            if found is not None:
                variant, full = found, values
            else:
                # each variant reads the leaves of containers its own way (`KernelIR.lifted`):
                # a container the host code built of another length is another variant's
                for variant in variants:
                    full = _launch_values(variant.ir, values)
                    if full is not None and variant.matches_call(full, args):
                        break
                else:
                    variant = self._variant_for(config, values, args)
                    full = _with_lifted(values, variant.ir.lifted)
            values = full
            if variant.ir.rng_seed is not None:
                # torch.rand in device code: a seed from torch's CPU generator, per launch
                values = (*values, draw_call_seed())
            variant.compiled(*values)
            if launches_left and variant is variants[0]:
                launches_left -= 1
                if not launches_left or getattr(variant.compiled, "fast_call", None):
                    launches_left = 0
                    guarded = variant.guarded_launch(values, mode, launch)
                    if guarded is not None:
                        self._wire(config, mode, guarded)

        return self._wire(config, mode, launch)

    def _wire(
        self, config: Config, mode: HostMode, device_call: Callable[..., Any]
    ) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """The runners of ``config`` with the host code's device loops calling ``device_call``
        (and made the active ones where ``config`` is the active config)."""
        from helion.runtime.host_ops import watch_first_call

        def unwatched(plain: Callable[..., Any]) -> None:
            nonlocal host
            host = plain

        def make_host(call: Callable[..., Any]) -> Callable[..., Any]:
            return ast_rewrite.make_host_function(self.split, self._host_factory, call)

        # the first call warns of host lines that compute on tensors (TensorOperationInWrapper)
        host = watch_first_call(make_host, device_call, self.settings, unwatched)
        state = _context_state
        free = mode.free

        def run_beside(args: tuple) -> Any:
            # another call holds `mode`: this one counts its block sizes in a mode of its own
            # (the device call may still read `mode.args`, the other call's: the guards' identity
            # shortcut then fails, or holds for that very tensor, and they compare shapes)
            previous = getattr(state, "mode", None)
            state.mode = HostMode(self, config)
            try:
                return host(*args)
            finally:
                state.mode = previous

        def make_run(keyed: bool) -> Callable[[tuple], Any]:
            # keyed: the caller (`Kernel.__call__`) found this bound kernel by the arguments'
            # specialization key, so the guards may trust the arguments' identities. It takes
            # the call's argument tuple as it is (no unpacking and packing again: 0.05 us)
            def run(args: tuple) -> Any:
                try:
                    free.pop()
                except IndexError:
                    return run_beside(args)
                mode.next_block = 0
                mode.args = args if keyed else _NO_ARGUMENTS
                previous = getattr(state, "mode", None)
                state.mode = mode
                try:
                    return host(*args)
                finally:
                    state.mode = previous
                    mode.args = _NO_ARGUMENTS  # the caller's tensors are not ours to keep alive
                    free.append(None)

            return run

        run_unkeyed = make_run(False)
        runners = self._runners[config] = (lambda *args: run_unkeyed(args), make_run(True))
        if self._active_runner is not None and self._config == config:
            self._active_runner, self._active_keyed = runners
        return runners

    def _run(self, config: Config, args: Sequence[Any]) -> Any:
        return self._runner(config)(*args)

    def __call__(self, *args: Any) -> Any:
        run = self._active_runner
        if run is None:
            run = self._activate(args)[0]
        return run(*args)

    def warm_call(self, args: tuple, static: Any) -> Callable[[tuple, Any], Any] | None:
        """`Kernel.__call__`'s warm path for this bound kernel (`_compile_warm_call`), built once
        per ``static_shapes`` value and inference mode from arguments whose key is this bound
        kernel's. Inference mode changes the dispatch keys the C++ tensor match compares: a
        warm call built outside it turns every call inside it away, so calls made there (an
        inference server after a warm-up outside it) get a warm call of their own."""
        mode = (static, _inference_mode())
        try:
            return self._warm_calls[mode]
        except KeyError:
            warm = self._warm_calls[mode] = _compile_warm_call(self, args, static)
            return warm

    def _call_keyed(self, args: tuple) -> Any:
        """`__call__` for arguments whose specialization key is this bound kernel's."""
        run = self._active_keyed
        if run is None:
            run = self._activate(args)[1]
        return run(args)

    def _activate(self, args: tuple) -> tuple[Callable[..., Any], Callable[..., Any]]:
        with self._lock, self._trace_args.using(args):
            config = self._config or self.ensure_config_exists(args)
            runners = self._runner_pair(config)
            if self.settings.print_repro and config not in self._repro_printed:
                from helion.runtime.repro import print_repro

                self._repro_printed.add(config)
                print_repro(self, config, args)
            self._active_runner, self._active_keyed = runners
            return runners

    def run_ref(self, *args: Any) -> Any:
        from helion.eager import run_eager

        return run_eager(self.kernel, args)


class _TraceArguments:
    """The arguments a bound kernel traces a config's code with (`compile_config`, tuning):
    those of the call in progress (`using`), else the first call's, held weakly so that a
    kernel does not keep the tensors of its first call alive. A tensor freed since is stood in
    for by a zeroed one of its shape, strides, dtype and device: tracing reads no more than
    that, and a variant traced from stand-ins is guarded like any other."""

    def __init__(self, args: tuple) -> None:
        self._first = [_hold_weakly(arg) for arg in args]
        self._in_use: tuple | None = None

    def freed(self) -> bool:
        """Whether a tensor of the held arguments was freed (stood in for by zeros)."""
        return any(_is_freed(held) for held in self._first)

    def refresh(self, args: Sequence[Any]) -> None:
        """Hold ``args`` (of this bound kernel's key: `Kernel.bind`) instead, where a held
        tensor was freed: a later `compile_config` then traces from live tensors."""
        if self.freed():
            self._first = [_hold_weakly(arg) for arg in args]

    @contextlib.contextmanager
    def using(self, args: Sequence[Any]) -> Iterator[None]:
        previous, self._in_use = self._in_use, tuple(args)
        try:
            yield
        finally:
            self._in_use = previous

    def resolve(self) -> tuple:
        if self._in_use is not None:
            return self._in_use
        return tuple(_resolve_held(held) for held in self._first)


class _WeakTensor:
    __slots__ = ("meta", "ref")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.ref = weakref.ref(tensor)
        self.meta = (tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype, tensor.device)


def _hold_weakly(arg: Any) -> Any:
    if isinstance(arg, torch.Tensor):
        try:
            return _WeakTensor(arg)
        except (TypeError, RuntimeError):
            return arg  # a tensor without strides (sparse): held as it is
    if type(arg) in (list, tuple):
        return type(arg)(_hold_weakly(item) for item in arg)
    return arg


def _is_freed(held: Any) -> bool:
    if isinstance(held, _WeakTensor):
        return held.ref() is None
    if type(held) in (list, tuple):
        return any(_is_freed(item) for item in held)
    return False


def _resolve_held(held: Any) -> Any:
    if isinstance(held, _WeakTensor):
        tensor = held.ref()
        if tensor is not None:
            return tensor
        shape, stride, dtype, device = held.meta
        return torch.empty_strided(shape, stride, dtype=dtype, device=device).zero_()
    if type(held) in (list, tuple):
        return type(held)(_resolve_held(item) for item in held)
    return held


class _NoArguments:
    """The arguments the guards see on a call not looked up by key: none is identical to a value."""

    def __getitem__(self, index: int) -> object:
        return _NO_ARGUMENT

    def __iter__(self) -> Iterator[object]:
        return iter(())  # so a variant traced on such a call takes no identity shortcut


_NO_ARGUMENT = object()
_NO_ARGUMENTS = _NoArguments()


def _with_lifted(values: Sequence[Any], lifted: list[tuple]) -> tuple:
    if not lifted:
        return tuple(values)
    from helion.frontend.tracer import resolve_lifted

    return tuple(values) + tuple(resolve_lifted(values, source) for source in lifted)


def _launch_values(ir: KernelIR, values: Sequence[Any]) -> tuple | None:
    """The values the code traced as ``ir`` is launched with: the host values, then the leaves
    it reads from their containers; None where a container has another structure than
    traced (the leaves at its paths would be others, or missing)."""
    for index, structure in ir.structure_guards:
        if container_structure(values[index]) != structure:
            return None
    return _with_lifted(values, ir.lifted)


def _loop_shape(ir: KernelIR) -> tuple:
    """What the structural config entries of ``ir`` follow (`_check_config_fits`)."""
    return (
        tuple(block.kind for block in ir.block_sizes),
        tuple((loop.top_level, len(loop.block_ids)) for loop in ir.loops),
    )


def _guards_match(ir: KernelIR, values: Sequence[Any]) -> bool:
    tensor_guards, constant_guards = ir.guards
    trace = _CompiledTrace(ir, None, tensor_guards, constant_guards, _name_guards(ir))
    return trace.matches(values)


def _name_guards(ir: KernelIR) -> tuple[tuple[dict[str, Any], str, Any], ...]:
    """What a trace read by name and must see again to be reused: the names `hl.triton_kernel`
    calls resolved (`watched_names`) and the globals it baked in (`BoundKernel._baked_globals`)."""
    return watched_names(ir) + getattr(ir, "baked_globals", ())


@functools.lru_cache(maxsize=1)
def _helion_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("helion-core")
    except importlib.metadata.PackageNotFoundError:
        return "0"


@functools.lru_cache(maxsize=1)
def _device_builtins_cached() -> dict[str, Any]:
    import helion.language as hl

    return {
        "range": hl.grid,
        "print": lambda *values: hl.device_print(
            *(values if values and isinstance(values[0], str) else ("", *values))
        ),
        "breakpoint": hl.breakpoint,
        "min": hl._builtin_min,
        "max": hl._builtin_max,
    }


def _device_builtins() -> dict[str, Any]:
    return dict(_device_builtins_cached())


class _KernelModule(types.ModuleType):
    """This module, callable: public Helion's runtime exports its decorator as
    ``helion.runtime.kernel``, the name this module has, so calling the module is calling
    `helion.kernel` (``helion.runtime.kernel(fn, config=...)``) while its attributes stay
    reachable (``from helion.runtime import kernel; kernel.Kernel``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from helion import kernel as kernel_decorator

        return kernel_decorator(*args, **kwargs)


sys.modules[__name__].__class__ = _KernelModule
