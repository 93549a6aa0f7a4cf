"""Atomics whose lanes hit the same element, in interpret mode: like the ref backend, each lane
gets the value just before its own update, the lanes applied one by one in row-major lane order
(programs in grid order, masked-off lanes skipped). add/max/min used to be one scatter that
handed every lane the same snapshot (a ticket counter read 0 in every lane).

The cases live in `helion.testing.atomics`, shared with core's and the Triton backend's tests;
each is checked against the lane-by-lane simulation and the ref backend.
"""

from __future__ import annotations

import pytest
import torch
from pallas_testing import pallas_kernel

from helion.testing import atomics


@pytest.mark.parametrize("case", atomics.ATOMIC_CASES, ids=lambda case: case.id)
def test_each_lane_gets_the_value_before_its_own_update(case: atomics.AtomicCase) -> None:
    atomics.check_atomic_case(case, "pallas")


def test_gpu_lowering_keeps_lane_by_lane_atomics() -> None:
    # the GPU path already applies a tile's lanes in order, one scalar atomic each: the interpret
    # helper's sort must not leak into GPU code, which Pallas' Triton lowering could not take
    from pallas_testing import gpu_config_spec

    from helion_pallas.codegen import generate_source
    from helion_pallas.tunables import PallasOptions

    target, index, values = atomics.scatter_inputs("add", torch.int32, 37, 5, seed=0)
    bound = pallas_kernel(atomics.scatter_add).bind((target, index, values))
    config = gpu_config_spec(bound).default_config()
    source, _, _ = generate_source(bound.ir, PallasOptions.parse(config, "gpu"))
    assert "hp.gpu_atomic_by_lane(plgpu.atomic_add" in source
    assert "interpret_atomic" not in source
