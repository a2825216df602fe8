"""``pykraft storage format``, pure: what to write, or why not (Kafka ``Formatter``, kafka-facts.md §5.4-5.5).

KIP-1262 makes formatting optional: a node that was never formatted writes meta.properties V2 at start and
the first active controller mints the cluster id. Formatting remains for fixing the cluster id up front
(``--cluster-id``). Without ``--cluster-id`` the file is V2 with no ``cluster.id``, which needs a
metadata.version that carries the ClusterIdRecord.

pykraft decisions (the KIP's MetadataVersion is not shipped, kafka-facts.md §9.5):

* ClusterIdRecord support starts at 3.6-IV1, the first level with metadata transactions (KIP-868),
  because pykraft writes the ClusterIdRecord inside the bootstrap transaction so that a bootstrap cut
  short by a failover is aborted whole.
* pykraft bootstraps one metadata.version (``BOOTSTRAP_RELEASE``); it does not write Kafka's
  ``bootstrap.checkpoint`` yet, so another ``--release-version`` is refused instead of being ignored.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pykraft.storage.ensemble import MetaPropertiesEnsemble, generate_directory_id, meta_properties_path
from pykraft.storage.meta_properties import MetaProperties, MetaPropertiesError, MetaPropertiesVersion

__all__ = [
    "BOOTSTRAP_RELEASE",
    "CLUSTER_ID_RECORD_MIN_LEVEL",
    "RELEASE_VERSIONS",
    "FormatPlan",
    "FormatRequest",
    "FormatterError",
    "plan_format",
    "resolve_release_version",
]

# metadata.version feature levels pykraft knows (mirrors metadata.records.MetadataVersion, one layer up;
# tests/unit/test_storage_format.py keeps the two in step). Short forms name a release's last level.
RELEASE_VERSIONS: dict[str, int] = {
    "3.3-IV3": 7,
    "3.3": 7,
    "3.4-IV0": 8,
    "3.4": 8,
    "3.6-IV1": 13,
    "3.7-IV2": 17,
    "3.9-IV0": 21,
    "3.9": 21,
}
BOOTSTRAP_RELEASE = "3.9-IV0"
CLUSTER_ID_RECORD_MIN_LEVEL = 13


class FormatterError(Exception):
    """One line naming the flag or directory; the tool exits 1 (Kafka ``FormatterException``)."""


@dataclass(frozen=True, slots=True)
class FormatRequest:
    node_id: int
    process_roles: tuple[str, ...]
    voter_ids: frozenset[int]
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    cluster_id: str | None = None
    release_version: str | None = None
    standalone: bool = False
    ignore_formatted: bool = False


@dataclass(frozen=True, slots=True)
class FormatPlan:
    writes: dict[str, MetaProperties]
    # What the tool prints, in order (Kafka's "Formatting ... with metadata.version ...").
    lines: tuple[str, ...]


def resolve_release_version(release_version: str | None) -> tuple[str, int]:
    if release_version is None:
        return BOOTSTRAP_RELEASE, RELEASE_VERSIONS[BOOTSTRAP_RELEASE]
    level = RELEASE_VERSIONS.get(release_version.strip())
    if level is None:
        known = ", ".join(k for k in RELEASE_VERSIONS if "-IV" in k)
        raise FormatterError(
            f"--release-version: unknown metadata.version {release_version!r}; pykraft knows {known}"
        )
    return release_version.strip(), level


def _check_request(request: FormatRequest) -> str:
    if "controller" not in request.process_roles and "broker" not in request.process_roles:
        raise FormatterError(
            "process.roles: formatting is only supported for nodes in KRaft mode (broker and/or controller)"
        )
    if request.node_id < 0:
        raise FormatterError(f"node.id: {request.node_id} is negative")
    if not request.log_dirs:
        raise FormatterError("log.dirs: no directories to format")
    if request.cluster_id is not None and not request.cluster_id.strip():
        # Raft answers an empty cluster id with INCONSISTENT_CLUSTER_ID (kafka-facts.md §5.6).
        raise FormatterError(
            "--cluster-id: the cluster id must not be empty (see `pykraft storage random-uuid`)"
        )
    release, level = resolve_release_version(request.release_version)
    if request.cluster_id is None and level < CLUSTER_ID_RECORD_MIN_LEVEL:
        raise FormatterError(
            f"--release-version: metadata.version {release} does not support the ClusterIdRecord (KIP-1262), "
            "so the first controller cannot write the cluster id: pass --cluster-id (see `pykraft storage "
            "random-uuid`) or a release version of 3.6-IV1 or later"
        )
    if level != RELEASE_VERSIONS[BOOTSTRAP_RELEASE]:
        raise FormatterError(
            f"--release-version: pykraft bootstraps metadata.version {BOOTSTRAP_RELEASE} only (it writes no "
            f"bootstrap.checkpoint yet); leave --release-version out or pass {BOOTSTRAP_RELEASE}"
        )
    if request.standalone:
        if "controller" not in request.process_roles:
            raise FormatterError(
                f"--standalone: node {request.node_id} has no controller role (process.roles="
                f"{','.join(request.process_roles)}); only a controller can be a standalone voter"
            )
        others = sorted(request.voter_ids - {request.node_id})
        if others:
            raise FormatterError(
                f"--standalone: controller.quorum.voters also lists {others}; a standalone controller is the "
                "only voter (leave out --standalone for a static quorum)"
            )
    return release


def plan_format(request: FormatRequest, ensemble: MetaPropertiesEnsemble, rng: random.Random) -> FormatPlan:
    """What ``format`` writes into each unformatted dir: meta.properties V2 with ``node.id``, a fresh
    unique ``directory.id`` and ``cluster.id`` when given. Raises :class:`FormatterError`."""
    release = _check_request(request)
    formatted = sorted(ensemble.log_dir_props)
    if formatted and not request.ignore_formatted:
        raise FormatterError(
            f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to ignore this "
            "directory and format the others."
        )
    try:
        ensemble.verify(request.cluster_id, request.node_id, expected_from="the requested value")
    except MetaPropertiesError as exc:
        raise FormatterError(str(exc)) from None
    lines: list[str] = [
        f"Skipping {log_dir}: cannot read {meta_properties_path(log_dir)}: {reason}"
        for log_dir, reason in sorted(ensemble.error_log_dirs.items())
    ]
    if not ensemble.empty_log_dirs:
        if not ensemble.log_dir_props:
            raise FormatterError("No available log directories to format.")
        return FormatPlan({}, (*lines, "All of the log directories are already formatted."))
    taken = ensemble.directory_ids()
    writes: dict[str, MetaProperties] = {}
    for log_dir in sorted(ensemble.empty_log_dirs):
        directory_id = generate_directory_id(rng, taken)
        taken.add(directory_id)
        writes[log_dir] = MetaProperties(
            MetaPropertiesVersion.V2, request.cluster_id, request.node_id, directory_id
        )
        kind = "metadata directory" if log_dir == request.metadata_log_dir else "data directory"
        lines.append(f"Formatting {kind} {log_dir} with metadata.version {release}.")
    return FormatPlan(writes, tuple(lines))
