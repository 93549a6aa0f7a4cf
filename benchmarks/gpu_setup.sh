#!/usr/bin/env bash
# Install the workspace packages on the GPU machine, which has no package index: the build
# backend (hatchling) travels as wheels in .whl (ignored by git: pass carry [".whl"]; fill it with
# `pip download hatchling -d .whl --only-binary :all:`), everything else is there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl
python3 -m pip install -q --no-index --no-deps --no-build-isolation \
  -e packages/helion-core -e packages/helion-triton -e packages/helion-pallas -e packages/helion-cute \
  -e packages/helion-distributed
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
