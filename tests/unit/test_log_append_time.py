"""ProduceResponse's log_append_time_ms as Kafka's LogAppendInfo gives it (found by the differential
suite, issue 33): the stamped time on a LogAppendTime topic, a retried batch's max timestamp."""

from __future__ import annotations

from pykraft.core.errors import ErrorCode
from pykraft.protocol import compression
from pykraft.protocol.records import read_batch_header
from tests.unit.test_compression import NOW, batch, replicas_for


def test_create_time_appends_answer_no_append_time_and_a_retry_its_batchs_max_timestamp() -> None:
    replicas = replicas_for(t={})
    part = replicas.partitions[("t", 0)]
    first = batch(compression.NONE, producer_id=7, base_sequence=0)
    appended = replicas.append(part, memoryview(first), NOW + 5000)
    assert appended.error_code == ErrorCode.NONE and appended.log_append_time_ms == -1
    retry = replicas.append(part, memoryview(first), NOW + 9000)
    # UnifiedLog.append answers a duplicate with its BatchMetadata's timestamp: the batch's max timestamp
    assert (retry.base_offset, retry.log_append_time_ms) == (0, read_batch_header(first).max_timestamp)


def test_log_append_time_topics_answer_the_stamped_time() -> None:
    replicas = replicas_for(t={"message.timestamp.type": "LogAppendTime"})
    part = replicas.partitions[("t", 0)]
    assert (
        replicas.append(part, memoryview(batch(compression.NONE)), NOW + 5000).log_append_time_ms
        == NOW + 5000
    )
