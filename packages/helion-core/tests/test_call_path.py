"""The warm call path of a kernel (`Kernel.__call__`): the generated specialization key and the
generated guards with their argument-identity shortcut must give the same answers as the general
path, whatever arguments come next (ref backend: runs everywhere). Every test runs twice: with
tensors compared by torch's C++ `TensorGuards` (`exact_tensor_match`) and with the Python tests
kept for a torch without it."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl
from helion.runtime.kernel import _arg_key


@helion.kernel(backend="ref", config=helion.Config(block_sizes=[16]))
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + alpha * y[tile]
    return out


@helion.kernel(backend="ref", config=helion.Config(block_sizes=[16]))
def add_first_row(x: torch.Tensor, rows: int) -> torch.Tensor:
    # host code that slices an argument: the sliced value is not the argument itself
    head = x[:rows]
    out = torch.empty_like(head)
    for tile in hl.tile(head.size(0)):
        out[tile] = head[tile] + 1
    return out


@pytest.fixture(autouse=True, params=["native", "python"])
def tensor_match(request, monkeypatch):
    from helion.runtime import kernel

    if request.param == "python":
        monkeypatch.setattr(kernel, "exact_tensor_match", lambda examples: None)
    scaled_add.reset()
    add_first_row.reset()
    yield request.param
    scaled_add.reset()
    add_first_row.reset()


class _TensorSubclass(torch.Tensor):
    pass


def _general_key(kernel, args):
    return tuple(_arg_key(arg, kernel.settings.static_shapes) for arg in args)


def test_generated_key_equals_the_general_key_and_declines_other_types():
    scaled_add.reset()
    x, y = torch.randn(37), torch.randn(37)
    torch.testing.assert_close(scaled_add(x, y, 0.5), x + 0.5 * y)
    fast = scaled_add._fast_keys[True]
    for args in [(x, y, 0.5), (torch.randn(5, 3)[:, 1], y, 2.0), (x.double(), y, -1.0)]:
        assert fast(args) == _general_key(scaled_add, args)
    # an int where a float was seen, a tensor subclass: the generated key declines
    assert fast((x, y, 2)) is None
    assert fast((x.as_subclass(_TensorSubclass), y, 0.5)) is None
    # a Parameter is keyed like a tensor (autograd's custom-op test aside)
    weight = torch.nn.Parameter(x.clone(), requires_grad=False)
    assert fast((weight, y, 0.5)) == _general_key(scaled_add, (weight, y, 0.5)) == fast((x, y, 0.5))
    assert fast((torch.nn.Parameter(x.clone()), y, 0.5)) is None
    torch.testing.assert_close(scaled_add(x, y, 2), x + 2 * y)
    p = torch.nn.Parameter(torch.randn(37), requires_grad=False)
    torch.testing.assert_close(scaled_add(p, y, 0.5), p + 0.5 * y)


def test_new_shapes_strides_and_dtypes_get_their_own_bound_kernel():
    scaled_add.reset()
    for n in (37, 53, 37):
        x, y = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(scaled_add(x, y, 1.5), x + 1.5 * y)
    strided = torch.randn(37, 2)[:, 0]
    torch.testing.assert_close(scaled_add(strided, strided, 1.0), 2 * strided)
    halves = torch.randn(37).half(), torch.randn(37).half()
    torch.testing.assert_close(scaled_add(*halves, 1.0), halves[0] + halves[1])
    assert len(scaled_add._bound) == 4


def test_a_bound_kernel_called_with_other_shapes_checks_every_guard():
    """`BoundKernel.__call__` may get arguments of another key: identities prove nothing then."""
    scaled_add.reset()
    x, y = torch.randn(37), torch.randn(37)
    bound = scaled_add.bind((x, y, 1.0))
    torch.testing.assert_close(bound(x, y, 1.0), x + y)
    longer = torch.randn(61), torch.randn(61)
    torch.testing.assert_close(bound(*longer, 1.0), longer[0] + longer[1])
    variants = next(iter(bound._variants.values()))
    assert len(variants) == 2  # the second shape was traced, not run with the first's code


def test_values_made_by_host_code_are_guarded_by_shape():
    add_first_row.reset()
    x = torch.randn(40)
    for rows in (17, 29, 17):
        torch.testing.assert_close(add_first_row(x, rows), x[:rows] + 1)


def test_after_two_launches_the_host_code_calls_the_first_variant_through_its_guards():
    add_first_row.reset()
    x = torch.randn(40)
    for rows in (17, 29, 17):  # the second launch of the first variant wires its guarded launch
        torch.testing.assert_close(add_first_row(x, rows), x[:rows] + 1)
    bound = add_first_row.bind((x, 17))
    variants = next(iter(bound._variants.values()))
    checked = []
    for variant in variants:
        general = variant.matches_call
        variant.matches_call = lambda v, a, general=general: checked.append(1) or general(v, a)
    torch.testing.assert_close(add_first_row(x, 17), x[:17] + 1)
    assert checked == []  # the guarded launch: no loop over the variants
    for rows in (29, 5, 17):  # other host values fall through to the loop, and are right
        torch.testing.assert_close(add_first_row(x, rows), x[:rows] + 1)
    assert len(checked) >= 2 and len(variants) == 3


def test_guards_use_identity_only_for_arguments_themselves():
    scaled_add.reset()
    x, y = torch.randn(37), torch.randn(37)
    scaled_add(x, y, 1.0)
    bound = scaled_add.bind((x, y, 1.0))
    (variant,) = next(iter(bound._variants.values()))
    out = torch.empty_like(x)
    env = {"x": x, "y": y, "alpha": 1.0, "out": out}
    names = bound.split.device_inputs
    values = tuple(env[name] for name in names)
    assert variant.matches_call(values, (x, y, 1.0))
    # a value in x's place that is not x itself is checked: here its shape differs
    other = tuple(torch.randn(53) if name == "x" else env[name] for name in names)
    assert not variant.matches_call(other, (x, y, 1.0))
    # the output (made by host code) is always checked
    wrong_out = tuple(torch.empty(36) if name == "out" else env[name] for name in names)
    assert not variant.matches_call(wrong_out, (x, y, 1.0))
    # the general check agrees
    assert variant.matches(values) and not variant.matches(other) and not variant.matches(wrong_out)


def test_a_warm_kernel_still_hands_autograd_and_dispatch_modes_to_the_custom_op(monkeypatch):
    from torch.utils._python_dispatch import TorchDispatchMode

    from helion.runtime import torch_integration

    scaled_add.reset()
    x, y = torch.randn(37), torch.randn(37)
    scaled_add(x, y, 1.0)  # warm: the key function exists, the bound kernel is active
    through_op = []

    def recording(kernel, args):
        through_op.append(args)
        return kernel._call_direct(args)

    monkeypatch.setattr(torch_integration, "call_custom_op", recording)
    leaf = torch.randn(37, requires_grad=True)
    scaled_add(leaf, y, 1.0)
    assert len(through_op) == 1
    with torch.no_grad():  # no graph to record: the warm path
        torch.testing.assert_close(scaled_add(leaf, y, 1.0), leaf + y)
    assert len(through_op) == 1

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Passthrough():
        scaled_add(x, y, 1.0)
    assert len(through_op) == 2


def test_a_call_keeps_no_argument_alive():
    import gc
    import weakref

    scaled_add.reset()
    x, y = torch.randn(37), torch.randn(37)
    for _ in range(3):  # binds, then the keyed warm path, guarded launch wired
        out = scaled_add(x, y, 0.5)
    refs = [weakref.ref(x), weakref.ref(y), weakref.ref(out)]
    del x, y, out
    gc.collect()
    # the bound kernel made by the first call keeps its arguments no more than the calls do:
    # a kernel first called on a large tensor must not hold it for the life of the process
    assert all(ref() is None for ref in refs)
    assert len(scaled_add._bound) == 1


def test_configs_compiled_after_the_first_arguments_are_freed_trace_from_stand_ins():
    import gc

    scaled_add.reset()
    x, y = torch.randn(100)[::2], torch.randn(50)  # a strided first argument
    bound = scaled_add.bind((x, y, 0.5))
    key = bound.cache_key()["specialization_key"]
    del x, y
    gc.collect()
    for block in (4, 32):  # traced with zeroed tensors of the freed ones' shape and strides
        run = bound.compile_config(helion.Config(block_sizes=[block]))
        x, y = torch.randn(100)[::2], torch.randn(50)
        torch.testing.assert_close(run(x, y, 0.5), x + 0.5 * y)
    assert bound.cache_key()["specialization_key"] == key
    assert scaled_add.bind((x, y, 0.5)) is bound


def test_tuning_traces_with_the_arguments_it_was_given():
    scaled_add.reset()
    bound = scaled_add.bind((torch.randn(37), torch.randn(37), 0.5))
    x, y = torch.randn(37), torch.randn(37)
    seen = []
    trace = bound._trace_for_config
    bound._trace_for_config = lambda config, args: seen.append(args) or trace(config, args)
    bound.autotune((x, y, 0.5), configs=[helion.Config(block_sizes=[b]) for b in (8, 32)])
    assert seen and all(args[0] is x and args[1] is y for args in seen)


def test_a_compiled_config_also_calls_through_the_guarded_launch():
    scaled_add.reset()
    x, y = torch.randn(37), torch.randn(37)
    bound = scaled_add.bind((x, y, 0.5))
    run = bound.compile_config(helion.Config(block_sizes=[8]))
    for _ in range(2):
        torch.testing.assert_close(run(x, y, 0.5), x + 0.5 * y)
    (variant,) = bound._variants[bound.normalize({"block_sizes": [8]})]
    checked = []
    general = variant.matches_call
    variant.matches_call = lambda v, a: checked.append(1) or general(v, a)
    torch.testing.assert_close(run(x, y, 0.5), x + 0.5 * y)
    assert checked == []


def test_the_warm_call_takes_repeated_calls_without_building_the_key():
    scaled_add.reset()
    x, y = torch.randn(37), torch.randn(37)
    scaled_add(x, y, 0.5)  # binds (the general path)
    scaled_add(x, y, 0.5)  # found by its key: its warm call is set
    assert scaled_add._warm is not None
    keys = []
    fast = scaled_add._fast_keys[True]
    scaled_add._fast_keys[True] = lambda args: keys.append(args) or fast(args)
    try:
        for alpha in (0.5, 2.0):  # another value of a runtime scalar: the same key
            torch.testing.assert_close(scaled_add(x, y, alpha), x + alpha * y)
        assert keys == []
        for args in [
            (torch.randn(53), torch.randn(53), 1.0),  # another shape
            (torch.randn(37, 2)[:, 0], y, 1.0),  # another stride
            (x.double(), y.double(), 1.0),  # another dtype
            (x, y, 2),  # an int where a float was
        ]:
            torch.testing.assert_close(scaled_add(*args), args[0] + args[2] * args[1])
        assert len(keys) == 4  # each bound by the general path: the warm call stays x's
        torch.testing.assert_close(scaled_add(x, y, 1.0), x + y)
        assert len(keys) == 4
        longer = torch.randn(53), torch.randn(53)
        for _ in range(2):  # found by its key once, then by its own warm call
            torch.testing.assert_close(scaled_add(*longer, 1.0), longer[0] + longer[1])
        assert len(keys) == 5
        torch.testing.assert_close(scaled_add(x, y, 1.0), x + y)  # back through the key
        assert len(keys) == 6
    finally:
        scaled_add._fast_keys[True] = fast


def test_the_warm_call_follows_settings_and_reset():
    from helion.runtime.settings import RefMode

    scaled_add.reset()
    x, y = torch.randn(37), torch.randn(37)
    scaled_add(x, y, 0.5)
    scaled_add(x, y, 0.5)
    warm = scaled_add._warm
    assert warm is not None and warm((x, y, 0.5), scaled_add.settings) is not None
    settings = scaled_add.settings
    try:
        settings.static_shapes = False  # keys without sizes: the warm call of sizes declines
        from helion.runtime.kernel import _MISS

        assert warm((x, y, 0.5), settings) is _MISS
        torch.testing.assert_close(scaled_add(x, y, 0.5), x + 0.5 * y)
        settings.static_shapes = True
        settings.ref_mode = RefMode.EAGER
        assert scaled_add._warm((x, y, 0.5), settings) is _MISS
        torch.testing.assert_close(scaled_add(x, y, 0.5), x + 0.5 * y)
    finally:
        settings.static_shapes = True
        settings.ref_mode = RefMode.OFF
    scaled_add.reset()
    assert scaled_add._warm is None and not scaled_add._bound


def test_the_warm_call_turns_away_what_its_key_would_not_and_stays_right(tensor_match):
    x, y = torch.randn(37), torch.randn(37)
    scaled_add(x, y, 0.5)
    scaled_add(x, y, 0.5)
    warm = scaled_add._warm
    settings = scaled_add.settings
    from helion.runtime.kernel import _MISS

    assert warm((x, y, 0.5), settings) is not _MISS
    others = [
        (torch.randn(38), y, 0.5),
        (torch.randn(37, 2)[:, 0], y, 0.5),
        (x.double(), y, 0.5),
        (torch.nn.Parameter(x.clone(), requires_grad=False), y, 0.5),
        (x, torch.empty(37, device="meta"), 0.5),
        (x, y, 1),
    ]
    for args in others:
        assert warm(args, settings) is _MISS, args
    with torch.no_grad():
        leaf = torch.randn(37, requires_grad=True)
        # the C++ match compares requires_grad: the general path takes it; Python tests pass it
        assert (warm((leaf, y, 0.5), settings) is _MISS) == (tensor_match == "native")
        torch.testing.assert_close(scaled_add(leaf, y, 0.5), leaf + 0.5 * y)


def test_exact_tensor_match_compares_every_part_of_a_tensor():
    from helion.runtime.tensor_match import exact_tensor_match

    x, y = torch.randn(7, 5), torch.randn(5).half()
    match = exact_tensor_match([x, y])
    assert match is not None, "this torch (the one CI installs) has TensorGuards"
    assert match(x, y) and match(torch.randn(7, 5), torch.randn(5).half())
    turned_away = [
        (torch.randn(7, 6), y),  # size
        (torch.randn(5, 7).t(), y),  # strides
        (x.double(), y),  # dtype
        (torch.nn.Parameter(x.clone(), requires_grad=False), y),  # type
        (torch.randn(7, 5, requires_grad=True), y),  # requires_grad
        (x, torch.empty(5, dtype=torch.half, device="meta")),  # device
        (x, 5),  # not a tensor
    ]
    for args in turned_away:
        assert not match(*args), args
    complex_ = torch.randn(3, dtype=torch.cfloat)
    assert not exact_tensor_match([complex_])(complex_.conj())  # the conj bit
    with pytest.raises(TypeError):
        match(x)  # another number of tensors
    assert exact_tensor_match([]) is None and exact_tensor_match([x, 1]) is None


@helion.kernel(backend="ref", config=helion.Config(block_sizes=[16]))
def imag_part_doubled(z: torch.Tensor) -> torch.Tensor:
    y = z.imag  # a negated view when z is a conjugated view
    out = torch.empty_like(y)
    for tile in hl.tile(y.size(0)):
        out[tile] = y[tile] * 2
    return out


def test_a_negated_view_is_refused_on_every_path():
    from helion import exc

    z = torch.randn(37, dtype=torch.cfloat)
    imag, negated = z.imag, z.conj().imag  # the same memory, shape and strides; one neg bit
    assert negated.is_neg() and not imag.is_neg()
    y = torch.randn(37, 2)[:, 0]  # strides (2,) like theirs
    for _ in range(3):  # bound, then found by key, then by the warm call
        torch.testing.assert_close(scaled_add(imag, y, 1.0), imag + y)
    assert scaled_add._fast_keys[True]((negated, y, 1.0)) is None
    with pytest.raises(exc.NegatedTensorView, match="resolve_neg"):
        scaled_add(negated, y, 1.0)
    torch.testing.assert_close(scaled_add(negated.resolve_neg(), y, 1.0), -imag + y)
    # a negated view the host code makes is refused when traced
    with pytest.raises(exc.NegatedTensorView, match="'y' is a negated view"):
        imag_part_doubled(z.conj())
    torch.testing.assert_close(imag_part_doubled(z), 2 * z.imag)


def test_calls_under_inference_mode_after_a_warm_up_outside_it_stay_on_the_warm_path():
    """Inference mode changes the dispatch keys the C++ match compares: the calls made inside it
    get a warm call of their own, and the guarded launch tests in Python what the match turns
    away, instead of both falling to their general paths for good."""
    x, y = torch.randn(37), torch.randn(37)
    for _ in range(3):  # warm outside inference mode: warm call and guarded launch built there
        torch.testing.assert_close(scaled_add(x, y, 0.5), x + 0.5 * y)
    bound = scaled_add.bind((x, y, 0.5))
    (variant,) = next(iter(bound._variants.values()))
    checked = []
    general = variant.matches_call
    variant.matches_call = lambda v, a: checked.append(1) or general(v, a)
    keys = []
    fast = scaled_add._fast_keys[True]
    scaled_add._fast_keys[True] = lambda args: keys.append(args) or fast(args)
    try:
        with torch.inference_mode():
            a, b = torch.randn(37), torch.randn(37)  # inference tensors
            for _ in range(4):
                torch.testing.assert_close(scaled_add(a, b, 2.0), a + 2.0 * b)
        assert len(keys) <= 1  # at most the first call inside goes through the key
        assert checked == []  # every launch through the guarded launch
        torch.testing.assert_close(scaled_add(x, y, 1.0), x + y)  # and back outside
    finally:
        scaled_add._fast_keys[True] = fast


@pytest.mark.parametrize("warm_inside", [False, True])
def test_the_guarded_launch_matches_outputs_made_in_either_inference_mode(
    tensor_match, monkeypatch, warm_inside
):
    """The outputs the host code makes under inference mode have other dispatch keys: the
    guarded launch built in one mode has a second C++ match for the other, so launches in
    either mode skip the Python tests of those outputs."""
    from helion.runtime import kernel

    hits = []
    built = kernel.other_inference_mode_match

    def counting(examples):
        match = built(examples)
        return (
            None if match is None else (lambda *tensors: hits.append(match(*tensors)) or hits[-1])
        )

    monkeypatch.setattr(kernel, "other_inference_mode_match", counting)
    first, then = (torch.inference_mode(True), torch.inference_mode(False))[
        :: -1 if not warm_inside else 1
    ]
    with first:
        x, y = torch.randn(37), torch.randn(37)
        for _ in range(3):  # bound, keyed, then the guarded launch is built
            torch.testing.assert_close(scaled_add(x, y, 0.5), x + 0.5 * y)
    with then:
        a, b = torch.randn(37), torch.randn(37)
        for _ in range(4):
            torch.testing.assert_close(scaled_add(a, b, 2.0), a + 2.0 * b)
    if tensor_match == "python":  # no C++ match at all: the Python tests do it
        assert hits == []
    else:
        assert hits and all(hits), hits


def test_other_inference_mode_match_keeps_views_and_declines_mixed_examples():
    from helion.runtime.tensor_match import other_inference_mode_match

    base = torch.randn(6, 5)
    out = torch.empty(5, 6)
    match = other_inference_mode_match([out, base[1:]])
    assert match is not None
    with torch.inference_mode():
        assert match(
            torch.empty(5, 6), base[1:]
        )  # a fresh tensor made inside, a view of an outside one
        assert not match(
            torch.empty(5, 6), torch.randn(5, 5)
        )  # an inference tensor where the view was
        inside = torch.empty(3)
    assert other_inference_mode_match([inside, torch.empty(3)]) is None  # made in both modes


def test_parameters_take_the_warm_path_like_tensors(monkeypatch):
    """A model's weights arrive as `nn.Parameter`s: keyed like plain tensors, and inlined by the
    key function and the warm call (under no_grad; with grad on they need the custom op)."""
    from helion.runtime import torch_integration

    x = torch.randn(37)
    weight = torch.nn.Parameter(torch.randn(37))
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(scaled_add(x, weight, 0.5), x + 0.5 * weight)
        assert scaled_add._warm is not None
        keys = []
        fast = scaled_add._fast_keys[True]
        scaled_add._fast_keys[True] = lambda args: keys.append(args) or fast(args)
        try:
            for alpha in (1.0, 2.0):
                torch.testing.assert_close(scaled_add(x, weight, alpha), x + alpha * weight)
            assert keys == []
            plain = weight.detach().clone()  # the same key, another type: the key function's path
            torch.testing.assert_close(scaled_add(x, plain, 1.0), x + plain)
            assert len(keys) == 1 and len(scaled_add._bound) == 1
        finally:
            scaled_add._fast_keys[True] = fast
    through_op = []

    def recording(kernel, args):
        through_op.append(args)
        return kernel._call_direct(args)

    monkeypatch.setattr(torch_integration, "call_custom_op", recording)
    scaled_add(x, weight, 1.0)  # grad on and a weight that requires it: autograd records it
    assert len(through_op) == 1
