"""The parent side of isolated screening: runners that start candidates in child processes,
read their messages, enforce the compile and first-run timeouts, and turn a child that dies
without reporting into a "crash" result.

* :class:`_ForkRunner`: a forked child per candidate (CPU, or CUDA not yet initialised here).
* :class:`_SpawnRunner`: long-lived spawned workers (CUDA) that import the kernel by name.

The child side and the messages it sends are in :mod:`helion.autotuner.isolation_worker`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion.autotuner.accuracy import Baseline
from helion.autotuner.accuracy import _to_device
from helion.autotuner.candidate_outcome import CandidateResult
from helion.autotuner.candidate_outcome import _describe
from helion.autotuner.isolation_worker import _fork_child_main
from helion.autotuner.isolation_worker import _from_bytes
from helion.autotuner.isolation_worker import _spawn_worker_main

if TYPE_CHECKING:
    from helion.autotuner.benchmarking import BenchmarkHarness


@dataclass
class _Job:
    index: int
    config: Any
    conn: Any
    process: Any
    deadline: float
    phase: str = "compile"
    started: float = field(default_factory=time.perf_counter)
    compile_seconds: float | None = None
    run_started: float | None = None
    output: Any = None
    retire: bool = False  # the worker reported its device unusable after this candidate


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "process vanished"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (killed: likely out of memory)" if -exitcode == signal.SIGKILL else ""
        return f"process died with {name}{hint}"
    return f"process exited with code {exitcode} without reporting a result"


#: how often one candidate is forked again after its child found torch's default CPU generator
#: locked (:func:`helion.autotuner.isolation_worker.wait_for_inherited_rng_lock`)
MAX_RELAUNCHES = 20

#: ``should_stop(found_ok)`` of :meth:`_IsolatedRunner.run`: whether to start no more candidates
#: and kill the running ones; ``found_ok`` says whether one of this run's candidates passed
StopCheck = Callable[[bool], bool]


class _IsolatedRunner:
    """Shared driver loop of the fork and spawn strategies: start jobs, collect messages, enforce
    the compile timeout (until "compiled") and the run timeout (after), turn a process that
    dies without reporting into a "crash" result, and once ``should_stop`` says the time
    budget is spent, start nothing more and kill what still runs."""

    def __init__(self, jobs: int, compile_timeout: float, run_timeout: float) -> None:
        self.jobs = max(1, jobs)
        self.compile_timeout = compile_timeout
        self.run_timeout = run_timeout
        # seconds from "compiled" to a successful result, for the adaptive first-run timeout
        self.first_run_seconds: list[float] = []
        #: when ``should_stop`` may turn true (the search's deadline): the loop wakes up then
        self.stop_time: float | None = None
        #: receives the warnings a child recorded (see :func:`run_candidate`)
        self.on_warnings: Callable[[list[tuple[str, str, str, int]]], None] | None = None

    # strategy hooks
    def _launch(self, index: int, config: Any) -> _Job:
        raise NotImplementedError

    def _launch_refusal(self) -> str | None:
        """Why no more candidates may start (they are "skipped" with it), or None."""
        return None

    def _on_ready(self, job: _Job) -> None:
        pass

    def _on_startup_failure(self, job: _Job, reason: str) -> CandidateResult:
        return CandidateResult(job.config, "error", reason=f"worker failed to start: {reason}")

    def _release(self, job: _Job, healthy: bool) -> None:
        raise NotImplementedError

    def run(self, configs: Sequence[Any], should_stop: StopCheck) -> list[CandidateResult]:
        results: list[CandidateResult | None] = [None] * len(configs)
        queue = list(range(len(configs)))
        running: list[_Job] = []
        relaunches: dict[int, int] = {}
        found_ok = False
        try:
            while queue or running:
                while queue and len(running) < self.jobs:
                    index = queue.pop(0)
                    refusal = self._launch_refusal()
                    if refusal is None and should_stop(found_ok):
                        refusal = "time budget spent"
                    if refusal is not None:
                        results[index] = CandidateResult(configs[index], "skipped", reason=refusal)
                        continue
                    try:
                        running.append(self._launch(index, configs[index]))
                    except Exception as error:
                        results[index] = CandidateResult(
                            configs[index],
                            "error",
                            reason=f"could not start worker: {_describe(error)}",
                        )
                if not running:
                    continue
                wake = min(job.deadline for job in running)
                now = time.perf_counter()
                if self.stop_time is not None and self.stop_time > now:
                    wake = min(wake, self.stop_time)
                waitables = [job.conn for job in running] + [
                    job.process.sentinel for job in running
                ]
                multiprocessing.connection.wait(waitables, timeout=min(max(0.0, wake - now), 1.0))
                for job in list(running):
                    result = self._poll(job)
                    if result is None:
                        continue
                    running.remove(job)
                    if result is _RELAUNCH:
                        relaunches[job.index] = relaunches.get(job.index, 0) + 1
                        if relaunches[job.index] <= MAX_RELAUNCHES:
                            queue.insert(0, job.index)
                            continue
                        result = CandidateResult(
                            job.config,
                            "error",
                            reason="its forked process found torch's default CPU generator "
                            f"locked {relaunches[job.index]} times: another thread of this "
                            "process held it at each fork",
                        )
                    assert isinstance(result, CandidateResult)
                    results[job.index] = result
                    found_ok = found_ok or result.ok
                if running and should_stop(found_ok):
                    # the search is over: what still compiles or runs (often a hang) would
                    # finish too late to be used, and waiting for its own timeout is what
                    # let hung candidates overrun a quick search's budget
                    for job in running:
                        results[job.index] = self._stop(job)
                    running = []
        finally:
            for job in running:
                self._release(job, healthy=False)
        return [
            r if r is not None else CandidateResult(c, "error", reason="no result")
            for r, c in zip(results, configs, strict=True)
        ]

    def _stop(self, job: _Job) -> CandidateResult:
        seconds = time.perf_counter() - job.started
        what = "compiling" if job.phase == "compile" else "running"
        self._release(job, healthy=False)
        return CandidateResult(
            job.config,
            "skipped",
            reason=f"stopped when the time budget ran out, still {what} after {seconds:.1f}s",
            compile_seconds=job.compile_seconds,
            stopped=True,
        )

    def _drain(self, job: _Job) -> CandidateResult | None:
        while True:
            try:
                if not job.conn.poll():
                    return None
                message = job.conn.recv()
            except (EOFError, OSError):
                return None
            kind = message[0]
            if kind == "ready":
                self._on_ready(job)
            elif kind == "failed":
                return self._on_startup_failure(job, message[1])
            elif kind == "compiled":
                job.phase = "run"
                job.compile_seconds = float(message[1])
                job.run_started = time.perf_counter()
                job.deadline = job.run_started + self.run_timeout
            elif kind == "output":
                job.output = _from_bytes(message[1])
            elif kind == "warnings":
                if self.on_warnings is not None:
                    self.on_warnings(list(message[1]))
            elif kind == "result":
                job.retire = len(message) > 3 and bool(message[3])
                if message[1] == "ok" and job.run_started is not None:
                    self.first_run_seconds.append(time.perf_counter() - job.run_started)
                return CandidateResult(
                    job.config, message[1], reason=message[2], compile_seconds=job.compile_seconds
                )

    def _poll(self, job: _Job) -> CandidateResult | object | None:
        """The job's result, ``_RELAUNCH`` for a forked child to fork again, or None while it
        still runs."""
        result = self._drain(job)
        if result is not None:
            self._release(job, healthy=True)
            return result
        if not job.process.is_alive():
            result = self._drain(job)  # it may have reported just before exiting
            if result is not None:
                self._release(job, healthy=True)
                return result
            job.process.join(timeout=1)
            if job.phase == "compile" and job.process.exitcode == -signal.SIGALRM:
                self._release(job, healthy=False)
                return _RELAUNCH  # its inherited RNG lock was held: nothing of it ran
            reason = _exit_reason(job.process.exitcode)
            self._release(job, healthy=False)
            return CandidateResult(
                job.config,
                "crash",
                reason=f"{reason} while {'compiling' if job.phase == 'compile' else 'running'}",
                compile_seconds=job.compile_seconds,
            )
        if time.perf_counter() > job.deadline:
            limit = self.compile_timeout if job.phase == "compile" else self.run_timeout
            self._release(job, healthy=False)
            what = "compile" if job.phase == "compile" else "first run"
            return CandidateResult(
                job.config,
                "timeout",
                reason=f"{what} did not finish within {limit:g}s",
                compile_seconds=job.compile_seconds,
            )
        return None


#: what :meth:`_IsolatedRunner._poll` returns for a forked child that ended by SIGALRM before it
#: compiled anything (``wait_for_inherited_rng_lock``): it is forked again
_RELAUNCH = object()


def _kill(process: Any) -> None:
    with contextlib.suppress(Exception):
        if process.is_alive():
            process.kill()
        process.join(timeout=5)


_rng_settled_at_fork = False


def settle_rng_at_fork() -> None:
    """Make every later fork of this process wait until torch's default CPU generator is free.

    A forked child inherits the generator's mutex as it was at the fork. If another thread was
    drawing random numbers then (its op runs without the GIL), the child's copy stays locked,
    the owner does not exist there, and the candidate blocks at its first use (the accuracy
    check seeds the generator; in-kernel `torch.rand` draws its seed from it) until it is timed
    out as a hang. The hook (the C method itself, so it runs no bytecode that could hand the
    GIL over) takes and drops the mutex just before ``fork()``. Hooks registered earlier
    (logging's) run after it and may let another thread start a draw: the child's own check
    (`wait_for_inherited_rng_lock`) catches that rarer case. Fork hooks cannot be removed, so it
    stays for the process (a few microseconds per fork)."""
    global _rng_settled_at_fork
    if not _rng_settled_at_fork and hasattr(os, "register_at_fork"):
        os.register_at_fork(before=torch.default_generator.get_state)
        _rng_settled_at_fork = True


class _ForkRunner(_IsolatedRunner):
    def __init__(
        self, harness: BenchmarkHarness, jobs: int, *, return_output: bool = False
    ) -> None:
        super().__init__(jobs, harness.compile_timeout, harness.run_timeout)
        settle_rng_at_fork()
        self.harness = harness
        self.context = multiprocessing.get_context("fork")
        self.return_output = return_output
        self.outputs: dict[int, Any] = {}

    def _launch(self, index: int, config: Any) -> _Job:
        h = self.harness
        receiver, sender = self.context.Pipe(duplex=False)
        process = self.context.Process(
            target=_fork_child_main,
            args=(sender, h.bound, config, h.args, h.baseline, h.device, self.return_output),
            # the child dies with this process, even one killed by SIGTERM/SIGKILL
            kwargs={"parent_pid": os.getpid(), "captured": h.captured},
            daemon=True,
        )
        process.start()
        sender.close()
        return _Job(index, config, receiver, process, time.perf_counter() + self.compile_timeout)

    def _release(self, job: _Job, healthy: bool) -> None:
        if job.output is not None:
            self.outputs[job.index] = job.output
        if healthy:
            job.process.join(timeout=10)
        _kill(job.process)
        with contextlib.suppress(Exception):
            job.conn.close()


class _SpawnRunner(_IsolatedRunner):
    """Long-lived spawned workers (CUDA): each holds its own CUDA context, the kernel imported by
    name and the arguments loaded from a file; a worker that crashed or hung is replaced.

    Workers are started as soon as the runner exists and import the kernel's module while the
    parent computes the baseline; :meth:`publish` then hands them the arguments and baseline.
    """

    STARTUP_TIMEOUT = 300.0

    def __init__(
        self, harness: BenchmarkHarness, jobs: int, module_name: str, qualname: str
    ) -> None:
        super().__init__(jobs, harness.compile_timeout, harness.run_timeout)
        self.harness = harness
        self.context = multiprocessing.get_context("spawn")
        self.module_name = module_name
        self.qualname = qualname
        self.idle: list[tuple[Any, Any]] = []
        self.ready: set[int] = set()  # pids of workers that answered "ready"
        self.broken: str | None = None  # why workers cannot start at all
        self.checks_accuracy = False
        self.directory = tempfile.mkdtemp(prefix="helion-autotune-")
        self.payload_path: str | None = None
        for _ in range(self.jobs):
            self.idle.append(self._start_worker())

    def publish(self, baseline: Baseline | None) -> None:
        """Write the arguments and baseline for the workers and send them the path."""
        h = self.harness
        portable = None
        if baseline is not None:
            portable = Baseline(
                _to_device(baseline.output, "cpu"),
                _to_device(baseline.mutated, "cpu"),
                baseline.atol,
                baseline.rtol,
                baseline.check_fn,
                baseline.source,
                captured=_to_device(list(baseline.captured), "cpu"),
            )
        payload = {
            "device": str(h.device),
            "args": _to_device(tuple(h.args), "cpu"),
            "baseline": portable,
            "settings": _codegen_settings(h.settings),
            # the values of the tensors the kernel writes besides its arguments: a worker
            # imported the kernel's module afresh, and starts every candidate from these
            "captured": _to_device(h.captured.values(), "cpu"),
        }
        path = os.path.join(self.directory, "payload.pt")
        try:
            torch.save(payload, path)
            self.checks_accuracy = portable is not None
        except Exception:
            # e.g. an accuracy function that cannot be pickled: the parent checks accuracy instead
            payload["baseline"] = None
            torch.save(payload, path)
            self.checks_accuracy = False
        self.payload_path = path
        for conn, process in list(self.idle):
            self._send_payload(conn, process)

    def _send_payload(self, conn: Any, process: Any) -> None:
        try:
            conn.send(("payload", self.payload_path))
        except (OSError, EOFError):
            _kill(process)
            self.idle = [(c, p) for c, p in self.idle if p is not process]

    def _start_worker(self) -> tuple[Any, Any]:
        receiver, sender = self.context.Pipe(duplex=True)
        process = self.context.Process(
            target=_spawn_worker_main,
            args=(sender, self.module_name, self.qualname),
            kwargs={"parent_pid": os.getpid()},
            daemon=True,
        )
        process.start()
        sender.close()
        if self.payload_path is not None:
            receiver.send(("payload", self.payload_path))
        return receiver, process

    def _deadline(self, process: Any) -> float:
        startup = 0.0 if process.pid in self.ready else self.STARTUP_TIMEOUT
        return time.perf_counter() + self.compile_timeout + startup

    def _launch(self, index: int, config: Any) -> _Job:
        while self.idle:
            conn, process = self.idle.pop(0)
            try:
                if process.is_alive():
                    conn.send(dict(config))
                    return _Job(index, config, conn, process, self._deadline(process))
            except (OSError, EOFError):
                pass
            _kill(process)  # died while idle: replace it
        conn, process = self._start_worker()
        conn.send(dict(config))
        return _Job(index, config, conn, process, self._deadline(process))

    def _on_ready(self, job: _Job) -> None:
        self.ready.add(job.process.pid)
        job.deadline = time.perf_counter() + self.compile_timeout

    def _on_startup_failure(self, job: _Job, reason: str) -> CandidateResult:
        self.broken = reason
        return CandidateResult(job.config, "skipped", reason=f"worker failed to start: {reason}")

    def run(self, configs: Sequence[Any], should_stop: StopCheck) -> list[CandidateResult]:
        if self.broken is not None:
            return [
                CandidateResult(c, "skipped", reason=f"worker failed to start: {self.broken}")
                for c in configs
            ]
        return super().run(configs, should_stop)

    def _launch_refusal(self) -> str | None:
        return None if self.broken is None else f"worker failed to start: {self.broken}"

    def _release(self, job: _Job, healthy: bool) -> None:
        if healthy and not job.retire and job.process.is_alive():
            self.idle.append((job.conn, job.process))
            return
        self.ready.discard(job.process.pid)
        _kill(job.process)
        with contextlib.suppress(Exception):
            job.conn.close()

    def close(self) -> None:
        for conn, _process in self.idle:
            with contextlib.suppress(Exception):
                conn.send(None)
        for conn, process in self.idle:
            process.join(timeout=5)
            _kill(process)
            with contextlib.suppress(Exception):
                conn.close()
        self.idle.clear()
        shutil.rmtree(self.directory, ignore_errors=True)


def _codegen_settings(settings: Any) -> dict[str, Any]:
    """The settings that change generated code, to re-apply in a spawned worker."""
    try:
        from helion.runtime.settings import CODEGEN_FIELDS
    except Exception:
        return {}
    values = {}
    for name in CODEGEN_FIELDS:
        if hasattr(settings, name):
            values[name] = getattr(settings, name)
    return values
