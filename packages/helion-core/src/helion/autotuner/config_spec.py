"""``ConfigSpec``: the search space of one bound kernel.

A spec is an ordered collection of named fields. A field is either

* a **scalar field**: one fragment, one value (``num_warps``, ``pid_type``, user tunables, ...), or
* a **list field**: one fragment per item (``block_sizes`` has one per autotuned tile dimension,
  ``loop_orders`` one per multi-dimensional loop, ``indexing`` one per memory op, ...).

Passes build the core fields from the Kernel IR, backends add or remove their own, and
``hl.register_tunable`` adds user fields. Everything else in the autotuner works only through
the generic API here (default / random / neighbors / encode / decode / normalize), so searches
never depend on which tunables exist.

Invariant: every Config produced by :meth:`default_config`, :meth:`random_config`,
:meth:`neighbors` and :meth:`decode` is a fixed point of :meth:`normalize`.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import math
import random as _random
import types
from typing import Any
from typing import Iterable
from typing import Iterator
from typing import Mapping
from typing import Sequence

from helion import exc
from helion.autotuner.config_fragment import BlockSizeFragment
from helion.autotuner.config_fragment import BooleanFragment
from helion.autotuner.config_fragment import ConfigSpecFragment
from helion.autotuner.config_fragment import EnumFragment
from helion.autotuner.config_fragment import IntegerFragment
from helion.autotuner.config_fragment import PowerOfTwoFragment
from helion.runtime.config import CONFIG_FIELDS
from helion.runtime.config import INDEXING_TYPES
from helion.runtime.config import LIST_FIELDS
from helion.runtime.config import PID_TYPES
from helion.runtime.config import SINGULAR_ALIASES
from helion.runtime.config import Config

#: Search ranges of the standard tunables (reference §3); used when append/set_scalar get no fragment.
STANDARD_FRAGMENTS: dict[str, ConfigSpecFragment] = {
    "flatten_loops": BooleanFragment(),
    "l2_groupings": PowerOfTwoFragment(1, 64, 1),
    "range_unroll_factors": IntegerFragment(0, 4, 0),
    "range_warp_specializes": EnumFragment((None, False, True)),
    "range_num_stages": IntegerFragment(0, 4, 0),
    "range_multi_buffers": EnumFragment((None, False, True)),
    "range_flattens": EnumFragment((None, False, True)),
    "static_ranges": BooleanFragment(),
    "num_warps": PowerOfTwoFragment(1, 32, 4),
    "num_stages": IntegerFragment(1, 8, 1),
    "pid_type": EnumFragment(PID_TYPES),
    "num_sm_multiplier": PowerOfTwoFragment(1, 128, 1),
    "maxnreg": EnumFragment((None, 32, 64, 128, 256)),
    "indexing": EnumFragment(INDEXING_TYPES),
    "atomic_indexing": EnumFragment(("pointer", "tensor_descriptor")),
    "load_eviction_policies": EnumFragment(("", "first", "last")),
    "load_cache_modifiers": EnumFragment(("", ".cg")),
    "store_cache_modifiers": EnumFragment(("", ".cs", ".wt")),
    "advanced_controls_file": EnumFragment(("",)),
    "epilogue_subtile": EnumFragment((None, 2, 4)),
    "xcd_remap": BooleanFragment(),
}

#: List fields whose length is fixed by the kernel's structure: when the spec has no such field
#: the kernel has zero entries, so a non-empty value in a config is an error.
STRUCTURAL_FIELDS: frozenset[str] = frozenset(
    {"block_sizes", "loop_orders", "flatten_loops", "l2_groupings", "reduction_loops"}
)

#: List fields that accept one scalar meaning "the same for every entry".
BROADCAST_FIELDS: frozenset[str] = frozenset({"indexing", "atomic_indexing", "num_threads"})

#: The per-loop ``tl.range`` options. Public Helion gives them one more leading entry, for the
#: top-level loop (persistent kernels range over tiles with it); here they are per inner loop.
OUTER_SLOT_FIELDS: frozenset[str] = frozenset(
    {
        "range_unroll_factors",
        "range_num_stages",
        "range_multi_buffers",
        "range_flattens",
        "range_warp_specializes",
    }
)

#: Config list fields whose entries are scalars, so nested lists are flattened.
_FLAT_LIST_FIELDS: frozenset[str] = LIST_FIELDS - {"loop_orders"}
#: Config fields that can only be scalars.
_SCALAR_CONFIG_FIELDS: frozenset[str] = frozenset(CONFIG_FIELDS) - LIST_FIELDS
#: Config fields that can only be lists.
_LIST_ONLY_FIELDS: frozenset[str] = LIST_FIELDS - BROADCAST_FIELDS

_BUILTIN_KEYS: frozenset[str] = frozenset(CONFIG_FIELDS) | frozenset(SINGULAR_ALIASES)
_CANONICAL_ORDER = {name: i for i, name in enumerate(CONFIG_FIELDS)}

_MISSING = object()


@dataclasses.dataclass
class ScalarField:
    fragment: ConfigSpecFragment

    @property
    def fragments(self) -> list[ConfigSpecFragment]:
        return [self.fragment]


@dataclasses.dataclass
class ListField:
    fragments: list[ConfigSpecFragment] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.fragments)


Field = ScalarField | ListField


@dataclasses.dataclass(frozen=True)
class FlatEntry:
    """One tunable value: field ``name``, item ``index`` (None for scalar fields), its fragment."""

    name: str
    index: int | None
    fragment: ConfigSpecFragment


def _flatten(value: object) -> list[object]:
    if isinstance(value, (list, tuple)):
        out: list[object] = []
        for item in value:
            out.extend(_flatten(item))
        return out
    return [value]


def is_builtin_key(name: str) -> bool:
    """Whether ``name`` is a config key of Helion's (or a singular alias of one), which
    ``hl.register_tunable`` may not take."""
    return name in _BUILTIN_KEYS


def _as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


class ConfigSpec:
    """Ordered named fields of fragments; see the module docstring."""

    def __init__(self) -> None:
        self._fields: dict[str, Field] = {}
        self._removed: set[str] = set()
        self._user_tunables: list[str] = []
        self._restrict_reasons: dict[str, str] = {}
        self._item_reasons: dict[tuple[str, int], str] = {}
        #: Leading entries of public Helion's ``range_*`` lists that belong to the top-level loop
        #: (1 for a kernel with one top-level loop): a list that long has them dropped, so a
        #: config written for public Helion loads.
        self.outer_range_slots = 0
        #: Heuristic defaults set by passes/backends: ``{"block_sizes": [64, 32], "num_warps": 8}``.
        #: List overrides replace the first ``len(override)`` defaults; invalid values are clamped.
        self.default_overrides: dict[str, object] = {}

    # -- building ----------------------------------------------------------------------------

    @property
    def fields(self) -> Mapping[str, Field]:
        return types.MappingProxyType(self._fields)

    def __contains__(self, name: object) -> bool:
        return name in self._fields

    def __getitem__(self, name: str) -> Field:
        return self._fields[name]

    def __len__(self) -> int:
        return len(self._fields)

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    @property
    def user_tunables(self) -> tuple[str, ...]:
        return tuple(self._user_tunables)

    @property
    def block_sizes(self) -> list[ConfigSpecFragment]:
        field = self._fields.get("block_sizes")
        return list(field.fragments) if field is not None else []

    def length(self, name: str) -> int:
        """Number of items of a list field (0 when absent); 1 for a scalar field."""
        field = self._fields.get(name)
        if field is None:
            return 0
        return len(field) if isinstance(field, ListField) else 1

    def add_block_size(
        self,
        size_hint: int,
        *,
        min_size: int = 1,
        max_size: int | None = None,
        default: int | None = None,
    ) -> int:
        """Append a tile size for a dimension of extent ``size_hint``; returns its index."""
        if max_size is None:
            max_size = size_hint
        fragment = BlockSizeFragment(min_size, max_size, default, size_hint=size_hint)
        return self.append("block_sizes", fragment)

    def append(self, name: str, fragment: ConfigSpecFragment | None = None) -> int:
        """Append an item to list field ``name`` (created if needed); returns its index."""
        if name in SINGULAR_ALIASES:
            raise ValueError(f"use the plural field name {SINGULAR_ALIASES[name]!r}, not {name!r}")
        if name in _SCALAR_CONFIG_FIELDS:
            raise ValueError(f"{name!r} is a scalar config field; use set_scalar()")
        fragment = self._fragment_for(name, fragment)
        field = self._fields.get(name)
        if field is None:
            field = self._fields[name] = ListField()
            self._removed.discard(name)
        elif not isinstance(field, ListField):
            raise ValueError(f"{name!r} is a scalar field of this spec; use set_scalar()")
        field.fragments.append(fragment)
        return len(field.fragments) - 1

    def set_item(
        self, name: str, index: int, fragment: ConfigSpecFragment, *, reason: str | None = None
    ) -> None:
        """Replace item ``index`` of list field ``name`` (e.g. raise a block size's minimum).

        ``reason`` is appended to the error when a config gives this item a value the new
        fragment does not accept.
        """
        field = self._fields.get(name)
        if not isinstance(field, ListField):
            raise KeyError(f"{name!r} is not a list field of this spec")
        field.fragments[index] = self._fragment_for(name, fragment)
        if reason:
            self._item_reasons[(name, index)] = reason
        else:
            self._item_reasons.pop((name, index), None)

    def set_scalar(self, name: str, fragment: ConfigSpecFragment | None = None) -> None:
        """Add or replace scalar field ``name``."""
        if name in _LIST_ONLY_FIELDS or name in SINGULAR_ALIASES:
            raise ValueError(f"{name!r} is a list config field; use append()")
        if name in self._user_tunables:
            raise exc.TunableNameConflict(name)
        fragment = self._fragment_for(name, fragment)
        self._check_scalar_none(name, fragment)
        self._fields[name] = ScalarField(fragment)
        self._removed.discard(name)

    def add_user_tunable(self, name: str, fragment: ConfigSpecFragment) -> None:
        """Register an ``hl.register_tunable`` name; built-in or backend keys may not be reused."""
        if not isinstance(name, str) or not isinstance(fragment, ConfigSpecFragment):
            raise exc.RegisterTunableArgTypes(type(name).__name__, type(fragment).__name__)
        if name in _BUILTIN_KEYS:
            raise exc.TunableNameConflict(name)
        existing = self._fields.get(name)
        if existing is not None:
            if (
                name in self._user_tunables
                and isinstance(existing, ScalarField)
                and existing.fragment == fragment
            ):
                return  # the same registration seen again (e.g. a retrace)
            raise exc.TunableNameConflict(name)
        self._check_scalar_none(name, fragment)
        self._fields[name] = ScalarField(fragment)
        self._user_tunables.append(name)

    def remove(self, name: str) -> None:
        """Drop a field (a backend that lacks the feature); configs naming it are then accepted
        and the key silently dropped."""
        self._fields.pop(name, None)
        if name in self._user_tunables:
            self._user_tunables.remove(name)
        self._removed.add(name)
        self._item_reasons = {key: v for key, v in self._item_reasons.items() if key[0] != name}

    def restrict(
        self, name: str, allowed_values: Iterable[object], *, reason: str | None = None
    ) -> None:
        """Allow only ``allowed_values`` for ``name`` (every item of a list field).

        ``reason`` is appended to the error when a config uses a value that was removed.
        """
        field = self._fields.get(name)
        if field is None:
            raise KeyError(f"{name!r} is not a field of this spec")
        allowed = list(allowed_values)
        try:
            if isinstance(field, ScalarField):
                field.fragment = field.fragment.restrict(allowed)
            else:
                field.fragments = [f.restrict(allowed) for f in field.fragments]
        except ValueError as error:
            raise ValueError(f"cannot restrict {name!r}: {error}") from None
        if reason:
            self._restrict_reasons[name] = reason

    def copy(self) -> ConfigSpec:
        other = ConfigSpec()
        other._fields = {
            name: ScalarField(f.fragment)
            if isinstance(f, ScalarField)
            else ListField(list(f.fragments))
            for name, f in self._fields.items()
        }
        other._removed = set(self._removed)
        other._user_tunables = list(self._user_tunables)
        other._restrict_reasons = dict(self._restrict_reasons)
        other._item_reasons = dict(self._item_reasons)
        other.default_overrides = dict(self.default_overrides)
        other.outer_range_slots = self.outer_range_slots
        return other

    @staticmethod
    def _check_scalar_none(name: str, fragment: ConfigSpecFragment) -> None:
        # A Config never stores None, so an omitted scalar must mean "None": None can only be
        # a value of a scalar field whose default is None.
        if fragment.is_valid(None) and fragment.default() is not None:
            raise ValueError(
                f"scalar field {name!r}: a fragment that allows None must have None as its default"
            )

    @staticmethod
    def _fragment_for(name: str, fragment: ConfigSpecFragment | None) -> ConfigSpecFragment:
        if fragment is None:
            fragment = STANDARD_FRAGMENTS.get(name)
            if fragment is None:
                raise ValueError(f"no standard fragment for {name!r}; pass one explicitly")
        if not isinstance(fragment, ConfigSpecFragment):
            raise exc.TunableTypeNotSupported(type(fragment).__name__)
        return fragment

    # -- iteration helpers -----------------------------------------------------------------

    def _ordered_names(self) -> list[str]:
        # Core fields in Config's canonical order, then backend and user fields as added.
        last = len(_CANONICAL_ORDER)
        ranked = sorted(
            enumerate(self._fields), key=lambda item: (_CANONICAL_ORDER.get(item[1], last), item[0])
        )
        return [name for _, name in ranked]

    def flat_fields(self) -> list[FlatEntry]:
        """Every tunable value in a fixed order (the order of encode/flatten)."""
        out = []
        for name in self._ordered_names():
            field = self._fields[name]
            if isinstance(field, ScalarField):
                out.append(FlatEntry(name, None, field.fragment))
            else:
                out.extend(FlatEntry(name, i, f) for i, f in enumerate(field.fragments))
        return out

    def _build(self, values: Mapping[str, object]) -> Config:
        """Config from canonical values: empty lists and None scalars are left out."""
        out: dict[str, object] = {}
        for name in self._ordered_names():
            value = values.get(name, _MISSING)
            if value is _MISSING or value is None:
                continue
            if isinstance(self._fields[name], ListField) and not value:
                continue
            out[name] = value
        return Config.from_dict(out)

    def _default_item(self, name: str, index: int | None, fragment: ConfigSpecFragment) -> object:
        override = self.default_overrides.get(name, _MISSING)
        if override is not _MISSING and index is not None and isinstance(override, (list, tuple)):
            override = override[index] if index < len(override) else _MISSING
        if override is _MISSING:
            return fragment.default()
        if index is None and override is not None and fragment.is_valid(None):
            raise ValueError(
                f"default_overrides[{name!r}] must be None: the field allows None, which a "
                "Config expresses by leaving the key out"
            )
        try:
            return fragment.normalize(override)
        except (ValueError, TypeError):
            return fragment.clamp(override)

    # -- configs ------------------------------------------------------------------------------

    def default_config(self) -> Config:
        values: dict[str, object] = {}
        for name in self._ordered_names():
            field = self._fields[name]
            if isinstance(field, ScalarField):
                values[name] = self._default_item(name, None, field.fragment)
            else:
                values[name] = [
                    self._default_item(name, i, f) for i, f in enumerate(field.fragments)
                ]
        return self._build(values)

    def random_config(self, rng: _random.Random | None = None) -> Config:
        rng = rng if rng is not None else _random.Random()
        values: dict[str, object] = {}
        for name in self._ordered_names():
            field = self._fields[name]
            if isinstance(field, ScalarField):
                values[name] = field.fragment.random(rng)
            else:
                values[name] = [f.random(rng) for f in field.fragments]
        return self._build(values)

    def neighbors(self, config: Config | Mapping[str, object], radius: int = 1) -> list[Config]:
        """Configs differing from ``config`` in exactly one value, by one step of that fragment."""
        base = dict(self.normalize(config).config)
        full = self._full_values(base)
        out = []
        for entry in self.flat_fields():
            current = full[entry.name] if entry.index is None else full[entry.name][entry.index]
            for candidate in entry.fragment.neighbors(current, radius):
                changed = dict(full)
                if entry.index is None:
                    changed[entry.name] = candidate
                else:
                    items = list(full[entry.name])
                    items[entry.index] = candidate
                    changed[entry.name] = items
                out.append(self._build(changed))
        return out

    def _full_values(self, normalized: Mapping[str, Any]) -> dict[str, Any]:
        # A normalized config omits None scalars and empty lists; put them back for editing.
        full: dict[str, Any] = {}
        for name, field in self._fields.items():
            if isinstance(field, ScalarField):
                full[name] = normalized.get(name)
            else:
                full[name] = list(normalized.get(name, []))
        return full

    # -- numeric views for searches ---------------------------------------------------------

    @property
    def encoded_dims(self) -> int:
        return sum(e.fragment.encoded_dims for e in self.flat_fields())

    def encode(self, config: Config | Mapping[str, object]) -> list[float]:
        """Numeric vector (entries in [0, 1]) of ``config``, for surrogate models."""
        data = config.config if isinstance(config, Config) else config
        if not set(data) <= set(self._fields):
            data = self.normalize(config).config
        out: list[float] = []
        for entry in self.flat_fields():
            value = data.get(entry.name, _MISSING)
            if entry.index is not None:
                items = value if isinstance(value, list) else []
                value = items[entry.index] if entry.index < len(items) else _MISSING
            if value is _MISSING:
                value = self._default_item(entry.name, entry.index, entry.fragment)
            out.extend(entry.fragment.encode(value))
        return out

    def decode(self, vec: Sequence[float]) -> Config:
        """Config nearest to a numeric vector; any vector of ``encoded_dims`` numbers decodes."""
        entries = self.flat_fields()
        expected = sum(e.fragment.encoded_dims for e in entries)
        if len(vec) != expected:
            raise ValueError(f"expected a vector of {expected} numbers, got {len(vec)}")
        values: dict[str, Any] = {
            name: None if isinstance(field, ScalarField) else [None] * len(field)
            for name, field in self._fields.items()
        }
        pos = 0
        for entry in entries:
            dims = entry.fragment.encoded_dims
            value = entry.fragment.decode(list(vec[pos : pos + dims]))
            pos += dims
            if entry.index is None:
                values[entry.name] = value
            else:
                values[entry.name][entry.index] = value
        return self._build(values)

    def flatten(self, config: Config | Mapping[str, object]) -> list[object]:
        """Values of ``config`` in :meth:`flat_fields` order (defaults filled in)."""
        full = self._full_values(self.normalize(config).config)
        return [
            full[e.name] if e.index is None else full[e.name][e.index] for e in self.flat_fields()
        ]

    def unflatten(self, values: Sequence[object]) -> Config:
        """Inverse of :meth:`flatten`; values are normalized (invalid ones raise InvalidConfig)."""
        entries = self.flat_fields()
        if len(values) != len(entries):
            raise ValueError(f"expected {len(entries)} values, got {len(values)}")
        raw: dict[str, Any] = {}
        for entry, value in zip(entries, values, strict=True):
            if entry.index is None:
                raw[entry.name] = value
            else:
                raw.setdefault(entry.name, []).append(value)
        return self.normalize(raw)

    def config_size(self) -> int:
        """Number of distinct configs the search can produce (product of fragment sizes)."""
        return math.prod(e.fragment.size() for e in self.flat_fields())

    def fingerprint(self) -> str:
        """Stable hash of the search space (fields, fragments, defaults) for cache keys."""
        parts = [f"{e.name}[{e.index}]={e.fragment!r}" for e in self.flat_fields()]
        parts.append(f"defaults={self.default_config()!r}")
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]

    # -- normalize ---------------------------------------------------------------------------

    def normalize(self, config: Config | Mapping[str, object]) -> Config:
        """Check ``config`` against this kernel and return its canonical form.

        Singular aliases become plural lists, missing entries get defaults (except block
        sizes), values are checked by their fragments, common keys this backend lacks are
        dropped. Raises :class:`helion.exc.InvalidConfig` with the reason otherwise.
        """
        if isinstance(config, Config):
            raw = dict(config.config)
        elif isinstance(config, Mapping):
            raw = {k: v for k, v in config.items() if v is not None}
        else:
            raise exc.InvalidConfig(
                f"Expected a helion.Config or dict, got {type(config).__name__}"
            )

        self._expand_aliases(raw)
        self._drop_unknown(raw)

        values: dict[str, object] = {}
        for name in self._ordered_names():
            field = self._fields[name]
            value = raw.get(name, _MISSING)
            if isinstance(field, ScalarField):
                values[name] = self._normalize_scalar(name, field, value)
            else:
                values[name] = self._normalize_list(name, field, value)
        return self._build(values)

    def _expand_aliases(self, raw: dict[str, object]) -> None:
        for alias, plural in SINGULAR_ALIASES.items():
            if alias not in raw:
                continue
            value = raw.pop(alias)
            if plural in raw:
                raise exc.InvalidConfig(
                    f"Config has both {alias!r} and {plural!r}; give only one of them ({plural!r} is preferred)"
                )
            if value is None:
                continue
            if plural == "loop_orders":
                raw[plural] = value
            elif plural == "reduction_loops" and not isinstance(value, (list, tuple)):
                # One chunk size for every reduction dimension.
                raw[plural] = [value] * max(self.length(plural), 1)
            else:
                raw[plural] = _flatten(value)

    def _drop_unknown(self, raw: dict[str, object]) -> None:
        for key in list(raw):
            if key in self._fields:
                continue
            value = raw[key]
            if key in STRUCTURAL_FIELDS and key not in self._removed:
                items = _flatten(value) if key != "loop_orders" else _as_list(value)
                if items:
                    raise exc.InvalidConfig(self._too_many_message(key, 0, len(items)))
                del raw[key]
            elif key in CONFIG_FIELDS or key in self._removed:
                del raw[key]  # a common key this backend/kernel does not use
            else:
                valid = sorted(self._fields)
                close = difflib.get_close_matches(key, [*valid, *SINGULAR_ALIASES], n=1)
                suggestion = f" Did you mean {close[0]!r}?" if close else ""
                raise exc.InvalidConfig(
                    f"Unknown config key {key!r} for this kernel.{suggestion} "
                    f"Valid keys: {', '.join(valid) if valid else '(none)'}"
                )

    @staticmethod
    def _too_many_message(name: str, expected: int, got: int) -> str:
        return f"Too many values for config[{name!r}]: this kernel takes {expected}, got {got}"

    def _item_error(
        self, name: str, index: int | None, value: object, reason: object
    ) -> exc.InvalidConfig:
        where = f"config[{name!r}]" if index is None else f"config[{name!r}][{index}]"
        text = f"Invalid value {where} = {value!r}: {reason}"
        because = self._item_reasons.get((name, index)) if index is not None else None
        because = because or self._restrict_reasons.get(name)
        if because:
            text += f" ({because})"
        return exc.InvalidConfig(text)

    def _normalize_scalar(self, name: str, field: ScalarField, value: object) -> object:
        if value is _MISSING:
            return self._default_item(name, None, field.fragment)
        if name in BROADCAST_FIELDS and isinstance(value, (list, tuple)):
            distinct = {repr(v) for v in value}
            if len(distinct) != 1:
                raise exc.InvalidConfig(
                    f"config[{name!r}] must be a single value for this backend, got {list(value)!r}"
                )
            value = value[0]
        try:
            return field.fragment.normalize(value)
        except (ValueError, TypeError) as error:
            raise self._item_error(name, None, value, error) from None

    def _normalize_list(self, name: str, field: ListField, value: object) -> list[object]:
        count = len(field.fragments)
        if value is _MISSING:
            if name == "block_sizes" and count:
                raise exc.InvalidConfig(self._not_enough_block_sizes(count, 0))
            return [self._default_item(name, i, f) for i, f in enumerate(field.fragments)]
        if not isinstance(value, (list, tuple)):
            if name not in BROADCAST_FIELDS:
                raise exc.InvalidConfig(
                    f"config[{name!r}] must be a list with one entry per item, got {value!r}"
                )
            value = [value] * count
        if name in _FLAT_LIST_FIELDS:
            items = _flatten(value)
        elif (
            name == "loop_orders" and value and not any(isinstance(v, (list, tuple)) for v in value)
        ):
            items = [list(value)]  # loop_orders=[1, 0] is one permutation
        else:
            items = list(value)
        outer = self.outer_range_slots
        if name in OUTER_SLOT_FIELDS and outer and len(items) == count + outer:
            items = items[outer:]  # public Helion's layout: the top-level loop's entry first
        if len(items) > count:
            raise exc.InvalidConfig(self._too_many_message(name, count, len(items)))
        if len(items) < count and name == "block_sizes":
            raise exc.InvalidConfig(self._not_enough_block_sizes(count, len(items)))
        out = []
        for index, fragment in enumerate(field.fragments):
            if index >= len(items):
                out.append(self._default_item(name, index, fragment))
                continue
            try:
                out.append(fragment.normalize(items[index]))
            except (ValueError, TypeError) as error:
                raise self._item_error(name, index, items[index], error) from None
        return out

    @staticmethod
    def _not_enough_block_sizes(expected: int, got: int) -> str:
        return (
            f"Not enough values for config['block_sizes']: expected {expected} "
            f"(one per autotuned hl.tile() dimension and hl.register_block_size() call), got {got}. "
            "Did you forget to specify block sizes for all your hl.tile() dimensions?"
        )

    # -- display -----------------------------------------------------------------------------

    def __repr__(self) -> str:
        lines = ["ConfigSpec("]
        for name in self._ordered_names():
            field = self._fields[name]
            if isinstance(field, ScalarField):
                lines.append(f"  {name}: {field.fragment!r},")
            else:
                lines.append(f"  {name}: [{', '.join(repr(f) for f in field.fragments)}],")
        lines.append(")")
        return "\n".join(lines)


__all__ = [
    "BROADCAST_FIELDS",
    "STANDARD_FRAGMENTS",
    "STRUCTURAL_FIELDS",
    "ConfigSpec",
    "FlatEntry",
    "ListField",
    "ScalarField",
]
