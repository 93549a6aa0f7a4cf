"""32-bit atomics on signal-pad words, for code that runs on the host (the ref backend, eager
mode, host barriers).

On CPU the words are shared memory mapped into several processes, so plain torch reads and writes
are not enough for read-modify-write operations (two ranks adding to one word would lose an
update). ``libatomic`` exports out-of-line ``__atomic_*_4`` functions; called through ctypes they
are real, sequentially consistent atomics on any address. Without libatomic we fall back to plain
loads and stores, which is still correct for the single-writer handshakes our protocols use (a
slot is only ever written by the side whose turn it is), and say so in ``ATOMICS``.

Words on other devices (the ref backend running on CUDA tensors) go through torch indexing,
with the same single-writer caveat.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import torch

_SEQ_CST = 5

ATOMICS = "none"
_lib = None
for _name in ("libatomic.so.1", ctypes.util.find_library("atomic")):
    if not _name:
        continue
    try:
        _lib = ctypes.CDLL(_name)
        break
    except OSError:
        continue

if _lib is not None:
    _load = _lib.__atomic_load_4
    _load.restype = ctypes.c_int32
    _load.argtypes = [ctypes.c_void_p, ctypes.c_int]
    _store = _lib.__atomic_store_4
    _store.restype = None
    _store.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int]
    _xchg = _lib.__atomic_exchange_4
    _xchg.restype = ctypes.c_int32
    _xchg.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int]
    _add = _lib.__atomic_fetch_add_4
    _add.restype = ctypes.c_int32
    _add.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int]
    _cas = _lib.__atomic_compare_exchange_4
    _cas.restype = ctypes.c_bool
    _cas.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int, ctypes.c_int]
    ATOMICS = "libatomic"


def _to_i32(value: int) -> int:
    value = int(value) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class Words:
    """The 32-bit words of one tensor, addressed by flat element offset from its first element,
    with atomic load / store / exchange / add / compare-and-swap."""

    __slots__ = ("base", "flat", "host", "tensor")

    def __init__(self, tensor: torch.Tensor) -> None:
        if tensor.element_size() != 4 or tensor.dtype.is_floating_point:
            raise TypeError(f"signal pads hold 32-bit integers, got a {tensor.dtype} tensor")
        self.tensor = tensor
        self.host = tensor.device.type == "cpu" and _lib is not None
        self.base = tensor.data_ptr()
        self.flat = None
        if not self.host:
            count = tensor.untyped_storage().nbytes() // 4 - tensor.storage_offset()
            self.flat = tensor.as_strided((count,), (1,))

    def load(self, offset: int) -> int:
        if self.host:
            return int(_load(self.base + 4 * offset, _SEQ_CST))
        return int(self.flat[offset].item())

    def store(self, offset: int, value: int) -> None:
        if self.host:
            _store(self.base + 4 * offset, _to_i32(value), _SEQ_CST)
        else:
            self.flat[offset] = int(value)

    def exchange(self, offset: int, value: int) -> int:
        if self.host:
            return int(_xchg(self.base + 4 * offset, _to_i32(value), _SEQ_CST))
        old = self.load(offset)
        self.store(offset, value)
        return old

    def add(self, offset: int, value: int) -> int:
        if self.host:
            return int(_add(self.base + 4 * offset, _to_i32(value), _SEQ_CST))
        old = self.load(offset)
        self.store(offset, old + int(value))
        return old

    def cas(self, offset: int, expected: int, desired: int) -> int:
        """Write ``desired`` if the word holds ``expected``; return the value it held."""
        if self.host:
            slot = ctypes.c_int32(_to_i32(expected))
            _cas(self.base + 4 * offset, ctypes.byref(slot), _to_i32(desired), _SEQ_CST, _SEQ_CST)
            return int(slot.value)
        old = self.load(offset)
        if old == _to_i32(expected):
            self.store(offset, desired)
        return old
