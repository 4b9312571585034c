"""The build backend of the tickgate package: setuptools, with a fallback.

Every PEP 517 hook is setuptools.build_meta's. Only when setuptools cannot
build a wheel by itself (setuptools older than 70.1 needs the separate
``wheel`` package for that, and ``pip install --no-build-isolation`` offline
cannot fetch it) do ``build_wheel`` and ``prepare_metadata_for_build_wheel``
fall back to writing the wheel of this pure-Python package directly: the
files of ``tickgate/`` (``*.py``, ``py.typed`` and ``_lib/libtickgate.so*``
when present), a METADATA from pyproject.toml, WHEEL and RECORD.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sysconfig
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - every hook, as setuptools has it

ROOT = Path(__file__).resolve().parent.parent


def _setuptools_can_build_wheels() -> bool:
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1)

        return True
    except ImportError:
        pass
    try:
        import wheel.bdist_wheel  # noqa: F401

        return True
    except ImportError:
        return False


def _project() -> Dict[str, Any]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            from setuptools.extern import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(text)["project"]


def _dist_name(project: Dict[str, Any]) -> str:
    return f"{project['name'].replace('-', '_')}-{project['version']}"


def _metadata(project: Dict[str, Any]) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
    ]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    license_ = project.get("license", {})
    if isinstance(license_, dict) and "text" in license_:
        lines.append(f"License: {license_['text']}")
    for classifier in project.get("classifiers", []):
        lines.append(f"Classifier: {classifier}")
    readme = ROOT / str(project.get("readme", "README.md"))
    if readme.is_file():
        lines.append("Description-Content-Type: text/markdown")
        return "\n".join(lines) + "\n\n" + readme.read_text(encoding="utf-8")
    return "\n".join(lines) + "\n"


def _bundles_library() -> bool:
    return any(p.is_file() for p in (ROOT / "tickgate" / "_lib").glob("libtickgate.so*"))


def _tag() -> str:
    """py3-none-any, or the platform's tag when the wheel carries the library."""
    if not _bundles_library():
        return "py3-none-any"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{platform}"


def _wheel_file() -> str:
    purelib = "true" if not _bundles_library() else "false"
    return f"Wheel-Version: 1.0\nGenerator: tickgate_build\nRoot-Is-Purelib: {purelib}\nTag: {_tag()}\n"


def _package_files() -> List[Tuple[str, Path]]:
    package = ROOT / "tickgate"
    files = sorted(package.glob("*.py")) + [package / "py.typed"]
    files += sorted(p for p in (package / "_lib").glob("libtickgate.so*") if p.is_file())
    return [(p.relative_to(ROOT).as_posix(), p) for p in files if p.is_file()]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None
) -> str:
    if _setuptools_can_build_wheels() and not _bundles_library():
        return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)
    project = _project()
    dist_info = f"{_dist_name(project)}.dist-info"
    target = Path(metadata_directory) / dist_info
    target.mkdir(parents=True, exist_ok=True)
    (target / "METADATA").write_text(_metadata(project), encoding="utf-8")
    (target / "WHEEL").write_text(_wheel_file(), encoding="utf-8")
    return dist_info


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    if _setuptools_can_build_wheels() and not _bundles_library():
        return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    project = _project()
    name = _dist_name(project)
    dist_info = f"{name}.dist-info"
    wheel_name = f"{name}-{_tag()}.whl"
    entries: List[Tuple[str, bytes]] = [(arc, path.read_bytes()) for arc, path in _package_files()]
    entries.append((f"{dist_info}/METADATA", _metadata(project).encode("utf-8")))
    entries.append((f"{dist_info}/WHEEL", _wheel_file().encode("utf-8")))
    record = [_record_line(arc, data) for arc, data in entries] + [f"{dist_info}/RECORD,,"]
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(Path(wheel_directory) / wheel_name, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries:
            zf.writestr(arc, data)
        zf.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel_name


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    # setuptools asks for "wheel" when it lacks bdist_wheel; the fallback does not need it.
    if _setuptools_can_build_wheels():
        return _setuptools.get_requires_for_build_wheel(config_settings)
    return []
