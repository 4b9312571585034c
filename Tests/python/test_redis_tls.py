"""The Redis store over TLS (rediss://) against a real redis-server with a
TLS port: certificates made here with the openssl command (a CA, a server
certificate for 127.0.0.1 and localhost, an expired one, one of another CA,
a client certificate), engines that decide through the link, and each way
verification refuses a server, with its message and failure kind."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

import tickgate
from conftest import Collector, refused_once_noticed, wait_until

REDIS_SERVER = shutil.which("redis-server")
OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(REDIS_SERVER is None or OPENSSL is None,
                                reason="needs redis-server (built with TLS) and the openssl command")

_SERIAL = itertools.count(1)


def openssl(*args: str) -> None:
    assert OPENSSL is not None
    done = subprocess.run([OPENSSL, *args], capture_output=True, text=True)
    assert done.returncode == 0, f"openssl {' '.join(args)}: {done.stderr}"


class Certificates:
    """A CA, certificates it signed, and another CA, in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (folder / "newcerts").mkdir()
        (folder / "index.txt").write_text("")
        (folder / "serial").write_text("1000\n")
        (folder / "ca.cnf").write_text(
            "[ca]\ndefault_ca = test_ca\n"
            "[test_ca]\n"
            f"database = {folder}/index.txt\nnew_certs_dir = {folder}/newcerts\nserial = {folder}/serial\n"
            "default_md = sha256\npolicy = any_name\nunique_subject = no\ncopy_extensions = none\n"
            "[any_name]\ncommonName = supplied\n"
            "[server]\nsubjectAltName = IP:127.0.0.1,DNS:localhost\nextendedKeyUsage = serverAuth\n"
            "[client]\nextendedKeyUsage = clientAuth\n"
            # A cluster node is a client of the others' bus too.
            "[node]\nsubjectAltName = IP:127.0.0.1,DNS:localhost\nextendedKeyUsage = serverAuth, clientAuth\n")
        self.ca = self.authority("ca", "Tickgate Test CA")
        self.other_ca = self.authority("other-ca", "Another Test CA")
        self.server = self.signed("server", "localhost", "server")
        self.expired = self.signed("expired", "localhost", "server",
                                   dates=("20200101000000Z", "20210101000000Z"))
        self.stranger = self.signed("stranger", "localhost", "server", ca="other-ca")
        self.client = self.signed("client", "tickgate-client", "client")
        self.node = self.signed("node", "localhost", "node")

    def path(self, name: str) -> str:
        return str(self.folder / name)

    def authority(self, name: str, subject: str) -> str:
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", self.path(f"{name}.key"), "-out", self.path(f"{name}.pem"), "-days", "30",
                "-subj", f"/CN={subject}")
        return self.path(f"{name}.pem")

    def signed(self, name: str, subject: str, extensions: str, ca: str = "ca",
               dates: tuple = ()) -> str:
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", self.path(f"{name}.key"), "-out", self.path(f"{name}.csr"), "-subj", f"/CN={subject}")
        validity = ["-startdate", dates[0], "-enddate", dates[1]] if dates else ["-days", "30"]
        openssl("ca", "-batch", "-notext", "-config", self.path("ca.cnf"), "-cert", self.path(f"{ca}.pem"),
                "-keyfile", self.path(f"{ca}.key"), "-in", self.path(f"{name}.csr"),
                "-out", self.path(f"{name}.pem"), "-extensions", extensions, *validity)
        return self.path(f"{name}.pem")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return Certificates(tmp_path_factory.mktemp("tls-certificates"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TLSServer:
    """A redis-server with a TLS port and a plain one on 127.0.0.1 (and a
    plain unix socket, to see that it is up)."""

    def __init__(self, folder: Path, certificates: Certificates, certificate: str, clients: str) -> None:
        assert REDIS_SERVER is not None
        self.folder = folder
        self.socket = str(folder / "redis.sock")
        self.process: Optional[subprocess.Popen] = None
        key = certificate[:-len(".pem")] + ".key"
        for _attempt in range(5):
            self.port = free_port()
            self.plain_port = free_port()
            self.process = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.plain_port), "--tls-port", str(self.port), "--bind", "127.0.0.1",
                 "--unixsocket", self.socket, "--save", "", "--appendonly", "no", "--dir", str(folder),
                 "--tls-cert-file", certificate, "--tls-key-file", key,
                 "--tls-ca-cert-file", certificates.ca, "--tls-auth-clients", clients],
                stdout=open(folder / "redis.log", "ab"), stderr=subprocess.STDOUT)
            if wait_until(self._answers, 10, 0.01) and self.process.poll() is None:
                return
            self.stop()  # the port was taken meanwhile: another one
        raise RuntimeError("redis-server did not start: " + (folder / "redis.log").read_text(errors="replace")[-2000:])

    def _answers(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            return True  # ends the wait; checked by the caller
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                s.connect(self.socket)
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def connections_received(self) -> int:
        """How many connections the server has accepted (this one included)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(self.socket)
            s.sendall(b"INFO stats\r\n")
            reply = b""
            while b"total_connections_received:" not in reply or not reply.endswith(b"\r\n"):
                reply += s.recv(65536)
        line = next(l for l in reply.decode().splitlines() if l.startswith("total_connections_received:"))
        return int(line.split(":")[1])

    def url(self, ca: str, *options: str, host: str = "127.0.0.1") -> str:
        return f"rediss://{host}:{self.port}/0?tls_ca_cert_file={ca}" + "".join(f"&{o}" for o in options)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process = None


@pytest.fixture
def tls_server(tmp_path: Path, certificates: Certificates) -> Iterator[Callable[..., TLSServer]]:
    """Starts TLS servers for one test; stops every one on every exit path."""
    started: List[TLSServer] = []

    def start(certificate: Optional[str] = None, clients: str = "optional") -> TLSServer:
        folder = tmp_path / f"server-{len(started)}"
        folder.mkdir()
        server = TLSServer(folder, certificates, certificate or certificates.server, clients)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def prefix() -> str:
    return f"tls:{os.getpid()}:{next(_SERIAL)}:"


def refused_at_open(url: str, prefix: str) -> tickgate.StoreIO:
    started = time.monotonic()
    with pytest.raises(tickgate.StoreIO) as failed:
        tickgate.Engine(store_url=url, store_prefix=prefix, store_timeout_ms=2000)
    assert time.monotonic() - started < 5
    return failed.value


def test_engines_decide_over_tls_and_agree(tls_server: Callable[..., TLSServer], certificates: Certificates,
                                           prefix: str, collector: Collector) -> None:
    server = tls_server()
    url = server.url(certificates.ca)
    with tickgate.Engine(store_url=url, store_prefix=prefix, store_timeout_ms=3000) as a, \
            tickgate.Engine(store_url=url, store_prefix=prefix, store_timeout_ms=3000) as b:
        # A send: begun on one engine, in flight for the other, then cooling.
        ticket = a.send_begin("login", "+8613800000000")
        with pytest.raises(tickgate.InFlight):
            b.send_begin("login", "+8613800000000")
        assert a.send_end(ticket, True).remaining_ms == 60_000
        refused_once_noticed(lambda: b.send_begin("login", "+8613800000000"),
                             tickgate.CoolingDown, tickgate.InFlight)
        assert b.button("login", "+8613800000000").state == tickgate.ButtonState.COOLING
        # A countdown started on A reaches B's observer (the notice channel
        # is a TLS link too).
        with b.subscribe("verify", "alice", collector):
            a.start("verify", "alice", 30)
            assert wait_until(lambda: tickgate.EventKind.STARTED in collector.kinds(), 10), collector.kinds()
            assert 29_000 < b.remaining("verify", "alice").remaining_ms <= 30_000
        # A budget set on A charges and refuses on B.
        a.set_budget("ip", [(1, 60)])
        b.send_begin("login", "one", budgets=[("ip", "203.0.113.7")])
        with pytest.raises(tickgate.Locked) as locked:
            a.send_begin("login", "two", budgets=[("ip", "203.0.113.7")])
        assert locked.value.budget == "ip"
        assert a.budget_usage("ip", "203.0.113.7").used == 1
        # Idle TLS links are kept (a TLS 1.3 server's session tickets make
        # the socket readable; that is not a stale link): calls one after
        # another reuse one connection.
        before = server.connections_received()
        for subject in range(20):
            a.start("reuse", str(subject), 10)
            time.sleep(0.01)
        assert server.connections_received() - before <= 2


def test_server_name_and_localhost(tls_server: Callable[..., TLSServer], certificates: Certificates,
                                   prefix: str) -> None:
    server = tls_server()
    # The name checked (and sent as SNI) is tls_server_name, not the host.
    urls = (server.url(certificates.ca, "tls_server_name=localhost"), server.url(certificates.ca, host="localhost"))
    for subject, url in enumerate(urls):
        with tickgate.Engine(store_url=url, store_prefix=prefix) as engine:
            assert engine.start("verify", str(subject), 10).remaining_ms > 9_000


def test_a_ca_that_did_not_sign_the_server_is_refused(tls_server: Callable[..., TLSServer],
                                                      certificates: Certificates, prefix: str) -> None:
    server = tls_server()
    error = refused_at_open(server.url(certificates.other_ca), prefix)
    assert isinstance(error, tickgate.StoreAuth), error
    assert error.failure == tickgate.StoreFailure.AUTH
    assert (f"the server's certificate is not signed by a trusted CA (tls_ca_cert_file {certificates.other_ca})"
            in str(error)), error
    # A server whose certificate another CA signed, the same.
    stranger = tls_server(certificates.stranger)
    error = refused_at_open(stranger.url(certificates.ca), prefix)
    assert isinstance(error, tickgate.StoreAuth) and "not signed by a trusted CA" in str(error), error


def test_a_name_mismatch_is_refused(tls_server: Callable[..., TLSServer], certificates: Certificates,
                                    prefix: str) -> None:
    server = tls_server()
    error = refused_at_open(server.url(certificates.ca, "tls_server_name=wrong.example"), prefix)
    assert isinstance(error, tickgate.StoreAuth), error
    assert "the server's certificate is for another name than wrong.example" in str(error), error


def test_an_expired_certificate_is_refused(tls_server: Callable[..., TLSServer], certificates: Certificates,
                                           prefix: str) -> None:
    server = tls_server(certificates.expired)
    error = refused_at_open(server.url(certificates.ca), prefix)
    assert isinstance(error, tickgate.StoreAuth), error
    assert "the server's certificate expired on 2021-01-01 00:00:00 UTC" in str(error), error


def test_a_client_certificate(tls_server: Callable[..., TLSServer], certificates: Certificates,
                              prefix: str) -> None:
    server = tls_server(clients="yes")
    key = certificates.client[:-len(".pem")] + ".key"
    url = server.url(certificates.ca, f"tls_cert_file={certificates.client}", f"tls_key_file={key}")
    with tickgate.Engine(store_url=url, store_prefix=prefix) as engine:
        ticket = engine.send_begin("login", "carol")
        assert engine.send_end(ticket, True).remaining_ms == 60_000
    # Without one, the server refuses the link, and the message says why.
    error = refused_at_open(server.url(certificates.ca), prefix)
    assert isinstance(error, tickgate.StoreAuth), error
    assert "the server asks for a client certificate (tls_cert_file and tls_key_file)" in str(error), error
    # A client key that is not the certificate's is refused before any link.
    other = certificates.stranger[:-len(".pem")] + ".key"
    error = refused_at_open(server.url(certificates.ca, f"tls_cert_file={certificates.client}",
                                       f"tls_key_file={other}"), prefix)
    assert isinstance(error, tickgate.StoreAuth) and "is not the key of tls_cert_file" in str(error), error


def test_files_that_cannot_be_read(tls_server: Callable[..., TLSServer], certificates: Certificates,
                                   prefix: str, tmp_path: Path) -> None:
    server = tls_server()
    missing = str(tmp_path / "missing.pem")
    error = refused_at_open(server.url(missing), prefix)
    assert isinstance(error, tickgate.StoreAuth), error
    assert f"cannot read tls_ca_cert_file {missing}: No such file or directory" in str(error), error
    error = refused_at_open(server.url(certificates.ca, f"tls_cert_file={missing}", f"tls_key_file={missing}"),
                            prefix)
    assert f"cannot read tls_cert_file {missing}" in str(error), error


def test_plain_redis_to_the_tls_port_fails_within_the_timeout(tls_server: Callable[..., TLSServer],
                                                              prefix: str) -> None:
    server = tls_server()
    started = time.monotonic()
    with pytest.raises(tickgate.TickgateError) as failed:
        tickgate.Engine(store_url=f"redis://127.0.0.1:{server.port}/0", store_prefix=prefix, store_timeout_ms=1000)
    assert time.monotonic() - started < 3
    assert isinstance(failed.value, (tickgate.StoreIO, tickgate.StoreUnknown, tickgate.StoreCorrupt)), failed.value
    assert f"redis://127.0.0.1:{server.port}/0" in str(failed.value)


def test_tls_to_a_plain_port_fails_within_the_timeout(tls_server: Callable[..., TLSServer],
                                                      certificates: Certificates, prefix: str) -> None:
    server = tls_server()
    url = f"rediss://127.0.0.1:{server.plain_port}/0?tls_ca_cert_file={certificates.ca}"
    started = time.monotonic()
    with pytest.raises(tickgate.StoreIO) as failed:
        tickgate.Engine(store_url=url, store_prefix=prefix, store_timeout_ms=1000)
    assert time.monotonic() - started < 3
    # Not a certificate problem: the handshake failed on what came back.
    assert failed.value.failure in (tickgate.StoreFailure.UNREACHABLE, tickgate.StoreFailure.TIMEOUT), failed.value
    assert f"rediss://127.0.0.1:{server.plain_port}/0" in str(failed.value)


def test_a_cluster_over_tls(certificates: Certificates, tmp_path: Path) -> None:
    """rediss+cluster://: three primaries that speak TLS only (clients and
    the cluster bus), made by redis-cli --tls --cluster create; engines
    decide on keys of every primary, with budget keys on other slots, and a
    CA that did not sign the nodes is refused at open."""
    redis_cli = shutil.which("redis-cli")
    if redis_cli is None:
        pytest.skip("needs redis-cli (Debian: redis-tools)")
    assert REDIS_SERVER is not None
    key = certificates.node[:-len(".pem")] + ".key"
    processes: List[subprocess.Popen] = []
    ports: List[int] = []
    try:
        while len(ports) < 3:
            port = free_port()
            if port + 10000 > 65535 or port in ports:
                continue
            folder = tmp_path / str(port)
            folder.mkdir()
            processes.append(subprocess.Popen(
                [REDIS_SERVER, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                 "--tls-cluster", "yes", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 # With no plain port the bus would default to 10000 for all.
                 "--cluster-port", str(port + 10000),
                 "--cluster-node-timeout", "1000", "--save", "", "--appendonly", "no", "--dir", str(folder),
                 "--tls-cert-file", certificates.node, "--tls-key-file", key,
                 "--tls-ca-cert-file", certificates.ca, "--tls-auth-clients", "no"],
                stdout=open(folder / "redis.log", "ab"), stderr=subprocess.STDOUT))
            ports.append(port)
        cli = [redis_cli, "--tls", "--cacert", certificates.ca]

        def answers() -> bool:
            return all(subprocess.run(cli + ["-p", str(p), "PING"], capture_output=True, text=True).stdout.strip()
                       == "PONG" for p in ports)

        assert wait_until(answers, 10, 0.05), "the TLS cluster nodes did not start"
        made = subprocess.run(cli + ["--cluster", "create"] + [f"127.0.0.1:{p}" for p in ports]
                              + ["--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True,
                              timeout=60)
        assert made.returncode == 0, made.stdout + made.stderr

        def ready() -> bool:
            return all("cluster_state:ok" in subprocess.run(cli + ["-p", str(p), "CLUSTER", "INFO"],
                                                            capture_output=True, text=True).stdout for p in ports)

        assert wait_until(ready, 20, 0.1), "the TLS cluster did not become ready"
        url = f"rediss+cluster://127.0.0.1:{ports[0]}?tls_ca_cert_file={certificates.ca}"
        prefix = f"tlscl:{os.getpid()}:{next(_SERIAL)}:"
        a = tickgate.Engine(store_url=url, store_prefix=prefix, store_timeout_ms=2000)
        b = tickgate.Engine(store_url=url, store_prefix=prefix, store_timeout_ms=2000)
        try:
            a.set_budget("ip", [(5, 60)])
            a.set_budget("cc", [(100, 60)])
            granted = 0
            for i in range(8):
                try:
                    b.send_begin("login", f"+86138{i:08d}", budgets=[("ip", "203.0.113.7"), ("cc", "86")]).succeeded()
                    granted += 1
                except tickgate.Locked:
                    pass
            assert granted == 5
            assert a.budget_usage("ip", "203.0.113.7").used == 5
            assert a.budget_usage("cc", "86").used == 5
            with pytest.raises(tickgate.CoolingDown):
                a.send_begin("login", "+8613800000000")
            # The keys are spread over the three primaries.
            owners = set()
            for i in range(8):
                slot = int(subprocess.run(cli + ["-p", str(ports[0]), "CLUSTER", "KEYSLOT",
                                                 f"{prefix}k{{5:login+86138{i:08d}}}"],
                                          capture_output=True, text=True).stdout)
                owners.add(slot * 3 // 16384)
            assert len(owners) >= 2
        finally:
            a.close()
            b.close()
        with pytest.raises(tickgate.StoreAuth) as caught:
            tickgate.Engine(store_url=f"rediss+cluster://127.0.0.1:{ports[1]}?tls_ca_cert_file={certificates.other_ca}",
                            store_prefix=prefix, store_timeout_ms=2000)
        assert "not signed by a trusted CA" in caught.value.message
    finally:
        for process in processes:
            process.kill()
            process.wait()
