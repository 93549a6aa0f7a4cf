"""Candidate arguments and the accuracy check.

Each run gets fresh clones of the arguments (an in-place kernel must not corrupt the caller's
inputs or the next candidate's) and the same RNG state (:func:`accuracy_rng`); its output and
the arguments it mutated are compared with a :class:`Baseline`: the default config's results,
or ``settings.autotune_baseline_fn``'s.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion.containers import iter_tensors
from helion.containers import map_tensors

DEFAULT_TOLERANCE = 1e-2

_FP8_DTYPE_NAMES = (
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
)
FP8_DTYPES = frozenset(getattr(torch, name) for name in _FP8_DTYPE_NAMES if hasattr(torch, name))


# ================================================================================ arguments
# Accuracy runs start from one state of torch's CPU generator: a kernel with torch.rand in device
# code draws its seed from it at every launch, and must draw the same one for every config.
ACCURACY_RNG_SEED = 0


@contextlib.contextmanager
def accuracy_rng() -> Any:
    """Run the block with torch's CPU generator seeded to ``ACCURACY_RNG_SEED``, then restore it."""
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(ACCURACY_RNG_SEED)
        yield


def _clone_tensor(tensor: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        try:
            # keep the exact strides: the specialization key (and so the compiled code) depends on them
            copy = torch.empty_strided(
                tensor.size(), tensor.stride(), dtype=tensor.dtype, device=tensor.device
            )
            copy.copy_(tensor)
        except RuntimeError:
            copy = tensor.clone()  # overlapping (expanded) layouts cannot be re-created exactly
    if tensor.requires_grad and copy.is_floating_point():
        copy.requires_grad_(True)
    return copy


def clone_args(value: Any) -> Any:
    """Deep-copy the tensors in ``value`` (inside lists, tuples, dicts, namedtuples and
    dataclasses too), so in-place kernels cannot corrupt the caller's inputs or the next
    candidate's."""
    return map_tensors(_clone_tensor, value)


def _to_device(value: Any, device: torch.device | str) -> Any:
    return map_tensors(lambda tensor: tensor.to(device), value)


def _tensor_bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in iter_tensors([value]))


# ================================================================================ captured tensors
# A kernel may write tensors that are not its arguments: a module-level tensor its device code
# stores to (`ACC[tile] = ACC[tile] + x[tile]`: the global is lifted into a kernel input, read
# from the module at every launch) or one captured by a callable argument (an epilogue's
# closure). Tuning runs the kernel hundreds of times in this process (baseline, timing,
# re-timing), so such a tensor must be protected like the arguments: snapshotted before the
# first run and restored after each one. Every run then starts from the caller's values, the
# caller's tensor holds what it held before tuning (the call after tuning applies one run),
# and a run's writes to it can be compared with the baseline's.


@dataclass
class CapturedTensors:
    """The tensors a kernel writes that are not its arguments, each with a snapshot of its
    contents: ``(description, live tensor, snapshot)``. :meth:`restore` copies the snapshots
    back. In a forked child the live tensors are the child's own copies (the same objects)."""

    entries: list[tuple[str, torch.Tensor, torch.Tensor]] = field(default_factory=list)

    @classmethod
    def of(cls, bound: Any, args: Sequence[Any]) -> CapturedTensors:
        """Those of ``bound`` called with ``args`` (never fails: empty when unknown)."""
        found: list[tuple[str, torch.Tensor, torch.Tensor]] = []
        seen: set[int] = set()
        try:
            candidates = written_captured_tensors(bound, args)
        except Exception:
            candidates = []
        for description, tensor in candidates:
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            try:
                with torch.no_grad():
                    snapshot = tensor.detach().clone()
            except Exception:
                continue
            found.append((description, tensor, snapshot))
        return cls(found)

    def __bool__(self) -> bool:
        return bool(self.entries)

    @property
    def names(self) -> list[str]:
        return [description for description, _, _ in self.entries]

    def current(self) -> list[torch.Tensor]:
        """The live tensors (as the last run left them)."""
        return [tensor for _, tensor, _ in self.entries]

    def values(self) -> list[torch.Tensor]:
        """Copies of the live tensors' contents."""
        with torch.no_grad():
            return [tensor.detach().clone() for _, tensor, _ in self.entries]

    def restore(self) -> None:
        """Put the snapshots back (after a run of a candidate, the baseline or the timing)."""
        with torch.no_grad():
            for _, tensor, snapshot in self.entries:
                with contextlib.suppress(Exception):
                    tensor.copy_(snapshot)

    def load(self, values: Sequence[Any]) -> None:
        """Set the live tensors (and their snapshots) to ``values`` (a spawned worker gets the
        tuning process's values: its own module was imported afresh)."""
        if len(values) != len(self.entries):
            return
        with torch.no_grad():
            for (_, tensor, snapshot), value in zip(self.entries, values, strict=True):
                with contextlib.suppress(Exception):
                    tensor.copy_(value)
                    snapshot.copy_(value)


def written_captured_tensors(bound: Any, args: Sequence[Any]) -> list[tuple[str, torch.Tensor]]:
    """``(description, tensor)`` of each tensor ``bound`` writes that is not one of ``args``
    (nor a tensor its host code makes): a module-level tensor its device code stores to (also
    atomically), one captured by a callable argument that device code stores to, and a
    module-level tensor its host code writes in place (``G[...] = ...``, ``G += ...``,
    ``G.add_(...)``)."""
    from helion.frontend.tracer import resolve_lifted

    split = getattr(bound, "split", None)
    ir = getattr(bound, "ir", None)
    if split is None or ir is None:
        return []
    fn = split.source.fn
    namespace = getattr(fn, "__globals__", {})
    inputs = list(split.device_inputs)
    params = list(split.param_names)
    host_assigned = set(split.host_assigned)
    found: list[tuple[str, torch.Tensor]] = []

    def input_value(position: int) -> Any:
        name = inputs[position]
        if name in params and name not in _reassigned(split):
            index = params.index(name)
            return args[index] if index < len(args) else None
        if name not in host_assigned:
            return namespace.get(name)
        return None  # made by the host code: a fresh value at every call

    written = {op.tensor.index for op in ir.memory_ops() if op.kind in ("store", "atomic")}
    for index in sorted(written):
        if index < len(inputs):
            name = inputs[index]
            if name in host_assigned:
                continue  # an argument (cloned per run) or a tensor the host code makes
            value = namespace.get(name)
            if isinstance(value, torch.Tensor):
                found.append((f"global {name!r}", value))
            continue
        lifted = list(getattr(ir, "lifted", ()))
        source = lifted[index - len(inputs)] if index - len(inputs) < len(lifted) else None
        if source is None or source[0] not in ("closure", "global"):
            continue  # derived from the arguments (cloned with them)
        holder = input_value(source[1])
        if holder is None or not callable(holder):
            continue
        values: list[Any] = [None] * len(inputs)
        values[source[1]] = holder
        try:
            value = resolve_lifted(values, source)
        except Exception:
            continue
        if isinstance(value, torch.Tensor):
            what = "closure of" if source[0] == "closure" else f"global {source[2]!r} of"
            found.append((f"{what} {inputs[source[1]]!r}", value))
    for name in _host_written_names(split):
        value = namespace.get(name)
        if name not in host_assigned and isinstance(value, torch.Tensor):
            found.append((f"global {name!r}", value))
    return found


def _reassigned(split: Any) -> set[str]:
    """The kernel's parameters its host code assigns before the device loops."""
    import ast

    names: set[str] = set()
    for stmt in split.host_before:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def _host_written_names(split: Any) -> list[str]:
    """Names the kernel's host code writes in place: ``NAME[...] = v``, ``NAME[...] += v``,
    ``NAME.method_(...)`` (torch's in-place methods end in ``_``)."""
    import ast

    found: dict[str, None] = {}

    def base_name(node: ast.AST) -> str | None:
        while isinstance(node, ast.Subscript):  # G[i][j] = v writes G
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    for stmt in [*split.host_before, *split.host_after]:
        for node in ast.walk(stmt):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = [t for t in node.targets if isinstance(t, ast.Subscript)]
            elif isinstance(node, ast.AugAssign):
                targets = [node.target]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr.endswith("_")
                and not node.func.attr.startswith("_")
                and isinstance(node.func.value, ast.Name)
            ):
                targets = [node.func.value]
            for target in targets:
                name = base_name(target)
                if name is not None:
                    found.setdefault(name)
    return list(found)


# ================================================================================ accuracy
def _leaves(value: Any, path: str = "output") -> list[tuple[str, Any]]:
    if isinstance(value, (tuple, list)):
        found = []
        for i, item in enumerate(value):
            found.extend(_leaves(item, f"{path}[{i}]"))
        return found
    if isinstance(value, dict):
        found = []
        for key in sorted(value, key=str):
            found.extend(_leaves(value[key], f"{path}[{key!r}]"))
        return found
    return [(path, value)]


def compare_values(
    actual: Any, expected: Any, *, atol: float | None, rtol: float | None
) -> str | None:
    """``None`` when ``actual`` matches ``expected``, else a one-line description of the mismatch."""
    actual_leaves, expected_leaves = _leaves(actual), _leaves(expected)
    if len(actual_leaves) != len(expected_leaves):
        return f"output has {len(actual_leaves)} values, the baseline has {len(expected_leaves)}"
    for (path, a), (_, e) in zip(actual_leaves, expected_leaves, strict=True):
        problem = _compare_leaf(a, e, atol=atol, rtol=rtol)
        if problem is not None:
            return f"{path}: {problem}"
    return None


def _compare_leaf(
    actual: Any, expected: Any, *, atol: float | None, rtol: float | None
) -> str | None:
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"expected a tensor, got {type(actual).__name__}"
        if actual.shape != expected.shape:
            return f"shape {tuple(actual.shape)} != baseline {tuple(expected.shape)}"
        actual = actual.detach()
        expected = expected.detach().to(actual.device)
        if expected.dtype in FP8_DTYPES and atol is None and rtol is None:
            # fp8 rounding is part of the result: only the exact bits are right
            if actual.dtype != expected.dtype or not torch.equal(
                actual.view(torch.uint8), expected.view(torch.uint8)
            ):
                return "fp8 output differs from the baseline bit pattern"
            return None
        if expected.dtype == torch.bool or not (
            expected.is_floating_point() or expected.is_complex()
        ):
            if not torch.equal(actual.to(expected.dtype), expected):
                mismatched = int((actual.to(expected.dtype) != expected).sum())
                return f"{mismatched} of {expected.numel()} integer/bool elements differ"
            return None
        a = actual if actual.is_complex() else actual.float()
        e = expected if expected.is_complex() else expected.float()
        tol_a = DEFAULT_TOLERANCE if atol is None else atol
        tol_r = DEFAULT_TOLERANCE if rtol is None else rtol
        if torch.allclose(a, e, atol=tol_a, rtol=tol_r, equal_nan=True):
            return None
        diff = (a - e).abs()
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
        bad = int((diff > tol_a + tol_r * e.abs()).sum())
        return (
            f"max abs diff {float(diff.max()):.4g}, {bad} of {e.numel()} elements outside "
            f"atol={tol_a:g}, rtol={tol_r:g}"
        )
    if isinstance(expected, float) or isinstance(actual, float):
        try:
            if math.isclose(
                float(actual),
                float(expected),
                rel_tol=rtol or DEFAULT_TOLERANCE,
                abs_tol=atol or DEFAULT_TOLERANCE,
            ):
                return None
        except (TypeError, ValueError):
            pass
        return f"{actual!r} != baseline {expected!r}"
    if actual != expected:
        return f"{actual!r} != baseline {expected!r}"
    return None


@dataclass
class Baseline:
    """What a correct candidate produces: its return value and the arguments it mutated."""

    output: Any
    mutated: dict[int, Any] = field(default_factory=dict)
    atol: float | None = None
    rtol: float | None = None
    check_fn: Callable[[Any, Any], None] | None = None
    source: str = "default config"
    #: ``(description, value after the run)`` of each tensor the kernel writes that is not an
    #: argument (:class:`CapturedTensors`, in its order); empty with ``autotune_baseline_fn``
    captured: list[tuple[str, Any]] = field(default_factory=list)

    def check(
        self,
        output: Any,
        call_args: Sequence[Any],
        captured: Sequence[Any] | None = None,
    ) -> str | None:
        """The mismatch of a run with the baseline, or None. ``captured``: the values the run
        left in the kernel's captured tensors (:meth:`CapturedTensors.current`)."""
        if self.check_fn is not None:
            try:
                self.check_fn(output, self.output)
            except AssertionError as error:
                return f"accuracy check failed: {str(error).strip().splitlines()[0] if str(error).strip() else 'AssertionError'}"
        else:
            problem = compare_values(output, self.output, atol=self.atol, rtol=self.rtol)
            if problem is not None:
                return problem
        for index, expected in self.mutated.items():
            problem = compare_values(call_args[index], expected, atol=self.atol, rtol=self.rtol)
            if problem is not None:
                return f"in-place argument {index}: {problem}"
        expected_captured = getattr(self, "captured", None) or []
        if captured is not None and len(captured) == len(expected_captured):
            for (description, expected), actual in zip(expected_captured, captured, strict=True):
                problem = compare_values(actual, expected, atol=self.atol, rtol=self.rtol)
                if problem is not None:
                    return f"captured tensor {description}: {problem}"
        return None


def mutated_arguments(original: Sequence[Any], after_call: Sequence[Any]) -> dict[int, Any]:
    """Top-level tensor arguments whose contents a call changed."""
    changed = {}
    for index, (before, after) in enumerate(zip(original, after_call, strict=True)):
        if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor):
            with torch.no_grad():
                same = before.shape == after.shape and torch.equal(before, after.to(before.device))
            if not same:
                changed[index] = after.detach()
    return changed


def _detach_tree(value: Any) -> Any:
    return map_tensors(torch.Tensor.detach, value)
