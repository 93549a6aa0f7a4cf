"""Triton lowerings of reductions (persistent and looped over chunks), scans and dots."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from helion.ir.core import Node
from helion.ir.core import Value
from helion.language import _ops as ops
from helion.passes.tile_origins import join
from helion.passes.upcasts import converted_from_8_bits
from helion.passes.upcasts import needs_exact_small_k_products
from helion_triton import combine
from helion_triton.codegen import literal
from helion_triton.lowerings import Rule
from helion_triton.lowerings import compute_float
from helion_triton.lowerings import triton_lowering
from helion_triton.target import reshaped_dot_accumulator_ok

# -- reductions ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ReductionKind:
    """How one reduction op computes: its accumulator dtype, identity, chunk reduction, combine."""

    name: str

    def acc_dtype(self, input_dtype: torch.dtype, out_dtype: torch.dtype) -> torch.dtype:
        if self.name in ("sum", "prod"):
            if input_dtype.is_floating_point:
                return compute_float(input_dtype)
            return out_dtype
        if self.name in ("any", "all"):
            return torch.int32
        if input_dtype.is_floating_point:
            # exact for a max / min; and Triton's interpreter holds bf16 as raw bits, which a
            # tl.reduce with a combine function of ours (the NaN-propagating one) compares as ints
            return compute_float(input_dtype)
        if input_dtype == torch.bool:
            return torch.int8
        return input_dtype

    def identity(self, dtype: torch.dtype) -> Any:
        if self.name in ("sum", "any"):
            return 0
        if self.name in ("prod", "all"):
            return 1
        biggest = self.name in ("amin", "argmin")
        if dtype.is_floating_point:
            return float("inf") if biggest else float("-inf")
        info = torch.iinfo(dtype)
        return info.max if biggest else info.min

    def partial(self, ctx: Any, x: str, dim: int, keepdim: bool, dtype: torch.dtype) -> str:
        """The reduction of ``x`` (in accumulator dtype ``dtype``) along ``dim``."""
        keep = ", keep_dims=True" if keepdim else ""
        if self.name == "sum":
            return f"tl.sum({x}, {dim}{keep})"
        if self.name == "prod":
            return f"tl.reduce({x}, {dim}, tl.standard._prod_combine{keep})"
        if self.name in ("amax", "amin") and dtype.is_floating_point:
            # tl.max / tl.min drop NaN; torch's amax / amin return it
            combine = nan_combine(ctx, "max" if self.name == "amax" else "min")
            return f"tl.reduce({x}, {dim}, {combine}{keep})"
        if self.name in ("amax", "any"):
            return f"tl.max({x}, {dim}{keep})"
        if self.name in ("amin", "all"):
            return f"tl.min({x}, {dim}{keep})"
        raise AssertionError(self.name)

    def combine(self, acc: str, part: str, dtype: torch.dtype) -> str:
        if self.name == "sum":
            return f"{acc} + {part}"
        if self.name == "prod":
            return f"{acc} * {part}"
        nan = _PROPAGATE_NAN if dtype.is_floating_point else ""
        if self.name in ("amax", "any"):
            return f"tl.maximum({acc}, {part}{nan})"
        return f"tl.minimum({acc}, {part}{nan})"

    def finish(self, ctx: Any, acc: str, acc_dtype: torch.dtype, out_dtype: torch.dtype) -> str:
        if self.name in ("any", "all"):
            return f"({acc} != 0)"
        return ctx.cast(acc, out_dtype, acc_dtype)


def _reduction_input(ctx: Any, node: Node, kind: ReductionKind) -> tuple[str, torch.dtype]:
    """The reduced value in its accumulator dtype, padded lanes holding the identity."""
    value = node.inputs[0]
    dim = node.attrs["dim"]
    acc_dtype = kind.acc_dtype(value.dtype, node.output.dtype)
    x, dtype = ctx.expr(value), value.dtype
    if kind.name in ("any", "all") and dtype.is_floating_point:
        # truth of each value first: 0.5 is True (as an int32 it would be 0)
        x, dtype = ctx.cast(x, torch.bool, dtype), torch.bool
    x = ctx.cast(x, acc_dtype, dtype)
    mask = ctx.mask_for(value.shape, [dim], ctx.origins(value))
    identity = kind.identity(acc_dtype)
    if mask is not None and identity == 0 and value.id in ctx.zero_lanes:
        mask = None  # padded lanes already hold the identity
    if mask is not None:
        x = f"tl.where({mask}, {x}, {literal(identity)})"
    return ctx.assign(x, "masked") if mask is not None or x != ctx.expr(value) else x, acc_dtype


def _reduction_rule(name: str) -> Rule:
    kind = ReductionKind(name)

    def rule(ctx: Any, node: Node) -> str:
        x, acc_dtype = _reduction_input(ctx, node, kind)
        part = kind.partial(ctx, x, node.attrs["dim"], bool(node.attrs.get("keepdim")), acc_dtype)
        return kind.finish(ctx, part, acc_dtype, node.output.dtype)

    return rule


for _name in ("sum", "prod", "amax", "amin", "any", "all"):
    triton_lowering(ops.REDUCTIONS[_name])(_reduction_rule(_name))


def _arg_rule(name: str) -> Rule:
    kind = ReductionKind(name)

    def rule(ctx: Any, node: Node) -> str:
        x, acc_dtype = _reduction_input(ctx, node, kind)
        dim, keepdim = node.attrs["dim"], bool(node.attrs.get("keepdim"))
        if acc_dtype.is_floating_point:
            _, index = _arg_reduce(ctx, name, x, dim, len(node.inputs[0].shape), keepdim)
            return ctx.cast(index, node.output.dtype, torch.int32)
        keep = ", keep_dims=True" if keepdim else ""
        function = "tl.argmax" if name == "argmax" else "tl.argmin"
        return f"{function}({x}, {dim}{keep}).to({ctx.tl(node.output.dtype)})"

    return rule


def _arg_reduce(ctx: Any, name: str, x: str, dim: int, rank: int, keepdim: bool) -> tuple[str, str]:
    """(value, int32 index) of the largest (argmax) or smallest (argmin) lane of the float ``x``
    along ``dim``, as torch picks it: NaN before any number, then the first of equal lanes."""
    combine = ctx.helper(f"_helion_{name}_combine", _ARG_COMBINES[name])
    spread = ", ".join(":" if d == dim else "None" for d in range(rank))
    lanes = ctx.assign(
        f"tl.arange(0, {x}.shape[{dim}])[{spread}] + tl.zeros({x}.shape, tl.int32)", "lane"
    )
    keep = ", keep_dims=True" if keepdim else ""
    value, index = ctx.fresh(f"{name}_value"), ctx.fresh(f"{name}_index")
    ctx.emit(f"{value}, {index} = tl.reduce(({x}, {lanes}), {dim}, {combine}{keep})")
    return value, index


triton_lowering(ops.REDUCTIONS["argmax"])(_arg_rule("argmax"))
triton_lowering(ops.REDUCTIONS["argmin"])(_arg_rule("argmin"))


# -- looped reductions: accumulate over chunks of a reduction dimension -----------------------------


def looped_sink_init(ctx: Any, node: Node) -> dict[str, Any]:
    """Accumulators of a reduction (or dot) that runs over chunks; emitted before the loop."""
    if node.op is ops.custom_reduce:
        return combine.looped_init(ctx, node)
    out = node.output
    if node.op is ops.dot:
        return _dot_looped_init(ctx, node)
    name = node.op.name.removeprefix("reduce_")
    kind = ReductionKind(name)
    value = node.inputs[0]
    acc_dtype = kind.acc_dtype(value.dtype, out.dtype)
    shape = ctx.shape(out.shape)
    acc = ctx.fresh(f"acc_{name}")
    ctx.emit(f"{acc} = tl.full({shape}, {literal(kind.identity(acc_dtype))}, {ctx.tl(acc_dtype)})")
    state: dict[str, Any] = {"kind": kind, "acc": acc, "acc_dtype": acc_dtype}
    if name in ("argmax", "argmin"):
        index = ctx.fresh(f"acc_{name}_index")
        ctx.emit(f"{index} = tl.full({shape}, 0, tl.int64)")
        state["index"] = index
    return state


def looped_sink_update(ctx: Any, node: Node, state: dict[str, Any]) -> None:
    if node.op is ops.custom_reduce:
        combine.looped_update(ctx, node, state)
        return
    if node.op is ops.dot:
        _dot_looped_update(ctx, node, state)
        return
    kind: ReductionKind = state["kind"]
    acc = state["acc"]
    dim = node.attrs["dim"]
    keep = ", keep_dims=True" if node.attrs.get("keepdim") else ""
    x, _ = _reduction_input(ctx, node, kind)
    if "index" in state:
        keepdim = bool(node.attrs.get("keepdim"))
        compare = ">" if kind.name == "argmax" else "<"
        if state["acc_dtype"].is_floating_point:
            value, where = _arg_reduce(ctx, kind.name, x, dim, len(node.inputs[0].shape), keepdim)
            # a NaN chunk replaces a number; once the running value is NaN, later chunks lose
            better = f"({value} {compare} {acc}) | (({value} != {value}) & ({acc} == {acc}))"
        else:
            function = "tl.max" if kind.name == "argmax" else "tl.min"
            value, where = ctx.fresh("chunk_value"), ctx.fresh("chunk_index")
            ctx.emit(f"{value}, {where} = {function}({x}, {dim}, return_indices=True{keep})")
            better = f"{value} {compare} {acc}"
        offset = ctx.rdim_vars(node.inputs[0].shape[dim]).offset
        better = ctx.assign(better, "better")
        ctx.emit(
            f"{state['index']} = tl.where({better}, {where}.to(tl.int64) + {offset}, {state['index']})"
        )
        ctx.emit(f"{acc} = tl.where({better}, {value}, {acc})")
        return
    acc_dtype = state["acc_dtype"]
    part = ctx.assign(
        kind.partial(ctx, x, dim, bool(node.attrs.get("keepdim")), acc_dtype), "chunk"
    )
    ctx.emit(f"{acc} = {kind.combine(acc, part, acc_dtype)}")


def looped_sink_finish(ctx: Any, node: Node, state: dict[str, Any]) -> str:
    if node.op is ops.custom_reduce:
        return combine.looped_finish(ctx, node, state)
    if node.op is ops.dot:
        return _dot_looped_finish(ctx, node, state)
    if "index" in state:
        return ctx.cast(state["index"], node.output.dtype, torch.int64)
    kind: ReductionKind = state["kind"]
    return kind.finish(ctx, state["acc"], state["acc_dtype"], node.output.dtype)


# -- scans ---------------------------------------------------------------------------------------------

# torch's max and min (reductions, scans, argmax) return NaN where a lane is NaN; Triton's
# tl.max / tl.min / tl.maximum drop it unless asked (on the GPU: max.NaN, no slower than max)
_PROPAGATE_NAN = ", propagate_nan=tl.PropagateNan.ALL"
_NAN_COMBINES = {
    kind: f"""
@triton.jit
def _helion_nan_{kind}_combine(a, b):
    return tl.{kind}imum(a, b{_PROPAGATE_NAN})
"""
    for kind in ("max", "min")
}
_PLAIN_COMBINES = {
    kind: f"""
@triton.jit
def _helion_{kind}_combine(a, b):
    return tl.{kind}imum(a, b)
"""
    for kind in ("max", "min")
}
_ARG_COMBINES = {
    name: f"""
@triton.jit
def _helion_{name}_combine(value_a, index_a, value_b, index_b):
    nan_a = value_a != value_a
    nan_b = value_b != value_b
    tie = ((value_a == value_b) | (nan_a & nan_b)) & (index_a < index_b)
    take_a = (value_a {compare} value_b) | (nan_a & ~nan_b) | tie
    return tl.where(take_a, value_a, value_b), tl.where(take_a, index_a, index_b)
"""
    for name, compare in (("argmax", ">"), ("argmin", "<"))
}


def nan_combine(ctx: Any, kind: str) -> str:
    """The name of the NaN-propagating ``max`` or ``min`` combine function, added to the kernel."""
    return ctx.helper(f"_helion_nan_{kind}_combine", _NAN_COMBINES[kind])


def _scan_rule(name: str) -> Rule:
    def rule(ctx: Any, node: Node) -> str:
        value = node.inputs[0]
        dim = node.attrs["dim"]
        out = node.output.dtype
        compute = compute_float(out) if out.is_floating_point else out
        x = ctx.cast(ctx.expr(value), compute, value.dtype)
        reverse = ", reverse=True" if node.attrs.get("reverse") else ""
        mask = ctx.mask_for(value.shape, [dim], ctx.origins(value))
        if name == "cumsum":
            identity, call = 0, "tl.cumsum({x}, {dim}{reverse})"
        elif name == "cumprod":
            identity, call = 1, "tl.cumprod({x}, {dim}{reverse})"
        else:
            kind = ReductionKind("amax" if name == "cummax" else "amin")
            identity = kind.identity(compute)
            which = "max" if name == "cummax" else "min"
            if compute.is_floating_point:
                combine = nan_combine(ctx, which)
            else:
                combine = ctx.helper(f"_helion_{which}_combine", _PLAIN_COMBINES[which])
            call = "tl.associative_scan({x}, {dim}, " + combine + "{reverse})"
        if mask is not None:
            x = ctx.assign(f"tl.where({mask}, {x}, {literal(identity)})", "masked")
        return ctx.cast(call.format(x=x, dim=dim, reverse=reverse), out, compute)

    return rule


for _name in ("cumsum", "cumprod", "cummax", "cummin"):
    triton_lowering(ops.SCANS[_name])(_scan_rule(_name))


# -- matmul ----------------------------------------------------------------------------------------------

MIN_DOT = 16


def _dot_precision(ctx: Any) -> str:
    precision = (
        getattr(ctx.settings, "dot_precision", "tf32") if ctx.settings is not None else "tf32"
    )
    return {"default": "tf32", "high": "tf32x3", "highest": "ieee"}.get(precision, precision)


# Dots of operands converted from 8-bit values on a small K tile take exact float32 products
# (helion.passes.upcasts: a Triton MMAv2 miscompile). Triton also turns
# ``sum(a[:, :, None] * b[None, :, :], 1)`` into a dot, which went as wrong at K = 8 (bk=4), so
# the multiply-and-sum of such operands is written in the order it leaves alone.


@dataclasses.dataclass(frozen=True)
class DotOperands:
    lhs: str
    rhs: str
    dtype: torch.dtype  # the dtype both are cast to
    use_dot: bool  # tl.dot (every dimension at least MIN_DOT lanes), else multiply and sum
    precision: str | None  # tl.dot's input_precision for float32 operands
    from_8_bits: bool  # an operand was converted from 8-bit values (helion.passes.upcasts)


def _dot_operands(ctx: Any, node: Node) -> DotOperands:
    """Operands of a product in a common dtype, with padded lanes of K zeroed."""
    a, b = node.inputs[0], node.inputs[1]
    if a.dtype == b.dtype:
        dtype = a.dtype
    else:
        dtype = torch.promote_types(a.dtype, b.dtype)
    if dtype.is_floating_point and dtype.itemsize == 1 and a.dtype != b.dtype:
        dtype = torch.float16
    if dtype == torch.bfloat16 and ctx.target.interpret:
        # the interpreter's tl.dot multiplies bf16 bit patterns as integers: upcast (exact)
        dtype = torch.float32
    k = a.shape[-1]
    dims = [a.shape[-2], k, b.shape[-1]]
    use_dot = all(ctx.extent(d) >= MIN_DOT for d in dims)
    precision = _dot_precision(ctx) if dtype == torch.float32 else None
    from_8_bits = dtype.itemsize > 1 and (converted_from_8_bits(a) or converted_from_8_bits(b))
    if use_dot and needs_exact_small_k_products(a, b, dtype, ctx.extent(k)):
        dtype, precision = torch.float32, "ieee"  # see helion.passes.upcasts
    a_expr = ctx.cast(ctx.expr(a), dtype, a.dtype)
    b_expr = ctx.cast(ctx.expr(b), dtype, b.dtype)
    k_mask = ctx.dim_mask(k, join(ctx.origin(a, -1), ctx.origin(b, -2)))
    if k_mask is not None and a.id in ctx.zero_lanes and b.id in ctx.zero_lanes:
        k_mask = None  # both operands were loaded with masks: their padded lanes are 0
    if k_mask is not None:
        a_expr = ctx.assign(
            f"tl.where({ctx.place(k_mask, len(a.shape) - 1, a.shape)}, {a_expr}, 0)", "lhs"
        )
        b_expr = ctx.assign(
            f"tl.where({ctx.place(k_mask, len(b.shape) - 2, b.shape)}, {b_expr}, 0)", "rhs"
        )
    if a.shape[:-2] != b.shape[:-2]:
        a_expr, b_expr = _broadcast_batch(ctx, node, a_expr, b_expr)
    return DotOperands(a_expr, b_expr, dtype, use_dot, precision, from_8_bits)


def _broadcast_batch(ctx: Any, node: Node, a_expr: str, b_expr: str) -> tuple[str, str]:
    a, b = node.inputs[0], node.inputs[1]
    batch = ops.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a_expr = ctx.assign(f"tl.broadcast_to({a_expr}, {ctx.shape((*batch, *a.shape[-2:]))})", "lhs")
    b_expr = ctx.assign(f"tl.broadcast_to({b_expr}, {ctx.shape((*batch, *b.shape[-2:]))})", "rhs")
    return a_expr, b_expr


def _loaded_by_descriptor(ctx: Any, value: Any, depth: int = 4) -> bool:
    """Whether ``value`` is a tensor-descriptor load, possibly through a few one-input ops
    (casts, permutes, reshapes)."""
    while depth > 0 and isinstance(value, Value):
        if value.id in ctx.descriptor_loads:
            return True
        producer = value.producer
        inputs = [v for v in producer.inputs if isinstance(v, Value)] if producer else []
        if len(inputs) != 1:
            return False
        value, depth = inputs[0], depth - 1
    return False


def _product(
    ctx: Any, node: Node, operands: DotOperands, acc: str | None
) -> tuple[str, torch.dtype]:
    """``a @ b`` (+ ``acc``) in the accumulator dtype (float32, or int32 for int8)."""
    a, b, dtype, use_dot = operands.lhs, operands.rhs, operands.dtype, operands.use_dot
    extra = f', input_precision="{operands.precision}"' if operands.precision else ""
    acc_dtype = torch.int32 if dtype == torch.int8 else torch.float32
    out_shape = node.output.shape
    if use_dot and len(out_shape) == 3 and ctx.extent(out_shape[0]) == 1:
        # one batch per program (the usual bmm tiling): a plain 2-D dot is the fast MMA path
        a_shape, b_shape = node.inputs[0].shape, node.inputs[1].shape
        a2 = ctx.assign(f"tl.reshape({a}, {ctx.shape(a_shape[-2:])})", "lhs")
        b2 = ctx.assign(f"tl.reshape({b}, {ctx.shape(b_shape[-2:])})", "rhs")
        if (
            acc is not None
            and not reshaped_dot_accumulator_ok()
            and any(_loaded_by_descriptor(ctx, v) for v in node.inputs[:2])
        ):
            # see reshaped_dot_accumulator_ok: add the 3-D accumulator after the dot
            product = f"tl.dot({a2}, {b2}{extra}, out_dtype={ctx.tl(acc_dtype)})"
            return f"(tl.reshape({product}, {ctx.shape(out_shape)}) + {acc})", acc_dtype
        acc2 = (
            None
            if acc is None
            else ctx.assign(f"tl.reshape({acc}, {ctx.shape(out_shape[-2:])})", "acc_2d")
        )
        if acc2 is not None:
            product = f"tl.dot({a2}, {b2}, {acc2}{extra})"
        else:
            product = f"tl.dot({a2}, {b2}{extra}, out_dtype={ctx.tl(acc_dtype)})"
        return f"tl.reshape({product}, {ctx.shape(out_shape)})", acc_dtype
    if use_dot:
        if acc is not None:
            return f"tl.dot({a}, {b}, {acc}{extra})", acc_dtype
        return f"tl.dot({a}, {b}{extra}, out_dtype={ctx.tl(acc_dtype)})", acc_dtype
    # a broadcast multiply and sum for dimensions below the MMA minimum
    rank = len(node.inputs[0].shape)
    lhs = ctx.cast(a, acc_dtype, dtype)
    rhs = ctx.cast(b, acc_dtype, dtype)
    lhs_3d = f"{lhs}[:, :, None]" if rank == 2 else f"{lhs}[:, :, :, None]"
    rhs_3d = f"{rhs}[None, :, :]" if rank == 2 else f"{rhs}[:, None, :, :]"
    terms = f"{rhs_3d} * {lhs_3d}" if operands.from_8_bits else f"{lhs_3d} * {rhs_3d}"
    product = f"tl.sum({terms}, {rank - 1})"  # the order: see the note above DotOperands
    return (f"{acc} + {product}" if acc is not None else product), acc_dtype


@triton_lowering(ops.dot)
def _dot(ctx: Any, node: Node) -> str:
    operands = _dot_operands(ctx, node)
    acc = node.inputs[2]
    out = node.output.dtype
    acc_dtype = torch.int32 if operands.dtype == torch.int8 else torch.float32
    acc_expr = None
    if acc is not None and acc.dtype == acc_dtype:
        acc_expr = ctx.expr(acc)
    product, acc_dtype = _product(ctx, node, operands, acc_expr)
    if acc is not None and acc_expr is None:
        product = f"{ctx.cast(ctx.expr(acc), acc_dtype, acc.dtype)} + {product}"
    return ctx.cast(f"({product})" if " + " in product else product, out, acc_dtype)


def _dot_looped_init(ctx: Any, node: Node) -> dict[str, Any]:
    a, b, acc = node.inputs
    dtype = a.dtype if a.dtype == b.dtype else torch.promote_types(a.dtype, b.dtype)
    acc_dtype = torch.int32 if dtype == torch.int8 else torch.float32
    name = ctx.fresh("acc_dot")
    if acc is not None:
        ctx.emit(f"{name} = {ctx.cast(ctx.expr(acc), acc_dtype, acc.dtype)}")
    else:
        ctx.emit(f"{name} = tl.full({ctx.shape(node.output.shape)}, 0, {ctx.tl(acc_dtype)})")
    return {"acc": name, "acc_dtype": acc_dtype}


def _dot_looped_update(ctx: Any, node: Node, state: dict[str, Any]) -> None:
    product, _ = _product(ctx, node, _dot_operands(ctx, node), state["acc"])
    ctx.emit(f"{state['acc']} = {product}")


def _dot_looped_finish(ctx: Any, node: Node, state: dict[str, Any]) -> str:
    return ctx.cast(state["acc"], node.output.dtype, state["acc_dtype"])
