"""Tensors inside container arguments (list, tuple, dict, namedtuple, dataclass, nested) are
kernel arguments that device code reads and writes on every backend that runs here, and the
numbers beside them are runtime scalars: the tracer lifted only a list or tuple made of tensors
alone, and rebuilt it as a plain tuple (`p.weight[t]` on a namedtuple failed, `d["w"][t]` or
`p[0][t]` on a `(tensor, float)` tuple raised HostTensorDirectUsage, a dataclass was an
unsupported argument type; found by exploratory testing)."""

from __future__ import annotations

import collections
import dataclasses
import random
from typing import Any
from typing import Callable

import pytest
import torch

import helion
import helion.language as hl
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]

Affine = collections.namedtuple("Affine", "weight bias scale")


@dataclasses.dataclass
class Layer:
    weight: torch.Tensor
    bias: torch.Tensor | None
    scale: float
    relu: bool


@dataclasses.dataclass(frozen=True)
class Buffers:
    out: torch.Tensor
    total: torch.Tensor


def namedtuple_affine(x: torch.Tensor, p: Affine) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] * p.weight[tile] * p.scale + p.bias[tile]
    return out


def dict_rows(x: torch.Tensor, d: dict[str, Any]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(out.size()):
        out[tm, tn] = x[tm, tn] * d["w"][tm, tn] + d["b"][tn] * d["alpha"] + d["shift"]
    return out


def mixed_tuple(x: torch.Tensor, p: tuple[torch.Tensor, float]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] * p[1] + p[0][tile]
    return out


def nested_lists(x: torch.Tensor, ps: list[list[Any]]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + ps[0][0][tile] + ps[1][0][tile] * ps[1][1]
    return out


def dataclass_layer(x: torch.Tensor, layer: Layer) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        value = x[tile] * layer.weight[tile] * layer.scale
        if layer.bias is not None:
            value = value + layer.bias[tile]
        if layer.relu:
            value = torch.relu(value)
        out[tile] = value
    return out


def deep_stack(x: torch.Tensor, model: dict[str, Any]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        acc = x[tile]
        for layer in model["layers"]:  # unrolled: one step per namedtuple of the list
            acc = acc * layer.weight[tile] * layer.scale + layer.bias[tile]
        out[tile] = acc + model["extra"][0][tile]
    return out


def row_sums(x: torch.Tensor, inputs: dict[str, Any]) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile in hl.tile(m):
        out[tile] = (x[tile, :] * inputs["w"][tile, :]).sum(-1) * inputs["scale"]
    return out


def write_into_fields(x: torch.Tensor, bufs: Buffers) -> None:
    for tile in hl.tile(x.size()):
        bufs.out[tile] = x[tile] * 2.0
        bufs.total[tile] = bufs.total[tile] + x[tile]


def _reference_layer(x: torch.Tensor, layer: Layer) -> torch.Tensor:
    value = x * layer.weight * layer.scale
    if layer.bias is not None:
        value = value + layer.bias
    return torch.relu(value) if layer.relu else value


def _case(name: str) -> tuple[Callable[..., Any], tuple, torch.Tensor]:
    """(kernel function, fresh random arguments of non-power-of-two shapes, expected result)."""
    m, n = random.choice([(5, 23), (13, 7), (3, 37)])
    x = torch.randn(m, n)
    w, b = torch.randn(m, n), torch.randn(m, n)
    scale = random.uniform(0.5, 2.0)
    if name == "namedtuple":
        return namedtuple_affine, (x, Affine(w, b, scale)), x * w * scale + b
    if name == "dict":
        row = torch.randn(n)
        d = {"w": w, "b": row, "alpha": scale, "shift": 3}
        return dict_rows, (x, d), x * w + row * scale + 3
    if name == "mixed_tuple":
        return mixed_tuple, (x, (w, scale)), x * scale + w
    if name == "nested_lists":
        return nested_lists, (x, [[w], [b, scale]]), x + w + b * scale
    if name == "dataclass":
        layer = Layer(w, b, scale, relu=True)
        return dataclass_layer, (x, layer), _reference_layer(x, layer)
    if name == "dataclass_no_bias":
        layer = Layer(w, None, scale, relu=False)
        return dataclass_layer, (x, layer), _reference_layer(x, layer)
    if name == "deep":
        w2, b2, extra = torch.randn(m, n), torch.randn(m, n), torch.randn(m, n)
        model = {"layers": [Affine(w, b, scale), Affine(w2, b2, 0.5)], "extra": (extra,)}
        expected = ((x * w * scale + b) * w2 * 0.5 + b2) + extra
        return deep_stack, (x, model), expected
    assert name == "reduction"
    return row_sums, (x, {"w": w, "scale": scale}), (x * w).sum(-1) * scale


CASES = [
    "namedtuple",
    "dict",
    "mixed_tuple",
    "nested_lists",
    "dataclass",
    "dataclass_no_bias",
    "deep",
    "reduction",
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_container_arguments_match_torch(backend: str, case: str) -> None:
    require_backend(backend)
    random.seed(f"{case}-{backend}")
    torch.manual_seed(len(case))
    fn, args, expected = _case(case)
    kernel = helion.kernel(fn, backend=backend, autotune_effort="none")
    bound = kernel.bind(args)
    rng = random.Random(7)
    configs = [bound.config_spec.default_config()]
    configs += [bound.config_spec.random_config(rng) for _ in range(2)]
    for config in configs:
        got = bound.compile_config(config)(*args)
        torch.testing.assert_close(got, expected, msg=f"{backend} {config}")
    # the plain call too, then fresh tensors and numbers of the same structure: no new binding
    torch.testing.assert_close(kernel(*args), expected)
    _, args, expected = _case(case)
    torch.testing.assert_close(kernel(*args), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_into_tensors_of_a_frozen_dataclass(backend: str) -> None:
    require_backend(backend)
    x = torch.randn(7, 19)
    total = torch.randn(7, 19)
    bufs = Buffers(torch.zeros(7, 19), total.clone())
    kernel = helion.kernel(write_into_fields, backend=backend, autotune_effort="none")
    assert kernel(x, bufs) is None
    torch.testing.assert_close(bufs.out, x * 2)
    torch.testing.assert_close(bufs.total, total + x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numbers_in_a_container_are_runtime_scalars(backend: str) -> None:
    """A new scale in the namedtuple gives a new result from the same compiled code (it was
    baked in: the second call returned the first call's scale, found while fixing this)."""
    require_backend(backend)
    kernel = helion.kernel(namedtuple_affine, backend=backend, autotune_effort="none")
    x, w, b = torch.randn(9, 11), torch.randn(9, 11), torch.randn(9, 11)
    for scale in (2.0, -0.75, 3.5):
        torch.testing.assert_close(kernel(x, Affine(w, b, scale)), x * w * scale + b)
    assert len(kernel._bound) == 1
    (bound,) = kernel._bound.values()
    assert sum(len(variants) for variants in bound._variants.values()) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bool_in_a_dataclass_retraces_when_it_changes(backend: str) -> None:
    require_backend(backend)
    kernel = helion.kernel(dataclass_layer, backend=backend, autotune_effort="none")
    x, w, b = torch.randn(6, 13), torch.randn(6, 13), torch.randn(6, 13)
    for relu in (True, False, True):
        layer = Layer(w, b, 1.5, relu)
        torch.testing.assert_close(kernel(x, layer), _reference_layer(x, layer))
