"""``pykraft storage format``, pure: what to write, or why not (Kafka ``Formatter``, kafka-facts.md §5.4-5.5).

KIP-1262 makes formatting optional: a node that was never formatted writes meta.properties V2 at start and
the first active controller mints the cluster id. Formatting remains for fixing the cluster id up front
(``--cluster-id``). Without ``--cluster-id`` the file is V2 with no ``cluster.id``, which needs a
metadata.version that carries the ClusterIdRecord.

pykraft decisions (the KIP's MetadataVersion is not shipped, kafka-facts.md §9.5):

* ClusterIdRecord support starts at 3.6-IV1, the first level with metadata transactions (KIP-868),
  because pykraft writes the ClusterIdRecord inside the bootstrap transaction so that a bootstrap cut
  short by a failover is aborted whole.
* pykraft bootstraps one metadata.version (``BOOTSTRAP_RELEASE``); its ``bootstrap.checkpoint``
  (written by ``--add-scram``) carries only SCRAM credentials, never a metadata.version, so another
  ``--release-version`` is refused instead of being ignored.
"""

from __future__ import annotations

import base64
import binascii
import random
from dataclasses import dataclass

from pykraft.security.scram import (
    ScramCredential,
    ScramMechanism,
    check_iterations,
    credential_from_salted_password,
    salted_password,
)
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
    # ``--add-scram`` arguments, e.g. ``SCRAM-SHA-512=[name=alice,password=alice-secret]``.
    add_scram: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FormatPlan:
    writes: dict[str, MetaProperties]
    # What the tool prints, in order (Kafka's "Formatting ... with metadata.version ...").
    lines: tuple[str, ...]
    # SCRAM credentials for the metadata dir's bootstrap.checkpoint (the first controller writes them).
    scram_credentials: tuple[tuple[str, ScramMechanism, ScramCredential], ...] = ()


# Kafka ScramParser's default when ``iterations`` is left out.
ADD_SCRAM_DEFAULT_ITERATIONS = 4096
ADD_SCRAM_SALT_BYTES = 32


def parse_add_scram(text: str, rng: random.Random) -> tuple[str, ScramMechanism, ScramCredential]:
    """One ``--add-scram`` argument (Kafka ``ScramParser``): ``MECHANISM=[name=N,password=P]`` with
    optional ``iterations=I`` and ``salt=<base64>``, or ``saltedpassword=<base64>`` with ``salt``."""
    flag = "--add-scram"
    mechanism_name, sep, rest = text.partition("=")
    mechanism = ScramMechanism.from_mechanism_name(mechanism_name)
    if not sep:
        raise FormatterError(f"{flag}: {text!r} is not MECHANISM=[name=...,password=...]")
    if mechanism is ScramMechanism.UNKNOWN:
        raise FormatterError(
            f"{flag}: unknown SCRAM mechanism {mechanism_name!r} (SCRAM-SHA-256 or SCRAM-SHA-512)"
        )
    rest = rest.strip()
    if not (rest.startswith("[") and rest.endswith("]")):
        raise FormatterError(f"{flag}: expected [key=value,...] after {mechanism_name}=")
    options: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest[1:-1].split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or key not in ("name", "password", "salt", "saltedpassword", "iterations"):
            raise FormatterError(
                f"{flag}: unknown option {key!r} (name, password, salt, saltedpassword, iterations)"
            )
        options[key] = value.strip().strip('"')
    name = options.get("name")
    if not name:
        raise FormatterError(f"{flag}: you must supply 'name' to add-scram")
    if ("password" in options) == ("saltedpassword" in options):
        raise FormatterError(f"{flag}: supply exactly one of 'password' or 'saltedpassword' for {name}")
    try:
        iterations = int(options.get("iterations", ADD_SCRAM_DEFAULT_ITERATIONS))
    except ValueError:
        raise FormatterError(f"{flag}: iterations {options['iterations']!r} is not a number") from None
    too = check_iterations(iterations)
    if too is not None:
        raise FormatterError(f"{flag}: {too}")
    try:
        salt = (
            base64.b64decode(options["salt"], validate=True)
            if "salt" in options
            else rng.randbytes(ADD_SCRAM_SALT_BYTES)
        )
        if "saltedpassword" in options:
            if "salt" not in options:
                raise FormatterError(f"{flag}: 'saltedpassword' needs the 'salt' it was made with")
            salted = base64.b64decode(options["saltedpassword"], validate=True)
        else:
            salted = salted_password(mechanism, options["password"], salt, iterations)
    except binascii.Error:
        raise FormatterError(f"{flag}: salt and saltedpassword are base64") from None
    return name, mechanism, credential_from_salted_password(mechanism, salt, salted, iterations)


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
            f"--release-version: pykraft bootstraps metadata.version {BOOTSTRAP_RELEASE} only; "
            f"leave --release-version out or pass {BOOTSTRAP_RELEASE}"
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
    scram = tuple(parse_add_scram(text, rng) for text in request.add_scram)
    if scram and request.metadata_log_dir not in ensemble.empty_log_dirs:
        raise FormatterError(
            f"--add-scram: the metadata directory {request.metadata_log_dir} is already formatted; "
            "SCRAM credentials of a running cluster are added with `pykraft scram add`"
        )
    for log_dir in sorted(ensemble.empty_log_dirs):
        directory_id = generate_directory_id(rng, taken)
        taken.add(directory_id)
        writes[log_dir] = MetaProperties(
            MetaPropertiesVersion.V2, request.cluster_id, request.node_id, directory_id
        )
        kind = "metadata directory" if log_dir == request.metadata_log_dir else "data directory"
        lines.append(f"Formatting {kind} {log_dir} with metadata.version {release}.")
    return FormatPlan(writes, tuple(lines), scram)
