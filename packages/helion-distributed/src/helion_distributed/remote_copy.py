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

Sizes: each trace copies the region its own tensors give (a new size under
``static_shapes=False`` is traced again), and a tile whose static loop runs past ``src`` or
``dst`` is refused when the kernel is traced (a copy is not masked). A run-time ``device_id``
outside the group is refused before the launch when it is a host scalar argument; one computed
in device code is found by the kernel itself (ref: at the op; compiled: recorded in this rank's
error word and raised by ``check_timeouts`` or the next launch). Either way the failing rank
releases its peers' waits (``RELEASED`` in their error words), so they stop at once instead of
timing out.
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
from helion_distributed.errors import DistributedError
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

# What the error word of a workspace pad holds besides ``1 + the rank a wait timed out on``
# (``_triton.UNKNOWN_PEER`` and below). RELEASED | r: rank r's launch failed and released this
# rank's waits. BAD_PEER | site << 16 | device_id (16 bits, clamped): this rank's compiled kernel
# named a rank outside the group at reserved word ``site``.
RELEASED = 0x20000000
BAD_PEER = 0x40000000
_SITE_BITS = 0x3FFF
_VALUE_LIMIT = 0x7FFF


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
    """Rank ``peer``'s workspace pad, for a launch (a lifted kernel argument)."""

    def __init__(self, tag: str, group_name: str | None, device: torch.device, peer: int) -> None:
        self.tag = tag
        self.group_name = group_name
        self.device = device
        self.peer = peer

    def __call__(self, values: Sequence[Any]) -> torch.Tensor:
        return workspace_pads(self.tag, self.group_name, self.device)[0][self.peer]


def _kernel_of(tag: str) -> str:
    return tag.split(":", 1)[-1]


def out_of_group(what: str, value: Any, world_size: int) -> str:
    """The text of a run-time rank outside the group (the same on every backend and path):
    ``what`` names the op and its operand (``hl.make_async_remote_copy: device_id``)."""
    return f"{what} {value} is not a rank of the group (size {world_size})"


def check_pad_errors(space: Any, tag: str) -> None:
    """Raise what a compiled launch recorded in this rank's workspace pad: a wait that timed out
    (``DistributedTimeout``), a ``device_id`` outside the group (``DistributedError`` with the
    op's line), or a peer whose launch failed and released this rank (``DistributedError``)."""
    from helion_distributed._host_impl import take_kernel_timeout
    from helion_distributed._triton import UNKNOWN_PEER

    handle = space.handle
    missing = take_kernel_timeout(space.remote_copy_pads[handle.rank])
    if missing is None:
        return
    code = missing + 1
    if code & BAD_PEER:
        site = (code >> 16) & _SITE_BITS
        value = code & 0xFFFF
        value = value - 0x10000 if value > _VALUE_LIMIT else value
        what, loc = getattr(space, "remote_copy_sites", {}).get(site, ("a remote copy", None))
        shown = str(value)
        if value >= _VALUE_LIMIT:
            shown = f"{_VALUE_LIMIT} or more"
        elif value <= -_VALUE_LIMIT - 1:
            shown = f"{-_VALUE_LIMIT - 1} or less"
        raise DistributedError(
            f"{out_of_group(what, shown, handle.world_size)}: found by the compiled kernel in a "
            f"launch of {_kernel_of(tag)} on rank {handle.rank}, which skipped the op there (that "
            "launch's results are invalid; the peers' waits were released)",
            loc=loc,
        )
    if code & RELEASED:
        raise _released_error(handle.rank, code & 0xFFFF, tag)
    detail = "no arrival" if missing == UNKNOWN_PEER else f"no signal from rank {missing}"
    raise DistributedTimeout(
        f"rank {handle.rank} of group {handle.group_name!r} timed out in a remote-copy wait or "
        f"hl.remote_barrier of a launch of {_kernel_of(tag)}: {detail} (the compiled kernel "
        "gave up after the distributed timeout; that launch's results are invalid)",
        rank=handle.rank,
        missing_ranks=[] if missing == UNKNOWN_PEER else [missing],
        what="hl.make_async_remote_copy / hl.remote_barrier",
    )


def _released_error(rank: int, failed: int, tag: str) -> DistributedError:
    return DistributedError(
        f"rank {rank}: rank {failed} failed in a launch of {_kernel_of(tag)} and released this "
        f"rank's remote-copy and remote_barrier waits (rank {failed} reports the cause; that "
        "launch's results are invalid)"
    )


def release_peers(pads: Sequence[torch.Tensor], rank: int) -> None:
    """This rank's launch failed: mark every peer's error word (where nothing else is recorded)
    so that their waits of the launch stop now rather than at the timeout."""
    from helion_distributed._atomics import Words
    from helion_distributed.symm_mem._cpu import error_word

    for peer, pad in enumerate(pads):
        if peer != rank:
            Words(pad).cas(error_word(pad.numel()), 0, RELEASED | rank)


def take_release(pad: torch.Tensor, rank: int, tag: str) -> DistributedError | None:
    """For host-run waits (the ref backend): the error of a peer that released this rank (the
    word is reset), else None."""
    from helion_distributed._atomics import Words
    from helion_distributed.symm_mem._cpu import error_word

    words = Words(pad)
    position = error_word(pad.numel())
    code = words.load(position)
    if not code & RELEASED or code & BAD_PEER:
        return None
    words.cas(position, code, 0)
    return _released_error(rank, code & 0xFFFF, tag)


class _LaunchChecks:
    """What is checked before every launch: first what an earlier compiled launch recorded in
    this rank's pad (``check_pad_errors``: a compiled kernel records instead of raising), then
    the ranks of the kernel's remote copies and barriers that are host scalar arguments. They
    run in the plan's last lifted argument, so that a rank raising here has taken part in every
    rendezvous the launch's lifted arguments need (its peers would wait for it there)."""

    def __init__(self, tag: str, group_name: str | None, device: torch.device) -> None:
        self.tag = tag
        self.group_name = group_name
        self.device = device
        self.checks: list[tuple[int, str, Any]] = []  # (argument position, what, loc)
        self.last: Any = None

    def run(self, values: Sequence[Any]) -> None:
        pads, space = workspace_pads(self.tag, self.group_name, self.device)
        check_pad_errors(space, self.tag)
        world = len(pads)
        for position, what, loc in self.checks:
            value = int(values[position])
            if not 0 <= value < world:
                release_peers(pads, space.handle.rank)
                raise DistributedError(out_of_group(what, value, world), loc=loc)


def check_timeouts(group: Any = None) -> None:
    """Raise what a compiled kernel's remote copies or remote barriers recorded on this rank (in
    any kernel's workspace of ``group``): ``DistributedTimeout`` for a wait that timed out,
    ``DistributedError`` for a run-time ``device_id`` outside the group (with its line) or for a
    peer whose launch failed and released this rank's waits."""
    from helion_distributed.kernels import _common

    name = _group_info(group).name
    for key, spaces in list(_common._workspaces.items()):
        ours = key[0].startswith(WORKSPACE_TAG + ":") and key[4] == name
        if ours and getattr(spaces[0], "remote_copy_pads", None) is not None:
            check_pad_errors(spaces[0], key[0])


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


class _Checked:
    """A lifted argument's resolver that runs the launch checks when it is the plan's last."""

    def __init__(self, resolve: Callable[[Sequence[Any]], torch.Tensor], checks: Any) -> None:
        self.resolve = resolve
        self.checks = checks

    def __call__(self, values: Sequence[Any]) -> torch.Tensor:
        tensor = self.resolve(values)
        if self.checks.last is self:
            self.checks.run(values)
        return tensor


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
        # reserved word -> (op, loc): how the host names a site the compiled kernel reports
        sites = getattr(space, "remote_copy_sites", None)
        if sites is None:
            sites = space.remote_copy_sites = {}
        self.sites: dict[int, tuple[str, Any]] = sites
        self.launch_checks = _LaunchChecks(self.tag, self.group_name, device)
        self.pads = tuple(
            self.lift(
                tracer,
                _PadResolver(self.tag, self.group_name, device, r),
                pads[r],
                f"remote_pad_{r}",
            )
            for r in range(self.world_size)
        )
        self.words = 0
        self.peer_views: dict[int, tuple] = {}

    def lift(self, tracer: Any, resolve: Callable, tensor: torch.Tensor, name: str) -> Any:
        """A lifted kernel argument; the last one lifted runs the launch checks."""
        resolver = _Checked(resolve, self.launch_checks)
        self.launch_checks.last = resolver
        return tracer.lift_computed(resolver, tensor, name).arg

    def check_at_launch(self, tracer: Any, operand: Any, inputs: list, what: str, loc: Any) -> None:
        """A rank operand that is a host scalar argument is checked before every launch (one
        computed in device code is checked by the kernel)."""
        if not isinstance(operand, tuple):
            return
        value = inputs[operand[1]]
        for scalar in tracer.ir.scalar_args:
            if scalar.value is value:
                self.launch_checks.checks.append((scalar.index, what, loc))
                return

    def reserve(self, count: int, loc: Any, what: str) -> int:
        word = self.words
        self.words += count
        if self.words > self.capacity:
            raise SymmetricMemoryError(
                f"the remote copies and barriers of this kernel need {self.words} signal words per "
                f"tile; the workspace pads have {self.capacity}: raise the pad size with "
                "helion_distributed.symm_mem.set_signal_pad_size()",
                loc=loc,
            )
        self.sites[word] = (what, loc)
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
                self.lift(
                    tracer,
                    _PeerResolver(position, self.group_name, r, what),
                    peers[r],
                    f"{tensor.arg.name}_peer_{r}",
                )
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
    from helion.language._ops import TILE_ATTRS

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
            _check_tile_bounds(tracer, tensor, position, item.block_id, what, loc)
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
            producer = item.value.producer
            if producer is not None and producer.op is TILE_ATTRS["begin"]:
                block_id = producer.attrs["block_id"]
                if tracer.ir.block_sizes[block_id].kind == "grid":
                    # an hl.grid index: it takes every value of its loop's range
                    _check_tile_bounds(tracer, tensor, position, block_id, what, loc)
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


def _check_tile_bounds(
    tracer: Any, tensor: Any, dim: int, block_id: int, what: str, loc: Any
) -> None:
    """Refuse a tile (or ``hl.grid`` index) whose loop has static bounds that run past
    dimension ``dim`` of ``tensor``, as core does for loads and stores: a copy is not masked, so
    compiled code would read or write past the tensor. Every trace checks its own sizes (each
    size of a ``static_shapes=False`` kernel is traced). A copy under an ``if`` is left alone:
    that branch may never reach the end."""
    if len(tracer.blocks) - 1 > tracer.loop_depth:
        return
    bounds = tracer.open_tiles.get(block_id)
    size = tensor.shape[dim]
    if bounds is None or not isinstance(size, int):
        return
    begin, end = bounds[0], bounds[1]
    if isinstance(begin, int) and isinstance(end, int) and 0 <= begin < end and end > size:
        raise exc.IndexOutOfBounds(
            what,
            tensor.arg.name,
            max(begin, size),
            dim,
            size,
            loc=loc,
            hint=(
                "A remote copy is not masked: the tiles of its index must lie inside both src "
                "and dst. Loop over the size of the smaller one (or give dst room for every "
                "tile)."
            ),
        )


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
    plan.check_at_launch(tracer, device, inputs, f"{what}: device_id", loc)
    word = plan.reserve(1, loc, f"{what}: device_id")
    attrs = {
        "src": src.arg,
        "dst_name": dst.arg.name,
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
        plan.check_at_launch(tracer, peer, inputs, "hl.remote_barrier: peer", loc)
    word = plan.reserve(2, loc, "hl.remote_barrier: peer")
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
            A run-time value outside the group is checked before the launch when it is a
            scalar argument of the kernel, else by the kernel (ref: at the op; compiled: it
            skips the op and ``helion_distributed.check_timeouts()`` or the next launch
            raises); the peers' waits of that launch are released.
        dst: a symmetric tensor argument (``helion_distributed.symm_mem.empty``); default
            ``src`` (which must then be symmetric).
        dst_index: as ``src_index``, for ``dst`` (default ``src_index``).

    Raises:
        InvalidIndexingType: a slice, a tensor index or a non-contiguous region.
        TypeInferenceError: ``src``/``dst`` not tensor arguments or of different dtypes.
        ShapeMismatch: the two regions have different sizes.
        IndexOutOfBounds: a tile whose loop (static bounds) runs past ``src`` or ``dst``; each
            call's sizes are checked (a new size under ``static_shapes=False`` is traced).
        InvalidAPIUsage: a constant ``device_id`` outside the group.
        SymmetricMemoryError: ``dst`` is not symmetric memory.
        DistributedError: a run-time ``device_id`` outside the group (on the rank that names
            it), or a peer that failed so and released this rank's waits.
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
            flat ranks of the kernel's group. A run-time peer outside the group is handled as
            a run-time ``device_id`` of ``hl.make_async_remote_copy``.
    """,
)

REMOTE_COPY_LANGUAGE_OPS = [make_async_remote_copy, AsyncCopyDescriptor, remote_barrier]
