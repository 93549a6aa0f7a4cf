"""`helion.experimental.backward`: a backward Helion kernel generated from a forward kernel's IR.

The forward kernel is bound to the inputs and its traced `KernelIR` is read: one top-level tile
loop whose body loads kernel arguments, computes elementwise math and `:`-dimension reductions
and stores one output. The generator writes the backward as the Python source of a Helion
kernel with one tile loop over the same dimensions. Its body recomputes the forward values the
gradients need, then walks the forward body in reverse, applying the rule of each op from
`helion.experimental._vjp.RULES`. Each loaded tensor gets its gradient stored at the positions
it was loaded from; a tensor loaded broadcast across a tiled dimension (a row vector weight)
gets one partial gradient per element of that dimension, summed by the host code after the
loop. The source is written under the cache directory (so `inspect` reads it like any kernel),
imported, and run on the forward kernel's backend.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import re
import sys
import threading
from typing import TYPE_CHECKING
from typing import Any
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.experimental._vjp import RULES
from helion.experimental._vjp import RuleUnsupported
from helion.experimental._vjp import dtype_source
from helion.ir.core import TileType
from helion.ir.core import Value
from helion.language import _ops as ops

if TYPE_CHECKING:
    from helion.ir.core import KernelIR
    from helion.ir.core import Node
    from helion.ir.core import TensorArg
    from helion.runtime.kernel import BoundKernel
    from helion.runtime.kernel import Kernel

_RESERVED = re.compile(r"^(?:[vg]\d+|tile_\d+|grad_.*|partial_.*|torch|helion|hl)$")
_LOADED: dict[str, Any] = {}
_LOADED_LOCK = threading.Lock()


def backward(
    kernel: Kernel,
    grad_out: torch.Tensor,
    *inputs: Any,
    return_code: bool = False,
    autotune: bool = False,
    autotune_effort: str | None = None,
) -> Any:
    """Compute the gradients of a forward kernel with a generated backward Helion kernel.

    Supported forward kernels have one top-level `hl.tile` loop whose body loads tensor
    arguments, applies elementwise math (arithmetic, exp/log/sqrt/rsqrt, trigonometry, tanh,
    sigmoid, relu, silu, gelu, pow by a constant, where, casts, broadcasting) and
    `sum`/`mean`/`amax`/`amin` over a `:` dimension, and stores one output.

    Args:
        kernel: The forward `helion.kernel`; it must have been called once.
        grad_out: The gradient of the forward kernel's output.
        *inputs: The forward kernel's arguments, as it was called with them.
        return_code: Also return the backward kernel's Python source.
        autotune: Tune the backward kernel; by default it runs with its default config.
        autotune_effort: The effort of that tuning (`"quick"`, `"full"`; the settings'
            default when None). Used only with ``autotune=True``.

    Returns:
        One gradient per tensor in `inputs`, in order, as a tuple (zeros for a tensor the
        output does not depend on); with ``return_code=True``, ``(grads, code)``.

    Raises:
        helion.exc.AutodiffKernelNotCalled: The forward kernel was never called.
        helion.exc.AutodiffNotSupported: The forward kernel uses an op or a structure the
            generator cannot differentiate; the error names it and points at its line.
    """
    from helion.runtime.kernel import Kernel

    if not isinstance(kernel, Kernel):
        raise TypeError(f"backward() takes a helion.kernel, not a {type(kernel).__name__}")
    if not kernel._bound:
        raise exc.AutodiffKernelNotCalled
    args = kernel.normalize_args(*inputs)
    bound = kernel.bind(args)
    if _traced_with_other_sizes(kernel, bound, args):
        # static_shapes=False: the bound kernel is shared by every size of its bucket and its
        # IR holds the sizes of the first call; the backward kernel bakes the traced sizes in,
        # so trace these arguments' own (a private bound kernel, not registered)
        from helion.runtime.kernel import BoundKernel

        bound = BoundKernel(kernel, args)
    effort = "none"
    if autotune:
        effort = autotune_effort or kernel.settings.autotune_effort
    generator = _Generator(kernel, bound, args)
    code = generator.generate(effort)
    if not isinstance(grad_out, torch.Tensor):
        raise TypeError(
            f"backward(): grad_out must be a torch.Tensor, not a {type(grad_out).__name__}"
        )
    if tuple(grad_out.shape) != generator.output_shape:
        raise exc.ShapeMismatch(
            f"backward({kernel.name}): grad_out has shape {list(grad_out.shape)}, but the "
            f"kernel's output has shape {list(generator.output_shape)}"
        )
    backward_kernel = _load(code, generator.function_name)
    call_args = [args[i] for i in generator.param_positions]
    grads = backward_kernel(*call_args, grad_out)
    if return_code:
        return grads, code
    return grads


def _traced_with_other_sizes(kernel: Kernel, bound: Any, args: Sequence[Any]) -> bool:
    if kernel.settings.static_shapes:
        return False
    parameters = list(kernel.signature.parameters)
    for tensor in bound.ir.tensor_args:
        if tensor.name not in parameters:
            continue
        value = args[parameters.index(tensor.name)]
        if isinstance(value, torch.Tensor) and tuple(value.shape) != tuple(tensor.shape):
            return True
    return False


def _load(code: str, function_name: str) -> Any:
    """Write the source under the cache directory and import it (one module per source)."""
    from helion.runtime.settings import cache_dir

    digest = hashlib.sha256(code.encode()).hexdigest()[:20]
    with _LOADED_LOCK:
        loaded = _LOADED.get(digest)
        if loaded is not None:
            return loaded
        folder = cache_dir() / "autodiff"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{function_name}_{digest}.py"
        if not path.exists() or path.read_text() != code:
            temporary = path.with_suffix(f".{threading.get_ident()}.tmp")
            temporary.write_text(code)
            temporary.replace(path)
        module_name = f"helion_autodiff_{function_name}_{digest}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        loaded = getattr(module, function_name)
        _LOADED[digest] = loaded
        return loaded


@dataclasses.dataclass
class _Grad:
    """A gradient held in a source name; `shape` may have extra or wider dims than its value's
    where the value was broadcast across a tiled dimension (summed later, across tiles)."""

    name: str
    shape: tuple[sympy.Expr, ...]


@dataclasses.dataclass
class _Statement:
    target: str | None  # None: a store
    text: str
    error: exc.AutodiffNotSupported | None = None


@dataclasses.dataclass
class _LoadGroup:
    """The loads of one tensor at one index (their gradients add up)."""

    tensor: TensorArg
    param: str
    items: tuple
    value_shape: tuple[sympy.Expr, ...]
    loc: Any
    grads: list[_Grad] = dataclasses.field(default_factory=list)


def _unsupported(what: str, node: Node | None) -> exc.AutodiffNotSupported:
    loc = node.loc if node is not None else None
    where = f" (line {loc.lineno})" if loc is not None else ""
    return exc.AutodiffNotSupported(f"{what}{where}", loc=loc)


def _node_label(node: Node) -> str:
    return f"op '{node.op.user_name}'"


class _Generator:
    """Writes the backward kernel's source for one bound forward kernel."""

    def __init__(self, kernel: Kernel, bound: BoundKernel, args: tuple) -> None:
        self.kernel = kernel
        self.bound = bound
        self.ir: KernelIR = bound.ir
        self.args = args
        self.function_name = f"{kernel.name}_backward"
        self.statements: list[_Statement] = []
        self.sources: dict[int, str] = {}  # value id -> source name
        self.counter = 0
        self.tile_symbols: dict[sympy.Symbol, int] = {}
        self.tile_names: dict[int, str] = {}  # block id -> loop variable
        self.groups: dict[tuple, _LoadGroup] = {}
        self.load_group_of: dict[int, _LoadGroup] = {}  # value id -> its load group
        self.param_names: dict[str, str] = {}  # forward parameter -> backward parameter
        self.param_positions: list[int] = []
        self.tensor_params: list[str] = []  # forward tensor parameters, in order

    # -- names and sources -----------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, prefix: str, text: str) -> str:
        name = self.fresh(prefix)
        self.statements.append(_Statement(name, f"{name} = {text}"))
        return name

    def operand(self, operand: Any, node: Node) -> str:
        if isinstance(operand, Value):
            source = self.sources.get(operand.id)
            if source is None:
                raise _unsupported(f"a value {operand!r} made outside the tile loop body", node)
            return source
        return _literal(operand, node)

    # -- the whole kernel ---------------------------------------------------------------------

    def generate(self, effort: str) -> str:
        loop = self._the_loop()
        self._bind_parameters()
        region = loop.regions[0]
        block_ids = list(loop.attrs["block_ids"])
        for block_id, tile in zip(block_ids, region.args, strict=True):
            name = f"tile_{block_id}"
            self.tile_names[block_id] = name
            self.sources[tile.id] = name
            self.tile_symbols[self.ir.block(block_id).symbol] = block_id
        store = self._forward(region.nodes)
        self._check_returns_output(store)
        self._backward(region.nodes, store)
        stores = self._store_gradients(block_ids, loop)
        body = self._live_statements()
        return self._render(loop, block_ids, body, stores, effort)

    def _the_loop(self) -> Node:
        nodes = self.ir.body.nodes
        loops = [node for node in nodes if node.op is ops.grid_loop]
        if len(loops) != 1:
            second = loops[1] if len(loops) > 1 else None
            raise _unsupported("a kernel without exactly one top-level tile loop", second)
        for node in nodes:
            if node is not loops[0]:
                raise _unsupported(f"{_node_label(node)} outside the tile loop", node)
        loop = loops[0]
        if loop.attrs.get("is_grid"):
            raise _unsupported("an hl.grid loop", loop)
        for value in (*loop.attrs["begins"], *loop.attrs["ends"]):
            if not isinstance(value, (int, sympy.Integer)):
                raise _unsupported("a tile loop with data-dependent bounds", loop)
        return loop

    def _check_returns_output(self, store: Node) -> None:
        """The host code after the loop must return the stored tensor as it is: grad_out is
        the gradient of that tensor, and host code that changes it (`return out * 2`,
        `out.T`, ...) is not differentiated."""
        import ast

        name = store.attrs["tensor"].name
        after = self.kernel.split.host_after
        if not after:
            return  # the kernel writes into an argument and returns nothing
        if (
            len(after) == 1
            and isinstance(after[0], ast.Return)
            and isinstance(after[0].value, ast.Name)
            and after[0].value.id == name
        ):
            return
        statement = next(
            (s for s in after if not (isinstance(s, ast.Return) and isinstance(s.value, ast.Name))),
            after[0],
        )
        loc = self.kernel.split.source.location(statement)
        raise exc.AutodiffNotSupported(
            f"host code after the tile loop ({ast.unparse(statement)!r}, line {loc.lineno}); "
            f"the kernel must end with `return {name}`",
            loc=loc,
        )

    def _bind_parameters(self) -> None:
        from helion.frontend import ast_rewrite

        reassigned = set(ast_rewrite.assigned_names(self.kernel.split.host_before))
        parameters = list(self.kernel.signature.parameters)
        scalar_names = {arg.name for arg in self.ir.scalar_args}
        taken = set(parameters)
        for position, (name, value) in enumerate(zip(parameters, self.args, strict=True)):
            if isinstance(value, torch.Tensor):
                self.tensor_params.append(name)
            elif name not in scalar_names:
                continue
            backward_name = name
            while _RESERVED.match(backward_name) or (
                backward_name != name and backward_name in taken
            ):
                backward_name += "_"
            taken.add(backward_name)
            self.param_names[name] = backward_name
            self.param_positions.append(position)
        for scalar in self.ir.scalar_args:
            if scalar.name not in self.param_names or scalar.name in reassigned:
                raise _unsupported(f"the scalar {scalar.name!r} computed by host code", None)
            self.sources[scalar.value.id] = self.param_names[scalar.name]
        self.reassigned = reassigned

    def _tensor_param(self, tensor: TensorArg, node: Node) -> str:
        name = tensor.name
        if name not in self.param_names or name in self.reassigned:
            raise _unsupported(f"a load of {name!r}, a tensor made by host code", node)
        position = list(self.kernel.signature.parameters).index(name)
        value = self.args[position]
        if tuple(value.shape) != tuple(tensor.shape):
            raise _unsupported(f"a load of {name!r}, a view made by host code", node)
        return self.param_names[name]

    # -- forward: recompute the values ---------------------------------------------------------

    def _forward(self, nodes: Sequence[Node]) -> Node:
        store: Node | None = None
        for node in nodes:
            if node.regions or (node.op.side_effects and node.op is not ops.store):
                raise _unsupported(_node_label(node), node)
            if node.op is ops.load:
                self._forward_load(node)
            elif node.op is ops.store:
                if store is not None:
                    raise _unsupported("a second store in the tile loop", node)
                store = node
            elif node.op.memory:
                raise _unsupported(_node_label(node), node)
            else:
                self._forward_op(node)
        if store is None:
            raise _unsupported("a kernel that stores no output", None)
        return store

    def _index(self, node: Node, tensor: TensorArg, for_store: bool) -> tuple[list[str], tuple]:
        """The source of each index item and the items normalized (no operand positions)."""
        parts = []
        normalized = []
        dim = 0
        for item in node.attrs["items"]:
            kind = item[0]
            if kind == "tile":
                tile = node.inputs[item[1]]
                if not isinstance(tile.type, TileType) or tile.id not in self.sources:
                    raise _unsupported("an index by a tile of another loop", node)
                parts.append(self.sources[tile.id])
                normalized.append(("tile", item[2]))
                dim += 1
            elif kind == "full":
                start, length = item[1], item[2]
                if start == 0 and length == tensor.shape[dim]:
                    parts.append(":")
                else:
                    parts.append(f"{start}:{start + length}")
                normalized.append(("full", start, length))
                dim += 1
            elif kind == "none" and not for_store:
                parts.append("None")
                normalized.append(("none",))
            else:
                raise _unsupported(f"an index item of kind {kind!r} in {node.op.name}", node)
        if node.attrs.get("mask") is not None:
            raise _unsupported(f"a masked {node.op.name}", node)
        return parts, tuple(normalized)

    def _forward_load(self, node: Node) -> None:
        tensor = node.attrs["tensor"]
        param = self._tensor_param(tensor, node)
        parts, items = self._index(node, tensor, for_store=False)
        name = self.emit("v", f"{param}[{', '.join(parts)}]")
        self.sources[node.output.id] = name
        key = (tensor.name, items)
        group = self.groups.get(key)
        if group is None:
            if any(other.tensor.name == tensor.name for other in self.groups.values()):
                raise _unsupported(f"loads of {tensor.name!r} at different indices", node)
            group = _LoadGroup(tensor, param, items, node.output.shape, node.loc)
            self.groups[key] = group
        self.load_group_of[node.output.id] = group

    def _forward_op(self, node: Node) -> None:
        if len(node.outputs) != 1:
            raise _unsupported(_node_label(node), node)
        rule = RULES.get(node.op.name)
        name = self.fresh("v")
        self.sources[node.output.id] = name
        if rule is None:
            # only an error if the backward needs the value (see `_live_statements`)
            error = _unsupported(_node_label(node), node)
            self.statements.append(_Statement(name, "", error))
            return
        try:
            text = rule.forward(self._operand_names(node), self._rule_attrs(node))
        except exc.AutodiffNotSupported as error:
            self.statements.append(_Statement(name, "", error))
            return
        self.statements.append(_Statement(name, f"{name} = {text}"))

    def _operand_names(self, node: Node) -> dict[str, str]:
        keys = ("c", "x", "y") if node.op is ops.where else ("x", "y")
        if len(node.inputs) > len(keys):
            raise _unsupported(_node_label(node), node)
        names = {
            key: self.operand(operand, node)
            for key, operand in zip(keys, node.inputs, strict=False)
        }
        if node.outputs:
            names["out"] = self.sources.get(node.output.id, "")
        return names

    def _rule_attrs(self, node: Node) -> dict[str, Any]:
        attrs = dict(node.attrs)
        attrs["constants"] = [
            None if isinstance(operand, Value) else _constant(operand, node)
            for operand in node.inputs
        ]
        if node.op.reduction:
            self._reduction_attrs(node, attrs)
        return attrs

    def _reduction_attrs(self, node: Node, attrs: dict[str, Any]) -> None:
        source = node.inputs[0]
        in_shape = source.shape
        dim = attrs["dim"]
        if not isinstance(dim, int) or len(node.inputs) != 1:
            raise _unsupported(_node_label(node), node)
        dim %= len(in_shape)
        extent = in_shape[dim]
        if not self._is_reduction_dim(extent):
            raise _unsupported(
                f"{_node_label(node)} over a tiled dimension (only over a ':' dimension)", node
            )
        kept = list(in_shape)
        kept[dim] = sympy.Integer(1)
        keepdim = bool(attrs.get("keepdim"))
        out_rank = len(in_shape) - (0 if keepdim else 1)

        def expand(name: str) -> str:
            if keepdim:
                return name
            parts = [":"] * out_rank
            parts.insert(dim, "None")
            return f"{name}[{', '.join(parts)}]"

        attrs.update(
            dim=dim,
            keepdim=keepdim,
            in_shape=tuple(in_shape),
            kept_shape=tuple(kept),
            grad_dtype=dtype_source(node.output.dtype),
            expand=expand,
        )

    def _is_reduction_dim(self, extent: sympy.Expr) -> bool:
        for info in self.ir.block_sizes:
            if info.symbol == extent:
                return info.kind == "reduction"
        return False

    # -- backward: the reverse walk ------------------------------------------------------------

    def _backward(self, nodes: Sequence[Node], store: Node) -> None:
        self.grads: dict[int, list[_Grad]] = {}
        tensor = store.attrs["tensor"]
        self.output_shape = tuple(int(d) for d in tensor.shape)
        if tensor.name in {group.tensor.name for group in self.groups.values()}:
            raise _unsupported(f"a store into {tensor.name!r}, which the kernel also loads", store)
        parts, items = self._index(store, tensor, for_store=True)
        covered = {item[1] for item in items if item[0] == "tile"}
        if covered != set(self.tile_names):
            raise _unsupported("a store that does not index every tiled dimension", store)
        value = store.inputs[store.attrs["value"]]
        if not isinstance(value, Value) or not value.dtype.is_floating_point:
            return
        grad = self.emit("g", f"grad_out[{', '.join(parts)}].to({dtype_source(value.dtype)})")
        self.grads[value.id] = [_Grad(grad, value.shape)]
        for node in reversed(nodes):
            if node.op is ops.store or not node.outputs:
                continue
            incoming = self.grads.get(node.output.id)
            if not incoming or not node.output.dtype.is_floating_point:
                continue
            grad = self._total(incoming)
            if node.op is ops.load:
                self.load_group_of[node.output.id].grads.append(grad)
                continue
            self._apply_rule(node, grad)

    def _total(self, grads: list[_Grad]) -> _Grad:
        if len(grads) == 1:
            return grads[0]
        name = self.emit("g", " + ".join(grad.name for grad in grads))
        return _Grad(name, ops.broadcast_shapes(*(grad.shape for grad in grads)))

    def _apply_rule(self, node: Node, grad: _Grad) -> None:
        rule = RULES.get(node.op.name)
        if rule is None or rule.vjp is None:
            raise _unsupported(_node_label(node), node)
        out = node.output
        if not rule.elementwise:
            grad = self._reduce_to(grad, out.shape, node, allow_tiles=False)
            if len(grad.shape) != len(out.shape):
                raise _unsupported(f"{_node_label(node)} of a broadcast value", node)
        names = self._operand_names(node)
        names["g"] = grad.name
        attrs = self._rule_attrs(node)
        attrs["g_shape"] = grad.shape
        first = node.inputs[0] if node.inputs else None
        if "in_shape" not in attrs and isinstance(first, Value) and first.producer is not None:
            attrs["in_shape"] = first.shape
        try:
            results = rule.vjp(names, attrs)
        except RuleUnsupported as error:
            raise _unsupported(str(error), node) from None
        operands = node.inputs
        for operand, result in zip(operands, results, strict=False):
            if result is None or not isinstance(operand, Value):
                continue
            if not operand.dtype.is_floating_point or isinstance(operand.type, TileType):
                continue
            if operand.producer is None:
                continue  # a scalar argument: no gradient
            if rule.elementwise:
                text = result
                shape = ops.broadcast_shapes(grad.shape, out.shape)
            else:
                text, shape = result
            name = text if text == grad.name else self.emit("g", text)
            reduced = self._reduce_to(_Grad(name, shape), operand.shape, node, allow_tiles=True)
            if operand.dtype != out.dtype:
                cast = self.emit("g", f"{reduced.name}.to({dtype_source(operand.dtype)})")
                reduced = _Grad(cast, reduced.shape)
            self.grads.setdefault(operand.id, []).append(reduced)

    def _reduce_to(
        self, grad: _Grad, target: tuple[sympy.Expr, ...], node: Node, allow_tiles: bool
    ) -> _Grad:
        """Sum the gradient over the dims its value was broadcast along. Tiled dims are kept
        (where allowed): their sum crosses tiles and is done when the gradient is stored."""
        shape = list(grad.shape)
        lead = len(shape) - len(target)
        summed = []
        for position, extent in enumerate(shape):
            wanted = target[position - lead] if position >= lead else sympy.Integer(1)
            if extent == wanted or extent == 1:
                continue
            if wanted != 1:
                raise exc.InternalError(f"gradient shape {shape} against {list(target)}")
            if extent in self.tile_symbols:
                if not allow_tiles:
                    raise _unsupported(
                        f"{_node_label(node)} of a value broadcast across a tiled dimension", node
                    )
                continue
            summed.append(position)
        text = grad.name
        for position in summed:
            text = f"torch.sum({text}, {position}, keepdim=True)"
            shape[position] = sympy.Integer(1)
        while not allow_tiles and len(shape) > len(target) and shape[0] == 1:
            text = f"{text}[0]"
            shape.pop(0)
        if text == grad.name:
            return grad
        return _Grad(self.emit("g", text), tuple(shape))

    # -- gradients of the loaded tensors -----------------------------------------------------

    def _store_gradients(self, block_ids: list[int], loop: Node) -> dict[str, Any]:
        """Store statements into the gradient buffers; returns the host-side buffer plans."""
        plans: dict[str, Any] = {}
        for group in self.groups.values():
            if not group.grads:
                continue
            grad = self._total(group.grads)
            grad = self._reduce_to(grad, group.value_shape, loop, allow_tiles=True)
            covered = [item[1] for item in group.items if item[0] == "tile"]
            missing = [block_id for block_id in block_ids if block_id not in covered]
            arranged = self._arrange(grad, group, missing)
            index = [self.tile_names[block_id] for block_id in missing]
            dim = 0
            for item in group.items:
                if item[0] == "tile":
                    index.append(self.tile_names[item[1]])
                elif item[0] == "full":
                    start, length = item[1], item[2]
                    whole = start == 0 and length == group.tensor.shape[dim]
                    index.append(":" if whole else f"{start}:{start + length}")
                if item[0] != "none":
                    dim += 1
            dtype = group.tensor.dtype
            if missing and dtype in (torch.float16, torch.bfloat16):
                dtype = torch.float32
            buffer = f"partial_{group.param}" if missing else f"grad_{group.param}"
            if dtype != group.tensor.dtype:
                arranged = f"{arranged}.to({dtype_source(dtype)})"
            self.statements.append(_Statement(None, f"{buffer}[{', '.join(index)}] = {arranged}"))
            extents = [int(loop.attrs["ends"][block_ids.index(b)]) for b in missing]
            plans[group.param] = (buffer, extents, dtype)
        return plans

    def _arrange(self, grad: _Grad, group: _LoadGroup, missing: list[int]) -> str:
        """The gradient laid out as [missing tiled dims..., indexed tensor dims...]."""
        value_items = group.items
        lead = len(grad.shape) - len(value_items)
        labels: list[Any] = []
        for position, extent in enumerate(grad.shape):
            item = value_items[position - lead] if position >= lead else ("none",)
            if item[0] != "none":
                labels.append(("tensor", position - lead))
            elif extent == 1:
                labels.append(None)  # a size-1 dim: dropped
            elif self.tile_symbols.get(extent) in missing:
                labels.append(("tile", self.tile_symbols[extent]))
            else:
                raise _unsupported(f"the gradient of {group.tensor.name!r}", None)
        wanted = [("tile", block_id) for block_id in missing]
        wanted += [("tensor", i) for i, item in enumerate(value_items) if item[0] != "none"]
        text = grad.name
        if None in labels:
            text = f"{text}[{', '.join('0' if label is None else ':' for label in labels)}]"
            labels = [label for label in labels if label is not None]
        order = sorted(range(len(labels)), key=lambda i: wanted.index(labels[i]))
        if order != list(range(len(labels))):
            text = f"{text}.permute({', '.join(str(i) for i in order)})"
            labels = [labels[i] for i in order]
        if len(labels) != len(wanted):
            text = f"{text}[{', '.join(':' if label in labels else 'None' for label in wanted)}]"
        return text

    # -- output --------------------------------------------------------------------------------

    def _live_statements(self) -> list[_Statement]:
        """The statements the stores need (later ones first, then back in program order)."""
        targets = {statement.target for statement in self.statements if statement.target}
        identifier = re.compile(r"\b[vg]\d+\b")
        needed: set[str] = set()
        live = []
        for statement in reversed(self.statements):
            if statement.target is not None and statement.target not in needed:
                continue
            if statement.error is not None:
                raise statement.error
            live.append(statement)
            needed.update(name for name in identifier.findall(statement.text) if name in targets)
        live.reverse()
        return live

    def _render(
        self,
        loop: Node,
        block_ids: list[int],
        body: list[_Statement],
        plans: dict[str, Any],
        effort: str,
    ) -> str:
        annotations = []
        for name, param in self.param_names.items():
            position = list(self.kernel.signature.parameters).index(name)
            annotation = type(self.args[position]).__name__
            if name in self.tensor_params:
                annotation = "torch.Tensor"
            annotations.append(f"{param}: {annotation}")
        signature = ", ".join([*annotations, "grad_out: torch.Tensor"])
        backend = self.bound.backend.name
        lines = [
            f'"""Backward of the Helion kernel {self.kernel.name!r}, generated by',
            'helion.experimental.backward (do not edit)."""',
            "",
            "import torch",
            "",
            "import helion",
            "import helion.language as hl",
            "",
            "",
            f"@helion.kernel(backend={backend!r}, autotune_effort={effort!r})",
            f"def {self.function_name}({signature}) -> tuple[torch.Tensor, ...]:",
        ]
        for name in self.tensor_params:
            param = self.param_names[name]
            plan = plans.get(param)
            if plan is None or plan[1]:
                continue
            lines.append(f"    grad_{param} = torch.zeros_like({param})")
        for param, (buffer, extents, dtype) in plans.items():
            if extents:
                tensor = next(g.tensor for g in self.groups.values() if g.param == param)
                shape = ", ".join(str(e) for e in [*extents, *tensor.shape])
                lines.append(
                    f"    {buffer} = torch.zeros([{shape}], dtype={dtype_source(dtype)}, "
                    f"device={param}.device)"
                )
        begins = [int(b) for b in loop.attrs["begins"]]
        ends = [int(e) for e in loop.attrs["ends"]]
        targets = ", ".join(self.tile_names[b] for b in block_ids)
        if len(block_ids) == 1:
            bounds = f"{ends[0]}" if begins[0] == 0 else f"{begins[0]}, {ends[0]}"
        elif all(b == 0 for b in begins):
            bounds = f"[{', '.join(map(str, ends))}]"
        else:
            bounds = f"[{', '.join(map(str, begins))}], [{', '.join(map(str, ends))}]"
        lines.append(f"    for {targets} in hl.tile({bounds}):")
        lines.extend(f"        {statement.text}" for statement in body)
        if not body:
            lines.append("        pass")
        results = []
        for name in self.tensor_params:
            param = self.param_names[name]
            plan = plans.get(param)
            if plan is None:
                results.append(f"torch.zeros_like({param})")
            elif plan[1]:
                dims = ", ".join(str(i) for i in range(len(plan[1])))
                lines.append(f"    grad_{param} = {plan[0]}.sum(({dims},)).to({param}.dtype)")
                results.append(f"grad_{param}")
            else:
                results.append(f"grad_{param}")
        lines.append(f"    return ({', '.join(results)},)")
        return "\n".join(lines) + "\n"


def _constant(operand: Any, node: Node) -> Any:
    if isinstance(operand, sympy.Expr):
        if not operand.is_number:
            raise _unsupported(f"{_node_label(node)} of a symbolic size", node)
        return int(operand) if operand.is_integer else float(operand)
    if isinstance(operand, (bool, int, float)):
        return operand
    raise _unsupported(f"{_node_label(node)} with operand {operand!r}", node)


def _literal(operand: Any, node: Node) -> str:
    value = _constant(operand, node)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    text = repr(value)
    return f"({text})" if text.startswith("-") else text
