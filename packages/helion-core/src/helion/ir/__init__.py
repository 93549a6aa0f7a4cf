"""Kernel IR (see core.py), its printer and its verifier."""

from helion.ir.core import Block as Block
from helion.ir.core import BlockSizeInfo as BlockSizeInfo
from helion.ir.core import KernelIR as KernelIR
from helion.ir.core import LoopInfo as LoopInfo
from helion.ir.core import Node as Node
from helion.ir.core import ScalarArg as ScalarArg
from helion.ir.core import TensorArg as TensorArg
from helion.ir.core import TensorType as TensorType
from helion.ir.core import TileType as TileType
from helion.ir.core import Value as Value
from helion.ir.printer import format_ir as format_ir
from helion.ir.verifier import verify as verify
