#!/usr/bin/env python3
"""Every place that states Tickgate's version agrees (CTest: build.version).

The numbers are written once, in include/tickgate_version.h. This checks that
everything else says the same: the header includes them rather than defining
its own; CMake's project version (read from the header); the built library's
tg_version() and tg_version_string() and its file name; the Python package's
mirror of the numbers and tickgate.__version__; the pyproject's version
provider, applied to the header; the newest CHANGELOG entry; and that no other
tracked file writes the version out.

    check_version.py SOURCE_DIR BUILD_DIR LIBRARY
"""
import ctypes
import os
import re
import subprocess
import sys

source, build, library = (os.path.abspath(p) for p in sys.argv[1:4])
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}")


text = open(os.path.join(source, "include/tickgate_version.h")).read()
numbers = {m.group(1): int(m.group(2))
           for m in re.finditer(r"^#define TG_VERSION_(MAJOR|MINOR|PATCH) (\d+)$", text, re.M)}
check(len(numbers) == 3, f"tickgate_version.h defines MAJOR, MINOR and PATCH: {numbers}")
version = "{MAJOR}.{MINOR}.{PATCH}".format(**numbers)
print(f"     the version: {version}")

header = open(os.path.join(source, "include/tickgate.h")).read()
check('#include "tickgate_version.h"' in header and "#define TG_VERSION_MAJOR" not in header,
      "tickgate.h includes the numbers and defines none of its own")

cache = open(os.path.join(build, "CMakeCache.txt")).read()
cmake = re.search(r"^CMAKE_PROJECT_VERSION:STATIC=(.*)$", cache, re.M)
check(cmake and cmake.group(1) == version, f"CMake's project version: {cmake and cmake.group(1)}")

lib = ctypes.CDLL(library)
lib.tg_version.restype = ctypes.c_uint32
lib.tg_version_string.restype = ctypes.c_char_p
hexv = lib.tg_version()
check(hexv == (numbers["MAJOR"] << 16 | numbers["MINOR"] << 8 | numbers["PATCH"]),
      f"tg_version() of the library: {hexv:#x}")
check(lib.tg_version_string().decode() == version,
      f"tg_version_string() of the library: {lib.tg_version_string().decode()}")
real = os.path.basename(os.path.realpath(library))
check(real == f"libtickgate.so.{version}", f"the library's file name: {real}")

sys.path.insert(0, os.path.join(source, "bindings/python"))
import tickgate  # noqa: E402
from tickgate import _ffi  # noqa: E402
check((_ffi.TG_VERSION_MAJOR, _ffi.TG_VERSION_MINOR, _ffi.TG_VERSION_PATCH)
      == (numbers["MAJOR"], numbers["MINOR"], numbers["PATCH"]), "the Python package's numbers (_ffi.py)")
check(tickgate.__version__ == version, f"tickgate.__version__: {tickgate.__version__}")

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None
pyproject_path = os.path.join(source, "bindings/python/pyproject.toml")
if tomllib:
    pyproject = tomllib.load(open(pyproject_path, "rb"))
    provider = pyproject["tool"]["scikit-build"]["metadata"]["version"]
    target = os.path.normpath(os.path.join(source, "bindings/python", provider["input"]))
    match = re.search(provider["regex"], open(target).read())
    got = provider["result"].format(**match.groupdict()) if match else None
    check("version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
          and target == os.path.join(os.path.normpath(source), "include/tickgate_version.h") and got == version,
          f"pyproject.toml's version provider reads tickgate_version.h: {got}")
else:
    check('input = "../../include/tickgate_version.h"' in open(pyproject_path).read(),
          "pyproject.toml's version provider reads tickgate_version.h")

changelog = open(os.path.join(source, "CHANGELOG.md")).read()
newest = re.search(r"^## \[?(\d+\.\d+\.\d+)", changelog, re.M)
check(newest and newest.group(1) == version, f"the newest CHANGELOG.md entry: {newest and newest.group(1)}")

# No other tracked file writes the version out.
try:
    files = subprocess.check_output(["git", "-C", source, "ls-files"], text=True,
                                    stderr=subprocess.DEVNULL).split()
except (OSError, subprocess.CalledProcessError):
    files = [os.path.relpath(os.path.join(d, f), source) for d, _, fs in os.walk(source)
             if "/build" not in d and "/.git" not in d for f in fs]
# The release history: CHANGELOG.md, and the upgrade page's table of releases.
# A run of `make bench` (the run it keeps and the page made from it) names
# the version it measured, which stays true when the version moves on.
allowed = {"CHANGELOG.md", "docs/upgrading.md", "docs/bench-run.txt", "docs/performance.md"}
# A version inside a longer dotted number (an address such as 192.0.2.1) is none;
# nor is a note of history ("added in 0.2.0", "before 0.2.0", "0.2.0 on"),
# which stays true when the version moves on.
pattern = re.compile(r"(?<![\d.])" + re.escape(version) + r"(?!\.?\d)")
history = re.compile(r"(?:\b(?:in|before|since|from)\s+)" + re.escape(version) + r"(?!\.?\d)|"
                     + re.escape(version) + r"\s+on\b", re.I)
stray = []
for name in files:
    if name in allowed or "/corpus/" in name or name.endswith((".png", ".db")):
        continue
    try:
        content = open(os.path.join(source, name), encoding="utf-8", errors="ignore").read()
    except OSError:
        continue
    if pattern.search(history.sub("", content)):
        stray.append(name)
check(not stray, f"no other file writes {version}: {stray}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
