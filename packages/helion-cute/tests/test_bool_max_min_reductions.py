"""torch.amax / torch.amin / .max(dim) / .min(dim) of a Boolean value.

The CuTe DSL keeps a Boolean fragment in registers as Uint8 and has no max / min reduction
for it, so ``.any()`` / ``.all()`` already reduced booleans as int32 max / min. A bool amax or
amin took the integer path instead, and asked ``torch.iinfo(torch.bool)`` for its identity: an
InternalError ("torch.bool is not supported by torch.iinfo") for every such kernel. ``.any()``
over a size-1 dim also failed (an InternalError, KeyError 1). Now amax / any and amin / all of
booleans share one lowering: int32 max / min, then ``!= 0``.

This machine has no GPU: the kernels are compiled for sm_90a; those whose reduction stays
inside a thread also run on the host CPU one thread after another (`cute_host`) and are
compared with PyTorch.
"""

from __future__ import annotations

import pytest
import torch
from cute_host import runs_on_host

import helion.language as hl
from helion.testing import bind


def _col_amax(x):
    out = torch.empty([x.size(1)], dtype=torch.bool, device=x.device)
    for tn in hl.tile(x.size(1)):
        out[tn] = torch.amax(x[:, tn] > 0, dim=0)
    return out


def _col_amin_keepdim(x):
    out = torch.empty([1, x.size(1)], dtype=torch.int32, device=x.device)
    for tn in hl.tile(x.size(1)):
        out[:, tn] = torch.amin(x[:, tn] > 0, dim=0, keepdim=True).to(torch.int32)
    return out


def _col_max_min_values(x):
    out = torch.empty([x.size(1)], dtype=torch.float32, device=x.device)
    for tn in hl.tile(x.size(1)):
        m = x[:, tn] > 0
        out[tn] = m.max(0).values.float() + 2 * m.min(dim=0)[0].float()
    return out


def _any_over_size_one(x):
    out = torch.empty([x.size(1)], dtype=torch.bool, device=x.device)
    for tn in hl.tile(x.size(1)):
        out[tn] = (x[None, 0, tn] > 0).any(0)
    return out


def _row_amax(x):
    out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = torch.amax(x[tm, :] > 0, dim=-1)
    return out


def _row_amin(x):
    out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = (x[tm, :] > 0).min(-1).values
    return out


def _grid_full_max_min(x):
    out = torch.empty([x.size(0), 2], dtype=torch.bool, device=x.device)
    for i in hl.grid(x.size(0)):
        m = x[i, :] > 0
        out[i, 0] = m.max()
        out[i, 1] = torch.amin(m)
    return out


def _inputs(rows: int = 37, cols: int = 45) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, cols, generator=g)
    # all-false, all-true and mixed columns and rows
    x[:, 3] = -1.0
    x[:, 5] = 1.0
    x[:, cols - 2] = 1.0
    x[4, :] = -1.0
    x[6, :] = 1.0
    return x


def _compile(fn, x: torch.Tensor, config: dict | None = None):
    bound = bind(fn, "cute", (x,))
    chosen = dict(bound.config_spec.default_config())
    chosen.update(config or {})
    return bound.compile_config(bound.normalize(chosen))


_IN_THREAD = [
    (_col_amax, lambda x: torch.amax(x > 0, 0)),
    (_col_amin_keepdim, lambda x: torch.amin(x > 0, 0, keepdim=True).to(torch.int32)),
    (
        _col_max_min_values,
        lambda x: (x > 0).max(0).values.float() + 2 * (x > 0).min(0).values.float(),
    ),
    (_any_over_size_one, lambda x: (x[None, 0] > 0).any(0)),
]


@pytest.mark.parametrize(("fn", "reference"), _IN_THREAD, ids=lambda f: getattr(f, "__name__", ""))
def test_bool_max_min_along_a_thread_axis_match_torch(on_host: None, fn, reference) -> None:
    x = _inputs()
    # one warp whose lanes spread along the columns: each thread folds whole columns
    compiled = _compile(fn, x, {"block_sizes": [32], "num_threads": [32]})
    assert runs_on_host(compiled.source), compiled.source
    expected = reference(x)
    actual = compiled(x.clone())
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


@pytest.mark.parametrize("fn", [_row_amax, _row_amin, _grid_full_max_min], ids=lambda f: f.__name__)
@pytest.mark.parametrize("cols", [23, 300])
def test_bool_max_min_across_lanes_and_warps_compile(fn, cols: int) -> None:
    # 23 columns: a shuffle reduction inside a warp; 300: the warps combine through shared memory
    config = {"block_sizes": [2]} if fn is not _grid_full_max_min and cols == 300 else {}
    compiled = _compile(fn, _inputs(37, cols), config)
    body = compiled.source.split("import cuda.bindings.driver as cuda", 1)[1]
    assert "shuffle_sync_bfly" in body
    if cols == 300:
        assert "sync_threads" in body
    # the booleans are reduced as int32 and turned back into bool
    assert ".to(cutlass.Int32)" in body and "!= 0)" in body
