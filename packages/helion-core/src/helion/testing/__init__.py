"""Conformance cases for Helion backends: kernels that every backend must run like the ref backend
and PyTorch do, with the inputs and the checks, defined once for core's tests and every backend
package's (first-party or third-party plugin).

    from helion.testing import atomics, shared_block_size

    @pytest.mark.parametrize("case", atomics.ATOMIC_CASES, ids=lambda case: case.id)
    def test_atomic_duplicates(case):
        atomics.check_atomic_case(case, "mybackend")

- :mod:`helion.testing.atomics`: atomics whose lanes hit the same element (each lane must read
  the value just before its own update), checked against a lane-by-lane simulation.
- :mod:`helion.testing.shared_block_size`: one ``hl.register_block_size`` sizing several tiles in
  scope at once (an outer and an inner loop, two dimensions of one tile, ...), checked against
  PyTorch under the default config and random ones.
- :mod:`helion.testing.merged_dims`: a dimension ``c * block`` (``hl.arange(tile.block_size *
  2)``, public Helion's int4 GEMM) on partial tiles, whose padded lanes must stay out of sums
  and stores, checked against PyTorch under the default config, random ones and fixed block
  sizes.

A check raises ``AssertionError`` naming the case, the backend and the config on a wrong result,
and skips the test (``pytest.skip`` under pytest, else ``unittest.SkipTest``) when the backend is
not installed or cannot run here. A name that no installed plugin provides and that is not a
first-party backend (a misspelt one) raises ``helion.exc.UnknownBackend`` instead of skipping.
``import helion`` does not import this package, and it does not import pytest.
"""

from __future__ import annotations

import sys
import unittest
from typing import Any
from typing import Callable
from typing import Sequence

import torch

__all__ = ["assert_same", "bind", "configs_to_try", "kernel_for", "require_backend"]


def require_backend(name: str) -> None:
    """Skip the calling test when backend ``name`` is not installed or cannot run here (the
    reason names the backend and what to install); return quietly when it can run.

    Raises:
        helion.exc.UnknownBackend: No installed plugin provides ``name`` and it is not a
            first-party backend: a misspelt name fails the test instead of skipping it.
    """
    from helion import backends
    from helion import exc

    try:
        backends.get_backend(name)
    except exc.UnknownBackend:
        raise
    except exc.BackendUnavailable as error:
        reason = f"backend {name!r} is not usable here: {error}"
        pytest = sys.modules.get("pytest")
        if pytest is not None:
            pytest.skip(reason)  # reported at the test's line; never imported from here
        raise unittest.SkipTest(reason) from None


def kernel_for(fn: Callable[..., Any], backend: str) -> Any:
    """``fn`` (a plain kernel function) as a kernel of ``backend`` under its default config, or
    in eager mode (``ref_mode="eager"``) for ``backend == "eager"``; skips as `require_backend`
    does when the backend cannot run here."""
    import helion

    if backend == "eager":
        return helion.kernel(fn, ref_mode="eager")
    require_backend(backend)
    return helion.kernel(fn, backend=backend, autotune_effort="none")


def bind(fn: Callable[..., Any], backend: str, args: Sequence[Any]) -> Any:
    """``fn`` (a plain kernel function) as a kernel of ``backend``, bound to ``args``; run it
    with ``.compile_config(config)(*args)``. Float32 products are computed in full precision
    (``dot_precision="ieee"``): the cases compare with PyTorch's float32 at tight tolerances,
    which TF32 (the default on GPUs) misses by about 1e-3 relative."""
    import helion

    kernel = helion.kernel(fn, backend=backend, autotune_effort="none", dot_precision="ieee")
    return kernel.bind(tuple(args))


def assert_same(
    actual: Any, expected: torch.Tensor, *, atol: float = 1e-4, rtol: float = 1e-4, what: str = ""
) -> None:
    """``actual`` is a tensor of ``expected``'s shape and dtype with the same values: floats
    within ``atol``/``rtol``, other dtypes exactly. The AssertionError's message starts with
    ``what``."""
    prefix = f"{what}: " if what else ""
    if not isinstance(actual, torch.Tensor):
        raise AssertionError(f"{prefix}expected a tensor, got {type(actual).__name__}")
    if not expected.dtype.is_floating_point:
        # integer results are exact: a relative tolerance would forgive off-by-one on large values
        atol = rtol = 0.0
    torch.testing.assert_close(
        actual.cpu(), expected.cpu(), atol=atol, rtol=rtol, msg=lambda m: f"{prefix}{m}"
    )


def configs_to_try(bound: Any, seeds: Sequence[int], overrides: Sequence[dict] = ()) -> list[Any]:
    """The default config of ``bound``, random ones drawn with ``seeds``, then the default with
    each of ``overrides`` applied (``{"block_sizes": [8]}``), normalized."""
    import random

    import helion

    spec = bound.config_spec
    default = spec.default_config()
    return [
        default,
        *(spec.random_config(random.Random(seed)) for seed in seeds),
        *(bound.normalize(helion.Config(**{**default, **extra})) for extra in overrides),
    ]
