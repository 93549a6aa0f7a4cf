"""In-kernel random numbers on the ref backend and in eager mode: hl.rand, hl.randint, hl.rand4x
and torch.rand / randn / rand_like / randn_like in device code.

The expected values come from `helion.language.philox` on the host (checked here against the
Random123 known-answer vectors); the Triton side is in helion-triton's test_random_triton.py.
"""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.language import philox


def _ref(fn) -> helion.Kernel:
    return helion.kernel(fn, backend="ref")


def _eager(fn) -> helion.Kernel:
    return helion.kernel(fn, ref_mode=helion.RefMode.EAGER)


def _configs(bound, count: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    return [bound.config_spec.default_config()] + [
        bound.config_spec.random_config(rng) for _ in range(count)
    ]


def _flat_offsets(shape) -> torch.Tensor:
    numel = 1
    for size in shape:
        numel *= size
    return torch.arange(numel, dtype=torch.int32).reshape(shape)


# -- the generator itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "counter, key, expected",
    [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        (
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
        ),
    ],
)
def test_philox_known_answers(counter, key, expected):
    def words(values):
        return tuple(torch.tensor([v], dtype=torch.int64) for v in values)

    result = philox.philox_rounds(words(counter), words(key))
    assert tuple(int(w) for w in result) == expected


def test_philox_seed_and_offset_words():
    offsets = torch.tensor([0, 1, 7, 2**31 - 1], dtype=torch.int32)
    seed = 0x1234_5678_9ABC
    c = philox.philox4x32(seed, offsets)
    direct = philox.philox_rounds(
        (offsets.long() & philox.MASK32, *(torch.zeros(4, dtype=torch.int64),) * 3),
        (torch.tensor(seed & philox.MASK32), torch.tensor(seed >> 32)),
    )
    assert all(torch.equal(a, b) for a, b in zip(c, direct, strict=True))
    # int64 offsets below 2**32 are the same counter as int32 ones; above, the high word counts
    assert torch.equal(philox.uniform(seed, offsets.long()), philox.uniform(seed, offsets))
    high = philox.philox4x32(seed, torch.tensor([2**32 + 5]))[0]
    assert int(high) != int(philox.philox4x32(seed, torch.tensor([5]))[0])


def test_uniform_normal_randint_statistics():
    offsets = torch.arange(200_000, dtype=torch.int32)
    u = philox.uniform(2024, offsets)
    assert u.dtype == torch.float32 and u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.005
    assert abs((u < 0.25).float().mean().item() - 0.25) < 0.005
    counts = torch.histc(u, bins=10, min=0.0, max=1.0)
    assert (counts - 20_000).abs().max() < 1_000
    n = philox.normal(2024, offsets)
    assert abs(n.mean().item()) < 0.01 and abs(n.std().item() - 1.0) < 0.01
    r = philox.randint(2024, offsets, -3, 11)
    assert r.dtype == torch.int32 and r.min() == -3 and r.max() == 10
    assert (torch.bincount(r + 3).float() / len(r) - 1 / 14).abs().max() < 0.005
    four = philox.uniform4x(2024, offsets[:1000])
    assert torch.equal(four[0], u[:1000])
    assert len({round(float(w.mean()), 2) for w in four}) >= 1 and not torch.equal(four[1], four[2])
    assert not torch.equal(philox.uniform(2025, offsets[:1000]), u[:1000])


# -- hl.rand and friends on the ref backend ---------------------------------------------------------------


def rand_2d(x: torch.Tensor, seed: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.shape):
        out[tile_m, tile_n] = hl.rand([tile_m, tile_n], seed)
    return out


def test_rand_is_row_major_philox_under_every_config():
    x = torch.empty(23, 45)
    bound = _ref(rand_2d).bind((x, 7))
    expected = philox.uniform(7, _flat_offsets((23, 45)))
    for config in _configs(bound, 5):
        assert torch.equal(bound.compile_config(config)(x, 7), expected), config
    other = bound.compile_config(bound.config_spec.default_config())(x, 8)
    assert not torch.equal(other, expected)


def rand_3d_nested(x: torch.Tensor, seed: int) -> torch.Tensor:
    a, b, c = x.shape
    out = torch.empty_like(x)
    for tile_a, tile_b in hl.tile([a, b]):
        for tile_c in hl.tile(c):
            out[tile_a, tile_b, tile_c] = x[tile_a, tile_b, tile_c] + hl.rand(
                [tile_a, tile_b, tile_c], seed
            )
    return out


def test_rand_3d_over_nested_loops():
    x = torch.randn(3, 5, 19)
    bound = _ref(rand_3d_nested).bind((x, 11))
    expected = x + philox.uniform(11, _flat_offsets((3, 5, 19)))
    for config in _configs(bound, 4):
        assert torch.equal(bound.compile_config(config)(x, 11), expected), config


def rand_offset_range(x: torch.Tensor, seed: int, start: int, stop: int) -> torch.Tensor:
    m, _n = x.shape
    out = torch.zeros_like(x)
    for tile_m in hl.tile(m):
        for tile_n in hl.tile(start, stop):
            out[tile_m, tile_n] = hl.rand([tile_m, tile_n], seed)
    return out


def test_rand_extent_is_the_loop_end():
    # a tile of hl.tile(start, stop) counts its absolute indices, with `stop` as its extent, and
    # `stop` may be a runtime scalar
    x = torch.empty(7, 40)
    kernel = _ref(rand_offset_range)
    expected = torch.zeros(7, 40)
    rows = torch.arange(7, dtype=torch.int64)[:, None]
    cols = torch.arange(9, 33, dtype=torch.int64)[None, :]
    expected[:, 9:33] = philox.uniform(3, rows * 33 + cols)
    bound = kernel.bind((x, 3, 9, 33))
    for config in _configs(bound, 3):
        assert torch.equal(bound.compile_config(config)(x, 3, 9, 33), expected), config


def randint_and_rand4x(x: torch.Tensor, seed: int) -> tuple[torch.Tensor, ...]:
    m, n = x.shape
    ints = torch.empty([m, n], dtype=torch.int32)
    lanes = [torch.empty_like(x) for _ in range(4)]
    for tile_m, tile_n in hl.tile([m, n]):
        ints[tile_m, tile_n] = hl.randint([tile_m, tile_n], -5, 1000, seed)
        offsets = tile_m.index[:, None] * 1000 + tile_n.index[None, :]
        a, b, c, d = hl.rand4x(seed, offsets)
        lanes[0][tile_m, tile_n] = a
        lanes[1][tile_m, tile_n] = b
        lanes[2][tile_m, tile_n] = c
        lanes[3][tile_m, tile_n] = d
    return ints, *lanes


def test_randint_and_rand4x():
    x = torch.empty(9, 21)
    offsets = (
        torch.arange(9, dtype=torch.int32)[:, None] * 1000
        + torch.arange(21, dtype=torch.int32)[None, :]
    )
    expected = (
        philox.randint(42, _flat_offsets((9, 21)), -5, 1000),
        *philox.uniform4x(42, offsets),
    )
    bound = _ref(randint_and_rand4x).bind((x, 42))
    for config in _configs(bound, 3):
        result = bound.compile_config(config)(x, 42)
        for got, want in zip(result, expected, strict=True):
            assert torch.equal(got, want), config
    result = _eager(randint_and_rand4x)(x, 42)
    for got, want in zip(result, expected, strict=True):
        assert torch.equal(got, want)


def rand_seed_tensor(x: torch.Tensor, seed: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.shape[0]):
        out[tile] = hl.rand([tile], seed)
    return out


@pytest.mark.parametrize(
    "seed", [torch.tensor(1234), torch.tensor([1234], dtype=torch.int32), torch.tensor([[1234]])]
)
def test_seed_as_a_tensor_argument(seed):
    x = torch.empty(77)
    expected = philox.uniform(1234, torch.arange(77, dtype=torch.int32))
    bound = _ref(rand_seed_tensor).bind((x, seed))
    assert torch.equal(bound.compile_config(bound.config_spec.default_config())(x, seed), expected)
    assert torch.equal(_eager(rand_seed_tensor)(x, seed), expected)
    # the seed is read at run time: another value needs no new trace
    other = seed + 1
    assert torch.equal(
        bound.compile_config(bound.config_spec.default_config())(x, other),
        philox.uniform(1235, torch.arange(77, dtype=torch.int32)),
    )


def rand_explicit_offsets(x: torch.Tensor, seed: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.shape[0]):
        out[tile] = hl.rand([tile], seed, offsets=tile.index * 3 + 1)
    return out


def test_rand_explicit_offsets():
    x = torch.empty(50)
    expected = philox.uniform(5, torch.arange(50, dtype=torch.int32) * 3 + 1)
    bound = _ref(rand_explicit_offsets).bind((x, 5))
    assert torch.equal(bound.compile_config(bound.config_spec.default_config())(x, 5), expected)
    assert torch.equal(_eager(rand_explicit_offsets)(x, 5), expected)


def rand_row_dropout(x: torch.Tensor, seed: int) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        keep = hl.rand([tile_m, n], seed) > 0.5
        out[tile_m, :] = torch.where(keep, row, 0.0)
    return out


def test_rand_over_a_full_row():
    x = torch.randn(13, 70)
    expected = torch.where(philox.uniform(9, _flat_offsets((13, 70))) > 0.5, x, 0.0)
    bound = _ref(rand_row_dropout).bind((x, 9))
    for config in _configs(bound, 3):
        assert torch.equal(bound.compile_config(config)(x, 9), expected), config
    assert torch.equal(_eager(rand_row_dropout)(x, 9), expected)


# -- eager mode agrees with the ref backend, whatever the block sizes ------------------------------------------


def rand_fixed_blocks(
    x: torch.Tensor, seed: int, bm: hl.constexpr, bn: hl.constexpr
) -> tuple[torch.Tensor, ...]:
    m, n = x.shape
    uniform = torch.empty_like(x)
    normal = torch.empty_like(x)
    ints = torch.empty([m, n], dtype=torch.int32)
    for tile_m, tile_n in hl.tile([m, n], block_size=[bm, bn]):
        uniform[tile_m, tile_n] = hl.rand([tile_m, tile_n], seed)
        ints[tile_m, tile_n] = hl.randint([tile_m, tile_n], 0, 7, seed)
        normal[tile_m, tile_n] = torch.randn_like(x[tile_m, tile_n]) + torch.rand([tile_m, tile_n])
    return uniform, ints, normal


def test_eager_matches_ref_for_any_block_sizes():
    x = torch.randn(19, 29)
    results = []
    for bm, bn in ((4, 8), (16, 1), (32, 32)):
        torch.manual_seed(5)
        results.append(
            helion.kernel(rand_fixed_blocks, backend="ref", config=helion.Config())(x, 3, bm, bn)
        )
        torch.manual_seed(5)
        results.append(_eager(rand_fixed_blocks)(x, 3, bm, bn))
    for result in results[1:]:
        for got, want in zip(result, results[0], strict=True):
            assert torch.equal(got, want)
    assert torch.equal(results[0][0], philox.uniform(3, _flat_offsets((19, 29))))
    assert torch.equal(results[0][1], philox.randint(3, _flat_offsets((19, 29)), 0, 7))


# -- torch.rand & co. in device code ---------------------------------------------------------------------------


def torch_random(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a = torch.empty_like(x)
    b = torch.empty_like(x)
    c = torch.empty(x.shape, dtype=torch.float16)
    for tile_m, tile_n in hl.tile(x.shape):
        a[tile_m, tile_n] = torch.rand_like(x[tile_m, tile_n])
        b[tile_m, tile_n] = torch.randn([tile_m, tile_n])
        c[tile_m, tile_n] = torch.rand([tile_m, tile_n], dtype=torch.float16)
    return a, b, c


def test_torch_rand_follows_the_host_generator():
    x = torch.empty(21, 34)
    bound = _ref(torch_random).bind((x,))
    runs = []
    for config in _configs(bound, 3):
        torch.manual_seed(123)
        runs.append(bound.compile_config(config)(x))
    for run in runs[1:]:
        assert all(
            torch.equal(a, b) for a, b in zip(run, runs[0], strict=True)
        )  # independent of the config
    a, b, c = runs[0]
    assert a.min() >= 0 and a.max() < 1 and abs(a.mean().item() - 0.5) < 0.05
    assert abs(b.mean().item()) < 0.15 and abs(b.std().item() - 1) < 0.15
    assert c.dtype == torch.float16
    assert not torch.equal(a, c.float())  # two call sites draw independent streams
    run = bound.compile_config(bound.config_spec.default_config())
    again = run(x)  # the generator has moved on
    assert not torch.equal(again[0], a)
    torch.manual_seed(123)
    eager = _eager(torch_random)(x)
    assert all(torch.equal(e, r) for e, r in zip(eager, runs[0], strict=True))


def test_torch_rand_seed_comes_from_the_generator_state():
    x = torch.empty(10, 10)
    kernel = helion.kernel(torch_random, backend="ref", config=helion.Config(block_sizes=[4, 8]))
    torch.manual_seed(1)
    first = kernel(x)[0]
    torch.manual_seed(1)
    state = torch.random.get_rng_state()
    second = kernel(x)[0]
    assert torch.equal(first, second)
    torch.random.set_rng_state(state)
    seed = philox.draw_call_seed()  # what the second launch drew
    ir = kernel.bind((x,)).ir
    assert ir.rng_seed is not None and ir.rng_seed.index == 4  # after x and the three outputs
    salts = [n.inputs[1] for n in ir.walk() if n.inputs and n.inputs[0] is ir.rng_seed.value]
    assert len(salts) == 3 and len(set(salts)) == 3  # one key per call site
    assert torch.equal(second, philox.uniform(seed + salts[0], _flat_offsets((10, 10))))


def rand_in_a_row(x: torch.Tensor) -> torch.Tensor:
    m, _n = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        out[tile_m, :] = row * torch.rand_like(row)
    return out


def test_rand_like_of_a_full_row():
    x = torch.randn(11, 37)
    bound = _ref(rand_in_a_row).bind((x,))
    runs = []
    for config in _configs(bound, 3):
        torch.manual_seed(0)
        runs.append(bound.compile_config(config)(x))
    assert all(torch.equal(r, runs[0]) for r in runs)
    torch.manual_seed(0)
    assert torch.equal(_eager(rand_in_a_row)(x), runs[0])


def test_autotuning_keeps_the_caller_generator():
    x = torch.randn(40)

    def add_noise(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.shape[0]):
            out[tile] = x[tile] + torch.rand_like(x[tile])
        return out

    configs = [helion.Config(block_sizes=[8]), helion.Config(block_sizes=[32])]
    kernel = helion.kernel(add_noise, backend="ref", configs=configs)
    torch.manual_seed(0)
    tuned_call = kernel(x)  # benchmarks both configs (their outputs must agree), then runs
    torch.manual_seed(0)
    assert torch.equal(kernel(x), tuned_call)


def test_autotuning_compares_random_kernels_from_one_generator_state():
    # in-process candidates run one after the other: without a common generator state for the
    # accuracy runs, every config of a torch.rand kernel would differ from the baseline
    def add_noise(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.shape[0]):
            out[tile] = x[tile] + torch.rand_like(x[tile])
        return out

    x = torch.randn(40)
    kernel = helion.kernel(add_noise, backend="ref", autotune_precompile=False)
    config = kernel.bind((x,)).autotune((x,), effort="quick", max_evaluations=4)
    assert isinstance(config, helion.Config)


# -- errors -----------------------------------------------------------------------------------------------------


def test_errors():
    def float_seed(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.shape[0]):
            out[tile] = hl.rand([tile], x[tile])
        return out

    def bad_range(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.shape, dtype=torch.int32)
        for tile in hl.tile(x.shape[0]):
            out[tile] = hl.randint([tile], 5, 5, 0)
        return out

    def with_generator(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.shape[0]):
            out[tile] = torch.rand_like(x[tile], generator=torch.Generator())
        return out

    def on_host(x: torch.Tensor) -> torch.Tensor:
        r = hl.rand([4], 0)
        out = torch.empty_like(x)
        for tile in hl.tile(x.shape[0]):
            out[tile] = x[tile] + r
        return out

    x = torch.randn(16)
    with pytest.raises(exc.TypeInferenceError, match="seed must be an integer"):
        _ref(float_seed).bind((x,))
    with pytest.raises(exc.TypeInferenceError, match="low < high"):
        _ref(bad_range).bind((x,))
    with pytest.raises(exc.NotAllowedOnDevice, match="generator"):
        _ref(with_generator).bind((x,))
    with pytest.raises(exc.DeviceAPIOnHost):
        _ref(on_host).bind((x,))
    for fn, error in (
        (float_seed, exc.TypeInferenceError),
        (bad_range, exc.TypeInferenceError),
        (with_generator, exc.NotAllowedOnDevice),
        (on_host, exc.DeviceAPIOnHost),
    ):
        with pytest.raises(error):
            _eager(fn)(x)
