"""``meta.properties``: the identity file at the root of every log dir (kafka-facts.md §5.1).

Kafka ``MetaProperties`` / ``MetaPropertiesVersion`` with KIP-1262's V2 (Kafka N, PR #21547):

| version | written by                          | node id        | cluster id |
|---------|-------------------------------------|----------------|------------|
| 0       | ZooKeeper-era brokers (``broker.id``) | optional       | optional   |
| 1       | ``kafka-storage format`` (KRaft)      | ``node.id``, required | required |
| 2       | KIP-1262: start without formatting  | ``node.id``, required | optional (learned from the log) |

``directory.id`` (a 22-character Kafka Uuid) may appear in any version; pykraft always writes one.
Cluster ids are arbitrary strings, so ``my@cluster@id`` round-trips.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from enum import IntEnum

from pykraft.core.uuid import uuid_from_str, uuid_to_str
from pykraft.storage.java_properties import PropertiesSyntaxError, load_properties, store_properties

__all__ = [
    "BROKER_ID_PROP",
    "CLUSTER_ID_PROP",
    "DIRECTORY_ID_PROP",
    "META_PROPERTIES_FILE",
    "NODE_ID_PROP",
    "VERSION_PROP",
    "MetaProperties",
    "MetaPropertiesError",
    "MetaPropertiesVersion",
    "format_meta_properties",
    "is_reserved_directory_id",
    "parse_meta_properties",
]

META_PROPERTIES_FILE = "meta.properties"
VERSION_PROP = "version"
CLUSTER_ID_PROP = "cluster.id"
BROKER_ID_PROP = "broker.id"
NODE_ID_PROP = "node.id"
DIRECTORY_ID_PROP = "directory.id"


class MetaPropertiesError(ValueError):
    """A meta.properties that cannot be read or an ensemble that does not agree; one line, Kafka's words."""


def is_reserved_directory_id(directory_id: uuid.UUID) -> bool:
    """Kafka ``DirectoryId.reserved``: msb == 0 and lsb < 100 (MIGRATING 0, UNASSIGNED 1, LOST 2, ...)."""
    return directory_id.int >> 64 == 0 and (directory_id.int & ((1 << 64) - 1)) < 100


class MetaPropertiesVersion(IntEnum):
    V0 = 0
    V1 = 1
    V2 = 2

    @classmethod
    def from_number_string(cls, text: str) -> MetaPropertiesVersion:
        stripped = text.strip()
        if not stripped.lstrip("+-").isdigit():
            raise MetaPropertiesError(f"Invalid meta.properties version string '{text}'")
        return cls.from_number(int(stripped))

    @classmethod
    def from_number(cls, number: int) -> MetaPropertiesVersion:
        try:
            return cls(number)
        except ValueError:
            raise MetaPropertiesError(f"Unknown meta.properties version number {number}") from None

    @property
    def number_string(self) -> str:
        return str(int(self))

    @property
    def has_broker_id(self) -> bool:
        """V0 names the node ``broker.id``; later versions ``node.id``."""
        return self is MetaPropertiesVersion.V0

    @property
    def always_has_node_id(self) -> bool:
        return self is not MetaPropertiesVersion.V0

    @property
    def always_has_cluster_id(self) -> bool:
        # KIP-1262: V2 makes the cluster id optional (it is learned from the ClusterIdRecord).
        return self is MetaPropertiesVersion.V1


@dataclass(frozen=True, slots=True)
class MetaProperties:
    version: MetaPropertiesVersion
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: uuid.UUID | None = None

    def __post_init__(self) -> None:
        # Kafka MetaProperties.Builder.build().
        if self.version.always_has_cluster_id and self.cluster_id is None:
            raise MetaPropertiesError("cluster.id was not found.")
        if self.version.always_has_node_id and (self.node_id is None or self.node_id < 0):
            raise MetaPropertiesError("node.id was not found.")

    def with_directory_id(self, directory_id: uuid.UUID) -> MetaProperties:
        return replace(self, directory_id=directory_id)

    def with_cluster_id(self, cluster_id: str) -> MetaProperties:
        return replace(self, cluster_id=cluster_id)

    def to_properties(self) -> dict[str, str]:
        """Kafka's ``toProperties``, in its order: version, cluster.id, node.id/broker.id, directory.id."""
        props = {VERSION_PROP: self.version.number_string}
        if self.cluster_id is not None:
            props[CLUSTER_ID_PROP] = self.cluster_id
        if self.node_id is not None:
            props[BROKER_ID_PROP if self.version.has_broker_id else NODE_ID_PROP] = str(self.node_id)
        if self.directory_id is not None:
            props[DIRECTORY_ID_PROP] = uuid_to_str(self.directory_id)
        return props

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> MetaProperties:
        """Kafka ``MetaProperties.Builder(Properties)``: a missing ``version`` means 0."""
        version = MetaPropertiesVersion.from_number_string(props.get(VERSION_PROP, "0"))
        node_key = BROKER_ID_PROP if version.has_broker_id else NODE_ID_PROP
        node_id: int | None = None
        raw_node = props.get(node_key)
        if raw_node is not None:
            text = raw_node.strip()
            if not text.lstrip("-").isdigit():
                raise MetaPropertiesError(f"Unable to read {node_key} as a base-10 number: '{raw_node}'")
            node_id = int(text)
        directory_id: uuid.UUID | None = None
        raw_dir = props.get(DIRECTORY_ID_PROP)
        if raw_dir is not None:
            try:
                directory_id = uuid_from_str(raw_dir)
            except ValueError:
                raise MetaPropertiesError(f"{DIRECTORY_ID_PROP}: '{raw_dir}' is not a Kafka Uuid") from None
        return cls(version, props.get(CLUSTER_ID_PROP), node_id, directory_id)

    def __str__(self) -> str:
        """Kafka's ``toString``: absent parts are omitted."""
        parts = [f"version={int(self.version)}"]
        if self.cluster_id is not None:
            parts.append(f"clusterId={self.cluster_id}")
        if self.node_id is not None:
            parts.append(f"nodeId={self.node_id}")
        if self.directory_id is not None:
            parts.append(f"directoryId={uuid_to_str(self.directory_id)}")
        return f"MetaProperties({', '.join(parts)})"


def parse_meta_properties(text: str) -> MetaProperties:
    """A meta.properties file's text -> MetaProperties; raises :class:`MetaPropertiesError`."""
    try:
        props = load_properties(text)
    except PropertiesSyntaxError as exc:
        raise MetaPropertiesError(str(exc)) from None
    return MetaProperties.from_properties(props)


def format_meta_properties(meta: MetaProperties) -> str:
    """The text pykraft writes; Kafka's ``Properties.store`` shape without the date comment."""
    return store_properties(meta.to_properties(), comments=("Written by pykraft",))
