"""Kernel IR (see core.py), its printer and its verifier."""

from helion.ir.core import (
    Block as Block,
    BlockSizeInfo as BlockSizeInfo,
    KernelIR as KernelIR,
    LoopInfo as LoopInfo,
    Node as Node,
    ScalarArg as ScalarArg,
    TensorArg as TensorArg,
    TensorType as TensorType,
    TileType as TileType,
    Value as Value,
)
from helion.ir.printer import format_ir as format_ir
from helion.ir.verifier import verify as verify
