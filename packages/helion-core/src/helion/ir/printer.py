"""A stable textual form of the Kernel IR (for golden tests and HELION_PRINT_IR=1)."""

from __future__ import annotations

from typing import Any

from helion.ir.core import Block
from helion.ir.core import KernelIR
from helion.ir.core import Node
from helion.ir.core import TensorArg
from helion.ir.core import Value


class _Names:
    """Renumbers values densely in print order so that output does not depend on global ids."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def __call__(self, value: Value) -> str:
        if value.id not in self.names:
            self.names[value.id] = f"%{len(self.names)}"
        return self.names[value.id]


def _operand(names: _Names, operand: Any) -> str:
    if isinstance(operand, Value):
        return names(operand)
    if isinstance(operand, (list, tuple)):
        return "(" + ", ".join(_operand(names, o) for o in operand) + ")"
    if isinstance(operand, TensorArg):
        return operand.name
    if operand is None:
        return "_"
    return str(operand).removeprefix("torch.")


def _attrs(names: _Names, attrs: dict) -> str:
    parts = []
    for key in sorted(attrs):
        value = attrs[key]
        if value is None:
            continue
        parts.append(f"{key}={_operand(names, value)}")
    return ", ".join(parts)


def _node_lines(names: _Names, node: Node, indent: str) -> list[str]:
    outs = ", ".join(f"{names(o)}: {o.type}" for o in node.outputs)
    ins = ", ".join(_operand(names, i) for i in node.inputs)
    attrs = _attrs(names, node.attrs)
    line = f"{indent}{outs + ' = ' if outs else ''}{node.op.name}({ins})"
    if attrs:
        line += f" {{{attrs}}}"
    if node.loc is not None:
        line += f"  # line {node.loc.lineno}"
    lines = [line]
    for position, region in enumerate(node.regions):
        lines.extend(_block_lines(names, region, indent + "  ", label=f"region {position}"))
    return lines


def _block_lines(names: _Names, block: Block, indent: str, label: str) -> list[str]:
    args = ", ".join(f"{names(a)}: {a.type}" for a in block.args)
    lines = [f"{indent}{label}({args}):"]
    for node in block.nodes:
        lines.extend(_node_lines(names, node, indent + "  "))
    if block.yields:
        lines.append(f"{indent}  yield {', '.join(_operand(names, y) for y in block.yields)}")
    return lines


def format_ir(ir: KernelIR) -> str:
    names = _Names()
    lines = [f"kernel {ir.name}:"]
    for arg in ir.tensor_args:
        lines.append(f"  tensor {arg}")
    for scalar in ir.scalar_args:
        lines.append(f"  scalar {scalar}")
    for info in ir.block_sizes:
        extra = f" = {info.fixed_value}" if info.fixed_value is not None else ""
        lines.append(f"  block {info.symbol} ({info.kind}, extent {info.size_hint}){extra}")
    lines.extend(_block_lines(names, ir.body, "  ", label="body"))
    return "\n".join(lines)
