"""On-disk cache of autotuned configs.

One JSON file per (kernel source, specialization key, backend, device, library versions) --
whatever ``bound.cache_key()`` returns, plus the config space's fingerprint and the settings that
change generated code (``Settings.codegen_key()`` less the backend and origin-line comments) --
under ``<helion cache_dir()>/autotune/``:

    {"version": 1, "kernel": "matmul", "key": "<sha256 of the key parts>",
     "key_parts": {...}, "config": {...}, "time_ms": 0.123, "created": 1700000000.0,
     "created_iso": "...", "search": "surrogate", "effort": "quick", ...}

* Writes go to a temporary file in the same directory, are fsynced and then ``os.replace``d in,
  under a file lock (``filelock``; ``fcntl.flock`` without it): a reader sees the old entry or the
  new one, never half of one, and two writers cannot interleave.
* A second lock, held for the whole tuning run (:meth:`AutotuneCache.tuning_lock`), makes a
  process that wants to tune a kernel another process is already tuning wait and reuse its
  result instead of measuring on a contended device.
* An entry that is not UTF-8 JSON, misses fields, has other key parts, or holds a config the
  kernel's ConfigSpec rejects is ignored with a ``CacheCorrupt`` warning (and re-tuned); the
  warning is given once per cache object and reason, although the driver reads the entry twice.
* ``HELION_SKIP_CACHE=1`` disables reading and writing.
* ``settings.autotune_cache``: ``LocalAutotuneCache`` (the above) or ``StrictLocalAutotuneCache``,
  which also keys entries on the content of the installed Helion sources (core and the kernel's
  backend package), so an edited or reinstalled Helion with an unchanged version never reuses
  an entry.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any
from typing import Callable
from typing import Iterator

ENTRY_VERSION = 1
ENTRY_SUFFIX = ".json"
#: key parts that differ between shapes of the same kernel; entries differing only in these are
#: used to warm-start a search ("from_best_available")
SHAPE_KEY_PARTS = ("specialization_key", "extra_results", "config_spec")
#: key parts naming the kernel's source: entries that agree on these are tunings of the same
#: kernel (at other shapes, devices or versions), the configs ``helion.from_cache`` tries
SOURCE_KEY_PARTS = ("kernel", "source_hash", "kernel_source_hash")


# ------------------------------------------------------------------------------ locations
def cache_root() -> Path:
    try:
        from helion.runtime.settings import cache_dir

        base = Path(cache_dir())
    except Exception:
        configured = os.environ.get("HELION_CACHE_DIR")
        base = Path(configured).expanduser() if configured else Path.home() / ".cache" / "helion"
    return base / "autotune"


def cache_disabled() -> bool:
    from helion import exc

    try:
        from helion.runtime.settings import skip_cache

        return bool(skip_cache())
    except exc.InvalidSetting:
        raise  # HELION_SKIP_CACHE=maybe: not a boolean
    except Exception:
        return os.environ.get("HELION_SKIP_CACHE", "").strip().lower() in ("1", "true", "yes", "on")


#: ``Settings.codegen_key()`` fields left out of the key: the backend is a key part of its own
#: (``backend=None`` and ``backend="triton"`` generate the same code), and origin-line comments
#: change no generated instruction
_CODEGEN_FIELDS_NOT_KEYED = frozenset({"backend", "output_origin_lines"})


def key_parts_of(bound: Any, settings: Any = None) -> dict[str, str]:
    """``bound.cache_key()`` as a JSON-stable dict of strings, plus the search space's
    fingerprint (a backend that gains or changes tunables invalidates old entries) and the
    settings that change the generated code (``Settings.codegen_key()``: a kernel made with
    ``index_dtype=torch.int64`` or ``fast_math=True`` from the same function is not tuned by
    the other one's entry)."""
    raw = dict(bound.cache_key())
    fingerprint = getattr(getattr(bound, "config_spec", None), "fingerprint", None)
    if callable(fingerprint) and "config_spec" not in raw:
        with contextlib.suppress(Exception):
            raw["config_spec"] = fingerprint()
    if settings is None:
        settings = getattr(bound, "settings", None)
    codegen_key = getattr(settings, "codegen_key", None)
    if callable(codegen_key) and "settings" not in raw:
        with contextlib.suppress(Exception):
            raw["settings"] = json.dumps(
                {
                    str(name): value if isinstance(value, (str, int, float, bool)) else repr(value)
                    for name, value in codegen_key()
                    if name not in _CODEGEN_FIELDS_NOT_KEYED
                },
                sort_keys=True,
            )
    return {str(k): v if isinstance(v, str) else repr(v) for k, v in sorted(raw.items())}


#: ``settings.autotune_cache`` values that add :func:`library_source_hash` to the key
STRICT_CACHES = frozenset({"StrictLocalAutotuneCache"})


def library_source_hash(bound: Any) -> str:
    """Hashes of the Python sources of the helion package and of the package the kernel's
    backend comes from (a plugin such as helion_triton)."""
    import helion

    packages = [helion]
    backend = getattr(bound, "backend", None)
    if backend is not None:
        plugin = sys.modules.get(type(backend).__module__.split(".")[0])
        if plugin is not None and plugin is not helion:
            packages.append(plugin)
    return "+".join(_package_source_hash(package) for package in packages)


def _package_source_hash(module: ModuleType) -> str:
    location = getattr(module, "__file__", None)
    if not location:
        return f"{module.__name__}:?"
    if module.__name__ not in _SOURCE_HASHES:
        # a package: every .py below it; a single-module plugin: only its own file
        root = Path(location).parent
        files = sorted(root.rglob("*.py")) if hasattr(module, "__path__") else [Path(location)]
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            with contextlib.suppress(OSError):
                digest.update(path.read_bytes())
        _SOURCE_HASHES[module.__name__] = digest.hexdigest()[:16]
    return f"{module.__name__}:{_SOURCE_HASHES[module.__name__]}"


# once per process: a running process keeps executing the code it imported at startup
_SOURCE_HASHES: dict[str, str] = {}


def hash_key_parts(parts: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "kernel"


# ------------------------------------------------------------------------------ locks
@contextlib.contextmanager
def file_lock(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """Exclusive inter-process lock on ``path``; yields False when ``blocking=False`` and it is taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import filelock
    except ImportError:
        filelock = None  # type: ignore[assignment]
    if filelock is not None:
        # readable and writable by every user the umask allows, as entries are (`_file_mode`):
        # in a cache shared by a team, another user must be able to take the lock after us
        lock = filelock.FileLock(str(path), mode=_file_mode())
        try:
            lock.acquire(timeout=-1 if blocking else 0)
        except filelock.Timeout:
            yield False
            return
        try:
            yield True
        finally:
            lock.release()
        return
    import fcntl

    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _file_mode() -> int:
    """The mode ``open()`` gives a new file (0o666 less the umask). ``mkstemp`` makes 0o600
    files, which in a cache directory shared by several users (``HELION_CACHE_DIR`` on a team
    volume) every other user then finds unreadable, a corrupt entry to re-tune."""
    global _FILE_MODE
    if _FILE_MODE is None:
        umask = None
        with contextlib.suppress(OSError, ValueError):
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("Umask:"):
                    umask = int(line.split()[1], 8)
        if umask is None:
            umask = os.umask(0o022)  # read it back: no other way to query it portably
            os.umask(umask)
        _FILE_MODE = 0o666 & ~umask
    return _FILE_MODE


_FILE_MODE: int | None = None


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with contextlib.suppress(OSError, AttributeError):
            os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


# ------------------------------------------------------------------------------ entries
class CacheEntryError(Exception):
    """Why an entry cannot be used (turned into a CacheCorrupt warning)."""


class NewerCacheEntry(CacheEntryError):
    """An entry a newer Helion wrote (a shared cache): a miss, neither warned about nor
    overwritten."""


def read_entry(path: Path) -> dict[str, Any]:
    """Parse and structurally check one entry file; raises CacheEntryError."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise CacheEntryError(f"unreadable ({error})") from None
    try:
        # explicit UTF-8: entries are written as ASCII JSON, whatever the locale's encoding
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CacheEntryError(f"not UTF-8 text ({error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CacheEntryError(f"not valid JSON ({error})") from None
    except RecursionError:
        raise CacheEntryError("not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise CacheEntryError("not a JSON object")
    version = data.get("version")
    if type(version) is int and version > ENTRY_VERSION:
        raise NewerCacheEntry(f"written by a newer cache format (version {version})")
    if type(version) is not int or version != ENTRY_VERSION:  # `True == 1`, `1.0 == 1`
        raise CacheEntryError(f"written by another cache format (version {version!r})")
    for name, kind in (("key", str), ("key_parts", dict), ("config", dict)):
        if not isinstance(data.get(name), kind):
            raise CacheEntryError(f"field {name!r} missing or not a {kind.__name__}")
    return data


class AutotuneCache:
    """The cache entry of one bound kernel."""

    def __init__(
        self,
        bound: Any,
        *,
        directory: Path | str | None = None,
        settings: Any = None,
        key_parts: dict[str, str] | None = None,
        config_spec: Any = None,
        label: str | None = None,
        strict: bool | None = None,
    ) -> None:
        """``key_parts`` replaces the bound kernel's own (``autotune_multi`` keys one entry on
        several argument sets); ``config_spec`` checks cached configs instead of the bound
        kernel's spec (there: the space shared by every set); ``label`` goes into the file
        name (``autotune_multi``'s ``cache_tag``); ``strict`` keys the entry on the Helion
        sources too (``StrictLocalAutotuneCache``; None: as ``settings.autotune_cache`` says)."""
        self.bound = bound
        self.settings = settings if settings is not None else getattr(bound, "settings", None)
        self.directory = Path(directory) if directory is not None else cache_root()
        self.config_spec = (
            config_spec if config_spec is not None else getattr(bound, "config_spec", None)
        )
        if key_parts is None:
            key_parts = key_parts_of(bound, self.settings)
            if strict is None:
                strict = getattr(self.settings, "autotune_cache", None) in STRICT_CACHES
            if strict:
                key_parts["library_sources"] = library_source_hash(bound)
        self.key_parts = dict(key_parts)
        self.key = hash_key_parts(self.key_parts)
        self.kernel_name = str(getattr(getattr(bound, "kernel", None), "name", None) or "kernel")
        stem = _slug(self.kernel_name) + (f"-{_slug(label)}" if label else "")
        self.path = self.directory / f"{stem}-{self.key[:24]}{ENTRY_SUFFIX}"
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.tuning_lock_path = self.path.with_name(self.path.name + ".tuning.lock")
        # get() runs twice per tuning (before and under the tuning lock): warn once per reason
        self._warned: set[str] = set()

    @property
    def enabled(self) -> bool:
        return not cache_disabled()

    def _warn(self, reason: str) -> None:
        if reason in self._warned:
            return
        self._warned.add(reason)
        try:
            from helion import exc
            from helion.autotuner.progress import user_stacklevel

            exc.warn(
                exc.CacheCorrupt(str(self.path), reason),
                self.settings,
                stacklevel=user_stacklevel(),
            )
        except ImportError:
            import warnings

            warnings.warn(
                f"Ignoring corrupt autotune cache entry {self.path}: {reason}", stacklevel=3
            )

    def get(self) -> Any | None:
        """The cached config (normalized for this kernel), or None on a miss / unusable entry."""
        if not self.enabled:
            return None
        try:
            if not self.path.exists():
                return None
        except OSError:
            # a directory that cannot be searched: no entry to call corrupt; the driver warns
            # about the directory when it cannot take the tuning lock there
            return None
        try:
            data = read_entry(self.path)
            if data["key"] != self.key or data["key_parts"] != self.key_parts:
                changed = sorted(
                    k
                    for k in set(data["key_parts"]) | set(self.key_parts)
                    if data["key_parts"].get(k) != self.key_parts.get(k)
                )
                raise CacheEntryError(f"stale: key parts differ ({', '.join(changed) or 'key'})")
            return self._config_from(data["config"])
        except NewerCacheEntry:
            return None  # a newer Helion's entry: a miss here, and left as it is (see put)
        except CacheEntryError as error:
            self._warn(str(error))
            return None

    def _config_from(self, values: dict[str, Any]) -> Any:
        from helion.runtime.config import Config

        try:
            config = Config(**values)
        except Exception as error:
            raise CacheEntryError(f"invalid config: {error}") from None
        try:
            normalized = self.config_spec.normalize(config)
        except Exception as error:
            raise CacheEntryError(
                f"stale: the config does not fit this kernel's config space ({error})"
            ) from None
        return config if normalized is None else normalized

    def put(self, config: Any, *, time_ms: float | None = None, **details: Any) -> Path | None:
        """Store the winner atomically; returns the entry path (None when the cache is disabled)."""
        if not self.enabled:
            return None
        now = time.time()
        entry = {
            "version": ENTRY_VERSION,
            "kernel": self.kernel_name,
            "key": self.key,
            "key_parts": self.key_parts,
            "config": json.loads(json.dumps(dict(config))),
            "time_ms": None
            if time_ms is None or time_ms != time_ms or time_ms == float("inf")
            else float(time_ms),
            "created": now,
            "created_iso": datetime.datetime.fromtimestamp(now, datetime.UTC).isoformat(
                timespec="seconds"
            ),
        }
        entry.update({k: v for k, v in details.items() if _json_ok(v)})
        with file_lock(self.lock_path):
            if self._holds_newer_entry():
                return None  # a shared cache: the newer Helion's entry stays
            write_json_atomic(self.path, entry)
        return self.path

    def _holds_newer_entry(self) -> bool:
        try:
            read_entry(self.path)
        except NewerCacheEntry:
            return True
        except (CacheEntryError, OSError):
            return False
        return False

    @contextlib.contextmanager
    def tuning_lock(self, on_wait: Any = None) -> Iterator[None]:
        """Held while this process tunes the kernel; a second tuner waits here (``on_wait()`` is
        called first) and then finds the first one's entry."""
        if not self.enabled:
            yield
            return
        with file_lock(self.tuning_lock_path, blocking=False) as acquired:
            if acquired:
                yield
                return
        if on_wait is not None:
            on_wait()
        with file_lock(self.tuning_lock_path):
            yield

    def miss_report(self, max_scan: int = 500) -> str:
        """Why :meth:`get` found nothing, for ``HELION_ASSERT_CACHE_HIT=1``: the entry path and
        key parts looked for, and the key parts in which the closest entry of the same kernel
        differs (the usual causes: an edited kernel, new shapes, another device or version)."""
        lines = [
            f"autotune cache miss for kernel {self.kernel_name!r}",
            f"  looked for: {self.path}",
        ]
        if not self.enabled:
            lines.append("  the cache is disabled (HELION_SKIP_CACHE=1)")
            return "\n".join(lines)
        if self._warned:
            lines.append(f"  that entry exists but was ignored: {'; '.join(sorted(self._warned))}")
        lines.append("  key parts:")
        lines.extend(f"    {name}: {value}" for name, value in sorted(self.key_parts.items()))
        closest: tuple[int, Path, list[str]] | None = None
        scanned = 0
        with contextlib.suppress(OSError):
            for path in sorted(self.directory.glob(f"{_slug(self.kernel_name)}-*{ENTRY_SUFFIX}")):
                if scanned >= max_scan:
                    break
                scanned += 1
                if path == self.path:
                    continue
                try:
                    parts = read_entry(path)["key_parts"]
                except CacheEntryError:
                    continue
                changed = sorted(
                    k
                    for k in set(parts) | set(self.key_parts)
                    if parts.get(k) != self.key_parts.get(k)
                )
                if closest is None or len(changed) < len(closest[2]):
                    closest = (len(changed), path, changed)
        if closest is None:
            lines.append(f"  no other entry of this kernel in {self.directory}")
        else:
            _, path, changed = closest
            lines.append(f"  closest entry: {path}, which differs in: {', '.join(changed)}")
            try:
                other = read_entry(path)["key_parts"]
            except CacheEntryError:
                other = {}
            for name in changed:
                lines.append(
                    f"    {name}: cached {other.get(name)!r}, now {self.key_parts.get(name)!r}"
                )
        return "\n".join(lines)

    def similar_configs(self, limit: int = 8, max_scan: int = 500) -> list[Any]:
        """Configs cached for this kernel at other shapes (same everything except the shape key
        parts), newest first, that fit this kernel's spec -- seeds for a warm-started search."""
        if not self.enabled or limit <= 0 or not any(p in self.key_parts for p in SHAPE_KEY_PARTS):
            return []
        fixed = {k: v for k, v in self.key_parts.items() if k not in SHAPE_KEY_PARTS}
        found: list[tuple[float, Any]] = []
        for scanned, path in enumerate(
            sorted(self.directory.glob(f"{_slug(self.kernel_name)}-*{ENTRY_SUFFIX}"))
        ):
            if scanned >= max_scan:
                break
            if path == self.path:
                continue
            try:
                data = read_entry(path)
                parts = data["key_parts"]
                if {k: v for k, v in parts.items() if k not in SHAPE_KEY_PARTS} != fixed:
                    continue
                found.append((float(data.get("created") or 0.0), self._config_from(data["config"])))
            except (CacheEntryError, TypeError, ValueError):
                continue
        found.sort(key=lambda item: -item[0])
        return [config for _, config in found[:limit]]

    def kernel_configs(self, limit: int | None = None, max_scan: int = 500) -> list[Any]:
        """The configs cached for this kernel's source under any key (other shapes, devices,
        ``autotune_multi`` entries, this entry too), newest first, that fit this kernel's
        spec, without duplicates; at most ``limit`` (None: all of the ``max_scan`` entries
        looked at)."""
        if not self.enabled or (limit is not None and limit <= 0):
            return []
        source = {k: v for k, v in self.key_parts.items() if k in SOURCE_KEY_PARTS}
        if not source:
            return []  # nothing says which entries come from the same source
        found: list[tuple[float, Any]] = []
        with contextlib.suppress(OSError):
            paths = sorted(self.directory.glob(f"{_slug(self.kernel_name)}-*{ENTRY_SUFFIX}"))
            for scanned, path in enumerate(paths):
                if scanned >= max_scan:
                    break
                try:
                    data = read_entry(path)
                    parts = data["key_parts"]
                    if any(parts.get(k) != v for k, v in source.items()):
                        continue
                    config = self._config_from(data["config"])
                    found.append((float(data.get("created") or 0.0), config))
                except (CacheEntryError, TypeError, ValueError):
                    continue
        found.sort(key=lambda item: -item[0])
        configs: list[Any] = []
        seen: set[str] = set()
        for _, config in found:
            text = json.dumps(dict(config), sort_keys=True, default=repr)
            if text in seen:
                continue
            seen.add(text)
            configs.append(config)
            if limit is not None and len(configs) >= limit:
                break
        return configs


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------------------ CLI helpers
def list_entries(directory: Path | str | None = None) -> list[dict[str, Any]]:
    """One summary dict per entry file (``helion cache list``); unreadable files get an ``error``."""
    root = Path(directory) if directory is not None else cache_root()
    if not root.is_dir():
        return []
    entries: list[dict[str, Any]] = []
    for path in sorted(root.glob(f"*{ENTRY_SUFFIX}")):
        try:
            data = read_entry(path)
        except CacheEntryError as error:
            entries.append({"kernel": path.name, "error": str(error), "path": str(path)})
            continue
        parts = data["key_parts"]
        entries.append(
            {
                "kernel": data.get("kernel", "?"),
                "backend": _part(parts, "backend"),
                "device": _part(parts, "device"),
                "time_ms": data.get("time_ms"),
                "created": data.get("created_iso", ""),
                "key": data["key"][:12],
                "config": json.dumps(data["config"], sort_keys=True, separators=(",", ":")),
                "path": str(path),
            }
        )
    return entries


def _part(parts: dict[str, str], wanted: str) -> str:
    for name, value in parts.items():
        if name == wanted or name.startswith(wanted):
            return value
    return ""


class CacheClearError(OSError):
    """Entries :func:`clear` could not remove (the others were removed): ``failures`` holds
    ``(path, OSError)`` pairs, ``removed`` the number removed."""

    def __init__(self, failures: list[tuple[Path, OSError]], removed: int) -> None:
        self.failures = list(failures)
        self.removed = removed
        lines = "; ".join(describe_clear_failure(path, error) for path, error in failures)
        count = len(failures)
        super().__init__(
            f"could not remove {count} autotune cache entr{'y' if count == 1 else 'ies'} "
            f"({removed} removed): {lines}"
        )


def describe_clear_failure(path: Path, error: OSError) -> str:
    """``cannot remove <path>: <reason>`` for an entry :func:`clear` could not remove."""
    reason = error.strerror or str(error) or type(error).__name__
    return f"cannot remove {path}: {reason[:1].lower()}{reason[1:]}"


def clear(
    directory: Path | str | None = None,
    *,
    kernel: str | None = None,
    on_error: Callable[[Path, OSError], None] | None = None,
) -> int:
    """Delete cache entries (all, or one kernel's); returns how many were removed.

    An entry that cannot be removed (no permission, a directory in the entry's place, a lock
    file that cannot be created) does not stop the others: each is passed to
    ``on_error(path, error)``; without ``on_error``, a :class:`CacheClearError` listing them is
    raised once every other entry is removed."""
    root = Path(directory) if directory is not None else cache_root()
    failures: list[tuple[Path, OSError]] = []

    def failed(path: Path, error: OSError) -> None:
        failures.append((path, error))
        if on_error is not None:
            on_error(path, error)

    try:
        if not root.is_dir():
            return 0
        pattern = f"{_slug(kernel)}-*{ENTRY_SUFFIX}" if kernel else f"*{ENTRY_SUFFIX}"
        paths = sorted(root.glob(pattern))
    except OSError as error:  # an unreadable cache directory
        failed(root, error)
        paths = []
    removed = 0
    for path in paths:
        lock_path = path.with_name(path.name + ".lock")
        lock_existed = lock_path.exists()
        try:
            with file_lock(lock_path), contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
        except OSError as error:
            failed(path, error)
            if not lock_existed:  # the lock this attempt created guards nothing now
                with contextlib.suppress(OSError):
                    lock_path.unlink()
    with contextlib.suppress(OSError):
        for leftover in root.glob(".*.tmp"):
            with contextlib.suppress(OSError):
                if (
                    time.time() - leftover.stat().st_mtime > 3600
                ):  # an abandoned write, not one in flight
                    leftover.unlink()
    try:
        locks = list(root.glob(f"*{ENTRY_SUFFIX}.lock")) + list(
            root.glob(f"*{ENTRY_SUFFIX}.tuning.lock")
        )
    except OSError:
        locks = []
    for lock_path in locks:
        entry = lock_path.with_name(lock_path.name.split(ENTRY_SUFFIX)[0] + ENTRY_SUFFIX)
        if kernel and not entry.name.startswith(_slug(kernel) + "-"):
            continue
        # only delete a lock nobody holds; unlinking a held lock would let a third process in.
        # A lock this user cannot open (another user's) is left as it is: it is no entry
        with contextlib.suppress(OSError), file_lock(lock_path, blocking=False) as free:
            if free and not entry.exists():
                lock_path.unlink()
    if failures and on_error is None:
        raise CacheClearError(failures, removed)
    return removed
