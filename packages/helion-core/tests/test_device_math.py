"""`math` functions in device code take 0-D device values (scalar arguments) too."""

from __future__ import annotations

import math
from math import sqrt as imported_sqrt

import pytest
import torch

import helion
import helion.language as hl
from helion.language._device_globals import DEVICE_MATH
from helion.language._device_globals import device_replacements
from helion.testing import require_backend


def scaled(x: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        shift = math.exp(-alpha) + math.atan2(2.0, alpha) + imported_sqrt(4.0) + math.pi
        out[t] = x[t] * math.sqrt(alpha) + shift
    return out


@pytest.mark.parametrize("backend", ["ref", "eager", "triton", "pallas"])
def test_math_of_a_scalar_argument(backend: str) -> None:
    """`math.sqrt(alpha)` ran in eager mode (alpha is a Python float there) and was a
    TypeInferenceError in compiled kernels (a runtime scalar is a device value)."""
    if backend == "eager":
        kernel = helion.kernel(scaled, ref_mode=helion.RefMode.EAGER)
    else:
        require_backend(backend)  # the isolated core run has only ref
        kernel = helion.kernel(scaled, backend=backend, autotune_effort="none")
    x = torch.randn(37)
    for alpha in (0.7, 2.5):
        shift = math.exp(-alpha) + math.atan2(2.0, alpha) + 2.0 + math.pi
        torch.testing.assert_close(kernel(x, alpha), x * math.sqrt(alpha) + shift)


def test_math_stays_pythons_on_numbers_and_host_code() -> None:
    assert DEVICE_MATH.sqrt(9.0) == 3.0 and isinstance(DEVICE_MATH.floor(2.5), int)
    assert DEVICE_MATH.pi is math.pi and DEVICE_MATH.gcd(12, 18) == 6
    replaced = device_replacements({"math": math, "s": math.sqrt, "other": abs})
    assert replaced["math"] is DEVICE_MATH and replaced["s"] is DEVICE_MATH.sqrt
    assert "other" not in replaced
