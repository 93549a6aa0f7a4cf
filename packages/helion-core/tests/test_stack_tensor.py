"""`hl.stacktensor_like` on the ref backend (default and random configs) and in eager mode,
against PyTorch on the same buffers, plus how pointers are resolved and the misuse errors."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc


@helion.kernel()
def weighted_sum(dev_ptrs: torch.Tensor, like: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """out = sum_j weights[j] * buffer_j."""
    m, n = like.size()
    out = torch.empty([m, n], dtype=torch.float32, device=like.device)
    for tile_m, tile_n in hl.tile([m, n]):
        stack = hl.stacktensor_like(like, dev_ptrs[:])
        values = stack[tile_m, tile_n]
        out[tile_m, tile_n] = (values * weights[:][:, None, None]).sum(dim=0)
    return out


@helion.kernel()
def scatter_rows(dev_ptrs: torch.Tensor, x: torch.Tensor, limit: int) -> None:
    """buffer_j[i] = x[i] * 2 + j for i < limit (the rest is left alone): one store of a value
    per buffer, one broadcast store, both masked with extra_mask on the second."""
    n = x.size(0)
    for tile in hl.tile(n):
        stack = hl.stacktensor_like(x, dev_ptrs[:])
        stack[tile] = x[tile] * 2
        offsets = hl.arange(dev_ptrs.size(0), dtype=torch.float32)[:, None]
        hl.store(stack, [tile], hl.load(stack, [tile]) + offsets, extra_mask=tile.index < limit)


@helion.kernel()
def gather_minus(dev_ptrs: torch.Tensor, like: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """out[j] = buffer_j - other."""
    n = like.size(0)
    out = torch.empty([dev_ptrs.size(0), n], dtype=like.dtype, device=like.device)
    for tile in hl.tile(n):
        out[:, tile] = hl.stacktensor_like(like, dev_ptrs[:])[tile] - other[tile][None, :]
    return out


def _check_ref_and_eager(kernel, make_args, expected_fn, configs: int = 5) -> None:
    args = make_args()
    bound = helion.kernel(kernel.fn, backend="ref").bind(args)
    spec = bound.config_spec
    for config in [spec.default_config()] + [
        spec.random_config(random.Random(s)) for s in range(configs)
    ]:
        args = make_args()
        torch.testing.assert_close(bound.compile_config(config)(*args), expected_fn(*args))
    args = make_args()
    eager = helion.kernel(kernel.fn, ref_mode=helion.RefMode.EAGER)
    torch.testing.assert_close(eager(*args), expected_fn(*args))


def test_load_reads_every_buffer():
    buffers = [torch.randn(11, 7) for _ in range(5)]
    weights = torch.randn(5)
    ptrs = hl.stack_pointers(buffers)
    expected = sum(w * b for w, b in zip(weights, buffers, strict=True))
    _check_ref_and_eager(weighted_sum, lambda: (ptrs, buffers[0], weights), lambda *a: expected)


def test_store_writes_every_buffer():
    x = torch.randn(13)
    buffers = [torch.full((13,), -1.0) for _ in range(3)]
    ptrs = hl.stack_pointers(buffers)
    expected = [x * 2 + j * (torch.arange(13) < 9) for j in range(3)]

    def run(kernel):
        for b in buffers:
            b.fill_(-1.0)
        kernel(ptrs, x, 9)
        for b, e in zip(buffers, expected, strict=True):
            torch.testing.assert_close(b, e)

    bound = helion.kernel(scatter_rows.fn, backend="ref").bind((ptrs, x, 9))
    spec = bound.config_spec
    for config in [spec.default_config()] + [
        spec.random_config(random.Random(s)) for s in range(4)
    ]:
        run(bound.compile_config(config))
    run(helion.kernel(scatter_rows.fn, ref_mode=helion.RefMode.EAGER))


def test_tensor_arguments_need_no_registry():
    like, other = torch.randn(9), torch.randn(9)
    ptrs = torch.tensor([other.data_ptr(), like.data_ptr(), other.data_ptr()], dtype=torch.uint64)
    expected = torch.stack([other - other, like - other, other - other])
    _check_ref_and_eager(gather_minus, lambda: (ptrs, like, other), lambda *a: expected, configs=2)


def test_pointers_into_one_registered_tensor():
    big = torch.randn(6, 9)
    hl.register_buffers(big)
    rows = [big[i] for i in (4, 1, 3)]
    ptrs = torch.tensor([r.data_ptr() for r in rows], dtype=torch.uint64)
    zero = torch.zeros(9)
    for kernel in (
        helion.kernel(gather_minus.fn, backend="ref", autotune_effort="none"),
        helion.kernel(gather_minus.fn, ref_mode=helion.RefMode.EAGER),
    ):
        torch.testing.assert_close(kernel(ptrs, rows[0], zero), torch.stack(rows))


def test_unknown_or_null_pointer_is_an_error():
    like, zero = torch.randn(9), torch.zeros(9)
    stranger = torch.randn(9)  # neither an argument nor registered
    for address in (stranger.data_ptr(), 0):
        ptrs = torch.tensor([address], dtype=torch.uint64)
        with pytest.raises(exc.StackTensorUnknownPointer):
            helion.kernel(gather_minus.fn, backend="ref", autotune_effort="none")(ptrs, like, zero)
        with pytest.raises(exc.StackTensorUnknownPointer):
            helion.kernel(gather_minus.fn, ref_mode=helion.RefMode.EAGER)(ptrs, like, zero)


def test_buffer_smaller_than_the_layout_is_an_error():
    like = torch.randn(9)
    short = torch.randn(5)
    ptrs = torch.tensor([short.data_ptr()], dtype=torch.uint64)
    with pytest.raises(exc.StackTensorUnknownPointer, match="needs 36"):
        helion.kernel(gather_minus.fn, backend="ref", autotune_effort="none")(
            ptrs, like, short[:1].expand(9)
        )


# -- misuse ---------------------------------------------------------------------------------------


def _wrong_dtype(dev_ptrs: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(like)
    for tile in hl.tile(like.size(0)):
        out[tile] = hl.stacktensor_like(like, dev_ptrs[:].to(torch.int64))[tile].sum(0)
    return out


def _host_pointers(dev_ptrs: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(like)
    for tile in hl.tile(like.size(0)):
        out[tile] = hl.stacktensor_like(like, dev_ptrs)[tile].sum(0)
    return out


def _example_on_device(dev_ptrs: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(like)
    for tile in hl.tile(like.size(0)):
        out[tile] = hl.stacktensor_like(like[tile], dev_ptrs[:])[tile].sum(0)
    return out


def _on_host(dev_ptrs: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    stack = hl.stacktensor_like(like, dev_ptrs)  # noqa: F841 - the host-side call is the error under test
    out = torch.empty_like(like)
    for tile in hl.tile(like.size(0)):
        out[tile] = like[tile]
    return out


def _atomic_on_stack(dev_ptrs: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(like.size(0)):
        hl.atomic_add(hl.stacktensor_like(like, dev_ptrs[:]), [tile], 1.0)
    return like


@pytest.mark.parametrize(
    "fn, error",
    [
        (_wrong_dtype, exc.StackTensorDevPtrDtype),
        (_host_pointers, exc.StackTensorDevPtrOnHost),
        (_example_on_device, exc.StackTensorExampleOnDevice),
        (_on_host, exc.StackTensorcOnHost),
        (_atomic_on_stack, exc.NotAllowedOnDevice),
    ],
)
def test_misuse_errors(fn, error):
    like, second = torch.randn(7), torch.randn(7)
    ptrs = hl.stack_pointers([like, second])
    with pytest.raises(error):
        helion.kernel(fn, backend="ref", autotune_effort="none")(ptrs, like)
    # eager mode cannot tell a loaded tensor from a host one
    if fn is not _example_on_device:
        with pytest.raises(error):
            helion.kernel(fn, ref_mode=helion.RefMode.EAGER)(ptrs, like)
