"""helion.containers: the one walk over container arguments (lists, tuples, namedtuples, dicts,
dataclasses) that the tracer, the specialization key, eager mode and the autotuner share. The
autotuner's copies of a candidate's arguments turned a namedtuple into a plain tuple and did not
copy a dataclass's tensors, so an in-place kernel could write into the caller's inputs while
tuning."""

from __future__ import annotations

import collections
import dataclasses

import torch

from helion.autotuner.benchmarking import clone_args
from helion.containers import container_structure
from helion.containers import describe_structure
from helion.containers import find_device
from helion.containers import iter_tensors
from helion.containers import map_tensors

Pair = collections.namedtuple("Pair", ["weight", "scale"])


@dataclasses.dataclass(frozen=True)
class Layer:
    weight: torch.Tensor
    bias: torch.Tensor | None
    name: str


def _nested() -> dict:
    return {
        "pair": Pair(torch.randn(3), 2.0),
        "layers": [Layer(torch.randn(5), None, "a"), Layer(torch.randn(2), torch.ones(2), "b")],
        "n": 7,
    }


def test_iter_tensors_and_find_device_look_inside_every_container_kind() -> None:
    args = _nested()
    found = list(iter_tensors([args]))
    expected = [args["pair"].weight, args["layers"][0].weight]
    expected += [args["layers"][1].weight, args["layers"][1].bias]
    assert [id(t) for t in found] == [id(t) for t in expected]
    assert find_device([3, {"d": torch.device("meta")}, torch.zeros(1)]) == torch.device("meta")
    assert find_device([3, "x"]) is None


def test_map_tensors_keeps_each_container_type_and_every_other_leaf() -> None:
    args = _nested()
    doubled = map_tensors(lambda t: t * 2, args)
    assert type(doubled["pair"]) is Pair and doubled["pair"].scale == 2.0
    assert all(type(layer) is Layer for layer in doubled["layers"])
    assert doubled["layers"][0].bias is None and doubled["layers"][1].name == "b"
    torch.testing.assert_close(doubled["layers"][1].weight, args["layers"][1].weight * 2)
    assert doubled["n"] == 7


def test_the_autotuners_copies_share_no_storage_with_the_callers_arguments() -> None:
    args = (_nested(), torch.randn(4))
    copied = clone_args(args)
    originals = list(iter_tensors([args]))
    copies = list(iter_tensors([copied]))
    assert len(copies) == len(originals) == 5
    for original, copy in zip(originals, copies, strict=True):
        assert copy.data_ptr() != original.data_ptr()
        torch.testing.assert_close(copy, original)
    assert type(copied[0]["pair"]) is Pair and type(copied[0]["layers"][1]) is Layer


def test_container_structure_is_what_a_trace_reads_by_position() -> None:
    """Equal for containers whose leaves sit at the same paths with the same types (the
    tensors' sizes and the numbers' values aside), different otherwise."""
    args = _nested()
    assert container_structure(args) == container_structure(map_tensors(torch.zeros_like, args))
    same_numbers = {**args, "n": 9, "pair": Pair(torch.randn(8), 0.5)}
    assert container_structure(same_numbers) == container_structure(args)
    x = torch.randn(2)
    distinct = [
        [x, x],
        [x, x, x],  # a length
        (x, x),  # a type
        [x, 1.0],  # a leaf's type
        [x, 1],
        {"a": x, "b": x},
        {"b": x, "a": x},  # the keys' order
        Pair(x, 1.0),
        Layer(x, None, "a"),
        Layer(x, x, "a"),  # None or a tensor
    ]
    structures = [container_structure(value) for value in distinct]
    assert len(set(structures)) == len(distinct), structures
    assert describe_structure([x, x, x]) == "a list of 3 items"
    assert describe_structure({"a": x}) == "a dict with keys ['a']"
