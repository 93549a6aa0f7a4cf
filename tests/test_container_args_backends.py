"""Tensors inside container arguments (list, tuple, dict, namedtuple, dataclass, nested) are
kernel arguments that device code reads and writes on every backend that runs here, and the
numbers beside them are runtime scalars: the tracer lifted only a list or tuple made of tensors
alone, and rebuilt it as a plain tuple (`p.weight[t]` on a namedtuple failed, `d["w"][t]` or
`p[0][t]` on a `(tensor, float)` tuple raised HostTensorDirectUsage, a dataclass was an
unsupported argument type; found by exploratory testing)."""

from __future__ import annotations

import collections
import dataclasses
import random
from typing import Any
from typing import Callable

import pytest
import torch

import helion
import helion.language as hl
from helion.testing import require_backend

BACKENDS = ["ref", "triton", "pallas"]

Affine = collections.namedtuple("Affine", "weight bias scale")


@dataclasses.dataclass
class Layer:
    weight: torch.Tensor
    bias: torch.Tensor | None
    scale: float
    relu: bool


@dataclasses.dataclass(frozen=True)
class Buffers:
    out: torch.Tensor
    total: torch.Tensor


def namedtuple_affine(x: torch.Tensor, p: Affine) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] * p.weight[tile] * p.scale + p.bias[tile]
    return out


def dict_rows(x: torch.Tensor, d: dict[str, Any]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(out.size()):
        out[tm, tn] = x[tm, tn] * d["w"][tm, tn] + d["b"][tn] * d["alpha"] + d["shift"]
    return out


def mixed_tuple(x: torch.Tensor, p: tuple[torch.Tensor, float]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] * p[1] + p[0][tile]
    return out


def nested_lists(x: torch.Tensor, ps: list[list[Any]]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + ps[0][0][tile] + ps[1][0][tile] * ps[1][1]
    return out


def dataclass_layer(x: torch.Tensor, layer: Layer) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        value = x[tile] * layer.weight[tile] * layer.scale
        if layer.bias is not None:
            value = value + layer.bias[tile]
        if layer.relu:
            value = torch.relu(value)
        out[tile] = value
    return out


def deep_stack(x: torch.Tensor, model: dict[str, Any]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        acc = x[tile]
        for layer in model["layers"]:  # unrolled: one step per namedtuple of the list
            acc = acc * layer.weight[tile] * layer.scale + layer.bias[tile]
        out[tile] = acc + model["extra"][0][tile]
    return out


def row_sums(x: torch.Tensor, inputs: dict[str, Any]) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile in hl.tile(m):
        out[tile] = (x[tile, :] * inputs["w"][tile, :]).sum(-1) * inputs["scale"]
    return out


def write_into_fields(x: torch.Tensor, bufs: Buffers) -> None:
    for tile in hl.tile(x.size()):
        bufs.out[tile] = x[tile] * 2.0
        bufs.total[tile] = bufs.total[tile] + x[tile]


def _reference_layer(x: torch.Tensor, layer: Layer) -> torch.Tensor:
    value = x * layer.weight * layer.scale
    if layer.bias is not None:
        value = value + layer.bias
    return torch.relu(value) if layer.relu else value


def _case(name: str) -> tuple[Callable[..., Any], tuple, torch.Tensor]:
    """(kernel function, fresh random arguments of non-power-of-two shapes, expected result)."""
    m, n = random.choice([(5, 23), (13, 7), (3, 37)])
    x = torch.randn(m, n)
    w, b = torch.randn(m, n), torch.randn(m, n)
    scale = random.uniform(0.5, 2.0)
    if name == "namedtuple":
        return namedtuple_affine, (x, Affine(w, b, scale)), x * w * scale + b
    if name == "dict":
        row = torch.randn(n)
        d = {"w": w, "b": row, "alpha": scale, "shift": 3}
        return dict_rows, (x, d), x * w + row * scale + 3
    if name == "mixed_tuple":
        return mixed_tuple, (x, (w, scale)), x * scale + w
    if name == "nested_lists":
        return nested_lists, (x, [[w], [b, scale]]), x + w + b * scale
    if name == "dataclass":
        layer = Layer(w, b, scale, relu=True)
        return dataclass_layer, (x, layer), _reference_layer(x, layer)
    if name == "dataclass_no_bias":
        layer = Layer(w, None, scale, relu=False)
        return dataclass_layer, (x, layer), _reference_layer(x, layer)
    if name == "deep":
        w2, b2, extra = torch.randn(m, n), torch.randn(m, n), torch.randn(m, n)
        model = {"layers": [Affine(w, b, scale), Affine(w2, b2, 0.5)], "extra": (extra,)}
        expected = ((x * w * scale + b) * w2 * 0.5 + b2) + extra
        return deep_stack, (x, model), expected
    assert name == "reduction"
    return row_sums, (x, {"w": w, "scale": scale}), (x * w).sum(-1) * scale


CASES = [
    "namedtuple",
    "dict",
    "mixed_tuple",
    "nested_lists",
    "dataclass",
    "dataclass_no_bias",
    "deep",
    "reduction",
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_container_arguments_match_torch(backend: str, case: str) -> None:
    require_backend(backend)
    random.seed(f"{case}-{backend}")
    torch.manual_seed(len(case))
    fn, args, expected = _case(case)
    kernel = helion.kernel(fn, backend=backend, autotune_effort="none")
    bound = kernel.bind(args)
    rng = random.Random(7)
    configs = [bound.config_spec.default_config()]
    configs += [bound.config_spec.random_config(rng) for _ in range(2)]
    for config in configs:
        got = bound.compile_config(config)(*args)
        torch.testing.assert_close(got, expected, msg=f"{backend} {config}")
    # the plain call too, then fresh tensors and numbers of the same structure: no new binding
    torch.testing.assert_close(kernel(*args), expected)
    _, args, expected = _case(case)
    torch.testing.assert_close(kernel(*args), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_into_tensors_of_a_frozen_dataclass(backend: str) -> None:
    require_backend(backend)
    x = torch.randn(7, 19)
    total = torch.randn(7, 19)
    bufs = Buffers(torch.zeros(7, 19), total.clone())
    kernel = helion.kernel(write_into_fields, backend=backend, autotune_effort="none")
    assert kernel(x, bufs) is None
    torch.testing.assert_close(bufs.out, x * 2)
    torch.testing.assert_close(bufs.total, total + x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numbers_in_a_container_are_runtime_scalars(backend: str) -> None:
    """A new scale in the namedtuple gives a new result from the same compiled code (it was
    baked in: the second call returned the first call's scale, found while fixing this)."""
    require_backend(backend)
    kernel = helion.kernel(namedtuple_affine, backend=backend, autotune_effort="none")
    x, w, b = torch.randn(9, 11), torch.randn(9, 11), torch.randn(9, 11)
    for scale in (2.0, -0.75, 3.5):
        torch.testing.assert_close(kernel(x, Affine(w, b, scale)), x * w * scale + b)
    assert len(kernel._bound) == 1
    (bound,) = kernel._bound.values()
    assert sum(len(variants) for variants in bound._variants.values()) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bool_in_a_dataclass_retraces_when_it_changes(backend: str) -> None:
    require_backend(backend)
    kernel = helion.kernel(dataclass_layer, backend=backend, autotune_effort="none")
    x, w, b = torch.randn(6, 13), torch.randn(6, 13), torch.randn(6, 13)
    for relu in (True, False, True):
        layer = Layer(w, b, 1.5, relu)
        torch.testing.assert_close(kernel(x, layer), _reference_layer(x, layer))


# -- the self-contained module (to_code(options=OutputCodeOptions(allow_helion_deps=False))) ------

STANDALONE = helion.OutputCodeOptions(allow_helion_deps=False)

# in the process that cannot import helion (nor this test module), the arguments are rebuilt
# with types of its own: the launcher reads fields, keys and items, whatever the type
_REBUILD = """
import collections
import dataclasses
import sys

Affine = collections.namedtuple("Affine", "weight bias scale")


@dataclasses.dataclass
class Layer:
    weight: object
    bias: object
    scale: float
    relu: bool


def build(value):
    if isinstance(value, tuple) and value and value[0] in ("Affine", "Layer"):
        kind = Affine if value[0] == "Affine" else Layer
        return kind(*[build(item) for item in value[1:]])
    if isinstance(value, (list, tuple)):
        return type(value)(build(item) for item in value)
    if isinstance(value, dict):
        return {key: build(item) for key, item in value.items()}
    return value


def call(module, name, args):
    return getattr(sys.modules["standalone_" + module], name)(*build(args))
"""


def _tagged(value: Any) -> Any:
    """``value`` with its namedtuples and dataclasses as ("Affine" | "Layer", fields...)."""
    if isinstance(value, Affine):
        return ("Affine", *[_tagged(item) for item in value])
    if isinstance(value, Layer):
        fields = dataclasses.fields(value)
        return ("Layer", *[_tagged(getattr(value, f.name)) for f in fields])
    if isinstance(value, (list, tuple)):
        return type(value)(_tagged(item) for item in value)
    if isinstance(value, dict):
        return {key: _tagged(item) for key, item in value.items()}
    return value


@pytest.mark.parametrize("backend", ["triton", "pallas"])
def test_standalone_module_reads_the_leaves_of_containers(backend: str) -> None:
    """The exported launcher indexes dicts, dataclass fields and nested paths out of the
    arguments as the in-process one does (it refused every path but `arg[i]`), in a process
    where helion cannot be imported; its result is the in-process call's."""
    require_backend(backend)
    from helion.testing.standalone import run_without_helion

    modules, calls, expected = {"rebuild": _REBUILD}, [], []
    for case in CASES:
        random.seed(f"export-{case}")
        fn, args, reference = _case(case)
        kernel = helion.kernel(fn, backend=backend, autotune_effort="none")
        modules[case] = kernel.bind(args).to_code(options=STANDALONE)
        calls.append(("rebuild", "call", (case, fn.__name__, _tagged(args))))
        expected.append(kernel(*args))
        torch.testing.assert_close(expected[-1], reference)
    env = {"TRITON_INTERPRET": "1", "JAX_PLATFORMS": "cpu"}
    results, _ = run_without_helion(modules, calls, env=env)
    for case, got, want in zip(CASES, results, expected, strict=True):
        torch.testing.assert_close(torch.as_tensor(got), want, msg=case)


def test_standalone_module_checks_the_structure_of_containers(tmp_path: Any) -> None:
    """Lengths and keys are checked like shapes (the leaves are read by position: a longer
    list would have been read in part, silently)."""
    require_backend("triton")
    import importlib.util

    fn, args, _ = _case("nested_lists")
    x, ((w,), (b, scale)) = args[0], args[1]
    bound = helion.kernel(fn, backend="triton", autotune_effort="none").bind(args)
    path = tmp_path / "standalone_nested.py"
    path.write_text(bound.to_code(options=STANDALONE))
    spec = importlib.util.spec_from_file_location("standalone_nested", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(ValueError, match=r"ps\[1\]: this module was generated for 2 items; got 3"):
        module.nested_lists(x, [[w], [b, scale, 1.0]])
    with pytest.raises(ValueError, match=r"ps: this module was generated for 2 items; got 1"):
        module.nested_lists(x, [[w]])

    fn, args, _ = _case("dict")
    path = tmp_path / "standalone_dict.py"
    bound = helion.kernel(fn, backend="triton", autotune_effort="none").bind(args)
    path.write_text(bound.to_code(options=STANDALONE))
    spec = importlib.util.spec_from_file_location("standalone_dict", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    d = dict(args[1])
    d["extra"] = 1
    with pytest.raises(ValueError, match=r"d: this module was generated for the keys \['w', 'b'"):
        module.dict_rows(args[0], d)


def _adds(tensor: torch.Tensor) -> Callable[..., Any]:
    return lambda value, tile: value + tensor[tile]


def apply_epilogue(x: torch.Tensor, epilogue: Callable[..., Any]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = epilogue(x[tile], tile)
    return out


def test_standalone_module_refuses_a_captured_tensor_by_name() -> None:
    require_backend("triton")
    from helion import exc

    x = torch.randn(10)
    bound = helion.kernel(apply_epilogue, backend="triton", autotune_effort="none").bind(
        (x, _adds(torch.randn(10)))
    )
    with pytest.raises(exc.HostCodeNotExportable, match="through a closure of 'epilogue'"):
        bound.to_code(options=STANDALONE)


# -- torch.compile: the tensors written inside a container argument are declared mutated ------


def accumulate_into(x: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        for acc in state["accs"]:  # each written through the loop's name
            acc[tile] = acc[tile] + x[tile] * state["scale"]
        out[tile] = x[tile] * 2
    return out


@pytest.mark.parametrize("compiler", ["eager", "aot_eager"])
@pytest.mark.parametrize("backend", ["ref", "triton"])
def test_compile_keeps_the_writes_into_containers(backend: str, compiler: str) -> None:
    require_backend(backend)
    torch._dynamo.reset()
    fields = helion.kernel(write_into_fields, backend=backend, autotune_effort="none")
    accumulate = helion.kernel(accumulate_into, backend=backend, autotune_effort="none")

    def fn(x: torch.Tensor, bufs: Buffers, state: dict[str, Any]) -> torch.Tensor:
        fields(x, bufs)
        return accumulate(x.cos(), state) + bufs.out

    x = torch.randn(6, 9)
    total = torch.randn(6, 9)
    bufs = Buffers(torch.zeros(6, 9), total.clone())
    accs = [torch.randn(6, 9), torch.randn(6, 9)]
    state = {"accs": [a.clone() for a in accs], "scale": 0.5}
    got = torch.compile(fn, backend=compiler, fullgraph=True)(x, bufs, state)
    torch.testing.assert_close(bufs.out, x * 2)
    torch.testing.assert_close(bufs.total, total + x)
    for written, before in zip(state["accs"], accs, strict=True):
        torch.testing.assert_close(written, before + x.cos() * 0.5)
    torch.testing.assert_close(got, x.cos() * 2 + x * 2)
    torch._dynamo.reset()


# -- containers the host code builds: their structure may change between calls of one key ------


def host_list(x: torch.Tensor, n: int) -> torch.Tensor:
    parts = [x * (i + 1) for i in range(n)]  # its length is not in the specialization key
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        acc = x[tile]
        for part in parts:
            acc = acc + part[tile]
        out[tile] = acc
    return out


def row_views(x: torch.Tensor) -> torch.Tensor:
    rows = [x[i] for i in range(x.size(0))]  # as long as x, whose size is not in the key
    out = torch.empty_like(rows[0])
    for tile in hl.tile(out.size()):
        acc = rows[0][tile]
        for row in rows[1:]:
            acc = acc + row[tile]
        out[tile] = acc
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_host_built_list_of_another_length_is_traced_anew(backend: str) -> None:
    """Each length is a variant of its own (the first variant's leaves were read at every
    length: a longer list gave a wrong sum, a shorter one an IndexError; under
    static_shapes=False a list as long as a dimension did the same)."""
    require_backend(backend)
    x = torch.randn(5, 7)
    kernel = helion.kernel(host_list, backend=backend, autotune_effort="none")
    for n in (2, 3, 1, 2, 3):
        expected = x + sum(x * (i + 1) for i in range(n))
        torch.testing.assert_close(kernel(x, n), expected, msg=f"n={n}")
    (bound,) = kernel._bound.values()
    assert sum(len(variants) for variants in bound._variants.values()) == 3

    kernel = helion.kernel(row_views, backend=backend, autotune_effort="none", static_shapes=False)
    for m in (3, 4, 2, 3):
        x = torch.randn(m, 6)
        torch.testing.assert_close(kernel(x), x.sum(0), msg=f"m={m}")
    assert len(kernel._bound) == 1
