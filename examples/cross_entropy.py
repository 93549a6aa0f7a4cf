"""Mean cross-entropy loss: a logsumexp over each row minus the logit of the row's label.

The label's logit is fetched with a flat gather, `hl.load(logits_flat, [row * v + label])`,
from a flattened view made on the host.
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
def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    n, v = logits.shape
    losses = torch.empty([n], dtype=torch.float32, device=logits.device)
    logits_flat = logits.view(-1)
    for tile_n in hl.tile(n):
        labels_tile = labels[tile_n]
        target_logit = hl.load(logits_flat, [tile_n.index * v + labels_tile])
        rows = logits[tile_n, :].to(torch.float32)
        log_normalizer = torch.logsumexp(rows, dim=-1)
        losses[tile_n] = log_normalizer - target_logit.to(torch.float32)
    return losses.mean()


def cross_entropy_reference(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels)


def example_args() -> tuple:
    n, v = 83, 1009
    return torch.randn(n, v, device=DEVICE), torch.randint(0, v, (n,), device=DEVICE)


CASES = [Case("cross_entropy", cross_entropy, cross_entropy_reference, atol=1e-4, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
