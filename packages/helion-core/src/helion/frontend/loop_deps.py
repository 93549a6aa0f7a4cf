"""Dependencies between top-level device loops.

All top-level loops of a kernel are one launch whose program ids are split between them, so
they run concurrently: a loop may not read or write a tensor that an earlier loop writes,
unless an `hl.barrier()` separates them (the ref backend would run them in order and hide the
race). The tracer reports every memory access here.
"""

from __future__ import annotations

from helion import exc
from helion.ir.core import TensorArg


class LoopDependencies:
    def __init__(self) -> None:
        self.written_before: dict[int, str] = {}  # tensor index -> name, since the last barrier
        self.current: dict[int, str] | None = None  # writes of the open top-level loop

    def begin_loop(self) -> None:
        self.current = {}

    def end_loop(self) -> None:
        if self.current is not None:
            self.written_before.update(self.current)
        self.current = None

    def barrier(self) -> None:
        self.written_before.clear()

    def access(self, arg: TensorArg, write: bool, loc: exc.SourceLocation | None) -> None:
        if arg.index in self.written_before:
            raise exc.LoopDependencyError(arg.name, loc=loc)
        if write and self.current is not None:
            self.current[arg.index] = arg.name
