"""Conformance cases for `:` slices of length 0 (`x[tile, :]` of a dimension of size 0,
`x[tile, 2:2]`): a load of one reads no element, a store writes none, and a reduction over one
takes torch's value (or raises `EmptyReduction` where torch raises). Also tile loops over a
dimension of size 0 (a matmul with K == 0, an outer loop with M == 0, one of two inner loops,
bounds known only at run time): such a loop runs no iteration. Every case runs under the
default config and random ones, on seeded inputs of sizes that are not powers of two, against
PyTorch.

    @pytest.mark.parametrize("case", empty_slices.EMPTY_SLICE_CASES, ids=lambda c: c.id)
    def test_empty_slice(case):
        empty_slices.check_empty_slice_case(case, "mybackend")
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Callable

import torch

import helion
import helion.language as hl
from helion.testing import bind
from helion.testing import configs_to_try
from helion.testing import require_backend

RANDOM_CONFIGS = 4


# -- kernels ------------------------------------------------------------------------------------


def rows(x: torch.Tensor, reduce: Callable) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = reduce(x[tile, :]).to(torch.float32)
    return out


def row_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile, :].sum(-1)
    return out


def any_all(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    any_out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    all_out = torch.empty([x.size(0)], dtype=torch.bool, device=x.device)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        any_out[tile] = row.any(-1)
        all_out[tile] = row.all(-1)
    return any_out, all_out


def amax_last(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(1)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :, :].amax(-1)
    return out


def amax_middle(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(2)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :, :].amax(1)
    return out


def double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :] * 2
    return out


def double_and_sum(
    x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    doubled = torch.empty_like(x)
    sums = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    y_plus = torch.empty_like(y)
    for tile in hl.tile(x.size(0)):
        doubled[tile, :] = x[tile, :] * 2
        sums[tile] = x[tile, :].sum(-1) + y[tile, :].sum(-1)
        y_plus[tile, :] = y[tile, :] + x[tile, :].mean(-1)[:, None]
    return doubled, sums, y_plus


def shift_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        out[tile, 2:2] = x[tile, 2:2] + 1  # writes nothing
        out[tile, 3] = x[tile, 3:3].sum(-1) + x[tile, 2:3].sum(-1)
    return out


def sums_3d(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    last = torch.empty([x.size(0), x.size(1)], dtype=x.dtype, device=x.device)
    middle = torch.empty([x.size(0), x.size(2)], dtype=x.dtype, device=x.device)
    both = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        block = x[tile, :, :]
        last[tile, :] = block.sum(-1)
        middle[tile, :] = block.sum(1) * 3
        both[tile] = block.sum(-1).sum(-1)
    return last, middle, both


def scale_3d(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_b, tile_m in hl.tile([x.size(0), x.size(1)]):
        out[tile_b, tile_m, :] = torch.relu(x[tile_b, tile_m, :]) + 1
    return out


def tiled_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


def tiled_row_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_k in hl.tile(x.size(1)):
            acc += x[tile_m, tile_k].sum(-1)
        out[tile_m] = acc
    return out


def two_inner_loops(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(y)
    for tile_m in hl.tile(x.size(0)):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_k in hl.tile(x.size(1)):
            acc += x[tile_m, tile_k].sum(-1)
        for tile_n in hl.tile(y.size(1)):
            out[tile_m, tile_n] = y[tile_m, tile_n] + acc[:, None]
    return out


def row_sum_to(x: torch.Tensor, end: int) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_k in hl.tile(0, end):  # the bound is a run-time scalar
            acc += x[tile_m, tile_k].sum(-1)
        out[tile_m] = acc
    return out


# -- cases --------------------------------------------------------------------------------------

REDUCTIONS: dict[str, Callable] = {
    "sum": lambda row: row.sum(-1),
    "prod": lambda row: row.prod(-1),
    "mean": lambda row: row.mean(-1),
    "var": lambda row: row.var(-1),
    "logsumexp": lambda row: torch.logsumexp(row, -1),
    "softmax_then_sum": lambda row: torch.softmax(row, -1).sum(-1),
}


@dataclasses.dataclass(frozen=True)
class EmptySliceCase:
    """``inputs(generator, device)`` gives (arguments, expected result or tuple of results)."""

    id: str
    fn: Callable[..., Any]
    inputs: Callable[[torch.Generator, Any], tuple[tuple, Any]]


def _randn(g: torch.Generator, device: Any, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g).to(device)


def _reduction_case(name: str, n_rows: int) -> EmptySliceCase:
    reduce = REDUCTIONS[name]

    def inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
        x = _randn(g, device, n_rows, 0)
        return (x, reduce), reduce(x).float()

    return EmptySliceCase(f"{name}-{n_rows}x0", rows, inputs)


def _row_sum_case(dtype: torch.dtype) -> EmptySliceCase:
    def inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
        x = torch.randint(-5, 5, (37, 0), generator=g).to(device=device, dtype=dtype)
        return (x,), x.sum(-1).to(dtype)

    return EmptySliceCase(f"row_sum-{str(dtype).removeprefix('torch.')}", row_sum, inputs)


def _any_all_inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
    x = (torch.rand(37, 0, generator=g) < 0.5).to(device)
    return (x,), (x.any(-1), x.all(-1))


def _amax_last_inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
    x = _randn(g, device, 37, 0, 5)  # over the non-empty dimension: an empty result
    return (x,), x.amax(-1)


def _double_inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
    x = _randn(g, device, 37, 0)
    return (x,), x * 2


def _double_and_sum_inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
    x, y = _randn(g, device, 37, 0), _randn(g, device, 37, 19)
    return (x, y), (x * 2, x.sum(-1) + y.sum(-1), y + x.mean(-1)[:, None])


def _shift_into_inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
    # the lane of x[tile, 2:2] is x[:, 2]: stored without its mask it would change out[:, 2]
    x, out = _randn(g, device, 37, 6), _randn(g, device, 37, 6)
    expected = out.clone()
    expected[:, 3] = x[:, 2]
    return (x, out), expected


def _sums_3d_case(shape: tuple[int, int, int]) -> EmptySliceCase:
    def inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
        x = _randn(g, device, *shape)
        return (x,), (x.sum(-1), x.sum(1) * 3, x.sum(-1).sum(-1))

    return EmptySliceCase(f"sums_3d-{'x'.join(map(str, shape))}", sums_3d, inputs)


def _scale_3d_inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
    x = _randn(g, device, 3, 37, 0)
    return (x,), torch.relu(x) + 1


def _matmul_case(m: int, k: int, n: int) -> EmptySliceCase:
    def inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
        x, w = _randn(g, device, m, k), _randn(g, device, k, n)
        return (x, w), x @ w

    return EmptySliceCase(f"tile_loop_matmul-{m}x{k}x{n}", tiled_matmul, inputs)


def _tiled_row_sum_inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
    x = _randn(g, device, 37, 0)
    return (x,), x.sum(-1)


def _two_inner_loops_case(k: int, n: int) -> EmptySliceCase:
    def inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
        x, y = _randn(g, device, 37, k), _randn(g, device, 37, n)
        return (x, y), y + x.sum(-1)[:, None]

    return EmptySliceCase(f"two_inner_tile_loops-k{k}-n{n}", two_inner_loops, inputs)


def _row_sum_to_inputs(g: torch.Generator, device: Any) -> tuple[tuple, Any]:
    x = _randn(g, device, 37, 0)
    return (x, 0), x.sum(-1)


EMPTY_LOOP_CASES: list[EmptySliceCase] = [
    *(_matmul_case(m, k, n) for m, k, n in ((37, 0, 45), (0, 23, 45), (0, 0, 45))),
    EmptySliceCase("tile_loop_row_sum-37x0", tiled_row_sum, _tiled_row_sum_inputs),
    *(_two_inner_loops_case(k, n) for k, n in ((0, 19), (5, 0))),
    EmptySliceCase("tile_loop_with_run_time_bounds", row_sum_to, _row_sum_to_inputs),
]

EMPTY_SLICE_CASES: list[EmptySliceCase] = [
    *(_reduction_case(name, n) for name in sorted(REDUCTIONS) for n in (37, 5)),
    *(_row_sum_case(dtype) for dtype in (torch.float32, torch.float16, torch.int32)),
    EmptySliceCase("any_all", any_all, _any_all_inputs),
    EmptySliceCase("amax_over_the_non_empty_dim", amax_last, _amax_last_inputs),
    EmptySliceCase("double", double, _double_inputs),
    EmptySliceCase("beside_a_real_slice", double_and_sum, _double_and_sum_inputs),
    EmptySliceCase("of_a_non_empty_dim_writes_nothing", shift_into, _shift_into_inputs),
    *(_sums_3d_case(shape) for shape in ((37, 0, 5), (11, 0, 100), (37, 7, 0), (5, 0, 0))),
    EmptySliceCase("scale_3d", scale_3d, _scale_3d_inputs),
    *EMPTY_LOOP_CASES,
]


# -- checks -------------------------------------------------------------------------------------


def check_empty_slice_case(case: EmptySliceCase, backend: str, *, device: Any = "cpu") -> None:
    """Run ``case`` on ``backend`` under the default config and random ones against PyTorch.
    Raises AssertionError naming the case, backend and config; skips where the backend is
    missing."""
    require_backend(backend)
    args, expected = case.inputs(torch.Generator().manual_seed(0), device)
    bound = bind(case.fn, backend, args)
    assert bound.ir.empty_reduction_blocks() or any(
        0 in tensor.shape for tensor in bound.ir.tensor_args
    ), f"{case.id}: the kernel holds no slice of length 0 and no tensor of size 0"
    expected = expected if isinstance(expected, tuple) else (expected,)
    for config in configs_to_try(bound, range(RANDOM_CONFIGS)):
        fresh = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        actual = bound.compile_config(config)(*fresh)
        actual = actual if isinstance(actual, tuple) else (actual,)
        what = f"{case.id} on {backend!r} under {config}"
        assert len(actual) == len(expected), f"{what}: {len(actual)} results"
        for a, e in zip(actual, expected, strict=True):
            assert a.shape == e.shape and a.dtype == e.dtype, (what, a.shape, a.dtype, e.shape)
            torch.testing.assert_close(a, e, equal_nan=True, msg=lambda m, w=what: f"{w}: {m}")


def check_empty_reduction_raises(backend: str, *, device: Any = "cpu") -> None:
    """`amax` over a dimension of size 0 raises `EmptyReduction` naming the kernel's line, as
    torch raises."""
    from helion import exc

    require_backend(backend)
    x = torch.randn(37, 0, 5, device=device)
    kernel = helion.kernel(amax_middle, backend=backend, autotune_effort="none")
    try:
        kernel(x)
    except exc.EmptyReduction as error:
        assert error.loc is not None and ".amax(1)" in error.loc.line(), error.loc
        return
    raise AssertionError(f"amax over an empty dimension ran on {backend!r}; torch raises")
