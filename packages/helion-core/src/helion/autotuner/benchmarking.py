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
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import functools
import io
import math
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion.autotuner.progress import AutotuneLog
from helion.autotuner.progress import AutotuneProgress
from helion.autotuner.progress import user_stacklevel
from helion.containers import iter_tensors
from helion.containers import map_tensors

DEFAULT_TOLERANCE = 1e-2
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

#: statuses a candidate can end in; every one but "ok" means it cannot win
STATUSES = ("ok", "compile_error", "error", "oom", "crash", "timeout", "inaccurate", "skipped")
#: failures worth a warning (the others -- compile errors, OOM of huge tiles -- are normal in a search)
SURPRISING_STATUSES = frozenset({"error", "crash", "timeout", "inaccurate"})

_FP8_DTYPE_NAMES = (
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
)
FP8_DTYPES = frozenset(getattr(torch, name) for name in _FP8_DTYPE_NAMES if hasattr(torch, name))


@dataclass
class CandidateResult:
    config: Any
    status: str
    time_ms: float = math.inf
    reason: str = ""
    compile_seconds: float | None = None
    #: killed unfinished because the time budget ran out ("skipped"): maybe a hang, maybe only
    #: slow; it was not measured, so it neither counts as a failure nor can win
    stopped: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# ================================================================================ arguments
# Accuracy runs start from one state of torch's CPU generator: a kernel with torch.rand in device
# code draws its seed from it at every launch, and must draw the same one for every config.
ACCURACY_RNG_SEED = 0


@contextlib.contextmanager
def accuracy_rng() -> Any:
    """Run the block with torch's CPU generator seeded to ``ACCURACY_RNG_SEED``, then restore it."""
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(ACCURACY_RNG_SEED)
        yield


def _clone_tensor(tensor: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        try:
            # keep the exact strides: the specialization key (and so the compiled code) depends on them
            copy = torch.empty_strided(
                tensor.size(), tensor.stride(), dtype=tensor.dtype, device=tensor.device
            )
            copy.copy_(tensor)
        except RuntimeError:
            copy = tensor.clone()  # overlapping (expanded) layouts cannot be re-created exactly
    if tensor.requires_grad and copy.is_floating_point():
        copy.requires_grad_(True)
    return copy


def clone_args(value: Any) -> Any:
    """Deep-copy the tensors in ``value`` (inside lists, tuples, dicts, namedtuples and
    dataclasses too), so in-place kernels cannot corrupt the caller's inputs or the next
    candidate's."""
    return map_tensors(_clone_tensor, value)


def _to_device(value: Any, device: torch.device | str) -> Any:
    return map_tensors(lambda tensor: tensor.to(device), value)


def _tensor_bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in iter_tensors([value]))


# ================================================================================ accuracy
def _leaves(value: Any, path: str = "output") -> list[tuple[str, Any]]:
    if isinstance(value, (tuple, list)):
        found = []
        for i, item in enumerate(value):
            found.extend(_leaves(item, f"{path}[{i}]"))
        return found
    if isinstance(value, dict):
        found = []
        for key in sorted(value, key=str):
            found.extend(_leaves(value[key], f"{path}[{key!r}]"))
        return found
    return [(path, value)]


def compare_values(
    actual: Any, expected: Any, *, atol: float | None, rtol: float | None
) -> str | None:
    """``None`` when ``actual`` matches ``expected``, else a one-line description of the mismatch."""
    actual_leaves, expected_leaves = _leaves(actual), _leaves(expected)
    if len(actual_leaves) != len(expected_leaves):
        return f"output has {len(actual_leaves)} values, the baseline has {len(expected_leaves)}"
    for (path, a), (_, e) in zip(actual_leaves, expected_leaves, strict=True):
        problem = _compare_leaf(a, e, atol=atol, rtol=rtol)
        if problem is not None:
            return f"{path}: {problem}"
    return None


def _compare_leaf(
    actual: Any, expected: Any, *, atol: float | None, rtol: float | None
) -> str | None:
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"expected a tensor, got {type(actual).__name__}"
        if actual.shape != expected.shape:
            return f"shape {tuple(actual.shape)} != baseline {tuple(expected.shape)}"
        actual = actual.detach()
        expected = expected.detach().to(actual.device)
        if expected.dtype in FP8_DTYPES and atol is None and rtol is None:
            # fp8 rounding is part of the result: only the exact bits are right
            if actual.dtype != expected.dtype or not torch.equal(
                actual.view(torch.uint8), expected.view(torch.uint8)
            ):
                return "fp8 output differs from the baseline bit pattern"
            return None
        if expected.dtype == torch.bool or not (
            expected.is_floating_point() or expected.is_complex()
        ):
            if not torch.equal(actual.to(expected.dtype), expected):
                mismatched = int((actual.to(expected.dtype) != expected).sum())
                return f"{mismatched} of {expected.numel()} integer/bool elements differ"
            return None
        a = actual if actual.is_complex() else actual.float()
        e = expected if expected.is_complex() else expected.float()
        tol_a = DEFAULT_TOLERANCE if atol is None else atol
        tol_r = DEFAULT_TOLERANCE if rtol is None else rtol
        if torch.allclose(a, e, atol=tol_a, rtol=tol_r, equal_nan=True):
            return None
        diff = (a - e).abs()
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
        bad = int((diff > tol_a + tol_r * e.abs()).sum())
        return (
            f"max abs diff {float(diff.max()):.4g}, {bad} of {e.numel()} elements outside "
            f"atol={tol_a:g}, rtol={tol_r:g}"
        )
    if isinstance(expected, float) or isinstance(actual, float):
        try:
            if math.isclose(
                float(actual),
                float(expected),
                rel_tol=rtol or DEFAULT_TOLERANCE,
                abs_tol=atol or DEFAULT_TOLERANCE,
            ):
                return None
        except (TypeError, ValueError):
            pass
        return f"{actual!r} != baseline {expected!r}"
    if actual != expected:
        return f"{actual!r} != baseline {expected!r}"
    return None


@dataclass
class Baseline:
    """What a correct candidate produces: its return value and the arguments it mutated."""

    output: Any
    mutated: dict[int, Any] = field(default_factory=dict)
    atol: float | None = None
    rtol: float | None = None
    check_fn: Callable[[Any, Any], None] | None = None
    source: str = "default config"

    def check(self, output: Any, call_args: Sequence[Any]) -> str | None:
        if self.check_fn is not None:
            try:
                self.check_fn(output, self.output)
            except AssertionError as error:
                return f"accuracy check failed: {str(error).strip().splitlines()[0] if str(error).strip() else 'AssertionError'}"
        else:
            problem = compare_values(output, self.output, atol=self.atol, rtol=self.rtol)
            if problem is not None:
                return problem
        for index, expected in self.mutated.items():
            problem = compare_values(call_args[index], expected, atol=self.atol, rtol=self.rtol)
            if problem is not None:
                return f"in-place argument {index}: {problem}"
        return None


def mutated_arguments(original: Sequence[Any], after_call: Sequence[Any]) -> dict[int, Any]:
    """Top-level tensor arguments whose contents a call changed."""
    changed = {}
    for index, (before, after) in enumerate(zip(original, after_call, strict=True)):
        if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor):
            with torch.no_grad():
                same = before.shape == after.shape and torch.equal(before, after.to(before.device))
            if not same:
                changed[index] = after.detach()
    return changed


def _detach_tree(value: Any) -> Any:
    return map_tensors(torch.Tensor.detach, value)


# ================================================================================ timing
def synchronize(device: torch.device | str) -> None:
    device = torch.device(device)
    if device.type == "cpu":
        return
    module = getattr(torch, device.type, None)
    sync = getattr(module, "synchronize", None)
    if sync is not None:
        sync(device) if device.type == "cuda" else sync()


_l2_buffers: dict[str, torch.Tensor] = {}


def _l2_flush_buffer(device: torch.device) -> torch.Tensor:
    key = str(device)
    buffer = _l2_buffers.get(key)
    if buffer is None:
        try:
            l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0))
        except Exception:
            l2_bytes = 0
        # writing twice the L2 size evicts everything the previous run left there; at least
        # 256 MB (as benchmarks/_timing.py and triton.testing), so the flush also outlasts the
        # host's launch of the timed call and the start event does not fire too early
        size = max(2 * l2_bytes, 256 * 1024 * 1024)
        buffer = torch.empty(size // 4, dtype=torch.int32, device=device)
        _l2_buffers[key] = buffer
    return buffer


def do_bench(
    fn: Callable[[], object],
    *,
    device: torch.device | str,
    repeat: int | None = None,
    warmup: int = 2,
    target_ms: float = 25.0,
    flush_l2: bool = True,
) -> float:
    """Median milliseconds of ``fn``.

    CUDA: CUDA events around each run, the L2 cache flushed before each (a kernel must not look
    fast because the previous run left its inputs in cache), repeats sized to ``target_ms``.
    Other devices: ``time.perf_counter`` with a device synchronize after each run.
    Backends can call this from their ``benchmark``.
    """
    device = torch.device(device)
    for _ in range(max(1, warmup)):
        fn()
    synchronize(device)
    if device.type == "cuda":
        return _cuda_bench(fn, device, repeat, target_ms, flush_l2)
    if repeat is None:
        start = time.perf_counter()
        fn()
        synchronize(device)
        estimate_ms = (time.perf_counter() - start) * 1000
        repeat = _repeat_for(estimate_ms, target_ms)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _repeat_for(estimate_ms: float, target_ms: float, low: int = 3, high: int = 500) -> int:
    if estimate_ms <= 0:
        return high
    return int(max(low, min(high, round(target_ms / estimate_ms))))


def _cuda_bench(
    fn: Callable[[], object],
    device: torch.device,
    repeat: int | None,
    target_ms: float,
    flush_l2: bool,
) -> float:
    with torch.cuda.device(device):
        flush = _l2_flush_buffer(device) if flush_l2 else None
        if repeat is None:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(5):
                fn()
            end.record()
            torch.cuda.synchronize(device)
            repeat = _repeat_for(start.elapsed_time(end) / 5, target_ms, low=10, high=1000)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
        for i in range(repeat):
            if flush is not None:
                flush.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize(device)
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


# ================================================================================ watchdog
class CandidateTimeout(Exception):
    """Raised into a thread whose candidate ran past its time limit."""


def call_with_timeout(fn: Callable[[], Any], seconds: float | None) -> Any:
    """Run ``fn`` in this thread; past ``seconds`` a watchdog raises :class:`CandidateTimeout` in it.

    The exception is delivered at the next Python bytecode, so a Python-level hang is ended; a
    hang inside one C call (a spinning GPU kernel) ends when the call returns and is then still
    reported as a timeout.  Process isolation is what truly contains those.
    """
    if seconds is None or seconds <= 0:
        return fn()
    thread_id = threading.get_ident()
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def fire() -> None:
        with lock:
            if state["done"]:
                return
            state["fired"] = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread_id), ctypes.py_object(CandidateTimeout)
            )

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        try:
            result = fn()
        finally:
            with lock:
                state["done"] = True
                if state["fired"]:
                    # the call finished on its own after the watchdog fired: drop the pending exception
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
            timer.cancel()
    except CandidateTimeout:
        raise CandidateTimeout(f"did not finish within {seconds:g}s") from None
    if state["fired"]:
        raise CandidateTimeout(f"did not finish within {seconds:g}s")
    return result


# ================================================================================ one candidate
def _describe(error: BaseException) -> str:
    # whitespace collapsed: compiler errors often start with a bare header line
    text = " ".join(str(error).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def classify_error(error: BaseException, phase: str) -> tuple[str, str]:
    """(status, reason) of an exception raised while compiling (``phase='compile'``) or running."""
    name = type(error).__name__
    text = str(error)
    if (
        isinstance(error, MemoryError)
        or name == "OutOfMemoryError"
        or "out of memory" in text.lower()
    ):
        return (
            "oom",
            f"out of memory while {'compiling' if phase == 'compile' else 'running'}: {_describe(error)}",
        )
    if isinstance(error, CandidateTimeout):
        what = "compile" if phase == "compile" else "run"
        return "timeout", f"{what} {text or 'timed out'}"
    if phase == "compile":
        return "compile_error", _describe(error)
    return "error", _describe(error)


def run_candidate(
    bound: Any,
    config: Any,
    args: Sequence[Any],
    baseline: Baseline | None,
    device: torch.device,
    send: Callable[[tuple[Any, ...]], None],
    *,
    return_output: bool = False,
) -> None:
    """Compile and run one config once, reporting through ``send``:

    ``("compiled", seconds)`` after compiling, then ``("result", status, reason)`` and, with
    ``return_output``, ``("output", output, mutated_args)`` before it.  Used by the isolated
    screening children and workers.

    In a child that called :func:`_keep_warnings`, the Python warnings raised meanwhile are
    sent as ``("warnings", [(category, message, filename, lineno), ...])`` before the result
    instead of being printed: the parent shows each once per search, where every child used
    to print its own copy (over the progress display, too).
    """

    def send_warnings_first(message: tuple[Any, ...]) -> None:
        # before the result: the parent stops reading a child once it has its result
        if message[0] == "result" and _kept_warnings:
            with contextlib.suppress(Exception):
                send(("warnings", list(_kept_warnings)))
            _kept_warnings.clear()
        send(message)

    _run_candidate(
        bound, config, args, baseline, device, send_warnings_first, return_output=return_output
    )


#: a screening child's warnings, kept for the parent (see :func:`_keep_warnings`)
_kept_warnings: list[tuple[str, str, str, int]] = []


def _portable_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int | None
) -> tuple[str, str, str, int]:
    """A warning as plain data: ``("module:qualname" of its class, text, filename, line)``."""
    name = f"{category.__module__}:{category.__qualname__}"
    return name, str(message), str(filename), int(lineno or 0)


def _keep_warnings() -> None:
    """In a screening child: keep the warnings that pass the filters for the parent instead of
    printing them. ``showwarning`` is replaced rather than ``catch_warnings`` used, so the
    once-per-location registries inherited from the parent still hold: what the parent
    already showed is not raised again."""

    def keep(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        _kept_warnings.append(_portable_warning(message, category, filename, lineno))

    _kept_warnings.clear()
    warnings.showwarning = keep


def _run_candidate(
    bound: Any,
    config: Any,
    args: Sequence[Any],
    baseline: Baseline | None,
    device: torch.device,
    send: Callable[[tuple[Any, ...]], None],
    *,
    return_output: bool,
) -> None:
    phase = "compile"
    try:
        start = time.perf_counter()
        fn = bound.compile_config(config)
        send(("compiled", time.perf_counter() - start))
        phase = "run"
        call_args = clone_args(tuple(args))
        with accuracy_rng():
            output = fn(*call_args)
        synchronize(device)
        if return_output:
            send(("output", _to_bytes((_detach_tree(output), mutated_arguments(args, call_args)))))
        if baseline is not None:
            problem = baseline.check(output, call_args)
            if problem is not None:
                send(("result", "inaccurate", problem))
                return
        send(("result", "ok", ""))
    except BaseException as error:
        status, reason = classify_error(error, phase)
        with contextlib.suppress(Exception):
            send(("result", status, reason))


def _to_bytes(value: Any) -> bytes:
    # torch.save into bytes, not the multiprocessing pickler: that one shares tensor storage
    # through the sending process, which exits right after sending
    buffer = io.BytesIO()
    torch.save(_to_device(value, "cpu"), buffer)
    return buffer.getvalue()


def _from_bytes(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)


def _quiet_crash_reports() -> None:
    # a crashing candidate is an expected outcome, recorded with its signal; an inherited
    # faulthandler would print a Python stack dump over the progress display for each one
    with contextlib.suppress(Exception):
        import faulthandler

        faulthandler.disable()


def _fork_child_main(
    conn: Any, bound: Any, config: Any, args: Any, baseline: Any, device: Any, return_output: bool
) -> None:
    # one thread per child: several children share the cores, and a forked OpenMP pool is unsafe
    with contextlib.suppress(Exception):
        torch.set_num_threads(1)
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _quiet_crash_reports()
    _keep_warnings()
    try:
        run_candidate(bound, config, args, baseline, device, conn.send, return_output=return_output)
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def _import_kernel_module(name_or_path: str) -> Any:
    """A module by dotted name, or a ``.py`` file by path (a script's kernels, loaded under a
    private name so its ``if __name__ == "__main__":`` block does not run)."""
    import importlib
    import importlib.util

    if name_or_path.endswith(".py") and os.path.isfile(name_or_path):
        spec = importlib.util.spec_from_file_location(
            "__helion_autotune_worker_target__", name_or_path
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {name_or_path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(name_or_path)


def _spawn_worker_main(conn: Any, module_name: str, qualname: str) -> None:
    """A long-lived screening worker in a fresh (spawned) interpreter, used for CUDA kernels.

    It imports the kernel's module first (the slow part, overlapping the parent's baseline
    run), then waits for ``("payload", path)`` with the arguments and baseline, binds the
    kernel and answers ``("ready",)``; after that each message is a config to screen.
    """
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _quiet_crash_reports()
    _keep_warnings()  # those of the start-up too: sent with the first candidate's
    try:
        kernel: Any = _import_kernel_module(module_name)
        for part in qualname.split("."):
            kernel = getattr(kernel, part)
        from helion.runtime.config import Config

        message = conn.recv()
        if message is None:
            return
        payload = torch.load(message[1], map_location="cpu", weights_only=False)
        device = torch.device(payload["device"])
        args = _to_device(payload["args"], device)
        for name, value in (payload.get("settings") or {}).items():
            with contextlib.suppress(Exception):
                setattr(kernel.settings, name, value)
        bound = kernel.bind(tuple(args))
        baseline = payload.get("baseline")
        if baseline is not None:
            baseline.output = _to_device(baseline.output, device)
            baseline.mutated = _to_device(baseline.mutated, device)
        conn.send(("ready",))
    except (EOFError, OSError):
        return
    except BaseException as error:
        with contextlib.suppress(Exception):
            conn.send(("failed", _describe(error), traceback.format_exc()))
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        held: list[tuple[Any, ...]] = []

        def send(message: tuple[Any, ...], held: list[tuple[Any, ...]] = held) -> None:
            if message[0] == "result":
                held.append(message)  # sent below, with the worker's health
            else:
                conn.send(message)

        run_candidate(bound, Config.from_dict(message), args, baseline, device, send)
        result = held[-1] if held else ("result", "error", "no result")
        healthy = result[1] in ("ok", "inaccurate", "compile_error") or _device_usable(device)
        conn.send((*result[:3], not healthy))
        if not healthy:
            return  # e.g. an illegal memory access poisoned this CUDA context: retire


def _device_usable(device: torch.device) -> bool:
    try:
        probe = torch.ones(4, device=device)
        probe.add_(1)
        synchronize(device)
        return bool(probe.sum().item() == 8)
    except Exception:
        return False


# ================================================================================ isolation
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
                    if result is not None:
                        results[job.index] = result
                        running.remove(job)
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

    def _poll(self, job: _Job) -> CandidateResult | None:
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


def _kill(process: Any) -> None:
    with contextlib.suppress(Exception):
        if process.is_alive():
            process.kill()
        process.join(timeout=5)


class _ForkRunner(_IsolatedRunner):
    def __init__(
        self, harness: BenchmarkHarness, jobs: int, *, return_output: bool = False
    ) -> None:
        super().__init__(jobs, harness.compile_timeout, harness.run_timeout)
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
            )
        payload = {
            "device": str(h.device),
            "args": _to_device(tuple(h.args), "cpu"),
            "baseline": portable,
            "settings": _codegen_settings(h.settings),
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


def _warning_category(name: str) -> type[Warning]:
    """The warning class named ``module:qualname`` in this process, else ``UserWarning``."""
    module_name, _, qualname = name.partition(":")
    value: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        value = getattr(value, part, None)
    if isinstance(value, type) and issubclass(value, Warning):
        return value
    return UserWarning


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
                with accuracy_rng():
                    output = baseline_fn(*call_args)
                synchronize(self.device)
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
            output, mutated = self._run_default(default)
            return Baseline(output, mutated, atol, rtol, check_fn, source="default config")
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

    def _run_default(self, default: Any) -> tuple[Any, dict[int, Any]]:
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
            output, mutated = runner.outputs[0]
            return _to_device(output, self.device), _to_device(mutated, self.device)
        fn = call_with_timeout(lambda: self.bound.compile_config(default), self.compile_timeout)
        call_args = clone_args(self.args)
        with accuracy_rng():
            try:
                output = call_with_timeout(lambda: fn(*call_args), run_timeout)
            except CandidateTimeout as error:
                self._remember_timeout(default, classify_error(error, "run")[1])
                raise
        synchronize(self.device)
        return _detach_tree(output), mutated_arguments(self.args, call_args)

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
                    problem = self.baseline.check(output, call_args)
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
