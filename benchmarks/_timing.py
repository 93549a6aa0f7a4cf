"""GPU timing shared by the benchmarks: device events, an L2 flush before every sample, medians,
and the two rooflines every report is a ratio to (copy bandwidth and cuBLAS bf16 peak), measured
in the same run."""

from __future__ import annotations

import statistics
import time
from typing import Any
from typing import Callable

import torch

_L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than the H200's 50 MB L2


FLUSH_MODES = ("write", "read")


class Timer:
    """``flush``: how the L2 is emptied before each sample. ``write`` zeroes a buffer larger
    than the L2 (as Triton's do_bench does), which leaves the L2 full of dirty lines: the timed
    kernel then pays for writing them back, a fixed cost of up to 50 MB of write traffic that
    a short kernel feels most. ``read`` reads that buffer instead, so the L2 holds clean lines
    (dropped for free) and the sample holds only the kernel's own traffic."""

    def __init__(self, device: torch.device, flush: str = "write") -> None:
        if flush not in FLUSH_MODES:
            raise ValueError(f"flush must be one of {FLUSH_MODES}, not {flush!r}")
        self.device = device
        self.cuda = device.type == "cuda"
        self.flush_mode = flush
        self._flush = (
            torch.zeros(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
            if self.cuda
            else None
        )

    def flush(self) -> None:
        if self.flush_mode == "write":
            self._flush.zero_()
        else:  # a reduction reads every line of the buffer and writes one value
            self._flush.max()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def median_ms(
        self,
        fn: Callable[[], Any],
        *,
        target_s: float = 0.25,
        min_repeat: int = 5,
        max_repeat: int = 200,
        queued: bool = False,
    ) -> float:
        """Median of ``fn``'s samples, each after an L2 flush. Synced (the default): the host
        waits for each sample before queueing the next, so the GPU idles between samples.
        ``queued``: every flush and sample is queued before the first is waited for, as the
        autotuner's `do_bench` times (and as kernels run in a model: back to back)."""
        fn()
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        once = max(time.perf_counter() - start, 1e-6)
        repeat = int(min(max_repeat, max(min_repeat, target_s / once)))
        if self.cuda and queued:
            return self._median_queued_ms(fn, repeat)
        samples = []
        if self.cuda:
            # two events reused by every sample (each sample waits for its end), created now:
            # torch creates a CUDA event at its first record, which would otherwise sit between
            # the flush and the timed call; only the call's own host work is left there
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            end.record()
            end.synchronize()
        for _ in range(repeat):
            if self.cuda:
                self.flush()
                begin.record()
                fn()
                end.record()
                end.synchronize()
                samples.append(begin.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)

    def _median_queued_ms(self, fn: Callable[[], Any], repeat: int) -> float:
        begins = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
        for begin, end in zip(begins, ends, strict=True):
            self.flush()
            begin.record()
            fn()
            end.record()
        self.sync()
        return statistics.median(b.elapsed_time(e) for b, e in zip(begins, ends, strict=True))


def copy_fn(nbytes: int, device: torch.device) -> Callable[[], Any]:
    """A device-to-device copy of ``nbytes`` (read; as many written), ready to time."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def copy_bandwidth_tbs(timer: Timer, nbytes: int = 2 * 1024**3, *, queued: bool = False) -> float:
    """Device-to-device copy: bytes read + bytes written per second, in TB/s."""
    ms = timer.median_ms(copy_fn(nbytes, timer.device), queued=queued)
    return 2 * nbytes / (ms * 1e-3) / 1e12


def cublas_peak_tflops(timer: Timer, n: int = 8192, *, queued: bool = False) -> float:
    a = torch.randn(n, n, dtype=torch.bfloat16, device=timer.device)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=timer.device)
    ms = timer.median_ms(lambda: torch.matmul(a, b), queued=queued)
    return 2 * n**3 / (ms * 1e-3) / 1e12
