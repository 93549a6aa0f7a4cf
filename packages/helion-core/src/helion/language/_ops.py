"""Op objects: each language op is defined once here, with its traits and one type rule.

Backends lower ops through their own registry (`helion.backends.ref.lowerings` for the built-in
`ref` backend, `helion_triton.lowerings` for Triton, ...). Passes test traits, never names.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from typing import Any
from typing import Callable
from typing import Iterator
from typing import Sequence

import sympy
import torch

from helion.ir.core import TensorType
from helion.ir.core import TileType
from helion.ir.core import Value

TypeRule = Callable[[Sequence[Any], dict[str, Any]], list]


@dataclasses.dataclass(frozen=True, eq=False)
class Op:
    """A language op. Identity is the object; `name` is for printing and error messages."""

    name: str
    type_rule: TypeRule | None = None
    elementwise: bool = False
    reduction: bool = False
    scan: bool = False
    memory: str | None = None  # "load" | "store" | "atomic"
    side_effects: bool = False
    structural: bool = False  # owns regions (loops, if)
    view: bool = False
    # needs every element of `attrs["dim"]` of its first input at once (sort, topk, gather):
    # that dimension may not be split into tiles or looped over in chunks
    whole_dim: bool = False
    # user code the compiler cannot see into (hl.inline_triton, hl.inline_asm_elementwise):
    # never split, recomputed per chunk or moved
    opaque: bool = False
    provider: str = "helion-core"  # distribution that defines the op
    doc: str = ""

    def __repr__(self) -> str:
        return f"Op({self.name})"

    @property
    def user_name(self) -> str:
        """How errors name the op: its public function where ``doc`` gives one (a plugin's
        "hl.signal"), else its IR name."""
        return self.doc or self.name

    __hash__ = object.__hash__


OPS: dict[str, Op] = {}


def define_op(name: str, type_rule: TypeRule | None = None, **traits: Any) -> Op:
    if name in OPS:
        raise ValueError(f"op {name!r} defined twice")
    op = Op(name, type_rule, **traits)
    OPS[name] = op
    return op


# ---------------------------------------------------------------------------------------------
# dtype and shape rules (one place, using torch's own promotion so results match eager mode)

_META = torch.device("meta")


def _representative(operand: Any) -> Any:
    if isinstance(operand, Value):
        ty = operand.type
        if isinstance(ty, TileType):
            return torch.empty((1,), dtype=torch.int32, device=_META)
        shape = (1,) if ty.ndim > 0 else ()
        return torch.empty(shape, dtype=ty.dtype, device=_META)
    if isinstance(operand, sympy.Expr):
        return int(operand) if operand.is_Integer else 1
    return operand


def promote_types(*operands: Any) -> torch.dtype:
    """Result dtype of a binary/ternary elementwise op, by torch's rules (dimensioned tensors
    outrank 0-D tensors, which outrank python scalars)."""
    reps = [_representative(o) for o in operands]
    tensors = [r for r in reps if isinstance(r, torch.Tensor)]
    if not tensors:
        return torch.result_type(torch.tensor(reps[0]), reps[1] if len(reps) > 1 else reps[0])
    result = reps[0]
    for rep in reps[1:]:
        dtype = torch.result_type(result, rep)
        shape = (1,) if any(isinstance(r, torch.Tensor) and r.ndim for r in (result, rep)) else ()
        result = torch.empty(shape, dtype=dtype, device=_META)
    if not isinstance(result, torch.Tensor):
        return torch.result_type(torch.tensor(result), result)
    return result.dtype


def shape_of(operand: Any) -> tuple[sympy.Expr, ...]:
    if isinstance(operand, Value) and isinstance(operand.type, TensorType):
        return operand.type.shape
    return ()


# While a kernel is traced: the concrete extent of each full-slice (reduction) dimension symbol.
# Such a dimension and an integer of the same size are one dimension, so that `x[tile, :]` of a
# row of 32 and `hl.zeros([tile, 32])` combine.
_DIM_EXTENTS: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "helion_dim_extents", default=None
)


@contextlib.contextmanager
def dim_extents(extents: dict) -> Iterator[None]:
    token = _DIM_EXTENTS.set(extents)
    try:
        yield
    finally:
        _DIM_EXTENTS.reset(token)


def dims_equal(a: Any, b: Any) -> bool:
    a, b = sympy.sympify(a), sympy.sympify(b)
    if a == b or sympy.simplify(a - b) == 0:
        return True
    extents = _DIM_EXTENTS.get()
    if not extents:
        return False
    return sympy.simplify(a.subs(extents) - b.subs(extents)) == 0


def shapes_equal(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(dims_equal(x, y) for x, y in zip(a, b, strict=True))


def broadcast_shapes(*shapes: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    """Broadcast symbolic shapes; raises ValueError (turned into ShapeMismatch) if they clash."""
    ndim = max((len(s) for s in shapes), default=0)
    result: list[sympy.Expr] = []
    for axis in range(ndim):
        dim: sympy.Expr = sympy.Integer(1)
        for shape in shapes:
            offset = axis - (ndim - len(shape))
            if offset < 0:
                continue
            this = sympy.sympify(shape[offset])
            if this == 1:
                continue
            if dim == 1:
                dim = this
            elif dims_equal(dim, this):
                if dim.is_Integer and not this.is_Integer:
                    dim = this  # keep the symbol: it says which reduction dim this is
            else:
                raise ValueError(
                    f"shapes {[tuple(s) for s in shapes]} cannot be broadcast (dim {axis}: {dim} vs {this})"
                )
        result.append(dim)
    return tuple(result)


def _is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def _float_result(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype.is_floating_point else torch.get_default_dtype()


def _unary_same(inputs: Sequence[Any], attrs: dict) -> list:
    (x,) = inputs[:1]
    return [TensorType(shape_of(x), x.dtype)]


def _unary_float(inputs: Sequence[Any], attrs: dict) -> list:
    (x,) = inputs[:1]
    return [TensorType(shape_of(x), _float_result(x.dtype))]


def _unary_bool(inputs: Sequence[Any], attrs: dict) -> list:
    (x,) = inputs[:1]
    return [TensorType(shape_of(x), torch.bool)]


def _binary_promote(inputs: Sequence[Any], attrs: dict) -> list:
    shape = broadcast_shapes(*(shape_of(i) for i in inputs))
    return [TensorType(shape, promote_types(*inputs))]


def _binary_float(inputs: Sequence[Any], attrs: dict) -> list:
    shape = broadcast_shapes(*(shape_of(i) for i in inputs))
    return [TensorType(shape, _float_result(promote_types(*inputs)))]


def _binary_bool(inputs: Sequence[Any], attrs: dict) -> list:
    shape = broadcast_shapes(*(shape_of(i) for i in inputs))
    return [TensorType(shape, torch.bool)]


def _where_rule(inputs: Sequence[Any], attrs: dict) -> list:
    cond, a, b = inputs
    shape = broadcast_shapes(shape_of(cond), shape_of(a), shape_of(b))
    return [TensorType(shape, promote_types(a, b))]


def _cast_rule(inputs: Sequence[Any], attrs: dict) -> list:
    return [TensorType(shape_of(inputs[0]), attrs["dtype"])]


def _clamp_rule(inputs: Sequence[Any], attrs: dict) -> list:
    x = inputs[0]
    others = [o for o in inputs[1:] if o is not None]
    return [TensorType(shape_of(x), promote_types(x, *others))]


# unary ops that compute in floating point (ints promote to the default float dtype)
FLOAT_UNARY = [
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "erf",
    "erfinv",
    "atan",
    "asin",
    "acos",
    "sinh",
    "cosh",
    "gelu",
    "silu",
    "softplus",
    "reciprocal",
]
SAME_UNARY = ["neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sign", "bitwise_not"]
BOOL_UNARY = ["logical_not", "isnan", "isinf", "isfinite", "signbit"]
PROMOTE_BINARY = [
    "add",
    "sub",
    "mul",
    "floordiv",
    "remainder",
    "pow",
    "maximum",
    "minimum",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "left_shift",
    "right_shift",
]
FLOAT_BINARY = ["truediv", "atan2"]
BOOL_BINARY = ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]

# -- dtypes torch computes little in ----------------------------------------------------------
# torch implements few kernels for float8 and for uint16 / uint32 / uint64: `x + y` of two
# float8_e4m3fn tensors raises "add_stub" not implemented. Backends would compute something
# else (Triton added the raw bytes), so the ops torch refuses are refused here, when the kernel
# is traced, for every backend. Measured on torch 2.13 (CPU); for float8 also what CUDA refuses
# (its mul, abs and isinf, which CPU has).

FP8_DTYPES = frozenset(
    getattr(torch, name)
    for name in (
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
    )
    if hasattr(torch, name)
)
WIDE_UNSIGNED_DTYPES = frozenset(
    getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name)
)
# float8 computes nothing: it is cast, selected, compared for equality and tested for truth
_FP8_OPS = frozenset({"cast", "where", "eq", "ne", "isnan", "reduce_any", "reduce_all"})
_WIDE_UNSIGNED_REFUSED = frozenset(
    {
        "add",
        "sub",
        "floordiv",
        "remainder",
        "pow",
        "maximum",
        "minimum",
        "left_shift",
        "right_shift",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_xor",
        "neg",
        "abs",
        "relu",
        "sign",
        "bitwise_not",
        "logical_not",
        "gelu",
        "silu",
        "softplus",
        "clamp",
        "reduce_amax",
        "reduce_amin",
        "reduce_argmax",
        "reduce_argmin",
        "cummax",
        "cummin",
    }
)
# how errors name an op whose IR name is not torch's
_SPELLED = {
    "add": "add (+)",
    "sub": "sub (-)",
    "mul": "mul (*)",
    "truediv": "div (/)",
    "floordiv": "floor_divide (//)",
    "remainder": "remainder (%)",
    "pow": "pow (**)",
    "lt": "lt (<)",
    "le": "le (<=)",
    "gt": "gt (>)",
    "ge": "ge (>=)",
    "left_shift": "bitwise_left_shift (<<)",
    "right_shift": "bitwise_right_shift (>>)",
    "neg": "neg (unary -)",
    "bitwise_not": "bitwise_not (~)",
}
# reductions and scans that compute in their `dtype` attribute when one is given (sum(dtype=))
_ACCUMULATING = frozenset({"reduce_sum", "reduce_prod", "cumsum", "cumprod"})


def _operand_dtype(operand: Any) -> torch.dtype | None:
    if isinstance(operand, Value) and isinstance(operand.type, TensorType):
        return operand.type.dtype
    return None


def compute_dtype(op_name: str, inputs: Sequence[Any], attrs: dict) -> torch.dtype | None:
    """The dtype torch computes ``op_name`` in: its operands' common dtype (a cast: its
    input's; a reduction or scan given ``dtype=``: that one)."""
    if op_name == "cast":
        return _operand_dtype(inputs[0])
    if op_name in _ACCUMULATING and attrs.get("dtype") is not None:
        return attrs["dtype"]
    if op_name == "where":
        inputs = inputs[1:]
    operands = [o for o in inputs if o is not None]
    if not any(isinstance(o, Value) for o in operands):
        return None
    if len(operands) == 1:
        return _operand_dtype(operands[0])
    return promote_types(*operands)


def check_dtype_support(op_name: str, inputs: Sequence[Any], attrs: dict) -> None:
    """Refuse an op in a dtype torch has no kernel of it for (`FP8_DTYPES`,
    `WIDE_UNSIGNED_DTYPES`): the op, the dtype, and (from the tracer) the kernel's line.

    Raises:
        helion.exc.UnsupportedDtype: torch refuses ``op_name`` in that dtype.
    """
    from helion import exc

    name = _SPELLED.get(op_name, op_name.removeprefix("reduce_"))
    try:
        dtype = compute_dtype(op_name, inputs, attrs)
    except RuntimeError:
        # torch promotes float8 and uint16/32/64 with no other dtype ("Promotion for Float8
        # Types is not supported"): float8 + float32 is refused as float8 + float8 is
        dtypes = [_operand_dtype(o) for o in inputs if _operand_dtype(o) is not None]
        limited = [d for d in dtypes if d in FP8_DTYPES or d in WIDE_UNSIGNED_DTYPES]
        if not limited:
            raise
        family = "float8" if limited[0] in FP8_DTYPES else "uint16, uint32 and uint64"
        raise exc.UnsupportedDtype(
            name,
            " and ".join(dict.fromkeys(str(d) for d in dtypes)),
            f"torch promotes {family} with no other dtype",
            hint=f"Cast the {limited[0]} operand to a wider float first (x.to(torch.float32)).",
        ) from None
    if dtype in FP8_DTYPES:
        refused = op_name not in _FP8_OPS
        reason = (
            "torch has no arithmetic or math in float8: its values load, store, cast, select "
            "(torch.where), compare with == / != and feed hl.dot / matmul"
        )
        hint = (
            "Cast to a wider float first (x.to(torch.float32)) and compute there; cast the "
            f"result back (.to({dtype})) to store it as float8."
        )
    elif dtype in WIDE_UNSIGNED_DTYPES:
        refused = op_name in _WIDE_UNSIGNED_REFUSED
        reason = "torch implements few ops for uint16, uint32 and uint64 (no add, no <)"
        hint = (
            "Cast to a wider float first (x.to(torch.float32)), or to a signed integer dtype "
            "(x.to(torch.int64)) for integer arithmetic."
        )
    else:
        return
    if refused:
        raise exc.UnsupportedDtype(name, dtype, reason, hint=hint)


def _dtype_checked(name: str, rule: TypeRule) -> TypeRule:
    """``rule`` preceded by :func:`check_dtype_support` of op ``name``."""

    def checked(inputs: Sequence[Any], attrs: dict) -> list:
        check_dtype_support(name, inputs, attrs)
        return rule(inputs, attrs)

    return checked


UNARY: dict[str, Op] = {}
BINARY: dict[str, Op] = {}
for _name in FLOAT_UNARY:
    UNARY[_name] = define_op(_name, _dtype_checked(_name, _unary_float), elementwise=True)
for _name in SAME_UNARY:
    UNARY[_name] = define_op(_name, _dtype_checked(_name, _unary_same), elementwise=True)
for _name in BOOL_UNARY:
    UNARY[_name] = define_op(_name, _dtype_checked(_name, _unary_bool), elementwise=True)
for _name in PROMOTE_BINARY:
    BINARY[_name] = define_op(_name, _dtype_checked(_name, _binary_promote), elementwise=True)
for _name in FLOAT_BINARY:
    BINARY[_name] = define_op(_name, _dtype_checked(_name, _binary_float), elementwise=True)
for _name in BOOL_BINARY:
    BINARY[_name] = define_op(_name, _dtype_checked(_name, _binary_bool), elementwise=True)

where = define_op("where", _dtype_checked("where", _where_rule), elementwise=True)
cast = define_op("cast", _cast_rule, elementwise=True)
clamp = define_op("clamp", _dtype_checked("clamp", _clamp_rule), elementwise=True)


# ---------------------------------------------------------------------------------------------
# reductions and scans: attrs dim (int), keepdim (bool); kind is the op itself


def _reduce_rule(inputs: Sequence[Any], attrs: dict) -> list:
    x = inputs[0]
    shape = list(shape_of(x))
    dim = attrs["dim"]
    if attrs.get("keepdim"):
        shape[dim] = sympy.Integer(1)
    else:
        del shape[dim]
    dtype = attrs.get("dtype") or x.dtype
    return [TensorType(tuple(shape), dtype)]


def _scan_rule(inputs: Sequence[Any], attrs: dict) -> list:
    return [TensorType(shape_of(inputs[0]), attrs.get("dtype") or inputs[0].dtype)]


REDUCTIONS: dict[str, Op] = {}
for _name in ("sum", "prod", "amax", "amin", "any", "all", "argmax", "argmin"):
    REDUCTIONS[_name] = define_op(
        f"reduce_{_name}", _dtype_checked(f"reduce_{_name}", _reduce_rule), reduction=True
    )

SCANS: dict[str, Op] = {}
for _name in ("cumsum", "cumprod", "cummax", "cummin"):
    SCANS[_name] = define_op(_name, _dtype_checked(_name, _scan_rule), scan=True)


# hl.reduce / hl.associative_scan with a user combiner: the inputs (one or more values of one
# shape) and as many outputs; regions[0] is the combiner, with 2k 0-D arguments (the left
# operands, then the right ones) yielding k values of the inputs' dtypes.
# attrs: dim, keepdim and other (the padded-lane value of each input) for reduce; dim, reverse
# for the scan.


def _custom_reduce_rule(inputs: Sequence[Any], attrs: dict) -> list:
    results = []
    for x in inputs:
        shape = list(shape_of(x))
        if attrs.get("keepdim"):
            shape[attrs["dim"]] = sympy.Integer(1)
        else:
            del shape[attrs["dim"]]
        results.append(TensorType(tuple(shape), x.dtype))
    return results


custom_reduce = define_op("reduce", _custom_reduce_rule, reduction=True)
custom_scan = define_op(
    "associative_scan", lambda i, a: [TensorType(shape_of(x), x.dtype) for x in i], scan=True
)


# ---------------------------------------------------------------------------------------------
# matmul


def _dot_rule(inputs: Sequence[Any], attrs: dict) -> list:
    a, b, _acc = inputs
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    shape = (*batch, a.shape[-2], b.shape[-1])
    return [TensorType(shape, attrs["out_dtype"])]


dot = define_op("dot", _dot_rule)


def _dot_scaled_rule(inputs: Sequence[Any], attrs: dict) -> list:
    a, _a_scale, b, _b_scale, _acc = inputs
    return [TensorType((a.shape[-2], b.shape[-1]), attrs["out_dtype"])]


# inputs (mat1, mat1_scale, mat2, mat2_scale, acc), scales and acc may be None;
# attrs mat1_format, mat2_format, out_dtype (see helion.language._mx)
dot_scaled = define_op("dot_scaled", _dot_scaled_rule)


# ---------------------------------------------------------------------------------------------
# views: attrs carry the new shape / permutation

view_reshape = define_op(
    "reshape", lambda i, a: [TensorType(tuple(a["shape"]), i[0].dtype)], view=True
)
view_permute = define_op(
    "permute",
    lambda i, a: [TensorType(tuple(i[0].shape[p] for p in a["dims"]), i[0].dtype)],
    view=True,
)
view_expand = define_op(
    "expand", lambda i, a: [TensorType(tuple(a["shape"]), i[0].dtype)], view=True
)
# attrs["items"]: tuple of None (new axis) / "slice" (keep dim) / int (select)
view_subscript = define_op(
    "subscript", lambda i, a: [TensorType(tuple(a["shape"]), i[0].dtype)], view=True
)


# ---------------------------------------------------------------------------------------------
# shape ops: sort / topk / gather / stack / cat / split (the tracer checks the operands;
# see helion.frontend.shape_ops)


def _sort_rule(inputs: Sequence[Any], attrs: dict) -> list:
    x = inputs[0]
    return [TensorType(x.shape, x.dtype), TensorType(x.shape, torch.int64)]


def _topk_rule(inputs: Sequence[Any], attrs: dict) -> list:
    x = inputs[0]
    shape = list(x.shape)
    shape[attrs["dim"]] = sympy.Integer(attrs["k"])
    return [TensorType(tuple(shape), x.dtype), TensorType(tuple(shape), torch.int64)]


def _stack_rule(inputs: Sequence[Any], attrs: dict) -> list:
    shape = list(inputs[0].shape)
    shape.insert(attrs["dim"], sympy.Integer(len(inputs)))
    return [TensorType(tuple(shape), inputs[0].dtype)]


def _cat_rule(inputs: Sequence[Any], attrs: dict) -> list:
    shape = list(inputs[0].shape)
    shape[attrs["dim"]] = sympy.Integer(sum(attrs["sizes"]))
    return [TensorType(tuple(shape), inputs[0].dtype)]


def _split_rule(inputs: Sequence[Any], attrs: dict) -> list:
    x = inputs[0]
    return [TensorType(x.shape[:-1], x.dtype), TensorType(x.shape[:-1], x.dtype)]


# outputs (values, indices); attrs dim, descending
sort = define_op("sort", _sort_rule, whole_dim=True)
# outputs (values, indices); attrs dim, k, largest
topk = define_op("topk", _topk_rule, whole_dim=True)
# inputs (source, index); attrs dim
gather = define_op("gather", lambda i, a: [TensorType(i[1].shape, i[0].dtype)], whole_dim=True)
# attrs dim (the new dimension)
stack = define_op("stack", _stack_rule)
# attrs dim, sizes (the extent of each input along dim)
cat = define_op("cat", _cat_rule)
# hl.split: outputs (lo, hi), the two halves of a last dimension of 2
split = define_op("split", _split_rule)


# ---------------------------------------------------------------------------------------------
# creation and tile attributes

full = define_op("full", lambda i, a: [TensorType(tuple(a["shape"]), a["dtype"])])
arange = define_op("arange", lambda i, a: [TensorType((a["length"],), a["dtype"])])
constant = define_op("constant", lambda i, a: [TensorType((), a["dtype"])])


def _random_rule(inputs: Sequence[Any], attrs: dict) -> list:
    _seed, offsets = inputs
    dtype = torch.int32 if attrs["dist"] == "randint" else torch.float32
    return [TensorType(shape_of(offsets), dtype)]


# Philox4x32-10 random numbers (helion.language.philox): inputs [seed (int64), offsets (int)];
# attrs dist: "uniform" (word `lane` of 0..3 mapped to [0, 1)) | "normal" | "randint" (low, high)
random = define_op("random", _random_rule)

TILE_ATTRS: dict[str, Op] = {}
for _name in ("index", "begin", "end", "block_size", "id", "count"):
    TILE_ATTRS[_name] = define_op(f"tile_{_name}", None)


# ---------------------------------------------------------------------------------------------
# memory: attrs["tensor"] is the TensorArg; inputs carry the dynamic index parts

load = define_op("load", None, memory="load")
store = define_op("store", None, memory="store", side_effects=True)
atomic = define_op("atomic", None, memory="atomic", side_effects=True)
# StackTensor loads/stores (hl.stacktensor_like): like load/store on attrs["tensor"] (the layout
# of one buffer), for every pointer in inputs[attrs["ptrs"]]; the pointer dims lead the shape.
# Not memory ops: they address buffers the kernel does not name, so they get no indexing tunable.
stack_load = define_op("stack_load", None)
stack_store = define_op("stack_store", None, side_effects=True)

# ---------------------------------------------------------------------------------------------
# structure

grid_loop = define_op("grid_loop", None, structural=True)
tile_loop = define_op("tile_loop", None, structural=True)
if_ = define_op("if", None, structural=True)
device_print = define_op("device_print", None, side_effects=True)

# escape hatches (helion.frontend.inline_code): the tracer gives their output types
# attrs snippet (an InlineSnippet), multi; inputs are the snippet's device-value arguments
inline_triton = define_op("inline_triton", None, side_effects=True, opaque=True)
# attrs asm, constraints, dtypes, is_pure, pack, multi; inputs are the asm arguments
inline_asm = define_op("inline_asm_elementwise", None, opaque=True)
# attrs function (a TritonFunction: the @triton.jit function and what it needs at module scope),
# args (a Placeholder per argument), multi; inputs are the device-value arguments
triton_kernel = define_op("triton_kernel", None, side_effects=True, opaque=True)
