"""Which operands of a kernel are Python numbers in eager PyTorch.

Eager PyTorch treats a Python number next to a tensor unlike a 0-D tensor of the same value,
which matters for float16/bfloat16 (checked against torch's CPU kernels):

* `x * s`, `x / s` and `x // s` read the number at float32 (`original_scalar_value<opmath_t>`),
  compute in float32 and round once: bf16 `x * 1.003` is not `x * bf16(1.003)` = `x * 1.0`.
  `s * x` is `x * s` (Tensor.__rmul__), and `s / x` is `x.reciprocal() * s`
  (Tensor.__rtruediv__, at any dtype), which can differ from `torch.div(s, x)` in the last bit.
* `+`, `-`, `**`, `%`, comparisons and `where` round the number to the tensor's dtype first.
  (float32 `x ** s` takes the number at float32 in the vectorized loop but at float64 in the
  scalar loop of the last lanes, unlike `x ** t` for a 0-D tensor `t`.)
* A 0-D tensor of another dtype is read at float32 only as the second operand of `*`, `/` and
  `//`: `t * x` calls `t.__mul__`, which rounds `t` to x's dtype, and `t / x` is no reciprocal.

In a kernel, a literal, a size, a scalar argument and a 0-D value computed from these alone by
elementwise ops are Python numbers in eager code. The tracer keeps torch's reflected methods:
`s * x` is traced as `x * s` and `s / x` as `x.reciprocal() * s` (also where `s` is a scalar
argument, whose proxy's own `__mul__` Python calls first), so a number first in the IR comes
from a torch function such as `torch.mul(s, x)`, which rounds it to x's dtype. A 0-D value read from a tensor (`t[()]`), made
by a creation op, or carried through a loop is a 0-D tensor.
"""

from __future__ import annotations

from typing import Any

import sympy

from helion.ir.core import KernelIR
from helion.ir.core import TensorType
from helion.ir.core import Value


def host_scalar_ids(ir: KernelIR) -> frozenset[int]:
    """The ids of the values of `ir` that eager PyTorch holds as Python numbers."""
    found = {arg.value.id for arg in ir.scalar_args}
    for node in ir.walk():  # definitions come before their uses
        if not node.op.elementwise:
            continue
        if not all(x.id in found for x in node.inputs if isinstance(x, Value)):
            continue
        found.update(
            out.id
            for out in node.outputs
            if isinstance(out.type, TensorType) and out.type.ndim == 0
        )
    return frozenset(found)


def value_is_host_scalar(ir: KernelIR, value: Value) -> bool:
    """Whether ``value`` of ``ir`` (traced so far) is a Python number in eager PyTorch: a scalar
    argument, or a 0-D value of elementwise ops on those and literals alone."""
    if not isinstance(value.type, TensorType) or value.type.ndim != 0:
        return False
    if any(arg.value is value for arg in ir.scalar_args):
        return True
    producer = value.producer
    if producer is None or not producer.op.elementwise:
        return False
    return all(value_is_host_scalar(ir, x) for x in producer.inputs if isinstance(x, Value))


def is_host_scalar(operand: Any, host_scalars: frozenset[int]) -> bool:
    """Whether `operand` (an op input) is a Python number in eager PyTorch: a literal, a size,
    or a value in `host_scalars` (`host_scalar_ids` of its kernel)."""
    if isinstance(operand, Value):
        return operand.id in host_scalars
    return isinstance(operand, (int, float, sympy.Expr))
