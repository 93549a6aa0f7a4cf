"""`RefTile`: the loop variable of `hl.tile` in eager mode.

A RefTile is a concrete half-open range `[begin, end)` of one loop dimension, together with the
block size the loop steps by and the whole range the loop covers (for `tile.count`). Used as a
tensor index it is the slice `begin:end`; used as a size (`hl.zeros([tile])`) it is its extent
`end - begin`; in arithmetic it stands for `tile.index` (`tile + 1` is `tile.index + 1`).
"""

from __future__ import annotations

from typing import Any

import torch

from helion import exc


class RefTile:
    __slots__ = (
        "_device",
        "_index",
        "_index_dtype",
        "begin",
        "block_size",
        "end",
        "range_begin",
        "range_end",
    )

    def __init__(
        self,
        begin: int,
        end: int,
        block_size: int,
        range_begin: int,
        range_end: int,
        index_dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.begin = begin
        self.end = end
        self.block_size = block_size
        self.range_begin = range_begin
        self.range_end = range_end
        self._index_dtype = index_dtype
        self._device = device
        self._index: torch.Tensor | None = None

    # -- attributes (hl.tile_index, hl.tile_begin, ...) -----------------------------------------

    @property
    def index(self) -> torch.Tensor:
        """`[begin, begin + 1, ..., end - 1]` as a 1-D tensor of the kernel's index dtype."""
        if self._index is None:
            with torch._C.DisableTorchFunction():
                self._index = torch.arange(
                    self.begin, self.end, dtype=self._index_dtype, device=self._device
                )
        return self._index

    @property
    def id(self) -> int:
        """`begin // block_size`: the position of this tile, e.g. into per-tile partial buffers."""
        return self.begin // self.block_size

    @property
    def count(self) -> int:
        """How many tiles the loop has: `cdiv(range_end - range_begin, block_size)`."""
        return -(-(self.range_end - self.range_begin) // self.block_size)

    @property
    def extent(self) -> int:
        """How many elements this tile covers (`end - begin`; the last tile may be partial)."""
        return self.end - self.begin

    def as_slice(self) -> slice:
        return slice(self.begin, self.end)

    # -- misuse --------------------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        # only for names that are not attributes (index, begin, ...); no slot is read here
        raise exc.DeviceAttributeError(
            "A tile", name, " (a tile has index, begin, end, block_size, id and count)"
        )

    def __iter__(self):
        raise exc.FailedToUnpackTile()

    def __bool__(self) -> bool:
        raise exc.IncorrectTileUsage("a tile used as a boolean")

    def __index__(self) -> int:
        raise exc.IncorrectTileUsage(
            "a tile used as a Python int (use tile.begin, tile.end or tile.block_size)"
        )

    def __repr__(self) -> str:
        return f"RefTile({self.begin}:{self.end}, block_size={self.block_size})"

    # -- torch protocol: a tile passed to a torch function outside the eager torch mode ----------

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        from helion.eager.mode import tiles_to_indices

        return func(*tiles_to_indices(args), **tiles_to_indices(kwargs or {}))


def _tile_operator(name: str):
    def operator(self: RefTile, *args: Any) -> Any:
        # arithmetic on a tile is arithmetic on its indices
        return getattr(self.index, name)(*args)

    operator.__name__ = name
    return operator


for _name in [
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__truediv__",
    "__rtruediv__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__neg__",
]:
    setattr(RefTile, _name, _tile_operator(_name))
