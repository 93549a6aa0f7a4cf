"""The core kernel suite (`examples/`) against PyTorch, on fresh random non-power-of-two inputs:

(a) the ref backend with the default config,
(b) the ref backend with random valid configs drawn from each kernel's ConfigSpec,
(c) eager mode (HELION_INTERPRET), which runs the kernel's Python directly,
(d) the Triton backend (through its interpreter on CPU) with the default and random configs,

plus random shapes for a few kernels.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import helion

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))  # the examples import their helpers as `_common`

from _common import SUITE  # noqa: E402
from _common import assert_matches  # noqa: E402
from _common import clone_args  # noqa: E402


def _load(stem: str):
    name = f"helion_examples_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _cases():
    found = []
    for stem in SUITE:
        module = _load(stem)
        for case in module.CASES:
            found.append(pytest.param(module, case, id=case.name))
    return found


CASES = _cases()


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # the ref backend runs many small ops: intra-op threads only add wake-up latency (and on a
    # loaded machine, a lot of it)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _inputs(module, case, seed: int) -> tuple:
    torch.manual_seed(seed)
    return (case.args or module.example_args)()


_REF_KERNELS: dict[str, helion.Kernel] = {}


def _ref_kernel(case) -> helion.Kernel:
    """The case's kernel on the ref backend (whatever the default backend is)."""
    kernel = _REF_KERNELS.get(case.name)
    if kernel is None:
        kernel = _REF_KERNELS[case.name] = helion.kernel(case.kernel.fn, backend="ref")
    return kernel


def _eager_kernel(case) -> helion.Kernel:
    kernel = helion.kernel(case.kernel.fn, ref_mode=helion.RefMode.EAGER)
    assert kernel.settings.ref_mode == helion.RefMode.EAGER
    return kernel


def _check(run, case, args) -> None:
    expected = case.reference(*clone_args(args))
    actual = run(*clone_args(args))
    assert_matches(actual, expected, atol=case.atol, rtol=case.rtol)


def test_suite_is_complete():
    names = {p.values[1].name for p in CASES}
    required = {
        "add",
        "axpy",
        "exp",
        "sum",
        "long_sum",
        "softmax",
        "softmax_two_pass",
        "matmul",
        "bmm",
        "matmul_epilogue",
        "layer_norm",
        "rms_norm",
        "cross_entropy",
        "embedding",
        "attention",
        "attention_causal",
        "jagged_mean",
        "histogram",
        "split_k_sum",
        "split_k_matmul",
        "batch_softmax",
        "softmax_decomposed",
        "kl_div",
        "kl_div_log_target",
        "jsd",
        "geglu",
        "geglu_packed",
        "swiglu",
        "rope",
    }
    assert required <= names, required - names


@pytest.mark.parametrize("module, case", CASES)
def test_ref_default_config(module, case):
    args = _inputs(module, case, 0)
    bound = _ref_kernel(case).bind(args)
    assert bound.backend.name == "ref"
    _check(bound.compile_config(bound.config_spec.default_config()), case, args)


@pytest.mark.parametrize("module, case", CASES)
@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(seed=st.integers(0, 2**31 - 1))
def test_ref_random_configs(module, case, seed):
    args = _inputs(module, case, seed)
    bound = _ref_kernel(case).bind(args)
    config = bound.config_spec.random_config(random.Random(seed))
    _check(bound.compile_config(config), case, args)


@pytest.mark.parametrize("module, case", CASES)
def test_eager_mode(module, case):
    _check(_eager_kernel(case), case, _inputs(module, case, 1))


# -- random shapes ------------------------------------------------------------------------------

small = st.integers(1, 70)


def _random_shape_check(module, case, args, seed: int) -> None:
    bound = _ref_kernel(case).bind(args)
    config = bound.config_spec.random_config(random.Random(seed))
    _check(bound.compile_config(config), case, args)
    _check(_eager_kernel(case), case, args)


shape_settings = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


@shape_settings
@given(m=small, n=small, broadcast=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_random_shapes_add(m, n, broadcast, seed):
    module = _load("add")
    torch.manual_seed(seed)
    args = (torch.randn(m, n), torch.randn(n) if broadcast else torch.randn(m, n))
    _random_shape_check(module, module.CASES[0], args, seed)


@shape_settings
@given(m=small, n=st.integers(1, 300), seed=st.integers(0, 2**31 - 1))
def test_random_shapes_sum(m, n, seed):
    module = _load("sum")
    torch.manual_seed(seed)
    _random_shape_check(module, module.CASES[0], (torch.randn(m, n),), seed)


@shape_settings
@given(m=small, n=st.integers(1, 300), seed=st.integers(0, 2**31 - 1))
def test_random_shapes_softmax(m, n, seed):
    module = _load("softmax")
    torch.manual_seed(seed)
    _random_shape_check(module, module.CASES[0], (torch.randn(m, n),), seed)


@shape_settings
@given(m=small, k=small, n=small, seed=st.integers(0, 2**31 - 1))
def test_random_shapes_matmul(m, k, n, seed):
    module = _load("matmul")
    torch.manual_seed(seed)
    args = (torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16))
    _random_shape_check(module, module.CASES[0], args, seed)


# -- the Triton backend (its interpreter on CPU tensors) ---------------------------------------------

_TRITON_KERNELS: dict[str, helion.Kernel] = {}


def _triton_kernel(case) -> helion.Kernel:
    kernel = _TRITON_KERNELS.get(case.name)
    if kernel is None:
        kernel = _TRITON_KERNELS[case.name] = helion.kernel(case.kernel.fn, backend="triton")
    return kernel


@pytest.mark.parametrize("module, case", CASES)
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(seed=st.integers(0, 2**31 - 1))
def test_triton_default_and_random_configs(module, case, seed):
    args = _inputs(module, case, seed)
    bound = _triton_kernel(case).bind(args)
    assert bound.backend.name == "triton"
    _check(bound.compile_config(bound.config_spec.default_config()), case, args)
    _check(bound.compile_config(bound.config_spec.random_config(random.Random(seed))), case, args)
