"""Every error and warning Helion raises.

Errors derive from :class:`BaseError`; each class carries a ``message`` template that is
formatted with the constructor arguments, an optional ``hint`` sentence saying what to do,
and an optional :class:`SourceLocation` pointing at the line of the kernel that caused it.
When a location is known the text reads like a Python traceback entry::

    File "my_kernel.py", line 12, in add
        out[tile] = x[tile] + y
                    ^^^^^^^^^^^
    RankMismatch: ...

Warnings derive from :class:`BaseWarning` and are emitted through :func:`warn`, which honours
``Settings.ignore_warnings`` and the ``HELION_IGNORE_WARNINGS`` environment variable.

This module imports nothing from the rest of Helion so every other module can import it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import linecache
import os
import types
import warnings
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import Iterator
from typing import Sequence

if TYPE_CHECKING:
    import ast


# ---------------------------------------------------------------------------------------------
# Source locations
# ---------------------------------------------------------------------------------------------


def _byte_to_char_offset(line: str, byte_offset: int) -> int:
    # ast column offsets count UTF-8 bytes, the caret line counts characters.
    encoded = line.encode("utf-8")
    return len(encoded[:byte_offset].decode("utf-8", errors="ignore"))


@dataclasses.dataclass(frozen=True)
class SourceLocation:
    """A span of user source code: where an error or warning originates.

    ``col_offset``/``end_col_offset`` are character offsets into the line (0-based), as Python's
    ``ast`` gives them after :meth:`from_ast_node` converted them from UTF-8 bytes.
    ``source_line`` is looked up with :mod:`linecache` when not given.
    """

    filename: str
    lineno: int
    col_offset: int = 0
    end_lineno: int | None = None
    end_col_offset: int | None = None
    name: str | None = None
    source_line: str | None = None

    @classmethod
    def from_frame(
        cls, frame: types.FrameType | inspect.FrameInfo | types.TracebackType | None = None
    ) -> SourceLocation:
        """Location of the statement a frame is executing (default: the caller's frame)."""
        if frame is None:
            current = inspect.currentframe()
            frame = current.f_back if current is not None else None
            if frame is None:
                raise ValueError("no caller frame available")
        if isinstance(frame, inspect.FrameInfo):
            frame = frame.frame
        if isinstance(frame, types.TracebackType):
            code, lasti, lineno = frame.tb_frame.f_code, frame.tb_lasti, frame.tb_lineno
        else:
            code, lasti, lineno = frame.f_code, frame.f_lasti, frame.f_lineno
        col, end_line, end_col = 0, None, None
        # co_positions gives the exact span of the executing instruction (3.11+).
        for index, position in enumerate(code.co_positions()):
            if index == lasti // 2:
                start_line, end_line, col_pos, end_col_pos = position
                if start_line is not None:
                    lineno = start_line
                if col_pos is not None and end_col_pos is not None:
                    line = linecache.getline(code.co_filename, lineno)
                    col = _byte_to_char_offset(line, col_pos)
                    end_text = linecache.getline(code.co_filename, end_line or lineno)
                    end_col = _byte_to_char_offset(end_text, end_col_pos)
                break
        return cls(
            filename=code.co_filename,
            lineno=lineno or 0,
            col_offset=col,
            end_lineno=end_line,
            end_col_offset=end_col,
            name=code.co_name,
        )

    @classmethod
    def from_ast_node(
        cls,
        node: ast.AST,
        filename: str,
        first_lineno_offset: int = 0,
        *,
        name: str | None = None,
        col_offset_shift: int = 0,
        source_lines: Sequence[str] | None = None,
    ) -> SourceLocation:
        """Location of an ``ast`` node parsed from a snippet of ``filename``.

        ``first_lineno_offset`` is added to the node's line numbers (the snippet parsed from
        ``inspect.getsource`` starts at line 1, the function really starts at
        ``first_lineno_offset + 1``); ``col_offset_shift`` is added to columns when the snippet
        was dedented. ``source_lines`` are the snippet's lines, used when the file is not on disk.
        """
        lineno = getattr(node, "lineno", 1)
        end_lineno = getattr(node, "end_lineno", None)
        col = getattr(node, "col_offset", 0) or 0
        end_col = getattr(node, "end_col_offset", None)

        def snippet_text(line_no: int) -> str | None:
            # The text the parser saw for a snippet line: given lines, else the file line
            # with the dedent re-applied.
            if source_lines is not None:
                return source_lines[line_no - 1] if 0 < line_no <= len(source_lines) else None
            text = linecache.getline(filename, line_no + first_lineno_offset)
            return text[col_offset_shift:] if text else None

        first = snippet_text(lineno)
        if first is not None:
            col = _byte_to_char_offset(first, col)
        if end_col is not None:
            last = first if end_lineno in (None, lineno) else snippet_text(end_lineno)
            if last is not None:
                end_col = _byte_to_char_offset(last, end_col)

        real_line = linecache.getline(filename, lineno + first_lineno_offset) or None
        if real_line is None and first is not None:
            real_line = " " * col_offset_shift + first
        return cls(
            filename=filename,
            lineno=lineno + first_lineno_offset,
            col_offset=col + col_offset_shift,
            end_lineno=None if end_lineno is None else end_lineno + first_lineno_offset,
            end_col_offset=None if end_col is None else end_col + col_offset_shift,
            name=name,
            source_line=real_line.rstrip("\n") if real_line is not None else None,
        )

    def line(self) -> str | None:
        """The full text of the first line of the span, without the trailing newline."""
        if self.source_line is not None:
            return self.source_line
        text = linecache.getline(self.filename, self.lineno)
        return text.rstrip("\n") if text else None

    def format(self) -> str:
        """``File "f.py", line N, in fn`` plus the source line and a caret line under the span."""
        header = f'File "{self.filename}", line {self.lineno}'
        if self.name:
            header += f", in {self.name}"
        text = self.line()
        if not text or not text.strip():
            return header
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        stripped = stripped.rstrip()
        start = max(self.col_offset - indent, 0)
        if self.end_col_offset is not None and self.end_lineno in (None, self.lineno):
            end = self.end_col_offset - indent
        else:
            end = len(stripped)  # span continues on later lines: underline to the end
        end = min(max(end, start + 1), len(stripped))
        if start >= len(stripped):
            return f"{header}\n    {stripped}"
        carets = " " * start + "^" * max(end - start, 1)
        return f"{header}\n    {stripped}\n    {carets}"

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"


_current_location: contextvars.ContextVar[SourceLocation | None] = contextvars.ContextVar(
    "helion_current_location", default=None
)


def current_location() -> SourceLocation | None:
    """The location set by the innermost :func:`source_location` block, if any."""
    return _current_location.get()


@contextlib.contextmanager
def source_location(loc: SourceLocation | None) -> Iterator[None]:
    """Errors created inside this block without an explicit ``loc`` point at ``loc``.

    The frontend wraps the tracing of each statement in it, so ops deep inside the tracer can
    raise plain ``exc.RankMismatch(...)`` and still report the user's line.
    """
    token = _current_location.set(loc)
    try:
        yield
    finally:
        _current_location.reset(token)


_message_rewriter: contextvars.ContextVar[Callable[[str], str] | None] = contextvars.ContextVar(
    "helion_message_rewriter", default=None
)


@contextlib.contextmanager
def message_rewriter(rewrite: Callable[[str], str] | None) -> Iterator[None]:
    """Errors created inside this block pass their text (and their string arguments) through
    ``rewrite``. The tracer uses it to show the dimensions of shapes as the user knows them
    (a slice's extent, a tile's ``t.block_size``) instead of the IR's symbols."""
    token = _message_rewriter.set(rewrite)
    try:
        yield
    finally:
        _message_rewriter.reset(token)


def _rewritten(value: object) -> object:
    """``value`` through the active :func:`message_rewriter` (strings only)."""
    rewrite = _message_rewriter.get()
    if rewrite is None or not isinstance(value, str):
        return value
    return rewrite(value)


# ---------------------------------------------------------------------------------------------
# Base classes
# ---------------------------------------------------------------------------------------------


def _format_template(
    template: str,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    defaults: tuple[object, ...] = (),
) -> str:
    # ``defaults`` fill trailing positional fields the caller left out.
    padded = (*args, *defaults[len(args) :])
    try:
        return template.format(*padded, **kwargs).strip()
    except (IndexError, KeyError, ValueError, AttributeError):
        # Wrong arity must not hide the original problem behind a formatting error.
        extra = ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        return f"{template} ({extra})" if extra else template


def _rebuild(
    cls: type,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    loc: SourceLocation | None,
    hint: str | None,
) -> Any:
    return cls(*args, loc=loc, hint=hint, **kwargs)


class Base(RuntimeError):
    """Root of every Helion exception."""

    def report(self) -> str:
        return str(self)


class BaseError(Base):
    """Base of all Helion errors.

    Subclasses set ``message`` (a ``str.format`` template over the constructor arguments) and,
    where there is a clear fix, ``hint``. Constructor keywords ``loc`` and ``hint`` override
    the location and hint; all other arguments feed the template.
    """

    message: str = "An error occurred."
    hint: str | None = None
    #: Values for trailing positional template fields the caller did not pass.
    defaults: tuple[object, ...] = ()

    def __init__(
        self,
        *args: object,
        loc: SourceLocation | None = None,
        hint: str | None = None,
        **kwargs: object,
    ) -> None:
        if _message_rewriter.get() is not None:
            args = tuple(_rewritten(a) for a in args)
            kwargs = {k: _rewritten(v) for k, v in kwargs.items()}
        self.template_args = args
        self.template_kwargs = kwargs
        self.loc = loc if loc is not None else current_location()
        self._hint_override = hint
        if hint is not None:
            self.hint = hint
        self.msg = _format_template(type(self).message, args, kwargs, type(self).defaults)
        self.msg = str(_rewritten(self.msg))  # the text of arguments that are not strings
        super().__init__(self._compose())

    def _compose(self) -> str:
        parts = []
        if self.loc is not None:
            parts.append(self.loc.format())
        parts.append(self.msg)
        if self.hint:
            parts.append(f"Hint: {self.hint}")
        return "\n".join(parts)

    def with_location(self, loc: SourceLocation) -> BaseError:
        """Attach a location after the fact (keeps an existing one)."""
        if self.loc is None:
            self.loc = loc
            self.args = (self._compose(),)
        return self

    def __str__(self) -> str:
        return self.args[0] if self.args else self.msg

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (autotuner workers); rebuild from the template args.
        return (
            _rebuild,
            (type(self), self.template_args, self.template_kwargs, self.loc, self._hint_override),
        )


class BaseWarning(UserWarning):
    """Base of all Helion warnings; same template/loc/hint scheme as :class:`BaseError`."""

    message: str = "Helion warning."
    hint: str | None = None
    defaults: tuple[object, ...] = ()

    def __init__(
        self,
        *args: object,
        loc: SourceLocation | None = None,
        hint: str | None = None,
        **kwargs: object,
    ) -> None:
        self.template_args = args
        self.template_kwargs = kwargs
        self.loc = loc if loc is not None else current_location()
        self._hint_override = hint
        if hint is not None:
            self.hint = hint
        self.msg = _format_template(type(self).message, args, kwargs, type(self).defaults)
        text = self.msg + (f"\nHint: {self.hint}" if self.hint else "")
        super().__init__(text)

    def __str__(self) -> str:
        return self.args[0] if self.args else self.msg

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), self.template_args, self.template_kwargs, self.loc, self._hint_override),
        )


class MultipleErrors(BaseError):
    """Several errors found in one pass (e.g. every construct a backend cannot compile)."""

    message = "{0} errors:\n\n{1}"

    def __init__(self, errors: Sequence[BaseException], **kwargs: Any) -> None:
        self.errors = list(errors)
        joined = "\n\n".join(str(e) for e in self.errors)
        super().__init__(len(self.errors), joined, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errors,))


def raise_collected(errors: Sequence[BaseException]) -> None:
    """Raise nothing, the single error, or a :class:`MultipleErrors` holding all of them."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise MultipleErrors(errors)


# ---------------------------------------------------------------------------------------------
# Warnings helper
# ---------------------------------------------------------------------------------------------

_WARN_REGISTRY: dict[Any, Any] = {}


def _env_ignored_warning_names() -> set[str]:
    raw = os.environ.get("HELION_IGNORE_WARNINGS", "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def is_warning_ignored(warning: BaseWarning | type[BaseWarning], settings: object = None) -> bool:
    cls = warning if isinstance(warning, type) else type(warning)
    ignored = getattr(settings, "ignore_warnings", None) or ()
    if any(isinstance(c, type) and issubclass(cls, c) for c in ignored):
        return True
    names = _env_ignored_warning_names()
    return bool(names) and any(k.__name__ in names for k in cls.__mro__)


def warn(warning: BaseWarning, settings: object = None, *, stacklevel: int = 2) -> None:
    """Emit a Helion warning unless ``settings.ignore_warnings`` or the environment silences it.

    With a source location the warning is attributed to the user's kernel line, so the
    standard ``warnings`` filters and "shown once per line" behaviour apply to that line.
    """
    if not isinstance(warning, BaseWarning):
        raise TypeError(f"warn() expects a helion.exc.BaseWarning instance, got {warning!r}")
    if is_warning_ignored(warning, settings):
        return
    if warning.loc is not None:
        warnings.warn_explicit(
            warning,
            type(warning),
            warning.loc.filename,
            warning.loc.lineno,
            registry=_WARN_REGISTRY,
        )
    else:
        warnings.warn(warning, stacklevel=stacklevel + 1)


def warning_class_by_name(name: str) -> type[BaseWarning]:
    """Resolve a name from ``HELION_IGNORE_WARNINGS`` to a warning class in this module."""
    obj = globals().get(name)
    if isinstance(obj, type) and issubclass(obj, BaseWarning):
        return obj
    known = sorted(
        n for n, v in globals().items() if isinstance(v, type) and issubclass(v, BaseWarning)
    )
    raise ValueError(f"{name!r} is not a helion.exc warning class; known: {', '.join(known)}")


# ---------------------------------------------------------------------------------------------
# Errors: kernel structure and decoration
# ---------------------------------------------------------------------------------------------


class NotInsideKernel(BaseError):
    message = "{0} must be called from inside a kernel."
    defaults = ("Functions found in helion.language.*",)
    hint = "Call it from a function decorated with @helion.kernel."


class NamingConflict(BaseError):
    message = "The variable name {0!r} is reserved in Helion kernels."
    hint = "Rename the variable."


class ClosuresNotSupported(BaseError):
    message = "A closure ({0!r}) was found in the kernel. Closures are not supported."
    hint = "Define the kernel at module level and pass captured values as arguments."


class KernelSourceUnavailable(BaseError):
    message = "Cannot read the source of kernel {0!r}: {1}"
    hint = (
        "Helion compiles a kernel from its Python source: define it in a file (a module or a "
        "script), not at an interactive prompt, in exec() or in code piped to stdin."
    )


class ClosureMutation(BaseError):
    message = "Closure mutation (of {0}) is not allowed in a function."


class GlobalMutation(BaseError):
    message = (
        "Global mutation (of {0}) is not allowed inside the `hl.tile` or `hl.grid` loop: "
        "device code cannot change Python globals."
    )
    hint = (
        "Device code is traced once and runs on the device, where Python globals do not exist: "
        "write the value into a tensor (out[tile] = ...), or change the global in host code, "
        "before or after the loops."
    )


class DecoratorAfterHelionKernelDecorator(BaseError):
    message = "Decorators after helion kernel decorator are not allowed."
    hint = "Put @helion.kernel closest to the def; other decorators may go above it."


class NoTensorArgs(BaseError):
    message = "Kernel took no tensor or device args; unclear what device to use."
    hint = "Pass at least one tensor (or a torch.device) to the kernel."


class NegatedTensorView(BaseError):
    message = (
        "{0} is a negated view: its neg bit is set (as on `.imag` of a conjugated complex "
        "tensor), so its memory holds the values with the opposite sign, and a kernel reads "
        "memory as it is stored."
    )
    hint = "Pass `t.resolve_neg()`, a tensor with the sign applied."
    defaults = ("A tensor argument",)


class UnsupportedTensorKind(BaseError):
    message = "A tensor argument is {0}: Helion kernels take dense, strided tensors."
    hint = "Convert it first (e.g. `t.to_dense()`, `t.dequantize()`), or unbind a nested tensor."


class TensorsOnDifferentDevices(BaseError):
    message = "The device code reads tensors on different devices: {0} on {1}, {2} on {3}."
    hint = (
        "Put every tensor the device loops use on one device; allocate in host code with "
        "device=x.device or torch.empty_like(x)."
    )


class NoDeviceLoopsInKernel(BaseError):
    message = (
        "Kernel {0!r} contains no device loops. Add an hl.tile(...) or hl.grid(...) loop "
        "around your device computations."
    )
    defaults = ("kernel",)


class NestedKernelCallsNotSupported(BaseError):
    message = "Calling a Helion kernel from within another Helion kernel is not supported."
    hint = "Inline the inner computation, or call the kernels one after the other from host code."


class EmptyDeviceLoopAfterDCE(BaseError):
    message = "Device loop is empty after dead-code elimination: its results are never stored."
    hint = "Store the results into an output tensor with out[tile] = value."


class TracedArgNotSupported(BaseError):
    message = "{0!s} is not supported as an argument of a traced function."


class UnsupportedPythonType(BaseError):
    message = "{0} is not supported in Helion kernels."


class UndefinedVariable(BaseError, NameError):
    """A name device code reads that is not defined (also a NameError, as Python raises it)."""

    message = "{0!s} is not defined."
    hint = (
        "Device code reads the kernel's arguments, the host variables assigned before the "
        "device loop, names assigned earlier in the loop and module globals: define it in one "
        "of these places (or check the spelling)."
    )


class DeviceTypeError(BaseError, TypeError):
    """A TypeError raised by the kernel's own device code while it was traced: a call with
    arguments the function does not take, an operation on a value of the wrong kind (None, a
    list, a host tensor where a device value is needed)."""

    message = "{0!s}"
    hint = (
        "Device code runs once, on proxy values, while the kernel is traced: check the "
        "arguments of the call and the kinds of the values on this line."
    )


class DeviceAttributeError(BaseError, AttributeError):
    """An attribute device code asked of a device value, a tile or a host tensor that it does
    not have (still an AttributeError, so `hasattr` and `getattr(x, name, default)` work)."""

    message = "{0} has no attribute {1!r}{2}"
    defaults = ("A device value", "?", "")


class DeviceLookupError(BaseError, KeyError, IndexError):
    """A key or an index the kernel's own device code looked up that is not there: a dict key
    of a container argument, an item of a list argument (still a KeyError and an IndexError,
    so `except KeyError` keeps working)."""

    message = "{0!s}"
    hint = (
        "Device code reads the containers the kernel was called with: check that the argument "
        "has this key or item."
    )

    __str__ = Exception.__str__  # KeyError's would quote the whole message


class DeviceRecursionError(BaseError, RecursionError):
    """Device code that recursed without end while it was traced."""

    message = (
        "Maximum recursion depth exceeded while tracing device code (a helper function that "
        "calls itself without end?)"
    )
    hint = (
        "Device code is traced once, in Python: a recursive helper must stop on a condition "
        "known while tracing (a Python int, a constant), not on a device value."
    )


# ---------------------------------------------------------------------------------------------
# Errors: device loops
# ---------------------------------------------------------------------------------------------


class LoopFunctionNotInFor(BaseError):
    message = "{0} must be called from a for loop, e.g. `for tile in {0}(...):`."
    defaults = ("hl.tile",)


class NestedDeviceLoopsConflict(BaseError):
    message = "Nested device loops must have distinct block sizes."


class DeviceLoopElseBlock(BaseError):
    message = "for...else block is not allowed in a {0} device loop."
    defaults = ("hl.tile/hl.grid",)


class LoopDependencyError(BaseError):
    message = (
        "Loop dependency detected: {0!r} was written in a previous loop. Top-level device "
        "loops run concurrently."
    )
    hint = "Separate the loops with hl.barrier(), or merge them into one loop."


class TopLevelStatementBetweenLoops(BaseError):
    message = "Statements cannot appear between top level loops."
    hint = "Move the statement before the first or after the last device loop (only hl.barrier() may sit between them)."


class BarrierOnlyAllowedAtTopLevel(BaseError):
    message = "hl.barrier() is only allowed as a top-level statement between device loops."


class BarrierRequiresPersistent(BaseError):
    message = "hl.barrier() requires a persistent pid_type, got pid_type={0!r}."
    hint = "Use pid_type='persistent_blocked' or 'persistent_interleaved'."


class NestedGridLoop(BaseError):
    message = "Grid loops must be at the top level of a function."


class InvalidDeviceForLoop(BaseError):
    message = (
        "For loops on device must use hl.tile, hl.grid, hl.static_range or range(), got {0!s}."
    )
    defaults = ("another iterable",)


class InvalidTileRange(BaseError):
    message = "hl.tile() has begin={0} greater than end={1}."


class TileOfTile(BaseError):
    message = "Expected size arg to hl.tile to be an integer or size, got a tile."
    hint = "Use hl.tile(tile.begin, tile.end) or hl.tile(tile.count)."


class FailedToUnpackTile(BaseError):
    message = (
        "Failed to unpack a tile into a tuple, likely caused by calling hl.tile() on a "
        "1D tensor (or a single size)."
    )
    hint = "Use `for tile in hl.tile(n):` for one dimension, or pass a list of sizes."


class SequenceExpected(BaseError, TypeError):
    """An hl.* op given one value where it takes a list: the shape of `hl.zeros`, `hl.full`,
    `hl.rand`, the index of `hl.load`, `hl.store` and the atomics (also a TypeError)."""

    message = "{0}: the {1} must be a list or tuple (got {2}); write {3}."
    defaults = ("hl.*", "argument", "another value", "a list")
    hint = None


class TileGivenForSequence(SequenceExpected, FailedToUnpackTile):
    """A tile where an hl.* op takes a list (`hl.zeros(tile)`, `hl.load(x, tile)`); also a
    FailedToUnpackTile, which public Helion raises for it."""

    message = SequenceExpected.message
    hint = None


class IncorrectTileUsage(BaseError):
    message = "Tiles can only be used in tensor indexing (`x[tile]`) or in `hl.*` ops, got {0}."
    defaults = ("another use",)


class InvalidJaggedTileUsage(BaseError):
    message = "Invalid use of a jagged tile: {0}"


class StarredArgsNotSupportedOnDevice(BaseError):
    message = "*/** args are not supported inside the `hl.tile` or `hl.grid` loop."


# ---------------------------------------------------------------------------------------------
# Errors: shapes, indexing, dtypes
# ---------------------------------------------------------------------------------------------


class RankMismatch(BaseError):
    message = "Expected ndim={0}, but got ndim={1}{2}."
    defaults = ("?", "?", "")

    def __init__(
        self, expected_ndim: object, actual_ndim: object, context: str = "", **kwargs: Any
    ) -> None:
        self.expected_ndim = expected_ndim
        self.actual_ndim = actual_ndim
        self.context = context
        super().__init__(expected_ndim, actual_ndim, f" in {context}" if context else "", **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (
                type(self),
                (self.expected_ndim, self.actual_ndim, self.context),
                {},
                self.loc,
                self._hint_override,
            ),
        )


class InvalidIndexingType(BaseError):
    message = "Expected tile/int/None/tensor/etc in tensor[...], got {0!s}."


class OverpackedTile(InvalidIndexingType):
    """A tile inside a list or tuple used as one index (`x[[tile]]`, `x[[tile], :]`)."""

    message = "Got a tile wrapped inside a container when indexing a tensor: {0!s}"
    hint = "Index with the tile itself, e.g. x[tile] instead of x[[tile]]."


class ShapeMismatch(BaseError):
    """``ShapeMismatch(description)`` or ``ShapeMismatch(shape_a, shape_b)``."""

    message = "Shape mismatch: {0!s}{1}."
    defaults = ("", "")

    def __init__(self, first: object = "", second: object = None, **kwargs: Any) -> None:
        if _message_rewriter.get() is not None:  # kept rewritten for pickling too
            first = _rewritten(str(first))
            second = None if second is None else _rewritten(str(second))
        self.first, self.second = first, second
        if second is None:
            super().__init__(str(first).rstrip("."), "", **kwargs)
        else:
            super().__init__(f"{first!s} vs {second!s}", "", **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), (self.first, self.second), {}, self.loc, self._hint_override),
        )


class NegativeSize(BaseError):
    message = "Negative size {0} in {1}: sizes of device tensors are 0 or more."
    defaults = ("?", "a shape")


class IntegerDivisionByZero(BaseError):
    """An integer division or remainder by a divisor that is the constant 0 (torch raises
    ZeroDivisionError for it on CPU; compiled kernels would give a value that differs between
    backends)."""

    message = "Integer {0} by zero: {1}."
    defaults = ("division", "the divisor is the constant 0")
    hint = (
        "Guard the divisor (e.g. torch.where(d == 0, 1, d)), or divide in floating point. "
        "A divisor that is 0 only at run time is not checked: integer division by zero is "
        "undefined in compiled kernels."
    )


class DotBatchDimensionMismatch(BaseError):
    message = (
        "hl.dot: batch dimensions of the operands must match or be 1, got lhs batch {0} "
        "and rhs batch {1}."
    )


class IndexOffsetOutOfRangeForInt32(BaseError):
    message = "Index offsets of a tensor with {0} elements do not fit in int32 (index_dtype={1})."
    hint = "Use index_dtype=torch.int64 (or leave it unset to pick it automatically)."


class IndexOutOfBounds(BaseError):
    """An unmasked lane of a load, store or atomic falls outside its tensor (compiled code would
    touch memory past it)."""

    message = (
        "Out-of-bounds {0} of tensor '{1}': index {2} along dimension {3} (of size {4}) is not "
        "masked."
    )
    hint = (
        "Loop over the tensor's own size, or pass extra_mask= so that lanes outside the tensor "
        "are skipped."
    )


class InputTensorNumelExceedsIndexType(BaseError):
    message = "Kernel index_dtype is {0}, but input tensor is too large: numel={1}."
    hint = "Use index_dtype=torch.int64 or leave index_dtype unset."


class DataDependentOutputShapeNotSupported(BaseError):
    message = (
        "{0} is not supported in Helion device loops because it produces a "
        "data-dependent output shape."
    )


class ReductionOnNonTile(BaseError):
    message = "Reduction must be over a tile or a reduction dimension, got {0!s}."


class InvalidReductionDim(BaseError):
    message = "{0}: invalid reduction dimension {1!s}."
    defaults = ("reduction", "?")


class MultipleReductionDims(BaseError):
    message = "{0}: reducing over several dimensions in one call is not supported."
    defaults = ("reduction",)
    hint = "Reduce one dimension at a time."


class ReductionDimInvalidForShape(BaseError):
    message = "Reduction dim {0} is invalid for shape {1!s}."


class DimensionNotWhole(BaseError):
    message = "{0} needs every element of dimension {1} at once, but {2}."
    hint = (
        "Load that dimension as a full slice (x[tile, :]), or iterate it with hl.tile(n) over "
        "constant bounds so that one tile can cover it."
    )


class DuplicateStoreIndicesError(BaseError):
    message = "Store indices contain duplicates: {0!s}"


# ---------------------------------------------------------------------------------------------
# Errors: host/device boundary and statements
# ---------------------------------------------------------------------------------------------


class NotAllowedOnDevice(BaseError):
    message = "{0} is not allowed inside the `hl.tile` or `hl.grid` loop."
    defaults = ("This statement",)


class UnsupportedSplitOperation(NotAllowedOnDevice):
    """`torch.chunk`, `torch.split`, `torch.unbind`, `torch.tensor_split` (and the methods) on
    device: the pieces would be a Python list of tensors of shapes only known per tile."""

    message = (
        "{0} is not supported inside device loops: device code cannot split a tensor into a "
        "list of tensors."
    )
    hint = (
        "Use hl.split() instead. It splits a last dimension of size 2 in two; for other "
        "sizes load each part with a slice of its own (x[tile, 0:8], x[tile, 8:16])."
    )


class GridStepNotSupported(NotAllowedOnDevice):
    """`hl.grid(begin, end, step)` (or `range(begin, end, step)` in device code) with a step
    other than 1."""

    message = (
        "hl.grid with a step other than 1 (step={0!s}) is not supported (in device code, "
        "range() is hl.grid)."
    )
    defaults = ("?",)
    hint = (
        "Loop with step 1 and scale the index: compute `count = helion.cdiv(end - begin, "
        "step)` in host code, then `for i in hl.grid(count):` and `j = begin + i * step`; or "
        "use `for tile in hl.tile(begin, end, block_size=step):` and tile.begin."
    )


class NotAllowedInHelperFunction(BaseError):
    message = "This operation is not allowed inside a helper function called from a kernel."


class DeviceAPIOnHost(BaseError):
    message = "{0} is only allowed inside the `hl.tile` or `hl.grid` loop."


class HostTensorDirectUsage(BaseError):
    message = (
        "Direct use of host tensor {0!s} is not allowed inside the `hl.tile` or `hl.grid` loop."
    )
    hint = "Load a tile first: use x[tile] (or x[tile, :]) instead of x."


class CannotModifyHostVariableOnDevice(BaseError):
    message = "Cannot modify host variable {0!r} inside the `hl.tile` or `hl.grid` loop."
    hint = "Assign to a new name, or write into a tensor with x[tile] = value."


class CannotReadDeviceVariableOnHost(BaseError):
    message = (
        "Cannot read variable {0!r} defined inside the `hl.tile` or `hl.grid` loop from host code."
    )
    hint = "Store the value into a tensor inside the loop and read the tensor on the host."


class CantReadOnDevice(BaseError):
    message = "Cannot read {0!s} inside the `hl.tile` or `hl.grid` loop."


class DeviceTensorSubscriptAssignmentNotAllowed(BaseError):
    message = (
        "Cannot assign to a subscript of {0}; only host tensors (kernel arguments) can be "
        "written with x[...] = value."
    )
    defaults = ("a device tensor",)
    hint = "Use torch.where(...) to build a new device tensor instead."


class NonTensorSubscriptAssign(BaseError):
    message = "Subscript assignment needs a host tensor target, got {0!s}."


class RequiresTensorInAssignment(BaseError):
    message = "Expected tensor in right-hand side of assignment, got {0!s}."


class AssignmentMultipleTargets(BaseError):
    message = "Assignment with multiple targets (a = b = 1) is not allowed inside device loops."


class InvalidAssignment(BaseError):
    message = (
        "Assignment target must be a Name or Subscript inside the `hl.tile` or `hl.grid` loop."
    )


class FailedToUnpackTupleAssign(BaseError):
    message = (
        "Failed to unpack values in tuple assignment. Expected a sequence of size {0}, got {1}."
    )


class InvalidSequenceSubscription(BaseError):
    message = "Cannot subscript a sequence with non-constant indices, got {0!s}."


class StatementNotSupported(BaseError):
    message = "The statement {0} is not supported."


class CantCombineTypesInControlFlow(BaseError):
    message = "Cannot combine types for {0!r} in control flow: {1} and {2}."


class ControlFlowTensorMismatch(BaseError):
    message = "Tensor mismatch in control flow: {0!s} vs {1!s}."
    hint = "Make both branches produce tensors of the same shape and dtype."


class LoopCarriedTypeChange(ControlFlowTensorMismatch):
    message = (
        "The loop changes {0!s} from {1!s} to {2!s}; a value carried from one iteration to the "
        "next keeps its type."
    )
    hint = (
        "Start it with the type the loop gives it (e.g. hl.zeros(..., dtype=torch.float32)), "
        "or cast in the body (`.to(...)`)."
    )


class ShapeSpecializingCall(BaseError):
    message = "Call would force shape specialization, try `hl.specialize(x)` or `hl.constexpr`."


class ShapeSpecializingAllocation(BaseError):
    message = "Using a tensor size in a device allocation requires specialization."
    hint = "Use `hl.specialize` or `hl.constexpr` to specialize the size."


class SpecializeOnDevice(BaseError):
    message = "hl.specialize() must be called outside the `hl.tile` or `hl.grid` loop."


class SpecializeArgType(BaseError):
    message = "hl.specialize() must be called on a size or stride of an input tensor, got: {0!s}"


class AtomicOnDeviceTensor(BaseError):
    message = "{0}() target must be a host tensor (a kernel argument), not a device tensor."
    defaults = ("hl.atomic_*",)


class InvalidAPIUsage(BaseError):
    message = "Invalid usage of Helion API: {0}"


class BreakpointInDeviceLoopRequiresInterpret(BaseError):
    message = "breakpoint() inside a device loop requires interpret mode."
    hint = "Set HELION_INTERPRET=1 (Helion eager mode) to use breakpoint() in device code."


class GraphModuleUnsupportedOps(BaseError):
    message = "torch.fx.GraphModule argument contains unsupported operations: {0}"


# ---------------------------------------------------------------------------------------------
# Errors: stack tensors
# ---------------------------------------------------------------------------------------------


class StackTensorcOnHost(BaseError):
    message = "StackTensor must be created inside the `hl.tile` or `hl.grid` loop."


class StackTensorDevPtrOnHost(BaseError):
    message = "StackTensor must be created from a dev_ptr tensor defined on host."


class StackTensorDevPtrDtype(BaseError):
    message = "StackTensor dev_ptr must be a torch.uint64 tensor, got {0}."


class StackTensorExampleOnDevice(BaseError):
    message = "StackTensor example tensor must be defined on host, not inside a device loop."


class StackTensorUnknownPointer(BaseError):
    message = "{0}: no live tensor holds the buffer at {1}."
    hint = (
        "The ref backend and eager mode read StackTensor buffers through tensors they know: build "
        "the pointers with hl.stack_pointers(tensors) (or hl.register_buffers(*tensors)), or point "
        "at tensor arguments the kernel reads."
    )


# ---------------------------------------------------------------------------------------------
# Errors: tunables and configs
# ---------------------------------------------------------------------------------------------


class RegisterTunableArgTypes(BaseError):
    message = (
        "hl.register_tunable() expects a name string and a ConfigSpecFragment, got {0!r} and {1!r}."
    )


class TunableTypeNotSupported(BaseError):
    message = "Tunable fragment type {0!s} is not supported."


class TunableNameConflict(BaseError):
    message = (
        "Tunable parameter name {0!r} conflicts with a built-in config key or another tunable."
    )
    hint = "Choose a different name for hl.register_tunable()."


class ConfigSpecFragmentWithSymInt(BaseError):
    message = "ConfigSpecFragment bounds must be concrete ints, got a symbolic value {0!r}."
    hint = "Use hl.specialize() on the size, or give constant bounds."


class InvalidConfig(BaseError):
    message = "{0}"


class NotEnoughConfigs(BaseError):
    message = "{0}"

    def __init__(self, detail: object, **kwargs: Any) -> None:
        # An int is the number of configs given; anything else is a full explanation.
        self.detail = detail
        if isinstance(detail, int):
            text = f"FiniteSearch requires at least two configs, but got {detail}."
        else:
            text = str(detail)
        super().__init__(text, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), (self.detail,), {}, self.loc, self._hint_override))


class VariantConfigMismatch(BaseError):
    """Host values that change between calls of one specialization key (a container the host
    code builds, e.g. of another length) made the device code trace to other loops than the
    kernel's config was made for."""

    message = (
        "Kernel {0!r} was traced again for {1}, and that trace has other loops than the one its "
        "config was made for ({2}): one config cannot run both"
    )
    hint = (
        "Pass such a container as a kernel argument (its structure is part of the "
        "specialization key, so each structure gets its own config), or give @helion.kernel a "
        "key= function returning what decides it (e.g. the length)."
    )


class AutotuneMultiError(BaseError):
    """``Kernel.autotune_multi`` cannot tune these argument sets together."""

    message = "autotune_multi: {0}"


class NoConfigFound(BaseError):
    message = "No working config found from autotuning. {0}"
    defaults = ("",)
    hint = "Run with HELION_AUTOTUNE_LOG_LEVEL=DEBUG to see why each candidate failed."


class InconsistantConfigsAcrossRanks(BaseError):
    message = "Autotuning produced different configs on different ranks: {0}"


class AutotuneError(BaseError):
    message = "{0}"


class TorchIntegrationError(BaseError):
    """A kernel cannot run as a PyTorch custom operator (torch.compile, autograd, fake tensors)."""

    message = "{0}"


class AutotuningDisallowedInEnvironment(BaseError):
    message = "Autotuning is disabled {0}, please provide a config to @helion.kernel via the config= argument."


class CacheAssertionError(BaseError):
    message = "Expected cache hit for kernel {0!r}, but got cache miss. See stderr for diagnostic information."


# ---------------------------------------------------------------------------------------------
# Errors: settings and interpret modes
# ---------------------------------------------------------------------------------------------


class InvalidSetting(BaseError, ValueError):
    """A bad Settings value or environment variable (also a ValueError)."""

    message = "{0}"


class IncompatibleInterpretModes(BaseError):
    message = "Helion and Triton interpret modes are mutually exclusive: HELION_INTERPRET=1 and TRITON_INTERPRET=1 are both set."
    hint = "Unset one of them: HELION_INTERPRET runs the kernel eagerly in PyTorch, TRITON_INTERPRET runs generated Triton code on the CPU."


class RefEagerModeCodePrintError(BaseError):
    message = "No generated code to print out if ref eager mode is enabled."
    hint = "Unset HELION_INTERPRET (or ref_mode) to see generated code, or unset HELION_PRINT_OUTPUT_CODE."


class MissingEnableTile(BaseError):
    message = "backend='tileir' requires the environment variable ENABLE_TILE=1."


# ---------------------------------------------------------------------------------------------
# Errors: backends and plugins
# ---------------------------------------------------------------------------------------------


class BackendImplementationMissing(BaseError):
    message = "Backend {0!r} is missing required implementation: {1}"


class BackendUnsupported(BaseError):
    message = "{0} is not supported by the {1!r} backend."
    hint = "Rewrite the construct, or choose a backend that supports it with backend=... / HELION_BACKEND."

    def __init__(self, op: object, backend: str, *args: object, **kwargs: Any) -> None:
        self.op = op
        self.backend = backend
        super().__init__(op, backend, *args, **kwargs)


class OutputCodeUnsupported(BackendUnsupported):
    """`BoundKernel.to_code(options=OutputCodeOptions(...))` asked a backend for a module it
    cannot emit: a self-contained one (``allow_helion_deps=False``) or a pure-JAX one
    (``jax_fn=True``). The message names the option and the backend."""

    hint = (
        "Call to_code() without these options for the module this backend loads, or use a "
        "backend that exports such modules (see docs/api/runtime.md)."
    )


class HostCodeNotExportable(BaseError):
    """The host code of a kernel uses something a self-contained module cannot hold."""

    message = "The host code of kernel {0!r} cannot be put into a self-contained module: {1}"
    hint = (
        "Keep host code to torch, the standard library, helion.cdiv/next_power_of_2, "
        "helion.runtime.get_num_sm/get_num_xcd and hl.register_block_size/register_tunable/"
        "specialize, or use to_code() without allow_helion_deps=False."
    )


class BackendUnavailable(BaseError):
    message = "Backend {0!r} is not available: {1}"

    def __init__(
        self, backend: str, reason: str, distribution: str | None = None, **kwargs: Any
    ) -> None:
        self.backend = backend
        self.reason = reason
        self.distribution = distribution
        if distribution and "hint" not in kwargs:
            extra = distribution.removeprefix("helion-")
            kwargs["hint"] = (
                f"Install it with: pip install {distribution} "
                f"(or pip install helion-core[{extra}])."
            )
        super().__init__(backend, reason, distribution, **kwargs)


class UnknownBackend(BackendUnavailable):
    """No installed plugin provides the backend and it is not a first-party one: most likely a
    misspelt name (a first-party backend that is not installed raises :class:`BackendUnavailable`
    itself, saying what to install)."""

    message = "Unknown backend {0!r}: {1}"


class CuteBackendUnavailable(BackendUnavailable):
    message = "Backend {0!r} is not available: {1}"

    def __init__(self, reason: str = "nvidia-cutlass-dsl is not installed", **kwargs: Any) -> None:
        kwargs.setdefault("distribution", "helion-cute")
        BackendUnavailable.__init__(self, "cute", reason, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), (self.reason,), {}, self.loc, self._hint_override))


class PluginOpNotInstalled(BaseError):
    message = "hl.{0} is provided by the {1} distribution: pip install helion-core[{2}]"

    def __init__(self, op_name: str, distribution: str, **kwargs: Any) -> None:
        op_name = op_name.removeprefix("hl.")
        self.op_name = op_name
        self.distribution = distribution
        extra = distribution.removeprefix("helion-")
        super().__init__(op_name, distribution, extra, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), (self.op_name, self.distribution), {}, self.loc, self._hint_override),
        )


class UnsupportedTorchOp(BaseError):
    message = "The torch op {0!s} is not supported inside Helion device loops."
    hint = "Rewrite it with supported ops, or move it to host code outside the device loop."


# ---------------------------------------------------------------------------------------------
# Errors: compilation and internals
# ---------------------------------------------------------------------------------------------


class ErrorCompilingKernel(BaseError):
    message = "{0} errors and {1} warnings occurred (see above)"


class InductorLoweringError(BaseError):
    message = "{0}"


class TorchOpTracingError(BaseError):
    message = "{0!s}"


class TypeInferenceError(BaseError):
    message = "{0}"


class UnsupportedDtype(TypeInferenceError):
    """An op on values of a dtype torch computes little in: float8 (which loads, stores, casts,
    compares for equality and feeds matmul) and uint16 / uint32 / uint64. Refused for every
    backend where torch refuses it (`helion.language._ops.check_dtype_support`)."""

    message = "{0} is not supported on {1} values: {2}."
    defaults = ("This op", "these", "torch does not compute it in this dtype")
    hint = "Cast to a wider float first (x.to(torch.float32)), and cast the result back if needed."


class InternalError(BaseError):
    message = "Internal error: {0!s}"
    hint = "This is a bug in Helion; please report it with the kernel that triggered it."


class TritonError(BaseError):
    message = "Error from Triton code:\n{0}\n\nError running generated Triton program:\n{1}\n{2}"
    defaults = ("", "", "")
    #: the autotuner's one-line reason for a failed candidate then names the cause instead
    leads_with_source = True


class TritonUnrecoverableRuntimeError(BaseError):
    message = (
        "An unrecoverable Triton runtime error occurred: {0}. The CUDA context is "
        "unusable; restart the process.\n{1}\n{2}"
    )
    defaults = ("", "", "")


class AutodiffKernelNotCalled(BaseError):
    message = "Kernel must be called once before generating its backward pass."


class AutodiffNotSupported(BaseError):
    message = "Automatic differentiation is not supported for {0}."


# ---------------------------------------------------------------------------------------------
# Warnings
# ---------------------------------------------------------------------------------------------


class TensorOperationInWrapper(BaseWarning):
    message = (
        "A tensor operation outside of the `hl.tile` or `hl.grid` loop will not be fused "
        "in the generated kernel."
    )
    hint = (
        "Use @helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper]) to "
        "suppress this warning; if this is not a tensor operation, please report it as a bug."
    )


class TensorOperationsInHostCall(TensorOperationInWrapper):
    message = (
        "A tensor operation outside of the `hl.tile` or `hl.grid` loop will not be fused "
        "in the generated kernel: {0}"
    )


class ProcessGroupNameNotFound(BaseWarning):
    message = "Process group name {0!r} not found; distributed autotuning will not sync configs."


class WrongDevice(BaseWarning):
    message = "Operation {0} returned a tensor on {1} device, but the kernel is on {2} device."


class ReduceOtherNotIdentity(BaseWarning):
    message = (
        "hl.reduce: other={0} is not an identity of combine_fn (combining it with {1} gave {2}). "
        "Compiled code pads partial tiles and dimensions that are not a power of two with "
        "`other`, so those lanes change the result there."
    )
    hint = "Pass the combiner's identity, e.g. other=float('-inf') for a maximum, 1 for a product."


class BlockSizeIgnoredInInterpretMode(BaseWarning):
    message = "Block size {0} ignored in interpret mode."


class TiledKMatmulAccumulationWarning(BaseWarning):
    message = (
        "Detected `acc += a @ b` (or `acc = acc + torch.mm(a, b)`) in a loop: the product is "
        "rounded to {0} before it is added to the {1} accumulator, every iteration."
    )
    defaults = ("its own dtype", "wider")
    hint = "Write `acc = torch.addmm(acc, a, b)` or `acc = hl.dot(a, b, acc=acc)` instead."


class NoAOTHeuristicWarning(BaseWarning):
    message = "No AOT heuristic found for kernel {0!r}; falling back to autotuning/default config."


class CacheCorrupt(BaseWarning):
    message = "Ignoring corrupt autotune cache entry {0}: {1}"
    hint = "Delete the file (or run `helion cache clear`) to silence this warning."


class AutotuneCandidateFailed(BaseWarning):
    message = "Autotune candidate {0} failed: {1}"


class AccuracyCheckDisabled(BaseWarning):
    message = (
        "Autotuning {0}: the accuracy baseline ({1}) failed ({2}); the accuracy check is off for "
        "this run, so configs will not be checked against a reference output and a config that "
        "computes wrong results can win."
    )
    hint = (
        "Make the default config work, or pass autotune_baseline_fn= (a reference "
        "implementation) so candidates are checked; autotune_accuracy_check=False (or "
        "ignore_warnings=[helion.exc.AccuracyCheckDisabled]) silences this."
    )


class EmptyReduction(BaseError):
    message = (
        "{0} over dimension {1}, which has size 0: the reduction has no identity value, "
        "so its result is undefined (torch raises an error here too)."
    )
    hint = (
        "Check the size in host code before launching, or reduce with sum, prod, any or all, "
        "which give their identity for an empty dimension."
    )


class TensorOnMetaDevice(BaseError):
    message = (
        "Tensors of the device code are on the meta device ({0}), which holds no data: the "
        "{1!r} backend cannot run a kernel on them."
    )
    hint = (
        "Pass tensors on a real device. For output shapes alone, call the kernel under "
        "torch.compile or torch's FakeTensorMode: its fake implementation runs only the host code."
    )


class ZeroLengthSlice(BackendUnsupported):
    message = (
        "{0} of a `:` slice of length 0 (a tensor dimension of size 0) is not supported by "
        "the {1!r} backend."
    )
    hint = (
        "Skip the kernel in host code when the dimension is empty, or use backend='ref', "
        "which supports it."
    )


class GeneratorKernel(BaseError):
    message = "Kernel {0!r} uses `{1}`: a Helion kernel must be a plain function, not a {2}."
    hint = "A kernel runs once per call: write its results into output tensors and return them."


class KernelNotAFunction(BaseError):
    message = "helion.kernel() takes a Python function defined with `def`; got {0}."
    hint = (
        "Write the kernel as `def name(args): ...` (at module level: its source is read) and "
        "decorate it with @helion.kernel, or pass that function to helion.kernel(fn, ...)."
    )


class WriteToOverlappingTensor(BaseError):
    message = (
        "{0} into {1!r}, a tensor whose elements {2} in memory (shape {3}, strides {4}): "
        "several of its elements are one memory location, so what it holds afterwards would "
        "depend on the order of the writes."
    )
    hint = (
        "Write into a tensor with memory of its own for each element: pass `t.contiguous()` or "
        "`t.clone()` instead of an `expand()`ed or overlapping `as_strided` view (then copy the "
        "result back if needed). Reading from such a tensor is fine."
    )


class ComprehensionOnDevice(BaseError):
    message = "A {0} over `{1}` is not supported in device code: {2}."
    hint = (
        "Write a `for` statement instead, or iterate a tuple or list of values "
        "(e.g. `for i in (0, 1, 2)`)."
    )


class KernelCalledOnDevice(NestedKernelCallsNotSupported):
    """A kernel called from device code (public Helion's `NestedKernelCallsNotSupported`,
    which catches it too), naming both kernels."""

    message = (
        "Kernel {0!r} is called from the device code of kernel {1!r}: a Helion kernel cannot "
        "be launched inside an `hl.tile` or `hl.grid` loop."
    )
    hint = (
        "Call it from host code (before or after the device loops), or make the shared code a "
        "plain Python function, which device code can call."
    )
