"""Public Helion's ways of calling the autotuner: `Kernel.autotune(args, **options)` with the
search's options."""

from __future__ import annotations

import torch

import helion
import helion.language as hl


def add_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, :] + 1
    return out


def test_autotune_takes_max_generations_over_the_setting(tmp_path, monkeypatch) -> None:
    """`max_generations=` given to autotune() overrides `autotune_max_generations` (it was
    passed to the search twice: a TypeError)."""
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    kernel = helion.kernel(add_one, backend="ref", autotune_max_generations=5)
    x = torch.randn(67, 9)
    config = kernel.autotune((x,), max_generations=1, max_evaluations=3)
    assert isinstance(config, helion.Config)
    torch.testing.assert_close(kernel(x), x + 1)
