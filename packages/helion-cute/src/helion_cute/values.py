"""What an IR value becomes in generated code."""

from __future__ import annotations

import dataclasses

import sympy
import torch


@dataclasses.dataclass(frozen=True)
class TileVar:
    """A tile while its loop body is generated.

    Attributes:
        block_id: The block-size variable of the tile.
        axis: The axis key (block symbol) of the tile's dimension.
        begin: Expression of the tile's first index.
        end: Expression of the loop's exclusive end (not the tile's).
        block_size: Elements per tile.
        limit: Expression of the number of valid elements of this tile (``min(block, end -
            begin)``), or None when every tile is full.
    """

    block_id: int
    axis: sympy.Expr
    begin: str
    end: str
    block_size: int
    limit: str | None


@dataclasses.dataclass(frozen=True)
class CVal:
    """A value of generated code.

    Attributes:
        expr: A variable name or a literal.
        kind: ``"scalar"`` (a CuTe DSL number), ``"frag"`` (a ``TensorSSA`` fragment over the
            program's axes, see :mod:`helion_cute.layout`) or ``"tile"``.
        dtype: Element type (None for tiles).
        axes: Axes a fragment varies along (empty for scalars).
        tile: The tile, for ``kind == "tile"``.
    """

    expr: str
    kind: str
    dtype: torch.dtype | None = None
    axes: frozenset = frozenset()
    tile: TileVar | None = None

    @property
    def is_frag(self) -> bool:
        return self.kind == "frag"

    @property
    def is_scalar(self) -> bool:
        return self.kind == "scalar"
