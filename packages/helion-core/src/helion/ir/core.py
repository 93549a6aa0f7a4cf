"""Kernel IR: typed SSA values, nodes with structured regions, and the kernel container.

Shapes are tuples of sympy expressions: integers for problem sizes (specialized at trace time),
block-size symbols for tile dimensions and reduction-dimension symbols for full slices.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING
from typing import Any
from typing import Iterator
from typing import Sequence

import sympy
import torch

if TYPE_CHECKING:
    from helion.exc import SourceLocation
    from helion.language._ops import Op

_value_ids = itertools.count()


@dataclasses.dataclass(frozen=True)
class TensorType:
    """A device value: a (possibly 0-D) tensor held in registers."""

    shape: tuple[sympy.Expr, ...]
    dtype: torch.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"{_dtype_name(self.dtype)}[{dims}]"


@dataclasses.dataclass(frozen=True)
class TileType:
    """The loop variable of an `hl.tile` / `hl.grid` dimension."""

    block_id: int
    is_grid: bool = False

    def __str__(self) -> str:
        return f"{'grid' if self.is_grid else 'tile'}<{self.block_id}>"


IRType = TensorType | TileType


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class Value:
    """One SSA value. `producer` is the node that defines it (None for block arguments)."""

    __slots__ = ("id", "name_hint", "producer", "type")

    def __init__(self, type: IRType, name_hint: str = "v") -> None:
        self.id = next(_value_ids)
        self.type = type
        self.producer: Node | None = None
        self.name_hint = name_hint

    @property
    def shape(self) -> tuple[sympy.Expr, ...]:
        assert isinstance(self.type, TensorType), self.type
        return self.type.shape

    @property
    def dtype(self) -> torch.dtype:
        assert isinstance(self.type, TensorType), self.type
        return self.type.dtype

    def __repr__(self) -> str:
        return f"%{self.name_hint}{self.id}"


# An operand is an SSA value or a compile-time constant (python scalar, sympy expression,
# dtype, string or a tuple of those).
Operand = Any


class Block:
    """A region: arguments, a list of nodes, and the values it yields to its parent."""

    __slots__ = ("args", "nodes", "yields")

    def __init__(self, args: Sequence[Value] = ()) -> None:
        self.args: list[Value] = list(args)
        self.nodes: list[Node] = []
        self.yields: list[Operand] = []

    def walk(self) -> Iterator[Node]:
        for node in self.nodes:
            yield node
            for region in node.regions:
                yield from region.walk()


class Node:
    """An operation: `op` applied to `inputs` with static `attrs`, defining `outputs`."""

    __slots__ = ("attrs", "inputs", "loc", "op", "outputs", "regions")

    def __init__(
        self,
        op: Op,
        inputs: Sequence[Operand],
        attrs: dict[str, Any],
        outputs: Sequence[Value],
        regions: Sequence[Block] = (),
        loc: SourceLocation | None = None,
    ) -> None:
        self.op = op
        self.inputs = list(inputs)
        self.attrs = attrs
        self.outputs = list(outputs)
        self.regions = list(regions)
        self.loc = loc
        for out in self.outputs:
            out.producer = self

    @property
    def output(self) -> Value:
        assert len(self.outputs) == 1, self
        return self.outputs[0]

    def __repr__(self) -> str:
        return f"Node({self.op.name}, outputs={self.outputs})"


@dataclasses.dataclass
class TensorArg:
    """A host tensor the device code reads or writes (a kernel argument)."""

    name: str
    index: int  # position in the launcher's host-value tuple
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"{self.name}: {_dtype_name(self.dtype)}[{dims}]"


@dataclasses.dataclass
class ScalarArg:
    """A host scalar passed at launch time (not baked into the code)."""

    name: str
    index: int
    dtype: torch.dtype
    value: Value  # the block argument of the kernel body that carries it

    def __str__(self) -> str:
        return f"{self.name}: {_dtype_name(self.dtype)}"


@dataclasses.dataclass
class BlockSizeInfo:
    """One block-size variable: a tiled dimension, a registered block size or a reduction dim.

    kind: "tile" (autotuned, an entry of Config.block_sizes), "fixed" (given as an int),
    "grid" (hl.grid, block size 1), "reduction" (a full-slice dim, tuned by reduction_loops).
    """

    block_id: int
    kind: str
    size_hint: int  # extent of the dimension at trace time
    symbol: sympy.Symbol
    fixed_value: int | None = None
    min_size: int = 1
    max_size: int | None = None
    config_index: int | None = None  # index into block_sizes / reduction_loops
    loc: SourceLocation | None = None
    used_in_dot: bool = False
    # a reduction dim of a `:` slice of length 0: size_hint is 1 (block sizes are positive),
    # the real extent 0; backends hold it as one lane, masked off
    empty: bool = False


@dataclasses.dataclass
class LoopInfo:
    """One `hl.tile` / `hl.grid` call: the dims it iterates and where it sits."""

    loop_id: int
    block_ids: list[int]
    top_level: bool
    node: Node | None = None
    loc: SourceLocation | None = None


@dataclasses.dataclass
class MemoryOpInfo:
    kind: str  # "load" | "store" | "atomic"
    node: Node
    tensor: TensorArg


class KernelIR:
    """Everything a backend needs to generate code for one bound kernel."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tensor_args: list[TensorArg] = []
        self.scalar_args: list[ScalarArg] = []
        self.block_sizes: list[BlockSizeInfo] = []
        self.loops: list[LoopInfo] = []
        self.body = Block()
        self.index_dtype: torch.dtype = torch.int32
        self.host_tunables: dict[str, Any] = {}
        self.filename: str = "<unknown>"
        self.uses_barrier = False
        # the kernel's Settings (backends read e.g. dot_precision); None outside a BoundKernel
        self.settings: Any = None
        # (tensor guards, constant guards): the host values this trace is valid for
        self.guards: tuple[list, list] = ([], [])
        # (index in the host values, `helion.containers.container_structure`) of each container
        # host value: `lifted` indexes into them, so a launch needs containers of these shapes
        self.structure_guards: list[tuple[int, Any]] = []
        # tensors captured by callable arguments: (kind, input position, key) and their args
        self.lifted: list[tuple] = []
        self.lifted_args: list[TensorArg] = []
        # the seed of torch.rand & co. in device code: a scalar argument (last in the host values)
        # that each launch draws from torch's CPU generator (helion.language.philox.draw_call_seed)
        self.rng_seed: ScalarArg | None = None

    def block(self, block_id: int) -> BlockSizeInfo:
        return self.block_sizes[block_id]

    def walk(self) -> Iterator[Node]:
        yield from self.body.walk()

    def memory_ops(self) -> list[MemoryOpInfo]:
        """Loads, stores and atomics in program order (the order of Config.indexing)."""
        ops = []
        for node in self.walk():
            if node.op.memory:
                ops.append(MemoryOpInfo(node.op.memory, node, node.attrs["tensor"]))
        return ops

    def tunable_blocks(self) -> list[BlockSizeInfo]:
        return [b for b in self.block_sizes if b.kind == "tile"]

    def reduction_blocks(self) -> list[BlockSizeInfo]:
        return [b for b in self.block_sizes if b.kind == "reduction"]

    def empty_reduction_blocks(self) -> frozenset[int]:
        """The block ids of the reduction dims of `:` slices of length 0."""
        return frozenset(b.block_id for b in self.block_sizes if b.empty)

    def inner_loops(self) -> list[LoopInfo]:
        return [loop for loop in self.loops if not loop.top_level]

    def top_level_loops(self) -> list[LoopInfo]:
        return [loop for loop in self.loops if loop.top_level]

    def __str__(self) -> str:
        from helion.ir.printer import format_ir

        return format_ir(self)


# -- empty dimensions: what every backend asks of loops and accesses over a size-0 dim ------------


_INT32_MAX = 2**31 - 1


def index_extent(tensor: torch.Tensor) -> int:
    """How far from its first element an access of ``tensor`` reaches: one past its largest
    element offset (its numel when it is contiguous; more for a strided view of a larger
    buffer, whose offsets are what the index arithmetic computes)."""
    if tensor.numel() == 0:
        return 0
    pairs = zip(tensor.shape, tensor.stride(), strict=True)
    reach = sum((size - 1) * abs(stride) for size, stride in pairs)
    return max(reach + 1, tensor.numel())


def index_dtype_for(requested: torch.dtype | None, numel: int) -> torch.dtype:
    """The dtype of a kernel's index arithmetic (``Settings.index_dtype``): ``requested``, or
    when it is None int32 unless a tensor of ``numel`` elements needs int64. An int32 request
    for a tensor whose offsets do not fit raises ``InputTensorNumelExceedsIndexType``."""
    if requested is None:
        return torch.int64 if numel > _INT32_MAX else torch.int32
    if requested == torch.int32 and numel > _INT32_MAX:
        from helion import exc

        raise exc.InputTensorNumelExceedsIndexType(str(requested), numel)
    return requested


def computed_from(value: Value, ops: Any, depth: int = 8) -> bool:
    """Whether ``value`` is computed, within ``depth`` producing ops, by one of ``ops`` (a
    collection of `Op`): e.g. from a tile's block size, or from a loop's positions."""
    producer = value.producer
    if producer is None or depth == 0:
        return False
    if producer.op in ops:
        return True
    return any(isinstance(v, Value) and computed_from(v, ops, depth - 1) for v in producer.inputs)


def static_int(bound: Any) -> int | None:
    """A loop bound's value when it is known at trace time (an int or an integer sympy
    expression), else None (a run-time value)."""
    if isinstance(bound, bool):
        return None
    if isinstance(bound, int):
        return bound
    if isinstance(bound, sympy.Expr) and bound.is_Integer:
        return int(bound)
    return None


def runs_no_iteration(loop: Node) -> bool:
    """Whether a tile or grid loop has a dimension whose static bounds hold no index
    (``hl.tile(k)`` of a dimension of size 0): the loop runs zero times, and a backend may emit
    neither it nor its body."""
    for begin, end in zip(loop.attrs["begins"], loop.attrs["ends"], strict=True):
        low, high = static_int(begin), static_int(end)
        if low is not None and high is not None and high <= low:
            return True
    return False


def addresses_no_element(node: Node) -> bool:
    """Whether a memory op addresses no element: one of its items is a `:` slice of length 0,
    or its tensor has none (``x[tm, tk]`` of an ``x`` of shape (37, 0), in a loop whose bounds
    are only known at run time). A load of one is a fill, a store or atomic does nothing."""
    if 0 in node.attrs["tensor"].shape:
        return True
    return any(item[0] == "full" and int(item[2]) == 0 for item in node.attrs.get("items") or ())
