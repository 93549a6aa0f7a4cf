"""Proxy values that device code runs on while it is traced into IR.

- `DeviceValue`: a tensor (possibly 0-D) in registers; torch functions and tensor methods on it
  go through the torch table (`torch_table.py`).
- `HostTensor`: a kernel tensor argument; subscripting it is a load or a store.
- `TileProxy`: the loop variable of `hl.tile` / `hl.grid`.
- `SymDim`: an int that also remembers which symbolic dimension it is (sizes of full slices).
"""

from __future__ import annotations

import dis
import sys
from typing import TYPE_CHECKING
from typing import Any

import sympy
import torch

from helion import exc
from helion.ir.core import TensorArg
from helion.ir.core import TensorType
from helion.ir.core import TileType
from helion.ir.core import Value
from helion.ir.core import computed_from
from helion.language import _ops as ops

if TYPE_CHECKING:
    from helion.frontend.tracer import Tracer


#: the opcodes of `a[b]` and `a[b] = c` (DeviceValue.__len__)
_SUBSCRIPT_OPCODES = frozenset(
    dis.opmap[name] for name in ("BINARY_SUBSCR", "STORE_SUBSCR") if name in dis.opmap
)


class SymDim(int):
    """The concrete extent of a dimension that has a symbol (e.g. a reduction dim of size n)."""

    expr: sympy.Expr

    def __new__(cls, value: int, expr: sympy.Expr) -> SymDim:
        self = super().__new__(cls, value)
        self.expr = expr
        return self


class BlockSizeInt(int):
    """What `hl.register_block_size` returns in host code: the config's value, plus its block id
    so that device code (`hl.tile(n, block_size=bs)`, `hl.zeros([bs])`) can share it."""

    block_id: int

    def __new__(cls, value: int, block_id: int) -> BlockSizeInt:
        self = super().__new__(cls, value)
        self.block_id = block_id
        return self


class SizeInt(int):
    """An int of device code computed from registered block sizes (`bk * 2` for
    `bk = hl.register_block_size(...)`): the config's value, which the trace computes with as
    with any int, plus its expression over block-size symbols (`2*_BLOCK_SIZE_0`), which makes
    it the same size as `tk.block_size * 2` in shapes (`hl.zeros`, `reshape`, `hl.arange`) and
    in the length of a slice.

    `+`, `-` and `*` with ints (or other SizeInts) and `//` by an int that divides the expression
    exactly keep the expression; any other operation gives a plain int or float, as on an int.
    Host code never sees one: device code gets a `TracedBlockSize` for each BlockSizeInt it
    reads, and its arithmetic makes them."""

    expr: sympy.Expr

    def __new__(cls, value: int, expr: sympy.Expr) -> SizeInt:
        self = super().__new__(cls, value)
        self.expr = expr
        return self

    def __reduce__(self) -> tuple:
        return (int, (int(self),))  # a copy is the plain int (the expression is for tracing)

    def __neg__(self) -> SizeInt:
        return SizeInt(-int(self), -self.expr)

    def __pos__(self) -> SizeInt:
        return self


def _size_operand(other: Any) -> sympy.Expr | None:
    """The expression of an int operand of a SizeInt operator (None: not an int)."""
    if isinstance(other, SYMBOLIC_INTS):
        return other.expr
    if isinstance(other, int) and not isinstance(other, bool):
        return sympy.Integer(other)
    return None


def exact_floordiv(numerator: sympy.Expr, divisor: sympy.Expr) -> sympy.Expr | None:
    """`numerator // divisor` for an int `divisor` where it divides every coefficient of
    `numerator` (so the division is exact for every value of its symbols), else None."""
    if not divisor.is_Integer or divisor == 0:
        return None
    if numerator.is_Integer:
        return sympy.Integer(int(numerator) // int(divisor))
    quotient = sympy.expand(numerator / divisor)
    if all(c.is_Integer for c in quotient.as_coefficients_dict().values()):
        return quotient
    return None


def _size_int_operator(name: str, combine: Any, reflected: bool = False) -> Any:
    plain = getattr(int, name)

    def operator(self: Any, other: Any) -> Any:
        result = plain(self, other)
        other_expr = _size_operand(other)
        if other_expr is None or not isinstance(result, int):
            return result  # NotImplemented for a device value: its reflected operator runs
        expr = combine(other_expr, self.expr) if reflected else combine(self.expr, other_expr)
        return result if expr is None else SizeInt(result, expr)

    operator.__name__ = name
    return operator


class TracedBlockSize(BlockSizeInt):
    """A `hl.register_block_size` value as device code sees it: a BlockSizeInt (loops share
    it) whose arithmetic keeps its symbol, as a SizeInt's does (`bk * 2` is a SizeInt)."""

    expr: sympy.Expr

    def __new__(cls, value: int, block_id: int, expr: sympy.Expr) -> TracedBlockSize:
        self = int.__new__(cls, value)
        self.block_id = block_id
        self.expr = expr
        return self

    def __reduce__(self) -> tuple:
        return (int, (int(self),))

    def __neg__(self) -> SizeInt:
        return SizeInt(-int(self), -self.expr)


#: the ints of device code that carry a size expression (`.expr`)
SYMBOLIC_INTS = (SizeInt, TracedBlockSize)

for _name, _combine in (
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: sympy.expand(a * b)),
    ("floordiv", exact_floordiv),
):
    for _cls in SYMBOLIC_INTS:
        setattr(_cls, f"__{_name}__", _size_int_operator(f"__{_name}__", _combine))
        setattr(_cls, f"__r{_name}__", _size_int_operator(f"__r{_name}__", _combine, True))


def _torch_dispatch(tracer: Tracer, func: Any, args: tuple, kwargs: dict | None) -> Any:
    return tracer.call_torch(func, args, kwargs or {})


class DeviceValue:
    __slots__ = ("tracer", "value")

    def __init__(self, tracer: Tracer, value: Value) -> None:
        self.tracer = tracer
        self.value = value

    # -- torch protocol ------------------------------------------------------------------------
    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        tracer = _find_tracer(args, kwargs)
        return _torch_dispatch(tracer, func, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        method = getattr(torch.Tensor, name, None)
        if method is None:
            # an AttributeError still (hasattr works); the tracer adds the kernel's line
            raise exc.DeviceAttributeError(
                "A device tensor", name, " (it has the attributes and methods of torch.Tensor)"
            )
        tracer = self.tracer

        def bound(*args: Any, **kwargs: Any) -> Any:
            return tracer.call_torch(method, (self, *args), kwargs)

        return bound

    # -- metadata ------------------------------------------------------------------------------
    @property
    def dtype(self) -> torch.dtype:
        return self.value.dtype

    @property
    def ndim(self) -> int:
        return len(self.value.shape)

    def dim(self) -> int:
        return self.ndim

    @property
    def shape(self) -> tuple:
        return tuple(self.tracer.dim_size(d) for d in self.value.shape)

    def size(self, dim: int | None = None) -> Any:
        shape = self.shape
        return shape if dim is None else shape[dim]

    @property
    def device(self) -> torch.device:
        return self.tracer.device

    @property
    def T(self) -> DeviceValue:
        return self.tracer.call_torch(torch.Tensor.t, (self,), {})

    def __len__(self) -> int:
        caller = sys._getframe(1)
        if caller.f_code.co_code[caller.f_lasti] in _SUBSCRIPT_OPCODES:
            # torch indexing a tensor with this value (`w[h]`, `w` captured by a callable
            # argument) asks whether it is a sequence of indices before it dispatches to
            # __torch_function__; with a length it would iterate it instead
            raise TypeError("a device tensor index is not a sequence of indices")
        first = self.shape[0]
        if isinstance(first, int):
            return first
        raise exc.TypeInferenceError("len() of a tile-shaped device tensor is not a constant")

    def __bool__(self) -> bool:
        what = "a device tensor" if self.ndim else "a device scalar"
        if computed_from(self.value, {ops.TILE_ATTRS["block_size"]}):
            what += (
                " computed from a block size (a tile's size, e.g. `v.shape[0]` of a tile: the "
                "config chooses it, so it is not a Python int while the kernel is traced)"
            )
        raise exc.TypeInferenceError(
            f"the truth value of {what} is only known on the device; `assert`, `and` / `or` / "
            "`not` outside an `if` test, `x if c else y`, `while`, and Python's max() / min() "
            "in a helper function "
            "(only the kernel's own body has them rewritten) need a Python bool while the "
            "kernel is traced",
            hint="Use torch.where(...) for lanes, torch.maximum / torch.clamp_min (and the "
            "min forms) in helpers, or an `if` statement on a 0-D value (a branch taken on the "
            "device).",
        )

    def __iter__(self):
        raise exc.TypeInferenceError("cannot iterate over a device tensor; use hl.tile / hl.grid")

    def __index__(self) -> int:
        raise exc.TypeInferenceError(
            "a device value cannot be used where a Python int is needed",
            loc=self.tracer.current_loc(),
        )

    def __float__(self) -> float:
        # what math.exp(tile_value) and float(...) ask for (without it they ask for __index__)
        raise exc.TypeInferenceError(
            "a device value cannot be used where a Python float is needed (math functions and "
            "float() read a number on the host while the kernel is traced)",
            loc=self.tracer.current_loc(),
            hint="Use the torch function on device values, e.g. torch.exp(x) for math.exp(x).",
        )

    def __getitem__(self, index: Any) -> Any:
        return self.tracer.subscript(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise exc.DeviceTensorSubscriptAssignmentNotAllowed(loc=self.tracer.current_loc())

    def __repr__(self) -> str:
        return f"DeviceValue({self.value!r}: {self.value.type})"

    __hash__ = object.__hash__


def _make_operator(method_name: str):
    """A Python operator of a proxy (a device value, a tensor argument) as its torch.Tensor
    method through the torch table, which also refuses what a proxy cannot be used for."""
    method = getattr(torch.Tensor, method_name)
    reflected = _REFLECTED.get(method_name)

    def operator(self: Any, *args: Any) -> Any:
        tracer = self.tracer
        if reflected is not None and _eager_number_beside_tensor(tracer, self, args):
            # `s * x` for a scalar argument `s`: a Python number in eager code, where Python
            # calls the tensor's reflected method (`x.__rmul__(s)` is `x * s`, which reads s
            # unrounded; `x.__rtruediv__(s)` is `x.reciprocal() * s`)
            return tracer.call_torch(reflected, (args[0], self), {})
        return tracer.call_torch(method, (self, *args), {})

    operator.__name__ = method_name
    return operator


# the arithmetic operators whose reflected method torch defines differently from the forward
# one with swapped operands
_REFLECTED = {
    name: getattr(torch.Tensor, name.replace("__", "__r", 1))
    for name in (
        "__add__",
        "__sub__",
        "__mul__",
        "__truediv__",
        "__floordiv__",
        "__mod__",
        "__pow__",
    )
}


def _eager_number_beside_tensor(tracer: Any, self: Any, args: tuple) -> bool:
    """Whether ``self`` is a Python number in eager code (`helion.ir.host_scalars`) and the
    other operand a tensor that is not."""
    from helion.ir.host_scalars import value_is_host_scalar

    if len(args) != 1 or not isinstance(self, DeviceValue):
        return False
    other = args[0]
    if isinstance(other, HostTensor):
        return value_is_host_scalar(tracer.ir, self.value)
    if not isinstance(other, DeviceValue):
        return False
    return value_is_host_scalar(tracer.ir, self.value) and not value_is_host_scalar(
        tracer.ir, other.value
    )


_TENSOR_OPERATORS = [
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__truediv__",
    "__rtruediv__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__pow__",
    "__rpow__",
    "__matmul__",
    "__rmatmul__",
    "__and__",
    "__rand__",
    "__or__",
    "__ror__",
    "__xor__",
    "__rxor__",
    "__lshift__",
    "__rshift__",
    "__neg__",
    "__pos__",
    "__abs__",
    "__invert__",
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
]
for _name in _TENSOR_OPERATORS:
    setattr(DeviceValue, _name, _make_operator(_name))
DeviceValue.__hash__ = object.__hash__  # __eq__ is an op; identity hashing keeps dict use possible


class HostTensor:
    """A host tensor seen from device code. Only subscripting (load/store) and metadata work."""

    __slots__ = ("arg", "real", "tracer")

    def __init__(self, tracer: Tracer, arg: TensorArg, real: torch.Tensor) -> None:
        self.tracer = tracer
        self.arg = arg
        self.real = real

    @property
    def shape(self) -> torch.Size:
        return self.real.shape

    def size(self, dim: int | None = None) -> Any:
        return self.real.size() if dim is None else self.real.size(dim)

    def stride(self, dim: int | None = None) -> Any:
        return self.real.stride() if dim is None else self.real.stride(dim)

    def dim(self) -> int:
        return self.real.dim()

    @property
    def ndim(self) -> int:
        return self.real.ndim

    def numel(self) -> int:
        return self.real.numel()

    @property
    def dtype(self) -> torch.dtype:
        return self.real.dtype

    @property
    def device(self) -> torch.device:
        return self.real.device

    def __getitem__(self, index: Any) -> DeviceValue:
        return self.tracer.load(self, index, None, None)

    def __setitem__(self, index: Any, value: Any) -> None:
        self.tracer.store(self, index, value, None)

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        tracer = _find_tracer(args, kwargs)
        return _torch_dispatch(tracer, func, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        method = getattr(torch.Tensor, name, None)
        if method is None:
            raise exc.DeviceAttributeError(
                "A tensor argument", name, " (it has the attributes and methods of torch.Tensor)"
            )
        tracer = self.tracer

        def bound(*args: Any, **kwargs: Any) -> Any:
            return tracer.call_torch(method, (self, *args), kwargs)

        return bound

    def direct_use(self, what: str) -> exc.HostTensorDirectUsage:
        """The error for using this tensor argument as a value (`what` it was used for)."""
        if self.real.numel() == 1:
            index = "()" if self.real.ndim == 0 else ", ".join(["0"] * self.real.ndim)
            hint = (
                f"Read its value on the device first: {self.arg.name}[{index}] (an `if` on a "
                "one-element tensor argument reads it by itself)."
            )
        else:
            hint = f"Load a tile first: use {self.arg.name}[tile] instead of {self.arg.name}."
        return exc.HostTensorDirectUsage(
            f"{self.arg.name!r} ({what})", loc=self.tracer.current_loc(), hint=hint
        )

    def __len__(self) -> int:
        return len(self.real)  # metadata, as `x.shape[0]` (a 0-D tensor raises as in torch)

    def __bool__(self) -> bool:
        raise self.direct_use("its truth value")

    def __float__(self) -> float:
        raise self.direct_use("as a Python float")

    def __int__(self) -> int:
        raise self.direct_use("as a Python int")

    def __index__(self) -> int:
        raise self.direct_use("as a Python int")

    def __repr__(self) -> str:
        return f"HostTensor({self.arg})"


class TileProxy:
    """The loop variable of an `hl.tile` (or `hl.grid`, where it is a scalar index) dimension."""

    __slots__ = ("block_id", "tracer", "value")

    def __init__(self, tracer: Tracer, value: Value) -> None:
        assert isinstance(value.type, TileType)
        self.tracer = tracer
        self.value = value
        self.block_id = value.type.block_id

    def _attr(self, name: str) -> DeviceValue:
        return self.tracer.tile_attr(self, name)

    @property
    def index(self) -> DeviceValue:
        return self._attr("index")

    @property
    def begin(self) -> DeviceValue:
        return self._attr("begin")

    @property
    def end(self) -> DeviceValue:
        return self._attr("end")

    @property
    def block_size(self) -> DeviceValue:
        return self._attr("block_size")

    @property
    def id(self) -> DeviceValue:
        return self._attr("id")

    @property
    def count(self) -> DeviceValue:
        return self._attr("count")

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        tracer = _find_tracer(args, kwargs)
        return _torch_dispatch(tracer, func, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        # only for names that are not attributes (index, begin, ...); no slot is read here
        raise exc.DeviceAttributeError(
            "A tile",
            name,
            " (a tile has index, begin, end, block_size, id and count)",
        )

    def __iter__(self):
        raise exc.FailedToUnpackTile(loc=self.tracer.current_loc())

    def __bool__(self) -> bool:
        raise exc.IncorrectTileUsage("a tile used as a boolean", loc=self.tracer.current_loc())

    def __index__(self) -> int:
        raise exc.IncorrectTileUsage("a tile used as a Python int", loc=self.tracer.current_loc())

    def __repr__(self) -> str:
        return f"Tile({self.block_id})"


# arithmetic and ordering on a tensor argument (`s > 0`, `n + 1`) reach the torch table, which
# refuses the host tensor as a value, naming it and the line; `==` and `!=` keep identity
# semantics (proxies are compared and looked up in lists by the tracer)
_NOT_ON_HOST_TENSORS = {
    *("__eq__", "__ne__"),
    *("__matmul__", "__rmatmul__", "__lshift__", "__rshift__", "__pos__"),
}
for _name in _TENSOR_OPERATORS:
    if _name not in _NOT_ON_HOST_TENSORS:
        setattr(HostTensor, _name, _make_operator(_name))


def _tile_operator(method_name: str):
    def operator(self: TileProxy, *args: Any) -> Any:
        # tile arithmetic means arithmetic on its indices: `tile + 1` is `tile.index + 1`
        return getattr(self.index, method_name)(*args)

    operator.__name__ = method_name
    return operator


for _name in [
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__floordiv__",
    "__mod__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
]:
    setattr(TileProxy, _name, _tile_operator(_name))


def _find_tracer(args: Any, kwargs: Any) -> Tracer:
    stack = [args, kwargs]
    while stack:
        item = stack.pop()
        if isinstance(item, (DeviceValue, HostTensor, TileProxy)):
            return item.tracer
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    from helion.language._context import current_mode

    return current_mode()


def is_tensor_type(value: Value) -> bool:
    return isinstance(value.type, TensorType)
