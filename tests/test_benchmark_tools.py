"""The GPU benchmark tools' own logic, on the CPU: what they read from the autotuner's logs."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import helion
import helion.language as hl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import pick_stability


@helion.kernel(
    backend="ref", autotune_effort="quick", autotune_progress_bar=False, autotune_log_level=0
)
def scaled_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * 2.0 + y[tile]
    return out


def test_pick_stability_reads_what_the_search_measured(tmp_path: Path) -> None:
    x, y = torch.randn(37, 29), torch.randn(37, 29)
    bound = scaled_add.bind((x, y))
    bound.settings.autotune_log = str(tmp_path / "run0")
    bound.settings.autotune_random_seed = 3
    pick = bound.autotune((x, y), force=True, max_evaluations=6)
    torch.testing.assert_close(scaled_add(x, y), x * 2.0 + y)
    log = pick_stability.read_log(tmp_path / "run0.csv")
    assert 2 <= len(log["first"]) <= 6
    assert sorted(log["rank"].values()) == list(range(1, len(log["first"]) + 1))
    fastest_first = min(log["first"], key=log["first"].get)
    assert log["rank"][fastest_first] == 1
    # the pick is the re-benchmark's fastest, or the first pass's when nothing was re-timed
    key = pick_stability.config_text(pick)
    if log["again"]:
        assert key == min(log["again"], key=log["again"].get)
    else:
        assert key == fastest_first
    assert pick_stability.config_text(pick.to_json()) == key


def test_pick_stability_reads_the_rebenchmark_rows(tmp_path: Path) -> None:
    from helion.autotuner.benchmarking import BenchmarkHarness

    x, y = torch.randn(37, 29), torch.randn(37, 29)
    bound = scaled_add.bind((x, y))
    bound.settings.autotune_log = str(tmp_path / "harness")
    configs = [helion.Config(block_sizes=[8, 16]), helion.Config(block_sizes=[16, 8])]
    with BenchmarkHarness(bound, (x, y), isolation="inprocess") as harness:
        first = harness.evaluate(configs)
        again = harness.rebenchmark(configs, rounds=2)
    log = pick_stability.read_log(tmp_path / "harness.csv")
    keys = [pick_stability.config_text(c) for c in configs]
    assert [log["first"][k] for k in keys] == [round(t, 6) for t in first]
    assert [log["again"][k] for k in keys] == [round(t, 6) for t in again]
    assert log["failed"] == 0 and log["failures"] == []


def test_pick_stability_races_what_each_run_rebenchmarked(tmp_path: Path) -> None:
    from helion.autotuner.benchmarking import BenchmarkHarness

    x, y = torch.randn(37, 29), torch.randn(37, 29)
    bound = scaled_add.bind((x, y))
    bound.settings.autotune_log = str(tmp_path / "run0")
    timed = [
        helion.Config(block_sizes=[8, 16]),
        helion.Config(block_sizes=[16, 8]),
        helion.Config(block_sizes=[4, 32]),
    ]
    with BenchmarkHarness(bound, (x, y), isolation="inprocess") as harness:
        harness.evaluate(timed)
        harness.rebenchmark(timed, rounds=2)
    log = pick_stability.read_log(tmp_path / "run0.csv")
    assert len(log["again"]) == 3
    pick = bound.normalize(timed[2])
    seeds = [bound.config_spec.default_config(), *bound.seed_configs()]
    extra = helion.Config(block_sizes=[1, 32], num_warps=2)
    candidates, labels = pick_stability.candidate_set([pick], seeds, [log], [extra])
    assert set(candidates) == set(labels)
    # every re-benchmarked config is raced, as a Config the bound kernel can compile
    assert set(log["again"]) <= set(candidates)
    for key in log["again"]:
        assert pick_stability.config_text(candidates[key]) == key
        torch.testing.assert_close(bound.compile_config(candidates[key])(x, y), x * 2.0 + y)
    assert labels[pick_stability.config_text(pick)].startswith("pick0")
    assert labels[pick_stability.config_text(extra)].endswith("extra0")
    if len(seeds) > 1:
        assert "seed1" in labels[pick_stability.config_text(seeds[1])]
    # the benchmarks' times in the reverse of the search's order
    order = sorted(log["again"], key=log["again"].get)
    final = {key: float(len(order) - i) for i, key in enumerate(order)}
    rows = pick_stability.tuner_vs_final(log, final, labels)
    assert [r["tuner_rank"] for r in rows] == list(range(1, len(order) + 1))
    assert [r["final_rank"] for r in rows] == list(range(len(order), 0, -1))
    assert [r["tuner_ms"] for r in rows] == sorted(log["again"].values())
    # a config the race could not time (it failed there) is left out, not ranked
    del final[order[0]]
    rows = pick_stability.tuner_vs_final(log, final, labels)
    assert [r["final_rank"] for r in rows] == [2, 1]


def _sm90_report(tmp_path: Path, benches: str) -> tuple[str, dict[str, tuple[int, str, str]]]:
    """Run benchmarks/sm90_compile_check.py on run.py's kernels ``benches``: its output, and per
    recorded case (spills, the access column, the whole line)."""
    import re
    import subprocess

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [
            sys.executable,
            str(root / "benchmarks" / "sm90_compile_check.py"),
            "check",
            str(tmp_path),
            "--benches",
            benches,
            "--resources",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"(\d+) of \1 compiled for cuda:90", done.stdout), done.stdout[-500:]
    rows = {}
    for line in done.stdout.splitlines():
        match = re.match(r"(\w+_\d+)\s+(\d+)\s+(\d+)\s+\d+\s+(ld .*?)\s+helion\.Config", line)
        if match:
            rows[match.group(1)] = (int(match.group(3)), match.group(4), line)
    return done.stdout, rows


def test_matmul_seeds_compile_for_hopper_to_tma_and_warpgroup_mma(tmp_path: Path) -> None:
    """The matmul seeds at 4096^3 bf16 (every seed; the default config has no TMA) load through
    TMA, multiply with wgmma and do not spill, compiled for sm_90 on this machine."""
    import re

    output, rows = _sm90_report(tmp_path, "matmul")
    # the tool records each seed, then the default config last (no random ones asked for)
    last = max(rows, key=lambda name: int(name.rsplit("_", 1)[1]))
    seeds = {case: row for case, row in rows.items() if case != last}
    assert len(seeds) >= 4, output[-2000:]
    for spills, accesses, line in seeds.values():
        assert spills == 0, line
        assert re.search(r"\btma [1-9]", accesses) and re.search(r"\bwgmma [1-9]", accesses), line
    assert all(re.search(r"\bwgmma [1-9]", row[1]) for row in rows.values()), output[-2000:]


def test_seeds_compile_for_hopper_with_wide_accesses_and_no_spills(tmp_path: Path) -> None:
    """The add and softmax seeds at run.py's sizes, compiled for sm_90 on this machine (Triton
    needs no GPU for that), move 16 bytes per access (the bf16 seeds with 8 elements a thread)
    and do not spill. A code generator change that loses Triton's alignment hints, or adds a
    mask where none is needed, shows up here as narrower accesses."""
    import re

    output, rows = _sm90_report(tmp_path, "add,softmax")
    assert len(rows) >= 10, output[-2000:]
    for case, (spills, accesses, line) in rows.items():
        assert spills == 0, line
        widths = set(re.findall(r"(\d+)x\d+", accesses))
        config = re.search(r"block_sizes=\[([\d, ]+)\].*?num_warps=(\d+)", line)
        numel = 1
        for size in config.group(1).split(","):
            numel *= int(size)
        if case.startswith("add") and numel // (32 * int(config.group(2))) >= 8:
            assert widths == {"128"}, line
        if case.startswith("softmax"):  # rows of 8192 bf16: every seed has 16 elements a thread
            assert widths == {"128"}, line


def test_host_path_standin_takes_the_direct_launch_path(monkeypatch, capsys) -> None:
    """The stand-in of the host overhead runs the real warm path (it exits when the direct
    launch path is not taken); timed with few calls here, and it puts `is_cuda` back."""
    import host_path_standin

    timed = []
    monkeypatch.setattr(
        host_path_standin,
        "per_call_us",
        lambda fn: timed.append(fn) or ([fn() for _ in range(3)] and 1.0),
    )
    host_path_standin.main()
    assert len(timed) == 5 and "the whole warm call" in capsys.readouterr().out
    assert not torch.randn(3).is_cuda


def test_timer_takes_a_known_flush_mode_and_times_on_the_cpu() -> None:
    import pytest
    from _timing import Timer

    with pytest.raises(ValueError, match="flush must be one of"):
        Timer(torch.device("cpu"), flush="none")
    calls = []
    ms = Timer(torch.device("cpu"), flush="read").median_ms(
        lambda: calls.append(1), min_repeat=3, max_repeat=3
    )
    assert ms >= 0 and len(calls) == 5  # two calls to size the repeat count, then three samples


def test_launch_overhead_reports_the_warm_path_it_takes(monkeypatch, capsys) -> None:
    """`launch_overhead._warm_path` finds tiny_add's warm call and its own guarded launch (not
    another kernel's) and says whether their tensor matches take these tensors; CPU tensors here."""
    import launch_overhead

    monkeypatch.setattr(launch_overhead, "per_call_us", lambda fn: [fn(), 0.0][1])
    x, y = torch.randn(1000), torch.randn(1000)
    for _ in range(3):  # the first call, the guarded launch's wiring, the warm call
        torch.testing.assert_close(launch_overhead.tiny_add(x, y), x + y)
    launch_overhead.tiny_add_via_wrapper(x, y)  # another kernel's guarded launch: not reported
    launch_overhead.tiny_add_via_wrapper(x, y)
    rows = launch_overhead._warm_path(x, y)
    out = capsys.readouterr().out
    assert "the warm call takes (x, y): True; its tensor match: True" in out
    assert out.count("a guarded launch's match of a fresh output: True") == 1
    assert {
        "  the warm call (x, y)",
        "  its keyed runner (x, y)",
        "  guarded launch's match (out)",
    } <= set(rows)


def test_tune_writes_the_search_log_under_the_given_directory(tmp_path: Path) -> None:
    import run

    x, y = torch.randn(37, 5), torch.randn(37, 5)
    compiled, _config, _ = run._tune(
        scaled_add, (x, y), None, "quick", str(tmp_path / "logs"), "row"
    )
    torch.testing.assert_close(compiled(x, y), x * 2.0 + y)
    assert (tmp_path / "logs" / "row.csv").is_file()


def test_pallas_call_probe_compiles_the_add_with_and_without_an_initial_value() -> None:
    """The probe's "initial value passed" rows compile the kernel as before b6cc0df; the patch
    holds only inside its block, and the compiled kernels it catches run."""
    import pallas_call_probe

    from helion_pallas import memory

    fns = pallas_call_probe.pallas_test_kernels()
    x, y = torch.randn(100, 37), torch.randn(100, 37)
    plain = helion.kernel(fns.add, backend="pallas", autotune_effort="none")
    compiled, values = pallas_call_probe.compiled_call(plain, (x, y))
    original = memory.overwrites_every_element
    with pallas_call_probe.passing_initial_values(True):
        passing = helion.kernel(fns.add, backend="pallas", autotune_effort="none")
        initial_compiled, _ = pallas_call_probe.compiled_call(passing, (x, y))
    assert memory.overwrites_every_element is original
    assert "(initial value)" not in compiled.source
    assert "(initial value)" in initial_compiled.source
    assert pallas_call_probe.hlo_ops(compiled) and pallas_call_probe.hlo_ops(initial_compiled)
    torch.testing.assert_close(passing(x, y), x + y)
    out = values[compiled._written_positions[0]]
    torch.testing.assert_close(out, x + y)
