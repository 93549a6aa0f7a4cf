"""The tracing runs of a kernel's host code, which never change its arguments.

A bound kernel runs its host code up to the device loops to trace them: once when it is bound
(`BoundKernel._discover`), and once for each config it compiles apart from a call
(`compile_config`, `to_code`, `set_config`, every autotuning candidate). Those runs must leave
the caller's arguments as they are: host code may write into them (``x.mul_(2)``,
``out.zero_()``, ``xs.append(t)``), and a call of the kernel applies that once, in its own run.

`run_host_for_trace` runs host code at one of three levels, the first that works:

1. ``ARGUMENTS``: on the arguments themselves (containers copied), under a dispatch mode
   (`_WriteGuard`) that stops the run before any op writes into the memory of an argument (the
   argument, a view of it) or draws random numbers. Host code that only reads its arguments and
   makes its outputs, the common kind, runs as it will in a call, at no extra cost (and host
   code that sets up something outside the kernel on them, such as the rendezvous of
   helion-distributed's symmetric memory, keeps working).
2. ``FAKE``: on fake tensors (torch's ``FakeTensorMode``: the shape, strides, dtype, device
   and aliasing of each argument, no data), as public Helion traces all host code.
3. ``COPIES``: on scratch copies of the arguments (their data copied, on their device), for
   host code that writes and also reads tensor data (``int(x.sum())``, ``x.tolist()``), which
   fake tensors cannot give.

At every level, a tensor that is not an argument but that host code writes in place (a
module-level tensor: ``STEPS.add_(1)``) has its data put back after the run.

The level a bound kernel's host code needed is remembered: later runs start there. Either way,
the values the host code hands its device loops are given back as the real arguments where they
are the arguments (or views of them), so the tracer and the guards see the very tensors a call
passes.
"""

from __future__ import annotations

import contextlib
from typing import Any
from typing import Callable
from typing import Iterator

import torch

from helion.containers import container_items
from helion.containers import iter_tensors
from helion.containers import rebuild_container

# the levels of a tracing run, in the order they are tried
ARGUMENTS, FAKE, COPIES = 0, 1, 2

# tensor types a fake tensor or a scratch copy stands in for with its aliasing kept
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


class StandIns:
    """What one tracing run passes host code for a call's arguments (``args``: containers
    copied; tensors kept at level ``ARGUMENTS``, else replaced by fake tensors of
    ``fake_mode`` or by scratch copies), and the way back from a value the host code made of
    them to the real arguments (`real`)."""

    def __init__(self, args: tuple, level: int, fake_mode: Any = None) -> None:
        self._level = level
        self._mode = fake_mode
        # id(stand-in) -> (the argument, the stand-in's storage offset as made)
        self._real_of: dict[int, tuple[torch.Tensor, int]] = {}
        # a stand-in storage -> (an argument on the real storage, the stand-in's byte offset in it)
        self._storages: dict[int, tuple[torch.Tensor, int]] = {}
        self._keep: list[torch.Tensor] = []  # the stand-ins, alive while their ids are keys
        self._copies: dict[int, tuple[torch.Tensor, int]] = {}  # real storage -> (copy, offset)
        if level == COPIES:
            self._copy_storages(args)
        self.args = tuple(self._stand_in(arg) for arg in args)

    # -- making stand-ins ----------------------------------------------------------------------

    def _stand_in(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if self._level == ARGUMENTS:
                return value
            stand_in = self._fake(value) if self._level == FAKE else self._scratch(value)
            self._real_of[id(stand_in)] = (value, stand_in.storage_offset())
            self._keep.append(stand_in)
            return stand_in
        items = container_items(value)
        if items is not None:  # a copy, so that host code appending to a list leaves it be
            return rebuild_container(value, [self._stand_in(item) for _, _, item in items])
        return value

    def _fake(self, tensor: torch.Tensor) -> torch.Tensor:
        mode = self._mode
        if type(tensor) in _PLAIN_TENSORS and tensor.device.type != "meta":
            fake = mode.from_tensor(tensor)  # views of one storage stay views of one storage
            self._storages[_storage_key(fake)] = (tensor, 0)
            return fake
        # a tensor subclass, or a fake tensor of another mode (a kernel bound under one)
        with mode:
            return torch.empty_strided(
                tuple(tensor.shape),
                tuple(tensor.stride()),
                dtype=tensor.dtype,
                device=tensor.device,
            )

    def _copy_storages(self, args: tuple) -> None:
        """Copy the bytes of each argument storage that the tensor arguments span (once per
        storage: arguments that alias each other stay aliased in their copies)."""
        spans: dict[int, list[Any]] = {}
        for tensor in iter_tensors(args):
            if type(tensor) not in _PLAIN_TENSORS:
                continue
            size = tensor.element_size()
            start = tensor.storage_offset() * size
            extent = 0
            if tensor.numel():
                extent = (
                    1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True))
                ) * size
            span = spans.setdefault(_storage_key(tensor), [start, start + extent, tensor])
            span[0], span[1] = min(span[0], start), max(span[1], start + extent)
        for key, (low, high, tensor) in spans.items():
            low -= low % 16  # every element size divides the offset of the copy
            storage = torch.empty(0, dtype=torch.uint8, device=tensor.device)
            storage.set_(tensor.untyped_storage())
            self._copies[key] = (storage[low:high].clone(), low)

    def _scratch(self, tensor: torch.Tensor) -> torch.Tensor:
        copied = self._copies.get(_storage_key(tensor)) if type(tensor) in _PLAIN_TENSORS else None
        if copied is None:  # a tensor subclass: a copy of its own
            scratch = torch.empty_strided(
                tuple(tensor.shape),
                tuple(tensor.stride()),
                dtype=tensor.dtype,
                device=tensor.device,
            )
            with contextlib.suppress(RuntimeError, TypeError, NotImplementedError):
                scratch.copy_(tensor)
            return scratch
        data, low = copied
        scratch = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
        offset = tensor.storage_offset() - low // tensor.element_size()
        scratch.set_(data.untyped_storage(), offset, tensor.shape, tensor.stride())
        self._storages[_storage_key(scratch)] = (tensor, low)
        return scratch

    # -- back to the arguments -----------------------------------------------------------------

    def real(self, value: Any) -> Any:
        """``value`` (a value the host code hands its device loops) with each stand-in of an
        argument replaced by the argument, and each view of one by that view of the argument;
        tensors the host code made itself stay as they are (the tracer reads their metadata)."""
        if isinstance(value, torch.Tensor):
            if self._level == ARGUMENTS:
                return value
            found = self._real_of.get(id(value))
            if found is not None and _same_layout(value, *found):
                return found[0]
            return self._real_view(value)
        items = container_items(value)
        if items is not None:
            return rebuild_container(value, [self.real(item) for _, _, item in items])
        return value

    def _real_view(self, value: torch.Tensor) -> torch.Tensor:
        try:
            found = self._storages.get(_storage_key(value))
        except (RuntimeError, NotImplementedError):
            return value
        if found is None:
            return value
        argument, low = found
        if value.dtype != argument.dtype:
            return value
        offset = value.storage_offset() + low // value.element_size()
        try:
            return argument.as_strided(tuple(value.shape), tuple(value.stride()), offset)
        except RuntimeError:
            return value


def _storage_key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


def _same_layout(value: torch.Tensor, argument: torch.Tensor, offset: int) -> bool:
    """Whether host code left the stand-in of ``argument`` (made at storage offset ``offset``)
    as it was (in-place ops that change the layout, such as ``x.t_()``, leave another tensor)."""
    return (
        value.shape == argument.shape
        and value.stride() == argument.stride()
        and value.dtype == argument.dtype
        and value.storage_offset() == offset
    )


def _key_or_none(tensor: torch.Tensor) -> int | None:
    try:
        return _storage_key(tensor)
    except (RuntimeError, NotImplementedError):  # a tensor without a storage
        return None


def _tensors_in(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, torch.Tensor):
                yield item


class _WouldChange(Exception):
    """Raised by `_WriteGuard` before an op that a run on the arguments must not run."""


_guard_class: type | None = None


def _write_guard(args: tuple, *, stop_on_random: bool = True) -> Any:
    """A `_WriteGuard` of the tensors in ``args`` (its class is made on first use)."""
    global _guard_class
    if _guard_class is None:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from torch.utils._python_dispatch import TorchDispatchMode

        seeded = torch.Tag.nondeterministic_seeded

        class _WriteGuard(TorchDispatchMode):
            """Host code on the real arguments: every op runs as it is, except that the run
            stops (`_WouldChange`) before an op writes into the memory of an argument (the
            argument, a view of it, any tensor on its storage), or draws random numbers (which
            would advance the caller's generator). A write into a tensor that is neither an
            argument nor made by the run (a module's global) runs, and `restore` puts that
            tensor's data back afterwards."""

            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return False  # torch's default wraps the dispatch in Dynamo's (an import: seconds)

            def __init__(self, protected: set[int], stop_on_random: bool) -> None:
                super().__init__()
                self.protected = protected  # the storages of the arguments
                self.stop_on_random = stop_on_random
                self.stopped = False
                self.created: set[int] = set()  # the storages this run allocated
                # storage -> (it, a copy of its data before this run first wrote it): tensors
                # that are not arguments (a module's global, a closure's) written by host code
                self.saved: dict[int, tuple[Any, Any]] = {}

            def restore(self) -> None:
                """Put back the data of the storages this run wrote that it did not make."""
                for storage, copy in self.saved.values():
                    storage.copy_(copy)
                self.saved.clear()

            def stop(self) -> None:
                self.stopped = True  # kept: host code may catch the exception
                raise _WouldChange

            def __torch_dispatch__(
                self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
            ) -> Any:
                kwargs = kwargs or {}
                if self.stop_on_random and seeded in func.tags:
                    self.stop()
                schema = func._schema
                if schema.is_mutable:
                    for position, argument in enumerate(schema.arguments):
                        info = argument.alias_info
                        if info is None or not info.is_write:
                            continue
                        if argument.name in kwargs:
                            written = kwargs[argument.name]
                        elif position < len(args):
                            written = args[position]
                        else:
                            continue
                        for tensor in _tensors_in(written):
                            key = _key_or_none(tensor)
                            if key in self.protected:
                                self.stop()
                            if (
                                key is not None
                                and key not in self.created | self.saved.keys()
                                and not isinstance(tensor, FakeTensor)
                            ):
                                storage = tensor.untyped_storage()
                                with unset_fake_temporarily():  # a real copy under FAKE
                                    self.saved[key] = (storage, storage.clone())
                result = func(*args, **kwargs)
                inputs = {_key_or_none(t) for t in _tensors_in(args)}
                inputs.update(_key_or_none(t) for t in _tensors_in(list(kwargs.values())))
                for tensor in _tensors_in(result):
                    key = _key_or_none(tensor)
                    if key is not None and key not in inputs:
                        self.created.add(key)
                return result

        _guard_class = _WriteGuard
    protected = {_key_or_none(tensor) for tensor in iter_tensors(args)}
    protected.discard(None)
    return _guard_class(protected, stop_on_random)


def _without(unset_fake: Callable[[], Any]) -> Callable[[], Any]:
    """The device call's way out of a FAKE run: fake mode off, and the guard above it off."""
    from torch.utils._python_dispatch import _pop_mode_temporarily

    @contextlib.contextmanager
    def modes_off() -> Iterator[None]:
        with unset_fake(), _pop_mode_temporarily():
            yield

    return modes_off


class _Reached(Exception):
    """What stops a tracing run once its device call is done (raised past the host code)."""


def run_host_for_trace(
    make_host: Callable[[Callable[..., None]], Callable[..., Any]],
    enter_mode: Callable[[], contextlib.AbstractContextManager],
    args: tuple,
    on_device: Callable[[tuple, tuple], None],
    *,
    level: int = ARGUMENTS,
) -> int:
    """Run host code for tracing without changing ``args``, from ``level`` on (see the module).

    ``make_host(device_call)`` builds the host function whose device loops call
    ``device_call``; ``enter_mode()`` enters the host mode of one run (a fresh one per run:
    it counts the tunables registered). When the host code reaches its device loops,
    ``on_device(values, args)`` gets the values it passes them (with the arguments given back,
    `StandIns.real`), outside the dispatch modes of the run, and the run stops there.

    Returns the level that ran (the caller starts the next run there). Errors of the host code
    run on the arguments or on copies, and errors raised past the device loops (tracing,
    compiling), are raised as they are.
    """
    reached: list[bool] = []

    guard = None

    def device_call_in(stand_ins: StandIns, modes_off: Callable[[], Any]) -> Callable[..., None]:
        def device_call(*values: Any) -> None:
            if guard is not None and guard.stopped:
                raise _WouldChange  # host code went on past the guard's stop: not traced
            reached.append(True)
            with modes_off():
                on_device(tuple(stand_ins.real(value) for value in values), args)
            raise _Reached

        return device_call

    from torch.utils._python_dispatch import _pop_mode_temporarily

    if level == ARGUMENTS:
        guard = _write_guard(args)
        stand_ins = StandIns(args, ARGUMENTS)
        host = make_host(device_call_in(stand_ins, _pop_mode_temporarily))
        try:
            with guard, enter_mode():
                host(*stand_ins.args)
        except _Reached:
            pass
        except Exception:
            # an error of the host code itself, or one after the guard stopped it (host code
            # that caught the guard's exception and went on)
            if not guard.stopped:
                raise
        finally:
            guard.restore()
        if not guard.stopped:
            return ARGUMENTS
        guard = None
        level = FAKE
    if level == FAKE:
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from torch.utils._python_dispatch import _disable_current_modes

        # fake mode reads the real tensors host code takes from globals, and writes them too:
        # the guard on top puts their data back
        guard = _write_guard((), stop_on_random=False)
        try:
            with _disable_current_modes(), torch._C._DisableFuncTorch():
                mode = FakeTensorMode(allow_non_fake_inputs=True)
                stand_ins = StandIns(args, FAKE, mode)
                host = make_host(device_call_in(stand_ins, _without(unset_fake_temporarily)))
                with mode, guard, enter_mode():
                    host(*stand_ins.args)
            return FAKE
        except _Reached:
            return FAKE
        except Exception:
            if reached:
                raise
        finally:
            guard.restore()
            # the host code reads tensor data, or does what fake tensors cannot: on copies
            # (where an error of the host code itself is raised again, on real data)
    devices = sorted({t.device.index or 0 for t in iter_tensors(args) if t.device.type == "cuda"})
    # random numbers drawn in host code: the caller's generators are left as they were
    with torch.random.fork_rng(devices=devices), torch._C._DisableFuncTorch():
        stand_ins = StandIns(args, COPIES)
        # nothing to stop for (the arguments are copies); tensors that are not arguments, such
        # as a module's globals, are put back as the ARGUMENTS level puts them back
        guard = _write_guard((), stop_on_random=False)
        host = make_host(device_call_in(stand_ins, _pop_mode_temporarily))
        try:
            with guard, enter_mode(), contextlib.suppress(_Reached):
                host(*stand_ins.args)
        finally:
            guard.restore()
    return COPIES
