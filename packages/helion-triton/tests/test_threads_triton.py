"""A Triton kernel called from several threads at once: each call gets its own registered
block sizes and its own result (CPU through the interpreter; CUDA too where present)."""

from __future__ import annotations

import sys
import threading

import torch

import helion
import helion.language as hl


@helion.kernel(backend="triton", config=helion.Config(block_sizes=[8, 16]))
def two_registered_blocks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows = hl.register_block_size(x.size(0))
    cols = hl.register_block_size(x.size(1))
    out = torch.empty_like(x)
    sizes = torch.tensor([rows, cols])
    for tile_m, tile_n in hl.tile([x.size(0), x.size(1)], block_size=[rows, cols]):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 2 + 1
    return out, sizes


def test_concurrent_calls_each_get_their_own_block_sizes_and_values(device):
    two_registered_blocks.reset()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(40):
                x = torch.randn(19, 37, device=device)
                out, sizes = two_registered_blocks(x)
                assert sizes.tolist() == [8, 16]
                torch.testing.assert_close(out, x * 2 + 1)
        except BaseException as error:  # reported below
            errors.append(error)

    try:
        pool = [threading.Thread(target=work) for _ in range(4)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[:3]
