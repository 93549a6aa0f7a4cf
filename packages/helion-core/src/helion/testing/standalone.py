"""Run self-contained modules (``to_code(options=OutputCodeOptions(allow_helion_deps=False))``)
where helion cannot be imported: the check that such a module really stands on its own.

    from helion.testing.standalone import run_without_helion

    source = bound.to_code(options=helion.OutputCodeOptions(allow_helion_deps=False))
    [out] = run_without_helion({"add": source}, [("add", "add", (x, y))])

The modules are written to a temporary directory and imported in a new Python process whose
import system refuses ``helion`` and every ``helion_*`` package (and any other root named in
``hidden``), so an import of one anywhere, even a lazy one inside a function, fails there. The
calls' arguments and results cross as pickles: torch tensors, NumPy arrays, numbers; JAX arrays
in the results come back as NumPy arrays.

`persistent_add` is a kernel body whose host code calls `helion.runtime.get_num_sm` and
`helion.cdiv`, which a standalone module must carry: the backends' export tests share it.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any
from typing import Mapping
from typing import Sequence

import torch

import helion
import helion.language as hl

_RUNNER = textwrap.dedent(
    """
    import importlib.abc
    import importlib.util
    import os
    import pickle
    import sys

    HIDDEN = {hidden!r}


    def hidden(name):
        root = name.split(".")[0]
        return root in HIDDEN or root.startswith("helion_")


    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if hidden(name):
                raise ImportError(f"{{name}} is hidden from this process")
            return None


    sys.meta_path.insert(0, Hide())


    def plain(value):
        if isinstance(value, (tuple, list)):
            return type(value)(plain(item) for item in value)
        if type(value).__module__.split(".")[0] in ("jax", "jaxlib"):
            import numpy

            return numpy.asarray(value)
        return value


    with open(sys.argv[1], "rb") as file:
        modules, calls = pickle.load(file)
    loaded = {{}}
    for name, path in modules.items():
        spec = importlib.util.spec_from_file_location(f"standalone_{{name}}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        loaded[name] = module
    results = [plain(getattr(loaded[name], entry)(*args)) for name, entry, args in calls]
    leaked = sorted(name for name in sys.modules if hidden(name))
    with open(sys.argv[2], "wb") as file:
        pickle.dump((results, sorted(sys.modules), leaked), file)
    # The results are on disk; skip the interpreter's teardown, where JAX's and torch's
    # worker threads can abort the process ("terminate called without an active exception").
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
    """
)


def run_without_helion(
    modules: Mapping[str, str],
    calls: Sequence[tuple[str, str, tuple]],
    *,
    env: Mapping[str, str] | None = None,
    hidden: Sequence[str] = (),
    timeout: float = 600,
) -> tuple[list[Any], list[str]]:
    """Import ``modules`` and make ``calls`` in a new process that cannot import helion.

    Args:
        modules: Module name -> source.
        calls: ``(module name, function name, arguments)``, made in order.
        env: Environment variables to set in the process (``TRITON_INTERPRET=1``).
        hidden: Further top-level packages to refuse (``("torch",)`` for a pure-JAX module).
        timeout: Seconds before the process is killed.

    Returns:
        The calls' results, and the names of the modules the process had imported at the end.

    Raises:
        AssertionError: The process failed (its stderr is in the message).
    """
    with tempfile.TemporaryDirectory(prefix="helion-standalone-") as directory:
        folder = Path(directory)
        paths = {}
        for name, source in modules.items():
            paths[name] = str(folder / f"{name}.py")
            Path(paths[name]).write_text(source)
        runner = folder / "runner.py"
        runner.write_text(_RUNNER.format(hidden=("helion", *hidden)))
        inputs, outputs = folder / "calls.pickle", folder / "results.pickle"
        with open(inputs, "wb") as file:
            pickle.dump((paths, list(calls)), file)
        environment = dict(os.environ, **(env or {}))
        done = subprocess.run(
            [sys.executable, str(runner), str(inputs), str(outputs)],
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=directory,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"the standalone modules failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
            )
        with open(outputs, "rb") as file:
            results, imported, leaked = pickle.load(file)
    if leaked:
        raise AssertionError(f"hidden packages were imported: {leaked}")
    return results, imported


def persistent_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x + y`` by rows on a persistent grid: worker w adds rows w, w + workers, ..."""
    out = torch.empty_like(x)
    m, _ = x.shape
    num_workers = helion.runtime.get_num_sm(x.device)
    rows_per_worker = helion.cdiv(m, num_workers)
    for worker in hl.grid(num_workers):
        for i in hl.grid(rows_per_worker):
            row = worker + i * num_workers
            if row < m:
                out[row, :] = x[row, :] + y[row, :]
    return out
