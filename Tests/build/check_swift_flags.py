#!/usr/bin/env python3
"""The two builds compile Swift alike (CTest: build.swift_flags).

Package.swift (SwiftPM) and CMakeLists.txt (CMake + Ninja, which builds the
shipped libtickgate.so) must give each Swift target the same flags that change
what the code means: the language mode, experimental features, and the
exclusivity checks. This reads the manifest as SwiftPM sees it
(`swift package dump-package`) and the flags CMake generated
(build.ninja), and fails on any difference for the build type at hand. It also
holds the rule itself: exclusivity checks are off in release builds only.

    check_swift_flags.py SOURCE_DIR BUILD_DIR BUILD_TYPE
"""
import json
import re
import shlex
import subprocess
import sys

# Package.swift target -> CMake target
TARGETS = {"TickgateCore": "TickgateCore", "Tickgate": "tickgate"}
UNCHECKED = "-enforce-exclusivity=unchecked"


def semantic(flags):
    """The flags that change what Swift code means, as a set of strings."""
    out = set()
    i = 0
    while i < len(flags):
        f = flags[i]
        if f in ("-swift-version", "-enable-experimental-feature", "-enable-upcoming-feature"):
            out.add(f"{f} {flags[i + 1]}")
            i += 2
            continue
        if f.startswith("-enforce-exclusivity=") or f.startswith("-strict-concurrency="):
            out.add(f)
        elif f.startswith("-D"):
            out.add(f)
        i += 1
    return out


def swiftpm(source, config):
    manifest = json.loads(subprocess.check_output(
        ["swift", "package", "dump-package", "--package-path", source], text=True))
    major = str(manifest["toolsVersion"]["_version"]).split(".")[0]
    result = {}
    for target in manifest["targets"]:
        if target["name"] not in TARGETS:
            continue
        flags = []
        mode = major if int(major) >= 6 else "5"
        for setting in target.get("settings", []):
            if setting.get("tool") != "swift":
                continue
            condition = setting.get("condition") or {}
            if condition.get("config") not in (None, config):
                continue
            kind = setting["kind"]
            if "swiftLanguageMode" in kind:
                mode = str(kind["swiftLanguageMode"]["_0"])
            elif "enableExperimentalFeature" in kind:
                flags += ["-enable-experimental-feature", kind["enableExperimentalFeature"]["_0"]]
            elif "enableUpcomingFeature" in kind:
                flags += ["-enable-upcoming-feature", kind["enableUpcomingFeature"]["_0"]]
            elif "unsafeFlags" in kind:
                flags += kind["unsafeFlags"]["_0"]
            elif "define" in kind:
                flags.append("-D" + kind["define"]["_0"])
        flags += ["-swift-version", mode]
        result[target["name"]] = semantic(flags)
    return result


def cmake(build):
    text = open(f"{build}/build.ninja").read()
    result = {}
    for swiftpm_name, cmake_name in TARGETS.items():
        # Ninja compiles and links a Swift target in one statement, whose
        # rule is Swift_{STATIC,SHARED}_LIBRARY_LINKER__<target>_<config>;
        # its variables (FLAGS among them) follow, indented.
        match = re.search(r"^build [^\n]*: Swift_(?:STATIC|SHARED)_LIBRARY_LINKER__%s_\w+ [^\n]*\n((?:  [^\n]*\n)*)"
                          % re.escape(cmake_name), text, re.M)
        if not match:
            sys.exit(f"no Swift build statement for {cmake_name} in {build}/build.ninja")
        block = match.group(1)
        flags = re.search(r"^  FLAGS = (.*)$", block, re.M)
        result[swiftpm_name] = semantic(shlex.split(flags.group(1)) if flags else [])
    return result


def main():
    source, build, build_type = sys.argv[1:4]
    config = "release" if build_type == "Release" else "debug"
    failures = 0
    checks = 0
    want = swiftpm(source, config)
    got = cmake(build)
    for name in TARGETS:
        checks += 1
        if want.get(name) != got.get(name):
            failures += 1
            print(f"FAIL {name} ({build_type}): SwiftPM {sorted(want.get(name, []))}, "
                  f"CMake {sorted(got.get(name, []))}")
        else:
            print(f"ok   {name} ({build_type}): {sorted(got[name])}")
        if not any(f.startswith("-swift-version 6") for f in got.get(name, [])):
            failures += 1
            print(f"FAIL {name}: CMake does not compile it in Swift 6 language mode")
        checks += 1
    # The rule: exclusivity checks off in release builds only.
    for config_name in ("debug", "release"):
        flags = swiftpm(source, config_name)
        for name, found in flags.items():
            checks += 1
            off = UNCHECKED in found
            if off != (config_name == "release" and name == "TickgateCore"):
                failures += 1
                print(f"FAIL {name} ({config_name}): exclusivity checks {'off' if off else 'on'}")
    if (UNCHECKED in got.get("TickgateCore", set())) != (build_type == "Release"):
        failures += 1
        print(f"FAIL CMake {build_type}: exclusivity checks must be off in Release only")
    checks += 1
    print(f"{checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
