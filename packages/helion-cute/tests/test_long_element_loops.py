"""Loops over a thread's elements with many trips are run-time loops, not unrolled.

With few threads and large tiles a thread holds hundreds of elements: a jagged-dense batched
matmul at ``num_threads=32`` gave each thread 1024 gathered elements, and the fully unrolled
``range_constexpr`` loops over them (the gather, its copy to shared memory) took cute.compile
70-110 s. Past ``UNROLL_LIMIT`` trips (or ``UNROLL_WORK_LIMIT``, trips x bytes of the register
tensor walked) such a loop is now a ``cutlass.range`` loop, each static table lookup ``_Tn[_c]``
rewritten as arithmetic on the loop variable (the tables are sums over the bits of the element
number; see ``bit_linear``).

This machine has no GPU: the kernels are compiled for sm_90a; those whose threads do not talk
to each other also run on the host CPU one thread after another (`cute_host`) and are compared
with PyTorch.
"""

from __future__ import annotations

import re

import cute_kernels
import pytest
import sympy
import torch
from cute_host import runs_on_host

import helion.language as hl
from helion.testing import bind
from helion_cute.codegen import UNROLL_LIMIT
from helion_cute.codegen import UNROLL_WORK_LIMIT
from helion_cute.codegen import bit_linear
from helion_cute.codegen import element_loop_lines
from helion_cute.layout import Axis
from helion_cute.layout import ThreadLayout


def _long_constexpr_loops(source: str) -> list[int]:
    counts = [int(n) for n in re.findall(r"range_constexpr\((\d+)\)", source)]
    return [n for n in counts if n > UNROLL_LIMIT]


def _rolled_loops(source: str) -> list[int]:
    return [int(n) for n in re.findall(r"cutlass\.range\((\d+), unroll=1\)", source)]


# -- the tables as arithmetic ----------------------------------------------------------------------


def test_bit_linear_reproduces_the_tables_of_a_layout() -> None:
    a, b, c = sympy.symbols("a b c")
    layout = ThreadLayout([Axis(a, 4, 3), Axis(b, 64, 37), Axis(c, 32, 23)], 32, 4)
    every = frozenset([a, b, c])
    elements = layout.elements(every)
    tables = [
        [layout.flat_index(every, e) for e in elements],
        [layout.flat_index(frozenset([a, c]), e) for e in elements],
        [layout.axis(b).offset(e[b]) for e in elements],
        [layout.axis(c).offset(e[c]) * 45 + layout.axis(a).offset(e[a]) * 7 + 3 for e in elements],
        [0] * len(elements),
    ]
    for table in tables:
        form = bit_linear(table, "_c")
        assert form is not None, table
        assert [eval(form, {"_c": i}) for i in range(len(table))] == table


def test_bit_linear_refuses_other_tables() -> None:
    assert bit_linear([0, 1, 3, 2], "_c") is None  # not a sum over bits
    assert bit_linear([0, 1, 2], "_c") is None  # not a power-of-two length
    assert bit_linear([0, 2**31], "_c") is None  # past the loop variable's Int32


def test_element_loop_lines_rolls_long_loops_and_large_tensors() -> None:
    n = UNROLL_LIMIT * 2
    tables = {"_T0": tuple(range(0, 3 * n, 3)), "_T1": tuple((i * 7) % n for i in range(n))}
    body = ["    x[_T0[_c]] = y[_c]"]
    short = element_loop_lines("_c", UNROLL_LIMIT, body, tables, UNROLL_WORK_LIMIT // n)
    assert short == [f"for _c in cutlass.range_constexpr({UNROLL_LIMIT}):", *body]
    rolled = ["    x[(_c * 3)] = y[_c]"]
    assert element_loop_lines("_c", n, body, tables) == [
        f"for _c in cutlass.range({n}, unroll=1):",
        *rolled,
    ]
    # few trips over a large register tensor
    assert element_loop_lines("_c", 64, body, tables, UNROLL_WORK_LIMIT // 64 + 1) == [
        "for _c in cutlass.range(64, unroll=1):",
        *rolled,
    ]
    # a table without the arithmetic form keeps the loop unrolled
    odd = ["    x[_T1[_c]] = y[_T0[_c]]"]
    assert element_loop_lines("_c", n, odd, tables)[0] == f"for _c in cutlass.range_constexpr({n}):"


# -- kernels -----------------------------------------------------------------------------------------


def _gather_masked(x: torch.Tensor, idx: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([idx.size(0), x.size(1)], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([idx.size(0), x.size(1)]):
        mask = keep[tile_m][:, None]
        v = hl.load(x, [idx[tile_m], tile_n], extra_mask=mask)
        hl.store(out, [tile_m, tile_n], v * 2 + tile_m.index[:, None], extra_mask=mask)
    return out


def test_gather_with_a_long_per_thread_loop_matches_torch(on_host: None) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(53, 45, generator=g)
    idx = torch.randint(0, 53, (300,), generator=g)
    keep = torch.rand(300, generator=g) > 0.3
    bound = bind(_gather_masked, "cute", (x, idx, keep))
    config = dict(bound.config_spec.default_config())
    # one warp for a 512x64 tile: each thread moves 1024 elements, 512 rows each
    config.update(block_sizes=[512, 64], num_threads=[32])
    compiled = bound.compile_config(bound.normalize(config))
    source = compiled.source
    assert not _long_constexpr_loops(source), source
    # coordinates and the loads of idx and keep (512 rows), the gather and the store
    assert sorted(_rolled_loops(source)) == [512, 512, 512, 1024, 1024], source
    assert runs_on_host(source), source
    rows = torch.arange(300, dtype=x.dtype)[:, None]
    expected = torch.where(keep[:, None], x[idx] * 2 + rows, torch.zeros(()))
    torch.testing.assert_close(compiled(x, idx, keep), expected)


def _affine(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 2.0 + y[tile_m, tile_n]
    return out


def test_vector_chunks_of_a_large_fragment_match_torch(on_host: None) -> None:
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(300, 60, generator=g), torch.randn(300, 60, generator=g)
    bound = bind(_affine, "cute", (x, y))
    config = dict(bound.config_spec.default_config())
    # 1024 floats a thread in 256 chunks of 4: unrolled, ~15 s of cute.compile per loop
    config.update(block_sizes=[512, 64], num_threads=[32])
    compiled = bound.compile_config(bound.normalize(config))
    source = compiled.source
    assert _rolled_loops(source) == [256, 256, 256], source
    assert "cute.make_layout(4)" in source, source
    assert runs_on_host(source), source
    torch.testing.assert_close(compiled(x, y), x * 2 + y)


def _row_max(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m] = torch.amax(x[tile_m, :], dim=1)
    return out


def test_reduction_with_many_rows_per_thread_compiles_rolled() -> None:
    # 1024 rows of 23 in one warp: each thread reduces 1024 rows by shuffles (integer max
    # folds its elements first)
    x = torch.randint(-50, 50, (1500, 23), dtype=torch.int32)
    bound = bind(_row_max, "cute", (x,))
    config = dict(bound.config_spec.default_config())
    config.update(block_sizes=[1024], num_threads=[32])
    source = bound.compile_config(bound.normalize(config)).source
    assert not _long_constexpr_loops(source), source
    assert _rolled_loops(source).count(1024) >= 3, source  # the fold, the shuffles, the load


@pytest.mark.parametrize("threads", [32, 64])
def test_jagged_dense_bmm_with_few_threads_compiles_rolled(threads: int) -> None:
    # unrolled, cute.compile of this config took ~100 s (32 threads) and ~20 s (64 threads)
    lengths = torch.tensor([3, 0, 9, 5, 7])
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    jagged = torch.randn(int(offsets[-1]), 34)
    dense = torch.randn(5, 34, 24)
    bound = bind(cute_kernels.jagged_dense_bmm.fn, "cute", (offsets, jagged, dense))
    config = dict(bound.config_spec.default_config())
    config.update(block_sizes=[1, 64, 32, 64], num_threads=[threads])
    source = bound.compile_config(bound.normalize(config)).source
    assert not _long_constexpr_loops(source), source
    # the gather of the jagged rows and its copy to shared memory
    assert _rolled_loops(source).count(32768 // threads) == 2, source


def test_simt_matmul_with_a_large_accumulator_compiles_rolled() -> None:
    # float32 operands take the FMA fallback: 512 accumulator elements a thread
    bound = bind(cute_kernels.matmul.fn, "cute", (torch.randn(300, 70), torch.randn(70, 200)))
    config = dict(bound.config_spec.default_config())
    config.update(block_sizes=[128, 128, 32], num_threads=[32])
    source = bound.compile_config(bound.normalize(config)).source
    assert "for _e in cutlass.range(512, unroll=1):" in source, source
    assert not _long_constexpr_loops(source), source
