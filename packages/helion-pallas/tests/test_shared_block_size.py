"""One `hl.register_block_size` shared by several tiles in scope at once: an outer and an inner
`hl.tile`, two dimensions of one `hl.tile([m, n], block_size=[bs, bs])`, or three nested loops.

Each tile has its own bounds, so its own mask, although the IR shapes name only the shared block
size symbol. Masking every dimension by the innermost tile left the outer dimension unmasked: its
last, partial tile read and wrote out of bounds and the results were silently wrong. The cases
live in `helion.testing.shared_block_size`, shared with core's and the Triton backend's tests:
checked against PyTorch on non-power-of-two (and exact-multiple) shapes, under the default,
random and fixed configs.
"""

from __future__ import annotations

import pytest
import torch
from pallas_testing import case_params
from pallas_testing import configs
from pallas_testing import pallas_kernel

import helion.language as hl
from helion import exc
from helion.testing import shared_block_size

# hl.reduce and hl.associative_scan have no Pallas lowering: check() rejects them, naming the
# op (tests/test_custom_reduce_backends.py)
UNSUPPORTED = {"custom_combines"}


@pytest.mark.parametrize(
    "case",
    case_params(
        shared_block_size.BLOCK_SIZE_CASES,
        lambda case: (
            "hl.reduce / hl.associative_scan are not lowered for Pallas"
            if case.fn.__name__ in UNSUPPORTED
            else None
        ),
    ),
)
def test_matches_pytorch(case: shared_block_size.BlockSizeCase) -> None:
    shared_block_size.check_block_size_case(case, "pallas")


# -- errors -----------------------------------------------------------------------------------


def untraceable_dimension(x: torch.Tensor) -> torch.Tensor:
    # hl.zeros([ti, tj]) names the block size twice: which tile bounds which dim is lost
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    tiles = (m + bs - 1) // bs
    out = torch.zeros([tiles, n], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            ones = hl.zeros([ti, tj], dtype=torch.float32) + 1.0
            out[ti.id, tj] = ones.sum(0)
    return out


def test_untraceable_dimension_is_rejected_with_its_line() -> None:
    x = torch.randn(37, 50)
    bound = pallas_kernel(untraceable_dimension).bind((x,))
    for config in configs(bound, shared_block_size.SEEDS):
        with pytest.raises(exc.BackendUnsupported) as info:
            bound.compile_config(config)(x.clone())
        message = str(info.value)
        assert "reduce_sum" in message and "'pallas'" in message, message
        assert "_BLOCK_SIZE_0" in message, message
        assert "out[ti.id, tj] = ones.sum(0)" in message, message
        assert info.value.loc is not None
        assert info.value.loc.filename.endswith("test_shared_block_size.py")
