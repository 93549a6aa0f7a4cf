"""What the generated source contains for a given config, and the backend's contracts: tunables,
compile caching, errors for unsupported ops, plugin lowerings, printing the code."""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import kernels as K
import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion import plugins
from helion.language import _ops as ops
from helion.passes.config_spec import derive_config_spec
from helion.plugins import hookimpl
from helion_triton import lowerings
from helion_triton.analysis import analyze
from helion_triton.target import TritonTarget
from helion_triton.target import has_block_ptr
from helion_triton.target import range_kwargs
from helion_triton.target import target_for
from helion_triton.tunables import adjust_spec


def bind(fn, *args, **settings):
    settings.setdefault("autotune_effort", "none")
    return helion.kernel(fn, backend="triton", **settings).bind(args)


def matmul_args():
    return torch.randn(37, 29), torch.randn(29, 19)


def run_and_check(bound, config, args, expected, atol=1e-4):
    compiled = bound.compile_config(config)
    torch.testing.assert_close(compiled(*args), expected, atol=atol, rtol=atol)
    return bound.to_code(config)


# -- tunables in the generated code -------------------------------------------------------------------


@pytest.mark.skipif(
    not {"num_stages", "loop_unroll_factor"} <= range_kwargs(),
    reason="this Triton's tl.range takes no num_stages / loop_unroll_factor",
)
def test_range_options_reach_tl_range():
    a, b = matmul_args()
    bound = bind(K.matmul, a, b)
    config = {
        "block_sizes": [16, 16, 16],
        "range_num_stages": [3],
        "range_unroll_factors": [2],
        "range_multi_buffers": [False],
        "range_flattens": [True],
    }
    source = run_and_check(bound, config, (a, b), a @ b, 1e-3)
    (header,) = [
        line
        for line in source.splitlines()
        if "for offset_2 in tl.range(0, 29, _BLOCK_SIZE_2" in line
    ]
    for option in (
        "num_stages=3",
        "loop_unroll_factor=2",
        "disallow_acc_multi_buffer=True",
        "flatten=True",
    ):
        assert option in header


@pytest.mark.skipif(
    not {"num_stages", "loop_unroll_factor"} <= range_kwargs(),
    reason="this Triton's tl.range takes no num_stages / loop_unroll_factor",
)
def test_a_public_helion_matmul_config_loads_and_runs():
    """The autotuned matmul config public Helion prints (range_* lists with a leading entry for
    the top-level loop) is taken as written; the K loop gets the second entries."""
    a, b = matmul_args()
    bound = bind(K.matmul, a, b)
    config = helion.Config(
        block_sizes=[16, 16, 16],
        loop_orders=[[0, 1]],
        l2_groupings=[4],
        range_unroll_factors=[0, 1],
        range_warp_specializes=[None, False],
        range_num_stages=[0, 3],
        range_multi_buffers=[None, False],
        range_flattens=[None, None],
        num_warps=8,
        num_stages=6,
        pid_type="flat",
    )
    source = run_and_check(bound, config, (a, b), a @ b, 1e-3)
    (header,) = [line for line in source.splitlines() if "for offset_2 in tl.range(" in line]
    assert "num_stages=3" in header and "loop_unroll_factor=1" in header


def test_static_range():
    a, b = matmul_args()
    source = run_and_check(
        bind(K.matmul, a, b),
        {"block_sizes": [16, 16, 16], "static_ranges": [True]},
        (a, b),
        a @ b,
        1e-3,
    )
    assert "tl.static_range(0, 29, _BLOCK_SIZE_2)" in source


@pytest.mark.parametrize(
    "pid_type, marker",
    [
        ("flat", "pid = tl.program_id(0)"),
        ("xyz", "tl.program_id(1)"),
        ("persistent_blocked", "tiles_per_program = tl.cdiv("),
        ("persistent_interleaved", "in tl.range(tl.program_id(0), 6, tl.num_programs(0)):"),
    ],
)
def test_pid_types(pid_type, marker, device):
    a, b = (t.to(device) for t in matmul_args())
    bound = bind(K.matmul, a, b, dot_precision="ieee")
    source = run_and_check(
        bound, {"block_sizes": [16, 16, 16], "pid_type": pid_type}, (a, b), a @ b, 1e-3
    )
    assert marker in source
    assert ("virtual_pid" in source) == pid_type.startswith("persistent")


def test_l2_grouping_and_loop_order():
    a, b = matmul_args()
    config = {"block_sizes": [16, 16, 16], "l2_groupings": [2], "loop_orders": [[1, 0]]}
    source = run_and_check(bind(K.matmul, a, b), config, (a, b), a @ b, 1e-3)
    assert "num_pid_in_group = 6" in source  # 2 rows of the 3 tiles of dim 0
    assert "group_size = tl.minimum(2 - first_pid, 2)" in source  # dim 1 (2 tiles) varies fastest


def test_flatten_loops():
    x, y = torch.randn(37, 29), torch.randn(37, 29)
    bound = bind(K.add, x, y)
    source = run_and_check(bound, {"block_sizes": [8, 16], "flatten_loops": [True]}, (x, y), x + y)
    assert (
        "flat_index = pid * (_BLOCK_SIZE_0 * _BLOCK_SIZE_1) + tl.arange(0, _BLOCK_SIZE_0 * _BLOCK_SIZE_1)"
        in source
    )
    assert "flat_mask = flat_index < 1073" in source


def test_looped_and_persistent_reductions():
    x = torch.randn(5, 1000)
    bound = bind(K.long_sum, x)
    looped = run_and_check(
        bound, {"block_sizes": [2], "reduction_loops": [64]}, (x,), x.sum(-1), 1e-3
    )
    # 15 full chunks loop without a mask; the partial 16th follows with one
    assert "for roffset_1 in tl.range(0, 960, _RDIM_SIZE_1):" in looped
    assert "roffset_1 = 960" in looped and looped.count("rmask_1 = ") == 1
    loop_body = looped.split("for roffset_1")[1].split("roffset_1 = 960")[0]
    assert "rmask" not in loop_body
    assert "_RDIM_SIZE_1=64" in looped
    # a chunk that divides the row: one loop, no mask
    dividing = run_and_check(
        bound, {"block_sizes": [2], "reduction_loops": [8]}, (x,), x.sum(-1), 1e-3
    )
    assert (
        "for roffset_1 in tl.range(0, 1000, _RDIM_SIZE_1):" in dividing and "rmask" not in dividing
    )
    persistent = run_and_check(
        bound, {"block_sizes": [2], "reduction_loops": [None]}, (x,), x.sum(-1), 1e-3
    )
    assert "rindex_1 = tl.arange(0, _RDIM_SIZE_1)" in persistent
    assert "_RDIM_SIZE_1=1024" in persistent
    assert "roffset" not in persistent


def test_looped_reduction_fuses_independent_sums():
    x, w, b = torch.randn(11, 37), torch.randn(37), torch.randn(37)
    source = bind(K.layer_norm, x, w, b).to_code({"block_sizes": [4], "reduction_loops": [16]})
    # mean, variance (needs the mean) and the normalized store: three passes over the row, each
    # over the two full chunks and then the partial one
    assert source.count("in tl.range(0, 32, _RDIM_SIZE_1)") == 3
    assert source.count("= 32  # the partial chunk") == 3


def test_masks_only_where_needed():
    x, y = torch.randn(32, 64), torch.randn(32, 64)
    exact = run_and_check(bind(K.add, x, y), {"block_sizes": [16, 32]}, (x, y), x + y)
    assert "mask" not in exact
    x, y = torch.randn(37, 64), torch.randn(37, 64)
    partial = run_and_check(bind(K.add, x, y), {"block_sizes": [16, 32]}, (x, y), x + y)
    assert "mask_0 = indices_0 < 37" in partial
    assert "mask_1" not in partial


def _gelu_gate(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for tile in hl.tile(out.size()):
        out[tile] = torch.tanh(a[tile] * 2.0) * b[tile]
    return out


def _load_store_load(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        x[tile] = x[tile] * 2.0
        out[tile] = x[tile] + y[tile]
    return out


def test_loads_are_issued_before_the_math():
    a, b = torch.randn(19, 45), torch.randn(19, 45)
    source = run_and_check(
        bind(_gelu_gate, a, b), {"block_sizes": [8, 16]}, (a, b), torch.tanh(a * 2.0) * b
    )
    lines = source.splitlines()
    loads = [i for i, line in enumerate(lines) if "tl.load(" in line]
    tanh = next(i for i, line in enumerate(lines) if line.startswith("    ") and "tanh(" in line)
    assert len(loads) == 2 and max(loads) < tanh, source


def _centered_scaled(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        centered = row - row.mean(-1, keepdim=True)
        out[tile, :] = centered * w[None, :]
    return out


def test_a_load_is_not_moved_above_a_reduction():
    x, w = torch.randn(13, 45), torch.randn(45)
    expected = (x - x.mean(-1, keepdim=True)) * w
    source = run_and_check(bind(_centered_scaled, x, w), {"block_sizes": [4]}, (x, w), expected)
    lines = source.splitlines()
    reduction = next(i for i, line in enumerate(lines) if "tl.sum(" in line)
    weight = next(i for i, line in enumerate(lines) if "tl.load(w +" in line)
    assert weight > reduction, source


def test_a_load_is_not_moved_above_a_store():
    x, y = torch.randn(37), torch.randn(37)
    expected = (x * 2.0 + y, x * 2.0)
    x_in = x.clone()
    source = run_and_check(
        bind(_load_store_load, x_in, y), {"block_sizes": [16]}, (x_in, y), expected[0]
    )
    torch.testing.assert_close(x_in, expected[1])
    lines = source.splitlines()
    store_x = next(i for i, line in enumerate(lines) if "tl.store(x +" in line)
    later_loads = [i for i, line in enumerate(lines) if "tl.load(" in line and i > store_x]
    # the second read of x (and the read of y, which could move) stay after the store to x
    assert len(later_loads) == 2, source


def _rows_of(x: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(n):  # a grid over a runtime scalar: cdiv(n, block) in the launcher
        out[tile] = x[tile] * 2.0
    return out


def test_launch_plans_match_the_launcher():
    x = torch.randn(37)
    bound = bind(_rows_of, x, 37)
    compiled = bound.compile_config({"block_sizes": [16]})
    torch.testing.assert_close(compiled(x, 37), x * 2.0)
    config = bound.normalize({"block_sizes": [16]})
    plan = bound.backend.generate(bound._discovery_ir, config, target_for(x.device)).launch_plan
    assert plan.static_grid is None and plan.rank == 1 and "cdiv" in plan.grid
    # the plan's grid, evaluated over the launcher's parameters, is the grid the launcher launches
    import triton

    env = {"triton": triton, **dict(zip(plan.params, (None,) * len(plan.params), strict=True))}
    env[next(p for p in plan.params if p.startswith("n"))] = 37
    assert eval(plan.grid, env) == (3,)
    static = bind(K.add, x, x)
    config = static.normalize({"block_sizes": [16]})
    static_plan = static.backend.generate(
        static._discovery_ir, config, target_for(x.device)
    ).launch_plan
    assert static_plan.static_grid == (3,) and static_plan.rank == 1


def test_eviction_policies_and_launch_options():
    x, y = torch.randn(37, 29), torch.randn(37, 29)
    config = {
        "block_sizes": [16, 16],
        "load_eviction_policies": ["first", "last"],
        "num_warps": 8,
        "num_stages": 3,
    }
    source = run_and_check(bind(K.add, x, y), config, (x, y), x + y)
    assert 'eviction_policy="evict_first"' in source
    assert 'eviction_policy="evict_last"' in source
    assert "num_warps=8, num_stages=3)" in source


def test_dot_precision_setting():
    a, b = matmul_args()
    assert 'input_precision="tf32"' in bind(K.matmul, a, b).to_code({"block_sizes": [16, 16, 16]})
    ieee = bind(K.matmul, a, b, dot_precision="ieee").to_code({"block_sizes": [16, 16, 16]})
    assert 'input_precision="ieee"' in ieee


def test_small_dot_falls_back_to_multiply_and_sum():
    a, b = torch.randn(8, 4), torch.randn(4, 8)
    bound = bind(K.matmul, a, b)
    source = run_and_check(bound, bound.config_spec.default_config(), (a, b), a @ b, 1e-4)
    assert "tl.dot" not in source and "tl.sum(" in source


@pytest.fixture
def tensor_descriptors_everywhere(request, device):
    """Let the interpreter take tensor descriptors (it implements them) to test their codegen."""
    if device.type == "cpu":
        request.getfixturevalue("descriptors_on_the_interpreter")  # conftest.py
    elif not target_for(device).supports_tensor_descriptor:
        pytest.skip("this GPU has no TMA")


@pytest.mark.usefixtures("tensor_descriptors_everywhere")
@pytest.mark.parametrize("name", ["matmul", "softmax", "add"])
def test_tensor_descriptor_indexing(name, device):
    # TMA needs 16-byte aligned rows
    if name == "matmul":
        args, fn = (torch.randn(37, 32), torch.randn(32, 24)), K.matmul
        expected = args[0] @ args[1]
        config = {"block_sizes": [16, 16, 16]}
    elif name == "softmax":
        args, fn = (torch.randn(13, 48),), K.softmax
        expected = torch.softmax(args[0], 1)
        config = {"block_sizes": [4]}
    else:
        args, fn = (torch.randn(37, 32), torch.randn(37, 32)), K.add
        expected = args[0] + args[1]
        config = {"block_sizes": [16, 8]}
    args = tuple(a.to(device) for a in args)
    expected = expected.to(device)
    bound = bind(fn, *args, dot_precision="ieee")
    assert "tensor_descriptor" in bound.config_spec["indexing"].fragments[0].choices
    config["indexing"] = "tensor_descriptor"
    source = run_and_check(bound, config, args, expected, 1e-3)
    assert "tl.make_tensor_descriptor(" in source
    assert "_desc.load([" in source


@pytest.mark.skipif(not has_block_ptr(), reason="this Triton has no block pointers")
def test_block_ptr_indexing(device):
    args = tuple(t.to(device) for t in matmul_args())
    bound = bind(K.matmul, *args)
    source = run_and_check(
        bound, {"block_sizes": [16, 16, 16], "indexing": "block_ptr"}, args, args[0] @ args[1], 2e-2
    )
    assert "tl.make_block_ptr(" in source


# -- the search space ----------------------------------------------------------------------------------


def test_cpu_search_space():
    a, b = matmul_args()
    spec = bind(K.matmul, a, b).config_spec
    expected = ("pointer", "block_ptr") if has_block_ptr() else ("pointer",)
    assert spec["indexing"].fragments[0].choices == expected
    assert "maxnreg" not in spec
    assert spec["flatten_loops"].fragments[0].choices == (False,)  # the loop body holds a dot


def test_cuda_search_space_on_hopper():
    a, b = matmul_args()
    bound = bind(K.matmul, a, b)
    ir = bound.ir
    hopper = TritonTarget("cuda", False, (9, 0), 132, has_block_ptr(), True, range_kwargs())
    spec = derive_config_spec(ir, {})
    adjust_spec(ir, spec, hopper, analyze(ir))
    assert "tensor_descriptor" in spec["indexing"].fragments[0].choices
    assert "maxnreg" in spec
    # a dot's accumulator cannot spill: the search leaves maxnreg unset, a config may set it
    maxnreg = spec["maxnreg"].fragment
    assert {maxnreg.random(random.Random(seed)) for seed in range(50)} == {None}
    assert spec.normalize({"block_sizes": [16, 16, 16], "maxnreg": 128})["maxnreg"] == 128
    older = TritonTarget("cuda", False, (8, 0), 108, has_block_ptr(), True, range_kwargs())
    spec = derive_config_spec(ir, {})
    adjust_spec(ir, spec, older, analyze(ir))
    assert "tensor_descriptor" not in spec["indexing"].fragments[0].choices


def test_cuda_search_space_of_a_kernel_without_a_dot_searches_maxnreg():
    x = torch.randn(37, 53)
    bound = bind(K.add, x, x)
    hopper = TritonTarget("cuda", False, (9, 0), 132, has_block_ptr(), True, range_kwargs())
    spec = derive_config_spec(bound.ir, {})
    adjust_spec(bound.ir, spec, hopper, analyze(bound.ir))
    maxnreg = spec["maxnreg"].fragment
    assert {maxnreg.random(random.Random(seed)) for seed in range(200)} == {None, 32, 64, 128, 256}


def carried_row(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        row = x[tile_m, :]
        for _step in hl.tile(3, block_size=1):
            row = row * 2.0
        out[tile_m, :] = row
    return out


def test_infeasible_looped_reduction_is_restricted():
    x = torch.randn(9, 70)
    bound = bind(carried_row, x)
    assert bound.config_spec["reduction_loops"].fragments[0].all_values() == [None]
    for seed in range(3):
        config = bound.config_spec.random_config(random.Random(seed))
        torch.testing.assert_close(bound.compile_config(config)(x), x * 8)
    long_sum = bind(K.long_sum, torch.randn(3, 1000)).config_spec
    assert 64 in long_sum["reduction_loops"].fragments[0].all_values()


def test_static_range_only_for_constant_bounds():
    data, offsets = torch.randn(20), torch.tensor([0, 5, 20])
    spec = bind(K.jagged_row_sum, data, offsets).config_spec
    assert spec["static_ranges"].fragments[0].all_values() == [False]


@pytest.mark.parametrize(
    "fn, args",
    [
        (K.matmul, matmul_args()),
        (K.softmax, (torch.randn(13, 45),)),
        (K.add, (torch.randn(37, 29), torch.randn(37, 29))),
        (K.long_sum, (torch.randn(3, 9000),)),
    ],
)
def test_seed_configs_are_valid(fn, args):
    bound = bind(fn, *args)
    seeds = bound.seed_configs()
    assert len(seeds) >= 2
    for seed in seeds:
        assert bound.normalize(seed) == seed
    bound.compile_config(seeds[0])(*args)
    if fn is K.matmul:
        assert all(seed["l2_groupings"] == [8] for seed in seeds)
    if fn is K.softmax:
        # one whole row per program with evict_last loads leads (measured fastest on an H200)
        first = seeds[0]
        assert first["block_sizes"][0] == 1 and first["reduction_loops"] == [None]
        assert first["load_eviction_policies"] == ["last"]
        assert any(seed["load_eviction_policies"] == [""] for seed in seeds)
    if fn is K.long_sum:
        # rows too wide for registers: looped seeds with the warps of a 2048-wide chunk
        looped = [seed for seed in seeds if seed["reduction_loops"] != [None]]
        assert sorted(s["num_warps"] for s in looped if s["reduction_loops"] == [2048]) == [4, 8]
        wide = [s for s in looped if s["reduction_loops"] == [4096]]
        assert [(s["num_warps"], s["num_stages"]) for s in wide] == [(4, 3)]


def test_pointwise_seeds_walk_memory_contiguously():
    # the first dim of a loop order varies fastest: the contiguous one, whichever it is
    x, y = torch.randn(37, 29), torch.randn(37, 29)
    row_major = bind(K.add, x, y).seed_configs()
    assert {tuple(map(tuple, s["loop_orders"])) for s in row_major} == {((1, 0),)}
    xt, yt = torch.randn(29, 37).t(), torch.randn(29, 37).t()
    bound = bind(K.add, xt, yt)
    column_major = bound.seed_configs()
    assert {tuple(map(tuple, s["loop_orders"])) for s in column_major} == {((0, 1),)}
    for seed in column_major:
        torch.testing.assert_close(bound.compile_config(seed)(xt, yt), xt + yt)


def test_pointwise_seeds_include_the_searches_multi_row_picks():
    # add and swiglu's picks on an H200: 16 elements a thread over several rows; a 1-D loop
    # takes the whole share along its one dim
    x, y = torch.randn(70, 3000), torch.randn(70, 3000)
    bound = bind(K.add, x, y)
    seeds = bound.seed_configs()
    shapes = [(s["block_sizes"], s["num_warps"]) for s in seeds]
    assert ([2, 2048], 8) in shapes and ([16, 1024], 32) in shapes
    for seed in seeds[-2:]:
        torch.testing.assert_close(bound.compile_config(seed)(x, y), x + y)
    flat = [
        (s["block_sizes"], s["num_warps"])
        for s in bind(K.add, torch.randn(9000), torch.randn(9000)).seed_configs()
    ]
    assert ([4096], 8) in flat and ([16384], 32) in flat


def attention_like(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Two chained dots per key tile: the key block is the N of q @ k.T and the K of p @ v."""
    m, d = q.size(0), hl.specialize(q.size(1))
    out = torch.empty_like(q)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, d], dtype=torch.float32)
        for tile_n in hl.tile(k.size(0)):
            scores = hl.dot(q[tile_m, :], k[tile_n, :].T)
            acc = hl.dot(torch.softmax(scores, dim=1).to(v.dtype), v[tile_n, :], acc=acc)
        out[tile_m, :] = acc.to(out.dtype)
    return out


def test_chained_dots_seed_128_by_128_tiles_on_8_warps():
    q, k, v = (torch.randn(300, 64) for _ in range(3))
    bound = bind(attention_like, q, k, v)
    seeds = bound.seed_configs()
    assert seeds[0]["block_sizes"] == [128, 128] and seeds[0]["num_warps"] == 8
    # no 128-row seed on 4 warps: two chained dots' tiles spill there
    assert all(s["num_warps"] == 8 for s in seeds if s["block_sizes"][0] >= 128)
    for seed in seeds:
        assert bound.normalize(seed) == seed
    torch.testing.assert_close(
        bound.compile_config(seeds[0])(q, k, v),
        attention_like_reference(q, k, v, 128),
        atol=1e-3,
        rtol=1e-3,
    )
    # a plain matmul's inner block is a K: it keeps the matmul seeds
    assert bind(K.matmul, *matmul_args()).seed_configs()[0]["block_sizes"] != [128, 128, 128]


def attention_like_reference(q, k, v, block_n):
    acc = torch.zeros(q.size(0), v.size(1))
    for start in range(0, k.size(0), block_n):
        scores = q @ k[start : start + block_n].T
        acc += torch.softmax(scores, dim=1) @ v[start : start + block_n]
    return acc


def test_batched_dot_defaults_to_batch_tiles_of_one():
    # every batch row's operands sit in shared memory: a default of 8 overflowed an H200
    a, b = torch.randn(6, 37, 29), torch.randn(6, 29, 23)
    bound = bind(K.bmm, a, b)
    default = bound.config_spec.default_config()
    assert default["block_sizes"][0] == 1
    assert bound.config_spec.block_sizes[0].max_size == 8  # still tunable
    torch.testing.assert_close(
        bound.compile_config(default)(a, b), torch.bmm(a, b), atol=1e-4, rtol=1e-4
    )


# -- backend contracts --------------------------------------------------------------------------------


def test_second_compile_does_no_codegen(monkeypatch):
    x, y = torch.randn(37, 29), torch.randn(37, 29)
    bound = bind(K.add, x, y)
    config = bound.normalize({"block_sizes": [16, 16]})
    backend = bound.backend
    calls = []
    original = backend.generate
    monkeypatch.setattr(backend, "generate", lambda *a, **k: calls.append(1) or original(*a, **k))
    first = bound.compile_config(config)
    first(x, y)
    first(x, y)
    bound.compile_config(config)(x, y)
    assert len(calls) == 1
    ir = bound._variants[config][0].ir
    assert backend.compile(ir, config) is backend.compile(ir, config)
    assert len(calls) == 1


def test_codegen_is_fast():
    for fn, args in [
        (K.matmul, matmul_args()),
        (K.layer_norm, (torch.randn(11, 37), torch.randn(37), torch.randn(37))),
    ]:
        bound = bind(fn, *args)
        ir = bound.ir
        times = []
        for seed in range(10):
            config = bound.config_spec.random_config(random.Random(seed))
            start = time.perf_counter()
            bound.backend.generate(ir, config)
            times.append(time.perf_counter() - start)
        assert statistics.median(times) < 0.05, times


mystery = ops.Op(
    "mystery",
    lambda inputs, attrs: [ops.TensorType(ops.shape_of(inputs[0]), inputs[0].dtype)],
    elementwise=True,
)


def _with_mystery_op():
    x, y = torch.randn(37, 29), torch.randn(37, 29)
    bound = bind(K.add, x, y)
    ir = bound.ir
    node = next(n for n in ir.walk() if n.op is ops.BINARY["add"])
    node.op = mystery
    return bound, ir, node


def test_op_without_lowering_fails_with_its_location():
    bound, ir, node = _with_mystery_op()
    with pytest.raises(exc.BackendUnsupported) as info:
        bound.backend.check(ir)
    message = str(info.value)
    assert "mystery" in message and "'triton'" in message
    assert info.value.loc is node.loc and node.loc is not None
    assert "kernels.py" in message
    with pytest.raises(exc.BackendUnsupported, match="mystery"):
        bound.backend.generate(ir, bound.config_spec.default_config())


class _MysteryLowerings:
    @hookimpl
    def helion_lowerings(self, backend):
        if backend != "triton":
            return {}
        return {
            mystery: lambda ctx, node: f"{ctx.expr(node.inputs[0])} - {ctx.expr(node.inputs[1])}"
        }


class _DuplicateLowerings:
    @hookimpl
    def helion_lowerings(self, backend):
        return {ops.BINARY["add"]: lambda ctx, node: "0"} if backend == "triton" else {}


def test_plugin_lowerings_are_merged():
    plugins.register_plugin(_MysteryLowerings(), "mystery-lowerings")
    try:
        bound, ir, _ = _with_mystery_op()
        bound.backend.check(ir)
        source = bound.backend.generate(ir, bound.config_spec.default_config()).source
        assert "= load - load_1" in source
    finally:
        plugins.unregister_plugin("mystery-lowerings")


def test_duplicate_lowering_is_an_error():
    plugins.register_plugin(_DuplicateLowerings(), "duplicate-lowerings")
    try:
        with pytest.raises(ValueError, match="add"):
            lowerings.lowering_table()
    finally:
        plugins.unregister_plugin("duplicate-lowerings")
    with pytest.raises(ValueError, match="twice"):
        lowerings.triton_lowering(ops.BINARY["add"])(lambda ctx, node: "0")


def test_print_output_code(capsys):
    x, y = torch.randn(5, 7), torch.randn(5, 7)
    kernel = helion.kernel(K.add, backend="triton", autotune_effort="none", print_output_code=True)
    torch.testing.assert_close(kernel(x, y), x + y)
    printed = capsys.readouterr().err
    assert "@triton.jit" in printed and "def _helion_add(" in printed
    assert bind(K.add, x, y).to_triton_code().startswith("# generated by helion-triton")


def test_triton_interpret_env_is_honoured(tmp_path: Path):
    script = tmp_path / "run.py"
    tests = Path(__file__).resolve().parent
    script.write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tests)!r})
        import torch, helion, kernels
        import triton.language as tl
        from triton.runtime.interpreter import InterpretedFunction
        assert isinstance(tl.sum, InterpretedFunction)
        x = torch.randn(13, 45)
        kernel = helion.kernel(kernels.softmax, backend="triton", autotune_effort="none")
        torch.testing.assert_close(kernel(x), torch.softmax(x, 1))
        print("interpreted ok")
    """)
    )
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "interpreted ok" in result.stdout


def test_target_of_cpu_is_the_interpreter():
    target = target_for("cpu")
    assert target.interpret and not target.is_cuda
    assert target.indexing_choices()[0] == "pointer"


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU: compiles and launches with maxnreg"
)
def test_cuda_tunables_compile():
    a, b = (t.cuda() for t in matmul_args())
    bound = bind(K.matmul, a, b)
    assert "maxnreg" in bound.config_spec
    config = {"block_sizes": [32, 32, 32], "maxnreg": 128, "num_warps": 4, "num_stages": 3}
    source = run_and_check(bound, config, (a, b), a @ b, 1e-2)
    assert "maxnreg=128" in source
