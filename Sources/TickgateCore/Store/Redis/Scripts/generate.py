#!/usr/bin/env python3
"""Writes ../RedisScripts.swift from the .lua files beside this one.

The Redis store's scripts are written once, here, as Lua; the library
carries them as Swift strings (SwiftPM and CMake both build them in, with
no build step of their own). Each script is the rules' constants (the
lines of Rules/RuleConstants.swift marked `// lua: NAME`, as the table C),
the prelude, the rules (rules.lua) if it decides, and its own file.
Run after changing a script or a constant:

    python3 Sources/TickgateCore/Store/Redis/Scripts/generate.py

`--check` exits 1 if the Swift file differs from what it would write (the
test `build.redis_scripts` runs that).
"""
import hashlib
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
TARGET = HERE.parent / "RedisScripts.swift"
CONSTANTS = HERE.parents[2] / "Rules" / "RuleConstants.swift"
SCRIPTS = [("decide", "decide.lua"), ("cancelKeys", "cancel_keys.lua"), ("put", "put.lua"),
           ("session", "session.lua"), ("resetBudget", "reset_budget.lua"), ("merge", "merge.lua"),
           ("probe", "probe.lua"), ("setClock", "set_clock.lua"), ("reserve", "reserve.lua"), ("settle", "settle.lua"),
           ("addCharges", "add_charges.lua"), ("guardSignals", "guard.lua"), ("guardRecord", "guard_record.lua"),
           ("outcomes", "outcomes.lua")]
# The scripts that decide: rules.lua goes into each.
DECIDING = {"decide.lua", "merge.lua", "reserve.lua", "guard.lua", "outcomes.lua"}


def constant_values() -> dict:
    """Every constant of RuleConstants.swift marked `lua:`, by its Lua name."""
    values = {}
    for line in CONSTANTS.read_text().splitlines():
        m = re.match(r"\s*public static let \w+(?:: \w+)? = ([\d_]+)\s*// lua: ([A-Z_]+)$", line)
        if m:
            values[m.group(2)] = m.group(1).replace("_", "")
        elif "// lua:" in line and not line.lstrip().startswith("///"):
            raise SystemExit(f"RuleConstants.swift: cannot read the constant of: {line.strip()}")
    return values


def constants() -> str:
    """The rules' constants as a script names them: a comment. The scripts
    write C.NAME, and `inline` puts its value there (a table C would be
    made anew on every call, and each C.NAME read from it)."""
    return ("-- The rules' constants, from Sources/TickgateCore/Rules/RuleConstants.swift\n"
            "-- (C.NAME in the Scripts/*.lua files, written here as its value): "
            + ", ".join(f"{k} = {v}" for k, v in constant_values().items()) + "\n")


def inline(text: str) -> str:
    """`text` with each C.NAME written as the constant's value."""
    values = constant_values()

    def value(m: re.Match) -> str:
        if m.group(1) not in values:
            raise SystemExit(f"a script names C.{m.group(1)}, which RuleConstants.swift does not mark `lua:`")
        return values[m.group(1)]
    return re.sub(r"\bC\.([A-Z_]+)\b", value, text)


# The line of rules.lua where the guard's rules begin: a script makes
# them when it first runs the guard's or the outcomes' steps (guard_rules()),
# not on every call (a plain decision never uses them).
GUARD_RULES = "-- The pumping guard (GuardRules.swift)."


def rules_lua() -> str:
    """rules.lua as a script holds it: its table R made at its full size (a
    script makes R on every call, and filling a table that grows one
    function at a time rehashes it at each power of two: about 6 000 of
    redis-server's instructions a call, measured with
    benchmarks/redis_instructions.py), and its guard's rules in the
    function guard_rules(), which makes them once a call."""
    text = (HERE / "rules.lua").read_text()
    names = re.findall(r"^function R\.([a-z_]+)\(", text, re.M)
    if text.count("local R = {}\n") != 1 or not names:
        raise SystemExit("rules.lua: expected one 'local R = {}' and its functions 'function R.name('")
    if text.count("\n" + GUARD_RULES) != 1:
        raise SystemExit(f"rules.lua: expected one line beginning {GUARD_RULES!r}")
    text = text.replace("local R = {}\n", "local R = {" + ", ".join(f"{n} = false" for n in names) + "}\n", 1)
    key, guard = text.split("\n" + GUARD_RULES, 1)
    return (key + "\nlocal guard_rules_made = false\nlocal function guard_rules()\n"
            "if guard_rules_made then return end\nguard_rules_made = true\n" + GUARD_RULES + guard + "end\n")


def rules() -> str:
    """The rules as every deciding script holds them, each made (the test
    of the rules' vectors runs them so)."""
    return constants() + inline(rules_lua()) + "guard_rules()\n"


# The scripts that hold the guard's operations (guard.lua, as the function
# guard_run(ARGV)): guard.lua itself, and decide.lua, which screens a guarded
# send on one server in the step that decides it.
GUARDED = {"decide.lua", "guard.lua"}
# The scripts that hold the outcomes' steps (outcomes.lua, as the function
# outcomes_run(ARGV)): outcomes.lua itself, and decide.lua, which follows a
# code in the step that ends its successful send.
FOLLOWING = {"decide.lua", "outcomes.lua"}


def script(file: str) -> str:
    """A script as the store runs it."""
    body = (HERE / file).read_text()
    uses_rules = re.search(r"\bR\.[a-z_]+\(", body) is not None
    if uses_rules != (file in DECIDING):
        raise SystemExit(f"{file}: calls rules.lua's functions but is not in DECIDING, or the reverse")
    # C (the constants) and R (the rules) are every script's: a local of
    # either name would hide them (reserve.lua's R once hid the rules).
    for line in body.splitlines():
        if re.match(r"\s*local\s+(?:function\s+)?(?:[\w\s,]*,\s*)?(?:C|R)\s*(?:[,=(]|$)", line):
            raise SystemExit(f"{file}: declares a local C or R, which would hide the constants or the rules: {line.strip()}")
    guard = ""
    if file in GUARDED:
        guard = "local function guard_run(ARGV)\nguard_rules()\n" + (HERE / "guard.lua").read_text() + "end\n"
        if file == "guard.lua":
            body = "return guard_run(ARGV)\n"
    if file in FOLLOWING:
        guard += "local function outcomes_run(ARGV)\nguard_rules()\n" + (HERE / "outcomes.lua").read_text() + "end\n"
        if file == "outcomes.lua":
            body = "return outcomes_run(ARGV)\n"
    return constants() + inline((HERE / "prelude.lua").read_text() + "\n"
                                + (rules_lua() + "\n" if uses_rules else "") + guard + body)


def render() -> str:
    out = [
        "// Generated by Scripts/generate.py from Scripts/*.lua: edit those, then run it.",
        "",
        "/// The Lua scripts of the Redis store, each the rules' constants, the",
        "/// prelude, the rules if it decides, and its file in Scripts/ (which",
        "/// describes its keys, arguments and answer).",
        "enum RedisScripts {",
        "    static let all: [(name: String, source: String)] = [",
    ]
    for name, _ in SCRIPTS:
        out.append(f"        (\"{name}\", {name}),")
    out.append("    ]")
    for name, file in (("probe", "probe.lua"), ("setClock", "set_clock.lua")):
        source = script(file).rstrip("\n")
        out.append(f"    /// The SHA1 of `{name}`, run by it before any SCRIPT LOAD answered.")
        out.append(f'    static let {name}SHA = "{hashlib.sha1(source.encode()).hexdigest()}"')
    for name, file in SCRIPTS:
        body = script(file)
        assert '"""#' not in body
        out.append("")
        out.append(f"    /// Scripts/{file}")
        out.append(f'    static let {name} = #"""')
        out.extend(("    " + line) if line else "" for line in body.rstrip("\n").split("\n"))
        out.append('    """#')
    out.append("}")
    return "\n".join(out) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET.name} is not what Scripts/*.lua make: run python3 {HERE.relative_to(HERE.parents[4])}/generate.py",
                  file=sys.stderr)
            return 1
        print("RedisScripts.swift matches Scripts/*.lua")
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
