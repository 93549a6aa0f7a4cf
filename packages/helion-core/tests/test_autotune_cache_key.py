"""The on-disk autotune cache key of a kernel that takes a function argument is the same in every
process: the function counts by what its code does and what it captures, not by the address its
code object happens to have."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = """
import json
import sys

import torch

import helion
import helion.language as hl
from helion.autotuner.cache import AutotuneCache


def apply(x: torch.Tensor, fn) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = fn(x[tile])
    return out


def affine(scale, shift):
    def epilogue(v):
        return v * scale + shift

    return epilogue


def composed(inner_scale):
    inner = affine(inner_scale, 0.5)  # a captured closure: its own captures count too
    return lambda v: torch.sigmoid(inner(v))


def doubled(activation):
    return lambda v: activation(v) * 2.0  # a captured torch function


# move this process's allocations (and so its code objects' addresses) by a varying amount
ballast = [object() for _ in range(int(sys.argv[2]))]
kernel = helion.kernel(apply, backend="ref", autotune_effort="none")
x = torch.randn(37)
cases = {
    "affine_2": affine(2.0, 1.0),
    "affine_3": affine(3.0, 1.0),
    "composed_2": composed(2.0),
    "composed_3": composed(3.0),
    "sigmoid": doubled(torch.sigmoid),
    "tanh": doubled(torch.tanh),
}
keys = {}
for name, fn in cases.items():
    torch.testing.assert_close(kernel(x, fn), fn(x))
    cache = AutotuneCache(kernel.bind((x, fn)), directory=sys.argv[1])
    keys[name] = {"key": cache.key, "specialization_key": cache.key_parts["specialization_key"]}
print(json.dumps(keys))
"""


def _keys_in_fresh_process(script: Path, cache: Path, ballast: int, hash_seed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, str(script), str(cache), str(ballast)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_function_argument_key_is_stable_across_processes(tmp_path):
    script = tmp_path / "kernels_with_function_args.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    first = _keys_in_fresh_process(script, tmp_path / "cache", 10, "1")
    second = _keys_in_fresh_process(script, tmp_path / "cache", 5000, "2")
    assert first == second
    for entry in first.values():
        assert "0x" not in entry["specialization_key"], entry
    # a different captured constant (directly, or inside a captured closure) or a different
    # captured function is a different kernel
    assert len({entry["key"] for entry in first.values()}) == len(first)


_MODULE = """
import torch
import helion.language as hl

SCALE = {scale}


def helper(v):
    return {helper}


def scaled(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = helper(x[tile]) * SCALE
    return out
"""


def _source_hash(tmp_path: Path, name: str, scale: str, helper: str) -> str:
    import importlib.util

    import torch

    import helion

    path = tmp_path / f"{name}.py"
    path.write_text(_MODULE.format(scale=scale, helper=helper))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = helion.kernel(module.scaled, backend="ref", autotune_effort="none")
    return kernel.bind((torch.randn(13),)).cache_key()["source_hash"]


def test_the_key_follows_the_helpers_and_constants_the_kernel_reads(tmp_path: Path) -> None:
    """A module-level constant or a helper function the kernel calls changes the generated code
    as its own text does: the key changes with them (it hashed only the kernel's text)."""
    base = _source_hash(tmp_path, "k_base", "2.0", "v + 1")
    assert _source_hash(tmp_path, "k_same", "2.0", "v + 1") == base
    assert _source_hash(tmp_path, "k_scale", "3.0", "v + 1") != base
    assert _source_hash(tmp_path, "k_helper", "2.0", "torch.sin(v)") != base
