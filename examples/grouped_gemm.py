"""Grouped GEMM: several matrix multiplies of different row counts `m_g` (all with the same `k`
and `n`) in one launch.

The inputs of the groups are packed row-wise into `a_packed [sum(m_g), k]`; `group_offsets
[groups + 1]` marks where each group starts (`a_packed[offsets[g]:offsets[g + 1]]` is group g)
and `b [groups, k, n]` holds one weight matrix per group. Each program takes one group and a tile
of columns: it loads the group's row range on the device and loops over its row tiles (a
data-dependent inner loop) with the usual `torch.addmm` K loop inside.

- `grouped_gemm`: every group has its own weights.
- `grouped_gemm_shared`: all groups multiply the same `b [k, n]` (a group-aware matmul whose
  programs walk contiguous row ranges, e.g. per-sequence work in a batch of sequences).
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def grouped_gemm(
    a_packed: torch.Tensor, b: torch.Tensor, group_offsets: torch.Tensor
) -> torch.Tensor:
    total_m, k = a_packed.shape
    groups, k2, n = b.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    assert group_offsets.shape == (groups + 1,), "group_offsets needs groups + 1 entries"
    out = torch.empty(
        [total_m, n], dtype=torch.promote_types(a_packed.dtype, b.dtype), device=b.device
    )
    for tile_g, tile_n in hl.tile([groups, n], block_size=[1, None]):
        g = tile_g.begin
        start = group_offsets[g]
        end = group_offsets[g + 1]
        for tile_m in hl.tile(start, end):
            acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
            for tile_k in hl.tile(k):
                acc = torch.addmm(acc, a_packed[tile_m, tile_k], b[g, tile_k, tile_n])
            out[tile_m, tile_n] = acc.to(out.dtype)
    return out


@helion.kernel()
def grouped_gemm_shared(
    a_packed: torch.Tensor, b: torch.Tensor, group_offsets: torch.Tensor
) -> torch.Tensor:
    total_m, k = a_packed.shape
    k2, n = b.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    groups = group_offsets.size(0) - 1
    out = torch.empty(
        [total_m, n], dtype=torch.promote_types(a_packed.dtype, b.dtype), device=b.device
    )
    for tile_g, tile_n in hl.tile([groups, n], block_size=[1, None]):
        start = group_offsets[tile_g.begin]
        end = group_offsets[tile_g.begin + 1]
        for tile_m in hl.tile(start, end):
            acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
            for tile_k in hl.tile(k):
                acc = torch.addmm(acc, a_packed[tile_m, tile_k], b[tile_k, tile_n])
            out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def pack_groups(group_inputs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Host helper: rows of all groups stacked, plus the int32 start offsets (and the end)."""
    sizes = torch.tensor([x.size(0) for x in group_inputs], dtype=torch.int64)
    offsets = torch.zeros(len(group_inputs) + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(sizes, 0)
    return torch.cat(group_inputs), offsets.to(group_inputs[0].device)


def grouped_gemm_reference(
    a_packed: torch.Tensor, b: torch.Tensor, group_offsets: torch.Tensor
) -> torch.Tensor:
    outs = []
    for g in range(group_offsets.numel() - 1):
        rows = a_packed[int(group_offsets[g]) : int(group_offsets[g + 1])]
        weight = b[g] if b.dim() == 3 else b
        outs.append(rows.float() @ weight.float())
    return torch.cat(outs).to(a_packed.dtype)


def _group_inputs(k: int) -> list[torch.Tensor]:
    # an empty group and groups smaller and larger than a tile
    sizes = [13, 0, 41, 5, 27]
    return [torch.randn(s, k, device=DEVICE, dtype=torch.float16) for s in sizes]


def example_args() -> tuple:
    k, n = 45, 23
    groups = _group_inputs(k)
    a_packed, offsets = pack_groups(groups)
    b = torch.randn(len(groups), k, n, device=DEVICE, dtype=torch.float16)
    return a_packed, b, offsets


def shared_args() -> tuple:
    k, n = 45, 23
    a_packed, offsets = pack_groups(_group_inputs(k))
    return a_packed, torch.randn(k, n, device=DEVICE, dtype=torch.float16), offsets


CASES = [
    Case("grouped_gemm", grouped_gemm, grouped_gemm_reference, atol=1e-2, rtol=1e-2),
    Case(
        "grouped_gemm_shared",
        grouped_gemm_shared,
        grouped_gemm_reference,
        atol=1e-2,
        rtol=1e-2,
        args=shared_args,
    ),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
