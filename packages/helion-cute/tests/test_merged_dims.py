"""The merged-dimension conformance cases (`helion.testing.merged_dims`: a dimension
`c * block`, such as `hl.arange(tile.block_size * 2)`) on CuTe, which sizes a dimension by one
block size or an int only: each case is refused with its source line (at bind for `torch.stack`,
else when it compiles), rather than compiled with the padded lanes of a partial tile held valid."""

from __future__ import annotations

import pytest

from helion import exc
from helion.testing import bind
from helion.testing import merged_dims


@pytest.mark.parametrize("case", merged_dims.MERGED_DIM_CASES, ids=lambda case: case.id)
def test_a_merged_dimension_is_refused_with_its_line(case: merged_dims.MergedDimCase) -> None:
    with pytest.raises(exc.BackendUnsupported) as raised:  # torch.stack: already at bind
        bound = bind(case.fn, "cute", case.inputs())
        bound.compile_config(bound.config_spec.default_config())
    message = str(raised.value)
    assert f"in {case.fn.__name__}" in message and "merged_dims.py" in message, message
    assert "'cute' backend" in message, message
