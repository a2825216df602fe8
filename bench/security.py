"""`python -m bench.security`: produce and consume throughput of one pykraft node (one process, broker +
controller) over three client-listener setups, in one run: PLAINTEXT, SSL (TLS, no client certificate)
and SASL_SSL with SCRAM-SHA-512.

Each setup's node is started the same way (``pykraft storage format``, then ``pykraft server start`` as a
separate process with the malloc thresholds of ``make run``; the SASL_SSL node is formatted with
``--add-scram`` for the benchmark's user). The workloads are bench's P1/P2: confluent-kafka, 1 KiB values,
one partition, idempotent acks=all, linger.ms=5, then a fresh consumer reading them back; connections (and
so the TLS handshake and the SCRAM exchange) are set up before the clock starts. Rounds interleave the
setups (the order rotates each round); figures are medians over rounds with min/max, each with its ratio
to PLAINTEXT, and CPU seconds per MB of the broker and of this process (librdkafka's threads). The
certificates (a CA and a server certificate for 127.0.0.1 with an encrypted key) are made at run time with
the openssl command in a temp dir. Results: bench/results/security.md. Only 127.0.0.1; every process
started here is stopped here.

    python -m bench.security [--rounds 3] [--messages 200000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka

from bench.__main__ import Peer, consume, produce
from bench.peers import MALLOC_ENV
from bench.results_file import write_results
from pykraft.testing import free_port

RESULTS = Path(__file__).resolve().parent / "results"
SETUPS = ("PLAINTEXT", "SSL", "SASL_SSL")
VALUE_SIZE = 1024
SCRAM_USER = "bench"
SCRAM_PASSWORD = "bench-secret"


# --- certificates ---------------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(directory: Path, key_password: str) -> None:
    """ca.pem, and keystore.pem: a certificate for IP 127.0.0.1 signed by it and its key encrypted with
    ``key_password`` (Kafka's PEM keystore), as tests/interop/conftest.py makes them."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=pykraft-bench-ca", cwd=directory)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=127.0.0.1", cwd=directory)  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "san.ext", cwd=directory)  # fmt: skip
    _openssl("pkey", "-in", "server.key", "-aes256", "-passout", f"pass:{key_password}",
             "-out", "server-enc.key", cwd=directory)  # fmt: skip
    (directory / "keystore.pem").write_text(
        (directory / "server.pem").read_text() + (directory / "server-enc.key").read_text()
    )


# --- nodes ----------------------------------------------------------------------------------------


def server_properties(
    setup: str, data_dir: str, port: int, controller: int, certs: Path, key_password: str
) -> str:
    lines = [
        "node.id=1",
        "process.roles=broker,controller",
        f"listeners={setup}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        f"advertised.listeners={setup}://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        f"listener.security.protocol.map={setup}:{setup},CONTROLLER:PLAINTEXT",
        f"controller.quorum.voters=1@127.0.0.1:{controller}",
        f"log.dirs={data_dir}",
    ]
    if setup != "PLAINTEXT":
        lines += [f"ssl.keystore.location={certs / 'keystore.pem'}", f"ssl.key.password={key_password}"]
    if setup == "SASL_SSL":
        lines.append("sasl.enabled.mechanisms=SCRAM-SHA-512")
    return "\n".join(lines) + "\n"


def client_settings(setup: str, certs: Path) -> dict[str, str]:
    """confluent-kafka's security.protocol, ssl.* and sasl.* for ``setup``."""
    if setup == "PLAINTEXT":
        return {}
    settings = {"security.protocol": setup, "ssl.ca.location": str(certs / "ca.pem")}
    if setup == "SASL_SSL":
        settings |= {
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": SCRAM_USER,
            "sasl.password": SCRAM_PASSWORD,
        }
    return settings


def _cli() -> list[str]:
    return [sys.executable, "-m", "pykraft.cli", "--log-level", "WARNING"]


@dataclass
class SecurityNode(Peer):
    """A pykraft process whose client listener is ``name`` (PLAINTEXT, SSL or SASL_SSL); its log goes
    to server.log in its work dir (a pipe nobody reads would fill and stall it)."""

    certs: Path = field(default_factory=Path)
    key_password: str = ""

    def start(self) -> float:
        self.port = free_port()
        self.workdir = tempfile.mkdtemp(prefix=f"bench-security-{self.name.lower()}-")
        config = Path(self.workdir) / "server.properties"
        config.write_text(
            server_properties(
                self.name,
                str(Path(self.workdir) / "data"),
                self.port,
                free_port(),
                self.certs,
                self.key_password,
            )
        )
        scram = ["--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"]
        subprocess.run(
            [*_cli(), "storage", "format", "-c", str(config), *(scram if self.name == "SASL_SSL" else [])],
            check=True,
            capture_output=True,
            timeout=60,
        )
        started = time.monotonic()
        with open(self.log_path, "wb") as log_file:
            self.proc = subprocess.Popen(
                self.command(self.port, self.workdir),
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )
        deadline = started + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: the node exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return time.monotonic() - started
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.name}: 127.0.0.1:{self.port} did not open") from None
                time.sleep(0.01)

    @property
    def log_path(self) -> Path:
        return Path(self.workdir) / "server.log"

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def security_node(setup: str, certs: Path, key_password: str) -> SecurityNode:
    def command(_port: int, workdir: str) -> list[str]:
        return [*_cli(), "server", "start", "--config", str(Path(workdir) / "server.properties")]

    return SecurityNode(
        setup,
        command,
        env=dict(MALLOC_ENV),
        client_config=client_settings(setup, certs),
        certs=certs,
        key_password=key_password,
    )


def negotiated_tls(node: SecurityNode) -> str:
    """The TLS version and cipher the node agrees with this Python's OpenSSL (librdkafka's differs in
    build, not in what it offers by default)."""
    context = ssl.create_default_context(cafile=str(node.certs / "ca.pem"))
    with (
        socket.create_connection(("127.0.0.1", node.port), timeout=10) as sock,
        context.wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        cipher = tls.cipher()
        return f"{tls.version()} {cipher[0] if cipher else '?'}"


# --- the run --------------------------------------------------------------------------------------


Results = dict[str, dict[str, list[dict[str, float]]]]


def run(args: argparse.Namespace, certs: Path, key_password: str) -> tuple[Results, str]:
    nodes = [security_node(setup, certs, key_password) for setup in SETUPS]
    results: Results = {node.name: {} for node in nodes}
    tls = "?"
    for round_index in range(args.rounds):
        print(f"round {round_index + 1}/{args.rounds}", flush=True)
        shift = round_index % len(nodes)
        for node in nodes[shift:] + nodes[:shift]:
            try:
                node.start()
                if node.name == "SSL" and tls == "?":
                    tls = negotiated_tls(node)
                topic = f"sec-{uuid.uuid4().hex[:8]}"
                for workload, measure in (("produce", produce), ("consume", consume)):
                    got = measure(node, topic, args.messages, VALUE_SIZE, 1)
                    results[node.name].setdefault(workload, []).append(got)
                    print(
                        f"  {node.name:9s} {workload:8s} " + " ".join(f"{k}={v:.3g}" for k, v in got.items()),
                        flush=True,
                    )
            except Exception as exc:  # one setup's failure must not hide the others' figures
                print(f"  {node.name}: FAILED: {exc!r}\n{node.log_tail()}", flush=True)
                results[node.name].setdefault("failures", []).append({"round": float(round_index)})
            finally:
                node.stop()
    return results, tls


def table(results: Results, tls: str, args: argparse.Namespace) -> str:
    megabytes = args.messages * VALUE_SIZE / 1e6

    def values(setup: str, workload: str, key: str) -> list[float]:
        return [r[key] for r in results.get(setup, {}).get(workload, []) if key in r]

    def median(setup: str, workload: str, key: str) -> float | None:
        got = values(setup, workload, key)
        return statistics.median(got) if got else None

    def spread(setup: str, workload: str) -> str:
        got = values(setup, workload, "mb_s")
        return f"{statistics.median(got):.1f} ({min(got):.1f}–{max(got):.1f})" if got else "—"

    def ratio(setup: str, workload: str) -> str:
        mine, base = median(setup, workload, "mb_s"), median("PLAINTEXT", workload, "mb_s")
        return f"{mine / base:.2f}" if mine and base else "—"

    def per_mb(setup: str, workload: str, key: str) -> str:
        got = median(setup, workload, key)
        return "—" if got is None or got != got else f"{got / megabytes:.4f}"

    lines = [
        "# Client-listener security: PLAINTEXT vs SSL vs SASL_SSL (SCRAM-SHA-512), one pykraft node",
        "",
        f"`python -m bench.security`: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}, confluent-kafka {confluent_kafka.version()[0]} "
        f"(librdkafka {confluent_kafka.libversion()[0]}). One node (broker+controller, one process, "
        f"`pykraft server start`); TLS negotiated: {tls}, no client certificate. {args.rounds} round(s), "
        f"setups interleaved (order rotated each round); {args.messages} messages of {VALUE_SIZE} B to one "
        "partition, idempotent acks=all, linger.ms=5, then read back by a fresh consumer. Median "
        "(min–max) over rounds; ratios are of medians, to PLAINTEXT.",
        "",
        "| setup | produce MB/s | produce / PLAINTEXT | consume MB/s | consume / PLAINTEXT |",
        "|---|---|---|---|---|",
    ]
    for setup in SETUPS:
        lines.append(
            f"| {setup} | {spread(setup, 'produce')} | {ratio(setup, 'produce')} "
            f"| {spread(setup, 'consume')} | {ratio(setup, 'consume')} |"
        )
    lines += [
        "",
        "CPU seconds per MB (medians): the broker process's utime+stime, and the client's (this process: "
        "librdkafka's threads and the Python loop).",
        "",
        "| setup | broker, produce | client, produce | broker, consume | client, consume |",
        "|---|---|---|---|---|",
    ]
    for setup in SETUPS:
        lines.append(
            f"| {setup} | {per_mb(setup, 'produce', 'broker_cpu_s')} | {per_mb(setup, 'produce', 'client_cpu_s')} "
            f"| {per_mb(setup, 'consume', 'broker_cpu_s')} | {per_mb(setup, 'consume', 'client_cpu_s')} |"
        )
    failures = {s: len(w["failures"]) for s, w in results.items() if w.get("failures")}
    if failures:
        lines += ["", f"Failed rounds: {failures}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="1 round, 20000 messages, no results file")
    parser.add_argument("--out", default=str(RESULTS / "security.md"))
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.messages = 1, 20_000
    with tempfile.TemporaryDirectory(prefix="bench-security-certs-") as directory:
        certs = Path(directory)
        key_password = secrets.token_hex(16)  # made per run, like the certificates
        make_certificates(certs, key_password)
        results, tls = run(args, certs, key_password)
    text = table(results, tls, args)
    print(text)
    if not args.quick:
        write_results(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
