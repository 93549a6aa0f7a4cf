"""Run a function on N CPU rank processes (gloo), for tests and examples on a machine without GPUs.

    results = run_ranks(my_check, world_size=3, args=(1024,), timeout=120)

``my_check(rank, world_size, *args)`` must be importable (a module-level function): every rank is
a fresh process (started by a fork server that has imported torch, else spawned) with
``torch.distributed`` initialized on gloo through a file store. The return values come back in
rank order. A rank that raises, dies or outlives ``timeout`` makes ``run_ranks`` raise
``RankFailure`` with every rank's outcome; the processes are always reaped (survivors of a
failure are killed, by their process ids). A group that fails to form is formed again from
scratch (``join_attempts``); nothing after that is retried.
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
import warnings
from datetime import timedelta
from typing import Any
from typing import Callable
from typing import Sequence


@dataclasses.dataclass
class RankOutcome:
    rank: int
    status: str  # "ok" | "error" | "died" | "timeout" (killed: at the deadline, or when a peer failed first)
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
                lines.append(f"rank {o.rank}: still running when the run was stopped (killed)")
        super().__init__("distributed run failed:\n" + "\n".join(lines))


class GroupFormationFailed(RuntimeError):
    """A group a rank function formed could not form (see `forming_group`): run_ranks starts the
    attempt again from scratch, as when the first group fails to form."""


@contextlib.contextmanager
def forming_group() -> Any:
    """Wrap a rank function's own ``init_process_group`` / ``new_group``: an exception there
    is a failure to form a group (gloo's connect can fail on a loaded machine), which run_ranks
    retries with every rank started again, instead of failing the test.

        with forming_group():
            sub = dist.new_group([0, 1])
    """
    try:
        yield
    except Exception as error:
        raise GroupFormationFailed(f"{type(error).__name__}: {error}") from error


def join_gloo_group(rank: int, world_size: int, store_path: str, timeout: float) -> None:
    """The default way a rank forms its group: gloo through a file store."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"file://{store_path}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout),
    )


def _child(
    target: tuple[str, str],
    join: tuple[str, str],
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
    phase = "error"
    try:
        # imported only now, so that settings read at import (HELION_BACKEND, ...) see `env`
        fn = _resolve(target)
        join_group = _resolve(join)
        import torch

        torch.set_num_threads(1)
        phase = "join_error"  # a failure from here until the group stands may be retried
        join_group(rank, world_size, store_path, pg_timeout)
        results.put((rank, "joined", None, "", ""))
        phase = "error"
        value = fn(rank, world_size, *args)
        results.put((rank, "ok", value, "", ""))
    except BaseException as error:
        text = f"{type(error).__name__}: {error}"
        if isinstance(error, GroupFormationFailed):
            phase = "join_error"  # a group the function formed: retried like the first one
        results.put((rank, phase, None, text, traceback.format_exc()))
    finally:
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass


def _resolve(target: tuple[str, str]) -> Any:
    import importlib

    found: Any = importlib.import_module(target[0])
    for part in target[1].split("."):
        found = getattr(found, part)
    return found


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


ATTEMPT_ENV = "HELION_RANKS_ATTEMPT"  # 1, 2, ...: which attempt at forming the group this is
SHARED_DIR_ENV = "HELION_RANKS_DIR"  # a fresh directory per attempt, for files the ranks share


def run_ranks(
    fn: Callable[..., Any],
    world_size: int,
    args: tuple = (),
    *,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
    pg_timeout: float | None = None,
    raise_on_failure: bool = True,
    join: Callable[[int, int, str, float], None] = join_gloo_group,
    join_attempts: int = 3,
    join_timeout: float = 90.0,
) -> list[Any] | list[RankOutcome]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` fresh CPU rank processes.

    Forming the group can fail for reasons outside the code under test (gloo's full-mesh connect
    sometimes finds a peer's socket closed on a loaded machine), so when a rank fails before its
    group stands, every rank is stopped and the run starts again with fresh processes and a fresh
    store, up to ``join_attempts`` times. A failure after the group stands is never retried.

    Args:
        fn: an importable function; its return value must be picklable.
        world_size: number of rank processes.
        args: extra arguments (picklable).
        timeout: seconds for one attempt; ranks still running then are killed.
        env: environment variables set in every rank before anything is imported there. Each
            rank also gets ``HELION_RANKS_ATTEMPT`` and ``HELION_RANKS_DIR`` (a directory made
            for this attempt: put any further file stores there, not in a fixed path, so that a
            retried attempt does not meet the last one's files).
        pg_timeout: gloo's own timeout (default: ``timeout``).
        raise_on_failure: when false, return the ``RankOutcome`` list instead of raising.
        join: an importable ``join(rank, world_size, store_path, timeout)`` that forms the
            group (default: gloo through a file store at ``store_path``).
        join_attempts: how many times to try forming the group.
        join_timeout: seconds every rank has to form the group in one attempt.

    Returns:
        The return values in rank order (or the outcomes, see ``raise_on_failure``).

    Raises:
        RankFailure: a rank raised, died or timed out (in the last attempt, if the group never
            formed).
    """
    if join_attempts < 1:
        raise ValueError(f"join_attempts must be at least 1, got {join_attempts}")
    target, join_target = _target(fn), _target(join)
    context = _context()
    for attempt in range(1, join_attempts + 1):
        ordered, join_failure = _attempt(
            context,
            target,
            join_target,
            world_size,
            tuple(args),
            {**(env or {}), ATTEMPT_ENV: str(attempt)},
            timeout,
            pg_timeout or timeout,
            min(join_timeout, timeout),
        )
        if join_failure is None:
            break
        if attempt < join_attempts:
            warnings.warn(
                f"run_ranks: the {world_size} ranks did not form their group "
                f"(attempt {attempt} of {join_attempts}: {join_failure}); starting them again",
                RuntimeWarning,
                stacklevel=2,
            )
    if not raise_on_failure:
        return ordered
    if any(o.status != "ok" for o in ordered):
        raise RankFailure(ordered)
    return [o.value for o in ordered]


def _attempt(
    context: Any,
    target: tuple[str, str],
    join_target: tuple[str, str],
    world_size: int,
    args: tuple,
    env: dict[str, str],
    timeout: float,
    pg_timeout: float,
    join_timeout: float,
) -> tuple[list[RankOutcome], str | None]:
    """One run of every rank; returns the outcomes and, if the group never stood, why not."""
    results = context.Queue()
    with tempfile.TemporaryDirectory(prefix="helion-dist-") as tmp:
        store_path = os.path.join(tmp, "store")
        shared = os.path.join(tmp, "shared")
        os.mkdir(shared)
        processes = [
            context.Process(
                target=_child,
                args=(
                    target,
                    join_target,
                    rank,
                    world_size,
                    store_path,
                    args,
                    {**env, SHARED_DIR_ENV: shared},
                    results,
                    pg_timeout,
                ),
                name=f"helion-rank-{rank}",
                daemon=True,
            )
            for rank in range(world_size)
        ]
        for process in processes:
            process.start()
        outcomes: dict[int, RankOutcome] = {}
        joined: set[int] = set()
        join_failure: str | None = None
        hopeless = False  # a rank failed before joining (not in joining): the rest would wait
        start = time.monotonic()
        deadline, join_deadline = start + timeout, start + join_timeout

        def record(message: tuple) -> None:
            nonlocal join_failure, hopeless
            rank, status, value, error, tb = message
            if status == "joined":
                joined.add(rank)
                return
            if status == "join_error":
                status = "error"
                join_failure = join_failure or f"rank {rank}: {error}"
            elif rank not in joined:
                hopeless = True
            outcomes[rank] = RankOutcome(rank, status, value, error, tb)

        try:
            while len(outcomes) < world_size and join_failure is None and not hopeless:
                now = time.monotonic()
                if now >= deadline:
                    break
                if len(joined) < world_size and now >= join_deadline:
                    missing = sorted(set(range(world_size)) - joined - set(outcomes))
                    join_failure = f"ranks {missing} had not joined after {join_timeout:g} s"
                    break
                try:
                    record(results.get(timeout=min(deadline - now, 0.2)))
                    continue
                except queue.Empty:
                    pass
                for rank, process in enumerate(processes):
                    if rank not in outcomes and not process.is_alive():
                        # a final message may still be in flight: give the queue a moment
                        try:
                            record(results.get(timeout=0.5))
                        except queue.Empty:
                            if rank not in outcomes:
                                outcomes[rank] = RankOutcome(
                                    rank, "died", exitcode=process.exitcode
                                )
                                if rank not in joined:
                                    join_failure = join_failure or (
                                        f"rank {rank} died (exit code {process.exitcode}) "
                                        "before its group stood"
                                    )
        finally:
            stopped_early = join_failure is not None or hopeless
            killed = set()
            for rank, process in enumerate(processes):
                process.join(timeout=5 if rank in outcomes and not stopped_early else 0.1)
                if process.is_alive():
                    process.kill()
                    process.join(timeout=5)
                    killed.add(rank)
            with contextlib.suppress(queue.Empty, OSError, EOFError):
                while True:  # what ranks said before they ended, left unread by an early stop
                    record(results.get(timeout=0.1))
            for rank, process in enumerate(processes):
                if rank in outcomes:
                    outcomes[rank].exitcode = process.exitcode
                elif rank in killed:
                    outcomes[rank] = RankOutcome(rank, "timeout")
                else:
                    outcomes[rank] = RankOutcome(rank, "died", exitcode=process.exitcode)
            results.close()
            _remove_shared_memory_of([p.pid for p in processes if p.pid is not None])
    return [outcomes[r] for r in range(world_size)], join_failure
