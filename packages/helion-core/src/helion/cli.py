"""The ``helion`` command: inspect plugins and backends, show a kernel's IR and code, manage the
autotune cache.

Also runs as ``python -m helion``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any
from typing import Sequence

DEFAULT_ARGS_FACTORY = "example_args"

# Exit codes: 0 success, 1 the command ran and failed, 2 the command line or input is wrong.
EXIT_FAILURE = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """A user-facing failure: printed without a traceback, exits with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``helion`` command line.

    Args:
        argv: Arguments without the program name; defaults to ``sys.argv[1:]``.

    Returns:
        The process exit code.
    """
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.run(args)
    except CommandError as error:
        print(f"helion {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="helion", description="Helion: a Python-embedded DSL for ML kernels."
    )
    parser.add_argument("--version", action="version", version=f"helion-core {_core_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    backends = commands.add_parser("backends", help="list backends and whether they can run here")
    backends.set_defaults(run=_run_backends)

    plugins = commands.add_parser("plugins", help="list plugins, and plugins that failed to load")
    plugins.add_argument(
        "-v", "--verbose", action="store_true", help="print full tracebacks of failures"
    )
    plugins.set_defaults(run=_run_plugins)

    show = commands.add_parser("show", help="print a kernel's IR and generated code")
    show.add_argument("target", metavar="FILE:KERNEL", help="python file and kernel name in it")
    show.add_argument(
        "--config",
        metavar="JSON",
        help="config as a JSON object, or a path to a JSON file (default: the default config)",
    )
    show.add_argument(
        "--args-factory",
        metavar="NAME",
        default=DEFAULT_ARGS_FACTORY,
        help=f"function in FILE returning the kernel's example args (default: {DEFAULT_ARGS_FACTORY})",
    )
    show.set_defaults(run=_run_show)

    cache = commands.add_parser("cache", help="manage the autotune cache")
    cache_commands = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    cache_commands.add_parser("list", help="list cached configs").set_defaults(run=_run_cache_list)
    cache_commands.add_parser("clear", help="delete every cached config").set_defaults(
        run=_run_cache_clear
    )
    return parser


def _run_backends(args: argparse.Namespace) -> int:
    from helion import backends
    from helion import plugins

    rows = []
    for backend in backends.list_backends():
        provider = backends.backend_provider(backend.name)
        available, reason = backends.backend_availability(backend.name)
        rows.append(
            [
                backend.name,
                provider.distribution if provider and provider.distribution else "-",
                _safe_version(backend),
                "available" if available else f"unavailable: {reason}",
            ]
        )
    _print_table("Backends", ["name", "distribution", "version", "status"], rows)
    print(f"default backend: {backends.default_backend_name()}")
    problems = backends.backend_problems()
    failures = plugins.load_failures()
    for problem in problems:
        print(f"problem: {problem}")
    if failures:
        print(f"{len(failures)} plugin failure(s); run `helion plugins` for details.")
    return 0


def _run_plugins(args: argparse.Namespace) -> int:
    from helion import backends
    from helion import plugins

    # Building the backend registry calls every plugin's helion_backends(), so failures of
    # that hook are listed below too, not only import failures.
    backends.list_backends()
    rows = [
        [info.name, info.distribution or "(registered explicitly)", info.version or "-"]
        for info in plugins.list_plugins()
    ]
    _print_table("Plugins", ["name", "distribution", "version"], rows)
    if plugins.autoload_disabled():
        print(
            f"entry-point loading is disabled ({plugins.DISABLE_AUTOLOAD_ENV} is set); "
            "only built-in plugins are listed."
        )
    failures = plugins.load_failures()
    if failures:
        failure_rows = [
            [
                failure.plugin,
                failure.distribution or "-",
                failure.version or "-",
                failure.entry_point or "-",
                failure.phase,
                failure.error,
            ]
            for failure in failures
        ]
        _print_table(
            "Plugin failures",
            ["name", "distribution", "version", "entry point", "phase", "error"],
            failure_rows,
        )
        if args.verbose:
            for failure in failures:
                print(f"\n--- {failure.describe()}\n{failure.traceback}")
    else:
        print("no plugin failures.")
    for problem in backends.backend_problems():
        print(f"problem: {problem}")
    return 0


def _run_show(args: argparse.Namespace) -> int:
    file_name, separator, kernel_name = args.target.rpartition(":")
    if not separator or not file_name or not kernel_name:
        raise CommandError(
            f"expected FILE:KERNEL (e.g. examples/add.py:add), got {args.target!r}", EXIT_USAGE
        )
    config = _parse_config(args.config)
    module = _import_file(Path(file_name))
    kernel = getattr(module, kernel_name, None)
    if kernel is None:
        raise CommandError(f"{file_name} defines no {kernel_name!r}", EXIT_USAGE)
    if not callable(getattr(kernel, "bind", None)):
        raise CommandError(
            f"{kernel_name!r} in {file_name} is a {type(kernel).__name__}, not a Helion kernel "
            "(decorate it with @helion.kernel)",
            EXIT_USAGE,
        )
    factory = getattr(module, args.args_factory, None)
    if not callable(factory):
        raise CommandError(
            f"{file_name} must define a function {args.args_factory}() returning the args of "
            f"{kernel_name} (choose another name with --args-factory)",
            EXIT_USAGE,
        )
    example_args = factory()
    if not isinstance(example_args, (tuple, list)):
        example_args = (example_args,)
    from helion import exc

    # Helion errors already point at the kernel's source line, so they print without traceback.
    try:
        bound = kernel.bind(tuple(example_args))
        ir_text = bound.ir_text()
    except exc.Base as error:
        raise CommandError(f"{kernel_name}: {error}") from error
    print("# Kernel IR")
    print(ir_text.rstrip("\n"))
    print()
    # The IR is printed first so that it is there to read when code generation fails.
    try:
        code = bound.to_code() if config is None else bound.to_code(config)
    except exc.Base as error:
        raise CommandError(f"{kernel_name}: code generation failed: {error}") from error
    print("# Generated code")
    print(code.rstrip("\n"))
    return 0


def _run_cache_list(args: argparse.Namespace) -> int:
    cache = _import_autotune_cache()
    entries = list(cache.list_entries())
    if not entries:
        print("the autotune cache is empty.")
        return 0
    records = [_as_record(entry) for entry in entries]
    if all(isinstance(record, dict) for record in records):
        columns = list(dict.fromkeys(key for record in records for key in record))
        rows = [[_cell(record.get(column, "")) for column in columns] for record in records]
        _print_table("Autotune cache", columns, rows)
    else:
        for record in records:
            print(record)
    print(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}.")
    return 0


def _run_cache_clear(args: argparse.Namespace) -> int:
    import inspect

    cache = _import_autotune_cache()
    failures: list[str] = []

    def on_error(path: Any, error: OSError) -> None:
        # each entry that cannot be removed is said once, and the others are still removed
        describe = getattr(cache, "describe_clear_failure", None)
        line = describe(path, error) if describe else f"cannot remove {path}: {error}"
        failures.append(line)
        print(f"helion cache clear: error: {line}", file=sys.stderr)

    try:
        takes_on_error = "on_error" in inspect.signature(cache.clear).parameters
    except (TypeError, ValueError):
        takes_on_error = False
    try:
        removed = cache.clear(on_error=on_error) if takes_on_error else cache.clear()
    except OSError as error:
        raise CommandError(f"could not clear the autotune cache: {error}") from error
    if isinstance(removed, int) and not isinstance(removed, bool):
        print(f"removed {removed} cache entr{'y' if removed == 1 else 'ies'}.")
    elif not failures:
        print("autotune cache cleared.")
    if failures:
        count = len(failures)
        print(
            f"helion cache clear: {count} entr{'y' if count == 1 else 'ies'} could not be "
            "removed (see above).",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    return 0


def _import_autotune_cache() -> Any:
    try:
        # import_module consults sys.modules first, so a replaced module is honoured
        cache = importlib.import_module("helion.autotuner.cache")
    except ImportError as error:
        raise CommandError(
            f"the autotune cache is not available in this installation of helion-core ({error})"
        ) from error
    missing = [name for name in ("list_entries", "clear") if not hasattr(cache, name)]
    if missing:
        raise CommandError(f"helion.autotuner.cache lacks {', '.join(missing)}()")
    return cache


def _parse_config(raw: str | None) -> Any:
    if raw is None:
        return None
    text = raw
    if not raw.lstrip().startswith("{") and Path(raw).is_file():
        text = Path(raw).read_text()
    try:
        values = json.loads(text)
    except json.JSONDecodeError as error:
        raise CommandError(f"--config is not valid JSON: {error}", EXIT_USAGE) from error
    if not isinstance(values, dict):
        raise CommandError("--config must be a JSON object", EXIT_USAGE)
    from helion import exc
    from helion.runtime.config import Config

    try:
        return Config(**values)
    except (TypeError, ValueError, exc.Base) as error:
        raise CommandError(f"--config is not a valid config: {error}", EXIT_USAGE) from error


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise CommandError(f"no such file: {path}", EXIT_USAGE)
    path = path.resolve()
    # Unlike `python FILE`, the module is not __main__, so the file's own script code does not
    # run; its directory goes on sys.path so that it can import its neighbours.
    module_name = path.stem if path.stem not in sys.modules else f"_helion_show_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CommandError(f"cannot import {path} as a python module", EXIT_USAGE)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    # Registered before running it: dataclasses and inspect look modules up by name.
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _as_record(entry: object) -> object:
    if isinstance(entry, dict):
        return entry
    if dataclasses.is_dataclass(entry) and not isinstance(entry, type):
        return dataclasses.asdict(entry)
    if hasattr(entry, "_asdict"):
        return entry._asdict()
    return str(entry)


def _cell(value: object) -> str:
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    return str(value)


def _safe_version(backend: Any) -> str:
    try:
        return str(backend.version())
    except Exception as error:
        return f"? ({error!r})"


def _core_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("helion-core")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    # Pipes and scripts get plain columns: no box drawing, no folding of long errors.
    if not sys.stdout.isatty():
        _print_plain_table(title, columns, rows)
        return
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        _print_plain_table(title, columns, rows)
        return
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        # Markup is off: error reprs contain square brackets that rich would eat.
        table.add_row(*row)
    Console(markup=False, highlight=False, soft_wrap=False).print(table)
    print()


def _print_plain_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    widths = [len(column) for column in columns]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    print(title)
    print(
        "  ".join(
            column.ljust(width) for column, width in zip(columns, widths, strict=True)
        ).rstrip()
    )
    print("  ".join("-" * width for width in widths))
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    print()


if __name__ == "__main__":
    raise SystemExit(main())
