"""pykraft: a Kafka-protocol-compatible streaming broker with a KRaft control plane."""

__version__ = "0.1.0"
