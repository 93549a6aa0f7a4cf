"""A call finds its variant among many traced sizes (`static_shapes=False`) by one lookup.

Each size a ``static_shapes=False`` kernel meets is a variant of its config. Calls used to scan
the variants in trace order, so a size traced late cost a guard test per earlier size. These tests
trace many sizes, revisit them in random order, and check both the results and that a call tests
no more than the one variant it runs."""

from __future__ import annotations

import random

import torch

import helion
import helion.language as hl


def add_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


def scaled(x: torch.Tensor, flag: bool) -> torch.Tensor:
    out = torch.empty_like(x)
    factor = 3.0 if flag else 2.0  # a host value baked into the code: a constant guard
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * factor
    return out


def _kernel(fn, **settings) -> helion.Kernel:
    return helion.kernel(
        fn, backend="ref", static_shapes=False, config=helion.Config(block_sizes=[64]), **settings
    )


def _count_guard_tests(bound) -> list[int]:
    """Wrap every variant's guard test; the returned list counts the calls."""
    calls = [0]
    for variants in bound._variants.values():
        for variant in variants:
            test = variant.matches_call

            def counted(values, args, test=test):
                calls[0] += 1
                return test(values, args)

            variant.matches_call = counted
    return calls


def test_sizes_revisited_in_any_order_run_their_own_variant() -> None:
    kernel = _kernel(add_one)
    sizes = list(range(40, 70))
    for n in sizes:
        x = torch.randn(n)
        torch.testing.assert_close(kernel(x), x + 1)
    bound = kernel.bind((torch.randn(40),))
    assert sum(len(v) for v in bound._variants.values()) == len(sizes)
    rng = random.Random(7)
    for n in rng.sample(sizes, len(sizes)):
        x = torch.randn(n)
        torch.testing.assert_close(kernel(x), x + 1)
    assert sum(len(v) for v in bound._variants.values()) == len(sizes)  # nothing traced again


def test_a_late_size_tests_one_variant_not_all() -> None:
    kernel = _kernel(add_one)
    for n in range(40, 70):
        kernel(torch.randn(n))
    bound = kernel.bind((torch.randn(40),))
    calls = _count_guard_tests(bound)
    x = torch.randn(69)  # the last size traced
    torch.testing.assert_close(kernel(x), x + 1)
    assert calls[0] == 1


def test_a_strided_view_of_a_traced_size_is_its_own_variant() -> None:
    kernel = _kernel(add_one)
    for n in range(40, 50):
        kernel(torch.randn(n))
    view = torch.randn(45, 2)[:, 0]  # size 45, stride 2: guards differ from the contiguous 45
    torch.testing.assert_close(kernel(view), view + 1)
    torch.testing.assert_close(kernel(view.contiguous()), view + 1)


def test_constants_in_the_key_pick_the_variant() -> None:
    kernel = _kernel(scaled)
    for n in range(40, 50):
        for flag in (False, True):
            x = torch.randn(n)
            torch.testing.assert_close(kernel(x, flag), x * (3.0 if flag else 2.0))
    for n in (49, 40, 45):
        for flag in (True, False):
            x = torch.randn(n)
            torch.testing.assert_close(kernel(x, flag), x * (3.0 if flag else 2.0))


def sum_of_list(xs: list[torch.Tensor]) -> torch.Tensor:
    out = torch.zeros_like(xs[0])
    for tile in hl.tile(out.size(0)):
        acc = hl.zeros([tile], dtype=torch.float32)
        for x in xs:
            acc = acc + x[tile]
        out[tile] = acc
    return out


def test_variants_that_read_containers_are_found_by_the_scan() -> None:
    # a container argument's leaves are lifted per variant: those variants stay out of the
    # index, and the scan still finds each size
    kernel = _kernel(sum_of_list)
    sizes = list(range(40, 50))
    for n in sizes + sizes[::-1]:
        xs = [torch.randn(n) for _ in range(3)]
        torch.testing.assert_close(kernel(xs), xs[0] + xs[1] + xs[2])
