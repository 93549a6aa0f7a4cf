"""Bounded spin-waits and the signal-pad handshake, for code that runs on the host.

The handshake is the one every protocol of this package uses (host barriers, tile collectives,
the ref and eager lowerings of the tile ops): a slot of a signal pad belongs to one (sender,
receiver) pair. The sender waits until the slot holds 0 and sets it to 1; the receiver waits
until it holds 1 and sets it back to 0. Each side only writes in its own turn, so the slot is
reusable forever (the pad is all zeros again after every exchange) and a fast rank can never
overwrite a signal its peer has not consumed yet.
"""

from __future__ import annotations

import time
from typing import Callable
from typing import Sequence

from helion_distributed import _env
from helion_distributed._atomics import Words
from helion_distributed.errors import DistributedTimeout

# tight polls before backing off to sleeps: a rank should not steal the core its peer needs
_FAST_POLLS = 32
_MAX_SLEEP_S = 1e-3


def spin_until(
    ready: Callable[[], bool],
    on_timeout: Callable[[float], DistributedTimeout],
    timeout: float | None = None,
) -> None:
    """Call ``ready()`` until it returns true; after ``timeout`` seconds (default: the
    distributed timeout) raise ``on_timeout(elapsed)``."""
    if ready():
        return
    limit = _env.timeout_s() if timeout is None else timeout
    start = time.monotonic()
    polls = 0
    sleep = 1e-5
    while True:
        if ready():
            return
        polls += 1
        if polls > _FAST_POLLS:
            elapsed = time.monotonic() - start
            if elapsed > limit:
                raise on_timeout(elapsed)
            time.sleep(sleep)
            sleep = min(sleep * 1.5, _MAX_SLEEP_S)


def send(
    words: Words,
    position: int,
    describe: Callable[[float], DistributedTimeout],
    timeout: float | None = None,
) -> None:
    """The sender's half of the handshake: wait for the slot to be free (0), set it to 1."""
    spin_until(lambda: words.cas(position, 0, 1) == 0, describe, timeout)


def receive(
    words: Words,
    position: int,
    describe: Callable[[float], DistributedTimeout],
    timeout: float | None = None,
) -> None:
    """The receiver's half: wait for the slot to hold 1, set it back to 0."""
    spin_until(lambda: words.cas(position, 1, 0) == 1, describe, timeout)


def barrier(
    pads: Sequence[Words],
    rank: int,
    slot: int,
    *,
    what: str,
    group: str,
    timeout: float | None = None,
) -> None:
    """All ranks of a group meet: every rank signals slot ``slot * world_size + rank`` of every
    pad (its own included), then consumes slots ``slot * world_size + r`` of its own pad.

    ``pads[r]`` accesses rank r's pad.
    Raises ``DistributedTimeout`` naming the ranks that never signalled (or never consumed our
    previous signal).
    """
    world = len(pads)
    base = slot * world
    limit = _env.timeout_s() if timeout is None else timeout
    for peer in range(world):

        def stuck(elapsed: float, peer: int = peer) -> DistributedTimeout:
            return DistributedTimeout(
                f"rank {rank} of group {group!r} timed out after {elapsed:.1f}s in {what}: rank {peer} "
                f"has not consumed the previous signal in slot {base + rank} of its signal pad "
                f"(rank {peer} is missing: dead, hung, or running something else)",
                rank=rank,
                missing_ranks=[peer],
                what=what,
            )

        send(pads[peer], base + rank, stuck, limit)
    own = pads[rank]
    pending = list(range(world))

    def arrived() -> bool:
        for peer in list(pending):
            if own.cas(base + peer, 1, 0) == 1:
                pending.remove(peer)
        return not pending

    def missing(elapsed: float) -> DistributedTimeout:
        ranks = ", ".join(str(p) for p in pending)
        return DistributedTimeout(
            f"rank {rank} of group {group!r} timed out after {elapsed:.1f}s in {what}: "
            f"no signal from rank{'s' if len(pending) > 1 else ''} {ranks} "
            f"(slots {[base + p for p in pending]} of rank {rank}'s signal pad)",
            rank=rank,
            missing_ranks=list(pending),
            what=what,
        )

    spin_until(arrived, missing, limit)
