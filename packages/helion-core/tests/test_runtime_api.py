"""The runtime's public helpers: `helion.runtime.get_num_sm` / `get_num_xcd` (host code of
persistent kernels), `helion.OutputCodeOptions` with `BoundKernel.to_code`, and
`BoundKernel.get_cached_path` / `backend_cache_key`, on the core `ref` backend."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.runtime import hardware
from helion.testing.standalone import persistent_add


def persistent_count(x: torch.Tensor, reserve: int) -> torch.Tensor:
    """Each worker writes how many rows it handled: the split depends on the worker count."""
    m, _ = x.shape
    num_workers = helion.runtime.get_num_sm(x.device, reserved_sms=reserve)
    counts = torch.zeros([num_workers], dtype=torch.int32, device=x.device)
    for worker in hl.grid(num_workers):
        for row in hl.grid(m):
            if row % num_workers == worker:
                counts[worker] = counts[worker] + 1
    return counts


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def _kernel(fn, backend: str = "ref", **settings):
    settings.setdefault("autotune_effort", "none")
    return helion.kernel(fn, backend=backend, **settings)


# -- get_num_sm / get_num_xcd -------------------------------------------------------------------


def test_get_num_sm_on_cpu_is_a_fixed_count() -> None:
    cpu = torch.device("cpu")
    assert helion.runtime.get_num_sm(cpu) == hardware.CPU_NUM_SMS == 4
    assert helion.runtime.get_num_sm("cpu") == 4
    assert helion.runtime.get_num_sm(cpu, reserved_sms=1) == 3
    assert helion.runtime.get_num_sm(cpu, reserved_sms=100) == 1  # never below one worker
    assert helion.runtime.get_num_sm(torch.empty(0).device) == 4


def test_get_num_sm_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="reserved_sms must be >= 0"):
        helion.runtime.get_num_sm("cpu", reserved_sms=-1)
    with pytest.raises(ValueError, match="no processor count is known for a 'meta' device"):
        helion.runtime.get_num_sm(torch.device("meta"))
    with pytest.raises(TypeError):
        helion.runtime.get_num_sm("cpu", 1)  # type: ignore[misc]  # reserved_sms is keyword-only


def test_get_num_sm_reserved_sms_must_be_an_int() -> None:
    """A float reserved_sms gave a float count (2.5 workers), True counted as 1."""
    for bad in (1.5, True, "2"):
        with pytest.raises(TypeError, match="reserved_sms must be an int"):
            helion.runtime.get_num_sm("cpu", reserved_sms=bad)  # type: ignore[arg-type]
    assert helion.runtime.get_num_sm("cpu", reserved_sms=torch.tensor(1)) == 3  # an index


def test_get_num_sm_on_tpu_is_one() -> None:
    assert helion.runtime.get_num_sm(torch.device("xla", 0)) == 1


def test_get_num_xcd_is_one_off_amd() -> None:
    assert helion.runtime.get_num_xcd(torch.device("cpu")) == 1
    assert helion.runtime.get_num_xcd("cpu") == 1
    if torch.cuda.is_available() and torch.version.hip is None:
        assert helion.runtime.get_num_xcd(torch.device("cuda")) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_get_num_sm_on_cuda_counts_multiprocessors() -> None:
    expected = torch.cuda.get_device_properties(0).multi_processor_count
    assert helion.runtime.get_num_sm(torch.device("cuda", 0)) == expected
    assert helion.runtime.get_num_sm(0, reserved_sms=2) == expected - 2


def test_persistent_kernel_runs_on_ref() -> None:
    x, y = torch.randn(13, 7), torch.randn(13, 7)
    kernel = _kernel(persistent_add)
    torch.testing.assert_close(kernel(x, y), x + y)
    # the worker count is a constant of the device code: the grid has 4 programs
    assert _grid_size(kernel.bind((x, y)).ir) == 4


def _grid_size(ir) -> int:
    [loop] = [node for node in ir.body.nodes if node.op.name == "grid_loop"]
    [end] = loop.attrs["ends"]
    return end


def test_persistent_kernel_runs_in_eager_mode() -> None:
    x, y = torch.randn(13, 7), torch.randn(13, 7)
    torch.testing.assert_close(_kernel(persistent_add, ref_mode="eager")(x, y), x + y)


def test_worker_count_from_host_code_is_guarded() -> None:
    """The count is a host int the device code bakes in: a call whose host code computes
    another count (same specialization key: `reserve` is a runtime int) gets a variant traced
    for it, never the code of the first count."""
    x = torch.randn(10, 3)
    kernel = _kernel(persistent_count)
    assert kernel(x, 0).tolist() == [3, 3, 2, 2]  # 4 workers
    assert kernel(x, 1).tolist() == [4, 3, 3]  # 3 workers
    assert kernel(x, 0).tolist() == [3, 3, 2, 2]
    assert kernel(x, 3).tolist() == [10]  # one worker
    bound = kernel.bind((x, 0))
    assert bound is kernel.bind((x, 1))
    [variants] = bound._variants.values()
    assert sorted(_grid_size(variant.ir) for variant in variants) == [1, 3, 4]


# -- OutputCodeOptions and to_code --------------------------------------------------------------


def test_output_code_options_is_public() -> None:
    options = helion.OutputCodeOptions()
    assert helion.runtime.OutputCodeOptions is helion.OutputCodeOptions
    assert (options.allow_helion_deps, options.jax_fn) == (True, False)
    assert dataclasses.is_dataclass(options)
    assert helion.OutputCodeOptions(allow_helion_deps=False, jax_fn=True).jax_fn


def test_default_options_give_the_loaded_module() -> None:
    x = torch.randn(5, 3)
    bound = _kernel(add).bind((x, x))
    assert bound.to_code(options=helion.OutputCodeOptions()) == bound.to_code()
    assert bound.to_code(options=None) == bound.to_code()


@pytest.mark.parametrize(
    ("options", "option"),
    [
        (helion.OutputCodeOptions(allow_helion_deps=False), "allow_helion_deps=False"),
        (helion.OutputCodeOptions(jax_fn=True), "jax_fn=True"),
    ],
)
def test_ref_backend_refuses_export_options(options, option: str) -> None:
    x = torch.randn(5, 3)
    bound = _kernel(add).bind((x, x))
    with pytest.raises(exc.OutputCodeUnsupported) as raised:
        bound.to_code(options=options)
    assert option in str(raised.value)
    assert "'ref' backend" in str(raised.value)
    assert isinstance(raised.value, exc.BackendUnsupported)


def test_to_code_refuses_repro_caller() -> None:
    x = torch.randn(5, 3)
    with pytest.raises(exc.InvalidAPIUsage, match="emit_repro_caller"):
        _kernel(add).bind((x, x)).to_code(emit_repro_caller=True)


# -- get_cached_path and backend_cache_key ------------------------------------------------------


def test_ref_keeps_nothing_on_disk_and_keys_its_code() -> None:
    x = torch.randn(37, 19)
    bound = _kernel(add).bind((x, x))
    assert bound.get_cached_path() is None
    key = bound.backend_cache_key()
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    assert bound.backend_cache_key(bound.config_spec.default_config()) == key
    other = helion.Config(block_sizes=[8, 8])
    assert bound.backend_cache_key(other) != key
    assert bound.backend_cache_key(other) == bound.backend_cache_key(dict(other))


def test_cache_queries_follow_the_active_config() -> None:
    x = torch.randn(37, 19)
    bound = _kernel(add).bind((x, x))
    chosen = helion.Config(block_sizes=[16, 4])
    bound.set_config(chosen)
    assert bound.backend_cache_key() == bound.backend_cache_key(chosen)


def test_to_code_without_a_config_shows_the_config_a_call_runs() -> None:
    """`to_code()` and `compile_config()` with no config take the active config, else the
    kernel's only given config; the default config only when there is neither."""
    x = torch.randn(37, 19)
    given = helion.Config(block_sizes=[4, 2])
    bound = helion.kernel(add, backend="ref", config=given).bind((x, x))
    default = bound.to_code(bound.config_spec.default_config())
    assert bound.to_code() == bound.to_code(given) != default
    assert bound.compile_config().config == bound.normalize(given)
    chosen = helion.Config(block_sizes=[8, 16])
    bound.set_config(chosen)
    assert bound.to_code() == bound.to_code(chosen)
    two = helion.kernel(add, backend="ref", configs=[given, chosen]).bind((x, x))
    assert two.to_code() == two.to_code(two.config_spec.default_config())


def test_effort_none_prints_the_implicit_config_as_public_helion_does(capsys) -> None:
    x, y = torch.randn(13), torch.randn(13)
    kernel = _kernel(add)
    kernel(x, y)
    err = capsys.readouterr().err
    bound = kernel.bind((x, y))
    expected = (
        f"Using implicit config: @helion.kernel(config={bound._config!r}, static_shapes=True)"
    )
    assert expected in err, err
    dynamic = helion.Settings(static_shapes=False)
    assert bound.format_kernel_decorator(bound._config, dynamic).endswith("static_shapes=False)")


def test_helion_exports_public_helions_top_level_names() -> None:
    """`helion.__all__` is public Helion's list, and `from helion import *` binds each name."""
    assert sorted(helion.__all__) == sorted(
        [
            "Config",
            "Kernel",
            "OutputCodeOptions",
            "RefMode",
            "Settings",
            "aot_kernel",
            "cdiv",
            "exc",
            "from_cache",
            "jit",
            "kernel",
            "language",
            "next_power_of_2",
            "runtime",
        ]
    )
    namespace: dict = {}
    exec("from helion import *", namespace)
    assert set(helion.__all__) <= set(namespace)
    assert namespace["Kernel"] is helion.Kernel and namespace["runtime"] is helion.runtime


def test_aot_kernel_says_the_workflow_is_not_supported() -> None:
    with pytest.raises(exc.InvalidAPIUsage, match="aot_kernel is not supported") as raised:
        helion.aot_kernel(lambda x: x)
    assert "from_cache" in str(raised.value)


def test_kernel_carries_the_functions_code_globals_and_defaults() -> None:
    """As public Helion's Kernel (functools.update_wrapper plus these three)."""

    def scaled(x: torch.Tensor, factor: float = 2.0) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t] = x[t] * factor
        return out

    kernel = _kernel(scaled)
    assert kernel.__code__ is scaled.__code__
    assert kernel.__globals__ is scaled.__globals__
    assert kernel.__defaults__ == (2.0,)
    assert kernel.__wrapped__ is scaled and kernel.__name__ == "scaled"


def scaled_by_int(x: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] * n
    return out


def test_an_int_argument_beyond_int64_is_refused_by_name() -> None:
    """A kernel's int arguments are int64 on the device: 2**70 gave 'InternalError ... bug in
    Helion' on ref and a raw OverflowError on Triton, also after a warm call."""
    kernel = _kernel(scaled_by_int)
    x = torch.randn(13)
    torch.testing.assert_close(kernel(x, 3), x * 3)
    for value in (2**63, -(2**63) - 1, 2**70):
        with pytest.raises(exc.InvalidAPIUsage, match="does not fit int64"):
            kernel(x, value)
    torch.testing.assert_close(kernel(x, 2**63 - 1), x * float(2**63 - 1))


def test_assigning_configs_checks_them_and_applies_to_later_calls() -> None:
    kernel = helion.kernel(add, backend="ref")
    x = torch.randn(37)
    kernel.configs = [{"block_sizes": [8]}]
    kernel(x, x)
    assert kernel.bind((x, x))._config == kernel.bind((x, x)).normalize({"block_sizes": [8]})
    kernel.configs = [helion.Config(block_sizes=[16])]  # a shape already called picks it up
    torch.testing.assert_close(kernel(x, x), x + x)
    assert kernel.bind((x, x))._config["block_sizes"] == [16]
    with pytest.raises(exc.InvalidConfig, match="item 0 is an int"):
        kernel.configs = [5]
