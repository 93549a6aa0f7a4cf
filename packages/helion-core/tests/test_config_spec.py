from __future__ import annotations

import math
import pickle
import random

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from helion import exc
from helion.autotuner.config_fragment import BlockSizeFragment
from helion.autotuner.config_fragment import BooleanFragment
from helion.autotuner.config_fragment import ConfigSpecFragment
from helion.autotuner.config_fragment import EnumFragment
from helion.autotuner.config_fragment import IntegerFragment
from helion.autotuner.config_fragment import ListOf
from helion.autotuner.config_fragment import NumThreadsFragment
from helion.autotuner.config_fragment import PermutationFragment
from helion.autotuner.config_fragment import PowerOfTwoFragment
from helion.autotuner.config_fragment import ReductionLoopFragment
from helion.autotuner.config_fragment import next_power_of_2
from helion.autotuner.config_spec import ConfigSpec
from helion.runtime.config import Config

# ---------------------------------------------------------------------------------------------
# Fragments
# ---------------------------------------------------------------------------------------------


def test_power_of_two_fragment() -> None:
    f = PowerOfTwoFragment(16, 256)
    assert f.default() == 16
    assert PowerOfTwoFragment(16, 256, 64).default() == 64
    assert f.all_values() == [16, 32, 64, 128, 256] and f.size() == 5
    assert f.is_valid(32) and not f.is_valid(48) and not f.is_valid(8) and not f.is_valid(True)
    assert f.clamp(48) in (32, 64) and f.clamp(1) == 16 and f.clamp(10**6) == 256
    assert sorted(f.neighbors(64)) == [32, 128]
    assert f.neighbors(16) == [32]
    assert sorted(f.neighbors(64, radius=2)) == [16, 32, 128, 256]
    assert f.encode(16) == [0.0] and f.encode(256) == [1.0]
    assert f.decode([0.49]) == 64 and f.decode([-3.0]) == 16 and f.decode([float("nan")]) == 16
    with pytest.raises(ValueError, match="not a power of two"):
        f.normalize(48)
    with pytest.raises(ValueError, match="outside"):
        f.normalize(512)


@pytest.mark.parametrize(
    ("factory", "fragment"),
    [
        (lambda: PowerOfTwoFragment(3, 16), "powers of two"),
        (lambda: PowerOfTwoFragment(32, 16), "greater than"),
        (lambda: PowerOfTwoFragment(1, 16, 5), "default_val"),
        (lambda: IntegerFragment(4, 1), "greater than"),
        (lambda: IntegerFragment(1, 4, 9), "outside"),
        (lambda: EnumFragment(()), "at least one"),
        (lambda: EnumFragment(("a", "b"), ("c",)), "subset"),
        (lambda: PermutationFragment(0), "n >= 1"),
        (lambda: ListOf(BooleanFragment(), -1), ">= 0"),
        (lambda: NumThreadsFragment(64, default_val=3), "default_val"),
    ],
)
def test_bad_fragments(factory, fragment: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=fragment):
        factory()


def test_fragment_bounds_must_be_concrete() -> None:
    import torch
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    sym = env.create_unbacked_symint()
    with pytest.raises(exc.ConfigSpecFragmentWithSymInt):
        PowerOfTwoFragment(1, sym)
    with pytest.raises(TypeError):
        IntegerFragment(1, "8")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ListOf(3, 2)  # type: ignore[arg-type]
    assert torch is not None


def test_integer_fragment() -> None:
    f = IntegerFragment(0, 4, 2)
    assert f.default() == 2 and f.size() == 5
    assert f.neighbors(0) == [1] and f.neighbors(2) == [1, 3]
    assert f.clamp(9) == 4 and f.clamp("x") == 2
    assert f.decode(f.encode(3)) == 3
    big = IntegerFragment(0, 10**9)
    assert big.all_values() is None and big.size() == 10**9 + 1
    assert big.decode(big.encode(123456789)) == 123456789


def test_enum_fragment_keeps_bools_and_ints_apart() -> None:
    f = EnumFragment((None, False, True))
    assert f.default() is None
    assert f.is_valid(False) and not f.is_valid(0) and not f.is_valid(1)
    assert f.normalize(True) is True
    with pytest.raises(ValueError):
        f.normalize(1)
    assert f.neighbors(None) == [False, True]
    assert f.encode(False) == [0.0, 1.0, 0.0]
    assert f.decode([0.1, 0.2, 0.9]) is True


def test_enum_search_choices() -> None:
    f = EnumFragment(
        ("pointer", "block_ptr", "tensor_descriptor"), ("pointer", "tensor_descriptor")
    )
    rng = random.Random(0)
    assert {f.random(rng) for _ in range(100)} == {"pointer", "tensor_descriptor"}
    assert f.is_valid("block_ptr")  # still accepted when written by hand
    assert f.neighbors("pointer") == ["tensor_descriptor"]
    assert f.decode([0.0, 1.0, 0.5]) == "tensor_descriptor"  # decode stays in the search set
    assert f.size() == 2


def test_boolean_fragment() -> None:
    f = BooleanFragment()
    assert f.default() is False and f.neighbors(False) == [True]
    assert f.encoded_dims == 1 and f.decode(f.encode(True)) is True
    assert f == BooleanFragment() and hash(f) == hash(BooleanFragment())


def test_block_size_fragment() -> None:
    f = BlockSizeFragment(16, None, None, size_hint=100)
    assert (f.min_size, f.max_size, f.default()) == (16, 128, 32)
    assert f.normalize(4) == 16  # below the minimum: raised
    assert f.normalize(1024) == 128  # above the maximum: lowered
    with pytest.raises(ValueError, match="power of two"):
        f.normalize(48)
    assert BlockSizeFragment(1, 8).default() == 8
    assert BlockSizeFragment(3, 100, 50).min_size == 4
    assert BlockSizeFragment(3, 100, 50).default() == 64
    assert isinstance(f, PowerOfTwoFragment)
    assert pickle.loads(pickle.dumps(f)) == f


def test_reduction_loop_fragment() -> None:
    f = ReductionLoopFragment(100)
    assert f.all_values() == [8, 16, 32, 64, None]
    assert f.default() is None  # small dims reduce persistently
    assert ReductionLoopFragment(10_000).default() == 4096
    assert f.normalize(1) == 8  # 1 floors to 8
    assert f.normalize(128) is None and f.normalize(4096) is None  # >= the dim collapses
    assert f.normalize(None) is None and f.normalize(64) == 64
    with pytest.raises(ValueError, match="power of two"):
        f.normalize(24)
    assert ReductionLoopFragment(6).all_values() == [None]
    assert ReductionLoopFragment(6).normalize(4) is None
    assert f.neighbors(None) == [64] and sorted(f.neighbors(16)) == [8, 32]
    assert f.decode(f.encode(None)) is None and f.decode(f.encode(16)) == 16


def test_permutation_fragment() -> None:
    f = PermutationFragment(3)
    assert f.default() == [0, 1, 2] and f.size() == 6
    assert f.neighbors([0, 1, 2]) == [[1, 0, 2], [0, 2, 1]]
    assert len(f.neighbors([0, 1, 2], radius=2)) == 3
    for perm in f.all_values():  # type: ignore[union-attr]
        assert f.decode(f.encode(perm)) == perm
    assert sorted(f.decode([0.9, -2.0, 0.3])) == [0, 1, 2]
    with pytest.raises(ValueError, match="not a permutation"):
        f.normalize([0, 0, 1])
    restricted = f.restrict([[0, 1, 2], [2, 1, 0]])
    assert restricted.default() == [0, 1, 2]
    assert restricted.neighbors([0, 1, 2]) == [[2, 1, 0]]
    assert PermutationFragment(1).encoded_dims == 0 and PermutationFragment(1).decode([]) == [0]


def test_list_of_and_num_threads() -> None:
    f = ListOf(PowerOfTwoFragment(1, 4), 2)
    assert f.default() == [1, 1] and f.size() == 9 and len(f.all_values()) == 9  # type: ignore[arg-type]
    assert f.encoded_dims == 2 and f.decode(f.encode([2, 4])) == [2, 4]
    assert [2, 2] in f.neighbors([2, 1])
    with pytest.raises(ValueError, match="expected 2 values"):
        f.normalize([1])
    with pytest.raises(ValueError, match="entry 1"):
        f.normalize([1, 3])
    threads = NumThreadsFragment(128)
    assert threads.default() == 0 and threads.all_values()[:3] == [0, 1, 2]  # type: ignore[index]
    assert threads.normalize(0) == 0 and threads.normalize(64) == 64
    with pytest.raises(ValueError, match="0 or a power of two"):
        threads.normalize(48)


ALL_FRAGMENTS: list[ConfigSpecFragment] = [
    PowerOfTwoFragment(1, 64, 8),
    BlockSizeFragment(4, 512, 64, size_hint=300),
    IntegerFragment(-3, 7, 0),
    EnumFragment(("a", "b", "c")),
    EnumFragment((None, 32, 64)),
    EnumFragment(("only",)),
    BooleanFragment(),
    ListOf(EnumFragment(("x", "y")), 3),
    NumThreadsFragment(256),
    PermutationFragment(4),
    ReductionLoopFragment(1000),
    ReductionLoopFragment(1),
]


@pytest.mark.parametrize("fragment", ALL_FRAGMENTS, ids=repr)
def test_fragment_contract(fragment: ConfigSpecFragment) -> None:
    rng = random.Random(1)
    assert fragment.is_valid(fragment.default())
    assert fragment.normalize(fragment.default()) == fragment.default()
    for _ in range(50):
        value = fragment.random(rng)
        assert fragment.is_valid(value)
        assert fragment.normalize(value) == value
        encoded = fragment.encode(value)
        assert len(encoded) == fragment.encoded_dims
        assert all(0.0 <= x <= 1.0 for x in encoded)
        assert fragment.decode(encoded) == value
        for neighbor in fragment.neighbors(value):
            assert fragment.is_valid(neighbor) and neighbor != value
        junk = [rng.uniform(-2, 3) for _ in range(fragment.encoded_dims)]
        assert fragment.is_valid(fragment.decode(junk))
    values = fragment.all_values()
    if values is not None:
        assert len(values) == fragment.size()
        assert all(fragment.is_valid(v) for v in values)


# ---------------------------------------------------------------------------------------------
# ConfigSpec
# ---------------------------------------------------------------------------------------------


def matmul_spec() -> ConfigSpec:
    spec = ConfigSpec()
    spec.add_block_size(1024)
    spec.add_block_size(1024)
    spec.add_block_size(512, min_size=16)
    spec.append("loop_orders", PermutationFragment(2))
    spec.append("l2_groupings")
    spec.append("flatten_loops")
    for _ in range(2):
        spec.append("range_unroll_factors")
        spec.append("range_num_stages")
    spec.set_scalar("num_warps")
    spec.set_scalar("num_stages")
    spec.set_scalar("pid_type")
    for _ in range(3):
        spec.append("indexing")
    for _ in range(2):
        spec.append("load_eviction_policies")
    return spec


def test_add_block_size_and_fields() -> None:
    spec = ConfigSpec()
    assert spec.add_block_size(100) == 0
    assert spec.add_block_size(7, min_size=2, default=4) == 1
    assert spec.add_block_size(64, max_size=16) == 2
    fragments = spec.block_sizes
    assert [(f.min_size, f.max_size, f.default()) for f in fragments] == [  # type: ignore[attr-defined]
        (1, 128, 32),
        (2, 8, 4),
        (1, 16, 16),
    ]
    assert list(spec.fields) == ["block_sizes"]
    assert spec.length("block_sizes") == 3 and spec.length("loop_orders") == 0
    assert "block_sizes" in spec and len(spec) == 1


def test_default_config_is_canonical() -> None:
    spec = matmul_spec()
    default = spec.default_config()
    assert default == Config(
        block_sizes=[32, 32, 32],
        loop_orders=[[0, 1]],
        flatten_loops=[False],
        l2_groupings=[1],
        range_unroll_factors=[0, 0],
        range_num_stages=[0, 0],
        num_warps=4,
        num_stages=1,
        pid_type="flat",
        indexing=["pointer", "pointer", "pointer"],
        load_eviction_policies=["", ""],
    )
    assert next(iter(default)) == "block_sizes"  # canonical key order
    assert spec.normalize(default) == default


def test_default_overrides() -> None:
    spec = matmul_spec()
    spec.default_overrides = {"block_sizes": [64, 16], "num_warps": 8, "pid_type": "nonsense"}
    default = spec.default_config()
    assert default["block_sizes"] == [64, 16, 32]
    assert default["num_warps"] == 8
    assert default["pid_type"] == "flat"  # invalid overrides fall back to a valid value
    assert spec.normalize(default) == default
    # Missing entries in a user config are filled with the same (overridden) defaults.
    assert spec.normalize({"block_sizes": [32, 32, 32]})["num_warps"] == 8


def test_normalize_aliases_and_broadcast() -> None:
    spec = matmul_spec()
    c = spec.normalize(
        {
            "block_size": [[128, 64], 32],
            "loop_order": [1, 0],
            "l2_grouping": 8,
            "indexing": "block_ptr",
        }
    )
    assert c["block_sizes"] == [128, 64, 32]
    assert c["loop_orders"] == [[1, 0]]
    assert c["l2_groupings"] == [8]
    assert c["indexing"] == ["block_ptr"] * 3
    assert c["num_warps"] == 4  # filled default
    assert spec.normalize(Config(block_sizes=[[32, 32], [16]]))["block_sizes"] == [32, 32, 16]


def test_normalize_reduction_loop_broadcast() -> None:
    spec = ConfigSpec()
    spec.add_block_size(64)
    spec.append("reduction_loops", ReductionLoopFragment(4096))
    spec.append("reduction_loops", ReductionLoopFragment(300))
    c = spec.normalize({"block_sizes": [8], "reduction_loop": 256})
    assert c["reduction_loops"] == [256, 256]  # one value for every reduction dim
    c = spec.normalize({"block_sizes": [8], "reduction_loop": 512})
    assert c["reduction_loops"] == [512, None]  # 512 covers the whole 300-wide dim
    c = spec.normalize({"block_sizes": [8], "reduction_loops": [1]})
    assert c["reduction_loops"] == [8, None]


def test_normalize_raises_block_sizes_to_minimum() -> None:
    spec = matmul_spec()
    assert spec.normalize({"block_sizes": [16, 16, 1]})["block_sizes"] == [16, 16, 16]
    assert spec.normalize({"block_sizes": [4096, 16, 16]})["block_sizes"] == [1024, 16, 16]


def test_common_keys_missing_from_spec_are_dropped() -> None:
    spec = ConfigSpec()
    spec.add_block_size(64)
    spec.set_scalar("num_warps")
    spec.remove("num_warps")  # e.g. the ref backend has no warps
    c = spec.normalize(
        Config(
            block_sizes=[16], num_warps=8, num_stages=3, range_unroll_factors=[1], pid_type="xyz"
        )
    )
    assert c == Config(block_sizes=[16])


def test_user_tunables() -> None:
    spec = ConfigSpec()
    spec.add_block_size(64)
    spec.add_user_tunable("split_k", PowerOfTwoFragment(1, 16, 2))
    spec.add_user_tunable("split_k", PowerOfTwoFragment(1, 16, 2))  # same registration again
    assert spec.user_tunables == ("split_k",)
    assert spec.default_config()["split_k"] == 2
    assert spec.normalize({"block_sizes": [8], "split_k": 8})["split_k"] == 8
    for name in ("num_warps", "block_sizes", "block_size", "indexing"):
        with pytest.raises(exc.TunableNameConflict, match=name):
            spec.add_user_tunable(name, BooleanFragment())
    with pytest.raises(exc.TunableNameConflict):
        spec.add_user_tunable("split_k", PowerOfTwoFragment(1, 32))
    with pytest.raises(exc.RegisterTunableArgTypes):
        spec.add_user_tunable("bad", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="None"):
        spec.add_user_tunable("opt", EnumFragment((4, None)))


def test_backend_keys() -> None:
    spec = ConfigSpec()
    spec.add_block_size(64)
    spec.set_scalar("waves_per_eu", IntegerFragment(0, 4, 0))
    assert spec.normalize({"block_sizes": [8], "waves_per_eu": 2})["waves_per_eu"] == 2
    with pytest.raises(exc.TunableNameConflict):
        spec.add_user_tunable("waves_per_eu", BooleanFragment())


def test_restrict() -> None:
    spec = matmul_spec()
    spec.restrict(
        "pid_type", ["persistent_blocked", "persistent_interleaved"], reason="hl.barrier() needs it"
    )
    assert spec.default_config()["pid_type"] == "persistent_blocked"
    with pytest.raises(exc.InvalidConfig) as info:
        spec.normalize({"block_sizes": [32, 32, 32], "pid_type": "flat"})
    assert "hl.barrier() needs it" in str(info.value)
    spec.restrict("indexing", ["pointer", "tensor_descriptor"])
    rng = random.Random(0)
    for _ in range(30):
        assert set(spec.random_config(rng)["indexing"]) <= {"pointer", "tensor_descriptor"}  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot restrict"):
        spec.restrict("num_warps", [3])
    with pytest.raises(KeyError):
        spec.restrict("maxnreg", [None])


def test_field_kind_errors() -> None:
    spec = ConfigSpec()
    with pytest.raises(ValueError, match="scalar"):
        spec.append("num_warps")
    with pytest.raises(ValueError, match="list"):
        spec.set_scalar("block_sizes", PowerOfTwoFragment(1, 4))
    with pytest.raises(ValueError, match="plural"):
        spec.append("block_size", PowerOfTwoFragment(1, 4))
    with pytest.raises(ValueError, match="no standard fragment"):
        spec.append("my_list")
    with pytest.raises(exc.TunableTypeNotSupported):
        spec.set_scalar("thing", 4)  # type: ignore[arg-type]
    spec.set_scalar("indexing")  # indexing may be one value for all memory ops
    assert spec.normalize({"indexing": ["block_ptr", "block_ptr"]})["indexing"] == "block_ptr"
    with pytest.raises(exc.InvalidConfig, match="single value"):
        spec.normalize({"indexing": ["block_ptr", "pointer"]})


BAD_CONFIGS = [
    ({"loop_orders": [[0, 1]]}, "Not enough values for config['block_sizes']: expected 3"),
    (
        {"block_sizes": [32, 32]},
        "Did you forget to specify block sizes for all your hl.tile() dimensions?",
    ),
    ({"block_sizes": [32, 32, 32, 32]}, "Too many values for config['block_sizes']"),
    (
        {"block_sizes": [32, 32, 48]},
        "config['block_sizes'][2] = 48: block size 48 is not a power of two",
    ),
    ({"block_sizes": [32, 32, 32], "block_size": 32}, "both 'block_size' and 'block_sizes'"),
    ({"block_sizes": [32, 32, 32], "num_warps": 3}, "config['num_warps'] = 3"),
    ({"block_sizes": [32, 32, 32], "num_warps": 64}, "outside [1, 32]"),
    ({"block_sizes": [32, 32, 32], "loop_orders": [[0, 0]]}, "not a permutation"),
    ({"block_sizes": [32, 32, 32], "l2_groupings": [3]}, "not a power of two"),
    (
        {"block_sizes": [32, 32, 32], "l2_groupings": [4, 4]},
        "Too many values for config['l2_groupings']",
    ),
    ({"block_sizes": [32, 32, 32], "reduction_loops": [64]}, "this kernel takes 0"),
    ({"block_sizes": [32, 32, 32], "num_wraps": 4}, "Did you mean 'num_warps'?"),
    ({"block_sizes": [32, 32, 32], "split_k": 4}, "Unknown config key 'split_k'"),
    ({"block_sizes": [32, 32, 32], "range_unroll_factors": 2}, "must be a list"),
    ({"block_sizes": [32, 32, 32], "range_unroll_factors": [9]}, "outside [0, 4]"),
    ({"block_sizes": [32, 32, 32], "pid_type": "grid"}, "config['pid_type'] = 'grid'"),
    (
        {"block_sizes": [32, 32, 32], "indexing": ["pointer", "tma"]},
        "config['indexing'][1] = 'tma'",
    ),
    ({"block_sizes": [32, 32, 32], "flatten_loops": [1]}, "expected a bool"),
]


@pytest.mark.parametrize(("config", "fragment"), BAD_CONFIGS)
def test_bad_configs(config: dict[str, object], fragment: str) -> None:
    spec = matmul_spec()
    with pytest.raises(exc.InvalidConfig) as info:
        spec.normalize(config)
    assert fragment in str(info.value)


def test_unknown_key_lists_valid_keys() -> None:
    spec = matmul_spec()
    with pytest.raises(exc.InvalidConfig) as info:
        spec.normalize({"block_sizes": [32, 32, 32], "zzz": 1})
    assert "Valid keys: block_sizes, flatten_loops, indexing" in str(info.value)


def test_normalize_rejects_non_mapping() -> None:
    with pytest.raises(exc.InvalidConfig, match=r"Expected a helion\.Config or dict"):
        matmul_spec().normalize([("block_sizes", [32])])  # type: ignore[arg-type]


def test_neighbors_differ_in_one_value() -> None:
    spec = matmul_spec()
    base = spec.default_config()
    neighbors = spec.neighbors(base)
    assert neighbors and base not in neighbors
    for n in neighbors:
        assert spec.normalize(n) == n
        differing = [k for k in set(base) | set(n) if base.get(k) != n.get(k)]
        assert len(differing) == 1
    assert Config(**{**base.config, "num_warps": 8}) in neighbors


def test_encode_decode_flatten() -> None:
    spec = matmul_spec()
    c = spec.random_config(random.Random(3))
    vec = spec.encode(c)
    assert len(vec) == spec.encoded_dims
    assert spec.decode(vec) == c
    with pytest.raises(ValueError, match="expected a vector"):
        spec.decode(vec[:-1])
    flat = spec.flatten(c)
    assert len(flat) == len(spec.flat_fields())
    assert spec.unflatten(flat) == c
    # Encoding a config written with aliases normalizes it first.
    assert spec.encode({"block_size": [32, 32, 32]}) == spec.encode(spec.default_config())


def test_config_size_and_fingerprint() -> None:
    spec = matmul_spec()
    expected = 11 * 11 * 6 * 2 * 7 * 2 * 5**4 * 6 * 8 * 4 * 3**3 * 3**2
    assert spec.config_size() == expected
    other = matmul_spec()
    assert spec.fingerprint() == other.fingerprint()
    other.set_scalar("num_warps", PowerOfTwoFragment(1, 16, 4))
    assert spec.fingerprint() != other.fingerprint()


def test_copy_is_independent() -> None:
    spec = matmul_spec()
    clone = spec.copy()
    clone.add_block_size(8)
    clone.remove("pid_type")
    assert spec.length("block_sizes") == 3 and "pid_type" in spec
    assert clone.length("block_sizes") == 4 and "pid_type" not in clone


def test_minimize_round_trip() -> None:
    spec = matmul_spec()
    c = spec.normalize({"block_sizes": [64, 64, 32], "num_warps": 8})
    minimal = c.minimize(spec)
    assert minimal == Config(block_sizes=[64, 64, 32], num_warps=8)
    assert spec.normalize(minimal) == c


# ---------------------------------------------------------------------------------------------
# Property tests over random specs
# ---------------------------------------------------------------------------------------------

user_fragments = st.one_of(
    st.builds(lambda lo, extra, d: PowerOfTwoFragment(2**lo, 2 ** (lo + extra), 2 ** (lo + min(d, extra))),
              st.integers(0, 4), st.integers(0, 5), st.integers(0, 5)),
    st.builds(lambda lo, span: IntegerFragment(lo, lo + span), st.integers(-5, 5), st.integers(0, 20)),
    st.builds(lambda n: EnumFragment(tuple(f"c{i}" for i in range(n))), st.integers(1, 4)),
    st.just(BooleanFragment()),
    st.builds(lambda n: ListOf(EnumFragment((1, 2, 3)), n), st.integers(0, 3)),
)  # fmt: skip


@st.composite
def specs(draw: st.DrawFn) -> ConfigSpec:
    spec = ConfigSpec()
    for _ in range(draw(st.integers(0, 4))):
        hint = draw(st.integers(1, 5000))
        min_size = draw(st.sampled_from([1, 2, 16]))
        default = draw(st.one_of(st.none(), st.sampled_from([1, 16, 64, 256])))
        spec.add_block_size(hint, min_size=min_size, default=default)
    for _ in range(draw(st.integers(0, 2))):
        spec.append("loop_orders", PermutationFragment(draw(st.integers(1, 3))))
    for name in ("flatten_loops", "l2_groupings", "range_unroll_factors", "range_warp_specializes"):
        for _ in range(draw(st.integers(0, 2))):
            spec.append(name)
    for _ in range(draw(st.integers(0, 2))):
        spec.append("reduction_loops", ReductionLoopFragment(draw(st.integers(1, 20000))))
    for name in ("num_warps", "num_stages", "pid_type", "maxnreg", "epilogue_subtile"):
        if draw(st.booleans()):
            spec.set_scalar(name)
    if draw(st.booleans()):
        for _ in range(draw(st.integers(1, 4))):
            spec.append("indexing")
    elif draw(st.booleans()):
        spec.set_scalar("indexing")
    if draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            spec.append("num_threads", NumThreadsFragment(draw(st.sampled_from([32, 1024]))))
    names = draw(
        st.lists(st.sampled_from(["split_k", "tile_k", "use_fast", "mode", "knob"]), unique=True)
    )
    for name in names:
        spec.add_user_tunable(name, draw(user_fragments))
    return spec


@hyp_settings(max_examples=150, deadline=None)
@given(specs(), st.integers(0, 2**32 - 1))
def test_property_random_configs_are_fixed_points(spec: ConfigSpec, seed: int) -> None:
    rng = random.Random(seed)
    default = spec.default_config()
    assert spec.normalize(default) == default
    config = spec.random_config(rng)
    assert spec.normalize(config) == config
    assert spec.normalize(dict(config)) == config
    # JSON and repr round trips keep the config (and normalization) intact.
    assert Config.from_json(config.to_json()) == config
    assert spec.normalize(Config.from_json(config.to_json())) == config
    # encode/decode and flatten/unflatten are inverses on valid configs.
    vec = spec.encode(config)
    assert len(vec) == spec.encoded_dims
    assert all(0.0 <= x <= 1.0 for x in vec)
    assert spec.decode(vec) == config
    assert spec.unflatten(spec.flatten(config)) == config
    # minimize keeps the meaning.
    assert spec.normalize(config.minimize(spec)) == config
    assert (
        "block_sizes" not in spec or "block_sizes" in config.minimize(spec) or not spec.block_sizes
    )


@hyp_settings(max_examples=80, deadline=None)
@given(specs(), st.integers(0, 2**32 - 1))
def test_property_neighbors_and_decoded_vectors_are_valid(spec: ConfigSpec, seed: int) -> None:
    rng = random.Random(seed)
    config = spec.random_config(rng)
    for neighbor in spec.neighbors(config):
        assert spec.normalize(neighbor) == neighbor
        assert neighbor != config
    junk = [rng.uniform(-1.0, 2.0) for _ in range(spec.encoded_dims)]
    decoded = spec.decode(junk)
    assert spec.normalize(decoded) == decoded
    size = spec.config_size()
    assert size >= 1 and isinstance(size, int)
    assert math.isfinite(float(len(spec.flat_fields())))


def test_next_power_of_2() -> None:
    assert [next_power_of_2(n) for n in (-3, 0, 1, 2, 3, 64, 65)] == [1, 1, 1, 2, 4, 64, 128]


def test_public_range_lists_with_the_top_level_loops_entry_load() -> None:
    """Public Helion's range_* lists carry one more leading entry, for the top-level loop (its
    autotuned matmul configs read `range_num_stages=[0, 3]`): that entry is dropped where the
    kernel has one top-level loop, and a list of any other length is still refused."""
    spec = matmul_spec()  # two inner loops
    spec.outer_range_slots = 1
    public = spec.normalize({"block_sizes": [32, 32, 32], "range_num_stages": [0, 3, 2]})
    assert public["range_num_stages"] == [3, 2]
    ours = spec.normalize({"block_sizes": [32, 32, 32], "range_num_stages": [3, 2]})
    assert ours == public
    assert spec.copy().normalize(public) == public
    with pytest.raises(exc.InvalidConfig, match="takes 2, got 4"):
        spec.normalize({"block_sizes": [32, 32, 32], "range_num_stages": [0, 3, 2, 1]})
    spec.outer_range_slots = 0  # several top-level loops: no public layout to recognise
    with pytest.raises(exc.InvalidConfig, match="takes 2, got 3"):
        spec.normalize({"block_sizes": [32, 32, 32], "range_num_stages": [0, 3, 2]})
