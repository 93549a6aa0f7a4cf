"""Container arguments (list, tuple, dict, namedtuple, dataclass, nested) on the ref backend:
their tensors are kernel arguments, their numbers runtime scalars, their other leaves baked and
guarded; the specialization key holds their structure, so another structure binds anew; and a
torch.device argument (or a tensor inside a container) gives the kernel its device (found by
exploratory testing: `k(5, torch.device("cpu"))` raised NoTensorArgs, whose hint says to pass a
torch.device). The same kernels on every backend: tests/test_container_args_backends.py."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest
import torch

import helion
import helion.language as hl
from helion import exc

Pair = collections.namedtuple("Pair", "a b")
Other = collections.namedtuple("Other", "a c")


@dataclasses.dataclass
class Scaled:
    x: torch.Tensor
    scale: float


@dataclasses.dataclass
class Shifted:
    x: torch.Tensor
    shift: float


def _kernel(fn: Any) -> helion.Kernel:
    return helion.kernel(fn, backend="ref", autotune_effort="none")


def sum_of_values(x: torch.Tensor, d: dict[str, torch.Tensor]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        acc = x[tile]
        for key in d:  # unrolled over the dict's keys
            acc = acc + d[key][tile]
        out[tile] = acc
    return out


def sum_of_items(x: torch.Tensor, items: Any) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        acc = x[tile]
        for item in items:  # unrolled over the sequence
            acc = acc + item[tile]
        out[tile] = acc
    return out


def weighted_sum(x: torch.Tensor, pairs: list[tuple[torch.Tensor, float]]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        acc = x[tile]
        for tensor, weight in pairs:
            acc = acc + tensor[tile] * weight
        out[tile] = acc
    return out


def first_field(x: torch.Tensor, p: Any) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + p.a[tile]
    return out


def scaled_or_shifted(y: torch.Tensor, s: Any) -> torch.Tensor:
    out = torch.empty_like(y)
    for tile in hl.tile(out.size()):
        if isinstance(s, Scaled):
            out[tile] = y[tile] + s.x[tile] * s.scale
        else:
            out[tile] = y[tile] + s.x[tile] + s.shift
    return out


def ones(n: int, device: torch.device) -> torch.Tensor:
    out = torch.empty([n], device=device)
    for tile in hl.tile(n):
        out[tile] = 1.0 + 0 * tile.index
    return out


def dict_only(d: dict[str, torch.Tensor]) -> torch.Tensor:
    out = torch.empty_like(d["x"])
    for tile in hl.tile(out.size()):
        out[tile] = d["x"][tile] * 2
    return out


def host_built(x: torch.Tensor, flag: bool, k: int) -> torch.Tensor:
    cfg = {"w": x * 2, "relu": flag, "k": k + 1}  # built by host code: its numbers are baked
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        value = x[tile] + cfg["w"][tile] * cfg["k"]
        if cfg["relu"]:
            value = torch.relu(value)
        out[tile] = value
    return out


# -- the tensors and numbers of a container ------------------------------------------------------


def test_namedtuple_keeps_its_type_in_device_code() -> None:
    x, a, b = torch.randn(5, 7), torch.randn(5, 7), torch.randn(5, 7)
    torch.testing.assert_close(_kernel(first_field)(x, Pair(a, b)), x + a)


def test_dict_keys_and_values_in_device_code() -> None:
    x = torch.randn(3, 11)
    d = {"a": torch.randn(3, 11), "b": torch.randn(3, 11), "c": torch.randn(3, 11)}
    torch.testing.assert_close(_kernel(sum_of_values)(x, d), x + d["a"] + d["b"] + d["c"])


def test_list_of_tensor_number_pairs() -> None:
    x, a, b = torch.randn(13), torch.randn(13), torch.randn(13)
    kernel = _kernel(weighted_sum)
    torch.testing.assert_close(kernel(x, [(a, 2.5), (b, 3)]), x + a * 2.5 + b * 3)
    torch.testing.assert_close(kernel(x, [(b, -1.0), (a, 7)]), x - b + a * 7)
    assert len(kernel._bound) == 1  # numbers are runtime scalars: one binding, one trace
    (bound,) = kernel._bound.values()
    assert [s.name for s in bound.ir.scalar_args] == ["pairs_item_0_item_1", "pairs_item_1_item_1"]


def test_the_lifted_arguments_are_named_by_their_path() -> None:
    x = torch.randn(6)
    bound = _kernel(sum_of_values).bind((x, {"p": torch.randn(6), "w-1": torch.randn(6)}))
    names = [arg.name for arg in bound.ir.tensor_args]
    assert names == ["x", "out", "d_p", "d_w_1"], names
    bound = _kernel(weighted_sum).bind((x, [(torch.randn(6), 1.0)]))
    assert [arg.name for arg in bound.ir.lifted_args] == [
        "pairs_item_0_item_0",
        "pairs_item_0_item_1",
    ]


def test_dataclass_dispatch_on_its_type() -> None:
    y, t = torch.randn(4, 9), torch.randn(4, 9)
    kernel = _kernel(scaled_or_shifted)
    torch.testing.assert_close(kernel(y, Scaled(t, 3.0)), y + t * 3)
    torch.testing.assert_close(kernel(y, Shifted(t, 3.0)), y + t + 3)
    assert len(kernel._bound) == 2


def test_host_built_container_numbers_are_baked_and_guarded() -> None:
    x = torch.randn(2, 5)
    kernel = _kernel(host_built)
    for flag, k in [(True, 1), (False, 1), (True, 4), (True, 1)]:
        value = x + 2 * x * (k + 1)
        expected = torch.relu(value) if flag else value
        torch.testing.assert_close(kernel(x, flag, k), expected, msg=f"flag={flag} k={k}")
    assert len(kernel._bound) == 1


# -- the specialization key ------------------------------------------------------------------------


def test_key_holds_the_structure() -> None:
    kernel = _kernel(sum_of_items)
    x = torch.randn(4)

    def key(items: Any) -> Any:
        return kernel.specialization_key((x, items))

    assert key({"a": x}) == key({"a": torch.randn(4)})
    assert key({"a": x}) != key({"b": x})  # dict keys
    assert key({"a": x, "b": x}) != key({"b": x, "a": x})  # their order (device loops follow it)
    assert key(Pair(x, x)) != key(Other(x, x))  # field names
    assert key(Pair(x, x)) != key((x, x))  # the namedtuple's type
    assert key([x, x]) != key([x, x, x])  # lengths
    assert key((x, 1.0)) != key((x, x))  # leaf kinds
    assert key((x, 1.0)) != key((x, 1))
    assert key((x, 1.0)) == key((x, 2.0))  # numbers key on their type
    assert key(Scaled(x, 1.0)) == key(Scaled(torch.randn(4), 5.0))
    assert key(Scaled(x, 1.0)) != key(Shifted(x, 1.0))  # dataclass type and field names
    assert key(Scaled(x, 1.0)) != key(Scaled(torch.randn(5), 1.0))  # tensor shapes inside
    assert key({1: x, "a": x}) != key({"a": x, 1: x})  # keys of mixed types


def test_another_structure_binds_anew() -> None:
    kernel = _kernel(sum_of_items)
    x, a, b, c = (torch.randn(10) for _ in range(4))
    torch.testing.assert_close(kernel(x, [a, b]), x + a + b)
    torch.testing.assert_close(kernel(x, [a, b, c]), x + a + b + c)
    torch.testing.assert_close(kernel(x, (a, b)), x + a + b)
    torch.testing.assert_close(kernel(x, [b, c]), x + b + c)
    assert len(kernel._bound) == 3
    weighted = _kernel(weighted_sum)
    torch.testing.assert_close(weighted(x, [(a, 2.0)]), x + a * 2)
    torch.testing.assert_close(weighted(x, [(a, 2)]), x + a * 2)  # an int weight: int64
    torch.testing.assert_close(weighted(x, [(a, 2.0), (b, 0.5)]), x + a * 2 + b * 0.5)
    torch.testing.assert_close(weighted(x, [(b, 4.0)]), x + b * 4)
    assert len(weighted._bound) == 3


def test_namedtuples_with_other_fields_bind_anew() -> None:
    kernel = _kernel(first_field)
    x, a, b = torch.randn(3, 3), torch.randn(3, 3), torch.randn(3, 3)
    torch.testing.assert_close(kernel(x, Pair(a, b)), x + a)
    torch.testing.assert_close(kernel(x, Other(b, a)), x + b)
    assert len(kernel._bound) == 2


def test_unsupported_leaf_is_refused() -> None:
    with pytest.raises(TypeError, match="unsupported argument type object"):
        _kernel(sum_of_items)(torch.randn(3), [torch.randn(3), object()])


# -- the kernel's device ------------------------------------------------------------------------


def test_a_device_argument_is_the_kernel_device() -> None:
    kernel = helion.kernel(ones, backend="ref", autotune_effort="none")
    torch.testing.assert_close(kernel(5, torch.device("cpu")), torch.ones(5))
    assert kernel.bind((7, torch.device("cpu"))).device == torch.device("cpu")


def test_a_tensor_inside_a_dict_gives_the_device() -> None:
    x = torch.randn(3, 5)
    torch.testing.assert_close(_kernel(dict_only)({"x": x}), x * 2)


def test_no_tensor_and_no_device_is_still_refused() -> None:
    with pytest.raises(exc.NoTensorArgs):
        _kernel(ones)(5, None)


# -- containers the host code builds -------------------------------------------------------------


def inner_loop_per_part(x: torch.Tensor, n: int) -> torch.Tensor:
    parts = [x * (i + 1) for i in range(n)]
    m, k = x.shape
    out = torch.empty([m], device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m])
        for part in parts:  # one inner loop, and one more block size, per part
            for tile_k in hl.tile(k):
                acc = acc + part[tile_m, tile_k].sum(-1)
        out[tile_m] = acc
    return out


def test_a_host_built_container_that_changes_the_loops_is_refused_by_name() -> None:
    """A longer list that gives the device code more loops than its config has block sizes
    for cannot run with that config: a clear error (a wrong result before), whose hint, a key
    function, works."""
    x = torch.randn(4, 6)
    kernel = _kernel(inner_loop_per_part)
    torch.testing.assert_close(kernel(x, 1), x.sum(-1))
    with pytest.raises(exc.VariantConfigMismatch) as raised:
        kernel(x, 2)
    message = str(raised.value)
    assert "'parts' (a list of 2 items, traced first with a list of 1 item)" in message, message
    assert "block_sizes: 3 instead of 2" in message, message
    keyed = helion.kernel(
        inner_loop_per_part, backend="ref", autotune_effort="none", key=lambda x, n: n
    )
    for n in (1, 2, 3):
        torch.testing.assert_close(keyed(x, n), sum(x * (i + 1) for i in range(n)).sum(-1))
    assert len(keyed._bound) == 3


def test_a_list_argument_of_another_length_binds_anew_with_dynamic_shapes() -> None:
    kernel = helion.kernel(sum_of_items, backend="ref", autotune_effort="none", static_shapes=False)
    for n, size in ((2, 8), (3, 8), (1, 5), (2, 9)):
        x = torch.randn(size)
        items = [torch.randn(size) for _ in range(n)]
        torch.testing.assert_close(kernel(x, items), x + sum(items))
    assert len(kernel._bound) == 3
