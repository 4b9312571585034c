#!/usr/bin/env python3
"""Generate the Swift and Python lists of statuses from the C header's tables.

The statuses (tg_status) and the kinds of store failure (tg_store_failure)
are written once, as the X-macro tables TG_STATUS_MAP and
TG_STORE_FAILURE_MAP of include/tickgate_status.h (as libuv writes its error
codes once, in UV_ERRNO_MAP). tickgate.h expands its enums from them; this
script writes every other list from them:

    Sources/TickgateCore/Engine/Status.swift        enum Status, its texts
    Sources/TickgateCore/Engine/StoreFailure.swift  enum StoreFailure
    bindings/python/tickgate/_status.py             Status, StoreFailure,
                                                    STATUS_TEXT

The generated files are committed (so that `swift build` and the Python
package need nothing generated at build time). After changing a table, run

    python3 Tests/build/gen_status.py

and commit what it wrote. With --check it writes nothing and fails, showing
the difference, if a generated file is not what it would write: the CTest
test build.status_tables runs that.

    gen_status.py [--check] [SOURCE_DIR]
"""
from __future__ import annotations

import difflib
import re
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

TABLE = "include/tickgate_status.h"
SWIFT_STATUS = "Sources/TickgateCore/Engine/Status.swift"
SWIFT_FAILURE = "Sources/TickgateCore/Engine/StoreFailure.swift"
PYTHON = "bindings/python/tickgate/_status.py"
COMMAND = "python3 Tests/build/gen_status.py"
# Words kept in capitals inside a Swift name (TG_E_STORE_IO -> storeIO).
SWIFT_ACRONYMS = {"IO"}


class Entry(NamedTuple):
    name: str  # the C name, TG_E_NOT_FOUND
    value: int
    text: Optional[str]  # tg_status_string's text (statuses only)
    doc: str  # the comment before the entry, as one paragraph


class TableError(Exception):
    pass


def read_map(header: str, macro: str, prefix: str, with_text: bool) -> List[Entry]:
    """The entries of `#define MACRO(XX) ...`, each with its comment."""
    m = re.search(rf"^#define {macro}\(XX\)[ \t]*\\\n((?:.*\\\n)*.*)$", header, re.M)
    if m is None:
        raise TableError(f"{TABLE}: no `#define {macro}(XX)` continued by backslashes")
    body = re.sub(r"\\\n", "\n", m.group(1))
    entry = r"XX\(\s*(?P<name>\w+)\s*,\s*(?P<value>\d+)\s*" + (
        r',\s*"(?P<text>[^"\\]*)"\s*\)' if with_text else r"\)")
    token = re.compile(rf"\s*(?:/\*(?P<doc>.*?)\*/|(?P<xx>{entry}))", re.S)
    entries: List[Entry] = []
    doc: Optional[str] = None
    pos = 0
    body = body.rstrip()
    while pos < len(body):
        t = token.match(body, pos)
        if t is None:
            raise TableError(f"{TABLE}: {macro}: cannot read {body[pos:pos + 60].strip()!r}")
        pos = t.end()
        if t.group("doc") is not None:
            if doc is not None:
                raise TableError(f"{TABLE}: {macro}: two comments in a row before {body[pos:pos + 40]!r}")
            doc = " ".join(re.sub(r"^\s*\*(?!/)", "", line).strip()
                           for line in t.group("doc").splitlines()).strip()
            doc = " ".join(doc.split())
            continue
        name, value, text = t.group("name"), int(t.group("value")), t.groupdict().get("text")
        if not doc:
            raise TableError(f"{TABLE}: {macro}: {name} has no comment before it")
        entries.append(Entry(name, value, text, doc))
        doc = None
    if doc is not None:
        raise TableError(f"{TABLE}: {macro}: a comment after the last entry")
    check(macro, prefix, entries)
    return entries


def check(macro: str, prefix: str, entries: List[Entry]) -> None:
    """Values 0, 1, 2... in order (C arrays index by them), unique names and texts."""
    if not entries:
        raise TableError(f"{TABLE}: {macro} is empty")
    for index, e in enumerate(entries):
        if e.value != index:
            raise TableError(f"{TABLE}: {macro}: {e.name} is {e.value}, expected {index} "
                             "(values go 0, 1, 2... in order, without gaps)")
        if not re.fullmatch(rf"{prefix}[A-Z0-9_]+", e.name):
            raise TableError(f"{TABLE}: {macro}: {e.name} does not start with {prefix}")
        if e.text is not None and not re.fullmatch(r"[ -~]+", e.text):
            raise TableError(f"{TABLE}: {macro}: the text of {e.name} is empty or not printable ASCII")
    for what, values in (("name", [e.name for e in entries]), ("text", [e.text for e in entries])):
        seen = [v for v in values if v is not None and values.count(v) > 1]
        if seen:
            raise TableError(f"{TABLE}: {macro}: {what} {seen[0]!r} appears twice")


def swift_case(name: str, prefix: str) -> str:
    """TG_E_INVALID_ARGUMENT -> invalidArgument, TG_E_STORE_IO -> storeIO."""
    words = name[len(prefix):].split("_")
    return words[0].lower() + "".join(w if w in SWIFT_ACRONYMS else w.capitalize() for w in words[1:])


def status_swift_name(name: str) -> str:
    return swift_case(name, "TG_E_" if name.startswith("TG_E_") else "TG_")


def wrap(doc: str, indent: str, marker: str, width: int = 80) -> List[str]:
    lead = indent + marker
    return [lead + line for line in textwrap.wrap(doc, width=width - len(lead), break_on_hyphens=False)]


def generated_note(comment: str, tables: str) -> List[str]:
    lines = textwrap.wrap(
        f"Generated from {tables} in {TABLE} by Tests/build/gen_status.py: do not edit. "
        f"After changing the table, run `{COMMAND}` (the test build.status_tables fails "
        "while this file differs from what it writes).",
        width=78 - len(comment), break_on_hyphens=False)
    return [comment + line for line in lines]


def swift_status(statuses: List[Entry]) -> str:
    out = generated_note("// ", "TG_STATUS_MAP")
    out += ["", "/// Why a call failed. The raw values are the C API's `tg_status` values.",
            "public enum Status: Int32, Sendable {"]
    for e in statuses:
        out += wrap(e.doc, "    ", "/// ")
        out.append(f"    case {status_swift_name(e.name)} = {e.value}")
    out += ["", "    /// Static English text for the status (`tg_status_string`).",
            "    public var text: StaticString {", "        switch self {"]
    for e in statuses:
        out.append(f'        case .{status_swift_name(e.name)}: "{e.text}"')
    out += ["        }", "    }", "}", ""]
    return "\n".join(out)


def swift_failure(failures: List[Entry]) -> str:
    out = generated_note("// ", "TG_STORE_FAILURE_MAP")
    out += ["",
            "/// The kind of a store failure, so a host acts on it without reading the",
            "/// message: the C API's `tg_store_failure` values, carried by",
            "/// `TickgateError.storeFailure` and told by `tg_last_store_failure()`.",
            "public enum StoreFailure: Int32, Sendable {"]
    for e in failures:
        out += wrap(e.doc, "    ", "/// ")
        out.append(f"    case {swift_case(e.name, 'TG_STORE_FAILURE_')} = {e.value}")
    out += ["}", ""]
    return "\n".join(out)


def python(statuses: List[Entry], failures: List[Entry]) -> str:
    out = ['"""``tg_status`` and ``tg_store_failure`` as :class:`enum.IntEnum`, and the',
           "statuses' texts.", ""]
    out += generated_note("", "TG_STATUS_MAP and TG_STORE_FAILURE_MAP")
    out += ['"""', "", "from __future__ import annotations", "", "from enum import IntEnum",
            "from typing import Dict", "", '__all__ = ["Status", "StoreFailure", "STATUS_TEXT"]',
            "", "", "class Status(IntEnum):", '    """``tg_status``: what every C function returns."""', ""]
    for e in statuses:
        out += wrap(e.doc, "    ", "#: ", width=79)
        out.append(f"    {e.name[len('TG_'):]} = {e.value}")
    out += ["", "", "class StoreFailure(IntEnum):",
            '    """``tg_store_failure``: the kind of a store error (``tg_last_store_failure()``)."""', ""]
    for e in failures:
        out += wrap(e.doc, "    ", "#: ", width=79)
        out.append(f"    {e.name[len('TG_STORE_FAILURE_'):]} = {e.value}")
    out += ["", "", "#: ``tg_status_string()`` of every status, as the table writes it.",
            "STATUS_TEXT: Dict[Status, str] = {"]
    for e in statuses:
        out.append(f'    Status.{e.name[len("TG_"):]}: "{e.text}",')
    out += ["}", ""]
    return "\n".join(out)


def outputs(source: Path) -> Dict[str, str]:
    header = (source / TABLE).read_text()
    statuses = read_map(header, "TG_STATUS_MAP", "TG_", with_text=True)
    failures = read_map(header, "TG_STORE_FAILURE_MAP", "TG_STORE_FAILURE_", with_text=False)
    return {
        SWIFT_STATUS: swift_status(statuses),
        SWIFT_FAILURE: swift_failure(failures),
        PYTHON: python(statuses, failures),
    }


def main(argv: List[str]) -> int:
    args = [a for a in argv if a != "--check"]
    checking = len(args) != len(argv)
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    source = Path(args[0]) if args else Path(__file__).resolve().parents[2]
    try:
        wanted = outputs(source)
    except TableError as error:
        print(f"gen_status: {error}", file=sys.stderr)
        return 1
    stale = []
    for path, text in wanted.items():
        file = source / path
        have = file.read_text() if file.exists() else None
        if have == text:
            print(f"ok   {path}")
            continue
        stale.append(path)
        if checking:
            print(f"FAIL {path} differs from what {TABLE} gives:")
            sys.stdout.writelines(difflib.unified_diff(
                (have or "").splitlines(keepends=True), text.splitlines(keepends=True),
                f"{path} (in the tree)", f"{path} (from the table)"))
        else:
            file.write_text(text)
            print(f"wrote {path}")
    if checking and stale:
        print(f"\nThe generated files are stale. Regenerate them with\n    {COMMAND}\n"
              "and commit the result (edit the tables in include/tickgate_status.h, "
              "never the generated files).")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
