"""One stage of an operation as the engine keeps it: a typed, immutable record stored as the same JSON object."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from instantstart.operations.models import OpStatus

_KEYS = ("name", "status", "attempts", "startedAt", "finishedAt", "message", "outputs", "attemptStartedAt", "runner")


@dataclass(frozen=True)
class StageRecord:
    """A stage's status, attempts, times (ISO strings, as stored), last message and outputs, and when and by which
    runner (its worker id) the latest attempt began: with replicas, who resumed a stage. Immutable: a change
    is a new record (`replace`), so a picture of the stages handed to a save never changes underneath it.
    `extra` keeps keys this version does not know, so a stored stage reads and writes back unchanged."""

    name: str
    status: OpStatus = OpStatus.PENDING
    attempts: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    message: str = ""
    outputs: Mapping[str, Any] = field(default_factory=dict)
    attempt_started_at: str | None = None
    runner: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> StageRecord:
        """The record of a stored stage object (the operation row's `stages` JSON)."""
        return cls(
            name=stored["name"],
            status=OpStatus(stored["status"]),
            attempts=int(stored.get("attempts") or 0),
            started_at=stored.get("startedAt"),
            finished_at=stored.get("finishedAt"),
            message=stored.get("message") or "",
            outputs=dict(stored.get("outputs") or {}),
            attempt_started_at=stored.get("attemptStartedAt"),
            runner=stored.get("runner"),
            extra={k: v for k, v in stored.items() if k not in _KEYS},
        )

    def to_dict(self) -> dict[str, Any]:
        """The stored stage object (camelCase keys, the status as its string; the latest attempt's start and runner
        only once an attempt began, so a record from before they existed writes back unchanged)."""
        attempt = {"attemptStartedAt": self.attempt_started_at, "runner": self.runner} if self.runner else {}
        return {
            **self.extra,
            "name": self.name,
            "status": self.status.value,
            "attempts": self.attempts,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "message": self.message,
            "outputs": dict(self.outputs),
            **attempt,
        }

    def replace(self, **changes: Any) -> StageRecord:
        """A copy with `changes` (field names) applied; this record is unchanged."""
        return dataclasses.replace(self, **changes)

    @property
    def error(self) -> dict[str, Any]:
        """The error a failed stage recorded in its outputs (empty when none)."""
        return dict(self.outputs.get("error") or {})
