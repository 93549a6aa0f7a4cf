"""`OutputCodeOptions`, and the self-contained modules `BoundKernel.to_code` emits with them.

``to_code()`` returns the module a backend loads: its entry point is a launcher that the
runtime calls with the host values of the device loops, and it may lean on helion's packages.
``to_code(options=OutputCodeOptions(allow_helion_deps=False))`` returns a module that stands on
its own: the backend's kernel (:meth:`helion.backends.base.Backend.export_module`, which writes
in whatever runtime helpers it needs) followed by the kernel's host code, made into a function
of the kernel's own name and parameters. That module imports torch and the backend's toolkit
only, never helion.

The host code is the user's, rewritten where it calls helion: ``hl.register_block_size`` and
``hl.register_tunable`` give the config's values, ``hl.specialize``, ``helion.cdiv``,
``helion.next_power_of_2`` and ``helion.runtime.get_num_sm``/``get_num_xcd`` are copied in.
The names it reads from its module become imports (modules, functions of other importable
modules) or literals (numbers, strings, dtypes); anything else is refused with
:class:`helion.exc.HostCodeNotExportable`. The module is specialized as the compiled code is:
to the shapes, strides and dtypes (and baked-in host values) the kernel was traced with, and to
the lengths and keys of its container arguments, whose leaves its launch reads by their paths;
the launch checks them all, raising ``ValueError`` for other arguments.
"""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import inspect
import keyword
import math
import sys
import textwrap
import types
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import Iterable

import torch

from helion import exc
from helion.language import ConstExpr

if TYPE_CHECKING:
    from helion.backends.base import ExportedModule
    from helion.runtime.config import Config
    from helion.runtime.kernel import BoundKernel


@dataclasses.dataclass(frozen=True)
class OutputCodeOptions:
    """Options of ``BoundKernel.to_code(config, options=...)``.

    Attributes:
        allow_helion_deps: True (the default): the module the backend loads, which may import
            helion's packages. False: a self-contained module that imports only torch and the
            backend's toolkit (Triton, JAX), with the kernel's host code as a function of the
            kernel's name and parameters; backends that cannot emit one raise
            :class:`helion.exc.OutputCodeUnsupported`.
        jax_fn: Pallas only: a module of JAX alone whose function takes the device code's
            tensors as JAX arrays and returns the new values of those it writes (no torch, no
            host code). Other backends raise :class:`helion.exc.OutputCodeUnsupported`.
    """

    allow_helion_deps: bool = True
    jax_fn: bool = False


DEFAULT_OPTIONS = OutputCodeOptions()


def export_source(
    bound: BoundKernel, config: Config, variant: Any, options: OutputCodeOptions
) -> str:
    """The source ``to_code`` returns for non-default ``options`` (see the module docstring).

    Args:
        bound: The bound kernel.
        config: A normalized config, already compiled.
        variant: The bound kernel's first compiled variant of ``config`` (its IR, guards and
            compiled kernel).
        options: What to emit.
    """
    exported = bound.backend.export_module(
        variant.compiled, variant.ir, config, jax_fn=options.jax_fn
    )
    source = exported.source
    if exported.launcher is not None:
        host = _HostModuleWriter(bound, config, variant, exported).write()
        source = f"{source.rstrip()}\n\n\n{host}"
    if not options.allow_helion_deps:
        check_self_contained(source, bound.backend.name)
    return source


def check_self_contained(source: str, backend_name: str) -> None:
    """Raise if ``source`` imports a helion package anywhere (a backend's export went wrong)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise exc.InternalError(
            f"the self-contained module of the {backend_name!r} backend does not parse: {error}"
        ) from error
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module]
        for module in modules:
            if _is_helion_module_name(module):
                raise exc.InternalError(
                    f"the self-contained module of the {backend_name!r} backend imports {module}"
                )


def _is_helion_module_name(name: str) -> bool:
    root = name.split(".")[0]
    return root == "helion" or root.startswith("helion_")


# -- copying functions into a module ------------------------------------------------------------


class Embedder:
    """Copies functions (and what they read from their modules) into a generated module.

    Each function is written under a fresh name (``taken`` holds the names already used in the
    module), as are the module-level functions and literal constants it reads; the modules it
    reads become imports. Annotations are dropped (the generated module has no
    ``from __future__ import annotations`` to keep them unevaluated), and decorators are
    refused. Backends use it to write their runtime helpers into self-contained modules.
    """

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)
        self.imports: dict[str, str] = {}  # alias -> module name
        self.blocks: list[str] = []
        self._names: dict[tuple[str, str], str] = {}

    def fresh(self, base: str) -> str:
        name = base
        counter = 1
        while name in self.taken:
            name = f"{base}_{counter}"
            counter += 1
        self.taken.add(name)
        return name

    def function(self, fn: Callable) -> str:
        """Copy ``fn`` (a plain module-level function) in; returns the name it has there."""
        key = (fn.__module__, fn.__qualname__)
        known = self._names.get(key)
        if known is not None:
            return known
        if "." in fn.__qualname__ or not isinstance(fn, types.FunctionType):
            raise exc.InternalError(
                f"cannot copy {fn!r} into a module: not a module-level function"
            )
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
        if not isinstance(tree, ast.FunctionDef) or tree.decorator_list:
            raise exc.InternalError(f"cannot copy {fn.__qualname__} into a module: decorated")
        name = self._names[key] = self.fresh(f"_helion_{fn.__name__.lstrip('_')}")
        tree.name = name
        _strip_annotations(tree)
        _shorten_docstring(tree, f"{fn.__module__}.{fn.__qualname__}")
        renames: dict[str, str] = {}
        bound_here = _bound_names(tree)
        for loaded in _loaded_globals(tree, bound_here):
            renamed = self._global(loaded, fn.__globals__, fn.__qualname__)
            if renamed != loaded:
                renames[loaded] = renamed
        _rename_globals(tree, renames, bound_here)
        self.blocks.append(ast.unparse(tree))
        return name

    def _global(self, name: str, namespace: dict[str, Any], owner: str) -> str:
        if name not in namespace:
            if hasattr(builtins, name):
                return name
            raise exc.InternalError(f"{owner} reads {name!r}, which its module does not define")
        value = namespace[name]
        if isinstance(value, types.ModuleType):
            return self.module(name, value)
        if isinstance(value, types.FunctionType):
            return self.function(value)
        text = literal_source(value)
        if text is None:
            raise exc.InternalError(f"{owner} reads {name!r}, which cannot be copied: {value!r}")
        key = (namespace.get("__name__", "?"), name)
        known = self._names.get(key)
        if known is None:
            known = self._names[key] = self.fresh(f"_helion_{name.lstrip('_')}")
            if "torch." in text:
                self.module("torch", torch)
            self.blocks.append(f"{known} = {text}")
        return known

    def module(self, alias: str, module: types.ModuleType) -> str:
        """Import ``module`` as ``alias`` in the generated module; returns the alias."""
        if _is_helion_module_name(module.__name__):
            raise exc.InternalError(f"cannot import {module.__name__} into a self-contained module")
        current = self.imports.get(alias)
        if current is None:
            self.imports[alias] = module.__name__
        elif current != module.__name__:
            raise exc.InternalError(f"two modules imported as {alias!r}")
        return alias

    def import_lines(self, present: str = "") -> list[str]:
        """The import statements of the modules used, less those ``present`` already has."""
        lines = []
        for alias, module in sorted(self.imports.items()):
            line = _import_line(module, alias)
            if _has_line(present, line):
                continue
            lines.append(line)
        return lines


def _has_line(source: str, line: str) -> bool:
    return any(existing.strip() == line for existing in source.splitlines())


def literal_source(value: Any, leaf: Callable[[Any], str | None] | None = None) -> str | None:
    """Python source that evaluates to ``value`` (torch names need ``import torch``), or None.

    ``leaf``, where given, is asked first about ``value`` and every item inside it (the repro
    script writes tensors with it): its text is taken, and None leaves the value to the rules
    here."""
    if leaf is not None:
        text = leaf(value)
        if text is not None:
            return text
    if value is None or isinstance(value, (bool, str, bytes)):
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(float(value))
    if isinstance(value, complex):
        return f"complex({literal_source(value.real)}, {literal_source(value.imag)})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [literal_source(item, leaf) for item in value]
        if any(item is None for item in items):
            return None
        if isinstance(value, list):
            return f"[{', '.join(items)}]"  # type: ignore[arg-type]
        if isinstance(value, (set, frozenset)):
            body = ", ".join(items)  # type: ignore[arg-type]
            return f"{type(value).__name__}([{body}])"
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"  # type: ignore[arg-type]
    if type(value) is dict:
        parts = []
        for key, item in value.items():
            key_text, item_text = literal_source(key), literal_source(item, leaf)
            if key_text is None or item_text is None:
                return None
            parts.append(f"{key_text}: {item_text}")
        return "{" + ", ".join(parts) + "}"
    return None


def _shorten_docstring(tree: ast.FunctionDef, origin: str) -> None:
    """Keep a copied function's summary line, and say where it comes from."""
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        summary = first.value.value.strip().splitlines()[0] if first.value.value.strip() else ""
        first.value.value = f"{summary} (a copy of {origin})"


def _strip_annotations(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, ast.arg):
            node.annotation = None
    for node in list(ast.walk(tree)):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list) and any(isinstance(item, ast.AnnAssign) for item in value):
                setattr(node, field, [_unannotated(item) for item in value])


def _unannotated(stmt: ast.stmt) -> ast.stmt:
    if not isinstance(stmt, ast.AnnAssign):
        return stmt
    if stmt.value is None:
        return ast.copy_location(ast.Pass(), stmt)
    return ast.copy_location(ast.Assign(targets=[stmt.target], value=stmt.value), stmt)


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the code binds anywhere inside it (parameters, assignments, loop and
    comprehension targets, nested defs, imports): what is not among them is read from the
    module."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node is not tree:
                bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def _loaded_globals(tree: ast.AST, bound: set[str]) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id not in bound
            and node.id not in found
        ):
            found.append(node.id)
    return found


def _rename_globals(tree: ast.AST, renames: dict[str, str], bound: set[str]) -> None:
    if not renames:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in renames and node.id not in bound:
            node.id = renames[node.id]


# -- the host function --------------------------------------------------------------------------


def _specialize(value):  # type: ignore[no-untyped-def]
    """`hl.specialize` in a self-contained module: the value as an int (a tuple of ints)."""
    if isinstance(value, (list, tuple, torch.Size)):
        return tuple(int(item) for item in value)
    return int(value)


class _HostModuleWriter:
    """Writes the kernel's host code as a function of a self-contained module (see the module
    docstring), after the backend's exported source."""

    def __init__(
        self, bound: BoundKernel, config: Config, variant: Any, exported: ExportedModule
    ) -> None:
        self.bound = bound
        self.config = config
        self.variant = variant
        self.exported = exported
        self.split = bound.split
        self.fn = bound.kernel.fn
        self.namespace: dict[str, Any] = self.fn.__globals__
        self.name = self.split.source.func_def.name
        self.source_names = module_names(exported.source)
        self.embedder = Embedder(self.source_names | {self.name})
        self.preamble: list[str] = []  # module-level lines for the globals the host code reads
        self.generated: set[str] = set()  # names this writer made up (helpers, the launch)

    def refuse(self, why: str, node: ast.AST | None = None) -> exc.HostCodeNotExportable:
        loc = self.split.source.location(node) if node is not None else None
        return exc.HostCodeNotExportable(self.bound.kernel.name, why, loc=loc)

    def write(self) -> str:
        import helion
        import helion.language as hl
        from helion.runtime import hardware

        self.known: dict[Any, Callable[[ast.Call], ast.expr]] = {
            hl.register_block_size: self._block_size_call,
            hl.register_tunable: self._tunable_call,
            hl.specialize: lambda call: self._helper_call(_specialize, call),
            helion.cdiv: lambda call: self._helper_call(helion.cdiv, call),
            helion.next_power_of_2: lambda call: self._helper_call(helion.next_power_of_2, call),
            hardware.get_num_sm: lambda call: self._helper_call(hardware.get_num_sm, call),
            hardware.get_num_xcd: lambda call: self._helper_call(hardware.get_num_xcd, call),
        }
        launcher = self.embedder.fresh(f"_helion_launcher_{self.name}")
        launch = self.embedder.fresh(f"_helion_launch_{self.name}")
        self.generated |= {launcher, launch}
        host = self._host_function(launch)
        launch_source = self._launch_function(launch, launcher)
        lines = [
            f"# -- the host code of {self.name!r}, which runs the kernel above",
            *self.embedder.import_lines(self.exported.source),
            *sorted(self.preamble, key=lambda line: not line.startswith(("import ", "from "))),
            f"{launcher} = {self.exported.launcher}",
        ]
        for block in self.embedder.blocks:
            lines += ["", "", block]
        lines += ["", "", launch_source, "", "", ast.unparse(host)]
        return "\n".join(lines) + "\n"

    # the host function

    def _host_function(self, launch: str) -> ast.FunctionDef:
        split = self.split
        func = split.source.func_def
        self.block_sizes_name: str | None = None
        self.locals = set(split.param_names) | _bound_names(
            ast.Module(body=[*split.host_before, *split.host_after], type_ignores=[])
        )
        body = [self._rewrite(stmt) for stmt in copy.deepcopy(split.host_before)]
        call = ast.Expr(
            ast.Call(
                func=ast.Name(launch, ast.Load()),
                args=[ast.Name(name, ast.Load()) for name in split.device_inputs],
                keywords=[],
            )
        )
        after = [self._rewrite(stmt) for stmt in copy.deepcopy(split.host_after)]
        body = [*body, call, *after]
        if self.block_sizes_name is not None:
            sizes = self._registered_block_sizes()
            docstring = (
                bool(body)
                and isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
            )
            body.insert(
                1 if docstring else 0,
                ast.Assign(
                    targets=[ast.Name(self.block_sizes_name, ast.Store())],
                    value=ast.parse(f"iter({sizes!r})", mode="eval").body,
                ),
            )
        arguments = copy.deepcopy(func.args)
        for arg in [*arguments.posonlyargs, *arguments.args]:
            arg.annotation = None
        arguments.defaults = [self._default(value, node) for value, node in self._defaults()]
        host = ast.FunctionDef(
            name=self.name,
            args=arguments,
            body=body,
            decorator_list=[],
            returns=None,
            type_params=[],
        )
        self._bind_globals(host)
        return ast.fix_missing_locations(host)

    def _defaults(self) -> list[tuple[Any, ast.AST]]:
        values = self.fn.__defaults__ or ()
        nodes = self.split.source.func_def.args.defaults
        return list(zip(values, nodes, strict=False))

    def _default(self, value: Any, node: ast.AST) -> ast.expr:
        text = literal_source(value)
        if text is None:
            raise self.refuse(f"the default value {value!r} is not a literal", node)
        if "torch." in text:
            self.embedder.module("torch", torch)
        return ast.parse(text, mode="eval").body

    def _rewrite(self, stmt: ast.stmt) -> ast.stmt:
        writer = self

        class Calls(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                self.generic_visit(node)
                target = writer._static_value(node.func)
                for known, rewrite in writer.known.items():
                    if target is known:
                        return ast.copy_location(rewrite(node), node)
                return node

        return Calls().visit(stmt)

    def _static_value(self, node: ast.expr) -> Any:
        """What a `name.attr.attr` expression of the host code names, or None (a local, a
        call, anything that would run code to find out)."""
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return None
            if node.id in self.namespace:
                return self.namespace[node.id]
            return getattr(builtins, node.id, None)
        if isinstance(node, ast.Attribute):
            base = self._static_value(node.value)
            if base is None or not isinstance(base, types.ModuleType):
                return None
            return getattr(base, node.attr, None)
        return None

    def _helper_call(self, fn: Callable, call: ast.Call) -> ast.expr:
        name = self.embedder.function(fn)
        self.generated.add(name)
        return ast.Call(func=ast.Name(name, ast.Load()), args=call.args, keywords=call.keywords)

    def _block_size_call(self, call: ast.Call) -> ast.expr:
        if self.block_sizes_name is None:
            self.block_sizes_name = self.embedder.fresh("_helion_block_sizes")
            self.locals.add(self.block_sizes_name)
            self.generated.add(self.block_sizes_name)
        # each call takes the next registered block's size, as `HostMode` counts them
        return ast.Call(
            func=ast.Name("next", ast.Load()),
            args=[ast.Name(self.block_sizes_name, ast.Load())],
            keywords=[],
        )

    def _registered_block_sizes(self) -> tuple[int, ...]:
        blocks = sorted(self.bound._host_blocks_by_id)
        sizes = self.config.get("block_sizes") or []
        return tuple(int(sizes[block]) for block in blocks)

    def _tunable_call(self, call: ast.Call) -> ast.expr:
        first = call.args[0] if call.args else None
        if not isinstance(first, ast.Constant) or not isinstance(first.value, str):
            raise self.refuse(
                "hl.register_tunable is called with a name that is not a literal", call
            )
        if first.value not in self.config:
            raise self.refuse(f"the config has no value for the tunable {first.value!r}", call)
        text = literal_source(self.config[first.value])
        if text is None:
            raise self.refuse(f"the value of the tunable {first.value!r} is not a literal", call)
        return ast.parse(text, mode="eval").body

    def _bind_globals(self, host: ast.FunctionDef) -> None:
        """Give every name the host code reads from its module a definition here (renamed
        where the backend's source already binds the name to something else)."""
        bound = _bound_names(host)
        renames: dict[str, str] = {}
        seen: set[str] = set()
        for node in ast.walk(host):
            if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
                continue
            name = node.id
            if name in bound or name in seen or name in self.generated:
                continue
            seen.add(name)
            renamed = self._global(name, node)
            if renamed != name:
                renames[name] = renamed
        _rename_globals(host, renames, bound)

    def _global(self, name: str, node: ast.AST) -> str:
        if name not in self.namespace:
            if hasattr(builtins, name) and name not in self.source_names:
                return name
            raise self.refuse(f"{name!r} is not defined", node)
        value = self.namespace[name]
        if isinstance(value, types.ModuleType):
            if _is_helion_module_name(value.__name__):
                raise self.refuse(f"it uses {value.__name__} ({name!r})", node)
            module_name = value.__name__
            if name in self.source_names and _has_line(
                self.exported.source, _import_line(module_name, name)
            ):
                return name  # the backend's source imports it under this name already
            name = self._fresh_global(name)
            self.preamble.append(_import_line(module_name, name))
            return name
        from helion.runtime.kernel import Kernel

        if isinstance(value, Kernel) or _is_helion_module_name(type(value).__module__):
            raise self.refuse(f"it uses {name!r}, a helion object", node)
        module = getattr(value, "__module__", None)
        if callable(value) and isinstance(module, str):
            return self._imported(name, value, module, node)
        text = literal_source(value)
        if text is None:
            kind = type(value).__name__
            raise self.refuse(f"it reads {name!r}, a {kind} with no literal form", node)
        if "torch." in text:
            self.embedder.module("torch", torch)
        name = self._fresh_global(name)
        self.preamble.append(f"{name} = {text}")
        return name

    def _fresh_global(self, name: str) -> str:
        """``name`` for a module-level definition of the host code's, or a new name where the
        backend's source or a helper already binds it."""
        if name in self.embedder.taken:
            return self.embedder.fresh(f"_helion_global_{name}")
        self.embedder.taken.add(name)
        return name

    def _imported(self, name: str, value: Any, module: str, node: ast.AST) -> str:
        qualname = getattr(value, "__qualname__", getattr(value, "__name__", ""))
        if _is_helion_module_name(module):
            raise self.refuse(f"it calls {module}.{qualname}", node)
        if module == self.fn.__module__ or module == "__main__":
            raise self.refuse(
                f"it calls {qualname}, defined in the kernel's own module {module}", node
            )
        loaded = sys.modules.get(module)
        if loaded is None or "." in qualname or getattr(loaded, qualname, None) is not value:
            raise self.refuse(
                f"it calls {module}.{qualname}, which cannot be imported by name", node
            )
        name = self._fresh_global(name)
        line = f"from {module} import {qualname}"
        self.preamble.append(line if name == qualname else f"{line} as {name}")
        return name

    # the launch: the guards of the compiled variant, then the backend's launcher

    def _launch_function(self, launch: str, launcher: str) -> str:
        ir = self.variant.ir
        inputs = list(self.split.device_inputs)
        params = [f"v{i}" for i in range(len(inputs))]
        values = list(params)
        names = list(inputs)
        for source, arg in zip(ir.lifted, ir.lifted_args, strict=True):
            # the leaves of container host values, read the way `resolve_lifted` reads them
            kind, position, key = source
            if kind == "item":
                values.append(f"{params[position]}[{key}]")
            elif kind == "path":
                values.append(params[position] + self._path_source(key, inputs[position], arg))
            else:
                # a tensor a function argument captures, or one a plugin op computes: nothing
                # the module's caller passes holds it
                owner = inputs[position] if position < len(inputs) else "?"
                raise self.refuse(
                    f"its device code reads {arg.name!r} through a {kind} of {owner!r}, which "
                    "a self-contained module cannot reach"
                )
            names.append(arg.name)
        tensor_guards, constant_guards = ir.guards
        # the kernel's own arguments first: a wrong one is then named, not the output the host
        # code made from it
        parameters = set(self.split.param_names)
        tensor_guards = sorted(tensor_guards, key=lambda guard: names[guard[0]] not in parameters)
        lines = [
            f"def {launch}({', '.join(params)}):",
            f'    """Launch the kernel on its host values ({", ".join(inputs)})."""',
        ]
        uses_torch = False
        for index, structure in ir.structure_guards:
            # the containers' lengths and keys first: the leaves above are read by position
            lines += self._structure_checks(params[index], inputs[index], structure)
        for index, shape, stride, dtype in tensor_guards:
            value = values[index]
            uses_torch = True
            shape, stride = tuple(shape), tuple(stride)
            expected = (
                f"{names[index]}: this module was generated for shape {shape}, stride {stride} "
                f"and dtype {dtype}; got shape "
            )
            lines += [
                f"    if tuple({value}.shape) != {shape!r} or tuple({value}.stride()) != {stride!r}"
                f" or {value}.dtype != {dtype}:",
                f"        raise ValueError({expected!r} + str(tuple({value}.shape))"
                f" + ', stride ' + str(tuple({value}.stride()))"
                f" + ' and dtype ' + str({value}.dtype))",
            ]
        for index, expected in constant_guards:
            expected = getattr(expected, "value", expected)  # an hl.constexpr: its value
            text = literal_source(expected)
            if text is None or (isinstance(expected, float) and math.isnan(expected)):
                continue
            value = values[index]
            uses_torch = uses_torch or "torch." in text
            message = f"{names[index]}: this module was generated for the value {text}; got "
            lines += [
                f"    if {value} != {text}:",
                f"        raise ValueError({message!r} + repr({value}))",
            ]
        arguments = list(values)
        if ir.rng_seed is not None:
            # torch.rand in device code: a fresh seed from torch's generator per launch
            uses_torch = True
            arguments.append("int(torch.randint(0, 2**32, (), dtype=torch.int64))")
        if uses_torch:
            self.embedder.module("torch", torch)
        lines.append(f"    {launcher}({', '.join(arguments)})")
        return "\n".join(lines)

    def _path_source(self, path: tuple, owner: str, arg: Any) -> str:
        """Python for the steps of ``path`` (`Tracer._enter_leaf`) after the container's name."""
        text = ""
        for step, key in path:
            if step == "attr":
                if not _is_name(key):
                    raise self.refuse(f"the field {key!r} of {owner!r} is not a Python name")
                text += f".{key}"
            elif step == "index":
                text += f"[{int(key)}]"
            else:
                literal = literal_source(key)
                if literal is None:
                    raise self.refuse(
                        f"its device code reads {arg.name!r} at the key {key!r} of {owner!r}, "
                        "which has no literal form"
                    )
                text += f"[{literal}]"
        return text

    def _structure_checks(self, value: str, name: str, structure: Any, path: str = "") -> list[str]:
        """Lines raising ``ValueError`` where the container ``value`` has other lengths or keys
        than ``structure`` (`helion.containers.container_structure`) says it was traced with."""
        if not (isinstance(structure, tuple) and isinstance(structure[1], tuple)):
            return []  # a leaf: tensors and constants have guards of their own
        kind, items = structure
        if not isinstance(kind, type) or issubclass(kind, ConstExpr):
            return []
        where = f"{name}{path}"
        lines: list[str] = []
        steps: list[tuple[str, Any]] = []  # (Python after `value`, the item's structure)
        if issubclass(kind, dict):
            keys = [key for key, _ in items]
            literal = literal_source(keys)
            if literal is not None:
                message = f"{where}: this module was generated for the keys {literal}; got "
                lines += [
                    f"    if list({value}) != {literal}:",
                    f"        raise ValueError({message!r} + repr(list({value})))",
                ]
            for key, inner in items:
                text = literal_source(key)
                if text is not None:  # `_path_source` refuses it if the device code reads it
                    steps.append((f"[{text}]", inner))
        elif issubclass(kind, (list, tuple)):
            plural = "" if len(items) == 1 else "s"
            message = f"{where}: this module was generated for {len(items)} item{plural}; got "
            lines += [
                f"    if len({value}) != {len(items)}:",
                f"        raise ValueError({message!r} + str(len({value})))",
            ]
            steps = [(f"[{index}]", inner) for index, inner in enumerate(items)]
        elif dataclasses.is_dataclass(kind):
            fields = dataclasses.fields(kind)
            steps = [
                (f".{f.name}", inner)
                for f, inner in zip(fields, items, strict=True)
                if _is_name(f.name)
            ]
        for suffix, inner in steps:
            lines += self._structure_checks(value + suffix, name, inner, path + suffix)
        return lines


def _is_name(text: str) -> bool:
    return text.isidentifier() and not keyword.iskeyword(text)


def _import_line(module: str, alias: str) -> str:
    return f"import {module}" if module == alias else f"import {module} as {alias}"


def module_names(source: str) -> set[str]:
    """The names ``source`` binds at module level."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        else:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    names.add(inner.id)
    return names
