"""Autotuning a distributed kernel in lockstep on every rank.

A distributed kernel cannot be tuned rank by rank: every candidate launch is collective (the
ranks wait for each other inside it), so every rank must try the same configs in the same order,
make the same number of calls per candidate, and pick the same winner. This module is a thin
layer over ``helion.autotuner``: its searches and benchmark harness, with a harness whose every
decision is reduced across the group:

- the search seed is rank 0's; the configs of each batch are checked to be identical everywhere;
- before anything runs, the ranks compare their arguments (kinds, shapes, dtypes, symmetric or
  not), configs, effort, search and options, and agree on errors (one rank's bad argument stops
  every rank, none is left waiting in a collective);
- candidates run in process (no forked screening: children of different ranks would not pair up);
- a candidate fails everywhere when it fails to compile, run or pass the accuracy check anywhere,
  or when one of its waits timed out anywhere (compiled kernels record a timeout in the signal
  pad and return: the pads of the symmetric arguments and the remote copies' pads are checked
  after every run); after a failed run every rank clears its pads' kernel slots;
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
from helion_distributed.errors import DistributedAutotuneError


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


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [t for v in value for t in _tensors(v)]
    return []


def _describe(value: Any) -> str:
    """What of an argument must be the same on every rank: a tensor's shape, dtype, device type
    and whether it is symmetric; a group's name; the kind of anything else (an ``hl.constexpr``
    rank and runtime scalars may differ)."""
    from helion.language import ConstExpr
    from helion.language import ProcessGroupName

    if isinstance(value, torch.Tensor):
        where = "symmetric" if symm_mem.is_symm_mem_tensor(value) else "ordinary"
        return f"{where} {value.device.type} {value.dtype} tensor of shape {list(value.shape)}"
    if isinstance(value, ProcessGroupName):
        return f"hl.ProcessGroupName({value.value!r})"
    if isinstance(value, ConstExpr):
        return type(value).__name__
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return f"{type(value).__name__}[{', '.join(_describe(v) for v in value)}]"
    return type(value).__name__


def _text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _together(sync: _Sync, where: str, mine: Any, problem: BaseException | None) -> list[Any]:
    """Every rank's ``mine``, once every rank has said whether its setup step worked: raises on
    every rank (this rank's own error, else ``DistributedAutotuneError`` naming the rank that
    failed) when one failed, so that no rank goes on to wait for the others in a collective."""
    everyone = sync.gather((mine, None if problem is None else _text(problem)))
    if problem is not None:
        raise problem
    for rank, (_, theirs) in enumerate(everyone):
        if theirs is not None:
            raise DistributedAutotuneError(
                f"{where}: rank {rank} failed to set up, so every rank stops: {theirs}"
            )
    return [value for value, _ in everyone]


def _same_arguments(sync: _Sync, where: str, everyone: list[list[str]]) -> None:
    mine = everyone[sync.rank]
    for rank, theirs in enumerate(everyone):
        if theirs == mine:
            continue
        if len(theirs) != len(mine):
            detail = f"{len(mine)} arguments on rank {sync.rank}, {len(theirs)} on rank {rank}"
        else:
            index = next(i for i, a in enumerate(theirs) if a != mine[i])
            detail = (
                f"argument {index}: {mine[index]} on rank {sync.rank}, "
                f"{theirs[index]} on rank {rank}"
            )
        raise DistributedAutotuneError(
            f"{where} diverged: the ranks passed different arguments ({detail}); every rank "
            "must tune the same kernel with arguments of the same shapes and dtypes"
        )


def _same_setup(sync: _Sync, where: str, everyone: list[Any]) -> None:
    mine = everyone[sync.rank]
    for rank, theirs in enumerate(everyone):
        if theirs != mine:
            raise DistributedAutotuneError(
                f"{where} diverged: the ranks asked for different tuning (effort, search, "
                f"configs, options): {mine} on rank {sync.rank}, {theirs} on rank {rank}"
            )


def _harness_class() -> type:
    from helion.autotuner import benchmarking as bm

    class LockstepHarness(bm.BenchmarkHarness):
        """``BenchmarkHarness`` whose decisions are the same on every rank of ``group``."""

        def __init__(self, *args: Any, sync: _Sync, **kwargs: Any) -> None:
            kwargs["isolation"] = "inprocess"
            super().__init__(*args, **kwargs)
            self.sync = sync
            self.batches = 0
            self._handles: list[Any] | None = None

        def _pad_handles(self) -> list[Any]:
            """One handle per symmetric allocation among the arguments (``autotune`` makes them
            before anything runs: a rendezvous not made yet is a collective)."""
            if self._handles is None:
                handles: dict[int, Any] = {}
                for tensor in _tensors(self.args):
                    if symm_mem.is_symm_mem_tensor(tensor):
                        handle = symm_mem.rendezvous(tensor, self.sync.group)
                        handles.setdefault(int(handle.signal_pad_ptrs[handle.rank]), handle)
                self._handles = list(handles.values())
            return self._handles

        def _check_timeouts(self) -> None:
            """Raise ``DistributedTimeout`` when a wait of the last launches timed out on this
            rank (compiled kernels record it in the signal pad and return; the ref backend and
            eager mode raised already). Every word is read and reset, the first error raised."""
            from helion_distributed._host_impl import check_kernel_timeouts
            from helion_distributed.remote_copy import check_timeouts as check_remote_copies

            found: BaseException | None = None
            what = f"{self.bound.kernel.name} (a lockstep autotuning candidate)"
            for handle in self._pad_handles():
                try:
                    check_kernel_timeouts(handle, what)
                except Exception as error:
                    found = found or error
            try:
                check_remote_copies(self.sync.group)
            except Exception as error:
                found = found or error
            if found is not None:
                raise found

        def _clear_pads(self) -> None:
            """After a launch that failed on some rank: the waits that gave up (or never had a
            partner) may have left signals in the pads, which would pair up wrongly with the next
            candidate's. Every rank has returned from its launch (the agreement before this is
            a collective), so each zeroes its own pads' kernel slots, then waits for the rest."""
            for handle in self._pad_handles():
                pad = handle.get_signal_pads()[handle.rank]
                slots = int(getattr(handle, "kernel_signal_slots", pad.numel()))
                pad[:slots].zero_()
            bm.synchronize(self.device)
            self.sync.gather(None)

        def _choose_isolation(self) -> str:
            return "inprocess"

        def _out_of_time(self) -> bool:
            return self.sync.any(super()._out_of_time())

        def _run_default(self, default: Any) -> tuple[Any, dict[int, Any]]:
            """The accuracy baseline: the default config, run once on every rank. It fails on
            every rank (turning the accuracy check off everywhere) when it fails or times out
            on any."""
            problem: BaseException | None = None
            try:
                fn = self.bound.compile_config(default)
                call_args = _clone(self.args)
                output = fn(*call_args)
                bm.synchronize(self.device)
                self._check_timeouts()
            except Exception as error:
                problem = error
            outcomes = self.sync.gather(None if problem is None else _text(problem))
            failed = [(rank, text) for rank, text in enumerate(outcomes) if text is not None]
            if failed:
                self._clear_pads()
                if problem is not None:
                    raise problem
                raise RuntimeError(f"on rank {failed[0][0]}: {failed[0][1]}")
            return bm._detach_tree(output), bm.mutated_arguments(self.args, call_args)

        def evaluate(self, configs: Sequence[Any]) -> list[float]:
            from helion.autotuner.search.base import config_key

            keys = self.sync.gather([config_key(c) for c in configs])
            if any(k != keys[0] for k in keys):
                raise DistributedAutotuneError(
                    "distributed autotuning diverged: the ranks proposed different configs "
                    f"(batch {self.batches}); every rank must tune the same kernel with the same arguments"
                )
            self.batches += 1
            return super().evaluate(configs)

        def _compile(self, config: Any) -> tuple[Any, Any, float]:
            """(failure on any rank or None, the compiled config, seconds)."""
            status, reason, fn = "ok", "", None
            start = time.perf_counter()
            try:
                fn = self.bound.compile_config(config)
            except Exception as error:
                status, reason = bm.classify_error(error, "compile")
            seconds = time.perf_counter() - start
            return self._agree(config, status, reason, seconds), fn, seconds

        def _first_run(self, config: Any, fn: Any, compile_seconds: float | None) -> Any:
            """One run, its timeouts and its accuracy; the failure on any rank, or None."""
            status, reason = "ok", ""
            try:
                call_args = _clone(self.args)
                output = bm._call_and_sync(fn, call_args, self.device)
                self._check_timeouts()
                if self.baseline is not None:
                    problem = self.baseline.check(output, call_args)
                    if problem is not None:
                        status, reason = "inaccurate", problem
            except Exception as error:
                status, reason = bm.classify_error(error, "run")
            return self._agree(config, status, reason, compile_seconds, launched=True)

        def check(self, config: Any) -> Any:
            """Compile ``config`` and run it once on every rank: the failure on any rank (as a
            ``CandidateResult``), or None when it worked everywhere."""
            failure, fn, seconds = self._compile(config)
            if failure is not None:
                return failure
            return self._first_run(config, fn, seconds)

        def _measure(
            self,
            config: Any,
            *,
            first_run_done: bool,
            accuracy_checked: bool,
            compile_seconds: float | None,
        ) -> Any:
            failure, fn, compile_seconds = self._compile(config)
            if failure is not None:
                return failure
            failure = self._first_run(config, fn, compile_seconds)
            if failure is not None:
                return failure
            status, reason, ms = "ok", "", math.inf
            try:
                ms = self._time(fn, self.profile.benchmark_target_ms)
            except Exception as error:
                status, reason = bm.classify_error(error, "run")
            failure = self._agree(config, status, reason, compile_seconds, launched=True)
            if failure is not None:
                return failure
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
            self,
            config: Any,
            status: str,
            reason: str,
            compile_seconds: float | None,
            *,
            launched: bool = False,
        ) -> Any:
            """The first rank's failure, the same on every rank (None when all went well);
            after a failed launch (``launched``) the pads are cleared."""
            outcomes = self.sync.gather((status, reason))
            for rank, (their_status, their_reason) in enumerate(outcomes):
                if their_status != "ok":
                    if launched:
                        self._clear_pads()
                    return bm.CandidateResult(
                        config,
                        their_status,
                        reason=f"on rank {rank}: {their_reason}",
                        compile_seconds=compile_seconds,
                    )
            return None

        def _time(self, fn: Any, target_ms: float, estimate_ms: float | None = None) -> float:
            """The slowest rank's median time. Every rank makes the same collectives whatever
            happens: a rank whose launch raised or timed out raises after them, the others
            get ``inf``."""
            problem: BaseException | None = None
            call_args = _clone(self.args)
            mine = math.inf
            try:
                fn(*call_args)  # warm-up
                bm.synchronize(self.device)
                start = time.perf_counter()
                fn(*call_args)
                bm.synchronize(self.device)
                mine = (time.perf_counter() - start) * 1000
                self._check_timeouts()
            except Exception as error:
                problem, mine = error, math.inf
            estimate = self.sync.max(mine)
            if problem is not None:
                raise problem
            if not math.isfinite(estimate):
                return math.inf
            repeat = max(3, min(200, int(target_ms / max(estimate, 1e-3))))
            samples = []
            try:
                for _ in range(repeat):
                    start = time.perf_counter()
                    fn(*call_args)
                    bm.synchronize(self.device)
                    samples.append((time.perf_counter() - start) * 1000)
                self._check_timeouts()
                mine = statistics.median(samples)
            except Exception as error:
                problem, mine = error, math.inf
            slowest = self.sync.max(mine)
            if problem is not None:
                raise problem
            return slowest

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
                        try:
                            ms = self._time(compiled[i], per_round)
                        except Exception:
                            ms = math.inf  # the others got inf from _time as well
                        if math.isfinite(ms):
                            samples[i].append(ms)
                        else:  # failed or timed out on some rank: out, on every rank
                            compiled[i], samples[i] = None, []
                            self._clear_pads()
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
        effort: ``"quick"`` or ``"full"`` (the effort profile of the search; ``"high"`` is
            ``"full"``), or ``"none"``: no search, the kernel's default config, checked by
            running it once on every rank.
        seed: the search seed; default: rank 0's random one.
        configs: tune among exactly these configs (a finite search; at least two).
        set_config: make ``kernel`` use the winner for these argument shapes.
        **options: passed to the search (``max_evaluations=``, ...).

    Raises:
        DistributedAutotuneError: (a ``RuntimeError``) the ranks diverged: they passed
            arguments of different shapes, dtypes or kinds, or different configs, effort,
            search or options (checked before anything runs), proposed different configs or
            picked different winners; or another rank failed to set up (its own error is
            raised there, e.g. ``NotEnoughConfigs``).
        helion.exc.NoConfigFound: every candidate failed on some rank (a wait that timed out
            counts as a failure).
    """
    from helion.autotuner.effort import get_effort_profile
    from helion.autotuner.effort import normalize_effort
    from helion.autotuner.progress import AutotuneLog
    from helion.autotuner.search import FiniteSearch
    from helion.autotuner.search import get_search
    from helion.autotuner.search.base import config_key
    from helion.autotuner.search.base import fresh_seed

    pg = symm_mem.resolve_group(group if group is not None else _group_of(args))
    sync = _Sync(pg)
    name = str(getattr(kernel, "name", None) or "kernel")
    where = f"helion_distributed.autotune({name})"
    # what can fail on one rank alone happens between the collectives, each followed by an
    # agreement (`_together`) that stops every rank when one failed. First the arguments: they
    # must match before binding, which may rendezvous symmetric ones (a collective)
    problem: BaseException | None = None
    mine: Any = None
    try:
        proposed_seed = fresh_seed() if seed is None else int(seed)
        args = kernel.normalize_args(*args) if hasattr(kernel, "normalize_args") else tuple(args)
        mine = ([_describe(a) for a in args], proposed_seed)
    except Exception as error:
        problem = error
    everyone = _together(sync, where, mine, problem)
    _same_arguments(sync, where, [a for a, _ in everyone])
    seed = everyone[0][1]  # rank 0's: searches drawn from different seeds would diverge
    setup: Any = None
    harness: Any = None
    searcher: Any = None
    try:
        effort_name = normalize_effort(effort)
        candidates = None
        bound = kernel.bind(args)
        if configs is not None:
            candidates = [bound.normalize(c) for c in configs]
        setup = (
            effort_name,
            getattr(search, "__name__", search),
            None if candidates is None else [config_key(c) for c in candidates],
            repr(sorted(options.items())),
        )
        settings = bound.settings
        profile = get_effort_profile(effort_name if effort_name != "none" else "quick")
        if profile.budget_seconds is not None:
            profile = profile.replace(budget_seconds=None)  # a wall-clock budget differs per rank
        log = AutotuneLog(settings, kernel_name=bound.kernel.name)
        harness = _harness_class()(
            bound, args, settings=settings, profile=profile, log=log, sync=sync
        )
        if candidates is not None:
            searcher = FiniteSearch(
                bound.config_spec, harness, configs=candidates, profile=profile, **options
            )
        elif effort_name != "none":
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
    except Exception as error:
        problem = error
    _same_setup(sync, where, _together(sync, where, setup, problem))
    try:
        # the handles of the symmetric arguments, whose pads are checked after every run: made
        # now, at the same point on every rank (a rendezvous not made yet is a collective)
        harness._pad_handles()
    except Exception as error:
        problem = error
    _together(sync, where, None, problem)
    with harness:
        if searcher is None:  # effort "none": the default config, checked on every rank
            winner = bound.normalize(bound.config_spec.default_config())
            failure = harness.check(winner)
            if failure is not None:
                raise DistributedAutotuneError(
                    f"helion_distributed.autotune({name}, effort='none'): the default config "
                    f"{winner} failed ({failure.status}) {failure.reason}"
                )
        else:
            winner = searcher.run()
    winners = sync.gather(config_key(winner))
    if any(w != winners[0] for w in winners):
        raise DistributedAutotuneError(
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


def is_distributed_kernel(bound: Any, args: Sequence[Any]) -> str | None:
    """Why ``bound`` is a distributed kernel (its launches are collective), or None: it uses one
    of this package's device ops (``hl.all_reduce``, ``hl.wait``, ``hl.make_async_remote_copy``,
    ...), or it takes an ``hl.ProcessGroupName`` argument."""
    from helion.language import ProcessGroupName
    from helion_distributed.language import PROVIDER

    ir = getattr(bound, "ir", None)
    if ir is not None:
        for node in ir.walk():
            op = getattr(node, "op", None)
            if getattr(op, "provider", None) == PROVIDER:
                return f"it uses {op.user_name}"
    for arg in args:
        if isinstance(arg, ProcessGroupName):
            return "it takes an hl.ProcessGroupName argument"
    return None


def refuse_rank_by_rank(bound: Any, args: Sequence[Any]) -> BaseException | None:
    """The error for the ordinary autotuner about to tune a distributed kernel on one rank alone
    (each rank would search with its own seed, on clones of the arguments that are no longer
    symmetric, and every candidate would fail after the whole search), or None."""
    why = is_distributed_kernel(bound, args)
    if why is None:
        return None
    name = getattr(getattr(bound, "kernel", None), "name", None) or "kernel"
    return DistributedAutotuneError(
        f"kernel {name!r} is a distributed kernel ({why}): its launches are collective, so the "
        "ordinary autotuner cannot tune it (each rank would search on its own, on copies of the "
        "symmetric arguments that are not symmetric, and every candidate would fail)",
        hint=(
            "Give it a config (@helion.kernel(config=helion.Config(...)) or "
            "kernel.bind(args).set_config(...)), or tune it on every rank together first with "
            f"helion_distributed.autotune({name}, args), which sets the winner on the kernel."
        ),
    )
