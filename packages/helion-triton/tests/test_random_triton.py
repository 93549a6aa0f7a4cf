"""Random numbers on the Triton backend: `tl.rand` & co. against the ref backend's Philox.

The ref backend (`helion.language.philox`) reimplements Triton's Philox4x32-10 in torch integer
arithmetic, so uniforms and integers must be bit-identical, and normals equal up to the float
rounding of log/sqrt/cos, for every config. On CPU this runs Triton's own `tl.rand` through the
interpreter (slow: a few hundred interpreted Philox evaluations per test), so inputs are small.
"""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.language import philox

RANDOM_CONFIGS = 3


def _configs(bound, count: int = RANDOM_CONFIGS, seed: int = 0) -> list:
    rng = random.Random(seed)
    return [bound.config_spec.default_config()] + [
        bound.config_spec.random_config(rng) for _ in range(count)
    ]


def _flat_offsets(shape, device) -> torch.Tensor:
    return torch.arange(shape[0] * shape[1], dtype=torch.int32, device=device).reshape(shape)


def all_generators(x: torch.Tensor, seed: int) -> tuple[torch.Tensor, ...]:
    m, n = x.shape
    uniform = torch.empty_like(x)
    ints = torch.empty([m, n], dtype=torch.int32, device=x.device)
    lane3 = torch.empty_like(x)
    wide = torch.empty_like(x)
    for tile_m, tile_n in hl.tile([m, n]):
        uniform[tile_m, tile_n] = hl.rand([tile_m, tile_n], seed)
        ints[tile_m, tile_n] = hl.randint([tile_m, tile_n], -(2**31), 2**31, seed)
        offsets = tile_m.index[:, None] * 100 + tile_n.index[None, :]
        _, _, _, d = hl.rand4x(seed, offsets)
        lane3[tile_m, tile_n] = d
        # int64 offsets: the high word is the second Philox counter word
        wide[tile_m, tile_n] = hl.rand(
            [tile_m, tile_n], seed, offsets=offsets.to(torch.int64) + 2**32
        )
    return uniform, ints, lane3, wide


def test_hl_rand_bit_identical_to_ref_for_any_config(device):
    x = torch.empty(5, 23, device=device)
    seed = 2**40 + 977  # a key with both words set
    flat = _flat_offsets((5, 23), device)
    offsets = (
        torch.arange(5, device=device)[:, None] * 100 + torch.arange(23, device=device)[None, :]
    ).int()
    expected = (
        philox.uniform(seed, flat),
        philox.randint(seed, flat, -(2**31), 2**31),
        philox.uniform4x(seed, offsets)[3],
        philox.uniform(seed, offsets.long() + 2**32),
    )
    bound = helion.kernel(all_generators, backend="triton").bind((x, seed))
    assert "tl.rand(" in bound.to_code(bound.config_spec.default_config())
    for config in _configs(bound):
        result = bound.compile_config(config)(x, seed)
        for got, want in zip(result, expected, strict=True):
            assert torch.equal(got, want), config
    ref = helion.kernel(all_generators, backend="ref").bind((x, seed))
    ref_result = ref.compile_config(ref.config_spec.default_config())(x, seed)
    assert all(torch.equal(a, b) for a, b in zip(ref_result, expected, strict=True))


def torch_random(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a = torch.empty_like(x)
    b = torch.empty_like(x)
    c = torch.empty(x.shape, dtype=torch.float16, device=x.device)
    for tile_m, tile_n in hl.tile(x.shape):
        a[tile_m, tile_n] = x[tile_m, tile_n] + torch.rand_like(x[tile_m, tile_n])
        b[tile_m, tile_n] = torch.randn([tile_m, tile_n])
        c[tile_m, tile_n] = torch.rand([tile_m, tile_n], dtype=torch.float16)
    return a, b, c


def test_torch_rand_in_device_code_matches_ref(device):
    x = torch.randn(6, 19, device=device)
    ref = helion.kernel(torch_random, backend="ref").bind((x,))
    torch.manual_seed(7)
    expected = ref.compile_config(ref.config_spec.default_config())(x)
    bound = helion.kernel(torch_random, backend="triton").bind((x,))
    for config in _configs(bound, seed=1):
        torch.manual_seed(7)
        a, b, c = bound.compile_config(config)(x)
        assert torch.equal(a, expected[0]), config
        torch.testing.assert_close(b, expected[1], atol=1e-5, rtol=1e-5)
        assert torch.equal(c, expected[2]), config
    a2 = bound.compile_config(bound.config_spec.default_config())(x)[0]
    assert not torch.equal(a2, expected[0])  # the next call draws a new seed


def rand_seed_tensor(x: torch.Tensor, seed: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.shape[0]):
        out[tile] = hl.rand([tile], seed)
    return out


@pytest.mark.parametrize("dtype, shape", [(torch.int32, (1,)), (torch.int64, ())])
def test_seed_as_a_tensor(device, dtype, shape):
    x = torch.empty(45, device=device)
    bound = helion.kernel(rand_seed_tensor, backend="triton").bind(
        (x, torch.zeros(shape, dtype=dtype, device=device))
    )
    run = bound.compile_config(bound.config_spec.default_config())
    for value in (3, -9, 123456):
        seed = torch.full(shape, value, dtype=dtype, device=device)
        expected = philox.uniform(value, torch.arange(45, dtype=torch.int32, device=device))
        assert torch.equal(run(x, seed), expected)


def row_noise(x: torch.Tensor) -> torch.Tensor:
    m, _n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        out[tile_m] = (row * torch.rand_like(row)).sum(-1)
    return out


def test_rand_like_of_a_row_under_looped_reductions(device):
    # a looped reduction recomputes the row chunk by chunk: the offsets follow the chunk
    x = torch.randn(4, 50, device=device)
    ref = helion.kernel(row_noise, backend="ref").bind((x,))
    torch.manual_seed(3)
    expected = ref.compile_config(ref.config_spec.default_config())(x)
    bound = helion.kernel(row_noise, backend="triton").bind((x,))
    default = bound.config_spec.default_config()
    for chunk in (None, 8, 32):
        config = helion.Config(**{**dict(default), "reduction_loops": [chunk]})
        torch.manual_seed(3)
        torch.testing.assert_close(bound.compile_config(config)(x), expected, atol=1e-5, rtol=1e-5)


def rand_1d(x: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    u = torch.empty_like(x)
    r = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    for tile in hl.tile(x.shape[0], block_size=1024):
        u[tile] = hl.rand([tile], seed)
        r[tile] = hl.randint([tile], 0, 10, seed)
    return u, r


def test_uniformity(device):
    x = torch.empty(3000, device=device)
    bound = helion.kernel(rand_1d, backend="triton").bind((x, 99))
    u, r = bound.compile_config(bound.config_spec.default_config())(x, 99)
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean().item() - 0.5) < 0.03
    assert (torch.histc(u.cpu(), bins=4, min=0, max=1) - 750).abs().max() < 100
    assert r.min() == 0 and r.max() == 9
    assert (torch.bincount(r.cpu().long(), minlength=10) - 300).abs().max() < 75


@pytest.mark.parametrize("backend", ["pallas", "cute"])
def test_other_backends_report_random_ops(backend):
    from helion import backends

    if backend not in {b.name for b in backends.list_backends()}:
        pytest.skip(f"the {backend} backend is not installed")
    x = torch.empty(16)
    with pytest.raises(exc.BackendUnsupported, match="random") as info:
        helion.kernel(rand_seed_tensor, backend=backend).bind((x, torch.tensor(1)))
    assert info.value.backend == backend and "hl.rand" in str(info.value)
