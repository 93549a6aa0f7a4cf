"""What each rank process runs in test_autotune.py (importable by the rank processes that
``helion_distributed.testing.run_ranks`` starts; not a test module itself)."""

from __future__ import annotations

import time
from typing import Any
from typing import Callable

import torch
import torch.distributed as dist

import helion
import helion.language as hl
import helion_distributed as hd
from helion_distributed import symm_mem

N = 64
SMALL = helion.Config(block_sizes=[32])
LARGE = helion.Config(block_sizes=[64])


def _scaled_sum(
    x: torch.Tensor, buffer: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr
) -> torch.Tensor:
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = hl.all_reduce(x[tile] * 2.0, peers, [tile], pads, RANK)
    return out


def _arguments(rank: int, n: int = N) -> tuple:
    x = torch.arange(n, dtype=torch.float32) + rank
    buffer = symm_mem.empty(max(n, N), dtype=torch.float32)
    return (x, buffer, hl.ProcessGroupName(dist.group.WORLD.group_name), hl.constexpr(rank))


def _expected(x: torch.Tensor) -> torch.Tensor:
    expected = x * 2.0
    dist.all_reduce(expected)
    return expected


def _outcome(call: Callable[[], Any]) -> tuple[str, float]:
    start = time.monotonic()
    try:
        result = call()
    except Exception as error:
        return f"{type(error).__name__}: {error}", time.monotonic() - start
    return f"returned {result}", time.monotonic() - start


def untuned_kernel(rank: int, world_size: int) -> dict[str, object]:
    """A distributed kernel without a config is refused at once by the ordinary autotuner (also
    with a configs= list); effort 'none' uses its default config; after helion_distributed.
    autotune it runs with the winner."""
    found: dict[str, object] = {}
    args = _arguments(rank)

    no_config = helion.kernel(_scaled_sum, static_shapes=True)
    found["no config"] = _outcome(lambda: no_config(*args))
    listed = helion.kernel(_scaled_sum, configs=[SMALL, LARGE], static_shapes=True)
    found["configs"] = _outcome(lambda: listed(*args))

    winner = hd.autotune(no_config, args, configs=[SMALL, LARGE])
    found["winner"] = repr(winner)
    found["after lockstep"] = torch.equal(no_config(*args), _expected(args[0]))

    default = helion.kernel(_scaled_sum, static_shapes=True, autotune_effort="none")
    found["effort none"] = torch.equal(default(*args), _expected(args[0]))
    return found


@helion.kernel(static_shapes=True)
def plus_one(x: torch.Tensor) -> torch.Tensor:
    """An ordinary kernel (test_autotune asks the refusal hook about it)."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


def _never_signalled(
    x: torch.Tensor, buffer: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr
) -> torch.Tensor:
    """Rank 0 waits for a signal nobody sends: every launch times out there."""
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        if RANK == 0:
            hl.wait(pads[0], [1], 1, timeout=0.5)
        out[tile] = x[tile] * 2.0
    return out


def _one_tile_only(
    x: torch.Tensor, buffer: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr
) -> torch.Tensor:
    """Rank 1 signals word 0 once per tile (after rank 0 consumed the last signal); rank 0
    waits for word ``tile.begin``: with one tile (block 64) it works, with two (block 32) the
    second wait times out and leaves a signal behind in word 0."""
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        if RANK == 1:
            hl.signal(pads[0], [0], 1, wait_for=0)
        else:
            hl.wait(pads[0], [tile.begin], 1, update=0, timeout=1.0)
        out[tile] = x[tile] * 2.0
    return out


def timed_out_candidates(rank: int, world_size: int) -> dict[str, object]:
    """A candidate whose wait timed out fails on every rank (compiled kernels only record the
    timeout in the pad and return), and the pads are clean for the next candidate."""
    found: dict[str, object] = {}
    args = _arguments(rank)
    stuck = helion.kernel(_never_signalled, static_shapes=True)
    found["all time out"] = _outcome(lambda: hd.autotune(stuck, args, configs=[SMALL, LARGE]))
    picky = helion.kernel(_one_tile_only, static_shapes=True)
    found["one works"] = _outcome(lambda: hd.autotune(picky, args, configs=[SMALL, LARGE]))
    out = picky(*args)
    hd.check_timeouts(args[1], args[2].value)
    found["after"] = torch.equal(out, args[0] * 2.0)
    dist.barrier()
    # every signal was consumed: nothing of the failed candidate is left over (without the
    # clearing, each later launch consumed the previous launch's signal and left its own)
    found["word 0"] = int(symm_mem.get_signal_pads(args[1])[0][0])
    return found


def disagreements(rank: int, world_size: int) -> dict[str, object]:
    """Ranks that were given different things stop together, quickly, with a clear error."""
    found: dict[str, object] = {}
    kernel = helion.kernel(_scaled_sum, static_shapes=True)
    args = _arguments(rank, N if rank == 0 else 2 * N)
    found["shapes"] = _outcome(lambda: hd.autotune(kernel, args, configs=[SMALL, LARGE]))
    args = _arguments(rank)
    configs = [SMALL] if rank == 0 else [SMALL, LARGE]
    found["one config"] = _outcome(lambda: hd.autotune(kernel, args, configs=configs))
    found["both one config"] = _outcome(lambda: hd.autotune(kernel, args, configs=[SMALL]))
    order = [SMALL, LARGE] if rank == 0 else [LARGE, SMALL]
    found["order"] = _outcome(lambda: hd.autotune(kernel, args, configs=order))
    found["options"] = _outcome(
        lambda: hd.autotune(kernel, args, search="random", max_evaluations=2 + rank)
    )
    found["bad effort"] = _outcome(lambda: hd.autotune(kernel, args, effort="bogus"))
    # still in step afterwards
    found["after"] = _outcome(lambda: hd.autotune(kernel, args, configs=[SMALL, LARGE]))
    return found


def effort_none(rank: int, world_size: int) -> dict[str, object]:
    """effort='none' is no search: the kernel's default config, checked once on every rank."""
    kernel = helion.kernel(_scaled_sum, static_shapes=True)
    args = _arguments(rank)
    default = kernel.bind(args).config_spec.default_config()
    start = time.monotonic()
    winner = hd.autotune(kernel, args, effort="none")
    seconds = time.monotonic() - start
    return {
        "default": winner == default,
        "seconds": seconds,
        "runs": torch.equal(kernel(*args), _expected(args[0])),
        "stuck": _outcome(
            lambda: hd.autotune(
                helion.kernel(_never_signalled, static_shapes=True), args, effort="none"
            )
        ),
    }
