"""Helion kernels as PyTorch custom operators: `torch.compile`, autograd and fake tensors.

A `Kernel` call that PyTorch needs to see as one operation goes through a custom operator
`torch.ops.helion.<kernel name>` instead of running the kernel directly:

- inside `torch.compile` (Dynamo hands the call to a `nonstrict_trace` function, so the
  kernel is an opaque node of the graph: no graph break, and Inductor calls it as an extern op),
- when autograd must record it (grad mode on and an input requires grad),
- under a dispatch mode (`FakeTensorMode`, `make_fx`, functionalization).

One operator is defined per kernel and *call signature* (which arguments are tensors, tensor
lists, runtime scalars or baked constants, see `_Slot`). When it is defined, the kernel's host
code runs once on fake tensors with the device loops replaced by a no-op (`_FakeHostMode`); that
run gives the output structure, which returned tensors are arguments, and which arguments the
device code writes (declared as mutated in the schema). The same fake host run is the operator's
fake (meta) implementation, so output shapes, dtypes and strides match the real kernel, also
with symbolic shapes. The real implementation calls the kernel as usual.

Autograd: `Kernel.register_autograd(backward, setup_context=...)` (see `register_autograd`).
Every functional operator gets an autograd formula; without a registered backward it raises a
clear error when gradients reach it instead of silently dropping them.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import re
import threading
import weakref
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import Iterator
from typing import Sequence

import torch

from helion import exc
from helion.containers import container_items
from helion.containers import iter_tensors
from helion.containers import rebuild_container
from helion.frontend.proxies import BlockSizeInt
from helion.language import ConstExpr
from helion.language._context import active_mode

if TYPE_CHECKING:
    from helion.runtime.kernel import Kernel

NAMESPACE = "helion"

# names of helion.language functions whose first argument is a tensor the device code writes
_WRITING_CALLS = frozenset({"store", "atomic_cas", "signal", "wait"})
_RESERVED_ARG_NAMES = frozenset(
    {"out", "self", "input", "from", "to", "default", "name", "overload"}
)

_lock = threading.RLock()
_kernels: weakref.WeakValueDictionary[str, Kernel] = weakref.WeakValueDictionary()
_token_counter = itertools.count()
_used_op_names: set[str] = set()
_library: torch.library.Library | None = None
# the Dynamo entry point (a `torch._dynamo.nonstrict_trace` function), made on first use so
# that `import helion` does not import torch._dynamo
_dynamo_entry: list[Callable[..., Any]] = []


# ---------------------------------------------------------------------------------------------
# hooks called by Kernel


def track_kernel(kernel: Kernel) -> str:
    """A token naming `kernel` that can cross the Dynamo boundary (a plain string)."""
    token = f"{kernel.name}#{next(_token_counter)}"
    _kernels[token] = kernel
    kernel._torch_param_names = tuple(kernel.signature.parameters)
    return token


def needs_custom_op(args: Sequence[Any]) -> bool:
    """Whether an eager call must go through the custom op (autograd or a dispatch mode)."""
    if torch._C._len_torch_dispatch_stack():
        return True
    if not torch.is_grad_enabled():
        return False
    if torch._C._any_requires_grad(*args):
        return True
    # torch looks into flat lists only: a tensor that requires grad deeper in a container
    # (a dict, a dataclass, a nested list) must be recorded too
    return any(type(arg) not in _NO_DEEPER_TENSORS and _requires_grad_inside(arg) for arg in args)


# argument types that hold no tensor `_any_requires_grad` misses
_NO_DEEPER_TENSORS = frozenset(
    {torch.Tensor, torch.nn.Parameter, int, float, bool, str, type(None), torch.dtype}
)


def _requires_grad_inside(value: Any) -> bool:
    kind = type(value)
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        return value.requires_grad
    if kind in _NO_DEEPER_TENSORS:
        return False
    if kind is list or kind is tuple:  # the common containers without `container_items`
        return any(_requires_grad_inside(item) for item in value)
    return any(tensor.requires_grad for tensor in iter_tensors([value]))


def call_compiling(kernel: Kernel, args: tuple, kwargs: dict) -> Any:
    """`Kernel.__call__` while Dynamo traces (or AOTAutograd runs Python under torch.compile).

    Dynamo traces this function; `_traced_call` is opaque to it. A nonstrict function may
    return only tensors and numbers in tuples (not its inputs, not None), so it returns the
    operator's outputs and the shape of the kernel's result coded in ints (`_OpEntry.layout`),
    which is decoded here.
    """
    _install_dynamo_entry()
    # a dataclass crosses the boundary as a tagged tuple (`_crossing`), which pytree takes
    args = tuple(_crossing(arg) for arg in args)
    kwargs = {name: _crossing(value) for name, value in kwargs.items()}
    outputs, layout = _dynamo_entry[0](kernel._torch_token, args, kwargs)
    return _decode(layout, outputs, args, kwargs, kernel._torch_param_names)


# codes of `_OpEntry.layout`
_OUTPUT, _ARGUMENT, _NUMBER, _NONE, _TUPLE, _LIST, _ARGUMENT_LEAF = range(7)


def _decode(layout: tuple, outputs: tuple, args: tuple, kwargs: dict, names: tuple) -> Any:
    code = layout[0]
    if code == _OUTPUT:
        return outputs[layout[1]]
    if code == _ARGUMENT:
        position, item = layout[1], layout[2]
        value = args[position] if position < len(args) else kwargs[names[position]]
        return value if item < 0 else value[item]
    if code == _ARGUMENT_LEAF:  # the n-th tensor of a container argument
        position, item = layout[1], layout[2]
        value = args[position] if position < len(args) else kwargs[names[position]]
        return _tensor_leaves(value, [])[item]
    if code == _NUMBER:
        return layout[1]
    if code == _NONE:
        return None
    items = [_decode(child, outputs, args, kwargs, names) for child in layout[1:]]
    return tuple(items) if code == _TUPLE else items


def call_custom_op(kernel: Kernel, args: tuple) -> Any:
    """Run `kernel(*args)` (normalized arguments) through its custom operator."""
    entry = _entry_for(kernel, args)
    return entry.call(args)


def register_autograd(
    kernel: Kernel, backward: Callable[..., Any], setup_context: Callable[..., Any] | None
) -> None:
    if not callable(backward):
        raise TypeError(f"{kernel.name}.register_autograd: backward must be callable")
    if setup_context is not None and not callable(setup_context):
        raise TypeError(f"{kernel.name}.register_autograd: setup_context must be callable or None")
    with _lock:
        for entry in kernel._torch_ops.values():
            if entry.mutated:
                raise _mutating_backward_error(kernel, entry)
        kernel._autograd = (backward, setup_context)


def custom_op(kernel: Kernel, *args: Any, **kwargs: Any) -> torch._ops.OpOverload:
    """The custom operator that `kernel(*args, **kwargs)` runs through (defined if needed)."""
    return _entry_for(kernel, kernel.normalize_args(*args, **kwargs)).overload


# ---------------------------------------------------------------------------------------------
# Dynamo


def _install_dynamo_entry() -> bool:
    if not _dynamo_entry:
        import torch._dynamo

        with _lock:
            if not _dynamo_entry:
                _dynamo_entry.append(torch._dynamo.nonstrict_trace(_traced_call))
    return True


# Dynamo runs this function for real while tracing and treats its result as a constant, so the
# entry point exists (and is marked nonstrict) before the traced code reads it.
_install_dynamo_entry._dynamo_marked_constant = True  # type: ignore[attr-defined]


def _traced_call(token: str, args: tuple, kwargs: dict) -> tuple[tuple, tuple]:
    # ordinary Python: Dynamo does not trace it; AOTAutograd runs it on functional tensors
    kernel = _kernels.get(token)
    if kernel is None:
        raise exc.TorchIntegrationError(f"the Helion kernel {token!r} no longer exists")
    args = tuple(_crossed(arg) for arg in args)
    kwargs = {name: _crossed(value) for name, value in kwargs.items()}
    args = kernel.normalize_args(*args, **kwargs)
    entry = _entry_for(kernel, args)
    if entry.layout is None:
        raise exc.TorchIntegrationError(
            f"kernel {kernel.name!r} returns {entry.tree_spec}; under torch.compile a kernel may "
            "return tensors, numbers and None in (nested) tuples and lists only"
        )
    return entry.unpack(entry.overload(*entry.op_inputs(args))), entry.layout


# A nonstrict function takes pytree containers only, and pytree knows no dataclass the user did
# not register: one crosses as the tuple (token, *fields), the token naming its type. Dynamo
# traces `_crossing`; it runs `_dataclass_token` for real (marked constant), with the type.
_DATACLASS_TOKEN_BASE = -(2**62)  # far from any number a user's tuple starts with
_dataclass_tokens: dict[type, int] = {}
_dataclass_types: dict[int, type] = {}


def _dataclass_token(cls: type) -> int:
    with _lock:
        token = _dataclass_tokens.get(cls)
        if token is None:
            token = _dataclass_tokens[cls] = _DATACLASS_TOKEN_BASE - len(_dataclass_tokens)
            _dataclass_types[token] = cls
    return token


_dataclass_token._dynamo_marked_constant = True  # type: ignore[attr-defined]


def _crossing(value: Any) -> Any:
    """``value`` as the nonstrict function may take it: its dataclasses (at any depth) as
    tagged tuples, every other container of the same type as before."""
    if isinstance(value, torch.Tensor):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # `+ 0`: a fresh int, without the source of a constant-function result that pytree's
        # type guard cannot be made from
        token = _dataclass_token(type(value)) + 0
        fields = [_crossing(getattr(value, f.name)) for f in dataclasses.fields(value)]
        return (token, *fields)
    if isinstance(value, (list, tuple)) and not isinstance(value, ConstExpr):
        if not any(_holds_dataclass(item) for item in value):
            return value
        items = [_crossing(item) for item in value]
        if isinstance(value, tuple) and hasattr(value, "_make"):
            return value._make(items)
        return list(items) if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        if not any(_holds_dataclass(item) for item in value.values()):
            return value
        if type(value) is not dict:
            raise exc.TorchIntegrationError(
                f"a {type(value).__name__} holding a dataclass cannot cross into torch.compile's "
                "custom operator; pass a plain dict"
            )
        return {key: _crossing(item) for key, item in value.items()}
    return value


def _holds_dataclass(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return False
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_dataclass(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_dataclass(item) for item in value.values())
    return False


def _crossed(value: Any) -> Any:
    """`_crossing` undone (in the nonstrict function): the tagged tuples are dataclasses again."""
    if isinstance(value, torch.Tensor):
        return value
    if type(value) is tuple and value and type(value[0]) is int and value[0] in _dataclass_types:
        cls = _dataclass_types[value[0]]
        rebuilt = cls.__new__(cls)
        for field, item in zip(dataclasses.fields(cls), value[1:], strict=True):
            object.__setattr__(rebuilt, field.name, _crossed(item))  # frozen ones too
        return rebuilt
    if isinstance(value, dict):
        crossed = {key: _crossed(item) for key, item in value.items()}
        return value if all(crossed[key] is item for key, item in value.items()) else crossed
    if isinstance(value, (list, tuple)) and not isinstance(value, ConstExpr):
        items = [_crossed(item) for item in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        if isinstance(value, tuple) and hasattr(value, "_make"):
            return value._make(items)
        return type(value)(items)
    return value


def _tensor_leaves(value: Any, found: list) -> list:
    """The tensors in ``value`` (dicts, lists and tuples: a crossed dataclass is a tuple), in
    the order of `helion.containers.container_items`; Dynamo traces it."""
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _tensor_leaves(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tensor_leaves(item, found)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _tensor_leaves(getattr(value, field.name), found)
    return found


# ---------------------------------------------------------------------------------------------
# call signatures


@dataclasses.dataclass(frozen=True)
class _Slot:
    """How one kernel argument reaches the operator.

    kind: "tensor", "tensors" (a list/tuple of tensors), "scalar" (int/float/bool, or a
    list/tuple of ints or floats), "constant" (baked into the operator: constexprs, None,
    strings, dtypes, ...), or "container" (any other list, tuple, dict, namedtuple or
    dataclass: each tensor and number in it is an operator input of its own, `leaves`, the
    rest is baked). `container` is the sequence type to rebuild. A container's `value` is its
    skeleton: the argument with `_HOLE` for each leaf in `leaves`; `key` its signature key.
    """

    kind: str
    schema_type: str = ""
    container: type | None = None
    value: Any = None
    # a container's leaves: (schema name, how it reads in messages: `d['w']`, leaf slot)
    leaves: tuple[tuple[str, str, _Slot], ...] = ()
    key: Any = None


# where a leaf of a container argument goes (an input of the operator) in its skeleton
_HOLE = type("_Hole", (), {"__repr__": lambda self: "<operator input>"})()


def _slot_for(value: Any, constexpr: bool, name: str = "arg") -> _Slot:
    if constexpr or isinstance(value, ConstExpr):
        return _Slot("constant", value=value)
    if isinstance(value, torch.Tensor):
        return _Slot("tensor", "Tensor")
    if isinstance(value, bool):
        return _Slot("scalar", "bool")
    if isinstance(value, int) and not isinstance(value, BlockSizeInt):
        return _Slot("scalar", "SymInt")
    if isinstance(value, torch.SymInt):
        return _Slot("scalar", "SymInt")
    if isinstance(value, (float, torch.SymFloat)):
        return _Slot("scalar", "float")
    if isinstance(value, (list, tuple)) and value and not hasattr(value, "_fields"):
        if all(isinstance(v, torch.Tensor) for v in value):
            return _Slot("tensors", "Tensor[]", type(value))
        if all(isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool) for v in value):
            return _Slot("scalar", "SymInt[]", type(value))
        if all(isinstance(v, float) for v in value):
            return _Slot("scalar", "float[]", type(value))
    if container_items(value) is not None and not isinstance(value, torch.Size):
        return _container_slot(value, name)
    if callable(value) and not isinstance(value, (type, torch.dtype)):
        # baking it into an op would need one op per closure (each holds its own tensors)
        raise exc.TorchIntegrationError(
            "a function argument (e.g. an epilogue) cannot pass through a custom operator, so "
            "this call cannot be recorded by autograd, traced by torch.compile or run on fake "
            "tensors",
            hint="Call the kernel under torch.no_grad() (outside torch.compile), or pass the "
            "tensors the function uses as kernel arguments.",
        )
    return _Slot("constant", value=value)


def _container_slot(value: Any, name: str) -> _Slot:
    """The "container" slot of ``value``: its tensors and numbers, at any depth, are operator
    inputs (so that the schema can declare each tensor the kernel writes), the rest is baked."""
    leaves: list[tuple[str, str, _Slot]] = []

    def walk(item: Any, label: str, shown: str) -> tuple[Any, Any]:
        # (skeleton, signature key) of ``item``
        items = None if isinstance(item, (torch.Tensor, ConstExpr)) else container_items(item)
        if items is None:
            slot = _slot_for(item, False, label)
            if slot.kind in ("tensor", "scalar"):
                leaves.append((label, shown, slot))
                return _HOLE, _slot_key(slot)
            return item, _slot_key(slot)
        named = isinstance(item, tuple) and hasattr(item, "_fields")  # a namedtuple: `.field`
        parts = [
            walk(sub, f"{label}_{sub_label}", shown + _shown_step(step, sub_label, named))
            for step, sub_label, sub in items
        ]
        skeleton = rebuild_container(item, [part[0] for part in parts])
        key = (
            type(item),
            tuple((step, part[1]) for (step, _, _), part in zip(items, parts, strict=True)),
        )
        return skeleton, key

    skeleton, key = walk(value, name, name)
    return _Slot("container", value=skeleton, leaves=tuple(leaves), key=key)


def _shown_step(step: tuple, label: str, named: bool) -> str:
    kind, key = step
    return f".{label}" if kind == "attr" or named else f"[{key!r}]"


def _fill(skeleton: Any, inputs: Iterator[Any]) -> Any:
    """The container of ``skeleton`` (a container slot's value) with its holes taken from
    ``inputs`` in order: what the kernel gets from the operator's inputs."""
    if skeleton is _HOLE:
        return next(inputs)
    if isinstance(skeleton, (torch.Tensor, ConstExpr)):
        return skeleton
    items = container_items(skeleton)
    if items is None:
        return skeleton
    return rebuild_container(skeleton, [_fill(item, inputs) for _, _, item in items])


def _holes(skeleton: Any, value: Any, found: list) -> list:
    """The items of ``value`` (a container of ``skeleton``'s structure) at its holes, in order:
    a container argument's operator inputs. Raises ValueError for another structure."""
    if skeleton is _HOLE:
        found.append(value)
        return found
    if isinstance(skeleton, (torch.Tensor, ConstExpr)):
        return found
    items = container_items(skeleton)
    if items is None:
        return found
    values = container_items(value)
    if values is None or len(values) != len(items):
        raise ValueError(f"expected {type(skeleton).__name__}, got {type(value).__name__}")
    for (_, _, inner), (_, _, item) in zip(items, values, strict=True):
        _holes(inner, item, found)
    return found


def _slot_key(slot: _Slot) -> Any:
    if slot.kind == "container":
        return ("container", slot.key)
    if slot.kind != "constant":
        return (slot.kind, slot.schema_type, slot.container)
    value = slot.value
    try:
        hash(value)
        return ("constant", type(value), value)
    except TypeError:
        return ("constant", type(value), id(value))


def _signature(kernel: Kernel, args: Sequence[Any]) -> tuple[tuple[_Slot, ...], tuple]:
    constexprs = kernel._constexpr_params
    slots = tuple(
        _slot_for(value, name in constexprs, name)
        for name, value in zip(kernel.signature.parameters, args, strict=True)
    )
    return slots, tuple(_slot_key(s) for s in slots)


# ---------------------------------------------------------------------------------------------
# fake host runs


# what hl.register_block_size returns in a fake host run of a kernel without one fixed config
FAKE_BLOCK_SIZE = 16


class _FakeHostMode:
    """Host mode for running host code on fake tensors: tunables take the values of the
    kernel's one fixed config, else their defaults."""

    def __init__(self, config: Any) -> None:
        from helion.runtime.kernel import HostMode

        self._host = HostMode(None, None)  # type: ignore[arg-type]
        self.config = config
        self.next_block = 0

    def hl_register_block_size(self, low: Any, high: Any) -> int:
        # a plain int (not a BlockSizeInt): the device code does not run, and symbolic sizes
        # only combine with exact ints (`helion.cdiv(m, block)` with m a SymInt)
        block_id = self.next_block
        self.next_block += 1
        fixed = self.config.get("block_sizes") if self.config is not None else None
        if fixed and block_id < len(fixed):
            return int(fixed[block_id])
        return max(int(low), FAKE_BLOCK_SIZE)

    def hl_register_tunable(self, name: str, fragment: Any) -> Any:
        if self.config is not None and name in self.config:
            return self.config[name]
        return fragment.default()

    def hl_specialize(self, value: Any) -> Any:
        if isinstance(value, (list, tuple, torch.Size)):
            return tuple(int(v) for v in value)
        if isinstance(value, torch.SymInt):
            return int(value)
        return self._host.hl_specialize(value)

    def __getattr__(self, name: str) -> Any:
        # hl.tile on the host, hl.barrier, ...: the same errors as a real run
        return getattr(self._host, name)


@dataclasses.dataclass
class _HostRun:
    result: Any
    device_values: tuple  # what the device code was given (None if it was not reached)


def _host_factory(kernel: Kernel) -> Any:
    factory = kernel.__dict__.get("_torch_host_factory")
    if factory is None:
        from helion.frontend import ast_rewrite

        factory = kernel._torch_host_factory = ast_rewrite.build_host_factory(kernel.split)
    return factory


def _run_host(kernel: Kernel, args: Sequence[Any]) -> _HostRun:
    """Run the kernel's host code with the device loops replaced by a no-op."""
    from helion.frontend import ast_rewrite

    launched: list[tuple] = []

    def no_launch(*values: Any) -> None:
        launched.append(values)

    host = ast_rewrite.make_host_function(kernel.split, _host_factory(kernel), no_launch)
    host_args = [a.value if isinstance(a, ConstExpr) else a for a in args]
    try:
        config = kernel.configs[0] if len(kernel.configs) == 1 else None
        with active_mode(_FakeHostMode(config)):
            result = host(*host_args)
    except exc.Base:
        raise
    except torch._subclasses.fake_tensor.DataDependentOutputException as error:
        raise exc.TorchIntegrationError(
            f"the host code of kernel {kernel.name!r} reads tensor data ({error}), so its outputs "
            "cannot be derived on fake tensors under torch.compile / autograd"
        ) from error
    return _HostRun(result, launched[0] if launched else ())


def _plan_run(kernel: Kernel, args: Sequence[Any]) -> tuple[list, _HostRun]:
    """The one-off planning run: the host code on fresh fake copies of `args`, in a new
    FakeTensorMode with every active mode (functionalization, make_fx tracing) switched off,
    so that nothing of it lands in a graph being traced."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _disable_current_modes

    mode = FakeTensorMode(allow_non_fake_inputs=False)

    def convert(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if type(value) in (torch.Tensor, torch.nn.Parameter):
                return mode.from_tensor(value)
            with mode:
                return torch.empty_strided(
                    [_hint(s) for s in value.shape],
                    [_hint(s) for s in value.stride()],
                    dtype=value.dtype,
                    device=value.device,
                )
        if isinstance(value, ConstExpr):
            return value
        if isinstance(value, (torch.SymInt, torch.SymFloat)):
            return type(value.node.hint)(value.node.hint) if value.node.hint is not None else value
        items = container_items(value)
        if items is not None:  # lists, dicts, namedtuples, dataclasses: their leaves
            return rebuild_container(value, [convert(item) for _, _, item in items])
        return value

    with _disable_current_modes(), torch._C._DisableFuncTorch():
        fake_args = [convert(a) for a in args]
        with mode:
            return fake_args, _run_host(kernel, fake_args)


def _hint(size: Any) -> int:
    if isinstance(size, torch.SymInt):
        hint = size.node.hint
        if hint is None:
            hint = size.node.shape_env.size_hint(size.node.expr)
        return int(hint)
    return int(size)


# ---------------------------------------------------------------------------------------------
# device-code analysis


def written_leaves(kernel: Kernel) -> frozenset[tuple[str, tuple | None]]:
    """What the device code writes (subscript stores, hl.store, atomics), from its source:
    (host name, path) pairs, the path the constant steps (``("sub", key)``, ``("attr",
    name)``) from that host value to the tensor written (``()``: the value itself), or None
    for all of its tensors: a container written through a name the device code bound to its
    items (``for out in outs: out[tile] = ...``) or at a computed index (``outs[i][tile]``)."""
    cached = kernel.__dict__.get("_torch_written_leaves")
    if cached is not None:
        return cached
    inputs = set(kernel.split.device_inputs)
    nodes = [node for stmt in kernel.split.device_stmts for node in ast.walk(stmt)]
    # names bound to (items of) host values: loop targets and assignments of such items
    aliases: dict[str, set[str]] = {}
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if isinstance(node, (ast.For, ast.comprehension)):
                pairs = [(node.target, node.iter)]
            elif isinstance(node, ast.Assign):
                pairs = [(target, node.value) for target in node.targets]
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                pairs = [(node.target, node.value)]
            else:
                continue
            for target, source in pairs:
                roots = _item_roots(source, inputs, aliases)
                for name in _bound_names(target) if roots else ():
                    known = aliases.setdefault(name, set())
                    if not roots <= known:
                        known |= roots
                        changed = True
    leaves: set[tuple[str, tuple | None]] = set()
    for node in nodes:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            target = node.value
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if not (called in _WRITING_CALLS or called.startswith("atomic_")):
                continue
            target = node.args[0]
        else:
            continue
        chain = _access_chain(target)
        if chain is None:
            continue
        root, path = chain
        if root in aliases:
            leaves.update((name, None) for name in aliases[root])
        elif root in inputs:
            leaves.add((root, path))
    result = frozenset(leaves)
    kernel._torch_written_leaves = result
    return result


def _access_chain(node: ast.expr) -> tuple[str, tuple | None] | None:
    """``outs[0].w`` as ("outs", (("sub", 0), ("attr", "w"))); the path is None where a step
    is not a constant; None for anything not rooted at a name."""
    steps: list[tuple[str, Any]] = []
    known = True
    while True:
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Constant):
                steps.append(("sub", node.slice.value))
            else:
                known = False
            node = node.value
        elif isinstance(node, ast.Attribute):
            steps.append(("attr", node.attr))
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id, tuple(reversed(steps)) if known else None
        else:
            return None


# functions whose result holds items of their arguments (`for i, out in enumerate(outs)`)
_ITEM_PASSING = frozenset({"enumerate", "zip", "reversed", "list", "tuple", "iter", "sorted"})


def _item_roots(node: ast.expr, inputs: set[str], aliases: dict[str, set[str]]) -> set[str]:
    """The host names whose items ``node`` may evaluate to (its value, not arithmetic on it)."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_item_roots(item, inputs, aliases) for item in node.elts))
    if isinstance(node, ast.IfExp):
        return _item_roots(node.body, inputs, aliases) | _item_roots(node.orelse, inputs, aliases)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in _ITEM_PASSING:
            return set().union(*(_item_roots(arg, inputs, aliases) for arg in node.args))
        if isinstance(func, ast.Attribute) and func.attr in ("values", "items"):
            return _item_roots(func.value, inputs, aliases)
        return set()
    chain = _access_chain(node)
    if chain is None:
        return set()
    root = chain[0]
    if root in aliases:
        return set(aliases[root])
    return {root} if root in inputs else set()


def _bound_names(target: ast.expr) -> list[str]:
    """The names an assignment or loop target binds (a subscript or attribute binds none)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for item in target.elts for name in _bound_names(item)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


def _follow(value: Any, path: tuple) -> Any:
    """The value at ``path`` (`written_leaves`) in host value ``value``; a step into a tensor
    (a row written) stays at the tensor, and a path that does not fit gives ``value`` itself."""
    current = value
    try:
        for kind, key in path:
            if isinstance(current, torch.Tensor):
                break
            current = getattr(current, key) if kind == "attr" else current[key]
    except (AttributeError, IndexError, KeyError, TypeError):
        return value
    return current


def _written_tensors(kernel: Kernel, device_values: Sequence[Any]) -> list[torch.Tensor]:
    """The tensors among ``device_values`` (a host run's) that the device code writes."""
    by_name = dict(zip(kernel.split.device_inputs, device_values, strict=False))
    written = []
    for name, path in written_leaves(kernel):
        if name in by_name:
            value = by_name[name]
            written += iter_tensors([value if path is None else _follow(value, path)])
    return written


def _ir_written_tensors(bound: Any, device_values: Sequence[Any]) -> list[tuple[str, Any]]:
    """(name, tensor) of each tensor that the traced IR stores into, found among
    ``device_values`` (to check `written_leaves`)."""
    from helion.frontend.tracer import resolve_lifted

    ir = bound.ir
    count = len(bound.split.device_inputs)
    found = []
    for info in ir.memory_ops():
        if info.kind == "load":
            continue
        index = info.tensor.index
        if index < count:
            value = device_values[index] if index < len(device_values) else None
        else:
            source = ir.lifted[index - count]
            if source[0] not in ("item", "path"):
                continue  # a tensor a function argument captures: not an argument
            try:
                value = resolve_lifted(device_values, source)
            except (AttributeError, IndexError, KeyError, TypeError):
                continue  # a container the fake run built otherwise (the real call checks)
        if isinstance(value, torch.Tensor):
            found.append((info.tensor.name, value))
    return found


# ---------------------------------------------------------------------------------------------
# one operator


@dataclasses.dataclass
class _Leaf:
    """One leaf of the kernel's (flattened) return value."""

    # "output" (operator output `index`), "argument" (arg `index`: itself, item `item` of a
    # list, or with `item` ("leaf", n) the n-th tensor of a container), "constant"
    kind: str
    index: int = 0
    item: int | tuple | None = None
    value: Any = None


@dataclasses.dataclass(frozen=True)
class _OpInput:
    """One input of the operator: kernel argument `position`, or leaf `leaf` of it."""

    position: int
    leaf: int | None
    name: str  # in the schema
    shown: str  # in messages: `x`, `outs[0]`, `layer.weight`
    slot: _Slot


class _OpEntry:
    """The custom operator of one kernel and call signature, with the glue around it."""

    def __init__(self, kernel: Kernel, slots: tuple[_Slot, ...]) -> None:
        self.kernel_ref = weakref.ref(kernel)
        self.kernel_name = kernel.name
        self.slots = slots
        self.param_names = list(kernel.signature.parameters)
        self.inputs: list[_OpInput] = []
        taken: set[str] = set()
        for position, slot in enumerate(slots):
            name = self.param_names[position]
            if slot.kind == "container":
                for leaf, (label, shown, leaf_slot) in enumerate(slot.leaves):
                    schema_name = _schema_name(label, taken)
                    self.inputs.append(_OpInput(position, leaf, schema_name, shown, leaf_slot))
            elif slot.kind != "constant":
                self.inputs.append(_OpInput(position, None, _schema_name(name, taken), name, slot))
        self.checked_bound: set[Any] = set()  # bound kernels `_check_first_run` passed
        self.leaves: list[_Leaf] = []
        self.tree_spec: Any = None
        self.num_outputs = 0
        self.mutated: list[int] = []  # indices in `inputs`
        self.qualname = ""
        self.overload: Any = None
        # the kernel's result coded in ints for `call_compiling` (None: not expressible)
        self.layout: tuple | None = None

    def mutated_names(self) -> str:
        return ", ".join(repr(self.inputs[index].shown) for index in self.mutated)

    # -- definition -----------------------------------------------------------------------------

    def plan(self, kernel: Kernel, args: Sequence[Any]) -> None:
        """Learn outputs and mutated arguments from one host run on fresh fake tensors."""
        from torch.utils import _pytree as pytree

        fake_args, run = _plan_run(kernel, args)
        leaves, self.tree_spec = pytree.tree_flatten(run.result)
        arg_tensors = self._arg_tensors(fake_args)
        outputs: list[torch.Tensor] = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                self.leaves.append(self._classify(kernel, leaf, arg_tensors, outputs))
            elif isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                raise exc.TorchIntegrationError(
                    f"kernel {kernel.name!r} returns a size ({leaf}); under torch.compile and "
                    "autograd a kernel may return tensors and constants only"
                )
            else:
                self.leaves.append(_Leaf("constant", value=leaf))
        self.num_outputs = len(outputs)
        self.layout = _encode(run.result, iter(self.leaves))

        written = _written_tensors(kernel, run.device_values)
        mutated = set()
        for value in written:
            for index, position, _item, tensor in arg_tensors:
                if value is tensor or torch._C._is_alias_of(value, tensor):
                    if index is None:
                        raise exc.TorchIntegrationError(
                            f"kernel {kernel.name!r} writes into argument "
                            f"{self.param_names[position]!r}, which is not passed to the "
                            "custom operator as a tensor"
                        )
                    mutated.add(index)
        self.mutated = sorted(mutated)

    def _arg_tensors(self, args: Sequence[Any]) -> list[tuple[int | None, int, Any, Any]]:
        """(index in `inputs` or None for a baked argument, argument position, where in the
        argument (`_Leaf.item`), tensor) of every tensor among the (fake) arguments."""
        found: list[tuple[int | None, int, Any, Any]] = []
        ordinals: dict[int, int] = {}
        for index, op_input in enumerate(self.inputs):
            value = args[op_input.position]
            if op_input.leaf is not None:
                slot = self.slots[op_input.position]
                value = _holes(slot.value, value, [])[op_input.leaf]
                if isinstance(value, torch.Tensor):
                    ordinal = ordinals.get(op_input.position, 0)
                    ordinals[op_input.position] = ordinal + 1
                    found.append((index, op_input.position, ("leaf", ordinal), value))
            elif op_input.slot.kind == "tensors":
                found += [(index, op_input.position, i, t) for i, t in enumerate(value)]
            elif isinstance(value, torch.Tensor):
                found.append((index, op_input.position, None, value))
        for position, slot in enumerate(self.slots):
            if slot.kind == "constant":
                found += [(None, position, None, t) for t in iter_tensors([args[position]])]
        return found

    def _classify(
        self, kernel: Kernel, leaf: torch.Tensor, arg_tensors: list, outputs: list
    ) -> _Leaf:
        for index, position, item, tensor in arg_tensors:
            if leaf is tensor and index is not None:
                return _Leaf("argument", position, item)
            if leaf is tensor or torch._C._is_alias_of(leaf, tensor):
                raise exc.TorchIntegrationError(
                    f"kernel {kernel.name!r} returns a view of its argument "
                    f"{self.param_names[position]!r}; custom operators cannot return views of "
                    "their inputs",
                    hint="Return the argument itself, or a new tensor.",
                )
        for index, output in enumerate(outputs):
            if leaf is output:
                return _Leaf("output", index)
            if torch._C._is_alias_of(leaf, output):
                raise exc.TorchIntegrationError(
                    f"kernel {kernel.name!r} returns two views of one tensor; custom operators "
                    "cannot return aliased outputs",
                    hint="Return each tensor once, or clone one of them.",
                )
        outputs.append(leaf)
        return _Leaf("output", len(outputs) - 1)

    def schema(self, op_name: str) -> str:
        parts = []
        alias_names = iter(f"a{i}" for i in itertools.count())
        for index, op_input in enumerate(self.inputs):
            slot = op_input.slot
            arg_type = slot.schema_type
            if index in self.mutated:
                alias = next(alias_names)
                arg_type = "Tensor(" + alias + "!)" + ("[]" if slot.kind == "tensors" else "")
            parts.append(f"{arg_type} {op_input.name}")
        if self.num_outputs == 1:
            returns = "Tensor"
        else:
            returns = "(" + ", ".join(["Tensor"] * self.num_outputs) + ")"
        return f"{op_name}({', '.join(parts)}) -> {returns}"

    def define(self) -> None:
        global _library
        if _library is None:
            _library = torch.library.Library(NAMESPACE, "FRAGMENT")
        base = self.kernel_name
        op_name = base
        suffix = 1
        while op_name in _used_op_names or hasattr(torch.ops.helion, op_name):
            op_name = f"{base}_{suffix}"
            suffix += 1
        _used_op_names.add(op_name)
        self.qualname = f"{NAMESPACE}::{op_name}"
        _library.define(self.schema(op_name), tags=(torch.Tag.pt2_compliant_tag,))
        _library.impl(op_name, self._real_impl, "CompositeExplicitAutograd")
        torch.library.register_fake(self.qualname, self._fake_impl, lib=_library)
        if self.mutated:
            # PyTorch takes no backward for an op that mutates its inputs, and without an
            # autograd kernel it would silently record wrong history: refuse instead
            _library.impl(op_name, self._mutating_autograd, "Autograd", with_keyset=True)
        elif self.num_outputs:  # (torch takes no formula for an op without outputs or writes)
            torch.library.register_autograd(
                self.qualname, self._backward, setup_context=self._setup_context, lib=_library
            )
        self.overload = getattr(torch.ops.helion, op_name).default

    def _mutating_autograd(self, keyset: Any, *inputs: Any) -> Any:
        if torch.is_grad_enabled() and torch._C._any_requires_grad(*inputs):
            kernel = self._kernel()
            names = self.mutated_names()
            raise exc.TorchIntegrationError(
                f"kernel {kernel.name!r} writes into its argument(s) {names}, so autograd cannot "
                "record it, and an input requires grad",
                hint="Call it under torch.no_grad(), or allocate the outputs inside the kernel "
                "and return them (then register_autograd can give it a backward).",
            )
        with torch._C._AutoDispatchBelowAutograd():
            return self.overload.redispatch(keyset & torch._C._after_autograd_keyset, *inputs)

    # -- argument and result translation ---------------------------------------------------------

    def op_inputs(self, args: Sequence[Any]) -> list[Any]:
        inputs = []
        for position, slot in enumerate(self.slots):
            value = args[position]
            if slot.kind == "container":
                inputs += _holes(slot.value, value, [])
            elif slot.kind != "constant":
                inputs.append(list(value) if slot.container is not None else value)
        return inputs

    def kernel_args(self, inputs: Sequence[Any]) -> list[Any]:
        args: list[Any] = []
        values = iter(inputs)
        for slot in self.slots:
            if slot.kind == "constant":
                args.append(slot.value)
            elif slot.kind == "container":
                args.append(_fill(slot.value, values))
            else:
                value = next(values)
                args.append(slot.container(value) if slot.container is not None else value)
        return args

    def outputs_of(self, result: Any) -> list[torch.Tensor]:
        """The operator outputs among a kernel result (checking its structure)."""
        from torch.utils import _pytree as pytree

        leaves, spec = pytree.tree_flatten(result)
        if spec != self.tree_spec:
            raise exc.TorchIntegrationError(
                f"kernel {self.kernel_name!r} returned {spec}, but its custom operator was "
                f"defined for {self.tree_spec}; the structure of a kernel's result must not "
                "depend on its inputs' values or sizes"
            )
        outputs: list[Any] = [None] * self.num_outputs
        for leaf, plan in zip(leaves, self.leaves, strict=True):
            if plan.kind == "output":
                outputs[plan.index] = leaf
        return outputs

    def pack(self, outputs: list[torch.Tensor]) -> Any:
        if self.num_outputs == 0:
            return None
        if self.num_outputs == 1:
            return outputs[0]
        return tuple(outputs)

    def unpack(self, op_result: Any) -> tuple[torch.Tensor, ...]:
        if self.num_outputs == 1:
            return (op_result,)
        return tuple(op_result) if op_result is not None else ()

    def kernel_result(self, op_result: Any, args: Sequence[Any]) -> Any:
        """Rebuild what the kernel returns from the operator's result."""
        return self.rebuild(self.unpack(op_result), args)

    def rebuild(self, outputs: Sequence[torch.Tensor], args: Sequence[Any]) -> Any:
        """The kernel's result from the operator outputs and the (normalized) arguments."""
        from torch.utils import _pytree as pytree

        leaves = []
        for plan in self.leaves:
            if plan.kind == "output":
                leaves.append(outputs[plan.index])
            elif plan.kind == "argument":
                value = args[plan.index]
                if isinstance(plan.item, tuple):  # ("leaf", n): a container's n-th tensor
                    value = _tensor_leaves(value, [])[plan.item[1]]
                elif plan.item is not None:
                    value = value[plan.item]
                leaves.append(value)
            else:
                leaves.append(plan.value)
        return pytree.tree_unflatten(leaves, self.tree_spec)

    def call(self, args: Sequence[Any]) -> Any:
        result = self.overload(*self.op_inputs(args))
        return self.kernel_result(result, args)

    # -- implementations ------------------------------------------------------------------------

    def _kernel(self) -> Kernel:
        kernel = self.kernel_ref()
        if kernel is None:
            raise exc.TorchIntegrationError(
                f"the Helion kernel {self.kernel_name!r} behind {self.qualname} no longer exists"
            )
        return kernel

    def _real_impl(self, *inputs: Any) -> Any:
        kernel = self._kernel()
        args = tuple(self.kernel_args(inputs))
        outputs = self.outputs_of(kernel._call_direct(args))
        self._check_first_run(kernel, args, outputs)
        return self.pack(outputs)

    def _fake_impl(self, *inputs: Any) -> Any:
        kernel = self._kernel()
        run = _run_host(kernel, self.kernel_args(inputs))
        return self.pack(self.outputs_of(run.result))

    def _check_first_run(self, kernel: Kernel, args: tuple, outputs: list) -> None:
        """Once per bound kernel: the fake run and the declared mutations were right."""
        from helion.runtime.settings import RefMode

        eager = kernel.settings.ref_mode == RefMode.EAGER
        bound = None if eager else kernel.bind(args)
        key = id(bound) if bound is not None else ("eager", _signature(kernel, args)[1])
        if key in self.checked_bound:
            return
        _, run = _plan_run(kernel, args)
        for index, (real, fake) in enumerate(
            zip(outputs, self.outputs_of(run.result), strict=True)
        ):
            if tuple(real.shape) != tuple(fake.shape) or real.dtype != fake.dtype:
                raise exc.TorchIntegrationError(
                    f"output {index} of kernel {kernel.name!r} is {real.dtype}{list(real.shape)}, "
                    f"but its host code on fake tensors gives {fake.dtype}{list(fake.shape)}: its "
                    "size depends on the config (e.g. a buffer sized by hl.register_block_size)",
                    hint="Give the kernel one fixed config (config=...) so that the sizes are known "
                    "when torch.compile / autograd traces it, or return only config-independent tensors.",
                )
        if bound is not None:
            seen = {id(tensor) for tensor in _written_tensors(kernel, run.device_values)}
            missing = {
                name
                for name, tensor in _ir_written_tensors(bound, run.device_values)
                if id(tensor) not in seen
            }
            if missing:
                raise exc.TorchIntegrationError(
                    f"kernel {kernel.name!r} writes {sorted(missing)} in a way Helion could not see "
                    "in its source, so its custom operator may not declare every mutated argument",
                    hint="Write into tensors by their own name or path (`out[tile] = ...`, "
                    "`outs[0][tile] = ...`, hl.store(out, ...)).",
                )
        self.checked_bound.add(key)

    # -- autograd -------------------------------------------------------------------------------

    def _setup_context(self, ctx: Any, inputs: tuple, output: Any) -> None:
        kernel = self._kernel()
        autograd = kernel._autograd
        if autograd is None or autograd[1] is None:
            return
        args = self.kernel_args(inputs)
        autograd[1](ctx, tuple(args), self.kernel_result(output, args))

    def _backward(self, ctx: Any, *grads: Any) -> Any:
        kernel = self._kernel()
        if kernel._autograd is None:
            raise exc.TorchIntegrationError(
                f"gradients reached Helion kernel {kernel.name!r}, which has no backward",
                hint=f"Give it one with {kernel.name}.register_autograd(backward, setup_context=...), "
                "or call it under torch.no_grad().",
            )
        result = kernel._autograd[0](ctx, *grads)
        if not isinstance(result, (tuple, list)):
            result = (result,)
        if len(result) != len(self.slots):
            raise exc.TorchIntegrationError(
                f"the backward of kernel {kernel.name!r} returned {len(result)} gradients; it "
                f"must return one per kernel argument ({len(self.slots)}: {', '.join(self.param_names)})"
            )
        grads_out = []
        for position, slot in enumerate(self.slots):
            grad = result[position]
            if slot.kind == "container":
                grads_out += self._leaf_grads(kernel, position, slot, grad)
            elif slot.kind == "scalar":
                grads_out.append(None)
            elif slot.kind != "constant":
                grads_out.append(
                    list(grad) if slot.kind == "tensors" and grad is not None else grad
                )
        return tuple(grads_out)

    def _leaf_grads(self, kernel: Kernel, position: int, slot: _Slot, grad: Any) -> list[Any]:
        """The gradients of a container argument's leaves, from the backward's gradient for
        the argument: None, or a container of the argument's structure."""
        if grad is None:
            return [None] * len(slot.leaves)
        try:
            grads = _holes(slot.value, grad, [])
        except ValueError:
            grads = None
        if grads is None or len(grads) != len(slot.leaves):
            raise exc.TorchIntegrationError(
                f"the backward of kernel {kernel.name!r} returned a {type(grad).__name__} for "
                f"its container argument {self.param_names[position]!r}; give None, or a "
                "container of the argument's structure holding the gradient of each tensor"
            )
        return [
            g if s.kind == "tensor" else None
            for (_, _, s), g in zip(slot.leaves, grads, strict=True)
        ]


def _encode(value: Any, leaves: Any) -> tuple | None:
    """Code the structure of a kernel result (whose flattened leaves are `leaves`) in ints."""
    if value is None:
        return (_NONE,)
    if type(value) in (tuple, list):
        children = [_encode(child, leaves) for child in value]
        if any(child is None for child in children):
            return None
        return (_TUPLE if type(value) is tuple else _LIST, *children)
    if isinstance(value, (dict, tuple, list)):
        return None  # a dict or namedtuple: fine eagerly, not through the nonstrict boundary
    leaf = next(leaves)
    if leaf.kind == "output":
        return (_OUTPUT, leaf.index)
    if leaf.kind == "argument":
        if isinstance(leaf.item, tuple):
            return (_ARGUMENT_LEAF, leaf.index, leaf.item[1])
        return (_ARGUMENT, leaf.index, -1 if leaf.item is None else leaf.item)
    if isinstance(leaf.value, (bool, int, float)):
        return (_NUMBER, leaf.value)
    return None


def _schema_name(name: str, taken: set[str]) -> str:
    """``name`` as an argument name of an operator schema: an identifier of ASCII letters,
    digits and underscores, not a reserved word nor starting with ``_``, and unlike the names
    in ``taken`` (to which it is added)."""
    name = re.sub(r"[^0-9A-Za-z_]", "_", name)
    if name in _RESERVED_ARG_NAMES or name.startswith("_") or name[:1].isdigit():
        name = f"{name.strip('_') or 'arg'}_"
        if name[:1].isdigit():
            name = f"arg_{name}"
    unique, suffix = name, 1
    while unique in taken:
        unique = f"{name}_{suffix}"
        suffix += 1
    taken.add(unique)
    return unique


def _mutating_backward_error(kernel: Kernel, entry: _OpEntry) -> exc.TorchIntegrationError:
    names = entry.mutated_names()
    return exc.TorchIntegrationError(
        f"kernel {kernel.name!r} writes into its argument(s) {names}; PyTorch cannot attach a "
        "backward to an operator that mutates its inputs",
        hint="Allocate the outputs inside the kernel and return them.",
    )


def _entry_for(kernel: Kernel, args: Sequence[Any]) -> _OpEntry:
    slots, key = _signature(kernel, args)
    entry = kernel._torch_ops.get(key)
    if entry is not None:
        return entry
    with _lock:
        entry = kernel._torch_ops.get(key)
        if entry is None:
            entry = _OpEntry(kernel, slots)
            entry.plan(kernel, args)
            if entry.mutated and kernel._autograd is not None:
                raise _mutating_backward_error(kernel, entry)
            entry.define()
            kernel._torch_ops[key] = entry
    return entry
