"""Waiting with a timeout without losing a cancellation.

Python 3.11's ``asyncio.wait_for`` swallows a cancellation that arrives in the same loop iteration as
the awaited thing completing (CPython gh-86296, fixed in 3.12): the caller's ``task.cancel()`` is lost
and a ``while True`` loop around it never ends. That is how ``Node.stop()`` hung when a controller
write had just woken the raft driver. ``asyncio.timeout`` counts cancellations (``Task.uncancel``) and
re-raises an outside one, so every timed wait in the shell goes through here;
tests/test_architecture.py forbids ``asyncio.wait_for`` in src.

A timed wait inside a request (a long-polling Fetch, an acks=all produce, a controller write, a group
join) is the request parking, as a Kafka request parks in a purgatory: it first gives its
``queued.max.requests`` slot back (``park``), so parked requests never hold the bound that would let
the request they wait for in.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Set by io/server.py in each connection's task: gives that connection's request slot back.
_PARK_HOOK: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "pykraft_park_hook", default=None
)


def set_park_hook(hook: Callable[[], None] | None) -> None:
    """The current task (a connection's) parks its request with ``hook``."""
    _PARK_HOOK.set(hook)


def park() -> None:
    """The request this task serves is about to wait for something else to happen: its slot goes back
    (idempotent; nothing outside a request)."""
    hook = _PARK_HOOK.get()
    if hook is not None:
        hook()


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` passes; True if it was set."""
    if event.is_set():
        return True
    park()
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def wait_shielded(fut: asyncio.Future[T], timeout_s: float) -> bool:
    """Wait for ``fut`` for up to ``timeout_s`` without cancelling it on timeout (shared futures that
    other waiters still need); True if it is done. Its outcome is the caller's to read."""
    if fut.done():
        return True
    park()
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.shield(fut)
    except TimeoutError:
        return False
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if fut.cancelled() and task is not None and not task.cancelling():
            return True  # the future was cancelled, not us
        raise
    except Exception:  # the future failed: done all the same; the caller reads fut.exception()
        return True
    return True
