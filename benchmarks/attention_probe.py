"""Which attention seed configs compile on this GPU, and the generated code of one that does not.

    python benchmarks/attention_probe.py OUT_DIR

Compiles and runs each Triton seed config of examples/attention.py (non-causal and causal) on
4 x 32 x 4096 x 128 bf16, records ok / the first error line per config, and writes the
generated source of every failing config to OUT_DIR (for a reproducer).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import attention as attention_example


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    q, k, v = (torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    for name in ("attention", "attention_causal"):
        kernel = getattr(attention_example, name)
        bound = kernel.bind((q, k, v))
        backend = bound.backend
        seeds = backend.seed_configs(bound.ir, bound.config_spec, q.device)
        for index, config in enumerate(seeds):
            try:
                result = bound.compile_config(config)(q, k, v)
                torch.cuda.synchronize()
                if name == "attention":
                    torch.testing.assert_close(result, expected, atol=2e-2, rtol=2e-2)
                status = "ok"
            except Exception as error:  # reported per config
                lines = [ln for ln in str(error).splitlines() if "error" in ln.lower()] or [
                    str(error)
                ]
                status = f"{type(error).__name__}: {lines[0][:200]}"
                (out / f"{name}_seed{index}.py").write_text(bound.to_triton_code(config))
            print(f"{name} seed {index}: {status}\n    {config}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
