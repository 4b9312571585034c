"""The Makefile's promises about the user's own Python (issue 41)."""

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
