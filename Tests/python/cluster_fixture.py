"""A real Redis Cluster for the tests: six redis-server processes (three
primaries, one replica each) on free loopback ports, in a temporary folder.

    with running_cluster() as cluster:
        cluster.url                      # redis+cluster://127.0.0.1:P1,...
        cluster.primaries()              # [Node(port, id, role, slots, ...)]
        cluster.kill(node)               # SIGKILL
        cluster.wait_promoted(node)      # its replica, once the cluster is ok
        cluster.reshard(source, target, 100)

The processes are stopped and the folder removed on every exit path (the
context manager's finally). key_slot() computes a key's slot as the Cluster
specification defines it (CRC16-XMODEM of the hash tag, modulo 16384), so a
test can pick keys that land on each primary.

Nothing here needs libtickgate: the module reads the cluster with a few lines
of RESP of its own (test_one_truth.Resp).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from test_one_truth import Resp, RespError, budget_key, hash_key

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")

#: Why the cluster tests cannot run here, or None.
MISSING: Optional[str] = None
if REDIS_SERVER is None or REDIS_CLI is None:
    MISSING = ("the cluster tests need redis-server and redis-cli "
               "(Debian: apt-get install redis-server redis-tools)")

SLOTS = 16384
NODE_TIMEOUT_MS = 1000


# -- slots ---------------------------------------------------------------------


def crc16(data: bytes) -> int:
    """CRC16-XMODEM (polynomial 0x1021, initial value 0), the Cluster's key hash."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def hash_tag(key: Union[str, bytes]) -> bytes:
    """The part of the key the Cluster hashes: the bytes between the first
    '{' and the first '}' after it, when there are any; else the whole key."""
    raw = key.encode("utf-8") if isinstance(key, str) else key
    start = raw.find(b"{")
    if start >= 0:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            return raw[start + 1:end]
    return raw


def key_slot(key: Union[str, bytes]) -> int:
    return crc16(hash_tag(key)) & (SLOTS - 1)


def name(text: str) -> str:
    """A NAME as the store writes it inside a key: its UTF-8 length, ':', itself."""
    return f"{len(text.encode('utf-8'))}:{text}"


# The hash of the key (scope, subject), and the sorted set of the charges of
# the budget key (budget, key), named as on one server.
countdown_key = hash_key
charges_key = budget_key


def reservations_key(prefix: str, budget: str, key: str) -> str:
    """The sorted set of the reservations on the budget key (budget, key)."""
    return f"{prefix}r{{{len(budget.encode('utf-8'))}:{budget}{key}}}"


# -- a few lines of RESP ---------------------------------------------------------


class Client(Resp):
    """A plain connection to one node on 127.0.0.1 (test_one_truth's Resp,
    with the node's port kept and a context manager)."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        super().__init__(port=port, timeout=timeout)
        self.port = port

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
            self.sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def ask(port: int, *args: object, timeout: float = 2.0) -> object:
    """One command on a fresh connection (raises OSError / RespError)."""
    with Client(port, timeout) as c:
        return c(*args)


def info(port: int, section: str) -> Dict[str, str]:
    """INFO section (or CLUSTER INFO for section "cluster-info") as a dict; {} if the node does not answer."""
    try:
        text = ask(port, "CLUSTER", "INFO") if section == "cluster-info" else ask(port, "INFO", section)
    except (OSError, RespError):
        return {}
    return dict(line.split(":", 1) for line in str(text).splitlines() if ":" in line)


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.05) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def free_port() -> int:
    # The cluster bus listens on port + 10000: both must be free.
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free pair of loopback ports (port, port + 10000)")


# -- the cluster -------------------------------------------------------------------


@dataclass
class Node:
    """One node as CLUSTER NODES last described it."""
    port: int
    id: str = ""
    role: str = ""                        # "primary" or "replica"
    primary_id: Optional[str] = None      # for a replica: its primary's id
    slots: List[Tuple[int, int]] = field(default_factory=list)  # inclusive ranges
    failed: bool = False

    def owns(self, slot: int) -> bool:
        return any(lo <= slot <= hi for lo, hi in self.slots)

    def slot_list(self) -> List[int]:
        return [s for lo, hi in self.slots for s in range(lo, hi + 1)]

    def __str__(self) -> str:
        ranges = ",".join(f"{lo}-{hi}" for lo, hi in self.slots)
        return f"{self.role} {self.port} {self.id[:8]} [{ranges}]"


class Cluster:
    def __init__(self, folder: str, primaries: int = 3, replicas: int = 1) -> None:
        assert MISSING is None, MISSING
        self.folder = folder
        self.processes: Dict[int, subprocess.Popen] = {}
        self.ports: List[int] = []
        self.nodes: Dict[int, Node] = {}
        try:
            for index in range(primaries * (1 + replicas)):
                self.ports.append(self._launch_new(index))
            self._create(replicas)
        except BaseException:
            self.stop()
            raise

    # -- processes ---------------------------------------------------------------

    def _argv(self, port: int) -> List[str]:
        assert REDIS_SERVER is not None
        return [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                "--save", "", "--appendonly", "yes", "--dir", self._dir(port)]

    def _dir(self, port: int) -> str:
        return os.path.join(self.folder, str(port))

    def _start(self, port: int) -> bool:
        os.makedirs(self._dir(port), exist_ok=True)
        with open(os.path.join(self._dir(port), "redis.log"), "ab") as log:
            process = subprocess.Popen(self._argv(port), stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
        self.processes[port] = process
        answered = wait_for(lambda: process.poll() is not None or self._pong(port), 10, 0.02)
        return bool(answered) and process.poll() is None and self._pong(port)

    def _launch_new(self, index: int) -> int:
        for _attempt in range(5):
            port = free_port()
            if self._start(port):
                return port
            self._kill_port(port)   # the port was taken meanwhile: another one
            shutil.rmtree(self._dir(port), ignore_errors=True)
        raise RuntimeError(f"redis-server node {index} did not start; see {self.folder}")

    @staticmethod
    def _pong(port: int) -> bool:
        try:
            return ask(port, "PING", timeout=1) == "PONG"
        except (OSError, RespError):
            return False

    def _kill_port(self, port: int, sig: int = signal.SIGKILL) -> None:
        process = self.processes.pop(port, None)
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)  # a stopped process cannot die
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, sig)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _create(self, replicas: int) -> None:
        assert REDIS_CLI is not None
        argv = [REDIS_CLI, "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
                "--cluster-replicas", str(replicas), "--cluster-yes"]
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        Path(self.folder, "create.log").write_bytes(done.stdout)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed ({done.returncode}):\n"
                               + done.stdout.decode(errors="replace")[-3000:])
        self.wait_ok(30)

    # -- what the cluster looks like ---------------------------------------------------

    @property
    def alive_ports(self) -> List[int]:
        return [p for p in self.ports if p in self.processes and self.processes[p].poll() is None]

    @property
    def url(self) -> str:
        """Every node of the cluster as a seed."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def seed_url(self, *ports: int) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)

    def refresh(self, port: Optional[int] = None) -> Dict[int, Node]:
        """Reads CLUSTER NODES (from port, else from the first live node that answers)."""
        text = None
        for p in ([port] if port is not None else self.alive_ports):
            try:
                text = str(ask(p, "CLUSTER", "NODES"))
                break
            except (OSError, RespError):
                continue
        if text is None:
            raise RuntimeError("no node of the cluster answers CLUSTER NODES")
        nodes: Dict[int, Node] = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 8:
                continue
            address = parts[1].split("@", 1)[0].split(",", 1)[0]
            node_port = int(address.rsplit(":", 1)[1])
            flags = parts[2].split(",")
            node = Node(port=node_port, id=parts[0],
                        role="primary" if "master" in flags else "replica",
                        primary_id=None if parts[3] == "-" else parts[3],
                        failed="fail" in flags or "fail?" in flags)
            for item in parts[8:]:
                if item.startswith("["):
                    continue  # a slot being imported or migrated: its owner is the plain entry
                lo, _, hi = item.partition("-")
                node.slots.append((int(lo), int(hi or lo)))
            nodes[node_port] = node
        self.nodes = nodes
        return nodes

    def primaries(self) -> List[Node]:
        """The primaries that own slots, by their lowest slot."""
        nodes = self.refresh()
        owners = [n for n in nodes.values() if n.role == "primary" and n.slots and not n.failed]
        return sorted(owners, key=lambda n: min(lo for lo, _ in n.slots))

    def node(self, port: int) -> Node:
        return self.refresh()[port]

    def replicas_of(self, primary: Node) -> List[Node]:
        return [n for n in self.refresh().values() if n.role == "replica" and n.primary_id == primary.id]

    def owner(self, slot: int) -> Node:
        for node in self.primaries():
            if node.owns(slot):
                return node
        raise LookupError(f"no primary owns slot {slot}")

    def owner_of_key(self, key: str) -> Node:
        return self.owner(key_slot(key))

    def healthy(self) -> bool:
        """Every live node says cluster_state:ok and agrees on who owns what,
        every slot is owned, and every live replica's link to its primary is up."""
        views = []
        for port in self.alive_ports:
            if info(port, "cluster-info").get("cluster_state") != "ok":
                return False
            try:
                nodes = self.refresh(port)
            except RuntimeError:
                return False
            me = nodes.get(port)
            if me is None:
                return False
            if me.role == "replica" and info(port, "replication").get("master_link_status") != "up":
                return False
            owners = sorted((n.port, tuple(n.slots)) for n in nodes.values()
                            if n.role == "primary" and n.slots and not n.failed)
            views.append(owners)
        if not views or any(v != views[0] for v in views):
            return False
        return sum(hi - lo + 1 for _, slots in views[0] for lo, hi in slots) == SLOTS

    def wait_ok(self, timeout: float = 30) -> None:
        if not wait_for(self.healthy, timeout, 0.1):
            raise RuntimeError(f"the cluster was not ok within {timeout} s: "
                               + "; ".join(str(n) for n in self.refresh().values()))

    # -- faults and changes ------------------------------------------------------------

    def kill(self, node: Union[Node, int]) -> None:
        """SIGKILL one node."""
        self._kill_port(node if isinstance(node, int) else node.port)

    def pause(self, node: Union[Node, int]) -> None:
        """SIGSTOP one node (resume() it before the node timeout, or it fails over)."""
        process = self.processes[node if isinstance(node, int) else node.port]
        os.kill(process.pid, signal.SIGSTOP)

    def resume(self, node: Union[Node, int]) -> None:
        process = self.processes[node if isinstance(node, int) else node.port]
        os.kill(process.pid, signal.SIGCONT)

    def wait_promoted(self, old: Node, timeout: float = 30) -> Node:
        """After old (a primary) died: waits until one of its replicas owns
        its slots and the live nodes say the cluster is ok again; returns it."""
        replica_ports = {n.port for n in self.nodes.values() if n.primary_id == old.id} or \
            {n.port for n in self.refresh().values() if n.primary_id == old.id}

        def promoted() -> Optional[Node]:
            try:
                nodes = self.refresh()
            except RuntimeError:
                return None
            for port in replica_ports:
                node = nodes.get(port)
                if node is not None and node.role == "primary" and set(node.slots) >= set(old.slots):
                    return node
            return None

        new = wait_for(promoted, timeout, 0.05)
        if not new:
            raise RuntimeError(f"no replica of {old} was promoted within {timeout} s")
        self.wait_ok(timeout)
        return self.node(new.port)  # type: ignore[union-attr]

    def restart(self, port: int) -> None:
        """Starts a killed node again, with its nodes.conf and data (it
        rejoins; a demoted primary comes back as a replica)."""
        assert port not in self.alive_ports
        if not self._start(port):
            raise RuntimeError(f"node {port} did not start again")

    def reshard(self, source: Node, target: Node, count: int, timeout: float = 120) -> List[int]:
        """redis-cli --cluster reshard: moves `count` slots (redis-cli takes
        the source's lowest ones) from source to target, with their keys.
        Returns the slots that moved (read back from the cluster)."""
        assert REDIS_CLI is not None
        before = set(source.slot_list())
        argv = [REDIS_CLI, "--cluster", "reshard", f"127.0.0.1:{source.port}",
                "--cluster-from", source.id, "--cluster-to", target.id,
                "--cluster-slots", str(count), "--cluster-yes"]
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        with open(os.path.join(self.folder, "reshard.log"), "ab") as log:
            log.write(done.stdout)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster reshard failed ({done.returncode}):\n"
                               + done.stdout.decode(errors="replace")[-3000:])
        self.wait_ok(30)
        moved = sorted(before - set(self.node(source.port).slot_list()))
        return moved

    @staticmethod
    def lowest_slots(node: Node, count: int) -> List[int]:
        """The slots a reshard of `count` slots away from node moves."""
        return sorted(node.slot_list())[:count]

    # -- reading what the engines wrote -------------------------------------------------

    def on_owner(self, key: str, *args: object) -> object:
        """One command about key, on the primary that owns its slot now."""
        return ask(self.owner_of_key(key).port, *args)

    def stop(self) -> None:
        for port in list(self.processes):
            self._kill_port(port)


def subjects_on(cluster_or_nodes: Union[Cluster, Sequence[Node]], key_of: Callable[[str], str],
                base: str, per_node: int, slots: Optional[Sequence[int]] = None) -> Dict[int, List[str]]:
    """For every primary (by port): `per_node` texts base0, base1, ... whose
    key, key_of(text), lands on a slot it owns (and in `slots`, if given)."""
    nodes = cluster_or_nodes.primaries() if isinstance(cluster_or_nodes, Cluster) else list(cluster_or_nodes)
    wanted = set(slots) if slots is not None else None
    found: Dict[int, List[str]] = {n.port: [] for n in nodes}
    n = 0
    while any(len(v) < per_node for v in found.values()):
        text = f"{base}{n}"
        n += 1
        if n > 10_000_000:
            raise RuntimeError("could not find keys on every primary")
        slot = key_slot(key_of(text))
        if wanted is not None and slot not in wanted:
            continue
        for node in nodes:
            if node.owns(slot):
                if len(found[node.port]) < per_node:
                    found[node.port].append(text)
                break
    return found


@contextlib.contextmanager
def running_cluster(primaries: int = 3, replicas: int = 1) -> Iterator[Cluster]:
    """A cluster in a temporary folder, stopped and removed on every exit path.
    TG_KEEP_CLUSTER=1 keeps the folder (logs, nodes.conf) for a post-mortem."""
    folder = tempfile.mkdtemp(prefix="tg-cluster-")
    cluster: Optional[Cluster] = None
    try:
        cluster = Cluster(folder, primaries, replicas)
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop()
        if os.environ.get("TG_KEEP_CLUSTER") != "1":
            shutil.rmtree(folder, ignore_errors=True)
