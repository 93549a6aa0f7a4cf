"""The IR printer is stable (golden text) and the verifier rejects malformed IR."""

from __future__ import annotations

import random

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.ir.core import Block
from helion.ir.core import Node
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.ir.verifier import verify
from helion.language import _ops as ops


@helion.kernel(autotune_effort="none", backend="ref")
def scaled_add(x, y, alpha: float):
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + alpha * y[tile]
    return out


@helion.kernel(autotune_effort="none", backend="ref")
def row_softmax(x):
    out = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        out[tm, :] = torch.softmax(x[tm, :], dim=-1)
    return out


GOLDEN_SCALED_ADD = """\
kernel scaled_add:
  tensor out: float32[13, 7]
  tensor x: float32[13, 7]
  tensor y: float32[13, 7]
  scalar alpha: float32
  block _BLOCK_SIZE_0 (tile, extent 13)
  block _BLOCK_SIZE_1 (tile, extent 7)
  body(%0: float32[]):
    grid_loop() {begins=(0, 0), block_ids=(0, 1), ends=(13, 7), is_grid=False, loop_id=0}
      region 0(%1: tile<0>, %2: tile<1>):
        %3: float32[_BLOCK_SIZE_0, _BLOCK_SIZE_1] = load(%1, %2) {items=((tile, 0, 0), (tile, 1, 1)), tensor=x}
        %4: float32[_BLOCK_SIZE_0, _BLOCK_SIZE_1] = load(%1, %2) {items=((tile, 0, 0), (tile, 1, 1)), tensor=y}
        %5: float32[_BLOCK_SIZE_0, _BLOCK_SIZE_1] = mul(%4, %0)
        %6: float32[_BLOCK_SIZE_0, _BLOCK_SIZE_1] = add(%3, %5)
        store(%1, %2, %6) {items=((tile, 0, 0), (tile, 1, 1)), tensor=out, value=2}"""


def _strip_lines(text: str) -> str:
    return "\n".join(line.split("  # line")[0] for line in text.splitlines())


def test_ir_golden_text():
    x, y = torch.randn(13, 7), torch.randn(13, 7)
    assert _strip_lines(scaled_add.bind((x, y, 0.5)).ir_text()) == GOLDEN_SCALED_ADD


def test_ir_records_source_lines():
    x, y = torch.randn(13, 7), torch.randn(13, 7)
    text = scaled_add.bind((x, y, 0.5)).ir_text()
    line = scaled_add.fn.__code__.co_firstlineno + 3
    assert f"# line {line}" in text


def test_scalar_argument_is_runtime_not_baked():
    x, y = torch.randn(13, 7), torch.randn(13, 7)
    for alpha in (0.5, -2.0, 3.25):
        torch.testing.assert_close(scaled_add(x, y, alpha), x + alpha * y)
    assert len(scaled_add._bound) == 1


def test_reduction_dim_and_config_spec():
    x = torch.randn(9, 37)
    bound = row_softmax.bind((x,))
    spec = bound.config_spec
    assert spec.length("block_sizes") == 1
    torch.testing.assert_close(row_softmax(x), torch.softmax(x, -1))
    for seed in range(5):
        config = spec.random_config(random.Random(seed))
        torch.testing.assert_close(bound.compile_config(config)(x), torch.softmax(x, -1))


def test_verifier_rejects_use_before_definition():
    x = torch.randn(13, 7)
    ir = scaled_add.bind((x, x, 1.0)).ir
    loop = ir.body.nodes[0]
    body = loop.regions[0]
    stray = Value(TensorType((), torch.float32))
    body.nodes.append(Node(ops.UNARY["exp"], [stray], {}, [Value(TensorType((), torch.float32))]))
    try:
        with pytest.raises(exc.InternalError, match="before it is defined"):
            verify(ir)
    finally:
        body.nodes.pop()


def test_verifier_rejects_double_definition():
    ir_block = Block()
    value = Value(TensorType((), torch.float32))
    ir_block.nodes.append(Node(ops.constant, [], {"value": 1.0, "dtype": torch.float32}, [value]))
    ir_block.nodes.append(Node(ops.constant, [], {"value": 2.0, "dtype": torch.float32}, [value]))
    x = torch.randn(3, 3)
    ir = scaled_add.bind((x, x, 1.0)).ir
    saved = ir.body
    ir.body = ir_block
    try:
        with pytest.raises(exc.InternalError, match="defined twice"):
            verify(ir)
    finally:
        ir.body = saved
