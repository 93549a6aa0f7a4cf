"""The cache of generated modules (``$HELION_CACHE_DIR/triton/``): a file that does not hold the
module's source -- other text, or bytes that are not text at all -- is rewritten, never trusted
and never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from helion_triton import launcher

SOURCE = "# generated: café\nVALUE = 42\n"


@pytest.fixture
def module_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path))
    return tmp_path / "triton"


def _load_fresh(monkeypatch: pytest.MonkeyPatch) -> object:
    # as a new process would: nothing loaded yet, only the files on disk
    monkeypatch.setattr(launcher, "_modules", {})
    return launcher.load_module(SOURCE, "cached", interpret=False)


@pytest.mark.parametrize(
    "damage",
    [bytes([0xF8, 0x81, 0x00, 0xFF]) * 50, b"VALUE = 0\n", b""],
    ids=["binary", "other-text", "empty"],
)
def test_a_damaged_module_file_is_rewritten(
    module_cache: Path, monkeypatch: pytest.MonkeyPatch, damage: bytes
) -> None:
    assert _load_fresh(monkeypatch).VALUE == 42  # type: ignore[attr-defined]
    [path] = module_cache.glob("cached_*.py")
    assert path.read_bytes() == SOURCE.encode("utf-8")
    path.write_bytes(damage)
    assert _load_fresh(monkeypatch).VALUE == 42  # type: ignore[attr-defined]
    assert path.read_bytes() == SOURCE.encode("utf-8")


def test_a_cache_dir_that_is_a_file_falls_back_to_a_private_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("HELION_CACHE_DIR", str(blocker))
    monkeypatch.setattr(launcher, "_private_dir", None)
    with pytest.warns(UserWarning, match="cannot write generated kernels to .*HELION_CACHE_DIR"):
        assert _load_fresh(monkeypatch).VALUE == 42  # type: ignore[attr-defined]
    private = launcher.cache_dir()
    assert private != blocker / "triton" and list(private.glob("cached_*.py"))
    assert blocker.read_text() == "a file where the cache directory should be"  # untouched


def test_an_unwritable_module_file_falls_back_to_a_private_dir(
    module_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module_cache.mkdir(parents=True)
    monkeypatch.setattr(launcher, "_private_dir", None)

    def refuse(path: Path, data: bytes) -> None:
        if path.parent == module_cache:
            raise PermissionError(13, "Permission denied", str(path))
        path.write_bytes(data)

    monkeypatch.setattr(launcher, "_write_atomically", refuse)
    with pytest.warns(UserWarning, match="cannot write generated kernels"):
        assert _load_fresh(monkeypatch).VALUE == 42  # type: ignore[attr-defined]
    assert not list(module_cache.glob("cached_*.py"))
