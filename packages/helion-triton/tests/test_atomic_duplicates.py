"""Atomics whose lanes hit the same element on the Triton backend: each lane gets the value just
before its own update. The order the hardware serializes the lanes in is unspecified, so these
tests only ask that the returned values be those of *some* serialization (the ref and Pallas
backends use row-major lane order). The cases live in `helion.testing.atomics`: those whose
results tell the order apart without knowing it (ticket counters, positive adds, maxima).
"""

from __future__ import annotations

import pytest
import torch

from helion.testing import atomics

ORDER_FREE = [case for case in atomics.ATOMIC_CASES if case.order_free]


@pytest.mark.parametrize("case", ORDER_FREE, ids=lambda case: case.id)
def test_returns_the_values_of_a_serialization(
    case: atomics.AtomicCase, device: torch.device
) -> None:
    atomics.check_atomic_case(case, "triton", in_lane_order=False, device=device)
