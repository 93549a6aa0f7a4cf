"""The benchmark harness: turns configs into trustworthy milliseconds, and survives bad configs.

For each batch of candidate configs:

1. **Screening** (parallel, isolated): each candidate is compiled and run once on a clone of the
   arguments in a separate process, and its output is compared with the baseline.  This warms
   the backend's on-disk compile cache for step 2, and a candidate that raises, segfaults, calls
   ``os._exit``, hangs past its timeout or runs out of memory only loses that process.
   * CPU device (or CUDA not yet initialized): a forked child per candidate, up to
     ``autotune_precompile_jobs`` at a time.
   * CUDA: long-lived *spawned* workers that import the kernel through ``bound.importable_ref()``
     and load the arguments from a file; a worker that dies or hangs is killed and replaced.
   * Otherwise (no fork, no importable kernel, ``autotune_precompile=None``): in process, under
     a watchdog thread that turns an over-long Python-level run into a recorded timeout.
2. **Timing** in this process, one candidate at a time (so candidates do not compete for the
   device): ``bound.backend.benchmark`` (CUDA: device events, L2 flush, median) or
   :func:`do_bench`, with the repeat count sized to a target time.
3. **Re-benchmarking** of the leaders (:meth:`BenchmarkHarness.rebenchmark`): interleaved
   rounds, median per config, so one noisy first measurement cannot pick the winner.

The time budget: ``deadline`` (set by the search) ends screening and timing once some config
works: no candidate starts after it, and those still compiling or running (in a child, or in
process under the watchdog) are killed and recorded as ``stopped``, unmeasured, whatever their
own limits; so a batch full of hanging candidates cannot stretch a search past its budget.

Warnings a screening child raises are sent to this process and shown once per search and
source line, and the backend's optional ``prepare_autotune(device)`` runs here before any child
starts (per-process setup, done once, inherited by forked children).

The accuracy baseline is the default config's output (or ``settings.autotune_baseline_fn``'s);
tolerances come from ``autotune_baseline_atol/rtol`` (default 1e-2), fp8 outputs compare bitwise,
and tensors the kernel mutates in place are compared too.

The pieces live beside this module: :mod:`.candidate_outcome` (results, statuses, watchdog),
:mod:`.accuracy` (argument clones, the baseline check), :mod:`.timing` (:func:`do_bench`),
:mod:`.isolation` and :mod:`.isolation_worker` (the parent and child sides of isolated
screening). Their public names stay importable from here.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import math
import multiprocessing
import os
import statistics
import time
import warnings
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion.autotuner.accuracy import ACCURACY_RNG_SEED as ACCURACY_RNG_SEED
from helion.autotuner.accuracy import DEFAULT_TOLERANCE as DEFAULT_TOLERANCE
from helion.autotuner.accuracy import FP8_DTYPES as FP8_DTYPES
from helion.autotuner.accuracy import Baseline as Baseline
from helion.autotuner.accuracy import CapturedTensors as CapturedTensors
from helion.autotuner.accuracy import _detach_tree as _detach_tree
from helion.autotuner.accuracy import _tensor_bytes
from helion.autotuner.accuracy import _to_device
from helion.autotuner.accuracy import accuracy_rng as accuracy_rng
from helion.autotuner.accuracy import clone_args as clone_args
from helion.autotuner.accuracy import compare_values as compare_values
from helion.autotuner.accuracy import mutated_arguments as mutated_arguments
from helion.autotuner.candidate_outcome import STATUSES as STATUSES
from helion.autotuner.candidate_outcome import SURPRISING_STATUSES
from helion.autotuner.candidate_outcome import CandidateResult as CandidateResult
from helion.autotuner.candidate_outcome import CandidateTimeout as CandidateTimeout
from helion.autotuner.candidate_outcome import _describe
from helion.autotuner.candidate_outcome import call_with_timeout as call_with_timeout
from helion.autotuner.candidate_outcome import classify_error as classify_error
from helion.autotuner.isolation import StopCheck as StopCheck
from helion.autotuner.isolation import _ForkRunner
from helion.autotuner.isolation import _SpawnRunner
from helion.autotuner.isolation_worker import _portable_warning

# a process that imported this module before the split pickles its spawned workers' target
# under this name, and a worker started from it then looks the name up here
from helion.autotuner.isolation_worker import _spawn_worker_main as _spawn_worker_main
from helion.autotuner.isolation_worker import _warning_category
from helion.autotuner.isolation_worker import run_candidate as run_candidate
from helion.autotuner.progress import AutotuneLog
from helion.autotuner.progress import AutotuneProgress
from helion.autotuner.progress import user_stacklevel
from helion.autotuner.timing import _repeat_for
from helion.autotuner.timing import do_bench as do_bench
from helion.autotuner.timing import synchronize as synchronize

#: a candidate whose first wall-clock sample is this many times slower than the best so far
#: (and above CUTOFF_MIN_MS) is not timed further: it cannot win
CUTOFF_RATIO = 3.0
CUTOFF_MIN_MS = 1.0
#: adaptive compile timeout: after this many compiles, limit = clamp(3 x the 0.9 quantile,
#: floor, configured)
ADAPTIVE_TIMEOUT_SAMPLES = 10
ADAPTIVE_TIMEOUT_FLOOR = 30.0
#: adaptive first-run timeout (the first run includes the backend's lazy compile, e.g. ptxas):
#: after this many first runs, limit = clamp(3 x their 0.9 quantile, floor, configured)
ADAPTIVE_RUN_FLOOR = 10.0


# ================================================================================ harness
class BenchmarkHarness:
    """Evaluator of a bound kernel's configs (see the module docstring).

    ``evaluate(configs) -> list[float]`` and ``rebenchmark(configs) -> list[float]`` return
    milliseconds, ``inf`` for a config that failed; ``results`` keeps every
    :class:`CandidateResult` (with the failure reason).  ``deadline`` (a ``time.perf_counter``
    value, set by the search) makes the remaining candidates of a batch be skipped.
    """

    def __init__(
        self,
        bound: Any,
        args: Sequence[Any],
        *,
        settings: Any = None,
        profile: Any = None,
        log: AutotuneLog | None = None,
        progress: AutotuneProgress | None = None,
        isolation: str | None = None,
    ) -> None:
        from helion.autotuner.effort import FULL

        self.bound = bound
        self.args = tuple(args)
        self.settings = settings if settings is not None else bound.settings
        self.profile = profile or FULL
        self.log = log or AutotuneLog(self.settings)
        self.progress = progress
        self.device = torch.device(getattr(bound, "device", None) or _infer_device(self.args))
        s = self.settings
        self.configured_compile_timeout = float(getattr(s, "autotune_compile_timeout", 60) or 60)
        self.compile_timeout = self.configured_compile_timeout
        self.adaptive_timeout = bool(getattr(s, "autotune_adaptive_timeout", True))
        self._compile_seconds: list[float] = []
        self._first_run_seconds: list[float] = []
        self.run_timeout = float(getattr(s, "autotune_benchmark_timeout", 30) or 30)
        self.accuracy_check = bool(getattr(s, "autotune_accuracy_check", True))
        self.ignore_errors = bool(getattr(s, "autotune_ignore_errors", False))
        self.jobs = int(getattr(s, "autotune_precompile_jobs", None) or os.cpu_count() or 1)
        self.deadline: float | None = None
        self.results: list[CandidateResult] = []
        self.baseline: Baseline | None = None
        #: tensors the kernel writes that are not its arguments (a module-level tensor its device
        #: code stores to): restored after every run here, so tuning leaves them as they were
        self.captured = CapturedTensors()
        self._requested_isolation = isolation
        self.isolation: str | None = None
        self._ready = False
        self._spawn: _SpawnRunner | None = None
        self._estimates: dict[str, float] = {}
        # configs whose first run already timed out (the default config, run for the accuracy
        # baseline): a search seeds the default config, which would otherwise hang once more
        self._timed_out: dict[str, CandidateResult] = {}
        self._csv_path = getattr(s, "autotune_log", None)
        self._csv_started = False
        # where the warnings already shown were raised (see _show_warnings)
        self._warning_sites: set[tuple[str, str, int]] = set()

    # ------------------------------------------------------------------ setup
    def _choose_isolation(self) -> str:
        if self._requested_isolation is not None:
            return self._requested_isolation
        mode = getattr(self.settings, "autotune_precompile", "fork")
        if not mode:
            return "inprocess"
        fork_available = "fork" in multiprocessing.get_all_start_methods() and getattr(
            getattr(self.bound, "backend", None), "fork_safe", True
        )
        reference = self._importable_ref()
        if self.device.type == "cpu":
            if mode == "spawn" and reference is not None:
                return "spawn"
            return "fork" if fork_available else "inprocess"
        if reference is not None:
            return "spawn"
        # a forked child may only touch CUDA if the parent has not initialised it (is_initialized
        # has no side effects, unlike is_available); other accelerators are never forked
        if self.device.type == "cuda" and fork_available and not torch.cuda.is_initialized():
            return "fork"
        return "inprocess"

    def _importable_ref(self) -> tuple[str, str] | None:
        getter = getattr(self.bound, "importable_ref", None)
        if getter is None:
            return None
        try:
            reference = getter()
        except Exception:
            return None
        if not reference or reference[0] in ("__main__", "__mp_main__"):
            return None
        return reference[0], reference[1]

    def prepare(self) -> None:
        """Pick the isolation strategy and compute the accuracy baseline (once)."""
        if self._ready:
            return
        self._ready = True
        self.captured = CapturedTensors.of(self.bound, self.args)
        if self.captured:
            self.log.debug(
                "tensors the kernel writes besides its arguments, restored after every run: %s",
                ", ".join(self.captured.names),
            )
        self.isolation = self._choose_isolation()
        self._prepare_backend()
        if self.isolation == "spawn":
            reference = self._importable_ref()
            try:
                assert reference is not None
                # started first: the workers import the kernel while the baseline runs here
                self._spawn = _SpawnRunner(self, self._spawn_jobs(), *reference)
            except Exception as error:
                self.log.warning(
                    "isolated autotune workers unavailable (%s); screening in process", error
                )
                self.isolation = "inprocess"
        if self.accuracy_check:
            self.baseline = self._compute_baseline()
        if self._spawn is not None:
            try:
                self._spawn.publish(self.baseline)
            except Exception as error:
                self.log.warning(
                    "isolated autotune workers unavailable (%s); screening in process", error
                )
                self._fall_back_to_in_process()
        self.log.debug("autotune isolation: %s, %d jobs", self.isolation, self.jobs)

    def _prepare_backend(self) -> None:
        """The backend's ``prepare_autotune(device)``, if it has one, here in the parent before
        any candidate runs in a child: per-process setup done once (a Triton cache directory
        that cannot be used is found and warned about here, and forked children inherit the
        fallback instead of each warning again). Its warnings count as shown for the whole
        search, so the same warning from a spawned worker is not shown again."""
        backend = getattr(self.bound, "backend", None)
        if backend is None:
            return
        with warnings.catch_warnings(record=True) as caught:
            try:
                backend.prepare_autotune(self.device)
            except Exception as error:
                self.log.debug("backend prepare_autotune failed: %s", _describe(error))
        self._show_warnings(
            [_portable_warning(w.message, w.category, w.filename, w.lineno) for w in caught]
        )

    def _show_warnings(self, found: list[tuple[str, str, str, int]]) -> None:
        """Show warnings recorded elsewhere (a screening child, the backend's preparation),
        each at most once per search and source line: a child, forked or spawned, has its own
        once-per-process registry, so N children used to print the same warning N times."""
        for category_name, message, filename, lineno in found:
            site = (category_name, filename, lineno)
            if site in self._warning_sites:
                continue
            self._warning_sites.add(site)
            category = _warning_category(category_name)
            try:
                warnings.warn_explicit(message, category, filename, lineno)
            except Warning as error:  # a filter turns it into an error here: the search goes on
                self.log.warning("%s: %s", type(error).__name__, error)

    def _fall_back_to_in_process(self) -> None:
        if self._spawn is not None:
            self._spawn.close()
            self._spawn = None
        self.isolation = "inprocess"

    def _spawn_jobs(self) -> int:
        jobs = min(self.jobs, 8)
        if self.device.type == "cuda":
            try:
                free, _ = torch.cuda.mem_get_info(self.device)
                per_worker = 3 * _tensor_bytes(self.args) + (768 << 20)
                jobs = max(1, min(jobs, int(free * 0.5) // max(per_worker, 1)))
            except Exception:
                pass
        return jobs

    def _compute_baseline(self) -> Baseline | None:
        s = self.settings
        atol = getattr(s, "autotune_baseline_atol", None)
        rtol = getattr(s, "autotune_baseline_rtol", None)
        check_fn = getattr(s, "autotune_baseline_accuracy_check_fn", None)
        baseline_fn = getattr(s, "autotune_baseline_fn", None)
        try:
            if baseline_fn is not None:
                call_args = clone_args(self.args)
                try:
                    with accuracy_rng():
                        output = baseline_fn(*call_args)
                    synchronize(self.device)
                finally:
                    self.captured.restore()
                mutated = mutated_arguments(self.args, call_args)
                return Baseline(
                    _detach_tree(output),
                    mutated,
                    atol,
                    rtol,
                    check_fn,
                    source="autotune_baseline_fn",
                )
            default = self.bound.config_spec.default_config()
            output, mutated, captured = self._run_default(default)
            return Baseline(
                output,
                mutated,
                atol,
                rtol,
                check_fn,
                source="default config",
                captured=list(zip(self.captured.names, captured, strict=True)),
            )
        except Exception as error:
            self._warn_accuracy_check_disabled(
                "autotune_baseline_fn" if baseline_fn is not None else "default config",
                _describe(error),
            )
            return None

    def _warn_accuracy_check_disabled(self, source: str, reason: str) -> None:
        """A baseline that fails or hangs turns the accuracy check off for the whole run: say
        so where the user sees it (a warning, not only a log line that log level 0 hides)."""
        kernel = getattr(getattr(self.bound, "kernel", None), "name", None) or "kernel"
        self.log.warning(
            "accuracy check disabled: the baseline (%s) failed: %s; configs will not be "
            "checked against a reference output",
            source,
            reason,
        )
        from helion import exc

        exc.warn(
            exc.AccuracyCheckDisabled(kernel, source, reason),
            self.settings,
            stacklevel=user_stacklevel(),
        )

    def _run_default(self, default: Any) -> tuple[Any, dict[int, Any], list[Any]]:
        """The default config's output, the arguments it mutated and the values it left in
        the captured tensors (:attr:`captured`, restored afterwards)."""
        # the first-run limit of any candidate: a default config that hangs must not cost a
        # quick search the configured 30 s before its own 35 s budget even starts
        run_timeout = self._first_run_timeout()
        if self.isolation == "fork":
            # even the default config runs isolated: a crash there must not take the search down
            runner = _ForkRunner(self, 1, return_output=True)
            runner.run_timeout = run_timeout
            runner.on_warnings = self._show_warnings
            result = runner.run([default], lambda found_ok: False)[0]
            if result.status == "timeout":
                self._remember_timeout(default, result.reason)
            if not result.ok or 0 not in runner.outputs:
                raise RuntimeError(f"default config {result.status}: {result.reason}")
            output, mutated, *rest = runner.outputs[0]
            captured = list(rest[0]) if rest else []
            return (
                _to_device(output, self.device),
                _to_device(mutated, self.device),
                _to_device(captured, self.device),
            )
        compile_it = functools.partial(self.bound.compile_config, default)
        try:
            fn = call_with_timeout(compile_it, self.compile_timeout)
            call_args = clone_args(self.args)
            with accuracy_rng():
                try:
                    output = call_with_timeout(lambda: fn(*call_args), run_timeout)
                except CandidateTimeout as error:
                    self._remember_timeout(default, classify_error(error, "run")[1])
                    raise
            synchronize(self.device)
            captured = self.captured.values()
        finally:
            self.captured.restore()
        return _detach_tree(output), mutated_arguments(self.args, call_args), captured

    def _remember_timeout(self, config: Any, reason: str) -> None:
        from helion.autotuner.search.base import config_key

        reason = f"{reason} (when run for the accuracy baseline)"
        keys = {config_key(config)}
        with contextlib.suppress(Exception):
            normalized = self.bound.config_spec.normalize(config)
            keys.add(config_key(config if normalized is None else normalized))
        for key in keys:
            self._timed_out[key] = CandidateResult(config, "timeout", reason=reason)

    def close(self) -> None:
        self.captured.restore()
        if self._spawn is not None:
            self._spawn.close()
            self._spawn = None

    def __enter__(self) -> BenchmarkHarness:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ evaluate
    def _out_of_time(self, found_ok: bool = False) -> bool:
        """Past the deadline, once something works: a config measured, or (``found_ok``) one
        that passed screening in the current batch and is measured next. Before that the
        search goes on, so the caller never ends up without a working config."""
        if self.deadline is None or time.perf_counter() < self.deadline:
            return False
        return found_ok or self._has_working()

    def _has_working(self) -> bool:
        return any(r.ok for r in self.results)

    def _budget_cap(self, limit: float) -> tuple[float, bool]:
        """``limit`` (seconds) cut to the time left before the deadline once something works
        (a candidate still running then would be measured too late to be used), and whether
        the cut applies."""
        if self.deadline is None or not self._has_working():
            return limit, False
        left = self.deadline - time.perf_counter()
        if left >= limit:
            return limit, False
        return max(left, 0.001), True  # 0 would mean "no limit" to call_with_timeout

    def evaluate(self, configs: Sequence[Any]) -> list[float]:
        self.prepare()
        configs = list(configs)
        known = [self._known_timeout(config) for config in configs]
        unknown = [c for c, k in zip(configs, known, strict=True) if k is None]
        fresh = iter(self._screen(unknown) if unknown else [])
        screened = [next(fresh) if k is None else k for k in known]
        accuracy_checked = self.isolation == "fork" or (
            self._spawn is not None and self._spawn.checks_accuracy
        )
        times = []
        for config, screen in zip(configs, screened, strict=True):
            if screen is not None and not screen.ok:
                result = screen
            elif self._out_of_time():
                result = CandidateResult(config, "skipped", reason="time budget spent")
            else:
                result = self._measure(
                    config,
                    first_run_done=screen is not None,
                    accuracy_checked=screen is not None and accuracy_checked,
                    compile_seconds=screen.compile_seconds if screen is not None else None,
                )
            self._finish(result)
            # nan: never measured (the time budget ran out first), unlike inf, a failure
            times.append(
                result.time_ms
                if result.ok
                else math.nan
                if result.status == "skipped"
                else math.inf
            )
        return times

    def _known_timeout(self, config: Any) -> CandidateResult | None:
        if not self._timed_out:
            return None
        from helion.autotuner.search.base import config_key

        known = self._timed_out.get(config_key(config))
        if known is None:
            return None
        return CandidateResult(config, known.status, reason=known.reason)

    def _adapt_compile_timeout(self) -> None:
        """Shrink the compile timeout toward what compiles actually take (never below
        ADAPTIVE_TIMEOUT_FLOOR), so a hung compile does not cost the full configured limit."""
        if not self.adaptive_timeout or len(self._compile_seconds) < ADAPTIVE_TIMEOUT_SAMPLES:
            return
        ordered = sorted(self._compile_seconds)
        q90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        self.compile_timeout = min(
            self.configured_compile_timeout, max(ADAPTIVE_TIMEOUT_FLOOR, 3.0 * q90)
        )
        if self._spawn is not None:
            self._spawn.compile_timeout = self.compile_timeout

    def _first_run_timeout(self) -> float:
        """The limit on a screened candidate's first run. A hung or pathologically slow config
        must not cost a quick search the configured 30 s: once enough candidates have run, the
        limit follows what their first runs (lazy compile included) actually took."""
        if not self.adaptive_timeout:
            return self.run_timeout
        limit = self.run_timeout
        if self.deadline is not None:
            # before enough samples exist, a third of the time left: on the H200 one hung
            # candidate took a quick search's whole 35 s budget with the configured 30 s
            remaining = self.deadline - time.perf_counter()
            limit = min(limit, max(ADAPTIVE_RUN_FLOOR, remaining / 3.0))
        samples = sorted(self._first_run_seconds)
        if len(samples) >= ADAPTIVE_TIMEOUT_SAMPLES:
            q90 = samples[min(len(samples) - 1, int(0.9 * len(samples)))]
            limit = min(limit, max(ADAPTIVE_RUN_FLOOR, 3.0 * q90))
        return limit

    def _screen(self, configs: list[Any]) -> list[CandidateResult | None]:
        self._adapt_compile_timeout()
        first_run_timeout = self._first_run_timeout()
        if self._spawn is not None:
            self._spawn.run_timeout = first_run_timeout
            self._spawn.stop_time = self.deadline
            self._spawn.on_warnings = self._show_warnings
        if self.isolation == "fork":
            runner = _ForkRunner(self, self.jobs)
            runner.run_timeout = first_run_timeout
            runner.stop_time = self.deadline
            runner.on_warnings = self._show_warnings
            try:
                return list(runner.run(configs, self._out_of_time))
            finally:
                self._first_run_seconds.extend(runner.first_run_seconds)
        if self.isolation == "spawn" and self._spawn is not None:
            spawn = self._spawn
            try:
                results: list[CandidateResult | None] = list(spawn.run(configs, self._out_of_time))
            finally:
                self._first_run_seconds.extend(spawn.first_run_seconds)
                spawn.first_run_seconds.clear()
            if self._spawn.broken is not None:
                self.log.warning(
                    "autotune workers cannot start (%s); screening in process instead",
                    self._spawn.broken,
                )
                self._fall_back_to_in_process()
                # the candidates the broken workers never ran are measured in process instead
                results = [None if r is not None and r.status == "skipped" else r for r in results]
            return results
        return [None] * len(configs)

    def _measure(
        self,
        config: Any,
        *,
        first_run_done: bool,
        accuracy_checked: bool,
        compile_seconds: float | None,
    ) -> CandidateResult:
        try:
            return self._measure_steps(config, first_run_done, accuracy_checked, compile_seconds)
        finally:
            # the next run (and the caller, after tuning) sees the captured tensors as they were
            self.captured.restore()

    def _measure_steps(
        self,
        config: Any,
        first_run_done: bool,
        accuracy_checked: bool,
        compile_seconds: float | None,
    ) -> CandidateResult:
        phase = "compile"
        # each step's limit is cut to the time left once something works (by_budget): a
        # candidate interrupted by that cut is stopped unmeasured, not failed
        by_budget = False
        try:
            start = time.perf_counter()
            limit, by_budget = self._budget_cap(self.compile_timeout)
            fn = call_with_timeout(lambda: self.bound.compile_config(config), limit)
            if compile_seconds is None:
                compile_seconds = time.perf_counter() - start
            phase = "run"
            if not (first_run_done and accuracy_checked):
                # a first run here (in-process screening) gets a screened first run's limit
                first = self.run_timeout if first_run_done else self._first_run_timeout()
                limit, by_budget = self._budget_cap(first)
                call_args = clone_args(self.args)
                with accuracy_rng():
                    output = call_with_timeout(
                        lambda: _call_and_sync(fn, call_args, self.device), limit
                    )
                if self.baseline is not None:
                    problem = self.baseline.check(output, call_args, self.captured.current())
                    if problem is not None:
                        return CandidateResult(
                            config, "inaccurate", reason=problem, compile_seconds=compile_seconds
                        )
            time_it = functools.partial(
                self._time, fn, self.profile.benchmark_target_ms, allow_cutoff=True
            )
            limit, by_budget = self._budget_cap(self.run_timeout)
            ms = call_with_timeout(time_it, limit)
        except (Exception, SystemExit) as error:  # the watchdog's CandidateTimeout included
            if by_budget and isinstance(error, CandidateTimeout):
                what = "compiling" if phase == "compile" else "running"
                return CandidateResult(
                    config,
                    "skipped",
                    reason=f"stopped when the time budget ran out, still {what}",
                    compile_seconds=compile_seconds,
                    stopped=True,
                )
            status, reason = classify_error(error, phase)
            return CandidateResult(config, status, reason=reason, compile_seconds=compile_seconds)
        if not math.isfinite(ms) or ms < 0:
            return CandidateResult(
                config,
                "error",
                reason=f"benchmark returned {ms!r}",
                compile_seconds=compile_seconds,
            )
        from helion.autotuner.search.base import config_key

        self._estimates[config_key(config)] = ms
        return CandidateResult(config, "ok", time_ms=ms, compile_seconds=compile_seconds)

    def _time(
        self,
        fn: Callable[..., Any],
        target_ms: float,
        estimate_ms: float | None = None,
        *,
        allow_cutoff: bool = False,
    ) -> float:
        call_args = clone_args(self.args)

        def call() -> object:
            return fn(*call_args)

        custom = getattr(self.settings, "autotune_benchmark_fn", None)
        if estimate_ms is None:
            # warm-up: first-launch costs (module load, allocator) are not the kernel's, nor is
            # the call path's one-time wiring at the second launch (the runtime's guarded launch,
            # a backend's fused launcher). Timed in one call each, those put 70 us kernels at
            # 1.0-1.4 ms on an H200, over the cutoff below, and the search dropped them
            # (layer_norm's whole-row seeds, 2026-12-04): two warm-ups, then the best of two
            call()
            call()
            synchronize(self.device)
            estimate_ms = math.inf
            for _ in range(2):
                start = time.perf_counter()
                call()
                synchronize(self.device)
                estimate_ms = min(estimate_ms, (time.perf_counter() - start) * 1000)
            best = self._best_ms()
            if allow_cutoff and estimate_ms > max(CUTOFF_RATIO * best, CUTOFF_MIN_MS):
                # far slower than the leader: it cannot win, and timing it properly is costly.
                # (Only above CUTOFF_MIN_MS, where one wall-clock sample is not mostly overhead.)
                return estimate_ms
        repeat = _repeat_for(estimate_ms, target_ms, low=3, high=200)
        if custom is not None:
            return float(custom([call], repeat=repeat, desc="autotune")[0])
        backend_bench = self._backend_benchmark()
        if backend_bench is not None:
            return float(backend_bench(call, device=self.device, repeat=repeat))
        return do_bench(call, device=self.device, repeat=repeat, warmup=1)

    def _backend_benchmark(self) -> Callable[..., float] | None:
        """The backend's timer, unless it is the generic wall-clock one on a GPU (then events win)."""
        backend = getattr(self.bound, "backend", None)
        bench = getattr(backend, "benchmark", None)
        if bench is None:
            return None
        if self.device.type == "cuda":
            try:
                from helion.backends.base import Backend

                if getattr(type(backend), "benchmark", None) is Backend.benchmark:
                    return None
            except Exception:
                pass
        return bench

    def _best_ms(self) -> float:
        return min((r.time_ms for r in self.results if r.ok), default=math.inf)

    # ------------------------------------------------------------------ rebenchmark
    def rebenchmark(self, configs: Sequence[Any], rounds: int = 5) -> list[float]:
        """Re-time configs in interleaved rounds (config order rotated each round); median per config."""
        from helion.autotuner.search.base import config_key

        self.prepare()
        compiled: list[Callable[..., Any] | None] = []
        for config in configs:
            try:
                compile_it = functools.partial(self.bound.compile_config, config)
                compiled.append(call_with_timeout(compile_it, self.compile_timeout))
            except Exception as error:
                self.log.debug("rebenchmark: %s failed to compile: %s", config, _describe(error))
                compiled.append(None)
        samples: list[list[float]] = [[] for _ in configs]
        per_round_ms = self.profile.rebenchmark_target_ms / max(rounds, 1)
        for round_index in range(rounds):
            if self._out_of_time() and round_index >= 1:
                break
            order = list(range(len(configs)))
            shift = round_index % max(len(order), 1)
            order = order[shift:] + order[:shift]
            for i in order:
                fn = compiled[i]
                if fn is None:
                    continue
                estimate = self._estimates.get(config_key(configs[i]))
                try:
                    time_it = functools.partial(self._time, fn, per_round_ms, estimate)
                    ms = call_with_timeout(time_it, self.run_timeout)
                except Exception as error:
                    self.log.debug("rebenchmark: %s failed: %s", configs[i], _describe(error))
                    compiled[i] = None
                    samples[i] = []
                    continue
                samples[i].append(ms)
        self.captured.restore()  # the timing runs wrote them
        times = [
            statistics.median(s) if s and compiled[i] is not None else math.inf
            for i, s in enumerate(samples)
        ]
        for position, (config, ms, taken) in enumerate(zip(configs, times, samples, strict=True)):
            self.log.debug("rebenchmark %s: %s ms", config, ms)
            # the CSV shows what the winner was picked from: first-pass rows above, these below
            self._write_csv_row(
                f"r{position}",
                "rebenchmark" if math.isfinite(ms) else "rebenchmark failed",
                ms,
                None,
                "samples " + " ".join(f"{t:.6f}" for t in taken),
                config,
            )
        return times

    # ------------------------------------------------------------------ bookkeeping
    @property
    def failures(self) -> list[CandidateResult]:
        return [r for r in self.results if not r.ok and r.status != "skipped"]

    @property
    def stopped(self) -> list[CandidateResult]:
        """Candidates killed unfinished when the time budget ran out (not failures)."""
        return [r for r in self.results if r.stopped]

    def _finish(self, result: CandidateResult) -> None:
        self.results.append(result)
        if result.compile_seconds is not None and result.status != "timeout":
            self._compile_seconds.append(result.compile_seconds)
        if result.status != "skipped" and self.progress is not None:
            self.progress.record(result.time_ms, failed=not result.ok)
        if result.ok:
            self.log.debug("config %s: %.5f ms", result.config, result.time_ms)
        elif result.stopped:
            self.log.debug("config %s: %s", result.config, result.reason)
        elif result.status != "skipped":
            self._report_failure(result)
        self._write_csv(result)

    def _report_failure(self, result: CandidateResult) -> None:
        self.log.debug("config %s %s: %s", result.config, result.status, result.reason)
        if self.ignore_errors or result.status not in SURPRISING_STATUSES:
            return
        try:
            from helion import exc

            exc.warn(
                exc.AutotuneCandidateFailed(
                    str(result.config), f"{result.status}: {result.reason}"
                ),
                self.settings,
                stacklevel=user_stacklevel(),  # attributed to the user's call, not to helion
            )
        except Exception:
            self.log.warning("config %s %s: %s", result.config, result.status, result.reason)

    def _write_csv(self, result: CandidateResult) -> None:
        self._write_csv_row(
            len(self.results) - 1,
            result.status,
            result.time_ms if result.ok else None,
            result.compile_seconds,
            result.reason,
            result.config,
        )

    def _write_csv_row(
        self,
        index: int | str,
        status: str,
        time_ms: float | None,
        compile_seconds: float | None,
        reason: str,
        config: Any,
    ) -> None:
        if not self._csv_path:
            return
        path = f"{self._csv_path}.csv"
        try:
            new_file = not self._csv_started
            with open(path, "w" if new_file else "a", newline="") as handle:
                writer = csv.writer(handle)
                if new_file:
                    writer.writerow(
                        ["index", "status", "time_ms", "compile_seconds", "reason", "config"]
                    )
                    self._csv_started = True
                writer.writerow(
                    [
                        index,
                        status,
                        "" if time_ms is None or not math.isfinite(time_ms) else f"{time_ms:.6f}",
                        "" if compile_seconds is None else f"{compile_seconds:.3f}",
                        reason,
                        config.to_json().replace("\n", " ")
                        if hasattr(config, "to_json")
                        else str(config),
                    ]
                )
        except OSError as error:
            self.log.debug("could not write %s: %s", path, error)
            self._csv_path = None


def _call_and_sync(fn: Callable[..., Any], call_args: Sequence[Any], device: torch.device) -> Any:
    output = fn(*call_args)
    synchronize(device)
    return output


def _infer_device(args: Sequence[Any]) -> torch.device:
    for value in args:
        if isinstance(value, torch.Tensor):
            return value.device
    return torch.device("cpu")
