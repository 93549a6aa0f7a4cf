"""Configs whose tiles exceed Triton's per-tensor element limit are refused before compiling."""

from __future__ import annotations

import torch

import helion
import helion.language as hl
from helion_triton.tunables import max_tensor_numel
from helion_triton.tunables import tile_problem


@helion.kernel(backend="triton")
def batched_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    b, m, _d = q.shape
    n = k.size(1)
    out = torch.empty([b, m], dtype=torch.float32, device=q.device)
    for tile_b, tile_m in hl.tile([b, m]):
        best = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        for tile_n in hl.tile(n):
            scores = torch.bmm(q[tile_b, tile_m, :], k[tile_b, tile_n, :].transpose(1, 2))
            best = torch.maximum(best, scores.to(torch.float32).amax(dim=-1))
        out[tile_b, tile_m] = best
    return out


@helion.kernel(backend="triton")
def row_sums(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile, :].to(torch.float32).sum(dim=-1)
    return out


def test_the_limit_is_tritons() -> None:
    assert max_tensor_numel() == 1 << 20


def test_a_3d_score_tile_over_the_limit_is_a_problem_naming_its_line() -> None:
    q, k = torch.randn(3, 70, 32), torch.randn(3, 90, 32)
    bound = batched_scores.bind((q, k))
    # scores: [tile_b, tile_m, tile_n] = 4 * 512 * 1024 = 2 Mi elements
    problem = tile_problem(bound.ir, helion.Config(block_sizes=[4, 512, 1024]))
    assert problem is not None and "2097152 elements" in problem
    assert "test_tile_limit.py" in problem
    assert tile_problem(bound.ir, helion.Config(block_sizes=[1, 64, 64])) is None
    # exactly the limit is allowed: 4 * 256 * 1024
    assert tile_problem(bound.ir, helion.Config(block_sizes=[4, 256, 1024])) is None


def test_a_row_reduction_counts_its_padded_width_or_its_chunk() -> None:
    x = torch.randn(5, 3000)  # padded to 4096 lanes
    bound = row_sums.bind((x,))
    assert tile_problem(bound.ir, helion.Config(block_sizes=[256])) is None
    problem = tile_problem(bound.ir, helion.Config(block_sizes=[512]))
    assert problem is not None and "2097152 elements" in problem
    # a looped reduction holds one chunk of the row at a time
    assert tile_problem(bound.ir, helion.Config(block_sizes=[512], reduction_loops=[1024])) is None


def test_the_backend_reports_it_to_the_autotuner() -> None:
    q, k = torch.randn(3, 70, 32), torch.randn(3, 90, 32)
    bound = batched_scores.bind((q, k))
    config = helion.Config(block_sizes=[4, 512, 1024])
    assert bound.backend.config_problem(bound.ir, config, q.device) == tile_problem(
        bound.ir, config
    )


@helion.kernel(backend="triton")
def plain_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


def test_a_dot_accumulator_must_fit_the_registers_of_its_threads_on_a_gpu() -> None:
    a, b = torch.randn(1500, 60), torch.randn(60, 1100)
    bound = plain_matmul.bind((a, b))
    # 1024 x 1024 fp32 on 16 warps: 2048 registers a thread (what ptxas refused on the H200)
    huge = helion.Config(block_sizes=[1024, 1024, 32], num_warps=16)
    problem = tile_problem(bound.ir, huge, gpu=True)
    assert problem is not None and "2048 registers" in problem and "16 warps" in problem
    assert tile_problem(bound.ir, huge) is None  # the interpreter has no register file
    # 128 x 256 on 8 warps (the matmul seeds' largest): 128 registers a thread
    assert (
        tile_problem(bound.ir, helion.Config(block_sizes=[128, 256, 64], num_warps=8), gpu=True)
        is None
    )
    # 256 x 256 on 4 warps: 512 registers a thread
    assert (
        tile_problem(bound.ir, helion.Config(block_sizes=[256, 256, 64], num_warps=4), gpu=True)
        is not None
    )
    backend = bound.backend
    assert backend.config_problem(bound.ir, huge, torch.device("cuda")) == problem
    assert backend.config_problem(bound.ir, huge, torch.device("cpu")) is None


def test_a_whole_row_that_would_spill_is_refused_on_a_gpu_where_it_could_loop() -> None:
    x = torch.randn(3, 100_000)  # padded to 131072 lanes: 256 a thread on 16 warps
    bound = row_sums.bind((x,))
    whole = helion.Config(block_sizes=[1], reduction_loops=[None], num_warps=16)
    problem = tile_problem(bound.ir, whole, gpu=True)
    assert (
        problem is not None
        and "256 registers per thread" in problem
        and "reduction_loops" in problem
    )
    # the interpreter has no registers to spill; and a looped row holds one chunk
    assert tile_problem(bound.ir, whole, gpu=False) is None
    looped = helion.Config(block_sizes=[1], reduction_loops=[4096], num_warps=4)
    assert tile_problem(bound.ir, looped, gpu=True) is None
    # 32 warps hold the row in 128 registers a thread
    assert (
        tile_problem(
            bound.ir, helion.Config(block_sizes=[1], reduction_loops=[None], num_warps=32), gpu=True
        )
        is None
    )


def test_a_wide_row_that_cannot_loop_is_left_to_the_compiler(monkeypatch) -> None:
    from helion_triton import analysis

    x = torch.randn(3, 100_000)
    bound = row_sums.bind((x,))
    block = bound.ir.reduction_blocks()[0].block_id
    monkeypatch.setitem(analysis.analyze(bound.ir).rdim_infeasible, block, "a store of the row")
    whole = helion.Config(block_sizes=[1], reduction_loops=[None], num_warps=16)
    assert tile_problem(bound.ir, whole, gpu=True) is None


def test_a_looped_reduction_chunk_that_would_spill_is_refused_on_a_gpu() -> None:
    """Cross entropy's [64, 512] chunk on 1 warp spilled 15480 bytes a thread under sm_90 ptxas
    (benchmarks/sm90_compile_check.py, Triton 3.6): a chunk is held whole while it is reduced."""
    x = torch.randn(300, 5000)
    bound = row_sums.bind((x,))
    spilling = helion.Config(block_sizes=[64], reduction_loops=[512], num_warps=1)
    problem = tile_problem(bound.ir, spilling, gpu=True)
    assert problem is not None and "1024 registers per thread with 1 warps" in problem
    assert "reduction chunk" in problem and "reduction_loops" in problem
    assert tile_problem(bound.ir, spilling, gpu=False) is None  # no register file to spill
    # the same chunk on 8 warps (128 a thread), or one row's chunk of 256 on 1 warp (8 a thread)
    assert (
        tile_problem(
            bound.ir, helion.Config(block_sizes=[64], reduction_loops=[512], num_warps=8), gpu=True
        )
        is None
    )
    assert (
        tile_problem(
            bound.ir, helion.Config(block_sizes=[1], reduction_loops=[256], num_warps=1), gpu=True
        )
        is None
    )
