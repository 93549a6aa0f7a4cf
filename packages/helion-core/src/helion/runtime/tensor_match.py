"""One C++ call that tells whether tensors are exactly like a set of example tensors.

The warm call path compares each tensor argument with the tensors it was built for: type,
shape, strides, dtype and device. Read one by one from Python those cost about 400 ns a tensor
(each attribute read builds a Python object); torch's `TensorGuards`, the check torch.compile's
own guards run, does them all in C++ in about 80 ns a tensor. It is stricter than the Python
tests (it also compares ``requires_grad`` and the dispatch keys: conj/neg bits, inference
tensors), so where it says no the caller takes its general path, never a wrong one.

It is a private torch API, so `exact_tensor_match` checks that it behaves as described on the
examples and returns None otherwise; callers then keep their Python tests. It reads every
tensor's strides before it compares anything, and a nested tensor of the strided layout has
none: torch then aborts the process (torch 2.13). Callers test ``is_nested`` first.

Tensors made under `torch.inference_mode` have other dispatch keys than those made outside it,
and the check compares them with the thread's dispatch state when the match was built, so a
match built outside turns them all away; `other_inference_mode_match` builds one for the other
mode.
"""

from __future__ import annotations

from typing import Callable
from typing import Sequence

import torch


def exact_tensor_match(examples: Sequence[torch.Tensor]) -> Callable[..., bool] | None:
    """``match(*tensors)``: True when each tensor has the type, sizes, strides, dtype, device,
    ``requires_grad`` and dispatch keys of the example at its position (the same number of
    tensors). None where this torch has no usable `TensorGuards`."""
    if not examples or any(not isinstance(t, torch.Tensor) for t in examples):
        return None
    try:
        from torch._C._dynamo.guards import TensorGuards

        guard = TensorGuards(
            *examples,
            dynamic_dims_sizes=[list(t.shape) for t in examples],
            dynamic_dims_strides=[list(t.stride()) for t in examples],
        )
        # a zero-size view one dimension deeper: same storage, device and dtype, other shape
        other_shape = [t.as_strided([0] * (t.dim() + 1), [1] * (t.dim() + 1)) for t in examples]
        behaves = guard.check(*examples) is True and guard.check(*other_shape) is False
    except Exception:  # an older or newer torch without this signature: keep the Python tests
        return None
    return guard.check if behaves else None


def other_inference_mode_match(examples: Sequence[torch.Tensor]) -> Callable[..., bool] | None:
    """`exact_tensor_match` of ``examples`` as the host code would make them in the other
    inference mode, for calls made in that mode: each tensor that is not a view becomes one
    made in that mode over the same storage, no copy (a view of an argument keeps its kind in
    either mode, so it stays as it is). Built in that mode, as torch's check compares the keys
    with the thread's dispatch state at the time it was built. None where the examples are not
    all made in one mode, or where torch refuses."""
    inference = {
        t.is_inference() for t in examples if isinstance(t, torch.Tensor) and t._base is None
    }
    if len(inference) != 1:
        return None
    try:
        with torch.inference_mode(not inference.pop()):
            others = [
                t
                if t._base is not None
                else torch.empty(0, dtype=t.dtype, device=t.device).set_(
                    t.untyped_storage(), t.storage_offset(), t.shape, t.stride()
                )
                for t in examples
            ]
            return exact_tensor_match(others)
    except Exception:  # a tensor without a plain storage: no second match
        return None
