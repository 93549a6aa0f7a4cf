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

    def check(self, output: Any, call_args: Sequence[Any]) -> str | None:
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
