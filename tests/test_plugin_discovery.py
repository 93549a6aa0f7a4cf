"""Third-party plugins are discovered through real installed distributions.

Builds two tiny distributions with hatchling (a working "toy" backend, and a plugin that raises
at import), pip-installs them into a throwaway venv layered on the one running the tests, and
checks from that venv what a user would see: the toy backend is found through its entry point,
``helion backends`` lists it, and the broken plugin is reported while everything else works.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helion import plugins

TOY_DISTRIBUTION = "helion-toy-backend"
BROKEN_DISTRIBUTION = "helion-broken-plugin"

TOY_PLUGIN = """
from helion.backends.base import Backend
from helion.plugins import hookimpl


class ToyCompiledKernel:
    source = "# toy kernel"

    def __call__(self, *kernel_args):
        return None


class ToyBackend(Backend):
    name = "toy"
    distribution = "helion-toy-backend"

    def compile(self, ir, config):
        return ToyCompiledKernel()


@hookimpl
def helion_backends():
    return [ToyBackend()]
"""

BROKEN_PLUGIN = """
raise RuntimeError("broken plugin exploded on import")
"""

PROBE = """
import json
from helion import backends, plugins

toy = backends.get_backend("toy")
broken = [f for f in plugins.load_failures() if f.distribution == "helion-broken-plugin"]
print(json.dumps({
    "module": type(toy).__module__,
    "version": toy.version(),
    "source": toy.compile(None, None).source,
    "provider": list(backends.backend_provider("toy")),
    "plugins": [list(row) for row in plugins.list_plugins()],
    "failures": [
        {"plugin": f.plugin, "version": f.version, "entry_point": f.entry_point,
         "phase": f.phase, "error": f.error}
        for f in broken
    ],
}))
"""


def write_distribution(root: Path, name: str, version: str, plugin_source: str) -> Path:
    package = name.replace("-", "_")
    project = root / name
    (project / package).mkdir(parents=True)
    (project / package / "__init__.py").write_text("")
    (project / package / "plugin.py").write_text(textwrap.dedent(plugin_source))
    entry_point_name = name.removeprefix("helion-").split("-")[0]
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [build-system]
            requires = ["hatchling"]
            build-backend = "hatchling.build"

            [project]
            name = "{name}"
            version = "{version}"

            [project.entry-points."helion.plugins"]
            {entry_point_name} = "{package}.plugin"

            [tool.hatch.build.targets.wheel]
            packages = ["{package}"]
            """
        )
    )
    return project


def layer_on_running_environment(python: Path) -> None:
    """Make the packages of the running interpreter (torch, helion, hatchling) visible.

    ``--system-site-packages`` only exposes the *base* interpreter's packages when the tests
    themselves run in a venv, so a ``.pth`` file adds the running environment's site
    directories. ``site.addsitedir`` also processes their ``.pth`` files, which is how editable
    installs of the helion packages put their sources on ``sys.path``.
    """
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site_dirs = [*site.getsitepackages(), site.getusersitepackages()]
    lines = [f"import site; site.addsitedir({directory!r})" for directory in site_dirs]
    Path(purelib, "_helion_test_parent_env.pth").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the toy and broken plugin distributions installed; returns its python."""
    root = tmp_path_factory.mktemp("plugin-discovery")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    layer_on_running_environment(python)
    toy = write_distribution(root / "src", TOY_DISTRIBUTION, "0.3.0", TOY_PLUGIN)
    broken = write_distribution(root / "src", BROKEN_DISTRIBUTION, "0.0.1", BROKEN_PLUGIN)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(toy),
            str(broken),
        ],
        check=True,
    )
    return python


def run_in(python: Path, *args: str, **env_overrides: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != plugins.DISABLE_AUTOLOAD_ENV}
    env.update(env_overrides)
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, env=env, check=False, timeout=120
    )


def test_toy_backend_is_found_through_its_entry_point(plugin_venv: Path) -> None:
    result = run_in(plugin_venv, "-c", PROBE)
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout)
    assert probe["module"] == "helion_toy_backend.plugin"
    assert probe["version"] == "0.3.0"
    assert probe["source"] == "# toy kernel"
    assert probe["provider"] == ["toy", TOY_DISTRIBUTION, "0.3.0"]


def test_helion_backends_lists_the_toy_backend(plugin_venv: Path) -> None:
    result = run_in(plugin_venv, "-m", "helion", "backends")
    assert result.returncode == 0, result.stderr
    (toy_line,) = [line for line in result.stdout.splitlines() if line.startswith("toy ")]
    assert toy_line.split() == ["toy", TOY_DISTRIBUTION, "0.3.0", "available"]


def test_broken_plugin_is_reported_and_others_keep_working(plugin_venv: Path) -> None:
    probe = json.loads(run_in(plugin_venv, "-c", PROBE).stdout)
    assert probe["failures"] == [
        {
            "plugin": "broken",
            "version": "0.0.1",
            "entry_point": "broken = helion_broken_plugin.plugin",
            "phase": "import",
            "error": "RuntimeError('broken plugin exploded on import')",
        }
    ]
    plugin_names = [row[0] for row in probe["plugins"]]
    assert "toy" in plugin_names and "core" in plugin_names
    assert "broken" not in plugin_names

    result = run_in(plugin_venv, "-m", "helion", "plugins")
    assert result.returncode == 0, result.stderr
    (failure_line,) = [line for line in result.stdout.splitlines() if line.startswith("broken ")]
    assert BROKEN_DISTRIBUTION in failure_line
    assert "RuntimeError('broken plugin exploded on import')" in failure_line


def test_disabling_autoload_hides_installed_plugins(plugin_venv: Path) -> None:
    code = (
        "from helion import backends\n"
        "try:\n"
        "    backends.get_backend('toy')\n"
        "except Exception as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    result = run_in(plugin_venv, "-c", code, **{plugins.DISABLE_AUTOLOAD_ENV: "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("UnknownBackend")  # a BackendUnavailable: not first-party
    assert "no installed plugin provides it" in result.stdout
