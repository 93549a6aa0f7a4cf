"""`and` / `or` / `not` in an `if` test over 0-D device values (scalar arguments compared, values
read on the device), as public Helion compiles them: combined on the device."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.testing import require_backend


def scaled(x: torch.Tensor, r: torch.Tensor | None, beta: float, flag: bool) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        v = x[t]
        if beta != 0.0 and r is not None:  # public grpo_loss's line
            v = v + beta * r[t]
        if not beta > 1.0 or flag:
            v = v * 2
        if beta < 0.0 or (x[t].sum() > 1e6 and not flag):
            v = v - 1
        out[t] = v
    return out


def expected(x: torch.Tensor, r: torch.Tensor | None, beta: float, flag: bool) -> torch.Tensor:
    v = x.clone()
    if beta != 0.0 and r is not None:
        v = v + beta * r
    if not beta > 1.0 or flag:
        v = v * 2
    if beta < 0.0:
        v = v - 1
    return v


CASES = [(0.5, False, True), (0.0, True, True), (2.0, False, False), (-1.0, True, True)]


@pytest.mark.parametrize("backend", ["ref", "eager", "triton", "pallas"])
def test_and_or_not_of_device_scalars(backend: str) -> None:
    if backend == "eager":
        kernel = helion.kernel(scaled, ref_mode=helion.RefMode.EAGER)
    else:
        require_backend(backend)  # the isolated core run has only ref
        kernel = helion.kernel(scaled, backend=backend, autotune_effort="none")
    x, r = torch.randn(37), torch.randn(37)
    for beta, flag, with_r in CASES:
        other = r if with_r else None
        torch.testing.assert_close(kernel(x, other, beta, flag), expected(x, other, beta, flag))


def python_only(x: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        if n > 0 and x.size(0) > 3:  # sizes and constants: Python's short-circuit, no branch
            out[t] = x[t] + 1
    return out


def test_python_operands_keep_pythons_rules() -> None:
    kernel = helion.kernel(python_only, backend="ref", autotune_effort="none")
    x = torch.randn(9)
    torch.testing.assert_close(kernel(x, 2), x + 1)
    torch.testing.assert_close(kernel(x, -2), torch.zeros_like(x))


def lanes(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        if x[t] > 0 and x[t] < 1:
            out[t] = x[t]
    return out


def test_and_of_tiles_is_refused_with_a_pointer_to_logical_and() -> None:
    kernel = helion.kernel(lanes, backend="ref", autotune_effort="none")
    with pytest.raises(exc.TypeInferenceError, match="logical_and"):
        kernel(torch.randn(9))


def noop_mask(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    # torch.nn.attention.flex_attention.noop_mask: the size by keyword, 0-D
    return b.new_ones(size=(), dtype=torch.bool, device=b.device)


def masked(x: torch.Tensor, mask_mod: object) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        m = mask_mod(tm.index[:, None], tm.index[:, None], tm.index[:, None], tn.index[None, :])
        keep = torch.zeros(size=(tm, tn), dtype=torch.bool) | m
        out[tm, tn] = torch.where(keep, x[tm, tn], float("-inf"))
    return out


@pytest.mark.parametrize("backend", ["ref", "eager"])
def test_creation_takes_the_size_by_keyword(backend: str) -> None:
    """flex attention's default mask_mod made `new_ones(size=())`, refused as an unsupported
    argument with the hint to leave it out."""
    settings = {"ref_mode": helion.RefMode.EAGER} if backend == "eager" else {"backend": "ref"}
    kernel = helion.kernel(masked, autotune_effort="none", **settings)
    x = torch.randn(20, 13)
    torch.testing.assert_close(kernel(x, noop_mask), x)
