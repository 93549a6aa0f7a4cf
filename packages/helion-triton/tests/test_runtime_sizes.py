"""Sizes and strides as kernel arguments under ``static_shapes=False`` (``helion_triton.sizes``).

Each new size is traced and generated again, but sizes that trace alike must generate the same
source, so that the module (and on a GPU, Triton's compiled kernel) is shared. Every call is
checked against PyTorch, and random configs against the ref backend, on the interpreter."""

from __future__ import annotations

import random
import re

import pytest
import torch

import helion
import helion.language as hl
from helion_triton import launcher


def scale_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 2 + y[tile_m, tile_n]
    return out


def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        row = x[tile_m, :].to(torch.float32)
        out[tile_m, :] = torch.softmax(row, dim=-1).to(x.dtype)
    return out


def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


def gather_rows(idx: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), weight.size(1)], dtype=weight.dtype, device=weight.device)
    for tile_b, tile_e in hl.tile([idx.size(0), weight.size(1)]):
        out[tile_b, tile_e] = weight[idx[tile_b], tile_e]
    return out


def _scale_rows_args(rows: int) -> tuple:
    return torch.randn(rows, 45), torch.randn(rows, 45)


def _softmax_args(rows: int) -> tuple:
    return (torch.randn(rows, 100),)


def _matmul_args(rows: int) -> tuple:
    return torch.randn(rows, 37), torch.randn(37, 29)


def _gather_args(rows: int) -> tuple:
    return torch.randint(0, 53, (rows,)), torch.randn(53, 40)


# (kernel, reference, args of a row count, an explicit config)
CASES = {
    "scale_rows": (
        scale_rows,
        lambda x, y: x * 2 + y,
        _scale_rows_args,
        {"block_sizes": [8, 16]},
    ),
    "softmax_rows": (
        softmax_rows,
        lambda x: torch.softmax(x, dim=-1),
        _softmax_args,
        {"block_sizes": [4]},
    ),
    "softmax_rows_looped": (
        softmax_rows,
        lambda x: torch.softmax(x, dim=-1),
        _softmax_args,
        {"block_sizes": [4], "reduction_loops": [32]},
    ),
    "matmul": (matmul, lambda x, y: x @ y, _matmul_args, {"block_sizes": [16, 16, 16]}),
    "gather_rows": (
        gather_rows,
        lambda idx, w: w[idx],
        _gather_args,
        {"block_sizes": [4, 16]},
    ),
}

ROW_COUNTS = (37, 61, 90)  # none a multiple of the block sizes above


def _sources(kernel: helion.Kernel) -> set[str]:
    """The generated source of every size each bound kernel traced."""
    return {
        variant.compiled.source
        for bound in kernel._bound.values()
        for variants in bound._variants.values()
        for variant in variants
    }


def _kernel(name: str, static_shapes: bool, **settings) -> helion.Kernel:
    fn, _, _, config = CASES[name]
    return helion.kernel(
        fn,
        backend="triton",
        static_shapes=static_shapes,
        config=helion.Config(**config),
        **settings,
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_sizes_that_trace_alike_share_one_source(name: str) -> None:
    _, reference, make_args, _ = CASES[name]
    kernel = _kernel(name, static_shapes=False)
    for rows in ROW_COUNTS:
        args = make_args(rows)
        torch.testing.assert_close(kernel(*args), reference(*args), atol=1e-4, rtol=1e-4)
    (source,) = _sources(kernel)  # one source for the three sizes
    assert "_size_0" in source
    for rows in ROW_COUNTS:
        assert not re.search(rf"\b{rows}\b", source), f"{rows} is written into the code"


@pytest.mark.parametrize("name", sorted(CASES))
def test_static_shapes_keep_sizes_in_the_code(name: str) -> None:
    _, reference, make_args, _ = CASES[name]
    kernel = _kernel(name, static_shapes=True)
    for rows in ROW_COUNTS[:2]:
        args = make_args(rows)
        torch.testing.assert_close(kernel(*args), reference(*args), atol=1e-4, rtol=1e-4)
    sources = _sources(kernel)
    assert len(sources) == 2
    assert all("_size_" not in source and "_stride_" not in source for source in sources)


def test_one_module_is_loaded_for_sizes_that_trace_alike() -> None:
    _, _, make_args, _ = CASES["scale_rows"]
    kernel = _kernel("scale_rows", static_shapes=False)
    kernel(*make_args(37))
    loaded = len(launcher._modules)
    for rows in (38, 50, 77, 100):
        args = make_args(rows)
        torch.testing.assert_close(kernel(*args), args[0] * 2 + args[1])
    assert len(launcher._modules) == loaded


def test_strides_are_arguments_too() -> None:
    # a transposed view and a contiguous tensor of the same size: one source, each right
    kernel = _kernel("scale_rows", static_shapes=False)
    for rows in (37, 61):
        x, y = torch.randn(45, rows).t(), torch.randn(rows, 45)
        torch.testing.assert_close(kernel(x, y), x * 2 + y)
        x = torch.randn(rows, 45)
        torch.testing.assert_close(kernel(x, y), x * 2 + y)
    sources = _sources(kernel)
    assert any("x_stride_1" in source for source in sources)
    assert len(sources) == 2  # the transposed strides and the contiguous ones


def test_a_size_of_one_stays_a_number() -> None:
    kernel = _kernel("scale_rows", static_shapes=False)
    args = _scale_rows_args(1)
    torch.testing.assert_close(kernel(*args), args[0] * 2 + args[1])
    args = _scale_rows_args(37)
    torch.testing.assert_close(kernel(*args), args[0] * 2 + args[1])
    assert len(_sources(kernel)) == 2


@pytest.mark.parametrize("setting", [False, True])
def test_do_not_specialize_names_the_size_arguments(setting: bool) -> None:
    kernel = _kernel("scale_rows", static_shapes=False, triton_do_not_specialize=setting)
    args = _scale_rows_args(37)
    torch.testing.assert_close(kernel(*args), args[0] * 2 + args[1])
    (source,) = _sources(kernel)
    decorator = next(line for line in source.splitlines() if line.startswith("@triton.jit"))
    assert ("_size_0'" in decorator and "_stride_0'" in decorator) is setting


@pytest.mark.usefixtures("descriptors_on_the_interpreter")
def test_tensor_descriptors_take_the_size_arguments() -> None:
    kernel = helion.kernel(
        scale_rows,
        backend="triton",
        static_shapes=False,
        config=helion.Config(block_sizes=[8, 16], indexing=["tensor_descriptor"] * 3),
    )
    for rows in ROW_COUNTS:
        x, y = torch.randn(rows, 48), torch.randn(rows, 48)  # rows of 16-byte multiples (TMA)
        torch.testing.assert_close(kernel(x, y), x * 2 + y)
    (source,) = _sources(kernel)
    assert "tl.make_tensor_descriptor(x, shape=[x_size_0, x_size_1], strides=[x_stride_0, 1]" in (
        source
    )


def test_repeated_calls_take_the_fast_launch_path() -> None:
    # the fused launcher binds the size arguments before the grid
    kernel = _kernel("matmul", static_shapes=False)
    for rows in (37, 37, 37, 61, 61, 61, 37):
        x, y = _matmul_args(rows)
        torch.testing.assert_close(kernel(x, y), x @ y, atol=1e-4, rtol=1e-4)


def _random_configs(kernel: helion.Kernel, args: tuple, count: int, seed: int) -> list:
    spec = kernel.bind(args).config_spec
    rng = random.Random(seed)
    return [spec.random_config(rng) for _ in range(count)]


@pytest.mark.parametrize("name", ["scale_rows", "softmax_rows", "matmul", "gather_rows"])
def test_random_configs_match_ref_across_sizes(name: str) -> None:
    fn, _, make_args, _ = CASES[name]
    probe = helion.kernel(fn, backend="triton", static_shapes=False)
    for config in _random_configs(probe, make_args(37), count=4, seed=len(name)):
        kernel = helion.kernel(fn, backend="triton", static_shapes=False, config=config)
        ref = helion.kernel(fn, backend="ref", static_shapes=False, config=config)
        for rows in (37, 90):
            args = make_args(rows)
            torch.testing.assert_close(kernel(*args), ref(*args), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "pid_type", ["flat", "xyz", "persistent_blocked", "persistent_interleaved"]
)
@pytest.mark.parametrize("layout", ["plain", "flattened", "grouped"])
def test_program_layouts_take_the_size_arguments(pid_type: str, layout: str) -> None:
    # the grid and each program's tile come from the size arguments, on every layout
    config = {"block_sizes": [8, 16], "pid_type": pid_type}
    if layout == "flattened":
        config["flatten_loops"] = [True]
    elif layout == "grouped":
        config["l2_groupings"] = [4]
    kernel = helion.kernel(
        scale_rows, backend="triton", static_shapes=False, config=helion.Config(**config)
    )
    for rows in ROW_COUNTS:
        x, y = _scale_rows_args(rows)
        torch.testing.assert_close(kernel(x, y), x * 2 + y)
    (source,) = _sources(kernel)
    assert "_size_0" in source
    assert ("flat_index" in source) is (layout == "flattened")
    assert ("num_pid_in_group" in source) is (layout == "grouped")


def grid_scale(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for i, j in hl.grid([m, n]):
        out[i, j] = x[i, j] * 2
    return out


def test_grid_loops_take_the_sizes_their_indices_address() -> None:
    # a square input must not bind both grid loops to one dimension's size (another source)
    kernel = helion.kernel(
        grid_scale, backend="triton", static_shapes=False, config=helion.Config()
    )
    for m, n in [(5, 7), (9, 6), (7, 7), (6, 6)]:
        x = torch.randn(m, n)
        torch.testing.assert_close(kernel(x), x * 2)
    assert len(_sources(kernel)) == 1


def column_sums(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.zeros([cols], dtype=torch.float32, device=x.device)
    for tile_c in hl.tile(cols):
        acc = hl.zeros([tile_c], dtype=torch.float32)
        for tile_r in hl.tile(rows):
            acc = acc + x[tile_r, tile_c].sum(0)
        out[tile_c] = acc
    return out


@pytest.mark.parametrize(
    ("fn", "config", "reference"),
    [
        (column_sums, {"block_sizes": [16, 4]}, lambda x: x.sum(0)),
        (
            scale_rows,
            {"block_sizes": [8, 16], "flatten_loops": [True]},
            None,
        ),
    ],
)
def test_64_bit_indexing_widens_the_size_arguments(fn, config, reference) -> None:
    # Triton passes an int argument below 2**31 as int32: a product of two sizes (a flattened
    # loop's element count) or a loop bounded by one would count in int32 and wrap past 2**31
    kernel = helion.kernel(
        fn,
        backend="triton",
        static_shapes=False,
        index_dtype=torch.int64,
        config=helion.Config(**config),
    )
    for rows in (37, 61):
        if fn is column_sums:
            args = (torch.randn(rows, 45),)
            expected = reference(*args)
        else:
            args = _scale_rows_args(rows)
            expected = args[0] * 2 + args[1]
        torch.testing.assert_close(kernel(*args), expected, atol=1e-4, rtol=1e-4)
    (source,) = _sources(kernel)
    assert re.search(r"x_size_0_i64 = tl.full\(\[\], x_size_0, tl.int64\)", source)
    kernel_body = source.split("@triton.jit", 1)[1].split("\n\n\n", 1)[0].splitlines()[2:]
    statements = [line for line in kernel_body if "= tl.full([], " not in line]
    uses = re.findall(r"\b\w+_(?:size|stride)_\d+(?:_i64)?\b", "\n".join(statements))
    assert uses and all(name.endswith("_i64") for name in uses), uses


def two_row_maps(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(x)
    sums = torch.zeros([x.size(0)], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = x[tile_m, :] * 2
        sums[tile_m] = y[tile_m, :].sum(-1)
    return out, sums


def test_sizes_that_stop_being_equal_name_the_cause() -> None:
    # x and y with as many columns share one reduction dimension; at other sizes they do not
    kernel = helion.kernel(
        two_row_maps, backend="triton", static_shapes=False, autotune_effort="none"
    )
    x, y = torch.randn(3, 5), torch.randn(3, 3)
    kernel(x, y)
    with pytest.raises(helion.exc.VariantConfigMismatch, match="new sizes") as caught:
        kernel(torch.randn(3, 7), torch.randn(3, 7))
    assert "static_shapes=True" in str(caught.value) and "key=" in str(caught.value)
    # the fix the hint names: a key that tells equal sizes apart
    keyed = helion.kernel(
        two_row_maps,
        backend="triton",
        static_shapes=False,
        autotune_effort="none",
        key=lambda x, y: x.size(1) == y.size(1),
    )
    for x, y in [(torch.randn(3, 5), torch.randn(3, 3)), (torch.randn(4, 7), torch.randn(4, 7))]:
        out, sums = keyed(x, y)
        torch.testing.assert_close(out, x * 2)
        torch.testing.assert_close(sums, y.sum(-1), atol=1e-5, rtol=1e-5)
