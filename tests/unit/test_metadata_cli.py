"""``pykraft metadata dump|image`` over files laid out as Apache Kafka writes them.

The batches here are built by kafka-python's DefaultRecordBatchBuilder (an implementation independent
of pykraft's), one of them gzip-compressed, with the control bit and partitionLeaderEpoch set and the
CRC-32C recomputed by hand, as Kafka's MemoryRecordsBuilder lays them out. A RegisterControllerRecord
(api key 27, which pykraft does not model) sits in the log as Kafka 3.7+ writes one.
"""

from __future__ import annotations

import json
import struct
import uuid

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from pykraft.cli import main
from pykraft.core.uuid import uuid_to_str
from pykraft.metadata.records import (
    ApiMessageAndVersion,
    ClusterIdRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    TopicRecord,
    encode_metadata_record,
)
from pykraft.raft.control import LeaderChangeMessage, encode_leader_change

TOPIC_ID = uuid.UUID(int=0x1234)


def kafka_batch(
    base_offset: int,
    epoch: int,
    records: list[tuple[bytes | None, bytes]],
    control: bool = False,
    gzip: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 1 if gzip else 0, False, -1, -1, -1, 1 << 20)
    for index, (key, value) in enumerate(records):
        builder.append(index, 1700000000000, key, value, [])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, epoch)
    if control:
        (attributes,) = struct.unpack_from(">h", data, 21)
        struct.pack_into(">h", data, 21, attributes | 0x20)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def framed(message: object, version: int = 0) -> bytes:
    return encode_metadata_record(ApiMessageAndVersion.of(message, version))


def partition(pid: int) -> bytes:
    record = PartitionRecord(
        partition_id=pid,
        topic_id=TOPIC_ID,
        replicas=[1],
        isr=[1],
        removing_replicas=[],
        adding_replicas=[],
        leader=1,
        leader_recovery_state=0,
        leader_epoch=3,
        partition_epoch=0,
        directories=[uuid.UUID(int=0)],
    )
    return framed(record, 1)


# RegisterControllerRecord v0 body: ControllerId int32, IncarnationId uuid, ZkMigrationReady bool,
# EndPoints (compact array, empty), Features (compact array, empty), tagged fields.
REGISTER_CONTROLLER = b"\x01\x1b\x00" + struct.pack(">i", 1) + b"\x00" * 16 + b"\x00\x01\x01\x00"


@pytest.fixture
def kafka_dir(tmp_path):
    meta = tmp_path / "__cluster_metadata-0"
    meta.mkdir()
    snapshot = (
        kafka_batch(
            0, 2, [(struct.pack(">hh", 0, 3), struct.pack(">hq", 0, 1700000000123) + b"\x00")], control=True
        )
        + kafka_batch(
            1,
            2,
            [
                (None, framed(FeatureLevelRecord(name="metadata.version", feature_level=21))),
                (None, framed(ClusterIdRecord(cluster_id="MkU3OEVBNTcwNTJENDM2Qg"))),
                (None, framed(TopicRecord(name="orders", topic_id=TOPIC_ID))),
                (None, partition(0)),
            ],
            gzip=True,
        )
        + kafka_batch(
            5, 2, [(None, framed(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=3000)))]
        )
        + kafka_batch(6, 2, [(struct.pack(">hh", 0, 4), b"\x00\x00\x00")], control=True)
    )
    (meta / "00000000000000000007-0000000002.checkpoint").write_bytes(snapshot)
    change = encode_leader_change(LeaderChangeMessage(1, (1,), (1,)))
    log = (
        kafka_batch(0, 2, [(struct.pack(">hh", 0, 2), change)], control=True)
        + kafka_batch(1, 2, [(None, framed(TopicRecord(name="old", topic_id=uuid.UUID(int=9))))] * 6)
        + kafka_batch(7, 2, [(None, REGISTER_CONTROLLER), (None, partition(1))])
    )
    (meta / "00000000000000000000.log").write_bytes(log)
    return meta


def test_dump_snapshot__text_lists_every_record_with_control_records(kafka_dir, capsys) -> None:
    assert (
        main(
            ["metadata", "dump", "--snapshot", str(kafka_dir / "00000000000000000007-0000000002.checkpoint")]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 7
    assert lines[0].startswith("offset=0 epoch=2 control SnapshotHeaderRecord")
    assert "last_contained_log_timestamp=1700000000123" in lines[0]
    assert 'TopicRecord v0 name="orders"' in lines[3] and uuid_to_str(TOPIC_ID) in lines[3]
    assert lines[5].startswith("offset=5 epoch=2 ProducerIdsRecord") and "next_producer_id=3000" in lines[5]
    assert "control SnapshotFooterRecord" in lines[6]


def test_dump_log__json_one_object_per_line_unknown_kafka_record_shown(kafka_dir, capsys) -> None:
    assert main(["metadata", "dump", "--log", str(kafka_dir), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["offset"] for r in rows] == list(range(9))
    assert rows[0]["type"] == "LeaderChangeMessage" and rows[0]["control"] is True
    assert rows[0]["fields"]["leader_id"] == 1
    assert rows[7]["type"] == "RegisterControllerRecord" and rows[7]["api_key"] == 27
    assert "error" not in rows[7] and rows[7]["fields"]["raw"].startswith("011b00")
    assert rows[8]["type"] == "PartitionRecord" and rows[8]["fields"]["leader_epoch"] == 3


def test_image__latest_snapshot_then_log_tail(kafka_dir, capsys) -> None:
    assert main(["metadata", "image", "--dir", str(kafka_dir), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cluster_id"] == "MkU3OEVBNTcwNTJENDM2Qg"
    assert summary["next_producer_id"] == 3000
    assert summary["topics"] == {"orders": {"topic_id": uuid_to_str(TOPIC_ID), "partitions": 2}}
    assert summary["log_records"] == 1  # offset 8; the older log is covered by the snapshot
    assert summary["skipped"] == {"RegisterControllerRecord": 1}
    assert main(["metadata", "image", "--dir", str(kafka_dir)]) == 0
    text = capsys.readouterr().out
    assert "topics: 1 (2 partitions)" in text and "next producer id: 3000" in text


def test_errors__one_line_naming_the_file(tmp_path, capsys) -> None:
    missing = tmp_path / "nope.checkpoint"
    assert main(["metadata", "dump", "--snapshot", str(missing)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(missing) in err[0]
    torn = tmp_path / "00000000000000000001-0000000001.checkpoint"
    torn.write_bytes(kafka_batch(0, 1, [(None, b"\x01\x14\x00\x00")])[:-3])
    assert main(["metadata", "dump", "--snapshot", str(torn)]) == 1
    assert "not a whole valid batch" in capsys.readouterr().err
    assert main(["metadata", "image", "--dir", str(tmp_path / "none")]) == 1
    assert "not a directory" in capsys.readouterr().err
