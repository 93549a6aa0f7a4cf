"""Eager mode (`HELION_INTERPRET=1`): the kernel's own Python runs in PyTorch, tiles are slices.

Two objects cooperate while a kernel runs eagerly:

- `EagerMode` is the language mode (`helion.language._context`): every `hl.*` call lands on
  one of its `hl_<name>` methods (`hl.tile` yields `RefTile`s, `hl.load` reads with masks, ...).
- `EagerTorchMode` is a `TorchFunctionMode` that gives torch calls in device code Helion's
  meaning: tiles in `x[...]` become slices, tiles given as sizes become their extents, other
  tiles stand for `tile.index`, loads are copies (never views of kernel arguments), in-place
  operators on device values rebind instead of writing, and the matmul family accumulates in
  float32 the way compiled Helion kernels do (so `torch.addmm(acc_fp32, a_fp16, b_fp16)` works).

It is independent of the frontend and IR: a kernel that runs here but fails to compile (or the
other way round) points at a frontend bug.
"""

from __future__ import annotations

import dis
import itertools
import re
import sys
import weakref
from typing import Any
from typing import Callable
from typing import Iterator
from typing import Sequence

import torch
from torch.overrides import TorchFunctionMode

from helion import exc
from helion.containers import find_device
from helion.containers import iter_tensors
from helion.eager import indexing
from helion.eager import rng
from helion.eager import sorting
from helion.eager.carried import CarriedCheck
from helion.eager.jagged import encloses_jagged
from helion.eager.jagged import jagged_end
from helion.eager.stack import EagerStackTensor
from helion.eager.stack import make_stack
from helion.eager.tiles import RefTile
from helion.frontend.loop_deps import LoopDependencies
from helion.frontend.torch_ops.creation import CREATION_OPS
from helion.frontend.torch_ops.creation import check_creation
from helion.frontend.torch_ops.creation import check_device
from helion.frontend.torch_ops.elementwise import DEVICE_MOVES
from helion.frontend.torch_table import INPLACE_METHOD_HINT
from helion.frontend.torch_table import REFUSED_INPLACE_METHODS
from helion.frontend.torch_table import torch_name
from helion.ir.core import index_dtype_for
from helion.ir.core import index_extent
from helion.language import ConstExpr
from helion.language._x16 import X16LoadEntryPoints
from helion.passes.write_overlap import internal_overlap
from helion.passes.write_overlap import overlap_error
from helion.passes.write_overlap import write_name

# what hl.register_block_size gives when no config chooses (matches the host mode's default)
REGISTERED_BLOCK_DEFAULT = 64

_DEVICE_ONLY = {
    "full",
    "arange",
    "load",
    "store",
    "atomic",
    "dot",
    "scan",
    "subscript",
    "breakpoint",
}


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _int(value: Any, what: str) -> int:
    """A loop bound or size: ints, 0-D tensors and ConstExpr values."""
    if isinstance(value, ConstExpr):
        value = value.value
    if isinstance(value, RefTile):
        raise exc.TileOfTile()
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise exc.TypeInferenceError(
                f"{what} must be a scalar, got a tensor of shape {list(value.shape)}"
            )
        if value.dtype.is_floating_point or value.dtype.is_complex:
            raise exc.TypeInferenceError(f"{what} must be an integer, got a {value.dtype} value")
        with torch._C.DisableTorchFunction():
            return int(value.item())
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            return int(value.__index__())
        except (AttributeError, TypeError):
            shown = f" {value!r}" if isinstance(value, (float, str)) else ""
            raise exc.TypeInferenceError(
                f"{what} must be an int, got {type(value).__name__}{shown}"
            ) from None
    return int(value)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple, torch.Size))


def _map_tiles(value: Any, fn: Callable[[RefTile], Any]) -> Any:
    if isinstance(value, RefTile):
        return fn(value)
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        if any(isinstance(v, (RefTile, list, tuple, dict)) for v in value):
            mapped = [_map_tiles(v, fn) for v in value]
            if type(value) in (list, tuple):
                return type(value)(mapped)
            return type(value)(*mapped)  # namedtuples
        return value
    if isinstance(value, dict):
        return {k: _map_tiles(v, fn) for k, v in value.items()}
    return value


def tiles_to_indices(value: Any) -> Any:
    return _map_tiles(value, lambda tile: tile.index)


def tiles_to_sizes(value: Any) -> Any:
    return _map_tiles(value, lambda tile: tile.extent)


def _has_tile(value: Any) -> bool:
    if isinstance(value, RefTile):
        return True
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        return any(_has_tile(v) for v in value)
    if isinstance(value, dict):
        return any(_has_tile(v) for v in value.values())
    return False


# -- the matmul family, Helion style ------------------------------------------------------------

_DOT_DTYPES = {
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.int8,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
}


def dot(
    a: torch.Tensor,
    b: torch.Tensor,
    acc: Any = None,
    out_dtype: torch.dtype | None = None,
    *,
    default_float32: bool,
) -> torch.Tensor:
    """`acc + a @ b` computed in float32 (int8: exact integers), with Helion's result dtype:
    acc's dtype, else `out_dtype`, else int32 for int8, else float32 (`hl.dot`, addmm) or the
    promoted input dtype (`torch.mm`, `@`)."""
    for operand in (a, b):
        if not isinstance(operand, torch.Tensor):
            raise exc.TypeInferenceError(
                f"matmul operands must be tensors, got {type(operand).__name__}"
            )
        if operand.dtype not in _DOT_DTYPES:
            raise exc.TypeInferenceError(f"matmul does not support {operand.dtype} inputs")
    if a.ndim not in (2, 3) or b.ndim != a.ndim:
        raise exc.RankMismatch("2-D x 2-D or 3-D x 3-D", f"{a.ndim}-D x {b.ndim}-D", " (matmul)")
    if (a.dtype == torch.int8) != (b.dtype == torch.int8):
        raise exc.TypeInferenceError(
            f"matmul of {a.dtype} with {b.dtype}: int8 must pair with int8"
        )
    if a.ndim == 3 and a.shape[0] != b.shape[0] and 1 not in (a.shape[0], b.shape[0]):
        raise exc.DotBatchDimensionMismatch(a.shape[0], b.shape[0])
    integer = a.dtype == torch.int8
    if integer:
        # float64 holds every int8 x int8 dot product of realistic K exactly, on any device
        product = torch.matmul(a.to(torch.float64), b.to(torch.float64))
    else:
        compute = torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
        product = torch.matmul(a.to(compute), b.to(compute))
    if acc is not None:
        if not isinstance(acc, torch.Tensor):
            acc = torch.as_tensor(acc, dtype=product.dtype, device=product.device)
        if integer and acc.dtype != torch.int32:
            raise exc.TypeInferenceError("int8 matmul needs an int32 accumulator")
        result_dtype = acc.dtype
        product = acc.to(product.dtype) + product
    elif out_dtype is not None:
        result_dtype = out_dtype
    elif integer:
        result_dtype = torch.int32
    elif default_float32:
        result_dtype = torch.float32
    else:
        result_dtype = torch.promote_types(a.dtype, b.dtype)
    if integer or not result_dtype.is_floating_point:
        product = product.round()
    return product.to(result_dtype)


def _addmm(
    acc: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1, out: Any = None
) -> torch.Tensor:
    if out is not None:
        raise exc.NotAllowedOnDevice("out= in a matmul")
    if beta == 1 and alpha == 1:
        return dot(a, b, acc, default_float32=True)
    product = dot(a, b, None, torch.float32, default_float32=True)
    dtype = acc.dtype if isinstance(acc, torch.Tensor) else torch.float32
    return (acc * beta + product * alpha).to(dtype)


def _mm(a: Any, b: Any, *, out: Any = None) -> torch.Tensor:
    if out is not None:
        raise exc.NotAllowedOnDevice("out= in a matmul")
    return dot(a, b, None, None, default_float32=False)


def _rmatmul(a: Any, b: Any) -> torch.Tensor:
    return dot(b, a, None, None, default_float32=False)


def _bmm(a: Any, b: Any, out_dtype: torch.dtype | None = None, *, out: Any = None) -> torch.Tensor:
    if out is not None:
        raise exc.NotAllowedOnDevice("out= in a matmul")
    return dot(a, b, None, out_dtype, default_float32=False)


_MATMUL_HANDLERS: dict[Any, Callable] = {}
for _func in (torch.addmm, torch.baddbmm, torch.Tensor.addmm, torch.Tensor.baddbmm):
    _MATMUL_HANDLERS[_func] = _addmm
for _func in (
    torch.mm,
    torch.matmul,
    torch.Tensor.mm,
    torch.Tensor.matmul,
    torch.Tensor.__matmul__,
):
    _MATMUL_HANDLERS[_func] = _mm
for _func in (torch.bmm, torch.Tensor.bmm):
    _MATMUL_HANDLERS[_func] = _bmm
_MATMUL_HANDLERS[torch.Tensor.__rmatmul__] = _rmatmul

# functions whose tile arguments are sizes (`torch.zeros([tile_m, tile_n])`, `x.view(tile, -1)`)
_SIZE_FUNCS = {
    torch.empty,
    torch.zeros,
    torch.ones,
    torch.full,
    torch.rand,
    torch.randn,
    torch.reshape,
    torch.broadcast_to,
    torch.Tensor.view,
    torch.Tensor.reshape,
    torch.Tensor.expand,
    torch.Tensor.broadcast_to,
    torch.Tensor.new_empty,
    torch.Tensor.new_zeros,
    torch.Tensor.new_ones,
    torch.Tensor.new_full,
    torch.Tensor.repeat,
}
# creation functions: in device code they default to the kernel's device
_CREATION_FUNCS = {
    torch.empty,
    torch.zeros,
    torch.ones,
    torch.full,
    torch.rand,
    torch.randn,
    torch.arange,
    torch.tensor,
}

# in-place operators on device values rebind (`acc += x` is `acc = acc + x`, as in compiled code,
# where device values are values: an alias of a loaded tile or a view of it never changes)
_INPLACE = {
    torch.Tensor.__ipow__: torch.Tensor.__pow__,  # torch's Python wrapper of `pow_`
    torch.Tensor.__iand__: torch.Tensor.__and__,
    torch.Tensor.__ior__: torch.Tensor.__or__,
    torch.Tensor.__ixor__: torch.Tensor.__xor__,
    torch.Tensor.__ilshift__: torch.Tensor.__lshift__,
    torch.Tensor.__irshift__: torch.Tensor.__rshift__,
}
# the other operators reach the mode as the in-place method itself (`w += 1` calls `Tensor.add_`,
# as `w.add_(1)` does): these rebind only when the caller's instruction is an augmented
# assignment (`_is_augmented_assignment`)
_INPLACE_METHODS = {
    torch.Tensor.add_: torch.Tensor.__add__,
    torch.Tensor.sub_: torch.Tensor.__sub__,
    torch.Tensor.mul_: torch.Tensor.__mul__,
    torch.Tensor.div_: torch.Tensor.__truediv__,
    torch.Tensor.floor_divide_: torch.Tensor.__floordiv__,
    torch.Tensor.remainder_: torch.Tensor.__mod__,
}
# the in-place methods compiled kernels refuse (an explicit `w.add_(1)`, not `w += 1`)
_REFUSED_INPLACE = frozenset(
    m for name in REFUSED_INPLACE_METHODS if (m := getattr(torch.Tensor, name, None)) is not None
)
_BINARY_OP = dis.opmap.get("BINARY_OP")
# BINARY_OP's arguments that are augmented assignments (NB_INPLACE_ADD ... NB_INPLACE_XOR)
_INPLACE_ARGS = frozenset(
    i for i, (name, _) in enumerate(getattr(dis, "_nb_ops", ())) if name.startswith("NB_INPLACE_")
) or frozenset(range(13, 26))


def _is_augmented_assignment() -> bool:
    """Whether the torch call being handled comes from `a += b` (and the like) rather than a
    call of the in-place method: the instruction its caller is running. Torch's C operators
    call the mode directly, so the caller is the frame below `EagerTorchMode.__torch_function__`."""
    frame = sys._getframe(2)
    if _BINARY_OP is None:
        return False
    code, lasti = frame.f_code.co_code, frame.f_lasti
    return code[lasti] == _BINARY_OP and code[lasti + 1] in _INPLACE_ARGS


# reductions without an identity: over a dimension of size 0 compiled kernels raise
# EmptyReduction at trace time, torch an IndexError; eager mode raises what compiled code does
_NO_IDENTITY = frozenset(
    getattr(owner, name)
    for owner in (torch, torch.Tensor)
    for name in ("amax", "amin", "argmax", "argmin", "max", "min")
)


def _check_not_empty(func: Any, args: tuple, kwargs: dict, kernel: Any) -> None:
    x = args[0] if args else kwargs.get("input")
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if not isinstance(x, torch.Tensor) or x.ndim == 0 or isinstance(dim, torch.Tensor):
        return  # a 0-d tensor has one element; torch.max(a, b) is elementwise
    if dim is None or dim == ():
        empty = [d for d, size in enumerate(x.shape) if size == 0]
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        empty = [int(d) % max(x.ndim, 1) for d in dims if x.shape[int(d)] == 0]
    if empty:
        raise exc.EmptyReduction(f"torch.{func.__name__}", empty[0], loc=_kernel_line(kernel))


def _kernel_line(kernel: Any) -> exc.SourceLocation:
    """Where the kernel's own code is running: the innermost frame of its function, as compiled
    kernels name it (the call may come through a helper the kernel called); else the caller."""
    code = getattr(getattr(kernel, "fn", kernel), "__code__", None)
    frame = caller = sys._getframe(3)  # past this, the check and `__torch_function__`
    while frame is not None and code is not None:
        if (frame.f_code.co_filename, frame.f_code.co_name) == (code.co_filename, code.co_name):
            return exc.SourceLocation(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return exc.SourceLocation(caller.f_code.co_filename, caller.f_lineno)


class EagerTorchMode(TorchFunctionMode):
    """Gives torch calls in device code (inside `hl.tile` / `hl.grid` loops) Helion's meaning;
    host code runs untouched."""

    def __init__(self, mode: EagerMode) -> None:
        super().__init__()
        self.mode = mode

    def __torch_function__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if self.mode.depth == 0:
            if self.mode.made_tiles and (_has_tile(args) or _has_tile(kwargs)):
                raise exc.IncorrectTileUsage("a tile used outside its loop")
            return func(*args, **kwargs)
        if func is torch.Tensor.__getitem__:
            tensor, index = args
            self.mode.access(tensor, False)
            return indexing.load(tensor, index)
        if func is torch.Tensor.__setitem__:
            tensor, index, value = args
            self.mode.access(tensor, True)
            self.mode.check_write(tensor, write_name("store"))
            indexing.store(tensor, index, tiles_to_indices(value))
            return None
        if func in CREATION_OPS:
            kwargs = self.mode.check_placement(func, kwargs)
        elif func in DEVICE_MOVES:
            name, named_device = DEVICE_MOVES[func]
            check_device(self.mode, name, named_device(*args[1:], **kwargs))
        random = rng.TORCH_HANDLERS.get(func)
        if random is not None:
            return random(self.mode, *args, **kwargs)
        handler = _MATMUL_HANDLERS.get(func) or sorting.HANDLERS.get(func)
        if handler is not None:
            try:
                return handler(*tiles_to_indices(args), **tiles_to_indices(kwargs))
            except RuntimeError as error:
                raise _helion_error(error, func, self.mode)  # noqa: B904
        inplace = _INPLACE.get(func)
        if inplace is None and func in _INPLACE_METHODS and _is_augmented_assignment():
            inplace = _INPLACE_METHODS[func]
        if inplace is not None:
            try:
                return inplace(*tiles_to_indices(args), **kwargs)
            except RuntimeError as error:
                raise _helion_error(error, inplace, self.mode)  # noqa: B904
        if func in _NO_IDENTITY:
            _check_not_empty(func, args, kwargs, self.mode.kernel)
        if func in _REFUSED_INPLACE:
            what, hint = INPLACE_METHOD_HINT
            caller = sys._getframe(1)  # the kernel's line: torch's C method calls the mode directly
            loc = exc.SourceLocation(caller.f_code.co_filename, caller.f_lineno)
            raise exc.NotAllowedOnDevice(f"{what} ({hint})", loc=loc)
        if func in _SIZE_FUNCS:
            args, kwargs = tiles_to_sizes(args), tiles_to_sizes(kwargs)
        elif _has_tile(args) or _has_tile(kwargs):
            args, kwargs = tiles_to_indices(args), tiles_to_indices(kwargs)
        if func in _CREATION_FUNCS and "device" not in kwargs:
            kwargs = dict(kwargs, device=self.mode.device)
        try:
            result = func(*args, **kwargs)
        except RuntimeError as error:
            raise _helion_error(error, func, self.mode)  # noqa: B904
        if func in _CREATION_FUNCS and self.mode.depth:
            self.mode.made_on_device(result)
        return result


_SHAPE_ERRORS = (
    "must match the size of tensor",
    "is invalid for input of size",
    "The expanded size of the tensor",
    "cannot be multiplied",
    "shape mismatch",
)
_NEGATIVE_SIZE = re.compile(r"negative dimension (-\d+)")


def _helion_error(error: RuntimeError, func: Any, mode: EagerMode | None = None) -> BaseException:
    """The error compiled kernels give for what a torch call in device code raised (shapes that
    do not broadcast, a negative size, an integer division by zero), else `error` itself. The
    kernel's line is added by `run_eager`."""
    translated = _translate(error, func)
    if isinstance(translated, exc.ShapeMismatch) and mode is not None:
        partial = [
            tile
            for tiles in mode.running_tiles
            for tile in tiles
            if isinstance(tile, RefTile) and tile.end - tile.begin < tile.block_size
        ]
        if partial:  # the likely cause: a value sized by the block size, not by the tile
            tile = partial[0]
            translated.hint = (
                f"Eager mode runs a partial last tile ({tile.begin}:{tile.end}, "
                f"{tile.end - tile.begin} of block size {tile.block_size}) with only its valid "
                "lanes; a value sized by the block size (hl.arange(tile.block_size), "
                "hl.zeros([tile.block_size])) does not match it. Size it by the tile "
                "(tile.index, hl.zeros([tile])), or pick a block size that divides the range."
            )
    return error if translated is None else translated


def _translate(error: RuntimeError, func: Any) -> exc.BaseError | None:
    if isinstance(error, exc.BaseError):
        return None
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = getattr(func, "__name__", str(func))
    if any(pattern in text for pattern in _SHAPE_ERRORS):
        return exc.ShapeMismatch(f"{text} (in {name})")
    negative = _NEGATIVE_SIZE.search(text)
    if negative:
        return exc.NegativeSize(int(negative.group(1)), f"the shape of {name}")
    if text == "ZeroDivisionError":
        kind = "remainder" if any(k in name for k in ("mod", "remainder")) else "division"
        return exc.IntegerDivisionByZero(kind, "a lane of the divisor is 0")
    return None


class BlockSizeValue(int):
    """What `hl.register_block_size` returns in eager mode: the chosen size (an int)."""

    block_id: int

    def __new__(cls, value: int, block_id: int) -> BlockSizeValue:
        self = super().__new__(cls, value)
        self.block_id = block_id
        return self


class EagerMode(X16LoadEntryPoints):
    """The language mode of an eagerly running kernel (see the module docstring)."""

    def __init__(self, kernel: Any, args: Sequence[Any]) -> None:
        self.kernel = kernel
        tensors = list(iter_tensors(args))
        self.device = find_device(args) or torch.device("cpu")
        numel = max((index_extent(t) for t in tensors), default=0)
        requested = getattr(getattr(kernel, "settings", None), "index_dtype", None)
        self.index_dtype = index_dtype_for(requested, numel)
        self.depth = 0  # how many hl.tile / hl.grid loops are running around the current code
        # what the top-level loops wrote since the last barrier (compiled kernels run them
        # concurrently: a later loop may not touch it, `helion.frontend.loop_deps`)
        self.loop_deps = LoopDependencies()
        self.made_tiles = False  # whether host code could hold a tile (then torch calls check)
        self.next_block_id = 0
        configs = list(getattr(kernel, "configs", []) or [])
        self.config = configs[0] if len(configs) == 1 else None
        self.args = tuple(args)  # where StackTensor pointers may point (see eager.stack)
        self.fn = getattr(kernel, "fn", kernel)
        self.running_tiles: list[tuple] = []  # the current tiles of each running loop, outer first
        self.rng_call_seed: int | None = None  # torch.rand's seed for this call (eager.rng)
        # (shape, strides) -> whether the elements of a tensor of that layout overlap in memory
        self.overlaps: dict[tuple[tuple[int, ...], tuple[int, ...]], bool | None] = {}
        self.tunables: dict[str, Any] = {}  # hl.register_tunable's names this run
        self.warned_block_sizes = False
        # storage address -> a tensor made in device code there (atomics refuse such targets)
        self.device_made: weakref.WeakValueDictionary[int, torch.Tensor] = (
            weakref.WeakValueDictionary()
        )

    # -- misuse ----------------------------------------------------------------------------------

    def unsupported(self, api_name: str) -> Any:
        raise exc.NotAllowedOnDevice(f"hl.{api_name} (not available in eager mode)")

    def _device_only(self, api_name: str) -> None:
        if self.depth == 0:
            raise exc.DeviceAPIOnHost(f"hl.{api_name}")

    def current_loc(self) -> exc.SourceLocation | None:
        """The kernel's line running now (the innermost frame of the kernel's function), as the
        tracer's `current_loc` gives it: the checks shared with compiled kernels
        (`helion.frontend.torch_ops.creation`) name it. None: `run_eager` adds it."""
        code = getattr(self.fn, "__code__", None)
        frame = sys._getframe(1)
        while frame is not None and code is not None:
            if (frame.f_code.co_filename, frame.f_code.co_name) == (code.co_filename, code.co_name):
                return exc.SourceLocation.from_frame(frame)
            frame = frame.f_back
        return None

    def check_placement(self, func: Any, kwargs: dict) -> dict:
        """Refuse a creation op's placement arguments that compiled kernels refuse (a device
        other than the kernel's, a layout other than strided, pin_memory, requires_grad), with
        the same check; the keywords of the call, a device given being the kernel's own."""
        check_creation(
            self,
            torch_name(func),
            layout=kwargs.get("layout"),
            device=kwargs.get("device"),
            pin_memory=kwargs.get("pin_memory", False),
            requires_grad=kwargs.get("requires_grad", False),
        )
        if kwargs.get("device") is not None:
            kwargs = dict(kwargs, device=self.device)
        return kwargs

    def check_write(self, tensor: Any, what: str) -> None:
        """Refuse a write (`what`: a store, an atomic) into a tensor whose elements overlap in
        memory (an `expand()`ed view), as compiled kernels refuse it when traced
        (`helion.passes.write_overlap`), instead of torch's error or a silent result."""
        if not isinstance(tensor, torch.Tensor):
            return
        shape, stride = tuple(tensor.shape), tuple(tensor.stride())
        key = (shape, stride)
        if key not in self.overlaps:
            with torch._C.DisableTorchFunction():
                self.overlaps[key] = internal_overlap(shape, stride)
        overlap = self.overlaps[key]
        if overlap is not False:
            name = indexing._local_name(tensor)
            raise overlap_error(what, name, overlap, shape, stride, loc=self.current_loc())

    # -- loops -----------------------------------------------------------------------------------

    def _ranges(
        self, begin_or_end: Any, end_or_none: Any
    ) -> tuple[bool, list[int], list[int], list[bool]]:
        """Whether the loop is multi-dim, its begins and ends, and per dim whether a bound was a
        device value (data-dependent: compiled kernels then run a reversed range zero times)."""
        multi = _is_sequence(begin_or_end) or _is_sequence(end_or_none)
        if end_or_none is None:
            ends = list(begin_or_end) if _is_sequence(begin_or_end) else [begin_or_end]
            begins: list[Any] = [0] * len(ends)
        else:
            begins = list(begin_or_end) if _is_sequence(begin_or_end) else [begin_or_end]
            ends = list(end_or_none) if _is_sequence(end_or_none) else [end_or_none]
        if len(begins) != len(ends):
            raise exc.RankMismatch(len(begins), len(ends), "begin and end of hl.tile")
        begin_ints = [_int(b, "a loop bound") for b in begins]
        end_ints = [_int(e, "a loop bound") for e in ends]
        data_dependent = [
            isinstance(b, torch.Tensor) or isinstance(e, torch.Tensor)
            for b, e in zip(begins, ends, strict=True)
        ]
        return multi, begin_ints, end_ints, data_dependent

    def _warn_config_block_sizes(self) -> None:
        """Public Helion's BlockSizeIgnoredInInterpretMode, once a run: the kernel's config
        gives block sizes, and eager mode runs each tunable tile loop as one tile."""
        sizes = self.config.get("block_sizes") if self.config is not None else None
        if sizes and not self.warned_block_sizes:
            self.warned_block_sizes = True
            settings = getattr(self.kernel, "settings", None)
            exc.warn(exc.BlockSizeIgnoredInInterpretMode(list(sizes)), settings, stacklevel=4)

    def hl_tile(
        self, begin_or_end: Any, end_or_none: Any = None, *, block_size: Any = None
    ) -> Iterator[Any]:
        multi, begins, ends, data_dependent = self._ranges(begin_or_end, end_or_none)
        if _is_sequence(block_size):
            block_sizes = list(block_size)
            if len(block_sizes) != len(ends):
                raise exc.RankMismatch(len(ends), len(block_sizes), "block_size of hl.tile")
        else:
            block_sizes = [block_size] * len(ends)
        if encloses_jagged(self.fn):
            # the parent of the jagged loop inside then holds one length (see eager.jagged)
            block_sizes = [1] * len(ends)
        steps = []
        for i, (begin, end, size) in enumerate(zip(begins, ends, block_sizes, strict=True)):
            if begin > end:
                if not data_dependent[i]:  # compiled kernels refuse it when tracing
                    raise exc.InvalidTileRange(begin, end)
                end = ends[i] = begin  # empty, as a compiled loop over device bounds
            if size is None:
                # an autotuned block size: one tile spans the range
                steps.append(max(end - begin, 1))
                self._warn_config_block_sizes()
            else:
                step = _int(size, "block_size")
                if step <= 0:
                    raise exc.InvalidConfig(f"block_size must be positive, got {step}")
                steps.append(step)
        self.made_tiles = True
        per_dim = [
            [
                RefTile(b, min(b + step, end), step, begin, end, self.index_dtype, self.device)
                for b in range(begin, end, step)
            ]
            for begin, end, step in zip(begins, ends, steps, strict=True)
        ]
        return self._loop(per_dim, multi)

    def hl_grid(
        self, begin_or_end: Any, end_or_none: Any = None, *, step: Any = None
    ) -> Iterator[Any]:
        multi, begins, ends, _ = self._ranges(begin_or_end, end_or_none)
        if step not in (None, 1):  # as compiled kernels refuse it
            raise exc.GridStepNotSupported(step)
        per_dim = [list(range(b, e)) for b, e in zip(begins, ends, strict=True)]
        return self._loop(per_dim, multi)

    def hl_jagged_tile(self, parent: Any) -> Iterator[Any]:
        if self.depth == 0:
            raise exc.InvalidJaggedTileUsage(
                "hl.jagged_tile cannot be the outermost loop; iterate the rows with hl.tile first"
            )
        end = jagged_end(parent)
        tiles = (
            [RefTile(0, end, max(end, 1), 0, end, self.index_dtype, self.device)] if end > 0 else []
        )
        self.made_tiles = True
        return self._loop([tiles], False)

    def hl_stacktensor_like(self, tensor_like: Any, dev_ptrs: Any) -> Any:
        return make_stack(tensor_like, dev_ptrs, self.args, self.depth)

    def _loop(self, per_dim: list[list[Any]], multi: bool) -> Iterator[Any]:
        # a nested loop's carried values keep their types, as compiled kernels require (the
        # frame resuming this generator is the one running the `for`)
        carried = CarriedCheck(sys._getframe(1)) if self.depth else None
        if not self.depth:
            self.loop_deps.begin_loop()
        self.depth += 1
        self.running_tiles.append(())
        try:
            for position, combo in enumerate(itertools.product(*per_dim)):
                if carried is not None and position:
                    carried.check()
                self.running_tiles[-1] = combo
                yield tuple(combo) if multi else combo[0]
            if carried is not None:
                carried.check()
        finally:
            self.running_tiles.pop()
            self.depth -= 1
            if not self.depth:
                self.loop_deps.end_loop()

    def hl_barrier(self) -> None:
        if self.depth:
            raise exc.BarrierOnlyAllowedAtTopLevel()
        # loops run one after the other here: nothing to wait for, but later loops may now
        # touch what earlier ones wrote
        self.loop_deps.barrier()

    def access(self, tensor: Any, write: bool) -> None:
        """A device-code read or write of host tensor ``tensor`` (`LoopDependencyError` when an
        earlier top-level loop wrote it with no barrier between)."""
        if not isinstance(tensor, torch.Tensor) or not tensor.numel():
            return
        with torch._C.DisableTorchFunction():
            if self._is_device_made(tensor):
                return
            key = tensor.untyped_storage().data_ptr()
        self.loop_deps.access(key, lambda: indexing._local_name(tensor), write, self.current_loc())

    # -- tunables ----------------------------------------------------------------------------------

    def hl_register_block_size(self, low: Any, high: Any) -> int:
        if self.depth:
            raise exc.NotAllowedOnDevice(
                "hl.register_block_size (call it in host code, before the loop)"
            )
        low_value = _int(low, "the minimum of hl.register_block_size")
        if low_value <= 0 or low_value & (low_value - 1):
            raise exc.InvalidConfig(
                f"hl.register_block_size: the minimum {low_value} must be a power of two"
            )
        block_id = self.next_block_id
        self.next_block_id += 1
        value = max(
            low_value,
            min(
                _next_pow2(_int(high, "the maximum of hl.register_block_size")),
                REGISTERED_BLOCK_DEFAULT,
            ),
        )
        return BlockSizeValue(value, block_id)

    def hl_register_tunable(self, name: str, fragment: Any) -> Any:
        if self.depth:
            raise exc.NotAllowedOnDevice(
                "hl.register_tunable (call it in host code, before the loop)"
            )
        # the checks ConfigSpec.add_user_tunable makes for compiled kernels
        from helion.autotuner.config_fragment import ConfigSpecFragment
        from helion.autotuner.config_spec import is_builtin_key

        if not isinstance(name, str) or not isinstance(fragment, ConfigSpecFragment):
            raise exc.RegisterTunableArgTypes(type(name).__name__, type(fragment).__name__)
        if is_builtin_key(name) or self.tunables.setdefault(name, fragment) != fragment:
            raise exc.TunableNameConflict(name)
        if self.config is not None and name in self.config:
            return self.config[name]
        return fragment.default()

    def hl_specialize(self, value: Any) -> Any:
        if self.depth:
            raise exc.SpecializeOnDevice()
        if _is_sequence(value):
            return tuple(_int(v, "hl.specialize") for v in value)
        if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
            raise exc.SpecializeArgType(type(value).__name__)
        return int(value)

    # -- creation ----------------------------------------------------------------------------------

    def _size(self, item: Any) -> int:
        if isinstance(item, RefTile):
            return item.extent
        size = _int(item, "a shape entry")
        if size < 0:
            raise exc.NegativeSize(size)
        return size

    def hl_full(self, shape: list, value: Any, dtype: torch.dtype) -> torch.Tensor:
        self._device_only("full")
        sizes = [self._size(s) for s in shape]
        if isinstance(value, ConstExpr):
            value = value.value
        if isinstance(value, RefTile):
            value = value.index
        with torch._C.DisableTorchFunction():
            if isinstance(value, torch.Tensor):
                if value.ndim != 0:
                    raise exc.ShapeMismatch(
                        "hl.full fills a tensor with one value, got a device tensor of shape "
                        f"{list(value.shape)}",
                        hint="Pass a number or a 0-D value; to broadcast a tensor to a shape use "
                        "value.expand(...) or value[:, None] + hl.zeros([...]).",
                    )
                filled = torch.zeros(sizes, dtype=dtype, device=self.device)
                return self.made_on_device(filled.fill_(value.reshape(())))
            if not isinstance(value, (bool, int, float)):
                raise exc.TypeInferenceError(
                    f"hl.full value must be a number, got {type(value).__name__}"
                )
            return self.made_on_device(torch.full(sizes, value, dtype=dtype, device=self.device))

    def made_on_device(self, tensor: Any) -> Any:
        """Note ``tensor`` as made in device code (compiled kernels keep such tensors in
        registers, so atomics refuse them), and return it."""
        if isinstance(tensor, torch.Tensor) and tensor.numel():
            self.device_made[tensor.untyped_storage().data_ptr()] = tensor
        return tensor

    def _is_device_made(self, tensor: torch.Tensor) -> bool:
        if not tensor.numel():
            return False
        address = tensor.untyped_storage().data_ptr()
        made = self.device_made.get(address)
        # a live tensor at that address: the target is it or a view of its storage
        return made is not None and made.untyped_storage().data_ptr() == address

    def hl_rand(self, shape: list, seed: Any, offsets: Any = None) -> torch.Tensor:
        return rng.hl_rand(self, shape, seed, offsets)

    def hl_randint(self, shape: list, low: Any, high: Any, seed: Any) -> torch.Tensor:
        return rng.hl_randint(self, shape, low, high, seed)

    def hl_rand4x(self, seed: Any, offsets: Any) -> tuple:
        return rng.hl_rand4x(self, seed, offsets)

    def hl_arange(self, *args: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
        self._device_only("arange")
        if len(args) == 1:
            start, end = 0, self._size(args[0])
        elif len(args) == 2:
            start = _int(args[0], "hl.arange start")
            end = (
                start + self._size(args[1])
                if isinstance(args[1], RefTile)
                else _int(args[1], "hl.arange end")
            )
        else:
            raise exc.NotAllowedOnDevice("hl.arange with a step")
        if end < start:
            call = f"hl.arange({start}, {end})" if len(args) == 2 else f"hl.arange({end})"
            raise exc.NegativeSize(end - start, call)
        with torch._C.DisableTorchFunction():
            return torch.arange(start, end, dtype=dtype or self.index_dtype, device=self.device)

    # -- memory ------------------------------------------------------------------------------------

    def hl_load(
        self, tensor: Any, index: list, extra_mask: Any = None, eviction_policy: str | None = None
    ) -> torch.Tensor:
        self._device_only("load")
        if eviction_policy not in (None, "", "evict_first", "evict_last", "first", "last"):
            raise exc.InvalidConfig(
                f"eviction_policy must be evict_first or evict_last, got {eviction_policy!r}"
            )
        if isinstance(tensor, EagerStackTensor):
            return tensor.load(list(index), tiles_to_indices(extra_mask))
        if not isinstance(tensor, torch.Tensor):
            raise exc.InvalidIndexingType(f"hl.load of a {type(tensor).__name__}")
        self.access(tensor, False)
        with torch._C.DisableTorchFunction():
            return indexing.load(tensor, list(index), tiles_to_indices(extra_mask))

    def hl_store(self, tensor: Any, index: list, value: Any, extra_mask: Any = None) -> None:
        self._device_only("store")
        if isinstance(tensor, EagerStackTensor):
            return tensor.store(list(index), tiles_to_indices(value), tiles_to_indices(extra_mask))
        if not isinstance(tensor, torch.Tensor):
            raise exc.NonTensorSubscriptAssign(type(tensor).__name__)
        self.access(tensor, True)
        self.check_write(tensor, write_name("store"))
        with torch._C.DisableTorchFunction():
            indexing.store(
                tensor, list(index), tiles_to_indices(value), tiles_to_indices(extra_mask)
            )

    def hl_atomic(
        self,
        kind: str,
        target: Any,
        index: list,
        value: Any,
        sem: str = "relaxed",
        expected: Any = None,
    ) -> torch.Tensor:
        self._device_only("atomic")
        if isinstance(target, EagerStackTensor):
            raise exc.NotAllowedOnDevice(f"hl.atomic_{kind} on a StackTensor")
        if not isinstance(target, torch.Tensor) or self._is_device_made(target):
            raise exc.AtomicOnDeviceTensor(f"hl.atomic_{kind}")
        if sem not in ("relaxed", "acquire", "release", "acq_rel"):
            raise exc.InvalidConfig(
                f"sem must be relaxed, acquire, release or acq_rel, got {sem!r}"
            )
        if kind in ("and", "or", "xor") and target.dtype.is_floating_point:
            raise exc.TypeInferenceError(
                f"hl.atomic_{kind} needs an integer or bool target, got {target.dtype}"
            )
        self.access(target, True)
        self.check_write(target, write_name("atomic", kind))
        with torch._C.DisableTorchFunction():
            return indexing.atomic(
                kind, target, list(index), tiles_to_indices(value), tiles_to_indices(expected)
            )

    def hl_split(self, tensor: Any) -> tuple[torch.Tensor, torch.Tensor]:
        self._device_only("split")
        if not isinstance(tensor, torch.Tensor) or tensor.ndim == 0 or tensor.shape[-1] != 2:
            shape = (
                list(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            )
            raise exc.ShapeMismatch(f"hl.split needs a last dimension of size 2, got {shape}")
        with torch._C.DisableTorchFunction():
            return tensor[..., 0], tensor[..., 1]

    def hl_join(self, t0: Any, t1: Any) -> torch.Tensor:
        self._device_only("join")
        with torch._C.DisableTorchFunction():
            a, b = (torch.as_tensor(tiles_to_indices(t), device=self.device) for t in (t0, t1))
            dtype = torch.result_type(a, b)
            a, b = torch.broadcast_tensors(a.to(dtype), b.to(dtype))
            return torch.stack([a, b], dim=-1)

    def hl_subscript(self, tensor: Any, index: list) -> torch.Tensor:
        self._device_only("subscript")
        with torch._C.DisableTorchFunction():
            return tensor[tuple(index)]

    # -- matmul, scans, debug ------------------------------------------------------------------------

    def hl_dot(
        self, mat1: Any, mat2: Any, acc: Any = None, out_dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        self._device_only("dot")
        with torch._C.DisableTorchFunction():
            return dot(mat1, mat2, acc, out_dtype, default_float32=True)

    def hl_dot_scaled(
        self,
        mat1: Any,
        mat1_scale: Any,
        mat1_format: Any,
        mat2: Any,
        mat2_scale: Any,
        mat2_format: Any,
        acc: Any = None,
        out_dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        from helion.eager import special_ops

        self._device_only("dot_scaled")
        with torch._C.DisableTorchFunction():
            return special_ops.dot_scaled(
                mat1, mat1_scale, mat1_format, mat2, mat2_scale, mat2_format, acc, out_dtype
            )

    def hl_inline_triton(self, triton_source: Any, args: Any, output_like: Any) -> Any:
        from helion.eager import special_ops

        raise special_ops.triton_only(
            "inline_triton", special_ops.INLINE_TRITON_HINT, loc=_kernel_line(self.kernel)
        )

    def hl_float4_e2m1fn_x2_to_float32(self, value: Any) -> Any:
        from helion.language import _float4

        return _float4.unpack(value)

    def _load_x16(self, api: str, storage: Any, group_offsets: Any, extra_mask: Any) -> tuple:
        from helion.language import _x16

        self._device_only(api.removeprefix("hl."))
        if not isinstance(storage, torch.Tensor):
            raise exc.TypeInferenceError(
                f"{api} reads memory: its storage must be a kernel tensor argument, "
                f"got {type(storage).__name__}"
            )
        group_offsets = tiles_to_indices(group_offsets)
        extra_mask = tiles_to_indices(extra_mask)
        _x16.check_storage(api, storage)
        _x16.check_offsets(api, group_offsets)
        return _x16.load_x16(api, storage, group_offsets, extra_mask)

    def hl_triton_kernel(self, triton_source_or_fn: Any, args: Any, output_like: Any) -> Any:
        from helion.eager import special_ops

        raise special_ops.triton_only(
            "triton_kernel", special_ops.INLINE_TRITON_HINT, loc=_kernel_line(self.kernel)
        )

    def hl_inline_asm_elementwise(self, *args: Any) -> Any:
        from helion.eager import special_ops

        raise special_ops.triton_only(
            "inline_asm_elementwise", special_ops.INLINE_ASM_HINT, loc=_kernel_line(self.kernel)
        )

    def hl_scan(self, kind: str, input: Any, dim: int, reverse: bool = False) -> torch.Tensor:
        self._device_only("scan")
        scan = {"cumsum": torch.cumsum, "cumprod": torch.cumprod}.get(kind)
        if scan is None:
            raise exc.NotAllowedOnDevice(f"hl.{kind} (not available in eager mode)")
        with torch._C.DisableTorchFunction():
            values = tiles_to_indices(input)
            if reverse:
                return scan(values.flip(dim), dim).flip(dim)
            return scan(values, dim)

    def hl_reduce(
        self,
        combine_fn: Any,
        input_tensor: Any,
        dim: Any = None,
        *,
        other: Any = 0,
        keep_dims: bool = False,
    ) -> Any:
        from helion.language._combine import eager_reduce

        self._device_only("reduce")
        return eager_reduce(combine_fn, tiles_to_indices(input_tensor), dim, other, keep_dims)

    def hl_associative_scan(
        self,
        combine_fn: Any,
        input_tensor: Any,
        dim: Any,
        *,
        reverse: bool = False,
        tuple_form: bool | None = None,
    ) -> Any:
        from helion.language._combine import eager_scan

        self._device_only("associative_scan")
        return eager_scan(combine_fn, tiles_to_indices(input_tensor), dim, reverse, tuple_form)

    def hl_device_print(self, prefix: str, *values: Any) -> None:
        print(prefix, *values)

    def hl_breakpoint(self) -> None:
        self._device_only("breakpoint")
        sys.breakpointhook()
