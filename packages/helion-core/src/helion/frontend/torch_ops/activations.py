"""Activations of torch.nn.functional, decomposed into elementwise ops and computed in
float32 for fp16/bf16 inputs as torch's kernels do.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.torch_ops.elementwise import absolute
from helion.frontend.torch_ops.elementwise import clamp
from helion.frontend.torch_ops.registry import refuse_inplace
from helion.frontend.torch_ops.registry import register
from helion.frontend.torch_ops.values import call
from helion.frontend.torch_ops.values import cast
from helion.frontend.torch_ops.values import opmath


def _activation(tracer: Any, x: Any, name: str, inplace: bool) -> tuple[DeviceValue, torch.dtype]:
    refuse_inplace(tracer, name, inplace)
    return opmath(tracer, x, name)


@register(F.softplus)
def _softplus(tracer: Any, x: Any, beta: float = 1.0, threshold: float = 20.0) -> DeviceValue:
    """x where beta * x > threshold, else log1p(exp(beta * x)) / beta."""
    source, dtype = opmath(tracer, x, "torch.nn.functional.softplus")
    scaled = call(tracer, torch.mul, source, beta) if beta != 1 else source
    soft = call(tracer, torch.log1p, call(tracer, torch.exp, scaled))
    if beta != 1:
        soft = call(tracer, torch.div, soft, beta)
    big = call(tracer, torch.gt, scaled, threshold)
    return cast(tracer, call(tracer, torch.where, big, source, soft), dtype)


@register(F.leaky_relu)
def _leaky_relu(
    tracer: Any, x: Any, negative_slope: float = 0.01, inplace: bool = False
) -> DeviceValue:
    refuse_inplace(tracer, "torch.nn.functional.leaky_relu", inplace)
    positive = call(tracer, torch.gt, x, 0)
    return call(tracer, torch.where, positive, x, call(tracer, torch.mul, x, negative_slope))


@register(F.hardtanh)
def _hardtanh(
    tracer: Any, x: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> DeviceValue:
    refuse_inplace(tracer, "torch.nn.functional.hardtanh", inplace)
    if min_val > max_val:
        raise exc.TypeInferenceError(
            f"hardtanh min_val ({min_val}) cannot be greater than max_val ({max_val})",
            loc=tracer.current_loc(),
        )
    return clamp(tracer, x, min_val, max_val)


@register(F.relu6)
def _relu6(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    refuse_inplace(tracer, "torch.nn.functional.relu6", inplace)
    return clamp(tracer, x, 0, 6)


def _elu_family(
    tracer: Any,
    x: Any,
    name: str,
    inplace: bool,
    *,
    alpha: float,
    scale: float = 1.0,
    input_scale: float = 1.0,
) -> DeviceValue:
    """torch's elu kernel: x * scale where x > 0, else expm1(x * input_scale) * alpha * scale."""
    source, dtype = _activation(tracer, x, name, inplace)
    positive = source if scale == 1 else call(tracer, torch.mul, source, scale)
    inner = source if input_scale == 1 else call(tracer, torch.mul, source, input_scale)
    negative = call(tracer, torch.mul, call(tracer, torch.expm1, inner), alpha * scale)
    result = call(tracer, torch.where, call(tracer, torch.gt, source, 0), positive, negative)
    return cast(tracer, result, dtype)


@register(F.elu)
def _elu(tracer: Any, x: Any, alpha: float = 1.0, inplace: bool = False) -> DeviceValue:
    return _elu_family(tracer, x, "torch.nn.functional.elu", inplace, alpha=alpha)


# the constants of torch's selu (Klambauer et al., "Self-Normalizing Neural Networks")
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@register(F.selu, torch.selu)
def _selu(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    return _elu_family(
        tracer,
        x,
        "torch.nn.functional.selu",
        inplace,
        alpha=_SELU_ALPHA,
        scale=_SELU_SCALE,
    )


@register(F.celu, torch.celu)
def _celu(tracer: Any, x: Any, alpha: float = 1.0, inplace: bool = False) -> DeviceValue:
    if alpha == 0:
        raise exc.TypeInferenceError("celu alpha cannot be 0", loc=tracer.current_loc())
    return _elu_family(
        tracer, x, "torch.nn.functional.celu", inplace, alpha=alpha, input_scale=1.0 / alpha
    )


@register(F.mish)
def _mish(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    """x * tanh(log1p(exp(x)))."""
    source, dtype = _activation(tracer, x, "torch.nn.functional.mish", inplace)
    soft = call(tracer, torch.log1p, call(tracer, torch.exp, source))
    return cast(tracer, call(tracer, torch.mul, source, call(tracer, torch.tanh, soft)), dtype)


@register(F.logsigmoid)
def _logsigmoid(tracer: Any, x: Any) -> DeviceValue:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), which neither overflows nor cancels."""
    source, dtype = opmath(tracer, x, "torch.nn.functional.logsigmoid")
    tail = call(
        tracer,
        torch.log1p,
        call(tracer, torch.exp, call(tracer, torch.neg, absolute(tracer, source))),
    )
    result = call(tracer, torch.sub, call(tracer, torch.clamp_max, source, 0.0), tail)
    return cast(tracer, result, dtype)


def _relu6_of_shift(tracer: Any, source: DeviceValue) -> DeviceValue:
    return clamp(tracer, call(tracer, torch.add, source, 3.0), 0.0, 6.0)


@register(F.hardsigmoid)
def _hardsigmoid(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    """min(max(x + 3, 0), 6) / 6."""
    source, dtype = _activation(tracer, x, "torch.nn.functional.hardsigmoid", inplace)
    return cast(tracer, call(tracer, torch.div, _relu6_of_shift(tracer, source), 6.0), dtype)


@register(F.hardswish)
def _hardswish(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    """x * min(max(x + 3, 0), 6) / 6."""
    source, dtype = _activation(tracer, x, "torch.nn.functional.hardswish", inplace)
    product = call(tracer, torch.mul, source, _relu6_of_shift(tracer, source))
    return cast(tracer, call(tracer, torch.div, product, 6.0), dtype)
