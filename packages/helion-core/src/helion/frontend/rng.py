"""Random numbers in traced device code: `hl.rand`, `hl.randint`, `hl.rand4x` and `torch.rand`,
`torch.randn`, `torch.rand_like`, `torch.randn_like`.

Each becomes one `ops.random` node on (seed, offsets). The default offsets are built here from
ordinary IR ops (tile indices, aranges, products, sums), so backends only lower the Philox
evaluation itself:

    offsets = sum(index_d * prod(extent_e for e > d))

where a tile's index is `tile.index` and its extent the end of the loop it belongs to (the tile's
full logical extent), and a size n contributes `arange(n)` with extent n. The values therefore
depend on the seed and the logical positions only, never on block sizes or other config choices.

`torch.rand` & co. have no seed argument: the kernel gets one extra int64 scalar argument
(`KernelIR.rng_seed`) that every launch draws from torch's CPU generator, and each call site adds
its position (line and column) as the high word of the Philox key, so sites are independent.
"""

from __future__ import annotations

from typing import Any
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import HostTensor
from helion.frontend.proxies import SymDim
from helion.frontend.proxies import TileProxy
from helion.ir.core import ScalarArg
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.language import ConstExpr
from helion.language import _ops as ops
from helion.language import philox

# -- seeds and offsets -----------------------------------------------------------------------------


def seed_operand(tracer: Any, seed: Any, api: str) -> Any:
    """An int (baked into the code) or a 0-D int64 value."""
    if isinstance(seed, ConstExpr):
        seed = seed.value
    if isinstance(seed, int) and not isinstance(seed, bool):
        return int(seed)
    if isinstance(seed, HostTensor):
        if seed.numel() != 1:
            raise exc.TypeInferenceError(
                f"{api}: a seed tensor must have one element, got shape {list(seed.shape)}",
                loc=tracer.current_loc(),
            )
        seed = tracer.load(seed, (0,) * seed.ndim, None, None)
    if isinstance(seed, DeviceValue):
        value = seed.value
        if value.dtype.is_floating_point or value.dtype == torch.bool:
            raise exc.TypeInferenceError(
                f"{api}: the seed must be an integer, got {value.dtype}", loc=tracer.current_loc()
            )
        if any(d != 1 for d in value.shape):
            raise exc.TypeInferenceError(
                f"{api}: the seed must be a scalar, got a value of shape {list(value.shape)}",
                loc=tracer.current_loc(),
            )
        if value.shape:
            value = tracer.emit(ops.view_reshape, [value], {"shape": ()}).output
        if value.dtype != torch.int64:
            value = tracer.emit(ops.cast, [value], {"dtype": torch.int64}).output
        return value
    raise exc.TypeInferenceError(
        f"{api}: the seed must be an int or a 1-element integer tensor, not {type(seed).__name__}",
        loc=tracer.current_loc(),
    )


def _block_of(tracer: Any, symbol: sympy.Expr) -> Any:
    for info in tracer.ir.block_sizes:
        if info.symbol == symbol:
            return info
    return None


def _arange(tracer: Any, length: sympy.Expr) -> Value:
    attrs = {"start": 0, "length": length, "dtype": tracer.ir.index_dtype}
    return tracer.emit(ops.arange, [], attrs).output


def _dim_index(tracer: Any, dim: sympy.Expr) -> tuple[Value, Any]:
    """The 1-D logical indices along one dimension and that dimension's full extent."""
    dim = sympy.sympify(dim)
    if dim.is_Integer:
        return _arange(tracer, dim), int(dim)
    info = _block_of(tracer, dim) if dim.is_Symbol else None
    if info is not None and info.kind == "reduction":
        return _arange(tracer, dim), info.size_hint
    if info is not None and info.block_id in tracer.open_tiles:
        _, end, tile = tracer.open_tiles[info.block_id]
        return tracer.tile_attr(TileProxy(tracer, tile), "index").value, end
    return _arange(tracer, dim), dim  # a block size used as a size: its own range


def _mul(tracer: Any, a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, int) and a == 1:
        return b
    if isinstance(b, int) and b == 1:
        return a
    return tracer.emit(ops.BINARY["mul"], [a, b]).output


def default_offsets(tracer: Any, dims: Sequence[sympy.Expr]) -> Value:
    """Row-major linear indices over the full logical extents of `dims` (see the module doc)."""
    rank = len(dims)
    if rank == 0:
        return tracer.emit(ops.constant, [], {"value": 0, "dtype": tracer.ir.index_dtype}).output
    parts = [_dim_index(tracer, d) for d in dims]
    offsets: Value | None = None
    stride: Any = 1
    for axis in reversed(range(rank)):
        index, extent = parts[axis]
        if rank > 1:
            items = tuple("slice" if a == axis else None for a in range(rank))
            shape = tuple(index.shape[0] if a == axis else sympy.Integer(1) for a in range(rank))
            index = tracer.emit(
                ops.view_subscript, [index], {"items": items, "shape": shape}
            ).output
        term = _mul(tracer, index, stride)
        offsets = (
            term if offsets is None else tracer.emit(ops.BINARY["add"], [term, offsets]).output
        )
        stride = _mul(tracer, stride, extent)
    return offsets


def _explicit_offsets(tracer: Any, offsets: Any, api: str) -> Value:
    if isinstance(offsets, HostTensor):
        raise exc.TypeInferenceError(
            f"{api}: offsets must be a device tensor (load a tile of {offsets.arg.name} first)",
            loc=tracer.current_loc(),
        )
    if isinstance(offsets, TileProxy):
        offsets = offsets.index
    value = tracer.as_value(offsets)
    if value.dtype.is_floating_point or value.dtype == torch.bool:
        raise exc.TypeInferenceError(
            f"{api}: offsets must be integers, got {value.dtype}", loc=tracer.current_loc()
        )
    if value.dtype not in (torch.int32, torch.int64):
        value = tracer.emit(ops.cast, [value], {"dtype": torch.int32}).output
    return value


def _random(tracer: Any, seed: Any, offsets: Value, dist: str, **attrs: Any) -> DeviceValue:
    node = tracer.emit(ops.random, [seed, offsets], {"dist": dist, **attrs})
    return tracer.wrap(node)


# -- hl.rand, hl.randint, hl.rand4x -------------------------------------------------------------------


def _shape_dims(tracer: Any, shape: Sequence[Any]) -> tuple[sympy.Expr, ...]:
    return tuple(tracer.shape_item(item) for item in shape)


def hl_rand(tracer: Any, shape: list, seed: Any, offsets: Any = None) -> DeviceValue:
    seed_value = seed_operand(tracer, seed, "hl.rand")
    if offsets is not None:
        counters = _explicit_offsets(tracer, offsets, "hl.rand")
    else:
        counters = default_offsets(tracer, _shape_dims(tracer, shape))
    return _random(tracer, seed_value, counters, "uniform", lane=0)


def hl_randint(tracer: Any, shape: list, low: Any, high: Any, seed: Any) -> DeviceValue:
    low, high = (b.value if isinstance(b, ConstExpr) else b for b in (low, high))
    low, high = (int(b) if isinstance(b, SymDim) else b for b in (low, high))
    try:
        philox.check_int_range(low, high)
    except (TypeError, ValueError) as error:
        raise exc.TypeInferenceError(str(error), loc=tracer.current_loc()) from None
    seed_value = seed_operand(tracer, seed, "hl.randint")
    counters = default_offsets(tracer, _shape_dims(tracer, shape))
    return _random(tracer, seed_value, counters, "randint", low=low, high=high)


def hl_rand4x(tracer: Any, seed: Any, offsets: Any) -> tuple:
    seed_value = seed_operand(tracer, seed, "hl.rand4x")
    counters = _explicit_offsets(tracer, offsets, "hl.rand4x")
    return tuple(_random(tracer, seed_value, counters, "uniform", lane=lane) for lane in range(4))


# -- torch.rand & co. in device code --------------------------------------------------------------------


def _site_seed(tracer: Any) -> Value:
    """This call site's Philox key: the launch's seed plus the site number in the high word."""
    ir = tracer.ir
    if ir.rng_seed is None:
        arg = Value(TensorType((), torch.int64), "rng_seed")
        ir.body.args.append(arg)
        ir.rng_seed = ScalarArg("_rng_seed", -1, torch.int64, arg)  # index set when tracing ends
        ir.scalar_args.append(ir.rng_seed)
    loc = tracer.current_loc()
    site = 0 if loc is None else philox.site_id(loc.lineno - tracer.source_lines[0], loc.col_offset)
    return tracer.emit(ops.BINARY["add"], [ir.rng_seed.value, site << 32]).output


def _float_dtype(tracer: Any, dtype: Any, name: str) -> torch.dtype:
    dtype = dtype or torch.get_default_dtype()
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise exc.TypeInferenceError(
            f"{name} in device code needs a floating dtype, got {dtype}", loc=tracer.current_loc()
        )
    return dtype


def _check_kwargs(tracer: Any, name: str, kwargs: dict) -> None:
    if kwargs.get("generator") is not None:
        raise exc.NotAllowedOnDevice(
            f"{name} with a generator (device code draws from the kernel's per-call seed)",
            loc=tracer.current_loc(),
        )
    if kwargs.get("out") is not None:
        raise exc.NotAllowedOnDevice(f"out= in {name}", loc=tracer.current_loc())


def _sample(tracer: Any, dims: Sequence[sympy.Expr], dist: str, dtype: torch.dtype) -> DeviceValue:
    seed = _site_seed(tracer)
    result = _random(tracer, seed, default_offsets(tracer, dims), dist, lane=0)
    if dtype != torch.float32:
        result = tracer.wrap(tracer.emit(ops.cast, [result.value], {"dtype": dtype}))
    return result


def _size_items(size: tuple) -> list:
    if len(size) == 1 and isinstance(size[0], (list, tuple, torch.Size)):
        return list(size[0])
    return list(size)


def _torch_creation(dist: str, name: str):
    def handler(tracer: Any, *size: Any, dtype: Any = None, **kwargs: Any) -> DeviceValue:
        _check_kwargs(tracer, name, kwargs)
        dims = _shape_dims(tracer, _size_items(size))
        return _sample(tracer, dims, dist, _float_dtype(tracer, dtype, name))

    return handler


def _torch_like(dist: str, name: str):
    def handler(tracer: Any, x: Any, *, dtype: Any = None, **kwargs: Any) -> DeviceValue:
        _check_kwargs(tracer, name, kwargs)
        value = tracer.as_value(x)
        return _sample(tracer, value.shape, dist, _float_dtype(tracer, dtype or value.dtype, name))

    return handler


torch_rand = _torch_creation("uniform", "torch.rand")
torch_randn = _torch_creation("normal", "torch.randn")
torch_rand_like = _torch_like("uniform", "torch.rand_like")
torch_randn_like = _torch_like("normal", "torch.randn_like")
