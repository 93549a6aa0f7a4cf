"""Shared host-side plumbing of the ready kernels: groups, cached symmetric workspaces, checks."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import torch

import helion.language as hl
from helion_distributed import symm_mem
from helion_distributed.errors import FP8Unsupported
from helion_distributed.errors import SymmetricMemoryError
from helion_distributed.symm_mem import _groups


@dataclasses.dataclass
class GroupInfo:
    group: Any
    name: str
    rank: int
    world_size: int

    @property
    def name_arg(self) -> hl.ProcessGroupName:
        return hl.ProcessGroupName(self.name)

    @property
    def rank_arg(self) -> hl.constexpr:
        return hl.constexpr(self.rank)

    @property
    def world_arg(self) -> hl.constexpr:
        return hl.constexpr(self.world_size)


def group_info(group: Any = None) -> GroupInfo:
    import torch.distributed as dist

    pg = symm_mem.resolve_group(group)
    return GroupInfo(pg, pg.group_name, dist.get_rank(pg), dist.get_world_size(pg))


class _Workspace:
    """A symmetric buffer kept between calls, rendezvoused on one group, with a call counter."""

    def __init__(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, group: GroupInfo
    ) -> None:
        self.buffer = symm_mem.empty(shape, dtype=dtype, device=device)
        self.handle = symm_mem.rendezvous(self.buffer, group.group)
        self.calls = 0

    def next_epoch(self) -> int:
        """1, 2, 3, ... (never 0, the value of a fresh pad word); the same on every rank as long
        as every rank makes the same calls."""
        self.calls += 1
        return self.calls % (2**31 - 2) + 1


_workspaces: dict[tuple, list[_Workspace]] = {}
_lock = threading.RLock()  # re-entrant: a group's finalizer may release workspaces in any thread


@_groups.on_release
def _release_gone_workspaces() -> None:
    """Drop the workspaces of destroyed or collected groups: their buffers, handles and the
    shared memory behind them go with them."""
    with _lock:
        gone = [
            _workspaces.pop(key, None)
            for key, found in list(_workspaces.items())
            if found[0].handle.group_ref.gone
        ]
    gone.clear()


def workspace(
    tag: str,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: torch.device,
    group: GroupInfo,
    *,
    copies: int = 1,
) -> list[_Workspace]:
    """``copies`` cached symmetric buffers for one use. Creating them is collective (every rank
    of the group calls it with the same arguments, as the ready kernels' callers do)."""
    key = (tag, tuple(int(s) for s in shape), dtype, str(device), group.name, copies)
    with _lock:
        found = _workspaces.get(key)
    if found is None or found[0].handle.group_ref() is not group.group:
        # none yet, or rendezvoused on an earlier group of this name (destroyed, re-created)
        found = [_Workspace(tuple(shape), dtype, device, group) for _ in range(copies)]
        with _lock:
            _workspaces[key] = found
    return found


def check_slots(handle: Any, needed: int, what: str) -> None:
    available = int(getattr(handle, "kernel_signal_slots", handle.signal_pad_size // 4))
    if needed > available:
        raise SymmetricMemoryError(
            f"{what} needs {needed} signal-pad slots, the pads have {available}: raise the pad size with "
            "helion_distributed.symm_mem.set_signal_pad_size() (before the first allocation) or use bigger blocks"
        )


def fp8_dtype() -> torch.dtype:
    dtype = getattr(torch, "float8_e4m3fn", None)
    if dtype is None:
        raise FP8Unsupported(
            f"this torch ({torch.__version__}) has no float8_e4m3fn dtype; the FP8 kernels need it"
        )
    try:
        torch.ones(2).to(dtype).to(torch.float32)
    except Exception as error:
        raise FP8Unsupported(
            f"this torch ({torch.__version__}) cannot convert float8_e4m3fn on CPU: {error}"
        ) from None
    return dtype


def check_fp8(*tensors: torch.Tensor) -> None:
    dtype = fp8_dtype()
    for t in tensors:
        if t.dtype != dtype:
            raise TypeError(f"expected {dtype} inputs, got {t.dtype}")


def normalize_dim(dim: int, ndim: int, what: str) -> int:
    if not -ndim <= dim < ndim:
        raise ValueError(f"{what}={dim} is out of range for a {ndim}-D tensor")
    return dim % ndim


def after_launch(*spaces: _Workspace, what: str) -> None:
    """Raise ``DistributedTimeout`` when a compiled kernel's wait timed out on this rank (it
    records the missing rank in its signal pad and gives up; see ``_triton``). CPU only: on CUDA
    reading the word would synchronize every call."""
    from helion_distributed._host_impl import check_kernel_timeouts

    for space in spaces:
        if space.buffer.device.type == "cpu":
            check_kernel_timeouts(space.handle, what)
