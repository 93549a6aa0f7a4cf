"""helion.runtime.default_launcher (a @triton.jit function launched as the Triton backend
launches its own: interpreted on CPU tensors without TRITON_INTERPRET=1, compiled on CUDA) and
helion.runtime.set_triton_allocator."""

from __future__ import annotations

import contextvars

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

import helion
from helion import exc


@triton.jit
def _double(x):
    return x * 2


@triton.jit
def _scaled_add(x, y, out, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    total = tl.load(x + offsets, mask) + tl.load(y + offsets, mask)
    # a @triton.jit helper of this module and a triton.language function
    tl.store(out + offsets, _double(total) * scale + tl.sum(total, 0) * 0, mask)


def test_default_launcher(device):
    n = 1000
    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    out = torch.empty(n, device=device)
    grid = (triton.cdiv(n, 128),)
    helion.runtime.default_launcher(
        _scaled_add, grid, x, y, out, n, 0.5, BLOCK=128, num_warps=4, num_stages=1
    )
    torch.testing.assert_close(out, (x + y) * 2 * 0.5)
    # the module is left as it was: its functions are still JIT functions
    assert isinstance(_double, JITFunction) and isinstance(_scaled_add, JITFunction)


def test_default_launcher_callable_grid(device):
    n = 77
    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    out = torch.zeros(n, device=device)

    def grid(meta):
        return (triton.cdiv(n, meta["BLOCK"]),)

    helion.runtime.default_launcher(
        _scaled_add, grid, x, y, out, n, 1.0, BLOCK=16, num_warps=2, num_stages=2
    )
    torch.testing.assert_close(out, (x + y) * 2)


def test_default_launcher_refuses_other_callables():
    with pytest.raises(exc.InvalidAPIUsage, match=r"@triton\.jit"):
        helion.runtime.default_launcher(
            lambda *args: None, (1,), torch.zeros(4), num_warps=4, num_stages=1
        )


def test_set_triton_allocator():
    from triton.runtime import _allocation

    def check() -> None:
        helion.runtime.set_triton_allocator()
        allocator = _allocation._allocator.get()
        assert not isinstance(allocator, _allocation.NullAllocator)
        if torch.cuda.is_available():
            buffer = allocator(256, 128, None)
            assert buffer.device.type == "cuda" and buffer.numel() == 256

        def mine(size, alignment, stream):
            return torch.empty(size, dtype=torch.int8, device="cuda")

        triton.set_allocator(mine)
        helion.runtime.set_triton_allocator()  # an allocator already set stays
        assert _allocation._allocator.get() is mine

    # in a copy of the context: Triton's allocator is a ContextVar, left as it was here
    contextvars.copy_context().run(check)
