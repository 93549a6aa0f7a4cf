"""`helion._testing`, public Helion's example harness: `run_example` checks and times a kernel
against a baseline, `code_and_output` / `output_only` run one config."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion._testing import DEVICE
from helion._testing import code_and_output
from helion._testing import output_only
from helion._testing import run_example


def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] * 3.0
    return out


def test_run_example_checks_times_and_prints_the_table(capsys) -> None:
    kernel = helion.kernel(scale, backend="ref", autotune_effort="none")
    x = torch.randn(101, device="cpu")
    times = run_example(kernel, {"eager": lambda v: v * 3.0, "twice": lambda v: v + v + v}, (x,))
    assert set(times) == {"helion", "eager", "twice"} and all(t > 0 for t in times.values())
    table = capsys.readouterr().err
    assert "Implementation" in table and "(ref)" in table and "helion" in table
    assert DEVICE.type in ("cpu", "cuda")


def test_run_example_reports_a_wrong_kernel() -> None:
    kernel = helion.kernel(scale, backend="ref", autotune_effort="none")
    with pytest.raises(AssertionError, match="helion"):
        run_example(kernel, lambda v: v * 2.0, (torch.randn(37),))
    with pytest.raises(exc.InvalidAPIUsage, match="bwd"):
        run_example(kernel, lambda v: v * 3.0, (torch.randn(37),), bwd=True)


def test_code_and_output_use_the_given_config() -> None:
    kernel = helion.kernel(scale, backend="ref", autotune_effort="none")
    x = torch.randn(37)
    code, result = code_and_output(kernel, (x,), block_size=8)
    assert code == kernel.bind((x,)).to_code(helion.Config(block_sizes=[8]))
    torch.testing.assert_close(result, x * 3.0)
    torch.testing.assert_close(output_only(kernel, (x,)), x * 3.0)
