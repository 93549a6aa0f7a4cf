"""Eager mode (HELION_INTERPRET=1 / ref_mode=RefMode.EAGER): the kernel's Python runs directly in
PyTorch with tiles as slices, independent of the frontend and IR."""

from __future__ import annotations

import sys

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.eager import RefTile
from helion.language._context import current_mode

EAGER = helion.RefMode.EAGER


def eager(fn=None, **settings):
    return (
        helion.kernel(fn, ref_mode=EAGER, **settings)
        if fn is not None
        else helion.kernel(ref_mode=EAGER, **settings)
    )


# -- tiles ----------------------------------------------------------------------------------------


def test_tile_without_block_size_spans_the_whole_range():
    @eager
    def k(x):
        seen = torch.zeros([4], dtype=torch.int64)
        for tile in hl.tile(x.size(0)):
            seen[0] += 1
            seen[1] = tile.begin
            seen[2] = tile.end
            seen[3] = tile.block_size
        return seen

    assert k(torch.zeros(37)).tolist() == [1, 0, 37, 37]


def test_explicit_and_registered_block_sizes_are_honoured():
    @eager
    def k(x):
        n = x.size(0)
        block = hl.register_block_size(n)
        info = torch.zeros([8, 6], dtype=torch.int64)
        for tile in hl.tile(n, block_size=block):
            info[tile.id, 0] = tile.begin
            info[tile.id, 1] = tile.end
            info[tile.id, 2] = tile.block_size
            info[tile.id, 3] = tile.count
            info[tile.id, 4] = tile.index.numel()
            info[tile.id, 5] = block
        hl.barrier()  # the next loop writes `info` too
        for tile in hl.tile(n, block_size=40):
            info[7, tile.id] = tile.end - tile.begin
        return info

    info = k(torch.zeros(150))
    # the registered default is min(next_pow2(150), 64) = 64
    assert info[:3].tolist() == [
        [0, 64, 64, 3, 64, 64],
        [64, 128, 64, 3, 64, 64],
        [128, 150, 64, 3, 22, 64],
    ]
    assert info[7, :4].tolist() == [40, 40, 40, 30]


def test_registered_block_size_default_is_clamped_to_minimum():
    seen = []

    @eager
    def k(x):
        seen.append(int(hl.register_block_size(32, x.size(0))))
        seen.append(int(hl.register_block_size(x.size(0))))
        for tile in hl.tile(x.size(0)):
            x[tile] = 0
        return x

    k(torch.ones(5))
    assert seen == [32, 8]


def test_multi_dim_tiles_and_tile_arithmetic():
    @eager
    def k(x):
        out = torch.empty_like(x)
        for tile_m, tile_n in hl.tile(x.size()):
            # `tile + 1` is `tile.index + 1`
            out[tile_m, tile_n] = (
                x[tile_m, tile_n] + (tile_m + 1)[:, None] * 100 + tile_n.index[None, :]
            )
        return out

    x = torch.randn(7, 9)
    expected = x + (torch.arange(7) + 1)[:, None] * 100 + torch.arange(9)[None, :]
    torch.testing.assert_close(k(x), expected)


def test_one_element_sequence_yields_a_tuple_and_tiles_unpack_errors():
    @eager
    def ok(x):
        for (tile,) in hl.tile([x.size(0)]):
            x[tile] = 1
        return x

    assert ok(torch.zeros(3)).tolist() == [1, 1, 1]

    @eager
    def bad(x):
        for a, b in hl.tile(x.size(0)):  # noqa: B007
            x[a] = 1
        return x

    with pytest.raises(exc.FailedToUnpackTile):
        bad(torch.zeros(3))


def test_grid_yields_ints():
    @eager
    def k(x):
        out = torch.zeros_like(x)
        for i in hl.grid(x.size(0)):
            assert isinstance(i, int)
            out[i, :] = x[i, :] * i
        return out

    x = torch.randn(5, 3)
    torch.testing.assert_close(k(x), x * torch.arange(5.0)[:, None])


def test_full_uses_real_tile_extents():
    @eager
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0), block_size=4):
            filled = hl.full([tile], 3.0)
            assert filled.shape == (tile.end - tile.begin,)
            out[tile] = x[tile] + filled
        return out

    x = torch.randn(10)
    torch.testing.assert_close(k(x), x + 3)


def test_inner_loop_bounds_from_the_outer_tile():
    @eager
    def k(x):
        out = torch.zeros([x.size(0)])
        for outer in hl.tile(x.size(0), block_size=8):
            acc = hl.zeros([1])
            for inner in hl.tile(outer.begin, outer.end, block_size=3):
                acc = acc + x[inner].sum()
            out[outer] = acc
        return out

    x = torch.randn(21)
    expected = torch.cat([x[b : b + 8].sum().expand(len(x[b : b + 8])) for b in range(0, 21, 8)])
    torch.testing.assert_close(k(x), expected)


def test_loads_are_copies_and_in_place_ops_rebind():
    @eager
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            value = x[tile]
            value += 1  # rebinding: x must not change
            out[tile] = value
        return out

    x = torch.zeros(6)
    assert k(x).tolist() == [1.0] * 6
    assert x.tolist() == [0.0] * 6


def test_tile_outside_its_loop_is_an_error():
    @eager
    def k(x):
        for tile in hl.tile(x.size(0)):
            x[tile] = 1
        return x[tile]

    with pytest.raises(exc.IncorrectTileUsage):
        k(torch.zeros(4))


def test_device_ops_on_host_are_errors():
    @eager
    def k(x):
        y = hl.zeros([4])
        for tile in hl.tile(x.size(0)):
            x[tile] = y[tile]
        return x

    with pytest.raises(exc.DeviceAPIOnHost):
        k(torch.zeros(4))


# -- masks and indexing ----------------------------------------------------------------------------


def test_load_with_extra_mask_reads_zero_and_clamps_out_of_range_lanes():
    @eager
    def shifted(x, shift: int):
        out = torch.empty_like(x)
        n = x.size(0)
        for tile in hl.tile(n, block_size=4):
            source = tile.index + shift
            out[tile] = hl.load(x, [source], extra_mask=source < n)
        return out

    x = torch.arange(1.0, 11.0)
    torch.testing.assert_close(shifted(x, 3), torch.cat([x[3:], torch.zeros(3)]))
    torch.testing.assert_close(shifted(x, 100), torch.zeros(10))


def test_store_with_extra_mask_writes_only_masked_lanes():
    @eager
    def k(x):
        out = torch.zeros_like(x)
        for tile in hl.tile(x.size(0)):
            values = x[tile]
            hl.store(out, [tile], values, extra_mask=values > 0)
        return out

    x = torch.randn(33)
    torch.testing.assert_close(k(x), torch.where(x > 0, x, 0.0))


def _separated_index_tensors(x, a, b):
    out = torch.empty([x.size(0), a.size(0), x.size(2)], dtype=x.dtype)
    for tile_m, tile_i, tile_k in hl.tile([x.size(0), a.size(0), x.size(2)]):
        out[tile_m, tile_i, tile_k] = x[tile_m, a[tile_i], tile_k, b[tile_i]]
    return out


def test_index_tensors_follow_helion_placement():
    # index tensors broadcast together and their dims sit where the first of them is, even with a
    # tile between them (torch would move them to the front)
    x = torch.randn(3, 5, 4, 6)
    a = torch.tensor([4, 0, 2, 2, 1])
    b = torch.tensor([5, 1, 0, 3, 3])
    expected = x[:, a, :, b].permute(1, 0, 2)
    torch.testing.assert_close(eager(_separated_index_tensors)(x, a, b), expected)
    compiled = helion.kernel(_separated_index_tensors, autotune_effort="none", backend="ref")
    bound = compiled.bind((x, a, b))
    torch.testing.assert_close(
        bound.compile_config(bound.config_spec.default_config())(x, a, b), expected
    )


def test_gather_with_two_index_tensors_and_a_tile_between():
    @eager
    def k(x, rows):
        out = torch.empty([rows.size(0), x.size(1)], dtype=x.dtype)
        for tile_r, tile_c in hl.tile([rows.size(0), x.size(1)]):
            out[tile_r, tile_c] = hl.load(x, [rows[tile_r], tile_c])
        return out

    x = torch.randn(6, 4)
    rows = torch.tensor([5, 5, 0])
    torch.testing.assert_close(k(x, rows), x[rows])


# -- atomics ------------------------------------------------------------------------------------


def test_atomic_add_accumulates_duplicates_and_returns_old_values():
    @eager
    def k(idx, values):
        out = torch.zeros([4])
        olds = torch.empty_like(values)
        for tile in hl.tile(idx.size(0)):
            olds[tile] = hl.atomic_add(out, [idx[tile]], values[tile])
        return out, olds

    idx = torch.tensor([1, 3, 1, 1, 0])
    values = torch.tensor([1.0, 2.0, 10.0, 100.0, 5.0])
    out, olds = k(idx, values)
    assert out.tolist() == [5.0, 111.0, 0.0, 2.0]
    # lanes hitting one element see the earlier lanes' writes
    assert olds.tolist() == [0.0, 0.0, 1.0, 11.0, 0.0]


def test_atomic_add_scalar_value_histogram():
    @eager
    def k(bins, num_bins: int):
        counts = torch.zeros([num_bins], dtype=torch.int32)
        for tile in hl.tile(bins.size(0), block_size=16):
            hl.atomic_add(counts, [bins[tile]], 1)
        return counts

    bins = torch.randint(0, 7, (100,))
    assert k(bins, 7).tolist() == torch.bincount(bins, minlength=7).tolist()


def test_atomic_max_min_xchg_cas_and_bitwise():
    @eager
    def k(idx, values):
        hi = torch.full([3], -100, dtype=torch.int32)
        lo = torch.full([3], 100, dtype=torch.int32)
        swapped = torch.zeros([3], dtype=torch.int32)
        cas = torch.zeros([3], dtype=torch.int32)
        bits = torch.zeros([3], dtype=torch.int32)
        old_cas = torch.empty_like(values)
        for tile in hl.tile(idx.size(0)):
            where = idx[tile]
            v = values[tile]
            hl.atomic_max(hi, [where], v)
            hl.atomic_min(lo, [where], v)
            hl.atomic_xchg(swapped, [where], v)
            old_cas[tile] = hl.atomic_cas(cas, [where], 0, v)
            hl.atomic_or(bits, [where], v)
        return hi, lo, swapped, cas, bits, old_cas

    idx = torch.tensor([0, 0, 2, 0])
    values = torch.tensor([4, -2, 9, 8], dtype=torch.int32)
    hi, lo, swapped, cas, bits, old_cas = k(idx, values)
    assert hi.tolist() == [8, -100, 9]
    assert lo.tolist() == [-2, 100, 9]
    assert swapped.tolist() == [8, 0, 9]
    assert cas.tolist() == [4, 0, 9]  # only the first lane at index 0 finds the expected 0
    assert old_cas.tolist() == [0, 4, 0, 4]
    assert bits.tolist() == [4 | -2 | 8, 0, 9]


# -- matmul -------------------------------------------------------------------------------------


def test_addmm_mixed_dtypes_accumulates_in_float32():
    @eager
    def k(a, b):
        out = torch.empty([a.size(0), b.size(1)], dtype=torch.float32)
        for tile_m, tile_n in hl.tile([a.size(0), b.size(1)]):
            acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
            for tile_k in hl.tile(a.size(1), block_size=16):
                acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
            out[tile_m, tile_n] = acc
        return out

    a = torch.randn(19, 50, dtype=torch.float16)
    b = torch.randn(50, 7, dtype=torch.float16)
    torch.testing.assert_close(k(a, b), a.float() @ b.float(), atol=1e-3, rtol=1e-3)


def test_dot_result_dtypes():
    @eager
    def k(a, b, i, j):
        out = torch.empty([6], dtype=torch.int64)
        for _ in hl.grid(1):
            dtypes = [
                hl.dot(a, b).dtype,
                hl.dot(i, j).dtype,
                hl.dot(a, b, out_dtype=torch.float16).dtype,
                hl.dot(a, b, acc=hl.zeros([4, 4], dtype=torch.float16)).dtype,
                torch.mm(a, b).dtype,
                (a @ b).dtype,
            ]
            codes = {torch.float32: 0, torch.int32: 1, torch.float16: 2}
            for n, d in enumerate(dtypes):
                out[n] = codes[d]
        return out

    a = torch.randn(4, 8, dtype=torch.float16)
    b = torch.randn(8, 4, dtype=torch.float16)
    i = torch.randint(-5, 5, (4, 8), dtype=torch.int8)
    j = torch.randint(-5, 5, (8, 4), dtype=torch.int8)
    assert k(a, b, i, j).tolist() == [0, 1, 2, 2, 2, 2]


def test_int8_dot_is_exact():
    @eager
    def k(i, j):
        out = torch.empty([i.size(0), j.size(1)], dtype=torch.int32)
        for tile_m, tile_n in hl.tile([i.size(0), j.size(1)]):
            out[tile_m, tile_n] = hl.dot(i[tile_m, :], j[:, tile_n])
        return out

    i = torch.randint(-128, 127, (5, 300), dtype=torch.int8)
    j = torch.randint(-128, 127, (300, 3), dtype=torch.int8)
    assert torch.equal(k(i, j), (i.long() @ j.long()).int())


def test_bmm_with_out_dtype_and_baddbmm():
    @eager
    def k(q, kt, v):
        out = torch.empty([q.size(0), q.size(1), v.size(2)], dtype=torch.float32)
        for tile_b, tile_m in hl.tile([q.size(0), q.size(1)]):
            scores = torch.bmm(q[tile_b, tile_m, :], kt[tile_b, :, :], torch.float32)
            acc = hl.zeros([tile_b, tile_m, v.size(2)])
            out[tile_b, tile_m, :] = torch.baddbmm(acc, scores.to(v.dtype), v[tile_b, :, :])
        return out

    q = torch.randn(2, 5, 8, dtype=torch.float16)
    kt = torch.randn(2, 8, 6, dtype=torch.float16)
    v = torch.randn(2, 6, 3, dtype=torch.float16)
    expected = torch.bmm(torch.bmm(q.float(), kt.float()).half().float(), v.float())
    torch.testing.assert_close(k(q, kt, v), expected, atol=1e-2, rtol=1e-2)


# -- debugging --------------------------------------------------------------------------------------


def test_print_works_in_device_code(capsys):
    @eager
    def k(x):
        for tile in hl.tile(x.size(0), block_size=2):
            print("tile", tile.begin, tile.end)
            hl.device_print("values", x[tile].sum())
        return x

    k(torch.ones(3))
    out = capsys.readouterr().out
    assert "tile 0 2" in out and "tile 2 3" in out
    assert "values tensor(2.)" in out and "values tensor(1.)" in out


def test_breakpoint_reaches_the_breakpoint_hook(monkeypatch):
    hits = []
    monkeypatch.setattr(sys, "breakpointhook", lambda *a, **kw: hits.append("hook"))

    @eager
    def k(x):
        for tile in hl.tile(x.size(0), block_size=2):
            breakpoint()
            hl.breakpoint()
            x[tile] = 1
        return x

    k(torch.zeros(4))
    assert hits == ["hook"] * 4


def test_breakpoint_without_eager_mode_is_an_error():
    @helion.kernel(autotune_effort="none", backend="ref")
    def k(x):
        for tile in hl.tile(x.size(0)):
            breakpoint()
            x[tile] = 1
        return x

    with pytest.raises(exc.BreakpointInDeviceLoopRequiresInterpret):
        k.bind((torch.zeros(4),))


# -- settings ---------------------------------------------------------------------------------------


def test_helion_interpret_env_selects_eager_mode(monkeypatch):
    monkeypatch.setenv("HELION_INTERPRET", "1")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)

    @helion.kernel
    def k(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            breakpoint  # noqa: B018 - plain Python name lookups are fine in eager mode
            out[tile] = x[tile] * 2
        return out

    assert k.settings.ref_mode == EAGER
    x = torch.randn(9)
    torch.testing.assert_close(k(x), x * 2)


def test_triton_and_helion_interpret_together_are_incompatible(monkeypatch):
    monkeypatch.setenv("HELION_INTERPRET", "1")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(exc.IncompatibleInterpretModes):

        @helion.kernel
        def k(x):
            for tile in hl.tile(x.size(0)):
                x[tile] = 1
            return x

        k(torch.zeros(2))


def test_both_interpret_modes_at_call_time_are_incompatible(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("HELION_INTERPRET", raising=False)

    @eager
    def k(x):
        for tile in hl.tile(x.size(0)):
            x[tile] = 1
        return x

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("HELION_INTERPRET", "1")
    with pytest.raises(exc.IncompatibleInterpretModes):
        k(torch.zeros(2))


def test_triton_interpret_alone_leaves_eager_runs_and_run_ref_working(monkeypatch):
    """TRITON_INTERPRET=1 is how Triton kernels run on CPU; comparing them with run_ref() (or an
    eager kernel) then must work: only both interpret modes together clash (found by
    exploratory testing: run_ref raised IncompatibleInterpretModes, saying both were set)."""
    monkeypatch.delenv("HELION_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")

    def add(x, y):
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = x[tile] + y[tile]
        return out

    x, y = torch.randn(5, 7), torch.randn(5, 7)
    torch.testing.assert_close(eager(add)(x, y), x + y)
    bound = helion.kernel(add, autotune_effort="none").bind((x, y))
    torch.testing.assert_close(bound.run_ref(x, y), x + y)


def test_tunables_and_specialize_in_eager_mode():
    from helion.autotuner import EnumFragment
    from helion.autotuner import PowerOfTwoFragment

    @eager
    def k(x):
        factor = hl.register_tunable("factor", PowerOfTwoFragment(2, 16, 4))
        mode = hl.register_tunable("mode", EnumFragment(("a", "b")))
        n = hl.specialize(x.size(0))
        out = torch.empty_like(x)
        for tile in hl.tile(n):
            out[tile] = x[tile] * factor + (1 if mode == "a" else 0)
        return out

    x = torch.randn(5)
    torch.testing.assert_close(k(x), x * 4 + 1)
    configured = helion.kernel(k.fn, ref_mode=EAGER, config=helion.Config(factor=8, mode="b"))
    torch.testing.assert_close(configured(x), x * 8)


def test_constexpr_arguments_are_unwrapped():
    @eager
    def k(x, scale: hl.constexpr):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] * scale
        return out

    x = torch.randn(4)
    torch.testing.assert_close(k(x, hl.constexpr(3.0)), x * 3)


def test_cumsum_and_reverse_scan():
    @eager
    def k(x):
        forward = torch.empty_like(x)
        backward = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            row = x[tile, :]
            forward[tile, :] = hl.cumsum(row, 1)
            backward[tile, :] = hl.cumsum(row, 1, reverse=True)
        return forward, backward

    x = torch.randn(3, 6)
    forward, backward = k(x)
    torch.testing.assert_close(forward, x.cumsum(1))
    torch.testing.assert_close(backward, x.flip(1).cumsum(1).flip(1))


def test_modes_are_restored_after_an_error():
    @eager
    def k(x):
        for _tile in hl.tile(x.size(0)):
            raise ValueError("boom")
        return x

    with pytest.raises(ValueError, match="boom"):
        k(torch.zeros(3))
    assert current_mode() is None
    assert not torch._C._is_torch_function_mode_enabled()
    assert (torch.zeros(2) + 1).tolist() == [1.0, 1.0]


def test_eager_matches_the_ref_backend():
    x, weight = torch.randn(13, 150), torch.randn(150)
    compiled = helion.kernel(_scaled_minus_max, autotune_effort="none", backend="ref")
    bound = compiled.bind((x, weight))
    expected = bound.compile_config(bound.config_spec.default_config())(x, weight)
    torch.testing.assert_close(eager(_scaled_minus_max)(x, weight), expected)
    scaled = x * weight
    torch.testing.assert_close(expected, scaled - scaled.amax(1, keepdim=True))


def _scaled_minus_max(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    chunk = hl.register_block_size(n)
    for tile_m in hl.tile(m):
        peak = hl.full([tile_m], float("-inf"))
        for tile_n in hl.tile(n, block_size=chunk):
            peak = torch.maximum(peak, (x[tile_m, tile_n] * weight[tile_n]).amax(dim=1))
        for tile_n in hl.tile(n, block_size=chunk):
            out[tile_m, tile_n] = x[tile_m, tile_n] * weight[tile_n] - peak[:, None]
    return out


def test_ref_tile_repr_and_attributes():
    tile = RefTile(4, 7, 4, 0, 7, torch.int32, torch.device("cpu"))
    assert repr(tile) == "RefTile(4:7, block_size=4)"
    assert (tile.id, tile.count, tile.extent) == (1, 2, 3)
    assert tile.index.tolist() == [4, 5, 6]
    with pytest.raises(exc.IncorrectTileUsage):
        bool(tile)
