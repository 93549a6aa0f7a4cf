"""Time variants of a memory-bound kernel against each other and torch.compile, in one run (GPU
only): the questions that a quick autotune cannot answer, because they are about the generated
code or the way the kernel is written, not its config.

    python benchmarks/variant_probe.py            # every question
    python benchmarks/variant_probe.py geglu      # one

geglu: the code generator issues every load of a straight run before the math (`loads_first`);
the same kernel and configs are timed with that order and with the program order.

nan_max: softmax and cross_entropy under the configs the quick searches picked, with the
NaN-propagating max reductions they are generated with (torch's semantics: `tl.reduce` with a
`tl.maximum(..., propagate_nan=ALL)` combine) and with plain `tl.max` / `tl.maximum` (what the
code generator emitted before): does returning NaN as torch does cost time?

embedding: the 8192-token gather against torch eager (index_select), torch.compile and a copy of
the same bytes, under the last quick picks and under persistent grids whose tile loop Triton may
software-pipeline (`num_stages` on the persistent `tl.range`, patched in here): can a program
that walks many rows prefetch the next row while it stores the current one?

rope: the example tiles heads over max(q heads, k heads) and masks the k heads it does not have
(8 of 32 here: 3/4 of the k lanes idle); `rope_split` gives q and k a top-level loop each, in the
same launch; `rope_loads_first` loads k before storing q.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import add as add_example
import cross_entropy as cross_entropy_example
import embedding as embedding_example
import geglu as geglu_example
import rope as rope_example
import softmax as softmax_example
import swiglu as swiglu_example
from _timing import Timer
from _timing import copy_bandwidth_tbs
from _timing import copy_fn
from run import BENCHES

import helion
import helion.language as hl
import helion_triton.codegen as triton_codegen
import helion_triton.dispatch as triton_dispatch
import helion_triton.reductions as triton_reductions


@helion.kernel()
def rope_split(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    b, s, h, d = q.shape
    half = hl.specialize(d) // 2
    hk = k.size(2)
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    for tile_b, tile_s, tile_h in hl.tile([b, s, h]):
        c_lo = cos[tile_s, :half].to(torch.float32)[None, :, None, :]
        c_hi = cos[tile_s, half:].to(torch.float32)[None, :, None, :]
        s_lo = sin[tile_s, :half].to(torch.float32)[None, :, None, :]
        s_hi = sin[tile_s, half:].to(torch.float32)[None, :, None, :]
        x_lo = q[tile_b, tile_s, tile_h, :half].to(torch.float32)
        x_hi = q[tile_b, tile_s, tile_h, half:].to(torch.float32)
        q_out[tile_b, tile_s, tile_h, :half] = (x_lo * c_lo - x_hi * s_lo).to(q.dtype)
        q_out[tile_b, tile_s, tile_h, half:] = (x_hi * c_hi + x_lo * s_hi).to(q.dtype)
    for tile_b, tile_s, tile_h in hl.tile([b, s, hk]):
        c_lo = cos[tile_s, :half].to(torch.float32)[None, :, None, :]
        c_hi = cos[tile_s, half:].to(torch.float32)[None, :, None, :]
        s_lo = sin[tile_s, :half].to(torch.float32)[None, :, None, :]
        s_hi = sin[tile_s, half:].to(torch.float32)[None, :, None, :]
        x_lo = k[tile_b, tile_s, tile_h, :half].to(torch.float32)
        x_hi = k[tile_b, tile_s, tile_h, half:].to(torch.float32)
        k_out[tile_b, tile_s, tile_h, :half] = (x_lo * c_lo - x_hi * s_lo).to(k.dtype)
        k_out[tile_b, tile_s, tile_h, half:] = (x_hi * c_hi + x_lo * s_hi).to(k.dtype)
    return q_out, k_out


@helion.kernel()
def rope_loads_first(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    b, s, h, d = q.shape
    half = hl.specialize(d) // 2
    hk = k.size(2)
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    for tile_b, tile_s, tile_h in hl.tile([b, s, max(h, hk)]):
        c_lo = cos[tile_s, :half].to(torch.float32)[None, :, None, :]
        c_hi = cos[tile_s, half:].to(torch.float32)[None, :, None, :]
        s_lo = sin[tile_s, :half].to(torch.float32)[None, :, None, :]
        s_hi = sin[tile_s, half:].to(torch.float32)[None, :, None, :]
        q_valid = (tile_h.index < h)[None, None, :, None]
        k_valid = (tile_h.index < hk)[None, None, :, None]
        lo = [tile_b, tile_s, tile_h, slice(None, half)]
        hi = [tile_b, tile_s, tile_h, slice(half, None)]
        q_lo = hl.load(q, lo, extra_mask=q_valid).to(torch.float32)
        q_hi = hl.load(q, hi, extra_mask=q_valid).to(torch.float32)
        k_lo = hl.load(k, lo, extra_mask=k_valid).to(torch.float32)
        k_hi = hl.load(k, hi, extra_mask=k_valid).to(torch.float32)
        hl.store(q_out, lo, (q_lo * c_lo - q_hi * s_lo).to(q_out.dtype), extra_mask=q_valid)
        hl.store(q_out, hi, (q_hi * c_hi + q_lo * s_hi).to(q_out.dtype), extra_mask=q_valid)
        hl.store(k_out, lo, (k_lo * c_lo - k_hi * s_lo).to(k_out.dtype), extra_mask=k_valid)
        hl.store(k_out, hi, (k_hi * c_hi + k_lo * s_hi).to(k_out.dtype), extra_mask=k_valid)
    return q_out, k_out


def _program_order(nodes, fixed=frozenset()):  # the emission order before loads_first
    return list(nodes)


class Probe:
    def __init__(self) -> None:
        self.device = torch.device("cuda")
        self.timer = Timer(self.device)
        self.copy = copy_bandwidth_tbs(self.timer, queued=True)
        print(f"copy {self.copy:.3f} TB/s (queued)")

    def time(self, label: str, bench_name: str, fn, args, expected) -> None:
        bench = BENCHES[bench_name]
        got = fn(*args)
        pairs = (
            zip(got, expected, strict=True) if isinstance(expected, tuple) else [(got, expected)]
        )
        for g, w in pairs:
            torch.testing.assert_close(g.float(), w.float(), atol=bench.atol, rtol=bench.rtol)
        ms = self.timer.median_ms(lambda: fn(*args), queued=True)
        rate = bench.work(args) / (ms * 1e-3) / 1e12
        print(
            f"{label:62} {ms * 1e3:8.2f} us  {rate:.3f} TB/s  {rate / self.copy:6.1%}", flush=True
        )

    def compiled(self, bench_name: str, args, expected) -> None:
        fn = torch.compile(BENCHES[bench_name].reference, mode="max-autotune-no-cudagraphs")
        self.time("torch.compile", bench_name, fn, args, expected)

    def kernel(self, label: str, bench_name: str, kernel, config: dict, args, expected) -> None:
        run = kernel.bind(args).compile_config(helion.Config(**config))
        self.time(f"{label} {config}", bench_name, run, args, expected)


def _loads_first_against_program_order(
    probe: Probe, name: str, kernel, configs: list, compiled: bool = True
) -> None:
    args = BENCHES[name].make_args(probe.device)
    expected = BENCHES[name].reference(*args)
    if compiled:
        probe.compiled(name, args, expected)
    for config in configs:
        probe.kernel(f"{name} loads first", name, kernel, config, args, expected)
    loads_first = triton_codegen.loads_first
    triton_codegen.loads_first = _program_order
    try:
        program_order = helion.kernel(kernel.fn)  # its own bound kernels and code
        for config in configs:
            probe.kernel(f"{name} program order", name, program_order, config, args, expected)
    finally:
        triton_codegen.loads_first = loads_first


def geglu(probe: Probe) -> None:
    configs = [
        {"block_sizes": [1, 2048], "num_warps": 4},
        {"block_sizes": [1, 1024], "num_warps": 4},
        {"block_sizes": [1, 2048], "num_warps": 8},
    ]
    _loads_first_against_program_order(probe, "geglu", geglu_example.geglu, configs)


def pointwise(probe: Probe) -> None:
    """add and swiglu under the configs the quick search picked, both orders of emission."""
    _loads_first_against_program_order(
        probe,
        "swiglu",
        swiglu_example.swiglu,
        [
            {"block_sizes": [2, 1024], "num_warps": 4, "maxnreg": 64},
            {"block_sizes": [1, 2048], "num_warps": 4},
            {"block_sizes": [1, 2048], "num_warps": 4, "loop_orders": [[1, 0]]},
        ],
        compiled=False,
    )
    _loads_first_against_program_order(
        probe,
        "add",
        add_example.add,
        [
            {"block_sizes": [4, 1024], "num_warps": 4},
            {
                "block_sizes": [16, 1024],
                "num_warps": 32,
                "num_stages": 2,
                "pid_type": "xyz",
                "l2_groupings": [2],
            },
        ],
        compiled=False,
    )


def rope(probe: Probe) -> None:
    args = BENCHES["rope"].make_args(probe.device)
    expected = BENCHES["rope"].reference(*args)
    probe.compiled("rope", args, expected)
    for config in (
        {"block_sizes": [1, 1, 32], "num_warps": 4},
        {"block_sizes": [1, 1, 32], "num_warps": 8},
        {"block_sizes": [1, 1, 16], "num_warps": 4},
        {"block_sizes": [1, 2, 32], "num_warps": 8},
    ):
        probe.kernel("rope", "rope", rope_example.rope, config, args, expected)
        probe.kernel("rope_loads_first", "rope", rope_loads_first, config, args, expected)
    for config in (
        {"block_sizes": [1, 1, 32, 1, 1, 8], "num_warps": 4},
        {"block_sizes": [1, 1, 16, 1, 2, 8], "num_warps": 4},
        {"block_sizes": [1, 1, 32, 1, 4, 8], "num_warps": 8},
        {"block_sizes": [1, 1, 16, 1, 1, 8], "num_warps": 2},
        {"block_sizes": [1, 2, 32, 1, 8, 8], "num_warps": 8},
    ):
        probe.kernel("rope_split", "rope", rope_split, config, args, expected)


def order(probe: Probe) -> None:
    """Program order and cache policy: which tile a neighbouring program id gets (the grid walks
    the first loop dim fastest by default: for geglu, programs 28 KB apart in memory), and
    evict-first streaming loads next to evict-last tables."""
    args = BENCHES["geglu"].make_args(probe.device)
    expected = BENCHES["geglu"].reference(*args)
    for config in (
        {"block_sizes": [1, 2048], "loop_orders": [[1, 0]]},
        {"block_sizes": [1, 2048], "flatten_loops": [True]},
        {"block_sizes": [1, 2048], "load_eviction_policies": ["first", "first"]},
        {
            "block_sizes": [1, 2048],
            "loop_orders": [[1, 0]],
            "load_eviction_policies": ["first", "first"],
        },
    ):
        probe.kernel("geglu", "geglu", geglu_example.geglu, config, args, expected)
    args = BENCHES["rope"].make_args(probe.device)
    expected = BENCHES["rope"].reference(*args)
    streaming = ["last"] * 4 + ["first"] * 4
    for config in (
        {"block_sizes": [1, 1, 32], "loop_orders": [[1, 0, 2]]},
        {"block_sizes": [1, 1, 32], "load_eviction_policies": streaming},
        {
            "block_sizes": [1, 1, 32],
            "loop_orders": [[1, 0, 2]],
            "load_eviction_policies": streaming,
        },
        {
            "block_sizes": [1, 2, 32],
            "num_warps": 8,
            "loop_orders": [[1, 0, 2]],
            "load_eviction_policies": streaming,
        },
    ):
        probe.kernel("rope", "rope", rope_example.rope, config, args, expected)


def _plain_max_partial(self, ctx, x, dim, keepdim, dtype):  # the generator's code before NaN
    if self.name in ("amax", "amin"):
        keep = ", keep_dims=True" if keepdim else ""
        return f"tl.{'max' if self.name == 'amax' else 'min'}({x}, {dim}{keep})"
    return _nan_partial(self, ctx, x, dim, keepdim, dtype)


_nan_partial = triton_reductions.ReductionKind.partial


def nan_max(probe: Probe) -> None:
    cases = {
        "softmax": (
            softmax_example.softmax,
            [
                {
                    "block_sizes": [1],
                    "reduction_loops": [None],
                    "num_warps": 16,
                    "num_stages": 2,
                    "indexing": ["tensor_descriptor", "tensor_descriptor"],
                    "load_eviction_policies": ["last"],
                },
                {
                    "block_sizes": [1],
                    "reduction_loops": [None],
                    "num_warps": 4,
                    "num_stages": 1,
                    "indexing": ["block_ptr", "tensor_descriptor"],
                    "load_eviction_policies": ["last"],
                },
            ],
        ),
        "cross_entropy": (
            cross_entropy_example.cross_entropy,
            [  # the ninth session's pick, then the fifth's (0.501 ms on another H200)
                {
                    "block_sizes": [1],
                    "reduction_loops": [4096],
                    "num_warps": 1,
                    "num_stages": 2,
                    "indexing": ["pointer", "tensor_descriptor", "block_ptr", "pointer"],
                    "load_eviction_policies": ["last", "", ""],
                },
                {
                    "block_sizes": [1],
                    "reduction_loops": [4096],
                    "num_warps": 2,
                    "num_stages": 3,
                    "indexing": ["pointer", "block_ptr", "block_ptr", "pointer"],
                    "load_eviction_policies": ["", "", ""],
                },
            ],
        ),
    }
    for name, (kernel, configs) in cases.items():
        args = BENCHES[name].make_args(probe.device)
        expected = BENCHES[name].reference(*args)
        for config in configs:
            probe.kernel(f"{name} NaN max", name, kernel, config, args, expected)
        propagate = triton_reductions._PROPAGATE_NAN
        triton_reductions.ReductionKind.partial = _plain_max_partial
        triton_reductions._PROPAGATE_NAN = ""
        try:
            plain = helion.kernel(kernel.fn)  # its own bound kernels and code
            for config in configs:
                probe.kernel(f"{name} plain max", name, plain, config, args, expected)
        finally:
            triton_reductions.ReductionKind.partial = _nan_partial
            triton_reductions._PROPAGATE_NAN = propagate
        for config in configs:  # again, for drift
            probe.kernel(f"{name} NaN max", name, kernel, config, args, expected)


class _PipelinedPersistentLoop:
    """Emit the persistent grid's tile loop as ``tl.range(..., num_stages=stages)``."""

    def __init__(self, stages: int) -> None:
        self.stages = stages
        self.original = triton_dispatch._persistent

    def __enter__(self) -> None:
        original, stages = self.original, self.stages

        def patched(cg, loops, pid_type, barrier):
            emit = cg.emit

            def emit_with_stages(line: str, *a, **k):
                if line.startswith("for virtual_pid"):  # "for v in tl.range(a, b[, c]):"
                    line = line[: -len("):")] + f", num_stages={stages}):"
                return emit(line, *a, **k)

            cg.emit = emit_with_stages
            try:
                return original(cg, loops, pid_type, barrier)
            finally:
                cg.emit = emit

        triton_dispatch._persistent = patched

    def __exit__(self, *exc_info) -> None:
        triton_dispatch._persistent = self.original


def embedding(probe: Probe) -> None:
    name = "embedding"
    args = BENCHES[name].make_args(probe.device)
    expected = BENCHES[name].reference(*args)
    nbytes = BENCHES[name].work(args) // 2
    copy = copy_fn(nbytes, probe.device)
    ms = probe.timer.median_ms(copy, queued=True)
    print(f"{'a copy of the same bytes':62} {ms * 1e3:8.2f} us  {2 * nbytes / ms / 1e9:.3f} TB/s")
    probe.time("torch eager (F.embedding)", name, BENCHES[name].reference, args, expected)
    probe.compiled(name, args, expected)
    plain = [
        {"block_sizes": [1, 4096], "num_warps": 4},
        {"block_sizes": [64, 1024], "num_warps": 32, "loop_orders": [[1, 0]]},
        {"block_sizes": [1, 4096], "num_warps": 4, "load_eviction_policies": ["", "first"]},
    ]
    for config in plain:
        probe.kernel(name, name, embedding_example.embedding, config, args, expected)
    persistent = []
    for pid_type in ("persistent_interleaved", "persistent_blocked"):
        for multiplier in (1, 2, 4, 8):
            persistent.append(
                {
                    "block_sizes": [1, 4096],
                    "num_warps": 4,
                    "pid_type": pid_type,
                    "num_sm_multiplier": multiplier,
                }
            )
    persistent.append(
        {"block_sizes": [2, 4096], "num_warps": 8, "pid_type": "persistent_interleaved"}
    )
    for stages in (1, 2, 3):
        with _PipelinedPersistentLoop(stages):
            kernel = helion.kernel(embedding_example.embedding.fn)  # its own code per patch
            for config in persistent:
                probe.kernel(f"{name} loop stages={stages}", name, kernel, config, args, expected)


QUESTIONS = {
    "embedding": embedding,
    "nan_max": nan_max,
    "geglu": geglu,
    "rope": rope,
    "order": order,
    "pointwise": pointwise,
}


def main() -> int:
    names = sys.argv[1:] or list(QUESTIONS)
    probe = Probe()
    for name in names:
        QUESTIONS[name](probe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
