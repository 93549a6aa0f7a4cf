"""`BoundKernel.to_code(options=OutputCodeOptions(...))` on the Pallas backend: self-contained
modules (torch and JAX only) and pure-JAX ones (``jax_fn=True``), each run in a process where
helion (and, for ``jax_fn``, torch) cannot be imported; and what `get_cached_path` and
`backend_cache_key` report for a backend that keeps its code in memory."""

from __future__ import annotations

import ast
import re

import numpy
import pytest
import torch
from pallas_kernels import CASES_BY_NAME

import helion
from helion import exc
from helion.testing.standalone import persistent_add
from helion.testing.standalone import run_without_helion

STANDALONE = helion.OutputCodeOptions(allow_helion_deps=False)
JAX_FN = helion.OutputCodeOptions(allow_helion_deps=False, jax_fn=True)
JAX_CPU = {"JAX_PLATFORMS": "cpu"}


def _bound(fn, args):
    return helion.kernel(fn, backend="pallas", autotune_effort="none").bind(args)


def _imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add((node.module or "").split(".")[0])
    return found


# elementwise, a reduction, a matmul, atomics (the copied-in `hp` helpers) with a runtime
# int, and a persistent kernel sized by get_num_sm; every shape a non-power of two
NAMES = ["add", "sum", "matmul", "histogram"]


def test_standalone_modules_run_without_helion() -> None:
    modules, calls, expected = {}, [], []
    for name in NAMES:
        case = CASES_BY_NAME[name]
        args = case.args()
        source = _bound(case.fn, args).to_code(options=STANDALONE)
        assert _imports(source) <= {"torch", "jax"}, name
        modules[name] = source
        calls.append((name, case.fn.__name__, args))
        expected.append(case.reference(*args))
    x, y = torch.randn(13, 7), torch.randn(13, 7)
    modules["persistent"] = _bound(persistent_add, (x, y)).to_code(options=STANDALONE)
    calls.append(("persistent", "persistent_add", (x, y)))
    expected.append(x + y)
    assert "class hp:" in modules["histogram"]  # the interpret-mode atomics, copied in
    assert "def _helion_get_num_sm(" in modules["persistent"]
    results, _ = run_without_helion(modules, calls, env=JAX_CPU)
    for name, got, want in zip([*NAMES, "persistent"], results, expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=name)


def test_jax_fn_module_needs_neither_torch_nor_helion() -> None:
    modules, calls, expected = {}, [], []
    for name in ("matmul", "histogram"):
        case = CASES_BY_NAME[name]
        args = case.args()
        source = _bound(case.fn, args).to_code(options=JAX_FN)
        assert _imports(source) == {"jax"}, name
        modules[name] = source
        expected.append(case.reference(*args))
    # the function takes the device code's tensors (outputs' initial values included), then
    # its runtime scalars, and returns the new values of the tensors it writes
    x, y = CASES_BY_NAME["matmul"].args()
    calls.append(("matmul", "matmul", (numpy.zeros((70, 33), numpy.float32), x.numpy(), y.numpy())))
    values, bins = CASES_BY_NAME["histogram"].args()
    assert "def histogram(counts, x, num_bins):" in modules["histogram"]
    calls.append(
        (
            "histogram",
            "histogram",
            (numpy.zeros(bins, numpy.int32), values.numpy(), numpy.int64(bins)),
        )
    )
    results, imported = run_without_helion(modules, calls, env=JAX_CPU, hidden=("torch",))
    assert "jax" in imported and "torch" not in imported
    for got, want in zip(results, expected, strict=True):
        [array] = got
        torch.testing.assert_close(torch.from_numpy(array), want, atol=1e-4, rtol=1e-4)


def test_jax_fn_allows_helion_deps_by_default() -> None:
    case = CASES_BY_NAME["add"]
    bound = _bound(case.fn, case.args())
    source = bound.to_code(options=helion.OutputCodeOptions(jax_fn=True))
    assert _imports(source) == {"jax"}
    assert "def add(out, x, y):" in source


def test_pallas_keeps_its_code_in_memory() -> None:
    case = CASES_BY_NAME["add"]
    bound = _bound(case.fn, case.args())
    assert bound.get_cached_path() is None
    key = bound.backend_cache_key()
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    assert bound.backend_cache_key() == key
    assert bound.backend_cache_key(helion.Config(block_sizes=[8, 128])) != key


def test_ref_backend_names_itself_when_refusing_jax_fn() -> None:
    case = CASES_BY_NAME["add"]
    bound = helion.kernel(case.fn, backend="ref", autotune_effort="none").bind(case.args())
    with pytest.raises(exc.OutputCodeUnsupported, match=r"jax_fn=True.*'ref' backend"):
        bound.to_code(options=JAX_FN)
