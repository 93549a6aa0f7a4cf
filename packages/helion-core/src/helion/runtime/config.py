"""``helion.Config``: one point of a kernel's search space.

A Config is an immutable mapping from config keys to JSON-friendly values: its lists are stored
frozen, and reading them (``config["block_sizes"]``, ``config.block_sizes``) gives fresh lists.
Construction only checks that each named field has the right *shape* (an int where an int is
expected, a list of bools where a list of bools is expected, ...). Whether the values fit a
particular kernel (how many block sizes, their bounds) is checked by
``ConfigSpec.normalize`` once the kernel is bound.
"""

from __future__ import annotations

import contextlib
import json
import keyword
import numbers
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import Iterator
from typing import Literal
from typing import TypeGuard

from helion import exc

if TYPE_CHECKING:
    from helion.autotuner.config_spec import ConfigSpec

IndexingLiteral = Literal["pointer", "block_ptr", "tensor_descriptor"]
PidTypeLiteral = Literal["flat", "xyz", "persistent_blocked", "persistent_interleaved"]
EvictionPolicyLiteral = Literal["", "first", "last"]

PID_TYPES: tuple[str, ...] = ("flat", "xyz", "persistent_blocked", "persistent_interleaved")
INDEXING_TYPES: tuple[str, ...] = ("pointer", "block_ptr", "tensor_descriptor")
EVICTION_POLICIES: tuple[str, ...] = ("", "first", "last")
LOAD_CACHE_MODIFIERS: tuple[str, ...] = ("", ".cg")
STORE_CACHE_MODIFIERS: tuple[str, ...] = ("", ".cs", ".wt")


# ---------------------------------------------------------------------------------------------
# Shape validators: each returns the canonical value or raises ValueError with the reason.
# ---------------------------------------------------------------------------------------------


def _as_int(value: object, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"expected an int, got {value!r} ({type(value).__name__})")
    result = int(value)
    if minimum is not None and result < minimum:
        raise ValueError(f"expected an int >= {minimum}, got {result}")
    return result


def _as_bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected a bool, got {value!r} ({type(value).__name__})")
    return value


def _optional(inner: Callable[[object], object]) -> Callable[[object], object]:
    def check(value: object) -> object:
        return None if value is None else inner(value)

    return check


def _choice(choices: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"expected one of {list(choices)}, got {value!r}")
        return value

    return check


def _as_str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a str, got {value!r} ({type(value).__name__})")
    return value


def _positive_int(value: object) -> int:
    return _as_int(value, minimum=1)


def _nonnegative_int(value: object) -> int:
    return _as_int(value, minimum=0)


def _any_int(value: object) -> int:
    return _as_int(value)


def _is_seq(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    return isinstance(value, (list, tuple))


def _flatten(value: object) -> list[object]:
    if _is_seq(value):
        out: list[object] = []
        for item in value:
            out.extend(_flatten(item))
        return out
    return [value]


def _list_of(
    item: Callable[[object], object], *, flatten: bool = False
) -> Callable[[object], list[object]]:
    def check(value: object) -> list[object]:
        if not _is_seq(value):
            raise ValueError(f"expected a list, got {value!r} ({type(value).__name__})")
        items = _flatten(value) if flatten else list(value)
        out = []
        for index, element in enumerate(items):
            try:
                out.append(item(element))
            except ValueError as error:
                raise ValueError(f"entry {index}: {error}") from None
        return out

    return check


def _permutation(value: object) -> list[int]:
    if not _is_seq(value):
        raise ValueError(f"expected a list of ints (a permutation), got {value!r}")
    perm = [_as_int(v, minimum=0) for v in value]
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"expected a permutation of 0..{len(perm) - 1}, got {perm}")
    return perm


def _loop_orders(value: object) -> list[object]:
    if not _is_seq(value):
        raise ValueError(f"expected a list of permutations, got {value!r}")
    items = list(value)
    if items and not any(_is_seq(v) for v in items):
        # loop_orders=[1, 0] is one permutation, not two.
        items = [items]
    return [_permutation(v) for v in items]


def _scalar_or_list(item: Callable[[object], object]) -> Callable[[object], object]:
    as_list = _list_of(item, flatten=True)

    def check(value: object) -> object:
        return as_list(value) if _is_seq(value) else item(value)

    return check


_block_size = _positive_int
_VALIDATORS: dict[str, Callable[[object], object]] = {
    "block_sizes": _list_of(_block_size, flatten=True),
    "loop_orders": _loop_orders,
    "flatten_loops": _list_of(_as_bool, flatten=True),
    "l2_groupings": _list_of(_positive_int, flatten=True),
    "reduction_loops": _list_of(_optional(_positive_int), flatten=True),
    "range_unroll_factors": _list_of(_any_int, flatten=True),
    "range_warp_specializes": _list_of(_optional(_as_bool), flatten=True),
    "range_num_stages": _list_of(_any_int, flatten=True),
    "range_multi_buffers": _list_of(_optional(_as_bool), flatten=True),
    "range_flattens": _list_of(_optional(_as_bool), flatten=True),
    "static_ranges": _list_of(_as_bool, flatten=True),
    "num_warps": _positive_int,
    "num_stages": _nonnegative_int,
    "pid_type": _choice(PID_TYPES),
    "num_sm_multiplier": _positive_int,
    "maxnreg": _positive_int,
    "indexing": _scalar_or_list(_choice(INDEXING_TYPES)),
    "atomic_indexing": _scalar_or_list(_choice(INDEXING_TYPES)),
    "load_eviction_policies": _list_of(_choice(EVICTION_POLICIES), flatten=True),
    "load_cache_modifiers": _list_of(_choice(LOAD_CACHE_MODIFIERS), flatten=True),
    "store_cache_modifiers": _list_of(_choice(STORE_CACHE_MODIFIERS), flatten=True),
    "advanced_controls_file": _as_str,
    "epilogue_subtile": _positive_int,
    "xcd_remap": _as_bool,
    "num_threads": _scalar_or_list(_nonnegative_int),
}

#: Named Config fields, in canonical order.
CONFIG_FIELDS: tuple[str, ...] = tuple(_VALIDATORS)

#: Fields whose value is one entry per loop / dimension / memory op.
LIST_FIELDS: frozenset[str] = frozenset(
    {
        "block_sizes",
        "loop_orders",
        "flatten_loops",
        "l2_groupings",
        "reduction_loops",
        "range_unroll_factors",
        "range_warp_specializes",
        "range_num_stages",
        "range_multi_buffers",
        "range_flattens",
        "static_ranges",
        "indexing",
        "atomic_indexing",
        "load_eviction_policies",
        "load_cache_modifiers",
        "store_cache_modifiers",
        "num_threads",
    }
)

#: Singular spellings accepted in configs; ConfigSpec.normalize turns them into the plural key.
SINGULAR_ALIASES: dict[str, str] = {
    "block_size": "block_sizes",
    "loop_order": "loop_orders",
    "reduction_loop": "reduction_loops",
    "l2_grouping": "l2_groupings",
    "flatten_loop": "flatten_loops",
    "range_unroll_factor": "range_unroll_factors",
    "range_warp_specialize": "range_warp_specializes",
    "range_num_stage": "range_num_stages",
    "range_multi_buffer": "range_multi_buffers",
    "range_flatten": "range_flattens",
    "static_range": "static_ranges",
}

#: Values a Config reports for fields it does not store (attribute access only).
FIELD_DEFAULTS: dict[str, object] = {
    "num_warps": 4,
    "num_stages": 1,
    "pid_type": "flat",
    "num_sm_multiplier": 1,
    "maxnreg": None,
    "indexing": "pointer",
    "atomic_indexing": "pointer",
    "advanced_controls_file": "",
    "epilogue_subtile": None,
    "xcd_remap": False,
    "num_threads": None,
}


def _validate_alias(alias: str, value: object) -> object:
    plural = SINGULAR_ALIASES[alias]
    if plural == "loop_orders":
        return _loop_orders(value)
    element = _list_of(_identity, flatten=True)
    return _VALIDATORS[plural](element(value) if _is_seq(value) else [value])


def _identity(value: object) -> object:
    return value


def _plain(value: object) -> object:
    # Stored values are JSON-shaped: tuples become lists so equality survives a JSON round trip.
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _freeze(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


_IMMUTABLE_HINT = (
    "helion.Config is immutable; build a new one, "
    "e.g. helion.Config(**{**config, 'block_sizes': [64, 32]})"
)


def _refuse(self: object, *args: object, **kwargs: object) -> Any:
    raise TypeError(_IMMUTABLE_HINT)


class _FrozenList(list):
    """A list value stored in a Config: equal to, printed and JSON-encoded as a plain list, but
    not changeable (the Config's hash and every compiled variant keyed by it depend on it).
    Copies (``list(x)``, ``x.copy()``, ``x[:]``, ``copy.copy(x)``, pickling) are plain lists."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


class _FrozenDict(dict):
    """The stored key/value table of a Config (``config.config``): a dict that cannot change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    pop = popitem = clear = update = setdefault = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


def _store(value: object) -> object:
    """The stored (frozen) form of a JSON-shaped value; tuples become (frozen) lists."""
    if isinstance(value, (list, tuple)):
        return _FrozenList([_store(v) for v in value])
    if isinstance(value, dict):
        return _FrozenDict({k: _store(v) for k, v in value.items()})
    return value


def _thaw(value: object) -> object:
    """What readers of a Config get: a fresh plain copy of a stored list or dict."""
    if isinstance(value, (_FrozenList, _FrozenDict)):
        return _plain(value)
    return value


class Config(Mapping[str, object]):
    """A kernel configuration: block sizes, loop orders, warps, ... plus user/backend keys.

    Only values that are not ``None`` are stored. Extra keyword arguments are kept as-is
    (``hl.register_tunable`` names, backend tunables, singular aliases like ``block_size``).
    Nothing changes a Config after construction (its hash keys compiled variants and caches):
    ``config[key]`` and the typed accessors return fresh plain lists, and ``config.config``
    is read-only. Build a variant with ``Config(**{**config, "block_sizes": [...]})``.
    """

    __slots__ = ("_hash", "config")

    #: The stored values (read-only: a dict whose lists cannot change). Reading through the
    #: Mapping protocol or the typed accessors gives fresh plain lists instead.
    config: dict[str, Any]

    def __init__(
        self,
        *,
        block_sizes: list[int] | None = None,
        loop_orders: list[list[int]] | None = None,
        flatten_loops: list[bool] | None = None,
        l2_groupings: list[int] | None = None,
        reduction_loops: list[int | None] | None = None,
        range_unroll_factors: list[int] | None = None,
        range_warp_specializes: list[bool | None] | None = None,
        range_num_stages: list[int] | None = None,
        range_multi_buffers: list[bool | None] | None = None,
        range_flattens: list[bool | None] | None = None,
        static_ranges: list[bool] | None = None,
        num_warps: int | None = None,
        num_stages: int | None = None,
        pid_type: PidTypeLiteral | None = None,
        num_sm_multiplier: int | None = None,
        maxnreg: int | None = None,
        indexing: IndexingLiteral | list[IndexingLiteral] | None = None,
        atomic_indexing: IndexingLiteral | list[IndexingLiteral] | None = None,
        load_eviction_policies: list[EvictionPolicyLiteral] | None = None,
        load_cache_modifiers: list[str] | None = None,
        store_cache_modifiers: list[str] | None = None,
        advanced_controls_file: str | None = None,
        epilogue_subtile: int | None = None,
        xcd_remap: bool | None = None,
        num_threads: int | list[int] | None = None,
        **kwargs: object,
    ) -> None:
        named = {
            "block_sizes": block_sizes,
            "loop_orders": loop_orders,
            "flatten_loops": flatten_loops,
            "l2_groupings": l2_groupings,
            "reduction_loops": reduction_loops,
            "range_unroll_factors": range_unroll_factors,
            "range_warp_specializes": range_warp_specializes,
            "range_num_stages": range_num_stages,
            "range_multi_buffers": range_multi_buffers,
            "range_flattens": range_flattens,
            "static_ranges": static_ranges,
            "num_warps": num_warps,
            "num_stages": num_stages,
            "pid_type": pid_type,
            "num_sm_multiplier": num_sm_multiplier,
            "maxnreg": maxnreg,
            "indexing": indexing,
            "atomic_indexing": atomic_indexing,
            "load_eviction_policies": load_eviction_policies,
            "load_cache_modifiers": load_cache_modifiers,
            "store_cache_modifiers": store_cache_modifiers,
            "advanced_controls_file": advanced_controls_file,
            "epilogue_subtile": epilogue_subtile,
            "xcd_remap": xcd_remap,
            "num_threads": num_threads,
        }
        config: dict[str, Any] = {}
        for key, given in named.items():
            if given is None:
                continue
            try:
                config[key] = _VALIDATORS[key](given)
            except ValueError as error:
                raise exc.InvalidConfig(f"Invalid config value {key}={given!r}: {error}") from None
        for key, value in kwargs.items():
            if value is None:
                continue
            if key in SINGULAR_ALIASES:
                try:
                    _validate_alias(key, value)
                except ValueError as error:
                    raise exc.InvalidConfig(
                        f"Invalid config value {key}={value!r}: {error}"
                    ) from None
            config[key] = value
        object.__setattr__(self, "config", _store(config))

    # -- Mapping protocol ----------------------------------------------------------------------

    def __getitem__(self, key: str) -> object:
        # a fresh list each time: changing it must not change this config (nor its hash)
        return _thaw(self.config[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self.config)

    def __len__(self) -> int:
        return len(self.config)

    def __contains__(self, key: object) -> bool:
        return key in self.config

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return self.config == other.config

    def __hash__(self) -> int:
        # configs are immutable and used as dict keys on the call path: hash once
        try:
            return self._hash
        except AttributeError:
            value = hash(_freeze(self.config))
            object.__setattr__(self, "_hash", value)
            return value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            "helion.Config is immutable; build a new one, e.g. helion.Config(**{**config, 'num_warps': 8})"
        )

    def __delattr__(self, name: str) -> None:
        raise AttributeError("helion.Config is immutable")

    def __getstate__(self) -> dict[str, object]:
        return _plain(self.config)  # type: ignore[return-value]

    def __setstate__(self, state: dict[str, object]) -> None:
        object.__setattr__(self, "config", _store(dict(state)))

    def __copy__(self) -> Config:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Config:
        return Config.from_dict(json.loads(json.dumps(self.config)))

    # -- text forms ----------------------------------------------------------------------------

    def _format_items(self, keys: list[str]) -> str:
        plain = [k for k in keys if k.isidentifier() and not keyword.iskeyword(k)]
        odd = {k: self.config[k] for k in keys if k not in plain}
        parts = [f"{k}={self.config[k]!r}" for k in plain]
        if odd:
            parts.append(f"**{odd!r}")
        return ", ".join(parts)

    def __str__(self) -> str:
        return f"Config({self._format_items(sorted(self.config))})"

    def __repr__(self) -> str:
        return f"helion.Config({self._format_items(list(self.config))})"

    # -- serialization -------------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(self.config, indent=2)

    @classmethod
    def from_json(cls, text: str) -> Config:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise exc.InvalidConfig(f"Config JSON is malformed: {error}") from None
        if not isinstance(data, dict):
            raise exc.InvalidConfig(f"Config JSON must be an object, got {type(data).__name__}")
        return cls(**data)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Config:
        """Build without validation (for trusted sources such as the autotuner's own output)."""
        obj = cls.__new__(cls)
        object.__setattr__(obj, "config", _store({k: v for k, v in data.items() if v is not None}))
        return obj

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write JSON atomically: readers see the old file or the new one, never half of one."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(self.to_json())
                f.write("\n")
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        return cls.from_json(Path(path).read_text())

    # -- spec-relative helpers -----------------------------------------------------------------

    def minimize(self, config_spec: ConfigSpec) -> Config:
        """Drop every value equal to the spec default (``block_sizes`` is always kept)."""
        normalized = config_spec.normalize(self)
        defaults = config_spec.default_config()
        kept = {
            key: value
            for key, value in normalized.config.items()
            if key == "block_sizes" or defaults.config.get(key) != value
        }
        return Config.from_dict(kept)

    # -- typed accessors (defaults for fields not stored) -------------------------------------

    def _list(self, key: str) -> list[Any]:
        value = self.config.get(key)
        return _plain(value) if isinstance(value, list) else []  # type: ignore[return-value]

    @property
    def block_sizes(self) -> list[int]:
        return self._list("block_sizes")

    @property
    def loop_orders(self) -> list[list[int]]:
        return self._list("loop_orders")

    @property
    def flatten_loops(self) -> list[bool]:
        return self._list("flatten_loops")

    @property
    def l2_groupings(self) -> list[int]:
        return self._list("l2_groupings")

    @property
    def reduction_loops(self) -> list[int | None]:
        return self._list("reduction_loops")

    @property
    def range_unroll_factors(self) -> list[int]:
        return self._list("range_unroll_factors")

    @property
    def range_warp_specializes(self) -> list[bool | None]:
        return self._list("range_warp_specializes")

    @property
    def range_num_stages(self) -> list[int]:
        return self._list("range_num_stages")

    @property
    def range_multi_buffers(self) -> list[bool | None]:
        return self._list("range_multi_buffers")

    @property
    def range_flattens(self) -> list[bool | None]:
        return self._list("range_flattens")

    @property
    def static_ranges(self) -> list[bool]:
        return self._list("static_ranges")

    @property
    def load_eviction_policies(self) -> list[str]:
        return self._list("load_eviction_policies")

    @property
    def load_cache_modifiers(self) -> list[str]:
        return self._list("load_cache_modifiers")

    @property
    def store_cache_modifiers(self) -> list[str]:
        return self._list("store_cache_modifiers")

    @property
    def num_warps(self) -> int:
        return self.config.get("num_warps", FIELD_DEFAULTS["num_warps"])

    @property
    def num_stages(self) -> int:
        return self.config.get("num_stages", FIELD_DEFAULTS["num_stages"])

    @property
    def pid_type(self) -> str:
        return self.config.get("pid_type", FIELD_DEFAULTS["pid_type"])

    @property
    def num_sm_multiplier(self) -> int:
        return self.config.get("num_sm_multiplier", 1)

    @property
    def maxnreg(self) -> int | None:
        return self.config.get("maxnreg")

    @property
    def indexing(self) -> str | list[str]:
        return _thaw(self.config.get("indexing", FIELD_DEFAULTS["indexing"]))  # type: ignore[return-value]

    @property
    def atomic_indexing(self) -> str | list[str]:
        return _thaw(self.config.get("atomic_indexing", FIELD_DEFAULTS["atomic_indexing"]))  # type: ignore[return-value]

    @property
    def advanced_controls_file(self) -> str:
        return self.config.get("advanced_controls_file", "")

    @property
    def epilogue_subtile(self) -> int | None:
        return self.config.get("epilogue_subtile")

    @property
    def xcd_remap(self) -> bool:
        return self.config.get("xcd_remap", False)

    @property
    def num_threads(self) -> int | list[int] | None:
        return _thaw(self.config.get("num_threads"))  # type: ignore[return-value]

    def indexing_for(self, index: int) -> str:
        """Indexing mode of the ``index``-th load/store site (a string applies to all)."""
        value = self.config.get("indexing", FIELD_DEFAULTS["indexing"])  # stored form: no copy
        if isinstance(value, list):
            return value[index] if index < len(value) else "pointer"
        return value
