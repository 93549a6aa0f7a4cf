"""helion-distributed registers through its entry point; it provides ops, not a backend."""

from __future__ import annotations

import importlib.metadata

import pytest

import helion_distributed.plugin as distributed_plugin
from helion import backends
from helion import plugins

DISTRIBUTION = "helion-distributed"


@pytest.fixture(autouse=True)
def fresh_plugin_manager(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(plugins.DISABLE_AUTOLOAD_ENV, raising=False)
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


def test_entry_point_names_the_plugin_module() -> None:
    entry_points = importlib.metadata.entry_points(group=plugins.ENTRY_POINT_GROUP)
    (entry_point,) = [ep for ep in entry_points if ep.name == "distributed"]
    assert entry_point.value == "helion_distributed.plugin"
    assert entry_point.dist is not None
    assert entry_point.dist.metadata["Name"] == DISTRIBUTION


def test_plugin_is_loaded_from_its_entry_point() -> None:
    version = importlib.metadata.version(DISTRIBUTION)
    assert ("distributed", DISTRIBUTION, version) in plugins.list_plugins()
    assert plugins.get_plugin_manager().get_plugin("distributed") is distributed_plugin
    assert [f for f in plugins.load_failures() if f.distribution == DISTRIBUTION] == []


def test_provides_language_ops_hook_and_no_backend() -> None:
    from helion_distributed.language import LANGUAGE_OPS
    from helion_distributed.remote_copy import REMOTE_COPY_LANGUAGE_OPS

    results = plugins.call_each_plugin("helion_language_ops")
    from_distributed = [r for r in results if r.plugin.distribution == DISTRIBUTION]
    assert [r.value for r in from_distributed] == [[*LANGUAGE_OPS, *REMOTE_COPY_LANGUAGE_OPS]]
    names = {op.name for op in LANGUAGE_OPS}
    assert {
        "signal",
        "wait",
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "peer_tensors",
        "symm_mem",
    } <= names
    providers = [backends.backend_provider(b.name) for b in backends.list_backends()]
    assert all(p is None or p.distribution != DISTRIBUTION for p in providers)


def test_language_ops_resolve_through_helion_language() -> None:
    import helion.language as hl
    from helion_distributed import language

    assert hl.signal is language.signal
    assert hl.all_reduce is language.all_reduce
    assert hl.symm_mem.empty is not None
    from helion_distributed import remote_copy

    assert hl.make_async_remote_copy is remote_copy.make_async_remote_copy
    assert hl.AsyncCopyDescriptor is remote_copy.AsyncCopyDescriptor
    assert hl.remote_barrier is remote_copy.remote_barrier


def test_lowerings_reach_the_ref_and_triton_tables() -> None:
    from helion.backends.ref.lowerings import ref_lowerings
    from helion_distributed import language
    from helion_distributed import remote_copy

    table = ref_lowerings()
    assert all(op in table for op in (*language.OPS, *remote_copy.OPS))
    results = plugins.call_each_plugin("helion_lowerings", backend="triton")
    from_distributed = [r.value for r in results if r.plugin.distribution == DISTRIBUTION]
    assert set(from_distributed[0]) == set(language.OPS) | set(remote_copy.OPS)
    assert [
        r.value
        for r in plugins.call_each_plugin("helion_lowerings", backend="pallas")
        if r.plugin.distribution == DISTRIBUTION
    ] == [{}]
