"""What symmetric memory caches per process group, released when the group goes away.

Caches (rendezvous handles, the ready kernels' workspaces) hold their group through a
``GroupRef``: weakly, so that a cache never keeps a group (and gloo's worker threads, which abort
the process at interpreter exit) alive. A group is *gone* once it is garbage collected, or once
``destroy_process_group`` has removed it from torch's registry while user code still holds the
object. ``release_gone()`` makes every cache drop its entries of gone groups; what they held
(handles, workspace buffers, peer mappings) then dies with its last reference, and the CPU
segments with it (see ``_cpu``). It runs when a watched group is collected (``weakref.finalize``)
and before a rendezvous caches a new handle, which covers a destroyed group still referenced.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any
from typing import Callable

_lock = threading.Lock()
_watched: weakref.WeakSet[Any] = weakref.WeakSet()
_releasers: list[Callable[[], None]] = []


def _registered(group: Any) -> bool | None:
    """Whether torch still registers ``group`` (None where this torch does not tell)."""
    try:
        from torch.distributed import distributed_c10d as c10d

        return group in c10d._world.pg_map
    except Exception:
        return None


def registered_names() -> set[str] | None:
    """The names of the groups torch registers now (None where this torch does not tell)."""
    try:
        from torch.distributed import distributed_c10d as c10d

        return set(c10d._world.pg_names.values())
    except Exception:
        return None


class GroupRef:
    """A weak reference to a process group that also knows when the group was destroyed."""

    __slots__ = ("_ref", "_registered")

    def __init__(self, group: Any) -> None:
        self._ref = weakref.ref(group)
        # only a group torch registered can be seen destroyed (one built by hand never is)
        self._registered = _registered(group) is True
        watch(group)

    def __call__(self) -> Any:
        return self._ref()

    @property
    def gone(self) -> bool:
        group = self._ref()
        if group is None:
            return True
        return self._registered and _registered(group) is False


def on_release(releaser: Callable[[], None]) -> Callable[[], None]:
    """Register ``releaser`` (drops a cache's entries of gone groups; idempotent)."""
    _releasers.append(releaser)
    return releaser


def watch(group: Any) -> None:
    """Call ``release_gone`` when ``group`` is garbage collected."""
    with _lock:
        if group in _watched:
            return
        _watched.add(group)
    # not at exit: the atexit handlers unlink what is left, and caches no longer matter then
    weakref.finalize(group, release_gone).atexit = False


def release_gone() -> None:
    """Drop every cached handle and workspace of a gone group (safe to call at any time, also
    from a finalizer: the releasers iterate over copies and take re-entrant locks)."""
    for releaser in list(_releasers):
        releaser()
