"""Self-contained modules of Pallas kernels (``OutputCodeOptions(allow_helion_deps=False)`` and
``OutputCodeOptions(jax_fn=True)``).

A generated module is already a JAX module: its entry function takes the device code's tensors
(then its runtime scalars) as JAX arrays and returns the new values of the tensors it writes.
It imports one helion module, ``helion_pallas.runtime`` (as ``hp``), for the interpret-mode
atomics; the exported module has the helpers it calls copied in instead.

* ``jax_fn=True``: that module, and nothing else (no torch).
* ``allow_helion_deps=False``: that module plus a launcher doing what
  :class:`helion_pallas.launcher.PallasCompiledKernel` does (torch tensors to JAX through
  DLPack, the call with 64-bit types enabled, the results copied back into the torch tensors),
  after which core appends the kernel's host code.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy

from helion.backends.base import ExportedModule
from helion.runtime.output_code import Embedder
from helion.runtime.output_code import module_names

_RUNTIME_IMPORT = "from helion_pallas import runtime as hp"


def export_module(compiled: Any, *, jax_fn: bool) -> ExportedModule:
    source = _without_runtime_import(compiled.source)
    embedder = Embedder(module_names(source))
    lines = [source.rstrip(), ""]
    helpers = _runtime_helpers(compiled.source, embedder)
    if helpers:
        lines += embedder.import_lines(source)
        for block in embedder.blocks:
            lines += ["", "", block]
        lines += [
            "",
            "",
            "class hp:",
            '    """The helion_pallas.runtime helpers this kernel calls."""',
            "",
        ]
        lines += [f"    {name} = staticmethod({copied})" for name, copied in helpers.items()]
        lines.append("")
    if jax_fn:
        return ExportedModule("\n".join(lines) + "\n", None)
    launcher, launch_lines = _torch_launcher(compiled, embedder, "\n".join(lines))
    return ExportedModule("\n".join(lines + launch_lines) + "\n", launcher)


def _without_runtime_import(source: str) -> str:
    kept = [line for line in source.splitlines() if line.strip() != _RUNTIME_IMPORT]
    return "\n".join(kept) + "\n"


def _runtime_helpers(source: str, embedder: Embedder) -> dict[str, str]:
    """Copy the ``hp.*`` functions ``source`` calls; their name in ``hp`` -> the copy's name."""
    from helion_pallas import runtime

    used = sorted(
        {
            node.attr
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "hp"
        }
    )
    if used:
        embedder.taken.add("hp")
    return {name: embedder.function(getattr(runtime, name)) for name in used}


def _torch_launcher(compiled: Any, embedder: Embedder, source: str) -> tuple[str, list[str]]:
    """The launcher of the host values (`PallasCompiledKernel.__call__`, written out)."""
    import torch

    from helion_pallas.launcher import XLA_OPTIONS
    from helion_pallas.launcher import to_jax

    blocks_before = len(embedder.blocks)
    convert = embedder.function(to_jax)
    embedder.module("torch", torch)
    entry = compiled.entry
    jitted = embedder.fresh(f"_helion_pallas_jitted_{entry}")
    launcher = embedder.fresh(f"_helion_pallas_launch_{entry}")
    arrays = [f"{convert}(values[{position}])" for position in compiled._tensor_positions]
    for position, dtype in compiled._scalar_positions:
        arrays.append(f"jnp.asarray(values[{position}], dtype=jnp.{numpy.dtype(dtype).name})")
    lines = ["", "", *embedder.import_lines(source)]
    for block in embedder.blocks[blocks_before:]:
        lines += ["", "", block]
    lines += [
        "",
        "",
        "# jitted now, under a name of its own: the host code appended to this module takes the",
        "# entry's name",
        f"{jitted} = jax.jit({entry}, compiler_options={XLA_OPTIONS!r})",
        "",
        "",
        f"def {launcher}(*values):",
        '    """Run the kernel on the torch tensors (and scalars) of its device loops."""',
    ]
    # on CUDA, DLPack's stream handshake orders JAX's stream after torch's on the way in and
    # torch's after JAX's on the way out (see helion_pallas.launcher): no host wait
    lines += [
        "    with jax.enable_x64(True):",
        f"        results = {jitted}({', '.join(arrays)})",
    ]
    written = compiled._written_positions
    if not written:
        lines.append("    jax.block_until_ready(results)")
    lines += [
        f"    for position, result in zip({tuple(written)!r}, results):",
        "        values[position].copy_(torch.from_dlpack(result))",
        "",
    ]
    return launcher, lines
