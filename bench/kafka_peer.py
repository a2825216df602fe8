"""Apache Kafka itself as the reference peer of the benchmarks (issue 33 item 5).

Kafka 4.3.1 (org.apache.kafka:kafka_2.13 and its dependencies, from Maven Central into ~/.m2 by
bench/kafka_jars/pom.xml; no distribution download) runs as one KRaft node in combined mode
(process.roles=broker,controller, node.id=1), or as three such nodes with a static quorum
(`running_kafka_cluster`, bench.latency's RF=3 column): a PLAINTEXT listener and a CONTROLLER listener on
free 127.0.0.1 ports, log.dirs in the work dir. Storage is formatted first (`kafka.tools.StorageTool
format`), as `kafka-storage.sh format` does, outside the start-up clock: `Peer.prepare`. The JVM gets
what `kafka-server-start.sh` gives it (-Xmx1g -Xms1g, G1 with its pause settings); the only settings
changed are those a single-node user changes (replication factors of the internal topics 1,
group.initial.rebalance.delay.ms=0). Flushing stays at Kafka's defaults: no fsync per write
(log.flush.interval.messages is unbounded; the page cache and replication carry durability), as pykraft,
which fsyncs the metadata log before a record commits and a partition's segments at a clean stop.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from tests.interop.maven_build import MavenError, maven_build

from bench.__main__ import Peer
from pykraft.testing import free_port

PROJECT = Path(__file__).resolve().parent / "kafka_jars"
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
    """Kafka's jars, copied to bench/kafka_jars/target/lib by `mvn compile` (run again only when the pom
    changed; tests.interop.maven_build); raises MavenError with one line when Java or Maven is missing."""
    return f"{maven_build(PROJECT) / 'lib'}/*"


def server_properties(
    workdir: str, port: int, controller_port: int, *, node_id: int = 1, voters: str | None = None
) -> str:
    """One combined node's settings: a single node bootstraps its own quorum (``--standalone``) and gets
    replication factor 1 for the internal topics; a node of a cluster gets the static ``voters``
    (controller.quorum.voters) and Kafka's default factors (3, min.insync.replicas 2)."""
    single = voters is None
    quorum = (
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}"
        if single
        else f"controller.quorum.voters={voters}"
    )
    single_node = [
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
    ]
    return "\n".join(
        [
            "process.roles=broker,controller",
            f"node.id={node_id}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            "controller.listener.names=CONTROLLER",
            quorum,
            f"log.dirs={Path(workdir) / 'data'}",
            *(single_node if single else []),
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
    except (MavenError, subprocess.TimeoutExpired) as exc:
        print(f"kafka: {exc}; skipping", file=sys.stderr)
        return None
    config_name = "server.properties"

    def prepare(port: int, workdir: str) -> None:
        config = Path(workdir) / config_name
        config.write_text(server_properties(workdir, port, free_port()))
        format_storage(classpath, config, random_cluster_id(), standalone=True)

    def command(_port: int, workdir: str) -> list[str]:
        return server_command(classpath, Path(workdir) / config_name)

    return Peer("kafka", command, prepare=prepare)


def format_storage(classpath: str, config: Path, cluster_id: str, *, standalone: bool) -> None:
    """`kafka-storage.sh format`: ``--standalone`` bootstraps a one-voter quorum; without it the static
    controller.quorum.voters of ``config`` are the quorum."""
    formatted = subprocess.run(
        ["java", "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)]
        + (["--standalone"] if standalone else []),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if formatted.returncode != 0:
        raise RuntimeError(f"kafka: storage format of {config} failed: {formatted.stdout}{formatted.stderr}")


def server_command(classpath: str, config: Path) -> list[str]:
    return ["java", *JVM_OPTIONS, "-cp", classpath, "kafka.Kafka", str(config)]


@dataclass
class KafkaCluster:
    bootstrap_servers: str
    pids: dict[int, int]  # node id -> the JVM's pid (bench.replication reads their CPU time)


@contextlib.contextmanager
def running_kafka_cluster(nodes: int = 3) -> Iterator[KafkaCluster]:
    """``nodes`` combined Kafka nodes (each broker and controller) with a static quorum of all of them,
    Kafka's default replication settings; yields once every broker is registered, stops them all. One
    node is the single node of `kafka_peer` (a ``--standalone`` quorum, factor 1 for the internal topics:
    the differential tests' reference broker)."""
    classpath = kafka_classpath()
    workdir = Path(tempfile.mkdtemp(prefix="bench-kafka-cluster-"))
    ports = {node_id: (free_port(), free_port()) for node_id in range(1, nodes + 1)}
    single = nodes == 1
    voters = (
        None
        if single
        else ",".join(f"{node_id}@127.0.0.1:{controller}" for node_id, (_, controller) in ports.items())
    )
    cluster_id = random_cluster_id()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        configs = []
        for node_id, (port, controller) in ports.items():
            node_dir = workdir / f"node-{node_id}"
            node_dir.mkdir()
            config = node_dir / "server.properties"
            config.write_text(
                server_properties(str(node_dir), port, controller, node_id=node_id, voters=voters)
            )
            format_storage(classpath, config, cluster_id, standalone=single)
            configs.append(config)
        for config in configs:
            procs.append(
                subprocess.Popen(
                    server_command(classpath, config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )
        bootstrap = ",".join(f"127.0.0.1:{port}" for port, _ in ports.values())
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})  # quiet while the JVMs start
        deadline = time.monotonic() + 120
        while True:
            try:  # the JVMs take seconds to listen: a transport failure until then
                if len(admin.list_topics(timeout=10).brokers) == nodes:
                    break
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka cluster: {nodes} brokers never registered")
            time.sleep(0.2)
        yield KafkaCluster(bootstrap, {node_id: proc.pid for node_id, proc in zip(ports, procs, strict=True)})
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
