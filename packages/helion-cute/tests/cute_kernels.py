"""Kernels of the core suite (add, exp, softmax, layer_norm, rms_norm, sum, embedding, matmul)
plus a few that exercise inner loops, gathers with masks, atomics and conditionals, each with
example inputs and its PyTorch reference."""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Callable

import torch
import torch.nn.functional as F

import helion
import helion.language as hl


@helion.kernel(backend="cute")
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = torch.broadcast_tensors(x, y)
    out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


@helion.kernel(backend="cute")
def exp(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = torch.exp(x[tile_m, tile_n])
    return out


@helion.kernel(backend="cute")
def softmax(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile in hl.tile(m):
        out[tile, :] = torch.softmax(x[tile, :], dim=1)
    return out


@helion.kernel(backend="cute")
def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        mean = row.mean(dim=-1, keepdim=True)
        centered = row - mean
        variance = (centered * centered).mean(dim=-1, keepdim=True)
        normalized = centered * torch.rsqrt(variance + eps)
        scaled = normalized * weight[:].to(torch.float32) + bias[:].to(torch.float32)
        out[tile_m, :] = scaled.to(out.dtype)
    return out


@helion.kernel(backend="cute")
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        inv_rms = torch.rsqrt((row * row).mean(dim=-1, keepdim=True) + eps)
        out[tile_m, :] = (row * inv_rms * weight[:].to(torch.float32)).to(out.dtype)
    return out


@helion.kernel(backend="cute")
def row_sum(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile in hl.tile(m):
        out[tile] = x[tile, :].sum(-1)
    return out


@helion.kernel(backend="cute")
def embedding(idx: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    idx_flat = idx.reshape(-1)
    _, dim = weight.shape
    out = torch.empty([idx_flat.size(0), dim], dtype=weight.dtype, device=weight.device)
    for tile_b, tile_e in hl.tile([idx_flat.size(0), dim]):
        out[tile_b, tile_e] = weight[idx_flat[tile_b], tile_e]
    return out.view(*idx.shape, dim)


@helion.kernel(backend="cute")
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


@helion.kernel(backend="cute")
def matmul_bias_relu(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = torch.relu(acc + bias[tile_n].to(torch.float32)).to(out.dtype)
    return out


@helion.kernel(backend="cute")
def jagged_dense_bmm(
    seq_offsets: torch.Tensor,
    jagged: torch.Tensor,
    dense: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Public Helion's jagged x dense batched matmul: data-dependent bounds, 3-D masks."""
    L, D = jagged.shape
    B, D, K = dense.shape
    jagged = jagged.view(-1)
    output = torch.empty((L, K), dtype=jagged.dtype, device=jagged.device).view(-1)
    for tile_b in hl.tile(B):
        starts = seq_offsets[tile_b]
        seq_len = seq_offsets[tile_b.index + 1] - starts
        for tile_len in hl.tile(0, seq_len.amax()):
            mask = tile_len.index[None, :] < seq_len[:, None]
            rows = starts[:, None] + tile_len.index[None, :]
            for tile_k in hl.tile(0, K):
                acc = hl.zeros([tile_b, tile_len, tile_k], dtype=torch.float32)
                for tile_d in hl.tile(0, D):
                    a = hl.load(
                        jagged,
                        [rows[:, :, None] * D + tile_d.index[None, None, :]],
                        extra_mask=mask[:, :, None],
                    )
                    acc = acc + torch.matmul(a, dense[tile_b, tile_d, tile_k])
                if bias is not None:
                    acc = acc + bias[tile_b, tile_k].unsqueeze(1)
                hl.store(
                    output,
                    [rows[:, :, None] * K + tile_k.index[None, None, :]],
                    acc,
                    extra_mask=mask[:, :, None],
                )
    return output.reshape(L, K)


@helion.kernel(backend="cute")
def long_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n):
            acc = acc + x[tile_m, tile_n].to(torch.float32).sum(-1)
        out[tile_m] = acc.to(out.dtype)
    return out


@helion.kernel(backend="cute")
def jagged_mean(values: torch.Tensor, offsets: torch.Tensor, max_len: hl.constexpr) -> torch.Tensor:
    n = offsets.size(0) - 1
    out = torch.zeros([n], dtype=values.dtype, device=values.device)
    for tb in hl.tile(n):
        starts = offsets[tb]
        ends = offsets[tb.index + 1]
        lens = ends - starts
        acc = hl.zeros([tb], dtype=torch.float32)
        for tk in hl.tile(0, max_len):
            idx = starts[:, None] + tk.index[None, :]
            mask = tk.index[None, :] < lens[:, None]
            v = hl.load(values, [idx], extra_mask=mask)
            acc = acc + v.sum(-1)
        out[tb] = acc / lens.clamp(min=1).to(torch.float32)
    return out


@helion.kernel(backend="cute")
def histogram(x: torch.Tensor, bins: hl.constexpr) -> torch.Tensor:
    out = torch.zeros([bins], dtype=torch.int32, device=x.device)
    for tile in hl.tile(x.size(0)):
        hl.atomic_add(out, [x[tile]], torch.ones_like(x[tile], dtype=torch.int32))
    return out


@helion.kernel(backend="cute")
def scaled_or_shifted(x: torch.Tensor, flag: int, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        if flag > 0:
            v = v * alpha
        else:
            v = v + alpha
        out[tile] = torch.where(v > 0, v, -v)
    return out


@dataclasses.dataclass
class Case:
    name: str
    kernel: helion.Kernel
    make_args: Callable[[torch.device], tuple]
    reference: Callable[..., Any]
    atol: float = 1e-4
    rtol: float = 1e-4
    configs: tuple[dict, ...] = ()


def _jagged(device: torch.device) -> tuple:
    lens = torch.randint(0, 20, (37,), device=device)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long, device=device), lens.cumsum(0)])
    values = torch.randn(int(offsets[-1]), device=device)
    return values, offsets, int(lens.max())


def _jagged_reference(values: torch.Tensor, offsets: torch.Tensor, max_len: int) -> torch.Tensor:
    out = []
    for i in range(offsets.numel() - 1):
        chunk = values[offsets[i] : offsets[i + 1]]
        out.append(chunk.mean() if chunk.numel() else torch.zeros((), device=values.device))
    return torch.stack(out)


def _scaled_reference(x: torch.Tensor, flag: int, alpha: float) -> torch.Tensor:
    v = x * alpha if flag > 0 else x + alpha
    return torch.where(v > 0, v, -v)


CORE_CASES = [
    Case(
        "add",
        add,
        lambda d: (
            torch.randn(3, 37, 53, device=d),
            torch.randn(37, 53, device=d, dtype=torch.float16),
        ),
        lambda x, y: x + y,
        configs=({"block_sizes": [1, 8, 64]}, {"block_sizes": [2, 4, 16], "num_threads": 32}),
    ),
    Case(
        "exp",
        exp,
        lambda d: (torch.randn(45, 67, device=d),),
        torch.exp,
        configs=({"block_sizes": [16, 64], "num_threads": 256},),
    ),
    Case(
        "softmax",
        softmax,
        lambda d: (torch.randn(93, 187, device=d),),
        lambda x: torch.softmax(x, dim=1),
        atol=1e-5,
        configs=({"block_sizes": [1], "num_threads": 256},),
    ),
    Case(
        "layer_norm",
        layer_norm,
        lambda d: (
            1.5 + 0.75 * torch.randn(57, 203, device=d),
            torch.randn(203, device=d),
            torch.randn(203, device=d),
        ),
        lambda x, w, b: F.layer_norm(x, [x.size(-1)], w, b, 1e-5),
    ),
    Case(
        "rms_norm",
        rms_norm,
        lambda d: (
            torch.randn(61, 256, device=d, dtype=torch.float16),
            torch.randn(256, device=d, dtype=torch.float16),
        ),
        lambda x, w: (
            x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        ).to(x.dtype),
        atol=1e-2,
        rtol=1e-2,
        configs=({"block_sizes": [2], "num_threads": 512, "cute_vector_widths": [8, 8, 8]},),
    ),
    Case(
        "sum", row_sum, lambda d: (torch.randn(77, 301, device=d),), lambda x: x.sum(-1), atol=1e-4
    ),
    Case(
        "embedding",
        embedding,
        lambda d: (torch.randint(0, 97, (7, 13), device=d), torch.randn(97, 48, device=d)),
        lambda i, w: F.embedding(i, w),
        atol=0.0,
        rtol=0.0,
    ),
    Case(
        "matmul",
        matmul,
        lambda d: (
            torch.randn(256, 192, device=d, dtype=torch.bfloat16),
            torch.randn(192, 320, device=d, dtype=torch.bfloat16),
        ),
        lambda x, y: (x.float() @ y.float()).to(x.dtype),
        atol=5e-2,
        rtol=2e-2,
        configs=({"block_sizes": [64, 32, 32], "num_stages": 2},),
    ),
]

EXTRA_CASES = [
    Case(
        "matmul_fp16_odd",
        matmul,
        lambda d: (
            torch.randn(67, 91, device=d, dtype=torch.float16),
            torch.randn(91, 45, device=d, dtype=torch.float16),
        ),
        lambda x, y: (x.float() @ y.float()).to(x.dtype),
        atol=1e-2,
        rtol=1e-2,
    ),
    Case(
        "matmul_fp32",
        matmul,
        lambda d: (torch.randn(70, 50, device=d), torch.randn(50, 33, device=d)),
        lambda x, y: x @ y,
        atol=1e-4,
        rtol=1e-4,
    ),
    Case(
        "matmul_bias_relu",
        matmul_bias_relu,
        lambda d: (
            torch.randn(256, 128, device=d, dtype=torch.bfloat16),
            torch.randn(128, 192, device=d, dtype=torch.bfloat16),
            torch.randn(192, device=d, dtype=torch.bfloat16),
        ),
        lambda x, y, b: torch.relu(x.float() @ y.float() + b.float()).to(x.dtype),
        atol=5e-2,
        rtol=2e-2,
    ),
    Case(
        "long_sum",
        long_sum,
        lambda d: (torch.randn(33, 1000, device=d),),
        lambda x: x.sum(-1),
        atol=1e-3,
        rtol=1e-4,
    ),
    Case("jagged_mean", jagged_mean, _jagged, _jagged_reference, atol=1e-5),
    Case(
        "histogram",
        histogram,
        lambda d: (torch.randint(0, 16, (1000,), device=d), 16),
        lambda x, bins: torch.bincount(x, minlength=bins).to(torch.int32),
        atol=0,
        rtol=0,
    ),
    Case(
        "if_scalar",
        scaled_or_shifted,
        lambda d: (torch.randn(1000, device=d), 1, 2.5),
        _scaled_reference,
    ),
]
