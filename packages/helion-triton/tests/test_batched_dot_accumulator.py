"""A batched dot (one batch row per program) with a loop-carried accumulator.

Triton 3.6 crashes compiling ``tl.dot(lhs, rhs, reshape(acc_3d))`` when an operand is a
tensor-descriptor load (attention's P @ V on the H200), so for such Triton versions the
accumulator is added after the dot. Both forms are checked here on the interpreter, which
implements tensor descriptors, against torch.bmm."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion_triton import reductions


def batched_matmul_acc(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.shape
    n = hl.specialize(b.size(2))
    out = torch.empty([batch, m, n], dtype=torch.float32, device=a.device)
    for tile_b, tile_m in hl.tile([batch, m]):
        acc = hl.zeros([tile_b, tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.baddbmm(acc, a[tile_b, tile_m, tile_k], b[tile_b, tile_k, :])
        out[tile_b, tile_m, :] = acc
    return out


def _compile(indexing: str) -> tuple[str, torch.Tensor, torch.Tensor]:
    a, b = torch.randn(3, 40, 48), torch.randn(3, 48, 32)  # 16-byte aligned rows for TMA
    kernel = helion.kernel(batched_matmul_acc, backend="triton", dot_precision="ieee")
    bound = kernel.bind((a, b))
    config = helion.Config(block_sizes=[1, 16, 16], indexing=[indexing] * 3)
    got = bound.compile_config(config)(a, b)
    return bound.to_triton_code(config), got, torch.bmm(a, b)


@pytest.mark.usefixtures("descriptors_on_the_interpreter")
@pytest.mark.parametrize("fused_ok", [True, False])
def test_descriptor_operands(monkeypatch: pytest.MonkeyPatch, fused_ok: bool) -> None:
    monkeypatch.setattr(reductions, "reshaped_dot_accumulator_ok", lambda: fused_ok)
    source, got, want = _compile("tensor_descriptor")
    assert "_desc.load([" in source
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    fused = "acc_2d" in source
    assert fused is fused_ok, source


@pytest.mark.usefixtures("descriptors_on_the_interpreter")
def test_pointer_operands_keep_the_fused_accumulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reductions, "reshaped_dot_accumulator_ok", lambda: False)
    source, got, want = _compile("pointer")
    assert "_desc.load([" not in source and "acc_2d" in source
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
