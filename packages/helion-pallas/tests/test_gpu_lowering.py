"""The code generated for NVIDIA GPUs goes through Pallas' Triton lowering (and the TPU code
through Mosaic) without the device: JAX lowers for another platform with `jax.export`.

This is what can be checked on a CPU-only machine; running the kernels needs the device
(`gpu_report.py`)."""

from __future__ import annotations

import random

import pytest
from pallas_kernels import CASES
from pallas_kernels import CASES_BY_NAME
from pallas_testing import gpu_config_spec
from pallas_testing import lower_for_platform
from pallas_testing import pallas_kernel

NAMES = [case.name for case in CASES]


@pytest.mark.parametrize("name", NAMES)
def test_gpu_code_lowers_through_triton(name: str) -> None:
    case = CASES_BY_NAME[name]
    bound = pallas_kernel(case.fn).bind(case.args())
    spec = gpu_config_spec(bound)
    for config in [spec.default_config()] + [
        spec.random_config(random.Random(seed)) for seed in (0, 1)
    ]:
        text = lower_for_platform(bound, config, "cuda")
        assert "__gpu$xla.gpu.triton" in text
        assert f"num_warps = {config['num_warps']} : i32" in text


def test_gpu_spec_keeps_gpu_tunables_and_drops_unroll() -> None:
    case = CASES_BY_NAME["matmul"]
    bound = pallas_kernel(case.fn).bind(case.args())
    spec = gpu_config_spec(bound)
    assert {"num_warps", "num_stages", "static_ranges"} <= set(spec.fields)
    assert "range_unroll_factors" not in spec.fields
    assert "num_warps" not in bound.config_spec.fields  # CPU: interpret mode ignores them


def test_gpu_batched_dots_get_batch_tiles_of_one() -> None:
    case = CASES_BY_NAME["bmm"]
    bound = pallas_kernel(case.fn).bind(case.args())
    spec = gpu_config_spec(bound)
    batch = spec.block_sizes[0]
    assert (batch.min_size, batch.max_size) == (1, 1)
    assert bound.config_spec.block_sizes[0].max_size > 1
