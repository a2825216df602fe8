"""``pykraft storage info``, pure: each dir's meta.properties and every problem (Kafka ``StorageTool.info``).

Kafka's output shape ("Found log directories:", "Found metadata: {...}", "Found problems:"), with one
"Found metadata" line per dir, because with KIP-1262 the dirs of one node can differ legitimately for a
moment (a dir not written yet, a cluster id not learned yet). An unformatted dir is not a problem any
more: the node writes meta.properties V2 at its first start.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from pykraft.storage.ensemble import MetaPropertiesEnsemble, check_logged_cluster_id, meta_properties_path
from pykraft.storage.meta_properties import MetaPropertiesError, MetaPropertiesVersion

__all__ = ["StorageInfo", "describe_storage"]


@dataclass(frozen=True, slots=True)
class StorageInfo:
    lines: tuple[str, ...]
    problems: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0

    def text(self) -> str:
        out = list(self.lines)
        if self.problems:
            out.append("Found problem:" if len(self.problems) == 1 else "Found problems:")
            out.extend(f"  {p}" for p in self.problems)
            out.append("")
        return "\n".join(out) + "\n"


def describe_storage(
    ensemble: MetaPropertiesEnsemble,
    existing_dirs: Collection[str],
    logged_cluster_id: str | None,
    metadata_log_location: str,
) -> StorageInfo:
    dirs = ensemble.all_log_dirs
    if not dirs:
        return StorageInfo(("No directories specified.",), ())
    problems: list[str] = []
    lines: list[str] = []
    found = [d for d in dirs if d in existing_dirs]
    if found:
        lines.append("Found log directory:" if len(found) == 1 else "Found log directories:")
        lines.extend(f"  {d}" for d in found)
        lines.append("")
    for log_dir in dirs:
        meta = ensemble.log_dir_props.get(log_dir)
        if meta is not None:
            sorted_props = ", ".join(f"{k}={v}" for k, v in sorted(meta.to_properties().items()))
            lines.append(f"Found metadata in {log_dir}: {{{sorted_props}}}")
            if meta.version is MetaPropertiesVersion.V0:
                problems.append(
                    f"{meta_properties_path(log_dir)} is formatted for legacy (ZooKeeper) mode, but the "
                    "configuration is for KRaft mode."
                )
            elif meta.cluster_id is None:
                lines.append("  no cluster.id yet: the node learns it from the metadata log (KIP-1262)")
        elif log_dir in ensemble.error_log_dirs:
            reason = ensemble.error_log_dirs[log_dir]
            if reason.endswith("is not a directory"):
                problems.append(reason)
            else:
                problems.append(f"Error loading {meta_properties_path(log_dir)}: {reason}")
        elif log_dir not in existing_dirs:
            lines.append(f"{log_dir} does not exist: it is created and written at the first start")
        else:
            lines.append(f"{log_dir} is not formatted: meta.properties V2 is written at the first start")
    if logged_cluster_id is not None:
        lines.append(f"Found cluster id {logged_cluster_id} in the metadata log {metadata_log_location}")
    lines.append("")
    try:
        ensemble.verify()
    except MetaPropertiesError as exc:
        problems.append(str(exc))
    try:
        check_logged_cluster_id(ensemble, logged_cluster_id, metadata_log_location)
    except MetaPropertiesError as exc:
        problems.append(str(exc))
    return StorageInfo(tuple(lines), tuple(problems))
