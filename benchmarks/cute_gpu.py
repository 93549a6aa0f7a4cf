"""Run the CuTe backend on a CUDA GPU: check 8 kernels against PyTorch, time bf16 matmul vs cuBLAS.

Usage (on a machine with an NVIDIA Hopper GPU and the CuTe DSL installed)::

    python benchmarks/cute_gpu.py                 # correctness of every kernel + timings
    python benchmarks/cute_gpu.py --size 4096     # matmul problem size (M = N = K)
    python benchmarks/cute_gpu.py --only matmul   # a subset (comma separated)
    python benchmarks/cute_gpu.py --test-kernels  # also every kernel of packages/helion-cute/tests

The script works from a plain checkout: when ``helion`` / ``helion_cute`` are not installed it
puts ``packages/*/src`` on ``sys.path`` and registers the cute plugin by hand. Every kernel runs
in its own try/except; the table at the end says what passed, how far from PyTorch it was and
how long it took, and the bf16 matmul line gives the fraction of cuBLAS (``torch.matmul``)
reached in the same run. "GPU ms" is kernel time from the profiler (both sides); "wall ms" is
back-to-back calls between CUDA events, which includes host launch overhead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bootstrap() -> None:
    try:
        import helion
        import helion_cute
    except ImportError:
        for package in ("helion-core", "helion-cute"):
            sys.path.insert(0, str(ROOT / "packages" / package / "src"))
    import helion.backends
    import helion.plugins

    names = [b.name for b in helion.backends.list_backends()]
    if "cute" not in names:
        import helion_cute.plugin

        helion.plugins.register_plugin(helion_cute.plugin, "cute", distribution="helion-cute")


_bootstrap()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import helion  # noqa: E402
import helion.language as hl  # noqa: E402

# -- the kernels (the core suite's examples, on the cute backend) ----------------------------------


@helion.kernel(backend="cute", static_shapes=True)
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


@helion.kernel(backend="cute", static_shapes=True)
def exp(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = torch.exp(x[tile_m, tile_n])
    return out


@helion.kernel(backend="cute", static_shapes=True)
def softmax(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile in hl.tile(m):
        out[tile, :] = torch.softmax(x[tile, :], dim=1)
    return out


@helion.kernel(backend="cute", static_shapes=True)
def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        mean = row.mean(dim=-1, keepdim=True)
        centered = row - mean
        variance = (centered * centered).mean(dim=-1, keepdim=True)
        normalized = centered * torch.rsqrt(variance + eps)
        scaled = normalized * weight[:].to(torch.float32) + bias[:].to(torch.float32)
        out[tile_m, :] = scaled.to(out.dtype)
    return out


@helion.kernel(backend="cute", static_shapes=True)
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        inv_rms = torch.rsqrt((row * row).mean(dim=-1, keepdim=True) + eps)
        out[tile_m, :] = (row * inv_rms * weight[:].to(torch.float32)).to(out.dtype)
    return out


@helion.kernel(backend="cute", static_shapes=True)
def row_sum(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile in hl.tile(m):
        out[tile] = x[tile, :].sum(-1)
    return out


@helion.kernel(backend="cute", static_shapes=True)
def embedding(idx: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    _, dim = weight.shape
    out = torch.empty([idx.size(0), dim], dtype=weight.dtype, device=weight.device)
    for tile_b, tile_e in hl.tile([idx.size(0), dim]):
        out[tile_b, tile_e] = weight[idx[tile_b], tile_e]
    return out


@helion.kernel(backend="cute", static_shapes=True)
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def _cases(size: int) -> list[tuple]:
    """(name, kernel, make_args, reference, atol, rtol, config or None, bytes moved, flops)."""
    dev = "cuda"
    bf16 = torch.bfloat16

    def gb(*tensors_or_numbers: object) -> float:
        return float(
            sum(
                t.numel() * t.element_size() if isinstance(t, torch.Tensor) else t
                for t in tensors_or_numbers
            )
        )

    cases = [
        (
            "add",
            add,
            lambda: (torch.randn(4096, 4096, device=dev), torch.randn(4096, 4096, device=dev)),
            lambda x, y: x + y,
            1e-5,
            1e-5,
            {"block_sizes": [8, 512]},
        ),
        (
            "add (odd shape)",
            add,
            lambda: (torch.randn(3, 37, 53, device=dev), torch.randn(3, 37, 53, device=dev)),
            lambda x, y: x + y,
            1e-5,
            1e-5,
            None,
        ),
        (
            "exp",
            exp,
            lambda: (torch.randn(4096, 4096, device=dev),),
            torch.exp,
            1e-5,
            1e-5,
            {"block_sizes": [8, 512]},
        ),
        (
            "softmax",
            softmax,
            lambda: (torch.randn(4096, 4096, device=dev),),
            lambda x: torch.softmax(x, dim=1),
            1e-5,
            1e-4,
            {"block_sizes": [1], "num_threads": 512},
        ),
        (
            "softmax (odd shape)",
            softmax,
            lambda: (torch.randn(93, 187, device=dev),),
            lambda x: torch.softmax(x, dim=1),
            1e-5,
            1e-4,
            None,
        ),
        (
            "layer_norm",
            layer_norm,
            lambda: (
                torch.randn(4096, 4096, device=dev, dtype=bf16),
                torch.randn(4096, device=dev, dtype=bf16),
                torch.randn(4096, device=dev, dtype=bf16),
            ),
            lambda x, w, b: F.layer_norm(x.float(), [x.size(-1)], w.float(), b.float(), 1e-5).to(
                x.dtype
            ),
            2e-2,
            2e-2,
            {"block_sizes": [1], "num_threads": 512},
        ),
        (
            "rms_norm",
            rms_norm,
            lambda: (
                torch.randn(4096, 4096, device=dev, dtype=torch.float16),
                torch.randn(4096, device=dev, dtype=torch.float16),
            ),
            lambda x, w: (
                x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
            ).to(x.dtype),
            1e-2,
            1e-2,
            {"block_sizes": [1], "num_threads": 512},
        ),
        (
            "sum",
            row_sum,
            lambda: (torch.randn(4096, 4096, device=dev),),
            lambda x: x.sum(-1),
            1e-3,
            1e-4,
            {"block_sizes": [1], "num_threads": 512},
        ),
        (
            "embedding",
            embedding,
            lambda: (
                torch.randint(0, 50000, (8192,), device=dev),
                torch.randn(50000, 1024, device=dev),
            ),
            lambda i, w: F.embedding(i, w),
            0.0,
            0.0,
            {"block_sizes": [8, 512]},
        ),
        (
            "matmul fp16 (odd shape)",
            matmul,
            lambda: (
                torch.randn(67, 91, device=dev, dtype=torch.float16),
                torch.randn(91, 45, device=dev, dtype=torch.float16),
            ),
            lambda x, y: (x.float() @ y.float()).to(x.dtype),
            1e-2,
            1e-2,
            None,
        ),
        (
            f"matmul bf16 {size}^3",
            matmul,
            lambda: (
                torch.randn(size, size, device=dev, dtype=bf16),
                torch.randn(size, size, device=dev, dtype=bf16),
            ),
            lambda x, y: torch.matmul(x, y),
            5e-2,
            2e-2,
            "matmul",
        ),
    ]
    return cases


def _time(fn, repeat: int = 20) -> float:
    """Wall time per call in ms: ``repeat`` calls back to back between two CUDA events (host
    launch overhead shows when it exceeds the kernel's run time)."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeat


def _gpu_time(fn, calls: int = 10) -> float | None:
    """GPU time per call in ms: the summed durations of the kernels the profiler saw."""
    try:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile

        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        total = 0.0
        for event in prof.events():
            if event.device_type == DeviceType.CUDA:
                total += (
                    getattr(event, "device_time", None) or getattr(event, "cuda_time", 0.0) or 0.0
                )
        return total / calls / 1e3 if total else None
    except Exception:  # the profiler is optional: fall back to wall time
        return None


def _matmul_configs(bound) -> list:
    base = bound.config_spec.default_config().config
    configs = []
    for bm, bn, bk, stages, cluster in (
        (128, 256, 64, 4, "1x1"),
        (128, 128, 64, 5, "1x1"),
        (128, 256, 64, 3, "1x1"),
        (128, 256, 64, 4, "2x1"),
        (128, 128, 64, 5, "1x2"),
    ):
        configs.append(
            helion.Config(
                **{
                    **base,
                    "block_sizes": [bm, bn, bk],
                    "num_stages": stages,
                    "l2_groupings": [8],
                    "cute_cluster_shape": cluster,
                }
            )
        )
    return configs


def _test_kernels() -> int:
    """Run each kernel of packages/helion-cute/tests/cute_kernels.py (every config it lists) on the GPU
    against its reference; returns the number of failures."""
    sys.path.insert(0, str(ROOT / "packages" / "helion-cute" / "tests"))
    import cute_kernels as kernels

    device = torch.device("cuda")
    failures = 0
    for case in kernels.CORE_CASES + kernels.EXTRA_CASES:
        for config in [None, *case.configs]:
            try:
                torch.manual_seed(0)
                inputs = case.make_args(device)
                bound = case.kernel.bind(inputs)
                chosen = (
                    bound.config_spec.default_config()
                    if config is None
                    else bound.normalize(config)
                )
                clones = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in inputs)
                actual = bound.compile_config(chosen)(*clones)
                expected = case.reference(*inputs)
                torch.cuda.synchronize()
                if expected.dtype.is_floating_point:
                    actual, expected = actual.float(), expected.float()
                torch.testing.assert_close(actual, expected, atol=case.atol, rtol=case.rtol)
                print(f"test kernel {case.name}: ok {chosen}", flush=True)
            except Exception as error:
                failures += 1
                print(
                    f"test kernel {case.name}: FAIL {config}: {type(error).__name__}: {error}",
                    flush=True,
                )
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="M = N = K of the timed bf16 matmul")
    parser.add_argument("--only", default="", help="comma-separated case names (prefix match)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--test-kernels", action="store_true", help="also check the package's test kernels"
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("cute_gpu.py needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    torch.manual_seed(0)
    test_failures = _test_kernels() if args.test_kernels else 0
    rows = []
    matmul_line = None
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    for name, kernel, make_args, reference, atol, rtol, config in _cases(args.size):
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        started = time.perf_counter()
        try:
            inputs = make_args()
            bound = kernel.bind(inputs)
            if config == "matmul":
                candidates = _matmul_configs(bound)
            elif config is None:
                candidates = [bound.config_spec.default_config()]
            else:
                candidates = [bound.normalize(config)]
            expected = reference(*inputs)
            best = None
            failure = None
            for candidate in candidates:
                try:
                    compiled = bound.compile_config(candidate)
                    actual = compiled(*inputs)
                    torch.cuda.synchronize()
                    error = (actual.float() - expected.float()).abs().max().item()
                    torch.testing.assert_close(
                        actual.float(), expected.float(), atol=atol, rtol=rtol
                    )
                    ms = _time(
                        lambda compiled=compiled, inputs=inputs: compiled(*inputs), args.repeat
                    )
                except Exception as candidate_error:  # try the other configs, report at the end
                    failure = candidate_error
                    print(
                        f"--- {name} with {candidate}: {type(candidate_error).__name__}: {candidate_error}",
                        file=sys.stderr,
                    )
                    continue
                if len(candidates) > 1:
                    print(f"    {name} {candidate}: {ms:.4f} ms", flush=True)
                if best is None or ms < best[0]:
                    best = (ms, error, candidate)
            if best is None:
                raise failure  # type: ignore[misc]
            ms, error, chosen = best
            torch_ms = _time(
                lambda reference=reference, inputs=inputs: reference(*inputs), args.repeat
            )
            rows.append(
                (
                    name,
                    "ok",
                    f"{error:.2e}",
                    f"{ms:.4f}",
                    f"{torch_ms:.4f}",
                    f"{torch_ms / ms:.2f}x",
                )
            )
            if config == "matmul":
                flops = 2.0 * args.size**3
                matmul_line = (
                    f"bf16 matmul {args.size}^3: cute {flops / ms / 1e9:.0f} TFLOP/s, cuBLAS {flops / torch_ms / 1e9:.0f} TFLOP/s"
                    f" -> {100 * torch_ms / ms:.0f}% of cuBLAS with {chosen}"
                )
        except Exception as error:  # keep going: the table says what failed
            rows.append((name, "FAIL", type(error).__name__, "", "", "", "", ""))
            print(f"--- {name} failed ({time.perf_counter() - started:.1f}s):", file=sys.stderr)
            traceback.print_exc()
        print(f"{name}: {rows[-1][1]} ({time.perf_counter() - started:.1f}s)", flush=True)
    header = (
        "kernel",
        "result",
        "max |err|",
        "cute GPU ms",
        "torch GPU ms",
        "speed vs torch",
        "cute wall ms",
        "torch wall ms",
    )
    # rows may be shorter than the header (the wall-clock columns are only measured for some)
    widths = [
        max(len(str(r[i])) if i < len(r) else 0 for r in [header, *rows])
        for i in range(len(header))
    ]
    print()
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)))
    if matmul_line:
        print(matmul_line)
    failed = sum(1 for r in rows if r[1] != "ok")
    print(f"{len(rows) - failed}/{len(rows)} passed")
    if args.test_kernels:
        print(f"test kernels: {test_failures} failed")
    return 1 if failed or test_failures else 0


if __name__ == "__main__":
    os.environ.setdefault("HELION_AUTOTUNE_EFFORT", "none")
    sys.exit(main())
