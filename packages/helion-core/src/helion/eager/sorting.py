"""Eager-mode meaning of sorting in device code: stable, as in compiled kernels.

`torch.sort`, `torch.argsort` and `torch.topk` on tiles give the results of a stable sort (equal
values keep their order, topk included), so that eager mode, the ref backend and compiled
backends agree on ties too.
"""

from __future__ import annotations

from typing import Any
from typing import Callable

import torch


def sort(
    input: torch.Tensor,
    dim: int = -1,
    descending: bool = False,
    stable: bool = False,
    *,
    out: Any = None,
) -> Any:
    return torch.sort(input, dim=dim, descending=bool(descending), stable=True)


def argsort(
    input: torch.Tensor, dim: int = -1, descending: bool = False, stable: bool = False
) -> torch.Tensor:
    return torch.sort(input, dim=dim, descending=bool(descending), stable=True).indices


def topk(
    input: torch.Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,
    *,
    out: Any = None,
) -> Any:
    k = int(k)
    if not 1 <= k <= input.size(dim):
        return torch.topk(input, k, dim=dim, largest=largest)  # torch's own error
    result = torch.sort(input, dim=dim, descending=bool(largest), stable=True)
    return torch.return_types.topk(
        (result.values.narrow(dim, 0, k), result.indices.narrow(dim, 0, k))
    )


HANDLERS: dict[Any, Callable] = {
    torch.sort: sort,
    torch.Tensor.sort: sort,
    torch.argsort: argsort,
    torch.Tensor.argsort: argsort,
    torch.topk: topk,
    torch.Tensor.topk: topk,
}
