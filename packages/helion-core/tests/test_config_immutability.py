"""`helion.Config` cannot change after construction (docs/api/config.md: "an immutable
`Mapping`" with value semantics for `==` and `hash`).

Reading a list value (`config["block_sizes"]`, `config.block_sizes`, `dict(config)`, ...) gives a
fresh plain list: editing it leaves the config, its hash and a bound kernel's stored config as
they were. The stored table `config.config` is read-only. Lists read from a config still behave
as lists: they compare equal to lists, index, copy and serialize as JSON.
"""

from __future__ import annotations

import copy
import json
import pickle

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.runtime.config import Config

LIST_FIELDS = {
    "block_sizes": [16, 16],
    "loop_orders": [[1, 0]],
    "flatten_loops": [False],
    "l2_groupings": [4],
    "reduction_loops": [None, 64],
    "range_unroll_factors": [0, 1],
    "range_warp_specializes": [None, False],
    "range_num_stages": [0, 3],
    "range_multi_buffers": [None, True],
    "range_flattens": [None, None],
    "static_ranges": [False],
    "load_eviction_policies": ["", "first"],
    "load_cache_modifiers": ["", ".cg"],
    "store_cache_modifiers": [".cs"],
    "indexing": ["pointer", "block_ptr"],
    "atomic_indexing": ["pointer"],
    "num_threads": [32, 0],
}


def full_config() -> Config:
    return Config(**LIST_FIELDS, num_warps=8, split_k=4, my_list=[1, 2], my_table={"a": [1]})


def add_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def _add_kernel(**settings: object):
    return helion.kernel(add_fn, **{"backend": "ref", "autotune_effort": "none", **settings})


def _mutate(value: object) -> None:
    """Every way of editing a list in place (and a nested one, and a dict value)."""
    assert isinstance(value, (list, dict))
    if isinstance(value, dict):
        value["a"] = [99]
        value["b"] = 1
        return
    if value and isinstance(value[0], list):
        value[0].append(99)
    value.append(99)
    value[0] = 99
    value.extend([1])
    value.insert(0, 7)
    value.reverse()
    value += [5]


# ---------------------------------------------------------------------------- the report's repro
def test_editing_an_item_read_from_a_config_leaves_it_unchanged() -> None:
    cfg = Config(block_sizes=[16, 16])
    before = hash(cfg)
    s = {cfg}
    cfg["block_sizes"][0] = 32
    assert cfg["block_sizes"] == [16, 16]
    assert str(cfg) == "Config(block_sizes=[16, 16])"
    assert hash(cfg) == before == hash(Config(block_sizes=[16, 16]))
    assert cfg in s and Config(block_sizes=[16, 16]) in s
    assert Config(block_sizes=[32, 16]) not in s


def test_editing_an_accessor_list_leaves_the_config_unchanged() -> None:
    cfg = Config(block_sizes=[16, 16])
    sizes = cfg.block_sizes
    sizes[0] //= 2
    sizes.append(8)
    assert cfg.block_sizes == [16, 16] and cfg == Config(block_sizes=[16, 16])


@pytest.mark.parametrize("field", sorted(LIST_FIELDS))
def test_no_list_field_can_be_changed_through_reads(field: str) -> None:
    cfg = full_config()
    snapshot = json.loads(cfg.to_json())
    before = hash(cfg)
    _mutate(cfg[field])
    _mutate(getattr(cfg, field))
    _mutate(cfg.get(field))
    _mutate(dict(cfg)[field])
    _mutate({**cfg}[field])
    _mutate(dict(cfg.items())[field])
    for value in cfg.values():
        if isinstance(value, (list, dict)):
            _mutate(value)
    assert json.loads(cfg.to_json()) == snapshot
    assert hash(cfg) == before and cfg == full_config()
    assert cfg[field] == LIST_FIELDS[field]


@pytest.mark.parametrize("key", ["my_list", "my_table"])
def test_user_keys_cannot_be_changed_through_reads(key: str) -> None:
    cfg = full_config()
    _mutate(cfg[key])
    _mutate(cfg.get(key))
    assert cfg == full_config() and hash(cfg) == hash(full_config())
    assert cfg["my_list"] == [1, 2] and cfg["my_table"] == {"a": [1]}


def test_reads_are_fresh_each_time() -> None:
    cfg = full_config()
    assert cfg["block_sizes"] is not cfg["block_sizes"]
    assert cfg.loop_orders[0] is not cfg.loop_orders[0]


def test_the_caller_list_given_to_the_constructor_is_not_kept() -> None:
    sizes, orders, mine = [16, 16], [[1, 0]], [1, 2]
    cfg = Config(block_sizes=sizes, loop_orders=orders, my_list=mine)
    raw = {"block_sizes": sizes, "my_list": mine}
    trusted = Config.from_dict(raw)
    sizes[0] = 1
    orders[0][0] = 0
    mine.append(3)
    raw["num_warps"] = 2
    assert cfg == Config(block_sizes=[16, 16], loop_orders=[[1, 0]], my_list=[1, 2])
    assert trusted == Config(block_sizes=[16, 16], my_list=[1, 2])


# ------------------------------------------------------------------ the stored table is read-only
def test_the_stored_table_is_read_only() -> None:
    cfg = full_config()
    table = cfg.config
    attempts = [
        lambda: table.__setitem__("num_warps", 2),
        lambda: table.__delitem__("num_warps"),
        lambda: table.pop("num_warps"),
        lambda: table.popitem(),
        lambda: table.update(num_warps=2),
        lambda: table.setdefault("num_stages", 3),
        lambda: table.clear(),
        lambda: table["block_sizes"].__setitem__(0, 32),
        lambda: table["block_sizes"].append(32),
        lambda: table["block_sizes"].sort(),
        lambda: table["loop_orders"][0].append(2),
        lambda: table["my_table"].__setitem__("a", 1),
        lambda: table["my_table"]["a"].append(1),
    ]
    for attempt in attempts:
        with pytest.raises(TypeError, match="immutable"):
            attempt()

    def augmented() -> None:
        sizes = table["block_sizes"]
        sizes += [1]

    with pytest.raises(TypeError, match="immutable"):
        augmented()
    assert cfg == full_config()
    with pytest.raises(AttributeError, match="immutable"):
        cfg.config = {}  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del cfg.config


def test_copies_of_the_stored_table_are_plain_and_editable() -> None:
    cfg = full_config()
    table = dict(cfg.config)
    table["num_warps"] = 2
    sizes = list(cfg.config["block_sizes"])
    sizes[0] = 32
    for copied in (
        cfg.config["block_sizes"].copy(),
        cfg.config["block_sizes"][:],
        copy.copy(cfg.config["block_sizes"]),
        copy.deepcopy(cfg.config["block_sizes"]),
    ):
        assert type(copied) is list
        copied.append(1)
    deep = copy.deepcopy(cfg.config)
    assert type(deep) is dict and type(deep["loop_orders"][0]) is list
    deep["loop_orders"][0].append(5)
    assert cfg == full_config()


# ------------------------------------------------------------- lists still behave as lists
def test_read_values_are_plain_lists() -> None:
    cfg = full_config()
    for field in LIST_FIELDS:
        assert type(cfg[field]) is list and type(getattr(cfg, field)) is list
    assert type(cfg.loop_orders[0]) is list
    assert type(cfg["my_table"]) is dict and type(cfg["my_table"]["a"]) is list


def test_lists_compare_index_and_serialize_like_lists() -> None:
    cfg = Config(block_sizes=[16, 16], loop_orders=[[1, 0]])
    assert cfg.block_sizes == [16, 16] and cfg["block_sizes"] == [16, 16]
    assert cfg.config["block_sizes"] == [16, 16]
    assert list(cfg.block_sizes) == [16, 16] and cfg.block_sizes[1] == 16
    assert cfg.loop_orders == [[1, 0]] and cfg.config["loop_orders"][0] == [1, 0]
    assert json.dumps(cfg.block_sizes) == "[16, 16]"
    assert json.dumps(cfg.config["block_sizes"]) == "[16, 16]"
    assert json.loads(json.dumps(cfg.config)) == {"block_sizes": [16, 16], "loop_orders": [[1, 0]]}
    assert json.loads(json.dumps(dict(cfg))) == json.loads(cfg.to_json())
    assert repr(cfg.config["block_sizes"]) == "[16, 16]"
    assert cfg.config["block_sizes"] + [8] == [16, 16, 8]
    assert Config(block_sizes=cfg.config["block_sizes"]) == Config(block_sizes=[16, 16])


def test_building_a_variant_is_the_way_to_change_a_config() -> None:
    cfg = Config(block_sizes=[16, 16], num_warps=4)
    sizes = cfg.block_sizes
    sizes[0] //= 2
    variant = Config(**{**cfg, "block_sizes": sizes})
    assert variant == Config(block_sizes=[8, 16], num_warps=4)
    assert cfg == Config(block_sizes=[16, 16], num_warps=4)
    assert Config(**{**cfg.config, "num_warps": 8}) == Config(block_sizes=[16, 16], num_warps=8)


def test_text_json_pickle_and_copies_round_trip_and_stay_frozen() -> None:
    cfg = full_config()
    namespace = {"helion": helion}
    for other in (
        eval(repr(cfg), namespace),
        Config.from_json(cfg.to_json()),
        pickle.loads(pickle.dumps(cfg)),
        copy.copy(cfg),
        copy.deepcopy(cfg),
    ):
        assert other == cfg and hash(other) == hash(cfg)
        with pytest.raises(TypeError, match="immutable"):
            other.config["block_sizes"].append(1)
        other["block_sizes"].append(1)
        assert other == cfg
    # a pickle holds plain lists and dicts (it loads without the private frozen types)
    assert b"_Frozen" not in pickle.dumps(cfg)
    state = cfg.__getstate__()
    assert type(state) is dict and type(state["block_sizes"]) is list
    state["block_sizes"].append(1)
    assert cfg == full_config()


def test_configs_derived_by_a_spec_are_frozen_too() -> None:
    add = _add_kernel()
    args = (torch.randn(8, 8), torch.randn(8, 8))
    spec = add.bind(args).config_spec
    for derived in (
        spec.default_config(),
        spec.normalize({"block_sizes": [4, 4]}),
        Config(block_sizes=[4, 4], num_warps=8).minimize(spec),
    ):
        snapshot = json.loads(derived.to_json())
        derived["block_sizes"][0] = 1
        assert json.loads(derived.to_json()) == snapshot
        with pytest.raises(TypeError, match="immutable"):
            derived.config["block_sizes"][0] = 1


# ----------------------------------------------------------------------------- bound kernels
def test_a_bound_kernel_config_cannot_be_corrupted() -> None:
    add = _add_kernel()
    args = (torch.randn(16, 16), torch.randn(16, 16))
    bound = add.bind(args)
    given = Config(block_sizes=[4, 8])
    bound.set_config(given)
    stored = bound._config
    assert stored is not None
    before = (json.loads(stored.to_json()), hash(stored))
    given["block_sizes"][0] = 3
    stored["block_sizes"][0] = 3
    stored.block_sizes[0] = 3
    with pytest.raises(TypeError, match="immutable"):
        stored.config["block_sizes"][0] = 3
    assert (json.loads(bound._config.to_json()), hash(bound._config)) == before
    assert bound._config["block_sizes"] == [4, 8]
    torch.testing.assert_close(add(*args), args[0] + args[1])
    # the stored config still finds its compiled variant
    assert bound._config in bound._runners


def test_a_tuned_config_edited_by_the_caller_stays_valid(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path / "cache"))
    add = _add_kernel(
        autotune_effort="quick",
        autotune_progress_bar=False,
        autotune_precompile=None,
        autotune_random_seed=0,
        autotune_log_level=0,
    )
    args = (torch.randn(16, 16), torch.randn(16, 16))
    config = add.autotune(args, max_evaluations=2, budget_seconds=20)
    snapshot = json.loads(config.to_json())
    config["block_sizes"][0] //= 2  # the report's "try a variant" line: a local list only
    assert json.loads(config.to_json()) == snapshot
    assert json.loads(add.bind(args)._config.to_json()) == snapshot
    torch.testing.assert_close(add(*args), args[0] + args[1])


# -------------------------------------------------------- unused loop fields (docs/api/config.md)
def test_reduction_loops_on_a_kernel_without_reductions_raise() -> None:
    """The documented rule: loop fields of which the kernel has fewer items raise "Too many
    values" (even zero items, as in public Helion); per-loop tuning fields the kernel has
    none of are dropped."""
    add = _add_kernel()
    spec = add.bind((torch.randn(8, 8), torch.randn(8, 8))).config_spec
    for extra in ({"reduction_loops": [16]}, {"reduction_loop": 16}):
        with pytest.raises(exc.InvalidConfig, match="this kernel takes 0, got 1"):
            spec.normalize({"block_sizes": [4, 4], **extra})
    kept = spec.normalize({"block_sizes": [4, 4], "range_unroll_factors": [1], "num_warps": 8})
    assert "range_unroll_factors" not in kept and "num_warps" not in kept  # dropped on ref
