"""Apache Kafka itself as the reference peer of the benchmarks (issue 33 item 5).

Kafka 4.3.1 (org.apache.kafka:kafka_2.13 and its dependencies, from Maven Central into ~/.m2 by
bench/kafka/pom.xml; no distribution download) runs as one KRaft node in combined mode
(process.roles=broker,controller, node.id=1): a PLAINTEXT listener and a CONTROLLER listener on free
127.0.0.1 ports, log.dirs in the peer's work dir. Its storage is formatted first
(`kafka.tools.StorageTool format --standalone`), as `kafka-storage.sh format` does, outside the start-up
clock: `Peer.prepare`. The JVM gets what `kafka-server-start.sh` gives it (-Xmx1g -Xms1g, G1 with its
pause settings); the only settings changed are those a single-node user changes (replication factors
of the internal topics 1, group.initial.rebalance.delay.ms=0). Flushing stays at Kafka's defaults: no
fsync per write (log.flush.interval.messages is unbounded; the page cache and replication carry
durability), as pykraft, which fsyncs the metadata log and a partition's segment only on roll and stop.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from bench.__main__ import Peer
from pykraft.testing import free_port

PROJECT = Path(__file__).resolve().parent / "kafka"
KAFKA_VERSION = "4.3.1"
# kafka-server-start.sh's KAFKA_HEAP_OPTS and kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS
JVM_OPTIONS = [
    "-Xmx1g",
    "-Xms1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]


def kafka_classpath() -> str:
    """Kafka's jars, copied to bench/kafka/target/lib by `mvn compile` (run again only when the pom
    changed); raises with one line when Java or Maven is missing."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"kafka peer: {tool} not found (Java 17 and Maven are needed)")
    target = PROJECT / "target"
    stamp = target / "pom.sha256"
    wanted = hashlib.sha256((PROJECT / "pom.xml").read_bytes()).hexdigest()
    if not (stamp.exists() and stamp.read_text() == wanted):
        built = subprocess.run(
            ["mvn", "-q", "-B", "-Dstyle.color=never", "compile"],
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if built.returncode != 0:
            raise RuntimeError(f"kafka peer: mvn compile in {PROJECT} failed:\n{built.stdout}{built.stderr}")
        stamp.write_text(wanted)
    return f"{target / 'lib'}/*"


def server_properties(workdir: str, port: int, controller_port: int) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            "controller.listener.names=CONTROLLER",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}",
            f"log.dirs={Path(workdir) / 'data'}",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "",
        ]
    )


def random_cluster_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def kafka_peer() -> Peer | None:
    """The peer, or None (with the reason on stderr) when Kafka's jars cannot be had, as Tansu's wheel."""
    try:
        classpath = kafka_classpath()
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"kafka: {exc}; skipping", file=sys.stderr)
        return None
    config_name = "server.properties"

    def prepare(port: int, workdir: str) -> None:
        config = Path(workdir) / config_name
        config.write_text(server_properties(workdir, port, free_port()))
        formatted = subprocess.run(
            ["java", "-cp", classpath, "kafka.tools.StorageTool", "format", "--standalone"]
            + ["-t", random_cluster_id(), "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka peer: storage format failed: {formatted.stdout}{formatted.stderr}")

    def command(_port: int, workdir: str) -> list[str]:
        return ["java", *JVM_OPTIONS, "-cp", classpath, "kafka.Kafka", str(Path(workdir) / config_name)]

    return Peer("kafka", command, prepare=prepare)
