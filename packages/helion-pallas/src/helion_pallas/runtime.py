"""Helpers the generated kernels call (imported there as `hp`).

Kept small: everything a reader needs to follow a kernel is in its generated source, except
the interpret-mode atomics below, which are a page of JAX of their own.
"""

from __future__ import annotations

from typing import Any
from typing import Sequence

import jax
import jax.numpy as jnp

_SCATTER_KINDS = {"add": "add", "max": "max", "min": "min"}


def interpret_atomic(
    ref: Any,
    kind: str,
    indices: Sequence[jax.Array],
    value: jax.Array,
    *,
    mask: jax.Array | None,
    expected: jax.Array | None = None,
) -> jax.Array:
    """An atomic read-modify-write of `ref[indices]` for interpret mode; returns the old values.

    Interpret mode runs the programs of a grid one after another, so a read-modify-write of the
    whole array is atomic. `plgpu.atomic_*` cannot be used there: its interpret rule writes
    duplicate indices with a scatter-*set*, losing all but one update (a histogram's counts).
    add/max/min are one scatter; the other kinds are applied lane by lane, in order, so that
    repeated indices see each other's writes (the ref backend's semantics).

    Args:
        ref: The whole-array ref of the target tensor.
        kind: One of add, max, min, and, or, xor, xchg, cas.
        indices: One integer array per dimension of `ref`, all of `value`'s shape.
        value: The operand, already in the ref's dtype.
        mask: Lanes to apply (None: all).
        expected: The compare value of `cas`.
    """
    current = ref[...]
    if mask is None:
        mask = jnp.ones(value.shape, dtype=jnp.bool_)
    if kind in _SCATTER_KINDS:
        old = current[tuple(indices)]
        # masked-off lanes point past the end and the scatter drops them
        safe = tuple(
            jnp.where(mask, index, size) for index, size in zip(indices, current.shape, strict=True)
        )
        updated = getattr(current.at[safe], _SCATTER_KINDS[kind])(value, mode="drop")
        ref[...] = updated
        return jnp.where(mask, old, jnp.zeros_like(old))
    flat_indices = [jnp.reshape(index, (-1,)) for index in indices]
    flat_value = jnp.reshape(value, (-1,))
    flat_mask = jnp.reshape(mask, (-1,))
    flat_expected = jnp.reshape(expected, (-1,)) if expected is not None else flat_value

    def step(lane: jax.Array, state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        array, olds = state
        where = tuple(
            jnp.clip(index[lane], 0, size - 1)
            for index, size in zip(flat_indices, array.shape, strict=True)
        )
        old = array[where]
        operand = flat_value[lane]
        if kind == "and":
            new = old & operand
        elif kind == "or":
            new = old | operand
        elif kind == "xor":
            new = old ^ operand
        elif kind == "xchg":
            new = operand
        elif kind == "cas":
            new = jnp.where(old == flat_expected[lane], operand, old)
        else:
            raise ValueError(f"unknown atomic kind {kind!r}")
        new = jnp.where(flat_mask[lane], new, old)
        return array.at[where].set(new), olds.at[lane].set(old)

    olds = jnp.zeros(flat_value.shape, dtype=current.dtype)
    updated, olds = jax.lax.fori_loop(0, flat_value.shape[0], step, (current, olds))
    ref[...] = updated
    return jnp.reshape(olds, value.shape)


def gpu_atomic_by_lane(
    atomic: Any,
    ref: Any,
    indices: Sequence[jax.Array],
    value: jax.Array,
    *,
    mask: jax.Array | None,
) -> jax.Array:
    """A tile of atomics on GPU as one scalar `plgpu.atomic_*` per lane; returns the old values.

    Pallas' Triton lowering of an atomic on a tensor of pointers compiles and runs but leaves
    memory unchanged (measured with jax 0.11.2 on an H200: a histogram read back zeros), while
    a one-element atomic lands. Each lane's index and operand are picked out of the tile with a
    masked reduction, so a tile of n lanes costs n scalar atomics and n reductions: correct, but
    meant for small tiles (the autotuner sees the cost).
    """
    shape = value.shape
    lanes = jnp.zeros(shape, dtype=jnp.int32)
    stride = 1
    for axis in reversed(range(len(shape))):
        lanes = lanes + jax.lax.broadcasted_iota(jnp.int32, shape, axis) * stride
        stride *= shape[axis]
    active = jnp.ones(shape, dtype=jnp.bool_) if mask is None else mask

    def pick(lane_is: jax.Array, array: jax.Array) -> jax.Array:
        return jnp.sum(jnp.where(lane_is, array, jnp.zeros_like(array)), dtype=array.dtype)

    def step(lane: jax.Array, olds: jax.Array) -> jax.Array:
        lane_is = lanes == lane
        where = tuple(pick(lane_is, index) for index in indices)
        on = jnp.max(jnp.where(lane_is & active, 1, 0)) > 0
        old = atomic(ref, where, pick(lane_is, value), mask=on)
        return jnp.where(lane_is, old, olds)

    return jax.lax.fori_loop(0, stride, step, jnp.zeros(shape, dtype=value.dtype))
