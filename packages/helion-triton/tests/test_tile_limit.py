"""Configs whose tiles exceed Triton's per-tensor element limit are refused before compiling."""

from __future__ import annotations

import torch

import helion
import helion.language as hl
from helion_triton.tunables import max_tensor_numel
from helion_triton.tunables import tile_problem


@helion.kernel(backend="triton")
def batched_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    b, m, d = q.shape
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
    assert bound.backend.config_problem(bound.ir, config, q.device) == tile_problem(bound.ir, config)
