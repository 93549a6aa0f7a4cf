"""Execute Kernel IR with eager torch ops, tile by tile.

Each tile is processed at its exact extent (the last tile of a dimension is smaller), so no
padded lanes exist and masks reduce to `extra_mask`. Block sizes and loop orders come from the
config; the result is the oracle every compiled backend is tested against.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
from typing import Any
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.ir.core import Block
from helion.ir.core import KernelIR
from helion.ir.core import Node
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.ir.host_scalars import host_scalar_ids
from helion.language import _ops as ops
from helion.passes.tile_origins import TileOrigins
from helion.runtime.config import Config


class TileRuntime:
    """A tile while it executes: [begin, end) with the configured block size, and the range
    [range_begin, range_end) its loop covers (for `tile.count`)."""

    __slots__ = ("begin", "block_size", "end", "range_begin", "range_end")

    def __init__(
        self,
        begin: int,
        end: int,
        block_size: int,
        range_begin: int = 0,
        range_end: int | None = None,
    ) -> None:
        self.begin = begin
        self.end = end
        self.block_size = block_size
        self.range_begin = range_begin
        self.range_end = end if range_end is None else range_end


class RefExecutor:
    def __init__(self, ir: KernelIR, config: Config) -> None:
        from helion.backends.ref.lowerings import pad_partial_tiles
        from helion.backends.ref.lowerings import ref_lowerings

        self.ir = ir
        self.config = config
        self.lowerings = ref_lowerings()
        # the values eager PyTorch holds as Python numbers (the elementwise rules hand them to
        # torch as numbers: it reads `x * s` and `s / x` unlike `x * t`, `t / x` for a 0-D t)
        self.host_scalars = host_scalar_ids(ir)
        self.pad_partial_tiles = pad_partial_tiles
        block_sizes = list(config.get("block_sizes", []) or [])
        self.block_value: dict[int, int] = {}
        for info in ir.block_sizes:
            if info.kind == "tile":
                if info.config_index is None or info.config_index >= len(block_sizes):
                    raise exc.InvalidConfig(
                        f"config has no block size for tile dimension {info.block_id}"
                    )
                self.block_value[info.block_id] = int(block_sizes[info.config_index])
            elif info.kind in ("fixed", "grid"):
                self.block_value[info.block_id] = int(info.fixed_value or 1)
            else:
                self.block_value[info.block_id] = info.size_hint
        self.loop_order: dict[int, list[int]] = {}
        orders = list(config.get("loop_orders", []) or [])
        position = 0
        for loop in ir.loops:
            if len(loop.block_ids) > 1:
                if position < len(orders):
                    self.loop_order[loop.loop_id] = list(orders[position])
                position += 1
        self.symbols = {info.symbol: info.block_id for info in ir.block_sizes}
        # where one block size sizes several tiles (`hl.register_block_size` shared by loops), a
        # shape entry `_BLOCK_SIZE_0` does not say whose extent it has: the tile each dimension
        # of each value came from does (None: each block size has one tile)
        tiles = collections.Counter(b for loop in ir.loops for b in loop.block_ids)
        self.origins = TileOrigins(ir) if any(count > 1 for count in tiles.values()) else None
        self.stored_tensors = {
            node.attrs["tensor"].index
            for node in ir.walk()
            if node.op.memory in ("store", "atomic")
        }
        # side-effecting ops that are not memory ops synchronize with other agents (the signals
        # and collectives of helion-distributed): memory may change under the kernel, so a load
        # must copy, never alias its tensor
        self.copy_loads = any(
            node.op.side_effects and node.op.memory is None and node.op is not ops.device_print
            for node in ir.walk()
        )

    # -- state ----------------------------------------------------------------------------------

    def run(self, host_values: Sequence[Any]) -> None:
        self.host = host_values
        self.device = next(
            (v.device for v in host_values if isinstance(v, torch.Tensor)), torch.device("cpu")
        )
        self.extent: dict[int, int] = {}
        # the tiles executing now, by the id of their tile value: (block id, tile)
        self.tiles: dict[int, tuple[int, TileRuntime]] = {}
        env: dict[int, Any] = {}
        for scalar in self.ir.scalar_args:
            env[scalar.value.id] = host_values[scalar.index]
        # torch refuses in-place writes into a tensor made under torch.inference_mode() once
        # outside it: stores into such a tensor run inside it (as the compiled backends write it)
        writes_inference = not torch.is_inference_mode_enabled() and any(
            host_values[index].is_inference() for index in self.stored_tensors
        )
        try:
            with torch.inference_mode() if writes_inference else contextlib.nullcontext():
                self.run_block(self.ir.body, env)
        finally:
            self.host = ()  # the caller's tensors are not the executor's to keep alive

    def resolve(self, expr: Any) -> int:
        """Concrete size of a shape entry for the tiles executing now."""
        if isinstance(expr, int):
            return expr
        if expr.is_Integer:
            return int(expr)
        if expr.is_Symbol:
            block_id = self.symbols[expr]
            return self.extent.get(block_id, self.block_value[block_id])
        values = {s: self.resolve(s) for s in expr.free_symbols}
        return int(expr.subs(values))

    def shape(self, dims: Sequence[Any], like: Value | None = None) -> list[int]:
        """Concrete sizes of `dims`, the shape of the value `like` (whose dimensions' tiles
        tell which extent a block size shared by several tiles has)."""
        row = self.origins.of(like) if self.origins is not None and like is not None else None
        if not row or len(row) != len(dims):
            row = (None,) * len(dims)
        return [self.extent_of(d, origin) for d, origin in zip(dims, row, strict=True)]

    def dim_size(self, value: Value, axis: int) -> int:
        """Concrete size of dimension `axis` of the IR value `value`."""
        return self.shape(value.shape, value)[axis]

    def extent_of(self, dim: Any, origin: Any) -> int:
        """Concrete size of a shape entry of a dimension that came from the tile value id
        `origin` (None or CONFLICT: not traced to one tile). A block size that several running
        tiles share, with no tile traced, has the whole block: padded lanes, as in compiled code."""
        if self.origins is None or not isinstance(dim, sympy.Symbol) or dim not in self.symbols:
            return self.resolve(dim)
        block_id = self.symbols[dim]
        entry = self.tiles.get(origin) if origin is not None else None
        if entry is not None and entry[0] == block_id:
            return entry[1].end - entry[1].begin
        if sum(1 for b, _ in self.tiles.values() if b == block_id) > 1:
            return self.block_value[block_id]
        return self.resolve(dim)

    def conform(self, result: Any, value: Value) -> Any:
        """`result`, the runtime value of `value`, without the padded lanes of the dimensions
        traced to a running tile (a full block met that tile: a masked store drops them too)."""
        if self.origins is None or not isinstance(result, torch.Tensor):
            return result
        row = self.origins.of(value)
        if not row or len(row) != result.ndim:
            return result
        for axis, origin in enumerate(row):
            entry = self.tiles.get(origin) if origin is not None else None
            if entry is None:
                continue
            extent = entry[1].end - entry[1].begin
            if result.shape[axis] > extent and result.shape[axis] != 1:
                result = result.narrow(axis, 0, extent)
        return result

    def value(self, env: dict[int, Any], operand: Any) -> Any:
        if isinstance(operand, Value):
            return env[operand.id]
        if isinstance(operand, sympy.Expr):
            return self.resolve(operand)
        return operand

    def scalar(self, env: dict[int, Any], operand: Any) -> int:
        value = self.value(env, operand)
        if isinstance(value, torch.Tensor):
            return int(value.item())
        return int(value)

    # -- regions --------------------------------------------------------------------------------

    def run_block(self, block: Block, env: dict[int, Any]) -> list[Any]:
        for node in block.nodes:
            self.run_node(node, env)
        return [self.value(env, y) for y in block.yields]

    def run_node(self, node: Node, env: dict[int, Any]) -> None:
        if node.op.structural:
            getattr(self, f"_run_{node.op.name}")(node, env)
            return
        rule = self.lowerings.get(node.op)
        if rule is None:
            raise exc.BackendUnsupported(node.op.user_name, "ref", loc=node.loc)
        inputs = [self.value(env, i) for i in node.inputs]
        if node.op.elementwise:
            inputs = self.pad_partial_tiles(inputs)
        try:
            results = rule(self, node, inputs)
        except exc.BaseError:
            raise
        except Exception as error:
            raise exc.InternalError(
                f"ref backend failed on {node.op.name}: {type(error).__name__}: {error}",
                loc=node.loc,
            ) from error
        if not node.outputs:
            return
        if len(node.outputs) == 1:
            results = [results]
        for out, result in zip(node.outputs, results, strict=True):
            env[out.id] = self.conform(self.coerce(result, out), out)

    def coerce(self, result: Any, out: Value) -> Any:
        ty = out.type
        if not isinstance(ty, TensorType):
            return result
        if isinstance(result, torch.Tensor):
            return result if result.dtype == ty.dtype else result.to(ty.dtype)
        return torch.tensor(result, dtype=ty.dtype, device=self.device)

    def _tiles(self, node: Node, env: dict[int, Any]) -> list[list[TileRuntime]]:
        per_dim = []
        for block_id, begin, end in zip(
            node.attrs["block_ids"], node.attrs["begins"], node.attrs["ends"], strict=True
        ):
            lo, hi = self.scalar(env, begin), self.scalar(env, end)
            step = self.block_value[block_id]
            if node.attrs.get("is_grid"):
                step = 1
            per_dim.append(
                [TileRuntime(b, min(b + step, hi), step, lo, hi) for b in range(lo, hi, step)]
            )
        return per_dim

    def _iterate(self, node: Node, env: dict[int, Any]):
        per_dim = self._tiles(node, env)
        order = self.loop_order.get(node.attrs["loop_id"])
        ndim = len(per_dim)
        if order is None or len(order) != ndim:
            order = list(range(ndim))
        # loop_orders[i][0] is the dimension that varies fastest
        nesting = list(reversed(order))
        for combo in itertools.product(*(per_dim[d] for d in nesting)):
            tiles: list[TileRuntime | None] = [None] * ndim
            for d, tile in zip(nesting, combo, strict=True):
                tiles[d] = tile
            yield tiles

    def _enter(
        self, node: Node, tiles: list[TileRuntime], body: Block, env: dict[int, Any]
    ) -> None:
        # the body's first arguments are the tiles; the loop-carried values follow them
        for block_id, tile, arg in zip(
            node.attrs["block_ids"], tiles, body.args[: len(tiles)], strict=True
        ):
            self.extent[block_id] = tile.end - tile.begin
            self.tiles[arg.id] = (block_id, tile)
            env[arg.id] = tile

    def _run_grid_loop(self, node: Node, env: dict[int, Any]) -> None:
        body = node.regions[0]
        saved, saved_tiles = dict(self.extent), dict(self.tiles)
        for tiles in self._iterate(node, env):
            self._enter(node, tiles, body, env)
            self.run_block(body, env)
        self.extent, self.tiles = saved, saved_tiles

    def _run_tile_loop(self, node: Node, env: dict[int, Any]) -> None:
        body = node.regions[0]
        carried = [self.value(env, i) for i in node.inputs]
        n_tiles = len(node.attrs["block_ids"])
        saved, saved_tiles = dict(self.extent), dict(self.tiles)
        for tiles in self._iterate(node, env):
            self._enter(node, tiles, body, env)
            for arg, value in zip(body.args[n_tiles:], carried, strict=True):
                env[arg.id] = self.conform(value, arg)
            carried = self.run_block(body, env)
        self.extent, self.tiles = saved, saved_tiles
        for out, value in zip(node.outputs, carried, strict=True):
            env[out.id] = self.conform(self.coerce(value, out), out)

    def _run_if(self, node: Node, env: dict[int, Any]) -> None:
        cond = self.value(env, node.inputs[0])
        taken = node.regions[0] if bool(cond) else node.regions[1]
        results = self.run_block(taken, env)
        for out, value in zip(node.outputs, results, strict=True):
            env[out.id] = self.conform(self.coerce(value, out), out)
