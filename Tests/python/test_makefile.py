"""The Makefile's promises about the user's own Python, and what it says (issue 41)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("target", ["tools", "build", "demo", "test"])
def test_make_never_installs_into_the_users_python(target: str, tmp_path: Path) -> None:
    # `make demo` ran `python3 -m pip install prometheus_client` (in the
    # tools target) into whatever python3 was on PATH.
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), target, f"BUILD_DIR={tmp_path}"],
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    # What is run, without the messages it prints.
    commands = re.sub(r'echo "[^"]*"', "echo", dry.stdout)
    assert not re.search(r"\bpip3?\b|\bensurepip\b|easy_install", commands), dry.stdout


def test_the_web_venv_says_it_is_installing_before_it_does(tmp_path: Path) -> None:
    # The first `make demo-web` spent a minute or more in a quiet pip install
    # with nothing printed but the venv.sh command line (the newcomer's walk).
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("aiohttp==3.9.5\n", encoding="utf-8")
    done = subprocess.run(["sh", str(ROOT / "examples" / "web" / "venv.sh"), str(tmp_path / "venv"),
                           str(requirements), "false"],  # a python that fails: nothing is installed
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == (f"venv.sh: making {tmp_path / 'venv'} with the packages of {requirements} "
                           "(the first time, a minute or two)\n")
    assert "'false -m venv' failed" in done.stderr
