"""Generalized Jensen-Shannon divergence between a student and a teacher distribution given as
logits (the distillation loss), averaged over rows:

    P = softmax(teacher), Q = softmax(student), M = beta * P + (1 - beta) * Q
    jsd = beta * KL(P || M) + (1 - beta) * KL(Q || M)

Each program loads whole rows of both logits, computes both log-softmaxes in float32 and reduces
the two KL terms; the row losses are averaged on the host. `beta` is a runtime scalar.
"""

from __future__ import annotations

import torch
from _common import DEVICE
from _common import Case
from _common import run_cases

import helion
import helion.language as hl


# the host code's final reduction is deliberate: no warning that it is not fused
@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
def jsd(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, beta: float = 0.5
) -> torch.Tensor:
    n, v = student_logits.shape
    assert teacher_logits.shape == (n, v), "student and teacher logits must have the same shape"
    row_losses = torch.empty([n], dtype=torch.float32, device=student_logits.device)
    for tile_n in hl.tile(n):
        log_q = torch.log_softmax(student_logits[tile_n, :].to(torch.float32), dim=-1)
        log_p = torch.log_softmax(teacher_logits[tile_n, :].to(torch.float32), dim=-1)
        p = torch.exp(log_p)
        q = torch.exp(log_q)
        log_m = torch.log(beta * p + (1.0 - beta) * q)
        terms = beta * p * (log_p - log_m) + (1.0 - beta) * q * (log_q - log_m)
        row_losses[tile_n] = terms.sum(dim=-1)
    return row_losses.mean()


def jsd_reference(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, beta: float = 0.5
) -> torch.Tensor:
    log_q = torch.log_softmax(student_logits.float(), dim=-1)
    log_p = torch.log_softmax(teacher_logits.float(), dim=-1)
    log_m = torch.log(beta * log_p.exp() + (1 - beta) * log_q.exp())
    kl_pm = (log_p.exp() * (log_p - log_m)).sum(-1)
    kl_qm = (log_q.exp() * (log_q - log_m)).sum(-1)
    return (beta * kl_pm + (1 - beta) * kl_qm).mean()


def example_args() -> tuple:
    n, v = 7, 203
    return (
        torch.randn(n, v, device=DEVICE, dtype=torch.bfloat16) * 2,
        torch.randn(n, v, device=DEVICE, dtype=torch.bfloat16) * 2,
        0.3,
    )


CASES = [Case("jsd", jsd, jsd_reference, atol=1e-5, rtol=1e-4)]


def main() -> None:
    run_cases(CASES, example_args)


if __name__ == "__main__":
    main()
