"""The direct launch path of compiled kernels (`helion_triton.launcher.DirectLaunch`), with a
stand-in for Triton's JIT function and compiled kernel: CPU machines have no CUDA driver.

What it must hold: the first call of a specialization binds through the JIT function; later calls
with the same dtypes, alignments and int classes go straight to the compiled launcher with the
same arguments (the constexpr tail appended); anything Triton would specialize differently binds
again; profiler hooks and launcher signature changes fall back to the JIT path."""

from __future__ import annotations

import types

import torch

import helion
import helion.language as hl
from helion_triton.launcher import DirectLaunch


class FakeCompiled:
    def __init__(self, name: str, calls: list) -> None:
        self.name = name
        self.calls = calls
        self.function = f"function-of-{name}"
        self.packed_metadata = f"metadata-of-{name}"

    refuse = False

    def run(self, *args):
        if self.refuse:  # the launcher of another Triton version
            raise TypeError("function takes 12 positional arguments")
        self.calls.append(("direct", self.name, args))


class FakeJIT:
    """Compiles one FakeCompiled per distinct specialization it is called with."""

    arg_names = ["out", "x", "n", "BLOCK"]

    def __init__(self) -> None:
        self.fn = lambda: None
        self.calls: list = []
        self.compiled: dict = {}

    def __getitem__(self, grid):
        def call(*args, **kwargs):
            self.calls.append(("jit", grid, args, dict(kwargs)))
            key = tuple(
                (a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, torch.Tensor) else type(a)
                for a in args
            )
            return self.compiled.setdefault(key, FakeCompiled(f"k{len(self.compiled)}", self.calls))

        return call


@helion.kernel(backend="triton", autotune_effort="none")
def double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2
    return out


def make(hooks=None):
    jit = FakeJIT()
    driver = types.SimpleNamespace(get_current_device=lambda: 0, get_current_stream=lambda d: 77)
    knobs = hooks or types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    return jit, DirectLaunch(jit, driver=driver, runtime_knobs=knobs)


def kinds(calls):
    return [c[0] for c in calls]


def test_second_call_launches_the_compiled_kernel_with_the_constexpr_tail():
    jit, direct = make()
    out, x = torch.empty(40), torch.randn(40)
    direct[(3,)](out, x, 40, BLOCK=16, num_warps=4)
    direct[(5, 2)](out, x, 41, BLOCK=16, num_warps=4)
    assert kinds(jit.calls) == ["jit", "direct"]
    _, name, args = jit.calls[1]
    assert name == "k0"
    assert args == (
        5,
        2,
        1,
        77,
        "function-of-k0",
        "metadata-of-k0",
        None,
        None,
        None,
        out,
        x,
        41,
        16,
    )


def test_a_new_specialization_binds_again():
    jit, direct = make()
    out = torch.empty(40)
    direct[(1,)](out, torch.randn(40), 16, BLOCK=16)
    direct[(1,)](out, torch.randn(40, dtype=torch.float64), 16, BLOCK=16)  # dtype
    direct[(1,)](out, torch.randn(41)[1:], 16, BLOCK=16)  # 4-byte offset: not 16-byte aligned
    direct[(1,)](out, torch.randn(40), 2**40, BLOCK=16)  # an int that needs 64 bits
    direct[(1,)](out, torch.randn(40), 9, BLOCK=16)  # not divisible by 16 any more
    assert kinds(jit.calls) == ["jit"] * 5
    direct[(1,)](out, torch.randn(40), 24, BLOCK=16)  # same class as 9: direct
    assert kinds(jit.calls)[-1] == "direct"


def test_active_profiler_hooks_take_the_jit_path():
    hooks = types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    jit, direct = make(hooks)
    out, x = torch.empty(40), torch.randn(40)
    direct[(1,)](out, x, 40, BLOCK=16)
    hooks.launch_enter_hook = types.SimpleNamespace(calls=[])  # an empty chain calls nothing
    direct[(1,)](out, x, 40, BLOCK=16)
    hooks.launch_enter_hook = lambda metadata: None
    direct[(1,)](out, x, 40, BLOCK=16)
    assert kinds(jit.calls) == ["jit", "direct", "jit"]


def test_a_launcher_that_rejects_the_arguments_disables_the_direct_path():
    jit, direct = make()
    out, x = torch.empty(40), torch.randn(40)
    direct[(1,)](out, x, 40, BLOCK=16)
    jit.compiled[next(iter(jit.compiled))].refuse = True
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(1,)](out, x, 40, BLOCK=16)
    assert kinds(jit.calls) == ["jit", "jit", "jit"]
    assert not direct.enabled


def test_defaulted_parameters_keep_the_jit_path():
    jit, direct = make()
    out, x = torch.empty(40), torch.randn(40)
    direct[(1,)](out, x, 40)  # BLOCK not passed: the tail is unknown
    direct[(1,)](out, x, 40)
    assert kinds(jit.calls) == ["jit", "jit"]


# -- the launchers generated per grid, after the first direct launch --------------------------------


def test_a_grid_launcher_launches_as_the_general_path_does():
    jit, direct = make()
    out, x = torch.empty(40), torch.randn(40)
    direct[(3, 2)](out, x, 40, BLOCK=16, num_warps=4)  # binds
    direct[(3, 2)](out, x, 40, BLOCK=16, num_warps=4)  # direct, through `launch`
    assert (3, 2) not in direct._grid_launchers
    launcher = direct[(3, 2)]
    assert launcher is direct._grid_launchers[(3, 2)] and launcher is direct[(3, 2)]
    launcher(out, x, 40, BLOCK=16, num_warps=4)
    assert kinds(jit.calls) == ["jit", "direct", "direct"]
    assert jit.calls[1][2] == jit.calls[2][2]  # the same arguments to the compiled launcher
    # another grid gets its own launcher with its own dimensions
    direct[(7,)](out, x, 24, BLOCK=16, num_warps=4)
    assert jit.calls[-1][2][:3] == (7, 1, 1) and kinds(jit.calls)[-1] == "direct"


def test_a_grid_launcher_hands_what_it_does_not_know_to_the_general_path():
    jit, direct = make()
    out, x = torch.empty(40), torch.randn(40)
    direct[(1,)](out, x, 16, BLOCK=16)
    direct[(1,)](out, x, 16, BLOCK=16)
    launcher = direct[(1,)]
    launcher(out, torch.randn(41)[1:], 16, BLOCK=16)  # unaligned: a new specialization binds
    launcher(out, x, 16.0, BLOCK=16)  # a float where an int was: binds (Triton's fp32 slot)
    launcher(out, x, 2**40, BLOCK=16)  # 64-bit int: binds
    assert kinds(jit.calls) == ["jit", "direct", "jit", "jit", "jit"]
    launcher(out, torch.randn(41)[1:], 16, BLOCK=16)  # the unaligned specialization, now known
    launcher(out, torch.nn.Parameter(torch.randn(40)), 32, BLOCK=16)  # a subclass keys as a tensor
    assert kinds(jit.calls)[-2:] == ["direct", "direct"]
    assert len(direct._entries) == 4


def test_a_grid_launcher_takes_the_jit_path_while_a_profiler_hook_is_set():
    hooks = types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    jit, direct = make(hooks)
    out, x = torch.empty(40), torch.randn(40)
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(1,)](out, x, 40, BLOCK=16)
    hooks.launch_exit_hook = types.SimpleNamespace(calls=[])  # an empty chain: still direct
    direct[(1,)](out, x, 40, BLOCK=16)
    hooks.launch_exit_hook = lambda metadata: None
    direct[(1,)](out, x, 40, BLOCK=16)
    hooks.launch_exit_hook = None
    direct[(1,)](out, x, 40, BLOCK=16)
    assert kinds(jit.calls) == ["jit", "direct", "direct", "jit", "direct"]


def test_a_grid_launcher_follows_hook_chains_that_gain_and_lose_calls():
    """Triton 3.6's knobs hold two hook chains from the start: the grid launcher tests their
    lists of calls as they change in place, and an assigned hook as the general path does."""

    class Chain:
        def __init__(self) -> None:
            self.calls: list = []

    hooks = types.SimpleNamespace(launch_enter_hook=Chain(), launch_exit_hook=Chain())
    jit, direct = make(hooks)
    out, x = torch.empty(40), torch.randn(40)
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(1,)](out, x, 40, BLOCK=16)  # the grid launcher is built with the empty chains
    direct[(1,)](out, x, 40, BLOCK=16)
    hooks.launch_exit_hook.calls.append(lambda metadata: None)  # a profiler adds a hook
    direct[(1,)](out, x, 40, BLOCK=16)
    hooks.launch_exit_hook.calls.clear()
    direct[(1,)](out, x, 40, BLOCK=16)
    hooks.launch_enter_hook = lambda metadata: None  # a plain hook replaces the chain
    direct[(1,)](out, x, 40, BLOCK=16)
    hooks.launch_enter_hook = Chain()  # another, empty chain
    direct[(1,)](out, x, 40, BLOCK=16)
    assert kinds(jit.calls) == ["jit", "direct", "direct", "jit", "direct", "jit", "direct"]


def test_grids_that_are_not_small_int_tuples_or_too_many_use_the_general_path():
    jit, direct = make()
    out, x = torch.empty(40), torch.randn(40)
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(torch.tensor(2).item(),)](out, x, 40, BLOCK=16)  # a Python int: cached
    direct[(1.0,)]  # not an int grid: no launcher generated
    for n in range(100):
        direct[(n + 3,)](out, x, 40, BLOCK=16)
    assert len(direct._grid_launchers) == 64
    assert all(type(g) is int for grid in direct._grid_launchers for g in grid)
    assert kinds(jit.calls)[1:] == ["direct"] * 102


class CudaLike(torch.Tensor):
    """A CPU tensor that says it is on a CUDA device, for the grid launchers' CUDA-only path."""

    @property
    def is_cuda(self) -> bool:
        return True


def test_a_grid_launcher_passes_cuda_tensors_as_their_addresses():
    jit, direct = make()
    out, x = torch.empty(40).as_subclass(CudaLike), torch.randn(40).as_subclass(CudaLike)
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(1,)](out, x, 40, BLOCK=16)  # through the grid launcher
    assert kinds(jit.calls) == ["jit", "direct", "direct"]
    general, launched = jit.calls[1][2], jit.calls[2][2]
    assert general[9:11] == (
        out,
        x,
    )  # the general path passes the tensors, as Triton's wrapper does
    assert launched[9:11] == (out.data_ptr(), x.data_ptr()) and launched[11:] == general[11:]
    # a tensor that is not on the GPU takes the general path (whose launch Triton checks)
    cpu = torch.randn(40)
    direct[(1,)](out, cpu, 40, BLOCK=16)
    assert jit.calls[-1][2][10] is cpu


class CountingDict(dict):
    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0

    def get(self, key, default=None):
        self.lookups += 1
        return super().get(key, default)


def test_the_first_launchs_entry_launches_without_a_lookup_while_its_key_holds():
    devices = [0]
    jit, direct = make()
    direct._current_device = lambda: devices[0]
    direct._entries = entries = CountingDict()
    out, x = torch.empty(40).as_subclass(CudaLike), torch.randn(40).as_subclass(CudaLike)
    direct[(1,)](out, x, 40, BLOCK=16)  # binds
    direct[(1,)](out, x, 40, BLOCK=16)  # direct, through `launch`: the first key is recorded
    launcher = direct[(1,)]
    before = entries.lookups
    launcher(out, x, 40, BLOCK=16)
    launcher(out, x, 24, BLOCK=16)  # the same int class as 40
    assert entries.lookups == before  # the primary branch: no key, no lookup
    # as the general path launched, the tensors passed as their addresses
    assert jit.calls[-2][2] == (*jit.calls[1][2][:9], out.data_ptr(), x.data_ptr(), 40, 16)
    assert jit.calls[-1][2] == (*jit.calls[-2][2][:11], 24, 16)
    launcher(out, x, 48, BLOCK=16)  # a multiple of 16: another class, another specialization
    launcher(out, x, 1, BLOCK=16)  # 1 is a constant to Triton: another one again
    unaligned = torch.randn(41)[1:].as_subclass(CudaLike)
    launcher(out, unaligned, 40, BLOCK=16)
    devices[0] = 1
    launcher(out, x, 40, BLOCK=16)  # another device: its own entry
    assert kinds(jit.calls)[-4:] == ["jit", "jit", "jit", "jit"]
    devices[0] = 0
    launcher(out, x, 40, BLOCK=16)
    assert kinds(jit.calls)[-1] == "direct" and len(entries) == 5


def test_the_primary_branch_leaves_tensors_of_another_dtype_to_the_lookup():
    """Variants whose generated source is the same for several dtypes (``x * x``) share one
    module and so one DirectLaunch: the float32 binary must never get float16 tensors (on the
    GPU it wrote past the end of the output)."""
    jit, direct = make()
    out, x = torch.empty(40).as_subclass(CudaLike), torch.randn(40).as_subclass(CudaLike)
    direct[(1,)](out, x, 40, BLOCK=16)  # binds float32
    direct[(1,)](out, x, 40, BLOCK=16)  # direct: the first key is recorded
    launcher = direct[(1,)]
    half_out = torch.empty(40, dtype=torch.float16).as_subclass(CudaLike)
    half_x = torch.randn(40, dtype=torch.float16).as_subclass(CudaLike)
    launcher(half_out, half_x, 40, BLOCK=16)
    assert kinds(jit.calls)[-1] == "jit"  # bound for float16, not launched as float32
    launcher(half_out, half_x, 40, BLOCK=16)
    assert jit.calls[-1][:2] == ("direct", "k1")
    launcher(out, x, 40, BLOCK=16)
    assert jit.calls[-1][:2] == ("direct", "k0")


def test_a_disabled_launcher_no_longer_takes_the_primary_branch():
    jit, direct = make()
    out, x = torch.empty(40).as_subclass(CudaLike), torch.randn(40).as_subclass(CudaLike)
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(1,)](out, x, 40, BLOCK=16)
    launcher = direct[(1,)]
    jit.compiled[next(iter(jit.compiled))].refuse = True
    launcher(out, x, 40, BLOCK=16)  # refused in the primary branch: disables, then the JIT
    assert not direct.enabled
    launcher(out, x, 40, BLOCK=16)
    assert kinds(jit.calls)[-2:] == ["jit", "jit"]


def test_disabling_drops_the_grid_launchers():
    jit, direct = make()
    out, x = torch.empty(40), torch.randn(40)
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(1,)](out, x, 40, BLOCK=16)
    direct[(1,)](out, x, 40, BLOCK=16)
    assert direct._grid_launchers
    jit.compiled[next(iter(jit.compiled))].refuse = True
    direct[(2,)](out, x, 40, BLOCK=16)  # refused: disables, then binds through the JIT
    assert not direct.enabled and not direct._grid_launchers
    direct[(1,)](out, x, 40, BLOCK=16)
    assert kinds(jit.calls)[-2:] == ["jit", "jit"]


class CudaLauncher:
    """Triton 3.6's compiled launcher, as it wraps its C ``launch`` (read on the H200 machine):
    the wrapper allocates the scratch memory a kernel asks for and passes the rest through."""

    def __init__(self, calls: list, scratch: int = 0) -> None:
        self.calls = calls
        self.global_scratch_size = scratch
        self.profile_scratch_size = 0
        self.launch_cooperative_grid = False
        self.launch_pdl = True

    def launch(self, *args):  # stands in for the C function
        self.calls.append(args)

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        scratch = "scratch" if self.global_scratch_size > 0 else None
        self.launch(
            gridX,
            gridY,
            gridZ,
            stream,
            function,
            self.launch_cooperative_grid,
            self.launch_pdl,
            scratch,
            None,
            *args,
        )


def test_on_triton_3_6_a_grid_launcher_calls_the_c_launcher_with_the_wrappers_arguments(
    monkeypatch,
):
    import helion_triton.target as target
    from helion_triton.launcher import _call_below_wrapper

    monkeypatch.setattr(target, "triton_version", lambda: "3.6.0")
    calls: list = []
    run = CudaLauncher(calls)
    call, head = _call_below_wrapper(run, "metadata")
    assert call == run.launch
    kernel_args = ("out", "x", 40, 16)
    run(3, 1, 1, 77, "function", "metadata", None, None, None, *kernel_args)
    call(3, 1, 1, 77, "function", *head, *kernel_args)
    assert calls[0] == calls[1]
    # a kernel with scratch memory, another Triton or another launcher keep the wrapper
    for other, version in (
        (CudaLauncher(calls, scratch=64), "3.6.0"),
        (run, "3.9.0"),
        (object(), "3.6.0"),
    ):
        monkeypatch.setattr(target, "triton_version", lambda v=version: v)
        call, head = _call_below_wrapper(other, "metadata")
        assert call is other and head == ("metadata", None, None, None)


# -- the fused launcher: the generated module's launcher and a grid launcher in one function -----------


def test_a_fused_launcher_launches_as_the_module_launcher_does():
    from helion_triton.codegen import LaunchPlan

    jit, direct = make()

    def module_launcher(out, _unused_1, x, n, *_rest):  # what codegen writes for a dynamic grid
        grid = ((n + 15) // 16,)
        if min(grid) > 0:
            direct[grid](out, x, n, BLOCK=16, num_warps=4)

    plan = LaunchPlan(
        ("out", "_unused_1", "x", "n"), ("out", "x", "n"), "((n + 15) // 16,)", 1, None
    )
    out, x = torch.empty(40), torch.randn(40)
    assert direct.build_fused_launcher(plan, module_launcher, {}) is None  # no direct launch yet
    module_launcher(out, None, x, 40)
    module_launcher(out, None, x, 40)
    fused = direct.build_fused_launcher(plan, module_launcher, {})
    fused(out, None, x, 40)
    assert kinds(jit.calls) == ["jit", "direct", "direct"]
    assert jit.calls[2][2] == jit.calls[1][2]  # the same launch, grid (3,) included
    fused(out, None, x, 33, "extra host value")  # another grid; extra values are ignored
    assert jit.calls[-1][2][:3] == (3, 1, 1) and jit.calls[-1][2][11] == 33
    fused(out, None, x, 0)  # an empty grid launches nothing
    fused(out, None, torch.randn(41)[1:], 40)  # unaligned: through the module launcher, binds
    assert kinds(jit.calls) == ["jit", "direct", "direct", "direct", "jit"]


def test_a_fused_launcher_with_a_static_grid():
    from helion_triton.codegen import LaunchPlan

    jit, direct = make()

    def module_launcher(x, out, *_rest):
        direct[(5, 2)](out, x, 7, BLOCK=16)

    plan = LaunchPlan(("x", "out"), ("out", "x", "7"), "(5, 2)", 2, (5, 2))
    out, x = torch.empty(40), torch.randn(40)
    module_launcher(x, out)
    module_launcher(x, out)
    fused = direct.build_fused_launcher(plan, module_launcher, {})
    fused(x, out)
    assert kinds(jit.calls) == ["jit", "direct", "direct"] and jit.calls[2][2] == jit.calls[1][2]
    assert jit.calls[2][2][:3] == (5, 2, 1)


def test_a_fused_launcher_binds_size_arguments_first():
    # static_shapes=False: the module launcher binds `x_size_0 = x.size(0)` before the grid
    from helion_triton.codegen import LaunchPlan

    jit, direct = make()

    def module_launcher(out, x, *_rest):
        x_size_0 = x.size(0)
        grid = ((x_size_0 + 15) // 16,)
        if min(grid) > 0:
            direct[grid](out, x, x_size_0, BLOCK=16, num_warps=4)

    plan = LaunchPlan(
        ("out", "x"),
        ("out", "x", "x_size_0"),
        "((x_size_0 + 15) // 16,)",
        1,
        None,
        ("x_size_0 = x.size(0)",),
    )
    out, x = torch.empty(40), torch.randn(40)
    module_launcher(out, x)
    module_launcher(out, x)
    fused = direct.build_fused_launcher(plan, module_launcher, {})
    fused(out, x)
    assert kinds(jit.calls) == ["jit", "direct", "direct"]
    assert jit.calls[2][2] == jit.calls[1][2]
    small = torch.randn(20)
    fused(torch.empty(20), small)  # the size argument and the grid follow the tensor
    assert jit.calls[-1][2][:3] == (2, 1, 1) and jit.calls[-1][2][11] == 20


def test_launchers_keep_no_tensor_of_a_launch_alive():
    import gc
    import weakref

    jit, direct = make()
    out, x = torch.empty(40).as_subclass(CudaLike), torch.randn(40).as_subclass(CudaLike)
    for _ in range(3):
        direct[(1,)](out, x, 40, BLOCK=16)
    jit.calls.clear()  # the stand-in JIT's record of its calls holds them; Triton's does not
    refs = [weakref.ref(out), weakref.ref(x)]
    del out, x
    gc.collect()
    assert all(ref() is None for ref in refs)


def test_a_compiled_kernel_whose_module_kept_its_jit_function_launches_through_it(monkeypatch):
    """A tool may keep the module's JIT function (sm90_compile_check records launches that
    way): the compiled kernel then launches through the module launcher and fuses nothing."""
    import helion_triton.launcher as launcher
    from helion_triton.target import TritonTarget
    from helion_triton.target import has_block_ptr
    from helion_triton.target import range_kwargs

    x = torch.randn(40)
    bound = double.bind((x,))
    hopper = TritonTarget("cuda", False, (9, 0), 132, has_block_ptr(), True, range_kwargs())
    generated = bound.backend.generate(
        bound._discovery_ir, bound.config_spec.default_config(), hopper
    )
    monkeypatch.setattr(launcher, "use_direct_launch", lambda module, name: None)
    compiled = launcher.TritonCompiledKernel(generated, hopper, "double_kept_jit")
    launches = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launches.append((grid, args))

    setattr(compiled.module, generated.kernel_name, Recorder())
    env = {"x": x, "out": torch.empty_like(x)}
    values = tuple(env[name] for name in bound.split.device_inputs)
    for _ in range(3):
        compiled(*values)
    assert len(launches) == 3 and compiled.fast_call is None
