"""Atomics whose lanes hit the same element on the ref backend: each lane gets the value just
before its own update, the lanes applied one by one in row-major lane order (programs in grid
order, masked-off lanes skipped), as a GPU serializes them in some order. The final memory was
always right; the returned previous values of add/max/min used to be one snapshot for all lanes.

The cases live in `helion.testing.atomics`, shared with the backend packages' tests.
"""

from __future__ import annotations

import pytest

from helion.testing import atomics

ORDER_FREE = [case for case in atomics.ATOMIC_CASES if case.order_free]


@pytest.mark.parametrize("case", atomics.ATOMIC_CASES, ids=lambda case: case.id)
def test_each_lane_gets_the_value_before_its_own_update(case: atomics.AtomicCase) -> None:
    atomics.check_atomic_case(case, "ref")


@pytest.mark.parametrize("case", ORDER_FREE, ids=lambda case: case.id)
def test_order_free_check_accepts_the_lane_order(case: atomics.AtomicCase) -> None:
    # the weaker check that backends with a free lane order (Triton) get must pass here too
    atomics.check_atomic_case(case, "ref", in_lane_order=False)
