#!/usr/bin/env python3
"""Writes the performance page (docs/performance.md) from a run of `make bench`.

The page is its template (benchmarks/performance.md.in: prose without
figures) with every figure taken from one run: benchmarks/run keeps the
run's BENCH, TARGET and # lines, with the date and the machine, in
docs/bench-run.txt, and the page's tables are made from that file alone,
so no figure on the page is older than the run that wrote it.

    page.py write BUILD_DIR [--seconds S] [--load-start "1.0 0.9 0.8"] [--args "..."]
        (benchmarks/run, after a run without --quick): docs/bench-run.txt
        from BUILD_DIR/bench.txt, then docs/performance.md, and the charts
        BUILD_DIR/bench.png and bench-attack.png copied into docs/.
    page.py write BUILD_DIR --out DIR ...
        the same into DIR (a --quick run writes into BUILD_DIR: its figures
        are not the page's).
    page.py --check
        exits 1 if docs/performance.md is not what docs/bench-run.txt and
        the template make, or if a row or target of the run has no section
        of the template (CTest build.performance_page).

The template's markers, each alone on its line:
    <!-- run -->              the run: date, commit, machine, load, duration
    <!-- summary -->          how many targets passed and missed
    <!-- rows REGEX -->       a table of the BENCH rows whose name matches
    <!-- targets REGEX -->    a table of the TARGET lines whose name matches
    <!-- notes -->            the run's # lines
A row or target no marker takes goes to a section "Rows no section takes"
at the end of the page (and `--check` fails).
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
TEMPLATE = HERE / "performance.md.in"
DOCS = ROOT / "docs"
RUN_FILE = "bench-run.txt"
PAGE_FILE = "performance.md"
CHARTS = ("bench.png", "bench-attack.png")


# ---- reading a run ---------------------------------------------------------

def run_lines(bench_txt: pathlib.Path) -> list[str]:
    """The BENCH, TARGET and # lines of a run, each once, in the run's order."""
    seen, out = set(), []
    for line in bench_txt.read_text(errors="replace").splitlines():
        line = line.rstrip()
        if not line.startswith(("BENCH ", "TARGET ", "# ")) or line in seen:
            continue
        if line.startswith("# run: "):
            continue  # a run file's own header, read again
        seen.add(line)
        out.append(line)
    return out


def command(*argv: str) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine() -> list[tuple[str, str]]:
    """The machine the run ran on, as the page states it."""
    model = ""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    system = platform.system() + " " + platform.release()
    try:
        for line in pathlib.Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                system = line.split("=", 1)[1].strip('"') + ", " + system
    except OSError:
        pass
    cpus = f"{os.cpu_count()} CPUs" + (f" ({model})" if model else "")
    redis = command("redis-server", "--version")
    redis = re.sub(r"^Redis server v=(\S+).*$", r"redis-server \1", redis)
    return [("machine", ", ".join(x for x in (cpus, memory) if x)), ("system", system),
            ("software", f"Python {platform.python_version()}" + (f", {redis}" if redis else ""))]


def commit() -> str:
    head = command("git", "rev-parse", "--short=12", "HEAD")
    if not head:
        return "not a git checkout"
    dirty = command("git", "status", "--porcelain", "--untracked-files=no", "--", "Sources", "include", "bindings",
                    "benchmarks", "CMakeLists.txt", "Package.swift")
    return head + (" with changes not committed" if dirty else "")


def write_run(build: pathlib.Path, out: pathlib.Path, seconds: float | None, load_start: str, args: str) -> None:
    lines = run_lines(build / "bench.txt")
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        load_end = " ".join(pathlib.Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load_end = ""
    header = [("date", now.strftime("%Y-%m-%d %H:%M UTC")), ("commit", commit())] + machine()
    load = ", ".join(x for x in (f"{load_start} at the start" if load_start else "",
                                 f"{load_end} at the end" if load_end else "") if x)
    if load:
        header.append(("load average (1, 5, 15 min)", load))
    if seconds is not None:
        header.append(("duration", f"{seconds / 60:.1f} minutes (build, run and charts)"))
    header.append(("options", args.strip() or "none (the full run)"))
    text = "".join(f"# run: {k}: {v}\n" for k, v in header) + "".join(line + "\n" for line in lines)
    (out / RUN_FILE).write_text(text)


# ---- the page --------------------------------------------------------------

class Run:
    def __init__(self, text: str):
        self.header: list[tuple[str, str]] = []
        self.rows: list[tuple[str, str, list[tuple[str, str]], str]] = []  # name, n, fields, note
        self.targets: list[tuple[str, str]] = []  # name, the rest of the line
        self.notes: list[str] = []
        for line in text.splitlines():
            if line.startswith("# run: "):
                key, _, value = line[len("# run: "):].partition(": ")
                self.header.append((key, value))
            elif line.startswith("BENCH "):
                self.rows.append(parse_row(line))
            elif line.startswith("TARGET "):
                rest = line[len("TARGET "):]
                words = rest.split(" ")
                name = words[0]
                # "ratio_keyed_absl start n=... value=..." is named by both words.
                if len(words) > 2 and re.fullmatch(r"[a-z_]+", words[1]) and words[2].startswith(("n=", "value=")):
                    name = words[0] + " " + words[1]
                self.targets.append((name, rest[len(name):].strip()))
            elif line.startswith("# "):
                self.notes.append(line[2:])


def parse_row(line: str) -> tuple[str, str, list[tuple[str, str]], str]:
    body = line[len("BENCH "):]
    note = ""
    m = re.search(r" \((.*)\)$", body)
    if m:
        note, body = m.group(1), body[:m.start()]
    parts = body.split(" ")
    name, fields, n = parts[0], [], ""
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        if not eq:
            note = (note + " " if note else "") + part
        elif key == "n":
            n = value
        else:
            fields.append((key, value))
    return name, n, fields, note


def count(n: str) -> str:
    """10000 as 10^4; any other count as it is."""
    if re.fullmatch(r"1(0{3,})", n):
        return f"10^{len(n) - 1}"
    return n


def cell(value: str) -> str:
    return "" if value == "-" else value.replace("|", "\\|")


def table(header: list[str], body: list[list[str]]) -> str:
    align = ["---" if i == 0 or not h or h in ("unit", "note", "result", "limit", "target") else "---:"
             for i, h in enumerate(header)]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def rows_table(rows) -> str:
    """One table of `rows`; a table per row name when they share too few
    columns to read as one (more than 12)."""
    names = list(dict.fromkeys(name for name, *_ in rows))
    if len(names) > 1 and len(row_keys(rows)) > 12:
        return "\n\n".join(rows_table([r for r in rows if r[0] == name]) for name in names)
    keys = row_keys(rows)
    notes = any(note for *_, note in rows)
    header = ["row", "n"] + [k.replace("_", " ") for k in keys] + (["note"] if notes else [])
    body = []
    for name, n, fields, note in rows:
        values = dict(fields)
        body.append([f"`{name}`", count(n)] + [cell(values.get(k, "-")) for k in keys] + ([cell(note)] if notes else []))
    return table(header, body)


def row_keys(rows) -> list[str]:
    """The columns of `rows`: every field with a figure, the unit last."""
    keys: list[str] = []
    for _, _, fields, _ in rows:
        for key, value in fields:
            if key not in keys and value != "-":
                keys.append(key)
    if "unit" in keys:  # after the figures (a note, if any, comes last)
        keys.remove("unit")
        keys.append("unit")
    return keys


def targets_table(targets) -> str:
    body = []
    for name, rest in targets:
        m = re.match(r"(?:(n=\S+) )?value=(\S+) limit=(\S+) unit=(\S+)(?: \((.*)\))? (PASS|MISS)$", rest)
        if m:
            n, value, limit, unit, note, result = m.groups()
            limit = limit.replace("<=", "≤ ").replace(">=", "≥ ").replace("==", "= ").replace("<", "< ").replace(">", "> ")
            at = (" at " + " over ".join(count(x[2:]) for x in n.split("/"))) if n else ""
            body.append([f"`{name}`{at}", f"{value} {unit}" + (f" ({note})" if note else ""), limit, result])
        else:
            result = "MISS" if rest.endswith("MISS") else "PASS" if rest.endswith("PASS") else ""
            body.append([f"`{name}`", cell(re.sub(r":? (PASS|MISS)$", "", rest)), "", result])
    return table(["target", "value", "limit", "result"], body)


def render(template: str, run: Run) -> tuple[str, list[str]]:
    """The page, and the rows and targets that fell to `the rest`."""
    out: list[str] = []
    taken_rows: set[int] = set()
    taken_targets: set[int] = set()
    marker = re.compile(r"^<!-- (run|summary|notes|rows|targets)(?: (.*))? -->$")
    lines = template.splitlines()
    # First pass: what each section takes (a rest marker takes what is left).
    plan = []
    for line in lines:
        m = marker.match(line)
        if m and m.group(1) in ("rows", "targets"):
            pattern = re.compile(m.group(2))
            if m.group(1) == "rows":
                picked = [i for i, r in enumerate(run.rows) if i not in taken_rows and pattern.fullmatch(r[0])]
                taken_rows.update(picked)
            else:
                picked = [i for i, t in enumerate(run.targets) if i not in taken_targets and pattern.fullmatch(t[0])]
                taken_targets.update(picked)
            plan.append(picked)
        else:
            plan.append(None)
    rest_rows = [i for i in range(len(run.rows)) if i not in taken_rows]
    rest_targets = [i for i in range(len(run.targets)) if i not in taken_targets]
    passed = sum(1 for _, rest in run.targets if rest.endswith("PASS"))
    missed = sum(1 for _, rest in run.targets if rest.endswith("MISS"))
    for line, picked in zip(lines, plan):
        m = marker.match(line)
        if not m:
            out.append(line)
        elif m.group(1) == "run":
            out.append(table(["the run", ""], [[k, cell(v)] for k, v in run.header]))
        elif m.group(1) == "summary":
            out.append(f"Of the run's {len(run.targets)} targets, {passed} passed and {missed} missed.")
        elif m.group(1) == "notes":
            out.append("```text\n" + "\n".join(run.notes) + "\n```")
        elif picked:
            if m.group(1) == "rows":
                out.append(rows_table([run.rows[i] for i in picked]))
            else:
                out.append(targets_table([run.targets[i] for i in picked]))
        else:
            out.append("(This run has no such rows.)")
    if rest_rows or rest_targets:
        out += ["", "## Rows no section takes", "",
                "The template (`benchmarks/performance.md.in`) has no section for these yet.", ""]
        if rest_rows:
            out += [rows_table([run.rows[i] for i in rest_rows]), ""]
        if rest_targets:
            out += [targets_table([run.targets[i] for i in rest_targets]), ""]
    unplaced = [run.rows[i][0] for i in rest_rows] + [run.targets[i][0] for i in rest_targets]
    page = ("<!-- Written by benchmarks/page.py from docs/bench-run.txt (make bench) and "
            "benchmarks/performance.md.in: edit the template, not this page. -->\n" + "\n".join(out) + "\n")
    return page, sorted(set(unplaced))


def write_page(out: pathlib.Path) -> list[str]:
    page, unplaced = render(TEMPLATE.read_text(), Run((out / RUN_FILE).read_text()))
    (out / PAGE_FILE).write_text(page)
    return unplaced


def main() -> int:
    if sys.argv[1:] == ["--check"]:
        page, unplaced = render(TEMPLATE.read_text(), Run((DOCS / RUN_FILE).read_text()))
        status = 0
        if unplaced:
            print("page.py: rows or targets of docs/bench-run.txt that no section of the template takes: "
                  + ", ".join(unplaced), file=sys.stderr)
            status = 1
        if (DOCS / PAGE_FILE).read_text() != page:
            print("page.py: docs/performance.md is not what benchmarks/performance.md.in and docs/bench-run.txt make;"
                  " run: python3 benchmarks/page.py render", file=sys.stderr)
            status = 1
        return status
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("write", help="the run file, the page and the charts from BUILD_DIR")
    w.add_argument("build", type=pathlib.Path)
    w.add_argument("--out", type=pathlib.Path, default=DOCS)
    w.add_argument("--seconds", type=float)
    w.add_argument("--load-start", default="")
    w.add_argument("--args", default="")
    sub.add_parser("render", help="docs/performance.md again from docs/bench-run.txt (after editing the template)")
    a = parser.parse_args()
    if a.what == "render":
        unplaced = write_page(DOCS)
        out = DOCS
    else:
        a.out.mkdir(parents=True, exist_ok=True)
        write_run(a.build, a.out, a.seconds, a.load_start, a.args)
        unplaced = write_page(a.out)
        for chart in CHARTS:
            if (a.build / chart).exists() and (a.build / chart).resolve() != (a.out / chart).resolve():
                shutil.copyfile(a.build / chart, a.out / chart)
        out = a.out
    print(f"# wrote {out / PAGE_FILE} from {out / RUN_FILE}")
    if unplaced:
        print("# page.py: no section of benchmarks/performance.md.in takes: " + ", ".join(unplaced)
              + " (they are under \"Rows no section takes\")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
