"""Every kernel of the core suite compiles through ``cute.compile`` on this machine (no GPU
needed), under its default config and under other configs that change the generated code.

Nothing here is skipped: a missing DSL or a compile error fails the test.
"""

from __future__ import annotations

import pytest
import torch
from cute_kernels import CORE_CASES
from cute_kernels import EXTRA_CASES
from cute_kernels import Case
from cute_kernels import histogram
from cute_kernels import matmul
from cute_kernels import row_sum
from cute_kernels import softmax

import helion
import helion.language as hl
from helion import exc

CPU = torch.device("cpu")


def _configs(case: Case) -> list[tuple[str, dict | None]]:
    return [("default", None)] + [(f"config{i}", c) for i, c in enumerate(case.configs)]


def _compile(case: Case, config: dict | None):
    args = case.make_args(CPU)
    bound = case.kernel.bind(args)
    chosen = bound.config_spec.default_config() if config is None else bound.normalize(config)
    compiled = bound.compile_config(chosen)
    return bound, chosen, compiled, args


def _dsl_functions(bound, config):
    kernel = bound._variants[config][0].compiled
    return kernel, kernel._functions[True]


@pytest.mark.parametrize(
    "case,config",
    [
        pytest.param(c, cfg, id=f"{c.name}-{label}")
        for c in CORE_CASES + EXTRA_CASES
        for label, cfg in _configs(c)
    ],
)
def test_compiles_through_cute_compile(case: Case, config: dict | None) -> None:
    bound, chosen, compiled, _ = _compile(case, config)
    kernel, function = _dsl_functions(bound, chosen)
    # a real cute.compile result: an executable with an embedded GPU module
    assert type(function).__name__.endswith("JitCompiledFunction")
    assert function.has_gpu_module
    source = compiled.source
    assert "@cute.kernel" in source and "@cute.jit" in source
    assert kernel.source == source


def test_core_suite_has_the_eight_kernels() -> None:
    names = {c.name for c in CORE_CASES}
    assert names == {
        "add",
        "exp",
        "softmax",
        "layer_norm",
        "rms_norm",
        "sum",
        "embedding",
        "matmul",
    }


def _source(case_name: str, config: dict | None = None) -> str:
    case = next(c for c in CORE_CASES + EXTRA_CASES if c.name == case_name)
    return _compile(case, config)[2].source


def test_bf16_matmul_uses_wgmma_with_a_tma_pipeline() -> None:
    source = _source("matmul")
    assert "warpgroup.MmaF16BF16Op(cutlass.BFloat16, cutlass.Float32" in source
    assert "cpasync.make_tiled_tma_atom" in source
    assert "pipeline.PipelineTmaAsync.create" in source
    assert "cute.arch.warpgroup_reg_alloc" in source


def test_matmul_that_wgmma_cannot_take_falls_back_to_fma() -> None:
    # fp32 operands, and fp16 rows of 91 elements (182 bytes: not a valid TMA stride)
    for name in ("matmul_fp32", "matmul_fp16_odd"):
        source = _source(name)
        assert "warpgroup" not in source.split("import cuda.bindings.driver as cuda", 1)[1]
        assert (
            "cute.arch.sync_threads()" in source and "cutlass.range(" in source and "_kk" in source
        )


def test_matmul_epilogue_runs_on_the_accumulator() -> None:
    source = _source("matmul_bias_relu")
    assert "MmaF16BF16Op" in source and "tCcC[_i]" in source


def test_cluster_shape_multicasts_tma() -> None:
    x = torch.randn(512, 256, dtype=torch.bfloat16)
    y = torch.randn(256, 512, dtype=torch.bfloat16)
    bound = matmul.bind((x, y))
    config = bound.normalize({"block_sizes": [128, 128, 64], "cute_cluster_shape": "2x1"})
    source = bound.compile_config(config).source
    assert "cluster=(2, 1, 1)" in source
    assert "mcast_mask=mcast_b" in source


@helion.kernel(backend="cute")
def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * 2.0
    return out


@helion.kernel(backend="cute")
def running_max(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = torch.cumsum(x[tile, :], dim=1)
    return out


def test_aligned_elementwise_moves_128_bits() -> None:
    bound = scale.bind((torch.randn(128, 256),))
    source = bound.compile_config(bound.normalize({"block_sizes": [8, 256]})).source
    assert "cute.make_layout(4)" in source and "divby=4" in source
    narrow = bound.compile_config(
        bound.normalize({"block_sizes": [8, 256], "cute_vector_widths": [2, 2]})
    ).source
    assert "cute.make_layout(2)" in narrow and "cute.make_layout(4)" not in narrow


def test_reductions_use_warp_shuffles_and_shared_memory() -> None:
    x = torch.randn(16, 4096)
    bound = softmax.bind((x,))
    in_warp = bound.compile_config(bound.normalize({"block_sizes": [4], "num_threads": 128})).source
    assert "shuffle_sync_bfly" in in_warp and "sync_threads" not in in_warp
    across = bound.compile_config(bound.normalize({"block_sizes": [1], "num_threads": 512})).source
    assert (
        "shuffle_sync_bfly" in across
        and "allocate_tensor" in across
        and "cute.arch.sync_threads()" in across
    )


def test_launching_without_a_gpu_says_a_cuda_device_is_needed() -> None:
    x = torch.randn(8, 40)
    compiled = row_sum.bind((x,)).compile_config()
    with pytest.raises(exc.CuteBackendUnavailable, match="needs a CUDA device"):
        compiled(x)


def test_generated_and_compiled_kernels_are_cached_on_disk(cache_dir) -> None:
    x = torch.randn(8, 40)
    compiled = row_sum.bind((x,)).compile_config()
    generated = list((cache_dir / "cute").glob("k_*.py"))
    assert any(p.read_text() == compiled.source for p in generated)
    # the compiled module (lowered host code with the cubin) is stored beside it
    from cutlass._mlir import ir
    from cutlass.base_dsl.cache_helpers import read_bytecode_and_check_crc32

    artifacts = list((cache_dir / "cute" / "bin").glob("*.mlirbc"))
    assert artifacts and all(p.with_suffix(".meta").exists() for p in artifacts)
    with ir.Context(), open(artifacts[0], "rb") as handle:
        module = read_bytecode_and_check_crc32(handle)
        assert "gpu.binary" in str(module) or "kernels_binary" in str(module)


def test_check_reports_unsupported_ops_before_compiling() -> None:
    with pytest.raises(exc.BackendUnsupported, match=r"cumsum.*cute") as info:
        running_max.bind((torch.randn(4, 8),))
    assert info.value.loc is not None and "cumsum" in info.value.loc.format()


def test_tunables_honoured_and_removed() -> None:
    spec = row_sum.bind((torch.randn(8, 40),)).config_spec
    for removed in (
        "num_warps",
        "pid_type",
        "indexing",
        "reduction_loops",
        "flatten_loops",
        "num_stages",
    ):
        assert removed not in spec
    assert "num_threads" in spec and "cute_vector_widths" in spec
    matmul_spec = matmul.bind(
        (torch.randn(64, 64, dtype=torch.bfloat16), torch.randn(64, 64, dtype=torch.bfloat16))
    ).config_spec
    assert "num_stages" in matmul_spec and "cute_cluster_shape" in matmul_spec


def test_seed_configs_are_valid_configs() -> None:
    bound = matmul.bind(
        (torch.randn(512, 512, dtype=torch.bfloat16), torch.randn(512, 512, dtype=torch.bfloat16))
    )
    seeds = bound.seed_configs()
    assert len(seeds) >= 3
    assert any(s.config["block_sizes"] == [128, 256, 64] for s in seeds)
    assert histogram.bind((torch.randint(0, 4, (100,)), 4)).seed_configs()
