"""Shape ops inside kernels on the ref backend and in eager mode: torch.sort / argsort / topk /
gather / stack / cat and hl.split / hl.join, against PyTorch on non-power-of-two shapes, with the
default and random configs; plus the errors for what cannot work."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

EAGER = helion.RefMode.EAGER


def ref(fn):
    return helion.kernel(fn, backend="ref", autotune_effort="none")


def eager(fn):
    return helion.kernel(fn, ref_mode=EAGER)


def run_all(fn, args, reference, *, configs: int = 4, check=None) -> None:
    """`fn` on ref (default + random configs) and in eager mode, each against `reference`
    (sorts are stable everywhere, so ties come out in one order)."""
    check = check or assert_same
    expected = reference(*clone(args))
    check(eager(fn)(*clone(args)), expected)
    bound = ref(fn).bind(args)
    spec = bound.config_spec
    for config in [spec.default_config()] + [
        spec.random_config(random.Random(s)) for s in range(configs)
    ]:
        check(bound.compile_config(config)(*clone(args)), expected)


def clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def assert_same(actual, expected) -> None:
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e)
        return
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual, expected, atol=0, rtol=0, equal_nan=True)


# -- kernels ----------------------------------------------------------------------------------------


def sort_rows(x, descending: hl.constexpr):
    m, n = x.shape
    values = torch.empty_like(x)
    indices = torch.empty([m, n], dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        v, i = torch.sort(x[tile_m, :], dim=-1, descending=descending)
        values[tile_m, :] = v
        indices[tile_m, :] = i
    return values, indices


def topk_rows(x, k: hl.constexpr, largest: hl.constexpr):
    m, _ = x.shape
    values = torch.empty([m, k], dtype=x.dtype, device=x.device)
    indices = torch.empty([m, k], dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(m):
        v, i = x[tile_m, :].topk(k, dim=1, largest=largest)
        values[tile_m, :] = v
        indices[tile_m, :] = i
    return values, indices


def argsort_columns(x):
    m, n = x.shape
    out = torch.empty([m, n], dtype=torch.int64, device=x.device)
    for tile_n in hl.tile(n):
        out[:, tile_n] = torch.argsort(x[:, tile_n], dim=0)
    return out


def sort_tiled_dim(x):
    # the sorted dimension is tiled: its block size is pinned to cover all of it
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = torch.sort(x[tile_m, tile_n], dim=1, descending=True).values
    return out


def sort_fixed_block(x):
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        for tile_n in hl.tile(n, block_size=8):
            out[tile_m, tile_n] = torch.sort(x[tile_m, tile_n], dim=1).values
    return out


def sort_device_bounds(x, ends):
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        end = ends[tile_m.begin]
        for tile_n in hl.tile(end):
            out[tile_m, tile_n] = torch.sort(x[tile_m, tile_n], dim=1).values
    return out


def gather_rows(x, index):
    m, _ = x.shape
    out = torch.empty(index.shape, dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
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
    n2 = y.size(1)
    out = torch.empty([m, n1 + n2], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        out[tile_m, :] = torch.cat([x[tile_m, :], y[tile_m, :] + 1], dim=1)
    return out


def cat_three(x, y, z):
    n, m = x.shape
    out = torch.empty([n + y.size(0) + z.size(0), m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        out[:, tile_m] = torch.cat((x[:, tile_m], y[:, tile_m], z[:, tile_m]))
    return out


def complex_mul(a, b):
    # (m, n, 2) tensors holding complex numbers as (real, imag) pairs
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


# -- sort / argsort / topk --------------------------------------------------------------------------


def _stable_sort(x, descending, dim=-1):
    result = torch.sort(x, dim=dim, descending=descending, stable=True)
    return result.values, result.indices


@pytest.mark.parametrize(
    "dtype",
    [
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
    ],
)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_rows(dtype, descending):
    torch.manual_seed(0)
    if dtype.is_floating_point:
        x = torch.randn(11, 37).to(dtype)
    elif dtype == torch.bool:
        x = torch.rand(11, 37) > 0.5
    else:
        x = torch.randint(0, 9, (11, 37)).to(dtype)  # many ties: the sort must be stable
    run_all(sort_rows, (x, descending), lambda x, d: _stable_sort(x, d), configs=2)


def test_sort_special_floats():
    x = torch.randn(5, 19)
    x[0, 3] = float("nan")
    x[1, :4] = float("inf")
    x[2, 5:9] = float("-inf")
    x[3, 0] = -0.0
    x[4, :] = 0.0
    for descending in (False, True):
        run_all(sort_rows, (x, descending), lambda x, d: _stable_sort(x, d), configs=1)


@pytest.mark.parametrize("k, largest", [(5, True), (5, False), (1, True), (37, False)])
def test_topk_rows(k, largest):
    torch.manual_seed(1)
    x = torch.randn(9, 37)

    def reference(x, k, largest):
        result = torch.topk(x, k, dim=1, largest=largest)
        return result.values, result.indices

    run_all(topk_rows, (x, k, largest), reference, configs=2)


def test_argsort_non_last_dim():
    torch.manual_seed(2)
    x = torch.randn(23, 10)
    run_all(argsort_columns, (x,), lambda x: torch.sort(x, dim=0, stable=True).indices)


def test_sort_along_a_tiled_dim_pins_its_block_size():
    torch.manual_seed(3)
    x = torch.randn(10, 45)
    bound = ref(sort_tiled_dim).bind((x,))
    blocks = bound.config_spec.block_sizes
    assert blocks[1].min_size == 64, blocks
    # a smaller block asked for is raised to the minimum
    assert bound.normalize(helion.Config(block_sizes=[4, 16]))["block_sizes"] == [4, 64]
    run_all(sort_tiled_dim, (x,), lambda x: torch.sort(x, dim=1, descending=True).values)


def test_sort_along_a_fixed_small_block_is_an_error():
    with pytest.raises(exc.DimensionNotWhole, match="block_size=8 over 30"):
        ref(sort_fixed_block).bind((torch.randn(5, 30),))


def test_sort_along_a_loop_with_device_bounds_is_an_error():
    ends = torch.full([5], 30, dtype=torch.int64)
    with pytest.raises(exc.DimensionNotWhole, match="only known on the device"):
        ref(sort_device_bounds).bind((torch.randn(5, 30), ends))


def test_topk_errors():
    def bad_k(x):
        out = torch.empty([x.size(0), 40], device=x.device)
        for tile in hl.tile(x.size(0)):
            out[tile, :] = torch.topk(x[tile, :], 40).values
        return out

    with pytest.raises(exc.TypeInferenceError, match="k=40 is out of range"):
        ref(bad_k).bind((torch.randn(4, 37),))


# -- gather -------------------------------------------------------------------------------------------


def test_gather_rows():
    torch.manual_seed(4)
    x = torch.randn(13, 29)
    index = torch.randint(0, 29, (13, 7))
    run_all(gather_rows, (x, index), lambda x, i: torch.gather(x, 1, i))


def test_gather_errors():
    def float_index(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            row = x[tile, :]
            out[tile, :] = torch.gather(row, 1, row)
        return out

    with pytest.raises(exc.TypeInferenceError, match="integer index"):
        ref(float_index).bind((torch.randn(4, 9),))


# -- stack / cat / split / join --------------------------------------------------------------------------


def test_stack_tiles():
    torch.manual_seed(5)
    a, b = torch.randn(11, 19), torch.randn(11, 19)
    c = torch.randint(-5, 5, (11, 19), dtype=torch.int32)

    def reference(a, b, c):
        return torch.stack([a, b * 2, c.float()], dim=1), torch.stack([a, b])

    run_all(stack_tiles, (a, b, c), reference)


def test_stack_shape_mismatch():
    def bad(x):
        out = torch.empty([2, x.size(0)], device=x.device)
        for tile in hl.tile(x.size(0)):
            row = x[tile, :]
            out[:, tile] = torch.stack([row.sum(-1), row])
        return out

    with pytest.raises(exc.ShapeMismatch, match="one shape"):
        ref(bad).bind((torch.randn(4, 9),))


@pytest.mark.parametrize("n1, n2", [(13, 21), (16, 16), (16, 5)])
def test_cat_rows(n1, n2):
    torch.manual_seed(6)
    x, y = torch.randn(9, n1), torch.randn(9, n2)
    run_all(cat_rows, (x, y), lambda x, y: torch.cat([x, y + 1], dim=1))


def test_cat_three_along_dim0():
    torch.manual_seed(7)
    x, y, z = torch.randn(3, 20), torch.randn(7, 20), torch.randn(5, 20)
    run_all(cat_three, (x, y, z), lambda x, y, z: torch.cat([x, y, z]))


def test_cat_along_a_tile_dim_is_an_error():
    def bad(x):
        out = torch.empty([2 * x.size(0)], device=x.device)
        for tile in hl.tile(x.size(0)):
            both = torch.cat([x[tile], x[tile]])
            out[tile] = both.sum()
        return out

    with pytest.raises(exc.TypeInferenceError, match="a tile dimension"):
        ref(bad).bind((torch.randn(9),))


def test_split_join_complex_multiply():
    torch.manual_seed(8)
    a, b = torch.randn(7, 13, 2), torch.randn(7, 13, 2)

    def reference(a, b):
        return torch.view_as_real(torch.view_as_complex(a) * torch.view_as_complex(b))

    def close(actual, expected):
        torch.testing.assert_close(actual, expected)

    run_all(complex_mul, (a, b), reference, check=close)


def test_join_broadcasts_and_promotes():
    torch.manual_seed(9)
    x, y = torch.randn(6, 11), torch.randn(11) * 10
    run_all(
        join_broadcast,
        (x, y),
        lambda x, y: torch.stack([x, y.to(torch.int32).float().expand(6, 11)], -1),
    )


def test_split_needs_a_last_dim_of_two():
    def bad(x):
        out = torch.empty([x.size(0)], device=x.device)
        for tile in hl.tile(x.size(0)):
            lo, hi = hl.split(x[tile, :])
            out[tile] = lo + hi
        return out

    x = torch.randn(5, 3)
    with pytest.raises(exc.ShapeMismatch, match="size 2"):
        ref(bad).bind((x,))
    with pytest.raises(exc.ShapeMismatch, match="size 2"):
        eager(bad)(x)


def test_split_and_join_are_device_only():
    def host_split(x):
        lo, _ = hl.split(x)
        out = torch.empty_like(lo)
        for tile in hl.tile(out.size(0)):
            out[tile] = lo[tile]
        return out

    with pytest.raises(exc.DeviceAPIOnHost):
        ref(host_split).bind((torch.randn(5, 2),))
    with pytest.raises(exc.DeviceAPIOnHost):
        eager(host_split)(torch.randn(5, 2))


# -- other backends ------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["pallas", "cute"])
@pytest.mark.parametrize(
    "fn, args",
    [(sort_rows, (torch.randn(5, 9), False)), (complex_mul, (torch.randn(3, 4, 2),) * 2)],
)
def test_backends_without_shape_ops_say_so(backend, fn, args):
    from helion import backends

    if backend not in {b.name for b in backends.list_backends()}:
        pytest.skip(f"the {backend} backend is not installed")
    with pytest.raises(
        exc.BackendUnsupported, match=f"(sort|split) is not supported by the '{backend}' backend"
    ) as info:
        helion.kernel(fn, backend=backend, autotune_effort="none").bind(args)
    assert info.value.loc is not None and "test_shape_ops.py" in str(info.value)
