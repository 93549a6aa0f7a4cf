"""The ready kernels of helion-distributed (re-exported by ``helion_distributed``)."""

from __future__ import annotations

from helion_distributed.kernels.collectives import all_gather
from helion_distributed.kernels.collectives import all_reduce
from helion_distributed.kernels.collectives import reduce_scatter
from helion_distributed.kernels.matmul import all_gather_matmul
from helion_distributed.kernels.matmul import fp8_all_gather_matmul
from helion_distributed.kernels.matmul import fp8_matmul_reduce_scatter
from helion_distributed.kernels.matmul import matmul_reduce_scatter
from helion_distributed.kernels.matmul import mesh_2d
from helion_distributed.kernels.matmul import two_dim_parallel_matmul
from helion_distributed.kernels.norm import all_reduce_bias_rms_norm

__all__ = [
    "all_gather",
    "all_gather_matmul",
    "all_reduce",
    "all_reduce_bias_rms_norm",
    "fp8_all_gather_matmul",
    "fp8_matmul_reduce_scatter",
    "matmul_reduce_scatter",
    "mesh_2d",
    "reduce_scatter",
    "two_dim_parallel_matmul",
]
