"""Kafka's own Java client (org.apache.kafka:kafka-clients 4.x) against pykraft (issue 33): the idempotent
and transactional producers (sendOffsetsToTransaction, abort, fenceProducers), classic and
``group.protocol=consumer`` consumers reading read_committed, and every Admin call pykraft serves, on
one node, on a 3-controller + 3-broker cluster, and (ACLs) on a node with SASL/PLAIN and the
StandardAuthorizer.

tests/java/JavaClientChecks.java prints one JSON line per check, ``{"check", "ok", "ms", "detail"}``;
each check here is one test, so a failure names the check and shows its detail. The program is built
with Maven (dependencies from Maven Central into ~/.m2, reused by later runs) only when its sources
changed: tests/java/target holds the classes and the hash of the sources they came from."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pykraft.testing import free_port, running_node
from tests.interop.cluster_support import three_by_three
from tests.interop.maven_build import java_command, maven_classpath
from tests.interop.test_restart import _start_server, _stop_server

pytestmark = pytest.mark.slow

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
MAIN_CLASS = "pykraft.JavaClientChecks"

OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}

# What each run of the program checks, in its order of output.
PLAIN_CHECKS = [
    "admin.describeCluster",
    "admin.describeCluster(authorizedOperations)",
    "admin.describeFeatures",
    "admin.createTopics",
    "admin.listTopics",
    "admin.describeTopics",
    "admin.createPartitions",
    "admin.describeConfigs(topic)",
    "admin.incrementalAlterConfigs(topic)",
    "admin.describeConfigs(broker)",
    "admin.incrementalAlterConfigs(broker)",
    "producer.idempotent",
    "producer.compression",
    "admin.listOffsets",
    "admin.describeProducers",
    "consumer.classic",
    "consumer.groupProtocolConsumer",
    "consumer.groupProtocolConsumer(regex)",
    "admin.listGroups",
    "admin.listConsumerGroups",
    "admin.describeConsumerGroups",
    "admin.describeClassicGroups",
    "admin.describeConsumerGroups(authorizedOperations)",
    "admin.deleteConsumerGroups(not empty)",
    "admin.listConsumerGroupOffsets",
    "admin.alterConsumerGroupOffsets",
    "admin.deleteConsumerGroupOffsets",
    "admin.removeMembersFromConsumerGroup",
    "admin.deleteConsumerGroups",
    "admin.describeTransactions(ongoing)",
    "admin.listTransactions",
    "admin.describeProducers(in a transaction)",
    "producer.transactional.commit",
    "producer.transactional.abort",
    "consumer.readCommitted",
    "admin.fenceProducers",
    "admin.abortTransaction",
    "admin.deleteRecords",
    "admin.electLeaders",
    "admin.describeLogDirs",
    "admin.describeUserScramCredentials/alterUserScramCredentials",
    "admin.describeAcls(no authorizer)",
    "admin.deleteTopics",
]
SECURED_CHECKS = [
    "admin.createTopics(secured)",
    "producer.denied",
    "admin.createAcls",
    "admin.describeAcls",
    "producer.allowed",
    "admin.deleteAcls",
    "producer.deniedAgain",
    "admin.createTopics(no DescribeConfigs)",
]
TARGETS = {"node": PLAIN_CHECKS, "cluster": PLAIN_CHECKS, "secured": SECURED_CHECKS}

# Where pykraft still answers differently from Kafka: strict, so each turns red once fixed.
XFAIL: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="session")
def java_classpath() -> str:
    return maven_classpath(JAVA_DIR)


@dataclass
class Verdicts:
    by_check: dict[str, dict[str, Any]]
    stderr: str
    returncode: int


def _run_checks(classpath: str, suite: str, bootstrap: str, brokers: int, *properties: str) -> Verdicts:
    ran = subprocess.run(
        java_command(classpath, MAIN_CLASS, suite, bootstrap, str(brokers), *properties),
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    lines = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    for v in lines:  # shown with -s, or by a failing test's captured output
        print(f"{suite} {bootstrap}: {v['check']:<60} {'ok' if v['ok'] else 'FAILED':<6} {v['ms']:>6} ms")
    return Verdicts({v["check"]: v for v in lines}, ran.stderr, ran.returncode)


@pytest.fixture(scope="module")
def node_verdicts(java_classpath: str) -> Iterator[Verdicts]:
    with running_node(overrides=OVERRIDES) as node:
        yield _run_checks(java_classpath, "plain", node.bootstrap_servers, 1)


@pytest.fixture(scope="module")
def cluster_verdicts(java_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Verdicts]:
    with three_by_three(tmp_path_factory, "java-cluster", OVERRIDES) as cluster:
        verdicts = _run_checks(java_classpath, "plain", cluster.bootstrap_servers, 3)
        failed = [name for name, v in verdicts.by_check.items() if not v["ok"]]
        if failed:
            print(cluster.logs())
        yield verdicts


JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def secured_verdicts(java_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Verdicts]:
    """A node with SASL/PLAIN users admin (a super user) and alice, and Kafka's StandardAuthorizer."""
    directory = tmp_path_factory.mktemp("java-secured")
    port, controller = free_port(), free_port()
    config = directory / "server.properties"
    config.write_text(
        f"node.id=1\nprocess.roles=broker,controller\n"
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n"
        f"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        f"controller.quorum.voters=1@127.0.0.1:{controller}\nlog.dirs={directory / 'data'}\n"
        f"sasl.enabled.mechanisms=PLAIN\nlistener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
    )
    proc = _start_server(str(config), port)
    try:
        yield _run_checks(
            java_classpath,
            "secured",
            f"127.0.0.1:{port}",
            1,
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=PLAIN",
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="admin" password="admin-secret";',
        )
    finally:
        _stop_server(proc)


def _cases() -> list[Any]:
    cases = []
    for target, checks in TARGETS.items():
        for check in checks:
            reason = XFAIL.get((target, check))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(target, check, marks=marks, id=f"{target}-{check}"))
    return cases


@pytest.mark.parametrize(("target", "check"), _cases())
def test_java_client(target: str, check: str, request: pytest.FixtureRequest) -> None:
    verdicts: Verdicts = request.getfixturevalue(f"{target}_verdicts")
    verdict = verdicts.by_check.get(check)
    assert verdict is not None, (
        f"the Java program printed no verdict for {check} (exit {verdicts.returncode}):\n"
        + verdicts.stderr[-4000:]
    )
    assert verdict["ok"], f"{check} ({verdict['ms']} ms): {verdict['detail']}\n" + verdicts.stderr[-4000:]


@pytest.mark.parametrize("target", list(TARGETS))
def test_java_program_checks_what_this_file_lists(target: str, request: pytest.FixtureRequest) -> None:
    verdicts: Verdicts = request.getfixturevalue(f"{target}_verdicts")
    assert list(verdicts.by_check) == TARGETS[target], verdicts.stderr[-4000:]
    assert verdicts.returncode == 0, verdicts.stderr[-4000:]
