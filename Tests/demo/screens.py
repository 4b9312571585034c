#!/usr/bin/env python3
"""The interactive demo fits its terminal (CTest: demo.screens).

Runs `tickgate-demo` in tmux at 80x24 and at 60x18, in Chinese and in
English, plays a session of keys (a send, a refused tap, the reset code, the
login gate answered no and yes, logging out twice, an unknown key, a wrong
code, a burst of sends that the client's budget stops, quit) and
reads the screen after every key with `tmux capture-pane -J` (which joins a
wrapped line back into one). Every screen must have:

- no line wider than the terminal (nothing wrapped), in display columns;
- the heading on its first line (nothing scrolled away), both buttons, and
  every key of the keys line (split in two on a narrow terminal);
- the state column of the two buttons at the same column, also when one is
  LOCKED (the store is prepared with three sends, through the Python
  bindings, so that the sign-in button starts locked);

and each key's feedback must show: waits in seconds or minutes (never raw
milliseconds), a line for logging out while logged out, and one for a key
that does nothing.

    screens.py DEMO LIBRARY BINDINGS_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata

demo, library, bindings = sys.argv[1:4]
passed = failed = 0


def check(ok, what, screen=None):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}")
        if screen is not None:
            print("\n".join(f"  |{line}" for line in screen))


def width(text):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def tmux(*args, check_rc=True):
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=check_rc).stdout


def prepare_store(path):
    """Three sign-in sends in the demo's --fast window: the button is LOCKED."""
    code = f"""
import tickgate
with tickgate.Engine(store_path={path!r}) as e:
    e.set_policy("login", tickgate.Policy(cooldowns_ms=(10000, 15000, 20000), window_max_sends=3,
                                          window_ms=120000, ticket_timeout_ms=10000))
    for i in range(3):
        with e.send_begin("login", "+8613800000000"):
            pass
        if i < 2:
            e.cancel("login", "+8613800000000")
"""
    env = dict(os.environ, PYTHONPATH=bindings, TICKGATE_LIBRARY=library)
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


TEXT = {
    "zh": {"heading": "Tickgate 演示", "login": "登录验证码", "reset": "重置密码",
           "wait": "还需", "not_logged_in": "未登录，无需退出", "unknown": "不是可用的按键",
           "locked": "请", "quit": "q 退出", "wrong": "还可再试", "budget": "被「ip」"},
    "en": {"heading": "Tickgate demo", "login": "Sign-in code", "reset": "Reset password",
           "wait": "wait ", "not_logged_in": "not logged in", "unknown": "is not a key here",
           "locked": "Try again in", "quit": "q quit", "wrong": "attempt(s) left",
           "budget": "refused by the"},
}
STATES = ("IDLE", "SENDING", "COOLING", "READY_AGAIN", "LOCKED", "CODE_DEAD")


def state_column(line):
    for state in STATES:
        at = line.rfind(" " + state)
        if at >= 0:
            return width(line[: at + 1])
    return None


def play(lang, cols, rows):
    t = TEXT[lang]
    work = tempfile.mkdtemp(prefix="tg-demo-screens-")
    session = f"tg-demo-{os.getpid()}-{lang}-{cols}"
    try:
        store = os.path.join(work, "demo.db")
        prepare_store(store)
        command = (f"env LANG=C TERM=xterm-256color XDG_STATE_HOME={work} {demo} "
                   f"--lang {lang} --fast --state {store}")
        tmux("new-session", "-d", "-s", session, "-x", str(cols), "-y", str(rows), command)
        tmux("set-option", "-t", session, "remain-on-exit", "on")
        steps = [("", 1.0, None), ("s", 0.6, "wait"), ("r", 1.5, None), ("r", 0.4, "wait"),
                 ("l", 0.5, None), ("n", 0.5, None), ("l", 0.5, None), ("y", 0.6, None),
                 ("o", 0.5, None), ("o", 0.5, "not_logged_in"), ("x", 0.5, "unknown"),
                 ("w", 0.4, "wrong"), ("b", 0.6, "budget")]
        for keys, pause, expect in steps:
            if keys:
                tmux("send-keys", "-t", session, "-l", keys)
            time.sleep(pause)
            screen = tmux("capture-pane", "-p", "-J", "-t", session).rstrip("\n").split("\n")
            what = f"{lang} {cols}x{rows} after {keys or 'start'!r}"
            check(len(screen) <= rows, f"{what}: {len(screen)} lines on {rows} rows", screen)
            wide = [line for line in screen if width(line.rstrip()) > cols]
            check(not wide, f"{what}: wrapped lines {wide}", screen)
            check(t["heading"] in screen[0], f"{what}: the heading is not on the first line", screen)
            login = [line for line in screen if t["login"] in line]
            reset = [line for line in screen if t["reset"] in line]
            check(login and reset, f"{what}: a button is missing", screen)
            if login and reset:
                check(state_column(login[0]) is not None and state_column(login[0]) == state_column(reset[0]),
                      f"{what}: the state columns differ", screen)
            if keys == "":
                check(any("LOCKED" in line and t["locked"] in line for line in login),
                      f"{what}: the sign-in button is not LOCKED", screen)
            if expect:
                check(any(t[expect] in line for line in screen), f"{what}: no '{t[expect]}' line", screen)
            check(not any(" ms" in line for line in screen), f"{what}: a wait in raw milliseconds", screen)
            check(any(t["quit"] in line for line in screen), f"{what}: the keys line lost 'q'", screen)
        tmux("send-keys", "-t", session, "q")
        time.sleep(0.5)
        dead = tmux("display-message", "-p", "-t", session, "#{pane_dead}").strip()
        check(dead == "1", f"{lang} {cols}x{rows}: 'q' did not quit")
    finally:
        tmux("kill-session", "-t", session, check_rc=False)
        shutil.rmtree(work, ignore_errors=True)


if shutil.which("tmux") is None:
    print("SKIP: tmux is not installed (make installs it with apt-get as root)")
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(77)
for lang in ("zh", "en"):
    for cols, rows in ((80, 24), (60, 18)):
        play(lang, cols, rows)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
