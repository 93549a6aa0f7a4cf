"""Lowerings of the distributed ops for the Triton backend (merged into helion-triton's table
through the ``helion_lowerings("triton")`` hook). A rule is ``rule(ctx, node)``; ``ctx`` is
helion-triton's ``KernelCodegen``.

Peer buffers and signal pads are ordinary tensor parameters of the generated kernel (every
element of a ``hl.peer_tensors`` / ``hl.signal_pads`` tuple is one), so a peer access is a plain
``tl.load`` / ``tl.store`` through that pointer: a peer-mapped address on CUDA, shared memory
under the interpreter (CPU tensors), where Triton's atomics are real host atomics.

Synchronization is the handshake of ``_spin`` (sender: CAS 0 -> 1, receiver: CAS 1 -> 0) with
``acq_rel`` / ``sys``-scope atomics, framed by ``tl.debug_barrier()`` so that every thread's
writes precede the signal and every thread's reads follow the wait. A tile collective uses the
slot of its grid tile (the flat tile id), so the same tile on every rank pairs up.

Every spin is bounded. A wait that runs out writes ``1 + missing rank`` into the error word of
this rank's pad (the last word) and gives up; later waits of the kernel see the error word and
do not spin. The host reads the word after the launch (``check_kernel_timeouts``) and raises
``DistributedTimeout`` naming the missing rank; the ready kernels do this after every call.
Remote copies also record there a run-time ``device_id`` outside the group (and mark their
peers' words ``RELEASED``, which stops a remote-copy wait that is spinning); see the codes in
``remote_copy``.
"""

from __future__ import annotations

from typing import Any
from typing import Callable

import torch

from helion_distributed import _env
from helion_distributed import language as dl
from helion_distributed import remote_copy as rc

# spins per second of timeout: the interpreter runs a spin iteration in ~250 us, a GPU in ~1 us
_SPINS_PER_SECOND_INTERPRETED = 4_000
_SPINS_PER_SECOND_DEVICE = 1_000_000
UNKNOWN_PEER = 0x7FFF

_HANDSHAKE = """
@triton.jit
def _helion_dist_handshake(ptr, expect, desired, limit, err_ptr, err_code):
    # compare-and-swap ptr from expect to desired, spinning at most `limit` times; on a timeout
    # record err_code in the error word (and skip the spin when an earlier wait already failed)
    failed = tl.atomic_add(err_ptr, 0, sem="acquire", scope="sys")
    if failed == 0:
        spins = 0
        old = tl.atomic_cas(ptr, expect, desired, sem="acq_rel", scope="sys")
        while (old != expect) & (spins < limit):
            old = tl.atomic_cas(ptr, expect, desired, sem="acq_rel", scope="sys")
            spins += 1
        if old != expect:
            tl.atomic_xchg(err_ptr, err_code, sem="release", scope="sys")
"""

_WAIT_SCALAR = """
@triton.jit
def _helion_dist_wait_scalar(ptr, expect, limit, err_ptr, err_code):
    # spin until the word at ptr holds expect (bounded; see _helion_dist_handshake)
    failed = tl.atomic_add(err_ptr, 0, sem="acquire", scope="sys")
    if failed == 0:
        spins = 0
        current = tl.atomic_add(ptr, 0, sem="acquire", scope="sys")
        while (current != expect) & (spins < limit):
            current = tl.atomic_add(ptr, 0, sem="acquire", scope="sys")
            spins += 1
        if current != expect:
            tl.atomic_xchg(err_ptr, err_code, sem="release", scope="sys")
"""

_WAIT_EQUAL = """
@triton.jit
def _helion_dist_wait_equal(ptr, mask, expect, limit, err_ptr, err_code):
    # spin until every unmasked word at ptr holds expect (bounded; see _helion_dist_handshake)
    failed = tl.atomic_add(err_ptr, 0, sem="acquire", scope="sys")
    if failed == 0:
        spins = 0
        current = tl.atomic_add(ptr, 0, mask=mask, sem="acquire", scope="sys")
        pending = tl.sum(tl.where(mask & (current != expect), 1, 0))
        while (pending > 0) & (spins < limit):
            current = tl.atomic_add(ptr, 0, mask=mask, sem="acquire", scope="sys")
            pending = tl.sum(tl.where(mask & (current != expect), 1, 0))
            spins += 1
        if pending > 0:
            tl.atomic_xchg(err_ptr, err_code, sem="release", scope="sys")
"""


def _spin_limit(ctx: Any, seconds: float | None = None) -> int:
    """Spins that take about ``seconds`` (default: the distributed timeout, read at compile time)."""
    rate = _SPINS_PER_SECOND_INTERPRETED if ctx.target.interpret else _SPINS_PER_SECOND_DEVICE
    return max(int((_env.timeout_s() if seconds is None else seconds) * rate), 1)


class _LoadLike:
    memory = "load"


class _Output:
    def __init__(self, shape: tuple) -> None:
        self.shape = shape


class _Access:
    """What helion-triton's ``pointer_access`` reads from a memory node, for one tensor."""

    op = _LoadLike

    def __init__(self, tensor: Any, items: tuple, inputs: list, shape: tuple) -> None:
        self.attrs = {"tensor": tensor, "items": items, "mask": None}
        self.inputs = inputs
        self.output = _Output(tuple(shape))
        self.outputs = [self.output]


def _pointer(
    ctx: Any, node: Any, tensor: Any, items: tuple | None = None
) -> tuple[str, str | None]:
    from helion_triton.memory import pointer_access

    access = _Access(
        tensor, node.attrs["items"] if items is None else items, node.inputs, node.attrs["shape"]
    )
    pointer, mask, _ = pointer_access(ctx, access)
    return pointer, mask


def _scalar(ctx: Any, node: Any, operand: Any) -> str:
    if isinstance(operand, tuple):
        return ctx.operand(node.inputs[operand[1]], torch.int32)
    return str(int(operand))


def _error_pointer(ctx: Any, pad: Any) -> str:
    words = 1
    for s in pad.shape:
        words *= int(s)
    return f"{ctx.tensor_param(pad.index)} + {words - 1}"


def _error_code(peer: int | None) -> int:
    return 1 + (UNKNOWN_PEER if peer is None else int(peer))


def _handshake(
    ctx: Any,
    ptr: str,
    expect: str,
    desired: str,
    err_ptr: str,
    peer: int | None,
    seconds: float | None = None,
) -> None:
    ctx.helper("_helion_dist_handshake", _HANDSHAKE)
    limit = _spin_limit(ctx, seconds)
    ctx.emit(
        f"_helion_dist_handshake({ptr}, {expect}, {desired}, {limit}, {err_ptr}, {_error_code(peer)})"
    )


# -- hl.signal / hl.wait ---------------------------------------------------------------------------


def _signal(ctx: Any, node: Any) -> None:
    pad = node.attrs["tensor"]
    pointer, mask = _pointer(ctx, node, pad)
    value = _scalar(ctx, node, node.attrs["signal"])
    sem = node.attrs["sem"]
    scope = node.attrs["scope"]
    if sem != "relaxed":
        ctx.emit("tl.debug_barrier()")
    if node.attrs["wait_for"] is not None:
        if node.attrs["shape"]:
            raise ctx.unsupported(
                "hl.signal(wait_for=...) on more than one word (index it with scalars)"
            )
        _handshake(
            ctx,
            pointer,
            _scalar(ctx, node, node.attrs["wait_for"]),
            value,
            _error_pointer(ctx, pad),
            None,
        )
        return
    function = "tl.atomic_add" if node.attrs["op"] == "add" else "tl.atomic_xchg"
    masked = f", mask={mask}" if mask is not None else ""
    ctx.emit(f'{function}({pointer}, {value}{masked}, sem="{sem}", scope="{scope}")')


def _wait(ctx: Any, node: Any) -> None:
    pad = node.attrs["tensor"]
    pointer, mask = _pointer(ctx, node, pad)
    value = _scalar(ctx, node, node.attrs["signal"])
    err_ptr = _error_pointer(ctx, pad)
    if node.attrs["update"] is not None:
        if node.attrs["shape"]:
            raise ctx.unsupported(
                "hl.wait(update=...) on more than one word (index it with scalars)"
            )
        _handshake(
            ctx,
            pointer,
            value,
            _scalar(ctx, node, node.attrs["update"]),
            err_ptr,
            None,
            node.attrs["timeout"],
        )
    elif not node.attrs["shape"]:
        ctx.helper("_helion_dist_wait_scalar", _WAIT_SCALAR)
        limit = _spin_limit(ctx, node.attrs["timeout"])
        ctx.emit(
            f"_helion_dist_wait_scalar({pointer}, {value}, {limit}, {err_ptr}, {_error_code(None)})"
        )
    else:
        ctx.helper("_helion_dist_wait_equal", _WAIT_EQUAL)
        lanes = (
            mask
            if mask is not None
            else f"tl.full({ctx.shape(node.attrs['shape'])}, True, tl.int1)"
        )
        limit = _spin_limit(ctx, node.attrs["timeout"])
        ctx.emit(
            f"_helion_dist_wait_equal({pointer}, {lanes}, {value}, {limit}, {err_ptr}, {_error_code(None)})"
        )
    if node.attrs["sem"] != "relaxed":
        ctx.emit("tl.debug_barrier()")


# -- barrier and tile collectives ---------------------------------------------------------------------


def _slot(ctx: Any, node: Any) -> str:
    """The flat id of the grid tile this node runs in (the same tile has it on every rank)."""
    flat = None
    for position in reversed(node.attrs["grid"]):
        tile = ctx.tile_vars(node.inputs[position])
        if tile.offset is None:
            return "tl.program_id(0)"
        index = f"(({tile.offset} - {tile.begin}) // {tile.step})"
        count = f"tl.cdiv({tile.end} - {tile.begin}, {tile.step})"
        flat = index if flat is None else f"({index} + {count} * {flat})"
    return ctx.assign(flat or "0", "slot")


def _barrier_at(ctx: Any, node: Any, slot: str) -> None:
    pads = node.attrs["pads"]
    rank = node.attrs["rank"]
    world = node.attrs["world_size"]
    params = [ctx.tensor_param(p.index) for p in pads]
    err_ptr = _error_pointer(ctx, pads[rank])
    base = ctx.assign(f"{slot} * {world}", "slot_base")
    ctx.emit("tl.debug_barrier()")
    for peer in range(world):
        _handshake(ctx, f"{params[peer]} + {base} + {rank}", "0", "1", err_ptr, peer)
    for peer in range(world):
        _handshake(ctx, f"{params[rank]} + {base} + {peer}", "1", "0", err_ptr, peer)
    ctx.emit("tl.debug_barrier()")


def _peer_barrier(ctx: Any, node: Any) -> None:
    _barrier_at(ctx, node, _slot(ctx, node))


def _combine(op: str, a: str, b: str) -> str:
    if op == "sum":
        return f"{a} + {b}"
    if op == "prod":
        return f"{a} * {b}"
    return f"tl.maximum({a}, {b})" if op == "max" else f"tl.minimum({a}, {b})"


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.bool:  # int1 addition wraps (True + True == False); torch's is an "or"
        return torch.int32
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _load(ctx: Any, pointer: str, mask: str | None, dtype: torch.dtype) -> str:
    text = f"tl.load({pointer})" if mask is None else f"tl.load({pointer}, {mask}, other=0)"
    compute = _compute_dtype(dtype)
    return ctx.assign(ctx.cast(text, compute, dtype), "peer_value")


def _store(ctx: Any, pointer: str, mask: str | None, value: str) -> None:
    ctx.emit(
        f"tl.store({pointer}, {value})" if mask is None else f"tl.store({pointer}, {value}, {mask})"
    )


def _all_reduce(ctx: Any, node: Any) -> str:
    peers = node.attrs["tensors"]
    rank = node.attrs["rank"]
    dtype = node.output.dtype
    slot = _slot(ctx, node)
    pointer, mask = _pointer(ctx, node, peers[rank])
    _store(ctx, pointer, mask, ctx.expr(node.inputs[node.attrs["value"]]))
    _barrier_at(ctx, node, slot)
    acc = None
    for peer in peers:
        pointer, mask = _pointer(ctx, node, peer)
        value = _load(ctx, pointer, mask, dtype)
        acc = (
            value if acc is None else ctx.assign(_combine(node.attrs["op"], acc, value), "reduced")
        )
    _barrier_at(ctx, node, slot)
    return ctx.cast(acc, dtype, _compute_dtype(dtype))


def _all_gather(ctx: Any, node: Any) -> str:
    peers = node.attrs["tensors"]
    rank = node.attrs["rank"]
    world = node.attrs["world_size"]
    shape = tuple(node.output.shape)
    dtype = node.output.dtype
    slot = _slot(ctx, node)
    pointer, mask = _pointer(ctx, node, peers[rank])
    _store(ctx, pointer, mask, ctx.expr(node.inputs[node.attrs["value"]]))
    _barrier_at(ctx, node, slot)
    lane = ctx.place(f"tl.arange(0, {ctx.dim_str(shape[0])})", 0, shape)
    result = ctx.assign(f"tl.zeros({ctx.shape(shape)}, {ctx.tl(dtype)})", "gathered")
    region = ", ".join(["None"] + [":"] * (len(shape) - 1)) if len(shape) > 1 else None
    for r in range(world):
        pointer, mask = _pointer(ctx, node, peers[r])
        text = f"tl.load({pointer})" if mask is None else f"tl.load({pointer}, {mask}, other=0)"
        value = ctx.assign(text, "peer_value")
        spread = f"{value}[{region}]" if region else value
        ctx.emit(f"{result} = tl.where({lane} == {r}, {spread}, {result})")
    _barrier_at(ctx, node, slot)
    return result


def _reduce_scatter(ctx: Any, node: Any) -> str:
    peers = node.attrs["tensors"]
    rank = node.attrs["rank"]
    world = node.attrs["world_size"]
    dtype = node.output.dtype
    items = node.attrs["items"]
    slot = _slot(ctx, node)

    def with_rank(r: int) -> tuple:
        return (("const", r), *items[1:])

    for destination, position in enumerate(node.attrs["values"]):
        pointer, mask = _pointer(ctx, node, peers[destination], with_rank(rank))
        _store(ctx, pointer, mask, ctx.expr(node.inputs[position]))
    _barrier_at(ctx, node, slot)
    acc = None
    for source in range(world):
        pointer, mask = _pointer(ctx, node, peers[rank], with_rank(source))
        value = _load(ctx, pointer, mask, dtype)
        acc = (
            value if acc is None else ctx.assign(_combine(node.attrs["op"], acc, value), "reduced")
        )
    _barrier_at(ctx, node, slot)
    return ctx.cast(acc, dtype, _compute_dtype(dtype))


# -- remote copies (hl.make_async_remote_copy, hl.remote_barrier) -------------------------------

_PUT_CHUNK = 256

_PUT = """
@triton.jit
def _helion_dist_put(src, dst, n, CHUNK: tl.constexpr):
    # copy n contiguous elements from src to dst (a peer's memory), CHUNK lanes at a time
    for start in range(0, n, CHUNK):
        lanes = start + tl.arange(0, CHUNK)
        inside = lanes < n
        tl.store(dst + lanes, tl.load(src + lanes, mask=inside), mask=inside)
"""

_CONSUME = """
@triton.jit
def _helion_dist_consume(ptr, count, limit, err_ptr, err_code):
    # wait until the word at ptr counts `count` arrivals, then take them (later arrivals stay);
    # bounded like _helion_dist_handshake, and given up early when the error word is set while
    # waiting (a peer whose launch failed released this rank)
    failed = tl.atomic_add(err_ptr, 0, sem="acquire", scope="sys")
    if failed == 0:
        spins = 0
        current = tl.atomic_add(ptr, 0, sem="acquire", scope="sys")
        while (current < count) & (spins < limit) & (failed == 0):
            current = tl.atomic_add(ptr, 0, sem="acquire", scope="sys")
            spins += 1
            if spins % 16 == 0:
                failed = tl.atomic_add(err_ptr, 0, sem="relaxed", scope="sys")
        if current >= count:
            tl.atomic_add(ptr, -count, sem="relaxed", scope="sys")
        elif failed == 0:
            tl.atomic_xchg(err_ptr, err_code, sem="release", scope="sys")
"""


def _remote_word(ctx: Any, node: Any, offset: int = 0) -> str:
    plan = node.attrs["plan"]
    slot = _slot(ctx, node)
    word = node.attrs["word"] + offset
    return ctx.assign(f"({slot} * {plan.words} + {word}) % {plan.capacity}", "remote_word")


def _region(ctx: Any, node: Any, tensor: Any, items: tuple) -> tuple[str, str | None]:
    """The element offset of a remote-copy region and its number of tile rows (None: one row)."""
    terms = []
    rows = None
    for dim, item in enumerate(items):
        stride = int(tensor.stride[dim])
        if item[0] == "const":
            terms.append(str(item[1] * stride))
        elif item[0] == "scalar":
            terms.append(f"{ctx.operand(node.inputs[item[1]], torch.int64)} * {stride}")
        else:
            tile = ctx.tile_vars(node.inputs[item[1]])
            start = tile.offset if tile.offset is not None else tile.begin
            terms.append(f"{start} * {stride}")
            rows = f"tl.minimum({tile.step}, {tile.end} - {start})"
    return ctx.assign(" + ".join(terms) if terms else "0", "region"), rows


def _emit_for_peers(ctx: Any, node: Any, operand: Any, body: Callable[[int], None]) -> None:
    """``body(rank)`` for the rank the peer operand names: a constant needs no test, a run-time
    value one ``if`` per rank of the group, and one more for a value outside the group."""
    if not isinstance(operand, tuple):
        body(int(operand))
        return
    world = node.attrs["world_size"]
    # compared in 64 bits: a value past the int32 range must not wrap onto a rank
    peer = ctx.assign(ctx.operand(node.inputs[operand[1]], torch.int64), "peer")
    for rank in range(world):
        ctx.emit(f"if {peer} == {rank}:")
        with ctx.indented():
            body(rank)
    ctx.emit(f"if ({peer} < 0) | ({peer} >= {world}):")
    with ctx.indented():
        _record_bad_peer(ctx, node, peer)


def _record_bad_peer(ctx: Any, node: Any, peer: str) -> None:
    """A run-time rank outside the group: record it (with the op's site) in this rank's error
    word, where the host finds it (``remote_copy.check_pad_errors``), and release the peers'
    waits; the waits of this launch on this rank then skip their spin. Only the first program
    to find it releases the peers (once per launch: a peer takes the mark when it reports it,
    and a second one would be left for its next launch)."""
    pads = node.attrs["pads"]
    rank = node.attrs["rank"]
    site = min(node.attrs["word"], rc._SITE_BITS)
    limit = rc._VALUE_LIMIT
    value = f"(tl.minimum(tl.maximum({peer}, {-limit - 1}), {limit}) & 65535)"
    code = f"({rc.BAD_PEER | (site << 16)} | {value}).to(tl.int32)"
    own = _error_pointer(ctx, pads[rank])
    before = ctx.assign(f'tl.atomic_xchg({own}, {code}, sem="acq_rel", scope="sys")', "recorded")
    ctx.emit(f"if {before} == 0:")
    with ctx.indented():
        for other, pad in enumerate(pads):
            if other != rank:
                pointer = _error_pointer(ctx, pad)
                ctx.emit(
                    f'tl.atomic_cas({pointer}, 0, {rc.RELEASED | rank}, sem="release", scope="sys")'
                )


def _signal_add(ctx: Any, node: Any, peer: int, word: str) -> None:
    pad = ctx.tensor_param(node.attrs["pads"][peer].index)
    ctx.emit(f'tl.atomic_add({pad} + {word}, 1, sem="release", scope="sys")')


def _consume(ctx: Any, node: Any, word: str, count: int, peer: int | None) -> None:
    pad = node.attrs["pads"][node.attrs["rank"]]
    ctx.helper("_helion_dist_consume", _CONSUME)
    ctx.emit(
        f"_helion_dist_consume({ctx.tensor_param(pad.index)} + {word}, {count}, {_spin_limit(ctx)}, "
        f"{_error_pointer(ctx, pad)}, {_error_code(peer)})"
    )


def _remote_copy_start(ctx: Any, node: Any) -> None:
    attrs = node.attrs
    word = _remote_word(ctx, node)
    src_offset, rows = _region(ctx, node, attrs["src"], attrs["src_items"])
    dst_offset, _ = _region(ctx, node, attrs["dst_peers"][0], attrs["dst_items"])
    count = str(attrs["row_numel"]) if rows is None else f"{rows} * {attrs['row_numel']}"
    count = ctx.assign(count, "count")
    source = f"{ctx.tensor_param(attrs['src'].index)} + {src_offset}"
    ctx.helper("_helion_dist_put", _PUT)
    ctx.emit("tl.debug_barrier()")  # every thread's earlier writes of the source are done

    def push(peer: int) -> None:
        target = f"{ctx.tensor_param(attrs['dst_peers'][peer].index)} + {dst_offset}"
        ctx.emit(f"_helion_dist_put({source}, {target}, {count}, {_PUT_CHUNK})")
        ctx.emit("tl.debug_barrier()")  # the whole region is written before it is announced
        _signal_add(ctx, node, peer, word)

    _emit_for_peers(ctx, node, attrs["device"], push)


def _remote_copy_wait(ctx: Any, node: Any) -> None:
    # the issuing program copies in start(): its loads of the source are complete, so the send
    # side only needs every thread past them
    if node.attrs["kind"] != "send":
        _consume(ctx, node, _remote_word(ctx, node), 1, None)
    ctx.emit("tl.debug_barrier()")


def _remote_barrier(ctx: Any, node: Any) -> None:
    peers = node.attrs["peers"]
    known = [p for p in peers if not isinstance(p, tuple)]
    missing = known[0] if len(peers) == 1 and known else None
    ctx.emit("tl.debug_barrier()")
    for phase in range(2):
        word = _remote_word(ctx, node, phase)
        for operand in peers:
            _emit_for_peers(
                ctx, node, operand, lambda peer, word=word: _signal_add(ctx, node, peer, word)
            )
        _consume(ctx, node, word, len(peers), missing)
    ctx.emit("tl.debug_barrier()")


def triton_lowerings() -> dict[Any, Callable]:
    return {
        dl.signal_op: _signal,
        dl.wait_op: _wait,
        dl.barrier_op: _peer_barrier,
        dl.all_reduce_op: _all_reduce,
        dl.all_gather_op: _all_gather,
        dl.reduce_scatter_op: _reduce_scatter,
        rc.start_op: _remote_copy_start,
        rc.wait_op: _remote_copy_wait,
        rc.remote_barrier_op: _remote_barrier,
    }
