"""Lowerings of StackTensor loads and stores (``hl.stacktensor_like``).

The offsets of the index are computed like those of a pointer-indexed load (with the layout of
``tensor_like``), and added to each buffer's base: the uint64 pointers, cast to pointers of the
element type and broadcast over the index dims. Lanes of padded pointer dims are masked, so a
missing buffer is never dereferenced.
"""

from __future__ import annotations

from typing import Any

from helion.ir.core import Node
from helion.language import _ops as ops
from helion_triton.lowerings import triton_lowering
from helion_triton.memory import pointer_access


def _access(ctx: Any, node: Node, shape: tuple) -> tuple[str, str | None]:
    ptrs = node.inputs[node.attrs["ptrs"]]
    lead = len(ptrs.shape)
    _, mask, offset = pointer_access(ctx, node, lead=lead)
    dtype = ctx.tl(node.attrs["tensor"].dtype)
    base = f"{ctx.expr(ptrs)}.to(tl.pointer_type({dtype}))"
    if len(shape) > lead:
        base = f"{base}[{', '.join([':'] * lead + ['None'] * (len(shape) - lead))}]"
    base = ctx.assign(base, "stack_base")
    masks = [m for m in (ctx.mask_for(shape, range(lead), ctx.origins(ptrs)), mask) if m]
    return f"{base} + ({offset})", (" & ".join(masks) if masks else None)


@triton_lowering(ops.stack_load)
def _stack_load(ctx: Any, node: Node) -> str:
    pointer, mask = _access(ctx, node, tuple(node.output.shape))
    policy = node.attrs.get("eviction_policy")
    eviction = f', eviction_policy="{policy}"' if policy in ("evict_first", "evict_last") else ""
    if mask is None:
        return f"tl.load({pointer}{eviction})"
    return f"tl.load({pointer}, {mask}, other=0{eviction})"


@triton_lowering(ops.stack_store)
def _stack_store(ctx: Any, node: Node) -> str:
    value = node.inputs[node.attrs["value"]]
    pointer, mask = _access(ctx, node, tuple(value.shape))
    if mask is None:
        return f"tl.store({pointer}, {ctx.expr(value)})"
    return f"tl.store({pointer}, {ctx.expr(value)}, {mask})"
