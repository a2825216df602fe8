"""dump-log --offsets-decoder reads KIP-848 consumer group records (keys 3-8) as Kafka's decoder does."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from pykraft.cli import main
from pykraft.coordinator import consumer_group_records as cg
from pykraft.protocol.records import Record, build_batch


def test_offsets_decoder_prints_consumer_group_records(tmp_path: Path, capsys: Any) -> None:
    topic_id = uuid.UUID(int=7)
    records = [
        Record(cg.encode_key(cg.ConsumerGroupKey(cg.METADATA_KEY, "g")), cg.encode_epoch_value(4)),
        Record(
            cg.encode_key(cg.ConsumerGroupKey(cg.CURRENT_MEMBER_ASSIGNMENT_KEY, "g", "m1")),
            cg.encode_current_assignment_value(
                cg.CurrentAssignmentValue(4, 3, 0, {topic_id: frozenset({0, 2})}, {})
            ),
        ),
        Record(cg.encode_key(cg.ConsumerGroupKey(cg.MEMBER_METADATA_KEY, "g", "m1")), None),
    ]
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(bytes(build_batch(records, timestamp_ms=1)))
    assert main(["dump-log", "--files", str(segment), "--offsets-decoder"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if " key: " in line]
    assert len(lines) == 3
    assert (
        ' key: {"type": "3", "data": {"groupId": "g"}} payload: {"version": "0", "data": {"epoch": 4}}'
        in lines[0]
    )
    payload = json.loads(lines[1].split(" payload: ", 1)[1])
    assert payload["data"]["memberEpoch"] == 4
    assert payload["data"]["assignedPartitions"] == [{"topicId": str(topic_id), "partitions": [0, 2]}]
    assert lines[2].endswith(
        ' key: {"type": "5", "data": {"groupId": "g", "memberId": "m1"}} payload: <DELETE>'
    )
