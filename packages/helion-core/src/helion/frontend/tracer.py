"""Trace device code on proxy values into Kernel IR.

The tracer is the mode (see `helion.language._context`) that `hl.*` functions dispatch to while the
rewritten device function runs. It owns the IR being built, the stack of open regions, and the
block-size table.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
import sys
from typing import Any
from typing import Callable
from typing import Iterator
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.containers import container_items
from helion.containers import container_structure
from helion.containers import iter_tensors
from helion.containers import rebuild_container
from helion.frontend import jagged
from helion.frontend import rng
from helion.frontend import sizes
from helion.frontend import stack
from helion.frontend.loop_deps import LoopDependencies
from helion.frontend.proxies import SYMBOLIC_INTS
from helion.frontend.proxies import BlockSizeInt
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import HostTensor
from helion.frontend.proxies import SizeInt
from helion.frontend.proxies import SymDim
from helion.frontend.proxies import TileProxy
from helion.frontend.proxies import TracedBlockSize
from helion.ir.core import Block
from helion.ir.core import BlockSizeInfo
from helion.ir.core import KernelIR
from helion.ir.core import LoopInfo
from helion.ir.core import Node
from helion.ir.core import ScalarArg
from helion.ir.core import TensorArg
from helion.ir.core import TensorType
from helion.ir.core import TileType
from helion.ir.core import Value
from helion.ir.core import computed_from
from helion.ir.core import index_dtype_for
from helion.ir.core import index_extent
from helion.language import ConstExpr
from helion.language import _ops as ops
from helion.language._context import active_mode
from helion.language._x16 import X16LoadEntryPoints


class _Undefined:
    """A name assigned in only one branch of an `if`: using it later is an error."""

    def __repr__(self) -> str:
        return "<undefined>"


UNDEFINED = _Undefined()

# hint for the extent of a loop whose bounds are only known on the device
DATA_DEPENDENT_HINT = 128


@dataclasses.dataclass
class TileLoopRequest:
    """What `hl.tile(...)` / `hl.grid(...)` returns while tracing; `Tracer.loop` consumes it."""

    begins: list[Any]
    ends: list[Any]
    block_sizes: list[Any]
    is_grid: bool
    multi: bool  # called with a sequence: the loop variable is a tuple of tiles
    jagged: Any = None  # hl.jagged_tile: its helion.frontend.jagged.JaggedLoop

    def __iter__(self):
        if self.is_grid:
            raise exc.LoopFunctionNotInFor(
                "hl.grid",
                hint="In device code `range(...)` is hl.grid, a device loop that only a `for` "
                "statement can run: it cannot be passed to zip(), enumerate(), list() and the "
                "like. Use hl.static_range(...) for a loop unrolled over constants.",
            )
        raise exc.LoopFunctionNotInFor(
            "hl.jagged_tile" if self.jagged is not None else "hl.tile",
            hint="A device loop is run only by a `for` statement over it: it cannot be passed to "
            "zip(), enumerate(), list() and the like.",
        )


@dataclasses.dataclass
class HostInput:
    """How one host value entered the device code."""

    name: str
    # "tensor" | "scalar" (runtime argument) | "constant" (baked) | "container" (a list, tuple,
    # dict or dataclass: its leaves are lifted, see `Tracer._enter_leaf`) | "other"
    kind: str
    value: Any


@dataclasses.dataclass
class LiftedConstant:
    """The entry of `KernelIR.lifted_args` for a baked leaf of a container: its value is re-read
    at every launch and compared with the traced one (a constant guard), never passed."""

    name: str
    index: int


def _arg_name(arg: Any) -> Callable[[], str]:
    return lambda: arg.name


class Tracer(X16LoadEntryPoints):
    UNDEFINED = UNDEFINED

    def __init__(
        self,
        name: str,
        filename: str,
        source_lines: tuple[int, int],
        device: torch.device,
        host_block_sizes: list[BlockSizeInfo],
        location_fn: Callable[[int, int | None, int | None], exc.SourceLocation],
        index_dtype: torch.dtype | None = None,
    ) -> None:
        self.ir = KernelIR(name)
        self.requested_index_dtype = index_dtype  # Settings.index_dtype (None: by tensor size)
        self.ir.filename = filename
        self.ir.block_sizes = list(host_block_sizes)
        self.host_block_count = len(host_block_sizes)  # hl.register_block_size's blocks
        self.source_lines = source_lines
        self.location_fn = location_fn
        self.device = device
        self.blocks: list[Block] = [self.ir.body]
        # `helion.frontend.sizes`: the symbol of each value a size expression does not see into
        self.opaque_symbols: dict[Any, sympy.Symbol] = {}
        self.loop_depth = 0
        self.settings: Any = None  # the kernel's Settings (its ignore_warnings), where known
        # the ids of the values loops carry (an accumulator `acc` as its loop body sees it)
        self.carried_ids: set[int] = set()
        self.rdims_by_size: dict[int, int] = {}
        self.rdim_extents: dict[sympy.Symbol, int] = {}  # see ops.dim_extents
        self.inputs: list[HostInput] = []
        # (index in the launch's values, traced value) of each baked leaf of a container argument
        self.constant_leaves: list[tuple[int, Any]] = []
        self.barrier_count = 0
        # block id -> (begin, end, tile value) of the innermost open loop over it (hl.rand's offsets)
        self.open_tiles: dict[int, tuple[Any, Any, Value]] = {}
        self.jagged_loops: list[Any] = []  # open hl.jagged_tile loops (helion.frontend.jagged)
        self.loop_deps = LoopDependencies()
        # block id -> the extent of each loop over it (None: only known on the device); ops that
        # need a whole dimension (sort, topk, gather) read it to pin the block size
        self.loop_extents: dict[int, list[int | None]] = {}
        # block id -> how error messages name a tile's block size (`tm.block_size`, from the
        # loop variable of the first `for` over it); see `readable_dims`
        # (None: loops with different variables share it, a registered block size)
        self.block_names: dict[int, str | None] = {}

    # ------------------------------------------------------------------------------------------
    # entry

    def trace(
        self,
        device_fn: Callable,
        names: Sequence[str],
        values: Sequence[Any],
        runtime_scalars: set[str],
    ) -> KernelIR:
        proxies = [
            self._enter_host_value(i, n, v, runtime_scalars)
            for i, (n, v) in enumerate(zip(names, values, strict=True))
        ]
        # each leaf of a container argument (e.g. the peer buffers of a symmetric tensor, the
        # weights of a namedtuple) is re-read from the container at every launch like a capture:
        # a tensor or a number is a kernel argument of its own, anything else is baked
        for position, inp in enumerate(self.inputs):
            if inp.kind == "container":
                self.ir.structure_guards.append((position, container_structure(inp.value)))
                runtime = inp.name in runtime_scalars
                proxies[position] = self._enter_leaf(position, (), inp.name, inp.value, runtime)
        numel = max((index_extent(t) for t in iter_tensors(values)), default=0)
        self.ir.index_dtype = index_dtype_for(self.requested_index_dtype, numel)
        with (
            active_mode(self),
            ops.dim_extents(self.rdim_extents),
            exc.message_rewriter(self.readable_dims),
        ):
            try:
                device_fn(self, *proxies)
            except exc.BaseError as error:
                # an error raised where no location was at hand (a Python protocol method of a
                # proxy, an op deep in the tracer): the kernel line it was raised from
                if error.loc is None:
                    loc = self._traceback_loc(error.__traceback__)
                    if loc is not None:
                        error.with_location(loc)
                raise
            except RecursionError as error:
                raise exc.DeviceRecursionError(
                    loc=self._traceback_loc(error.__traceback__)
                ) from None
            except NameError as error:
                # a name the kernel's own line reads that nothing defines (not one of a
                # library: those stay as they are)
                if type(error) is not NameError or not self._raised_by_kernel_line(
                    error.__traceback__
                ):
                    raise
                name = getattr(error, "name", None)
                undefined = exc.UndefinedVariable(
                    f"name {name!r}" if name else str(error).removesuffix(" is not defined"),
                    loc=self._traceback_loc(error.__traceback__),
                )
                undefined.name = name
                raise undefined from None
            except (KeyError, IndexError) as error:
                # a container argument's key or item the kernel's own line looked up
                if isinstance(error, exc.BaseError) or not self._raised_by_kernel_line(
                    error.__traceback__
                ):
                    raise
                loc = self._traceback_loc(error.__traceback__)
                text = f"key {error} not found" if isinstance(error, KeyError) else str(error)
                raise exc.DeviceLookupError(f"{type(error).__name__}: {text}", loc=loc) from error
            except (TypeError, AttributeError) as error:
                # raised by the kernel's own line (a call with arguments the function does not
                # take, `None[tile]`, an operator on a value of the wrong kind): a helion error
                # naming that line; errors from deeper (the tracer, a library) stay as they are
                if not self._raised_by_kernel_line(error.__traceback__):
                    raise
                loc = self._traceback_loc(error.__traceback__)
                if isinstance(error, TypeError):
                    from helion.frontend.torch_table import type_error_at_call

                    # torch's argument parser refusing a call of a torch op: the op named
                    at_call = type_error_at_call(self, error)
                    if at_call is not None:
                        raise at_call from error
                    raise exc.DeviceTypeError(f"TypeError: {error}", loc=loc) from error
                head, found, _ = str(error).partition(" has no attribute ")
                raise exc.DeviceAttributeError(
                    head if found else str(error), getattr(error, "name", None) or "?", loc=loc
                ) from error
        if self.ir.rng_seed is not None:  # torch.rand's per-call seed comes after the lifted args
            self.ir.rng_seed.index = len(self.inputs) + len(self.ir.lifted)
        return self.ir

    def _enter_host_value(
        self, index: int, name: str, value: Any, runtime_scalars: set[str]
    ) -> Any:
        if isinstance(value, torch.Tensor):
            arg = TensorArg(
                name, index, tuple(value.shape), tuple(value.stride()), value.dtype, value.device
            )
            self.ir.tensor_args.append(arg)
            self.inputs.append(HostInput(name, "tensor", value))
            return HostTensor(self, arg, value)
        if isinstance(value, ConstExpr):
            self.inputs.append(HostInput(name, "constant", value))
            return value.value
        if isinstance(value, BlockSizeInt):
            self.inputs.append(HostInput(name, "constant", value))
            return self._traced_block_size(value)
        if (
            isinstance(value, (int, float))
            and not isinstance(value, (bool, BlockSizeInt))
            and name in runtime_scalars
        ):
            dtype = torch.int64 if isinstance(value, int) else torch.float32
            block_arg = Value(TensorType((), dtype), name)
            self.ir.body.args.append(block_arg)
            self.ir.scalar_args.append(ScalarArg(name, index, dtype, block_arg))
            self.inputs.append(HostInput(name, "scalar", value))
            return DeviceValue(self, block_arg)
        if isinstance(value, (bool, int, float, str, type(None), torch.dtype)):
            self.inputs.append(HostInput(name, "constant", value))
            return value
        if container_items(value) is not None:
            self.inputs.append(HostInput(name, "container", value))
            return value  # replaced in trace() by a copy whose leaves are proxies
        self.inputs.append(HostInput(name, "other", value))
        return value

    def _traced_block_size(self, value: BlockSizeInt) -> BlockSizeInt:
        """Device code's view of a `hl.register_block_size` value: the same int, whose
        arithmetic keeps the block's symbol (`bk * 2` is the size `2*_BLOCK_SIZE_0`)."""
        if value.block_id >= self.host_block_count:
            return value  # another kernel's (an argument of this one): not one of its blocks
        symbol = self.ir.block_sizes[value.block_id].symbol
        return TracedBlockSize(int(value), value.block_id, symbol)

    def _enter_leaf(self, position: int, path: tuple, name: str, value: Any, runtime: bool) -> Any:
        """The device code's view of ``value``, found at ``path`` in the container argument at
        ``position``: a container is copied (its type kept) with each leaf entered; a tensor is
        a kernel argument; a number of a kernel parameter (``runtime``) a runtime scalar, as a
        scalar parameter is; a bool, a string, None, a dtype, a device or a number the host code
        built is baked and guarded, as such a host value is; anything else is baked."""
        if len(path) == 1 and path[0][0] == "index":
            source = ("item", position, path[0][1])  # what the exported launcher can index
        else:
            source = ("path", position, path)
        if isinstance(value, torch.Tensor):
            return self._add_lifted(source, value, name=name)
        if isinstance(value, ConstExpr):
            return value.value
        index = len(self.inputs) + len(self.ir.lifted)
        if (
            isinstance(value, (int, float))
            and not isinstance(value, (bool, BlockSizeInt))
            and runtime
        ):
            dtype = torch.int64 if isinstance(value, int) else torch.float32
            block_arg = Value(TensorType((), dtype), name)
            scalar = ScalarArg(name, index, dtype, block_arg)
            self.ir.body.args.append(block_arg)
            self.ir.scalar_args.append(scalar)
            self.ir.lifted.append(source)
            self.ir.lifted_args.append(scalar)
            return DeviceValue(self, block_arg)
        if isinstance(value, (bool, int, float, str, type(None), torch.dtype, torch.device)):
            self.ir.lifted.append(source)
            self.ir.lifted_args.append(LiftedConstant(name, index))
            self.constant_leaves.append((index, value))
            return value
        items = container_items(value)
        if items is None:
            return value
        entered = [
            self._enter_leaf(position, (*path, step), f"{name}_{label}", item, runtime)
            for step, label, item in items
        ]
        return rebuild_container(value, entered)

    # ------------------------------------------------------------------------------------------
    # locations and errors

    def current_loc(self) -> exc.SourceLocation | None:
        frame = sys._getframe(1)
        first, last = self.source_lines
        while frame is not None:
            code = frame.f_code
            if code.co_filename == self.ir.filename and first <= frame.f_lineno <= last:
                positions = list(code.co_positions())
                index = frame.f_lasti // 2
                if 0 <= index < len(positions):
                    line, _, col, end_col = positions[index]
                    return self.location_fn(line or frame.f_lineno, col, end_col)
                return self.location_fn(frame.f_lineno, None, None)
            frame = frame.f_back
        return None

    def _traceback_loc(self, tb: Any) -> exc.SourceLocation | None:
        """The innermost kernel line of a traceback (see `current_loc`)."""
        found = None
        first, last = self.source_lines
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename == self.ir.filename and first <= tb.tb_lineno <= last:
                found = tb
            tb = tb.tb_next
        if found is None:
            return None
        positions = list(found.tb_frame.f_code.co_positions())
        index = found.tb_lasti // 2
        if 0 <= index < len(positions):
            line, _, col, end_col = positions[index]
            return self.location_fn(line or found.tb_lineno, col, end_col)
        return self.location_fn(found.tb_lineno, None, None)

    def _raised_by_kernel_line(self, tb: Any) -> bool:
        """Whether the innermost frame of a traceback is the kernel's source (its device code, or
        a helper defined among its lines)."""
        last = None
        while tb is not None:
            last, tb = tb, tb.tb_next
        if last is None:
            return False
        first, end = self.source_lines
        code = last.tb_frame.f_code
        return code.co_filename == self.ir.filename and first <= last.tb_lineno <= end

    _DIM_SYMBOL = re.compile(r"\b_(?:RDIM|BLOCK)_SIZE_(\d+)\b")

    def readable_dims(self, text: str) -> str:
        """``text`` (an error message) with the IR's dimension symbols as the user knows them:
        a `:` slice's dimension (`_RDIM_SIZE_1`) by its extent, a tile's (`_BLOCK_SIZE_0`) by
        its loop variable (`tm.block_size`), else by its entry of Config.block_sizes."""
        if "_SIZE_" not in text:
            return text

        def name(match: re.Match) -> str:
            block_id = int(match.group(1))
            if not 0 <= block_id < len(self.ir.block_sizes):
                return match.group(0)
            info = self.ir.block_sizes[block_id]
            if info.symbol.name != match.group(0):
                return match.group(0)
            if info.kind == "reduction":
                return str(self.rdim_extents.get(info.symbol, info.size_hint))
            variable = self.block_names.get(block_id)
            if variable is not None:
                return variable
            if info.fixed_value is not None:
                return str(info.fixed_value)
            if info.config_index is not None:
                return f"block_sizes[{info.config_index}]"
            return match.group(0)

        return self._DIM_SYMBOL.sub(name, text)

    def _name_blocks(self, block_ids: list[int], multi: bool, loc: exc.SourceLocation) -> None:
        """Record how messages name the block sizes of a loop (`readable_dims`): from its
        `for` line's target, `t.block_size` (or `tm.block_size`, `tn.block_size` for
        `for tm, tn in hl.tile([m, n])`; `tiles[0].block_size` for `for tiles in ...`)."""
        text = (loc.line() or "").strip()
        if not text.startswith("for "):
            return
        try:
            statement = ast.parse(text + "\n    pass").body[0]
        except SyntaxError:
            return  # a `for` spanning lines
        if not isinstance(statement, ast.For):
            return
        target = statement.target
        names: list[str]
        if isinstance(target, ast.Name):
            if multi:
                names = [f"{target.id}[{i}]" for i in range(len(block_ids))]
            else:
                names = [target.id]
        elif isinstance(target, (ast.Tuple, ast.List)) and all(
            isinstance(e, ast.Name) for e in target.elts
        ):
            names = [e.id for e in target.elts]  # type: ignore[attr-defined]
        else:
            return
        if len(names) != len(block_ids):
            return
        for block_id, variable in zip(block_ids, names, strict=True):
            name = f"{variable}.block_size"
            if self.block_names.setdefault(block_id, name) != name:
                self.block_names[block_id] = None  # say block_sizes[i] instead

    def unsupported(self, api_name: str) -> Any:
        raise exc.NotAllowedOnDevice(f"hl.{api_name}", loc=self.current_loc())

    # ------------------------------------------------------------------------------------------
    # building IR

    @property
    def block(self) -> Block:
        return self.blocks[-1]

    def emit(
        self,
        op: ops.Op,
        inputs: Sequence[Any],
        attrs: dict[str, Any] | None = None,
        types: list | None = None,
    ) -> Node:
        attrs = attrs or {}
        inputs = list(inputs)
        if op.reduction and self.jagged_loops:
            inputs = jagged.masked_reduction_inputs(self, op, inputs, attrs)
        if types is None:
            try:
                types = op.type_rule(inputs, attrs) if op.type_rule else []
            except ValueError as error:
                raise exc.ShapeMismatch(str(error), loc=self.current_loc()) from None
        if op in _INTEGER_DIVISIONS and types and _divides_by_constant_zero(inputs, types[0]):
            raise exc.IntegerDivisionByZero(
                "division" if op is ops.BINARY["floordiv"] else "remainder",
                loc=self.current_loc(),
            )
        outputs = [Value(t, op.name.split("_")[-1][:6]) for t in types]
        node = Node(op, inputs, attrs, outputs, loc=self.current_loc())
        self.block.nodes.append(node)
        return node

    def wrap(self, node: Node) -> DeviceValue:
        return DeviceValue(self, node.output)

    def to_operand(self, value: Any, what: str = "operand") -> Any:
        """Proxy or python value -> IR operand (Value or constant)."""
        if isinstance(value, DeviceValue):
            return value.value
        if isinstance(value, TileProxy):
            return self.tile_attr(value, "index").value
        if isinstance(value, HostTensor):
            raise value.direct_use(f"as a {what}" if what != "operand" else "as a value")
        if isinstance(value, SymDim):
            return int(value)
        if isinstance(value, ConstExpr):
            return value.value
        if isinstance(value, (bool, int, float)):
            return value
        if value is UNDEFINED:
            raise exc.UndefinedVariable(
                "a variable assigned in only one branch of an `if`", loc=self.current_loc()
            )
        if isinstance(value, torch.Tensor):
            if value.ndim == 0 and value.device.type != "meta":
                # made in device code from numbers (torch.tensor(2.0), torch.full([], c)): a
                # constant of its dtype (arguments and captured tensors arrive as proxies)
                return self.emit(
                    ops.constant, [], {"value": value.item(), "dtype": value.dtype}
                ).output
            raise exc.HostTensorDirectUsage(
                "a torch tensor made in device code from numbers only (not 0-D); build it from "
                "tiles (torch.zeros([tile], ...), hl.full) or pass it as an argument",
                loc=self.current_loc(),
            )
        raise exc.TypeInferenceError(
            f"unsupported {what} of type {type(value).__name__} in device code"
        )

    def as_value(self, value: Any, dtype: torch.dtype | None = None) -> Value:
        """Like to_operand, but constants become 0-D values."""
        operand = self.to_operand(value)
        if isinstance(operand, Value):
            return operand
        if dtype is None:
            dtype = (
                torch.bool
                if isinstance(operand, bool)
                else torch.int64
                if isinstance(operand, int)
                else torch.float32
            )
        return self.emit(ops.constant, [], {"value": operand, "dtype": dtype}).output

    # ------------------------------------------------------------------------------------------
    # block sizes and dimensions

    def _new_block(
        self,
        kind: str,
        size_hint: int,
        *,
        fixed: int | None = None,
        loc: exc.SourceLocation | None = None,
    ) -> BlockSizeInfo:
        block_id = len(self.ir.block_sizes)
        prefix = "_RDIM_SIZE_" if kind == "reduction" else "_BLOCK_SIZE_"
        info = BlockSizeInfo(
            block_id=block_id,
            kind=kind,
            size_hint=max(int(size_hint), 1),
            symbol=sympy.Symbol(f"{prefix}{block_id}", integer=True, positive=True),
            fixed_value=fixed,
            loc=loc or self.current_loc(),
        )
        if kind in ("tile", "reduction"):
            # position in Config.block_sizes / Config.reduction_loops: program order
            info.config_index = sum(1 for b in self.ir.block_sizes if b.kind == kind)
        self.ir.block_sizes.append(info)
        return info

    def reduction_dim(self, size: int) -> sympy.Expr:
        """The symbol of the full-slice dimension of extent `size` (shared by equal sizes)."""
        if size == 1:
            return sympy.Integer(1)
        if size not in self.rdims_by_size:
            info = self._new_block("reduction", size)
            info.empty = size == 0
            self.rdims_by_size[size] = info.block_id
            self.rdim_extents[self.ir.block_sizes[self.rdims_by_size[size]].symbol] = size
        return self.ir.block_sizes[self.rdims_by_size[size]].symbol

    def dim_size(self, dim: sympy.Expr) -> Any:
        """What `x.shape[i]` gives device code for a dimension of IR shape `dim`."""
        if dim.is_Integer:
            return int(dim)
        for info in self.ir.block_sizes:
            if info.symbol == dim:
                if info.kind == "reduction":
                    # the real extent: a length-0 slice's block has its size hint clamped to 1
                    return SymDim(self.rdim_extents.get(dim, info.size_hint), dim)
                return self.wrap(
                    self.emit(
                        ops.TILE_ATTRS["block_size"],
                        [],
                        {"block_id": info.block_id},
                        [TensorType((), torch.int32)],
                    )
                )
        if sizes.is_size(self, dim):
            return sizes.size_value(self, dim)  # `2*_BLOCK_SIZE_0`: computed from the block size
        raise exc.TypeInferenceError(f"the size {dim} is not known in device code")

    def shape_item(self, item: Any) -> sympy.Expr:
        """A size given to hl.full / reshape: an int, a tile, a block size, a symbolic dim, or
        +, -, * and exact // of block sizes and ints (`t.block_size * 2`, `bk * 2`)."""
        if isinstance(item, TileProxy):
            return self.ir.block_sizes[item.block_id].symbol
        if isinstance(item, SYMBOLIC_INTS):
            if item < 0:
                raise exc.NegativeSize(self.readable_dims(str(item.expr)), loc=self.current_loc())
            return item.expr
        if isinstance(item, BlockSizeInt):
            return self.ir.block_sizes[item.block_id].symbol
        if isinstance(item, SymDim):
            return item.expr
        if isinstance(item, DeviceValue):
            return self._device_shape_item(item)
        if isinstance(item, ConstExpr):
            item = item.value
        if isinstance(item, int) and not isinstance(item, bool):
            if item < 0:
                raise exc.NegativeSize(item, loc=self.current_loc())
            return sympy.Integer(item)
        raise exc.TypeInferenceError(
            f"a shape entry must be an int, a tile or a block size, not {type(item).__name__}"
        )

    def _device_shape_item(self, item: DeviceValue) -> sympy.Expr:
        """The size a 0-D device value used as a shape entry stands for: one computed from
        block sizes and ints (`t.block_size * 2`); any other is known only on the device."""
        expr = sizes.size_expr(self, item) if item.ndim == 0 else None
        if expr is not None:
            if expr.is_Integer and int(expr) < 0:
                raise exc.NegativeSize(int(expr), loc=self.current_loc())
            return expr
        if item.ndim == 0 and computed_from(item.value, {ops.TILE_ATTRS["block_size"]}):
            raise exc.TypeInferenceError(
                "a shape entry computed from a block size must use only +, -, * with ints and "
                "// by an int that divides it exactly (e.g. `t.block_size * 2`, "
                "`(t.block_size * 4) // 2`); this one also depends on a value known only on "
                "the device, or divides inexactly (`t.block_size // 2` is 0 for a block size "
                "of 1)",
                loc=self.current_loc(),
                hint="Size it with an int or a tile, or use a fixed block size (an int).",
            )
        what = "a device tensor" if item.ndim else "a value known only on the device"
        raise exc.TypeInferenceError(
            f"a shape entry must be an int, a tile or a block size, not {what}",
            loc=self.current_loc(),
        )

    # ------------------------------------------------------------------------------------------
    # loops

    def hl_tile(
        self, begin_or_end: Any, end_or_none: Any = None, *, block_size: Any = None
    ) -> TileLoopRequest:
        return self._loop_request(begin_or_end, end_or_none, block_size, is_grid=False)

    def hl_grid(
        self, begin_or_end: Any, end_or_none: Any = None, *, step: Any = None
    ) -> TileLoopRequest:
        if step not in (None, 1):
            raise exc.GridStepNotSupported(step, loc=self.current_loc())
        return self._loop_request(begin_or_end, end_or_none, None, is_grid=True)

    def hl_jagged_tile(self, parent: Any) -> TileLoopRequest:
        return jagged.loop_request(self, parent)

    def hl_stacktensor_like(self, tensor_like: Any, dev_ptrs: Any) -> Any:
        return stack.make(self, tensor_like, dev_ptrs)

    def _loop_request(
        self, begin_or_end: Any, end_or_none: Any, block_size: Any, *, is_grid: bool
    ) -> TileLoopRequest:
        multi = isinstance(begin_or_end, (list, tuple, torch.Size))
        if end_or_none is None:
            ends = list(begin_or_end) if multi else [begin_or_end]
            begins = [0] * len(ends)
        else:
            begins = list(begin_or_end) if multi else [begin_or_end]
            ends = (
                list(end_or_none)
                if isinstance(end_or_none, (list, tuple, torch.Size))
                else [end_or_none]
            )
            multi = multi or isinstance(end_or_none, (list, tuple, torch.Size))
        if len(begins) != len(ends):
            raise exc.RankMismatch(
                len(begins), len(ends), "begin and end of hl.tile", loc=self.current_loc()
            )
        api = "hl.grid" if is_grid else "hl.tile"
        if isinstance(block_size, (list, tuple)):
            block_sizes = list(block_size)
            if len(block_sizes) != len(ends):
                raise exc.RankMismatch(
                    len(ends),
                    len(block_sizes),
                    f"block_size of {api}",
                    loc=self.current_loc(),
                    hint=f"Give one block size per dimension of the {api} loop "
                    f"({len(ends)} here; None for a tunable one).",
                )
        else:
            block_sizes = [block_size] * len(ends)
        for bound in begins + ends:
            if isinstance(bound, TileProxy):
                raise exc.TileOfTile(loc=self.current_loc())
            self._check_bound(bound, api)
        block_sizes = [self._check_block_size(b) for b in block_sizes]
        return TileLoopRequest(begins, ends, block_sizes, is_grid, multi)

    def _check_bound(self, bound: Any, api: str) -> None:
        """A loop bound is an int, a 0-D integer device value or a tensor size; a float (which
        would be truncated, or fail in the generated code) is refused where the loop is."""
        if isinstance(bound, ConstExpr):
            bound = bound.value
        if isinstance(bound, float):
            raise exc.TypeInferenceError(
                f"{api} bounds must be integers, got the float {bound!r}",
                loc=self.current_loc(),
                hint="Convert it in host code with int(...), math.ceil(...) or math.floor(...), "
                "choosing how it rounds.",
            )
        if isinstance(bound, DeviceValue):
            if bound.ndim != 0:
                raise exc.TypeInferenceError(
                    f"{api} bounds must be scalars (0-D), got a device tensor of shape "
                    f"{list(bound.value.shape)}",
                    loc=self.current_loc(),
                )
            if bound.dtype.is_floating_point or bound.dtype.is_complex:
                raise exc.TypeInferenceError(
                    f"{api} bounds must be integers, got a {bound.dtype} device value",
                    loc=self.current_loc(),
                    hint="Convert it with .to(torch.int32) (or torch.ceil / torch.floor first).",
                )
            return
        if isinstance(bound, (bool, int, HostTensor)):
            return  # a HostTensor is refused as a value (HostTensorDirectUsage) by `loop`
        raise exc.TypeInferenceError(
            f"{api} bounds must be integers (or 0-D integer device values), got "
            f"{type(bound).__name__} {bound!r}",
            loc=self.current_loc(),
        )

    def _check_block_size(self, block_size: Any) -> Any:
        if isinstance(block_size, ConstExpr):
            block_size = block_size.value
        if block_size is None or isinstance(block_size, BlockSizeInt):
            return block_size
        if isinstance(block_size, int) and not isinstance(block_size, bool):
            if block_size <= 0:
                raise exc.InvalidConfig(
                    f"block_size must be positive, got {block_size}", loc=self.current_loc()
                )
            return block_size
        raise exc.TypeInferenceError(
            "block_size must be None, an int or hl.register_block_size(), not "
            f"{type(block_size).__name__}",
            loc=self.current_loc(),
        )

    def _bound_operand(self, bound: Any, loc: exc.SourceLocation | None) -> Any:
        if isinstance(bound, DeviceValue):
            if bound.ndim != 0:
                raise exc.TypeInferenceError("loop bounds must be scalars (0-D)", loc=loc)
            return bound.value
        try:
            return self.to_operand(bound, "loop bound")
        except exc.BaseError as error:
            if loc is not None:  # the `for` line, not the line the loop body is traced at
                error.loc = None
                error.with_location(loc)
            raise

    def _hint(self, begin: Any, end: Any, loc: exc.SourceLocation | None = None) -> int:
        if isinstance(begin, int) and isinstance(end, int):
            if begin > end:
                raise exc.InvalidTileRange(begin, end, loc=loc or self.current_loc())
            return end - begin
        if isinstance(end, int):
            return end
        return DATA_DEPENDENT_HINT

    def loop(self, iterable: Any, body_fn: Callable, carried: tuple, loc: tuple) -> tuple:
        if not isinstance(iterable, TileLoopRequest):
            return self._unrolled_loop(iterable, body_fn, carried, loc)
        request = iterable
        top_level = self.loop_depth == 0 and len(self.blocks) == 1
        # errors about the loop's bounds and block sizes point at its `for` line
        for_loc = self.location_fn(*loc)
        begins = [self._bound_operand(b, for_loc) for b in request.begins]
        ends = [self._bound_operand(e, for_loc) for e in request.ends]
        block_ids = []
        for begin, end, block_size in zip(begins, ends, request.block_sizes, strict=True):
            hint = self._hint(begin, end, for_loc)
            if request.is_grid:
                info = self._new_block("grid", hint, fixed=1, loc=for_loc)
            elif isinstance(block_size, BlockSizeInt):
                info = self.ir.block_sizes[block_size.block_id]
            elif block_size is None:
                info = self._new_block("tile", hint, loc=for_loc)
            elif isinstance(block_size, int) and block_size > 0:
                info = self._new_block("fixed", hint, fixed=block_size, loc=for_loc)
            else:  # `_loop_request` checked it; a request built by a plugin may not be
                raise exc.InvalidConfig(
                    f"block_size must be None, a positive int or hl.register_block_size(), "
                    f"got {block_size!r}",
                    loc=for_loc,
                )
            block_ids.append(info.block_id)
            static = isinstance(begin, int) and isinstance(end, int)
            self.loop_extents.setdefault(info.block_id, []).append(end - begin if static else None)
        if not request.is_grid:
            self._name_blocks(block_ids, request.multi, for_loc)
        loop_info = LoopInfo(len(self.ir.loops), block_ids, top_level, loc=for_loc)
        self.ir.loops.append(loop_info)
        tiles = [Value(TileType(b, request.is_grid), "tile") for b in block_ids]
        # a variable holding a tuple or list (`acc = (s, c)`) is carried item by item
        flat = [_flatten_carried(c) for c in carried]
        structures = [structure for _, structure in flat]
        leaves = [leaf for items, _ in flat for leaf in items]
        variable_names = body_fn.__code__.co_varnames[1 : 1 + len(carried)]
        names = [
            name + path
            for name, (items, structure) in zip(variable_names, flat, strict=True)
            for path in _leaf_paths(structure)
        ]
        carried = tuple(leaves)
        carried_values = [
            self.as_value(c) if not isinstance(c, DeviceValue) else c.value for c in carried
        ]
        for c in carried:
            if isinstance(c, (TileProxy, HostTensor)) or c is UNDEFINED:
                raise exc.TypeInferenceError(
                    "only device tensors and numbers can be carried by a loop", loc=loop_info.loc
                )
        inner_carried = [Value(v.type, v.name_hint) for v in carried_values]
        self.carried_ids.update(v.id for v in inner_carried)
        body = Block(tiles + inner_carried)
        self.blocks.append(body)
        self.loop_depth += 1
        outer_tiles = dict(self.open_tiles)
        self.open_tiles.update(
            {t.type.block_id: (b, e, t) for t, b, e in zip(tiles, begins, ends, strict=True)}
        )
        if top_level:
            self.loop_deps.begin_loop()
        if request.jagged is not None:
            jagged.enter(self, request.jagged, tiles[0])
        try:
            tile_proxies = [self._loop_variable(t, request.is_grid) for t in tiles]
            target = tuple(tile_proxies) if request.multi else tile_proxies[0]
            inner = iter([DeviceValue(self, v) for v in inner_carried])
            results = body_fn(target, *[_unflatten_carried(inner, s) for s in structures])
            results = _flatten_results(results, structures, variable_names, loop_info.loc)
            body.yields = [
                self._coerce_carried(r, init, name, loop_info.loc)
                for r, init, name in zip(results, carried_values, names, strict=True)
            ]
        finally:
            if top_level:
                self.loop_deps.end_loop()
            if request.jagged is not None:
                jagged.exit(self)
            self.loop_depth -= 1
            self.open_tiles = outer_tiles
            self.blocks.pop()
        op = ops.grid_loop if top_level else ops.tile_loop
        attrs = {
            "block_ids": block_ids,
            "begins": begins,
            "ends": ends,
            "loop_id": loop_info.loop_id,
            "is_grid": request.is_grid,
        }
        node = Node(
            op,
            carried_values,
            attrs,
            [Value(v.type, v.name_hint) for v in carried_values],
            [body],
            loop_info.loc,
        )
        loop_info.node = node
        self.block.nodes.append(node)
        outputs = iter([DeviceValue(self, v) for v in node.outputs])
        return tuple(_unflatten_carried(outputs, s) for s in structures)

    def _loop_variable(self, tile: Value, is_grid: bool) -> Any:
        proxy = TileProxy(self, tile)
        if is_grid:
            return self.tile_attr(proxy, "begin")  # hl.grid yields scalar indices
        return proxy

    def _coerce_carried(
        self, result: Any, init: Value, name: str, loc: exc.SourceLocation | None
    ) -> Value:
        """The value a loop body yields for a carried variable, in the variable's type. A body
        that widens the dtype (int32 + float32) is refused: casting back every iteration would
        silently truncate, and the loop is traced once, with the initial type."""
        value = self.as_value(result, init.dtype)
        if value.type == init.type:
            return value
        if isinstance(value.type, TensorType) and isinstance(init.type, TensorType):
            try:
                shape = ops.broadcast_shapes(value.shape, init.shape)
            except ValueError:
                shape = None
            widens = torch.promote_types(init.dtype, value.dtype) != init.dtype
            if shape is not None and ops.shapes_equal(shape, init.shape) and not widens:
                if value.shape != init.shape:
                    value = self.emit(ops.view_expand, [value], {"shape": init.shape}).output
                if value.dtype != init.dtype:  # a narrower dtype: the cast loses nothing
                    value = self.emit(ops.cast, [value], {"dtype": init.dtype}).output
                return value
        raise exc.LoopCarriedTypeChange(f"{name!r}", str(init.type), str(value.type), loc=loc)

    def _unrolled_loop(self, iterable: Any, body_fn: Callable, carried: tuple, loc: tuple) -> tuple:
        # a refused iterable is reported at its `for` line (the rewritten loop's call has no
        # span of its own)
        if isinstance(iterable, (DeviceValue, HostTensor)):
            what = "a device tensor" if isinstance(iterable, DeviceValue) else "a tensor argument"
            raise exc.InvalidDeviceForLoop(what, loc=self.location_fn(*loc))
        try:
            items = list(iterable)
        except TypeError as error:
            if isinstance(error, exc.Base):
                raise
            raise exc.InvalidDeviceForLoop(
                f"a {type(iterable).__name__}", loc=self.location_fn(*loc)
            ) from None
        for item in items:
            carried = tuple(body_fn(item, *carried))
        return carried

    def comprehension_iter(self, iterable: Any, kind: str, text: str, loc: tuple) -> Any:
        """An iterable of a comprehension in device code (see `ast_rewrite._ComprehensionGuard`):
        Python iterables pass; device loops and tensors are refused with the construct named."""
        if isinstance(iterable, TileLoopRequest):
            why = (
                "in device code `range` and hl.grid are device loops"
                if iterable.is_grid
                else "hl.tile is a device loop"
            ) + ", which only a `for` statement can run"
        elif isinstance(iterable, (DeviceValue, HostTensor, TileProxy)):
            why = "tensors and tiles cannot be iterated in device code"
        else:
            return iterable
        raise exc.ComprehensionOnDevice(kind, text, why, loc=self.location_fn(*loc))

    def if_(
        self, cond: Any, then_fn: Callable, else_fn: Callable, inputs: tuple, loc: tuple
    ) -> tuple:
        cond = self._test_operand(cond, loc, "`if`", "use torch.where")
        if not isinstance(cond, (DeviceValue, TileProxy)):
            return tuple((then_fn if cond else else_fn)(*inputs))
        location = self.location_fn(*loc)
        cond_value = self.to_operand(cond)
        branches = []
        results = []
        for fn in (then_fn, else_fn):
            block = Block()
            self.blocks.append(block)
            try:
                results.append(list(fn(*inputs)))
            finally:
                self.blocks.pop()
            branches.append(block)
        outputs = []
        yields: list[list[Any]] = [[], []]
        for a, b in zip(*results, strict=True):
            if a is UNDEFINED or b is UNDEFINED:
                outputs.append(None)
                continue
            if not isinstance(a, DeviceValue) and not isinstance(b, DeviceValue) and a is b:
                outputs.append(("same", a))
                continue
            pair = []
            for side, value in enumerate((a, b)):
                self.blocks.append(branches[side])
                try:
                    pair.append(self.as_value(value))
                finally:
                    self.blocks.pop()
            va, vb = pair
            if va.type != vb.type:
                dtype = ops.promote_types(va, vb)
                shape = ops.broadcast_shapes(va.shape, vb.shape)
                fixed = []
                for side, v in enumerate((va, vb)):
                    self.blocks.append(branches[side])
                    try:
                        if v.shape != shape:
                            v = self.emit(ops.view_expand, [v], {"shape": shape}).output
                        if v.dtype != dtype:
                            v = self.emit(ops.cast, [v], {"dtype": dtype}).output
                    finally:
                        self.blocks.pop()
                    fixed.append(v)
                va, vb = fixed
            yields[0].append(va)
            yields[1].append(vb)
            outputs.append(("value", va.type))
        branches[0].yields, branches[1].yields = yields
        out_values = [Value(o[1], "phi") for o in outputs if o is not None and o[0] == "value"]
        node = Node(ops.if_, [cond_value], {}, out_values, branches, location)
        self.block.nodes.append(node)
        result = []
        values = iter(out_values)
        for o in outputs:
            if o is None:
                result.append(UNDEFINED)
            elif o[0] == "same":
                result.append(o[1])
            else:
                result.append(DeviceValue(self, next(values)))
        return tuple(result)

    def _test_operand(self, value: Any, loc: tuple, what: str, instead: str) -> Any:
        """What an `if` test (or an operand of its `and` / `or` / `not`) reads: a Python value
        as it is, a tensor argument as `if flag:` reads it (on the device), a device value or
        tile as it is, once checked to be 0-D."""
        if isinstance(value, ConstExpr):
            value = value.value
        if isinstance(value, HostTensor):
            value = self._host_condition(value, loc)
        if isinstance(value, (DeviceValue, TileProxy)) and self.to_operand(value).type.ndim != 0:
            raise exc.TypeInferenceError(
                f"{what} on a tensor with dimensions is data dependent per lane; {instead}",
                loc=self.location_fn(*loc),
            )
        return value

    def _condition_truth(self, value: Any, loc: tuple) -> Any:
        """An operand of an `if` test's `and` / `or` / `not`: a Python value as it is, a 0-D
        device value as a device bool (nonzero), a tensor argument as `if flag:` reads it."""
        if isinstance(value, TileProxy):
            return value  # Python's truth test of it raises IncorrectTileUsage
        value = self._test_operand(
            value,
            loc,
            "`and` / `or` / `not`",
            "use torch.logical_and / logical_or / logical_not with torch.where",
        )
        if not isinstance(value, DeviceValue):
            return value
        if value.dtype == torch.bool:
            return value
        return torch.ne(value, 0)

    def bool_op(self, kind: str, operands: list[Callable[[], Any]], loc: tuple) -> Any:
        """`a and b` / `a or b` in an `if` test (the rewrite passes each operand as a thunk).
        Python's rules while the operands are Python values; a 0-D device value (a comparison
        of a scalar argument, a value read on the device) joins the others on the device with
        logical_and / logical_or. The operands after a device value are traced whatever its
        value: the device evaluates them, as torch.where evaluates both sides."""
        combined: Any = None
        value: Any = None
        for get in operands:
            value = self._condition_truth(get(), loc)
            if isinstance(value, DeviceValue):
                if combined is None:
                    combined = value
                elif kind == "and":
                    combined = torch.logical_and(combined, value)
                else:
                    combined = torch.logical_or(combined, value)
            elif (kind == "and") != bool(value):  # a false `and` operand, a true `or` operand
                return value if combined is None else bool(value)
        return value if combined is None else combined

    def bool_not(self, operand: Any, loc: tuple) -> Any:
        """`not a` in an `if` test: Python's `not`, or logical_not of a 0-D device value."""
        value = self._condition_truth(operand, loc)
        if isinstance(value, DeviceValue):
            return torch.logical_not(value)
        return not value

    def _host_condition(self, cond: HostTensor, loc: tuple) -> DeviceValue:
        """`if flag:` on a tensor argument: its truth value as torch gives it (one element,
        nonzero), read on the device at every launch, as an `if` on a device scalar is."""
        location = self.location_fn(*loc)
        if cond.real.numel() != 1:
            raise exc.HostTensorDirectUsage(
                f"{cond.arg.name!r} (as the condition of an `if`; it has "
                f"{cond.real.numel()} elements)",
                loc=location,
                hint="The truth value of a tensor is defined for one element only: compare "
                "loaded values and use torch.where(...), or reduce them (.any(), .all()).",
            )
        with exc.source_location(location):
            value = self.load(cond, (0,) * cond.real.ndim, None, None)
            if value.dtype != torch.bool:
                value = self.call_torch(torch.Tensor.__ne__, (value, 0), {})
        return value

    # ------------------------------------------------------------------------------------------
    # tile attributes

    def tile_attr(self, tile: TileProxy, name: str) -> DeviceValue:
        info = self.ir.block_sizes[tile.block_id]
        if name == "index":
            shape = (info.symbol,) if info.kind != "grid" else (sympy.Integer(1),)
            ty = TensorType(shape, self.ir.index_dtype)
        else:
            ty = TensorType((), self.ir.index_dtype)
        node = self.emit(ops.TILE_ATTRS[name], [tile.value], {"block_id": tile.block_id}, [ty])
        return self.wrap(node)

    # ------------------------------------------------------------------------------------------
    # memory

    def _index_items(
        self, tensor: HostTensor, index: Any
    ) -> tuple[list[tuple], list[Any], tuple[sympy.Expr, ...]]:
        """Classify subscript items; returns (item descriptors, dynamic inputs, result shape).
        For accesses that take no mask of their own: a slice with a device-valued bound (whose
        lanes past the dimension's end are masked) is refused."""
        items, inputs, shape, bounds = self._access_items(tensor, index)
        if bounds is not None:
            raise exc.NotAllowedOnDevice(
                f"a slice with a device-valued bound in this access of {tensor.arg.name}",
                loc=self.current_loc(),
                hint="Index with `start + hl.arange(length)` and an explicit mask instead.",
            )
        return items, inputs, shape

    def _access_items(
        self, tensor: HostTensor, index: Any
    ) -> tuple[list[tuple], list[Any], tuple[sympy.Expr, ...], Value | None]:
        """Classify subscript items; returns (item descriptors, dynamic inputs, result shape,
        the mask of the lanes of slices with a device-valued bound that are inside the tensor,
        or None). Such a slice (`x[s : s + n]`) indexes with `s + hl.arange(n)`."""
        if not isinstance(index, tuple):
            index = (index,)  # a list key (`x[[tile]]`) is one index item, as in torch
        index = list(index)
        if any(i is Ellipsis for i in index):
            position = index.index(Ellipsis)
            consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
            index[position : position + 1] = [slice(None)] * (tensor.ndim - consumed)
        consumed = sum(1 for i in index if i is not None)
        if consumed != tensor.ndim:
            raise exc.RankMismatch(
                tensor.ndim, consumed, f"indexing {tensor.arg.name}", loc=self.current_loc()
            )
        index, bounds = sizes.dynamic_slice_items(
            self, index, tuple(tensor.shape), f"indexing {tensor.arg.name}"
        )
        items: list[tuple] = []
        inputs: list[Any] = []
        shape: list[sympy.Expr] = []
        tensor_shapes: list[tuple] = []
        tensor_position = None
        dim = 0
        for item in index:
            if item is None:
                items.append(("none",))
                shape.append(sympy.Integer(1))
                continue
            size = tensor.shape[dim]
            if isinstance(item, TileProxy):
                info = self.ir.block_sizes[item.block_id]
                if info.kind == "grid":
                    inputs.append(self.tile_attr(item, "begin").value)
                    items.append(("scalar", len(inputs) - 1))
                else:
                    inputs.append(item.value)
                    items.append(("tile", len(inputs) - 1, item.block_id))
                    shape.append(info.symbol)
            elif isinstance(item, slice):
                start, stop, step = item.indices(size)
                if step != 1:
                    raise exc.InvalidIndexingType("slices with a step", loc=self.current_loc())
                length = max(stop - start, 0)
                dim_expr = self.reduction_dim(length)
                items.append(("full", start, length))
                shape.append(dim_expr)
            elif isinstance(item, (int, SymDim)) and not isinstance(item, bool):
                value = int(item)
                if -size <= value < 0:
                    value += size  # counts from the end, as in torch; out of range it stays as
                    # written, for the bounds checks to report it
                items.append(("const", value))
            elif isinstance(item, DeviceValue):
                if item.dtype == torch.bool:
                    raise exc.DataDependentOutputShapeNotSupported(
                        "boolean-mask indexing", loc=self.current_loc()
                    )
                if item.dtype.is_floating_point:
                    raise exc.InvalidIndexingType("a floating-point tensor", loc=self.current_loc())
                if (
                    item.ndim == 0
                    and item.dtype.is_signed
                    and isinstance(size, int)
                    # an index from a loop's positions is not negative where it is in bounds,
                    # and the bind-time bounds check reads it as it is
                    and not computed_from(item.value, _TILE_ATTR_OPS)
                ):
                    item = self._from_the_end(item, size)
                inputs.append(item.value)
                if item.ndim == 0:
                    items.append(("scalar", len(inputs) - 1))
                else:
                    items.append(("tensor", len(inputs) - 1))
                    tensor_shapes.append(item.value.shape)
                    if tensor_position is None:
                        tensor_position = len(shape)
                        shape.append(None)  # placeholder for the broadcast index shape
            else:
                raise _index_type_error(item, self.current_loc())
            dim += 1
        if tensor_position is not None:
            try:
                broadcast = ops.broadcast_shapes(*tensor_shapes)
            except ValueError as error:
                raise exc.ShapeMismatch(str(error), loc=self.current_loc()) from None
            shape[tensor_position : tensor_position + 1] = list(broadcast)
        return items, inputs, tuple(shape), bounds

    def _with_bounds(self, mask: Value | None, bounds: Value | None) -> Value | None:
        """An access's mask ANDed with the mask of its slices' lanes inside the tensor."""
        if bounds is None or mask is None:
            return mask if bounds is None else bounds
        return self.emit(ops.BINARY["logical_and"], [mask, bounds]).output

    def _from_the_end(self, index: DeviceValue, size: int) -> DeviceValue:
        """A 0-D integer index known only on the device (`x[t, k]` for an argument `k`): a
        negative one counts from the end, as in torch and as a literal does here (it read
        before the tensor). Out of range it stays as it is, for the ref backend's bounds check
        (compiled backends do not check indices, as for index tensors)."""
        negative = self.call_torch(torch.lt, (index, 0), {})
        shifted = self.call_torch(torch.add, (index, size), {})
        return self.call_torch(torch.where, (negative, shifted, index), {})

    def load(
        self, tensor: Any, index: Any, extra_mask: Any, eviction_policy: str | None
    ) -> DeviceValue:
        if isinstance(tensor, stack.StackTensorProxy):
            return stack.load(self, tensor, index, extra_mask, eviction_policy)
        if not isinstance(tensor, HostTensor):
            if isinstance(tensor, DeviceValue):
                return self.subscript(tensor, index)
            raise exc.InvalidIndexingType(
                f"hl.load of a {type(tensor).__name__}", loc=self.current_loc()
            )
        self.loop_deps.access(tensor.arg.index, _arg_name(tensor.arg), False, self.current_loc())
        items, inputs, shape, bounds = self._access_items(tensor, index)
        mask_index = None
        mask = jagged.access_mask(self, shape, extra_mask, f"a load of {tensor.arg.name}")
        mask = self._with_bounds(mask, bounds)
        if mask is not None:
            inputs.append(mask)
            mask_index = len(inputs) - 1
        attrs = {
            "tensor": tensor.arg,
            "items": tuple(items),
            "mask": mask_index,
            "eviction_policy": eviction_policy,
        }
        return self.wrap(self.emit(ops.load, inputs, attrs, [TensorType(shape, tensor.dtype)]))

    def store(self, tensor: Any, index: Any, value: Any, extra_mask: Any) -> None:
        if isinstance(tensor, stack.StackTensorProxy):
            return stack.store(self, tensor, index, value, extra_mask)
        if not isinstance(tensor, HostTensor):
            if isinstance(tensor, DeviceValue):
                raise exc.DeviceTensorSubscriptAssignmentNotAllowed(loc=self.current_loc())
            raise exc.NonTensorSubscriptAssign(type(tensor).__name__, loc=self.current_loc())
        self.loop_deps.access(tensor.arg.index, _arg_name(tensor.arg), True, self.current_loc())
        items, inputs, shape, bounds = self._access_items(tensor, index)
        stored = self._stored_value(value, shape, tensor.dtype)
        inputs.append(stored)
        value_index = len(inputs) - 1
        mask_index = None
        mask = jagged.access_mask(self, shape, extra_mask, f"a store to {tensor.arg.name}")
        mask = self._with_bounds(mask, bounds)
        if mask is not None:
            inputs.append(mask)
            mask_index = len(inputs) - 1
        attrs = {
            "tensor": tensor.arg,
            "items": tuple(items),
            "value": value_index,
            "mask": mask_index,
        }
        self.emit(ops.store, inputs, attrs, [])

    def _stored_value(self, value: Any, shape: tuple[sympy.Expr, ...], dtype: torch.dtype) -> Value:
        if isinstance(value, (bool, int, float)) and not isinstance(value, DeviceValue):
            return self.emit(ops.full, [], {"shape": shape, "value": value, "dtype": dtype}).output
        stored = self.as_value(value)
        vshape = stored.shape
        # extra leading size-1 dims are allowed (squeezed)
        while len(vshape) > len(shape) and vshape[0] == 1:
            stored = self.emit(ops.view_reshape, [stored], {"shape": vshape[1:]}).output
            vshape = stored.shape
        try:
            broadcast = ops.broadcast_shapes(vshape, shape)
        except ValueError:
            broadcast = None
        if broadcast is None or not ops.shapes_equal(broadcast, shape):
            raise exc.ShapeMismatch(
                f"cannot store a value of shape {list(vshape)} into a slice of shape {list(shape)}",
                loc=self.current_loc(),
            )
        if vshape != tuple(shape):
            stored = self.emit(ops.view_expand, [stored], {"shape": tuple(shape)}).output
        if stored.dtype != dtype:
            stored = self.emit(ops.cast, [stored], {"dtype": dtype}).output
        return stored

    def hl_load(
        self, tensor: Any, index: list, extra_mask: Any = None, eviction_policy: str | None = None
    ) -> DeviceValue:
        if eviction_policy not in (None, "", "evict_first", "evict_last", "first", "last"):
            raise exc.InvalidConfig(
                f"eviction_policy must be evict_first or evict_last, got {eviction_policy!r}"
            )
        return self.load(tensor, tuple(index), extra_mask, eviction_policy)

    def hl_store(self, tensor: Any, index: list, value: Any, extra_mask: Any = None) -> None:
        self.store(tensor, tuple(index), value, extra_mask)

    def hl_atomic(
        self,
        kind: str,
        target: Any,
        index: list,
        value: Any,
        sem: str = "relaxed",
        expected: Any = None,
    ) -> DeviceValue:
        if isinstance(target, stack.StackTensorProxy):
            raise exc.NotAllowedOnDevice(
                f"hl.atomic_{kind} on a StackTensor", loc=self.current_loc()
            )
        if not isinstance(target, HostTensor):
            raise exc.AtomicOnDeviceTensor(f"hl.atomic_{kind}", loc=self.current_loc())
        if sem not in ("relaxed", "acquire", "release", "acq_rel"):
            raise exc.InvalidConfig(
                f"sem must be relaxed, acquire, release or acq_rel, got {sem!r}"
            )
        if kind in ("and", "or", "xor") and target.dtype.is_floating_point:
            raise exc.TypeInferenceError(
                f"hl.atomic_{kind} needs an integer or bool target, got {target.dtype}",
                loc=self.current_loc(),
            )
        self.loop_deps.access(target.arg.index, _arg_name(target.arg), True, self.current_loc())
        items, inputs, shape, bounds = self._access_items(target, tuple(index))
        inputs.append(self._stored_value(value, shape, target.dtype))
        attrs = {
            "tensor": target.arg,
            "items": tuple(items),
            "value": len(inputs) - 1,
            "mask": None,
            "kind": kind,
            "sem": sem,
        }
        mask = jagged.access_mask(self, shape, None, f"hl.atomic_{kind} on {target.arg.name}")
        mask = self._with_bounds(mask, bounds)
        if mask is not None:
            inputs.append(mask)
            attrs["mask"] = len(inputs) - 1
        if expected is not None:
            inputs.append(self._stored_value(expected, shape, target.dtype))
            attrs["expected"] = len(inputs) - 1
        return self.wrap(self.emit(ops.atomic, inputs, attrs, [TensorType(shape, target.dtype)]))

    def subscript(self, value: DeviceValue, index: Any) -> DeviceValue:
        if not isinstance(index, tuple):
            index = (index,)
        index = list(index)
        if any(i is Ellipsis for i in index):
            position = index.index(Ellipsis)
            consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
            index[position : position + 1] = [slice(None)] * (value.ndim - consumed)
        consumed = sum(1 for i in index if i is not None)
        if value.ndim == 0 and consumed:
            name = next(
                (
                    f"{a.name!r} is a number argument (a 0-D device scalar)"
                    for a in self.ir.scalar_args
                    if a.value is value.value
                ),
                "this is a 0-D device scalar",
            )
            raise exc.TypeInferenceError(
                f"cannot index a scalar: {name}, which has no dimensions",
                loc=self.current_loc(),
                hint="Use the number as it is (it broadcasts against tiles); to read one value "
                "per element, pass a tensor instead.",
            )
        if consumed > value.ndim:
            raise exc.RankMismatch(
                value.ndim, consumed, "indexing a device tensor", loc=self.current_loc()
            )
        index += [slice(None)] * (value.ndim - consumed)
        items: list[Any] = []
        shape: list[sympy.Expr] = []
        dim = 0
        for item in index:
            if item is None:
                items.append(None)
                shape.append(sympy.Integer(1))
            elif isinstance(item, slice) and item == slice(None):
                items.append("slice")
                shape.append(value.value.shape[dim])
                dim += 1
            elif (
                isinstance(item, int)
                and not isinstance(item, bool)
                and value.value.shape[dim].is_Integer
            ):
                items.append(item % int(value.value.shape[dim]))
                dim += 1
            else:
                raise self._device_index_refusal(item, dim)
        return self.wrap(
            self.emit(
                ops.view_subscript, [value.value], {"items": tuple(items), "shape": tuple(shape)}
            )
        )

    def _device_index_refusal(self, item: Any, dim: int) -> exc.BaseError:
        """Why ``item`` cannot index dimension ``dim`` of a device tensor (a value in registers,
        not memory: it takes None, ':' and ints on dimensions of constant size only)."""
        loc = self.current_loc()
        if isinstance(item, DeviceValue) and item.value.dtype == torch.bool:
            return exc.DataDependentOutputShapeNotSupported(
                "Boolean-mask indexing of a device tensor", loc=loc
            )
        if isinstance(item, int) and not isinstance(item, bool):
            return exc.InvalidIndexingType(
                f"the int {item} on dimension {dim} of a device tensor, whose size is a tile or "
                "a ':' slice rather than a constant; an int picks an element only on a "
                "dimension of constant size (e.g. one made by None). Index the host tensor "
                "instead (x[tile, 0]), or use torch.where / a reduction on the device tensor",
                loc=loc,
            )
        if _holds_tile(item):
            return _index_type_error(item, loc)
        what = "a tensor" if isinstance(item, DeviceValue) else type(item).__name__
        return exc.InvalidIndexingType(
            f"{what} on a device tensor (a device tensor takes None, ':' and ints on dimensions "
            "of constant size; index the host tensor instead)",
            loc=loc,
        )

    def hl_subscript(self, tensor: Any, index: list) -> DeviceValue:
        return self.subscript(tensor, tuple(index))

    # ------------------------------------------------------------------------------------------
    # creation

    def hl_full(self, shape: list, value: Any, dtype: torch.dtype) -> DeviceValue:
        dims = tuple(self.shape_item(s) for s in shape)
        if isinstance(value, TileProxy):
            value = value.index
        if isinstance(value, DeviceValue) and value.ndim != 0:
            raise exc.ShapeMismatch(
                f"hl.full fills a tensor with one value, got a device tensor of shape "
                f"{list(value.value.shape)}",
                loc=self.current_loc(),
                hint="Pass a number or a 0-D value; to broadcast a tensor to a shape use "
                "value.expand(...) or value[:, None] + hl.zeros([...]).",
            )
        if isinstance(value, HostTensor):
            raise exc.HostTensorDirectUsage(
                f"{value.arg.name!r} (as the value of hl.full)",
                loc=self.current_loc(),
                hint="Load the value first (e.g. hl.full(shape, v[0]), or v[()] for a 0-D tensor).",
            )
        if isinstance(value, (DeviceValue,)):
            scalar = self.to_operand(value)
            full = self.emit(ops.full, [], {"shape": dims, "value": 0, "dtype": dtype}).output
            return self.wrap(
                self.emit(ops.BINARY["add"], [full, scalar], {}, [TensorType(dims, dtype)])
            )
        if isinstance(value, ConstExpr):
            value = value.value
        if not isinstance(value, (bool, int, float)):
            raise exc.TypeInferenceError(
                f"hl.full value must be a number, got {type(value).__name__}",
                loc=self.current_loc(),
            )
        return self.wrap(self.emit(ops.full, [], {"shape": dims, "value": value, "dtype": dtype}))

    def hl_rand(self, shape: list, seed: Any, offsets: Any = None) -> DeviceValue:
        return rng.hl_rand(self, shape, seed, offsets)

    def hl_randint(self, shape: list, low: Any, high: Any, seed: Any) -> DeviceValue:
        return rng.hl_randint(self, shape, low, high, seed)

    def hl_rand4x(self, seed: Any, offsets: Any) -> tuple:
        return rng.hl_rand4x(self, seed, offsets)

    def hl_arange(self, *args: Any, dtype: torch.dtype | None = None) -> DeviceValue:
        if len(args) == 1:
            start, end = 0, args[0]
        elif len(args) == 2:
            start, end = args
        else:
            raise exc.NotAllowedOnDevice("hl.arange with a step", loc=self.current_loc())
        dtype = dtype or self.ir.index_dtype
        if isinstance(end, (BlockSizeInt, SizeInt, TileProxy, DeviceValue)):
            length = self.shape_item(end)
            if not isinstance(start, int) or isinstance(start, (bool, *SYMBOLIC_INTS)):
                raise exc.TypeInferenceError(
                    "hl.arange(start, end) with a size `end` needs an int `start`",
                    loc=self.current_loc(),
                    hint="Write start + hl.arange(length) for another start.",
                )
            length = sympy.expand(length - start)  # torch's end - start lanes
        elif isinstance(start, int) and isinstance(end, int):
            if end < start:
                raise exc.NegativeSize(
                    end - start,
                    f"hl.arange({start}, {end})" if len(args) == 2 else f"hl.arange({end})",
                    loc=self.current_loc(),
                )
            length = sympy.Integer(end - start)
        else:
            raise exc.TypeInferenceError(
                "hl.arange bounds must be ints or block sizes", loc=self.current_loc()
            )
        return self.wrap(
            self.emit(ops.arange, [], {"start": start, "length": length, "dtype": dtype})
        )

    # ------------------------------------------------------------------------------------------
    # matmul, scans, misc

    def hl_dot(
        self, mat1: Any, mat2: Any, acc: Any = None, out_dtype: torch.dtype | None = None
    ) -> DeviceValue:
        from helion.frontend.torch_table import emit_dot

        return emit_dot(self, mat1, mat2, acc, out_dtype, default_float32=True)

    def hl_dot_scaled(
        self,
        mat1: Any,
        mat1_scale: Any,
        mat1_format: Any,
        mat2: Any,
        mat2_scale: Any,
        mat2_format: Any,
        acc: Any = None,
        out_dtype: Any = None,
    ) -> DeviceValue:
        from helion.frontend.dot_scaled import trace_dot_scaled

        return trace_dot_scaled(
            self, mat1, mat1_scale, mat1_format, mat2, mat2_scale, mat2_format, acc, out_dtype
        )

    def hl_inline_triton(self, triton_source: Any, args: Any, output_like: Any) -> Any:
        from helion.frontend.inline_code import trace_inline_triton

        return trace_inline_triton(self, triton_source, args, output_like)

    def hl_float4_e2m1fn_x2_to_float32(self, value: Any) -> Any:
        from helion.language import _float4

        return _float4.unpack(value)

    def _load_x16(self, api: str, storage: Any, group_offsets: Any, extra_mask: Any) -> tuple:
        """A decomposition into gathers and elementwise ops (`helion.language._x16`)."""
        from helion.language import _x16

        if not isinstance(storage, HostTensor):
            what = "a device tensor" if isinstance(storage, DeviceValue) else type(storage).__name__
            raise exc.TypeInferenceError(
                f"{api} reads memory: its storage must be a kernel tensor argument, got {what}",
                loc=self.current_loc(),
            )
        if isinstance(group_offsets, TileProxy):
            group_offsets = group_offsets.index
        _x16.check_storage(api, storage)
        _x16.check_offsets(api, group_offsets)
        return _x16.load_x16(api, storage, group_offsets, extra_mask)

    def hl_triton_kernel(self, triton_source_or_fn: Any, args: Any, output_like: Any) -> Any:
        from helion.frontend.inline_code import trace_triton_kernel

        return trace_triton_kernel(self, triton_source_or_fn, args, output_like)

    def hl_inline_asm_elementwise(
        self, asm: Any, constraints: Any, args: Any, dtype: Any, is_pure: Any, pack: Any
    ) -> Any:
        from helion.frontend.inline_code import trace_inline_asm

        return trace_inline_asm(self, asm, constraints, args, dtype, is_pure, pack)

    def hl_split(self, tensor: Any) -> tuple[DeviceValue, DeviceValue]:
        from helion.frontend.shape_ops import split

        return split(self, tensor)

    def hl_join(self, a: Any, b: Any) -> DeviceValue:
        from helion.frontend.shape_ops import join

        return join(self, a, b)

    def hl_scan(self, kind: str, input: Any, dim: int, reverse: bool = False) -> DeviceValue:
        value = self.as_value(input)
        dim = dim % max(value.type.ndim, 1)
        return self.wrap(self.emit(ops.SCANS[kind], [value], {"dim": dim, "reverse": reverse}))

    def hl_reduce(
        self,
        combine_fn: Any,
        input_tensor: Any,
        dim: Any = None,
        *,
        other: Any = 0,
        keep_dims: bool = False,
    ) -> Any:
        from helion.frontend.combine import trace_reduce

        return trace_reduce(self, combine_fn, input_tensor, dim, other, keep_dims)

    def hl_associative_scan(
        self,
        combine_fn: Any,
        input_tensor: Any,
        dim: Any,
        *,
        reverse: bool = False,
        tuple_form: bool | None = None,
    ) -> Any:
        from helion.frontend.combine import trace_scan

        return trace_scan(self, combine_fn, input_tensor, dim, reverse, tuple_form)

    def hl_device_print(self, prefix: str, *values: Any) -> None:
        operands = [self.as_value(v) for v in values]
        self.emit(ops.device_print, operands, {"prefix": str(prefix)}, [])

    def hl_breakpoint(self) -> None:
        raise exc.BreakpointInDeviceLoopRequiresInterpret(loc=self.current_loc())

    def hl_barrier(self) -> None:
        if self.loop_depth:
            raise exc.BarrierOnlyAllowedAtTopLevel(loc=self.current_loc())
        self.ir.uses_barrier = True
        self.barrier_count += 1
        self.loop_deps.barrier()

    def hl_specialize(self, value: Any) -> Any:
        raise exc.SpecializeOnDevice(loc=self.current_loc())

    def hl_register_block_size(self, low: Any, high: Any) -> Any:
        raise exc.NotAllowedOnDevice(
            "hl.register_block_size (call it in host code, before the loop)", loc=self.current_loc()
        )

    def hl_register_tunable(self, name: str, fragment: Any) -> Any:
        raise exc.NotAllowedOnDevice(
            "hl.register_tunable (call it in host code, before the loop)", loc=self.current_loc()
        )

    def lift_tensor(self, tensor: torch.Tensor) -> HostTensor:
        """A tensor captured by a callable argument (an epilogue's closure or globals) becomes a
        kernel argument, re-read from that callable at every launch."""
        for lifted_arg, source in zip(self.ir.lifted_args, self.ir.lifted, strict=True):
            if self._resolve_lifted(source) is tensor:
                return HostTensor(self, lifted_arg, tensor)
        for position, inp in enumerate(self.inputs):
            fn = inp.value
            if inp.kind != "other" or not callable(fn) or not hasattr(fn, "__closure__"):
                continue
            for cell_index, cell in enumerate(fn.__closure__ or ()):
                if cell.cell_contents is tensor:
                    return self._add_lifted(("closure", position, cell_index), tensor)
            for name in fn.__code__.co_names:
                if fn.__globals__.get(name) is tensor:
                    return self._add_lifted(("global", position, name), tensor)
        raise exc.HostTensorDirectUsage(
            "a tensor that is not a kernel argument (pass it as an argument)",
            loc=self.current_loc(),
        )

    def lift_computed(
        self, resolver: Callable[[Sequence[Any]], torch.Tensor], tensor: torch.Tensor, name: str
    ) -> HostTensor:
        """A tensor derived from the kernel's arguments becomes a kernel argument of its own:
        ``resolver(values)`` (``values``: the device inputs) computes it again at every launch;
        ``tensor`` is its value for this trace."""
        return self._add_lifted(("call", None, resolver), tensor, name=name)

    def _resolve_lifted(self, source: tuple) -> Any:
        return resolve_lifted([inp.value for inp in self.inputs], source)

    def _add_lifted(
        self, source: tuple, tensor: torch.Tensor, name: str | None = None
    ) -> HostTensor:
        index = len(self.inputs) + len(self.ir.lifted)
        arg = TensorArg(
            name or f"captured{len(self.ir.lifted)}",
            index,
            tuple(tensor.shape),
            tuple(tensor.stride()),
            tensor.dtype,
            tensor.device,
        )
        self.ir.tensor_args.append(arg)
        self.ir.lifted.append(source)
        self.ir.lifted_args.append(arg)
        return HostTensor(self, arg, tensor)

    def call_torch(self, func: Any, args: tuple, kwargs: dict) -> Any:
        from helion.frontend.torch_table import lookup

        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and isinstance(
            args[0], torch.Tensor
        ):
            host = self.lift_tensor(args[0])
            if func is torch.Tensor.__getitem__:
                return host[args[1]]
            host[args[1]] = args[2]
            return None

        if func in _HOST_READS:
            # the torch table's refusal names `.item()` for both: name the method used
            raise exc.NotAllowedOnDevice(
                f".{func.__name__}() (device values cannot be read on the host)",
                loc=self.current_loc(),
            )
        handler = lookup(func)
        if handler is None:
            name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
            module = getattr(func, "__module__", None) or "torch"
            raise exc.UnsupportedTorchOp(
                f"{module}.{name}" if not name.startswith("Tensor.") else f"torch.{name}",
                loc=self.current_loc(),
            )
        return handler(self, *args, **kwargs)


_HOST_READS = (torch.Tensor.item, torch.Tensor.tolist)

_INTEGER_DIVISIONS = (ops.BINARY["floordiv"], ops.BINARY["remainder"])


def _divides_by_constant_zero(inputs: Sequence[Any], result: Any) -> bool:
    """Whether an integer `//` or `%` divides by a divisor known to be 0 while tracing: the
    number 0, or a value made by a constant or a fill of 0 (torch raises ZeroDivisionError for
    these on CPU; a divisor that is 0 only at run time is undefined behaviour, not checked)."""
    dtype = getattr(result, "dtype", None)
    if len(inputs) != 2 or dtype is None or dtype.is_floating_point or dtype.is_complex:
        return False
    divisor = inputs[1]
    if isinstance(divisor, Value):
        producer = divisor.producer
        if producer is None or producer.op not in (ops.constant, ops.full):
            return False
        divisor = producer.attrs.get("value")
    return isinstance(divisor, (bool, int, float)) and divisor == 0


def resolve_lifted(values: Sequence[Any], source: tuple) -> Any:
    kind, position, key = source
    if kind == "call":
        # computed from the arguments at every launch by a plugin op (helion-distributed's
        # remote copies: peer views of a symmetric argument, compiler-owned signal pads)
        return key(values)
    fn = values[position]
    if kind == "item":
        return fn[key]
    if kind == "path":  # a leaf of a nested container: ((step, key), ...) from the argument
        for step, step_key in key:
            fn = getattr(fn, step_key) if step == "attr" else fn[step_key]
        return fn
    if kind == "closure":
        return fn.__closure__[key].cell_contents
    return fn.__globals__[key]


def ceil_pow2(n: int) -> int:
    return 1 if n <= 1 else 2 ** math.ceil(math.log2(n))


def _holds_tile(item: Any) -> bool:
    return isinstance(item, (list, tuple)) and any(isinstance(i, TileProxy) for i in item)


def _index_type_error(item: Any, loc: exc.SourceLocation | None) -> exc.BaseError:
    """The error for an index item of a type a tensor index cannot hold: a list or tuple
    holding a tile (`x[[tile]]`, `x[[tile], :]`) is `OverpackedTile`."""
    if _holds_tile(item):
        parts = ", ".join("tile" if isinstance(i, TileProxy) else type(i).__name__ for i in item)
        text = (
            f"[{parts}]" if isinstance(item, list) else f"({parts}{',' if len(item) == 1 else ''})"
        )
        return exc.OverpackedTile(f"a {type(item).__name__} {text}", loc=loc)
    return exc.InvalidIndexingType(type(item).__name__, loc=loc)


_TILE_ATTR_OPS = frozenset(ops.TILE_ATTRS.values())


def _flatten_carried(value: Any) -> tuple[list[Any], Any]:
    """The leaves of a loop-carried value and its structure: None for a leaf, else
    (tuple or list, the items' structures)."""
    if type(value) in (tuple, list):
        leaves: list[Any] = []
        structures = []
        for item in value:
            items, structure = _flatten_carried(item)
            leaves += items
            structures.append(structure)
        return leaves, (type(value), structures)
    return [value], None


def _unflatten_carried(leaves: Iterator[Any], structure: Any) -> Any:
    if structure is None:
        return next(leaves)
    kind, items = structure
    return kind(_unflatten_carried(leaves, item) for item in items)


def _leaf_paths(structure: Any) -> list[str]:
    """`[0]`, `[1][0]`, ...: where each leaf sits in the variable (`""` for a leaf itself)."""
    if structure is None:
        return [""]
    return [f"[{i}]{path}" for i, item in enumerate(structure[1]) for path in _leaf_paths(item)]


def _flatten_results(
    results: Sequence[Any], structures: list[Any], names: Sequence[str], loc: Any
) -> list[Any]:
    """The leaves of the values a loop body yields, which must have the structures the carried
    variables had before the loop (a tuple of as many items)."""
    leaves: list[Any] = []
    for result, structure, name in zip(results, structures, names, strict=True):
        items, got = _flatten_carried(result)
        if _shape_of(got) != _shape_of(structure):
            raise exc.LoopCarriedTypeChange(
                f"{name!r}", _describe_structure(structure), _describe_structure(got), loc=loc
            )
        leaves += items
    return leaves


def _shape_of(structure: Any) -> Any:
    if structure is None:
        return None
    return (structure[0], tuple(_shape_of(item) for item in structure[1]))


def _describe_structure(structure: Any) -> str:
    if structure is None:
        return "a value"
    return f"a {structure[0].__name__} of {len(structure[1])}"
