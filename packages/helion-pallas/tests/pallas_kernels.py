"""The kernel suite the Pallas backend is tested on: plain functions, each with a PyTorch
reference and inputs with sizes that do not divide the block sizes.

The functions are undecorated so that each test wraps them for the backend it checks
(`helion.kernel(fn, backend="pallas")`, and `backend="ref"` for the oracle).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any
from typing import Callable

import torch
import torch.nn.functional as F

import helion.language as hl


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile in hl.tile(m):
        out[tile, :] = torch.softmax(x[tile, :], dim=1)
    return out


def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(x.dtype)
    return out


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.shape
    _, _, n = b.shape
    out = torch.empty([batch, m, n], dtype=a.dtype, device=a.device)
    for tile_b, tile_m, tile_n in hl.tile([batch, m, n]):
        acc = hl.zeros([tile_b, tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.baddbmm(acc, a[tile_b, tile_m, tile_k], b[tile_b, tile_k, tile_n])
        out[tile_b, tile_m, tile_n] = acc.to(out.dtype)
    return out


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
        out[tile_m, :] = (normalized * weight[:].to(torch.float32) + bias[:].to(torch.float32)).to(
            out.dtype
        )
    return out


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        inv_rms = torch.rsqrt((row * row).mean(dim=-1, keepdim=True) + eps)
        out[tile_m, :] = (row * inv_rms * weight[:].to(torch.float32)).to(out.dtype)
    return out


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    n, v = logits.shape
    losses = torch.empty([n], dtype=torch.float32, device=logits.device)
    logits_flat = logits.view(-1)
    for tile_n in hl.tile(n):
        labels_tile = labels[tile_n]
        target_logit = hl.load(logits_flat, [tile_n.index * v + labels_tile])
        rows = logits[tile_n, :].to(torch.float32)
        losses[tile_n] = torch.logsumexp(rows, dim=-1) - target_logit.to(torch.float32)
    return losses.mean()


def embedding(idx: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    idx_flat = idx.reshape(-1)
    _, dim = weight.shape
    out = torch.empty([idx_flat.size(0), dim], dtype=weight.dtype, device=weight.device)
    for tile_b, tile_e in hl.tile([idx_flat.size(0), dim]):
        out[tile_b, tile_e] = weight[idx_flat[tile_b], tile_e]
    return out.view(*idx.shape, dim)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    batch_heads, m, head_dim = q.shape
    n = k.size(1)
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(head_dim)
    for tile_b, tile_m in hl.tile([batch_heads, m]):
        row_max = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        row_sum = hl.zeros([tile_b, tile_m], dtype=torch.float32)
        acc = hl.zeros([tile_b, tile_m, head_dim], dtype=torch.float32)
        q_tile = q[tile_b, tile_m, :]
        for tile_n in hl.tile(n):
            scores = torch.bmm(q_tile, k[tile_b, tile_n, :].transpose(1, 2)) * scale
            new_max = torch.maximum(row_max, scores.amax(dim=-1))
            probs = torch.exp(scores - new_max[:, :, None])
            rescale = torch.exp(row_max - new_max)
            row_sum = row_sum * rescale + probs.sum(dim=-1)
            acc = torch.baddbmm(acc * rescale[:, :, None], probs, v[tile_b, tile_n, :])
            row_max = new_max
        out[tile_b, tile_m, :] = (acc / row_sum[:, :, None]).to(out.dtype)
    return out


def row_sum(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile in hl.tile(m):
        out[tile] = x[tile, :].sum(-1)
    return out


def long_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    chunk = hl.register_block_size(n)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=chunk):
            acc += x[tile_m, tile_n].to(torch.float32).sum(-1)
        out[tile_m] = acc.to(x.dtype)
    return out


def jagged_mean(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    num_segments = x_offsets.size(0) - 1
    features = x_data.size(1)
    out = torch.empty([num_segments, features], dtype=x_data.dtype, device=x_data.device)
    for tile_b in hl.tile(num_segments):
        starts = x_offsets[tile_b]
        ends = x_offsets[tile_b.index + 1]
        lengths = ends - starts
        for tile_f in hl.tile(features):
            acc = hl.zeros([tile_b, tile_f], dtype=torch.float32)
            for tile_r in hl.tile(0, lengths.amax()):
                rows = starts[:, None] + tile_r.index[None, :]
                inside = tile_r.index[None, :] < lengths[:, None]
                values = hl.load(x_data, [rows, tile_f], extra_mask=inside[:, :, None])
                acc = acc + values.to(torch.float32).sum(dim=1)
            counts = torch.clamp(lengths, min=1).to(torch.float32)
            out[tile_b, tile_f] = (acc / counts[:, None]).to(out.dtype)
    return out


def histogram(x: torch.Tensor, num_bins: int) -> torch.Tensor:
    counts = torch.zeros([num_bins], dtype=torch.int32, device=x.device)
    for tile in hl.tile(x.size(0)):
        bins = (x[tile] * num_bins).to(torch.int64).clamp(0, num_bins - 1)
        hl.atomic_add(counts, [bins], 1)
    return counts


# -- references -----------------------------------------------------------------------------------


def _attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
    return torch.softmax(scores, dim=-1) @ v


def _rms_norm_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(x.dtype)


def _jagged_mean_reference(x_data: torch.Tensor, x_offsets: torch.Tensor) -> torch.Tensor:
    rows = []
    for b in range(x_offsets.numel() - 1):
        segment = x_data[int(x_offsets[b]) : int(x_offsets[b + 1])]
        if segment.size(0) == 0:
            rows.append(torch.zeros(x_data.size(1), dtype=x_data.dtype))
        else:
            rows.append(segment.float().mean(0).to(x_data.dtype))
    return torch.stack(rows)


def _jagged_args() -> tuple:
    generator = torch.Generator().manual_seed(3)
    lengths = torch.randint(0, 38, (23,), generator=generator)
    offsets = torch.zeros(24, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    return torch.randn(int(offsets[-1]), 19, generator=generator), offsets


def _histogram_reference(x: torch.Tensor, num_bins: int) -> torch.Tensor:
    bins = (x * num_bins).to(torch.int64).clamp(0, num_bins - 1)
    return torch.bincount(bins, minlength=num_bins).to(torch.int32)


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable[..., Any]
    args: Callable[[], tuple]
    reference: Callable[..., Any]
    atol: float = 1e-4
    rtol: float = 1e-4


def _randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


CASES = [
    Case("add", add, lambda: (_randn(100, 37), _randn(100, 37, seed=1)), lambda x, y: x + y),
    Case(
        "softmax", softmax, lambda: (_randn(45, 187),), lambda x: torch.softmax(x, dim=1), atol=1e-5
    ),
    Case("matmul", matmul, lambda: (_randn(70, 50), _randn(50, 33, seed=1)), lambda x, y: x @ y),
    Case("bmm", bmm, lambda: (_randn(3, 37, 29), _randn(3, 29, 23, seed=1)), torch.bmm),
    Case(
        "layer_norm",
        layer_norm,
        lambda: (1.5 + 0.75 * _randn(57, 203), _randn(203, seed=1), _randn(203, seed=2)),
        lambda x, w, b: F.layer_norm(x, [x.size(-1)], w, b, 1e-5),
    ),
    Case(
        "rms_norm",
        rms_norm,
        lambda: (_randn(61, 229, dtype=torch.float16), _randn(229, dtype=torch.float16, seed=1)),
        _rms_norm_reference,
        atol=1e-2,
        rtol=1e-2,
    ),
    Case(
        "cross_entropy",
        cross_entropy,
        lambda: (
            _randn(83, 1009),
            torch.randint(0, 1009, (83,), generator=torch.Generator().manual_seed(1)),
        ),
        lambda logits, labels: F.cross_entropy(logits, labels),
    ),
    Case(
        "embedding",
        embedding,
        lambda: (
            torch.randint(0, 97, (7, 13), generator=torch.Generator().manual_seed(1)),
            _randn(97, 45),
        ),
        F.embedding,
        atol=0,
        rtol=0,
    ),
    Case(
        "attention",
        attention,
        lambda: (_randn(6, 77, 32), _randn(6, 77, 32, seed=1), _randn(6, 77, 32, seed=2)),
        _attention_reference,
    ),
    Case("sum", row_sum, lambda: (_randn(77, 301),), lambda x: x.sum(-1)),
    Case("long_sum", long_sum, lambda: (_randn(5, 4099),), lambda x: x.sum(-1), atol=1e-3),
    Case("jagged_mean", jagged_mean, _jagged_args, _jagged_mean_reference, atol=1e-5),
    Case(
        "histogram",
        histogram,
        lambda: (torch.rand(3001, generator=torch.Generator().manual_seed(0)), 37),
        _histogram_reference,
        atol=0,
        rtol=0,
    ),
]
CASES_BY_NAME = {case.name: case for case in CASES}
