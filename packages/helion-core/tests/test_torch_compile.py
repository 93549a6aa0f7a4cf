"""Helion kernels as PyTorch custom ops (ref backend only): torch.compile without graph
breaks, mutated arguments, fake tensors, and autograd through `Kernel.register_autograd`."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest
import torch

import helion
import helion.language as hl
from helion import exc


@helion.kernel(backend="ref", autotune_effort="none")
def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] * alpha + y[tile]
    return out


@helion.kernel(backend="ref", autotune_effort="none")
def add_into(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size()):
        x[tile] = x[tile] + y[tile]
    return x


@helion.kernel(backend="ref", autotune_effort="none")
def row_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, _ = x.shape
    total = torch.empty([m], dtype=torch.float32, device=x.device)
    biggest = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        total[tile_m] = row.to(torch.float32).sum(-1)
        biggest[tile_m] = row.amax(-1)
    return total, biggest


@helion.kernel(backend="ref", autotune_effort="none")
def column_sum(x: torch.Tensor) -> torch.Tensor:
    # partial sums per row chunk (sized by a registered block size), reduced on the host
    m, n = x.shape
    chunk = hl.register_block_size(m)
    partial = torch.zeros([helion.cdiv(m, chunk), n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n], block_size=[chunk, None]):
        partial[tile_m.id, tile_n] = x[tile_m, tile_n].to(torch.float32).sum(dim=0)
    return partial.sum(0).to(x.dtype)


@helion.kernel(backend="ref", autotune_effort="none")
def mul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] * w[tile]
    return out


def _mul_setup(ctx, inputs, output):
    x, w = inputs
    ctx.save_for_backward(x, w)


def _mul_backward(ctx, grad):
    x, w = ctx.saved_tensors
    return mul(grad, w), mul(grad, x)


mul.register_autograd(_mul_backward, setup_context=_mul_setup)


def _graph_recorder(graphs: list[str]):
    """An aot_eager-like backend that keeps the code of each forward/backward graph."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    def compiler(gm, example_inputs):
        graphs.append(gm.code)
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compile_fullgraph(backend):
    def fn(x, y):
        total, biggest = row_stats(scale_add(x.sin(), y, 0.5))
        return total * 2, biggest + 1

    x, y = torch.randn(13, 29), torch.randn(13, 29)
    got = torch.compile(fn, backend=backend, fullgraph=True)(x, y)
    z = x.sin() * 0.5 + y
    torch.testing.assert_close(got[0], z.sum(-1) * 2)
    torch.testing.assert_close(got[1], z.amax(-1) + 1)


def test_graph_calls_the_custom_op():
    graphs: list[str] = []
    x, y = torch.randn(7, 11), torch.randn(7, 11)
    got = torch.compile(
        lambda a, b: scale_add(a, b, alpha=2.0) + 1, backend=_graph_recorder(graphs), fullgraph=True
    )(x, y)
    torch.testing.assert_close(got, x * 2 + y + 1)
    assert len(graphs) == 1 and "torch.ops.helion.scale_add" in graphs[0], graphs
    assert str(scale_add.custom_op(x, y, 2.0)._schema).startswith(
        "helion::scale_add(Tensor x, Tensor y, float alpha)"
    )


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compile_mutated_argument(backend):
    def fn(x, y):
        z = x.clone()
        add_into(z, y)
        returned = add_into(x, y)
        return z * 2, returned

    x, y = torch.randn(9, 14), torch.randn(9, 14)
    expected = x + y
    x_compiled = x.clone()
    doubled, returned = torch.compile(fn, backend=backend, fullgraph=True)(x_compiled, y)
    torch.testing.assert_close(doubled, expected * 2)
    torch.testing.assert_close(x_compiled, expected)  # the write into the input is kept
    torch.testing.assert_close(returned, expected)
    schema = str(add_into.custom_op(x, y)._schema)
    assert "Tensor(a0!) x" in schema and schema.endswith("-> ()"), schema


def test_compile_dynamic_shapes():
    compiled = torch.compile(
        lambda x: column_sum(x) + 1, backend="aot_eager", fullgraph=True, dynamic=True
    )
    for m, n in ((37, 5), (53, 9), (70, 3)):
        x = torch.randn(m, n)
        torch.testing.assert_close(compiled(x), x.sum(0) + 1, atol=1e-4, rtol=1e-4)


def test_eager_call_without_grad_skips_the_custom_op():
    @helion.kernel(backend="ref", autotune_effort="none")
    def negate(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = -x[tile]
        return out

    x = torch.randn(5, 3)
    torch.testing.assert_close(negate(x), -x)
    assert negate._torch_ops == {}
    x.requires_grad_()
    out = negate(x)  # recorded by autograd: through the custom op
    assert negate._torch_ops and out.requires_grad
    with pytest.raises(exc.TorchIntegrationError, match="no backward"):
        out.sum().backward()


def test_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(21, 6)
        total, biggest = row_stats(x)
    assert total.shape == (21,) and total.dtype == torch.float32
    assert biggest.shape == (21,) and biggest.dtype == x.dtype


def test_autograd_backward_and_gradcheck():
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(mul, (x, w))
    grad = torch.randn(6, 5, dtype=torch.float64)
    mul(x, w).backward(grad)
    torch.testing.assert_close(x.grad, grad * w)
    torch.testing.assert_close(w.grad, grad * x)


def test_autograd_inside_compile():
    x = torch.randn(7, 3, requires_grad=True)
    w = torch.randn(7, 3, requires_grad=True)
    graphs: list[str] = []
    compiled = torch.compile(
        lambda a, b: mul(a.sin(), b).sum(), backend=_graph_recorder(graphs), fullgraph=True
    )
    compiled(x, w).backward()
    torch.testing.assert_close(x.grad, x.detach().cos() * w.detach())
    torch.testing.assert_close(w.grad, x.detach().sin())
    assert len(graphs) == 2 and all("torch.ops.helion.mul" in g for g in graphs), graphs


def test_opcheck():
    x, w = torch.randn(4, 9, requires_grad=True), torch.randn(4, 9, requires_grad=True)
    torch.library.opcheck(mul.custom_op(x, w), (x, w))
    a, b = torch.randn(6, 5), torch.randn(6, 5)
    torch.library.opcheck(scale_add.custom_op(a, b, 0.5), (a, b, 0.5))
    torch.library.opcheck(add_into.custom_op(a, b), (a.clone(), b))


def test_backward_on_mutating_kernel_is_rejected():
    @helion.kernel(backend="ref", autotune_effort="none")
    def fill_into(x: torch.Tensor, value: float) -> torch.Tensor:
        for tile in hl.tile(x.size()):
            x[tile] = hl.full([tile], value, x.dtype) + 0 * x[tile]
        return x

    x = torch.zeros(5)
    fill_into.custom_op(x, 1.0)
    with pytest.raises(exc.TorchIntegrationError, match="writes into its argument"):
        fill_into.register_autograd(lambda ctx, grad: (grad, None))


def test_returning_a_view_of_an_input_is_rejected():
    @helion.kernel(backend="ref", autotune_effort="none")
    def flat_inplace(x: torch.Tensor) -> torch.Tensor:
        for tile in hl.tile(x.size()):
            x[tile] = x[tile] * 2
        return x.view(-1)

    with pytest.raises(exc.TorchIntegrationError, match="view of its argument 'x'"):
        flat_inplace.custom_op(torch.randn(3, 4))
    # under torch.compile Dynamo reports it, with the Helion error in the exception chain
    with pytest.raises(Exception) as info:
        torch.compile(flat_inplace, backend="eager", fullgraph=True)(torch.randn(3, 4))
    assert "view of its argument 'x'" in str(_helion_cause(info.value))


def _helion_cause(error: BaseException | None) -> BaseException | None:
    while error is not None and not isinstance(error, exc.TorchIntegrationError):
        error = error.__cause__ or error.__context__
    return error


def test_wrong_number_of_gradients():
    @helion.kernel(backend="ref", autotune_effort="none")
    def twice(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = x[tile] * 2 + y[tile]
        return out

    twice.register_autograd(lambda ctx, grad: grad * 2)
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(exc.TorchIntegrationError, match="returned 1 gradients"):
        twice(x, torch.randn(4)).sum().backward()


def test_mutating_kernel_refuses_to_be_recorded_by_autograd():
    x = torch.randn(6) * torch.ones(6, requires_grad=True)  # a non-leaf that requires grad
    with pytest.raises(exc.TorchIntegrationError, match="writes into its argument"):
        add_into(x, torch.randn(6))
    with torch.no_grad():
        y = torch.randn(6)
        expected = x + y
        add_into(x, y)
    torch.testing.assert_close(x, expected)


def _partials_fn(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    chunk = hl.register_block_size(m)
    partial = torch.zeros([helion.cdiv(m, chunk), n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n], block_size=[chunk, None]):
        partial[tile_m.id, tile_n] = x[tile_m, tile_n].to(torch.float32).sum(dim=0)
    return partial  # its size depends on the block size


def test_config_dependent_output_size():
    x = torch.randn(37, 5)
    tuned = helion.kernel(_partials_fn, backend="ref", autotune_effort="none")
    # the default config's chunk is not the one fake runs use, so the sizes disagree
    assert tuned.bind((x,)).config_spec.default_config()["block_sizes"][0] != 16
    with pytest.raises(exc.TorchIntegrationError, match="depends on the config"):
        torch.compile(tuned, backend="eager", fullgraph=True)(x)
    fixed = helion.kernel(_partials_fn, backend="ref", config=helion.Config(block_sizes=[8, 4]))
    got = torch.compile(fixed, backend="aot_eager", fullgraph=True)(x)
    assert got.shape == (5, 5)
    torch.testing.assert_close(got.sum(0), x.sum(0), atol=1e-4, rtol=1e-4)


def test_function_argument_needs_no_grad():
    @helion.kernel(backend="ref", autotune_effort="none")
    def apply(x: torch.Tensor, fn) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = fn(x[tile])
        return out

    x = torch.randn(6, 4, requires_grad=True)
    with pytest.raises(exc.TorchIntegrationError, match="function argument"):
        apply(x, torch.sigmoid)
    with torch.no_grad():
        torch.testing.assert_close(apply(x, torch.sigmoid), torch.sigmoid(x))


def test_eager_mode_kernel_under_compile_and_autograd():
    eager_mul = helion.kernel(mul.fn, ref_mode=helion.RefMode.EAGER)
    eager_mul.register_autograd(_mul_backward, setup_context=_mul_setup)
    x, w = torch.randn(5, 7, requires_grad=True), torch.randn(5, 7, requires_grad=True)
    torch.compile(lambda a, b: eager_mul(a, b).sum(), backend="aot_eager", fullgraph=True)(
        x, w
    ).backward()
    torch.testing.assert_close(x.grad, w.detach())
    torch.testing.assert_close(w.grad, x.detach())


# -- container arguments: their tensors are operator inputs, the written ones declared mutated


@dataclasses.dataclass(frozen=True)
class Buffers:
    out: torch.Tensor
    total: torch.Tensor


Pair = collections.namedtuple("Pair", "first second")


@helion.kernel(backend="ref", autotune_effort="none")
def into_list_items(x: torch.Tensor, outs: list[torch.Tensor]) -> None:
    for tile in hl.tile(x.size()):
        outs[0][tile] = x[tile] * 2
        outs[1][tile] = outs[1][tile] + x[tile]


@helion.kernel(backend="ref", autotune_effort="none")
def into_each(x: torch.Tensor, outs: list[torch.Tensor]) -> torch.Tensor:
    total = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        acc = x[tile]
        for i, out in enumerate(outs):  # written through a name bound to the items
            out[tile] = out[tile] + x[tile] * (i + 1)
            acc = acc + out[tile]
        total[tile] = acc
    return total


@helion.kernel(backend="ref", autotune_effort="none")
def into_dict(x: torch.Tensor, state: dict) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        state["acc"][tile] = state["acc"][tile] + x[tile] * state["scale"]
        out[tile] = x[tile] + state["bias"][tile]  # read only: not declared mutated
    return out


@helion.kernel(backend="ref", autotune_effort="none")
def into_fields(x: torch.Tensor, bufs: Buffers, pair: Pair) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        bufs.out[tile] = x[tile] * pair.first[tile]
        hl.atomic_add(bufs.total, [tile], x[tile] + pair.second[tile])
    return bufs.out  # a tensor of a container argument is returned as itself


def _container_calls(x: torch.Tensor) -> tuple[dict, Any]:
    """Fresh arguments of the four kernels, and what they hold after the calls."""
    outs = [torch.zeros_like(x), torch.ones_like(x)]
    each = [torch.ones_like(x), torch.full_like(x, 2.0)]
    state = {"acc": torch.ones_like(x), "scale": 3.0, "bias": torch.randn_like(x)}
    bufs = Buffers(torch.zeros_like(x), torch.ones_like(x))
    pair = Pair(torch.randn_like(x), torch.randn_like(x))
    args = {"outs": outs, "each": each, "state": state, "bufs": bufs, "pair": pair}

    def expected() -> dict:
        return {
            "outs": [x * 2, 1 + x],
            "each": [1 + x, 2 + 2 * x],
            "state": 1 + 3 * x,
            "bufs": [x * pair.first, 1 + x + pair.second],
        }

    return args, expected


def _run_containers(x: torch.Tensor, a: dict) -> tuple:
    into_list_items(x, a["outs"])
    total = into_each(x, a["each"])
    out = into_dict(x, a["state"])
    returned = into_fields(x, a["bufs"], a["pair"])
    return total, out, returned


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_writes_into_tensors_inside_containers(backend):
    """Under torch.compile the writes into tensors of a list, a dict, a dataclass and a
    namedtuple argument are kept (they were not declared mutated: an op of no outputs that
    mutates nothing cannot even be defined, a dict was baked into the op with its tensors, a
    dataclass could not cross into the graph)."""
    x = torch.randn(11)
    args, expected = _container_calls(x)
    want = expected()
    total, out, returned = torch.compile(_run_containers, backend=backend, fullgraph=True)(x, args)
    for got, value in zip(args["outs"], want["outs"], strict=True):
        torch.testing.assert_close(got, value)
    for got, value in zip(args["each"], want["each"], strict=True):
        torch.testing.assert_close(got, value)
    torch.testing.assert_close(total, x + want["each"][0] + want["each"][1])
    torch.testing.assert_close(args["state"]["acc"], want["state"])
    torch.testing.assert_close(out, x + args["state"]["bias"])
    torch.testing.assert_close(args["bufs"].out, want["bufs"][0])
    torch.testing.assert_close(args["bufs"].total, want["bufs"][1])
    torch.testing.assert_close(returned, want["bufs"][0])


def test_schema_declares_each_written_leaf_of_a_container():
    x = torch.randn(5)
    args, _ = _container_calls(x)
    schema = str(into_list_items.custom_op(x, args["outs"])._schema)
    assert "Tensor(a0!)[] outs" in schema, schema  # a list of tensors stays one input
    schema = str(into_dict.custom_op(x, args["state"])._schema)
    assert "Tensor(a0!) state_acc, float state_scale, Tensor state_bias" in schema, schema
    schema = str(into_fields.custom_op(x, args["bufs"], args["pair"])._schema)
    assert "Tensor(a0!) bufs_out, Tensor(a1!) bufs_total, Tensor pair_first" in schema, schema
    torch.library.opcheck(
        into_dict.custom_op(x, args["state"]), (x, torch.ones(5), 2.0, torch.randn(5))
    )


def test_eager_custom_op_call_with_containers_matches_the_kernel():
    """Through the custom op (a dispatch mode is on), outside torch.compile."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    x = torch.randn(9)
    args, expected = _container_calls(x)
    want = expected()
    with Passthrough():
        _, _, returned = _run_containers(x, args)
    torch.testing.assert_close(args["state"]["acc"], want["state"])
    assert returned is args["bufs"].out


@helion.kernel(backend="ref", autotune_effort="none")
def scaled_by_dict(x: torch.Tensor, params: dict) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * params["w"][tile] * params["alpha"]
    return out


def _scaled_setup(ctx, inputs, output):
    x, params = inputs
    ctx.alpha = params["alpha"]
    ctx.save_for_backward(x, params["w"])


def _scaled_backward(ctx, grad):
    x, w = ctx.saved_tensors
    return grad * w * ctx.alpha, {"w": grad * x * ctx.alpha, "alpha": None}


scaled_by_dict.register_autograd(_scaled_backward, setup_context=_scaled_setup)


@pytest.mark.parametrize("compiled", [False, True])
def test_autograd_reaches_tensors_inside_a_dict(compiled):
    """A dict's tensor that requires grad makes autograd record the call (torch's own check
    looks into flat lists only: the call ran without the op and dropped the gradient)."""
    x = torch.randn(6, requires_grad=True)
    w = torch.randn(6, requires_grad=True)

    def fn(x, w):
        return scaled_by_dict(x, {"w": w, "alpha": 1.5}).sum()

    (torch.compile(fn, backend="aot_eager", fullgraph=True) if compiled else fn)(x, w).backward()
    torch.testing.assert_close(x.grad, w.detach() * 1.5)
    torch.testing.assert_close(w.grad, x.detach() * 1.5)


@helion.kernel(backend="ref", autotune_effort="none")
def writes_by_getattr(x: torch.Tensor, bufs: Buffers) -> None:
    for tile in hl.tile(x.size()):
        getattr(bufs, "out")[tile] = x[tile]  # noqa: B009 (a write the source does not show)


def test_a_write_the_source_does_not_show_is_refused():
    x = torch.randn(4)
    with pytest.raises(exc.TorchIntegrationError, match=r"writes \['bufs_out'\] in a way"):
        writes_by_getattr.custom_op(x, Buffers(torch.zeros(4), torch.zeros(4)))(
            x, torch.zeros(4), torch.zeros(4)
        )


def test_a_kernel_writing_into_a_container_names_the_tensors_for_autograd():
    x = torch.randn(4, requires_grad=True)
    bufs, pair = Buffers(torch.zeros(4), torch.zeros(4)), Pair(torch.randn(4), torch.randn(4))
    with pytest.raises(exc.TorchIntegrationError, match=r"argument\(s\) 'bufs.out', 'bufs.total'"):
        into_fields(x, bufs, pair)
    with torch.no_grad():
        into_fields(x, bufs, pair)
    torch.testing.assert_close(bufs.out, x.detach() * pair.first)
