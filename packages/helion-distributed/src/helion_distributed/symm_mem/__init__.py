"""One symmetric-memory API for CPU and CUDA ranks.

    buf = symm_mem.empty(n, dtype=torch.float32, device=x.device)    # collective-free allocation
    hdl = symm_mem.rendezvous(buf, group)                            # collective: maps the peers
    hdl.rank, hdl.world_size, hdl.buffer_ptrs, hdl.signal_pad_ptrs
    peer = hdl.get_buffer(peer_rank, [n], torch.float32)             # a peer's buffer, as a tensor
    hdl.barrier()
    peers = symm_mem.get_remote_tensors(buf, group)                  # every rank's view of buf
    pads = symm_mem.get_signal_pads(buf, group)                      # every rank's signal pad

On CUDA this wraps ``torch.distributed._symmetric_memory``. On CPU the buffers and signal pads
are POSIX shared memory mapped into every rank process of a gloo group (see ``_cpu``), so the
same kernels run, and are tested, as N CPU processes on a laptop.

``group`` is a ``ProcessGroup``, a group name (what an ``hl.ProcessGroupName`` argument holds)
or None for the default group.
"""

from __future__ import annotations

import os
import weakref
from typing import Any
from typing import Sequence

import torch

from helion_distributed.errors import SymmetricMemoryError
from helion_distributed.symm_mem import _cpu
from helion_distributed.symm_mem import _groups

__all__ = [
    "SymmetricMemory",
    "empty",
    "get_remote_tensors",
    "get_signal_pad_size",
    "get_signal_pads",
    "group_name",
    "is_symm_mem_tensor",
    "rendezvous",
    "resolve_group",
    "set_signal_pad_size",
]

PAD_SIZE_ENV = "HELION_SYMM_SIGNAL_PAD_SIZE"
DEFAULT_CPU_SIGNAL_PAD_SIZE = 256 * 1024

_cpu_pad_size: int | None = None


# -- groups -------------------------------------------------------------------------------------


def resolve_group(group: Any = None) -> Any:
    """The ``ProcessGroup`` for a group, a group name (str or ``hl.ProcessGroupName``) or None."""
    import torch.distributed as dist

    from helion.language import ConstExpr

    if isinstance(group, ConstExpr):
        group = group.value
    if not dist.is_available() or not dist.is_initialized():
        raise SymmetricMemoryError(
            "symmetric memory needs torch.distributed initialized: call "
            "torch.distributed.init_process_group('gloo') (CPU) or ('nccl') (CUDA) first, e.g. by "
            "launching with `python -m torch.distributed.run --nproc-per-node N script.py`"
        )
    if group is None:
        return dist.group.WORLD
    if group is dist.GroupMember.NON_GROUP_MEMBER:  # what new_group returns on other ranks
        raise SymmetricMemoryError(
            f"rank {dist.get_rank()} is not a member of this group: torch.distributed.new_group "
            "returned it a placeholder; call the kernel only on the group's ranks"
        )
    if isinstance(group, str):
        from torch.distributed import distributed_c10d as c10d

        found = _groups_by_name.get(group)
        if found is not None and c10d._world.pg_names.get(found) == group:
            return found
        try:
            found = c10d._resolve_process_group(group)
        except Exception as error:
            raise SymmetricMemoryError(f"no process group is named {group!r} ({error})") from None
        _groups_by_name[group] = found
        return found
    return group


# names resolved once (kernels resolve their hl.ProcessGroupName argument on every launch);
# weakly, and a hit counts only while torch still registers the group under that name: a
# destroyed group must neither be kept alive nor found again when a new one takes its name
_groups_by_name: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def group_name(group: Any = None) -> str:
    """The name of a group (what to pass as an ``hl.ProcessGroupName`` kernel argument)."""
    return resolve_group(group).group_name


# -- allocation ---------------------------------------------------------------------------------


def set_signal_pad_size(nbytes: int) -> None:
    """Signal-pad bytes of later allocations (each pad word is a 32-bit slot)."""
    global _cpu_pad_size
    if nbytes <= 0 or nbytes % 4:
        raise ValueError(f"the signal pad size must be a positive multiple of 4, got {nbytes}")
    _cpu_pad_size = int(nbytes)
    if torch.cuda.is_available():
        from torch.distributed import _symmetric_memory as torch_symm

        torch_symm.set_signal_pad_size(int(nbytes))


def get_signal_pad_size(device: Any = "cpu") -> int:
    device = torch.device(device)
    if device.type == "cuda":
        from torch.distributed import _symmetric_memory as torch_symm

        return int(torch_symm.get_signal_pad_size())
    if _cpu_pad_size is not None:
        return _cpu_pad_size
    text = os.environ.get(PAD_SIZE_ENV, "").strip()
    return int(text) if text else DEFAULT_CPU_SIGNAL_PAD_SIZE


def empty(*size: Any, dtype: torch.dtype | None = None, device: Any = None) -> torch.Tensor:
    """A tensor in symmetric memory, like ``torch.empty`` (CPU allocations are zero-filled).

    It becomes reachable from the other ranks once every rank of a group has called
    ``rendezvous`` on its own allocation of the same size.
    """
    if len(size) == 1 and isinstance(size[0], (list, tuple, torch.Size)):
        size = tuple(size[0])
    dims = tuple(int(s) for s in size)
    dtype = dtype or torch.get_default_dtype()
    device = torch.device(device) if device is not None else torch.get_default_device()
    if device.type == "cpu":
        return _cpu.empty(dims, dtype, get_signal_pad_size("cpu"))
    if device.type == "cuda":
        from torch.distributed import _symmetric_memory as torch_symm

        tensor = torch_symm.empty(dims, dtype=dtype, device=device)
        _remember_cuda_allocation(tensor)
        return tensor
    raise SymmetricMemoryError(
        f"symmetric memory is available on CPU and CUDA devices, not {device.type}"
    )


# CUDA allocations made by `empty`: storage address -> (bytes, the tensor, weakly). Torch's own
# test (`is_symm_mem_tensor`) is missing or answers False before a rendezvous in some releases
# (torch 2.11 on the H200 said False for a fresh allocation)
_cuda_allocations: dict[int, tuple[int, weakref.ref]] = {}


def _remember_cuda_allocation(tensor: torch.Tensor) -> None:
    storage = tensor.untyped_storage()
    address = storage.data_ptr()
    _cuda_allocations[address] = (storage.nbytes(), weakref.ref(tensor))
    weakref.finalize(tensor, _cuda_allocations.pop, address, None)


def _in_cuda_allocation(tensor: torch.Tensor) -> bool:
    address = tensor.untyped_storage().data_ptr()
    for start, (size, ref) in list(_cuda_allocations.items()):
        if start <= address < start + max(size, 1) and ref() is not None:
            return True
    return False


def is_symm_mem_tensor(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` lies in memory allocated by ``empty`` (and so may be rendezvoused)."""
    if tensor.device.type == "cpu":
        return _cpu.find_allocation(tensor) is not None
    if tensor.device.type == "cuda":
        from torch.distributed import _symmetric_memory as torch_symm

        if _in_cuda_allocation(tensor):
            return True

        try:
            return bool(torch_symm.is_symm_mem_tensor(tensor))
        except Exception:
            return False
    return False


# -- rendezvous ---------------------------------------------------------------------------------


class SymmetricMemory:
    """The handle ``rendezvous`` returns (documentation of the common API; both the CPU and the
    CUDA handle provide it).

    Attributes:
        rank, world_size: this rank and the size of the group.
        group_name: the group's name.
        buffer_ptrs, signal_pad_ptrs: per-rank addresses, valid in this process.
        buffer_ptrs_dev, signal_pad_ptrs_dev: address of an array of those pointers, for kernels.
        buffer_size, signal_pad_size: bytes.
    Methods:
        get_buffer(rank, sizes, dtype, storage_offset=0), get_signal_pad(rank, sizes, dtype,
        storage_offset=0), get_remote_tensors(tensor), get_signal_pads(), barrier(channel=0,
        timeout_ms=0), put_signal(dst_rank, channel=0), wait_signal(src_rank, channel=0).
    """


class CudaSymmetricMemory:
    """torch's ``_SymmetricMemory`` handle plus the helpers our kernels use."""

    def __init__(self, handle: Any, group: Any) -> None:
        self._handle = handle
        self.group_name = group.group_name
        self.group_ref = _groups.GroupRef(group)  # weakly, as the CPU handle (see there)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    @property
    def kernel_signal_slots(self) -> int:
        return int(self._handle.signal_pad_size) // 4

    def get_remote_tensors(self, tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Every rank's view of ``tensor``: same offset into its allocation, shape and strides."""
        handle = self._handle
        offset = tensor.data_ptr() - handle.buffer_ptrs[handle.rank]
        if offset < 0 or offset % tensor.element_size():
            raise SymmetricMemoryError("the tensor does not lie in its symmetric allocation")
        start = offset // tensor.element_size()
        span = (
            1 + sum((s - 1) * st for s, st in zip(tensor.shape, tensor.stride(), strict=True))
            if tensor.numel()
            else 0
        )
        views = []
        for rank in range(handle.world_size):
            if rank == handle.rank:
                views.append(tensor)
                continue
            flat = handle.get_buffer(rank, [span], tensor.dtype, start)
            views.append(flat.as_strided(tuple(tensor.shape), tuple(tensor.stride())))
        return tuple(views)

    def get_signal_pads(self) -> tuple[torch.Tensor, ...]:
        count = int(self._handle.signal_pad_size) // 4
        return tuple(
            self._handle.get_signal_pad(r, [count], dtype=torch.int32)
            for r in range(self.world_size)
        )

    def __repr__(self) -> str:
        return f"CudaSymmetricMemory(rank={self.rank}, world_size={self.world_size}, group={self.group_name!r})"


_cuda_handles: dict[tuple[int, str], CudaSymmetricMemory] = {}


@_groups.on_release
def _release_gone_cuda_handles() -> None:
    gone = [key for key, handle in list(_cuda_handles.items()) if handle.group_ref.gone]
    for key in gone:
        _cuda_handles.pop(key, None)


def rendezvous(tensor: torch.Tensor, group: Any = None) -> Any:
    """Map every rank's allocation of ``tensor`` (collective over ``group``); cached, so calling
    it again for the same allocation and group is cheap and not collective."""
    pg = resolve_group(group)
    name = pg.group_name
    if tensor.device.type == "cpu":
        return _cpu.rendezvous(tensor, pg, name)
    if tensor.device.type == "cuda":
        from torch.distributed import _symmetric_memory as torch_symm

        key = (tensor.untyped_storage().data_ptr(), name)
        handle = _cuda_handles.get(key)
        if handle is None or handle.group_ref() is not pg:
            _groups.release_gone()
            enabled = getattr(torch_symm, "is_symm_mem_enabled_for_group", None)
            if enabled is not None and not enabled(name):
                torch_symm.enable_symm_mem_for_group(name)  # needed by older torch releases
            raw = torch_symm.rendezvous(tensor, name)
            if raw is None:
                raise SymmetricMemoryError(
                    "rendezvous needs a tensor allocated by helion_distributed.symm_mem.empty()"
                )
            handle = CudaSymmetricMemory(raw, pg)
            _cuda_handles[key] = handle
        return handle
    raise SymmetricMemoryError(
        f"symmetric memory is available on CPU and CUDA devices, not {tensor.device.type}"
    )


def get_remote_tensors(tensor: torch.Tensor, group: Any = None) -> tuple[torch.Tensor, ...]:
    """Every rank's view of the symmetric tensor ``tensor`` (index = rank in ``group``); the
    element at this rank is ``tensor`` itself. Like ``torch.ops.symm_mem.get_remote_tensors``."""
    return rendezvous(tensor, group).get_remote_tensors(tensor)


def get_signal_pads(tensor: torch.Tensor, group: Any = None) -> tuple[torch.Tensor, ...]:
    """Every rank's signal pad of ``tensor``'s allocation, as int32 tensors (index = rank)."""
    return rendezvous(tensor, group).get_signal_pads()


def locate_pad(tensor: torch.Tensor) -> tuple[int, str] | None:
    """(owner rank, group name) of the signal pad ``tensor`` lies in, or None when unknown."""
    handles: Sequence[Any] = (
        _cpu.all_handles() if tensor.device.type == "cpu" else list(_cuda_handles.values())
    )
    address = tensor.data_ptr()
    for handle in handles:
        size = int(handle.signal_pad_size)
        for rank, start in enumerate(handle.signal_pad_ptrs):
            if start <= address < start + size:
                return rank, handle.group_name
    return None


def describe_pad(tensor: torch.Tensor) -> str | None:
    """'the signal pad of rank r (group g)' for error messages, or None when unknown."""
    found = locate_pad(tensor)
    if found is None:
        return None
    return f"the signal pad of rank {found[0]} (group {found[1]!r})"
