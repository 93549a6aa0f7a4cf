"""Kernel IR + Config -> the source of one ``@triton.jit`` kernel and its host launcher.

The generator walks the IR once per config. Every IR value becomes one Python variable of the
Triton kernel whose dtype is exactly the value's IR dtype (casts are explicit), and whose shape
is the IR shape with each dimension replaced by its Triton extent: the block size of a tile, the
next power of two of a constant or of a persistent reduction dimension, the chunk of a looped one.
Lanes past the logical extent ("padded lanes") may hold anything: every consumer that could see
them (reductions, scans, dots, stores, atomics) applies the dimension's mask.

Structure: top-level ``grid_loop`` nodes become program ids (``pid_type`` flat / xyz / persistent),
``tile_loop`` nodes become ``tl.range`` loops with loop-carried variables, ``if`` nodes become
scalar ``if`` statements, and reduction dimensions configured as looped become ``for`` loops over
chunks that recompute the values they need. Every other op is lowered by its rule in
:data:`helion_triton.lowerings.TRITON_LOWERINGS`.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import keyword
import math
import re
from typing import Any
from typing import Callable
from typing import Container
from typing import Iterator
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.ir.core import Block
from helion.ir.core import KernelIR
from helion.ir.core import Node
from helion.ir.core import ScalarArg
from helion.ir.core import TensorArg
from helion.ir.core import TensorType
from helion.ir.core import TileType
from helion.ir.core import Value
from helion.language import _ops as ops
from helion.passes.tile_origins import UNKNOWN
from helion_triton import fp8
from helion_triton import looped
from helion_triton import mathlib
from helion_triton.analysis import KernelAnalysis
from helion_triton.sizes import RuntimeSize
from helion_triton.sizes import RuntimeSizes
from helion_triton.target import TritonTarget
from helion_triton.tunables import MAX_STATIC_RANGE_ITERATIONS
from helion_triton.tunables import TritonOptions

BACKEND = "triton"

TL_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "tl.float32",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
    torch.float8_e4m3fn: "tl.float8e4nv",
    torch.float8_e5m2: "tl.float8e5",
}
for _name in ("uint16", "uint32", "uint64"):
    if hasattr(torch, _name):
        TL_DTYPES[getattr(torch, _name)] = f"tl.{_name}"

# names the generated module binds itself
RESERVED = {
    "tl",
    "triton",
    "torch",
    "libdevice",
    "math",
    "float",
    "int",
    "range",
    "min",
    "max",
    "len",
    "pass",
}


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def literal(value: Any) -> str:
    """Python source of a constant operand."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    if isinstance(value, sympy.Integer):
        return str(int(value))
    if isinstance(value, str):
        return repr(value)
    raise TypeError(f"no Triton literal for {value!r}")


_HALF_FLOATS = (torch.float16, torch.bfloat16)


def constant_as(value: Any, dtype: torch.dtype) -> Any:
    """A Python number as a tensor of ``dtype`` holds it, torch's conversion: a bool for bool;
    an int wrapped into an integer dtype's range (two's complement: torch computes int8
    ``x ^ 0xFF`` with -1, and Triton refuses a constant out of its tensor's range); a float
    rounded to nearest in float16 / bfloat16 / float8 (through float32, as a Python float
    reaches such a tensor in torch; Triton's interpreter truncates to bfloat16). Other values
    are returned as they are."""
    if dtype == torch.bool:
        return bool(value)
    if isinstance(value, sympy.Integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if not dtype.is_floating_point:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and dtype in TL_DTYPES:
            info = torch.iinfo(dtype)
            value &= (1 << info.bits) - 1
            if info.min < 0 and value >> (info.bits - 1):
                value -= 1 << info.bits
        return value
    if dtype in _HALF_FLOATS or dtype in fp8.FP8:
        try:
            rounded = torch.tensor(float(value), dtype=torch.float32).to(dtype).item()
        except OverflowError:  # an int beyond float64
            return float("inf") if value > 0 else float("-inf")
        return value if rounded == value else rounded  # an int the dtype holds stays an int
    return value


def _identifier(text: str) -> str:
    name = re.sub(r"\W", "_", text) or "v"
    if name[0].isdigit():
        name = f"v_{name}"
    if keyword.iskeyword(name):
        name += "_"
    return name


def _strip_parens(expr: str) -> str:
    """``(a + b)`` -> ``a + b`` when the outer parentheses enclose the whole expression."""
    if not (expr.startswith("(") and expr.endswith(")")):
        return expr
    depth = 0
    for position, char in enumerate(expr):
        depth += char == "("
        depth -= char == ")"
        if depth == 0 and position != len(expr) - 1:
            return expr
    return expr[1:-1]


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CALL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def atom(expr: str) -> str:
    """``expr`` parenthesized unless it already binds tighter than a method call."""
    if _IDENTIFIER.match(expr):
        return expr
    depth = 0
    for position, char in enumerate(expr):
        if char in "([":
            if (
                depth == 0
                and position
                and not _CALL.match(expr[:position])
                and expr[position - 1] != "]"
            ):
                return f"({expr})"
            depth += 1
        elif char in ")]":
            depth -= 1
        elif depth == 0 and not (char.isalnum() or char in "_."):
            return f"({expr})"
    return expr


@dataclasses.dataclass
class TileVars:
    """The variables that describe the tile of one block dimension inside its loop."""

    block_id: int
    offset: str | None  # first index of the tile (a scalar)
    index: str | None  # the tile's indices (1-D, Triton extent lanes)
    mask: str | None  # lanes inside the loop bounds, None when all are
    begin: str
    end: str
    step: str  # the block size as an expression
    is_grid: bool
    offset_dtype: torch.dtype | None = None
    index_dtype: torch.dtype | None = None
    # the IR bounds (begin, end) of the tile's loop, for `always_multiple`
    bounds: tuple[Any, Any] | None = None


@dataclasses.dataclass
class RdimVars:
    """Indices of a reduction dimension: the whole dimension, or the current chunk of a looped one."""

    index: str
    mask: str | None
    offset: str


@dataclasses.dataclass
class FlatLayout:
    """Inside a flattened loop: values of the loop's shape are 1-D of ``size`` lanes."""

    shape: tuple
    size: str
    mask: str | None


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """What the generated launcher does, for `DirectLaunch` to do the same in one function: launch
    the kernel with ``args`` (names among the launcher's ``params``) over ``grid``, a tuple
    expression over those names (``triton.cdiv`` allowed), with the launcher's constexprs and
    options. ``static_grid``: the grid when it is constant. ``prelude``: statements that bind
    argument names from the parameters first (`RuntimeSizes.launcher_lines`)."""

    params: tuple[str, ...]
    args: tuple[str, ...]
    grid: str
    rank: int
    static_grid: tuple[int, ...] | None
    prelude: tuple[str, ...] = ()


@dataclasses.dataclass
class GeneratedKernel:
    source: str
    kernel_name: str
    launcher_name: str
    uses_tensor_descriptors: bool
    uses_barrier: bool
    # None where the launcher does more than launch (a barrier buffer to allocate)
    launch_plan: LaunchPlan | None = None


def loads_first(nodes: list[Node], fixed: Container[int] = frozenset()) -> list[Node]:
    """The emission order of a block: each load moved up past the elementwise math before it
    that does not compute one of its operands (`_load_may_pass`), keeping the loads in their
    own order. Every load of a run of such math is then issued before the math on the first
    one: ptxas does not move a load across the branches of e.g. ``libdevice.tanh``, so geglu
    written ``gelu(a[t]) * b[t]`` used to wait for ``a`` before reading ``b``. A load stays
    below stores, atomics, regions and opaque code (order of effects), and below reductions,
    scans and dots (a load moved above them would hold its registers across them; that was not
    measured to pay). Nodes in ``fixed`` (the looped reductions' groups) are not passed."""
    order: list[Node] = []
    for node in nodes:
        position = len(order)
        if node.op.memory == "load" and id(node) not in fixed:
            operands = {id(v) for v in _values_in(node.inputs)}
            while position > 0:
                before = order[position - 1]
                if (
                    id(before) in fixed
                    or not _load_may_pass(before.op)
                    or any(id(out) in operands for out in before.outputs)
                ):
                    break
                position -= 1
        order.insert(position, node)
    return order


_INDEX_OPS = frozenset({ops.full, ops.arange, ops.constant, *ops.TILE_ATTRS.values()})


def _load_may_pass(op: Any) -> bool:
    return op.elementwise or op.view or op in _INDEX_OPS


def _values_in(operands: Any) -> Iterator[Value]:
    for operand in operands:
        if isinstance(operand, Value):
            yield operand
        elif isinstance(operand, (list, tuple)):
            yield from _values_in(operand)


def resolve_blocks(
    ir: KernelIR,
    block_sizes: Sequence[int],
    reduction_loops: Sequence[Any],
    rdim_infeasible: Container[int],
) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """Per block id: the Triton extent of the dimension (a power of two), the step between tiles
    (tile / fixed / grid dims), and the chunk of each looped reduction dimension."""
    block_value: dict[int, int] = {}
    real_block: dict[int, int] = {}
    looped: dict[int, int] = {}
    for info in ir.block_sizes:
        if info.kind == "tile":
            if info.config_index is None or info.config_index >= len(block_sizes):
                raise exc.InvalidConfig(
                    f"config has no block size for tile dimension {info.block_id}"
                )
            size = int(block_sizes[info.config_index])
            if size & (size - 1):
                raise exc.InvalidConfig(
                    f"block size {size} of dimension {info.block_id} is not a power of two"
                )
            real_block[info.block_id] = size
            block_value[info.block_id] = size
        elif info.kind in ("fixed", "grid"):
            size = int(info.fixed_value or 1)
            real_block[info.block_id] = size
            block_value[info.block_id] = next_power_of_2(size)
        else:
            index = info.config_index
            chunk = (
                reduction_loops[index]
                if index is not None and index < len(reduction_loops)
                else None
            )
            if (
                chunk is not None
                and int(chunk) < info.size_hint
                and info.block_id not in rdim_infeasible
            ):
                looped[info.block_id] = int(chunk)
                block_value[info.block_id] = int(chunk)
            else:
                block_value[info.block_id] = next_power_of_2(info.size_hint)
    return block_value, real_block, looped


# float32 -> bfloat16 with round-to-nearest-even on the bits (interpreter only: its conversion
# truncates); NaN stays a quiet NaN, overflow rounds to infinity
_TO_BFLOAT16 = """
@triton.jit
def _helion_to_bfloat16(x):
    bits = x.to(tl.uint32, bitcast=True)
    rounded = bits + (0x7FFF + ((bits >> 16) & 1))
    upper = tl.where(x != x, bits | 0x400000, rounded) >> 16
    return upper.to(tl.uint16).to(tl.bfloat16, bitcast=True)
"""


class Names:
    """Fresh Python identifiers: ``load``, ``load_1``, ``load_2``, ..."""

    def __init__(self, reserved: set[str]) -> None:
        self.used = set(reserved)
        self.counters: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        base = _identifier(base)
        if base not in self.used:
            self.used.add(base)
            return base
        count = self.counters.get(base, 0)
        while True:
            count += 1
            candidate = f"{base}_{count}"
            if candidate not in self.used:
                break
        self.counters[base] = count
        self.used.add(candidate)
        return candidate


class KernelCodegen:
    """Generates the Triton module of one (IR, config). Lowering rules receive this object as
    their ``ctx`` and use the methods in the "for lowering rules" section."""

    def __init__(
        self,
        ir: KernelIR,
        options: TritonOptions,
        target: TritonTarget,
        analysis: KernelAnalysis,
        lowerings: dict[ops.Op, Callable],
        settings: Any = None,
    ) -> None:
        self.ir = ir
        self.options = options
        self.target = target
        self.analysis = analysis
        self.lowerings = lowerings
        self.settings = settings
        self.names = Names(RESERVED)
        self.lines: list[str] = []
        self.prologue: list[str] = []
        self.depth = 1
        self.exprs: dict[int, str] = {}
        self.tiles_by_block: dict[int, TileVars] = {}
        self.tiles_by_value: dict[int, TileVars] = {}
        self.rdims: dict[int, RdimVars] = {}
        self.flat: FlatLayout | None = None
        self.helpers: dict[str, str] = {}
        self.uses_libdevice = False
        self.descriptors: dict[tuple, str] = {}
        self.const_masks: dict[int, str] = {}
        self.used_constexprs: set[str] = set()
        self.scalar_by_value: dict[int, ScalarArg] = {s.value.id: s for s in ir.scalar_args}
        self.tensor_names: dict[int, str] = {}
        self.extra_params: list[str] = []
        self.scalar_param_names: dict[int, str] = {}
        self.barrier_param: str | None = None
        self.node: Node | None = None
        # values whose padded lanes hold 0 (masked loads read 0 there)
        self.zero_lanes: set[int] = set()
        # values loaded through a tensor descriptor (TMA on the GPU)
        self.descriptor_loads: set[int] = set()
        self.index_dtype = ir.index_dtype
        self._dim_cache: dict[Any, str] = {}
        # reduction dimensions of length 0 (`x[tile, :]` of an empty dimension)
        self.empty_rdims = ir.empty_reduction_blocks()
        # static_shapes=False: tensor sizes and strides are kernel arguments
        self.sizes = RuntimeSizes(
            ir, settings is not None and not settings.static_shapes, self.fresh
        )
        self._wide_sizes: dict[str, str] = {}  # size argument -> its int64 copy
        self._resolve_blocks()

    # ------------------------------------------------------------------------------------------
    # block sizes

    def rdim_size(self, info: Any) -> int:
        """The logical extent of a reduction dimension: 0 for a `:` slice of length 0."""
        return 0 if info.block_id in self.empty_rdims else int(info.size_hint)

    def _resolve_blocks(self) -> None:
        self.block_value, self.real_block, self.looped = resolve_blocks(
            self.ir,
            self.options.block_sizes,
            self.options.reduction_loops,
            self.analysis.rdim_infeasible,
        )

    # ------------------------------------------------------------------------------------------
    # output

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def emit_prologue(self, line: str) -> None:
        self.prologue.append("    " + line)

    @contextlib.contextmanager
    def indented(self) -> Iterator[None]:
        self.depth += 1
        start = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == start:
                self.emit("pass")
            self.depth -= 1

    def fresh(self, base: str) -> str:
        return self.names.fresh(base)

    def assign(self, expr: str, hint: str = "v") -> str:
        """Bind ``expr`` to a fresh variable (or return it when it already is one)."""
        if _IDENTIFIER.match(expr) and expr not in ("True", "False", "None"):
            return expr
        name = self.fresh(hint)
        self.emit(f"{name} = {expr}")
        return name

    # ------------------------------------------------------------------------------------------
    # for lowering rules: operands, dtypes, shapes, masks

    def unsupported(self, what: str, node: Node | None = None) -> exc.BackendUnsupported:
        node = node or self.node
        return exc.BackendUnsupported(what, BACKEND, loc=node.loc if node is not None else None)

    def tl(self, dtype: torch.dtype) -> str:
        try:
            return TL_DTYPES[dtype]
        except KeyError:
            raise self.unsupported(f"dtype {dtype}") from None

    def expr(self, operand: Any) -> str:
        """The expression of an input: a value's variable, or a literal."""
        if isinstance(operand, Value):
            if isinstance(operand.type, TileType):
                tile = self.tile_vars(operand)
                return self.tile_index(tile)
            try:
                return self.exprs[operand.id]
            except KeyError:
                raise exc.InternalError(
                    f"triton codegen: {operand!r} used before it is defined"
                ) from None
        if isinstance(operand, sympy.Expr) and not operand.is_Integer:
            return self.symbol_value(operand)
        if operand is None:
            return "None"
        return literal(operand)

    def symbol_value(self, expr: sympy.Expr) -> str:
        substitutions = {}
        for symbol in expr.free_symbols:
            info = self.analysis.block_of_symbol[symbol]  # type: ignore[index]
            if info.kind == "reduction":
                substitutions[symbol] = self.rdim_size(info)
            else:
                substitutions[symbol] = self.real_block[info.block_id]
        return str(int(expr.subs(substitutions)))

    def dtype_of(self, operand: Any) -> torch.dtype | None:
        if isinstance(operand, Value) and isinstance(operand.type, TensorType):
            return operand.type.dtype
        return None

    def cast(self, expr: str, to: torch.dtype, frm: torch.dtype | None) -> str:
        if frm == to:
            return expr
        if to == torch.bool:
            if frm in fp8.FP8 or (frm == torch.bfloat16 and self.target.interpret):
                # on the value, not the bits: -0.0 is False (the interpreter holds bf16 and
                # fp8 values as their raw bits)
                expr = self.cast(expr, torch.float32, frm)
            return f"({expr} != 0)"
        if self.target.interpret and (to in fp8.FP8 or frm in fp8.FP8):
            return fp8.interpreted_cast(self, expr, to, frm) or f"{atom(expr)}.to({self.tl(to)})"
        if to == torch.bfloat16 and self.target.interpret:
            # the interpreter turns ints / bools into bf16 by reinterpreting bits, and truncates
            # floats: go via float32 and round to nearest even as torch and the GPU do
            as_float = expr if frm == torch.float32 else f"{atom(expr)}.to(tl.float32)"
            return f"{self.helper('_helion_to_bfloat16', _TO_BFLOAT16)}({as_float})"
        return f"{atom(expr)}.to({self.tl(to)})"

    def operand(self, operand: Any, dtype: torch.dtype) -> str:
        """An input converted to ``dtype`` (python scalars stay weakly typed literals)."""
        if isinstance(operand, Value):
            return self.cast(self.expr(operand), dtype, self.dtype_of(operand))
        if operand is None:
            return "None"
        if isinstance(operand, sympy.Expr) and not operand.is_Integer:
            return self.symbol_value(operand)
        value = constant_as(operand, dtype)
        if dtype in fp8.FP8 and isinstance(value, (int, float)):
            # a number does not convert to fp8 implicitly (the interpreter's conversion is wrong)
            return self.cast(
                f"tl.full([], {literal(float(value))}, tl.float32)", dtype, torch.float32
            )
        return literal(value)

    def typed_constant(self, value: Any, dtype: torch.dtype) -> str:
        return f"tl.full([], {literal(constant_as(value, dtype))}, {self.tl(dtype)})"

    def extent(self, dim: Any) -> int:
        """The Triton extent (a power of two) of a shape entry."""
        if isinstance(dim, int) or (isinstance(dim, sympy.Expr) and dim.is_Integer):
            return next_power_of_2(int(dim))
        if dim.is_Symbol:
            return self.block_value[self.analysis.block_of_symbol[dim].block_id]
        values = {
            s: self.block_value[self.analysis.block_of_symbol[s].block_id] for s in dim.free_symbols
        }
        value = int(dim.subs(values))
        if value & (value - 1):
            raise self.unsupported(f"a dimension of {value} lanes ({dim}), not a power of two")
        return value

    def dim_str(self, dim: Any) -> str:
        """A shape entry in Triton source (a constexpr name or a number)."""
        cached = self._dim_cache.get(dim)
        if cached is not None:
            self._note_constexprs(dim)
            return cached
        if isinstance(dim, int) or dim.is_Integer:
            text = str(next_power_of_2(int(dim)))
        elif dim.is_Symbol:
            info = self.analysis.block_of_symbol[dim]
            text = "1" if info.kind == "grid" else dim.name
        else:
            self.extent(dim)  # checks it is a power of two
            for symbol in dim.free_symbols:
                if self.is_padded(symbol):
                    raise self.unsupported(f"merging the padded dimension {symbol} into {dim}")
            grid = {
                s: 1 for s in dim.free_symbols if self.analysis.block_of_symbol[s].kind == "grid"
            }
            text = " * ".join(str(f) for f in sympy.Mul.make_args(dim.subs(grid)))
        self._dim_cache[dim] = text
        self._note_constexprs(dim)
        return text

    def _note_constexprs(self, dim: Any) -> None:
        if isinstance(dim, sympy.Expr):
            for symbol in dim.free_symbols:
                if self.analysis.block_of_symbol[symbol].kind != "grid":
                    self.used_constexprs.add(symbol.name)

    def shape(self, dims: Any) -> str:
        """A shape list in Triton source, e.g. ``[_BLOCK_SIZE_0, 16]``."""
        dims = tuple(dims)
        if self.flat is not None and dims == self.flat.shape:
            return f"[{self.flat.size}]"
        return "[" + ", ".join(self.dim_str(d) for d in dims) + "]"

    def is_padded(self, dim: Any) -> bool:
        """Whether the Triton extent of ``dim`` exceeds its logical extent somewhere."""
        if isinstance(dim, int) or dim.is_Integer:
            n = int(dim)
            return n != next_power_of_2(n)
        if not dim.is_Symbol:
            return any(self.is_padded(s) for s in dim.free_symbols)
        info = self.analysis.block_of_symbol[dim]
        if info.kind == "reduction":
            size = self.rdim_size(info)
            return size == 0 or size % self.block_value[info.block_id] != 0
        if info.kind == "grid":
            return False
        return self.block_value[info.block_id] != self.real_block[info.block_id]

    def dim_mask(self, dim: Any, origin: Any = UNKNOWN) -> str | None:
        """The 1-D mask of a shape entry's valid lanes, or None when every lane is valid.
        ``origin`` is the tile the dimension came from (:meth:`origins`)."""
        if isinstance(dim, int) or dim.is_Integer:
            n = int(dim)
            if n == next_power_of_2(n):
                return None
            if n not in self.const_masks:
                name = self.fresh(f"mask_c{n}")
                self.emit_prologue(f"{name} = tl.arange(0, {next_power_of_2(n)}) < {n}")
                self.const_masks[n] = name
            return self.const_masks[n]
        if dim.is_Symbol:
            info = self.analysis.block_of_symbol[dim]
            if info.kind == "reduction":
                rdim = self.rdims.get(info.block_id)
                return rdim.mask if rdim else None
            if info.kind == "grid":
                return None
            tile = self.tiles_by_block.get(info.block_id)
            shared = [t for t in self.tiles_by_value.values() if t.block_id == info.block_id]
            if len(shared) > 1:
                tile = self._tile_of_dim(dim, shared, origin)
            return tile.mask if tile else None
        merged = self._merged_mask(dim, origin)
        if merged is not None:
            return merged
        for symbol in dim.free_symbols:
            if self.dim_mask(symbol) is not None:
                raise self.unsupported(
                    f"masking the merged dimension {dim} (its tiles are partial)"
                )
        return None

    def _merged_mask(self, dim: Any, origin: Any) -> str | None:
        """The mask of a dimension ``c * B`` (an int times one block size), whose lane ``j``
        is lane ``j // c`` of ``B``: ``hl.arange(bk * 2)``, or ``B`` merged with a dim of
        ``c`` after it (`stack([lo, hi], dim=1).reshape(bk * 2, n)`; the reshape lowering
        refuses the other order where ``B``'s tiles may be partial). None when ``B`` has no
        mask, or for another shape of expression."""
        factor, rest = dim.as_coeff_Mul()
        if not (factor.is_Integer and int(factor) > 1 and rest.is_Symbol):
            return None
        inner = self.dim_mask(rest, origin)
        if inner is None:
            return None
        block = self.dim_str(rest)
        # each lane of B repeated `factor` times, in order
        return self.assign(
            f"tl.reshape(tl.broadcast_to({inner}[:, None], [{block}, {int(factor)}]), "
            f"[{self.dim_str(dim)}])",
            "mask_merged",
        )

    def _tile_of_dim(self, dim: Any, shared: list[TileVars], origin: Any) -> TileVars:
        """Of the tiles in scope that share the block size ``dim``, the one a dimension came
        from: each has its own bounds. With none traced, any will do only if their masks agree."""
        tile = self.tiles_by_value.get(origin)
        if tile is not None and tile.block_id == shared[0].block_id:
            return tile
        if len({t.mask for t in shared}) == 1:
            return shared[-1]
        what = self.node.op.name if self.node is not None else "an operation"
        raise exc.BackendUnsupported(
            f"{what} on a dimension of block size {dim}, which {len(shared)} tiles in scope "
            "share (which tile's bounds apply cannot be traced)",
            BACKEND,
            loc=self.node.loc if self.node is not None else None,
            hint="Derive the value from loads or tile.index of the tiles (x[tile_m, tile_n]) "
            "rather than from hl.zeros / hl.full of block sizes alone, or give each loop its "
            "own block size.",
        )

    def origins(self, value: Any) -> tuple | None:
        """The tile each dimension of ``value`` came from, where one block size sizes several
        tiles (:mod:`helion.passes.tile_origins`); None otherwise, or for a non-tensor operand."""
        traced = self.analysis.tile_origins
        return traced.of(value) if traced is not None else None

    def origin(self, value: Any, dim: int) -> Any:
        """The tile dimension ``dim`` of ``value`` came from (UNKNOWN when not traced)."""
        row = self.origins(value)
        return row[dim] if row else UNKNOWN

    def is_flat(self, shape: Any) -> bool:
        return self.flat is not None and tuple(shape) == self.flat.shape

    def place(self, expr: str, position: int, shape: Any) -> str:
        """A 1-D expression broadcast to dimension ``position`` of a value of ``shape``."""
        rank = len(shape)
        if rank <= 1 or self.is_flat(shape):
            return expr
        items = ", ".join(":" if i == position else "None" for i in range(rank))
        return f"{expr}[{items}]"

    def mask_for(self, shape: Any, positions: Any = None, origins: Any = None) -> str | None:
        """The AND of the masks of ``shape``'s dimensions at ``positions`` (default: all);
        ``origins`` (:meth:`origins`) gives the tile of the leading dimensions it covers."""
        shape = tuple(shape)
        origins = origins or ()
        parts: list[str] = []
        for position in range(len(shape)) if positions is None else positions:
            origin = origins[position] if position < len(origins) else UNKNOWN
            mask = self.dim_mask(shape[position], origin)
            if mask is not None:
                placed = self.place(mask, position, shape)
                if placed not in parts:
                    parts.append(placed)
        return " & ".join(parts) if parts else None

    def tile_vars(self, tile: Value) -> TileVars:
        try:
            return self.tiles_by_value[tile.id]
        except KeyError:
            raise exc.InternalError(
                f"triton codegen: tile {tile!r} used outside its loop"
            ) from None

    def tile_index(self, tile: TileVars) -> str:
        if tile.index is not None:
            return tile.index
        return f"({tile.offset} + tl.arange(0, 1))"

    def rdim_vars(self, symbol: sympy.Symbol) -> RdimVars:
        info = self.analysis.block_of_symbol[symbol]
        rdim = self.rdims.get(info.block_id)
        if rdim is None:
            raise exc.InternalError(
                f"triton codegen: reduction dimension {symbol} has no indices here"
            )
        return rdim

    def math(self, name: str, *args: str) -> str:
        """A math function missing from ``tl``: libdevice on the GPU, a helper in the interpreter."""
        if self.target.interpret:
            for helper in mathlib.helper_closure(name):
                self.helpers.setdefault(f"_helion_{helper}", mathlib.HELPERS[helper][1].strip())
            return f"_helion_{name}({', '.join(args)})"
        self.uses_libdevice = True
        return f"libdevice.{mathlib.LIBDEVICE[name]}({', '.join(args)})"

    def helper(self, name: str, source: str) -> str:
        """Add a module-level function (e.g. a combine function for tl.reduce) once; ``name`` is
        the name ``source`` defines (``self.helpers`` is keyed by the names defined)."""
        self.helpers.setdefault(name, source.strip())
        return name

    def tensor_param(self, index: int) -> str:
        return self.tensor_names[index]

    def descriptor(self, key: tuple, make: Callable[[str], str], hint: str) -> str:
        """A tensor descriptor created once at the start of the kernel."""
        name = self.descriptors.get(key)
        if name is None:
            name = self.fresh(hint)
            self.emit_prologue(f"{name} = {make(name)}")
            self.descriptors[key] = name
        return name

    def bound(self, bound: Any) -> str:
        """A loop bound in kernel code, in the index dtype."""
        if isinstance(bound, Value):
            return self.operand(bound, self.index_dtype)
        if isinstance(bound, RuntimeSize):
            return self._size_in_kernel(bound)
        return self.expr(bound)

    def loop_bounds(self, node: Node) -> tuple[list[Any], list[Any]]:
        """A loop's (begins, ends): ints that are tensor sizes become `RuntimeSize` arguments
        under ``static_shapes=False``; anything not an int takes the paths of runtime bounds."""
        blocks = node.attrs["block_ids"]
        begins = [
            self.sizes.extent(b, i) for b, i in zip(node.attrs["begins"], blocks, strict=True)
        ]
        ends = [self.sizes.extent(e, i) for e, i in zip(node.attrs["ends"], blocks, strict=True)]
        return begins, ends

    def extent_text(self, value: int) -> str:
        """A length in kernel code (a reduction dimension, the end of a slice): its size
        argument under ``static_shapes=False``, else the number."""
        return self._size_in_kernel(self.sizes.extent(value))

    def size_text(self, tensor: TensorArg, dim: int) -> str:
        return self._size_in_kernel(self.sizes.size(tensor, dim))

    def stride_text(self, tensor: TensorArg, dim: int) -> str:
        return self._size_in_kernel(self.sizes.stride(tensor, dim))

    def _size_in_kernel(self, item: RuntimeSize | int) -> str:
        """A size or stride in kernel code. Triton passes an int argument below 2**31 as int32:
        with 64-bit indexing each size argument is widened once at the kernel's start, so that
        products of sizes and loops bounded by them count in int64 as the numbers would."""
        text = self.sizes.text(item, self.tensor_names)
        if not isinstance(item, RuntimeSize) or self.index_dtype != torch.int64:
            return text
        wide = self._wide_sizes.get(text)
        if wide is None:
            wide = self.fresh(f"{text}_i64")
            self.emit_prologue(f"{wide} = tl.full([], {text}, tl.int64)")
            self._wide_sizes[text] = wide
        return wide

    def is_kernel_argument(self, expr: str) -> bool:
        """Is ``expr`` a scalar or size argument (defined before any statement)?"""
        return (
            expr in self.sizes.params()
            or expr in self._wide_sizes.values()
            or expr in {self.exprs.get(s.value.id) for s in self.ir.scalar_args}
        )

    # ------------------------------------------------------------------------------------------
    # nodes and blocks

    def emit_block(self, block: Block) -> None:
        skip, starts = looped.plan(self, block)
        for node in loads_first(block.nodes, fixed=skip | set(starts)):
            group = starts.get(id(node))
            if group is not None:
                looped.emit_group(self, group, block)
            elif id(node) not in skip:
                self.emit_node(node)

    def emit_node(self, node: Node) -> None:
        op = node.op
        if op is ops.tile_loop:
            self._emit_tile_loop(node)
            return
        if op is ops.if_:
            self._emit_if(node)
            return
        if op is ops.grid_loop:
            raise self.unsupported("a grid loop nested inside device code", node)
        rule = self.lowerings.get(op)
        if rule is None:
            raise self.unsupported(op.name, node)
        previous, self.node = self.node, node
        try:
            result = rule(self, node)
        except exc.BaseError:
            raise
        except Exception as error:
            raise exc.InternalError(
                f"the triton lowering of {op.name} failed: {type(error).__name__}: {error}",
                loc=node.loc,
            ) from error
        finally:
            self.node = previous
        self._bind(node, result)

    def _bind(self, node: Node, result: Any) -> None:
        if not node.outputs:
            if result:
                self.emit(result)
            return
        if result is None:
            raise exc.InternalError(
                f"the triton lowering of {node.op.name} produced no value", loc=node.loc
            )
        if isinstance(result, tuple):
            # one expression per output (sort: values and indices); None for an unused output
            for out, part in zip(node.outputs, result, strict=True):
                if part is not None:
                    self.exprs[out.id] = self.assign(_strip_parens(part), out.name_hint)
            return
        out = node.outputs[0]
        self.exprs[out.id] = self.assign(_strip_parens(result), out.name_hint)
        if node.op.memory == "load" or (
            node.op is ops.cast
            and node.inputs
            and node.inputs[0].__class__ is Value
            and node.inputs[0].id in self.zero_lanes
        ):
            self.zero_lanes.add(out.id)

    # ------------------------------------------------------------------------------------------
    # inner loops and branches

    def _emit_tile_loop(self, node: Node) -> None:
        loop = self.analysis.loop_of_node[id(node)]
        index = self.analysis.inner_loop_index.get(loop.loop_id)
        block_ids = list(node.attrs["block_ids"])
        body = node.regions[0]
        n_tiles = len(block_ids)
        carried = []
        for init, arg in zip(node.inputs, body.args[n_tiles:], strict=False):
            name = self.fresh(arg.name_hint)
            self.emit(f"{name} = {self.expr(init)}")
            carried.append(name)
            self.exprs[arg.id] = name
        order = self.options.loop_order(
            self.analysis.multi_dim_loop_index.get(loop.loop_id), n_tiles
        )
        kwargs = TritonOptions.item(self.options.range_options, index, {})
        static = TritonOptions.item(
            self.options.static_ranges, index, False
        ) and self._short_static(node)
        depth = self.depth
        saved = self._push_tiles()
        begins, ends = self.loop_bounds(node)
        for position, dim in enumerate(reversed(order)):
            block_id = block_ids[dim]
            begin = self.bound(begins[dim])
            end = self.bound(ends[dim])
            if not _IDENTIFIER.match(begin) and not begin.lstrip("-").isdigit():
                begin = self.assign(begin, f"begin_{block_id}")
            if not _IDENTIFIER.match(end) and not end.lstrip("-").isdigit():
                end = self.assign(end, f"end_{block_id}")
            step = self._step_str(block_id, node.attrs["is_grid"])
            offset = self.fresh(f"offset_{block_id}")
            if static:
                header = f"for {offset} in tl.static_range({begin}, {end}, {step}):"
            else:
                extra = (
                    "".join(f", {k}={literal(v)}" for k, v in kwargs.items())
                    if position == 0
                    else ""
                )
                header = f"for {offset} in tl.range({begin}, {end}, {step}{extra}):"
            self.emit(header)
            self.depth += 1
            offset_dtype = (
                torch.int32
                if all(isinstance(b, int) for b in (begins[dim], ends[dim]))
                else self.index_dtype
            )
            if offset_dtype != self.index_dtype or (self.target.interpret and not static):
                # the loop variable is an int32 (a plain int in the interpreter): retype it once
                offset = self.assign(
                    f"tl.full([], {offset}, {self.tl(self.index_dtype)})", f"offset_{block_id}"
                )
                offset_dtype = self.index_dtype
            tile = self._tile_from_offset(
                block_id,
                offset,
                begin,
                end,
                node.attrs["is_grid"],
                offset_dtype,
                static_bounds=(begins[dim], ends[dim]),
            )
            self._bind_tile(body.args[dim], tile)
        self.emit_block(body)
        for name, result in zip(carried, body.yields, strict=False):
            value = self.expr(result)
            if value != name:
                self.emit(f"{name} = {value}")
        if not body.nodes and not carried:
            self.emit("pass")
        self.depth = depth
        self._pop_tiles(saved)
        for out, name in zip(node.outputs, carried, strict=False):
            self.exprs[out.id] = name

    def _short_static(self, node: Node) -> bool:
        begins, ends = self.loop_bounds(node)
        if not all(isinstance(b, int) for b in (*begins, *ends)):
            return False
        iterations = 1
        for block_id, begin, end in zip(node.attrs["block_ids"], begins, ends, strict=False):
            step = 1 if node.attrs["is_grid"] else self.real_block[block_id]
            iterations *= max(math.ceil((end - begin) / step), 0)
        return iterations <= MAX_STATIC_RANGE_ITERATIONS

    def _emit_if(self, node: Node) -> None:
        cond = node.inputs[0]
        cond_expr = self.expr(cond)
        if self.dtype_of(cond) not in (torch.bool, None):
            cond_expr = f"{cond_expr} != 0"
        outputs = [self.fresh(out.name_hint) for out in node.outputs]
        for keyword_, region in zip(("if", "else"), node.regions, strict=False):
            self.emit(f"if {cond_expr}:" if keyword_ == "if" else "else:")
            saved = dict(self.exprs)
            with self.indented():
                self.emit_block(region)
                for name, result in zip(outputs, region.yields, strict=False):
                    self.emit(f"{name} = {self.expr(result)}")
            self.exprs = saved
        for out, name in zip(node.outputs, outputs, strict=False):
            self.exprs[out.id] = name

    # ------------------------------------------------------------------------------------------
    # tiles

    def _step_str(self, block_id: int, is_grid: bool) -> str:
        info = self.ir.block(block_id)
        if is_grid or info.kind == "grid":
            return "1"
        if info.kind == "tile":
            self.used_constexprs.add(info.symbol.name)
            return info.symbol.name
        return str(self.real_block[block_id])

    def _tile_from_offset(
        self,
        block_id: int,
        offset: str,
        begin: str,
        end: str,
        is_grid: bool,
        offset_dtype: torch.dtype | None,
        static_bounds: tuple[Any, Any],
    ) -> TileVars:
        info = self.ir.block(block_id)
        step = self._step_str(block_id, is_grid)
        if is_grid or info.kind == "grid":
            return TileVars(
                block_id, offset, None, None, begin, end, "1", True, offset_dtype, offset_dtype
            )
        extent = self.block_value[block_id]
        real = self.real_block[block_id]
        extent_str = self.dim_str(info.symbol)
        index = self.fresh(f"indices_{block_id}")
        index_expr = f"{offset} + tl.arange(0, {extent_str})"
        index_dtype = offset_dtype
        if offset_dtype != self.index_dtype:
            index_expr = f"({index_expr}).to({self.tl(self.index_dtype)})"
            index_dtype = self.index_dtype
        self.emit(f"{index} = {index_expr}")
        parts = []
        lo, hi = static_bounds
        if isinstance(lo, int) and isinstance(hi, int):
            exact = (hi - lo) % real == 0
        else:
            exact = self.always_multiple(lo, real) and self.always_multiple(hi, real)
        if not exact:
            parts.append(f"({index} < {end})" if extent != real else f"{index} < {end}")
        if extent != real:
            parts.append(f"(tl.arange(0, {extent_str}) < {real})")
        mask = None
        if parts:
            mask = self.fresh(f"mask_{block_id}")
            self.emit(f"{mask} = {' & '.join(parts)}")
        return TileVars(
            block_id,
            offset,
            index,
            mask,
            begin,
            end,
            step,
            False,
            offset_dtype,
            index_dtype,
            bounds=static_bounds,
        )

    def always_multiple(self, bound: Any, step: int) -> bool:
        """Is the loop bound ``bound`` (an int or an IR value) a multiple of ``step`` on every
        program? Besides constants this knows ``tile.begin`` and ``tile.end`` of an enclosing
        tile whose block size and bounds are multiples of ``step``: the key loop of causal
        attention, ``hl.tile(0, tile_m.end)``, then runs on full tiles and needs no masks."""
        if isinstance(bound, (int, sympy.Integer)):
            return int(bound) % step == 0
        producer = getattr(bound, "producer", None)
        if producer is None or producer.op not in (ops.TILE_ATTRS["begin"], ops.TILE_ATTRS["end"]):
            return False
        block_id = producer.attrs["block_id"]
        # the tile itself, not the block's latest one: an inner loop may share its block size
        if producer.inputs and isinstance(producer.inputs[0], Value):
            tile = self.tiles_by_value.get(producer.inputs[0].id)
        else:
            tile = self.tiles_by_block.get(block_id)
        if tile is None or tile.bounds is None or self.ir.block(block_id).kind == "grid":
            return False
        lo, hi = tile.bounds
        if self.real_block[block_id] % step or not self.always_multiple(lo, step):
            return False
        # tile.end is min(begin + block, end): the loop's end must be a multiple too
        return producer.op is ops.TILE_ATTRS["begin"] or self.always_multiple(hi, step)

    def _push_tiles(self) -> tuple[dict, dict]:
        return dict(self.tiles_by_block), dict(self.tiles_by_value)

    def _pop_tiles(self, saved: tuple[dict, dict]) -> None:
        self.tiles_by_block, self.tiles_by_value = saved

    def _bind_tile(self, arg: Value, tile: TileVars) -> None:
        self.tiles_by_block[tile.block_id] = tile
        self.tiles_by_value[arg.id] = tile

    # ------------------------------------------------------------------------------------------
    # the kernel

    def generate(self, config_repr: str = "") -> GeneratedKernel:
        ir = self.ir
        kernel_name = self.fresh(f"_helion_{ir.name}")
        self.launcher_name = self.fresh(ir.name)
        params: list[str] = []
        for arg in ir.tensor_args:
            name = self.fresh(arg.name)
            self.tensor_names[arg.index] = name
            params.append(name)
        scalar_params = []
        for scalar in ir.scalar_args:
            name = self.fresh(scalar.name)
            scalar_params.append((scalar, name))
            params.append(name)
        for scalar, name in scalar_params:
            self.scalar_param_names[scalar.value.id] = name
            var = self.fresh(f"{scalar.name}_value")
            self.emit_prologue(f"{var} = tl.full([], {name}, {self.tl(scalar.dtype)})")
            self.exprs[scalar.value.id] = var
        for info in ir.reduction_blocks():
            if info.block_id in self.looped:
                continue
            index = self.fresh(f"rindex_{info.block_id}")
            self.emit_prologue(f"{index} = tl.arange(0, {info.symbol.name})")
            mask = None
            size = self.rdim_size(info)  # 0: one lane, masked off
            if size != next_power_of_2(size):
                mask = self.fresh(f"rmask_{info.block_id}")
                self.emit_prologue(f"{mask} = {index} < {self.extent_text(size)}")
            self.rdims[info.block_id] = RdimVars(index, mask, "0")
            self.used_constexprs.add(info.symbol.name)

        from helion_triton.dispatch import emit_dispatch

        grid, barrier = emit_dispatch(self)
        size_params = self.sizes.params()
        params += size_params
        constexprs = []
        constexpr_values = []
        for info in ir.block_sizes:
            if info.kind == "grid" or info.symbol.name not in self.used_constexprs:
                continue
            constexprs.append(f"{info.symbol.name}: tl.constexpr")
            constexpr_values.append(f"{info.symbol.name}={self.block_value[info.block_id]}")
        signature = ", ".join(params + self.extra_params + constexprs)
        decorator = "@triton.jit"
        unspecialized = [name for _, name in scalar_params]
        if getattr(self.settings, "triton_do_not_specialize", False):
            unspecialized += size_params
        if unspecialized:
            names = ", ".join(repr(name) for name in unspecialized)
            decorator = f"@triton.jit(do_not_specialize=[{names}])"

        out: list[str] = [f"# generated by helion-triton for kernel {ir.name!r}"]
        if config_repr:
            out.append(f"# {config_repr}")
        out += ["import torch", "import triton", "import triton.language as tl"]
        if self.uses_libdevice:
            out.append("from triton.language.extra import libdevice")
        out.append("")
        for source in self.helpers.values():
            out += ["", source, ""]
        # helpers keep the fixed names they were added under while the body was generated; a
        # kernel named like one (`def expm1` next to the `_helion_expm1` helper) is renamed
        while kernel_name in self.helpers:
            kernel_name = self.fresh(kernel_name)
        out += ["", decorator, f"def {kernel_name}({signature}):"]
        out += self.prologue
        out += self.lines
        if not self.prologue and not self.lines:
            out.append("    pass")
        launcher_name, launcher, plan = self._launcher(
            kernel_name, params, constexpr_values, grid, barrier
        )
        out += ["", "", *launcher]
        return GeneratedKernel(
            source="\n".join(out) + "\n",
            kernel_name=kernel_name,
            launcher_name=launcher_name,
            uses_tensor_descriptors=bool(self.descriptors),
            uses_barrier=barrier,
            launch_plan=plan,
        )

    def _launcher(
        self, kernel_name: str, params: list[str], constexprs: list[str], grid: str, barrier: bool
    ) -> tuple[str, list[str], LaunchPlan | None]:
        ir = self.ir
        launcher_name = self.launcher_name
        host_names: dict[int, str] = {}
        for arg in ir.tensor_args:
            host_names[arg.index] = self.tensor_names[arg.index]
        for scalar, name in zip(ir.scalar_args, params[len(ir.tensor_args) :], strict=False):
            host_names[scalar.index] = name
        count = max(host_names, default=-1) + 1
        positional = [host_names.get(i, f"_unused_{i}") for i in range(count)]
        lines = [f"def {launcher_name}({', '.join([*positional, '*_rest'])}):"]
        prelude = tuple(self.sizes.launcher_lines(self.tensor_names))
        lines += [f"    {line}" for line in prelude]
        args = list(params)
        if barrier and self.barrier_param is not None:
            device_of = self.tensor_names[ir.tensor_args[0].index]
            lines.append(
                f"    {self.barrier_param} = torch.zeros([1], dtype=torch.int32, device={device_of}.device)"
            )
            args.append(self.barrier_param)
        launch_options = [
            f"num_warps={self.options.num_warps}",
            f"num_stages={self.options.num_stages}",
        ]
        if self.options.maxnreg is not None and self.target.is_cuda:
            launch_options.append(f"maxnreg={self.options.maxnreg}")
        call_args = ", ".join(args + constexprs + launch_options)
        dims = [d.strip() for d in grid.strip("()").split(",") if d.strip()]
        plan: LaunchPlan | None = None
        if all(d.isdigit() for d in dims):
            if all(int(d) > 0 for d in dims):
                lines.append(f"    {kernel_name}[{grid}]({call_args})")
                plan = LaunchPlan(
                    tuple(positional),
                    tuple(args),
                    grid,
                    len(dims),
                    tuple(int(d) for d in dims),
                    prelude,
                )
            else:
                lines.append("    pass  # nothing to launch: the loops are empty")
        else:
            # the grid depends on runtime arguments: an empty one launches nothing
            grid_name = self.fresh("launch_grid")
            lines.append(f"    {grid_name} = {grid}")
            lines.append(f"    if min({grid_name}) > 0:")
            lines.append(f"        {kernel_name}[{grid_name}]({call_args})")
            rank = len(ast.parse(grid, mode="eval").body.elts)  # dims may hold commas: cdiv(n, 8)
            plan = LaunchPlan(tuple(positional), tuple(args), grid, rank, None, prelude)
        if barrier and self.barrier_param is not None:
            plan = None
        return launcher_name, lines, plan

    def host_bound(self, bound: Any) -> str | None:
        """A top-level loop bound in launcher code (None when only the device knows it)."""
        if isinstance(bound, Value):
            return self.scalar_param_names.get(bound.id)
        if isinstance(bound, RuntimeSize):  # bound by the launcher's prelude
            return self.sizes.text(bound, self.tensor_names)
        return self.expr(bound)
