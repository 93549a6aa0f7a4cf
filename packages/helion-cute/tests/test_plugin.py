"""helion-cute registers through its entry point and says honestly that it cannot compile."""

from __future__ import annotations

import importlib.metadata

import pytest

import helion_cute.plugin as cute_plugin
from helion import backends
from helion import exc
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


def test_backend_reports_itself_unavailable() -> None:
    backend = backends.get_backend("cute", require_available=False)
    assert isinstance(backend, Backend)
    assert backend.version() == importlib.metadata.version(DISTRIBUTION)
    available, reason = backend.is_available()
    assert available is False
    assert reason.endswith("code generation not implemented yet")
    assert backends.default_backend_name() != "cute"
    with pytest.raises(exc.BackendUnavailable, match="not implemented yet"):
        backends.get_backend("cute")


def test_reason_says_when_cutlass_dsl_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cute_plugin, "_is_installed", lambda module: False)
    available, reason = cute_plugin.CuteBackend().is_available()
    assert available is False
    assert "nvidia-cutlass-dsl is not installed" in reason
    assert "not implemented yet" in reason


def test_compile_and_check_raise_backend_unsupported() -> None:
    backend = cute_plugin.CuteBackend()
    with pytest.raises(exc.BackendUnsupported, match="cute"):
        backend.compile(None, None)  # type: ignore[arg-type]
    with pytest.raises(exc.BackendUnsupported):
        backend.check(None)  # type: ignore[arg-type]
