"""The warm call's Python on a machine without a GPU: a stand-in for `launch_overhead.py`.

    python benchmarks/host_path_standin.py

`tiny_add` runs through the Triton backend's real warm path (the warm call, the runner, the
host code, the guarded launch, the fused launcher and its primary branch) on CPU tensors that
claim to be CUDA tensors, with Triton's real runtime knobs, a fake driver and a no-op in place
of Triton's compiled C launcher. What it measures is the Python above the C launcher and
`torch.empty_like`, the part of the host overhead this project writes. On the H200 host the
same Python took 1.2-1.4 times the stand-in's time (the third session of 2026-12-04).

To compare two commits, run this script with each one's packages first on PYTHONPATH, several
times interleaved (the numbers move with the machine's load).
"""

from __future__ import annotations

import time
import types
from typing import Any
from typing import Callable

import torch

import helion
import helion.language as hl


@helion.kernel(backend="triton", config=helion.Config(block_sizes=[128]))
def tiny_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + y[tile]
    return out


def per_call_us(fn: Callable[[], Any], calls: int = 20000, rounds: int = 7) -> float:
    for _ in range(500):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


class _NoLaunch:
    """A compiled kernel whose launch does nothing (Triton's C launcher's place)."""

    function = 1
    packed_metadata = 2

    def run(self, *args: Any) -> None:
        return None


class _FakeJit:
    """The JIT function as `DirectLaunch` sees it: binding returns the no-op kernel."""

    def __init__(self, jit: Any) -> None:
        self.fn = jit.fn
        self.arg_names = jit.arg_names

    def __getitem__(self, grid: Any) -> Callable[..., _NoLaunch]:
        return lambda *args, **kwargs: _NoLaunch()


def main() -> None:
    import triton

    from helion_triton.launcher import DirectLaunch

    x, y = torch.randn(1000), torch.randn(1000)
    tiny_add(x, y)  # compiles (interpreter or not: only the module's names are used below)
    bound = tiny_add.bind((x, y))
    variant = next(v for variants in bound._variants.values() for v in variants)
    compiled = variant.compiled
    module = compiled.module
    name = next(n for n in vars(module) if n.startswith("_helion_"))
    driver = types.SimpleNamespace(
        get_current_device=lambda: 0, get_current_stream=lambda device: 0
    )
    original_is_cuda = torch.Tensor.is_cuda
    # generated modules are shared by every kernel of the same source (launch_overhead's
    # tiny_add too): the no-op launch must not outlive this run
    original_kernel = getattr(module, name)
    torch.Tensor.is_cuda = property(lambda self: True)  # type: ignore[method-assign, assignment]
    try:
        direct = DirectLaunch(
            _FakeJit(getattr(module, name)), driver=driver, runtime_knobs=triton.knobs.runtime
        )
        setattr(module, name, direct)
        compiled._swap = False
        compiled._direct = direct
        compiled._fuse = True
        compiled.launcher = compiled.module_launcher
        bound._runners.clear()
        bound._active_runner = bound._active_keyed = None
        for _ in range(3):  # the direct launch, the fused launcher, the guarded launch
            tiny_add(x, y)
        if not direct._entries or compiled.fast_call is None:
            raise SystemExit("the stand-in did not take the direct launch path")
        keyed = bound._active_keyed
        out = torch.empty_like(x)
        rows = [
            ("tiny_add(x, y): the whole warm call", lambda: tiny_add(x, y)),
            ("the bound kernel's keyed runner", lambda: keyed((x, y))),
            ("fast_call(out, x, y): the fused launcher", lambda: compiled.fast_call(out, x, y)),
            ("torch.empty_like(x)", lambda: torch.empty_like(x)),
        ]
        for label, fn in rows:
            print(f"{label:45s} {per_call_us(fn):6.2f} us")
        with torch.inference_mode():  # inference tensors, after the warm-up outside it
            a, b = torch.randn(1000), torch.randn(1000)
            label = "the whole warm call under inference mode"
            print(f"{label:45s} {per_call_us(lambda: tiny_add(a, b)):6.2f} us")
    finally:
        torch.Tensor.is_cuda = original_is_cuda  # type: ignore[method-assign]
        setattr(module, name, original_kernel)
        tiny_add.reset()  # its runners launch the no-op


if __name__ == "__main__":
    main()
