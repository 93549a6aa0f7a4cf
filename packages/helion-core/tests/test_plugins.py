"""Plugin manager, backend registry and ``helion`` command, with toy plugins and no installs.

Entry points are exercised through ``*.dist-info`` folders written into a temporary directory
on ``sys.path``: importlib.metadata finds them exactly as it finds installed distributions.
"""

from __future__ import annotations

import importlib.metadata
import os
import pickle
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pluggy
import pytest
import torch

from helion import backends
from helion import cli
from helion import exc
from helion import plugins
from helion.backends.base import Backend
from helion.backends.base import CompiledKernel
from helion.plugins import hookimpl
from helion.plugins import manager


class ToyCompiledKernel:
    source = "# toy source"

    def __call__(self, *kernel_args: object) -> None:
        return None


class ToyBackend(Backend):
    name = "toy"

    def compile(self, ir: object, config: object) -> CompiledKernel:
        return ToyCompiledKernel()


class UnavailableBackend(ToyBackend):
    name = "broken-toy"

    def is_available(self) -> tuple[bool, str]:
        return False, "needs a device this machine does not have"


class BackendsPlugin:
    """A plugin object providing the given backends."""

    def __init__(self, *provided: Backend) -> None:
        self.provided = list(provided)

    @hookimpl
    def helion_backends(self) -> list[Backend]:
        return self.provided


@pytest.fixture(autouse=True)
def no_autoload(monkeypatch: pytest.MonkeyPatch):
    """Each test starts from a fresh manager that loads no installed plugin."""
    monkeypatch.setenv(plugins.DISABLE_AUTOLOAD_ENV, "1")
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


def write_distribution(
    root: Path, name: str, entry_points: dict[str, str], modules: dict[str, str]
) -> None:
    """Write a distribution into ``root`` as pip would install it (metadata + modules)."""
    dist_info = root / f"{name.replace('-', '_')}-1.2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    lines = [f"[{plugins.ENTRY_POINT_GROUP}]"]
    lines += [f"{ep_name} = {target}" for ep_name, target in entry_points.items()]
    (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module_name, source in modules.items():
        (root / f"{module_name}.py").write_text(textwrap.dedent(source))


GOOD_PLUGIN = """
from helion.backends.base import Backend
from helion.plugins import hookimpl

class GoodBackend(Backend):
    name = "good"
    def compile(self, ir, config):
        raise AssertionError("not compiled in these tests")

@hookimpl
def helion_backends():
    return [GoodBackend()]
"""


TOY_MODULES = ("toy_good_plugin", "toy_exploding_plugin", "toy_misspelled_plugin", "toy_impostor")


@pytest.fixture
def installed_toys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Fake installed distributions: one good, one that raises at import, one whose plugin
    implements a hook that does not exist, and one whose plugin name is already taken."""
    write_distribution(
        tmp_path, "toy-good", {"good": "toy_good_plugin"}, {"toy_good_plugin": GOOD_PLUGIN}
    )
    write_distribution(
        tmp_path,
        "toy-exploding",
        {"exploding": "toy_exploding_plugin"},
        {"toy_exploding_plugin": "raise RuntimeError('toy plugin exploded at import')\n"},
    )
    write_distribution(
        tmp_path,
        "toy-misspelled",
        {"misspelled": "toy_misspelled_plugin"},
        {
            "toy_misspelled_plugin": """
            from helion.plugins import hookimpl

            @hookimpl
            def helion_backend():  # missing the trailing s
                return []
            """
        },
    )
    write_distribution(
        tmp_path, "toy-impostor", {"good": "toy_impostor"}, {"toy_impostor": GOOD_PLUGIN}
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(plugins.DISABLE_AUTOLOAD_ENV)
    plugins.reset_plugin_manager()
    yield tmp_path
    for module_name in TOY_MODULES:
        sys.modules.pop(module_name, None)


# --- the manager -------------------------------------------------------------------------------


def test_import_helion_does_not_build_the_manager() -> None:
    code = (
        "import helion, helion.plugins, helion.backends, helion.cli\n"
        "assert not helion.plugins.is_loaded(), 'plugins were discovered at import time'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_manager_is_built_once_and_cached() -> None:
    assert not plugins.is_loaded()
    first = plugins.get_plugin_manager()
    assert plugins.is_loaded()
    assert plugins.get_plugin_manager() is first
    assert first.project_name == "helion"
    plugins.reset_plugin_manager()
    assert plugins.get_plugin_manager() is not first


def test_core_plugin_is_registered_even_without_autoload() -> None:
    rows = plugins.list_plugins()
    assert [row.name for row in rows] == ["core"]
    assert rows[0].distribution == "helion-core"
    assert plugins.autoload_disabled()


def test_autoload_disabled_never_reads_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise AssertionError("entry points were read although autoload is disabled")

    monkeypatch.setattr(manager, "_discover_entry_points", fail)
    plugins.get_plugin_manager()


def test_entry_points_load_one_by_one(installed_toys: Path) -> None:
    names = {row.name: row for row in plugins.list_plugins()}
    assert names["good"] == ("good", "toy-good", "1.2.3")
    assert "exploding" not in names
    assert "misspelled" not in names
    assert backends.get_backend("good").name == "good"

    failures = {failure.distribution: failure for failure in plugins.load_failures()}
    exploding = failures["toy-exploding"]
    assert exploding.plugin == "exploding"
    assert exploding.version == "1.2.3"
    assert exploding.entry_point == "exploding = toy_exploding_plugin"
    assert exploding.phase == "import"
    assert exploding.error == "RuntimeError('toy plugin exploded at import')"
    assert "toy_exploding_plugin.py" in exploding.traceback
    assert "toy-exploding 1.2.3" in exploding.describe()

    misspelled = failures["toy-misspelled"]
    assert misspelled.phase == "register"
    assert "helion_backend" in misspelled.error

    impostor = failures["toy-impostor"]
    assert impostor.phase == "register"
    assert "already used by toy-good 1.2.3" in impostor.error


def test_register_plugin_explicitly() -> None:
    plugin = BackendsPlugin(ToyBackend())
    plugins.register_plugin(plugin, "toys", distribution="toy-dist", version="9")
    assert ("toys", "toy-dist", "9") in plugins.list_plugins()
    assert plugins.plugin_info("toys") == ("toys", "toy-dist", "9")
    assert isinstance(backends.get_backend("toy"), ToyBackend)


def test_register_plugin_rejects_name_and_object_reuse() -> None:
    plugin = BackendsPlugin()
    plugins.register_plugin(plugin, "toys")
    with pytest.raises(ValueError, match="named 'toys' is already registered"):
        plugins.register_plugin(BackendsPlugin(), "toys")
    with pytest.raises(ValueError, match="already registered as helion plugin 'toys'"):
        plugins.register_plugin(plugin, "other-name")


def test_register_plugin_rejects_unknown_hooks() -> None:
    class Misspelled:
        @hookimpl
        def helion_search_algorithm(self) -> dict[str, type]:
            return {}

    with pytest.raises(pluggy.PluginValidationError, match="helion_search_algorithm"):
        plugins.register_plugin(Misspelled(), "misspelled")
    assert plugins.plugin_info("misspelled") is None
    assert plugins.get_plugin_manager().get_plugin("misspelled") is None


def test_register_plugin_rejects_arguments_not_in_spec() -> None:
    class WrongArgs:
        @hookimpl
        def helion_lowerings(self, backend: str, device: str) -> dict:
            return {}

    with pytest.raises(pluggy.PluginValidationError, match="device"):
        plugins.register_plugin(WrongArgs(), "wrong-args")


def test_unregister_and_reset_drop_plugins() -> None:
    plugins.register_plugin(BackendsPlugin(ToyBackend()), "toys")
    assert "toy" in [backend.name for backend in backends.list_backends()]
    plugins.unregister_plugin("toys")
    assert "toy" not in [backend.name for backend in backends.list_backends()]
    with pytest.raises(KeyError):
        plugins.unregister_plugin("toys")

    plugins.register_plugin(BackendsPlugin(ToyBackend()), "toys")
    plugins.reset_plugin_manager()
    assert plugins.plugin_info("toys") is None
    assert "toy" not in [backend.name for backend in backends.list_backends()]


def test_call_each_plugin_isolates_a_raising_hook() -> None:
    class Raising:
        @hookimpl
        def helion_backends(self) -> list[Backend]:
            raise ZeroDivisionError("toy hook failure")

    plugins.register_plugin(Raising(), "raising", distribution="toy-raising", version="0.1")
    plugins.register_plugin(BackendsPlugin(ToyBackend()), "toys")
    assert isinstance(backends.get_backend("toy"), ToyBackend)

    (failure,) = [f for f in plugins.load_failures() if f.plugin == "raising"]
    assert failure.phase == "hook helion_backends"
    assert failure.distribution == "toy-raising"
    assert failure.error == "ZeroDivisionError('toy hook failure')"
    assert "raised in helion_backends()" in failure.describe()

    # Rebuilding the registry calls the hook again, but the failure is reported once.
    plugins.register_plugin(BackendsPlugin(), "empty")
    backends.list_backends()
    assert len([f for f in plugins.load_failures() if f.plugin == "raising"]) == 1


def test_call_each_plugin_passes_arguments_and_attributes_results() -> None:
    class Lowerings:
        @hookimpl
        def helion_lowerings(self, backend: str) -> dict:
            return {"op": f"rule for {backend}"}

    class NoArguments:
        # An impl may take fewer arguments than its spec.
        @hookimpl
        def helion_lowerings(self) -> dict:
            return {"other": "rule"}

    class NoOpinion:
        @hookimpl
        def helion_lowerings(self, backend: str) -> None:
            return None

    plugins.register_plugin(Lowerings(), "lowerings")
    plugins.register_plugin(NoArguments(), "no-arguments")
    plugins.register_plugin(NoOpinion(), "no-opinion")
    results = plugins.call_each_plugin("helion_lowerings", backend="toy")
    assert [(r.plugin.name, r.value) for r in results] == [
        ("lowerings", {"op": "rule for toy"}),
        ("no-arguments", {"other": "rule"}),
    ]
    with pytest.raises(TypeError, match="backend"):
        plugins.call_each_plugin("helion_lowerings")
    with pytest.raises(ValueError, match="not a helion hook"):
        plugins.call_each_plugin("helion_no_such_hook")


def test_generation_changes_with_the_plugin_set() -> None:
    plugins.get_plugin_manager()
    before = plugins.generation()
    plugins.register_plugin(BackendsPlugin(), "toys")
    after_register = plugins.generation()
    assert after_register != before
    plugins.unregister_plugin("toys")
    assert plugins.generation() != after_register


# --- the backend registry ----------------------------------------------------------------------


def test_ref_backend_is_built_in() -> None:
    ref = backends.get_backend("ref", require_available=False)
    assert ref.name == "ref"
    assert backends.backend_provider("ref") == plugins.plugin_info("core")
    assert backends.default_backend_name() == "ref"


def test_duplicate_backend_names_are_an_error() -> None:
    plugins.register_plugin(
        BackendsPlugin(ToyBackend()), "first", distribution="toy-a", version="1"
    )
    plugins.register_plugin(
        BackendsPlugin(ToyBackend()), "second", distribution="toy-b", version="2"
    )
    plugins.register_plugin(BackendsPlugin(ToyBackend()), "third")
    with pytest.raises(exc.BackendUnavailable) as caught:
        backends.get_backend("toy")
    message = str(caught.value)
    assert "more than one plugin" in message
    assert "toy-a 1" in message and "toy-b 2" in message and "'third'" in message
    assert "toy" not in [backend.name for backend in backends.list_backends()]
    (problem,) = backends.backend_problems()
    assert "'toy'" in problem


def test_hook_results_that_are_not_backends_are_reported() -> None:
    class NotBackends:
        @hookimpl
        def helion_backends(self) -> object:
            return ["not a backend"]

    class NotAList:
        @hookimpl
        def helion_backends(self) -> object:
            return ToyBackend()

    plugins.register_plugin(NotBackends(), "not-backends")
    plugins.register_plugin(NotAList(), "not-a-list")
    problems = backends.backend_problems()
    assert any("'not a backend'" in p and "not an instance" in p for p in problems)
    assert any("'not-a-list'" in p and "must return a list" in p for p in problems)


def test_missing_first_party_backend_says_what_to_install() -> None:
    with pytest.raises(exc.BackendUnavailable) as caught:
        backends.get_backend("pallas")
    assert not isinstance(caught.value, exc.UnknownBackend)  # a known name, just not installed
    message = str(caught.value)
    assert "'pallas'" in message
    assert "helion-pallas" in message
    assert "pip install helion-core[pallas]" in message


def test_unknown_backend_lists_installed_ones() -> None:
    plugins.register_plugin(BackendsPlugin(ToyBackend()), "toys")
    with pytest.raises(exc.UnknownBackend) as caught:
        backends.get_backend("no-such-backend")
    assert isinstance(caught.value, exc.BackendUnavailable)  # what callers already catch
    message = str(caught.value)
    assert "Unknown backend 'no-such-backend'" in message
    assert "toy" in message
    assert "not a first-party backend (cute, pallas, ref, triton)" in message
    assert plugins.ENTRY_POINT_GROUP in message
    assert pickle.loads(pickle.dumps(caught.value)).args == caught.value.args


def test_missing_backend_error_mentions_its_failed_plugin(installed_toys: Path) -> None:
    with pytest.raises(exc.BackendUnavailable) as caught:
        backends.get_backend("exploding")
    # the name of a plugin that failed to load is known: not reported as a misspelt one
    assert not isinstance(caught.value, exc.UnknownBackend)
    assert "toy plugin exploded at import" in str(caught.value)


def test_unavailable_backend_raises_with_its_reason() -> None:
    plugins.register_plugin(BackendsPlugin(UnavailableBackend()), "toys", distribution="toy-dist")
    with pytest.raises(exc.BackendUnavailable) as caught:
        backends.get_backend("broken-toy")
    message = str(caught.value)
    assert "needs a device this machine does not have" in message
    assert "toy-dist" in message
    backend = backends.get_backend("broken-toy", require_available=False)
    assert isinstance(backend, UnavailableBackend)
    assert backends.backend_availability("broken-toy") == (
        False,
        "needs a device this machine does not have",
    )


def test_is_available_that_raises_counts_as_unavailable() -> None:
    class Crashing(ToyBackend):
        def is_available(self) -> tuple[bool, str]:
            raise OSError("driver exploded")

    plugins.register_plugin(BackendsPlugin(Crashing()), "toys")
    available, reason = backends.backend_availability("toy")
    assert not available
    assert "driver exploded" in reason


def test_default_backend_prefers_an_available_triton() -> None:
    class FakeTriton(ToyBackend):
        name = "triton"
        usable = True

        def is_available(self) -> tuple[bool, str]:
            return self.usable, "" if self.usable else "no GPU"

    plugins.register_plugin(BackendsPlugin(FakeTriton()), "fake-triton")
    assert backends.default_backend_name() == "triton"

    FakeTriton.usable = False
    plugins.reset_plugin_manager()
    plugins.register_plugin(BackendsPlugin(FakeTriton()), "fake-triton")
    assert backends.default_backend_name() == "ref"


# --- the Backend base class --------------------------------------------------------------------


def test_backend_must_implement_compile() -> None:
    class Incomplete(Backend):
        name = "incomplete"

    with pytest.raises(TypeError, match="compile"):
        Incomplete()  # type: ignore[abstract]


def test_backend_defaults() -> None:
    backend = ToyBackend()
    assert backend.is_available() == (True, "")
    assert backend.version() == "unknown"
    assert backend.cache_key() == "toy-unknown"
    assert backend.supports_device("cpu")
    assert backend.seed_configs(None, None, torch.device("cpu")) == []  # type: ignore[arg-type]
    assert backend.check(None) is None  # type: ignore[arg-type]
    assert isinstance(backend.compile(None, None), CompiledKernel)  # type: ignore[arg-type]
    assert "toy" in repr(backend)


def test_backend_version_comes_from_its_distribution() -> None:
    class Versioned(ToyBackend):
        distribution = "pluggy"

    assert Versioned().version() == importlib.metadata.version("pluggy")
    assert Versioned().cache_key() == f"toy-{importlib.metadata.version('pluggy')}"


def test_supports_device_follows_device_types() -> None:
    class CudaOnly(ToyBackend):
        device_types = ("cuda",)

    assert CudaOnly().supports_device("cuda:1")
    assert not CudaOnly().supports_device(torch.device("cpu"))


def test_benchmark_returns_median_milliseconds() -> None:
    calls = []

    def sleep_two_ms() -> None:
        calls.append(None)
        time.sleep(0.002)

    elapsed_ms = ToyBackend().benchmark(sleep_two_ms, device="cpu", repeat=7)
    assert len(calls) == 8  # one warm-up run, then the timed ones
    assert 2.0 <= elapsed_ms < 50.0
    with pytest.raises(ValueError, match="repeat"):
        ToyBackend().benchmark(sleep_two_ms, device="cpu", repeat=0)


def test_benchmark_picks_repeat_from_warmup_time() -> None:
    calls = []
    ToyBackend().benchmark(lambda: calls.append(None), device="cpu")
    assert len(calls) == 101  # a near-instant function gets the maximum of 100 timed runs
    calls.clear()
    ToyBackend().benchmark(lambda: (calls.append(None), time.sleep(0.03)), device="cpu")
    assert len(calls) == 6  # a 30 ms function gets the minimum of 5


# --- the helion command ------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_without_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys)
    assert code == 2
    assert "backends" in out and "plugins" in out and "show" in out and "cache" in out


def test_cli_backends_lists_availability(capsys: pytest.CaptureFixture[str]) -> None:
    plugins.register_plugin(
        BackendsPlugin(ToyBackend(), UnavailableBackend()), "toys", distribution="toy-dist"
    )
    code, out, _ = run_cli(capsys, "backends")
    assert code == 0
    toy_line = next(line for line in out.splitlines() if line.startswith("toy "))
    assert "toy-dist" in toy_line and "available" in toy_line
    broken_line = next(line for line in out.splitlines() if line.startswith("broken-toy "))
    assert "unavailable: needs a device this machine does not have" in broken_line
    assert "default backend: ref" in out


def test_cli_plugins_lists_plugins_and_failures(
    installed_toys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "plugins")
    assert code == 0
    assert any(line.split()[:3] == ["good", "toy-good", "1.2.3"] for line in out.splitlines())
    failure_line = next(line for line in out.splitlines() if line.startswith("exploding "))
    assert "toy-exploding" in failure_line
    assert "exploding = toy_exploding_plugin" in failure_line
    assert "RuntimeError('toy plugin exploded at import')" in failure_line

    code, out, _ = run_cli(capsys, "plugins", "--verbose")
    assert "Traceback (most recent call last)" in out


def test_cli_plugins_says_when_autoload_is_off(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "plugins")
    assert code == 0
    assert plugins.DISABLE_AUTOLOAD_ENV in out


def test_cli_tables_use_rich_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    cli._print_table("Title", ["name", "error"], [["x", "RuntimeError('[bold]y[/bold]')"]])
    out = capsys.readouterr().out
    assert "Title" in out and "┃" in out
    assert "[bold]y[/bold]" in out  # rich markup in error text is printed, not interpreted


def fake_cache_module(entries: list[object], removed: object) -> types.ModuleType:
    module = types.ModuleType("helion.autotuner.cache")
    module.list_entries = lambda: entries  # type: ignore[attr-defined]
    module.clear = lambda: removed  # type: ignore[attr-defined]
    return module


def test_cli_cache_list_and_clear(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = [{"kernel": "add", "backend": "ref", "config": {"block_sizes": [32]}}]
    monkeypatch.setitem(sys.modules, "helion.autotuner.cache", fake_cache_module(entries, 3))
    code, out, _ = run_cli(capsys, "cache", "list")
    assert code == 0
    assert "kernel" in out and "add" in out and '{"block_sizes": [32]}' in out
    assert "1 entry." in out
    code, out, _ = run_cli(capsys, "cache", "clear")
    assert code == 0
    assert "removed 3 cache entries." in out

    monkeypatch.setitem(sys.modules, "helion.autotuner.cache", fake_cache_module([], None))
    assert "empty" in run_cli(capsys, "cache", "list")[1]
    assert "cleared" in run_cli(capsys, "cache", "clear")[1]


def test_cli_cache_without_cache_module_fails_clearly(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry in sys.modules makes the import raise ImportError.
    monkeypatch.setitem(sys.modules, "helion.autotuner.cache", None)
    code, _, err = run_cli(capsys, "cache", "list")
    assert code == 1
    assert "autotune cache is not available" in err


SHOW_FILE = """
import json

class FakeBound:
    def __init__(self, args):
        self.args = args

    def ir_text(self):
        return f"kernel add(args={self.args})"

    def to_code(self, config=None):
        if config is None:
            return "# code for the default config"
        return "# code for " + json.dumps(dict(config), sort_keys=True)

class FakeKernel:
    def bind(self, args):
        return FakeBound(args)

add = FakeKernel()
not_a_kernel = 42

def example_args():
    return (1, 2)

def single_arg():
    return 7
"""


@pytest.fixture
def show_file(tmp_path: Path) -> Path:
    path = tmp_path / "fake_kernels.py"
    path.write_text(SHOW_FILE)
    return path


def test_cli_show_prints_ir_and_code(show_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "show", f"{show_file}:add")
    assert code == 0
    assert "# Kernel IR\nkernel add(args=(1, 2))" in out
    assert "# Generated code\n# code for the default config" in out

    code, out, _ = run_cli(capsys, "show", f"{show_file}:add", "--args-factory", "single_arg")
    assert "kernel add(args=(7,))" in out

    code, out, _ = run_cli(capsys, "show", f"{show_file}:add", "--config", '{"num_warps": 4}')
    assert code == 0
    assert '# code for {"num_warps": 4}' in out

    config_file = show_file.parent / "config.json"
    config_file.write_text('{"num_warps": 8}')
    code, out, _ = run_cli(capsys, "show", f"{show_file}:add", "--config", str(config_file))
    assert '# code for {"num_warps": 8}' in out


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["{file}"], "expected FILE:KERNEL"),
        (["{file}:missing"], "defines no 'missing'"),
        (["{file}:not_a_kernel"], "not a Helion kernel"),
        (["{file}:add", "--args-factory", "nope"], "must define a function nope()"),
        (["{file}:add", "--config", "{{not json"], "not valid JSON"),
        (["{file}:add", "--config", "[1, 2]"], "must be a JSON object"),
        (["{file}.missing.py:add"], "no such file"),
    ],
)
def test_cli_show_usage_errors(
    show_file: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], expected: str
) -> None:
    argv = [argument.format(file=show_file) for argument in arguments]
    code, _, err = run_cli(capsys, "show", *argv)
    assert code == 2
    assert expected in err


def test_python_dash_m_helion_runs_the_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "helion", "backends"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, plugins.DISABLE_AUTOLOAD_ENV: "1"},
    )
    assert "Backends" in result.stdout
    assert "default backend:" in result.stdout
