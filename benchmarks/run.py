"""Benchmark the example kernels on a GPU against torch eager, torch.compile and vendor libraries.

    python benchmarks/run.py --kernels softmax,rms_norm,matmul --effort quick --json out.json --plot out.png

Every number is a median of device-event timings with an L2 flush before each sample, taken
two ways (benchmarks/_timing.py): synced, the host waiting for each sample, and queued, every
sample queued before the first is waited for (as the autotuner times). Copy bandwidth and cuBLAS
bf16 peak are measured in the same run, both ways; each kernel is reported in TB/s
(memory-bound) or TFLOP/s (compute-bound) and as a fraction of the roofline timed the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any
from typing import Callable

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import FLUSH_MODES  # noqa: E402
from _timing import Timer  # noqa: E402
from _timing import copy_bandwidth_tbs  # noqa: E402
from _timing import cublas_peak_tflops  # noqa: E402


@dataclasses.dataclass
class Bench:
    module: str
    kernel: str
    make_args: Callable[[torch.device], tuple]
    reference: Callable[..., Any]
    bound: str  # "memory" or "compute"
    work: Callable[[tuple], float]  # bytes moved or flops
    vendor: tuple[str, Callable[..., Any]] | None = None
    atol: float = 2e-2
    rtol: float = 2e-2


def _bytes(*tensors: torch.Tensor) -> float:
    return float(sum(t.numel() * t.element_size() for t in tensors))


def _norm_args(device: torch.device, rows: int = 8192, cols: int = 8192) -> tuple:
    x = torch.randn(rows, cols, device=device, dtype=torch.bfloat16)
    w = torch.randn(cols, device=device, dtype=torch.bfloat16)
    return x, w


def _rms_ref(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


# kernels of one row-shaped input whose row count the dynamic-shape sweep varies
SWEEP_ROWS = (1000, 2048, 3000, 4096, 5000, 6144, 7000, 8192)
SWEEPABLE = ("add", "softmax", "rms_norm", "layer_norm", "swiglu", "geglu")


def _pair(device: torch.device, rows: int, cols: int) -> tuple:
    return tuple(torch.randn(rows, cols, device=device, dtype=torch.bfloat16) for _ in range(2))


def _attention_args(device: torch.device) -> tuple:
    # B x H x S x D = 4 x 32 x 4096 x 128: 4-D, so SDPA can take its flash kernel
    return tuple(
        torch.randn(4, 32, 4096, 128, device=device, dtype=torch.bfloat16) for _ in range(3)
    )


def _attention_flops(args: tuple, causal: bool) -> float:
    q = args[0]
    flops = 4.0 * q.size(0) * q.size(1) * q.size(2) ** 2 * q.size(3)
    return flops / 2 if causal else flops


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    from torch.nn.attention import SDPBackend
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _fp8_args(device: torch.device, n: int = 4096) -> tuple:
    finfo = torch.finfo(torch.float8_e4m3fn)
    a = (torch.randn(n, n, device=device) * 0.5).clamp(finfo.min, finfo.max).to(torch.float8_e4m3fn)
    # b column-major: the layout torch._scaled_mm requires; the helion kernel reads it by strides
    b = (
        (torch.randn(n, n, device=device) * 0.5)
        .clamp(finfo.min, finfo.max)
        .to(torch.float8_e4m3fn)
        .t()
    )
    scale_a = torch.tensor(0.02, device=device)
    scale_b = torch.tensor(0.03, device=device)
    return a, b, scale_a, scale_b


def _fp8_reference(
    a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
) -> torch.Tensor:
    return (
        torch.matmul(a.to(torch.bfloat16), b.to(torch.bfloat16)).float() * (scale_a * scale_b)
    ).to(torch.bfloat16)


def _rope_args(device: torch.device) -> tuple:
    batch, seq, heads, kv_heads, head_dim = 4, 4096, 32, 8, 128
    q = torch.randn(batch, seq, heads, head_dim, device=device, dtype=torch.bfloat16)
    k = torch.randn(batch, seq, kv_heads, head_dim, device=device, dtype=torch.bfloat16)
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim)
    angles = torch.outer(torch.arange(seq, device=device).float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return q, k, angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)


def _rope_reference(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple:
    def rotate(x: torch.Tensor) -> torch.Tensor:
        lo, hi = x.float().chunk(2, dim=-1)
        rotated = torch.cat((-hi, lo), dim=-1)
        return (
            x.float() * cos.float()[None, :, None, :] + rotated * sin.float()[None, :, None, :]
        ).to(x.dtype)

    return rotate(q), rotate(k)


BENCHES: dict[str, Bench] = {
    "add": Bench(
        "add",
        "add",
        lambda d: (
            torch.randn(8192, 8192, device=d, dtype=torch.bfloat16),
            torch.randn(8192, 8192, device=d, dtype=torch.bfloat16),
        ),
        lambda x, y: x + y,
        "memory",
        lambda a: 3 * _bytes(a[0]),
    ),
    "softmax": Bench(
        "softmax",
        "softmax",
        lambda d: (torch.randn(8192, 8192, device=d, dtype=torch.bfloat16),),
        lambda x: torch.softmax(x, dim=1),
        "memory",
        lambda a: 2 * _bytes(a[0]),
    ),
    "rms_norm": Bench(
        "rms_norm",
        "rms_norm",
        lambda d: _norm_args(d),
        _rms_ref,
        "memory",
        lambda a: 2 * _bytes(a[0]) + _bytes(a[1]),
    ),
    "layer_norm": Bench(
        "layer_norm",
        "layer_norm",
        lambda d: (*_norm_args(d), torch.randn(8192, device=d, dtype=torch.bfloat16)),
        lambda x, w, b: torch.nn.functional.layer_norm(x, (x.size(-1),), w, b),
        "memory",
        lambda a: 2 * _bytes(a[0]),
    ),
    "cross_entropy": Bench(
        "cross_entropy",
        "cross_entropy",
        lambda d: (
            torch.randn(8192, 128256, device=d, dtype=torch.bfloat16),
            torch.randint(0, 128256, (8192,), device=d),
        ),
        lambda logits, labels: torch.nn.functional.cross_entropy(logits.float(), labels),
        "memory",
        lambda a: _bytes(a[0]),
    ),
    "matmul": Bench(
        "matmul",
        "matmul",
        lambda d: (
            torch.randn(4096, 4096, device=d, dtype=torch.bfloat16),
            torch.randn(4096, 4096, device=d, dtype=torch.bfloat16),
        ),
        torch.matmul,
        "compute",
        lambda a: 2 * a[0].size(0) * a[0].size(1) * a[1].size(1),
        vendor=("cuBLAS", torch.matmul),
    ),
    "matmul_8192": Bench(
        "matmul",
        "matmul",
        lambda d: (
            torch.randn(8192, 8192, device=d, dtype=torch.bfloat16),
            torch.randn(8192, 8192, device=d, dtype=torch.bfloat16),
        ),
        torch.matmul,
        "compute",
        lambda a: 2 * a[0].size(0) * a[0].size(1) * a[1].size(1),
        vendor=("cuBLAS", torch.matmul),
    ),
    "attention": Bench(
        "attention",
        "attention",
        lambda d: _attention_args(d),
        lambda q, k, v: _sdpa(q, k, v, False),
        "compute",
        lambda a: _attention_flops(a, causal=False),
        vendor=("SDPA flash", lambda q, k, v: _sdpa(q, k, v, False)),
    ),
    "attention_causal": Bench(
        "attention",
        "attention_causal",
        lambda d: _attention_args(d),
        lambda q, k, v: _sdpa(q, k, v, True),
        "compute",
        lambda a: _attention_flops(a, causal=True),
        vendor=("SDPA flash", lambda q, k, v: _sdpa(q, k, v, True)),
    ),
    "fp8_matmul": Bench(
        "fp8_gemm",
        "fp8_gemm",
        lambda d: _fp8_args(d),
        _fp8_reference,
        "compute",
        lambda a: 2 * a[0].size(0) * a[0].size(1) * a[1].size(1),
        vendor=(
            "torch._scaled_mm",
            lambda a, b, sa, sb: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16),
        ),
        atol=5e-1,
        rtol=5e-2,
    ),
    "embedding": Bench(
        "embedding",
        "embedding",
        lambda d: (
            torch.randint(0, 128256, (8192,), device=d),
            torch.randn(128256, 4096, device=d, dtype=torch.bfloat16),
        ),
        torch.nn.functional.embedding,
        "memory",
        lambda a: 2 * a[0].numel() * a[1].size(1) * a[1].element_size(),
    ),
    "embedding_32k": Bench(  # a training step's tokens (8 x 4096)
        "embedding",
        "embedding",
        lambda d: (
            torch.randint(0, 128256, (32768,), device=d),
            torch.randn(128256, 4096, device=d, dtype=torch.bfloat16),
        ),
        torch.nn.functional.embedding,
        "memory",
        lambda a: 2 * a[0].numel() * a[1].size(1) * a[1].element_size(),
    ),
    "swiglu": Bench(
        "swiglu",
        "swiglu",
        lambda d: _pair(d, 8192, 14336),
        lambda a, b: (torch.nn.functional.silu(a.float()) * b.float()).to(a.dtype),
        "memory",
        lambda a: 3 * _bytes(a[0]),
    ),
    "geglu": Bench(
        "geglu",
        "geglu",
        lambda d: _pair(d, 8192, 14336),
        lambda a, b: (torch.nn.functional.gelu(a.float(), approximate="tanh") * b.float()).to(
            a.dtype
        ),
        "memory",
        lambda a: 3 * _bytes(a[0]),
    ),
    "rope": Bench(
        "rope",
        "rope",
        lambda d: _rope_args(d),
        _rope_reference,
        "memory",
        lambda a: 2 * _bytes(a[0], a[1]) + _bytes(a[2], a[3]),
    ),
}


def _tune(
    kernel: Any,
    args: tuple,
    backend: str | None,
    effort: str,
    log_dir: str | None = None,
    name: str = "",
) -> tuple[Callable[..., Any], Any, float]:
    if backend:
        kernel.settings.backend = backend
    kernel.settings.autotune_effort = effort
    if log_dir:  # <log_dir>/<name>.csv: every candidate the search timed, to see later why it picked its winner
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        kernel.settings.autotune_log = str(Path(log_dir) / name)
    kernel.reset()
    start = time.perf_counter()
    bound = kernel.bind(args)
    config = bound.ensure_config_exists(args)
    tune_s = time.perf_counter() - start
    return bound.compile_config(config), config, tune_s


def _check(actual: Any, expected: Any, bench: Bench) -> None:
    if isinstance(expected, tuple):
        for got, want in zip(actual, expected, strict=True):
            torch.testing.assert_close(got.float(), want.float(), atol=bench.atol, rtol=bench.rtol)
        return
    torch.testing.assert_close(actual.float(), expected.float(), atol=bench.atol, rtol=bench.rtol)


def run_sweep(
    name: str, bench: Bench, timer: Timer, args_ns: argparse.Namespace, rooflines: dict[str, float]
) -> dict:
    """Tune once with static_shapes=False at the largest row count, then time that one config
    at every row count of SWEEP_ROWS (no re-tuning), against the same config compiled with
    static shapes for each size."""
    kernel = getattr(importlib.import_module(bench.module), bench.kernel)
    device = timer.device
    cols = bench.make_args(device)[0].size(-1)

    def args_for(rows: int) -> tuple:
        full = bench.make_args(device)
        return tuple(t[:rows].contiguous() if t.dim() == 2 else t for t in full)

    kernel.settings.static_shapes = False
    dynamic_run, config, tune_s = _tune(
        kernel, args_for(SWEEP_ROWS[-1]), args_ns.backend, args_ns.effort
    )
    row: dict[str, Any] = {
        "kernel": name,
        "sweep": [],
        "config": repr(config),
        "tune_s": round(tune_s, 1),
        "cols": cols,
    }
    bound_dynamic = kernel.bind(args_for(SWEEP_ROWS[-1]))
    for rows in SWEEP_ROWS:
        args = args_for(rows)
        # a new size's first call, from bind to the result: static shapes trace in bind, while
        # under static_shapes=False the bound kernel is shared and the call traces the new size
        # (a module of the same source is shared)
        kernel.settings.static_shapes = False
        dynamic_first_ms, (dynamic_bound, dynamic_run, got) = _first_call_ms(
            kernel, config, args, device
        )
        _check(got, bench.reference(*args), bench)
        # the key includes static_shapes, so this binds apart from the dynamic kernel
        kernel.settings.static_shapes = True
        static_first_ms, (_, static_run, _) = _first_call_ms(kernel, config, args, device)
        kernel.settings.static_shapes = False
        work = bench.work(args)
        dynamic_ms = timer.median_ms(lambda run=dynamic_run, args=args: run(*args))
        static_ms = timer.median_ms(lambda run=static_run, args=args: run(*args))
        torch_ms = timer.median_ms(lambda args=args: bench.reference(*args))
        row["sweep"].append(
            {
                "rows": rows,
                "same_bound_kernel": dynamic_bound is bound_dynamic,
                "dynamic_ms": round(dynamic_ms, 4),
                "static_ms": round(static_ms, 4),
                "torch_ms": round(torch_ms, 4),
                "dynamic_TB/s": round(work / (dynamic_ms * 1e-3) / 1e12, 3),
                "dynamic_of_copy": round(
                    work / (dynamic_ms * 1e-3) / 1e12 / rooflines["copy_tbs"], 3
                ),
                "dynamic_vs_static": round(dynamic_ms / static_ms, 3),
                "dynamic_first_call_ms": round(dynamic_first_ms, 1),
                "static_first_call_ms": round(static_first_ms, 1),
            }
        )
    kernel.settings.static_shapes = True
    kernel.reset()
    return row


def _first_call_ms(
    kernel: Any, config: Any, args: tuple, device: torch.device
) -> tuple[float, tuple[Any, Any, Any]]:
    """Wall time of a first call at a new size: bind, trace, code generation, compile, launch.
    Also the bound kernel, its runner for ``config`` and the result."""
    start = time.perf_counter()
    bound = kernel.bind(args)
    run = bound.compile_config(config)
    result = run(*args)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) * 1e3, (bound, run, result)


def _print_sweep(row: dict) -> None:
    if "error" in row:
        print(f"{row['kernel']:16} ERROR {row['error']}", flush=True)
        return
    print(
        f"{row['kernel']} (static_shapes=False, one config tuned in {row['tune_s']} s: {row['config']})"
    )
    print(
        f"  {'rows':>6} {'dynamic ms':>11} {'static ms':>10} {'torch ms':>9} {'TB/s':>7} {'of copy':>8} {'dyn/static':>10}"
        f" {'1st call dyn/static ms':>23}"
    )
    for point in row["sweep"]:
        print(
            f"  {point['rows']:>6} {point['dynamic_ms']:11.4f} {point['static_ms']:10.4f} {point['torch_ms']:9.4f}"
            f" {point['dynamic_TB/s']:7.3f} {point['dynamic_of_copy']:8.1%} {point['dynamic_vs_static']:10.3f}"
            f" {point['dynamic_first_call_ms']:11.1f} /{point['static_first_call_ms']:9.1f}",
            flush=True,
        )


def run_one(
    name: str, bench: Bench, timer: Timer, args_ns: argparse.Namespace, rooflines: dict[str, float]
) -> dict:
    device = timer.device
    module = importlib.import_module(bench.module)
    kernel = getattr(module, bench.kernel)
    args = bench.make_args(device)
    row: dict[str, Any] = {"kernel": name}
    expected = bench.reference(*args)
    run, config, tune_s = _tune(
        kernel, args, args_ns.backend, args_ns.effort, args_ns.autotune_log, name
    )
    actual = run(*args)
    _check(actual, expected, bench)
    row["config"] = repr(config)
    row["tune_s"] = round(tune_s, 1)

    # each implementation timed both ways (_timing.Timer.median_ms): synced and queued samples
    def both(fn: Callable[[], Any]) -> tuple[float, float]:
        return timer.median_ms(fn), timer.median_ms(fn, queued=True)

    timings = {"helion": both(lambda: run(*args)), "torch": both(lambda: bench.reference(*args))}
    if not args_ns.skip_compile:
        try:
            compiled = torch.compile(bench.reference, mode="max-autotune-no-cudagraphs")
            timings["torch.compile"] = both(lambda: compiled(*args))
        except Exception as error:  # a baseline that fails to compile is reported, not fatal
            row["torch.compile_error"] = f"{type(error).__name__}: {error}"[:200]
    if bench.vendor:
        vendor_name, vendor_fn = bench.vendor
        timings[vendor_name] = both(lambda: vendor_fn(*args))
    work = bench.work(args)
    roof_key = "copy_tbs" if bench.bound == "memory" else "cublas_tflops"
    unit = "TB/s" if bench.bound == "memory" else "TFLOP/s"
    scale = 1e12
    for key, (ms, queued_ms) in timings.items():
        rate, queued_rate = work / (ms * 1e-3) / scale, work / (queued_ms * 1e-3) / scale
        row[key] = {
            "ms": round(ms, 4),
            unit: round(rate, 3),
            "of_roofline": round(rate / rooflines[roof_key], 3),
            "queued_ms": round(queued_ms, 4),
            f"queued_{unit}": round(queued_rate, 3),
            "queued_of_roofline": round(queued_rate / rooflines[f"{roof_key}_queued"], 3),
        }
    row["unit"] = unit
    if bench.bound == "memory":
        # a copy of the kernel's own byte count: small problems do not reach the big copy's rate
        # (work is a float for most rows; a failure here must not cost the row its timings)
        try:
            nbytes = max(int(work) // 2, 1 << 20)
            row["copy_same_bytes_tbs"] = round(copy_bandwidth_tbs(timer, nbytes=nbytes), 3)
            row["copy_same_bytes_tbs_queued"] = round(
                copy_bandwidth_tbs(timer, nbytes=nbytes, queued=True), 3
            )
        except Exception as error:  # reported with the row
            row["copy_same_bytes_error"] = f"{type(error).__name__}: {error}"[:200]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kernels", default=",".join(BENCHES), help="comma-separated; '' for none")
    parser.add_argument(
        "--backend", default=None, help="helion backend (default: the installed default)"
    )
    parser.add_argument("--effort", default="quick", choices=["none", "quick", "full"])
    parser.add_argument("--json", default=None)
    parser.add_argument("--plot", default=None)
    parser.add_argument(
        "--skip-compile", action="store_true", help="skip the torch.compile baseline"
    )
    parser.add_argument(
        "--autotune-log", default=None, help="directory for each row's autotuner log (<kernel>.csv)"
    )
    parser.add_argument(
        "--flush",
        default="write",
        choices=FLUSH_MODES,
        help="how the L2 is emptied before each sample (see _timing.Timer): write (as do_bench) or read",
    )
    parser.add_argument(
        "--sweep",
        default=None,
        help=f"comma-separated kernels of {SWEEPABLE} to time over {len(SWEEP_ROWS)} row counts with static_shapes=False",
    )
    ns = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmarks/run.py needs a CUDA device", file=sys.stderr)
        return 2
    timer = Timer(torch.device("cuda"), flush=ns.flush)
    rooflines = {
        "copy_tbs": copy_bandwidth_tbs(timer),
        "copy_tbs_queued": copy_bandwidth_tbs(timer, queued=True),
        "cublas_tflops": cublas_peak_tflops(timer),
        "cublas_tflops_queued": cublas_peak_tflops(timer, queued=True),
    }
    print(
        f"device {torch.cuda.get_device_name()}: copy {rooflines['copy_tbs']:.2f} TB/s "
        f"({rooflines['copy_tbs_queued']:.2f} queued), cuBLAS bf16 8192^3 {rooflines['cublas_tflops']:.0f} "
        f"TFLOP/s ({rooflines['cublas_tflops_queued']:.0f} queued)"
    )
    rows = []
    result = {
        "rooflines": rooflines,
        "rows": rows,
        "device": torch.cuda.get_device_name(),
        "flush": ns.flush,
    }
    print(
        f"\n{'kernel':16} {'impl':14} {'ms':>9} {'rate':>10} {'roofline':>9}   queued: {'ms':>9} {'rate':>8} {'roofline':>9}",
        flush=True,
    )

    def measure(
        name: str, into: list, run: Callable[..., dict], show: Callable[[dict], None]
    ) -> None:
        try:
            into.append(run(name, BENCHES[name], timer, ns, rooflines))
        except Exception as error:
            traceback.print_exc()
            into.append({"kernel": name, "error": f"{type(error).__name__}: {error}"[:300]})
        # each row as soon as it is measured (and the JSON so far): a run cut short keeps them
        show(into[-1])
        if ns.json:
            Path(ns.json).write_text(json.dumps(result, indent=2))

    for name in filter(None, ns.kernels.split(",")):
        measure(name, rows, run_one, _print_row)
    if ns.sweep:
        result["sweeps"] = sweeps = []
        for name in ns.sweep.split(","):
            if name not in SWEEPABLE:
                print(f"{name}: not sweepable (one of {SWEEPABLE})", file=sys.stderr)
                continue
            measure(name, sweeps, run_sweep, _print_sweep)
        rows = rows + sweeps
    if ns.plot:
        _plot([r for r in rows if "sweep" not in r], ns.plot)
    return 0 if all("error" not in r for r in rows) else 1


def _print_row(row: dict) -> None:
    if "error" in row:
        print(f"{row['kernel']:16} ERROR {row['error']}", flush=True)
        return
    for impl, value in row.items():
        if isinstance(value, dict):
            rate, queued = value[row["unit"]], value[f"queued_{row['unit']}"]
            print(
                f"{row['kernel']:16} {impl:14} {value['ms']:9.4f} {rate:8.3f} {row['unit']:>7} {value['of_roofline']:8.1%}"
                f"   queued: {value['queued_ms']:9.4f} {queued:8.3f} {value['queued_of_roofline']:8.1%}"
            )
    same, same_queued = row.get("copy_same_bytes_tbs"), row.get("copy_same_bytes_tbs_queued")
    if same and same_queued:
        rate, queued = row["helion"]["TB/s"], row["helion"]["queued_TB/s"]
        print(
            f"{'':16} a copy of the same bytes: {same:.3f} TB/s (helion {rate / same:.1%} of it), "
            f"queued {same_queued:.3f} (helion {queued / same_queued:.1%})"
        )
    print(f"{'':16} tuned in {row['tune_s']} s: {row['config']}", flush=True)


def _plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # the queued timing: device time of back-to-back calls; the synced one also counts a
    # baseline's host time beyond the L2 flush (torch.compile's wrapper), see _timing.Timer
    good = [r for r in rows if "error" not in r]
    impls = sorted(
        {k for r in good for k, v in r.items() if isinstance(v, dict) and "queued_of_roofline" in v}
    )
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(good)), 4))
    width = 0.8 / max(len(impls), 1)
    for i, impl in enumerate(impls):
        values = [r[impl]["queued_of_roofline"] if impl in r else 0 for r in good]
        ax.bar([j + i * width for j in range(len(good))], values, width, label=impl)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(good))], [r["kernel"] for r in good])
    ax.set_ylabel("fraction of roofline (queued timing)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    sys.exit(main())
