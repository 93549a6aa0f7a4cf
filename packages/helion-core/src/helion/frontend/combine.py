"""Tracing `hl.reduce` and `hl.associative_scan`: the user's combiner becomes a region.

The combiner is called once, on 0-D proxies (its left operands, then its right ones), while the
tracer appends to a fresh block; that block is the node's only region. A backend lowers the
region once (Triton: a `@triton.jit` combine function beside the kernel; ref: it runs the
region on whole tensors). A combiner may only compute elementwise on its own arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any
from typing import Callable

import sympy
import torch

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import TileProxy
from helion.ir.core import Block
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.language import _combine
from helion.language import _ops as ops

if TYPE_CHECKING:
    from helion.frontend.tracer import Tracer


def trace_reduce(
    tracer: Tracer, combine_fn: Any, input_tensor: Any, dim: Any, other: Any, keep_dims: bool
) -> Any:
    # errors of the shared argument rules point at the hl.reduce line
    with exc.source_location(tracer.current_loc()):
        return _trace_reduce(tracer, combine_fn, input_tensor, dim, other, keep_dims)


def trace_scan(
    tracer: Tracer,
    combine_fn: Any,
    input_tensor: Any,
    dim: Any,
    reverse: bool,
    tuple_form: bool | None = None,
) -> Any:
    with exc.source_location(tracer.current_loc()):
        what = "hl.associative_scan"
        values, is_tuple = _input_values(tracer, input_tensor, what)
        if tuple_form is None:
            tuple_form = _combine.check_combine_fn(combine_fn, len(values), what)
        axis = _combine.check_dim(dim, values[0].type.ndim, what)
        outputs = scan_values(tracer, combine_fn, values, axis, bool(reverse), tuple_form, what)
        return _results(tracer, outputs, is_tuple)


def _trace_reduce(
    tracer: Tracer, combine_fn: Any, input_tensor: Any, dim: Any, other: Any, keep_dims: bool
) -> Any:
    what = "hl.reduce"
    values, is_tuple = _input_values(tracer, input_tensor, what)
    tuple_form = _combine.check_combine_fn(combine_fn, len(values), what)
    others = _combine.others_for(other, len(values), what)
    ndim = values[0].type.ndim
    if dim is None:
        if ndim == 0:
            raise exc.InvalidReductionDim(what, "None (the input is 0-D)")
        dims = list(reversed(range(ndim)))  # one dimension per node; the last first keeps positions
    else:
        dims = [_combine.check_dim(dim, ndim, what)]
    if len(values) == 1 and any(not _power_of_two(values[0].shape[axis]) for axis in dims):
        # one input only: tuple combiners often hold lanes with a domain of their own (a
        # Welford count >= 0) that random samples would break, giving false alarms
        _warn_unless_identity(tracer, combine_fn, others[0], values[0].dtype, tuple_form)
    for axis in dims:
        region = trace_combiner(tracer, combine_fn, [v.dtype for v in values], tuple_form, what)
        attrs = {
            "dim": axis,
            "keepdim": bool(keep_dims),
            "other": tuple(_typed(o, v.dtype) for o, v in zip(others, values, strict=False)),
        }
        node = tracer.emit(ops.custom_reduce, values, attrs)
        node.regions.append(region)
        values = list(node.outputs)
    return _results(tracer, values, is_tuple)


def _power_of_two(extent: Any) -> bool:
    """A dimension no backend pads: a constant power of two (a tile's may end partial)."""
    return (
        isinstance(extent, (int, sympy.Integer))
        and int(extent) > 0
        and not (int(extent) & (int(extent) - 1))
    )


def _samples(dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.tensor([False, True, True])
    if dtype.is_floating_point:
        return (torch.randn(3, generator=generator) * 4).to(dtype)
    low = 0 if dtype == torch.uint8 else -40
    return torch.randint(low, 40, (3,), generator=generator).to(dtype)


def _warn_unless_identity(
    tracer: Tracer, combine_fn: Callable, other: Any, dtype: torch.dtype, tuple_form: bool
) -> None:
    """Warn when padding with `other` would change the result: combine(other, x) != x for a
    sample x. The combiner runs on CPU torch values; one that cannot (device-only helpers, a
    dtype CPU torch lacks) is not checked."""
    try:
        pad = torch.tensor(other, dtype=dtype)
        for x in _samples(dtype):
            for lhs, rhs in ((pad, x), (x, pad)):
                (got,) = _combine.call_combine(combine_fn, [lhs], [rhs], tuple_form, "hl.reduce")
                got = torch.as_tensor(got).to(dtype)
                if dtype.is_floating_point:
                    same = torch.allclose(got.float(), x.float(), rtol=1e-3, equal_nan=True)
                else:
                    same = torch.equal(got, x)
                if not same:
                    warning = exc.ReduceOtherNotIdentity(other, x.item(), got.item())
                    exc.warn(warning, tracer.settings)
                    return
    except Exception:  # not a combiner CPU torch can run: nothing to say
        return


def scan_values(
    tracer: Tracer,
    combine_fn: Callable,
    values: list[Value],
    dim: int,
    reverse: bool,
    tuple_form: bool,
    what: str,
) -> list[Value]:
    """One associative-scan node over `values` (already of one shape); its outputs."""
    region = trace_combiner(tracer, combine_fn, [v.dtype for v in values], tuple_form, what)
    node = tracer.emit(ops.custom_scan, values, {"dim": dim, "reverse": reverse})
    node.regions.append(region)
    return list(node.outputs)


def trace_combiner(
    tracer: Tracer, combine_fn: Callable, dtypes: list[torch.dtype], tuple_form: bool, what: str
) -> Block:
    """The region of a combiner over inputs of `dtypes`; its results are cast to those dtypes."""
    lhs = [Value(TensorType((), dtype), "lhs") for dtype in dtypes]
    rhs = [Value(TensorType((), dtype), "rhs") for dtype in dtypes]
    region = Block(lhs + rhs)
    tracer.blocks.append(region)
    try:
        results = _combine.call_combine(
            combine_fn,
            [DeviceValue(tracer, v) for v in lhs],
            [DeviceValue(tracer, v) for v in rhs],
            tuple_form,
            what,
        )
        values = [
            tracer.as_value(result, dtype) for result, dtype in zip(results, dtypes, strict=False)
        ]
        _check_region(tracer, region, values, what)
        for position, (value, dtype) in enumerate(zip(values, dtypes, strict=False)):
            if value.type.ndim != 0:
                raise exc.InvalidAPIUsage(
                    f"{what}: result {position} of combine_fn has shape {list(value.shape)}; a combiner "
                    "works on single elements and must return scalars",
                    loc=tracer.current_loc(),
                )
            if value.dtype != dtype:
                value = tracer.emit(ops.cast, [value], {"dtype": dtype}).output
            region.yields.append(value)
    finally:
        tracer.blocks.pop()
    return region


def _check_region(tracer: Tracer, region: Block, results: list[Value], what: str) -> None:
    """A combiner computes elementwise from its own arguments and constants only."""
    outside = exc.InvalidAPIUsage(
        f"{what}: combine_fn uses a device value from outside it (only its arguments and constants "
        "may enter a combiner; pass other values as extra inputs)",
        loc=tracer.current_loc(),
    )
    defined = {arg.id for arg in region.args}
    for node in region.nodes:
        allowed = (
            node.op.elementwise
            or node.op is ops.constant
            or (node.op is ops.full and not node.attrs["shape"])
        )
        if not allowed or node.regions:
            raise exc.InvalidAPIUsage(
                f"{what}: combine_fn may only compute elementwise on its arguments; it uses {node.op.name}",
                loc=node.loc or tracer.current_loc(),
            )
        if any(isinstance(operand, Value) and operand.id not in defined for operand in node.inputs):
            raise outside
        defined.update(out.id for out in node.outputs)
    if any(value.id not in defined for value in results):
        raise outside


def _input_values(tracer: Tracer, input_tensor: Any, what: str) -> tuple[list[Value], bool]:
    items, is_tuple = _combine.split_inputs(input_tensor, what)
    values = []
    for item in items:
        if not isinstance(item, (DeviceValue, TileProxy)):
            raise exc.InvalidAPIUsage(
                f"{what}: inputs must be device tensors, got {type(item).__name__}",
                loc=tracer.current_loc(),
            )
        values.append(tracer.as_value(item))
    try:
        shape = ops.broadcast_shapes(*(v.shape for v in values))
    except ValueError as error:
        raise exc.ShapeMismatch(
            f"{what}: the inputs do not broadcast: {error}", loc=tracer.current_loc()
        ) from None
    return [
        v if v.shape == shape else tracer.emit(ops.view_expand, [v], {"shape": shape}).output
        for v in values
    ], is_tuple


def _typed(value: Any, dtype: torch.dtype) -> Any:
    """A padded-lane value as a Python number of the input's kind."""
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    if isinstance(value, float) and not value.is_integer():
        raise exc.InvalidAPIUsage(f"`other` {value} cannot pad an input of dtype {dtype}")
    return int(value)


def _results(tracer: Tracer, values: list[Value], is_tuple: bool) -> Any:
    wrapped = [DeviceValue(tracer, v) for v in values]
    return tuple(wrapped) if is_tuple else wrapped[0]


# -- torch.cummax / torch.cummin: a scan of (value, index) pairs ----------------------------------


def _extreme_combiner(kind: str) -> Callable:
    def combine(value_a: Any, index_a: Any, value_b: Any, index_b: Any) -> tuple:
        # as torch: a later equal value wins, and a NaN wins and stays
        take_b = value_b >= value_a if kind == "cummax" else value_b <= value_a
        if value_a.dtype.is_floating_point:
            take_b = take_b | torch.isnan(value_b)
        return torch.where(take_b, value_b, value_a), torch.where(take_b, index_b, index_a)

    return combine


def trace_cum_extreme(tracer: Tracer, kind: str, x: Any, dim: Any) -> Any:
    """`torch.cummax` / `torch.cummin` on a device tensor: (values, int64 indices along `dim`)."""
    what = f"torch.{kind}"
    with exc.source_location(tracer.current_loc()):
        value = tracer.as_value(x)
        ndim = value.type.ndim
        axis = _combine.check_dim(dim, ndim, what)
        length = value.shape[axis]
        index = tracer.emit(
            ops.arange, [], {"start": 0, "length": length, "dtype": torch.int64}
        ).output
        if ndim > 1:
            items = tuple("slice" if a == axis else None for a in range(ndim))
            shape = tuple(length if a == axis else sympy.Integer(1) for a in range(ndim))
            index = tracer.emit(
                ops.view_subscript, [index], {"items": items, "shape": shape}
            ).output
        if index.shape != value.shape:
            index = tracer.emit(ops.view_expand, [index], {"shape": value.shape}).output
        values, indices = scan_values(
            tracer, _extreme_combiner(kind), [value, index], axis, False, False, what
        )
    result_type = torch.return_types.cummax if kind == "cummax" else torch.return_types.cummin
    return result_type((DeviceValue(tracer, values), DeviceValue(tracer, indices)))
