"""Timing a candidate: a device :func:`synchronize`, and :func:`do_bench` (CUDA events with
the L2 cache flushed before each run, or the wall clock with a synchronize after each), with
the repeat count sized to a target time."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


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
