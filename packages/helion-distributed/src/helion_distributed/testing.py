"""Run a function on N CPU rank processes (gloo), for tests and examples on a machine without GPUs.

    results = run_ranks(my_check, world_size=3, args=(1024,), timeout=120)

``my_check(rank, world_size, *args)`` must be importable (a module-level function): every rank is
a fresh process (started by a fork server that has imported torch, else spawned) with ``torch.distributed`` initialized on gloo through a file store.
The return values come back in rank order. A rank that raises, dies or outlives ``timeout``
makes ``run_ranks`` raise ``RankFailure`` with every rank's outcome; the processes are always
reaped (survivors of a failure are killed, by their process ids).
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import queue
import tempfile
import time
import traceback
from datetime import timedelta
from typing import Any
from typing import Callable
from typing import Sequence


@dataclasses.dataclass
class RankOutcome:
    rank: int
    status: str  # "ok" | "error" | "died" | "timeout"
    value: Any = None
    error: str = ""  # the exception's text ("Type: message")
    traceback: str = ""
    exitcode: int | None = None


class RankFailure(RuntimeError):
    """At least one rank did not return normally; ``outcomes`` has every rank's story."""

    def __init__(self, outcomes: Sequence[RankOutcome]) -> None:
        self.outcomes = list(outcomes)
        lines = []
        for o in self.outcomes:
            if o.status == "ok":
                lines.append(f"rank {o.rank}: ok")
            elif o.status == "error":
                lines.append(f"rank {o.rank}: raised {o.error}\n{o.traceback}")
            elif o.status == "died":
                lines.append(f"rank {o.rank}: died (exit code {o.exitcode})")
            else:
                lines.append(f"rank {o.rank}: still running at the deadline (killed)")
        super().__init__("distributed run failed:\n" + "\n".join(lines))


def _child(
    target: tuple[str, str],
    rank: int,
    world_size: int,
    store_path: str,
    args: tuple,
    env: dict[str, str],
    results: Any,
    pg_timeout: float,
) -> None:
    os.environ.update(env)
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size)})
    try:
        # imported only now, so that settings read at import (HELION_BACKEND, ...) see `env`
        import importlib

        fn: Any = importlib.import_module(target[0])
        for part in target[1].split("."):
            fn = getattr(fn, part)
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo",
            init_method=f"file://{store_path}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=pg_timeout),
        )
        value = fn(rank, world_size, *args)
        results.put((rank, "ok", value, "", ""))
    except BaseException as error:
        text = f"{type(error).__name__}: {error}"
        results.put((rank, "error", None, text, traceback.format_exc()))
    finally:
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass


_PRELOAD = ["torch", "torch.distributed", "helion", "helion.language", "helion_distributed"]


def _context() -> Any:
    # a fork server that has imported torch once makes each rank start in a fraction of a second
    # (spawning imports torch again in every rank); processes are still fresh, never forks of
    # a parent that has threads or an initialized process group
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(_PRELOAD)
        return context
    return multiprocessing.get_context("spawn")


def _remove_shared_memory_of(pids: list[int]) -> None:
    """Symmetric-memory files of rank processes that died without cleaning up (``os._exit``)."""
    from helion_distributed.symm_mem._cpu import PREFIX
    from helion_distributed.symm_mem._cpu import shm_dir

    directory = shm_dir()
    prefixes = tuple(f"{PREFIX}-{pid}-" for pid in pids)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.startswith(prefixes):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def _target(fn: Callable[..., Any]) -> tuple[str, str]:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if (
        not module
        or not qualname
        or "<locals>" in qualname
        or module in ("__main__", "__mp_main__")
    ):
        raise ValueError(f"run_ranks needs an importable module-level function, got {fn!r}")
    return module, qualname


def run_ranks(
    fn: Callable[..., Any],
    world_size: int,
    args: tuple = (),
    *,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
    pg_timeout: float | None = None,
    raise_on_failure: bool = True,
) -> list[Any] | list[RankOutcome]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` spawned CPU ranks.

    Args:
        fn: an importable function; its return value must be picklable.
        world_size: number of rank processes.
        args: extra arguments (picklable).
        timeout: seconds for the whole run; ranks still running then are killed.
        env: environment variables set in every rank before anything is imported there.
        pg_timeout: gloo's own timeout (default: ``timeout``).
        raise_on_failure: when false, return the ``RankOutcome`` list instead of raising.

    Returns:
        The return values in rank order (or the outcomes, see ``raise_on_failure``).

    Raises:
        RankFailure: a rank raised, died or timed out.
    """
    context = _context()
    results = context.Queue()
    with tempfile.TemporaryDirectory(prefix="helion-dist-") as tmp:
        store_path = os.path.join(tmp, "store")
        processes = [
            context.Process(
                target=_child,
                args=(
                    _target(fn),
                    rank,
                    world_size,
                    store_path,
                    tuple(args),
                    dict(env or {}),
                    results,
                    pg_timeout or timeout,
                ),
                name=f"helion-rank-{rank}",
                daemon=True,
            )
            for rank in range(world_size)
        ]
        for process in processes:
            process.start()
        outcomes: dict[int, RankOutcome] = {}
        deadline = time.monotonic() + timeout
        try:
            while len(outcomes) < world_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    rank, status, value, error, tb = results.get(timeout=min(remaining, 0.2))
                    outcomes[rank] = RankOutcome(rank, status, value, error, tb)
                    continue
                except queue.Empty:
                    pass
                for rank, process in enumerate(processes):
                    if rank not in outcomes and not process.is_alive():
                        # a final message may still be in flight: give the queue a moment
                        try:
                            r, status, value, error, tb = results.get(timeout=0.5)
                            outcomes[r] = RankOutcome(r, status, value, error, tb)
                        except queue.Empty:
                            if rank not in outcomes:
                                outcomes[rank] = RankOutcome(
                                    rank, "died", exitcode=process.exitcode
                                )
        finally:
            for rank, process in enumerate(processes):
                process.join(timeout=5 if rank in outcomes else 0.1)
                if process.is_alive():
                    process.kill()
                    process.join(timeout=5)
                    if rank not in outcomes:
                        outcomes[rank] = RankOutcome(rank, "timeout")
                elif rank not in outcomes:
                    outcomes[rank] = RankOutcome(rank, "died", exitcode=process.exitcode)
                else:
                    outcomes[rank].exitcode = process.exitcode
            results.close()
            _remove_shared_memory_of([p.pid for p in processes if p.pid is not None])
    ordered = [outcomes[r] for r in range(world_size)]
    if not raise_on_failure:
        return ordered
    if any(o.status != "ok" for o in ordered):
        raise RankFailure(ordered)
    return [o.value for o in ordered]
