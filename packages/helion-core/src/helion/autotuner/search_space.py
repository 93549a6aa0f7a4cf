"""The search-space report of ``autotune_log_search_space[_verbose|_path]``.

Before a search starts, the config space is logged: every field with its number of items and
the number of choices of each, and the number of distinct configs (the product). Verbose adds
one line per fragment with its choices. After the search, the coverage: how many configs were
measured, and per field how many distinct values the search tried. With
``autotune_log_search_space_path`` the whole report (space and coverage) is written there as
JSON; the path alone writes the file without logging.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any
from typing import Iterable

from helion.autotuner.progress import AutotuneLog

#: choices listed per fragment at most (a verbose report of a huge integer range stays short)
MAX_LISTED_CHOICES = 64


def _fragment_size(fragment: Any) -> int | None:
    try:
        return int(fragment.size())
    except Exception:
        return None  # a range too large to enumerate


def _choices(fragment: Any) -> list[Any] | None:
    try:
        values = fragment.all_values()
    except Exception:
        return None
    return None if values is None else list(values)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)


def space_report(spec: Any, *, verbose: bool = False) -> dict[str, Any]:
    """The config space of ``spec`` as a JSON-ready dict: ``fields`` (name, items, choices per
    item), ``total_configs`` (None when a fragment cannot be counted) and, with ``verbose``,
    ``fragments`` (one entry per tunable value with its choices)."""
    fields: dict[str, dict[str, Any]] = {}
    fragments: list[dict[str, Any]] = []
    total: int | None = 1
    for entry in spec.flat_fields():
        size = _fragment_size(entry.fragment)
        field = fields.setdefault(entry.name, {"name": entry.name, "items": 0, "sizes": []})
        field["items"] += 1
        field["sizes"].append(size)
        total = None if total is None or size is None else total * size
        if verbose:
            choices = _choices(entry.fragment)
            listed = None if choices is None else choices[:MAX_LISTED_CHOICES]
            fragments.append(
                {
                    "name": entry.name,
                    "index": entry.index,
                    "fragment": repr(entry.fragment),
                    "size": size,
                    "choices": _jsonable(listed),
                    "truncated": choices is not None and len(choices) > MAX_LISTED_CHOICES,
                }
            )
    for field in fields.values():
        sizes = field["sizes"]
        field["size"] = None if None in sizes else math.prod(sizes)
    report: dict[str, Any] = {"fields": list(fields.values()), "total_configs": total}
    if verbose:
        report["fragments"] = fragments
    return report


def coverage_report(spec: Any, configs: Iterable[Any]) -> dict[str, Any]:
    """What a search explored: distinct configs measured, and per field the distinct values
    tried (of how many)."""
    seen: dict[str, set[str]] = {}
    measured = 0
    for config in configs:
        measured += 1
        values = dict(config)
        for name in spec.fields:
            if name in values:
                seen.setdefault(name, set()).add(json.dumps(values[name], sort_keys=True))
    total = space_report(spec)["total_configs"]
    fields = []
    for name in spec.fields:
        size = None
        sizes = [_fragment_size(f) for f in spec.fields[name].fragments]
        if None not in sizes:
            size = math.prod(sizes)
        fields.append({"name": name, "distinct_values": len(seen.get(name, ())), "size": size})
    share = None if not total else measured / total
    return {"configs_measured": measured, "share_of_space": share, "fields": fields}


def wanted(settings: Any) -> bool:
    return bool(
        getattr(settings, "autotune_log_search_space", False)
        or getattr(settings, "autotune_log_search_space_verbose", False)
        or getattr(settings, "autotune_log_search_space_path", None)
    )


def _logging_on(settings: Any) -> bool:
    return bool(
        getattr(settings, "autotune_log_search_space", False)
        or getattr(settings, "autotune_log_search_space_verbose", False)
    )


def _size_text(size: int | None) -> str:
    return "?" if size is None else str(size)


class SearchSpaceReport:
    """One run's report: :meth:`start` logs the space, :meth:`finish` the coverage and writes
    the JSON file. Does nothing unless one of the three settings is on."""

    def __init__(self, settings: Any, log: AutotuneLog, kernel_name: str) -> None:
        self.enabled = wanted(settings)
        self.log_it = _logging_on(settings)
        self.verbose = bool(getattr(settings, "autotune_log_search_space_verbose", False))
        self.path = getattr(settings, "autotune_log_search_space_path", None)
        self.log = log
        self.kernel_name = kernel_name
        self.report: dict[str, Any] = {}

    def start(self, spec: Any, **context: Any) -> None:
        if not self.enabled:
            return
        self.report = {"kernel": self.kernel_name, **context}
        self.report.update(space_report(spec, verbose=self.verbose or bool(self.path)))
        if not self.log_it:
            return
        fields = self.report["fields"]
        self.log.info(
            "%s: search space: %d field(s), %d tunable value(s), %s distinct configs",
            self.kernel_name,
            len(fields),
            sum(f["items"] for f in fields),
            _size_text(self.report["total_configs"]),
        )
        for field in fields:
            sizes = " x ".join(_size_text(s) for s in field["sizes"])
            self.log.info(
                "  %s: %d item(s), choices %s (%s)",
                field["name"],
                field["items"],
                sizes,
                _size_text(field["size"]),
            )
        if self.verbose:
            for fragment in self.report["fragments"]:
                where = fragment["name"]
                if fragment["index"] is not None:
                    where += f"[{fragment['index']}]"
                choices = fragment["choices"]
                shown = "not enumerable" if choices is None else ", ".join(map(str, choices))
                if fragment["truncated"]:
                    shown += ", ..."
                self.log.info("    %s: %s: %s", where, fragment["fragment"], shown)

    def finish(self, spec: Any, configs: Iterable[Any]) -> None:
        if not self.enabled:
            return
        coverage = coverage_report(spec, configs)
        self.report["coverage"] = coverage
        if self.log_it:
            share = coverage["share_of_space"]
            self.log.info(
                "%s: search-space coverage: %d config(s) measured%s",
                self.kernel_name,
                coverage["configs_measured"],
                "" if share is None else f" ({share:.3%} of the space)",
            )
            for field in coverage["fields"]:
                self.log.info(
                    "  %s: %d of %s value(s) tried",
                    field["name"],
                    field["distinct_values"],
                    _size_text(field["size"]),
                )
        if self.path:
            self._write(os.fspath(self.path))

    def _write(self, path: str) -> None:
        try:
            directory = os.path.dirname(path)
            if directory:
                os.makedirs(directory, exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(self.report, handle, indent=2, sort_keys=True, default=repr)
                handle.write("\n")
        except OSError as error:
            self.log.warning("could not write the search-space report %s: %s", path, error)
        else:
            self.log.debug("search-space report written to %s", path)
