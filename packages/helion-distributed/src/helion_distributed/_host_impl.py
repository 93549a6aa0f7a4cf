"""What the distributed ops do, on real tensors, for the backends that run on the host: the ref
backend's lowerings (``_ref``) and eager mode (``_eager``) both call these.

Tile collectives use one signal-pad slot per call, numbered by the order of the calls in one
launch (``slot``); every rank runs the same kernel with the same config, so the numbers agree.
"""

from __future__ import annotations

import os
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion_distributed import _spin
from helion_distributed._atomics import Words
from helion_distributed.errors import DistributedTimeout
from helion_distributed.symm_mem._cpu import kernel_slots

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _global_rank() -> str:
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            return str(dist.get_rank())
    except Exception:
        pass
    return os.environ.get("RANK", "?")


def pad_offsets(pad: torch.Tensor, index: tuple) -> list[int]:
    """Flat element offsets (from ``pad``'s first element) of the words ``pad[index]`` selects."""
    if pad.numel() == 0:
        return []
    span = 1 + sum((s - 1) * st for s, st in zip(pad.shape, pad.stride(), strict=True))
    ids = torch.arange(span, dtype=torch.int64).as_strided(tuple(pad.shape), tuple(pad.stride()))
    return ids[index].reshape(-1).tolist()


def _describe(pad: torch.Tensor) -> str:
    from helion_distributed import symm_mem

    return (
        symm_mem.describe_pad(pad) or f"a signal pad of {pad.numel()} words at 0x{pad.data_ptr():x}"
    )


def signal(pad: torch.Tensor, index: tuple, value: int, wait_for: int | None, op: str) -> None:
    words = Words(pad)
    for offset in pad_offsets(pad, index):
        if wait_for is None:
            if op == "add":
                words.add(offset, value)
            else:
                words.exchange(offset, value)
            continue

        def stuck(elapsed: float, offset: int = offset) -> DistributedTimeout:
            current = words.load(offset)
            return DistributedTimeout(
                f"rank {_global_rank()} timed out after {elapsed:.1f}s in hl.signal(wait_for={wait_for}) on "
                f"{_describe(pad)}, word {offset}: it still holds {current} (the receiver never consumed the "
                "previous signal)",
                what=f"hl.signal on {_describe(pad)}",
            )

        _spin.spin_until(
            lambda offset=offset: words.cas(offset, wait_for, value) == wait_for, stuck
        )


def wait(
    pad: torch.Tensor, index: tuple, value: int, update: int | None, timeout: float | None
) -> None:
    words = Words(pad)
    for offset in pad_offsets(pad, index):

        def missing(elapsed: float, offset: int = offset) -> DistributedTimeout:
            current = words.load(offset)
            return DistributedTimeout(
                f"rank {_global_rank()} timed out after {elapsed:.1f}s in hl.wait on {_describe(pad)}, "
                f"word {offset}: waiting for {value}, it holds {current} (the rank that should signal it "
                "never did)",
                what=f"hl.wait on {_describe(pad)}",
            )

        if update is None:
            _spin.spin_until(lambda offset=offset: words.load(offset) == value, missing, timeout)
        else:
            _spin.spin_until(
                lambda offset=offset: words.cas(offset, value, update) == value, missing, timeout
            )


def _capacity(pads: Sequence[torch.Tensor]) -> int:
    world = len(pads)
    slots = kernel_slots(pads[0].numel(), world) // world
    if slots < 1:
        slots = max(pads[0].numel() // world, 1)
    return slots


def barrier(pads: Sequence[torch.Tensor], rank: int, slot: int, what: str) -> None:
    from helion_distributed import symm_mem

    words = [Words(p) for p in pads]
    found = symm_mem.locate_pad(pads[rank])
    group = found[1] if found is not None else "?"
    _spin.barrier(words, rank, slot % _capacity(pads), what=what, group=group)


def _reduce(parts: Sequence[torch.Tensor], op: str, dtype: torch.dtype) -> torch.Tensor:
    compute = torch.float32 if dtype in _LOW_PRECISION else dtype
    result = parts[0].to(compute)
    for part in parts[1:]:
        part = part.to(compute)
        if op == "sum":
            result = result + part
        elif op == "prod":
            result = result * part
        elif op == "max":
            result = torch.maximum(result, part)
        else:
            result = torch.minimum(result, part)
    return result.to(dtype)


def all_reduce(
    value: torch.Tensor,
    peers: Sequence[torch.Tensor],
    index: tuple,
    pads: Sequence[torch.Tensor],
    rank: int,
    slot: int,
    op: str,
) -> torch.Tensor:
    peers[rank][index] = value
    barrier(pads, rank, slot, f"hl.all_reduce (collective #{slot} of this launch)")
    result = _reduce([p[index] for p in peers], op, peers[rank].dtype)
    barrier(pads, rank, slot, f"hl.all_reduce (collective #{slot} of this launch, buffer release)")
    return result


def all_gather(
    value: torch.Tensor,
    peers: Sequence[torch.Tensor],
    index: tuple,
    pads: Sequence[torch.Tensor],
    rank: int,
    slot: int,
) -> torch.Tensor:
    peers[rank][index] = value
    barrier(pads, rank, slot, f"hl.all_gather (collective #{slot} of this launch)")
    result = torch.stack([p[index].clone() for p in peers])
    barrier(pads, rank, slot, f"hl.all_gather (collective #{slot} of this launch, buffer release)")
    return result


def reduce_scatter(
    values: Sequence[torch.Tensor],
    peers: Sequence[torch.Tensor],
    index: tuple,
    pads: Sequence[torch.Tensor],
    rank: int,
    slot: int,
    op: str,
) -> torch.Tensor:
    """``index`` addresses the buffer's dimensions after the leading (rank) one."""
    for destination, part in enumerate(values):
        peers[destination][(rank, *index)] = part
    barrier(pads, rank, slot, f"hl.reduce_scatter (collective #{slot} of this launch)")
    own = peers[rank]
    result = _reduce([own[(source, *index)] for source in range(len(peers))], op, own.dtype)
    barrier(
        pads, rank, slot, f"hl.reduce_scatter (collective #{slot} of this launch, buffer release)"
    )
    return result


def next_slot(owner: Any, launch: Any) -> int:
    """The number of this collective in the current launch (``launch`` identifies the launch)."""
    state = getattr(owner, "_helion_distributed_slots", None)
    if state is None or state[0] is not launch:
        state = [launch, 0]
        owner._helion_distributed_slots = state
    slot = state[1]
    state[1] += 1
    return slot


def take_kernel_timeout(pad: torch.Tensor) -> int | None:
    """The peer a compiled kernel's wait gave up on (recorded in the error word of ``pad``, this
    rank's pad), resetting the word; None when no wait timed out. ``UNKNOWN_PEER`` when the
    wait did not know who should have signalled."""
    from helion_distributed.symm_mem._cpu import error_word

    words = Words(pad)
    code = words.exchange(error_word(pad.numel()), 0)
    return None if code == 0 else code - 1


def check_kernel_timeouts(handle: Any, what: str) -> None:
    """Raise ``DistributedTimeout`` if a compiled kernel's wait on this rank timed out."""
    from helion_distributed._triton import UNKNOWN_PEER

    pads = handle.get_signal_pads()
    missing = take_kernel_timeout(pads[handle.rank])
    if missing is None:
        return
    if missing == UNKNOWN_PEER:
        detail = "a wait on this rank's signal pad was never signalled"
        ranks: list[int] = []
    else:
        detail = f"no signal from rank {missing}"
        ranks = [missing]
    raise DistributedTimeout(
        f"rank {handle.rank} of group {handle.group_name!r} timed out in {what}: {detail} "
        f"(the kernel gave up after {_env_timeout():.0f}s and its results are invalid)",
        rank=handle.rank,
        missing_ranks=ranks,
        what=what,
    )


def _env_timeout() -> float:
    from helion_distributed import _env

    return _env.timeout_s()


# -- remote copies (hl.make_async_remote_copy, hl.remote_barrier) ------------------------------


def remote_put(
    source: torch.Tensor, destination: torch.Tensor, peer_pad: torch.Tensor, word: int
) -> None:
    """Copy ``source`` into ``destination`` (a peer's memory, same numel), then count one
    arrival in ``peer_pad[word]`` (a sequentially consistent add: it releases the copy)."""
    if source.numel() != destination.numel():
        raise ValueError(
            f"a remote copy of {source.numel()} elements into a region of {destination.numel()}"
        )
    destination.view(-1).copy_(source.reshape(-1))
    Words(peer_pad).add(word, 1)


def consume(
    pad: torch.Tensor,
    word: int,
    count: int,
    describe: Any,
    released: Callable[[], Exception | None] | None = None,
) -> None:
    """Wait until ``pad[word]`` counts ``count`` arrivals and take them (arrivals beyond them
    stay for the next wait). ``describe(elapsed, current)`` builds the timeout error;
    ``released()``, polled while waiting, returns the error to raise when a peer whose launch
    failed released this rank (``remote_copy.release_peers``), else None."""
    words = Words(pad)

    def take() -> bool:
        current = words.load(word)
        if current >= count and words.cas(word, current, current - count) == current:
            return True
        error = released() if released is not None else None
        if error is not None:
            raise error
        return False

    _spin.spin_until(take, lambda elapsed: describe(elapsed, words.load(word)))


def remote_barrier(
    pads: Sequence[torch.Tensor],
    rank: int,
    peers: Sequence[int],
    words: Sequence[int],
    what: str,
    released: Callable[[], Exception | None] | None = None,
) -> None:
    """Two phases (one word each): signal every listed peer, then wait for as many signals on
    this rank's pad (``released`` as for ``consume``)."""
    from helion_distributed import symm_mem

    found = symm_mem.locate_pad(pads[rank])
    group = found[1] if found is not None else "?"
    for phase, word in enumerate(words):
        for peer in peers:
            Words(pads[peer]).add(word, 1)

        def missing(
            elapsed: float, current: int, phase: int = phase, word: int = word
        ) -> DistributedTimeout:
            return DistributedTimeout(
                f"rank {rank} of group {group!r} timed out after {elapsed:.1f}s in {what} (phase "
                f"{phase + 1} of 2): {max(current, 0)} of the {len(peers)} signals from ranks "
                f"{list(peers)} arrived (word {word} of the kernel's workspace pad)",
                rank=rank,
                missing_ranks=list(peers) if current <= 0 else [],
                what=what,
            )

        consume(pads[rank], word, len(peers), missing, released)
