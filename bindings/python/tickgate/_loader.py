"""Finding and opening libtickgate.so.

The places are tried in this order, and the first library that opens wins:

1. the ``path`` argument of :func:`tickgate.load_library` (or ``Engine(library=...)``),
2. the environment variable ``TICKGATE_LIBRARY``,
3. a copy shipped inside the package: ``tickgate/_lib/libtickgate.so*``,
4. the system loader: ``ctypes.util.find_library("tickgate")``, then
   ``libtickgate.so.<MAJOR>`` through the dynamic loader's search path.

When none opens, :class:`LibraryNotFound` (an :class:`ImportError`) lists
every place with the reason it failed. A library that opens but whose major
version differs from :data:`EXPECTED_MAJOR` raises
:class:`LibraryVersionMismatch` at once: a wrong library found on purpose is
an installation error that falling back would hide.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional, Tuple

__all__ = [
    "EXPECTED_MAJOR",
    "ENV_VAR",
    "PACKAGE_LIB_DIR",
    "SONAME",
    "LibraryError",
    "LibraryNotFound",
    "LibraryVersionMismatch",
    "LoadedLibrary",
    "open_library",
]

#: The major version of the C API these bindings were written for.
EXPECTED_MAJOR = 0
#: The environment variable naming the library file.
ENV_VAR = "TICKGATE_LIBRARY"
#: Where a copy of the library may be shipped inside the package.
PACKAGE_LIB_DIR = Path(__file__).resolve().parent / "_lib"
#: The name the dynamic loader's search path is asked for, last.
SONAME = f"libtickgate.so.{EXPECTED_MAJOR}"

_log = logging.getLogger("tickgate")


class LibraryError(ImportError):
    """libtickgate.so could not be used (base of the two errors below)."""


class LibraryNotFound(LibraryError):
    """No place of the lookup held a library that opens; the message lists them all."""

    def __init__(self, message: str, tried: Tuple[str, ...]) -> None:
        super().__init__(message)
        #: One line per place tried, with why it failed.
        self.tried = tried


class LibraryVersionMismatch(LibraryError):
    """The library opened, but its major version is not :data:`EXPECTED_MAJOR`."""

    def __init__(self, message: str, path: str, version: int) -> None:
        super().__init__(message)
        self.path = path
        #: ``tg_version()`` of the library: ``MAJOR << 16 | MINOR << 8 | PATCH``.
        self.version = version


@dataclass(frozen=True)
class LoadedLibrary:
    """A library that opened and passed the version check."""

    cdll: ctypes.CDLL
    #: What was passed to ``dlopen`` (a path or a bare file name).
    path: str
    #: Which place of the lookup it came from.
    source: str
    #: ``tg_version()``: ``MAJOR << 16 | MINOR << 8 | PATCH``.
    version: int
    #: ``tg_version_string()``.
    version_string: str


def _version_text(version: int) -> str:
    return f"{version >> 16}.{(version >> 8) & 0xFF}.{version & 0xFF}"


def _package_copies() -> Iterator[str]:
    """The shipped copies, ``libtickgate.so.MAJOR`` first."""
    if not PACKAGE_LIB_DIR.is_dir():
        return
    names = sorted(p.name for p in PACKAGE_LIB_DIR.glob("libtickgate.so*"))
    preferred = f"libtickgate.so.{EXPECTED_MAJOR}"
    names.sort(key=lambda n: (n != preferred, n != "libtickgate.so", n))
    for name in names:
        yield str(PACKAGE_LIB_DIR / name)


def _candidates(
    path: Optional[str], environ: Mapping[str, str]
) -> Iterator[Tuple[str, Optional[str], str]]:
    """(place, what to dlopen or None, why None) in lookup order."""
    if path is not None:
        yield "path argument", os.fspath(path), ""
    else:
        yield "path argument", None, "not given"
    env = environ.get(ENV_VAR)
    if env:
        yield f"${ENV_VAR}", env, ""
    else:
        yield f"${ENV_VAR}", None, "not set"
    copies = list(_package_copies())
    if copies:
        for copy in copies:
            yield "package copy", copy, ""
    else:
        yield "package copy", None, f"no libtickgate.so* in {PACKAGE_LIB_DIR}"
    found = ctypes.util.find_library("tickgate")
    if found:
        yield 'system loader (find_library("tickgate"))', found, ""
    else:
        yield 'system loader (find_library("tickgate"))', None, "found nothing"
    yield "system loader (search path)", SONAME, ""


def open_library(
    path: Optional[str | os.PathLike[str]] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> LoadedLibrary:
    """Find, open and version-check libtickgate.so (no global state).

    Raises :class:`LibraryNotFound` listing every place tried, or
    :class:`LibraryVersionMismatch`.
    """
    if environ is None:
        environ = os.environ
    tried = []
    explicit_failed = False
    for place, what, why in _candidates(
        None if path is None else os.fspath(path), environ
    ):
        if what is None:
            tried.append(f"{place}: {why}")
            continue
        try:
            cdll = ctypes.CDLL(what)
        except OSError as exc:
            tried.append(f"{place}: {what}: {exc}")
            explicit_failed = explicit_failed or place in ("path argument", f"${ENV_VAR}")
            continue
        try:
            tg_version = cdll.tg_version
            tg_version_string = cdll.tg_version_string
        except AttributeError:
            tried.append(f"{place}: {what}: opens, but has no tg_version(): not libtickgate")
            explicit_failed = explicit_failed or place in ("path argument", f"${ENV_VAR}")
            continue
        tg_version.restype = ctypes.c_uint32
        tg_version.argtypes = []
        tg_version_string.restype = ctypes.c_char_p
        tg_version_string.argtypes = []
        version = int(tg_version())
        text = (tg_version_string() or b"").decode("utf-8", "replace")
        if version >> 16 != EXPECTED_MAJOR:
            raise LibraryVersionMismatch(
                f"tickgate: {what} (from {place}) is libtickgate {text or _version_text(version)}, "
                f"major version {version >> 16}, but these bindings need major version "
                f"{EXPECTED_MAJOR}. Point {ENV_VAR} at a matching libtickgate.so.{EXPECTED_MAJOR}.",
                what,
                version,
            )
        if explicit_failed:
            _log.warning(
                "tickgate: using %s from %s; earlier places failed: %s",
                what, place, "; ".join(tried),
            )
        return LoadedLibrary(cdll, what, place, version, text)
    lines = "\n".join(f"  - {t}" for t in tried)
    raise LibraryNotFound(
        "tickgate: could not load libtickgate.so. Tried, in order:\n"
        f"{lines}\n"
        f"Build it (make build) and set {ENV_VAR}=/path/to/libtickgate.so, "
        "pass the path to tickgate.load_library(), or install it where the "
        "dynamic loader finds it.",
        tuple(tried),
    )
