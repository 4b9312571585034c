#!/usr/bin/env python3
"""Every code block of the READMEs runs (CTest: docs.readme).

As Rust's doc-tests do, this extracts each fenced block of README.md and
bindings/python/README.md and runs it, so that the first program a newcomer
copies works:

- C: a block with main() is compiled against the build tree and run; a
  fragment is compiled after Tests/docs/prelude.h (the host's names), its
  functions at file scope and its statements inside a function that runs on a
  host-thread engine with a manual clock.
- Python: run with the bindings on PYTHONPATH and the built library; a
  fragment sees the names of Tests/docs/prelude.py.
- sh: each command runs in the clone (pip in a fresh virtual environment);
  `make test`, the command that runs this test, and `make demo-web`, which
  serves until Ctrl-C (web.demo runs it), are only dry-run (make -n).

Durations are shortened so that the whole runs in seconds: 60000 ms becomes
2000 ms in C, and a 60 s start 2 s in Python. Every run must exit 0.

    run_blocks.py SOURCE_DIR BUILD_DIR LIBRARY
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

source, build, library = (os.path.abspath(p) for p in sys.argv[1:4])
here = os.path.join(source, "Tests", "docs")
files = ["README.md", "bindings/python/README.md"]
work = tempfile.mkdtemp(prefix="tg-docs-")
passed = failed = 0


def report(ok, name, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name}\n{detail}")


def blocks(path):
    lines = open(os.path.join(source, path)).read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w+)\s*$", lines[i])
        if m:
            start = i + 1
            j = start
            while j < len(lines) and lines[j] != "```":
                j += 1
            yield m.group(1), start, "\n".join(lines[start:j]) + "\n"
            i = j
        i += 1


def run(cmd, **kw):
    kw.setdefault("timeout", 300)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def env_for(extra=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TICKGATE_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env["XDG_STATE_HOME"] = os.path.join(work, "state")
    env.update(extra or {})
    return env


def c_block(name, code):
    code = re.sub(r"\b60000\b", "2000", code)
    if re.search(r"\bint main\s*\(", code):
        program = code
    else:
        # functions (from a line opening at column 0 to its closing brace)
        # at file scope; the rest are statements of run()
        decls, stmts, lines, i = [], [], code.split("\n"), 0
        while i < len(lines):
            line = lines[i]
            if re.match(r"^(static |void |int )", line):
                while not (lines[i].startswith("}") or lines[i].rstrip().endswith("}")):
                    decls.append(lines[i])
                    i += 1
                decls.append(lines[i])
            else:
                stmts.append("    " + line)
            i += 1
        program = ('#include "prelude.h"\n\n' + "\n".join(decls) +
                   "\n\nstatic void run(tg_engine *engine)\n{\n" + "\n".join(stmts) + "\n}\n\n"
                   "int main(void)\n{\n"
                   "    tg_engine_options o = TG_ENGINE_OPTIONS_INIT;\n"
                   "    tg_engine *engine = NULL;\n"
                   "    int i;\n"
                   "    o.delivery = TG_DELIVERY_HOST_THREAD;\n"
                   "    o.clock = TG_CLOCK_MANUAL;\n"
                   "    if (tg_engine_open(&o, &engine) != TG_OK) return 1;\n"
                   "    run(engine);\n"
                   "    for (i = 0; i < 400; i++) {\n"
                   "        tg_engine_dispatch(engine, NULL);\n"
                   "        tg_clock_advance(engine, 1000);\n"
                   "    }\n"
                   "    tg_engine_dispatch(engine, NULL);\n"
                   "    return tg_engine_close(engine) == TG_OK ? 0 : 1;\n}\n")
    src = os.path.join(work, "block.c")
    exe = os.path.join(work, "block")
    open(src, "w").write(program)
    cc = run(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unused", "-Wno-unused-parameter",
              "-I", os.path.join(source, "include"), "-I", here, src, "-o", exe,
              "-L", os.path.dirname(library), "-ltickgate", "-Wl,-rpath," + os.path.dirname(library)])
    if cc.returncode != 0:
        return report(False, name, program + cc.stderr)
    r = run([exe], timeout=60, env=env_for())
    report(r.returncode == 0, name, r.stdout[-2000:] + r.stderr[-2000:])


def python_block(name, code):
    code = re.sub(r"(start\([^()]*), 60\)", r"\1, 2)", code)
    prelude = open(os.path.join(here, "prelude.py")).read()
    src = os.path.join(work, "block.py")
    open(src, "w").write(prelude + "\n" + code)
    r = run([sys.executable, src], timeout=60, cwd=work,
            env=env_for({"PYTHONPATH": os.path.join(source, "bindings", "python"), "TICKGATE_LIBRARY": library}))
    report(r.returncode == 0, name, r.stdout[-2000:] + r.stderr[-2000:])


venv = None


def sh_block(name, code):
    global venv
    commands = [c.split("#", 1)[0].strip() for c in code.replace("\\\n", " ").split("\n")]
    for command in filter(None, commands):
        words = shlex.split(command)
        env = env_for({"BUILD_DIR": build})
        while words and re.match(r"^\w+=", words[0]):  # VAR=value prefixes
            key, value = words.pop(0).split("=", 1)
            # paths in the README are relative to the clone; the library is
            # the one under test
            env[key] = library if key == "TICKGATE_LIBRARY" else os.path.join(source, value)
        if words[:2] in (["make", "test"], ["make", "demo-web"]):
            # the command running this test, and the servers that run until
            # Ctrl-C (CTest's web.demo runs them): dry run only
            words = ["make", "-n", *words[1:]]
        if words[:1] == ["pip"]:
            if venv is None:
                venv = os.path.join(work, "venv")
                run([sys.executable, "-m", "venv", venv])
            words[0] = os.path.join(venv, "bin", "pip")
        if words[:1] == ["python3"]:
            words[0] = sys.executable
        r = run(words, cwd=source, env=env, stdin=subprocess.DEVNULL, timeout=600)
        report(r.returncode == 0, f"{name}: {command}", r.stdout[-2000:] + r.stderr[-2000:])


for path in files:
    for lang, line, code in blocks(path):
        name = f"{path}:{line} ({lang})"
        if lang == "c":
            c_block(name, code)
        elif lang == "python":
            python_block(name, code)
        elif lang == "sh":
            sh_block(name, code)

subprocess.run(["rm", "-rf", work])
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed or not passed else 0)
