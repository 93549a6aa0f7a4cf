"""Random numbers in eager mode: the Philox stream of `helion.language.philox`, with the seeds and
offsets the compiled kernel uses (see `helion.frontend.rng`), so that eager mode, the ref backend
and Triton give the same numbers.

- `hl.rand` / `hl.randint` / `hl.rand4x`: offsets from the tiles' indices and full extents.
- `torch.rand` & co. in device code: one seed per kernel call, drawn from torch's CPU generator at
  the first such call (where a compiled launch draws it), plus the call site's position.
  `torch.rand_like(x)` only sees a tensor here, so its dims are matched to the running tiles by
  size, in loop order (a compiled kernel knows which tile each dim is).
"""

from __future__ import annotations

import sys
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion import exc
from helion.eager.tiles import RefTile
from helion.language import ConstExpr
from helion.language import philox


def _int(value: Any, what: str) -> int:
    from helion.eager.mode import _int as eager_int

    return eager_int(value, what)


def seed_value(seed: Any, api: str) -> Any:
    if isinstance(seed, ConstExpr):
        seed = seed.value
    if isinstance(seed, int) and not isinstance(seed, bool):
        return int(seed)
    if isinstance(seed, torch.Tensor):
        if seed.numel() != 1:
            raise exc.TypeInferenceError(
                f"{api}: a seed tensor must have one element, got shape {list(seed.shape)}"
            )
        if seed.dtype.is_floating_point or seed.dtype == torch.bool:
            raise exc.TypeInferenceError(f"{api}: the seed must be an integer, got {seed.dtype}")
        return seed.reshape(()).to(torch.int64)
    raise exc.TypeInferenceError(
        f"{api}: the seed must be an int or a 1-element integer tensor, not {type(seed).__name__}"
    )


def _offsets_of(mode: Any, parts: Sequence[tuple[torch.Tensor, int]]) -> torch.Tensor:
    if not parts:
        return torch.zeros((), dtype=mode.index_dtype, device=mode.device)
    return philox.row_major_offsets([p[0] for p in parts], [p[1] for p in parts])


def _arange(mode: Any, n: int) -> torch.Tensor:
    return torch.arange(n, dtype=mode.index_dtype, device=mode.device)


def shape_offsets(mode: Any, shape: Sequence[Any]) -> torch.Tensor:
    """Default offsets of a shape of tiles and sizes (tile: its indices, up to its loop's end)."""
    parts = []
    for item in shape:
        if isinstance(item, RefTile):
            parts.append((item.index, item.range_end))
        else:
            n = _int(item, "a shape entry")
            parts.append((_arange(mode, n), n))
    return _offsets_of(mode, parts)


def like_offsets(mode: Any, sizes: Sequence[int]) -> torch.Tensor:
    """Default offsets for a tensor of `sizes`: each dim takes the first unused running tile of
    that extent (outer loops first), else counts 0..size-1."""
    running = [t for combo in mode.running_tiles for t in combo if isinstance(t, RefTile)]
    parts = []
    for size in sizes:
        match = next((t for t in running if t.extent == size), None)
        if match is not None:
            running.remove(match)
            parts.append((match.index, match.range_end))
        else:
            parts.append((_arange(mode, size), size))
    return _offsets_of(mode, parts)


def explicit_offsets(offsets: Any, api: str) -> torch.Tensor:
    if isinstance(offsets, RefTile):
        offsets = offsets.index
    if isinstance(offsets, int) and not isinstance(offsets, bool):
        return torch.tensor(offsets, dtype=torch.int64)
    if (
        not isinstance(offsets, torch.Tensor)
        or offsets.dtype.is_floating_point
        or offsets.dtype == torch.bool
    ):
        raise exc.TypeInferenceError(f"{api}: offsets must be an integer tensor")
    if offsets.dtype not in (torch.int32, torch.int64):
        offsets = offsets.to(torch.int32)
    return offsets


# -- hl.rand, hl.randint, hl.rand4x -------------------------------------------------------------------


def hl_rand(mode: Any, shape: list, seed: Any, offsets: Any = None) -> torch.Tensor:
    mode._device_only("rand")
    with torch._C.DisableTorchFunction():
        key = seed_value(seed, "hl.rand")
        counters = (
            explicit_offsets(offsets, "hl.rand")
            if offsets is not None
            else shape_offsets(mode, shape)
        )
        return philox.uniform(key, counters.to(mode.device))


def hl_randint(mode: Any, shape: list, low: Any, high: Any, seed: Any) -> torch.Tensor:
    mode._device_only("randint")
    low, high = (b.value if isinstance(b, ConstExpr) else b for b in (low, high))
    try:
        philox.check_int_range(low, high)
    except (TypeError, ValueError) as error:
        raise exc.TypeInferenceError(str(error)) from None
    with torch._C.DisableTorchFunction():
        return philox.randint(seed_value(seed, "hl.randint"), shape_offsets(mode, shape), low, high)


def hl_rand4x(mode: Any, seed: Any, offsets: Any) -> tuple:
    mode._device_only("rand4x")
    with torch._C.DisableTorchFunction():
        key = seed_value(seed, "hl.rand4x")
        return philox.uniform4x(key, explicit_offsets(offsets, "hl.rand4x").to(mode.device))


# -- torch.rand & co. in device code --------------------------------------------------------------------


def _site(mode: Any) -> int:
    """The call site of the running torch.rand, numbered as the tracer numbers it: the position of
    the call in the kernel's own function (the innermost frame that runs the kernel's source)."""
    source = getattr(getattr(mode.kernel, "split", None), "source", None)
    if source is None:
        return 0
    first, last = source.first_lineno, source.first_lineno + len(source.lines)
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename == source.filename and first <= frame.f_lineno <= last:
            positions = list(code.co_positions())
            index = frame.f_lasti // 2
            line, col = frame.f_lineno, 0
            if 0 <= index < len(positions):
                line = positions[index][0] or frame.f_lineno
                col = positions[index][2] or 0
            return philox.site_id(line - first, col)
        frame = frame.f_back
    return 0


def _site_key(mode: Any) -> int:
    if mode.rng_call_seed is None:
        with torch._C.DisableTorchFunction():
            mode.rng_call_seed = philox.draw_call_seed()
    return philox.site_seed(mode.rng_call_seed, _site(mode))


def _float_dtype(dtype: Any, name: str) -> torch.dtype:
    dtype = dtype or torch.get_default_dtype()
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise exc.TypeInferenceError(f"{name} in device code needs a floating dtype, got {dtype}")
    return dtype


def _check_kwargs(name: str, kwargs: dict) -> None:
    if kwargs.get("generator") is not None:
        raise exc.NotAllowedOnDevice(
            f"{name} with a generator (device code draws from the kernel's per-call seed)"
        )
    if kwargs.get("out") is not None:
        raise exc.NotAllowedOnDevice(f"out= in {name}")


def _sample(mode: Any, offsets: torch.Tensor, normal: bool, dtype: torch.dtype) -> torch.Tensor:
    key = _site_key(mode)
    values = philox.normal(key, offsets) if normal else philox.uniform(key, offsets)
    return values.to(dtype)


def _creation(normal: bool, name: str) -> Callable[..., torch.Tensor]:
    def handler(mode: Any, *size: Any, dtype: Any = None, **kwargs: Any) -> torch.Tensor:
        _check_kwargs(name, kwargs)
        items = (
            list(size[0])
            if len(size) == 1 and isinstance(size[0], (list, tuple, torch.Size))
            else list(size)
        )
        with torch._C.DisableTorchFunction():
            return _sample(mode, shape_offsets(mode, items), normal, _float_dtype(dtype, name))

    return handler


def _like(normal: bool, name: str) -> Callable[..., torch.Tensor]:
    def handler(mode: Any, x: Any, *, dtype: Any = None, **kwargs: Any) -> torch.Tensor:
        _check_kwargs(name, kwargs)
        if isinstance(x, RefTile):
            x = x.index
        with torch._C.DisableTorchFunction():
            dtype = _float_dtype(dtype or x.dtype, name)
            return _sample(mode, like_offsets(mode, list(x.shape)), normal, dtype)

    return handler


# torch function -> handler(mode, *args, **kwargs), consulted by EagerTorchMode in device code
TORCH_HANDLERS: dict[Any, Callable[..., torch.Tensor]] = {
    torch.rand: _creation(False, "torch.rand"),
    torch.randn: _creation(True, "torch.randn"),
    torch.rand_like: _like(False, "torch.rand_like"),
    torch.randn_like: _like(True, "torch.randn_like"),
}
