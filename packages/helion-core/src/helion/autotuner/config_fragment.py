"""Typed tunables: the building blocks of a ConfigSpec.

A fragment describes the set of values one config entry may take. Every fragment answers the
same questions so searches never need to know the kind of a tunable:

* ``default()``, ``random(rng)``, ``all_values()`` (``None`` when too many to list), ``size()``;
* ``is_valid(v)`` (is ``v`` a canonical value), ``normalize(v)`` (canonical form of a
  user-written value, or ``ValueError`` with the reason), ``clamp(v)`` (nearest valid value,
  never raises for values of the right type);
* ``neighbors(v, radius=1)`` for pattern search;
* ``encode(v) -> list[float]`` / ``decode(vec)`` with ``encoded_dims`` entries in ``[0, 1]``
  for surrogate models; ``decode`` accepts any vector and returns a valid value, and
  ``decode(encode(v)) == v`` for every valid ``v``.

Fragments are frozen dataclasses: equal fragments compare and hash equal.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random as _random
from typing import Any
from typing import Sequence
from typing import TypeGuard

from helion import exc

_ALL_VALUES_LIMIT = 4096


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def is_power_of_2(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0 and (n & (n - 1)) == 0


def _concrete_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got {value!r}")
    if isinstance(value, int):
        return value
    if type(value).__name__ in ("SymInt", "Symbol") or "sympy" in type(value).__module__:
        raise exc.ConfigSpecFragmentWithSymInt(value)
    try:
        import operator

        return operator.index(value)  # numpy ints and friends
    except TypeError:
        raise TypeError(f"{what} must be an int, got {value!r} ({type(value).__name__})") from None


def _strict_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _same(a: object, b: object) -> bool:
    # 1 == True in Python; configs must keep bools and ints apart.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _index_of(choices: Sequence[object], value: object) -> int:
    for index, choice in enumerate(choices):
        if _same(choice, value):
            return index
    return -1


def _unit(index: int, count: int) -> float:
    return 0.0 if count <= 1 else index / (count - 1)


def _from_unit(x: float, count: int) -> int:
    if count <= 1 or not math.isfinite(x):
        return 0
    return min(max(round(x * (count - 1)), 0), count - 1)


class ConfigSpecFragment:
    """Base class; subclasses implement the ordered-choice or arithmetic interface."""

    # -- values ----------------------------------------------------------------------------

    def default(self) -> Any:
        raise NotImplementedError

    def random(self, rng: _random.Random) -> Any:
        raise NotImplementedError

    def all_values(self) -> list[Any] | None:
        """Every valid value in search order, or None when there are more than a few thousand."""
        return None

    def size(self) -> int:
        """Number of distinct values the search explores."""
        values = self.all_values()
        if values is None:
            raise NotImplementedError
        return len(values)

    # -- validation ------------------------------------------------------------------------

    def is_valid(self, value: object) -> bool:
        raise NotImplementedError

    def normalize(self, value: object) -> Any:
        """Canonical form of a user-supplied value; ``ValueError`` says why it is unacceptable."""
        if self.is_valid(value):
            return value
        raise ValueError(f"{value!r} is not valid for {self!r}")

    def clamp(self, value: object) -> Any:
        return value if self.is_valid(value) else self.default()

    # -- search ----------------------------------------------------------------------------

    def neighbors(self, value: object, radius: int = 1) -> list[Any]:
        raise NotImplementedError

    @property
    def encoded_dims(self) -> int:
        return 1

    def encode(self, value: object) -> list[float]:
        raise NotImplementedError

    def decode(self, vec: Sequence[float]) -> Any:
        raise NotImplementedError

    # -- spec support -----------------------------------------------------------------------

    def restrict(self, allowed: Sequence[object]) -> ConfigSpecFragment:
        """A fragment accepting only ``allowed`` values (those that are valid here)."""
        kept = [v for v in (self.all_values() or list(allowed)) if _index_of(allowed, v) >= 0]
        kept = [v for v in kept if self.is_valid(v)]
        if not kept:
            raise ValueError(f"none of {list(allowed)!r} is valid for {self!r}")
        default = self.default()
        if _index_of(kept, default) > 0:
            kept.remove(default)
            kept.insert(0, default)
        return EnumFragment(tuple(kept))


class _OrderedFragment(ConfigSpecFragment):
    """A fragment over a short ordered list of values (powers of two, enums, ...)."""

    def _values(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def all_values(self) -> list[Any]:
        return list(self._values())

    def size(self) -> int:
        return len(self._values())

    def is_valid(self, value: object) -> bool:
        return _index_of(self._values(), value) >= 0

    def random(self, rng: _random.Random) -> Any:
        return rng.choice(self._values())

    def neighbors(self, value: object, radius: int = 1) -> list[Any]:
        values = self._values()
        index = _index_of(values, value)
        if index < 0:
            index = _index_of(values, self.clamp(value))
        lo, hi = max(index - radius, 0), min(index + radius, len(values) - 1)
        return [values[i] for i in range(lo, hi + 1) if i != index]

    def encode(self, value: object) -> list[float]:
        values = self._values()
        index = _index_of(values, value)
        if index < 0:
            index = _index_of(values, self.clamp(value))
        return [_unit(index, len(values))]

    def decode(self, vec: Sequence[float]) -> Any:
        values = self._values()
        return values[_from_unit(vec[0], len(values))]


def _log2_values(low: int, high: int) -> tuple[int, ...]:
    return tuple(1 << e for e in range(low.bit_length() - 1, high.bit_length()))


@dataclasses.dataclass(frozen=True)
class PowerOfTwoFragment(_OrderedFragment):
    """A power of two in ``[low, high]``; default ``low`` unless ``default_val`` is given."""

    low: int
    high: int
    default_val: int | None = None

    def __post_init__(self) -> None:
        low = _concrete_int(self.low, "low")
        high = _concrete_int(self.high, "high")
        if not is_power_of_2(low) or not is_power_of_2(high):
            raise ValueError(
                f"PowerOfTwoFragment bounds must be powers of two, got [{low}, {high}]"
            )
        if low > high:
            raise ValueError(f"PowerOfTwoFragment low={low} is greater than high={high}")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        if self.default_val is not None:
            default = _concrete_int(self.default_val, "default_val")
            if not is_power_of_2(default) or not low <= default <= high:
                raise ValueError(
                    f"PowerOfTwoFragment default_val={default} is not a power of two in [{low}, {high}]"
                )
            object.__setattr__(self, "default_val", default)

    def _values(self) -> tuple[int, ...]:
        return _log2_values(self.low, self.high)

    def default(self) -> int:
        return self.low if self.default_val is None else self.default_val

    def normalize(self, value: object) -> int:
        if not _strict_int(value):
            raise ValueError(f"expected an int, got {value!r}")
        if not is_power_of_2(value):
            raise ValueError(f"{value} is not a power of two")
        if not self.low <= value <= self.high:
            raise ValueError(f"{value} is outside [{self.low}, {self.high}]")
        return value

    def clamp(self, value: object) -> int:
        if not _strict_int(value) or value <= 0:
            return self.default()
        rounded = 1 << max(round(math.log2(value)), 0)
        return min(max(rounded, self.low), self.high)


class BlockSizeFragment(PowerOfTwoFragment):
    """A tile size: a power of two in ``[min_size, max_size]``.

    Unlike a plain power-of-two tunable, user values below the minimum are raised to it and
    values above the maximum lowered to it (a larger tile only adds masked-off lanes).
    ``min_size`` is rounded up to a power of two; ``max_size`` defaults to
    ``next_power_of_2(size_hint)``; the default is 32 clamped into the range.
    ``size_hint`` (the extent of the tiled dimension) is kept for heuristics and does not take
    part in equality.
    """

    size_hint: int | None

    def __init__(
        self,
        min_size: int = 1,
        max_size: int | None = None,
        default_val: int | None = None,
        size_hint: int | None = None,
    ) -> None:
        low = next_power_of_2(_concrete_int(min_size, "min_size"))
        if max_size is None:
            max_size = next_power_of_2(size_hint) if size_hint is not None else low
        high = max(next_power_of_2(_concrete_int(max_size, "max_size")), low)
        wanted = (
            32
            if default_val is None
            else next_power_of_2(_concrete_int(default_val, "default_val"))
        )
        PowerOfTwoFragment.__init__(self, low, high, min(max(wanted, low), high))
        object.__setattr__(self, "size_hint", size_hint)

    @property
    def min_size(self) -> int:
        return self.low

    @property
    def max_size(self) -> int:
        return self.high

    def __repr__(self) -> str:
        return (
            f"BlockSizeFragment(min_size={self.low}, max_size={self.high}, "
            f"default_val={self.default_val}, size_hint={self.size_hint})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.low, self.high, self.default_val, self.size_hint))

    def normalize(self, value: object) -> int:
        if not _strict_int(value):
            raise ValueError(f"expected an int block size, got {value!r}")
        if not is_power_of_2(value):
            raise ValueError(f"block size {value} is not a power of two")
        return min(max(value, self.low), self.high)


@dataclasses.dataclass(frozen=True)
class IntegerFragment(ConfigSpecFragment):
    """An int in ``[low, high]``; default ``low`` unless ``default_val`` is given."""

    low: int
    high: int
    default_val: int | None = None

    def __post_init__(self) -> None:
        low = _concrete_int(self.low, "low")
        high = _concrete_int(self.high, "high")
        if low > high:
            raise ValueError(f"IntegerFragment low={low} is greater than high={high}")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        if self.default_val is not None:
            default = _concrete_int(self.default_val, "default_val")
            if not low <= default <= high:
                raise ValueError(
                    f"IntegerFragment default_val={default} is outside [{low}, {high}]"
                )
            object.__setattr__(self, "default_val", default)

    def default(self) -> int:
        return self.low if self.default_val is None else self.default_val

    def random(self, rng: _random.Random) -> int:
        return rng.randint(self.low, self.high)

    def all_values(self) -> list[int] | None:
        if self.high - self.low >= _ALL_VALUES_LIMIT:
            return None
        return list(range(self.low, self.high + 1))

    def size(self) -> int:
        return self.high - self.low + 1

    def is_valid(self, value: object) -> bool:
        return _strict_int(value) and self.low <= value <= self.high

    def normalize(self, value: object) -> int:
        if not _strict_int(value):
            raise ValueError(f"expected an int, got {value!r}")
        if not self.low <= value <= self.high:
            raise ValueError(f"{value} is outside [{self.low}, {self.high}]")
        return value

    def clamp(self, value: object) -> int:
        if not _strict_int(value):
            return self.default()
        return min(max(value, self.low), self.high)

    def neighbors(self, value: object, radius: int = 1) -> list[int]:
        center = self.clamp(value)
        lo, hi = max(center - radius, self.low), min(center + radius, self.high)
        return [v for v in range(lo, hi + 1) if v != center]

    def encode(self, value: object) -> list[float]:
        span = self.high - self.low
        return [0.0 if span == 0 else (self.clamp(value) - self.low) / span]

    def decode(self, vec: Sequence[float]) -> int:
        span = self.high - self.low
        x = vec[0] if math.isfinite(vec[0]) else 0.0
        return min(max(self.low + round(x * span), self.low), self.high)


@dataclasses.dataclass(frozen=True)
class EnumFragment(ConfigSpecFragment):
    """One of ``choices`` (default: the first).

    ``search_choices`` (a subset, default all) are the values the autotuner explores; any of
    ``choices`` is still accepted in a hand-written config. Encoded one-hot over ``choices``.
    """

    choices: tuple[Any, ...]
    search_choices: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        choices = tuple(self.choices)
        if not choices:
            raise ValueError("EnumFragment needs at least one choice")
        object.__setattr__(self, "choices", choices)
        if self.search_choices is not None:
            search = tuple(self.search_choices)
            missing = [c for c in search if _index_of(choices, c) < 0]
            if missing or not search:
                raise ValueError(
                    f"EnumFragment search_choices {list(search)!r} must be a non-empty subset of {list(choices)!r}"
                )
            object.__setattr__(self, "search_choices", search)

    def _search(self) -> tuple[Any, ...]:
        return self.search_choices if self.search_choices is not None else self.choices

    def default(self) -> Any:
        return self.choices[0]

    def random(self, rng: _random.Random) -> Any:
        return rng.choice(self._search())

    def all_values(self) -> list[Any]:
        return list(self._search())

    def size(self) -> int:
        return len(self._search())

    def is_valid(self, value: object) -> bool:
        return _index_of(self.choices, value) >= 0

    def normalize(self, value: object) -> Any:
        index = _index_of(self.choices, value)
        if index < 0:
            raise ValueError(f"{value!r} is not one of {list(self.choices)!r}")
        return self.choices[index]

    def neighbors(self, value: object, radius: int = 1) -> list[Any]:
        # Choices are unordered: every other searchable choice is one step away.
        return [c for c in self._search() if not _same(c, value)]

    @property
    def encoded_dims(self) -> int:
        return len(self.choices) if len(self.choices) > 1 else 0

    def encode(self, value: object) -> list[float]:
        if len(self.choices) <= 1:
            return []
        index = _index_of(self.choices, value)
        return [1.0 if i == index else 0.0 for i in range(len(self.choices))]

    def decode(self, vec: Sequence[float]) -> Any:
        search = self._search()
        if len(self.choices) <= 1:
            return self.choices[0]
        best, best_score = search[0], -math.inf
        for choice in search:
            score = vec[_index_of(self.choices, choice)]
            if math.isfinite(score) and score > best_score:
                best, best_score = choice, score
        return best

    def restrict(self, allowed: Sequence[object]) -> EnumFragment:
        kept = tuple(c for c in self.choices if _index_of(allowed, c) >= 0)
        if not kept:
            raise ValueError(f"none of {list(allowed)!r} is one of {list(self.choices)!r}")
        search = None
        if self.search_choices is not None:
            # If every searched choice was removed, search whatever is left.
            search = tuple(c for c in self.search_choices if _index_of(kept, c) >= 0) or None
        return EnumFragment(kept, search)


@dataclasses.dataclass(frozen=True)
class BooleanFragment(_OrderedFragment):
    """False or True (default False)."""

    def _values(self) -> tuple[bool, ...]:
        return (False, True)

    def default(self) -> bool:
        return False

    def normalize(self, value: object) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected a bool, got {value!r}")
        return value

    def clamp(self, value: object) -> bool:
        return value if isinstance(value, bool) else False

    def neighbors(self, value: object, radius: int = 1) -> list[bool]:
        return [not self.clamp(value)]

    def encode(self, value: object) -> list[float]:
        return [1.0 if value is True else 0.0]

    def decode(self, vec: Sequence[float]) -> bool:
        return bool(math.isfinite(vec[0]) and vec[0] >= 0.5)


@dataclasses.dataclass(frozen=True)
class NumThreadsFragment(_OrderedFragment):
    """Threads per axis for thread-level backends: 0 (derive from the block size) or a power
    of two in ``[low, high]``. Default 0."""

    high: int
    low: int = 1
    default_val: int = 0

    def __post_init__(self) -> None:
        high = next_power_of_2(_concrete_int(self.high, "high"))
        low = next_power_of_2(_concrete_int(self.low, "low"))
        if low > high:
            raise ValueError(f"NumThreadsFragment low={low} is greater than high={high}")
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "low", low)
        default = _concrete_int(self.default_val, "default_val")
        if default != 0 and (not is_power_of_2(default) or not low <= default <= high):
            raise ValueError(
                f"NumThreadsFragment default_val={default} must be 0 or a power of two in [{low}, {high}]"
            )
        object.__setattr__(self, "default_val", default)

    def _values(self) -> tuple[int, ...]:
        return (0, *_log2_values(self.low, self.high))

    def default(self) -> int:
        return self.default_val

    def normalize(self, value: object) -> int:
        if not _strict_int(value):
            raise ValueError(f"expected an int thread count, got {value!r}")
        if value != 0 and not is_power_of_2(value):
            raise ValueError(f"thread count {value} must be 0 or a power of two")
        if value != 0 and not self.low <= value <= self.high:
            raise ValueError(f"thread count {value} is outside [{self.low}, {self.high}]")
        return value

    def clamp(self, value: object) -> int:
        if not _strict_int(value) or value <= 0:
            return 0
        rounded = 1 << max(round(math.log2(value)), 0)
        return min(max(rounded, self.low), self.high)


@dataclasses.dataclass(frozen=True)
class ReductionLoopFragment(_OrderedFragment):
    """Chunk size of a looped reduction over a dimension of extent ``size_hint``.

    ``None`` is a persistent reduction (the whole dimension at once); otherwise a power of two
    in ``[8, next_pow2(size_hint))``. In user configs values >= the extent collapse to None and
    values below 8 are raised to 8. Ordered from the smallest chunk to None (= whole dim).
    """

    size_hint: int
    default_val: int | None = None

    MIN_CHUNK = 8
    MAX_DEFAULT_CHUNK = 4096

    def __post_init__(self) -> None:
        object.__setattr__(self, "size_hint", max(_concrete_int(self.size_hint, "size_hint"), 1))

    def _values(self) -> tuple[int | None, ...]:
        top = next_power_of_2(self.size_hint)
        chunks = _log2_values(self.MIN_CHUNK, top // 2) if top // 2 >= self.MIN_CHUNK else ()
        return (*chunks, None)

    def default(self) -> int | None:
        if self.default_val is not None:
            return self._collapse(self.default_val)
        # Small dims stay persistent; huge dims loop in chunks of 4096.
        return None if self.size_hint <= self.MAX_DEFAULT_CHUNK else self.MAX_DEFAULT_CHUNK

    def _collapse(self, value: int) -> int | None:
        value = max(value, self.MIN_CHUNK)
        return None if value >= self.size_hint else value

    def normalize(self, value: object) -> int | None:
        if value is None:
            return None
        if not _strict_int(value):
            raise ValueError(f"expected None or an int chunk size, got {value!r}")
        if not is_power_of_2(value):
            raise ValueError(f"reduction loop {value} is not a power of two")
        return self._collapse(value)

    def clamp(self, value: object) -> int | None:
        if value is None:
            return None
        if not _strict_int(value) or value <= 0:
            return self.default()
        return self._collapse(1 << max(round(math.log2(value)), 0))


@dataclasses.dataclass(frozen=True)
class PermutationFragment(ConfigSpecFragment):
    """An order of ``n`` loops: a permutation of ``range(n)``; default the identity."""

    n: int

    def __post_init__(self) -> None:
        n = _concrete_int(self.n, "n")
        if n < 1:
            raise ValueError(f"PermutationFragment needs n >= 1, got {n}")
        object.__setattr__(self, "n", n)

    def default(self) -> list[int]:
        return list(range(self.n))

    def random(self, rng: _random.Random) -> list[int]:
        perm = list(range(self.n))
        rng.shuffle(perm)
        return perm

    def all_values(self) -> list[list[int]] | None:
        if math.factorial(self.n) > _ALL_VALUES_LIMIT:
            return None
        return [list(p) for p in itertools.permutations(range(self.n))]

    def size(self) -> int:
        return math.factorial(self.n)

    def is_valid(self, value: object) -> bool:
        return (
            isinstance(value, list)
            and all(_strict_int(v) for v in value)
            and sorted(value) == list(range(self.n))
        )

    def normalize(self, value: object) -> list[int]:
        if not isinstance(value, (list, tuple)) or not all(_strict_int(v) for v in value):
            raise ValueError(f"expected a list of ints, got {value!r}")
        if sorted(value) != list(range(self.n)):
            raise ValueError(f"{list(value)} is not a permutation of {list(range(self.n))}")
        return list(value)

    def clamp(self, value: object) -> list[int]:
        return list(value) if isinstance(value, list) and self.is_valid(value) else self.default()

    def neighbors(self, value: object, radius: int = 1) -> list[list[int]]:
        # One step swaps two positions at most ``radius`` apart.
        base = self.clamp(value)
        out = []
        for i in range(self.n):
            for j in range(i + 1, min(i + radius, self.n - 1) + 1):
                perm = list(base)
                perm[i], perm[j] = perm[j], perm[i]
                out.append(perm)
        return out

    @property
    def encoded_dims(self) -> int:
        return self.n if self.n > 1 else 0

    def encode(self, value: object) -> list[float]:
        if self.n <= 1:
            return []
        return [v / (self.n - 1) for v in self.clamp(value)]

    def decode(self, vec: Sequence[float]) -> list[int]:
        if self.n <= 1:
            return [0]
        # Rank the entries: any vector gives a permutation, and ranks of encode(p) are p.
        keys = [v if math.isfinite(v) else 0.0 for v in vec[: self.n]]
        order = sorted(range(self.n), key=lambda i: (keys[i], i))
        perm = [0] * self.n
        for rank, position in enumerate(order):
            perm[position] = rank
        return perm

    def restrict(self, allowed: Sequence[object]) -> EnumFragment:
        kept = [list(p) for p in allowed if isinstance(p, (list, tuple)) and self.is_valid(list(p))]
        if not kept:
            raise ValueError(f"none of {list(allowed)!r} is a permutation of range({self.n})")
        default = self.default()
        kept.sort(key=lambda p: p != default)
        return _ListEnum(tuple(tuple(p) for p in kept))


@dataclasses.dataclass(frozen=True)
class _ListEnum(EnumFragment):
    """An EnumFragment whose choices are lists (stored as tuples for hashing)."""

    def default(self) -> list[Any]:
        return list(self.choices[0])

    def random(self, rng: _random.Random) -> list[Any]:
        return list(rng.choice(self._search()))

    def all_values(self) -> list[Any]:
        return [list(c) for c in self._search()]

    def is_valid(self, value: object) -> bool:
        return isinstance(value, list) and tuple(value) in self.choices

    def normalize(self, value: object) -> list[Any]:
        if not isinstance(value, (list, tuple)) or tuple(value) not in self.choices:
            raise ValueError(f"{value!r} is not one of {[list(c) for c in self.choices]!r}")
        return list(value)

    def clamp(self, value: object) -> list[Any]:
        return list(value) if isinstance(value, list) and self.is_valid(value) else self.default()

    def neighbors(self, value: object, radius: int = 1) -> list[Any]:
        current = tuple(value) if isinstance(value, (list, tuple)) else None
        return [list(c) for c in self._search() if c != current]

    def encode(self, value: object) -> list[float]:
        if len(self.choices) <= 1:
            return []
        current = tuple(value) if isinstance(value, (list, tuple)) else None
        return [1.0 if c == current else 0.0 for c in self.choices]

    def decode(self, vec: Sequence[float]) -> list[Any]:
        if len(self.choices) <= 1:
            return list(self.choices[0])
        scores = {c: vec[i] for i, c in enumerate(self.choices)}
        best = max(
            self._search(), key=lambda c: scores[c] if math.isfinite(scores[c]) else -math.inf
        )
        return list(best)

    def restrict(self, allowed: Sequence[object]) -> EnumFragment:
        wanted = {tuple(a) for a in allowed if isinstance(a, (list, tuple))}
        kept = tuple(c for c in self.choices if c in wanted)
        if not kept:
            raise ValueError(f"none of {list(allowed)!r} is allowed by {self!r}")
        return _ListEnum(kept)


@dataclasses.dataclass(frozen=True)
class ListOf(ConfigSpecFragment):
    """A list of ``length`` values, each drawn from ``inner``."""

    inner: ConfigSpecFragment
    length: int

    def __post_init__(self) -> None:
        if not isinstance(self.inner, ConfigSpecFragment):
            raise TypeError(f"ListOf inner must be a ConfigSpecFragment, got {self.inner!r}")
        length = _concrete_int(self.length, "length")
        if length < 0:
            raise ValueError(f"ListOf length must be >= 0, got {length}")
        object.__setattr__(self, "length", length)

    def default(self) -> list[Any]:
        return [self.inner.default() for _ in range(self.length)]

    def random(self, rng: _random.Random) -> list[Any]:
        return [self.inner.random(rng) for _ in range(self.length)]

    def all_values(self) -> list[list[Any]] | None:
        inner = self.inner.all_values()
        if inner is None or len(inner) ** self.length > _ALL_VALUES_LIMIT:
            return None
        return [list(p) for p in itertools.product(inner, repeat=self.length)]

    def size(self) -> int:
        return self.inner.size() ** self.length

    def is_valid(self, value: object) -> bool:
        return (
            isinstance(value, list)
            and len(value) == self.length
            and all(self.inner.is_valid(v) for v in value)
        )

    def normalize(self, value: object) -> list[Any]:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"expected a list of {self.length} values, got {value!r}")
        if len(value) != self.length:
            raise ValueError(f"expected {self.length} values, got {len(value)}")
        out = []
        for index, item in enumerate(value):
            try:
                out.append(self.inner.normalize(item))
            except ValueError as error:
                raise ValueError(f"entry {index}: {error}") from None
        return out

    def clamp(self, value: object) -> list[Any]:
        items = list(value) if isinstance(value, (list, tuple)) else []
        items = items[: self.length]
        out = [self.inner.clamp(v) for v in items]
        out.extend(self.inner.default() for _ in range(self.length - len(out)))
        return out

    def neighbors(self, value: object, radius: int = 1) -> list[list[Any]]:
        base = self.clamp(value)
        out = []
        for index, item in enumerate(base):
            for replacement in self.inner.neighbors(item, radius):
                changed = list(base)
                changed[index] = replacement
                out.append(changed)
        return out

    @property
    def encoded_dims(self) -> int:
        return self.inner.encoded_dims * self.length

    def encode(self, value: object) -> list[float]:
        out: list[float] = []
        for item in self.clamp(value):
            out.extend(self.inner.encode(item))
        return out

    def decode(self, vec: Sequence[float]) -> list[Any]:
        dims = self.inner.encoded_dims
        return [self.inner.decode(vec[i * dims : (i + 1) * dims]) for i in range(self.length)]

    def restrict(self, allowed: Sequence[object]) -> ListOf:
        # Restricting a list restricts each element.
        return ListOf(self.inner.restrict(allowed), self.length)


__all__ = [
    "BlockSizeFragment",
    "BooleanFragment",
    "ConfigSpecFragment",
    "EnumFragment",
    "IntegerFragment",
    "ListOf",
    "NumThreadsFragment",
    "PermutationFragment",
    "PowerOfTwoFragment",
    "ReductionLoopFragment",
    "is_power_of_2",
    "next_power_of_2",
]
