"""The shared-block-size conformance cases (`helion.testing.shared_block_size`: one
`hl.register_block_size` sizing several tiles in scope at once) on the ref backend, against
PyTorch under the default, random and fixed configs. The backend packages run the same cases.
"""

from __future__ import annotations

import pytest

from helion import exc
from helion.testing import shared_block_size

# Known ref backend bugs, found by these cases: strict, so a fix shows up as an unexpected pass
# (remove the entry then).
_OUTER_REDUCE = "hl.reduce over the outer tile's dimension in the inner loop sums wrong lanes"
_INNER_AMAX = (
    "the running amax over the innermost tile is wrong when the loop also sums over the "
    "outermost tile"
)
_REF_BUGS = {
    "custom_combines-9x13": (AssertionError, _OUTER_REDUCE),
    "custom_combines-13x9": (AssertionError, _OUTER_REDUCE),
    "three_levels-9x13x7": (AssertionError, _INNER_AMAX),
    "three_levels-13x7x9": (AssertionError, _INNER_AMAX),
    "causal_prefix-90x24-90x64": (
        exc.InternalError,
        "hl.tile(0, tm.end, block_size=bs) after a partial outer tile fails in expand",
    ),
}


def _params() -> list:
    params = []
    for case in shared_block_size.BLOCK_SIZE_CASES:
        marks = ()
        if case.id in _REF_BUGS:
            raises, reason = _REF_BUGS[case.id]
            marks = (
                pytest.mark.xfail(raises=raises, strict=True, reason=f"ref backend bug: {reason}"),
            )
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params


@pytest.mark.parametrize("case", _params())
def test_ref_backend_matches_pytorch(case: shared_block_size.BlockSizeCase) -> None:
    shared_block_size.check_block_size_case(case, "ref")
