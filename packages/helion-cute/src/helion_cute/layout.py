"""The thread layout of a SIMT program: how the elements of a tile are spread over threads.

Every value of a program lives in registers as a *fragment*: each thread holds a small block of
the value, and the block shape follows one "blocked" layout shared by the whole program (the
same idea as Triton's blocked layout, written here in our own terms):

* The program has an ordered list of **axes** (one per block-size symbol that occurs in value
  shapes; the last axis is the innermost, usually the memory-contiguous one).
* Along axis ``a`` a thread owns ``spt[a]`` consecutive elements, then the next ``T[a] * spt[a]``
  elements belong to the other threads, and the pattern repeats ``S[a] / (T[a] * spt[a])`` times,
  so a thread holds ``e[a] = S[a] / T[a]`` elements of that axis.
* ``T[a] = lanes[a] * warps[a]``: lanes are given out from the innermost axis outwards (so a warp
  reads contiguous memory) and warps from the outermost axis inwards (so reductions along the
  innermost axis stay inside a warp when they can).

A value whose shape lacks an axis has extent 1 there: it is replicated over the threads along
that axis, which is exactly what broadcasting needs. Fragments are CuTe ``TensorSSA`` values of
shape ``reversed(e)`` (CuTe is column-major, so the innermost axis is the first, fastest mode and
its contiguous elements can be moved with one vector instruction).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Sequence

import sympy

WARP_SIZE = 32


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


@dataclasses.dataclass
class Axis:
    """One axis of a program's iteration space.

    Attributes:
        key: The sympy expression that names the axis in value shapes (a block-size symbol, or
            an integer for constant-size dims).
        size: Padded extent in registers (a power of two).
        valid: Number of real elements (``size`` minus padding) when known statically; the
            elements past it are masked.
        eligible: Whether threads may be spread along this axis (dot contraction axes keep the
            whole extent in each thread).
    """

    key: sympy.Expr
    size: int
    valid: int
    eligible: bool = True
    # filled in by ThreadLayout
    spt: int = 1
    lanes: int = 1
    warps: int = 1
    lane_stride: int = 1
    warp_stride: int = 1

    @property
    def threads(self) -> int:
        return self.lanes * self.warps

    @property
    def per_thread(self) -> int:
        return self.size // self.threads

    def offset(self, j: int) -> int:
        """Local coordinate (relative to the thread's base) of the thread's j-th element."""
        return (j // self.spt) * (self.threads * self.spt) + j % self.spt


class ThreadLayout:
    """Spread the axes of one program over ``num_threads`` threads (see the module docstring)."""

    def __init__(self, axes: Sequence[Axis], num_threads: int, vector: int) -> None:
        self.axes = list(axes)
        self.index = {axis.key: i for i, axis in enumerate(self.axes)}
        eligible = [a for a in self.axes if a.eligible]
        if eligible and vector > 1:
            inner = eligible[-1]
            inner.spt = max(1, min(vector, inner.size))
        capacity = 1
        for axis in eligible:
            capacity *= axis.size // axis.spt
        # a tile smaller than the block leaves threads idle: launch only what has work
        self.num_threads = max(WARP_SIZE, min(num_threads, next_power_of_2(capacity)))
        lanes_left = WARP_SIZE
        stride = 1
        for axis in reversed(eligible):
            axis.lanes = min(lanes_left, axis.size // axis.spt)
            axis.lane_stride = stride
            stride *= axis.lanes
            lanes_left //= axis.lanes
        warps_left = self.num_threads // WARP_SIZE
        stride = 1
        for axis in eligible:
            room = axis.size // (axis.spt * axis.lanes)
            axis.warps = min(warps_left, room)
            axis.warp_stride = stride
            stride *= axis.warps
            warps_left //= axis.warps
        # lanes or warps that own no element hold copies of others' data
        self.replicated_lanes = lanes_left
        self.replicated_warps = warps_left

    @property
    def has_replicas(self) -> bool:
        return self.replicated_lanes > 1 or self.replicated_warps > 1

    def axis(self, key: sympy.Expr) -> Axis:
        return self.axes[self.index[key]]

    def shape(self, keys: Sequence[sympy.Expr] | frozenset) -> tuple[int, ...]:
        """Per-thread fragment shape (innermost axis first) of a value with these axes."""
        keys = set(keys)
        return tuple(a.per_thread if a.key in keys else 1 for a in reversed(self.axes))

    def elements(self, keys: Sequence[sympy.Expr] | frozenset) -> list[dict[sympy.Expr, int]]:
        """Per-axis element indices of every fragment element, in fragment (column-major) order."""
        keys = set(keys)
        ranges = [range(a.per_thread) if a.key in keys else range(1) for a in reversed(self.axes)]
        result = []
        # column-major: the first mode (innermost axis) varies fastest
        for combo in itertools.product(*reversed(ranges)):
            combo = tuple(reversed(combo))
            result.append(
                {
                    a.key: j
                    for a, j in zip(reversed(self.axes), combo, strict=False)
                    if a.key in keys
                }
            )
        return result

    def flat_index(self, keys: Sequence[sympy.Expr] | frozenset, indices: dict) -> int:
        """Position of an element (per-axis indices; missing axes broadcast) in a fragment."""
        keys = set(keys)
        position = 0
        multiplier = 1
        for axis in reversed(self.axes):
            if axis.key not in keys:
                continue
            position += indices.get(axis.key, 0) * multiplier
            multiplier *= axis.per_thread
        return position

    def describe(self) -> str:
        parts = []
        for a in self.axes:
            parts.append(
                f"{a.key}: size {a.size} = {a.per_thread // a.spt if a.spt else 0}x"
                f"({a.lanes} lanes x {a.warps} warps x {a.spt} vec)"
            )
        return f"{self.num_threads} threads; " + "; ".join(parts)
