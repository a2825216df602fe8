"""``pykraft storage format`` / ``info`` semantics (kafka-facts.md §8.15 FormatterTest, §8.16 StorageToolTest,
§8.17 item 161: formatting without --cluster-id needs a metadata.version with the ClusterIdRecord)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from pykraft.core.uuid import uuid_from_str
from pykraft.metadata.records import MetadataVersion
from pykraft.storage.ensemble import MetaPropertiesEnsemble
from pykraft.storage.formatter import (
    BOOTSTRAP_RELEASE,
    CLUSTER_ID_RECORD_MIN_LEVEL,
    RELEASE_VERSIONS,
    FormatRequest,
    FormatterError,
    plan_format,
)
from pykraft.storage.info import describe_storage
from pykraft.storage.meta_properties import MetaProperties, MetaPropertiesVersion

V0, V1, V2 = MetaPropertiesVersion.V0, MetaPropertiesVersion.V1, MetaPropertiesVersion.V2
ID_A = uuid_from_str("zd2vLVrZQlCLJj8-k7A10w")

REQUEST = FormatRequest(
    node_id=1,
    process_roles=("broker", "controller"),
    voter_ids=frozenset({1}),
    log_dirs=("/a", "/b"),
    metadata_log_dir="/m",
)


def _empty(*dirs: str) -> MetaPropertiesEnsemble:
    return MetaPropertiesEnsemble(frozenset(dirs), {}, {}, "/m")


def _plan(ensemble: MetaPropertiesEnsemble | None = None, **changes: object):  # type: ignore[no-untyped-def]
    request = dataclasses.replace(REQUEST, **changes)  # type: ignore[arg-type]
    return plan_format(request, ensemble or _empty("/a", "/b", "/m"), random.Random(3))


def test_release_table_mirrors_the_metadata_versions_pykraft_knows() -> None:
    levels = {v for k, v in vars(MetadataVersion).items() if k.startswith("IBP_")}
    assert set(RELEASE_VERSIONS.values()) <= levels
    assert RELEASE_VERSIONS[BOOTSTRAP_RELEASE] == MetadataVersion.LATEST_PRODUCTION
    assert CLUSTER_ID_RECORD_MIN_LEVEL == MetadataVersion.IBP_3_6_IV1  # metadata transactions


# --- 147/151: what format writes ----------------------------------------------------------------


@pytest.mark.parametrize("dirs", [("/m",), ("/a", "/m"), ("/a", "/b", "/m")])
def test_format__1_to_3_dirs__v2_with_node_cluster_and_unique_directory_ids(dirs: tuple[str, ...]) -> None:
    plan = _plan(_empty(*dirs), cluster_id="my@cluster@id")
    assert sorted(plan.writes) == list(dirs)
    assert {(m.version, m.node_id, m.cluster_id) for m in plan.writes.values()} == {(V2, 1, "my@cluster@id")}
    assert len({m.directory_id for m in plan.writes.values()}) == len(dirs)
    assert f"Formatting metadata directory /m with metadata.version {BOOTSTRAP_RELEASE}." in plan.lines
    if "/a" in dirs:
        assert f"Formatting data directory /a with metadata.version {BOOTSTRAP_RELEASE}." in plan.lines


def test_format__without_cluster_id__v2_without_cluster_id() -> None:
    plan = _plan()
    assert {m.cluster_id for m in plan.writes.values()} == {None}
    assert {m.version for m in plan.writes.values()} == {V2}


# --- 148/155: already formatted -----------------------------------------------------------------


def test_format__already_formatted() -> None:
    formatted = MetaPropertiesEnsemble(frozenset({"/a"}), {}, {"/m": MetaProperties(V2, "C", 1, ID_A)}, "/m")
    with pytest.raises(FormatterError) as info:
        _plan(formatted, cluster_id="C")
    assert str(info.value) == (
        "Log directory /m is already formatted. Use --ignore-formatted to ignore this directory and format "
        "the others."
    )
    plan = _plan(formatted, cluster_id="C", ignore_formatted=True)
    assert list(plan.writes) == ["/a"]
    everything = MetaPropertiesEnsemble(frozenset(), {}, {"/m": MetaProperties(V2, "C", 1, ID_A)}, "/m")
    assert _plan(everything, ignore_formatted=True).lines == (
        "All of the log directories are already formatted.",
    )


def test_format__ignore_formatted_never_mixes_clusters_or_nodes() -> None:
    formatted = MetaPropertiesEnsemble(frozenset({"/a"}), {}, {"/m": MetaProperties(V2, "C", 1, ID_A)}, "/m")
    with pytest.raises(FormatterError, match="Expected D .*but read C"):
        _plan(formatted, cluster_id="D", ignore_formatted=True)
    with pytest.raises(FormatterError, match="Stored node id 1 .* doesn't match the requested value 2"):
        _plan(formatted, node_id=2, ignore_formatted=True)


def test_format__unreadable_dirs_skipped__none_left_is_an_error() -> None:
    some = MetaPropertiesEnsemble(frozenset({"/a"}), {"/b": "Permission denied"}, {}, "/m")
    plan = _plan(some)
    assert list(plan.writes) == ["/a"]
    assert plan.lines[0] == "Skipping /b: cannot read /b/meta.properties: Permission denied"
    none = MetaPropertiesEnsemble(frozenset(), {"/a": "Permission denied"}, {}, "/m")
    with pytest.raises(FormatterError, match="^No available log directories to format.$"):
        _plan(none)


# --- 150/156 and 161: release versions and the ClusterIdRecord ------------------------------------


def test_format__without_cluster_id__needs_a_metadata_version_with_the_cluster_id_record() -> None:
    with pytest.raises(
        FormatterError, match=r"^--release-version: metadata.version 3.4-IV0 does not support"
    ):
        _plan(release_version="3.4-IV0")
    with pytest.raises(FormatterError, match="pass --cluster-id"):
        _plan(release_version="3.3")


def test_format__release_versions() -> None:
    assert _plan(release_version="3.9").lines[-1].endswith("with metadata.version 3.9.")
    with pytest.raises(FormatterError, match="^--release-version: unknown metadata.version '9.9'"):
        _plan(release_version="9.9")
    # With a cluster id an old version passes the KIP-1262 check, but pykraft bootstraps one level only.
    with pytest.raises(FormatterError, match=f"bootstraps metadata.version {BOOTSTRAP_RELEASE} only"):
        _plan(release_version="3.4-IV0", cluster_id="C")


def test_format__bad_cluster_id_and_config() -> None:
    with pytest.raises(FormatterError, match="^--cluster-id: the cluster id must not be empty"):
        _plan(cluster_id="")
    with pytest.raises(FormatterError, match="^log.dirs: no directories"):
        _plan(log_dirs=())


# --- 157: --standalone ----------------------------------------------------------------------------


def test_format__standalone() -> None:
    assert _plan(standalone=True).writes
    with pytest.raises(FormatterError, match="^--standalone: node 1 has no controller role"):
        _plan(standalone=True, process_roles=("broker",), voter_ids=frozenset({2}))
    with pytest.raises(FormatterError, match=r"^--standalone: controller.quorum.voters also lists \[2, 3\]"):
        _plan(standalone=True, voter_ids=frozenset({1, 2, 3}))
    assert _plan(process_roles=("broker",), voter_ids=frozenset({2})).writes  # brokers format fine


# --- 154: info ------------------------------------------------------------------------------------


def test_info__no_dirs() -> None:
    info = describe_storage(MetaPropertiesEnsemble(), set(), None, "/m/__cluster_metadata-0")
    assert info.text() == "No directories specified.\n" and info.exit_code == 0


def test_info__unformatted_and_missing_dirs_are_not_problems_any_more() -> None:
    info = describe_storage(_empty("/a", "/m"), {"/a"}, None, "/m/__cluster_metadata-0")
    assert info.exit_code == 0
    assert info.lines[:3] == ("Found log directory:", "  /a", "")
    assert "/a is not formatted: meta.properties V2 is written at the first start" in info.lines
    assert "/m does not exist: it is created and written at the first start" in info.lines


def test_info__metadata_and_problems() -> None:
    ensemble = MetaPropertiesEnsemble(
        frozenset(),
        {"/x": "/x is not a directory", "/y": "Unknown meta.properties version number 7"},
        {"/a": MetaProperties(V2, "C", 1, ID_A), "/m": MetaProperties(V0, "D", 1)},
        "/m",
    )
    info = describe_storage(ensemble, {"/a", "/m", "/y"}, "E", "/m/__cluster_metadata-0")
    text = info.text()
    assert info.exit_code == 1
    assert "Found log directories:\n  /a\n  /m\n  /y\n" in text
    assert (
        "Found metadata in /a: {cluster.id=C, directory.id=zd2vLVrZQlCLJj8-k7A10w, node.id=1, version=2}"
        in text
    )
    assert "Found cluster id E in the metadata log /m/__cluster_metadata-0" in text
    assert "Found problems:\n" in text
    assert "  /x is not a directory\n" in text
    assert "  Error loading /y/meta.properties: Unknown meta.properties version number 7\n" in text
    assert "  /m/meta.properties is formatted for legacy (ZooKeeper) mode" in text
    assert "Invalid cluster.id in: /m/meta.properties. Expected C" in text
    assert "belongs to cluster E, but read C" in text
