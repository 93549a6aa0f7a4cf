"""Elementwise losses and two-operand math of torch, decomposed into primitive ops: `xlogy`,
`special.entr`, `logaddexp`, `addcmul`, `hypot`, and `F.mse_loss`, `huber_loss`,
`smooth_l1_loss`, `binary_cross_entropy_with_logits`, `kl_div` (all `reduction="none"`: device
code reduces a tile with `.sum(dim)` itself), plus `F.normalize`. fp16/bf16 are computed in
float32 as torch's kernels compute them; the special values (nan, ±inf, 0) follow torch's CPU
kernels.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from helion.frontend.proxies import DeviceValue
from helion.frontend.torch_ops.registry import refuse_out
from helion.frontend.torch_ops.registry import register
from helion.frontend.torch_ops.registry import tensor_methods
from helion.frontend.torch_ops.registry import unsupported_argument
from helion.frontend.torch_ops.values import as_value
from helion.frontend.torch_ops.values import call
from helion.frontend.torch_ops.values import cast
from helion.frontend.torch_ops.values import is_number
from helion.frontend.torch_ops.values import opmath


def _operands(tracer: Any, a: Any, b: Any, name: str) -> tuple[Any, Any, torch.dtype]:
    """Two operands in their compute dtype (float32 for fp16/bf16), and the result dtype
    (torch's promotion; a number takes the tensor's dtype)."""
    if is_number(a):
        b, dtype = opmath(tracer, b, name)
        return a, b, dtype
    a, dtype = opmath(tracer, a, name)
    if is_number(b):
        return a, b, dtype
    b_dtype = as_value(tracer, b).dtype
    dtype = torch.promote_types(dtype, b_dtype)
    return cast(tracer, a, _compute(dtype)), cast(tracer, b, _compute(dtype)), dtype


def _compute(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _where(tracer: Any, condition: Any, a: Any, b: Any) -> Any:
    return call(tracer, torch.where, condition, a, b)


def _xlogy(tracer: Any, x: Any, y: Any) -> Any:
    """0 where x == 0 (unless y is nan), else x * log(y)."""
    product = call(tracer, torch.mul, x, call(tracer, torch.log, y))
    zero = call(tracer, torch.eq, x, 0)
    result = _where(tracer, zero, 0.0, product)
    return _where(tracer, call(tracer, torch.isnan, y), math.nan, result)


def _elementwise_only(
    tracer: Any, name: str, reduction: str, size_average: Any = None, reduce: Any = None
) -> None:
    """Device code computes a loss per element: refuse torch's reductions, new and legacy."""
    for argument, value in (("size_average", size_average), ("reduce", reduce)):
        if value is not None:
            raise unsupported_argument(tracer, name, argument, 'use reduction="none"')
    if reduction != "none":
        raise unsupported_argument(
            tracer,
            name,
            "reduction",
            f'device code computes the elementwise loss (reduction="none", not {reduction!r}); '
            "reduce the tile with .sum(dim) / .mean(dim)",
        )


@register(torch.xlogy, torch.special.xlogy, *tensor_methods("xlogy"))
def _xlogy_op(tracer: Any, x: Any, y: Any, *, out: Any = None) -> DeviceValue:
    refuse_out(tracer, "torch.xlogy", out)
    x, y, dtype = _operands(tracer, x, y, "torch.xlogy")
    return cast(tracer, _xlogy(tracer, x, y), dtype)


@register(torch.special.entr)
def _entr(tracer: Any, x: Any, *, out: Any = None) -> DeviceValue:
    """-x * log(x) for x > 0, 0 at 0, -inf below, nan for nan."""
    refuse_out(tracer, "torch.special.entr", out)
    x, dtype = opmath(tracer, x, "torch.special.entr")
    positive = call(tracer, torch.neg, call(tracer, torch.mul, x, call(tracer, torch.log, x)))
    result = _where(tracer, call(tracer, torch.gt, x, 0), positive, 0.0)
    result = _where(tracer, call(tracer, torch.lt, x, 0), -math.inf, result)
    return cast(tracer, _where(tracer, call(tracer, torch.isnan, x), x, result), dtype)


@register(torch.logaddexp, *tensor_methods("logaddexp"))
def _logaddexp(tracer: Any, a: Any, b: Any, *, out: Any = None) -> DeviceValue:
    """max(a, b) + log1p(exp(-|a - b|)), and a itself where a == b is infinite."""
    refuse_out(tracer, "torch.logaddexp", out)
    a, b, dtype = _operands(tracer, a, b, "torch.logaddexp")
    gap = call(tracer, torch.abs, call(tracer, torch.sub, a, b))
    tail = call(tracer, torch.log1p, call(tracer, torch.exp, call(tracer, torch.neg, gap)))
    result = call(tracer, torch.add, call(tracer, torch.maximum, a, b), tail)
    same_infinity = call(
        tracer, torch.logical_and, call(tracer, torch.eq, a, b), call(tracer, torch.isinf, a)
    )
    return cast(tracer, _where(tracer, same_infinity, a, result), dtype)


@register(torch.addcmul, *tensor_methods("addcmul"))
def _addcmul(
    tracer: Any, x: Any, t1: Any, t2: Any, *, value: Any = 1, out: Any = None
) -> DeviceValue:
    """x + value * t1 * t2, multiplied in that order as torch's kernel does."""
    refuse_out(tracer, "torch.addcmul", out)
    x, dtype = opmath(tracer, x, "torch.addcmul")
    t1 = cast(tracer, t1, x.dtype)
    t2 = cast(tracer, t2, x.dtype)
    scaled = call(tracer, torch.mul, t1, value) if value != 1 else t1
    return cast(tracer, call(tracer, torch.add, x, call(tracer, torch.mul, scaled, t2)), dtype)


@register(torch.hypot, *tensor_methods("hypot"))
def _hypot(tracer: Any, a: Any, b: Any, *, out: Any = None) -> DeviceValue:
    """sqrt(a² + b²) without overflow: big * sqrt(1 + (small / big)²); inf if either is
    infinite (even beside a nan), as C's hypot."""
    refuse_out(tracer, "torch.hypot", out)
    a, b, dtype = _operands(tracer, a, b, "torch.hypot")
    a, b = call(tracer, torch.abs, a), call(tracer, torch.abs, b)
    big, small = call(tracer, torch.maximum, a, b), call(tracer, torch.minimum, a, b)
    ratio = call(tracer, torch.div, small, big)
    scaled = call(
        tracer,
        torch.mul,
        big,
        call(tracer, torch.sqrt, call(tracer, torch.add, call(tracer, torch.mul, ratio, ratio), 1)),
    )
    result = _where(tracer, call(tracer, torch.eq, big, 0), 0.0, scaled)
    infinite = call(
        tracer, torch.logical_or, call(tracer, torch.isinf, a), call(tracer, torch.isinf, b)
    )
    return cast(tracer, _where(tracer, infinite, math.inf, result), dtype)


@register(F.mse_loss)
def _mse_loss(
    tracer: Any,
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> DeviceValue:
    _elementwise_only(tracer, "torch.nn.functional.mse_loss", reduction, size_average, reduce)
    if weight is not None:
        raise unsupported_argument(
            tracer, "torch.nn.functional.mse_loss", "weight", "multiply the loss by it"
        )
    a, b, dtype = _operands(tracer, input, target, "torch.nn.functional.mse_loss")
    diff = call(tracer, torch.sub, a, b)
    return cast(tracer, call(tracer, torch.mul, diff, diff), dtype)


def _smooth(tracer: Any, input: Any, target: Any, name: str, beta: float, huber: bool) -> Any:
    a, b, dtype = _operands(tracer, input, target, name)
    z = call(tracer, torch.abs, call(tracer, torch.sub, a, b))
    if beta == 0 and not huber:
        return cast(tracer, z, dtype)
    square = call(tracer, torch.mul, call(tracer, torch.mul, z, z), 0.5)
    if huber:  # delta * (z - delta / 2) beyond delta
        linear = call(tracer, torch.mul, call(tracer, torch.sub, z, 0.5 * beta), beta)
    else:  # z²/(2 beta) below beta, z - beta / 2 beyond
        square = call(tracer, torch.div, square, beta)
        linear = call(tracer, torch.sub, z, 0.5 * beta)
    return cast(tracer, _where(tracer, call(tracer, torch.lt, z, beta), square, linear), dtype)


@register(F.huber_loss)
def _huber_loss(
    tracer: Any,
    input: Any,
    target: Any,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Any = None,
) -> DeviceValue:
    _elementwise_only(tracer, "torch.nn.functional.huber_loss", reduction)
    if weight is not None:
        raise unsupported_argument(
            tracer, "torch.nn.functional.huber_loss", "weight", "multiply the loss by it"
        )
    return _smooth(tracer, input, target, "torch.nn.functional.huber_loss", delta, huber=True)


@register(F.smooth_l1_loss)
def _smooth_l1_loss(
    tracer: Any,
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> DeviceValue:
    name = "torch.nn.functional.smooth_l1_loss"
    _elementwise_only(tracer, name, reduction, size_average, reduce)
    return _smooth(tracer, input, target, name, beta, huber=False)


@register(F.binary_cross_entropy_with_logits)
def _bce_with_logits(
    tracer: Any,
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> DeviceValue:
    """(1 - target) * input - log_weight * logsigmoid(input), log_weight = 1 + (pos_weight - 1)
    * target, times weight: torch's formula."""
    name = "torch.nn.functional.binary_cross_entropy_with_logits"
    _elementwise_only(tracer, name, reduction, size_average, reduce)
    x, t, dtype = _operands(tracer, input, target, name)
    log_sigmoid = call(tracer, F.logsigmoid, x)
    if pos_weight is not None:
        log_weight = call(
            tracer,
            torch.add,
            call(tracer, torch.mul, call(tracer, torch.sub, pos_weight, 1), t),
            1,
        )
        log_sigmoid = call(tracer, torch.mul, log_weight, log_sigmoid)
    loss = call(
        tracer,
        torch.sub,
        call(tracer, torch.mul, call(tracer, torch.add, call(tracer, torch.neg, t), 1), x),
        log_sigmoid,
    )
    if weight is not None:
        loss = call(tracer, torch.mul, loss, weight)
    return cast(tracer, loss, dtype)


@register(F.kl_div)
def _kl_div(
    tracer: Any,
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> DeviceValue:
    """exp(target) * (target - input) for a log target, else xlogy(target, target) - target *
    input: torch's pointwise KL term."""
    name = "torch.nn.functional.kl_div"
    _elementwise_only(tracer, name, reduction, size_average, reduce)
    x, t, dtype = _operands(tracer, input, target, name)
    if log_target:
        loss = call(tracer, torch.mul, call(tracer, torch.exp, t), call(tracer, torch.sub, t, x))
    else:
        loss = call(tracer, torch.sub, _xlogy(tracer, t, t), call(tracer, torch.mul, t, x))
    return cast(tracer, loss, dtype)


@register(F.normalize)
def _normalize(
    tracer: Any, input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
) -> DeviceValue:
    """input / max(‖input‖_p along dim, eps)."""
    refuse_out(tracer, "torch.nn.functional.normalize", out)
    norm = call(tracer, torch.linalg.vector_norm, input, p, dim, keepdim=True)
    return call(tracer, torch.div, input, call(tracer, torch.clamp_min, norm, eps))
