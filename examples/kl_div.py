"""KL divergence forward, `F.kl_div(y_pred, y_true, reduction="batchmean")`: `y_pred` holds
log-probabilities, `y_true` probabilities (or log-probabilities with `log_target=True`).

Each program owns a tile of rows and walks the (long) vocabulary in chunks of a registered block
size (at least 32 columns), accumulating `y_true * (log(y_true) - y_pred)` per row in float32
(terms with `y_true == 0` count as 0, as in torch). The per-row losses are summed and divided by
the batch size on the host.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


# the host code's final reduction is deliberate: no warning that it is not fused
@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
def kl_div(
    y_pred: torch.Tensor, y_true: torch.Tensor, log_target: hl.constexpr = False
) -> torch.Tensor:
    n, v = y_pred.shape
    assert y_true.shape == (n, v), "y_pred and y_true must have the same shape"
    row_losses = torch.empty([n], dtype=torch.float32, device=y_pred.device)
    chunk = hl.register_block_size(32, v)
    for tile_n in hl.tile(n):
        acc = hl.zeros([tile_n], dtype=torch.float32)
        for tile_v in hl.tile(v, block_size=chunk):
            log_q = y_pred[tile_n, tile_v].to(torch.float32)
            target = y_true[tile_n, tile_v].to(torch.float32)
            if log_target:
                terms = torch.exp(target) * (target - log_q)
            else:
                terms = torch.where(target > 0, target * (torch.log(target) - log_q), 0.0)
            acc = acc + terms.sum(dim=-1)
        row_losses[tile_n] = acc
    return row_losses.sum() / n


def kl_div_reference(
    y_pred: torch.Tensor, y_true: torch.Tensor, log_target: bool = False
) -> torch.Tensor:
    return F.kl_div(y_pred.float(), y_true.float(), reduction="batchmean", log_target=log_target)


def example_args() -> tuple:
    n, v = 19, 517
    y_pred = torch.log_softmax(torch.randn(n, v, device=DEVICE), dim=-1)
    y_true = torch.softmax(torch.randn(n, v, device=DEVICE), dim=-1)
    y_true[:, ::7] = 0.0  # zero-probability targets contribute nothing
    return y_pred, y_true


def log_target_args() -> tuple:
    n, v = 13, 389
    y_pred = torch.log_softmax(torch.randn(n, v, device=DEVICE, dtype=torch.float16), dim=-1)
    y_true = torch.log_softmax(torch.randn(n, v, device=DEVICE, dtype=torch.float16), dim=-1)
    return y_pred, y_true, True


CASES = [
    Case("kl_div", kl_div, kl_div_reference, atol=1e-5, rtol=1e-4),
    Case("kl_div_log_target", kl_div, kl_div_reference, atol=1e-4, rtol=1e-3, args=log_target_args),
]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
