"""Shape ops on the Triton backend (the interpreter on CPU): torch.sort / argsort / topk / gather /
stack / cat and hl.split / hl.join, with the default and random configs, against PyTorch and the
ref backend, on non-power-of-two shapes whose padded lanes must not leak into the results."""

from __future__ import annotations

import dataclasses
import random
from typing import Any
from typing import Callable

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

RANDOM_CONFIGS = 4


def sort_rows(x, descending: hl.constexpr):
    m, n = x.shape
    values = torch.empty_like(x)
    indices = torch.empty([m, n], dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        v, i = torch.sort(x[tile_m, :], dim=-1, descending=descending)
        values[tile_m, :] = v
        indices[tile_m, :] = i
    return values, indices


def sort_values(x):
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = x[tile_m, :].sort(dim=1, descending=True).values
    return out


def topk_rows(x, k: hl.constexpr, largest: hl.constexpr):
    m, _ = x.shape
    values = torch.empty([m, k], dtype=x.dtype, device=x.device)
    indices = torch.empty([m, k], dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        v, i = torch.topk(x[tile_m, :], k, dim=-1, largest=largest)
        values[tile_m, :] = v
        indices[tile_m, :] = i
    return values, indices


def topk_then_sum(x, k: hl.constexpr):
    # the k results are consumed by a reduction: the padded lanes of the k dim must stay out
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m] = torch.topk(x[tile_m, :], k, dim=1).values.sum(1)
    return out


def argsort_columns(x):
    m, n = x.shape
    out = torch.empty([m, n], dtype=torch.int64, device=x.device)
    for tile_n in hl.tile(n):
        out[:, tile_n] = torch.argsort(x[:, tile_n], dim=0, descending=True)
    return out


def sort_middle_dim(x):
    out = torch.empty_like(x)
    for tile_b in hl.tile(x.size(0)):
        out[tile_b, :, :] = torch.sort(x[tile_b, :, :], dim=1, descending=True).values
    return out


def sort_tiled_dim(x):
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = torch.sort(x[tile_m, tile_n], dim=1).values + 1
    return out


def gather_rows(x, index):
    out = torch.empty(index.shape, dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = torch.gather(x[tile_m, :], 1, index[tile_m, :])
    return out


def stack_tiles(a, b, c):
    m, n = a.shape
    three = torch.empty([m, 3, n], dtype=torch.float32, device=a.device)
    pair = torch.empty([2, m, n], dtype=a.dtype, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        three[tile_m, :, tile_n] = torch.stack(
            [a[tile_m, tile_n], b[tile_m, tile_n] * 2, c[tile_m, tile_n]], dim=1
        )
        pair[:, tile_m, tile_n] = torch.stack([a[tile_m, tile_n], b[tile_m, tile_n]])
    return three, pair


def cat_rows(x, y):
    m, n1 = x.shape
    out = torch.empty([m, n1 + y.size(1)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        out[tile_m, :] = torch.cat([x[tile_m, :], y[tile_m, :] + 1], dim=1)
    return out


def cat_three(x, y, z):
    m = x.size(1)
    out = torch.empty([x.size(0) + y.size(0) + z.size(0), m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        out[:, tile_m] = torch.cat((x[:, tile_m], y[:, tile_m], z[:, tile_m]))
    return out


def complex_mul(a, b):
    m, n, _ = a.shape
    out = torch.empty_like(a)
    for tile_m, tile_n in hl.tile([m, n]):
        ar, ai = hl.split(a[tile_m, tile_n, :])
        br, bi = hl.split(b[tile_m, tile_n, :])
        out[tile_m, tile_n, :] = hl.join(ar * br - ai * bi, ar * bi + ai * br)
    return out


def join_broadcast(x, y):
    m, n = x.shape
    out = torch.empty([m, n, 2], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n, :] = hl.join(x[tile_m, tile_n], y[tile_n].to(torch.int32))
    return out


# -- references and inputs --------------------------------------------------------------------------


def stable_sort(x, descending):
    result = torch.sort(x, dim=-1, descending=descending, stable=True)
    return result.values, result.indices


def rows_with_specials(m: int, n: int) -> torch.Tensor:
    x = torch.randn(m, n)
    x[0, 3] = float("nan")
    x[1, :3] = float("inf")
    x[2, 2:6] = float("-inf")
    x[3, 1] = -0.0
    return x


def distinct_rows(m: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows of distinct values exactly representable in `dtype` (no ties: any topk order works)."""
    return (torch.stack([torch.randperm(n) for _ in range(m)]) - n // 2).to(dtype) * 0.5


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    make: Callable[[], tuple]
    reference: Callable[..., Any]
    atol: float = 0.0
    rtol: float = 0.0

    def __repr__(self) -> str:
        return self.name


CASES = [
    Case(
        "sort_f32_specials_asc", sort_rows, lambda: (rows_with_specials(5, 37), False), stable_sort
    ),
    Case(
        "sort_f32_specials_desc", sort_rows, lambda: (rows_with_specials(5, 37), True), stable_sort
    ),
    Case("sort_f16", sort_rows, lambda: (torch.randn(3, 29).half(), True), stable_sort),
    Case("sort_bf16", sort_rows, lambda: (torch.randn(3, 29).bfloat16(), False), stable_sort),
    Case(
        "sort_int32_ties",
        sort_rows,
        lambda: (torch.randint(-4, 4, (3, 29), dtype=torch.int32), True),
        stable_sort,
    ),
    Case(
        "sort_int8",
        sort_rows,
        lambda: (torch.randint(-100, 100, (3, 19), dtype=torch.int8), False),
        stable_sort,
    ),
    Case("sort_bool", sort_rows, lambda: (torch.rand(3, 19) > 0.5, True), stable_sort),
    Case(
        "sort_int64_values",
        sort_values,
        lambda: (torch.randint(-(2**40), 2**40, (3, 23)),),
        lambda x: x.sort(1, True).values,
    ),
    Case(
        "sort_f64_values",
        sort_values,
        lambda: (torch.randn(3, 23, dtype=torch.float64),),
        lambda x: x.sort(1, True).values,
    ),
    Case(
        "topk_largest",
        topk_rows,
        lambda: (distinct_rows(5, 37, torch.float32), 5, True),
        lambda x, k, largest: tuple(torch.topk(x, k, dim=1, largest=largest)),
    ),
    Case(
        "topk_smallest_bf16",
        topk_rows,
        lambda: (distinct_rows(5, 37, torch.bfloat16), 3, False),
        lambda x, k, largest: tuple(torch.topk(x, k, dim=1, largest=largest)),
    ),
    Case(
        "topk_one",
        topk_rows,
        lambda: (distinct_rows(3, 20, torch.float32), 1, True),
        lambda x, k, largest: tuple(torch.topk(x, k, dim=1, largest=largest)),
    ),
    Case(
        "topk_all_int",
        topk_rows,
        lambda: (distinct_rows(3, 13, torch.int32), 13, True),
        lambda x, k, largest: tuple(torch.topk(x, k, dim=1, largest=largest)),
    ),
    Case(
        "topk_sum",
        topk_then_sum,
        lambda: (torch.randn(5, 37), 6),
        lambda x, k: torch.topk(x, k, dim=1).values.sum(1),
        1e-5,
        1e-5,
    ),
    Case(
        "argsort_dim0",
        argsort_columns,
        lambda: (torch.randn(21, 5),),
        lambda x: torch.sort(x, dim=0, descending=True, stable=True).indices,
    ),
    Case(
        "sort_3d_middle",
        sort_middle_dim,
        lambda: (torch.randn(3, 5, 7),),
        lambda x: torch.sort(x, dim=1, descending=True).values,
    ),
    Case(
        "sort_tiled_dim",
        sort_tiled_dim,
        lambda: (torch.randn(5, 45),),
        lambda x: torch.sort(x, 1).values + 1,
    ),
    Case(
        "gather",
        gather_rows,
        lambda: (torch.randn(5, 29), torch.randint(0, 29, (5, 7))),
        lambda x, i: torch.gather(x, 1, i),
    ),
    Case(
        "stack",
        stack_tiles,
        lambda: (
            torch.randn(5, 7),
            torch.randn(5, 7),
            torch.randint(-5, 5, (5, 7), dtype=torch.int32),
        ),
        lambda a, b, c: (torch.stack([a, b * 2, c.float()], 1), torch.stack([a, b])),
    ),
    Case(
        "cat_general",
        cat_rows,
        lambda: (torch.randn(5, 13), torch.randn(5, 21)),
        lambda x, y: torch.cat([x, y + 1], 1),
    ),
    Case(
        "cat_join",
        cat_rows,
        lambda: (torch.randn(5, 16), torch.randn(5, 16)),
        lambda x, y: torch.cat([x, y + 1], 1),
    ),
    Case(
        "cat_join_padded",
        cat_rows,
        lambda: (torch.randn(5, 16), torch.randn(5, 5)),
        lambda x, y: torch.cat([x, y + 1], 1),
    ),
    Case(
        "cat_three_dim0",
        cat_three,
        lambda: (torch.randn(3, 10), torch.randn(7, 10), torch.randn(5, 10)),
        lambda x, y, z: torch.cat([x, y, z]),
    ),
    Case(
        "split_join",
        complex_mul,
        lambda: (torch.randn(5, 7, 2), torch.randn(5, 7, 2)),
        lambda a, b: torch.view_as_real(torch.view_as_complex(a) * torch.view_as_complex(b)),
        1e-5,
        1e-5,
    ),
    Case(
        "join_broadcast",
        join_broadcast,
        lambda: (torch.randn(5, 7), torch.randn(7) * 10),
        lambda x, y: torch.stack([x, y.to(torch.int32).float().expand(5, 7)], -1),
    ),
]


def clone(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def check(actual: Any, expected: Any, case: Case, what: str) -> None:
    if isinstance(expected, (tuple, list)):
        for a, e in zip(actual, expected, strict=True):
            check(a, e, case, what)
        return
    assert actual.dtype == expected.dtype, what
    torch.testing.assert_close(
        actual,
        expected,
        atol=case.atol,
        rtol=case.rtol,
        equal_nan=True,
        msg=lambda m: f"{what}\n{m}",
    )


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_default_and_random_configs(case: Case) -> None:
    triton_kernel = helion.kernel(case.fn, backend="triton", autotune_effort="none")
    ref_kernel = helion.kernel(case.fn, backend="ref", autotune_effort="none")
    torch.manual_seed(0)
    bound = triton_kernel.bind(case.make())
    assert bound.backend.name == "triton"
    spec = bound.config_spec
    configs = [spec.default_config()] + [
        spec.random_config(random.Random(seed)) for seed in range(RANDOM_CONFIGS)
    ]
    for index, config in enumerate(configs):
        torch.manual_seed(100 + index)
        args = case.make()
        expected = case.reference(*clone(args))
        actual = bound.compile_config(config)(*clone(args))
        check(actual, expected, case, f"{case.name} vs torch with {config}")
        check(actual, ref_kernel(*clone(args)), case, f"{case.name} vs ref with {config}")


def test_sorted_full_slices_are_never_looped() -> None:
    # a reduction_loops chunk would sort each chunk on its own: the dimension stays persistent
    x = torch.randn(4, 300)
    bound = helion.kernel(sort_rows, backend="triton", autotune_effort="none").bind((x, False))
    with pytest.raises(exc.InvalidConfig, match="reduction_loops"):
        bound.config_spec.normalize(helion.Config(block_sizes=[2], reduction_loops=[64]))
    config = bound.config_spec.normalize(helion.Config(block_sizes=[2]))
    assert "roffset" not in bound.to_code(config)
    values, indices = bound.compile_config(config)(x, False)
    expected = torch.sort(x, dim=1, stable=True)
    torch.testing.assert_close(values, expected.values, atol=0, rtol=0)
    torch.testing.assert_close(indices, expected.indices, atol=0, rtol=0)


def test_int64_sort_with_indices_is_reported() -> None:
    x = torch.randint(0, 100, (4, 9))
    bound = helion.kernel(sort_rows, backend="triton", autotune_effort="none").bind((x, False))
    with pytest.raises(
        exc.BackendUnsupported, match=r"sort with indices of torch\.int64 values"
    ) as info:
        bound.compile_config(bound.config_spec.default_config())
    assert "test_shape_ops_triton.py" in str(info.value)


_GPU_SORT_CASES = [
    c
    for c in CASES
    if c.name in ("sort_f32_specials_desc", "sort_3d_middle", "topk_smallest_bf16", "topk_sum")
]


@pytest.mark.parametrize(
    ("case", "topk_descending"),
    [(c, True) for c in _GPU_SORT_CASES]
    + [(c, False) for c in _GPU_SORT_CASES if "topk" in c.name],
    ids=lambda v: (
        repr(v) if isinstance(v, Case) else ("topk_descending" if v else "topk_largest_only")
    ),
)
def test_gpu_sort_path_in_the_interpreter(case: Case, topk_descending: bool, monkeypatch) -> None:
    # the interpreter normally sorts with its own network (tl.sort is slow there): check the
    # tl.sort / tl.topk code that GPUs run as well, with one config; Triton <= 3.6 has a tl.topk
    # without `descending`, emulated by complementing the keys
    from helion_triton import shape_ops

    monkeypatch.setattr(shape_ops, "NATIVE_SORT_IN_INTERPRETER", True)
    monkeypatch.setattr(shape_ops, "_topk_has_descending", lambda: topk_descending)
    torch.manual_seed(0)
    args = case.make()
    bound = helion.kernel(case.fn, backend="triton", autotune_effort="none").bind(args)
    config = bound.config_spec.default_config()
    source = bound.to_code(config)
    assert "tl.sort(" in source or "tl.topk(" in source
    check(bound.compile_config(config)(*clone(args)), case.reference(*clone(args)), case, case.name)


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.name in ("gather", "cat_general", "cat_join_padded", "cat_three_dim0")],
    ids=repr,
)
def test_gpu_one_hot_gather_in_the_interpreter(case: Case, monkeypatch) -> None:
    # on a GPU, a gather (and the general torch.cat) with fewer index elements than threads
    # is lowered as a one-hot select: Triton 3.6 asserts on tl.gather there. Run that code
    # here with small tiles and many warps, where it is chosen
    from helion_triton import shape_ops

    monkeypatch.setattr(shape_ops, "ONE_HOT_GATHER_IN_INTERPRETER", True)
    torch.manual_seed(0)
    args = case.make()
    bound = helion.kernel(case.fn, backend="triton", autotune_effort="none").bind(args)
    spec = bound.config_spec
    config = spec.normalize({**dict(spec.default_config()), "num_warps": 32})
    source = bound.to_code(config)
    assert "tl.where(pick" in source and "tl.gather(" not in source, source
    check(bound.compile_config(config)(*clone(args)), case.reference(*clone(args)), case, case.name)
