"""helion-distributed in one process: a gloo group of one rank (CPU symmetric memory), the ops'
errors and the ref lowering merge. The multi-rank suite is tests/test_distributed.py at the root."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import helion
import helion.language as hl
import helion_distributed as hd
from helion import exc
from helion import plugins
from helion_distributed import symm_mem


def test_without_a_group_the_error_says_how_to_start_one() -> None:
    if dist.is_initialized():
        pytest.skip("a process group is initialized")
    with pytest.raises(hd.SymmetricMemoryError, match="init_process_group"):
        symm_mem.rendezvous(symm_mem.empty(3), None)


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory):
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    store = dist.FileStore(str(tmp_path_factory.mktemp("store") / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


@helion.kernel(config=helion.Config(block_sizes=[8]), static_shapes=True, backend="ref")
def _wait_forever(
    x: torch.Tensor, buffer: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr
) -> torch.Tensor:
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        hl.wait(pads[RANK], [3], 1, timeout=0.3)
        out[tile] = x[tile]
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]), static_shapes=True, backend="ref")
def _runtime_rank(
    x: torch.Tensor, buffer: torch.Tensor, GROUP: hl.ProcessGroupName, rank: int
) -> torch.Tensor:
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = hl.all_reduce(x[tile], peers, [tile], pads, rank)
    return out


def test_symm_mem_handle(group) -> None:
    buffer = symm_mem.empty(4, 3, dtype=torch.float32)
    assert buffer.shape == (4, 3) and int(buffer.abs().sum()) == 0
    handle = symm_mem.rendezvous(buffer, group)
    assert (handle.rank, handle.world_size) == (0, 1)
    assert handle.buffer_ptrs == [buffer.data_ptr()]
    (peer,) = symm_mem.get_remote_tensors(buffer)
    assert peer is buffer
    handle.get_buffer(0, [12], torch.float32)[5] = 2.0
    assert float(buffer[1, 2]) == 2.0
    (pad,) = symm_mem.get_signal_pads(buffer, group.group_name)
    assert pad.dtype == torch.int32 and pad.numel() == symm_mem.get_signal_pad_size() // 4
    handle.barrier()
    handle.put_signal(0)
    handle.wait_signal(0)
    assert int(pad.abs().sum()) == 0
    with pytest.raises(hd.SymmetricMemoryError, match=r"symm_mem\.empty"):
        symm_mem.rendezvous(torch.zeros(3), group)


def test_ready_kernels_at_world_size_one(group) -> None:
    x = torch.randn(300, 7)
    torch.testing.assert_close(hd.all_reduce(x, algorithm="one_shot"), x)
    torch.testing.assert_close(hd.all_reduce(x, algorithm="two_shot"), x)
    torch.testing.assert_close(hd.all_gather(x), x)
    torch.testing.assert_close(hd.reduce_scatter(x), x)
    b = torch.randn(7, 11)
    gathered, product = hd.all_gather_matmul(x, b)
    torch.testing.assert_close(gathered, x)
    torch.testing.assert_close(product, x @ b, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(hd.matmul_reduce_scatter(x, b), x @ b, atol=1e-4, rtol=1e-4)
    bias, weight = torch.randn(7), torch.randn(7)
    row = x + bias
    expected = row * torch.rsqrt(row.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
    torch.testing.assert_close(
        hd.all_reduce_bias_rms_norm(x, bias, weight), expected, atol=1e-4, rtol=1e-4
    )


def test_wait_times_out_naming_rank_and_pad(group) -> None:
    buffer = symm_mem.empty(16, dtype=torch.float32)
    with pytest.raises(hd.DistributedTimeout) as info:
        _wait_forever(
            torch.ones(16), buffer, hl.ProcessGroupName(group.group_name), hl.constexpr(0)
        )
    text = str(info.value)
    assert "rank 0" in text and "hl.wait" in text and "the signal pad of rank 0" in text
    assert "hl.wait(pads[RANK], [3], 1, timeout=0.3)" in text  # the kernel line


def test_rank_must_be_a_constexpr(group) -> None:
    buffer = symm_mem.empty(16, dtype=torch.float32)
    with pytest.raises(exc.TypeInferenceError, match="constexpr"):
        _runtime_rank(torch.ones(16), buffer, hl.ProcessGroupName(group.group_name), 0)


def test_ops_outside_a_kernel() -> None:
    with pytest.raises(exc.NotInsideKernel):
        hl.signal(torch.zeros(4, dtype=torch.int32), [0])
    with pytest.raises(exc.NotInsideKernel):
        hl.all_reduce(torch.zeros(4), (), [0], (), 0)


def test_bad_arguments_are_reported(group) -> None:
    with pytest.raises(ValueError, match="op must be"):
        hd.all_reduce(torch.zeros(3), op="mean")
    with pytest.raises(ValueError, match="algorithm"):
        hd.all_reduce(torch.zeros(3), algorithm="three_shot")
    with pytest.raises(ValueError, match="divisible"):
        hd.reduce_scatter(torch.zeros(()))


def test_fp8_kernels_check_dtypes(group) -> None:
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        hd.fp8_matmul_reduce_scatter(
            torch.zeros(4, 4), torch.zeros(4, 4), torch.ones(4, 1), torch.ones(1, 4)
        )


def test_duplicate_lowering_is_an_error() -> None:
    from helion.backends.ref.lowerings import ref_lowerings
    from helion_distributed import language

    class Duplicate:
        @plugins.hookimpl
        def helion_lowerings(self, backend: str):
            return {language.signal_op: lambda ex, node, inputs: None} if backend == "ref" else {}

    plugins.register_plugin(Duplicate(), "duplicate-distributed-lowering")
    try:
        with pytest.raises(ValueError, match="dist_signal is provided twice"):
            ref_lowerings()
    finally:
        plugins.unregister_plugin("duplicate-distributed-lowering")
    assert language.signal_op in ref_lowerings()
