"""Custom combiners (`hl.reduce`, `hl.associative_scan`): argument rules and torch evaluation.

The argument rules (what `combine_fn`, `input_tensor`, `dim` and `other` may be, and how a combiner
is called) are shared by the tracer and eager mode so that both accept exactly the same programs.
The torch evaluation (`tree_reduce`, `inclusive_scan`) is shared by eager mode and the ref
backend: both apply a combiner given as a function of two lists of tensors.

A combiner is called elementwise, on the two operands' values of each input:
`combine_fn(a, b) -> c` for one input; for a tuple of k inputs either the flat form
`combine_fn(a_1, ..., a_k, b_1, ..., b_k) -> (c_1, ..., c_k)` or, when it takes exactly two
parameters, the tuple form `combine_fn((a_1, ..., a_k), (b_1, ..., b_k)) -> (c_1, ..., c_k)`.
In a scan the left operand always covers earlier elements than the right one (later ones for
`reverse=True`).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion import exc

# combine(lhs, rhs) on lists of tensors (one per input) -> list of tensors
ListCombiner = Callable[[list, list], list]


def split_inputs(input_tensor: Any, what: str) -> tuple[list, bool]:
    """The inputs as a list, and whether they came as a tuple (then results are a tuple)."""
    if isinstance(input_tensor, (tuple, list)):
        if not input_tensor:
            raise exc.InvalidAPIUsage(f"{what}: the tuple of inputs is empty")
        return list(input_tensor), True
    return [input_tensor], False


def others_for(other: Any, count: int, what: str) -> list:
    """One padding value per input (`other` may be one number for all, or a tuple)."""
    values = list(other) if isinstance(other, (tuple, list)) else [other] * count
    if len(values) != count:
        raise exc.InvalidAPIUsage(f"{what}: `other` has {len(values)} values for {count} inputs")
    for value in values:
        if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.requires_grad:
            continue
        if not isinstance(value, (bool, int, float)):
            raise exc.InvalidAPIUsage(
                f"{what}: `other` must be a number (or one per input), got {type(value).__name__}"
            )
    return [v.item() if isinstance(v, torch.Tensor) else v for v in values]


def check_dim(dim: Any, ndim: int, what: str) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise exc.InvalidReductionDim(what, dim)
    if ndim == 0 or not -ndim <= dim < ndim:
        raise exc.InvalidReductionDim(what, f"{dim} (of a {ndim}-D value)")
    return dim % ndim


def check_combine_fn(combine_fn: Any, count: int, what: str) -> bool:
    """Validate `combine_fn` for `count` inputs; returns whether it takes the tuple form."""
    if not callable(combine_fn):
        raise exc.InvalidAPIUsage(
            f"{what}: combine_fn must be a function, got {type(combine_fn).__name__}"
        )
    try:
        signature = inspect.signature(combine_fn)
    except (TypeError, ValueError):
        return False  # a builtin such as torch.maximum: the flat form
    params = list(signature.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if count > 1 and len(positional) == 2 and len(required) == 2:
        return True
    if not len(required) <= 2 * count <= len(positional):
        form = "2" if count == 1 else f"{2 * count} (or 2 tuples)"
        raise exc.InvalidAPIUsage(
            f"{what}: combine_fn {getattr(combine_fn, '__name__', combine_fn)!r} takes {len(positional)} "
            f"arguments, but {count} input(s) need {form}"
        )
    return False


def call_combine(
    combine_fn: Callable, lhs: Sequence[Any], rhs: Sequence[Any], tuple_form: bool, what: str
) -> list:
    """Call a combiner on the values of its two operands; returns one result per input."""
    count = len(lhs)
    if tuple_form:
        result = combine_fn(tuple(lhs), tuple(rhs))
    else:
        result = combine_fn(*lhs, *rhs)
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(results) != count:
        raise exc.InvalidAPIUsage(
            f"{what}: combine_fn returned {len(results)} value(s) for {count} input(s)"
        )
    return results


# -- torch evaluation (eager mode and the ref backend) ------------------------------------------


def tree_reduce(combine: ListCombiner, values: list, dim: int, keepdim: bool) -> list:
    """Reduce each tensor of `values` (all of one shape) along `dim` with `combine`.

    Neighbours are combined pairwise in log2(n) rounds, always the earlier one on the left, so an
    associative combiner gets the sequential result even if it is not commutative.
    """
    size = values[0].shape[dim]
    if size == 0:
        raise exc.InvalidReductionDim("hl.reduce", f"{dim} (it is empty)")
    while size > 1:
        half = size // 2
        pairs = [v.narrow(dim, 0, 2 * half).unflatten(dim, (half, 2)) for v in values]
        merged = combine(
            [p.select(dim + 1, 0) for p in pairs], [p.select(dim + 1, 1) for p in pairs]
        )
        if size % 2:
            merged = [
                torch.cat([m, v.narrow(dim, size - 1, 1)], dim)
                for m, v in zip(merged, values, strict=False)
            ]
        values = merged
        size = half + size % 2
    return values if keepdim else [v.squeeze(dim) for v in values]


def inclusive_scan(combine: ListCombiner, values: list, dim: int, reverse: bool) -> list:
    """Inclusive prefix scan of each tensor of `values` along `dim` (Hillis-Steele, log2(n) rounds).

    With `reverse`, element i combines elements i..n-1, the later ones on the left (the scan of
    the flipped sequence, flipped back), as Triton's `reverse=True` does.
    """
    if reverse:
        values = [v.flip(dim) for v in values]
    size = values[0].shape[dim]
    offset = 1
    while offset < size:
        left = [v.narrow(dim, 0, size - offset) for v in values]
        right = [v.narrow(dim, offset, size - offset) for v in values]
        merged = combine(left, right)
        values = [
            torch.cat([v.narrow(dim, 0, offset), m], dim)
            for v, m in zip(values, merged, strict=False)
        ]
        offset *= 2
    if reverse:
        values = [v.flip(dim) for v in values]
    return values


def fit_results(results: Sequence[Any], like: Sequence[torch.Tensor]) -> list:
    """Combiner results as tensors of the operands' shapes and dtypes (a combiner may return a
    Python number or a value of another dtype; the reduction keeps each input's dtype)."""
    fitted = []
    for result, operand in zip(results, like, strict=False):
        tensor = torch.as_tensor(result, device=operand.device)
        if tensor.dtype != operand.dtype:
            tensor = tensor.to(operand.dtype)
        if tensor.shape != operand.shape:
            tensor = tensor.expand(operand.shape)
        fitted.append(tensor)
    return fitted


# -- eager mode: the user's combiner runs on whole tensors ---------------------------------------


def _tensor_combiner(combine_fn: Callable, tuple_form: bool, what: str) -> ListCombiner:
    def combine(lhs: list, rhs: list) -> list:
        return fit_results(call_combine(combine_fn, lhs, rhs, tuple_form, what), lhs)

    return combine


def _eager_inputs(input_tensor: Any, what: str) -> tuple[list, bool]:
    items, is_tuple = split_inputs(input_tensor, what)
    for item in items:
        if not isinstance(item, torch.Tensor):
            raise exc.InvalidAPIUsage(
                f"{what}: inputs must be device tensors, got {type(item).__name__}"
            )
    return list(torch.broadcast_tensors(*items)), is_tuple


def eager_reduce(combine_fn: Any, input_tensor: Any, dim: Any, other: Any, keep_dims: bool) -> Any:
    """`hl.reduce` on torch tensors (eager mode: tiles are exact, so no lane is padded and
    `other` is only checked)."""
    what = "hl.reduce"
    values, is_tuple = _eager_inputs(input_tensor, what)
    combine = _tensor_combiner(combine_fn, check_combine_fn(combine_fn, len(values), what), what)
    others_for(other, len(values), what)
    ndim = values[0].ndim
    if dim is None:
        if ndim == 0:
            raise exc.InvalidReductionDim(what, "None (the input is 0-D)")
        dims = list(reversed(range(ndim)))
    else:
        dims = [check_dim(dim, ndim, what)]
    for axis in dims:
        values = tree_reduce(combine, values, axis, bool(keep_dims))
    return tuple(values) if is_tuple else values[0]


def eager_scan(
    combine_fn: Any, input_tensor: Any, dim: Any, reverse: bool, tuple_form: bool | None = None
) -> Any:
    """`hl.associative_scan` on torch tensors."""
    what = "hl.associative_scan"
    values, is_tuple = _eager_inputs(input_tensor, what)
    if tuple_form is None:
        tuple_form = check_combine_fn(combine_fn, len(values), what)
    axis = check_dim(dim, values[0].ndim, what)
    values = inclusive_scan(
        _tensor_combiner(combine_fn, tuple_form, what), values, axis, bool(reverse)
    )
    return tuple(values) if is_tuple else values[0]


# -- torch._higher_order_ops.associative_scan in device code --------------------------------------


def _torch_associative_scan() -> Any:
    module = sys.modules.get("torch._higher_order_ops.associative_scan")
    return getattr(module, "associative_scan", None)


def torch_associative_scan(
    combine_fn: Callable, xs: Any, dim: int, reverse: bool = False, combine_mode: str = "pointwise"
) -> Any:
    """What `torch._higher_order_ops.associative_scan` means in device code: `hl.associative_scan`
    (a tuple / list `xs` gives the combiner tuples, as torch does; `combine_mode` is ignored)."""
    from helion.language._context import current_mode
    from helion.language._context import dispatch

    mode = current_mode()
    if mode is None or getattr(mode, "depth", 1) == 0:  # host code of an eager kernel
        return _torch_associative_scan()(
            combine_fn, xs, dim, reverse=reverse, combine_mode=combine_mode
        )
    is_sequence = isinstance(xs, (tuple, list))
    return dispatch(
        "associative_scan",
        combine_fn,
        tuple(xs) if is_sequence else xs,
        dim,
        reverse=reverse,
        tuple_form=is_sequence,
    )
