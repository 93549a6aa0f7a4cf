"""Kernels on the Triton backend against PyTorch and the ref backend.

Every kernel runs with its default config and with 20 random valid configs of its ConfigSpec,
each on fresh random inputs of non-power-of-two shapes; on CPU through the Triton interpreter,
and compiled on CUDA where a GPU is present.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
from typing import Any
from typing import Callable

import kernels as K
import pytest
import torch
import torch.nn.functional as F

import helion

# 20 by default; fewer keeps a GPU run (one Triton compile per config) short
RANDOM_CONFIGS = int(os.environ.get("HELION_TRITON_TEST_RANDOM_CONFIGS", "20"))


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    make: Callable[[torch.device], tuple]
    reference: Callable[..., Any]
    atol: float = 1e-4
    rtol: float = 1e-4

    def __repr__(self) -> str:
        return self.name


def randn(*shape: int, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, device=device).to(dtype)


def _views_reference(x: torch.Tensor):
    ramp = torch.arange(16, dtype=x.dtype, device=x.device)
    return (
        x.T.contiguous(),
        x.reshape(-1, 4, 4).sum(-1),
        x * x.reshape(-1, 4, 4)[:, 0, 1:2] + ramp[None],
    )


def _integer_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.stack(
        [
            torch.floor_divide(a, b),
            torch.remainder(a, b),
            (a << 2) >> 1,
            (a & b) | (a ^ 3),
            torch.where(a > b, a, b * 2),
            a.clamp(-5, 5),
        ]
    )


def _math_reference(x: torch.Tensor) -> torch.Tensor:
    s = x * 0.5
    return torch.stack(
        [
            torch.tanh(x),
            torch.expm1(s),
            torch.log1p(x.abs()),
            torch.log10(x.abs() + 1),
            torch.tan(s),
            torch.sinh(x) + torch.cosh(s),
            torch.atan(x * 3),
            torch.asin(s.clamp(-0.99, 0.99)) + torch.acos(s.clamp(-0.99, 0.99)),
            torch.atan2(x, s + 0.25),
            torch.erfinv(s.clamp(-0.9, 0.9)),
            torch.pow(x.abs() + 0.5, 1.7) + x**2,
            torch.round(x * 4) + torch.trunc(x * 3) + torch.floor(x) + torch.ceil(x),
            F.gelu(x) + F.gelu(x, approximate="tanh"),
            F.silu(x) + torch.erf(x) + torch.sign(x) + torch.rsqrt(x.abs() + 1),
        ]
    )


def _fixed_reference(x: torch.Tensor) -> torch.Tensor:
    rows = torch.arange(x.size(0), device=x.device)
    begin = rows // 3 * 3
    end = torch.clamp(begin + 3, max=x.size(0))
    return x + (begin + end - 3).float()[:, None] + rows.float()[:, None]


def _jagged_make(device: torch.device) -> tuple:
    lengths = torch.randint(0, 30, (5,))
    lengths[1] = 0
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(device)
    return randn(int(offsets[-1]), device=device), offsets


def _jagged_reference(data: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    bounds = offsets.tolist()
    return torch.stack([data[a:b].sum() for a, b in itertools.pairwise(bounds)])


def _signed_divisors(device: torch.device) -> tuple:
    a = torch.randint(-20, 20, (37,), dtype=torch.int32, device=device)
    b = torch.randint(1, 7, (37,), dtype=torch.int32, device=device)
    sign = torch.randint(0, 2, (37,), dtype=torch.int32, device=device) * 2 - 1
    return a, b * sign


def _bit_atomics_make(device: torch.device) -> tuple:
    index = torch.randint(0, 6, (40,), device=device)
    values = torch.randint(0, 64, (40,), dtype=torch.int32, device=device)
    fill = lambda v: torch.full((6,), v, dtype=torch.int32, device=device)  # noqa: E731
    return index, values, fill(0), fill(99), fill(63), fill(0), fill(0)


def _bit_atomics_reference(index, values, mx, mn, ands, ors, xors):
    for i, v in zip(index.tolist(), values.tolist(), strict=False):
        mx[i] = max(int(mx[i]), v)
        mn[i] = min(int(mn[i]), v)
        ands[i] &= v
        ors[i] |= v
        xors[i] ^= v
    return mx, mn, ands, ors, xors


def _exchange_make(device: torch.device) -> tuple:
    def ints() -> torch.Tensor:
        return torch.randint(0, 3, (21,), dtype=torch.int32, device=device)

    return ints(), ints(), ints()


def _exchange_reference(x, target, swapped):
    old = target.clone()
    return old, x.clone(), torch.where(swapped == 1, x, swapped)


CASES = [
    Case("add", K.add, lambda d: (randn(37, 29, device=d), randn(37, 29, device=d)), torch.add),
    Case(
        "exp_fp16",
        K.exp,
        lambda d: (randn(37, 29, device=d, dtype=torch.float16),),
        torch.exp,
        1e-3,
        1e-3,
    ),
    Case(
        "exp_bf16",
        K.exp,
        lambda d: (randn(23, 19, device=d, dtype=torch.bfloat16),),
        torch.exp,
        1e-2,
        1e-2,
    ),
    Case("row_sum", K.row_sum, lambda d: (randn(37, 29, device=d),), lambda x: x.sum(-1)),
    Case("long_sum", K.long_sum, lambda d: (randn(5, 1000, device=d),), lambda x: x.sum(-1), 1e-3),
    Case("softmax", K.softmax, lambda d: (randn(13, 45, device=d),), lambda x: torch.softmax(x, 1)),
    Case(
        "matmul",
        K.matmul,
        lambda d: (randn(37, 29, device=d), randn(29, 19, device=d)),
        torch.mm,
        1e-3,
        1e-3,
    ),
    Case(
        "matmul_fp16",
        K.matmul,
        lambda d: (
            randn(45, 33, device=d, dtype=torch.float16),
            randn(33, 21, device=d, dtype=torch.float16),
        ),
        lambda x, y: (x.float() @ y.float()).half(),
        1e-2,
        1e-2,
    ),
    Case(
        "bmm",
        K.bmm,
        lambda d: (randn(3, 17, 21, device=d), randn(3, 21, 18, device=d)),
        torch.bmm,
        1e-3,
        1e-3,
    ),
    Case(
        "layer_norm",
        K.layer_norm,
        lambda d: (randn(11, 37, device=d), randn(37, device=d), randn(37, device=d)),
        lambda x, w, b: F.layer_norm(x, [x.size(1)], w, b),
    ),
    Case(
        "cross_entropy",
        K.cross_entropy,
        lambda d: (randn(13, 33, device=d), torch.randint(0, 33, (13,), device=d)),
        lambda logits, labels: F.cross_entropy(logits, labels, reduction="none"),
    ),
    Case(
        "embedding",
        K.embedding,
        lambda d: (torch.randint(0, 20, (13,), device=d), randn(20, 17, device=d)),
        F.embedding,
    ),
    Case(
        "histogram",
        K.histogram,
        lambda d: (
            torch.randint(0, 10, (100,), device=d),
            torch.zeros(10, dtype=torch.int64, device=d),
        ),
        lambda values, counts: torch.bincount(values, minlength=10),
    ),
    Case("jagged_sum", K.jagged_row_sum, _jagged_make, _jagged_reference),
    Case(
        "if_scalar",
        K.scale_if_positive,
        lambda d: (randn(37, device=d), torch.sign(randn(1, device=d))),
        lambda x, flag: x * 2.0 if flag[0] > 0 else x - 1.0,
    ),
    Case(
        "pointwise",
        K.pointwise_mix,
        lambda d: (randn(37, 29, device=d), randn(37, 29, device=d)),
        lambda a, b: torch.where(
            a > b, torch.sigmoid(a) * torch.tanh(b), torch.maximum(a, b) - torch.sqrt(a.abs())
        ),
    ),
    Case(
        "cumsum", K.cumsum_rows, lambda d: (randn(7, 19, device=d),), lambda x: torch.cumsum(x, 1)
    ),
    Case(
        "reverse_scan",
        K.reverse_scan,
        lambda d: (randn(7, 19, device=d),),
        lambda x: x.flip(1).cumsum(1).flip(1) + (x * 0.1 + 1).cumprod(1),
    ),
    Case(
        "argmax", K.argmax_rows, lambda d: (randn(7, 19, device=d),), lambda x: torch.argmax(x, 1)
    ),
    Case(
        "reductions",
        K.reductions,
        lambda d: (randn(7, 19, device=d),),
        lambda x: torch.stack(
            [
                x.amax(1),
                x.amin(1),
                (x * 0.5 + 1).prod(1),
                (x > 1.5).any(1).float(),
                (x > -1.5).all(1).float(),
                x.argmin(1).float(),
            ],
            1,
        ),
    ),
    Case("views", K.views, lambda d: (randn(13, 16, device=d),), _views_reference),
    Case("integer_ops", K.integer_ops, _signed_divisors, _integer_reference),
    Case("math_ops", K.math_ops, lambda d: (randn(67, device=d),), _math_reference, 1e-5, 1e-5),
    Case("fixed_blocks", K.fixed_blocks, lambda d: (randn(10, 5, device=d),), _fixed_reference),
    Case(
        "registered_block",
        K.registered_block,
        lambda d: (randn(9, 70, device=d),),
        lambda x: x.sum(-1),
    ),
    Case(
        "barrier", K.two_phase, lambda d: (randn(37, device=d),), lambda x: 2 * x + 2 * x.roll(-1)
    ),
    Case("exchange", K.exchange, _exchange_make, _exchange_reference),
    Case("bit_atomics", K.bit_atomics, _bit_atomics_make, _bit_atomics_reference),
    Case(
        "block_sums", K.block_sums, lambda d: (randn(5, 11, 13, device=d),), lambda x: x.sum((1, 2))
    ),
    Case(
        "grid_and_tile",
        K.grid_and_tile,
        lambda d: (randn(7, 9, device=d), 1.5),
        lambda x, scale: (x * scale, x.amax(0)),
    ),
    Case(
        "prefix_scale",
        K.prefix_scale,
        lambda d: (randn(50, device=d), 37),
        lambda x, count: torch.cat([x[:count] * 3.0, torch.zeros_like(x[count:])]),
    ),
    Case(
        "constant_width",
        K.constant_width_accumulate,
        lambda d: (randn(11, 24, device=d),),
        lambda x: x * 2.0,
    ),
]


def clone(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def check(actual: Any, expected: Any, case: Case, what: str) -> None:
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), what
        for a, e in zip(actual, expected, strict=False):
            check(a, e, case, what)
        return
    assert actual.shape == expected.shape, (
        f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    )
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(
            actual.float(),
            expected.float(),
            atol=case.atol,
            rtol=case.rtol,
            msg=lambda m: f"{what}: {m}",
        )
    else:
        torch.testing.assert_close(actual, expected, atol=0, rtol=0, msg=lambda m: f"{what}: {m}")


def configs_of(bound: Any, count: int) -> list:
    spec = bound.config_spec
    return [spec.default_config()] + [
        spec.random_config(random.Random(seed)) for seed in range(count)
    ]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_default_and_random_configs(case: Case, device: torch.device) -> None:
    # ieee fp32 dots keep the tolerances tight on GPUs too (tf32 is the default)
    triton_kernel = helion.kernel(
        case.fn, backend="triton", autotune_effort="none", dot_precision="ieee"
    )
    ref_kernel = helion.kernel(case.fn, backend="ref", autotune_effort="none")
    torch.manual_seed(0)
    bound = triton_kernel.bind(case.make(device))
    assert bound.backend.name == "triton"
    for index, config in enumerate(configs_of(bound, RANDOM_CONFIGS)):
        torch.manual_seed(1000 + index)
        args = case.make(device)
        expected = case.reference(*clone(args))
        from_ref = ref_kernel(*clone(args))
        actual = bound.compile_config(config)(*clone(args))
        check(actual, expected, case, f"{case.name} vs torch with {config}")
        check(actual, from_ref, case, f"{case.name} vs ref with {config}")


def test_a_negated_view_is_refused_not_read_without_its_sign():
    """`.imag` of a conjugated complex tensor has its neg bit set: its memory holds the values
    with the opposite sign. A Triton kernel reads memory as stored, so it must be refused."""
    add = helion.kernel(K.add, backend="triton", config=helion.Config(block_sizes=[16]))
    z = torch.randn(29, dtype=torch.cfloat)
    y = torch.randn(29, 2)[:, 0]
    torch.testing.assert_close(add(z.imag, y), z.imag + y)
    torch.testing.assert_close(add(z.imag, y), z.imag + y)
    with pytest.raises(helion.exc.NegatedTensorView):
        add(z.conj().imag, y)
    torch.testing.assert_close(add(z.conj().imag.resolve_neg(), y), -z.imag + y)


def test_a_dtype_triton_has_no_type_for_is_named():
    add = helion.kernel(K.add, backend="triton", config=helion.Config(block_sizes=[16]))
    z = torch.randn(29, dtype=torch.cfloat)
    with pytest.raises(
        helion.exc.BackendUnsupported,
        match=r"of dtype torch\.complex64 is not supported by the 'triton'",
    ):
        add(z, z)
