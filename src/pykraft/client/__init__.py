"""pykraft's own asyncio Kafka client: a producer implementing the client side of KIP-360 (epoch bumps,
sequences fixed at send, abortable vs fatal errors) and KIP-758 (DUPLICATE_SEQUENCE_NUMBER as success, a
large in-flight window), transactional or idempotent, and a small assign()-style consumer with
read_committed.

    async with Producer("127.0.0.1:9092", transactional_id="t1") as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send("events", b"value", key=b"key")
        await producer.send_offsets_to_transaction({("in", 0): 42}, "my-group")
        await producer.commit_transaction()
"""

from pykraft.client.consumer import Consumer, ConsumerRecord, committed_records
from pykraft.client.errors import (
    ConnectionLost,
    DeliveryError,
    KafkaClientError,
    ProducerFencedError,
    TransactionAbortableError,
)
from pykraft.client.producer import Producer, RecordMetadata

__all__ = [
    "ConnectionLost",
    "Consumer",
    "ConsumerRecord",
    "DeliveryError",
    "KafkaClientError",
    "Producer",
    "ProducerFencedError",
    "RecordMetadata",
    "TransactionAbortableError",
    "committed_records",
]
