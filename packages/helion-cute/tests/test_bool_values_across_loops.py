"""A bool value used as a mask both inside a loop and after it.

Storing a Boolean fragment into a Boolean register tensor makes the CuTe DSL cache the
fragment's i8 form on its Python object, in the region where the store happens. The generated
code names a value once and reuses it, so when a mask was first copied to registers inside a
device loop (a masked load there) and again after the loop (a masked store), the second copy
reused the i8 value made inside the loop body, and ``cute.compile`` failed with "operand #0 does
not dominate this use" (an InternalError). First seen in a jagged-dense batched matmul.

The kernels are compiled for sm_90a; the one whose threads do not talk to each other also runs
on the host CPU one thread after another (`cute_host`).
"""

from __future__ import annotations

import cute_kernels
import torch
from cute_host import runs_on_host

import helion.language as hl
from helion.testing import bind


def _masked_rows(x: torch.Tensor, lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    B, N = x.shape
    out = torch.zeros_like(x)
    flags = torch.zeros([B], dtype=x.dtype, device=x.device)
    for tile_b in hl.tile(B):
        keep = lens[tile_b] > 0
        for tile_n in hl.tile(N):
            v = hl.load(x, [tile_b, tile_n], extra_mask=keep[:, None])
            hl.store(out, [tile_b, tile_n], v * 2, extra_mask=keep[:, None])
        hl.store(flags, [tile_b], lens[tile_b].to(x.dtype), extra_mask=keep)
    return out, flags


def test_mask_used_inside_and_after_a_loop_runs(on_host: None) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(13, 40, generator=g)
    lens = torch.tensor([0, 1, 2, 0, 3, 0, 1, 1, 0, 5, 0, 0, 4])
    bound = bind(_masked_rows, "cute", (x, lens))
    compiled = bound.compile_config(bound.config_spec.default_config())
    assert runs_on_host(compiled.source), compiled.source
    out, flags = compiled(x, lens)
    keep = lens > 0
    torch.testing.assert_close(out, torch.where(keep[:, None], x * 2, torch.zeros_like(x)))
    torch.testing.assert_close(flags, torch.where(keep, lens.to(x.dtype), torch.zeros(13)))


def test_jagged_dense_bmm_compiles() -> None:
    # compiled only: the batched matmul goes through shared memory and barriers
    lengths = torch.tensor([3, 0, 7, 1, 5])
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    L = int(offsets[-1])
    args = (offsets, torch.randn(L, 34), torch.randn(5, 34, 24), torch.randn(5, 24))
    bound = bind(cute_kernels.jagged_dense_bmm.fn, "cute", args)
    source = bound.compile_config(bound.config_spec.default_config()).source
    assert "cutlass.Boolean)" not in source  # masks sit in registers as 0/1 bytes
