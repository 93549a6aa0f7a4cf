"""A value carried by a device loop keeps its type on every backend: a body that narrows it
(float32 accumulator += float16 tile sums) is cast back losslessly, and one that widens it (an int32
accumulator += float32 sums) is refused with the variable, both types and the loop's line,
instead of being truncated back to int32 on every iteration (found by exploratory testing)."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.testing import assert_same
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]


def row_sums(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in hl.tile(m):
        acc = hl.zeros([tm], dtype=like.dtype)
        for tn in hl.tile(n):
            acc = acc + x[tm, tn].sum(1)
        out[tm] = acc
    return out


def scaled_row_sums(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in hl.tile(m):
        acc = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n):
            acc = acc + (x[tm, tn] * 3).sum(1)  # a float16 sum: narrower, cast up exactly
        out[tm] = acc
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("acc_dtype", "x_dtype"),
    [(torch.int32, torch.float32), (torch.bfloat16, torch.float32), (torch.int32, torch.int64)],
)
def test_a_loop_that_widens_its_carried_value_is_refused(
    backend: str, acc_dtype: torch.dtype, x_dtype: torch.dtype
) -> None:
    require_backend(backend)
    kernel = helion.kernel(row_sums, backend=backend, autotune_effort="none")
    x = (torch.rand(5, 37) * 10).to(x_dtype)
    with pytest.raises(exc.LoopCarriedTypeChange) as info:
        kernel(x, torch.empty(0, dtype=acc_dtype))
    text = str(info.value)
    assert "'acc'" in text, text
    assert str(acc_dtype).removeprefix("torch.") in text, text
    assert str(x_dtype).removeprefix("torch.") in text, text
    assert "for tn in hl.tile(n):" in text, text  # the loop's line
    assert isinstance(info.value, exc.ControlFlowTensorMismatch)  # still caught as before


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float32_accumulator_fed_float16_values_stays_float32(backend: str) -> None:
    require_backend(backend)
    torch.manual_seed(7)
    x = torch.randn(9, 53).to(torch.float16)
    kernel = helion.kernel(
        scaled_row_sums,
        backend=backend,
        autotune_effort="none",
        config=helion.Config(block_sizes=[4, 16]),
    )
    # each column tile's float16 sum, added up in float32 (what torch gives for the same steps)
    expected = sum((x[:, s : s + 16] * 3).sum(1).float() for s in range(0, 53, 16))
    assert_same(kernel(x), expected, atol=5e-2, rtol=1e-2, what=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_loop_with_a_float32_start_matches_torch(backend: str) -> None:
    require_backend(backend)
    kernel = helion.kernel(row_sums, backend=backend, autotune_effort="none")
    x = torch.rand(6, 77)
    assert_same(kernel(x, torch.empty(0)), x.sum(1), atol=1e-4, rtol=1e-4, what=backend)


def sum_and_count(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    count = torch.empty([m], dtype=torch.int32, device=x.device)
    for tm in hl.tile(m):
        acc = (hl.zeros([tm], dtype=torch.float32), [hl.zeros([tm], dtype=torch.int32)])
        for tn in hl.tile(n):
            acc = (acc[0] + x[tm, tn].sum(1), [acc[1][0] + 1])
        out[tm] = acc[0]
        count[tm] = acc[1][0]
    return out, count


def tuple_becomes_tensor(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in hl.tile(m):
        acc = (hl.zeros([tm], dtype=torch.float32), hl.zeros([tm], dtype=torch.float32))
        for tn in hl.tile(n):
            acc = acc[0] + x[tm, tn].sum(1)
        out[tm] = acc
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_carries_tuples_and_lists_item_by_item(backend: str) -> None:
    """`acc = (s, [c])` carried through a loop (it failed with 'unsupported operand of type
    tuple' at an unrelated expression); a body that yields another structure is refused
    naming the variable."""
    require_backend(backend)
    x = torch.randn(13, 37)
    kernel = helion.kernel(sum_and_count, backend=backend, autotune_effort="none")
    bound = kernel.bind((x,))
    for config in (bound.config_spec.default_config(), helion.Config(block_sizes=[4, 8])):
        total, count = bound.compile_config(config)(x)
        torch.testing.assert_close(total, x.sum(1), rtol=1e-4, atol=1e-4)
        steps = -(-37 // bound.normalize(config)["block_sizes"][1])
        assert torch.equal(count, torch.full((13,), steps, dtype=torch.int32))
    with pytest.raises(exc.LoopCarriedTypeChange, match="'acc' from a tuple of 2 to a value"):
        helion.kernel(tuple_becomes_tensor, backend=backend, autotune_effort="none")(x)
