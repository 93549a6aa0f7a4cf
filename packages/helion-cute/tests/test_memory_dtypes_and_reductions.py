"""Regressions found by exploratory testing: L1 eviction hints on loads, torch.bool tensors in
global memory, and reductions of a rank-1 fragment to a 0-D value (inside ``hl.grid``).

Each kernel goes through ``cute.compile`` (no GPU needed); the generated source is checked for
the construct that makes it correct, since the numbers themselves need a GPU.
"""

from __future__ import annotations

import re

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

CPU = torch.device("cpu")


def _compile(kernel, args: tuple, config: dict | None = None) -> str:
    bound = kernel.bind(args)
    chosen = bound.config_spec.default_config() if config is None else bound.normalize(config)
    compiled = bound.compile_config(chosen)
    function = bound._variants[chosen][0].compiled._functions[True]
    assert function.has_gpu_module
    return compiled.source


def _body(source: str) -> str:
    """The generated kernels, without the module's imports."""
    return source.split("import cuda.bindings.driver as cuda", 1)[1]


# -- eviction hints --------------------------------------------------------------------------------


@helion.kernel(backend="cute")
def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2.0
    return out


@helion.kernel(backend="cute")
def gather_rows(index: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([index.size(0), table.size(1)], dtype=table.dtype, device=table.device)
    for tile_i, tile_d in hl.tile([index.size(0), table.size(1)]):
        out[tile_i, tile_d] = table[index[tile_i], tile_d]
    return out


@pytest.mark.parametrize("policy", ["first", "last"])
def test_eviction_hint_compiles_for_a_vector_load(policy: str) -> None:
    source = _compile(
        scale, (torch.randn(1000),), {"block_sizes": [128], "load_eviction_policies": [policy]}
    )
    # the copy atoms want cute.nvgpu's enum; the raw dialect enum has no _to_ir
    assert f"l1c_evict_priority=cute.nvgpu.CacheEvictionPriority.EVICT_{policy.upper()}" in source
    assert "=cute.CacheEvictionPriority" not in source


def test_eviction_hints_compile_for_gathers_and_narrow_dtypes() -> None:
    args = (torch.randint(0, 53, (37,)), torch.randn(53, 24, dtype=torch.float16))
    source = _compile(
        gather_rows, args, {"block_sizes": [4, 16], "load_eviction_policies": ["last", "first"]}
    )
    assert "EVICT_LAST" in source and "EVICT_FIRST" in source


# -- torch.bool in global memory ---------------------------------------------------------------


@helion.kernel(backend="cute")
def positive(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.bool, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] > 0
    return out


@helion.kernel(backend="cute")
def where_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.where(mask[tile], x[tile], 0.0)
    return out


@helion.kernel(backend="cute")
def both(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for tile in hl.tile(a.size()):
        out[tile] = a[tile] & b[tile]
    return out


@helion.kernel(backend="cute")
def grid_flags(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.bool, device=x.device)
    for i in hl.grid(x.size(0)):
        out[i] = mask[i] & (x[i] > 0)
    return out


@helion.kernel(backend="cute")
def row_any(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = (x[tile, :] > 0).any(-1)
    return out


@helion.kernel(backend="cute")
def set_flags(x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        hl.atomic_or(flags, [tile], x[tile] > 0)
    return flags


@helion.kernel(backend="cute")
def matmul_masked(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = y.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = torch.where(mask[tile_m, tile_n], acc, 0.0).to(x.dtype)
    return out


@helion.kernel(backend="cute")
def matmul_positive(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = y.size(1)
    out = torch.empty([m, n], dtype=torch.bool, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc > 0
    return out


def test_bool_store_writes_bytes_of_zero_or_one() -> None:
    body = _body(_compile(positive, (torch.randn(1001),)))
    # a Boolean fragment would write True as 0xFF; stores go through a Uint8 fragment
    assert ".to(cutlass.Uint8))" in body
    assert re.search(r"st\d+ = cute\.make_rmem_tensor\(\(\d+,\), cutlass\.Uint8\)", body)
    compact = _body(_compile(positive, (torch.randn(1001),), {"block_sizes": [64]}))
    assert ".to(cutlass.Uint8))" in compact


def test_bool_loads_of_input_tensors_compile() -> None:
    x, mask = torch.randn(1001), torch.rand(1001) > 0.5
    _compile(where_mask, (x, mask))
    _compile(where_mask, (x, mask), {"block_sizes": [32], "load_eviction_policies": ["first", ""]})
    a, b = torch.rand(13, 77) > 0.5, torch.rand(13, 77) > 0.5
    assert ".to(cutlass.Uint8))" in _body(_compile(both, (a, b)))


def test_bool_scalar_loads_and_stores_convert_bytes() -> None:
    body = _body(_compile(grid_flags, (torch.randn(1001), torch.rand(1001) > 0.5)))
    assert "cutlass.Boolean(cute.make_tensor(" in body
    assert "[0] = cutlass.Uint8(" in body


def test_bool_loads_and_stores_in_a_wgmma_epilogue() -> None:
    x = torch.randn(256, 192, dtype=torch.bfloat16)
    y = torch.randn(192, 320, dtype=torch.bfloat16)
    masked = _body(_compile(matmul_masked, (x, y, torch.rand(256, 320) > 0.5)))
    assert (
        "warpgroup.MmaF16BF16Op" in masked and "cutlass.Boolean(cute.make_tensor(p_mask" in masked
    )
    positive = _body(_compile(matmul_positive, (x, y)))
    assert "warpgroup.MmaF16BF16Op" in positive
    assert re.search(r"est\d+ = cute\.make_rmem_tensor\(acc_shape, cutlass\.Uint8\)", positive)
    assert ".to(cutlass.Uint8))" in positive


def test_bool_result_of_a_reduction_is_stored() -> None:
    x = torch.randn(13, 77)
    _compile(row_any, (x,))
    _compile(row_any, (x,), {"block_sizes": [2], "num_threads": 256})


def test_bool_pointers_are_bytes() -> None:
    from helion_cute.runtime import _pointee
    from helion_cute.runtime import dsl

    d = dsl()
    assert _pointee(d, torch.bool) is d.cutlass.Uint8
    assert _pointee(d, torch.float16) is d.cutlass.Float16


def test_atomic_on_bool_is_reported_unsupported() -> None:
    bound = set_flags.bind((torch.randn(100), torch.zeros(100, dtype=torch.bool)))
    with pytest.raises(exc.BackendUnsupported, match=r"atomic_or on torch.bool.*'cute'") as info:
        bound.compile_config(bound.config_spec.default_config())
    assert info.value.loc is not None and "atomic_or" in info.value.loc.format()


# -- reductions to 0-D ---------------------------------------------------------------------------


@helion.kernel(backend="cute")
def grid_row_sum(x: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for i in hl.grid(m):
        out[i] = x[i, :].sum(dim=0)
    return out


@helion.kernel(backend="cute")
def grid_row_stats(x: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m, 4], dtype=x.dtype, device=x.device)
    for i in hl.grid(m):
        row = x[i, :]
        out[i, 0] = row.amax(0)
        out[i, 1] = row.amin(0)
        out[i, 2] = row.prod(0)
        out[i, 3] = row.mean(0)
    return out


@helion.kernel(backend="cute")
def grid_row_int(x: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m, 3], dtype=x.dtype, device=x.device)
    for i in hl.grid(m):
        row = x[i, :]
        out[i, 0] = row.sum(0)
        out[i, 1] = row.amax(0)
        out[i, 2] = row.amin(0)
    return out


@helion.kernel(backend="cute")
def grid_row_flags(x: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m, 2], dtype=torch.bool, device=x.device)
    for i in hl.grid(m):
        out[i, 0] = (x[i, :] > 1).any(0)
        out[i, 1] = (x[i, :] > -3).all(0)
    return out


@helion.kernel(backend="cute")
def grid_tiled_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for i in hl.grid(m):
        acc = hl.zeros([], dtype=torch.float32)
        for tile_n in hl.tile(n):
            acc = acc + x[i, tile_n].sum(0)
        out[i] = acc
    return out


@helion.kernel(backend="cute")
def grid_tiled_max(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for i in hl.grid(m):
        acc = hl.full([], float("-inf"), dtype=torch.float32)
        for tile_n in hl.tile(n):
            acc = torch.maximum(acc, x[i, tile_n].amax(0))
        out[i] = acc
    return out


@helion.kernel(backend="cute")
def grid_row_argmax(x: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m], dtype=torch.int64, device=x.device)
    for i in hl.grid(m):
        out[i] = x[i, :].argmax(0)
    return out


@pytest.mark.parametrize("config", [None, {"num_threads": 32}, {"num_threads": 256}])
def test_grid_row_sum_reduces_to_a_scalar(config: dict | None) -> None:
    body = _body(_compile(grid_row_sum, (torch.randn(9, 70),), config))
    # a rank-1 fragment reduces with the depth-0 profile (a scalar), not to a 0-D vector
    assert ".reduce(cute.ReductionOp.ADD, 0.0, 1))" in body
    assert ".reduce(cute.ReductionOp.ADD, 0.0, (1,))" not in body


def test_grid_row_reductions_of_every_kind() -> None:
    body = _body(_compile(grid_row_stats, (torch.randn(9, 70),)))
    for op in ("MAX", "MIN", "MUL", "ADD"):
        assert f".reduce(cute.ReductionOp.{op}, " in body
    _compile(grid_row_stats, (torch.randn(5, 333, dtype=torch.float16),), {"num_threads": 128})
    _compile(grid_row_int, (torch.randint(-50, 50, (9, 70), dtype=torch.int32),))
    _compile(grid_row_flags, (torch.randn(9, 70),))


@pytest.mark.parametrize(
    "kernel,config",
    [
        (grid_tiled_sum, {"block_sizes": [16]}),
        (grid_tiled_sum, {"block_sizes": [128], "num_threads": 64}),
        (grid_tiled_max, {"block_sizes": [32], "num_threads": 32}),
    ],
)
def test_grid_accumulates_reductions_of_inner_tiles(kernel, config: dict) -> None:
    _compile(kernel, (torch.randn(9, 70),), config)


def test_grid_argmax_is_reported_unsupported() -> None:
    with pytest.raises(exc.BackendUnsupported, match=r"reduce_argmax.*'cute'") as info:
        grid_row_argmax.bind((torch.randn(9, 70),))
    assert info.value.loc is not None and "argmax" in info.value.loc.format()
