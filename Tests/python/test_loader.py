"""Finding libtickgate.so: the lookup order, the error that lists every place, the version check."""

from __future__ import annotations

import ctypes.util
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tickgate
from tickgate import _ffi, _loader
from conftest import BINDINGS, LIBRARY

BOGUS_ENV = "/nonexistent/env/libtickgate.so"
BOGUS_PATH = "/nonexistent/explicit/libtickgate.so"


@pytest.fixture
def no_system_library(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Make places 3 and 4 empty: no package copy, nothing on the system."""
    empty = tmp_path / "_lib"
    empty.mkdir()
    monkeypatch.setattr(_loader, "PACKAGE_LIB_DIR", empty)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.setattr(_loader, "SONAME", "libtickgate-not-installed.so.0")
    return empty


def test_explicit_path_comes_first() -> None:
    loaded = _loader.open_library(LIBRARY, environ={"TICKGATE_LIBRARY": BOGUS_ENV})
    assert loaded.source == "path argument"
    assert loaded.path == LIBRARY
    assert loaded.version >> 16 == 0


def test_environment_variable_comes_second() -> None:
    loaded = _loader.open_library(None, environ={"TICKGATE_LIBRARY": LIBRARY})
    assert loaded.source == "$TICKGATE_LIBRARY"
    assert loaded.path == LIBRARY


def test_environment_beats_package_copy_and_system(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    copy = tmp_path / "_lib"
    copy.mkdir()
    (copy / "libtickgate.so.0").symlink_to(Path(LIBRARY).resolve())
    monkeypatch.setattr(_loader, "PACKAGE_LIB_DIR", copy)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: LIBRARY)
    loaded = _loader.open_library(None, environ={"TICKGATE_LIBRARY": LIBRARY})
    assert loaded.source == "$TICKGATE_LIBRARY"


def test_package_copy_comes_third(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    copy = tmp_path / "_lib"
    copy.mkdir()
    # A symlink to the very file already loaded: dlopen finds the same object.
    (copy / "libtickgate.so.0").symlink_to(Path(LIBRARY).resolve())
    monkeypatch.setattr(_loader, "PACKAGE_LIB_DIR", copy)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    caplog.set_level(logging.WARNING, logger="tickgate")
    loaded = _loader.open_library(None, environ={"TICKGATE_LIBRARY": BOGUS_ENV})
    assert loaded.source == "package copy"
    assert loaded.path == str(copy / "libtickgate.so.0")
    # The variable that pointed nowhere is not silently forgotten.
    assert any(BOGUS_ENV in r.getMessage() for r in caplog.records), caplog.text


def test_system_loader_comes_last(monkeypatch: pytest.MonkeyPatch, no_system_library: Path) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: LIBRARY if name == "tickgate" else None)
    loaded = _loader.open_library(None, environ={})
    assert loaded.source.startswith("system loader")


def test_not_found_lists_every_place(no_system_library: Path) -> None:
    with pytest.raises(tickgate.LibraryNotFound) as info:
        _loader.open_library(BOGUS_PATH, environ={"TICKGATE_LIBRARY": BOGUS_ENV})
    err = info.value
    assert isinstance(err, ImportError)
    assert isinstance(err, tickgate.LibraryError)
    text = str(err)
    # Every place, in lookup order, with why it failed.
    order = [BOGUS_PATH, BOGUS_ENV, str(no_system_library), 'find_library("tickgate")', "libtickgate-not-installed.so.0"]
    positions = [text.find(p) for p in order]
    assert all(p >= 0 for p in positions), text
    assert positions == sorted(positions), text
    assert len(err.tried) == 5
    assert err.tried[0].startswith("path argument")
    assert err.tried[1].startswith("$TICKGATE_LIBRARY")
    assert err.tried[2].startswith("package copy")
    assert "found nothing" in err.tried[3]
    assert "TICKGATE_LIBRARY" in text and "make build" in text


def test_not_found_says_what_was_not_given(no_system_library: Path) -> None:
    with pytest.raises(tickgate.LibraryNotFound) as info:
        _loader.open_library(None, environ={})
    assert "path argument: not given" in str(info.value)
    assert "$TICKGATE_LIBRARY: not set" in str(info.value)


def test_a_file_that_is_not_tickgate_is_skipped(no_system_library: Path) -> None:
    not_tickgate = "libc.so.6"
    loaded = _loader.open_library(not_tickgate, environ={"TICKGATE_LIBRARY": LIBRARY})
    assert loaded.source == "$TICKGATE_LIBRARY"
    with pytest.raises(tickgate.LibraryNotFound) as info:
        _loader.open_library(not_tickgate, environ={})
    assert "not libtickgate" in str(info.value)


def test_version_mismatch_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_loader, "EXPECTED_MAJOR", 1)
    with pytest.raises(tickgate.LibraryVersionMismatch) as info:
        # The variable holds a good library too: a wrong version found on
        # purpose is an error, not a reason to look further.
        _loader.open_library(LIBRARY, environ={"TICKGATE_LIBRARY": LIBRARY})
    err = info.value
    assert isinstance(err, ImportError)
    assert err.path == LIBRARY
    assert err.version >> 16 == 0
    text = str(err)
    assert tickgate.library_version() in text
    assert "major version 0" in text and "need major version 1" in text


def test_version_match_passes() -> None:
    loaded = tickgate.load_library()
    assert loaded.version >> 16 == tickgate.EXPECTED_MAJOR
    assert loaded.version_string == tickgate.library_version()


def test_load_library_is_once_per_process(tmp_path: Path) -> None:
    first = tickgate.load_library()
    assert tickgate.load_library() is first
    link = tmp_path / "same.so"
    link.symlink_to(Path(first.path).resolve())
    assert tickgate.load_library(link) is first  # the same file by another name
    other = tmp_path / "libtickgate-other.so"
    shutil.copyfile(Path(first.path).resolve(), other)
    with pytest.raises(tickgate.LibraryError, match="already loaded"):
        tickgate.load_library(other)


def _python(code: str, env_library: "str | None", cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TICKGATE_LIBRARY"}
    env["PYTHONPATH"] = str(BINDINGS)
    if env_library is not None:
        env["TICKGATE_LIBRARY"] = env_library
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_import_works_without_the_library_and_engine_reports_the_places(tmp_path: Path) -> None:
    code = (
        "import tickgate\n"
        "try:\n"
        "    tickgate.Engine()\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__); print(e)\n"
    )
    result = _python(code, BOGUS_ENV, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("LibraryNotFound"), result.stdout
    assert BOGUS_ENV in result.stdout


def test_explicit_path_in_a_fresh_process(tmp_path: Path) -> None:
    code = (
        "import sys, tickgate\n"
        "lib = tickgate.load_library(sys.argv[1] if len(sys.argv) > 1 else %r)\n"
        "print(lib.source)\n"
        "with tickgate.Engine(clock='manual', delivery='host') as e:\n"
        "    print(e.start('s', 'k', 1).remaining_ms)\n" % LIBRARY
    )
    result = _python(code, BOGUS_ENV, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["path argument", "1000"]


def test_engine_library_argument(tmp_path: Path) -> None:
    code = (
        "import tickgate\n"
        "with tickgate.Engine(library=%r, clock='manual') as e:\n"
        "    print(tickgate._ffi.loaded_library().source)\n" % LIBRARY
    )
    result = _python(code, BOGUS_ENV, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "path argument"


def test_loaded_library_is_declared() -> None:
    assert _ffi.loaded_library() is not None
    assert _ffi.library().tg_engine_open.argtypes is not None
