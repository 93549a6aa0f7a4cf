"""Symmetric memory for CPU ranks: POSIX shared memory mapped into every rank of a group.

``empty()`` creates one shared-memory file per allocation (in ``/dev/shm`` where it exists): the
buffer, then a signal pad of ``signal_pad_size`` bytes, both zero-filled. ``rendezvous()``
exchanges the file names over the group (a gloo ``all_gather_object``) and maps every peer's
file, so a peer's buffer is ordinary memory of this process: torch tensors over it
(``torch.frombuffer``) read and write the peer's data directly, exactly like a CUDA peer mapping.

A segment lives as long as something maps it: the tensors over it (whatever ``empty()`` returned
and its views hold the mapping through their storage) and the handles that rendezvoused it.
Handles are cached per allocation and group and dropped when the group is destroyed or
collected (``_groups``); when the owner's mapping dies, the owner unlinks the file (``_release``),
and the pages are freed once the peers' mappings of it are gone too. What is left is unlinked at
exit (``atexit``); the files of a process that died without running its exit handlers
(``SIGKILL``, ``os._exit``) are removed by the next allocation on the machine that finds their
owner gone.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import itertools
import mmap
import os
import re
import secrets
import socket
import tempfile
import threading
import weakref
from typing import Any
from typing import Sequence

import torch

from helion_distributed import _spin
from helion_distributed._atomics import Words
from helion_distributed.errors import DistributedTimeout
from helion_distributed.errors import SymmetricMemoryError
from helion_distributed.symm_mem import _groups

PREFIX = "helion-symm"
_ALIGN = 64
# layout of a signal pad of W words in a group of N ranks: kernels' slots first, then
# HOST_CHANNELS * N words for host channels (handle.barrier / put_signal / wait_signal), then
# one error word where compiled kernels record a timed-out wait (see _pads.py)
HOST_CHANNELS = 16

_lock = threading.RLock()
_counter = itertools.count()
_owned_paths: set[str] = set()
# live allocations of this process by serial number; an entry goes when its mapping dies
_allocations: dict[int, CpuAllocation] = {}
_swept = False


def kernel_slots(pad_words: int, world_size: int) -> int:
    """Words of a pad that kernels may use as slots (from word 0)."""
    return pad_words - 1 - HOST_CHANNELS * world_size


def error_word(pad_words: int) -> int:
    """The word where a compiled kernel records that one of its waits timed out."""
    return pad_words - 1


def shm_dir() -> str:
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return "/dev/shm"
    return tempfile.gettempdir()


def _align(n: int, to: int = _ALIGN) -> int:
    return (n + to - 1) // to * to


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_files() -> int:
    """Remove shared-memory files whose owner process no longer exists; return how many."""
    directory = shm_dir()
    pattern = re.compile(rf"^{PREFIX}-(\d+)-")
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        match = pattern.match(name)
        if match is None or _pid_alive(int(match.group(1))):
            continue
        try:
            os.unlink(os.path.join(directory, name))
            removed += 1
        except OSError:
            pass
    return removed


def _reserve(fd: int, size: int, path: str) -> None:
    # reserve the pages now: a full /dev/shm would otherwise surface as a SIGBUS at first touch
    if not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as error:
        if error.errno in (errno.EOPNOTSUPP, errno.EINVAL):
            return  # the file system cannot reserve; the pages are allocated when touched
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise SymmetricMemoryError(
            f"cannot reserve {size} bytes of shared memory in {os.path.dirname(path)} ({error.strerror}); "
            "free space there (containers often limit /dev/shm, e.g. docker --shm-size)"
        ) from None


class Segment:
    """One mapped shared-memory file (ours or a peer's), as a uint8 tensor over all of it; the
    tensor's storage keeps the mapping alive, and tensors over it outlive this object."""

    def __init__(self, path: str, whole: torch.Tensor, mapping: mmap.mmap | None = None) -> None:
        self.path = path
        self.bytes = whole
        self.size = whole.numel()
        self.mapping = mapping  # where map() made it (``whole`` holds it as well)

    @classmethod
    def map(cls, path: str, size: int, *, create: bool) -> Segment:
        """Map the file ``path`` (create it, zero-filled, when ``create``)."""
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            raise SymmetricMemoryError(
                f"cannot map the peer's symmetric memory {path!r}: the file is gone "
                "(its owner exited, or the ranks are not on one machine)"
            ) from None
        try:
            if create:
                os.ftruncate(fd, size)
                _reserve(fd, size, path)
            elif os.fstat(fd).st_size < size:
                raise SymmetricMemoryError(
                    f"the peer's symmetric memory {path!r} is smaller than announced"
                )
            mapping = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        return cls(path, torch.frombuffer(mapping, dtype=torch.uint8), mapping)

    @property
    def address(self) -> int:
        return self.bytes.data_ptr()

    def view(self, start: int, nbytes: int, dtype: torch.dtype) -> torch.Tensor:
        itemsize = torch.empty((), dtype=dtype).element_size()
        if start % itemsize:
            raise SymmetricMemoryError(
                f"offset {start} is not aligned to {dtype} ({itemsize} bytes)"
            )
        usable = nbytes // itemsize * itemsize
        return self.bytes[start : start + usable].view(dtype)


class CpuAllocation:
    """What ``empty()`` allocated: a buffer and its signal pad in one local segment. It records
    where the segment is mapped, not the mapping: that belongs to the tensors over it and to the
    handles (cached in ``handles`` until their group is gone)."""

    def __init__(self, buffer_bytes: int, pad_bytes: int) -> None:
        self.buffer_bytes = buffer_bytes
        self.pad_bytes = pad_bytes
        self.pad_start = _align(max(buffer_bytes, 1), 4096)
        self.serial = next(_counter)
        name = f"{PREFIX}-{os.getpid()}-{self.serial}-{secrets.token_hex(4)}"
        self.path = os.path.join(shm_dir(), name)
        self.size = self.pad_start + pad_bytes
        self.handles: dict[str, CpuSymmetricMemory] = {}
        self.address = 0

    def create(self) -> Segment:
        """Create and map the file; the caller keeps the only reference to the mapping."""
        segment = Segment.map(self.path, self.size, create=True)
        self.address = segment.address
        with _lock:
            _owned_paths.add(self.path)
            _allocations[self.serial] = self
        # when the last tensor or handle over the mapping is gone: forget it, unlink the file
        assert segment.mapping is not None
        weakref.finalize(segment.mapping, _release, self.serial, self.path).atexit = False
        return segment

    def contains(self, tensor: torch.Tensor) -> bool:
        if tensor.device.type != "cpu":
            return False
        start = address_of(tensor)
        if start == 0:
            return False
        if tensor.numel() == 0:  # an empty view may start right after the last element
            return self.address <= start <= self.address + self.buffer_bytes
        return self.address <= start < self.address + self.buffer_bytes

    def offset_of(self, tensor: torch.Tensor) -> int:
        return address_of(tensor) - self.address

    def own_segment(self, tensor: torch.Tensor) -> Segment:
        """This rank's segment, for a handle: the mapping ``tensor`` lies in (through its
        storage, which keeps it alive), else (a tensor that reached the memory another way,
        e.g. through numpy) a second mapping of the file."""
        whole = torch.empty(0, dtype=torch.uint8).set_(tensor.untyped_storage())
        if whole.data_ptr() == self.address and whole.numel() == self.size:
            return Segment(self.path, whole)
        return Segment.map(self.path, self.size, create=False)


def address_of(tensor: torch.Tensor) -> int:
    """Where ``tensor``'s first element is (or would be): ``data_ptr()``, which torch reports as
    0 for a tensor without elements, so for those the address its storage and offset give."""
    if tensor.numel():
        return tensor.data_ptr()
    base = tensor.untyped_storage().data_ptr()
    return base + tensor.storage_offset() * tensor.element_size() if base else 0


def _release(serial: int, path: str) -> None:
    """The mapping of allocation ``serial`` died: nothing of this process points into it any more.
    Unlinking the file is safe while peers still map it; its pages go with the last mapping."""
    with _lock:
        _allocations.pop(serial, None)
        owned = path in _owned_paths
        _owned_paths.discard(path)
    if owned:
        with contextlib.suppress(OSError):
            os.unlink(path)


def empty(size: Sequence[int], dtype: torch.dtype, pad_bytes: int) -> torch.Tensor:
    """A zero-filled CPU tensor in a fresh shared-memory segment (with its own signal pad)."""
    global _swept
    numel = 1
    for s in size:
        numel *= int(s)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if not _swept:
        _swept = True
        sweep_stale_files()
    segment = CpuAllocation(numel * itemsize, pad_bytes).create()
    flat = segment.view(0, numel * itemsize, dtype)
    return flat[:numel].view(tuple(int(s) for s in size))


def find_allocation(tensor: torch.Tensor) -> CpuAllocation | None:
    with _lock:
        allocations = list(_allocations.values())  # a finalizer may change the dict meanwhile
    for allocation in reversed(allocations):  # the newest first: it owns a reused address
        if allocation.contains(tensor):
            return allocation
    return None


def rendezvous(tensor: torch.Tensor, group: Any, group_name: str) -> CpuSymmetricMemory:
    allocation = find_allocation(tensor)
    if allocation is None:
        raise SymmetricMemoryError(
            "rendezvous needs a tensor allocated by helion_distributed.symm_mem.empty() "
            f"(got a {tensor.dtype} tensor of shape {list(tensor.shape)} in ordinary memory)"
        )
    handle = allocation.handles.get(group_name)
    if handle is None or handle.group_ref() is not group:
        # none yet, or one rendezvoused on an earlier group of this name (destroyed, re-created)
        _groups.release_gone()
        handle = CpuSymmetricMemory(allocation, allocation.own_segment(tensor), group, group_name)
        allocation.handles[group_name] = handle
    return handle


@_groups.on_release
def _release_gone_handles() -> None:
    gone = []
    with _lock:
        for allocation in list(_allocations.values()):
            for name, handle in list(allocation.handles.items()):
                if handle.group_ref.gone:
                    gone.append(allocation.handles.pop(name, None))
    # the last references to the handles (unless user code holds them): their peer mappings
    # die here, and so does this rank's mapping where no tensor holds it any more
    gone.clear()


class CpuSymmetricMemory:
    """The handle of a rendezvoused CPU allocation: same API as torch's ``_SymmetricMemory``."""

    def __init__(
        self, allocation: CpuAllocation, own: Segment, group: Any, group_name: str
    ) -> None:
        import torch.distributed as dist

        self.allocation = allocation
        # weakly: a handle cached past destroy_process_group must not keep the group (and its
        # worker threads) alive into interpreter shutdown, where gloo's threads abort the process
        self.group_ref = _groups.GroupRef(group)
        self.group_name = group_name
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.buffer_size = allocation.buffer_bytes
        self.signal_pad_size = allocation.pad_bytes
        self.device = torch.device("cpu")
        mine = (
            allocation.path,
            allocation.buffer_bytes,
            allocation.pad_bytes,
            allocation.pad_start,
            socket.gethostname(),
        )
        everyone: list[Any] = [None] * self.world_size
        dist.all_gather_object(everyone, mine, group=group)
        hosts = {info[4] for info in everyone}
        if len(hosts) > 1:
            raise SymmetricMemoryError(
                f"CPU symmetric memory needs every rank of group {group_name!r} on one machine; "
                f"the ranks run on {sorted(hosts)}"
            )
        sizes = {(info[1], info[2]) for info in everyone}
        if len(sizes) > 1:
            raise SymmetricMemoryError(
                f"rendezvous on group {group_name!r}: ranks allocated different sizes "
                f"(buffer, signal pad bytes per rank: {[info[1:3] for info in everyone]})"
            )
        self.segments: list[Segment] = []
        self.pad_starts: list[int] = []
        for peer, (path, _buffer_bytes, pad_bytes, pad_start, _host) in enumerate(everyone):
            if peer == self.rank:
                self.segments.append(own)
            else:
                self.segments.append(Segment.map(path, pad_start + pad_bytes, create=False))
            self.pad_starts.append(pad_start)
        # every rank has mapped every file before anyone may unlink or write to it
        dist.barrier(group=group)
        self.pads = [
            seg.view(start, self.signal_pad_size, torch.int32)
            for seg, start in zip(self.segments, self.pad_starts, strict=True)
        ]
        self.pad_words = [Words(p) for p in self.pads]
        self._views: dict[tuple, tuple[torch.Tensor, ...]] = {}
        self._ptrs = torch.tensor([s.address for s in self.segments], dtype=torch.int64)
        self._pad_ptrs = torch.tensor([p.data_ptr() for p in self.pads], dtype=torch.int64)

    # -- pointers -------------------------------------------------------------------------------

    @property
    def buffer_ptrs(self) -> list[int]:
        return [s.address for s in self.segments]

    @property
    def signal_pad_ptrs(self) -> list[int]:
        return [p.data_ptr() for p in self.pads]

    @property
    def buffer_ptrs_dev(self) -> int:
        """Address of an int64 array of ``buffer_ptrs`` (host memory on CPU)."""
        return self._ptrs.data_ptr()

    @property
    def signal_pad_ptrs_dev(self) -> int:
        return self._pad_ptrs.data_ptr()

    @property
    def kernel_signal_slots(self) -> int:
        """Words of each pad available to kernels (the rest is reserved for host channels)."""
        return kernel_slots(self.signal_pad_size // 4, self.world_size)

    # -- views ----------------------------------------------------------------------------------

    def _check_rank(self, rank: int) -> None:
        if not 0 <= rank < self.world_size:
            raise SymmetricMemoryError(
                f"rank {rank} is not in group {self.group_name!r} of size {self.world_size}"
            )

    def get_buffer(
        self, rank: int, sizes: Sequence[int], dtype: torch.dtype, storage_offset: int = 0
    ) -> torch.Tensor:
        """A tensor of ``sizes`` (contiguous) over rank ``rank``'s buffer, starting
        ``storage_offset`` elements of ``dtype`` in."""
        self._check_rank(rank)
        sizes = tuple(int(s) for s in sizes)
        numel = 1
        for s in sizes:
            numel *= s
        flat = self.segments[rank].view(0, self.buffer_size, dtype)
        if storage_offset + numel > flat.numel():
            raise SymmetricMemoryError(
                f"get_buffer({rank}, {list(sizes)}, {dtype}, storage_offset={storage_offset}) needs "
                f"{(storage_offset + numel) * flat.element_size()} bytes; the buffer has {self.buffer_size}"
            )
        return flat[storage_offset : storage_offset + numel].view(sizes)

    def get_signal_pad(
        self,
        rank: int,
        sizes: Sequence[int] | None = None,
        dtype: torch.dtype = torch.int32,
        storage_offset: int = 0,
    ) -> torch.Tensor:
        """Rank ``rank``'s signal pad (all of it by default) as a tensor."""
        self._check_rank(rank)
        flat = self.segments[rank].view(self.pad_starts[rank], self.signal_pad_size, dtype)
        if sizes is None or len(sizes) == 0:
            return flat[storage_offset:]
        numel = 1
        for s in sizes:
            numel *= int(s)
        if storage_offset + numel > flat.numel():
            raise SymmetricMemoryError(
                f"get_signal_pad: {numel} elements at {storage_offset} exceed the pad"
            )
        return flat[storage_offset : storage_offset + numel].view(tuple(int(s) for s in sizes))

    def get_remote_tensors(self, tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Every rank's view of ``tensor`` (same offset, shape and strides in each buffer);
        cached, since kernels ask for it on every launch."""
        offset = self.allocation.offset_of(tensor)
        key = (offset, tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype)
        cached = self._views.get(key)
        if cached is not None and cached[self.rank] is tensor:
            return cached
        views = self._make_views(tensor, offset)
        self._views[key] = views
        return views

    def _make_views(self, tensor: torch.Tensor, offset: int) -> tuple[torch.Tensor, ...]:
        itemsize = tensor.element_size()
        if offset % itemsize:
            raise SymmetricMemoryError(
                "the tensor is not aligned to its dtype inside its allocation"
            )
        span = (
            1 + sum((s - 1) * st for s, st in zip(tensor.shape, tensor.stride(), strict=True))
            if tensor.numel()
            else 0
        )
        if offset + span * itemsize > self.buffer_size:
            raise SymmetricMemoryError(
                "the tensor reaches past the end of its symmetric allocation"
            )
        views = []
        for rank in range(self.world_size):
            flat = self.segments[rank].view(0, self.buffer_size, tensor.dtype)
            views.append(
                flat.as_strided(tuple(tensor.shape), tuple(tensor.stride()), offset // itemsize)
            )
        views[self.rank] = tensor
        return tuple(views)

    def get_signal_pads(self) -> tuple[torch.Tensor, ...]:
        """Every rank's whole signal pad as an int32 tensor (kernels' slots first)."""
        return tuple(self.pads)

    # -- host synchronization -------------------------------------------------------------------

    def _channel_base(self, channel: int) -> int:
        if not 0 <= channel < HOST_CHANNELS:
            raise SymmetricMemoryError(f"channel must be in [0, {HOST_CHANNELS}), got {channel}")
        return self.signal_pad_size // 4 - 1 - (HOST_CHANNELS - channel) * self.world_size

    def barrier(self, channel: int = 0, timeout_ms: int = 0) -> None:
        """Every rank of the group meets here (through the signal pads, not the process group)."""
        words_per_rank = self.pad_words
        base = self._channel_base(channel)
        timeout = timeout_ms / 1000 if timeout_ms else None
        # express the channel as a barrier slot: slot * world_size == base
        _spin.barrier(
            [_Shifted(w, base) for w in words_per_rank],
            self.rank,
            0,
            what=f"symm_mem barrier (channel {channel})",
            group=self.group_name,
            timeout=timeout,
        )

    def put_signal(self, dst_rank: int, channel: int = 0, timeout_ms: int = 0) -> None:
        self._check_rank(dst_rank)
        slot = self._channel_base(channel) + self.rank

        def stuck(elapsed: float) -> DistributedTimeout:
            return DistributedTimeout(
                f"rank {self.rank} of group {self.group_name!r} timed out after {elapsed:.1f}s in put_signal: "
                f"rank {dst_rank} has not consumed the previous signal (channel {channel})",
                rank=self.rank,
                missing_ranks=[dst_rank],
                what="put_signal",
            )

        _spin.send(self.pad_words[dst_rank], slot, stuck, timeout_ms / 1000 if timeout_ms else None)

    def wait_signal(self, src_rank: int, channel: int = 0, timeout_ms: int = 0) -> None:
        self._check_rank(src_rank)
        slot = self._channel_base(channel) + src_rank

        def missing(elapsed: float) -> DistributedTimeout:
            return DistributedTimeout(
                f"rank {self.rank} of group {self.group_name!r} timed out after {elapsed:.1f}s in wait_signal: "
                f"no signal from rank {src_rank} (channel {channel})",
                rank=self.rank,
                missing_ranks=[src_rank],
                what="wait_signal",
            )

        _spin.receive(
            self.pad_words[self.rank], slot, missing, timeout_ms / 1000 if timeout_ms else None
        )

    def __repr__(self) -> str:
        return (
            f"CpuSymmetricMemory(rank={self.rank}, world_size={self.world_size}, group={self.group_name!r}, "
            f"buffer_size={self.buffer_size}, signal_pad_size={self.signal_pad_size})"
        )


class _Shifted:
    """A pad's words seen from a fixed offset (so a host channel looks like barrier slot 0)."""

    __slots__ = ("shift", "words")

    def __init__(self, words: Words, shift: int) -> None:
        self.words = words
        self.shift = shift

    def cas(self, offset: int, expected: int, desired: int) -> int:
        return self.words.cas(self.shift + offset, expected, desired)


def all_handles() -> list[CpuSymmetricMemory]:
    with _lock:
        return [h for a in list(_allocations.values()) for h in list(a.handles.values())]


@atexit.register
def _unlink_owned() -> None:
    with _lock:
        paths = list(_owned_paths)
        _owned_paths.clear()
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)
