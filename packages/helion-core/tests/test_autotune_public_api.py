"""Public Helion's ways of calling the autotuner: `Kernel.autotune(args, **options)` with the
search's options."""

from __future__ import annotations

import pytest
import torch

import helion
import helion.language as hl


def add_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = x[t, :] + 1
    return out


def test_autotune_takes_max_generations_over_the_setting(tmp_path, monkeypatch) -> None:
    """`max_generations=` given to autotune() overrides `autotune_max_generations` (it was
    passed to the search twice: a TypeError)."""
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    kernel = helion.kernel(add_one, backend="ref", autotune_max_generations=5)
    x = torch.randn(67, 9)
    config = kernel.autotune((x,), max_generations=1, max_evaluations=3)
    assert isinstance(config, helion.Config)
    torch.testing.assert_close(kernel(x), x + 1)


# ---------------------------------------------------------------------- autotuner_fn objects
def _tuned_with(autotuner_fn, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    kernel = helion.kernel(
        add_one,
        backend="ref",
        autotuner_fn=autotuner_fn,
        autotune_effort="quick",
        autotune_log_level=0,
        autotune_progress_bar=False,
    )
    x = torch.randn(64, 8)
    torch.testing.assert_close(kernel(x), x + 1)
    return kernel.bind((x,))._config


def test_public_search_objects_work_as_autotuner_fn(tmp_path, monkeypatch) -> None:
    """`autotuner_fn=lambda bound, args, **kw: PatternSearch(bound, args, ...)` (public
    Helion's pattern) died with `'PatternSearch' object is not iterable`."""
    import helion.autotuner as A

    a, b = helion.Config(block_sizes=[16]), helion.Config(block_sizes=[32])
    makers = [
        lambda bound, args, **kw: A.PatternSearch(bound, args, max_generations=1, **kw),
        lambda bound, args, **kw: A.RandomSearch(bound, args, count=3),
        lambda bound, args, **kw: A.DifferentialEvolutionSearch(bound, args, max_evaluations=5),
        lambda bound, args, **kw: A.LFBOTreeSearch(bound, args, max_evaluations=3),
        lambda bound, args, **kw: A.LocalAutotuneCache(A.LFBOPatternSearch(bound, args)),
        A.default_autotuner_fn,
    ]
    for maker in makers:
        assert isinstance(_tuned_with(maker, tmp_path, monkeypatch), helion.Config)
    finite = _tuned_with(
        lambda bound, args, **kw: A.FiniteSearch(bound, args, configs=[a, b]), tmp_path, monkeypatch
    )
    assert finite in (a, b)


def test_public_search_names(tmp_path) -> None:
    import helion.autotuner as A
    from helion.autotuner.search import get_search

    assert A.LFBOTreeSearch is get_search("LFBOTreeSearch")
    assert A.LFBOPatternSearch is get_search("LFBOPatternSearch")
    assert A.DESurrogateHybrid is get_search("DESurrogateHybrid")
    assert issubclass(A.LocalAutotuneCache, A.BaseAutotuner)
    assert issubclass(A.StrictLocalAutotuneCache, A.LocalAutotuneCache)
    assert issubclass(A.PatternSearch, A.BaseAutotuner)


def test_bare_search_skips_the_cache_and_local_autotune_cache_uses_it(
    tmp_path, monkeypatch
) -> None:
    import helion.autotuner as A
    from helion.autotuner import cache as cache_module
    from helion.autotuner import driver

    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    kernel = helion.kernel(
        add_one, backend="ref", autotune_log_level=0, autotune_progress_bar=False
    )
    x = torch.randn(64, 8)
    bound = kernel.bind((x,))
    bare = A.PatternSearch(bound, (x,), max_evaluations=3, max_generations=1)
    assert isinstance(bare.autotune(), helion.Config)
    assert cache_module.list_entries() == []

    cached = A.LocalAutotuneCache(A.PatternSearch(bound, (x,), max_evaluations=3))
    config = cached.autotune()
    assert len(cache_module.list_entries()) == 1

    def no_tuning(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a cache hit must not tune")

    monkeypatch.setattr(driver, "_tune", no_tuning)
    assert A.LocalAutotuneCache(A.PatternSearch(bound, (x,))).autotune() == config
    with pytest.raises(AssertionError, match="must not tune"):
        A.LocalAutotuneCache(A.PatternSearch(bound, (x,))).autotune(skip_cache=True)


def test_search_objects_check_their_options_where_made(tmp_path, monkeypatch) -> None:
    import helion.autotuner as A

    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    x = torch.randn(64, 8)
    bound = helion.kernel(add_one, backend="ref", autotune_log_level=0).bind((x,))
    with pytest.raises(helion.exc.InvalidSetting, match="max_generations"):
        A.PatternSearch(bound, (x,), max_gens=1)
    with pytest.raises(helion.exc.InvalidSetting, match="seed"):
        A.RandomSearch(bound, (x,), seed="abc")
    with pytest.raises(helion.exc.InvalidConfig, match=r"configs\[1\]"):
        A.FiniteSearch(bound, (x,), configs=[helion.Config(block_sizes=[16]), None])
    with pytest.raises(TypeError, match="made from a bound kernel"):
        A.LocalAutotuneCache(A.PatternSearch(bound.config_spec, None))
    with pytest.raises(TypeError, match=r"run\(\)"):
        A.PatternSearch(bound.config_spec, None).autotune()


@pytest.mark.parametrize("returned", [5, None, "PatternSearch-class"])
def test_autotuner_fn_returning_no_autotuner_is_a_clear_error(
    tmp_path, monkeypatch, returned
) -> None:
    import helion.autotuner as A

    value = A.PatternSearch if returned == "PatternSearch-class" else returned
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    kernel = helion.kernel(
        add_one, backend="ref", autotuner_fn=lambda bound, args, **kw: value, autotune_log_level=0
    )
    with pytest.raises(TypeError) as info:
        kernel(torch.randn(64, 8))
    text = str(info.value)
    assert "autotune()" in text and "helion.Config" in text
    assert "not iterable" not in text
