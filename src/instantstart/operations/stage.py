"""What a stage function is handed: the operation's typed params, earlier stages' outputs, progress reporting."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

AppT = TypeVar("AppT")
P = TypeVar("P", bound=BaseModel)


@dataclass
class StageContext(Generic[AppT]):
    """One attempt of one stage. `params` is the operation's validated params model (see OperationKind.params);
    `raw_params` the stored dict; `failed` the earlier stages of this run that failed (name → error), only
    ever non-empty for kinds that continue after a failure. The engine is generic over the application object
    it hands on (`app`), so it never imports the layers above it."""

    operation_id: str
    kind: str
    target: str | None
    params: BaseModel
    raw_params: dict[str, Any]
    outputs: dict[str, dict[str, Any]]
    stage: str
    attempt: int
    app: AppT
    _progress: Callable[[str], Awaitable[None]] = field(repr=False)
    failed: dict[str, dict[str, Any]] = field(default_factory=dict)
    _waiting: Callable[[], None] | None = field(default=None, repr=False)

    def params_as(self, model: type[P]) -> P:
        """The params as the kind's declared model (typed access for the stage function)."""
        if not isinstance(self.params, model):
            raise TypeError(f"operation {self.operation_id} ({self.kind}) params are {type(self.params).__name__}, "
                            f"not {model.__name__}: register the kind with params={model.__name__}")
        return self.params

    async def progress(self, message: str) -> None:
        """Record a human-readable progress message on the running stage (shown by every face)."""
        await self._progress(message)

    def waiting(self) -> None:
        """Say that this stage's own work is done and only a wait is left: the stages declared to run alongside
        it (StageSpec.alongside_previous) start now. Cheap and idempotent; a no-op when none are."""
        if self._waiting is not None:
            self._waiting()
