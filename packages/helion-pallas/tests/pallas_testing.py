"""Helpers shared by the helion-pallas tests: kernels for both backends, comparisons, lowering."""

from __future__ import annotations

import functools
import random
from typing import Any
from typing import Callable
from typing import Sequence

import torch

import helion
from helion.runtime.config import Config


@functools.cache
def pallas_kernel(fn: Callable[..., Any]) -> helion.Kernel:
    return helion.kernel(fn, backend="pallas", autotune_effort="none")


@functools.cache
def ref_kernel(fn: Callable[..., Any]) -> helion.Kernel:
    return helion.kernel(fn, backend="ref", autotune_effort="none")


def clone(args: Sequence[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def assert_same(actual: Any, expected: Any, *, atol: float = 1e-4, rtol: float = 1e-4) -> None:
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, (
        actual.shape,
        actual.dtype,
    )
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(actual.float(), expected.float(), atol=atol, rtol=rtol)
    else:
        torch.testing.assert_close(actual, expected, atol=0, rtol=0)


def configs(bound: Any, seeds: Sequence[int]) -> list[Config]:
    spec = bound.config_spec
    return [spec.default_config()] + [spec.random_config(random.Random(seed)) for seed in seeds]


def run_both(
    fn: Callable[..., Any], args: Sequence[Any], config: Config | None = None
) -> tuple[Any, Any, Config]:
    """Run `fn` on the Pallas backend under `config` (default: its default config) and on the
    ref backend under the same config; returns (pallas result, ref result, config)."""
    pallas = pallas_kernel(fn).bind(tuple(args))
    ref = ref_kernel(fn).bind(tuple(args))
    config = pallas.config_spec.default_config() if config is None else config
    actual = pallas.compile_config(config)(*clone(args))
    expected = ref.compile_config(ref.normalize(config))(*clone(args))
    return actual, expected, config


def lower_for_platform(bound: Any, config: Config, platform: str) -> str:
    """Generate the kernel for `platform` ("cuda" or "tpu") and lower it with JAX's
    cross-platform lowering, which runs Pallas' Triton (or Mosaic) lowering without the device.
    Returns the lowered StableHLO text."""
    import jax
    import jax.numpy as jnp

    from helion_pallas.codegen import generate_source
    from helion_pallas.tunables import PallasOptions
    from helion_pallas.writer import jnp_dtype

    target = {"cuda": "gpu", "tpu": "tpu"}[platform]
    source, entry, _ = generate_source(bound.ir, PallasOptions.parse(config, target))
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<pallas {platform} test>", "exec"), namespace)

    def dtype(d: torch.dtype) -> Any:
        return getattr(jnp, jnp_dtype(d).removeprefix("jnp."))

    specs = [jax.ShapeDtypeStruct(t.shape, dtype(t.dtype)) for t in bound.ir.tensor_args]
    specs += [jax.ShapeDtypeStruct((), dtype(s.dtype)) for s in bound.ir.scalar_args]
    checks = [
        jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton"),
        jax.export.DisabledSafetyCheck.custom_call("tpu_custom_call"),
    ]
    with jax.enable_x64(True):
        exported = jax.export.export(
            jax.jit(namespace[entry]), platforms=[platform], disabled_checks=checks
        )(*specs)
    return exported.mlir_module()


def gpu_config_spec(bound: Any) -> Any:
    """The ConfigSpec the kernel would have on a CUDA device (tunables depend on the target)."""
    from helion.passes.config_spec import derive_config_spec

    spec = derive_config_spec(
        bound.ir, bound._user_tunables, min_dot_size=bound.backend.min_dot_size
    )
    bound.backend.tunables(bound.ir, spec, torch.device("cuda"))
    return spec


def case_params(cases: Sequence[Any], refusal: Callable[[Any], str | None]) -> list[Any]:
    """pytest params of conformance cases, each with its id; a case that ``refusal`` gives a
    reason for is a strict xfail raising ``BackendUnsupported`` (Pallas' check() refuses it), so
    the test notices when support comes."""
    import pytest

    from helion import exc

    params = []
    for case in cases:
        reason = refusal(case)
        marks = ()
        if reason is not None:
            marks = (pytest.mark.xfail(raises=exc.BackendUnsupported, strict=True, reason=reason),)
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params
