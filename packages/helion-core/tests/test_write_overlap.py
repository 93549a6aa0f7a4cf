"""`helion.passes.write_overlap`: a store or atomic into a tensor whose elements overlap in
memory is refused when the kernel is traced (the ref backend raised an InternalError from
torch, Triton wrote silently); tensors made under ``torch.inference_mode()`` are written by the
ref backend outside it (an InternalError before)."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.passes import write_overlap
from helion.passes.write_overlap import internal_overlap


def _brute_force(shape, stride) -> bool:
    offsets = [
        sum(i * s for i, s in zip(index, stride, strict=True))
        for index in itertools.product(*(range(n) for n in shape))
    ]
    return len(set(offsets)) < len(offsets)


@pytest.mark.parametrize(
    ("shape", "stride", "expected"),
    [
        ((8, 16), (16, 1), False),  # contiguous
        ((16, 8), (1, 16), False),  # transposed
        ((8, 16), (17, 1), False),  # a column slice
        ((8, 16), (0, 1), True),  # expanded
        ((8, 1), (1, 0), False),  # a size-1 dimension's stride does not matter
        ((1, 16), (0, 1), False),
        ((8, 16), (1, 1), True),
        ((3, 3), (2, 3), False),  # interleaved, yet distinct: offsets 2i + 3j
        ((4, 4), (2, 3), True),  # 3 * 2 == 2 * 3: (3, 0) and (0, 2) are one location
        ((0, 4), (0, 1), False),  # empty
        ((0, 4), (0, 0), False),
        ((), (), False),
    ],
)
def test_internal_overlap(shape, stride, expected):
    assert internal_overlap(shape, stride) is expected


def test_internal_overlap_matches_brute_force():
    rng = random.Random(0)
    for _ in range(500):
        ndim = rng.randint(1, 3)
        shape = tuple(rng.randint(1, 5) for _ in range(ndim))
        stride = tuple(rng.randint(0, 12) for _ in range(ndim))
        assert internal_overlap(shape, stride) is _brute_force(shape, stride), (shape, stride)


def test_too_large_to_tell_is_refused(monkeypatch):
    monkeypatch.setattr(write_overlap, "_EXACT_CHECK_LIMIT", 4)
    assert internal_overlap((3, 3), (2, 3)) is None
    assert internal_overlap((8, 16), (16, 1)) is False  # the quick test still clears these

    kernel = helion.kernel(copy_doubled, backend="ref", autotune_effort="none")
    storage = torch.zeros(40)
    with pytest.raises(exc.WriteToOverlappingTensor, match="may overlap"):
        kernel(torch.ones(3, 3), storage.as_strided((3, 3), (2, 3)))


def copy_doubled(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] * 2
    return out


def reads_expanded(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=x.dtype)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + 1
    return out


def test_ref_refuses_a_store_into_an_expanded_tensor_and_reads_one():
    kernel = helion.kernel(copy_doubled, backend="ref", autotune_effort="none")
    with pytest.raises(exc.WriteToOverlappingTensor) as info:
        kernel(torch.randn(8, 16), torch.zeros(1, 16).expand(8, 16))
    assert info.value.loc is not None
    assert "out[tm, tn] = x[tm, tn] * 2" in str(info.value)
    # to_code refuses it too (the check runs when the code is traced, not at launch)
    bound = helion.kernel(copy_doubled, backend="ref", autotune_effort="none")
    with pytest.raises(exc.WriteToOverlappingTensor):
        bound.bind((torch.randn(8, 16), torch.zeros(1, 16).expand(8, 16)))
    expanded = torch.randn(1, 16).expand(8, 16)
    reader = helion.kernel(reads_expanded, backend="ref", autotune_effort="none")
    torch.testing.assert_close(reader(expanded), expanded + 1)


def test_static_shapes_off_checks_each_layout():
    kernel = helion.kernel(copy_doubled, backend="ref", autotune_effort="none", static_shapes=False)
    x = torch.randn(8, 16)
    torch.testing.assert_close(kernel(x, torch.zeros(8, 16)), x * 2)
    with pytest.raises(exc.WriteToOverlappingTensor):
        kernel(x, torch.zeros(1, 16).expand(8, 16))


def test_ref_writes_tensors_made_under_inference_mode():
    kernel = helion.kernel(copy_doubled, backend="ref", autotune_effort="none")
    with torch.inference_mode():
        x, out = torch.randn(8, 16), torch.zeros(8, 16)
    kernel(x, out)  # outside inference mode
    torch.testing.assert_close(out, x * 2)
    with torch.inference_mode():
        out2 = torch.zeros(8, 16)
        kernel(x, out2)
    torch.testing.assert_close(out2, x * 2)
    plain = torch.zeros(8, 16)
    kernel(x, plain)
    assert not plain.is_inference()
    torch.testing.assert_close(plain, x * 2)


def test_the_error_crosses_processes():
    # autotuner workers send errors back pickled
    import pickle

    error = exc.WriteToOverlappingTensor("A store", "out", "overlap", [8, 16], [0, 1])
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is exc.WriteToOverlappingTensor
    assert str(again) == str(error)
    assert "strides [0, 1]" in str(again)
