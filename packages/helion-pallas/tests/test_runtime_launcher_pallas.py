"""helion.runtime.default_pallas_launcher: a Pallas kernel body run by pl.pallas_call on torch
tensors (interpret mode on CPU), with the written tensors copied back."""

from __future__ import annotations

import pytest
import torch

import helion
from helion.testing import require_backend


def _pl():
    require_backend("pallas")
    from jax.experimental import pallas as pl

    return pl


def test_default_pallas_launcher_writes_outputs_back():
    pl = _pl()

    def body(x_ref, y_ref, out_ref, scale, block):
        # each program handles one block; out_ref starts with the tensor's values
        rows = pl.ds(pl.program_id(0) * block, block)
        out_ref[rows] = x_ref[rows] * scale + y_ref[rows] + out_ref[rows]

    x, y = torch.randn(45), torch.randn(45)
    out = torch.ones(45)
    before_x = x.clone()
    helion.runtime.default_pallas_launcher(body, (5,), x, y, out, 2.0, 9, output_indices=[2])
    torch.testing.assert_close(out, x * 2.0 + y + 1)
    assert torch.equal(x, before_x)  # inputs are not written


def test_every_tensor_is_an_output_by_default():
    _pl()

    def body(a_ref, b_ref):
        a_ref[...] = a_ref[...] + 1
        b_ref[...] = b_ref[...] * 3

    a = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    b = torch.randn(7, dtype=torch.float64)
    expected_a, expected_b = a + 1, b * 3
    helion.runtime.default_pallas_launcher(body, (1,), a, b)
    assert torch.equal(a, expected_a)
    torch.testing.assert_close(b, expected_b)


def test_output_index_must_name_a_tensor():
    _pl()
    with pytest.raises(ValueError, match="output index 1"):
        helion.runtime.default_pallas_launcher(
            lambda *refs: None, (1,), torch.zeros(3), 2.0, output_indices=[1]
        )
