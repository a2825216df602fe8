"""``FileSegmentStore``: a partition directory of Kafka segment files (the shell side of the log).

``<dir>/<20-digit base offset>.log``, ``.index`` and ``.timeindex``, plus small checkpoint files. Appends go straight
to the OS with ``os.write`` on an ``O_APPEND`` descriptor (no Python buffering, so a ``kill -9``
loses nothing appended); reads are ``os.pread``; ``flush`` is ``os.fsync`` (and a directory fsync the
first time, so a new segment's name survives a crash too).
"""

from __future__ import annotations

import os

from pykraft.io.descriptor_cache import DescriptorCache
from pykraft.log.store import (
    CLEANED,
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    SEGMENT_NAME_DIGITS,
    SWAP,
    SWAP_SUFFIX,
    BytesLike,
    segment_file_name,
)

# Segment logs a store opened on its own keeps open at once (the metadata log, tools); a node's data
# partitions share one bounded ``DescriptorCache`` instead (log.open.files.max, issue 29).
OPEN_SEGMENTS_MAX = 32
CHECKPOINT_TEMP_SUFFIX = ".tmp"


class DeferredDirSyncs:
    """Directory fsyncs put off while a node closes its logs (issue 29): from ``defer()`` on, the stores
    sharing this object note their dir here instead of syncing it after each file they write, and the
    shell syncs each noted dir once (``take()``) before .kafka_cleanshutdown says all is durable. Until
    then a crash leaves the marker absent and the next start recovers as after any crash."""

    def __init__(self) -> None:
        self._dirs: set[str] | None = None

    def defer(self) -> None:
        self._dirs = set()

    def note(self, directory: str) -> bool:
        """True when ``directory``'s sync is put off (noted); False when it must be synced now."""
        if self._dirs is None:
            return False
        self._dirs.add(directory)  # set.add is atomic: the closing threads share it
        return True

    def take(self) -> set[str]:
        dirs, self._dirs = self._dirs or set(), None
        return dirs


def _write_all(fd: int, data: BytesLike) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _pread_all(fd: int, size: int, position: int) -> bytes:
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class FileSegmentStore:
    """``SegmentStore`` (see ``pykraft.log.store``) over real files in ``partition_dir``."""

    def __init__(
        self,
        partition_dir: str,
        descriptors: DescriptorCache | None = None,
        dir_syncs: DeferredDirSyncs | None = None,
    ) -> None:
        self.partition_dir = partition_dir
        self._dir_syncs = dir_syncs
        # Segment logs are opened on demand through the cache and may be closed by it at any time
        # (another partition needed the room); every use asks it again.
        self._descriptors = descriptors if descriptors is not None else DescriptorCache(OPEN_SEGMENTS_MAX)
        self._owner = id(self)
        # Segments created since the last directory fsync: their names are not durable yet.
        self._dir_unsynced = False
        # Indexes (base offset, suffix) written since their last fsync: flush syncs only these. Index files
        # are never kept open: each write or read opens and closes its own descriptor.
        self._index_unsynced: set[tuple[int, str]] = set()
        self._names: set[str] | None = None
        self._remove_stray_temp_files()

    def _path(self, base_offset: int, suffix: str) -> str:
        return os.path.join(self.partition_dir, segment_file_name(base_offset, suffix))

    def _remove_stray_temp_files(self) -> None:
        # A crash between writing a checkpoint's temp file and renaming it leaves the temp behind. The
        # listing is tried first: a dir that exists (every partition at a restart) costs one call, not
        # makedirs' stat and mkdir as well (issue 29: 100,000 partitions open at start).
        try:
            names = set(os.listdir(self.partition_dir))
        except FileNotFoundError:
            os.makedirs(self.partition_dir, exist_ok=True)
            names = set()
        for name in [name for name in names if name.endswith(CHECKPOINT_TEMP_SUFFIX)]:
            os.unlink(os.path.join(self.partition_dir, name))
            names.discard(name)
        self._names = names

    def _listing(self) -> set[str]:
        """The dir's file names, read once and kept until this store changes them (opening a partition
        lists its dir once, not once per kind of file: issue 29)."""
        if self._names is None:
            self._names = set(os.listdir(self.partition_dir))
        return self._names

    def _fd(self, base_offset: int) -> int:
        fd = self._descriptors.get(self._owner, base_offset)
        if fd is None:
            fd = self._descriptors.open_cached(
                self._owner, base_offset, self._path(base_offset, LOG_SUFFIX), os.O_RDWR | os.O_APPEND
            )
        return fd

    def _open(self, path: str, flags: int) -> int:
        """A descriptor this store closes itself; a shortage frees cached ones first."""
        return self._descriptors.open_transient(path, flags)

    def _fsync_dir(self) -> None:
        if self._dir_syncs is not None and self._dir_syncs.note(self.partition_dir):
            self._dir_unsynced = False
            return
        fd = self._open(self.partition_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dir_unsynced = False

    # --- SegmentStore ----------------------------------------------------------------------------

    def list_segments(self) -> list[int]:
        bases = []
        for name in self._listing():
            stem, dot, ext = name.partition(".")
            if dot and "." + ext == LOG_SUFFIX and len(stem) == SEGMENT_NAME_DIGITS and stem.isdigit():
                bases.append(int(stem))
        return sorted(bases)

    def create_segment(self, base_offset: int) -> None:
        self._names = None
        path = self._path(base_offset, LOG_SUFFIX)
        self._descriptors.open_cached(
            self._owner, base_offset, path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL
        )
        self._dir_unsynced = True

    def append(self, base_offset: int, data: BytesLike) -> None:
        _write_all(self._fd(base_offset), data)

    def read(self, base_offset: int, position: int, size: int) -> bytes:
        data = _pread_all(self._fd(base_offset), size, position)
        self._descriptors.segment_bytes_read += len(data)
        return data

    def segment_size(self, base_offset: int) -> int:
        fd = self._descriptors.get(self._owner, base_offset)
        if fd is None:  # no descriptor needed to know it
            return os.stat(self._path(base_offset, LOG_SUFFIX)).st_size
        return os.fstat(fd).st_size

    def truncate_segment(self, base_offset: int, size: int) -> None:
        fd = self._fd(base_offset)
        assert 0 <= size <= os.fstat(fd).st_size, size
        os.ftruncate(fd, size)

    def delete_segment(self, base_offset: int) -> None:
        self._names = None
        self._descriptors.close(self._owner, base_offset)
        self._forget_unsynced_indexes(base_offset)
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            try:
                os.unlink(self._path(base_offset, suffix))
            except FileNotFoundError:
                pass
        self._fsync_dir()

    def _forget_unsynced_indexes(self, base_offset: int) -> None:
        for suffix in INDEX_SUFFIXES:
            self._index_unsynced.discard((base_offset, suffix))

    def write_index(
        self, base_offset: int, position: int, data: BytesLike, *, suffix: str = INDEX_SUFFIX
    ) -> None:
        assert suffix in INDEX_SUFFIXES, suffix
        self._names = None
        fd = self._open(self._path(base_offset, suffix), os.O_WRONLY | os.O_CREAT)
        try:
            assert position <= os.fstat(fd).st_size, position
            view = memoryview(data).cast("B")
            while view:
                written = os.pwrite(fd, view, position)
                view, position = view[written:], position + written
            os.ftruncate(fd, position)
        finally:
            os.close(fd)
        self._index_unsynced.add((base_offset, suffix))

    def read_index(self, base_offset: int, *, suffix: str = INDEX_SUFFIX) -> bytes | None:
        try:
            fd = self._open(self._path(base_offset, suffix), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            return _pread_all(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)

    def flush(self, base_offset: int) -> None:
        # Through a descriptor of its own, not the cached one: logs are flushed by several threads at a
        # clean shutdown, and another partition's open may close a cached descriptor at any time.
        self._fsync_file(self._path(base_offset, LOG_SUFFIX))
        for suffix in INDEX_SUFFIXES:
            if (base_offset, suffix) in self._index_unsynced:
                self._fsync_file(self._path(base_offset, suffix))
                self._index_unsynced.discard((base_offset, suffix))
        if self._dir_unsynced:
            self._fsync_dir()

    def read_checkpoint(self, name: str) -> bytes | None:
        if name not in self._listing():
            return None
        try:
            fd = self._open(os.path.join(self.partition_dir, name), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            return _pread_all(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)

    def write_checkpoint(self, name: str, data: bytes) -> None:
        """Atomic and durable: temp file, fsync, rename over the old one, fsync the directory."""
        self._names = None
        path = os.path.join(self.partition_dir, name)
        temp_path = path + CHECKPOINT_TEMP_SUFFIX
        fd = self._open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp_path, path)
        self._fsync_dir()

    def list_checkpoints(self, suffix: str) -> list[str]:
        return [name for name in self._listing() if name.endswith(suffix)]

    def delete_checkpoint(self, name: str) -> None:
        self._names = None
        try:
            os.unlink(os.path.join(self.partition_dir, name))
        except FileNotFoundError:
            return
        self._fsync_dir()

    # --- the log cleaner's files (see SegmentStore) ---------------------------------------------------

    def _fsync_file(self, path: str) -> None:
        fd = self._open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def create_cleaned(self, base_offset: int) -> None:
        self._names = None
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            path = self._path(base_offset, suffix + CLEANED_SUFFIX)
            os.close(self._open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))

    def append_cleaned(self, base_offset: int, data: BytesLike) -> None:
        fd = self._open(self._path(base_offset, LOG_SUFFIX + CLEANED_SUFFIX), os.O_WRONLY | os.O_APPEND)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def write_cleaned_index(self, base_offset: int, data: BytesLike, *, suffix: str = INDEX_SUFFIX) -> None:
        assert suffix in INDEX_SUFFIXES, suffix
        fd = self._open(self._path(base_offset, suffix + CLEANED_SUFFIX), os.O_WRONLY | os.O_TRUNC)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def seal_cleaned(self, base_offset: int) -> None:
        self._names = None
        # The indexes first, the log last: a ``.log.swap`` is what says the cleaned segment is whole.
        for suffix in (*INDEX_SUFFIXES, LOG_SUFFIX):
            cleaned = self._path(base_offset, suffix + CLEANED_SUFFIX)
            self._fsync_file(cleaned)
            os.replace(cleaned, self._path(base_offset, suffix + SWAP_SUFFIX))
        self._fsync_dir()

    def install_swap(self, base_offset: int) -> None:
        self._names = None
        self._descriptors.close(self._owner, base_offset)
        self._forget_unsynced_indexes(base_offset)
        for suffix in INDEX_SUFFIXES:
            index_swap = self._path(base_offset, suffix + SWAP_SUFFIX)
            if os.path.exists(index_swap):  # gone when a crash came between the renames
                os.replace(index_swap, self._path(base_offset, suffix))
        os.replace(self._path(base_offset, LOG_SUFFIX + SWAP_SUFFIX), self._path(base_offset, LOG_SUFFIX))
        self._fsync_dir()

    def discard_cleaning(self, base_offset: int) -> None:
        self._names = None
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            for state_suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
                try:
                    os.unlink(self._path(base_offset, suffix + state_suffix))
                except FileNotFoundError:
                    pass
        self._fsync_dir()

    def list_cleaning(self) -> dict[int, str]:
        found: dict[int, str] = {}
        for name in self._listing():
            stem = name.partition(".")[0]
            if len(stem) != SEGMENT_NAME_DIGITS or not stem.isdigit():
                continue
            if name == stem + LOG_SUFFIX + SWAP_SUFFIX:
                found[int(stem)] = SWAP
            elif name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)):
                found.setdefault(int(stem), CLEANED)
        return found

    def close(self) -> None:
        self._descriptors.close_owner(self._owner)
