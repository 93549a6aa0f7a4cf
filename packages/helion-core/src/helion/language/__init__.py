"""The Helion language: `import helion.language as hl`.

Each function here only normalizes its arguments and carries the docs; the active mode
(tracer, eager interpreter or host runtime, see `_context`) does the work.
"""

from __future__ import annotations

import builtins
import math
import operator
import sys
from typing import Any
from typing import Callable
from typing import NamedTuple
from typing import Sequence

import torch

from helion.language._context import dispatch
from helion.language._context import dispatch_as
from helion.language.stack_tensor import StackTensor as StackTensor
from helion.language.stack_tensor import register_buffers as register_buffers
from helion.language.stack_tensor import stack_pointers as stack_pointers


class ConstExpr(NamedTuple):
    """Marks a kernel argument as a compile-time constant: `def k(x, n: hl.constexpr)` or
    `k(x, hl.constexpr(5))`. Its value is baked into the code and becomes part of the key."""

    value: Any

    def __index__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)


constexpr = ConstExpr


class ProcessGroupName(ConstExpr):
    """Annotation for an argument naming the process group a distributed kernel uses."""

    def specialization_key(self) -> tuple:
        """The name with the group's size and this rank's place in it: what compiled code may
        bake in (the peers of a rank). A group destroyed and re-created under the same name
        with another size must not reuse code compiled for the old one."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return (self.value,)
        try:
            from torch.distributed import distributed_c10d as c10d

            group = c10d._resolve_process_group(self.value)
            return (self.value, group.size(), group.rank())
        except Exception:  # an unknown name: the kernel's own resolution reports it
            return (self.value,)


class Tile:
    """The loop variable of `hl.tile`. Never constructed by users; see `tile.index`,
    `tile.begin`, `tile.end`, `tile.block_size`, `tile.id`, `tile.count`."""


# -- loops ------------------------------------------------------------------------------------


def tile(
    begin_or_end: Any, end_or_none: Any = None, /, block_size: Any = None, **unknown: Any
) -> Any:
    """Iterate over tiles of a range (or of several ranges, given as a sequence).

    `hl.tile(n)`, `hl.tile(begin, end)`, `hl.tile([m, n])`, `hl.tile(n, block_size=64)`.
    A top-level `for` over `hl.tile` is the launch grid; a nested one is a sequential loop.
    `block_size=None` makes the block size a tunable (an entry of `Config.block_sizes`).
    """
    if unknown:
        _refuse_keywords("hl.tile", unknown, "block_size")
    return dispatch("tile", begin_or_end, end_or_none, block_size=block_size)


def grid(begin_or_end: Any, end_or_none: Any = None, /, step: Any = None, **unknown: Any) -> Any:
    """Like `hl.tile` with block size 1: yields scalar indices (`range` in device code)."""
    if unknown:
        hint = (
            "hl.grid steps by 1 (its indices are scalars): for blocks of several indices use "
            "hl.tile(..., block_size=...)."
            if "block_size" in unknown
            else None
        )
        _refuse_keywords("hl.grid", unknown, "step", hint=hint)
    return dispatch("grid", begin_or_end, end_or_none, step=step)


def _refuse_keywords(api: str, unknown: dict, accepted: str, hint: str | None = None) -> None:
    """A call of `api` with keyword arguments it does not take: an error naming them (raised
    where the kernel calls it; the tracer and eager mode add the kernel's line)."""
    from helion import exc

    names = ", ".join(repr(name) for name in unknown)
    raise exc.InvalidAPIUsage(
        f"{api}() got unexpected keyword argument{'s' if len(unknown) > 1 else ''} {names}; "
        f"it takes only {accepted}=",
        hint=hint,
    )


def static_range(begin_or_end: int, end_or_none: int | None = None, /, step: int = 1) -> range:
    """A compile-time unrolled range over constant ints."""
    from helion import exc

    for bound in (begin_or_end, end_or_none, step):
        if bound is not None and not isinstance(bound, int):
            raise exc.TypeInferenceError(
                f"hl.static_range needs constant ints, got {type(bound).__name__}"
            )
    if end_or_none is None:
        return range(0, begin_or_end, step)
    return range(begin_or_end, end_or_none, step)


def barrier() -> None:
    """Grid-wide barrier between two top-level loops (forces a persistent pid_type)."""
    return dispatch("barrier")


def jagged_tile(parent: Any) -> Any:
    """An inner loop over a jagged dimension: each lane of `parent` (an integer device tensor
    whose every axis is an enclosing tile, e.g. the lengths of a tile of rows) ends the loop at
    its own value.

    It runs like `hl.tile(0, parent.amax())`, and every load, store, atomic and reduction that
    uses the tile together with `parent`'s axes is masked by `tile.index < parent`, so lanes
    past a row's end read 0, are not written and do not count in reductions:

        for tile_b in hl.tile(num_rows):
            starts = offsets[tile_b]
            lengths = offsets[tile_b.index + 1] - starts
            for tile_k in hl.jagged_tile(lengths):
                rows = starts[:, None] + tile_k.index[None, :]
                x = values[rows, :]                 # masked where tile_k.index >= lengths
    """
    return dispatch("jagged_tile", parent)


# -- tunables and specialization ---------------------------------------------------------------


def register_block_size(min_or_max: Any, max_or_none: Any = None, /) -> Any:
    """Allocate a tunable block size (an entry of `Config.block_sizes`) usable in host code
    and shared with `hl.tile(..., block_size=bs)`."""
    # a minimum above the maximum is kept: the maximum is often a dimension's size, and a
    # dimension smaller than the minimum gets one block of the minimum (masked)
    if max_or_none is None:
        return dispatch("register_block_size", 1, _block_size_bound(min_or_max, "maximum"))
    low = _block_size_bound(min_or_max, "minimum")
    return dispatch("register_block_size", low, _block_size_bound(max_or_none, "maximum"))


def _block_size_bound(value: Any, which: str) -> Any:
    """A bound of `hl.register_block_size`: a positive int (a size of an argument, a constant)."""
    from helion import exc

    bound = value.value if isinstance(value, ConstExpr) else value
    if isinstance(bound, bool) or not isinstance(bound, int):
        try:
            bound = operator.index(bound)
        except TypeError:
            raise exc.InvalidAPIUsage(
                f"hl.register_block_size: the {which} must be an int, got "
                f"{type(bound).__name__} {bound!r}",
                hint="Block sizes are whole numbers of elements: pass an int "
                "(e.g. int(...) of a computed bound).",
                loc=exc.SourceLocation.from_frame(sys._getframe(2)),
            ) from None
    if bound < 1:
        raise exc.InvalidAPIUsage(
            f"hl.register_block_size: the {which} must be at least 1, got {bound}",
            hint="A block holds at least one element; for a size that may be 0, pass max(n, 1).",
            loc=exc.SourceLocation.from_frame(sys._getframe(2)),
        )
    return bound


def register_tunable(name: str, fragment: Any) -> Any:
    """Add a user tunable `name` (a ConfigSpecFragment) to the search space; returns its value."""
    from helion import exc
    from helion.autotuner.config_fragment import ConfigSpecFragment

    if not isinstance(name, str) or not isinstance(fragment, ConfigSpecFragment):
        raise exc.RegisterTunableArgTypes(
            name,
            fragment,
            hint="Describe the values to tune with a fragment of helion.autotuner, e.g. "
            "hl.register_tunable('split', PowerOfTwoFragment(1, 8)) or "
            "EnumFragment((1, 2, 4)); a value that is not tuned is a plain variable.",
            loc=exc.SourceLocation.from_frame(sys._getframe(1)),  # the kernel's line
        )
    return dispatch("register_tunable", name, fragment)


def specialize(value: Any) -> Any:
    """Bake a size (or sequence of sizes) of an input tensor into the kernel (host only)."""
    return dispatch("specialize", value)


# -- creation -----------------------------------------------------------------------------------


def full(
    shape: Sequence[Any], value: Any, dtype: torch.dtype = torch.float32, device: Any = None
) -> Any:
    """A device tensor of `shape` (ints, tiles, block sizes) filled with `value` (a number or a
    0-D device value)."""
    _check_dtype("hl.full", dtype)
    return dispatch(
        "full", _as_list(shape, "hl.full", "shape", "hl.full([{}], value)"), value, dtype
    )


def zeros(shape: Sequence[Any], dtype: torch.dtype = torch.float32, device: Any = None) -> Any:
    """`hl.full(shape, 0, dtype)`; the default dtype is float32."""
    _check_dtype("hl.zeros", dtype)
    return dispatch_as(
        "zeros", "full", _as_list(shape, "hl.zeros", "shape", "hl.zeros([{}])"), 0, dtype
    )


def _as_list(value: Any, api: str, what: str, example: str) -> list:
    """``value``, the shape or index an hl.* op takes as a list, as a list. One tile or one
    number there (`hl.zeros(tile)`, `hl.load(x, tile)`) is refused naming the op and showing
    the call with a list (``example`` with its ``{}`` filled in)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    from helion import exc

    if _is_tile(value):
        raise exc.TileGivenForSequence(api, what, "a tile", example.format("tile"))
    try:
        return list(value)
    except TypeError as error:
        if isinstance(error, exc.Base):
            raise
        if isinstance(value, int) and not isinstance(value, bool):
            got, item = f"the int {int(value)}", str(int(value))
        else:
            got, item = f"a {type(value).__name__}", "..."
        raise exc.SequenceExpected(api, what, got, example.format(item)) from None


def _is_tile(value: Any) -> bool:
    """Whether ``value`` is the loop variable of an hl.tile loop (traced or eager)."""
    from helion.frontend.proxies import TileProxy

    if isinstance(value, TileProxy):
        return True
    eager_tiles = sys.modules.get("helion.eager.tiles")  # loaded whenever eager mode runs
    return eager_tiles is not None and isinstance(value, eager_tiles.RefTile)


def _check_dtype(api: str, dtype: Any) -> None:
    if not isinstance(dtype, torch.dtype):
        from helion import exc

        name = dtype if isinstance(dtype, str) else None
        raise exc.TypeInferenceError(
            f"{api}: dtype must be a torch.dtype, got {type(dtype).__name__} {dtype!r}",
            hint=f"Use torch.{name}."
            if name and isinstance(getattr(torch, name, None), torch.dtype)
            else "Pass a torch dtype such as torch.float32.",
        )


def arange(*args: Any, dtype: torch.dtype | None = None, device: Any = None, **kwargs: Any) -> Any:
    """`torch.arange` on the kernel device; accepts block sizes (`hl.arange(BLOCK)`)."""
    return dispatch("arange", *args, dtype=dtype)


# -- random numbers (Philox4x32-10, the stream of Triton's tl.rand; see helion.language.philox) --


def rand(shape: Sequence[Any], seed: Any, device: Any = None, offsets: Any = None) -> Any:
    """Uniform float32 random numbers in [0, 1), independent of torch's RNG.

    Args:
        shape: ints, tiles and block sizes. The default offsets are the row-major linear index
            over the full extents of the dims (a tile's dim counts up to its loop's end), built
            from `tile.index`: the values do not depend on block sizes or the config.
        seed: an int, or a 1-element integer tensor argument of the kernel.
        device: accepted for compatibility (the kernel's device is used).
        offsets: an integer device tensor of Philox counters; then the result has its shape
            and `shape` is ignored.

    Returns:
        A float32 tensor of `shape` (or of `offsets.shape`).
    """
    shape = _as_list(shape, "hl.rand", "shape", "hl.rand([{}], seed)")
    return dispatch("rand", shape, seed, offsets=offsets)


def randint(shape: Sequence[Any], low: int, high: int, seed: Any, device: Any = None) -> Any:
    """Uniform int32 random integers in [low, high), with the offsets and seeds of `hl.rand`."""
    shape = _as_list(shape, "hl.randint", "shape", "hl.randint([{}], low, high, seed)")
    return dispatch("randint", shape, low, high, seed)


def rand4x(seed: Any, offsets: Any, device: Any = None) -> tuple:
    """Four independent float32 uniforms in [0, 1) per offset from one Philox evaluation
    (Triton's `tl.rand4x`); `offsets` is an integer device tensor."""
    return dispatch("rand4x", seed, offsets)


# -- memory -------------------------------------------------------------------------------------


def load(
    tensor: Any, index: Sequence[Any], extra_mask: Any = None, eviction_policy: str | None = None
) -> Any:
    """`tensor[index]` with an optional extra mask (masked lanes read 0)."""
    index = _as_list(index, "hl.load", "index", "hl.load(tensor, [{}])")
    return dispatch("load", tensor, index, extra_mask=extra_mask, eviction_policy=eviction_policy)


def store(tensor: Any, index: Sequence[Any], value: Any, extra_mask: Any = None) -> None:
    """`tensor[index] = value` with an optional extra mask."""
    index = _as_list(index, "hl.store", "index", "hl.store(tensor, [{}], value)")
    return dispatch("store", tensor, index, value, extra_mask=extra_mask)


def subscript(tensor: Any, index: Sequence[Any]) -> Any:
    """Index a device tensor with `None` (new axis) and `:` only."""
    return dispatch(
        "subscript", tensor, _as_list(index, "hl.subscript", "index", "hl.subscript(t, [{}])")
    )


def stacktensor_like(tensor_like: Any, dev_ptrs: Any) -> StackTensor:
    """Several buffers laid out like the host tensor `tensor_like`, at the data pointers in
    `dev_ptrs` (a torch.uint64 tensor loaded in device code): `stack[index]` reads `index` from
    every buffer (shape `dev_ptrs.shape + tensor_like[index].shape`), `stack[index] = v` writes
    `v[j]` to buffer j. See `helion.language.stack_tensor` for how ref/eager find the buffers."""
    return dispatch("stacktensor_like", tensor_like, dev_ptrs)


def _atomic(kind: str):
    def atomic_fn(target: Any, index: Sequence[Any], value: Any, sem: str = "relaxed") -> Any:
        api = f"atomic_{kind}"
        index = _as_list(index, f"hl.{api}", "index", f"hl.{api}(target, [{{}}], value)")
        return dispatch_as(api, "atomic", kind, target, index, value, sem=sem)

    atomic_fn.__name__ = f"atomic_{kind}"
    atomic_fn.__doc__ = (
        f"Atomic {kind} of `value` into `target[index]`; returns the previous values. "
        "`sem` is one of relaxed, acquire, release, acq_rel."
    )
    return atomic_fn


atomic_add = _atomic("add")
atomic_xchg = _atomic("xchg")
atomic_max = _atomic("max")
atomic_min = _atomic("min")
atomic_and = _atomic("and")
atomic_or = _atomic("or")
atomic_xor = _atomic("xor")


def atomic_cas(
    target: Any, index: Sequence[Any], expected: Any, value: Any, sem: str = "relaxed"
) -> Any:
    """Where `target[index] == expected`, write `value`; returns the previous values."""
    index = _as_list(
        index, "hl.atomic_cas", "index", "hl.atomic_cas(target, [{}], expected, value)"
    )
    return dispatch_as(
        "atomic_cas", "atomic", "cas", target, index, value, sem=sem, expected=expected
    )


# -- views --------------------------------------------------------------------------------------


def split(tensor: Any) -> tuple[Any, Any]:
    """Split a device tensor whose last dimension has size 2 into its two halves.

    Args:
        tensor: a device tensor of shape `[..., 2]`.

    Returns:
        `(lo, hi)`, each of shape `[...]`: `tensor[..., 0]` and `tensor[..., 1]`.
    """
    return dispatch("split", tensor)


def join(t0: Any, t1: Any) -> Any:
    """Stack two device tensors along a new last dimension of size 2 (the inverse of `split`).

    Args:
        t0: the values at index 0 of the new dimension.
        t1: the values at index 1; both are broadcast together and promoted to one dtype.

    Returns:
        A tensor of shape `broadcast(t0, t1).shape + (2,)`.
    """
    return dispatch("join", t0, t1)


# -- matmul -------------------------------------------------------------------------------------


def dot(mat1: Any, mat2: Any, acc: Any = None, out_dtype: torch.dtype | None = None) -> Any:
    """Matrix product of 2-D (or batched 3-D) tiles; float inputs give float32 (int8 give int32)
    unless `out_dtype` is set; with `acc` the result is `acc + mat1 @ mat2` in acc's dtype."""
    return dispatch("dot", mat1, mat2, acc=acc, out_dtype=out_dtype)


def dot_scaled(
    mat1: Any,
    mat1_scale: Any,
    mat1_format: str,
    mat2: Any,
    mat2_scale: Any,
    mat2_format: str,
    acc: Any = None,
    out_dtype: torch.dtype | None = None,
) -> Any:
    """Block-scaled matrix product (``tl.dot_scaled``): ``acc + (mat1 * s1) @ (mat2 * s2)``.

    Args:
        mat1: [M, K] tile in `mat1_format` ([M, K // 2] uint8 for "e2m1", two values per byte,
            the first in the low nibble).
        mat1_scale: [M, K // 32] uint8 e8m0 scales (byte s means 2 ** (s - 127)), or None.
        mat1_format: one of "e2m1", "e4m3", "e5m2", "bf16", "fp16".
        mat2: [K, N] tile in `mat2_format` ([K // 2, N] uint8 for "e2m1").
        mat2_scale: [N, K // 32] uint8 scales (not transposed), or None.
        mat2_format: as `mat1_format`.
        acc: optional float32 / float16 accumulator of shape [M, N].
        out_dtype: result dtype without `acc` (default float32).

    Returns:
        The [M, N] product, in acc's dtype when `acc` is given. Computed in float32.
    """
    return dispatch(
        "dot_scaled",
        mat1,
        mat1_scale,
        mat1_format,
        mat2,
        mat2_scale,
        mat2_format,
        acc=acc,
        out_dtype=out_dtype,
    )


# -- scans --------------------------------------------------------------------------------------


def cumsum(input: Any, dim: int, reverse: bool = False) -> Any:
    """Inclusive prefix sum along `dim`."""
    return dispatch_as("cumsum", "scan", "cumsum", input, dim, reverse=reverse)


def cumprod(input: Any, dim: int, reverse: bool = False) -> Any:
    """Inclusive prefix product along `dim`."""
    return dispatch_as("cumprod", "scan", "cumprod", input, dim, reverse=reverse)


def reduce(  # the public Helion name
    combine_fn: Any,
    input_tensor: Any,
    dim: int | None = None,
    other: Any = 0,
    keep_dims: bool = False,
) -> Any:
    """Reduce `input_tensor` (a device tensor, or a tuple of them) along `dim` with a combiner.

    Args:
        combine_fn: a plain function applied elementwise: `combine_fn(a, b) -> c` for one input;
            for a tuple of k inputs `combine_fn(a_1, ..., a_k, b_1, ..., b_k) -> (c_1, ..., c_k)`
            (or `combine_fn(a_tuple, b_tuple) -> tuple`). It must be associative and commutative
            and may only compute elementwise on its arguments (torch ops, operators, constants).
        input_tensor: the values to reduce; the inputs of a tuple broadcast to one shape.
        dim: the dimension to reduce; None reduces every dimension.
        other: the value padded lanes take in compiled code (one number, or one per input); it
            should be an identity of `combine_fn` (0 for a sum, -inf for a max).
        keep_dims: keep the reduced dimension with size 1.

    Returns:
        The reduced tensor, or a tuple with one reduced tensor per input.
    """
    return dispatch("reduce", combine_fn, input_tensor, dim, other=other, keep_dims=keep_dims)


def associative_scan(combine_fn: Any, input_tensor: Any, dim: int, reverse: bool = False) -> Any:
    """Inclusive prefix scan of `input_tensor` (a device tensor, or a tuple of them) along `dim`.

    Args:
        combine_fn: an associative function applied elementwise, called as for `hl.reduce`; its
            left operand covers earlier elements than its right one (later ones with `reverse`),
            so it need not be commutative (e.g. composing linear recurrences).
        input_tensor: the values to scan; the inputs of a tuple broadcast to one shape.
        dim: the dimension to scan along.
        reverse: scan from the end: element i combines elements i, i+1, ..., n-1.

    Returns:
        A tensor of the input's shape (one per input for a tuple).
    """
    return dispatch("associative_scan", combine_fn, input_tensor, dim, reverse=reverse)


# -- tile attributes (also reachable as tile.index, tile.begin, ...) ------------------------------


def tile_index(t: Any) -> Any:
    return t.index


def tile_begin(t: Any) -> Any:
    return t.begin


def tile_end(t: Any) -> Any:
    return t.end


def tile_block_size(t: Any) -> Any:
    return t.block_size


def tile_id(t: Any) -> Any:
    return t.id


# -- escape hatches (Triton only) ----------------------------------------------------------------


def inline_triton(triton_source: str, args: Any, output_like: Any) -> Any:
    """Insert a snippet of Triton code into the kernel.

    Args:
        triton_source: Triton statements (dedented automatically); the last line is an
            expression giving the result. `{0}`, `{1}` (or `{name}`) are replaced, as by
            `str.format`, with the generated names of `args`.
        args: a list/tuple (positional placeholders) or a mapping (named placeholders) of device
            tensors, tiles (their indices), kernel tensor arguments (their pointers), numbers,
            dtypes (their Triton names) or strings (inserted as written).
        output_like: a device tensor (or a tuple/list of them) with the shape and dtype of each
            output, or None when the snippet produces nothing.

    Returns:
        The snippet's value(s), structured like `output_like`. Runs on the Triton backend only
        (compiled or interpreted); other backends and eager mode report it as unsupported.
    """
    return dispatch("inline_triton", triton_source, args, output_like)


def triton_kernel(triton_source_or_fn: Any, args: Sequence[Any], output_like: Any) -> Any:
    """Call a ``@triton.jit`` function from device code.

    The function, and the ``@triton.jit`` functions it calls (found through its globals,
    transitively), are defined once at module scope of the generated Triton module, with the
    modules and ``tl.constexpr`` constants they use; the kernel calls it where
    ``hl.triton_kernel`` stands. Triton's own functions and objects (``tl.sigmoid``,
    ``tl.float16``) are named by their path in Triton instead of being copied.

    Args:
        triton_source_or_fn: a ``@triton.jit`` function (a ``triton.JITFunction``, or a
            function of Triton's library such as ``tl.sigmoid``); a plain Python function (it
            is compiled as if decorated with ``@triton.jit``); the source of one ``def``
            (decorated or not), whose globals are the kernel module's; or the name of a
            function in the kernel's module globals.
        args: a list or tuple of arguments passed positionally: device tensors, tiles (their
            indices), kernel tensor arguments (their pointers), numbers, dtypes (their Triton
            names) or strings (Python strings, e.g. for a ``tl.constexpr`` parameter). Their
            number must fit the function's parameters.
        output_like: a device tensor with the shape and dtype of the result, a tuple/list of
            them for a function returning several values, or None when the function is called
            only for its side effects (its return value, if any, is dropped).

    Returns:
        The function's result(s), structured like `output_like`. Runs on the Triton backend
        only (compiled or interpreted); other backends and eager mode report it as unsupported.

    Raises:
        helion.exc.InvalidAPIUsage: when traced, with the kernel's line: not a function or one
            ``def``, a number of args the parameters do not take, an `output_like` that is not
            device tensors or does not match what the function visibly returns, or a global
            the function uses that cannot be carried into the generated module.
    """
    return dispatch("triton_kernel", triton_source_or_fn, args, output_like)


def inline_asm_elementwise(
    asm: str, constraints: str, args: Sequence[Any], dtype: Any, is_pure: bool, pack: int
) -> Any:
    """Elementwise inline assembly (``tl.inline_asm_elementwise``): `args` broadcast to one
    shape, `pack` elements go to each asm invocation; `dtype` is the result dtype (a sequence of
    dtypes gives a tuple of results). Needs a GPU: the Triton interpreter, the ref backend and
    eager mode cannot run it and say so."""
    return dispatch("inline_asm_elementwise", asm, constraints, args, dtype, is_pure, pack)


# -- low-precision formats ------------------------------------------------------------------------


def float4_e2m1fn_x2_to_float32(value: Any) -> tuple[Any, Any]:
    """Decode packed FP4 (E2M1) pairs into two float32 tensors.

    Each byte holds two E2M1 values, as torch.float4_e2m1fn_x2 packs them: the first in bits
    0-3, the second in bits 4-7. A value is sign (bit 3), exponent (bits 2-1, bias 1) and
    mantissa (bit 0), with magnitudes 0, 0.5, 1, 1.5, 2, 3, 4 and 6. Built from ordinary
    elementwise ops, so it runs on every backend and in eager mode.

    Args:
        value: a device tensor of torch.uint8 (or int8) bytes. A torch.float4_e2m1fn_x2 tensor
            is passed viewed as bytes: ``x.view(torch.uint8)`` in host code.

    Returns:
        ``(lo, hi)``: float32 tensors of `value`'s shape, the values of the low and the high
        nibbles.

    Raises:
        helion.exc.TypeInferenceError: `value` is not a tensor of bytes.
    """
    # device code (traced or eager) decodes; host code, which has no handler, refuses it
    return dispatch("float4_e2m1fn_x2_to_float32", value)


def load_float4_e2m1fn_x16_to_float16(
    storage: Any, group_offsets: Any, extra_mask: Any = None
) -> tuple[Any, ...]:
    """Load groups of 16 packed FP4 (E2M1) values and decode them to float16.

    A group is 8 consecutive bytes of `storage` holding 16 E2M1 values, two per byte as
    torch.float4_e2m1fn_x2 packs them (the first in bits 0-3). Built from `hl.load` and
    elementwise ops, so it runs on every backend and in eager mode.

    Args:
        storage: a kernel tensor argument of torch.uint8 (or int8, or torch.float4_e2m1fn_x2)
            bytes, of any shape.
        group_offsets: an integer device tensor (or int): for each group, the offset of its
            first byte, counted in elements of `storage` in row-major order over its shape
            (for a contiguous tensor: the byte offset from its start). A group may cross rows.
        extra_mask: optional bool device tensor broadcasting to `group_offsets`' shape; masked
            groups are not read and decode to +0.0.

    Returns:
        A tuple of 16 float16 tensors of `group_offsets`' shape: output ``2*i`` holds the low
        nibble of byte ``i`` of each group, output ``2*i + 1`` its high nibble (value ``j`` of
        the group in output ``j``). Every E2M1 value is exact in float16, -0.0 included.

    Raises:
        helion.exc.TypeInferenceError: storage of another dtype, or offsets that are not
            integers.
    """
    return dispatch("load_float4_e2m1fn_x16_to_float16", storage, group_offsets, extra_mask)


def load_bfloat16_x16_to_float16(
    storage: Any, group_offsets: Any, extra_mask: Any = None
) -> tuple[Any, ...]:
    """Load groups of 16 consecutive bfloat16 values and convert them to float16.

    Args:
        storage: a kernel tensor argument of torch.bfloat16, of any shape.
        group_offsets: an integer device tensor (or int): for each group, the offset of its
            first element, counted in elements of `storage` in row-major order over its shape
            (for a contiguous tensor: the element offset from its start).
        extra_mask: optional bool device tensor broadcasting to `group_offsets`' shape; masked
            groups are not read and give +0.0.

    Returns:
        A tuple of 16 float16 tensors of `group_offsets`' shape, element ``j`` of each group in
        output ``j``, rounded as ``x.to(torch.float16)`` rounds (to nearest, ties to even;
        beyond float16's range to +-inf).

    Raises:
        helion.exc.TypeInferenceError: storage that is not bfloat16, or offsets that are not
            integers.
    """
    return dispatch("load_bfloat16_x16_to_float16", storage, group_offsets, extra_mask)


# -- debug --------------------------------------------------------------------------------------


def device_print(prefix: str, *values: Any) -> None:
    """Print from device code (also what `print` becomes inside device loops)."""
    return dispatch("device_print", prefix, *values)


def breakpoint() -> None:  # mirrors the builtin it replaces in device code
    """A breakpoint in device code; only in eager mode (HELION_INTERPRET=1)."""
    return dispatch("breakpoint")


# -- builtins in device code ------------------------------------------------------------------


def _builtin_min(*args: Any) -> Any:
    """What ``min`` means in device code: Python's ``min`` over Python numbers, an elementwise
    minimum once a device value (``tile.begin + 2``, a 0-D tensor) is among the arguments."""
    return _extremum(builtins.min, operator.lt, args)


def _builtin_max(*args: Any) -> Any:
    """What ``max`` means in device code (see `_builtin_min`)."""
    return _extremum(builtins.max, operator.gt, args)


def _extremum(builtin: Callable[..., Any], better: Callable[[Any, Any], Any], args: tuple) -> Any:
    """Python's ``max``/``min`` over Python numbers; with a device value among the arguments,
    ``torch.maximum``/``torch.minimum`` folded left to right: elementwise, with torch's type
    promotion, and NaN propagating (``max(x, 0.0)`` is NaN where ``x`` is, like
    ``torch.clamp_min(x, 0.0)``, whatever the order of the arguments)."""
    values = list(args[0]) if len(args) == 1 else list(args)  # min(iterable) or min(a, b, ...)
    if all(_is_number(v) for v in values):
        return builtin(*args)  # plain Python values: Python's answer, errors included
    is_max = builtin is builtins.max
    result = values[0]
    for value in values[1:]:
        result = _extreme_pair(is_max, result, value)
    return result


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float))


def _extreme_pair(is_max: bool, a: Any, b: Any) -> Any:
    if _is_number(a) and _is_number(b):
        if a != a or b != b:  # a NaN wins, as in torch.maximum
            return math.nan
        return builtins.max(a, b) if is_max else builtins.min(a, b)
    if _is_number(b) or _is_number(a):
        tensor, number = (a, b) if _is_number(b) else (b, a)
        return torch.clamp_min(tensor, number) if is_max else torch.clamp_max(tensor, number)
    return torch.maximum(a, b) if is_max else torch.minimum(a, b)


def __getattr__(name: str) -> Any:
    # ops contributed by plugins (e.g. hl.signal from helion-distributed) resolve lazily
    from helion.language._plugin_ops import plugin_op

    return plugin_op(name)
