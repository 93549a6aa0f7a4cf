"""Dependencies between top-level device loops.

All top-level loops of a kernel are one launch whose program ids are split between them, so
they run concurrently: a loop may not read or write a tensor that an earlier loop writes,
unless an `hl.barrier()` separates them (the ref backend would run them in order and hide the
race). The tracer reports every memory access here, and eager mode each access as it runs.
"""

from __future__ import annotations

from typing import Callable

from helion import exc


class LoopDependencies:
    """The tensors written since the last barrier, keyed by what identifies a tensor: its index
    among the kernel's tensor arguments when traced, its storage in eager mode (which runs the
    loops one after the other and checks the same rule as they run)."""

    def __init__(self) -> None:
        self.written_before: dict[object, str] = {}  # tensor key -> name, since the last barrier
        self.current: dict[object, str] | None = None  # writes of the open top-level loop

    def begin_loop(self) -> None:
        self.current = {}

    def end_loop(self) -> None:
        if self.current is not None:
            self.written_before.update(self.current)
        self.current = None

    def barrier(self) -> None:
        self.written_before.clear()

    def access(
        self, key: object, name: Callable[[], str], write: bool, loc: exc.SourceLocation | None
    ) -> None:
        """A read (or write) of the tensor ``key`` (``name()`` names it, asked only when needed)
        in the open top-level loop."""
        if key in self.written_before:
            raise exc.LoopDependencyError(name(), loc=loc)
        if write and self.current is not None and key not in self.current:
            self.current[key] = name()
