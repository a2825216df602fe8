"""The meta.properties of all of a node's log dirs, checked together (Kafka ``MetaPropertiesEnsemble``).

Rules (kafka-facts.md §5.1, KIP-1262):

* every file names the same ``cluster.id`` (where it names one) and the same ``node.id``;
* ``directory.id`` values are unique across the dirs and never reserved (``DirectoryId.reserved``);
* at start, a dir without meta.properties gets a V2 file (``node.id``, a fresh ``directory.id`` and the
  cluster id the other dirs carry, if any), and a V1/V2 file without ``directory.id`` gains one
  (Kafka's ``Copier``); only changed dirs are written.

Every refusal is one line naming the file, both values and what to do; nothing here touches a file.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import Enum

from pykraft.core.uuid import random_uuid, uuid_to_str
from pykraft.storage.meta_properties import (
    META_PROPERTIES_FILE,
    MetaProperties,
    MetaPropertiesError,
    MetaPropertiesVersion,
    is_reserved_directory_id,
)

__all__ = [
    "MetaPropertiesEnsemble",
    "VerificationFlag",
    "check_logged_cluster_id",
    "generate_directory_id",
    "meta_properties_path",
    "plan_cluster_id_writes",
    "plan_startup_writes",
]


def meta_properties_path(log_dir: str) -> str:
    return f"{log_dir.rstrip('/') or '/'}/{META_PROPERTIES_FILE}".replace("//", "/")


class VerificationFlag(Enum):
    REQUIRE_V0 = "REQUIRE_V0"
    REQUIRE_METADATA_LOG_DIR = "REQUIRE_METADATA_LOG_DIR"
    REQUIRE_AT_LEAST_ONE_VALID = "REQUIRE_AT_LEAST_ONE_VALID"


def generate_directory_id(rng: random.Random, taken: Collection[uuid.UUID]) -> uuid.UUID:
    """Kafka ``Copier.generateValidDirectoryId``: random, not reserved, not used by another dir.

    Drawn with ``random_uuid`` (Kafka ``Uuid.randomUuid``), so its text never starts with '-': the
    id is typed on command lines (``kafka-metadata-quorum remove-controller -d ID``), where a
    leading '-' reads as a flag."""
    while True:
        candidate = random_uuid(rng)
        if not is_reserved_directory_id(candidate) and candidate not in taken:
            return candidate


@dataclass(frozen=True)
class MetaPropertiesEnsemble:
    """What was read from each dir: nothing (``empty``), an error (with its reason), or properties."""

    empty_log_dirs: frozenset[str] = frozenset()
    error_log_dirs: Mapping[str, str] = field(default_factory=dict)
    log_dir_props: Mapping[str, MetaProperties] = field(default_factory=dict)
    metadata_log_dir: str | None = None

    @property
    def all_log_dirs(self) -> list[str]:
        return sorted({*self.empty_log_dirs, *self.error_log_dirs, *self.log_dir_props})

    def node_id(self) -> int | None:
        """The first node id found, in sorted dir order (Kafka ``nodeId()``)."""
        for log_dir in sorted(self.log_dir_props):
            if self.log_dir_props[log_dir].node_id is not None:
                return self.log_dir_props[log_dir].node_id
        return None

    def cluster_id(self) -> str | None:
        """The first cluster id found, in sorted dir order (Kafka ``clusterId()``)."""
        return self._cluster_id_and_dir()[0]

    def _cluster_id_and_dir(self) -> tuple[str | None, str | None]:
        for log_dir in sorted(self.log_dir_props):
            cluster_id = self.log_dir_props[log_dir].cluster_id
            if cluster_id is not None:
                return cluster_id, log_dir
        return None, None

    def directory_ids(self) -> set[uuid.UUID]:
        return {p.directory_id for p in self.log_dir_props.values() if p.directory_id is not None}

    def verify(
        self,
        expected_cluster_id: str | None = None,
        expected_node_id: int | None = None,
        flags: Collection[VerificationFlag] = (),
        *,
        expected_from: str | None = None,
    ) -> None:
        """Kafka ``MetaPropertiesEnsemble.verify``; raises :class:`MetaPropertiesError` with Kafka's
        wording plus where the expected value came from and what to do. ``expected_from`` names the
        source of ``expected_cluster_id``/``expected_node_id`` (e.g. "the configured node.id")."""
        if VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID in flags and not self.log_dir_props:
            raise MetaPropertiesError("No readable meta.properties files found.")
        cluster_source = expected_from if expected_cluster_id is not None else None
        node_source = expected_from if expected_node_id is not None else None
        seen_ids: dict[uuid.UUID, str] = {}
        for log_dir in sorted(self.log_dir_props):
            path = meta_properties_path(log_dir)
            meta = self.log_dir_props[log_dir]
            if VerificationFlag.REQUIRE_V0 in flags and meta.version is not MetaPropertiesVersion.V0:
                raise MetaPropertiesError(
                    f"Found unexpected version in {path}. ZK-based brokers that are not migrating only "
                    "support version 0 (which is implicit when the `version` field is missing)."
                )
            if meta.cluster_id is None:
                if meta.version.always_has_cluster_id:
                    raise MetaPropertiesError(f"cluster.id was not specified in the v1 file: {path}")
            elif expected_cluster_id is None:
                expected_cluster_id, cluster_source = meta.cluster_id, path
            elif meta.cluster_id != expected_cluster_id:
                raise MetaPropertiesError(
                    f"Invalid cluster.id in: {path}. Expected {expected_cluster_id}"
                    f"{f' (from {cluster_source})' if cluster_source else ''}, but read {meta.cluster_id}. "
                    "All log dirs of a node belong to one cluster: correct cluster.id in the file that is "
                    "wrong, or take the directory of the other cluster out of log.dirs/metadata.log.dir."
                )
            if meta.node_id is None:
                if meta.version.always_has_node_id:
                    raise MetaPropertiesError(f"node.id was not specified in {path}")
            elif expected_node_id is None:
                expected_node_id, node_source = meta.node_id, path
            elif meta.node_id != expected_node_id:
                raise MetaPropertiesError(
                    f"Stored node id {meta.node_id} in {path} doesn't match "
                    f"{node_source or 'previous node id'} {expected_node_id}. If you moved your data, make "
                    "sure your configured node id matches. If you intend to create a new node, you should "
                    "remove all data in your data directories."
                )
            if meta.directory_id is not None:
                if is_reserved_directory_id(meta.directory_id):
                    raise MetaPropertiesError(
                        f"Invalid reserved directory ID {uuid_to_str(meta.directory_id)} found in {log_dir}"
                    )
                previous = seen_ids.get(meta.directory_id)
                if previous is not None:
                    raise MetaPropertiesError(
                        f"Duplicate directory ID {uuid_to_str(meta.directory_id)} found. It was the directory "
                        f"ID of {previous}, and also of {log_dir}. Remove directory.id from one of the two "
                        "meta.properties files; a fresh one is written at the next start."
                    )
                seen_ids[meta.directory_id] = log_dir
        if VerificationFlag.REQUIRE_METADATA_LOG_DIR in flags and self.metadata_log_dir is None:
            raise MetaPropertiesError("No metadata log directory was specified.")
        if self.metadata_log_dir is not None and self.metadata_log_dir in self.error_log_dirs:
            raise MetaPropertiesError(
                f"Encountered I/O error in metadata log directory {self.metadata_log_dir}. Cannot continue."
            )


def plan_startup_writes(
    ensemble: MetaPropertiesEnsemble, node_id: int, rng: random.Random
) -> dict[str, MetaProperties]:
    """KIP-1262 start without formatting: check the ensemble against the configured ``node.id`` and
    return the meta.properties to write (only dirs whose file is missing or lacks a directory.id).

    Refuses (``MetaPropertiesError``) on any unreadable file — pykraft has no offline-dir handling, so
    an unreadable dir is not skipped — on a ZooKeeper-era V0 file, and on any disagreement.
    """
    if ensemble.error_log_dirs:
        log_dir = min(ensemble.error_log_dirs)
        raise MetaPropertiesError(
            f"Cannot read {meta_properties_path(log_dir)}: {ensemble.error_log_dirs[log_dir]}. Fix the file, "
            f"or take {log_dir} out of log.dirs/metadata.log.dir if it is not this node's data."
        )
    for log_dir in sorted(ensemble.log_dir_props):
        if ensemble.log_dir_props[log_dir].version is MetaPropertiesVersion.V0:
            raise MetaPropertiesError(
                f"{meta_properties_path(log_dir)} is a ZooKeeper-mode meta.properties (version 0) and pykraft "
                f"runs in KRaft mode only; take {log_dir} out of log.dirs/metadata.log.dir."
            )
    ensemble.verify(
        expected_node_id=node_id,
        flags={VerificationFlag.REQUIRE_METADATA_LOG_DIR},
        expected_from="the configured node.id",
    )
    cluster_id = ensemble.cluster_id()
    taken = ensemble.directory_ids()
    writes: dict[str, MetaProperties] = {}
    for log_dir in ensemble.all_log_dirs:
        existing = ensemble.log_dir_props.get(log_dir)
        if existing is None:
            directory_id = generate_directory_id(rng, taken)
            taken.add(directory_id)
            writes[log_dir] = MetaProperties(MetaPropertiesVersion.V2, cluster_id, node_id, directory_id)
            continue
        updated = existing
        if updated.directory_id is None:
            updated = updated.with_directory_id(generate_directory_id(rng, taken))
            assert updated.directory_id is not None
            taken.add(updated.directory_id)
        if updated.cluster_id is None and cluster_id is not None:
            # A crash while the publisher was persisting a discovered id left this file behind the others.
            updated = updated.with_cluster_id(cluster_id)
        if updated != existing:
            writes[log_dir] = updated
    return writes


def plan_cluster_id_writes(
    props_by_dir: Mapping[str, MetaProperties], known_cluster_id: str | None, discovered: str | None
) -> dict[str, MetaProperties]:
    """KIP-1262 discovery: the files to rewrite so that every meta.properties carries ``discovered``
    (the metadata image's cluster id) before it is exposed. A node that already knows another id
    refuses (``MetaPropertiesError``): the cluster id never changes."""
    if discovered is None:
        return {}
    if known_cluster_id is not None and known_cluster_id != discovered:
        raise MetaPropertiesError(
            f"The metadata log carries cluster id {discovered}, but this node's meta.properties files "
            f"({', '.join(meta_properties_path(d) for d in sorted(props_by_dir))}) carry {known_cluster_id}. "
            "The node refuses to join another cluster: point controller.quorum.voters at its own cluster, or "
            "use fresh log dirs to join this one."
        )
    return {d: m.with_cluster_id(discovered) for d, m in props_by_dir.items() if m.cluster_id != discovered}


def check_logged_cluster_id(
    ensemble: MetaPropertiesEnsemble, logged_cluster_id: str | None, metadata_log_location: str
) -> None:
    """A persisted cluster.id that differs from the metadata log's ClusterIdRecord: refuse (KIP-1262)."""
    persisted, log_dir = ensemble._cluster_id_and_dir()
    if persisted is None or logged_cluster_id is None or persisted == logged_cluster_id:
        return
    assert log_dir is not None
    raise MetaPropertiesError(
        f"Invalid cluster.id in: {meta_properties_path(log_dir)}. The metadata log {metadata_log_location} "
        f"belongs to cluster {logged_cluster_id}, but read {persisted}. If this data belongs to cluster "
        f"{logged_cluster_id}, set cluster.id={logged_cluster_id} in every meta.properties; otherwise point "
        "log.dirs/metadata.log.dir at this node's own directories."
    )
