"""The generated source: readable, deterministic, and shaped by the config as documented."""

from __future__ import annotations

import torch
from pallas_kernels import CASES_BY_NAME
from pallas_testing import assert_same
from pallas_testing import clone
from pallas_testing import pallas_kernel

import helion
from helion_pallas.codegen import generate_source
from helion_pallas.tunables import PallasOptions


def _bound(name: str):
    case = CASES_BY_NAME[name]
    return pallas_kernel(case.fn).bind(case.args()), case


def _source(name: str, target: str = "interpret", **overrides: object) -> str:
    bound, _ = _bound(name)
    config = dict(bound.config_spec.default_config().config)
    config.update(overrides)
    return generate_source(bound.ir, PallasOptions.parse(helion.Config(**config), target))[0]


def test_plain_tiles_become_block_specs() -> None:
    source = _source("add")
    assert "pl.pallas_call(" in source
    assert "pl.BlockSpec((64, 64), lambda i0, i1: (i1, i0)),  # x" in source
    assert "plgpu.load(x_ref, mask=" in source  # 100 x 37 does not divide 64 x 64: masked edges
    assert "interpret=True," in source
    # out is overwritten whole: no initial value passed, none aliased (test_initial_values.py)
    assert "(initial value)" not in source and "input_output_aliases" not in source


def test_inner_loops_use_fori_loop_and_whole_refs() -> None:
    source = _source("matmul")
    assert "full_2, = jax.lax.fori_loop(0, count_2, loop_body, (full,))" in source
    assert "pl.BlockSpec((70, 50), lambda i0, i1: (0, 0)),  # x" in source
    assert "x_ref.at[pl.ds(begin_0, 64), pl.ds(begin_2, 64)]" in source
    assert "preferred_element_type=jnp.float32" in source


def test_static_ranges_unroll_inner_loops() -> None:
    source = _source("long_sum", block_sizes=[128, 8], static_ranges=[True])
    assert "for step in range(33):  # unrolled (static_ranges)" in source
    assert "fori_loop" not in source


def test_unroll_factor_reaches_fori_loop() -> None:
    assert "unroll=2)" in _source("long_sum", range_unroll_factors=[2])


def test_loop_order_and_flattening_shape_the_grid() -> None:
    assert "grid=(1, 2)," in _source("add")
    assert "grid=(2, 1)," in _source("add", loop_orders=[[1, 0]])
    flat = _source("add", flatten_loops=[True])
    assert "grid=(2,)," in flat
    assert "pl.BlockSpec((64, 64), lambda i0: (i0 % 2, i0 // 2)),  # x" in flat


def test_full_slices_are_padded_to_powers_of_two_and_masked() -> None:
    source = _source("softmax")
    assert "pl.BlockSpec((16, 256), lambda i0: (i0, 0)),  # x" in source
    assert "valid_187 = jnp.arange(256, dtype=jnp.int32) < 187" in source
    assert "jnp.where(valid_187[None, :], " in source


def test_gathers_use_index_arrays() -> None:
    source = _source("embedding")
    assert "weight_ref.at[jnp.broadcast_to(" in source
    assert "plgpu.load(idx_flat_ref" in source


def test_gpu_target_emits_triton_compiler_params() -> None:
    bound, _ = _bound("matmul")
    config = helion.Config(
        **{**bound.config_spec.default_config().config, "num_warps": 8, "num_stages": 3}
    )
    source = generate_source(bound.ir, PallasOptions.parse(config, "gpu"))[0]
    assert "compiler_params=plgpu.CompilerParams(num_warps=8, num_stages=3)," in source
    assert "interpret=True" not in source
    compile(source, "<gpu>", "exec")


def test_tpu_target_emits_mosaic_compiler_params() -> None:
    source = _source("add", target="tpu")
    assert "from jax.experimental.pallas import tpu as pltpu" in source
    assert (
        "compiler_params=pltpu.CompilerParams(dimension_semantics=('parallel', 'parallel')),"
        in source
    )
    assert "plgpu" not in source
    compile(source, "<tpu>", "exec")


def test_generation_is_deterministic() -> None:
    assert _source("attention") == _source("attention")


def test_to_code_and_print_output_code(capfd) -> None:
    case = CASES_BY_NAME["sum"]
    kernel = helion.kernel(
        case.fn, backend="pallas", autotune_effort="none", print_output_code=True
    )
    args = case.args()
    code = kernel.bind(args).to_code()
    assert code.startswith("# helion.Config(block_sizes=[")
    assert "def row_sum(" in code
    assert "def row_sum(" in capfd.readouterr().err
    assert_same(kernel(*clone(args)), case.reference(*args))


def test_source_lines_point_at_the_kernel() -> None:
    assert "# pallas_kernels.py:" in _source("add")


def test_interpret_setting_forces_interpret_mode(monkeypatch) -> None:
    from helion_pallas.tunables import device_target

    assert device_target(torch.device("cpu"), False) == "interpret"
    assert device_target(torch.device("cuda"), False) == "gpu"
    assert device_target(torch.device("cuda"), True) == "interpret"
    monkeypatch.setenv("HELION_PALLAS_INTERPRET", "1")
    from helion_pallas.tunables import interpret_setting

    assert interpret_setting() is True
