"""Helpers the generated kernels call (imported there as `hp`).

Kept small: everything a reader needs to follow a kernel is in its generated source, except
the interpret-mode atomics below, which are a page of JAX of their own.
"""

from __future__ import annotations

from typing import Any
from typing import Sequence

import jax
import jax.numpy as jnp


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
    The lanes are applied as if serialized in row-major lane order, masked-off lanes skipped (the
    ref backend's semantics): each lane gets the value before its own update, so lanes hitting
    the same element see each other's writes (a ticket counter hands out 0, 1, 2, ...). The k-th
    lane to hit an element is applied in round k, one gather and one scatter per round; without
    duplicate addresses that is one round.

    Args:
        ref: The whole-array ref of the target tensor.
        kind: One of add, max, min, and, or, xor, xchg, cas.
        indices: One integer array per dimension of `ref`, all of `value`'s shape.
        value: The operand, already in the ref's dtype.
        mask: Lanes to apply (None: all).
        expected: The compare value of `cas`.
    """
    current = ref[...]
    shape = current.shape
    if not shape:
        # a 0-d target: address its one element as a 1-element vector
        current = jnp.reshape(current, (1,))
        indices = (jnp.zeros(value.shape, dtype=jnp.int32),)
    lanes = value.size
    if lanes == 0:
        return jnp.zeros(value.shape, dtype=current.dtype)
    flat_value = jnp.reshape(value, (-1,))
    flat_mask = jnp.ones((lanes,), dtype=jnp.bool_) if mask is None else jnp.reshape(mask, (-1,))
    flat_expected = jnp.reshape(expected, (-1,)) if expected is not None else flat_value
    # masked-off lanes may point anywhere: clip them into range, they are never applied
    flat_indices = tuple(
        jnp.clip(jnp.reshape(index, (-1,)), 0, size - 1).astype(jnp.int32)
        for index, size in zip(indices, current.shape, strict=True)
    )
    rank = _rank_among_equal(flat_indices, flat_mask)
    rounds = jnp.max(rank, initial=-1) + 1

    def step(r: jax.Array, state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        array, olds = state
        chosen = rank == r
        old = array[flat_indices]
        operand = flat_value
        if kind == "add":
            new = old + operand
        elif kind == "max":
            new = jnp.maximum(old, operand)
        elif kind == "min":
            new = jnp.minimum(old, operand)
        elif kind == "and":
            new = old & operand
        elif kind == "or":
            new = old | operand
        elif kind == "xor":
            new = old ^ operand
        elif kind == "xchg":
            new = operand
        elif kind == "cas":
            new = jnp.where(old == flat_expected, operand, old)
        else:
            raise ValueError(f"unknown atomic kind {kind!r}")
        # lanes not in this round point past the end and the scatter drops them; the chosen
        # lanes hit distinct elements, so the scatter-set is well defined
        where = tuple(
            jnp.where(chosen, index, size)
            for index, size in zip(flat_indices, array.shape, strict=True)
        )
        array = array.at[where].set(new.astype(array.dtype), mode="drop")
        return array, jnp.where(chosen, old, olds)

    olds = jnp.zeros((lanes,), dtype=current.dtype)
    updated, olds = jax.lax.fori_loop(0, rounds, step, (current, olds))
    ref[...] = jnp.reshape(updated, shape)
    return jnp.reshape(olds, value.shape)


def _rank_among_equal(indices: tuple[jax.Array, ...], active: jax.Array) -> jax.Array:
    """For each active lane, how many earlier active lanes have the same index tuple; -1 for
    inactive lanes.

    A lexicographic sort on (inactive, indices..., lane) puts each element's lanes next to each
    other in lane order; a lane's rank is its distance from the start of its run.
    """
    count = active.shape[0]
    lane = jax.lax.iota(jnp.int32, count)
    inactive = jnp.logical_not(active).astype(jnp.int32)
    keys = (inactive, *indices, lane)
    ordered = jax.lax.sort(keys, num_keys=len(keys))
    # a run starts where (inactive, indices) differ from the previous sorted lane
    starts = jnp.zeros((count,), dtype=jnp.bool_)
    for key in ordered[:-1]:
        starts = starts | jnp.concatenate([jnp.ones((1,), jnp.bool_), key[1:] != key[:-1]])
    position = jax.lax.iota(jnp.int32, count)
    run_start = jax.lax.cummax(jnp.where(starts, position, 0), axis=0)
    rank = jnp.zeros((count,), dtype=jnp.int32).at[ordered[-1]].set(position - run_start)
    return jnp.where(active, rank, -1)


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
