"""The merged-dimension conformance cases (`helion.testing.merged_dims`: a dimension `c * block`,
such as `hl.arange(tile.block_size * 2)`, on partial tiles) on the ref backend, against PyTorch.
The backend packages run the same cases on their backends."""

from __future__ import annotations

import pytest

from helion.testing import merged_dims


@pytest.mark.parametrize("case", merged_dims.MERGED_DIM_CASES, ids=lambda case: case.id)
def test_ref_backend_matches_pytorch(case: merged_dims.MergedDimCase) -> None:
    merged_dims.check_merged_dim_case(case, "ref")


def test_a_wrong_result_names_the_case_backend_and_config() -> None:
    (case,) = [c for c in merged_dims.MERGED_DIM_CASES if c.id == "count_pair_lanes-46"]
    wrong = merged_dims.MergedDimCase(
        case.id, case.fn, case.inputs, lambda x: case.expected(x) + 2, case.block_sizes
    )
    with pytest.raises(AssertionError, match=r"count_pair_lanes-46 on 'ref' under .*Config"):
        merged_dims.check_merged_dim_case(wrong, "ref")
