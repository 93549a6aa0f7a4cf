"""Errors of helion-distributed. All derive from ``helion.exc.BaseError``, so a kernel that
raises one reports the kernel line it came from, like every other Helion error."""

from __future__ import annotations

from typing import Any
from typing import Sequence

from helion import exc


class DistributedError(exc.BaseError):
    """Base of helion-distributed's errors."""

    message = "{0}"


class SymmetricMemoryError(DistributedError):
    """A tensor that must live in symmetric memory does not, or a rendezvous failed."""

    message = "{0}"


class DistributedTimeout(DistributedError):
    """A rank waited longer than the distributed timeout for a signal from its peers.

    Attributes:
        rank: The rank (in its group) that gave up waiting.
        missing_ranks: Ranks whose signal never arrived, when the protocol knows who should
            have sent it (barriers and tile collectives do; a bare ``hl.wait`` does not).
        what: What was being waited on (the signal pad and index).
    """

    message = "{0}"
    hint = (
        "A peer rank died, hung, or did not run the same kernel with the same arguments. "
        "The limit is the wait's timeout= where one was given, else HELION_DIST_TIMEOUT "
        "seconds (helion_distributed.set_timeout())."
    )

    def __init__(
        self,
        text: str,
        *,
        rank: int | None = None,
        missing_ranks: Sequence[int] = (),
        what: str = "",
        **kwargs: Any,
    ) -> None:
        self.rank = rank
        self.missing_ranks = tuple(missing_ranks)
        self.what = what
        super().__init__(text, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_timeout, (self.template_args[0], self.rank, self.missing_ranks, self.what))


def _rebuild_timeout(
    text: str, rank: int | None, missing: tuple[int, ...], what: str
) -> DistributedTimeout:
    return DistributedTimeout(text, rank=rank, missing_ranks=missing, what=what)


class FP8Unsupported(DistributedError):
    """The FP8 kernels need ``torch.float8_e4m3fn``, which this torch build lacks."""

    message = "{0}"


class DistributedAutotuneError(DistributedError, RuntimeError):
    """A distributed kernel was about to be autotuned the ordinary way, by each rank on its own;
    or the ranks of a lockstep ``helion_distributed.autotune`` do not agree (arguments, configs,
    options, or an error on one of them)."""

    message = "{0}"
