"""One pass over the row for a looped max followed by a sum of exp(x - max).

With ``reduction_loops`` set, the amax of a row and the sum of ``exp(x - amax)`` share one loop
that keeps a running max and a rescaled running sum (``helion_triton.looped.OnlineSum``). These
tests compare logsumexp, cross entropy and softmax kernels against PyTorch for chunks that divide
the row and chunks that do not, including rows with -inf and +inf entries, a row of -inf only,
and large magnitudes; and they check how many loops the generated code has.
"""

from __future__ import annotations

import kernels as K
import pytest
import torch
import torch.nn.functional as F

import helion
import helion.language as hl

INF = float("inf")


def logsumexp(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tile_n in hl.tile(n):
        out[tile_n] = torch.logsumexp(x[tile_n, :], dim=-1)
    return out


def logsumexp_keepdim(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty([n, 1], dtype=torch.float32, device=x.device)
    for tile_n in hl.tile(n):
        out[tile_n, :] = torch.logsumexp(x[tile_n, :].to(torch.float32), dim=1, keepdim=True)
    return out


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """As examples/cross_entropy.py: logsumexp of the row minus the label's logit."""
    n, v = logits.shape
    losses = torch.empty([n], dtype=torch.float32, device=logits.device)
    flat = logits.view(-1)
    for tile_n in hl.tile(n):
        target = hl.load(flat, [tile_n.index * v + labels[tile_n]])
        rows = logits[tile_n, :].to(torch.float32)
        losses[tile_n] = torch.logsumexp(rows, dim=-1) - target.to(torch.float32)
    return losses


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = torch.log_softmax(x[tile_m, :], dim=1)
    return out


def softmax_mean(x: torch.Tensor, weighted_first: bool) -> torch.Tensor:
    """The mean of x under softmax(x): the sum of exp(x - max) shares its second loop with the
    sum of exp(x - max) * x, which stays there."""
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        row = x[tile_m, :]
        exps = torch.exp(row - torch.amax(row, dim=-1, keepdim=True))
        if weighted_first:
            weighted = (exps * row).sum(-1)
            total = exps.sum(-1)
        else:
            total = exps.sum(-1)
            weighted = (exps * row).sum(-1)
        out[tile_m] = weighted / total
    return out


def shifted_by_other_max(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """sum(exp(x - max(y))): the max is of another value, so no fusion."""
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        peak = torch.amax(y[tile_m, :], dim=-1, keepdim=True)
        out[tile_m] = torch.exp(x[tile_m, :] - peak).sum(-1)
    return out


def shifted_by_mean(x: torch.Tensor) -> torch.Tensor:
    """sum(exp(x - mean(x))): the shift is no max, so no fusion."""
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        row = x[tile_m, :]
        out[tile_m] = torch.exp(row - row.mean(-1, keepdim=True)).sum(-1)
    return out


def bind(fn, *args):
    return helion.kernel(fn, backend="triton", autotune_effort="none").bind(args)


def config(chunk: int | None) -> dict:
    return {"block_sizes": [2], "reduction_loops": [chunk]}


def special_rows(
    n: int, v: int, dtype: torch.dtype, device: torch.device, scale: float = 1.0
) -> torch.Tensor:
    """Random rows, with some -inf entries, a row of -inf only, a row whose first chunks are -inf
    and whose other entries are very negative, and one whose +inf comes after large values."""
    x = torch.randn(n, v) * scale
    x[0, torch.randperm(v)[: v // 3]] = -INF
    x[1] = -INF
    x[2, : v // 2] = -INF
    x[2, v // 2 :] = -1000.0 + torch.randn(v - v // 2)
    x[3, : v // 2] = 80.0 + torch.randn(v // 2)
    x[3, v - 5] = INF
    return x.to(device=device, dtype=dtype)


def loops(source: str) -> int:
    return source.count("for roffset")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize(("v", "chunk"), [(1000, 128), (1000, 256), (768, 256)])
def test_logsumexp(v, chunk, dtype, device):
    x = special_rows(7, v, dtype, device)
    bound = bind(logsumexp, x)
    source = bound.to_code(config(chunk))
    assert loops(source) == 1
    for scale in (1.0, 100.0):
        torch.manual_seed(int(scale))
        x = special_rows(7, v, dtype, device, scale)
        expected = torch.logsumexp(x.float(), -1).to(dtype)
        actual = bound.compile_config(config(chunk))(x)
        assert actual[1].item() == -INF and actual[3].item() == INF
        tolerance = 1e-4 if dtype == torch.float32 else 1e-2
        torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


def test_logsumexp_keepdim_and_a_row_of_one_chunk(device):
    # a row shorter than two chunks, and a keepdim result
    x = special_rows(5, 300, torch.float32, device, 30.0)
    bound = bind(logsumexp_keepdim, x)
    assert loops(bound.to_code(config(256))) == 1
    actual = bound.compile_config(config(256))(x)
    torch.testing.assert_close(actual, torch.logsumexp(x, 1, keepdim=True), atol=1e-4, rtol=1e-4)


def test_looped_logsumexp_has_one_loop():
    x = torch.randn(7, 1000)
    source = bind(logsumexp, x).to_code(config(128))
    assert loops(source) == 1
    assert "tl.exp(tl.minimum(acc_shift - " in source
    # persistent: no loop at all, as before
    assert loops(bind(logsumexp, x).to_code(config(None))) == 0


@pytest.mark.parametrize("kernel", [cross_entropy, K.cross_entropy])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("chunk", [128, 256])
def test_cross_entropy(kernel, dtype, chunk, device):
    n, v = 9, 1000
    logits = (torch.randn(n, v) * 20).to(dtype)
    logits[0, torch.randperm(v)[:100]] = -INF
    labels = torch.randint(0, v, (n,))
    labels[0] = int(torch.nonzero(logits[0] > -INF)[0])
    logits, labels = logits.to(device), labels.to(device)
    bound = bind(kernel, logits, labels)
    assert loops(bound.to_code(config(chunk))) == 1
    actual = bound.compile_config(config(chunk))(logits, labels)
    expected = F.cross_entropy(logits.float(), labels, reduction="none")
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def test_cross_entropy_by_hand_keeps_nan_of_an_infinite_max(device):
    # without the guard, x - max is nan for a row of -inf and for a row with +inf, in one loop
    # as in two
    logits = torch.randn(5, 1000)
    logits[1] = -INF
    logits[3, 7] = INF
    labels = torch.zeros(5, dtype=torch.int64)
    logits, labels = logits.to(device), labels.to(device)
    bound = bind(K.cross_entropy, logits, labels)
    fused = bound.compile_config(config(128))(logits, labels)
    persistent = bound.compile_config(config(None))(logits, labels)
    torch.testing.assert_close(fused, persistent, atol=1e-4, rtol=1e-4, equal_nan=True)
    assert fused[1].isnan() and fused[3].isnan()


@pytest.mark.parametrize("kernel", [K.softmax, log_softmax])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("chunk", [128, 256])
def test_softmax(kernel, dtype, chunk, device):
    torch.manual_seed(chunk)
    x = special_rows(7, 1000, dtype, device, 100.0)
    bound = bind(kernel, x)
    # the max and the sum in one loop; the normalized row is written by a second
    assert loops(bound.to_code(config(chunk))) == 2
    reference = torch.softmax if kernel is K.softmax else torch.log_softmax
    expected = reference(x.float(), 1).to(dtype)
    actual = bound.compile_config(config(chunk))(x)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance, equal_nan=True)


@pytest.mark.parametrize("weighted_first", [False, True])
def test_a_sum_beside_the_fused_one_keeps_its_loop(weighted_first, device):
    x = (torch.randn(7, 1000) * 10).to(device)
    bound = bind(softmax_mean, x, weighted_first)
    source = bound.to_code(config(128))
    assert loops(source) == 2 and "acc_sumexp" in source
    actual = bound.compile_config(config(128))(x, weighted_first)
    expected = (torch.softmax(x, -1) * x).sum(-1)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("kernel", "make", "reference"),
    [
        (
            shifted_by_other_max,
            lambda: (torch.randn(5, 1000), torch.randn(5, 1000)),
            lambda x, y: torch.exp(x - y.amax(-1, keepdim=True)).sum(-1),
        ),
        (
            shifted_by_mean,
            lambda: (torch.randn(5, 1000),),
            lambda x: torch.exp(x - x.mean(-1, keepdim=True)).sum(-1),
        ),
    ],
    ids=["other_max", "mean"],
)
def test_other_shifts_keep_two_loops(kernel, make, reference, device):
    args = tuple(a.to(device) for a in make())
    bound = bind(kernel, *args)
    source = bound.to_code(config(128))
    assert loops(source) == 2 and "acc_sumexp" not in source
    actual = bound.compile_config(config(128))(*args)
    torch.testing.assert_close(actual, reference(*args), atol=1e-4, rtol=1e-4)
