"""helion.experimental.backward on the Triton backend (the Triton interpreter on CPU): the
generated backward kernel runs on the forward kernel's backend and matches torch.autograd."""

from __future__ import annotations

import pytest

from helion.testing.autodiff import CASES
from helion.testing.autodiff import check_autodiff_case


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_backward_matches_autograd_triton(case):
    code = check_autodiff_case(case, "triton")
    assert "@helion.kernel(backend='triton', autotune_effort='none')" in code
