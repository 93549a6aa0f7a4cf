"""RMS normalization with a backward pass written in Helion (fp16 rows in the suite), usable
with `loss.backward()`, `torch.autograd.gradcheck` and `torch.compile`.

- `rms_norm_fwd(x, weight, eps)` returns the output and the per-row reciprocal RMS. The math
  runs in float32 (float64 for float64 inputs, so that `torch.autograd.gradcheck` applies).
- `rms_norm_bwd(grad_out, x, weight, rstd)` returns `(grad_x, grad_weight)`. Each program
  handles a tile of rows; its rows' contributions to `grad_weight` are summed into row
  `tile_m.id` of a partial buffer that host code reduces afterwards.
- `rms_norm_fwd.register_autograd(...)` pairs them, so `rms_norm(x, weight)` is differentiable.

With x̂ = x · rstd and g = grad_out · weight, per row:
grad_x = rstd · (g - x̂ · mean(g · x̂)); grad_weight = Σ_rows grad_out · x̂.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import pin_default_configs
from _common import run_cases

import helion
import helion.language as hl


@helion.kernel()
def rms_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.shape
    assert weight.shape == (n,), "weight must have the row size"
    compute = torch.promote_types(x.dtype, torch.float32)
    out = torch.empty_like(x)
    rstd = torch.empty([m], dtype=compute, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(compute)
        row_rstd = torch.rsqrt((row * row).mean(dim=-1) + eps)
        out[tile_m, :] = (row * row_rstd[:, None] * weight[:].to(compute)).to(out.dtype)
        rstd[tile_m] = row_rstd
    return out, rstd


# the host code's final reduction is deliberate: no warning that it is not fused
@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
def rms_norm_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.shape
    rows = hl.register_block_size(m)
    compute = torch.promote_types(x.dtype, torch.float32)
    grad_x = torch.empty_like(x)
    partial_weight = torch.empty([helion.cdiv(m, rows), n], dtype=compute, device=x.device)
    for tile_m in hl.tile(m, block_size=rows):
        dy = grad_out[tile_m, :].to(compute)
        row_rstd = rstd[tile_m][:, None]
        x_hat = x[tile_m, :].to(compute) * row_rstd
        g = dy * weight[:].to(compute)
        mean_g_x_hat = (g * x_hat).mean(dim=-1, keepdim=True)
        grad_x[tile_m, :] = ((g - x_hat * mean_g_x_hat) * row_rstd).to(grad_x.dtype)
        # rows past the end of x load as 0, so they add nothing to the column sums
        partial_weight[tile_m.id, :] = (dy * x_hat).sum(dim=0)
    return grad_x, partial_weight.sum(0).to(weight.dtype)


def _setup_context(ctx, inputs, output) -> None:
    x, weight, _eps = inputs
    _out, rstd = output
    ctx.save_for_backward(x, weight, rstd)
    ctx.mark_non_differentiable(rstd)


def _backward(ctx, grad_out, _grad_rstd):
    x, weight, rstd = ctx.saved_tensors
    grad_x, grad_weight = rms_norm_bwd(grad_out, x, weight, rstd)
    return grad_x, grad_weight, None


rms_norm_fwd.register_autograd(_backward, setup_context=_setup_context)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Differentiable RMS norm over the last dimension (forward and backward in Helion)."""
    return rms_norm_fwd(x, weight, eps)[0]


# -- references (what torch autograd computes) --------------------------------------------------


def _rms_norm_torch(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_norm_fwd_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    out = _rms_norm_torch(xf, weight.float(), eps).to(x.dtype)
    return out, torch.rsqrt(xf.pow(2).mean(-1) + eps)


def rms_norm_bwd_reference(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    rstd: torch.Tensor,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    # rstd is the forward's statistic of x; autograd recomputes it (in float32)
    xf = x.detach().float().requires_grad_()
    weight_f = weight.detach().float().requires_grad_()
    out = _rms_norm_torch(xf, weight_f, eps)
    grad_x, grad_weight = torch.autograd.grad(out, (xf, weight_f), grad_out.float())
    return grad_x.to(x.dtype), grad_weight.to(weight.dtype)


def forward_args() -> tuple:
    return (
        torch.randn(31, 113, device=DEVICE, dtype=torch.float16),
        torch.randn(113, device=DEVICE, dtype=torch.float16),
    )


def example_args() -> tuple:
    m, n = 41, 117
    x = torch.randn(m, n, device=DEVICE, dtype=torch.float16)
    weight = torch.randn(n, device=DEVICE, dtype=torch.float16)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)
    return torch.randn(m, n, device=DEVICE, dtype=torch.float16), x, weight, rstd


CASES = [
    Case(
        "rms_norm_fwd_stats",
        rms_norm_fwd,
        rms_norm_fwd_reference,
        atol=1e-2,
        rtol=1e-2,
        args=forward_args,
    ),
    # grad_weight sums 41 rows of fp16-sized terms: compare it at fp16 resolution
    Case("rms_norm_bwd", rms_norm_bwd, rms_norm_bwd_reference, atol=5e-2, rtol=1e-2),
]


def check_autograd() -> None:
    """`loss.backward()` through the Helion RMS norm agrees with torch autograd (float32)."""
    x = torch.randn(37, 101, device=DEVICE, requires_grad=True)
    weight = torch.randn(101, device=DEVICE, requires_grad=True)
    grad_out = torch.randn_like(x)
    pin_default_configs(rms_norm_fwd, (x, weight, 1e-6))
    with torch.no_grad():
        rstd = rms_norm_fwd(x, weight)[1]
    pin_default_configs(rms_norm_bwd, (grad_out, x, weight, rstd))
    rms_norm(x, weight).backward(grad_out)
    expected = torch.autograd.grad(_rms_norm_torch(x, weight, 1e-6), (x, weight), grad_out)
    for name, actual, wanted in zip(("x", "weight"), (x.grad, weight.grad), expected, strict=True):
        torch.testing.assert_close(actual, wanted, atol=1e-4, rtol=1e-4, msg=f"grad of {name}")
    print(f"{'rms_norm autograd':>24}: ok   (loss.backward() against torch autograd)")


def main() -> None:
    run_cases(CASES, example_args)
    check_autograd()


if __name__ == "__main__":
    main()
