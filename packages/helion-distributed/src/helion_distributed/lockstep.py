"""Autotuning a distributed kernel in lockstep on every rank.

A distributed kernel cannot be tuned rank by rank: every candidate launch is collective (the
ranks wait for each other inside it), so every rank must try the same configs in the same order,
make the same number of calls per candidate, and pick the same winner. This module is a thin
layer over ``helion.autotuner``: its searches and benchmark harness, with a harness whose every
decision is reduced across the group:

- the search seed is rank 0's; the configs of each batch are checked to be identical everywhere;
- candidates run in process (no forked screening: children of different ranks would not pair up);
- a candidate fails everywhere when it fails to compile, run or pass the accuracy check anywhere;
- the repeat count of a timing comes from the slowest rank's estimate, and the time of a config
  is the slowest rank's (a collective finishes when its last rank does);
- the time budget ends on every rank when it ends on one;
- symmetric-memory arguments are passed through, not cloned (a clone would not be symmetric).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from typing import Any
from typing import Sequence

import torch

from helion_distributed import symm_mem


class _Sync:
    """The few collectives the lockstep harness needs, over one gloo/NCCL group (objects)."""

    def __init__(self, group: Any) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)

    def gather(self, value: Any) -> list[Any]:
        everyone: list[Any] = [None] * self.world_size
        self.dist.all_gather_object(everyone, value, group=self.group)
        return everyone

    def max(self, value: float) -> float:
        return max(self.gather(float(value)))

    def any(self, flag: bool) -> bool:
        return any(self.gather(bool(flag)))

    def broadcast(self, value: Any) -> Any:
        return self.gather(value)[0]


def _clone(value: Any) -> Any:
    """Clone the tensors of ``value`` except symmetric-memory ones (scratch the kernel rewrites;
    a clone would live in ordinary memory and could not be rendezvoused)."""
    if isinstance(value, torch.Tensor):
        if symm_mem.is_symm_mem_tensor(value):
            return value
        return value.clone()
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_clone(v) for v in value)
    return value


def _harness_class() -> type:
    from helion.autotuner import benchmarking as bm

    class LockstepHarness(bm.BenchmarkHarness):
        """``BenchmarkHarness`` whose decisions are the same on every rank of ``group``."""

        def __init__(self, *args: Any, sync: _Sync, **kwargs: Any) -> None:
            kwargs["isolation"] = "inprocess"
            super().__init__(*args, **kwargs)
            self.sync = sync
            self.batches = 0

        def _choose_isolation(self) -> str:
            return "inprocess"

        def _out_of_time(self) -> bool:
            return self.sync.any(super()._out_of_time())

        def _run_default(self, default: Any) -> tuple[Any, dict[int, Any]]:
            fn = self.bound.compile_config(default)
            call_args = _clone(self.args)
            output = fn(*call_args)
            bm.synchronize(self.device)
            return bm._detach_tree(output), bm.mutated_arguments(self.args, call_args)

        def evaluate(self, configs: Sequence[Any]) -> list[float]:
            from helion.autotuner.search.base import config_key

            keys = self.sync.gather([config_key(c) for c in configs])
            if any(k != keys[0] for k in keys):
                raise RuntimeError(
                    "distributed autotuning diverged: the ranks proposed different configs "
                    f"(batch {self.batches}); every rank must tune the same kernel with the same arguments"
                )
            self.batches += 1
            return super().evaluate(configs)

        def _measure(
            self,
            config: Any,
            *,
            first_run_done: bool,
            accuracy_checked: bool,
            compile_seconds: float | None,
        ) -> Any:
            status, reason, fn = "ok", "", None
            start = time.perf_counter()
            try:
                fn = self.bound.compile_config(config)
            except Exception as error:
                status, reason = bm.classify_error(error, "compile")
            compile_seconds = time.perf_counter() - start
            failure = self._agree(config, status, reason, compile_seconds)
            if failure is not None:
                return failure
            try:
                call_args = _clone(self.args)
                output = bm._call_and_sync(fn, call_args, self.device)
                if self.baseline is not None:
                    problem = self.baseline.check(output, call_args)
                    if problem is not None:
                        status, reason = "inaccurate", problem
            except Exception as error:
                status, reason = bm.classify_error(error, "run")
            failure = self._agree(config, status, reason, compile_seconds)
            if failure is not None:
                return failure
            ms = self._time(fn, self.profile.benchmark_target_ms)
            if not math.isfinite(ms) or ms < 0:
                return bm.CandidateResult(
                    config,
                    "error",
                    reason=f"benchmark returned {ms!r}",
                    compile_seconds=compile_seconds,
                )
            from helion.autotuner.search.base import config_key

            self._estimates[config_key(config)] = ms
            return bm.CandidateResult(config, "ok", time_ms=ms, compile_seconds=compile_seconds)

        def _agree(
            self, config: Any, status: str, reason: str, compile_seconds: float | None
        ) -> Any:
            outcomes = self.sync.gather((status, reason))
            for rank, (their_status, their_reason) in enumerate(outcomes):
                if their_status != "ok":
                    return bm.CandidateResult(
                        config,
                        their_status,
                        reason=f"on rank {rank}: {their_reason}",
                        compile_seconds=compile_seconds,
                    )
            return None

        def _time(self, fn: Any, target_ms: float, estimate_ms: float | None = None) -> float:
            call_args = _clone(self.args)
            fn(*call_args)  # warm-up
            bm.synchronize(self.device)
            start = time.perf_counter()
            fn(*call_args)
            bm.synchronize(self.device)
            estimate = self.sync.max((time.perf_counter() - start) * 1000)
            repeat = max(3, min(200, int(target_ms / max(estimate, 1e-3))))
            samples = []
            for _ in range(repeat):
                start = time.perf_counter()
                fn(*call_args)
                bm.synchronize(self.device)
                samples.append((time.perf_counter() - start) * 1000)
            return self.sync.max(statistics.median(samples))

        def rebenchmark(self, configs: Sequence[Any], rounds: int = 5) -> list[float]:
            compiled = []
            for config in configs:
                try:
                    fn = self.bound.compile_config(config)
                    ok = True
                except Exception:
                    fn, ok = None, False
                compiled.append(fn if all(self.sync.gather(ok)) else None)
            samples: list[list[float]] = [[] for _ in configs]
            per_round = self.profile.rebenchmark_target_ms / max(rounds, 1)
            for round_index in range(rounds):
                if round_index >= 1 and self._out_of_time():
                    break
                order = list(range(len(configs)))
                shift = round_index % max(len(order), 1)
                for i in order[shift:] + order[:shift]:
                    if compiled[i] is not None:
                        samples[i].append(self._time(compiled[i], per_round))
            return [statistics.median(s) if s else math.inf for s in samples]

    return LockstepHarness


def _group_of(args: Sequence[Any]) -> Any:
    from helion.language import ProcessGroupName

    for arg in args:
        if isinstance(arg, ProcessGroupName):
            return arg.value
    return None


def autotune(
    kernel: Any,
    args: Sequence[Any],
    *,
    group: Any = None,
    search: str | type | None = None,
    effort: str = "quick",
    seed: int | None = None,
    configs: Sequence[Any] | None = None,
    set_config: bool = True,
    **options: Any,
) -> Any:
    """Tune ``kernel`` for ``args`` on every rank of ``group`` together; returns the winning
    ``helion.Config``, the same on every rank (and, with ``set_config``, makes the kernel use it).

    Args:
        kernel: a ``helion.Kernel`` (or one of the ready kernels' ``*_kernel`` objects).
        args: its arguments; every rank passes its own (same shapes everywhere).
        group: the group whose ranks tune together; default: the kernel's
            ``hl.ProcessGroupName`` argument, else the default group.
        search: a search name or class of ``helion.autotuner`` (default: the effort's).
        effort: ``"quick"`` or ``"full"`` (the effort profile of the search).
        seed: the search seed; default: rank 0's random one.
        configs: tune among exactly these configs (a finite search).
        set_config: make ``kernel`` use the winner for these argument shapes.
        **options: passed to the search (``max_evaluations=``, ...).

    Raises:
        RuntimeError: the ranks diverged (they proposed different configs or picked different
            winners), e.g. because they passed differently shaped arguments.
    """
    from helion.autotuner.effort import get_effort_profile
    from helion.autotuner.progress import AutotuneLog
    from helion.autotuner.search import FiniteSearch
    from helion.autotuner.search import get_search
    from helion.autotuner.search.base import config_key
    from helion.autotuner.search.base import fresh_seed

    args = kernel.normalize_args(*args) if hasattr(kernel, "normalize_args") else tuple(args)
    bound = kernel.bind(args)
    pg = symm_mem.resolve_group(group if group is not None else _group_of(args))
    sync = _Sync(pg)
    settings = bound.settings
    profile = get_effort_profile(effort if effort != "none" else "quick")
    if profile.budget_seconds is not None:
        profile = profile.replace(budget_seconds=None)  # a wall-clock budget differs per rank
    log = AutotuneLog(settings, kernel_name=bound.kernel.name)
    seed = sync.broadcast(fresh_seed() if seed is None else int(seed))
    harness_cls = _harness_class()
    with harness_cls(
        bound, args, settings=settings, profile=profile, log=log, sync=sync
    ) as harness:
        if configs is not None:
            searcher: Any = FiniteSearch(
                bound.config_spec,
                harness,
                configs=[bound.normalize(c) for c in configs],
                profile=profile,
                **options,
            )
        else:
            search_cls = get_search(search or profile.default_search)
            seeds = [bound.config_spec.default_config()]
            with contextlib.suppress(Exception):  # backend heuristics are optional
                seeds.extend(bound.seed_configs())
            searcher = search_cls(
                bound.config_spec,
                harness,
                profile=profile,
                seed=seed,
                seed_configs=seeds,
                **options,
            )
        winner = searcher.run()
    winners = sync.gather(config_key(winner))
    if any(w != winners[0] for w in winners):
        raise RuntimeError(
            f"distributed autotuning diverged: the ranks picked different configs {sorted(set(winners))}"
        )
    winner = bound.normalize(winner)
    if set_config:
        bound.set_config(winner)
    if sync.rank == 0:
        log.info(
            "%s: lockstep autotuning over %d ranks picked %s",
            bound.kernel.name,
            sync.world_size,
            winner,
        )
    return winner
