from __future__ import annotations

import ast
import inspect
import pickle
import textwrap
import warnings

import pytest

from helion import exc

# Every name the public Helion API lists in helion.exc (reference §1.4) plus our additions.
ERROR_NAMES = [
    "NotInsideKernel",
    "NamingConflict",
    "ClosuresNotSupported",
    "AutotuneError",
    "BackendImplementationMissing",
    "BackendUnsupported",
    "CacheAssertionError",
    "ClosureMutation",
    "GlobalMutation",
    "LoopFunctionNotInFor",
    "NestedDeviceLoopsConflict",
    "DeviceLoopElseBlock",
    "LoopDependencyError",
    "TopLevelStatementBetweenLoops",
    "BarrierOnlyAllowedAtTopLevel",
    "BarrierRequiresPersistent",
    "NestedGridLoop",
    "RankMismatch",
    "InvalidIndexingType",
    "DotBatchDimensionMismatch",
    "IndexOffsetOutOfRangeForInt32",
    "InputTensorNumelExceedsIndexType",
    "DataDependentOutputShapeNotSupported",
    "UnsupportedSplitOperation",
    "RequiresTensorInAssignment",
    "NotAllowedOnDevice",
    "HostTensorDirectUsage",
    "ShapeSpecializingCall",
    "ShapeSpecializingAllocation",
    "SpecializeOnDevice",
    "SpecializeArgType",
    "StackTensorcOnHost",
    "StackTensorDevPtrOnHost",
    "StackTensorDevPtrDtype",
    "StackTensorExampleOnDevice",
    "FailedToUnpackTupleAssign",
    "RegisterTunableArgTypes",
    "TunableTypeNotSupported",
    "TunableNameConflict",
    "ConfigSpecFragmentWithSymInt",
    "FailedToUnpackTile",
    "OverpackedTile",
    "InvalidTileRange",
    "AssignmentMultipleTargets",
    "InvalidAssignment",
    "NonTensorSubscriptAssign",
    "ShapeMismatch",
    "DeviceAPIOnHost",
    "StatementNotSupported",
    "CantReadOnDevice",
    "BreakpointInDeviceLoopRequiresInterpret",
    "IncompatibleInterpretModes",
    "MissingEnableTile",
    "CuteBackendUnavailable",
    "UndefinedVariable",
    "InvalidDeviceForLoop",
    "StarredArgsNotSupportedOnDevice",
    "IncorrectTileUsage",
    "InvalidJaggedTileUsage",
    "TileOfTile",
    "TracedArgNotSupported",
    "NotEnoughConfigs",
    "NoConfigFound",
    "ReductionOnNonTile",
    "InvalidReductionDim",
    "MultipleReductionDims",
    "ReductionDimInvalidForShape",
    "CantCombineTypesInControlFlow",
    "ErrorCompilingKernel",
    "NoTensorArgs",
    "VariantConfigMismatch",
    "InvalidConfig",
    "InductorLoweringError",
    "DecoratorAfterHelionKernelDecorator",
    "InternalError",
    "TorchOpTracingError",
    "TritonError",
    "TritonUnrecoverableRuntimeError",
    "AutotuningDisallowedInEnvironment",
    "UnsupportedPythonType",
    "TypeInferenceError",
    "ControlFlowTensorMismatch",
    "NotAllowedInHelperFunction",
    "CannotModifyHostVariableOnDevice",
    "AtomicOnDeviceTensor",
    "CannotReadDeviceVariableOnHost",
    "DeviceTensorSubscriptAssignmentNotAllowed",
    "InvalidSequenceSubscription",
    "InvalidAPIUsage",
    "GraphModuleUnsupportedOps",
    "RefEagerModeCodePrintError",
    "NoDeviceLoopsInKernel",
    "NestedKernelCallsNotSupported",
    "EmptyDeviceLoopAfterDCE",
    "AutodiffKernelNotCalled",
    "AutodiffNotSupported",
    "InconsistantConfigsAcrossRanks",
    "DuplicateStoreIndicesError",
    "BackendUnavailable",
    "PluginOpNotInstalled",
    "UnsupportedTorchOp",
    "InvalidSetting",
    "MultipleErrors",
]

WARNING_NAMES = [
    "TensorOperationInWrapper",
    "TensorOperationsInHostCall",
    "ProcessGroupNameNotFound",
    "WrongDevice",
    "BlockSizeIgnoredInInterpretMode",
    "TiledKMatmulAccumulationWarning",
    "NoAOTHeuristicWarning",
    "CacheCorrupt",
    "AutotuneCandidateFailed",
]


def _instance(cls: type) -> BaseException:
    """Build an instance with placeholder arguments, whatever the class's arity."""
    if cls is exc.MultipleErrors:
        return cls([exc.InvalidConfig("a"), exc.InvalidConfig("b")])
    if cls is exc.CuteBackendUnavailable:
        return cls()
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return cls("arg0", "arg1", "arg2")
    positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    return cls(*[f"arg{i}" for i in range(len(positional))])


@pytest.mark.parametrize("name", ERROR_NAMES)
def test_error_class_exists_and_formats(name: str) -> None:
    cls = getattr(exc, name)
    assert issubclass(cls, exc.BaseError)
    assert issubclass(cls, exc.Base)
    assert issubclass(cls, RuntimeError)
    err = _instance(cls)
    text = str(err)
    assert text and "{" not in text, text
    # Errors cross process boundaries in the autotuner: pickling must keep the text.
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is cls
    assert str(again) == text


@pytest.mark.parametrize("name", WARNING_NAMES)
def test_warning_class_exists(name: str) -> None:
    cls = getattr(exc, name)
    assert issubclass(cls, exc.BaseWarning)
    assert issubclass(cls, UserWarning)
    w = _instance(cls)
    assert str(w)
    assert str(pickle.loads(pickle.dumps(w))) == str(w)


def test_template_formatting_and_hint() -> None:
    err = exc.InvalidTileRange(10, 3)
    assert str(err).startswith("hl.tile() has begin=10 greater than end=3.")
    assert err.msg == "hl.tile() has begin=10 greater than end=3."
    custom = exc.InvalidConfig("bad", hint="Try num_warps=4.")
    assert str(custom) == "bad\nHint: Try num_warps=4."
    assert "Hint: Use hl.split() instead." in str(exc.UnsupportedSplitOperation("torch.chunk"))


def test_defaults_fill_missing_template_args() -> None:
    assert str(exc.LoopFunctionNotInFor()).startswith("hl.tile must be called from a for loop")
    assert str(exc.LoopFunctionNotInFor("hl.grid")).startswith("hl.grid must be called")
    assert str(exc.RankMismatch(2, 1, "matmul")) == "Expected ndim=2, but got ndim=1 in matmul."
    assert str(exc.ShapeMismatch([1, 2], [3])) == "Shape mismatch: [1, 2] vs [3]."
    assert str(exc.ShapeMismatch("inner dims differ")) == "Shape mismatch: inner dims differ."


def test_wrong_arity_does_not_crash() -> None:
    # A template needing more arguments than given still produces a readable message.
    text = str(exc.InvalidTileRange(1))
    assert "begin" in text and "1" in text


def test_plugin_and_backend_messages() -> None:
    err = exc.PluginOpNotInstalled("signal", "helion-distributed")
    assert str(err) == (
        "hl.signal is provided by the helion-distributed distribution: "
        "pip install helion-core[distributed]"
    )
    assert str(exc.PluginOpNotInstalled("hl.wait", "helion-distributed")).startswith("hl.wait is")
    unavailable = exc.BackendUnavailable("triton", "triton is not installed", "helion-triton")
    assert "Backend 'triton' is not available: triton is not installed" in str(unavailable)
    assert "pip install helion-triton" in str(unavailable)
    assert "helion-core[triton]" in str(unavailable)
    assert unavailable.distribution == "helion-triton"
    unsupported = exc.BackendUnsupported("hl.atomic_cas", "pallas")
    assert unsupported.op == "hl.atomic_cas" and unsupported.backend == "pallas"
    assert "hl.atomic_cas is not supported by the 'pallas' backend." in str(unsupported)
    assert isinstance(exc.CuteBackendUnavailable(), exc.BackendUnavailable)


def _write_module(tmp_path, source: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "user_kernel.py"
    path.write_text(textwrap.dedent(source))
    return path


def test_location_from_ast_node_formats_caret(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = _write_module(
        tmp_path,
        """\
        import torch

        def add(x, y):
            out = x + y
            return out
        """,
    )
    tree = ast.parse(path.read_text())
    binop = tree.body[1].body[0].value  # x + y
    loc = exc.SourceLocation.from_ast_node(binop, str(path), name="add")
    assert loc.lineno == 4
    text = loc.format()
    assert text.splitlines() == [
        f'File "{path}", line 4, in add',
        "    out = x + y",
        "          ^^^^^",
    ]
    err = exc.NotAllowedOnDevice("x + y", loc=loc)
    lines = str(err).splitlines()
    assert lines[0] == f'File "{path}", line 4, in add'
    assert lines[2] == "          ^^^^^"
    assert lines[3] == "x + y is not allowed inside the `hl.tile` or `hl.grid` loop."


def test_location_from_snippet_with_offsets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The frontend parses a dedented function body: lines and columns must be shifted back.
    path = _write_module(
        tmp_path,
        """\
        class Holder:
            def method(self, x):
                return x * 2
        """,
    )
    lines = path.read_text().splitlines(keepends=True)
    snippet = textwrap.dedent("".join(lines[1:]))
    tree = ast.parse(snippet)
    mult = tree.body[0].body[0].value
    loc = exc.SourceLocation.from_ast_node(
        mult, str(path), first_lineno_offset=1, col_offset_shift=4, name="method"
    )
    assert loc.lineno == 3
    assert loc.format().splitlines()[1:] == ["    return x * 2", "           ^^^^^"]


def test_location_utf8_columns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = _write_module(tmp_path, 's = "é" + bad\n')
    node = ast.parse(path.read_text()).body[0].value.right
    loc = exc.SourceLocation.from_ast_node(node, str(path))
    assert loc.format().splitlines()[1:] == ['    s = "é" + bad', "              ^^^"]


def test_location_without_source_file() -> None:
    loc = exc.SourceLocation("<missing>", 7, 0, name="fn")
    assert loc.format() == 'File "<missing>", line 7, in fn'
    explicit = exc.SourceLocation("<string>", 1, 4, end_col_offset=7, source_line="    abc = 1")
    assert explicit.format().splitlines()[1:] == ["    abc = 1", "    ^^^"]
    assert str(explicit) == "<string>:1"


def test_location_from_frame() -> None:
    def where() -> exc.SourceLocation:
        return exc.SourceLocation.from_frame()

    loc = where()
    assert loc.filename == __file__
    assert loc.name == "where"
    assert "exc.SourceLocation.from_frame()" in loc.format()
    assert "^" in loc.format().splitlines()[-1]


def test_current_location_context() -> None:
    loc = exc.SourceLocation("k.py", 3, 0, name="kern", source_line="y = x")
    assert exc.current_location() is None
    with exc.source_location(loc):
        err = exc.InvalidAPIUsage("oops")
        assert exc.current_location() is loc
    assert exc.current_location() is None
    assert err.loc is loc
    assert str(err).startswith('File "k.py", line 3, in kern')
    late = exc.InvalidAPIUsage("later").with_location(loc)
    assert str(late).startswith('File "k.py", line 3')


def test_location_survives_pickle() -> None:
    loc = exc.SourceLocation("k.py", 3, 0, name="kern", source_line="y = x")
    err = exc.RankMismatch(2, 3, loc=loc)
    again = pickle.loads(pickle.dumps(err))
    assert again.loc == loc
    assert str(again) == str(err)


def test_multiple_errors() -> None:
    first = exc.BackendUnsupported("hl.signal", "ref")
    second = exc.BackendUnsupported("hl.wait", "ref")
    with pytest.raises(exc.MultipleErrors) as info:
        exc.raise_collected([first, second])
    assert info.value.errors == [first, second]
    assert str(info.value).startswith("2 errors:")
    assert "hl.wait" in str(info.value)
    with pytest.raises(exc.BackendUnsupported):
        exc.raise_collected([first])
    exc.raise_collected([])  # nothing to raise


class _FakeSettings:
    def __init__(self, ignore: list[type]) -> None:
        self.ignore_warnings = ignore


def test_warn_emits_and_respects_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELION_IGNORE_WARNINGS", raising=False)
    with pytest.warns(exc.TensorOperationInWrapper, match="will not be fused"):
        exc.warn(exc.TensorOperationInWrapper())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exc.warn(exc.TensorOperationInWrapper(), _FakeSettings([exc.TensorOperationInWrapper]))
        # Ignoring a base class silences its subclasses.
        exc.warn(exc.TensorOperationsInHostCall("x.sum()"), _FakeSettings([exc.BaseWarning]))
    assert caught == []


def test_warn_respects_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELION_IGNORE_WARNINGS", "WrongDevice, CacheCorrupt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exc.warn(exc.WrongDevice("torch.ones", "cpu", "cuda"))
        exc.warn(exc.CacheCorrupt("/tmp/x", "bad json"))
        exc.warn(exc.BlockSizeIgnoredInInterpretMode(64))
    assert [type(w.message) for w in caught] == [exc.BlockSizeIgnoredInInterpretMode]


def test_warn_with_location_points_at_user_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELION_IGNORE_WARNINGS", raising=False)
    loc = exc.SourceLocation("user_kernel.py", 42, 0, source_line="acc += a @ b")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exc.warn(exc.TiledKMatmulAccumulationWarning("torch.float16", "torch.float32", loc=loc))
    assert len(caught) == 1
    assert caught[0].filename == "user_kernel.py" and caught[0].lineno == 42
    assert "torch.addmm" in str(caught[0].message)


def test_warn_rejects_non_helion_warning() -> None:
    with pytest.raises(TypeError, match="BaseWarning"):
        exc.warn(UserWarning("plain"))  # type: ignore[arg-type]


def test_warning_class_by_name() -> None:
    assert exc.warning_class_by_name("WrongDevice") is exc.WrongDevice
    with pytest.raises(ValueError, match=r"not a helion\.exc warning class"):
        exc.warning_class_by_name("InvalidConfig")


def test_invalid_setting_is_value_error() -> None:
    err = exc.InvalidSetting("HELION_X: bad")
    assert isinstance(err, ValueError) and isinstance(err, exc.BaseError)
