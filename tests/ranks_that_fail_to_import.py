"""A rank function whose module fails to import on rank 1 only (run_ranks imports it in each rank
process, after setting RANK): that rank fails before its group stands, which no retry can fix."""

from __future__ import annotations

import os

if os.environ.get("RANK") == "1":
    raise ImportError("this module refuses to load on rank 1")


def never_reached(rank: int, world_size: int) -> None:
    raise AssertionError("the group cannot form without rank 1")
