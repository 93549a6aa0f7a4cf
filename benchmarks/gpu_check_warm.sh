#!/usr/bin/env bash
# Compile the example suite in N parallel gpu_check processes (Triton's compile cache and the
# generated-module cache are shared on disk), so that the one sequential gpu_check run after it,
# whose timings are reported, mostly loads compiled kernels.
#
#   bash benchmarks/gpu_check_warm.sh N OUT [gpu_check options...]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=$1; out=$2; shift 2
mkdir -p "$out"
shards=$(python3 - "$jobs" <<'PY'
import sys
sys.path.insert(0, "examples")
from _common import SUITE
n = int(sys.argv[1])
print(" ".join(",".join(SUITE[i::n]) for i in range(n)))
PY
)
i=0
for shard in $shards; do
  python3 benchmarks/gpu_check.py --kernels "$shard" "$@" > "$out/warm_$i.log" 2>&1 &
  i=$((i + 1))
done
wait
echo "warmed $i shards"
