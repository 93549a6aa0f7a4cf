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
import threading
import weakref
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion import exc
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
    return torch.is_grad_enabled() and torch._C._any_requires_grad(*args)


def call_compiling(kernel: Kernel, args: tuple, kwargs: dict) -> Any:
    """`Kernel.__call__` while Dynamo traces (or AOTAutograd runs Python under torch.compile).

    Dynamo traces this function; `_traced_call` is opaque to it. A nonstrict function may
    return only tensors and numbers in tuples (not its inputs, not None), so it returns the
    operator's outputs and the shape of the kernel's result coded in ints (`_OpEntry.layout`),
    which is decoded here.
    """
    _install_dynamo_entry()
    outputs, layout = _dynamo_entry[0](kernel._torch_token, args, kwargs)
    return _decode(layout, outputs, args, kwargs, kernel._torch_param_names)


# codes of `_OpEntry.layout`
_OUTPUT, _ARGUMENT, _NUMBER, _NONE, _TUPLE, _LIST = range(6)


def _decode(layout: tuple, outputs: tuple, args: tuple, kwargs: dict, names: tuple) -> Any:
    code = layout[0]
    if code == _OUTPUT:
        return outputs[layout[1]]
    if code == _ARGUMENT:
        position, item = layout[1], layout[2]
        value = args[position] if position < len(args) else kwargs[names[position]]
        return value if item < 0 else value[item]
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
    args = kernel.normalize_args(*args, **kwargs)
    entry = _entry_for(kernel, args)
    if entry.layout is None:
        raise exc.TorchIntegrationError(
            f"kernel {kernel.name!r} returns {entry.tree_spec}; under torch.compile a kernel may "
            "return tensors, numbers and None in (nested) tuples and lists only"
        )
    return entry.unpack(entry.overload(*entry.op_inputs(args))), entry.layout


# ---------------------------------------------------------------------------------------------
# call signatures


@dataclasses.dataclass(frozen=True)
class _Slot:
    """How one kernel argument reaches the operator.

    kind: "tensor", "tensors" (a list/tuple of tensors), "scalar" (int/float/bool, or a
    list/tuple of ints or floats), or "constant" (baked into the operator: constexprs, None,
    strings, dtypes, ...). `container` is the sequence type to rebuild.
    """

    kind: str
    schema_type: str = ""
    container: type | None = None
    value: Any = None


def _slot_for(value: Any, constexpr: bool) -> _Slot:
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
    if isinstance(value, (list, tuple)) and value:
        if all(isinstance(v, torch.Tensor) for v in value):
            return _Slot("tensors", "Tensor[]", type(value))
        if all(isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool) for v in value):
            return _Slot("scalar", "SymInt[]", type(value))
        if all(isinstance(v, float) for v in value):
            return _Slot("scalar", "float[]", type(value))
        if any(isinstance(v, torch.Tensor) for v in value):
            raise exc.TorchIntegrationError(
                "an argument mixes tensors and other values in one sequence; custom operators "
                "take lists of tensors only"
            )
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


def _slot_key(slot: _Slot) -> Any:
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
        _slot_for(value, name in constexprs)
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
        if isinstance(value, (list, tuple)):
            return type(value)(convert(v) for v in value)
        if isinstance(value, (torch.SymInt, torch.SymFloat)):
            return type(value.node.hint)(value.node.hint) if value.node.hint is not None else value
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


def written_names(kernel: Kernel) -> frozenset[str]:
    """Host names whose tensors the device code writes (subscript stores, hl.store, atomics)."""
    cached = kernel.__dict__.get("_torch_written_names")
    if cached is not None:
        return cached
    names: set[str] = set()
    for stmt in kernel.split.device_stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name):
                    names.add(node.value.id)
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in _WRITING_CALLS or called.startswith("atomic_"):
                    names.add(node.args[0].id)
    result = frozenset(names)
    kernel._torch_written_names = result
    return result


def _ir_written_names(bound: Any) -> set[str]:
    """The device-input names that the traced IR stores into (to check `written_names`)."""
    ir = bound.ir
    inputs = bound.split.device_inputs
    names: set[str] = set()
    for info in ir.memory_ops():
        if info.kind == "load":
            continue
        index = info.tensor.index
        if index < len(inputs):
            names.add(inputs[index])
            continue
        source = ir.lifted[index - len(inputs)]
        if source[0] == "item" and source[1] < len(inputs):
            names.add(inputs[source[1]])
    return names


# ---------------------------------------------------------------------------------------------
# one operator


@dataclasses.dataclass
class _Leaf:
    """One leaf of the kernel's (flattened) return value."""

    kind: str  # "output" (operator output `index`), "argument" (arg `index`[`item`]), "constant"
    index: int = 0
    item: int | None = None
    value: Any = None


class _OpEntry:
    """The custom operator of one kernel and call signature, with the glue around it."""

    def __init__(self, kernel: Kernel, slots: tuple[_Slot, ...]) -> None:
        self.kernel_ref = weakref.ref(kernel)
        self.kernel_name = kernel.name
        self.slots = slots
        self.param_names = list(kernel.signature.parameters)
        self.op_positions = [i for i, s in enumerate(slots) if s.kind != "constant"]
        self.checked_bound: set[Any] = set()  # bound kernels `_check_first_run` passed
        self.leaves: list[_Leaf] = []
        self.tree_spec: Any = None
        self.num_outputs = 0
        self.mutated: list[int] = []
        self.qualname = ""
        self.overload: Any = None
        # the kernel's result coded in ints for `call_compiling` (None: not expressible)
        self.layout: tuple | None = None

    # -- definition -----------------------------------------------------------------------------

    def plan(self, kernel: Kernel, args: Sequence[Any]) -> None:
        """Learn outputs and mutated arguments from one host run on fresh fake tensors."""
        from torch.utils import _pytree as pytree

        fake_args, run = _plan_run(kernel, args)
        leaves, self.tree_spec = pytree.tree_flatten(run.result)
        arg_tensors = list(_arg_tensors(fake_args))
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

        written = written_names(kernel)
        device_inputs = kernel.split.device_inputs
        written_values = [
            v
            for name, v in zip(device_inputs, run.device_values, strict=False)
            if name in written and isinstance(v, torch.Tensor)
        ]
        mutated = set()
        for value in written_values:
            for position, _item, tensor in arg_tensors:
                if value is tensor or torch._C._is_alias_of(value, tensor):
                    mutated.add(position)
        self.mutated = sorted(mutated)
        for position in self.mutated:
            if self.slots[position].kind == "constant":
                raise exc.TorchIntegrationError(
                    f"kernel {kernel.name!r} writes into argument {self.param_names[position]!r}, "
                    "which is not passed to the custom operator as a tensor"
                )

    def _classify(
        self, kernel: Kernel, leaf: torch.Tensor, arg_tensors: list, outputs: list
    ) -> _Leaf:
        for position, item, tensor in arg_tensors:
            if leaf is tensor:
                return _Leaf("argument", position, item)
            if torch._C._is_alias_of(leaf, tensor):
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
        for position in self.op_positions:
            slot = self.slots[position]
            arg_type = slot.schema_type
            if position in self.mutated:
                alias = next(alias_names)
                arg_type = "Tensor(" + alias + "!)" + ("[]" if slot.kind == "tensors" else "")
            name = self.param_names[position]
            if name in _RESERVED_ARG_NAMES or name.startswith("_"):
                name = f"{name.strip('_') or 'arg'}_"
            parts.append(f"{arg_type} {name}")
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
        else:
            torch.library.register_autograd(
                self.qualname, self._backward, setup_context=self._setup_context, lib=_library
            )
        self.overload = getattr(torch.ops.helion, op_name).default

    def _mutating_autograd(self, keyset: Any, *inputs: Any) -> Any:
        if torch.is_grad_enabled() and torch._C._any_requires_grad(*inputs):
            kernel = self._kernel()
            names = ", ".join(repr(self.param_names[p]) for p in self.mutated)
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
        for position in self.op_positions:
            value = args[position]
            if self.slots[position].container is not None:
                value = list(value)
            inputs.append(value)
        return inputs

    def kernel_args(self, inputs: Sequence[Any]) -> list[Any]:
        args: list[Any] = []
        values = iter(inputs)
        for slot in self.slots:
            if slot.kind == "constant":
                args.append(slot.value)
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
                leaves.append(value if plan.item is None else value[plan.item])
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
            missing = _ir_written_names(bound) - written_names(kernel)
            if missing:
                raise exc.TorchIntegrationError(
                    f"kernel {kernel.name!r} writes {sorted(missing)} in a way Helion could not see "
                    "in its source, so its custom operator may not declare every mutated argument",
                    hint="Write into tensors by their own name (`out[tile] = ...`, hl.store(out, ...)).",
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
        for position in self.op_positions:
            grad = result[position]
            slot = self.slots[position]
            if slot.kind == "scalar":
                grad = None
            elif slot.kind == "tensors" and grad is not None:
                grad = list(grad)
            grads_out.append(grad)
        return tuple(grads_out)


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
        return (_ARGUMENT, leaf.index, -1 if leaf.item is None else leaf.item)
    if isinstance(leaf.value, (bool, int, float)):
        return (_NUMBER, leaf.value)
    return None


def _arg_tensors(args: Sequence[Any]):
    for position, value in enumerate(args):
        if isinstance(value, torch.Tensor):
            yield position, None, value
        elif isinstance(value, (list, tuple)) and not isinstance(value, ConstExpr):
            for item, element in enumerate(value):
                if isinstance(element, torch.Tensor):
                    yield position, item, element


def _mutating_backward_error(kernel: Kernel, entry: _OpEntry) -> exc.TorchIntegrationError:
    names = ", ".join(repr(entry.param_names[p]) for p in entry.mutated)
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
