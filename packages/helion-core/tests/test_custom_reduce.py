"""`hl.reduce` and `hl.associative_scan` with user combiners (also `torch.cummax` / `cummin` and
`torch._higher_order_ops.associative_scan` in device code) on the ref backend, with its default
and random configs, and in eager mode, against PyTorch on non-power-of-two shapes."""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from torch._higher_order_ops import associative_scan as torch_associative_scan

import helion
import helion.language as hl
from helion import exc
from helion.language import _ops as ops

# -- combiners -----------------------------------------------------------------------------------


def add(a, b):
    return a + b


def maximum(a, b):
    return torch.maximum(a, b)


def argmax_combine(value_a, index_a, value_b, index_b):
    """The larger value, and on ties the smaller index (torch.argmax's choice)."""
    take_b = (value_b > value_a) | ((value_b == value_a) & (index_b < index_a))
    return torch.where(take_b, value_b, value_a), torch.where(take_b, index_b, index_a)


def argmin_tuple_form(a, b):
    """The tuple form of a combiner: two (value, index) tuples."""
    take_b = (b[0] < a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
    return torch.where(take_b, b[0], a[0]), torch.where(take_b, b[1], a[1])


def affine_combine(a_first, b_first, a_then, b_then):
    """h -> a_first*h + b_first, then h -> a_then*h + b_then (associative, not commutative)."""
    return a_first * a_then, a_then * b_first + b_then


def first_nonzero(a, b):
    """Associative, not commutative: the earliest non-zero element."""
    return torch.where(a != 0, a, b)


def bit_or(a, b):
    return a | b


# -- kernels ---------------------------------------------------------------------------------------


def row_reductions(x: torch.Tensor):
    m, n = x.shape
    total = torch.empty([m], dtype=x.dtype, device=x.device)
    peak = torch.empty([m], dtype=x.dtype, device=x.device)
    argmax = torch.empty([m], dtype=torch.int64, device=x.device)
    argmin = torch.empty([m], dtype=torch.int64, device=x.device)
    kept = torch.empty([m, 1], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        total[tile_m] = hl.reduce(add, row, dim=1)
        peak[tile_m] = hl.reduce(maximum, row, dim=-1, other=float("-inf"))
        index = hl.arange(n, dtype=torch.int64)[None, :]
        _, argmax[tile_m] = hl.reduce(argmax_combine, (row, index), dim=1, other=(float("-inf"), 0))
        _, argmin[tile_m] = hl.reduce(
            argmin_tuple_form, (row, index), dim=1, other=(float("inf"), 0)
        )
        kept[tile_m, :] = hl.reduce(add, row, dim=1, keep_dims=True)
    return total, peak, argmax, argmin, kept


def row_reductions_reference(x: torch.Tensor):
    return x.sum(1), x.amax(1), x.argmax(1), x.argmin(1), x.sum(1, keepdim=True)


def column_max(x: torch.Tensor) -> torch.Tensor:
    """Reduce over dim 0, a full slice, of [rows, tile] blocks."""
    _m, n = x.shape
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tile_n in hl.tile(n):
        out[tile_n] = hl.reduce(maximum, x[:, tile_n], dim=0, other=float("-inf"))
    return out


def tiled_row_max(x: torch.Tensor) -> torch.Tensor:
    """Reduce over a tile dimension inside an inner loop, carrying the running result."""
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        best = hl.full([tile_m], float("-inf"), dtype=x.dtype)
        for tile_n in hl.tile(n):
            best = torch.maximum(
                best, hl.reduce(maximum, x[tile_m, tile_n], dim=1, other=float("-inf"))
            )
        out[tile_m] = best
    return out


def block_totals(x: torch.Tensor) -> torch.Tensor:
    """dim=None reduces every dimension of the block: one total per tile of rows."""
    m, _n = x.shape
    block = hl.register_block_size(m)
    partial = torch.zeros([helion.cdiv(m, block)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m, block_size=block):
        partial[tile_m.id] = hl.reduce(add, x[tile_m, :])
    return partial


def integer_reductions(flags: torch.Tensor, bits: torch.Tensor):
    m, _n = bits.shape
    any_set = torch.empty([m], dtype=torch.bool, device=bits.device)
    ored = torch.empty([m], dtype=bits.dtype, device=bits.device)
    for tile_m in hl.tile(m):
        any_set[tile_m] = hl.reduce(bit_or, flags[tile_m, :], dim=1, other=False)
        ored[tile_m] = hl.reduce(bit_or, bits[tile_m, :], dim=1)
    return any_set, ored


def _or_rows(bits: torch.Tensor) -> torch.Tensor:
    result = bits[:, 0].clone()
    for j in range(1, bits.shape[1]):
        result |= bits[:, j]
    return result


def row_scans(a: torch.Tensor, b: torch.Tensor):
    m, _n = b.shape
    forward = torch.empty_like(b)
    backward = torch.empty_like(b)
    prefix = torch.empty_like(b)
    first = torch.empty_like(b)
    for tile_m in hl.tile(m):
        _, forward[tile_m, :] = hl.associative_scan(
            affine_combine, (a[tile_m, :], b[tile_m, :]), dim=1
        )
        _, backward[tile_m, :] = hl.associative_scan(
            affine_combine, (a[tile_m, :], b[tile_m, :]), dim=1, reverse=True
        )
        prefix[tile_m, :] = hl.associative_scan(add, b[tile_m, :], dim=-1)
        first[tile_m, :] = hl.associative_scan(
            first_nonzero, torch.relu(b[tile_m, :]), dim=1, reverse=True
        )
    return forward, backward, prefix, first


def _recurrence(a: torch.Tensor, b: torch.Tensor, steps) -> torch.Tensor:
    h = torch.zeros_like(b[:, 0])
    out = torch.empty_like(b)
    for t in steps:
        h = a[:, t] * h + b[:, t]
        out[:, t] = h
    return out


def _first_nonzero_from_the_end(x: torch.Tensor) -> torch.Tensor:
    """A reverse scan sees the elements from the end: out[t] is the last non-zero of x[t:]."""
    out = torch.empty_like(x)
    current = torch.zeros_like(x[:, 0])
    for t in reversed(range(x.shape[1])):
        current = torch.where(current != 0, current, x[:, t])
        out[:, t] = current
    return out


def row_scans_reference(a: torch.Tensor, b: torch.Tensor):
    n = b.shape[1]
    return (
        _recurrence(a, b, range(n)),
        _recurrence(a, b, reversed(range(n))),
        b.cumsum(1),
        _first_nonzero_from_the_end(torch.relu(b)),
    )


def column_scan(x: torch.Tensor) -> torch.Tensor:
    """A reverse scan along dim 0, a full slice, of [rows, tile] blocks."""
    _m, n = x.shape
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[:, tile_n] = hl.associative_scan(maximum, x[:, tile_n], dim=0, reverse=True)
    return out


def torch_scans(x: torch.Tensor):
    m, _n = x.shape
    values = torch.empty_like(x)
    indices = torch.empty(x.shape, dtype=torch.int64, device=x.device)
    low = torch.empty_like(x)
    low_indices = torch.empty(x.shape, dtype=torch.int64, device=x.device)
    total = torch.empty_like(x)
    for tile_m in hl.tile(m):
        values[tile_m, :], indices[tile_m, :] = torch.cummax(x[tile_m, :], dim=1)
        result = x[tile_m, :].cummin(1)
        low[tile_m, :], low_indices[tile_m, :] = result.values, result.indices
        total[tile_m, :] = torch_associative_scan(add, x[tile_m, :], 1, reverse=True)
    return values, indices, low, low_indices, total


def torch_scans_reference(x: torch.Tensor):
    top, low = torch.cummax(x, 1), torch.cummin(x, 1)
    return top.values, top.indices, low.values, low.indices, x.flip(1).cumsum(1).flip(1)


def _tied_with_nan(m: int, n: int) -> torch.Tensor:
    x = torch.round(2 * torch.randn(m, n))  # repeated values: ties pick the later index
    x[1, n // 2] = float("nan")  # a NaN wins and stays, as in torch
    return x


CASES = {
    "row_reductions": (row_reductions, row_reductions_reference, lambda: (torch.randn(11, 37),)),
    "row_reductions_fp16": (
        row_reductions,
        row_reductions_reference,
        lambda: (torch.randn(5, 19).half(),),
    ),
    "column_max": (column_max, lambda x: x.amax(0), lambda: (torch.randn(23, 10),)),
    "tiled_row_max": (tiled_row_max, lambda x: x.amax(1), lambda: (torch.randn(9, 45) - 5,)),
    "integer_reductions": (
        integer_reductions,
        lambda flags, bits: (flags.any(1), _or_rows(bits)),
        lambda: (torch.rand(7, 21) < 0.05, torch.randint(0, 2**20, (7, 21), dtype=torch.int32)),
    ),
    "row_scans": (
        row_scans,
        row_scans_reference,
        lambda: (0.5 + 0.5 * torch.rand(6, 29), torch.randn(6, 29)),
    ),
    "column_scan": (
        column_scan,
        lambda x: x.flip(0).cummax(0).values.flip(0),
        lambda: (torch.randn(19, 10),),
    ),
    "torch_scans": (torch_scans, torch_scans_reference, lambda: (_tied_with_nan(7, 26),)),
}


def _ref(fn):
    return helion.kernel(fn, autotune_effort="none", backend="ref")


def _check(actual, expected) -> None:
    for a, e in zip(
        actual if isinstance(actual, tuple) else (actual,),
        expected if isinstance(expected, tuple) else (expected,),
        strict=True,
    ):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, e.dtype, a.shape, e.shape)
        if e.dtype.is_floating_point:
            tolerance = 1e-2 if e.dtype == torch.float16 else 1e-4
            torch.testing.assert_close(a, e, atol=tolerance, rtol=tolerance, equal_nan=True)
        else:
            torch.testing.assert_close(a, e, atol=0, rtol=0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_ref_default_and_random_configs(name):
    fn, reference, make = CASES[name]
    torch.manual_seed(0)
    args = make()
    expected = reference(*args)
    bound = _ref(fn).bind(args)
    spec = bound.config_spec
    for config in [spec.default_config()] + [
        spec.random_config(random.Random(seed)) for seed in range(3)
    ]:
        _check(bound.compile_config(config)(*args), expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_mode(name):
    fn, reference, make = CASES[name]
    torch.manual_seed(1)
    args = make()
    _check(helion.kernel(fn, ref_mode=helion.RefMode.EAGER)(*args), reference(*args))


@pytest.mark.parametrize("eager", [False, True])
def test_dim_none_reduces_the_whole_block(eager):
    x = torch.randn(21, 13)
    if eager:
        partial = helion.kernel(block_totals, ref_mode=helion.RefMode.EAGER)(x)
    else:
        bound = _ref(block_totals).bind((x,))
        partial = bound.compile_config(helion.Config(block_sizes=[8]))(x)
        assert partial.shape == (3,)
    torch.testing.assert_close(partial.sum(), x.sum(), atol=1e-4, rtol=1e-4)


def test_the_combiner_is_one_region_of_the_node():
    x = torch.randn(11, 37)
    ir = _ref(row_reductions).bind((x,)).ir
    nodes = [node for node in ir.walk() if node.op is ops.custom_reduce]
    assert len(nodes) == 5
    argmax_node = nodes[2]
    (region,) = argmax_node.regions
    assert [a.dtype for a in region.args] == [torch.float32, torch.int64] * 2
    assert [y.dtype for y in region.yields] == [torch.float32, torch.int64]
    assert all(n.op.elementwise for n in region.nodes)
    assert argmax_node.attrs["other"] == (float("-inf"), 0)
    assert [o.shape for o in argmax_node.outputs] == [argmax_node.inputs[0].shape[:1]] * 2
    assert all(len(node.regions) == 1 for node in nodes)
    text = str(ir)  # the printer shows each combiner once, under its node
    assert text.count(" = reduce(") == 5
    assert text.count("region 0(") == 5 + len(ir.loops)


def keep_left(a, b):
    return a


def reverse_keep_left(x):
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = hl.associative_scan(keep_left, x[tile_m, :], dim=1, reverse=True)
    return out


def test_a_reverse_scan_keeps_the_combiner_order():
    """A non-commutative combiner: a reverse scan puts the later elements on the left."""
    x = torch.randn(5, 17)
    expected = x[:, -1:].expand_as(x)
    bound = _ref(reverse_keep_left).bind((x,))
    torch.testing.assert_close(
        bound.compile_config(bound.config_spec.default_config())(x), expected
    )
    torch.testing.assert_close(
        helion.kernel(reverse_keep_left, ref_mode=helion.RefMode.EAGER)(x), expected
    )


# -- errors ------------------------------------------------------------------------------------------


def reduce_rows(x, combine):
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m] = hl.reduce(combine, x[tile_m, :], dim=1)
    return out


def reduce_pairs(x, combine):
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m], _ = hl.reduce(combine, (x[tile_m, :], x[tile_m, :]), dim=1)
    return out


def reduce_dim_2(x, combine):
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m] = hl.reduce(combine, x[tile_m, :], dim=2)
    return out


def reduce_two_others(x, combine):
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m] = hl.reduce(combine, x[tile_m, :], dim=1, other=(0, 1))
    return out


def reduce_text_other(x, combine):
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m] = hl.reduce(combine, x[tile_m, :], dim=1, other="zero")
    return out


def captures_a_device_value(x, combine):
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        row = x[tile_m, :]
        bias = row.sum(1, keepdim=True)
        out[tile_m] = hl.reduce(lambda a, b: combine(a, b) + bias, row, dim=1)  # noqa: B023
    return out


def not_elementwise(a, b):
    return a + b.reshape([])  # a view: not elementwise


def returns_one(a1, b1, a2, b2):
    return a1 + a2


def three_args(a, b, c):
    return a


@pytest.mark.parametrize(
    "kernel, combine, error, match",
    [
        (reduce_rows, three_args, exc.InvalidAPIUsage, "takes 3 arguments"),
        (reduce_rows, 42, exc.InvalidAPIUsage, "combine_fn must be a function"),
        (reduce_rows, not_elementwise, exc.InvalidAPIUsage, "only compute elementwise"),
        (reduce_pairs, returns_one, exc.InvalidAPIUsage, "returned 1 value"),
        (reduce_dim_2, add, exc.InvalidReductionDim, "invalid reduction dimension 2"),
        (reduce_two_others, add, exc.InvalidAPIUsage, "`other` has 2 values for 1 inputs"),
        (reduce_text_other, add, exc.InvalidAPIUsage, "`other` must be a number"),
        (captures_a_device_value, add, exc.InvalidAPIUsage, "from outside it"),
    ],
)
def test_bad_combiners_and_arguments_are_reported_with_the_line(kernel, combine, error, match):
    x = torch.randn(6, 10)
    with pytest.raises(error, match=match) as info:
        _ref(kernel).bind((x, combine))
    assert info.value.loc is not None and "hl.reduce" in info.value.loc.format()
    # eager mode runs the combiner on whole tensors: it checks the arguments, not the body
    if combine is not not_elementwise and kernel is not captures_a_device_value:
        with pytest.raises(error, match=match):
            helion.kernel(kernel, ref_mode=helion.RefMode.EAGER)(x, combine)


def test_hl_reduce_outside_device_code_is_an_error():
    with pytest.raises(exc.NotInsideKernel):
        hl.reduce(add, torch.randn(4))


def _rowmax_default_other(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = hl.reduce(torch.maximum, x[tm, :], dim=1)
    return out


def _rowmax_identity_other(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = hl.reduce(torch.maximum, x[tm, :], dim=1, other=float("-inf"))
    return out


def _rowsum_default_other(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm] = hl.reduce(lambda a, b: a + b, x[tm, :], dim=1)
    return out


def test_a_padding_value_that_is_not_the_combiners_identity_is_warned_of() -> None:
    x = -torch.rand(5, 45) - 1  # every value negative: a 0 pad would win the max
    kernel = helion.kernel(_rowmax_default_other, backend="ref", autotune_effort="none")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(kernel(x), x.amax(1))
    found = [w for w in caught if issubclass(w.category, exc.ReduceOtherNotIdentity)]
    assert found and "other=0" in str(found[0].message)


@pytest.mark.parametrize(
    ("fn", "cols"),
    [(_rowmax_identity_other, 45), (_rowsum_default_other, 45), (_rowmax_default_other, 64)],
    ids=["max-with-identity", "sum-default", "power-of-two-dim"],
)
def test_no_padding_warning_where_padding_cannot_change_the_result(fn, cols) -> None:
    x = -torch.rand(5, cols) - 1
    kernel = helion.kernel(fn, backend="ref", autotune_effort="none")
    with warnings.catch_warnings():
        warnings.simplefilter("error", exc.ReduceOtherNotIdentity)
        expected = x.sum(1) if fn is _rowsum_default_other else x.amax(1)
        torch.testing.assert_close(kernel(x), expected)
