"""`:` slices of length 0 (`x[tile, :]` of a dimension of size 0, `x[tile, 2:2]`) and tile loops
over a dimension of size 0 on CuTe.

An access that addresses no element emits no memory instruction (a load is a fragment of zeros,
a store or atomic nothing), and the slice's axis has one register lane with no valid element.
Reductions over it take torch's values (core folds them at trace time; `amax` and the like raise
`EmptyReduction`, as torch raises), and a dot over it gives its accumulator. A loop whose static
bounds are empty is not emitted: an inner one passes its carried values through, a top-level one
launches nothing; a top-level loop with run-time bounds is launched under a test of its extent.
Before, core refused these slices at bind (`ZeroLengthSlice`).

This machine has no GPU. Every kernel of core's conformance cases (`helion.testing.empty_slices`)
goes through `cute.compile` under its default config and random ones; where the generated code's
threads do not talk to each other (no warp shuffle, barrier or shared memory), it also runs on
the host CPU one thread after another (`cute_host`) and is compared with PyTorch.
"""

from __future__ import annotations

import random

import pytest
import torch
from cute_host import runs_on_host

import helion
import helion.language as hl
from helion import exc
from helion.testing import bind
from helion.testing import empty_slices

# cases whose every config reduces a non-empty dim across lanes (warp shuffles): compiled only
THREADS_TALK = {
    "amax_over_the_non_empty_dim",
    "beside_a_real_slice",
    "sums_3d-37x0x5",
    "sums_3d-11x0x100",
    "sums_3d-37x7x0",
}


def _body(source: str) -> str:
    """The generated kernels and host function, without the module's imports."""
    return source.split("import cuda.bindings.driver as cuda", 1)[1]


def _source(fn, args: tuple, config: dict | None = None) -> str:
    bound = bind(fn, "cute", args)
    chosen = bound.config_spec.default_config() if config is None else bound.normalize(config)
    return bound.compile_config(chosen).source


def _assert_same(actual, expected, what: str) -> None:
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected), what
    for a, e in zip(actual, expected, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype, (what, a.shape, a.dtype, e.shape)
        torch.testing.assert_close(a, e, equal_nan=True, msg=lambda m: f"{what}: {m}")


# -- the conformance cases ---------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:var\\(\\)")
@pytest.mark.parametrize("case", empty_slices.EMPTY_SLICE_CASES, ids=lambda case: case.id)
def test_empty_slice_case_compiles_and_matches_torch_on_the_host(case, on_host) -> None:
    args, expected = case.inputs(torch.Generator().manual_seed(0), "cpu")
    bound = bind(case.fn, "cute", args)
    spec = bound.config_spec
    configs = [spec.default_config()] + [
        spec.random_config(random.Random(seed)) for seed in range(empty_slices.RANDOM_CONFIGS)
    ]
    ran = 0
    for config in configs:
        compiled = bound.compile_config(config)
        function = bound._variants[config][0].compiled._functions[True]
        assert type(function).__name__.endswith("JitCompiledFunction")
        if not runs_on_host(compiled.source):
            continue
        fresh = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        _assert_same(compiled(*fresh), expected, f"{case.id} under {config}")
        ran += 1
    if case.id not in THREADS_TALK:
        assert ran, f"{case.id}: no config ran on the host"


def test_amax_over_the_empty_dimension_raises_as_torch_does() -> None:
    with pytest.raises(IndexError):
        torch.randn(37, 0, 5).amax(1)
    empty_slices.check_empty_reduction_raises("cute")


# -- what the generated code looks like ----------------------------------------------------------


def test_an_empty_slice_is_neither_read_nor_written() -> None:
    body = _body(_source(empty_slices.double, (torch.randn(37, 0),)))
    assert "# load of x: no element, reads nothing" in body, body
    assert "# store of out: no element, writes nothing" in body, body
    assert "autovec_copy" not in body and "p_x +" not in body and "p_out +" not in body, body


def test_a_reduction_over_an_empty_slice_is_its_identity() -> None:
    for name, identity in (("sum", "cutlass.Float32(0.0)"), ("prod", "cutlass.Float32(1.0)")):
        reduce = empty_slices.REDUCTIONS[name]
        body = _body(_source(empty_slices.rows, (torch.randn(37, 0), reduce)))
        assert f"), {identity}, cutlass.Float32)" in body, body  # cute.full(shape, identity)
        assert "ReductionOp" not in body and "shuffle_sync" not in body, body
        assert "p_x +" not in body, body


def test_an_empty_slice_of_a_non_empty_dim_touches_only_the_real_slices() -> None:
    # x[tile, 2:2] and x[tile, 3:3] read nothing, out[tile, 2:2] writes nothing: one load of x
    # (x[tile, 2:3]) and one store to out (out[tile, 3]) remain
    body = _body(_source(empty_slices.shift_into, (torch.randn(37, 6), torch.randn(37, 6))))
    assert body.count("cute.make_tensor(p_x +") == 1, body
    assert body.count("cute.make_tensor(p_out +") == 1, body


def test_two_empty_dims_of_one_value_share_an_axis() -> None:
    # x[tile, :, :] of shape (5, 0, 0): both dims are the one empty slice's symbol
    body = _body(_source(empty_slices.sums_3d, (torch.randn(5, 0, 0),)))
    assert "_RDIM_SIZE_1: size 1" in body and "p_x +" not in body, body


def test_a_tile_loop_over_an_empty_dimension_is_not_emitted(on_host) -> None:
    x, w = torch.randn(37, 0), torch.randn(0, 45)
    body = _body(_source(empty_slices.tiled_matmul, (x, w)))
    assert "empty bounds, no iteration" in body, body
    assert "cutlass.range(" not in body and "sync_threads" not in body, body
    assert "p_x +" not in body and "p_w +" not in body, body
    kernel = helion.kernel(empty_slices.tiled_matmul, backend="cute", autotune_effort="none")
    torch.testing.assert_close(kernel(x, w), torch.zeros(37, 45))


def test_a_half_precision_matmul_with_k_0_leaves_the_warpgroup_path() -> None:
    def matmul_source(k: int) -> str:
        x = torch.randn(128, k, dtype=torch.bfloat16)
        w = torch.randn(k, 128, dtype=torch.bfloat16)
        return _body(_source(empty_slices.tiled_matmul, (x, w)))

    assert "warpgroup" in matmul_source(64)
    empty = matmul_source(0)
    assert "warpgroup" not in empty and "cpasync" not in empty, empty
    assert "cutlass.range(" not in empty and "empty bounds, no iteration" in empty, empty


def test_an_empty_grid_launches_nothing(on_host) -> None:
    x, w = torch.randn(0, 23), torch.randn(23, 45)
    body = _body(_source(empty_slices.tiled_matmul, (x, w)))
    assert "@cute.kernel" not in body and ".launch(" not in body, body
    assert "# tiled_matmul_kernel0: an empty grid, nothing to launch" in body, body
    kernel = helion.kernel(empty_slices.tiled_matmul, backend="cute", autotune_effort="none")
    assert kernel(x, w).shape == (0, 45)


@helion.kernel(backend="cute", autotune_effort="none")
def add_one_up_to(x: torch.Tensor, end: int) -> torch.Tensor:
    for tile in hl.tile(0, end):  # a top-level loop whose bound is a run-time scalar
        x[tile] = x[tile] + 1
    return x


def test_a_grid_known_at_run_time_is_launched_only_when_it_is_not_empty(on_host) -> None:
    x = torch.randn(40)
    body = _body(_source(add_one_up_to, (x, 0)))
    assert "    if (s_end) > (0):\n        add_one_up_to_kernel0(" in body, body
    torch.testing.assert_close(add_one_up_to(x.clone(), 0), x)
    torch.testing.assert_close(add_one_up_to(x.clone(), 40), x + 1)
    torch.testing.assert_close(add_one_up_to(x.clone(), 7), torch.cat([x[:7] + 1, x[7:]]))


@helion.kernel(backend="cute", autotune_effort="none")
def slice_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), w.size(1)], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([x.size(0), w.size(1)]):
        out[tile_m, tile_n] = torch.matmul(x[tile_m, :], w[:, tile_n]) + 1
    return out


def test_a_dot_over_an_empty_slice_is_its_accumulator(on_host) -> None:
    x, w = torch.randn(37, 0), torch.randn(0, 45)
    body = _body(_source(slice_matmul, (x, w)))
    assert "# dot over a dimension of size 0" in body, body
    assert "sync_threads" not in body and "SmemAllocator" not in body, body
    torch.testing.assert_close(slice_matmul(x, w), torch.ones(37, 45))


@helion.kernel(backend="cute", autotune_effort="none")
def add_into_nothing(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        hl.atomic_add(out, [tile, slice(2, 2)], x[tile, 2:2])
    return out


def test_an_atomic_on_an_empty_slice_updates_nothing(on_host) -> None:
    x, out = torch.randn(37, 6), torch.randn(37, 6)
    body = _body(_source(add_into_nothing, (x, out)))
    assert "# atomic of out: no element, updates nothing" in body, body
    assert "cute.arch.atomic" not in body, body
    torch.testing.assert_close(add_into_nothing(x, out.clone()), out)


def test_the_host_run_matches_torch_on_real_slices(on_host) -> None:
    # the host runner itself: a kernel whose every access is real
    kernel = helion.kernel(empty_slices.scale_3d, backend="cute", autotune_effort="none")
    x = torch.randn(3, 37, 6)
    torch.testing.assert_close(kernel(x), torch.relu(x) + 1)


# -- what CuTe still refuses ---------------------------------------------------------------------


@helion.kernel(backend="cute", autotune_effort="none")
def running_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = torch.cumsum(x[tile, :], dim=1)
    return out


def _add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


@helion.kernel(backend="cute", autotune_effort="none")
def custom_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = hl.reduce(_add, x[tile, :], dim=1)
    return out


@pytest.mark.parametrize(
    "kernel, op, line",
    [(running_sum, "cumsum", "torch.cumsum(x[tile, :]"), (custom_sum, "reduce", "hl.reduce(")],
)
def test_ops_without_a_cute_lowering_are_refused_on_an_empty_slice_too(kernel, op, line) -> None:
    # scans and hl.reduce have no CuTe lowering at all, empty slice or not
    with pytest.raises(exc.BackendUnsupported) as info:
        kernel.bind((torch.randn(37, 0),))
    message = str(info.value)
    assert f"{op} is not supported by the 'cute' backend" in message, message
    assert info.value.loc is not None and line in info.value.loc.line(), info.value.loc
