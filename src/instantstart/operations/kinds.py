"""Operation kinds: the ordered stages each kind runs, and the errors a stage may raise."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from instantstart.operations.runner import StageContext

StageFn = Callable[["StageContext"], Awaitable[dict[str, Any] | None]]


class TemporaryError(Exception):
    """A stage failed in a way that may pass: retried with backoff up to the stage's attempt limit."""

    def __init__(self, message: str, *, code: str = "PROVIDER_ERROR", hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.hint = hint


class PermanentError(Exception):
    """A stage failed for good: the operation fails with this code, message and hint."""

    def __init__(self, message: str, *, code: str = "FAILED", hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.hint = hint


@dataclass(frozen=True)
class StageSpec:
    """One stage: its function, attempt limit, per-attempt timeout and backoff."""

    name: str
    fn: StageFn
    max_attempts: int = 5
    timeout_seconds: float = 1800.0
    backoff_seconds: float = 2.0
    backoff_max_seconds: float = 60.0

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before attempt number `attempt + 1` (exponential, capped)."""
        return float(min(self.backoff_seconds * (2 ** max(attempt - 1, 0)), self.backoff_max_seconds))


@dataclass(frozen=True)
class OperationKind:
    """A kind of operation: its name, its stages in order, and how its result is built."""

    name: str
    stages: tuple[StageSpec, ...]
    description: str = ""
    result_from: Callable[[dict[str, dict[str, Any]]], dict[str, Any]] | None = None


@dataclass
class KindRegistry:
    """Every operation kind the runner can drive."""

    kinds: dict[str, OperationKind] = field(default_factory=dict)

    def register(self, kind: OperationKind) -> OperationKind:
        """Add a kind (names are unique)."""
        if kind.name in self.kinds:
            raise ValueError(f"operation kind {kind.name} registered twice")
        self.kinds[kind.name] = kind
        return kind

    def get(self, name: str) -> OperationKind | None:
        """The kind named `name`."""
        return self.kinds.get(name)


KINDS = KindRegistry()
