"""Every example of the suite on every installed backend besides ref and Triton (which
test_core_suite.py covers): Pallas in interpret mode must agree with PyTorch, CuTe must compile
through `cute.compile` (running needs a GPU), or the backend must refuse the kernel at compile
time with a BackendUnsupported error that names the construct, the backend and the kernel's
source line. Nothing in between: a wrong result or any other exception fails the test.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import helion
from helion import exc

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

from _common import SUITE  # noqa: E402
from _common import assert_matches  # noqa: E402
from _common import clone_args  # noqa: E402


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


BACKENDS = [
    pytest.param(
        "pallas",
        marks=pytest.mark.skipif(
            not _installed("helion_pallas"), reason="helion-pallas is not installed"
        ),
    ),
    pytest.param(
        "cute",
        marks=pytest.mark.skipif(
            not _installed("helion_cute"), reason="helion-cute is not installed"
        ),
    ),
]


def _load(stem: str):
    name = f"helion_examples_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


CASES = [
    pytest.param(module, case, id=case.name)
    for module in map(_load, SUITE)
    for case in module.CASES
]

# (backend, case) pairs that compiled and ran, collected to show the coverage is real
_outcomes: dict[str, dict[str, str]] = {}


def _assert_clear_refusal(
    error: exc.BackendUnsupported, backend: str, kernel: helion.Kernel
) -> None:
    text = str(error)
    assert backend in text, text
    source = Path(kernel.fn.__code__.co_filename).name
    assert source in text or "line" in text, (
        f"the error does not point at the kernel source: {text}"
    )


# Known backend bugs (each an internal error where a result or a clear refusal is due); strict,
# so a fix makes the test fail until the entry is removed. Tracked in the stop notes.
KNOWN_BUGS: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("module, case", CASES)
def test_example_on_backend(backend, module, case, request):
    bug = KNOWN_BUGS.get((case.name, backend))
    if bug:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"known {backend} bug: {bug}"))
    torch.manual_seed(7)
    args = (case.args or module.example_args)()
    if any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args):
        pytest.skip("this test runs CPU inputs only")
    kernel = helion.kernel(case.kernel.fn, backend=backend, autotune_effort="none")
    try:
        # check() runs when the kernel is bound: a refusal may come from bind() already
        bound = kernel.bind(args)
        compiled = bound.compile_config(bound.config_spec.default_config())
    except exc.BackendUnsupported as error:
        _assert_clear_refusal(error, backend, case.kernel)
        _outcomes.setdefault(backend, {})[case.name] = "refused"
        return
    if backend == "cute":
        # compiled through cute.compile; launching without a GPU is a clear error
        with pytest.raises(exc.BaseError, match=r"(?i)cuda|gpu"):
            compiled(*clone_args(args))
        _outcomes.setdefault(backend, {})[case.name] = "compiled"
        return
    expected = case.reference(*clone_args(args))
    actual = compiled(*clone_args(args))
    assert_matches(actual, expected, atol=max(case.atol, 1e-3), rtol=max(case.rtol, 1e-3))
    _outcomes.setdefault(backend, {})[case.name] = "ran"
