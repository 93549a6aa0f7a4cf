"""TensorOperationInWrapper: host lines that compute on tensors are warned of, once, by line."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.runtime.host_ops import computes


def _host_warnings(kernel: helion.Kernel, *args: object) -> list[exc.TensorOperationsInHostCall]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel(*args)
    return [w.message for w in caught if isinstance(w.message, exc.TensorOperationInWrapper)]


def _line_of(fn: object, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def mean_loss(logits: torch.Tensor) -> torch.Tensor:
    n = logits.size(0)
    losses = torch.empty([n], dtype=torch.float32, device=logits.device)
    for tile in hl.tile(n):
        losses[tile] = torch.logsumexp(logits[tile, :].float(), dim=-1)
    return losses.mean()


def only_setup(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    xb, yb = torch.broadcast_tensors(x, y)  # views
    flat = xb.reshape(-1).view(xb.shape)  # views of a contiguous tensor
    out = torch.empty_like(flat)
    extra = out.new_zeros([2])
    extra.fill_(0)  # setting up a fresh tensor, as torch.full would
    assert x.size(0) == x.shape[0] and x.dim() == 2 and x.is_contiguous()
    for tile in hl.tile(out.size()):
        out[tile] = torch.sigmoid(flat[tile]) * yb[tile] + extra[0]  # device code
    return out


def _helper(t: torch.Tensor) -> torch.Tensor:
    return t * 2


def several(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    xf = x.to(torch.float32)
    x[0] = 0
    doubled = _helper(x)  # a helper's own ops are its business
    gathered = x[index]
    out = torch.empty_like(xf)
    for tile in hl.tile(out.size()):
        out[tile] = xf[tile] + doubled[tile]
    out.add_(gathered.sum())
    return out


@pytest.fixture
def quiet_config() -> dict[str, object]:
    return {"backend": "ref", "autotune_effort": "none", "autotune_log_level": 0}


def test_a_host_reduction_is_warned_of_with_its_line_and_op(quiet_config) -> None:
    kernel = helion.kernel(mean_loss, **quiet_config)
    found = _host_warnings(kernel, torch.randn(7, 11))
    assert len(found) == 1
    assert isinstance(found[0], exc.TensorOperationInWrapper)
    assert "Tensor.mean" in str(found[0])
    assert found[0].loc.lineno == _line_of(mean_loss, "losses.mean()")


def test_allocations_views_metadata_and_device_code_are_not_warned_of(quiet_config) -> None:
    kernel = helion.kernel(only_setup, **quiet_config)
    x = torch.randn(5, 13)
    assert _host_warnings(kernel, x, torch.randn(13)) == []


def test_each_computing_line_is_named_and_a_helper_is_not(quiet_config) -> None:
    kernel = helion.kernel(several, **quiet_config)
    x = torch.randn(6, 9, dtype=torch.bfloat16)
    found = {w.loc.lineno: str(w) for w in _host_warnings(kernel, x, torch.tensor([1, 4]))}
    expected = {
        "x.to(torch.float32)": "Tensor.to",
        "x[0] = 0": "Tensor.__setitem__",
        "x[index]": "Tensor.__getitem__",
        "out.add_(": "Tensor.add_",
    }
    assert sorted(found) == sorted(_line_of(several, text) for text in expected)
    for text, op in expected.items():
        assert op in found[_line_of(several, text)]
    assert "gathered.sum" not in str(found)  # one op per line is enough: add_ names the line
    assert _line_of(several, "_helper(x)") not in found


def test_only_the_first_call_is_watched(quiet_config) -> None:
    kernel = helion.kernel(mean_loss, **quiet_config)
    x = torch.randn(7, 11)
    assert len(_host_warnings(kernel, x)) == 1
    assert _host_warnings(kernel, x) == []


@pytest.mark.parametrize("how", ["setting", "environment"])
def test_ignore_warnings_silences_it(quiet_config, monkeypatch, how: str) -> None:
    if how == "setting":
        kernel = helion.kernel(
            mean_loss, ignore_warnings=[exc.TensorOperationInWrapper], **quiet_config
        )
    else:
        monkeypatch.setenv("HELION_IGNORE_WARNINGS", "TensorOperationInWrapper")
        kernel = helion.kernel(mean_loss, **quiet_config)
    assert _host_warnings(kernel, torch.randn(7, 11)) == []


def test_computes_tells_compute_from_setup() -> None:
    x = torch.randn(4, 5)
    assert not computes("view", (x, -1), {}, x.view(-1))
    assert not computes("zeros_like", (x,), {}, torch.zeros_like(x))
    assert not computes("zero_", (x,), {}, x)
    assert not computes("size", (x,), {}, x.size())
    assert computes("add_", (x, 1), {}, x)
    assert computes("mul", (x, 2), {}, x * 2)
    assert computes("__setitem__", (x, 0, 1.0), {}, None)
    assert computes("contiguous", (x.t(),), {}, x.t().contiguous())
    assert not computes("contiguous", (x,), {}, x.contiguous())  # already contiguous: itself
