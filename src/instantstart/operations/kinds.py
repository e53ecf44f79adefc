"""Operation kinds: the typed params each kind takes, the ordered stages it runs, its stage mirror."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy.orm import Session

from instantstart.operations.stage import StageContext

StageFn = Callable[[StageContext[Any]], Awaitable[dict[str, Any] | None]]
StageMirror = Callable[[Session, str | None, list[dict[str, Any]]], None]
"""Called inside the same transaction as every change of an operation's stages (target, stages), so a view
kept elsewhere (the cluster row's pipeline stages) can never disagree with the operation."""


class OpenParams(BaseModel):
    """Params of a kind that declares no model: any JSON object (test-only plugin kinds)."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class StageSpec:
    """One stage: its function, attempt limit, per-attempt timeout and backoff."""

    name: str
    fn: StageFn
    max_attempts: int = 5
    timeout_seconds: float = 1800.0
    backoff_seconds: float = 2.0
    backoff_max_seconds: float = 60.0
    alongside_previous: bool = False
    """Runs beside the stage before it instead of after it: it starts once that stage calls
    `StageContext.waiting()` (its own work done, only a wait left) or succeeds, so the two waits overlap. Neither
    may read the other's outputs. A failure in one never interrupts the other: the operation ends when both
    have, FAILED with the first failure in stage order (or CANCELLED), and operation_retry reruns only the
    stages that did not succeed. If the earlier stage fails before it waits, this one stays PENDING."""

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before attempt number `attempt + 1` (exponential, capped)."""
        return float(min(self.backoff_seconds * (2 ** max(attempt - 1, 0)), self.backoff_max_seconds))


@dataclass(frozen=True)
class OperationKind:
    """A kind of operation: its name, params model, stages in order, result builder and stage mirror."""

    name: str
    stages: tuple[StageSpec, ...]
    params: type[BaseModel] = OpenParams
    description: str = ""
    result_from: Callable[[dict[str, dict[str, Any]]], dict[str, Any]] | None = None
    mirror: StageMirror | None = None
    continue_after_failure: bool = False
    """Stages are independent units (one per feature, say): a failed stage is recorded and the later stages
    still run (each sees the failed ones in StageContext.failed); the operation then ends FAILED with the
    first failure, and operation_retry reruns only the stages that did not succeed."""

    def __post_init__(self) -> None:
        if self.stages and self.stages[0].alongside_previous:
            raise ValueError(f"operation kind {self.name}: its first stage {self.stages[0].name} has no stage to "
                             "run alongside")
        if self.continue_after_failure and any(s.alongside_previous for s in self.stages):
            raise ValueError(f"operation kind {self.name}: stages alongside others are not supported in a kind "
                             "that continues after a failure")

    def together(self, index: int) -> list[int]:
        """The stage at `index` and the stages declared alongside it (consecutive), as indexes."""
        group = [index]
        while group[-1] + 1 < len(self.stages) and self.stages[group[-1] + 1].alongside_previous:
            group.append(group[-1] + 1)
        return group


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

    def mirror_of(self, name: str) -> StageMirror | None:
        """The stage mirror of kind `name`, if it has one."""
        kind = self.kinds.get(name)
        return kind.mirror if kind else None


KINDS = KindRegistry()
