"""`helion.runtime`'s exports (public Helion's list): the launchers and their helpers, `Kernel`
and `kernel`; and `BoundKernel.env`.

The backend-specific launchers are tested with their backends (helion-triton's and
helion-pallas' tests); here: that they exist, that importing them imports no backend, and
the calls that cannot work here raise clear errors.
"""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

EXPORTS = [
    "Config",
    "Kernel",
    "kernel",
    "OutputCodeOptions",
    "default_launcher",
    "default_pallas_launcher",
    "default_cute_launcher",
    "default_metal_launcher",
    "get_num_sm",
    "get_num_xcd",
    "set_triton_allocator",
    "cute_cuda_graph",
]


@pytest.mark.parametrize("name", EXPORTS)
def test_exported(name):
    assert getattr(helion.runtime, name) is not None
    from helion import runtime

    assert hasattr(runtime, name)


def test_kernel_and_Kernel():
    assert helion.runtime.Kernel is helion.Kernel
    # `helion.runtime.kernel` is the module of that name, and the decorator as well
    assert isinstance(helion.runtime.kernel, types.ModuleType)
    assert helion.runtime.kernel.Kernel is helion.Kernel

    @helion.runtime.kernel(backend="ref", autotune_effort="none")
    def twice(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] * 2
        return out

    assert isinstance(twice, helion.Kernel)
    x = torch.randn(37)
    torch.testing.assert_close(twice(x), x * 2)
    bare = helion.runtime.kernel(twice.fn)  # bare form: helion.kernel(fn)
    assert isinstance(bare, helion.Kernel) and bare.fn is twice.fn


def test_importing_the_launchers_imports_no_backend():
    code = (
        "import sys, helion, helion.runtime as r\n"
        "names = [r.default_launcher, r.default_pallas_launcher, r.default_cute_launcher,\n"
        "         r.default_metal_launcher, r.set_triton_allocator, r.cute_cuda_graph, r.kernel]\n"
        "loaded = [m for m in ('helion_triton', 'helion_pallas', 'helion_cute', 'triton',\n"
        "          'jax', 'cutlass') if m in sys.modules]\n"
        "print(loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def test_metal_launcher_raises():
    with pytest.raises(exc.BackendUnavailable, match="no Metal backend") as info:
        helion.runtime.default_metal_launcher(lambda: None, (1,), torch.zeros(3))
    assert info.value.backend == "metal"


def test_cute_launcher_needs_cuda_tensors():
    # without helion-cute: the registry says what to install; with it: CPU tensors are refused
    with pytest.raises(exc.BackendUnavailable) as info:
        helion.runtime.default_cute_launcher(lambda *args: None, torch.zeros(3))
    assert info.value.backend == "cute"
    if "argument 0 is on cpu" not in str(info.value):
        assert "helion-cute" in str(info.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_cute_cuda_graph_needs_cuda():
    with pytest.raises(exc.CuteBackendUnavailable, match="CUDA graphs"):
        helion.runtime.cute_cuda_graph(lambda: None)


def test_backends_without_a_launcher_say_so():
    from helion.backends import get_backend

    with pytest.raises(exc.BackendUnsupported, match="launching a kernel given by hand"):
        get_backend("ref").default_launcher(lambda: None, (1,))


# -- BoundKernel.env ------------------------------------------------------------------------------


def matmul_bias(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, tile_n])
        out[tile_m, tile_n] = acc + bias[tile_n]
    return out


def test_env_describes_the_bound_kernel():
    kernel = helion.kernel(matmul_bias, backend="ref", autotune_effort="none")
    x, w, bias = torch.randn(37, 45), torch.randn(45, 23), torch.randn(23)
    bound = kernel.bind((x, w, bias))
    env = bound.env
    assert env is bound.env  # one object per bound kernel
    assert env.kernel_name == "matmul_bias"
    assert env.device == torch.device("cpu") and env.backend == "ref"
    assert env.settings is bound.settings and env.config_spec is bound.config_spec
    assert env.index_dtype == torch.int32
    tiles = env.tunable_block_sizes()
    # the config's block_sizes, in order: m, n, k
    assert [info.size_hint for info in tiles] == [37, 23, 45]
    assert [info.config_index for info in tiles] == [0, 1, 2]
    assert len(env.config_spec.default_config()["block_sizes"]) == len(tiles)
    assert {arg.name for arg in env.tensor_args} >= {"x", "w", "bias", "out"}
    shapes = {arg.name: arg.shape for arg in env.tensor_args}
    assert shapes["x"] == (37, 45) and shapes["out"] == (37, 23)
    assert "matmul_bias" in repr(env) and "tile:37" in repr(env)
    with pytest.raises(AttributeError):
        env.device = torch.device("meta")  # read-only


def scaled(x: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0), block_size=16):
        out[tile] = x[tile] * scale
    return out


def test_env_fixed_block_sizes_and_scalars():
    kernel = helion.kernel(scaled, backend="ref", autotune_effort="none")
    bound = kernel.bind((torch.randn(50), 2.0))
    env = bound.env
    assert [info.kind for info in env.block_sizes] == ["fixed"]
    assert env.block_sizes[0].fixed_value == 16 and env.tunable_block_sizes() == []
    assert [arg.name for arg in env.scalar_args] == ["scale"]
    assert "float" in env.specialization_key
