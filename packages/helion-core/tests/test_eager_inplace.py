"""Augmented assignment on device values in eager mode rebinds, as in compiled kernels:
`w += 1` is `w = w + 1`, so an alias of the same loaded tile (`w = v`) or a view of it keeps its
value. Torch hands `w += 1` to the eager mode as `Tensor.add_` itself, the call `w.add_(1)`
makes too, so eager mode tells them apart by the caller's instruction."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl


def _both(fn):
    """The kernel compiled (ref backend) and in eager mode."""
    compiled = helion.kernel(fn, backend="ref", autotune_effort="none")
    eager = helion.kernel(fn, backend="ref", ref_mode=helion.RefMode.EAGER)
    return compiled, eager


def _aliased_add_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        v = x[tile]
        w = v
        w += 1
        out[tile] = v + w
    return out


def test_augmented_assignment_leaves_an_alias_unchanged():
    x = torch.zeros(2, 4)
    for kernel in _both(_aliased_add_one):
        out = kernel(x)
        assert out.tolist() == [[1.0] * 4] * 2
        assert x.tolist() == [[0.0] * 4] * 2


def _float_ops(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        v = x[tile]
        t = v.t()  # a view of the loaded tile in eager mode
        # each an alias of v: an operator that wrote in place would change v, t and the others
        a, b, c, d, e, f, g = v, v, v, v, v, v, v
        h, i, j, k = v, v, v, v
        a += 1.5
        b -= 0.5
        c *= 3
        d /= 4.0
        e //= 0.75
        f %= 0.3
        g **= 2
        h += y[tile]
        i -= y[tile]
        j *= y[tile]
        k /= y[tile]
        values = (a, b, c, d, e, f, g, h, i, j, k)
        out[tile] = v * 1000 + t.t() * 100 + sum(w * 2**n for n, w in enumerate(values))
    return out


def _int_ops(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        v = x[tile]
        a, b, c, d, e, f, g, h, i, j = v, v, v, v, v, v, v, v, v, v
        a += 3
        b -= y[tile]
        c *= 2
        d //= 3
        e %= 7
        f &= 6
        g |= y[tile]
        h ^= 2
        i <<= 2
        j >>= 1
        values = (a, b, c, d, e, f, g, h, i, j)
        out[tile] = v * 1000 + sum(w * 3**n for n, w in enumerate(values))
    return out


@pytest.mark.parametrize("kind", ["float", "int"])
def test_each_augmented_operator_rebinds_like_compiled_code(kind):
    if kind == "float":
        fn, args = _float_ops, (torch.rand(4, 8) + 1, torch.rand(4, 8) + 1)
    else:
        ints = [torch.randint(1, 50, (4, 8), dtype=torch.int64) for _ in range(2)]
        fn, args = _int_ops, tuple(ints)
    before = [a.clone() for a in args]
    compiled, eager = _both(fn)
    torch.testing.assert_close(eager(*args), compiled(*args))
    for arg, copy in zip(args, before, strict=True):
        assert torch.equal(arg, copy)


def test_an_int_tile_promotes_like_compiled_code():
    def body(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        for tile in hl.tile(x.size()):
            w = x[tile]
            w /= 2  # in place, torch refuses an int tensor; rebinding makes it a float
            out[tile] = w
        return out

    x = torch.arange(8, dtype=torch.int32).reshape(2, 4)
    for kernel in _both(body):
        torch.testing.assert_close(kernel(x, torch.empty(2, 4)), x / 2)


def test_host_code_and_stores_keep_torch_semantics():
    @helion.kernel(backend="ref", ref_mode=helion.RefMode.EAGER)
    def k(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        alias = out
        alias += 1  # host code: in place, as in torch
        for tile in hl.tile(x.size()):
            out[tile] += x[tile]  # a load, an add and a store
        return out

    x = torch.randn(2, 4)
    torch.testing.assert_close(k(x), x + 1)


_REFUSED = ["add_", "mul_", "sub_", "div_", "copy_", "zero_", "fill_"]


def _explicit_method(x: torch.Tensor, which: hl.constexpr) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        v = x[tile]
        if which == 0:
            v.add_(1)
        elif which == 1:
            v.mul_(2)
        elif which == 2:
            v.sub_(1)
        elif which == 3:
            v.div_(2)
        elif which == 4:
            v.copy_(v * 3)
        elif which == 5:
            v.zero_()
        else:
            v.fill_(5)
        out[tile] = v
    return out


@pytest.mark.parametrize("name", _REFUSED)
def test_an_explicit_in_place_method_is_refused_like_compiled_code(name):
    """`w.add_(1)` on a device value: compiled kernels refuse it (a device value never changes),
    so eager mode refuses it too instead of mutating the loaded tile; the error names the line."""
    x = torch.randn(3, 5)
    for kernel in _both(_explicit_method):
        with pytest.raises(helion.exc.NotAllowedOnDevice, match="in-place tensor methods") as info:
            kernel(x, _REFUSED.index(name))
        assert info.value.loc is not None and info.value.loc.filename == __file__
