"""Kernel time of the Triton backend's best seed config against PyTorch (CUDA).

    python benchmarks/triton_seeds.py [--small] [--kernels add,softmax,...]

For each kernel of the helion-triton test suite at a GPU-sized shape, compiles the default
config and every seed config (``TritonBackend.seed_configs``), checks each against PyTorch,
times it with ``triton.testing.do_bench`` and prints the best next to the PyTorch time.
``--small`` uses tiny shapes so that the script also runs on CPU (through the interpreter).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import helion

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "packages" / "helion-triton" / "tests")
)
import kernels as K


def cases(device: torch.device, small: bool):
    s = 1 if small else 64  # scale of every dimension

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=device, dtype=dtype)

    half = torch.float16
    yield "add", K.add, (randn(64 * s, 64 * s), randn(64 * s, 64 * s)), torch.add
    yield "exp_fp16", K.exp, (randn(64 * s, 64 * s, dtype=half),), torch.exp
    yield "row_sum", K.row_sum, (randn(64 * s, 64 * s),), lambda x: x.sum(-1)
    yield "long_sum", K.long_sum, (randn(8, 1024 * s * s // 4),), lambda x: x.sum(-1)
    yield "softmax", K.softmax, (randn(64 * s, 32 * s),), lambda x: torch.softmax(x, 1)
    yield (
        "matmul_fp16",
        K.matmul,
        (randn(64 * s, 64 * s, dtype=half), randn(64 * s, 64 * s, dtype=half)),
        torch.mm,
    )
    yield (
        "bmm_fp16",
        K.bmm,
        (randn(8, 16 * s, 16 * s, dtype=half), randn(8, 16 * s, 16 * s, dtype=half)),
        torch.bmm,
    )
    yield (
        "layer_norm",
        K.layer_norm,
        (randn(64 * s, 16 * s), randn(16 * s), randn(16 * s)),
        lambda x, w, b: F.layer_norm(x, [x.size(1)], w, b),
    )
    yield (
        "cross_entropy",
        K.cross_entropy,
        (randn(16 * s, 512 * s // 8), torch.randint(0, 512 * s // 8, (16 * s,), device=device)),
        lambda logits, labels: F.cross_entropy(logits, labels, reduction="none"),
    )
    yield (
        "embedding",
        K.embedding,
        (torch.randint(0, 1024, (64 * s,), device=device), randn(1024, 16 * s)),
        F.embedding,
    )


def timer(device: torch.device):
    if device.type == "cuda":
        import triton.testing

        return lambda fn: triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")

    def cpu_time(fn):
        fn()
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    return cpu_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny shapes (CPU smoke run)")
    parser.add_argument("--kernels", default="", help="comma-separated names (default: all)")
    options = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    from helion import backends
    from helion import plugins

    if "triton" not in {b.name for b in backends.list_backends()}:  # a checkout, not installed
        import helion_triton.plugin

        plugins.register_plugin(
            helion_triton.plugin, "triton-checkout", distribution="helion-triton"
        )
    wanted = {k for k in options.kernels.split(",") if k}
    bench = timer(device)
    print(
        f"device: {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu (interpreter)'}"
    )
    print(
        f"{'kernel':<14} {'shape':<22} {'helion ms':>10} {'torch ms':>9} {'speedup':>8}  best config"
    )
    for name, fn, args, reference in cases(device, options.small):
        if wanted and name not in wanted:
            continue
        bound = helion.kernel(fn, backend="triton", autotune_effort="none").bind(args)
        expected = reference(*args)
        candidates = [bound.config_spec.default_config(), *bound.seed_configs()]
        best = None
        for config in candidates:
            try:
                compiled = bound.compile_config(config)
                result = compiled(*args)
                torch.testing.assert_close(result.float(), expected.float(), atol=5e-2, rtol=5e-2)
                elapsed = bench(lambda compiled=compiled, args=args: compiled(*args))
            except Exception as error:  # a seed that fails here is reported, not fatal
                print(f"  {name}: {config} failed: {type(error).__name__}: {str(error)[:200]}")
                continue
            if best is None or elapsed < best[0]:
                best = (elapsed, config)
        torch_ms = bench(lambda reference=reference, args=args: reference(*args))
        shape = "x".join(str(d) for d in args[0].shape)
        if best is None:
            print(f"{name:<14} {shape:<22} {'failed':>10} {torch_ms:>9.4f}")
            continue
        print(
            f"{name:<14} {shape:<22} {best[0]:>10.4f} {torch_ms:>9.4f} {torch_ms / best[0]:>7.2f}x  {best[1]}"
        )


if __name__ == "__main__":
    main()
