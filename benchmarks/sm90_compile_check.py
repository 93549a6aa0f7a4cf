"""Compile the example kernels for an sm_90 GPU without one, with the Triton the GPU has.

    VENV/bin/python benchmarks/sm90_compile_check.py check DIR [--kernels a,b | --benches a,b] [--random N]

VENV holds torch, helion-core, helion-triton and the Triton under test (e.g. the GPU machine's
3.6: the generated code depends on the Triton version, so generation and compilation both run
under it). ``record`` binds each example on CPU tensors (or, with ``--benches``, the kernels of
benchmarks/run.py at its sizes), generates the source that its seed configs, its default config
and N random configs get on a Hopper GPU (tensor descriptors, persistent programs), and records
each launch's signature: the launcher runs with Triton's JIT launch replaced by a recorder, so
nothing executes. ``compile`` compiles every recorded kernel for ``cuda:90`` and prints the
failures; ``check`` does both. Triton's compiler needs no GPU for this, so a compiler crash
such as 3.6's TritonGPURemoveLayoutConversions one on attention shows up on a CPU machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# torch dtype name -> Triton signature type
_POINTER_TYPES = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "bool": "i1",
    "float8_e4m3fn": "fp8e4nv",
    "float8_e5m2": "fp8e5",
}


def _signature_type(value: object) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return "*" + _POINTER_TYPES[str(value.dtype).removeprefix("torch.")]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    if value is None:
        return "constexpr"
    raise TypeError(f"no Triton type for {type(value).__name__}")


def _divisible(value: object) -> bool:
    """Whether Triton's JIT marks this argument ``tt.divisibility=16`` (a 16-byte aligned
    address, an int divisible by 16): what lets it emit 128-bit loads and stores."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.data_ptr() % 16 == 0
    return isinstance(value, int) and not isinstance(value, bool) and value % 16 == 0


def _cases(
    kernels: list[str], benches: list[str], conformance: list[str] = ()
) -> list[tuple[str, object, object]]:
    """(name, kernel function, args factory): the examples' own cases at their test shapes, the
    benchmarks' kernels at the sizes benchmarks/run.py times, or core's conformance cases
    (`helion.testing`: empty_slices, shared_block_size) on their inputs (CPU tensors)."""
    import torch

    if conformance:
        from helion.testing import empty_slices
        from helion.testing import shared_block_size

        families = {
            "empty_slices": [
                (c.id, c.fn, lambda c=c: c.inputs(torch.Generator().manual_seed(0), "cpu")[0])
                for c in empty_slices.EMPTY_SLICE_CASES
            ],
            "shared_block_size": [
                (c.id, c.fn, lambda c=c: c.inputs()) for c in shared_block_size.BLOCK_SIZE_CASES
            ],
        }
        return [case for family in conformance for case in families[family]]

    sys.path.insert(0, str(ROOT / "examples"))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    if benches:
        from run import BENCHES

        found = []
        for name in benches:
            bench = BENCHES[name]
            module = importlib.import_module(bench.module)
            found.append(
                (
                    name,
                    getattr(module, bench.kernel).fn,
                    lambda b=bench: b.make_args(torch.device("cpu")),
                )
            )
        return found
    from _common import SUITE

    found = []
    for stem in kernels or list(SUITE):
        spec = importlib.util.spec_from_file_location(
            f"sm90_{stem}", ROOT / "examples" / f"{stem}.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for case in module.CASES:
            found.append((case.name, case.kernel.fn, case.args or module.example_args))
    return found


def record(
    out: Path,
    kernels: list[str],
    benches: list[str],
    random_configs: int,
    conformance: list[str] = (),
) -> int:
    import torch
    import triton

    import helion
    import helion_triton.target as target_module
    from helion_triton.target import TritonTarget
    from helion_triton.target import has_block_ptr
    from helion_triton.target import range_kwargs

    hopper = TritonTarget("cuda", False, (9, 0), 132, has_block_ptr(), True, range_kwargs())
    # the backend asks target_for(device) which code to generate: answer Hopper for the CPU
    # tensors here (launching is replaced below, so nothing runs)
    target_module._target.cache_clear()
    original_target = target_module._target
    target_module._target = lambda device_type, index, forced: hopper  # type: ignore[assignment]
    import helion_triton.launcher as launcher_module

    # the direct launcher asks the CUDA driver for the current device: launch through the JIT
    launcher_module.use_direct_launch = lambda module, name: None  # type: ignore[assignment]

    launches: list[dict] = []

    def recording_run(self, *args, grid, warmup, **kwargs):  # Triton's signature
        names = list(self.arg_names)
        values = dict(zip(names, args, strict=False))
        values.update({k: v for k, v in kwargs.items() if k in names})
        constexprs = {name: values[name] for name in names if name in self.constexprs_names}
        launches.append(
            {
                "kernel": self.fn.__name__,
                "names": names,
                "signature": {
                    name: "constexpr" if name in constexprs else _signature_type(values.get(name))
                    for name in names
                },
                "constexprs": {
                    k: v for k, v in constexprs.items() if isinstance(v, (int, float, bool))
                },
                # the argument positions the JIT would mark divisible by 16 (its vectorization hint)
                "divisible": [
                    i
                    for i, name in enumerate(names)
                    if name not in constexprs and _divisible(values.get(name))
                ],
                "num_warps": int(kwargs.get("num_warps", 4)),
                "num_stages": int(kwargs.get("num_stages", 3)),
                "maxnreg": kwargs.get("maxnreg"),
            }
        )
        return None

    triton.runtime.jit.JITFunction.constexprs_names = property(  # type: ignore[attr-defined]
        lambda self: {self.arg_names[i] for i in self.constexprs}
    )
    triton.runtime.jit.JITFunction.run = recording_run
    count = 0
    for name, fn, make_args in _cases(kernels, benches, conformance):
        kernel = helion.kernel(fn, backend="triton", autotune_effort="none")
        args = make_args()
        args = tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)
        bound = kernel.bind(args)
        configs = [*list(bound.seed_configs()), bound.config_spec.default_config()]
        configs += [
            bound.config_spec.random_config(random.Random(s)) for s in range(random_configs)
        ]
        for index, config in enumerate(configs):
            launches.clear()
            label = f"{name}_{index}"
            problem = bound.backend.config_problem(bound.ir, config, torch.device("cuda"))
            if problem is not None:
                print(f"{label}: refused before compiling, as the autotuner does ({problem})")
                continue
            try:
                bound.compile_config(config)(*args)
            except Exception as error:  # recorded, not fatal
                print(f"{label}: not recorded ({type(error).__name__}: {str(error)[:120]})")
                continue
            source = bound.to_triton_code(config)
            for number, launch in enumerate(launches):
                entry = {"case": label, "config": repr(config), "source": source, **launch}
                (out / f"{label}_{number}.json").write_text(json.dumps(entry))
                count += 1
    target_module._target = original_target
    print(f"recorded {count} launches in {out}")
    return 0


def _ptxas_resources(ptx: str, path: Path) -> tuple[str, str]:
    """Registers per thread and spill bytes, as ``ptxas -v`` reports them (Triton's ptxas)."""
    import re
    import subprocess

    from triton.backends.nvidia.compiler import get_ptxas

    path.write_text(ptx)
    done = subprocess.run(
        [
            get_ptxas(90).path,
            "-v",
            "--gpu-name",
            "sm_90a",
            str(path),
            "-o",
            str(path.with_suffix(".cubin")),
        ],
        capture_output=True,
        text=True,
    )
    info = done.stderr + done.stdout
    regs = re.search(r"Used (\d+) registers", info)
    spills = re.search(r"(\d+) bytes spill stores", info)
    return (regs.group(1) if regs else "?"), (spills.group(1) if spills else "?")


def _memory_widths(cubin: bytes, path: Path) -> str:
    """The kernel's global loads and stores by width, from its SASS (Triton's cuobjdump):
    ``ld 128x4 16x2 / st 128x2`` -- a memory-bound kernel wants 128-bit accesses -- and the
    counts of TMA copies and warpgroup MMA instructions, where there are any."""
    import collections
    import os
    import re
    import subprocess

    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    path.write_bytes(cubin)
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True).stdout
    counts: dict[str, collections.Counter] = {
        "LDG": collections.Counter(),
        "STG": collections.Counter(),
    }
    for op, suffixes in re.findall(r"\b(LDG|STG)((?:\.[A-Z0-9_]+)*)", sass):
        parts = suffixes.split(".")
        bits = next((int(p) for p in parts if p in ("64", "128")), None)
        if bits is None:
            bits = (
                8
                if any(p in ("U8", "S8") for p in parts)
                else 16
                if any(p in ("U16", "S16") for p in parts)
                else 32
            )
        counts[op][bits] += 1

    def text(counter: collections.Counter) -> str:
        return " ".join(f"{bits}x{n}" for bits, n in sorted(counter.items(), reverse=True)) or "-"

    # tensor-memory-accelerator copies and warpgroup MMAs (Hopper's fast paths), where used
    extra = collections.Counter(
        {
            "tma": len(re.findall(r"\bUTMA(?:LDG|STG)\b", sass)),
            "wgmma": len(re.findall(r"\b[HQIB]GMMA\b", sass)),
        }
    )
    notes = "".join(f" {name} {count}" for name, count in extra.items() if count)
    return f"ld {text(counts['LDG'])} / st {text(counts['STG'])}{notes}"


def compile_all(directory: Path, verbose: bool = False) -> int:
    import triton
    from triton.backends.compiler import GPUTarget

    failures = 0
    report: list[tuple] = []
    entries = sorted(directory.glob("*.json"))
    for path in entries:
        entry = json.loads(path.read_text())
        module_path = directory / (path.stem + ".py")
        # the generated module imports torch for its launcher; the kernel itself does not need it
        module_path.write_text(entry["source"].replace("import torch\n", "", 1))
        spec = importlib.util.spec_from_file_location(f"sm90_{path.stem}", module_path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            jit = getattr(module, entry["kernel"])  # the launched one, not a combine function
            attrs = {(i,): [["tt.divisibility", 16]] for i in entry.get("divisible", [])}
            source = triton.compiler.ASTSource(
                jit, entry["signature"], constexprs=entry["constexprs"], attrs=attrs
            )
            compiled = triton.compile(
                source,
                target=GPUTarget("cuda", 90, 32),
                options={
                    "num_warps": entry["num_warps"],
                    "num_stages": entry["num_stages"],
                    **({"maxnreg": entry["maxnreg"]} if entry.get("maxnreg") else {}),
                },
            )
            if verbose:
                regs, spills = _ptxas_resources(
                    compiled.asm["ptx"], directory / (path.stem + ".ptx")
                )
                widths = _memory_widths(compiled.asm["cubin"], directory / (path.stem + ".cubin"))
                report.append(
                    (entry["case"], regs, spills, compiled.metadata.shared, widths, entry["config"])
                )
        except Exception as error:  # reported per kernel
            failures += 1
            lines = [
                ln
                for ln in str(error).splitlines()
                if "error" in ln.lower() or "failed" in ln.lower()
            ]
            print(
                f"FAIL {entry['case']}: {type(error).__name__}: {(lines or [str(error)])[-1][:200]}"
            )
            print(f"     {entry['config']}")
    if verbose:
        print(
            f"{'kernel':28} {'regs':>5} {'spills':>6} {'shared':>7}  {'global loads / stores (bits x count), TMA, wgmma':40} config"
        )
        for case, regs, spills, shared, widths, config in report:
            print(f"{case:28} {regs!s:>5} {spills!s:>6} {shared!s:>7}  {widths:40} {config}")
    print(
        f"triton {triton.__version__}: {len(entries) - failures} of {len(entries)} compiled for cuda:90"
    )
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["check", "record", "compile"])
    parser.add_argument("dir")
    parser.add_argument("--kernels", default="")
    parser.add_argument(
        "--benches",
        default="",
        help="benchmarks/run.py kernels at its sizes, instead of the examples",
    )
    parser.add_argument(
        "--conformance",
        default="",
        help="core's conformance cases instead of the examples: empty_slices,shared_block_size",
    )
    parser.add_argument("--random", type=int, default=0)
    parser.add_argument(
        "--resources",
        action="store_true",
        help="print ptxas's registers and spills, the shared memory and the global load and store widths per kernel",
    )
    ns = parser.parse_args()
    directory = Path(ns.dir)
    directory.mkdir(parents=True, exist_ok=True)
    if ns.mode in ("check", "record"):
        split = lambda text: [k for k in text.split(",") if k]  # noqa: E731
        status = record(
            directory, split(ns.kernels), split(ns.benches), ns.random, split(ns.conformance)
        )
        if ns.mode == "record" or status:
            return status
    return compile_all(directory, verbose=ns.resources)


if __name__ == "__main__":
    sys.exit(main())
