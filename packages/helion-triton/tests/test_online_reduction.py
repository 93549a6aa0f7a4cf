"""One pass over the row for a looped max followed by a sum of exp(x - max).

With ``reduction_loops`` set, the amax of a row and the sum of ``exp(x - amax)`` share one loop
that keeps a running max and a rescaled running sum (``helion_triton.looped.OnlineSum``). These
tests compare logsumexp, cross entropy and softmax kernels against PyTorch for chunks that divide
the row and chunks that do not, including rows with -inf and +inf entries, a row of -inf only,
and large magnitudes; and they check how many loops the generated code has. Each runs with the
online sum per row (``online_sum_lanes=False``) and per lane of the chunk (``True``).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import helion
import helion.language as hl
import kernels as K

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


def config(chunk: int | None, lanes: bool = False) -> dict:
    return {"block_sizes": [2], "reduction_loops": [chunk], "online_sum_lanes": lanes}


LANES = pytest.mark.parametrize("lanes", [False, True], ids=["row_sum", "lane_sums"])


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


@LANES
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize(("v", "chunk"), [(1000, 128), (1000, 256), (768, 256), (1009, 128)])
def test_logsumexp(v, chunk, dtype, lanes, device):
    x = special_rows(7, v, dtype, device)
    bound = bind(logsumexp, x)
    source = bound.to_code(config(chunk, lanes))
    assert loops(source) == 1
    for scale in (1.0, 100.0):
        torch.manual_seed(int(scale))
        x = special_rows(7, v, dtype, device, scale)
        expected = torch.logsumexp(x.float(), -1).to(dtype)
        actual = bound.compile_config(config(chunk, lanes))(x)
        assert actual[1].item() == -INF and actual[3].item() == INF
        tolerance = 1e-4 if dtype == torch.float32 else 1e-2
        torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


@LANES
def test_logsumexp_keepdim_and_a_row_of_one_chunk(lanes, device):
    # a row shorter than two chunks, and a keepdim result
    x = special_rows(5, 300, torch.float32, device, 30.0)
    bound = bind(logsumexp_keepdim, x)
    assert loops(bound.to_code(config(256, lanes))) == 1
    actual = bound.compile_config(config(256, lanes))(x)
    torch.testing.assert_close(actual, torch.logsumexp(x, 1, keepdim=True), atol=1e-4, rtol=1e-4)


def test_looped_logsumexp_has_one_loop():
    x = torch.randn(7, 1000)
    source = bind(logsumexp, x).to_code(config(128))
    assert loops(source) == 1
    assert "tl.exp(tl.minimum(acc_shift - " in source
    # persistent: no loop at all, as before
    assert loops(bind(logsumexp, x).to_code(config(None))) == 0


@LANES
@pytest.mark.parametrize("kernel", [cross_entropy, K.cross_entropy])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("chunk", [128, 256])
def test_cross_entropy(kernel, dtype, chunk, lanes, device):
    n, v = 9, 1000
    logits = (torch.randn(n, v) * 20).to(dtype)
    logits[0, torch.randperm(v)[:100]] = -INF
    labels = torch.randint(0, v, (n,))
    labels[0] = int(torch.nonzero(logits[0] > -INF)[0])
    logits, labels = logits.to(device), labels.to(device)
    bound = bind(kernel, logits, labels)
    assert loops(bound.to_code(config(chunk, lanes))) == 1
    actual = bound.compile_config(config(chunk, lanes))(logits, labels)
    expected = F.cross_entropy(logits.float(), labels, reduction="none")
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


@LANES
def test_cross_entropy_by_hand_keeps_nan_of_an_infinite_max(lanes, device):
    # without the guard, x - max is nan for a row of -inf and for a row with +inf, in one loop
    # as in two
    logits = torch.randn(5, 1000)
    logits[1] = -INF
    logits[3, 7] = INF
    labels = torch.zeros(5, dtype=torch.int64)
    logits, labels = logits.to(device), labels.to(device)
    bound = bind(K.cross_entropy, logits, labels)
    fused = bound.compile_config(config(128, lanes))(logits, labels)
    persistent = bound.compile_config(config(None))(logits, labels)
    torch.testing.assert_close(fused, persistent, atol=1e-4, rtol=1e-4, equal_nan=True)
    assert fused[1].isnan() and fused[3].isnan()


@LANES
@pytest.mark.parametrize("kernel", [K.softmax, log_softmax])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("chunk", [128, 256])
def test_softmax(kernel, dtype, chunk, lanes, device):
    torch.manual_seed(chunk)
    x = special_rows(7, 1000, dtype, device, 100.0)
    bound = bind(kernel, x)
    # the max and the sum in one loop; the normalized row is written by a second
    assert loops(bound.to_code(config(chunk, lanes))) == 2
    reference = torch.softmax if kernel is K.softmax else torch.log_softmax
    expected = reference(x.float(), 1).to(dtype)
    actual = bound.compile_config(config(chunk, lanes))(x)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance, equal_nan=True)


@LANES
@pytest.mark.parametrize("weighted_first", [False, True])
def test_a_sum_beside_the_fused_one_keeps_its_loop(weighted_first, lanes, device):
    x = (torch.randn(7, 1000) * 10).to(device)
    bound = bind(softmax_mean, x, weighted_first)
    source = bound.to_code(config(128, lanes))
    assert loops(source) == 2 and "acc_sumexp" in source
    actual = bound.compile_config(config(128, lanes))(x, weighted_first)
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


# -- online_sum_lanes: the online sum kept per lane of the chunk, reduced once after the loop -------


def logsumexp_over_columns(x: torch.Tensor) -> torch.Tensor:
    """A logsumexp over dim 0: the chunk is the first dim of the loaded tile."""
    out = torch.empty([x.size(1)], dtype=torch.float32, device=x.device)
    for tile_n in hl.tile(x.size(1)):
        cols = x[:, tile_n].to(torch.float32)
        peak = torch.amax(cols, dim=0, keepdim=True)
        out[tile_n] = torch.log(torch.exp(cols - peak).sum(0)) + peak[0, :]
    return out


def softmax_in_place(x: torch.Tensor) -> torch.Tensor:
    """The row is read and written: it cannot loop (``rdim_infeasible``)."""
    for tile_m in hl.tile(x.size(0)):
        x[tile_m, :] = torch.softmax(x[tile_m, :], dim=1)
    return x


def loop_bodies(source: str) -> list[list[str]]:
    """The lines of each ``for roffset`` loop of the kernel."""
    bodies = []
    lines = source.splitlines()
    for start, line in enumerate(lines):
        if "for roffset" not in line:
            continue
        indent = len(line) - len(line.lstrip())
        body = []
        for inner in lines[start + 1 :]:
            if inner.strip() and len(inner) - len(inner.lstrip()) <= indent:
                break
            body.append(inner)
        bodies.append(body)
    return bodies


def sums_in_loops(source: str) -> int:
    return sum(line.count("tl.sum(") for body in loop_bodies(source) for line in body)


@pytest.mark.parametrize(
    ("kernel", "make"),
    [
        (logsumexp, lambda: (torch.randn(11, 1009),)),
        (K.softmax, lambda: (torch.randn(11, 1009),)),
        (cross_entropy, lambda: (torch.randn(11, 1009), torch.randint(0, 1009, (11,)))),
        (K.cross_entropy, lambda: (torch.randn(11, 1009), torch.randint(0, 1009, (11,)))),
        (logsumexp_over_columns, lambda: (torch.randn(1009, 11),)),
    ],
    ids=["logsumexp", "softmax", "cross_entropy", "cross_entropy_by_hand", "over_columns"],
)
def test_lane_sums_drop_the_per_chunk_sum(kernel, make):
    bound = bind(kernel, *make())
    rows = bound.to_code(config(128, False))
    lanes = bound.to_code(config(128, True))
    assert loops(lanes) == loops(rows)
    assert sums_in_loops(lanes) == sums_in_loops(rows) - 1
    assert "acc_sumexp_lanes" in lanes and "acc_sumexp_lanes" not in rows
    # the lanes have the chunk's shape, and the only sum left is the one after the loop
    (init,) = [line for line in lanes.splitlines() if "acc_sumexp_lanes = tl.full(" in line]
    assert "_RDIM_SIZE_1" in init
    assert "tl.sum(acc_sumexp_lanes" in lanes
    # False is the default
    assert rows == bound.to_code({"block_sizes": [2], "reduction_loops": [128]})


def special_columns(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return special_rows(n, 1009, torch.float32, torch.device("cpu"), 30.0).T.contiguous().to(
        device=device, dtype=dtype
    )


@LANES
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_lane_sums_over_columns(dtype, lanes, device):
    torch.manual_seed(3)
    x = special_columns(11, dtype, device)
    bound = bind(logsumexp_over_columns, x)
    assert loops(bound.to_code(config(128, lanes))) == 1
    actual = bound.compile_config(config(128, lanes))(x)
    # unguarded, as written: nan where the max is infinite (the column of -inf, the +inf one)
    cols = x.float()
    peak = cols.amax(0, keepdim=True)
    expected = torch.log(torch.exp(cols - peak).sum(0)) + peak[0]
    assert actual[1].isnan() and actual[3].isnan() and not actual[[0, 2, 4]].isnan().any()
    tolerance = 1e-4 if dtype == torch.float32 else 1e-3
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance, equal_nan=True)
    persistent = bound.compile_config(config(None))(x)
    torch.testing.assert_close(actual, persistent, atol=tolerance, rtol=tolerance, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_lane_sums_agree_with_row_sums(dtype, device):
    # 11 x 1009 with a chunk of 128: a masked tail chunk, a partial tile of rows, and the
    # special rows (-inf entries, a row of -inf only, +inf after large values)
    torch.manual_seed(5)
    x = special_rows(11, 1009, dtype, device, 30.0)
    labels = torch.randint(0, 1009, (11,), device=device)
    labels[0] = int(torch.nonzero(x[0] > -INF)[0])
    labels[2] = 1008
    cases = [
        (logsumexp, (x,), lambda: torch.logsumexp(x.float(), -1).to(dtype)),
        (K.softmax, (x,), lambda: torch.softmax(x.float(), 1).to(dtype)),
        (log_softmax, (x,), lambda: torch.log_softmax(x.float(), 1).to(dtype)),
        (
            cross_entropy,
            (x, labels),
            # as the kernel computes it: +inf in row 3 gives inf (F.cross_entropy: nan)
            lambda: torch.logsumexp(x.float(), -1) - x.float().gather(1, labels[:, None])[:, 0],
        ),
    ]
    tolerance = 1e-4 if dtype == torch.float32 else 1e-2
    for kernel, args, reference in cases:
        bound = bind(kernel, *args)
        rows = bound.compile_config(config(128, False))(*args)
        lanes = bound.compile_config(config(128, True))(*args)
        torch.testing.assert_close(lanes, rows, atol=tolerance, rtol=tolerance, equal_nan=True)
        torch.testing.assert_close(
            lanes, reference(), atol=tolerance, rtol=tolerance, equal_nan=True
        )


def test_online_sum_lanes_is_offered_only_with_an_online_sum():
    x = torch.randn(7, 1000)
    spec = bind(logsumexp, x).config_spec
    assert "online_sum_lanes" in spec
    assert spec.default_config()["online_sum_lanes"] is False
    import random

    rng = random.Random(0)
    seen = {spec.random_config(rng)["online_sum_lanes"] for _ in range(32)}
    assert seen == {False, True}
    neighbors = spec.neighbors(spec.default_config())
    assert any(c["online_sum_lanes"] is True for c in neighbors)
    # no max-shifted sum, or a row that cannot loop: no entry, and naming it is harmless
    for kernel, chunk in ((shifted_by_mean, 128), (softmax_in_place, None)):
        bound = bind(kernel, x.clone())
        assert "online_sum_lanes" not in bound.config_spec
        assert "online_sum_lanes" not in bound.config_spec.normalize(config(chunk, True))
        assert "acc_sumexp" not in bound.to_code(config(chunk, True))
    with pytest.raises(helion.exc.InvalidConfig):
        bind(logsumexp, x).config_spec.normalize({**config(128), "online_sum_lanes": 1})
