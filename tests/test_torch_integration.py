"""Helion kernels inside PyTorch on the ref backend and Triton (its interpreter on CPU):
`torch.compile(fullgraph=True)` (no graph break), autograd through `Kernel.register_autograd`
and through a `torch.autograd.Function`, and `torch.autograd.gradcheck`, with the backward
kernels of `examples/layer_norm_bwd.py` and `examples/rms_norm_bwd.py`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import helion

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))  # the examples import their helpers as `_common`

BACKENDS = ["ref", "triton"]


def _load(stem: str):
    name = f"helion_examples_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _kernel(kernel: helion.Kernel, backend: str) -> helion.Kernel:
    return helion.kernel(kernel.fn, backend=backend, autotune_effort="none")


_LAYER_NORMS: dict[str, object] = {}


def _layer_norm(backend: str):
    """The example's forward/backward kernels on `backend`, paired by register_autograd."""
    if backend not in _LAYER_NORMS:
        module = _load("layer_norm_bwd")
        fwd = _kernel(module.layer_norm_fwd, backend)
        bwd = _kernel(module.layer_norm_bwd, backend)

        def backward(ctx, grad_out, _grad_mean, _grad_rstd):
            x, weight, mean, rstd = ctx.saved_tensors
            return (*bwd(grad_out, x, weight, mean, rstd), None)

        fwd.register_autograd(backward, setup_context=module._setup_context)
        _LAYER_NORMS[backend] = lambda x, w, b, eps=1e-5: fwd(x, w, b, eps)[0]
    return _LAYER_NORMS[backend]


_RMS_NORMS: dict[str, object] = {}


def _rms_norm(backend: str):
    if backend not in _RMS_NORMS:
        module = _load("rms_norm_bwd")
        fwd = _kernel(module.rms_norm_fwd, backend)
        bwd = _kernel(module.rms_norm_bwd, backend)

        def backward(ctx, grad_out, _grad_rstd):
            x, weight, rstd = ctx.saved_tensors
            return (*bwd(grad_out, x, weight, rstd), None)

        fwd.register_autograd(backward, setup_context=module._setup_context)
        _RMS_NORMS[backend] = lambda x, w, eps=1e-6: fwd(x, w, eps)[0]
    return _RMS_NORMS[backend]


def _rms_norm_torch(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _leaves(*shapes, dtype=torch.float32):
    return [torch.randn(*shape, dtype=dtype).requires_grad_() for shape in shapes]


def _assert_grads(inputs, expected, atol=1e-4, rtol=1e-4):
    for index, (tensor, wanted) in enumerate(zip(inputs, expected, strict=True)):
        torch.testing.assert_close(
            tensor.grad, wanted, atol=atol, rtol=rtol, msg=f"grad of input {index}"
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_backward(backend):
    torch.manual_seed(0)
    x, w, b = _leaves((23, 37), (37,), (37,))
    grad = torch.randn(23, 37)
    out = _layer_norm(backend)(x, w, b)
    torch.testing.assert_close(out, F.layer_norm(x, [37], w, b), atol=1e-5, rtol=1e-5)
    out.backward(grad)
    _assert_grads((x, w, b), torch.autograd.grad(F.layer_norm(x, [37], w, b), (x, w, b), grad))


@pytest.mark.parametrize("backend", BACKENDS)
def test_rms_norm_backward(backend):
    torch.manual_seed(1)
    x, w = _leaves((19, 45), (45,))
    grad = torch.randn(19, 45)
    _rms_norm(backend)(x, w).backward(grad)
    _assert_grads((x, w), torch.autograd.grad(_rms_norm_torch(x, w), (x, w), grad))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradcheck(backend):
    torch.manual_seed(2)
    x, w, b = _leaves((3, 5), (5,), (5,), dtype=torch.float64)
    assert torch.autograd.gradcheck(_layer_norm(backend), (x, w, b))
    assert torch.autograd.gradcheck(_rms_norm(backend), (x, w))


@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_fullgraph_with_backward(backend, compiler):
    torch.manual_seed(3)
    layer_norm = _layer_norm(backend)
    rms_norm = _rms_norm(backend)

    def loss(x, w, b):
        hidden = layer_norm(x.tanh(), w, b)
        return (rms_norm(hidden, w) * 1.5).square().sum()

    x, w, b = _leaves((11, 29), (29,), (29,))
    torch.compile(loss, backend=compiler, fullgraph=True)(x, w, b).backward()

    def reference(x, w, b):
        hidden = F.layer_norm(x.tanh(), [29], w, b)
        return (_rms_norm_torch(hidden, w) * 1.5).square().sum()

    expected = torch.autograd.grad(reference(x, w, b), (x, w, b))
    _assert_grads((x, w, b), expected, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_autograd_function_inside_compile(backend):
    """The other pattern: a torch.autograd.Function whose forward and backward call kernels."""
    module = _load("layer_norm_bwd")
    fwd = _kernel(module.layer_norm_fwd, backend)
    bwd = _kernel(module.layer_norm_bwd, backend)

    class LayerNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            out, mean, rstd = fwd(x, w, b)
            ctx.save_for_backward(x, w, mean, rstd)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            x, w, mean, rstd = ctx.saved_tensors
            return bwd(grad_out, x, w, mean, rstd)

    torch.manual_seed(4)
    x, w, b = _leaves((13, 21), (21,), (21,))
    compiled = torch.compile(
        lambda x, w, b: LayerNorm.apply(x, w, b).sin().sum(), backend="aot_eager", fullgraph=True
    )
    compiled(x, w, b).backward()
    expected = torch.autograd.grad(F.layer_norm(x, [21], w, b).sin().sum(), (x, w, b))
    _assert_grads((x, w, b), expected)


@pytest.mark.parametrize("compiler", ["eager", "inductor"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_suite_kernels(backend, compiler):
    """Forward-only suite kernels (a registered block size, a matmul) in one compiled graph."""
    split_k = _load("split_k")
    softmax = _load("softmax")
    matmul_sum = _kernel(split_k.split_k_sum, backend)
    row_softmax = _kernel(softmax.CASES[0].kernel, backend)

    def fn(x):
        return row_softmax(x * 2).cos() + matmul_sum(x)[None, :]

    torch.manual_seed(5)
    x = torch.randn(37, 19)
    got = torch.compile(fn, backend=compiler, fullgraph=True)(x)
    torch.testing.assert_close(
        got, torch.softmax(x * 2, -1).cos() + x.sum(0)[None, :], atol=1e-4, rtol=1e-4
    )


def test_example_layer_norm_under_compile():
    """The example's own differentiable `layer_norm` (default backend) compiles with its backward."""
    from _common import pin_default_configs

    module = _load("layer_norm_bwd")
    torch.manual_seed(6)
    x, w, b = _leaves((9, 15), (15,), (15,))
    scale = torch.randn(9, 15)
    # default configs, not autotuning, for the inputs the compiled code passes
    pin_default_configs(module.layer_norm_fwd, (x, w, b, 1e-5))
    with torch.no_grad():
        _, mean, rstd = module.layer_norm_fwd(x, w, b)
    pin_default_configs(module.layer_norm_bwd, (scale, x, w, mean, rstd))
    compiled = torch.compile(
        lambda x, w, b: (module.layer_norm(x, w, b) * scale).sum(),
        backend="aot_eager",
        fullgraph=True,
    )
    compiled(x, w, b).backward()
    expected = torch.autograd.grad((F.layer_norm(x, [15], w, b) * scale).sum(), (x, w, b))
    _assert_grads((x, w, b), expected)
