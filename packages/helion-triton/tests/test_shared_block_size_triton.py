"""One `hl.register_block_size` shared by several tiles in scope at once, on the Triton backend:
an outer and an inner `hl.tile`, two dimensions of one `hl.tile([m, n], block_size=[bs, bs])`,
or three nested loops.

Each tile has its own bounds, so its own mask, but an IR shape names only the block size symbol.
The code generator used to take a dimension's mask from its block size, i.e. from the tile of that
block bound last: a reduction, scan, dot or index tensor over another tile's dimension masked the
wrong lanes (padded lanes entered the result, or valid ones were dropped), silently; and a loop
`hl.tile(0, tm.end, block_size=bs)` looked up the bounds of `tm` by block size, found its own,
and recursed until Python gave up. The cases live in `helion.testing.shared_block_size`, shared
with core's and the Pallas backend's tests: checked against PyTorch on seeded random inputs,
non-power-of-two shapes and exact multiples, under the default config, random ones and fixed
ones (with looped reductions where the kernel has a full slice).
"""

from __future__ import annotations

import re

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.testing import shared_block_size
from helion.testing.shared_block_size import MIN_BLOCK


@pytest.mark.parametrize("case", shared_block_size.BLOCK_SIZE_CASES, ids=lambda case: case.id)
def test_matches_pytorch(case: shared_block_size.BlockSizeCase) -> None:
    shared_block_size.check_block_size_case(case, "triton")


@pytest.mark.parametrize("m", [90, 96])
def test_loop_ending_at_the_outer_tile_end_is_masked_only_when_partial(m: int) -> None:
    # the causal_prefix cases check its results; here its code: with 96 rows every tile of 16 is
    # full, and no loop needs a mask
    x, w = torch.randn(m, 24), torch.randn(m, 64)
    bound = helion.kernel(shared_block_size.causal_prefix, backend="triton").bind((x, w))
    config = helion.Config(**{**bound.config_spec.default_config(), "block_sizes": [16]})
    masked = re.search(r"\bmask_\d+", bound.to_code(config)) is not None
    assert masked == (m % 16 != 0)


# -- errors -----------------------------------------------------------------------------------


def untraceable_dimension(x: torch.Tensor) -> torch.Tensor:
    # hl.zeros([ti, tj]) names the block size twice: which tile bounds which dim is lost
    m, n = x.shape
    bs = hl.register_block_size(MIN_BLOCK, max(m, n))
    out = torch.zeros([(m + bs - 1) // bs, n], dtype=x.dtype)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            ones = hl.zeros([ti, tj], dtype=torch.float32) + 1.0
            out[ti.id, tj] = ones.sum(0)
    return out


def test_untraceable_dimension_is_rejected_with_its_line() -> None:
    x = torch.randn(37, 50)
    bound = helion.kernel(untraceable_dimension, backend="triton").bind((x,))
    default = bound.config_spec.default_config()
    for bs in (4, 16, 32):  # every tile of 37 rows and 50 columns ends partial
        config = helion.Config(**{**default, "block_sizes": [bs]})
        with pytest.raises(exc.BackendUnsupported) as info:
            bound.compile_config(config)(x.clone())
        message = str(info.value)
        assert "reduce_sum" in message and "'triton'" in message, message
        assert "_BLOCK_SIZE_0" in message, message
        assert "out[ti.id, tj] = ones.sum(0)" in message, message
        assert info.value.loc is not None
        assert info.value.loc.filename.endswith("test_shared_block_size_triton.py")
