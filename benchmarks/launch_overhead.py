"""Host overhead per call, no CUDA graphs: a Helion kernel on tiny tensors against a raw Triton
launch of the same add and an empty CUDA kernel, all measured in this run.

    python benchmarks/launch_overhead.py

The totals are measured round-robin (each row a batch of calls in turn, seven rounds, the best
round kept), so a host that slows down mid-run slows every row alike. "helion, Triton's
wrapper" is the same kernel launched through Triton's Python wrapper of its compiled launcher
where the direct path would call the C launcher itself (Triton 3.6). The breakdown after the
totals also times torch's own launcher of Triton cubins (inductor's `_StaticCudaLauncher`) on the
same compiled function, to see whether it launches for less than Triton's C launcher.

Host time per call = wall time of N back-to-back calls / N (the GPU work is tiny, so the host is
the bottleneck); the call path of a warm Helion kernel is key lookup + argument binding + launch.
"""

from __future__ import annotations

import gc
import sys
import time
import types

import torch

import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[128]))
def tiny_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + y[tile]
    return out


# tiny_add under another name: its generated module (and so its DirectLaunch) is its own, and
# main() makes its launches go through Triton's Python wrapper
@helion.kernel(config=helion.Config(block_sizes=[128]))
def tiny_add_via_wrapper(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + y[tile]
    return out


def per_call_us(fn, n: int = 5000) -> float:
    return round_robin_us({"": fn}, n)[""]


def round_robin_us(fns: dict, n: int = 3000, rounds: int = 7) -> dict:
    for fn in fns.values():
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(n):
                fn()
            elapsed = time.perf_counter() - start
            torch.cuda.synchronize()
            best[name] = min(best[name], elapsed / n * 1e6)
    return best


def _warm_path(x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Which branches the warm path takes with these CUDA tensors, and their cost: the warm
    call (does it take the arguments, and does its C++ tensor match say yes?) and the guarded
    launch's match of the output the host code makes. The CPU stand-in cannot show a match
    that CUDA tensors fail."""
    from helion.runtime.kernel import _MISS

    bound = tiny_add.bind((x, y))
    rows: dict[str, float] = {"  tiny_add(x, y) alone": per_call_us(lambda: tiny_add(x, y))}
    warm = tiny_add._warm
    if warm is None:
        print("(warm path: tiny_add has no warm call)")
    else:
        settings = tiny_add.settings
        match = warm.__globals__.get("_match")
        print(
            f"(warm path: the warm call takes (x, y): {warm((x, y), settings) is not _MISS}; "
            f"its tensor match: {match(x, y) if match else 'none (Python tests)'})"
        )
        rows["  the warm call (x, y)"] = per_call_us(lambda: warm((x, y), settings))
        keyed = bound._active_keyed
        rows["  its keyed runner (x, y)"] = per_call_us(lambda: keyed((x, y)))
        if match:
            rows["  its tensor match (x, y)"] = per_call_us(lambda: match(x, y))
    # tiny_add's guarded launches: generated functions that the bound kernel's runners hold
    guarded = [
        f
        for f in gc.get_objects()
        if type(f) is types.FunctionType
        and f.__code__.co_filename == "<helion guarded launch>"
        and getattr(f.__globals__.get("_mode"), "bound", None) is bound
    ]
    out = torch.empty_like(x)
    for launch in guarded:
        match, other = launch.__globals__.get("_match"), launch.__globals__.get("_match_other")
        if match is None:
            print("(warm path: a guarded launch without a tensor match: Python tests)")
            continue
        print(
            f"(warm path: a guarded launch's match of a fresh output: {match(out)}, "
            f"its other-mode match: {other(out) if other else 'none'})"
        )
        rows["  guarded launch's match (out)"] = per_call_us(lambda match=match: match(out))
    return rows


def _breakdown(x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """The warm call path of ``tiny_add`` piece by piece: each row starts one stage later."""
    bound = tiny_add.bind((x, y))
    variant = next(v for vs in bound._variants.values() for v in vs)
    compiled = variant.compiled
    # what the host code hands the device call: tiny_add's device inputs, in their order
    env = {"x": x, "y": y, "out": torch.empty_like(x)}
    values = tuple(env[name] for name in bound.split.device_inputs)
    name, direct = next(
        ((n, v) for n, v in vars(compiled.module).items() if type(v).__name__ == "DirectLaunch"),
        (None, None),
    )
    rows = {
        "  tiny_add.bind((x, y)) (key)": per_call_us(lambda: tiny_add.bind((x, y))),
        "  bound(x, y) (host code on)": per_call_us(lambda: bound(x, y)),
        "  compiled launcher (values)": per_call_us(lambda: compiled(*values)),
        "  its fast_call (values)": per_call_us(lambda: compiled.fast_call(*values))
        if getattr(compiled, "fast_call", None)
        else float("nan"),
        "  torch.empty_like(x)": per_call_us(lambda: torch.empty_like(x)),
    }
    if direct is None:
        print("(no DirectLaunch in the module: the JIT path launches)")
        return rows
    print(
        f"(DirectLaunch: enabled={direct.enabled}, {len(direct._entries)} entries, "
        f"grid launchers for {list(direct._grid_launchers)})"
    )
    if not direct._entries:
        return rows
    run, function, metadata, tail, call, head = next(iter(direct._entries.values()))
    recorded: dict[str, object] = {}

    class Recorder:  # stands in for the kernel in the module for one launch
        def __getitem__(self, grid: object) -> object:
            def launch(*args: object, **kwargs: object) -> object:
                recorded["call"] = (grid, args, kwargs)
                return direct[grid](*args, **kwargs)

            return launch

    setattr(compiled.module, name, Recorder())
    try:
        compiled.module_launcher(*values)  # the generated launcher, which indexes the kernel
    finally:
        setattr(compiled.module, name, direct)
    grid, args, kwargs = recorded["call"]
    stream = torch.cuda.current_stream().cuda_stream
    size = len(grid)
    g = (grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1)
    rows["  DirectLaunch.launch(grid, ...)"] = per_call_us(
        lambda: direct.launch(grid, *args, **kwargs)
    )
    rows["  DirectLaunch[grid](...)"] = per_call_us(lambda: direct[grid](*args, **kwargs))
    rows["  triton compiled run alone"] = per_call_us(
        lambda: run(*g, stream, function, metadata, None, None, None, *args, *tail)
    )
    if call is not run:
        rows["  triton's C launcher alone"] = per_call_us(
            lambda: call(*g, stream, function, *head, *args, *tail)
        )
        # what the grid launchers pass: addresses, not tensors (no data_ptr call, no driver query)
        addresses = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args)
        rows["  C launcher, tensor addresses"] = per_call_us(
            lambda: call(*g, stream, function, *head, *addresses, *tail)
        )
        rows.update(_static_launcher_rows(direct, grid, g, args, kwargs, env, stream))
    print(
        f"(after the breakdown: enabled={direct.enabled}, grid launchers for {list(direct._grid_launchers)})"
    )
    return rows


# Triton signature type -> torch._C._StaticCudaLauncher's one-letter argument code
_STATIC_CODES = {
    "i1": "i",
    "i8": "b",
    "i16": "h",
    "i32": "i",
    "i64": "l",
    "u1": "I",
    "u8": "B",
    "u16": "H",
    "u32": "I",
    "u64": "K",
    "fp16": "f",
    "bf16": "f",
    "fp32": "f",
    "fp64": "d",
}


def _static_launcher_rows(direct, grid, g, args, kwargs, env, stream) -> dict[str, float]:
    """The same compiled function launched by torch's own launcher of Triton cubins (inductor's
    `torch._C._StaticCudaLauncher`), every pointer passed as a u64 address: is it cheaper per
    call than Triton's C launcher? Checked for the right sum before it is timed."""
    static = getattr(torch._C, "_StaticCudaLauncher", None)
    if static is None:
        print("(no torch._C._StaticCudaLauncher in this torch)")
        return {}
    try:
        kernel = direct.jit_function[grid](*args, **kwargs)  # the CompiledKernel of these args
        names = list(direct.jit_function.arg_names)
        signature = {
            (names[k] if isinstance(k, int) else k): v for k, v in kernel.src.signature.items()
        }
        given = dict(zip(names, args, strict=False))
        given.update(kwargs)
        codes, passed = "", []
        for name in names:
            kind = signature.get(name, "constexpr")
            if kind == "constexpr":
                continue
            value = given[name]
            if kind.startswith("*"):
                codes, value = codes + "K", value.data_ptr()
            else:
                codes += _STATIC_CODES[kind]
            passed.append(value)
        for scratch in ("global_scratch_size", "profile_scratch_size"):
            if hasattr(kernel.metadata, scratch):
                if getattr(kernel.metadata, scratch) > 0:
                    print(f"(static launcher not timed: the kernel needs {scratch})")
                    return {}
                codes, passed = codes + "K", [*passed, 0]
        passed = tuple(passed)
        shared = kernel.metadata.shared
        warps = kernel.metadata.num_warps
        function = kernel.function

        def launch() -> None:
            static._launch_kernel(function, *g, warps, shared, codes, passed, stream)

        env["out"].zero_()
        launch()
        torch.cuda.synchronize()
        if not torch.equal(env["out"], env["x"] + env["y"]):
            print("(static launcher not timed: its launch did not compute the sum)")
            return {}
        print(f"(static launcher: codes {codes!r}, {warps} warps, {shared} B shared)")
        return {"  torch static launcher, addresses": per_call_us(launch)}
    except Exception as error:  # a private torch API: report, do not fail the run
        print(f"(static launcher not timed: {type(error).__name__}: {str(error)[:200]})")
        return {}


def main() -> int:
    if not torch.cuda.is_available():
        print("launch_overhead.py needs a CUDA device", file=sys.stderr)
        return 2
    import triton
    import triton.language as tl

    @triton.jit
    def raw_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(
            out_ptr + offs,
            tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
            mask=mask,
        )

    @triton.jit
    def empty_kernel(x_ptr):
        pass

    x = torch.randn(1000, device="cuda")
    y = torch.randn(1000, device="cuda")
    torch.testing.assert_close(tiny_add(x, y), x + y)

    def triton_call():
        out = torch.empty_like(x)
        raw_add[(triton.cdiv(1000, 128),)](x, y, out, 1000, BLOCK=128)
        return out

    import helion_triton.launcher as launcher

    below = launcher._call_below_wrapper
    launcher._call_below_wrapper = lambda run, metadata: (run, (metadata, None, None, None))
    try:
        for _ in range(3):  # bind, the first direct launch, a grid launcher: all with the wrapper
            tiny_add_via_wrapper(x, y)
    finally:
        launcher._call_below_wrapper = below
    fns = {
        "helion tiny_add(x, y)": lambda: tiny_add(x, y),
        "helion, Triton's wrapper": lambda: tiny_add_via_wrapper(x, y),
        "raw triton add + empty_like": triton_call,
        "empty triton kernel": lambda: empty_kernel[(1,)](x),
        "torch x + y (eager)": lambda: x + y,
        "torch.empty_like(x)": lambda: torch.empty_like(x),
    }
    try:
        import cupy

        empty_cuda = cupy.RawKernel('extern "C" __global__ void empty() {}', "empty")
        fns["empty CUDA kernel (cupy)"] = lambda: empty_cuda((1,), (1,), ())
    except Exception as error:  # cupy is optional
        print(f"(no cupy baseline: {error})")
    rows = round_robin_us(fns)
    print(f"{'call':32} {'host us/call':>12}")
    for name, us in rows.items():
        print(f"{name:32} {us:12.2f}", flush=True)
    for name, us in {
        **_warm_path(x, y),
        **_breakdown(x, y),
    }.items():  # after the totals: a failure keeps them
        print(f"{name:32} {us:12.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
