"""The torch surface of device code: one table from torch callables to IR builders.

The function form and the method form share one entry (`torch.sum` and `torch.Tensor.sum`), so
`x.sum(-1)` and `torch.sum(x, -1)` produce the same IR. Composite ops (softmax, mean, var,
logsumexp, fmod, norms, activations, ...) are decomposed into primitive ops, so that every
backend runs them.

This module assembles the table: the table and its argument checks are in
`torch_ops/registry.py`, and each op family registers into it from its own module:

- `torch_ops/elementwise.py`: unary and binary math, comparisons, where, clamp, lerp, casts
- `torch_ops/activations.py`: the activations of torch.nn.functional
- `torch_ops/reductions.py`: reductions, mean/var/std, softmax, scans, norms
- `torch_ops/matmul.py`: mm, matmul, bmm, addmm, baddbmm
- `torch_ops/views.py`: reshape, permute, transpose, unsqueeze, squeeze, expand
- `torch_ops/creation.py`: zeros/ones/empty/full, the `*_like` and `new_*` families, torch.rand
- `torch_ops/refused.py`: ops that cannot work in device code, with the reason
- `shape_ops.py`: sort, topk, gather, stack, cat

Import the table's names from here (the tracer's `lookup`, `register` for a new family).
"""

from __future__ import annotations

from helion.frontend.torch_ops import activations as _activations  # noqa: F401
from helion.frontend.torch_ops import creation as _creation  # noqa: F401
from helion.frontend.torch_ops import elementwise as _elementwise  # noqa: F401
from helion.frontend.torch_ops import losses as _losses  # noqa: F401
from helion.frontend.torch_ops import reductions as _reductions  # noqa: F401
from helion.frontend.torch_ops import views as _views  # noqa: F401
from helion.frontend.torch_ops.matmul import emit_dot as emit_dot
from helion.frontend.torch_ops.refused import INPLACE_METHOD_HINT as INPLACE_METHOD_HINT
from helion.frontend.torch_ops.refused import REFUSED_INPLACE_METHODS as REFUSED_INPLACE_METHODS
from helion.frontend.torch_ops.registry import Handler as Handler
from helion.frontend.torch_ops.registry import lookup as lookup
from helion.frontend.torch_ops.registry import refuse_inplace as refuse_inplace
from helion.frontend.torch_ops.registry import refuse_out as refuse_out
from helion.frontend.torch_ops.registry import register as register
from helion.frontend.torch_ops.registry import tensor_methods as _methods  # noqa: F401
from helion.frontend.torch_ops.registry import torch_name as torch_name
from helion.frontend.torch_ops.registry import type_error_at_call as type_error_at_call
from helion.frontend.torch_ops.registry import unsupported_argument as unsupported_argument

# isort: split
# shape ops (sort, topk, gather, stack, cat) register into the table from their own module, which
# imports `register` from here: it comes last
from helion.frontend import shape_ops as _shape_ops  # noqa: F401
