"""How many processors a device has: `get_num_sm` and `get_num_xcd`.

Kernel host code calls these to size persistent grids::

    num_workers = helion.runtime.get_num_sm(x.device)
    for worker in hl.grid(num_workers):
        for row in hl.grid(worker, m, num_workers):
            ...

The count is an ordinary host int: the device code bakes it in as a constant, and the bound
kernel's guards compare it on every call (a different count traces and compiles a variant of
its own, as any other host int would).

This module imports only the standard library and torch, on purpose:
``BoundKernel.to_code(options=OutputCodeOptions(allow_helion_deps=False))`` copies the functions
a kernel's host code calls from here into the self-contained module it emits.
"""

from __future__ import annotations

import torch

#: What `get_num_sm` answers for a CPU device. Nothing that runs kernels on CPU runs their
#: programs in parallel (the ref backend, the Triton interpreter and Pallas' interpret mode all
#: run a grid one program after the other), so the count only decides how a persistent kernel
#: splits its work. A fixed count keeps the generated code and its results the same on every
#: machine; more than one makes a persistent loop's stride and its idle workers real; and few
#: keeps interpreted kernels fast. (The Triton backend's own persistent grids use 4 programs in
#: the interpreter too.)
CPU_NUM_SMS = 4

#: Compute units per XCD (accelerator complex die) of AMD CDNA architectures, by the base
#: architecture name torch reports (`gcnArchName`). Others count as one XCD.
CUS_PER_XCD = {
    "gfx940": 38,  # CDNA3: MI300 (early name)
    "gfx941": 38,
    "gfx942": 38,  # CDNA3: MI300X, MI300A, MI325X
    "gfx950": 32,  # CDNA4: MI350X, MI355X
}

# (device type, index) -> processor count: host code asks on every call of its kernel
_counts: dict[tuple[str, int], int] = {}


def get_num_sm(device: torch.device | str | int, *, reserved_sms: int = 0) -> int:
    """The number of streaming multiprocessors of ``device``, less ``reserved_sms``.

    The grid size of a persistent kernel: one program per SM. What each device type counts:

    * ``cuda``: the device's multiprocessors (`multi_processor_count`; compute units on ROCm).
    * ``xpu``: the device's Xe cores (`gpu_subslice_count`).
    * ``cpu``: :data:`CPU_NUM_SMS` (4), whatever the machine. Nothing runs kernel programs in
      parallel on CPU, so the count only decides how the work is split; see the constant.
    * ``xla`` / ``tpu``: 1. A Pallas TPU grid runs on one TensorCore, one step at a time.

    Args:
        device: A ``torch.device`` (``x.device``), a string such as ``"cuda:1"``, or a CUDA
            device index. A CUDA device without an index means the current device.
        reserved_sms: SMs to leave to other work (communication kernels running beside this
            one). The result is never below 1.

    Returns:
        The number of programs a persistent kernel should launch on ``device``.

    Raises:
        ValueError: ``reserved_sms`` is negative, or the device type has no known count.
        TypeError: ``reserved_sms`` is not an int.
    """
    if isinstance(reserved_sms, bool):
        raise TypeError(f"get_num_sm: reserved_sms must be an int, got {reserved_sms!r}")
    if not hasattr(type(reserved_sms), "__index__"):
        # (no import: the self-contained modules of to_code copy this function as written)
        raise TypeError(
            f"get_num_sm: reserved_sms must be an int, got {type(reserved_sms).__name__} "
            f"{reserved_sms!r}"
        )
    reserved_sms = reserved_sms.__index__()
    if reserved_sms < 0:
        raise ValueError(f"get_num_sm: reserved_sms must be >= 0, got {reserved_sms}")
    device = _as_device(device)
    if device.type == "cpu":
        count = CPU_NUM_SMS
    elif device.type in ("xla", "tpu"):
        count = 1
    elif device.type in ("cuda", "xpu"):
        index = _device_index(device)
        count = _counts.get((device.type, index), 0)
        if not count:
            count = _counts[(device.type, index)] = _query_sm_count(device.type, index)
    else:
        raise ValueError(
            f"get_num_sm: no processor count is known for a {device.type!r} device "
            "(known: cuda, xpu, cpu, xla)"
        )
    return max(count - reserved_sms, 1)


def get_num_xcd(device: torch.device | str | int) -> int:
    """The number of XCDs (accelerator complex dies) of an AMD Instinct ``device``.

    Kernels remap program ids so that neighbouring tiles share an XCD's L2 cache. Every device
    other than an AMD CDNA GPU (NVIDIA GPUs, CPUs, TPUs) counts as one XCD, as does an AMD GPU
    whose architecture is not in :data:`CUS_PER_XCD` or whose compute-unit count is not a whole
    number of XCDs (a partition mode, an unknown part). The count follows the compute units
    visible to this process, so a partitioned GPU reports only its own XCDs.

    Args:
        device: A ``torch.device``, a string such as ``"cuda:0"``, or a CUDA device index.

    Returns:
        The XCD count, at least 1.
    """
    device = _as_device(device)
    if device.type != "cuda" or getattr(torch.version, "hip", None) is None:
        return 1
    if not torch.cuda.is_available():
        return 1
    index = _device_index(device)
    properties = torch.cuda.get_device_properties(index)
    architecture = str(getattr(properties, "gcnArchName", "")).split(":")[0]
    per_xcd = CUS_PER_XCD.get(architecture)
    units = int(properties.multi_processor_count)
    if per_xcd is None or units < per_xcd or units % per_xcd:
        return 1
    return units // per_xcd


def _as_device(device: torch.device | str | int) -> torch.device:
    if isinstance(device, torch.device):
        return device
    if isinstance(device, bool):
        raise TypeError(f"expected a torch.device, a device string or an index, got {device!r}")
    if isinstance(device, int):
        return torch.device("cuda", device)
    return torch.device(device)


def _device_index(device: torch.device) -> int:
    if device.index is not None:
        return device.index
    module = getattr(torch, device.type)
    return int(module.current_device())


def _query_sm_count(device_type: str, index: int) -> int:
    if device_type == "cuda":
        return int(torch.cuda.get_device_properties(index).multi_processor_count)
    properties = torch.xpu.get_device_properties(index)
    count = getattr(properties, "gpu_subslice_count", None)
    if not count:
        raise ValueError(f"get_num_sm: the XPU device {index} does not report its Xe core count")
    return int(count)
