"""The shared-block-size conformance cases (`helion.testing.shared_block_size`: one
`hl.register_block_size` sizing several tiles in scope at once) on the ref backend, against
PyTorch under the default, random and fixed configs. The backend packages run the same cases.
"""

from __future__ import annotations

import pytest

from helion.testing import shared_block_size

# Known ref backend bugs, found by these cases: strict, so a fix shows up as an unexpected pass
# (remove the entry then).
_REF_BUGS: dict[str, tuple[type[BaseException], str]] = {}


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
