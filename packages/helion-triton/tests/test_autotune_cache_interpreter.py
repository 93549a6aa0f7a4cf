"""Quick-effort autotuning of a small kernel through the Triton interpreter writes the cache; a
second process gets the same config from it without tuning (HELION_ASSERT_CACHE_HIT makes a
miss an error there)."""

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
    import json, logging, sys
    import torch
    import helion
    import helion.language as hl

    @helion.kernel(backend="triton", autotune_effort="quick", autotune_progress_bar=False,
                   autotune_budget_seconds=8)
    def scale_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile_m, tile_n in hl.tile(x.size()):
            out[tile_m, tile_n] = x[tile_m, tile_n] * w[tile_n][None, :]
        return out

    torch.manual_seed(int(sys.argv[1]))
    x, w = torch.randn(37, 45), torch.randn(45)
    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logging.getLogger("helion").addHandler(handler)
    logging.getLogger("helion").setLevel(logging.INFO)
    out = scale_rows(x, w)
    torch.testing.assert_close(out, x * w[None, :])
    bound = scale_rows.bind((x, w))
    tuned = any("autotuning done" in message for message in records)
    print(json.dumps({"config": repr(bound.ensure_config_exists((x, w))), "tuned": tuned}))
    """
)


def _run(cache: Path, seed: int, **env: str) -> dict:
    script = cache.parent / "tune_scale_rows.py"  # a kernel's source must live in a file
    script.write_text(CHILD)
    done = subprocess.run(
        [sys.executable, str(script), str(seed)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "HELION_CACHE_DIR": str(cache), **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_quick_tuning_is_cached_and_a_second_process_reuses_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _run(cache, 0)
    assert first["tuned"] is True
    assert any(cache.rglob("*.json")), "no cache entry was written"
    # new inputs of the same shape: the same specialization key, so the same cache entry
    second = _run(cache, 1, HELION_ASSERT_CACHE_HIT="1")
    assert second == {"config": first["config"], "tuned": False}
