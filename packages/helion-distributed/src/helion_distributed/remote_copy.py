"""One-sided remote copies: ``hl.make_async_remote_copy``, ``hl.AsyncCopyDescriptor`` and
``hl.remote_barrier`` (the public Helion API; added to ``helion.language`` by the plugin).

A descriptor names a push of ``src[src_index]`` into ``dst[dst_index]`` on the peer rank
``device_id``; its methods are the ops. ``start()`` copies the region into the peer's symmetric
``dst`` and adds one to the peer's completion word; ``wait_recv()`` waits until this rank's word
counts an arrival and consumes it (so early or queued arrivals are kept); ``wait_send()`` orders
the reuse of the source (the issuing program performs the copy itself, so its loads are done when
``start()`` returns); ``wait()`` is both. ``remote_barrier(peers)`` is a two-phase counting
barrier with the listed peers only.

The completion words are compiler-owned: a traced kernel reserves words of the signal pads of a
symmetric workspace kept per (group, kernel) (``kernels._common.workspace``), one per descriptor
and two per barrier, per grid tile: word ``(flat tile id * words_per_tile + site) % capacity``.
The peers' views of ``dst`` and every rank's pad are kernel arguments the tracer lifts: they are
recomputed from the kernel's arguments at every launch (``Tracer.lift_computed``), so the user
passes no pads. The group is the kernel's ``hl.ProcessGroupName`` argument, else the default
group.
"""

from __future__ import annotations

from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion import exc
from helion.language import ConstExpr
from helion.language._ops import define_op
from helion_distributed import language as dl
from helion_distributed.errors import DistributedTimeout
from helion_distributed.errors import SymmetricMemoryError

start_op = define_op(
    "dist_remote_copy_start",
    None,
    side_effects=True,
    provider=dl.PROVIDER,
    doc="hl.AsyncCopyDescriptor.start",
)
wait_op = define_op(
    "dist_remote_copy_wait",
    None,
    side_effects=True,
    provider=dl.PROVIDER,
    doc="hl.AsyncCopyDescriptor.wait",
)
remote_barrier_op = define_op(
    "dist_remote_barrier", None, side_effects=True, provider=dl.PROVIDER, doc="hl.remote_barrier"
)
OPS = (start_op, wait_op, remote_barrier_op)

WAIT_KINDS = {"wait": "both", "wait_send": "send", "wait_recv": "recv"}
WORKSPACE_TAG = "remote-copy"


# ---------------------------------------------------------------------------------------------
# the group and the compiler-owned words


def kernel_group(values: Sequence[Any]) -> str | None:
    """The name of the kernel's ``hl.ProcessGroupName`` argument (None: the default group)."""
    from helion.language import ProcessGroupName

    for value in values:
        if isinstance(value, ProcessGroupName):
            return str(value.value)
    return None


def _group_info(group_name: str | None) -> Any:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise SymmetricMemoryError(
            "hl.make_async_remote_copy / hl.remote_barrier need an initialized process group "
            "(torch.distributed.init_process_group)"
        )
    from helion_distributed.kernels._common import group_info

    return group_info(group_name)


def workspace_pads(tag: str, group_name: str | None, device: torch.device) -> tuple:
    """Every rank's signal pad of the (group, kernel) workspace (created collectively, at the
    kernel's first trace, then cached)."""
    from helion_distributed.kernels._common import workspace

    space = workspace(tag, (1,), torch.int32, device, _group_info(group_name))[0]
    pads = getattr(space, "remote_copy_pads", None)
    if pads is None:
        pads = tuple(space.handle.get_signal_pads())
        space.remote_copy_pads = pads
        space.remote_copy_capacity = int(
            getattr(space.handle, "kernel_signal_slots", space.handle.signal_pad_size // 4)
        )
    return pads, space


class _PadResolver:
    """Rank ``peer``'s workspace pad, for a launch (a lifted kernel argument). Resolving this
    rank's own pad first reports a wait of an earlier compiled launch that timed out (a compiled
    kernel records it in the pad's error word instead of raising)."""

    def __init__(self, tag: str, group_name: str | None, device: torch.device, peer: int) -> None:
        self.tag = tag
        self.group_name = group_name
        self.device = device
        self.peer = peer

    def __call__(self, values: Sequence[Any]) -> torch.Tensor:
        pads, space = workspace_pads(self.tag, self.group_name, self.device)
        if self.peer == space.handle.rank:
            check_pad_timeouts(space, self.tag)
        return pads[self.peer]


def check_pad_timeouts(space: Any, tag: str) -> None:
    from helion_distributed._host_impl import take_kernel_timeout
    from helion_distributed._triton import UNKNOWN_PEER

    handle = space.handle
    missing = take_kernel_timeout(space.remote_copy_pads[handle.rank])
    if missing is None:
        return
    detail = "no arrival" if missing == UNKNOWN_PEER else f"no signal from rank {missing}"
    raise DistributedTimeout(
        f"rank {handle.rank} of group {handle.group_name!r} timed out in a remote-copy wait or "
        f"hl.remote_barrier of a launch of {tag.split(':', 1)[-1]}: {detail} (the compiled kernel "
        "gave up after the distributed timeout; that launch's results are invalid)",
        rank=handle.rank,
        missing_ranks=[] if missing == UNKNOWN_PEER else [missing],
        what="hl.make_async_remote_copy / hl.remote_barrier",
    )


def check_timeouts(group: Any = None) -> None:
    """Raise ``DistributedTimeout`` if a compiled kernel's remote-copy wait or remote barrier
    timed out on this rank (in any kernel's workspace of ``group``)."""
    from helion_distributed.kernels import _common

    name = _group_info(group).name
    for key, spaces in list(_common._workspaces.items()):
        ours = key[0].startswith(WORKSPACE_TAG + ":") and key[4] == name
        if ours and getattr(spaces[0], "remote_copy_pads", None) is not None:
            check_pad_timeouts(spaces[0], key[0])


class _PeerResolver:
    """Rank ``peer``'s view of the symmetric argument at ``position``, for a launch."""

    def __init__(self, position: int, group_name: str | None, peer: int, what: str) -> None:
        self.position = position
        self.group_name = group_name
        self.peer = peer
        self.what = what

    def __call__(self, values: Sequence[Any]) -> torch.Tensor:
        from helion_distributed import symm_mem

        tensor = values[self.position]
        require_symmetric(tensor, self.what)
        return symm_mem.get_remote_tensors(tensor, self.group_name)[self.peer]


def require_symmetric(tensor: torch.Tensor, what: str, loc: Any = None) -> None:
    from helion_distributed import symm_mem

    if not symm_mem.is_symm_mem_tensor(tensor):
        raise SymmetricMemoryError(
            f"{what}: the destination must be symmetric memory (allocate it with "
            "helion_distributed.symm_mem.empty on every rank); got an ordinary tensor",
            loc=loc,
        )


class SlotPlan:
    """The compiler-owned words of one traced kernel: its workspace pads (lifted kernel
    arguments) and how many words each grid tile uses (known once tracing is over)."""

    def __init__(self, tracer: Any, device: torch.device) -> None:
        values = [inp.value for inp in tracer.inputs]
        self.group_name = kernel_group(values)
        info = _group_info(self.group_name)
        self.rank = info.rank
        self.world_size = info.world_size
        self.tag = f"{WORKSPACE_TAG}:{tracer.ir.filename}:{tracer.ir.name}"
        pads, space = workspace_pads(self.tag, self.group_name, device)
        self.capacity = space.remote_copy_capacity
        self.pads = tuple(
            tracer.lift_computed(
                _PadResolver(self.tag, self.group_name, device, r), pads[r], f"remote_pad_{r}"
            ).arg
            for r in range(self.world_size)
        )
        self.words = 0
        self.peer_views: dict[int, tuple] = {}

    def reserve(self, count: int, loc: Any) -> int:
        word = self.words
        self.words += count
        if self.words > self.capacity:
            raise SymmetricMemoryError(
                f"the remote copies and barriers of this kernel need {self.words} signal words per "
                f"tile; the workspace pads have {self.capacity}: raise the pad size with "
                "helion_distributed.symm_mem.set_signal_pad_size()",
                loc=loc,
            )
        return word

    def views(self, tracer: Any, tensor: Any, what: str) -> tuple:
        """Every rank's view of the symmetric kernel argument ``tensor`` (lifted once)."""
        from helion_distributed import symm_mem

        position = tensor.arg.index
        if position >= len(tracer.inputs) or tracer.inputs[position].value is not tensor.real:
            raise exc.TypeInferenceError(
                f"{what}: the destination must be a tensor argument of the kernel",
                loc=tracer.current_loc(),
            )
        if position not in self.peer_views:
            require_symmetric(tensor.real, what, tracer.current_loc())
            peers = symm_mem.get_remote_tensors(tensor.real, self.group_name)
            self.peer_views[position] = tuple(
                tracer.lift_computed(
                    _PeerResolver(position, self.group_name, r, what),
                    peers[r],
                    f"{tensor.arg.name}_peer_{r}",
                ).arg
                for r in range(self.world_size)
            )
        return self.peer_views[position]

    def __repr__(self) -> str:
        return f"remote_words(per_tile={self.words}, capacity={self.capacity})"


def _plan(tracer: Any, device: torch.device) -> SlotPlan:
    plan = getattr(tracer, "_helion_distributed_remote_plan", None)
    if plan is None:
        plan = SlotPlan(tracer, device)
        tracer._helion_distributed_remote_plan = plan
    return plan


# ---------------------------------------------------------------------------------------------
# tracing


def _region(
    tracer: Any, tensor: Any, index: Any, inputs: list, what: str
) -> tuple[tuple, int | None, int]:
    """Items of a leading-dims index (ints, scalars, tiles), the block id of a tile item (it must
    come last: its rows and the suffix form one contiguous run) and the numel of one row."""
    from helion.frontend.proxies import DeviceValue
    from helion.frontend.proxies import TileProxy

    loc = tracer.current_loc()
    if not isinstance(index, (list, tuple)):
        raise exc.TypeInferenceError(
            f"{what} must be a list of leading indices (ints, scalars, tiles), got {type(index).__name__}",
            loc=loc,
        )
    if len(index) > tensor.ndim:
        raise exc.RankMismatch(tensor.ndim, len(index), what, loc=loc)
    items: list[tuple] = []
    tile_block = None
    for position, item in enumerate(index):
        if isinstance(item, ConstExpr):
            item = item.value
        if isinstance(item, slice) or item is None or item is Ellipsis:
            raise exc.InvalidIndexingType(
                f"{item!r} in {what}: remote copies index leading dimensions with ints, scalars "
                "and tiles only (the rest of the tensor is copied as one contiguous region); "
                "slices are not supported",
                loc=loc,
            )
        if isinstance(item, TileProxy):
            info = tracer.ir.block_sizes[item.block_id]
            if info.kind == "grid":
                inputs.append(tracer.tile_attr(item, "begin").value)
                items.append(("scalar", len(inputs) - 1))
                continue
            if position != len(index) - 1:
                raise exc.InvalidIndexingType(
                    f"a tile that is not the last item of {what} (the region would not be contiguous)",
                    loc=loc,
                )
            inputs.append(item.value)
            items.append(("tile", len(inputs) - 1, item.block_id))
            tile_block = item.block_id
        elif isinstance(item, DeviceValue):
            if item.ndim != 0 or item.dtype.is_floating_point or item.dtype == torch.bool:
                raise exc.InvalidIndexingType(
                    f"a tensor in {what} (use integer scalars, ints and tiles)", loc=loc
                )
            inputs.append(item.value)
            items.append(("scalar", len(inputs) - 1))
        elif isinstance(item, int) and not isinstance(item, bool):
            size = tensor.shape[position]
            value = item + size if item < 0 else item
            if not 0 <= value < size:
                raise exc.InvalidIndexingType(
                    f"index {item} out of range for dimension {position} of size {size} in {what}",
                    loc=loc,
                )
            items.append(("const", value))
        else:
            raise exc.InvalidIndexingType(
                f"a {type(item).__name__} in {what} (use ints, integer scalars and tiles)", loc=loc
            )
    first = len(index) - (1 if tile_block is not None else 0)
    expected = 1
    for dim in reversed(range(first, tensor.ndim)):
        if tensor.shape[dim] != 1 and tensor.stride(dim) != expected:
            raise exc.InvalidIndexingType(
                f"{what} selects a region of {tensor.arg.name} that is not contiguous "
                f"(shape {list(tensor.shape)}, strides {list(tensor.stride())})",
                loc=loc,
            )
        expected *= tensor.shape[dim]
    row = 1
    for dim in range(len(index), tensor.ndim):
        row *= tensor.shape[dim]
    return tuple(items), tile_block, row


def _host_tensor(tracer: Any, value: Any, what: str) -> Any:
    from helion.frontend.proxies import HostTensor

    if not isinstance(value, HostTensor):
        raise exc.TypeInferenceError(
            f"{what} must be a tensor argument of the kernel, got {type(value).__name__} (a computed "
            "tile cannot be pushed: store it into a tensor argument first)",
            loc=tracer.current_loc(),
        )
    return value


def _trace_make(
    tracer: Any,
    src: Any,
    src_index: Any,
    device_id: Any,
    dst: Any = None,
    dst_index: Any = None,
) -> AsyncCopyDescriptor:
    what = "hl.make_async_remote_copy"
    loc = tracer.current_loc()
    src = _host_tensor(tracer, src, f"{what}: src")
    dst = src if dst is None else _host_tensor(tracer, dst, f"{what}: dst")
    dst_index = src_index if dst_index is None else dst_index
    if src.dtype != dst.dtype:
        raise exc.TypeInferenceError(
            f"{what}: src and dst must have the same dtype, got {src.dtype} and {dst.dtype}",
            loc=loc,
        )
    inputs: list[Any] = []
    src_items, src_tile, src_row = _region(tracer, src, src_index, inputs, f"{what} src_index")
    dst_items, dst_tile, dst_row = _region(tracer, dst, dst_index, inputs, f"{what} dst_index")
    if src_row != dst_row or src_tile != dst_tile:
        src_what = f"{src_row} elements" + (" per tile row" if src_tile is not None else "")
        dst_what = f"{dst_row} elements" + (" per tile row" if dst_tile is not None else "")
        raise exc.ShapeMismatch(
            f"{what}: src[src_index] and dst[dst_index] must have the same number of elements "
            f"(src: {src_what}, dst: {dst_what}; a tile index must be the same tile on both)",
            loc=loc,
        )
    plan = _plan(tracer, src.device)
    peers = plan.views(tracer, dst, what)
    device = dl._scalar_operand(tracer, device_id, inputs, "device_id")
    if isinstance(device, int) and not 0 <= device < plan.world_size:
        raise exc.InvalidAPIUsage(
            f"{what}: device_id {device} is not a rank of the group (size {plan.world_size})",
            loc=loc,
        )
    word = plan.reserve(1, loc)
    attrs = {
        "src": src.arg,
        "src_items": src_items,
        "dst_peers": peers,
        "dst_items": dst_items,
        "device": device,
        "row_numel": src_row,
        "pads": plan.pads,
        "word": word,
        "plan": plan,
        "rank": plan.rank,
        "world_size": plan.world_size,
    }

    def issue(method: str) -> None:
        node_inputs = list(inputs)
        grid = dl._grid_tiles(tracer, node_inputs, f"AsyncCopyDescriptor.{method}()")
        if method == "start":
            tracer.emit(start_op, node_inputs, {**attrs, "grid": grid}, [])
            return
        wait_attrs = {k: attrs[k] for k in ("pads", "word", "plan", "rank", "world_size")}
        wait_attrs.update(kind=WAIT_KINDS[method], grid=grid)
        tracer.emit(wait_op, node_inputs, wait_attrs, [])

    return AsyncCopyDescriptor(issue, _token=_TOKEN)


def _peer_list(tracer: Any, device_ids: Any, inputs: list) -> tuple:
    from helion.frontend.proxies import DeviceValue
    from helion.frontend.proxies import HostTensor

    loc = tracer.current_loc()
    if isinstance(device_ids, ConstExpr):
        device_ids = device_ids.value
    if isinstance(device_ids, (DeviceValue, HostTensor)) and device_ids.ndim == 1:
        length = device_ids.shape[0]
        if not isinstance(length, int):
            raise exc.TypeInferenceError(
                "hl.remote_barrier: a tensor of peers needs a static length", loc=loc
            )
        device_ids = [device_ids[i] for i in range(int(length))]
    elif not isinstance(device_ids, (list, tuple)):
        device_ids = [device_ids]
    return tuple(
        dl._scalar_operand(tracer, peer, inputs, "a peer of hl.remote_barrier")
        for peer in device_ids
    )


def _trace_remote_barrier(tracer: Any, device_ids: Any) -> None:
    loc = tracer.current_loc()
    inputs: list[Any] = []
    peers = _peer_list(tracer, device_ids, inputs)
    plan = _plan(tracer, tracer.device)
    for peer in peers:
        if isinstance(peer, int) and not 0 <= peer < plan.world_size:
            raise exc.InvalidAPIUsage(
                f"hl.remote_barrier: peer {peer} is not a rank of the group (size {plan.world_size})",
                loc=loc,
            )
    word = plan.reserve(2, loc)
    grid = dl._grid_tiles(tracer, inputs, "hl.remote_barrier")
    attrs = {
        "peers": peers,
        "pads": plan.pads,
        "word": word,
        "plan": plan,
        "rank": plan.rank,
        "world_size": plan.world_size,
        "grid": grid,
    }
    tracer.emit(remote_barrier_op, inputs, attrs, [])


# ---------------------------------------------------------------------------------------------
# the public objects

_TOKEN = object()


class AsyncCopyDescriptor:
    """A one-sided push made by ``hl.make_async_remote_copy`` (do not construct it directly).

    Methods (device code): ``start()`` issues the push; ``wait_send()`` returns once the local
    source may be reused; ``wait_recv()`` once the matching incoming transfer (from the rank
    that pushes to this one through the same descriptor) has arrived and the local destination
    is readable; ``wait()`` is both. Receive completion is counted: each ``wait_recv()``
    consumes one arrival, and arrivals that came early or queued up are kept, so a descriptor
    can be reused in a loop. Receive waits assume balanced phases: every rank issues the
    matching ``start()`` through the same descriptor.
    """

    __slots__ = ("_issue",)

    def __init__(self, issue: Callable[[str], None], *, _token: Any = None) -> None:
        if _token is not _TOKEN:
            raise TypeError(
                "hl.AsyncCopyDescriptor is made by hl.make_async_remote_copy(...) in device code"
            )
        self._issue = issue

    def start(self) -> None:
        """Issue the push of ``src[src_index]`` into the peer's ``dst[dst_index]``."""
        self._issue("start")

    def wait(self) -> None:
        """``wait_send()`` and ``wait_recv()``."""
        self._issue("wait")

    def wait_send(self) -> None:
        """Return once the local source of this push may be overwritten."""
        self._issue("wait_send")

    def wait_recv(self) -> None:
        """Wait for (and consume) one arrival of the matching incoming transfer."""
        self._issue("wait_recv")

    def __repr__(self) -> str:
        return "<hl.AsyncCopyDescriptor>"


def _eager(name: str) -> Any:
    def run(mode: Any, *args: Any, **kwargs: Any) -> Any:
        from helion_distributed import _eager as impl

        return getattr(impl, name)(mode, *args, **kwargs)

    return run


make_async_remote_copy = dl.LanguageOp(
    "make_async_remote_copy",
    True,
    _trace_make,
    _eager("make_async_remote_copy"),
    doc="""Describe a one-sided push of ``src[src_index]`` into ``dst[dst_index]`` on rank
    ``device_id``; returns an ``hl.AsyncCopyDescriptor`` (``start()``, ``wait()``,
    ``wait_send()``, ``wait_recv()``).

    Args:
        src: a tensor argument of the kernel (a computed tile cannot be pushed).
        src_index: leading-dimension indices: ints, integer scalars (``tile.begin``, a loop
            index) and tiles (a tile must be the last item and selects the tile's rows); the
            remaining dimensions are copied as one contiguous region. Slices are rejected.
        device_id: the destination rank: a flat rank in the kernel's group (its
            ``hl.ProcessGroupName`` argument, else the default group), an int or a scalar.
        dst: a symmetric tensor argument (``helion_distributed.symm_mem.empty``); default
            ``src`` (which must then be symmetric).
        dst_index: as ``src_index``, for ``dst`` (default ``src_index``).

    Raises:
        InvalidIndexingType: a slice, a tensor index or a non-contiguous region.
        TypeInferenceError: ``src``/``dst`` not tensor arguments or of different dtypes.
        ShapeMismatch: the two regions have different sizes.
        SymmetricMemoryError: ``dst`` is not symmetric memory.
    """,
)

remote_barrier = dl.LanguageOp(
    "remote_barrier",
    True,
    _trace_remote_barrier,
    _eager("remote_barrier"),
    doc="""Meet the listed peers only: a two-phase barrier (each phase signals every listed
    peer and waits for as many signals), so a fast rank cannot re-enter on a reused slot.
    Remote copies issued before the barrier have landed after it. Every rank must list every
    peer it talks to (rank r lists s exactly when s lists r). Bounded by the distributed
    timeout.

    Args:
        device_ids: an int, a 1-D tensor of static length, or a list of ints and scalars:
            flat ranks of the kernel's group.
    """,
)

REMOTE_COPY_LANGUAGE_OPS = [make_async_remote_copy, AsyncCopyDescriptor, remote_barrier]
