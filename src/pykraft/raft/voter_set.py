"""KIP-853: the voter set and kraft.version as the log says (Kafka's KRaftControlRecordStateMachine).

The voter set in effect is the one in the *latest* VotersRecord of the log, committed or not (Kafka
uses uncommitted ones too: a change counts from the moment it is appended, which is what makes one
change at a time safe — any two majorities of sets differing by one voter overlap). Before the first
VotersRecord the set is the "base": the static ``controller.quorum.voters`` (kraft.version 0) or the
set a bootstrap snapshot / first-voter rule gives (kraft.version 1). Truncating the log drops the
entries at or past the truncation offset; installing a snapshot replaces everything with the
snapshot's set. Pure: record values in, voter sets out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from pykraft.protocol.records import control_type_of, decode_records, scan_batches
from pykraft.raft.control import (
    CONTROL_TYPE_KRAFT_VERSION,
    CONTROL_TYPE_KRAFT_VOTERS,
    Voter,
    decode_kraft_version_record,
    decode_voters_record,
)

NO_DIRECTORY_ID = bytes(16)


@dataclass(frozen=True, slots=True)
class VoterSet:
    """VoterSet.java: voters by id (sorted)."""

    voters: tuple[Voter, ...]
    # Computed once: the raft core asks for the ids on every message.
    ids: frozenset[int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", frozenset(v.voter_id for v in self.voters))

    @staticmethod
    def of(voters: list[Voter] | tuple[Voter, ...]) -> VoterSet:
        return VoterSet(tuple(sorted(voters, key=lambda v: v.voter_id)))

    @staticmethod
    def static(voter_ids: frozenset[int]) -> VoterSet:
        """``controller.quorum.voters``: ids only, no directory ids (kraft.version 0)."""
        return VoterSet.of([Voter(i, NO_DIRECTORY_ID) for i in voter_ids])

    def get(self, voter_id: int) -> Voter | None:
        return next((v for v in self.voters if v.voter_id == voter_id), None)

    def with_voter(self, voter: Voter) -> VoterSet:
        assert voter.voter_id not in self.ids
        return VoterSet.of([*self.voters, voter])

    def without_voter(self, voter_id: int) -> VoterSet:
        return VoterSet.of([v for v in self.voters if v.voter_id != voter_id])


@dataclass(frozen=True, slots=True)
class ControlEntry:
    """A KRaftVersionRecord or VotersRecord at ``offset`` of the log."""

    offset: int
    kraft_version: int | None = None
    voters: VoterSet | None = None


def scan_kraft_control_records(data: bytes | memoryview) -> Iterator[ControlEntry]:
    """The KRaftVersion / Voters records in whole batches ``data`` (as Fetch or a log read returns)."""
    for pos, header in scan_batches(data):
        if not header.is_control:
            continue
        records = decode_records(memoryview(data)[pos : pos + header.size_in_bytes])
        for index, record in enumerate(records):
            control_type = control_type_of(record.key)
            offset = header.base_offset + index
            if control_type == CONTROL_TYPE_KRAFT_VOTERS:
                yield ControlEntry(offset, voters=VoterSet.of(decode_voters_record(record.value or b"")))
            elif control_type == CONTROL_TYPE_KRAFT_VERSION:
                yield ControlEntry(offset, kraft_version=decode_kraft_version_record(record.value or b""))


class VoterSetHistory:
    """The voter set and kraft.version at every offset of the log (VoterSetHistory + LogHistory)."""

    def __init__(self, base_voters: VoterSet, base_kraft_version: int) -> None:
        self._base_voters = base_voters
        self._base_kraft_version = base_kraft_version
        self._voters: list[tuple[int, VoterSet]] = []
        self._kraft_versions: list[tuple[int, int]] = []

    def add(self, entry: ControlEntry) -> None:
        if entry.voters is not None:
            assert not self._voters or self._voters[-1][0] < entry.offset
            self._voters.append((entry.offset, entry.voters))
        if entry.kraft_version is not None:
            self._kraft_versions.append((entry.offset, entry.kraft_version))

    def voter_entries(self) -> list[tuple[int, VoterSet]]:
        """The VotersRecords of the log: ``(offset, voter set)`` in offset order."""
        return list(self._voters)

    def latest(self) -> VoterSet:
        return self._voters[-1][1] if self._voters else self._base_voters

    def latest_offset(self) -> int:
        """The offset of the latest VotersRecord; -1 when the set is the base one (not in the log)."""
        return self._voters[-1][0] if self._voters else -1

    def kraft_version(self) -> int:
        return self._kraft_versions[-1][1] if self._kraft_versions else self._base_kraft_version

    def voters_before(self, offset: int) -> VoterSet:
        """The voter set of the log below ``offset`` (what a snapshot ending there holds)."""
        found = self._base_voters
        for entry_offset, voters in self._voters:
            if entry_offset >= offset:
                break
            found = voters
        return found

    def kraft_version_before(self, offset: int) -> int:
        found = self._base_kraft_version
        for entry_offset, version in self._kraft_versions:
            if entry_offset >= offset:
                break
            found = version
        return found

    def truncate_to(self, offset: int) -> None:
        """The log lost everything at or past ``offset``."""
        self._voters = [e for e in self._voters if e[0] < offset]
        self._kraft_versions = [e for e in self._kraft_versions if e[0] < offset]

    def reset_to_snapshot(self, offset: int, voters: VoterSet | None, kraft_version: int | None) -> None:
        """The log restarts at a snapshot ending at ``offset``: its voter set and kraft.version (or,
        when it carries none, what the log said below ``offset``) become the base."""
        self._base_voters = voters if voters is not None else self.voters_before(offset)
        self._base_kraft_version = (
            kraft_version if kraft_version is not None else self.kraft_version_before(offset)
        )
        self._voters = []
        self._kraft_versions = []
