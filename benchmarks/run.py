"""Benchmark the example kernels on a GPU against torch eager, torch.compile and vendor libraries.

    python benchmarks/run.py --kernels softmax,rms_norm,matmul --effort quick --json out.json --plot out.png

Every number is a median of device-event timings with an L2 flush before each sample. Copy
bandwidth and cuBLAS bf16 peak are measured in the same run; each kernel is reported in TB/s
(memory-bound) or TFLOP/s (compute-bound) and as a fraction of that roofline.
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
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Timer, copy_bandwidth_tbs, cublas_peak_tflops  # noqa: E402


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


BENCHES: dict[str, Bench] = {
    "add": Bench(
        "add", "add",
        lambda d: (torch.randn(8192, 8192, device=d, dtype=torch.bfloat16), torch.randn(8192, 8192, device=d, dtype=torch.bfloat16)),
        lambda x, y: x + y, "memory", lambda a: 3 * _bytes(a[0]),
    ),
    "softmax": Bench(
        "softmax", "softmax",
        lambda d: (torch.randn(8192, 8192, device=d, dtype=torch.bfloat16),),
        lambda x: torch.softmax(x, dim=1), "memory", lambda a: 2 * _bytes(a[0]),
    ),
    "rms_norm": Bench(
        "rms_norm", "rms_norm",
        lambda d: _norm_args(d), _rms_ref, "memory", lambda a: 2 * _bytes(a[0]) + _bytes(a[1]),
    ),
    "layer_norm": Bench(
        "layer_norm", "layer_norm",
        lambda d: (*_norm_args(d), torch.randn(8192, device=d, dtype=torch.bfloat16)),
        lambda x, w, b: torch.nn.functional.layer_norm(x, (x.size(-1),), w, b),
        "memory", lambda a: 2 * _bytes(a[0]),
    ),
    "cross_entropy": Bench(
        "cross_entropy", "cross_entropy",
        lambda d: (torch.randn(8192, 128256, device=d, dtype=torch.bfloat16), torch.randint(0, 128256, (8192,), device=d)),
        lambda logits, labels: torch.nn.functional.cross_entropy(logits.float(), labels),
        "memory", lambda a: _bytes(a[0]),
    ),
    "matmul": Bench(
        "matmul", "matmul",
        lambda d: (torch.randn(4096, 4096, device=d, dtype=torch.bfloat16), torch.randn(4096, 4096, device=d, dtype=torch.bfloat16)),
        torch.matmul, "compute", lambda a: 2 * a[0].size(0) * a[0].size(1) * a[1].size(1),
        vendor=("cuBLAS", torch.matmul),
    ),
    "matmul_8192": Bench(
        "matmul", "matmul",
        lambda d: (torch.randn(8192, 8192, device=d, dtype=torch.bfloat16), torch.randn(8192, 8192, device=d, dtype=torch.bfloat16)),
        torch.matmul, "compute", lambda a: 2 * a[0].size(0) * a[0].size(1) * a[1].size(1),
        vendor=("cuBLAS", torch.matmul),
    ),
    "attention": Bench(
        "attention", "attention",
        lambda d: tuple(torch.randn(4 * 32, 4096, 128, device=d, dtype=torch.bfloat16) for _ in range(3)),
        lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v),
        "compute", lambda a: 4 * a[0].size(0) * a[0].size(1) ** 2 * a[0].size(2),
        vendor=("SDPA", lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v)),
    ),
}


def _tune(kernel: Any, args: tuple, backend: str | None, effort: str) -> tuple[Callable[..., Any], Any, float]:
    if backend:
        kernel.settings.backend = backend
    kernel.settings.autotune_effort = effort
    kernel.reset()
    start = time.perf_counter()
    bound = kernel.bind(args)
    config = bound.ensure_config_exists(args)
    tune_s = time.perf_counter() - start
    return bound.compile_config(config), config, tune_s


def run_one(name: str, bench: Bench, timer: Timer, args_ns: argparse.Namespace, rooflines: dict[str, float]) -> dict:
    device = timer.device
    module = importlib.import_module(bench.module)
    kernel = getattr(module, bench.kernel)
    args = bench.make_args(device)
    row: dict[str, Any] = {"kernel": name}
    expected = bench.reference(*args)
    run, config, tune_s = _tune(kernel, args, args_ns.backend, args_ns.effort)
    actual = run(*args)
    torch.testing.assert_close(actual.float(), expected.float(), atol=bench.atol, rtol=bench.rtol)
    row["config"] = repr(config)
    row["tune_s"] = round(tune_s, 1)
    timings = {"helion": timer.median_ms(lambda: run(*args)), "torch": timer.median_ms(lambda: bench.reference(*args))}
    if not args_ns.skip_compile:
        try:
            compiled = torch.compile(bench.reference, mode="max-autotune-no-cudagraphs")
            timings["torch.compile"] = timer.median_ms(lambda: compiled(*args))
        except Exception as error:  # a baseline that fails to compile is reported, not fatal
            row["torch.compile_error"] = f"{type(error).__name__}: {error}"[:200]
    if bench.vendor:
        vendor_name, vendor_fn = bench.vendor
        timings[vendor_name] = timer.median_ms(lambda: vendor_fn(*args))
    work = bench.work(args)
    roof = rooflines["copy_tbs"] if bench.bound == "memory" else rooflines["cublas_tflops"]
    unit = "TB/s" if bench.bound == "memory" else "TFLOP/s"
    scale = 1e12
    for key, ms in timings.items():
        rate = work / (ms * 1e-3) / scale
        row[key] = {"ms": round(ms, 4), unit: round(rate, 3), "of_roofline": round(rate / roof, 3)}
    row["unit"] = unit
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default=",".join(BENCHES))
    parser.add_argument("--backend", default=None, help="helion backend (default: the installed default)")
    parser.add_argument("--effort", default="quick", choices=["none", "quick", "full"])
    parser.add_argument("--json", default=None)
    parser.add_argument("--plot", default=None)
    parser.add_argument("--skip-compile", action="store_true", help="skip the torch.compile baseline")
    ns = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmarks/run.py needs a CUDA device", file=sys.stderr)
        return 2
    timer = Timer(torch.device("cuda"))
    rooflines = {"copy_tbs": copy_bandwidth_tbs(timer), "cublas_tflops": cublas_peak_tflops(timer)}
    print(f"device {torch.cuda.get_device_name()}: copy {rooflines['copy_tbs']:.2f} TB/s, cuBLAS bf16 8192^3 {rooflines['cublas_tflops']:.0f} TFLOP/s")
    rows = []
    result = {"rooflines": rooflines, "rows": rows, "device": torch.cuda.get_device_name()}
    print(f"\n{'kernel':16} {'impl':14} {'ms':>9} {'rate':>10} {'roofline':>9}", flush=True)
    for name in ns.kernels.split(","):
        try:
            rows.append(run_one(name, BENCHES[name], timer, ns, rooflines))
        except Exception as error:
            traceback.print_exc()
            rows.append({"kernel": name, "error": f"{type(error).__name__}: {error}"[:300]})
        # each row as soon as it is measured (and the JSON so far): a run cut short keeps them
        _print_row(rows[-1])
        if ns.json:
            Path(ns.json).write_text(json.dumps(result, indent=2))
    if ns.plot:
        _plot(rows, ns.plot)
    return 0 if all("error" not in r for r in rows) else 1


def _print_row(row: dict) -> None:
    if "error" in row:
        print(f"{row['kernel']:16} ERROR {row['error']}", flush=True)
        return
    for impl, value in row.items():
        if isinstance(value, dict):
            rate = value[row["unit"]]
            print(f"{row['kernel']:16} {impl:14} {value['ms']:9.4f} {rate:8.3f} {row['unit']:>7} {value['of_roofline']:8.1%}")
    print(f"{'':16} tuned in {row['tune_s']} s: {row['config']}", flush=True)


def _plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    good = [r for r in rows if "error" not in r]
    impls = sorted({k for r in good for k, v in r.items() if isinstance(v, dict)})
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(good)), 4))
    width = 0.8 / max(len(impls), 1)
    for i, impl in enumerate(impls):
        values = [r[impl]["of_roofline"] if impl in r else 0 for r in good]
        ax.bar([j + i * width for j in range(len(good))], values, width, label=impl)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(good))], [r["kernel"] for r in good])
    ax.set_ylabel("fraction of roofline")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    sys.exit(main())
