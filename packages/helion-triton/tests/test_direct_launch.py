"""The direct launch path of compiled kernels (`helion_triton.launcher.DirectLaunch`), with a
stand-in for Triton's JIT function and compiled kernel: CPU machines have no CUDA driver.

What it must hold: the first call of a specialization binds through the JIT function; later calls
with the same dtypes, alignments and int classes go straight to the compiled launcher with the
same arguments (the constexpr tail appended); anything Triton would specialize differently binds
again; profiler hooks and launcher signature changes fall back to the JIT path."""

from __future__ import annotations

import types

import torch

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
    assert args == (5, 2, 1, 77, "function-of-k0", "metadata-of-k0", None, None, None, out, x, 41, 16)


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
