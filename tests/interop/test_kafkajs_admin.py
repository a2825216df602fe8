"""KafkaJS (its own pure-JavaScript codec) administers topics on pykraft (issue 17): create with configs,
describe them, alter them (KafkaJS sends AlterConfigs: the whole set is replaced) and add partitions;
`pykraft configs` and confluent-kafka agree with what it sees."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from pykraft.testing import RunningNode, running_node

pytestmark = pytest.mark.slow

KAFKAJS_VERSION = "2.2.4"
# Installed once per machine under the user's cache (npm registry), reused by later runs.
KAFKAJS_DIR = Path(
    os.environ.get("PYKRAFT_KAFKAJS_DIR", Path(tempfile.gettempdir()) / f"pykraft-kafkajs-{KAFKAJS_VERSION}")
)

SCRIPT = r"""
const { Kafka, ConfigResourceTypes, logLevel } = require('kafkajs')
const [bootstrap, step] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'kafkajs-admin', brokers: [bootstrap], logLevel: logLevel.NOTHING })
const admin = kafka.admin()
const topic = 'kjs'
// KafkaJS wraps per-topic errors in an aggregate: the first one's Kafka error name.
const errorType = e => (e.errors && e.errors[0] && e.errors[0].type) || e.type || String(e)
async function configs() {
  const described = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false,
  })
  const out = {}
  for (const entry of described.resources[0].configEntries) out[entry.configName] = entry.configValue
  return out
}
async function main() {
  await admin.connect()
  const result = {}
  if (step === 'create') {
    result.created = await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: 1, replicationFactor: 1,
                 configEntries: [{ name: 'retention.ms', value: '123456' }, { name: 'segment.bytes', value: '100000' }] }],
    })
    try {
      await admin.createTopics({ topics: [{ topic: 'kjs-bad', configEntries: [{ name: 'retention.ms', value: 'soon' }] }] })
      result.bad = 'accepted'
    } catch (e) { result.bad = errorType(e) }
  } else if (step === 'alter') {
    await admin.alterConfigs({ validateOnly: false, resources: [
      { type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'segment.bytes', value: '200000' }] },
    ] })
    await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] })
    try {
      await admin.createPartitions({ topicPartitions: [{ topic, count: 2 }] })
      result.shrink = 'accepted'
    } catch (e) { result.shrink = errorType(e) }
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
    result.partitions = metadata.topics[0].partitions.length
  }
  result.configs = await configs()
  await admin.disconnect()
  console.log(JSON.stringify(result))
}
main().catch(e => { console.error(e.stack || String(e)); process.exit(1) })
"""


@pytest.fixture(scope="module")
def kafkajs() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed for the KafkaJS tests")
    if not (KAFKAJS_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        installed = subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(KAFKAJS_DIR),
                "--no-audit",
                "--no-fund",
                f"kafkajs@{KAFKAJS_VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert installed.returncode == 0, installed.stderr
    script = KAFKAJS_DIR / "admin.js"
    script.write_text(SCRIPT)
    return script


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node() as running:
        yield running


def _kafkajs(script: Path, node: RunningNode, step: str) -> dict[str, object]:
    ran = subprocess.run(
        ["node", str(script), node.bootstrap_servers, step],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=script.parent,
    )
    assert ran.returncode == 0, ran.stderr
    result: dict[str, object] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def _pykraft_configs(node: RunningNode) -> str:
    described = subprocess.run(
        [sys.executable, "-m", "pykraft.cli", "configs", "--bootstrap-server", node.bootstrap_servers,
         "--entity-type", "topics", "--entity-name", "kjs", "--describe"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    return described.stdout


def test_kafkajs_creates_describes_alters_and_grows_a_topic(kafkajs: Path, node: RunningNode) -> None:
    created = _kafkajs(kafkajs, node, "create")
    assert created["created"] is True
    assert created["bad"] == "INVALID_CONFIG"
    configs = created["configs"]
    assert isinstance(configs, dict)
    assert (configs["retention.ms"], configs["segment.bytes"], configs["cleanup.policy"]) == (
        "123456",
        "100000",
        "delete",
    )
    dynamic = _pykraft_configs(node)
    assert "  retention.ms=123456 " in dynamic and "  segment.bytes=100000 " in dynamic

    altered = _kafkajs(kafkajs, node, "alter")
    assert altered["partitions"] == 3 and altered["shrink"] == "INVALID_PARTITIONS"
    configs = altered["configs"]
    assert isinstance(configs, dict)
    # AlterConfigs replaces the set: retention.ms, not named, is back to the default.
    assert (configs["segment.bytes"], configs["retention.ms"]) == ("200000", "604800000")
    dynamic = _pykraft_configs(node)
    assert "  segment.bytes=200000 " in dynamic and "retention.ms" not in dynamic
    admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "kjs")
    assert admin.describe_configs([resource])[resource].result(30)["segment.bytes"].value == "200000"
