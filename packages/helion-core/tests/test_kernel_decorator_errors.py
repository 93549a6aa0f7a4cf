"""Misuse of `helion.kernel` and `hl.register_tunable` gets a Helion error when the kernel is
made (or, for what only a call shows, at the call), naming what is wrong and the fix. They used
to escape as raw exceptions: an InternalError for a lambda, AttributeError for
``helion.kernel(5)`` and for ``hl.register_tunable("s", 5)``, TypeError "argument after **
must be a mapping" for ``config=5`` or ``config=[Config]``, TypeError at call time for
``key=5`` and "unhashable type" for a key returning a list (found by exploratory testing)."""

from __future__ import annotations

import re

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.autotuner import PowerOfTwoFragment


def double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2
    return out


def tunable_not_a_fragment(x: torch.Tensor) -> torch.Tensor:
    split = hl.register_tunable("split", 5)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * split
    return out


def tunable_fragment(x: torch.Tensor) -> torch.Tensor:
    split = hl.register_tunable("split", PowerOfTwoFragment(1, 8))
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * split
    return out


class _Holder:
    def method(self, x: torch.Tensor) -> torch.Tensor:
        return x


@pytest.mark.parametrize(
    ("fn", "shown"),
    [
        (5, "got an int (5)"),
        (lambda x: x, "got a lambda"),
        (torch.add, "got the builtin add"),
        (_Holder, "got the class _Holder"),
        (_Holder().method, "got the bound method _Holder.method"),
    ],
    ids=["int", "lambda", "builtin", "class", "bound_method"],
)
def test_a_kernel_must_be_a_def_function(fn, shown):
    with pytest.raises(exc.KernelNotAFunction, match=re.escape(shown)) as info:
        helion.kernel(fn, backend="ref")
    assert "def name(args)" in str(info.value)
    with pytest.raises(exc.KernelNotAFunction):
        helion.kernel(backend="ref")(fn)  # the decorator form


@pytest.mark.parametrize(
    ("config", "shown", "hint"),
    [
        (5, "got an int (5)", "config=helion.Config(block_sizes=[64])"),
        ([helion.Config(block_sizes=[4])], "got a list", "pass configs=[...]"),
        ("block_sizes", "got a str", "config=helion.Config"),
    ],
)
def test_config_takes_one_config(config, shown, hint):
    with pytest.raises(
        exc.InvalidConfig, match=r"helion.kernel\(config=\.\.\.\) takes one"
    ) as info:
        helion.kernel(double, backend="ref", config=config)
    assert shown in str(info.value)
    assert hint in str(info.value)


@pytest.mark.parametrize(
    ("configs", "shown"),
    [
        (5, "takes a list of helion.Config (or dicts of their entries); got an int (5)"),
        (helion.Config(block_sizes=[4]), "got a Config"),
        ({"block_sizes": [4]}, "got a dict"),
        ([helion.Config(block_sizes=[4]), 5], "item 1 is an int (5)"),
    ],
    ids=["int", "one_config", "one_dict", "bad_item"],
)
def test_configs_takes_a_list_of_configs(configs, shown):
    with pytest.raises(exc.InvalidConfig, match=r"helion.kernel\(configs=\.\.\.\)") as info:
        helion.kernel(double, backend="ref", configs=configs)
    assert shown in str(info.value)


def test_config_and_configs_forms_that_work():
    x = torch.arange(8.0)
    one = helion.kernel(double, backend="ref", config={"block_sizes": [4]})
    assert one.configs == [helion.Config(block_sizes=[4])]
    torch.testing.assert_close(one(x), x * 2)
    several = helion.kernel(
        double, backend="ref", configs=({"block_sizes": [4]}, helion.Config(block_sizes=[8]))
    )
    assert several.configs == [helion.Config(block_sizes=[4]), helion.Config(block_sizes=[8])]


def test_key_must_be_callable_when_the_kernel_is_made():
    with pytest.raises(exc.InvalidAPIUsage, match=r"key=\.\.\.\) takes a function .* got an int"):
        helion.kernel(double, backend="ref", key=5)


def test_key_returning_an_unhashable_value():
    kernel = helion.kernel(double, backend="ref", autotune_effort="none", key=lambda x: [1])
    with pytest.raises(exc.InvalidAPIUsage, match=r"returned a list \(\[1\]\), which is not hash"):
        kernel(torch.ones(8))
    hashable = helion.kernel(double, backend="ref", autotune_effort="none", key=lambda x: (1,))
    torch.testing.assert_close(hashable(torch.ones(8)), torch.full((8,), 2.0))


def test_register_tunable_needs_a_fragment():
    kernel = helion.kernel(tunable_not_a_fragment, backend="ref", autotune_effort="none")
    with pytest.raises(exc.RegisterTunableArgTypes) as info:
        kernel(torch.ones(8))
    message = str(info.value)
    assert 'hl.register_tunable("split", 5)' in message  # the kernel's line
    assert "PowerOfTwoFragment(1, 8)" in message
    fine = helion.kernel(
        tunable_fragment, backend="ref", config=helion.Config(block_sizes=[4], split=4)
    )
    torch.testing.assert_close(fine(torch.ones(8)), torch.full((8,), 4.0))


def test_the_new_error_crosses_processes():
    import pickle

    error = exc.KernelNotAFunction("a lambda")
    assert str(pickle.loads(pickle.dumps(error))) == str(error)
