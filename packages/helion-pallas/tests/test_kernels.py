"""The kernel suite on CPU (interpret mode): default and random configs, against PyTorch and the
ref backend."""

from __future__ import annotations

import pytest
from pallas_kernels import CASES
from pallas_kernels import CASES_BY_NAME
from pallas_testing import assert_same
from pallas_testing import clone
from pallas_testing import configs
from pallas_testing import pallas_kernel
from pallas_testing import ref_kernel

NAMES = [case.name for case in CASES]
SEEDS = (0, 1, 2)


@pytest.mark.parametrize("name", NAMES)
def test_default_config_matches_torch_and_ref(name: str) -> None:
    case = CASES_BY_NAME[name]
    args = case.args()
    actual = pallas_kernel(case.fn)(*clone(args))
    assert_same(actual, case.reference(*clone(args)), atol=case.atol, rtol=case.rtol)
    assert_same(actual, ref_kernel(case.fn)(*clone(args)), atol=case.atol, rtol=case.rtol)


@pytest.mark.parametrize("name", NAMES)
def test_random_configs_match_torch_and_ref(name: str) -> None:
    case = CASES_BY_NAME[name]
    args = case.args()
    expected = case.reference(*clone(args))
    bound = pallas_kernel(case.fn).bind(args)
    ref = ref_kernel(case.fn).bind(args)
    for config in configs(bound, SEEDS)[1:]:
        actual = bound.compile_config(config)(*clone(args))
        assert_same(actual, expected, atol=case.atol, rtol=case.rtol)
        oracle = ref.compile_config(ref.normalize(config))(*clone(args))
        assert_same(actual, oracle, atol=case.atol, rtol=case.rtol)
