"""An unusable ``HELION_CACHE_DIR`` (a regular file, a directory without write permission) is
reported once per autotune run, not once by every forked screening child, and the run still
tunes the kernel (its generated modules go to a private directory instead)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    import helion
    import helion.language as hl

    @helion.kernel(backend="triton", autotune_effort="quick", autotune_progress_bar=False,
                   autotune_precompile="fork", autotune_precompile_jobs=2,
                   autotune_random_seed=0)
    def scale_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile_m, tile_n in hl.tile(x.size()):
            out[tile_m, tile_n] = x[tile_m, tile_n] * w[tile_n][None, :]
        return out

    x, w = torch.randn(37, 45), torch.randn(45)
    config = scale_rows.autotune((x, w), max_evaluations=6, budget_seconds=20)
    torch.testing.assert_close(scale_rows(x, w), x * w[None, :])
    print(json.dumps({"config": repr(config)}))
    """
)

WARNING = "cannot write generated kernels"


def _tune(tmp_path: Path, cache_dir: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "tune_with_bad_cache.py"  # a kernel's source must live in a file
    script.write_text(CHILD)
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        # "default": the once-per-location filter a user's run has, not pytest's "always"
        env={**os.environ, "HELION_CACHE_DIR": str(cache_dir), "PYTHONWARNINGS": "default"},
    )


@pytest.mark.parametrize("kind", ["file", "read-only"])
def test_an_unusable_cache_dir_is_warned_about_once_per_search(tmp_path: Path, kind: str) -> None:
    if kind == "file":
        cache_dir = tmp_path / "not-a-directory"
        cache_dir.write_text("a file where the cache directory should be")
    else:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            pytest.skip("root writes into a read-only directory")
        cache_dir = tmp_path / "read-only"
        cache_dir.mkdir()
        cache_dir.chmod(0o500)
    try:
        done = _tune(tmp_path, cache_dir)
    finally:
        if kind == "read-only":
            cache_dir.chmod(0o700)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "config" in json.loads(done.stdout.strip().splitlines()[-1])
    assert done.stderr.count(WARNING) == 1, done.stderr[-3000:]
    assert "autotuning done" in done.stderr
