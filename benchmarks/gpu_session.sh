#!/usr/bin/env bash
# One batched GPU session, in phases (each fits one device call of at most 10 minutes):
#
#   bash benchmarks/gpu_session.sh check OUT   # Triton suite compiled (all pid_types, TMA), Pallas on GPU
#   bash benchmarks/gpu_session.sh tune  OUT   # CuTe (needs the DSL staged), autotuner timing, distributed ws=1
#   bash benchmarks/gpu_session.sh perf  OUT   # benchmarks/run.py: memory-bound rows
#   bash benchmarks/gpu_session.sh perf2 OUT   # cross entropy, embedding, rope; launch overhead
#   bash benchmarks/gpu_session.sh perf3 OUT   # matmul, fp8 matmul, attention (compute-bound rows)
#   bash benchmarks/gpu_session.sh sweep OUT   # static_shapes=False over 8 row counts
#   bash benchmarks/gpu_session.sh dynamic OUT # static_shapes=False: the example suite, then the sweep
#   bash benchmarks/gpu_session.sh misses OUT  # the rows still short of a target, with torch.compile (~4 min;
#                                              # KERNELS=a,b picks the rows)
#   bash benchmarks/gpu_session.sh overhead OUT  # launch overhead
#   bash benchmarks/gpu_session.sh pallas_call OUT  # the Pallas call path: per-call time, its steps,
#                                                   # the stream ordering under load; then the
#                                                   # torch ops, example kernels and conformance
#                                                   # cases on Pallas
#   bash benchmarks/gpu_session.sh conformance OUT  # helion.testing's cases on the GPU (Triton, Pallas, CuTe)
#   bash benchmarks/gpu_session.sh verify OUT  # check + conformance + torch ops (HELION_TEST_DEVICE) as
#                                              # parallel processes (compiles are CPU-bound; the GPU
#                                              # machine has 16 cores): ~1 call
#   bash benchmarks/gpu_session.sh recheck OUT  # verify's torch ops and Pallas conformance, then the
#                                              # dividing rows (softmax, attention) timed alone
#   bash benchmarks/gpu_session.sh quickcheck OUT  # example suite, torch ops, distributed examples
#                                                 # (ws=1), then host overhead; RANDOM_CONFIGS=N
#                                                 # SEED=S: N random configs a case (default 1, 0)
#   bash benchmarks/gpu_session.sh variants OUT  # benchmarks/variant_probe.py (QUESTIONS picks them)
#   bash benchmarks/gpu_session.sh flush OUT     # copy sizes under a write and a read L2 flush, and
#                                                # KERNELS raced against torch.compile in interleaved rounds
#   bash benchmarks/gpu_session.sh stability OUT # the quick search's picks over RUNS runs against its seeds
#   bash benchmarks/gpu_session.sh profile OUT   # ncu sections of BENCH under CONFIG (benchmarks/profile_config.py)
#   bash benchmarks/gpu_session.sh compare OUT   # BENCH under CONFIG next to torch.compile's kernel: sources,
#                                                # SASS opcode counts, ncu sections (benchmarks/compare_compiled.py)
#
# Logs and JSON go to OUT; a failing step is reported and the next one still runs.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
phase=$1; out=${2:-/tmp/gpu-out}; mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export HELION_AUTOTUNE_PROGRESS_BAR=0
bash benchmarks/gpu_setup.sh > "$out/setup.log" 2>&1 || { cat "$out/setup.log"; exit 1; }
tail -1 "$out/setup.log"
status=0
step() {  # step NAME TIMEOUT CMD...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && status=1
  echo "== $name: rc=$rc in $((SECONDS - start)) s"
  tail -n "${TAIL:-25}" "$out/$name.log"
  return $rc
}
case "$phase" in
  check)
    step triton_check 420 python3 benchmarks/gpu_check.py --backend triton --random 1 --json "$out/triton_check.json"
    step pallas_gpu 120 python3 packages/helion-pallas/tests/gpu_report.py --random 1
    ;;
  tune)
    if python3 -c "import cutlass" 2>/dev/null; then
      step cute_gpu 200 python3 benchmarks/cute_gpu.py --test-kernels
    else
      echo "== cute_gpu: skipped, the CuTe DSL is not staged on this machine"
    fi
    step autotune 200 python3 benchmarks/autotune.py --effort quick --json "$out/autotune.json"
    for f in examples/distributed/*.py; do
      case $f in */_*) continue ;; esac
      TAIL=3 step "dist_$(basename "$f" .py)" 60 python3 -m torch.distributed.run --standalone --nproc-per-node 1 "$f"
    done
    ;;
  perf)  # memory-bound rows with every baseline (~40 s a row: tuning plus torch.compile)
    step run_memory 540 python3 benchmarks/run.py --kernels add,softmax,rms_norm,layer_norm,swiglu,geglu \
      --effort quick --flush "${FLUSH:-write}" --json "$out/run_memory.json" --plot "$out/run_memory.png" --autotune-log "$out/tune"
    ;;
  perf2)  # the other memory-bound rows, and host overhead
    step run_gather 420 python3 benchmarks/run.py --kernels cross_entropy,embedding,rope \
      --effort quick --flush "${FLUSH:-write}" --json "$out/run_gather.json" --autotune-log "$out/tune"
    step launch_overhead 60 python3 benchmarks/launch_overhead.py
    ;;
  perf3)  # compute-bound rows against cuBLAS / _scaled_mm / SDPA flash (torch.compile of the
          # matmuls' max-autotune alone takes minutes: skipped here)
    step run_compute 540 python3 benchmarks/run.py --kernels matmul,matmul_8192,fp8_matmul,attention,attention_causal \
      --effort quick --skip-compile --json "$out/run_compute.json" --plot "$out/run_compute.png"
    ;;
  misses)  # the memory-bound rows that missed a target last time, each with every baseline
    step run_misses 420 python3 benchmarks/run.py --kernels "${KERNELS:-rope,geglu,embedding}" \
      --effort quick --flush "${FLUSH:-write}" --json "$out/run_misses.json" --autotune-log "$out/tune"
    ;;
  stability)  # tune each kernel RUNS times from scratch, then time every pick and seed interleaved:
              # why a pick loses to a seed (benchmarks/pick_stability.py; ~35 s per tuning)
    # EXTRA: one more config (JSON) to race, e.g. for the 8192-token embedding:
    # KERNELS=embedding EXTRA='{"block_sizes": [1, 1024], "num_warps": 2, "loop_orders": [[1, 0]]}'
    TAIL=80 step pick_stability 560 python3 benchmarks/pick_stability.py --kernels "${KERNELS:-swiglu,add,rope}" \
      --runs "${RUNS:-3}" --out "$out/stability" --json "$out/stability.json" ${EXTRA:+--extra "$EXTRA"}
    tar czf "$out/stability_logs.tgz" -C "$out" stability  # subdirectories' files do not come back
    ;;
  flush)  # how the flush moves small kernels' numbers; close races timed in interleaved rounds
    TAIL=60 step flush_probe 540 python3 benchmarks/flush_probe.py --kernels "${KERNELS:-rms_norm,embedding}" \
      --rounds "${ROUNDS:-7}" --json "$out/flush.json" --fresh-tune --autotune-log "$out/tune" \
      --extra 'rms_norm={"block_sizes": [1], "reduction_loops": [null], "num_warps": 16, "num_stages": 1, "indexing": ["block_ptr", "pointer", "pointer"], "load_eviction_policies": ["first", "last"]}'
    tar czf "$out/flush_tune_logs.tgz" -C "$out" tune  # subdirectories' files do not come back
    ;;
  conformance)  # core's conformance cases (helion.testing) on the GPU: Triton, Pallas, and CuTe
                # when the DSL is staged (shared/tools/stage-cutlass.sh), with CuTe's test kernels
    TAIL=8 step conformance_triton 300 python3 benchmarks/conformance_gpu.py --backend triton
    TAIL=8 step conformance_pallas 200 python3 benchmarks/conformance_gpu.py --backend pallas
    if python3 -c "import cutlass" 2>/dev/null; then
      TAIL=8 step conformance_cute 300 python3 benchmarks/conformance_gpu.py --backend cute
      TAIL=8 step cute_gpu 200 python3 benchmarks/cute_gpu.py --test-kernels
    else
      echo "== conformance_cute: skipped, the CuTe DSL is not staged on this machine"
    fi
    ;;
  verify)  # correctness only (timings from parallel processes mean little): shards run at once
    export XLA_PYTHON_CLIENT_PREALLOCATE=false  # two JAX processes share the GPU
    shards=$(python3 -c "import sys; sys.path.insert(0, 'examples'); from _common import SUITE; n=${SHARDS:-4}; print(' '.join(','.join(SUITE[i::n]) for i in range(n)))")
    i=0
    for kernels in $shards; do
      TAIL=12 step "triton_check_$i" 540 python3 benchmarks/gpu_check.py --backend triton --random 1 \
        --kernels "$kernels" --json "$out/triton_check_$i.json" &
      i=$((i + 1))
    done
    for family in empty_slices shared_block_size atomics; do
      TAIL=8 step "conformance_triton_$family" 540 python3 benchmarks/conformance_gpu.py --backend triton \
        --families "$family" &
    done
    for shard in 0 1 2; do  # Pallas compiles each case for longer than Triton: three processes
      TAIL=8 step "conformance_pallas_$shard" 540 python3 benchmarks/conformance_gpu.py --backend pallas \
        --shard "$shard/3" &
    done
    # the torch-table ops (test_torch_ops.py, written for the CPU) with their tensors on the GPU
    for backend in triton pallas; do
      HELION_TEST_DEVICE=cuda TAIL=30 step "torch_ops_$backend" 540 python3 -m pytest -q -p no:cacheprovider \
        --maxfail=200 -rf packages/helion-core/tests/test_torch_ops.py -k "$backend" &
    done
    step pallas_gpu 300 python3 packages/helion-pallas/tests/gpu_report.py --random 1 &
    for job in $(jobs -p); do wait "$job" || status=1; done
    ;;
  recheck)  # the verify phase's torch ops and Pallas conformance alone (the parts that failed or ran
            # out of time), then the rows that divide (softmax, attention) timed with nothing beside
    export XLA_PYTHON_CLIENT_PREALLOCATE=false
    for backend in triton pallas; do
      HELION_TEST_DEVICE=cuda TAIL=12 step "torch_ops_$backend" 300 python3 -m pytest -q -p no:cacheprovider \
        --maxfail=200 -rf packages/helion-core/tests/test_torch_ops.py -k "$backend" &
    done
    for shard in 0 1 2 3; do
      TAIL=6 step "conformance_pallas_$shard" 300 python3 benchmarks/conformance_gpu.py --backend pallas \
        --shard "$shard/4" &
    done
    for job in $(jobs -p); do wait "$job" || status=1; done
    step run_softmax 150 python3 benchmarks/run.py --kernels softmax --effort quick --flush write \
      --json "$out/run_softmax.json"
    step run_attention 200 python3 benchmarks/run.py --kernels attention,attention_causal --effort quick \
      --skip-compile --json "$out/run_attention.json"
    ;;
  quickcheck)  # after CPU-side changes: the example suite (4 processes), torch ops on Triton and the
               # distributed examples at world size 1 (~3 min), then host overhead timed alone
    i=0
    for kernels in $(python3 -c "import sys; sys.path.insert(0, 'examples'); from _common import SUITE; print(' '.join(','.join(SUITE[i::4]) for i in range(4)))"); do
      TAIL=4 step "triton_check_$i" 300 python3 benchmarks/gpu_check.py --backend triton \
        --random "${RANDOM_CONFIGS:-1}" --seed "${SEED:-0}" --kernels "$kernels" &
      i=$((i + 1))
    done
    HELION_TEST_DEVICE=cuda TAIL=4 step torch_ops_triton 300 python3 -m pytest -q -p no:cacheprovider \
      -rf packages/helion-core/tests/test_torch_ops.py -k triton &
    for f in examples/distributed/*.py; do
      case $f in */_*) continue ;; esac
      TAIL=3 step "dist_$(basename "$f" .py)" 120 python3 -m torch.distributed.run --standalone --nproc-per-node 1 "$f"
    done
    for job in $(jobs -p); do wait "$job" || status=1; done
    step launch_overhead 90 python3 benchmarks/launch_overhead.py
    ;;
  variants)  # QUESTIONS="nan_max rope": benchmarks/variant_probe.py's questions (all when unset)
    TAIL=60 step variant_probe 540 python3 benchmarks/variant_probe.py ${QUESTIONS:-}
    ;;
  overhead)  # host time per call
    step launch_overhead 90 python3 benchmarks/launch_overhead.py
    ;;
  pallas_call)  # benchmarks/pallas_call_probe.py alone (timings), then correctness beside each other
    export XLA_PYTHON_CLIENT_PREALLOCATE=false
    TAIL=40 step pallas_call_probe 200 python3 benchmarks/pallas_call_probe.py
    HELION_TEST_DEVICE=cuda TAIL=3 step torch_ops_pallas 300 python3 -m pytest -q -p no:cacheprovider \
      --maxfail=50 -rf packages/helion-core/tests/test_torch_ops.py -k pallas &
    TAIL=3 step pallas_gpu 300 python3 packages/helion-pallas/tests/gpu_report.py --random 1 &
    for shard in 0 1 2; do
      TAIL=3 step "conformance_pallas_$shard" 300 python3 benchmarks/conformance_gpu.py --backend pallas \
        --shard "$shard/3" &
    done
    for job in $(jobs -p); do wait "$job" || status=1; done
    ;;
  profile)  # Nsight Compute sections of one benchmark kernel under one config:
             # BENCH=rope CONFIG='{"block_sizes": [1, 1, 16]}' bash benchmarks/gpu_session.sh profile OUT
    step "ncu_$BENCH" 200 ncu --kernel-name regex:_helion_ --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
      --section LaunchStats --section ComputeWorkloadAnalysis \
      python3 benchmarks/profile_config.py "$BENCH" "$CONFIG"
    ;;
  compare)  # BENCH=geglu CONFIG='{"block_sizes": [1, 2048]}' bash benchmarks/gpu_session.sh compare OUT
    rm -rf "/tmp/tcache_$BENCH"
    TAIL=60 TRITON_CACHE_DIR="/tmp/tcache_$BENCH" step "sass_$BENCH" 300 \
      python3 benchmarks/compare_compiled.py "$BENCH" "$CONFIG" --out "$out/cmp_$BENCH" --sass
    TAIL=120 step "ncu_cmp_$BENCH" 240 ncu --nvtx --nvtx-include "profile/" --section SpeedOfLight \
      --section InstructionStats --section WarpStateStats --section Occupancy --section LaunchStats \
      --section MemoryWorkloadAnalysis python3 benchmarks/compare_compiled.py "$BENCH" "$CONFIG" \
      --out "$out/cmp_$BENCH" --repeat 1
    ;;
  sweep)  # static_shapes=False over 8 row counts, one tuned config each
    step sweep 540 python3 benchmarks/run.py --kernels '' --sweep add,softmax,rms_norm,layer_norm,swiglu,geglu \
      --effort quick --json "$out/sweep.json"
    ;;
  dynamic)  # static_shapes=False: the example suite compiled with sizes as kernel arguments (4
            # processes), then the sweep of 8 row counts for the rows in SWEEP
    i=0
    for kernels in $(python3 -c "import sys; sys.path.insert(0, 'examples'); from _common import SUITE; print(' '.join(','.join(SUITE[i::4]) for i in range(4)))"); do
      TAIL=4 step "dynamic_check_$i" 240 python3 benchmarks/gpu_check.py --backend triton --random 1 --dynamic \
        --kernels "$kernels" &
      i=$((i + 1))
    done
    for job in $(jobs -p); do wait "$job" || status=1; done
    TAIL=40 step sweep 240 python3 benchmarks/run.py --kernels '' --sweep "${SWEEP:-rms_norm,softmax}" \
      --effort quick --json "$out/sweep.json"
    ;;
  examples)
    TAIL=80 step examples_check 540 python3 benchmarks/gpu_check.py --backend triton --random 1 --json "$out/examples_check.json"
    ;;
  *) echo "usage: $0 check|tune|perf|perf2|perf3|misses|flush|stability|overhead|pallas_call|profile|compare|sweep|dynamic|examples OUT"; exit 2 ;;
esac
exit $status
