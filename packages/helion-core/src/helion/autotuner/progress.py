"""What a person sees while a kernel is tuned: log lines, a progress bar, the winner line, a plot.

* Log lines go to ``logging.getLogger("helion.autotuner")``, filtered by
  ``settings.autotune_log_level`` (0 silences everything).  When nobody configured logging, a
  stderr handler is attached so the lines are visible by default, as in public Helion.
* The rich progress bar shows configs tried / total, failures, the best score so far and
  elapsed time; it is off when ``settings.autotune_progress_bar`` is False, the log level is 0,
  or rich is missing (then a log line is written every few configs instead). The score is what
  the search minimizes (:class:`Score`): a time in ms for ``autotune``, the aggregate over the
  argument sets for ``autotune_multi`` (a ratio with ``relative_to``).
* ``report_winner`` prints the ``@helion.kernel(config=helion.Config(...))`` line to hard-code.
* ``plot_convergence`` writes a PNG of the best time so far vs. configs tried (matplotlib).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any
from typing import Iterable

LOGGER = logging.getLogger("helion.autotuner")


class _FallbackStderrHandler(logging.Handler):
    """Prints autotuner lines when nobody configured logging (as public Helion does by default).

    It stays silent once the root logger has handlers, because the record propagates there.
    ``sys.stderr`` is looked up at emit time so redirected/captured streams are honoured.
    """

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


_fallback_handler: _FallbackStderrHandler | None = None


def _ensure_visible_handler() -> None:
    global _fallback_handler
    if _fallback_handler is None:
        _fallback_handler = _FallbackStderrHandler()
        _fallback_handler.setFormatter(logging.Formatter("[helion.autotuner] %(message)s"))
        LOGGER.addHandler(_fallback_handler)


def _parse_level(raw: object) -> int:
    if raw is None:
        return logging.INFO
    if isinstance(raw, bool):
        return logging.INFO if raw else 0
    if isinstance(raw, int):
        return raw
    text = str(raw).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    level = logging.getLevelName(text.upper())
    return level if isinstance(level, int) else logging.INFO


class AutotuneLog:
    """Level-filtered logging for one autotune run (the settings decide, not the logger's level).

    With ``settings.autotune_log`` set, :meth:`start_file` (called when a search or a
    ``configs=[...]`` benchmark starts, not on a cache hit) opens ``<autotune_log>.log``, and every
    line of the run, debug lines included and whatever ``autotune_log_level`` says, goes there
    too, next to the ``.csv`` of the same run.
    """

    def __init__(self, settings: Any = None, *, kernel_name: str = "") -> None:
        self.level = _parse_level(getattr(settings, "autotune_log_level", logging.INFO))
        self.kernel_name = kernel_name
        self._base_path = getattr(settings, "autotune_log", None)
        self._file: Any = None

    @property
    def file_path(self) -> str | None:
        return f"{os.fspath(self._base_path)}.log" if self._base_path else None

    def start_file(self) -> None:
        """Open (truncate) ``<autotune_log>.log`` for this run; a path that cannot be written
        is reported once and the run goes on without the file."""
        path = self.file_path
        if path is None or self._file is not None:
            return
        try:
            directory = os.path.dirname(path)
            if directory:
                os.makedirs(directory, exist_ok=True)
            self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed in close_file)
        except OSError as error:
            self._base_path = None
            self.warning("could not write the autotune log %s: %s", path, error)

    def close_file(self) -> None:
        if self._file is not None:
            handle, self._file = self._file, None
            with contextlib.suppress(OSError):
                handle.close()

    def _write_file(self, level: int, message: str, args: tuple[object, ...]) -> None:
        try:
            text = message % args if args else message
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            self._file.write(f"{stamp} {logging.getLevelName(level)} {text}\n")
            self._file.flush()
        except Exception:
            self.close_file()

    @property
    def silent(self) -> bool:
        return self.level <= 0

    def enabled(self, level: int) -> bool:
        return not self.silent and level >= self.level

    def __call__(self, level: int, message: str, *args: object) -> None:
        if self._file is not None:
            self._write_file(level, message, args)
        if not self.enabled(level):
            return
        _ensure_visible_handler()
        # bypass the logger's own level: settings.autotune_log_level is the switch that counts
        record = LOGGER.makeRecord(LOGGER.name, level, __file__, 0, message, args, None)
        LOGGER.handle(record)

    def debug(self, message: str, *args: object) -> None:
        self(logging.DEBUG, message, *args)

    def info(self, message: str, *args: object) -> None:
        self(logging.INFO, message, *args)

    def warning(self, message: str, *args: object) -> None:
        self(logging.WARNING, message, *args)


def user_stacklevel() -> int:
    """``stacklevel`` for ``helion.exc.warn`` called from the caller of this function, such
    that the warning names the first frame outside the helion package (the user's call)."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package_root):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def format_ms(ms: float) -> str:
    if not math.isfinite(ms):
        return "-"
    if ms >= 100:
        return f"{ms:.1f} ms"
    if ms >= 1:
        return f"{ms:.3f} ms"
    return f"{ms * 1000:.2f} us"


@dataclass(frozen=True)
class Score:
    """The quantity a search minimizes, as the progress display and the final line name it."""

    #: what precedes the value: "best" for a kernel time, "best geomean vs default", ...
    label: str = "best"
    #: a ratio (shown as ``0.873x``), not milliseconds
    ratio: bool = False

    def format(self, value: float) -> str:
        if not math.isfinite(value):
            return "-"
        return f"{value:.3f}x" if self.ratio else format_ms(value)

    def describe(self, value: float) -> str:
        return f"{self.label} {self.format(value)}"


#: the score of ``autotune``: the kernel's time
TIME = Score()


class AutotuneProgress:
    """Progress of one autotune run: the evaluator calls :meth:`record` once per measured
    config, with the config's score (its time, or ``autotune_multi``'s aggregate)."""

    def __init__(
        self,
        log: AutotuneLog,
        *,
        kernel_name: str,
        total: int,
        enabled: bool = True,
        log_every: int = 10,
        score: Score = TIME,
    ) -> None:
        self.log = log
        self.kernel_name = kernel_name
        self.total = max(1, int(total))
        self.tried = 0
        self.failed = 0
        #: the best score recorded (milliseconds for the default score)
        self.best_ms = math.inf
        self.score = score
        self.log_every = max(1, log_every)
        self.start = time.perf_counter()
        self._bar: Any = None
        self._task: Any = None
        self._want_bar = enabled and not log.silent and log.level <= logging.INFO

    def __enter__(self) -> AutotuneProgress:
        self.start = time.perf_counter()
        if self._want_bar:
            try:
                from rich.console import Console
                from rich.progress import BarColumn
                from rich.progress import MofNCompleteColumn
                from rich.progress import Progress
                from rich.progress import TextColumn
                from rich.progress import TimeElapsedColumn

                self._bar = Progress(
                    TextColumn("[bold]{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TextColumn("failed {task.fields[failed]}"),
                    TextColumn("{task.fields[best]}"),
                    TimeElapsedColumn(),
                    console=Console(file=sys.stderr),
                    transient=False,
                    # no refresh thread: the harness forks screening children, and a thread
                    # holding the terminal's lock at fork time would deadlock a child that prints
                    auto_refresh=False,
                )
                self._bar.start()
                self._task = self._bar.add_task(
                    f"Autotuning {self.kernel_name}",
                    total=self.total,
                    failed=0,
                    best=self.best_text,
                )
            except Exception as error:  # rich missing or no usable console: fall back to log lines
                self.log.debug("progress bar unavailable: %s", error)
                self._bar = None
        return self

    @property
    def best_text(self) -> str:
        """The best score so far as displayed, e.g. ``best 31.84 us`` or
        ``best geomean vs default 0.873x``."""
        return self.score.describe(self.best_ms)

    def record(self, value: float, failed: bool) -> None:
        """One config measured: its score (see :class:`Score`), and whether it failed."""
        self.tried += 1
        if failed:
            self.failed += 1
        elif value < self.best_ms:
            self.best_ms = value
        if self.tried > self.total:
            self.total = self.tried
        if self._bar is not None:
            self._bar.update(
                self._task,
                completed=self.tried,
                total=self.total,
                failed=self.failed,
                best=self.best_text,
            )
            self._bar.refresh()
        elif self.tried % self.log_every == 0:
            self.log.info(
                "%s: %d configs tried, %d failed, %s, %.1fs",
                self.kernel_name,
                self.tried,
                self.failed,
                self.best_text,
                time.perf_counter() - self.start,
            )

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            # the search may stop before its cap: show the bar as complete
            self._bar.update(self._task, completed=self.tried, total=max(self.tried, 1))
            self._bar.stop()
            self._bar = None


def winner_message(bound: Any, config: Any) -> str:
    try:
        decorator = bound.format_kernel_decorator(config)
    except Exception:
        decorator = f"@helion.kernel(config={config!r})"
    return f"One can hardcode the best config and skip autotuning with:\n    {decorator}"


def report_winner(
    log: AutotuneLog, bound: Any, config: Any, summary: dict[str, Any], score: Score = TIME
) -> None:
    """The line that ends a search, then the one that hard-codes the winner. ``summary`` is
    the search's, plus ``seconds``, ``failed`` and the killed candidates: ``timed_out`` (hung
    past their own limit; also counted as failed) and ``stopped`` (unfinished when the time
    budget ran out; not measured)."""
    killed = ""
    if summary.get("timed_out"):
        killed += f", {summary['timed_out']} of them timed out and killed"
    stopped = ""
    if summary.get("stopped"):
        stopped = f", {summary['stopped']} still running at the time budget and killed"
    log.info(
        "%s: autotuning done in %.1fs: %d configs measured (%d failed%s)%s, %s (%s search, seed %s)",
        getattr(getattr(bound, "kernel", None), "name", "kernel"),
        summary.get("seconds", 0.0),
        summary.get("evaluations", 0),
        summary.get("failed", 0),
        killed,
        stopped,
        score.describe(summary.get("best_ms", math.inf)),
        summary.get("search", "?"),
        summary.get("seed", "?"),
    )
    log.info("%s", winner_message(bound, config))


def plot_convergence(
    trials: Iterable[Any], path: str | os.PathLike[str], *, title: str = ""
) -> str | None:
    """PNG of each measured time and the best-so-far curve; returns the path, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except Exception:
        return None
    trials = list(trials)
    xs, ys, best_curve, failures = [], [], [], []
    best = math.inf
    for n, trial in enumerate(trials, start=1):
        ms = float(trial.time_ms)
        if math.isfinite(ms):
            xs.append(n)
            ys.append(ms)
            best = min(best, ms)
        else:
            failures.append(n)
        best_curve.append(best if math.isfinite(best) else float("nan"))
    figure, axis = plt.subplots(figsize=(7, 4), dpi=110)
    try:
        axis.scatter(xs, ys, s=10, alpha=0.45, label="measured")
        axis.plot(
            range(1, len(trials) + 1), best_curve, color="C3", linewidth=2, label="best so far"
        )
        if failures and ys:
            top = max(ys)
            axis.scatter(
                failures, [top] * len(failures), marker="x", color="grey", s=14, label="failed"
            )
        if ys and min(ys) > 0 and max(ys) / min(ys) > 20:
            axis.set_yscale("log")
        axis.set_xlabel("configs measured")
        axis.set_ylabel("time (ms)")
        axis.set_title(title or "autotuning convergence")
        axis.legend(loc="upper right")
        axis.grid(alpha=0.3)
        figure.tight_layout()
        target = os.fspath(path)
        directory = os.path.dirname(target)
        if directory:
            os.makedirs(directory, exist_ok=True)
        figure.savefig(target)
        return target
    finally:
        plt.close(figure)
