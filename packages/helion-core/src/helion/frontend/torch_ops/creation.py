"""Creation ops in device code: torch.zeros / ones / empty / full with a shape of tiles,
the `*_like` and `new_*` families, and the random ones (torch.rand, randn, rand_like,
randn_like; their sampling lives in `helion.frontend.rng`).

A new device value is dense, on the kernel's device and without autograd history: `layout=`,
`device=`, `pin_memory=` and `requires_grad=` are accepted where they say just that (a device
equal to the kernel's device) and refused otherwise. The same checks serve eager mode
(`helion.eager.mode` calls `check_creation` on the calls of `CREATION_OPS`), and `check_device`
serves the device moves `x.to(device)`, `x.cpu()` and `x.cuda()` (`torch_ops/elementwise.py`).
"""

from __future__ import annotations

from typing import Any
from typing import Callable

import torch

from helion.frontend import rng
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import HostTensor
from helion.frontend.torch_ops.registry import Handler
from helion.frontend.torch_ops.registry import describe
from helion.frontend.torch_ops.registry import register
from helion.frontend.torch_ops.registry import tensor_methods
from helion.frontend.torch_ops.registry import unsupported_argument
from helion.frontend.torch_ops.values import as_value
from helion.frontend.torch_ops.values import shape_arg
from helion.language import _ops as ops

# the creation ops whose placement arguments `check_creation` checks: eager mode checks the same
# calls with the same function (`helion.eager.mode`), naming each op as `torch_name` does
CREATION_OPS: set[Any] = set()


def _creation_op(*funcs: Any) -> Callable[[Handler], Handler]:
    """`register(*funcs)`, recording them in `CREATION_OPS`."""
    CREATION_OPS.update(func for func in funcs if func is not None)
    return register(*funcs)


def check_creation(
    tracer: Any,
    name: str,
    *,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = False,
    requires_grad: Any = False,
) -> None:
    """Refuse what a new device value cannot be: one of another layout or on another device than
    the kernel's, in pinned host memory, or recording autograd history.

    `tracer` is the tracer, or in eager mode the `EagerMode`: what it needs is the kernel's
    `device` and `current_loc()`, the kernel's line running now."""
    if layout not in (None, torch.strided):
        raise unsupported_argument(tracer, name, "layout", "device values are dense (strided).")
    check_device(tracer, name, device)
    if pin_memory:
        raise unsupported_argument(
            tracer, name, "pin_memory", "device values are not host memory that can be pinned."
        )
    if requires_grad:
        raise unsupported_argument(
            tracer, name, "requires_grad", "device values do not record autograd history."
        )


def check_device(tracer: Any, name: str, device: Any) -> None:
    """Refuse a device (given to `name`) other than the kernel's: device values live on the
    kernel's device, so a creation op's `device=` and a device move (`x.to(device)`, `x.cpu()`,
    `x.cuda()`) may only name that one (None: none named)."""
    if device is not None and not _is_kernel_device(tracer, device):
        raise unsupported_argument(
            tracer,
            name,
            "device",
            f"device code makes values on the kernel's device ({tracer.device}), not on "
            f"{describe(device)}: leave device out, or pass the kernel's device (x.device of a "
            "kernel argument x).",
        )


def _is_kernel_device(tracer: Any, device: Any) -> bool:
    """Whether `device` names the kernel's device; one without an index ("cuda") names the
    current device of its type, which is where the kernel runs."""
    try:
        wanted = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        return False
    kernel = tracer.device
    if wanted.type != kernel.type:
        return False
    return wanted.index is None or kernel.index is None or wanted.index == kernel.index


def _emit_like(tracer: Any, x: Any, fill_value: Any, dtype: Any) -> DeviceValue:
    value = as_value(tracer, x)
    return tracer.wrap(
        tracer.emit(
            ops.full,
            [],
            {"shape": value.shape, "value": fill_value, "dtype": dtype or value.dtype},
        )
    )


def _like(fill: Any, name: str) -> Handler:
    def handler(
        tracer: Any,
        x: Any,
        *,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        pin_memory: bool = False,
        requires_grad: bool = False,
        memory_format: Any = None,
    ) -> DeviceValue:
        check_creation(
            tracer,
            name,
            layout=layout,
            device=device,
            pin_memory=pin_memory,
            requires_grad=requires_grad,
        )
        return _emit_like(tracer, x, fill, dtype)

    return handler


_creation_op(torch.zeros_like)(_like(0, "torch.zeros_like"))
_creation_op(torch.ones_like)(_like(1, "torch.ones_like"))
_creation_op(torch.empty_like)(_like(0, "torch.empty_like"))


@_creation_op(torch.full_like)
def _full_like(
    tracer: Any,
    x: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool = False,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> DeviceValue:
    check_creation(
        tracer,
        "torch.full_like",
        layout=layout,
        device=device,
        pin_memory=pin_memory,
        requires_grad=requires_grad,
    )
    return _emit_like(tracer, x, fill_value, dtype)


def _size_given(name: str, dims: tuple, size: Any) -> tuple:
    """The size of `torch.zeros(2, 3)`, `torch.zeros([2, 3])` or `torch.zeros(size=(2, 3))`
    (torch's helpers, e.g. flex attention's `noop_mask`, pass it by keyword) as `*size`."""
    if size is None:
        return dims
    if dims:
        raise TypeError(f"{name}() got the size both as positional arguments and as size=")
    return (size,)


def _factory(fill: Any, name: str) -> Handler:
    """torch.zeros / ones / empty with a shape of tiles and sizes (reached through a tile among
    the sizes): hl.full's value, in torch's default dtype unless one is given."""

    def handler(
        tracer: Any,
        *dims: Any,
        size: Any = None,
        out: Any = None,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        pin_memory: bool = False,
        requires_grad: bool = False,
        memory_format: Any = None,
    ) -> DeviceValue:
        if out is not None:
            raise unsupported_argument(tracer, name, "out", "device code makes new values.")
        size = _size_given(name, dims, size)
        check_creation(
            tracer,
            name,
            layout=layout,
            device=device,
            pin_memory=pin_memory,
            requires_grad=requires_grad,
        )
        return tracer.hl_full(shape_arg(size), fill, dtype or torch.get_default_dtype())

    return handler


_creation_op(torch.zeros)(_factory(0, "torch.zeros"))
_creation_op(torch.ones)(_factory(1, "torch.ones"))
_creation_op(torch.empty)(_factory(0, "torch.empty"))


@_creation_op(torch.full)
def _full(
    tracer: Any,
    size: Any,
    fill_value: Any,
    *,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool = False,
    requires_grad: bool = False,
) -> DeviceValue:
    if out is not None:
        raise unsupported_argument(tracer, "torch.full", "out", "device code makes new values.")
    check_creation(
        tracer,
        "torch.full",
        layout=layout,
        device=device,
        pin_memory=pin_memory,
        requires_grad=requires_grad,
    )
    if dtype is None:  # torch's rule: the fill value's kind decides
        dtype = (
            torch.bool
            if isinstance(fill_value, bool)
            else torch.int64
            if isinstance(fill_value, int)
            else torch.get_default_dtype()
        )
    return tracer.hl_full(list(size), fill_value, dtype)


def _new(fill: Any, name: str) -> Handler:
    def handler(
        tracer: Any,
        x: Any,
        *dims: Any,
        size: Any = None,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        layout: Any = None,
        pin_memory: bool = False,
    ) -> DeviceValue:
        size = _size_given(name, dims, size)
        check_creation(
            tracer,
            name,
            layout=layout,
            device=device,
            pin_memory=pin_memory,
            requires_grad=requires_grad,
        )
        return tracer.hl_full(shape_arg(size), fill, dtype or _dtype_of(tracer, x))

    return handler


_creation_op(*tensor_methods("new_zeros"))(_new(0, "torch.Tensor.new_zeros"))
_creation_op(*tensor_methods("new_ones"))(_new(1, "torch.Tensor.new_ones"))
_creation_op(*tensor_methods("new_empty"))(_new(0, "torch.Tensor.new_empty"))


@_creation_op(*tensor_methods("new_full"))
def _new_full(
    tracer: Any,
    x: Any,
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
) -> DeviceValue:
    check_creation(
        tracer,
        "torch.Tensor.new_full",
        layout=layout,
        device=device,
        pin_memory=pin_memory,
        requires_grad=requires_grad,
    )
    return tracer.hl_full(list(size), fill_value, dtype or _dtype_of(tracer, x))


def _dtype_of(tracer: Any, x: Any) -> torch.dtype:
    """The dtype of a device value, or of a kernel argument's tensor without loading it
    (`x.new_zeros([tile])` on an argument reads only its dtype)."""
    if isinstance(x, HostTensor):
        return x.dtype
    return as_value(tracer, x).dtype


# -- random numbers: Philox seeded from the kernel's per-call seed (helion.frontend.rng) --------


def _random(sample: Handler, name: str) -> Handler:
    """torch.rand / torch.randn with a shape of tiles and sizes; `sample` refuses a generator and
    out= (device code draws from the kernel's per-call seed, into a new value)."""

    def handler(
        tracer: Any,
        *size: Any,
        generator: Any = None,
        out: Any = None,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        pin_memory: bool = False,
        requires_grad: bool = False,
    ) -> DeviceValue:
        check_creation(
            tracer,
            name,
            layout=layout,
            device=device,
            pin_memory=pin_memory,
            requires_grad=requires_grad,
        )
        return sample(tracer, *size, dtype=dtype, generator=generator, out=out)

    return handler


def _random_like(sample: Handler, name: str) -> Handler:
    """torch.rand_like / torch.randn_like: memory_format does not change a device value."""

    def handler(
        tracer: Any,
        x: Any,
        *,
        generator: Any = None,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        memory_format: Any = None,
    ) -> DeviceValue:
        check_creation(tracer, name, layout=layout, device=device, requires_grad=requires_grad)
        return sample(tracer, x, dtype=dtype, generator=generator)

    return handler


_creation_op(torch.rand)(_random(rng.torch_rand, "torch.rand"))
_creation_op(torch.randn)(_random(rng.torch_randn, "torch.randn"))
_creation_op(torch.rand_like)(_random_like(rng.torch_rand_like, "torch.rand_like"))
_creation_op(torch.randn_like)(_random_like(rng.torch_randn_like, "torch.randn_like"))
