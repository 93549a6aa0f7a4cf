"""The child side of isolated screening: what runs in a forked child or a spawned worker.

A child compiles and runs one candidate (:func:`run_candidate`) and reports to the parent on a
pipe: ``("compiled", seconds)``, with ``return_output`` an ``("output", bytes)``, the warnings
it raised as ``("warnings", [...])``, and last ``("result", status, reason)``, to which a
spawned worker adds whether it must retire. A spawned worker first answers ``("ready",)`` or
``("failed", reason, traceback)``. The parent side is :mod:`helion.autotuner.isolation`.

Spawned workers load :func:`_spawn_worker_main` from this module by its qualified name, and the
payload they read holds a pickled :class:`~helion.autotuner.accuracy.Baseline`: both must stay
importable where they are.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
import traceback
import warnings
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion.autotuner.accuracy import Baseline
from helion.autotuner.accuracy import CapturedTensors
from helion.autotuner.accuracy import _detach_tree
from helion.autotuner.accuracy import _to_device
from helion.autotuner.accuracy import accuracy_rng
from helion.autotuner.accuracy import clone_args
from helion.autotuner.accuracy import mutated_arguments
from helion.autotuner.candidate_outcome import _describe
from helion.autotuner.candidate_outcome import classify_error
from helion.autotuner.timing import synchronize


def run_candidate(
    bound: Any,
    config: Any,
    args: Sequence[Any],
    baseline: Baseline | None,
    device: torch.device,
    send: Callable[[tuple[Any, ...]], None],
    *,
    return_output: bool = False,
    captured: CapturedTensors | None = None,
) -> None:
    """Compile and run one config once, reporting through ``send``:

    ``("compiled", seconds)`` after compiling, then ``("result", status, reason)`` and, with
    ``return_output``, ``("output", bytes of (output, mutated_args, captured values))`` before
    it.  ``captured``: the tensors the kernel writes besides its arguments, as this process
    sees them (compared with the baseline's values after the run; the caller restores them).
    Used by the isolated screening children and workers.

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
        bound,
        config,
        args,
        baseline,
        device,
        send_warnings_first,
        return_output=return_output,
        captured=captured,
    )


#: a screening child's warnings, kept for the parent (see :func:`_keep_warnings`)
_kept_warnings: list[tuple[str, str, str, int]] = []


def _portable_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int | None
) -> tuple[str, str, str, int]:
    """A warning as plain data: ``("module:qualname" of its class, text, filename, line)``."""
    name = f"{category.__module__}:{category.__qualname__}"
    return name, str(message), str(filename), int(lineno or 0)


def _warning_category(name: str) -> type[Warning]:
    """The warning class named ``module:qualname`` in this process, else ``UserWarning``."""
    module_name, _, qualname = name.partition(":")
    value: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        value = getattr(value, part, None)
    if isinstance(value, type) and issubclass(value, Warning):
        return value
    return UserWarning


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
    captured: CapturedTensors | None = None,
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
            left = captured.values() if captured is not None else []
            result = (_detach_tree(output), mutated_arguments(args, call_args), left)
            send(("output", _to_bytes(result)))
        if baseline is not None:
            problem = baseline.check(
                output, call_args, captured.current() if captured is not None else None
            )
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


#: ``prctl`` option: the signal a process gets when its parent dies (linux/prctl.h)
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None) -> bool:
    """Make this child process end when ``parent_pid`` (the tuning process) dies, however it
    dies: SIGTERM and SIGKILL (``timeout``, ``scancel``, ``docker stop``, the OOM killer)
    run none of the parent's exit handlers, and a candidate that hangs would otherwise spin
    forever, reparented to init, holding the device and the inherited stdout/stderr pipe (a
    reader waiting for their end hangs too).

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``; a parent that died before that call is found
    by ``os.getppid()`` no longer being it, and this process exits at once. Elsewhere nothing
    is set (returns False); the parent's exit handlers still reap children it exits through.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        # the process's own symbols hold libc's prctl (no find_library: it runs ldconfig)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except Exception:
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the signal was armed: nobody reads our result
    return True


def _close_inherited_stdio() -> None:
    """Point this child's stdin at /dev/null: it never reads it, and holding the parent's
    stdin open keeps a pipe into the tuning process alive after that process is gone."""
    with contextlib.suppress(Exception):
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)


#: how long a forked child waits for torch's default CPU generator before it gives up (a free
#: lock is taken in microseconds)
INHERITED_LOCK_WAIT = 2.0


def wait_for_inherited_rng_lock(seconds: float = INHERITED_LOCK_WAIT) -> None:
    """End this forked child with SIGALRM if torch's default CPU generator stays locked.

    The child inherits the generator's mutex as it was at the fork: if another thread of the
    parent held it (drawing random numbers without the GIL), its owner does not exist here and
    the first use (the accuracy check seeds it; in-kernel `torch.rand` draws its seed from it)
    would block forever, to be timed out as a hang. A blocked ``pthread_mutex_lock`` runs no
    Python signal handler, so the alarm's default action ends the process; the parent sees
    SIGALRM before "compiled" and forks the candidate again
    (:meth:`helion.autotuner.isolation._IsolatedRunner.run`)."""
    previous = signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        torch.default_generator.get_state()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _fork_child_main(
    conn: Any,
    bound: Any,
    config: Any,
    args: Any,
    baseline: Any,
    device: Any,
    return_output: bool,
    parent_pid: int | None = None,
    captured: CapturedTensors | None = None,
) -> None:
    die_with_parent(parent_pid)
    _close_inherited_stdio()
    # one thread per child: several children share the cores, and a forked OpenMP pool is unsafe
    with contextlib.suppress(Exception):
        torch.set_num_threads(1)
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _quiet_crash_reports()
    wait_for_inherited_rng_lock()
    _keep_warnings()
    try:
        run_candidate(
            bound,
            config,
            args,
            baseline,
            device,
            conn.send,
            return_output=return_output,
            captured=captured,
        )
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


def _spawn_worker_main(
    conn: Any, module_name: str, qualname: str, parent_pid: int | None = None
) -> None:
    """A long-lived screening worker in a fresh (spawned) interpreter, used for CUDA kernels.

    It imports the kernel's module first (the slow part, overlapping the parent's baseline
    run), then waits for ``("payload", path)`` with the arguments and baseline, binds the
    kernel and answers ``("ready",)``; after that each message is a config to screen. It dies
    with the tuning process (:func:`die_with_parent`).
    """
    die_with_parent(parent_pid)
    _close_inherited_stdio()
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
        captured = CapturedTensors.of(bound, args)
        captured.load(_to_device(list(payload.get("captured") or []), device))
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

        try:
            run_candidate(
                bound, Config.from_dict(message), args, baseline, device, send, captured=captured
            )
        finally:
            captured.restore()  # the next candidate starts from the tuning process's values
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
