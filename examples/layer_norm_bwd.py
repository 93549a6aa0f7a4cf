"""Layer normalization with a backward pass written in Helion, usable with `loss.backward()`,
`torch.autograd.gradcheck` and `torch.compile`.

- `layer_norm_fwd(x, weight, bias, eps)` returns the output and the per-row mean and
  reciprocal standard deviation that the backward reuses. The math runs in float32 (float64
  for float64 inputs, so that `torch.autograd.gradcheck` applies).
- `layer_norm_bwd(grad_out, x, weight, mean, rstd)` returns `(grad_x, grad_weight, grad_bias)`.
  Each program handles a tile of rows: it writes its rows of `grad_x` and the sums of its rows'
  contributions to `grad_weight` / `grad_bias` into row `tile_m.id` of a partial buffer, which
  host code sums afterwards (deterministic, no atomics).
- `layer_norm_fwd.register_autograd(...)` pairs the two, so `layer_norm(x, weight, bias)` is
  differentiable.

With x̂ = (x - mean) · rstd and g = grad_out · weight, per row:
grad_x = rstd · (g - mean(g) - x̂ · mean(g · x̂)); grad_weight = Σ_rows grad_out · x̂;
grad_bias = Σ_rows grad_out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import DEVICE
from _common import Case
from _common import pin_default_configs
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def layer_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.shape
    assert weight.shape == (n,) and bias.shape == (n,), "weight and bias must have the row size"
    compute = torch.promote_types(x.dtype, torch.float32)
    out = torch.empty_like(x)
    mean = torch.empty([m], dtype=compute, device=x.device)
    rstd = torch.empty([m], dtype=compute, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(compute)
        row_mean = row.mean(dim=-1)
        centered = row - row_mean[:, None]
        row_rstd = torch.rsqrt((centered * centered).mean(dim=-1) + eps)
        normalized = centered * row_rstd[:, None]
        scaled = normalized * weight[:].to(compute) + bias[:].to(compute)
        out[tile_m, :] = scaled.to(out.dtype)
        mean[tile_m] = row_mean
        rstd[tile_m] = row_rstd
    return out, mean, rstd


# the host code's final reduction is deliberate: no warning that it is not fused
@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
def layer_norm_bwd(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.shape
    rows = hl.register_block_size(m)
    compute = torch.promote_types(x.dtype, torch.float32)
    grad_x = torch.empty_like(x)
    partial_weight = torch.empty([helion.cdiv(m, rows), n], dtype=compute, device=x.device)
    partial_bias = torch.empty([helion.cdiv(m, rows), n], dtype=compute, device=x.device)
    for tile_m in hl.tile(m, block_size=rows):
        dy = grad_out[tile_m, :].to(compute)
        row_rstd = rstd[tile_m][:, None]
        x_hat = (x[tile_m, :].to(compute) - mean[tile_m][:, None]) * row_rstd
        g = dy * weight[:].to(compute)
        mean_g = g.mean(dim=-1, keepdim=True)
        mean_g_x_hat = (g * x_hat).mean(dim=-1, keepdim=True)
        grad_x[tile_m, :] = ((g - mean_g - x_hat * mean_g_x_hat) * row_rstd).to(grad_x.dtype)
        # rows past the end of x load as 0, so they add nothing to the column sums
        partial_weight[tile_m.id, :] = (dy * x_hat).sum(dim=0)
        partial_bias[tile_m.id, :] = dy.sum(dim=0)
    grad_weight = partial_weight.sum(0).to(weight.dtype)
    grad_bias = partial_bias.sum(0).to(weight.dtype)
    return grad_x, grad_weight, grad_bias


def _setup_context(ctx, inputs, output) -> None:
    x, weight, _bias, _eps = inputs
    _out, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.mark_non_differentiable(mean, rstd)


def _backward(ctx, grad_out, _grad_mean, _grad_rstd):
    x, weight, mean, rstd = ctx.saved_tensors
    grad_x, grad_weight, grad_bias = layer_norm_bwd(grad_out, x, weight, mean, rstd)
    return grad_x, grad_weight, grad_bias, None


layer_norm_fwd.register_autograd(_backward, setup_context=_setup_context)


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """Differentiable layer norm over the last dimension (forward and backward in Helion)."""
    return layer_norm_fwd(x, weight, bias, eps)[0]


# -- references (what torch autograd computes) --------------------------------------------------


def layer_norm_fwd_reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    xf = x.float()
    variance, mean = torch.var_mean(xf, dim=-1, unbiased=False)
    out = F.layer_norm(xf, [x.size(-1)], weight.float(), bias.float(), eps).to(x.dtype)
    return out, mean, torch.rsqrt(variance + eps)


def layer_norm_bwd_reference(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    eps: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # mean and rstd are the forward's statistics of x; autograd recomputes them
    x = x.detach().float().requires_grad_()
    weight_f = weight.detach().float().requires_grad_()
    bias = torch.zeros_like(weight_f, requires_grad=True)
    out = F.layer_norm(x, [x.size(-1)], weight_f, bias, eps)
    grad_x, grad_weight, grad_bias = torch.autograd.grad(out, (x, weight_f, bias), grad_out.float())
    return grad_x.to(grad_out.dtype), grad_weight.to(weight.dtype), grad_bias.to(weight.dtype)


def forward_args() -> tuple:
    n = 103
    x = 1.5 + 0.75 * torch.randn(29, n, device=DEVICE)
    return x, torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)


def example_args() -> tuple:
    m, n = 43, 97
    x = 1.5 + 0.75 * torch.randn(m, n, device=DEVICE)
    weight = torch.randn(n, device=DEVICE)
    variance, mean = torch.var_mean(x, dim=-1, unbiased=False)
    rstd = torch.rsqrt(variance + 1e-5)
    return torch.randn(m, n, device=DEVICE), x, weight, mean, rstd


CASES = [
    Case(
        "layer_norm_fwd_stats",
        layer_norm_fwd,
        layer_norm_fwd_reference,
        atol=1e-4,
        rtol=1e-4,
        args=forward_args,
    ),
    Case("layer_norm_bwd", layer_norm_bwd, layer_norm_bwd_reference, atol=1e-4, rtol=1e-4),
]


def check_autograd() -> None:
    """`loss.backward()` through the Helion layer norm agrees with torch autograd."""
    x, weight, bias = (t.requires_grad_() for t in forward_args())
    grad_out = torch.randn_like(x)
    pin_default_configs(layer_norm_fwd, (x, weight, bias, 1e-5))
    with torch.no_grad():
        _, mean, rstd = layer_norm_fwd(x, weight, bias)
    pin_default_configs(layer_norm_bwd, (grad_out, x, weight, mean, rstd))
    layer_norm(x, weight, bias).backward(grad_out)
    expected = torch.autograd.grad(
        F.layer_norm(x, [x.size(-1)], weight, bias), (x, weight, bias), grad_out
    )
    for name, actual, wanted in zip(
        ("x", "weight", "bias"), (x.grad, weight.grad, bias.grad), expected, strict=True
    ):
        torch.testing.assert_close(actual, wanted, atol=1e-4, rtol=1e-4, msg=f"grad of {name}")
    print(f"{'layer_norm autograd':>24}: ok   (loss.backward() against torch autograd)")


def main() -> None:
    run_cases(CASES, example_args)
    check_autograd()


if __name__ == "__main__":
    main()
