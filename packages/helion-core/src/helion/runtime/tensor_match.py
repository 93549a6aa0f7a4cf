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
"""

from __future__ import annotations

from typing import Callable, Sequence

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
