"""Two app servers sharing one Redis: what `make demo-web` runs.

    python examples/web/cluster.py [--ports 8081,8082] [--admin-ports 9081,9082]
                                   [--redis-port 6390] [app options...]

starts a redis-server in a temporary directory, then one instance of app.py
per port (servers A, B, ...), prints their addresses and the SMS log's path,
and stops everything on Ctrl-C (or SIGTERM). A port in use, a server that
cannot start or one that exits: it says which and why, stops the rest,
removes the temporary directory and exits 1. Options it does not know (--fail-rate 0,
--cooldown 30, ...) go to every app instance. The browser test
(Tests/web/test_web.py) drives the same class.

The ports, all on 127.0.0.1:
  --ports        each server's public listener: the page (default 8081,8082;
                 make demo-web WEB_PORTS=...)
  --admin-ports  each server's admin listener: the page with the operator's
                 panels, /metrics, /api/stats and /api/records, which the
                 public listener answers 404 for (default: each public port
                 + 1000, so 9081,9082; make demo-web WEB_ADMIN_PORTS=...)
  --redis-port   the redis-server's (default: a free port, printed at the
                 start; make demo-web WEB_REDIS_PORT=6390 to choose it)
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent


class StartFailed(RuntimeError):
    """A server of the cluster could not start (the message says which and why)."""


def busy_ports(ports: list[int]) -> list[int]:
    """The ports of the list that another program listens on (or holds)."""
    busy = []
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                busy.append(port)
    return busy


def log_tail(path: Path, lines: int = 5) -> str:
    """The last lines of a server's log, indented, for an error message."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "".join(f"\n    {line}" for line in text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent() -> None:
    """In a child, before exec: SIGTERM when the cluster process dies, however
    it dies (Linux's PR_SET_PDEATHSIG), so no server outlives a killed test."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise StartFailed(f"{what} exited with status {process.returncode} before it listened")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise StartFailed(f"{what} did not listen on port {port} within {timeout:.0f} s")


class Cluster:
    """A redis-server and app servers on loopback, all in one temporary folder."""

    def __init__(self, ports: list[int], redis_port: Optional[int] = None,
                 app_args: Optional[list[str]] = None, folder: Optional[str] = None,
                 admin_ports: Optional[list[int]] = None) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is missing: install it (apt-get install redis-server)")
        self.folder = Path(folder or tempfile.mkdtemp(prefix="tickgate-web-"))
        self.ports = ports
        # Each server's admin listener (app.py --admin-port): public port + 1000 unless named.
        self.admin_ports = list(admin_ports) if admin_ports else [port + 1000 for port in ports]
        if len(self.admin_ports) != len(ports):
            raise ValueError(f"{len(ports)} public ports but {len(self.admin_ports)} admin ports")
        if any(not 0 < port <= 65535 for port in self.admin_ports):
            raise ValueError(f"admin ports {self.admin_ports}: public port + 1000 is past 65535, "
                             "name the admin ports (--admin-ports)")
        self.redis_port = redis_port or free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.sms_log = self.folder / "sms.log"
        self.app_args = list(app_args or [])
        self.redis: Optional[subprocess.Popen] = None
        self.apps: dict[str, subprocess.Popen] = {}
        self.app_options: dict[str, list[str]] = {}

    def name(self, index: int) -> str:
        return chr(ord("A") + index)

    def url(self, name: str) -> str:
        """Server NAME's public listener: the page, for anyone."""
        return f"http://127.0.0.1:{self.ports[ord(name) - ord('A')]}/"

    def admin_url(self, name: str) -> str:
        """Server NAME's admin listener (127.0.0.1 only): the page with the
        operator's panels, /metrics, /api/stats, /api/records."""
        return f"http://127.0.0.1:{self.admin_ports[ord(name) - ord('A')]}/"

    def start(self) -> "Cluster":
        """Starts Redis, then every app server; raises StartFailed, saying
        which port is in use or why a server could not start."""
        busy = busy_ports([*self.ports, *self.admin_ports, self.redis_port])
        if busy:
            raise StartFailed(", ".join(f"port {port} is in use by another program" for port in busy))
        self.sms_log.touch()
        self.start_redis()
        for index in range(len(self.ports)):
            self.start_app(self.name(index))
        return self

    def start_redis(self) -> None:
        """Starts (or restarts) the redis-server. Its append-only file, in the
        folder, keeps every write: a restarted server has all it had."""
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--dir", str(self.folder),
             "--save", "", "--appendonly", "yes", "--appendfsync", "always",
             "--logfile", str(self.folder / "redis.log")],
            stdout=subprocess.DEVNULL, preexec_fn=die_with_parent)
        try:
            wait_for_port(self.redis_port, self.redis, "redis-server")
        except StartFailed as failure:
            raise StartFailed(f"{failure}:{log_tail(self.folder / 'redis.log')}") from None

    def kill_redis(self) -> None:
        """Kills the redis-server at once (SIGKILL)."""
        assert self.redis is not None
        self.redis.kill()
        self.redis.wait()
        self.redis = None

    def pause_redis(self) -> None:
        """Stops the redis-server (SIGSTOP): it holds its connections and answers nothing."""
        assert self.redis is not None
        self.redis.send_signal(signal.SIGSTOP)

    def resume_redis(self) -> None:
        assert self.redis is not None
        self.redis.send_signal(signal.SIGCONT)

    def start_app(self, name: str, extra: Optional[list[str]] = None) -> subprocess.Popen:
        """Starts (or restarts) server NAME and waits until it listens."""
        if extra is not None:
            self.app_options[name] = extra
        port, admin_port = self.ports[ord(name) - ord("A")], self.admin_ports[ord(name) - ord("A")]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # The apps run in this folder: the library's path must not be relative.
        # From a clone, the library of `make build` serves when none is named.
        library = env.get("TICKGATE_LIBRARY") or (
            str(HERE.parents[1] / "build" / "libtickgate.so") if (HERE.parents[1] / "build" / "libtickgate.so").exists()
            else "")
        if library:
            env["TICKGATE_LIBRARY"] = os.path.abspath(library)
        log = open(self.folder / f"app-{name}.log", "a", encoding="utf-8")
        process = subprocess.Popen(
            [sys.executable, str(HERE / "app.py"), "--port", str(port), "--admin-port", str(admin_port),
             "--name", name, "--redis", self.redis_url,
             "--sms-log", str(self.sms_log), *self.app_args, *self.app_options.get(name, [])],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(HERE), preexec_fn=die_with_parent)
        log.close()
        self.apps[name] = process
        try:
            wait_for_port(port, process, f"app server {name} (port {port})")
            wait_for_port(admin_port, process, f"app server {name} (admin port {admin_port})")
        except StartFailed as failure:
            raise StartFailed(f"{failure}:{log_tail(self.folder / f'app-{name}.log')}") from None
        return process

    def kill_app(self, name: str) -> None:
        """Kills server NAME at once (SIGKILL), as a crash would."""
        process = self.apps.pop(name)
        process.kill()
        process.wait()

    def pause_app(self, name: str) -> None:
        """Stops server NAME (SIGSTOP): it holds its connections and answers nothing."""
        self.apps[name].send_signal(signal.SIGSTOP)

    def resume_app(self, name: str) -> None:
        self.apps[name].send_signal(signal.SIGCONT)

    def sms_lines(self) -> list[str]:
        return self.sms_log.read_text(encoding="utf-8").splitlines()

    def stop(self) -> None:
        """Stops the app servers (SIGINT, then SIGKILL after 5 s) and Redis,
        and removes the temporary folder."""
        for process in self.apps.values():
            process.send_signal(signal.SIGINT)
        for process in self.apps.values():
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.apps.clear()
        if self.redis is not None:
            self.redis.send_signal(signal.SIGCONT)  # a stopped one (pause_redis) could not end
            self.redis.terminate()
            self.redis.wait()
            self.redis = None
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the cluster as Ctrl-C does


def main() -> int:
    signal.signal(signal.SIGTERM, interrupt)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ports", default="8081,8082",
                        help="one app server per port (A, B, ...): their public listeners")
    parser.add_argument("--admin-ports", default=None, help="their admin listeners, on 127.0.0.1 "
                        "(/metrics, /api/stats, /api/records, the operator's panels); default: each port + 1000")
    parser.add_argument("--redis-port", type=int, default=None,
                        help="the redis-server's port (default: a free port, printed at the start; "
                        "make demo-web WEB_REDIS_PORT=N)")
    options, app_args = parser.parse_known_args()
    try:
        ports = [int(p) for p in options.ports.split(",")]
        admin_ports = [int(p) for p in options.admin_ports.split(",")] if options.admin_ports else None
    except ValueError:
        parser.error("--ports and --admin-ports take port numbers separated by commas, e.g. 8081,8082")
    try:
        cluster = Cluster(ports, options.redis_port, app_args, admin_ports=admin_ports)
    except (RuntimeError, ValueError) as missing:
        print(f"cluster.py: {missing}", file=sys.stderr)
        return 1
    # Every way out stops what started and removes the temporary folder.
    try:
        cluster.start()
        print(f"redis-server   {cluster.redis_url}   (in {cluster.folder})")
        for index in range(len(ports)):
            name = cluster.name(index)
            print(f"server {name}       {cluster.url(name)}")
        for index in range(len(ports)):
            name = cluster.name(index)
            print(f"admin {name}        {cluster.admin_url(name)}   (this machine only: the operator's panels, "
                  "/metrics, /api/stats, /api/records)")
        print(f"SMS codes      tail -f {cluster.sms_log}")
        print("Open both servers in a browser; Ctrl-C stops everything.", flush=True)
        while True:
            for name, process in cluster.apps.items():
                if process.poll() is not None:
                    print(f"cluster.py: app server {name} exited with status {process.returncode}:"
                          f"{log_tail(cluster.folder / f'app-{name}.log')}", file=sys.stderr)
                    return 1
            if cluster.redis is not None and cluster.redis.poll() is not None:
                print(f"cluster.py: redis-server exited:{log_tail(cluster.folder / 'redis.log')}", file=sys.stderr)
                return 1
            time.sleep(0.5)
    except StartFailed as failure:
        print(f"cluster.py: {failure}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopping")
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
