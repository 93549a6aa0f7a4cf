"""Settings that change what a kernel does: ``print_repro`` and ``autotune_force_persistent``
(on the core side; the Triton grid settings are tested in helion-triton)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.autotuner.config_fragment import EnumFragment
from helion.autotuner.config_spec import ConfigSpec
from helion.backends.ref import RefBackend
from helion.passes.config_spec import force_persistent
from helion.runtime.repro import FOOTER
from helion.runtime.repro import HEADER
from helion.runtime.repro import repro_script

SCALE = 2.0


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("HELION_", "TRITON_")):
            monkeypatch.delenv(name)


def _offset(value: float) -> float:
    return value + math.pi


def axpy(x: torch.Tensor, y: torch.Tensor, counts: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * alpha * SCALE + y[tile] + counts[tile].to(x.dtype)
    return out


def _axpy_args() -> tuple:
    x = torch.randn(8, 12)
    y = torch.randn(12, 8).t()  # strided
    counts = torch.randint(0, 3, (8, 12), dtype=torch.int32)
    return x, y, counts, 0.5


def _repro_from(stderr: str) -> str:
    assert HEADER in stderr, stderr
    start = stderr.index(HEADER)
    end = stderr.index(FOOTER, start) + len(FOOTER)
    return stderr[start:end]


def _run_script(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "repro.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELION_", "TRITON_"))}
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# ---------------------------------------------------------------------------------------------
# print_repro


def test_print_repro_prints_a_script_that_runs(capsys, tmp_path):
    config = helion.Config(block_sizes=[4, 8])
    kernel = helion.kernel(axpy, backend="ref", config=config, print_repro=True)
    args = _axpy_args()
    kernel(*args)
    script = _repro_from(capsys.readouterr().err)
    assert "@helion.kernel(config=helion.Config(block_sizes=[4, 8]" in script
    assert "static_shapes=True" in script and "backend='ref'" in script
    assert "print_repro" not in script
    assert "def axpy(x: torch.Tensor" in script
    assert "torch.randn((8, 12), dtype=torch.float32, device='cpu')" in script
    assert ".as_strided((8, 12), (1, 8))" in script  # y keeps its strides
    assert "torch.randint(0, 4, (8, 12), dtype=torch.int32, device='cpu')" in script
    assert "alpha = 0.5" in script and "SCALE = 2.0" in script
    assert "return axpy(x, y, counts, alpha)" in script
    result = _run_script(script, tmp_path)
    assert result.returncode == 0, result.stderr
    # once per config: a second call prints nothing
    kernel(*args)
    assert HEADER not in capsys.readouterr().err


def test_print_repro_from_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("HELION_PRINT_REPRO", "1")
    kernel = helion.kernel(axpy, backend="ref", autotune_effort="none")
    kernel(*_axpy_args())
    script = _repro_from(capsys.readouterr().err)
    # the chosen (default) config is the one written into the decorator
    bound = kernel.bind(_axpy_args())
    assert f"config={bound._config!r}" in script
    compile(script, "<repro>", "exec")


def test_print_repro_off_by_default_and_in_eager_mode(capsys):
    helion.kernel(axpy, backend="ref", config=helion.Config(block_sizes=[4, 8]))(*_axpy_args())
    eager = helion.kernel(axpy, print_repro=True, ref_mode=helion.RefMode.EAGER)
    eager(*_axpy_args())
    assert HEADER not in capsys.readouterr().err


def helper_kernel(x: torch.Tensor, table: list[int], opaque: object) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = _offset(x[tile])
    return out


def test_repro_script_writes_todos_for_what_it_cannot_rebuild():
    kernel = helion.kernel(helper_kernel, backend="ref", config=helion.Config(block_sizes=[4]))
    x = torch.randn(16, dtype=torch.float16)
    opaque = lambda v: v  # noqa: E731 (a function argument: no expression rebuilds it)
    bound = kernel.bind((x, [1, 2], opaque))
    script = repro_script(bound, bound.normalize({"block_sizes": [4]}), (x, [1, 2], opaque))
    compile(script, "<repro>", "exec")  # valid Python
    assert "table = [1, 2]" in script
    assert "opaque = None  # TODO: argument of type function" in script
    assert "def _offset(value: float) -> float:" in script  # the helper's source
    assert "import math" in script
    assert "torch.randn((16,), dtype=torch.float16, device='cpu')" in script


def test_repro_scalars_that_repr_does_not_write():
    kernel = helion.kernel(helper_kernel, backend="ref", config=helion.Config(block_sizes=[4]))
    x = torch.randn(16)
    args = (x, [float("inf"), float("nan"), True], None)
    bound = kernel.bind(args)
    script = repro_script(bound, bound.normalize({"block_sizes": [4]}), args)
    compile(script, "<repro>", "exec")
    assert 'table = [float("inf"), float("nan"), True]' in script


# ---------------------------------------------------------------------------------------------
# autotune_force_persistent


def add_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


def with_barrier(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    hl.barrier()
    for tile in hl.tile(x.size(0)):
        out[tile] = out[tile] * 2
    return out


@pytest.fixture
def ref_keeps_pid_type(monkeypatch):
    """The ref backend drops ``pid_type``; keep it so the core restriction can be seen."""
    monkeypatch.setattr(RefBackend, "tunables", lambda self, ir, spec, device: None)


def test_force_persistent_restricts_pid_type(ref_keeps_pid_type):
    x = torch.randn(64)
    plain = helion.kernel(add_one, backend="ref").bind((x,))
    assert plain.config_spec.default_config()["pid_type"] == "flat"
    kernel = helion.kernel(add_one, backend="ref", autotune_force_persistent=True)
    spec = kernel.bind((x,)).config_spec
    assert spec["pid_type"].fragment.choices == ("persistent_blocked", "persistent_interleaved")
    assert spec.default_config()["pid_type"] == "persistent_blocked"
    import random

    rng = random.Random(0)
    assert {spec.random_config(rng)["pid_type"] for _ in range(20)} <= {
        "persistent_blocked",
        "persistent_interleaved",
    }
    with pytest.raises(exc.InvalidConfig, match="autotune_force_persistent"):
        spec.normalize({"block_sizes": [16], "pid_type": "flat"})


def test_force_persistent_keeps_existing_restrictions(ref_keeps_pid_type):
    x = torch.randn(64)
    kernel = helion.kernel(with_barrier, backend="ref", autotune_force_persistent=True)
    spec = kernel.bind((x,)).config_spec
    assert spec["pid_type"].fragment.choices == ("persistent_blocked",)


def test_force_persistent_without_persistent_choices_leaves_the_spec():
    spec = ConfigSpec()
    spec.set_scalar("pid_type", EnumFragment(("flat",)))
    force_persistent(spec)  # no crash
    assert spec["pid_type"].fragment.choices == ("flat",)
    force_persistent(ConfigSpec())  # no pid_type at all


def test_force_persistent_from_the_environment(monkeypatch, ref_keeps_pid_type):
    monkeypatch.setenv("HELION_AUTOTUNE_FORCE_PERSISTENT", "1")
    spec = helion.kernel(add_one, backend="ref").bind((torch.randn(64),)).config_spec
    assert spec.default_config()["pid_type"] == "persistent_blocked"
