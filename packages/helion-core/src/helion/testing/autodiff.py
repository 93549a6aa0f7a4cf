"""Forward kernels for `helion.experimental.backward`, each with its torch reference.

Every case is a plain function (made a kernel per backend by :func:`check_autodiff_case`), a
maker of fresh random inputs with sizes that are not powers of two, and the same math in torch.
The check runs the forward kernel once, asks for the backward and compares the gradients with
`torch.autograd` on the reference.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Callable

import torch

import helion
import helion.language as hl


def add_mul(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * y[tile] + z[tile]
    return out


def exp_sigmoid(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = torch.exp(x[tile]) * torch.sigmoid(y[tile])
    return out


def center_scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        out[tile, :] = (row - row.mean(-1, keepdim=True)) * w[None, :]
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        exp = torch.exp(row - torch.amax(row, dim=1, keepdim=True))
        out[tile, :] = exp / torch.sum(exp, dim=1, keepdim=True)
    return out


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :].to(torch.float32)
        scale = torch.rsqrt(torch.mean(row * row, dim=-1, keepdim=True) + eps)
        out[tile, :] = (row * scale * w[None, :].to(torch.float32)).to(out.dtype)
    return out


def relu_where(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        a = x[tile]
        b = y[tile]
        out[tile] = torch.where(a > 0.25, torch.relu(b) * a, b * b - a)
    return out


def cast_roundtrip(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        a = x[tile].to(torch.float32)
        out[tile] = (torch.tanh(a) * y[tile].to(torch.float32)).to(torch.float16)
    return out


def column_bias(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * w[tile[1]] + b[tile[1]] * 2.0
    return out


def math_mix(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        a = x[tile]
        b = y[tile]
        top = torch.sin(a) * torch.cos(b) - torch.log(a * a + 1.0)
        out[tile] = top / torch.sqrt(b * b + 1.0) + (-a) ** 3 - 0.5 * b
    return out


def silu_gelu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = torch.nn.functional.silu(x[tile]) * torch.nn.functional.gelu(y[tile])
    return out


def row_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.sum(x[tile, :] * y[tile, :], dim=-1)
    return out


def min_centered(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        low = torch.amin(row, dim=-1)
        out[tile, :] = (row - low[:, None]) * torch.sum(row, dim=-1)[:, None]
    return out


def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype)


@dataclasses.dataclass
class AutodiffCase:
    name: str
    fn: Callable[..., Any]
    make_inputs: Callable[[], tuple]
    reference: Callable[..., torch.Tensor]
    tolerance: float = 1e-4


CASES = [
    AutodiffCase(
        "add_mul",
        add_mul,
        lambda: (_randn(5, 13), _randn(5, 13), _randn(5, 13)),
        lambda x, y, z: x * y + z,
    ),
    AutodiffCase(
        "exp_sigmoid",
        exp_sigmoid,
        lambda: (_randn(7, 11), _randn(7, 11)),
        lambda x, y: torch.exp(x) * torch.sigmoid(y),
    ),
    AutodiffCase(
        "center_scale",
        center_scale,
        lambda: (_randn(6, 19), _randn(19)),
        lambda x, w: (x - x.mean(-1, keepdim=True)) * w,
    ),
    AutodiffCase("softmax", softmax, lambda: (_randn(9, 23),), lambda x: torch.softmax(x, -1)),
    AutodiffCase(
        "rms_norm",
        rms_norm,
        lambda: (_randn(5, 21), _randn(21), 1e-5),
        lambda x, w, eps: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w,
    ),
    AutodiffCase(
        "relu_where",
        relu_where,
        lambda: (_randn(6, 10), _randn(6, 10)),
        lambda x, y: torch.where(x > 0.25, torch.relu(y) * x, y * y - x),
    ),
    AutodiffCase(
        "cast_roundtrip",
        cast_roundtrip,
        lambda: (_randn(5, 12, dtype=torch.float16), _randn(5, 12, dtype=torch.float16)),
        lambda x, y: (torch.tanh(x.float()) * y.float()).half(),
        tolerance=2e-2,
    ),
    AutodiffCase(
        "column_bias",
        column_bias,
        lambda: (_randn(7, 9), _randn(9), _randn(9)),
        lambda x, w, b: x * w + b * 2.0,
    ),
    AutodiffCase(
        "math_mix",
        math_mix,
        lambda: (_randn(5, 6), _randn(5, 6)),
        lambda a, b: (
            (torch.sin(a) * torch.cos(b) - torch.log(a * a + 1.0)) / torch.sqrt(b * b + 1.0)
            + (-a) ** 3
            - 0.5 * b
        ),
    ),
    AutodiffCase(
        "silu_gelu",
        silu_gelu,
        lambda: (_randn(3, 17), _randn(3, 17)),
        lambda x, y: torch.nn.functional.silu(x) * torch.nn.functional.gelu(y),
    ),
    AutodiffCase(
        "row_sum",
        row_sum,
        lambda: (_randn(11, 7), _randn(11, 7)),
        lambda x, y: (x * y).sum(-1),
    ),
    AutodiffCase(
        "min_centered",
        min_centered,
        lambda: (_randn(6, 15),),
        lambda x: (x - x.amin(-1, keepdim=True)) * x.sum(-1, keepdim=True),
    ),
]


def check_autodiff_case(case: AutodiffCase, backend: str) -> str:
    """Run the case's forward kernel on `backend`, its generated backward, and compare the
    gradients with torch.autograd on the reference; returns the backward's source."""
    from helion.experimental import backward

    kernel = helion.kernel(case.fn, backend=backend, autotune_effort="none")
    inputs = case.make_inputs()
    out = kernel(*inputs)
    expected_out = case.reference(*inputs)
    torch.testing.assert_close(out, expected_out, atol=case.tolerance, rtol=case.tolerance)
    grad_out = torch.randn_like(expected_out)
    grads, code = backward(kernel, grad_out, *inputs, return_code=True)
    leaves = [
        value.detach().clone().requires_grad_() if isinstance(value, torch.Tensor) else value
        for value in inputs
    ]
    case.reference(*leaves).backward(grad_out)
    expected = [leaf.grad for leaf in leaves if isinstance(leaf, torch.Tensor)]
    assert isinstance(grads, tuple) and len(grads) == len(expected), (grads, code)
    for grad, want in zip(grads, expected, strict=True):
        assert grad.dtype == want.dtype and grad.shape == want.shape, code
        torch.testing.assert_close(
            grad, want, atol=case.tolerance, rtol=case.tolerance, msg=lambda m: f"{m}\n{code}"
        )
    return code
