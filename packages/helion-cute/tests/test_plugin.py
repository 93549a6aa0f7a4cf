"""helion-cute registers through its entry point and reports itself available."""

from __future__ import annotations

import importlib.metadata

import pytest

import helion_cute.backend as cute_backend
import helion_cute.plugin as cute_plugin
from helion import backends
from helion import plugins
from helion.backends.base import Backend

DISTRIBUTION = "helion-cute"


@pytest.fixture(autouse=True)
def fresh_plugin_manager(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(plugins.DISABLE_AUTOLOAD_ENV, raising=False)
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


def test_entry_point_names_the_plugin_module() -> None:
    entry_points = importlib.metadata.entry_points(group=plugins.ENTRY_POINT_GROUP)
    (entry_point,) = [ep for ep in entry_points if ep.name == "cute"]
    assert entry_point.value == "helion_cute.plugin"
    assert entry_point.dist is not None
    assert entry_point.dist.metadata["Name"] == DISTRIBUTION


def test_plugin_is_loaded_from_its_entry_point() -> None:
    version = importlib.metadata.version(DISTRIBUTION)
    assert ("cute", DISTRIBUTION, version) in plugins.list_plugins()
    assert plugins.get_plugin_manager().get_plugin("cute") is cute_plugin
    assert [f for f in plugins.load_failures() if f.distribution == DISTRIBUTION] == []


def test_backend_is_available_without_a_gpu() -> None:
    # compiling needs only the DSL; launching needs a GPU (see test_compile.py)
    backend = backends.get_backend("cute")
    assert isinstance(backend, Backend)
    assert backend.version() == importlib.metadata.version(DISTRIBUTION)
    assert backend.is_available() == (True, "")
    assert backend.cache_key().startswith("cute-")
    assert backends.default_backend_name() != "cute"


def test_reason_says_when_cutlass_dsl_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cute_backend, "is_installed", lambda module: False)
    available, reason = cute_backend.CuteBackend().is_available()
    assert available is False
    assert "nvidia-cutlass-dsl is not installed" in reason
