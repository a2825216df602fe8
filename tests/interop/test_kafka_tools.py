"""The Kafka-shaped tools (issue 18) against one real node, run in-process through ``pykraft.cli.main``:
console producer -> console consumer with keys, headers and timestamps; get-offsets; consumer-groups
--reset-offsets (dry run vs execute, earliest, datetime, shift-by, clamping) and --delete-offsets on a
committed group; the perf tests' summary lines; metadata-quorum describe; dump-log on real segments;
and each tool's --help naming Kafka's options."""

from __future__ import annotations

import asyncio
import glob
import io
import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from pykraft.cli import main
from pykraft.client import Consumer, Producer
from pykraft.testing import RunningNode, running_node

OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
}
# Partition p of "orders" holds RECORDS records; record i has timestamp BASE_TS_MS + i seconds.
RECORDS = 10
BASE_TS_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node(overrides=OVERRIDES) as running:
        asyncio.run(_fill_orders(running.bootstrap_servers))
        yield running


async def _fill_orders(bootstrap: str) -> None:
    assert (
        main(
            ["topics", "--bootstrap-server", bootstrap, "--create", "--topic", "orders", "--partitions", "2"]
        )
        == 0
    )
    async with Producer(bootstrap) as producer:
        for p in range(2):
            for i in range(RECORDS):
                await producer.send(
                    "orders", b"order-%d-%d" % (p, i), partition=p, timestamp_ms=BASE_TS_MS + i * 1000
                )
        await producer.flush()


def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    async def commit() -> None:
        async with Consumer(bootstrap) as consumer:
            await consumer.commit(group, offsets)

    asyncio.run(commit())


def _committed(bootstrap: str, group: str, capsys: Any) -> dict[int, int | None]:
    assert (
        main(["consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, "--json"])
        == 0
    )
    (info,) = json.loads(capsys.readouterr().out)
    return {row["partition"]: row["current_offset"] for row in info["partitions"]}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


KAFKA_OPTIONS = {
    "topics": [
        "--bootstrap-server",
        "--command-config",
        "--list",
        "--describe",
        "--create",
        "--delete",
        "--alter",
        "--topic",
        "--partitions",
        "--replication-factor",
        "--config",
    ],
    "configs": [
        "--bootstrap-server",
        "--command-config",
        "--entity-type",
        "--entity-name",
        "--describe",
        "--alter",
        "--add-config",
        "--delete-config",
    ],
    "consumer-groups": [
        "--bootstrap-server",
        "--command-config",
        "--list",
        "--describe",
        "--reset-offsets",
        "--delete-offsets",
        "--delete",
        "--group",
        "--all-groups",
        "--topic",
        "--all-topics",
        "--to-earliest",
        "--to-latest",
        "--to-current",
        "--to-offset",
        "--shift-by",
        "--to-datetime",
        "--by-duration",
        "--from-file",
        "--dry-run",
        "--execute",
        "--export",
        "--members",
        "--offsets",
        "--state",
    ],
    "console-producer": [
        "--bootstrap-server",
        "--command-config",
        "--producer.config",
        "--topic",
        "--property",
        "--producer-property",
        "--request-required-acks",
        "--sync",
        "parse.key",
        "key.separator",
        "parse.headers",
    ],
    "console-consumer": [
        "--bootstrap-server",
        "--command-config",
        "--consumer.config",
        "--topic",
        "--group",
        "--partition",
        "--offset",
        "--from-beginning",
        "--max-messages",
        "--timeout-ms",
        "--property",
        "--consumer-property",
        "--isolation-level",
        "print.key",
        "print.headers",
        "print.timestamp",
    ],
    "get-offsets": [
        "--bootstrap-server",
        "--command-config",
        "--topic",
        "--partitions",
        "--time",
        "--exclude-internal-topics",
    ],
    "producer-perf-test": [
        "--bootstrap-server",
        "--command-config",
        "--producer.config",
        "--topic",
        "--num-records",
        "--record-size",
        "--payload-file",
        "--throughput",
        "--producer-props",
    ],
    "consumer-perf-test": [
        "--bootstrap-server",
        "--command-config",
        "--consumer.config",
        "--topic",
        "--messages",
        "--group",
        "--fetch-size",
        "--from-latest",
        "--timeout",
        "--show-detailed-stats",
        "--hide-header",
    ],
    "metadata-quorum": ["--bootstrap-server", "--bootstrap-controller", "--command-config", "describe"],
    "features": [
        "--bootstrap-server",
        "--bootstrap-controller",
        "--command-config",
        "describe",
        "upgrade",
        "downgrade",
        "disable",
    ],
    "dump-log": [
        "--files",
        "--print-data-log",
        "--deep-iteration",
        "--offsets-decoder",
        "--cluster-metadata-decoder",
    ],
}


@pytest.mark.parametrize("tool", sorted(KAFKA_OPTIONS))
def test_help_names_kafkas_options(tool: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        main([tool, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    missing = [option for option in KAFKA_OPTIONS[tool] if option not in text]
    assert not missing, f"{tool} --help lacks {missing}"
    if tool == "metadata-quorum":
        with pytest.raises(SystemExit):
            main([tool, "--bootstrap-controller", "h:1", "describe", "--help"])
        assert "--status" in capsys.readouterr().out


def test_console_producer_to_console_consumer_with_keys_headers_and_timestamps(
    node: RunningNode, capsys: Any, monkeypatch: Any
) -> None:
    bootstrap = node.bootstrap_servers
    assert (
        main(["topics", "--bootstrap-server", bootstrap, "--create", "--topic", "lines", "--partitions", "1"])
        == 0
    )
    # pykraft's parse.timestamp reads the consumer's print.timestamp column back (CreateTime: optional).
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("CreateTime:1000|trace:abc,tenant:t1|k1|hello world\n3000|h:v|null|no key\n")
    )
    produce = ["console-producer", "--bootstrap-server", bootstrap, "--topic", "lines"]
    props = [
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=|",
        "--property",
        "parse.headers=true",
        "--property",
        "headers.delimiter=|",
        "--property",
        "parse.timestamp=true",
        "--property",
        "null.marker=null",
    ]
    assert main([*produce, *props]) == 0
    # A line without the parts asked for: one line naming it, exit 1.
    monkeypatch.setattr("sys.stdin", io.StringIO("no separators here\n"))
    assert main([*produce, "--property", "parse.key=true"]) == 1
    assert capsys.readouterr().err.strip() == (
        "pykraft console-producer: No key separator found on line number 1: 'no separators here'"
    )
    consume = [
        "console-consumer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "lines",
        "--from-beginning",
        "--max-messages",
        "2",
        "--group",
        "readers",
    ]
    shown = [
        "--property",
        "print.timestamp=true",
        "--property",
        "print.key=true",
        "--property",
        "print.headers=true",
        "--property",
        "print.offset=true",
    ]
    assert main([*consume, *shown]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "CreateTime:1000\tOffset:0\ttrace:abc,tenant:t1\tk1\thello world",
        "CreateTime:3000\tOffset:1\th:v\tnull\tno key",
    ]
    assert out.err.strip() == "Processed a total of 2 messages"
    # The group committed what was printed; a second run from the committed offset sees nothing new.
    assert _committed(bootstrap, "readers", capsys) == {0: 2}
    assert main([*consume[:-4], "--group", "readers", "--timeout-ms", "300"]) == 0
    assert capsys.readouterr().out == ""
    # --partition/--offset: from offset 1 of partition 0, the value only (Kafka's default formatter).
    assert main([*consume[:4], "lines", "--partition", "0", "--offset", "1", "--max-messages", "1"]) == 0
    assert capsys.readouterr().out == "no key\n"
    assert main([*consume[:4], "lines", "--offset", "1"]) == 2
    assert "--offset: the partition is required" in capsys.readouterr().err
    assert main([*consume[:4], "lines", "--property", "print.nothing=true"]) == 2
    assert "--property print.nothing: not a formatter property" in capsys.readouterr().err


def test_get_offsets_latest_earliest_and_by_time(node: RunningNode, capsys: Any) -> None:
    base = ["get-offsets", "--bootstrap-server", node.bootstrap_servers, "--topic", "orders"]
    assert main(base) == 0
    assert capsys.readouterr().out.splitlines() == [f"orders:0:{RECORDS}", f"orders:1:{RECORDS}"]
    assert main([*base, "--time", "-2", "--partitions", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == ["orders:1:0"]
    assert main([*base, "--time", str(BASE_TS_MS + 4500)]) == 0
    assert capsys.readouterr().out.splitlines() == ["orders:0:5", "orders:1:5"]
    assert main([*base, "--time", str(BASE_TS_MS + 60_000)]) == 0  # after every record: no offset
    assert capsys.readouterr().out.splitlines() == ["orders:0:", "orders:1:"]
    assert main([*base, "--time", "max-timestamp", "--json"]) == 0
    assert [(r["offset"], r["timestamp"]) for r in json.loads(capsys.readouterr().out)] == [
        (RECORDS - 1, BASE_TS_MS + (RECORDS - 1) * 1000)
    ] * 2
    assert main([*base, "--time", "yesterday"]) == 2
    assert capsys.readouterr().err.startswith("pykraft get-offsets: --time: 'yesterday' is not -1/latest")
    assert main(["get-offsets", "--bootstrap-server", "nowhere", "--topic", "orders"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "pykraft get-offsets: --bootstrap-server: 'nowhere' is not HOST:PORT"
    )


def test_reset_offsets_and_delete_offsets_on_a_committed_group(node: RunningNode, capsys: Any) -> None:
    bootstrap = node.bootstrap_servers
    _commit(bootstrap, "billing", {("orders", 0): 7, ("orders", 1): 8})
    reset = ["consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", "billing"]

    # --dry-run plans and changes nothing.
    assert main([*reset, "--topic", "orders", "--to-earliest", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"GROUP\s+TOPIC\s+PARTITION\s+NEW-OFFSET", out)
    assert [line.split() for line in out.splitlines()[2:]] == [
        ["billing", "orders", "0", "0"],
        ["billing", "orders", "1", "0"],
    ]
    assert _committed(bootstrap, "billing", capsys) == {0: 7, 1: 8}
    # Neither flag: a dry run with Kafka's warning.
    assert main([*reset, "--all-topics", "--to-latest"]) == 0
    assert "WARN: No action will be performed as the --execute option is missing" in capsys.readouterr().err
    assert _committed(bootstrap, "billing", capsys) == {0: 7, 1: 8}

    assert main([*reset, "--topic", "orders", "--to-earliest", "--execute"]) == 0
    capsys.readouterr()
    assert _committed(bootstrap, "billing", capsys) == {0: 0, 1: 0}

    # --to-datetime: the first record at or after 4.5 s past the base is offset 5 (in any zone spelling).
    assert main([*reset, "--topic", "orders:0", "--to-datetime", _iso(BASE_TS_MS + 4500), "--execute"]) == 0
    assert (
        main(
            [
                *reset,
                "--topic",
                "orders:1",
                "--to-datetime",
                _iso(BASE_TS_MS + 2000)[:-1] + "+00:00",
                "--execute",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == [
        {"group": "billing", "topic": "orders", "partition": 1, "new_offset": 2}
    ]
    assert _committed(bootstrap, "billing", capsys) == {0: 5, 1: 2}

    # --shift-by from the committed offsets, kept inside [earliest, latest] with Kafka's warning.
    assert main([*reset, "--all-topics", "--shift-by", "-3", "--execute"]) == 0
    out = capsys.readouterr()
    assert (
        "New offset (-1) is lower than earliest offset for topic partition orders-1. Value will be set to 0"
        in out.err
    )
    assert _committed(bootstrap, "billing", capsys) == {0: 2, 1: 0}
    assert main([*reset, "--topic", "orders:0", "--shift-by", "100", "--execute", "--export"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"orders,0,{RECORDS}"]

    # Bad input: one line naming the flag and value, exit 2.
    assert main([*reset, "--all-topics", "--to-datetime", "last tuesday", "--execute"]) == 2
    assert capsys.readouterr().err.strip() == (
        "pykraft consumer-groups: --to-datetime: 'last tuesday' is not YYYY-MM-DDTHH:mm:SS.sss[+HH:MM]"
    )
    assert main([*reset, "--all-topics", "--execute"]) == 2
    assert "needs exactly one of --to-earliest" in capsys.readouterr().err

    # --delete-offsets for one partition: that row goes, the other stays.
    delete = ["consumer-groups", "--bootstrap-server", bootstrap, "--delete-offsets", "--group", "billing"]
    assert main([*delete, "--topic", "orders:1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Request succeed for deleting offsets with topic orders group billing")
    assert re.search(r"orders\s+1\s+Successful", out)
    assert _committed(bootstrap, "billing", capsys) == {0: RECORDS}
    assert main([*delete, "--topic", "orders"]) == 0
    capsys.readouterr()
    assert _committed(bootstrap, "billing", capsys) == {}

    # --list / --describe --state as tables.
    assert main(["consumer-groups", "--bootstrap-server", bootstrap, "--list"]) == 0
    assert "billing" in capsys.readouterr().out.split()
    assert (
        main(["groups", "--bootstrap-server", bootstrap, "--describe", "--group", "billing", "--state"]) == 0
    )
    out = capsys.readouterr().out
    assert re.search(r"billing\s+127\.0\.0\.1:\d+ \(1\)\s+Empty\s+0", out), out


def test_reset_is_refused_while_the_group_has_members(node: RunningNode, capsys: Any) -> None:
    from confluent_kafka import Consumer as ConfluentConsumer

    consumer = ConfluentConsumer(
        {"bootstrap.servers": node.bootstrap_servers, "group.id": "live", "session.timeout.ms": 6000}
    )
    consumer.subscribe(["orders"])
    try:
        for _ in range(100):
            consumer.poll(0.05)
            if consumer.assignment():
                break
        assert consumer.assignment()
        reset = [
            "consumer-groups",
            "--bootstrap-server",
            node.bootstrap_servers,
            "--reset-offsets",
            "--group",
            "live",
            "--all-topics",
            "--to-earliest",
            "--execute",
        ]
        assert main(reset) == 1
        assert capsys.readouterr().err.strip() == (
            "Error: Assignments can only be reset if the group 'live' is inactive, but the current state is "
            "Stable."
        )
        assert (
            main(
                [
                    "consumer-groups",
                    "--bootstrap-server",
                    node.bootstrap_servers,
                    "--describe",
                    "--group",
                    "live",
                    "--members",
                ]
            )
            == 0
        )
        assert re.search(r"live\s+rdkafka-\S+\s+/127\.0\.0\.1\s+rdkafka\s+2", capsys.readouterr().out)
    finally:
        consumer.close()


SUMMARY = re.compile(
    r"^(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg latency, "
    r"\d+\.\d\d ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)


def test_perf_tests_print_kafkas_summary_lines(node: RunningNode, capsys: Any) -> None:
    bootstrap = node.bootstrap_servers
    assert (
        main(
            [
                "producer-perf-test",
                "--topic",
                "perf",
                "--num-records",
                "3000",
                "--record-size",
                "100",
                "--throughput",
                "-1",
                "--producer-props",
                f"bootstrap.servers={bootstrap}",
                "acks=1",
                "linger.ms=2",
            ]
        )
        == 0
    )
    match = SUMMARY.match(capsys.readouterr().out.strip().splitlines()[-1])
    assert match is not None and match.group(1) == "3000"
    # Throttled: 200 records at 1000/s take about 0.2 s.
    assert (
        main(
            [
                "producer-perf-test",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                "perf",
                "--num-records",
                "200",
                "--record-size",
                "10",
                "--throughput",
                "1000",
            ]
        )
        == 0
    )
    assert SUMMARY.match(capsys.readouterr().out.strip())
    assert (
        main(
            [
                "consumer-perf-test",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                "perf",
                "--messages",
                "3200",
                "--timeout",
                "5000",
            ]
        )
        == 0
    )
    header, line = capsys.readouterr().out.splitlines()
    assert header == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    cells = line.split(", ")
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}$", cells[0]) and cells[4] == "3200"
    assert float(cells[2]) == pytest.approx((3000 * 100 + 200 * 10) / 1024 / 1024, abs=1e-4)
    assert (
        main(
            [
                "producer-perf-test",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                "perf",
                "--num-records",
                "1",
                "--throughput",
                "-1",
            ]
        )
        == 2
    )
    assert "give one of --record-size or --payload-file" in capsys.readouterr().err


def test_metadata_quorum_describe(node: RunningNode, capsys: Any) -> None:
    base = ["metadata-quorum", "--bootstrap-controller", node.controller_address, "describe"]
    assert main([*base, "--status"]) == 0
    fields = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines())
    assert [k for k in fields] == [
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ]
    assert fields["LeaderId"].strip() == "1" and int(fields["HighWatermark"]) > 0
    (voter,) = json.loads(fields["CurrentVoters"])
    assert voter["id"] == 1 and voter["endpoints"] == [f"CONTROLLER://{node.controller_address}"], voter
    assert (
        fields["MaxFollowerLag"].strip() == fields["MaxFollowerLagTimeMs"].strip() == "0"
    )  # the leader alone
    assert main([*base, "--replication"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert rows[1][0] == "1" and rows[1][-1] == "Leader"
    # The client listener serves it too (Kafka's brokers forward it to the active controller; a combined
    # node's controller is the quorum's only voter).
    server = ["metadata-quorum", "--bootstrap-server", node.bootstrap_servers, "describe"]
    assert main([*server, "--status"]) == 0
    by_server = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines())
    assert list(by_server) == list(fields) and by_server["CurrentVoters"] == fields["CurrentVoters"]
    assert by_server["ClusterId"] == fields["ClusterId"] and len(fields["ClusterId"].strip()) == 22
    assert by_server["LeaderId"].strip() == "1" and int(by_server["HighWatermark"]) >= int(
        fields["HighWatermark"]
    )
    assert main([*server, "--replication"]) == 0
    server_rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert server_rows[0] == rows[0] and server_rows[1][0] == "1" and server_rows[1][-1] == "Leader"


BATCH_LINE = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: -?\d+ lastSequence: -?\d+ "
    r"producerId: -?\d+ producerEpoch: -?\d+ partitionLeaderEpoch: \d+ isTransactional: false "
    r"isControl: false deleteHorizonMs: OptionalLong.empty position: (\d+) CreateTime: (\d+) size: (\d+) "
    r"magic: 2 compresscodec: none crc: \d+ isvalid: true$"
)


def test_dump_log_prints_segments_and_indexes_as_kafka(node: RunningNode, capsys: Any) -> None:
    segment = os.path.join(node.data_dir, "orders-0", "00000000000000000000")
    assert main(["dump-log", "--files", segment + ".log", "--print-data-log"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"Dumping {segment}.log", "Log starting offset: 0"]
    batches = [m for m in map(BATCH_LINE.match, lines) if m]
    assert sum(int(m.group(3)) for m in batches) == RECORDS
    records = [line for line in lines if line.startswith("| offset: ")]
    assert records[4] == (
        f"| offset: 4 CreateTime: {BASE_TS_MS + 4000} keySize: -1 valueSize: 9 sequence: 4 headerKeys: [] "
        "payload: order-0-4"
    )

    # Twenty batches of ~170 bytes with an index entry every 300 bytes: each entry names a batch's last
    # offset and where that batch starts in the .log.
    async def twenty_batches() -> None:
        async with Producer(node.bootstrap_servers, linger_ms=0) as producer:
            for i in range(20):
                await producer.send_and_wait("dumped", b"x" * 100, partition=0, key=b"k%d" % i)

    # A small segment.bytes rolls the segment, which writes its index (the active one's is written at
    # flush or roll).
    assert (
        main(
            [
                "topics",
                "--bootstrap-server",
                node.bootstrap_servers,
                "--create",
                "--topic",
                "dumped",
                "--partitions",
                "1",
                "--config",
                "segment.bytes=2048",
                "--config",
                "index.interval.bytes=300",
            ]
        )
        == 0
    )
    asyncio.run(twenty_batches())
    dumped = os.path.join(node.data_dir, "dumped-0", "00000000000000000000")
    assert main(["dump-log", "--files", f"{dumped}.log,{dumped}.index"]) == 0
    out = capsys.readouterr()
    by_position = {int(m.group(4)): int(m.group(2)) for m in map(BATCH_LINE.match, out.out.splitlines()) if m}
    assert len(by_position) >= 10
    entries = [
        tuple(map(int, m.groups())) for m in re.finditer(r"^offset: (\d+) position: (\d+)$", out.out, re.M)
    ]
    assert len(entries) >= 2 and all(by_position[position] == offset for offset, position in entries)
    assert "Mismatches" not in out.err

    _commit(node.bootstrap_servers, "dumper", {("orders", 0): 7})
    offsets = sorted(glob.glob(os.path.join(node.data_dir, "__consumer_offsets-0", "*.log")))
    assert main(["dump-log", "--files", offsets[0], "--offsets-decoder"]) == 0
    assert (
        ' key: {"type": "1", "data": {"group": "dumper", "topic": "orders", "partition": 0}} payload: {"version": "3", "data": {"offset": 7,'
        in capsys.readouterr().out
    )
    assert main(["dump-log", "--files", segment + ".nope"]) == 0
    assert capsys.readouterr().err.strip() == f"Ignoring unknown file {segment}.nope"
    assert main(["dump-log", "--files", "/nonexistent/00000000000000000000.log"]) == 2
    assert (
        "pykraft dump-log: --files: cannot read /nonexistent/00000000000000000000.log"
        in capsys.readouterr().err
    )


JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_alice="alice-secret";'
)


def test_command_config_reaches_a_sasl_listener(tmp_path: Any, capsys: Any, monkeypatch: Any) -> None:
    """--command-config's security.protocol and sasl.* drive both the admin connection (get-offsets) and
    pykraft's client (console producer and consumer); a wrong password is one line, exit 1."""
    sasl = {
        # The listener named PLAINTEXT speaks SASL_PLAINTEXT, as Kafka's protocol map allows.
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": JAAS,
    }
    client = tmp_path / "client.properties"
    client.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="alice-secret";\n'
    )
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(client.read_text().replace("alice-secret", "guess"))
    with running_node(overrides={**OVERRIDES, **sasl}) as node:
        secured = ["--bootstrap-server", node.bootstrap_servers, "--command-config", str(client)]
        assert main(["topics", *secured, "--create", "--topic", "s", "--partitions", "1"]) == 0
        monkeypatch.setattr("sys.stdin", io.StringIO("a:1\nb:2\n"))
        assert (
            main(
                [
                    "console-producer",
                    *secured,
                    "--topic",
                    "s",
                    "--property",
                    "parse.key=true",
                    "--property",
                    "key.separator=:",
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "console-consumer",
                    *secured,
                    "--topic",
                    "s",
                    "--from-beginning",
                    "--max-messages",
                    "2",
                    "--property",
                    "print.key=true",
                ]
            )
            == 0
        )
        assert main(["get-offsets", *secured, "--topic", "s"]) == 0
        assert capsys.readouterr().out.splitlines()[-3:] == ["a\t1", "b\t2", "s:0:2"]
        assert (
            main(
                [
                    "get-offsets",
                    "--bootstrap-server",
                    node.bootstrap_servers,
                    "--command-config",
                    str(wrong),
                    "--topic",
                    "s",
                ]
            )
            == 1
        )
        err = capsys.readouterr().err.strip()
        assert err.startswith("pykraft get-offsets: SASL authentication failed") and "\n" not in err
        assert (
            main(
                [
                    "console-consumer",
                    "--bootstrap-server",
                    node.bootstrap_servers,
                    "--command-config",
                    str(wrong),
                    "--topic",
                    "s",
                    "--max-messages",
                    "1",
                ]
            )
            == 1
        )
        assert "pykraft console-consumer: " in capsys.readouterr().err
