"""Code the Triton backend generates around crashes of the compiled Triton on the GPU machine
(3.6), which the interpreter here (3.9) does not have: each was found by running core's
conformance cases on an H200 (`benchmarks/conformance_gpu.py`) and reproduced without a GPU by
compiling for sm_90 with Triton 3.6 (`benchmarks/sm90_compile_check.py --conformance`). The
tests check the generated code, and that it still computes what torch does."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion_triton import tunables


@helion.kernel(backend="triton", autotune_effort="none")
def row_sum_to(x: torch.Tensor, end: int) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_k in hl.tile(0, end):
            acc += x[tile_m, tile_k].sum(-1)
        out[tile_m] = acc
    return out


@helion.kernel(backend="triton", autotune_effort="none")
def scale_inner(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        for tile_k in hl.tile(x.size(1)):
            out[tile_m, tile_k] = x[tile_m, tile_k] * 2
    return out


UNROLLED = {"block_sizes": [16, 16], "range_unroll_factors": [3]}


def test_a_loop_that_reduces_is_not_unrolled_where_triton_crashes_on_it(monkeypatch) -> None:
    # Triton 3.6: TritonGPUOptimizeThreadLocality asserts on `acc + tl.sum(chunk)` in a loop
    # with loop_unroll_factor > 1 (sm_90)
    x = torch.randn(37, 45)
    bound = row_sum_to.bind((x, 45))
    monkeypatch.setattr(tunables, "unrolled_reduction_loops_ok", lambda: True)
    assert "loop_unroll_factor=3" in bound.to_code(UNROLLED)
    monkeypatch.setattr(tunables, "unrolled_reduction_loops_ok", lambda: False)
    fresh = helion.kernel(row_sum_to.fn, backend="triton", autotune_effort="none")
    bound = fresh.bind((x, 45))
    assert "loop_unroll_factor" not in bound.to_code(UNROLLED)
    torch.testing.assert_close(bound.compile_config(UNROLLED)(x, 45), x.sum(-1))


def test_a_loop_without_a_reduction_keeps_its_unroll_factor(monkeypatch) -> None:
    monkeypatch.setattr(tunables, "unrolled_reduction_loops_ok", lambda: False)
    x = torch.randn(37, 45)
    bound = scale_inner.bind((x,))
    assert "loop_unroll_factor=3" in bound.to_code(UNROLLED)
    torch.testing.assert_close(bound.compile_config(UNROLLED)(x), x * 2)


@helion.kernel(backend="triton", autotune_effort="none")
def any_all(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    any_out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    all_out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        any_out[tile] = row.any(-1)
        all_out[tile] = (row > 0).all(-1)
    return any_out, all_out


@pytest.fixture
def hopper(monkeypatch):
    """Generate code as for an sm_90 GPU with block pointers (the Triton here may have none):
    the tests only read the code, nothing is launched."""
    from helion_triton import target as target_module

    gpu = target_module.TritonTarget(
        "cuda", False, (9, 0), 132, True, True, target_module.range_kwargs()
    )
    monkeypatch.setattr(target_module, "_target", lambda device_type, index, forced: gpu)
    return gpu


def _source(bound, config: dict, target) -> str:
    # the code generator alone: loading the module would ask for a GPU driver
    return bound.backend.generate(bound.ir, bound.normalize(config), target).source


def test_bool_tensors_are_not_accessed_through_block_pointers(hopper) -> None:
    # a block pointer to a bool tensor has int8 elements: compiled Triton refuses to store an
    # int1 tile through it ("Block element type(int8) and value element type(int1) mismatch")
    kernel = helion.kernel(any_all.fn, backend="triton", autotune_effort="none")
    bound = kernel.bind((torch.randn(37, 19) > 0.3,))
    code = _source(bound, {"block_sizes": [16], "indexing": ["block_ptr"] * 3}, hopper)
    assert "tl.make_block_ptr(any_out" not in code and "tl.make_block_ptr(all_out" not in code
    assert "tl.make_block_ptr(x" not in code
    assert code.count("tl.store(") == 2


def test_other_dtypes_still_use_block_pointers(hopper) -> None:
    kernel = helion.kernel(scale_inner.fn, backend="triton", autotune_effort="none")
    bound = kernel.bind((torch.randn(37, 19),))
    code = _source(bound, {"block_sizes": [16, 16], "indexing": ["block_ptr"] * 2}, hopper)
    assert "tl.make_block_ptr(x" in code and "tl.make_block_ptr(out" in code


def test_any_all_matches_torch() -> None:
    x = torch.randn(37, 19) > 0.3
    got_any, got_all = any_all(x)
    torch.testing.assert_close(got_any, x.any(-1))
    torch.testing.assert_close(got_all, x.all(-1))
