"""Settings and config keys that size the persistent grid (``persistent_reserved_sms``,
``Config.num_sm_multiplier``), ``autotune_force_persistent`` and ``print_repro`` on Triton."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.runtime.repro import FOOTER
from helion.runtime.repro import HEADER
from helion_triton.target import INTERPRETER_NUM_SMS
from helion_triton.target import target_for


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


def bind(fn, *args, **settings):
    settings.setdefault("autotune_effort", "none")
    return helion.kernel(fn, backend="triton", **settings).bind(args)


def grid_of(source: str, name: str = "add_one") -> str:
    (grid,) = re.findall(rf"_helion_{name}\[(.*?)\]\(", source)
    return grid


def without_config_comment(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if "helion.Config(" not in line)


# 64 elements in tiles of 4: 16 tiles, more than the interpreter's 4 "SMs" times 2
X = torch.randn(64)
PERSISTENT = {"block_sizes": [4], "pid_type": "persistent_blocked"}


def test_interpreter_sms():
    assert target_for("cpu").num_sms == INTERPRETER_NUM_SMS == 4


@pytest.mark.parametrize(
    ("reserved", "expected"), [(0, "(4,)"), (1, "(3,)"), (2, "(2,)"), (4, "(1,)"), (9, "(1,)")]
)
def test_persistent_reserved_sms_shrinks_the_grid(reserved, expected):
    bound = bind(add_one, X, persistent_reserved_sms=reserved)
    for pid_type in ("persistent_blocked", "persistent_interleaved"):
        config = {**PERSISTENT, "pid_type": pid_type}
        assert grid_of(bound.to_code(config)) == expected
        torch.testing.assert_close(bound.compile_config(config)(X), X + 1)


def test_persistent_reserved_sms_leaves_flat_kernels():
    config = {"block_sizes": [4], "pid_type": "flat"}
    plain = bind(add_one, X).to_code(config)
    reserved = bind(add_one, X, persistent_reserved_sms=2).to_code(config)
    assert plain == reserved and grid_of(plain) == "(16,)"


def test_persistent_reserved_sms_from_the_environment(monkeypatch):
    monkeypatch.setenv("HELION_PERSISTENT_RESERVED_SMS", "3")
    assert grid_of(bind(add_one, X).to_code(PERSISTENT)) == "(1,)"


def test_num_sm_multiplier_is_in_the_spec():
    spec = bind(add_one, X).config_spec
    fragment = spec["num_sm_multiplier"].fragment
    assert fragment.choices == (1, 2, 4, 8, 16, 32, 64, 128)
    assert fragment.search_choices == (1,)  # explicit configs only: the search keeps 1
    assert spec.default_config()["num_sm_multiplier"] == 1
    assert spec.normalize({**PERSISTENT, "num_sm_multiplier": 8})["num_sm_multiplier"] == 8
    with pytest.raises(exc.InvalidConfig, match="num_sm_multiplier"):
        spec.normalize({**PERSISTENT, "num_sm_multiplier": 3})
    with pytest.raises(exc.InvalidConfig, match="num_sm_multiplier"):
        spec.normalize({**PERSISTENT, "num_sm_multiplier": 256})


@pytest.mark.parametrize(
    ("multiplier", "reserved", "expected"),
    [(1, 0, "(4,)"), (2, 0, "(8,)"), (2, 2, "(4,)"), (128, 0, "(16,)")],  # capped at 16 tiles
)
def test_num_sm_multiplier_scales_the_persistent_grid(multiplier, reserved, expected):
    bound = bind(add_one, X, persistent_reserved_sms=reserved)
    config = {**PERSISTENT, "num_sm_multiplier": multiplier}
    assert grid_of(bound.to_code(config)) == expected
    torch.testing.assert_close(bound.compile_config(config)(X), X + 1)


def test_num_sm_multiplier_leaves_other_pid_types():
    bound = bind(add_one, X)
    flat = {"block_sizes": [4], "pid_type": "flat"}
    plain = bound.to_code(flat)
    multiplied = bound.to_code({**flat, "num_sm_multiplier": 4})
    assert without_config_comment(plain) == without_config_comment(multiplied)
    assert grid_of(multiplied) == "(16,)"


def test_barrier_kernels_keep_one_program_per_sm():
    bound = bind(with_barrier, X)
    assert "num_sm_multiplier" not in bound.config_spec
    config = bound.normalize({**PERSISTENT, "block_sizes": [4, 4], "num_sm_multiplier": 4})
    assert "num_sm_multiplier" not in config  # dropped, like any key the kernel lacks
    torch.testing.assert_close(bound.compile_config(config)(X), (X + 1) * 2)


def test_autotune_force_persistent_on_triton():
    plain = bind(add_one, X).config_spec
    assert plain.default_config()["pid_type"] == "flat"
    bound = bind(add_one, X, autotune_force_persistent=True)
    spec = bound.config_spec
    assert spec["pid_type"].fragment.choices == ("persistent_blocked", "persistent_interleaved")
    default = spec.default_config()
    assert default["pid_type"] == "persistent_blocked"
    with pytest.raises(exc.InvalidConfig, match="autotune_force_persistent"):
        spec.normalize({"block_sizes": [4], "pid_type": "flat"})
    assert "virtual_pid" in bound.to_code(default)
    torch.testing.assert_close(bound.compile_config(default)(X), X + 1)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty(a.size(0), b.size(1), dtype=a.dtype)
    for tm, tn in hl.tile([a.size(0), b.size(1)]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(a.size(1)):
            acc = torch.addmm(acc, a[tm, tk], b[tk, tn])
        out[tm, tn] = acc
    return out


def test_autotune_force_persistent_removes_xyz_too():
    a, b = torch.randn(32, 16), torch.randn(16, 32)
    plain = bind(matmul, a, b).config_spec
    assert "xyz" in plain["pid_type"].fragment.choices
    spec = bind(matmul, a, b, autotune_force_persistent=True).config_spec
    assert spec["pid_type"].fragment.choices == ("persistent_blocked", "persistent_interleaved")


def test_print_repro_on_triton(capsys, tmp_path):
    config = helion.Config(block_sizes=[16], pid_type="persistent_interleaved", num_sm_multiplier=2)
    kernel = helion.kernel(add_one, backend="triton", config=config, print_repro=True)
    torch.testing.assert_close(kernel(X), X + 1)
    err = capsys.readouterr().err
    script = err[err.index(HEADER) : err.index(FOOTER) + len(FOOTER)]
    assert "backend='triton'" in script and "num_sm_multiplier=2" in script
    path = tmp_path / "repro.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELION_")}
    result = subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
