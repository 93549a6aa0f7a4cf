from __future__ import annotations

import copy
import json
import os
import pickle
import types

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from helion import exc
from helion.runtime.config import CONFIG_FIELDS
from helion.runtime.config import SINGULAR_ALIASES
from helion.runtime.config import Config


def _eval_namespace() -> dict[str, object]:
    # repr() must paste back as helion.Config(...); a stub module stands in for `helion`
    # so this test does not depend on the whole package importing.
    return {"helion": types.SimpleNamespace(Config=Config)}


MATMUL = Config(
    block_sizes=[64, 64, 64],
    loop_orders=[[0, 1]],
    l2_groupings=[4],
    range_unroll_factors=[0, 1],
    range_warp_specializes=[None, False],
    range_num_stages=[0, 3],
    range_multi_buffers=[None, False],
    range_flattens=[None, None],
    num_warps=8,
    num_stages=6,
    indexing="block_ptr",
    pid_type="flat",
)


def test_only_non_none_values_are_stored() -> None:
    c = Config(block_sizes=[32], num_warps=None, split_k=4, unused=None)
    assert dict(c) == {"block_sizes": [32], "split_k": 4}
    assert len(c) == 2
    assert "num_warps" not in c and c["split_k"] == 4
    assert list(c) == ["block_sizes", "split_k"]


def test_constructor_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        Config([32])  # type: ignore[misc]


def test_every_reference_field_is_accepted() -> None:
    expected = {
        "block_sizes", "loop_orders", "flatten_loops", "l2_groupings", "reduction_loops",
        "range_unroll_factors", "range_warp_specializes", "range_num_stages",
        "range_multi_buffers", "range_flattens", "static_ranges", "num_warps", "num_stages",
        "pid_type", "num_sm_multiplier", "maxnreg", "indexing", "atomic_indexing",
        "load_eviction_policies", "load_cache_modifiers", "store_cache_modifiers",
        "advanced_controls_file", "epilogue_subtile", "xcd_remap", "num_threads",
    }  # fmt: skip
    assert set(CONFIG_FIELDS) == expected
    full = Config(
        block_sizes=[16], loop_orders=[[1, 0]], flatten_loops=[True], l2_groupings=[8],
        reduction_loops=[None, 64], range_unroll_factors=[2], range_warp_specializes=[True],
        range_num_stages=[3], range_multi_buffers=[False], range_flattens=[None],
        static_ranges=[False], num_warps=2, num_stages=3, pid_type="persistent_interleaved",
        num_sm_multiplier=4, maxnreg=128, indexing=["pointer", "tensor_descriptor"],
        atomic_indexing="pointer", load_eviction_policies=["", "first", "last"],
        load_cache_modifiers=[".cg"], store_cache_modifiers=[".cs", ".wt"],
        advanced_controls_file="", epilogue_subtile=2, xcd_remap=True, num_threads=[128, 0],
    )  # fmt: skip
    assert set(full) == expected


def test_sequences_are_stored_as_lists() -> None:
    c = Config(block_sizes=(32, 16), loop_orders=((1, 0),), user_key=(1, (2, 3)))
    assert c["block_sizes"] == [32, 16]
    assert c["loop_orders"] == [[1, 0]]
    assert c["user_key"] == [1, [2, 3]]
    assert c == Config(block_sizes=[32, 16], loop_orders=[[1, 0]], user_key=[1, [2, 3]])


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"num_warps": "4"}, "num_warps"),
        ({"num_warps": 4.0}, "num_warps"),
        ({"num_warps": True}, "num_warps"),
        ({"num_warps": 0}, ">= 1"),
        ({"pid_type": "grid"}, "pid_type"),
        ({"block_sizes": 64}, "expected a list"),
        ({"block_sizes": [64, "32"]}, "entry 1"),
        ({"block_sizes": [64, -32]}, ">= 1"),
        ({"loop_orders": [[0, 0]]}, "permutation"),
        ({"flatten_loops": [1]}, "expected a bool"),
        ({"reduction_loops": [0]}, "reduction_loops"),
        ({"indexing": "block_pointer"}, "indexing"),
        ({"indexing": ["pointer", "tma"]}, "tma"),
        ({"load_eviction_policies": ["evict_first"]}, "load_eviction_policies"),
        ({"store_cache_modifiers": [".cg"]}, "store_cache_modifiers"),
        ({"xcd_remap": 1}, "xcd_remap"),
        ({"num_threads": [-1]}, "num_threads"),
        ({"range_warp_specializes": ["yes"]}, "range_warp_specializes"),
        ({"advanced_controls_file": 3}, "advanced_controls_file"),
        ({"block_size": "big"}, "block_size"),
        ({"loop_order": [0, 2]}, "loop_order"),
    ],
)
def test_bad_values_raise_invalid_config(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(exc.InvalidConfig) as info:
        Config(**kwargs)  # type: ignore[arg-type]
    assert fragment in str(info.value)
    assert "Invalid config value" in str(info.value)


def test_nested_block_sizes_and_aliases_are_accepted() -> None:
    # README example: block_sizes=[[32, 32], [16]] relies on flattening at normalize time.
    c = Config(block_sizes=[[32, 32], [16]], block_size=None)
    assert c["block_sizes"] == [32, 32, 16]
    assert Config(block_size=[128, 128])["block_size"] == [128, 128]
    assert Config(reduction_loop=None, loop_order=[1, 0])["loop_order"] == [1, 0]


def test_str_sorts_keys_and_repr_evaluates_back() -> None:
    c = Config(num_warps=4, block_sizes=[32, 16], indexing="pointer", split_k=2)
    assert str(c) == "Config(block_sizes=[32, 16], indexing='pointer', num_warps=4, split_k=2)"
    assert repr(c).startswith("helion.Config(")
    assert eval(repr(c), _eval_namespace()) == c
    assert eval(repr(MATMUL), _eval_namespace()) == MATMUL


def test_repr_of_non_identifier_keys() -> None:
    c = Config(**{"block_sizes": [8], "odd-key": 1, "class": 2})
    assert eval(repr(c), _eval_namespace()) == c


def test_json_round_trip_and_errors() -> None:
    text = MATMUL.to_json()
    assert json.loads(text)["block_sizes"] == [64, 64, 64]
    assert "\n  " in text  # indent=2
    assert Config.from_json(text) == MATMUL
    with pytest.raises(exc.InvalidConfig, match="malformed"):
        Config.from_json("{not json")
    with pytest.raises(exc.InvalidConfig, match="must be an object"):
        Config.from_json("[1, 2]")
    with pytest.raises(exc.InvalidConfig, match="num_warps"):
        Config.from_json('{"num_warps": "eight"}')


def test_from_dict_skips_validation() -> None:
    c = Config.from_dict({"num_warps": "eight", "maxnreg": None})
    assert dict(c) == {"num_warps": "eight"}


def test_save_and_load_atomic(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "deep" / "er" / "best.json"
    MATMUL.save(target)
    assert Config.load(target) == MATMUL
    Config(num_warps=2).save(str(target))  # overwrite in place
    assert Config.load(target) == Config(num_warps=2)
    assert os.listdir(target.parent) == ["best.json"]  # no temp file left behind


def test_save_failure_leaves_old_file(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "c.json"
    MATMUL.save(target)

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        Config(num_warps=1).save(target)
    monkeypatch.undo()
    assert Config.load(target) == MATMUL
    assert os.listdir(tmp_path) == ["c.json"]


def test_equality_hash_pickle_copy() -> None:
    a = Config(block_sizes=[32, 16], reduction_loops=[None], split_k=4)
    b = Config(split_k=4, reduction_loops=[None], block_sizes=[32, 16])
    assert a == b and hash(a) == hash(b)
    assert a != Config(block_sizes=[32, 32], reduction_loops=[None], split_k=4)
    assert a != {"block_sizes": [32, 16]}
    assert len({a, b, MATMUL}) == 2
    again = pickle.loads(pickle.dumps(a))
    assert again == a and type(again) is Config
    assert copy.deepcopy(a) == a and copy.copy(a) == a


def test_config_is_immutable() -> None:
    with pytest.raises(AttributeError, match="immutable"):
        MATMUL.num_warps = 2  # type: ignore[misc]


def test_typed_accessors_have_defaults() -> None:
    empty = Config()
    assert empty.block_sizes == [] and empty.reduction_loops == []
    assert empty.num_warps == 4 and empty.num_stages == 1 and empty.pid_type == "flat"
    assert empty.indexing == "pointer" and empty.maxnreg is None and empty.xcd_remap is False
    assert MATMUL.num_warps == 8 and MATMUL.l2_groupings == [4]
    mixed = Config(indexing=["pointer", "tensor_descriptor"])
    assert mixed.indexing_for(1) == "tensor_descriptor"
    assert mixed.indexing_for(5) == "pointer"
    assert MATMUL.indexing_for(3) == "block_ptr"


def test_minimize_against_spec() -> None:
    from helion.autotuner.config_spec import ConfigSpec

    spec = ConfigSpec()
    spec.add_block_size(256)
    spec.add_block_size(256)
    spec.set_scalar("num_warps")
    spec.set_scalar("num_stages")
    spec.set_scalar("pid_type")
    c = Config(block_sizes=[32, 32], num_warps=4, num_stages=3, pid_type="flat")
    minimal = c.minimize(spec)
    assert minimal == Config(block_sizes=[32, 32], num_stages=3)
    assert spec.normalize(minimal) == spec.normalize(c)


json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=5))
user_values = st.recursive(json_scalar, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@st.composite
def configs(draw: st.DrawFn) -> Config:
    pow2 = st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128])
    kwargs: dict[str, object] = {}
    if draw(st.booleans()):
        kwargs["block_sizes"] = draw(st.lists(pow2, max_size=4))
    if draw(st.booleans()):
        kwargs["reduction_loops"] = draw(st.lists(st.one_of(st.none(), pow2), max_size=3))
    if draw(st.booleans()):
        kwargs["loop_orders"] = [draw(st.permutations(list(range(draw(st.integers(1, 3))))))]
    if draw(st.booleans()):
        kwargs["num_warps"] = draw(pow2)
    if draw(st.booleans()):
        kwargs["pid_type"] = draw(st.sampled_from(["flat", "xyz", "persistent_blocked"]))
    if draw(st.booleans()):
        kwargs["indexing"] = draw(
            st.one_of(
                st.sampled_from(["pointer", "block_ptr"]),
                st.lists(st.sampled_from(["pointer", "tensor_descriptor"]), max_size=3),
            )
        )
    if draw(st.booleans()):
        kwargs["range_warp_specializes"] = draw(
            st.lists(st.one_of(st.none(), st.booleans()), max_size=3)
        )
    user = draw(
        st.dictionaries(
            st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), user_values, max_size=3
        )
    )
    for key, value in user.items():
        if key not in CONFIG_FIELDS and key not in SINGULAR_ALIASES:
            kwargs.setdefault(key, value)
    return Config(**kwargs)


@hyp_settings(max_examples=200, deadline=None)
@given(configs())
def test_property_json_repr_pickle_round_trip(config: Config) -> None:
    assert Config.from_json(config.to_json()) == config
    assert eval(repr(config), _eval_namespace()) == config
    assert pickle.loads(pickle.dumps(config)) == config
    assert hash(Config.from_json(config.to_json())) == hash(config)


def test_docs_list_every_config_field() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[3] / "docs" / "api" / "config.md"
    if not docs.is_file():
        pytest.skip("docs are not part of this installation")
    text = docs.read_text()
    for name in CONFIG_FIELDS:
        assert f"| `{name}` |" in text, name
    for alias in SINGULAR_ALIASES:
        assert f"`{alias}`" in text, alias


def test_repr_evaluates_with_the_real_package() -> None:
    helion = pytest.importorskip("helion")
    assert helion.Config is Config
    assert eval(repr(MATMUL), {"helion": helion}) == MATMUL
