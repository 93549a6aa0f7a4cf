"""Small kernels for the helion-triton tests: each covers a family of ops and tunables."""

from __future__ import annotations

import torch

import helion.language as hl


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def exp(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = torch.exp(x[tile])
    return out


def row_sum(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        out[tile_m] = x[tile_m, :].sum(-1)
    return out


def long_sum(x: torch.Tensor) -> torch.Tensor:
    """A sum over a long row: the candidate for looped reductions."""
    m, _ = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        out[tile_m] = x[tile_m, :].to(torch.float32).sum(-1)
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = torch.softmax(x[tile_m, :], dim=1)
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
        out[tile_b, tile_m, tile_n] = acc.to(a.dtype)
    return out


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        mean = row.sum(-1, keepdim=True) / n
        centered = row - mean
        var = (centered * centered).sum(-1, keepdim=True) / n
        normalized = centered * torch.rsqrt(var + 1e-5)
        out[tile_m, :] = (normalized * weight[:].to(torch.float32) + bias[:].to(torch.float32)).to(
            x.dtype
        )
    return out


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-row negative log likelihood; the target logit is gathered through a flat index."""
    n, v = logits.shape
    losses = torch.empty([n], dtype=torch.float32, device=logits.device)
    flat = logits.view(-1)
    for tile_n in hl.tile(n):
        rows = logits[tile_n, :].to(torch.float32)
        label = labels[tile_n]
        picked = flat[tile_n.index * v + label].to(torch.float32)
        peak = torch.amax(rows, dim=-1)
        total = torch.exp(rows - peak[:, None]).sum(-1)
        losses[tile_n] = torch.log(total) + peak - picked
    return losses


def embedding(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    n = indices.size(0)
    dim = weight.size(1)
    out = torch.empty([n, dim], dtype=weight.dtype, device=weight.device)
    for tile_n, tile_d in hl.tile([n, dim]):
        out[tile_n, tile_d] = weight[indices[tile_n], tile_d]
    return out


def histogram(values: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(values.size(0)):
        hl.atomic_add(counts, [values[tile]], 1)
    return counts


def jagged_row_sum(data: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Sum of each variable-length segment data[offsets[i]:offsets[i+1]] (data-dependent bounds)."""
    segments = offsets.size(0) - 1
    out = torch.zeros([segments], dtype=data.dtype, device=data.device)
    for segment in hl.grid(segments):
        start = offsets[segment]
        end = offsets[segment + 1]
        total = hl.zeros([], dtype=torch.float32)
        for tile in hl.tile(start, end):
            total = total + data[tile].to(torch.float32).sum(0)
        out[segment] = total.to(data.dtype)
    return out


def scale_if_positive(x: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
    """An `if` on a device scalar."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        value = x[tile]
        if flag[0] > 0:
            result = value * 2.0
        else:
            result = value - 1.0
        out[tile] = result
    return out


def pointwise_mix(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        a = x[tile]
        b = y[tile]
        out[tile] = torch.where(
            a > b, torch.sigmoid(a) * torch.tanh(b), torch.maximum(a, b) - torch.sqrt(torch.abs(a))
        )
    return out


def cumsum_rows(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = torch.cumsum(x[tile_m, :], dim=1)
    return out


def argmax_rows(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.int64, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m] = torch.argmax(x[tile_m, :], dim=1)
    return out


def reductions(x: torch.Tensor) -> torch.Tensor:
    """amax, amin, prod, any, all and argmin over a padded row, stacked."""
    m = x.size(0)
    out = torch.empty([m, 6], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        out[tile_m, 0] = torch.amax(row, dim=1)
        out[tile_m, 1] = torch.amin(row, dim=1)
        out[tile_m, 2] = torch.prod(row * 0.5 + 1.0, dim=1)
        out[tile_m, 3] = torch.any(row > 1.5, dim=1).to(torch.float32)
        out[tile_m, 4] = torch.all(row > -1.5, dim=1).to(torch.float32)
        out[tile_m, 5] = torch.argmin(row, dim=1).to(torch.float32)
    return out


def views(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """permute, reshape, new axes, expand and an int subscript of device values."""
    m, n = x.shape  # n == 16
    transposed = torch.empty([n, m], dtype=x.dtype, device=x.device)
    grouped = torch.empty([m, 4], dtype=x.dtype, device=x.device)
    scaled = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        transposed[:, tile_m] = row.permute(1, 0)
        blocks = row.reshape(tile_m.block_size, 4, 4)
        grouped[tile_m, :] = blocks.sum(-1)
        first = blocks[:, 0, 1]
        scaled[tile_m, :] = row * first[:, None] + hl.arange(0, 16).to(torch.float32)[None, :]
    return transposed, grouped, scaled


def reverse_scan(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = hl.cumsum(x[tile_m, :], 1, reverse=True) + hl.cumprod(
            x[tile_m, :] * 0.1 + 1.0, 1
        )
    return out


def integer_ops(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty([6, a.size(0)], dtype=a.dtype, device=a.device)
    for tile in hl.tile(a.size(0)):
        x = a[tile]
        y = b[tile]
        out[0, tile] = torch.floor_divide(x, y)
        out[1, tile] = torch.remainder(x, y)
        out[2, tile] = (x << 2) >> 1
        out[3, tile] = (x & y) | (x ^ 3)
        out[4, tile] = torch.where(x > y, x, y * 2)
        out[5, tile] = torch.clamp(x, -5, 5)
    return out


def math_ops(x: torch.Tensor) -> torch.Tensor:
    """The functions triton.language lacks (libdevice on GPU, helpers in the interpreter)."""
    out = torch.empty([14, x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        small = v * 0.5
        out[0, tile] = torch.tanh(v)
        out[1, tile] = torch.expm1(small)
        out[2, tile] = torch.log1p(torch.abs(v))
        out[3, tile] = torch.log10(torch.abs(v) + 1.0)
        out[4, tile] = torch.tan(small)
        out[5, tile] = torch.sinh(v) + torch.cosh(small)
        out[6, tile] = torch.atan(v * 3.0)
        out[7, tile] = torch.asin(torch.clamp(small, -0.99, 0.99)) + torch.acos(
            torch.clamp(small, -0.99, 0.99)
        )
        out[8, tile] = torch.atan2(v, small + 0.25)
        out[9, tile] = torch.erfinv(torch.clamp(small, -0.9, 0.9))
        out[10, tile] = torch.pow(torch.abs(v) + 0.5, 1.7) + v**2
        out[11, tile] = torch.round(v * 4.0) + torch.trunc(v * 3.0) + torch.floor(v) + torch.ceil(v)
        out[12, tile] = torch.nn.functional.gelu(v) + torch.nn.functional.gelu(
            v, approximate="tanh"
        )
        out[13, tile] = (
            torch.nn.functional.silu(v)
            + torch.erf(v)
            + torch.sign(v)
            + torch.rsqrt(torch.abs(v) + 1.0)
        )
    return out


def fixed_blocks(x: torch.Tensor) -> torch.Tensor:
    """A non-power-of-two fixed block size, tile attributes and a nested hl.grid."""
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m, block_size=3):
        for j in hl.grid(n):
            value = x[tile_m, j]
            bias = (tile_m.begin + tile_m.id * 0 + tile_m.end - tile_m.block_size).to(torch.float32)
            out[tile_m, j] = value + bias + tile_m.index.to(torch.float32)
    return out


def registered_block(x: torch.Tensor) -> torch.Tensor:
    """hl.register_block_size shared by a value made outside the loop that uses it."""
    m, n = x.shape
    block_n = hl.register_block_size(16, 64)
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, block_n], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=block_n):
            acc = acc + x[tile_m, tile_n]
        out[tile_m] = acc.sum(-1)
    return out


def two_phase(x: torch.Tensor) -> torch.Tensor:
    """hl.barrier between two top-level loops: the second reads what the first wrote elsewhere."""
    n = x.size(0)
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    for tile in hl.tile(n):
        tmp[tile] = x[tile] * 2.0
    hl.barrier()
    for tile in hl.tile(n):
        out[tile] = tmp[tile] + tmp[(tile.index + 1) % n]
    return out


def exchange(x: torch.Tensor, target: torch.Tensor, swapped: torch.Tensor) -> torch.Tensor:
    """atomic_xchg and atomic_cas at distinct positions."""
    old = torch.empty_like(target)
    for tile in hl.tile(x.size(0)):
        old[tile] = hl.atomic_xchg(target, [tile], x[tile])
        hl.atomic_cas(swapped, [tile], x[tile] * 0 + 1, x[tile])
    return old, target, swapped


def bit_atomics(
    index: torch.Tensor,
    values: torch.Tensor,
    mx: torch.Tensor,
    mn: torch.Tensor,
    ands: torch.Tensor,
    ors: torch.Tensor,
    xors: torch.Tensor,
) -> torch.Tensor:
    for tile in hl.tile(index.size(0)):
        i = index[tile]
        v = values[tile]
        hl.atomic_max(mx, [i], v)
        hl.atomic_min(mn, [i], v)
        hl.atomic_and(ands, [i], v)
        hl.atomic_or(ors, [i], v)
        hl.atomic_xor(xors, [i], v)
    return mx, mn, ands, ors, xors


def block_sums(x: torch.Tensor) -> torch.Tensor:
    """A two-dim inner tile loop (its own loop order and range options)."""
    batch, m, n = x.shape
    out = torch.empty([batch], dtype=torch.float32, device=x.device)
    for tile_b in hl.tile(batch):
        acc = hl.zeros([tile_b], dtype=torch.float32)
        for tile_m, tile_n in hl.tile([m, n]):
            acc = acc + x[tile_b, tile_m, tile_n].sum(-1).sum(-1)
        out[tile_b] = acc
    return out


def grid_and_tile(x: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Two top-level loops: a two-dim hl.grid of scalars, then tiles; a runtime float argument."""
    m, n = x.shape
    doubled = torch.empty_like(x)
    col_max = torch.empty([n], dtype=x.dtype, device=x.device)
    for i, j in hl.grid([m, n]):
        doubled[i, j] = x[i, j] * scale
    for tile_n in hl.tile(n):
        col_max[tile_n] = torch.amax(x[:, tile_n], dim=0)
    return doubled, col_max


def prefix_scale(x: torch.Tensor, count: int) -> torch.Tensor:
    """A runtime int bounds the launch grid (the host computes it at each call)."""
    out = torch.zeros_like(x)
    for tile in hl.tile(count):
        out[tile] = x[tile] * 3.0
    return out


def constant_width_accumulate(x: torch.Tensor) -> torch.Tensor:
    """hl.zeros of a constant width combined with a full-row slice of the same width."""
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        acc = acc + x[tile_m, :]
        out[tile_m, :] = acc * 2.0
    return out


def debug_print(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0), block_size=8):
        total = x[tile].sum(0)
        hl.device_print("total", total)
        out[tile] = x[tile] - total
    return out
