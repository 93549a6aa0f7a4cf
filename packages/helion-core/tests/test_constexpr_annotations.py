"""`n: hl.constexpr` marks a compile-time constant whether the kernel's module postpones its
annotations (`from __future__ import annotations`: the annotation is the string "hl.constexpr")
or not (it is the class itself). The kernels live in modules written for each test, since this
module's own future import would turn every annotation into a string."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest
import torch

import helion

_KERNELS = """
from typing import TYPE_CHECKING

import torch

import helion.language as hl

if TYPE_CHECKING:
    import helion.language as hidden_hl  # never imported at run time


def repeat_columns(x: torch.Tensor, n: hl.constexpr) -> torch.Tensor:
    # a shape needs a compile-time int: a runtime scalar `n` fails to trace
    out = torch.empty([x.size(0), n], dtype=x.dtype)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile][:, None] + hl.zeros([tile, n], dtype=x.dtype)
    return out


def scale_by(x: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * scale
    return out


def group_name(x: torch.Tensor, group: hl.ProcessGroupName) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile]
    return out
"""

_UNRESOLVABLE = """
def repeat_columns_hidden(x: torch.Tensor, n: hidden_hl.constexpr) -> torch.Tensor:
    out = torch.empty([x.size(0), n], dtype=x.dtype)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile][:, None] + hl.zeros([tile, n], dtype=x.dtype)
    return out
"""


def _module(tmp_path: Path, postponed: bool, extra: str = ""):
    name = f"constexpr_kernels_{'postponed' if postponed else 'evaluated'}"
    path = tmp_path / f"{name}.py"
    header = "from __future__ import annotations\n" if postponed else ""
    path.write_text(header + textwrap.dedent(_KERNELS) + textwrap.dedent(extra))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kernel(fn) -> helion.Kernel:
    return helion.kernel(fn, backend="ref", autotune_effort="none")


@pytest.mark.parametrize("postponed", [False, True], ids=["evaluated", "postponed"])
def test_constexpr_annotation_specializes(tmp_path, postponed):
    module = _module(tmp_path, postponed)
    annotation = module.repeat_columns.__annotations__["n"]
    assert isinstance(annotation, str) == postponed  # each variant really tests its form
    kernel = _kernel(module.repeat_columns)
    x = torch.randn(13)
    for n in (3, 5):
        torch.testing.assert_close(kernel(x, n), x[:, None].expand(13, n))
    assert kernel.bind((x, 3)) is not kernel.bind((x, 5))  # the value is part of the key


@pytest.mark.parametrize("postponed", [False, True], ids=["evaluated", "postponed"])
def test_other_annotations_are_runtime_values(tmp_path, postponed):
    module = _module(tmp_path, postponed)
    kernel = _kernel(module.scale_by)
    x = torch.randn(19)
    for scale in (0.5, -3.0):
        torch.testing.assert_close(kernel(x, scale), x * scale)
    assert kernel.bind((x, 0.5)) is kernel.bind((x, -3.0))  # one compiled kernel for all scales


@pytest.mark.parametrize("postponed", [False, True], ids=["evaluated", "postponed"])
def test_constexpr_subclass_annotation(tmp_path, postponed):
    module = _module(tmp_path, postponed)
    kernel = _kernel(module.group_name)
    x = torch.randn(11)
    torch.testing.assert_close(kernel(x, "group_a"), x)
    # a string argument keys the kernel either way: look at the classification itself
    assert kernel._constexpr_params == {"group"}


def test_postponed_annotation_naming_a_type_checking_import(tmp_path):
    # the string cannot be evaluated (the name exists only for type checkers): its text decides
    module = _module(tmp_path, postponed=True, extra=_UNRESOLVABLE)
    kernel = _kernel(module.repeat_columns_hidden)
    x = torch.randn(7)
    for n in (2, 6):
        torch.testing.assert_close(kernel(x, n), x[:, None].expand(7, n))
