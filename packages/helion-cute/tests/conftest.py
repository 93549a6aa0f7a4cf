"""Shared setup of helion-cute's tests: a private cache dir for generated and compiled kernels."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# cute_kernels.py sits next to the tests; importlib import mode does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))

from cute_host import run_on_host

from helion_cute.runtime import ALIGNMENT
from helion_cute.runtime import CuteCompiledKernel


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helion-cute-cache")


@pytest.fixture(autouse=True)
def _private_cache(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # only while a cute test runs, so other packages' tests see their own setting
    monkeypatch.setenv("HELION_CACHE_DIR", str(cache_dir))


@pytest.fixture
def on_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Launches of CuTe kernels run on the host CPU (see `cute_host`)."""

    def launch(self: CuteCompiledKernel, *values: object) -> None:
        tensors = [values[arg.index] for arg in self._tensor_args]
        aligned = all(t.data_ptr() % ALIGNMENT == 0 for t in tensors if t.numel())
        run_on_host(self.ir, self._generate(aligned), values, tmp_path)

    monkeypatch.setattr(CuteCompiledKernel, "__call__", launch)
