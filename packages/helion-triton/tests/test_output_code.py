"""`BoundKernel.to_code(options=OutputCodeOptions(...))`, `get_cached_path` and
`backend_cache_key` on the Triton backend, and persistent kernels sized by
`helion.runtime.get_num_sm`.

A self-contained module must import torch and Triton only, and run its kernel, host code
included, in a process where helion cannot be imported (with ``TRITON_INTERPRET=1`` on CPU)."""

from __future__ import annotations

import ast
import importlib.util
import math
import re
from pathlib import Path

import kernels as K
import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.autotuner import PowerOfTwoFragment
from helion.testing.standalone import persistent_add
from helion.testing.standalone import run_without_helion
from helion_triton import launcher
from helion_triton.target import interpreter_forced

STANDALONE = helion.OutputCodeOptions(allow_helion_deps=False)


def scaled(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    factor = hl.register_tunable("factor", PowerOfTwoFragment(1, 8, 2))
    out = torch.empty_like(x)
    for tile in hl.tile(m):
        out[tile, :] = x[tile, :] * factor
    return out


SCALE = 0.5  # a module global the device code reads: lifted into a kernel argument
OUT_DTYPE = torch.float32


def specialized(x: torch.Tensor) -> torch.Tensor:
    """hl.specialize, helion.next_power_of_2, a module, a dtype and a float from the module."""
    n = hl.specialize(x.size(1))
    width = helion.next_power_of_2(n)
    half = math.floor(n / 2)
    out = torch.empty([x.size(0)], dtype=OUT_DTYPE, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile, :].sum(-1) * SCALE + width + half
    return out


def _rows(m: int) -> int:
    return m


def calls_a_local_helper(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    rows = _rows(x.size(0))
    for tile in hl.tile(rows):
        out[tile] = x[tile] * 2
    return out


def _bind(fn, *args, **settings):
    settings.setdefault("autotune_effort", "none")
    return helion.kernel(fn, backend="triton", **settings).bind(args)


def _imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
    return found


def _names(source: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


# (name, kernel, arguments, reference, config): elementwise, reductions, a matmul, the
# helion calls host code may make; every shape a non-power of two
CASES = [
    ("add", K.add, lambda: (torch.randn(37, 19), torch.randn(37, 19)), torch.add, None),
    ("row_sum", K.row_sum, lambda: (torch.randn(13, 45),), lambda x: x.sum(-1), None),
    (
        "softmax_looped",
        K.softmax,
        lambda: (torch.randn(11, 70),),
        lambda x: torch.softmax(x, 1),
        None,
    ),
    (
        "matmul",
        K.matmul,
        lambda: (torch.randn(37, 29), torch.randn(29, 23)),
        torch.mm,
        helion.Config(block_sizes=[16, 16, 16]),
    ),
    (
        "registered_block",
        K.registered_block,
        lambda: (torch.randn(9, 50),),
        lambda x: x.sum(-1),
        None,
    ),
    ("two_phase", K.two_phase, lambda: (torch.randn(21),), None, None),
    (
        "persistent_add",
        persistent_add,
        lambda: (torch.randn(13, 7), torch.randn(13, 7)),
        torch.add,
        None,
    ),
    (
        "specialized",
        specialized,
        lambda: (torch.randn(9, 11),),
        lambda x: x.sum(-1) * 0.5 + 16 + 5,
        None,
    ),
    (
        "scaled",
        scaled,
        lambda: (torch.randn(6, 5),),
        None,
        helion.Config(block_sizes=[4], factor=4),
    ),
]


def test_standalone_modules_run_without_helion() -> None:
    torch.manual_seed(0)
    modules, calls, expected = {}, [], []
    for name, fn, make_args, reference, config in CASES:
        args = make_args()
        kernel = helion.kernel(fn, backend="triton", autotune_effort="none")
        if config is not None:
            kernel = helion.kernel(fn, backend="triton", config=config)
        source = kernel.bind(args).to_code(config, options=STANDALONE)
        imported = _imports(source)
        # torch, Triton, and what the host code itself imports (`specialized` uses math)
        allowed = {"torch", "triton", "triton.language", "triton.language.extra", "math"}
        assert imported <= allowed, name
        assert not {"helion", "hl"} & _names(source), name
        modules[name] = source
        calls.append((name, fn.__name__, args))
        # what helion itself computes, for kernels without a simple reference
        expected.append(reference(*args) if reference is not None else kernel(*args))
    results, imported = run_without_helion(modules, calls, env={"TRITON_INTERPRET": "1"})
    assert "triton" in imported
    for (name, *_), got, want in zip(CASES, results, expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=name)


def test_standalone_host_code_embeds_the_runtime_helpers() -> None:
    x, y = torch.randn(13, 7), torch.randn(13, 7)
    source = _bind(persistent_add, x, y).to_code(options=STANDALONE)
    assert "def _helion_get_num_sm(device, *, reserved_sms=0):" in source
    assert "num_workers = _helion_get_num_sm(x.device)" in source
    assert "rows_per_worker = _helion_cdiv(m, num_workers)" in source
    assert "_helion_persistent_add[(4,)](" in source  # the 4 CPU workers are the grid
    block = _bind(K.registered_block, torch.randn(9, 50)).to_code(
        helion.Config(block_sizes=[32, 16]), options=STANDALONE
    )
    assert "_helion_block_sizes = iter((32,))" in block
    assert "block_n = next(_helion_block_sizes)" in block
    assert "factor = 4" in _bind(scaled, torch.randn(6, 5)).to_code(
        helion.Config(block_sizes=[4], factor=4), options=STANDALONE
    )


def _load(source: str, folder: Path):
    """Import ``source`` from a file (``triton.jit`` reads its functions' source files)."""
    path = folder / "standalone.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"standalone_{id(source)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_standalone_module_checks_its_arguments(tmp_path: Path) -> None:
    x, y = torch.randn(37, 19), torch.randn(37, 19)
    module = _load(_bind(K.add, x, y).to_code(options=STANDALONE), tmp_path)
    with pytest.raises(ValueError, match=r"this module was generated for shape \(37, 19\)"):
        module.add(torch.randn(36, 19), torch.randn(36, 19))
    with pytest.raises(ValueError, match=r"dtype torch.float32; got shape .* dtype torch.float64"):
        module.add(x.double(), y.double())


@pytest.mark.skipif(interpreter_forced(), reason="TRITON_INTERPRET=1 is set in this process")
def test_standalone_module_on_cpu_asks_for_the_interpreter(tmp_path: Path) -> None:
    x, y = torch.randn(5, 3), torch.randn(5, 3)
    module = _load(_bind(K.add, x, y).to_code(options=STANDALONE), tmp_path)
    with pytest.raises(RuntimeError, match="set TRITON_INTERPRET=1 before triton is imported"):
        module.add(x, y)


def test_host_code_that_cannot_be_exported_is_named() -> None:
    bound = _bind(calls_a_local_helper, torch.randn(6))
    with pytest.raises(exc.HostCodeNotExportable) as raised:
        bound.to_code(options=STANDALONE)
    message = str(raised.value)
    assert "calls_a_local_helper" in message
    assert "it calls _rows, defined in the kernel's own module" in message
    assert "rows = _rows(x.size(0))" in message  # the kernel line


def test_jax_fn_is_refused_by_triton() -> None:
    bound = _bind(K.add, torch.randn(5, 3), torch.randn(5, 3))
    for options in (
        helion.OutputCodeOptions(jax_fn=True),
        helion.OutputCodeOptions(allow_helion_deps=False, jax_fn=True),
    ):
        with pytest.raises(exc.OutputCodeUnsupported, match=r"jax_fn=True.*'triton' backend"):
            bound.to_code(options=options)
    with pytest.raises(exc.OutputCodeUnsupported, match="jax_fn"):
        bound.to_triton_code(options=helion.OutputCodeOptions(jax_fn=True))


def test_to_triton_code_takes_options() -> None:
    bound = _bind(K.add, torch.randn(5, 3), torch.randn(5, 3))
    assert bound.to_triton_code(options=STANDALONE) == bound.to_code(options=STANDALONE)
    assert bound.to_triton_code() == bound.to_code()


def persistent_count(x: torch.Tensor, reserve: int) -> torch.Tensor:
    """Each worker counts the rows it handles: the split depends on the worker count."""
    m, _ = x.shape
    num_workers = helion.runtime.get_num_sm(x.device, reserved_sms=reserve)
    counts = torch.zeros([num_workers], dtype=torch.int32, device=x.device)
    for worker in hl.grid(num_workers):
        for row in hl.grid(m):
            if row % num_workers == worker:
                counts[worker] = counts[worker] + 1
    return counts


def test_persistent_kernel_on_triton() -> None:
    x, y = torch.randn(13, 7), torch.randn(13, 7)
    kernel = helion.kernel(persistent_add, backend="triton", autotune_effort="none")
    for _ in range(3):  # the first launches, then the guarded fast launch
        torch.testing.assert_close(kernel(x, y), x + y)


def test_worker_count_is_guarded_on_the_warm_path() -> None:
    """Another count from the host code (a runtime int changes `reserved_sms`) gets code of its
    own, also once the first count's launch is the guarded fast one."""
    x = torch.randn(10, 3)
    kernel = helion.kernel(persistent_count, backend="triton", autotune_effort="none")
    for _ in range(3):
        assert kernel(x, 0).tolist() == [3, 3, 2, 2]
    assert kernel(x, 1).tolist() == [4, 3, 3]
    assert kernel(x, 3).tolist() == [10]
    assert kernel(x, 0).tolist() == [3, 3, 2, 2]
    [variants] = kernel.bind((x, 0))._variants.values()
    assert len(variants) == 3


# -- get_cached_path / backend_cache_key ----------------------------------------------------------


def test_cached_path_is_the_generated_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(launcher, "_modules", {})  # as a new process: nothing loaded yet
    x, y = torch.randn(37, 19), torch.randn(37, 19)
    bound = _bind(K.add, x, y)
    config = helion.Config(block_sizes=[16, 8])
    path = bound.get_cached_path(config)
    assert path is not None
    assert Path(path).parent == tmp_path / "triton"
    assert Path(path).read_text() == bound.to_code(config)
    key = bound.backend_cache_key(config)
    digest, mode = key.split("-")
    assert mode == "interpret" and re.fullmatch(r"[0-9a-f]{20}", digest)
    assert Path(path).name == f"add_{digest}.py"
    # another config: another module and key; the same config: the same ones
    other = helion.Config(block_sizes=[8, 8])
    assert bound.get_cached_path(other) != path
    assert bound.backend_cache_key(other) != key
    assert bound.backend_cache_key(config) == key
    # no config: the config the bound kernel runs with
    bound.set_config(other)
    assert bound.get_cached_path() == bound.get_cached_path(other)
