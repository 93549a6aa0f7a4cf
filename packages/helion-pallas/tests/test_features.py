"""One construct per kernel (control flow, indexing, atomics, dtypes), against the ref backend."""

from __future__ import annotations

import pallas_features as f
import pytest
import torch
from pallas_testing import assert_same
from pallas_testing import configs
from pallas_testing import pallas_kernel
from pallas_testing import run_both


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _x2() -> torch.Tensor:
    return torch.randn(37, 53, generator=_g(2))


FEATURES = {
    "scaled_add": (
        f.scaled_add,
        lambda: (2.5, torch.randn(1000, generator=_g(0)), torch.randn(1000, generator=_g(1))),
    ),
    "branchy_pos": (f.branchy, lambda: (torch.randn(100, generator=_g(5)), 1)),
    "branchy_neg": (f.branchy, lambda: (torch.randn(100, generator=_g(5)), -1)),
    "grid_rows": (f.grid_rows, lambda: (_x2(),)),
    "grid_then_tile": (f.grid_then_tile, lambda: (_x2(),)),
    "split_k": (
        f.split_k,
        lambda: (torch.randn(30, 100, generator=_g(3)), torch.randn(100, 20, generator=_g(4))),
    ),
    "in_place_double": (f.in_place_double, lambda: (_x2(),)),
    "two_loops": (f.two_loops, lambda: (torch.randn(1000, generator=_g(0)),)),
    "row_argmax": (f.row_argmax, lambda: (_x2(),)),
    "row_cumsum": (f.row_cumsum, lambda: (_x2(),)),
    "column_max": (f.column_max, lambda: (_x2(),)),
    "tile_attributes": (f.tile_attributes, lambda: (torch.randn(77, generator=_g(0)),)),
    "matmul_bf16": (
        f.matmul_bf16,
        lambda: (
            torch.randn(30, 100, generator=_g(3)).bfloat16(),
            torch.randn(100, 20, generator=_g(4)).bfloat16(),
        ),
    ),
    "keepdim_reshape": (f.keepdim_reshape, lambda: (_x2(),)),
    "masked_where": (f.masked_where, lambda: (_x2(),)),
    "scatter_rows": (
        f.scatter_rows,
        lambda: (
            torch.randperm(41, generator=_g(6))[:29],
            torch.randn(29, 7, generator=_g(7)),
            torch.zeros(41, 7),
        ),
    ),
    "int_ops": (f.int_ops, lambda: (torch.randint(-100, 100, (300,), generator=_g(8)),)),
    "atomic_max_bins": (
        f.atomic_max_bins,
        lambda: (torch.randn(500, generator=_g(9)), torch.randint(0, 8, (500,), generator=_g(10))),
    ),
    "permute": (f.row_mean_permuted, lambda: (_x2(),)),
    "integer_dim": (f.rows_plus_integer_dim, lambda: (_x2(),)),
}


@pytest.mark.parametrize("name", list(FEATURES))
def test_feature_matches_ref(name: str) -> None:
    fn, make_args = FEATURES[name]
    args = make_args()
    bound = pallas_kernel(fn).bind(args)
    for config in configs(bound, (0, 1)):
        actual, expected, _ = run_both(fn, args, config)
        assert_same(actual, expected, atol=1e-2 if name == "matmul_bf16" else 1e-4, rtol=1e-2)


def test_split_k_matches_torch() -> None:
    x, y = FEATURES["split_k"][1]()
    assert_same(pallas_kernel(f.split_k)(x, y), x @ y)


def test_atomic_xor_in_interpret_mode_is_sequential() -> None:
    x = torch.randint(0, 1 << 20, (99,), generator=_g(11), dtype=torch.int32)
    bins = torch.randint(0, 4, (99,), generator=_g(12))
    expected = torch.zeros(4, dtype=torch.int32)
    for value, where in zip(x.tolist(), bins.tolist(), strict=True):
        expected[where] ^= value
    assert_same(pallas_kernel(f.xor_bins)(x, bins), expected)
