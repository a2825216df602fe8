"""The cyclic garbage collector around a broker's bulk load at start (issue 29).

A broker opening its partitions at start allocates millions of objects that live as long as the process
(logs, stores, producer states, replication state). CPython's cyclic collector, left on, walks every one
of them again at each full collection on the way and after: at 60,000 partitions a restart served after
65 s with it and 33 s with it paused. So the load runs with the collector paused, and what it built is
then frozen (``gc.freeze``: moved to the permanent generation, which later collections skip), as
CPython's documentation advises for a process that loads and then serves. Reference counting still
frees what the load dropped; a cycle dropped during the load is kept, once."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collection_paused(*, freeze: bool = True) -> Iterator[None]:
    """Run the body with the cyclic collector off, then (``freeze``) freeze what is alive, and restore
    it as it was (nested or concurrent loads are fine). The metadata log's load does not freeze:
    bench/metadata_restart.py measured the collector at half of a 1M-record restart, and what the load
    builds is the image, which later records replace."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()
