"""The previous release, built from the repository's own history.

Tests/upgrade/releases lists every release and its commit; the newest line
is the release users run today. Its tree is extracted with `git archive`
into BUILD/previous/COMMIT/src and only its library target is built, in
BUILD/previous/COMMIT/build. Both are kept: a later run finds the library
there and builds nothing (a commit's tree never changes).

A clone whose history lacks the commit (a shallow clone, a tarball) cannot
build it: `Missing` says why and how to get it, and the test reports SKIP.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple


class Missing(Exception):
    """The previous release cannot be had from this checkout (SKIP)."""


class BuildFailed(Exception):
    """The previous release's tree was there but did not build (FAIL)."""


@dataclass
class Release:
    version: str
    commit: str
    tree: Path        # its source tree (bindings/python is there)
    library: Path     # its libtickgate.so
    built_s: Optional[float]   # seconds spent building now; None: reused


def releases(source: Path) -> List[Tuple[str, str]]:
    """(version, commit) of every release in Tests/upgrade/releases, oldest first."""
    listed = []
    for line in (source / "Tests" / "upgrade" / "releases").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            version, commit = line.split()
            if len(commit) != 40:
                raise ValueError(f"Tests/upgrade/releases: {version}'s commit is not a full hash: {commit}")
            listed.append((version, commit))
    if not listed:
        raise ValueError("Tests/upgrade/releases lists no release")
    return listed


def git(source: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(source), *args], **kwargs)


def check_history(source: Path, version: str, commit: str) -> None:
    if shutil.which("git") is None:
        raise Missing(f"git is not installed: the previous release ({version}, {commit[:10]}) "
                      "is built from the repository's history")
    inside = git(source, "rev-parse", "--git-dir", capture_output=True, text=True)
    if inside.returncode != 0:
        raise Missing(f"{source} is not a git checkout (no history to build the previous release "
                      f"{version}, {commit[:10]}, from): test a clone")
    if git(source, "cat-file", "-e", f"{commit}^{{commit}}", capture_output=True).returncode != 0:
        shallow = git(source, "rev-parse", "--is-shallow-repository", capture_output=True, text=True)
        why = ("this is a shallow clone" if shallow.stdout.strip() == "true"
               else "the repository's history does not hold it")
        raise Missing(f"the previous release {version} is commit {commit[:10]}, and {why}: "
                      f"run 'git fetch --unshallow' (or clone without --depth) to test upgrades")


def extract(source: Path, commit: str, into: Path) -> None:
    """The commit's tree into `into` (made whole, then renamed into place)."""
    partial = into.with_name(into.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(source), "archive", "--format=tar", commit],
                               stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(partial)], stdin=archive.stdout)
    archive.stdout.close()
    if archive.wait() != 0 or untar.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise BuildFailed(f"git archive {commit} | tar -x failed")
    shutil.rmtree(into, ignore_errors=True)
    partial.rename(into)


def tree_version(tree: Path) -> str:
    """MAJOR.MINOR.PATCH of a tree's include/tickgate_version.h."""
    numbers = {}
    for line in (tree / "include" / "tickgate_version.h").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#define" and parts[1] in (
                "TG_VERSION_MAJOR", "TG_VERSION_MINOR", "TG_VERSION_PATCH"):
            numbers[parts[1]] = parts[2]
    return "{TG_VERSION_MAJOR}.{TG_VERSION_MINOR}.{TG_VERSION_PATCH}".format(**numbers)


def prepare(source: Path, build: Path, tools: dict, commit: Optional[str] = None, log=print) -> Release:
    """The newest release of Tests/upgrade/releases (or the given commit),
    extracted and built (or found built) under build/previous/COMMIT. tools:
    the CMake program, Ninja and the compilers of this build (so the old
    tree is built alike)."""
    if commit is None:
        version, commit = releases(source)[-1]
    else:
        version = commit[:10]
        resolved = git(source, "rev-parse", "--verify", f"{commit}^{{commit}}", capture_output=True, text=True)
        if resolved.returncode != 0:
            raise Missing(f"no commit {commit} in the repository's history")
        commit = resolved.stdout.strip()
    home = build / "previous" / commit
    library = home / "build" / "libtickgate.so"
    done = home / "built"
    home.mkdir(parents=True, exist_ok=True)
    # Two runs at once (two ctest processes on one build folder) build it once.
    with open(home.parent / f"{commit}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists() and library.exists() and (home / "src" / "bindings" / "python").is_dir():
            version = tree_version(home / "src")
            log(f"     previous release {version} ({commit[:10]}): reused {library}")
            return Release(version, commit, home / "src", library, None)
        check_history(source, version, commit)
        started = time.monotonic()
        log(f"     previous release {version} ({commit[:10]}): extracting and building its library "
            f"in {home} (a few minutes, once)")
        extract(source, commit, home / "src")
        version = tree_version(home / "src")
        configure = [tools["cmake"], "-S", str(home / "src"), "-B", str(home / "build"), "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=Release"]
        for name, option in (("ninja", "CMAKE_MAKE_PROGRAM"), ("c", "CMAKE_C_COMPILER"),
                             ("cxx", "CMAKE_CXX_COMPILER"), ("swiftc", "CMAKE_Swift_COMPILER"),
                             ("swift", "SWIFT_EXECUTABLE")):
            if tools.get(name):
                configure.append(f"-D{option}={tools[name]}")
        with open(home / "build.log", "w") as out:
            for step in (configure, [tools["cmake"], "--build", str(home / "build"), "--target", "tickgate"]):
                out.write("$ " + " ".join(step) + "\n")
                out.flush()
                if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                    tail = (home / "build.log").read_text(errors="replace")[-3000:]
                    raise BuildFailed(f"building the previous release {version} failed "
                                      f"({home / 'build.log'}):\n{tail}")
        if not library.exists():
            raise BuildFailed(f"the previous release's build made no {library}")
        done.write_text(f"{version} {commit}\n")
        seconds = time.monotonic() - started
        log(f"     previous release {version}: built in {seconds:.0f} s")
        return Release(version, commit, home / "src", library, seconds)
