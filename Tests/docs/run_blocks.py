#!/usr/bin/env python3
"""Every code block of the README and the docs runs as written (CTest: docs.readme).

As Rust's doc-tests do, this reads each fenced block of README.md, of every
page of docs/ (docs/*.md) and of bindings/python/README.md, so that the first
program a newcomer copies works, and every other example too. A block is one
of:

- complete: run exactly as written, durations and all, on the real clock
  (the 60 s countdowns run for 60 s; the blocks run side by side).
  C: compiled against the build tree and run. Python: run with the
  bindings on PYTHONPATH and the built library. sh: run by bash in the
  clone, with HOME a fresh folder (so `make install PREFIX=$HOME/.local`
  stays in it) and a few stand-ins: `make test` (the command running this
  test) and `make demo-web` (servers until Ctrl-C; web.demo runs it) are
  dry runs (make -n), `pip` is a fresh virtual environment's (which
  builds `pip install ./bindings/python` once, for every block that runs
  it), `python3` this interpreter, and `redis-server` gets a free port of its own (and
  is stopped after the block). A block that compiles `app.c` finds there
  the README's first program, as its text says. A block that names `HOST`
  is an operator's, run against a Redis server: `redis-cli -h HOST` reaches
  a redis-server of the block's own (an ACL user `admin`, password
  `ADMIN_PASSWORD`, may do everything there), which holds a Tickgate store
  under the default prefix `tickgate:` (a policy, titles, a budget, two
  numbers sent a code, one with a newline, quotes and Chinese in it) and one
  key of another application. The block runs in a folder of its own, and
  redis-cli answers errors with status 0, so the server is checked after it:
  a block that UNLINKs must leave nothing under `tickgate:` and the other
  application's key in place; any other must leave `tickgate:settings` as
  it found it.
- a fragment: the line before its fence is
  `<!-- fragment of examples/readme/fragments.c -->` (or another file). The
  named file must hold the fragment, line for line (indentation aside), and
  is itself run as a complete program.
- `text`: a picture, not code; nothing runs.

Blocks that use Redis read TG_REDIS_URL, which names a redis-server this
script starts for them (in its temporary folder, stopped at the end). They
keep their keys apart (store_prefix) and end the flows they start, so they
run again and again: each Python one runs twice on the same server.

    run_blocks.py SOURCE_DIR BUILD_DIR LIBRARY
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

source, build, library = (Path(p).resolve() for p in sys.argv[1:4])
files = ["README.md"] + sorted(str(p.relative_to(source)) for p in (source / "docs").glob("*.md")) + [
    "bindings/python/README.md"]
work = Path(tempfile.mkdtemp(prefix="tg-docs-"))
FRAGMENT = re.compile(r"^<!-- fragment of (\S+) -->$")
results: list[tuple[bool, str, str]] = []


@dataclass
class Block:
    name: str
    lang: str
    code: str
    fragment_of: Optional[str]


def blocks(path: str) -> list[Block]:
    lines = (source / path).read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        m = re.match(r"^( *)```(\w*)\s*$", lines[i])  # a fence, maybe indented in a list
        if m:
            indent, j = len(m.group(1)), i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            marker = FRAGMENT.match(lines[i - 1].strip()) if i > 0 else None
            code = "\n".join(line[indent:] for line in lines[i + 1:j]) + "\n"
            found.append(Block(f"{path}:{i + 2} ({m.group(2) or 'no language'})", m.group(2), code,
                               marker.group(1) if marker else None))
            i = j
        i += 1
    return found


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 300)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(port: int, folder: Path) -> subprocess.Popen:
    """A redis-server of the blocks' own; returns once it answers."""
    folder.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return server
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server did not start on port {port}")


redis_port = free_port()
redis = start_redis(redis_port, work / "redis")


def env_for(extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TICKGATE_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env["XDG_STATE_HOME"] = str(work / "state")
    env["TG_REDIS_URL"] = f"redis://127.0.0.1:{redis_port}"
    env.update(extra or {})
    return env


def c_program(name: str, program: str, scratch: Path) -> tuple[bool, str, str]:
    scratch.mkdir(parents=True, exist_ok=True)
    src, exe = scratch / "program.c", scratch / "program"
    src.write_text(program, encoding="utf-8")
    cc = run(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unused", "-Wno-unused-parameter",
              "-I", str(source / "include"), str(src), "-o", str(exe),
              "-L", str(library.parent), "-ltickgate", f"-Wl,-rpath,{library.parent}"])
    if cc.returncode != 0:
        return False, name, cc.stderr[-3000:]
    r = run([str(exe)], timeout=120, env=env_for(), cwd=scratch)
    return r.returncode == 0, name, r.stdout[-2000:] + r.stderr[-2000:]


def python_program(name: str, program: str, scratch: Path) -> tuple[bool, str, str]:
    """Runs the program; one that uses Redis twice, as a reader may, on the
    same server: its second run must not trip over the first's keys."""
    scratch.mkdir(parents=True, exist_ok=True)
    src = scratch / "program.py"
    src.write_text(program, encoding="utf-8")
    env = env_for({"PYTHONPATH": str(source / "bindings" / "python"), "TICKGATE_LIBRARY": str(library)})
    for attempt in range(2 if "TG_REDIS_URL" in program else 1):
        r = run([sys.executable, str(src)], timeout=120, cwd=scratch, env=env)
        if r.returncode != 0:
            return False, name, f"run {attempt + 1}:\n" + r.stdout[-2000:] + r.stderr[-2000:]
    return True, name + (" (twice, on one Redis)" if "TG_REDIS_URL" in program else ""), ""


# The stand-ins of the sh blocks (see the docstring).
SH_PRELUDE = r"""
set -e
make() {
    case "${1:-}" in
    test|demo-web) command make -n "$@" ;;
    *) command make "$@" ;;
    esac
}
pip() {
    # Two pages install the package from this clone, word for word: it is
    # built once per run (each build is the whole library, minutes).
    if [ "$*" = "install ./bindings/python" ] && [ -f "$TG_DOCS_VENV/tickgate-installed" ]; then
        echo "pip install ./bindings/python: installed by an earlier block of this run"
        return 0
    fi
    "$TG_DOCS_VENV/bin/pip" "$@"
    if [ "$*" = "install ./bindings/python" ]; then touch "$TG_DOCS_VENV/tickgate-installed"; fi
}
python3() { "$TG_DOCS_PYTHON" "$@"; }
redis-server() {
    command redis-server "$@" --port "$TG_DOCS_OWN_REDIS_PORT" --dir "$TG_DOCS_WORK" \
        --pidfile "$TG_DOCS_WORK/own-redis.pid" --logfile "$TG_DOCS_WORK/own-redis.log"
}
redis-cli() {
    local args=() arg
    for arg in "$@"; do
        if [ "$arg" = HOST ]; then args+=(127.0.0.1 -p "$TG_DOCS_HOST_PORT"); else args+=("$arg"); fi
    done
    command redis-cli "${args[@]}"
}
"""

# The Tickgate store an operator's block finds on HOST (see the docstring).
SEED = r"""
import sys
import tickgate

with tickgate.Engine(store_url=sys.argv[1]) as engine:          # the default prefix, tickgate:
    engine.set_policy("login", tickgate.Policy(cooldowns=(60, 120), window_max_sends=5, window=600))
    engine.set_titles("login", idle="获取验证码", cooling="重新发送({s}s)")
    engine.set_budget("ip", [(10, 3600)])
    for subject in ("+8613800000000", 'a "quoted"\nname 名字'):
        engine.send_begin("login", subject).succeeded()
"""


def cli(port: int, *args: str) -> str:
    return run(["redis-cli", "-p", str(port), "--no-raw", *args], timeout=30).stdout


def operator_server(folder: Path) -> tuple[subprocess.Popen, int]:
    """HOST for an operator's block: a redis-server with an admin user, a
    Tickgate store and another application's key."""
    port = free_port()
    server = start_redis(port, folder)
    cli(port, "ACL", "SETUSER", "admin", "on", ">ADMIN_PASSWORD", "~*", "&*", "+@all")
    cli(port, "SET", "other:kept", "1")
    seeded = run([sys.executable, "-c", SEED, f"redis://127.0.0.1:{port}"], timeout=60,
                 env=env_for({"PYTHONPATH": str(source / "bindings" / "python"), "TICKGATE_LIBRARY": str(library)}))
    if seeded.returncode != 0:
        server.terminate()
        server.wait()
        raise RuntimeError(f"could not seed HOST's Tickgate store:\n{seeded.stderr[-2000:]}")
    return server, port


def operator_check(code: str, port: int, settings_before: str) -> str:
    """What the server must hold after an operator's block ('' if it does)."""
    if re.search(r"\bUNLINK\b", code):
        left = cli(port, "--scan", "--pattern", "tickgate:*").split()
        if left:
            return f"after the purge {len(left)} keys are left under tickgate:, such as {left[0]}"
        if cli(port, "EXISTS", "other:kept").strip() != "(integer) 1":
            return "the purge removed another application's key"
        return ""
    after = cli(port, "HGETALL", "tickgate:settings")
    if not settings_before.strip() or "(empty" in settings_before:
        return "HOST held no tickgate:settings before the block"
    if fields(after) == fields(settings_before):
        return ""
    return f"tickgate:settings changed:\nbefore:\n{settings_before}\nafter:\n{after}"


def fields(hgetall: str) -> dict[str, str]:
    """HGETALL's reply as printed by redis-cli --no-raw, as field -> value
    (a hash's fields come in no set order)."""
    items = [line.split(") ", 1)[1] for line in hgetall.strip().split("\n") if ") " in line]
    return dict(zip(items[0::2], items[1::2]))


def sh_block(block: Block, first_program: str, scratch: Path) -> tuple[bool, str, str]:
    venv = work / "venv"
    if re.search(r"^\s*pip\b", block.code, re.M) and not venv.exists():
        run([sys.executable, "-m", "venv", str(venv)])
    home = work / "home"
    home.mkdir(exist_ok=True)
    own_redis = free_port()
    env = env_for({"HOME": str(home), "BUILD_DIR": str(build), "TG_DOCS_VENV": str(venv),
                   "TG_DOCS_PYTHON": sys.executable, "TG_DOCS_WORK": str(work),
                   "TG_DOCS_OWN_REDIS_PORT": str(own_redis)})
    made: list[Path] = []
    if "app.c" in block.code:
        app = source / "app.c"
        if app.exists():
            return False, block.name, f"{app} exists already: the block would compile it, not the README's program"
        app.write_text(first_program, encoding="utf-8")
        made += [app, source / "app"]
    operator: Optional[tuple[subprocess.Popen, int]] = None
    cwd, settings_before = source, ""
    try:
        if re.search(r"\bHOST\b", block.code):
            try:
                operator = operator_server(scratch / "host-redis")
            except RuntimeError as error:
                return False, block.name, str(error)
            env["TG_DOCS_HOST_PORT"] = str(operator[1])
            settings_before = cli(operator[1], "HGETALL", "tickgate:settings")
            cwd = scratch / "folder"
            cwd.mkdir(parents=True)
        r = run(["bash", "-c", SH_PRELUDE + block.code], cwd=cwd, env=env, stdin=subprocess.DEVNULL, timeout=900)
        ok, detail = r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        if ok and operator is not None:
            problem = operator_check(block.code, operator[1], settings_before)
            ok, detail = not problem, problem and f"{problem}\n{detail}"
        if ok and re.search(r"^\s*redis-server\b", block.code, re.M):
            ok = answers(own_redis)
            detail = "" if ok else f"the block's redis-server does not answer PING\n{detail}"
        return ok, block.name, detail
    finally:
        if operator is not None:
            operator[0].terminate()
            operator[0].wait()
        pid_file = work / "own-redis.pid"
        if pid_file.exists():
            subprocess.run(["kill", pid_file.read_text().strip()], check=False)
            pid_file.unlink(missing_ok=True)
        for path in made:
            path.unlink(missing_ok=True)


def answers(port: int) -> bool:
    """A redis-server on PORT answers PING within 10 s (a daemon takes a moment)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as connection:
                connection.sendall(b"PING\r\n")
                if connection.recv(16).startswith(b"+PONG"):
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def fragment_check(block: Block) -> tuple[bool, str, str]:
    """The named file holds the fragment, line for line, in order."""
    named = source / block.fragment_of
    if not named.exists():
        return False, block.name, f"the fragment names {block.fragment_of}, which does not exist"
    lines = iter(line.strip() for line in named.read_text(encoding="utf-8").split("\n"))
    for wanted in (line.strip() for line in block.code.split("\n")):
        if wanted and not any(line == wanted for line in lines):
            return False, block.name, f"{block.fragment_of} lacks this line of the fragment (or has it out of order):\n{wanted}"
    return True, f"{block.name}: a fragment of {block.fragment_of}", ""


def report(result: tuple[bool, str, str]) -> None:
    ok, name, detail = result
    results.append(result)
    print(f"ok   {name}" if ok else f"FAIL {name}\n{detail}", flush=True)


def main() -> int:
    all_blocks = [block for path in files for block in blocks(path)]
    first_program = next(b.code for b in all_blocks if b.lang == "c" and b.fragment_of is None)
    examples: list[str] = []
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        for n, block in enumerate(all_blocks):
            scratch = work / f"block{n}"
            if block.fragment_of is not None:
                report(fragment_check(block))
                if block.fragment_of not in examples:
                    examples.append(block.fragment_of)
            elif block.lang == "c":
                jobs.append(pool.submit(c_program, block.name, block.code, scratch))
            elif block.lang == "python":
                jobs.append(pool.submit(python_program, block.name, block.code, scratch))
            elif block.lang in ("sh", "text"):
                pass  # sh below, one at a time; text is a picture
            else:
                report((False, block.name, "a block of no known language: give it c, python, sh or text, "
                                           "or mark it as a fragment"))
        for n, example in enumerate(examples):
            code = (source / example).read_text(encoding="utf-8")
            runner = c_program if example.endswith(".c") else python_program
            jobs.append(pool.submit(runner, f"{example} (the fragments' program)", code, work / f"example{n}"))
        for n, block in enumerate(all_blocks):
            if block.lang == "sh" and block.fragment_of is None:
                report(sh_block(block, first_program, work / f"sh{n}"))
        for job in jobs:
            report(job.result())
    passed = sum(1 for ok, _, _ in results if ok)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 1 if passed != len(results) or not passed else 0


try:
    status = main()
finally:
    redis.terminate()
    redis.wait()
    shutil.rmtree(work, ignore_errors=True)
sys.exit(status)
