"""meta.properties text and MetaProperties (kafka-facts.md §8.14 items 142-145; MetaPropertiesTest,
MetaPropertiesVersionTest) and the Java-properties codec under it."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.core.uuid import uuid_from_str
from pykraft.storage.java_properties import PropertiesSyntaxError, load_properties, store_properties
from pykraft.storage.meta_properties import (
    MetaProperties,
    MetaPropertiesError,
    MetaPropertiesVersion,
    format_meta_properties,
    is_reserved_directory_id,
    parse_meta_properties,
)

V0, V1, V2 = MetaPropertiesVersion.V0, MetaPropertiesVersion.V1, MetaPropertiesVersion.V2
DIR_ID = uuid_from_str("zd2vLVrZQlCLJj8-k7A10w")

# A file as Kafka's PropertiesUtils.writePropertiesFile (Properties.store) writes it.
KAFKA_WRITTEN = """#
#Tue Mar 12 10:00:00 UTC 2024
node.id=1
directory.id=zd2vLVrZQlCLJj8-k7A10w
version=1
cluster.id=MkU3OEVBNTcwNTJENDM2Qk
"""


def _round_trip(meta: MetaProperties) -> MetaProperties:
    return parse_meta_properties(format_meta_properties(meta))


# --- 142: V0 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "meta, text",
    [
        (MetaProperties(V0), "MetaProperties(version=0)"),
        (MetaProperties(V0, cluster_id="fooBar"), "MetaProperties(version=0, clusterId=fooBar)"),
        (MetaProperties(V0, node_id=42), "MetaProperties(version=0, nodeId=42)"),
        (MetaProperties(V0, "fooBar", 42), "MetaProperties(version=0, clusterId=fooBar, nodeId=42)"),
        (
            MetaProperties(V0, "fooBar", 42, DIR_ID),
            "MetaProperties(version=0, clusterId=fooBar, nodeId=42, directoryId=zd2vLVrZQlCLJj8-k7A10w)",
        ),
    ],
)
def test_v0__round_trips_and_to_string(meta: MetaProperties, text: str) -> None:
    assert _round_trip(meta) == meta
    assert str(meta) == text
    props = meta.to_properties()
    assert props["version"] == "0"
    assert "node.id" not in props
    if meta.node_id is not None:
        assert props["broker.id"] == str(meta.node_id)


def test_v0__version_absent_means_0_and_broker_id_is_the_node() -> None:
    assert parse_meta_properties("broker.id=3\ncluster.id=abc\n") == MetaProperties(V0, "abc", 3)


# --- 143/144: V1 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("directory_id", [None, DIR_ID])
@pytest.mark.parametrize("cluster_id", ["fooBar", "my@cluster@id"])
def test_v1__round_trips_with_node_id_written_as_node_id(
    directory_id: uuid.UUID | None, cluster_id: str
) -> None:
    meta = MetaProperties(V1, cluster_id, 1, directory_id)
    assert _round_trip(meta) == meta
    assert meta.to_properties()["node.id"] == "1"
    assert "broker.id" not in meta.to_properties()


def test_v1__reads_kafkas_own_file() -> None:
    assert parse_meta_properties(KAFKA_WRITTEN) == MetaProperties(V1, "MkU3OEVBNTcwNTJENDM2Qk", 1, DIR_ID)


def test_v1__without_cluster_id_or_node_id__kafkas_messages() -> None:
    with pytest.raises(MetaPropertiesError, match=r"^cluster\.id was not found\.$"):
        MetaProperties(V1, node_id=1)
    with pytest.raises(MetaPropertiesError, match=r"^node\.id was not found\.$"):
        MetaProperties(V1, cluster_id="abc")
    with pytest.raises(MetaPropertiesError, match=r"^cluster\.id was not found\.$"):
        parse_meta_properties("version=1\nnode.id=1\n")
    with pytest.raises(MetaPropertiesError, match=r"^node\.id was not found\.$"):
        parse_meta_properties("version=1\ncluster.id=abc\n")


# --- V2 (KIP-1262) ------------------------------------------------------------------------------


def test_v2__cluster_id_optional_node_id_required() -> None:
    meta = MetaProperties(V2, None, 7, DIR_ID)
    assert _round_trip(meta) == meta
    assert meta.to_properties() == {"version": "2", "node.id": "7", "directory.id": "zd2vLVrZQlCLJj8-k7A10w"}
    assert _round_trip(meta.with_cluster_id("abc")).cluster_id == "abc"
    with pytest.raises(MetaPropertiesError, match=r"^node\.id was not found\.$"):
        parse_meta_properties("version=2\ncluster.id=abc\n")


def test_bad_values__one_line_naming_the_key() -> None:
    with pytest.raises(MetaPropertiesError, match="node.id as a base-10 number: 'one'"):
        parse_meta_properties("version=1\ncluster.id=a\nnode.id=one\n")
    with pytest.raises(MetaPropertiesError, match="directory.id: 'nope' is not a Kafka Uuid"):
        parse_meta_properties("version=2\nnode.id=1\ndirectory.id=nope\n")


# --- 145: versions ------------------------------------------------------------------------------


def test_version__parsing_and_properties() -> None:
    assert [MetaPropertiesVersion.from_number_string(s) for s in ("0", "1", "2", " 1 ")] == [V0, V1, V2, V1]
    assert [v.number_string for v in (V0, V1, V2)] == ["0", "1", "2"]
    with pytest.raises(MetaPropertiesError, match="^Unknown meta.properties version number 3$"):
        MetaPropertiesVersion.from_number_string("3")
    with pytest.raises(MetaPropertiesError, match="^Unknown meta.properties version number -1$"):
        MetaPropertiesVersion.from_number(-1)
    with pytest.raises(MetaPropertiesError, match="^Invalid meta.properties version string 'orange'$"):
        MetaPropertiesVersion.from_number_string("orange")
    assert [v.has_broker_id for v in (V0, V1, V2)] == [True, False, False]
    assert [v.always_has_node_id for v in (V0, V1, V2)] == [False, True, True]
    assert [v.always_has_cluster_id for v in (V0, V1, V2)] == [False, True, False]


def test_reserved_directory_ids() -> None:
    assert is_reserved_directory_id(uuid.UUID(int=0))
    assert is_reserved_directory_id(uuid.UUID(int=2))
    assert is_reserved_directory_id(uuid.UUID(int=99))
    assert not is_reserved_directory_id(uuid.UUID(int=100))
    assert not is_reserved_directory_id(uuid.UUID(int=1 << 64))


# --- the Java-properties codec ------------------------------------------------------------------


def test_load__java_syntax() -> None:
    text = (
        "  # comment\n! also a comment\n\n"
        "a = 1\n"
        "b:2\n"
        "c 3\n"
        "d=x\\\n    y\n"
        "e=\\u0041\\t\\=\\:\\\\\n"
        "f\\ g=h\n"
        "empty=\n"
        "k=first\nk=second\r\n"
    )
    assert load_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "xy",
        "e": "A\t=:\\",
        "f g": "h",
        "empty": "",
        "k": "second",
    }


def test_load__bad_unicode_escape() -> None:
    with pytest.raises(PropertiesSyntaxError, match="Malformed"):
        load_properties("a=\\u00zz\n")


def test_store__escapes_like_java() -> None:
    text = store_properties({"cluster.id": "a=b:c#d!e f", "k": " lead\u00e9\U0001f600"}, comments=())
    assert text == "cluster.id=a\\=b\\:c\\#d\\!e f\nk=\\ lead\\u00E9\\uD83D\\uDE00\n"
    assert text.isascii()


@given(st.dictionaries(st.text(min_size=1), st.text()))
def test_store_then_load__round_trips_any_strings(props: dict[str, str]) -> None:
    assert load_properties(store_properties(props)) == props


@given(st.text())
def test_load__any_text_parses_or_raises_syntax_error(text: str) -> None:
    try:
        load_properties(text)
    except PropertiesSyntaxError:
        pass


@given(
    st.sampled_from([V0, V1, V2]),
    st.text(min_size=1),
    st.integers(min_value=0, max_value=2**31 - 1),
    st.uuids(),
)
def test_meta_properties__round_trip_any_cluster_id(
    version: MetaPropertiesVersion, cluster_id: str, node_id: int, directory_id: uuid.UUID
) -> None:
    meta = MetaProperties(version, cluster_id, node_id, directory_id)
    assert _round_trip(meta) == meta
