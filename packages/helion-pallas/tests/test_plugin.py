"""helion-pallas registers its backend through its entry point; the backend is available where
JAX is installed."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

import helion_pallas.plugin as pallas_plugin
from helion import backends
from helion import plugins
from helion.backends.base import Backend

DISTRIBUTION = "helion-pallas"


@pytest.fixture(autouse=True)
def fresh_plugin_manager(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(plugins.DISABLE_AUTOLOAD_ENV, raising=False)
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


def test_entry_point_names_the_plugin_module() -> None:
    entry_points = importlib.metadata.entry_points(group=plugins.ENTRY_POINT_GROUP)
    (entry_point,) = [ep for ep in entry_points if ep.name == "pallas"]
    assert entry_point.value == "helion_pallas.plugin"
    assert entry_point.dist is not None
    assert entry_point.dist.metadata["Name"] == DISTRIBUTION


def test_plugin_is_loaded_from_its_entry_point() -> None:
    version = importlib.metadata.version(DISTRIBUTION)
    assert ("pallas", DISTRIBUTION, version) in plugins.list_plugins()
    assert plugins.get_plugin_manager().get_plugin("pallas") is pallas_plugin
    assert [f for f in plugins.load_failures() if f.distribution == DISTRIBUTION] == []


def test_backend_is_available_with_jax() -> None:
    backend = backends.get_backend("pallas")
    assert isinstance(backend, Backend)
    assert backend.version() == importlib.metadata.version(DISTRIBUTION)
    assert backend.is_available() == (True, "")
    assert backend.supports_device(torch.device("cpu"))
    assert backend.supports_device("cuda:0")
    assert "jax" in backend.cache_key()
    assert backends.default_backend_name() != "pallas"


def test_reason_says_when_jax_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from helion_pallas.backend import PallasBackend

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("jax", "jaxlib") else real(name, *a),
    )
    available, reason = PallasBackend().is_available()
    assert available is False
    assert "jax and jaxlib not installed" in reason


def test_plugin_module_imports_no_toolkit() -> None:
    import subprocess
    import sys

    code = "import sys, helion_pallas.plugin; print('jax' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
