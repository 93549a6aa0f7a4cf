"""2-D parallel matmul on an (sp x tp) mesh: helion_distributed.two_dim_parallel_matmul,
checked against the full product computed from all-gathered shards.

    python -m torch.distributed.run --standalone --nproc-per-node 4 examples/distributed/two_dim_parallel_matmul.py

Rank (sp, tp) holds A[rows of sp, K columns of tp] and B[K rows of tp, :]; the kernel computes
the partial product over its K shard and all-reduces each output tile inside the tensor-parallel
group (hl.all_reduce), so sequence-parallel ranks never communicate. With an even world size the
mesh is (world/2 x 2), otherwise (1 x world).
"""

from __future__ import annotations

import torch
from _dist_common import all_gather_ref
from _dist_common import main
from _dist_common import randn
from _dist_common import tolerance

import helion_distributed as hd


def run(rank: int, world_size: int, device: torch.device) -> None:
    sp, tp = (world_size // 2, 2) if world_size % 2 == 0 else (1, world_size)
    sp_group, tp_group = hd.mesh_2d(sp, tp)
    sp_index, tp_index = divmod(rank, tp)
    m, k, n = 10, 12, 19  # per shard
    a_local = randn(m, k, seed=70 + rank, device=device)
    b_local = randn(k, n, seed=80 + tp_index, device=device)  # the same across sp for one tp
    out = hd.two_dim_parallel_matmul(a_local, b_local, tp_group=tp_group, sp_group=sp_group)
    # reference: gather the K shards of this sp row within the tp group
    a_pieces = torch.empty(tp * m, k, device=device)
    all_gather_ref(a_pieces, a_local, group=tp_group)
    b_pieces = torch.empty(tp * k, n, device=device)
    all_gather_ref(b_pieces, b_local, group=tp_group)
    a_rows = torch.cat(a_pieces.chunk(tp), dim=1)  # [m, tp * k]
    torch.testing.assert_close(out, a_rows @ b_pieces, **tolerance(device, 1e-4, 2e-2))
    del sp_index


if __name__ == "__main__":
    raise SystemExit(main(run, "two_dim_parallel_matmul"))
