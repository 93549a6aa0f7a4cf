"""helion-triton registers its backend through its entry point and reports it honestly.

Written against the backend protocol, not the placeholder, so it keeps holding once the real
code generator replaces ``helion_triton.plugin``.
"""

from __future__ import annotations

import importlib.metadata

import pytest

from helion import backends
from helion import exc
from helion import plugins
from helion.backends.base import Backend

DISTRIBUTION = "helion-triton"


@pytest.fixture(autouse=True)
def fresh_plugin_manager(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(plugins.DISABLE_AUTOLOAD_ENV, raising=False)
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


def test_entry_point_names_the_plugin_module() -> None:
    entry_points = importlib.metadata.entry_points(group=plugins.ENTRY_POINT_GROUP)
    (entry_point,) = [ep for ep in entry_points if ep.name == "triton"]
    assert entry_point.value == "helion_triton.plugin"
    assert entry_point.dist is not None
    assert entry_point.dist.metadata["Name"] == DISTRIBUTION


def test_plugin_is_loaded_from_its_entry_point() -> None:
    version = importlib.metadata.version(DISTRIBUTION)
    assert ("triton", DISTRIBUTION, version) in plugins.list_plugins()
    assert [f for f in plugins.load_failures() if f.distribution == DISTRIBUTION] == []


def test_backend_reports_its_availability_honestly() -> None:
    backend = backends.get_backend("triton", require_available=False)
    assert isinstance(backend, Backend)
    assert backend.name == "triton"
    assert backends.backend_provider("triton").distribution == DISTRIBUTION
    available, reason = backend.is_available()
    assert isinstance(available, bool)
    if available:
        assert backends.get_backend("triton") is backend
        assert backends.default_backend_name() == "triton"
    else:
        assert reason, "an unavailable backend must say why"
        assert backends.default_backend_name() == "ref"
        with pytest.raises(exc.BackendUnavailable, match="triton"):
            backends.get_backend("triton")
