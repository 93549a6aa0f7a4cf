"""Autotuner robustness: tensors a kernel writes besides its arguments, candidate processes
outliving a killed tuner, bad `configs=` entries, `helion cache clear` failures, huge timeouts
and the checking of `autotune()` options."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest
import torch

import helion
import helion.language as hl
from helion import cli
from helion import exc
from helion.autotuner import EnumFragment
from helion.autotuner import cache as cache_module
from helion.autotuner.candidate_outcome import call_with_timeout

#: module-level tensors the kernels below write from device code
ACC = torch.zeros(16)
SEEN = torch.zeros(16)


def accumulate(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        ACC[tile] = ACC[tile] + x[tile]
        out[tile] = x[tile] * 2
    return out


def accumulate_and_read(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        ACC[tile] = ACC[tile] + x[tile]
        out[tile] = ACC[tile]
    return out


def record_wrongly(x: torch.Tensor) -> torch.Tensor:
    # mode 1 returns the right output but writes a wrong value into the global
    out = torch.empty_like(x)
    mode = hl.register_tunable("mode", EnumFragment((0, 1)))
    for tile in hl.tile(x.size(0)):
        SEEN[tile] = x[tile] + (mode == 1) * 5.0
        out[tile] = x[tile] + 1
    return out


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + y[tile]
    return out


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("HELION_FORCE_AUTOTUNE", raising=False)
    monkeypatch.delenv("HELION_SKIP_CACHE", raising=False)
    return tmp_path


def quiet_kernel(fn, **settings):  # type: ignore[no-untyped-def]
    settings.setdefault("autotune_log_level", 0)
    settings.setdefault("autotune_progress_bar", False)
    return helion.kernel(fn, backend="ref", autotune_effort="quick", **settings)


# ============================================================================ captured tensors
@pytest.mark.parametrize("precompile", ["fork", None])
def test_tuning_leaves_a_written_global_tensor_as_one_call_would(
    private_cache: Path, precompile: str | None
) -> None:
    """Tuning ran the kernel hundreds of times on the user's module-level tensor: after the
    first call it held the sum of every run (383 instead of 1)."""
    ACC.zero_()
    kernel = quiet_kernel(accumulate, autotune_precompile=precompile)
    x = torch.ones(16)
    kernel.autotune((x,), max_evaluations=4)
    assert torch.equal(ACC, torch.zeros(16)), "Kernel.autotune changed the global"
    torch.testing.assert_close(kernel(x), x * 2)
    assert torch.equal(ACC, torch.ones(16))

    ACC.zero_()
    fresh = quiet_kernel(accumulate, autotune_precompile=precompile, force_autotune=True)
    fresh(x)  # the first call tunes, then runs once
    assert torch.equal(ACC, torch.ones(16))


def test_every_candidate_starts_from_the_globals_the_baseline_saw(private_cache: Path) -> None:
    """A kernel reading back the global it accumulates into: the baseline and the candidates
    saw different values, and good configs were rejected as inaccurate."""
    ACC.zero_()
    kernel = quiet_kernel(accumulate_and_read)
    x = torch.ones(16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel.autotune((x,), max_evaluations=5)
    failed = [w for w in caught if issubclass(w.category, exc.AutotuneCandidateFailed)]
    assert not failed, [str(w.message) for w in failed]
    assert torch.equal(ACC, torch.zeros(16))


def test_a_candidate_writing_a_wrong_global_is_inaccurate(private_cache: Path) -> None:
    SEEN.zero_()
    kernel = quiet_kernel(record_wrongly, autotune_ignore_errors=True)
    x = torch.arange(16.0)
    config = kernel.autotune(
        (x,), configs=[{"block_sizes": [8], "mode": 1}, {"block_sizes": [8], "mode": 0}]
    )
    assert config["mode"] == 0
    assert torch.equal(SEEN, torch.zeros(16))


# ============================================================================ killed tuner
CHILD_SCRIPT = textwrap.dedent(
    """
    import os, sys, time, types
    from helion.autotuner.isolation import _ForkRunner

    class HangingKernel:
        def compile_config(self, config):
            time.sleep(600)  # a candidate that never finishes

    harness = types.SimpleNamespace(
        compile_timeout=600.0, run_timeout=600.0, bound=HangingKernel(), args=(),
        baseline=None, device="cpu", captured=None,
    )
    job = _ForkRunner(harness, 1)._launch(0, {})
    print(job.process.pid, flush=True)
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_candidate_processes_die_with_a_killed_tuner(sig: signal.Signals) -> None:
    """SIGTERM/SIGKILL of the tuning process left a hung candidate spinning forever, holding
    the parent's stdout pipe (a reader waiting for EOF hung too)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    child = None
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        assert _alive(child)
        time.sleep(0.5)  # the child has armed its parent-death signal
        proc.send_signal(sig)
        proc.wait(timeout=30)
        proc.communicate(timeout=30)  # EOF: no orphan holds the pipe
        deadline = time.time() + 10
        while _alive(child) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the candidate outlived the tuning process"
    finally:
        proc.kill()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)


# ============================================================================ RNG lock at fork
RNG_FORK_SCRIPT = textwrap.dedent(
    """
    import sys, threading, time, types, torch
    import helion.autotuner.isolation as iso

    if sys.argv[1] == "no-hook":
        iso._rng_settled_at_fork = True  # as if registered: the fork does not wait for the lock

    class Bound:
        def compile_config(self, config):
            return lambda: torch.ones(3)

    harness = types.SimpleNamespace(
        compile_timeout=60.0, run_timeout=60.0, bound=Bound(), args=(), baseline=None,
        device=torch.device("cpu"), captured=None,
    )
    runner = iso._ForkRunner(harness, 1)
    launches = []
    launch = runner._launch
    runner._launch = lambda i, c: (launches.append(i), launch(i, c))[1]
    drawing = threading.Event()

    def draw():
        drawing.set()
        torch.randn(40_000_000)  # holds the default generator's mutex, without the GIL

    thread = threading.Thread(target=draw)
    thread.start()
    drawing.wait()
    time.sleep(0.02)
    result = runner.run([{}], lambda found_ok: False)[0]
    thread.join()
    print(result.status, len(launches), flush=True)
    """
)


@pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="fork hooks: POSIX")
@pytest.mark.parametrize(("mode", "launches"), [("hook", 1), ("no-hook", 2)])
def test_a_fork_while_another_thread_draws_random_numbers_does_not_hang(
    mode: str, launches: int
) -> None:
    """A forked candidate inherited torch's default CPU generator locked by a thread that does
    not exist in the child, and blocked at its first use until timed out as a hang. The fork
    hook waits for the lock; without it the child ends itself and is forked again."""
    done = subprocess.run(
        [sys.executable, "-c", RNG_FORK_SCRIPT, mode],
        capture_output=True,
        text=True,
        timeout=50,  # a hung child would be timed out after the script's 60 s compile limit
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", str(launches)]


TUNE_BESIDE_RNG_THREAD = textwrap.dedent(
    """
    import threading, torch, helion
    import helion.language as hl

    @helion.kernel(backend="ref", autotune_effort="quick", autotune_progress_bar=False)
    def add(x, y):
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = x[tile] + y[tile]
        return out

    stop = False

    def draw():
        while not stop:
            torch.randn(1000)

    drawer = threading.Thread(target=draw, daemon=True)
    drawer.start()
    x, y = torch.randn(64), torch.randn(64)
    add.autotune((x, y))
    stop = True
    # a daemon thread still inside torch.randn when the interpreter exits aborts the process
    # ("terminate called without an active exception"): let it finish its draw first
    drawer.join()
    """
)


def test_tuning_beside_a_thread_drawing_random_numbers_loses_no_candidate(
    private_cache: Path,
) -> None:
    """Each forked candidate used to block on the inherited generator lock about half the
    time, and good configs were timed out as hangs (3-5 of 7 in a quick search)."""
    script = private_cache / "tune_beside_rng_thread.py"  # kernels need a source file
    script.write_text(TUNE_BESIDE_RNG_THREAD)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HELION_AUTOTUNE_PRECOMPILE": "fork"},
    )
    assert done.returncode == 0, done.stderr
    assert "(0 failed)" in done.stderr, done.stderr


# ============================================================================ bad configs=
@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (None, ["configs[0]", "NoneType"]),
        ("abc", ["configs[0]", "str"]),
        (5, ["configs[0]", "int"]),
        (helion.Config(block_sizes=[3]), ["configs[0]", "power of two"]),
    ],
)
def test_bad_configs_entries_are_invalid_config_naming_position_and_reason(
    private_cache: Path, entry: object, words: list[str]
) -> None:
    kernel = quiet_kernel(add)
    x = torch.randn(16)
    with pytest.raises(exc.InvalidConfig) as info:
        kernel.autotune((x, x), configs=[entry, helion.Config(block_sizes=[8])])
    for word in words:
        assert word in str(info.value)


def test_a_single_config_hint_names_a_real_parameter(private_cache: Path) -> None:
    kernel = quiet_kernel(add)
    x = torch.randn(16)
    with pytest.raises(exc.NotEnoughConfigs) as info:
        kernel.autotune((x, x), configs=[helion.Config(block_sizes=[8])])
    text = str(info.value)
    assert "as config=... instead" not in text  # autotune() has no config= parameter
    assert "helion.kernel(config=" in text


# ============================================================================ cache clear
def test_cache_clear_reports_each_entry_it_cannot_remove_and_goes_on(
    private_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = cache_module.cache_root()
    root.mkdir(parents=True, exist_ok=True)
    (root / "a-1.json").write_text("{}")
    (root / "d-1.json").mkdir()  # cannot be unlinked
    (root / "z-1.json").write_text("{}")
    code = cli.main(["cache", "clear"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_FAILURE
    assert "Traceback" not in err
    assert f"cannot remove {root / 'd-1.json'}" in err
    assert "removed 2 cache entries" in out
    assert not (root / "a-1.json").exists() and not (root / "z-1.json").exists()
    assert not (root / "d-1.json.lock").exists()  # the lock this attempt made is gone

    with pytest.raises(cache_module.CacheClearError) as info:
        cache_module.clear()
    assert info.value.removed == 0 and [p.name for p, _ in info.value.failures] == ["d-1.json"]


# ============================================================================ huge timeouts
@pytest.mark.parametrize("seconds", [1e10, 1e20, float("inf")])
def test_a_huge_timeout_means_no_limit_not_a_dead_watchdog(seconds: float) -> None:
    failures: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)  # type: ignore[assignment]
    try:

        def work() -> int:
            time.sleep(0.2)  # the watchdog thread has started waiting
            return 42

        assert call_with_timeout(work, seconds) == 42
        time.sleep(0.1)
    finally:
        threading.excepthook = previous
    assert not failures, failures


def test_huge_timeout_settings_tune_without_a_thread_traceback(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELION_AUTOTUNE_COMPILE_TIMEOUT", "99999999999999999999")
    monkeypatch.setenv("HELION_AUTOTUNE_BENCHMARK_TIMEOUT", "99999999999999999999")
    failures: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)  # type: ignore[assignment]
    try:
        kernel = quiet_kernel(add, autotune_precompile=None)
        x = torch.randn(16)
        kernel.autotune((x, x), max_evaluations=2)
    finally:
        threading.excepthook = previous
    assert not failures, failures


# ============================================================================ options
@pytest.mark.parametrize("seed", ["abc", 1.7, True, -5])
def test_seed_must_be_an_int(private_cache: Path, seed: object) -> None:
    kernel = quiet_kernel(add)
    x = torch.randn(16)
    with pytest.raises(exc.InvalidSetting, match="seed"):
        kernel.autotune((x, x), seed=seed, max_evaluations=2)


def test_unknown_options_are_refused_even_on_a_cache_hit(private_cache: Path) -> None:
    kernel = quiet_kernel(add)
    x = torch.randn(16)
    kernel.autotune((x, x), max_evaluations=2, seed=3)  # stores the entry
    with pytest.raises(exc.InvalidSetting) as info:
        kernel.autotune((x, x), force=False, max_evals=5)
    assert "max_evals" in str(info.value) and "max_evaluations" in str(info.value)
    with pytest.raises(exc.InvalidSetting, match="seed"):
        kernel.autotune((x, x), force=False, seed="abc")
    with pytest.raises(exc.InvalidSetting, match="copies"):
        kernel.autotune((x, x), search="random", copies=2)
    assert kernel.autotune((x, x), search="pattern", copies=2, max_evaluations=2)


# ============================================================================ best of k
def test_best_of_k_searches_share_the_budget(private_cache: Path) -> None:
    """autotune_best_of_k=3 with a 6 s budget: the three searches get the budget between them
    (each got the whole of it: 11 s for a 4 s budget), the first about a third of it."""
    from helion.autotuner.search import RandomSearch

    budgets: list[tuple[float, float]] = []  # (when the search started, its budget)

    class Recording(RandomSearch):
        def run(self):  # type: ignore[no-untyped-def]
            budgets.append((time.perf_counter(), self.budget_seconds))
            return super().run()

    kernel = quiet_kernel(add, autotune_best_of_k=3, autotune_precompile=None)
    x = torch.randn(67)
    kernel.autotune((x, x), search=Recording, budget_seconds=6.0, max_evaluations=4, force=True)
    assert len(budgets) == 3
    first_start, first_budget = budgets[0]
    assert 1.0 < first_budget <= 2.0 + 1e-9
    for start, budget in budgets:  # no search may run past the one budget (timed from the
        assert (start - first_start) + budget <= 6.0 + 0.05  # search's start, not the bind)


def test_a_failed_candidate_reason_names_the_cause_not_the_generated_source() -> None:
    from helion.autotuner.candidate_outcome import classify_error

    source = "# generated by helion-triton for kernel 'matmul'\n" + "x = 1\n" * 200
    try:
        try:
            raise RuntimeError("out of resource: shared memory, Required: 294912")
        except RuntimeError as cause:
            raise helion.exc.TritonError(source, f"OutOfResources: {cause}") from cause
    except helion.exc.TritonError as error:
        status, reason = classify_error(error, "compile")
    assert status == "compile_error"
    assert reason.startswith("TritonError: RuntimeError: out of resource: shared memory")
    assert "generated by helion-triton" not in reason
