"""The ref backend's lowering table: one eager-torch rule per op."""

from __future__ import annotations

import operator
from typing import Any
from typing import Callable
from typing import Sequence

import torch
import torch.nn.functional as F

from helion import exc
from helion.ir.host_scalars import is_host_scalar
from helion.language import _combine
from helion.language import _ops as ops
from helion.language import philox

REF_LOWERINGS: dict[ops.Op, Callable] = {}


def ref_lowering(*op_list: ops.Op) -> Callable:
    def decorator(rule: Callable) -> Callable:
        for op in op_list:
            if op in REF_LOWERINGS:
                raise ValueError(f"ref lowering for {op.name} registered twice")
            REF_LOWERINGS[op] = rule
        return rule

    return decorator


_merged: tuple[int, dict[ops.Op, Callable]] | None = None


def ref_lowerings() -> dict[ops.Op, Callable]:
    """The ref table plus the rules plugins contribute for their own ops through the
    ``helion_lowerings("ref")`` hook (e.g. helion-distributed's ``hl.signal``). Built at the
    first use and again only when the set of plugins changes; a rule for an op that already has
    one (in core or in another plugin) is an error."""
    global _merged
    from helion import plugins

    generation = plugins.generation()
    if _merged is not None and _merged[0] == generation:
        return _merged[1]
    table = dict(REF_LOWERINGS)
    owners: dict[ops.Op, str] = {}
    for result in plugins.call_each_plugin("helion_lowerings", backend="ref"):
        for op, rule in (result.value or {}).items():
            if op in table:
                first = owners.get(op, "helion-core")
                raise ValueError(
                    f"ref lowering for {op.name} is provided twice ({first} and {result.plugin.distribution or result.plugin.name})"
                )
            table[op] = rule
            owners[op] = result.plugin.distribution or result.plugin.name
    _merged = (plugins.generation(), table)
    return table


def _tensor(ex: Any, value: Any, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    return torch.tensor(value, dtype=dtype, device=ex.device)


# -- partial tiles -------------------------------------------------------------------------------
#
# Tiles run at their exact extent, but a value made where a tile is not running has the full
# block size (`acc = hl.zeros([tile_m, block])` before `for tile_n in hl.tile(n, block_size=block)`).
# Compiled code pads a partial tile's lanes: loads read 0 there and stores skip them. The ref
# backend does the same at the point where the two sizes meet.


def pad_partial_tiles(inputs: list) -> list:
    """Zero-pad the tensors of an elementwise op (or a dot and its accumulator) whose sizes
    differ along a dim (neither being 1) to the largest size there."""
    tensors = [x for x in inputs if isinstance(x, torch.Tensor) and x.ndim]
    if len(tensors) < 2:
        return inputs
    ndim = max(t.ndim for t in tensors)
    target = []
    for axis in range(ndim):
        sizes = {t.shape[axis - ndim + t.ndim] for t in tensors if axis - ndim + t.ndim >= 0} - {1}
        target.append(max(sizes) if sizes else 1)
    if all(
        len({t.shape[axis - ndim + t.ndim] for t in tensors if axis - ndim + t.ndim >= 0} - {1})
        <= 1
        for axis in range(ndim)
    ):
        return inputs
    return [_pad_to(x, target) if isinstance(x, torch.Tensor) and x.ndim else x for x in inputs]


def _pad_to(x: torch.Tensor, target: list[int]) -> torch.Tensor:
    offset = len(target) - x.ndim
    padding: list[int] = []
    for axis in reversed(range(x.ndim)):  # F.pad lists the last dim first
        size, want = x.shape[axis], target[axis + offset]
        padding += [0, want - size if size not in (1, want) else 0]
    if not any(padding):
        return x
    return F.pad(x, padding)


def fit_to_slot(value: Any, shape: Sequence[int]) -> Any:
    """A stored value with a dim larger than its destination (a full block stored into a
    partial tile) keeps only the leading lanes, as a masked store would."""
    if not isinstance(value, torch.Tensor) or value.ndim == 0:
        return value
    offset = value.ndim - len(shape)
    for axis in range(max(offset, 0), value.ndim):
        want = shape[axis - offset]
        if value.shape[axis] > want and value.shape[axis] != 1:
            value = value.narrow(axis, 0, want)
    return value


# -- elementwise ---------------------------------------------------------------------------------

_UNARY_FNS: dict[str, Callable] = {
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "log": torch.log,
    "log2": torch.log2,
    "log10": torch.log10,
    "log1p": torch.log1p,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "erf": torch.erf,
    "erfinv": torch.erfinv,
    "atan": torch.atan,
    "asin": torch.asin,
    "acos": torch.acos,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "silu": F.silu,
    "reciprocal": torch.reciprocal,
    "neg": torch.neg,
    "abs": torch.abs,
    "relu": torch.relu,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "trunc": torch.trunc,
    "sign": torch.sign,
    "bitwise_not": torch.bitwise_not,
    "logical_not": torch.logical_not,
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "isfinite": torch.isfinite,
    "signbit": torch.signbit,
}


def _make_unary(fn: Callable) -> Callable:
    def rule(ex: Any, node: Any, inputs: list) -> Any:
        x = _tensor(ex, inputs[0], node.output.dtype)
        if (
            fn
            not in (
                torch.neg,
                torch.abs,
                torch.bitwise_not,
                torch.logical_not,
                torch.isnan,
                torch.isinf,
                torch.isfinite,
                torch.signbit,
                torch.sign,
                torch.relu,
            )
            and not x.dtype.is_floating_point
        ):
            x = x.to(node.output.dtype)
        return fn(x)

    return rule


for _name, _fn in _UNARY_FNS.items():
    ref_lowering(ops.UNARY[_name])(_make_unary(_fn))


@ref_lowering(ops.UNARY["gelu"])
def _gelu(ex: Any, node: Any, inputs: list) -> Any:
    return F.gelu(
        _tensor(ex, inputs[0], node.output.dtype), approximate=node.attrs.get("approximate", "none")
    )


@ref_lowering(ops.UNARY["softplus"])
def _softplus(ex: Any, node: Any, inputs: list) -> Any:
    return F.softplus(_tensor(ex, inputs[0], node.output.dtype))


_OPERATORS: dict[str, Callable] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "remainder": operator.mod,
    "pow": operator.pow,
    "bitwise_and": operator.and_,
    "bitwise_or": operator.or_,
    "bitwise_xor": operator.xor,
    "left_shift": operator.lshift,
    "right_shift": operator.rshift,
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
_TENSOR_BINARY: dict[str, Callable] = {
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "atan2": torch.atan2,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
}


def _make_operator(fn: Callable) -> Callable:
    def rule(ex: Any, node: Any, inputs: list) -> Any:
        a, b = inputs
        if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
            return fn(a, b)
        if node.output.dtype.is_floating_point:
            numbers = [is_host_scalar(x, ex.host_scalars) for x in node.inputs]
            if numbers[0] != numbers[1]:
                # a number in eager code goes to torch as one: torch reads `x * s` at float32
                # (`helion.ir.host_scalars` has the rules). The IR's operand order is the torch
                # function's (`s * x` was traced as `x * s`), so a number first came from a call
                # such as `torch.mul(s, x)`, which torch computes unlike `x * s`
                a, b = (_number(v) if n else v for v, n in zip(inputs, numbers, strict=True))
                return _NUMBER_FIRST.get(fn, fn)(a, b) if numbers[0] else fn(a, b)
        if not isinstance(a, torch.Tensor):
            a = torch.tensor(a, device=ex.device)
            a = a.to(node.output.dtype) if node.output.dtype != torch.bool else a
        return fn(a, b)

    return rule


# the torch functions of the arithmetic operators, for a number first (Python's operator would
# call the tensor's reflected method instead)
_NUMBER_FIRST: dict[Callable, Callable] = {
    operator.add: torch.add,
    operator.sub: torch.sub,
    operator.mul: torch.mul,
    operator.truediv: torch.div,
    operator.pow: torch.pow,
    operator.mod: torch.remainder,
}


def _number(value: Any) -> Any:
    """A host scalar's value as a Python number (the ref backend holds a computed one as a 0-D
    tensor of its IR dtype)."""
    return value.item() if isinstance(value, torch.Tensor) else value


def _make_tensor_binary(fn: Callable) -> Callable:
    def rule(ex: Any, node: Any, inputs: list) -> Any:
        dtype = node.output.dtype if node.output.dtype != torch.bool else None
        a, b = (
            x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=dtype, device=ex.device)
            for x in inputs
        )
        if dtype is not None:
            a, b = a.to(dtype), b.to(dtype)
        return fn(a, b)

    return rule


def _make_integer_division(fn: Callable, what: str) -> Callable:
    """`//` and `%`: on integers, a divisor lane that is 0 is refused (torch raises for it on
    CPU only; compiled kernels give a value that depends on the backend)."""
    plain = _make_operator(fn)

    def rule(ex: Any, node: Any, inputs: list) -> Any:
        divisor = inputs[1]
        dtype = node.output.dtype
        if not (dtype.is_floating_point or dtype.is_complex):
            zero = bool((divisor == 0).any()) if isinstance(divisor, torch.Tensor) else divisor == 0
            if zero:
                raise exc.IntegerDivisionByZero(
                    what,
                    "a lane of the divisor is 0 at run time",
                    loc=node.loc,
                    hint="Integer division by zero is undefined in compiled kernels (each backend "
                    "gives another value); the ref backend refuses it. Guard the divisor, e.g. "
                    "torch.where(d == 0, 1, d).",
                )
        return plain(ex, node, inputs)

    return rule


for _name, _fn in _OPERATORS.items():
    if _name in ("floordiv", "remainder"):
        what = "division" if _name == "floordiv" else "remainder"
        ref_lowering(ops.BINARY[_name])(_make_integer_division(_fn, what))
        continue
    ref_lowering(ops.BINARY[_name])(_make_operator(_fn))
for _name, _fn in _TENSOR_BINARY.items():
    ref_lowering(ops.BINARY[_name])(_make_tensor_binary(_fn))


@ref_lowering(ops.where)
def _where(ex: Any, node: Any, inputs: list) -> Any:
    cond, a, b = inputs
    dtype = node.output.dtype
    return torch.where(
        _tensor(ex, cond, torch.bool),
        _tensor(ex, a, dtype).to(dtype),
        _tensor(ex, b, dtype).to(dtype),
    )


@ref_lowering(ops.cast)
def _cast(ex: Any, node: Any, inputs: list) -> Any:
    return _tensor(ex, inputs[0], node.attrs["dtype"]).to(node.attrs["dtype"])


@ref_lowering(ops.clamp)
def _clamp(ex: Any, node: Any, inputs: list) -> Any:
    x, lo, hi = inputs
    x = _tensor(ex, x, node.output.dtype).to(node.output.dtype)
    return torch.clamp(x, lo, hi)


# -- reductions and scans ---------------------------------------------------------------------------

_REDUCE_FNS = {
    "sum": torch.sum,
    "prod": torch.prod,
    "amax": torch.amax,
    "amin": torch.amin,
    "any": torch.any,
    "all": torch.all,
    "argmax": torch.argmax,
    "argmin": torch.argmin,
}


def _make_reduce(kind: str) -> Callable:
    fn = _REDUCE_FNS[kind]

    def rule(ex: Any, node: Any, inputs: list) -> Any:
        x = _tensor(ex, inputs[0], node.output.dtype)
        dim, keepdim = node.attrs["dim"], node.attrs.get("keepdim", False)
        if x.shape[dim] == 0:
            raise exc.InternalError(f"{kind} over an empty dimension", loc=node.loc)
        return fn(x, dim=dim, keepdim=keepdim)

    return rule


for _kind in _REDUCE_FNS:
    ref_lowering(ops.REDUCTIONS[_kind])(_make_reduce(_kind))

_SCAN_FNS = {"cumsum": torch.cumsum, "cumprod": torch.cumprod}


def _make_scan(fn: Callable) -> Callable:
    def rule(ex: Any, node: Any, inputs: list) -> Any:
        x = inputs[0]
        dim = node.attrs["dim"]
        if node.attrs.get("reverse"):
            return fn(x.flip(dim), dim=dim).flip(dim)
        return fn(x, dim=dim)

    return rule


for _kind, _fn in _SCAN_FNS.items():
    ref_lowering(ops.SCANS[_kind])(_make_scan(_fn))


@ref_lowering(ops.SCANS["cummax"], ops.SCANS["cummin"])
def _cum_extreme(ex: Any, node: Any, inputs: list) -> Any:
    fn = torch.cummax if node.op is ops.SCANS["cummax"] else torch.cummin
    return fn(inputs[0], dim=node.attrs["dim"]).values


def _region_combiner(ex: Any, region: Any) -> Callable:
    """The combiner region of hl.reduce / hl.associative_scan as a function of two lists of
    tensors: its elementwise ops run on whole tensors at once."""

    def combine(lhs: list, rhs: list) -> list:
        env = {arg.id: value for arg, value in zip(region.args, [*lhs, *rhs], strict=True)}
        results = ex.run_block(region, env)
        return _combine.fit_results(results, lhs)

    return combine


@ref_lowering(ops.custom_reduce)
def _custom_reduce(ex: Any, node: Any, inputs: list) -> Any:
    dim = node.attrs["dim"]
    values = [_tensor(ex, x, out.dtype) for x, out in zip(inputs, node.outputs, strict=True)]
    # lanes past the dimension's extent (a full block meeting a partial tile) take `other`
    extent = ex.dim_size(node.inputs[0], dim)
    if values[0].shape[dim] > extent:
        lanes = torch.arange(values[0].shape[dim], device=ex.device) < extent
        lanes = lanes.reshape([-1 if axis == dim else 1 for axis in range(values[0].ndim)])
        values = [
            torch.where(lanes, v, torch.tensor(o, dtype=v.dtype, device=ex.device))
            for v, o in zip(values, node.attrs["other"], strict=True)
        ]
    results = _combine.tree_reduce(
        _region_combiner(ex, node.regions[0]), values, dim, node.attrs["keepdim"]
    )
    return results if len(results) > 1 else results[0]


@ref_lowering(ops.custom_scan)
def _custom_scan(ex: Any, node: Any, inputs: list) -> Any:
    values = [_tensor(ex, x, out.dtype) for x, out in zip(inputs, node.outputs, strict=True)]
    results = _combine.inclusive_scan(
        _region_combiner(ex, node.regions[0]), values, node.attrs["dim"], node.attrs["reverse"]
    )
    return results if len(results) > 1 else results[0]


# -- matmul --------------------------------------------------------------------------------------


@ref_lowering(ops.dot)
def _dot(ex: Any, node: Any, inputs: list) -> Any:
    a, b, acc = inputs
    if a.dtype == torch.int8:
        product = torch.matmul(a.to(torch.int32), b.to(torch.int32))
    else:
        compute = torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
        product = torch.matmul(a.to(compute), b.to(compute))
    if acc is not None:
        acc, product = pad_partial_tiles([acc, product])
        product = acc.to(product.dtype) + product
    return product.to(node.attrs["out_dtype"])


@ref_lowering(ops.dot_scaled)
def _dot_scaled(ex: Any, node: Any, inputs: list) -> Any:
    from helion.language import _mx

    a, a_scale, b, b_scale, acc = inputs
    attrs = node.attrs
    try:
        product = _mx.reference_dot_scaled(
            a, a_scale, attrs["mat1_format"], b, b_scale, attrs["mat2_format"], None, torch.float32
        )
    except ValueError as error:
        raise exc.ShapeMismatch(f"hl.dot_scaled: {error}", loc=node.loc) from None
    if acc is not None:
        acc, product = pad_partial_tiles([acc, product])
        product = acc.to(torch.float32) + product
    return product.to(attrs["out_dtype"])


# -- views ---------------------------------------------------------------------------------------


@ref_lowering(ops.view_reshape)
def _reshape(ex: Any, node: Any, inputs: list) -> Any:
    return inputs[0].reshape(ex.shape(node.attrs["shape"], node.output))


@ref_lowering(ops.view_permute)
def _permute(ex: Any, node: Any, inputs: list) -> Any:
    return inputs[0].permute(node.attrs["dims"])


@ref_lowering(ops.view_expand)
def _expand(ex: Any, node: Any, inputs: list) -> Any:
    x = inputs[0]
    if not isinstance(x, torch.Tensor):
        x = torch.tensor(x, dtype=node.output.dtype, device=ex.device)
    shape = ex.shape(node.attrs["shape"], node.output)
    # a dimension that is not broadcast keeps its size: the tile it has may not be the one its
    # block size names last (one block size shared by several tiles)
    lead = len(shape) - x.ndim
    return x.expand(
        [-1 if i >= lead and x.shape[i - lead] != 1 else n for i, n in enumerate(shape)]
    )


@ref_lowering(ops.view_subscript)
def _subscript(ex: Any, node: Any, inputs: list) -> Any:
    index = tuple(slice(None) if item == "slice" else item for item in node.attrs["items"])
    return inputs[0][index]


# -- creation and tile attributes -------------------------------------------------------------------


@ref_lowering(ops.full)
def _full(ex: Any, node: Any, inputs: list) -> Any:
    return torch.full(
        ex.shape(node.attrs["shape"], node.output),
        node.attrs["value"],
        dtype=node.attrs["dtype"],
        device=ex.device,
    )


@ref_lowering(ops.arange)
def _arange(ex: Any, node: Any, inputs: list) -> Any:
    start = node.attrs["start"]
    (length,) = ex.shape([node.attrs["length"]], node.output)
    return torch.arange(start, start + length, dtype=node.attrs["dtype"], device=ex.device)


@ref_lowering(ops.constant)
def _constant(ex: Any, node: Any, inputs: list) -> Any:
    return torch.tensor(node.attrs["value"], dtype=node.attrs["dtype"], device=ex.device)


@ref_lowering(ops.random)
def _random(ex: Any, node: Any, inputs: list) -> Any:
    seed, offsets = inputs
    offsets = _tensor(ex, offsets, torch.int64)
    dist = node.attrs["dist"]
    if dist == "normal":
        return philox.normal(seed, offsets)
    if dist == "randint":
        return philox.randint(seed, offsets, node.attrs["low"], node.attrs["high"])
    return philox.uint32_to_uniform(philox.philox4x32(seed, offsets)[node.attrs.get("lane", 0)])


@ref_lowering(*ops.TILE_ATTRS.values())
def _tile_attr(ex: Any, node: Any, inputs: list) -> Any:
    name = node.op.name.removeprefix("tile_")
    tile = inputs[0] if inputs else None
    if name == "block_size":
        return ex.block_value[node.attrs["block_id"]] if tile is None else tile.block_size
    if name == "index":
        return torch.arange(tile.begin, tile.end, dtype=node.output.dtype, device=ex.device)
    if name == "begin":
        return tile.begin
    if name == "end":
        return tile.end
    if name == "id":
        return tile.begin // tile.block_size
    if name == "count":
        return -(-(tile.range_end - tile.range_begin) // tile.block_size)  # tiles in the loop
    raise exc.InternalError(f"unknown tile attribute {name}")


# -- memory --------------------------------------------------------------------------------------


def _is_basic(items: tuple) -> bool:
    return all(item[0] in ("tile", "full", "const", "scalar", "none") for item in items)


def _basic_index(ex: Any, items: tuple, inputs: list) -> tuple:
    index: list[Any] = []
    for item in items:
        kind = item[0]
        if kind == "tile":
            tile = inputs[item[1]]
            index.append(slice(tile.begin, tile.end))
        elif kind == "full":
            index.append(slice(item[1], item[1] + item[2]))
        elif kind == "const":
            index.append(item[1])
        elif kind == "scalar":
            value = inputs[item[1]]
            index.append(int(value.item()) if isinstance(value, torch.Tensor) else int(value))
        elif kind == "none":
            index.append(None)
    return tuple(index)


def _gather_index(ex: Any, node: Any, items: tuple, inputs: list) -> list[torch.Tensor]:
    """One integer index tensor per tensor dim, all broadcastable to the result shape."""
    out_rank = node.attrs.get("_out_rank")
    tensor_shapes = [inputs[i[1]].shape for i in items if i[0] == "tensor"]
    tensor_rank = len(torch.broadcast_shapes(*tensor_shapes)) if tensor_shapes else 0
    positions: list[int] = []
    rank = 0
    tensor_position = None
    for item in items:
        if item[0] in ("tile", "full", "none"):
            positions.append(rank)
            rank += 1
        elif item[0] == "tensor":
            if tensor_position is None:
                tensor_position = rank
                rank += tensor_rank
            positions.append(tensor_position)
        else:
            positions.append(-1)
    del out_rank
    indices: list[torch.Tensor] = []
    for item, position in zip(items, positions, strict=True):
        kind = item[0]
        if kind == "none":
            continue
        if kind == "tile":
            tile = inputs[item[1]]
            idx = torch.arange(tile.begin, tile.end, device=ex.device)
        elif kind == "full":
            idx = torch.arange(item[1], item[1] + item[2], device=ex.device)
        elif kind == "const":
            indices.append(torch.tensor(item[1], device=ex.device))
            continue
        elif kind == "scalar":
            value = inputs[item[1]]
            indices.append(torch.as_tensor(value, device=ex.device).long())
            continue
        else:
            tensor = inputs[item[1]].long()
            tensor = tensor.reshape((1,) * (tensor_rank - tensor.ndim) + tuple(tensor.shape))
            shape = [1] * position + list(tensor.shape) + [1] * (rank - position - tensor_rank)
            indices.append(tensor.reshape(shape))
            continue
        shape = [1] * rank
        shape[position] = idx.numel()
        indices.append(idx.reshape(shape))
    return indices


def _mask(inputs: list, node: Any) -> torch.Tensor | None:
    index = node.attrs.get("mask")
    return None if index is None else inputs[index]


def _clamped(indices: list[torch.Tensor], sizes: tuple) -> list[torch.Tensor]:
    return [idx.clamp(0, max(size - 1, 0)) for idx, size in zip(indices, sizes, strict=True)]


def _result_shape(indices: list[torch.Tensor], node: Any, ex: Any) -> list[int]:
    return list(torch.broadcast_shapes(*(i.shape for i in indices))) if indices else []


# Compiled code turns an index into an address without checking it, so an unmasked lane outside
# the tensor reads or writes someone else's memory. Torch would clamp a slice (and wrap a
# negative index) instead; the ref backend refuses the access so the kernel's bug shows here.


def _out_of_bounds(node: Any, access: str, index: int, dim: int, size: int) -> exc.IndexOutOfBounds:
    return exc.IndexOutOfBounds(access, node.attrs["tensor"].name, index, dim, size, loc=node.loc)


def _check_basic_bounds(node: Any, access: str, tensor: torch.Tensor, index: tuple) -> None:
    """`index` is what `_basic_index` made: slices, ints and `None`s (new axes)."""
    dim = 0
    for entry in index:
        if entry is None:
            continue
        begin, end = (entry.start, entry.stop) if isinstance(entry, slice) else (entry, entry + 1)
        size = tensor.shape[dim]
        if end > begin and (begin < 0 or end > size):
            raise _out_of_bounds(node, access, begin if begin < 0 else max(begin, size), dim, size)
        dim += 1


def _check_gather_bounds(
    node: Any, access: str, tensor: torch.Tensor, indices: list[torch.Tensor], keep: Any
) -> None:
    """`indices` has one index tensor per tensor dim; lanes where `keep` is false may be outside."""
    for dim, (index, size) in enumerate(zip(indices, tensor.shape, strict=True)):
        outside = (index < 0) | (index >= size)
        if keep is not None:
            outside = outside & keep.to(torch.bool)
        if bool(outside.any()):
            lanes, hit = torch.broadcast_tensors(index, outside)
            raise _out_of_bounds(node, access, int(lanes[hit].reshape(-1)[0]), dim, size)


@ref_lowering(ops.load)
def _load(ex: Any, node: Any, inputs: list) -> Any:
    return load_from(ex, node, ex.host[node.attrs["tensor"].index], inputs, _mask(inputs, node))


def load_from(ex: Any, node: Any, tensor: torch.Tensor, inputs: list, mask: Any) -> Any:
    """`tensor[attrs["items"]]` for a load-like node; lanes where `mask` is false read 0."""
    items = node.attrs["items"]
    if mask is None and _is_basic(items):
        index = _basic_index(ex, items, inputs)
        _check_basic_bounds(node, node.op.name, tensor, index)
        result = tensor[index]
        return (
            result.clone()
            if ex.copy_loads or node.attrs["tensor"].index in ex.stored_tensors
            else result
        )
    indices = _gather_index(ex, node, items, inputs)
    _check_gather_bounds(node, node.op.name, tensor, indices, mask)
    if mask is not None:
        indices = _clamped(indices, tuple(tensor.shape))
    result = tensor[tuple(indices)] if indices else tensor.clone()
    result = _restore_none_dims(result, items, indices)
    if mask is not None:
        result = torch.where(
            mask.expand(result.shape) if mask.ndim else mask,
            result,
            torch.zeros((), dtype=result.dtype, device=result.device),
        )
    return result


def _restore_none_dims(result: torch.Tensor, items: tuple, indices: list) -> torch.Tensor:
    # gather indices already include the positions of `None` items as size-1 dims
    return result


@ref_lowering(ops.store)
def _store(ex: Any, node: Any, inputs: list) -> None:
    tensor = ex.host[node.attrs["tensor"].index]
    store_into(ex, node, tensor, inputs, inputs[node.attrs["value"]], _mask(inputs, node))


def store_into(
    ex: Any, node: Any, tensor: torch.Tensor, inputs: list, value: Any, mask: Any
) -> None:
    """`tensor[attrs["items"]] = value` for a store-like node, only where `mask` is true."""
    items = node.attrs["items"]
    if mask is None and _is_basic(items):
        index = _basic_index(ex, items, inputs)
        _check_basic_bounds(node, node.op.name, tensor, index)
        tensor[index] = fit_to_slot(value, tensor[index].shape)
        return
    indices = _gather_index(ex, node, items, inputs)
    _check_gather_bounds(node, node.op.name, tensor, indices, mask)
    shape = _result_shape(indices, node, ex)
    value = fit_to_slot(value, shape)
    value = (
        value.expand(value.shape if not shape else torch.broadcast_shapes(value.shape, shape))
        if isinstance(value, torch.Tensor)
        else value
    )
    full_indices = [i.expand(value.shape) for i in indices]
    if mask is not None:
        keep = mask.expand(value.shape)
        full_indices = [i[keep] for i in full_indices]
        value = value[keep]
    tensor[tuple(full_indices)] = value


@ref_lowering(ops.atomic)
def _atomic(ex: Any, node: Any, inputs: list) -> Any:
    tensor = ex.host[node.attrs["tensor"].index]
    items = node.attrs["items"]
    value = inputs[node.attrs["value"]]
    indices = _gather_index(ex, node, items, inputs)
    _check_gather_bounds(node, f"atomic_{node.attrs['kind']}", tensor, indices, _mask(inputs, node))
    value = fit_to_slot(value, _result_shape(indices, node, ex))
    shape = torch.broadcast_shapes(value.shape, *(i.shape for i in indices))
    value = value.expand(shape)
    full = tuple(i.expand(shape) for i in indices)
    # masked lanes (hl.jagged_tile) take no part: work on the kept lanes, 1-D
    mask = _mask(inputs, node)
    keep = None if mask is None else mask.expand(shape)
    if keep is not None:
        full = tuple(i[keep] for i in full)
        value = value[keep]
    kind = node.attrs["kind"]
    if kind not in _ATOMIC_KINDS:
        raise exc.BackendUnsupported(f"atomic_{kind}", "ref", loc=node.loc)
    expected = inputs[node.attrs["expected"]].expand(shape) if kind == "cas" else None
    if keep is not None and expected is not None:
        expected = expected[keep]
    lanes = [i.reshape(-1) for i in full]
    flat_expected = None if expected is None else expected.reshape(-1)
    old = _serialized_atomic(kind, tensor, lanes, value.reshape(-1), flat_expected)
    if keep is not None:
        result = torch.zeros(shape, dtype=old.dtype, device=old.device)
        result[keep] = old
        return result
    return old.reshape(shape)


_ATOMIC_KINDS = ("add", "max", "min", "and", "or", "xor", "xchg", "cas")


def _serialized_atomic(
    kind: str,
    tensor: torch.Tensor,
    lanes: list[torch.Tensor],
    value: torch.Tensor,
    expected: torch.Tensor | None,
) -> torch.Tensor:
    """Apply one atomic per lane (1-D `lanes` indices, `value`, `expected`) in lane order and
    return each lane's previous value, as if the lanes had been serialized in that order.

    The k-th lane to hit an element is applied in round k; a round's lanes hit distinct elements,
    so it is one gather and one scatter. Without duplicate addresses that is a single round.
    """
    olds = torch.empty(value.shape, dtype=tensor.dtype, device=tensor.device)
    if value.numel() == 0:
        return olds
    if tensor.ndim == 0:
        # a 0-d target has no index tensors: address its one element as a 1-element vector
        tensor = tensor.view(1)
        lanes = [torch.zeros(value.shape, dtype=torch.long, device=tensor.device)]
    # rank of each lane among the lanes that hit its element, counted in lane order
    linear = _linear_index(tensor, tuple(lanes))
    order = torch.sort(linear, stable=True).indices
    ordered = linear[order]
    position = torch.arange(linear.numel(), device=linear.device)
    first = torch.ones_like(ordered, dtype=torch.bool)
    first[1:] = ordered[1:] != ordered[:-1]
    group_start = torch.cummax(torch.where(first, position, 0), 0).values
    rank = torch.empty_like(position)
    rank[order] = position - group_start
    # lanes grouped by round, lane order kept inside a round (it does not matter there)
    by_round = torch.sort(rank, stable=True).indices
    counts = torch.bincount(rank).tolist()
    for chosen in torch.split(by_round, counts):
        where = tuple(i[chosen] for i in lanes)
        current = tensor[where].clone()
        v = value[chosen].to(tensor.dtype)
        if kind == "add":
            new = current + v
        elif kind == "max":
            new = torch.maximum(current, v)
        elif kind == "min":
            new = torch.minimum(current, v)
        elif kind == "and":
            new = current & v
        elif kind == "or":
            new = current | v
        elif kind == "xor":
            new = current ^ v
        elif kind == "xchg":
            new = v
        else:
            assert expected is not None
            new = torch.where(current == expected[chosen].to(tensor.dtype), v, current)
        tensor[where] = new
        olds[chosen] = current
    return olds


def _linear_index(tensor: torch.Tensor, indices: tuple) -> torch.Tensor:
    linear = torch.zeros_like(indices[0])
    for idx, stride in zip(indices, tensor.stride(), strict=True):
        linear = linear + idx * stride
    return linear


@ref_lowering(ops.device_print)
def _device_print(ex: Any, node: Any, inputs: list) -> None:
    print(node.attrs["prefix"], *inputs)


# the shape ops (sort, topk, gather, stack, cat, split) register from their own module
from helion.backends.ref import shape_ops as _shape_ops  # noqa: E402,F401

# StackTensor loads and stores register into this table from their own module
from helion.backends.ref import stack as _stack  # noqa: E402, F401
