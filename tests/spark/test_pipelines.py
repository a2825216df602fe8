"""``pykraft pipeline pid-audit`` and ``eos-verify``: clean data passes, planted violations are caught."""

from __future__ import annotations

import os
import shutil
from typing import Any

from pykraft.cli import main
from pykraft.metadata.records import ApiMessageAndVersion, ProducerIdsRecord, encode_metadata_record
from pykraft.protocol.records import Record, build_batch, scan_batches, set_base_offset
from pykraft.spark.audit import Allocation, check_allocations
from pykraft.testing import running_node
from tests.spark.helpers import create_topic, produce


def _last_segment(directory: str) -> str:
    return os.path.join(directory, sorted(f for f in os.listdir(directory) if f.endswith(".log"))[-1])


def _next_offset(segment: str) -> int:
    with open(segment, "rb") as fh:
        data = fh.read()
    return max(h.next_offset for _pos, h in scan_batches(data))


def _append_producer_ids_record(metadata_dir: str, next_id: int) -> None:
    segment = _last_segment(os.path.join(metadata_dir, "__cluster_metadata-0"))
    value = encode_metadata_record(
        ApiMessageAndVersion.of(ProducerIdsRecord(broker_id=1, broker_epoch=7, next_producer_id=next_id))
    )
    batch = build_batch(
        [Record(None, value)],
        base_offset=_next_offset(segment),
        timestamp_ms=1_800_000_000_000,
        partition_leader_epoch=1,
    )
    with open(segment, "ab") as fh:
        fh.write(batch)


def test_pid_audit_passes_clean_logs_and_catches_an_overlapping_block(
    spark: Any, tmp_path: Any, capsys: Any
) -> None:
    data = str(tmp_path / "node")
    with running_node(data) as node:  # an idempotent producer makes the broker allocate a block
        create_topic(node.bootstrap_servers, "t", 1)
        produce(node.bootstrap_servers, "t", [(None, b"v", None, None)])
    out = str(tmp_path / "audit")
    assert main(["pipeline", "pid-audit", "--metadata-dir", data, "--out", out]) == 0
    text = capsys.readouterr().out
    assert "OK: no violations" in text
    blocks = spark.read.parquet(os.path.join(out, "producer_id_blocks.parquet")).collect()
    assert [(b.kind, b.broker_id, b.first_id, b.last_id) for b in blocks if b.kind == "log"] == [
        ("log", 1, 0, 999)
    ]
    assert all(b.append_time_ms > 0 and b.leader_epoch >= 1 for b in blocks)
    with open(os.path.join(out, "producer_id_blocks.png"), "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"

    planted = str(tmp_path / "planted")
    shutil.copytree(data, planted)
    _append_producer_ids_record(planted, 2000)  # a clean next block [1000, 1999]
    assert main(["pipeline", "pid-audit", "--metadata-dir", planted, "--out", out]) == 0
    _append_producer_ids_record(planted, 2500)  # [1500, 2499] overlaps [1000, 1999]
    capsys.readouterr()
    assert main(["pipeline", "pid-audit", "--metadata-dir", planted, "--out", out]) == 1
    text = capsys.readouterr().out
    assert "VIOLATIONS (1)" in text and "block [1500, 2499] for broker 1 overlaps" in text
    assert main(["pipeline", "pid-audit", "--metadata-dir", str(tmp_path / "nope")]) == 2


def test_check_allocations_rules() -> None:
    def row(offset: int, next_id: int, kind: str = "log") -> Allocation:
        return Allocation("f", kind, offset, 1, 0, 1, 1, next_id - 1000, next_id - 1, next_id)

    assert check_allocations([row(1, 1000), row(5, 2000), row(9, 5000)]) == []  # gaps are allowed
    assert "does not increase" in check_allocations([row(1, 2000), row(5, 2000)])[0]
    assert "does not increase" in check_allocations([row(1, 3000), row(5, 2000)])[0]
    assert check_allocations([row(1, 2000), row(9, 2000, "snapshot"), row(12, 3000)]) == []
    assert (
        "snapshot says next producer id 1000"
        in check_allocations([row(1, 2000), row(9, 1000, "snapshot")])[0]
    )
    assert "overlaps" in check_allocations([row(1, 2000, "snapshot"), row(12, 2500)])[0]


def test_eos_verify_passes_clean_topics_and_catches_duplicates_and_losses(
    spark: Any, tmp_path: Any, capsys: Any
) -> None:
    data = str(tmp_path / "node")
    values = [f"m{i}" for i in range(1000)]
    expected = tmp_path / "expected.txt"
    expected.write_text("\n".join(values) + "\n")
    out = str(tmp_path / "eos")
    with running_node(data) as node:
        create_topic(node.bootstrap_servers, "eos", 2)
        produce(
            node.bootstrap_servers, "eos", [(None, v.encode(), i % 2, None) for i, v in enumerate(values)]
        )
        args = ["pipeline", "eos-verify", "--topic", "eos", "--out", out, "--expected", str(expected)]
        assert main([*args, "--bootstrap-server", node.bootstrap_servers]) == 0
    assert "OK: no violations" in capsys.readouterr().out
    assert main([*args, "--data-dir", data]) == 0

    # A duplicated batch: the last batch of partition 0 written again at the next offset.
    planted = str(tmp_path / "planted")
    shutil.copytree(data, planted)
    segment = _last_segment(os.path.join(planted, "eos-0"))
    with open(segment, "rb") as fh:
        content = fh.read()
    pos, header = list(scan_batches(content))[-1]
    dup = bytearray(content[pos : pos + header.size_in_bytes])
    set_base_offset(dup, 0, header.next_offset)
    with open(segment, "ab") as fh:
        fh.write(dup)
    capsys.readouterr()
    assert main([*args, "--data-dir", planted]) == 1
    text = capsys.readouterr().out
    assert (
        f"partition 0 producer {header.producer_id} epoch 0: {header.record_count} duplicated record(s)"
        in text
    )

    # A lost record: expected but never produced.
    expected.write_text("\n".join([*values, "never-sent"]) + "\n")
    assert main([*args, "--data-dir", data]) == 1
    assert "1 expected record(s) never arrived, e.g. ['never-sent']" in capsys.readouterr().out


def test_pid_audit_reads_real_snapshots_next_to_the_log(spark: Any, tmp_path: Any, capsys: Any) -> None:
    """A node with a tiny snapshot trigger leaves .checkpoint files (KIP-630); the audit reads them
    too, where the latest block appears with broker -1 as Kafka writes it."""
    from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

    from tests.raw_client import RawClient

    data = str(tmp_path / "node")
    overrides = {"metadata.log.max.record.bytes.between.snapshots": "300"}
    with running_node(data, overrides=overrides) as node, RawClient(node.bootstrap_servers) as client:
        ids = 0
        while ids < 2500:  # three blocks of 1000 (KIP-730)
            resp = client.request(
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000),
                InitProducerIdResponse,
                4,
            )
            ids += resp.error_code == 0
        create_topic(node.bootstrap_servers, "after-blocks", 1)
    snapshots = [
        f for f in os.listdir(os.path.join(data, "__cluster_metadata-0")) if f.endswith(".checkpoint")
    ]
    assert snapshots
    out = str(tmp_path / "audit")
    assert main(["pipeline", "pid-audit", "--metadata-dir", data, "--out", out]) == 0
    assert "OK: no violations" in capsys.readouterr().out
    blocks = spark.read.parquet(os.path.join(out, "producer_id_blocks.parquet")).collect()
    log_blocks = sorted((b.first_id, b.last_id) for b in blocks if b.kind == "log")
    assert log_blocks[:3] == [(0, 999), (1000, 1999), (2000, 2999)]
    assert any(b.kind == "snapshot" and b.broker_id == -1 for b in blocks)
