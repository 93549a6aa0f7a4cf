"""Checks that IR is well formed: values defined before use, defined once, types consistent."""

from __future__ import annotations

from helion import exc
from helion.ir.core import Block
from helion.ir.core import KernelIR
from helion.ir.core import TensorType
from helion.ir.core import Value


def verify(ir: KernelIR) -> None:
    defined: set[int] = set()
    _verify_block(ir, ir.body, defined)


def _fail(ir: KernelIR, message: str, node=None) -> None:
    from helion.ir.printer import format_ir

    context = format_ir(ir).splitlines()
    raise exc.InternalError(f"invalid IR: {message}\n" + "\n".join(context[:60]))


def _define(ir: KernelIR, value: Value, defined: set[int]) -> None:
    if value.id in defined:
        _fail(ir, f"value {value!r} defined twice")
    defined.add(value.id)


def _verify_block(ir: KernelIR, block: Block, defined: set[int]) -> None:
    scope = set(defined)
    for arg in block.args:
        _define(ir, arg, scope)
    for node in block.nodes:
        for operand in node.inputs:
            if isinstance(operand, Value) and operand.id not in scope:
                _fail(ir, f"{node.op.name} uses {operand!r} before it is defined")
        for region in node.regions:
            _verify_block(ir, region, scope)
        for out in node.outputs:
            _define(ir, out, scope)
            if isinstance(out.type, TensorType) and any(d is None for d in out.type.shape):
                _fail(ir, f"{node.op.name} produced an unknown dimension")
        if node.op.structural and node.op.name in ("grid_loop", "tile_loop"):
            body = node.regions[0]
            if len(body.yields) != len(node.outputs):
                _fail(
                    ir,
                    f"{node.op.name} yields {len(body.yields)} values for {len(node.outputs)} outputs",
                )
            for y, o in zip(body.yields, node.outputs, strict=True):
                if isinstance(y, Value) and y.type != o.type:
                    _fail(ir, f"loop-carried value changes type: {y.type} vs {o.type}")
    for y in block.yields:
        if isinstance(y, Value) and y.id not in scope:
            _fail(ir, f"yield of undefined value {y!r}")
    defined |= set()  # outer scope is unchanged: region values do not escape
