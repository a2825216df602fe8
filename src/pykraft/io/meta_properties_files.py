"""meta.properties on disk, and the KIP-1262 cluster-id publisher (the shell around ``pykraft.storage``).

* ``load_ensemble`` only reads: a startup that refuses changes nothing on disk.
* ``write_meta_properties`` is atomic: temp file, fsync, rename, fsync the directory.
* ``read_logged_cluster_id`` finds the ClusterIdRecord in ``__cluster_metadata-0`` without opening the
  log for writing (opening it would recover segments and drop temp files).
* ``ClusterIdPublisher`` is the single writer of a discovered cluster id: it persists the id into every
  meta.properties before any in-memory reader (Metadata responses, raft's cluster-id check) sees it.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterable, Iterator

from pykraft.core.uuid import random_uuid, uuid_to_str
from pykraft.io.raft_log import METADATA_PARTITION_DIR
from pykraft.metadata.records import (
    CLUSTER_ID_RECORD_API_KEY,
    METADATA_FRAME_VERSION,
    ClusterIdRecord,
    MetadataRecordError,
    decode_metadata_record,
)
from pykraft.protocol.records import BATCH_HEADER_SIZE, decode_records, read_batch_header, scan_batches
from pykraft.storage.ensemble import (
    MetaPropertiesEnsemble,
    check_logged_cluster_id,
    meta_properties_path,
    plan_cluster_id_writes,
    plan_startup_writes,
)
from pykraft.storage.meta_properties import (
    MetaProperties,
    MetaPropertiesError,
    format_meta_properties,
    parse_meta_properties,
)

log = logging.getLogger("pykraft.storage")

_READ_CHUNK_BYTES = 1 << 20
_CLUSTER_ID_FRAME = bytes((METADATA_FRAME_VERSION, CLUSTER_ID_RECORD_API_KEY, 0))


def node_log_dirs(log_dirs: Iterable[str], metadata_log_dir: str) -> list[str]:
    """Every dir that holds a meta.properties: ``log.dirs`` plus ``metadata.log.dir``, sorted, once each."""
    return sorted({*log_dirs, metadata_log_dir})


def load_ensemble(log_dirs: Iterable[str], metadata_log_dir: str) -> MetaPropertiesEnsemble:
    """Read (never write) meta.properties in every dir. A missing dir or file is empty; anything that
    cannot be read or parsed is an error with its reason (Kafka ``MetaPropertiesEnsemble.Loader``)."""
    empty: set[str] = set()
    errors: dict[str, str] = {}
    props: dict[str, MetaProperties] = {}
    for log_dir in node_log_dirs(log_dirs, metadata_log_dir):
        if os.path.exists(log_dir) and not os.path.isdir(log_dir):
            errors[log_dir] = f"{log_dir} is not a directory"
            continue
        path = meta_properties_path(log_dir)
        try:
            with open(path, encoding="latin-1") as fh:  # Properties.store writes ISO 8859-1 with \u escapes
                text = fh.read()
        except FileNotFoundError:
            empty.add(log_dir)
            continue
        except OSError as exc:
            errors[log_dir] = exc.strerror or str(exc)
            continue
        try:
            props[log_dir] = parse_meta_properties(text)
        except MetaPropertiesError as exc:
            errors[log_dir] = str(exc)
    return MetaPropertiesEnsemble(frozenset(empty), errors, props, metadata_log_dir)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_meta_properties(log_dir: str, meta: MetaProperties) -> None:
    """Atomically replace ``<log_dir>/meta.properties`` (Kafka ``PropertiesUtils.writePropertiesFile``)."""
    created = not os.path.isdir(log_dir)
    os.makedirs(log_dir, exist_ok=True)
    if created:
        _fsync_dir(os.path.dirname(os.path.abspath(log_dir)))
    path = meta_properties_path(log_dir)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="latin-1", newline="\n") as fh:
        fh.write(format_meta_properties(meta))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(log_dir)


# --- the metadata log, read only ------------------------------------------------------------------


def _file_batches(path: str) -> Iterator[bytes]:
    """Complete, CRC-valid batches of one segment or checkpoint file, read in chunks; stops at a torn tail."""
    with open(path, "rb") as fh:
        buf = bytearray()
        pos = 0
        eof = False
        while True:
            while len(buf) - pos >= BATCH_HEADER_SIZE:
                end = pos + read_batch_header(buf, pos).size_in_bytes
                if end > len(buf):
                    break
                batch = bytes(buf[pos:end])
                if not list(scan_batches(batch)):
                    return  # corrupt: recovery will truncate here
                yield batch
                pos = end
            if eof:
                return
            del buf[:pos]
            pos = 0
            chunk = fh.read(_READ_CHUNK_BYTES)
            eof = not chunk
            buf += chunk


def find_cluster_id(batches: Iterable[bytes]) -> str | None:
    """The first ClusterIdRecord's id among metadata-log batches (control batches skipped)."""
    for batch in batches:
        # The record value starts with the frame (frame version, api key, version: one byte each here);
        # a C-speed substring test skips the batches that cannot hold a ClusterIdRecord v0.
        if read_batch_header(batch).is_control or _CLUSTER_ID_FRAME not in batch:
            continue
        try:
            records = decode_records(batch)
        except ValueError:
            return None
        for record in records:
            value = record.value
            # The frame is uvarints: frame version, api key, version; both small numbers are one byte.
            if value is None or value[:3] != _CLUSTER_ID_FRAME:
                continue
            try:
                message = decode_metadata_record(value).message
            except MetadataRecordError:
                continue
            if isinstance(message, ClusterIdRecord):
                return str(message.cluster_id)
    return None


def read_logged_cluster_id(metadata_log_dir: str) -> str | None:
    """The cluster id the metadata log carries (snapshots first, then segments), or None."""
    partition_dir = os.path.join(metadata_log_dir, METADATA_PARTITION_DIR)
    try:
        names = os.listdir(partition_dir)
    except (FileNotFoundError, NotADirectoryError):
        return None
    files = sorted(n for n in names if n.endswith(".checkpoint")) + sorted(
        n for n in names if n.endswith(".log")
    )
    for name in files:
        found = find_cluster_id(_file_batches(os.path.join(partition_dir, name)))
        if found is not None:
            return found
    return None


# --- startup and the publisher --------------------------------------------------------------------


class ClusterIdConflictError(Exception):
    """The metadata log names another cluster than meta.properties does; one line, both ids."""


class ClusterIdPublisher:
    """KIP-1262 metadata publisher: persist a discovered cluster id everywhere, then expose it.

    ``cluster_id`` is the in-memory value readers use; it is set only after every meta.properties
    carries it. A cluster id that meta.properties already held (formatted, or learned before) is
    exposed from the start, and the publisher never writes a different one.
    """

    def __init__(self, props_by_dir: dict[str, MetaProperties]) -> None:
        self._props = dict(props_by_dir)
        known = sorted({p.cluster_id for p in self._props.values() if p.cluster_id is not None})
        assert len(known) <= 1, f"the startup check lets one cluster id through, not {known}"
        self.cluster_id: str | None = known[0] if known else None

    @property
    def props_by_dir(self) -> dict[str, MetaProperties]:
        return dict(self._props)

    def activation_cluster_id(self, rng: random.Random) -> str:
        """The id the first active controller writes: the persisted one, else a fresh Kafka Uuid
        (22 characters, never reserved, never starting with '-'; kafka-facts.md §5.2)."""
        return self.cluster_id if self.cluster_id is not None else uuid_to_str(random_uuid(rng))

    def publish(self, discovered: str | None) -> str | None:
        """Called with each new image's cluster id before the image reaches any reader."""
        try:
            writes = plan_cluster_id_writes(self._props, self.cluster_id, discovered)
        except MetaPropertiesError as exc:
            raise ClusterIdConflictError(str(exc)) from None
        for log_dir, meta in sorted(writes.items()):
            write_meta_properties(log_dir, meta)
            self._props[log_dir] = meta
        if discovered is not None and self.cluster_id is None:
            log.info("cluster id %s persisted to %d meta.properties file(s)", discovered, len(writes))
            self.cluster_id = discovered
        return self.cluster_id


def prepare_log_dirs(
    log_dirs: Iterable[str], metadata_log_dir: str, node_id: int, rng: random.Random
) -> ClusterIdPublisher:
    """Node start, before anything else touches the data dirs: read and check every meta.properties
    and the metadata log's cluster id; only when all agree, write the missing files (V2) and return
    the publisher. Raises ``MetaPropertiesError`` (one line; nothing written) otherwise."""
    ensemble = load_ensemble(log_dirs, metadata_log_dir)
    writes = plan_startup_writes(ensemble, node_id, rng)
    if ensemble.cluster_id() is not None:
        # Only a persisted id can disagree with the log; without one the publisher learns the log's.
        check_logged_cluster_id(
            ensemble,
            read_logged_cluster_id(metadata_log_dir),
            os.path.join(metadata_log_dir, METADATA_PARTITION_DIR),
        )
    for log_dir, meta in sorted(writes.items()):
        write_meta_properties(log_dir, meta)
        log.info("wrote %s: %s", meta_properties_path(log_dir), meta)
    return ClusterIdPublisher({**ensemble.log_dir_props, **writes})
