"""The Pallas backend's call path on a GPU: per-call time with and without host waits and with
and without outputs' initial values, the steps of a warm call, and the stream ordering that
replaced the waits checked under load.

    python benchmarks/pallas_call_probe.py [--calls 200] [--rounds 300]

helion-pallas hands tensors to JAX and results back to torch through DLPack, whose stream
handshake orders JAX's stream after torch's and torch's after JAX's. Before that, each call
waited on the host twice (torch's stream before the kernel, JAX's results after it); the rows
"host waits" put those waits back around the same call (`torch.cuda.synchronize()` before and
after) to show what they cost. The rows "initial passed" run the kernels compiled as before
b6cc0df, with every written tensor's value passed in and aliased to its output (XLA copies it
first). Per row: host time per call (N calls back to back, no sync), wall time per call (the
same N calls, then a sync), and device-event time per call. The Triton backend and torch eager
run the same computation in the same process.

The breakdown times each step of a warm call of the Pallas add alone and inside back-to-back
calls, and lists the copies and custom calls of both variants' optimized HLO. The ordering
checks run many calls without a host wait between them, each on fresh torch inputs made just
before behind a queue of torch work (and memory freed just after), and compare every result at
the end.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time
from pathlib import Path
from typing import Any
from typing import Callable
from typing import Iterator

import torch

import helion


def pallas_test_kernels() -> Any:
    """The Pallas package's test kernels (plain functions, wrapped per backend here)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages/helion-pallas/tests"))
    import pallas_kernels

    return pallas_kernels


def per_call(fn: Callable[[], Any], calls: int) -> tuple[float, float, float]:
    """(host µs, wall µs, device µs) per call over `calls` back-to-back calls."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    began = time.perf_counter()
    for _ in range(calls):
        fn()
    issued = time.perf_counter()
    end.record()
    torch.cuda.synchronize()
    done = time.perf_counter()
    return (
        (issued - began) / calls * 1e6,
        (done - began) / calls * 1e6,
        start.elapsed_time(end) / calls * 1e3,
    )


def with_host_waits(fn: Callable[[], Any]) -> Callable[[], Any]:
    def waited() -> Any:
        torch.cuda.synchronize()
        result = fn()
        torch.cuda.synchronize()
        return result

    return waited


@contextlib.contextmanager
def passing_initial_values(enabled: bool) -> Iterator[None]:
    """Compile Pallas kernels as if no call overwrote a tensor whole (inside the block)."""
    from helion_pallas import memory

    original = memory.overwrites_every_element
    if enabled:
        memory.overwrites_every_element = lambda *args: False
    try:
        yield
    finally:
        memory.overwrites_every_element = original


def timing_rows(calls: int) -> list[tuple[str, str, float, float, float]]:
    device = torch.device("cuda")
    fns = pallas_test_kernels()
    kernels = {
        backend: {
            "add": helion.kernel(fns.add, backend=backend, autotune_effort="none"),
            "rms_norm": helion.kernel(fns.rms_norm, backend=backend, autotune_effort="none"),
        }
        for backend in ("pallas", "triton")
    }
    # the same Pallas kernels compiled as before b6cc0df: every written tensor's initial value
    # passed in and aliased to its output, which XLA copies first
    kernels["pallas_initial"] = {
        name: helion.kernel(fn, backend="pallas", autotune_effort="none")
        for name, fn in (("add", fns.add), ("rms_norm", fns.rms_norm))
    }
    cases = [
        (
            "add 1000x1000 f32",
            "add",
            torch.add,
            (torch.randn(1000, 1000, device=device), torch.randn(1000, 1000, device=device)),
        ),
        (
            "add 8192x8192 bf16",
            "add",
            torch.add,
            (
                torch.randn(8192, 8192, device=device, dtype=torch.bfloat16),
                torch.randn(8192, 8192, device=device, dtype=torch.bfloat16),
            ),
        ),
        (
            "add 16384x8192 bf16",
            "add",
            torch.add,
            (
                torch.randn(16384, 8192, device=device, dtype=torch.bfloat16),
                torch.randn(16384, 8192, device=device, dtype=torch.bfloat16),
            ),
        ),
        (
            "rms_norm 4096x4096 bf16",
            "rms_norm",
            fns._rms_norm_reference,
            (
                torch.randn(4096, 4096, device=device, dtype=torch.bfloat16),
                torch.randn(4096, device=device, dtype=torch.bfloat16),
            ),
        ),
    ]
    rows = []
    for label, name, reference, args in cases:
        expected = reference(*args)
        for backend, table in kernels.items():
            with passing_initial_values(backend == "pallas_initial"):
                got = table[name](*args)  # compiles this shape
            torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
        pallas = functools.partial(kernels["pallas"][name], *args)
        runs = {
            "pallas, stream-ordered": pallas,
            "pallas, initial passed": functools.partial(kernels["pallas_initial"][name], *args),
            "pallas, host waits": with_host_waits(pallas),
            "triton": functools.partial(kernels["triton"][name], *args),
            "torch eager": functools.partial(reference, *args),
        }
        for how, fn in runs.items():
            fn()
            samples = [per_call(fn, calls) for _ in range(3)]
            best = min(samples, key=lambda s: s[1])
            rows.append((label, how, *best))
    return rows


def ordering_checks(rounds: int) -> list[tuple[str, int, int]]:
    """(check, rounds, wrong rounds): calls without host waits between them."""
    device = torch.device("cuda")
    fns = pallas_test_kernels()
    add = helion.kernel(fns.add, backend="pallas", autotune_effort="none")
    histogram = helion.kernel(fns.histogram, backend="pallas", autotune_effort="none")
    results = []
    # a queue of torch work ahead of each round's inputs: were JAX not ordered after torch's
    # stream, it would read the inputs before torch wrote them
    busy = torch.randn(4096, 4096, device=device)

    # fresh inputs written by torch just before each call; the input freed right after, its
    # memory handed by torch's allocator to the next round's tensors
    pending = []
    for _ in range(rounds):
        busy @ busy
        x = torch.randn(3001, 517, device=device)
        y = torch.randn(3001, 517, device=device)
        out = add(x, y)
        pending.append((out, x + y))
        del x
        torch.full((3001, 517), 7.0, device=device)  # likely lands on x's old memory
    wrong = sum(not torch.equal(out, want) for out, want in pending)
    results.append(("add: fresh inputs, freed after", rounds, wrong))

    # an accumulated output: the host code's torch.zeros must land before the atomics, on
    # memory the previous round's counts just left
    pending = []
    for _ in range(rounds):
        busy @ busy
        x = torch.rand(200_003, device=device)
        counts = histogram(x, 37)
        want = torch.bincount((x * 37).long().clamp(0, 36), minlength=37).to(torch.int32)
        pending.append((counts, want))
    wrong = sum(not torch.equal(c, w) for c, w in pending)
    results.append(("histogram: zeros, atomics, reused memory", rounds, wrong))

    # a result read by torch right away, then overwritten in place by torch
    wrong = 0
    y = torch.randn(2049, 1031, device=device)
    for _ in range(rounds):
        busy @ busy
        x = torch.randn(2049, 1031, device=device)
        out = add(x, y)
        total = out.sum()
        out.mul_(0)
        if not torch.allclose(total, (x + y).sum(), rtol=1e-4, atol=1e-2):
            wrong += 1
    results.append(("add: result read, then overwritten", rounds, wrong))
    return results


def host_us(fn: Callable[[], Any], calls: int) -> float:
    """Host µs per call of `fn` over `calls` back-to-back calls (best of 3)."""
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - began) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def hlo_ops(compiled: Any) -> list[str]:
    """The copies and custom calls (the Pallas kernels) of a compiled kernel's optimized HLO: an
    output aliased to an input JAX does not own is copied into a buffer of XLA's first."""
    kept = []
    for line in compiled._executable.as_text().splitlines():
        text = line.strip()
        if " copy(" in text or "custom-call(" in text or "copy-start(" in text:
            kept.append(text[:150])
    return kept


def compiled_call(kernel: Any, args: tuple) -> tuple[Any, tuple]:
    """The `PallasCompiledKernel` a call of `kernel` runs, and the host values it gets."""
    from helion_pallas import launcher

    seen = []
    original = launcher.PallasCompiledKernel.__call__

    def spy(self: Any, *values: Any) -> None:
        seen.append((self, values))
        original(self, *values)

    launcher.PallasCompiledKernel.__call__ = spy
    try:
        kernel(*args)
    finally:
        launcher.PallasCompiledKernel.__call__ = original
    return seen[0]


def breakdown(calls: int) -> tuple[list[tuple[str, float]], list[str]]:
    """Host µs of each step of a warm call of the Pallas add on 1000x1000 float32."""
    import jax

    from helion_pallas import launcher

    device = torch.device("cuda")
    add = helion.kernel(pallas_test_kernels().add, backend="pallas", autotune_effort="none")
    x, y = (torch.randn(1000, 1000, device=device) for _ in range(2))
    compiled, values = compiled_call(add, (x, y))
    with passing_initial_values(True):
        add_initial = helion.kernel(
            pallas_test_kernels().add, backend="pallas", autotune_effort="none"
        )
        initial_compiled, _ = compiled_call(add_initial, (x, y))
    tensors = [values[p] for p in compiled._tensor_positions]
    written = [values[p] for p in compiled._written_positions]
    with jax.enable_x64(True):
        arrays = compiled._import(tensors)
        results = compiled._executable(*arrays)
    stream = jax.devices("gpu")[0].get_stream_for_external_ready_events()

    def convert_in() -> None:
        with jax.enable_x64(True):
            compiled._import(tensors)

    def execute() -> None:
        with jax.enable_x64(True):
            compiled._executable(*arrays)

    def launcher_public_import() -> float:
        lean, compiled._import._import = compiled._import._import, None
        try:
            return host_us(lambda: compiled(*values), calls)
        finally:
            compiled._import._import = lean

    def in_sequence() -> list[tuple[str, float]]:
        """The launcher's three steps timed inside back-to-back calls (µs per call)."""
        spent = [0.0, 0.0, 0.0]
        torch.cuda.synchronize()
        for _ in range(calls):
            began = time.perf_counter()
            with jax.enable_x64(True):
                fresh = compiled._import(tensors)
                imported = time.perf_counter()
                out = compiled._executable(*fresh)
            executed = time.perf_counter()
            launcher.hand_back(out, written)
            done = time.perf_counter()
            spent[0] += imported - began
            spent[1] += executed - imported
            spent[2] += done - executed
        torch.cuda.synchronize()
        steps = ("import", "execute", "hand back")
        return [
            (f"  in sequence: {step}", t / calls * 1e6)
            for step, t in zip(steps, spent, strict=True)
        ]

    steps = [
        ("kernel(x, y): the whole warm call", host_us(lambda: add(x, y), calls)),
        *in_sequence(),
        ("compiled(*values): the launcher", host_us(lambda: compiled(*values), calls)),
        ("  the same through jax.dlpack.from_dlpack", launcher_public_import()),
        (f"import of its {len(tensors)} tensors", host_us(convert_in, calls)),
        ("  one jax.dlpack.from_dlpack", host_us(lambda: jax.dlpack.from_dlpack(x), calls)),
        ("  one torch __dlpack__(no wait)", host_us(lambda: x.__dlpack__(stream=-1), calls)),
        ("  one torch __dlpack__(stream)", host_us(lambda: x.__dlpack__(stream=stream), calls)),
        ("the compiled executable", host_us(execute, calls)),
        (
            "hand_back (from_dlpack + copy_)",
            host_us(lambda: launcher.hand_back(results, written), calls),
        ),
        ("  one torch.from_dlpack", host_us(lambda: torch.from_dlpack(results[0]), calls)),
        ("torch.empty_like (host code)", host_us(lambda: torch.empty_like(x), calls)),
    ]
    return steps, [
        *(f"no initial value: {op}" for op in hlo_ops(compiled)),
        *(f"initial value passed: {op}" for op in hlo_ops(initial_compiled)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=300)
    options = parser.parse_args()
    torch.manual_seed(0)
    checks = ordering_checks(options.rounds)
    steps, ops = breakdown(options.calls)
    rows = timing_rows(options.calls)
    print(f"{torch.cuda.get_device_name()}: {options.calls} calls a sample, best of 3 by wall")
    print(f"{'case':26s} {'path':24s} {'host µs':>9s} {'wall µs':>9s} {'device µs':>10s}")
    for label, how, host, wall, device in rows:
        print(f"{label:26s} {how:24s} {host:9.1f} {wall:9.1f} {device:10.1f}")
    print()
    print("host µs per step of a warm Pallas call (add 1000x1000 f32):")
    for step, micros in steps:
        print(f"  {step:44s} {micros:9.1f}")
    print("its optimized HLO's copies and custom calls:")
    for op in ops:
        print(f"  {op}")
    print()
    for check, rounds, wrong in checks:
        print(f"ordering: {check:42s} {rounds - wrong}/{rounds} right")
    if any(wrong for _, _, wrong in checks):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
