#!/usr/bin/env python3
"""The C demo and the Python demo agree (CTest: demo.agree).

    agree.py TICKGATE_DEMO LIBRARY BINDINGS_DIR PYTHON_DEMO

1. Under each locale setting, both scripted sessions (tickgate-demo --script,
   examples/python_demo.py) pick the same language, the one expected (the
   first of LC_ALL, LC_MESSAGES and LANG that is set: Chinese if it starts
   with "zh"; LANG=C.UTF-8 is English), and play the same steps, heading for
   heading (the wrong codes and the budget burst among them).
2. `tickgate-demo --help` lists every key of the screen (w and b among them),
   --reset, and the --fast figures the demo uses.
3. --reset starts over: a second scripted run on the same --state file finds
   the client's budget spent by the first and fails; with --reset it plays
   the whole session again. The same for both demos.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import tempfile
from pathlib import Path

demo, library, bindings, python_demo = sys.argv[1:5]
failures = 0

LOCALES = [
    ({"LANG": "C.UTF-8"}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LC_ALL": "C.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
    ({"LC_MESSAGES": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LC_ALL": "", "LANG": "zh_CN.UTF-8"}, "zh"),
    ({}, "en"),
]


def check(ok: bool, title: str, detail: str = "") -> None:
    global failures
    print(f"ok   {title}" if ok else f"FAIL {title}\n{detail}", flush=True)
    failures += not ok


def run_demo(which: str, locale: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE")}
    env.update(locale, TICKGATE_LIBRARY=library, PYTHONPATH=bindings, PYTHONDONTWRITEBYTECODE="1")
    command = [demo, "--script", *args] if which == "C" else [sys.executable, python_demo, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def headings(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("== ")]


def language(output: str) -> str:
    return "zh" if "获取验证码" in output else "en"


# 1. The same language and the same session, side by side.
with concurrent.futures.ThreadPoolExecutor(max_workers=len(LOCALES) * 2) as pool:
    runs = {(n, which): pool.submit(run_demo, which, locale)
            for n, (locale, _) in enumerate(LOCALES) for which in ("C", "Python")}
    for n, (locale, expected) in enumerate(LOCALES):
        c, py = runs[n, "C"].result(), runs[n, "Python"].result()
        setting = " ".join(f"{k}={v!r}" for k, v in locale.items()) or "no locale variables"
        check(c.returncode == 0 and py.returncode == 0, f"{setting}: both sessions exit 0",
              c.stdout[-1500:] + c.stderr + py.stdout[-1500:] + py.stderr)
        check(language(c.stdout) == language(py.stdout) == expected,
              f"{setting}: both demos speak {expected}", f"C: {language(c.stdout)}, Python: {language(py.stdout)}")
        check(headings(c.stdout) == headings(py.stdout) and len(headings(c.stdout)) == 11,
              f"{setting}: the same 10 steps", "\n".join(headings(c.stdout)) + "\n--\n" + "\n".join(headings(py.stdout)))

# 2. --help: every key and the true --fast figures.
text = subprocess.run([demo, "--help"], capture_output=True, text=True, timeout=30).stdout
flat = " ".join(text.split())
keys = flat.partition("keys:")[2]
missing = [key for key in "swbrloqyn" if f" {key} " not in f" {keys} ".replace("/", " ")]
check(not missing, f"--help lists every key: {keys[:60]}...", f"missing keys {missing}:\n{text}")
for figure in ("sign-in cooldowns 10, 15, then 20 s", "at most 3 sign-in codes per 2 min",
               "reset-password 10 s", "3 codes per 10 min", "--reset"):
    check(figure in flat, f"--help says {figure!r}", text)

# 3. --reset starts over, in both demos.
with tempfile.TemporaryDirectory(prefix="tickgate-agree-") as folder:
    for which in ("C", "Python"):
        store = str(Path(folder) / f"{which}.db")
        first = run_demo(which, {"LANG": "C.UTF-8"}, "--state", store)
        again = run_demo(which, {"LANG": "C.UTF-8"}, "--state", store)
        reset = run_demo(which, {"LANG": "C.UTF-8"}, "--state", store, "--reset")
        check(first.returncode == 0, f"{which}: a session on a store file of its own", first.stdout[-1500:] + first.stderr)
        check(again.returncode != 0, f"{which}: run again, the store's spent budget stops the session",
              again.stdout[-1500:] + again.stderr)
        check(reset.returncode == 0 and "starting over" in reset.stderr,
              f"{which}: with --reset the whole session plays again", reset.stdout[-1500:] + reset.stderr)

print(f"demo.agree: {'all passed' if not failures else f'{failures} failed'}")
sys.exit(1 if failures else 0)
