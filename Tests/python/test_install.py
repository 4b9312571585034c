"""`pip install ./bindings/python` works offline, and the installed package finds the library."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BINDINGS, LIBRARY

CHECK = """
import sys, tickgate, tickgate.aio
from pathlib import Path
assert Path(tickgate.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve()), tickgate.__file__
assert (Path(tickgate.__file__).parent / "py.typed").exists()
loaded = tickgate.load_library()
with tickgate.Engine(clock="manual", delivery="host") as engine:
    engine.start("login", "p", 2)
    engine.advance(1)
    print(loaded.source, engine.remaining("login", "p").remaining_ms, tickgate.__version__)
"""


def _install(source: Path, target: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
         "--disable-pip-version-check", "--quiet", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, f"pip install failed:\n{result.stdout}\n{result.stderr}"


def _run_installed(target: Path, library: "str | None") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TICKGATE_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    if library is not None:
        env["TICKGATE_LIBRARY"] = library
    return subprocess.run([sys.executable, "-c", CHECK, str(target)], capture_output=True, text=True,
                          env=env, cwd=target, timeout=120)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    # Build from a copy, so that setuptools' build/ and *.egg-info never land
    # in the source tree.
    src = tmp_path / "src"
    shutil.copytree(BINDINGS, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "_lib"))
    return src


def test_pip_install_target_with_environment_variable(source: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    _install(source, target)
    assert (target / "tickgate" / "__init__.py").exists()
    assert not (target / "tickgate" / "_lib").exists()
    result = _run_installed(target, LIBRARY)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["$TICKGATE_LIBRARY", "1000", "0.1.0"]


def test_pip_install_with_a_shipped_copy_of_the_library(source: Path, tmp_path: Path) -> None:
    lib_dir = source / "tickgate" / "_lib"
    lib_dir.mkdir()
    shutil.copyfile(Path(LIBRARY).resolve(), lib_dir / "libtickgate.so.0")
    target = tmp_path / "site"
    _install(source, target)
    assert (target / "tickgate" / "_lib" / "libtickgate.so.0").exists()
    result = _run_installed(target, None)  # no TICKGATE_LIBRARY: the copy is found
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["package", "copy"]


def test_installed_package_without_library_lists_places(source: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    _install(source, target)
    result = _run_installed(target, "/nonexistent/libtickgate.so")
    assert result.returncode != 0
    assert "LibraryNotFound" in result.stderr and "/nonexistent/libtickgate.so" in result.stderr
    assert str(target / "tickgate" / "_lib") in result.stderr
