"""What is known only when a kernel runs, on every backend:

- a 0-D integer index known only on the device (`x[t, k]` for a scalar argument `k`) counts
  from the end when negative, as in torch: it read before the tensor (Triton read and wrote
  neighbouring memory, Pallas gave NaN);
- host code that changes an argument's strides in place (`x.t_()`) gets the code traced for
  the new strides (the guards trusted the layout the argument had when its key was taken);
- an inner `hl.tile(lo, hi)` whose bounds are device values runs zero times when `lo > hi`,
  as Python's `range` does; eager mode raised `InvalidTileRange` there.
"""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]


def column(x: torch.Tensor, k: int) -> torch.Tensor:
    out = x.new_empty([x.size(0)])
    for t in hl.tile(x.size(0)):
        out[t] = x[t, k]
    return out


def write_column(x: torch.Tensor, out: torch.Tensor, k: int) -> torch.Tensor:
    for t in hl.tile(x.size(0)):
        out[t, k] = x[t]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_negative_runtime_index_counts_from_the_end(backend: str) -> None:
    require_backend(backend)
    x = torch.randn(7, 5)
    read = helion.kernel(column, backend=backend, autotune_effort="none")
    write = helion.kernel(write_column, backend=backend, autotune_effort="none")
    for k in (-1, -5, 0, 3):
        torch.testing.assert_close(read(x, k), x[:, k])
        big = torch.zeros(9, 5)
        view = big[1:8]  # writes must stay inside the view
        write(x[:, 0].contiguous(), view, k)
        expected = torch.zeros(9, 5)
        expected[1:8, k] = x[:, 0]
        torch.testing.assert_close(big, expected)


def transpose_maybe(x: torch.Tensor, flip: bool) -> torch.Tensor:
    if flip:
        x.t_()  # host code changing an argument's strides in place
    out = torch.empty(x.shape)
    for t in hl.tile(x.size()):
        out[t] = x[t]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_code_that_transposes_an_argument_in_place(backend: str) -> None:
    """The argument's layout after `x.t_()` is not the one its key was taken with: the guards
    compare it (they trusted the key, and ran the code traced for the other strides)."""
    require_backend(backend)
    kernel = helion.kernel(transpose_maybe, backend=backend, autotune_effort="none")
    a = torch.randn(6, 6)
    for flip in (False, True, False, True):
        torch.testing.assert_close(kernel(a.clone(), flip), a.t() if flip else a)


def segment_sums(x: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    out = x.new_empty([starts.size(0), x.size(1)])
    for s, tn in hl.tile([starts.size(0), x.size(1)], block_size=[1, None]):
        acc = hl.zeros([tn], dtype=torch.float32)
        for tr in hl.tile(starts[s.begin], ends[s.begin]):
            acc = acc + x[tr, tn].sum(0)
        out[s.begin, tn] = acc
    return out


@pytest.mark.parametrize("backend", [*BACKENDS, "eager"])
def test_a_reversed_device_range_runs_zero_times(backend: str) -> None:
    if backend == "eager":
        kernel = helion.kernel(segment_sums, ref_mode=helion.RefMode.EAGER)
    else:
        require_backend(backend)
        kernel = helion.kernel(segment_sums, backend=backend, autotune_effort="none")
    x = torch.randn(23, 13)
    # segment 1 and 3 are reversed (start > end): empty, as torch's x[9:4] is
    starts = torch.tensor([0, 9, 4, 20, 11])
    ends = torch.tensor([4, 4, 11, 6, 23])
    expected = torch.stack(
        [x[a:b].sum(0) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    )
    torch.testing.assert_close(kernel(x, starts, ends), expected)


def reversed_static_range(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        for u in hl.tile(5, 2):
            out[t] = x[t] + u.begin
    return out


@pytest.mark.parametrize("backend", ["ref", "eager"])
def test_a_reversed_constant_range_is_refused(backend: str) -> None:
    if backend == "eager":
        kernel = helion.kernel(reversed_static_range, ref_mode=helion.RefMode.EAGER)
    else:
        kernel = helion.kernel(reversed_static_range, backend=backend, autotune_effort="none")
    with pytest.raises(helion.exc.InvalidTileRange):
        kernel(torch.randn(7))
