"""Kernel arguments that hold other arguments: lists, tuples (namedtuples too), dicts and
dataclasses, at any depth. One walk for everyone who looks inside them: the tracer (which lifts
their tensors into kernel arguments), the specialization key and device lookup, eager mode, and
the autotuner (which copies their tensors)."""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any
from typing import Callable
from typing import Hashable
from typing import Iterator
from typing import Sequence

import torch

from helion.language import ConstExpr


def container_items(value: Any) -> list[tuple[tuple, str, Any]] | None:
    """The items of a container, each as (its step in a path: ``("key", k)``, ``("index", i)``
    or ``("attr", name)``; a label usable in an identifier; the item), or None for anything
    that is not a container."""
    if isinstance(value, dict):
        return [(("key", k), re.sub(r"\W", "_", str(k)), v) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        fields = getattr(value, "_fields", None) if isinstance(value, tuple) else None
        return [
            (("index", i), fields[i] if fields else f"item_{i}", v) for i, v in enumerate(value)
        ]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            (("attr", f.name), f.name, getattr(value, f.name)) for f in dataclasses.fields(value)
        ]
    return None


def rebuild_container(value: Any, items: Sequence[Any]) -> Any:
    """A copy of container ``value`` of the same type holding ``items``, in the order of
    `container_items`: namedtuple fields, dict keys and dataclass attributes still work."""
    if isinstance(value, dict):
        rebuilt = copy.copy(value)  # keeps a subclass (OrderedDict, defaultdict) as it is
        for key, item in zip(value, items, strict=True):
            rebuilt[key] = item
        return rebuilt
    if isinstance(value, tuple) and hasattr(value, "_make"):
        return value._make(items)
    if isinstance(value, (list, tuple)):
        try:
            return type(value)(items)
        except TypeError:  # a subclass that holds only certain items (torch.Size): its base
            return list(items) if isinstance(value, list) else tuple(items)
    rebuilt = copy.copy(value)
    for field, item in zip(dataclasses.fields(value), items, strict=True):
        object.__setattr__(rebuilt, field.name, item)  # frozen dataclasses too
    return rebuilt


def container_structure(value: Any) -> Hashable:
    """What code traced with container ``value`` assumes of it: its type (which names a
    namedtuple's or dataclass's fields), a list's or tuple's length, a dict's keys in order,
    and at each leaf the leaf's type (a `ConstExpr`'s value, which is baked unguarded):
    ``(type, (item structure, ...))``, ``(dict type, ((key, item structure), ...))`` or a
    leaf's type. Containers of equal structures give the same leaves at the same paths. Called
    at every launch of a kernel that is given a container: the common types go first."""
    kind = type(value)
    if kind in _LEAF_TYPES:
        return kind
    if kind is list or kind is tuple:
        return (kind, tuple([container_structure(item) for item in value]))
    if isinstance(value, ConstExpr):
        try:
            hash(value.value)
            return (ConstExpr, value.value)
        except TypeError:
            return (ConstExpr, repr(value.value))
    if isinstance(value, (list, tuple)):  # namedtuples: their type names the fields
        return (kind, tuple([container_structure(item) for item in value]))
    if isinstance(value, dict):
        return (kind, tuple([(key, container_structure(item)) for key, item in value.items()]))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (kind, tuple([container_structure(getattr(value, f.name)) for f in fields]))
    return kind


# leaves whose structure is their type alone (what `container_structure` meets most)
_LEAF_TYPES = frozenset(
    {torch.Tensor, torch.nn.Parameter, int, float, bool, str, type(None), torch.dtype}
)


def describe_structure(value: Any) -> str:
    """``value``'s container shape in words for error messages: ``a list of 3 items``."""
    items = container_items(value)
    if items is None:
        return f"a {type(value).__name__}"
    if isinstance(value, dict):
        return f"a {type(value).__name__} with keys {[step[1] for step, _, _ in items]}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(items)} item{'' if len(items) == 1 else 's'}"
    return f"a {type(value).__name__}"


def iter_tensors(values: Sequence[Any]) -> Iterator[torch.Tensor]:
    """The tensors among ``values`` and inside the containers among them, in order."""
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        else:
            items = container_items(value)
            if items is not None:
                yield from iter_tensors([item for _, _, item in items])


def find_device(values: Sequence[Any]) -> torch.device | None:
    """The device of the first tensor or `torch.device` among ``values`` (inside containers
    too); None when there is neither."""
    for value in values:
        if isinstance(value, torch.Tensor):
            return value.device
        if isinstance(value, torch.device):
            return value
        items = container_items(value)
        if items is not None:
            device = find_device([item for _, _, item in items])
            if device is not None:
                return device
    return None


def map_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    """``value`` with every tensor in it (at any depth) replaced by ``fn(tensor)``; containers
    are rebuilt with their own types, anything else is returned as it is."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    items = container_items(value)
    if items is None:
        return value
    return rebuild_container(value, [map_tensors(fn, item) for _, _, item in items])
