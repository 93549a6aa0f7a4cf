"""Kernel IR + PallasOptions -> readable Python source that defines a `pallas_call` per top-level loop.

Layout of the generated module:

* one kernel function per top-level device loop, `_<name>_kernel<k>(*refs)`: its grid is the
  loop's tiles; inner tile loops become `jax.lax.fori_loop` (or Python loops unrolled at trace
  time when `static_ranges` asks for it), data-dependent `if`s become `jax.lax.cond`;
* one host function `<name>(*tensors, *scalars)` taking and returning jax arrays: it runs the
  `pallas_call`s in order and returns the final value of every tensor the kernel writes.

Values are padded: a dimension of block size B is held in a `next_power_of_2(B)` array (the
Triton lowering needs power-of-two shapes), a full slice of extent E in `next_power_of_2(E)`.
Each tile carries a `mask_<block>` of its in-bounds lanes whenever its last tile can be partial;
loads fill masked lanes with zeros, stores skip them, and reductions and dots see the neutral
element there, so padded lanes never change a result (the ref backend computes on exact extents).
A dimension takes its mask from the tile it came from (`helion.passes.tile_origins`), not from its
block size symbol: one block size may be shared by several tiles in scope (`hl.register_block_size`
used by an outer and an inner loop), each with its own bounds.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any
from typing import Sequence

import sympy
import torch

import helion.language._ops as ops
from helion import exc
from helion.ir.core import Block
from helion.ir.core import BlockSizeInfo
from helion.ir.core import KernelIR
from helion.ir.core import Node
from helion.ir.core import TensorArg
from helion.ir.core import TensorType
from helion.ir.core import TileType
from helion.ir.core import Value
from helion.ir.core import runs_no_iteration
from helion.passes.tile_origins import CONFLICT
from helion.passes.tile_origins import UNKNOWN
from helion.passes.tile_origins import TileOrigins
from helion_pallas import memory
from helion_pallas.tunables import MAX_STATIC_UNROLL
from helion_pallas.tunables import PallasOptions
from helion_pallas.writer import RESERVED
from helion_pallas.writer import SourceWriter
from helion_pallas.writer import identifier
from helion_pallas.writer import jnp_dtype
from helion_pallas.writer import literal
from helion_pallas.writer import tuple_text

#: integer dtypes a float is converted to through int32 (`KernelCodegen.typed`)
_WRAPPING_INTS = (torch.int8, torch.int16, torch.uint8)


def unpack_target(names: Sequence[str]) -> str:
    """The left side of a tuple unpacking: `a,` for one name, `a, b` for more."""
    return f"{names[0]}," if len(names) == 1 else ", ".join(names)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


@dataclasses.dataclass
class TileState:
    """A tile of one dimension while its loop body is generated."""

    block_id: int
    begin: str  # source text of the tile's first index
    hi: str  # source text of the loop's end bound (exclusive)
    block: int  # the configured block size B
    padded: int  # lanes held: next_power_of_2(B)
    mask: str | None  # name of the (padded,) bool array of in-bounds lanes; None: always full
    grid_dim: int | None = None  # position in the top-level loop, for BlockSpecs
    lo: str = "0"  # source text of the loop's start bound (tile.count counts from it)


@dataclasses.dataclass
class CallPlan:
    """One `pallas_call`: a top-level loop, its grid and its refs."""

    position: int
    node: Node
    kernel_name: str
    grid_sizes: list[int]  # tiles per loop dimension
    grid: list[int]  # the pallas grid (after loop order / flattening)
    flatten: bool
    nesting: list[int]  # loop dimensions from slowest to fastest varying
    refs: dict[int, memory.RefPlan]
    reads: list[TensorArg]
    writes: list[TensorArg]
    prologue: list[Node]  # body-level pure nodes before the loop


class KernelCodegen:
    """Generates the source of one compiled kernel; also the context lowering rules receive."""

    def __init__(self, ir: KernelIR, options: PallasOptions) -> None:
        from helion_pallas.lowerings import lowering_table

        self.ir = ir
        self.options = options
        self.lowerings = lowering_table()
        self.index_dtype = ir.index_dtype
        self.block: dict[int, int] = {}
        self.padded: dict[int, int] = {}
        for info in ir.block_sizes:
            self.block[info.block_id] = self._block_value(info)
            self.padded[info.block_id] = next_power_of_2(self.block[info.block_id])
        self.symbols = {info.symbol: info.block_id for info in ir.block_sizes}
        # reduction dimensions of length 0 (`x[tile, :]` of an empty dimension)
        self.empty_rdims = ir.empty_reduction_blocks()
        # Static extents (full slices, integer dims) are padded to powers of two too, with a
        # mask `valid_<n>` per extent n. Core treats a full slice and an integer of the same
        # extent as one dimension (`hl.zeros([tile, 203]) + x[tile, :]`): keyed by extent,
        # both get the same padding and mask.
        self.static_extents = sorted(self._static_extents())
        self.loop_orders = self._loop_orders()
        self.flatten = self._flatten_flags()
        self.inner_options = {
            loop.loop_id: options.loop_options(i) for i, loop in enumerate(ir.inner_loops())
        }
        self.names: dict[int, str] = {}
        self.used_names: set[str] = set()
        self.tiles: dict[int, TileState] = {}  # tile Value id -> state, for the tiles in scope
        self.active: dict[int, TileState] = {}  # block id -> innermost tile in scope
        self.tile_origins = TileOrigins(ir)  # the tile each dimension of each value came from
        self.node: Node | None = None  # the node being lowered, for error messages
        self.zero_padded: set[int] = set()
        self.writer = SourceWriter()
        self.call: CallPlan | None = None
        self.tensor_names = {arg.index: identifier(arg.name) for arg in ir.tensor_args}
        self.scalar_names = {s.index: identifier(s.name) for s in ir.scalar_args}
        self.used_names.update(self.tensor_names.values())
        self.used_names.update(self.scalar_names.values())

    # ------------------------------------------------------------------------------------------
    # configuration

    def _block_value(self, info: BlockSizeInfo) -> int:
        if info.kind == "tile":
            sizes = self.options.block_sizes
            if info.config_index is None or info.config_index >= len(sizes):
                raise exc.InvalidConfig(
                    f"config has no block size for tile dimension {info.block_id}"
                )
            return int(sizes[info.config_index])
        if info.kind in ("fixed", "grid"):
            return int(info.fixed_value or 1)
        return max(int(info.size_hint), 1)

    def _loop_orders(self) -> dict[int, list[int]]:
        orders: dict[int, list[int]] = {}
        position = 0
        for loop in self.ir.loops:
            if len(loop.block_ids) > 1:
                order = None
                if position < len(self.options.loop_orders):
                    order = list(self.options.loop_orders[position])
                if order is None or sorted(order) != list(range(len(loop.block_ids))):
                    order = list(range(len(loop.block_ids)))
                orders[loop.loop_id] = order
                position += 1
        return orders

    def _flatten_flags(self) -> dict[int, bool]:
        flags: dict[int, bool] = {}
        position = 0
        for loop in self.ir.top_level_loops():
            node = loop.node
            starts_at_zero = node is not None and all(b == 0 for b in node.attrs["begins"])
            if len(loop.block_ids) > 1 and starts_at_zero and not node.attrs["is_grid"]:
                if position < len(self.options.flatten_loops):
                    flags[loop.loop_id] = bool(self.options.flatten_loops[position])
                position += 1
        return flags

    def order_of(self, node: Node) -> list[int]:
        """Loop dimensions, fastest varying first (Config.loop_orders semantics)."""
        return self.loop_orders.get(
            node.attrs["loop_id"], list(range(len(node.attrs["block_ids"])))
        )

    # ------------------------------------------------------------------------------------------
    # the context lowering rules use

    def fresh(self, hint: str) -> str:
        base = identifier(hint)
        name = base
        count = 0
        while name in self.used_names or name in RESERVED:
            count += 1
            name = f"{base}_{count}"
        self.used_names.add(name)
        return name

    def name_of(self, value: Value) -> str:
        name = self.names.get(value.id)
        if name is None:
            name = self.fresh(value.name_hint or "v")
            self.names[value.id] = name
        return name

    def emit(self, text: str) -> None:
        self.writer.line(text)

    def dtype(self, dtype: torch.dtype) -> str:
        return jnp_dtype(dtype)

    def operand(self, operand: Any) -> str:
        """Source text of an operand: a value's name, a literal, or a size expression."""
        if isinstance(operand, Value):
            if isinstance(operand.type, TileType):
                raise exc.InternalError("a tile used as a value (expected tile_index)")
            return self.name_of(operand)
        if isinstance(operand, sympy.Expr):
            return self.size_expr(operand)
        if operand is None:
            return "None"
        return literal(operand)

    def typed(self, operand: Any, dtype: torch.dtype) -> str:
        """An operand converted to `dtype` (values cast when needed, literals made typed).

        Floats become int8/int16/uint8 through int32, as in PyTorch (C++ casts, and Triton):
        the integer part wraps around (300.7 -> 44 as int8, -1.5 -> 255 as uint8) where a
        direct JAX cast saturates (127, 0)."""
        if isinstance(operand, Value):
            name = self.name_of(operand)
            if operand.dtype == dtype:
                return name
            if operand.dtype.is_floating_point and dtype in _WRAPPING_INTS:
                return f"{name}.astype(jnp.int32).astype({self.dtype(dtype)})"
            return f"{name}.astype({self.dtype(dtype)})"
        return f"jnp.asarray({self.operand(operand)}, dtype={self.dtype(dtype)})"

    def index(self, operand: Any) -> str:
        """An operand as an integer of the kernel's index dtype (for indexers)."""
        return self.typed(operand, self.index_dtype)

    def shape(self, shape: Sequence[Any]) -> tuple[int, ...]:
        """Padded concrete shape of a symbolic IR shape."""
        return tuple(self.dim_size(d) for d in shape)

    def _static_extents(self) -> set[int]:
        extents = {info.size_hint for info in self.ir.reduction_blocks()}
        for node in self.ir.walk():
            for value in node.outputs:
                if isinstance(value.type, TensorType):
                    extents.update(int(d) for d in value.shape if sympy.sympify(d).is_Integer)
            for region in node.regions:
                for arg in region.args:
                    if isinstance(arg.type, TensorType):
                        extents.update(int(d) for d in arg.shape if sympy.sympify(d).is_Integer)
        padded = {n for n in extents if n > 1 and next_power_of_2(n) != n}
        # `valid_0`: the one lane of a length-0 slice, masked off
        return (padded | {0}) if self.empty_rdims else padded

    def dim_size(self, dim: Any) -> int:
        dim = sympy.sympify(dim)
        if dim.is_Integer:
            return next_power_of_2(int(dim)) if int(dim) > 1 else int(dim)
        if dim.is_Symbol and dim in self.symbols:
            return self.padded[self.symbols[dim]]
        values = {s: self.padded[self.symbols[s]] for s in dim.free_symbols if s in self.symbols}
        result = dim.subs(values)
        if not result.is_Integer:
            raise exc.BackendUnsupported(f"the shape entry {dim}", "pallas")
        return int(result)

    def shape_text(self, shape: Sequence[Any]) -> str:
        return tuple_text([str(d) for d in self.shape(shape)])

    def size_expr(self, expr: sympy.Expr) -> str:
        """What a size expression evaluates to for the tiles executing now (the ref backend's
        `resolve`: a tile symbol is the current tile's extent)."""
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return str(int(expr))
        replacements: dict[sympy.Symbol, sympy.Symbol] = {}
        texts: dict[str, str] = {}
        for symbol in sorted(expr.free_symbols, key=str):
            block_id = self.symbols.get(symbol)
            if block_id is None:
                raise exc.BackendUnsupported(f"the size expression {expr}", "pallas")
            info = self.ir.block(block_id)
            tile = None
            if info.kind != "reduction":
                # a bare size symbol names no tile: it must not be shared by tiles in scope
                tile = self.tile_for(block_id, UNKNOWN, f"the size expression {expr}")
            if block_id in self.empty_rdims:
                text = "0"
            elif tile is None:
                text = str(self.block[block_id])
            else:
                text = f"jnp.minimum({tile.hi} - {tile.begin}, {tile.block})"
            placeholder = sympy.Symbol(f"__size{len(texts)}")
            replacements[symbol] = placeholder
            texts[str(placeholder)] = f"({text})"
        result = str(expr.subs(replacements))
        for key, text in texts.items():
            result = result.replace(key, text)
        return result

    def tiles_in_scope(self, block_id: int) -> list[TileState]:
        return [tile for tile in self.tiles.values() if tile.block_id == block_id]

    def tile_for(self, block_id: int, origin: Any, what: str | None = None) -> TileState | None:
        """The tile whose bounds a dimension of block `block_id` has: the tile it came from
        (`origin`, a tile value id from `helion.passes.tile_origins`) when that is in scope, else
        the one tile of the block in scope. With several in scope and none traced, the dimension
        could be any of them: rejected (as `what`, default the op being lowered) rather than
        guessed."""
        if origin not in (UNKNOWN, CONFLICT) and origin in self.tiles:
            return self.tiles[origin]
        in_scope = self.tiles_in_scope(block_id)
        if len(in_scope) > 1:
            node = self.node
            if what is None:
                what = node.op.name if node is not None else "an operation"
            symbol = self.ir.block(block_id).symbol
            raise exc.BackendUnsupported(
                f"{what} on a dimension of block size {symbol} that {len(in_scope)} tiles in "
                "scope share (which tile's bounds apply cannot be traced)",
                "pallas",
                loc=node.loc if node is not None else None,
                hint="Derive the value from loads or tile.index of the tiles (x[tile_m, tile_n]) "
                "rather than from hl.zeros/hl.full of block sizes alone, or give each loop its "
                "own block size.",
            )
        return self.active.get(block_id)

    def dim_mask(self, dim: Any, origin: Any = UNKNOWN) -> str | None:
        """Name of the 1-D mask of in-bounds lanes of a dimension, or None if always full.
        `origin` is the tile the dimension came from (see `tile_for`)."""
        dim = sympy.sympify(dim)
        if dim.is_Integer:
            extent = int(dim)
        elif dim.is_Symbol and dim in self.symbols:
            block_id = self.symbols[dim]
            if self.ir.block(block_id).kind != "reduction":
                tile = self.tile_for(block_id, origin)
                return tile.mask if tile is not None else None
            if block_id in self.empty_rdims:
                return "valid_0"
            extent = self.block[block_id]
        else:
            return self._merged_mask(dim, origin)
        return f"valid_{extent}" if extent > 1 and next_power_of_2(extent) != extent else None

    def _merged_mask(self, dim: sympy.Expr, origin: Any) -> str | None:
        """The mask of a dimension ``c * B`` (an int times one block size), held as ``c`` lanes
        per lane of ``B``: lane ``j`` is valid where lane ``j // c`` of ``B`` is
        (``hl.arange(bk * 2)`` after ``tk.begin * 2``). Computed from the bounds, elementwise.
        Another expression of block sizes is refused where one of them is masked."""
        factor, rest = dim.as_coeff_Mul()
        if factor.is_Integer and int(factor) > 1 and rest.is_Symbol and rest in self.symbols:
            if self.dim_mask(rest, origin) is None:
                return None
            count, block_id = int(factor), self.symbols[rest]
            lane = f"(jnp.arange({count * self.dim_size(rest)}, dtype=jnp.int32) // {count})"
            if self.ir.block(block_id).kind == "reduction":
                extent = 0 if block_id in self.empty_rdims else self.block[block_id]
                condition = f"{lane} < {extent}"
            else:
                tile = self.tile_for(block_id, origin)
                assert tile is not None and tile.mask is not None
                condition = f"({tile.begin} + {lane} < {tile.hi})"
                if tile.padded != tile.block:
                    condition += f" & ({lane} < {tile.block})"
            name = self.fresh("mask_merged")
            self.emit(f"{name} = {condition}")
            return name
        for symbol in dim.free_symbols:
            if symbol in self.symbols and self.dim_mask(symbol) is not None:
                raise exc.BackendUnsupported(
                    f"masking the dimension {dim} (its tiles are partial)",
                    "pallas",
                    loc=self.node.loc if self.node is not None else None,
                    hint="Only a dimension of one block size times an int is masked on partial "
                    "tiles: pick block sizes that divide the loops' ranges.",
                )
        return None

    @staticmethod
    def at_axis(vector: str, axis: int, rank: int) -> str:
        """A 1-D array indexed so that it broadcasts along `axis` of a rank-`rank` array."""
        if rank <= 1:
            return vector
        parts = ["None"] * rank
        parts[axis] = ":"
        return f"{vector}[{', '.join(parts)}]"

    def axis_mask(self, value: Value, axis: int) -> str | None:
        """The 1-D in-bounds mask of dimension `axis` of `value` (None if always full)."""
        origins = self.tile_origins.of(value) or (UNKNOWN,) * len(value.shape)
        return self.dim_mask(value.shape[axis], origins[axis])

    def shape_mask(self, shape: Sequence[Any], origins: Sequence[Any] | None = None) -> str | None:
        """AND of the in-bounds masks of every dimension of `shape`, broadcastable to it;
        `origins` gives the tile of each dimension (see `tile_for`)."""
        if origins is None or len(origins) != len(shape):
            origins = (UNKNOWN,) * len(shape)
        parts = []
        for axis, (dim, origin) in enumerate(zip(shape, origins, strict=True)):
            mask = self.dim_mask(dim, origin)
            if mask is not None:
                parts.append(self.at_axis(mask, axis, len(shape)))
        return " & ".join(parts) if parts else None

    def tile_of(self, value: Value) -> TileState:
        return self.tiles[value.id]

    def ref_plan(self, tensor: TensorArg) -> memory.RefPlan:
        assert self.call is not None
        return self.call.refs[tensor.index]

    def is_zero_padded(self, value: Any) -> bool:
        return isinstance(value, Value) and value.id in self.zero_padded

    def mark_zero_padded(self, value: Value) -> None:
        self.zero_padded.add(value.id)

    # ------------------------------------------------------------------------------------------
    # the module

    def generate(self) -> str:
        plans = self._plan_calls()
        w = self.writer
        w.line(f'"""Pallas code generated by helion-pallas for the Helion kernel `{self.ir.name}`.')
        w.line("")
        w.line(f"Target: {self.options.target}. Call `{self.entry_name}` with jax arrays.")
        w.line('"""')
        w.line("")
        w.line("import jax")
        w.line("import jax.numpy as jnp")
        w.line("from jax.experimental import pallas as pl")
        if self.options.target == "tpu":
            w.line("from jax.experimental.pallas import tpu as pltpu")
        else:
            w.line("from jax.experimental.pallas import triton as plgpu")
        w.line("")
        w.line("from helion_pallas import runtime as hp")
        for plan in plans:
            w.line("")
            w.line("")
            self._emit_kernel(plan)
        w.line("")
        w.line("")
        self._emit_host(plans)
        return w.text()

    @property
    def entry_name(self) -> str:
        return identifier(self.ir.name)

    def _plan_calls(self) -> list[CallPlan]:
        plans = []
        prologue: list[Node] = []
        for node in self.ir.body.nodes:
            if node.op is not ops.grid_loop:
                prologue.append(node)
                continue
            plans.append(self._plan_call(node, len(plans), list(prologue)))
        return plans

    def _plan_call(self, node: Node, position: int, prologue: list[Node]) -> CallPlan:
        sizes = []
        for block_id, begin, end in zip(
            node.attrs["block_ids"], node.attrs["begins"], node.attrs["ends"], strict=True
        ):
            if not isinstance(begin, int) or not isinstance(end, int):
                raise exc.BackendUnsupported(
                    "a top-level loop with data-dependent bounds", "pallas", loc=node.loc
                )
            step = 1 if node.attrs["is_grid"] else self.block[block_id]
            sizes.append(max(0, -(-(end - begin) // step)))
        order = self.order_of(node)
        nesting = list(reversed(order))
        flatten = self.flatten.get(node.attrs["loop_id"], False)
        if flatten:
            grid = [math.prod(sizes)]
        else:
            grid = [sizes[d] for d in nesting]
        refs, reads, writes = memory.plan_refs(self, node)
        kernel_name = f"_{self.entry_name}_kernel{position}"
        return CallPlan(
            position,
            node,
            kernel_name,
            sizes,
            grid,
            flatten,
            nesting,
            refs,
            reads,
            writes,
            prologue,
        )

    # -- kernel functions ---------------------------------------------------------------------

    def _emit_kernel(self, plan: CallPlan) -> None:
        self.call = plan
        w = self.writer
        params = [plan.refs[t.index].param for t in plan.reads]
        params += [f"{self.scalar_names[s.index]}_ref" for s in self.ir.scalar_args]
        params += [
            f"{self.tensor_names[t.index]}_initial"
            for t in plan.writes
            if plan.refs[t.index].needs_initial
        ]
        params += [plan.refs[t.index].param for t in plan.writes]
        self.used_names.update(params)
        w.line(f"def {plan.kernel_name}({', '.join(params)}):")
        with w.indent():
            loc = plan.node.loc
            where = f" (line {loc.lineno})" if loc is not None else ""
            w.line(f'"""The top-level loop{where}: one program per tile of its grid."""')
            for scalar in self.ir.scalar_args:
                name = self.name_of(scalar.value)
                w.line(f"{name} = {self.scalar_names[scalar.index]}_ref[...]")
            for extent in self.static_extents:
                w.line(
                    f"valid_{extent} = jnp.arange({next_power_of_2(extent)}, dtype=jnp.int32) < {extent}"
                )
            for node in plan.prologue:
                self._emit_node(node)
            saved_tiles, saved_active = dict(self.tiles), dict(self.active)
            self._enter_grid(plan)
            self._emit_block(plan.node.regions[0])
            self.tiles, self.active = saved_tiles, saved_active
        self.call = None

    def _enter_grid(self, plan: CallPlan) -> None:
        node = plan.node
        body = node.regions[0]
        ids = self.grid_tile_ids(plan, [f"pl.program_id({axis})" for axis in range(len(plan.grid))])
        for dim, (block_id, begin, end, tile_arg) in enumerate(
            zip(
                node.attrs["block_ids"],
                node.attrs["begins"],
                node.attrs["ends"],
                body.args,
                strict=True,
            )
        ):
            step = 1 if node.attrs["is_grid"] else self.block[block_id]
            tile_id = self.fresh(f"tile_id_{block_id}")
            self.emit(f"{tile_id} = {ids[dim]}")
            begin_name = self.fresh(f"begin_{block_id}")
            offset = f"{begin} + " if begin else ""
            start = f"{offset}{tile_id} * {step}"
            if self.index_dtype != torch.int32:  # program ids are int32
                start = f"jnp.asarray({start}, dtype={self.dtype(self.index_dtype)})"
            self.emit(f"{begin_name} = {start}")
            partial = (end - begin) % step != 0 or self.padded[block_id] != step
            state = self._tile_state(block_id, begin_name, str(end), step, partial, str(begin))
            state.grid_dim = dim
            self.tiles[tile_arg.id] = state
            self.active[block_id] = state

    def grid_tile_ids(self, plan: CallPlan, axes: Sequence[str]) -> list[str]:
        """Source text of each loop dimension's tile number, given the pallas grid indices."""
        node = plan.node
        ndim = len(node.attrs["block_ids"])
        ids = [""] * ndim
        if plan.flatten:
            order = self.order_of(node)
            stride = 1
            for position, dim in enumerate(order):
                text = axes[0] if stride == 1 else f"{axes[0]} // {stride}"
                if position != len(order) - 1:
                    text = (
                        f"{text} % {plan.grid_sizes[dim]}"
                        if stride == 1
                        else f"({text}) % {plan.grid_sizes[dim]}"
                    )
                ids[dim] = text
                stride *= plan.grid_sizes[dim]
        else:
            for axis, dim in enumerate(plan.nesting):
                ids[dim] = axes[axis]
        return ids

    def _tile_state(
        self, block_id: int, begin: str, hi: str, step: int, partial: bool, lo: str
    ) -> TileState:
        padded = next_power_of_2(step)
        mask = None
        if partial:
            mask = self.fresh(f"mask_{block_id}")
            lanes = self.fresh(f"lanes_{block_id}")
            self.emit(f"{lanes} = jnp.arange({padded}, dtype=jnp.int32)")
            condition = f"{begin} + {lanes} < {hi}"
            if padded != step:
                condition = f"({condition}) & ({lanes} < {step})"
            self.emit(f"{mask} = {condition}")
        return TileState(block_id, begin, hi, step, padded, mask, lo=lo)

    # -- regions and nodes --------------------------------------------------------------------

    def _emit_block(self, block: Block) -> None:
        for node in block.nodes:
            self._emit_node(node)

    def _emit_node(self, node: Node) -> None:
        saved, self.node = self.node, node
        try:
            self._lower_node(node)
        finally:
            self.node = saved

    def _lower_node(self, node: Node) -> None:
        if node.op is ops.tile_loop:
            self._emit_tile_loop(node)
            return
        if node.op is ops.if_:
            self._emit_if(node)
            return
        if node.op.structural:
            raise exc.BackendUnsupported(
                f"{node.op.name} nested in device code", "pallas", loc=node.loc
            )
        rule = self.lowerings.get(node.op)
        if rule is None:
            raise exc.BackendUnsupported(node.op.user_name, "pallas", loc=node.loc)
        try:
            result = rule(self, node)
        except exc.BaseError as error:
            if node.loc is not None:
                error.with_location(node.loc)
            raise
        except Exception as error:
            raise exc.InternalError(
                f"pallas lowering of {node.op.name} failed: {type(error).__name__}: {error}",
                loc=node.loc,
            ) from error
        if not node.outputs:
            return
        if result is None:
            raise exc.InternalError(
                f"pallas lowering of {node.op.name} produced no value", loc=node.loc
            )
        self.emit(f"{self.name_of(node.output)} = {result}{self.origin(node)}")

    def origin(self, node: Node) -> str:
        """A trailing `# file:line` comment naming the user's source line of `node`."""
        if node.loc is None:
            return ""
        return f"  # {os.path.basename(node.loc.filename)}:{node.loc.lineno}"

    def _bound(self, bound: Any) -> tuple[str, int | None]:
        """A loop bound as source text in the index dtype, and its value when static."""
        if isinstance(bound, int):
            return str(bound), bound
        if isinstance(bound, Value):
            return self.typed(bound, self.index_dtype), None
        if isinstance(bound, sympy.Expr) and bound.is_Integer:
            return str(int(bound)), int(bound)
        return f"jnp.asarray({self.operand(bound)}, dtype={self.dtype(self.index_dtype)})", None

    def _emit_tile_loop(self, node: Node) -> None:
        w = self.writer
        body = node.regions[0]
        block_ids = node.attrs["block_ids"]
        is_grid = node.attrs["is_grid"]
        where = (
            f", {os.path.basename(node.loc.filename)}:{node.loc.lineno}"
            if node.loc is not None
            else ""
        )
        w.line(f"# inner tile loop over block(s) {', '.join(map(str, block_ids))}{where}")
        if runs_no_iteration(node):
            # no body to run: the carried values pass through. The body is not emitted, so its
            # accesses need no refs (`memory.plan_refs`): JAX cannot block a dimension of size
            # 0, and a zero-trip `fori_loop` would still trace the body's loads
            w.line("# it runs no iteration: a dimension of its bounds is empty")
            for value, output in zip(node.inputs, node.outputs, strict=True):
                w.line(f"{self.name_of(output)} = {self._carried(value, output)}")
            return
        loop_tag = self.fresh("loop")
        dims = []
        for block_id, begin, end in zip(
            block_ids, node.attrs["begins"], node.attrs["ends"], strict=True
        ):
            step = 1 if is_grid else self.block[block_id]
            lo_text, lo_value = self._bound(begin)
            hi_text, hi_value = self._bound(end)
            lo = self.fresh(f"lo_{block_id}")
            hi = self.fresh(f"hi_{block_id}")
            count = self.fresh(f"count_{block_id}")
            w.line(f"{lo} = {lo_text}")
            w.line(f"{hi} = {hi_text}")
            static_count = None
            if lo_value is not None and hi_value is not None:
                static_count = max(0, -(-(hi_value - lo_value) // step))
                w.line(f"{count} = {static_count}")
            else:
                w.line(f"{count} = ({hi} - {lo} + {step - 1}) // {step}")
            partial = (
                static_count is None
                or (hi_value - lo_value) % step != 0
                or next_power_of_2(step) != step
            )
            dims.append((block_id, lo, hi, count, step, static_count, partial))
        order = self.order_of(node)
        if len(dims) == 1:
            total = dims[0][3]
        else:
            total = " * ".join(dims[d][3] for d in order)
        static_total = None
        if all(d[5] is not None for d in dims):
            static_total = math.prod(d[5] for d in dims)

        n_tiles = len(block_ids)
        carried_in = [self.operand(v) for v in node.inputs]
        step_name = self.fresh("step")
        carry_name = self.fresh("carry")
        body_name = self.fresh(f"{loop_tag}_body")
        w.line(f"def {body_name}({step_name}, {carry_name}):")
        saved_tiles, saved_active = dict(self.tiles), dict(self.active)
        with w.indent():
            carried_args = body.args[n_tiles:]
            if carried_args:
                names = [self.name_of(a) for a in carried_args]
                w.line(f"{unpack_target(names)} = {carry_name}")
            remaining = step_name
            tile_numbers = [""] * len(dims)
            for position, dim in enumerate(order):
                count = dims[dim][3]
                if len(dims) == 1:
                    tile_numbers[dim] = step_name
                elif position == len(order) - 1:
                    tile_numbers[dim] = remaining
                else:
                    number = self.fresh(f"t_{dims[dim][0]}")
                    # the step and the counts are not negative: lax.rem/lax.div are % and //
                    # (jnp.remainder did not lower in Pallas' Triton lowering: i64 % i1)
                    w.line(f"{number} = jax.lax.rem({remaining}, {count})")
                    rest = self.fresh("rest")
                    w.line(f"{rest} = jax.lax.div({remaining}, {count})")
                    tile_numbers[dim] = number
                    remaining = rest
            for (block_id, lo, hi, _count, step, _static, partial), number, tile_arg in zip(
                dims, tile_numbers, body.args[:n_tiles], strict=True
            ):
                begin = self.fresh(f"begin_{block_id}")
                w.line(
                    f"{begin} = jnp.asarray({lo} + {number} * {step}, dtype={self.dtype(self.index_dtype)})"
                )
                state = self._tile_state(block_id, begin, hi, step, partial, str(lo))
                self.tiles[tile_arg.id] = state
                self.active[block_id] = state
            self._emit_block(body)
            yields = [self._carried(y, a) for y, a in zip(body.yields, carried_args, strict=True)]
            w.line(f"return {tuple_text(yields)}")
        self.tiles, self.active = saved_tiles, saved_active
        init = tuple_text([self._carried(v, v) for v in node.inputs]) if carried_in else "()"
        outputs = [self.name_of(o) for o in node.outputs]
        options = self.inner_options.get(node.attrs["loop_id"])
        target = f"{unpack_target(outputs)} = " if outputs else ""
        if (
            options is not None
            and options.static
            and static_total is not None
            and static_total <= MAX_STATIC_UNROLL
        ):
            w.line(f"{carry_name} = {init}")
            w.line(f"for {step_name} in range({static_total}):  # unrolled (static_ranges)")
            with w.indent():
                w.line(f"{carry_name} = {body_name}({step_name}, {carry_name})")
            if outputs:
                w.line(f"{unpack_target(outputs)} = {carry_name}")
            return
        unroll = ""
        if options is not None and options.unroll > 1 and static_total is not None:
            unroll = f", unroll={options.unroll}"
        w.line(f"{target}jax.lax.fori_loop(0, {total}, {body_name}, {init}{unroll})")

    def _carried(self, value: Any, like: Value) -> str:
        """A loop-carried value with exactly the type of the carried slot."""
        text = self.typed(value, like.dtype)
        if not isinstance(value, Value) or value.shape != like.shape:
            text = f"jnp.broadcast_to({text}, {self.shape_text(like.shape)})"
        return text

    def _emit_if(self, node: Node) -> None:
        w = self.writer
        tag = self.fresh("branch")
        functions = []
        for label, region in zip(("then", "else"), node.regions, strict=True):
            name = self.fresh(f"{tag}_{label}")
            functions.append(name)
            w.line(f"def {name}():")
            saved_tiles, saved_active = dict(self.tiles), dict(self.active)
            with w.indent():
                self._emit_block(region)
                yields = [
                    self._carried(y, o) for y, o in zip(region.yields, node.outputs, strict=True)
                ]
                w.line(f"return {tuple_text(yields)}")
            self.tiles, self.active = saved_tiles, saved_active
        condition = self.operand(node.inputs[0])
        outputs = [self.name_of(o) for o in node.outputs]
        target = f"{unpack_target(outputs)} = " if outputs else ""
        w.line(
            f"{target}jax.lax.cond({condition}, {functions[0]}, {functions[1]}){self.origin(node)}"
        )

    # -- the host function --------------------------------------------------------------------

    def _emit_host(self, plans: list[CallPlan]) -> None:
        w = self.writer
        tensor_params = [self.tensor_names[t.index] for t in self.ir.tensor_args]
        scalar_params = [self.scalar_names[s.index] for s in self.ir.scalar_args]
        written = self.written_tensors()
        w.line(f"def {self.entry_name}({', '.join(tensor_params + scalar_params)}):")
        with w.indent():
            w.line(
                f'"""Runs `{self.ir.name}`; returns the new values of {", ".join(self.tensor_names[t.index] for t in written) or "nothing"}."""'
            )
            for plan in plans:
                self._emit_call(plan, scalar_params)
            w.line(f"return {tuple_text([self.tensor_names[t.index] for t in written])}")

    def written_tensors(self) -> list[TensorArg]:
        written = {
            node.attrs["tensor"].index
            for node in self.ir.walk()
            if node.op.memory in ("store", "atomic")
        }
        return [t for t in self.ir.tensor_args if t.index in written]

    def _emit_call(self, plan: CallPlan, scalar_params: list[str]) -> None:
        w = self.writer
        if any(size == 0 for size in plan.grid_sizes):
            w.line(f"# {plan.kernel_name}: empty grid, nothing to run")
            return
        if not plan.writes:
            w.line(f"# {plan.kernel_name} writes no tensor: skipped")
            return
        axes = [f"i{axis}" for axis in range(len(plan.grid))]
        in_specs = []
        for tensor in plan.reads:
            in_specs.append(
                (
                    self.block_spec(plan, plan.refs[tensor.index], axes),
                    self.tensor_names[tensor.index],
                )
            )
        for scalar in self.ir.scalar_args:
            in_specs.append(
                (f"pl.BlockSpec((), lambda {', '.join(axes)}: ())", self.scalar_names[scalar.index])
            )
        initials = [t for t in plan.writes if plan.refs[t.index].needs_initial]
        for tensor in initials:
            in_specs.append(
                (
                    self.whole_spec(tensor, axes),
                    f"{self.tensor_names[tensor.index]} (initial value)",
                )
            )
        out_specs = [
            (self.block_spec(plan, plan.refs[t.index], axes), self.tensor_names[t.index])
            for t in plan.writes
        ]
        # each initial value is the input its output aliases; an output the call overwrites
        # whole has none (memory.overwrites_every_element)
        first_initial = len(plan.reads) + len(self.ir.scalar_args)
        aliases = ", ".join(
            f"{first_initial + initials.index(t)}: {k}"
            for k, t in enumerate(plan.writes)
            if t in initials
        )
        outputs = [self.tensor_names[t.index] for t in plan.writes]
        operands = [self.tensor_names[t.index] for t in plan.reads] + scalar_params
        operands += [self.tensor_names[t.index] for t in initials]
        w.line(f"{unpack_target(outputs)} = pl.pallas_call(")
        with w.indent():
            w.line(f"{plan.kernel_name},")
            w.line(f"grid={tuple_text([str(g) for g in plan.grid])},")
            w.line("in_specs=[")
            with w.indent():
                for spec, comment in in_specs:
                    w.line(f"{spec},  # {comment}")
            w.line("],")
            w.line("out_specs=[")
            with w.indent():
                for spec, comment in out_specs:
                    w.line(f"{spec},  # {comment}")
            w.line("],")
            w.line("out_shape=[")
            with w.indent():
                for tensor in plan.writes:
                    w.line(
                        f"jax.ShapeDtypeStruct({tuple_text([str(s) for s in tensor.shape])}, {self.dtype(tensor.dtype)}),"
                    )
            w.line("],")
            if aliases:
                w.line(f"input_output_aliases={{{aliases}}},")
            if self.options.interpret:
                w.line("interpret=True,")
            params = self.compiler_params(plan)
            if params:
                w.line(f"compiler_params={params},")
            w.line(f'name="{self.entry_name}_{plan.position}",')
        w.line(f")({', '.join(operands)})")

    def compiler_params(self, plan: CallPlan) -> str | None:
        if self.options.target == "gpu":
            parts = []
            if self.options.num_warps is not None:
                parts.append(f"num_warps={self.options.num_warps}")
            if self.options.num_stages is not None:
                parts.append(f"num_stages={self.options.num_stages}")
            return f"plgpu.CompilerParams({', '.join(parts)})"
        if self.options.target == "tpu":
            has_atomics = any(n.op.memory == "atomic" for n in plan.node.regions[0].walk())
            semantics = "arbitrary" if has_atomics else "parallel"
            return f"pltpu.CompilerParams(dimension_semantics={tuple_text([repr(semantics)] * len(plan.grid))})"
        return None

    def whole_spec(self, tensor: TensorArg, axes: list[str]) -> str:
        zeros = tuple_text(["0"] * len(tensor.shape))
        return f"pl.BlockSpec({tuple_text([str(s) for s in tensor.shape])}, lambda {', '.join(axes)}: {zeros})"

    def block_spec(self, plan: CallPlan, ref: memory.RefPlan, axes: list[str]) -> str:
        if ref.block is None:
            return self.whole_spec(ref.arg, axes)
        tile_ids = self.grid_tile_ids(plan, axes)
        shape: list[str] = []
        index: list[str] = []
        node = plan.node
        for item in ref.block:
            kind = item[0]
            if kind == "tile":
                dim = item[1]
                shape.append(str(self.padded[node.attrs["block_ids"][dim]]))
                index.append(tile_ids[dim])
            elif kind == "full":
                shape.append(str(next_power_of_2(item[1])))
                index.append("0")
            elif kind == "const":
                shape.append("pl.squeezed")
                index.append(str(item[1]))
            elif kind == "grid":
                dim = item[1]
                begin = node.attrs["begins"][dim]
                shape.append("pl.squeezed")
                index.append(f"{begin} + {tile_ids[dim]}" if begin else tile_ids[dim])
        return f"pl.BlockSpec({tuple_text(shape)}, lambda {', '.join(axes)}: {tuple_text(index)})"


def generate_source(ir: KernelIR, options: PallasOptions) -> tuple[str, str, list[TensorArg]]:
    """Generate the module source; returns (source, entry function name, tensors it returns)."""
    codegen = KernelCodegen(ir, options)
    source = codegen.generate()
    return source, codegen.entry_name, codegen.written_tensors()
