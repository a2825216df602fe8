"""ControllerResult: what a controller operation wants written, and what it answers.

Rule (Kafka ``ControllerResult``, ``ControllerWriteOperation`` doc): a manager's ``generate``-style
method reads state and returns a ``ControllerResult`` without changing anything; the records only take
effect when they are replayed. ``is_atomic`` says the records must land in one batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pykraft.metadata.records import ApiMessageAndVersion

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    records: list[ApiMessageAndVersion] = field(default_factory=list)
    response: T = None  # type: ignore[assignment]
    is_atomic: bool = True
